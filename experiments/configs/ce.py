"""Cross entropy on mnist5k with 60% symmetric noise: the baseline every method is compared with."""

from experiments.configs import base


def get_run():
  run = base.ml_collections.ConfigDict()
  run.method = {"name": "loss", "loss": "cross_entropy", "loss_kwargs": {}}
  run.num_epochs = 40
  run.optimizer = base.optimizer(0.05, lr_boundaries=(20, 30))
  return run


def get_config():
  return base.single(get_run())
