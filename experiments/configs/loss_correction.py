"""Forward loss correction (Patrini et al., CVPR 2017) on mnist5k with 60% symmetric noise.

The corrected cross entropy -log (T^T p)_y~ with the noise model's own transition matrix ('known'); the optimiser
and schedule are ce.py's, so that only the loss differs. Variants from the command line:
  --config.method.correction=backward        (T^-1 l)_y~ instead (unbiased; can be negative)
  --config.method.transition=estimated       T from anchor points of a cross-entropy run on the same noisy labels
                                             for the same epochs, 97th-percentile filter (the paper's CIFAR-10
                                             setting; --config.method.percentile, --config.method.shared_filter)
"""

from experiments.configs import base
from experiments.configs import ce


def get_run():
  run = ce.get_run()
  run.method = {
    "name": "loss_correction",
    "correction": "forward",
    "transition": "known",
    "percentile": 97.0,
    "shared_filter": False,
  }
  return run


def get_config():
  return base.single(get_run())
