"""Losses built from the polynomial expansion of cross entropy in 1 - p_y: -log p = sum_{k >= 1} (1 - p)^k / k.

- Poly-1 (Leng et al., "PolyLoss: A Polynomial Expansion Perspective of Classification Loss Functions", ICLR 2022,
  arXiv 2204.12511): CE + epsilon (1 - p_y), the first coefficient raised by epsilon. Equal to
  `optax.losses.poly_loss_cross_entropy` (soft labels: -sum_c y_c log p_c + epsilon sum_c y_c (1 - p_c)).
- Taylor cross entropy (Feng et al., "Can Cross Entropy Loss Be Robust to Label Noise?", IJCAI 2020): the series
  cut after `order` terms, sum_{k=1..t} (1 - p_y)^k / k (soft labels: sum_c y_c of it at p_c). t = 1 is MAE / 2;
  every finite t is bounded (by H_t = sum_{k<=t} 1/k), and t -> inf is CE. The paper publishes no code; the formula
  is its equation for the t-order Taylor series.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts


def poly1_cross_entropy(logits, labels, *, epsilon: float = 2.0) -> jax.Array:
  """Poly-1: -sum_c y_c log p_c + epsilon sum_c y_c (1 - p_c) (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    epsilon: the first polynomial coefficient's shift, >= -1 (>= -1 keeps the loss >= 0; default 2, optax's and the
      paper's ImageNet value).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("epsilon", epsilon, -1.0, np.inf)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  value = -jnp.sum(labels * log_p, axis=-1) + epsilon * jnp.sum(labels * loss_parts.one_minus_exp(log_p), axis=-1)
  return value.astype(out_dtype)


def taylor_cross_entropy(logits, labels, *, order: int = 2) -> jax.Array:
  """Taylor CE: sum_c y_c sum_{k=1..order} (1 - p_c)^k / k (module docstring).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors.
    order: t, a positive int (default 2).

  Returns:
    [...] per-example loss in [0, sum_{k<=order} 1/k].
  """
  if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 1:
    raise ValueError(f"order must be a positive int (the number of Taylor terms), got {order!r}.")
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  one_minus_p = loss_parts.one_minus_exp(jax.nn.log_softmax(logits, axis=-1))
  series = sum(one_minus_p**k / k for k in range(1, int(order) + 1))
  return jnp.sum(labels * series, axis=-1).astype(out_dtype)
