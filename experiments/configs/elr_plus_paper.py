r"""ELR+ (Liu, Niles-Weed, Razavian & Fernandez-Granda, NeurIPS 2020, appendix): the CIFAR-10 / CIFAR-100 rows of the
original's ELR_plus configs.

The string after the colon picks the row, DATASET,NOISE:
  DATASET  cifar10 | cifar100
  NOISE    symmetric               flips spread over the C - 1 other classes (realised rate = the rate)
           symmetric_include_true  the original code's convention: the new label is drawn from all C classes, the
                                   true one included (realised rate = rate (C - 1) / C)
           asymmetric              CIFAR-10: truck -> automobile, bird -> airplane, deer -> horse, cat <-> dog;
                                   CIFAR-100: class -> next class of its true superclass (REFERENCE §4)
Default: cifar10,symmetric. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data):

  python -m experiments.train --config=experiments/configs/elr_plus_paper.py:cifar100,symmetric_include_true \
      --config.noise.rate=0.4 --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/elrp_c100

Every constant and its source. REFERENCE = shared/REFERENCE.md §6 (shengliu66/ELR@934af53); "code" = the files of
that commit read for this config: ELR_plus/config_cifar10.json, config_cifar10_asym.json, config_cifar100.json,
data_loader/{data_loaders,cifar10,cifar100}.py, base/base_data_loader.py, base/base_trainer.py, trainer/trainer.py,
model/PreResNet.py, model/loss.py, train.py.
  network: PreActResNet-18, two of them (each with a weight average)    REFERENCE §6; code config_*.json ("arch1",
                                                                        "arch2": PreActResNet18), PreResNet.py
                                                                        (PreActBlock, [2, 2, 2, 2]). Built here as
                                                                        in dividemix_paper.py: see the deviations.
  SGD lr 0.02, momentum 0.9, weight decay 5e-4, both networks           REFERENCE §6; code config_*.json
                                                                        ("optimizer1", "optimizer2")
  batch 128 (each network's loader)                                     REFERENCE §6; code ("batch_size",
                                                                        "batch_size2")
  mixup_alpha 1 (Beta(1, 1), lam_mix = max(lam_mix, 1 - lam_mix))       REFERENCE §6; code config_*.json, trainer.py
  ema_alpha 0.997, ema_update true, ema_step 40000                      REFERENCE §6; code config_*.json
  warm_up 0 (no cross-entropy warm-up epoch)                            code config_*.json ("warmup": 0)
  the lr schedule changes once per epoch                                code trainer.py (lr_scheduler.step() after
                                                                        each network's epoch)
  per row (code config_*.json "train_loss", "coef_step", "lr_scheduler", "trainer"; REFERENCE §6):
      CIFAR-10 symmetric    beta 0.7  lambda 3  coef_step 0      200 epochs  lr x0.1 at epoch 150   config_cifar10
      CIFAR-10 asymmetric   beta 0.9  lambda 1  coef_step 0      200 epochs  lr x0.1 at epoch 150   config_cifar10_asym
      CIFAR-100 (any NOISE) beta 0.9  lambda 7  coef_step 40000  250 epochs  lr x0.1 at epoch 200   config_cifar100
    (the epochs of the boundaries are 0-based: MultiStepLR(milestones [M]) stepped after each epoch runs the
    original's 1-based epochs M + 1, M + 2, ... at 0.002, our 0-based epochs M, M + 1, ...; the CIFAR-100 asymmetric
    row is config_cifar100.json run with the original's --asym flag, as it has no other CIFAR-100 config)
  reweight_labels: on for CIFAR-100 only (soft-CE labels re-weighted by the mixed targets)
                                                                        REFERENCE §6; code loss.py
                                                                        (num_classes == 100)
  ema_step and coef_step are kept in the original's units: its global step counts one network's optimiser steps of
  the ELR+ epochs (base_trainer.py adds result1['local_step'] per epoch), which is what methods.elr_plus_train's
  step counter counts (its `global_step`)                               code base_trainer.py, trainer.py
  45,000 / 5,000 class-balanced train / validation split                REFERENCE §6 (for ELR); code cifar10.py,
                                                                        cifar100.py (train_val_split keeps
                                                                        int(0.9 x 50,000 / C) per class). The
                                                                        configs' "validation_split": 0 only means
                                                                        the loader carves no further split.
  augmentation: random crop after 4-pixel padding + horizontal flip     code data_loaders.py (RandomCrop(32,
                                                                        padding=4), RandomHorizontalFlip)
  normalisation: per channel                                            code data_loaders.py (Normalize with fixed
                                                                        CIFAR-10 / CIFAR-100 statistics; here the
                                                                        training split's own)
  test prediction: argmax of the mean of the two online networks' logits (not the averages)
                                                                        REFERENCE §6; code trainer.py _test_epoch
                                                                        (0.5 (output1 + output2)); the trainer's
                                                                        evaluation of a pair is the same
  noise rates (override with --config.noise.rate=R): CIFAR-10 symmetric 0.8 (config_cifar10.json "percent"),
  CIFAR-10 asymmetric 0.4 (config_cifar10_asym.json "percent" 0.4 with "asym" true), CIFAR-100 symmetric 0.8
  (config_cifar100.json "percent"); CIFAR-100 asymmetric 0.4 our choice (no config of its own; 40% is the paper's
  asymmetric rate [recalled])
  exact-rate injection (noise.exact=True)       REFERENCE §4. The code's symmetric noise relabels ceil(rate x 45,000)
                                                examples of the training split, each uniformly over all C classes:
                                                'symmetric_include_true' realises that transition exactly per class.

Stated deviations:
- The network. As in dividemix_paper.py: the registry has no PreActResNet-18, so the generic pre-activation ResNet
  `preact_resnet32` is built with widths (64, 128, 256, 512) and blocks_per_stage (2, 2, 2, 2), the same stages,
  strides and 1x1 projection shortcuts as the code's PreActResNet18 (PreResNet.py, the same file as DivideMix's).
  It differs in the stem (the code's conv -> BN -> ReLU; ours a bare conv, followed by the first block's BN-ReLU),
  in a BN-ReLU before the average pool that the code lacks, and in initialisation (PyTorch's defaults there).
- One split and one set of noisy labels for both networks. The original builds one data loader per network, and
  each calls the split and the noise injection again with numpy's global generator, which is not reset in between
  (the CIFAR-10 path never seeds it; the CIFAR-100 symmetric path seeds it inside the noise function, after the
  split): its two networks train on different 45,000-example subsets with differently drawn noisy labels, and the
  validation set is network 1's loader's 5,000. Here both networks share the training split, its noisy labels and
  the validation split (each still draws its own order of batches, as the trainer says).
- Validation labels: the original's validation labels are noisy too and its configs monitor "max val_my_metric",
  the (noisy) validation accuracy of the pair. The trainer injects noise into the training split only, so
  validation accuracy here is measured against clean labels: "test at best validation" selects with clean labels
  (optimistic). The original also reports the test accuracy after every epoch.
- Full batches: 45,000 = 351 x 128 + 72. The original trains 352 steps per network and epoch (the last one of 72
  examples); the trainer drops the partial batch, 351 steps (noisy_jax.methods.elr_plus_train). ema_step and coef_step
  keep the original's 40,000, so their ramps end after 40,000 / 351 = 114.0 ELR+ epochs here against 40,000 / 352 =
  113.6 there. The trainer's other stated differences (the averages start as copies of the networks rather than as a
  third initialisation, ...) are in the module docstring of noisy_jax.methods.elr_plus_train.
- Symmetric noise: the code relabels ceil(rate x 45,000) examples of the whole split, each uniformly over all C
  classes (realised rate: rate (C - 1) / C in expectation, per-class counts varying with the draw);
  'symmetric_include_true' with noise.exact gives the same transition exactly per class. 'symmetric' is offered as
  the other convention (exactly rate of the labels wrong), with the same row's values.
- CIFAR-10 asymmetric: the code flips class after class on the already flipped labels (cifar10.py; REFERENCE §4's
  warning): the cats flipped to dog join the dogs that are flipped next, so at 40% about 24% of the cats end up
  wrong, against 40% of each mapped class here (drawn from the clean labels at once).
- CIFAR-100 asymmetric: the code (cifar100.py) flips each example with probability rate to the next class within
  blocks of 5 consecutive class ids, which are not CIFAR-100's superclasses (REFERENCE §4); here the next class of
  the true superclass, exactly rate of each class.
- Normalisation: the code's fixed per-channel statistics are replaced by the training split's per-channel mean and
  std: a fixed affine map of the inputs either way.
"""

import ml_collections

from experiments.configs import base

DATASETS = ("cifar10", "cifar100")
NOISES = ("symmetric", "symmetric_include_true", "asymmetric")
DEFAULT = "cifar10,symmetric"

MODEL = "preact_resnet32"  # the registry's pre-activation ResNet, built as a PreActResNet-18 by MODEL_KWARGS
MODEL_KWARGS = {"widths": (64, 128, 256, 512), "blocks_per_stage": (2, 2, 2, 2)}  # code PreResNet.py PreActResNet18
LEARNING_RATE = 0.02  # REFERENCE §6; code config_*.json
MOMENTUM = 0.9  # code config_*.json
WEIGHT_DECAY = 5e-4  # REFERENCE §6; code config_*.json
LR_DECAY = 0.1  # REFERENCE §6; code MultiStepLR gamma 0.1
BATCH_SIZE = 128  # REFERENCE §6; code "batch_size", "batch_size2"
VALIDATION_SIZE = 5000  # code cifar10.py / cifar100.py train_val_split: 45k / 5k, class-balanced
MIXUP_ALPHA = 1.0  # REFERENCE §6; code "mixup_alpha": 1
EMA_ALPHA = 0.997  # REFERENCE §6; code "ema_alpha"
EMA_UPDATE = True  # REFERENCE §6; code "ema_update"
EMA_STEP = 40000  # REFERENCE §6; code "ema_step" (the original's global steps: see the docstring)
WARM_UP = 0  # code "trainer": {"warmup": 0}
# Row -> (beta, lambda, coef_step, epochs, lr boundary (0-based epoch)). Code config_*.json; REFERENCE §6.
ROWS = {
  "cifar10_symmetric": (0.7, 3.0, 0, 200, 150),  # config_cifar10.json
  "cifar10_asymmetric": (0.9, 1.0, 0, 200, 150),  # config_cifar10_asym.json
  "cifar100": (0.9, 7.0, 40000, 250, 200),  # config_cifar100.json
}
# Default noise rates: the configs' "percent"; CIFAR-100 asymmetric our choice (see the docstring).
NOISE_RATES = {
  "cifar10_symmetric": 0.8,
  "cifar10_asymmetric": 0.4,
  "cifar100_symmetric": 0.8,
  "cifar100_asymmetric": 0.4,
}


def parse(arg: str | None) -> tuple[str, str]:
  """'DATASET,NOISE' -> (dataset, noise); ValueError naming the allowed values."""
  parts = [p.strip() for p in (arg or DEFAULT).split(",")]
  if len(parts) != 2:
    raise ValueError(f"elr_plus_paper config string {arg!r} must be DATASET,NOISE, e.g. {DEFAULT!r}.")
  dataset, noise = parts
  for what, value, allowed in (("dataset", dataset, DATASETS), ("noise", noise, NOISES)):
    if value not in allowed:
      raise ValueError(f"elr_plus_paper: unknown {what} {value!r} in {arg!r}; allowed: {', '.join(allowed)}.")
  return dataset, noise


def row(dataset: str, noise: str) -> str:
  """The key of ROWS: which of the original's three configs the (dataset, noise) pair uses."""
  if dataset == "cifar100":
    return "cifar100"
  return "cifar10_asymmetric" if noise == "asymmetric" else "cifar10_symmetric"


def noise_rate(dataset: str, noise: str) -> float:
  return NOISE_RATES[f"{dataset}_{'asymmetric' if noise == 'asymmetric' else 'symmetric'}"]


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise = parse(arg)
  beta, lam, coef_step, num_epochs, boundary = ROWS[row(dataset, noise)]
  config = base.get_shared()
  base.paper_data(
    config,
    dataset,
    noise_type=noise,
    rate=noise_rate(dataset, noise),
    noise_dataset=dataset if noise == "asymmetric" else "",
    validation_size=VALIDATION_SIZE,
  )
  config.model = ml_collections.ConfigDict({"name": MODEL, "kwargs": dict(MODEL_KWARGS), "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.method = ml_collections.ConfigDict(
    {
      "name": "elr_plus",
      "beta": beta,
      "lam": lam,
      "mixup_alpha": MIXUP_ALPHA,
      "coef_step": coef_step,
      "ema_alpha": EMA_ALPHA,
      "ema_update": EMA_UPDATE,
      "ema_step": EMA_STEP,
      "warm_up": WARM_UP,
      "reweight_labels": dataset == "cifar100",
    }
  )  # code loss.py: re-weighted iff num_classes == 100
  config.num_epochs = num_epochs
  config.optimizer = base.optimizer(
    LEARNING_RATE, weight_decay=WEIGHT_DECAY, lr_boundaries=(boundary,), lr_decay=LR_DECAY, momentum=MOMENTUM
  )
  return config
