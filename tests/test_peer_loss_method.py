"""Peer loss as a method (noisy_jax.methods.peer_loss): one whole epoch against a plain JAX re-computation of its
steps, the epoch's alpha, and its settings' checks."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from experiments.configs import tiny
from noisy_jax import models
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import peer_loss as peer_core
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import peer_loss
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import optim
from noisy_jax.train import state as state_lib

NUM_EXAMPLES, NUM_CLASSES, BATCH = 44, 4, 8  # 6 steps, the last with 4 padding rows
SHAPE = (4, 4, 1)
RUN_EPOCHS = 60


def _augment(key, x, rows):
  """A view: x plus N(0, 0.1^2) noise (the rows are not read)."""
  del rows
  return x + 0.1 * jax.random.normal(key, x.shape, x.dtype)


def _model(bn_axis_name="batch"):
  kwargs = {} if bn_axis_name == "batch" else {"bn_axis_name": None}
  return models.build("mlp", NUM_CLASSES, SHAPE, kwargs={"hidden_sizes": (6,)}, **kwargs)


def _run_epoch(settings, images, given, epoch):
  mesh = mesh_lib.make_mesh(1)
  config = ml_collections.ConfigDict(
    {"learning_rate": 0.1, "momentum": 0.9, "weight_decay": 0.01, "lr_boundaries": (25,)}
  )
  steps = -(-NUM_EXAMPLES // BATCH)
  tx = optim.make_optimizer(settings_lib.optimizer_settings(config), steps, RUN_EPOCHS)
  state = state_lib.create_train_state(_model(), jax.random.PRNGKey(3), SHAPE, tx)
  table = label_table_lib.create(jnp.asarray(given), NUM_CLASSES)
  epoch_fn = peer_loss.make_epoch_fn(
    mesh, settings=settings, batch_size=BATCH, num_examples=NUM_EXAMPLES, augment=_augment
  )
  start = jax.tree.map(np.asarray, state_lib.variables_of(state))
  key = jax.random.PRNGKey(7)
  out = epoch_fn(
    mesh_lib.replicate(state, mesh),
    mesh_lib.replicate(table, mesh),
    mesh_lib.replicate(jnp.asarray(images), mesh),
    key,
    jnp.asarray(epoch, jnp.int32),
  )
  return start, key, out


def _reference_loss(model, stats, x, x_peer, y, y_peer, valid, alpha):
  """One step's loss in plain JAX: two train-mode forwards, CE(x, y) - alpha CE(x', y'), mean over valid rows."""
  apply = lambda p, s, v: model.apply({"params": p, "batch_stats": s}, v, train=True, mutable=["batch_stats"])

  def loss(params):
    z, upd = apply(params, stats, x)
    z_peer, upd = apply(params, upd["batch_stats"], x_peer)
    ce = -jnp.take_along_axis(jax.nn.log_softmax(z), y[:, None], axis=1)[:, 0]
    ce_peer = -jnp.take_along_axis(jax.nn.log_softmax(z_peer), y_peer[:, None], axis=1)[:, 0]
    per_example = ce - alpha * ce_peer
    return jnp.sum(valid * per_example) / jnp.sum(valid), upd["batch_stats"]

  return loss


@pytest.mark.parametrize("epoch", [30])
def test_one_epoch_is_the_peer_steps_recomputed_plainly(epoch):
  rng = np.random.default_rng(4)
  images = rng.normal(size=(NUM_EXAMPLES, *SHAPE)).astype(np.float32)
  given = rng.integers(0, NUM_CLASSES, NUM_EXAMPLES)
  settings = peer_loss.PeerLossSettings(alpha="sparse")
  start, key, (state, _, metrics) = _run_epoch(settings, images, given, epoch)
  alpha = peer_core.alpha_at(epoch - 1, "sparse")
  assert alpha > 0 and float(metrics["peer_alpha"]) == alpha
  model = _model(bn_axis_name=None)
  params, stats = jax.tree.map(jnp.asarray, start["params"]), jax.tree.map(jnp.asarray, start["batch_stats"])
  sgd = optax.chain(optax.add_decayed_weights(0.01), optax.sgd(0.01, momentum=0.9))  # loop epoch 29: past 25
  opt_state = sgd.init(params)
  order, valid = epoch_lib.epoch_batches(key, NUM_EXAMPLES, BATCH)
  order, valid = np.asarray(order), np.asarray(valid, np.float32)
  assert valid[-1].sum() == NUM_EXAMPLES - (order.shape[0] - 1) * BATCH
  losses, counts = [], []
  for step in range(order.shape[0]):
    peer_key = jax.random.fold_in(jax.random.fold_in(key, peer_loss.PEER_STREAM), step)
    n1 = jax.random.randint(jax.random.fold_in(peer_key, 0), (BATCH,), 0, NUM_EXAMPLES)
    n2 = jax.random.randint(jax.random.fold_in(peer_key, 1), (BATCH,), 0, NUM_EXAMPLES)
    x = _augment(epoch_lib.augmentation_key(key, step), jnp.asarray(images[order[step]]), None)
    x_peer = _augment(jax.random.fold_in(peer_key, peer_loss.PEER_AUGMENT_STREAM), jnp.asarray(images[n1]), None)
    loss = _reference_loss(
      model, stats, x, x_peer, jnp.asarray(given[order[step]]), jnp.asarray(given[n2]), valid[step], alpha
    )
    (value, stats), grads = jax.value_and_grad(loss, has_aux=True)(params)
    updates, opt_state = sgd.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    losses.append(float(value) * valid[step].sum())
    counts.append(valid[step].sum())
  for got, want in zip(jax.tree.leaves(state.params), jax.tree.leaves(params), strict=True):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  for got, want in zip(jax.tree.leaves(state.batch_stats), jax.tree.leaves(stats), strict=True):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(float(metrics["train_loss"]), sum(losses) / sum(counts), rtol=1e-5)
  assert not np.allclose(state.params["Dense_1"]["kernel"], start["params"]["Dense_1"]["kernel"])


def test_the_epochs_alpha_follows_the_setting():
  for setting in ("sparse", "uniform"):
    for loop_epoch in (0, 19, 20, 45, 400):
      settings = peer_loss.PeerLossSettings(alpha=setting, epochs_before=2)
      assert peer_loss.epoch_alpha(settings, loop_epoch) == peer_core.alpha_at(loop_epoch, setting)
  assert peer_loss.epoch_alpha(peer_loss.PeerLossSettings(alpha=0.25), 3) == 0.25


def test_the_method_is_registered_with_its_own_program():
  assert registry.get("peer_loss") is peer_loss.SPEC and "peer_loss" in registry.tiny_cases()
  config = ml_collections.ConfigDict({"name": "peer_loss", "alpha": "uniform", "log_epsilon": 1e-5})
  built = registry.build(config, spec_lib.Context(num_classes=3, num_epochs=10))
  assert built.name == "peer_loss" and built.program.own


@pytest.mark.parametrize(
  "field, value",
  [("alpha", "dense"), ("alpha", -0.5), ("log_epsilon", -1e-3), ("log_epsilon", 2.0), ("epochs_before", -1)],
)
def test_bad_settings_raise_naming_the_value(field, value):
  settings = peer_loss.PeerLossSettings(**{field: value})
  with pytest.raises(ValueError, match=f"{value!r}"):
    peer_loss.method(settings)


def test_a_config_typo_and_inputs_that_are_not_resident_are_refused():
  with pytest.raises(ValueError, match="'dense'"):
    registry.build(ml_collections.ConfigDict({"name": "peer_loss", "alpha": "dense"}), spec_lib.Context(num_classes=3))
  with pytest.raises(ValueError, match="Unknown field"):
    registry.build(ml_collections.ConfigDict({"name": "peer_loss", "warmup": 1}), spec_lib.Context(num_classes=3))
  mesh, settings = mesh_lib.make_mesh(1), peer_loss.PeerLossSettings()
  with pytest.raises(ValueError, match="streamed"):
    peer_loss.make_epoch_fn(mesh, settings=settings, batch_size=BATCH, num_examples=NUM_EXAMPLES, source=object())
  epoch_fn = peer_loss.make_epoch_fn(mesh, settings=settings, batch_size=BATCH, num_examples=NUM_EXAMPLES)
  table = label_table_lib.create(jnp.zeros(NUM_EXAMPLES, jnp.int32), NUM_CLASSES)
  with pytest.raises(ValueError, match="resident"):
    epoch_fn(None, table, None, jax.random.PRNGKey(0), 1)


def test_the_tiny_run_trains_its_three_epochs():
  summary = runs.run_single(tiny.get_config("peer_loss"))
  assert [r["epoch"] for r in summary["history"]] == [1, 2, 3]
  assert all(np.isfinite(r["train_loss"]) and r["peer_alpha"] == 0.5 for r in summary["history"])
  assert summary["method"] == "peer_loss" and summary["last_test_accuracy"] > 0.5
