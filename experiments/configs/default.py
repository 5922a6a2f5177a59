"""The default experiment: CE, GCE, truncated Lq, Joint Optimization and EL on mnist5k at 60% symmetric noise.

  python -m experiments.train --config=experiments/configs/default.py --workdir=workdirs/default

Prints one table (best and last test accuracy, JO label recovery, noise detection precision/recall for truncated
Lq's pruned examples and JO's relabelled ones, realised noise rate, wall time) and writes summary.json into the
workdir. Shared settings live in `config.shared` (e.g. --config.shared.noise.rate=0.4,
--config.shared.seeds="(0,1,2)"); each method's own settings in `config.runs.NAME`.
"""

import ml_collections

from experiments.configs import base
from experiments.configs import ce
from experiments.configs import encouraging
from experiments.configs import gce
from experiments.configs import joint_optimization
from experiments.configs import truncated_lq


def get_config():
  config = base.comparison()  # title from the shared settings: "mnist5k, 60% symmetric noise"
  config.runs = ml_collections.ConfigDict(
    {
      "ce": ce.get_run(),
      "gce": gce.get_run(),
      "truncated_lq": truncated_lq.get_run(),
      "joint_optimization": joint_optimization.get_run(),
      "encouraging": encouraging.get_run(),
    }
  )
  return config
