"""VolMinNet as a method (noisy_jax.methods.volminnet): W added by its init_state, its objective and one optimiser
against the code's two torch optimisers (main.py:68, 94: SGD over the network with weight decay, SGD over W without),
one whole epoch of the shared program against a plain JAX re-computation of its steps, the settings' checks, the
registry and the tiny run."""

import os
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest
import torch
import torch.nn.functional as F

from experiments.configs import tiny
from noisy_jax import models
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import volminnet as core
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.methods import volminnet
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import optim
from noisy_jax.train import state as state_lib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_volminnet  # pylint: disable=g-import-not-at-top,wrong-import-position  (its torch transcription)

NUM_EXAMPLES, NUM_CLASSES, BATCH = 44, 4, 8  # 6 steps, the last with 4 padding rows
SHAPE = (4, 4, 1)
RUN_EPOCHS = 60


def _model(bn_axis_name="batch"):
  kwargs = {} if bn_axis_name == "batch" else {"bn_axis_name": None}
  return models.build("mlp", NUM_CLASSES, SHAPE, kwargs={"hidden_sizes": (6,)}, **kwargs)


def _sgd_tx(weight_decay, lr=0.1, boundaries=(25,), steps=6):
  config = ml_collections.ConfigDict(
    {"learning_rate": lr, "momentum": 0.9, "weight_decay": weight_decay, "lr_boundaries": boundaries}
  )
  return optim.make_optimizer(settings_lib.optimizer_settings(config), steps, RUN_EPOCHS)


def _objective_value(method, logits, labels, valid, params):
  value, _ = method.objective(
    logits,
    labels,
    jnp.ones(labels.shape[0]),
    valid,
    None,
    rows={},
    epoch=1,
    params=params,
    images=None,
    key=None,
    forward=None,
  )
  return value


# ------------------------------------------------------------------------------------------------------------
# W beside the network's parameters.


@pytest.mark.parametrize("init_t", [2.0, 4.5])
def test_init_state_adds_w_that_the_optimiser_covers_and_the_network_ignores(init_t):
  model = _model()
  tx = _sgd_tx(0.0)
  state = state_lib.create_train_state(model, jax.random.PRNGKey(0), SHAPE, tx)
  method = registry.build(
    ml_collections.ConfigDict({"name": "volminnet", "init_t": init_t}), spec_lib.Context(num_classes=NUM_CLASSES)
  )
  started = method.program.init_state(state)
  w = started.params[volminnet.TRANSITION]
  assert w.shape == (NUM_CLASSES, NUM_CLASSES) and w.dtype == jnp.float32
  np.testing.assert_array_equal(w, -init_t)  # models.py:153
  assert set(started.params) == set(state.params) | {volminnet.TRANSITION}
  assert jax.tree.structure(started.opt_state) == jax.tree.structure(tx.init(started.params))
  x = np.random.default_rng(0).normal(size=(3, *SHAPE)).astype(np.float32)
  np.testing.assert_array_equal(  # evaluation reads the network's own logits: W changes nothing there
    model.apply(state_lib.variables_of(started), x, train=False),
    model.apply(state_lib.variables_of(state), x, train=False),
  )
  exported = runs.network_variables(state_lib.variables_of(started), model, SHAPE)
  assert set(exported["params"]) == set(state.params)


# ------------------------------------------------------------------------------------------------------------
# The objective, and one optimiser against the code's two.


@pytest.mark.parametrize("lam", [1e-4, 0.2])
def test_objective_value_and_gradients_equal_the_codes(lam):
  rng = np.random.default_rng(1)
  z, y = rng.normal(size=(BATCH, 10)) * 2, rng.integers(0, 10, BATCH)
  w = test_volminnet._w(3, 10, "random")
  t_z = torch.tensor(z, requires_grad=True)
  t_w = torch.tensor(w, requires_grad=True)
  loss, parameter = test_volminnet.original_loss(t_z, t_w, torch.tensor(y), lam)
  loss.backward()
  with jax.enable_x64():
    method = volminnet.method(10, volminnet.VolMinNetSettings(lam=lam))
    one_hot = jax.nn.one_hot(y, 10, dtype=jnp.float64)
    valid = jnp.ones(BATCH, jnp.float64)

    def ours(logits, params):
      return _objective_value(method, logits, one_hot, valid, params)

    params = {volminnet.TRANSITION: jnp.asarray(w)}
    value, (g_z, g_p) = jax.value_and_grad(ours, argnums=(0, 1))(jnp.asarray(z), params)
  test_volminnet._close(value, loss.item(), rtol=1e-12)
  test_volminnet._close(g_z, t_z.grad.numpy(), rtol=1e-9, atol=1e-15)
  test_volminnet._close(g_p[volminnet.TRANSITION], parameter.grad.numpy(), rtol=1e-9, atol=1e-15)


def test_padding_rows_count_for_nothing():
  rng = np.random.default_rng(2)
  z, y = rng.normal(size=(BATCH, 5)), jax.nn.one_hot(rng.integers(0, 5, BATCH), 5)
  method = volminnet.method(5, volminnet.VolMinNetSettings(lam=0.1))
  params = {volminnet.TRANSITION: jnp.asarray(test_volminnet._w(4, 5, "random"), jnp.float32)}
  valid = jnp.asarray([1.0] * 5 + [0.0] * 3)
  full = _objective_value(method, z, y, valid, params)
  part = _objective_value(method, z[:5], y[:5], jnp.ones(5), params)
  np.testing.assert_allclose(full, part, rtol=1e-6)


def test_network_weight_decay_adds_to_the_networks_gradient_only_and_nothing_to_the_loss():
  rng = np.random.default_rng(3)
  z, y = rng.normal(size=(BATCH, 5)), jax.nn.one_hot(rng.integers(0, 5, BATCH), 5)
  params = {"Dense_0": {"kernel": jnp.asarray(rng.normal(size=(5, 5)), jnp.float32)}}
  params[volminnet.TRANSITION] = jnp.asarray(test_volminnet._w(4, 5, "random"), jnp.float32)

  def loss(params, decay):
    method = volminnet.method(5, volminnet.VolMinNetSettings(network_weight_decay=decay))
    return _objective_value(method, z @ params["Dense_0"]["kernel"], y, jnp.ones(BATCH), params)

  (v0, g0), (v1, g1) = (jax.value_and_grad(loss)(params, d) for d in (0.0, 0.01))
  assert float(v0) == float(v1)
  np.testing.assert_array_equal(g1[volminnet.TRANSITION], g0[volminnet.TRANSITION])
  np.testing.assert_allclose(
    g1["Dense_0"]["kernel"], g0["Dense_0"]["kernel"] + 0.01 * params["Dense_0"]["kernel"], rtol=1e-6
  )


def _torch_two_optimisers(kernel, bias, w, batches, lam, lr, wd):
  """main.py:68, 94, 161-190: a linear 'network' (its softmax the clean posterior), SGD(lr, momentum 0.9, wd) over it
  and SGD(lr, momentum 0.9, weight_decay 0) over sig_t's w, one backward of the loss, both stepped."""
  linear = torch.nn.Linear(kernel.shape[0], kernel.shape[1]).double()
  with torch.no_grad():
    linear.weight.copy_(torch.tensor(kernel.T))
    linear.bias.copy_(torch.tensor(bias))
  trans = test_volminnet.OriginalSigT(w.shape[0]).double()
  with torch.no_grad():
    trans.w.copy_(torch.tensor(w))
  optimizer_es = torch.optim.SGD(linear.parameters(), lr=lr, weight_decay=wd, momentum=0.9)
  optimizer_trans = torch.optim.SGD(trans.parameters(), lr=lr, weight_decay=0, momentum=0.9)
  for x, y in batches:
    optimizer_es.zero_grad()
    optimizer_trans.zero_grad()
    clean = F.softmax(linear(torch.tensor(x)), 1)
    t = trans()
    out = torch.mm(clean, t)
    loss = F.nll_loss(out.log(), torch.tensor(y).long()) + lam * t.slogdet().logabsdet
    loss.backward()
    optimizer_es.step()
    optimizer_trans.step()
  return linear.weight.detach().numpy().T, linear.bias.detach().numpy(), trans.w.detach().numpy()


@pytest.mark.parametrize("classes", [10, 100])
def test_one_optimiser_makes_the_codes_two_sgd_updates(classes):
  """SGD(momentum 0.9, weight decay 0) over {network, W} with network_weight_decay wd equals the code's two SGDs
  (the network's with wd, W's without) for 3 steps; the run's own weight decay instead would decay W too."""
  rng = np.random.default_rng(classes)
  features, lr, wd, lam = 6, 0.05, 1e-2, 0.05
  kernel, bias = rng.normal(size=(features, classes)) * 0.5, rng.normal(size=classes) * 0.1
  w = test_volminnet._w(classes, classes, "random")
  batches = [(rng.normal(size=(BATCH, features)), rng.integers(0, classes, BATCH)) for _ in range(3)]
  want = _torch_two_optimisers(kernel, bias, w, batches, lam, lr, wd)

  def train(optimizer_decay, network_decay):
    with jax.enable_x64():
      method = volminnet.method(classes, volminnet.VolMinNetSettings(lam=lam, network_weight_decay=network_decay))
      params = {"Dense_0": {"kernel": jnp.asarray(kernel), "bias": jnp.asarray(bias)}, volminnet.TRANSITION: w}
      params = jax.tree.map(jnp.asarray, params)
      tx = _sgd_tx(optimizer_decay, lr=lr, boundaries=())
      opt_state = tx.init(params)
      for x, y in batches:

        def loss(params):
          logits = x @ params["Dense_0"]["kernel"] + params["Dense_0"]["bias"]
          return _objective_value(method, logits, jax.nn.one_hot(y, classes), jnp.ones(BATCH), params)

        updates, opt_state = tx.update(jax.grad(loss)(params), opt_state, params)
        params = optax.apply_updates(params, updates)
      return params["Dense_0"]["kernel"], params["Dense_0"]["bias"], params[volminnet.TRANSITION]

  got = train(0.0, wd)
  for ours, theirs in zip(got, want, strict=True):
    test_volminnet._close(ours, theirs, rtol=1e-10, atol=1e-13)
  decayed = train(wd, 0.0)  # the one optimiser's own decay instead: W decayed too, not the code's update
  assert not np.allclose(decayed[2], want[2], rtol=1e-6, atol=0)


# ------------------------------------------------------------------------------------------------------------
# One epoch of the shared program.


def _reference_loss(model, stats, x, y, valid, lam, wd):
  apply = lambda p, s, v: model.apply({"params": p, "batch_stats": s}, v, train=True, mutable=["batch_stats"])

  def loss(params):
    network = {k: v for k, v in params.items() if k != volminnet.TRANSITION}
    z, upd = apply(network, stats, x)
    w = params[volminnet.TRANSITION]
    log_t = jnp.log(core.transition_matrix(w))
    noisy = jax.nn.logsumexp(jax.nn.log_softmax(z)[:, :, None] + log_t[None], axis=1)
    nll = -jnp.take_along_axis(noisy, y[:, None], axis=1)[:, 0]
    value = jnp.sum(valid * nll) / jnp.sum(valid) + lam * jnp.linalg.slogdet(core.transition_matrix(w))[1]
    return value, upd["batch_stats"]

  return loss


def test_one_epoch_is_the_steps_recomputed_plainly():
  rng = np.random.default_rng(4)
  images = rng.normal(size=(NUM_EXAMPLES, *SHAPE)).astype(np.float32)
  given = rng.integers(0, NUM_CLASSES, NUM_EXAMPLES)
  lam, wd, epoch = 0.1, 0.01, 30
  method = volminnet.method(NUM_CLASSES, volminnet.VolMinNetSettings(lam=lam, network_weight_decay=wd))
  mesh = mesh_lib.make_mesh(1)
  state = state_lib.create_train_state(_model(), jax.random.PRNGKey(3), SHAPE, _sgd_tx(0.0))
  state = method.program.init_state(state)
  start = jax.tree.map(np.asarray, state_lib.variables_of(state))
  table = label_table_lib.create(jnp.asarray(given), NUM_CLASSES)
  epoch_fn = epoch_lib.make_method_epoch_fn(method, mesh, batch_size=BATCH, num_examples=NUM_EXAMPLES)
  key = jax.random.PRNGKey(7)
  state, _, metrics = epoch_fn(
    mesh_lib.replicate(state, mesh),
    mesh_lib.replicate(table, mesh),
    mesh_lib.replicate(jnp.asarray(images), mesh),
    key,
    jnp.asarray(epoch, jnp.int32),
  )
  model = _model(bn_axis_name=None)
  params, stats = jax.tree.map(jnp.asarray, start["params"]), jax.tree.map(jnp.asarray, start["batch_stats"])
  sgd = optax.sgd(0.1, momentum=0.9)  # a fresh optimiser state: its first steps, before the boundary at epoch 25
  opt_state = sgd.init(params)
  order, valid = epoch_lib.epoch_batches(key, NUM_EXAMPLES, BATCH)
  order, valid = np.asarray(order), np.asarray(valid, np.float32)
  losses, counts = [], []
  for step in range(order.shape[0]):
    loss = _reference_loss(
      model, stats, jnp.asarray(images[order[step]]), jnp.asarray(given[order[step]]), valid[step], lam, wd
    )
    (value, stats), grads = jax.value_and_grad(loss, has_aux=True)(params)
    grads = {
      k: (g if k == volminnet.TRANSITION else jax.tree.map(lambda a, b: a + wd * b, g, params[k]))
      for k, g in grads.items()
    }
    updates, opt_state = sgd.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    losses.append(float(value) * valid[step].sum())
    counts.append(valid[step].sum())
  for got, want in zip(jax.tree.leaves(state.params), jax.tree.leaves(params), strict=True):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  for got, want in zip(jax.tree.leaves(state.batch_stats), jax.tree.leaves(stats), strict=True):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(float(metrics["train_loss"]), sum(losses) / sum(counts), rtol=1e-5)
  assert not np.allclose(state.params[volminnet.TRANSITION], start["params"][volminnet.TRANSITION])
  w = np.asarray(state.params[volminnet.TRANSITION])
  np.testing.assert_array_equal(np.diag(w), -volminnet.core.ORIGINAL_INIT)  # no gradient, no decay on W's diagonal


# ------------------------------------------------------------------------------------------------------------
# Settings, registry, tiny run.


@pytest.mark.parametrize(
  "field, value",
  [("lam", -1e-4), ("lam", float("nan")), ("init_t", float("inf")), ("network_weight_decay", -0.1)],
)
def test_bad_settings_raise_naming_the_value(field, value):
  with pytest.raises(ValueError, match=f"{field}={value!r}"):
    volminnet.VolMinNetSettings(**{field: value})


def test_defaults_are_the_codes_and_a_typo_is_refused():
  settings = volminnet.VolMinNetSettings()
  assert (settings.lam, settings.init_t, settings.network_weight_decay) == (1e-4, 2.0, 0.0)  # main.py:24, models.py:150
  config = ml_collections.ConfigDict({"name": "volminnet", "lam": 0.5, "init_t": 4.5, "network_weight_decay": 1e-4})
  assert volminnet.settings_of(config) == volminnet.VolMinNetSettings(0.5, 4.5, 1e-4)
  with pytest.raises(ValueError, match="Unknown field"):
    registry.build(ml_collections.ConfigDict({"name": "volminnet", "lamda": 1.0}), spec_lib.Context(num_classes=3))
  with pytest.raises(ValueError, match="lam=-1.0"):
    registry.build(ml_collections.ConfigDict({"name": "volminnet", "lam": -1.0}), spec_lib.Context(num_classes=3))
  with pytest.raises(ValueError, match="num_classes=1"):
    volminnet.method(1)


def test_registered_with_a_tiny_case_and_no_sweeps():
  assert registry.get("volminnet") is volminnet.SPEC and "volminnet" in registry.tiny_cases()
  assert volminnet.SPEC.sweep_fields is None  # sweeps would not add W (no init_state there)
  built = registry.build(ml_collections.ConfigDict({"name": "volminnet"}), spec_lib.Context(num_classes=3))
  assert built.name == "volminnet" and not built.program.own and built.label_evidence is None


def test_the_tiny_run_trains_its_three_epochs():
  summary = runs.run_single(tiny.get_config("volminnet"))
  assert [r["epoch"] for r in summary["history"]] == [1, 2, 3]
  assert all(np.isfinite(r["train_loss"]) for r in summary["history"])
  assert summary["method"] == "volminnet" and summary["last_test_accuracy"] > 0.5
