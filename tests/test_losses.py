"""Losses against closed forms, independent float64 NumPy re-computations and paper facts (REFERENCE.md)."""

from __future__ import annotations

import functools

import jax
from jax import test_util as jtu
import jax.numpy as jnp
import numpy as np
import pytest

import loss_references
from noisy_jax.core import losses

C = 5


# ------------------------------------------------------------------------------------------------------------
# Float64 NumPy references, written independently of the library.


def np_log_softmax(z):
  z = np.asarray(z, np.float64)
  m = z.max(axis=-1, keepdims=True)
  return z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def np_softmax(z):
  return np.exp(np_log_softmax(z))


def np_ce(z, y):
  return -(y * np_log_softmax(z)).sum(-1)


def np_mae(z, y):
  return np.abs(np_softmax(z) - y).sum(-1)


def np_gce(z, y, q):
  return (y * (1 - np_softmax(z) ** q) / q).sum(-1)


def np_truncated_gce(z, y, q, k):
  p = np_softmax(z)
  per_class = np.where(p <= k, (1 - k**q) / q, (1 - p**q) / q)
  return (y * per_class).sum(-1)


def np_el_per_class(p, log_end):
  """EL(p) = -log p + bonus(p) for an array of probabilities p (float64)."""
  p = np.asarray(p, np.float64)
  bonus = np.log(np.maximum(1 - p, 1e-5))
  if log_end < 1:
    tangent = (p - log_end) / (log_end - 1) + np.log(1 - log_end)
    bonus = np.where(p > log_end, tangent, bonus)
  return -np.log(p) + bonus


def np_el(z, y, log_end):
  return (y * np_el_per_class(np_softmax(z), log_end)).sum(-1)


def np_kl(y, log_q):
  """sum_c y_c (log y_c - log_q_c) with 0 log 0 = 0."""
  y = np.asarray(y, np.float64)
  log_q = np.broadcast_to(np.asarray(log_q, np.float64), y.shape)
  pos = y > 0
  return np.where(pos, y * (np.log(np.where(pos, y, 1.0)) - np.where(pos, log_q, 0.0)), 0.0).sum(-1)


def np_kl_logits(z, y):
  return np_kl(y, np_log_softmax(z))


def np_entropy(z):
  p = np_softmax(z)
  return -(p * np_log_softmax(z)).sum(-1)


def np_rce(z, y, a=-4.0):
  y = np.asarray(y, np.float64)
  log_y = np.full_like(y, a)
  pos = y > 0
  log_y[pos] = np.maximum(np.log(y[pos]), a)
  return -(np_softmax(z) * log_y).sum(-1)


def np_nce(z, y):
  ls = np_log_softmax(z)
  return (y * ls).sum(-1) / ls.sum(-1)


def np_focal(z, y, gamma):
  p = np_softmax(z)
  return -(y * (1 - p) ** gamma * np_log_softmax(z)).sum(-1)


def np_bootstrap_soft(z, y, beta):
  p = np_softmax(z)
  return -((beta * y + (1 - beta) * p) * np_log_softmax(z)).sum(-1)


def np_bootstrap_hard(z, y, beta):
  hard = np.eye(z.shape[-1])[np.argmax(z, -1)]
  return -((beta * y + (1 - beta) * hard) * np_log_softmax(z)).sum(-1)


def np_prior_penalty(z, prior):
  mean_p = np_softmax(z).reshape(-1, z.shape[-1]).mean(0)
  return np_kl(prior, np.log(mean_p))


def np_joint_optimization(z, y, prior, alpha, beta):
  return np_kl_logits(z, y).mean() + alpha * np_prior_penalty(z, prior) + beta * np_entropy(z).mean()


# ------------------------------------------------------------------------------------------------------------
# Data.


def random_logits(seed, shape=(8, C), scale=3.0):
  return np.random.default_rng(seed).normal(size=shape).astype(np.float32) * scale


def one_hot_labels(seed, shape=(8,), num_classes=C):
  return np.eye(num_classes, dtype=np.float32)[np.random.default_rng(seed).integers(0, num_classes, shape)]


def soft_labels(seed, shape=(8,), num_classes=C):
  """Random probability vectors with some exact zeros (0 log 0 must be 0)."""
  rng = np.random.default_rng(seed)
  y = rng.dirichlet(np.ones(num_classes), size=shape)
  y[..., 0] = 0.0
  return (y / y.sum(-1, keepdims=True)).astype(np.float32)


def extreme_logits(num_classes=C):
  rows = [
    [1e4, -1e4] + [0.0] * (num_classes - 2),
    [-1e4, 1e4] + [-1e4] * (num_classes - 2),
    [1e4] * num_classes,
    [-1e4] * num_classes,
    [1e4, 1e4] + [-1e4] * (num_classes - 2),
    [-1e4] * (num_classes - 1) + [1e4],
    [30.0, -30.0] + [0.0] * (num_classes - 2),
    [0.0] * num_classes,
  ]
  return np.asarray(rows, np.float32)


# The registry with the NumPy reference of each loss at its default hyper-parameters.
NUMPY_REFERENCES = {
  "cross_entropy": np_ce,
  "mean_absolute_error": np_mae,
  "generalized_cross_entropy": functools.partial(np_gce, q=0.7),
  "truncated_generalized_cross_entropy": functools.partial(np_truncated_gce, q=0.7, k=0.5),
  "encouraging_loss": functools.partial(np_el, log_end=0.75),
  "kl_divergence": np_kl_logits,
  "reverse_cross_entropy": np_rce,
  "symmetric_cross_entropy": lambda z, y: 0.1 * np_ce(z, y) + 1.0 * np_rce(z, y),
  "normalized_cross_entropy": np_nce,
  "nce_rce": lambda z, y: np_nce(z, y) + np_rce(z, y),
  "nce_mae": lambda z, y: np_nce(z, y) + np_mae(z, y),
  "bootstrap_soft": functools.partial(np_bootstrap_soft, beta=0.95),
  "bootstrap_hard": functools.partial(np_bootstrap_hard, beta=0.8),
  "focal_loss": functools.partial(np_focal, gamma=2.0),
  **loss_references.NUMPY_REFERENCES,
}

LABEL_KINDS = {"one_hot": one_hot_labels, "soft": soft_labels}


def test_registry_names_every_loss_once():
  assert set(losses.names()) == set(losses.LOSSES) == set(NUMPY_REFERENCES)
  for name in losses.names():
    assert losses.get(name).__name__ == name


# ------------------------------------------------------------------------------------------------------------
# Values against NumPy.


@pytest.mark.parametrize("label_kind", sorted(LABEL_KINDS))
@pytest.mark.parametrize("name", sorted(NUMPY_REFERENCES))
def test_default_values_match_numpy(name, label_kind):
  z = random_logits(1)
  y = LABEL_KINDS[label_kind](2)
  got = losses.get(name)(z, y)
  assert got.shape == (8,) and got.dtype == jnp.float32
  np.testing.assert_allclose(got, NUMPY_REFERENCES[name](z, y), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("label_kind", sorted(LABEL_KINDS))
def test_non_default_hyper_parameters_match_numpy(label_kind):
  z = random_logits(3)
  y = LABEL_KINDS[label_kind](4)
  check = functools.partial(np.testing.assert_allclose, rtol=2e-5, atol=2e-5)
  check(losses.generalized_cross_entropy(z, y, q=0.3), np_gce(z, y, 0.3))
  check(losses.truncated_generalized_cross_entropy(z, y, q=0.4, k=0.2), np_truncated_gce(z, y, 0.4, 0.2))
  check(losses.encouraging_loss(z, y, log_end=0.5), np_el(z, y, 0.5))
  # log(1 - p) with 1 - p ~ 5e-5 inherits float32's rounding of log_softmax: a looser tolerance.
  np.testing.assert_allclose(losses.encouraging_loss(z, y, log_end=1.0), np_el(z, y, 1.0), rtol=1e-4)
  check(losses.reverse_cross_entropy(z, y, log_zero=-6.0), np_rce(z, y, -6.0))
  check(
    losses.symmetric_cross_entropy(z, y, alpha=0.5, beta=2.0, log_zero=-2.0),
    0.5 * np_ce(z, y) + 2.0 * np_rce(z, y, -2.0),
  )
  check(losses.nce_rce(z, y, alpha=3.0, beta=0.2), 3.0 * np_nce(z, y) + 0.2 * np_rce(z, y))
  check(losses.nce_mae(z, y, alpha=0.4, beta=5.0), 0.4 * np_nce(z, y) + 5.0 * np_mae(z, y))
  check(losses.focal_loss(z, y, gamma=0.5), np_focal(z, y, 0.5))
  check(losses.bootstrap_soft(z, y, beta=0.3), np_bootstrap_soft(z, y, 0.3))
  check(losses.bootstrap_hard(z, y, beta=0.3), np_bootstrap_hard(z, y, 0.3))
  check(losses.entropy(z), np_entropy(z))


def test_closed_forms_for_one_hot_labels():
  z = random_logits(5)
  y = one_hot_labels(6)
  p_y = (np_softmax(z) * y).sum(-1)
  np.testing.assert_allclose(losses.mean_absolute_error(z, y), 2 - 2 * p_y, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(losses.reverse_cross_entropy(z, y), 4.0 * (1 - p_y), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(losses.kl_divergence(z, y), losses.cross_entropy(z, y), rtol=1e-6)
  np.testing.assert_allclose(losses.focal_loss(z, y, gamma=0.0), losses.cross_entropy(z, y), rtol=1e-6)
  np.testing.assert_allclose(losses.bootstrap_soft(z, y, beta=1.0), losses.cross_entropy(z, y), rtol=1e-6)
  np.testing.assert_allclose(losses.bootstrap_hard(z, y, beta=1.0), losses.cross_entropy(z, y), rtol=1e-6)
  nce = np.asarray(losses.normalized_cross_entropy(z, y))
  assert np.all((nce > 0) & (nce < 1))


def test_kl_differs_from_cross_entropy_by_label_entropy():
  z = random_logits(7)
  y = soft_labels(8)
  label_entropy = -np.sum(np.where(y > 0, y * np.log(np.where(y > 0, y, 1)), 0), -1)
  np.testing.assert_allclose(
    losses.cross_entropy(z, y) - losses.kl_divergence(z, y), label_entropy, rtol=1e-5, atol=1e-5
  )


def test_bootstrap_soft_is_beta_ce_plus_entropy_gradient_included():
  z = random_logits(9)
  y = soft_labels(10)
  beta = 0.7
  mixed = lambda l: jnp.sum(beta * losses.cross_entropy(l, y) + (1 - beta) * losses.entropy(l))
  np.testing.assert_allclose(losses.bootstrap_soft(z, y, beta=beta), np_bootstrap_soft(z, y, beta), rtol=2e-5)
  np.testing.assert_allclose(
    jax.grad(lambda l: jnp.sum(losses.bootstrap_soft(l, y, beta=beta)))(z), jax.grad(mixed)(z), rtol=1e-5, atol=1e-6
  )


def test_bootstrap_hard_has_no_gradient_through_argmax():
  z = random_logits(11)
  y = soft_labels(12)
  beta = 0.6
  hard = np.eye(C, dtype=np.float32)[np.argmax(z, -1)]
  expected = jax.grad(lambda l: jnp.sum(losses.cross_entropy(l, beta * y + (1 - beta) * hard)))(z)
  got = jax.grad(lambda l: jnp.sum(losses.bootstrap_hard(l, y, beta=beta)))(z)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_smooth_labels():
  y = one_hot_labels(13)
  np.testing.assert_allclose(losses.smooth_labels(y, epsilon=0.1), 0.9 * y + 0.1 / C, rtol=1e-6)
  np.testing.assert_allclose(losses.smooth_labels(y, epsilon=1.0), np.full_like(y, 1 / C), rtol=1e-6)
  np.testing.assert_allclose(np.sum(losses.smooth_labels(soft_labels(14), epsilon=0.3), -1), 1.0, rtol=1e-6)


# ------------------------------------------------------------------------------------------------------------
# GCE and truncated Lq (Zhang & Sabuncu 2018).


@pytest.mark.parametrize("label_kind", sorted(LABEL_KINDS))
def test_gce_tends_to_cross_entropy_as_q_goes_to_zero(label_kind):
  z = random_logits(15)
  y = LABEL_KINDS[label_kind](16)
  ce = np.asarray(losses.cross_entropy(z, y))
  gce = np.asarray(losses.generalized_cross_entropy(z, y, q=1e-4))
  assert np.max(np.abs(gce - ce) / ce) < 1e-3
  grad_ce = jax.grad(lambda l: jnp.sum(losses.cross_entropy(l, y)))(z)
  grad_gce = jax.grad(lambda l: jnp.sum(losses.generalized_cross_entropy(l, y, q=1e-4)))(z)
  np.testing.assert_allclose(grad_gce, grad_ce, rtol=1e-2, atol=1e-3)


def test_gce_at_q_one_is_half_mae_for_one_hot_labels():
  z = random_logits(17)
  y = one_hot_labels(18)
  np.testing.assert_allclose(
    losses.generalized_cross_entropy(z, y, q=1.0), losses.mean_absolute_error(z, y) / 2, rtol=1e-5, atol=1e-6
  )


def test_truncated_lq_is_constant_below_k_and_gce_above():
  q, k = 0.7, 0.5
  z = random_logits(19, shape=(64, C), scale=2.0)
  y = one_hot_labels(20, shape=(64,))
  p_y = (np_softmax(z) * y).sum(-1)
  below = p_y <= k
  assert 5 < below.sum() < 59  # both regimes are exercised
  value = np.asarray(losses.truncated_generalized_cross_entropy(z, y, q=q, k=k))
  gce = np.asarray(losses.generalized_cross_entropy(z, y, q=q))
  np.testing.assert_allclose(value[below], (1 - k**q) / q, rtol=1e-6)
  np.testing.assert_allclose(value[~below], gce[~below], rtol=1e-6)
  grad = jax.vmap(jax.grad(lambda l, t: losses.truncated_generalized_cross_entropy(l, t, q=q, k=k)))(z, y)
  grad_gce = jax.vmap(jax.grad(lambda l, t: losses.generalized_cross_entropy(l, t, q=q)))(z, y)
  assert np.all(np.asarray(grad)[below] == 0.0)
  np.testing.assert_allclose(np.asarray(grad)[~below], np.asarray(grad_gce)[~below], rtol=1e-6)
  assert np.all(np.abs(np.asarray(grad)[~below]).sum(-1) > 0)


# ------------------------------------------------------------------------------------------------------------
# Encouraging loss (Zhao et al. 2022).


def el_of_p(p, log_end):
  """EL of a two-class example whose target probability is p (differentiable in p)."""
  logits = jnp.log(jnp.stack([p, 1.0 - p]))
  return losses.encouraging_loss(logits, jnp.array([1.0, 0.0]), log_end=log_end)


def test_full_bonus_gives_target_gradient_minus_one():
  z = random_logits(21, shape=(64, C), scale=4.0)
  z[:4] = 0.0
  z[:4, 0] = [8.0, 10.0, 11.0, -30.0]  # p_y = 1 - 1.3e-3, 1 - 1.8e-4, 1 - 6.7e-5 and tiny
  y = np.eye(C, dtype=np.float32)[np.zeros(64, int)]
  p_y = np_softmax(z)[:, 0]
  keep = p_y <= 1 - 1e-5
  assert keep.sum() > 60
  grad = jax.grad(lambda l: jnp.sum(losses.encouraging_loss(l, y, log_end=1.0)))(z)
  np.testing.assert_allclose(np.asarray(grad)[keep, 0], -1.0, atol=1e-5)
  # Cross entropy's target gradient is -(1 - p_y): it vanishes as p_y -> 1, the full bonus keeps it at -1.
  grad_ce = jax.grad(lambda l: jnp.sum(losses.cross_entropy(l, y)))(z)
  top = np.argmax(np.where(keep, p_y, 0.0))
  assert p_y[top] > 0.999 and np.abs(np.asarray(grad_ce)[top, 0]) < 1e-3


@pytest.mark.parametrize("log_end", [0.5, 0.75, 0.9])
def test_conservative_bonus_is_continuous_with_matching_slope(log_end):
  delta = 1e-3
  below, above = jnp.float32(log_end - delta), jnp.float32(log_end + delta)
  value_below, value_above = el_of_p(below, log_end), el_of_p(above, log_end)
  slope_below = jax.grad(el_of_p)(below, log_end)
  slope_above = jax.grad(el_of_p)(above, log_end)
  exact_slope = -1 / log_end - 1 / (1 - log_end)  # d/dp [-log p + log(1 - p)] at log_end
  # A jump would show up at O(1); continuity leaves only the O(delta) change of a smooth function.
  np.testing.assert_allclose(value_above, value_below + exact_slope * 2 * delta, atol=1e-4)
  np.testing.assert_allclose(slope_below, exact_slope, rtol=2e-2)
  np.testing.assert_allclose(slope_above, exact_slope, rtol=2e-2)
  # Above log_end the bonus is the tangent: the slope is -1/p + 1/(log_end - 1) exactly.
  p = 0.5 * (log_end + 1)
  np.testing.assert_allclose(jax.grad(el_of_p)(jnp.float32(p), log_end), -1 / p + 1 / (log_end - 1), rtol=1e-4)
  np.testing.assert_allclose(el_of_p(jnp.float32(p), log_end), np_el_per_class(p, log_end), rtol=1e-5)


def test_encouraging_loss_label_smoothing_is_the_paper_form():
  z = random_logits(22)
  y = one_hot_labels(23)
  eps = 0.1
  per_class = np_el_per_class(np_softmax(z), 0.75)
  expected = (1 - eps) * (y * per_class).sum(-1) + eps * per_class.mean(-1)
  got = losses.encouraging_loss(z, losses.smooth_labels(y, epsilon=eps), log_end=0.75)
  np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)


# ------------------------------------------------------------------------------------------------------------
# Joint Optimization (Tanaka et al. 2018).


def jo_with_cross_entropy(logits, labels, prior, alpha, beta):
  return (
    jnp.mean(losses.cross_entropy(logits, labels))
    + alpha * losses.prior_penalty(logits, prior)
    + beta * jnp.mean(losses.entropy(logits))
  )


def test_joint_optimization_matches_numpy_and_cross_entropy_version():
  z = random_logits(24, shape=(16, C))
  y = soft_labels(25, shape=(16,))
  prior = np.array([0.1, 0.2, 0.3, 0.15, 0.25], np.float32)
  alpha, beta = 1.2, 0.8
  jo = functools.partial(losses.joint_optimization_loss, prior=prior, alpha=alpha, beta=beta)
  np.testing.assert_allclose(jo(z, y), np_joint_optimization(z, y, prior, alpha, beta), rtol=1e-5)
  np.testing.assert_allclose(losses.prior_penalty(z, prior), np_prior_penalty(z, prior), rtol=1e-5, atol=1e-6)
  # KL vs CE: a label-only constant (minus the mean label entropy), so the gradients are equal.
  label_entropy = -np.mean(np.sum(np.where(y > 0, y * np.log(np.where(y > 0, y, 1)), 0), -1))
  for seed in (26, 27):
    other = random_logits(seed, shape=(16, C))
    np.testing.assert_allclose(
      jo_with_cross_entropy(other, y, prior, alpha, beta) - jo(other, y), label_entropy, rtol=1e-4
    )
  np.testing.assert_allclose(
    jax.grad(jo)(z, y), jax.grad(jo_with_cross_entropy)(z, y, prior, alpha, beta), rtol=1e-5, atol=1e-7
  )


def test_entropy_gradient_flows_through_both_factors():
  z = random_logits(28, shape=(C,))
  p = np_softmax(z)
  log_p = np_log_softmax(z)
  h = -(p * log_p).sum()
  expected = -p * (log_p + h)  # d/dz_j of -sum p log p
  np.testing.assert_allclose(jax.grad(losses.entropy)(z), expected, rtol=1e-5, atol=1e-6)


def test_prior_penalty_uses_all_leading_axes_and_stays_finite_for_vanishing_classes():
  z = random_logits(29, shape=(2, 3, C))
  prior = np.full(C, 1 / C, np.float32)
  np.testing.assert_allclose(losses.prior_penalty(z, prior), np_prior_penalty(z.reshape(6, C), prior), rtol=1e-5)
  collapsed = np.tile(np.array([[1e4, -1e4, -1e4, -1e4, -1e4]], np.float32), (4, 1))
  value, grad = jax.value_and_grad(lambda l: losses.prior_penalty(l, prior))(collapsed)
  assert np.isfinite(value) and value > 1e3  # log s_bar ~ -2e4 for the empty classes
  assert np.all(np.isfinite(grad))


def _shard(x, shards):
  return x.reshape((shards, -1) + x.shape[1:])


def test_prior_penalty_over_named_axis_equals_unsharded_gradient_included():
  shards = 4
  z = random_logits(30, shape=(16, C))
  z[3] = [1e4, -1e4, 0.0, 0.0, 0.0]  # one extreme row: the shift must be pmax-ed across shards
  prior = np.array([0.1, 0.2, 0.3, 0.15, 0.25], np.float32)

  def sharded(logits):
    per_shard = jax.vmap(lambda l: losses.prior_penalty(l, prior, axis_name="shards"), axis_name="shards")
    values = per_shard(_shard(logits, shards))
    return values[0], values

  (value, values), grad = jax.value_and_grad(sharded, has_aux=True)(z)
  unsharded, grad_unsharded = jax.value_and_grad(lambda l: losses.prior_penalty(l, prior))(z)
  np.testing.assert_allclose(values, np.full(shards, unsharded), rtol=1e-6)
  np.testing.assert_allclose(grad, grad_unsharded, rtol=1e-5, atol=1e-8)


def test_joint_optimization_over_named_axis_and_mask():
  shards = 2
  z = random_logits(31, shape=(12, C))
  y = soft_labels(32, shape=(12,))
  valid = np.ones(12, bool)
  valid[6:] = False  # the second shard is all padding
  valid[2] = False
  prior = np.full(C, 1 / C, np.float32)
  jo = functools.partial(losses.joint_optimization_loss, prior=prior, alpha=1.0, beta=0.5)

  def sharded(logits):
    per_shard = jax.vmap(lambda l, t, w: jo(l, t, axis_name="d", where=w), axis_name="d")
    return per_shard(_shard(logits, shards), _shard(y, shards), _shard(valid, shards))[0]

  expected, grad_expected = jax.value_and_grad(jo)(z[valid], y[valid])
  np.testing.assert_allclose(jo(z, y, where=valid), expected, rtol=1e-6)
  np.testing.assert_allclose(sharded(z), expected, rtol=1e-6)
  grad = jax.grad(sharded)(z)
  np.testing.assert_allclose(grad[valid], grad_expected, rtol=1e-5, atol=1e-8)
  assert np.all(np.asarray(grad)[~valid] == 0.0)
  np.testing.assert_allclose(jo(z, y, where=np.zeros(12, bool)), 0.0)
  grad_empty = jax.grad(lambda l: jo(l, y, where=np.zeros(12, bool)))(z)
  assert np.all(np.asarray(grad_empty) == 0.0)


# ------------------------------------------------------------------------------------------------------------
# Every loss of the registry: stability, dtypes, transformations, shapes.


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("name", losses.names())
def test_finite_value_and_gradient_at_extreme_logits(name, dtype):
  loss = losses.get(name)
  z = jnp.asarray(np.concatenate([extreme_logits(), np.clip(random_logits(33, scale=1e4), -1e4, 1e4)]), dtype)
  n = z.shape[0]
  for y in (one_hot_labels(34, (n,)), soft_labels(35, (n,))):
    value, grad = jax.value_and_grad(lambda l: jnp.sum(loss(l, y).astype(jnp.float32)))(z)
    per_example = loss(z, y)
    assert per_example.dtype == dtype and per_example.shape == (n,)
    assert np.all(np.isfinite(np.asarray(per_example, np.float32))), per_example
    assert np.isfinite(value)
    assert grad.dtype == dtype
    assert np.all(np.isfinite(np.asarray(grad, np.float32))), grad


@pytest.mark.parametrize("name", ["prior_penalty", "joint_optimization_loss", "entropy", "focal_small_gamma"])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["float32", "bfloat16"])
def test_finite_extremes_outside_the_registry(name, dtype):
  z = jnp.asarray(extreme_logits(), dtype)
  y = soft_labels(36, (z.shape[0],))
  prior = np.full(C, 1 / C, np.float32)
  fn = {
    "prior_penalty": lambda l: losses.prior_penalty(l, prior),
    "joint_optimization_loss": lambda l: losses.joint_optimization_loss(l, y, prior=prior, alpha=1.0, beta=0.5),
    "entropy": lambda l: jnp.sum(losses.entropy(l)),
    "focal_small_gamma": lambda l: jnp.sum(losses.focal_loss(l, y, gamma=0.3)),
  }[name]
  value, grad = jax.value_and_grad(lambda l: fn(l).astype(jnp.float32))(z)
  assert fn(z).dtype == dtype
  assert np.isfinite(value) and np.all(np.isfinite(np.asarray(grad, np.float32)))


@pytest.mark.parametrize("name", losses.names())
def test_bfloat16_is_computed_in_float32(name):
  loss = losses.get(name)
  z = random_logits(37).astype(jnp.bfloat16)
  y = soft_labels(38)
  expected = loss(jnp.asarray(z, jnp.float32), y)  # the same (rounded) logits, in float32
  # Only the final cast rounds: within bfloat16's unit roundoff 2**-8.
  np.testing.assert_allclose(np.asarray(loss(z, y), np.float32), expected, rtol=2.0**-8, atol=1e-7)


@pytest.mark.parametrize("name", losses.names())
def test_jit_vmap_grad_and_leading_batch_shape(name):
  loss = losses.get(name)
  z = random_logits(39, shape=(2, 3, C))
  y = soft_labels(40, shape=(2, 3))
  eager = loss(z, y)
  assert eager.shape == (2, 3)
  np.testing.assert_allclose(eager, NUMPY_REFERENCES[name](z, y), rtol=2e-5, atol=2e-5)
  # One compiled program for the transformations: jit, vmap over both leading axes, the batch gradient and the
  # per-row gradients.
  jitted, vmapped, grad, per_row = jax.jit(
    lambda l, t: (
      loss(l, t),
      jax.vmap(jax.vmap(loss))(l, t),
      jax.grad(lambda a: jnp.sum(loss(a, t)))(l),
      jax.vmap(jax.vmap(jax.grad(loss)))(l, t),
    )
  )(z, y)
  np.testing.assert_allclose(jitted, eager, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(vmapped, eager, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(grad, per_row, rtol=1e-5, atol=1e-7)
  assert grad.shape == z.shape


@pytest.mark.parametrize("name", losses.names())
def test_gradients_match_finite_differences(name):
  loss = losses.get(name)
  z = jnp.asarray(random_logits(41, shape=(4, C), scale=1.0))
  y = jnp.asarray(soft_labels(42, shape=(4,)))
  jtu.check_grads(lambda l: jnp.sum(loss(l, y)), (z,), order=1, modes=["rev"], atol=5e-2, rtol=5e-2, eps=1e-2)


def test_traced_hyper_parameters_are_not_validated_but_used():
  z = random_logits(43)
  y = soft_labels(44)
  jitted = jax.jit(lambda l, t, q: losses.generalized_cross_entropy(l, t, q=q))
  np.testing.assert_allclose(jitted(z, y, 0.4), np_gce(z, y, 0.4), rtol=2e-5)
  dq = jax.grad(lambda q: jnp.sum(losses.generalized_cross_entropy(z, y, q=q)))(0.4)
  assert np.isfinite(dq)


# ------------------------------------------------------------------------------------------------------------
# Validation.


@pytest.mark.parametrize(
  "call, bad",
  [
    (lambda z, y: losses.generalized_cross_entropy(z, y, q=0.0), "q=0.0"),
    (lambda z, y: losses.generalized_cross_entropy(z, y, q=1.5), "q=1.5"),
    (lambda z, y: losses.truncated_generalized_cross_entropy(z, y, q=1.5), "q=1.5"),
    (lambda z, y: losses.truncated_generalized_cross_entropy(z, y, k=0.0), "k=0.0"),
    (lambda z, y: losses.truncated_generalized_cross_entropy(z, y, k=1.0), "k=1.0"),
    (lambda z, y: losses.encouraging_loss(z, y, log_end=0.0), "log_end=0.0"),
    (lambda z, y: losses.encouraging_loss(z, y, log_end=1.25), "log_end=1.25"),
    (lambda z, y: losses.reverse_cross_entropy(z, y, log_zero=0.0), "log_zero=0.0"),
    (lambda z, y: losses.nce_rce(z, y, log_zero=1.0), "log_zero=1.0"),
    (lambda z, y: losses.symmetric_cross_entropy(z, y, alpha=-1.0), "alpha=-1.0"),
    (lambda z, y: losses.focal_loss(z, y, gamma=-0.5), "gamma=-0.5"),
    (lambda z, y: losses.bootstrap_soft(z, y, beta=1.5), "beta=1.5"),
    (lambda z, y: losses.bootstrap_hard(z, y, beta=-0.1), "beta=-0.1"),
    (lambda z, y: losses.smooth_labels(y, epsilon=2.0), "epsilon=2.0"),
    (lambda z, y: losses.prior_penalty(z, np.full(C, 0.3)), "sums to 1.5"),
    (lambda z, y: losses.prior_penalty(z, np.full(C + 1, 1 / (C + 1))), "length C=5"),
    (lambda z, y: losses.prior_penalty(z, np.array([1.5, -0.5, 0, 0, 0])), "negative"),
  ],
)
def test_bad_hyper_parameters_raise_naming_the_value(call, bad):
  with pytest.raises(ValueError, match=bad.replace("(", r"\(")):
    call(random_logits(45), one_hot_labels(46))


@pytest.mark.parametrize("name", losses.names())
def test_mismatched_shapes_raise(name):
  with pytest.raises(ValueError, match=r"\(8, 5\).*\(8, 4\)"):
    losses.get(name)(random_logits(47), np.ones((8, 4), np.float32) / 4)


def test_unknown_name_lists_the_known_ones():
  with pytest.raises(ValueError, match="'hinge'.*'cross_entropy'.*'focal_loss'"):
    losses.get("hinge")


# ---------------------------------------------------------------------------------------------------------------
# The peers' own code conventions (APL: HanxunH/Active-Passive-Losses@2d18de6, loss.py), re-computed in NumPy from
# their formulas: per example, before the batch mean their modules take.


def _apl_softmax(logits):
  shifted = logits - logits.max(axis=-1, keepdims=True)
  return np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)


def _apl_nce(logits, one_hot):
  log_p = np.log(_apl_softmax(logits))
  return -np.sum(one_hot * log_p, axis=-1) / -np.sum(log_p, axis=-1)


def _apl_rce(logits, one_hot):
  """APL's RCE: p clamped to [1e-7, 1], one-hot labels clamped to [1e-4, 1] before the log."""
  p = np.clip(_apl_softmax(logits), 1e-7, 1.0)
  return -np.sum(p * np.log(np.clip(one_hot, 1e-4, 1.0)), axis=-1)


def _apl_mae(logits, one_hot):
  """APL's MAE: 1 - p_y (half of sum_c |p_c - y_c|)."""
  return 1.0 - np.sum(one_hot * _apl_softmax(logits), axis=-1)


def _apl_inputs(scale):
  rng = np.random.default_rng(7)
  logits = rng.standard_normal((256, 10)) * scale
  one_hot = np.eye(10)[rng.integers(0, 10, 256)]
  return logits, one_hot


@pytest.mark.parametrize("scale", [1.0, 4.0])
def test_nce_rce_with_apl_log_zero_equals_apl_nce_and_rce(scale):
  logits, one_hot = _apl_inputs(scale)
  apl = 1.0 * _apl_nce(logits, one_hot) + 1.0 * _apl_rce(logits, one_hot)  # NCEandRCE(alpha=1, beta=1)
  ours = losses.nce_rce(
    jnp.asarray(logits, jnp.float32), jnp.asarray(one_hot, jnp.float32), log_zero=losses.APL_LOG_ZERO
  )
  np.testing.assert_allclose(np.asarray(ours), apl, rtol=0, atol=1e-5)
  assert losses.APL_LOG_ZERO == pytest.approx(np.log(1e-4))
  # The default (the SCE paper's A = -4) is a different loss: RCE scaled by 4 / 9.21.
  default = losses.nce_rce(jnp.asarray(logits, jnp.float32), jnp.asarray(one_hot, jnp.float32))
  assert np.max(np.abs(np.asarray(default) - apl)) > 0.1


def test_symmetric_cross_entropy_with_apl_log_zero_equals_apl_sce():
  logits, one_hot = _apl_inputs(2.0)
  ce = -np.sum(one_hot * np.log(_apl_softmax(logits)), axis=-1)
  apl = 0.1 * ce + 1.0 * _apl_rce(logits, one_hot)  # SCELoss(alpha=0.1, beta=1.0)
  ours = losses.symmetric_cross_entropy(
    jnp.asarray(logits, jnp.float32),
    jnp.asarray(one_hot, jnp.float32),
    alpha=0.1,
    beta=1.0,
    log_zero=losses.APL_LOG_ZERO,
  )
  np.testing.assert_allclose(np.asarray(ours), apl, rtol=0, atol=1e-5)


def test_apl_nce_mae_is_ours_with_half_beta():
  logits, one_hot = _apl_inputs(2.0)
  apl = _apl_nce(logits, one_hot) + _apl_mae(logits, one_hot)  # NCEandMAE(alpha=1, beta=1)
  ours = losses.nce_mae(jnp.asarray(logits, jnp.float32), jnp.asarray(one_hot, jnp.float32), alpha=1.0, beta=0.5)
  np.testing.assert_allclose(np.asarray(ours), apl, rtol=0, atol=1e-5)


def test_focal_value_equals_apl_but_gradient_goes_through_the_modulating_factor():
  """APL's FocalLoss detaches (1 - p_t)^gamma; ours differentiates it (the paper's loss): same value."""
  logits, one_hot = _apl_inputs(2.0)
  gamma = 2.0
  p_t = np.sum(one_hot * _apl_softmax(logits), axis=-1)
  np.testing.assert_allclose(
    np.asarray(losses.focal_loss(jnp.asarray(logits, jnp.float32), jnp.asarray(one_hot, jnp.float32), gamma=gamma)),
    -((1 - p_t) ** gamma) * np.log(p_t),
    rtol=1e-5,
    atol=1e-6,
  )
  z, y = jnp.asarray(logits[:1], jnp.float32), jnp.asarray(one_hot[:1], jnp.float32)
  ours = jax.grad(lambda z: losses.focal_loss(z, y, gamma=gamma).sum())(z)
  detached = jax.grad(
    lambda z: (
      jax.lax.stop_gradient((1 - jnp.sum(y * jax.nn.softmax(z), -1)) ** gamma) * losses.cross_entropy(z, y)
    ).sum()
  )(z)
  assert np.max(np.abs(np.asarray(ours - detached))) > 1e-3
