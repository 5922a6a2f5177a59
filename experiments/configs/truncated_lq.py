"""Truncated Lq with alternating pruning (ACS; Zhang & Sabuncu 2018) on mnist5k with 60% symmetric noise.

q = 0.7, k = 0.5 (paper). The paper prunes from epoch 40 of 120 every 10 epochs (one third of training, before the
first lr decay); here the same proportions are kept for the mnist5k schedule. Pruning probabilities come from the
best-validation parameters (the paper); `prune_params='current'` uses the current parameters.
"""

from experiments.configs import base
from experiments.configs import ce


def get_run():
  run = ce.get_run()
  run.method = {
    "name": "truncated_lq",
    "q": 0.7,
    "k": 0.5,
    "prune_start": 14,
    "prune_every": 4,
    "prune_params": "best_val",
  }
  return run


def get_config():
  return base.single(get_run())
