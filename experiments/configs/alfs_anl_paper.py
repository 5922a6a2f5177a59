r"""The asymmetric-loss (ALFs, ICML 2021) and active-negative-loss (ANL, NeurIPS 2023) papers' CIFAR settings.

--config=experiments/configs/alfs_anl_paper.py:SOURCE,DATASET,ROW picks one row (default anl,cifar10,anl_ce):
  SOURCE   'alfs' (hitcszx/ALFs, lnl/exp.py and lnl/config.py) | 'anl' (Virusdoll/Active-Negative-Loss,
           config/DATASET_ROW.json, main.py, trainer.py)
  DATASET  cifar10 | cifar100
  ROW      alfs: agce | aul | ael | nce_agce | nce_aul | nce_ael
           anl:  anl_ce | anl_fl | nce_agce | nce_aul | nce_ael
The noise is 40% symmetric by default; the papers' tables sweep it: --config.noise.rate=0.8, and
--config.noise.type=asymmetric (noisy_jax's class maps: CIFAR-10 truck -> automobile, bird -> airplane, deer ->
horse, cat <-> dog; CIFAR-100 each class to the next of its true superclass; the codes' CIFAR-100 map and ALFs'
CIFAR-10 draw differ: "Asymmetric noise" below). On a GPU/TPU box with TFDS data:

  python -m experiments.train --config=experiments/configs/alfs_anl_paper.py:anl,cifar10,anl_ce \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/anl_c10_anl_ce_sym40

Sources: hitcszx/ALFs@61245e9de0d2d8262495717546c1860ff01421b8 (lnl/; "A" = lnl/dataset.py) and
Virusdoll/Active-Negative-Loss@0c50009cf82959310ea21365a64b01d723ccdac7 ("N" = dataset.py).
Training, every value with its source (both codes train as APL's code does; peers_paper.py's APL setting):
  value                                     ALFs (lnl/exp.py)            ANL (config/*.json "optim", trainer.py)
  model CIFAR-10: the 8-layer CNN apl_cnn   CNN(type='CIFAR10') :128-131 "toymodel8l" (models/toymodel.py)
  model CIFAR-100: CIFAR ResNet-34          ResNet34(num_classes=100)    "resnet34"
  epochs                                    120 / 200 (:81-92)           total_epoch 120 / 200
  SGD lr, momentum 0.9                      0.01 / 0.1 (:85, 91; :132)   learning_rate 0.01 / 0.1 (utils.py:183-187)
  weight decay (coupled)                    1e-4 / 1e-5 (:84, 90)        weight_decay: pairs 1e-4 / 1e-5, ANL 0
  cosine lr, T_max = epochs, eta_min 0      CosineAnnealingLR :133       scheduler cosine, T_max, eta_min 0
                                                                         (utils.py:193-197)
  clip_grad_norm_ 5                         --grad_bound 5. (:36, 144)   grad_bound 5.0 (trainer.py:50)
  batch 128, crop 4 + flip, normalise       --batch_size :32; A:281-286, train_batchsize 128; N:261-269,
                                            309-313                      308-317
  ANL's L1 on all parameters: optimizer.l1  -                            loss "delta" 5e-5 / 5e-7 (loss.py:265-270
                                                                         adds it to the loss; trainer.py:45-51:
                                                                         backward, then clipping)
  symmetric noise: exact counts per class   int(r N) / C per class, each int(T_ij n_i) per class pair
                                            to a uniform other class     (create_noisy_labels, N:17-29, 97-137)
                                            (A:56-70, 136-148, 181-193)
  asymmetric noise (--config.noise.type)    "Asymmetric noise" below     "Asymmetric noise" below
  no validation split; 3 runs               --times 3 (:35, 127)         - (one run per main.py call)
Per-row hyper-parameters: ALFS_ROWS and ANL_ROWS below, each with its file.

Asymmetric noise in the codes, against noisy_jax's 'asymmetric' (noisy_jax.core.noise):
  CIFAR-10   ALFs  the pairs are flipped one after another, truck -> automobile, bird -> airplane, cat -> dog,
                   dog -> cat, deer -> horse: int(RATE n) of the examples that carry the source label at that moment,
                   drawn without replacement (A:125-135; np.random seeded with --seed 123, A:216). Exact counts
                   (noise.exact True), but sequential, difference (b): the dogs to flip are drawn from the 5,000 +
                   int(RATE 5,000) dog labels, former cats included, so in expectation RATE of the dogs end as cat
                   but only RATE (1 - RATE) of the cats as dog (24% at 0.4), and 5,000 (1 + RATE^2) images end
                   labelled cat (5,800 at 0.4). Here every flip is drawn from the clean labels at once: RATE exactly
                   in both directions, 5,000 cats. The other three pairs flip into classes that are never a source,
                   so they are as here.
             ANL   the same map as a transition matrix (get_asym_T_cifar10, N:52-71) and exact counts
                   int(T_ij n_i) per pair, all drawn from the clean labels (create_noisy_labels, N:97-137): as here
                   (noise.exact True); the counts are equal where RATE n_i is an integer (RATE 0.1 ... 0.4).
  CIFAR-100  both  difference (a): each class goes to the next of a block of five consecutive class ids, the last
                   to the first (ALFs: build_for_cifar100 on P[5i:5i+5, 5i:5i+5], A:15-28, 161-175; ANL:
                   get_asym_T_cifar100, N:73-95). CIFAR-100's ids are alphabetical, so the blocks are not the
                   superclasses the codes name (nb_superclasses = 20, A:167; num_superclasses = 20, N:80); here each
                   class goes to the next class of its true superclass (cifar100_superclass_map); no block map is
                   offered. Both keep 1 - RATE and move RATE to one other class.
             ALFs  RATE drawn per example (multiclass_noisify with RandomState(--seed 123): A:31-53, 175, 297;
                   exp.py:37, 99): add --config.noise.exact=False.
             ANL   exact counts int(RATE 500) per class (N:97-137): noise.exact True, as here.
Differences, named: the CIFAR-10 (b) and CIFAR-100 (a) asymmetric noise above. The 8-layer CNN is the same network in
all three codes (APL's ToyModel, ALFs' CNN, ANL's toymodel8l, each with _reset_prams' init). Symmetric counts:
noisy_jax fixes the count of every class pair by rounding RATE n_i / (C - 1); ANL truncates it (N:117; CIFAR-10 at
0.4: 1,998 of 5,000 flipped there, 2,000 here); ALFs flips exactly int(RATE N) / C of each class and draws each new
class uniformly (A:56-70, 136-148, 181-193), so its pair counts vary. Seeds: ALFs seeds once per call with 123
(exp.py:53-56; np.random.seed, A:216) and draws the noisy labels once per call (exp.py:97-103), before its loops over
losses and runs (exp.py:124-127), so its 3 runs share one noisy label set; ANL seeds each call with --seed (main.py:24,
72-75); noisy_jax (seeds 0, 1, 2) draws the noise and the weights from each run's seed. CIFAR-100 augmentation: both
codes add RandomRotation(20) (A:284, N:311), not here. Normalisation: per-channel statistics of the training split
here, the codes' fixed constants (A:278-279, 306-307; N:10-13). NFL/NNFL use the paper's gradient by default; ANL's
code detaches the focal factor (the anl_fl row sets `detach_modulator` True to match it: its numbers come from that
code).
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
