"""Tests for noisy_jax.core.disc_randaugment: DISC's RandAugmentwogeo pool and CutoutAbs against the original's PIL.

The original's operations (JackYFL/DISC@a21e910 datasets/randaugment.py) are transcribed below (`ORIGINAL`), with
their randomness (the sign draws, CutoutAbs's centre) made arguments so that they can be replayed on our draws. What
is asserted: every operation of the pool, at every level of m = 10 and both signs, equals PIL pixel for pixel on
random and structured uint8 images, 32x32 RGB and 28x28 grey; the level -> value mapping is the original's
formulas; CutoutAbs equals ImageDraw's rectangle at every border; the draws have the original's distributions
(operations 1/16, levels 1/(m-1), coins 1/2, corners as int(max(0, uniform(0, n) - s/2))) by counting; the mean
hole area; the whole pool replayed with PIL on drawn stages; an image depends on (key, index) only; the config.
"""

from __future__ import annotations

import random

import jax
import jax.numpy as jnp
import numpy as np
import PIL
from PIL import Image
import PIL.ImageDraw
import PIL.ImageEnhance
import PIL.ImageOps
import pytest

from noisy_jax.core import autoaugment
from noisy_jax.core import disc_randaugment as dra

KEY = jax.random.key(20260527)
TOLERANCE_SD = 5.0
PARAMETER_MAX = 10


# ---------------------------------------------------------------------------------------------------------------
# The original, transcribed (randaugment.py l. 27-151); `negate` replaces `random.random() < 0.5`, CutoutAbs takes
# its centre; SolarizeAdd's np.int (gone from NumPy >= 1.24) is np.int64.


def _float_parameter(v, max_v):
  return float(v) * max_v / PARAMETER_MAX


def _int_parameter(v, max_v):
  return int(v * max_v / PARAMETER_MAX)


def AutoContrast(img, **kwarg):
  return PIL.ImageOps.autocontrast(img)


def Brightness(img, v, max_v, bias=0, **kwarg):
  v = _float_parameter(v, max_v) + bias
  return PIL.ImageEnhance.Brightness(img).enhance(v)


def Color(img, v, max_v, bias=0, **kwarg):
  v = _float_parameter(v, max_v) + bias
  return PIL.ImageEnhance.Color(img).enhance(v)


def Contrast(img, v, max_v, bias=0, **kwarg):
  v = _float_parameter(v, max_v) + bias
  return PIL.ImageEnhance.Contrast(img).enhance(v)


def Cutout(img, v, max_v, bias=0, centre=None, **kwarg):
  if v == 0:
    return img
  v = _float_parameter(v, max_v) + bias
  v = int(v * min(img.size))
  return CutoutAbs(img, v, centre=centre)


def CutoutAbs(img, v, centre=None, **kwarg):
  w, h = img.size
  x0, y0 = centre  # np.random.uniform(0, w), np.random.uniform(0, h)
  x0 = int(max(0, x0 - v / 2.0))
  y0 = int(max(0, y0 - v / 2.0))
  x1 = int(min(w, x0 + v))
  y1 = int(min(h, y0 + v))
  xy = (x0, y0, x1, y1)
  color = (127, 127, 127) if img.mode == "RGB" else 127  # PIL 13 rejects a 3-tuple on "L": see the module
  img = img.copy()
  PIL.ImageDraw.Draw(img).rectangle(xy, color)
  return img


def Equalize(img, **kwarg):
  return PIL.ImageOps.equalize(img)


def Invert(img, **kwarg):
  return PIL.ImageOps.invert(img)


def Posterize(img, v, max_v, bias=0, **kwarg):
  v = _int_parameter(v, max_v) + bias
  return PIL.ImageOps.posterize(img, v)


def Rotate(img, v, max_v, bias=0, negate=False, **kwarg):
  v = _int_parameter(v, max_v) + bias
  if negate:
    v = -v
  return img.rotate(v)


def Sharpness(img, v, max_v, bias=0, **kwarg):
  v = _float_parameter(v, max_v) + bias
  return PIL.ImageEnhance.Sharpness(img).enhance(v)


def ShearX(img, v, max_v, bias=0, negate=False, **kwarg):
  v = _float_parameter(v, max_v) + bias
  if negate:
    v = -v
  return img.transform(img.size, PIL.Image.AFFINE, (1, v, 0, 0, 1, 0))


def ShearY(img, v, max_v, bias=0, negate=False, **kwarg):
  v = _float_parameter(v, max_v) + bias
  if negate:
    v = -v
  return img.transform(img.size, PIL.Image.AFFINE, (1, 0, 0, v, 1, 0))


def Solarize(img, v, max_v, bias=0, **kwarg):
  v = _int_parameter(v, max_v) + bias
  return PIL.ImageOps.solarize(img, 256 - v)


def SolarizeAdd(img, v, max_v, bias=0, threshold=128, negate=False, **kwarg):
  v = _int_parameter(v, max_v) + bias
  if negate:
    v = -v
  img_np = np.array(img).astype(np.int64)
  img_np = img_np + v
  img_np = np.clip(img_np, 0, 255)
  img_np = img_np.astype(np.uint8)
  img = Image.fromarray(img_np)
  return PIL.ImageOps.solarize(img, threshold)


def TranslateX(img, v, max_v, bias=0, negate=False, **kwarg):
  v = _float_parameter(v, max_v) + bias
  if negate:
    v = -v
  v = int(v * img.size[0])
  return img.transform(img.size, PIL.Image.AFFINE, (1, 0, v, 0, 1, 0))


def TranslateY(img, v, max_v, bias=0, negate=False, **kwarg):
  v = _float_parameter(v, max_v) + bias
  if negate:
    v = -v
  v = int(v * img.size[1])
  return img.transform(img.size, PIL.Image.AFFINE, (1, 0, 0, 0, 1, v))


ORIGINAL = {
  "AutoContrast": (AutoContrast, None, None),
  "Brightness": (Brightness, 1.8, 0.1),
  "Color": (Color, 1.8, 0.1),
  "Contrast": (Contrast, 1.8, 0.1),
  "Cutout": (Cutout, 0.1, 0),
  "Equalize": (Equalize, None, None),
  "Invert": (Invert, None, None),
  "Posterize": (Posterize, 4, 4),
  "Rotate": (Rotate, 30, 0),
  "Sharpness": (Sharpness, 1.8, 0.1),
  "ShearX": (ShearX, 0.1, 0),
  "ShearY": (ShearY, 0.1, 0),
  "Solarize": (Solarize, 256, 0),
  "SolarizeAdd": (SolarizeAdd, 110, 0),
  "TranslateX": (TranslateX, 0.05, 0),
  "TranslateY": (TranslateY, 0.05, 0),
}  # new_augment_pool, l. 184-203


def _pil(image: np.ndarray) -> Image.Image:
  return Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image)


def _array(img: Image.Image, channels: int) -> np.ndarray:
  out = np.asarray(img)
  return out[..., None] if channels == 1 else out


# ---------------------------------------------------------------------------------------------------------------
# Images


def _images(channels: int, size: int, seed: int = 0) -> np.ndarray:
  """uint8 [B, size, size, C]: uniform noise, low-range noise, constant, two levels, gradients, a digit-like blob,
  saturated, a checkerboard."""
  rng = np.random.default_rng(seed)
  shape = (size, size, channels)
  ramp = np.broadcast_to(np.linspace(0, 255, size).astype(np.uint8)[None, :, None], shape)
  yy, xx = np.mgrid[:size, :size]
  blob = (np.exp(-((yy - size / 2) ** 2 + (xx - size / 2.5) ** 2) / (size / 4) ** 2) * 255).astype(np.uint8)
  images = [
    rng.integers(0, 256, shape),
    rng.integers(0, 256, shape),
    rng.integers(90, 140, shape),
    np.full(shape, 77),
    np.where(rng.random(shape) < 0.5, 10, 240),
    ramp,
    np.swapaxes(ramp, 0, 1),
    np.broadcast_to(blob[..., None], shape),
    np.where(rng.random(shape) < 0.9, 0, 255),
    np.broadcast_to((((yy // 3) + (xx // 3)) % 2 * 200)[..., None], shape) + rng.integers(0, 30, shape),
    rng.integers(0, 3, shape) * 127,
  ]
  return np.stack([np.asarray(x) for x in images]).astype(np.uint8)


IMAGE_SETS = [(3, 32), (1, 28)]
MAGNITUDE = 10  # every level 1..9 of CIFAR-100's m = 10 (CIFAR-10's 1..4 among them)


@pytest.fixture(scope="module", params=IMAGE_SETS, ids=["rgb32", "grey28"])
def images(request):
  channels, size = request.param
  return _images(channels, size, seed=channels)


# ---------------------------------------------------------------------------------------------------------------
# Operations against PIL


def _ours(images, op, level, negated, corner=(0, 0)):
  batch = images.shape[0]
  size = images.shape[1:3]
  tables = dra._tables(MAGNITUDE, size)
  k = dra.OP_INDEX[op]
  value = float(tables.factors[k, level]) * (-1 if (negated and op == "SolarizeAdd") else 1)
  coefficients = np.broadcast_to(tables.coefficients[k, level, int(negated)], (batch, 6))
  out = jax.jit(dra.apply_stage)(
    jnp.asarray(images),
    jnp.full((batch,), k, jnp.int32),
    jnp.full((batch,), value, jnp.float32),
    jnp.asarray(coefficients),
    jnp.broadcast_to(jnp.asarray(corner, jnp.int32), (batch, 2)),
  )
  return np.asarray(out)


@pytest.mark.parametrize("op", dra.OP_NAMES)
def test_each_operation_equals_pil(images, op):
  fn, max_v, bias = ORIGINAL[op]
  channels = images.shape[-1]
  signs = (False, True) if op in dra.SIGNED_OPS else (False,)
  for level in range(1, MAGNITUDE):
    for negated in signs:
      corner = (level % 3 * 9, 31 - level * 3)  # the Cutout op's (y0, x0); a centre that gives it below
      ours = _ours(images, op, level, negated, corner)
      for b, image in enumerate(images):
        side = dra.op_value("Cutout", level, images.shape[1:3])
        centre = (corner[1] + side / 2 + 0.25, corner[0] + side / 2 + 0.25) if op == "Cutout" else None
        expected = _array(fn(_pil(image), v=level, max_v=max_v, bias=bias, negate=negated, centre=centre), channels)
        np.testing.assert_array_equal(ours[b], expected, err_msg=f"{op} level {level} negated {negated} image {b}")


def test_geometric_operations_move_pixels():
  """Rotate changes an image at every level, the shears from level 2 (level 1's 0.01 moves no pixel of 32: column
  x + floor(0.505 + 0.01 y)); the translations are the identity below level 7 on 32 pixels (int(0.005 L 32) = 0)."""
  images = _images(3, 32)[:1]
  for op in ("Rotate", "ShearX", "ShearY", "TranslateX", "TranslateY"):
    for level in range(1, MAGNITUDE):
      for negated in (False, True):
        moved = (_ours(images, op, level, negated) != images).any()
        shift = op.startswith("Translate") and level >= 7  # int(0.005 L 32) >= 1
        assert moved == (op == "Rotate" or (op.startswith("Shear") and level >= 2) or shift), (op, level, negated)


def test_autocontrast_corrections_are_pils_float64_table():
  """Channels spanning [lo, hi] for a grid of pairs and pairs where float64 misrounds: our table equals
  ImageOps.autocontrast's on every level of [lo, hi], and the exact floor alone would not."""
  pairs = [(lo, hi) for lo in range(0, 256, 5) for hi in range(lo + 1, 256, 3)] + [(0, 25), (0, 105), (3, 3)]
  images = np.stack([np.clip(np.arange(256), lo, hi) for lo, hi in pairs]).astype(np.uint8)[:, None, :, None]
  table = np.asarray(jax.jit(dra.pil_autocontrast_table)(jnp.asarray(images)))
  assert len(dra._autocontrast_corrections()[1]) == 12094  # the count the module docstring gives
  misrounded = 0
  for k, (lo, hi) in enumerate(pairs):
    pil = np.asarray(PIL.ImageOps.autocontrast(Image.fromarray(images[k, :, :, 0])))[0]
    np.testing.assert_array_equal(table[k, images[k, 0, :, 0], 0], pil, err_msg=f"{(lo, hi)}")
    exact = np.clip((images[k, 0, :, 0].astype(int) - lo) * 255 // max(hi - lo, 1), 0, 255) if hi > lo else pil
    misrounded += (exact != pil).sum()
  assert misrounded > 0
  assert table[pairs.index((0, 25)), 25, 0] == 254  # 25 * (255 / 25) = 254.99999999999997 in float64


# ---------------------------------------------------------------------------------------------------------------
# Level -> value


def _assert_original_value(op: str, level: int, size: tuple[int, int], max_v, bias) -> None:
  """dra.op_value of `op` at `level` on images of `size` is the original's formula (ORIGINAL's max_v and bias for
  the factor ops), negated where the op takes a sign."""
  value = dra.op_value(op, level, size)
  if op in dra.FACTOR_OPS:
    assert value == float(level) * max_v / 10 + bias
  elif op == "Posterize":
    assert value == int(level * 4 / 10) + 4
  elif op == "Rotate":
    assert value == int(level * 30 / 10) and dra.op_value(op, level, size, True) == -value
  elif op in ("ShearX", "ShearY"):
    assert value == float(level) * 0.1 / 10 and dra.op_value(op, level, size, True) == -value
  elif op == "Solarize":
    assert value == 256 - int(level * 256 / 10)
  elif op == "SolarizeAdd":
    assert value == int(level * 110 / 10)
  elif op in ("TranslateX", "TranslateY"):
    assert value == int(float(level) * 0.05 / 10 * size[0])
  elif op == "Cutout":
    assert value == int(float(level) * 0.1 / 10 * min(size))
  else:
    assert value == 0.0


def test_level_to_value_is_the_originals():
  for size in [(32, 32), (28, 28)]:
    for op, (_, max_v, bias) in ORIGINAL.items():
      for level in range(1, 10):
        _assert_original_value(op, level, size, max_v, bias)
  # CIFAR-10's m = 5 (levels 1..4), spelled out
  assert [dra.op_value("Brightness", v, (32, 32)) for v in range(1, 5)] == pytest.approx([0.28, 0.46, 0.64, 0.82])
  assert [dra.op_value("Posterize", v, (32, 32)) for v in range(1, 5)] == [4, 4, 5, 5]
  assert [dra.op_value("Rotate", v, (32, 32)) for v in range(1, 5)] == [3, 6, 9, 12]
  assert [dra.op_value("Solarize", v, (32, 32)) for v in range(1, 5)] == [231, 205, 180, 154]
  assert [dra.op_value("SolarizeAdd", v, (32, 32)) for v in range(1, 5)] == [11, 22, 33, 44]
  assert [dra.op_value("TranslateX", v, (32, 32)) for v in range(1, 5)] == [0, 0, 0, 0]
  assert [dra.op_value("Cutout", v, (32, 32)) for v in range(1, 5)] == [0, 0, 0, 1]
  assert dra.final_cutout_size((32, 32)) == int(32 * 0.15) == 4
  assert dra.final_cutout_size((28, 28)) == int(28 * 0.15) == 4


# ---------------------------------------------------------------------------------------------------------------
# CutoutAbs


@pytest.mark.parametrize("channels,size,side", [(3, 32, 4), (1, 28, 4), (3, 32, 5), (3, 32, 0), (1, 28, 1)])
def test_cutout_abs_equals_imagedraw_at_every_position(channels, size, side):
  image = _images(channels, size)[0]
  centres = np.arange(2 * size)  # every half-pixel centre, along both axes at once and crossed
  words = np.stack([np.repeat(centres, 1), np.roll(centres, 7)], -1).astype(np.uint32)
  corners = np.asarray(dra.cutout_corners(jnp.asarray(words), side, (size, size)))
  batch = np.broadcast_to(image, (len(words),) + image.shape)
  ours = np.asarray(jax.jit(dra.cutout_abs, static_argnums=2)(jnp.asarray(batch), jnp.asarray(corners), side))
  for k, (cy, cx) in enumerate(words):
    for offset in (0.0, 0.2, 0.49):  # any u in [c/2, c/2 + 1/2) gives the same hole
      expected = _array(CutoutAbs(_pil(image), side, centre=(cx / 2 + offset, cy / 2 + offset)), channels)
      np.testing.assert_array_equal(ours[k], expected, err_msg=f"centre {(cy, cx)} + {offset}")
    hole = ours[k] != batch[k]
    assert (ours[k][hole] == 127).all()


def _mean_hole_area_exact(size: int, side: int) -> float:
  """E[area] of CutoutAbs(side) on size x size, integrating the original's uniform(0, size) centre exactly."""

  def mean_extent():
    total = 0.0
    for c in range(2 * size):  # u in [c/2, c/2 + 1/2)
      x0 = int(max(0, c / 2 + 0.25 - side / 2))
      total += min(size, x0 + side) - x0 + (x0 + side < size)
    return total / (2 * size)

  return mean_extent() ** 2


@pytest.mark.parametrize("size,expected", [(32, (157 / 32) ** 2), (28, (137 / 28) ** 2)])
def test_mean_hole_area_at_side_4(size, expected):
  """5 x 5 pixels but where clipped at the bottom / right: E[side] = (5 (n - 2) + 4 + 3) / n per axis, 24.07 px on
  32 x 32 and 23.94 on 28 x 28 (the issue's ~24)."""
  assert _mean_hole_area_exact(size, 4) == pytest.approx(expected, abs=1e-12)
  indices = jnp.arange(20000)
  draws = dra.disc_draws(KEY, indices, image_size=(size, size), num_ops=0, magnitude=5)
  hole = dra._hole(size, size, draws.corners, jnp.full((len(indices),), 4))
  area = np.asarray(hole.sum(axis=(1, 2, 3)))
  sd = area.std() / np.sqrt(len(area))
  assert abs(area.mean() - _mean_hole_area_exact(size, 4)) < TOLERANCE_SD * sd
  # the original's own sampling, by Monte Carlo
  rng = random.Random(0)
  areas = []
  for _ in range(20000):
    img = Image.new("L", (size, size), 0)
    out = CutoutAbs(img, 4, centre=(rng.uniform(0, size), rng.uniform(0, size)))
    areas.append((np.asarray(out) == 127).sum())
  assert abs(np.mean(areas) - area.mean()) < TOLERANCE_SD * np.sqrt(2) * sd


# ---------------------------------------------------------------------------------------------------------------
# Draws


def _within_binomial(count, trials, p, label):
  sd = np.sqrt(trials * p * (1 - p))
  assert abs(count - trials * p) <= TOLERANCE_SD * sd, f"{label}: {count} of {trials}, expected {trials * p:.1f}"


@pytest.mark.parametrize("magnitude", [5, 10])
def test_draws_have_the_originals_distributions(magnitude):
  n, num_ops, size = 20000, 2, (32, 32)
  draws = jax.jit(lambda i: dra.disc_draws(KEY, i, image_size=size, num_ops=num_ops, magnitude=magnitude))(
    jnp.arange(n)
  )
  trials = n * num_ops
  op_ids, levels = np.asarray(draws.op_ids), np.asarray(draws.levels)
  for k in range(len(dra.OP_NAMES)):
    _within_binomial((op_ids == k).sum(), trials, 1 / 16, f"op {k}")
  assert levels.min() == 1 and levels.max() == magnitude - 1
  for level in range(1, magnitude):
    _within_binomial((levels == level).sum(), trials, 1 / (magnitude - 1), f"level {level}")
  _within_binomial(np.asarray(draws.applied).sum(), trials, 0.5, "applied")
  _within_binomial(np.asarray(draws.negated).sum(), trials, 0.5, "negated")
  # the final corner: P(x0 = 0) = 3/32 (u < 3), P(x0 = k) = 1/32 for k = 1..28, never above
  corners = np.asarray(draws.corners)
  for axis in (0, 1):
    _within_binomial((corners[:, axis] == 0).sum(), n, 3 / 32, "corner 0")
    _within_binomial((corners[:, axis] == 13).sum(), n, 1 / 32, "corner 13")
    assert corners[:, axis].max() == 32 - 2 - 1
  # stages independent of each other: pairs of operations uniform
  _within_binomial(((op_ids[:, 0] == 3) & (op_ids[:, 1] == 5)).sum(), n, 1 / 256, "pair")


def test_odd_side_corners_have_the_half_pixel_distribution():
  """s = 5: x0 = int(max(0, u - 2.5)): P(0) = 3.5/32, P(k) = 1/32 for k = 1..28, P(29) = 0.5/32."""
  words = jax.random.bits(KEY, (40000, 2), jnp.uint32)
  corners = np.asarray(dra.cutout_corners(words, 5, (32, 32)))[:, 0]
  _within_binomial((corners == 0).sum(), len(corners), 3.5 / 32, "0")
  _within_binomial((corners == 29).sum(), len(corners), 0.5 / 32, "29")
  _within_binomial((corners == 10).sum(), len(corners), 1 / 32, "10")
  assert corners.max() == 29


# ---------------------------------------------------------------------------------------------------------------
# The whole pool


@pytest.mark.parametrize("channels,size,magnitude", [(3, 32, 5), (1, 28, 5), (3, 32, 10)])
def test_pool_equals_the_original_replayed_on_the_draws(channels, size, magnitude):
  images = np.concatenate([_images(channels, size, seed=s) for s in range(4)])
  indices = jnp.arange(len(images)) * 7 + 3
  fn = jax.jit(lambda k, x, i: dra.disc_randaugment(k, x, i, num_ops=2, magnitude=magnitude))
  ours = np.asarray(fn(KEY, jnp.asarray(images), indices))
  draws = dra.disc_draws(KEY, indices, image_size=(size, size), num_ops=2, magnitude=magnitude)
  draws = jax.tree.map(np.asarray, draws)
  side = dra.final_cutout_size((size, size))
  for b, image in enumerate(images):
    img = _pil(image)
    for s in range(2):
      if not draws.applied[b, s]:
        continue
      op = dra.OP_NAMES[draws.op_ids[b, s]]
      fn_, max_v, bias = ORIGINAL[op]
      y0, x0 = draws.op_corners[b, s]
      op_side = dra.op_value("Cutout", int(draws.levels[b, s]), (size, size))
      centre = (x0 + op_side / 2 + 0.25, y0 + op_side / 2 + 0.25)  # a centre that gives the drawn corner
      img = fn_(img, v=int(draws.levels[b, s]), max_v=max_v, bias=bias, negate=bool(draws.negated[b, s]), centre=centre)
    y0, x0 = draws.corners[b]
    img = CutoutAbs(img, side, centre=(x0 + side / 2 + 0.25, y0 + side / 2 + 0.25))
    np.testing.assert_array_equal(ours[b], _array(img, channels), err_msg=f"example {b}")
  assert np.asarray(draws.applied).any() and not np.asarray(draws.applied).all()


def test_an_image_depends_on_key_and_index_only():
  images = jnp.asarray(_images(3, 32))
  indices = jnp.arange(len(images)) + 100
  out = np.asarray(dra.disc_randaugment(KEY, images, indices))
  permutation = np.random.default_rng(0).permutation(len(images))
  shuffled = np.asarray(dra.disc_randaugment(KEY, images[permutation], indices[permutation]))
  np.testing.assert_array_equal(shuffled, out[permutation])
  half = np.asarray(dra.disc_randaugment(KEY, images[:5], indices[:5]))
  np.testing.assert_array_equal(half, out[:5])
  other = np.asarray(dra.disc_randaugment(jax.random.fold_in(KEY, 1), images, indices))
  assert (other != out).any()


@pytest.mark.parametrize("level", [0, 3])
def test_pool_inside_a_larger_program_equals_it_alone(level):
  """The pool given a leading axis in its own program (what broke image_ops.sharpness on XLA:CPU) and stacked with
  another view, compiled at XLA's optimisation level 0 and 3, equals the pool jitted alone."""
  images = jnp.asarray(_images(3, 32))
  indices = jnp.arange(len(images))
  alone = np.asarray(jax.jit(lambda x: dra.disc_randaugment(KEY, x, indices))(images))
  for label, program in (
    ("[None]", lambda x: dra.disc_randaugment(KEY, x, indices)[None]),
    ("stacked", lambda x: jnp.stack([dra.disc_randaugment(KEY, x, indices), x])),
  ):
    compiled = jax.jit(program).lower(images).compile({"xla_backend_optimization_level": level})
    np.testing.assert_array_equal(np.asarray(compiled(images))[0], alone, err_msg=label)


# ---------------------------------------------------------------------------------------------------------------
# The strong-view config


def test_strong_parts_registers_the_pool():
  parts = autoaugment.strong_parts(policy="disc_randaugment", num_ops=2, magnitude=5)
  assert parts.cutout == 0
  assert parts.config == {"policy": "disc_randaugment", "cutout": 0, "num_ops": 2, "magnitude": 5}
  images = jnp.asarray(_images(1, 28))
  indices = jnp.arange(len(images))
  np.testing.assert_array_equal(
    np.asarray(parts.policy(KEY, images, indices)), np.asarray(dra.disc_randaugment(KEY, images, indices))
  )
  default = autoaugment.strong_parts(policy="disc_randaugment")
  assert default.config["magnitude"] == dra.MAGNITUDE and default.config["num_ops"] == dra.NUM_OPS


@pytest.mark.parametrize(
  "config,message",
  [
    ({"policy": "disc_randaugment", "magnitude": 11}, "magnitude=11"),
    ({"policy": "disc_randaugment", "magnitude": 1}, "magnitude=1"),
    ({"policy": "disc_randaugment", "num_ops": -1}, "num_ops=-1"),
  ],
)
def test_config_errors_name_the_value(config, message):
  with pytest.raises(ValueError, match=message):
    autoaugment.strong_parts(**config)
