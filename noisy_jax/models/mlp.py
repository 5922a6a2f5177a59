"""Multi-layer perceptron for small inputs (flattened images or feature vectors)."""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax.numpy as jnp

from noisy_jax.core import precision
from noisy_jax.models.batch_norm import make_batch_norm


class MLP(nn.Module):
  """Flatten -> [Dense -> BatchNorm -> ReLU (-> Dropout)] per hidden size -> Dense(num_classes).

  Input [B, ...] (images [B, H, W, C] or vectors [B, D]; everything after the batch axis is flattened), output
  float32 logits [B, num_classes]. With BatchNorm the hidden Dense layers have no bias (BN's shift replaces it);
  without it they do. BatchNorm: momentum 0.9, epsilon 1e-5, statistics averaged over the `bn_axis_name` device
  axis when set. Dropout (rate > 0) needs a 'dropout' RNG in train mode. Dense init: Flax's default
  (LeCun normal). Parameters are float32, `dtype` is the compute dtype.
  On mnist5k (2-core CPU, batch 128, 20 epochs of SGD momentum 0.9): ~0.04 s per epoch, ~94% test accuracy.
  """

  num_classes: int
  hidden_sizes: Sequence[int] = (256, 256)
  use_batch_norm: bool = True
  dropout_rate: float = 0.0
  bn_axis_name: str | None = None
  dtype: Any = jnp.float32
  batch_norm: str = "flax"  # or 'fused' (models.batch_norm): same numbers, hand-written backward

  @nn.compact
  def __call__(self, x, *, train: bool):
    wide = precision.at_least(self.dtype)  # parameters and logits: float32 (float64 for a float64 dtype)
    x = x.reshape((x.shape[0], -1)).astype(self.dtype)
    for width in self.hidden_sizes:
      x = nn.Dense(width, use_bias=not self.use_batch_norm, dtype=self.dtype, param_dtype=wide)(x)
      if self.use_batch_norm:
        x = make_batch_norm(self.batch_norm, train=train, axis_name=self.bn_axis_name, dtype=self.dtype)(x)
      x = nn.relu(x)
      if self.dropout_rate:
        x = nn.Dropout(self.dropout_rate, deterministic=not train)(x)
    return nn.Dense(self.num_classes, dtype=self.dtype, param_dtype=wide)(x).astype(wide)
