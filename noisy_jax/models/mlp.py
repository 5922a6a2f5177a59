"""Multi-layer perceptron for small inputs (flattened images or feature vectors)."""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax.numpy as jnp


class MLP(nn.Module):
  """Flatten -> [Dense -> BatchNorm -> ReLU] x len(hidden_sizes) -> Dense(num_classes).

  Input [B, ...] (any trailing shape), output float32 logits [B, num_classes].
  BatchNorm statistics are averaged over `bn_axis_name` when training inside a device mapping.
  """
  num_classes: int
  hidden_sizes: Sequence[int] = (256, 256)
  use_batch_norm: bool = True
  dropout_rate: float = 0.0
  bn_axis_name: str | None = None
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, *, train: bool):
    x = x.reshape((x.shape[0], -1)).astype(self.dtype)
    for width in self.hidden_sizes:
      x = nn.Dense(width, use_bias=not self.use_batch_norm, dtype=self.dtype)(x)
      if self.use_batch_norm:
        x = nn.BatchNorm(use_running_average=not train, momentum=0.9, axis_name=self.bn_axis_name,
                         dtype=self.dtype)(x)
      x = nn.relu(x)
      if self.dropout_rate:
        x = nn.Dropout(self.dropout_rate, deterministic=not train)(x)
    return nn.Dense(self.num_classes, dtype=self.dtype)(x).astype(jnp.float32)
