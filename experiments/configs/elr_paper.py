r"""ELR, early-learning regularisation (Liu et al., NeurIPS 2020): the CIFAR-10 / CIFAR-100 rows of its configs.

The string after the colon picks the row, DATASET,NOISE[,paper_schedule]:
  DATASET         cifar10 | cifar100
  NOISE           symmetric               flips spread over the C - 1 other classes (realised rate = the rate)
                  symmetric_include_true  the original code's convention: the new label is drawn from all C classes,
                                          the true one included (realised rate = rate (C - 1) / C)
                  asymmetric              CIFAR-10: truck -> automobile, bird -> airplane, deer -> horse, cat <-> dog;
                                          CIFAR-100: class -> next class of its true superclass (REFERENCE §4)
  paper_schedule  optional, cifar10 with a symmetric NOISE only: the paper's CIFAR-10 schedule, 120 epochs with lr
                  x0.01 at 40 and 80 [recalled, REFERENCE §6], instead of the config's cosine with warm restarts
Default: cifar10,symmetric. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data):

  python -m experiments.train --config=experiments/configs/elr_paper.py:cifar10,asymmetric \
      --config.noise.rate=0.4 --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/elr_c10a

Every constant and its source. REFERENCE = shared/REFERENCE.md §6 (shengliu66/ELR@934af53, ELR/config_*.json,
ELR/model/loss.py); "code" = the stored copies read for this file (ELR/config_cifar10.json@2f4cd32,
config_cifar10_asym.json@12d0b6c, config_cifar100.json@4e6cb7d, data_loader/cifar10.py, data_loader/data_loaders.py and
trainer/trainer.py @909687a).
  model: ResNet-34, CIFAR style (`resnet34`, the network of gce_paper.py)          REFERENCE §6
  SGD momentum 0.9, weight decay 1e-3, lr 0.02, batch 128                         REFERENCE §6
  CIFAR-10 symmetric: beta 0.7, lambda 3, 150 epochs, CosineAnnealingWarmRestarts(T_0 10, eta_min 1e-3)
                                                                                  REFERENCE §6 (config_cifar10.json)
  CIFAR-10 asymmetric: beta 0.9, lambda 1, 120 epochs, lr x0.01 at 40 and 80      REFERENCE §6 (config_cifar10_asym)
  CIFAR-100 (every NOISE): beta 0.9, lambda 7, 150 epochs, lr x0.01 at 80 and 120 REFERENCE §6 (config_cifar100)
  45,000 / 5,000 class-balanced train / validation split                          REFERENCE §6
  augmentation: random crop after 4-pixel padding + horizontal flip               code data_loader/data_loaders.py
                                                                                  (RandomCrop(32, padding=4),
                                                                                  RandomHorizontalFlip)
  normalisation: per channel                                                      code data_loaders.py (Normalize
                                                                                  with fixed CIFAR statistics; here
                                                                                  the training split's own)
  the lr schedule changes once per epoch                                          code trainer.py (scheduler.step()
                                                                                  after each epoch)
  noise rates (override with --config.noise.rate=R): CIFAR-10 symmetric 0.8 (config_cifar10.json "percent"),
  CIFAR-100 0.6 (config_cifar100.json "percent"); asymmetric 0.4 our choice (config_cifar10_asym.json's own
  "percent" is 0.8 with "asym" false, i.e. no asymmetric setting; 40% is the paper's asymmetric rate [recalled])
  exact-rate injection (noise.exact=True)       REFERENCE §4. The code's symmetric noise relabels exactly rate x N
                                                examples, each uniformly over all C classes: 'symmetric_include_true'
                                                realises that rate exactly per class.

Stated deviations:
- Cosine with warm restarts: the optimiser has no restarts. The CIFAR-10 symmetric rows use its cosine schedule
  (lr_schedule 'cosine', cosine_epochs 10, lr_min 1e-3), lr_e = 1e-3 + (0.02 - 1e-3)(1 + cos(pi e / 10)) / 2 for
  every epoch e. That equals the warm-restart lr (the same formula with e mod 10) on the epochs with e mod 20 < 10,
  the last ten (140..149) included; on the other epochs (e mod 20 >= 10) it climbs back to 0.02 along the mirrored
  cosine instead of jumping back at once. The alternative, one cosine over all 150 epochs, matches neither the
  cycle nor the final anneal.
- Validation labels: the original's validation labels are noisy too (REFERENCE §6) and its configs monitor
  "max val_my_metric", the (noisy) validation accuracy. The trainer injects noise into the training split only,
  so validation accuracy here is measured against the clean labels: "test at best validation" selects with clean
  labels (optimistic).
- The code's CIFAR-10 asymmetric flips are applied class after class to the already flipped labels (cats flipped
  to dog are flipped on as dogs: REFERENCE §4's warning, seen in code data_loader/cifar10.py); 'asymmetric' here
  draws every flip from the clean labels at once. Its CIFAR-100 asymmetric map is not in REFERENCE §6; ours uses
  the true superclasses (REFERENCE §4).
"""

import ml_collections

from experiments.configs import base

DATASETS = ("cifar10", "cifar100")
NOISES = ("symmetric", "symmetric_include_true", "asymmetric")
OPTIONS = ("paper_schedule",)
DEFAULT = "cifar10,symmetric"

MODEL = "resnet34"  # REFERENCE §6
LEARNING_RATE = 0.02  # REFERENCE §6
MOMENTUM = 0.9  # REFERENCE §6
WEIGHT_DECAY = 1e-3  # REFERENCE §6
BATCH_SIZE = 128  # REFERENCE §6
VALIDATION_SIZE = 5000  # REFERENCE §6: 45k / 5k
LR_DECAY = 0.01  # REFERENCE §6: MultiStepLR gamma 0.01
# Row -> (beta, lambda, epochs, lr schedule). The schedule is ('cosine', T, lr_min) or ('piecewise', boundaries).
ROWS = {
  "cifar10_symmetric": (0.7, 3.0, 150, ("cosine", 10, 1e-3)),  # REFERENCE §6 (warm restarts: see the docstring)
  "cifar10_asymmetric": (0.9, 1.0, 120, ("piecewise", (40, 80))),  # REFERENCE §6
  "cifar100": (0.9, 7.0, 150, ("piecewise", (80, 120))),  # REFERENCE §6
}
PAPER_SCHEDULE_C10 = (120, (40, 80))  # REFERENCE §6 [recalled]: the paper's CIFAR-10 schedule
NOISE_RATES = {"cifar10_symmetric": 0.8, "cifar100_symmetric": 0.6, "asymmetric": 0.4}  # see the docstring


def parse(arg: str | None) -> tuple[str, str, bool]:
  """'DATASET,NOISE[,paper_schedule]' -> (dataset, noise, paper_schedule); ValueError naming the allowed values."""
  parts = [p.strip() for p in (arg or DEFAULT).split(",")]
  if len(parts) not in (2, 3):
    raise ValueError(f"elr_paper config string {arg!r} must be DATASET,NOISE[,paper_schedule], e.g. {DEFAULT!r}.")
  dataset, noise = parts[:2]
  checks = [("dataset", dataset, DATASETS), ("noise", noise, NOISES)]
  if len(parts) == 3:
    checks.append(("option", parts[2], OPTIONS))
  for what, value, allowed in checks:
    if value not in allowed:
      raise ValueError(f"elr_paper: unknown {what} {value!r} in {arg!r}; allowed: {', '.join(allowed)}.")
  paper_schedule = len(parts) == 3
  if paper_schedule and (dataset != "cifar10" or noise == "asymmetric"):
    raise ValueError(
      f"elr_paper: 'paper_schedule' in {arg!r} applies to cifar10 with NOISE symmetric or "
      "symmetric_include_true only (the other rows already use a step schedule)."
    )
  return dataset, noise, paper_schedule


def row(dataset: str, noise: str) -> str:
  """The key of ROWS: which of the original's three configs the (dataset, noise) pair uses."""
  if dataset == "cifar100":
    return "cifar100"
  return "cifar10_asymmetric" if noise == "asymmetric" else "cifar10_symmetric"


def noise_rate(dataset: str, noise: str) -> float:
  return NOISE_RATES["asymmetric" if noise == "asymmetric" else f"{dataset}_symmetric"]


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, paper_schedule = parse(arg)
  beta, lam, num_epochs, schedule = ROWS[row(dataset, noise)]
  if paper_schedule:
    num_epochs, boundaries = PAPER_SCHEDULE_C10
    schedule = ("piecewise", boundaries)
  config = base.get_shared()
  base.paper_data(
    config,
    dataset,
    noise_type=noise,
    rate=noise_rate(dataset, noise),
    noise_dataset=dataset if noise == "asymmetric" else "",
    validation_size=VALIDATION_SIZE,
  )
  config.model = ml_collections.ConfigDict({"name": MODEL, "kwargs": {}, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.method = ml_collections.ConfigDict({"name": "elr", "lam": lam, "beta": beta})
  config.num_epochs = num_epochs
  if schedule[0] == "cosine":
    config.optimizer = base.optimizer(LEARNING_RATE, weight_decay=WEIGHT_DECAY, momentum=MOMENTUM)
    config.optimizer.lr_schedule = "cosine"
    config.optimizer.cosine_epochs = schedule[1]
    config.optimizer.lr_min = schedule[2]
  else:
    config.optimizer = base.optimizer(
      LEARNING_RATE, weight_decay=WEIGHT_DECAY, lr_boundaries=schedule[1], lr_decay=LR_DECAY, momentum=MOMENTUM
    )
  return config
