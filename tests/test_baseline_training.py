"""The baselines trained by loop.fit: ELR and SOP (per-example state in the table's method rows) and Co-teaching
(two networks in one step). Each step is checked against a re-computation from the pure building blocks
(noisy_jax.methods.elr / sop / coteaching, themselves tested against the original code's formulas); 1 == N devices is in
test_multidevice.py, stop/resume in test_checkpoint.py, golden values in test_golden.py.
"""

import json
import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from noisy_jax import models
from noisy_jax.core import gmm
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import losses
from noisy_jax.experiment import export
from noisy_jax.experiment import inputs
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import sweep_grid
from noisy_jax.methods import coteaching
from noisy_jax.methods import dividemix_train
from noisy_jax.methods import elr
from noisy_jax.methods import registry
from noisy_jax.methods import sop
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import method as method_lib
from noisy_jax.train import optim
from noisy_jax.train import state as state_lib
from noisy_jax.train import step as step_lib

N, C, B = 40, 4, 16


def _setup(num_networks=1, seed=0):
  rng = np.random.default_rng(seed)
  images = jnp.asarray(rng.normal(size=(B, 5)), jnp.float32)
  indices = jnp.asarray(rng.permutation(N)[:B], jnp.int32)
  valid = jnp.asarray(np.arange(B) < B - 3)  # three padding rows
  labels = rng.integers(0, C, N)
  model = models.get("mlp", num_classes=C, hidden_sizes=(8,), bn_axis_name=None)
  tx = optim.make_optimizer(
    settings_lib.optimizer_settings(ml_collections.ConfigDict({"learning_rate": 0.1, "momentum": 0.0})), 1, 1
  )
  state = state_lib.create_train_state(model, jax.random.PRNGKey(3), (5,), tx, num_networks=num_networks)
  return model, state, label_table_lib.create(labels, C), images, indices, valid


def _logits(model, state, params, x):
  """Train-mode logits (BatchNorm on batch statistics) of `params` with `state`'s batch stats."""
  return model.apply({"params": params, "batch_stats": state.batch_stats}, x, train=True, mutable=["batch_stats"])[0]


def _sgd(params, grads, lr=0.1):
  return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def _close(a, b, tol=1e-6):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=tol, rtol=tol)


def test_elr_step_updates_targets_first_and_trains_on_them():
  model, state, table, images, indices, valid = _setup()
  method = elr.method(lam=3.0, beta=0.7)
  table = label_table_lib.with_method_rows(table, method.init_rows(None, N, C))
  old = jnp.asarray(np.random.default_rng(1).dirichlet(np.ones(C), N) * 0.5, jnp.float32)  # some history already
  table = table.replace(method_rows={"elr_targets": old})
  new_state, new_table, _ = step_lib.train_step(
    state, table, images, indices, valid, method=method, epoch=1, axis_name=None
  )
  labels = jax.nn.one_hot(table.noisy_labels[indices], C)
  logits = _logits(model, state, state.params, images)
  # The rows the original writes: beta t + (1 - beta) clamp(p) / sum, from this step's prediction; padding untouched.
  expected = elr.update_targets(old, jnp.where(valid, indices, N), jax.nn.softmax(logits), beta=0.7)
  _close(new_table.method_rows["elr_targets"], expected)
  untouched = np.setdiff1d(np.arange(N), np.asarray(indices)[np.asarray(valid)])
  np.testing.assert_array_equal(np.asarray(new_table.method_rows["elr_targets"])[untouched], np.asarray(old)[untouched])
  rows = expected[indices]

  def loss(params):  # the batch mean over the valid rows of CE + lam log(1 - <t, p>) with the updated rows
    z = _logits(model, state, params, images)
    per = elr.elr_loss(z, labels, rows, lam=3.0)
    return jnp.sum(per * valid) / jnp.sum(valid)

  _close(new_state.params, _sgd(state.params, jax.grad(loss)(state.params)))


def test_sop_step_trains_u_v_by_their_own_sgd():
  model, state, table, images, indices, valid = _setup()
  method = sop.method(lr_u=1.0, lr_v=10.0, init_std=0.3)
  table = label_table_lib.with_method_rows(table, method.init_rows(jax.random.PRNGKey(5), N, C))
  u0, v0 = table.method_rows["sop_u"], table.method_rows["sop_v"]
  new_state, new_table, _ = step_lib.train_step(
    state, table, images, indices, valid, method=method, epoch=1, axis_name=None
  )
  labels = jax.nn.one_hot(table.noisy_labels[indices], C)

  def loss(params, u_rows, v_rows):
    z = _logits(model, state, params, images)
    ce, mse = sop.sop_loss(z, labels, u_rows, v_rows)
    return jnp.sum((ce + mse) * valid) / jnp.sum(valid)

  g_params, g_u, g_v = jax.grad(loss, argnums=(0, 1, 2))(state.params, u0[indices], v0[indices])
  expected_u, expected_v = sop.sgd_update(u0, v0, (g_u, g_v), 1.0, 10.0, indices=jnp.where(valid, indices, N))
  _close(new_table.method_rows["sop_u"], expected_u)
  _close(new_table.method_rows["sop_v"], expected_v)
  assert float(jnp.max(jnp.abs(expected_v - v0))) > 1e-4  # v moved: the check is not trivial
  _close(new_state.params, _sgd(state.params, g_params))


@pytest.mark.parametrize("detach_v", [True, False])
def test_sop_balance_term_adds_its_gradient_and_reaches_v_only_when_asked(detach_v):
  model, state, table, images, indices, valid = _setup()
  method = sop.method(init_std=0.3, ratio_balance=0.1, balance_detach_v=detach_v)
  table = label_table_lib.with_method_rows(table, method.init_rows(jax.random.PRNGKey(5), N, C))
  u0, v0 = table.method_rows["sop_u"], table.method_rows["sop_v"]
  new_state, new_table, _ = step_lib.train_step(
    state, table, images, indices, valid, method=method, epoch=1, axis_name=None
  )
  labels = jax.nn.one_hot(table.noisy_labels[indices], C)

  def loss(params, u_rows, v_rows, balance=0.1):
    z = _logits(model, state, params, images)
    ce, mse = sop.sop_loss(z, labels, u_rows, v_rows)
    return jnp.sum((ce + mse) * valid) / jnp.sum(valid) + balance * sop.balance_loss(
      z, labels, u_rows, v_rows, detach_v=detach_v, where=valid
    )

  g_params, g_u, g_v = jax.grad(loss, argnums=(0, 1, 2))(state.params, u0[indices], v0[indices])
  expected_u, expected_v = sop.sgd_update(u0, v0, (g_u, g_v), 1.0, 10.0, indices=jnp.where(valid, indices, N))
  _close(new_table.method_rows["sop_v"], expected_v)
  _close(new_table.method_rows["sop_u"], expected_u)
  _close(new_state.params, _sgd(state.params, g_params))
  without = jax.grad(loss, argnums=2)(state.params, u0[indices], v0[indices], 0.0)
  # The balance term moves v only with detach_v=False (the original's sg(V) blocks it: its issue #5).
  assert (float(jnp.max(jnp.abs(g_v - without))) > 1e-6) == (not detach_v)


@pytest.mark.parametrize("member_map", ["loop", "vmap"])
@pytest.mark.parametrize("plus", [False, True])
def test_pair_step_equals_two_single_steps_with_exchanged_masks(member_map, plus):
  model, pair, table, images, indices, valid = _setup(num_networks=2)
  epoch = 3  # forget rate R(2) = 0.6 * 2 / 10 on the paper's ramp; Co-teaching+ from 0-based epoch 1
  method = coteaching.method(forget_rate=0.6, num_epochs=5, plus=plus, init_epoch=1)
  new_pair, _, metrics = step_lib.train_step(
    pair, table, images, indices, valid, method=method, epoch=epoch, axis_name=None, member_map=member_map
  )
  labels = jax.nn.one_hot(table.noisy_labels[indices], C)
  nets = [jax.tree.map(lambda x, m=m: x[m], pair) for m in range(2)]
  logits = [_logits(model, s, s.params, images) for s in nets]
  ce = [losses.cross_entropy(z, labels) for z in logits]
  rate = 0.6 * 2 / 10
  if plus:
    keep_1, keep_2 = coteaching.disagreement_selection(
      logits[0], logits[1], ce[0], ce[1], valid, rate, epoch=2, init_epoch=1
    )
  else:
    keep_1, keep_2 = coteaching.small_loss_selection(ce[0], ce[1], valid, rate)
  if not plus:
    assert int(jnp.sum(keep_1)) == int(np.floor((1 - rate) * int(jnp.sum(valid)) + 1e-6))
  for m, keep in enumerate((keep_1, keep_2)):  # network m alone, on its peer's selection
    single = method_lib.Method(
      name="fixed_mask",
      objective=method_lib.batch_objective(
        lambda z, y, w, v, a=None, keep=keep: coteaching.coteaching_loss(losses.cross_entropy(z, y), keep)
      ),
    )
    expected, _, _ = step_lib.train_step(
      nets[m], table, images, indices, valid, method=single, epoch=epoch, axis_name=None
    )
    _close(jax.tree.map(lambda x, m=m: x[m], new_pair.params), expected.params)
  assert float(metrics["count"]) == int(jnp.sum(valid))


def _digits_config(method, **overrides):
  from experiments.configs import base  # pylint: disable=import-outside-toplevel

  run = ml_collections.ConfigDict()
  run.method = method
  run.num_epochs = 3
  run.optimizer = base.optimizer(0.1)
  config = base.single(run)
  config.dataset = "digits"
  config.noise.rate = 0.3
  config.model.name = "mlp"
  config.model.kwargs = {"hidden_sizes": (32,)}
  config.checkpoint_every = 0
  for key, value in overrides.items():
    config[key] = value
  return config


def test_coteaching_run_exports_its_pair_and_the_export_predicts_as_the_run(tmp_path):
  optimizer = ml_collections.ConfigDict({"name": "coteaching_adam", "learning_rate": 1e-2, "decay_start": 2})
  config = _digits_config({"name": "coteaching", "forget_rate": 0.3, "num_gradual": 2}, optimizer=optimizer)
  summary = runs.run_single(config, str(tmp_path), keep_arrays=True)
  assert summary["method"] == "coteaching"
  assert summary["last_test_accuracy"] > 0.6  # 3 epochs of Adam on the digits, 30% noise
  params = summary["arrays"]["stage1"]["params"]
  assert all(np.shape(x)[0] == 2 for x in jax.tree.leaves(params))
  first = jax.tree.leaves(params)[0]
  assert float(np.max(np.abs(first[0] - first[1]))) > 1e-3  # two different networks
  loaded = export.load_model(str(tmp_path))
  assert loaded.info["variables"]["num_networks"] == 2
  dataset = inputs.load_dataset(config)
  accuracy = float(np.mean(np.argmax(loaded.predict(dataset.x_test), -1) == dataset.y_test))
  assert accuracy == pytest.approx(summary["last_test_accuracy"], abs=1e-6)
  assert os.path.exists(tmp_path / "label_issues.csv")
  assert json.loads((tmp_path / "summary.json").read_text())["method"] == "coteaching"


@pytest.mark.parametrize(
  "method", [{"name": "elr", "lam": 3.0, "beta": 0.7}, {"name": "sop", "lr_u": 1.0, "lr_v": 10.0, "init_std": 0.1}]
)
def test_row_state_methods_run_and_move_their_rows(method):
  summary = runs.run_single(_digits_config(method), keep_arrays=True)
  rows = summary["arrays"]["label_table"].method_rows
  assert set(rows) == ({"elr_targets"} if method["name"] == "elr" else {"sop_u", "sop_v"})
  assert summary["last_test_accuracy"] > 0.6
  if method["name"] == "elr":  # every example visited 3 times: its target sums to 1 - beta^3
    np.testing.assert_allclose(np.sum(np.asarray(rows["elr_targets"]), -1), 1 - 0.7**3, rtol=1e-5)
  else:
    assert float(np.max(np.abs(np.asarray(rows["sop_v"])))) > 0.11  # grew from N(0, 0.1^2) draws


def test_bad_baseline_configs_are_refused_by_name():
  with pytest.raises(ValueError, match="forget_rate"):
    registry.make(ml_collections.ConfigDict({"name": "coteaching"}), num_classes=3, num_epochs=5)
  with pytest.raises(ValueError, match="num_epochs"):
    registry.make(ml_collections.ConfigDict({"name": "coteaching", "forget_rate": 0.2}), num_classes=3)
  with pytest.raises(ValueError, match="Unknown field"):
    registry.make(ml_collections.ConfigDict({"name": "elr", "lambda": 3.0}), num_classes=3)
  with pytest.raises(ValueError, match="beta"):
    elr.method(beta=1.5)
  with pytest.raises(ValueError, match="lr_v"):
    sop.method(lr_v=-1.0)
  with pytest.raises(ValueError, match="optimizer name"):
    optim.make_optimizer(
      settings_lib.optimizer_settings(ml_collections.ConfigDict({"name": "adamw", "learning_rate": 0.1})), 1, 1
    )
  config = _digits_config({"name": "elr", "lam": 3.0, "beta": 0.7})
  config.sweep = ml_collections.ConfigDict({"grid": (), "seeds": (0, 1)})
  with pytest.raises(ValueError, match="comparison config"):
    sweep_grid.check_sweep(config)


# ---------------------------------------------------------------------------------------------------------------
# DivideMix


def test_dividemix_division_equals_the_building_blocks():
  from noisy_jax.methods import dividemix as dm  # pylint: disable=import-outside-toplevel

  rng = np.random.default_rng(0)
  labels = rng.integers(0, C, N)
  table = label_table_lib.with_method_rows(label_table_lib.create(labels, C), dividemix_train.init_rows(N, 2))
  probs = [jnp.asarray(rng.dirichlet(np.ones(C) * 0.5, (2, N)), jnp.float32) for _ in range(2)]
  # Two boundaries with a 2-epoch window (warm_up 3: after epochs 3 and 4): the second GMM fits the mean of both.
  first = dividemix_train.divide(table, probs[0], epoch=3, warm_up=3, window=2, num_examples=N)
  second = dividemix_train.divide(first, probs[1], epoch=4, warm_up=3, window=2, num_examples=N)
  for m in range(2):
    norm = [dm.normalize_losses(-jnp.log(p[m, np.arange(N), labels])) for p in probs]
    np.testing.assert_allclose(
      first.method_rows[dividemix_train.CLEAN_PROB][:, m], gmm.fit_two_component_gmm(norm[0]).clean_prob, atol=1e-6
    )
    np.testing.assert_allclose(
      second.method_rows[dividemix_train.CLEAN_PROB][:, m],
      gmm.fit_two_component_gmm((norm[0] + norm[1]) / 2).clean_prob,
      atol=1e-6,
    )
  assert float(jnp.std(second.method_rows[dividemix_train.CLEAN_PROB])) > 0.05  # a real split


def test_dividemix_step_equals_a_recomputation_from_the_building_blocks():
  """One step of network 1 (m = 0) on one device, no augmentation (both views equal): co-refined and co-guessed
  targets, MixMatch with the step's key, Lx + ramp lambda_u Lu + penalty, BatchNorm statistics moved by each of
  network 1's train-mode passes; network 2 unchanged."""
  from noisy_jax.methods import dividemix as dm  # pylint: disable=import-outside-toplevel

  model, pair, _, _, _, _ = _setup(num_networks=2)
  rng = np.random.default_rng(1)
  images = jnp.asarray(rng.normal(size=(N, 5)), jnp.float32)
  labels = rng.integers(0, C, N)
  settings = dividemix_train.DividemixSettings(warm_up=1, lambda_u=25.0)
  table = label_table_lib.with_method_rows(label_table_lib.create(labels, C), dividemix_train.init_rows(N, 1))
  clean = jnp.asarray(rng.random((N, 2)), jnp.float32)
  table = table.replace(method_rows={**table.method_rows, dividemix_train.CLEAN_PROB: clean})
  mesh = mesh_lib.make_mesh(1)
  epoch_fn = dividemix_train.make_epoch_fn(mesh, settings=settings, batch_size=8, num_examples=N, warmup_epoch_fn=None)
  key = jax.random.PRNGKey(4)
  new_pair, _, _ = epoch_fn(jax.tree.map(jnp.copy, pair), table, images, key, jnp.int32(3))
  # What the epoch does first for network 1: labelled = network 2's w > 0.5, the first full batch of each order.
  labelled = np.asarray(clean[:, 1] > 0.5)
  rows_l, rows_u = dividemix_train._orders(
    jax.random.fold_in(key, 0),
    jnp.asarray(labelled),  # pylint: disable=protected-access
    int(labelled.sum()) // 4,
    int((~labelled).sum()),
    4,
  )
  assert set(np.asarray(rows_l).ravel()) <= set(np.nonzero(labelled)[0])
  assert set(np.asarray(rows_u).ravel()) <= set(np.nonzero(~labelled)[0])
  own, other = (jax.tree.map(lambda x, m=m: x[m], pair) for m in range(2))
  state = own
  num_iter = int(labelled.sum()) // 4 + 1

  def forward(params, stats, inputs):
    z, upd = model.apply({"params": params, "batch_stats": stats}, inputs, train=True, mutable=["batch_stats"])
    return z, upd["batch_stats"]

  @jax.jit
  def one_step(state, x, u, y, w, mix_key, lamb):  # jitted: op by op, these steps took ~30 s
    stats = state.batch_stats
    z_u1, stats = forward(state.params, stats, u)
    z_u2, stats = forward(state.params, stats, u)
    z_o = model.apply({"params": other.params, "batch_stats": other.batch_stats}, u, train=False)
    z_x1, stats = forward(state.params, stats, x)
    z_x2, stats = forward(state.params, stats, x)
    sm = jax.nn.softmax
    t_x = dm.refine_labels(y, w, (sm(z_x1) + sm(z_x2)) / 2)
    t_u = dm.co_guess(jnp.stack([sm(z_u1), sm(z_u2)]), jnp.stack([sm(z_o), sm(z_o)]))
    mixed, mixed_t = dm.mixmatch(x, x, u, u, t_x, t_u, mix_key)

    def loss(params):
      z, new_stats = forward(params, stats, mixed)
      lx, lu = dm.losses_x_u(z[:8], mixed_t[:8], z[8:], mixed_t[8:])
      return lx + lamb * lu + dm.uniform_prior_penalty(z), new_stats

    grads, new_stats = jax.grad(loss, has_aux=True)(state.params)
    return state.apply_gradients(grads=grads, batch_stats=new_stats)

  for step in range(int(labelled.sum()) // 4):
    x, u = images[rows_l[step]], images[rows_u[step]]
    y = jax.nn.one_hot(labels[np.asarray(rows_l[step])], C)
    w = clean[rows_l[step], 1]
    step_key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(key, dividemix_train.AUGMENT_STREAM), 0), step)
    mix_key = jax.random.split(step_key, 5)[4]
    lamb = dm.linear_rampup(2.0 + step / num_iter, 1, lambda_u=25.0)
    state = one_step(state, x, u, y, w, mix_key, jnp.float32(lamb))
  _close(jax.tree.map(lambda x: x[0], new_pair.params), state.params, tol=1e-5)
  _close(jax.tree.map(lambda x: x[0], new_pair.batch_stats), state.batch_stats, tol=1e-5)
  assert int(np.asarray(new_pair.step)[0]) == int(own.step) + int(labelled.sum()) // 4


def test_dividemix_run_divides_after_its_warm_up_and_beats_chance():
  config = _digits_config({"name": "dividemix", "warm_up": 1, "lambda_u": 25.0, "p_threshold": 0.5})
  config.batch_size = 32
  summary = runs.run_single(config, keep_arrays=True)
  clean = np.asarray(summary["arrays"]["label_table"].method_rows["dividemix_clean_prob"])
  assert clean.shape[1] == 2 and 0.05 < float(np.mean(clean > 0.5)) < 0.95  # a split, not all or nothing
  dataset = inputs.load_dataset(config)
  noisy = np.asarray(summary["arrays"]["label_table"].noisy_labels)
  right = noisy == np.asarray(dataset.y_train)
  for m in range(2):  # the examples a network calls clean are mostly the correctly labelled ones (70% here)
    assert right[clean[:, m] > 0.5].mean() > 0.9
  assert summary["last_test_accuracy"] > 0.7


def test_dividemix_epoch_trains_every_step_at_the_epochs_learning_rate():
  """An epoch with more steps (32 labelled rows: 8 batches of 4) than the schedule's steps per epoch (ceil(40 / 8)
  = 5): a piecewise schedule that decays at the next epoch must not decay inside this one."""

  model = models.get("mlp", num_classes=C, hidden_sizes=(8,), bn_axis_name=None)
  rng = np.random.default_rng(2)
  images = jnp.asarray(rng.normal(size=(N, 5)), jnp.float32)
  table = label_table_lib.with_method_rows(
    label_table_lib.create(rng.integers(0, C, N), C), dividemix_train.init_rows(N, 1)
  )
  clean = np.full((N, 2), 0.1, np.float32)
  clean[:32] = 0.9
  table = table.replace(method_rows={**table.method_rows, dividemix_train.CLEAN_PROB: jnp.asarray(clean)})
  epoch_fn = dividemix_train.make_epoch_fn(
    mesh_lib.make_mesh(1),
    settings=dividemix_train.DividemixSettings(warm_up=1),
    batch_size=8,
    num_examples=N,
    warmup_epoch_fn=None,
  )
  finals = []
  for boundaries in ((), (3,)):
    tx = optim.make_optimizer(
      settings_lib.optimizer_settings(ml_collections.ConfigDict({"learning_rate": 0.1, "lr_boundaries": boundaries})),
      5,
      4,
    )
    pair = state_lib.create_train_state(model, jax.random.PRNGKey(3), (5,), tx, num_networks=2)
    finals.append(epoch_fn(pair, table, images, jax.random.PRNGKey(4), jnp.int32(3))[0].params)
  _close(finals[0], finals[1], tol=0.0)
