"""Encouraging loss log_end sweep (Zhao et al. 2022) against CE, on clean and 60%-noisy mnist5k labels.

EL at log_end in {0.5, 0.75, 1.0} (1.0 = the full bonus, the paper's MNIST setting; 0.75 its CIFAR/ImageNet
default) and CE, each with clean training labels and with 60% symmetric noise; same schedule as the default
comparison (40 epochs, lr 0.05 decayed x0.1 at 20 and 30). The table's "margin" column is the mean log-probability
margin log p_y - max_{c != y} log p_c of the correctly classified test examples after the last epoch: EL's claim is
that its bonus keeps pushing the well-classified examples further from the boundary than CE does.

  python -m experiments.train --config=experiments/configs/log_end_sweep.py --workdir=workdirs/log_end_sweep
"""

import ml_collections

from experiments.configs import base
from experiments.configs import ce
from experiments.configs import encouraging

LOG_ENDS = (0.5, 0.75, 1.0)
NOISE = {"clean": {"type": "none", "rate": 0.0}, "noisy60": {"type": "symmetric", "rate": 0.6}}


def get_config():
  config = base.comparison("mnist5k, log_end sweep, clean and 60% symmetric noise", plots=True)
  runs = {}
  for noise_name, noise in NOISE.items():
    run = ce.get_run()
    run.noise = dict(noise)
    runs[f"{noise_name}_ce"] = run
    for log_end in LOG_ENDS:
      run = encouraging.get_run()
      run.method.log_end = log_end
      run.noise = dict(noise)
      runs[f"{noise_name}_el{round(100 * log_end)}"] = run  # e.g. clean_el75: log_end 0.75
  config.runs = ml_collections.ConfigDict(runs)
  return config
