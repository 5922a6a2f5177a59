"""The shared scaffolding of the own-epoch-program method tests (tests/test_peer_loss_method.py,
tests/test_f_divergence_method.py, tests/test_cores_method.py, tests/test_cal_method.py, tests/test_pes_method.py,
tests/test_pes_semi_method.py): the tiny data set, network, train state and one-device mesh; the augmentation stub;
one epoch of a built epoch program; the pieces of the plain JAX re-computation of its steps that are written the same
way in each (the reference SGD, the epoch's batches, the peer rows, the comparison of the trained variables); and the
checks of a method's registry entry and of its refusals. A plain module imported by the tests, not a test file."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from noisy_jax import models
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import peer_loss
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import optim
from noisy_jax.train import state as state_lib

SHAPE = (4, 4, 1)
STATE_SEED, EPOCH_KEY_SEED = 3, 7


def augment(key, x, rows):
  """A view: x plus N(0, 0.1^2) noise (the rows are not read)."""
  del rows
  return x + 0.1 * jax.random.normal(key, x.shape, x.dtype)


def tiny_model(num_classes, bn_axis_name="batch", shape=SHAPE, **mlp_kwargs):
  """The tests' network: an MLP with one hidden layer of 6 units (extra MLP settings in mlp_kwargs). bn_axis_name
  "batch" is the epoch program's (BatchNorm over the device axis); None is the plain reference's (BatchNorm over the
  batch it is given, no device axis)."""
  kwargs = {} if bn_axis_name == "batch" else {"bn_axis_name": None}
  return models.build("mlp", num_classes, shape, kwargs={"hidden_sizes": (6,), **mlp_kwargs}, **kwargs)


def tiny_data(seed, num_examples, num_classes, shape=SHAPE):
  """(images [N, *shape] float32 N(0, 1), given labels [N] uniform over the classes) from default_rng(seed); returns
  the generator too, for the draws a test makes after these."""
  rng = np.random.default_rng(seed)
  images = rng.normal(size=(num_examples, *shape)).astype(np.float32)
  given = rng.integers(0, num_classes, num_examples)
  return images, given, rng


def train_state(model, *, num_examples, batch, run_epochs, learning_rate=0.1, lr_boundaries=(25,), shape=SHAPE):
  """A fresh train state (init key STATE_SEED) whose optimizer is SGD with momentum 0.9 and weight decay 0.01 at
  learning_rate, stepped over ceil(num_examples / batch) steps a run epoch for run_epochs; lr_boundaries None leaves
  the boundaries out of the optimizer's config (its default)."""
  config = {"learning_rate": learning_rate, "momentum": 0.9, "weight_decay": 0.01}
  if lr_boundaries is not None:
    config["lr_boundaries"] = lr_boundaries
  steps = -(-num_examples // batch)
  tx = optim.make_optimizer(settings_lib.optimizer_settings(ml_collections.ConfigDict(config)), steps, run_epochs)
  return state_lib.create_train_state(model, jax.random.PRNGKey(STATE_SEED), shape, tx)


def given_table(given, num_classes, method_rows=None):
  """The label table of the given labels, with the method's rows when given."""
  table = label_table_lib.create(jnp.asarray(given), num_classes)
  return table if method_rows is None else label_table_lib.with_method_rows(table, method_rows)


def run_epoch(epoch_fn, state, table, images, epoch):
  """One epoch of a built epoch program on a one-device mesh, with key PRNGKey(EPOCH_KEY_SEED): returns (the state's
  variables before it, as NumPy; the key; the program's (state, table, metrics))."""
  mesh = mesh_lib.make_mesh(1)
  start = jax.tree.map(np.asarray, state_lib.variables_of(state))
  key = jax.random.PRNGKey(EPOCH_KEY_SEED)
  out = epoch_fn(
    mesh_lib.replicate(state, mesh),
    mesh_lib.replicate(table, mesh),
    mesh_lib.replicate(jnp.asarray(images), mesh),
    key,
    jnp.asarray(epoch, jnp.int32),
  )
  return start, key, out


def reference_sgd(learning_rate, params):
  """The plain re-computation's optimizer: coupled weight decay 0.01 then SGD (momentum 0.9) at the epoch's rate;
  returns (the optimizer, its state for params)."""
  sgd = optax.chain(optax.add_decayed_weights(0.01), optax.sgd(learning_rate, momentum=0.9))
  return sgd, sgd.init(params)


def start_params_and_stats(start):
  """The parameters and BatchNorm statistics of run_epoch's start variables, as JAX arrays."""
  return jax.tree.map(jnp.asarray, start["params"]), jax.tree.map(jnp.asarray, start["batch_stats"])


def epoch_order(key, num_examples, batch):
  """The epoch's batches as the programs draw them: (row order [S, B], valid [S, B] float32), as NumPy."""
  order, valid = epoch_lib.epoch_batches(key, num_examples, batch)
  return np.asarray(order), np.asarray(valid, np.float32)


def step_view(key, step, images, rows):
  """The view of the step's rows that the programs train on: augment with the epoch's augmentation key of the step."""
  return augment(epoch_lib.augmentation_key(key, step), jnp.asarray(images[rows]), None)


def peer_views(key, step, images, order, batch, num_examples):
  """Peer loss's draws of one step (the f-divergence method's too): the step's view x of its rows, the view x' of
  the peer rows n1 and the peer rows n2 whose labels are paired with them."""
  peer_key = jax.random.fold_in(jax.random.fold_in(key, peer_loss.PEER_STREAM), step)
  n1 = jax.random.randint(jax.random.fold_in(peer_key, 0), (batch,), 0, num_examples)
  n2 = jax.random.randint(jax.random.fold_in(peer_key, 1), (batch,), 0, num_examples)
  x = step_view(key, step, images, order[step])
  x_peer = augment(jax.random.fold_in(peer_key, peer_loss.PEER_AUGMENT_STREAM), jnp.asarray(images[n1]), None)
  return x, x_peer, n2


def assert_trees_close(got, want, rtol, atol):
  """Every leaf of got equals the same leaf of want within the tolerances (same tree structure)."""
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def assert_same_variables(state, params, stats, rtol=1e-5, atol=1e-6):
  """The program's trained parameters and BatchNorm statistics equal the plain re-computation's."""
  assert_trees_close(state.params, params, rtol, atol)
  assert_trees_close(state.batch_stats, stats, rtol, atol)


def assert_registered_own_program(name, spec, config, num_classes=3, num_epochs=10):
  """The registry holds spec under name, with a tiny case of that name, and builds config (a dict) into a method of
  that name with its own epoch program; returns the built method."""
  assert registry.get(name) is spec and name in registry.tiny_cases()
  built = registry.build(
    ml_collections.ConfigDict(config), spec_lib.Context(num_classes=num_classes, num_epochs=num_epochs)
  )
  assert built.name == name and built.program.own
  return built


def assert_refuses_a_typo_and_streamed_or_non_resident_inputs(
  name,
  bad_config,
  bad_match,
  unknown_field,
  make_epoch_fn,
  settings,
  *,
  batch,
  num_examples,
  num_classes,
  streamed_match="streamed",
):
  """The registry refuses bad_config (its bad value named, bad_match) and the unknown field unknown_field (a name);
  make_epoch_fn refuses a streamed source (streamed_match), and the epoch program it builds refuses inputs that are
  not resident."""
  with pytest.raises(ValueError, match=bad_match):
    registry.build(ml_collections.ConfigDict({"name": name, **bad_config}), spec_lib.Context(3))
  with pytest.raises(ValueError, match="Unknown field"):
    registry.build(ml_collections.ConfigDict({"name": name, unknown_field: 1}), spec_lib.Context(num_classes=3))
  mesh = mesh_lib.make_mesh(1)
  with pytest.raises(ValueError, match=streamed_match):
    make_epoch_fn(mesh, settings=settings, batch_size=batch, num_examples=num_examples, source=object())
  epoch_fn = make_epoch_fn(mesh, settings=settings, batch_size=batch, num_examples=num_examples)
  table = label_table_lib.create(jnp.zeros(num_examples, jnp.int32), num_classes)
  with pytest.raises(ValueError, match="resident"):
    epoch_fn(None, table, None, jax.random.PRNGKey(0), 1)


def reference_step(sgd, opt_state, params, loss, update_map=None):
  """One plain SGD step on loss (a function of the parameters returning (value, aux)): update_map, when given, is
  applied to each update leaf before it is applied (a method's learning-rate factor); returns ((value, aux), params,
  opt_state)."""
  out, grads = jax.value_and_grad(loss, has_aux=True)(params)
  updates, opt_state = sgd.update(grads, opt_state, params)
  if update_map is not None:
    updates = jax.tree.map(update_map, updates)
  return out, optax.apply_updates(params, updates), opt_state


def peer_reference_epoch(step_loss, start, key, images, given, learning_rate, *, batch, num_examples):
  """Peer loss's epoch (the f-divergence method's too) recomputed plainly from run_epoch's start variables and key:
  for each of the epoch's batches, the step's views and peer rows (peer_views), the loss
  step_loss(stats, x, x_peer, y, y_peer, valid) (returning (value, new batch stats)) and one reference_step at
  learning_rate. Returns (params, batch stats, the epoch's mean loss over its valid rows)."""
  params, stats = start_params_and_stats(start)
  sgd, opt_state = reference_sgd(learning_rate, params)
  order, valid = epoch_order(key, num_examples, batch)
  losses, counts = [], []
  for step in range(order.shape[0]):
    x, x_peer, n2 = peer_views(key, step, images, order, batch, num_examples)
    y, y_peer = jnp.asarray(given[order[step]]), jnp.asarray(given[n2])
    loss = step_loss(stats, x, x_peer, y, y_peer, valid[step])
    (value, stats), params, opt_state = reference_step(sgd, opt_state, params, loss)
    losses.append(float(value) * valid[step].sum())
    counts.append(valid[step].sum())
  return params, stats, sum(losses) / sum(counts)
