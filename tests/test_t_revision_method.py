"""T-Revision as a registered method (noisy_jax.methods.t_revision): each stage's objective against a float64 NumPy
transcription of the original's losses (xiaoboxia/T-Revision@b598cf2 loss.py, its loops written out, gradients
by hand), the slack dT (created zero by the revision's init_state, the only stage that has it and differentiates it),
the anchor-point T (tools.fit + tools.norm), a tiny run on the digits through all three stages, stop/resume inside
each stage and across their boundaries, and the export of the delivered network.
"""

import dataclasses
import os
import sys
import time

import flax
import flax.traverse_util
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from experiments.configs import tiny
from noisy_jax import models
from noisy_jax.core import t_revision as core
from noisy_jax.experiment import export as export_lib
from noisy_jax.experiment import inputs as inputs_lib
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.methods import loss_correction
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.methods import t_revision
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import checkpoint as checkpoint_lib
from noisy_jax.train import optim
from noisy_jax.train import state as state_lib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resume_processes  # pylint: disable=g-import-not-at-top,wrong-import-position

B, C = 16, 5


# ------------------------------------------------------------------------------------------------------------
# The original's losses in float64 NumPy, loop for loop, with their gradients written out.


def _softmax(z):
  e = np.exp(z - z.max())
  return e / e.sum()


def original_reweight_loss(out, T, target):
  """loss.py:6-29: sum_i beta_i CE_i / len(target), beta_i = p_y / (T^T p)_y detached (loss.py:25); the gradient with
  respect to `out` is beta_i (p_i - e_y) / len(target)."""
  loss, grad = 0.0, np.zeros_like(out)
  for i, y in enumerate(target):
    p = _softmax(out[i])
    beta = p[y] / (T.T @ p)[y]
    loss += beta * -np.log(p[y])
    grad[i] = beta * (p - np.eye(len(p))[y])
  return loss / len(target), grad / len(target)


def original_revision_loss(out, T, correction, target, *, accumulate):
  """loss.py:32-56 (accumulate=True: `T = T + correction` inside the loop, example i uses T + (i + 1) dT; False: T + dT
  for all, the paper). beta = p_y / s, s = sum_a p_a M[a, y], is not detached: d l / d z_j = beta (p_j - [j = y])
  + CE p_y ([j = y] s - p_j M[j, y]) / s^2 and d l / d M[a, y] = -CE p_y p_a / s^2. Returns (loss, d/d out, d/d dT)."""
  loss, grad_out, grad_dt = 0.0, np.zeros_like(out), np.zeros_like(correction)
  for i, y in enumerate(target):
    k = i + 1 if accumulate else 1
    M = T + k * correction
    p = _softmax(out[i])
    s = p @ M[:, y]
    beta, ce = p[y] / s, -np.log(p[y])
    loss += beta * ce
    one_hot = np.eye(len(p))[y]
    grad_out[i] = beta * (p - one_hot) + ce * p[y] * (one_hot * s - p * M[:, y]) / s**2
    grad_dt[:, y] += k * -ce * p[y] * p / s**2
  n = len(target)
  return loss / n, grad_out / n, grad_dt / n


def _inputs(seed, *, correction_scale=1e-3):
  rng = np.random.default_rng(seed)
  logits = rng.normal(size=(B, C)) * 2
  target = rng.integers(0, C, B)
  transition = 0.6 * np.eye(C) + 0.4 * rng.dirichlet(np.ones(C), size=C)  # dense, row-stochastic
  correction = rng.normal(size=(C, C)) * correction_scale
  return logits, target, transition, correction


def _objective_value_and_grads(method, logits, target, valid, params):
  """The method's objective as the step calls it (keyword arguments of noisy_jax.train.method), differentiated with
  respect to the logits and the params."""
  one_hot = jax.nn.one_hot(target, C, dtype=jnp.float64)

  def loss(z, params):
    value, _ = method.objective(
      z,
      one_hot,
      jnp.ones(len(target)),
      jnp.asarray(valid),
      None,
      rows={},
      epoch=1,
      params=params,
      images=None,
      key=None,
      forward=None,
    )
    return value

  return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(jnp.asarray(logits), params)


# ------------------------------------------------------------------------------------------------------------
# The stages as main.py runs them.


def test_stages_are_warmup_reweight_revision():
  stages = spec_lib.check_stages(t_revision.stages(ml_collections.ConfigDict({"name": "t_revision"})), "t_revision")
  assert [(s.name, s.network, s.config_section, s.key_stream) for s in stages] == [
    ("warmup", "fresh", "warmup", 0),
    ("reweight", "previous_best", "reweight", 1),
    ("stage1", "previous_best", None, 2),
  ]
  warmup, reweight, revision = stages
  assert warmup.product is t_revision.estimated_transition and warmup.product_from == "best_val"
  assert not any(s.auxiliary for s in stages)  # every stage recorded and checkpointed
  assert revision.build is None and revision.delivers and revision.scores_labels
  assert reweight.product is None and not (warmup.delivers or reweight.delivers)


# ------------------------------------------------------------------------------------------------------------
# Each stage's objective.


def test_warmup_objective_is_the_originals_cross_entropy():
  """main.py:115, 167: nn.CrossEntropyLoss() (the batch mean) on the logits; the last batch's mean over its own rows."""
  logits, target, _, _ = _inputs(4)
  valid = np.arange(B) < B - 3
  expected = np.mean([-np.log(_softmax(z)[y]) for z, y in zip(logits[valid], target[valid])])
  expected_grad = np.stack([_softmax(z) - np.eye(C)[y] for z, y in zip(logits, target)]) / valid.sum()
  context = spec_lib.Context(num_classes=C)
  with jax.enable_x64(True):
    method = t_revision.WARMUP.build(ml_collections.ConfigDict({"name": "t_revision"}), context)
    value, (grad, _) = _objective_value_and_grads(method, logits, target, valid, {})
  np.testing.assert_allclose(value, expected, rtol=1e-13)
  np.testing.assert_allclose(grad[valid], expected_grad[valid], rtol=1e-11, atol=1e-15)
  np.testing.assert_array_equal(grad[~valid], 0.0)


def test_reweight_objective_equals_the_originals_reweight_loss():
  logits, target, transition, _ = _inputs(0)
  valid = np.arange(B) < B - 3  # a padded batch: the original's last batch is the 13 real rows
  expected, expected_grad = original_reweight_loss(logits[valid], transition, target[valid])
  context = spec_lib.Context(num_classes=C, products={t_revision.TRANSITION: transition})
  stage = t_revision.REWEIGHT
  with jax.enable_x64(True):
    method = stage.build(ml_collections.ConfigDict({"name": "t_revision"}), context)
    value, (grad, _) = _objective_value_and_grads(method, logits, target, valid, {})
  np.testing.assert_allclose(value, expected, rtol=1e-13)
  np.testing.assert_allclose(grad[valid], expected_grad, rtol=1e-11, atol=1e-15)
  np.testing.assert_array_equal(grad[~valid], 0.0)


@pytest.mark.parametrize("accumulate", [False, True], ids=["paper", "original-accumulated"])
def test_revision_objective_equals_the_originals_revision_loss(accumulate):
  logits, target, transition, correction = _inputs(1)
  valid = np.arange(B) < B - 3
  expected, grad_out, grad_dt = original_revision_loss(
    logits[valid], transition, correction, target[valid], accumulate=accumulate
  )
  config = ml_collections.ConfigDict(
    {"name": "t_revision", "accumulate_correction": accumulate, "revision_weight_decay": 0.0}
  )
  with jax.enable_x64(True):
    method = registry.build(config, spec_lib.Context(num_classes=C, products={t_revision.TRANSITION: transition}))
    params = {t_revision.CORRECTION: jnp.asarray(correction)}
    value, (grad, grad_params) = _objective_value_and_grads(method, logits, target, valid, params)
  np.testing.assert_allclose(value, expected, rtol=1e-13)
  np.testing.assert_allclose(grad[valid], grad_out, rtol=1e-10, atol=1e-14)
  np.testing.assert_array_equal(grad[~valid], 0.0)
  np.testing.assert_allclose(grad_params[t_revision.CORRECTION], grad_dt, rtol=1e-10, atol=1e-14)


def test_accumulated_positions_are_those_of_the_global_batch():
  """With the batch split over devices (here 2, mapped with jax.vmap over a named axis), device 1's rows follow
  device 0's: the same loss as the whole batch on one device, which the core's accumulation over the batch gives."""
  logits, target, transition, correction = _inputs(2, correction_scale=1e-2)
  config = ml_collections.ConfigDict({"name": "t_revision", "accumulate_correction": True})
  with jax.enable_x64(True):
    method = registry.build(config, spec_lib.Context(num_classes=C, products={t_revision.TRANSITION: transition}))
    one_hot = jax.nn.one_hot(target, C, dtype=jnp.float64)
    params = {t_revision.CORRECTION: jnp.asarray(correction)}

    def loss(z, y, axis_name):
      value, _ = method.objective(z, y, jnp.ones(len(z)), jnp.ones(len(z), bool), axis_name, params=params)
      return value

    whole = loss(jnp.asarray(logits), one_hot, None)
    split = jax.vmap(lambda z, y: loss(z, y, "d"), axis_name="d")(
      jnp.asarray(logits).reshape(2, B // 2, C), one_hot.reshape(2, B // 2, C)
    )
    core_value = core.batch_mean(
      core.revision_cross_entropy(
        logits, one_hot, transition=transition, correction=correction, accumulate_correction=True
      )
    )
    restarted = core.batch_mean(  # what per-device positions would give
      jnp.concatenate(
        [
          core.revision_cross_entropy(
            logits[h], one_hot[h], transition=transition, correction=correction, accumulate_correction=True
          )
          for h in (slice(0, B // 2), slice(B // 2, B))
        ]
      )
    )
  np.testing.assert_allclose(whole, core_value, rtol=1e-13)
  np.testing.assert_allclose(split, whole, rtol=1e-13)
  assert not np.isclose(restarted, whole, rtol=1e-9)


def test_revision_weight_decay_adds_the_coupled_decay_to_the_gradient_and_nothing_to_the_loss():
  """revision_weight_decay: PyTorch Adam's weight_decay, g + wd w on every parameter (the network's and dT)."""
  logits, target, transition, correction = _inputs(3)
  valid = np.ones(B, bool)
  context = spec_lib.Context(num_classes=C, products={t_revision.TRANSITION: transition})
  rng = np.random.default_rng(3)
  with jax.enable_x64(True):
    params = {t_revision.CORRECTION: jnp.asarray(correction), "head": {"kernel": jnp.asarray(rng.normal(size=(3, C)))}}
    results = {}
    for decay in (0.0, 1e-4):
      config = ml_collections.ConfigDict({"name": "t_revision", "revision_weight_decay": decay})
      results[decay] = _objective_value_and_grads(registry.build(config, context), logits, target, valid, params)
  (plain, (_, plain_grads)), (decayed, (_, decayed_grads)) = results[0.0], results[1e-4]
  assert decayed == plain  # the value is the loss's, bit for bit
  np.testing.assert_array_equal(
    decayed_grads["head"]["kernel"], 1e-4 * np.asarray(params["head"]["kernel"])
  )  # no loss gradient
  np.testing.assert_allclose(
    decayed_grads[t_revision.CORRECTION],
    np.asarray(plain_grads[t_revision.CORRECTION]) + 1e-4 * correction,
    rtol=1e-13,
  )


def test_defaults_are_the_papers_and_the_codes_options_are_named():
  context = spec_lib.Context(num_classes=C, transition=np.eye(C))
  method = registry.build(ml_collections.ConfigDict({"name": "t_revision"}), context)
  assert method.name == "t_revision" and method.program.build is None
  assert t_revision.SPEC.needs_transition is False
  with pytest.raises(ValueError, match="revision_weight_gradient"):
    registry.build(ml_collections.ConfigDict({"name": "t_revision", "revision_weight_gradient": "some"}), context)
  with pytest.raises(ValueError, match="needs the transition matrix of its warm-up stage"):
    registry.build(ml_collections.ConfigDict({"name": "t_revision"}), spec_lib.Context(num_classes=C))
  with pytest.raises(ValueError, match="Unknown field"):
    registry.build(ml_collections.ConfigDict({"name": "t_revision", "lr_revision": 5e-7}), context)


# ------------------------------------------------------------------------------------------------------------
# dT: created zero by the revision's init_state, beside the network's parameters.


def test_init_state_adds_a_zero_correction_that_the_optimiser_covers_and_the_network_ignores():
  model = models.get("mlp", num_classes=C, hidden_sizes=(8,))
  opt = ml_collections.ConfigDict({"name": "coteaching_adam", "learning_rate": 1e-3, "decay_start": 10})
  tx = optim.make_optimizer(settings_lib.optimizer_settings(opt), steps_per_epoch=2, num_epochs=3)
  state = state_lib.create_train_state(model, jax.random.PRNGKey(0), (4, 4, 1), tx)
  context = spec_lib.Context(num_classes=C, products={t_revision.TRANSITION: np.eye(C)})
  method = registry.build(ml_collections.ConfigDict({"name": "t_revision"}), context)
  revised = method.program.init_state(state)
  correction = revised.params[t_revision.CORRECTION]
  assert correction.shape == (C, C) and correction.dtype == jnp.float32
  np.testing.assert_array_equal(correction, 0.0)
  assert set(revised.params) == set(state.params) | {t_revision.CORRECTION}
  assert jax.tree.structure(revised.opt_state) == jax.tree.structure(tx.init(revised.params))
  x = np.random.default_rng(0).normal(size=(3, 4, 4, 1)).astype(np.float32)
  np.testing.assert_array_equal(
    model.apply(state_lib.variables_of(revised), x, train=False),
    model.apply(state_lib.variables_of(state), x, train=False),
  )
  # The other stages keep the shared program: no dT there.
  for stage in (t_revision.WARMUP, t_revision.REWEIGHT):
    built = stage.build(ml_collections.ConfigDict({"name": "t_revision"}), context)
    assert built.program.init_state(state) is state


# ------------------------------------------------------------------------------------------------------------
# The anchor-point T: tools.fit + tools.norm.


def tools_fit(X, num_classes, filter_outlier=False):
  """tools.py:27-42 as it is (it zeroes X in place); NumPy 2's percentile `method=` for its `interpolation=`."""
  T = np.empty((num_classes, num_classes))
  for i in range(num_classes):
    if not filter_outlier:
      idx_best = np.argmax(X[:, i])
    else:
      robust_eta = X[:, i]
      robust_eta[robust_eta >= np.percentile(X[:, i], 97, method="higher")] = 0.0
      idx_best = np.argmax(robust_eta)
    for j in range(num_classes):
      T[i, j] = X[idx_best, j]
  return T


def tools_norm(T):
  """tools.py:4-7."""
  return T / np.sum(T, 1)


def test_transition_norms_against_tools_fit_and_norm():
  """A case where the shared filter bites (loss_correction's test case): the original's T is tools.norm of tools.fit's
  rows; the default normalises each row (loss_correction.estimate_transition)."""
  probs = np.tile([0.1, 0.1, 0.8], (100, 1))
  probs[:2] = [0.9, 0.05, 0.05]
  probs[2] = [0.4, 0.55, 0.05]
  probs[3:6] = [0.025, 0.95, 0.025]
  raw = tools_fit(probs.copy(), 3, True)
  original = t_revision.estimate_transition(probs, shared_filter=True, transition_norm="tools_norm")
  np.testing.assert_array_equal(original, tools_norm(raw))
  np.testing.assert_array_equal(loss_correction.anchor_rows(probs, shared_filter=True), raw)
  rows = t_revision.estimate_transition(probs, shared_filter=True)
  np.testing.assert_array_equal(rows, loss_correction.estimate_transition(probs, shared_filter=True))
  np.testing.assert_allclose(rows, raw / raw.sum(axis=1, keepdims=True), rtol=1e-15)
  assert not np.allclose(original.sum(axis=1), 1.0)
  config = ml_collections.ConfigDict(
    {"name": "t_revision", "percentile": 97.0, "shared_filter": True, "transition_norm": "tools_norm"}
  )
  np.testing.assert_array_equal(t_revision.estimated_transition(probs, config)[t_revision.TRANSITION], original)
  none = ml_collections.ConfigDict({"name": "t_revision", "percentile": None, "transition_norm": "tools_norm"})
  np.testing.assert_array_equal(
    t_revision.estimated_transition(probs, none)[t_revision.TRANSITION], tools_norm(tools_fit(probs.copy(), 3))
  )
  with pytest.raises(ValueError, match="transition_norm"):
    t_revision.estimate_transition(probs, transition_norm="columns")


# ------------------------------------------------------------------------------------------------------------
# A run: three stages on the digits.


def _spy_on_the_product(monkeypatch):
  """Replaces the registered spec by one whose warm-up product also records what it was given and made."""
  seen = {}

  def product(probs, method_config):
    out = t_revision.estimated_transition(probs, method_config)
    seen.update(probs=probs, transition=out[t_revision.TRANSITION])
    return out

  spec = registry.get("t_revision")
  stages = (dataclasses.replace(t_revision.WARMUP, product=product), t_revision.REWEIGHT, t_revision.REVISION)
  monkeypatch.setitem(registry.SPECS, "t_revision", dataclasses.replace(spec, stages=lambda method_config: stages))
  return seen


def test_tiny_run_passes_through_the_three_stages(monkeypatch):
  seen = _spy_on_the_product(monkeypatch)
  config = tiny.get_config("t_revision")
  summary = runs.run_single(config, keep_arrays=True)
  stages = [(r["stage"], r["epoch"]) for r in summary["history"]]
  assert stages == [("warmup", 1), ("warmup", 2), ("reweight", 1), ("reweight", 2)] + [("stage1", e) for e in (1, 2, 3)]
  assert stages_lib.total_epochs(config) == 7
  assert all(np.isfinite(r["train_loss"]) for r in summary["history"])
  assert summary["method"] == "t_revision" and set(summary) >= {"warmup", "reweight", "stage1"}
  assert summary["last_test_accuracy"] == summary["stage1"]["last_test_accuracy"] > 0.5
  arrays = summary["arrays"]
  # dT only in the revision, and it moved there (Adam, lr 1e-3: every entry of the step's gradient moves it).
  assert t_revision.CORRECTION not in arrays["warmup"]["params"]
  assert t_revision.CORRECTION not in arrays["reweight"]["params"]
  correction = np.asarray(arrays["stage1"]["params"][t_revision.CORRECTION])
  assert correction.shape == (10, 10) and 1e-4 < np.abs(correction).max() < 0.1
  # T from the warm-up: row-stochastic, from the training split's softmax.
  assert seen["probs"].shape == (len(arrays["label_table"].noisy_labels), 10)
  np.testing.assert_allclose(seen["transition"].sum(axis=1), 1.0, rtol=1e-12)


# ------------------------------------------------------------------------------------------------------------
# Stop and resume: inside each stage and across the stages' boundaries, in one workdir.


class _Stopped(Exception):
  pass


def _wait_for_checkpoint(workdir, config, stage_name, epoch, timeout=120.0):
  """Until the newest checkpoint of `stage_name` due by `epoch` is on disk (orbax writes in the background)."""
  stage = next(s for s in t_revision.stages(config.method) if s.name == stage_name)
  num_epochs = int(stages_lib.config_of_stage(config, stage).num_epochs)
  every = int(config.checkpoint_every)
  due = max(e for e in range(1, epoch + 1) if checkpoint_lib.is_due(e, every=every, num_epochs=num_epochs))
  path = os.path.join(checkpoint_lib.stage_dir(workdir, stage_name), str(due))
  deadline = time.monotonic() + timeout
  while not os.path.isdir(path):
    assert time.monotonic() < deadline, f"{path} did not appear"
    time.sleep(0.01)


def _run(workdir, stop=None):
  """The tiny case checkpointed every epoch in `workdir`; stopped by an exception once `stop` = (stage, epoch) is
  logged and its due checkpoint is on disk. Returns the (stage, epoch) pairs trained."""
  config = tiny.get_config("t_revision")
  config.checkpoint_every = 1
  config.keep_checkpoints = 2
  trained = []

  def log_fn(record):
    trained.append((record["stage"], record["epoch"]))
    if stop == trained[-1]:
      _wait_for_checkpoint(workdir, config, *stop)
      raise _Stopped

  try:
    runs.run_single(config, workdir, log_fn=log_fn)
  except _Stopped:
    pass
  return trained


STAGES = ("warmup", "reweight", "stage1")


@pytest.fixture(scope="module")
def stopped_runs(tmp_path_factory):
  """A reference run and a run stopped four times (inside the warm-up, inside the reweighting, at its end, inside the
  revision) and resumed each time, in one workdir. The export of the delivered network is left out
  (test_export_of_the_delivered_network_loads_back)."""
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(runs, "export_delivered", lambda *args, **kwargs: None)
    seen = _spy_on_the_product(patch)
    reference = str(tmp_path_factory.mktemp("reference"))
    _run(reference)
    product = dict(seen)
    stopped = str(tmp_path_factory.mktemp("stopped"))
    legs = [_run(stopped, stop) for stop in (("warmup", 1), ("reweight", 1), ("reweight", 2), ("stage1", 2), None)]
  return reference, stopped, legs, product


def test_stopped_inside_and_between_stages_resumes_bit_identical(stopped_runs):
  reference, stopped, legs, _ = stopped_runs
  assert legs == [
    [("warmup", 1)],
    [("warmup", 2), ("reweight", 1)],
    [("reweight", 2)],  # the boundary: the revision has not started
    [("stage1", 1), ("stage1", 2)],
    [("stage1", 3)],
  ]
  for stage in STAGES:
    resume_processes.assert_bit_identical(reference, stopped, stage)
  assert resume_processes.records(stopped) == resume_processes.records(reference)
  # dT, its Adam state and its best-validation value are in the revision's checkpoint, and only there.
  for stage in STAGES:
    _, arrays = resume_processes.final_arrays(stopped, stage)
    with_correction = [name for name in arrays if t_revision.CORRECTION in name]
    if stage == "stage1":
      assert any(n.startswith("state/params/") for n in with_correction)
      assert any(n.startswith("state/opt_state/") for n in with_correction)
      assert any(n.startswith("best_variables/params/") for n in with_correction)
    else:
      assert not with_correction, (stage, with_correction)


def test_the_transition_comes_from_the_warmups_best_validation_network(stopped_runs):
  """The product's softmax is the warm-up's best-validation variables' (kept in its checkpoint) on the training
  split, as the trainer evaluates."""
  reference, _, _, product = stopped_runs
  config = tiny.get_config("t_revision")
  _, arrays = resume_processes.final_arrays(reference, "warmup")
  prefix = "best_variables/"
  best = flax.traverse_util.unflatten_dict(
    {tuple(name[len(prefix) :].split("/")): value for name, value in arrays.items() if name.startswith(prefix)}
  )
  dataset = inputs_lib.load_dataset(config)
  model = models.build(
    config.model.name, dataset.num_classes, dataset.x_train.shape[1:], kwargs=config.model.get("kwargs")
  )  # as runs.run_single builds it
  warmup_config = stages_lib.config_of_stage(config, t_revision.WARMUP)
  probs = stages_lib.training_probs(warmup_config, dataset, model, best, mesh=mesh_lib.make_mesh(1))
  np.testing.assert_array_equal(product["probs"], probs)
  np.testing.assert_array_equal(product["transition"], t_revision.estimate_transition(probs, percentile=97.0))


def test_export_of_the_delivered_network_loads_back(tmp_path):
  """The delivered network is exported without the revision's dT (runs.network_variables) and predicts as the run's
  final network."""
  config = tiny.get_config("t_revision")
  workdir = str(tmp_path / "run")
  summary = runs.run_single(config, workdir, keep_arrays=True)
  loaded = export_lib.load_model(workdir)
  dataset = inputs_lib.load_dataset(config)
  network = dict(flax.core.unfreeze(summary["arrays"]["stage1"]["params"]))
  network.pop(t_revision.CORRECTION)
  assert set(loaded.variables["params"]) == set(network)
  probs = loaded.predict(np.asarray(dataset.x_test))
  assert float(np.mean(np.argmax(probs, axis=1) == dataset.y_test)) == pytest.approx(summary["last_test_accuracy"])
