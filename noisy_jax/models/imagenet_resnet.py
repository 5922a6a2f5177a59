"""ImageNet-style ResNets laid out as torchvision's `resnet18`, `resnet34` and `resnet50` (He et al., "Deep Residual
Learning for Image Recognition", CVPR 2016, arXiv 1512.03385): ResNet-50 is the network of the Clothing1M recipes
(shared/REFERENCE.md §6, §8; ELR+ and DivideMix fine-tune torchvision's ImageNet-pretrained copy) and of the
Encouraging loss paper (§3). The same variable names for every depth let noisy_jax.models.pretrained load
torchvision's and timm's weights into them.

Layout (torchvision's "v1.5": the stride of a down-sampling block sits on its 3x3 convolution, not on the first 1x1
as in the paper's original Caffe model):

  stem:  conv7x7(64, stride 2, padding 3) -> BN -> ReLU -> max-pool 3x3 (stride 2, padding 1, padded with -inf)
  stage s = 1..4, blocks [3, 4, 6, 3], widths w = 64 / 128 / 256 / 512, expansion 4 (outputs 4w = 256 ... 2048):
    Bottleneck: h1 = relu(BN(conv1x1(x) to w)); h2 = relu(BN(conv3x3_s(h1) to w));
                out = relu(BN(conv1x1(h2) to 4w) + shortcut(x))
    the first block of stages 2-4 has stride 2; the shortcut is BN(conv1x1_s(x, 4w)) (projection) where the stride
    or the channel count changes (the first block of every stage), the identity elsewhere
  head:  global average pool -> Dense(num_classes) (with bias)

A 224x224 input gives maps 112 (stem) -> 56 (pool) -> 56 / 28 / 14 / 7 (stages); other sizes work too (the pool is
global; each stride-2 layer maps H to ceil(H / 2)), e.g. 64x64 -> 32 -> 16 -> 16 / 8 / 4 / 2.

Trainable parameters (BN scale and bias counted, running statistics not): 25,557,032 at 1,000 classes, torchvision's
count; 23,528,522 at 10 classes (the head is 2,048 C + C). In general, with C classes:
  stem 7*7*3*64 + 2*64; per block (c_in -> w -> 4w): c_in w + 9 w^2 + 4 w^2 + 2 (w + w + 4w)
  (+ c_in 4w + 2 * 4w with a projection); head 2048 C + C.

Initialisation as torchvision's ResNet: every convolution kaiming_normal_(mode='fan_out', nonlinearity='relu'), i.e.
N(0, 2 / fan_out) with fan_out = k * k * C_out, not truncated; every BN scale 1 and bias 0, the last BN of each
block included (torchvision's default zero_init_residual=False; starting that BN at 0, Goyal et al. 2017's trick,
is not offered); the dense layer keeps PyTorch's nn.Linear default, weight and bias U(+-1 / sqrt(2048)).
Differences from torchvision, by choice or by framework: BN running variance is updated with the biased batch
variance (PyTorch: unbiased; `models.resnet.batch_norm`); parameters are float32 and `dtype` is the compute dtype.
No pretrained weights are shipped or downloaded: this module builds a randomly initialised network
(`config.model.pretrained` loads a file into it: noisy_jax.experiment.pretrained).

ResNet-18 / ResNet-34 (`ImageNetResNet18`, `ImageNetResNet34`): the same stem and head, stages of torchvision's
BasicBlock (two 3x3 convolutions, expansion 1, `models.resnet.BasicBlock` with the fan-out init above), blocks
[2, 2, 2, 2] / [3, 4, 6, 3]; 11,689,512 / 21,797,672 parameters at 1,000 classes, torchvision's counts.

Input [B, H, W, C], output float32 logits [B, num_classes]. BatchNorm: momentum 0.9 (PyTorch 0.1), epsilon 1e-5,
batch statistics averaged over `bn_axis_name` when set.

Frozen BatchNorm statistics (`freeze_batch_norm=True`, default False): in train mode too, every BatchNorm normalises
with its running statistics, y = scale (x - running_mean) / sqrt(running_var + epsilon) + bias, as eval mode does,
and leaves them as they are (the train step returns them unchanged), while scale and bias keep training. A train-mode
forward pass then computes what eval mode computes. What PyTorch fine-tuning code does by putting every BatchNorm
module in eval mode inside a model in train mode; torchvision's FrozenBatchNorm2d (its detection backbones) and
detectron2's also fix scale and bias, which this does not. For pretrained weights (config.model.pretrained) whose
statistics should survive small or unrepresentative batches. The Clothing1M recipes of DivideMix and ELR+ do not
freeze them: both train the pretrained ResNet-50 with its BatchNorm in train mode (DivideMix Train_clothing1M.py,
`net.train()` in warmup and train; ELR+ trainer/trainer.py, `model.train()`).

Submodules: 'stem_conv', 'stem_bn', 'stage{s}_block{b}' (s, b from 1; inside: conv1 / bn1, conv2 / bn2, conv3 / bn3,
shortcut_conv / shortcut_bn), 'head'.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import flax.linen as nn
import jax.numpy as jnp

from noisy_jax.core import precision
from noisy_jax.models.apl_cnn import torch_default_bias_init
from noisy_jax.models.resnet import BasicBlock
from noisy_jax.models.resnet import batch_norm
from noisy_jax.models.resnet import check_stages
from noisy_jax.models.resnet import conv
from noisy_jax.models.resnet import XLA_CPU_COMPILER_OPTIONS

# torchvision's ResNet conv init: kaiming_normal_(mode='fan_out', nonlinearity='relu') = N(0, 2 / (k * k * C_out)).
HE_NORMAL_FAN_OUT = nn.initializers.variance_scaling(2.0, "fan_out", "normal")
# PyTorch's nn.Linear default weight init, kaiming_uniform_(a=sqrt(5)) = U(+-1 / sqrt(fan_in)): variance 1 / (3 fan_in).
TORCH_LINEAR_KERNEL = nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


class Bottleneck(nn.Module):
  """Bottleneck residual block, stride on the 3x3 convolution (torchvision v1.5):

    h1 = relu(BN1(conv1x1(x))), h2 = relu(BN2(conv3x3_s(h1))), out = relu(BN3(conv1x1(h2)) + shortcut(x)),

  widths features -> features -> expansion * features. The shortcut is BN(conv1x1_s(x)) when the stride is not 1 or
  the channel count changes, the identity otherwise. [B, H, W, C_in] -> [B, ceil(H/s), ceil(W/s), expansion * features].
  """

  features: int
  strides: int = 1
  expansion: int = 4
  bn_axis_name: str | None = None
  dtype: Any = jnp.float32
  batch_norm: str = "fused"

  @nn.compact
  def __call__(self, x, *, train: bool):
    bn = dict(train=train, axis_name=self.bn_axis_name, dtype=self.dtype, kind=self.batch_norm)
    cv = dict(dtype=self.dtype, kernel_init=HE_NORMAL_FAN_OUT)
    out_features = self.expansion * self.features
    h = nn.relu(batch_norm(**bn, name="bn1")(conv(self.features, 1, **cv, name="conv1")(x)))
    h = nn.relu(batch_norm(**bn, name="bn2")(conv(self.features, 3, strides=self.strides, **cv, name="conv2")(h)))
    h = batch_norm(**bn, name="bn3")(conv(out_features, 1, **cv, name="conv3")(h))
    if self.strides != 1 or x.shape[-1] != out_features:
      x = conv(out_features, 1, strides=self.strides, **cv, name="shortcut_conv")(x)
      x = batch_norm(**bn, name="shortcut_bn")(x)
    return nn.relu(h + x)


BLOCKS = ("bottleneck", "basic")


class ImageNetResNet(nn.Module):
  """ImageNet-style ResNet (torchvision layout; see the module docstring for the formula).

  stem: 7x7/2 conv to widths[0] channels, BN, ReLU, 3x3/2 max-pool; stage s: blocks_per_stage[s-1] blocks of
  width widths[s-1] (output expansion * widths[s-1]), the first with stride 1 in stage 1 and 2 later; head: global
  average pool -> Dense(num_classes). `block`: 'bottleneck' (ResNet-50 and deeper, expansion 4) or 'basic' (two 3x3
  convolutions, torchvision's BasicBlock of ResNet-18/34: `models.resnet.BasicBlock` with expansion 1, which must
  then be 1). The defaults are ResNet-50; smaller widths / blocks serve tests and smoke runs. `freeze_batch_norm`:
  every BatchNorm normalises with its running statistics and does not update them, in train mode too (module
  docstring); scale and bias still train.
  """

  # The XLA:CPU setting of the CIFAR ResNets (models.resnet); measured there, not on this network.
  xla_cpu_compiler_options: ClassVar[dict[str, str]] = XLA_CPU_COMPILER_OPTIONS

  num_classes: int
  widths: Sequence[int] = (64, 128, 256, 512)
  blocks_per_stage: Sequence[int] = (3, 4, 6, 3)
  expansion: int = 4
  bn_axis_name: str | None = None
  dtype: Any = jnp.float32
  batch_norm: str = "fused"
  block: str = "bottleneck"
  freeze_batch_norm: bool = False

  @nn.compact
  def __call__(self, x, *, train: bool):
    wide = precision.at_least(self.dtype)  # parameters and logits: float32 (float64 for a float64 dtype)
    check_stages(type(self).__name__, x, self.widths, self.blocks_per_stage)
    if self.block not in BLOCKS or (self.block == "basic" and self.expansion != 1):
      raise ValueError(
        f"{type(self).__name__}: block={self.block!r} with expansion={self.expansion}; allowed: 'bottleneck' (any "
        "expansion) or 'basic' (expansion 1)."
      )
    # BatchNorm's mode: batch statistics (and running averages updated) only in train mode with unfrozen statistics.
    # The blocks use `train` for nothing else.
    batch_statistics = train and not self.freeze_batch_norm
    x = x.astype(self.dtype)
    x = conv(self.widths[0], 7, strides=2, dtype=self.dtype, kernel_init=HE_NORMAL_FAN_OUT, name="stem_conv")(x)
    x = nn.relu(
      batch_norm(
        train=batch_statistics, axis_name=self.bn_axis_name, dtype=self.dtype, kind=self.batch_norm, name="stem_bn"
      )(x)
    )
    x = nn.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
    for stage, (width, blocks) in enumerate(zip(self.widths, self.blocks_per_stage)):
      for block in range(blocks):
        common = dict(
          strides=2 if stage > 0 and block == 0 else 1,
          bn_axis_name=self.bn_axis_name,
          dtype=self.dtype,
          batch_norm=self.batch_norm,
          name=f"stage{stage + 1}_block{block + 1}",
        )
        if self.block == "basic":
          x = BasicBlock(width, kernel_init=HE_NORMAL_FAN_OUT, **common)(x, train=batch_statistics)
        else:
          x = Bottleneck(width, expansion=self.expansion, **common)(x, train=batch_statistics)
    x = jnp.mean(x, axis=(1, 2))
    fan_in = x.shape[-1]
    x = nn.Dense(
      self.num_classes,
      dtype=self.dtype,
      param_dtype=wide,
      kernel_init=TORCH_LINEAR_KERNEL,
      bias_init=torch_default_bias_init(fan_in),
      name="head",
    )(x)
    return x.astype(wide)


class ResNet50(ImageNetResNet):
  """ResNet-50 (torchvision `resnet50`, v1.5): Bottlenecks [3, 4, 6, 3], widths 64/128/256/512, expansion 4;
  25,557,032 parameters at 1,000 classes, 23,528,522 at 10."""

  widths: Sequence[int] = (64, 128, 256, 512)
  blocks_per_stage: Sequence[int] = (3, 4, 6, 3)
  expansion: int = 4


class ImageNetResNet18(ImageNetResNet):
  """ResNet-18, ImageNet style (torchvision `resnet18`): BasicBlocks [2, 2, 2, 2], widths 64/128/256/512;
  11,689,512 parameters at 1,000 classes. (`resnet18` in the registry is the CIFAR-style network.)"""

  blocks_per_stage: Sequence[int] = (2, 2, 2, 2)
  expansion: int = 1
  block: str = "basic"


class ImageNetResNet34(ImageNetResNet):
  """ResNet-34, ImageNet style (torchvision `resnet34`): BasicBlocks [3, 4, 6, 3], widths 64/128/256/512;
  21,797,672 parameters at 1,000 classes."""

  blocks_per_stage: Sequence[int] = (3, 4, 6, 3)
  expansion: int = 1
  block: str = "basic"
