"""Truncated Lq's threshold k (Zhang & Sabuncu 2018): accuracy and pruning against k at 20% / 40% / 60% noise.

Truncated Lq (q = 0.7, the paper's) with k in {0.1, 0.3, 0.5, 0.7, 0.9} (the paper's default 0.5) x symmetric noise
at 20% / 40% / 60% x seeds 0, 1, 2 on mnist5k: 45 runs, trained as one sweep (noisy_jax.experiment.sweep: k and the
noisy labels per member; pruning with each member's own best-validation parameters). Shortened schedule so that the
45 runs fit in ten minutes on a 2-core CPU: NUM_EPOCHS epochs, lr 0.05 decayed x0.1 at LR_BOUNDARIES, pruning
before epoch PRUNE_START and every PRUNE_EVERY epochs after it (truncated_lq.py: 40 epochs, decay at 20 and 30,
pruning from 14 every 4; the paper: 120 epochs, from 40 every 10). Prints the last and best test accuracy, the
pruned fraction and the detection precision / recall of the pruned set (pruned = flagged as mislabelled) per k and
noise rate, mean ± std over seeds; saves sweep.png and summary.json in the workdir.

  python -m experiments.train --config=experiments/configs/k_sweep.py --workdir=workdirs/k_sweep
"""

from experiments.configs import base
from experiments.configs import truncated_lq
from noisy_jax.experiment import sweep_grid

K_VALUES = (0.1, 0.3, 0.5, 0.7, 0.9)
NOISE_RATES = (0.2, 0.4, 0.6)
SEEDS = (0, 1, 2)
NUM_EPOCHS = 8
LR_BOUNDARIES = (4, 6)  # truncated_lq.py's (20, 30) of 40 epochs, scaled
PRUNE_START, PRUNE_EVERY = 3, 2  # truncated_lq.py's 14 and 4 of 40 epochs, roughly scaled: pruning before 3, 5, 7


def get_config():
  config = base.single(truncated_lq.get_run())
  config.title = "mnist5k, truncated Lq (q = 0.7) against k, symmetric noise"
  config.num_epochs = NUM_EPOCHS
  config.optimizer.lr_boundaries = LR_BOUNDARIES
  config.method.prune_start = PRUNE_START
  config.method.prune_every = PRUNE_EVERY
  config.sweep = sweep_grid.default_sweep()
  config.sweep.grid = (("method.k", K_VALUES), ("noise.rate", NOISE_RATES))
  config.sweep.seeds = SEEDS
  config.sweep.table_keys = (
    "last_test_accuracy",
    "best_test_accuracy",
    "pruned_fraction",
    "detection_precision",
    "detection_recall",
  )
  config.sweep.plot_keys = ("last_test_accuracy", "pruned_fraction", "detection_precision", "detection_recall")
  return config
