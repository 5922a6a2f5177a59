r"""DivideMix (Li, Socher & Hoi, ICLR 2020): the CIFAR-10 / CIFAR-100 rows of its Train_cifar.py.

The string after the colon picks the row, DATASET,NOISE,RATE:
  DATASET  cifar10 | cifar100
  NOISE    symmetric_include_true  the original code's 'sym': RATE % of the examples get a label drawn from all C
                                   classes, the true one included (realised rate = RATE (C - 1) / C)
           symmetric               flips spread over the C - 1 other classes (realised rate = RATE); lambda_u and
                                   p_threshold of the same 'sym' row
           asymmetric              cifar10 only, the original's 'asym': truck -> automobile, bird -> airplane,
                                   deer -> horse, cat <-> dog (see the deviations for the realised rate)
  RATE     the noise rate in percent: 20 | 50 | 80 | 90 with a symmetric NOISE, 40 with asymmetric (the rows of
           noisy_jax.methods.dividemix.SETTINGS, the paper's App. Table 7)
Default: cifar10,symmetric_include_true,50. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data):

  python -m experiments.train --config=experiments/configs/dividemix_paper.py:cifar100,symmetric_include_true,90 \
      --config.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/dividemix_c100_sym90

Every constant and its source. REFERENCE = shared/REFERENCE.md §8 (LiJunnan1992/DivideMix@d9d3058, Train_cifar.py);
"code" = the stored copies read for this file (Train_CIFAR.py, dataloader_cifar.py, PreResNet.py @39740b2).
  network: PreActResNet-18 (stem conv 64, 4 stages x 2 pre-activation blocks, widths 64/128/256/512), two of them
                                                                       REFERENCE §8; code PreResNet.py
                                                                       (ResNet18 = PreActBlock, [2, 2, 2, 2]).
                                                                       See below for how it is built here.
  SGD lr 0.02, momentum 0.9, weight decay 5e-4                         REFERENCE §8; code Train_CIFAR.py
  lr x0.1 from epoch 150 (0-based; lr_boundaries (150,))               REFERENCE §8; code (lr /= 10 if epoch >= 150)
  300 epochs (num_epochs 300)                                          the paper's 300; the code loops over epochs
                                                                       0..300 (301 passes): see the deviations
  batch_size 128 = 64 labelled + 64 unlabelled per DivideMix step; warm-up batch 128
                                                                       REFERENCE §8; code (--batch_size 64, warm-up
                                                                       loader batch_size * 2); the trainer halves
                                                                       batch_size (noisy_jax.methods.dividemix_train)
  warm_up: 10 epochs (CIFAR-10), 30 (CIFAR-100) of cross entropy      REFERENCE §8; code (warm_up = 10 / 30)
  warmup_penalty: the negative entropy added in the warm-up for asymmetric noise only
                                                                       REFERENCE §8; code (NegEntropy if
                                                                       noise_mode == 'asym')
  loss_window: the GMM fits the mean of the last 5 epochs' normalised losses at 90% noise, else the current (1)
                                                                       REFERENCE §8; code eval_train (args.r == 0.9);
                                                                       noisy_jax.methods.dividemix.LOSS_HISTORY_WINDOW
  alpha 4 (Beta(4, 4) mixing), temperature 0.5                         REFERENCE §8; code (--alpha 4, --T 0.5);
                                                                       noisy_jax.methods.dividemix MIXUP_ALPHA,
                                                                       SHARPEN_TEMPERATURE
  penalty: the uniform-prior penalty, weight 1                         REFERENCE §8; code (loss = Lx + lamb Lu +
                                                                       penalty)
  lu_reduction 'mean' (Lu = mean over B x C of (p - target)^2)         REFERENCE §8 (the code's Lu); the paper's
                                                                       lambda_u were used with it
                                                                       (noisy_jax.methods.dividemix module docstring)
  lambda_u, p_threshold per row: noisy_jax.methods.dividemix.setting(DATASET, NOISE, RATE), from REFERENCE §8 (the
  paper's App. Table 7, partly confirmed in the repository's issues #10, #15, #50):
      cifar10  sym 20%   lambda_u 0     p_threshold 0.5
      cifar10  sym 50%   lambda_u 25    p_threshold 0.5
      cifar10  sym 80%   lambda_u 25    p_threshold 0.5    lambda_u [recalled]
      cifar10  sym 90%   lambda_u 50    p_threshold 0.6    lambda_u [3rd party]
      cifar10  asym 40%  lambda_u 0     p_threshold 0.5
      cifar100 sym 20%   lambda_u 25    p_threshold 0.5
      cifar100 sym 50%   lambda_u 150   p_threshold 0.5
      cifar100 sym 80%   lambda_u 150   p_threshold 0.5
      cifar100 sym 90%   lambda_u 150   p_threshold 0.6
    ([recalled]: not read in a primary source; [3rd party]: reported by others, not the authors. The code's
    defaults, lambda_u 25 and p_threshold 0.5, differ from several rows: issues #9, #17, #26.)
  augmentation: random crop after 4-pixel padding + horizontal flip    REFERENCE §8 ("2 augmentations" = two such
                                                                       views); code dataloader_cifar.py
                                                                       (RandomCrop(32, padding=4),
                                                                       RandomHorizontalFlip)
  normalisation: per channel                                           code dataloader_cifar.py (Normalize with
                                                                       fixed CIFAR statistics; here the training
                                                                       split's own)
  no validation split (trains on all 50,000; the summary's best_test_accuracy and last_test_accuracy are the
  original's "best" and "last" test accuracies, evaluated every epoch)
                                                                       code (no validation set; test(epoch, net1,
                                                                       net2) after every epoch); as sop_paper.py
                                                                       and coteaching_paper.py
  test prediction: argmax of the two networks' summed logits          REFERENCE §8 (the trainer's mean of the
                                                                       pair's logits: the same argmax)
  noise: noise.type NOISE, noise.rate RATE / 100, noise.dataset cifar10 for asymmetric; exact-rate injection
  (noise.exact=True)                                                   REFERENCE §4, §8; code dataloader_cifar.py
                                                                       relabels exactly int(r x 50000) random
                                                                       examples ('sym': uniform over all C classes)

Stated deviations:
- The network. Our registry has no PreActResNet-18; the generic pre-activation ResNet registered as
  `preact_resnet32` is built with widths (64, 128, 256, 512) and blocks_per_stage (2, 2, 2, 2) (as sop_paper.py),
  which gives the same stages, strides and 1x1 projection shortcuts (on the pre-activated input, where the shape
  changes) as the code's ResNet18 (PreResNet.py). It differs in: the code's stem is conv -> BN -> ReLU (ours: a bare
  conv, the first block's BN-ReLU follows), the code has no BN-ReLU before its average pool (ours has one), and
  initialisation (PyTorch's defaults there, He-normal convolutions here).
- Epochs. The code runs `for epoch in range(args.num_epochs + 1)` with num_epochs 300: 301 passes, the last 151 at lr
  0.002. This config trains the paper's 300 (the last 150 at 0.002); --config.num_epochs=301 gives the code's
  count (the lr boundary stays at 150).
- Symmetric noise. The code's 'sym' relabels exactly int(r x 50,000) examples of the whole set, each uniformly over
  all C classes; 'symmetric_include_true' with noise.exact realises the same transition exactly per class (rate r
  of each class drawn again over all C classes: r (C - 1) / C of each class actually wrong, e.g. 81% at CIFAR-10
  90%). 'symmetric' is offered as the other convention (exactly r wrong), with the same row's lambda_u / p_threshold.
- Asymmetric noise. The code maps int(r x 50,000) random examples of all ten classes through its class map, in
  which classes 0, 1, 6, 7, 8 map to themselves: about r of each mapped class (2, 3, 4, 5, 9) flips, about r / 2 of
  all labels (REFERENCE §8), with per-class counts that vary with the draw. Here 'asymmetric' (noise.dataset
  cifar10, REFERENCE §4's CIFAR-10 map, the same pairs) flips exactly r of each mapped class, so also r / 2 = 20% of
  all labels at RATE 40, exactly rather than in expectation.
- Normalisation: the code's fixed statistics (CIFAR-10's std (0.2023, 0.1994, 0.2010) among them) are replaced by
  the training split's per-channel mean and std: a fixed affine map of the inputs either way.
- The trainer's own differences from the code (one shuffled order for both networks in the warm-up, the last
  partial labelled batch dropped, the GMM's deterministic initialisation, ...) are listed in the module docstrings
  of noisy_jax.methods.dividemix_train and noisy_jax.methods.dividemix.
"""

import ml_collections

from experiments.configs import base
from noisy_jax.methods import dividemix as dividemix_lib

DATASETS = ("cifar10", "cifar100")
NOISES = ("symmetric_include_true", "symmetric", "asymmetric")
# NOISE -> the rates (percent) of the rows of noisy_jax.methods.dividemix.SETTINGS; asymmetric: CIFAR-10 only.
RATES = {
  "symmetric_include_true": ("20", "50", "80", "90"),
  "symmetric": ("20", "50", "80", "90"),
  "asymmetric": ("40",),
}
DEFAULT = "cifar10,symmetric_include_true,50"

MODEL = "preact_resnet32"  # the registry's pre-activation ResNet, built as a PreActResNet-18 by MODEL_KWARGS
MODEL_KWARGS = {"widths": (64, 128, 256, 512), "blocks_per_stage": (2, 2, 2, 2)}  # code PreResNet.py ResNet18
LEARNING_RATE = 0.02  # REFERENCE §8
MOMENTUM = 0.9  # REFERENCE §8
WEIGHT_DECAY = 5e-4  # REFERENCE §8
LR_BOUNDARIES = (150,)  # REFERENCE §8: x0.1 from epoch 150 (0-based)
LR_DECAY = 0.1  # REFERENCE §8
NUM_EPOCHS = 300  # the paper; the code's loop is 0..300 (301 passes): see the docstring
BATCH_SIZE = 128  # REFERENCE §8: 64 labelled + 64 unlabelled; warm-up batch 128
WARM_UP = {"cifar10": 10, "cifar100": 30}  # REFERENCE §8
LOSS_WINDOW_AT_90 = dividemix_lib.LOSS_HISTORY_WINDOW  # REFERENCE §8: 5 epochs averaged at 90% noise, else 1
ALPHA = dividemix_lib.MIXUP_ALPHA  # REFERENCE §8: 4
TEMPERATURE = dividemix_lib.SHARPEN_TEMPERATURE  # REFERENCE §8: 0.5


def parse(arg: str | None) -> tuple[str, str, float]:
  """'DATASET,NOISE,RATE' -> (dataset, noise, rate as a fraction); ValueError naming the allowed values."""
  parts = [p.strip() for p in (arg or DEFAULT).split(",")]
  if len(parts) != 3:
    raise ValueError(
      f"dividemix_paper config string {arg!r} must be DATASET,NOISE,RATE (RATE in percent), e.g. {DEFAULT!r}."
    )
  dataset, noise, rate = parts
  for what, value, allowed in (
    ("dataset", dataset, DATASETS),
    ("noise", noise, NOISES),
    ("rate", rate, RATES.get(noise, ())),
  ):
    if value not in allowed:
      raise ValueError(
        f"dividemix_paper: unknown {what} {value!r} in {arg!r}; allowed"
        f"{' with NOISE ' + noise if what == 'rate' else ''}: {', '.join(allowed)}."
      )
  if noise == "asymmetric" and dataset != "cifar10":
    raise ValueError(
      f"dividemix_paper: NOISE asymmetric in {arg!r} applies to cifar10 only (the paper has no "
      "CIFAR-100 asymmetric row)."
    )
  return dataset, noise, int(rate) / 100


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  dataset, noise, rate = parse(arg)
  row = dividemix_lib.setting(dataset, noise, rate)
  asymmetric = noise == "asymmetric"
  config = base.get_shared()
  base.paper_data(config, dataset, noise_type=noise, rate=rate, noise_dataset=dataset if asymmetric else "")
  config.model = ml_collections.ConfigDict({"name": MODEL, "kwargs": dict(MODEL_KWARGS), "pretrained": "none"})
  config.batch_size = BATCH_SIZE
  config.method = ml_collections.ConfigDict(
    {
      "name": "dividemix",
      "warm_up": WARM_UP[dataset],
      "p_threshold": row.p_threshold,
      "lambda_u": row.lambda_u,
      "alpha": ALPHA,
      "temperature": TEMPERATURE,
      "loss_window": LOSS_WINDOW_AT_90 if rate == 0.9 else 1,
      "warmup_penalty": asymmetric,
      "penalty": True,
      "lu_reduction": "mean",
    }
  )
  config.num_epochs = NUM_EPOCHS
  config.optimizer = base.optimizer(
    LEARNING_RATE, weight_decay=WEIGHT_DECAY, lr_boundaries=LR_BOUNDARIES, lr_decay=LR_DECAY, momentum=MOMENTUM
  )
  return config
