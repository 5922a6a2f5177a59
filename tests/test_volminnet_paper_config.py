"""VolMinNet's paper config (experiments/configs/volminnet_paper.py): values, the lr per epoch against both of the
code's PyTorch optimisers and schedulers, the noise against the code's transitions, refusals, the docstring's
commands, two smoke runs.

Every variant string is loaded and compared with the values written out here, each with its source: the original
(xuefeng-li1/Provably-end-to-end-label-noise-learning-without-anchor-points@06e4167: main.py, models.py, tools.py,
utils.py) and the CIFAR-N replication (KlemenVovk/noisy-labels: volminnet_cifar10_clean.py "VC", the benchmark configs
cifar10n/volminnet.py "B10" and cifar100n/volminnet.py "B100"). Two runs (1 epoch, 40 mock examples, a tiny ResNet) go
through the trainer under `tfds.testing.mock_data` (random images with the real TFDS feature specs, nothing
downloaded); the shrinking happens here, never in the config.
"""

import math

import numpy as np
import pytest
import tensorflow_datasets as tfds
import torch

from experiments.configs import volminnet_paper
from noisy_jax.core import noise as noise_lib
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.methods import volminnet
from noisy_jax.train import optim
import paper_config_checks

STEPS = math.ceil(45000 / 128)  # only the epoch boundaries matter to the schedule
SYNTHETIC = [f"{d},{n}" for d in ("cifar10", "cifar100") for n in ("symmetric,0.2", "symmetric,0.5", "pairflip,0.45")]
HUMAN = [f"cifar10_n,{k}" for k in ("aggregate", "random1", "random2", "random3", "worst")] + ["cifar100_n,noisy"]


def _lrs(optimizer_config, epochs):
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(optimizer_config), STEPS, num_epochs=epochs)
  return np.array([float(schedule(e * STEPS)) for e in range(epochs)])


def _code_lrs(epochs=80):
  """main.py:68, 94-96, 194-195: optimizer_es SGD(0.01, wd 1e-4, momentum 0.9) and optimizer_trans SGD(0.01, wd 0,
  momentum 0.9), each with MultiStepLR([30, 60], 0.1) stepped after every epoch; the lr each epoch trains at."""
  es = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.01, weight_decay=1e-4, momentum=0.9)
  trans = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.01, weight_decay=0, momentum=0.9)
  schedulers = [torch.optim.lr_scheduler.MultiStepLR(o, milestones=[30, 60], gamma=0.1) for o in (es, trans)]
  out = []
  for _ in range(epochs):
    out.append((es.param_groups[0]["lr"], trans.param_groups[0]["lr"]))
    for o in (es, trans):
      o.step()
    for s in schedulers:
      s.step()
  return np.array(out)


@pytest.mark.parametrize("arg", SYNTHETIC + HUMAN)
def test_volminnet_paper_values(arg):
  parts = arg.split(",")
  dataset = parts[0]
  human = dataset.endswith("_n")
  family = dataset.removesuffix("_n")
  config = volminnet_paper.get_config(arg)
  # main.py:24 lam 1e-4 (VC:21); init models.py:150 / main.py:71 (B10:10, B100:10); main.py:23, 94 the network's decay.
  assert config.method.to_dict() == {
    "name": "volminnet",
    "lam": 1e-4,
    "init_t": 4.5 if family == "cifar100" else 2.0,
    "network_weight_decay": 1e-4,
  }
  # main.py:66, 83 ResNet18 / ResNet34; VC:14 resnet34. Batch main.py:21, rep data config 128.
  model = "resnet34" if human or family == "cifar100" else "resnet18"
  assert config.model.to_dict() == {"name": model, "kwargs": {}, "pretrained": "none"}
  assert config.batch_size == 128
  assert config.augment.to_dict() == {"crop_padding": 4, "flip": True} and config.normalization == "per_channel"
  assert config.dataset == dataset and config.num_epochs == 80  # main.py:56, 72; VC:36
  if human:
    assert config.noise.type == "dataset" and config.dataset_kwargs.noise_key == parts[1]
    assert config.dataset_kwargs.validation_size == 10000  # configs/data/cifar10.py:11 Split(0.8)
  else:
    assert config.noise.to_dict() == {"type": parts[1], "rate": float(parts[2]), "exact": True, "dataset": ""}
    assert config.dataset_kwargs.validation_size == 5000  # tools.py:47, 64
  # main.py:68, 94: SGD(lr 0.01, momentum 0.9); the run's own decay 0 (W undecayed, main.py:68), the network's in
  # method.network_weight_decay.
  sgd = config.optimizer
  assert (sgd.name, sgd.learning_rate, sgd.momentum, sgd.nesterov, sgd.weight_decay, sgd.lr_schedule) == (
    "sgd",
    0.01,
    0.9,
    False,
    0.0,
    "piecewise",
  )
  reference = _code_lrs()
  np.testing.assert_allclose(_lrs(sgd, 80), reference[:, 0], rtol=1e-6)
  np.testing.assert_allclose(_lrs(sgd, 80), reference[:, 1], rtol=1e-6)
  np.testing.assert_allclose(reference[:, 0], [0.01] * 30 + [0.001] * 30 + [1e-4] * 20, rtol=1e-6)
  num_classes = 100 if family == "cifar100" else 10
  built = registry.build(config.method, spec_lib.Context(num_classes=num_classes))
  assert built.name == "volminnet"
  assert volminnet.settings_of(config.method).init_t == config.method.init_t


@pytest.mark.parametrize("num_classes", [10, 100])
def test_noise_is_the_codes(num_classes):
  """utils.py:172-193 noisify_multiclass_symmetric (1 - n on the diagonal, n / (C - 1) elsewhere) and utils.py:124-146
  noisify_pairflip (1 - n on the diagonal, n to class i + 1 mod C)."""
  config = volminnet_paper.get_config(f"cifar{num_classes},symmetric,0.5")
  code = np.full((num_classes, num_classes), 0.5 / (num_classes - 1))
  np.fill_diagonal(code, 0.5)
  np.testing.assert_allclose(
    noise_lib.make_transition(config.noise.type, num_classes, config.noise.rate), code, rtol=1e-12
  )
  config = volminnet_paper.get_config(f"cifar{num_classes},pairflip,0.45")
  code = np.eye(num_classes) * 0.55
  code[np.arange(num_classes), (np.arange(num_classes) + 1) % num_classes] = 0.45
  np.testing.assert_allclose(
    noise_lib.make_transition(config.noise.type, num_classes, config.noise.rate), code, rtol=1e-12
  )


BAD = [
  ("svhn,symmetric,0.2", r"dataset 'svhn'.*allowed: cifar10, cifar100, cifar10_n, cifar100_n"),
  ("cifar10,symmetric,0.4", r"RATE '0.4'.*allowed: 0.2, 0.5"),
  ("cifar10,pairflip,0.2", r"RATE '0.2'.*allowed: 0.45"),
  ("cifar10,asymmetric,0.4", r"noise 'asymmetric'.*allowed: symmetric, pairflip"),
  ("cifar10,symmetric", r"must be DATASET,NOISE,RATE"),
  ("cifar10_n,worst,original", r"must be DATASET,NOISE,RATE"),
  ("cifar10_n,noisy", r"labels 'noisy' for cifar10_n.*allowed: aggregate, random1, random2, random3, worst"),
]


@pytest.mark.parametrize("arg,message", BAD, ids=[a for a, _ in BAD])
def test_bad_strings_name_the_bad_part(arg, message):
  with pytest.raises(ValueError, match=message):
    volminnet_paper.get_config(arg)


def test_docstring_commands_and_default_load():
  paper_config_checks.check_docstring_commands(volminnet_paper)


def _tiny(arg, validation_size):
  """1 epoch of batches of 16 on 40 mock examples, a ResNet of two 1-block stages."""
  config = paper_config_checks.shrunk(volminnet_paper.get_config(arg), validation_size=validation_size)
  return config


@pytest.mark.parametrize("arg,validation_size", [("cifar10,pairflip,0.45", 8), ("cifar100_n,noisy", 8)])
def test_smoke(arg, validation_size):
  """Mock CIFAR-10 with pair-flip noise and mock CIFAR-100N's human labels: one epoch each, W trained beside."""
  config = _tiny(arg, validation_size)
  with tfds.testing.mock_data(num_examples=40):
    summary = runs.run_single(config)
  assert summary["method"] == "volminnet"
  assert [r["stage"] for r in summary["history"]] == ["stage1"]
  assert np.isfinite(summary["history"][0]["train_loss"])
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0
