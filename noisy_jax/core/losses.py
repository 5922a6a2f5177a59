"""Pure per-example losses for learning with noisy labels.

The contract every loss of this module follows:

  loss(logits [..., C], labels [..., C], *, hyper=...) -> [...]

- `labels` are probability vectors over the C classes (one-hot or soft), so every loss can read its targets from
  a label table. Shapes of `logits` and `labels` must match (ValueError otherwise).
- No reduction and no state: the result has the leading shape of `logits`. No jit inside; the caller jits, and
  every loss works under `jax.jit`, `jax.vmap` and `jax.grad`.
- Numerically stable through `jax.nn.log_softmax`: the value and the gradient are finite for logits anywhere in
  [-1e4, 1e4], in float32 and in bfloat16. The computation runs in at least float32 (bfloat16/float16 inputs are
  upcast) and the result is returned in the logits' dtype.
- Hyper-parameters are keyword-only and validated (ValueError naming the value and the allowed range) when they
  are concrete numbers; traced values are not checked.
- Losses defined on the target-class probability p_y use, for soft labels, the expectation sum_c y_c l(p_c), which
  is the paper's form for one-hot labels.

Batch-level terms (the Joint Optimization prior penalty and loss) are separate functions of the whole batch and
return a scalar; `smooth_labels` transforms labels. `get(name)` looks a per-example loss up by name (`LOSSES`).

This module holds the classic losses and the catalogue; the newer families follow the same contract in their own
modules, and the catalogue lists them: `asymmetric_losses` (AGCE, AUL, AEL and their NCE pairs, ICML 2021),
`negative_losses` (NFL, NNCE, NNFL, ANL-CE, ANL-FL, NeurIPS 2023), `bi_tempered` (NeurIPS 2019),
`polynomial_losses` (Poly-1, Taylor CE), `logit_clip` (LogitClip, ICML 2023: `logit_clip` below),
`eps_softmax_losses` (ECE+MAE, EFL+MAE, NeurIPS 2024) and `joint_asymmetric_losses` (AMSE, JAL-CE, JAL-FL,
ICCV 2025).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import asymmetric_losses
from noisy_jax.core import bi_tempered
from noisy_jax.core import eps_softmax_losses
from noisy_jax.core import joint_asymmetric_losses
from noisy_jax.core import logit_clip as logit_clip_lib
from noisy_jax.core import loss_parts
from noisy_jax.core import negative_losses
from noisy_jax.core import polynomial_losses

# The SCE paper's A: log 0 is replaced by this value in the reverse cross entropy.
DEFAULT_LOG_ZERO = -4.0
# What APL's code (Ma et al., ICML 2020) uses for log 0 in its RCE: it clamps one-hot labels at 1e-4 before the log.
APL_LOG_ZERO = float(np.log(1e-4))
# Encouraging loss: the original code clamps 1 - p at this value inside the log of the bonus.
ENCOURAGING_CLAMP = 1e-5


# ---------------------------------------------------------------------------------------------------------------
# Classic losses.


def cross_entropy(logits, labels) -> jax.Array:
  """Cross entropy: CE = -sum_c y_c log p_c, p = softmax(logits).

  Args:
    logits: [..., C] unnormalised scores.
    labels: [..., C] probability vectors (one-hot or soft).

  Returns:
    [...] per-example loss in the logits' dtype.
  """
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  return (-jnp.sum(labels * log_p, axis=-1)).astype(out_dtype)


def mean_absolute_error(logits, labels) -> jax.Array:
  """Mean absolute error: MAE = sum_c |p_c - y_c| (= 2 - 2 p_y for one-hot labels).

  Robust to symmetric noise (Ghosh et al., AAAI 2017); used in Active-Passive Losses (Ma et al., ICML 2020).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.

  Returns:
    [...] per-example loss.
  """
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  p = jax.nn.softmax(logits, axis=-1)
  return jnp.sum(jnp.abs(p - labels), axis=-1).astype(out_dtype)


def kl_divergence(logits, labels) -> jax.Array:
  """KL(y || p) = sum_c y_c (log y_c - log p_c), with 0 log 0 = 0.

  Differs from `cross_entropy` by the label entropy only (a constant w.r.t. the logits): same gradient.

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors; zeros allowed (the gradient w.r.t. the logits stays finite).

  Returns:
    [...] per-example divergence.
  """
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  return _kl(labels, log_p).astype(out_dtype)


def _kl(labels: jax.Array, log_p: jax.Array) -> jax.Array:
  positive = labels > 0
  log_labels = jnp.log(jnp.where(positive, labels, 1.0))
  return jnp.sum(jnp.where(positive, labels * (log_labels - log_p), 0.0), axis=-1)


def entropy(logits) -> jax.Array:
  """Entropy of the prediction: H(p) = -sum_c p_c log p_c, p = softmax(logits).

  The gradient flows through both factors of p log p (Joint Optimization's Le).

  Args:
    logits: [..., C].

  Returns:
    [...] per-example entropy in the logits' dtype.
  """
  logits = jnp.asarray(logits)
  out_dtype = loss_parts.output_dtype(logits.dtype)
  log_p = jax.nn.log_softmax(logits.astype(loss_parts.compute_dtype(logits.dtype)), axis=-1)
  return _entropy(log_p).astype(out_dtype)


def _entropy(log_p: jax.Array) -> jax.Array:
  return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)


def focal_loss(logits, labels, *, gamma: float = 2.0) -> jax.Array:
  """Focal loss (Lin et al., ICCV 2017, arXiv 1708.02002): -sum_c y_c (1 - p_c)^gamma log p_c.

  gamma = 0 is cross entropy. (1 - p)^gamma is computed as exp(gamma log max(1 - p, tiny)) with 1 - p from
  expm1, so the value and the gradient stay finite as p -> 1 for every gamma >= 0.

  The gradient flows through the modulating factor (1 - p)^gamma, as the paper's loss is differentiated. APL's code
  (Ma et al., ICML 2020, whose focal-loss baselines are often quoted) detaches it: its p_t is computed from
  `logpt.data`, so only the -log p_t factor is differentiated. Same value, different gradient for gamma > 0.

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    gamma: focusing parameter, >= 0 (default 2.0, the paper's).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("gamma", gamma, 0.0, np.inf)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  modulator = loss_parts.focal_modulator(log_p, loss_parts.hyper(gamma, log_p.dtype))
  return (-jnp.sum(labels * modulator * log_p, axis=-1)).astype(out_dtype)


def smooth_labels(labels, *, epsilon: float) -> jax.Array:
  """Label smoothing: (1 - epsilon) y + epsilon / C.

  Args:
    labels: [..., C] probability vectors.
    epsilon: smoothing mass in [0, 1].

  Returns:
    [..., C] smoothed labels in the labels' floating dtype (float32 for integer labels).
  """
  _checks.check_range("epsilon", epsilon, 0.0, 1.0)
  labels = jnp.asarray(labels)
  if labels.ndim < 1:
    raise ValueError(f"labels must have a trailing class axis [..., C], got shape {labels.shape}.")
  labels = labels.astype(loss_parts.output_dtype(labels.dtype))
  eps = loss_parts.hyper(epsilon, labels.dtype)
  return (1.0 - eps) * labels + eps / labels.shape[-1]


# ---------------------------------------------------------------------------------------------------------------
# Generalized cross entropy (Lq) and truncated Lq.


def generalized_cross_entropy(logits, labels, *, q: float = 0.7) -> jax.Array:
  """Generalized cross entropy Lq (Zhang & Sabuncu, NeurIPS 2018, arXiv 1805.07836).

  Lq = sum_c y_c (1 - p_c^q) / q, q in (0, 1]; for one-hot labels (1 - p_y^q) / q. q -> 0 gives cross entropy,
  q = 1 gives MAE / 2. p^q is computed as exp(q log_softmax) and 1 - p^q as -expm1(q log p) (accurate for
  small q).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    q: exponent in (0, 1] (default 0.7, the paper's).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("q", q, 0.0, 1.0, low_open=True)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  q = loss_parts.hyper(q, log_p.dtype)
  return jnp.sum(labels * _lq_of_log_p(log_p, q), axis=-1).astype(out_dtype)


def _lq_of_log_p(log_p: jax.Array, q: jax.Array) -> jax.Array:
  """(1 - p^q) / q from log p."""
  return -jnp.expm1(q * log_p) / q


def truncated_generalized_cross_entropy(logits, labels, *, q: float = 0.7, k: float = 0.5) -> jax.Array:
  """Truncated Lq, online form (Zhang & Sabuncu, NeurIPS 2018, arXiv 1805.07836).

  Per class: Ltrunc(p) = Lq(k) if p <= k else Lq(p), with Lq(p) = (1 - p^q)/q and Lq(k) = (1 - k^q)/q a constant
  (zero gradient where p <= k); soft labels: sum_c y_c Ltrunc(p_c).

  The paper does not optimise this function directly: it alternates ("ACS", Algorithm 1) between parameter
  updates on sum_i w_i (Lq_i - Lq(k)) and a pruning step that sets w_i = [p_y(x_i) > k] with the parameters fixed.
  The trainer implements that with the label table's per-example weights (`noisy_jax.methods`, 'truncated_lq');
  this function is the online variant that truncates with the current prediction at every step.

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    q: exponent in (0, 1] (default 0.7).
    k: truncation threshold in the open interval (0, 1) (default 0.5).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("q", q, 0.0, 1.0, low_open=True)
  _checks.check_range("k", k, 0.0, 1.0, low_open=True, high_open=True)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  q = loss_parts.hyper(q, log_p.dtype)
  k = loss_parts.hyper(k, log_p.dtype)
  lq_at_k = _lq_of_log_p(jnp.log(k), q)
  per_class = jnp.where(jnp.exp(log_p) <= k, lq_at_k, _lq_of_log_p(log_p, q))
  return jnp.sum(labels * per_class, axis=-1).astype(out_dtype)


# ---------------------------------------------------------------------------------------------------------------
# Encouraging loss.


def encouraging_loss(logits, labels, *, log_end: float = 0.75) -> jax.Array:
  """Encouraging loss (Zhao et al., AAAI 2022, arXiv 2110.06537).

  Per class, EL(p) = -log p + bonus(p), where
    bonus(p) = log(max(1 - p, 1e-5))                          for p <= log_end (the 1e-5 clamp is the original code's),
    bonus(p) = (p - log_end) / (log_end - 1) + log(1 - log_end)  for p > log_end,
  i.e. beyond `log_end` the "conservative" bonus is the tangent of log(1 - p) at log_end. log_end = 1 is the full
  bonus everywhere; then the gradient w.r.t. the target logit is exactly -1 (one-hot labels, p <= 1 - 1e-5): it
  does not vanish as p -> 1. Gradients flow through the bonus. 1 - p is computed as -expm1(log p).

  Soft labels give sum_c y_c EL(p_c); label smoothing with eps is therefore `encouraging_loss(logits,
  smooth_labels(y, epsilon=eps))` = (1 - eps) EL_y + eps mean_c EL(p_c), the paper's smoothed form. The bonus is a
  training-only term: evaluate with cross entropy.

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    log_end: in (0, 1] (default 0.75, the paper's CIFAR/ImageNet value; 1.0 for MNIST).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("log_end", log_end, 0.0, 1.0, low_open=True)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  p = jnp.exp(log_p)
  log_end = loss_parts.hyper(log_end, log_p.dtype)
  full_bonus = jnp.log(jnp.maximum(loss_parts.one_minus_exp(log_p), ENCOURAGING_CLAMP))
  # log_end = 1: p > log_end never holds; the safe slope only avoids 0-division in the unused branch.
  slope_denominator = jnp.where(log_end < 1.0, log_end - 1.0, -1.0)
  tangent_bonus = (p - log_end) / slope_denominator + jnp.log(jnp.maximum(1.0 - log_end, ENCOURAGING_CLAMP))
  bonus = jnp.where(p > log_end, tangent_bonus, full_bonus)
  return jnp.sum(labels * (bonus - log_p), axis=-1).astype(out_dtype)


# ---------------------------------------------------------------------------------------------------------------
# Symmetric CE and Active-Passive Losses.


def reverse_cross_entropy(logits, labels, *, log_zero: float = DEFAULT_LOG_ZERO) -> jax.Array:
  """Reverse cross entropy (Wang et al., ICCV 2019, arXiv 1908.06112): RCE = -sum_c p_c log y_c.

  log y_c is clamped below at `log_zero` (log 0 := A = -4, the paper's), so for one-hot labels
  RCE = -A (1 - p_y).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    log_zero: A < 0 (default -4.0).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("log_zero", log_zero, -np.inf, 0.0, high_open=True)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  return _rce(logits, labels, log_zero).astype(out_dtype)


def _rce(logits: jax.Array, labels: jax.Array, log_zero) -> jax.Array:
  p = jax.nn.softmax(logits, axis=-1)
  # log(max(y, e^A)) = max(log y, A), without a -inf anywhere.
  clamped_log_labels = jnp.log(jnp.maximum(labels, jnp.exp(loss_parts.hyper(log_zero, logits.dtype))))
  return -jnp.sum(p * clamped_log_labels, axis=-1)


def symmetric_cross_entropy(
  logits, labels, *, alpha: float = 0.1, beta: float = 1.0, log_zero: float = DEFAULT_LOG_ZERO
) -> jax.Array:
  """Symmetric cross entropy (Wang et al., ICCV 2019, arXiv 1908.06112): SCE = alpha CE + beta RCE.

  RCE's log 0 is `log_zero` (A): -4 as in the SCE paper by default; APL's implementation of SCE (Ma et al., ICML
  2020) clamps the one-hot labels at 1e-4 instead, i.e. `log_zero=APL_LOG_ZERO` (log 1e-4 = -9.21).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    alpha: weight of CE, >= 0 (default 0.1, the paper's CIFAR-10 value).
    beta: weight of RCE, >= 0 (default 1.0).
    log_zero: RCE's A < 0 (default -4.0).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("alpha", alpha, 0.0, np.inf)
  _checks.check_range("beta", beta, 0.0, np.inf)
  _checks.check_range("log_zero", log_zero, -np.inf, 0.0, high_open=True)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  ce = -jnp.sum(labels * jax.nn.log_softmax(logits, axis=-1), axis=-1)
  value = loss_parts.hyper(alpha, logits.dtype) * ce + loss_parts.hyper(beta, logits.dtype) * _rce(
    logits, labels, log_zero
  )
  return value.astype(out_dtype)


def _nce(logits: jax.Array, labels: jax.Array) -> jax.Array:
  return loss_parts.normalized_cross_entropy(jax.nn.log_softmax(logits, axis=-1), labels)


def normalized_cross_entropy(logits, labels) -> jax.Array:
  """Normalized cross entropy (Ma et al., ICML 2020, arXiv 2006.13554): NCE = CE(y) / sum_k (-log p_k).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.

  Returns:
    [...] per-example loss in [0, 1].
  """
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  return _nce(logits, labels).astype(out_dtype)


def nce_rce(logits, labels, *, alpha: float = 1.0, beta: float = 1.0, log_zero: float = DEFAULT_LOG_ZERO) -> jax.Array:
  """Active-Passive Loss NCE+RCE (Ma et al., ICML 2020, arXiv 2006.13554): alpha NCE + beta RCE.

  NCE = CE(y) / sum_k (-log p_k); RCE = -sum_c p_c max(log y_c, A) (`reverse_cross_entropy`).

  Two conventions for A = log 0:
  - `log_zero=-4.0` (default): the SCE paper's A = -4, so RCE = 4 (1 - p_y) for one-hot labels.
  - `log_zero=APL_LOG_ZERO` (= log 1e-4 = -9.2103): what APL's own code computes (it clamps the one-hot labels
    at 1e-4 before the log), and so what APL's published NCE+RCE numbers come from: RCE = 9.21 (1 - p_y).
    APL's code also clamps p at 1e-7 inside RCE; that changes the value by less than (C - 1) * 1e-7 * 9.22 and is
    not reproduced.

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    alpha: weight of NCE, >= 0 (default 1.0; APL's CIFAR-10 value).
    beta: weight of RCE, >= 0 (default 1.0; APL's CIFAR-10 value).
    log_zero: RCE's A < 0 (default -4.0; APL's code: `APL_LOG_ZERO`).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("alpha", alpha, 0.0, np.inf)
  _checks.check_range("beta", beta, 0.0, np.inf)
  _checks.check_range("log_zero", log_zero, -np.inf, 0.0, high_open=True)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  value = loss_parts.hyper(alpha, logits.dtype) * _nce(logits, labels) + loss_parts.hyper(beta, logits.dtype) * _rce(
    logits, labels, log_zero
  )
  return value.astype(out_dtype)


def nce_mae(logits, labels, *, alpha: float = 1.0, beta: float = 1.0) -> jax.Array:
  """Active-Passive Loss NCE+MAE (Ma et al., ICML 2020): alpha NCE + beta MAE, MAE = sum_c |p_c - y_c|.

  Our MAE is the paper's sum_c |p_c - y_c| = 2 - 2 p_y (one-hot labels). APL's code computes MAE as 1 - p_y, half
  of ours, and its published NCE+MAE numbers come from that code: APL's NCE+MAE(alpha, beta) is
  `nce_mae(alpha=alpha, beta=beta / 2)` here (their CIFAR-10 (1, 1) is our (1, 0.5)).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    alpha: weight of NCE, >= 0 (default 1.0).
    beta: weight of MAE, >= 0 (default 1.0).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("alpha", alpha, 0.0, np.inf)
  _checks.check_range("beta", beta, 0.0, np.inf)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  mae = jnp.sum(jnp.abs(jax.nn.softmax(logits, axis=-1) - labels), axis=-1)
  value = loss_parts.hyper(alpha, logits.dtype) * _nce(logits, labels) + loss_parts.hyper(beta, logits.dtype) * mae
  return value.astype(out_dtype)


# ---------------------------------------------------------------------------------------------------------------
# Bootstrapping (Reed et al., ICLR 2015 workshop, arXiv 1412.6596).


def bootstrap_soft(logits, labels, *, beta: float = 0.95) -> jax.Array:
  """Soft bootstrapping: cross entropy against the target beta y + (1 - beta) p.

  The gradient flows through p in the target, so the loss equals beta CE + (1 - beta) H(p) (H = entropy);
  some implementations stop the gradient there instead.

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    beta: weight of the given labels in [0, 1] (default 0.95, the paper's).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("beta", beta, 0.0, 1.0)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  beta = loss_parts.hyper(beta, log_p.dtype)
  target = beta * labels + (1.0 - beta) * jnp.exp(log_p)
  return (-jnp.sum(target * log_p, axis=-1)).astype(out_dtype)


def bootstrap_hard(logits, labels, *, beta: float = 0.8) -> jax.Array:
  """Hard bootstrapping: cross entropy against beta y + (1 - beta) one_hot(argmax p), no gradient via argmax.

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    beta: weight of the given labels in [0, 1] (default 0.8, the paper's).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("beta", beta, 0.0, 1.0)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  beta = loss_parts.hyper(beta, log_p.dtype)
  predicted = jax.nn.one_hot(jnp.argmax(logits, axis=-1), logits.shape[-1], dtype=log_p.dtype)
  target = beta * labels + (1.0 - beta) * predicted
  return (-jnp.sum(target * log_p, axis=-1)).astype(out_dtype)


# ---------------------------------------------------------------------------------------------------------------
# Joint Optimization (Tanaka et al., CVPR 2018, arXiv 1803.11364): batch-level terms.


def _check_prior(prior, num_classes: int) -> None:
  if not _checks.is_concrete(prior):
    return
  arr = np.asarray(prior, dtype=np.float64)
  if arr.shape != (num_classes,):
    raise ValueError(f"prior has shape {arr.shape}; it must be a vector of length C={num_classes}.")
  if np.any(arr < 0) or np.any(np.isnan(arr)):
    raise ValueError(f"prior={arr.tolist()!r} has negative or NaN entries; it must be a probability vector.")
  if abs(arr.sum() - 1.0) > 1e-5:
    raise ValueError(f"prior sums to {float(arr.sum())!r}; it must sum to 1 (within 1e-5).")


def _valid_mask(where, leading_shape) -> jax.Array:
  if where is None:
    return jnp.ones(leading_shape, bool)
  where = jnp.asarray(where)
  _checks.check_same_shape("where", where, "logits[..., 0]", np.empty(leading_shape))
  return where if where.dtype == bool else where != 0


def _global_sum(x: jax.Array, axis_name) -> jax.Array:
  return x if axis_name is None else jax.lax.psum(x, axis_name)


def _log_mean_softmax(log_p: jax.Array, valid: jax.Array, axis_name) -> tuple[jax.Array, jax.Array]:
  """log s_bar [C] over the valid rows of log_p [N, C] (global over `axis_name`), and the global row count."""
  masked = jnp.where(valid[:, None], log_p, -jnp.inf)
  shift = jax.lax.stop_gradient(jnp.max(masked, axis=0))
  if axis_name is not None:
    shift = jax.lax.pmax(shift, axis_name)
  shift = jnp.where(jnp.isfinite(shift), shift, 0.0)  # no valid row anywhere: any finite shift will do
  sum_exp = _global_sum(jnp.sum(jnp.exp(jnp.where(valid[:, None], log_p - shift, -jnp.inf)), axis=0), axis_name)
  count = _global_sum(jnp.sum(valid.astype(log_p.dtype)), axis_name)
  tiny = jnp.finfo(log_p.dtype).tiny
  log_mean = shift + jnp.log(jnp.maximum(sum_exp, tiny)) - jnp.log(jnp.maximum(count, 1.0))
  return log_mean, count


def _prior_penalty(log_p: jax.Array, prior: jax.Array, valid: jax.Array, axis_name) -> jax.Array:
  log_mean, count = _log_mean_softmax(log_p, valid, axis_name)
  return jnp.where(count > 0, _kl(prior, log_mean), 0.0)


def prior_penalty(logits, prior, *, axis_name=None, where=None) -> jax.Array:
  """Joint Optimization's prior term Lp = KL(prior || s_bar) = sum_c prior_c (log prior_c - log s_bar_c).

  s_bar is the mean softmax over ALL leading axes of `logits` (the batch). log s_bar is a log-mean-exp of
  log_softmax shifted by a stop-gradient per-class maximum, so a class whose mass vanishes gives a large finite
  value, not inf/NaN. Tanaka et al., CVPR 2018 (arXiv 1803.11364).

  Args:
    logits: [..., C], the (per-device) batch.
    prior: [C] class prior, a probability vector (validated when concrete; uniform for CIFAR-10).
    axis_name: when given, s_bar is the mean over the global batch across this named axis (shard_map/pmap/vmap):
      per-shard sums and counts are `psum`-ed and the shift is `pmax`-ed, so shards may differ in size.
    where: optional [...] mask (nonzero = row counts); masked rows (padding) are left out of s_bar. With no valid
      row in the (global) batch the penalty is 0.

  Returns:
    Scalar penalty in the logits' dtype.
  """
  logits = jnp.asarray(logits)
  if logits.ndim < 1:
    raise ValueError(f"logits must have a trailing class axis [..., C], got shape {logits.shape}.")
  _check_prior(prior, logits.shape[-1])
  out_dtype = loss_parts.output_dtype(logits.dtype)
  compute = loss_parts.compute_dtype(logits.dtype)
  valid = _valid_mask(where, logits.shape[:-1]).reshape(-1)
  log_p = jax.nn.log_softmax(logits.astype(compute), axis=-1).reshape(-1, logits.shape[-1])
  return _prior_penalty(log_p, jnp.asarray(prior, compute), valid, axis_name).astype(out_dtype)


def joint_optimization_loss(
  logits, labels, *, prior, alpha: float, beta: float, axis_name=None, where=None
) -> jax.Array:
  """Joint Optimization's batch loss L = Lc + alpha Lp + beta Le (Tanaka et al., CVPR 2018, arXiv 1803.11364).

    Lc = mean_i KL(y_i || s_i), Lp = `prior_penalty` = KL(prior || mean_i s_i), Le = mean_i H(s_i),
  with s_i = softmax(logits_i) and means over all leading axes. The paper writes Lc as cross entropy: KL and cross
  entropy differ only by the label entropy, a label-only constant (same gradient w.r.t. the logits). Likewise the
  original code computes the prior term as a cross entropy, -sum_c prior_c log s_bar_c, where we take the KL: ours
  is lower by alpha H(prior) (alpha log C for the uniform prior), with the same gradient. So the loss values
  logged here are lower than the original code's by the label entropy plus alpha H(prior); the training is the same.
  Le's gradient flows through both factors of s log s.

  Args:
    logits: [..., C], the (per-device) batch.
    labels: [..., C] the label table's soft labels for these rows.
    prior: [C] class prior (probability vector).
    alpha: weight of Lp, >= 0 (code default 1.0; see REFERENCE for the paper's per-setting values).
    beta: weight of Le, >= 0 (code default 0.5).
    axis_name: when given, every mean is over the global batch across this named axis (`psum` of per-shard sums
      over `psum` of counts; with equal shard sizes this is the `pmean` of the per-shard means).
    where: optional [...] mask (nonzero = row counts); masked rows (padding) are left out of every mean.

  Returns:
    Scalar loss in the logits' dtype.
  """
  _checks.check_range("alpha", alpha, 0.0, np.inf)
  _checks.check_range("beta", beta, 0.0, np.inf)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  _check_prior(prior, logits.shape[-1])
  num_classes = logits.shape[-1]
  valid = _valid_mask(where, logits.shape[:-1]).reshape(-1)
  log_p = jax.nn.log_softmax(logits, axis=-1).reshape(-1, num_classes)
  labels = labels.reshape(-1, num_classes)
  count = jnp.maximum(_global_sum(jnp.sum(valid.astype(log_p.dtype)), axis_name), 1.0)

  def global_mean(per_example):
    return _global_sum(jnp.sum(jnp.where(valid, per_example, 0.0)), axis_name) / count

  classification = global_mean(_kl(labels, log_p))
  penalty = _prior_penalty(log_p, jnp.asarray(prior, log_p.dtype), valid, axis_name)
  prediction_entropy = global_mean(_entropy(log_p))
  total = (
    classification
    + loss_parts.hyper(alpha, log_p.dtype) * penalty
    + loss_parts.hyper(beta, log_p.dtype) * prediction_entropy
  )
  return total.astype(out_dtype)


# ---------------------------------------------------------------------------------------------------------------
# LogitClip: any loss of the catalogue on norm-clipped logits.


def logit_clip(
  logits,
  labels,
  *,
  temperature: float = 1.0,
  norm_order: float = 2.0,
  loss: str = "cross_entropy",
  loss_kwargs: dict | None = None,
  original_threshold: bool = False,
) -> jax.Array:
  """LogitClip (Wei et al., ICML 2023): the loss called `loss` on the clipped logits, loss(clip(z), y; loss_kwargs),
  clip(z) = delta z / (||z||_p + 1e-7) where that norm exceeds delta = 1 / temperature (`logit_clip.clip_logits`).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    temperature: tau > 0 (default 1; the original's README runs 1.5 for CE at 50% symmetric noise).
    norm_order: p >= 1 (default 2).
    loss: the clipped loss's name in `LOSSES` (default 'cross_entropy'; not 'logit_clip').
    loss_kwargs: that loss's hyper-parameters (default none).
    original_threshold: clip where the norm exceeds tau, as the original's code (default False: delta).

  Returns:
    [...] per-example loss.
  """
  if loss == "logit_clip":
    raise ValueError("logit_clip's loss must be another loss of the catalogue, got 'logit_clip'.")
  loss_fn = get(loss)
  clipped = logit_clip_lib.clip_logits(
    logits, temperature=temperature, norm_order=norm_order, original_threshold=original_threshold
  )
  return loss_fn(clipped, labels, **dict(loss_kwargs or {}))


# ---------------------------------------------------------------------------------------------------------------
# Registry.

# The per-example losses `loss(logits, labels, **hyper) -> [...]`. Left out on purpose, because their signatures
# differ: `entropy` (no labels), `smooth_labels` (a label transform), and the batch-level scalar terms
# `prior_penalty` and `joint_optimization_loss` (used by the 'joint_optimization' method).
LOSSES: dict[str, Callable[..., jax.Array]] = {
  "cross_entropy": cross_entropy,
  "mean_absolute_error": mean_absolute_error,
  "generalized_cross_entropy": generalized_cross_entropy,
  "truncated_generalized_cross_entropy": truncated_generalized_cross_entropy,
  "encouraging_loss": encouraging_loss,
  "kl_divergence": kl_divergence,
  "reverse_cross_entropy": reverse_cross_entropy,
  "symmetric_cross_entropy": symmetric_cross_entropy,
  "normalized_cross_entropy": normalized_cross_entropy,
  "nce_rce": nce_rce,
  "nce_mae": nce_mae,
  "bootstrap_soft": bootstrap_soft,
  "bootstrap_hard": bootstrap_hard,
  "focal_loss": focal_loss,
  "asymmetric_generalized_cross_entropy": asymmetric_losses.asymmetric_generalized_cross_entropy,
  "asymmetric_unhinged_loss": asymmetric_losses.asymmetric_unhinged_loss,
  "asymmetric_exponential_loss": asymmetric_losses.asymmetric_exponential_loss,
  "nce_agce": asymmetric_losses.nce_agce,
  "nce_aul": asymmetric_losses.nce_aul,
  "nce_ael": asymmetric_losses.nce_ael,
  "normalized_focal_loss": negative_losses.normalized_focal_loss,
  "normalized_negative_cross_entropy": negative_losses.normalized_negative_cross_entropy,
  "normalized_negative_focal_loss": negative_losses.normalized_negative_focal_loss,
  "anl_ce": negative_losses.anl_ce,
  "anl_fl": negative_losses.anl_fl,
  "bi_tempered_logistic_loss": bi_tempered.bi_tempered_logistic_loss,
  "poly1_cross_entropy": polynomial_losses.poly1_cross_entropy,
  "taylor_cross_entropy": polynomial_losses.taylor_cross_entropy,
  "logit_clip": logit_clip,
  "ece_mae": eps_softmax_losses.ece_mae,
  "efl_mae": eps_softmax_losses.efl_mae,
  "asymmetric_mean_squared_error": joint_asymmetric_losses.asymmetric_mean_squared_error,
  "jal_ce": joint_asymmetric_losses.jal_ce,
  "jal_fl": joint_asymmetric_losses.jal_fl,
}


def names() -> tuple[str, ...]:
  """The names `get` accepts, sorted."""
  return tuple(sorted(LOSSES))


def get(name: str) -> Callable[..., jax.Array]:
  """The per-example loss called `name` (a key of `LOSSES`); ValueError listing the known names otherwise."""
  _checks.check_choice("loss", name, LOSSES)
  return LOSSES[name]
