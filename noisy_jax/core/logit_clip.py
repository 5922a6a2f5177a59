"""LogitClip: any loss evaluated on logits whose norm is clipped (Wei et al., "Mitigating Memorization of Noisy Labels
by Clipping the Model Prediction", ICML 2023, arXiv 2212.04055; original code: hongxin001/LogitClip,
algorithms/clip.py).

With temperature tau and delta = 1 / tau, the clipped logits are

  clip(z) = delta z / (||z||_p + 1e-7)   if ||z||_p + 1e-7 > delta,   z otherwise

so ||clip(z)||_p <= delta and CE on clip(z) is bounded (by log(1 + (C - 1) e^(2 delta)) for p = 2). The 1e-7 is the
original's guard. The gradient flows through the norm, as the original's torch.where does.

Where the original differs from the paper, the paper is the default: the original's train_batch compares the norm
with tau instead of delta (equal only at tau = 1): with its README's tau = 1.5, logit vectors of norm up to 1.5 pass
unclipped and longer ones drop to norm 2/3, a jump at the threshold. `original_threshold=True` reproduces that.

`noisy_jax.core.losses.logit_clip` is any loss of the catalogue on clip(z), by name.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts

NORM_GUARD = 1e-7  # added to the norm, as the original


def clip_logits(logits, *, temperature: float = 1.0, norm_order: float = 2.0, original_threshold: bool = False):
  """clip(z) [..., C] of the module docstring, in the logits' dtype (computed in at least float32).

  Args:
    logits: [..., C].
    temperature: tau > 0; the norm bound is delta = 1 / tau (default 1, the original's `--temp`).
    norm_order: p >= 1 of the norm (default 2, the original's `--lp`).
    original_threshold: clip where ||z|| > tau instead of > delta, as the original's code (default False).
  """
  _checks.check_range("temperature", temperature, 0.0, np.inf, low_open=True)
  _checks.check_range("norm_order", norm_order, 1.0, np.inf)
  logits = jnp.asarray(logits)
  z = logits.astype(loss_parts.compute_dtype(logits.dtype))
  p = loss_parts.hyper(norm_order, z.dtype)
  tiny = jnp.finfo(z.dtype).tiny  # keeps the norm's gradient finite at z = 0 (a value change below float's reach)
  norm = (jnp.sum(jnp.abs(z) ** p, axis=-1, keepdims=True) + tiny) ** (1.0 / p) + NORM_GUARD
  bound = 1.0 / loss_parts.hyper(temperature, z.dtype)
  threshold = loss_parts.hyper(temperature, z.dtype) if original_threshold else bound
  clipped = jnp.where(norm > threshold, bound * z / norm, z)
  return clipped.astype(loss_parts.output_dtype(logits.dtype))
