"""ProMix's strong view on device: its own RandomAugment(3, 5) pool and grey Cutout, with PIL's arithmetic, drawn per
example.

The original (Justherozen/ProMix@40d8378, utils/randaug.py; dataloader_cifarn.py l. 231-232 and 244-245 insert
`RandomAugment(3, 5)` first into transform_train_s, before RandomCrop / RandomHorizontalFlip, ToTensor and Normalize)
does, per PIL image (`RandomAugment.__call__`, l. 165-172):
  ops = random.choices(augment_list(), k=3)    3 of the 14 operations, uniformly, with replacement (l. 138-155)
  for each: val = min + float(max - min) * random.random(); img = op(img, val)     (m = 5 is never read, l. 161)
  cutout_val = random.random() * 0.5; img = Cutout(img, cutout_val)                 (l. 170-171)
with these operations and ranges (l. 9-105, 138-155), `val` passed to PIL as it is:
  AutoContrast, Equalize, Identity (0, 1)  ImageOps.autocontrast(img), ImageOps.equalize(img), img: val unused
  Brightness / Color / Contrast / Sharpness (0.05, 0.95)  ImageEnhance.X(img).enhance(val): always weaker
  Posterize (4, 8)     ImageOps.posterize(img, int(val)): 4..7 bits
  Rotate (-30, 30)     img.rotate(val) (degrees, counter-clockwise, nearest, fill 0)
  ShearX / ShearY (-0.3, 0.3)  img.transform(size, AFFINE, (1, val, 0, 0, 1, 0)) / (1, 0, 0, val, 1, 0), fill 0
  Solarize (0, 256)    ImageOps.solarize(img, val): levels >= val inverted
  TranslateX / TranslateY (-0.3, 0.3)  AFFINE (1, 0, val W, 0, 1, 0) / (1, 0, 0, 0, 1, val H): moves by -val x side
  Cutout (l. 108-135)  v = cutout_val x W (W = img.size[0], the width, for both sides); v = 0: unchanged; else
                       x0 = np.random.uniform(W), y0 = np.random.uniform(H): NumPy's uniform(low, high=1.0) with low
                       = W, so W + (1 - W) U, uniform on (1, W] (not on [0, W) as FixMatch's, whose code it copies);
                       x0 = int(max(0, x0 - v / 2)), y0 likewise; x1 = min(W, x0 + v), y1 = min(H, y0 + v);
                       ImageDraw.rectangle((x0, y0, x1, y1), (125, 123, 114)), which truncates the corners to int
                       and fills both ends, clipped to the image: a square of side floor(v) + 1 (1..16 on CIFAR's 32,
                       mean 8.5) with its top-left corner at (y0, x0), cut at the bottom and right border.

Here each operation computes what the PIL call computes, pixel for pixel (tests/test_promix_randaugment.py checks
every one against the original's code on PIL). Where PIL differs from torchvision's tensor operations
(noisy_jax.core.image_ops), PIL's arithmetic is implemented:
  * enhance (Image.blend, libImaging/Blend.c, factor in [0, 1]): trunc(d + RN32(alpha (x - d))), alpha = float32(val)
    and two float32 roundings (torchvision: trunc(clamp(fma(d, 1 - f, x f)))); degenerate images: 0 (Brightness),
    PIL's grey L (Color; grey images: the identity), the constant int(mean(L) + 0.5) (Contrast, exact in integers:
    (2 sum L + N) // 2N), the SMOOTH filter with its border copied (Sharpness; image_ops' rounded 3x3 filter, which
    PIL's is);
  * PIL's grey L = (19595 R + 38470 G + 7471 B) >> 16 in Pillow 6.2, the version the original's requirements.txt
    pins (default); Pillow >= 7.0 adds 2^15 before the shift (`rounded_grey=True`, which the installed Pillow 13
    computes); one grey level apart at most, which moves Color's and Contrast's degenerate image;
  * AutoContrast: PIL's table int(i scale + offset), scale = 255 / (hi - lo), offset = -lo scale in float64, which is
    the exact floor((i - lo) 255 / (hi - lo)) but where that quotient is an integer and float64 lands just below it
    (12,094 of the (lo, hi, i); tabulated on the host, `_autocontrast_misroundings`); torchvision's float32 table
    truncates differently;
  * geometry: PIL's 16.16 fixed-point nearest affine (libImaging/Geometry.c affine_fixed, fill 0): coefficients
    a_k = FIX(.) = floor(65536 v + 1/2) of its inverse matrix, source column (a2 + y a1 + x a0) >> 16 and row
    (a5 + y a4 + x a3) >> 16; translations run through ImagingScaleAffine (float64), which reads column
    x + floor(val W + 1/2), the same pixels as a fixed-point shift; Rotate's matrix is Image.rotate's (round(cos, 15)
    ..., about (W/2, H/2)). torchvision resamples about the centre in float32 with other rounding;
  * Cutout's grey (125, 123, 114); Equalize, Posterize, Solarize and Identity are image_ops' (equal to PIL's).
Where this can differ from PIL: Rotate's coefficients are computed in double-float (float32 pairs) from the float32
angle where PIL uses float64 (libm cos and sin, round to 15 decimals): a coefficient differs by one (1/65536 of a
pixel) when 65536 v + 1/2 lies within ~1e-8 of an integer (our error there, measured over 5,000 angles: below 9e-9;
PIL's own float64 error ~1e-10), about once in 10^7 rotations (none in the tests' 40,000). Everything else is
exact.

Grey images ([..., 1], mnist5k): every operation runs as PIL runs it on mode "L" (Color is the identity there) but
the original's Cutout, whose 3-tuple fill PIL rejects on "L" (TypeError in Pillow 6.2 and 13); here a grey image's
hole is 123, the level nearest to the L of (125, 123, 114), 122.57 (Pillow >= 7.0's convert gives 123, Pillow 6.2's
122).

Randomness: example b's draws are 32-bit words w = bits(fold_in(key, indices[b]), (2 n + 3,)) (as
noisy_jax.core.autoaugment): stage s's operation is w_s mod 14 (bias 14 / 2^32), its magnitude
val = RN32(min + (max - min) u) with u = (w_{n+s} >> 8) 2^-24 (torch.rand's 24-bit float32 uniform, where the
original's random.random() has 53 bits; min and max - min in float32, the sum rounded once); the Cutout reads
u_c = (w_{2n} >> 8) 2^-24 (cutout_val = u_c / 2, exact) and the centre's U_x, U_y from w_{2n+1}, w_{2n+2} likewise;
the corner int(max(0, W + (1 - W) U_x - v / 2)) is computed exactly in integers (`cutout_corners`), as NumPy's
float64, exact for these values, computes it. The operations receive float(val) exactly as the original's code would.
`promix_draws` returns the draws (`ProMixDraws`), `apply_promix_draws` applies them: a view can be inspected and
replayed.

Implementation: every stage computes all 14 operations on the batch (one lookup table for the 7 pointwise ones, one
fixed-point gather for the 5 geometric ones, Color and Sharpness) and keeps each example's own, in a `lax.scan` over
the stages; then the Cutout.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import NamedTuple

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import image_ops

# augment_list (utils/randaug.py l. 138-155): (operation, min, max) in its order.
POOL = (
  ("AutoContrast", 0, 1),
  ("Brightness", 0.05, 0.95),
  ("Color", 0.05, 0.95),
  ("Contrast", 0.05, 0.95),
  ("Equalize", 0, 1),
  ("Identity", 0, 1),
  ("Posterize", 4, 8),
  ("Rotate", -30, 30),
  ("Sharpness", 0.05, 0.95),
  ("ShearX", -0.3, 0.3),
  ("ShearY", -0.3, 0.3),
  ("Solarize", 0, 256),
  ("TranslateX", -0.3, 0.3),
  ("TranslateY", -0.3, 0.3),
)
OP_NAMES = tuple(op for op, _, _ in POOL)
OP_INDEX = {op: k for k, op in enumerate(OP_NAMES)}
GEOMETRIC_OPS = ("Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY")
NUM_OPS = 3  # dataloader_cifarn.py: RandomAugment(3, 5)
CUTOUT_MAX = 0.5  # RandomAugment.__call__: cutout_val = random.random() * 0.5
CUTOUT_FILL = (125, 123, 114)  # CutoutAbs: color
CUTOUT_FILL_GREY = 123  # grey images (our choice: PIL rejects the 3-tuple on "L"): the level nearest CUTOUT_FILL's L
_UNIT = np.float32(2.0**-24)


class ProMixDraws(NamedTuple):
  """What RandomAugment drew for a batch; S = num_ops.

  op_ids: int32 [B, S], indices into OP_NAMES. magnitudes: float32 [B, S], the val each stage passes to its operation
  (drawn for every operation, read by those with a magnitude). cutout_values: float32 [B], cutout_val in [0, 0.5).
  corners: int32 [B, 2], the hole's top-left (y0, x0). sides: int32 [B], its side floor(cutout_val W) + 1 before
  clipping (0: no hole, cutout_val = 0).
  """

  op_ids: jax.Array
  magnitudes: jax.Array
  cutout_values: jax.Array
  corners: jax.Array
  sides: jax.Array


def _check_num_ops(num_ops) -> int:
  if isinstance(num_ops, bool) or not isinstance(num_ops, numbers.Integral) or num_ops < 0:
    raise ValueError(f"promix_randaugment num_ops={num_ops!r} must be an int >= 0 (RandomAugment's n; ProMix: 3).")
  return int(num_ops)


def _check_size(image_size) -> tuple[int, int]:
  height, width = (int(s) for s in image_size)
  if not 1 <= min(height, width) <= max(height, width) <= image_ops.MAX_SIDE:
    raise ValueError(f"image_size={tuple(image_size)!r} must be (height, width) in [1, {image_ops.MAX_SIDE}].")
  return height, width


# ---------------------------------------------------------------------------------------------------------------
# Draws


def _example_bits(key: jax.Array, indices: jax.Array, num_words: int) -> jax.Array:
  """uint32 [B, num_words]: bits(fold_in(key, indices[b]), (num_words,)) (noisy_jax.core.autoaugment's)."""
  indices = jnp.asarray(indices)
  return jax.vmap(lambda index: jax.random.bits(jax.random.fold_in(key, index), (num_words,), jnp.uint32))(indices)


def _uniform24(words: jax.Array) -> jax.Array:
  """int32: the 24-bit integer k of a uniform u = k 2^-24 (torch.rand's float32 draw), from the top bits of a word."""
  return (words >> 8).astype(jnp.int32)


def stage_values(op_ids: jax.Array, k: jax.Array) -> jax.Array:
  """float32: val = RN32(min + (max - min) k 2^-24) of each drawn operation, min and max - min in float32 (max - min
  evaluated in float64 first, as the original's float(max_val - min_val)); rounded once (image_ops._fma)."""
  lows = np.array([np.float32(low) for _, low, _ in POOL], np.float32)
  spans = np.array([np.float32(float(high - low)) for _, low, high in POOL], np.float32)
  u = k.astype(jnp.float32) * _UNIT  # exact
  return image_ops._fma(u, jnp.asarray(spans)[op_ids], jnp.asarray(lows)[op_ids])


def _ceil_shift(value: jax.Array, bits: int) -> jax.Array:
  """ceil(value / 2^bits) for int32 value >= 0."""
  return (value + ((1 << bits) - 1)) >> bits


def cutout_side_floor(k: jax.Array, width: int) -> jax.Array:
  """int32: floor(v) for v = W cutout_val = W k 2^-25 (cutout_val = k 2^-24 CUTOUT_MAX), exactly: with k = k_hi 2^12
  + k_lo, (W k_hi + (W k_lo >> 12)) >> 13 (W k would overflow int32)."""
  return (width * (k >> 12) + ((width * (k & 0xFFF)) >> 12)) >> 13


def cutout_corners(k: jax.Array, k_x: jax.Array, k_y: jax.Array, image_size: tuple[int, int]) -> jax.Array:
  """int32 [..., 2]: CutoutAbs's (y0, x0) = int(max(0, n + (1 - n) U - v / 2)) per axis (n = H or W, U = k_axis 2^-24,
  v = W k 2^-25), exactly as float64 evaluates it (every term is exact there): with N = 4 (n - 1) k_axis + W k,
  n - ceil(N / 2^26), floored at 0; N is split as 2^12 P + Q to stay in int32."""
  height, width = image_size

  def corner(n: int, k_axis: jax.Array) -> jax.Array:
    high = 4 * (n - 1) * (k_axis >> 12) + width * (k >> 12)
    low = 4 * (n - 1) * (k_axis & 0xFFF) + width * (k & 0xFFF)
    return jnp.maximum(n - _ceil_shift(high + _ceil_shift(low, 12), 14), 0)

  return jnp.stack([corner(height, k_y), corner(width, k_x)], axis=-1)


def promix_draws(
  key: jax.Array, indices: jax.Array, *, image_size: tuple[int, int], num_ops: int = NUM_OPS
) -> ProMixDraws:
  """RandomAugment(num_ops)'s choices for the examples `indices` [B] under `key` (module docstring: words 0..n-1 the
  operations, n..2n-1 their magnitudes, 2n the Cutout's value, 2n+1 and 2n+2 its centre's x and y).

  Args:
    key: the batch's PRNG key. indices: int [B], example indices in the training set.
    image_size: (H, W). num_ops: n (ProMix: 3).
  """
  num_ops = _check_num_ops(num_ops)
  height, width = _check_size(image_size)
  words = _example_bits(key, indices, 2 * num_ops + 3)
  op_ids = (words[:, :num_ops] % np.uint32(len(POOL))).astype(jnp.int32)
  k = _uniform24(words[:, 2 * num_ops])
  side = jnp.where(k > 0, cutout_side_floor(k, width) + 1, 0)
  return ProMixDraws(
    op_ids=op_ids,
    magnitudes=stage_values(op_ids, _uniform24(words[:, num_ops : 2 * num_ops])),
    cutout_values=k.astype(jnp.float32) * _UNIT * np.float32(CUTOUT_MAX),  # exact
    corners=cutout_corners(
      k, _uniform24(words[:, 2 * num_ops + 1]), _uniform24(words[:, 2 * num_ops + 2]), (height, width)
    ),
    sides=side,
  )


# ---------------------------------------------------------------------------------------------------------------
# PIL's arithmetic on uint8 batches [B, H, W, C]


def _expand(values: jax.Array) -> jax.Array:
  return values[:, None, None, None]


def pil_blend(degenerate: jax.Array, images: jax.Array, alpha: jax.Array) -> jax.Array:
  """Image.blend(degenerate, image, alpha) for alpha in [0, 1] (Blend.c): trunc(d + RN32(alpha (x - d))), float32.

  degenerate, images: integer-valued arrays that broadcast to [B, ...]; alpha: float32 [B]. The product is rounded
  on its own (image_ops._product: no fused multiply-add), then the sum.
  """
  d = jnp.asarray(degenerate, jnp.float32)
  difference = jnp.asarray(images, jnp.float32) - d
  product = image_ops._product(difference, _expand(jnp.asarray(alpha, jnp.float32)))
  return jnp.clip(d + product, 0.0, 255.0).astype(jnp.uint8)


def pil_grey(images: jax.Array, *, rounded: bool) -> jax.Array:
  """int32 [B, H, W, 1]: PIL's convert('L'), (19595 R + 38470 G + 7471 B [+ 2^15 when rounded]) >> 16 (Convert.c
  L24: Pillow 6.2 truncates, Pillow >= 7.0 rounds); a grey image itself."""
  values = images.astype(jnp.int32)
  if images.shape[-1] == 1:
    return values
  r, g, b = values[..., 0:1], values[..., 1:2], values[..., 2:3]
  return (r * 19595 + g * 38470 + b * 7471 + (0x8000 if rounded else 0)) >> 16


def pil_contrast_level(images: jax.Array, *, rounded: bool) -> jax.Array:
  """int32 [B]: ImageEnhance.Contrast's grey level int(mean(L) + 0.5) = (2 sum L + N) // (2 N), exact (the float64
  mean is exact at the ties, which are multiples of 1/2) for images of up to 2^22 pixels (int32 sums)."""
  grey = pil_grey(images, rounded=rounded)
  n = grey.shape[1] * grey.shape[2]
  return (2 * grey.sum(axis=(1, 2, 3)) + n) // (2 * n)


def pil_smooth(images: jax.Array) -> jax.Array:
  """float32 [B, H, W, C]: image.filter(ImageFilter.SMOOTH): round((8 neighbours + 5 x) / 13) inside (Filter.c adds
  0.5 and truncates; image_ops._blurred), the border rows and columns copied."""
  height, width = images.shape[1:3]
  if min(height, width) <= 2:
    return images.astype(jnp.float32)
  blurred = jnp.pad(image_ops._blurred(images), ((0, 0), (1, 1), (1, 1), (0, 0)))
  rows, columns = (np.arange(n) % (n - 1) != 0 for n in (height, width))  # off the first and last row / column
  # a mask, not an in-place write of the interior (image_ops.sharpness: XLA:CPU miscompiled that in larger programs)
  return jnp.where((rows[:, None] & columns[None, :])[None, :, :, None], blurred, images.astype(jnp.float32))


@functools.lru_cache(maxsize=None)
def _autocontrast_misroundings() -> np.ndarray:
  """int32 [n], sorted: keys (256 lo + hi) 256 + i where PIL's float64 autocontrast table int(i scale + offset) is one
  below the exact floor((i - lo) 255 / (hi - lo)) (lo <= i <= hi; scale = 255 / (hi - lo), offset = -lo scale, each
  operation rounded as Python rounds it). Nowhere else do they differ, nor by more than one."""
  levels = np.arange(256)
  keys = []
  for lo in range(255):
    highs = np.arange(lo + 1, 256)
    scale = 255.0 / (highs - lo).astype(np.float64)
    offset = -lo * scale
    pil = np.trunc(levels[None, :] * scale[:, None] + offset[:, None])
    exact = np.floor_divide((levels[None, :] - lo) * 255, (highs - lo)[:, None])
    inside = (levels[None, :] >= lo) & (levels[None, :] <= highs[:, None])
    assert np.all((pil == exact) | (pil == exact - 1) | ~inside)
    h_index, wrong = np.nonzero((pil != exact) & inside)
    keys.append((lo * 256 + highs[h_index]) * 256 + wrong)
  return np.sort(np.concatenate(keys)).astype(np.int32)


def _levels(batch: int, channels: int) -> jax.Array:
  """int32 [B, 256, C]: each level, per example and channel."""
  return jnp.broadcast_to(jnp.arange(256, dtype=jnp.int32)[None, :, None], (batch, 256, channels))


def pil_autocontrast_table(images: jax.Array) -> jax.Array:
  """int32 [B, 256, C]: ImageOps.autocontrast's table per image and channel (cutoff 0): identity when hi <= lo, else
  clamp(floor((i - lo) 255 / (hi - lo)), 0, 255) less one at PIL's float64 misroundings (`_autocontrast_misroundings`,
  looked up by binary search)."""
  batch, _, _, channels = images.shape
  values = images.astype(jnp.int32)
  lo = values.min(axis=(1, 2))[:, None, :]  # [B, 1, C]
  hi = values.max(axis=(1, 2))[:, None, :]
  levels = _levels(batch, channels)
  table = jnp.clip(jnp.floor_divide((levels - lo) * 255, jnp.maximum(hi - lo, 1)), 0, 255)
  misroundings = jnp.asarray(_autocontrast_misroundings())
  keys = (lo * 256 + hi) * 256 + levels
  found = misroundings[jnp.clip(jnp.searchsorted(misroundings, keys), 0, misroundings.shape[0] - 1)] == keys
  return jnp.where(hi > lo, table - found.astype(jnp.int32), levels)


def _pointwise_table(images: jax.Array, op_ids: jax.Array, values: jax.Array, *, rounded_grey: bool) -> jax.Array:
  """uint8 [B, 1, 256, C]: the table of each example's pointwise operation (the identity for the others)."""
  batch, _, _, channels = images.shape
  levels = _levels(batch, channels)
  level_image = levels[:, None].astype(jnp.uint8)  # [B, 1, 256, C], image_ops' layout
  candidates = {
    "AutoContrast": lambda: pil_autocontrast_table(images),
    "Brightness": lambda: pil_blend(0, level_image, values)[:, 0],
    "Contrast": lambda: pil_blend(_expand(pil_contrast_level(images, rounded=rounded_grey)), level_image, values)[:, 0],
    "Equalize": lambda: image_ops._equalize_table(images)[:, 0],
    "Posterize": lambda: image_ops.posterize(level_image, values)[:, 0],  # int(val) bits
    "Solarize": lambda: image_ops.solarize(level_image, values)[:, 0],  # i >= val inverted: PIL's i < val kept
  }
  table = levels
  for name, build in candidates.items():
    table = jnp.where((op_ids == OP_INDEX[name])[:, None, None], build().astype(jnp.int32), table)
  return table.astype(jnp.uint8)[:, None]


# Geometry: PIL's fixed-point coefficients (a0, a1, a2, a3, a4, a5), Geometry.c affine_fixed.
_FIX_ONE = 65536
_IDENTITY = (_FIX_ONE, 0, _FIX_ONE // 2, 0, _FIX_ONE, _FIX_ONE // 2)  # FIX of (1, 0, 0 + 1/2, 0, 1, 0 + 1/2)


def _floor_half_up(t: jax.Array) -> jax.Array:
  """int32 floor(t + 1/2) of float32 t, exactly (t + 1/2 itself may round)."""
  n = jnp.floor(t)
  return (n + (t - n >= 0.5)).astype(jnp.int32)


def _floor_half_up_product(side: int, m: jax.Array) -> jax.Array:
  """int32 floor(side m + 1/2) of float32 m and an int side <= 4096, exactly: side m = p1 + p2 in two exact products;
  the candidate n = round(RN(p1 + p2)) moves by one where the exact sign of p1 + p2 - (n -+ 1/2) says so (Sum2 of
  three exact terms)."""
  m_hi, m_lo = image_ops._split(m)
  p1, p2 = np.float32(side) * m_hi, np.float32(side) * m_lo
  n = jnp.round(p1 + p2)
  below = image_ops._rounded_sum(p1, p2, -(n - 0.5)) < 0
  above = image_ops._rounded_sum(p1, p2, -(n + 0.5)) >= 0
  return (n - below + above).astype(jnp.int32)


def _df_polynomial_loop(coefficients, z):
  """sum_k coefficients[k] z^k by Horner's rule in double-float, as a `lax.fori_loop` (image_ops._df_polynomial
  unrolled: on XLA:CPU at --xla_backend_optimization_level=0, the test suite's flag, the program with the unrolled
  polynomials fused into the six stacked coefficients did not finish in 5 minutes for 16 angles; the loop's body is
  small and its results are materialised: 1 ms)."""
  hi = np.array([np.float32(c) for c in coefficients], np.float32)
  lo = np.array([np.float32(c - float(np.float32(c))) for c in coefficients], np.float32)

  def step(k, total):
    index = len(coefficients) - 2 - k
    return image_ops._df_add(image_ops._df_mul(total, z), (jnp.asarray(hi)[index], jnp.asarray(lo)[index]))

  start = (jnp.full_like(z[0], hi[-1]), jnp.full_like(z[0], lo[-1]))
  return lax.fori_loop(0, len(coefficients) - 1, step, start)


def _cos_sin_df(degrees: jax.Array):
  """(cos, sin) of float32 `degrees`, |d| <= 45, as double-floats (hi, lo): Taylor series to x^15 in double-float
  arithmetic (image_ops' helpers), ~2^-44 relative."""
  x = image_ops._df_mul((degrees, jnp.zeros_like(degrees)), image_ops._df_constant(math.pi / 180))
  x2 = image_ops._df_mul(x, x)
  sin = image_ops._df_mul(x, _df_polynomial_loop(image_ops._SIN_TAYLOR, x2))
  cos = _df_polynomial_loop(image_ops._COS_TAYLOR, x2)
  return cos, sin


def _fix_df(value) -> jax.Array:
  """int32 FIX(v) = floor(65536 v + 1/2) of a double-float v (hi, lo), exact but within ~2^-44 |v| of a boundary."""
  hi, lo = value[0] * _FIX_ONE, value[1] * _FIX_ONE
  s, e = image_ops._two_sum(hi, jnp.float32(0.5))
  n = jnp.floor(s)
  rest = (s - n) + (e + lo)  # s - n exact, in [0, 1)
  return (n + jnp.floor(rest)).astype(jnp.int32)


def rotate_coefficients(degrees: jax.Array, image_size: tuple[int, int]) -> jax.Array:
  """int32 [B, 6]: affine_fixed's coefficients of img.rotate(d) (Image.rotate: inverse matrix a = e = cos d, b = -sin d,
  d' = sin d about (W/2, H/2); a2 = FIX(c + a/2 + b/2) = FIX(W/2 + (1/2 - W/2) cos d + (H/2 - 1/2) sin d), a5 =
  FIX(H/2 + (1/2 - W/2) sin d + (1/2 - H/2) cos d)), in double-float (module docstring: about one rotation in 10^7
  may differ from PIL's float64 by one unit in a coefficient)."""
  height, width = image_size
  cos, sin = _cos_sin_df(jnp.asarray(degrees, jnp.float32))
  neg = lambda v: (-v[0], -v[1])
  scaled = lambda v, c: image_ops._df_mul(v, image_ops._df_constant(c))
  constant = lambda c: image_ops._df_constant(c)
  a2 = image_ops._df_add(
    constant(width / 2), image_ops._df_add(scaled(cos, 0.5 - width / 2), scaled(sin, height / 2 - 0.5))
  )
  a5 = image_ops._df_add(
    constant(height / 2), image_ops._df_add(scaled(sin, 0.5 - width / 2), scaled(cos, 0.5 - height / 2))
  )
  return jnp.stack([_fix_df(cos), _fix_df(neg(sin)), _fix_df(a2), _fix_df(sin), _fix_df(cos), _fix_df(a5)], axis=-1)


def geometric_coefficients(op_ids: jax.Array, values: jax.Array, image_size: tuple[int, int]) -> jax.Array:
  """int32 [B, 6]: each example's fixed-point coefficients (the identity's for non-geometric operations).

  ShearX (1, v, 0, 0, 1, 0): (65536, FIX(v), FIX(1/2 + v/2), 0, 65536, 32768); ShearY likewise on the rows;
  TranslateX: ImagingScaleAffine reads column x + floor(v W + 1/2), i.e. a2 = 65536 floor(v W + 1/2); TranslateY:
  row y + floor(v H + 1/2); Rotate: `rotate_coefficients`. FIX of a float32 v is exact (`_floor_half_up`).
  """
  height, width = image_size
  batch = op_ids.shape[0]
  column = lambda entries: jnp.broadcast_to(jnp.asarray(entries, jnp.int32), (batch,))
  fix_v, half = _floor_half_up(values * _FIX_ONE), _FIX_ONE // 2 + _floor_half_up(values * (_FIX_ONE // 2))
  one, mid, zero = column(_FIX_ONE), column(_FIX_ONE // 2), column(0)
  candidates = {
    "ShearX": (one, fix_v, half, zero, one, mid),
    "ShearY": (one, zero, mid, fix_v, one, half),
    "TranslateX": (one, zero, _FIX_ONE * _floor_half_up_product(width, values), zero, one, mid),
    "TranslateY": (one, zero, mid, zero, one, _FIX_ONE * _floor_half_up_product(height, values)),
  }
  coefficients = jnp.broadcast_to(jnp.asarray(_IDENTITY, jnp.int32), (batch, 6))
  for name, entries in candidates.items():
    coefficients = jnp.where((op_ids == OP_INDEX[name])[:, None], jnp.stack(entries, axis=-1), coefficients)
  rotated = rotate_coefficients(values, image_size)
  return jnp.where((op_ids == OP_INDEX["Rotate"])[:, None], rotated, coefficients)


def pil_affine(images: jax.Array, coefficients: jax.Array) -> jax.Array:
  """PIL's nearest affine transform in 16.16 fixed point (Geometry.c affine_fixed), fill 0, per example: output (y, x)
  reads column (a2 + y a1 + x a0) >> 16 and row (a5 + y a4 + x a3) >> 16 (arithmetic shifts: floors) where both lie
  inside. coefficients: int32 [B, 6]. Exact integer arithmetic."""
  batch, height, width, channels = images.shape
  a = jnp.asarray(coefficients, jnp.int32)[:, :, None, None]
  y = jnp.arange(height, dtype=jnp.int32)[None, :, None]
  x = jnp.arange(width, dtype=jnp.int32)[None, None, :]
  column = (a[:, 2] + y * a[:, 1] + x * a[:, 0]) >> 16
  row = (a[:, 5] + y * a[:, 4] + x * a[:, 3]) >> 16
  inside = (column >= 0) & (column < width) & (row >= 0) & (row < height)
  flat = (jnp.clip(row, 0, height - 1) * width + jnp.clip(column, 0, width - 1)).reshape(batch, -1)
  pixels = images.reshape(batch, height * width, channels)
  gathered = jax.vmap(lambda image, index: image[index])(pixels, flat).reshape(images.shape)
  return jnp.where(inside[..., None], gathered, jnp.uint8(0))


def cutout(images: jax.Array, corners: jax.Array, sides: jax.Array) -> jax.Array:
  """The original's Cutout with its draws: rows y0 .. y0 + side - 1 and columns x0 .. x0 + side - 1 (clipped) set to
  (125, 123, 114) (grey images: 123). corners: int [B, 2] (y0, x0); sides: int [B] (0: unchanged)."""
  height, width, channels = images.shape[1:]
  corners, sides = jnp.asarray(corners, jnp.int32), jnp.asarray(sides, jnp.int32)[:, None]
  rows, columns = jnp.arange(height)[None, :], jnp.arange(width)[None, :]
  in_rows = (rows >= corners[:, :1]) & (rows < corners[:, :1] + sides)
  in_columns = (columns >= corners[:, 1:]) & (columns < corners[:, 1:] + sides)
  hole = in_rows[:, :, None, None] & in_columns[:, None, :, None]
  fill = jnp.asarray(CUTOUT_FILL if channels == 3 else (CUTOUT_FILL_GREY,), jnp.uint8)
  return jnp.where(hole, fill, images)


# ---------------------------------------------------------------------------------------------------------------
# The pool


def apply_stage(images: jax.Array, op_ids: jax.Array, values: jax.Array, *, rounded_grey: bool = False) -> jax.Array:
  """Example b gets operation OP_NAMES[op_ids[b]] with val values[b], as the original's PIL call computes it.

  Args:
    images: uint8 [B, H, W, C], C = 1 or 3. op_ids: int [B], indices into OP_NAMES. values: float32 [B].
    rounded_grey: PIL's grey L with Pillow >= 7.0's rounding (default: Pillow 6.2's truncation, the original's pin).
  """
  image_ops._check_images(images)
  op_ids = jnp.asarray(op_ids, jnp.int32)
  values = jnp.asarray(values, jnp.float32)
  is_op = {name: op_ids == k for k, name in enumerate(OP_NAMES)}
  geometric = jnp.any(jnp.stack([is_op[name] for name in GEOMETRIC_OPS]), axis=0)
  out = image_ops._lookup(_pointwise_table(images, op_ids, values, rounded_grey=rounded_grey), images)
  for selected, result in (
    (geometric, lambda: pil_affine(images, geometric_coefficients(op_ids, values, images.shape[1:3]))),
    (is_op["Color"], lambda: pil_blend(pil_grey(images, rounded=rounded_grey), images, values)),
    (is_op["Sharpness"], lambda: pil_blend(pil_smooth(images), images, values)),
  ):
    out = jnp.where(_expand(selected), result(), out)
  return out


def apply_promix_draws(images: jax.Array, draws: ProMixDraws, *, rounded_grey: bool = False) -> jax.Array:
  """The drawn stages in order (a `lax.scan`), then the Cutout. images: uint8 [B, H, W, C]; rounded_grey as
  `apply_stage`."""
  if draws.op_ids.shape[1]:
    stage = lambda images, per_stage: (apply_stage(images, *per_stage, rounded_grey=rounded_grey), None)
    images = lax.scan(stage, images, (draws.op_ids.T, draws.magnitudes.T))[0]
  return cutout(images, draws.corners, draws.sides)


def promix_randaugment(
  key: jax.Array,
  images: jax.Array,
  indices: jax.Array,
  *,
  num_ops: int = NUM_OPS,
  rounded_grey: bool = False,
) -> jax.Array:
  """ProMix's RandomAugment(num_ops, 5) and its Cutout on uint8 images [B, H, W, C], drawn per example.

  Args:
    key: the batch's PRNG key. images: uint8 [B, H, W, C], C = 1 or 3. indices: int [B] example indices.
    num_ops: n (ProMix: 3). rounded_grey: PIL's grey with Pillow >= 7.0's rounding (default Pillow 6.2's).
  Returns:
    uint8 [B, H, W, C].
  """
  image_ops._check_images(images)
  if tuple(jnp.shape(indices)) != tuple(images.shape[:1]):
    raise ValueError(
      f"indices has shape {tuple(jnp.shape(indices))}; expected one index per image, [{images.shape[0]}]."
    )
  draws = promix_draws(key, indices, image_size=images.shape[1:3], num_ops=num_ops)
  return apply_promix_draws(images, draws, rounded_grey=rounded_grey)
