r"""Peers' robust losses on CIFAR-10 with 20% symmetric noise, in two settings: the GCE paper's and APL's.

The string after the colon picks one row, or a comparison of a setting's rows (one table, `runs`):
  GCE setting  ce | gce | sce | nce_rce | nce_mae | bootstrap_soft | bootstrap_hard | focal | label_smoothing | all
  APL setting  apl_ce | apl_sce | apl_nce_rce | apl_nce_mae | apl_all
Default: nce_rce. On a GPU/TPU box with the TFDS data prepared (noisy_jax.data.tfds_data):

  python -m experiments.train --config=experiments/configs/peers_paper.py:all \
      --config.shared.dataset_kwargs.data_dir=$HOME/tensorflow_datasets --workdir=workdirs/peers_c10_sym20
  python -m experiments.train --config=experiments/configs/peers_paper.py:apl_nce_rce --workdir=workdirs/apl_nce_rce
  python -m experiments.train --config=experiments/configs/peers_paper.py:nce_rce --config.noise.rate=0.4 ...

Each row reproduces the setting whose number it quotes. APL = Active-Passive Losses (Ma et al., ICML 2020, arXiv
2006.13554); "APL code" = github.com/HanxunH/Active-Passive-Losses@2d18de6, files named below.

GCE setting: gce_paper.py's cifar10 (ResNet-34, 120 epochs, SGD lr 0.01 x0.1 at 40 / 80, momentum 0.9, weight decay
1e-4, batch 128, crop + flip, per-channel normalisation, 45k / 5k split; sources there) at 20% symmetric noise
(REFERENCE §5's rate) instead of gce_paper's 40%. The library's loss conventions: RCE's log 0 = A = -4 (the SCE
paper, REFERENCE §5), MAE = sum_k |p_k - y_k| = 2 - 2 p_y (REFERENCE §5). No paper reports these rows.

APL setting (every value read in the APL code): configs/cifar10/sym/{ce,sce,nce+rce,nce+mae}.yaml, main.py,
trainer.py, models.py, dataset.py, loss.py, collect_exp_results.py, script/submit_c10.sh:
  model: ToyModel type CIFAR10, the 8-layer CNN = `apl_cnn` (noisy_jax.models.apl_cnn)      models.py
  120 epochs, batch 128                                                                    the yaml files
  SGD lr 0.01, momentum 0.9, weight decay 1e-4 (coupled, PyTorch SGD)                      the yaml files
  CosineAnnealingLR(T_max = epochs = 120, eta_min 0), stepped once after each epoch: lr_schedule 'cosine', lr_min 0,
    cosine_epochs 0 (= num_epochs, as the yaml's `T_max: $epochs`)                         yaml; main.py train()
  clip_grad_norm_(parameters, grad_bound 5.0) before optimizer.step: grad_clip_norm 5.0    yaml; trainer.py
  RandomCrop(32, padding=4) + RandomHorizontalFlip                                         dataset.py
  Normalize with CIFAR-10 per-channel mean / std constants: 'per_channel' here computes the training split's own
    channel statistics (the same numbers up to the constants' rounding)                    dataset.py
  the whole 50,000-image training set, no validation split: validation_size 0             dataset.py, main.py
  symmetric noise, exactly int(int(r N) / 10) = 1,000 images of each class flipped, each to a uniformly drawn other
    class: 'symmetric' with exact=True (round(r n_c) = 1,000 per class on CIFAR-10)        dataset.py cifar10Nosiy
  3 runs, seeds 0, 1, 2; reported: last-epoch test accuracy, mean and sample std (statistics.stdev; this trainer's
    table shows the population std, sqrt(2/3) of it for 3 seeds): seeds (0, 1, 2) here     submit_c10.sh;
                                                                                           collect_exp_results.py
  APL's losses in the library's terms (loss.py): RCE clamps the one-hot label at 1e-4 before the log, so
    A = log 1e-4 = -9.21 (losses.APL_LOG_ZERO); MAE = 1 - p_y, half of ours, so APL's NCE+MAE(alpha, beta) =
    our nce_mae(alpha, beta / 2). APL's RCE also clamps p at 1e-7 (not reproduced; a < 1e-5 change of the value).

Every row. Setting: GCE or APL (above). Convention: RCE's log 0 (A) and the MAE form. Quoted: the number the row
reproduces (REFERENCE §5), '-' where no paper reports the row.
  row              setting  convention            hyper-parameters                source                   quoted
  ce               GCE      -                     -                               -                        -
  gce              GCE      -                     q 0.7                           gce_paper (REFERENCE §1) -
  sce              GCE      A = -4                alpha 0.1, beta 1.0             SCE paper's CIFAR-10     -
                                                                                  values (losses
                                                                                  docstring); A: REF. §5
  nce_rce          GCE      A = -4                alpha 1.0, beta 1.0             library default          -
  nce_mae          GCE      MAE = 2 - 2 p_y       alpha 1.0, beta 1.0             library default          -
  bootstrap_soft   GCE      -                     beta 0.95                       Reed et al. (losses)     -
  bootstrap_hard   GCE      -                     beta 0.8                        Reed et al. (losses)     -
  focal            GCE      -                     gamma 2.0                       library default (Lin)    -
  label_smoothing  GCE      -                     CE on (1 - eps) y + eps / C,    our choice (Szegedy et   -
                                                  eps 0.1                         al.'s value)
  apl_ce           APL      -                     -                               APL sym/ce.yaml          -
  apl_sce          APL      A = log 1e-4 = -9.21  alpha 0.1, beta 1.0             APL sym/sce.yaml,        -
                                                                                  loss.py SCELoss
  apl_nce_rce      APL      A = log 1e-4 = -9.21  alpha 1.0, beta 1.0             APL sym/nce+rce.yaml,    89.22 +- 0.27
                                                                                  loss.py NCEandRCE
  apl_nce_mae      APL      MAE = 1 - p_y (APL)   APL's alpha 1.0, beta 1.0       APL sym/nce+mae.yaml,    -
                                                  = our alpha 1.0, beta 0.5       loss.py NCEandMAE
The quoted number is APL's CIFAR-10 20% symmetric NCE+RCE result (REFERENCE §5); it attaches to apl_nce_rce only.
"""

import ml_collections

from experiments.configs import base
from experiments.configs import gce_paper
from noisy_jax.core import losses

NOISE_RATE = 0.2  # REFERENCE §5: APL's quoted CIFAR-10 result is at 20% symmetric noise
APL_NCE_RCE_SYM20 = (89.22, 0.27)  # REFERENCE §5, mean +- std; the apl_nce_rce row
QUOTED = {"apl_nce_rce": APL_NCE_RCE_SYM20}  # row -> the number it reproduces; every other row quotes none

# GCE setting, the library's conventions. name -> (noisy_jax.core.losses name, its keyword hyper-parameters)
LOSSES = {
  "ce": ("cross_entropy", {}),
  "gce": ("generalized_cross_entropy", {"q": gce_paper.Q}),
  "sce": ("symmetric_cross_entropy", {"alpha": 0.1, "beta": 1.0, "log_zero": losses.DEFAULT_LOG_ZERO}),
  "nce_rce": ("nce_rce", {"alpha": 1.0, "beta": 1.0, "log_zero": losses.DEFAULT_LOG_ZERO}),
  "nce_mae": ("nce_mae", {"alpha": 1.0, "beta": 1.0}),
  "bootstrap_soft": ("bootstrap_soft", {"beta": 0.95}),
  "bootstrap_hard": ("bootstrap_hard", {"beta": 0.8}),
  "focal": ("focal_loss", {"gamma": 2.0}),
  "label_smoothing": ("cross_entropy", {}),
}
# name -> extra fields of config.method (method 'loss' smooths the targets itself:
# noisy_jax.methods.plain_loss.method)
METHOD_EXTRAS = {"label_smoothing": {"label_smoothing": 0.1}}

# APL setting, APL's conventions (APL code loss.py and configs/cifar10/sym/*.yaml).
APL_MAE_SCALE = 0.5  # APL's MAE = 1 - p_y = half of ours (2 - 2 p_y): APL's beta b is our beta b / 2
APL_LOSSES = {
  "apl_ce": ("cross_entropy", {}),  # sym/ce.yaml: CrossEntropyLoss
  "apl_sce": ("symmetric_cross_entropy", {"alpha": 0.1, "beta": 1.0, "log_zero": losses.APL_LOG_ZERO}),  # sce.yaml
  "apl_nce_rce": ("nce_rce", {"alpha": 1.0, "beta": 1.0, "log_zero": losses.APL_LOG_ZERO}),  # nce+rce.yaml
  "apl_nce_mae": ("nce_mae", {"alpha": 1.0, "beta": 1.0 * APL_MAE_SCALE}),  # nce+mae.yaml: alpha = beta = 1
}
APL_MODEL = "apl_cnn"  # models.py ToyModel(type='CIFAR10')
APL_EPOCHS = 120  # yaml: epochs
APL_BATCH_SIZE = 128  # yaml: dataset.train_batch_size
APL_LEARNING_RATE = 0.01  # yaml: optimizer.lr
APL_MOMENTUM = 0.9  # yaml: optimizer.momentum
APL_WEIGHT_DECAY = 1e-4  # yaml: optimizer.weight_decay
APL_LR_MIN = 0.0  # yaml: scheduler.eta_min (CosineAnnealingLR, T_max = epochs, stepped per epoch in main.py)
APL_GRAD_CLIP_NORM = 5.0  # yaml: grad_bound; trainer.py clip_grad_norm_
APL_SEEDS = (0, 1, 2)  # script/submit_c10.sh: run1..run3 with seeds 0, 1, 2
DEFAULT = "nce_rce"
CHOICES = (*LOSSES, "all", *APL_LOSSES, "apl_all")


def get_single(name: str) -> ml_collections.ConfigDict:
  """gce_paper's CIFAR-10 config with 20% symmetric noise and the loss `name` of LOSSES."""
  loss, kwargs = LOSSES[name]
  config = gce_paper.get_config("cifar10,gce,symmetric")
  config.noise.rate = NOISE_RATE
  config.method = {"name": "loss", "loss": loss, "loss_kwargs": dict(kwargs), **METHOD_EXTRAS.get(name, {})}
  return config


def get_apl_single(name: str) -> ml_collections.ConfigDict:
  """APL's CIFAR-10 setting (module docstring) with 20% exact symmetric noise and the loss `name` of APL_LOSSES."""
  loss, kwargs = APL_LOSSES[name]
  config = base.get_shared()
  config.seeds = APL_SEEDS
  base.paper_data(config, "cifar10", noise_type="symmetric", rate=NOISE_RATE)
  config.model = ml_collections.ConfigDict({"name": APL_MODEL, "kwargs": {}, "pretrained": "none"})
  config.batch_size = APL_BATCH_SIZE
  config.num_epochs = APL_EPOCHS
  config.optimizer = base.optimizer(APL_LEARNING_RATE, weight_decay=APL_WEIGHT_DECAY, momentum=APL_MOMENTUM)
  config.optimizer.lr_schedule = "cosine"
  config.optimizer.cosine_epochs = 0  # 0: the stage's num_epochs (the yaml's T_max: $epochs)
  config.optimizer.lr_min = APL_LR_MIN
  config.optimizer.grad_clip_norm = APL_GRAD_CLIP_NORM
  config.method = {"name": "loss", "loss": loss, "loss_kwargs": dict(kwargs)}
  return config


def _comparison(names, single, title: str) -> ml_collections.ConfigDict:
  shared = single(names[0])
  config = ml_collections.ConfigDict()
  config.title = title
  config.plots = False
  runs = {name: ml_collections.ConfigDict({"method": single(name).method.to_dict()}) for name in names}
  del shared.method, shared.plots
  config.shared = shared
  config.runs = ml_collections.ConfigDict(runs)
  return config


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  name = (arg or DEFAULT).strip()
  if name not in CHOICES:
    raise ValueError(f"peers_paper config string {arg!r} must be one of {', '.join(CHOICES)}.")
  if name in LOSSES:
    return get_single(name)
  if name in APL_LOSSES:
    return get_apl_single(name)
  if name == "all":
    return _comparison(
      tuple(LOSSES),
      get_single,
      f"CIFAR-10, {NOISE_RATE:.0%} symmetric noise, GCE paper setting (ResNet-34, 120 epochs)",
    )
  return _comparison(
    tuple(APL_LOSSES),
    get_apl_single,
    f"CIFAR-10, {NOISE_RATE:.0%} symmetric noise, APL setting (8-layer CNN, 120 epochs, cosine lr, clip 5)",
  )
