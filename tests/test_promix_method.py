"""ProMix as a method: the pseudo head, the epoch-boundary selection from the networks' predictions and the run's
configuration errors (its blocks: tests/test_promix.py; its whole tiny run: the golden, stop/resume and 1 == 4
device tests through the registry)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from experiments.configs import tiny
from noisy_jax import models
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import promix
from noisy_jax.methods import promix_train
from noisy_jax.methods import registry
from noisy_jax.train import optim
from noisy_jax.train import state as state_lib


def _model(pseudo_head: bool, num_classes: int = 5):
  kwargs = {"hidden_sizes": (16,), "pseudo_head": pseudo_head}
  return models.build("mlp", num_classes, (6, 6, 1), kwargs=kwargs, bn_axis_name=None)


def test_pseudo_head_is_the_second_half_of_a_model_with_twice_the_outputs():
  model = _model(True)
  x = jax.random.normal(jax.random.key(0), (4, 6, 6, 1))
  variables = model.init(jax.random.key(1), x, train=False)
  primary = model.apply(variables, x, train=False)
  both = model.apply(variables, x, train=False, pseudo_head=True)
  base = models.get("mlp", num_classes=10, hidden_sizes=(16,), bn_axis_name=None)
  whole = base.apply({collection: tree["base"] for collection, tree in variables.items()}, x, train=False)
  assert primary.shape == (4, 5)
  np.testing.assert_array_equal(primary, whole[:, :5])
  np.testing.assert_array_equal(both[0], whole[:, :5])
  np.testing.assert_array_equal(both[1], whole[:, 5:])
  assert not np.allclose(both[0], both[1])  # two classifiers, initialised independently


def test_priors_need_the_pseudo_head():
  tx = optim.make_optimizer(settings_lib.optimizer_settings(ml_collections.ConfigDict({"learning_rate": 0.1})), 1, 1)
  plain = state_lib.create_train_state(_model(False), jax.random.key(0), (6, 6, 1), tx, num_networks=2)
  with pytest.raises(ValueError, match=r"pseudo_head=True"):
    promix_train.with_priors(plain, 5)
  headed = state_lib.create_train_state(_model(True), jax.random.key(0), (6, 6, 1), tx, num_networks=2)
  priors = promix_train.with_priors(headed, 5).method_state
  np.testing.assert_array_equal(priors["reliable"], np.full((2, 5), 0.2, np.float32))
  np.testing.assert_array_equal(priors["unreliable"], np.full((2, 5), 0.2, np.float32))


def test_member_update_selects_each_networks_small_losses_per_class_with_the_epochs_budget():
  """The selection after epoch k uses rho of e = k (the budget ceil(rho N / C)), each network its own losses, the
  padding rows of a sharded table never."""
  rng = np.random.default_rng(0)
  n, rows, c = 40, 44, 4
  labels = np.concatenate([rng.integers(0, c, n), np.zeros(rows - n, int)])
  probs = rng.dirichlet(np.ones(c), size=(2, rows))
  settings = promix_train.ProMixSettings(pretrain_ep=1, warmup_ep=4, rho_start=0.2, rho_end=0.6)
  method = promix_train.method(settings, num_classes=c, num_epochs=10)
  table = label_table_lib.create(labels, c)
  table = label_table_lib.with_method_rows(table, promix_train.init_rows(rows))
  for epoch in (1, 2, 6):
    out = method.epoch_end.update(table, jnp.asarray(probs), jnp.asarray(epoch), num_examples=n)
    selected = np.asarray(out.method_rows[promix_train.SELECTED])
    assert not selected[n:].any()
    rho = 0.2 + (0.6 - 0.2) * min(epoch / 4, 1)  # the original's arithmetic, in doubles
    budget = int(np.ceil(n * (1.0 / c) * rho))
    for m in range(2):
      for j in range(c):
        members = np.flatnonzero(labels[:n] == j)
        chosen = members[np.argsort(-probs[m, members, j], kind="stable")][: max(min(budget, members.size), 1)]
        np.testing.assert_array_equal(np.flatnonzero(selected[:n, m] & (labels[:n] == j)), np.sort(chosen))
  assert method.epoch_end.due(1) and not method.epoch_end.due(0) and method.epoch_end.reads == "members"


def test_the_run_refuses_promix_without_a_strong_view_or_pseudo_head(tmp_path):
  from noisy_jax.experiment import runs  # pylint: disable=g-import-not-at-top

  config = tiny.get_config("promix")
  config.augment.strong = None
  with pytest.raises(ValueError, match=r"config.augment.strong"):
    runs.run_single(config, workdir=str(tmp_path / "a"))
  config = tiny.get_config("promix")
  config.model.kwargs = {"hidden_sizes": (64,)}
  with pytest.raises(ValueError, match=r"pseudo_head=True"):
    runs.run_single(config, workdir=str(tmp_path / "b"))


def test_registry_builds_promix_from_its_fields_and_names_bad_ones():
  config = ml_collections.ConfigDict({"name": "promix", "tau": 0.95, "pretrain_ep": 30})
  method = registry.make(config, num_classes=10, num_epochs=601, num_examples=100)
  assert method.num_networks == 2 and method.strong_view and method.program.own
  with pytest.raises(ValueError, match=r"tau"):
    registry.make(ml_collections.ConfigDict({"name": "promix", "tau": 1.5}), num_classes=10, num_epochs=5)
  with pytest.raises(ValueError, match=r"fmix_spectrum"):
    registry.make(ml_collections.ConfigDict({"name": "promix", "fmix_spectrum": "x"}), num_classes=10, num_epochs=5)
  with pytest.raises(ValueError, match=r"num_epochs"):
    registry.make(ml_collections.ConfigDict({"name": "promix"}), num_classes=10)
  assert promix.css_budget(50000, 10, 0.7) == 3500


def test_promix_epochs_train_full_batches_of_a_fresh_order():
  """N // B full batches of distinct rows, the last partial batch dropped (the original's drop_last), and the order
  the epoch's key gives."""
  indices, valid = promix_train.full_batches(jax.random.key(3), 103, 16)
  assert indices.shape == (6, 16) and bool(np.all(valid))
  rows = np.asarray(indices).ravel()
  assert len(set(rows.tolist())) == 96 and rows.max() < 103
  np.testing.assert_array_equal(rows, np.asarray(jax.random.permutation(jax.random.key(3), 103))[:96])


def test_own_epoch_programs_refuse_to_resume_inside_an_epoch():
  from noisy_jax.train import pair_epochs  # pylint: disable=g-import-not-at-top

  pair_epochs.refuse_inside_epoch("ProMix", {})  # whole epochs: nothing to refuse
  with pytest.raises(ValueError, match=r"ProMix's epoch does not resume inside an epoch \(\['start'\]\)"):
    pair_epochs.refuse_inside_epoch("ProMix", {"start": 3})
