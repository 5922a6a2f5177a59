"""The 9-layer CNN of Co-teaching (Han et al., NeurIPS 2018, Table 3), with PyTorch's default initialisation.

Co-teaching's code (github.com/bhanML/Co-teaching@7c7fbe2, model.py, class `CNN`) trains it on MNIST, CIFAR-10 and
CIFAR-100 (the same network, only the input channels and classes change). Layout, input [B, H, W, C]:

  stage 1:  3 x [Conv3x3(128, padding 1, bias) -> BatchNorm -> LeakyReLU(0.01)], MaxPool 2x2 s2, Dropout2d(0.25)
  stage 2:  3 x [Conv3x3(256, padding 1, bias) -> BatchNorm -> LeakyReLU(0.01)], MaxPool 2x2 s2, Dropout2d(0.25)
  stage 3:  Conv3x3(512), Conv3x3(256), Conv3x3(128), each with no padding, bias, BatchNorm, LeakyReLU(0.01)
  head:     global average pool -> Dense(num_classes, bias)

  CIFAR 32x32: 32 -> 16 -> 8 -> 6 -> 4 -> 2, pooled;  MNIST 28x28: 28 -> 14 -> 7 -> 5 -> 3 -> 1.
  Parameters: 4,434,570 at 3 input channels and 10 classes (4,432,266 at 1 channel; 4,446,180 at 100 classes).

`widths` names the nine convolutions' outputs (default 128 x3, 256 x3, 512, 256, 128); smaller widths keep the
layout (the tests use them). Dropout2d zeroes whole channels (mask [B, 1, 1, C]) with probability `dropout_rate`
and scales the rest by 1 / (1 - rate), as PyTorch's F.dropout2d.

Dropout (a defect of the original): model.py calls `F.dropout2d(h, p=0.25)` without a `training` flag. In PyTorch
0.3 (the README's version, which produced the published numbers) that flag defaults to False, so dropout never ran;
in PyTorch >= 1 it defaults to True, so it runs in training *and* at evaluation. Decision: dropout runs in train
mode only (the paper's Table 3 network), default rate 0.25, and needs a 'dropout' RNG in train mode;
`dropout_rate=0.0` (ORIGINAL_CODE_DROPOUT_RATE) is the network the published numbers were trained with. Dropout at
evaluation is not offered.

Initialisation, PyTorch's defaults (0.3 and >= 1 agree for these layers): convolution and dense kernels and biases
U(-1 / sqrt(fan_in), 1 / sqrt(fan_in)), fan_in = 9 C_in (convolutions) or the input features (dense). BatchNorm:
scale 1, bias 0, momentum 0.9 here = PyTorch's 0.1, epsilon 1e-5; running variance updated with the biased batch
variance (PyTorch: unbiased; eval-time statistics only). PyTorch before 1.2 drew BatchNorm scales U(0, 1) [checked
in copies of its old `_BatchNorm.reset_parameters`]; not reproduced (overwrite the params after init to do so).

The global average pool is a mean over H and W; PyTorch's `avg_pool2d(kernel_size=H)` is the same for the square
maps the original sees. `top_bn` of the original (a BatchNorm on the logits, off for every dataset and referring to
an undefined layer) is not offered.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax.numpy as jnp

from noisy_jax.core import precision
from noisy_jax.models.apl_cnn import torch_default_bias_init
from noisy_jax.models.batch_norm import make_batch_norm
from noisy_jax.models.small_cnn import max_pool_2x2

# PyTorch's default Conv2d / Linear weight init (kaiming_uniform_ with a = sqrt(5); PyTorch 0.3: uniform(-stdv,
# stdv), stdv = 1 / sqrt(fan_in)): U(-1 / sqrt(fan_in), 1 / sqrt(fan_in)) = variance_scaling(1/3, fan_in, uniform).
TORCH_DEFAULT_KERNEL_INIT = nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")
DEFAULT_WIDTHS = (128, 128, 128, 256, 256, 256, 512, 256, 128)
# The network the published numbers were trained with (PyTorch 0.3 never ran F.dropout2d: module docstring).
ORIGINAL_CODE_DROPOUT_RATE = 0.0


class CoteachingCNN(nn.Module):
  """Co-teaching's 9-layer CNN (module docstring). Input [B, H, W, C] (H, W >= 28), output float32 logits [B, classes].

  Parameters are float32, `dtype` is the compute dtype. BatchNorm averages batch statistics over the device axis
  `bn_axis_name` when set; `batch_norm` 'fused' (default) or 'flax' (models.batch_norm: same numbers). Train mode
  with dropout_rate > 0 needs `rngs={'dropout': key}`.
  """

  num_classes: int
  widths: Sequence[int] = DEFAULT_WIDTHS
  dropout_rate: float = 0.25
  negative_slope: float = 0.01
  bn_axis_name: str | None = None
  dtype: Any = jnp.float32
  batch_norm: str = "fused"

  @nn.compact
  def __call__(self, x, *, train: bool):
    wide = precision.at_least(self.dtype)  # parameters and logits: float32 (float64 for a float64 dtype)
    if x.ndim != 4:
      raise ValueError(f"{type(self).__name__} needs images [B, H, W, C], got shape {x.shape}.")
    if len(self.widths) != 9 or min(self.widths) < 1:
      raise ValueError(f"widths={tuple(self.widths)!r} must name 9 convolution widths >= 1.")
    if not 0.0 <= self.dropout_rate < 1.0:
      raise ValueError(f"dropout_rate={self.dropout_rate!r} must be in [0, 1).")
    if min(x.shape[1:3]) < 28:
      raise ValueError(
        f"{type(self).__name__} needs images of at least 28x28 (two 2x2 pools, then three unpadded "
        f"3x3 convolutions), got {x.shape[1]}x{x.shape[2]}."
      )
    x = x.astype(self.dtype)
    for layer, width in enumerate(self.widths, start=1):
      fan_in = 9 * x.shape[-1]
      padding = ((1, 1), (1, 1)) if layer <= 6 else ((0, 0), (0, 0))
      x = nn.Conv(
        width,
        (3, 3),
        padding=padding,
        use_bias=True,
        dtype=self.dtype,
        param_dtype=wide,
        kernel_init=TORCH_DEFAULT_KERNEL_INIT,
        bias_init=torch_default_bias_init(fan_in),
        name=f"conv{layer}",
      )(x)
      x = make_batch_norm(
        self.batch_norm, train=train, axis_name=self.bn_axis_name, dtype=self.dtype, name=f"bn{layer}"
      )(x)
      x = nn.leaky_relu(x, negative_slope=self.negative_slope)
      if layer in (3, 6):
        x = max_pool_2x2(x)
        if self.dropout_rate:
          x = nn.Dropout(self.dropout_rate, broadcast_dims=(1, 2), deterministic=not train)(x)
    x = jnp.mean(x, axis=(1, 2))
    x = nn.Dense(
      self.num_classes,
      dtype=self.dtype,
      param_dtype=wide,
      kernel_init=TORCH_DEFAULT_KERNEL_INIT,
      bias_init=torch_default_bias_init(x.shape[-1]),
      name="fc",
    )(x)
    return x.astype(wide)
