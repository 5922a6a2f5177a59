r"""VolMinNet (Li et al., ICML 2021): the CIFAR-10 / CIFAR-100 runs of its code, and CIFAR-N as the replication.

The string after the colon picks the row, DATASET,NOISE,RATE or DATASET,LABELS:
  DATASET   cifar10 | cifar100     then NOISE,RATE: symmetric,0.2 | symmetric,0.5 | pairflip,0.45 (the paper's
                                   Sym-20%, Sym-50% and Pair-45% [recalled]; run.sh's example is flip 0.45, main.py:19's
                                   --noise_rate default 0.2). The code's 'symmetric' is noisify_multiclass_symmetric,
                                   RATE / (C - 1) to each other class (utils.py:172-193): our 'symmetric'; its 'flip' is
                                   noisify_pairflip, i -> i + 1 mod C (utils.py:124-146): our 'pairflip'
  DATASET   cifar10_n | cifar100_n CIFAR-N human labels (noise type 'dataset', dataset_kwargs.noise_key), then LABELS:
                                   cifar10_n aggregate | random1 | random2 | random3 | worst; cifar100_n noisy. The
                                   CIFAR-N replication's protocol (KlemenVovk/noisy-labels volminnet_cifar10_clean.py)
Default: cifar10,symmetric,0.2. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data; CIFAR-N needs
its manual download):

  python -m experiments.train --config=experiments/configs/volminnet_paper.py:cifar10,pairflip,0.45 \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/volmin_c10_pair45
  python -m experiments.train --config=experiments/configs/volminnet_paper.py:cifar100_n,noisy \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/volmin_c100n

A run is one stage (noisy_jax.methods.volminnet): the network and W trained together by the run's one SGD.

Every constant and its source. "code" = xuefeng-li1/Provably-end-to-end-label-noise-learning-without-anchor-points
@06e4167 (main.py, models.py, tools.py, utils.py, transformer.py, data_load.py); "rep" = KlemenVovk/noisy-labels
(src/noisypy/configs/methods/volminnet/volminnet_cifar10_clean.py "VC", its volminnet/volminnet.py and utils.py,
configs/data/cifar10.py, and src/reproducibility/noisy_labels/configs/benchmark_configs/cifar10n/volminnet.py "B10",
.../cifar100n/volminnet.py "B100").
  CIFAR-10 / CIFAR-100 rows (the code's):
  network: CIFAR-10 ResNet-18, CIFAR-100 ResNet-34, CIFAR style (3x3 stem, no max pool), BasicBlocks, widths 64..512
           (registry 'resnet18' / 'resnet34')                        main.py:66, 83; models.py:96-137
  batch 128                                                          main.py:21
  validation split: 10% of the 50,000 training images = 5,000        data_load.py:101-102 -> tools.py:47, 64
                                                                     (split_per 0.9)
  augmentation: random crop after 4-pixel padding + horizontal flip  transformer.py:17-23
  epochs 80                                                          main.py:56, 72
  network: SGD lr 0.01, momentum 0.9, weight decay 1e-4              main.py:13, 23, 94
  T (W): SGD lr 0.01, momentum 0.9, no weight decay (CIFAR-10)       main.py:68 (CIFAR-100: Adam, main.py:85; below)
  both: lr x0.1 after epochs 30 and 60, stepped after each epoch (lr_boundaries (30, 60))
                                                                     main.py:59, 76, 95-96, 194-195
    One optimiser here: SGD(lr 0.01, momentum 0.9, weight decay 0) over {network, W} and method.network_weight_decay
    1e-4 (the network's coupled decay added through the objective's gradient, not W's): the same updates as the
    code's two SGDs (tests/test_volminnet_method.py checks it against torch).
  lam 1e-4                                                           main.py:24 (run.sh --lam 0.0001)
  init_t 2 (CIFAR-10), 4.5 (CIFAR-100)                               models.py:150; main.py:71, 84
  normalisation: per channel                                         transformer.py:22 (fixed statistics; here the
                                                                     training split's)
  noise: symmetric / pairflip at RATE, exact-rate injection (noise.exact=True)
                                                                     utils.py:98-193 draw each label independently
                                                                     (multiclass_noisify): --config.noise.exact=False
  CIFAR-10N / CIFAR-100N rows (the replication's):
  network: ResNet-34 (registry 'resnet34')                           VC:14-18
  batch 128, crop 4 + flip                                           configs/data/cifar10.py:19; datasets/cifar10.py
  validation split: 10,000 (Split(0.8) of 50,000)                    VC:12 -> configs/data/cifar10.py:11
  epochs 80                                                          VC:36
  network: SGD lr 0.01, momentum 0.9, weight decay 1e-4; T: SGD lr 0.01, momentum 0.9, no decay; both
           MultiStepLR([30, 60], 0.1), stepped after each epoch      VC:23-33; volminnet.py:87-90, 106-114
  lam 1e-4                                                           VC:21
  init_t 2 (CIFAR-10N), 4.5 (CIFAR-100N)                             B10:10, B100:10 (VC:21 passes no init_t, which
                                                                     VolMinNet's __init__ requires: volminnet.py:24)

Stated deviations:
- T's optimiser on CIFAR-100 and CIFAR-100N: the code's and the replication's Adam(lr 0.01, no weight decay, the same
  MultiStepLR) (main.py:85; B100:12-20); the run has one optimiser, so W follows the network's SGD with momentum here
  (noisy_jax.methods.volminnet). The CIFAR-10 rows are the code's updates exactly.
- Validation labels and model selection. The code flips all 50,000 labels and then holds out 10% (tools.py:47-71), so
  its validation labels are noisy; it reports the test accuracy of the epoch of the lowest validation loss and of the
  highest validation accuracy, both of p @ T (main.py:197-214, 244-263). The trainer injects noise into the training
  split only and selects by the network's own accuracy (argmax p) on clean validation labels. The replication's
  validation and test accuracies are of p @ T (volminnet.py:92-104); here the network's own softmax, as the code's
  test accuracy (main.py:216-232).
- The network. The code's ResNet's first convolution has padding 0 (models.py:100: 32 -> 30 pixels); here 'same'
  padding. PyTorch's default initialisation there, the registry's here. The replication's CIFAR-N benchmark configs
  (benchmark_configs/base.py) use torchvision's ImageNet-style resnet34, VC its CIFAR-style one: the registry's.
- Normalisation and the crop's padding: per-channel statistics of the training split, the crop pads with the mean
  (zeros after normalising); the code uses fixed statistics and pads the PIL image with black.
- The validation split is stratified by class (TFDS loader); the code's is a seeded random 10%, the replication's the
  last 10,000 rows. TFDS's image order differs from torchvision's (each CIFAR-N label stays with its image).
- The method's own differences (soft labels, weights, the logsumexp form): noisy_jax.methods.volminnet's docstring.
"""

import ml_collections

from experiments.configs import base
from experiments.configs import paper_rows

DATASETS = ("cifar10", "cifar100", "cifar10_n", "cifar100_n")
RATES = {"symmetric": (0.2, 0.5), "pairflip": (0.45,)}  # the paper's Sym-20/50%, Pair-45% [recalled]; run.sh flip 0.45
HUMAN_LABELS = {  # noisy_jax.data.tfds_data's noise_key
  "cifar10_n": ("aggregate", "random1", "random2", "random3", "worst"),
  "cifar100_n": ("noisy",),
}
DEFAULT = "cifar10,symmetric,0.2"
FORM = "DATASET,NOISE,RATE or DATASET,LABELS"

# CIFAR-10 / CIFAR-100: the code's.
MODELS = {"cifar10": "resnet18", "cifar100": "resnet34"}  # main.py:66, 83
BATCH_SIZE = 128  # main.py:21; rep configs/data/cifar10.py:19
CROP_PADDING = 4  # transformer.py:19 RandomCrop(32, padding=4)
VALIDATION_SIZE = 5000  # tools.py:47, 64 split_per 0.9 of 50,000
NUM_EPOCHS = 80  # main.py:56, 72; rep VC:36
LEARNING_RATE = 0.01  # main.py:13 --lr; rep VC:25-26
MOMENTUM = 0.9  # main.py:68, 94; rep VC:25-26
NETWORK_WEIGHT_DECAY = 1e-4  # main.py:23, 94 (optimizer_es); rep VC:25
OPTIMIZER_WEIGHT_DECAY = 0.0  # main.py:68, 85 (optimizer_trans weight_decay=0): the run's optimiser leaves W undecayed
LR_BOUNDARIES = (30, 60)  # main.py:59, 76 milestones, stepped after each epoch (main.py:194-195); rep VC:31-32
LR_DECAY = 0.1  # main.py:95-96 gamma
LAM = 1e-4  # main.py:24 --lam; rep VC:21
INIT_T = {"cifar10": 2.0, "cifar100": 4.5}  # models.py:150 default (CIFAR-10, main.py:67); main.py:71 (CIFAR-100)

# CIFAR-10N / CIFAR-100N: the replication's (its other constants are the code's above, each cited there).
REP_MODEL = "resnet34"  # VC:14
REP_VALIDATION_SIZE = 10000  # VC:12 -> configs/data/cifar10.py:11 Split(0.8) of 50,000
REP_INIT_T = {"cifar10": 2.0, "cifar100": 4.5}  # B10:10, B100:10


def parse(arg: str | None) -> tuple[str, str, float | str]:
  """'DATASET,NOISE,RATE' or 'DATASET,LABELS' -> (dataset, noise or 'human', rate or labels); ValueError naming the
  bad part and the allowed values."""
  arg = arg or DEFAULT
  parts = [p.strip() for p in arg.split(",")]
  if parts[0] in DATASETS and len(parts) != (2 if parts[0] in HUMAN_LABELS else 3):
    raise ValueError(f"volminnet_paper config string {arg!r} must be {FORM} (no options).")
  dataset, noise, rate_or_labels, _ = paper_rows.parse_row(
    arg,
    config_name="volminnet_paper",
    datasets=DATASETS,
    rates=RATES,
    human_labels=HUMAN_LABELS,
    options=(),
  )
  return dataset, noise, rate_or_labels


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, rate_or_labels = parse(arg)
  family = dataset.removesuffix("_n")
  human = noise == "human"
  config = base.get_shared()
  paper_rows.row_data(
    config, dataset, noise, rate_or_labels, validation_size=VALIDATION_SIZE, human_validation_size=REP_VALIDATION_SIZE
  )
  config.augment = ml_collections.ConfigDict({"crop_padding": CROP_PADDING, "flip": True})
  model = REP_MODEL if human else MODELS[family]
  config.model = ml_collections.ConfigDict({"name": model, "kwargs": {}, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.method = ml_collections.ConfigDict(
    {
      "name": "volminnet",
      "lam": LAM,
      "init_t": (REP_INIT_T if human else INIT_T)[family],
      "network_weight_decay": NETWORK_WEIGHT_DECAY,
    }
  )
  config.num_epochs = NUM_EPOCHS
  # The run's one SGD (module docstring): the code's lr, momentum and schedule, no weight decay of its own.
  config.optimizer = base.sgd(
    LEARNING_RATE,
    momentum=MOMENTUM,
    weight_decay=OPTIMIZER_WEIGHT_DECAY,
    lr_boundaries=LR_BOUNDARIES,
    lr_decay=LR_DECAY,
  )
  return config
