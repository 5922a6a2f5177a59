r"""Joint Optimization (Tanaka et al., CVPR 2018): the paper's CIFAR-10 setting, stage 1 (label optimisation) + stage 2.

The string after the colon picks the row family, NOISE[,code_defaults]:
  NOISE          symmetric               70%, flips spread over the 9 other classes (realised flip rate 70%)
                 symmetric_include_true  70%, the original code's convention: the new label is drawn from all 10
                                         classes, the true one included (realised flip rate 0.9 x 70% = 63%)
                 asymmetric              40%, the CIFAR-10 semantic map (truck -> automobile, bird -> airplane,
                                         deer -> horse, cat <-> dog), swaps drawn from the clean labels at once
                 cifar10n_KEY            CIFAR-10N human labels (noise type 'dataset', KEY = aggregate | random1 |
                                         random2 | random3 | worst), with the code defaults (our choice)
  code_defaults  optional: the original code's default lr 0.1, alpha 1.0, beta 0.5 instead of the README's setting
Default: symmetric. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data):

  python -m experiments.train --config=experiments/configs/jo_paper.py:asymmetric \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/jo_asym40

Every constant and its source (REFERENCE.md = shared/REFERENCE.md §2; "README" = the original code's README, "code" =
its defaults):
  stage 1: 200 epochs, constant lr (no schedule), SGD momentum 0.9, weight decay 1e-4, batch 128      REFERENCE §2
  stage 1 lr / alpha / beta: symmetric 70%: 0.08 / 1.2 / 0.8; asymmetric 40%: 0.03 / 0.8 / 0.4       README
                             code_defaults: 0.1 / 1.0 / 0.5                                          code
  label update once per epoch from epoch 70 (`begin`), soft (y_i = mean softmax of the last 10 epochs,
  `history_length`)                                                                                  code (REFERENCE §2)
  prior p: uniform over the 10 classes                                                                REFERENCE §2
  stage 2: a fresh network, cross entropy on the stage-1 soft labels, lr 0.2, 120 epochs, lr x0.1 at 40 and 80;
           reported accuracy: the last epoch's                                                        REFERENCE §2
  stage 2 momentum 0.9, weight decay 1e-4, batch 128  our reading: stage 1's (REFERENCE §2 names only lr and schedule)
  data: 45,000 train / 5,000 clean validation (`validation_size` 5000), per-pixel mean-image subtraction only
        (normalization 'mean_image'), pad to 40x40 + random 32x32 crop + random horizontal flip        REFERENCE §2
  network: pre-activation ResNet, 3 stages x 5 blocks, widths 32/64/128 (`preact_resnet_jo`)          REFERENCE §2
  noise rates: symmetric 70%, asymmetric 40% (the README settings' rates)                             REFERENCE §2
  exact-rate injection (noise.exact=True)     REFERENCE §4; the original code draws each label independently
                                              (--config.noise.exact=False)
"""

import ml_collections

from experiments.configs import base

SYNTHETIC_NOISE = ("symmetric", "symmetric_include_true", "asymmetric")
CIFAR10N_KEYS = ("aggregate", "random1", "random2", "random3", "worst")
DEFAULT = "symmetric"

# (lr, alpha, beta) of stage 1.
README_SYMMETRIC = (0.08, 1.2, 0.8)  # README, symmetric 70%
README_ASYMMETRIC = (0.03, 0.8, 0.4)  # README, asymmetric 40%
CODE_DEFAULTS = (0.1, 1.0, 0.5)  # code defaults
NOISE_RATES = {"symmetric": 0.7, "symmetric_include_true": 0.7, "asymmetric": 0.4}  # README settings
STAGE1_EPOCHS = 200  # REFERENCE §2
BEGIN = 70  # code (REFERENCE §2)
HISTORY_LENGTH = 10  # code (REFERENCE §2)
STAGE2_EPOCHS = 120  # REFERENCE §2
STAGE2_LR = 0.2  # REFERENCE §2
STAGE2_LR_BOUNDARIES = (40, 80)  # REFERENCE §2
BATCH_SIZE = 128  # REFERENCE §2
WEIGHT_DECAY = 1e-4  # REFERENCE §2
MOMENTUM = 0.9  # REFERENCE §2
VALIDATION_SIZE = 5000  # REFERENCE §2: 45k / 5k


def parse(arg: str | None) -> tuple[str, bool]:
  """'NOISE[,code_defaults]' -> (noise, code_defaults); ValueError naming the allowed values."""
  parts = [p.strip() for p in (arg or DEFAULT).split(",")]
  allowed = SYNTHETIC_NOISE + tuple(f"cifar10n_{key}" for key in CIFAR10N_KEYS)
  if len(parts) not in (1, 2) or (len(parts) == 2 and parts[1] != "code_defaults") or parts[0] not in allowed:
    raise ValueError(
      f"jo_paper config string {arg!r} must be NOISE[,code_defaults] with NOISE one of {', '.join(allowed)}."
    )
  return parts[0], len(parts) == 2


def stage1_hyper(noise: str, code_defaults: bool) -> tuple[float, float, float]:
  """(lr, alpha, beta) of stage 1: the README's setting for the noise, or the code defaults."""
  if code_defaults or noise.startswith("cifar10n_"):
    return CODE_DEFAULTS
  return README_ASYMMETRIC if noise == "asymmetric" else README_SYMMETRIC


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  noise, code_defaults = parse(arg)
  lr, alpha, beta = stage1_hyper(noise, code_defaults)
  config = base.get_shared()
  config.dataset_kwargs = ml_collections.ConfigDict(
    {"validation_size": VALIDATION_SIZE, "data_dir": ml_collections.config_dict.placeholder(str)}
  )
  if noise.startswith("cifar10n_"):
    config.dataset = "cifar10_n"
    config.dataset_kwargs.noise_key = noise[len("cifar10n_") :]
    config.noise = ml_collections.ConfigDict({"type": "dataset", "rate": 0.0, "exact": True, "dataset": ""})
  else:
    config.dataset = "cifar10"
    config.noise = ml_collections.ConfigDict(
      {"type": noise, "rate": NOISE_RATES[noise], "exact": True, "dataset": "cifar10" if noise == "asymmetric" else ""}
    )
  config.normalization = "mean_image"
  config.augment = ml_collections.ConfigDict({"crop_padding": 4, "flip": True})
  config.model = ml_collections.ConfigDict({"name": "preact_resnet_jo", "kwargs": {}, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.method = {
    "name": "joint_optimization",
    "alpha": alpha,
    "beta": beta,
    "prior": "uniform",
    "begin": BEGIN,
    "history_length": HISTORY_LENGTH,
    "relabel": "soft",
    "stage2": True,
  }
  config.num_epochs = STAGE1_EPOCHS
  config.optimizer = base.optimizer(lr, weight_decay=WEIGHT_DECAY, lr_boundaries=(), momentum=MOMENTUM)
  config.stage2 = {
    "num_epochs": STAGE2_EPOCHS,
    "optimizer": base.optimizer(
      STAGE2_LR, weight_decay=WEIGHT_DECAY, lr_boundaries=STAGE2_LR_BOUNDARIES, momentum=MOMENTUM
    ).to_dict(),
  }
  return config
