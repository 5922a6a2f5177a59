r"""Joint Asymmetric Loss (Wang et al., ICCV 2025): JAL-CE and JAL-FL on CIFAR-10 / CIFAR-100 and CIFAR-N, as the
original code trains them.

The string after the colon picks the row, DATASET,ROW or DATASET,LABELS,ROW:
  DATASET  cifar10 | cifar100        synthetic noise, by default main.py's: symmetric at 0.8 (main.py:18-21). The code
                                     takes the type and rate as flags, and so does this config: --config.noise.rate=R,
                                     --config.noise.type=asymmetric (its class map: CIFAR-10 truck -> automobile,
                                     bird -> airplane, deer -> horse, cat <-> dog; CIFAR-100 below), =none (clean)
           cifar10_n | cifar100_n    CIFAR-N human labels (noise type 'dataset', dataset_kwargs.noise_key), then
                                     LABELS: cifar10_n aggregate | random1 | random2 | random3 | worst (the code's
                                     aggre, rand1, rand2, rand3, worst); cifar100_n noisy (noisy100)
                                     (datasets/data_loaders.py:28-38). A CIFAR-N row trains with its dataset's
                                     CIFAR-10 / CIFAR-100 settings: the code picks the loss, the decays, the model
                                     and the plan by --dataset alone (config.py:123-126, 136-147; main.py:49-58)
  ROW      jal_ce | jal_fl           the code's NCEandAMSE / NFLandAMSE (README.md:7; losses.py:115-133)
Default: cifar10,jal_ce (main.py's defaults: --dataset cifar10, --loss NCEandAMSE, 80% symmetric). On a GPU/TPU box
with the TFDS data prepared (noisy_jax.data.tfds_data; CIFAR-N needs its manual download):

  python -m experiments.train --config=experiments/configs/jal_paper.py:cifar10,jal_ce \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/jal_c10_jal_ce_sym80
  python -m experiments.train --config=experiments/configs/jal_paper.py:cifar100_n,noisy,jal_fl \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/jal_c100n_jal_fl

Every constant and its source: cswjl/joint-asymmetric-loss@0f9eb7b7730fecc319dee5cd53508a9ac26b570c (main.py,
config.py, losses.py, models.py, datasets/; "M2" = datasets/data_method2/build_dataset.py). The training code is
ANL's and ALFs' (alfs_anl_paper.py).
  value                                          CIFAR-10             CIFAR-100            source
  loss (catalogue 'jal_ce' / 'jal_fl')           alpha 1, beta 1,     alpha 5, beta 1,     config.py:29-30, 57-58
                                                 a 30                 a 20
  NFL's gamma (jal_fl)                           0.5                  0.5                  losses.py:126 (NFLandAMSE's
                                                                                           default; config.py never
                                                                                           sets it)
  NFL's focal factors detached (jal_fl)          detach_modulator True                     losses.py:356, 359
  L1 on every parameter (optimizer.l1)           5e-5                 5e-6                 config.py:137-138, 142-143;
                                                                                           main.py:80-82 adds it to the
                                                                                           loss before backward
  weight decay (coupled L2)                      0                    0                    config.py:134-135 (the AMSE
                                                                                           losses take the L1 branch);
                                                                                           main.py:69
  model                                          8-layer CNN          CIFAR ResNet-34      main.py:53, 58; models.py:
                                                 'apl_cnn'            'resnet34'           17-63, 140-192
  epochs                                         120                  200                  main.py:50, 55
  SGD lr, momentum 0.9, no Nesterov              0.01                 0.1                  main.py:51, 56, 69
  cosine lr, T_max = epochs, eta_min 0,          lr_schedule 'cosine', cosine_epochs 0     main.py:70, 88
  stepped after each epoch                       (= num_epochs), lr_min 0
  clip_grad_norm_ 5 after the L1 term            grad_clip_norm 5                          main.py:85
  batch 128, shuffled, last partial batch kept   128                  128                  main.py:52, 57;
                                                                                           data_loaders.py:40-46
  random crop after 4-pixel padding + flip       crop_padding 4, flip                      transformers.py:20-22, 35-37
  no validation split: all 50,000 images         validation_size 0                         M2:236-239, 255-258;
                                                                                           data_human/cifar.py:66-86
  symmetric noise: r / (C - 1) to each other     'symmetric', exact counts                 M2:10-22, 90-130
  class, exact counts per class pair                                                       (--noise_method method2,
                                                                                           main.py:22)
  runs: one, seed 123                            seeds (0,)                                main.py:27-28 (--trials 1)
  reported: the last epoch's test accuracy       the summary's last_test_accuracy          main.py:98-99

Differences from the code, named:
- NFL's gradient: the catalogue's jal_fl differentiates NFL's (1 - p)^gamma as the NFL paper does; the rows set
  `detach_modulator` True, the code's (its numbers come from that code; noisy_jax.core.joint_asymmetric_losses).
- CIFAR-100 asymmetric noise: the code maps each class to the next of a block of 5 consecutive class ids
  (M2:66-88), which are not the superclasses; noisy_jax's 'asymmetric' for CIFAR-100 uses
  the true superclasses (noisy_jax.core.noise) and has no block map. CIFAR-10's map is the code's.
- Noise counts: the code truncates r_ij n_i to an integer per class pair (M2:110), noisy_jax rounds
  by largest remainders, so the flipped count per class is at most C - 1 higher here (CIFAR-10 at 0.8: 4,000 of
  5,000 here, 3,996 in the code; CIFAR-100 at 0.8: 400 of 500 here, 396 there).
- Not offered: the code's instance-dependent noise (--noise_type dependent, datasets/data_dependent) and its other
  synthetic draw (--noise_method method1); the WebVision and Clothing1M settings (main_real_world.py, config.py:60-87,
  149-151) have their own recipes elsewhere (webvision_paper.py, clothing1m_paper.py).
- CIFAR-100 augmentation: the code adds RandomRotation(20) (datasets/transformers.py:38); not here.
- Normalisation: per-channel statistics of the training split, where the code uses fixed constants
  (transformers.py:17-18, 32-33); the crop pads with the mean (0 after normalising), the code with black pixels.
- ResNet-34's initialisation: the code's _reset_prams (models.py:177-183) draws conv kernels kaiming-uniform
  (fan_in, relu) and the classifier xavier-uniform; the registry's resnet34 draws He-normal kernels (the same
  variance) and a LeCun-normal classifier with zero bias. The 8-layer CNN is initialised as the code's
  (models.py:57-63, noisy_jax.models.apl_cnn). avg_pool2d(4) there is the global mean at 32x32 here.
- Clipping divides by ||g|| here, by ||g|| + 1e-6 in torch; the logged training loss leaves the L1 term out.
- Seeds: the code seeds torch with 123 + trial; noisy_jax's seed 0 draws other noise, order and weights. For the mean
  and std over runs the code logs (main.py:116-117 with --trials 3): --config.seeds=0,1,2.
- CIFAR-N rows: TFDS's image order differs from the original pickles (each human label stays with its image).
"""

import ml_collections

from experiments.configs import base
from experiments.configs import paper_rows

ROWS = {  # config.py CIFAR10_CONFIG / CIFAR100_CONFIG: (catalogue loss, hyper-parameters)
  "cifar10": {
    "jal_ce": ("jal_ce", {"alpha": 1.0, "beta": 1.0, "a": 30.0}),  # config.py:29 NCEandAMSE(alpha=1, beta=1, a=30)
    # config.py:30 NFLandAMSE(alpha=1, beta=1, a=30); gamma losses.py:126; detached factors losses.py:356, 359
    "jal_fl": ("jal_fl", {"alpha": 1.0, "beta": 1.0, "a": 30.0, "gamma": 0.5, "detach_modulator": True}),
  },
  "cifar100": {
    "jal_ce": ("jal_ce", {"alpha": 5.0, "beta": 1.0, "a": 20.0}),  # config.py:57 NCEandAMSE(alpha=5, beta=1, a=20)
    # config.py:58 NFLandAMSE(alpha=5, beta=1, a=20); gamma and the detach as CIFAR-10's
    "jal_fl": ("jal_fl", {"alpha": 5.0, "beta": 1.0, "a": 20.0, "gamma": 0.5, "detach_modulator": True}),
  },
}
L1 = {"cifar10": 5e-5, "cifar100": 5e-6}  # config.py:137-138, 142-143 ('AMSE' in the loss's name)
WEIGHT_DECAY = 0.0  # config.py:135 l2_weight_decay stays 0 for the AMSE losses; main.py:69
MODELS = {"cifar10": "apl_cnn", "cifar100": "resnet34"}  # main.py:53 CNN(type='cifar10'); :58 ResNet34(100)
EPOCHS = {"cifar10": 120, "cifar100": 200}  # main.py:50, 55 (= T_max, main.py:70)
LEARNING_RATES = {"cifar10": 0.01, "cifar100": 0.1}  # main.py:51, 56
BATCH_SIZE = 128  # main.py:52, 57
MOMENTUM = 0.9  # main.py:69 SGD(momentum=0.9), no Nesterov
LR_MIN = 0.0  # main.py:70 CosineAnnealingLR(T_max=epochs, eta_min=0), stepped after each epoch (:88)
GRAD_CLIP_NORM = 5.0  # main.py:85 clip_grad_norm_(model.parameters(), 5.)
CROP_PADDING = 4  # datasets/transformers.py:21, 36 RandomCrop(32, padding=4), then RandomHorizontalFlip
VALIDATION_SIZE = 0  # data_method2/build_dataset.py, data_human/cifar.py: all 50,000 training images
SEEDS = (0,)  # main.py:28 --trials 1 (seed 123, :27)
NOISE_TYPE = "symmetric"  # main.py:18 --noise_type default; data_method2 get_sym_T: r / (C - 1) off the diagonal
NOISE_RATE = 0.8  # main.py:20 --noise_rate default '0.8'
HUMAN_LABELS = {  # noisy_jax.data.tfds_data's noise_key; the code's names: datasets/data_loaders.py:29
  "cifar10_n": ("aggregate", "random1", "random2", "random3", "worst"),
  "cifar100_n": ("noisy",),
}
SETTINGS_OF = {"cifar10": "cifar10", "cifar100": "cifar100", "cifar10_n": "cifar10", "cifar100_n": "cifar100"}
DATASETS = tuple(SETTINGS_OF)
ROW_NAMES = ("jal_ce", "jal_fl")
DEFAULT = "cifar10,jal_ce"
FORM = "DATASET,ROW (cifar10, cifar100) or DATASET,LABELS,ROW (cifar10_n, cifar100_n)"


def parse(arg: str | None) -> tuple[str, str | None, str]:
  """(dataset, CIFAR-N labels or None, row) of the config string; ValueError naming the bad part and the allowed
  values."""
  arg = DEFAULT if arg is None else arg
  parts = [p.strip() for p in arg.split(",")]
  if parts[0] not in DATASETS:
    raise ValueError(f"jal_paper: unknown dataset {parts[0]!r} in {arg!r}; allowed: {', '.join(DATASETS)}.")
  dataset = parts[0]
  human = dataset in HUMAN_LABELS
  if len(parts) != (3 if human else 2):
    raise ValueError(f"jal_paper config string {arg!r} must be {FORM}.")
  labels = parts[1] if human else None
  if human and labels not in HUMAN_LABELS[dataset]:
    allowed = ", ".join(HUMAN_LABELS[dataset])
    raise ValueError(f"jal_paper: unknown labels {labels!r} for {dataset} in {arg!r}; allowed: {allowed}.")
  row = parts[-1]
  if row not in ROW_NAMES:
    raise ValueError(f"jal_paper: unknown row {row!r} in {arg!r}; allowed: {', '.join(ROW_NAMES)}.")
  return dataset, labels, row


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, labels, row = parse(arg)
  settings = SETTINGS_OF[dataset]
  loss, kwargs = ROWS[settings][row]
  config = base.get_shared()
  config.seeds = SEEDS
  if labels is None:
    paper_rows.row_data(config, dataset, NOISE_TYPE, NOISE_RATE, validation_size=VALIDATION_SIZE, noise_dataset=dataset)
  else:
    paper_rows.row_data(config, dataset, "human", labels, validation_size=VALIDATION_SIZE)
  config.augment = ml_collections.ConfigDict({"crop_padding": CROP_PADDING, "flip": True})
  config.model = ml_collections.ConfigDict({"name": MODELS[settings], "kwargs": {}, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.num_epochs = EPOCHS[settings]
  config.optimizer = base.sgd(
    LEARNING_RATES[settings], momentum=MOMENTUM, weight_decay=WEIGHT_DECAY, lr_schedule="cosine"
  )
  config.optimizer.cosine_epochs = 0  # the stage's num_epochs: T_max = epochs
  config.optimizer.lr_min = LR_MIN
  config.optimizer.grad_clip_norm = GRAD_CLIP_NORM
  config.optimizer.l1 = L1[settings]
  config.method = ml_collections.ConfigDict({"name": "loss", "loss": loss, "loss_kwargs": dict(kwargs)})
  return config
