r"""PES (Bai et al., NeurIPS 2021): the CIFAR-10 / CIFAR-100 runs of its PES_cs.py, and CIFAR-N with their settings.

The string after the colon picks the row, DATASET,NOISE,RATE[,original] or DATASET,LABELS[,original]:
  DATASET   cifar10 | cifar100     synthetic noise, then NOISE,RATE: symmetric,0.2 | symmetric,0.4 | symmetric,0.5
                                   (PES_cs's noisify_multiclass_symmetric: rate / (C - 1) to each other class; the
                                   code's --noise_rate default and its README's PES_cs example 0.5; 0.2 and 0.5 the
                                   paper's Sym-20% / Sym-50% [recalled]; 0.4 our choice: the README's 0.4 is
                                   instance noise) or pairflip,0.45
                                   (noisify_pairflip, i -> i + 1 mod C; the paper's Pairflip-45% [recalled])
  DATASET   cifar10_n | cifar100_n CIFAR-N human labels (noise type 'dataset', dataset_kwargs.noise_key), then LABELS:
                                   cifar10_n aggregate | random1 | random2 | random3 | worst; cifar100_n noisy. The
                                   original runs CIFAR-N with PES-semi (PES_noisylabels.py: PES + MixMatch, whose
                                   rows are pes_semi_paper.py's); these rows take PES_cs's CIFAR-10 / CIFAR-100
                                   settings (our choice)
  original  optional: the code's optimiser after the refines (method.code_freeze_renewed, REFERENCE §15): the renewed
            ResNet stage 4 and classifier stay as the refines left them (their BatchNorm statistics still move)
Default: cifar10,symmetric,0.5. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data; CIFAR-N needs
its manual download):

  python -m experiments.train --config=experiments/configs/pes_paper.py:cifar10,pairflip,0.45 \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/pes_c10_pair45
  python -m experiments.train --config=experiments/configs/pes_paper.py:cifar100,symmetric,0.5,original \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/pes_c100_sym50_original

A run is four stages (noisy_jax.methods.pes): 'warmup' (config.warmup: T1 epochs of cross entropy with the run's
SGD), 'refine1' and 'refine2' (config.refine1 / config.refine2: Adam, the renewed modules alone), then PES's own stage
'stage1' (the run's num_epochs and optimizer, the warm-up's SGD continued on the selected rows). The code's loop runs
200 epochs: T1 warm-up epochs, both refines inside loop epoch T1, then 200 - T1 - 1 epochs; the refines count as one
epoch of the run's clock, so stage1's epoch e (1-based) trains at the lr of loop epoch T1 + e, and the run's
lr_boundaries (100, 150) are the code's MultiStepLR milestones on its loop epoch. noisy_jax.experiment.stages's
total_epochs counts the refines' own epochs too (T1 + 7 + 5 + 200 - T1 - 1 = 211).

Every constant and its source: tmllab/PES@5466238, PES_cs.py, common/NoisyUtil.py, networks/ResNet.py (file:line);
docs/pes_schedule.md §0-1 reads the schedule stage by stage; REFERENCE = shared/REFERENCE.md §15.
  network: CIFAR-10 ResNet-18, CIFAR-100 ResNet-34, CIFAR style (3x3 stem, no max pool), post-activation
           BasicBlocks, widths 64..512 (registry 'resnet18' / 'resnet34')
                                                                     PES_cs.py:132,146 (model_name), :56-64;
                                                                     networks/ResNet.py:124-198
  batch 128 (every loader)                                           PES_cs.py:22 --batch_size
  validation split: 10% of the 50,000 training images = 5,000        PES_cs.py:30 --data_percent 0.9;
                                                                     NoisyUtil.py:52-55 dataset_split
  augmentation: random crop after 4-pixel padding + horizontal flip  PES_cs.py:133-135, 147-149 transform_train
  loop epochs 200                                                    PES_cs.py:25 --num_epochs
  SGD (warm-up and stage1): lr 0.1, momentum 0.9, coupled weight decay 1e-4, no Nesterov
                                                                     PES_cs.py:23 --lr, :24 --weight_decay, :165
  lr x0.1 at loop epochs 100 and 150 (lr_boundaries (100, 150))     PES_cs.py:166 MultiStepLR([100, 150], 0.1),
                                                                     stepped after each loop epoch (:182)
  warm-up ('warmup'): T1 = 25 epochs (CIFAR-10), 30 (CIFAR-100), cross entropy on every row
                                                                     PES_cs.py:36 --T1 0, :129-130, :143-144, :174
  refine 1 ('refine1'): ResNet stage 4 + classifier re-initialised and trained alone, T2 = 7 epochs
                                                                     PES_cs.py:37 --T2, :176 noisy_refine(num_layer 1);
                                                                     networks/ResNet.py:168-185 renew_layers
  refine 2 ('refine2'): the classifier re-initialised and trained alone, T3 = 5 epochs
                                                                     PES_cs.py:38 --T3, :177 noisy_refine(num_layer 0)
    both refines: a fresh Adam, lr 1e-4 (betas 0.9 / 0.999, eps 1e-8), no weight decay, constant lr; plain cross
           entropy on every row (method.refine_modules = the method's REFINE_MODULES)
                                                                     PES_cs.py:35 --PES_lr, :117 torch.optim.Adam,
                                                                     :119 (ceriation, :167)
  stage1 (the run's own): 200 - T1 - 1 = 174 epochs (CIFAR-10), 169 (CIFAR-100); the selection (argmax of the
           mean softmax of two augmented views == given label) every epoch, class weights mean n / n_c, no clip
           (method.max_class_weight None)                            PES_cs.py:172-180, 82-102
  normalisation: per channel                                         PES_cs.py:137, 151 (fixed per-dataset statistics;
                                                                     here the training split's)
  noise: symmetric / pairflip at the row's rate, exact-rate injection (noise.exact=True)
                                                                     PES_cs.py:157 dataset_split(include_noise
                                                                     False); NoisyUtil.py:124-162 noisify_pairflip,
                                                                     noisify_multiclass_symmetric, which draw each
                                                                     label independently (multiclass_noisify,
                                                                     :166-187): --config.noise.exact=False

Stated deviations:
- Symmetric noise: PES_cs's convention (1 - r on the diagonal, r / (C - 1) off it, include_noise=False) is our
  'symmetric'; flipped exactly (noise.exact=True), where the code draws each label (realised rate about r). PES-semi's
  convention (r scaled by 1 - 1/C, REFERENCE §15) is not PES_cs's and is not used here.
- Instance noise (the code's 'instance', its README's CIFAR-100 example at 0.4) has no noise type here: no rows.
- Validation labels and model selection. The code flips all 50,000 labels and then holds out 10%, so its validation
  labels are noisy; it scores them with the training augmentation (PES_cs.py:160) after every loop epoch, warm-up
  included, and reports the test accuracy at the best one (:183-189). The trainer injects noise into the training
  split only, validates on clean unaugmented labels, and delivers stage1's best-validation (and final) network.
- After the refines, every parameter trains (pes.py's default): the code's SGD still holds the replaced modules'
  parameters, so its renewed modules never train again (REFERENCE §15); ',original' reproduces that.
- CIFAR-N rows: PES_cs's settings and networks (ResNet-18 on CIFAR-10N), where PES_noisylabels.py runs PES-semi
  (ResNet-34, SGD 0.02, cosine over 300 epochs, MixMatch, no validation split); the image order of TFDS differs.
- The network: PyTorch's default initialisation there, He-normal here; avg_pool2d(4) there, global mean here (the same
  at 32x32). Normalisation and the crop's padding: per-channel statistics of the training split, the crop pads with
  the mean (zeros after normalising); the code uses fixed statistics and pads the PIL image with black.
- The validation split is stratified by class (TFDS loader); the code's is a seeded random 10% (np.random.choice).
"""

import ml_collections

from experiments.configs import base
from experiments.configs import paper_rows
from noisy_jax.train import optim

DATASETS = ("cifar10", "cifar100", "cifar10_n", "cifar100_n")
RATES = {  # NOISE -> its rates: PES_cs.py:32 --noise_rate default 0.5, README; the paper's rows [recalled]
  "symmetric": (0.2, 0.4, 0.5),
  "pairflip": (0.45,),
}
HUMAN_LABELS = {  # noisy_jax.data.tfds_data's noise_key
  "cifar10_n": ("aggregate", "random1", "random2", "random3", "worst"),
  "cifar100_n": ("noisy",),
}
OPTIONS = ("original",)
DEFAULT = "cifar10,symmetric,0.5"  # PES_cs.py:28, 31, 32 argparse defaults; README's PES_cs example

MODELS = {"cifar10": "resnet18", "cifar100": "resnet34"}  # PES_cs.py:132, 146
BATCH_SIZE = 128  # PES_cs.py:22 --batch_size
VALIDATION_SIZE = 5000  # PES_cs.py:30 --data_percent 0.9 of 50,000 (NoisyUtil.py:53)
CROP_PADDING = 4  # PES_cs.py:134, 148 RandomCrop(32, padding=4)
LOOP_EPOCHS = 200  # PES_cs.py:25 --num_epochs
LEARNING_RATE = 0.1  # PES_cs.py:23 --lr
MOMENTUM = 0.9  # PES_cs.py:165
WEIGHT_DECAY = 1e-4  # PES_cs.py:24 --weight_decay
LR_BOUNDARIES = (100, 150)  # PES_cs.py:166 MultiStepLR(milestones=[100, 150]) on the loop epoch
LR_DECAY = 0.1  # PES_cs.py:166 gamma
WARMUP_EPOCHS = {"cifar10": 25, "cifar100": 30}  # T1: PES_cs.py:129-130, 143-144
REFINE_EPOCHS = (7, 5)  # T2, T3: PES_cs.py:37-38
REFINE_LEARNING_RATE = 1e-4  # PES_cs.py:35 --PES_lr (torch.optim.Adam, :117: no weight decay)
REFINE_MODULES = (("stage4", optim.CLASSIFIER), (optim.CLASSIFIER,))  # renew_layers(1), renew_layers(0)
REFINE_CLOCK_EPOCHS = 1  # both refines run inside loop epoch T1 (PES_cs.py:175-177)


def parse(arg: str | None) -> tuple[str, str, float | str, bool]:
  """'DATASET,NOISE,RATE[,original]' or 'DATASET,LABELS[,original]' -> (dataset, 'symmetric' / 'pairflip' /
  'human', rate or labels, original); ValueError naming the bad part and the allowed values."""
  dataset, noise, rate_or_labels, option = paper_rows.parse_row(
    arg or DEFAULT,
    config_name="pes_paper",
    datasets=DATASETS,
    rates=RATES,
    human_labels=HUMAN_LABELS,
    options=OPTIONS,
  )
  return dataset, noise, rate_or_labels, option is not None


def _adam() -> ml_collections.ConfigDict:
  """The refines' Adam (PES_cs.py:117): lr 1e-4, constant, no weight decay; merged over the run's SGD, whose other
  fields Adam does not read (momentum, nesterov) or leave it unchanged (lr_decay without boundaries)."""
  return ml_collections.ConfigDict(
    {"name": "adam", "learning_rate": REFINE_LEARNING_RATE, "weight_decay": 0.0, "lr_boundaries": ()}
  )


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, rate_or_labels, original = parse(arg)
  family = dataset.removesuffix("_n")
  config = base.get_shared()
  paper_rows.row_data(config, dataset, noise, rate_or_labels, validation_size=VALIDATION_SIZE)
  config.augment = ml_collections.ConfigDict({"crop_padding": CROP_PADDING, "flip": True})
  config.model = ml_collections.ConfigDict({"name": MODELS[family], "kwargs": {}, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.method = ml_collections.ConfigDict(
    {
      "name": "pes",
      "refine_modules": REFINE_MODULES,
      "max_class_weight": ml_collections.config_dict.placeholder(float),  # None: PES_cs's weights are not clipped
      "code_freeze_renewed": original,
    }
  )
  warmup_epochs = WARMUP_EPOCHS[family]
  config.warmup = ml_collections.ConfigDict({"num_epochs": warmup_epochs})  # the run's SGD
  config.refine1 = ml_collections.ConfigDict({"num_epochs": REFINE_EPOCHS[0], "optimizer": _adam()})
  config.refine2 = ml_collections.ConfigDict({"num_epochs": REFINE_EPOCHS[1], "optimizer": _adam()})
  config.num_epochs = LOOP_EPOCHS - warmup_epochs - REFINE_CLOCK_EPOCHS
  # The code's SGD (PES_cs.py:165-166): lr 0.1, momentum 0.9, coupled weight decay 1e-4, x0.1 at loop epochs 100
  # and 150.
  config.optimizer = base.sgd(
    LEARNING_RATE, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY, lr_boundaries=LR_BOUNDARIES, lr_decay=LR_DECAY
  )
  return config
