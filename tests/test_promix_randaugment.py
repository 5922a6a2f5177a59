"""Tests for noisy_jax.core.promix_randaugment: ProMix's RandomAugment pool and Cutout against the original's PIL code.

The original's operations (Justherozen/ProMix@40d8378 utils/randaug.py l. 9-135) are transcribed below, with their
randomness (Cutout's centre, RandomAugment's choices) made arguments so that they can be replayed on our draws. What
is asserted: every operation of the pool equals PIL pixel for pixel on random and structured uint8 images, 32x32 RGB
and 28x28 grey, at magnitudes over each operation's whole range and its ends; Color and Contrast with Pillow 6.2's
grey (the original's pin, emulated: Pillow 13 is installed) and with Pillow 13's own; the magnitudes for every one of
the 2^24 uniforms; the fixed-point coefficients PIL derives from them (all 2^24 for shear and translations, 20,000
rotations); the Cutout (sizes, corners, clipping, fill) against ImageDraw and NumPy's uniform(W); the draws'
distributions by counting; the whole pool replayed with PIL; an image depends on (key, index) only; the config.
"""

from __future__ import annotations

import math
import random

import jax
import jax.numpy as jnp
import numpy as np
import PIL
from PIL import Image
import PIL.ImageDraw
import PIL.ImageEnhance
import PIL.ImageOps
import PIL.ImageStat
import pytest

from noisy_jax.core import autoaugment
from noisy_jax.core import promix_randaugment as pra

KEY = jax.random.key(20260528)
TOLERANCE_SD = 5.0
UNIFORM_STEPS = 2**24


# ---------------------------------------------------------------------------------------------------------------
# The original, transcribed (utils/randaug.py l. 9-135); CutoutAbs takes its centre (np.random.uniform(w),
# np.random.uniform(h)) as an argument, and its fill on grey images is ours (PIL rejects the 3-tuple: see below).


def AutoContrast(img, _):
  return PIL.ImageOps.autocontrast(img)


def Brightness(img, v):
  assert v >= 0.0
  return PIL.ImageEnhance.Brightness(img).enhance(v)


def Color(img, v):
  assert v >= 0.0
  return PIL.ImageEnhance.Color(img).enhance(v)


def Contrast(img, v):
  assert v >= 0.0
  return PIL.ImageEnhance.Contrast(img).enhance(v)


def Equalize(img, _):
  return PIL.ImageOps.equalize(img)


def Identity(img, v):
  return img


def Posterize(img, v):  # [4, 8]
  v = int(v)
  v = max(1, v)
  return PIL.ImageOps.posterize(img, v)


def Rotate(img, v):  # [-30, 30]
  return img.rotate(v)


def Sharpness(img, v):  # [0.1,1.9]
  assert v >= 0.0
  return PIL.ImageEnhance.Sharpness(img).enhance(v)


def ShearX(img, v):  # [-0.3, 0.3]
  return img.transform(img.size, PIL.Image.AFFINE, (1, v, 0, 0, 1, 0))


def ShearY(img, v):  # [-0.3, 0.3]
  return img.transform(img.size, PIL.Image.AFFINE, (1, 0, 0, v, 1, 0))


def TranslateX(img, v):  # [-150, 150] => percentage: [-0.45, 0.45]
  v = v * img.size[0]
  return img.transform(img.size, PIL.Image.AFFINE, (1, 0, v, 0, 1, 0))


def TranslateY(img, v):  # [-150, 150] => percentage: [-0.45, 0.45]
  v = v * img.size[1]
  return img.transform(img.size, PIL.Image.AFFINE, (1, 0, 0, 0, 1, v))


def Solarize(img, v):  # [0, 256]
  assert 0 <= v <= 256
  return PIL.ImageOps.solarize(img, v)


def Cutout(img, v, centre):  # [0, 60] => percentage: [0, 0.2] => change to [0, 0.5]
  assert 0.0 <= v <= 0.5
  if v <= 0.0:
    return img
  v = v * img.size[0]
  return CutoutAbs(img, v, centre)


def CutoutAbs(img, v, centre):  # [0, 60] => percentage: [0, 0.2]
  if v < 0:
    return img
  w, h = img.size
  x0, y0 = centre  # np.random.uniform(w), np.random.uniform(h)
  x0 = int(max(0, x0 - v / 2.0))
  y0 = int(max(0, y0 - v / 2.0))
  x1 = min(w, x0 + v)
  y1 = min(h, y0 + v)
  xy = (x0, y0, x1, y1)
  color = (125, 123, 114) if img.mode == "RGB" else pra.CUTOUT_FILL_GREY
  img = img.copy()
  PIL.ImageDraw.Draw(img).rectangle(xy, color)
  return img


def augment_list():
  return [
    (AutoContrast, 0, 1),
    (Brightness, 0.05, 0.95),
    (Color, 0.05, 0.95),
    (Contrast, 0.05, 0.95),
    (Equalize, 0, 1),
    (Identity, 0, 1),
    (Posterize, 4, 8),
    (Rotate, -30, 30),
    (Sharpness, 0.05, 0.95),
    (ShearX, -0.3, 0.3),
    (ShearY, -0.3, 0.3),
    (Solarize, 0, 256),
    (TranslateX, -0.3, 0.3),
    (TranslateY, -0.3, 0.3),
  ]


def random_augment(img, choices, uniforms, cutout_uniform, centre):
  """RandomAugment.__call__ (l. 165-172) with its draws given: random.choices' picks, the random.random() of each
  val and of cutout_val, NumPy's centre."""
  ops = [augment_list()[k] for k in choices]
  for (op, min_val, max_val), u in zip(ops, uniforms):
    val = min_val + float(max_val - min_val) * u
    img = op(img, val)
  cutout_val = cutout_uniform * 0.5
  img = Cutout(img, cutout_val, centre)
  return img


ORIGINAL = {op.__name__: op for op, _, _ in augment_list()}


# Pillow 6.2 (the original's requirements.txt) converts RGB to L with (19595 R + 38470 G + 7471 B) >> 16
# (libImaging/Convert.c L24, no rounding term); Pillow >= 7.0 adds 2^15. Its ImageEnhance.Color / Contrast, built on
# that grey, and Image.blend (Blend.c, unchanged since) on Pillow 13:


def _grey_pillow62(img):
  rgb = np.asarray(img).astype(np.int64)
  return Image.fromarray(((rgb[..., 0] * 19595 + rgb[..., 1] * 38470 + rgb[..., 2] * 7471) >> 16).astype(np.uint8))


def color_pillow62(img, v):
  degenerate = img if img.mode == "L" else _grey_pillow62(img).convert(img.mode)
  return Image.blend(degenerate, img, v)


def contrast_pillow62(img, v):
  grey = img if img.mode == "L" else _grey_pillow62(img)
  mean = int(PIL.ImageStat.Stat(grey).mean[0] + 0.5)
  return Image.blend(Image.new("L", img.size, mean).convert(img.mode), img, v)


# ---------------------------------------------------------------------------------------------------------------
# Images and helpers


def _pil(image: np.ndarray) -> Image.Image:
  return Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image)


def _array(img: Image.Image, channels: int) -> np.ndarray:
  out = np.asarray(img)
  return out[..., None] if channels == 1 else out


def _images(channels: int, size: int, seed: int = 0) -> np.ndarray:
  """uint8 [16, size, size, C]: uniform noise (8), low-range noise, constant, two levels, a gradient, a blob, a
  saturated image, a checkerboard, a single bright pixel."""
  rng = np.random.default_rng(seed)
  shape = (size, size, channels)
  ramp = np.broadcast_to(np.linspace(0, 255, size).astype(np.uint8)[None, :, None], shape)
  yy, xx = np.mgrid[:size, :size]
  blob = np.exp(-((yy - size / 2) ** 2 + (xx - size / 2.5) ** 2) / (size / 4) ** 2) * 255
  blob = np.broadcast_to(blob.astype(np.uint8)[..., None], shape)
  checker = np.broadcast_to((((yy // 4 + xx // 4) % 2) * 200 + 30).astype(np.uint8)[..., None], shape)
  dot = np.zeros(shape, np.uint8)
  dot[size // 3, size // 2] = 250
  images = [rng.integers(0, 256, shape) for _ in range(8)]
  images += [rng.integers(60, 90, shape), np.full(shape, 77), np.where(rng.random(shape) < 0.5, 12, 240)]
  images += [ramp, blob, np.where(rng.random(shape) < 0.5, 0, 255), checker, dot]
  return np.stack([np.asarray(image, np.uint8) for image in images])


IMAGE_SETS = {"rgb32": (3, 32), "grey28": (1, 28)}


def _uniform_grid(count: int, seed: int) -> np.ndarray:
  """int32 [count]: 24-bit uniforms k (u = k 2^-24) with both ends, 0 and 2^24 - 1, and the middle."""
  rng = np.random.default_rng(seed)
  return np.concatenate([[0, UNIFORM_STEPS - 1, UNIFORM_STEPS // 2], rng.integers(0, UNIFORM_STEPS, count - 3)])


_apply_stage = jax.jit(pra.apply_stage, static_argnames="rounded_grey")


def _device_and_pil(op: str, images: np.ndarray, values: np.ndarray, *, rounded_grey: bool, reference):
  """Our operation and `reference(img, float(val))` on every image at every val: (ours, PIL's), [V, B, H, W, C]."""
  num_values, batch = len(values), len(images)
  tiled = np.tile(images, (num_values, 1, 1, 1))
  values_b = np.repeat(values.astype(np.float32), batch)
  ops = np.full(tiled.shape[0], pra.OP_INDEX[op], np.int32)
  ours = np.asarray(
    _apply_stage(jnp.asarray(tiled), jnp.asarray(ops), jnp.asarray(values_b), rounded_grey=rounded_grey)
  )
  channels = images.shape[-1]
  pil = np.stack([_array(reference(_pil(image), float(v)), channels) for image, v in zip(tiled, values_b)])
  shape = (num_values, batch) + images.shape[1:]
  return ours.reshape(shape), pil.reshape(shape)


def _values(op: str, count: int, seed: int) -> np.ndarray:
  """float32 [count]: the operation's vals for uniforms over its range, both ends included (`pra.stage_values`)."""
  k = _uniform_grid(count, seed)
  return np.asarray(pra.stage_values(jnp.full(k.shape, pra.OP_INDEX[op], jnp.int32), jnp.asarray(k, jnp.int32)))


# ---------------------------------------------------------------------------------------------------------------
# Operations against PIL


@pytest.mark.parametrize("image_set", IMAGE_SETS)
@pytest.mark.parametrize("op", pra.OP_NAMES)
def test_each_operation_equals_the_originals_pil_call(op, image_set):
  """Every operation of the pool, pixel for pixel, at 12 vals over its range (its ends included) on 16 images; Color
  and Contrast here with Pillow 13's rounded grey, as installed (the default's Pillow 6.2 grey: the next test)."""
  channels, size = IMAGE_SETS[image_set]
  images = _images(channels, size, seed=len(op))
  values = _values(op, 12, seed=len(op) + channels)
  ours, pil = _device_and_pil(op, images, values, rounded_grey=True, reference=ORIGINAL[op])
  wrong = np.argwhere(np.any(ours != pil, axis=(2, 3, 4)))
  assert wrong.size == 0, f"{op} {image_set}: (val, image) differ at {[(values[v], i) for v, i in wrong[:5]]}"
  if op not in ("Identity",) and not (op == "Color" and channels == 1):
    assert np.any(ours != images[None]), f"{op} changed nothing: the comparison would not see a wrong operation"


@pytest.mark.parametrize("op, pillow62", [("Color", color_pillow62), ("Contrast", contrast_pillow62)])
def test_color_and_contrast_use_pillow62s_grey_by_default(op, pillow62):
  """Default (rounded_grey=False): the original's Pillow 6.2 grey, (19595 R + 38470 G + 7471 B) >> 16, then PIL's
  blend; it differs from Pillow 13's (rounded) on these images, so the two comparisons tell them apart."""
  images = _images(3, 32, seed=7)
  values = _values(op, 8, seed=3)
  ours, pil62 = _device_and_pil(op, images, values, rounded_grey=False, reference=pillow62)
  np.testing.assert_array_equal(ours, pil62)
  _, pil13 = _device_and_pil(op, images, values, rounded_grey=False, reference=ORIGINAL[op])
  assert np.any(ours != pil13)
  np.testing.assert_array_equal(  # grey images: no conversion, both versions agree
    *_device_and_pil(op, _images(1, 28), values, rounded_grey=False, reference=pillow62)
  )


def test_grey_of_the_fill_and_pillows_refusal_on_grey_images():
  """The L of (125, 123, 114) is 122.57: 123 with Pillow >= 7.0's rounding (installed), 122 with Pillow 6.2's
  truncation; ours is 123, its nearest level. The original's 3-tuple fill on an "L" image is refused (Pillow 6.2 too:
  its getink parses the tuple with format "L"), so its Cutout cannot run on grey images."""
  r, g, b = pra.CUTOUT_FILL
  assert ((r * 19595 + g * 38470 + b * 7471) >> 16, (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16) == (122, 123)
  assert round((r * 19595 + g * 38470 + b * 7471) / 65536) == pra.CUTOUT_FILL_GREY
  assert Image.new("RGB", (1, 1), pra.CUTOUT_FILL).convert("L").getpixel((0, 0)) == pra.CUTOUT_FILL_GREY
  with pytest.raises(TypeError):
    PIL.ImageDraw.Draw(Image.new("L", (8, 8))).rectangle((1, 1, 3, 3), pra.CUTOUT_FILL)


def test_autocontrast_misroundings_are_pils():
  """The table of PIL's float64 misroundings: the exact floor except there, one below; PIL's own autocontrast agrees
  on one-row images that hold lo, hi and every level between, for 40 (lo, hi) of the table and four others."""
  keys = pra._autocontrast_misroundings()  # pylint: disable=protected-access
  assert keys.size == 12_094 and np.all(np.diff(keys) > 0)
  rng = np.random.default_rng(1)
  pairs = [(0, 255), (0, 254), (3, 252), (17, 85)] + [divmod(int(key) // 256, 256) for key in rng.choice(keys, 40)]
  for lo, hi in pairs:
    row = np.arange(lo, hi + 1, dtype=np.uint8)[None, :, None]
    table = np.asarray(pra.pil_autocontrast_table(jnp.asarray(row[None])))[0, :, 0]
    pil = np.asarray(PIL.ImageOps.autocontrast(Image.fromarray(row[..., 0])))[0]
    np.testing.assert_array_equal(table[lo : hi + 1], pil)
  assert np.isin(keys // 256, [lo * 256 + hi for lo, hi in pairs]).sum() >= 40


# ---------------------------------------------------------------------------------------------------------------
# Magnitudes and the coefficients PIL derives from them


def _all_uniforms() -> np.ndarray:
  return np.arange(UNIFORM_STEPS, dtype=np.int32)


def test_stage_values_for_every_uniform():
  """val = RN32(min + (max - min) u), u = k 2^-24, for all 2^24 k and every range of the pool (float64 holds the
  sum exactly; NumPy rounds it once): the ends are min and float32(max) at most, monotone in k."""
  k = _all_uniforms()
  for name, low, high in pra.POOL:
    if name in ("Equalize", "Identity", "Color", "Contrast", "Sharpness", "ShearY", "TranslateX", "TranslateY"):
      continue  # the same (min, max) as AutoContrast, Brightness and ShearX
    ours = np.asarray(jax.jit(pra.stage_values)(jnp.full(k.shape, pra.OP_INDEX[name], jnp.int32), jnp.asarray(k)))
    span = np.float64(np.float32(float(high - low)))
    expected = (np.float64(np.float32(low)) + span * (k * 2.0**-24)).astype(np.float32)
    np.testing.assert_array_equal(ours, expected, err_msg=name)
    assert ours[0] == np.float32(low) and ours[-1] <= np.float32(high) and np.all(np.diff(ours) >= 0)


def _pil_fix(v):
  """libImaging/Geometry.c FIX: FLOOR(v * 65536.0 + 0.5), NumPy float64 as C's double."""
  return np.floor(np.asarray(v, np.float64) * 65536.0 + 0.5).astype(np.int64)


def _pil_fixed(matrix):
  """affine_fixed's coefficients of PIL's data (a, b, c, d, e, f), float64 as the C code."""
  a, b, c, d, e, f = (np.asarray(x, np.float64) for x in matrix)
  return np.stack(
    [
      _pil_fix(a),
      _pil_fix(b),
      _pil_fix(c + a * 0.5 + b * 0.5),
      _pil_fix(d),
      _pil_fix(e),
      _pil_fix(f + d * 0.5 + e * 0.5),
    ],
    -1,
  )


def _geometric_expected(name: str, v: np.ndarray, size: int) -> np.ndarray:
  """int64 [n, 6]: the fixed-point coefficients PIL uses for ShearX / ShearY / TranslateX / TranslateY at vals v."""
  one, zero = np.ones_like(v), np.zeros_like(v)
  if name == "ShearX":
    return _pil_fixed((one, v, zero, zero, one, zero))
  if name == "ShearY":
    return _pil_fixed((one, zero, zero, v, one, zero))
  # ImagingScaleAffine: xo = c + a0 / 2 = v size + 0.5 (v * img.size[0] or [1]), source column COORD(xo + x)
  expected = _pil_fixed((one, zero, zero, zero, one, zero))
  expected[:, 2 if name == "TranslateX" else 5] = np.floor(v * size + 0.5).astype(np.int64) * 65536
  return expected


@pytest.mark.parametrize("size", [32, 28])
def test_shear_and_translation_coefficients(size):
  """ShearX / ShearY: FIX of (1, v, 0, 0, 1, 0) / (1, 0, 0, v, 1, 0); TranslateX / TranslateY: ImagingScaleAffine's
  source column x + floor(v W + 1/2), the fixed-point shift 65536 floor(v W + 1/2); at 65,536 vals and the ends. The
  arithmetic they rest on, FIX(v), 32768 + FIX(v / 2) and floor(v W + 1/2), for every one of the 2^24 vals."""
  k = jnp.asarray(_uniform_grid(65_536, seed=size), jnp.int32)
  for name in ("ShearX", "ShearY", "TranslateX", "TranslateY"):
    ops = jnp.full(k.shape, pra.OP_INDEX[name], jnp.int32)
    values = pra.stage_values(ops, k)
    ours = np.asarray(jax.jit(pra.geometric_coefficients, static_argnums=2)(ops, values, (size, size)))
    expected = _geometric_expected(name, np.asarray(values).astype(np.float64), size)
    np.testing.assert_array_equal(ours, expected, err_msg=name)
  k = jnp.asarray(_all_uniforms())
  values = pra.stage_values(jnp.full(k.shape, pra.OP_INDEX["ShearX"], jnp.int32), k)  # the translations' range too
  v = np.asarray(values).astype(np.float64)
  parts = jax.jit(
    lambda m: (
      pra._floor_half_up(m * 65536),  # pylint: disable=protected-access
      pra._floor_half_up(m * 32768),  # pylint: disable=protected-access
      pra._floor_half_up_product(size, m),  # pylint: disable=protected-access
    )
  )(values)
  np.testing.assert_array_equal(np.asarray(parts[0]), _pil_fix(v))
  np.testing.assert_array_equal(32768 + np.asarray(parts[1]), _pil_fix(0.0 + 1 * 0.5 + v * 0.5))
  np.testing.assert_array_equal(np.asarray(parts[2]), np.floor(v * size + 0.5))


def _pil_rotate_matrix(angle: float, w: int, h: int):
  """Image.rotate's data for AFFINE (Pillow 6.2 and 13 alike, center None, translate None)."""
  angle = angle % 360.0
  center = (w / 2, h / 2)
  angle = -math.radians(angle)
  matrix = [
    round(math.cos(angle), 15),
    round(math.sin(angle), 15),
    0.0,
    round(-math.sin(angle), 15),
    round(math.cos(angle), 15),
    0.0,
  ]
  a, b, c, d, e, f = matrix
  matrix[2], matrix[5] = a * -center[0] + b * -center[1] + c, d * -center[0] + e * -center[1] + f
  matrix[2] += center[0]
  matrix[5] += center[1]
  return matrix


@pytest.mark.parametrize("size", [32, 28])
def test_rotate_coefficients(size):
  """Rotate's fixed-point coefficients from our double-float cos / sin equal FIX of Image.rotate's float64 matrix at
  20,000 angles over [-30, 30) and at the ends."""
  k = _uniform_grid(20_000, seed=size)
  ops = jnp.full(k.shape, pra.OP_INDEX["Rotate"], jnp.int32)
  values = pra.stage_values(ops, jnp.asarray(k, jnp.int32))
  ours = np.asarray(pra.rotate_coefficients(values, (size, size)))
  expected = np.stack([_pil_fixed(_pil_rotate_matrix(float(v), size, size)) for v in np.asarray(values)])
  np.testing.assert_array_equal(ours, expected)


# ---------------------------------------------------------------------------------------------------------------
# Cutout


@pytest.mark.parametrize("image_set", IMAGE_SETS)
def test_cutout_equals_the_originals_imagedraw(image_set):
  """Cutout(img, u / 2) with the centre NumPy draws, W + (1 - W) U: corners, side floor(v) + 1, both ends filled,
  clipped at the right and bottom border, grey (125, 123, 114); u = 0 leaves the image as it is; at all ends of the
  three uniforms and at random ones."""
  channels, size = IMAGE_SETS[image_set]
  rng = np.random.default_rng(size)
  ends = np.array([0, 1, 2**23, UNIFORM_STEPS - 1])
  grid = np.array(np.meshgrid(ends, ends, ends)).reshape(3, -1).T
  k = np.concatenate([grid, rng.integers(0, UNIFORM_STEPS, (400, 3))]).astype(np.int32)
  corners = pra.cutout_corners(jnp.asarray(k[:, 0]), jnp.asarray(k[:, 1]), jnp.asarray(k[:, 2]), (size, size))
  sides = jnp.where(k[:, 0] > 0, pra.cutout_side_floor(jnp.asarray(k[:, 0]), size) + 1, 0)
  images = _images(channels, size, seed=5)[rng.integers(0, 16, len(k))]
  ours = np.asarray(pra.cutout(jnp.asarray(images), corners, sides))
  for image, out, (kc, kx, ky) in zip(images, ours, k):
    centre = (size + (1.0 - size) * (kx * 2.0**-24), size + (1.0 - size) * (ky * 2.0**-24))
    expected = _array(Cutout(_pil(image), (kc * 2.0**-24) * 0.5, centre), channels)
    np.testing.assert_array_equal(out, expected, err_msg=f"uniforms {kc, kx, ky}")
  assert np.asarray(sides).max() == size // 2 and np.asarray(sides).min() == 0


def test_numpys_uniform_w_is_one_to_w():
  """CutoutAbs's np.random.uniform(w): low = w, high = 1.0 (the default), low + (high - low) U, on (1, w]."""
  np.random.seed(3)
  drawn = np.random.uniform(32, size=10_000)
  np.random.seed(3)
  np.testing.assert_array_equal(drawn, 32 + (1.0 - 32) * np.random.random_sample(10_000))
  assert 1.0 < drawn.min() and drawn.max() <= 32.0


def test_cutout_corner_arithmetic_for_every_uniform():
  """The integer corner equals float64's int(max(0, W + (1 - W) U - v / 2)) for every U at two v, and the side
  floor(v) + 1 for every v (W = 32 and 28; the y corner reads H, its own side)."""
  for size in (32, 28):
    u = _all_uniforms()
    for kc in (1, UNIFORM_STEPS - 1):
      kc_array = jnp.full(u.shape, kc, jnp.int32)
      corners = np.asarray(pra.cutout_corners(kc_array, jnp.asarray(u), jnp.asarray(u[::-1]), (size, size)))
      v = (kc * 2.0**-24) * 0.5 * size
      x0 = np.maximum(0, size + (1.0 - size) * (u * 2.0**-24) - v / 2.0).astype(np.int64)
      y0 = np.maximum(0, size + (1.0 - size) * (u[::-1] * 2.0**-24) - v / 2.0).astype(np.int64)
      np.testing.assert_array_equal(corners, np.stack([y0, x0], -1))
    sides = np.asarray(pra.cutout_side_floor(jnp.asarray(u), size))
    np.testing.assert_array_equal(sides, np.floor((u * 2.0**-24) * 0.5 * size).astype(np.int64))


# ---------------------------------------------------------------------------------------------------------------
# Draws


def _draws(count: int, size: int = 32, key=KEY):
  return jax.jit(pra.promix_draws, static_argnames=("image_size", "num_ops"))(
    key, jnp.arange(count), image_size=(size, size), num_ops=3
  )


def _within(count: float, expected: float, n: int) -> bool:
  p = expected / n
  return abs(count - expected) <= TOLERANCE_SD * math.sqrt(n * p * (1 - p)) + 1e-9


def test_draw_distributions():
  """Over 200,000 examples: each of the 14 operations 1/14 per stage; each stage's uniform u = (val - min) / (max -
  min) in 10 equal bins 1/10 per operation; the hole's side 1..16 each 1/16; its corner as the original's
  int(max(0, uniform(1, 32) - v / 2)), whose law, computed from the formula, is not uniform (0 for 12.9% of the
  holes, clipped at the top or left; rarer past 23)."""
  n = 200_000
  draws = _draws(n)
  op_ids, values = np.asarray(draws.op_ids), np.asarray(draws.magnitudes).astype(np.float64)
  assert op_ids.shape == values.shape == (n, 3)
  for stage in range(3):
    counts = np.bincount(op_ids[:, stage], minlength=14)
    assert all(_within(c, n / 14, n) for c in counts), counts
  lows = np.array([low for _, low, _ in pra.POOL])[op_ids]
  highs = np.array([high for _, _, high in pra.POOL])[op_ids]
  u = (values - lows) / (highs - lows)
  assert np.all((u >= 0) & (u <= 1))
  for op in range(14):
    chosen = u[op_ids == op]
    counts = np.bincount(np.minimum((chosen * 10).astype(int), 9), minlength=10)
    assert all(_within(c, len(chosen) / 10, len(chosen)) for c in counts), (pra.OP_NAMES[op], counts)
  sides = np.asarray(draws.sides)
  assert set(np.unique(sides)) <= set(range(0, 17))
  assert all(_within(c, n / 16, n) for c in np.bincount(sides, minlength=17)[1:])
  cutout_values = np.asarray(draws.cutout_values)
  assert 0 <= cutout_values.min() and cutout_values.max() < 0.5
  np.testing.assert_array_equal(sides, np.where(cutout_values > 0, np.floor(cutout_values * 32) + 1, 0))
  # The corner's law: P(x0 = j) = mean over sides s of P(int(max(0, 32 - 31 U - v / 2)) = j), v uniform on
  # [s - 1, s); computed on a fine grid of (U, v).
  grid_u = (np.arange(2000) + 0.5) / 2000
  grid_v = (np.arange(1600) + 0.5) / 100
  x0 = np.maximum(0, 32 - 31 * grid_u[:, None] - grid_v[None, :] / 2).astype(int)
  law = np.bincount(x0.ravel(), minlength=32) / x0.size
  for axis in (0, 1):
    counts = np.bincount(np.asarray(draws.corners)[:, axis], minlength=32)
    assert all(_within(c, p * n, n) for c, p in zip(counts, law)), (axis, counts, law * n)
  assert law[0] > 3 * law[1] and law[31] < law[1] / 10  # 12.9% clipped to 0, 3.2% each up to 23, then fewer


def test_an_image_depends_on_its_key_and_index_only():
  """The same (key, index) gives the same view in any batch, order or split; another index or key, another view."""
  images = jnp.asarray(_images(3, 32, seed=2))
  indices = jnp.arange(100, 116)
  augment = jax.jit(pra.promix_randaugment)
  out = np.asarray(augment(KEY, images, indices))
  permutation = np.random.default_rng(0).permutation(16)
  np.testing.assert_array_equal(np.asarray(augment(KEY, images[permutation], indices[permutation])), out[permutation])
  np.testing.assert_array_equal(np.asarray(augment(KEY, images[:8], indices[:8])), out[:8])
  assert np.any(np.asarray(augment(KEY, images, indices + 16)) != out)
  assert np.any(np.asarray(augment(jax.random.fold_in(KEY, 1), images, indices)) != out)


@pytest.mark.parametrize("image_set", IMAGE_SETS)
def test_the_pool_replayed_with_pil(image_set):
  """promix_randaugment on 48 examples equals RandomAugment.__call__ replayed with PIL on the same draws: its three
  operations, their vals and the Cutout (Pillow 13's grey: rounded_grey=True); every operation is drawn."""
  channels, size = IMAGE_SETS[image_set]
  images = _images(channels, size, seed=11)[np.arange(48) % 16]
  indices = jnp.arange(1000, 1048)
  augment = jax.jit(pra.promix_randaugment, static_argnames=("num_ops", "rounded_grey"))
  ours = np.asarray(augment(KEY, jnp.asarray(images), indices, rounded_grey=True))
  draws = pra.promix_draws(KEY, indices, image_size=(size, size))
  words = np.asarray(pra._example_bits(KEY, indices, 9))  # pylint: disable=protected-access
  uniforms = (words >> 8) * 2.0**-24
  assert set(np.asarray(draws.op_ids).ravel()) == set(range(14))
  for b, image in enumerate(images):
    ops = [int(op) for op in np.asarray(draws.op_ids)[b]]
    vals = np.asarray(draws.magnitudes)[b]
    centre = (size + (1.0 - size) * uniforms[b, 7], size + (1.0 - size) * uniforms[b, 8])
    # the vals are ours (float32, `test_stage_values_for_every_uniform`): feed them as the uniforms that give them
    img = _pil(image)
    for op, val in zip(ops, vals):
      img = augment_list()[op][0](img, float(val))
    expected = _array(Cutout(img, uniforms[b, 6] * 0.5, centre), channels)
    np.testing.assert_array_equal(ours[b], expected, err_msg=f"example {b}: ops {[pra.OP_NAMES[o] for o in ops]}")
  assert np.any(ours != images)


def test_random_augment_transcription_agrees_with_the_replay():
  """random_augment (the transcription of __call__ with its draws as arguments) with uniforms u gives what the
  replay gives with the vals min + (max - min) u: the replay above stands for the original's loop."""
  image = _pil(_images(3, 32, seed=4)[0])
  rng = random.Random(0)
  for _ in range(30):
    choices = [rng.randrange(14) for _ in range(3)]
    uniforms = [rng.random() for _ in range(3)]
    cutout_uniform, centre = rng.random(), (1 + 31 * rng.random(), 1 + 31 * rng.random())
    img = image
    for k, u in zip(choices, uniforms):
      op, low, high = augment_list()[k]
      img = op(img, low + float(high - low) * u)
    expected = Cutout(img, cutout_uniform * 0.5, centre)
    assert np.array_equal(np.asarray(random_augment(image, choices, uniforms, cutout_uniform, centre)), expected)


# ---------------------------------------------------------------------------------------------------------------
# The policy in a strong-view config


def test_policy_in_a_config():
  """'promix_randaugment' in config.augment.strong: its n (default 3) read, its Cutout built in (the config's cutout
  stays a separate one, 0 by default), the same images as the module's function under the policy's key."""
  parts = autoaugment.strong_parts(policy="promix_randaugment")
  assert parts.config == {"policy": "promix_randaugment", "num_ops": 3, "cutout": 0}
  assert autoaugment.strong_parts(policy="promix_randaugment", num_ops=2).config["num_ops"] == 2
  with pytest.raises(ValueError, match="num_ops"):
    autoaugment.strong_parts(policy="promix_randaugment", num_ops=-1)
  images = jnp.asarray(_images(3, 32, seed=9))
  indices = jnp.arange(16)
  augment = autoaugment.make_strong_augment(policy="promix_randaugment")
  np.testing.assert_array_equal(
    np.asarray(augment(KEY, images, indices)),
    np.asarray(pra.promix_randaugment(jax.random.fold_in(KEY, 1), images, indices)),
  )
