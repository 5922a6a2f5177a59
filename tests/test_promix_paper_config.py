"""ProMix's paper config (experiments/configs/promix_paper.py): values, refusals, one smoke run.

Every row string is loaded and its hyper-parameters are compared with the original code's values, written out here:
Justherozen/ProMix@40d8378 run.sh (one line per row), Train_promix.py (argparse defaults, optimizer1, the main loop
`for epoch in range(args.num_epochs + 1)`), utils/utils.py adjust_learning_rate (the cosine), utils/fmix.py (FMix's
defaults), dataloader_cifarn.py (views, noise). Bad strings must raise a ValueError that names the bad part. One run
(a tiny ResNet, 40 mock examples, one warm-up epoch and one ProMix epoch) goes through the trainer under
`tfds.testing.mock_data` (random images with the real TFDS feature specs, nothing downloaded); the shrinking happens
here, never in the config.
"""

import math
import re

import numpy as np
import pytest
import tensorflow_datasets as tfds

from experiments.configs import promix_paper
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import registry
from noisy_jax.train import optim
from noisy_jax.train import views

# run.sh, one entry per line: the config string -> (noise type, noise rate, noise dataset, CIFAR-N noise_key,
# rho (rho_range "rho,rho"), tau, pretrain_ep, debias_output = debias_pl, warm-up penalty (noise_mode asym)).
# CIFAR-10N and CIFAR-100N lines: --noise_mode cifarn (no rate); CIFAR-10N passes no --debias_*: the default 0.8.
RUN_SH = {
  "cifar10,symmetric,0.2": ("symmetric_include_true", 0.2, "", None, 0.7, 0.99, 10, 0.8, False),
  "cifar10,symmetric,0.5": ("symmetric_include_true", 0.5, "", None, 0.5, 0.99, 10, 0.8, False),
  "cifar10,asymmetric,0.4": ("asymmetric", 0.4, "cifar10", None, 0.5, 0.99, 10, 0.8, True),
  "cifar100,symmetric,0.2": ("symmetric_include_true", 0.2, "", None, 0.7, 0.95, 30, 0.5, False),
  "cifar100,symmetric,0.5": ("symmetric_include_true", 0.5, "", None, 0.5, 0.95, 30, 0.5, False),
  "cifar10_n,aggre": ("dataset", 0.0, "", "aggregate", 0.5, 0.99, 10, 0.8, False),
  "cifar10_n,rand1": ("dataset", 0.0, "", "random1", 0.5, 0.99, 10, 0.8, False),
  "cifar10_n,worst": ("dataset", 0.0, "", "worst", 0.5, 0.99, 10, 0.8, False),
  "cifar100_n,noisy100": ("dataset", 0.0, "", "noisy", 0.5, 0.95, 30, 0.5, False),
}
# Not in run.sh: the original's noise_type_map also has rand2 / rand3; the config gives them the rand1 line's values.
EXTRA = {
  "cifar10_n,rand2": ("dataset", 0.0, "", "random2", 0.5, 0.99, 10, 0.8, False),
  "cifar10_n,rand3": ("dataset", 0.0, "", "random3", 0.5, 0.99, 10, 0.8, False),
}
ROWS = {**RUN_SH, **EXTRA}

# Train_promix.py (argparse defaults; optimizer1 = SGD(lr=args.lr, momentum=0.9, weight_decay=5e-4)).
LR, LR_DECAY_RATE, MOMENTUM, WEIGHT_DECAY, BATCH_SIZE, ORIGINAL_EPOCHS = 0.05, 0.1, 0.9, 5e-4, 256, 600
STEPS = 196  # ceil(50,000 / 256): only the epoch boundaries matter to the schedule checked below


def _original_lr(epoch):
  """utils/utils.py adjust_learning_rate with --cosine, called at the start of each epoch 0 .. num_epochs."""
  eta_min = LR * LR_DECAY_RATE**3
  return eta_min + (LR - eta_min) * (1 + math.cos(math.pi * epoch / ORIGINAL_EPOCHS)) / 2


@pytest.mark.parametrize("arg", list(ROWS))
def test_promix_paper_values(arg):
  noise_type, rate, noise_dataset, noise_key, rho, tau, pretrain_ep, debias, penalty = ROWS[arg]
  config = promix_paper.get_config(arg)
  assert config.method.to_dict() == {
    "name": "promix",
    "pretrain_ep": pretrain_ep,
    "warmup_ep": 50,
    "rho_start": rho,
    "rho_end": rho,
    "tau": tau,
    "threshold": 0.9,
    "start_expand": 250,
    "debias_output": debias,
    "debias_pl": debias,
    "bias_m": 0.9999,
    "temperature": 0.5,
    "mixup_alpha": 4.0,
    "fmix_alpha": 1.0,
    "fmix_decay_power": 3.0,
    "fmix_spectrum": "paper",
    "warmup_penalty": penalty,
    "penalty_clamps_logits": False,
  }
  dataset = arg.split(",")[0]
  assert config.dataset == dataset
  assert (config.noise.type, config.noise.rate, config.noise.exact, config.noise.dataset) == (
    noise_type,
    rate,
    True,
    noise_dataset,
  )
  assert config.dataset_kwargs.get("noise_key") == noise_key
  assert config.dataset_kwargs.validation_size == 0
  # 601 epochs: --num_epochs 600, epochs 0 .. 600.
  assert (config.num_epochs, config.batch_size) == (601, BATCH_SIZE)
  assert config.model.to_dict() == {"name": "resnet18", "kwargs": {"pseudo_head": True}, "pretrained": "none"}
  assert (config.augment.crop_padding, config.augment.flip, config.normalization) == (4, True, "per_channel")
  # ProMix's own pool with its Cutout (RandomAugment(3, 5)); magnitude and bins only serve a switch by flags.
  assert config.augment.strong.to_dict() == {
    "policy": "promix_randaugment",
    "num_ops": 3,
    "magnitude": 5,
    "num_magnitude_bins": 31,
    "cutout": 0,
  }
  # The strong view's fields as a run reads them (experiment.settings, then train.views.strong_parts), defaults
  # included.
  assert views.strong_parts(settings_lib.strong_augment_fields(config.augment)).config == {
    "policy": "promix_randaugment",
    "num_ops": 3,
    "cutout": 0,
  }
  opt = config.optimizer
  assert (opt.learning_rate, opt.momentum, opt.nesterov, opt.weight_decay) == (LR, MOMENTUM, False, WEIGHT_DECAY)
  assert (opt.lr_schedule, opt.cosine_epochs, opt.lr_boundaries, opt.backbone_lr_scale) == ("cosine", 600, (), 1.0)
  assert opt.lr_min == pytest.approx(5e-5, rel=1e-12)
  num_classes = 100 if dataset.startswith("cifar100") else 10
  registry.make(config.method, num_classes=num_classes, num_examples=50_000, num_epochs=config.num_epochs)


def test_promix_paper_cosine_is_the_originals():
  """The lr of every epoch 0 .. 600 (read at its last step) against adjust_learning_rate's; the last is eta_min."""
  config = promix_paper.get_config()
  schedule = optim.learning_rate_schedule(
    settings_lib.optimizer_settings(config.optimizer), STEPS, num_epochs=config.num_epochs
  )
  ours = np.array([float(schedule(e * STEPS + STEPS - 1)) for e in range(config.num_epochs)])
  theirs = np.array([_original_lr(e) for e in range(ORIGINAL_EPOCHS + 1)])
  assert ours.shape == theirs.shape == (601,)
  np.testing.assert_allclose(ours, theirs, rtol=1e-5)
  np.testing.assert_allclose(ours[[0, 300, 600]], [0.05, (0.05 + 5e-5) / 2, 5e-5], rtol=1e-5)


@pytest.mark.parametrize("arg", ["cifar10,asymmetric,0.4,original", "cifar100_n,noisy100,original"])
def test_promix_paper_original_option(arg):
  config = promix_paper.get_config(arg)
  plain = promix_paper.get_config(arg.removesuffix(",original"))
  assert (config.method.fmix_spectrum, config.method.penalty_clamps_logits) == ("original", True)
  plain.method.fmix_spectrum, plain.method.penalty_clamps_logits = "original", True
  assert config.to_dict() == plain.to_dict()


BAD = [
  ("svhn,symmetric,0.2", r"dataset 'svhn'.*allowed: cifar10, cifar100, cifar10_n, cifar100_n"),
  ("cifar10,symmetric", r"DATASET,NOISE,RATE\[,original\] or DATASET,LABELS\[,original\]"),
  ("cifar10_n,aggre,0.2,original", r"DATASET,NOISE,RATE\[,original\] or DATASET,LABELS\[,original\]"),
  ("cifar10,pairflip,0.4", r"noise 'pairflip' for cifar10.*allowed: symmetric, asymmetric"),
  ("cifar100,asymmetric,0.4", r"noise 'asymmetric' for cifar100.*allowed: symmetric\.$"),
  ("cifar10,symmetric,0.8", r"RATE '0.8'.*cifar10,symmetric; allowed: 0.2, 0.5"),
  ("cifar10,asymmetric,0.2", r"RATE '0.2'.*cifar10,asymmetric; allowed: 0.4"),
  ("cifar10,symmetric,high", r"RATE 'high'.*allowed: 0.2, 0.5"),
  ("cifar10_n,noisy100", r"labels 'noisy100' for cifar10_n.*allowed: aggre, rand1, rand2, rand3, worst"),
  ("cifar100_n,aggre", r"labels 'aggre' for cifar100_n.*allowed: noisy100"),
  ("cifar10,symmetric,0.2,paper", r"option 'paper'.*allowed: original"),
  ("cifar10_n,worst,orig", r"option 'orig'.*allowed: original"),
]


@pytest.mark.parametrize("arg,message", BAD, ids=[a for a, _ in BAD])
def test_bad_strings_name_the_bad_part(arg, message):
  with pytest.raises(ValueError, match=message):
    promix_paper.get_config(arg)


def test_torchvision_strong_view_by_the_docstrings_flags():
  """The flags the docstring gives for the former view turn STRONG_VIEW into TORCHVISION_STRONG_VIEW."""
  flags = re.findall(r"--config\.augment\.strong\.(\w+)=(\w+)", promix_paper.__doc__)
  assert [name for name, _ in flags] == ["policy", "magnitude", "cutout"]
  config = promix_paper.get_config()
  for name, value in flags:
    setattr(config.augment.strong, name, value if name == "policy" else int(value))
  assert config.augment.strong.to_dict() == promix_paper.TORCHVISION_STRONG_VIEW


def test_docstring_commands_and_default_load():
  found = re.findall(r"--config=experiments/configs/(\w+)\.py:([\w,.]+)", promix_paper.__doc__)
  assert found and all(name == "promix_paper" for name, _ in found)
  for _, arg in found:
    promix_paper.get_config(arg)
  assert promix_paper.get_config().to_dict() == promix_paper.get_config(promix_paper.DEFAULT).to_dict()
  assert promix_paper.DEFAULT == "cifar10,symmetric,0.2"  # run.sh's first line


def test_smoke_promix_asymmetric_original():
  """The asymmetric row with `original` (warm-up penalty with the clamp, the code's FMix spectrum) on ResNet-18's
  class shrunk to its stem, one BasicBlock of width 4 and the pseudo head: one warm-up epoch (pretrain_ep 1), CSS,
  then one ProMix epoch (2 steps of 32 over 40 mock CIFAR-10 examples). The strong view is a Cutout 16 alone, not the
  row's pool: a policy made this run a quarter longer (about 15 s more, on a 2-core CPU, mostly compiling the ProMix
  step); the pool runs in tests/test_promix_randaugment.py, and this row's fields are checked above."""
  config = promix_paper.get_config("cifar10,asymmetric,0.4,original")
  config.num_epochs = 2
  config.method.pretrain_ep = 1
  config.batch_size = 32
  config.num_devices = 1
  config.checkpoint_every = 0
  config.model.kwargs = {"widths": (4,), "blocks_per_stage": (1,), "pseudo_head": True}
  config.augment.strong.policy, config.augment.strong.cutout = "none", 16
  with tfds.testing.mock_data(num_examples=40):
    summary = runs.run_single(config)
  assert (summary["method"], summary["model"]) == ("promix", "WithPseudoHead")
  assert summary["noise"]["type"] == "asymmetric"
  history = summary["history"]
  assert [r["epoch"] for r in history] == [1, 2]  # the warm-up epoch, then ProMix's
  for record in history:
    assert np.isfinite(record["train_loss"])
    assert np.isfinite(record["test_accuracy"]) and 0.0 <= record["test_accuracy"] <= 1.0
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0
