"""Pre-activation ResNets for 32x32 images (He et al., "Identity Mappings in Deep Residual Networks", ECCV 2016,
arXiv 1603.05027), including the network of the Joint Optimization paper (Tanaka et al., CVPR 2018).

Two registered variants:
- `PreActResNet32`: the standard CIFAR pre-activation ResNet with 6n + 2 = 32 weighted layers (n = 5): 3x3 stem
  conv to 16 channels, 3 stages x 5 blocks of widths 16/32/64, projection shortcuts only where the shape changes.
  466,714 parameters at 10 classes (He et al.'s 0.46M ResNet-32 uses parameter-free "option A" shortcuts instead of
  the two 1x1 projections here, 2,560 weights).
- `PreActResNetJO`: the network of the Joint Optimization original code (DaikiTanaka-UT/JointOptimization,
  `net.py`, Chainer), read for this port: stem `Convolution2D(3, 32, 3, stride 1, pad 1, nobias)`; stages `res2`,
  `res3`, `res4` of 5 blocks each with widths 32/64/128 and strides 1/2/2; the first block of *every* stage
  ("BlockA", also in stage 1 where 32 -> 32 at stride 1) has a bias-free 1x1 projection shortcut (no BN) applied to
  the pre-activated input relu(BN(x)), the other blocks ("BlockB") the identity; then BN -> ReLU -> global average
  pool -> `Linear(128, 10)` (with bias). All convolutions bias-free with `HeNormal(scale=1.0)` init (the linear
  layer keeps Chainer's default LeCun-normal init). 1,861,162 parameters at 10 classes.
  Not reproduced: Chainer's BatchNormalization default epsilon is 2e-5 (here 1e-5, as every model of the library);
  its decay 0.9 equals the momentum here.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import flax.linen as nn
import jax.numpy as jnp

from noisy_jax.core import precision
from noisy_jax.models.resnet import batch_norm
from noisy_jax.models.resnet import check_stages
from noisy_jax.models.resnet import conv
from noisy_jax.models.resnet import XLA_CPU_COMPILER_OPTIONS


class PreActBlock(nn.Module):
  """Pre-activation residual block: conv3x3(relu(BN(conv3x3_s(a)))) + shortcut, with a = relu(BN(x)).

  The first 3x3 convolution has stride `strides`. The shortcut is conv1x1_s(a) (bias-free projection, no BN) when
  `project` is set, the stride is not 1 or the channel count changes, and the identity x otherwise.
  [B, H, W, C_in] -> [B, H/s, W/s, features]; the output is not activated (the next block or the head does it).
  """

  features: int
  strides: int = 1
  project: bool = False
  bn_axis_name: str | None = None
  dtype: Any = jnp.float32
  batch_norm: str = "fused"

  @nn.compact
  def __call__(self, x, *, train: bool):
    bn = dict(train=train, axis_name=self.bn_axis_name, dtype=self.dtype, kind=self.batch_norm)
    a = nn.relu(batch_norm(**bn, name="bn1")(x))
    h = conv(self.features, 3, strides=self.strides, dtype=self.dtype, name="conv1")(a)
    h = nn.relu(batch_norm(**bn, name="bn2")(h))
    h = conv(self.features, 3, dtype=self.dtype, name="conv2")(h)
    if self.project or self.strides != 1 or x.shape[-1] != self.features:
      x = conv(self.features, 1, strides=self.strides, dtype=self.dtype, name="shortcut_conv")(a)
    return h + x


class PreActResNet(nn.Module):
  """Pre-activation ResNet: conv stem, stages of PreActBlocks, BN -> ReLU -> global average pool -> Dense.

  stem: conv3x3(x, widths[0], stride 1), bias-free, not normalised (the first block's BN-ReLU follows);
  stage s (s = 1..S): blocks_per_stage[s-1] PreActBlocks of width widths[s-1], the first with stride 1 in stage 1
    and stride 2 in later stages (32x32 input: maps 32 -> 16 -> 8); its shortcut is a 1x1 projection when the
    shape changes or `project_first_block` is set (the Joint Optimization network projects in every stage);
  head: relu(BN(.)) -> global average pool -> Dense(num_classes) (with bias).

  Input [B, H, W, C], output float32 logits [B, num_classes]. Convolutions: bias-free, He-normal N(0, 2 / fan_in),
  padding k // 2 on every side. Dense: Flax's LeCun-normal init. Parameters float32, `dtype` the compute dtype.
  BatchNorm: momentum 0.9, epsilon 1e-5, batch statistics averaged over `bn_axis_name` when set.
  Submodules: 'stem_conv', 'stage{s}_block{b}' (s, b from 1), 'final_bn', 'head'.
  Trainable parameters, C classes, widths w_s, n_s blocks: 27 w_1 + sum over blocks of
  [2 c_in + 9 c_in w + 2 w + 9 w^2 (+ c_in w if projected)] + 2 w_S + (w_S + 1) C.
  """

  xla_cpu_compiler_options: ClassVar[dict[str, str]] = XLA_CPU_COMPILER_OPTIONS  # see models.resnet

  num_classes: int
  widths: Sequence[int] = (16, 32, 64)
  blocks_per_stage: Sequence[int] = (5, 5, 5)
  project_first_block: bool = False
  bn_axis_name: str | None = None
  dtype: Any = jnp.float32
  batch_norm: str = "fused"

  @nn.compact
  def __call__(self, x, *, train: bool):
    wide = precision.at_least(self.dtype)  # parameters and logits: float32 (float64 for a float64 dtype)
    check_stages(type(self).__name__, x, self.widths, self.blocks_per_stage)
    x = x.astype(self.dtype)
    x = conv(self.widths[0], 3, dtype=self.dtype, name="stem_conv")(x)
    for stage, (width, blocks) in enumerate(zip(self.widths, self.blocks_per_stage)):
      for block in range(blocks):
        x = PreActBlock(
          width,
          strides=2 if stage > 0 and block == 0 else 1,
          project=self.project_first_block and block == 0,
          bn_axis_name=self.bn_axis_name,
          batch_norm=self.batch_norm,
          dtype=self.dtype,
          name=f"stage{stage + 1}_block{block + 1}",
        )(x, train=train)
    x = nn.relu(
      batch_norm(train=train, axis_name=self.bn_axis_name, dtype=self.dtype, kind=self.batch_norm, name="final_bn")(x)
    )
    x = jnp.mean(x, axis=(1, 2))
    return nn.Dense(self.num_classes, dtype=self.dtype, param_dtype=wide, name="head")(x).astype(wide)


class PreActResNet32(PreActResNet):
  """Pre-activation ResNet-32 for CIFAR: widths 16/32/64, 3 x 5 blocks (466,714 parameters at 10 classes)."""

  widths: Sequence[int] = (16, 32, 64)
  blocks_per_stage: Sequence[int] = (5, 5, 5)
  project_first_block: bool = False


class PreActResNetJO(PreActResNet):
  """The Joint Optimization network (Tanaka et al. 2018, original `net.py`): widths 32/64/128, 3 x 5 blocks, a 1x1
  projection shortcut in every stage's first block (1,861,162 parameters at 10 classes)."""

  widths: Sequence[int] = (32, 64, 128)
  blocks_per_stage: Sequence[int] = (5, 5, 5)
  project_first_block: bool = True
