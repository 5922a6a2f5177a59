r"""The epsilon-softmax losses' CIFAR-10 / CIFAR-100 rows (Wang et al., "epsilon-Softmax: Approximating One-Hot
Vectors for Mitigating Label Noise", NeurIPS 2024): CE_eps+MAE and FL_eps+MAE as their code trains them.

The string after the colon picks the row, DATASET,NOISE,RATE[,LOSS]:
  DATASET  cifar10 | cifar100
  NOISE    symmetric | asymmetric
  RATE     symmetric: 0.0 | 0.2 | 0.4 | 0.6 | 0.8; asymmetric: 0.1 | 0.2 | 0.3 | 0.4 (the rates of get_eps_softmax's
           CIFAR-100 branches, config.py:110-120; its CIFAR-10 values do not depend on the rate, config.py:104-105,
           and the same rates are allowed there)
  LOSS     ece_mae (default: the code's ECEandMAE, main.py:32) | efl_mae (EFLandMAE)
Default: cifar10,symmetric,0.8 (README.md:27's example). On a GPU/TPU box with the TFDS data prepared
(noisy_jax.data.tfds_data):

  python -m experiments.train --config=experiments/configs/eps_softmax_paper.py:cifar10,symmetric,0.8 \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/eps_c10_sym80_ece
  python -m experiments.train --config=experiments/configs/eps_softmax_paper.py:cifar100,asymmetric,0.4,efl_mae \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/eps_c100_asym40_efl

Refused, by name: NOISE 'dependent' (the code's instance-dependent noise reads label files or draws them with its
DependentLabelGenerator, datasets/data_dependent/cifar.py:143-198; noisy_jax.core.noise has no such noise type), and
CIFAR-N ('human' noise, cifar10_n / cifar100_n): get_eps_softmax has no defaults for it (CIFAR-10 raises at
config.py:107; CIFAR-100 matches neither branch of config.py:109-121 and fails at :126-129 with alpha unset); the
code trains CIFAR-N with main_semi.py, "CE_eps+MAE (Semi)" (README.md:15-17, 30-32), a semi-supervised method.

Every value and its source: cswjl/eps-softmax at f81685c3f00e4ce77b5da36a183a1cdf60fb6655 (main.py, config.py,
losses.py, models.py, datasets/data_loaders.py, datasets/data_method1/build_dataset.py "B", datasets/transformers.py
"T", README.md).
  value                                             CIFAR-10                      CIFAR-100
  model                                             CNN(type='cifar10') :58, the  ResNet34(num_classes=100) :63:
                                                    8-layer CNN 'apl_cnn'         CIFAR-style 'resnet34'
                                                    (models.py:20-79)             (models.py:143-195)
  epochs                                            120 (main.py:55)              200 (main.py:60)
  SGD lr, momentum 0.9 (main.py:74)                 0.01 (main.py:56)             0.1 (main.py:61)
  batch                                             128 (main.py:57)              128 (main.py:62)
  weight decay (coupled L2, SGD's weight_decay)     1e-4 (config.py:175)          1e-5 (config.py:178)
  L1 term (optimizer.l1; main.py:85-87 adds it to
    the loss only when non-zero)                    0 (config.py:174)             0 (config.py:177)
  lr: CosineAnnealingLR(T_max=epochs, eta_min=0) stepped after every epoch (main.py:75, 93): lr_schedule 'cosine',
    cosine_epochs 0 (= the run's num_epochs), lr_min 0, as alfs_anl_paper.py
  gradient clipping: clip_grad_norm_(parameters, 5.) after backward (main.py:90): grad_clip_norm 5
  augmentation: RandomCrop(32, padding=4) + RandomHorizontalFlip (T:20-25, 35-37); crop_padding 4, flip
  no validation split: all 50,000 training images (B:207-230); the last epoch's test accuracy is the result
    (main.py:94-101)
  runs: --trials 1 (main.py:27): one seed
  noise, the default --noise_method method1 (main.py:21, datasets/data_loaders.py:22-27):
    symmetric   int(RATE 50000) / C examples of each class, each relabelled to a uniformly drawn other class
                (B:127-145, 168-186): 'symmetric', exact counts (noise.exact True); RATE 0 is clean
    asymmetric  CIFAR-10: truck -> automobile, bird -> airplane, cat -> dog, dog -> cat, deer -> horse, int(RATE n_c)
                examples of each source class (B:116-126): 'asymmetric' (noise.dataset cifar10), exact counts.
                CIFAR-100: each class to the next of its group of five, RATE drawn per example (multiclass_noisify
                with np.random.RandomState(0), B:25-47, 151-167): 'asymmetric' (noise.dataset cifar100) with
                noise.exact False
  loss (config.py:101-129, get_eps_softmax; the same values for both losses):
    CIFAR-10   symmetric  alpha 0.01, beta 5, m 1e5 (:104); asymmetric alpha 0.02, beta 5, m 1e3 (:105)
    CIFAR-100  symmetric  beta 1, m 1e4, alpha 0.1 / 0.05 / 0.03 / 0.00125 / 0.0075 at RATE 0 / 0.2 / 0.4 / 0.6 / 0.8
                          (:110-114; 0.00125 at 60% below 0.0075 at 80% is the code's)
               asymmetric beta 1, m 1e2, alpha 0.015 / 0.007 / 0.005 / 0.004 at RATE 0.1 / 0.2 / 0.3 / 0.4 (:117-120)
    min_prob 1e-8: the clamp eps of ECELoss / EFocalLoss (losses.py:6, 9, 35)
    efl_mae: gamma 0.1, EFLandMAE's default (losses.py:35; config.py:129 passes none) and detach_modulator True:
    EFocalLoss builds its factor (1 - p)^gamma from `logpt.data.exp()` (losses.py:75), so no gradient flows through
    it; the config sets both explicitly (noisy_jax.core.eps_softmax_losses names the other form). At these m the
    factor's own gradient is small (the argmax's p^ lies within 1 / (m + 1) of 1, the others near or at the clamp).

Stated deviations:
- CIFAR-100 augmentation: the code also applies RandomRotation(20) (T:38); noisy_jax's augmentation has no rotation,
  so these rows train without it.
- Normalisation: per-channel statistics of the training split here, the code's fixed constants (T:17-18, 32-33);
  the crop pads with the mean (0 after normalising), the code pads the raw image with black.
- CIFAR-10 asymmetric noise: the code flips the pairs one after another (B:118-125), cat -> dog before dog -> cat,
  and draws the dogs to flip from the labels as they are by then, former cats included: of the cats, RATE (1 - RATE)
  end as dog in expectation, of the dogs RATE as cat. Here all flips are drawn from the clean labels at once
  (noisy_jax.core.noise): RATE exactly in both directions.
- CIFAR-100 asymmetric noise: the code's groups are five consecutive class ids (build_for_cifar100 on
  P[5i:5i+5, 5i:5i+5], B:9-22, 158-160); CIFAR-100's ids are alphabetical, so those groups are not its
  superclasses, which the code means (nb_superclasses = 20, B:155). Here each class goes to the next class of its
  true superclass (noisy_jax.core.noise.cifar100_superclass_map). The code's draw uses RandomState(0) in every
  trial; here the run's seed.
- Symmetric noise: the code draws each flipped example's new class uniformly among the others; here the counts per
  class pair are exact too (largest-remainder rounding of RATE n_c / (C - 1)).
- ResNet-34 initialisation: the code's _reset_prams (models.py:180-186) draws conv kernels kaiming_uniform (fan_in,
  relu) and the classifier xavier_uniform; noisy_jax's 'resnet34' uses He-normal kernels (the same variance
  2 / fan_in) and a LeCun-normal classifier with zero bias. The 8-layer CNN has the code's initialisation
  (noisy_jax.models.apl_cnn, the same network as APL's ToyModel).
- Seeds: the code seeds trial i with 123 + i (main.py:26, 47); here seed 0. PyTorch's clip_grad_norm_ divides by
  ||g|| + 1e-6 (noisy_jax.train.optim). The losses' own differences (numerics only): eps_softmax_losses's docstring.
- main.py:21 declares choices=['method1, method2'] (one string), so --noise_method method2 is refused by argparse
  and method1 is the only noise the code's main.py runs.
"""

import ml_collections

from experiments.configs import base

DATASETS = ("cifar10", "cifar100")
LOSSES = ("ece_mae", "efl_mae")  # config.py:126-129 ECEandMAE / EFLandMAE
RATES = {
  "symmetric": (0.0, 0.2, 0.4, 0.6, 0.8),  # config.py:110-114
  "asymmetric": (0.1, 0.2, 0.3, 0.4),  # config.py:117-120
}
HYPER = {  # (alpha, beta, m) of get_eps_softmax, config.py:101-124
  "cifar10": {
    "symmetric": dict.fromkeys(RATES["symmetric"], (0.01, 5.0, 1e5)),  # :104
    "asymmetric": dict.fromkeys(RATES["asymmetric"], (0.02, 5.0, 1e3)),  # :105
  },
  "cifar100": {
    "symmetric": {  # :110-114
      0.0: (0.1, 1.0, 1e4),
      0.2: (0.05, 1.0, 1e4),
      0.4: (0.03, 1.0, 1e4),
      0.6: (0.00125, 1.0, 1e4),
      0.8: (0.0075, 1.0, 1e4),
    },
    "asymmetric": {  # :117-120
      0.1: (0.015, 1.0, 1e2),
      0.2: (0.007, 1.0, 1e2),
      0.3: (0.005, 1.0, 1e2),
      0.4: (0.004, 1.0, 1e2),
    },
  },
}
MIN_PROB = 1e-8  # losses.py:6 eps
FOCAL_GAMMA = 0.1  # losses.py:35 EFLandMAE(gamma=0.1); config.py:129 passes none
DETACH_MODULATOR = True  # losses.py:75 pt from logpt.data
MODELS = {"cifar10": "apl_cnn", "cifar100": "resnet34"}  # main.py:58 CNN(type='cifar10'), :63 ResNet34
EPOCHS = {"cifar10": 120, "cifar100": 200}  # main.py:55, 60 (= T_max, :75)
LEARNING_RATES = {"cifar10": 0.01, "cifar100": 0.1}  # main.py:56, 61
BATCH_SIZE = 128  # main.py:57, 62
L2_WEIGHT_DECAY = {"cifar10": 1e-4, "cifar100": 1e-5}  # config.py:175, 178 (main.py:68, 74)
L1_WEIGHT_DECAY = {"cifar10": 0.0, "cifar100": 0.0}  # config.py:174, 177 (main.py:85-87)
MOMENTUM = 0.9  # main.py:74
GRAD_CLIP_NORM = 5.0  # main.py:90
SEEDS = (0,)  # main.py:27 --trials 1
DEFAULT = "cifar10,symmetric,0.8"  # README.md:27
FORM = "DATASET,NOISE,RATE[,LOSS]"


def _allowed() -> str:
  rates = "; ".join(f"{noise} {', '.join(map(str, rates))}" for noise, rates in RATES.items())
  return f"DATASET {', '.join(DATASETS)}; NOISE and RATE: {rates}; LOSS {', '.join(LOSSES)}"


def parse(arg: str | None) -> tuple[str, str, float, str]:
  """'DATASET,NOISE,RATE[,LOSS]' -> (dataset, noise, rate, loss); ValueError naming the bad part and what is allowed."""
  arg = arg or DEFAULT
  parts = [p.strip() for p in arg.split(",")]
  if parts[0] in ("cifar10_n", "cifar100_n") or (len(parts) > 1 and parts[1] == "human"):
    raise ValueError(
      f"eps_softmax_paper: {arg!r}: CIFAR-N (human noise) has no defaults in get_eps_softmax (config.py:101-129); "
      f"allowed: {_allowed()}."
    )
  if len(parts) not in (3, 4):
    raise ValueError(f"eps_softmax_paper config string {arg!r} must be {FORM}; allowed: {_allowed()}.")
  dataset, noise, rate_text = parts[:3]
  loss = parts[3] if len(parts) == 4 else LOSSES[0]
  if dataset not in DATASETS:
    raise ValueError(f"eps_softmax_paper: dataset {dataset!r} in {arg!r}; allowed: {', '.join(DATASETS)}.")
  if noise == "dependent":
    raise ValueError(
      f"eps_softmax_paper: noise 'dependent' in {arg!r} is the code's instance-dependent noise, which "
      f"noisy_jax.core.noise cannot generate; allowed: {', '.join(RATES)}."
    )
  if noise not in RATES:
    raise ValueError(f"eps_softmax_paper: noise {noise!r} in {arg!r}; allowed: {', '.join(RATES)}.")
  try:
    rate = float(rate_text)
  except ValueError:
    rate = None
  if rate not in RATES[noise]:
    allowed = ", ".join(map(str, RATES[noise]))
    raise ValueError(f"eps_softmax_paper: RATE {rate_text!r} for {noise} in {arg!r}; allowed: {allowed}.")
  if loss not in LOSSES:
    raise ValueError(f"eps_softmax_paper: loss {loss!r} in {arg!r}; allowed: {', '.join(LOSSES)}.")
  return dataset, noise, rate, loss


def loss_kwargs(dataset: str, noise: str, rate: float, loss: str) -> dict:
  """The catalogue loss's hyper-parameters of a row (module docstring)."""
  alpha, beta, m = HYPER[dataset][noise][rate]
  kwargs = {"alpha": alpha, "beta": beta, "m": m, "min_prob": MIN_PROB}
  if loss == "efl_mae":
    kwargs.update(gamma=FOCAL_GAMMA, detach_modulator=DETACH_MODULATOR)
  return kwargs


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, rate, loss = parse(arg)
  config = base.get_shared()
  config.seeds = SEEDS
  base.paper_data(config, dataset, noise_type=noise, rate=rate, noise_dataset=dataset if noise == "asymmetric" else "")
  config.noise.exact = not (dataset == "cifar100" and noise == "asymmetric")  # B:25-47 draws per example there
  config.model = ml_collections.ConfigDict({"name": MODELS[dataset], "kwargs": {}, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.num_epochs = EPOCHS[dataset]
  config.optimizer = base.optimizer(LEARNING_RATES[dataset], weight_decay=L2_WEIGHT_DECAY[dataset], momentum=MOMENTUM)
  config.optimizer.lr_schedule = "cosine"
  config.optimizer.cosine_epochs = 0  # the run's num_epochs: T_max = epochs (main.py:75)
  config.optimizer.lr_min = 0.0
  config.optimizer.grad_clip_norm = GRAD_CLIP_NORM
  config.optimizer.l1 = L1_WEIGHT_DECAY[dataset]
  config.method = ml_collections.ConfigDict(
    {"name": "loss", "loss": loss, "loss_kwargs": loss_kwargs(dataset, noise, rate, loss)}
  )
  return config
