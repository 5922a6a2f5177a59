"""CORES²'s paper config (experiments/configs/cores_paper.py): values, the lr per epoch against the originals', the
noise against the code's transitions, refusals, the docstring's commands, two smoke runs.

Every variant string is loaded and compared with the values written out here, each with its source: the original
(UCSC-REAL/cores@cf0945e: phase1.py "P", loss.py "L", data/utils.py, models/resnet.py, README.md) and the CIFAR-N
replication (KlemenVovk/noisy-labels: cores2_cifar10_clean.py "CC", cores2/utils.py). The CIFAR rows' lr per epoch is
P:45-47's alpha_plan[e] / (1 + f_beta(e)); the CIFAR-N rows' a re-run of the replication's PyTorch SGD and LambdaLR,
stepped once per epoch as Lightning does. Here the lr is the run's schedule times the method's per-epoch factor. Two
runs (1 epoch, 40 mock examples, a tiny ResNet) go through the trainer under `tfds.testing.mock_data` (random images
with the real TFDS feature specs, nothing downloaded); the shrinking happens here, never in the config.
"""

import math

import numpy as np
import pytest
import tensorflow_datasets as tfds
import torch

from experiments.configs import cores_paper
from noisy_jax.core import noise as noise_lib
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import cores
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import optim
import paper_config_checks

SYNTHETIC = [f"{d},symmetric,{r}" for d in ("cifar10", "cifar100") for r in (0.2, 0.4, 0.6)]
SYNTHETIC += ["cifar10,pairflip,0.2", "cifar100,pairflip,0.2"]
HUMAN = [f"cifar10_n,{k}" for k in ("aggregate", "random1", "random2", "random3", "worst")] + ["cifar100_n,noisy"]
CODE_METHOD = {  # L:44, 56-62; P:47, 91
  "name": "cores",
  "beta_warmup_epochs": 10,
  "beta_ramp_epochs": 30,
  "beta_max": 2.0,
  "sieve_warmup_epochs": 31,
  "use_prior": True,
  "sieve_mean": "uniform",
  "divide_lr": True,
}


def _f_beta(epoch, tail=60):
  """L:56-62 (tail 60); the replication's cores2/utils.py:41-49 (tail 61)."""
  return np.concatenate((np.linspace(0.0, 0.0, num=10), np.linspace(0.0, 2, num=30), np.linspace(2, 2, num=tail)))[
    epoch
  ]


def _our_lrs(config, steps):
  """The lr of each epoch of a run of `config`: its optimiser's schedule at the epoch's first step times the
  method's factor 1 / (1 + beta) (noisy_jax.methods.cores, step 3)."""
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(config.optimizer), steps, config.num_epochs)
  built = registry.build(config.method, spec_lib.Context(num_classes=10))
  assert built.program.own
  settings = cores.CoresSettings(**{k: v for k, v in config.method.to_dict().items() if k != "name"})
  return np.array([float(schedule(e * steps)) * settings.lr_factor(e) for e in range(config.num_epochs)])


def _replication_lrs(max_epochs=100):
  """CC:12, 23-26: SGD(lr 0.1, momentum 0.9, weight_decay 5e-4), LambdaLR(lr_plan[e] / (1 + f_beta(e))), stepped
  after every epoch."""
  lr_plan = [0.1] * 50 + [0.01] * (50 + 1)
  sgd = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9, weight_decay=5e-4)
  scheduler = torch.optim.lr_scheduler.LambdaLR(sgd, lr_lambda=lambda e: lr_plan[e] / (1 + _f_beta(e, tail=61)))
  out = []
  for _ in range(max_epochs):
    out.append(sgd.param_groups[0]["lr"])
    sgd.step()
    scheduler.step()
  return np.array(out)


@pytest.mark.parametrize("arg", SYNTHETIC + HUMAN)
def test_cores_paper_values(arg):
  parts = arg.split(",")
  dataset, human = parts[0], parts[0].endswith("_n")
  config = cores_paper.get_config(arg)
  assert config.method.to_dict() == CODE_METHOD
  # README.md --model resnet -> P:167-170 ResNet34 (models/resnet.py:103-104); CC:18-19 resnet34.
  assert config.model.to_dict() == {"name": "resnet34", "kwargs": {}, "pretrained": "none"}
  # data/datasets.py:7-12; rep datasets/cifar10.py: RandomCrop(32, padding=4), RandomHorizontalFlip.
  assert config.augment.to_dict() == {"crop_padding": 4, "flip": True} and config.normalization == "per_channel"
  assert config.dataset == dataset and config.num_epochs == 100  # P:30; CC:29
  sgd = config.optimizer
  if human:
    # rep configs/data/cifar10.py:11, 19: Split(0.8) of 50,000 and batch 128; CC:24 momentum 0.9, wd 5e-4.
    assert config.noise.type == "dataset" and config.dataset_kwargs.noise_key == parts[1]
    assert config.dataset_kwargs.validation_size == 10000 and config.batch_size == 128
    assert (sgd.name, sgd.momentum, sgd.nesterov, sgd.weight_decay) == ("sgd", 0.9, False, 5e-4)
    steps = math.ceil(40000 / 128)
    np.testing.assert_allclose(_our_lrs(config, steps), _replication_lrs(), rtol=1e-6)  # float32 schedule
  else:
    # data/utils.py noisify at RATE; all 50,000 training rows; P:157 batch 64; P:172 SGD(lr) alone.
    assert config.noise.to_dict() == {"type": parts[1], "rate": float(parts[2]), "exact": True, "dataset": ""}
    assert config.dataset_kwargs.validation_size == 0 and config.batch_size == 64
    assert (sgd.name, sgd.momentum, sgd.nesterov, sgd.weight_decay) == ("sgd", 0.0, False, 0.0)
    alpha_plan = [0.1] * 50 + [0.01] * 50  # P:189
    code = np.array([alpha_plan[e] / (1 + _f_beta(e)) for e in range(100)])  # P:45-47
    np.testing.assert_allclose(_our_lrs(config, math.ceil(50000 / 64)), code, rtol=1e-6)  # float32 schedule
  num_classes = 100 if dataset.startswith("cifar100") else 10
  assert registry.build(config.method, spec_lib.Context(num_classes=num_classes)).name == "cores"


def _code_symmetric(n, classes):
  """data/utils.py:151-164: n / (C - 1) off the diagonal, 1 - n on it."""
  p = np.full((classes, classes), n / (classes - 1))
  np.fill_diagonal(p, 1.0 - n)
  return p


def _code_pairflip(n, classes):
  """data/utils.py:127-139: 1 - n on the diagonal, n to the next class (the last to the first)."""
  p = np.eye(classes) * (1.0 - n)
  for i in range(classes):
    p[i, (i + 1) % classes] = n
  return p


@pytest.mark.parametrize("classes", [10, 100])
@pytest.mark.parametrize("noise,code", [("symmetric", _code_symmetric), ("pairflip", _code_pairflip)])
def test_noise_is_the_codes(classes, noise, code):
  config = cores_paper.get_config(f"cifar{classes},{noise},0.2")
  np.testing.assert_allclose(
    noise_lib.make_transition(config.noise.type, classes, config.noise.rate), code(0.2, classes), rtol=1e-12
  )


BAD = [
  ("svhn,symmetric,0.2", r"dataset 'svhn'.*allowed: cifar10, cifar100, cifar10_n, cifar100_n"),
  ("cifar10,symmetric,0.3", r"'0.3'.*allowed: 0.2, 0.4, 0.6"),
  ("cifar10,pairflip,0.45", r"'0.45'.*allowed: 0.2"),
  ("cifar10,instance,0.4", r"'instance'.*allowed: symmetric, pairflip"),
  ("cifar10,symmetric", r"'cifar10,symmetric' must be DATASET,NOISE,RATE"),
  ("cifar10_n,noisy", r"'noisy' for cifar10_n.*allowed: aggregate, random1, random2, random3, worst"),
]


@pytest.mark.parametrize("arg,message", BAD, ids=[a for a, _ in BAD])
def test_bad_strings_name_the_bad_part(arg, message):
  with pytest.raises(ValueError, match=message):
    cores_paper.get_config(arg)


def test_docstring_commands_and_default_load():
  paper_config_checks.check_docstring_commands(cores_paper)


def _tiny(arg, validation_size, sieve_now):
  """1 epoch of batches of 16 on 40 mock examples, a ResNet of two 1-block stages; with `sieve_now`, beta ramping
  and the sieve on from the first epoch."""
  config = paper_config_checks.shrunk(cores_paper.get_config(arg), validation_size=validation_size)
  if sieve_now:
    config.method.beta_warmup_epochs, config.method.beta_ramp_epochs, config.method.sieve_warmup_epochs = 0, 2, 0
  return config


@pytest.mark.parametrize(
  "arg,validation_size,sieve_now", [("cifar10,symmetric,0.4", 0, False), ("cifar100_n,noisy", 8, True)]
)
def test_smoke(arg, validation_size, sieve_now):
  """Mock CIFAR-10 with the code's plan (epoch 0: beta 0, every row kept), and CIFAR-100N's human labels with the
  sieve on: one epoch each."""
  config = _tiny(arg, validation_size, sieve_now)
  with tfds.testing.mock_data(num_examples=40):
    summary = runs.run_single(config)
  assert summary["method"] == "cores"
  (record,) = summary["history"]
  assert np.isfinite(record["train_loss"]) and record["cores_beta"] == 0.0
  assert (record["cores_sieved_fraction"] > 0.0) == sieve_now
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0
