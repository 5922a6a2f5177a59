r"""Peer Loss (Liu & Guo, ICML 2020) with the CIFAR-N replication's plan: CIFAR-10N / CIFAR-100N, and CIFAR-10 / -100.

The string after the colon picks the row, DATASET,LABELS[,ALPHA] or DATASET,symmetric,RATE[,ALPHA]:
  DATASET   cifar10_n | cifar100_n     CIFAR-N human labels (noise type 'dataset', dataset_kwargs.noise_key), then
                                       LABELS: cifar10_n aggregate | random1 | random2 | random3 | worst; cifar100_n
                                       noisy. The replication's protocol (KlemenVovk/noisy-labels
                                       peer_loss_cifar10_clean.py); CIFAR-100N takes its CIFAR-10 settings (our
                                       choice: it has no CIFAR-100 Peer Loss config)
  DATASET   cifar10 | cifar100         symmetric noise, then RATE: 0.2 | 0.4 | 0.6 | 0.8, with the same plan (our
                                       choice: the paper's CIFAR code is not public; its CIFAR-10 tables use sparse
                                       and uniform noise at these rates [recalled]). Our 'symmetric' moves RATE of the
                                       labels to the other classes
  ALPHA     sparse (default) | uniform the alpha schedule: the replication's f_alpha with r = 0.1 (peer_loss.py:66,
                                       its only setting) or its r > 0.3 branch (utils.py:18-37), which no run of the
                                       replication uses; with it the lr plan divides by 1 + its own alpha (our choice:
                                       utils.py:52's lr_plan always divides by the sparse one)
Default: cifar10_n,worst. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data; CIFAR-N needs its
manual download):

  python -m experiments.train --config=experiments/configs/peer_loss_paper.py:cifar10_n,worst \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/peer_loss_c10n_worst
  python -m experiments.train --config=experiments/configs/peer_loss_paper.py:cifar10,symmetric,0.4,uniform \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/peer_loss_c10_sym40_uniform

A run is one stage of the method's own epoch program (noisy_jax.methods.peer_loss): each step the batch's cross
entropy minus alpha_e times the cross entropy of peer inputs and peer labels drawn from the whole training split.

Every constant and its source. "rep" = KlemenVovk/noisy-labels: src/noisypy/configs/methods/peer_loss/
peer_loss_cifar10_clean.py "PC", methods/learning_strategies/peer_loss/peer_loss.py "PL", .../peer_loss/utils.py
"PU", methods/learning_strategies/base.py "B", configs/data/cifar10.py "D".
  network: ResNet-34 (registry 'resnet34', CIFAR style)                        PC:31-35
  batch 128, random crop after 4-pixel padding + horizontal flip               D:19; datasets/cifar10.py
  validation split: 10,000 (Split(0.8) of 50,000), model selection by its accuracy
                                                                               D:11; PL:150-155
  epochs: 51 = sum(stages [0, 50]) + 1                                         PC:23, 47-48
    stage 0 is epoch 0 alone (B:86-90: the stage is the first whose cumulative end >= the epoch; cumsum [0, 50]),
    trained with CrossEntropyLossStable (PL:28, 83-90); epochs 1-50 are stage 1, the peer loss with
    alpha = f_alpha(epoch) (PL:124-132, 63). f_alpha is 0 for its first 20 epochs, so epochs 0-19 are the stable
    cross entropy in both; here every epoch runs the peer program (alpha 0 on epoch 0; the peer forward moves the
    BatchNorm statistics there too)
  optimiser: SGD lr 1, weight decay 1e-4, no momentum, each stage its own      PC:38-41 (torch's SGD: momentum 0)
    (with no momentum a fresh optimiser at the switch changes nothing)
  lr per epoch: LambdaLR, lr_e = 1 x factor_e, stepped after each epoch of its stage (B:114-119): stage 0's
    lr_plan(0) on epoch 0; stage 1's scheduler counts from 0 at epoch 1, so epoch e >= 1 trains at lr_plan(e - 1)
    while its alpha is f_alpha(e): the one-epoch offset is kept (lr_schedule 'per_epoch', lr_factors below).
    lr_plan(e) = plan[e] / (1 + f_alpha(e)), plan = 0.1 x 40, 0.01 x 40, ... (PU:40-52; core.peer_loss.lr_factor)
                                                                               PC:43-46
  loss: CrossEntropyLossStable, -log(softmax + 1e-5) in both terms (log_epsilon 1e-5)
                                                                               PU:5-14; PL:53
  noise: CIFAR-N's human labels; synthetic rows symmetric at RATE, exact-rate injection (noise.exact=True)
The factors are written for 340 epochs (f_alpha's range, PU:36's clamp), so --config.num_epochs up to 340 keeps the
replication's plan; more epochs need a longer --config.optimizer.lr_factors.

Stated deviations:
- The peers: the replication pairs each batch with a second loader over one fixed permutation of the images; here
  two independent uniform draws with replacement from the whole split each step (noisy_jax.methods.peer_loss).
- Model selection: on the clean labels of a stratified 10,000-row validation split; the replication's are the last
  10,000 rows of its training set, with their noisy labels (PL:145-150 score val_acc on y_noise).
- Normalisation: per-channel statistics of the training split (the replication's fixed constants); TFDS's image order
  differs from torchvision's (each human label stays with its image).
"""

import ml_collections

from experiments.configs import base
from experiments.configs import paper_rows
from noisy_jax.core import peer_loss as peer_core

DATASETS = ("cifar10", "cifar100", "cifar10_n", "cifar100_n")
RATES = (0.2, 0.4, 0.6, 0.8)
HUMAN_LABELS = {  # noisy_jax.data.tfds_data's noise_key
  "cifar10_n": ("aggregate", "random1", "random2", "random3", "worst"),
  "cifar100_n": ("noisy",),
}
ALPHAS = tuple(peer_core.ALPHA_PIECES)  # ('sparse', 'uniform')
DEFAULT = "cifar10_n,worst"

MODEL = "resnet34"  # PC:31
BATCH_SIZE = 128  # D:19
CROP_PADDING = 4  # datasets/cifar10.py RandomCrop(32, padding=4)
VALIDATION_SIZE = 10000  # D:11 Split(0.8)
NUM_EPOCHS = 51  # PC:47 max_epochs = sum([0, 50]) + 1
LEARNING_RATE = 1.0  # PC:39-40 SGD(lr=1): the plan is the factor
MOMENTUM = 0.0  # PC:39-40 (torch SGD's default)
WEIGHT_DECAY = 1e-4  # PC:39-40
LOG_EPSILON = peer_core.REPLICATION_LOG_EPSILON  # PU:6 CrossEntropyLossStable
FACTOR_EPOCHS = 340  # PU:36 f_alpha's clamp to [0, 339]


def lr_factors(setting: str = "sparse", num_epochs: int = FACTOR_EPOCHS) -> tuple[float, ...]:
  """The replication's lr of each 0-based epoch e (module docstring): lr_plan(0) for epoch 0 (stage 0's scheduler),
  lr_plan(e - 1) for e >= 1 (stage 1's, counting from its own first epoch)."""
  return tuple(peer_core.lr_factor(max(e - 1, 0), setting) for e in range(num_epochs))


def parse(arg: str | None) -> tuple[str, str, float | str, str]:
  """(dataset, 'symmetric' or 'human', rate or labels, alpha setting) of the config string; ValueError naming the
  bad part and the allowed values."""
  dataset, noise, rate_or_labels, alpha = paper_rows.parse_row(
    arg or DEFAULT,
    config_name="peer_loss_paper",
    datasets=DATASETS,
    rates={"symmetric": RATES},
    human_labels=HUMAN_LABELS,
    options=ALPHAS,
  )
  return dataset, noise, rate_or_labels, alpha or "sparse"


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, rate_or_labels, alpha = parse(arg)
  config = base.get_shared()
  paper_rows.row_data(config, dataset, noise, rate_or_labels, validation_size=VALIDATION_SIZE)
  config.augment = ml_collections.ConfigDict({"crop_padding": CROP_PADDING, "flip": True})
  config.model = ml_collections.ConfigDict({"name": MODEL, "kwargs": {}, "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.num_epochs = NUM_EPOCHS
  config.method = ml_collections.ConfigDict({"name": "peer_loss", "alpha": alpha, "log_epsilon": LOG_EPSILON})
  config.optimizer = base.sgd(LEARNING_RATE, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY, lr_schedule="per_epoch")
  config.optimizer.lr_factors = list(lr_factors(alpha))
  return config
