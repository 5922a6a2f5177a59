"""GCE's q (Zhang & Sabuncu 2018): test accuracy against q at 20% / 40% / 60% symmetric noise on mnist5k.

q in {0.1, 0.2, ..., 1.0} (q -> 0 is cross entropy, q = 1 is MAE; the paper's default 0.7) x 3 noise rates x
seeds 0, 1, 2: 90 runs, trained as one sweep (noisy_jax.experiment.sweep: one compiled step shared by every member, q
and the noisy labels per member). Shortened schedule so that the 90 runs fit in ten minutes on a 2-core CPU: SCHEDULE
below (gce.py: 40 epochs, lr 0.05 decayed x0.1 at 20 and 30; here the same shape scaled down). Prints the last
and best test accuracy (mean ± std over seeds) per q and noise rate; saves sweep.png (accuracy against q, a line
per noise rate with ±std bands) and summary.json in the workdir.

  python -m experiments.train --config=experiments/configs/q_sweep.py --workdir=workdirs/q_sweep
  # the same members one after another with train.run_single (timing comparison), e.g. 9 of them:
  python -m experiments.train --config=experiments/configs/q_sweep.py --config.sweep.seeds="(0,)" \
      --config.sweep.grid="(('method.loss_kwargs.q', (0.1, 0.5, 0.9)), ('noise.rate', (0.2, 0.4, 0.6)))" \
      --config.sweep.sequential=True
"""

from experiments.configs import base
from experiments.configs import gce
from noisy_jax.experiment import sweep_grid

Q_VALUES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
NOISE_RATES = (0.2, 0.4, 0.6)
SEEDS = (0, 1, 2)
NUM_EPOCHS = 6
LR_BOUNDARIES = (3, 5)  # gce.py's (20, 30) of 40 epochs, scaled


def get_config():
  config = base.single(gce.get_run())
  config.title = "mnist5k, GCE test accuracy against q, symmetric noise"
  config.num_epochs = NUM_EPOCHS
  config.optimizer.lr_boundaries = LR_BOUNDARIES
  config.sweep = sweep_grid.default_sweep()
  config.sweep.grid = (("method.loss_kwargs.q", Q_VALUES), ("noise.rate", NOISE_RATES))
  config.sweep.seeds = SEEDS
  return config
