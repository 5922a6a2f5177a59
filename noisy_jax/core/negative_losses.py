"""Active Negative Loss: normalized negative losses and the ANL pairs (Ye et al., "Active Negative Loss Functions for
Learning with Noisy Labels", NeurIPS 2023, arXiv 2311.02521; original code: Virusdoll/Active-Negative-Loss,
loss.py), with the normalized focal loss they pair with (Ma et al., ICML 2020).

With p = softmax(z), p~ = max(p, m) the probabilities clamped below at m = `min_prob` (the original's 1e-7, clamped
as torch.clamp: no gradient where p < m), and soft labels y (one-hot in the papers):

  NFL   = sum_c y_c FL_c / sum_k FL_k,                  FL_k = -(1 - p_k)^gamma log p_k
  NNCE  = 1 - sum_c y_c (A + log p~_c) / sum_k (A + log p~_k),       A = -log m
  NNFL  = 1 - (A - sum_c y_c FL~_c) / (C A - sum_k FL~_k),  FL~_k = -(1 - p~_k)^gamma log p~_k,
                                                                     A = -(1 - m)^gamma log m
  ANL-CE = alpha NCE + beta NNCE;  ANL-FL = alpha NFL + beta NNFL

A is the largest value of the clamped loss (at p = m), so each A - L_k >= 0 is a "negative" loss that is largest
where p_k is largest; normalising it by its class sum makes NNL symmetric (its class sum is C - 1) and bounded.
The paper's ANL adds delta ||theta||_1 to the batch loss (delta 5e-5 on CIFAR-10, 5e-7 on CIFAR-100, no weight
decay): that is a term of the parameters, not of the examples: the optimizer's `l1` (noisy_jax.train.optim).

Where the original differs from the paper, the paper is the default:
- Its focal terms (NFL and NNFL, as in APL's code) compute (1 - p)^gamma from detached probabilities
  (`logpt.data.exp()`), so the gradient only flows through log p. `detach_modulator=True` reproduces that; the
  default differentiates the paper's formula.
- Its entropy-regularised variant (ANL_CE_ER) and the L1 term inside the loss module are not per-example terms and
  are not offered here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts

DEFAULT_MIN_PROB = 1e-7  # the original configs' min_prob


def _check_common(gamma=None, min_prob=None) -> None:
  if gamma is not None:
    _checks.check_range("gamma", gamma, 0.0, np.inf)
  if min_prob is not None:
    _checks.check_range("min_prob", min_prob, 0.0, 1.0, low_open=True, high_open=True)


def _focal_terms(log_p: jax.Array, gamma, detach: bool) -> jax.Array:
  """FL_k = -(1 - p_k)^gamma log p_k [..., C]."""
  return -loss_parts.focal_modulator(log_p, gamma, detach=detach) * log_p


def _clamped_log_p(logits: jax.Array, min_prob) -> tuple[jax.Array, jax.Array]:
  """(log max(p, m), log m) with torch.clamp's gradient."""
  log_min = jnp.log(loss_parts.hyper(min_prob, logits.dtype))
  return loss_parts.torch_clamp(jax.nn.log_softmax(logits, axis=-1), log_min), log_min


def _nfl(logits, labels, gamma, detach) -> jax.Array:
  focal = _focal_terms(jax.nn.log_softmax(logits, axis=-1), gamma, detach)
  denominator = jnp.maximum(jnp.sum(focal, axis=-1), jnp.finfo(focal.dtype).tiny)
  return jnp.sum(labels * focal, axis=-1) / denominator


def _nnce(logits, labels, min_prob) -> jax.Array:
  log_p, log_min = _clamped_log_p(logits, min_prob)
  shifted = log_p - log_min  # A + log p~ >= 0
  return 1.0 - jnp.sum(labels * shifted, axis=-1) / jnp.sum(shifted, axis=-1)


def _nnfl(logits, labels, gamma, min_prob, detach) -> jax.Array:
  log_p, log_min = _clamped_log_p(logits, min_prob)
  largest = -((1.0 - loss_parts.hyper(min_prob, logits.dtype)) ** gamma) * log_min
  focal = _focal_terms(log_p, gamma, detach)
  num_classes = logits.shape[-1]
  return 1.0 - (largest - jnp.sum(labels * focal, axis=-1)) / (num_classes * largest - jnp.sum(focal, axis=-1))


def normalized_focal_loss(logits, labels, *, gamma: float = 0.5, detach_modulator: bool = False) -> jax.Array:
  """NFL = sum_c y_c FL_c / sum_k FL_k (module docstring); symmetric: its class sum is 1.

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    gamma: focusing parameter >= 0 (default 0.5, APL's and ANL's configs).
    detach_modulator: stop the gradient of (1 - p)^gamma, as APL's and ANL's code (default False: the paper's).

  Returns:
    [...] per-example loss in [0, 1].
  """
  _check_common(gamma=gamma)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  return _nfl(logits, labels, loss_parts.hyper(gamma, logits.dtype), detach_modulator).astype(out_dtype)


def normalized_negative_cross_entropy(logits, labels, *, min_prob: float = DEFAULT_MIN_PROB) -> jax.Array:
  """NNCE = 1 - sum_c y_c (A + log p~_c) / sum_k (A + log p~_k), A = -log min_prob (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    min_prob: m in (0, 1), the clamp of p and so A (default 1e-7, the original's).

  Returns:
    [...] per-example loss in [0, 1].
  """
  _check_common(min_prob=min_prob)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  return _nnce(logits, labels, min_prob).astype(out_dtype)


def normalized_negative_focal_loss(
  logits, labels, *, gamma: float = 0.5, min_prob: float = DEFAULT_MIN_PROB, detach_modulator: bool = False
) -> jax.Array:
  """NNFL = 1 - (A - sum_c y_c FL~_c) / (C A - sum_k FL~_k), A = -(1 - m)^gamma log m (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    gamma: focusing parameter >= 0 (default 0.5, ANL's configs).
    min_prob: m in (0, 1) (default 1e-7, the original's).
    detach_modulator: stop the gradient of (1 - p~)^gamma, as the original (default False: the paper's).

  Returns:
    [...] per-example loss in [0, 1].
  """
  _check_common(gamma=gamma, min_prob=min_prob)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  gamma = loss_parts.hyper(gamma, logits.dtype)
  return _nnfl(logits, labels, gamma, min_prob, detach_modulator).astype(out_dtype)


def anl_ce(logits, labels, *, alpha: float = 1.0, beta: float = 1.0, min_prob: float = DEFAULT_MIN_PROB) -> jax.Array:
  """ANL-CE = alpha NCE + beta NNCE (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    alpha: weight of NCE, >= 0 (default 1, the original's ActiveNegativeLoss; its CIFAR-10 config 5, CIFAR-100 10).
    beta: weight of NNCE, >= 0 (default 1; CIFAR-10 5, CIFAR-100 1).
    min_prob: NNCE's m (default 1e-7).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("alpha", alpha, 0.0, np.inf)
  _checks.check_range("beta", beta, 0.0, np.inf)
  _check_common(min_prob=min_prob)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  nce = loss_parts.normalized_cross_entropy(jax.nn.log_softmax(logits, axis=-1), labels)
  return (alpha * nce + beta * _nnce(logits, labels, min_prob)).astype(out_dtype)


def anl_fl(
  logits,
  labels,
  *,
  alpha: float = 1.0,
  beta: float = 1.0,
  gamma: float = 0.5,
  min_prob: float = DEFAULT_MIN_PROB,
  detach_modulator: bool = False,
) -> jax.Array:
  """ANL-FL = alpha NFL + beta NNFL (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    alpha: weight of NFL, >= 0 (default 1; the original's CIFAR-10 config 5).
    beta: weight of NNFL, >= 0 (default 1; CIFAR-10 5).
    gamma: focusing parameter of both terms, >= 0 (default 0.5).
    min_prob: NNFL's m (default 1e-7).
    detach_modulator: stop the gradient of both (1 - p)^gamma factors, as the original (default False).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("alpha", alpha, 0.0, np.inf)
  _checks.check_range("beta", beta, 0.0, np.inf)
  _check_common(gamma=gamma, min_prob=min_prob)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  gamma = loss_parts.hyper(gamma, logits.dtype)
  value = alpha * _nfl(logits, labels, gamma, detach_modulator) + beta * _nnfl(
    logits, labels, gamma, min_prob, detach_modulator
  )
  return value.astype(out_dtype)
