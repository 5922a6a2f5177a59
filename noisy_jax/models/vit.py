"""Vision Transformers laid out as the released DINOv2 and CLIP image towers, so that their weights load by name
(noisy_jax.models.vit_weights) and give the features the original code gives.

The network (Dosovitskiy et al., "An Image is Worth 16x16 Words", ICLR 2021, arXiv 2010.11929), on x [B, H, W, 3]
(already normalised; H and W multiples of the patch size p, a remainder is dropped), h = H / p, w = W / p:

  patches   t = Dense(patchify(x)) [B, h w, D]       (a p x p stride-p convolution; bias in DINOv2, none in CLIP)
  tokens    z = [cls + e_0, registers, t + e_1..hw]   (e: position embeddings, resampled when h x w differs from the
                                                      grid trained on; registers get none)
  ln_pre    z = LN(z)                                 (CLIP only)
  blocks    z = z + g1 * Attn(LN1(z));  z = z + g2 * MLP(LN2(z))   (g: LayerScale vectors, DINOv2 only; else 1)
            Attn: multi-head softmax(q k^T / sqrt(D / heads)) v with fused qkv and an output projection;
            MLP: Dense(mlp_ratio D) -> GELU -> Dense(D)
  features  f = LN(z)[:, 0] (DINOv2: timm's `forward_head(pre_logits=True)`, DINOv2's `x_norm_clstoken`);
            f = LN(z)[:, 0] @ proj (CLIP: open_clip's `encode_image`, unnormalised; `proj` has no bias)
  logits    Dense(num_classes)(f), the module `head`

DINOv2 (Oquab et al., arXiv 2304.07193; registers: Darcet et al., "Vision Transformers Need Registers", ICLR 2024):
exact GELU, LayerScale, LayerNorm eps 1e-6, trained at 518 px (a 37 x 37 grid for p = 14). CLIP (Radford et al.,
arXiv 2103.00020): OpenAI's weights use QuickGELU x sigmoid(1.702 x), OpenCLIP/LAION's exact GELU; ln_pre; LayerNorm
eps 1e-5; trained at 224 px. Flax's `nn.gelu` defaults to the tanh approximation, which none of them uses.

Named backbones (MODELS; `vit_weights.load(name, file)` fills them from a released file):

  vit_small_patch14_dinov2, vit_base_patch14_dinov2, vit_large_patch14_dinov2      ViT-S/B/L/14 DINOv2
  vit_{small,base,large}_patch14_reg4_dinov2                                        the same with 4 registers
  vit_base_patch16_clip, vit_large_patch14_clip                                     CLIP ViT-B/16, ViT-L/14 with
                                                                                    exact GELU (OpenCLIP, LAION)
  vit_base_patch16_clip_openai, vit_large_patch14_clip_openai                       the same with QuickGELU (OpenAI)

Variables (params; p, D, P as above, N = (image_size / p)^2, R registers, i = 0 .. depth - 1):
  patch_embed/kernel [p, p, 3, D], patch_embed/bias [D] (patch_bias)   cls_token [D]   registers [R, D] (R > 0)
  pos_embed [1 + N, D] (row 0: the class token's)   ln_pre/{scale, bias} (ln_pre)   norm/{scale, bias}
  blocks_i/{norm1, norm2}/{scale, bias}, blocks_i/{qkv, proj, fc1, fc2}/{kernel, bias}, blocks_i/{ls1, ls2} [D]
  proj [D, P] (proj_dim > 0)   head/{kernel, bias}

Parameters are float32 (float64 under JAX's x64 mode: precision.at_least(dtype)); `dtype` is the compute dtype;
LayerNorm statistics and the softmax are computed in float32 at least. `bn_axis_name` is unused (the models'
interface). Initialisation of a network built without a file: truncated normal 0.02 for kernels and position
embeddings, N(0, 1e-6) for the class and register tokens, zero biases, LayerScale at `layerscale`. DINOv2's
ViT-g/14 (a SwiGLU MLP) is not provided.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from noisy_jax.core import precision
from noisy_jax.models import position_embedding

GELUS = ("exact", "quick")
INIT = nn.initializers.truncated_normal(0.02)


@dataclasses.dataclass(frozen=True)
class Preprocessing:
  """How a family's released models expect their images: resize the shorter side to `resize` px (bicubic), center
  crop `crop` x `crop`, scale to [0, 1], then (x - mean) / std per RGB channel.

  DINOv2: facebookresearch/dinov2 `dinov2/data/transforms.py` (`make_classification_eval_transform`: resize 256
  bicubic, center crop 224, ImageNet mean/std). CLIP: OpenAI's `clip/clip.py` `_transform` and open_clip's
  `OPENAI_DATASET_MEAN/STD` (resize 224 bicubic, center crop 224, the CLIP mean/std).
  """

  resize: int
  crop: int
  mean: tuple[float, float, float]
  std: tuple[float, float, float]
  interpolation: str = "bicubic"


IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
PREPROCESSING = {
  "dinov2": Preprocessing(resize=256, crop=224, mean=IMAGENET_MEAN, std=IMAGENET_STD),
  "clip": Preprocessing(resize=224, crop=224, mean=CLIP_MEAN, std=CLIP_STD),
}


def gelu(x: jax.Array, kind: str) -> jax.Array:
  """'exact': x Phi(x) (erf form); 'quick': x sigmoid(1.702 x) (OpenAI CLIP's QuickGELU)."""
  if kind == "exact":
    return jax.nn.gelu(x, approximate=False)
  if kind == "quick":
    return x * jax.nn.sigmoid(1.702 * x)
  raise ValueError(f"gelu={kind!r}; allowed: {', '.join(GELUS)}.")


def _layer_norm(eps: float, dtype, param_dtype, name: str) -> nn.LayerNorm:
  # use_fast_variance=False: the variance as E[(x - mean)^2], as torch computes it, not E[x^2] - mean^2.
  return nn.LayerNorm(epsilon=eps, dtype=dtype, param_dtype=param_dtype, use_fast_variance=False, name=name)


class Block(nn.Module):
  """One pre-norm transformer block: z + g1 Attn(LN1(z)), then + g2 MLP(LN2(z)) (module docstring). [B, T, D] ->
  [B, T, D]. `layerscale`: the initial LayerScale value; 0 for none (CLIP)."""

  heads: int
  mlp_dim: int
  gelu: str = "exact"
  layerscale: float = 0.0
  eps: float = 1e-6
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  def _dense(self, features: int, name: str) -> nn.Dense:
    return nn.Dense(features, dtype=self.dtype, param_dtype=self.param_dtype, kernel_init=INIT, name=name)

  def _attention(self, x: jax.Array) -> jax.Array:
    batch, tokens, width = x.shape
    head_dim = width // self.heads
    qkv = self._dense(3 * width, "qkv")(x).reshape(batch, tokens, 3, self.heads, head_dim)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    logits = jnp.einsum("bqhd,bkhd->bhqk", q * head_dim**-0.5, k)
    weights = jax.nn.softmax(logits.astype(precision.at_least(logits.dtype)), axis=-1).astype(self.dtype)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, tokens, width)
    return self._dense(width, "proj")(out)

  def _scale(self, x: jax.Array, name: str) -> jax.Array:
    if not self.layerscale:
      return x
    gamma = self.param(name, nn.initializers.constant(self.layerscale), (x.shape[-1],), self.param_dtype)
    return x * gamma.astype(self.dtype)

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    width = x.shape[-1]
    x = x + self._scale(self._attention(_layer_norm(self.eps, self.dtype, self.param_dtype, "norm1")(x)), "ls1")
    h = _layer_norm(self.eps, self.dtype, self.param_dtype, "norm2")(x)
    h = self._dense(width, "fc2")(gelu(self._dense(self.mlp_dim, "fc1")(h), self.gelu))
    return x + self._scale(h, "ls2")


class PatchEmbed(nn.Module):
  """The patch embedding: a p x p convolution with stride p (kernel [p, p, 3, D], optional bias [D]) computed as one
  matrix product of the flattened patches. x [B, H, W, 3] -> (tokens [B, h w, D] in row-major grid order, (h, w))
  with h = floor(H / p), w = floor(W / p): rows and columns past the last whole patch are dropped, as torch's
  stride-p convolution (timm, HF) drops them; the released models are used at multiples of p."""

  patch_size: int
  width: int
  use_bias: bool = True
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array) -> tuple[jax.Array, tuple[int, int]]:
    batch, height, width, channels = x.shape
    p = self.patch_size
    if height < p or width < p or channels != 3:
      raise ValueError(
        f"VisionTransformer: input {tuple(x.shape)}; needs [B, H, W, 3] with H, W >= the patch size {p} (multiples "
        "of it: what the released models are trained on)."
      )
    h, w = height // p, width // p
    x = x[:, : h * p, : w * p]
    kernel = self.param("kernel", INIT, (p, p, channels, self.width), self.param_dtype)
    patches = x.astype(self.dtype).reshape(batch, h, p, w, p, channels).transpose(0, 1, 3, 2, 4, 5)
    t = jnp.einsum("bhwijc,ijcd->bhwd", patches, kernel.astype(self.dtype)).reshape(batch, h * w, self.width)
    if self.use_bias:
      t = t + self.param("bias", nn.initializers.zeros, (self.width,), self.param_dtype).astype(self.dtype)
    return t, (h, w)


class VisionTransformer(nn.Module):
  """A ViT backbone with a classifier head (module docstring). The defaults are DINOv2 ViT-S/14.

  Fields: num_classes (the head's outputs); patch_size p; width D; depth (blocks); heads; mlp_ratio (MLP width /
  D); registers (register tokens, 0 for none); layerscale (initial LayerScale value, 0 for none); gelu ('exact' or
  'quick'); ln_pre (a LayerNorm before the blocks); patch_bias (the patch embedding has a bias); proj_dim (P > 0: a
  bias-free projection of the CLS feature to P, CLIP; 0: none); eps (LayerNorm epsilon); image_size (the size the
  position grid was trained at: the grid is image_size / p cells a side); pos_interpolation (how the grid is
  resampled for other input sizes: position_embedding.METHODS); bn_axis_name (unused); dtype (compute dtype).

  `__call__(x, train=False)` -> logits [B, num_classes]; `features(x)` -> [B, P or D] (apply(..., method='features')).
  """

  num_classes: int
  patch_size: int = 14
  width: int = 384
  depth: int = 12
  heads: int = 6
  mlp_ratio: float = 4.0
  registers: int = 0
  layerscale: float = 1e-5
  gelu: str = "exact"
  ln_pre: bool = False
  patch_bias: bool = True
  proj_dim: int = 0
  eps: float = 1e-6
  image_size: int = 518
  pos_interpolation: str = "antialias"
  bn_axis_name: str | None = None
  dtype: Any = jnp.float32

  @property
  def grid(self) -> int:
    """Cells a side of the trained position grid."""
    return self.image_size // self.patch_size

  @property
  def feature_dim(self) -> int:
    return self.proj_dim or self.width

  def _check(self) -> None:
    if self.image_size % self.patch_size:
      raise ValueError(f"{type(self).__name__}: image_size={self.image_size} is not a multiple of {self.patch_size}.")
    if self.gelu not in GELUS or self.pos_interpolation not in position_embedding.METHODS:
      raise ValueError(
        f"{type(self).__name__}: gelu={self.gelu!r} (allowed {', '.join(GELUS)}), pos_interpolation="
        f"{self.pos_interpolation!r} (allowed {', '.join(position_embedding.METHODS)})."
      )

  def setup(self):
    self._check()
    wide = precision.at_least(self.dtype)
    p, d = self.patch_size, self.width
    self.patch_embed = PatchEmbed(p, d, self.patch_bias, self.dtype, wide, name="patch_embed")
    self.cls_token = self.param("cls_token", nn.initializers.normal(1e-6), (d,), wide)
    if self.registers:
      self.register_tokens = self.param("registers", nn.initializers.normal(1e-6), (self.registers, d), wide)
    self.pos_embed = self.param("pos_embed", INIT, (1 + self.grid**2, d), wide)
    if self.ln_pre:
      self.pre_norm = _layer_norm(self.eps, self.dtype, wide, "ln_pre")
    block = dict(gelu=self.gelu, layerscale=self.layerscale, eps=self.eps, dtype=self.dtype, param_dtype=wide)
    mlp_dim = int(self.width * self.mlp_ratio)
    self.blocks = [Block(self.heads, mlp_dim, **block) for _ in range(self.depth)]
    self.norm = _layer_norm(self.eps, self.dtype, wide, "norm")
    if self.proj_dim:
      self.proj = self.param("proj", INIT, (d, self.proj_dim), wide)
    self.head = nn.Dense(self.num_classes, dtype=self.dtype, param_dtype=wide, kernel_init=INIT, name="head")

  def _position_embedding(self, size: tuple[int, int]) -> jax.Array:
    """[1 + h w, D]: the class row and the patch grid resampled to `size` (in the parameters' dtype)."""
    grid = self.pos_embed[1:].reshape(self.grid, self.grid, self.width)
    grid = position_embedding.resample(grid, size, self.pos_interpolation)
    return jnp.concatenate([self.pos_embed[:1], grid.reshape(-1, self.width)], axis=0)

  def tokens(self, x: jax.Array) -> jax.Array:
    """The final-norm tokens [B, 1 + registers + h w, D] (CLS, registers, patches) of images x [B, H, W, 3]."""
    t, size = self.patch_embed(x)
    batch = t.shape[0]
    pos = self._position_embedding(size).astype(self.dtype)
    cls = jnp.broadcast_to(self.cls_token.astype(self.dtype) + pos[0], (batch, 1, self.width))
    parts = [cls, t + pos[1:]]
    if self.registers:
      regs = jnp.broadcast_to(self.register_tokens.astype(self.dtype), (batch, self.registers, self.width))
      parts.insert(1, regs)
    z = jnp.concatenate(parts, axis=1)
    if self.ln_pre:
      z = self.pre_norm(z)
    for block in self.blocks:
      z = block(z)
    return self.norm(z)

  def features(self, x: jax.Array) -> jax.Array:
    """The embedding [B, P or D] of images x [B, H, W, 3]: the final-norm CLS token, projected when proj_dim > 0."""
    f = self.tokens(x)[:, 0]
    if self.proj_dim:
      f = f @ self.proj.astype(self.dtype)
    return f

  def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
    """Logits [B, num_classes] (float32 at least) of images x [B, H, W, 3]; `train` changes nothing (no dropout)."""
    del train
    return self.head(self.features(x)).astype(precision.at_least(self.dtype))


class _DINOv2(VisionTransformer):
  """DINOv2 ViT/14 (module docstring): exact GELU, LayerScale, eps 1e-6, 518 px (37 x 37 grid)."""

  patch_size: int = 14
  image_size: int = 518
  layerscale: float = 1e-5
  gelu: str = "exact"
  eps: float = 1e-6


class ViTSmallDINOv2(_DINOv2):
  """vit_small_patch14_dinov2: D 384, 12 blocks, 6 heads (21M parameters without a head)."""

  width: int = 384
  depth: int = 12
  heads: int = 6


class ViTBaseDINOv2(_DINOv2):
  """vit_base_patch14_dinov2: D 768, 12 blocks, 12 heads (86M)."""

  width: int = 768
  depth: int = 12
  heads: int = 12


class ViTLargeDINOv2(_DINOv2):
  """vit_large_patch14_dinov2: D 1024, 24 blocks, 16 heads (304M)."""

  width: int = 1024
  depth: int = 24
  heads: int = 16


class ViTSmallReg4DINOv2(ViTSmallDINOv2):
  """vit_small_patch14_reg4_dinov2: ViT-S/14 DINOv2 with 4 registers."""

  registers: int = 4


class ViTBaseReg4DINOv2(ViTBaseDINOv2):
  """vit_base_patch14_reg4_dinov2: ViT-B/14 DINOv2 with 4 registers."""

  registers: int = 4


class ViTLargeReg4DINOv2(ViTLargeDINOv2):
  """vit_large_patch14_reg4_dinov2: ViT-L/14 DINOv2 with 4 registers."""

  registers: int = 4


class _CLIP(VisionTransformer):
  """A CLIP image tower (module docstring): ln_pre, no patch bias, no LayerScale, eps 1e-5, 224 px, exact GELU
  (OpenCLIP/LAION; the *OpenAI classes: QuickGELU)."""

  layerscale: float = 0.0
  ln_pre: bool = True
  patch_bias: bool = False
  eps: float = 1e-5
  image_size: int = 224
  gelu: str = "exact"


class ViTBaseCLIP(_CLIP):
  """vit_base_patch16_clip: CLIP ViT-B/16, D 768, 12 blocks, 12 heads, projection to 512, exact GELU."""

  patch_size: int = 16
  width: int = 768
  depth: int = 12
  heads: int = 12
  proj_dim: int = 512


class ViTLargeCLIP(_CLIP):
  """vit_large_patch14_clip: CLIP ViT-L/14, D 1024, 24 blocks, 16 heads, projection to 768, exact GELU."""

  patch_size: int = 14
  width: int = 1024
  depth: int = 24
  heads: int = 16
  proj_dim: int = 768


class ViTBaseCLIPOpenAI(ViTBaseCLIP):
  """vit_base_patch16_clip_openai: ViT-B/16 with QuickGELU (OpenAI's weights)."""

  gelu: str = "quick"


class ViTLargeCLIPOpenAI(ViTLargeCLIP):
  """vit_large_patch14_clip_openai: ViT-L/14 with QuickGELU (OpenAI's weights)."""

  gelu: str = "quick"


MODELS: dict[str, type[VisionTransformer]] = {
  "vit_small_patch14_dinov2": ViTSmallDINOv2,
  "vit_base_patch14_dinov2": ViTBaseDINOv2,
  "vit_large_patch14_dinov2": ViTLargeDINOv2,
  "vit_small_patch14_reg4_dinov2": ViTSmallReg4DINOv2,
  "vit_base_patch14_reg4_dinov2": ViTBaseReg4DINOv2,
  "vit_large_patch14_reg4_dinov2": ViTLargeReg4DINOv2,
  "vit_base_patch16_clip": ViTBaseCLIP,
  "vit_large_patch14_clip": ViTLargeCLIP,
  "vit_base_patch16_clip_openai": ViTBaseCLIPOpenAI,
  "vit_large_patch14_clip_openai": ViTLargeCLIPOpenAI,
}


def family(model: VisionTransformer) -> str:
  """'clip' or 'dinov2' (the key of PREPROCESSING): CLIP towers have ln_pre."""
  return "clip" if model.ln_pre else "dinov2"
