"""Memorisation (Joint Optimization paper, Tanaka et al. 2018, the figure on memorising noisy labels).

Cross entropy with a small constant learning rate on mnist5k with 90% symmetric noise in the original JO code's
convention (the noisy label is drawn over all classes, the true one included: 81% of the labels actually change, and
the true class stays the most frequent given label of its images, 19% against 9% for each other class). The claim:
the training loss keeps falling towards zero as the network memorises the noisy labels while test accuracy
collapses. Prints per epoch: train loss, fit of the given labels (eval mode, whole training split), fraction of the
mislabelled examples predicted as their wrong label, test accuracy; saves curves.png and comparison.png.

  python -m experiments.train --config=experiments/configs/memorisation.py --workdir=workdirs/memorisation
"""

import ml_collections

from experiments.configs import base
from experiments.configs import ce


def get_config():
  config = base.comparison(plots=True)
  config.shared.noise.type = "symmetric_include_true"
  config.shared.noise.rate = 0.9
  config.shared.eval_train = True  # the memorisation curves need the training split scored every epoch
  config.epoch_table = ("train_loss", "train_accuracy_given_labels", "memorised_fraction", "test_accuracy")
  run = ce.get_run()
  run.num_epochs = 60
  run.optimizer = base.optimizer(0.01, weight_decay=0.0, lr_boundaries=())  # small constant lr, no decay
  config.runs = ml_collections.ConfigDict({"ce_small_lr": run})
  return config
