"""DISC as a method (noisy_jax.methods.disc.method): one training step against the original's order of operations,
the epoch-end table update, the label evidence and the config refusals.

The reference step follows JackYFL/DISC@a21e910 algorithms/DISC.py (train, after the warm-up) literally: one forward
of torch.cat([w_imgs, s_imgs]), the CE / GCE loss of the clean and hard rows, then for each view Mixup.forward on
`x[weak_flag]`, a forward of that subset *alone* (its own BatchNorm statistics), the loss summed, one SGD step; the
BatchNorm running averages move at each of the three forwards. Here the subset forwards are literal (indexing, not
masks), so the step's masked passes (noisy_jax.models.masked_batch_norm) and its chaining of the running statistics
are checked against what the original computes. The mixup draws (lam, permutation) come from the step's key as the
method draws them; their distribution against the original's is tests/test_disc.py's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from noisy_jax import models
from noisy_jax.core import label_issues
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.methods import disc
from noisy_jax.methods import registry
from noisy_jax.train import state as state_lib
from noisy_jax.train import step as step_lib

N, C, B, LR = 24, 4, 8, 0.5


def _setup():
  rng = np.random.default_rng(3)
  noisy = rng.integers(0, C, N)
  model = models.get("mlp", num_classes=C, hidden_sizes=(6,))
  state = state_lib.create_train_state(model, jax.random.PRNGKey(0), (5,), optax.sgd(LR))
  method = disc.method(num_examples=N, start_epoch=2, lamd_h=0.5, mixup_alpha=5.0)
  table = label_table_lib.with_method_rows(label_table_lib.create(noisy, C), method.init_rows(None, N, C))
  rows = dict(table.method_rows)
  rows["disc_clean"] = jnp.asarray(rng.random(N) < 0.4)
  rows["disc_hard"] = jnp.asarray(~np.asarray(rows["disc_clean"]) & (rng.random(N) < 0.5))
  rows["disc_purified"] = jnp.asarray(np.asarray(rows["disc_clean"] | rows["disc_hard"]) | (rng.random(N) < 0.3))
  rows["disc_purified_labels"] = jnp.asarray(rng.integers(0, C, N), jnp.int32)
  table = label_table_lib.with_method_rows(table, rows)
  indices = jnp.asarray(rng.permutation(N)[:B])
  weak = jnp.asarray(rng.normal(size=(B, 5)), jnp.float32)
  strong = jnp.asarray(rng.normal(size=(B, 5)), jnp.float32)
  return model, state, method, table, indices, weak, strong, noisy


def _apply(model, params, stats, x):
  logits, updates = model.apply({"params": params, "batch_stats": stats}, x, train=True, mutable=["batch_stats"])
  return logits, updates["batch_stats"]


def _step(state, table, method, indices, weak, strong, *, epoch: int, key):
  """One compiled train_step of `method` on the batch (both views, every row valid), outside any device mapping."""
  step = lambda state, table: step_lib.train_step(
    state,
    table,
    weak,
    indices,
    jnp.ones(B, bool),
    method=method,
    epoch=jnp.int32(epoch),
    axis_name=None,
    strong_images=strong,
    method_key=key,
  )
  return jax.jit(step)(state, table)


def _mixup_draws(key, purified):
  """[(lam, index)] per view: the step's draws, index the original's randperm over the subset x[weak_flag]."""
  subset, draws = np.flatnonzero(purified), []
  for view in range(2):
    key_lam, key_perm = jax.random.split(jax.random.fold_in(key, view))
    partner = np.asarray(disc.subset_permutation(key_perm, jnp.asarray(purified)))
    draws.append((float(disc.mixup_lambda(key_lam, 5.0)), np.searchsorted(subset, partner[subset])))
  return draws


def _reference_loss(params, model, stats, table, indices, weak, strong, draws, *, lamd_h):
  """The original's loss_sup of one step after the warm-up, subsets indexed out and forwarded alone."""
  labels = jnp.asarray(table.noisy_labels)[indices]
  rows = {k: np.asarray(v)[np.asarray(indices)] for k, v in table.method_rows.items()}
  logits, stats = _apply(model, params, stats, jnp.concatenate([weak, strong]))
  w_logits, s_logits = logits[:B], logits[B:]

  def ce(z, y):
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(z), y[:, None], axis=1))

  def gce(z, y):
    p = jnp.clip(jnp.take_along_axis(jax.nn.softmax(z), y[:, None], axis=1), 1e-7, 1.0)
    return jnp.mean((1 - p**0.7) / 0.7)

  clean, hard, purified = rows["disc_clean"], rows["disc_hard"], rows["disc_purified"]
  loss = (ce(w_logits[clean], labels[clean]) + ce(s_logits[clean], labels[clean])) * clean.sum() / B
  loss += lamd_h * (gce(w_logits[hard], labels[hard]) + gce(s_logits[hard], labels[hard])) * hard.sum() / B
  subset = np.flatnonzero(purified)
  for x, (lam, index) in zip((weak, strong), draws):
    x_sub = x[subset]
    y_sub = jax.nn.one_hot(rows["disc_purified_labels"][subset], C)
    mixed_x = lam * x_sub + (1 - lam) * x_sub[index]
    mixed_y = lam * y_sub + (1 - lam) * y_sub[index]
    z, stats = _apply(model, params, stats, mixed_x)
    loss += -jnp.mean(jnp.sum(mixed_y * jax.nn.log_softmax(z), axis=1))
  return loss, stats


def test_one_step_after_the_warm_up_is_the_originals():
  model, state, method, table, indices, weak, strong, noisy = _setup()
  key = jax.random.PRNGKey(11)
  new_state, new_table, metrics = _step(state, table, method, indices, weak, strong, epoch=3, key=key)

  draws = _mixup_draws(key, np.asarray(table.method_rows["disc_purified"])[np.asarray(indices)])
  reference = lambda params: _reference_loss(
    params, model, state.batch_stats, table, indices, weak, strong, draws, lamd_h=0.5
  )  # the subsets and draws are concrete (NumPy): traced once, compiled as one program
  (want_loss, want_stats), want_grads = jax.jit(jax.value_and_grad(reference, has_aux=True))(state.params)
  np.testing.assert_allclose(float(metrics["loss"]) / B, float(want_loss), rtol=1e-5)
  want_params = jax.tree.map(lambda p, g: p - LR * g, state.params, want_grads)
  for got, want in zip(jax.tree.leaves(new_state.params), jax.tree.leaves(want_params)):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=1e-6)
  # the running averages moved three times: the step's pass, then each view's mixup pass of the purified rows
  for got, want in zip(jax.tree.leaves(new_state.batch_stats), jax.tree.leaves(want_stats)):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
  _, one_pass = _apply(model, state.params, state.batch_stats, jnp.concatenate([weak, strong]))
  assert not np.allclose(jax.tree.leaves(new_state.batch_stats)[0], jax.tree.leaves(one_pass)[0])

  # the batch's rows record each view's softmax; no other row and no other state moves in a step
  logits, _ = _apply(model, state.params, state.batch_stats, jnp.concatenate([weak, strong]))
  rows = new_table.method_rows
  np.testing.assert_allclose(rows["disc_w_probs"][indices], jax.nn.softmax(logits[:B]), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(rows["disc_s_probs"][indices], jax.nn.softmax(logits[B:]), rtol=1e-5, atol=1e-7)
  others = np.setdiff1d(np.arange(N), np.asarray(indices))
  assert float(jnp.abs(rows["disc_w_probs"][others]).max()) == 0.0
  for name in ("disc_clean", "disc_hard", "disc_purified", "disc_purified_labels", "disc_w_confidence"):
    np.testing.assert_array_equal(rows[name], table.method_rows[name])


def test_warm_up_step_is_cross_entropy_on_both_views_and_leaves_the_mixup_out():
  model, state, method, table, indices, weak, strong, noisy = _setup()
  # start_epoch 2: epochs 1 and 2 warm up
  new_state, _, metrics = _step(state, table, method, indices, weak, strong, epoch=2, key=jax.random.PRNGKey(1))
  labels = jnp.asarray(noisy)[indices]

  def loss_fn(params):
    logits, stats = _apply(model, params, state.batch_stats, jnp.concatenate([weak, strong]))
    log_p = jax.nn.log_softmax(logits)
    ce = -jnp.take_along_axis(log_p, jnp.concatenate([labels, labels])[:, None], axis=1)[:, 0]
    return jnp.mean(ce[:B]) + jnp.mean(ce[B:]), stats

  (want, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  np.testing.assert_allclose(float(metrics["loss"]) / B, float(want), rtol=1e-5)
  for got, g, p in zip(jax.tree.leaves(new_state.params), jax.tree.leaves(grads), jax.tree.leaves(state.params)):
    np.testing.assert_allclose(np.asarray(got), np.asarray(p - LR * g), rtol=2e-5, atol=1e-6)
  for got, w in zip(jax.tree.leaves(new_state.batch_stats), jax.tree.leaves(stats)):  # the empty mixup passes: no move
    np.testing.assert_allclose(np.asarray(got), np.asarray(w), rtol=1e-6, atol=1e-7)


def test_table_update_divides_and_label_evidence_is_the_mean_of_both_views():
  _, _, method, table, _, _, _, noisy = _setup()
  rng = np.random.default_rng(5)
  rows = dict(table.method_rows)
  rows["disc_w_probs"] = jax.nn.softmax(jnp.asarray(rng.normal(size=(N, C)) * 3, jnp.float32))
  rows["disc_s_probs"] = jax.nn.softmax(jnp.asarray(rng.normal(size=(N, C)) * 3, jnp.float32))
  table = label_table_lib.with_method_rows(table, rows)
  updated = jax.jit(lambda t: method.epoch_end.update(t, None, 1, t.num_examples))(table)
  want = disc.divide(
    rows["disc_w_probs"],
    rows["disc_s_probs"],
    noisy,
    rows["disc_w_confidence"],
    rows["disc_s_confidence"],
    rows["disc_purified_labels"],
    momentum=0.99,
  )
  for name, value in want._asdict().items():
    np.testing.assert_array_equal(np.asarray(updated.method_rows["disc_" + name]), np.asarray(value), err_msg=name)
  np.testing.assert_allclose(rows["disc_w_confidence"], 1.0 / N)  # the original's first thresholds
  assert tuple(method.init_rows(None, N, C)) == disc.ROWS  # the documented layout of the state
  np.testing.assert_array_equal(updated.soft_labels, table.soft_labels)  # DISC never relabels the table
  assert method.epoch_end.due(1) and method.epoch_end.reads == "nothing" and method.strong_view

  issues = label_issues.from_run(method, jax.device_get(updated))
  probs = (np.asarray(rows["disc_w_probs"], np.float64) + np.asarray(rows["disc_s_probs"], np.float64)) / 2
  order = np.asarray(issues.records["index"])
  np.testing.assert_allclose(issues.records["label_quality"], probs[order, noisy[order]], rtol=1e-6)


def test_registry_builds_disc_from_its_fields_and_refuses_bad_values():
  config = ml_collections.ConfigDict({"name": "disc", "start_epoch": 5, "momentum": 0.95, "lamd_h": 0.2})
  built = registry.make(config, num_classes=C, num_examples=N)
  assert built.name == "disc" and built.strong_view
  with pytest.raises(ValueError, match="num_examples=N"):
    registry.make(config, num_classes=C)
  for field, value in (("momentum", 1.5), ("start_epoch", -1), ("mixup_alpha", -1.0), ("gce_q", 0.0)):
    with pytest.raises(ValueError, match=field):
      registry.make(ml_collections.ConfigDict({"name": "disc", field: value}), num_classes=C, num_examples=N)
  with pytest.raises(ValueError, match="lamda"):
    registry.make(ml_collections.ConfigDict({"name": "disc", "lamda": 0.2}), num_classes=C, num_examples=N)
