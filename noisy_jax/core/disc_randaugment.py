"""DISC's strong view on device: its own RandAugment pool (`RandAugmentwogeo`) and FixMatch's CutoutAbs, with PIL's
arithmetic, drawn per example.

The original (JackYFL/DISC@a21e910, datasets/randaugment.py) gives every CIFAR training image a strong view
`TransformFixMatch_CIFAR10.strong` (l. 261-284) = RandomHorizontalFlip, RandomCrop(32, 4, reflect), then
`RandAugmentwogeo(n=2, m=5)` (l. 242-258; CIFAR-100: `TransformFixMatch_CIFAR100`, m=10), on the PIL image, before
ToTensor and Normalize. RandAugmentwogeo, per image:
  for each of n stages: op = random.choices(pool) (uniform over the 16 of `new_augment_pool`, l. 184-203, with
    replacement); level = np.random.randint(1, m) (uniform on 1..m-1, drawn whether or not the stage runs); the
    stage runs when random.random() < 0.5; the signed operations (Rotate, ShearX/Y, SolarizeAdd, TranslateX/Y)
    negate their value when a further random.random() < 0.5;
  then CutoutAbs(img, int(W * 0.15)) (l. 256-257): 4 pixels on CIFAR's 32, 4 on mnist5k's 28 (int(4.2)).
Each operation's value from its level L (l. 146-151: _float_parameter(L, max) = float(L) max / 10,
_int_parameter(L, max) = int(L max / 10), plus the pool's bias) is computed on the host as Python computes it
(`op_value`); at m = 5 (levels 1..4):
  Brightness / Color / Contrast / Sharpness  factor 0.18 L + 0.1 (0.28 .. 0.82: they all weaken the image)
  Posterize   4 + int(0.4 L) bits;  Solarize  threshold 256 - int(25.6 L);  SolarizeAdd  +-int(11 L), then solarize
              at 128;  Rotate  +-int(3 L) degrees;  ShearX/Y  +-0.01 L (level 1 moves no pixel of a 32-pixel image);
              TranslateX/Y  +-int(0.005 L x side) pixels (0 at levels 1..4 on 32 or 28 pixels: the identity there;
              1 pixel from level 7 (32) or 8 (28) of CIFAR-100's m = 10);
  Cutout      CutoutAbs of side int(0.01 L x min(H, W)) (0 or 1 on CIFAR: one grey pixel, or 2x2);
  AutoContrast, Equalize, Invert  no value.

The operations compute what PIL 13 computes (tests/test_disc_randaugment.py checks every pixel against the original's
PIL calls), which differs from torchvision's tensor operations (noisy_jax.core.image_ops) in several places:
  * enhance blends (Image.blend, libImaging/Blend.c): trunc(clamp(d + RN32(alpha (x - d)), 0, 255)) in float32,
    alpha = float32(factor), two roundings, where torchvision rounds a fused x f + d (1 - f) once;
  * Color's grey image is PIL's L = (19595 R + 38470 G + 7471 B + 2^15) >> 16 (torchvision: floor of 0.2989 R +
    0.587 G + 0.114 B); Contrast's degenerate level is int(mean(L) + 0.5), an integer (torchvision: the float mean);
  * AutoContrast's table is int(i scale + offset) in float64 with scale = 255 / (hi - lo), offset = -lo scale
    (ImageOps.autocontrast): the exact floor((i - lo) 255 / (hi - lo)) except at 12,094 of the 2,828,800 (lo, hi, i)
    where the exact value is an integer k and float64 rounding gives k - 1; those are tabulated on the host
    (`_autocontrast_corrections`) and subtracted on the device;
  * geometric operations use PIL's nearest affine transform in 16.16 fixed point (libImaging/Geometry.c,
    affine_fixed: a_k = floor(65536 a_k + 1/2) of the inverse matrix, the offsets a2 + a0/2 + a1/2 and a5 + a3/2 +
    a4/2, source column (a2 + x a0 + y a1) >> 16), fill 0; Rotate's matrix is Image.rotate's (round(cos, 15), ...,
    about (W/2, H/2)). Translations run through ImagingScaleAffine in PIL (a1 = a3 = 0), which reads column x + v,
    the same pixel as the fixed-point formula; torchvision instead resamples about the centre in float32;
  * Sharpness's degenerate image is PIL's SMOOTH filter (round((8 neighbours + 5 x) / 13), border copied), as
    torchvision's, but blended as above.
Equalize, Invert, Posterize and Solarize equal torchvision's. Grey images ([..., 1]): PIL's operations all run on
mode "L" (Color is the identity there) except CutoutAbs, whose 3-tuple fill (127, 127, 127) PIL 13 rejects for an "L"
image (TypeError); here a grey image's hole is 127. The original also cannot run SolarizeAdd on NumPy >= 1.24 (`np.int`,
l. 122); the operation here is what it computes on older NumPy.

CutoutAbs (l. 54-67, FixMatch's): centre u ~ uniform(0, W), v ~ uniform(0, H) (floats); x0 = int(max(0, u - s/2)),
y0 likewise, x1 = int(min(W, x0 + s)), y1 likewise; ImageDraw.rectangle((x0, y0, x1, y1)) fills both ends, so the
hole is s + 1 pixels wide (shifted inside at the top/left border, clipped at the bottom/right), grey 127 on the uint8
image. Here the centre is drawn at half-pixel resolution, c uniform on 0..2W-1, and x0 = max(0, floor((c - s) / 2)),
which has exactly the distribution of int(max(0, u - s/2)) for integer s (`cutout_corners`). Its mean area at s = 4
is (157/32)^2 = 24.07 pixels on 32 x 32 and (137/28)^2 = 23.94 on 28 x 28: 5 x 5, less what is clipped at the
bottom and right.

Randomness: example b's draws are 32-bit words bits(fold_in(key, indices[b]), (6 n + 2,)) (as
noisy_jax.core.autoaugment): stage k reads words 6k .. 6k + 5: op = w mod 16 (exact), level = 1 + w mod (m - 1),
runs when the top bit of the third is set, negated when that of the fourth is, its Cutout corner (if drawn) from
the last two (rows, columns: c = w mod 2H, 2W); the final CutoutAbs from the last two words. `disc_draws` returns
them (`DiscDraws`), `apply_disc_draws` applies them, so a view can be inspected and replayed.

Implementation: every stage computes all 16 operations on the batch (one lookup table for the 9 pointwise ones, one
gather for the 5 geometric ones, Color, Sharpness and the Cutout hole) and keeps each example's own, in a
`lax.scan` over stages.
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

PARAMETER_MAX = 10  # randaugment.py l. 24
# new_augment_pool (randaugment.py l. 184-203): (operation, max_v, bias), in its order.
POOL = (
  ("AutoContrast", None, None),
  ("Brightness", 1.8, 0.1),
  ("Color", 1.8, 0.1),
  ("Contrast", 1.8, 0.1),
  ("Cutout", 0.1, 0),
  ("Equalize", None, None),
  ("Invert", None, None),
  ("Posterize", 4, 4),
  ("Rotate", 30, 0),
  ("Sharpness", 1.8, 0.1),
  ("ShearX", 0.1, 0),
  ("ShearY", 0.1, 0),
  ("Solarize", 256, 0),
  ("SolarizeAdd", 110, 0),
  ("TranslateX", 0.05, 0),
  ("TranslateY", 0.05, 0),
)
OP_NAMES = tuple(op for op, _, _ in POOL)
OP_INDEX = {op: k for k, op in enumerate(OP_NAMES)}
SIGNED_OPS = ("Rotate", "ShearX", "ShearY", "SolarizeAdd", "TranslateX", "TranslateY")
GEOMETRIC_OPS = ("Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY")
FACTOR_OPS = ("Brightness", "Color", "Contrast", "Sharpness")
NUM_OPS = 2  # RandAugmentwogeo(n=2, ...) in every CIFAR transform
MAGNITUDE = 5  # TransformFixMatch_CIFAR10: m=5 (levels 1..4); TransformFixMatch_CIFAR100: m=10
CUTOUT_FRACTION = 0.15  # RandAugmentwogeo: CutoutAbs(img, int(img.size[0] * 0.15))
CUTOUT_FILL = 127  # CutoutAbs: color = (127, 127, 127)
SOLARIZE_ADD_THRESHOLD = 128  # SolarizeAdd's default threshold
WORDS_PER_STAGE = 6


class DiscDraws(NamedTuple):
  """What RandAugmentwogeo drew for a batch; S = num_ops.

  op_ids: int32 [B, S], indices into OP_NAMES. levels: int32 [B, S] in 1..m-1. applied: bool [B, S] (the stage runs).
  negated: bool [B, S] (the sign draw; used by SIGNED_OPS only). op_corners: int32 [B, S, 2], the (top, left) corner
  of the pool's Cutout hole, had the stage drawn Cutout. corners: int32 [B, 2], the final CutoutAbs's (top, left).
  """

  op_ids: jax.Array
  levels: jax.Array
  applied: jax.Array
  negated: jax.Array
  op_corners: jax.Array
  corners: jax.Array


# ---------------------------------------------------------------------------------------------------------------
# Levels -> the values the original's operations pass to PIL (host, float64 as Python)


def float_parameter(level: int, max_v: float) -> float:
  """randaugment.py `_float_parameter`: float(level) * max_v / 10."""
  return float(level) * max_v / PARAMETER_MAX


def int_parameter(level: int, max_v: float) -> int:
  """randaugment.py `_int_parameter`: int(level * max_v / 10)."""
  return int(level * max_v / PARAMETER_MAX)


def op_value(op: str, level: int, image_size: tuple[int, int], negated: bool = False) -> float:
  """The value operation `op` of the pool computes from `level` and passes to PIL, as the original computes it.

  Factor operations: the enhance factor; Posterize: bits; Rotate: degrees; ShearX/Y: the shear; Solarize: the
  threshold 256 - v; SolarizeAdd: the added value; TranslateX/Y: pixels, int(+-v x side) (side: W, H); Cutout: the
  side s of CutoutAbs (int(v min(H, W))); 0 for AutoContrast, Equalize, Invert. Signed operations negate the value
  (before the translations' int, as there: int truncates towards zero, so the same magnitude either way).
  """
  height, width = image_size
  max_v, bias = dict((name, (m, b)) for name, m, b in POOL)[op]
  sign = -1 if (negated and op in SIGNED_OPS) else 1
  if op in FACTOR_OPS:
    return float_parameter(level, max_v) + bias
  if op == "Posterize":
    return float(int_parameter(level, max_v) + bias)
  if op == "Rotate":
    return float(sign * (int_parameter(level, max_v) + bias))
  if op in ("ShearX", "ShearY"):
    return sign * (float_parameter(level, max_v) + bias)
  if op == "Solarize":
    return float(256 - (int_parameter(level, max_v) + bias))
  if op == "SolarizeAdd":
    return float(sign * (int_parameter(level, max_v) + bias))
  if op in ("TranslateX", "TranslateY"):
    return float(int(sign * (float_parameter(level, max_v) + bias) * (width if op == "TranslateX" else height)))
  if op == "Cutout":
    return float(int((float_parameter(level, max_v) + bias) * min(height, width)))
  return 0.0


def _fix(value: float) -> int:
  """libImaging/Geometry.c FIX: FLOOR(v * 65536.0 + 0.5), 16.16 fixed point."""
  return math.floor(value * 65536.0 + 0.5)


def pil_affine_matrix(op: str, value: float, image_size: tuple[int, int]) -> tuple[float, ...]:
  """The inverse affine data (a, b, c, d, e, f) PIL's transform receives: x_in = a x + b y + c, y_in = d x + e y + f.

  ShearX (1, v, 0, 0, 1, 0), ShearY (1, 0, 0, v, 1, 0), TranslateX (1, 0, v, 0, 1, 0), TranslateY (1, 0, 0, 0, 1, v)
  (randaugment.py l. 99-143); Rotate: Image.rotate(v)'s matrix (PIL 13: the angle mod 360, round(cos, 15) etc.,
  about (W/2, H/2)); anything else the identity.
  """
  height, width = image_size
  if op == "ShearX":
    return (1.0, value, 0.0, 0.0, 1.0, 0.0)
  if op == "ShearY":
    return (1.0, 0.0, 0.0, value, 1.0, 0.0)
  if op == "TranslateX":
    return (1.0, 0.0, value, 0.0, 1.0, 0.0)
  if op == "TranslateY":
    return (1.0, 0.0, 0.0, 0.0, 1.0, value)
  if op == "Rotate":
    angle = -math.radians(value % 360.0)
    a, b = round(math.cos(angle), 15), round(math.sin(angle), 15)
    d, e = round(-math.sin(angle), 15), round(math.cos(angle), 15)
    cx, cy = width / 2, height / 2
    c = a * -cx + b * -cy + 0.0 + cx
    f = d * -cx + e * -cy + 0.0 + cy
    return (a, b, c, d, e, f)
  return (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)


def pil_fixed_coefficients(matrix: tuple[float, ...]) -> tuple[int, ...]:
  """affine_fixed's (a0, a1, a2, a3, a4, a5): FIX of a, b, c + a/2 + b/2, d, e, f + d/2 + e/2."""
  a, b, c, d, e, f = matrix
  return (_fix(a), _fix(b), _fix(c + a * 0.5 + b * 0.5), _fix(d), _fix(e), _fix(f + d * 0.5 + e * 0.5))


class _Tables(NamedTuple):
  factors: np.ndarray  # float32 [16, m]: enhance factor / bits / threshold / SolarizeAdd value / Cutout side
  coefficients: np.ndarray  # int32 [16, m, 2, 6]: fixed-point affine coefficients, [..., sign, :]


def _check_pool(num_ops, magnitude) -> None:
  if isinstance(num_ops, bool) or not isinstance(num_ops, numbers.Integral) or num_ops < 0:
    raise ValueError(f"disc_randaugment num_ops={num_ops!r} must be an int >= 0 (RandAugmentwogeo's n).")
  if isinstance(magnitude, bool) or not isinstance(magnitude, numbers.Integral) or not 2 <= magnitude <= 10:
    raise ValueError(
      f"disc_randaugment magnitude={magnitude!r} must be an int in [2, 10] (RandAugmentwogeo's m; levels 1..m-1)."
    )


@functools.lru_cache(maxsize=None)
def _tables(magnitude: int, image_size: tuple[int, int]) -> _Tables:
  factors = np.zeros((len(OP_NAMES), magnitude), np.float32)
  coefficients = np.zeros((len(OP_NAMES), magnitude, 2, 6), np.int32)
  for k, op in enumerate(OP_NAMES):
    for level in range(1, magnitude):
      factors[k, level] = op_value(op, level, image_size)
      for sign in (0, 1):
        matrix = pil_affine_matrix(op, op_value(op, level, image_size, bool(sign)), image_size)
        coefficients[k, level, sign] = pil_fixed_coefficients(matrix)
  return _Tables(factors, coefficients)


# ---------------------------------------------------------------------------------------------------------------
# PIL's operations on uint8 batches [B, H, W, C]


def _expand(values: jax.Array) -> jax.Array:
  return values[:, None, None, None]


def pil_affine(images: jax.Array, coefficients: jax.Array) -> jax.Array:
  """PIL's nearest affine transform in 16.16 fixed point (Geometry.c affine_fixed), fill 0, per example.

  Output (y, x) reads column (a2 + y a1 + x a0) >> 16 and row (a5 + y a4 + x a3) >> 16 (arithmetic shifts: floor)
  where both lie inside, else 0. coefficients: int32 [B, 6], `pil_fixed_coefficients`. Exact integer arithmetic.
  """
  batch, height, width, channels = images.shape
  a = jnp.asarray(coefficients, jnp.int32)
  y = jnp.arange(height, dtype=jnp.int32)[None, :, None]
  x = jnp.arange(width, dtype=jnp.int32)[None, None, :]
  column = (a[:, 2, None, None] + y * a[:, 1, None, None] + x * a[:, 0, None, None]) >> 16
  row = (a[:, 5, None, None] + y * a[:, 4, None, None] + x * a[:, 3, None, None]) >> 16
  inside = (column >= 0) & (column < width) & (row >= 0) & (row < height)
  flat = jnp.clip(row, 0, height - 1) * width + jnp.clip(column, 0, width - 1)
  pixels = images.reshape(batch, height * width, channels)
  gathered = jax.vmap(lambda image, index: image[index])(pixels, flat.reshape(batch, -1)).reshape(images.shape)
  return jnp.where(inside[..., None], gathered, jnp.uint8(0))


def pil_blend(degenerate: jax.Array, images: jax.Array, alpha: jax.Array) -> jax.Array:
  """Image.blend(degenerate, image, alpha) on uint8 (Blend.c): trunc(clamp(d + RN(alpha (x - d)), 0, 255)) in float32.

  degenerate, images: integer-valued arrays that broadcast; alpha: float32 [B] (PIL rounds the factor to float32).
  The product is rounded on its own (image_ops._product: no fused multiply-add), then the sum.
  """
  d = jnp.asarray(degenerate, jnp.float32)
  x = jnp.asarray(images, jnp.float32)
  product = image_ops._product(x - d, _expand(jnp.asarray(alpha, jnp.float32)))
  return jnp.clip(d + product, 0.0, 255.0).astype(jnp.uint8)


def pil_grey(images: jax.Array) -> jax.Array:
  """int32 [B, H, W, 1]: PIL's convert('L'), (19595 R + 38470 G + 7471 B + 2^15) >> 16; a grey image itself."""
  values = images.astype(jnp.int32)
  if images.shape[-1] == 1:
    return values
  r, g, b = values[..., 0:1], values[..., 1:2], values[..., 2:3]
  return (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16


def pil_color(images: jax.Array, factor: jax.Array) -> jax.Array:
  """ImageEnhance.Color(img).enhance(f): blend with the grey image (identity on grey images)."""
  if images.shape[-1] == 1:
    return images
  return pil_blend(pil_grey(images), images, factor)


def pil_contrast_level(images: jax.Array) -> jax.Array:
  """int32 [B]: ImageEnhance.Contrast's grey level int(mean(L) + 0.5) = (2 sum + N) // (2 N), exact."""
  grey = pil_grey(images)
  n = grey.shape[1] * grey.shape[2]
  return (2 * grey.sum(axis=(1, 2, 3)) + n) // (2 * n)


def pil_sharpness(images: jax.Array, factor: jax.Array) -> jax.Array:
  """ImageEnhance.Sharpness(img).enhance(f): blend with PIL's SMOOTH filter (its border pixels copied)."""
  if min(images.shape[1:3]) <= 2:
    return images
  rows, columns = (np.arange(n) % (n - 1) != 0 for n in images.shape[1:3])  # off the border: a mask, not an
  interior = (rows[:, None] & columns[None, :])[None, :, :, None]  # in-place write (see image_ops.sharpness)
  blurred = jnp.pad(image_ops._blurred(images), ((0, 0), (1, 1), (1, 1), (0, 0)))
  return pil_blend(jnp.where(interior, blurred, images.astype(jnp.float32)), images, factor)


def _levels(batch: int, channels: int) -> jax.Array:
  """int32 [B, 256, C]: each level, per example and channel."""
  return jnp.broadcast_to(jnp.arange(256, dtype=jnp.int32)[None, :, None], (batch, 256, channels))


@functools.lru_cache(maxsize=None)
def _autocontrast_corrections() -> tuple[np.ndarray, np.ndarray, int]:
  """Where PIL's float64 autocontrast table is one below the exact floor: CSR over key = 256 lo + hi.

  Returns (offsets int32 [65537], levels int32 [n], the largest count per key). For lo < hi: scale = 255 / (hi - lo),
  offset = -lo * scale, PIL's lut[i] = int(i * scale + offset) (float64, each operation rounded, as Python).
  """
  levels = np.arange(256, dtype=np.float64)
  rows: list[np.ndarray] = []
  counts = np.zeros(256 * 256, np.int32)
  for lo in range(255):
    highs = np.arange(lo + 1, 256)
    scale = 255.0 / (highs - lo).astype(np.float64)
    offset = -lo * scale
    pil = np.trunc(levels[None, :] * scale[:, None] + offset[:, None])
    exact = np.floor_divide((np.arange(256)[None, :] - lo) * 255, (highs - lo)[:, None])
    wrong = (pil != exact) & (levels[None, :] >= lo) & (levels[None, :] <= highs[:, None])
    for h_index, high in enumerate(highs):
      found = np.nonzero(wrong[h_index])[0]
      if found.size:
        counts[lo * 256 + high] = found.size
        rows.append(found)
  offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
  entries = np.concatenate(rows).astype(np.int32) if rows else np.zeros((0,), np.int32)
  return offsets, entries, int(counts.max())


def pil_autocontrast_table(images: jax.Array) -> jax.Array:
  """int32 [B, 256, C]: ImageOps.autocontrast's table per image and channel (cutoff 0).

  lo, hi = the channel's smallest and largest value; hi <= lo: identity; else clamp(floor((i - lo) 255 / (hi - lo)),
  0, 255) less one at PIL's float64 misroundings (`_autocontrast_corrections`).
  """
  batch, _, _, channels = images.shape
  values = images.astype(jnp.int32)
  lo = values.min(axis=(1, 2))[:, None, :]  # [B, 1, C]
  hi = values.max(axis=(1, 2))[:, None, :]
  levels = _levels(batch, channels)
  span = jnp.maximum(hi - lo, 1)
  table = jnp.clip(jnp.floor_divide((levels - lo) * 255, span), 0, 255)
  offsets, entries, width = _autocontrast_corrections()
  key = (lo * 256 + hi)[:, 0, :]  # [B, C]
  start = jnp.asarray(offsets)[key]
  count = jnp.asarray(offsets)[jnp.minimum(key + 1, 256 * 256)] - start
  slots = jnp.arange(width)
  wrong_levels = jnp.asarray(entries)[jnp.minimum(start[..., None] + slots, max(len(entries) - 1, 0))]  # [B, C, K]
  wrong_levels = jnp.where(slots < count[..., None], wrong_levels, -1)
  correction = (wrong_levels[:, :, None, :] == jnp.arange(256)[None, None, :, None]).any(-1)  # [B, C, 256]
  table = table - jnp.swapaxes(correction, 1, 2).astype(jnp.int32)
  return jnp.where(hi > lo, table, levels)


def pil_equalize_table(images: jax.Array) -> jax.Array:
  """int32 [B, 256, C]: ImageOps.equalize's table per image and channel, which torchvision's is
  (image_ops._equalize_table: step = (N - h[top level]) // 255, lut[i] = min((step // 2 + cum[i - 1]) // step, 255);
  step 0: identity)."""
  return image_ops._equalize_table(images)[:, 0].astype(jnp.int32)


def _pointwise_table(images: jax.Array, op_ids: jax.Array, values: jax.Array) -> jax.Array:
  """uint8 [B, 256, C]: the table of each example's pointwise operation (identity for the others)."""
  batch, _, _, channels = images.shape
  levels = _levels(batch, channels)
  v = values[:, None, None]
  solarize_add = jnp.clip(levels + v.astype(jnp.int32), 0, 255)
  posterize_bits = v.astype(jnp.int32)
  candidates = {
    "AutoContrast": lambda: pil_autocontrast_table(images),
    "Brightness": lambda: pil_blend(0, levels[:, None], values)[:, 0].astype(jnp.int32),
    "Contrast": lambda: pil_blend(_expand(pil_contrast_level(images)), levels[:, None], values)[:, 0].astype(jnp.int32),
    "Equalize": lambda: pil_equalize_table(images),
    "Invert": lambda: 255 - levels,
    "Posterize": lambda: levels & ((0xFF << (8 - posterize_bits)) & 0xFF),
    "Solarize": lambda: jnp.where(levels < v, levels, 255 - levels),
    "SolarizeAdd": lambda: jnp.where(solarize_add < SOLARIZE_ADD_THRESHOLD, solarize_add, 255 - solarize_add),
  }
  table = levels
  for name, build in candidates.items():
    table = jnp.where((op_ids == OP_INDEX[name])[:, None, None], build(), table)
  return table.astype(jnp.uint8)


def _lookup(table: jax.Array, images: jax.Array) -> jax.Array:
  """out[b, i, j, c] = table[b, images[b, i, j, c], c]."""
  return jnp.take_along_axis(table[:, None], images.astype(jnp.int32), axis=2)


def _hole(height: int, width: int, corners: jax.Array, sizes: jax.Array) -> jax.Array:
  """bool [B, H, W, 1]: rows top .. top + s and columns left .. left + s, both ends included (PIL's rectangle),
  clipped at the bottom and right."""
  corners = jnp.asarray(corners, jnp.int32)
  sizes = jnp.asarray(sizes, jnp.int32)[:, None]
  rows, columns = jnp.arange(height)[None, :], jnp.arange(width)[None, :]
  in_rows = (rows >= corners[:, :1]) & (rows <= corners[:, :1] + sizes)
  in_columns = (columns >= corners[:, 1:]) & (columns <= corners[:, 1:] + sizes)
  return in_rows[:, :, None, None] & in_columns[:, None, :, None]


def cutout_abs(images: jax.Array, corners: jax.Array, size) -> jax.Array:
  """FixMatch's CutoutAbs with its corners drawn: grey 127 over rows y0 .. min(H, y0 + s) and columns x0 ..
  min(W, x0 + s), both ends included (clipped to the image). corners: int [B, 2] (y0, x0); size: s, int or [B]."""
  sizes = jnp.broadcast_to(jnp.asarray(size, jnp.int32), images.shape[:1])
  hole = _hole(images.shape[1], images.shape[2], corners, sizes)
  return jnp.where(hole, jnp.uint8(CUTOUT_FILL), images)


def cutout_corners(words: jax.Array, size, image_size: tuple[int, int]) -> jax.Array:
  """int32 [..., 2]: CutoutAbs's (y0, x0) from two words [..., 2] (rows, columns) and the side s (int or [...]).

  c = w mod 2n is the centre at half-pixel resolution (uniform on 0..2n-1, the interval [c/2, c/2 + 1/2) of
  uniform(0, n)); y0 = max(0, floor((c - s) / 2)) = int(max(0, u - s/2)) for every u in that interval.
  """
  n = np.array(image_size, np.uint32)
  centre = (words % (2 * n)).astype(jnp.int32)
  size = jnp.asarray(size, jnp.int32)[..., None]
  return jnp.maximum(jnp.floor_divide(centre - size, 2), 0)


# ---------------------------------------------------------------------------------------------------------------
# Draws and the pool


def _example_bits(key: jax.Array, indices: jax.Array, num_words: int) -> jax.Array:
  """uint32 [B, num_words]: bits(fold_in(key, indices[b]), (num_words,)) (noisy_jax.core.autoaugment's)."""
  indices = jnp.asarray(indices)
  return jax.vmap(lambda index: jax.random.bits(jax.random.fold_in(key, index), (num_words,), jnp.uint32))(indices)


def final_cutout_size(image_size: tuple[int, int]) -> int:
  """RandAugmentwogeo's CutoutAbs side: int(W * 0.15) (img.size[0] is the width): 4 for 32 and for 28 pixels."""
  return int(image_size[1] * CUTOUT_FRACTION)


def disc_draws(
  key: jax.Array,
  indices: jax.Array,
  *,
  image_size: tuple[int, int],
  num_ops: int = NUM_OPS,
  magnitude: int = MAGNITUDE,
) -> DiscDraws:
  """RandAugmentwogeo(num_ops, magnitude)'s choices for the examples `indices` [B] under `key` (module docstring).

  Args:
    key: the batch's PRNG key. indices: int [B], example indices in the training set.
    image_size: (H, W). num_ops: n (2). magnitude: m (5: levels 1..4; CIFAR-100's 10).
  """
  _check_pool(num_ops, magnitude)
  tables = _tables(magnitude, tuple(int(s) for s in image_size))
  words = _example_bits(key, indices, WORDS_PER_STAGE * num_ops + 2)
  stages = words[:, : WORDS_PER_STAGE * num_ops].reshape(words.shape[0], num_ops, WORDS_PER_STAGE)
  op_ids = (stages[..., 0] % np.uint32(len(OP_NAMES))).astype(jnp.int32)
  levels = (stages[..., 1] % np.uint32(magnitude - 1)).astype(jnp.int32) + 1
  cutout_sides = jnp.asarray(tables.factors[OP_INDEX["Cutout"]]).astype(jnp.int32)[levels]
  return DiscDraws(
    op_ids=op_ids,
    levels=levels,
    applied=(stages[..., 2] >> 31).astype(jnp.bool_),
    negated=(stages[..., 3] >> 31).astype(jnp.bool_),
    op_corners=cutout_corners(stages[..., 4:6], cutout_sides, image_size),
    corners=cutout_corners(words[:, -2:], final_cutout_size(image_size), image_size),
  )


def apply_stage(
  images: jax.Array, op_ids: jax.Array, values: jax.Array, coefficients: jax.Array, corners: jax.Array
) -> jax.Array:
  """Example b gets pool operation OP_NAMES[op_ids[b]] (an index outside the pool: unchanged).

  values: float32 [B], `op_value` (factor, bits, threshold, added value, Cutout side); coefficients: int32 [B, 6]
  fixed-point affine coefficients (identity for non-geometric operations); corners: int [B, 2], the pool Cutout's.
  """
  image_ops._check_images(images)
  is_op = {name: op_ids == k for k, name in enumerate(OP_NAMES)}
  geometric = jnp.any(jnp.stack([is_op[name] for name in GEOMETRIC_OPS]), axis=0)
  hole = _hole(images.shape[1], images.shape[2], corners, values.astype(jnp.int32))
  out = _lookup(_pointwise_table(images, op_ids, values), images)
  for selected, result in (
    (geometric, lambda: pil_affine(images, coefficients)),
    (is_op["Color"], lambda: pil_color(images, values)),
    (is_op["Sharpness"], lambda: pil_sharpness(images, values)),
    (is_op["Cutout"], lambda: jnp.where(hole, jnp.uint8(CUTOUT_FILL), images)),
  ):
    out = jnp.where(_expand(selected), result(), out)
  return out


def apply_disc_draws(images: jax.Array, draws: DiscDraws, *, magnitude: int = MAGNITUDE) -> jax.Array:
  """The drawn stages in order (a `lax.scan`), each where applied, then the final CutoutAbs."""
  image_size = tuple(int(s) for s in images.shape[1:3])
  tables = _tables(magnitude, image_size)
  values = jnp.asarray(tables.factors)[draws.op_ids, draws.levels]  # [B, S]
  coefficients = jnp.asarray(tables.coefficients)[draws.op_ids, draws.levels, draws.negated.astype(jnp.int32)]
  values = jnp.where(draws.negated & jnp.isin(draws.op_ids, jnp.array([OP_INDEX["SolarizeAdd"]])), -values, values)
  op_ids = jnp.where(draws.applied, draws.op_ids, len(OP_NAMES))  # not applied: no operation

  def stage(images, per_stage):
    return apply_stage(images, *per_stage), None

  if draws.op_ids.shape[1]:
    per_stage = (op_ids.T, values.T, jnp.swapaxes(coefficients, 0, 1), jnp.swapaxes(draws.op_corners, 0, 1))
    images = lax.scan(stage, images, per_stage)[0]
  return cutout_abs(images, draws.corners, final_cutout_size(image_size))


def disc_randaugment(
  key: jax.Array, images: jax.Array, indices: jax.Array, *, num_ops: int = NUM_OPS, magnitude: int = MAGNITUDE
) -> jax.Array:
  """RandAugmentwogeo(num_ops, magnitude) and its CutoutAbs on uint8 images [B, H, W, C], drawn per example.

  Args:
    key: the batch's PRNG key. images: uint8 [B, H, W, C], C = 1 or 3. indices: int [B] example indices.
    num_ops: n (2). magnitude: m (5 for CIFAR-10, 10 for CIFAR-100).
  Returns:
    uint8 [B, H, W, C].
  """
  image_ops._check_images(images)
  if tuple(jnp.shape(indices)) != tuple(images.shape[:1]):
    raise ValueError(f"indices has shape {tuple(jnp.shape(indices))}; expected [{images.shape[0]}].")
  draws = disc_draws(key, indices, image_size=images.shape[1:3], num_ops=num_ops, magnitude=magnitude)
  return apply_disc_draws(images, draws, magnitude=magnitude)
