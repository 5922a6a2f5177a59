"""Peer loss as a method (noisy_jax.methods.peer_loss): one whole epoch against a plain JAX re-computation of its
steps, the epoch's alpha, and its settings' checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.configs import tiny
import method_program_harness as harness
from noisy_jax.core import peer_loss as peer_core
from noisy_jax.experiment import runs
from noisy_jax.methods import peer_loss
from noisy_jax.parallel import mesh as mesh_lib

NUM_EXAMPLES, NUM_CLASSES, BATCH = 44, 4, 8  # 6 steps, the last with 4 padding rows
RUN_EPOCHS = 60


def _run_epoch(settings, images, given, epoch):
  model = harness.tiny_model(NUM_CLASSES)
  state = harness.train_state(model, num_examples=NUM_EXAMPLES, batch=BATCH, run_epochs=RUN_EPOCHS)
  epoch_fn = peer_loss.make_epoch_fn(
    mesh_lib.make_mesh(1), settings=settings, batch_size=BATCH, num_examples=NUM_EXAMPLES, augment=harness.augment
  )
  return harness.run_epoch(epoch_fn, state, harness.given_table(given, NUM_CLASSES), images, epoch)


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
  images, given, _ = harness.tiny_data(4, NUM_EXAMPLES, NUM_CLASSES)
  settings = peer_loss.PeerLossSettings(alpha="sparse")
  start, key, (state, _, metrics) = _run_epoch(settings, images, given, epoch)
  alpha = peer_core.alpha_at(epoch - 1, "sparse")
  assert alpha > 0 and float(metrics["peer_alpha"]) == alpha
  model = harness.tiny_model(NUM_CLASSES, bn_axis_name=None)
  order, valid = harness.epoch_order(key, NUM_EXAMPLES, BATCH)
  assert valid[-1].sum() == NUM_EXAMPLES - (order.shape[0] - 1) * BATCH
  step_loss = lambda *batch: _reference_loss(model, *batch, alpha)
  params, stats, mean_loss = harness.peer_reference_epoch(
    step_loss, start, key, images, given, 0.01, batch=BATCH, num_examples=NUM_EXAMPLES
  )  # loop epoch 29: lr 0.01, past 25
  harness.assert_same_variables(state, params, stats, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(float(metrics["train_loss"]), mean_loss, rtol=1e-5)
  assert not np.allclose(state.params["Dense_1"]["kernel"], start["params"]["Dense_1"]["kernel"])


def test_the_epochs_alpha_follows_the_setting():
  for setting in ("sparse", "uniform"):
    for loop_epoch in (0, 19, 20, 45, 400):
      settings = peer_loss.PeerLossSettings(alpha=setting, epochs_before=2)
      assert peer_loss.epoch_alpha(settings, loop_epoch) == peer_core.alpha_at(loop_epoch, setting)
  assert peer_loss.epoch_alpha(peer_loss.PeerLossSettings(alpha=0.25), 3) == 0.25


def test_the_method_is_registered_with_its_own_program():
  config = {"name": "peer_loss", "alpha": "uniform", "log_epsilon": 1e-5}
  harness.assert_registered_own_program("peer_loss", peer_loss.SPEC, config)


@pytest.mark.parametrize(
  "field, value",
  [("alpha", "dense"), ("alpha", -0.5), ("log_epsilon", -1e-3), ("log_epsilon", 2.0), ("epochs_before", -1)],
)
def test_bad_settings_raise_naming_the_value(field, value):
  settings = peer_loss.PeerLossSettings(**{field: value})
  with pytest.raises(ValueError, match=f"{value!r}"):
    peer_loss.method(settings)


def test_a_config_typo_and_inputs_that_are_not_resident_are_refused():
  harness.assert_refuses_a_typo_and_streamed_or_non_resident_inputs(
    "peer_loss",
    {"alpha": "dense"},
    "'dense'",
    "warmup",
    peer_loss.make_epoch_fn,
    peer_loss.PeerLossSettings(),
    batch=BATCH,
    num_examples=NUM_EXAMPLES,
    num_classes=NUM_CLASSES,
  )


def test_the_tiny_run_trains_its_three_epochs():
  summary = runs.run_single(tiny.get_config("peer_loss"))
  assert [r["epoch"] for r in summary["history"]] == [1, 2, 3]
  assert all(np.isfinite(r["train_loss"]) and r["peer_alpha"] == 0.5 for r in summary["history"])
  assert summary["method"] == "peer_loss" and summary["last_test_accuracy"] > 0.5
