"""The operations of AutoAugment and RandAugment, and Cutout, on batches of uint8 images (pure jnp, jit-able).

Each operation takes images uint8 [B, H, W, C] (NHWC, C = 1 or 3) and one magnitude per example ([B]), so one
compiled call applies a different magnitude to every image; the result is uint8 [B, H, W, C]. The magnitudes are
those that torchvision's `_apply_op` (torchvision/transforms/autoaugment.py) receives from the policies' tables:
degrees for `rotate`, the shear factor m = tan(shear angle) for `shear_x` / `shear_y`, pixels for the translations
(truncated towards zero, as `int(magnitude)`), a threshold for `solarize`, bits for `posterize` (truncated), and for
`brightness`, `color`, `contrast` and `sharpness` the m of the factor 1 + m. `apply_op` applies a different operation
to each example (`OP_NAMES`), which is what the policies of `noisy_jax.core.autoaugment` call.

Each operation computes what `torchvision.transforms.v2.functional` computes on a uint8 tensor (nearest
interpolation, fill 0), with the same float32 arithmetic in the same order:
  * geometric operations resample through torchvision's inverse affine matrix theta ([B, 2, 3], in pixels about
    the image centre): grid g = (x_c * t_0 + y_c * t_1) + t_2 with t = theta / (W/2 or H/2) and x_c = j - (W - 1)/2,
    source column rint((g + 1) * W/2 - 0.5) (round half to even, `grid_sample(align_corners=False)`), 0 outside;
  * blends (`_blend`) are fma(other, 1 - ratio, x * ratio), clamped to [0, 255] and truncated to uint8: PyTorch's
    `add_(other, alpha=...)` rounds once (a fused multiply-add) on the CPU; the grey image is the same chain
    fma(b, 0.114, fma(g, 0.587, r * 0.2989)), floored.
XLA contracts a * b + c into a fused multiply-add wherever it likes (on the CPU at its default optimisation level;
on GPUs). The code therefore never lets a rounded product meet an addition: products are split into exact partial
products (`_split`: each factor cut into halves of <= 12 significant bits) and sums of exact terms are rounded once
(`_rounded_sum`, Ogita, Rump and Oishi's Sum2). The results do not depend on what the compiler fuses.
Rotation matrices take cos and sin of the angle in double-float arithmetic (`_cos_sin_degrees`), as torchvision
computes them in float64 before rounding to float32.

Where this knowingly differs from torchvision: nowhere measured (tests/test_image_ops.py: every pixel equal). Sum2
can miss the rounded-once sum when the exact value lies within ~2^-47 of a midpoint between floats, and the
double-float cosine within ~2^-44 of one (a pixel off by one level or one position, ~1e-7 per value). PyTorch's own
float32 rounding depends on its CPU kernels (fused multiply-adds in `add_(alpha=...)` where the CPU has them).

References: Cubuk et al., "AutoAugment: Learning Augmentation Strategies from Data", CVPR 2019; Cubuk et al.,
"RandAugment: Practical automated data augmentation with a reduced search space", NeurIPS 2020 workshops / CVPR-W;
DeVries & Taylor, "Improved Regularization of Convolutional Neural Networks with Cutout", 2017.
"""

from __future__ import annotations

import math

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

# The operations of torchvision's RandAugment in its order, then Invert (AutoAugment only).
OP_NAMES = tuple(
  "Identity ShearX ShearY TranslateX TranslateY Rotate Brightness Color Contrast Sharpness Posterize Solarize "
  "AutoContrast Equalize Invert".split()
)
OP_INDEX = {name: index for index, name in enumerate(OP_NAMES)}
GEOMETRIC_OPS = ("ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate")
MAX_SIDE = 4096  # exact partial products of grid coordinates need sides <= 4096 (12 significant bits)


def _check_images(images) -> None:
  if images.ndim != 4 or images.shape[-1] not in (1, 3):
    raise ValueError(f"images must be [B, H, W, C] with C = 1 or 3, got shape {tuple(images.shape)}.")
  if images.dtype != jnp.uint8:
    raise ValueError(f"images must be uint8 (0..255), got {images.dtype}.")
  if max(images.shape[1:3]) > MAX_SIDE:
    raise ValueError(f"image sides must be <= {MAX_SIDE}, got {tuple(images.shape[1:3])}.")


def _per_example(values, batch_size: int, dtype=jnp.float32) -> jax.Array:
  """values as [B] of `dtype` (a scalar is broadcast)."""
  return jnp.broadcast_to(jnp.asarray(values, dtype), (batch_size,))


def _expand(values: jax.Array) -> jax.Array:
  return values[:, None, None, None]


def _to_uint8(values: jax.Array) -> jax.Array:
  """Clamp to [0, 255] and truncate, as torchvision's `.clamp_(0, 255).to(torch.uint8)`."""
  return jnp.clip(values, 0.0, 255.0).astype(jnp.uint8)


# ---------------------------------------------------------------------------------------------------------------
# float32 arithmetic that does not depend on fused multiply-adds


def _split(x: jax.Array) -> tuple[jax.Array, jax.Array]:
  """x = hi + lo exactly, hi = x with its 12 low mantissa bits cleared; each has <= 12 significant bits."""
  hi = lax.bitcast_convert_type(lax.bitcast_convert_type(x, jnp.uint32) & jnp.uint32(0xFFFFF000), jnp.float32)
  return hi, x - hi


def _two_sum(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(s, e) with s = RN(a + b) and s + e = a + b exactly (Knuth's TwoSum; additions only)."""
  s = a + b
  b_part = s - a
  return s, (a - (s - b_part)) + (b - b_part)


def _rounded_sum(*terms: jax.Array) -> jax.Array:
  """RN(sum of terms) for exact float32 terms: Sum2 (cascaded TwoSum, the errors added once at the end)."""
  total, error = terms[0], jnp.float32(0)
  for term in terms[1:]:
    total, term_error = _two_sum(total, term)
    error = error + term_error
  return total + error


def _product(a: jax.Array, b: jax.Array) -> jax.Array:
  """RN(a * b) for `a` with <= 12 significant bits (pixel values, grid coordinates): two exact partial products."""
  b_hi, b_lo = _split(b)
  return a * b_hi + a * b_lo


def _exact_products(a: jax.Array, b: jax.Array) -> tuple[jax.Array, ...]:
  """Four float32 products, each exact, that sum to a * b."""
  a_hi, a_lo = _split(a)
  b_hi, b_lo = _split(b)
  return a_hi * b_hi, a_hi * b_lo, a_lo * b_hi, a_lo * b_lo


def _fma_small(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
  """RN(a * b + c) for `a` with <= 12 significant bits (integer differences of pixels): two exact products."""
  b_hi, b_lo = _split(b)
  return _rounded_sum(c, a * b_hi, a * b_lo)


def _fma(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
  """RN(a * b + c), rounded once as a fused multiply-add: the exact partial products and c, summed by Sum2."""
  return _rounded_sum(c, *_exact_products(a, b))


def _divide(numerator: jax.Array, denominator: jax.Array) -> jax.Array:
  """RN(n / d), the IEEE quotient. XLA turns a division by a constant into a product with its rounded reciprocal
  (an ulp off for some n); of q = n / d and its two neighbours this keeps the one with the smallest exact residual
  |n - q d| (ties: the even one). A power-of-two d needs none of it."""
  if isinstance(denominator, (int, float, np.floating)) and math.frexp(float(denominator))[0] == 0.5:
    return numerator * np.float32(1 / denominator)  # exact
  numerator, denominator = jnp.broadcast_arrays(numerator, jnp.asarray(denominator, jnp.float32))
  quotient = numerator / denominator
  candidates = jnp.stack([quotient, jnp.nextafter(quotient, -jnp.inf), jnp.nextafter(quotient, jnp.inf)])
  residual = jnp.abs(_rounded_sum(numerator, *(-p for p in _exact_products(candidates, denominator))))
  even = (lax.bitcast_convert_type(candidates, jnp.uint32) & 1) == 0
  best, best_residual = candidates[0], residual[0]
  for k in (1, 2):
    better = (residual[k] < best_residual) | ((residual[k] == best_residual) & even[k])
    best, best_residual = jnp.where(better, candidates[k], best), jnp.where(better, residual[k], best_residual)
  return best


def _truncated_quotient(numerator: jax.Array, divisor: jax.Array) -> jax.Array:
  """trunc(RN(n / d)) for integers 0 <= n < 4096 and d > 0 (XLA's n / d may be n * RN(1 / d), an ulp off).

  With k = round(n / d): RN(n / d) >= k exactly when n / d >= k - u/2, u the spacing of floats below k (a tie
  rounds to k, whose low bits are 0), i.e. when n - k d + (u/2) d >= 0: four exact terms, whose sign Sum2 gets right.
  Then the result is k, else k - 1.
  """
  numerator, divisor = jnp.broadcast_arrays(numerator, divisor)
  nearest = jnp.round(numerator / divisor)
  half_spacing = (nearest - jnp.nextafter(nearest, jnp.float32(0))) * 0.5
  divisor_hi, divisor_lo = _split(divisor)
  margin = _rounded_sum(numerator, -(nearest * divisor_hi), -(nearest * divisor_lo), half_spacing * divisor)
  return jnp.where(margin >= 0, nearest, nearest - 1)


# Double-float numbers (hi, lo), hi + lo ~ the value to ~2^-44, for cos and sin of a few angles per batch.


def _fast_two_sum(a, b):
  s = a + b
  return s, b - (s - a)


def _df_mul(x, y):
  (x_hi, x_lo), (y_hi, y_lo) = x, y
  a_hi, a_lo = _split(x_hi)
  b_hi, b_lo = _split(y_hi)
  s, e1 = _two_sum(a_hi * b_hi, a_hi * b_lo)
  s, e2 = _two_sum(s, a_lo * b_hi)
  return _fast_two_sum(s, (e1 + e2) + a_lo * b_lo + (x_hi * y_lo + x_lo * y_hi))


def _df_add(x, y):
  s, e = _two_sum(x[0], y[0])
  return _fast_two_sum(s, e + (x[1] + y[1]))


def _df_constant(value: float):
  hi = np.float32(value)
  return jnp.float32(hi), jnp.float32(value - float(hi))


def _df_polynomial(coefficients, z):
  """sum_k coefficients[k] z^k by Horner's rule in double-float."""
  total = _df_constant(coefficients[-1])
  for coefficient in coefficients[-2::-1]:
    total = _df_add(_df_mul(total, z), _df_constant(coefficient))
  return total


# sin x = x sum_k s_k x^2k and cos x = sum_k c_k x^2k to k = 7: truncation < 2e-14 for |x| <= pi/4.
_SIN_TAYLOR = [(-1) ** k / math.factorial(2 * k + 1) for k in range(8)]
_COS_TAYLOR = [(-1) ** k / math.factorial(2 * k) for k in range(8)]


def _cos_sin_degrees(degrees: jax.Array) -> tuple[jax.Array, jax.Array]:
  """float32 (cos, sin) of `degrees` [B], correctly rounded but for ~2^-20 of the angles.

  torchvision computes them in float64 and rounds to float32; float32 jnp.cos / jnp.sin differ from that by an ulp
  for about a quarter of the angles. Here: q = round(d / 90), r = d - 90 q (exact, |r| <= 45), x = r pi / 180 and
  the Taylor series of sin x and cos x in double-float, then the quadrant q mod 4. Multiples of 90 degrees give
  exact 0 and +-1 (float64 leaves ~1e-16 there: the same resampling).
  """
  quadrant = jnp.round(degrees / 90)
  reduced = degrees - 90 * quadrant  # exact for |d| < 2^24
  x = _df_mul((reduced, jnp.zeros_like(reduced)), _df_constant(math.pi / 180))
  x2 = _df_mul(x, x)
  sin_x = _df_mul(x, _df_polynomial(_SIN_TAYLOR, x2))
  cos_x = _df_polynomial(_COS_TAYLOR, x2)
  sin_r, cos_r = sin_x[0] + sin_x[1], cos_x[0] + cos_x[1]
  q = jnp.mod(quadrant, 4).astype(jnp.int32)
  sin = jnp.select([q == 0, q == 1, q == 2], [sin_r, cos_r, -sin_r], -cos_r)
  cos = jnp.select([q == 0, q == 1, q == 2], [cos_r, -sin_r, -cos_r], sin_r)
  return cos, sin


# ---------------------------------------------------------------------------------------------------------------
# Geometry: nearest resampling through torchvision's inverse affine matrices


def _matrices(rows) -> jax.Array:
  """[B, 2, 3] from two rows of three [B] arrays (or scalars)."""
  rows = [[jnp.asarray(entry, jnp.float32) for entry in row] for row in rows]
  batch = jnp.broadcast_shapes(*[entry.shape for row in rows for entry in row])
  return jnp.stack([jnp.stack([jnp.broadcast_to(e, batch) for e in row], -1) for row in rows], -2)


def rotation_matrices(degrees: jax.Array) -> jax.Array:
  """torchvision's inverse matrix of `rotate(img, d)` (about the centre): [[cos d, -sin d, 0], [sin d, cos d, 0]]."""
  cos, sin = _cos_sin_degrees(jnp.asarray(degrees, jnp.float32))
  return _matrices([[cos, -sin, 0.0], [sin, cos, 0.0]])


def shear_x_matrices(shear: jax.Array, height: int) -> jax.Array:
  """AutoAugment's ShearX (affine, shear angle atan(m) degrees-converted, center [0, 0]): [[1, m, m H/2], [0, 1, 0]]."""
  shear = jnp.asarray(shear, jnp.float32)
  return _matrices([[1.0, shear, shear * jnp.float32(height / 2)], [0.0, 1.0, 0.0]])


def shear_y_matrices(shear: jax.Array, width: int) -> jax.Array:
  """AutoAugment's ShearY (center [0, 0]): [[1, 0, 0], [m, 1, m W/2]]."""
  shear = jnp.asarray(shear, jnp.float32)
  return _matrices([[1.0, 0.0, 0.0], [shear, 1.0, shear * jnp.float32(width / 2)]])


def translation_matrices(pixels_x: jax.Array, pixels_y: jax.Array) -> jax.Array:
  """Translation by (int(tx), int(ty)) pixels (truncated towards zero, as `_apply_op`): [[1, 0, -tx], [0, 1, -ty]]."""
  tx, ty = jnp.trunc(jnp.asarray(pixels_x, jnp.float32)), jnp.trunc(jnp.asarray(pixels_y, jnp.float32))
  return _matrices([[1.0, 0.0, -tx], [0.0, 1.0, -ty]])


def _source_pixels(theta: jax.Array, height: int, width: int) -> jax.Array:
  """float32 [B, 2, H, W]: the (column, row) each output pixel reads, as torchvision computes them.

  Per axis of size n: t = theta_row / (n / 2); g = (x_c t_0 + y_c t_1) + t_2 (the order of torchvision's bmm, each
  product rounded); then grid_sample's unnormalisation (g + 1) n/2 - 0.5, rounded half to even.
  """
  half = jnp.asarray(np.float32([width / 2, height / 2]))[None, :, None, None]  # [1, 2, 1, 1]
  x_axis = jnp.arange(width, dtype=jnp.float32) - jnp.float32((width - 1) / 2)
  y_axis = jnp.arange(height, dtype=jnp.float32) - jnp.float32((height - 1) / 2)
  # [B, 2, 3]; one divisor for square images, a plain (exact) product when it is a power of two.
  scaled = _divide(theta, width / 2) if width == height else _divide(theta, half[..., 0])
  along_x = _product(x_axis[None, None, None, :], scaled[:, :, 0, None, None])  # [B, 2, 1, W]
  along_y = _product(y_axis[None, None, :, None], scaled[:, :, 1, None, None])  # [B, 2, H, 1]
  grid = (along_x + along_y) + scaled[:, :, 2, None, None]
  return jnp.round(_product(half, grid + 1) - 0.5)


def affine(images: jax.Array, inverse_matrices: jax.Array) -> jax.Array:
  """Resamples each image through its inverse affine matrix, nearest neighbour, 0 outside (torchvision's tensor path).

  Output pixel (i, j) of image b reads input pixel rint of theta_b [j - (W-1)/2, i - (H-1)/2, 1] + ((W-1)/2,
  (H-1)/2), computed in float32 as torchvision's `_affine_grid` and `grid_sample(mode="nearest",
  padding_mode="zeros", align_corners=False)` compute it (see `_source_pixels`).

  Args:
    images: uint8 [B, H, W, C].
    inverse_matrices: [B, 2, 3] float32, torchvision's `_get_inverse_affine_matrix` for each example (output pixel
      to input pixel, in pixels about the image centre).
  Returns:
    uint8 [B, H, W, C].
  """
  _check_images(images)
  batch, height, width, channels = images.shape
  source = _source_pixels(jnp.asarray(inverse_matrices, jnp.float32), height, width)
  column, row = source[:, 0], source[:, 1]
  inside = (column >= 0) & (column <= width - 1) & (row >= 0) & (row <= height - 1)
  flat_index = jnp.clip(row, 0, height - 1).astype(jnp.int32) * width + jnp.clip(column, 0, width - 1).astype(jnp.int32)
  pixels = images.reshape(batch, height * width, channels)
  gathered = jax.vmap(lambda image, index: image[index])(pixels, flat_index.reshape(batch, -1))
  return jnp.where(inside[..., None], gathered.reshape(images.shape), jnp.uint8(0))


def rotate(images: jax.Array, degrees: jax.Array) -> jax.Array:
  """torchvision `F.rotate(img, d)` (counter-clockwise, about the image centre, nearest, fill 0), d per example [B]."""
  _check_images(images)
  return affine(images, rotation_matrices(_per_example(degrees, images.shape[0])))


def shear_x(images: jax.Array, shear: jax.Array) -> jax.Array:
  """AutoAugment's ShearX: F.affine(shear=[degrees(atan(m)), 0], center=[0, 0]); x_in = x_out + m (y_out + 1/2)."""
  _check_images(images)
  return affine(images, shear_x_matrices(_per_example(shear, images.shape[0]), images.shape[1]))


def shear_y(images: jax.Array, shear: jax.Array) -> jax.Array:
  """AutoAugment's ShearY: F.affine(shear=[0, degrees(atan(m))], center=[0, 0]); y_in = y_out + m (x_out + 1/2)."""
  _check_images(images)
  return affine(images, shear_y_matrices(_per_example(shear, images.shape[0]), images.shape[2]))


def translate_x(images: jax.Array, pixels: jax.Array) -> jax.Array:
  """AutoAugment's TranslateX: shift right by int(pixels) (towards zero; negative = left), fill 0."""
  _check_images(images)
  return affine(images, translation_matrices(_per_example(pixels, images.shape[0]), 0.0))


def translate_y(images: jax.Array, pixels: jax.Array) -> jax.Array:
  """AutoAugment's TranslateY: shift down by int(pixels) (negative = up), fill 0."""
  _check_images(images)
  return affine(images, translation_matrices(0.0, _per_example(pixels, images.shape[0])))


# ---------------------------------------------------------------------------------------------------------------
# Colour


def identity(images: jax.Array) -> jax.Array:
  """The image unchanged (RandAugment's Identity)."""
  _check_images(images)
  return images


def invert(images: jax.Array) -> jax.Array:
  """255 - x (torchvision `F.invert`)."""
  _check_images(images)
  return jnp.uint8(255) - images


def solarize(images: jax.Array, threshold: jax.Array) -> jax.Array:
  """255 - x where x >= threshold (compared in float32), else x (torchvision `F.solarize`); threshold [B]."""
  _check_images(images)
  threshold = _expand(_per_example(threshold, images.shape[0]))
  return jnp.where(images.astype(jnp.float32) >= threshold, jnp.uint8(255) - images, images)


def posterize(images: jax.Array, bits: jax.Array) -> jax.Array:
  """Keeps the int(bits) high bits of each value: x & (2^bits - 1) << (8 - bits) (torchvision `F.posterize`).

  bits [B], truncated towards zero as `_apply_op`'s int(magnitude), clipped to [0, 8] (8 = unchanged).
  """
  _check_images(images)
  bits = jnp.clip(jnp.trunc(_per_example(bits, images.shape[0])), 0, 8).astype(jnp.int32)
  mask = (((1 << bits) - 1) << (8 - bits)).astype(jnp.uint8)
  return images & _expand(mask)


def _levels(batch: int, channels: int) -> jax.Array:
  """uint8 [B, 1, 256, C]: the 256 levels as a one-row image per example and channel (tables of pointwise ops)."""
  return jnp.broadcast_to(jnp.arange(256, dtype=jnp.uint8)[None, None, :, None], (batch, 1, 256, channels))


def _lookup(tables: jax.Array, images: jax.Array) -> jax.Array:
  """out[b, i, j, c] = tables[b, 0, images[b, i, j, c], c]: a pointwise operation given by its table [B, 1, 256, C]."""
  channels = images.shape[-1]
  offsets = jnp.arange(images.shape[0])[:, None, None, None] * (256 * channels) + jnp.arange(channels)
  return tables.reshape(-1)[offsets + images.astype(jnp.int32) * channels]


def _autocontrast_table(images: jax.Array) -> jax.Array:
  """uint8 [B, 1, 256, C]: autocontrast of every level under each image's and channel's (min, max)."""
  values = images.astype(jnp.float32)
  low = values.min(axis=(1, 2), keepdims=True)
  high = values.max(axis=(1, 2), keepdims=True)
  constant = high == low
  inverse_scale = jnp.where(constant, 1.0, (high - low) * np.float32(1.0 / 255.0))
  levels = _levels(*images.shape[::3]).astype(jnp.float32)
  shifted = jnp.maximum(levels - jnp.where(constant, 0.0, low), 0.0)  # levels below the minimum are never looked up
  return jnp.minimum(_truncated_quotient(shifted, inverse_scale), 255).astype(jnp.uint8)


def autocontrast(images: jax.Array) -> jax.Array:
  """Per image and channel, stretches [min, max] to [0, 255] (torchvision `F.autocontrast`).

  out = trunc(clamp((x - min) / ((max - min) * (1/255)), 0, 255)) in float32; a constant channel is unchanged.
  """
  _check_images(images)
  return _lookup(_autocontrast_table(images), images)


def _equalize_table(images: jax.Array) -> jax.Array:
  """uint8 [B, 1, 256, C]: the equalisation lookup table of each image and channel (see `equalize`)."""
  batch, height, width, channels = images.shape
  values = images.astype(jnp.int32)
  batch_index = jnp.arange(batch)[:, None, None, None]
  histogram = jnp.zeros((batch, 256, channels), jnp.int32).at[batch_index, values, jnp.arange(channels)].add(1)
  levels = jnp.arange(256)[:, None]
  top_level = jnp.max(jnp.where(histogram > 0, levels, 0), axis=1, keepdims=True)
  step = (height * width - jnp.take_along_axis(histogram, top_level, axis=1)) // 255  # [B, 1, C]
  cumulative = jnp.cumsum(histogram, axis=1)
  table = jnp.clip((cumulative[:, :-1] + step // 2) // jnp.maximum(step, 1), 0, 255)
  table = jnp.where(step > 0, jnp.concatenate([jnp.zeros_like(table[:, :1]), table], axis=1), levels)
  return table.astype(jnp.uint8)[:, None]


def equalize(images: jax.Array) -> jax.Array:
  """Histogram equalisation per image and channel with PIL's lookup table (torchvision `F.equalize`).

  With hist the 256-bin histogram of the N = H W values, cum its cumulative sum and step = (N - hist[max value]) //
  255: lut[0] = 0, lut[k] = clamp((cum[k-1] + step // 2) // step, 0, 255); a channel with step = 0 is unchanged.
  Integer arithmetic, exact.
  """
  _check_images(images)
  return _lookup(_equalize_table(images), images)


def _grey(images: jax.Array) -> jax.Array:
  """float32 [B, H, W, 1]: floor(fma(b, 0.114, fma(g, 0.587, r * 0.2989))), torchvision's uint8 grey image."""
  r, g, b = (images[..., k : k + 1].astype(jnp.float32) for k in range(3))
  grey = _fma_small(b, jnp.float32(0.114), _fma_small(g, jnp.float32(0.587), _product(r, jnp.float32(0.2989))))
  return jnp.floor(grey)


def _blend(images: jax.Array, other: jax.Array, magnitude: jax.Array, *, other_is_integer: bool) -> jax.Array:
  """torchvision's `_blend(img, other, 1 + m)` on uint8: trunc(clamp(fma(other, -m, x * RN(1 + m)), 0, 255)).

  The factor 1 + m is rounded to float32 (torch multiplies a float32 tensor by it) while 1 - (1 + m) = -m is exact
  in float64 and so in float32: `magnitude` is m, not the factor. other broadcasts against images; integer-valued
  (the grey image) it needs two exact partial products instead of four.
  """
  m = _expand(magnitude)
  scaled = _product(images.astype(jnp.float32), 1.0 + m)
  fma = _fma_small if other_is_integer else _fma
  return _to_uint8(fma(jnp.broadcast_to(other, images.shape), jnp.broadcast_to(-m, images.shape), scaled))


def brightness(images: jax.Array, magnitude: jax.Array) -> jax.Array:
  """torchvision `F.adjust_brightness(img, 1 + m)`: trunc(clamp(x * (1 + m), 0, 255)); m [B]."""
  _check_images(images)
  factor = _expand(1.0 + _per_example(magnitude, images.shape[0]))
  return _to_uint8(_product(images.astype(jnp.float32), factor))


def color(images: jax.Array, magnitude: jax.Array) -> jax.Array:
  """torchvision `F.adjust_saturation(img, 1 + m)`: blend with the floored grey image; grey images are unchanged."""
  _check_images(images)
  if images.shape[-1] == 1:
    return images
  return _blend(images, _grey(images), _per_example(magnitude, images.shape[0]), other_is_integer=True)


def _mean_grey(images: jax.Array) -> jax.Array:
  """[B, 1, 1, 1] float32: the mean of the floored grey image (of the image itself if C = 1), RN(sum / (H W)).

  The sum of integers below 2^24 is exact in any order; it is taken in int32 (a float32 sum fused with the grey
  image ran 80x slower on the CPU).
  """
  grey = _grey(images).astype(jnp.int32) if images.shape[-1] == 3 else images.astype(jnp.int32)
  total = grey.sum(axis=(1, 2, 3), keepdims=True).astype(jnp.float32)
  return _divide(total, grey.shape[1] * grey.shape[2])


def contrast(images: jax.Array, magnitude: jax.Array) -> jax.Array:
  """torchvision `F.adjust_contrast(img, 1 + m)`: blend with the image's mean grey level; m [B]."""
  _check_images(images)
  return _blend(images, _mean_grey(images), _per_example(magnitude, images.shape[0]), other_is_integer=False)


def _blurred(images: jax.Array) -> jax.Array:
  """Interior of the image smoothed by [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13 and rounded: [B, H-2, W-2, C] float32.

  round((sum of the 8 neighbours + 5 x) / 13) in integers: the quotient is never within 1/26 of a half, so the
  float32 convolution rounds to the same integers.
  """
  values = images.astype(jnp.int32)
  height, width = images.shape[1:3]
  total = 4 * values[:, 1:-1, 1:-1]
  for di in range(3):
    for dj in range(3):
      total = total + values[:, di : di + height - 2, dj : dj + width - 2]
  return ((2 * total + 13) // 26).astype(jnp.float32)


def sharpness(images: jax.Array, magnitude: jax.Array) -> jax.Array:
  """torchvision `F.adjust_sharpness(img, 1 + m)`: interior pixels fma(blurred - x, -m, x), clamped and truncated.

  Border pixels (first and last row and column) are kept, as torchvision keeps them, by a mask (XLA:CPU miscompiled
  an in-place interior write in larger programs); images with a side <= 2 are returned unchanged.
  """
  images = jnp.asarray(images)
  _check_images(images)
  if min(images.shape[1:3]) <= 2:
    return images
  m = _expand(_per_example(magnitude, images.shape[0]))
  values = images.astype(jnp.float32)
  blurred = jnp.pad(_blurred(images), ((0, 0), (1, 1), (1, 1), (0, 0)))
  sharpened = _to_uint8(_fma_small(blurred - values, -m, values))
  rows, columns = (np.arange(n) % (n - 1) != 0 for n in images.shape[1:3])  # off the first and last row / column
  return jnp.where((rows[:, None] & columns[None, :])[None, :, :, None], sharpened, images)


# ---------------------------------------------------------------------------------------------------------------
# Cutout


def cutout_hole(height: int, width: int, centers: jax.Array, size: int) -> jax.Array:
  """bool [B, H, W, 1]: each example's Cutout square of side `size` centred on centers[b] = (row, column), clipped
  at the border: rows max(cy - size // 2, 0) .. min(cy + size // 2, H) - 1 and the same columns, as the original
  Cutout's mask (so an odd size gives a hole of side size - 1, as there)."""
  centers = jnp.asarray(centers, jnp.int32)
  half = size // 2
  rows = jnp.arange(height)[None, :]
  columns = jnp.arange(width)[None, :]
  in_rows = (rows >= centers[:, :1] - half) & (rows < centers[:, :1] + half)  # [B, H]
  in_columns = (columns >= centers[:, 1:] - half) & (columns < centers[:, 1:] + half)  # [B, W]
  return in_rows[:, :, None, None] & in_columns[:, None, :, None]


def cutout(images: jax.Array, centers: jax.Array, size: int) -> jax.Array:
  """Zeroes a square of side `size` centred on each example's centre, clipped at the border (DeVries & Taylor;
  the square is `cutout_hole`'s).

  Args:
    images: uint8 [B, H, W, C].
    centers: int [B, 2], (row, column) of each hole's centre.
    size: the side of the hole, an int >= 0 (0 = unchanged).
  """
  _check_images(images)
  hole = cutout_hole(images.shape[1], images.shape[2], centers, size)
  return jnp.where(hole, jnp.uint8(0), images)


# ---------------------------------------------------------------------------------------------------------------
# One operation per example


def apply_op(images: jax.Array, op_ids: jax.Array, magnitudes: jax.Array) -> jax.Array:
  """Example b gets operation OP_NAMES[op_ids[b]] with magnitudes[b]: torchvision's `_apply_op`, batched.

  The five geometric operations share one resampling (identity matrix for the other examples); the seven pointwise
  ones one table lookup; Color and Sharpness are computed on the batch; each example takes its own result. Its cost
  is about that of every operation once.

  Args:
    images: uint8 [B, H, W, C].
    op_ids: int [B], indices into OP_NAMES.
    magnitudes: float [B], the signed magnitude `_apply_op` receives (ignored by operations that take none).
  Returns:
    uint8 [B, H, W, C].
  """
  _check_images(images)
  batch, height, width, channels = images.shape
  op_ids = _per_example(op_ids, batch, jnp.int32)
  m = _per_example(magnitudes, batch)
  is_op = {name: op_ids == index for index, name in enumerate(OP_NAMES)}

  matrices = jnp.broadcast_to(jnp.eye(2, 3, dtype=jnp.float32), (batch, 2, 3))
  for name, build in (
    ("ShearX", lambda: shear_x_matrices(m, height)),
    ("ShearY", lambda: shear_y_matrices(m, width)),
    ("TranslateX", lambda: translation_matrices(m, 0.0)),
    ("TranslateY", lambda: translation_matrices(0.0, m)),
    ("Rotate", lambda: rotation_matrices(m)),
  ):
    matrices = jnp.where(is_op[name][:, None, None], build(), matrices)
  geometric = jnp.any(jnp.stack([is_op[name] for name in GEOMETRIC_OPS]), axis=0)

  # Pointwise operations act on each level alike: their tables [B, 1, 256, C] (Contrast: a blend with the mean grey
  # level). Each example's table is chosen by a one-hot contraction, which XLA computes once, where a select fused
  # into the lookup recomputed every table per pixel (2.5x slower on the CPU); then one lookup.
  levels = _levels(batch, channels)
  tables = [
    ("Brightness", brightness(levels, m)),
    ("Contrast", _blend(levels, _mean_grey(images), m, other_is_integer=False)),
    ("Posterize", posterize(levels, m)),
    ("Solarize", solarize(levels, m)),
    ("AutoContrast", _autocontrast_table(images)),
    ("Equalize", _equalize_table(images)),
    ("Invert", invert(levels)),
  ]
  chosen = jnp.stack([is_op[name] for name, _ in tables], axis=-1)  # [B, K]
  one_hot = jnp.concatenate([~jnp.any(chosen, axis=-1, keepdims=True), chosen], axis=-1).astype(jnp.float32)
  stacked = jnp.stack([levels] + [values for _, values in tables], axis=1)[:, :, 0].astype(jnp.float32)
  table = jnp.einsum("bk,bkvc->bvc", one_hot, stacked, precision=lax.Precision.HIGHEST)[:, None].astype(jnp.uint8)

  candidates = [
    (geometric, affine(images, matrices)),
    (is_op["Color"], color(images, m)),
    (is_op["Sharpness"], sharpness(images, m)),
    (jnp.ones_like(geometric), _lookup(table, images)),
  ]
  out = candidates[-1][1]
  for selected, result in candidates[-2::-1]:
    out = jnp.where(_expand(selected), result, out)
  return out
