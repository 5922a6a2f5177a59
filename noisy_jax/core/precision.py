"""The float dtype a run computes in: float32, or float64 when JAX's x64 mode is on.

  precision.float_dtype()          # float32; float64 under JAX_ENABLE_X64=1 (jax.config.update("jax_enable_x64", True))
  precision.widen(variables)       # a model's initial variables in that dtype (a no-op in float32 mode)
  precision.at_least(x.dtype)      # x's float dtype, but never narrower than float_dtype(): bfloat16 logits -> float32

Training normally runs in float32. With x64 enabled, everything a run computes follows JAX's own default float,
float64: the network's inputs and parameters (drawn by the float32 initialisers, then widened: the same random
numbers), its compute dtype and logits, the label table and every method's per-example state. Rounding differences
between CPUs (AVX-512 vs AVX2 kernels, another reduction order) are then ~1e-16 instead of ~1e-7, too small to move
a small-loss selection, a pruning threshold or a GMM split in a short run: that is what the golden values
(experiments/golden.py) are computed in. The mode is read when a run builds and traces its functions: switch it on
for the whole run (JAX_ENABLE_X64=1, or `with jax.enable_x64(True):` around `runs.run_single`), never half-way.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def x64_enabled() -> bool:
  """Whether JAX's x64 mode is on (jax_enable_x64)."""
  return bool(jax.config.read("jax_enable_x64"))


def float_dtype() -> jnp.dtype:
  """float64 when x64 is enabled, else float32: the dtype of a run's inputs, parameters, logits and tables."""
  return jnp.dtype(jnp.float64) if x64_enabled() else jnp.dtype(jnp.float32)


def at_least(dtype) -> jnp.dtype:
  """The float dtype at least as wide as both `dtype` and `float_dtype()` (integers and bool give float_dtype())."""
  if not jnp.issubdtype(dtype, jnp.floating):
    return float_dtype()
  return jnp.promote_types(dtype, float_dtype())


def widen(tree):
  """`tree` with its floating leaves cast to `float_dtype()` when x64 is enabled; `tree` itself otherwise."""
  if not x64_enabled():
    return tree
  dtype = float_dtype()
  return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)
