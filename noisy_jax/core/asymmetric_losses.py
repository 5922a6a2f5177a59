"""Asymmetric losses AGCE, AUL, AEL and their active-passive pairs with NCE (Zhou et al., "Asymmetric Loss Functions
for Learning with Noisy Labels", ICML 2021, arXiv 2106.03110; original code: hitcszx/ALFs, lnl/losses.py).

Each is a function l(p_y) of the target-class probability p = softmax(z) (soft labels: sum_c y_c l(p_c), the
catalogue's convention):

  AGCE  l(p) = ((a + 1)^q - (a + p)^q) / q       a > 0, q > 0
  AUL   l(p) = ((a - p)^q - (a - 1)^q) / q       a > 1, q > 0
  AEL   l(p) = exp(-p / a)                       a > 0

and NCE+AGCE, NCE+AUL, NCE+AEL are alpha NCE + beta l (NCE = CE(y) / sum_k (-log p_k), Ma et al. 2020).

The paper's property. A loss L(u, k) over the simplex is *asymmetric* on weights w_1..w_C with a unique largest w_t
when argmin_u sum_k w_k L(u, k) is argmin_u L(u, t) = e_t; *completely asymmetric* when that holds for every such w.
An asymmetric loss is noise-tolerant when the clean label dominates: w_k = P(noisy label k | x) with the largest
at the true class. For L(u, k) = l(u_k) with l decreasing:
- l concave (AGCE with q >= 1, AUL with q <= 1): the weighted risk is concave, its minimum is at a vertex, and the
  vertex e_t is the best one: completely asymmetric.
- l convex (AGCE with q < 1, AUL with q > 1, AEL always): the weighted risk is convex, so e_t is its minimum iff
  moving mass from t to any k does not help: max_{k != t} w_k / w_t <= r = l'(1) / l'(0), the asymmetry ratio:
  AGCE (a / (a + 1))^(1 - q), AUL ((a - 1) / a)^(q - 1), AEL exp(-1 / a). `asymmetry_ratio` returns r (1 for the
  concave cases). `tests/test_asymmetric_losses.py` checks the condition by minimising the weighted risk.

The original's class defaults are the keyword defaults here (AGCELoss a=1, q=2; AUELoss a=1.5, q=0.9; AExpLoss a=3;
NCEandAGCE alpha=1, beta=1, a=3, q=1.5; NCEandAUE a=6, q=1.5; NCEandAEL alpha=1, beta=4, a=2.5); its per-dataset
values are in lnl/config.py (CIFAR-10: AGCE a=0.6, q=0.6; AUL a=5.5, q=3; AEL a=2.5; NCE+AGCE 1, 4, a=6, q=1.5;
NCE+AUL 1, 4, a=6.3, q=1.5; NCE+AEL 1, 4, a=5). The code computes the formulas above on p = softmax(z) without a
clamp; the same here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts


def _per_class(logits, labels, per_probability) -> tuple[jax.Array, jax.Array, jax.Array, jnp.dtype]:
  """(sum_c y_c l(p_c), log p, labels, output dtype) for l = `per_probability`."""
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  return jnp.sum(labels * per_probability(jnp.exp(log_p)), axis=-1), log_p, labels, out_dtype


def _agce(a, q):
  return lambda p: ((a + 1.0) ** q - (a + p) ** q) / q


def _aul(a, q):
  return lambda p: ((a - p) ** q - (a - 1.0) ** q) / q


def _ael(a):
  return lambda p: jnp.exp(-p / a)


def _check_agce(a, q) -> None:
  _checks.check_range("a", a, 0.0, np.inf, low_open=True)
  _checks.check_range("q", q, 0.0, np.inf, low_open=True)


def _check_aul(a, q) -> None:
  _checks.check_range("a", a, 1.0, np.inf, low_open=True)
  _checks.check_range("q", q, 0.0, np.inf, low_open=True)


def _check_pair(alpha, beta) -> None:
  _checks.check_range("alpha", alpha, 0.0, np.inf)
  _checks.check_range("beta", beta, 0.0, np.inf)


def asymmetric_generalized_cross_entropy(logits, labels, *, a: float = 1.0, q: float = 2.0) -> jax.Array:
  """AGCE: sum_c y_c ((a + 1)^q - (a + p_c)^q) / q (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    a: > 0 (default 1, the original's AGCELoss).
    q: > 0 (default 2); completely asymmetric for q >= 1.

  Returns:
    [...] per-example loss, in [0, ((a + 1)^q - a^q) / q].
  """
  _check_agce(a, q)
  value, *_, out_dtype = _per_class(logits, labels, _agce(a, q))
  return value.astype(out_dtype)


def asymmetric_unhinged_loss(logits, labels, *, a: float = 1.5, q: float = 0.9) -> jax.Array:
  """AUL: sum_c y_c ((a - p_c)^q - (a - 1)^q) / q (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    a: > 1 (default 1.5, the original's AUELoss).
    q: > 0 (default 0.9); completely asymmetric for q <= 1.

  Returns:
    [...] per-example loss, in [0, (a^q - (a - 1)^q) / q].
  """
  _check_aul(a, q)
  value, *_, out_dtype = _per_class(logits, labels, _aul(a, q))
  return value.astype(out_dtype)


def asymmetric_exponential_loss(logits, labels, *, a: float = 3.0) -> jax.Array:
  """AEL: sum_c y_c exp(-p_c / a) (module docstring); asymmetric on weights with max_k w_k / w_t <= exp(-1 / a).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    a: > 0 (default 3, the original's AExpLoss).

  Returns:
    [...] per-example loss, in [exp(-1 / a), 1].
  """
  _checks.check_range("a", a, 0.0, np.inf, low_open=True)
  value, *_, out_dtype = _per_class(logits, labels, _ael(a))
  return value.astype(out_dtype)


def _pair(logits, labels, alpha, beta, per_probability) -> jax.Array:
  value, log_p, labels, out_dtype = _per_class(logits, labels, per_probability)
  nce = loss_parts.normalized_cross_entropy(log_p, labels)
  return (alpha * nce + beta * value).astype(out_dtype)


def nce_agce(logits, labels, *, alpha: float = 1.0, beta: float = 1.0, a: float = 3.0, q: float = 1.5) -> jax.Array:
  """NCE+AGCE: alpha NCE + beta AGCE (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    alpha: weight of NCE, >= 0 (default 1, the original's NCEandAGCE).
    beta: weight of AGCE, >= 0 (default 1).
    a: AGCE's a > 0 (default 3).
    q: AGCE's q > 0 (default 1.5).

  Returns:
    [...] per-example loss.
  """
  _check_pair(alpha, beta)
  _check_agce(a, q)
  return _pair(logits, labels, alpha, beta, _agce(a, q))


def nce_aul(logits, labels, *, alpha: float = 1.0, beta: float = 1.0, a: float = 6.0, q: float = 1.5) -> jax.Array:
  """NCE+AUL: alpha NCE + beta AUL (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    alpha: weight of NCE, >= 0 (default 1, the original's NCEandAUE).
    beta: weight of AUL, >= 0 (default 1).
    a: AUL's a > 1 (default 6).
    q: AUL's q > 0 (default 1.5).

  Returns:
    [...] per-example loss.
  """
  _check_pair(alpha, beta)
  _check_aul(a, q)
  return _pair(logits, labels, alpha, beta, _aul(a, q))


def nce_ael(logits, labels, *, alpha: float = 1.0, beta: float = 4.0, a: float = 2.5) -> jax.Array:
  """NCE+AEL: alpha NCE + beta AEL (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    alpha: weight of NCE, >= 0 (default 1, the original's NCEandAEL).
    beta: weight of AEL, >= 0 (default 4).
    a: AEL's a > 0 (default 2.5).

  Returns:
    [...] per-example loss.
  """
  _check_pair(alpha, beta)
  _checks.check_range("a", a, 0.0, np.inf, low_open=True)
  return _pair(logits, labels, alpha, beta, _ael(a))


def asymmetry_ratio(name: str, **hyper: float) -> float:
  """The asymmetry ratio r of the loss `name` ('agce', 'aul' or 'ael') with hyper-parameters a (and q): 1 where l is
  concave (completely asymmetric), l'(1) / l'(0) < 1 where it is convex (module docstring). The loss is asymmetric
  on weights w with largest w_t iff max_{k != t} w_k / w_t <= r."""
  _checks.check_choice("asymmetric loss", name, ("agce", "aul", "ael"))
  a = float(hyper["a"])
  if name == "ael":
    return float(np.exp(-1.0 / a))
  q = float(hyper["q"])
  if name == "agce":
    return float((a / (a + 1.0)) ** (1.0 - q)) if q < 1.0 else 1.0
  return float(((a - 1.0) / a) ** (q - 1.0)) if q > 1.0 else 1.0
