"""A two-component 1-D Gaussian mixture fitted by EM, as scikit-learn's GaussianMixture fits it: DivideMix's
division of the training set by per-example loss (noisy_jax.methods.dividemix; Li, Socher & Hoi, ICLR 2020).

`fit_two_component_gmm(x)` runs EM from a hard two-cluster start (`kmeans_labels`, or labels given) inside one
`lax.while_loop`: jit-able and vmap-able, in the dtype of x (at least float32). The defaults are the sklearn settings
of DivideMix's code (GaussianMixture(n_components=2, max_iter=10, tol=1e-2, reg_covar=5e-4)).

Where this differs from the original code, on purpose:
- GMM initialisation. sklearn's default init_params='kmeans' runs KMeans(n_clusters=2, n_init=1,
  random_state=random_state) and starts EM from its hard labels. The original passes no random_state, so KMeans's
  k-means++ seeding draws from NumPy's global RandomState, which DivideMix never seeds (it seeds `random` and torch
  only): the split is not reproducible run to run. Because sklearn's Lloyd iterations stop early (tol = 1e-4 times
  the data variance) and EM stops after a few iterations (tol=1e-2 on the mean log-likelihood), the starting labels
  do show: on synthetic 90%-noise loss distributions sklearn's own clean fraction moves by up to ~3% of the examples
  between random states. Default here (`init='kmeans'`): the exact two-means partition of the sorted losses (the
  fixed point sklearn's Lloyd iterations approach), deterministic; `init=labels` (e.g. sklearn's KMeans labels)
  reproduces sklearn's fit from the same labels to float rounding (tested against sklearn at 1e-9 in float64).
- Float precision. The original feeds a float32 torch tensor to sklearn, which then fits in float32. Here the fit
  runs in the losses' dtype (float32, or float64 with jax x64 enabled).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks

# sklearn GaussianMixture settings of DivideMix's code (Train_cifar.py, eval_train).
GMM_MAX_ITER = 10
GMM_TOL = 1e-2
GMM_REG_COVAR = 5e-4


def _float(x) -> jax.Array:
  x = jnp.asarray(x)
  return x.astype(jnp.promote_types(x.dtype, jnp.float32))


class GMMFit(NamedTuple):
  """Result of `fit_two_component_gmm` (a pytree). Components keep the order of the initialisation.

  means, variances, weights: [2], as sklearn's means_.ravel(), covariances_.ravel() (reg_covar included),
    weights_.
  posterior: [N, 2], sklearn's predict_proba(x) (an E-step with the final parameters).
  clean_prob: [N], w = posterior[:, argmin(means)], the probability that an example's label is clean.
  lower_bound: sklearn's lower_bound_: mean log-likelihood under the parameters before the last M-step.
  n_iter: sklearn's n_iter_ (EM iterations run, each one E-step + one M-step).
  converged: sklearn's converged_ (the last change of lower_bound was < tol).
  """

  means: jax.Array
  variances: jax.Array
  weights: jax.Array
  posterior: jax.Array
  clean_prob: jax.Array
  lower_bound: jax.Array
  n_iter: jax.Array
  converged: jax.Array


def kmeans_labels(x) -> jax.Array:
  """Deterministic 1-D two-means labels: the partition of sorted x minimising the within-cluster sum of squares.

  Over the N-1 splits of sorted x into k lowest / N-k highest values, the one maximising the between-cluster
  sum of squares k (N-k) (m_low - m_high)^2 / N (equivalently minimising the within-cluster one), found in
  O(N log N); then every x is labelled by its nearest mean (x > (m_low + m_high) / 2 -> 1), as k-means labels
  points. This is the global optimum of the k-means objective and a fixed point of Lloyd's iterations: what
  sklearn's KMeans(n_clusters=2) approaches from its random k-means++ start. sklearn stops at tol = 1e-4 x
  variance, so its labels typically differ from these by a few points next to the threshold, and its cluster ids are
  in random order; here 0 is the low cluster.

  Args:
    x: [N] values, N >= 2.

  Returns:
    [N] int32 labels in {0, 1}.
  """
  x = _float(x)
  n = x.shape[0]
  xs = jnp.sort(x)
  left_sum = jnp.cumsum(xs)[:-1]  # sums of the k lowest, k = 1..N-1
  right_sum = jnp.cumsum(xs[::-1])[::-1][1:]  # sums of the N-k highest (a separate cumsum: no cancellation)
  k = jnp.arange(1, n, dtype=x.dtype)
  low_mean = left_sum / k
  high_mean = right_sum / (n - k)
  between = k * (n - k) * jnp.square(low_mean - high_mean)
  best = jnp.argmax(between)
  threshold = 0.5 * (low_mean[best] + high_mean[best])
  return (x > threshold).astype(jnp.int32)


def _m_step(x, resp, reg_covar):
  """sklearn's _estimate_gaussian_parameters for 1-D 'full' covariances: nk (with 10 eps), means, variances."""
  eps = jnp.finfo(x.dtype).eps
  nk = jnp.sum(resp, axis=0) + 10 * eps
  means = (resp.T @ x) / nk
  variances = jnp.sum(resp * jnp.square(x[:, None] - means[None, :]), axis=0) / nk + reg_covar
  return nk, means, variances


def _e_step(x, weights, means, variances):
  """sklearn's _estimate_log_prob_resp for 1-D: (mean log-likelihood, log responsibilities [N, 2])."""
  precision_chol = 1.0 / jnp.sqrt(variances)  # the Cholesky factor of a 1x1 precision
  y = x[:, None] * precision_chol - means * precision_chol
  log_prob = -0.5 * (math.log(2 * math.pi) + jnp.square(y)) + jnp.log(precision_chol)
  weighted = log_prob + jnp.log(weights)
  log_norm = jax.nn.logsumexp(weighted, axis=1)
  return jnp.mean(log_norm), weighted - log_norm[:, None]


def _initial_resp(x, init) -> jax.Array:
  if isinstance(init, str):
    _checks.check_choice("init", init, ("kmeans",))
    init = kmeans_labels(x)
  init = jnp.asarray(init)
  n = x.shape[0]
  if init.ndim == 1:
    if init.shape != (n,):
      raise ValueError(f"init labels have shape {init.shape}; they must be [N] = ({n},).")
    if _checks.is_concrete(init):
      _checks.check_labels("init", np.asarray(init), 2)
    return jax.nn.one_hot(init, 2, dtype=x.dtype)
  if init.shape != (n, 2):
    raise ValueError(f"init has shape {init.shape}; pass 'kmeans', labels [N] or responsibilities [N, 2], N={n}.")
  return init.astype(x.dtype)


def fit_two_component_gmm(
  x, *, max_iter: int = GMM_MAX_ITER, tol: float = GMM_TOL, reg_covar: float = GMM_REG_COVAR, init="kmeans"
) -> GMMFit:
  """Two-component 1-D Gaussian mixture by EM, as sklearn's GaussianMixture(n_components=2, max_iter=10, tol=1e-2,
  reg_covar=5e-4).fit(x.reshape(-1, 1)) and its predict_proba: DivideMix's division of the training set.

  Initialisation (sklearn's _initialize from responsibilities r [N, 2]): nk = sum_i r_ik + 10 eps,
  mu_k = sum_i r_ik x_i / nk, var_k = sum_i r_ik (x_i - mu_k)^2 / nk + reg_covar, pi_k = nk / N (not renormalised).
  Then up to `max_iter` iterations of
    E: log p_ik = log pi_k + log N(x_i; mu_k, var_k), lower_bound = mean_i logsumexp_k log p_ik,
       r_ik = exp(log p_ik - logsumexp_k log p_ik);
    M: the same estimates as above, with pi_k = nk / sum_k nk;
  stopping after the iteration where |lower_bound - previous lower_bound| < tol (the first iteration compares with
  -inf, so never stops). The posterior is one more E-step with the final parameters (sklearn's predict_proba). The
  clean probability is the posterior of the component with the smaller mean (the original's
  prob[:, gmm.means_.argmin()]). Li et al., ICLR 2020, section 3.1; sklearn.mixture._base / _gaussian_mixture.

  See the module docstring for the initialisation: sklearn's KMeans labels are random in the original (no
  random_state, unseeded NumPy); here 'kmeans' is deterministic, and labels or responsibilities can be passed.

  Args:
    x: [N] values (N >= 2), the normalised losses. [N, 1] is accepted too.
    max_iter: maximum EM iterations (>= 0; 0 returns the initial parameters).
    tol: convergence threshold on the change of the lower bound (>= 0).
    reg_covar: added to each variance (>= 0).
    init: 'kmeans' (`kmeans_labels`, the default), int labels [N] in {0, 1} (sklearn's KMeans(n_clusters=2,
      n_init=1, random_state=...).fit(x.reshape(-1, 1)).labels_ reproduces sklearn with that random_state), or
      responsibilities [N, 2].

  Returns:
    A `GMMFit`, in x's dtype (at least float32).
  """
  x = _float(x)
  if x.ndim == 2 and x.shape[1] == 1:
    x = x[:, 0]
  if x.ndim != 1 or x.shape[0] < 2:
    raise ValueError(f"x must be a vector of N >= 2 values, got shape {x.shape}.")
  if _checks.is_concrete(max_iter) and (int(max_iter) != max_iter or max_iter < 0):
    raise ValueError(f"max_iter={max_iter!r} must be an int >= 0.")
  _checks.check_range("tol", tol, 0.0, np.inf)
  _checks.check_range("reg_covar", reg_covar, 0.0, np.inf)
  resp = _initial_resp(x, init)
  return _fit_from_resp(
    x, resp, jnp.asarray(max_iter, jnp.int32), jnp.asarray(tol, x.dtype), jnp.asarray(reg_covar, x.dtype)
  )


@jax.jit
def _fit_from_resp(x, resp, max_iter, tol, reg_covar) -> GMMFit:
  n = x.shape[0]
  nk, means, variances = _m_step(x, resp, reg_covar)
  weights = nk / n

  def cond(state):
    _, _, _, _, n_iter, converged = state
    return (n_iter < max_iter) & ~converged

  def body(state):
    weights, means, variances, lower_bound, n_iter, _ = state
    new_lower_bound, log_resp = _e_step(x, weights, means, variances)
    nk, means, variances = _m_step(x, jnp.exp(log_resp), reg_covar)
    converged = jnp.abs(new_lower_bound - lower_bound) < tol
    return nk / jnp.sum(nk), means, variances, new_lower_bound, n_iter + 1, converged

  init_state = (
    weights,
    means,
    variances,
    jnp.asarray(-jnp.inf, x.dtype),
    jnp.asarray(0, jnp.int32),
    jnp.asarray(False),
  )
  weights, means, variances, lower_bound, n_iter, converged = jax.lax.while_loop(cond, body, init_state)
  _, log_resp = _e_step(x, weights, means, variances)
  posterior = jnp.exp(log_resp)
  return GMMFit(
    means=means,
    variances=variances,
    weights=weights,
    posterior=posterior,
    clean_prob=posterior[:, jnp.argmin(means)],
    lower_bound=lower_bound,
    n_iter=n_iter,
    converged=converged,
  )
