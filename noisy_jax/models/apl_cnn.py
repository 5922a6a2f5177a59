"""The 8-layer CNN of Active-Passive Losses (Ma et al., ICML 2020, arXiv 2006.13554), with PyTorch's initialisation.

APL's code (github.com/HanxunH/Active-Passive-Losses@2d18de6, models.py, class `ToyModel`) trains this network for
its CIFAR-10 results (type 'CIFAR10') and a smaller one for MNIST (type 'MNIST'). Layout, input [B, H, W, C]:

  stage s = 1..S:  convs_per_stage x [Conv3x3(widths[s], padding 1, with bias) -> BatchNorm -> ReLU], MaxPool 2x2 s2
  head:            flatten -> Dense(dense_size, with bias) -> BatchNorm -> ReLU -> Dense(num_classes)

  apl_cnn        (CIFAR10)  widths 64/128/196, 2 convs per stage, dense 256: 32x32 -> 16 -> 8 -> 4, fc1 in 4*4*196
  apl_cnn_mnist  (MNIST)    widths 32/64, 1 conv per stage, dense 128:         28x28 -> 14 -> 7,      fc1 in 7*7*64

Initialisation, as `ToyModel._reset_prams` after PyTorch's layer defaults:
  conv kernels   kaiming_uniform_(mode='fan_in', nonlinearity='relu'): U(-b, b), b = sqrt(2) sqrt(3 / fan_in)
                 = sqrt(6 / fan_in), fan_in = 9 C_in; here variance_scaling(2.0, 'fan_in', 'uniform')
  dense kernels  xavier_uniform_: U(-b, b), b = sqrt(6 / (fan_in + fan_out)); here glorot_uniform
  biases         PyTorch's Conv2d / Linear default, untouched by `_reset_prams`: U(-1 / sqrt(fan_in), 1 / sqrt(fan_in))
  BatchNorm      scale 1, bias 0; momentum 0.9 here = PyTorch's 0.1, epsilon 1e-5. The running variance is updated
                 with the biased batch variance (flax), PyTorch uses the unbiased one (eval-time only, factor
                 m / (m - 1) on the update).

Flatten order: PyTorch flattens NCHW feature maps (index c H W + h W + w), this NHWC module flattens (h W C + w C +
c). The two networks are the same function up to a fixed permutation of fc1's input rows, which does not matter
when training from scratch (the init is i.i.d. over rows); to load PyTorch weights, permute fc1's rows (the tests do).

The PyTorch module hard-codes fc1's input size (32x32 or 28x28 inputs only); here Dense infers it from the shape.
A 2x2 max-pool drops an odd last row / column, as PyTorch's MaxPool2d(2, 2).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from noisy_jax.core import precision
from noisy_jax.models.batch_norm import make_batch_norm
from noisy_jax.models.small_cnn import max_pool_2x2

# PyTorch kaiming_uniform_(mode='fan_in', nonlinearity='relu'): gain sqrt(2), bound sqrt(6 / fan_in).
KAIMING_UNIFORM_RELU = nn.initializers.variance_scaling(2.0, "fan_in", "uniform")
# PyTorch xavier_uniform_ (gain 1): bound sqrt(6 / (fan_in + fan_out)).
XAVIER_UNIFORM = nn.initializers.glorot_uniform()


def torch_default_bias_init(fan_in: int):
  """PyTorch's default Conv / Linear bias init: U(-1 / sqrt(fan_in), 1 / sqrt(fan_in)), fan_in = the weight's
  inputs per output (C_in k k for a convolution, in_features for a linear layer)."""
  bound = 1.0 / math.sqrt(fan_in)

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -bound, bound)

  return init


class APLCNN(nn.Module):
  """APL's `ToyModel` (module docstring); these defaults are its CIFAR10 type. Output float32 logits [B, classes].

  Parameters are float32, `dtype` is the compute dtype. BatchNorm averages batch statistics over the device axis
  `bn_axis_name` when set; `batch_norm` 'fused' (default) or 'flax' (models.batch_norm: same numbers).
  """

  num_classes: int
  widths: Sequence[int] = (64, 128, 196)
  convs_per_stage: int = 2
  dense_size: int = 256
  bn_axis_name: str | None = None
  dtype: Any = jnp.float32
  batch_norm: str = "fused"

  @nn.compact
  def __call__(self, x, *, train: bool):
    wide = precision.at_least(self.dtype)  # parameters and logits: float32 (float64 for a float64 dtype)
    if x.ndim != 4:
      raise ValueError(f"{type(self).__name__} needs images [B, H, W, C], got shape {x.shape}.")
    if not self.widths or min(self.widths) < 1 or self.convs_per_stage < 1 or self.dense_size < 1:
      raise ValueError(
        f"widths={tuple(self.widths)!r}, convs_per_stage={self.convs_per_stage!r} and "
        f"dense_size={self.dense_size!r} must be non-empty / >= 1."
      )
    norm = lambda name: make_batch_norm(
      self.batch_norm, train=train, axis_name=self.bn_axis_name, dtype=self.dtype, name=name
    )
    x = x.astype(self.dtype)
    for stage, width in enumerate(self.widths, start=1):
      for layer in range(1, self.convs_per_stage + 1):
        fan_in = 9 * x.shape[-1]
        x = nn.Conv(
          width,
          (3, 3),
          padding=((1, 1), (1, 1)),
          use_bias=True,
          dtype=self.dtype,
          kernel_init=KAIMING_UNIFORM_RELU,
          bias_init=torch_default_bias_init(fan_in),
          name=f"block{stage}_conv{layer}",
        )(x)
        x = nn.relu(norm(f"block{stage}_bn{layer}")(x))
      x = max_pool_2x2(x)
    x = x.reshape((x.shape[0], -1))
    x = nn.Dense(
      self.dense_size,
      dtype=self.dtype,
      param_dtype=wide,
      kernel_init=XAVIER_UNIFORM,
      bias_init=torch_default_bias_init(x.shape[-1]),
      name="fc1",
    )(x)
    x = nn.relu(norm("fc1_bn")(x))
    x = nn.Dense(
      self.num_classes,
      dtype=self.dtype,
      param_dtype=wide,
      kernel_init=XAVIER_UNIFORM,
      bias_init=torch_default_bias_init(x.shape[-1]),
      name="fc2",
    )(x)
    return x.astype(wide)


class APLCNNMnist(APLCNN):
  """APL's `ToyModel` of type MNIST: widths 32/64, one conv per stage, dense 128 (for 28x28x1 inputs)."""

  widths: Sequence[int] = (32, 64)
  convs_per_stage: int = 1
  dense_size: int = 128
