"""A small convolutional network, fast on a laptop CPU, for 28x28 (MNIST) and 8x8 (digits) images."""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax.numpy as jnp

from noisy_jax.core import _checks
from noisy_jax.core import precision
from noisy_jax.models.batch_norm import make_batch_norm

HEADS = ("flatten", "avg")


def max_pool_2x2(x: jnp.ndarray) -> jnp.ndarray:
  """2x2 max-pool with stride 2 of [B, H, W, C] -> [B, H // 2, W // 2, C] (an odd last row/column is dropped).

  Same values as `nn.max_pool(x, (2, 2), strides=(2, 2))` (VALID padding), computed as the elementwise maximum of
  the four strided quarters, max(max(x[0::2, 0::2], x[0::2, 1::2]), max(x[1::2, 0::2], x[1::2, 1::2])). Its gradient
  goes to the window's maximum (a tie splits it in halves at each pairwise maximum). Not XLA's windowed max, whose
  gradient (select-and-scatter) is slow on CPU, and not a reshape to [..., 2, ..., 2, C] and a max over those axes:
  with LLVM's optimisation off (--xla_backend_optimization_level=0, which the test suite compiles with) XLA:CPU
  differentiated that form after a BatchNorm wrongly (NaN in forward mode; tests/test_compiler_options.py).
  """
  _, h, w, _ = x.shape
  x = x[:, : h // 2 * 2, : w // 2 * 2]
  top = jnp.maximum(x[:, 0::2, 0::2], x[:, 0::2, 1::2])
  bottom = jnp.maximum(x[:, 1::2, 0::2], x[:, 1::2, 1::2])
  return jnp.maximum(top, bottom)


class SmallCNN(nn.Module):
  """Stages of Conv3x3 -> BatchNorm -> ReLU with a 2x2 max-pool between stages, then a dense head.

  Input [B, H, W, C] images, output float32 logits [B, num_classes]. A pool is skipped when the feature map is
  already 2x2 or smaller, so the same widths run on 28x28 (maps 28 -> 14 -> 7) and 8x8 (8 -> 4 -> 2) inputs.
  Head: 'flatten' (default) flattens the last feature map; 'avg' takes its global average. Then an optional
  Dense(dense_size) + ReLU (0 = none) and Dense(num_classes).

  Convolutions are bias-free (BatchNorm follows) with He-normal init (variance 2 / fan_in, truncated normal);
  dense layers use Flax's default LeCun-normal init. Parameters are float32, `dtype` is the compute dtype.
  BatchNorm: momentum 0.9, epsilon 1e-5, batch statistics averaged over the `bn_axis_name` device axis when set.

  Defaults (12, 24, 48) / 'flatten' / 0 were chosen by measurement on clean mnist5k on a 2-core CPU (batch 128,
  jitted SGD momentum 0.9 step, 20 epochs): ~0.5 s per epoch of 3,600 images, 97.4-97.9% test accuracy over
  4 seeds. (16, 32, 64) reached the same accuracy at 1.5-2x the time, (8, 16, 32) ~0.5 points less at 0.7x;
  the 'avg' head lost 1-2 points; (32, 64, 128) took ~2.7 s per epoch.
  """

  num_classes: int
  widths: Sequence[int] = (12, 24, 48)
  dense_size: int = 0
  head: str = "flatten"
  bn_axis_name: str | None = None
  dtype: Any = jnp.float32
  batch_norm: str = "flax"  # or 'fused' (models.batch_norm): same numbers, hand-written backward

  @nn.compact
  def __call__(self, x, *, train: bool):
    wide = precision.at_least(self.dtype)  # parameters and logits: float32 (float64 for a float64 dtype)
    if x.ndim != 4:
      raise ValueError(
        f"SmallCNN needs images [B, H, W, C], got shape {x.shape}; feature vectors [B, D] need the 'mlp' model."
      )
    _checks.check_choice("head", self.head, HEADS)
    if not self.widths:
      raise ValueError(f"widths={self.widths!r} must name at least one stage.")
    x = x.astype(self.dtype)
    for stage, width in enumerate(self.widths):
      if stage and min(x.shape[1:3]) > 2:
        x = max_pool_2x2(x)
      x = nn.Conv(
        width,
        (3, 3),
        padding="SAME",
        use_bias=False,
        dtype=self.dtype,
        param_dtype=wide,
        kernel_init=nn.initializers.he_normal(),
      )(x)
      x = make_batch_norm(self.batch_norm, train=train, axis_name=self.bn_axis_name, dtype=self.dtype)(x)
      x = nn.relu(x)
    x = x.reshape((x.shape[0], -1)) if self.head == "flatten" else jnp.mean(x, axis=(1, 2))
    if self.dense_size:
      x = nn.relu(nn.Dense(self.dense_size, dtype=self.dtype, param_dtype=wide)(x))
    return nn.Dense(self.num_classes, dtype=self.dtype, param_dtype=wide)(x).astype(wide)
