"""PES-semi as a method (noisy_jax.methods.pes_semi): its stages, one whole MixMatch epoch against a plain JAX / NumPy
re-computation of its steps, and its settings' checks."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

import method_program_harness as harness
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.methods import dividemix
from noisy_jax.methods import pes
from noisy_jax.methods import pes_semi
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import optim

NUM_EXAMPLES, NUM_CLASSES, BATCH, STEPS = 48, 4, 8, 5
EPOCHS_BEFORE, EPOCH, RUN_EPOCHS, LAMBDA_U = 5, 3, 12, 15.0  # loop epoch 5 + 3 - 1 = 7: ramp 2/16.., alpha 0.75


def test_pes_semi_declares_warmup_the_classifier_refine_and_its_mixmatch_stage():
  stages = spec_lib.check_stages(pes_semi.stages(ml_collections.ConfigDict({"name": "pes_semi"})), "pes_semi")
  assert [s.name for s in stages] == ["warmup", "refine1", "stage1"]
  assert [s.renew for s in stages] == [(), (optim.CLASSIFIER,), ()]
  assert [s.trainable for s in stages] == [(), (optim.CLASSIFIER,), ()]
  assert [s.network for s in stages] == ["fresh", "previous_final", "previous_final"]
  assert [s.config_section for s in stages] == ["warmup", "refine1", None]
  assert [s.delivers for s in stages] == [False, False, True]
  assert [s.scores_labels for s in stages] == [False, False, True]
  assert stages[-1].optimizer_from == "warmup" and stages[-1].build is None
  config = ml_collections.ConfigDict(
    {
      "num_epochs": 280,
      "optimizer": {"learning_rate": 0.02},
      "warmup": {"num_epochs": 20},
      "refine1": {"num_epochs": 5},
    }
  )
  clocks = [stages_lib.stage_clock(s, stages_lib.config_of_stage(config, s)) for s in stages]
  assert clocks == [20, 0, 280]  # the MixMatch stage starts at loop epoch T1 = 20 (0-based), 300 in all
  two = pes_semi.stages(
    ml_collections.ConfigDict({"refine_modules": [["stage4", optim.CLASSIFIER], [optim.CLASSIFIER]]})
  )
  assert [s.name for s in two] == ["warmup", "refine1", "refine2", "stage1"]
  assert [s.clock_epochs for s in two] == [None, 0, 0, None]
  with pytest.raises(ValueError, match="refine_modules"):
    pes_semi.stages(ml_collections.ConfigDict({"refine_modules": [[]]}))
  assert registry.get("pes_semi") is pes_semi.SPEC and "pes_semi" in registry.tiny_cases()


def _setup(seed):
  images, given, _ = harness.tiny_data(seed, NUM_EXAMPLES, NUM_CLASSES)
  return images, given, harness.tiny_model(NUM_CLASSES)  # with BatchNorm


def _semi_epoch(settings, images, given, model):
  state = harness.train_state(model, num_examples=NUM_EXAMPLES, batch=BATCH, run_epochs=RUN_EPOCHS, lr_boundaries=(6,))
  table = harness.given_table(given, NUM_CLASSES, pes.init_rows(NUM_EXAMPLES))
  epoch_fn = pes_semi.make_epoch_fn(
    mesh_lib.make_mesh(1), settings=settings, batch_size=BATCH, num_examples=NUM_EXAMPLES, augment=harness.augment
  )
  return harness.run_epoch(epoch_fn, state, table, images, EPOCH)


def _softmax(z):
  z = np.asarray(z, np.float64)
  e = np.exp(z - z.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _reference_selection(model, variables, images, given, key):
  """PES_semi.py:167-195 in NumPy: two noisy views per chunk of B rows (pes.view_predictions' keys), eval mode."""
  select_key = jax.random.fold_in(key, pes.SELECTION_STREAM)
  probs = []
  for start in range(0, NUM_EXAMPLES, BATCH):
    x = jnp.asarray(images[start : start + BATCH])
    views = [
      model.apply(variables, harness.augment(jax.random.fold_in(select_key, v), x, None), train=False) for v in (0, 1)
    ]
    probs.append((_softmax(views[0]) + _softmax(views[1])) / 2)
  probs = np.concatenate(probs)
  selected = probs.argmax(1) == given
  counts = np.bincount(given[selected], minlength=NUM_CLASSES).astype(float)
  unclipped = np.where(counts > 0, counts[counts > 0].mean() / np.maximum(counts, 1), 0.0)
  return probs, selected, unclipped


def _reference_loss(model, params, stats, x1, x2, u1, u2, labels, weights, step_key, ramp):
  """One step's loss (PES_semi.py:95-132) in plain JAX; returns (loss, new batch stats)."""
  apply = lambda p, s, x: model.apply({"params": p, "batch_stats": s}, x, train=True, mutable=["batch_stats"])
  z1, upd = apply(params, stats, u1)
  z2, upd = apply(params, upd["batch_stats"], u2)
  p = (jax.nn.softmax(z1) + jax.nn.softmax(z2)) / 2
  targets_u = jax.lax.stop_gradient(p**2 / jnp.sum(p**2, axis=1, keepdims=True))  # T = 0.5
  targets_x = jax.nn.one_hot(labels, NUM_CLASSES)
  inputs = jnp.concatenate([x1, x2, u1, u2])
  targets = jnp.concatenate([targets_x, targets_x, targets_u, targets_u])
  lam, perm = dividemix.mix_coefficients(step_key, inputs.shape[0], alpha=0.75)  # loop epoch 7 >= 12 / 2
  mixed, mixed_t = lam * inputs + (1 - lam) * inputs[perm], lam * targets + (1 - lam) * targets[perm]
  stats = upd["batch_stats"]
  cut = 2 * x1.shape[0]

  def loss(prm):
    logits, new = apply(prm, stats, mixed)
    lx = jnp.sum(-jnp.mean(jax.nn.log_softmax(logits[:cut]) * mixed_t[:cut], axis=0) * weights)
    lu = jnp.mean((jax.nn.softmax(logits[cut:]) - mixed_t[cut:]) ** 2)
    return lx + ramp * lu, new["batch_stats"]

  return loss


def test_one_mixmatch_epoch_is_the_selection_then_the_steps_recomputed_plainly():
  images, given, model = _setup(4)
  settings = pes_semi.PesSemiSettings(
    lambda_u=LAMBDA_U, steps_per_epoch=STEPS, epochs_before=EPOCHS_BEFORE, run_epochs=RUN_EPOCHS
  )
  start, key, (state, table, metrics) = _semi_epoch(settings, images, given, model)
  model = harness.tiny_model(NUM_CLASSES, bn_axis_name=None)  # BatchNorm over the batch it is given: the reference's
  probs, selected, unclipped = _reference_selection(model, start, images, given, key)
  assert unclipped.max() > 3  # the clip at 3 matters in this case
  weights = np.minimum(unclipped, 3.0)
  np.testing.assert_array_equal(np.asarray(table.method_rows[pes.SELECTED]) == 1, selected)
  np.testing.assert_allclose(table.method_rows[pes.GIVEN_PROBABILITY], probs[np.arange(NUM_EXAMPLES), given], 1e-5)
  np.testing.assert_allclose(float(metrics["pes_selected_fraction"]), selected.mean(), rtol=1e-6)
  # The split (PES_semi.py:176-177) and the orders: confident rows in batches of B_x, the others in batches of B_u.
  n_c, n_u = selected.sum(), (~selected).sum()
  b_u = BATCH // 2 if n_u > n_c else int(n_u / NUM_EXAMPLES * BATCH)
  rows_x, rows_u = pes_semi.epoch_orders(key, selected, BATCH, STEPS)
  assert rows_x.shape == (STEPS, BATCH - b_u) and rows_u.shape == (STEPS, b_u) and 0 < b_u < BATCH
  assert set(rows_x.ravel()) <= set(np.flatnonzero(selected)) and set(rows_u.ravel()) <= set(np.flatnonzero(~selected))
  assert metrics["pes_steps"] == STEPS and metrics["pes_unlabelled_batch"] == b_u
  # The steps: SGD (momentum 0.9, coupled wd 0.01) at loop epoch 7's rate, 0.1 x 0.1 past boundary 6.
  params, stats = harness.start_params_and_stats(start)
  sgd, opt_state = harness.reference_sgd(0.01, params)
  loop_epoch = EPOCHS_BEFORE + EPOCH - 1
  for step in range(STEPS):
    keys = jax.random.split(jax.random.fold_in(jax.random.fold_in(key, pes_semi.STEP_STREAM), step), 3)
    kx, ku = jax.random.split(keys[0]), jax.random.split(keys[1])
    x, u = jnp.asarray(images[rows_x[step]]), jnp.asarray(images[rows_u[step]])
    ramp = LAMBDA_U * np.clip((loop_epoch + step / STEPS - EPOCHS_BEFORE) / 16, 0.0, 1.0)
    loss = _reference_loss(
      model,
      params,
      stats,
      harness.augment(kx[0], x, None),
      harness.augment(kx[1], x, None),
      harness.augment(ku[0], u, None),
      harness.augment(ku[1], u, None),
      given[rows_x[step]],
      jnp.asarray(weights, jnp.float32),
      keys[2],
      ramp,
    )
    grads, stats = jax.grad(loss, has_aux=True)(params)
    updates, opt_state = sgd.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
  harness.assert_same_variables(state, params, stats, rtol=1e-5, atol=1e-6)
  assert not np.allclose(state.params["Dense_1"]["kernel"], start["params"]["Dense_1"]["kernel"])


def test_cycled_batches_reshuffle_each_pass_and_cycle_a_short_set():
  key = jax.random.PRNGKey(0)
  rows = np.arange(10, 17)  # 7 rows, batches of 3: 2 per pass
  batches = pes_semi.cycled_batches(key, rows, 3, 5)
  assert batches.shape == (5, 3)
  for p in range(2):
    flat = batches[2 * p : 2 * p + 2].ravel()
    assert len(set(flat)) == 6 and set(flat) <= set(rows)
  short = pes_semi.cycled_batches(key, np.asarray([4, 9]), 3, 2)
  assert short.shape == (2, 3) and set(short.ravel()) == {4, 9}
  assert pes_semi.cycled_batches(key, rows, 0, 4).shape == (4, 0)
  empty_x, empty_u = pes_semi.epoch_orders(key, np.zeros(6, bool), 4, 3)
  assert empty_x.shape[0] == 0 and empty_u.shape[0] == 0


@pytest.mark.parametrize(
  "field, value",
  [
    ("lambda_u", -1.0),
    ("temperature", 0.0),
    ("alpha", -2.0),
    ("late_alpha", 0.0),
    ("max_class_weight", -3.0),
    ("steps_per_epoch", 0),
    ("run_epochs", 0),
  ],
)
def test_bad_settings_raise_naming_the_value(field, value):
  settings = pes_semi.PesSemiSettings(**{field: value})
  with pytest.raises(ValueError, match=f"{field}={value!r}"):
    pes_semi.method(settings)


def test_the_epoch_program_refuses_an_alpha_switch_without_the_runs_length():
  with pytest.raises(ValueError, match="run_epochs"):
    pes_semi.make_epoch_fn(mesh_lib.make_mesh(1), settings=pes_semi.PesSemiSettings(), batch_size=8, num_examples=16)
  method_config = ml_collections.ConfigDict({"name": "pes_semi", "lambda_u": -5.0})
  with pytest.raises(ValueError, match="lambda_u=-5.0"):
    registry.build(method_config, spec_lib.Context(num_classes=3, num_epochs=10, epochs_before=2))
