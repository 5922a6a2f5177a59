"""CAL's paper config (experiments/configs/cal_paper.py): values of every row against the originals', each stage's lr
per epoch against the code's StepLR with its 1 + alpha division (models/schedulers/lr_scheduler.py:13-45, transcribed)
and the replication's torch StepLR, the alpha lists against the code's SegAlpha (through noisy_jax.core.cal.seg_alpha,
itself compared with AS:96-127 in tests/test_cal.py), refusals, the docstring's commands, two smoke runs through both
stages under `tfds.testing.mock_data` (the shrinking happens here, never in the config)."""

import math
import warnings

import numpy as np
import pytest
import tensorflow_datasets as tfds
import torch

from experiments.configs import cal_paper
from noisy_jax.core import cal as cal_core
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.methods import cal
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import optim
import paper_config_checks

STEPS = math.ceil(50000 / 128)
SYNTHETIC = [f"{d},symmetric,{rate}" for d in ("cifar10", "cifar100") for rate in (0.2, 0.4, 0.6)]
HUMAN = [f"cifar10_n,{k}" for k in ("aggregate", "random1", "random2", "random3", "worst")] + ["cifar100_n,noisy"]


def _lrs(optimizer_config, epochs):
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(optimizer_config), STEPS, num_epochs=epochs)
  return np.array([float(schedule(e * STEPS)) for e in range(epochs)])


def _code_step_lr(alphas, epochs, lr=0.1, step_size=60, gamma=0.1):
  """LR:13-45's StepLR as baseexperiment.py:86-136 steps it (alpha of the coming epoch set first): each epoch's lr."""
  record_lr, out = [lr], []
  for last_epoch in range(epochs):
    alpha = alphas[last_epoch]
    if last_epoch != 0 and last_epoch % step_size == 0:
      record_lr = [r * gamma for r in record_lr]
    out.append(record_lr[0] / (1.0 + alpha))
  return np.array(out)


def _rep_step_lr(epochs):
  """torch StepLR(60, 0.1) of SGD(lr 0.1) stepped after each epoch (RCAL:190-194)."""
  sgd = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9, weight_decay=5e-4)
  scheduler = torch.optim.lr_scheduler.StepLR(sgd, step_size=60, gamma=0.1)
  out = []
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for _ in range(epochs):
      out.append(sgd.param_groups[0]["lr"])
      scheduler.step()
  return np.array(out)


@pytest.mark.parametrize("arg", SYNTHETIC + HUMAN)
def test_cal_paper_values(arg):
  dataset = arg.split(",")[0]
  human = dataset.endswith("_n")
  c = 100 if dataset.startswith("cifar100") else 10
  config = cal_paper.get_config(arg)
  # RC10/RC100:55-60 (C100 warm-up (0, 1, 1)), EX:107-108 prior x 10; rep CC:27-38, C100N:14-25.
  assert config.method.to_dict() == {
    "name": "cal",
    "alpha_list": (0.0, 1.0, 1.0),
    "milestones": (10, 40, 80),
    "warmup_alpha_list": ((0.0, 2.0) if c == 10 else (0.0, 1.0))
    if human
    else ((0.0, 2.0, 2.0) if c == 10 else (0.0, 1.0, 1.0)),
    "warmup_milestones": (10, 40) if human else (10, 40, 80),
    "sieve_threshold": -8.0,
    "log_epsilons": "code",
    "prior_scale": 10.0 if (c == 100 and not human) else 1.0,
    "lr_alpha_division": not human,
  }
  assert config.model.to_dict() == {"name": "resnet34", "kwargs": {}, "pretrained": "none"}
  assert config.batch_size == 128 and config.augment.to_dict() == {"crop_padding": 4, "flip": True}
  assert config.dataset_kwargs.validation_size == (10000 if human else 0)
  stages = cal.stages(config.method)
  epochs = [int(stages_lib.config_of_stage(config, s).num_epochs) for s in stages]
  assert epochs == ([65, 100] if human else [66, 100])
  settings = cal.settings_of(config.method)
  for stage, n, phase in zip(stages, epochs, ("warmup", "cal")):
    sgd = stages_lib.config_of_stage(config, stage).optimizer
    assert (sgd.name, sgd.learning_rate, sgd.momentum, sgd.nesterov, sgd.weight_decay) == ("sgd", 0.1, 0.9, False, 5e-4)
    alphas = [cal.epoch_alpha(settings, phase, e + 1) for e in range(n)]
    ours = _lrs(sgd, n) / (1.0 + np.array(alphas) if settings.lr_alpha_division else 1.0)
    want = _rep_step_lr(n) if human else _code_step_lr(alphas, n)
    np.testing.assert_allclose(ours, want, rtol=1e-6)
  assert registry.build(config.method, spec_lib.Context(num_classes=c)).name == "cal"


def test_the_replications_two_list_warmup_is_the_codes_three_list_one():
  """CC:36-37's SegAlpha((0, 2), (10, 40)) equals RC10:55-56's ((0, 2, 2), (10, 40, 80)) over any warm-up."""
  np.testing.assert_array_equal(
    cal_core.seg_alpha((0.0, 2.0), (10, 40), 100), cal_core.seg_alpha((0.0, 2.0, 2.0), (10, 40, 80), 100)
  )


BAD = [
  ("svhn,symmetric,0.2", r"dataset 'svhn'.*allowed: cifar10, cifar100, cifar10_n, cifar100_n"),
  ("cifar10,symmetric,0.3", r"RATE '0.3'.*allowed: 0.2, 0.4, 0.6"),
  ("cifar10,pairflip,0.4", r"noise 'pairflip'.*allowed: symmetric"),
  ("cifar10_n,noisy", r"labels 'noisy' for cifar10_n.*allowed: aggregate, random1, random2, random3, worst"),
]


@pytest.mark.parametrize("arg,message", BAD, ids=[a for a, _ in BAD])
def test_bad_strings_name_the_bad_part(arg, message):
  with pytest.raises(ValueError, match=message):
    cal_paper.get_config(arg)


def test_docstring_commands_and_default_load():
  paper_config_checks.check_docstring_commands(cal_paper)


def _tiny(arg, validation_size):
  config = paper_config_checks.shrunk(cal_paper.get_config(arg), validation_size=validation_size, sections=("warmup",))
  return config


@pytest.mark.parametrize("arg,validation_size", [("cifar100,symmetric,0.4", 0), ("cifar10_n,worst", 8)])
def test_smoke(arg, validation_size):
  config = _tiny(arg, validation_size)
  with tfds.testing.mock_data(num_examples=40):
    summary = runs.run_single(config)
  assert summary["method"] == "cal"
  assert [r["stage"] for r in summary["history"]] == ["warmup", "stage1"]
  for record in summary["history"]:
    assert np.isfinite(record["train_loss"])
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0
