r"""CAL (Zhu et al., CVPR 2021): CIFAR-10 / CIFAR-100 with its code's two runs, CIFAR-N as the replication.

The string after the colon picks the row, DATASET,symmetric,RATE or DATASET,LABELS:
  DATASET   cifar10 | cifar100     then 'symmetric' and RATE 0.2 | 0.4 | 0.6: the code's training plan at the rates
                                   of its instance-dependent noise files (datasets/.../noise_label/IDN_{RATE}_C10.pt,
                                   IDN_{RATE}_C100.pt; RC10:28, 47). noisy_jax has no instance-dependent noise, so the
                                   rows inject symmetric noise at RATE instead (stated deviation below)
  DATASET   cifar10_n | cifar100_n CIFAR-N human labels (noise type 'dataset', dataset_kwargs.noise_key), then LABELS:
                                   cifar10_n aggregate | random1 | random2 | random3 | worst; cifar100_n noisy. The
                                   replication's protocol (KlemenVovk/noisy-labels CAL_cifar10_clean.py; its
                                   reproducibility config cifar100n/CAL.py for CIFAR-100N)
Default: cifar10_n,worst. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data; CIFAR-N needs its
manual download):

  python -m experiments.train --config=experiments/configs/cal_paper.py:cifar10,symmetric,0.4 \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/cal_c10_sym40
  python -m experiments.train --config=experiments/configs/cal_paper.py:cifar100_n,noisy \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/cal_c100n

A run is two stages (noisy_jax.methods.cal): 'warmup' (config.warmup: peer-regularised CE with the sieve, a fresh
network) then the method's own 'stage1' (the run's num_epochs and optimizer: CAL's loss, a fresh network).

Every constant and its source. "code" = UCSC-REAL/CAL@bdb376b (run_exptPRLD_C10_CAL.py "RC10",
run_exptPRLD_C100_CAL.py "RC100", experiments/exptPeerReg.py "EX", models/peerreg_CAL.py "PR", options/baseoption.py
"OPT", models/schedulers/lr_scheduler.py "LR", networks/resnet_cifar.py); "rep" = KlemenVovk/noisy-labels
(src/noisypy/configs/methods/CAL/CAL_cifar10_clean.py "CC", src/reproducibility/noisy_labels/configs/cifar100n/CAL.py
"C100N", src/noisypy/methods/learning_strategies/CAL/cal.py "RCAL", src/noisypy/configs/data/cifar10.py "D10").
  CIFAR-10 / CIFAR-100 rows (the code's plan; both runs share it but for alpha):
  network: ResNet-34, CIFAR style (registry 'resnet34')            RC10:22, RC100:22 netARCH 'resnet_cifar34'
  batch 128; all 50,000 training images (no validation)             RC10:87, 89-90; RC100:87, 89-90
  augmentation: random crop after 4-pixel padding + horizontal flip EX:50-57 (CIFAR-100 adds RandomRotation(15),
                                                                    EX:253: not available here)
  SGD lr 0.1, momentum 0.9, weight decay 5e-4, StepLR(60, 0.1)       RC10:81-86, RC100:81-86, OPT:39
  the rate of an epoch divided by 1 + alpha (lr_alpha_division)     LR:36-45, models/basemodel.py:298-303
  warm-up ('warmup', lossfunc 'crossentropy'): 66 epochs: the sieve of 0-based epoch 65 is the one saved (EX:220-222;
           the run's epochs 66-99 are never used); alpha SegAlpha((0, 2, 2), (10, 40, 80)) on CIFAR-10, ((0, 1, 1),
           (10, 40, 80)) on CIFAR-100                               RC10:41, 54-56; RC100:54-56
  CAL ('stage1', lossfunc 'crossentropy_CAL'): 100 epochs from a fresh network, alpha SegAlpha((0, 1, 1),
           (10, 40, 80))                                            RC10:41, 58-60, 75 (is_load False)
  prior x 10 on CIFAR-100 (prior_scale)                             EX:107-108
  sieve threshold -8; the code's epsilons in the logs               PR:111-124; lossfuncs/peerloss.py:21, 34, 56
  CIFAR-10N / CIFAR-100N rows (the replication's protocol):
  network: ResNet-34 (registry 'resnet34')                          CC:20-24
  batch 128, crop 4 + flip; validation split 10,000 (Split(0.8))     D10:11, 19 (CC:18's data config)
  SGD lr 0.1, momentum 0.9, weight decay 5e-4; StepLR(60, 0.1), each stage's own (lr 0.1 for 60 epochs, then 0.01)
                                                                    CC:41-44, C100N:28-31; RCAL:190-194, 266-273
  no division of the rate by 1 + alpha (torch's StepLR)             CC:43
  warm-up: 65 epochs (warmup_epochs), alpha SegAlpha((0, 2), (10, 40)); CIFAR-100N ((0, 1), (10, 40))
                                                                    CC:27-38, C100N:14-25
  CAL: 165 - 65 = 100 epochs, alpha SegAlpha((0, 1, 1), (10, 40, 80)), prior x 1
                                                                    CC:31-34, 47; RCAL:126-135, 176-185

Stated deviations:
- Noise of the CIFAR rows: the code's instance-dependent label files are not read; symmetric noise at the same rate
  (exact-rate injection) stands in. Load your own labels through a dataset with given noisy labels to match.
- The CIFAR-10N / CIFAR-100N replication's sieve runs on its 40,000 training rows; here on the training split without
  the 10,000 validation rows, the same. TFDS's image order differs from torchvision's (each label stays with its image).
- Normalisation: per channel of the training split here; fixed statistics there (EX:55-56, 254-255).
- Model selection: the code keeps the best test accuracy (baseexperiment.py:139-142); the summary here gives the last
  epoch's and the best.
- The method's own differences: noisy_jax.methods.cal's docstring.
"""

import ml_collections

from experiments.configs import base
from experiments.configs import paper_rows

DATASETS = ("cifar10", "cifar100", "cifar10_n", "cifar100_n")
RATES = (0.2, 0.4, 0.6)  # the shipped IDN_{0.2,0.4,0.6}_C10.pt / _C100.pt; RC10:28 noise_rate 0.2
HUMAN_LABELS = {"cifar10_n": ("aggregate", "random1", "random2", "random3", "worst"), "cifar100_n": ("noisy",)}
DEFAULT = "cifar10_n,worst"

MODEL = "resnet34"  # RC10:22 resnet_cifar34; rep CC:20 resnet34
BATCH_SIZE = 128  # RC10:87; rep D10:19
CROP_PADDING = 4  # EX:52 RandomCrop(32, 4)
LEARNING_RATE = 0.1  # RC10:82; rep CC:42
MOMENTUM = 0.9  # OPT:39 default; rep CC:42
WEIGHT_DECAY = 5e-4  # RC10:84; rep CC:42
LR_BOUNDARIES = (60,)  # RC10:85 lr_decay_step_size 60 (LR:36-45: x0.1 at epochs 60, 120, ...; 100 epochs); rep CC:44
LR_DECAY = 0.1  # RC10:86; rep CC:44
MILESTONES = (10, 40, 80)  # RC10:56, 60; RC100:56, 60; rep CC:33
CAL_ALPHA = (0.0, 1.0, 1.0)  # RC10:59, RC100:59; rep CC:32
SIEVE_THRESHOLD = -8.0  # PR:123-124

# The code's CIFAR rows.
WARMUP_EPOCHS = 66  # EX:220: the sieve of 0-based epoch 65 (of RC10:41's 100) is the one CAL reads (RC10:61)
CAL_EPOCHS = 100  # RC10:41 max_epoch
WARMUP_ALPHA = {10: (0.0, 2.0, 2.0), 100: (0.0, 1.0, 1.0)}  # RC10:55, RC100:55
PRIOR_SCALE = {10: 1.0, 100: 10.0}  # EX:107-108
VALIDATION_SIZE = 0  # RC10:89 is_validate False

# The replication's CIFAR-N rows.
REP_WARMUP_EPOCHS = 65  # CC:29
REP_TOTAL_EPOCHS = 165  # CC:47
REP_WARMUP_ALPHA = {10: (0.0, 2.0), 100: (0.0, 1.0)}  # CC:36, C100N:23
REP_WARMUP_MILESTONES = (10, 40)  # CC:37, C100N:24
REP_VALIDATION_SIZE = 10000  # D10:11 Split(0.8) of 50,000


def parse(arg: str | None) -> tuple[str, str, float | str]:
  """'DATASET,symmetric,RATE' or 'DATASET,LABELS' -> (dataset, 'symmetric' or 'human', rate or labels); ValueError
  naming the bad part and the allowed values."""
  dataset, noise, rate_or_labels, _ = paper_rows.parse_row(
    arg or DEFAULT,
    config_name="cal_paper",
    datasets=DATASETS,
    rates={"symmetric": RATES},
    human_labels=HUMAN_LABELS,
    options=(),
  )
  return dataset, noise, rate_or_labels


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, rate_or_labels = parse(arg)
  num_classes = 100 if dataset.startswith("cifar100") else 10
  human = noise == "human"
  config = base.get_shared()
  paper_rows.row_data(
    config, dataset, noise, rate_or_labels, validation_size=VALIDATION_SIZE, human_validation_size=REP_VALIDATION_SIZE
  )
  config.augment = ml_collections.ConfigDict({"crop_padding": CROP_PADDING, "flip": True})
  config.model = ml_collections.ConfigDict({"name": MODEL, "kwargs": {}, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.method = ml_collections.ConfigDict(
    {
      "name": "cal",
      "alpha_list": CAL_ALPHA,
      "milestones": MILESTONES,
      "warmup_alpha_list": REP_WARMUP_ALPHA[num_classes] if human else WARMUP_ALPHA[num_classes],
      "warmup_milestones": REP_WARMUP_MILESTONES if human else MILESTONES,
      "sieve_threshold": SIEVE_THRESHOLD,
      "log_epsilons": "code",
      "prior_scale": 1.0 if human else PRIOR_SCALE[num_classes],
      "lr_alpha_division": not human,
    }
  )
  sgd = {"momentum": MOMENTUM, "weight_decay": WEIGHT_DECAY, "lr_boundaries": LR_BOUNDARIES, "lr_decay": LR_DECAY}
  warmup_epochs = REP_WARMUP_EPOCHS if human else WARMUP_EPOCHS
  config.warmup = ml_collections.ConfigDict({"num_epochs": warmup_epochs, "optimizer": base.sgd(LEARNING_RATE, **sgd)})
  config.num_epochs = REP_TOTAL_EPOCHS - REP_WARMUP_EPOCHS if human else CAL_EPOCHS
  config.optimizer = base.sgd(LEARNING_RATE, **sgd)
  return config
