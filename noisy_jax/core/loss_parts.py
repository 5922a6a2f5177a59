"""The shared pieces of the per-example losses (noisy_jax.core.losses and the loss families beside it).

Dtype handling (compute in at least float32, return in the logits' dtype), the shape check, torch.clamp's gradient
for the ports of PyTorch code, and the terms that more than one loss family uses: 1 - p from log p, NCE and the
focal loss's terms.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from noisy_jax.core import _checks


def compute_dtype(dtype) -> jnp.dtype:
  """At least float32: bfloat16/float16/integers -> float32, float64 stays float64."""
  return jnp.promote_types(dtype, jnp.float32)


def output_dtype(dtype) -> jnp.dtype:
  """The dtype a loss returns for inputs of `dtype`: the same when floating, float32 otherwise."""
  return dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.dtype(jnp.float32)


def torch_clamp(x: jax.Array, lo=None, hi=None) -> jax.Array:
  """torch.clamp's value and gradient: clips to [lo, hi]; the gradient is 1 where lo <= x <= hi (ends included) and
  0 outside (jnp.clip passes half of it at the ends). For the ports of PyTorch code (methods.elr, methods.sop)."""
  if lo is not None:
    x = jnp.where(x < lo, jnp.asarray(lo, x.dtype), x)
  if hi is not None:
    x = jnp.where(x > hi, jnp.asarray(hi, x.dtype), x)
  return x


def prepare(logits, labels) -> tuple[jax.Array, jax.Array, jnp.dtype]:
  """Checks that logits and labels [..., C] have one shape; returns both in the compute dtype, and the output
  dtype."""
  logits = jnp.asarray(logits)
  labels = jnp.asarray(labels)
  _checks.check_same_shape("logits", logits, "labels", labels)
  if logits.ndim < 1:
    raise ValueError(f"logits must have a trailing class axis [..., C], got shape {logits.shape}.")
  compute = compute_dtype(logits.dtype)
  return logits.astype(compute), labels.astype(compute), output_dtype(logits.dtype)


def hyper(value, dtype) -> jax.Array:
  """A hyper-parameter (number or traced value) as an array of `dtype`."""
  return jnp.asarray(value, dtype)


def one_minus_exp(log_p: jax.Array) -> jax.Array:
  """1 - p computed accurately from log p (no cancellation as p -> 1)."""
  return -jnp.expm1(log_p)


def normalized_cross_entropy(log_p: jax.Array, labels: jax.Array) -> jax.Array:
  """NCE = -sum_c y_c log p_c / sum_k (-log p_k) [...] from log-probabilities and labels [..., C]."""
  # -sum_k log p_k >= C log C > 0 for C >= 2; the floor only guards C = 1.
  denominator = jnp.maximum(-jnp.sum(log_p, axis=-1), jnp.finfo(log_p.dtype).tiny)
  return -jnp.sum(labels * log_p, axis=-1) / denominator


def focal_modulator(log_p: jax.Array, gamma, *, detach: bool = False) -> jax.Array:
  """(1 - p)^gamma [..., C] from log p, as exp(gamma log max(1 - p, tiny)): finite with a finite gradient as
  p -> 1 for every gamma >= 0. `detach` stops its gradient (the focal-loss code of APL and ANL)."""
  tiny = jnp.finfo(log_p.dtype).tiny
  modulator = jnp.exp(gamma * jnp.log(jnp.maximum(one_minus_exp(log_p), tiny)))
  return jax.lax.stop_gradient(modulator) if detach else modulator
