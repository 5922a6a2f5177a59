r"""Forward / backward loss correction (Patrini et al., CVPR 2017): the CIFAR-10 / CIFAR-100 rows of its code.

The string after the colon picks the row, DATASET,CORRECTION,TRANSITION,NOISE[,shared_filter]:
  DATASET        cifar10 | cifar100
  CORRECTION     forward   -log (T^T p)_y~
                 backward  (T^-1 l)_y~, l_j = -log p_j
  TRANSITION     known      T is the noise model's own matrix (the code's 'forward' / 'backward')
                 estimated  a cross-entropy network is trained first on the same noisy labels for the same epochs,
                            and T is the anchor-point estimate from its softmax of the training split (the code's
                            'est_forward' / 'est_backward'); the corrected network is then trained from scratch
  NOISE          asymmetric  CIFAR-10: truck -> automobile, bird -> airplane, deer -> horse, cat <-> dog;
                             CIFAR-100: class -> next class of its true superclass (see the deviations)
                 symmetric   flips spread over the C - 1 other classes (the code's build_uniform_P)
  shared_filter  optional, cifar10 with TRANSITION estimated only: the original code's estimate, whose outlier filter
                 zeroes entries of the one probability matrix the anchor rows are then read from (REFERENCE §10)
Default: cifar10,forward,estimated,asymmetric. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data):

  python -m experiments.train \
      --config=experiments/configs/loss_correction_paper.py:cifar10,forward,estimated,asymmetric \
      --config.noise.rate=0.6 --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/lc_c10

Every constant and its source. REFERENCE = shared/REFERENCE.md §10 (giorgiop/loss-correction@15a79de); "code" = that
commit's files, read for this config (experiment.py, models.py, resnet.py, loss.py, noise.py).
  forward / backward corrected cross entropy on the softmax clipped to [1e-7, 1 - 1e-7]
                                                     REFERENCE §10; code loss.py `robust`
                                                     (noisy_jax.methods.loss_correction)
  'known': the noise's own T                         code experiment.py (build_model(loss, P), P from noise.py)
  'estimated': cross entropy first, same noisy labels, same network and epochs; T from its softmax of the training
  images (no augmentation), each anchor row normalised to sum 1
                                                     REFERENCE §10; code experiment.py (est_forward / est_backward
                                                     load the crossentropy run's model), models.py NoiseEstimator
                                                     (alpha 0, row_normalize)
  anchor filter: CIFAR-10 percentile 97 ('higher'), CIFAR-100 none (plain argmax; method.percentile None)
                                                     REFERENCE §10; code experiment.py (filter_outlier False for
                                                     cifar100 only), models.py (np.percentile(.., 97,
                                                     interpolation='higher'))
  shared_filter False (each column filtered on a copy); the option sets True, the code's in-place zeroing
                                                     REFERENCE §10 (a defect of the code: noisy_jax offers both)
  network: the CIFAR ResNet of resnet.py, 6n + 2 layers, widths 16/32/64, pre-activation blocks with 1x1 projection
  shortcuts where the width changes, BN -> ReLU -> global average pool -> dense softmax
                                                     code resnet.py cifar10_resnet(n)
    CIFAR-10: n = 5, ResNet-32                       [recalled]: the paper's CIFAR-10 network. The code takes n from
                                                     the dataset argument (-d cifar10_resnet{n}, one digit; its
                                                     README has no commands); --config.model.kwargs.blocks_per_stage
                                                     ="(2,2,2)" gives ResNet-14
    CIFAR-100: n = 7, ResNet-44                      REFERENCE §10; code models.py (cifar10_resnet(7, ...))
  SGD lr 0.1, momentum 0.9, no Nesterov              REFERENCE §10; code models.py (SGD(lr=0.1, momentum=0.9,
                                                     decay=0.0), both datasets)
  CIFAR-10: 120 epochs, lr 0.1 for epochs 0-40, 0.01 for 41-80, 0.001 from 81 (lr_boundaries (41, 81))
                                                     REFERENCE §10 ("0.01 after 40, 0.001 after 80"); code models.py
                                                     (LearningRateScheduler: epoch > 40 -> 0.01, epoch > 80 -> 0.001,
                                                     Keras's 0-based epoch)
  CIFAR-100: 150 epochs, lr 0.1 for epochs 0-80, 0.01 for 81-120, 0.001 from 121 (lr_boundaries (81, 121))
                                                     REFERENCE §10; code models.py (epoch > 80, epoch > 120)
  weight decay 2e-4 (CIFAR-10), 2e-3 (CIFAR-100)     REFERENCE §10; code resnet.py (kernel_regularizer l2(decay)),
                                                     models.py (decay 1e-4 / 1e-3). Keras's l2(d) adds d ||w||^2 to the
                                                     loss, a gradient of 2 d w; the trainer's coupled weight decay wd
                                                     adds wd w, so wd = 2 d gives the code's update (not d, which
                                                     would halve its regularisation)
  batch 128                                          REFERENCE §10; code experiment.py (num_batch = 128)
  validation split: 10% of the 50,000 = 5,000        REFERENCE §10; code experiment.py (val_split 0.1), models.py
                                                     fit_model (the first 10% held out)
  augmentation: shift by up to 3 pixels each way + horizontal flip (crop_padding 3, flip)
                                                     REFERENCE §10; code models.py (ImageDataGenerator(
                                                     width_shift_range=0.1, height_shift_range=0.1,
                                                     horizontal_flip=True): a shift uniform in +-3.2 pixels, rounded
                                                     by the nearest-neighbour resampling [recalled: Keras 2's
                                                     apply_transform, order 0])
  normalisation: mean-image subtraction ('mean_image') code models.py (X_train - X_train.mean(axis=0), no std)
  noise: 'asymmetric' (noise.dataset DATASET) or 'symmetric'
                                                     code noise.py (noisify_cifar10_asymmetric: the same four maps,
                                                     whose deer -> horse line is commented "automobile -> truck";
                                                     build_uniform_P: rate / (C - 1) to each other class); REFERENCE
                                                     §4. The paper's CIFAR tables use the asymmetric maps [recalled]
  noise rate 0.2 (override with --config.noise.rate=R)
                                                     our choice; the code takes it from the command line (-n) and its
                                                     README gives none; the paper reports N = 0.2 and 0.6 [recalled]
  exact-rate injection (noise.exact=True)            REFERENCE §4; the code draws each label independently from P
                                                     (multiclass_noisify): --config.noise.exact=False

Stated deviations:
- Model selection. The code keeps the checkpoint with the lowest validation loss (the corrected loss of the run, on
  the noisy validation labels: ModelCheckpoint(monitor='val_loss', save_best_only=True)) and reports its test
  accuracy. The trainer injects noise into the training split only and selects by validation *accuracy* on the clean
  validation labels: "test at best validation" is chosen with clean labels (optimistic); the last epoch's test
  accuracy is reported too.
- The estimator's network. The code estimates T with the cross-entropy run's best-validation-loss checkpoint, on all
  50,000 training images (its 5,000 validation images included). Here the estimate uses the cross-entropy network of
  the last epoch (noisy_jax.experiment.runs.correction_transition), on the 45,000 images of the training split.
- Epoch length. The code's fit_generator runs steps_per_epoch = 50,000 // 128 = 390 batches per epoch over its
  45,000 training images (about 1.11 passes); an epoch here is one pass (352 steps). The epoch counts and the lr
  boundaries are the code's, so the schedule falls at the same fraction of training, with ~10% fewer steps in all
  (CIFAR-10 42,240 against 46,800).
- The network. The registry's pre-activation ResNet (`preact_resnet32`, built with blocks_per_stage (5, 5, 5) or
  (7, 7, 7)) has the code's stages, strides, widths and 1x1 projection shortcuts. It differs in: the code's stem is
  conv -> BN -> ReLU and its first block has no pre-activation of its own (here a bare conv, the first block's BN-ReLU
  follows, so the first identity shortcut carries the stem's raw output); the code's projections take the block's
  input, not its pre-activation; the code's convolutions have biases (here none); BatchNorm momentum 0.99 and epsilon
  1e-3 in Keras (0.9 and 1e-5 here); Keras's he_normal for the dense layer (LeCun normal here).
- Weight decay covers every parameter here (BatchNorm scales and offsets, the dense bias); the code regularises the
  convolution and dense kernels only.
- Augmentation. Keras fills the shifted-in border with the nearest edge pixel (fill_mode 'nearest'); the crop here
  pads with 0 after the mean subtraction, the mean image's value.
- Normalisation. The code subtracts the mean image of all 50,000 training images from pixels in 0-255 units; here
  the mean image of the 45,000-image training split is subtracted from pixels scaled to [0, 1]. The code's BatchNorm
  right after its first convolution makes its forward pass independent of that factor 255, not its gradient steps.
- CIFAR-100 asymmetric noise. The code's noisify_cifar100_asymmetric flips within blocks of 5 consecutive class ids,
  which are not CIFAR-100's superclasses; 'asymmetric' here flips to the next class of the true superclass
  (REFERENCE §4), which is also the T that 'known' uses.
- The validation split is stratified by class (TFDS loader); the code holds out the first 10% of a fixed shuffle.
"""

import ml_collections

from experiments.configs import base

DATASETS = ("cifar10", "cifar100")
CORRECTIONS = ("forward", "backward")
TRANSITIONS = ("known", "estimated")
NOISES = ("asymmetric", "symmetric")
OPTIONS = ("shared_filter",)
DEFAULT = "cifar10,forward,estimated,asymmetric"

MODEL = "preact_resnet32"  # the registry's CIFAR pre-activation ResNet, depth set by MODEL_KWARGS
MODEL_KWARGS = {
  "cifar10": {"blocks_per_stage": (5, 5, 5)},  # ResNet-32 [recalled] (code: n from -d)
  "cifar100": {"blocks_per_stage": (7, 7, 7)},
}  # ResNet-44, code models.py cifar10_resnet(7, ...)
LEARNING_RATE = 0.1  # code models.py SGD(lr=0.1)
MOMENTUM = 0.9  # code models.py SGD(momentum=0.9)
KERAS_L2 = {"cifar10": 1e-4, "cifar100": 1e-3}  # code models.py self.decay, resnet.py l2(decay)
WEIGHT_DECAY = {d: 2 * l2 for d, l2 in KERAS_L2.items()}  # l2(d) adds d ||w||^2: gradient 2 d w
NUM_EPOCHS = {"cifar10": 120, "cifar100": 150}  # code models.py self.epochs
LR_BOUNDARIES = {"cifar10": (41, 81), "cifar100": (81, 121)}  # code models.py scheduler (epoch > 40 / > 80 etc.)
LR_DECAY = 0.1  # code models.py scheduler: 0.1 -> 0.01 -> 0.001
BATCH_SIZE = 128  # code experiment.py num_batch
VALIDATION_SIZE = 5000  # code experiment.py val_split 0.1 of 50,000
CROP_PADDING = 3  # code models.py width/height_shift_range 0.1 of 32 pixels
PERCENTILE = {"cifar10": 97.0, "cifar100": None}  # code experiment.py filter_outlier, models.py NoiseEstimator
NOISE_RATE = 0.2  # our choice (the paper's N = 0.2 and 0.6 [recalled])


def parse(arg: str | None) -> tuple[str, str, str, str, bool]:
  """'DATASET,CORRECTION,TRANSITION,NOISE[,shared_filter]' -> (dataset, correction, transition, noise,
  shared_filter); ValueError naming the allowed values."""
  parts = [p.strip() for p in (arg or DEFAULT).split(",")]
  if len(parts) not in (4, 5):
    raise ValueError(
      f"loss_correction_paper config string {arg!r} must be "
      f"DATASET,CORRECTION,TRANSITION,NOISE[,shared_filter], e.g. {DEFAULT!r}."
    )
  dataset, correction, transition, noise = parts[:4]
  checks = [
    ("dataset", dataset, DATASETS),
    ("correction", correction, CORRECTIONS),
    ("transition", transition, TRANSITIONS),
    ("noise", noise, NOISES),
  ]
  if len(parts) == 5:
    checks.append(("option", parts[4], OPTIONS))
  for what, value, allowed in checks:
    if value not in allowed:
      raise ValueError(f"loss_correction_paper: unknown {what} {value!r} in {arg!r}; allowed: {', '.join(allowed)}.")
  shared_filter = len(parts) == 5
  if shared_filter and (dataset != "cifar10" or transition != "estimated"):
    raise ValueError(
      f"loss_correction_paper: 'shared_filter' in {arg!r} applies to cifar10 with TRANSITION "
      "estimated only (CIFAR-100's estimate has no outlier filter; a known T is not estimated)."
    )
  return dataset, correction, transition, noise, shared_filter


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, correction, transition, noise, shared_filter = parse(arg)
  config = base.get_shared()
  base.paper_data(
    config,
    dataset,
    noise_type=noise,
    rate=NOISE_RATE,
    noise_dataset=dataset if noise == "asymmetric" else "",
    validation_size=VALIDATION_SIZE,
    normalization="mean_image",
    crop_padding=CROP_PADDING,
  )
  config.model = ml_collections.ConfigDict({"name": MODEL, "kwargs": dict(MODEL_KWARGS[dataset]), "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  percentile = PERCENTILE[dataset]
  config.method = ml_collections.ConfigDict(
    {
      "name": "loss_correction",
      "correction": correction,
      "transition": transition,
      "percentile": ml_collections.config_dict.placeholder(float) if percentile is None else percentile,
      "shared_filter": shared_filter,
    }
  )
  config.num_epochs = NUM_EPOCHS[dataset]
  config.optimizer = base.optimizer(
    LEARNING_RATE,
    weight_decay=WEIGHT_DECAY[dataset],
    lr_boundaries=LR_BOUNDARIES[dataset],
    lr_decay=LR_DECAY,
    momentum=MOMENTUM,
  )
  return config
