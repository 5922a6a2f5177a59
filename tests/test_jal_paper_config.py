"""JAL's paper config (experiments/configs/jal_paper.py): every row's values, each epoch's lr and two optimiser steps
against PyTorch's, the loss against the catalogue's and the code's, the noise against the code's, refusals, the
commands, two smoke runs.

The values are read in cswjl/joint-asymmetric-loss@0f9eb7b7730fecc319dee5cd53508a9ac26b570c and written out here
independently of the config module, each with its file and line: config.py (the loss dicts, get_weight_decay_config),
main.py (the plan), losses.py (NCEandAMSE, NFLandAMSE), datasets/ ("M2" = datasets/data_method2/build_dataset.py).
The lr per epoch is a re-run of main.py:69-70, 88's torch SGD and CosineAnnealingLR stepped after each epoch; the
optimiser steps re-run main.py:77-86 (the L1 term added to the loss, backward, clip_grad_norm_ 5, SGD). Two runs
(1 epoch, 40 mock examples, small networks) go through the trainer under `tfds.testing.mock_data`; the shrinking
happens here, never in the config.
"""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import tensorflow_datasets as tfds
import torch
import torch.nn.functional as F

from experiments.configs import jal_paper
from noisy_jax.core import losses
from noisy_jax.core import noise as noise_lib
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import registry
from noisy_jax.train import optim
import paper_config_checks

STEPS = math.ceil(50000 / 128)  # 391 (data_loaders.py:40-46 keeps the last partial batch): only epoch ends matter
CODE = {  # per --dataset: the loss rows, L1 and L2, model, epochs, lr, batch
  "cifar10": {
    "jal_ce": {"alpha": 1.0, "beta": 1.0, "a": 30.0},  # config.py:29 NCEandAMSE(alpha=1, beta=1, a=30)
    "jal_fl": {"alpha": 1.0, "beta": 1.0, "a": 30.0, "gamma": 0.5},  # config.py:30; gamma: losses.py:126's default
    "l1": 5e-5,  # config.py:137-138
    "l2": 0.0,  # config.py:135, not changed on the AMSE branch
    "model": "apl_cnn",  # main.py:53 CNN(type='cifar10') (models.py:17-63)
    "epochs": 120,  # main.py:50
    "lr": 0.01,  # main.py:51
  },
  "cifar100": {
    "jal_ce": {"alpha": 5.0, "beta": 1.0, "a": 20.0},  # config.py:57
    "jal_fl": {"alpha": 5.0, "beta": 1.0, "a": 20.0, "gamma": 0.5},  # config.py:58
    "l1": 5e-6,  # config.py:142-143
    "l2": 0.0,
    "model": "resnet34",  # main.py:58 ResNet34(num_classes=100)
    "epochs": 200,  # main.py:55
    "lr": 0.1,  # main.py:56
  },
}
SETTINGS_OF = {"cifar10": "cifar10", "cifar100": "cifar100", "cifar10_n": "cifar10", "cifar100_n": "cifar100"}
HUMAN = {  # datasets/data_loaders.py:29's aggre, rand1, rand2, rand3, worst / noisy100, by TFDS's names
  "cifar10_n": ("aggregate", "random1", "random2", "random3", "worst"),
  "cifar100_n": ("noisy",),
}
ROWS = ("jal_ce", "jal_fl")
VARIANTS = [f"{d},{r}" for d in ("cifar10", "cifar100") for r in ROWS] + [
  f"{d},{labels},{r}" for d, sets in HUMAN.items() for labels in sets for r in ROWS
]


def _torch_code_loss(logits, target, row, alpha, beta, a, gamma=0.5):
  """The batch loss of NCEandAMSE / NFLandAMSE (losses.py:8-18, 115-133, 180-189, 346-366) in float64: alpha times
  NCE (or NFL, its focal factors from detached probabilities) plus beta times the class-mean squared distance of
  softmax to a times the one-hot label, each averaged over the batch."""
  log_p = F.log_softmax(logits, dim=1)
  one_hot = F.one_hot(target, logits.shape[1]).double()
  amse = ((log_p.exp() - a * one_hot) ** 2).mean()
  if row == "jal_ce":
    normalised = (one_hot * log_p).sum(1) / log_p.sum(1)
  else:
    focal = (1 - log_p.detach().exp()) ** gamma * -log_p
    normalised = (one_hot * focal).sum(1) / focal.sum(1)
  return alpha * normalised.mean() + beta * amse


@pytest.mark.parametrize("arg", VARIANTS)
def test_values(arg):
  parts = arg.split(",")
  dataset, row = parts[0], parts[-1]
  code = CODE[SETTINGS_OF[dataset]]
  config = jal_paper.get_config(arg)
  expected = dict(code[row])
  if row == "jal_fl":
    expected["detach_modulator"] = True  # losses.py:356, 359 (logpt.data)
  assert config.method.to_dict() == {"name": "loss", "loss": row, "loss_kwargs": expected}
  assert config.model.to_dict() == {"name": code["model"], "kwargs": {}, "pretrained": "none"}
  assert (config.num_epochs, config.batch_size, config.seeds) == (code["epochs"], 128, (0,))  # main.py:52, 57; :28
  # main.py:69-70, 85: SGD(lr, momentum=0.9, weight_decay=l2), CosineAnnealingLR(T_max=epochs, eta_min=0), clip 5.
  assert config.optimizer.to_dict() == {
    "name": "sgd",
    "learning_rate": code["lr"],
    "momentum": 0.9,
    "nesterov": False,
    "weight_decay": code["l2"],
    "lr_boundaries": (),
    "lr_decay": 0.1,
    "backbone_lr_scale": 1.0,
    "layer_decay": 1.0,
    "lr_schedule": "cosine",
    "cosine_epochs": 0,
    "lr_min": 0.0,
    "grad_clip_norm": 5.0,
    "l1": code["l1"],
  }
  # transformers.py:20-22, 35-37: RandomCrop(32, padding=4), RandomHorizontalFlip; every training image (M2, human).
  assert config.augment.to_dict() == {"crop_padding": 4, "flip": True} and config.normalization == "per_channel"
  assert config.dataset == dataset and config.dataset_kwargs.validation_size == 0
  if dataset in HUMAN:
    assert config.noise.type == "dataset" and config.dataset_kwargs.noise_key == parts[1]
  else:  # main.py:18, 20: symmetric at '0.8'; the asymmetric flag's class map is the dataset's
    assert config.noise.to_dict() == {"type": "symmetric", "rate": 0.8, "exact": True, "dataset": dataset}
  registry.make(config.method, num_classes=100 if dataset.startswith("cifar100") else 10)


@pytest.mark.parametrize("arg", ["cifar10,jal_fl", "cifar100_n,noisy,jal_ce"])
def test_lr_of_every_epoch_is_torchs(arg):
  config = jal_paper.get_config(arg)
  code = CODE[SETTINGS_OF[arg.split(",")[0]]]
  epochs = config.num_epochs
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(config.optimizer), STEPS, epochs)
  first = np.array([float(schedule(e * STEPS)) for e in range(epochs)])
  last = np.array([float(schedule(e * STEPS + STEPS - 1)) for e in range(epochs)])
  reference = paper_config_checks.torch_cosine_lrs(code["lr"], code["epochs"])
  np.testing.assert_allclose(first, reference, rtol=1e-6)
  np.testing.assert_array_equal(first, last)


@pytest.mark.parametrize("dataset", ["cifar10", "cifar100"])
def test_optimiser_steps_are_mains(dataset):
  """Three steps of the config's optimiser against main.py:77-86 on a toy model whose loss is <c_t, w>: the L1 term
  l1 * sum |w| joins the loss before backward, then clip_grad_norm_(5), then SGD with momentum 0.9 at epoch 0's lr.
  c_t's entries are ~1e-4, so the L1 term moves them by 5-50%; one large entry makes the first two steps clip
  (||c|| = 50, 20), which scales the L1 term with the loss's gradient (clipping before it would not)."""
  config = jal_paper.get_config(f"{dataset},jal_ce")
  rng = np.random.default_rng(0)
  w0 = rng.normal(size=(7, 5))
  coefficients = [rng.normal(size=(7, 5)) * 1e-4 for _ in range(3)]
  coefficients[0][0, 0], coefficients[1][1, 1] = 50.0, 20.0
  param = torch.tensor(w0, requires_grad=True)
  sgd = torch.optim.SGD([param], lr=config.optimizer.learning_rate, momentum=0.9, weight_decay=0.0)
  chain = optim.make_optimizer(settings_lib.optimizer_settings(config.optimizer), STEPS, config.num_epochs)
  params = {"w": jnp.asarray(w0, jnp.float32)}
  state = chain.init(params)
  for c in coefficients:
    before = param.detach().clone()
    sgd.zero_grad()
    loss = (torch.tensor(c) * param).sum() + CODE[dataset]["l1"] * param.abs().sum()
    loss.backward()
    torch.nn.utils.clip_grad_norm_([param], 5.0)
    sgd.step()
    updates, state = chain.update({"w": jnp.asarray(c, jnp.float32)}, state, params)
    params = optax.apply_updates(params, updates)
    np.testing.assert_allclose(np.asarray(updates["w"]), (param.detach() - before).numpy(), rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("dataset,row", [(d, r) for d in ("cifar10", "cifar100") for r in ROWS])
def test_loss_is_the_catalogues_and_the_codes(dataset, row):
  """The method built from the row: its batch loss equals the catalogue loss's mean at the row's hyper-parameters,
  and its value and gradient w.r.t. the logits equal the code's batch loss (float64 torch)."""
  config = jal_paper.get_config(f"{dataset},{row}")
  classes = 10 if dataset == "cifar10" else 100
  rng = np.random.default_rng(1)
  logits = (rng.normal(size=(8, classes)) * 3).astype(np.float32)
  target = rng.integers(0, classes, size=8)
  labels = np.eye(classes, dtype=np.float32)[target]
  method = registry.make(config.method, num_classes=classes)
  ones = jnp.ones(8)

  def batch_loss(z):
    return method.objective(z, labels, ones, ones)[0]

  value, grad = jax.value_and_grad(batch_loss)(jnp.asarray(logits))
  catalogue = losses.get(row)(logits, labels, **config.method.loss_kwargs)
  np.testing.assert_allclose(float(value), float(jnp.mean(catalogue)), rtol=1e-6)
  t_logits = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
  reference = _torch_code_loss(t_logits, torch.tensor(target), row, **CODE[dataset][row])
  reference.backward()
  np.testing.assert_allclose(float(value), reference.item(), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(grad), t_logits.grad.numpy(), rtol=1e-4, atol=1e-7)
  if row == "jal_fl":  # the catalogue's default (the NFL paper's gradient) is not the code's
    paper_kwargs = {**config.method.loss_kwargs, "detach_modulator": False}
    paper_grad = jax.grad(lambda z: jnp.mean(losses.get(row)(z, labels, **paper_kwargs)))(jnp.asarray(logits))
    assert not np.allclose(np.asarray(paper_grad), t_logits.grad.numpy(), rtol=1e-3, atol=1e-6)


def _code_symmetric(classes, r):
  """M2:10-22 get_sym_T."""
  return np.eye(classes) * (1 - r) + (1 - np.eye(classes)) * r / (classes - 1)


def _code_asymmetric(dataset, r):
  """M2:45-64 get_asym_T_cifar10 and M2:66-88 get_asym_T_cifar100 (blocks of 5 consecutive class ids)."""
  if dataset == "cifar10":
    t = np.eye(10)
    for source, target in ((9, 1), (2, 0), (3, 5), (5, 3), (4, 7)):
      t[source, source], t[source, target] = 1 - r, r
    return t
  t = np.eye(100) * (1 - r)
  for i in range(100):
    t[i, (i // 5) * 5 + (i % 5 + 1) % 5] = r
  return t


@pytest.mark.parametrize("dataset,classes", [("cifar10", 10), ("cifar100", 100)])
def test_noise_transitions_against_the_codes(dataset, classes):
  """The default symmetric noise and CIFAR-10's asymmetric map are the code's; CIFAR-100's asymmetric map is not (the
  code's blocks of 5 consecutive ids, the docstring's named difference). Exact counts: the code truncates each
  r_ij n_i (M2:110), noisy_jax rounds by largest remainders: 0 to C - 1 more flips per class here."""
  noise = jal_paper.get_config(f"{dataset},jal_ce").noise
  symmetric = noise_lib.make_transition(noise.type, classes, noise.rate, dataset=noise.dataset)
  np.testing.assert_allclose(symmetric, _code_symmetric(classes, 0.8), rtol=1e-12)
  asymmetric = noise_lib.make_transition("asymmetric", classes, 0.4, dataset=noise.dataset)
  assert np.allclose(asymmetric, _code_asymmetric(dataset, 0.4)) == (dataset == "cifar10")
  size = 50000 // classes
  ours = noise_lib.transition_counts(symmetric, [size] * classes)
  code = (_code_symmetric(classes, 0.8) * size).astype(int)
  flipped_ours = size - np.diag(ours)
  flipped_code = code.sum(1) - np.diag(code)
  assert np.all(flipped_ours == 0.8 * size)  # 4,000 / 400
  assert np.all(flipped_code == {10: 3996, 100: 396}[classes])
  assert np.all((flipped_ours - flipped_code >= 0) & (flipped_ours - flipped_code <= classes - 1))


BAD = [
  ("svhn,jal_ce", r"unknown dataset 'svhn'.*allowed: cifar10, cifar100, cifar10_n, cifar100_n"),
  ("webvision,jal_ce", r"unknown dataset 'webvision'"),
  ("cifar10,NCEandAMSE", r"unknown row 'NCEandAMSE'.*allowed: jal_ce, jal_fl"),
  ("cifar100,jal_ce,extra", r"must be DATASET,ROW \(cifar10, cifar100\) or DATASET,LABELS,ROW"),
  ("cifar10,symmetric,0.8,jal_ce", r"must be DATASET,ROW"),
  ("cifar10_n,jal_ce", r"'cifar10_n,jal_ce' must be DATASET,ROW"),
  ("cifar10_n,noisy,jal_ce", r"labels 'noisy' for cifar10_n.*allowed: aggregate, random1, random2, random3, worst"),
  ("cifar100_n,worst,jal_fl", r"labels 'worst' for cifar100_n.*allowed: noisy"),
  ("cifar100_n,noisy,anl_ce", r"unknown row 'anl_ce'"),
  ("", r"unknown dataset ''"),
]


@pytest.mark.parametrize("arg,message", BAD, ids=[a or "empty" for a, _ in BAD])
def test_bad_strings_name_the_bad_part(arg, message):
  with pytest.raises(ValueError, match=message):
    jal_paper.get_config(arg)


def test_docstring_commands_and_default_load():
  paper_config_checks.check_docstring_commands(jal_paper)
  assert jal_paper.get_config().method.loss == "jal_ce" and jal_paper.get_config().dataset == "cifar10"


def test_doc_commands_load():
  """Every jal_paper command of docs/paper_configs.md."""
  doc = open("docs/paper_configs.md", encoding="utf-8").read()
  found = re.findall(r"--config=experiments/configs/jal_paper\.py:([\w,.=-]+)", doc)
  assert len(found) == 4
  for arg in found:
    jal_paper.get_config(arg)


@pytest.mark.parametrize("arg", ["cifar10,jal_fl", "cifar100_n,noisy,jal_ce"])
def test_smoke(arg):
  """JAL-FL on mock CIFAR-10 through a small 8-layer CNN, JAL-CE on mock CIFAR-100N's human labels through a tiny
  ResNet: one epoch each, with the cosine lr, the L1 term and clipping, no validation split."""
  config = paper_config_checks.shrunk(jal_paper.get_config(arg), validation_size=0)
  if config.model.name == "apl_cnn":
    config.model.kwargs = {"widths": (4, 8, 8), "dense_size": 8}
  with tfds.testing.mock_data(num_examples=40):
    summary = runs.run_single(config)
  assert summary["method"] == arg.split(",")[-1]
  assert [r["stage"] for r in summary["history"]] == ["stage1"]
  assert np.isfinite(summary["history"][0]["train_loss"]) and "val_accuracy" not in summary["history"][0]
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0
