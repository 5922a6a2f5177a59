"""A small convolutional network for 28x28 (MNIST) and 8x8 (digits) grey images."""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax.numpy as jnp


def max_pool_2x2(x):
  b, h, w, c = x.shape
  x = x[:, : h // 2 * 2, : w // 2 * 2]
  return jnp.max(x.reshape(b, h // 2, 2, w // 2, 2, c), axis=(2, 4))


class SmallCNN(nn.Module):
  """[Conv3x3 -> BatchNorm -> ReLU] stages, 2x2 max-pool between them -> global average pool -> Dense.

  Input [B, H, W, C] (flat [B, D] inputs are not images: use the MLP), output float32 logits [B, num_classes].
  Pooling is skipped once the feature map is 2x2 or smaller, so 8x8 inputs work with the same widths.
  Convolutions are bias-free (BatchNorm follows) and He-normal initialised.
  """
  num_classes: int
  widths: Sequence[int] = (32, 64, 128)
  dense_size: int = 0
  head: str = "avg"
  bn_axis_name: str | None = None
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, *, train: bool):
    if x.ndim != 4:
      raise ValueError(f"SmallCNN needs images [B, H, W, C], got shape {x.shape}; use the 'mlp' model.")
    x = x.astype(self.dtype)
    for i, width in enumerate(self.widths):
      if i and min(x.shape[1:3]) > 2:
        x = max_pool_2x2(x)
      x = nn.Conv(width, (3, 3), padding="SAME", use_bias=False, dtype=self.dtype,
                  kernel_init=nn.initializers.he_normal())(x)
      x = nn.BatchNorm(use_running_average=not train, momentum=0.9, axis_name=self.bn_axis_name,
                       dtype=self.dtype)(x)
      x = nn.relu(x)
    x = jnp.mean(x, axis=(1, 2)) if self.head == "avg" else x.reshape((x.shape[0], -1))
    if self.dense_size:
      x = nn.relu(nn.Dense(self.dense_size, dtype=self.dtype)(x))
    return nn.Dense(self.num_classes, dtype=self.dtype)(x).astype(jnp.float32)
