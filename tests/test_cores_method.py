"""CORES² as a method (noisy_jax.methods.cores): one whole epoch against a plain JAX re-computation of its steps (the
sieve, the prior-weighted CR term, the lr divided by 1 + beta, the method rows, the prior of the next epoch), the
epoch's schedule, the label evidence, the settings' checks, and the tiny run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.configs import tiny
import method_program_harness as harness
from noisy_jax.experiment import runs
from noisy_jax.methods import cores
from noisy_jax.parallel import mesh as mesh_lib

NUM_EXAMPLES, NUM_CLASSES, BATCH = 44, 4, 8  # 6 steps, the last with 4 padding rows
RUN_EPOCHS = 60
SETTINGS = cores.CoresSettings(beta_warmup_epochs=0, beta_ramp_epochs=3, sieve_warmup_epochs=1)


def _run_epoch(settings, images, given, epoch, prior):
  model = harness.tiny_model(NUM_CLASSES)
  state = harness.train_state(model, num_examples=NUM_EXAMPLES, batch=BATCH, run_epochs=RUN_EPOCHS)
  built = cores.method(settings, NUM_CLASSES)
  state = built.program.init_state(state)
  if prior is not None:
    state = state.replace(method_state={cores.PRIOR: jnp.asarray(prior, jnp.float32)})
  table = harness.given_table(given, NUM_CLASSES, built.init_rows(None, NUM_EXAMPLES, NUM_CLASSES))
  epoch_fn = built.program.build(
    mesh_lib.make_mesh(1), None, batch_size=BATCH, num_examples=NUM_EXAMPLES, augment=harness.augment, normalize=None
  )
  return (*harness.run_epoch(epoch_fn, state, table, images, epoch), built)


def _reference_loss(model, stats, x, y, valid, prior, beta, sieve_on):
  """One step in plain JAX: l = CE - beta sum_c pi_c (-log(p_c + 1e-8)); l_sel = CE - mean_c(-log(p_c + 1e-8));
  kept = valid and (not sieve_on or l_sel <= 0); sum(kept l) / max(#kept, 1)."""

  def loss(params):
    z, upd = model.apply({"params": params, "batch_stats": stats}, x, train=True, mutable=["batch_stats"])
    p = jax.nn.softmax(z)
    ce = -jnp.take_along_axis(jax.nn.log_softmax(z), y[:, None], axis=1)[:, 0]
    neg_log = -jnp.log(p + 1e-8)
    per_example = ce - beta * jnp.sum(prior[None, :] * neg_log, axis=1)
    margin = jax.lax.stop_gradient(ce - jnp.mean(neg_log, axis=1))
    kept = valid * jnp.where(sieve_on, (margin <= 0).astype(jnp.float32), 1.0)
    return jnp.sum(kept * per_example) / jnp.maximum(jnp.sum(kept), 1.0), (upd["batch_stats"], margin, kept, z)

  return loss


@pytest.mark.parametrize("stored_prior", [False, True])
def test_one_epoch_is_the_sieve_steps_recomputed_plainly(stored_prior):
  images, given, _ = harness.tiny_data(4, NUM_EXAMPLES, NUM_CLASSES)
  initial = np.bincount(given, minlength=NUM_CLASSES) / NUM_EXAMPLES
  prior = np.array([0.1, 0.2, 0.3, 0.4]) if stored_prior else initial  # a stored prior, or pi_0 (zeros stored)
  epoch = 2  # loop epoch 1: beta = linspace(0, 2, 3)[1] = 1, lr factor 1/2, the sieve on
  start, key, (state, table, metrics), built = _run_epoch(
    SETTINGS, images, given, epoch, prior if stored_prior else None
  )
  beta, factor = 1.0, 0.5
  assert float(metrics["cores_beta"]) == beta and float(metrics["cores_lr_factor"]) == factor
  model = harness.tiny_model(NUM_CLASSES, bn_axis_name=None)
  params, stats = harness.start_params_and_stats(start)
  sgd, opt_state = harness.reference_sgd(0.1, params)  # loop epoch 1: before 25
  order, valid = harness.epoch_order(key, NUM_EXAMPLES, BATCH)
  margins, dropped = np.zeros(NUM_EXAMPLES), np.zeros(NUM_EXAMPLES)
  counts, losses, correct = np.zeros(NUM_CLASSES), [], 0
  for step in range(order.shape[0]):
    x = harness.step_view(key, step, images, order[step])
    y = jnp.asarray(given[order[step]])
    loss = _reference_loss(model, stats, x, y, valid[step], jnp.asarray(prior, jnp.float32), beta, True)
    lr_divided = lambda u: factor * u  # lr / (1 + beta)
    (value, (stats, margin, kept, z)), params, opt_state = harness.reference_step(
      sgd, opt_state, params, loss, lr_divided
    )
    losses.append(float(value) * valid[step].sum())
    correct += int(np.sum((np.argmax(z, -1) == np.asarray(y)) * valid[step]))
    for b in range(BATCH):
      if valid[step, b]:
        margins[order[step, b]] = float(margin[b])
        dropped[order[step, b]] = 1.0 - float(kept[b])
        counts[given[order[step, b]]] += 1.0 - float(kept[b])
  assert 0 < dropped.sum() < NUM_EXAMPLES  # the sieve dropped some rows, not all
  harness.assert_same_variables(state, params, stats, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(float(metrics["train_loss"]), sum(losses) / NUM_EXAMPLES, rtol=1e-5)
  np.testing.assert_allclose(float(metrics["train_accuracy_given"]), correct / NUM_EXAMPLES, rtol=1e-6)
  np.testing.assert_allclose(float(metrics["cores_sieved_fraction"]), dropped.sum() / NUM_EXAMPLES, rtol=1e-12)
  np.testing.assert_allclose(table.method_rows[cores.SIEVE_MARGIN], margins, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(table.method_rows[cores.SIEVED_OUT], dropped)
  # phase1.py:211-212: the next epoch's prior from the *initial* prior and this epoch's counts.
  next_prior = (initial * NUM_EXAMPLES - counts) / np.sum(initial * NUM_EXAMPLES - counts)
  np.testing.assert_allclose(state.method_state[cores.PRIOR], next_prior, rtol=1e-6)
  evidence = built.label_evidence(jax.tree.map(np.asarray, table))
  np.testing.assert_array_equal(evidence.is_issue, margins > 0)
  assert np.all((evidence.quality > 0) & (evidence.quality < 1))


def test_before_the_sieve_every_row_is_kept_and_beta_zero_is_plain_cross_entropy():
  settings = cores.CoresSettings()  # the code's: beta 0 for 10 epochs, the sieve from loop epoch 31
  images, given, _ = harness.tiny_data(5, NUM_EXAMPLES, NUM_CLASSES)
  _, _, (state, table, metrics), _ = _run_epoch(settings, images, given, 1, None)
  assert metrics["cores_beta"] == 0.0 and metrics["cores_lr_factor"] == 1.0 and metrics["cores_sieved_fraction"] == 0
  assert not np.any(table.method_rows[cores.SIEVED_OUT])
  initial = np.bincount(given, minlength=NUM_CLASSES) / NUM_EXAMPLES
  np.testing.assert_allclose(state.method_state[cores.PRIOR], initial, rtol=1e-6)


def test_the_schedule_follows_the_settings_and_the_run_clock():
  settings = cores.CoresSettings(epochs_before=2)
  assert [settings.beta(t) for t in (0, 9, 10, 39, 40, 150)] == [0.0, 0.0, 0.0, 2.0, 2.0, 2.0]
  assert settings.sieve_on(31) and not settings.sieve_on(30)
  assert settings.lr_factor(39) == 1.0 / 3.0 and cores.CoresSettings(divide_lr=False).lr_factor(39) == 1.0


def test_the_method_is_registered_with_its_own_program():
  config = {"name": "cores", "use_prior": False, "sieve_mean": "prior", "beta_max": 1.0}
  built = harness.assert_registered_own_program("cores", cores.SPEC, config)
  assert built.label_evidence is not None


@pytest.mark.parametrize(
  "field, value",
  [
    ("beta_warmup_epochs", -1),
    ("beta_ramp_epochs", 0),
    ("beta_max", -0.5),
    ("sieve_warmup_epochs", -2),
    ("sieve_warmup_epochs", 1.5),
    ("use_prior", "yes"),
    ("divide_lr", 1),
    ("sieve_mean", "median"),
    ("epochs_before", -1),
  ],
)
def test_bad_settings_raise_naming_the_value(field, value):
  with pytest.raises(ValueError, match=f"{value!r}"):
    cores.CoresSettings(**{field: value})


def test_a_config_typo_and_inputs_that_are_not_resident_are_refused():
  harness.assert_refuses_a_typo_and_streamed_or_non_resident_inputs(
    "cores",
    {"sieve_mean": "median"},
    "'median'",
    "warmup",
    cores.make_epoch_fn,
    SETTINGS,
    batch=BATCH,
    num_examples=NUM_EXAMPLES,
    num_classes=NUM_CLASSES,
  )


def test_the_tiny_run_trains_its_three_epochs():
  summary = runs.run_single(tiny.get_config("cores"))
  history = summary["history"]
  assert [r["epoch"] for r in history] == [1, 2, 3]
  assert [r["cores_beta"] for r in history] == [0.0, 1.0, 2.0]
  assert history[0]["cores_sieved_fraction"] == 0.0 and history[1]["cores_sieved_fraction"] > 0.0
  assert all(np.isfinite(r["train_loss"]) for r in history)
  assert summary["method"] == "cores" and summary["last_test_accuracy"] > 0.5
