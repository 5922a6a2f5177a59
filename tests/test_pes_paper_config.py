"""PES's paper config (experiments/configs/pes_paper.py): values, the run's clock and lr against PyTorch's, the
optimisers step for step, refusals, the docstring's commands, two smoke runs through the four stages.

Every variant string is loaded and compared with the values written out here, each with its source in the original
(tmllab/PES@5466238: PES_cs.py, common/NoisyUtil.py, networks/ResNet.py; docs/pes_schedule.md §1). The lr of every
loop epoch is PyTorch's MultiStepLR([100, 150], 0.1) stepped after each epoch as PES_cs.py:182 steps it; the SGD and
the refines' Adam are PyTorch's step for step. Two runs (1 epoch per stage, 40 mock examples, a ResNet of four 1-block
stages) go through the trainer under `tfds.testing.mock_data` (random images with the real TFDS feature specs, nothing
downloaded); the shrinking happens here, never in the config.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import tensorflow_datasets as tfds
import torch

from experiments.configs import pes_paper
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.methods import pes
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import optim
import paper_config_checks

STEPS = math.ceil(45000 / 128)  # 352: only the epoch boundaries matter to the schedules
LOOP_EPOCHS = 200  # PES_cs.py:25 --num_epochs

# PES_cs.py: dataset -> (network :132 / :146, T1 :130 / :144).
ROWS = {"cifar10": ("resnet18", 25), "cifar100": ("resnet34", 30)}
T2, T3 = 7, 5  # PES_cs.py:37-38
VARIANTS = (
  [f"{d},symmetric,{r}" for d in ("cifar10", "cifar100") for r in (0.2, 0.4, 0.5)]
  + [f"{d},pairflip,0.45" for d in ("cifar10", "cifar100")]
  + [f"cifar10_n,{k}" for k in ("aggregate", "random1", "random2", "random3", "worst")]
  + ["cifar100_n,noisy"]
)
VARIANTS = VARIANTS + [v + ",original" for v in VARIANTS]
REFINES = (("stage4", optim.CLASSIFIER), (optim.CLASSIFIER,))  # renew_layers(1) then renew_layers(0), PES_cs.py:176-177


def _torch_loop_lrs():
  """PES_cs.py's lr of each loop epoch: SGD(lr 0.1, momentum 0.9, wd 1e-4), MultiStepLR([100, 150], 0.1),
  scheduler.step() after each loop epoch (:165-166, :182)."""
  optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9, weight_decay=1e-4)
  scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[100, 150], gamma=0.1)
  out = []
  for _ in range(LOOP_EPOCHS):
    out.append(optimizer.param_groups[0]["lr"])
    optimizer.step()
    scheduler.step()
  return np.array(out)


@pytest.mark.parametrize("arg", VARIANTS)
def test_pes_paper_values(arg):
  parts = arg.split(",")
  dataset, original = parts[0], parts[-1] == "original"
  family = dataset.removesuffix("_n")
  network, t1 = ROWS[family]
  config = pes_paper.get_config(arg)
  # PES_cs.py: no class-weight clip (:95-97); the renewed modules; REFERENCE §15 for the original's frozen ones.
  assert config.method.to_dict() == {
    "name": "pes",
    "refine_modules": REFINES,
    "max_class_weight": None,
    "code_freeze_renewed": original,
  }
  assert tuple(config.method.refine_modules) == pes.REFINE_MODULES == pes.refine_modules(config.method)
  assert config.model.to_dict() == {"name": network, "kwargs": {}, "pretrained": "none"}
  assert config.batch_size == 128  # PES_cs.py:22
  # PES_cs.py:30 data_percent 0.9 (NoisyUtil.py:53), :133-135 RandomCrop(32, padding=4), RandomHorizontalFlip.
  assert config.dataset == dataset and config.dataset_kwargs.validation_size == 5000
  assert config.augment.to_dict() == {"crop_padding": 4, "flip": True} and config.normalization == "per_channel"
  if dataset.endswith("_n"):
    assert config.noise.type == "dataset" and config.dataset_kwargs.noise_key == parts[1]
  else:  # NoisyUtil.py:124-162: r / (C - 1) off the diagonal (include_noise False), pair flip i -> i + 1
    assert config.noise.to_dict() == {"type": parts[1], "rate": float(parts[2]), "exact": True, "dataset": ""}

  # Four stages; on the run's clock the refines are one loop epoch (PES_cs.py:175-177), 200 in all.
  stages = pes.stages(config.method)
  assert [s.name for s in stages] == ["warmup", "refine1", "refine2", "stage1"]
  assert spec_lib.check_stages(stages, "pes") == stages
  configs = [stages_lib.config_of_stage(config, s) for s in stages]
  epochs = [int(c.num_epochs) for c in configs]
  assert epochs == [t1, T2, T3, LOOP_EPOCHS - t1 - 1]
  clock = [stages_lib.stage_clock(s, c) for s, c in zip(stages, configs, strict=True)]
  assert clock == [t1, 0, 1, LOOP_EPOCHS - t1 - 1] and sum(clock) == LOOP_EPOCHS
  assert int(config.warmup.num_epochs) + int(config.num_epochs) + 1 == LOOP_EPOCHS
  assert stages_lib.total_epochs(config) == sum(epochs) == LOOP_EPOCHS - 1 + T2 + T3

  # The refines: config.refine1 / refine2, the renewed modules trained alone from the previous final network, a fresh
  # Adam(lr 1e-4), no weight decay, constant (PES_cs.py:35, :105-125).
  for k, (stage, stage_config) in enumerate(zip(stages[1:3], configs[1:3], strict=True)):
    assert stage.config_section == f"refine{k + 1}" and f"refine{k + 1}" in config
    assert stage.renew == stage.trainable == REFINES[k] and stage.network == "previous_final"
    assert stage.optimizer_from is None
    adam = stage_config.optimizer
    assert (adam.name, adam.learning_rate, adam.weight_decay, tuple(adam.lr_boundaries)) == ("adam", 1e-4, 0.0, ())
    assert list(adam.trainable_modules) == list(REFINES[k])
    assert adam.get("beta1", 0.9) == 0.9 and adam.get("beta2", 0.999) == 0.999 and adam.get("l1", 0.0) == 0.0
    schedule = optim.learning_rate_schedule(
      settings_lib.optimizer_settings(adam), STEPS, num_epochs=int(stage_config.num_epochs)
    )
    np.testing.assert_allclose([float(schedule(e * STEPS)) for e in range(epochs[k + 1])], 1e-4, rtol=1e-6)

  # The SGD: PES_cs.py:165 SGD(lr 0.1, momentum 0.9, weight_decay 1e-4), :166 MultiStepLR([100, 150], 0.1). Warm-up and
  # stage1 train with the run's optimizer; stage1 continues the warm-up's state (the code's one SGD).
  warmup, own = configs[0].optimizer, configs[3].optimizer
  assert warmup.to_dict() == own.to_dict() == config.optimizer.to_dict()
  assert (own.name, own.learning_rate, own.momentum, own.weight_decay, own.nesterov) == ("sgd", 0.1, 0.9, 1e-4, False)
  assert (own.get("lr_schedule", "piecewise"), tuple(own.lr_boundaries), own.lr_decay) == ("piecewise", (100, 150), 0.1)
  assert own.get("trainable_modules", None) is None and own.get("backbone_lr_scale", 1.0) == 1.0
  assert stages[3].optimizer_from == "warmup" and stages[3].network == "previous_final" and stages[3].delivers
  # The lr of each epoch against the code's on its loop epoch: the warm-up's epoch e is loop epoch e; stage1's epoch e
  # (1-based) trains with the schedule's count at (epochs_before + e - 1) steps_per_epoch (pes.make_epoch_fn), with
  # epochs_before the earlier stages' clock, T1 + 1: loop epoch T1 + e.
  torch_lrs = _torch_loop_lrs()
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(warmup), STEPS, num_epochs=t1)
  np.testing.assert_allclose([float(schedule(e * STEPS)) for e in range(t1)], torch_lrs[:t1], rtol=1e-6)
  epochs_before = sum(clock[:3])
  assert epochs_before == t1 + 1
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(own), STEPS, num_epochs=epochs[3])
  lr = [float(schedule((epochs_before + e - 1) * STEPS)) for e in range(1, epochs[3] + 1)]
  np.testing.assert_allclose(lr, torch_lrs[t1 + 1 :], rtol=1e-6)
  assert lr[100 - t1 - 1] == pytest.approx(0.01) and lr[99 - t1 - 1] == pytest.approx(0.1)  # loop epochs 100, 99

  num_classes = 100 if family == "cifar100" else 10
  built = registry.build(config.method, spec_lib.Context(num_classes=num_classes, epochs_before=epochs_before))
  assert built.name == "pes"


def test_the_sgd_and_the_refines_adam_are_pytorchs():
  """The run's SGD against torch.optim.SGD(lr 0.1, momentum 0.9, weight_decay 1e-4) (PES_cs.py:165), and refine1's
  Adam against torch.optim.Adam(lr 1e-4) (:117) over the renewed modules alone, the others frozen, step for step."""
  config = pes_paper.get_config()
  steps_per_epoch, num_steps = 3, 10
  rng = np.random.default_rng(0)
  params0 = {name: rng.normal(size=4) for name in ("stem_conv", "stage4_block1", "head")}
  grads = [{name: rng.normal(size=4) * np.logspace(-3, 1, 4) for name in params0} for _ in range(num_steps)]
  refine = stages_lib.config_of_stage(config, pes.stages(config.method)[1]).optimizer
  for optimizer_config, make_torch, trained in (
    (config.optimizer, lambda w: torch.optim.SGD(w, lr=0.1, momentum=0.9, weight_decay=1e-4), tuple(params0)),
    (refine, lambda w: torch.optim.Adam(w, lr=1e-4), ("stage4_block1", "head")),
  ):
    weights = {name: torch.tensor(params0[name], requires_grad=True) for name in trained}
    torch_optimizer = make_torch(list(weights.values()))
    for g in grads:
      for name, w in weights.items():
        w.grad = torch.tensor(g[name])
      torch_optimizer.step()
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
  ("svhn,symmetric,0.5", r"dataset 'svhn'.*allowed: cifar10, cifar100, cifar10_n, cifar100_n"),
  ("cifar10,symmetric", r"DATASET,NOISE,RATE\[,original\] or DATASET,LABELS\[,original\]"),
  ("cifar100,instance,0.4", r"noise 'instance'.*allowed: symmetric, pairflip"),
  ("cifar10,symmetric,0.45", r"RATE '0.45' for symmetric.*allowed: 0.2, 0.4, 0.5"),
  ("cifar100,pairflip,0.2", r"RATE '0.2' for pairflip.*allowed: 0.45"),
  ("cifar10,symmetric,half", r"RATE 'half'"),
  ("cifar10,symmetric,0.5,orig", r"option 'orig'.*allowed: original"),
  ("cifar10_n,noisy", r"labels 'noisy' for cifar10_n.*allowed: aggregate, random1, random2, random3, worst"),
  ("cifar100_n,worst", r"labels 'worst' for cifar100_n.*allowed: noisy"),
  ("cifar100_n,noisy,original,x", r"must be DATASET,NOISE,RATE"),
]


@pytest.mark.parametrize("arg,message", BAD, ids=[a for a, _ in BAD])
def test_bad_strings_name_the_bad_part(arg, message):
  with pytest.raises(ValueError, match=message):
    pes_paper.get_config(arg)


def test_docstring_commands_and_default_load():
  paper_config_checks.check_docstring_commands(pes_paper)
  assert pes_paper.DEFAULT == "cifar10,symmetric,0.5"  # PES_cs.py:28, 31, 32 argparse defaults


def _tiny(arg):
  """1 epoch per stage of steps of 4 on 40 mock examples (8 for validation), a ResNet of four 1-block stages (so
  that 'stage4' exists for the first refine)."""
  config = pes_paper.get_config(arg)
  config.num_epochs = config.warmup.num_epochs = config.refine1.num_epochs = config.refine2.num_epochs = 1
  config.batch_size = 4
  config.num_devices = 1
  config.checkpoint_every = 0
  config.dataset_kwargs.validation_size = 8
  config.model.kwargs = {"widths": (4, 4, 8, 8), "blocks_per_stage": (1, 1, 1, 1)}
  return config


def _same(a, b):
  return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


@pytest.mark.parametrize("arg", ["cifar10,pairflip,0.45,original", "cifar100_n,noisy"])
def test_smoke(arg):
  """The code's frozen renewed modules on mock CIFAR-10 pair-flipped (4 of the 32 training rows selected: one step
  of stage1, which moves all but stage 4 and the classifier), and CIFAR-100N's human labels (1 row selected: an epoch
  of no step, its loss 0): each stage one epoch; each refine moves only its modules."""
  config = _tiny(arg)
  with tfds.testing.mock_data(num_examples=40):
    summary = runs.run_single(config, keep_arrays=True)
  assert summary["method"] == "pes"
  assert [r["stage"] for r in summary["history"]] == ["warmup", "refine1", "refine2", "stage1"]
  for record in summary["history"]:
    assert np.isfinite(record["train_loss"])
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0
  arrays = {name: arrays["params"] for name, arrays in summary["arrays"].items() if name != "label_table"}
  renewed = {name for name in arrays["warmup"] if name.startswith("stage4") or name == "head"}
  for refine, previous, moved in (("refine1", "warmup", renewed), ("refine2", "refine1", {"head"})):
    for name in arrays[refine]:
      assert _same(arrays[refine][name], arrays[previous][name]) == (name not in moved), (refine, name)
  selected = summary["history"][-1]["pes_selected_fraction"]
  steps = round(selected * 32) // config.batch_size  # the selected training rows in full batches
  assert steps == (1 if arg.endswith("original") else 0)  # mock data and seed fixed: the docstring's counts
  for name in arrays["stage1"]:
    frozen = arg.endswith("original") and name in renewed
    assert _same(arrays["stage1"][name], arrays["refine2"][name]) == (frozen or steps == 0), name
