"""DivideMix building blocks against NumPy re-computations of the original code's formulas
(LiJunnan1992/DivideMix, Train_cifar.py; shared REFERENCE.md section 8) and the GMM against scikit-learn."""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

from noisy_jax.core import gmm as gmm_lib
from noisy_jax.methods import dividemix

# ------------------------------------------------------------------------------------------------------------
# NumPy re-computations, written after the original code (torch ops replaced by their NumPy equivalents).


def np_softmax(z):
  z = np.asarray(z, np.float64)
  e = np.exp(z - z.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def np_log_softmax(z):
  z = np.asarray(z, np.float64)
  m = z.max(-1, keepdims=True)
  return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def np_sharpen(p, T):
  pt = p ** (1 / T)
  return pt / pt.sum(1, keepdims=True)


def np_refine(labels_x, w_x, px, T):
  px = w_x.reshape(-1, 1) * labels_x + (1 - w_x.reshape(-1, 1)) * px
  return np_sharpen(px, T)


def np_semi_loss(outputs_x, targets_x, outputs_u, targets_u):
  lx = -np.mean(np.sum(np_log_softmax(outputs_x) * targets_x, axis=1))
  lu = np.mean((np_softmax(outputs_u) - targets_u) ** 2)
  return lx, lu


def np_linear_rampup(current, warm_up, lambda_u, rampup_length=16):
  return lambda_u * float(np.clip((current - warm_up) / rampup_length, 0.0, 1.0))


def np_penalty(logits):
  c = logits.shape[1]
  prior = np.ones(c) / c
  pred_mean = np_softmax(logits).mean(0)
  return np.sum(prior * np.log(prior / pred_mean))


def np_neg_entropy(logits):
  probs = np_softmax(logits)
  return np.mean(np.sum(np.log(probs) * probs, axis=1))


def np_two_means_labels(x):
  """Exact 1-D two-means, float64: best split of the sorted values, then nearest-mean labels."""
  xs = np.sort(np.asarray(x, np.float64))
  n = xs.size
  k = np.arange(1, n)
  low = np.cumsum(xs)[:-1] / k
  high = np.cumsum(xs[::-1])[::-1][1:] / (n - k)
  best = np.argmax(k * (n - k) * (low - high) ** 2)
  return (x > (low[best] + high[best]) / 2).astype(np.int64)


# ------------------------------------------------------------------------------------------------------------
# Synthetic per-example loss distributions (min-max normalised, as the GMM sees them).

N = 8000


def loss_distribution(kind: str, n: int = N) -> np.ndarray:
  rng = np.random.default_rng({"sym50": 0, "sym90": 1, "asym40": 2, "sym20": 3, "unimodal": 4}[kind])
  if kind == "sym20":  # 80% clean: small losses; 20% noisy: large, spread
    raw = np.concatenate([np.abs(rng.normal(0.01, 0.03, int(0.8 * n))), rng.gamma(5.0, 0.7, n - int(0.8 * n))])
  elif kind == "sym50":
    raw = np.concatenate([np.abs(rng.normal(0.02, 0.05, n // 2)), rng.gamma(4.0, 0.6, n - n // 2)])
  elif kind == "sym90":  # 10% clean, overlapping heavily with the noisy mode
    raw = np.concatenate([np.abs(rng.normal(0.1, 0.2, n // 10)), rng.gamma(9.0, 0.3, n - n // 10)])
  elif kind == "asym40":  # ~20% flipped into a similar class: a broad, close noisy mode
    raw = np.concatenate([rng.exponential(0.05, int(0.8 * n)), rng.normal(1.0, 0.5, n - int(0.8 * n)).clip(0)])
  else:  # no second mode at all
    raw = rng.exponential(1.0, n)
  return (raw - raw.min()) / (raw.max() - raw.min())


KINDS = ("sym20", "sym50", "sym90", "asym40", "unimodal")


def sklearn_fit(x, *, seed, **kwargs):
  """The original's GaussianMixture(n_components=2, max_iter=10, tol=1e-2, reg_covar=5e-4), with a random_state."""
  settings = dict(max_iter=10, tol=1e-2, reg_covar=5e-4)
  settings.update(kwargs)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    return GaussianMixture(n_components=2, random_state=seed, **settings).fit(x.reshape(-1, 1))


def sklearn_kmeans_labels(x, *, seed):
  """The labels sklearn's GaussianMixture(random_state=seed) starts from (its _initialize_parameters, 'kmeans')."""
  return KMeans(n_clusters=2, n_init=1, random_state=seed).fit(x.reshape(-1, 1)).labels_


def sklearn_clean_prob(gmm, x):
  return gmm.predict_proba(x.reshape(-1, 1))[:, gmm.means_.argmin()]


fit_jit = jax.jit(gmm_lib.fit_two_component_gmm, static_argnames=("max_iter",))


# ------------------------------------------------------------------------------------------------------------
# GMM.


@pytest.mark.parametrize("kind", KINDS)
def test_gmm_equals_sklearn_from_the_same_kmeans_labels_float64(kind):
  x = loss_distribution(kind)
  seed = 0
  gmm = sklearn_fit(x, seed=seed)
  labels = sklearn_kmeans_labels(x, seed=seed)
  with jax.enable_x64(True):
    fit = gmm_lib.fit_two_component_gmm(jnp.asarray(x), init=jnp.asarray(labels))
    assert fit.means.dtype == jnp.float64
    np.testing.assert_allclose(fit.means, gmm.means_.ravel(), rtol=0, atol=1e-9)
    np.testing.assert_allclose(fit.variances, gmm.covariances_.ravel(), rtol=0, atol=1e-9)
    np.testing.assert_allclose(fit.weights, gmm.weights_, rtol=0, atol=1e-9)
    np.testing.assert_allclose(fit.posterior, gmm.predict_proba(x.reshape(-1, 1)), rtol=0, atol=1e-9)
    np.testing.assert_allclose(fit.clean_prob, sklearn_clean_prob(gmm, x), rtol=0, atol=1e-9)
    np.testing.assert_allclose(fit.lower_bound, gmm.lower_bound_, rtol=0, atol=1e-9)
    assert int(fit.n_iter) == gmm.n_iter_ and bool(fit.converged) == gmm.converged_
    for p_threshold in (0.5, 0.6):
      np.testing.assert_array_equal(
        dividemix.split(fit.clean_prob, p_threshold=p_threshold), sklearn_clean_prob(gmm, x) > p_threshold
      )


@pytest.mark.parametrize("kind", KINDS)
def test_gmm_equals_sklearn_in_float32_as_the_original_fits(kind):
  # The original hands sklearn a float32 torch tensor, so sklearn fits in float32 too.
  x = loss_distribution(kind).astype(np.float32)
  gmm = sklearn_fit(x, seed=1)
  fit = fit_jit(x, init=sklearn_kmeans_labels(x, seed=1))
  assert fit.means.dtype == jnp.float32 and gmm.means_.dtype == np.float32
  np.testing.assert_allclose(fit.means, gmm.means_.ravel(), atol=1e-5)
  np.testing.assert_allclose(fit.variances, gmm.covariances_.ravel(), atol=1e-6)
  np.testing.assert_allclose(fit.weights, gmm.weights_, atol=5e-5)
  np.testing.assert_allclose(fit.clean_prob, sklearn_clean_prob(gmm, x), atol=2e-4)
  assert int(fit.n_iter) == gmm.n_iter_
  for p_threshold in (0.5, 0.6):
    disagree = np.sum(np.asarray(fit.clean_prob > p_threshold) != (sklearn_clean_prob(gmm, x) > p_threshold))
    assert disagree <= 1, (p_threshold, disagree)


@pytest.mark.parametrize("max_iter,tol", [(0, 1e-2), (1, 1e-2), (2, 1e-2), (10, 0.0), (25, 1e-6)])
def test_gmm_iteration_count_and_stopping_rule_match_sklearn(max_iter, tol):
  x = loss_distribution("sym90")
  gmm = sklearn_fit(x, seed=3, max_iter=max_iter, tol=tol)
  labels = sklearn_kmeans_labels(x, seed=3)
  with jax.enable_x64(True):
    fit = gmm_lib.fit_two_component_gmm(jnp.asarray(x), init=jnp.asarray(labels), max_iter=max_iter, tol=tol)
    assert int(fit.n_iter) == gmm.n_iter_
    if max_iter:
      assert bool(fit.converged) == gmm.converged_
    np.testing.assert_allclose(fit.means, gmm.means_.ravel(), atol=1e-9)
    np.testing.assert_allclose(fit.variances, gmm.covariances_.ravel(), atol=1e-9)
    np.testing.assert_allclose(fit.clean_prob, sklearn_clean_prob(gmm, x), atol=1e-9)


def test_gmm_responsibilities_init_and_component_order():
  x = loss_distribution("sym50").astype(np.float32)
  labels = sklearn_kmeans_labels(x, seed=0)
  by_labels = fit_jit(x, init=labels)
  by_resp = fit_jit(x, init=jax.nn.one_hot(labels, 2))
  np.testing.assert_allclose(by_resp.posterior, by_labels.posterior, atol=1e-6)
  # Swapping the cluster ids swaps the components, not the clean probability (posterior of the lower mean).
  swapped = fit_jit(x, init=1 - labels)
  np.testing.assert_allclose(swapped.means, by_labels.means[::-1], atol=1e-6)
  np.testing.assert_allclose(swapped.clean_prob, by_labels.clean_prob, atol=1e-5)
  assert float(jnp.sum(by_labels.weights)) == pytest.approx(1.0, abs=1e-6)


def test_kmeans_init_is_the_exact_two_means_partition_and_near_sklearns():
  for kind in KINDS:
    x = loss_distribution(kind)
    with jax.enable_x64(True):
      ours = np.asarray(gmm_lib.kmeans_labels(jnp.asarray(x)))
    np.testing.assert_array_equal(ours, np_two_means_labels(x))
    assert ours[np.argmin(x)] == 0 and ours[np.argmax(x)] == 1
    theirs = sklearn_kmeans_labels(x, seed=0)
    theirs = theirs if theirs[np.argmin(x)] == 0 else 1 - theirs
    # sklearn's Lloyd stops at tol=1e-4 x variance: a few points next to the threshold differ.
    assert np.mean(ours != theirs) < 0.02, kind
  f32 = loss_distribution("sym50").astype(np.float32)
  assert np.mean(np.asarray(gmm_lib.kmeans_labels(f32)) != np_two_means_labels(f32)) < 1e-3


def test_default_init_split_is_deterministic_and_within_sklearns_own_spread():
  for kind in KINDS:
    x = loss_distribution(kind).astype(np.float32)  # float32, as the original
    fit = fit_jit(x)
    again = fit_jit(x)
    np.testing.assert_array_equal(fit.clean_prob, again.clean_prob)
    ours = np.asarray(fit.clean_prob) > 0.5
    # The original's KMeans draws from unseeded NumPy: each random state is one possible original run.
    theirs = [sklearn_clean_prob(sklearn_fit(x, seed=s), x) > 0.5 for s in range(4)]
    spread = max(np.sum(a != b) for a in theirs for b in theirs)
    ours_vs_theirs = max(np.sum(ours != t) for t in theirs)
    if kind in ("sym20", "sym50", "asym40"):  # well separated: one split whatever the start
      assert ours_vs_theirs == 0, kind
    else:
      assert ours_vs_theirs <= max(spread, 0.01 * x.size), (kind, ours_vs_theirs, spread)


def test_gmm_jit_vmap_and_traced_hyper_parameters():
  x = np.stack([loss_distribution("sym50"), loss_distribution("asym40")]).astype(np.float32)
  eager = [gmm_lib.fit_two_component_gmm(row) for row in x]
  traced = jax.jit(lambda v, tol, reg: gmm_lib.fit_two_component_gmm(v, tol=tol, reg_covar=reg))
  for row, ref in zip(x, eager):
    np.testing.assert_allclose(traced(row, 1e-2, 5e-4).clean_prob, ref.clean_prob, atol=1e-6)
  # Two networks stacked on a leading axis: one vmapped fit (the while_loop runs until both have converged).
  both = jax.jit(jax.vmap(gmm_lib.fit_two_component_gmm))(x)
  for i, ref in enumerate(eager):
    np.testing.assert_allclose(both.clean_prob[i], ref.clean_prob, atol=1e-5)  # float32 reduction order
    assert int(both.n_iter[i]) == int(ref.n_iter)


def test_gmm_degenerate_and_invalid_inputs():
  fit = fit_jit(np.full(100, 0.3, np.float32))
  assert np.all(np.isfinite(fit.clean_prob))
  with pytest.raises(ValueError, match="N >= 2"):
    gmm_lib.fit_two_component_gmm(np.zeros(1))
  with pytest.raises(ValueError, match="tol"):
    gmm_lib.fit_two_component_gmm(np.arange(4.0), tol=-1)
  with pytest.raises(ValueError, match="init"):
    gmm_lib.fit_two_component_gmm(np.arange(4.0), init=np.array([0, 1, 2, 0]))
  with pytest.raises(ValueError, match="init"):
    gmm_lib.fit_two_component_gmm(np.arange(4.0), init="random")
  column = gmm_lib.fit_two_component_gmm(np.arange(6.0).reshape(-1, 1))
  assert column.clean_prob.shape == (6,)


# ------------------------------------------------------------------------------------------------------------
# Loss normalisation and history.


def test_normalize_losses_matches_the_original_and_is_finite_when_constant():
  losses = np.random.default_rng(0).gamma(2.0, 1.0, 1000).astype(np.float32)
  expected = (losses - losses.min()) / (losses.max() - losses.min())
  np.testing.assert_allclose(dividemix.normalize_losses(losses), expected, rtol=1e-6, atol=1e-7)
  np.testing.assert_array_equal(dividemix.normalize_losses(np.full(5, 2.0)), np.zeros(5))  # original: NaN
  np.testing.assert_allclose(jax.jit(dividemix.normalize_losses)(losses), expected, rtol=1e-6, atol=1e-7)


def test_average_loss_history_matches_the_original():
  rng = np.random.default_rng(1)
  all_loss = [rng.uniform(size=50).astype(np.float32) for _ in range(7)]
  for epochs in (1, 3, 5, 7):
    history = np.stack(all_loss[:epochs])
    np.testing.assert_allclose(dividemix.average_loss_history(history), history[-5:].mean(0), rtol=1e-6)
    np.testing.assert_allclose(dividemix.average_loss_history(history, window=1), history[-1], rtol=1e-6)
  # A ring of 5 slots (epoch e in slot e % 5) gives the same mean as the list.
  ring = np.zeros((5, 50), np.float32)
  filled = np.zeros(5, bool)
  for epoch, losses in enumerate(all_loss):
    ring[epoch % 5], filled[epoch % 5] = losses, True
    expected = np.stack(all_loss[: epoch + 1])[-5:].mean(0)
    got = jax.jit(functools.partial(dividemix.average_loss_history, window=5))(ring, filled=filled)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
  with pytest.raises(ValueError, match="ring"):
    dividemix.average_loss_history(np.zeros((3, 4)), filled=np.ones(3, bool))


# ------------------------------------------------------------------------------------------------------------
# Targets and MixMatch.


def _probs(rng, shape):
  return np_softmax(rng.normal(0.0, 2.0, shape))


def test_sharpen_refine_and_co_guess_match_the_original():
  rng = np.random.default_rng(2)
  b, c = 6, 10
  p = _probs(rng, (b, c))
  for T in (0.5, 0.25, 1.0):
    np.testing.assert_allclose(dividemix.sharpen(p, T=T), np_sharpen(p, T), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(jax.jit(dividemix.sharpen)(p), np_sharpen(p, 0.5), rtol=1e-5, atol=1e-7)
  w_all = rng.uniform(size=20)
  np.testing.assert_array_equal(jax.jit(functools.partial(dividemix.split, p_threshold=0.6))(w_all), w_all > 0.6)
  labels = np.eye(c)[rng.integers(0, c, b)]
  w = rng.uniform(size=b)
  out_x, out_x2 = rng.normal(size=(b, c)), rng.normal(size=(b, c))
  px = (np_softmax(out_x) + np_softmax(out_x2)) / 2
  refined = dividemix.refine_labels(labels, w, px)
  np.testing.assert_allclose(refined, np_refine(labels, w, px, 0.5), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(jax.jit(dividemix.refine_labels)(labels, w[:, None], px), refined, atol=1e-7)
  u11, u12, u21, u22 = (rng.normal(size=(b, c)) for _ in range(4))
  pu = (np_softmax(u11) + np_softmax(u12) + np_softmax(u21) + np_softmax(u22)) / 4
  guessed = jax.jit(dividemix.co_guess)(
    np.stack([np_softmax(u11), np_softmax(u12)]), np.stack([np_softmax(u21), np_softmax(u22)])
  )
  np.testing.assert_allclose(guessed, np_sharpen(pu, 0.5), rtol=1e-5, atol=1e-7)
  # Targets carry no gradient (the original computes them under torch.no_grad()).
  grad = jax.grad(lambda q: jnp.sum(dividemix.refine_labels(labels, w, q) ** 2))(px)
  np.testing.assert_array_equal(grad, np.zeros_like(px))
  # A small temperature cannot underflow a whole row.
  assert np.all(np.isfinite(dividemix.sharpen(np.full((1, 100), 0.01), T=0.01)))


def test_mixmatch_matches_the_original_with_the_same_draws():
  rng = np.random.default_rng(3)
  bx, bu, c = 3, 5, 4  # labelled and unlabelled batch sizes may differ (the original's last labelled batch)
  x1, x2 = rng.normal(size=(bx, 2, 2, 3)).astype(np.float32), rng.normal(size=(bx, 2, 2, 3)).astype(np.float32)
  u1, u2 = rng.normal(size=(bu, 2, 2, 3)).astype(np.float32), rng.normal(size=(bu, 2, 2, 3)).astype(np.float32)
  tx, tu = _probs(rng, (bx, c)), _probs(rng, (bu, c))
  key = jax.random.key(7)
  mixed, mixed_t = jax.jit(dividemix.mixmatch)(x1, x2, u1, u2, tx, tu, key)
  # The draws of `key` and of 199 more keys, in one compiled call (jax.random.beta is slow to compile).
  keys = jnp.concatenate([key[None], jax.random.split(key, 199)])  # n = 2 bx + 2 bu = 16
  lams, perms = jax.jit(jax.vmap(functools.partial(dividemix.mix_coefficients, n=16, alpha=4.0)))(keys)
  lam, idx = float(lams[0]), np.asarray(perms[0])
  # The original, with its l and idx.
  all_inputs = np.concatenate([x1, x2, u1, u2], 0)
  all_targets = np.concatenate([tx, tx, tu, tu], 0)
  np.testing.assert_allclose(mixed, lam * all_inputs + (1 - lam) * all_inputs[idx], rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(mixed_t, lam * all_targets + (1 - lam) * all_targets[idx], rtol=1e-6, atol=1e-7)
  assert mixed.dtype == jnp.float32 and mixed.shape == (2 * bx + 2 * bu, 2, 2, 3)
  np.testing.assert_allclose(np.sum(mixed_t, -1), 1.0, atol=1e-6)
  # lambda = max(lambda, 1 - lambda) from Beta(alpha, alpha); one permutation of all rows.
  lams = np.asarray(lams)
  assert lams.min() >= 0.5 and lams.max() <= 1.0
  np.testing.assert_array_equal(np.sort(np.asarray(perms), axis=1), np.tile(np.arange(16), (200, 1)))
  # E[max(l, 1-l)] for Beta(4, 4) is 0.5 + E|l - 0.5| = 0.6367.
  assert np.mean(lams) == pytest.approx(0.6367, abs=0.02)
  with pytest.raises(ValueError, match="floating"):
    dividemix.mixmatch(*(np.zeros((2, 3), np.uint8),) * 4, tx[:2], tu[:2], key)


# ------------------------------------------------------------------------------------------------------------
# Losses, ramp-up, penalties.


def test_losses_x_u_match_the_original_and_the_paper_option():
  rng = np.random.default_rng(4)
  c = 10
  logits_x, logits_u = rng.normal(0, 3, (8, c)), rng.normal(0, 3, (6, c))
  tx, tu = _probs(rng, (8, c)), _probs(rng, (6, c))
  lx, lu = jax.jit(dividemix.losses_x_u)(logits_x, tx, logits_u, tu)
  np_lx, np_lu = np_semi_loss(logits_x, tx, logits_u, tu)
  assert float(lx) == pytest.approx(np_lx, rel=1e-5) and float(lu) == pytest.approx(np_lu, rel=1e-5)
  _, lu_paper = dividemix.losses_x_u(logits_x, tx, logits_u, tu, lu_reduction="squared_l2")
  np_paper = np.mean(np.sum((np_softmax(logits_u) - tu) ** 2, axis=1))
  assert float(lu_paper) == pytest.approx(np_paper, rel=1e-5) and float(lu_paper) == pytest.approx(c * np_lu, rel=1e-5)
  # Sharded over a named axis (the per-device step): the same global means.
  sharded = jax.vmap(functools.partial(dividemix.losses_x_u, axis_name="d"), axis_name="d")(
    logits_x.reshape(2, 4, c), tx.reshape(2, 4, c), logits_u.reshape(2, 3, c), tu.reshape(2, 3, c)
  )
  np.testing.assert_allclose(sharded[0], np.full(2, np_lx), rtol=1e-5)
  np.testing.assert_allclose(sharded[1], np.full(2, np_lu), rtol=1e-5)
  grads = jax.grad(lambda z: sum(dividemix.losses_x_u(z, tx, logits_u, tu)))(jnp.asarray(logits_x * 1e4))
  assert np.all(np.isfinite(grads))
  with pytest.raises(ValueError, match="lu_reduction"):
    dividemix.losses_x_u(logits_x, tx, logits_u, tu, lu_reduction="sum")


def test_linear_rampup_matches_the_original():
  num_labelled, batch_size, warm_up = 1000, 64, 10
  rampup = jax.jit(lambda current, warm_up, lambda_u: dividemix.linear_rampup(current, warm_up, lambda_u=lambda_u))
  for epoch in (9, 10, 17, 26, 27, 100):
    for batch_idx in (0, 5, 15):
      current = dividemix.fractional_epoch(epoch, batch_idx, num_labelled, batch_size)
      assert current == epoch + batch_idx / (num_labelled // batch_size + 1)
      for lambda_u in (0.0, 25.0, 150.0):
        ours = rampup(current, warm_up, lambda_u)
        assert float(ours) == pytest.approx(np_linear_rampup(current, warm_up, lambda_u), rel=1e-6, abs=1e-6)
  with pytest.raises(TypeError):
    dividemix.linear_rampup(12.0, 10)  # lambda_u is required: the ramp alone is not the weight


def test_uniform_prior_penalty_and_negative_entropy_match_the_original():
  rng = np.random.default_rng(5)
  logits = rng.normal(0, 2, (12, 7))
  assert float(jax.jit(dividemix.uniform_prior_penalty)(logits)) == pytest.approx(np_penalty(logits), rel=1e-5)
  assert float(jax.jit(dividemix.negative_entropy)(logits)) == pytest.approx(np_neg_entropy(logits), rel=1e-5)
  # Masked rows and sharding: the mean over the valid rows of the global batch.
  where = np.arange(12) < 9
  assert float(dividemix.negative_entropy(logits, where=where)) == pytest.approx(np_neg_entropy(logits[:9]), rel=1e-5)
  assert float(dividemix.uniform_prior_penalty(logits, where=where)) == pytest.approx(np_penalty(logits[:9]), rel=1e-5)
  sharded = jax.vmap(functools.partial(dividemix.negative_entropy, axis_name="d"), axis_name="d")(
    logits.reshape(3, 4, 7)
  )
  np.testing.assert_allclose(sharded, np.full(3, np_neg_entropy(logits)), rtol=1e-5)
  # Confident logits: the original's probs.log() * probs is NaN (0 * -inf); ours stays finite, value and gradient.
  extreme = jnp.asarray([[1e4, -1e4, 0.0]], jnp.float32)
  with np.errstate(divide="ignore", invalid="ignore"):
    assert np.isnan(np_neg_entropy(np.asarray(extreme)))
  assert np.isfinite(float(dividemix.negative_entropy(extreme)))
  assert np.all(np.isfinite(jax.grad(dividemix.negative_entropy)(extreme)))
  assert np.all(np.isfinite(jax.grad(dividemix.uniform_prior_penalty)(extreme)))


# ------------------------------------------------------------------------------------------------------------
# Settings.


def test_settings_table_follows_reference_section_8():
  expected = {
    ("cifar10", "sym", 0.2): (0.0, 0.5),
    ("cifar10", "sym", 0.5): (25.0, 0.5),
    ("cifar10", "sym", 0.8): (25.0, 0.5),
    ("cifar10", "sym", 0.9): (50.0, 0.6),
    ("cifar10", "asym", 0.4): (0.0, 0.5),
    ("cifar100", "sym", 0.2): (25.0, 0.5),
    ("cifar100", "sym", 0.5): (150.0, 0.5),
    ("cifar100", "sym", 0.8): (150.0, 0.5),
    ("cifar100", "sym", 0.9): (150.0, 0.6),
    ("clothing1m", "real", None): (0.0, 0.5),
    ("webvision", "real", None): (0.0, 0.5),
  }
  assert {k: (s.lambda_u, s.p_threshold) for k, s in dividemix.SETTINGS.items()} == expected
  assert dividemix.SETTINGS[("cifar10", "sym", 0.8)].unverified == {"lambda_u": "recalled"}
  assert dividemix.SETTINGS[("cifar10", "sym", 0.9)].unverified == {"lambda_u": "3rd party"}
  assert all(not s.unverified for k, s in dividemix.SETTINGS.items() if k[:2] != ("cifar10", "sym") or k[2] < 0.8)
  assert dividemix.setting("CIFAR100", "symmetric_include_true", 0.9).lambda_u == 150.0
  assert dividemix.setting("cifar10", "asymmetric", 0.4) is dividemix.SETTINGS[("cifar10", "asym", 0.4)]
  assert dividemix.setting("clothing1m", "real").source == "code"
  with pytest.raises(ValueError, match="known"):
    dividemix.setting("cifar10", "sym", 0.3)
