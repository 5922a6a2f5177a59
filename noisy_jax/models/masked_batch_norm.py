"""BatchNorm statistics over some rows of a batch, in any model of noisy_jax.models (`statistics_over`).

Some methods forward a subset of each batch whose size varies from batch to batch: DISC's mixup of the batch's
purified rows (Li et al., CVPR 2023). The original indexes the subset out (`x[flags]`) and forwards it alone, so
every BatchNorm layer normalises with the subset's statistics and moves its running averages towards them. Arrays
here keep their shapes, so the subset is a mask over the batch's rows instead:

  with masked_batch_norm.statistics_over(mask):                      # mask: bool [B]
    logits, updates = model.apply(variables, x, train=True, mutable=["batch_stats"])

Inside the block every train-mode BatchNorm (this package's fused one and flax's) computes, per channel c, over the
masked rows r and every position p of their feature maps (m = sum_r mask_r * positions, psum-ed over the layer's
`axis_name` when set, as the unmasked layer averages its statistics over the devices):

  mean = sum_{r, p} mask_r x[r, p, c] / m,  var = max(sum_{r, p} mask_r x[r, p, c]^2 / m - mean^2, 0)
  y = (x - mean) / sqrt(var + epsilon) * scale + bias         (every row, masked or not)
  running = momentum * running + (1 - momentum) * statistic   (only when m > 0)

so the masked rows' outputs, the updated running averages and the gradient of any loss of the masked rows equal
those of the subset forwarded alone, the original's. Rows outside the mask get finite outputs normalised with the
subset's statistics; their loss must be masked out by the caller. An empty mask leaves the running averages as they
were (the original skips the forward). Evaluation-mode layers and initialisation are left as they are. The
gradient is autodiff's of the formula above (not the fused layer's hand-written backward).
"""

from __future__ import annotations

import contextlib

import flax.linen as nn
import jax
from jax import lax
import jax.numpy as jnp

from noisy_jax.core import precision
from noisy_jax.models import batch_norm as batch_norm_lib


def _masked_normalize(module, x, mask):
  """The train-mode BatchNorm `module` (this package's or flax's) on x [B, ..., C] with statistics over `mask`."""
  wide = precision.at_least(x.dtype)
  x32 = x.astype(wide)
  weight = mask.astype(wide).reshape((-1,) + (1,) * (x.ndim - 1))
  axes = tuple(range(x.ndim - 1))
  sums = jnp.stack([jnp.sum(x32 * weight, axes), jnp.sum(jnp.square(x32) * weight, axes)])
  count = jnp.sum(mask.astype(wide)) * (x.size // (x.shape[0] * x.shape[-1]))
  if module.axis_name is not None:
    sums, count = lax.psum((sums, count), module.axis_name)
  mean = sums[0] / jnp.maximum(count, 1.0)
  var = jnp.maximum(sums[1] / jnp.maximum(count, 1.0) - jnp.square(mean), 0.0)
  scale = module.get_variable("params", "scale")
  bias = module.get_variable("params", "bias")
  y = (x32 - mean) * (lax.rsqrt(var + module.epsilon) * scale.astype(wide)) + bias.astype(wide)
  for name, statistic in (("mean", mean), ("var", var)):
    old = module.get_variable("batch_stats", name)
    new = module.momentum * old + (1.0 - module.momentum) * statistic.astype(old.dtype)
    module.put_variable("batch_stats", name, jnp.where(count > 0, new, old))
  return y.astype(module.dtype or x.dtype)


@contextlib.contextmanager
def statistics_over(mask: jax.Array):
  """Within the block, train-mode BatchNorm layers take their statistics over the rows where `mask` (bool [B], the
  batch's leading axis) is true (module docstring)."""

  def interceptor(next_fun, args, kwargs, context):
    module = context.module
    if (
      context.method_name != "__call__"
      or not isinstance(module, (batch_norm_lib.BatchNorm, nn.BatchNorm))
      or module.is_initializing()
    ):
      return next_fun(*args, **kwargs)
    use_running_average = nn.merge_param(
      "use_running_average", module.use_running_average, kwargs.get("use_running_average")
    )
    if use_running_average:
      return next_fun(*args, **kwargs)
    x = args[0]
    if x.shape[0] != mask.shape[0]:
      raise ValueError(f"statistics_over: the mask has {mask.shape[0]} rows, the batch {x.shape[0]} (shape {x.shape}).")
    return _masked_normalize(module, x, mask)

  with nn.intercept_methods(interceptor):
    yield
