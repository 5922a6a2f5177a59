"""epsilon-softmax losses CE_eps+MAE and FL_eps+MAE (Wang et al., "epsilon-Softmax: Approximating One-Hot Vectors
for Mitigating Label Noise", NeurIPS 2024, arXiv 2508.02387; original code: cswjl/eps-softmax, losses.py, called
ECEandMAE and EFLandMAE there).

The epsilon-softmax of logits z moves the prediction towards the one-hot vector of its own argmax k = argmax_c p_c
(p = softmax(z)), by a weight m >= 0 (losses.py:15-17 and 67-69):

  p~_c = (p_c + m [c = k]) / (m + 1),   then clamped below: p^_c = max(p~_c, min_prob)   (losses.py:18, 70)

and the per-example losses, with soft labels y (one-hot in the paper and the code; soft labels take the expectation
sum_c y_c l(p^_c), the catalogue's convention):

  ECE   = -sum_c y_c log p^_c                                   (losses.py:8-21, ECELoss)
  EFL   = -sum_c y_c (1 - p^_c)^gamma log p^_c                  (losses.py:47-87, EFocalLoss)
  MAE   = 2 sum_c y_c (1 - p_c)  (= sum_c |p_c - y_c| for one-hot y; MAELoss, scale 2, losses.py:144-153)
  ECE+MAE = alpha ECE + beta MAE                                (losses.py:23-33, ECEandMAE)
  EFL+MAE = alpha EFL + beta MAE                                (losses.py:34-44, EFLandMAE)

The prediction p~ is within (1 - 1/C) / (m + 1) of the one-hot vector e_k in every coordinate: the paper's
"controllable error epsilon" shrinks as 1 / (m + 1) (our derivation from the code; the paper's own symbol for m and
its exact statement of epsilon were not checked, the paper's text was not available here). The argmax is a
constant of the forward pass (no gradient through it); the gradient flows through p_c / (m + 1) in every class.
With a one-hot label, ECE is bounded by -log(min_prob) = 18.42 (min_prob 1e-8): the clamp is what bounds it; without
it the non-argmax terms grow as -log p.

Hyper-parameters of the original (config.py:101-129, get_eps_softmax; main.py takes them from there):
- CIFAR-10: symmetric noise alpha 0.01, beta 5, m 1e5; asymmetric 0.02, 5, 1e3; instance-dependent 0.045, 10, 1e5.
- CIFAR-100: symmetric or dependent noise beta 1, m 1e4 and alpha 0.1 (0% noise), 0.05 (20%), 0.03 (40%),
  0.00125 (60%), 0.0075 (80%); asymmetric beta 1, m 1e2 and alpha 0.015 (10%), 0.007 (20%), 0.005 (30%),
  0.004 (40%).
- WebVision 0.015, 0.3, 1e3; Clothing1M 0.012, 0.1, 1e3. The same values serve ECE+MAE and EFL+MAE; EFL's gamma is
  never set there, so it is EFLandMAE's default 0.1. min_prob is the module constant eps = 1e-8 (losses.py:6).
- Weight decay (config.py:169-187): L2 1e-4 on CIFAR-10, 1e-5 on CIFAR-100, no L1 term.
The keyword defaults here are CIFAR-10's symmetric-noise values (ECEandMAE's own defaults are alpha = beta = 1 with
no default for m).

Differences from the original code, each checked against a float64 transcription of it in
tests/test_eps_softmax_losses.py:
- Numerics only: log p~ is computed from log_softmax (log p - log(m + 1) off the argmax, log1p(-(1 - p) / (m + 1))
  at it) instead of log of the rounded p~; the clamp is applied to log p~ at log(min_prob), with torch.clamp's
  gradient (none where p~ < min_prob). Same value and gradient in exact arithmetic.
- EFL's focal factor: the code computes (1 - p^)^gamma from detached probabilities (`logpt.data.exp()`,
  losses.py:75), so the gradient only flows through log p^. The paper's text could not be checked here, so the code's
  form is the default (`detach_modulator=True`); `detach_modulator=False` differentiates the factor too, as the
  focal loss of Lin et al. (2017) and `losses.focal_loss` do.
- EFocalLoss's class-balancing alpha (losses.py:77-81) is None in EFLandMAE and not offered; its N,C,H,W reshaping
  (losses.py:61-64) is the catalogue's [..., C] contract.
- The code averages over the batch; these are per-example losses (the trainer takes the mean).
- Ties of the argmax: the code's torch.argmax and jnp.argmax both take the first maximal class (of the rounded p
  there, of log p here; they can differ only between two classes whose probabilities round to the same float).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts

DEFAULT_MIN_PROB = 1e-8  # the original's eps (losses.py:6), the clamp of the epsilon-softmax output


def _check(alpha, beta, m, min_prob, gamma=None) -> None:
  _checks.check_range("alpha", alpha, 0.0, np.inf)
  _checks.check_range("beta", beta, 0.0, np.inf)
  _checks.check_range("m", m, 0.0, np.inf)
  _checks.check_range("min_prob", min_prob, 0.0, 1.0, low_open=True, high_open=True)
  if gamma is not None:
    _checks.check_range("gamma", gamma, 0.0, np.inf)


def eps_softmax_log_probs(log_p: jax.Array, m, min_prob) -> jax.Array:
  """log max(p~, min_prob) [..., C] of the epsilon-softmax p~ = (p + m e_argmax) / (m + 1), from log p [..., C].

  The clamp has torch.clamp's gradient (zero where p~ < min_prob).
  """
  m = loss_parts.hyper(m, log_p.dtype)
  log_scale = jnp.log1p(m)  # log(m + 1)
  at_argmax = jax.nn.one_hot(jnp.argmax(log_p, axis=-1), log_p.shape[-1], dtype=bool)
  # At the argmax: log((p + m) / (m + 1)) = log1p(-(1 - p) / (m + 1)); elsewhere log p - log(m + 1). The
  # argmax's 1 - p is at most 1 - 1/C; elsewhere it is replaced by 0 so that the unused branch stays finite (m = 0).
  top = jnp.log1p(-jnp.where(at_argmax, loss_parts.one_minus_exp(log_p), 0.0) / (m + 1.0))
  log_eps_p = jnp.where(at_argmax, top, log_p - log_scale)
  return loss_parts.torch_clamp(log_eps_p, jnp.log(loss_parts.hyper(min_prob, log_p.dtype)))


def _mae(log_p: jax.Array, labels: jax.Array) -> jax.Array:
  """2 sum_c y_c (1 - p_c): the original's MAELoss (scale 2) for one-hot labels."""
  return 2.0 * jnp.sum(labels * loss_parts.one_minus_exp(log_p), axis=-1)


def ece_mae(
  logits,
  labels,
  *,
  alpha: float = 0.01,
  beta: float = 5.0,
  m: float = 1e5,
  min_prob: float = DEFAULT_MIN_PROB,
) -> jax.Array:
  """ECE+MAE = alpha (-sum_c y_c log max(p~_c, min_prob)) + beta 2 sum_c y_c (1 - p_c) (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    alpha: weight of the epsilon-softmax cross entropy, >= 0 (default 0.01, the original's CIFAR-10 symmetric).
    beta: weight of MAE, >= 0 (default 5).
    m: weight of the argmax's one-hot vector in the epsilon-softmax, >= 0 (default 1e5); m = 0 is plain softmax.
    min_prob: clamp of p~ in (0, 1) (default 1e-8, the original's).

  Returns:
    [...] per-example loss, at most alpha (-log min_prob) + 2 beta.
  """
  _check(alpha, beta, m, min_prob)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  ece = -jnp.sum(labels * eps_softmax_log_probs(log_p, m, min_prob), axis=-1)
  value = loss_parts.hyper(alpha, log_p.dtype) * ece + loss_parts.hyper(beta, log_p.dtype) * _mae(log_p, labels)
  return value.astype(out_dtype)


def efl_mae(
  logits,
  labels,
  *,
  alpha: float = 0.01,
  beta: float = 5.0,
  m: float = 1e5,
  gamma: float = 0.1,
  min_prob: float = DEFAULT_MIN_PROB,
  detach_modulator: bool = True,
) -> jax.Array:
  """EFL+MAE = alpha (-sum_c y_c (1 - p^_c)^gamma log p^_c) + beta 2 sum_c y_c (1 - p_c), p^ = max(p~, min_prob)
  (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    alpha: weight of the epsilon-softmax focal loss, >= 0 (default 0.01, the original's CIFAR-10 symmetric).
    beta: weight of MAE, >= 0 (default 5).
    m: weight of the argmax's one-hot vector in the epsilon-softmax, >= 0 (default 1e5).
    gamma: focusing parameter, >= 0 (default 0.1, the original's EFLandMAE).
    min_prob: clamp of p~ in (0, 1) (default 1e-8).
    detach_modulator: stop the gradient of (1 - p^)^gamma, as the original (default True; False: the factor is
      differentiated too).

  Returns:
    [...] per-example loss, at most alpha (1 - min_prob)^gamma (-log min_prob) + 2 beta.
  """
  _check(alpha, beta, m, min_prob, gamma)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  log_eps_p = eps_softmax_log_probs(log_p, m, min_prob)
  modulator = loss_parts.focal_modulator(log_eps_p, loss_parts.hyper(gamma, log_p.dtype), detach=detach_modulator)
  efl = -jnp.sum(labels * modulator * log_eps_p, axis=-1)
  value = loss_parts.hyper(alpha, log_p.dtype) * efl + loss_parts.hyper(beta, log_p.dtype) * _mae(log_p, labels)
  return value.astype(out_dtype)
