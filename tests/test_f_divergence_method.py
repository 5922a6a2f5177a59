"""The f-divergence method (noisy_jax.methods.f_divergence): one whole epoch against a plain JAX re-computation of its
steps (peer loss's program with the f-divergence pair loss), its stages, its settings' checks and its tiny runs."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from experiments.configs import tiny
from noisy_jax import models
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import f_divergence
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

# -g(v) and f*(g(v)) written out from CIFAR-10/runner.py:78-86 (activation(x) = -mean g, conjugate(x) = -mean f*).
PLAIN_PAIRS = {
  "Total-Variation": (lambda v: -jnp.tanh(v) / 2.0, lambda v: jnp.tanh(v) / 2.0),
  "Jenson-Shannon": (
    lambda v: jnp.log(1.0 + jnp.exp(-v)) - jnp.log(2.0),
    lambda v: v + jnp.log(1.0 + jnp.exp(-v)) - jnp.log(2.0),
  ),
}


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
  epoch_fn = f_divergence.method(settings).program.build(
    mesh, None, batch_size=BATCH, num_examples=NUM_EXAMPLES, augment=_augment
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


def _reference_loss(model, stats, x, x_peer, y, y_peer, valid, divergence, eps):
  """One step's loss in plain JAX: two train-mode forwards, -g(p_y(x)) + f*(g(p_y'(x'))), mean over valid rows."""
  apply = lambda p, s, v: model.apply({"params": p, "batch_stats": s}, v, train=True, mutable=["batch_stats"])
  minus_g, conj = PLAIN_PAIRS[divergence]

  def loss(params):
    z, upd = apply(params, stats, x)
    z_peer, upd = apply(params, upd["batch_stats"], x_peer)
    v = jnp.take_along_axis(jax.nn.softmax(z), y[:, None], axis=1)[:, 0] + eps
    v_peer = jnp.take_along_axis(jax.nn.softmax(z_peer), y_peer[:, None], axis=1)[:, 0] + eps
    per_example = minus_g(v) + conj(v_peer)
    return jnp.sum(valid * per_example) / jnp.sum(valid), upd["batch_stats"]

  return loss


@pytest.mark.parametrize("divergence, eps", [("Total-Variation", 0.0), ("Jenson-Shannon", 1e-5)])
def test_one_epoch_is_the_steps_recomputed_plainly(divergence, eps):
  """Epoch 30 of the stage (schedule count 29 x 6 + s: past the boundary at 25): parameters, BatchNorm statistics
  and the epoch's mean loss equal six plain steps with the same peer rows and views."""
  epoch = 30
  rng = np.random.default_rng(4)
  images = rng.normal(size=(NUM_EXAMPLES, *SHAPE)).astype(np.float32)
  given = rng.integers(0, NUM_CLASSES, NUM_EXAMPLES)
  settings = f_divergence.FDivergenceSettings(divergence=divergence, prob_epsilon=eps)
  start, key, (state, _, metrics) = _run_epoch(settings, images, given, epoch)
  assert "peer_alpha" not in metrics
  model = _model(bn_axis_name=None)
  params, stats = jax.tree.map(jnp.asarray, start["params"]), jax.tree.map(jnp.asarray, start["batch_stats"])
  sgd = optax.chain(optax.add_decayed_weights(0.01), optax.sgd(0.01, momentum=0.9))
  opt_state = sgd.init(params)
  order, valid = epoch_lib.epoch_batches(key, NUM_EXAMPLES, BATCH)
  order, valid = np.asarray(order), np.asarray(valid, np.float32)
  losses, counts = [], []
  for step in range(order.shape[0]):
    peer_key = jax.random.fold_in(jax.random.fold_in(key, peer_loss.PEER_STREAM), step)
    n1 = jax.random.randint(jax.random.fold_in(peer_key, 0), (BATCH,), 0, NUM_EXAMPLES)
    n2 = jax.random.randint(jax.random.fold_in(peer_key, 1), (BATCH,), 0, NUM_EXAMPLES)
    x = _augment(epoch_lib.augmentation_key(key, step), jnp.asarray(images[order[step]]), None)
    x_peer = _augment(jax.random.fold_in(peer_key, peer_loss.PEER_AUGMENT_STREAM), jnp.asarray(images[n1]), None)
    loss = _reference_loss(
      model,
      stats,
      x,
      x_peer,
      jnp.asarray(given[order[step]]),
      jnp.asarray(given[n2]),
      valid[step],
      divergence,
      eps,
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


def test_the_batch_loss_is_the_valid_rows_mean_of_the_pair_loss():
  rng = np.random.default_rng(1)
  z, zp = (jnp.asarray(rng.normal(size=(6, 5)), jnp.float32) for _ in range(2))
  y, yp = (jax.nn.one_hot(rng.integers(0, 5, 6), 5) for _ in range(2))
  valid = jnp.asarray([True] * 4 + [False] * 2)
  settings = f_divergence.FDivergenceSettings(divergence="Pearson")
  got = f_divergence.batch_loss(z, y, zp, yp, valid, settings=settings)
  v = jnp.sum(y * jax.nn.softmax(z), -1)
  vp = jnp.sum(yp * jax.nn.softmax(zp), -1)
  want = jnp.mean((-v + vp * vp / 4.0 + vp)[:4])
  np.testing.assert_allclose(float(got), float(want), rtol=1e-6)


def test_stages_are_the_warmup_then_the_method_from_its_best_network():
  config = ml_collections.ConfigDict({"name": "f_divergence"})
  warmup, own = f_divergence.stages(config)
  assert (warmup.name, warmup.config_section, warmup.network, warmup.build is not None) == (
    "warmup",
    "warmup",
    "fresh",
    True,
  )
  assert (own.name, own.network, own.build, own.delivers, own.scores_labels) == (
    "stage1",
    "previous_best",
    None,
    True,
    True,
  )
  config.warmup_start = "final"
  assert f_divergence.stages(config)[1].network == "previous_final"
  config.warmup = False
  assert f_divergence.stages(config) == (spec_lib.OWN_STAGE,)
  spec_lib.check_stages(f_divergence.stages(ml_collections.ConfigDict({"name": "f_divergence"})), "f_divergence")


def test_the_method_is_registered_with_its_own_program_and_defaults():
  assert registry.get("f_divergence") is f_divergence.SPEC
  assert {"f_divergence", "f_divergence_direct"} <= set(registry.tiny_cases())
  defaults = f_divergence.FDivergenceSettings()
  assert (defaults.divergence, defaults.prob_epsilon, defaults.warmup, defaults.warmup_start) == (
    "Total-Variation",
    0.0,
    True,
    "best",
  )
  config = ml_collections.ConfigDict({"name": "f_divergence", "divergence": "Neyman-code", "prob_epsilon": 1e-5})
  built = registry.build(config, spec_lib.Context(num_classes=3, num_epochs=10))
  assert built.name == "f_divergence" and built.program.own


@pytest.mark.parametrize(
  "field, value",
  [
    ("divergence", "Jensen-Shannon"),
    ("divergence", "chi2"),
    ("prob_epsilon", -1e-5),
    ("prob_epsilon", 2.0),
    ("warmup", 1),
    ("warmup_start", "last"),
  ],
)
def test_bad_settings_raise_naming_the_value(field, value):
  with pytest.raises(ValueError, match=f"{value!r}"):
    f_divergence.FDivergenceSettings(**{field: value})


def test_a_config_typo_and_inputs_that_are_not_resident_are_refused():
  with pytest.raises(ValueError, match="'KLD'"):
    registry.build(ml_collections.ConfigDict({"name": "f_divergence", "divergence": "KLD"}), spec_lib.Context(3))
  with pytest.raises(ValueError, match="Unknown field"):
    registry.build(ml_collections.ConfigDict({"name": "f_divergence", "alpha": 1}), spec_lib.Context(num_classes=3))
  mesh, settings = mesh_lib.make_mesh(1), f_divergence.FDivergenceSettings()
  with pytest.raises(ValueError, match="f-divergence method draws .* streamed"):
    f_divergence.make_epoch_fn(mesh, settings=settings, batch_size=BATCH, num_examples=NUM_EXAMPLES, source=object())
  epoch_fn = f_divergence.make_epoch_fn(mesh, settings=settings, batch_size=BATCH, num_examples=NUM_EXAMPLES)
  table = label_table_lib.create(jnp.zeros(NUM_EXAMPLES, jnp.int32), NUM_CLASSES)
  with pytest.raises(ValueError, match="resident"):
    epoch_fn(None, table, None, jax.random.PRNGKey(0), 1)


def test_the_tiny_runs_train_their_stages():
  summary = runs.run_single(tiny.get_config("f_divergence"))
  assert [(r["stage"], r["epoch"]) for r in summary["history"]] == [
    ("warmup", 1),
    ("warmup", 2),
    ("stage1", 1),
    ("stage1", 2),
    ("stage1", 3),
  ]
  assert all(np.isfinite(r["train_loss"]) for r in summary["history"])
  assert all(r["train_loss"] < 0 for r in summary["history"] if r["stage"] == "stage1")  # -D_f estimate, TV
  assert summary["method"] == "f_divergence" and summary["last_test_accuracy"] > 0.5
  direct = runs.run_single(tiny.get_config("f_divergence_direct"))
  assert [r["stage"] for r in direct["history"]] == ["stage1"] * 3
  assert all(np.isfinite(r["train_loss"]) for r in direct["history"])
