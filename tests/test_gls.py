"""GLS (noisy_jax.methods.gls) against the original code (UCSC-REAL/negative-label-smoothing loss.py:25-34).

The original's `loss_gls` is written out below in PyTorch, float64, as it is there (log_softmax, gather of the label's
log-probability, the mean of -log p over the classes, sum / batch size): values and gradients with respect to the
logits are compared with noisy_jax's for positive, zero and negative smooth rates, 10 and 100 classes, and the wa / wb
weights. Then the batch objective, the stages, the settings' checks and a tiny run through both stages.
"""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from experiments.configs import tiny
from noisy_jax.core import errors
from noisy_jax.experiment import runs
from noisy_jax.methods import gls
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib


def _original_loss_gls(y, t, smooth_rate=0.1, wa=0, wb=1):
  """loss.py:25-34's loss_gls (its unused epoch argument dropped), on float64 torch tensors."""
  confidence = 1.0 - smooth_rate
  logprobs = F.log_softmax(y, dim=-1)
  nll_loss = -logprobs.gather(dim=-1, index=t.unsqueeze(1))
  nll_loss = nll_loss.squeeze(1)
  smooth_loss = -logprobs.mean(dim=-1)
  loss = (wa + wb * confidence) * nll_loss + wb * smooth_rate * smooth_loss
  num_batch = len(loss.data.cpu().numpy())
  return torch.sum(loss) / num_batch, loss


def _inputs(seed, batch, classes, scale):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(batch, classes)) * scale, rng.integers(0, classes, batch)


RATES = (0.8, 0.1, 0.0, -0.2, -1.0, -4.0, -8.0)


@pytest.mark.parametrize("classes", [10, 100])
@pytest.mark.parametrize("smooth_rate", RATES)
@pytest.mark.parametrize("wa, wb", [(0.0, 1.0), (1.0, 0.0), (0.5, 2.0)])
def test_loss_and_its_gradient_equal_the_original(classes, smooth_rate, wa, wb):
  z, y = _inputs(classes + int(10 * smooth_rate) + 100, 64, classes, 4.0)
  logits = torch.tensor(z, dtype=torch.float64, requires_grad=True)
  loss, per_example = _original_loss_gls(logits, torch.tensor(y), smooth_rate, wa, wb)
  loss.backward()
  with jax.enable_x64():
    one_hot = jax.nn.one_hot(y, classes, dtype=jnp.float64)
    ours = gls.gls_loss(jnp.asarray(z), one_hot, smooth_rate=smooth_rate, wa=wa, wb=wb)
    np.testing.assert_allclose(np.asarray(ours), per_example.detach().numpy(), rtol=1e-12, atol=1e-12)
    objective = gls.method(gls.GlsSettings(smooth_rate=smooth_rate, wa=wa, wb=wb)).objective
    ones, valid = jnp.ones(64, jnp.float64), jnp.ones(64, bool)
    value, grad = jax.value_and_grad(lambda a: objective(a, one_hot, ones, valid)[0])(jnp.asarray(z))
  np.testing.assert_allclose(float(value), loss.item(), rtol=1e-12)
  np.testing.assert_allclose(np.asarray(grad), logits.grad.numpy(), rtol=1e-9, atol=1e-15)


def test_targets_are_the_papers_smoothed_labels_and_sum_to_wa_plus_wb():
  one_hot = jax.nn.one_hot(jnp.array([0, 2]), 4, dtype=jnp.float32)
  t = np.asarray(gls.gls_targets(one_hot, smooth_rate=-0.4))
  np.testing.assert_allclose(t[0], [1.4 - 0.1, -0.1, -0.1, -0.1], rtol=1e-6)  # (1 - r) e_y + r / C
  np.testing.assert_allclose(t.sum(axis=1), 1.0, rtol=1e-6)
  weighted = np.asarray(gls.gls_targets(one_hot, smooth_rate=0.3, wa=0.5, wb=2.0))
  np.testing.assert_allclose(weighted.sum(axis=1), 2.5, rtol=1e-6)


def test_zero_rate_is_cross_entropy_and_positive_rates_agree_with_label_smoothing():
  from noisy_jax.core import losses

  z, y = _inputs(3, 16, 10, 3.0)
  one_hot = jax.nn.one_hot(y, 10)
  np.testing.assert_allclose(gls.gls_loss(z, one_hot, smooth_rate=0.0), losses.cross_entropy(z, one_hot), rtol=1e-6)
  smoothed = losses.smooth_labels(one_hot, epsilon=0.3)
  np.testing.assert_allclose(gls.gls_loss(z, one_hot, smooth_rate=0.3), losses.cross_entropy(z, smoothed), rtol=1e-6)


def test_objective_averages_valid_rows_with_the_tables_weights():
  z, y = _inputs(5, 8, 10, 2.0)
  one_hot = jax.nn.one_hot(y, 10)
  valid = jnp.array([1, 1, 1, 1, 1, 1, 0, 0], bool)
  weights = jnp.array([1, 0.5, 1, 1, 2, 1, 1, 1], jnp.float32)
  objective = registry.build(
    ml_collections.ConfigDict({"name": "gls", "smooth_rate": -2.0}), spec_lib.Context(num_classes=10)
  ).objective
  loss, rows = objective(jnp.asarray(z, jnp.float32), one_hot, weights, valid, rows={"x": 1})
  per_example = np.asarray(gls.gls_loss(z, one_hot, smooth_rate=-2.0))
  expected = np.sum(per_example[:6] * np.asarray(weights)[:6]) / 6
  np.testing.assert_allclose(float(loss), expected, rtol=1e-6)
  assert rows == {"x": 1}


# ------------------------------------------------------------------------------------------------------------
# Stages and settings.


def _config(**fields):
  return ml_collections.ConfigDict({"name": "gls", "smooth_rate": -0.2, **fields})


def test_stages_are_a_cross_entropy_warmup_then_gls_from_its_best_network():
  stages = spec_lib.check_stages(gls.stages(_config()), "gls")
  assert [(s.name, s.network, s.config_section, s.key_stream, s.optimizer_from) for s in stages] == [
    ("warmup", "fresh", "warmup", 0, None),
    ("stage1", "previous_best", None, 1, None),  # a new optimiser, as main_GLS_load.py:134
  ]
  warmup, own = stages
  assert own.build is None and own.delivers and own.scores_labels
  assert not warmup.delivers and not warmup.auxiliary
  assert warmup.build(_config(), spec_lib.Context(num_classes=10)).name == "cross_entropy"
  final = gls.stages(_config(warmup_start="final"))
  assert final[1].network == "previous_final"
  assert gls.stages(_config(warmup=False)) == (spec_lib.OWN_STAGE,)


def test_defaults_are_the_codes():
  settings = gls.settings_of(_config())
  assert (settings.wa, settings.wb, settings.warmup, settings.warmup_start) == (0.0, 1.0, True, "best")


@pytest.mark.parametrize(
  "fields, named",
  [
    ({"smooth_rate": 1.5}, "smooth_rate=1.5"),
    ({"smooth_rate": float("nan")}, "smooth_rate=nan"),
    ({"smooth_rate": float("-inf")}, "smooth_rate=-inf"),
    ({"wa": -1.0}, "wa=-1.0"),
    ({"wa": 0.0, "wb": 0.0}, "wa=0.0"),
    ({"warmup_start": "middle"}, "'middle'"),
  ],
)
def test_bad_settings_raise_naming_the_value(fields, named):
  with pytest.raises(ValueError, match=named.replace("(", r"\(")):
    registry.build(_config(**fields), spec_lib.Context(num_classes=10))
  with pytest.raises(ValueError, match=named):
    gls.stages(_config(**fields))


def test_missing_smooth_rate_and_unknown_fields_raise():
  with pytest.raises(ValueError, match="smooth_rate"):
    registry.build(ml_collections.ConfigDict({"name": "gls"}), spec_lib.Context(num_classes=10))
  with pytest.raises(ValueError, match="smoothing_rate"):
    registry.build(_config(smoothing_rate=0.1), spec_lib.Context(num_classes=10))
  with pytest.raises(errors.InputError, match="smooth_rate=1.01"):
    gls.gls_loss(jnp.zeros((2, 3)), jnp.eye(3)[:2], smooth_rate=1.01)
  gls.check_smooth_rate(1.0)  # the paper's range includes 1: the uniform target


# ------------------------------------------------------------------------------------------------------------
# A run: the warm-up, then GLS.


def test_tiny_run_passes_through_both_stages():
  config = tiny.get_config("gls_negative")
  summary = runs.run_single(config)
  stages = [(r["stage"], r["epoch"]) for r in summary["history"]]
  assert stages == [("warmup", 1), ("warmup", 2)] + [("stage1", e) for e in (1, 2, 3)]
  assert all(np.isfinite(r["train_loss"]) for r in summary["history"])
  assert summary["method"] == "gls" and set(summary) >= {"warmup", "stage1"}
  assert summary["last_test_accuracy"] == summary["stage1"]["last_test_accuracy"] > 0.5
