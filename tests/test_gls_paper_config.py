"""GLS's paper config (experiments/configs/gls_paper.py): values, each stage's lr per epoch against the originals',
the noise against the code's transition, the loss against loss.py's, refusals, the docstring's commands, two smoke
runs through both stages.

Every variant string is loaded and compared with the values written out here, each with its source: the original
(UCSC-REAL/negative-label-smoothing: main_warmup.py "W", main_GLS_load.py "L", loss.py, data/utils.py,
models/resnet.py, README.md) and the CIFAR-N replication (KlemenVovk/noisy-labels: GLS_cifar10_clean.py "GC",
GLS.py). The CIFAR rows' lr per epoch is the code's lr_plan lists; the CIFAR-N rows' is a re-run of the replication's
two PyTorch optimisers and MultiStepLR schedulers, stepped as GLS.py:80-101 steps them over its 100 epochs. Two runs
(1 epoch per stage, 40 mock examples, a tiny ResNet) go through the trainer under `tfds.testing.mock_data` (random
images with the real TFDS feature specs, nothing downloaded); the shrinking happens here, never in the config.
"""

import math
import re
import warnings

import numpy as np
import pytest
import tensorflow_datasets as tfds
import torch
import torch.nn.functional as F

from experiments.configs import gls_paper
from noisy_jax.core import noise as noise_lib
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.methods import gls
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import optim
import paper_config_checks

STEPS = math.ceil(50000 / 128)  # 391: only the epoch boundaries matter to the schedules
CANDIDATES = (0.8, 0.6, 0.4, 0.2, 0.0, -0.2, -0.4, -0.6, -0.8, -1.0, -2.0, -4.0, -6.0, -8.0)  # README.md:15
SYNTHETIC = [
  f"{d},symmetric,{rate},r={r}" for d in ("cifar10", "cifar100") for rate in (0.2, 0.4, 0.6) for r in (0.4, -0.2)
]
HUMAN = [f"cifar10_n,{k}" for k in ("aggregate", "random1", "random2", "random3", "worst")] + ["cifar100_n,noisy"]
VARIANTS = SYNTHETIC + HUMAN + ["cifar10_n,worst,r=-1.0", "cifar100_n,noisy,r=0.2"]


def _lrs(optimizer_config, epochs):
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(optimizer_config), STEPS, num_epochs=epochs)
  return np.array([float(schedule(e * STEPS)) for e in range(epochs)])


def _replication_lrs(warmup_epochs=2, max_epochs=100):
  """The lr of each of the replication's epochs (GC:23-29): two SGD(lr 0.01), each with MultiStepLR([60], 0.1);
  GLS.py:80-101 switch to the second after epoch warmup_epochs - 1 and step the active scheduler after every epoch but
  that one and the last."""
  optimizers = [torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.01, momentum=0.9, weight_decay=5e-4)]
  optimizers.append(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.01, momentum=0.9, weight_decay=5e-4))
  schedulers = [torch.optim.lr_scheduler.MultiStepLR(o, milestones=[60], gamma=0.1) for o in optimizers]
  stage, out = 0, []
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "scheduler.step() before optimizer.step()": no training steps here
    for epoch in range(max_epochs):
      out.append(optimizers[stage].param_groups[0]["lr"])
      if epoch == warmup_epochs - 1:
        stage = 1
      if epoch != max_epochs - 1 and epoch != warmup_epochs - 1:
        schedulers[stage].step()
  return np.array(out)


@pytest.mark.parametrize("arg", VARIANTS)
def test_gls_paper_values(arg):
  parts = arg.split(",")
  dataset = parts[0]
  human = dataset.endswith("_n")
  smooth_rate = float(parts[-1][2:]) if parts[-1].startswith("r=") else -0.2  # the row's, or GC:20
  config = gls_paper.get_config(arg)
  # loss.py:25-34 with L:30-31's wa 0, wb 1; the warm-up's best network (L:131) or, without validation, its final.
  assert config.method.to_dict() == {
    "name": "gls",
    "smooth_rate": smooth_rate,
    "wa": 0.0,
    "wb": 1.0,
    "warmup": True,
    "warmup_start": "best" if human else "final",
  }
  # W:125, L:125 ResNet34 (models/resnet.py:163-164); GC:14 resnet34. Batch W:108, L:107; rep data config 128.
  assert config.model.to_dict() == {"name": "resnet34", "kwargs": {}, "pretrained": "none"}
  assert config.batch_size == 128
  # data/datasets.py:7-12 (RandomCrop(32, padding=4), RandomHorizontalFlip); rep datasets/cifar10.py likewise.
  assert config.augment.to_dict() == {"crop_padding": 4, "flip": True} and config.normalization == "per_channel"
  assert config.dataset == dataset
  if human:
    # The replication's data config: Split(0.8) of 50,000 -> 10,000 validation rows.
    assert config.noise.type == "dataset" and config.dataset_kwargs.noise_key == parts[1]
    assert config.dataset_kwargs.validation_size == 10000
  else:
    # data/utils.py:164-193: symmetric over the other classes at RATE; the code trains on all 50,000 rows.
    assert config.noise.to_dict() == {"type": "symmetric", "rate": float(parts[2]), "exact": True, "dataset": ""}
    assert config.dataset_kwargs.validation_size == 0
  stages = gls.stages(config.method)
  assert [s.name for s in stages] == ["warmup", "stage1"]
  assert stages[1].network == ("previous_best" if human else "previous_final")
  epochs = [int(stages_lib.config_of_stage(config, s).num_epochs) for s in stages]
  warmup = stages_lib.config_of_stage(config, stages[0]).optimizer
  own = stages_lib.config_of_stage(config, stages[1]).optimizer
  if human:
    # GC:19 (2 warm-up epochs), :29 (100 in all), :24 SGD(lr 0.01, momentum 0.9, weight_decay 5e-4), no Nesterov.
    assert epochs == [2, 98] and stages_lib.total_epochs(config) == 100
    for sgd in (warmup, own):
      assert (sgd.name, sgd.learning_rate, sgd.momentum, sgd.nesterov, sgd.weight_decay) == (
        "sgd",
        0.01,
        0.9,
        False,
        5e-4,
      )
    reference = _replication_lrs()
    np.testing.assert_allclose(_lrs(warmup, 2), reference[:2], rtol=1e-6)
    np.testing.assert_allclose(_lrs(own, 98), reference[2:], rtol=1e-6)
    np.testing.assert_allclose(reference[2:], [0.01] * 60 + [0.001] * 38, rtol=1e-6)
  else:
    # W:29 (120 epochs), :127 SGD(lr) alone; L:29 (100 epochs), :134 SGD(momentum 0.9, wd 1e-4, nesterov).
    assert epochs == [120, 100] and stages_lib.total_epochs(config) == 220
    assert (warmup.name, warmup.momentum, warmup.nesterov, warmup.weight_decay) == ("sgd", 0.0, False, 0.0)
    assert (own.name, own.momentum, own.nesterov, own.weight_decay) == ("sgd", 0.9, True, 1e-4)
    np.testing.assert_allclose(_lrs(warmup, 120), [0.1] * 40 + [0.01] * 40 + [0.001] * 40, rtol=1e-6)  # W:144
    np.testing.assert_allclose(_lrs(own, 100), [1e-6] * 100, rtol=1e-6)  # L:151
  num_classes = 100 if dataset.startswith("cifar100") else 10
  assert registry.build(config.method, spec_lib.Context(num_classes=num_classes)).name == "gls"


@pytest.mark.parametrize("num_classes", [10, 100])
def test_symmetric_noise_is_the_codes(num_classes):
  """data/utils.py:164-177 noisify_multiclass_symmetric: 1 - n on the diagonal, n / (C - 1) elsewhere."""
  config = gls_paper.get_config(f"cifar{num_classes},symmetric,0.4,r=-0.2")
  code = np.full((num_classes, num_classes), 0.4 / (num_classes - 1))
  np.fill_diagonal(code, 0.6)
  np.testing.assert_allclose(
    noise_lib.make_transition(config.noise.type, num_classes, config.noise.rate), code, rtol=1e-12
  )


def test_the_loss_is_loss_pys():
  """The method built from a row against loss.py:25-34's loss_gls(logits, labels, r, wa 0, wb 1)."""
  config = gls_paper.get_config("cifar10,symmetric,0.6,r=-2.0")
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(6, 10)).astype(np.float32)
  labels = rng.integers(0, 10, size=6)
  ours = gls.gls_loss(logits, np.eye(10, dtype=np.float32)[labels], smooth_rate=config.method.smooth_rate)
  t_logits = torch.tensor(logits)
  logprobs = F.log_softmax(t_logits, dim=-1)
  nll = -logprobs.gather(dim=-1, index=torch.tensor(labels).unsqueeze(1)).squeeze(1)
  smooth = -logprobs.mean(dim=-1)
  r = -2.0
  reference = (0.0 + 1.0 * (1.0 - r)) * nll + 1.0 * r * smooth
  np.testing.assert_allclose(np.asarray(ours), reference.numpy(), rtol=1e-5)


def test_smooth_rates_are_the_readmes():
  assert gls_paper.SMOOTH_RATES == CANDIDATES
  for r in CANDIDATES:
    assert gls_paper.get_config(f"cifar10,symmetric,0.2,r={r}").method.smooth_rate == r


BAD = [
  ("svhn,symmetric,0.2,r=0.2", r"dataset 'svhn'.*allowed: cifar10, cifar100, cifar10_n, cifar100_n"),
  ("cifar10,symmetric,0.4", r"'cifar10,symmetric,0.4' needs the smooth rate.*-8\.0"),
  ("cifar10,symmetric,0.4,r=0.1", r"r='0.1'.*allowed.*0\.8, 0\.6"),
  ("cifar10,symmetric,0.4,r=abc", r"r='abc'"),
  ("cifar100_n,noisy,r=1.5", r"r='1.5'"),
  ("cifar10,symmetric,0.3,r=0.2", r"RATE '0.3'.*allowed: 0.2, 0.4, 0.6"),
  ("cifar10,pairflip,0.45,r=0.2", r"noise 'pairflip'.*allowed: symmetric"),
  ("cifar10,symmetric,r=0.2", r"must be DATASET,symmetric,RATE,r=R or DATASET,LABELS\[,r=R\]"),
  ("cifar10_n,worst,original", r"'cifar10_n,worst,original' must be DATASET,symmetric,RATE,r=R"),
  ("cifar10_n,noisy", r"labels 'noisy' for cifar10_n.*allowed: aggregate, random1, random2, random3, worst"),
]


@pytest.mark.parametrize("arg,message", BAD, ids=[a for a, _ in BAD])
def test_bad_strings_name_the_bad_part(arg, message):
  with pytest.raises(ValueError, match=message):
    gls_paper.get_config(arg)


def test_docstring_commands_and_default_load():
  paper_config_checks.check_docstring_commands(gls_paper)


def test_doc_commands_load():
  """Every GLS command of docs/paper_configs.md, the quoted ones with r=R included."""
  doc = open("docs/paper_configs.md", encoding="utf-8").read()
  found = re.findall(r"--config='?experiments/configs/gls_paper\.py:([\w,.=-]+)'?", doc)
  assert len(found) == 5 and sum("r=" in arg for arg in found) == 3
  for arg in found:
    gls_paper.get_config(arg)


def _tiny(arg, validation_size):
  """1 epoch per stage of batches of 16 on 40 mock examples, a ResNet of two 1-block stages."""
  config = paper_config_checks.shrunk(gls_paper.get_config(arg), validation_size=validation_size, sections=("warmup",))
  return config


@pytest.mark.parametrize("arg,validation_size", [("cifar10,symmetric,0.6,r=-2.0", 0), ("cifar100_n,noisy", 8)])
def test_smoke(arg, validation_size):
  """Negative smoothing on mock CIFAR-10 from the warm-up's final network (no validation split), and CIFAR-100N's
  human labels from its best-validation network: each stage one epoch."""
  config = _tiny(arg, validation_size)
  with tfds.testing.mock_data(num_examples=40):
    summary = runs.run_single(config)
  assert summary["method"] == "gls"
  assert [r["stage"] for r in summary["history"]] == ["warmup", "stage1"]
  for record in summary["history"]:
    assert np.isfinite(record["train_loss"])
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0
