r"""DISC, dynamic instance-specific selection and correction (Li et al., CVPR 2023): its CIFAR-10 / CIFAR-100 rows.

The string after the colon picks the row, DATASET,NOISE,RATE:
  DATASET  cifar10 | cifar100
  NOISE    symmetric   the original's 'sym': exactly rate x N examples relabelled uniformly over all C classes, the
                       true one included ('symmetric_include_true' here; realised rate (C - 1) / C x rate)
           asymmetric  the original's 'asym': CIFAR-10's class map (truck -> automobile, bird -> airplane,
                       deer -> horse, cat <-> dog); CIFAR-100: pair flip (class c -> c + 1), as its noisify does
  RATE     the noise rate (the paper's rows: symmetric 0.2 / 0.4 / 0.6 / 0.8, asymmetric 0.4)
Default: cifar10,symmetric,0.2. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data):

  python -m experiments.train --config=experiments/configs/disc_paper.py:cifar10,symmetric,0.8 \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/disc_c10_sym80

Every constant and its source: "code" = JackYFL/DISC@a21e910 (algorithms/DISC.py: DISC.__init__ and train;
configs/DISC_CIFAR.py; main.py's arguments; datasets/noise_datasets.py; datasets/randaugment.py; models/resnet.py).
  network: ResNet-18, CIFAR stem (3x3 conv, stride 1, no max pool)     code DISC_CIFAR.py model1_type 'resnet18',
                                                                       models/resnet.py; registry 'resnet18'
  200 epochs, batch 128, mixup alpha 5                                 code DISC_CIFAR.py
  warm-up: start_epoch 20                                              code DISC.__init__ (cifar-10, cifar-100)
  momentum of the thresholds 0.99; 0.95 for asymmetric noise and at rates 0.6 / 0.8
                                                                       code main.py --momentum default,
                                                                       DISC.__init__
  lamd_ce 1; lamd_h 1, 0.2 at rates 0.6 / 0.8; sigma 0.5; GCE q 0.7    code DISC.__init__, losses GCELoss
  rate <= 0.6: SGD lr 0.1, no momentum, weight decay 1e-3, x0.1 at epochs 80 and 160
                                                                       code DISC.__init__ (MultiStepLR [80, 160])
  rate > 0.6: Adam lr 0.001, beta1 0.9; from epoch 120 lr decayed linearly towards 0 at epoch 200 and beta1 0.1
              (Co-teaching's plan: optimizer 'coteaching_adam')        code DISC.__init__ alpha_plan, beta1_plan;
                                                                       DISC_CIFAR.py epoch_decay_start 120
  weak view: random crop after 4-pixel padding + horizontal flip       code randaugment.py
                                                                       TransformFixMatch_CIFAR10 (weak)
  strong view: the same crop and flip, then RandAugmentwogeo: 2 operations of its pool of 16, each run with
              probability 1/2 at a level of 1..m-1, then a grey CutoutAbs of int(0.15 x 32) = 4 (a 5-pixel hole);
              m = 5 for CIFAR-10, 10 for CIFAR-100 (policy 'disc_randaugment', noisy_jax.core.disc_randaugment:
              PIL's arithmetic, pixel for pixel)                       code TransformFixMatch_CIFAR10 / _CIFAR100
                                                                       (strong): RandAugmentwogeo(n=2, m=5 / 10)
  normalisation: per channel                                           code noise_datasets.py (fixed CIFAR-10
                                                                       statistics; here the training split's)
  no validation split                                                  code main.py (train and test loaders only)

Stated deviations:
- The strong view's order. The code flips and crops (reflection padding) first and runs the pool and its CutoutAbs
  on the cropped image; here (noisy_jax.train.views) the pool and CutoutAbs run on the uint8 image first, then the
  crop and flip on the normalised one, so the hole and the pool's black fill move with the crop, and the crop's
  border (the mean, below) is not touched by the pool. The same operations and draws otherwise.
  TORCHVISION_STRONG_VIEW, the view these rows used before (torchvision's RandAugment, 2 operations at magnitude bin
  9 of 31, then Cutout 4 on the normalised image), stays available: --config.augment.strong.policy=randaugment
  --config.augment.strong.magnitude=9 --config.augment.strong.cutout=4.
- The crop pads with zeros (noisy_jax.core.augment); the code pads by reflection.
- Learning rate of the Adam rows: the code sets an epoch's lr and beta1 after the previous epoch (`train` ends with
  adjust_learning_rate(epoch)), one epoch later than Co-teaching's plan that 'coteaching_adam' reproduces.
- Noise: drawn with the exact rate here (noise.exact); the code's asymmetric noise draws each example independently
  (noisify), its symmetric noise relabels exactly rate x N. Instance-dependent noise (the paper's 'ins' rows) is not
  in noisy_jax.core.noise.
- The method's own differences (mixup passes in the warm-up, the zero-loss step): noisy_jax.methods.disc.
"""

import ml_collections

from experiments.configs import base

DATASETS = {"cifar10": 10, "cifar100": 100}
NOISES = {"symmetric": "symmetric_include_true", "asymmetric": None}  # asymmetric: per dataset, below
ASYMMETRIC = {"cifar10": "asymmetric", "cifar100": "pairflip"}  # code noise_datasets.py (noisify)
DEFAULT = "cifar10,symmetric,0.2"

MODEL = "resnet18"  # code DISC_CIFAR.py
NUM_EPOCHS = 200  # code DISC_CIFAR.py
BATCH_SIZE = 128  # code DISC_CIFAR.py
MIXUP_ALPHA = 5.0  # code DISC_CIFAR.py alpha
START_EPOCH = 20  # code DISC.__init__
MOMENTUM = 0.99  # code main.py --momentum
HIGH_NOISE_MOMENTUM = 0.95  # code DISC.__init__: asymmetric noise, rates 0.6 / 0.8
HIGH_NOISE_RATES = (0.6, 0.8)  # code DISC.__init__: `percent in [0.6, 0.8]`
HIGH_NOISE_LAMD_H = 0.2  # code DISC.__init__
ADAM_ABOVE = 0.6  # code DISC.__init__: `percent > 0.6` trains with Adam
ADAM_LR = 0.001  # code DISC.__init__
ADAM_DECAY_START = 120  # code DISC_CIFAR.py epoch_decay_start
SGD_LR = 0.1  # code DISC.__init__
SGD_WEIGHT_DECAY = 1e-3  # code DISC.__init__
SGD_MILESTONES = (80, 160)  # code DISC.__init__ MultiStepLR
# code TransformFixMatch_CIFAR10: RandAugmentwogeo(n=2, m=5), its CutoutAbs included (so no Cutout after normalising)
STRONG_VIEW = {"policy": "disc_randaugment", "num_ops": 2, "magnitude": 5, "cutout": 0}
MAGNITUDE = {"cifar10": 5, "cifar100": 10}  # code TransformFixMatch_CIFAR10 m=5, TransformFixMatch_CIFAR100 m=10
TORCHVISION_STRONG_VIEW = {"policy": "randaugment", "num_ops": 2, "magnitude": 9, "cutout": 4}  # the former default


def parse(arg: str | None) -> tuple[str, str, float]:
  """'DATASET,NOISE,RATE' -> (dataset, noise, rate); ValueError naming the allowed values."""
  parts = [p.strip() for p in (arg or DEFAULT).split(",")]
  if len(parts) != 3:
    raise ValueError(f"disc_paper config string {arg!r} must be DATASET,NOISE,RATE, e.g. {DEFAULT!r}.")
  dataset, noise, rate_text = parts
  if dataset not in DATASETS:
    raise ValueError(f"disc_paper: unknown dataset {dataset!r} in {arg!r}; allowed: {', '.join(DATASETS)}.")
  if noise not in NOISES:
    raise ValueError(f"disc_paper: unknown noise {noise!r} in {arg!r}; allowed: {', '.join(NOISES)}.")
  try:
    rate = float(rate_text)
  except ValueError:
    rate = -1.0
  if not 0.0 < rate < 1.0:
    raise ValueError(f"disc_paper: RATE {rate_text!r} in {arg!r} must be a number in (0, 1).")
  return dataset, noise, rate


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, rate = parse(arg)
  noise_type = NOISES[noise] or ASYMMETRIC[dataset]
  high = rate in HIGH_NOISE_RATES
  config = base.get_shared()
  base.paper_data(
    config, dataset, noise_type=noise_type, rate=rate, noise_dataset=dataset if noise_type == "asymmetric" else ""
  )
  config.augment.strong = ml_collections.ConfigDict(dict(STRONG_VIEW, magnitude=MAGNITUDE[dataset]))
  config.model = ml_collections.ConfigDict({"name": MODEL, "kwargs": {}, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.num_epochs = NUM_EPOCHS
  config.method = ml_collections.ConfigDict(
    {
      "name": "disc",
      "start_epoch": START_EPOCH,
      "momentum": HIGH_NOISE_MOMENTUM if (high or noise == "asymmetric") else MOMENTUM,
      "lamd_h": HIGH_NOISE_LAMD_H if high else 1.0,
      "mixup_alpha": MIXUP_ALPHA,
    }
  )
  if rate > ADAM_ABOVE:
    config.optimizer = ml_collections.ConfigDict(
      {"name": "coteaching_adam", "learning_rate": ADAM_LR, "decay_start": ADAM_DECAY_START}
    )
  else:
    config.optimizer = base.optimizer(SGD_LR, weight_decay=SGD_WEIGHT_DECAY, lr_boundaries=SGD_MILESTONES, momentum=0.0)
  return config
