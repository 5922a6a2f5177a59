"""ResNet-18 / ResNet-34 for 32x32 images, CIFAR style (He et al., CVPR 2016, arXiv 1512.03385).

The layout is the one of kuangliu/pytorch-cifar (`models/resnet.py`), which the popular PyTorch port of the
Generalized Cross Entropy paper (Zhang & Sabuncu, NeurIPS 2018) trains: ResNet-34 on CIFAR-10/100, ResNet-18 on
FASHION-MNIST. It differs from the ImageNet ResNet only in the stem: one 3x3 convolution with 64 channels and
stride 1 and no max-pool, so a 32x32 input keeps its resolution in the first stage.

This file also holds the two layer helpers every convolutional ResNet in `noisy_jax.models` goes through, `conv`
and `batch_norm`: swapping the convolution implementation (e.g. for a faster CPU kernel) means editing `conv` only;
and `XLA_CPU_COMPILER_OPTIONS`, the XLA:CPU setting their train steps are compiled with (`noisy_jax.train`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import flax.linen as nn
import jax.numpy as jnp

from noisy_jax.core import precision
from noisy_jax.models.batch_norm import make_batch_norm

# He et al. (ICCV 2015) normal init: N(0, 2 / fan_in), not truncated. Same distribution as Chainer's
# `HeNormal(scale=1.0)` (the Joint Optimization code) and PyTorch's `kaiming_normal_(mode='fan_in')`.
HE_NORMAL = nn.initializers.variance_scaling(2.0, "fan_in", "normal")

# XLA:CPU hands some work to its YNNPACK library ("library fusions"). By default that includes convolutions with
# more than 16 channels and single matmuls (73 of the 98 convolutions of the ResNet-32 train step), whose kernels
# use a second core poorly here. Keeping only the elementwise and reduction fusion types, so that most convolutions
# (all but the 12 an elementwise fusion absorbs) and the matmuls run on XLA's own (Eigen) kernels, made the train
# step (batch 128, 2-core CPU) of the pre-activation ResNet-32 go from 386 to 302 ms, Joint Optimization's ResNet
# from 1,337 to 906 ms and ResNet-18's from 2,468 to 1,633 ms (both compilations alternated in one process:
# `python -m experiments.benchmarks.train_step --model MODEL --xla-options both`). It did not help the SmallCNN,
# which keeps XLA's defaults. Applied per compiled step (`jax.jit(compiler_options=...)`) on CPU only, by
# `noisy_jax.parallel.xla_options.compiler_options`; it changes kernels, not the computation.
XLA_CPU_COMPILER_OPTIONS = {
  "xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_ELTWISE,LIBRARY_FUSION_TYPE_REDUCE"
}


def conv(
  features: int,
  kernel_size: int,
  *,
  strides: int = 1,
  dtype: Any = jnp.float32,
  kernel_init: Any = HE_NORMAL,
  name: str | None = None,
) -> nn.Module:
  """A bias-free square convolution with PyTorch-style symmetric padding; call it inside a compact module.

  [B, H, W, C_in] -> [B, ceil(H / strides), ceil(W / strides), features] for odd kernel sizes: the padding is
  kernel_size // 2 on *every* side (PyTorch `padding=k // 2`), not XLA's 'SAME' (which, for stride 2 on an even
  input, pads only the bottom/right and so samples different pixels). Kernel [k, k, C_in, features], init
  `kernel_init` (default He-normal fan-in, `HE_NORMAL`), float32 parameters (float64 for a float64 `dtype`), `dtype`
  compute. Every convolution of
  ResNet, PreActResNet and the ImageNet ResNet-50 is built here, so this is the one place to swap the convolution
  implementation.
  """
  pad = kernel_size // 2
  return nn.Conv(
    features,
    (kernel_size, kernel_size),
    strides=(strides, strides),
    padding=((pad, pad), (pad, pad)),
    use_bias=False,
    dtype=dtype,
    param_dtype=precision.at_least(dtype),
    kernel_init=kernel_init,
    name=name,
  )


def batch_norm(
  *, train: bool, axis_name: str | None, dtype: Any, kind: str = "fused", name: str | None = None
) -> nn.Module:
  """BatchNorm over [B, H, W] per channel: momentum 0.9 (PyTorch momentum 0.1), epsilon 1e-5, scale and bias.

  Train mode normalises with the batch statistics (averaged over the device axis `axis_name` when set) and updates
  the running averages in 'batch_stats'; eval mode uses the running averages. Flax updates the running variance
  with the biased batch variance, PyTorch and Chainer with the unbiased one (a factor m / (m - 1), m = B * H * W).
  kind: 'fused' (`models.batch_norm.BatchNorm`, same numbers with a hand-written backward, faster) or 'flax'.
  """
  return make_batch_norm(kind, train=train, axis_name=axis_name, dtype=dtype, name=name)


def check_stages(model: str, x, widths: Sequence[int], blocks_per_stage: Sequence[int]) -> None:
  """Raises ValueError unless x is [B, H, W, C] and widths / blocks_per_stage are equally long positive lists."""
  if x.ndim != 4:
    raise ValueError(f"{model} needs images [B, H, W, C], got shape {x.shape}.")
  if not widths or len(widths) != len(blocks_per_stage):
    raise ValueError(
      f"widths={tuple(widths)!r} and blocks_per_stage={tuple(blocks_per_stage)!r} must be "
      "non-empty and of the same length (one entry per stage)."
    )
  if min(widths) < 1 or min(blocks_per_stage) < 1:
    raise ValueError(f"widths={tuple(widths)!r} and blocks_per_stage={tuple(blocks_per_stage)!r} must be >= 1.")


class BasicBlock(nn.Module):
  """Post-activation residual block: relu(BN(conv3x3(relu(BN(conv3x3_s(x))))) + shortcut(x)).

  The first 3x3 convolution has stride `strides`. The shortcut is the identity, or BN(conv1x1_s(x)) (projection,
  "option B") when the stride is not 1 or the channel count changes. [B, H, W, C_in] -> [B, H/s, W/s, features].
  Every convolution is initialised with `kernel_init` (default He-normal fan-in; the ImageNet ResNets pass
  torchvision's fan-out variant).
  """

  features: int
  strides: int = 1
  bn_axis_name: str | None = None
  dtype: Any = jnp.float32
  batch_norm: str = "fused"
  kernel_init: Any = HE_NORMAL

  @nn.compact
  def __call__(self, x, *, train: bool):
    bn = dict(train=train, axis_name=self.bn_axis_name, dtype=self.dtype, kind=self.batch_norm)
    cv = dict(dtype=self.dtype, kernel_init=self.kernel_init)
    h = conv(self.features, 3, strides=self.strides, **cv, name="conv1")(x)
    h = nn.relu(batch_norm(**bn, name="bn1")(h))
    h = conv(self.features, 3, **cv, name="conv2")(h)
    h = batch_norm(**bn, name="bn2")(h)
    if self.strides != 1 or x.shape[-1] != self.features:
      x = conv(self.features, 1, strides=self.strides, **cv, name="shortcut_conv")(x)
      x = batch_norm(**bn, name="shortcut_bn")(x)
    return nn.relu(h + x)


class ResNet(nn.Module):
  """CIFAR-style ResNet of BasicBlocks (kuangliu/pytorch-cifar layout).

  stem: relu(BN(conv3x3(x, widths[0], stride 1))), no max-pool;
  stage s (s = 1..S): blocks_per_stage[s-1] BasicBlocks of width widths[s-1], the first with stride 1 in stage 1 and
    stride 2 in later stages (32x32 input: maps 32 -> 16 -> 8 -> 4), projection shortcuts where shape changes;
  head: global average pool -> Dense(num_classes) (with bias).

  Input [B, H, W, C] (any H, W, C), output float32 logits [B, num_classes]. Parameters are float32, `dtype` is the
  compute dtype. BatchNorm: momentum 0.9, epsilon 1e-5, batch statistics averaged over `bn_axis_name` when set.
  Submodules: 'stem_conv', 'stem_bn', 'stage{s}_block{b}' (s, b from 1), 'head'.
  Trainable parameters with 10 classes (BN scale and bias included, running statistics excluded):
  ResNet-18 11,173,962 and ResNet-34 21,282,122, as kuangliu's PyTorch models.

  Differences from the PyTorch original, by choice: convolutions use He-normal init (PyTorch's default is
  kaiming_uniform(a=sqrt(5)), variance 1 / (3 fan_in)); the dense layer uses Flax's LeCun-normal init and zero bias
  (PyTorch: uniform(+-1/sqrt(fan_in)) for both); the pool is global (PyTorch `avg_pool2d(out, 4)`, the same for
  32x32 and 28x28 inputs, whose last map is 4x4).
  """

  xla_cpu_compiler_options: ClassVar[dict[str, str]] = XLA_CPU_COMPILER_OPTIONS

  num_classes: int
  widths: Sequence[int] = (64, 128, 256, 512)
  blocks_per_stage: Sequence[int] = (2, 2, 2, 2)
  bn_axis_name: str | None = None
  dtype: Any = jnp.float32
  batch_norm: str = "fused"

  @nn.compact
  def __call__(self, x, *, train: bool):
    wide = precision.at_least(self.dtype)  # parameters and logits: float32 (float64 for a float64 dtype)
    check_stages(type(self).__name__, x, self.widths, self.blocks_per_stage)
    x = x.astype(self.dtype)
    x = conv(self.widths[0], 3, dtype=self.dtype, name="stem_conv")(x)
    x = nn.relu(
      batch_norm(train=train, axis_name=self.bn_axis_name, dtype=self.dtype, kind=self.batch_norm, name="stem_bn")(x)
    )
    for stage, (width, blocks) in enumerate(zip(self.widths, self.blocks_per_stage)):
      for block in range(blocks):
        strides = 2 if stage > 0 and block == 0 else 1
        x = BasicBlock(
          width,
          strides,
          bn_axis_name=self.bn_axis_name,
          dtype=self.dtype,
          batch_norm=self.batch_norm,
          name=f"stage{stage + 1}_block{block + 1}",
        )(x, train=train)
    x = jnp.mean(x, axis=(1, 2))
    return nn.Dense(self.num_classes, dtype=self.dtype, param_dtype=wide, name="head")(x).astype(wide)


class ResNet18(ResNet):
  """ResNet-18, CIFAR style: BasicBlocks [2, 2, 2, 2], widths 64/128/256/512 (11,173,962 parameters at 10 classes).

  The GCE paper's FASHION-MNIST model.
  """

  blocks_per_stage: Sequence[int] = (2, 2, 2, 2)


class ResNet34(ResNet):
  """ResNet-34, CIFAR style: BasicBlocks [3, 4, 6, 3], widths 64/128/256/512 (21,282,122 parameters at 10 classes).

  The GCE paper's CIFAR-10/100 model.
  """

  blocks_per_stage: Sequence[int] = (3, 4, 6, 3)
