"""Hard vs soft relabelling (Joint Optimization ablation), stage 1 on mnist5k at 60% symmetric noise.

Relabels (a) every example hard, (b) only the K examples whose mean prediction disagrees most with their current
label, hard (`label_table.relabel_top_k`), for K = 4 / 36 / 360 (the paper's 50 / 500 / 5000 of CIFAR-10's 50k,
i.e. 0.1% / 1% / 10%, scaled to mnist5k's 3,600 training examples), (c) every example soft (the default). The top-K
update runs every epoch from `begin`, so K examples per epoch. Prints label-recovery accuracy every 5 epochs for
each variant and the comparison table; saves comparison.png (label recovery per epoch) and curves.png per run.

  python -m experiments.train --config=experiments/configs/relabel_ablation.py --workdir=workdirs/relabel_ablation
"""

import ml_collections

from experiments.configs import base
from experiments.configs import joint_optimization

TOP_K = (4, 36, 360)


def get_config():
  config = base.comparison(plots=True)
  config.plot_key = "label_recovery_overall"
  config.curve_table = {"key": "label_recovery_overall", "every": 5}
  runs = {}
  for name, relabel, k in [("soft", "soft", 0), ("hard_all", "hard", 0)] + [
    (f"hard_top{k}", "hard_top_k", k) for k in TOP_K
  ]:
    run = joint_optimization.get_run()
    run.method.relabel = relabel
    run.method.relabel_k = k
    run.method.stage2 = False  # the ablation is about stage 1's labels
    del run.stage2
    runs[name] = run
  config.runs = ml_collections.ConfigDict(runs)
  return config
