r"""The f-divergence method (Wei & Liu, ICLR 2021): CIFAR-10 / CIFAR-100 with its code's warm-up-then-D_f plan,
CIFAR-N as the replication.

The string after the colon picks the row, DATASET,NOISE,RATE[,DIVERGENCE] or DATASET,LABELS[,DIVERGENCE]:
  DATASET   cifar10      NOISE random, RATE 0.5 | 0.6: the code's --r 0.5 / 0.6 ("Random-Low / -High",
                         CIFAR-10/README.md:21-23), whose shipped label files (noise_label/CIFAR10_noise_r0_5.pt,
                         r0_6.pt) redraw a label uniformly over all 10 classes with probability 0.5 / 0.7
                         (measured on the files: diagonal 0.55 / 0.37, every other entry 0.05 / 0.07; flip fractions
                         0.449 / 0.629): our 'symmetric_include_true' at 0.5 / 0.7, injected exactly
            cifar100     NOISE symmetric, RATE 0.2 | 0.4 (our choice: the code's CIFAR-100 label files, --r 0.1 ... 0.4,
                         are sparse and 'uniform' transitions that no noise type here expresses)
  DATASET   cifar10_n | cifar100_n  CIFAR-N human labels (noise type 'dataset', dataset_kwargs.noise_key), then LABELS:
                         cifar10_n aggregate | random1 | random2 | random3 | worst; cifar100_n noisy. The protocol of
                         the CIFAR-N replication (KlemenVovk/noisy-labels f_divergence_cifar10_clean.py); CIFAR-100N
                         takes its CIFAR-10 settings (our choice: it has no CIFAR-100 f-divergence config)
  DIVERGENCE             optional, one of noisy_jax.core.f_divergence.DIVERGENCES; default Total-Variation (the
                         READMEs' "used divergence list": Total-Variation, Jenson-Shannon, Pearson, KL, Jeffrey)
Default: cifar10_n,worst. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data; CIFAR-N needs its
manual download):

  python -m experiments.train --config=experiments/configs/f_divergence_paper.py:cifar10,random,0.6,Jenson-Shannon \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/fdiv_c10_random06_js
  python -m experiments.train --config=experiments/configs/f_divergence_paper.py:cifar10_n,worst \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/fdiv_c10n_worst

A run is two stages (noisy_jax.methods.f_divergence): 'warmup' (config.warmup: cross entropy from a fresh network)
then the method's own 'stage1' (the run's num_epochs and optimizer: the f-divergence loss from the warm-up's
best-validation network, a new SGD).

Every constant and its source. "code" = UCSC-REAL/Robust-f-divergence-measures@93d9efe (CIFAR-10/runner_CE.py "CE",
CIFAR-10/runner.py "R", CIFAR-10/noise_data_cifar_10.py "D", CIFAR-10/model.py "M", README.md; the CIFAR-100 files
"CE100", "R100", "D100"); "rep" = KlemenVovk/noisy-labels@3d92600 (src/noisypy/configs/methods/f_divergence/
f_divergence_cifar10_clean.py "FC", .../learning_strategies/f_divergence/f_divergence.py "FD", utils.py "FU",
configs/data/cifar10.py, data/datasets/cifar10.py).
  CIFAR-10 / CIFAR-100 rows (the code's plan):
  network: PreAct ResNet-18 (resnet_cifar18_pre: ResNetCIFAR(PreActBlock, [2, 2, 2, 2]), widths 64..512): the
           registry's pre-activation ResNet with widths (64, 128, 256, 512), blocks_per_stage (2, 2, 2, 2)
                                                                     CE:104; M:40-63, 122-158
  batch 128                                                          README.md:19, 30 (--batchsize 128); D:26
  validation split: 10,000 (data_batch_5; CIFAR-100: the last 10,000 training rows)
                                                                     D:43-52, 107-117; D100:98-114
  augmentation: random crop after 4-pixel padding + horizontal flip  D:262-268 (and RandomRotation(15): not here)
  warm-up ('warmup'): cross entropy, 240 epochs, SGD momentum 0.9, weight decay 5e-4, lr 0.1 / 0.01 / 0.001 /
           0.0001 from epochs 0 / 60 / 120 / 180 (lr_boundaries (60, 120, 180), decay 0.1)
                                                                     CE:20, 110-117; CE100:21, 93-100
  f-divergence ('stage1', the run's own): from the warm-up's best-validation network; 100 epochs; SGD momentum 0.9,
           weight decay 5e-4; lr 0.01 / 1e-3 / 1e-4 / 1e-5 from epochs 0 / 30 / 60 / 90 (its 1e-6 from epoch 120
           is past the end)                                          R:21, 212, 224-234; CE:126-128
  divergence Total-Variation (the row's DIVERGENCE otherwise)        README.md:25's list; FC:24
  prob_epsilon: CIFAR-10 0 (ProbLossStable adds none), CIFAR-100 1e-5
                                                                     R:94-103; R100:97-105
  noise: cifar10 'random' as above, exact injection                  noise_label/CIFAR10_noise_r0_{5,6}.pt
  CIFAR-10N / CIFAR-100N rows (the replication's protocol):
  network: ResNet-34 (registry 'resnet34')                           FC:20-21
  batch 128, crop 4 + flip                                           configs/data/cifar10.py:19; datasets/cifar10.py
                                                                     :13-20
  validation split: 10,000 (its Split(0.8) keeps 40,000 for training)
                                                                     configs/data/cifar10.py:11
  warm-up ('warmup'): 2 epochs of cross entropy, SGD lr 0.1, momentum 0.9, weight decay 5e-4, MultiStepLR([60, 120,
           180, 240], 0.1) (not reached in 2 epochs)                 FC:24, 27-28, 33; FD:64, 115 (epochs 0 and 1)
  f-divergence ('stage1'): 100 - 2 = 98 epochs from the warm-up's best-validation network (FD:194-203), a new SGD lr
           0.01, momentum 0.9, weight decay 5e-4, its own MultiStepLR([30, 60, 90, 120], 0.1) stepped after each of
           its epochs (FD:125-132): lr_boundaries (30, 60, 90)       FC:29, 34, 38
  divergence Total-Variation, prob_epsilon 0                         FC:24; FU:17-26

Stated deviations:
- Model selection: the code keeps the f-divergence stage's network of the best validation f-score (R:253-265; the
  replication FD:204-209); the trainer selects by validation accuracy (noisy_jax.methods.f_divergence's docstring).
  The validation labels: the code's are the noisy labels of its held-out rows (D:107-117, R:243-246); the trainer's
  validation split is carved from the training split and scored on its clean labels.
- Noise: only the code's 'random' CIFAR-10 files have a transition that a noise type here expresses; its sparse (r
  0.1, 0.2: class pairs flipped at unequal rates) and 'uniform' (r 0.3, 0.4) files, and all of CIFAR-100's, have no
  row. The labels are drawn here at the files' rates, not read from them.
- Augmentation and normalisation: no RandomRotation(15) here; per-channel statistics of the training split (the
  code: ImageNet's mean and std on CIFAR-10, D:209-210, CIFAR-100's own, D100:209).
- The network: the code's stem is conv -> BN -> ReLU and it has no BN -> ReLU before the pooling (M:143-152); ours
  a bare conv stem and a final BN -> ReLU. PyTorch's default initialisation there, the registry's here.
- CIFAR-100/runner.py:21 sets num_epochs = 1 (its lr settings run to epoch 120): the rows take CIFAR-10's 100.
- The code builds a new SGD every epoch (R:234, CE:117: the momentum restarts); here one per stage.
- CIFAR-N rows: TFDS's image order differs from torchvision's (each human label stays with its image); validation
  rows stratified with clean labels here, the replication's last 10,000 of its training set.
- The method's own differences (peer draws, the warm-up's exact cross entropy, soft labels): noisy_jax.methods.
  f_divergence's docstring.
"""

import ml_collections

from experiments.configs import base
from experiments.configs import paper_rows
from noisy_jax.core import f_divergence as fdiv_core

DATASETS = ("cifar10", "cifar100", "cifar10_n", "cifar100_n")
RATES = {"random": (0.5, 0.6), "symmetric": (0.2, 0.4)}  # CIFAR-10/README.md:21-23 (r 0.5 / 0.6); CIFAR-100: ours
NOISE_OF_DATASET = {"cifar10": "random", "cifar100": "symmetric"}
# The code's --r 'random' files: redrawn uniformly over all classes with this probability (measured on the files).
RANDOM_REDRAW = {0.5: 0.5, 0.6: 0.7}
HUMAN_LABELS = {  # noisy_jax.data.tfds_data's noise_key
  "cifar10_n": ("aggregate", "random1", "random2", "random3", "worst"),
  "cifar100_n": ("noisy",),
}
DIVERGENCES = fdiv_core.DIVERGENCES
DEFAULT = "cifar10_n,worst"

# CIFAR-10 / CIFAR-100: the code's plan.
MODEL = "preact_resnet32"  # the registry's pre-activation ResNet, built as a PreAct ResNet-18 (CE:104; M:157-158)
MODEL_KWARGS = {"widths": (64, 128, 256, 512), "blocks_per_stage": (2, 2, 2, 2)}  # M:126-132
BATCH_SIZE = 128  # CIFAR-10/README.md:19, 30 --batchsize 128; D:26
CROP_PADDING = 4  # D:263 RandomCrop(32, 4)
VALIDATION_SIZE = 10000  # D:43-52 data_batch_5; D100:98-114 the last 10,000
WARMUP_EPOCHS = 240  # CE:20; CE100:21
WARMUP_LEARNING_RATE = 0.1  # CE:110
WARMUP_LR_BOUNDARIES = (60, 120, 180)  # CE:111-116
WARMUP_LR_DECAY = 0.1  # CE:110-116: 0.1, 0.01, 0.001, 0.0001
MOMENTUM = 0.9  # CE:117; R:234
WEIGHT_DECAY = 5e-4  # CE:117; R:234
FDIV_EPOCHS = 100  # R:21
FDIV_LEARNING_RATE = 0.01  # R:224-225
FDIV_LR_BOUNDARIES = (30, 60, 90)  # R:226-231 (R:232-233's epoch 120 is past the end)
FDIV_LR_DECAY = 0.1
DIVERGENCE = "Total-Variation"  # CIFAR-10/README.md:25's list (its first); FC:24
PROB_EPSILON = {"cifar10": 0.0, "cifar100": fdiv_core.CIFAR100_PROB_EPSILON}  # R:103; R100:105

# CIFAR-10N / CIFAR-100N: the replication's protocol.
REP_MODEL = "resnet34"  # FC:20
REP_VALIDATION_SIZE = 10000  # configs/data/cifar10.py:11 Split(0.8) of 50,000
REP_TOTAL_EPOCHS = 100  # FC:38 max_epochs
REP_WARMUP_EPOCHS = 2  # FC:24; FD:64, 115
REP_WARMUP_LEARNING_RATE = 0.1  # FC:28
REP_WARMUP_LR_BOUNDARIES = (60, 120, 180, 240)  # FC:33
REP_FDIV_LEARNING_RATE = 0.01  # FC:29
REP_FDIV_LR_BOUNDARIES = (30, 60, 90, 120)  # FC:34
REP_LR_DECAY = 0.1  # FC:33-34
REP_MOMENTUM = 0.9  # FC:28-29
REP_WEIGHT_DECAY = 5e-4  # FC:28-29
REP_PROB_EPSILON = 0.0  # FU:26


def parse(arg: str | None) -> tuple[str, str, float | str, str]:
  """'DATASET,NOISE,RATE[,DIVERGENCE]' or 'DATASET,LABELS[,DIVERGENCE]' -> (dataset, noise or 'human', rate or
  labels, divergence); ValueError naming the bad part and the allowed values."""
  arg = arg or DEFAULT
  dataset = arg.split(",")[0].strip()
  rates = {NOISE_OF_DATASET[dataset]: RATES[NOISE_OF_DATASET[dataset]]} if dataset in NOISE_OF_DATASET else RATES
  dataset, noise, rate_or_labels, divergence = paper_rows.parse_row(
    arg,
    config_name="f_divergence_paper",
    datasets=DATASETS,
    rates=rates,
    human_labels=HUMAN_LABELS,
    options=DIVERGENCES,
  )
  return dataset, noise, rate_or_labels, divergence or DIVERGENCE


def _code_rows(config, dataset, noise, rate):
  """The code's data, network and two plans (module docstring)."""
  if noise == "random":
    base.paper_data(
      config, dataset, noise_type="symmetric_include_true", rate=RANDOM_REDRAW[rate], validation_size=VALIDATION_SIZE
    )
  else:
    base.paper_data(config, dataset, noise_type="symmetric", rate=rate, validation_size=VALIDATION_SIZE)
  config.model = ml_collections.ConfigDict({"name": MODEL, "kwargs": dict(MODEL_KWARGS), "pretrained": "none"})
  sgd = {"momentum": MOMENTUM, "weight_decay": WEIGHT_DECAY}
  warmup = base.sgd(WARMUP_LEARNING_RATE, lr_boundaries=WARMUP_LR_BOUNDARIES, lr_decay=WARMUP_LR_DECAY, **sgd)
  config.warmup = ml_collections.ConfigDict({"num_epochs": WARMUP_EPOCHS, "optimizer": warmup})
  config.num_epochs = FDIV_EPOCHS
  config.optimizer = base.sgd(FDIV_LEARNING_RATE, lr_boundaries=FDIV_LR_BOUNDARIES, lr_decay=FDIV_LR_DECAY, **sgd)
  return PROB_EPSILON[dataset]


def _replication_rows(config, dataset, labels):
  """The replication's data, network and two plans (module docstring)."""
  paper_rows.row_data(config, dataset, "human", labels, validation_size=REP_VALIDATION_SIZE)
  config.model = ml_collections.ConfigDict({"name": REP_MODEL, "kwargs": {}, "pretrained": "none"})
  sgd = {"momentum": REP_MOMENTUM, "weight_decay": REP_WEIGHT_DECAY, "lr_decay": REP_LR_DECAY}
  warmup = base.sgd(REP_WARMUP_LEARNING_RATE, lr_boundaries=REP_WARMUP_LR_BOUNDARIES, **sgd)
  config.warmup = ml_collections.ConfigDict({"num_epochs": REP_WARMUP_EPOCHS, "optimizer": warmup})
  config.num_epochs = REP_TOTAL_EPOCHS - REP_WARMUP_EPOCHS
  config.optimizer = base.sgd(REP_FDIV_LEARNING_RATE, lr_boundaries=REP_FDIV_LR_BOUNDARIES, **sgd)
  return REP_PROB_EPSILON


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, rate_or_labels, divergence = parse(arg)
  config = base.get_shared()
  if noise == "human":
    prob_epsilon = _replication_rows(config, dataset, rate_or_labels)
  else:
    prob_epsilon = _code_rows(config, dataset, noise, rate_or_labels)
  config.augment = ml_collections.ConfigDict({"crop_padding": CROP_PADDING, "flip": True})
  config.batch_size = BATCH_SIZE
  config.method = ml_collections.ConfigDict(
    {
      "name": "f_divergence",
      "divergence": divergence,
      "prob_epsilon": prob_epsilon,
      "warmup": True,
      "warmup_start": "best",
    }
  )
  return config
