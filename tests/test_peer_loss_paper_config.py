"""Peer Loss's paper config (experiments/configs/peer_loss_paper.py): values with their sources, each epoch's lr and
alpha against the replication's two SGD optimisers and LambdaLR schedulers stepped as its base.py steps them, the
refusals, the docstring's commands, and smoke runs on mock TFDS data.

"rep" = KlemenVovk/noisy-labels: configs/methods/peer_loss/peer_loss_cifar10_clean.py "PC", learning_strategies/
peer_loss/peer_loss.py "PL", .../peer_loss/utils.py "PU", learning_strategies/base.py "B", configs/data/cifar10.py "D".
The runs (1 epoch, 40 mock examples, a tiny ResNet) go through the trainer under `tfds.testing.mock_data` (random
images with the real TFDS feature specs, nothing downloaded); the shrinking happens here, never in the config.
"""

import itertools
import math
import re
import warnings

import numpy as np
import pytest
import tensorflow_datasets as tfds
import torch

from experiments.configs import peer_loss_paper
from noisy_jax.core import noise as noise_lib
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import peer_loss
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import optim

STEPS = math.ceil(40000 / 128)  # only the epoch boundaries matter to the schedule
HUMAN = [f"cifar10_n,{k}" for k in ("aggregate", "random1", "random2", "random3", "worst")] + ["cifar100_n,noisy"]
SYNTHETIC = [f"{d},symmetric,{rate}" for d in ("cifar10", "cifar100") for rate in (0.2, 0.4, 0.6, 0.8)]
VARIANTS = HUMAN + SYNTHETIC + ["cifar10_n,worst,uniform", "cifar100,symmetric,0.4,sparse"]


def _f_alpha(epoch, r=0.1):
  """PU:18-37 as it is."""
  if r <= 0.3:
    pieces = [(0.0, 0.0, 20), (0.0, 1, 20), (1, 2, 50), (2, 5, 50), (5, 10, 100), (10, 20, 100)]
  else:
    pieces = [(0.0, 0.0, 20), (0.0, 0.1, 20), (1, 2, 50), (2, 2.5, 50), (2.5, 3.3, 100), (3.3, 5, 100)]
  alpha = torch.concatenate([torch.linspace(*p) for p in pieces], axis=0)
  return alpha[max(0, min(epoch, 339))]


def _lr_plan(epoch, r=0.1):
  """PU:40-52 (r = 0.1 there; `r` lets the uniform option divide by its own alpha)."""
  epoch = max(0, min(epoch, 319))
  lr_list = [0.1] * 40 + [0.01] * 40 + [0.001] * 40 + [1e-4] * 40 + [1e-5] * 40 + [1e-6] * 40 + [1e-7] * 40
  lr_list += [1e-8] * 20
  return float(lr_list[epoch] / (1 + _f_alpha(epoch, r)))


def _replication_schedule(r=0.1, stages=(0, 50)):
  """(lr, alpha) of each epoch of the replication's run: PC:38-48's two SGD(lr=1, wd 1e-4) with LambdaLR(lr_plan(e))
  and LambdaLR(lr_plan(e + stages[0])); B:86-90's stage of each epoch, B:114-119 stepping the active stage's
  scheduler after its epoch; stage 0 trains cross entropy (alpha 0), stage 1 alpha f_alpha(epoch) (PL:127)."""
  optimizers = [torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1, weight_decay=1e-4) for _ in range(2)]
  schedulers = [
    torch.optim.lr_scheduler.LambdaLR(optimizers[0], lr_lambda=lambda e: _lr_plan(e, r)),
    torch.optim.lr_scheduler.LambdaLR(optimizers[1], lr_lambda=lambda e: _lr_plan(e + stages[0], r)),
  ]
  cumsum = list(itertools.accumulate(stages))
  lrs, alphas = [], []
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "scheduler.step() before optimizer.step()": no training steps here
    for epoch in range(sum(stages) + 1):
      stage = min(i for i, end in enumerate(cumsum) if epoch <= end)
      lrs.append(optimizers[stage].param_groups[0]["lr"])
      alphas.append(0.0 if stage == 0 else float(_f_alpha(epoch, r)))
      schedulers[stage].step()
  return np.array(lrs), np.array(alphas)


def _lrs(optimizer_config, epochs):
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(optimizer_config), STEPS, num_epochs=epochs)
  return np.array([float(schedule(e * STEPS)) for e in range(epochs)])


@pytest.mark.parametrize("arg", VARIANTS)
def test_peer_loss_paper_values(arg):
  parts = arg.split(",")
  dataset, human = parts[0], parts[0].endswith("_n")
  alpha = parts[-1] if parts[-1] in ("sparse", "uniform") else "sparse"
  config = peer_loss_paper.get_config(arg)
  # PL:66 f_alpha r = 0.1 ('sparse'); PU:5-14 CrossEntropyLossStable's 1e-5.
  assert config.method.to_dict() == {"name": "peer_loss", "alpha": alpha, "log_epsilon": 1e-5}
  assert config.model.to_dict() == {"name": "resnet34", "kwargs": {}, "pretrained": "none"}  # PC:31-35
  assert config.batch_size == 128 and config.num_epochs == 51  # D:19; PC:47 sum([0, 50]) + 1
  assert config.augment.to_dict() == {"crop_padding": 4, "flip": True} and config.normalization == "per_channel"
  assert config.dataset == dataset and config.dataset_kwargs.validation_size == 10000  # D:11 Split(0.8)
  if human:
    assert config.noise.type == "dataset" and config.dataset_kwargs.noise_key == parts[1]
  else:
    assert config.noise.to_dict() == {"type": "symmetric", "rate": float(parts[2]), "exact": True, "dataset": ""}
  sgd = config.optimizer
  assert (sgd.name, sgd.learning_rate, sgd.momentum, sgd.nesterov, sgd.weight_decay) == ("sgd", 1.0, 0.0, False, 1e-4)
  r = 0.5 if alpha == "uniform" else 0.1
  want_lrs, want_alphas = _replication_schedule(r)
  np.testing.assert_allclose(_lrs(sgd, 51), want_lrs, rtol=1e-6)
  settings = peer_loss.PeerLossSettings(alpha=alpha, log_epsilon=1e-5)
  np.testing.assert_allclose([peer_loss.epoch_alpha(settings, e) for e in range(51)], want_alphas, rtol=1e-6)
  num_classes = 100 if dataset.startswith("cifar100") else 10
  built = registry.build(config.method, spec_lib.Context(num_classes=num_classes, num_epochs=51))
  assert built.name == "peer_loss"


def test_factors_cover_f_alphas_range():
  """340 factors (PU:36's clamp): a run of up to 340 epochs keeps the plan (the replication's own lr_plan raises an
  IndexError from epoch 301 on: its plan has 300 entries), one more is refused by name."""
  config = peer_loss_paper.get_config()
  long_lrs, _ = _replication_schedule(stages=(0, 299))
  np.testing.assert_allclose(_lrs(config.optimizer, 300), long_lrs[:300], rtol=1e-6)
  with pytest.raises(ValueError, match="340 factor"):
    optim.make_optimizer(settings_lib.optimizer_settings(config.optimizer), STEPS, num_epochs=341)


def test_symmetric_noise_moves_rate_to_the_other_classes():
  config = peer_loss_paper.get_config("cifar10,symmetric,0.6")
  want = np.full((10, 10), 0.6 / 9)
  np.fill_diagonal(want, 0.4)
  np.testing.assert_allclose(noise_lib.make_transition(config.noise.type, 10, config.noise.rate), want, rtol=1e-12)


BAD = [
  ("svhn,worst", r"dataset 'svhn'.*allowed: cifar10, cifar100, cifar10_n, cifar100_n"),
  ("cifar10,symmetric,0.3", r"RATE '0.3'.*allowed: 0.2, 0.4, 0.6, 0.8"),
  ("cifar10_n,worst,dense", r"option 'dense'.*allowed: sparse, uniform"),
  ("cifar10_n,noisy", r"labels 'noisy' for cifar10_n.*allowed: aggregate, random1, random2, random3, worst"),
  ("cifar10,pairflip,0.4", r"noise 'pairflip'.*allowed: symmetric"),
]


@pytest.mark.parametrize("arg,message", BAD, ids=[a for a, _ in BAD])
def test_bad_strings_name_the_bad_part(arg, message):
  with pytest.raises(ValueError, match=message):
    peer_loss_paper.get_config(arg)


def test_docstring_and_doc_commands_load():
  found = re.findall(r"--config=experiments/configs/(\w+)\.py:([\w,.=-]+)", peer_loss_paper.__doc__)
  assert len(found) == 2 and all(name == "peer_loss_paper" for name, _ in found)
  doc = open("docs/paper_configs.md", encoding="utf-8").read()
  documented = re.findall(r"--config='?experiments/configs/peer_loss_paper\.py:([\w,.=-]+)'?", doc)
  assert len(documented) == 4
  for arg in [a for _, a in found] + documented:
    peer_loss_paper.get_config(arg)
  assert peer_loss_paper.get_config().to_dict() == peer_loss_paper.get_config(peer_loss_paper.DEFAULT).to_dict()


@pytest.mark.parametrize("arg", ["cifar100_n,noisy", "cifar10,symmetric,0.4,uniform"])
def test_smoke(arg):
  """One epoch of batches of 16 on 40 mock examples (8 of them validation), a ResNet of two 1-block stages."""
  config = peer_loss_paper.get_config(arg)
  config.num_epochs = 1
  config.batch_size = 16
  config.num_devices = 1
  config.checkpoint_every = 0
  config.dataset_kwargs.validation_size = 8
  config.model.kwargs = {"widths": (4, 8), "blocks_per_stage": (1, 1)}
  with tfds.testing.mock_data(num_examples=40):
    summary = runs.run_single(config)
  assert summary["method"] == "peer_loss"
  assert np.isfinite(summary["history"][0]["train_loss"])
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0
