"""Asymmetric mean squared error and the Joint Asymmetric Losses JAL-CE and JAL-FL (Wang et al., "Joint Asymmetric
Loss for Learning with Noisy Labels", ICCV 2025, arXiv 2507.17692; original code: cswjl/joint-asymmetric-loss,
losses.py, where JAL-CE is NCEandAMSE and JAL-FL is NFLandAMSE, README.md).

With p = softmax(z) and soft labels y (one-hot in the paper and the code):

  AMSE   = (1 / C) sum_c (p_c - a y_c)^2                      (AMSELoss, losses.py:8-18)
  JAL-CE = alpha NCE + beta AMSE,  NCE = CE(y) / sum_k (-log p_k)             (NCEandAMSE, losses.py:115-123)
  JAL-FL = alpha NFL + beta AMSE,  NFL = sum_c y_c FL_c / sum_k FL_k,
           FL_k = -(1 - p_k)^gamma log p_k                                    (NFLandAMSE, losses.py:125-133)

The 1 / C is the code's: AMSELoss takes `.mean()` over the [B, C] array of squared differences, i.e. the mean over
the classes and then over the batch. For one-hot y, AMSE = (||p||^2 - 2 a p_y + a^2) / C, in
[(a - 1)^2 / C, (a^2 + 1) / C]. Soft labels enter the same formula (the code's, applied to y), which is linear in y
only up to the label-only constant a^2 ||y||^2 / C.

Asymmetry (our derivation, not checked against the paper, whose text was not available here; its abstract states a
necessary and sufficient condition on a): the weighted risk sum_k w_k AMSE(u, e_k) = (W ||u||^2 - 2 a <w, u> +
a^2 W) / C (W = sum_k w_k) is convex in u, so the vertex e_t (t the class of the largest weight) is its minimum over
the simplex iff no edge out of e_t descends: a (w_t - w_k) >= W for every k != t, i.e.
a >= W / (w_t - max_{k != t} w_k) (`amse_asymmetry_threshold`). With symmetric noise of rate eta over C classes
(w_t = 1 - eta, w_k = eta / (C - 1)) that is a >= (C - 1) / (C - 1 - C eta): 9 for CIFAR-10 at 80% noise, 5.2 for
CIFAR-100 at 80%, below the configured 30 and 20. `tests/test_joint_asymmetric_losses.py` checks the condition by
minimising the weighted risk.

Hyper-parameters of the original (config.py:5-87): CIFAR-10 JAL-CE and JAL-FL alpha 1, beta 1, a 30; CIFAR-100
alpha 5, beta 1, a 20; WebVision 50, 1, 30; Clothing1M 5, 0.1, 5. NFL's gamma is never set there: NFLandAMSE's
default 0.5. The regulariser (config.py:133-153): for the AMSE losses no weight decay but an L1 term on the
parameters in the batch loss, 5e-5 on CIFAR-10 and 5e-6 on CIFAR-100 (the optimizer's `l1` here, as for ANL).
The keyword defaults here are CIFAR-10's (AMSELoss's own default a = 0 makes AMSE = ||p||^2 / C, a label-free term,
and is not accepted: a > 0).

Differences from the original code, each checked against a float64 transcription of it in
tests/test_joint_asymmetric_losses.py:
- NFL's focal factors: the code (as APL's and ANL's) computes (1 - p)^gamma from detached probabilities
  (`logpt.data.exp()`, losses.py:356 and 359), so the gradient flows only through log p. The NFL paper's formula
  (Ma et al., ICML 2020; `negative_losses.normalized_focal_loss`) differentiates them, and is the default here;
  `detach_modulator=True` is the code's.
- AMSE_with_q (losses.py:20-30, |p - a y|^q averaged; not used by the code's configs) is not offered: for a
  non-integer q its torch.abs((p - a y)**q) is NaN wherever p_c < a y_c, that is at the labelled class for a >= 1.
- The code averages over the batch; these are per-example losses (the trainer takes the mean).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts
from noisy_jax.core import negative_losses


def _check(alpha=None, beta=None, a=None, gamma=None) -> None:
  for name, value in (("alpha", alpha), ("beta", beta), ("gamma", gamma)):
    if value is not None:
      _checks.check_range(name, value, 0.0, np.inf)
  if a is not None:
    _checks.check_range("a", a, 0.0, np.inf, low_open=True)


def _amse(log_p: jax.Array, labels: jax.Array, a) -> jax.Array:
  """(1 / C) sum_c (p_c - a y_c)^2 [...] from log p and labels [..., C]."""
  difference = jnp.exp(log_p) - loss_parts.hyper(a, log_p.dtype) * labels
  return jnp.mean(jnp.square(difference), axis=-1)


def asymmetric_mean_squared_error(logits, labels, *, a: float = 30.0) -> jax.Array:
  """AMSE = (1 / C) sum_c (p_c - a y_c)^2 (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    a: scale of the label vector, > 0 (default 30, the original's CIFAR-10 value).

  Returns:
    [...] per-example loss, in [(a - 1)^2 / C, (a^2 + 1) / C] for one-hot labels.
  """
  _check(a=a)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  return _amse(jax.nn.log_softmax(logits, axis=-1), labels, a).astype(out_dtype)


def jal_ce(logits, labels, *, alpha: float = 1.0, beta: float = 1.0, a: float = 30.0) -> jax.Array:
  """JAL-CE = alpha NCE + beta AMSE (module docstring; the original's NCEandAMSE).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    alpha: weight of NCE, >= 0 (default 1, the original's CIFAR-10 value; CIFAR-100 5).
    beta: weight of AMSE, >= 0 (default 1; CIFAR-100 1).
    a: AMSE's a > 0 (default 30; CIFAR-100 20).

  Returns:
    [...] per-example loss.
  """
  _check(alpha=alpha, beta=beta, a=a)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  nce = loss_parts.normalized_cross_entropy(log_p, labels)
  value = loss_parts.hyper(alpha, log_p.dtype) * nce + loss_parts.hyper(beta, log_p.dtype) * _amse(log_p, labels, a)
  return value.astype(out_dtype)


def jal_fl(
  logits,
  labels,
  *,
  alpha: float = 1.0,
  beta: float = 1.0,
  a: float = 30.0,
  gamma: float = 0.5,
  detach_modulator: bool = False,
) -> jax.Array:
  """JAL-FL = alpha NFL + beta AMSE (module docstring; the original's NFLandAMSE).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    alpha: weight of NFL, >= 0 (default 1, the original's CIFAR-10 value; CIFAR-100 5).
    beta: weight of AMSE, >= 0 (default 1; CIFAR-100 1).
    a: AMSE's a > 0 (default 30; CIFAR-100 20).
    gamma: NFL's focusing parameter, >= 0 (default 0.5, NFLandAMSE's).
    detach_modulator: stop the gradient of NFL's (1 - p)^gamma factors, as the original (default False: the NFL
      paper's formula).

  Returns:
    [...] per-example loss.
  """
  _check(alpha=alpha, beta=beta, a=a, gamma=gamma)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  nfl = negative_losses.normalized_focal_loss(logits, labels, gamma=gamma, detach_modulator=detach_modulator)
  value = loss_parts.hyper(alpha, log_p.dtype) * nfl + loss_parts.hyper(beta, log_p.dtype) * _amse(log_p, labels, a)
  return value.astype(out_dtype)


def amse_asymmetry_threshold(weights) -> float:
  """The smallest a for which AMSE is asymmetric on `weights` [C] (nonnegative, a unique largest w_t):
  W / (w_t - max_{k != t} w_k), W = sum_k w_k (module docstring). e_t minimises sum_k w_k AMSE(u, e_k) over the
  simplex iff a >= this value."""
  w = np.asarray(weights, np.float64)
  if w.ndim != 1 or w.size < 2 or np.any(w < 0) or np.any(np.isnan(w)):
    raise ValueError(f"weights={w.tolist()!r} must be a vector of at least 2 nonnegative numbers.")
  top_two = np.sort(w)[-2:]
  if top_two[1] <= top_two[0]:
    raise ValueError(f"weights={w.tolist()!r} must have a unique largest entry.")
  return float(w.sum() / (top_two[1] - top_two[0]))
