"""The f-divergence paper config (experiments/configs/f_divergence_paper.py): values, each stage's lr per epoch against
the originals', the noise against the code's shipped label files, the loss against the code's, refusals, the
docstring's commands, two smoke runs through both stages.

Every variant string is loaded and compared with the values written out here, each with its source: the original
(UCSC-REAL/Robust-f-divergence-measures@93d9efe: CIFAR-10/runner_CE.py "CE", CIFAR-10/runner.py "R",
noise_data_cifar_10.py "D", model.py "M"; the CIFAR-100 files "R100") and the CIFAR-N replication
(KlemenVovk/noisy-labels: f_divergence_cifar10_clean.py "FC", f_divergence.py "FD"). The CIFAR rows' lr per epoch is
the code's if-chains run as written; the CIFAR-N rows' a re-run of the replication's two PyTorch optimisers and
MultiStepLR schedulers, stepped as FD:125-132 steps them over its 100 epochs. Two runs (1 epoch per stage, 40 mock
examples, a tiny network) go through the trainer under `tfds.testing.mock_data` (random images with the real TFDS
feature specs, nothing downloaded); the shrinking happens here, never in the config.
"""

import math
import os
import subprocess
import warnings

import numpy as np
import pytest
import tensorflow_datasets as tfds
import torch

from experiments.configs import f_divergence_paper
from noisy_jax.core import f_divergence as fdiv_core
from noisy_jax.core import noise as noise_lib
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.methods import f_divergence
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import optim
import paper_config_checks

STEPS = math.ceil(40000 / 128)  # only the epoch boundaries matter to the schedules
CODE_ROWS = ["cifar10,random,0.5", "cifar10,random,0.6", "cifar100,symmetric,0.2", "cifar100,symmetric,0.4"]
HUMAN = [f"cifar10_n,{k}" for k in ("aggregate", "random1", "random2", "random3", "worst")] + ["cifar100_n,noisy"]
VARIANTS = (
  CODE_ROWS + HUMAN + ["cifar10,random,0.6,Jenson-Shannon", "cifar100_n,noisy,KL", "cifar100,symmetric,0.2,Neyman"]
)
CODE_DIVERGENCES = ("KL", "Reverse-KL", "Jeffrey", "Squared-Hellinger", "Pearson", "Neyman", "Jenson-Shannon")
MIRROR = "/work/.mirror/UCSC-REAL+Robust-f-divergence-measures/repo"


def _lrs(optimizer_config, epochs):
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(optimizer_config), STEPS, num_epochs=epochs)
  return np.array([float(schedule(e * STEPS)) for e in range(epochs)])


def _code_warmup_lr(epoch):
  """CE:110-116 as written."""
  learning_rate = 0.1
  if epoch >= 60:
    learning_rate = 0.01
  if epoch >= 120:
    learning_rate = 0.001
  if epoch >= 180:
    learning_rate = 0.0001
  return learning_rate


def _code_fdiv_lr(epoch):
  """R:224-233 as written."""
  if epoch >= 0:
    learning_rate = 0.01
  if epoch >= 30:
    learning_rate = 0.001
  if epoch >= 60:
    learning_rate = 0.0001
  if epoch >= 90:
    learning_rate = 0.00001
  if epoch >= 120:
    learning_rate = 0.000001
  return learning_rate


def _replication_lrs(warmup_epochs=2, max_epochs=100):
  """The lr of each of the replication's epochs (FC:26-35): SGD(lr 0.1) with MultiStepLR([60, 120, 180, 240]) for
  epochs <= warmup_epochs - 1 (FD:64, 115), then SGD(lr 0.01) with MultiStepLR([30, 60, 90, 120]); after every epoch
  the active stage's scheduler steps (FD:125-132)."""
  params = lambda: [torch.zeros(1, requires_grad=True)]
  warmup = torch.optim.SGD(params(), lr=0.1, momentum=0.9, weight_decay=5e-4)
  fdiv = torch.optim.SGD(params(), lr=0.01, momentum=0.9, weight_decay=5e-4)
  schedulers = [
    torch.optim.lr_scheduler.MultiStepLR(warmup, milestones=[60, 120, 180, 240], gamma=0.1),
    torch.optim.lr_scheduler.MultiStepLR(fdiv, milestones=[30, 60, 90, 120], gamma=0.1),
  ]
  last_warmup_epoch = warmup_epochs - 1 if warmup_epochs > 1 else 0
  out = []
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "scheduler.step() before optimizer.step()": no training steps here
    for epoch in range(max_epochs):
      stage = 0 if epoch <= last_warmup_epoch else 1
      out.append((warmup, fdiv)[stage].param_groups[0]["lr"])
      schedulers[stage].step()
  return np.array(out)


@pytest.mark.parametrize("arg", VARIANTS)
def test_f_divergence_paper_values(arg):
  parts = arg.split(",")
  dataset = parts[0]
  human = dataset.endswith("_n")
  size = 2 if human else 3
  divergence = parts[size] if len(parts) > size else "Total-Variation"  # the row's, or FC:24 / README.md's first
  config = f_divergence_paper.get_config(arg)
  # R:94-105: v = p_y on CIFAR-10 (and FU:26), p_y + 1e-5 on CIFAR-100; R:212 the warm-up's best network.
  assert config.method.to_dict() == {
    "name": "f_divergence",
    "divergence": divergence,
    "prob_epsilon": 1e-5 if dataset == "cifar100" else 0.0,
    "warmup": True,
    "warmup_start": "best",
  }
  assert config.batch_size == 128  # README.md --batchsize 128, D:26; rep configs/data/cifar10.py:19
  assert config.augment.to_dict() == {"crop_padding": 4, "flip": True} and config.normalization == "per_channel"
  assert config.dataset == dataset and config.dataset_kwargs.validation_size == 10000  # D:43-52; rep Split(0.8)
  stages = f_divergence.stages(config.method)
  assert [s.name for s in stages] == ["warmup", "stage1"] and stages[1].network == "previous_best"
  epochs = [int(stages_lib.config_of_stage(config, s).num_epochs) for s in stages]
  warmup = stages_lib.config_of_stage(config, stages[0]).optimizer
  own = stages_lib.config_of_stage(config, stages[1]).optimizer
  for sgd in (warmup, own):  # CE:117, R:234; FC:28-29
    assert (sgd.name, sgd.momentum, sgd.nesterov, sgd.weight_decay) == ("sgd", 0.9, False, 5e-4)
  if human:
    # FC:20 resnet34; FC:24 2 warm-up epochs; FC:38 100 in all.
    assert config.model.to_dict() == {"name": "resnet34", "kwargs": {}, "pretrained": "none"}
    assert config.noise.type == "dataset" and config.dataset_kwargs.noise_key == parts[1]
    assert epochs == [2, 98] and stages_lib.total_epochs(config) == 100
    reference = _replication_lrs()
    np.testing.assert_allclose(_lrs(warmup, 2), reference[:2], rtol=1e-6)
    np.testing.assert_allclose(_lrs(own, 98), reference[2:], rtol=1e-6)
    np.testing.assert_allclose(reference[2:], [0.01] * 30 + [0.001] * 30 + [1e-4] * 30 + [1e-5] * 8, rtol=1e-6)
  else:
    # CE:104 resnet_cifar18_pre = ResNetCIFAR(PreActBlock, [2, 2, 2, 2]) (M:157-158), widths 64..512 (M:126-132).
    assert config.model.name == "preact_resnet32" and config.model.pretrained == "none"
    assert dict(config.model.kwargs) == {"widths": (64, 128, 256, 512), "blocks_per_stage": (2, 2, 2, 2)}
    assert epochs == [240, 100] and stages_lib.total_epochs(config) == 340  # CE:20, R:21
    np.testing.assert_allclose(_lrs(warmup, 240), [_code_warmup_lr(e) for e in range(240)], rtol=1e-6)
    np.testing.assert_allclose(_lrs(own, 100), [_code_fdiv_lr(e) for e in range(100)], rtol=1e-6)
    rate = float(parts[2])
    if dataset == "cifar10":  # the 'random' files: redrawn over all classes with probability 0.5 / 0.7
      redraw = {0.5: 0.5, 0.6: 0.7}[rate]
      assert config.noise.to_dict() == {"type": "symmetric_include_true", "rate": redraw, "exact": True, "dataset": ""}
    else:
      assert config.noise.to_dict() == {"type": "symmetric", "rate": rate, "exact": True, "dataset": ""}
  num_classes = 100 if dataset.startswith("cifar100") else 10
  assert registry.build(config.method, spec_lib.Context(num_classes=num_classes)).name == "f_divergence"


def _shipped_labels(name):
  """A label tensor file of the code's CIFAR-10 noise_label folder, read from the mirror."""
  blob = subprocess.run(
    ["git", "-C", MIRROR, "show", f"HEAD:CIFAR-10/noise_label/{name}"], capture_output=True, check=True
  ).stdout
  path = f"/tmp/f_divergence_paper_config_{os.getpid()}_{name}"
  with open(path, "wb") as f:
    f.write(blob)
  try:
    return torch.load(path, weights_only=False)
  finally:
    os.remove(path)


@pytest.mark.skipif(not os.path.isdir(MIRROR), reason="the original code's mirror is not on this machine")
@pytest.mark.parametrize("rate", [0.5, 0.6])
def test_random_noise_is_the_shipped_files(rate):
  """The transition of the code's CIFAR10_noise_r0_5 / r0_6.pt (clean labels: the r0_1 file's clean_label_train)
  against the row's: within 0.015 per entry (sampling noise of ~5,000 labels per class)."""
  clean = _shipped_labels("CIFAR10_noise_r0_1.pt")["clean_label_train"].numpy().ravel().astype(int)
  noisy = _shipped_labels(f"CIFAR10_noise_r0_{int(rate * 10)}.pt")["noise_label_train"].numpy().ravel().astype(int)
  measured = np.zeros((10, 10))
  np.add.at(measured, (clean, noisy), 1.0)
  measured /= measured.sum(1, keepdims=True)
  config = f_divergence_paper.get_config(f"cifar10,random,{rate}")
  ours = noise_lib.make_transition(config.noise.type, 10, config.noise.rate)
  np.testing.assert_allclose(measured, ours, atol=0.015)


def test_the_loss_is_the_codes():
  """The method's pair loss from a CIFAR-100 row (prob_epsilon 1e-5) against R100's ProbLossStable (softmax + 1e-5)
  and its KL pair, activation(prob_reg) - conjugate(prob_peer)."""
  config = f_divergence_paper.get_config("cifar100,symmetric,0.4,KL")
  rng = np.random.default_rng(0)
  z, zp = (rng.normal(size=(6, 100)).astype(np.float32) * 3 for _ in range(2))
  y, yp = (rng.integers(0, 100, size=6) for _ in range(2))
  one_hot = np.eye(100, dtype=np.float32)
  ours = fdiv_core.pair_loss(
    z, one_hot[y], zp, one_hot[yp], divergence=config.method.divergence, prob_epsilon=config.method.prob_epsilon
  )
  nll = torch.nn.NLLLoss(reduction="none")
  prob_reg = -nll(torch.softmax(torch.tensor(z, dtype=torch.float64), -1) + 1e-5, torch.tensor(y))
  prob_peer = -nll(torch.softmax(torch.tensor(zp, dtype=torch.float64), -1) + 1e-5, torch.tensor(yp))
  reference = -torch.mean(prob_reg) - (-torch.mean(torch.exp(prob_peer - 1.0)))
  np.testing.assert_allclose(float(np.mean(np.asarray(ours))), reference.item(), rtol=1e-5)


def test_every_divergence_is_a_row_option():
  for name in CODE_DIVERGENCES + ("Total-Variation", "Neyman-code"):
    assert f_divergence_paper.get_config(f"cifar10,random,0.5,{name}").method.divergence == name


BAD = [
  ("svhn,random,0.5", r"dataset 'svhn'.*allowed: cifar10, cifar100, cifar10_n, cifar100_n"),
  ("cifar10,random,0.3", r"RATE '0.3' for random.*allowed: 0.5, 0.6"),
  ("cifar10,symmetric,0.2", r"noise 'symmetric'.*allowed: random"),
  ("cifar100,random,0.5", r"noise 'random'.*allowed: symmetric"),
  ("cifar100,symmetric,0.6", r"RATE '0.6' for symmetric.*allowed: 0.2, 0.4"),
  ("cifar10,random,0.5,Jensen-Shannon", r"option 'Jensen-Shannon'.*allowed: Total-Variation, Jenson-Shannon"),
  ("cifar10,random", r"'cifar10,random' must be DATASET,random,RATE"),
  ("cifar10_n,worst,KL,extra", r"must be"),
  ("cifar10_n,noisy", r"labels 'noisy' for cifar10_n.*allowed: aggregate, random1, random2, random3, worst"),
]


@pytest.mark.parametrize("arg,message", BAD, ids=[a for a, _ in BAD])
def test_bad_strings_name_the_bad_part(arg, message):
  with pytest.raises(ValueError, match=message):
    f_divergence_paper.get_config(arg)


def test_docstring_commands_and_default_load():
  paper_config_checks.check_docstring_commands(f_divergence_paper)


def _tiny(arg):
  """1 epoch per stage of batches of 16 on 40 mock examples (8 of them validation), a tiny network."""
  config = paper_config_checks.shrunk(f_divergence_paper.get_config(arg), validation_size=8, sections=("warmup",))
  return config


@pytest.mark.parametrize("arg", ["cifar100,symmetric,0.4,Jenson-Shannon", "cifar10_n,worst"])
def test_smoke(arg):
  """The code's CIFAR-100 plan (PreAct ResNet, epsilon 1e-5) and CIFAR-10N's human labels (ResNet): each stage one
  epoch, the f-divergence stage from the warm-up's best-validation network."""
  config = _tiny(arg)
  with tfds.testing.mock_data(num_examples=40):
    summary = runs.run_single(config)
  assert summary["method"] == "f_divergence"
  assert [r["stage"] for r in summary["history"]] == ["warmup", "stage1"]
  for record in summary["history"]:
    assert np.isfinite(record["train_loss"])
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0
