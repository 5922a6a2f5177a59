r"""CORES² phase 1 (Cheng et al., ICLR 2021): CIFAR-10 / CIFAR-100 with its code's plan, CIFAR-N as the replication.

The string after the colon picks the row, DATASET,NOISE,RATE or DATASET,LABELS:
  DATASET   cifar10 | cifar100     synthetic noise, NOISE then RATE: symmetric 0.2 | 0.4 | 0.6 (0.2: phase1.py:24's
                                   --noise_rate default; 0.4, 0.6 the paper's [recalled]), pairflip 0.2
                                   (phase1.py:24-25's defaults, --noise_type pairflip). The code's 'symmetric' is
                                   noisify_multiclass_symmetric: 1 - RATE on the diagonal, RATE / (C - 1) to each
                                   other class (data/utils.py:151-174): our 'symmetric'; its pairflip moves RATE to the
                                   next class (data/utils.py:127-149): our 'pairflip'
  DATASET   cifar10_n | cifar100_n CIFAR-N human labels (noise type 'dataset', dataset_kwargs.noise_key), then LABELS:
                                   cifar10_n aggregate | random1 | random2 | random3 | worst; cifar100_n noisy. The
                                   protocol of the CIFAR-N replication (KlemenVovk/noisy-labels
                                   cores2_cifar10_clean.py); CIFAR-100N takes its CIFAR-10 settings (our choice: it
                                   has no CIFAR-100 config)
Default: cifar10_n,worst. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data; CIFAR-N needs its
manual download):

  python -m experiments.train --config=experiments/configs/cores_paper.py:cifar10,symmetric,0.4 \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/cores_c10_sym40
  python -m experiments.train --config=experiments/configs/cores_paper.py:cifar100_n,noisy \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/cores_c100n

A run is one stage, the method's own (noisy_jax.methods.cores): the sieve's epoch program, the run's optimiser giving
lr_plan, each epoch's update divided by 1 + beta (method.divide_lr).

Every constant and its source. "code" = UCSC-REAL/cores@cf0945e (phase1.py "P", loss.py "L", data/cifar.py,
data/datasets.py, data/utils.py, models/resnet.py, README.md); "rep" = KlemenVovk/noisy-labels
(src/noisypy/configs/methods/cores2/cores2_cifar10_clean.py "CC", .../cores2/utils.py, configs/data/cifar10.py).
  CIFAR-10 / CIFAR-100 rows (the code's plan):
  network: ResNet-34, CIFAR style (3x3 stem, stride 1, no max pool), BasicBlocks [3, 4, 6, 3] (registry 'resnet34')
                                                                     README.md (--model resnet); P:167-170;
                                                                     models/resnet.py:72, 103-104
  batch 64                                                           P:157
  epochs 100                                                         P:30 (--n_epoch)
  no validation split: trains on all 50,000 images                   data/cifar.py:68-114 (every training row)
  augmentation: random crop after 4-pixel padding + horizontal flip  data/datasets.py:7-12, 18-23
  SGD without momentum or weight decay; lr_plan 0.1 for 50 epochs then 0.01 (lr_boundaries (50,), decay 0.1), each
           epoch's lr divided by 1 + f_beta(epoch) (the method's divide_lr; --lr 0.05 is never used:
           adjust_learning_rate overwrites it before epoch 0)       P:172, 189, 45-47, 208
  method: beta 0 for 10 epochs, linear 0 -> 2 over 30, then 2; the sieve from epoch 31 (0-based); the CR term with
           the noise prior, updated after every epoch              L:23-62; P:91, 205-212 (the method's defaults)
  normalisation: per channel                                         data/datasets.py:11, 22 (fixed statistics; here
                                                                     the training split's)
  noise: RATE injected exactly (noise.exact=True)                   data/utils.py:100-123 (each label drawn
                                                                     independently: --config.noise.exact=False)
  CIFAR-10N / CIFAR-100N rows (the replication's protocol):
  network: ResNet-34 (registry 'resnet34')                           CC:18-19
  batch 128, crop 4 + flip                                           configs/data/cifar10.py:19; datasets/cifar10.py
  validation split: 10,000 (its Split(0.8) keeps 40,000 for training)
                                                                     configs/data/cifar10.py:11 (CC:16's data config)
  epochs 100                                                         CC:29 max_epochs
  SGD lr 0.1, momentum 0.9, weight decay 5e-4, LambdaLR(lr_plan[e] / (1 + f_beta(e))) with lr_plan [0.1] * 50 +
           [0.01] * 51: the lr of epoch e is 0.1 x lr_plan[e] / (1 + beta_e), so 0.01 / (1 + beta_e) for 50 epochs,
           then 0.001 / (1 + beta_e) (learning_rate 0.01, lr_boundaries (50,), decay 0.1, divide_lr)
                                                                     CC:12, 23-26
  method: the code's loss and schedule (cores2/utils.py:9-49 = L:23-62, f_beta one entry longer), the prior over its
           training split updated after every epoch (cores2.py:62-103): the method's defaults

Stated deviations:
- Instance-dependent noise (data/utils.py:185-211 noisify_instance, the README's and the paper's main rows, and the
  phase-2 confs' 0.2 / 0.4 / 0.6) is not a noise type of noisy_jax: no instance rows. Phase 2 (phase2/, UDA
  semi-supervised training on the sieved split) is not implemented: the rows are phase 1's.
- CIFAR-100: the code's CIFAR100 has no instance path; its symmetric and pairflip noise are noisify's, as CIFAR-10's.
- Model selection and reporting. The code reports every epoch's test accuracy and saves the best test epoch's network
  (P:114-146); the summary here gives the last epoch's and the best test accuracy (the CIFAR-N rows: the one at the
  best validation accuracy too, on clean validation labels, stratified; the replication's are the last 10,000 rows
  of its training set, with their noisy labels).
- Normalisation and the crop's padding: per-channel statistics of the training split, the crop pads with the mean
  (zeros after normalising); the code uses fixed statistics and pads the PIL image with black. PyTorch's default
  initialisation there, the registry's here; avg_pool2d(4) there, the global mean here (the same at 32x32).
- CIFAR-N rows: TFDS's image order differs from torchvision's (each human label stays with its image); the
  replication's CIFAR-N benchmark base uses torchvision's ImageNet-style resnet34, CC:5 its own CIFAR-style one:
  the registry's 'resnet34'.
- The method's own differences (f_beta past its table, the empty-sieve batch, the lr division as a scaled update):
  noisy_jax.core.cores's and noisy_jax.methods.cores's docstrings.
"""

import ml_collections

from experiments.configs import base
from experiments.configs import paper_rows

DATASETS = ("cifar10", "cifar100", "cifar10_n", "cifar100_n")
RATES = {
  "symmetric": (0.2, 0.4, 0.6),  # P:24's default 0.2; 0.4, 0.6 the paper's [recalled]
  "pairflip": (0.2,),  # P:24-25's defaults
}
HUMAN_LABELS = {  # noisy_jax.data.tfds_data's noise_key
  "cifar10_n": ("aggregate", "random1", "random2", "random3", "worst"),
  "cifar100_n": ("noisy",),
}
DEFAULT = "cifar10_n,worst"

# CIFAR-10 / CIFAR-100: the code's plan.
MODEL = "resnet34"  # README.md --model resnet; P:167-170 ResNet34; models/resnet.py:103-104; rep CC:18
BATCH_SIZE = 64  # P:157
NUM_EPOCHS = 100  # P:30 --n_epoch
CROP_PADDING = 4  # data/datasets.py:8, 19 RandomCrop(32, padding=4); rep datasets/cifar10.py
VALIDATION_SIZE = 0  # data/cifar.py: all 50,000 training rows
LEARNING_RATE = 0.1  # P:189 alpha_plan[0] (overwrites --lr 0.05, P:20, at P:208)
LR_BOUNDARIES = (50,)  # P:189 [0.1] * 50 + [0.01] * 50
LR_DECAY = 0.1
MOMENTUM = 0.0  # P:172 SGD(model.parameters(), lr=learning_rate) alone
WEIGHT_DECAY = 0.0  # P:172

# CIFAR-10N / CIFAR-100N: the replication's protocol.
REP_BATCH_SIZE = 128  # rep configs/data/cifar10.py:19
REP_VALIDATION_SIZE = 10000  # rep configs/data/cifar10.py:11 Split(0.8) of 50,000
REP_NUM_EPOCHS = 100  # CC:29 max_epochs
REP_LEARNING_RATE = 0.01  # CC:24 lr 0.1 x CC:26's LambdaLR factor lr_plan[e] (CC:12: 0.1 for e < 50)
REP_LR_BOUNDARIES = (50,)  # CC:12 [0.1] * 50 + [0.01] * (50 + 1)
REP_LR_DECAY = 0.1
REP_MOMENTUM = 0.9  # CC:24
REP_WEIGHT_DECAY = 5e-4  # CC:24

# The method: the code's (noisy_jax.methods.cores's defaults, written out).
METHOD = {
  "name": "cores",
  "beta_warmup_epochs": 10,  # L:57
  "beta_ramp_epochs": 30,  # L:58
  "beta_max": 2.0,  # L:58-59
  "sieve_warmup_epochs": 31,  # L:44 epoch <= 30
  "use_prior": True,  # P:91 noise_prior=noise_prior_cur; rep cores2.py:77-82
  "sieve_mean": "uniform",  # L:34
  "divide_lr": True,  # P:47; rep CC:26
}


def parse(arg: str | None) -> tuple[str, str, float | str]:
  """'DATASET,NOISE,RATE' or 'DATASET,LABELS' -> (dataset, noise or 'human', rate or labels); ValueError naming the
  bad part and the allowed values."""
  dataset, noise, rate_or_labels, _ = paper_rows.parse_row(
    arg or DEFAULT,
    config_name="cores_paper",
    datasets=DATASETS,
    rates=RATES,
    human_labels=HUMAN_LABELS,
    options=(),
  )
  return dataset, noise, rate_or_labels


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, rate_or_labels = parse(arg)
  config = base.get_shared()
  human = noise == "human"
  paper_rows.row_data(
    config, dataset, noise, rate_or_labels, validation_size=VALIDATION_SIZE, human_validation_size=REP_VALIDATION_SIZE
  )
  config.augment = ml_collections.ConfigDict({"crop_padding": CROP_PADDING, "flip": True})
  config.model = ml_collections.ConfigDict({"name": MODEL, "kwargs": {}, "pretrained": "none"})
  config.method = ml_collections.ConfigDict(dict(METHOD))
  if human:
    config.batch_size = REP_BATCH_SIZE
    config.num_epochs = REP_NUM_EPOCHS
    config.optimizer = base.sgd(
      REP_LEARNING_RATE,
      momentum=REP_MOMENTUM,
      weight_decay=REP_WEIGHT_DECAY,
      lr_boundaries=REP_LR_BOUNDARIES,
      lr_decay=REP_LR_DECAY,
    )
  else:
    config.batch_size = BATCH_SIZE
    config.num_epochs = NUM_EPOCHS
    config.optimizer = base.sgd(
      LEARNING_RATE, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY, lr_boundaries=LR_BOUNDARIES, lr_decay=LR_DECAY
    )
  return config
