r"""T-Revision (Xia et al., NeurIPS 2019): the CIFAR-10 / CIFAR-100 runs of its code, and CIFAR-N with their settings.

The string after the colon picks the row, DATASET,symmetric,RATE[,original] or DATASET,LABELS[,original]:
  DATASET   cifar10 | cifar100     symmetric noise (the code's noisify_multiclass_symmetric: rate / (C - 1) to each
                                   other class), then RATE: 0.2 | 0.5 (the paper's Sym-20% and Sym-50% [recalled]; the
                                   code's --noise_rate default 0.2, its README's example 0.5)
  DATASET   cifar10_n | cifar100_n CIFAR-N human labels (noise type 'dataset', dataset_kwargs.noise_key), then LABELS:
                                   cifar10_n aggregate | random1 | random2 | random3 | worst; cifar100_n noisy. The
                                   code has no CIFAR-N: these rows take its CIFAR-10 / CIFAR-100 settings (our choice)
  original  optional: the code's behaviour where it differs from the paper (REFERENCE §13): T + i dT along the batch
            (method.accumulate_correction), tools.fit's in-place percentile filter (method.shared_filter: CIFAR-10 and
            CIFAR-10N only, the others have no filter), tools.norm's column-by-row normalisation of T
            (method.transition_norm 'tools_norm'), and MultiStepLR stepped before each epoch, which decays the
            reweighting's lr one epoch early (lr_boundaries (39, 79))
Default: cifar10,symmetric,0.2. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data; CIFAR-N needs
its manual download):

  python -m experiments.train --config=experiments/configs/t_revision_paper.py:cifar10,symmetric,0.5 \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/trev_c10_sym50
  python -m experiments.train --config=experiments/configs/t_revision_paper.py:cifar100_n,noisy,original \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/trev_c100n_original

A run is three stages (noisy_jax.methods.t_revision): 'warmup' (config.warmup), 'reweight' (config.reweight) and the
revision, the method's own stage 'stage1' (the run's num_epochs and optimizer); stages.total_epochs counts all three.

Every constant and its source. REFERENCE = shared/REFERENCE.md §13 (xiaoboxia/T-Revision@b598cf2); "code" = that
commit's files (main.py, loss.py, tools.py, Resnet.py, transformer.py, data_load.py, utils.py).
  network: CIFAR-10 ResNet-18, CIFAR-100 ResNet-34, CIFAR style (3x3 stem, no max pool), BasicBlocks, widths
           64..512 (registry 'resnet18' / 'resnet34')                code main.py (Resnet.ResNet18 / ResNet34)
  batch 128                                                          code main.py --batch_size
  validation split: 10% of the 50,000 training images = 5,000        code tools.dataset_split (split_per 0.9)
  augmentation: random crop after 4-pixel padding + horizontal flip  code transformer.py transform_train
  warm-up ('warmup'): cross entropy, SGD lr 0.01, no momentum, weight decay 1e-4, constant lr; 20 epochs (CIFAR-10),
           15 (CIFAR-100)                                            code main.py optimizer_es, --lr,
                                                                     --weight_decay, n_epoch_estimate
  T: anchor points of the warm-up's best-validation epoch's training-split softmax (product_from 'best_val'), the
           97th-percentile filter on CIFAR-10 and off on CIFAR-100 (percentile None)
                                                                     code main.py:193-213, tools.fit
                                                                     (estimate_state); REFERENCE §13
  reweighting ('reweight'): from the warm-up's best-validation network, beta detached; SGD lr 0.01, momentum 0.9,
           weight decay 1e-4, lr x0.1 after the 40th and 80th epochs (lr_boundaries (40, 80)); 200 epochs
                                                                     code main.py optimizer, scheduler
                                                                     MultiStepLR([40, 80], 0.1), n_epoch;
                                                                     loss.py:25; the paper's "after the 40th and
                                                                     80th epoch" [recalled]
  revision (the run's own): from the reweighting's best-validation network, dT = 0, beta with its gradient, Adam
           lr 5e-7 (betas 0.9 / 0.999, eps 1e-8), constant; weight decay 1e-4 on the network and dT; 200 epochs
                                                                     code main.py optimizer_revision, --lr_revision,
                                                                     n_epoch_revision; loss.py:32-56
    Adam: the trainer's 'coteaching_adam' with decay_start past any run (NO_DECAY) and beta1 0.9 throughout: plain
           Adam, PyTorch's update; it has no weight decay, so the code's Adam(weight_decay=1e-4) is
           method.revision_weight_decay, added to the gradient by the objective (noisy_jax.methods.t_revision)
  normalisation: per channel                                         code transformer.py (fixed CIFAR-10 statistics
                                                                     for both datasets; here the training split's)
  noise rate 0.2 / 0.5, symmetric over the other classes, exact-rate injection (noise.exact=True)
                                                                     code utils.noisify_multiclass_symmetric, which
                                                                     draws each label independently
                                                                     (multiclass_noisify): --config.noise.exact=False

Stated deviations:
- Validation labels and model selection. The code flips all 50,000 labels and then holds out 10% as its validation
  set, so its validation labels are noisy; it selects the warm-up epoch by noisy validation accuracy and the
  reweighting epoch by the noisy validation accuracy of argmax p T (main.py:258-278, 294-295). The trainer injects
  noise into the training split only and selects both ('best_val') by the network's accuracy on clean validation
  labels. The code reports the revision's test accuracy every epoch and keeps no selection; the summary here gives
  the last epoch's and the one at the best validation accuracy.
- The revision's weight decay is the method's revision_weight_decay (the objective adds wd w to the gradient), not the
  optimizer's: the same update as the code's Adam(weight_decay=1e-4); the logged loss leaves it out.
- T from unaugmented images: the code's estimate_loader reads the training set with its training transform (random
  crop and flip) in eval mode; here the eval-mode softmax of the unaugmented training split (float64, where the
  code's recorded probabilities are float32).
- The network. The code's ResNet's first convolution has padding 0 (32 -> 30 pixels in the first stage); here
  'same' padding (32 pixels). Its dT is an nn.Linear weight inside the network, trained with SGD's weight decay in
  stages 1-2 and reset to 0 before the revision; here dT exists in the revision stage only, starting at 0.
- Normalisation and the crop's padding: per-channel statistics of the training split, the crop pads with the mean
  (zeros after normalising); the code uses fixed CIFAR-10 statistics and pads the PIL image with black.
- The validation split is stratified by class (TFDS loader); the code's is a seeded random 10%.
"""

import ml_collections

from experiments.configs import base
from experiments.configs import paper_rows

DATASETS = ("cifar10", "cifar100", "cifar10_n", "cifar100_n")
RATES = (0.2, 0.5)  # the paper's Sym-20% / Sym-50% [recalled]; code --noise_rate default 0.2
HUMAN_LABELS = {  # noisy_jax.data.tfds_data's noise_key
  "cifar10_n": ("aggregate", "random1", "random2", "random3", "worst"),
  "cifar100_n": ("noisy",),
}
OPTIONS = ("original",)
DEFAULT = "cifar10,symmetric,0.2"

MODELS = {"cifar10": "resnet18", "cifar100": "resnet34"}  # code main.py ResNet18 / ResNet34
BATCH_SIZE = 128  # code main.py --batch_size
VALIDATION_SIZE = 5000  # code tools.dataset_split split_per 0.9 of 50,000
CROP_PADDING = 4  # code transformer.py RandomCrop(32, padding=4)
LEARNING_RATE = 0.01  # code main.py --lr (optimizer_es, optimizer)
WEIGHT_DECAY = 1e-4  # code main.py --weight_decay (all three optimisers)
WARMUP_EPOCHS = {"cifar10": 20, "cifar100": 15}  # code main.py n_epoch_estimate
REWEIGHT_EPOCHS = 200  # code main.py n_epoch
REWEIGHT_MOMENTUM = 0.9  # code main.py optimizer
LR_BOUNDARIES = (40, 80)  # code main.py MultiStepLR(milestones=[40, 80]); the paper's 40th and 80th [recalled]
# code main.py: scheduler.step() at the start of each epoch, so epoch e (0-based) trains at 0.01 x 0.1^#{m <= e + 1}.
ORIGINAL_LR_BOUNDARIES = (39, 79)
LR_DECAY = 0.1  # code main.py MultiStepLR gamma
REVISION_EPOCHS = 200  # code main.py n_epoch_revision
REVISION_LEARNING_RATE = 5e-7  # code main.py --lr_revision
NO_DECAY = 1_000_000  # coteaching_adam's decay_start: never reached, so its Adam keeps lr and beta1
ADAM_BETA1 = 0.9  # torch.optim.Adam's default betas (0.9, 0.999)
PERCENTILE = {"cifar10": 97.0, "cifar100": None}  # code main.py estimate_state, tools.fit percentile 97


def parse(arg: str | None) -> tuple[str, str, float | str, bool]:
  """'DATASET,symmetric,RATE[,original]' or 'DATASET,LABELS[,original]' -> (dataset, 'symmetric' or 'human',
  rate or labels, original); ValueError naming the bad part and the allowed values."""
  dataset, noise, rate_or_labels, option = paper_rows.parse_row(
    arg or DEFAULT,
    config_name="t_revision_paper",
    datasets=DATASETS,
    rates={"symmetric": RATES},
    human_labels=HUMAN_LABELS,
    options=OPTIONS,
  )
  return dataset, noise, rate_or_labels, option is not None


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, rate_or_labels, original = parse(arg)
  family = dataset.removesuffix("_n")
  config = base.get_shared()
  paper_rows.row_data(config, dataset, noise, rate_or_labels, validation_size=VALIDATION_SIZE)
  config.augment = ml_collections.ConfigDict({"crop_padding": CROP_PADDING, "flip": True})
  config.model = ml_collections.ConfigDict({"name": MODELS[family], "kwargs": {}, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  percentile = PERCENTILE[family]
  config.method = ml_collections.ConfigDict(
    {
      "name": "t_revision",
      "percentile": ml_collections.config_dict.placeholder(float) if percentile is None else percentile,
      "shared_filter": original and percentile is not None,
      "transition_norm": "tools_norm" if original else "rows",
      "reweight_weight_gradient": "none",
      "revision_weight_gradient": "all",
      "accumulate_correction": original,
      "revision_weight_decay": WEIGHT_DECAY,
    }
  )
  # The code's SGD (lr 0.01, weight decay 1e-4, no Nesterov) with each stage's momentum and step schedule; every field
  # of the optimizer set, since a stage's section is merged over the run's (Adam) optimizer.
  sgd = {"weight_decay": WEIGHT_DECAY, "lr_decay": LR_DECAY}
  warmup_sgd = base.sgd(LEARNING_RATE, momentum=0.0, lr_boundaries=(), **sgd)
  config.warmup = ml_collections.ConfigDict({"num_epochs": WARMUP_EPOCHS[family], "optimizer": warmup_sgd})
  boundaries = ORIGINAL_LR_BOUNDARIES if original else LR_BOUNDARIES
  reweight_sgd = base.sgd(LEARNING_RATE, momentum=REWEIGHT_MOMENTUM, lr_boundaries=boundaries, **sgd)
  config.reweight = ml_collections.ConfigDict({"num_epochs": REWEIGHT_EPOCHS, "optimizer": reweight_sgd})
  config.num_epochs = REVISION_EPOCHS
  config.optimizer = ml_collections.ConfigDict(
    {
      "name": "coteaching_adam",
      "learning_rate": REVISION_LEARNING_RATE,
      "decay_start": NO_DECAY,
      "beta1": ADAM_BETA1,
      "beta1_after": ADAM_BETA1,
    }
  )
  return config
