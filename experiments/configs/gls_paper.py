r"""GLS (Wei et al., ICML 2022): CIFAR-10 / CIFAR-100 with its code's warm-up-then-GLS plan, CIFAR-N as the replication.

The string after the colon picks the row, DATASET,symmetric,RATE,r=R or DATASET,LABELS[,r=R]:
  DATASET   cifar10 | cifar100     symmetric noise, then RATE: 0.2 (the README's runs and the scripts' --noise_rate
                                   default) | 0.4 | 0.6 (the paper's higher rates [recalled]; the README: "when noise
                                   rates are large, warming up with CE loss makes PLS and NLS reach a better
                                   performance"). The code's 'symmetric' is noisify_multiclass_symmetric: 1 - RATE on
                                   the diagonal, RATE / (C - 1) to each other class (data/utils.py:164-177), so RATE is
                                   the wrong fraction: our 'symmetric' (not 'symmetric_include_true')
            r=R                    required: the smooth rate, one of the README's candidates 0.8, 0.6, 0.4, 0.2, 0.0,
                                   -0.2, -0.4, -0.6, -0.8, -1.0, -2.0, -4.0, -6.0, -8.0 (README.md:15). The code tunes
                                   r per setting and publishes no best value per row (main_GLS_load.py:32's default
                                   0.1 is not a candidate), so the row names it
  DATASET   cifar10_n | cifar100_n CIFAR-N human labels (noise type 'dataset', dataset_kwargs.noise_key), then LABELS:
                                   cifar10_n aggregate | random1 | random2 | random3 | worst; cifar100_n noisy. The
                                   protocol of the CIFAR-N replication (KlemenVovk/noisy-labels GLS_cifar10_clean.py);
                                   CIFAR-100N takes its CIFAR-10 settings (our choice: it has no CIFAR-100 GLS config)
            r=R                    optional, the same candidates; default -0.2 (GLS_cifar10_clean.py:20)
Default: cifar10_n,worst. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data; CIFAR-N needs its
manual download):

  python -m experiments.train --config=experiments/configs/gls_paper.py:cifar10,symmetric,0.4,r=-0.2 \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/gls_c10_sym40_nls02
  python -m experiments.train --config=experiments/configs/gls_paper.py:cifar100_n,noisy \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/gls_c100n

A run is two stages (noisy_jax.methods.gls): 'warmup' (config.warmup: cross entropy from a fresh network) then the
method's own 'stage1' (the run's num_epochs and optimizer: the GLS loss from the warm-up's network, a new SGD).

Every constant and its source. "code" = UCSC-REAL/negative-label-smoothing (main_warmup.py "W", main_GLS_load.py
"L", loss.py, data/cifar.py, data/datasets.py, data/utils.py, models/resnet.py, README.md); "rep" =
KlemenVovk/noisy-labels (src/noisypy/configs/methods/GLS/GLS_cifar10_clean.py "GC", .../GLS/GLS.py,
configs/data/cifar10.py).
  CIFAR-10 / CIFAR-100 rows (the code's plan):
  network: ResNet-34, CIFAR style (3x3 stem, stride 1, no max pool), BasicBlocks [3, 4, 6, 3], widths 64..512
           (registry 'resnet34')                                     W:125, L:125 (--model default 'resnet');
                                                                     models/resnet.py:125-164
  batch 128                                                          W:108, 134-137; L:107, 141-144
  no validation split: trains on all 50,000 images                   data/cifar.py:68-92 (every training row)
  augmentation: random crop after 4-pixel padding + horizontal flip  data/datasets.py:7-12, 18-23
  warm-up ('warmup'): cross entropy (wa 1, wb 0), SGD without momentum or weight decay; 120 epochs; lr 0.1 / 0.01 /
           0.001 for 40 epochs each, set before each epoch (lr_boundaries (40, 80), decay 0.1; --lr 0.05 is never
           used: adjust_learning_rate overwrites it before epoch 0)   W:29-31, 127, 144, 160
  GLS ('stage1', the run's own): from the warm-up's network; SGD momentum 0.9, Nesterov, weight decay 1e-4; lr 1e-6
           for all 100 epochs (the --lr default 0.1 is overwritten likewise); wa 0, wb 1
                                                                     L:29-31, 131-134, 151, 166
  GLS loss: (wa + wb (1 - r)) (-log p_y) + wb r (-mean_c log p_c), the batch mean
                                                                     loss.py:25-34
  normalisation: per channel                                         data/datasets.py:11, 22 (fixed statistics; here
                                                                     the training split's)
  noise: symmetric at RATE, exact-rate injection (noise.exact=True)  data/utils.py:100-123, 164-193 (each label drawn
                                                                     independently: --config.noise.exact=False)
  CIFAR-10N / CIFAR-100N rows (the replication's protocol):
  network: ResNet-34 (registry 'resnet34')                           GC:14-15
  batch 128, crop 4 + flip                                           configs/data/cifar10.py:19; datasets/cifar10.py
  validation split: 10,000 (its Split(0.8) keeps 40,000 for training)
                                                                     configs/data/cifar10.py:11 (GC:12's data config)
  smooth rate -0.2                                                   GC:18-21
  warm-up ('warmup'): 2 epochs of cross entropy, SGD lr 0.01, momentum 0.9, weight decay 5e-4, MultiStepLR([60],
           0.1) (not reached in 2 epochs)                            GC:19, 23-26
  GLS ('stage1'): 100 - 2 = 98 epochs from the warm-up's best-validation network, a new SGD with the same settings
           and its own MultiStepLR([60], 0.1): lr 0.01 for its first 60 epochs, 0.001 after (lr_boundaries (60,))
                                                                     GC:24-30; GLS.py:80-101, 132-158
    The replication runs both stages in one Lightning run of max_epochs 100: epochs 0-1 train with the warm-up's
    optimizer, its scheduler stepped after epoch 0 only (GLS.py:92-101 skip the step at the switch and at the last
    epoch); epochs 2-99 with the second optimizer, whose scheduler starts at 0 and is stepped after each epoch, so its
    epoch k (0-based) trains at 0.01 x 0.1^[k >= 60]. Here those are two stages: config.warmup (2 epochs, its own
    SGD) and the run's num_epochs 98 and optimizer, whose schedule counts from stage1's first epoch: the same lr per
    epoch.

Stated deviations:
- Which warm-up network the GLS stage starts from. The code loads the warm-up epoch with the best *test* accuracy
  (W:84-91, L:131). The CIFAR rows have no validation split (the code trains on all 50,000), so the trainer's 'best'
  is the warm-up's final network (method.warmup_start 'final' says so). '--config.method.warmup_start=best
  --config.dataset_kwargs.validation_size=5000' selects by clean validation accuracy instead. The CIFAR-N rows select
  by validation accuracy, as the replication (GLS.py:132-136), but here on clean validation labels, stratified; the
  replication's are the last 10,000 rows of its training set. Its validation split is GC:12's data config
  (Split(0.8)); its CIFAR-N data configs (configs/data/cifar10n.py:12, cifar100n.py:12) use Split(1), no validation
  rows, with which GLS.py:90 would have no best network to load: the rows keep GC's 10,000.
- CIFAR-100 noise: the code's CIFAR100 reads its noisy labels from noise_label/cifar-100/NOISE_TYPE
  (data/cifar.py:295-297, 337), which the repository does not ship; the rows use CIFAR-10's noisify convention
  (our choice). The shipped noise_label/cifar-10/*.pt files are not symmetric and not read by the CIFAR-10 path.
- The code's pairflip (data/utils.py:127-147, fixed class pairs) has no README run and no row here.
- Model selection and reporting. The code reports every epoch's test accuracy and keeps the best; the summary here
  gives the last epoch's and the one at the best validation accuracy (CIFAR-N) or the best test accuracy.
- Normalisation and the crop's padding: per-channel statistics of the training split, the crop pads with the mean
  (zeros after normalising); the code uses fixed statistics and pads the PIL image with black. PyTorch's default
  initialisation there, the registry's here; avg_pool2d(4) there, the global mean here (the same at 32x32).
- CIFAR-N rows: TFDS's image order differs from torchvision's (each human label stays with its image); the
  replication's CIFAR-N benchmark base (benchmark_configs/base.py) uses torchvision's ImageNet-style resnet34, GC:5
  its own CIFAR-style one (3x3 stem): the registry's 'resnet34'.
- The method's own differences (soft labels, validation-based best network): noisy_jax.methods.gls's docstring.
"""

import ml_collections

from experiments.configs import base
from experiments.configs import paper_rows
from noisy_jax.methods import gls

DATASETS = ("cifar10", "cifar100", "cifar10_n", "cifar100_n")
RATES = (0.2, 0.4, 0.6)  # README.md:36, 42, 48 (0.2; W:23, L:23 default); 0.4 / 0.6 the paper's [recalled]
HUMAN_LABELS = {  # noisy_jax.data.tfds_data's noise_key
  "cifar10_n": ("aggregate", "random1", "random2", "random3", "worst"),
  "cifar100_n": ("noisy",),
}
SMOOTH_RATES = gls.PAPER_SMOOTH_RATES  # README.md:15's candidates
DEFAULT = "cifar10_n,worst"
FORM = "DATASET,symmetric,RATE,r=R or DATASET,LABELS[,r=R]"

# CIFAR-10 / CIFAR-100: the code's plan.
MODEL = "resnet34"  # W:125, L:125 ResNet34; rep GC:14 resnet34
BATCH_SIZE = 128  # W:108, L:107; rep configs/data/cifar10.py:19
CROP_PADDING = 4  # data/datasets.py:8, 19 RandomCrop(32, padding=4); rep datasets/cifar10.py
VALIDATION_SIZE = 0  # data/cifar.py: all 50,000 training rows
WARMUP_EPOCHS = 120  # W:29 --n_epoch
WARMUP_LEARNING_RATE = 0.1  # W:144 lr_plan[0] (overwrites --lr 0.05 at W:160)
WARMUP_LR_BOUNDARIES = (40, 80)  # W:144 [0.1] * 40 + [0.01] * 40 + [0.001] * 40
WARMUP_LR_DECAY = 0.1
WARMUP_MOMENTUM = 0.0  # W:127 SGD(lr) alone
WARMUP_WEIGHT_DECAY = 0.0  # W:127
GLS_EPOCHS = 100  # L:29 --n_epoch
GLS_LEARNING_RATE = 1e-6  # L:151 lr_plan = [1e-6] * 100
GLS_MOMENTUM = 0.9  # L:134
GLS_NESTEROV = True  # L:134
GLS_WEIGHT_DECAY = 1e-4  # L:134
WA, WB = 0.0, 1.0  # L:30-31

# CIFAR-10N / CIFAR-100N: the replication's protocol.
REP_VALIDATION_SIZE = 10000  # rep configs/data/cifar10.py:11 Split(0.8) of 50,000
REP_SMOOTH_RATE = -0.2  # GC:20
REP_TOTAL_EPOCHS = 100  # GC:29 max_epochs
REP_WARMUP_EPOCHS = 2  # GC:19
REP_LEARNING_RATE = 0.01  # GC:24
REP_MOMENTUM = 0.9  # GC:24
REP_WEIGHT_DECAY = 5e-4  # GC:24
REP_LR_BOUNDARIES = (60,)  # GC:26 MultiStepLR(milestones=[60], gamma=0.1), each stage's own
REP_LR_DECAY = 0.1  # GC:26


def parse(arg: str | None) -> tuple[str, str, float | str, float]:
  """'DATASET,symmetric,RATE,r=R' or 'DATASET,LABELS[,r=R]' -> (dataset, 'symmetric' or 'human', rate or labels,
  smooth rate); ValueError naming the bad part and the allowed values."""
  arg = arg or DEFAULT
  parts = [p.strip() for p in arg.split(",")]
  smooth_rate = None
  if len(parts) > 1 and parts[-1].startswith("r="):
    text = parts.pop()[2:]
    try:
      smooth_rate = float(text)
    except ValueError:
      smooth_rate = None
    if smooth_rate not in SMOOTH_RATES:
      allowed = ", ".join(map(str, SMOOTH_RATES))
      raise ValueError(f"gls_paper: smooth rate r={text!r} in {arg!r}; allowed (README.md's candidates): {allowed}.")
  if parts[0] in DATASETS and len(parts) != (2 if parts[0] in HUMAN_LABELS else 3):
    raise ValueError(f"gls_paper config string {arg!r} must be {FORM}.")
  dataset, noise, rate_or_labels, _ = paper_rows.parse_row(
    ",".join(parts),
    config_name="gls_paper",
    datasets=DATASETS,
    rates={"symmetric": RATES},
    human_labels=HUMAN_LABELS,
    options=(),
  )
  if smooth_rate is None:
    if noise != "human":
      raise ValueError(
        f"gls_paper: {arg!r} needs the smooth rate, DATASET,symmetric,RATE,r=R (the code tunes r per setting; "
        f"README.md's candidates: {', '.join(map(str, SMOOTH_RATES))})."
      )
    smooth_rate = REP_SMOOTH_RATE
  return dataset, noise, rate_or_labels, smooth_rate


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, rate_or_labels, smooth_rate = parse(arg)
  config = base.get_shared()
  human = noise == "human"
  paper_rows.row_data(
    config, dataset, noise, rate_or_labels, validation_size=VALIDATION_SIZE, human_validation_size=REP_VALIDATION_SIZE
  )
  config.augment = ml_collections.ConfigDict({"crop_padding": CROP_PADDING, "flip": True})
  config.model = ml_collections.ConfigDict({"name": MODEL, "kwargs": {}, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.method = ml_collections.ConfigDict(
    {
      "name": "gls",
      "smooth_rate": smooth_rate,
      "wa": WA,
      "wb": WB,
      "warmup": True,
      "warmup_start": "best" if human else "final",
    }
  )
  if human:
    rep = {"momentum": REP_MOMENTUM, "weight_decay": REP_WEIGHT_DECAY, "lr_boundaries": REP_LR_BOUNDARIES}
    warmup_optimizer = base.sgd(REP_LEARNING_RATE, lr_decay=REP_LR_DECAY, **rep)
    config.warmup = ml_collections.ConfigDict({"num_epochs": REP_WARMUP_EPOCHS, "optimizer": warmup_optimizer})
    config.num_epochs = REP_TOTAL_EPOCHS - REP_WARMUP_EPOCHS
    config.optimizer = base.sgd(REP_LEARNING_RATE, lr_decay=REP_LR_DECAY, **rep)
  else:
    warmup_optimizer = base.sgd(
      WARMUP_LEARNING_RATE,
      momentum=WARMUP_MOMENTUM,
      weight_decay=WARMUP_WEIGHT_DECAY,
      lr_boundaries=WARMUP_LR_BOUNDARIES,
      lr_decay=WARMUP_LR_DECAY,
    )
    config.warmup = ml_collections.ConfigDict({"num_epochs": WARMUP_EPOCHS, "optimizer": warmup_optimizer})
    config.num_epochs = GLS_EPOCHS
    config.optimizer = base.sgd(
      GLS_LEARNING_RATE, momentum=GLS_MOMENTUM, weight_decay=GLS_WEIGHT_DECAY, lr_boundaries=(), nesterov=GLS_NESTEROV
    )
  return config
