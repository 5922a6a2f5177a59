"""Learning rate vs memorisation (Joint Optimization paper): stage 1 over a grid of learning rates x noise rates.

The paper's claim: with a high learning rate the network resists memorising the noisy labels, which is what lets
stage 1 correct them; with a small one it fits the noise before relabelling starts. Joint Optimization stage 1 on
mnist5k, symmetric noise at 30% / 50% / 70%, constant lr 0.005 / 0.02 / 0.08 (0.08: the paper's value), alpha 1.2,
beta 0.8, 30 epochs with relabelling from epoch 12 (shorter than the default's 50 / 20 so that the nine runs fit
in ten minutes on a 2-core CPU). Prints, per cell, the last-epoch test accuracy and the label-recovery accuracy.

  python -m experiments.train --config=experiments/configs/lr_noise_grid.py --workdir=workdirs/lr_noise_grid
"""

import ml_collections

from experiments.configs import base
from experiments.configs import joint_optimization

LEARNING_RATES = (0.005, 0.02, 0.08)
NOISE_RATES = (0.3, 0.5, 0.7)


def run_name(learning_rate: float, noise_rate: float) -> str:
  """e.g. lr0020_noise50 for lr 0.02 and 50% noise (ConfigDict keys cannot hold dots)."""
  return f"lr{round(1000 * learning_rate):04d}_noise{round(100 * noise_rate)}"


def get_config():
  config = base.comparison("mnist5k, Joint Optimization stage 1, learning rate x symmetric noise rate", plots=True)
  config.plot_key = "label_recovery_overall"
  runs = {}
  for learning_rate in LEARNING_RATES:
    for noise_rate in NOISE_RATES:
      run = joint_optimization.get_run()
      run.num_epochs = 30
      run.method.begin = 12
      run.method.stage2 = False  # the claim is about stage 1
      del run.stage2
      run.optimizer.learning_rate = learning_rate
      run.noise = {"rate": noise_rate}
      runs[run_name(learning_rate, noise_rate)] = run
  config.runs = ml_collections.ConfigDict(runs)
  return config
