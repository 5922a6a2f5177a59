"""Generalized cross entropy (Lq, Zhang & Sabuncu 2018) on mnist5k with 60% symmetric noise.

q = 0.7 is the paper's default. Same optimiser and schedule as ce.py so that only the loss differs.
"""

from experiments.configs import base
from experiments.configs import ce


def get_run():
  run = ce.get_run()
  run.method = {"name": "loss", "loss": "generalized_cross_entropy", "loss_kwargs": {"q": 0.7}}
  return run


def get_config():
  return base.single(get_run())
