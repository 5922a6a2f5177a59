"""Tests for noisy_jax.core.image_ops: each operation of AutoAugment / RandAugment against torchvision v2 functional.

Images: mnist5k digits (grey, 28x28x1), an RGB stack of three different digits (28x28x3) and random RGB (28x28x3).
The operations run in two jitted calls, a different magnitude per example: every public operation on the RGB images
(the RGB digits and the random images in one batch), and `apply_op` (the policies' entry point, a different operation
per example) on the grey digits. They are compared with torchvision v2 functional on uint8 NCHW tensors, magnitude by
magnitude. The magnitudes are those of the policies' tables (AutoAugment's 10 bins, RandAugment's 31), both signs,
plus angles on the quadrants. Assertions: exact equality where torchvision's arithmetic is exact or reproduced step
for step (geometry, brightness, autocontrast, the integer operations); for color, contrast and sharpness, whose
float32 rounding in torch depends on its CPU kernels (fused multiply-adds where the CPU has them), >= 99% of the
pixels equal and every pixel within one intensity level (measured on this machine: all equal). Each message gives
the pixels compared, the fraction equal and the worst difference (`pytest -s` prints them all).

The RGB program is compiled at XLA's optimisation level 3, where XLA:CPU contracts a * b + c into fused
multiply-adds (the suite compiles at level 0, tests/conftest.py): the results must not depend on it. 32x32 RGB
images (CIFAR's) are compared through the policies in tests/test_autoaugment.py.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from noisy_jax import data
from noisy_jax.core import image_ops
import torchvision_reference as tv

IMAGES = 8  # per image set
GREY_BATCH = 1000  # the apply_op batch on grey digits (>= 8 x 123 magnitudes), as tests/test_autoaugment.py's
SIGNED_TABLE = lambda end: [s * end * k / 9 for k in (1, 2, 3, 6, 8, 9) for s in (1, -1)]  # AutoAugment's bins
BLEND_MAGNITUDES = [0.0, 0.1, -0.1, 0.3, -0.3, 0.6, -0.6, 0.9, -0.9]
TRANSLATIONS = [0.0, 1.6, -3.2, 6.4, -9.7, 12.7, -12.7]  # 150/331 * 28 * k/9, truncated as int()
MAGNITUDES = {  # operation -> magnitudes as `_apply_op` receives them, rounded to float32 below as the tables are
  "identity": [0.0],
  "rotate": SIGNED_TABLE(30.0) + [1.0, 7.0, 29.0, 45.0, 90.0, -90.0, 180.0, 270.0],
  "shear_x": SIGNED_TABLE(0.3) + [0.04, -0.12, 0.2],
  "shear_y": SIGNED_TABLE(0.3) + [0.04, -0.12, 0.2],
  "translate_x": TRANSLATIONS,
  "translate_y": TRANSLATIONS,
  "brightness": BLEND_MAGNITUDES,
  "color": BLEND_MAGNITUDES,
  "contrast": BLEND_MAGNITUDES,
  "sharpness": BLEND_MAGNITUDES,
  "posterize": [0, 1, 2, 4, 5, 6, 7, 8],
  "solarize": [255 - 255 * k / 9 for k in range(10)] + [128.0],
  "autocontrast": [0.0],
  "equalize": [0.0],
  "invert": [0.0],
}
MAGNITUDES = {name: [float(np.float32(m)) for m in values] for name, values in MAGNITUDES.items()}
ROUNDING_MAY_DIFFER = ("color", "contrast", "sharpness")  # torch's add with alpha: a fused multiply-add on AVX2
WITHOUT_MAGNITUDE = ("identity", "autocontrast", "equalize", "invert")
POLICY_NAMES = {name: "".join(part.title() for part in name.split("_")) for name in MAGNITUDES}
POLICY_NAMES.update(autocontrast="AutoContrast")


@pytest.fixture(scope="module")
def image_sets():
  digits = data.load("mnist5k").x_train
  rgb_digits = np.concatenate([digits[:IMAGES], digits[IMAGES : 2 * IMAGES], digits[2 * IMAGES : 3 * IMAGES]], -1)
  random_rgb = np.random.default_rng(0).integers(0, 256, (IMAGES, 28, 28, 3), dtype=np.uint8)
  return {"digits": digits[:IMAGES], "rgb_digits": rgb_digits, "random_rgb": random_rgb}


def _repeat(images, op):
  """(images once per magnitude [K N, ...], the magnitudes [K N]) for an operation."""
  values = MAGNITUDES[op]
  return np.tile(images, (len(values), 1, 1, 1)), np.repeat(np.float32(values), len(images))


GEOMETRY = {  # public geometric operation -> its inverse matrices [B, 2, 3] from the magnitudes, for images 28x28
  "rotate": image_ops.rotation_matrices,
  "shear_x": lambda m: image_ops.shear_x_matrices(m, 28),
  "shear_y": lambda m: image_ops.shear_y_matrices(m, 28),
  "translate_x": lambda m: image_ops.translation_matrices(m, 0.0),
  "translate_y": lambda m: image_ops.translation_matrices(0.0, m),
}


def _apply_public_ops(batches):
  """Every public operation on its own batch (images, magnitudes [B]). The geometric ones as `affine` of their
  matrices, which is what rotate, shear_x, ... are (one line each), resampled in one call: one copy of the
  resampling in the program instead of five (seconds of compilation)."""
  out = {}
  for name, (images, magnitudes) in batches.items():
    if name not in GEOMETRY:
      op = getattr(image_ops, name)
      out[name] = op(images) if name in WITHOUT_MAGNITUDE else op(images, magnitudes)
  geometric = [(name, batches[name]) for name in GEOMETRY]
  matrices = jnp.concatenate([GEOMETRY[name](magnitudes) for name, (_, magnitudes) in geometric])
  resampled = image_ops.affine(jnp.concatenate([images for _, (images, _) in geometric]), matrices)
  sizes = np.cumsum([0] + [len(magnitudes) for _, (_, magnitudes) in geometric])
  out.update({name: resampled[a:b] for (name, _), a, b in zip(geometric, sizes[:-1], sizes[1:])})
  return out


@pytest.fixture(scope="module")
def rgb_results(image_sets):
  """{op: ours [K 2N, 28, 28, 3]} for the RGB digits then the random RGB images, compiled at XLA level 3."""
  images = np.concatenate([image_sets["rgb_digits"], image_sets["random_rgb"]])
  batches = {name: _repeat(images, name) for name in MAGNITUDES}
  compiled = jax.jit(_apply_public_ops).lower(batches).compile({"xla_backend_optimization_level": 3})
  return {name: np.asarray(result) for name, result in compiled(batches).items()}


@pytest.fixture(scope="module")
def grey_results(image_sets):
  """{op: ours [K N, 28, 28, 1]} from one apply_op call on the grey digits, every example its own operation.

  The batch is padded with identities to GREY_BATCH examples, the batch of tests/test_autoaugment.py's RandAugment
  replay: the two share one compiled program through the suite's compilation cache.
  """
  images = image_sets["digits"]
  batches = [_repeat(images, name) for name in MAGNITUDES]
  op_ids = [
    np.full(len(b[1]), image_ops.OP_INDEX[POLICY_NAMES[name]], np.int32) for name, b in zip(MAGNITUDES, batches)
  ]
  sizes = np.cumsum([0] + [len(b[1]) for b in batches])
  padding = GREY_BATCH - sizes[-1]
  all_images = np.concatenate([b[0] for b in batches] + [np.zeros((padding, 28, 28, 1), np.uint8)])
  all_ids = np.concatenate(op_ids + [np.zeros(padding, np.int32)])
  all_magnitudes = np.concatenate([b[1] for b in batches] + [np.zeros(padding, np.float32)])
  out = np.asarray(jax.jit(image_ops.apply_op)(all_images, all_ids, all_magnitudes))
  return {name: out[start:end] for name, start, end in zip(MAGNITUDES, sizes[:-1], sizes[1:])}


def _compare(op, ours, images, label):
  theirs = np.concatenate([tv.functional_op(op, images, m) for m in MAGNITUDES[op]])
  assert ours.dtype == np.uint8 and ours.shape == theirs.shape, (ours.shape, theirs.shape)
  n = len(images)
  unequal = [
    tv.differences(ours[k * n : (k + 1) * n], theirs[k * n : (k + 1) * n])[1] for k in range(len(MAGNITUDES[op]))
  ]
  label = f"{op} on {label} at magnitudes {MAGNITUDES[op]} (unequal pixels per magnitude {unequal})"
  print(tv.assert_matches(label, ours, theirs, exact=op not in ROUNDING_MAY_DIFFER))


@pytest.mark.parametrize("op", list(MAGNITUDES))
def test_op_matches_torchvision_on_rgb_digits_and_random_rgb(image_sets, rgb_results, op):
  n, k = IMAGES, len(MAGNITUDES[op])
  ours = rgb_results[op].reshape(k, 2, n, 28, 28, 3)
  for part, set_name in enumerate(["rgb_digits", "random_rgb"]):
    _compare(op, ours[:, part].reshape(k * n, 28, 28, 3), image_sets[set_name], set_name)


@pytest.mark.parametrize("op", list(MAGNITUDES))
def test_apply_op_matches_torchvision_on_grey_digits(image_sets, grey_results, op):
  _compare(op, grey_results[op], image_sets["digits"], f"digits via apply_op({POLICY_NAMES[op]})")


# ---------------------------------------------------------------------------------------------------------------
# Cutout


def _cutout_reference(images, centers, size):
  """DeVries & Taylor's mask (uoguelph-mlrg/Cutout, util/cutout.py) per image: rows and columns clipped to the image."""
  out = images.copy()
  h, w = images.shape[1:3]
  for image, (y, x) in zip(out, centers):
    y1, y2 = np.clip(y - size // 2, 0, h), np.clip(y + size // 2, 0, h)
    x1, x2 = np.clip(x - size // 2, 0, w), np.clip(x + size // 2, 0, w)
    image[y1:y2, x1:x2] = 0
  return out


def test_cutout_matches_the_original_mask(image_sets):
  images = np.concatenate([image_sets["random_rgb"]] * 3)
  centers = np.array([[0, 0], [27, 27], [0, 27], [5, 26], [14, 14], [8, 0]] * 4, np.int32)[: len(images)]
  cut = jax.jit(lambda images, centers: [image_ops.cutout(images, centers, size) for size in (16, 7, 1, 0)])
  for size, ours in zip((16, 7, 1, 0), cut(images, centers)):
    expected = _cutout_reference(images, centers, size)
    print(tv.assert_matches(f"cutout size {size}", np.asarray(ours), expected, exact=True))


# ---------------------------------------------------------------------------------------------------------------
# The float32 arithmetic that does not depend on fused multiply-adds, and the affine matrices


@pytest.fixture(scope="module")
def building_blocks():
  """Inputs and outputs of the exact float32 helpers and of the matrix builders, in one program at XLA level 3."""
  rng = np.random.default_rng(1)
  inputs = {
    "a": np.concatenate([rng.integers(-255, 256, 10000), rng.standard_normal(10000) * 300]).astype(np.float32),
    "b": (rng.standard_normal(20000) * 10.0 ** rng.uniform(-3, 2, 20000)).astype(np.float32),
    "c": rng.uniform(-500, 500, 20000).astype(np.float32),
    "d": np.float32(rng.integers(1, 4096, 20000) * rng.uniform(0.01, 1.0, 20000)),
    "n": rng.integers(0, 256, 20000).astype(np.float32),
    "degrees": np.float32(np.concatenate([np.arange(-720, 721) / 3, rng.uniform(-400, 400, 20000)])),
    "m": np.float32([0.0, 0.1, -0.2, 0.3, 1 / 30, 0.04]),
  }

  def compute(x):
    return {
      "fma": image_ops._fma(x["a"], x["b"], x["c"]),
      "divide": image_ops._divide(x["c"], x["d"]),
      "truncated_quotient": image_ops._truncated_quotient(x["n"], x["d"]),
      "shear_x": image_ops.shear_x_matrices(x["m"], 28),
      "shear_y": image_ops.shear_y_matrices(x["m"], 32),
      "rotate": image_ops.rotation_matrices(x["degrees"]),  # [[cos, -sin, 0], [sin, cos, 0]]
      "translate": image_ops.translation_matrices(x["m"] * 30, -x["m"] * 30),
    }

  compiled = jax.jit(compute).lower(inputs).compile({"xla_backend_optimization_level": 3})
  return inputs, jax.tree.map(np.asarray, compiled(inputs))


def test_exact_arithmetic_matches_numpy_even_with_fused_multiply_adds(building_blocks):
  x, out = building_blocks
  exact_fma = np.float32(np.float64(x["a"]) * np.float64(x["b"]) + np.float64(x["c"]))  # a b is exact in float64
  np.testing.assert_array_equal(out["fma"], exact_fma)
  np.testing.assert_array_equal(out["divide"], x["c"] / x["d"])  # NumPy divides in IEEE float32
  np.testing.assert_array_equal(out["truncated_quotient"], np.trunc(x["n"] / x["d"]))
  radians = np.radians(np.float64(x["degrees"]) % 360)
  exact_zero = lambda v: np.where(np.abs(v) < 1e-15, 0.0, v)  # float64 leaves ~1e-16 at multiples of 90 degrees
  np.testing.assert_array_equal(out["rotate"][:, 0, 0], np.float32(exact_zero(np.cos(radians))))
  np.testing.assert_array_equal(out["rotate"][:, 1, 0], np.float32(exact_zero(np.sin(radians))))


def test_geometry_matrices_are_torchvisions(building_blocks):
  """The inverse matrices equal torchvision's _get_inverse_affine_matrix rounded to float32, as its kernels use them."""
  from torchvision.transforms.v2.functional._geometry import _get_inverse_affine_matrix as inverse_matrix

  x, out = building_blocks
  shear = lambda sx, sy, h, w: inverse_matrix([-w / 2, -h / 2], 0.0, [0.0, 0.0], 1.0, [sx, sy])
  expected = {
    "shear_x": [shear(math.degrees(math.atan(v)), 0.0, 28, 28) for v in x["m"]],
    "shear_y": [shear(0.0, math.degrees(math.atan(v)), 32, 32) for v in x["m"]],
    "rotate": [inverse_matrix([0.0, 0.0], -(float(v) % 360), [0.0, 0.0], 1.0, [0.0, 0.0]) for v in x["degrees"]],
    "translate": [inverse_matrix([0.0, 0.0], 0.0, [int(v * 30), int(-v * 30)], 1.0, [0.0, 0.0]) for v in x["m"]],
  }
  for name, matrices in expected.items():
    matrices = np.float32(matrices).reshape(-1, 2, 3)
    if name == "rotate":  # float64 leaves ~1e-16 where the exact value is 0 (90 degrees): the same resampling
      matrices = np.where(np.abs(matrices) < 1e-15, 0.0, matrices)
    np.testing.assert_array_equal(out[name], matrices, err_msg=name)


def test_checks_reject_what_is_not_a_uint8_image_batch():
  with pytest.raises(ValueError, match="uint8"):
    image_ops.invert(jnp.zeros((2, 8, 8, 3), jnp.float32))
  with pytest.raises(ValueError, match="C = 1 or 3"):
    image_ops.equalize(jnp.zeros((2, 8, 8, 2), jnp.uint8))
  with pytest.raises(ValueError, match="C = 1 or 3"):
    image_ops.rotate(jnp.zeros((8, 8, 3), jnp.uint8), 10.0)


# ---------------------------------------------------------------------------------------------------------------
# Every operation inside one larger program, as a user's pipeline composes them

COMPOSED_MAGNITUDE = {  # a magnitude per example for each public operation that takes one (signed ones mixed)
  "solarize": [128.0, 30.0, 200.0, 255.0],
  "posterize": [1.0, 4.0, 6.0, 8.0],
  "brightness": [-0.9, -0.3, 0.4, 0.9],
  "color": [-0.9, -0.3, 0.4, 0.9],
  "contrast": [-0.9, -0.3, 0.4, 0.9],
  "sharpness": [-0.9, -0.3, 0.4, 0.9],
  "rotate": [-29.0, -7.0, 13.0, 90.0],
  "shear_x": [-0.3, -0.1, 0.2, 0.3],
  "shear_y": [-0.3, -0.1, 0.2, 0.3],
  "translate_x": [-9.7, -3.2, 1.6, 12.7],
  "translate_y": [-9.7, -3.2, 1.6, 12.7],
}
COMPOSED_OPS = ("identity", "invert", "autocontrast", "equalize", *COMPOSED_MAGNITUDE, "cutout", "apply_op")
CUTOUT_CENTERS = np.array([[0, 0], [5, 30], [16, 16], [31, 2]], np.int32)
APPLY_OP_IDS = np.array([image_ops.OP_INDEX[name] for name in ("Sharpness", "Rotate", "Equalize", "Color")], np.int32)


def _one_op(name: str, images, magnitudes):
  """`name` on `images` [4, H, W, C]: its magnitudes per example, cutout's fixed centres, apply_op's four ops."""
  op = getattr(image_ops, name)
  if name == "cutout":
    return op(images, CUTOUT_CENTERS, 8)
  if name == "apply_op":
    return op(images, APPLY_OP_IDS, magnitudes["apply_op"])
  return op(images, magnitudes[name]) if name in COMPOSED_MAGNITUDE else op(images)


def _all_magnitudes():
  magnitudes = {name: np.float32(values) for name, values in COMPOSED_MAGNITUDE.items()}
  magnitudes["apply_op"] = np.float32([-0.9, 13.0, 0.0, 0.4])
  return magnitudes


def _compiled(fn, level, *args):
  return jax.jit(fn).lower(*args).compile({"xla_backend_optimization_level": level})


@pytest.mark.parametrize("level", [0, 3])
def test_every_op_inside_larger_programs_equals_the_op_alone(level):
  """Each public operation inside larger jitted programs, compiled at XLA's optimisation level 0 and 3, must equal
  the operation jitted alone (which the tests above compare with torchvision): its output given a leading axis
  (`op(x, m)[None]`, a program of its own) and all operations' outputs stacked in one program, as pipelines batch
  views. Sharpness's in-place interior write (`.at[:, 1:-1, 1:-1].set`) once failed the first: XLA:CPU returned
  80% of its values wrong, by up to 18 levels."""
  images = np.random.default_rng(1).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8)
  magnitudes = _all_magnitudes()
  alone = {
    name: np.asarray(jax.jit(lambda x, m, name=name: _one_op(name, x, m))(images, magnitudes)) for name in COMPOSED_OPS
  }

  def pipeline(images, magnitudes):
    return jnp.stack([_one_op(name, images, magnitudes) for name in COMPOSED_OPS])

  stacked = np.asarray(_compiled(pipeline, level, images, magnitudes)(images, magnitudes))
  for k, name in enumerate(COMPOSED_OPS):
    expanded = _compiled(lambda x, m, name=name: _one_op(name, x, m)[None], level, images, magnitudes)
    for label, out in (("op(x, m)[None]", np.asarray(expanded(images, magnitudes))[0]), ("stacked", stacked[k])):
      differ = out != alone[name]
      assert not differ.any(), f"{name}, {label}, level {level}: {differ.mean():.1%} of the values differ"


def test_every_op_accepts_numpy_images():
  images = np.random.default_rng(2).integers(0, 256, (4, 16, 16, 3), dtype=np.uint8)
  magnitudes = _all_magnitudes()
  for name in COMPOSED_OPS:
    out = _one_op(name, images, magnitudes)
    assert out.shape == images.shape and out.dtype == np.uint8, name
