"""T-Revision's paper config (experiments/configs/t_revision_paper.py): values, schedules against PyTorch's, refusals,
the docstring's commands, two smoke runs through the three stages.

Every variant string is loaded and compared with the values written out here, each with its source: shared/REFERENCE.md
§13 and the original's main.py, tools.py, transformer.py (xiaoboxia/T-Revision@b598cf2). The reweighting's lr per
epoch is PyTorch's MultiStepLR stepped as main.py steps it; the revision's optimiser is PyTorch's Adam step for step.
Two runs (1 epoch per stage, 40 mock examples, a tiny ResNet) go through the trainer under `tfds.testing.mock_data`
(random images with the real TFDS feature specs, nothing downloaded); the shrinking happens here, never in the config.
"""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import tensorflow_datasets as tfds
import torch

from experiments.configs import t_revision_paper
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.methods import t_revision
from noisy_jax.train import optim
import paper_config_checks

STEPS = math.ceil(45000 / 128)  # 352: only the epoch boundaries matter to the schedules

# Code main.py: dataset -> (network, n_epoch_estimate, the tools.fit filter (estimate_state)).
ROWS = {"cifar10": ("resnet18", 20, 97.0), "cifar100": ("resnet34", 15, None)}
VARIANTS = (
  [f"{d},symmetric,{r}" for d in ("cifar10", "cifar100") for r in (0.2, 0.5)]
  + [f"cifar10_n,{k}" for k in ("aggregate", "random1", "random2", "random3", "worst")]
  + ["cifar100_n,noisy"]
)
VARIANTS = VARIANTS + [v + ",original" for v in VARIANTS]


def _torch_lrs(lr, milestones, epochs):
  """main.py's reweighting lr per epoch: MultiStepLR(optimizer, milestones, 0.1), scheduler.step() before each epoch's
  training (main.py:240)."""
  optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr, momentum=0.9)
  scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=milestones, gamma=0.1)
  out = []
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "scheduler.step() before optimizer.step()": what main.py does
    for _ in range(epochs):
      scheduler.step()
      out.append(optimizer.param_groups[0]["lr"])
  return np.array(out)


@pytest.mark.parametrize("arg", VARIANTS)
def test_t_revision_paper_values(arg):
  parts = arg.split(",")
  dataset, original = parts[0], parts[-1] == "original"
  family = dataset.removesuffix("_n")
  network, warmup_epochs, percentile = ROWS[family]
  config = t_revision_paper.get_config(arg)
  # REFERENCE §13; code main.py (estimate_state, loss.py's detach in stage 2 only), tools.fit, tools.norm.
  assert config.method.to_dict() == {
    "name": "t_revision",
    "percentile": percentile,
    "shared_filter": original and percentile is not None,
    "transition_norm": "tools_norm" if original else "rows",
    "reweight_weight_gradient": "none",
    "revision_weight_gradient": "all",
    "accumulate_correction": original,
    "revision_weight_decay": 1e-4,
  }
  assert config.model.to_dict() == {"name": network, "kwargs": {}, "pretrained": "none"}
  assert config.batch_size == 128
  # Code tools.dataset_split (split_per 0.9), transformer.py (RandomCrop(32, padding=4), RandomHorizontalFlip).
  assert config.dataset == dataset and config.dataset_kwargs.validation_size == 5000
  assert config.augment.to_dict() == {"crop_padding": 4, "flip": True} and config.normalization == "per_channel"
  if dataset.endswith("_n"):
    assert config.noise.type == "dataset" and config.dataset_kwargs.noise_key == parts[1]
  else:
    assert config.noise.to_dict() == {"type": "symmetric", "rate": float(parts[2]), "exact": True, "dataset": ""}
  # Three stages; their epochs: code main.py n_epoch_estimate, n_epoch, n_epoch_revision.
  stages = t_revision.stages(config.method)
  assert [s.name for s in stages] == ["warmup", "reweight", "stage1"]
  epochs = [int(stages_lib.config_of_stage(config, s).num_epochs) for s in stages]
  assert epochs == [warmup_epochs, 200, 200] and stages_lib.total_epochs(config) == sum(epochs)
  # Warm-up: code main.py optimizer_es = SGD(lr 0.01, weight_decay 1e-4), no momentum, no scheduler.
  warmup = stages_lib.config_of_stage(config, stages[0]).optimizer
  assert (warmup.name, warmup.learning_rate, warmup.momentum, warmup.weight_decay, warmup.nesterov) == (
    "sgd",
    0.01,
    0.0,
    1e-4,
    False,
  )
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(warmup), STEPS, num_epochs=warmup_epochs)
  np.testing.assert_allclose([float(schedule(e * STEPS)) for e in range(warmup_epochs)], 0.01, rtol=1e-6)
  # Reweighting: code main.py optimizer = SGD(lr 0.01, momentum 0.9, weight_decay 1e-4), MultiStepLR([40, 80]).
  reweight = stages_lib.config_of_stage(config, stages[1]).optimizer
  assert (reweight.name, reweight.learning_rate, reweight.momentum, reweight.weight_decay) == ("sgd", 0.01, 0.9, 1e-4)
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(reweight), STEPS, num_epochs=200)
  lr = np.array([float(schedule(e * STEPS)) for e in range(200)])
  if original:  # the code's scheduler, stepped before each epoch: lr 0.001 from its 40th epoch (0-based 39)
    np.testing.assert_allclose(lr, _torch_lrs(0.01, [40, 80], 200), rtol=1e-6)
  else:  # the paper: divided by 10 after the 40th and the 80th epochs
    np.testing.assert_allclose(lr, [0.01 * 0.1 ** ((e >= 40) + (e >= 80)) for e in range(200)], rtol=1e-6)
  # Revision: the run's optimizer, Adam lr 5e-7 (code main.py optimizer_revision, --lr_revision), never decayed.
  assert config.optimizer.to_dict() == {
    "name": "coteaching_adam",
    "learning_rate": 5e-7,
    "decay_start": t_revision_paper.NO_DECAY,
    "beta1": 0.9,
    "beta1_after": 0.9,
  }
  num_classes = 100 if family == "cifar100" else 10
  context = spec_lib.Context(num_classes=num_classes, products={t_revision.TRANSITION: np.eye(num_classes)})
  assert registry.build(config.method, context).name == "t_revision"


def test_the_revisions_optimiser_is_pytorchs_adam():
  """The run's optimizer against torch.optim.Adam(lr=5e-7) step for step (its weight_decay=1e-4 is the method's
  revision_weight_decay, tests/test_t_revision_method.py), over more steps than one epoch."""
  config = t_revision_paper.get_config()
  steps_per_epoch, num_steps = 3, 10
  rng = np.random.default_rng(0)
  w0 = rng.normal(size=6)
  grads = rng.normal(size=(num_steps, 6)) * np.logspace(-3, 1, 6)
  weight = torch.tensor(w0, dtype=torch.float64, requires_grad=True)
  adam = torch.optim.Adam([weight], lr=5e-7)
  for g in grads:
    weight.grad = torch.tensor(g)
    adam.step()
  with jax.enable_x64(True):
    tx = optim.make_optimizer(
      settings_lib.optimizer_settings(config.optimizer), steps_per_epoch, int(config.num_epochs)
    )
    params = jnp.asarray(w0)
    state = tx.init(params)
    for g in grads:
      updates, state = tx.update(jnp.asarray(g), state, params)
      params = optax.apply_updates(params, updates)
  np.testing.assert_allclose(np.asarray(params) - w0, weight.detach().numpy() - w0, rtol=1e-9)


BAD = [
  ("svhn,symmetric,0.2", r"dataset 'svhn'.*allowed: cifar10, cifar100, cifar10_n, cifar100_n"),
  ("cifar10,symmetric", r"DATASET,symmetric,RATE\[,original\] or DATASET,LABELS\[,original\]"),
  ("cifar10,pairflip,0.45", r"noise 'pairflip'.*allowed: symmetric"),
  ("cifar10,symmetric,0.4", r"RATE '0.4'.*allowed: 0.2, 0.5"),
  ("cifar10,symmetric,0.2,orig", r"option 'orig'.*allowed: original"),
  ("cifar10_n,noisy", r"labels 'noisy' for cifar10_n.*allowed: aggregate, random1, random2, random3, worst"),
  ("cifar100_n,worst,original,x", r"must be DATASET,symmetric,RATE"),
]


@pytest.mark.parametrize("arg,message", BAD, ids=[a for a, _ in BAD])
def test_bad_strings_name_the_bad_part(arg, message):
  with pytest.raises(ValueError, match=message):
    t_revision_paper.get_config(arg)


def test_docstring_commands_and_default_load():
  paper_config_checks.check_docstring_commands(t_revision_paper)


def _tiny(arg):
  """1 epoch per stage of 2 steps of 16 on 40 mock examples (8 for validation), a ResNet of two 1-block stages."""
  config = t_revision_paper.get_config(arg)
  config.num_epochs = config.warmup.num_epochs = config.reweight.num_epochs = 1
  config.reweight.optimizer.lr_boundaries = ()
  config.batch_size = 16
  config.num_devices = 1
  config.checkpoint_every = 0
  config.dataset_kwargs.validation_size = 8
  config.model.kwargs = {"widths": (4, 8), "blocks_per_stage": (1, 1)}
  return config


@pytest.mark.parametrize("arg", ["cifar10,symmetric,0.5,original", "cifar100_n,noisy"])
def test_smoke(arg):
  """The code's options on mock CIFAR-10 (the shared filter, tools.norm, T + i dT), and CIFAR-100N's human labels
  without a filter: each stage one epoch; T is the warm-up's, [C, C]."""
  config = _tiny(arg)
  with tfds.testing.mock_data(num_examples=40):
    summary = runs.run_single(config, keep_arrays=True)
  assert [r["stage"] for r in summary["history"]] == ["warmup", "reweight", "stage1"]
  for record in summary["history"]:
    assert np.isfinite(record["train_loss"])
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0
  num_classes = 100 if arg.startswith("cifar100") else 10
  correction = summary["arrays"]["stage1"]["params"][t_revision.CORRECTION]
  assert correction.shape == (num_classes, num_classes) and np.all(np.isfinite(correction))
