r"""SOP, sparse over-parameterisation (Liu et al., ICML 2022): CIFAR-100, the only config of the original code.

The string after the colon picks the row, NOISE[,paper_lr_u][,plus]:
  NOISE       symmetric               flips spread over the 99 other classes (realised rate = the rate)
              symmetric_include_true  the original code's convention: the new label is drawn from all 100 classes,
                                      the true one included (realised rate = 0.99 x the rate)
              asymmetric              class -> next class of its true superclass, cyclically (REFERENCE §4)
  paper_lr_u  optional, asymmetric only: lr_u 1 as in the paper, instead of the README's 0.1
  plus        optional: SOP+, the shipped config_cifar100.json (consistency with a strongly augmented view, class
              balance; see below)
Default: symmetric. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data):

  python -m experiments.train --config=experiments/configs/sop_paper.py:asymmetric \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/sop_c100_asym40
  python -m experiments.train --config=experiments/configs/sop_paper.py:symmetric,plus \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/sop_plus_c100_sym50

Every constant and its source. REFERENCE = shared/REFERENCE.md §9 (shengliu66/SOP@4d991ce); "README" = its
README.md@4d991ce; "code" = the stored copies read for this file (config_cifar100.json@10ae21e, model/PreResNet.py,
data_loader/cifar100.py, data_loader/data_loaders.py, trainer/trainer.py @7abd976).
  network: PreActResNet-18 (stem conv 64, 4 stages x 2 pre-activation blocks, widths 64/128/256/512)
                                                                       REFERENCE §9; code PreResNet.py. See below
                                                                       for how it is built here.
  SGD lr 0.02, momentum 0.9, weight decay 1e-3, batch 128              REFERENCE §9; code config_cifar100.json
  300 epochs, CosineAnnealingLR(T_max 300, eta_min 2e-4) stepped once per epoch
                                                                       REFERENCE §9; code config, trainer.py
                                                                       (lr_schedule 'cosine', the PyTorch
                                                                       scheduler's per-epoch values)
  u, v: init N(0, std 1e-8), their own SGD (momentum 0, weight decay 0, no schedule)
                                                                       REFERENCE §9; code config (reparam_arch
                                                                       std 1e-8); method 'sop' (noisy_jax.methods.sop)
  lr_u 1, lr_v 10 (symmetric)                                          REFERENCE §9; README (50% symmetric)
  lr_u 0.1, lr_v 100 (asymmetric); paper_lr_u: lr_u 1                  REFERENCE §9; README ("for asymmetric noise
                                                                       we use lr for u equals 0.1 rather than 1
                                                                       in the paper")
  noise rates: symmetric 0.5, asymmetric 0.4 (override with --config.noise.rate=R)     README's two commands
  plain SOP: ratio_consistency = ratio_balance = 0                     REFERENCE §9 (SOP+ adds them)
  plus: ratio_consistency 0.9, ratio_balance 0.1                       REFERENCE §9; code config_cifar100.json
  plus: the strong view: AutoAugment's CIFAR-10 policy with the TF reference magnitudes, then the crop and flip,
        Normalize, Cutout 16 (augment.strong {'policy': 'autoaugment_cifar10_tf', 'cutout': 16};
        noisy_jax.train.views)                                         code data_loaders.py (autoaug_cifar10 ->
                                                                       augmentation_archive autoaug_paper_cifar10,
                                                                       CutoutDefault(16) appended); config
                                                                       "data_augmentation"
  plus: weak and strong view forwarded as one batch; CE, MSE and balance on the weak view's logits
                                                                       code trainer.py (torch.cat), model/loss.py
  augmentation: random crop after 4-pixel padding + horizontal flip    REFERENCE §9 (view 1); code data_loaders.py
  normalisation: per channel                                           code data_loaders.py (Normalize with fixed
                                                                       CIFAR-100 statistics; here the training
                                                                       split's own)
  no validation split (trains on all 50,000)                           code config ("validation_split": 0) and
                                                                       cifar100.py (its 'val' rows are a subset of
                                                                       the training rows)
  exact-rate injection (noise.exact=True)       REFERENCE §4. The code's symmetric noise relabels exactly rate x N
                                                examples, each uniformly over all 100 classes: 'symmetric_include_true'
                                                realises that rate exactly per class.

Stated deviations:
- The network. Our registry has no PreActResNet-18; the generic pre-activation ResNet registered as
  `preact_resnet32` is built with widths (64, 128, 256, 512) and blocks_per_stage (2, 2, 2, 2), which gives the same
  stages, strides and 1x1 projection shortcuts (on the pre-activated input, where the shape changes) as the code's
  PreActResNet18. It differs in: the code's stem is conv -> BN -> ReLU (ours: a bare conv, the first block's
  BN-ReLU follows), the code has no BN-ReLU before its average pool (ours has one), and initialisation (PyTorch's
  defaults there, He-normal convolutions here).
- The shipped config_cifar100.json is SOP+ (ratio_consistency 0.9, ratio_balance 0.1, a second AutoAugment +
  Cutout 16 view): the option `plus`. Without it the method is plain SOP (REFERENCE §9), the paper's SOP rows.
- plus, the strong view's normalisation: the code's CIFAR-100 loader normalises the strong view with CIFAR-10's
  mean and std (data_loaders.py; its weak view uses CIFAR-100's), a slip that is not offered here: both views use the
  run's statistics. Cutout's hole is the normalisation mean in both (applied after Normalize).
- plus, the policy: the code's `autoaug_paper_cifar10` levels go through the TF reference mapping
  (noisy_jax.core.autoaugment.tf_magnitude, equal to its PIL calls: tests/test_autoaugment.py); torchvision's
  AutoAugment (policy 'autoaugment_cifar10') rescales every magnitude (Posterize at level 7: 5 bits there, 2 here)
  and has bin 8 for sub-policy 14's Color (level 6 here). Its random draws are Python's `random`, ours threefry.
- Asymmetric noise: the code (data_loader/cifar100.py) swaps one random pair of classes inside each block of five
  consecutive class ids with probability `rate`, drawing each label independently; that model is not in
  noisy_jax.core.noise. 'asymmetric' here is REFERENCE §4's CIFAR-100 map (true superclasses, cyclic, exact rate).
"""

import ml_collections

from experiments.configs import base

NOISES = ("symmetric", "symmetric_include_true", "asymmetric")
OPTIONS = ("paper_lr_u", "plus")
DEFAULT = "symmetric"

DATASET = "cifar100"  # the only config of the code (REFERENCE §9)
MODEL = "preact_resnet32"  # the registry's pre-activation ResNet, built as a PreActResNet-18 by MODEL_KWARGS
MODEL_KWARGS = {"widths": (64, 128, 256, 512), "blocks_per_stage": (2, 2, 2, 2)}  # code PreResNet.py
LEARNING_RATE = 0.02  # REFERENCE §9
MOMENTUM = 0.9  # REFERENCE §9
WEIGHT_DECAY = 1e-3  # REFERENCE §9
BATCH_SIZE = 128  # REFERENCE §9
NUM_EPOCHS = 300  # REFERENCE §9
COSINE_EPOCHS = 300  # REFERENCE §9: CosineAnnealingLR T_max
LR_MIN = 2e-4  # REFERENCE §9: eta_min
INIT_STD = 1e-8  # REFERENCE §9
# (lr_u, lr_v) per noise family. REFERENCE §9 / README.
SYMMETRIC_RATES = (1.0, 10.0)
ASYMMETRIC_RATES = (0.1, 100.0)
PAPER_ASYMMETRIC_LR_U = 1.0  # README: the paper's lr_u for asymmetric noise
NOISE_RATES = {"symmetric": 0.5, "symmetric_include_true": 0.5, "asymmetric": 0.4}  # README commands
RATIO_CONSISTENCY = 0.9  # SOP+: code config_cifar100.json train_loss.args
RATIO_BALANCE = 0.1  # SOP+: code config_cifar100.json train_loss.args
STRONG_VIEW = {"policy": "autoaugment_cifar10_tf", "cutout": 16}  # SOP+: code config "data_augmentation"


def parse(arg: str | None) -> tuple[str, frozenset]:
  """'NOISE[,paper_lr_u][,plus]' -> (noise, options); ValueError naming the allowed values."""
  parts = [p.strip() for p in (arg or DEFAULT).split(",")]
  if not 1 <= len(parts) <= 1 + len(OPTIONS) or len(set(parts[1:])) != len(parts[1:]):
    raise ValueError(f"sop_paper config string {arg!r} must be NOISE[,paper_lr_u][,plus], e.g. {DEFAULT!r}.")
  checks = [("noise", parts[0], NOISES)] + [("option", p, OPTIONS) for p in parts[1:]]
  for what, value, allowed in checks:
    if value not in allowed:
      raise ValueError(f"sop_paper: unknown {what} {value!r} in {arg!r}; allowed: {', '.join(allowed)}.")
  if "paper_lr_u" in parts[1:] and parts[0] != "asymmetric":
    raise ValueError(
      f"sop_paper: 'paper_lr_u' in {arg!r} applies to NOISE asymmetric only (the symmetric rows already use lr_u 1)."
    )
  return parts[0], frozenset(parts[1:])


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  noise, options = parse(arg)
  lr_u, lr_v = ASYMMETRIC_RATES if noise == "asymmetric" else SYMMETRIC_RATES
  if "paper_lr_u" in options:
    lr_u = PAPER_ASYMMETRIC_LR_U
  config = base.get_shared()
  base.paper_data(
    config, DATASET, noise_type=noise, rate=NOISE_RATES[noise], noise_dataset=DATASET if noise == "asymmetric" else ""
  )
  config.model = ml_collections.ConfigDict({"name": MODEL, "kwargs": dict(MODEL_KWARGS), "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.method = ml_collections.ConfigDict({"name": "sop", "lr_u": lr_u, "lr_v": lr_v, "init_std": INIT_STD})
  if "plus" in options:
    config.method.ratio_consistency = RATIO_CONSISTENCY
    config.method.ratio_balance = RATIO_BALANCE
    config.augment.strong = ml_collections.ConfigDict(STRONG_VIEW)
  config.num_epochs = NUM_EPOCHS
  config.optimizer = base.optimizer(LEARNING_RATE, weight_decay=WEIGHT_DECAY, momentum=MOMENTUM)
  config.optimizer.lr_schedule = "cosine"
  config.optimizer.cosine_epochs = COSINE_EPOCHS
  config.optimizer.lr_min = LR_MIN
  return config
