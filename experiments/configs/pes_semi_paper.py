r"""PES-semi (Bai et al., NeurIPS 2021): the CIFAR-10 / CIFAR-100 runs of PES_semi.py, CIFAR-N of PES_noisylabels.py.

The string after the colon picks the row, DATASET,NOISE,RATE[,original] or DATASET,LABELS[,original]:
  DATASET   cifar10 | cifar100     synthetic noise, then NOISE,RATE:
                                   symmetric_include_true,0.5   the code's 'symmetric' (PES_semi.py:27-28 defaults):
                                     dataset_split(include_noise=True) scales the rate to r (1 - 1/C) and
                                     noisify_multiclass_symmetric spreads that over the C - 1 other classes, so
                                     T = (1 - r) I + r / C: a label redrawn from all C classes with probability r
                                     (NoisyUtil.py:16-17, 144-162), our 'symmetric_include_true' at rate r exactly
                                     (r (C - 1) / C wrong: 45% on CIFAR-10, 49.5% on CIFAR-100 at 0.5)
                                   pairflip,0.45   the code's 'pairflip' (include_noise False: the rate unscaled,
                                     i -> i + 1 mod C; NoisyUtil.py:124-141), README.md:40's CIFAR-100 run
  DATASET   cifar10_n | cifar100_n CIFAR-N human labels (noise type 'dataset', dataset_kwargs.noise_key), then LABELS:
                                   cifar10_n aggregate | random1 | random2 | random3 | worst
                                   (PES_noisylabels.py:255-264, README.md:52-68); cifar100_n noisy (:284, README.md:72)
  original  optional: the code's optimiser after the refine (method.code_freeze_renewed, docs/pes_schedule.md §0): the
            renewed classifier stays as the refine left it (the rest of the network trains on)
Default: cifar10,symmetric_include_true,0.5. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data;
CIFAR-N needs its manual download):

  python -m experiments.train --config=experiments/configs/pes_semi_paper.py:cifar100,pairflip,0.45 \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/pes_semi_c100_pair45
  python -m experiments.train --config=experiments/configs/pes_semi_paper.py:cifar10_n,worst,original \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/pes_semi_c10n_worst_original

A run is three stages (noisy_jax.methods.pes_semi): 'warmup' (config.warmup: T1 epochs of cross entropy with the
run's SGD), 'refine1' (config.refine1: T2 epochs, a fresh Adam, the re-initialised classifier alone), then the
method's MixMatch stage 'stage1' (the run's num_epochs and optimizer, the warm-up's SGD continued). The code's loop
runs 300 epochs: T1 warm-up epochs, then the refine and the first MixMatch epoch both inside loop epoch T1
(PES_semi.py:265-273), then MixMatch to loop epoch 299. The refine counts 0 epochs on the run's clock, so stage1 has
300 - T1 epochs and its epoch e (1-based) is loop epoch T1 + e - 1: it trains at the cosine's lr of that loop epoch
(the schedule's count set by pes_semi.make_epoch_fn), the unlabelled loss ramps up from loop epoch T1, and alpha turns
0.75 at loop epoch 150 (run_epochs = T1 + num_epochs = 300). noisy_jax.experiment.stages's total_epochs counts the
refine's own epochs too (T1 + 5 + 300 - T1 = 305).

Every constant and its source: tmllab/PES@5466238, PES_semi.py (CIFAR), PES_noisylabels.py (CIFAR-N; "NL" below),
common/NoisyUtil.py, networks/ResNet.py, README.md (file:line); docs/pes_schedule.md §0, §2, §3, §8 reads the schedule.
  network: CIFAR-10 / CIFAR-100 PreActResNet-18: a 3x3 stem, four stages of two pre-activation blocks, widths
           64..512 (registry 'preact_resnet32' with widths (64, 128, 256, 512), blocks_per_stage (2, 2, 2, 2), as
           dividemix_paper.py)                                       PES_semi.py:17, 58-61; networks/ResNet.py:191
           CIFAR-10N / CIFAR-100N ResNet-34, CIFAR style, post-activation BasicBlocks (registry 'resnet34')
                                                                     NL:27, 66-69; networks/ResNet.py:197-198
  batch 128 (the warm-up's and refine's loader; B = B_x + B_u of a MixMatch step)
                                                                     PES_semi.py:29 --batch_size; NL:37
  no validation split: trains on all 50,000 images                   PES_semi.py:26 --data_percent 1 (dataset_split
                                                                     keeps every row, NoisyUtil.py:52-55); NL:251, 281
  augmentation: random crop after 4-pixel padding + horizontal flip  PES_semi.py:223-225, 236-238; NL:239-241, 269-271
  loop epochs 300                                                    PES_semi.py:32 --num_epochs; NL:40
  SGD (warm-up and stage1): lr 0.02, momentum 0.9, coupled weight decay 5e-4, no Nesterov
                                                                     PES_semi.py:30 --lr, :31 --weight_decay, :258;
                                                                     NL:38, 39, 293
  lr: cosine over the loop epoch, T_max 300, eta_min 0.02 / 100 = 2e-4 (lr_schedule 'cosine', cosine_epochs 300,
           lr_min 2e-4): lr_e = 2e-4 + (0.02 - 2e-4)(1 + cos(pi e / 300)) / 2 at loop epoch e
                                                                     PES_semi.py:33 --optim cos, :259-260
                                                                     CosineAnnealingLR(optimizer, num_epochs,
                                                                     lr / 100), stepped after each loop epoch (:277);
                                                                     NL:41, 294-295, 312
  warm-up ('warmup'): T1 = 20 epochs (CIFAR-10, CIFAR-10N), 35 (CIFAR-100, CIFAR-100N), cross entropy on every row
                                                                     PES_semi.py:39 --T1 0, :220-221, 233-234, 266-267;
                                                                     NL:47, 236-237, 266-267, 301-302
  refine ('refine1'): the classifier re-initialised and trained alone, T2 = 5 epochs, a fresh Adam, lr 1e-4 (betas
           0.9 / 0.999, eps 1e-8), no weight decay, constant lr, plain cross entropy on every row
           (method.refine_modules = pes_semi.REFINE_MODULES)         PES_semi.py:40 --T2, :38 --PES_lr, :198-216
                                                                     (renew_layers(0): networks/ResNet.py:184-185),
                                                                     :208 torch.optim.Adam, :270; NL:46, 48, 224, 305
  stage1 (the run's own): 300 - T1 = 280 epochs (CIFAR-10, CIFAR-10N), 265 (CIFAR-100, CIFAR-100N)
                                                                     PES_semi.py:265-273; NL:300-308
    selection every epoch (two augmented views' mean softmax, argmax == given label); class weights mean n / n_c
           clipped at 3 (method.max_class_weight 3)                  PES_semi.py:167-195 (:192); NL:183-211 (:208)
    steps_per_epoch None: int(50,000 / batch) = 390 MixMatch steps an epoch, whatever the selection
                                                                     PES_semi.py:81; NL:97
    alpha 4 (Beta(alpha, alpha)), 0.75 from loop epoch 300 / 2 = 150 on (method.alpha, method.late_alpha)
                                                                     PES_semi.py:35 --alpha, :72-73; NL:43, 88-89
    temperature 0.5 (sharpening of the unlabelled targets)           PES_semi.py:36 --T, :105; NL:44, 121
    lambda_u (the full weight of Lu; ramp clip((t - T1) / 16, 0, 1)):
      cifar10  symmetric_include_true 0.5   150                      PES_semi.py:37 --lambda_u default
      cifar100 symmetric_include_true 0.5   150                      PES_semi.py:37 --lambda_u default
      cifar10  pairflip 0.45                150                      PES_semi.py:37 (no README run: the default)
      cifar100 pairflip 0.45                50                       README.md:40 (--lambda_u 50)
      cifar10_n (every LABELS)              5                        NL:249 (args.lambda_u = 5, whatever the flag)
      cifar100_n noisy                      75                       NL:279 (args.lambda_u = 75)
  normalisation: per channel                                         PES_semi.py:227, 240 (fixed per-dataset
                                                                     statistics; here the training split's)
  noise: the row's type and rate, exact-rate injection (noise.exact=True)
                                                                     PES_semi.py:246-252 dataset_split (include_noise
                                                                     for 'symmetric' only); NoisyUtil.py:166-187
                                                                     draws each label independently:
                                                                     --config.noise.exact=False

Stated deviations:
- The network (CIFAR-10 / CIFAR-100 rows). The registry has no PreActResNet-18 of networks/ResNet.py; the generic
  pre-activation ResNet with the widths and blocks above has the same stages, strides and 1x1 projection shortcuts,
  but its stem is a bare conv where the code's is conv -> BN -> ReLU (networks/ResNet.py:132-133, 151-153), and it
  has a BN-ReLU before the pool that the code lacks (:162-163): module 'final_bn', which the refine does not renew
  (the code renews `linear` alone). PyTorch's default initialisation there, He-normal here; avg_pool2d(4) there, the
  global mean here (the same at 32x32). The CIFAR-N rows' ResNet-34 has the code's layout.
- Noise is realised exactly per class (noise.exact=True), where the code draws each label independently (realised
  rates about r (C - 1) / C for symmetric_include_true and r for pairflip). Instance noise (README.md:36's CIFAR-10
  40% run with --lambda_u 15) has no noise type here: no row. '--config.noise.type=symmetric' gives the other
  convention (exactly r wrong; pes_paper.py's), with the same row's lambda_u.
- Model selection. The code reports the best test accuracy over its loop epochs (PES_semi.py:275-279; NL:310-314),
  a choice on the test set. With no validation split the trainer delivers stage1's final network; the summary's
  last_test_accuracy is the code's last, its best_test_accuracy the code's best, except that it also counts the
  refine's epochs where they record a test accuracy (the code evaluates them but leaves them out of its best).
- After the refine, every parameter trains (pes_semi.py's default): the code's SGD was built before the renewal and
  never steps the new classifier (docs/pes_schedule.md §0); ',original' reproduces that.
- The warm-up and refine epochs: the code's loader drops the last partial batch (drop_last: 390 steps of 128); the
  trainer uses every row once an epoch, its last batch padded and the padding masked (391 steps).
- Normalisation and the crop's padding: per-channel statistics of the training split, the crop pads with the mean
  (zeros after normalising); the code uses fixed statistics and pads the PIL image with black.
- CIFAR-N rows: TFDS's image order differs from torchvision's (each human label stays with its image).
- The code's `--optim step` (MultiStepLR([150, 250], 0.1), PES_semi.py:261-262) is not its default and has no row.
- The method's own differences (empty selections, tiny sets, JAX randomness, synchronised BatchNorm over devices):
  noisy_jax.methods.pes_semi's docstring.
"""

import ml_collections

from experiments.configs import base
from experiments.configs import paper_rows
from noisy_jax.train import optim

DATASETS = ("cifar10", "cifar100", "cifar10_n", "cifar100_n")
RATES = {  # NOISE -> its rates: PES_semi.py:27-28 defaults (symmetric 0.5), README.md:40 (pairflip 0.45)
  "symmetric_include_true": (0.5,),
  "pairflip": (0.45,),
}
HUMAN_LABELS = {  # noisy_jax.data.tfds_data's noise_key; PES_noisylabels.py:36, 255-264, 284
  "cifar10_n": ("aggregate", "random1", "random2", "random3", "worst"),
  "cifar100_n": ("noisy",),
}
OPTIONS = ("original",)
DEFAULT = "cifar10,symmetric_include_true,0.5"  # PES_semi.py:24, 27, 28 argparse defaults

MODELS = {  # PES_semi.py:17, 58-61 PreActResNet18; PES_noisylabels.py:27, 66-69 ResNet34
  "cifar10": "preact_resnet32",
  "cifar100": "preact_resnet32",
  "cifar10_n": "resnet34",
  "cifar100_n": "resnet34",
}
PREACT_RESNET18_KWARGS = {"widths": (64, 128, 256, 512), "blocks_per_stage": (2, 2, 2, 2)}  # networks/ResNet.py:191
BATCH_SIZE = 128  # PES_semi.py:29; PES_noisylabels.py:37
VALIDATION_SIZE = 0  # PES_semi.py:26 --data_percent 1; PES_noisylabels.py trains on all of train_set.data
CROP_PADDING = 4  # PES_semi.py:224, 237 RandomCrop(32, padding=4); PES_noisylabels.py:240, 270
LOOP_EPOCHS = 300  # PES_semi.py:32 --num_epochs; PES_noisylabels.py:40
LEARNING_RATE = 0.02  # PES_semi.py:30 --lr; PES_noisylabels.py:38
MOMENTUM = 0.9  # PES_semi.py:258; PES_noisylabels.py:293
WEIGHT_DECAY = 5e-4  # PES_semi.py:31 --weight_decay; PES_noisylabels.py:39
COSINE_EPOCHS = LOOP_EPOCHS  # PES_semi.py:260 CosineAnnealingLR(T_max=args.num_epochs) on the loop epoch
LR_MIN = LEARNING_RATE / 100  # PES_semi.py:260 eta_min = args.lr / 100; PES_noisylabels.py:295
WARMUP_EPOCHS = {"cifar10": 20, "cifar100": 35}  # T1: PES_semi.py:220-221, 233-234; PES_noisylabels.py:236-237, 266-267
REFINE_EPOCHS = 5  # T2: PES_semi.py:40; PES_noisylabels.py:48
REFINE_LEARNING_RATE = 1e-4  # PES_semi.py:38 --PES_lr (torch.optim.Adam, :208: no weight decay); PES_noisylabels.py:46
REFINE_MODULES = ((optim.CLASSIFIER,),)  # PES_semi.py:270 noisy_refine(model, train_loader, 0, T2): renew_layers(0)
REFINE_CLOCK_EPOCHS = 0  # the refine and the first MixMatch epoch share loop epoch T1 (PES_semi.py:269-273)
ALPHA = 4.0  # PES_semi.py:35 --alpha; PES_noisylabels.py:43
LATE_ALPHA = 0.75  # PES_semi.py:72-73 (epoch >= num_epochs / 2); PES_noisylabels.py:88-89
TEMPERATURE = 0.5  # PES_semi.py:36 --T; PES_noisylabels.py:44
MAX_CLASS_WEIGHT = 3.0  # PES_semi.py:192 cw[cw > 3] = 3; PES_noisylabels.py:208
LAMBDA_U_DEFAULT = 150.0  # PES_semi.py:37 --lambda_u
LAMBDA_U = {  # (dataset, noise) -> lambda_u (module docstring)
  ("cifar10", "symmetric_include_true"): LAMBDA_U_DEFAULT,
  ("cifar100", "symmetric_include_true"): LAMBDA_U_DEFAULT,
  ("cifar10", "pairflip"): LAMBDA_U_DEFAULT,
  ("cifar100", "pairflip"): 50.0,  # README.md:40 --lambda_u 50
  ("cifar10_n", "human"): 5.0,  # PES_noisylabels.py:249
  ("cifar100_n", "human"): 75.0,  # PES_noisylabels.py:279
}


def parse(arg: str | None) -> tuple[str, str, float | str, bool]:
  """'DATASET,NOISE,RATE[,original]' or 'DATASET,LABELS[,original]' -> (dataset, 'symmetric_include_true' /
  'pairflip' / 'human', rate or labels, original); ValueError naming the bad part and the allowed values."""
  dataset, noise, rate_or_labels, option = paper_rows.parse_row(
    arg or DEFAULT,
    config_name="pes_semi_paper",
    datasets=DATASETS,
    rates=RATES,
    human_labels=HUMAN_LABELS,
    options=OPTIONS,
  )
  return dataset, noise, rate_or_labels, option is not None


def _adam() -> ml_collections.ConfigDict:
  """The refine's Adam (PES_semi.py:208): lr 1e-4, constant, no weight decay; merged over the run's SGD, so the
  schedule is set back to a constant ('piecewise' without boundaries: the SGD's cosine fields are then unread), and
  Adam does not read the SGD's momentum or nesterov."""
  return ml_collections.ConfigDict(
    {
      "name": "adam",
      "learning_rate": REFINE_LEARNING_RATE,
      "weight_decay": 0.0,
      "lr_schedule": "piecewise",
      "lr_boundaries": (),
    }
  )


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, rate_or_labels, original = parse(arg)
  family = dataset.removesuffix("_n")
  config = base.get_shared()
  paper_rows.row_data(config, dataset, noise, rate_or_labels, validation_size=VALIDATION_SIZE)
  config.augment = ml_collections.ConfigDict({"crop_padding": CROP_PADDING, "flip": True})
  model = MODELS[dataset]
  kwargs = dict(PREACT_RESNET18_KWARGS) if model == "preact_resnet32" else {}
  config.model = ml_collections.ConfigDict({"name": model, "kwargs": kwargs, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.method = ml_collections.ConfigDict(
    {
      "name": "pes_semi",
      "refine_modules": REFINE_MODULES,
      "lambda_u": LAMBDA_U[(dataset, noise)],
      "temperature": TEMPERATURE,
      "alpha": ALPHA,
      "late_alpha": LATE_ALPHA,
      "max_class_weight": MAX_CLASS_WEIGHT,
      "steps_per_epoch": ml_collections.config_dict.placeholder(int),  # None: int(50000 / batch_size), :81
      "code_freeze_renewed": original,
    }
  )
  warmup_epochs = WARMUP_EPOCHS[family]
  config.warmup = ml_collections.ConfigDict({"num_epochs": warmup_epochs})  # the run's SGD
  config.refine1 = ml_collections.ConfigDict({"num_epochs": REFINE_EPOCHS, "optimizer": _adam()})
  config.num_epochs = LOOP_EPOCHS - warmup_epochs - REFINE_CLOCK_EPOCHS
  # The code's SGD (PES_semi.py:258-260): lr 0.02, momentum 0.9, coupled weight decay 5e-4, cosine over the 300 loop
  # epochs down to 2e-4.
  config.optimizer = base.sgd(LEARNING_RATE, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY, lr_schedule="cosine")
  config.optimizer.cosine_epochs = COSINE_EPOCHS
  config.optimizer.lr_min = LR_MIN
  return config
