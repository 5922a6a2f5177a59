r"""The asymmetric-loss (ALFs, ICML 2021) and active-negative-loss (ANL, NeurIPS 2023) papers' CIFAR settings.

--config=experiments/configs/alfs_anl_paper.py:SOURCE,DATASET,ROW picks one row (default anl,cifar10,anl_ce):
  SOURCE   'alfs' (hitcszx/ALFs, lnl/exp.py and lnl/config.py) | 'anl' (Virusdoll/Active-Negative-Loss,
           config/DATASET_ROW.json, main.py, trainer.py)
  DATASET  cifar10 | cifar100
  ROW      alfs: agce | aul | ael | nce_agce | nce_aul | nce_ael
           anl:  anl_ce | anl_fl | nce_agce | nce_aul | nce_ael
The noise is 40% symmetric by default; the papers' tables sweep it: --config.noise.rate=0.8, and
--config.noise.type=asymmetric (the dataset's class map: CIFAR-10 truck -> automobile, bird -> airplane, deer ->
horse, cat <-> dog; CIFAR-100 each class to the next of its superclass). On a GPU/TPU box with TFDS data:

  python -m experiments.train --config=experiments/configs/alfs_anl_paper.py:anl,cifar10,anl_ce \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/anl_c10_anl_ce_sym40

Training, every value with its source (both codes train as APL's code does; peers_paper.py's APL setting):
  value                                     ALFs (lnl/exp.py)            ANL (config/*.json "optim", trainer.py)
  model CIFAR-10: the 8-layer CNN apl_cnn   CNN(type='CIFAR10')          "toymodel8l" (models/toymodel.py)
  model CIFAR-100: CIFAR ResNet-34          ResNet34(num_classes=100)    "resnet34"
  epochs                                    120 / 200                    total_epoch 120 / 200
  SGD lr, momentum 0.9                      0.01 / 0.1                   learning_rate 0.01 / 0.1
  weight decay (coupled)                    1e-4 / 1e-5                  weight_decay: pairs 1e-4 / 1e-5, ANL 0
  cosine lr, T_max = epochs, eta_min 0      CosineAnnealingLR            scheduler cosine, T_max, eta_min 0
  clip_grad_norm_ 5                         --grad_bound 5.              grad_bound 5.0
  batch 128, crop 4 + flip, normalise       --batch_size; dataset.py     train_batchsize 128; dataset.py
  ANL's L1 on all parameters: optimizer.l1  -                            loss "delta" 5e-5 / 5e-7 (trainer.py adds it
                                                                         to the loss before backward and clipping)
  symmetric noise: exact counts per class   dataset.py (int(r n) / 10)   create_noisy_labels (int(T n_c) per pair)
  asymmetric noise                          drawn per example (multi-    exact counts per pair
                                            class_noisify): add
                                            --config.noise.exact=False
  no validation split; 3 runs               --times 3                    -
Per-row hyper-parameters: ALFS_ROWS and ANL_ROWS below, each with its file. Differences, named: the 8-layer CNN is
the same network in all three codes (APL's ToyModel, ALFs' CNN, ANL's toymodel8l, each with _reset_prams' init);
noisy_jax rounds per-class noise counts where the codes truncate (at most one example per class pair); ALFs seeds
every run with 123 (noisy_jax: seeds 0, 1, 2). NFL/NNFL use the paper's gradient by default; ANL's code detaches
the focal factor (the anl_fl row sets `detach_modulator` True to match it: its numbers come from that code).
"""

import ml_collections

from experiments.configs import base

ALFS_ROWS = {  # lnl/config.py CIFAR10_CONFIG / CIFAR100_CONFIG: (loss name, hyper-parameters)
  "cifar10": {
    "agce": ("asymmetric_generalized_cross_entropy", {"a": 0.6, "q": 0.6}),
    "aul": ("asymmetric_unhinged_loss", {"a": 5.5, "q": 3.0}),
    "ael": ("asymmetric_exponential_loss", {"a": 2.5}),
    "nce_agce": ("nce_agce", {"alpha": 1.0, "beta": 4.0, "a": 6.0, "q": 1.5}),
    "nce_aul": ("nce_aul", {"alpha": 1.0, "beta": 4.0, "a": 6.3, "q": 1.5}),
    "nce_ael": ("nce_ael", {"alpha": 1.0, "beta": 4.0, "a": 5.0}),
  },
  "cifar100": {
    "agce": ("asymmetric_generalized_cross_entropy", {"a": 0.6, "q": 0.6}),
    "aul": ("asymmetric_unhinged_loss", {"a": 5.5, "q": 3.0}),
    "ael": ("asymmetric_exponential_loss", {"a": 2.5}),
    "nce_agce": ("nce_agce", {"alpha": 10.0, "beta": 0.1, "a": 1.8, "q": 3.0}),
    "nce_aul": ("nce_aul", {"alpha": 10.0, "beta": 0.015, "a": 6.0, "q": 3.0}),
    "nce_ael": ("nce_ael", {"alpha": 10.0, "beta": 0.1, "a": 1.5}),
  },
}
ANL_ROWS = {  # config/{cifar10,cifar100}_ROW.json "loss": (loss name, hyper-parameters, delta of the L1 term)
  "cifar10": {
    "anl_ce": ("anl_ce", {"alpha": 5.0, "beta": 5.0, "min_prob": 1e-7}, 5e-5),
    "anl_fl": ("anl_fl", {"alpha": 5.0, "beta": 5.0, "gamma": 0.5, "min_prob": 1e-7, "detach_modulator": True}, 5e-5),
    "nce_agce": ("nce_agce", {"alpha": 1.0, "beta": 4.0, "a": 6.0, "q": 1.5}, 0.0),
    "nce_aul": ("nce_aul", {"alpha": 1.0, "beta": 4.0, "a": 6.3, "q": 1.5}, 0.0),
    "nce_ael": ("nce_ael", {"alpha": 1.0, "beta": 4.0, "a": 5.0}, 0.0),
  },
  "cifar100": {
    "anl_ce": ("anl_ce", {"alpha": 10.0, "beta": 1.0, "min_prob": 1e-7}, 5e-7),
    "anl_fl": ("anl_fl", {"alpha": 10.0, "beta": 1.0, "gamma": 0.5, "min_prob": 1e-7, "detach_modulator": True}, 5e-7),
    "nce_agce": ("nce_agce", {"alpha": 10.0, "beta": 0.1, "a": 1.8, "q": 3.0}, 0.0),
    "nce_aul": ("nce_aul", {"alpha": 10.0, "beta": 0.015, "a": 6.0, "q": 3.0}, 0.0),
    "nce_ael": ("nce_ael", {"alpha": 10.0, "beta": 0.1, "a": 1.5}, 0.0),
  },
}
MODELS = {"cifar10": "apl_cnn", "cifar100": "resnet34"}  # exp.py CNN / ResNet34; ANL toymodel8l / resnet34
EPOCHS = {"cifar10": 120, "cifar100": 200}  # exp.py epochs; ANL total_epoch (= T_max)
LEARNING_RATES = {"cifar10": 0.01, "cifar100": 0.1}  # exp.py lr; ANL learning_rate
PAIR_WEIGHT_DECAY = {"cifar10": 1e-4, "cifar100": 1e-5}  # exp.py weight_decay; ANL's pair configs weight_decay
ANL_WEIGHT_DECAY = 0.0  # ANL's anl_ce / anl_fl configs: weight_decay 0 (the L1 term instead)
MOMENTUM = 0.9  # exp.py SGD(momentum=0.9); ANL momentum 0.9
GRAD_CLIP_NORM = 5.0  # exp.py --grad_bound 5.; ANL grad_bound 5.0
BATCH_SIZE = 128  # exp.py --batch_size; ANL train_batchsize
SEEDS = (0, 1, 2)  # exp.py --times 3
NOISE_RATE = 0.4  # a default of ours: both papers sweep the rate
DEFAULT = "anl,cifar10,anl_ce"


def _parse(arg: str) -> tuple[str, str, str]:
  parts = tuple(p.strip() for p in arg.split(","))
  rows = {"alfs": ALFS_ROWS, "anl": ANL_ROWS}
  if (
    len(parts) != 3
    or parts[0] not in rows
    or parts[1] not in rows[parts[0]]
    or parts[2] not in rows[parts[0]][parts[1]]
  ):
    allowed = "; ".join(f"{s},{{cifar10,cifar100}},{{{','.join(r['cifar10'])}}}" for s, r in rows.items())
    raise ValueError(f"alfs_anl_paper config string {arg!r}; allowed: {allowed}.")
  return parts


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  source, dataset, row = _parse(arg or DEFAULT)
  if source == "alfs":
    loss, kwargs = ALFS_ROWS[dataset][row]
    l1, weight_decay = 0.0, PAIR_WEIGHT_DECAY[dataset]
  else:
    loss, kwargs, l1 = ANL_ROWS[dataset][row]
    weight_decay = ANL_WEIGHT_DECAY if row.startswith("anl_") else PAIR_WEIGHT_DECAY[dataset]
  config = base.get_shared()
  config.seeds = SEEDS
  base.paper_data(config, dataset, noise_type="symmetric", rate=NOISE_RATE, noise_dataset=dataset)
  config.model = ml_collections.ConfigDict({"name": MODELS[dataset], "kwargs": {}, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.num_epochs = EPOCHS[dataset]
  config.optimizer = base.optimizer(LEARNING_RATES[dataset], weight_decay=weight_decay, momentum=MOMENTUM)
  config.optimizer.lr_schedule = "cosine"
  config.optimizer.cosine_epochs = 0  # the stage's num_epochs: T_max = epochs in both codes
  config.optimizer.lr_min = 0.0
  config.optimizer.grad_clip_norm = GRAD_CLIP_NORM
  config.optimizer.l1 = l1
  config.method = {"name": "loss", "loss": loss, "loss_kwargs": dict(kwargs)}
  return config
