"""The f-divergence method (noisy_jax.methods.f_divergence): one whole epoch against a plain JAX re-computation of its
steps (peer loss's program with the f-divergence pair loss), its stages, its settings' checks and its tiny runs."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from experiments.configs import tiny
import method_program_harness as harness
from noisy_jax.experiment import runs
from noisy_jax.methods import f_divergence
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import mesh as mesh_lib

NUM_EXAMPLES, NUM_CLASSES, BATCH = 44, 4, 8  # 6 steps, the last with 4 padding rows
RUN_EPOCHS = 60

# -g(v) and f*(g(v)) written out from CIFAR-10/runner.py:78-86 (activation(x) = -mean g, conjugate(x) = -mean f*).
PLAIN_PAIRS = {
  "Total-Variation": (lambda v: -jnp.tanh(v) / 2.0, lambda v: jnp.tanh(v) / 2.0),
  "Jenson-Shannon": (
    lambda v: jnp.log(1.0 + jnp.exp(-v)) - jnp.log(2.0),
    lambda v: v + jnp.log(1.0 + jnp.exp(-v)) - jnp.log(2.0),
  ),
}


def _run_epoch(settings, images, given, epoch):
  model = harness.tiny_model(NUM_CLASSES)
  state = harness.train_state(model, num_examples=NUM_EXAMPLES, batch=BATCH, run_epochs=RUN_EPOCHS)
  epoch_fn = f_divergence.method(settings).program.build(
    mesh_lib.make_mesh(1), None, batch_size=BATCH, num_examples=NUM_EXAMPLES, augment=harness.augment
  )
  return harness.run_epoch(epoch_fn, state, harness.given_table(given, NUM_CLASSES), images, epoch)


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
  images, given, _ = harness.tiny_data(4, NUM_EXAMPLES, NUM_CLASSES)
  settings = f_divergence.FDivergenceSettings(divergence=divergence, prob_epsilon=eps)
  start, key, (state, _, metrics) = _run_epoch(settings, images, given, epoch)
  assert "peer_alpha" not in metrics
  model = harness.tiny_model(NUM_CLASSES, bn_axis_name=None)
  step_loss = lambda *batch: _reference_loss(model, *batch, divergence, eps)
  params, stats, mean_loss = harness.peer_reference_epoch(
    step_loss, start, key, images, given, 0.01, batch=BATCH, num_examples=NUM_EXAMPLES
  )
  harness.assert_same_variables(state, params, stats, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(float(metrics["train_loss"]), mean_loss, rtol=1e-5)
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
  config = {"name": "f_divergence", "divergence": "Neyman-code", "prob_epsilon": 1e-5}
  harness.assert_registered_own_program("f_divergence", f_divergence.SPEC, config)


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
  harness.assert_refuses_a_typo_and_streamed_or_non_resident_inputs(
    "f_divergence",
    {"divergence": "KLD"},
    "'KLD'",
    "alpha",
    f_divergence.make_epoch_fn,
    f_divergence.FDivergenceSettings(),
    batch=BATCH,
    num_examples=NUM_EXAMPLES,
    num_classes=NUM_CLASSES,
    streamed_match="f-divergence method draws .* streamed",
  )


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
