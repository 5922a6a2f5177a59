"""PES-semi's paper config (experiments/configs/pes_semi_paper.py): values, the run's clock and lr against PyTorch's,
the noise against the original's transition, the optimisers step for step, refusals, the docstring's and the doc's
commands, two smoke runs through the three stages.

Every variant string is loaded and compared with the values written out here, each with its source in the original
(tmllab/PES@5466238: PES_semi.py, PES_noisylabels.py ("NL"), common/NoisyUtil.py, networks/ResNet.py, README.md;
docs/pes_schedule.md §2-3, §8). The lr of every loop epoch is PyTorch's
CosineAnnealingLR(T_max 300, eta_min 2e-4) stepped after each loop epoch as PES_semi.py:277 steps it. Two runs (1
epoch per stage, 2 MixMatch steps, 40 mock examples, small networks) go through the trainer under
`tfds.testing.mock_data` (random images with the real TFDS feature specs, nothing downloaded); the shrinking happens
here, never in the config.
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

from experiments.configs import pes_semi_paper
from noisy_jax.core import noise as noise_lib
from noisy_jax.core import pes as pes_core
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.methods import dividemix
from noisy_jax.methods import pes_semi
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import optim
import paper_config_checks

STEPS = math.ceil(50000 / 128)  # 391 (no validation split): only the epoch boundaries matter to the schedules
LOOP_EPOCHS = 300  # PES_semi.py:32 --num_epochs; NL:40
LR, LR_MIN = 0.02, 0.02 / 100  # PES_semi.py:30 --lr, :260 eta_min = lr / 100
T2 = 5  # PES_semi.py:40; NL:48

# Dataset -> (network, its kwargs, T1): PES_semi.py:17, 58-61, 220-221, 233-234; NL:27, 66-69, 236-237, 266-267.
PREACT18 = {"widths": (64, 128, 256, 512), "blocks_per_stage": (2, 2, 2, 2)}  # networks/ResNet.py:191
ROWS = {
  "cifar10": ("preact_resnet32", PREACT18, 20),
  "cifar100": ("preact_resnet32", PREACT18, 35),
  "cifar10_n": ("resnet34", {}, 20),
  "cifar100_n": ("resnet34", {}, 35),
}
# The row's lambda_u: PES_semi.py:37 default 150; README.md:40 (cifar100 pairflip 0.45: 50); NL:249 (5), :279 (75).
LAMBDA_U = {
  "cifar10,symmetric_include_true,0.5": 150.0,
  "cifar100,symmetric_include_true,0.5": 150.0,
  "cifar10,pairflip,0.45": 150.0,
  "cifar100,pairflip,0.45": 50.0,
  **{f"cifar10_n,{k}": 5.0 for k in ("aggregate", "random1", "random2", "random3", "worst")},
  "cifar100_n,noisy": 75.0,
}
VARIANTS = list(LAMBDA_U) + [v + ",original" for v in LAMBDA_U]
REFINES = ((optim.CLASSIFIER,),)  # PES_semi.py:270 noisy_refine(model, train_loader, 0, T2): renew_layers(0)


def _original_transition(noise_type, rate, num_classes):
  """The transition the original builds (NoisyUtil.py:14-47, 124-162): 'symmetric' with include_noise (PES_semi.py:
  246-249) scales the rate by 1 - 1/C, then puts 1 - r on the diagonal and r / (C - 1) off it; 'pairflip' unscaled."""
  if noise_type == "symmetric":
    r = rate * (1 - 1 / num_classes)
    transition = np.full((num_classes, num_classes), r / (num_classes - 1))
    np.fill_diagonal(transition, 1.0 - r)
    return transition
  transition = np.eye(num_classes) * (1.0 - rate)
  for i in range(num_classes):
    transition[i, (i + 1) % num_classes] = rate
  return transition


def _lr_list(optimizer_config, num_epochs, epochs):
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(optimizer_config), STEPS, num_epochs)
  return [float(schedule(e * STEPS)) for e in epochs]


@pytest.mark.parametrize("arg", VARIANTS)
def test_pes_semi_paper_values(arg):
  parts = arg.split(",")
  dataset, original = parts[0], parts[-1] == "original"
  row = ",".join(parts[:-1] if original else parts)
  family = dataset.removesuffix("_n")
  num_classes = 100 if family == "cifar100" else 10
  network, kwargs, t1 = ROWS[dataset]
  config = pes_semi_paper.get_config(arg)
  # PES_semi.py:35-37 (alpha, T, lambda_u), :72-73 (alpha 0.75 late), :81 (int(50000 / B) steps), :192 (clip 3).
  assert config.method.to_dict() == {
    "name": "pes_semi",
    "refine_modules": REFINES,
    "lambda_u": LAMBDA_U[row],
    "temperature": 0.5,
    "alpha": 4.0,
    "late_alpha": 0.75,
    "max_class_weight": 3.0,
    "steps_per_epoch": None,
    "code_freeze_renewed": original,
  }
  assert tuple(config.method.refine_modules) == pes_semi.REFINE_MODULES == pes_semi.refine_modules(config.method)
  assert pes_core.semi_steps_per_epoch(config.batch_size) == int(50000 / 128) == 390
  assert config.model.to_dict() == {"name": network, "kwargs": kwargs, "pretrained": "none"}
  assert config.batch_size == 128  # PES_semi.py:29; NL:37
  # PES_semi.py:26 data_percent 1 (no validation rows), :224-225 RandomCrop(32, padding=4), RandomHorizontalFlip.
  assert config.dataset == dataset and config.dataset_kwargs.validation_size == 0
  assert config.augment.to_dict() == {"crop_padding": 4, "flip": True} and config.normalization == "per_channel"
  if dataset.endswith("_n"):
    assert config.noise.type == "dataset" and config.dataset_kwargs.noise_key == parts[1]
  else:
    rate = float(parts[2])
    assert config.noise.to_dict() == {"type": parts[1], "rate": rate, "exact": True, "dataset": ""}
    code_type = "symmetric" if parts[1] == "symmetric_include_true" else parts[1]
    np.testing.assert_allclose(
      noise_lib.make_transition(config.noise.type, num_classes, config.noise.rate),
      _original_transition(code_type, rate, num_classes),
      rtol=0,
      atol=1e-12,
    )

  # Three stages; on the run's clock the refine counts 0 (PES_semi.py:269-273), 300 in all.
  stages = pes_semi.stages(config.method)
  assert [s.name for s in stages] == ["warmup", "refine1", "stage1"]
  assert spec_lib.check_stages(stages, "pes_semi") == stages
  configs = [stages_lib.config_of_stage(config, s) for s in stages]
  epochs = [int(c.num_epochs) for c in configs]
  assert epochs == [t1, T2, LOOP_EPOCHS - t1]
  clock = [stages_lib.stage_clock(s, c) for s, c in zip(stages, configs, strict=True)]
  assert clock == [t1, 0, LOOP_EPOCHS - t1] and sum(clock) == LOOP_EPOCHS
  assert stages_lib.total_epochs(config) == sum(epochs) == LOOP_EPOCHS + T2

  # The refine: config.refine1, the classifier renewed and trained alone from the previous final network, a fresh
  # Adam(lr 1e-4), no weight decay, constant (PES_semi.py:38, :198-216).
  refine, refine_config = stages[1], configs[1]
  assert refine.config_section == "refine1" and refine.renew == refine.trainable == REFINES[0]
  assert refine.network == "previous_final" and refine.optimizer_from is None
  adam = refine_config.optimizer
  assert (adam.name, adam.learning_rate, adam.weight_decay, adam.lr_schedule) == ("adam", 1e-4, 0.0, "piecewise")
  assert tuple(adam.lr_boundaries) == () and list(adam.trainable_modules) == list(REFINES[0])
  assert adam.get("beta1", 0.9) == 0.9 and adam.get("beta2", 0.999) == 0.999 and adam.get("l1", 0.0) == 0.0
  np.testing.assert_allclose(_lr_list(adam, T2, range(T2)), 1e-4, rtol=1e-6)

  # The SGD: PES_semi.py:258 SGD(lr 0.02, momentum 0.9, weight_decay 5e-4), :260 CosineAnnealingLR(300, lr / 100).
  # Warm-up and stage1 train with the run's optimizer; stage1 continues the warm-up's state (the code's one SGD).
  warmup, own = configs[0].optimizer, configs[2].optimizer
  assert warmup.to_dict() == own.to_dict() == config.optimizer.to_dict()
  assert (own.name, own.learning_rate, own.momentum, own.weight_decay, own.nesterov) == ("sgd", LR, 0.9, 5e-4, False)
  assert (own.lr_schedule, own.cosine_epochs, own.lr_min, tuple(own.lr_boundaries)) == ("cosine", 300, LR_MIN, ())
  assert own.get("trainable_modules", None) is None and own.get("backbone_lr_scale", 1.0) == 1.0
  assert stages[2].optimizer_from == "warmup" and stages[2].network == "previous_final" and stages[2].delivers
  # The lr of each epoch against the code's on its loop epoch: the warm-up's epoch e is loop epoch e; stage1's epoch e
  # (1-based) trains with the schedule's count at (epochs_before + e - 1) steps_per_epoch (pes_semi.make_epoch_fn),
  # epochs_before = the earlier stages' clock = T1: loop epoch T1 + e - 1, the refine's loop epoch T1 first.
  torch_lrs = paper_config_checks.torch_cosine_lrs(LR, LOOP_EPOCHS, LR_MIN)  # PES_semi.py:258-260, 277
  np.testing.assert_allclose(_lr_list(warmup, t1, range(t1)), torch_lrs[:t1], rtol=1e-5)
  epochs_before = sum(clock[:2])
  assert epochs_before == t1
  lr = _lr_list(own, epochs[2], [epochs_before + e - 1 for e in range(1, epochs[2] + 1)])
  np.testing.assert_allclose(lr, torch_lrs[t1:], rtol=1e-5)
  assert lr[0] == pytest.approx(LR_MIN + (LR - LR_MIN) * (1 + math.cos(math.pi * t1 / 300)) / 2, rel=1e-6)
  assert lr[-1] == pytest.approx(LR_MIN + (LR - LR_MIN) * (1 + math.cos(math.pi * 299 / 300)) / 2, rel=1e-4)

  # The run's length for alpha's switch (PES_semi.py:72: epoch >= 300 / 2) and the ramp's start at T1 (:132).
  run_epochs = epochs_before + int(config.num_epochs)
  assert run_epochs == LOOP_EPOCHS
  assert pes_core.mixup_alpha(149, run_epochs, alpha=4.0, late_alpha=0.75) == 4.0
  assert pes_core.mixup_alpha(150, run_epochs, alpha=4.0, late_alpha=0.75) == 0.75
  for t in (t1, t1 + 8.5, t1 + 16, 299.5):  # lambda_u * clip((t - T1) / 16, 0, 1), PES_semi.py:64-66
    ramp = dividemix.linear_rampup(t, t1, 16, lambda_u=LAMBDA_U[row])
    assert float(ramp) == pytest.approx(LAMBDA_U[row] * float(np.clip((t - t1) / 16, 0.0, 1.0)))

  context = spec_lib.Context(num_classes=num_classes, num_epochs=int(config.num_epochs), epochs_before=epochs_before)
  assert registry.build(config.method, context).name == "pes_semi"


def test_the_sgd_and_the_refines_adam_are_pytorchs():
  """The run's SGD against torch.optim.SGD(lr 0.02, momentum 0.9, weight_decay 5e-4) with CosineAnnealingLR(300,
  2e-4) stepped every epoch (PES_semi.py:258-260, 277), and refine1's Adam against torch.optim.Adam(lr 1e-4) (:208)
  over the classifier alone, the others frozen, step for step."""
  config = pes_semi_paper.get_config()
  steps_per_epoch, num_steps = 3, 10
  rng = np.random.default_rng(0)
  params0 = {name: rng.normal(size=4) for name in ("stem_conv", "stage4_block1", "head")}
  grads = [{name: rng.normal(size=4) * np.logspace(-3, 1, 4) for name in params0} for _ in range(num_steps)]
  refine = stages_lib.config_of_stage(config, pes_semi.stages(config.method)[1]).optimizer

  def sgd(weights):
    optimizer = torch.optim.SGD(weights, lr=LR, momentum=0.9, weight_decay=5e-4)
    return optimizer, torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 300, LR / 100)

  for optimizer_config, make_torch, trained in (
    (config.optimizer, sgd, tuple(params0)),
    (refine, lambda w: (torch.optim.Adam(w, lr=1e-4), None), ("head",)),
  ):
    weights = {name: torch.tensor(params0[name], requires_grad=True) for name in trained}
    torch_optimizer, scheduler = make_torch(list(weights.values()))
    for step, g in enumerate(grads):
      for name, w in weights.items():
        w.grad = torch.tensor(g[name])
      torch_optimizer.step()
      if scheduler is not None and (step + 1) % steps_per_epoch == 0:
        scheduler.step()
    with jax.enable_x64(True):
      tx = optim.make_optimizer(
        settings_lib.optimizer_settings(optimizer_config), steps_per_epoch, 5, classifier="head"
      )
      params = {name: jnp.asarray(w) for name, w in params0.items()}
      state = tx.init(params)
      for g in grads:
        updates, state = tx.update({name: jnp.asarray(v) for name, v in g.items()}, state, params)
        params = optax.apply_updates(params, updates)
    for name, w0 in params0.items():
      expected = weights[name].detach().numpy() if name in trained else w0
      np.testing.assert_allclose(np.asarray(params[name]) - w0, expected - w0, rtol=1e-9, atol=0)


BAD = [
  ("svhn,pairflip,0.45", r"dataset 'svhn'.*allowed: cifar10, cifar100, cifar10_n, cifar100_n"),
  ("cifar10,pairflip", r"DATASET,NOISE,RATE\[,original\] or DATASET,LABELS\[,original\]"),
  ("cifar10,symmetric,0.5", r"noise 'symmetric'.*allowed: symmetric_include_true, pairflip"),
  ("cifar10,instance,0.4", r"noise 'instance'.*allowed: symmetric_include_true, pairflip"),
  ("cifar10,symmetric_include_true,0.2", r"RATE '0.2' for symmetric_include_true.*allowed: 0.5"),
  ("cifar100,pairflip,0.5", r"RATE '0.5' for pairflip.*allowed: 0.45"),
  ("cifar10,pairflip,half", r"RATE 'half'"),
  ("cifar10,pairflip,0.45,orig", r"option 'orig'.*allowed: original"),
  ("cifar10_n,noisy", r"labels 'noisy' for cifar10_n.*allowed: aggregate, random1, random2, random3, worst"),
  ("cifar100_n,aggregate", r"labels 'aggregate' for cifar100_n.*allowed: noisy"),
  ("cifar100_n,noisy,original,x", r"must be DATASET,NOISE,RATE"),
]


@pytest.mark.parametrize("arg,message", BAD, ids=[a for a, _ in BAD])
def test_bad_strings_name_the_bad_part(arg, message):
  with pytest.raises(ValueError, match=rf"pes_semi_paper.*{message}"):
    pes_semi_paper.get_config(arg)


def test_docstring_and_doc_commands_and_default_load():
  found = re.findall(r"--config=experiments/configs/(\w+)\.py:([\w,.]+)", pes_semi_paper.__doc__)
  assert len(found) == 2 and all(name == "pes_semi_paper" for name, _ in found)
  doc = open("docs/paper_configs.md", encoding="utf-8").read()
  in_doc = re.findall(r"--config=experiments/configs/pes_semi_paper\.py:([\w,.]+)", doc)
  assert len(in_doc) >= 4
  for arg in [a for _, a in found] + in_doc:
    pes_semi_paper.get_config(arg)
  assert pes_semi_paper.get_config().to_dict() == pes_semi_paper.get_config(pes_semi_paper.DEFAULT).to_dict()
  assert pes_semi_paper.DEFAULT == "cifar10,symmetric_include_true,0.5"  # PES_semi.py:24, 27, 28 defaults


# ---------------------------------------------------------------------------------------------------------------
# Smoke runs.


def _tiny(arg):
  """1 epoch per stage of batches of 4 on 40 mock examples (no validation split), 2 MixMatch steps, a network of two
  1-block stages (the refine renews the classifier alone)."""
  config = pes_semi_paper.get_config(arg)
  config.num_epochs = config.warmup.num_epochs = config.refine1.num_epochs = 1
  config.method.steps_per_epoch = 2
  config.batch_size = 4
  config.num_devices = 1
  config.checkpoint_every = 0
  config.model.kwargs = {"widths": (4, 8), "blocks_per_stage": (1, 1)}
  return config


def _same(a, b):
  return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


@pytest.mark.parametrize("arg", ["cifar10,symmetric_include_true,0.5,original", "cifar100_n,noisy"])
def test_smoke(arg):
  """The code's frozen classifier on mock CIFAR-10 (PreActResNet; 6 of the 40 rows selected: two MixMatch steps,
  which move all but the classifier) and CIFAR-100N's human labels (ResNet layout; no row selected: an epoch of no
  step, its loss 0): each stage one epoch; the refine moves only the classifier."""
  config = _tiny(arg)
  with tfds.testing.mock_data(num_examples=40):
    summary = runs.run_single(config, keep_arrays=True)
  assert summary["method"] == "pes_semi"
  history = summary["history"]
  assert [r["stage"] for r in history] == ["warmup", "refine1", "stage1"]
  for record in history:
    assert np.isfinite(record["train_loss"])
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0
  arrays = {name: arrays["params"] for name, arrays in summary["arrays"].items() if name != "label_table"}
  for name in arrays["refine1"]:
    assert _same(arrays["refine1"][name], arrays["warmup"][name]) == (name != "head"), name
  steps = history[-1]["pes_steps"]
  assert steps == (2 if history[-1]["pes_selected_fraction"] > 0 else 0)
  assert steps == (2 if arg.endswith("original") else 0)  # mock data and seed fixed: the docstring's counts
  if steps == 0:
    assert history[-1]["train_loss"] == 0.0
  for name in arrays["stage1"]:
    frozen = name == "head" and arg.endswith("original")
    assert _same(arrays["stage1"][name], arrays["refine1"][name]) == (frozen or steps == 0), name
