"""torchvision on the test side of tests/test_image_ops.py and tests/test_autoaugment.py: its uint8 operations on NHWC
NumPy batches, and the pixel comparisons with the counts the assertion messages report.

torchvision's wheels for Linux link its C++ operators (nms, roi_align, ...) against the CUDA build of torch. Beside
the CPU build of torch (this project's Python 3.11 environment, torch 2.13.0+cpu), `import torchvision` fails while
it registers fake kernels for `torchvision::nms` and `torchvision::qnms`, which were never loaded. The transforms
used here are pure Python over torch and need none of those operators: `import_torchvision` then declares the two
schemas (so the registration finds them) and imports again. With a matching torch it imports as usual.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import torch

_DECLARED_MISSING_OPERATORS = []  # the torch.library.Library that declares them, kept alive


def import_torchvision():
  """torchvision.transforms.v2 (v2) and its functional (F), importing torchvision as described above."""
  try:
    import torchvision  # noqa: F401
  except RuntimeError as error:
    if "torchvision::nms" not in str(error):
      raise
    library = torch.library.Library("torchvision", "DEF")
    for name in ("nms", "qnms"):
      library.define(f"{name}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _DECLARED_MISSING_OPERATORS.append(library)
    for module in [name for name in sys.modules if name == "torchvision" or name.startswith("torchvision.")]:
      del sys.modules[module]
    import torchvision  # noqa: F401
  from torchvision.transforms import v2
  from torchvision.transforms.v2 import functional

  return v2, functional


v2, F = import_torchvision()
NEAREST = v2.InterpolationMode.NEAREST


def to_torch(images: np.ndarray) -> torch.Tensor:
  """uint8 NHWC NumPy -> uint8 NCHW torch."""
  return torch.from_numpy(np.array(np.asarray(images).transpose(0, 3, 1, 2)))  # a writable copy


def to_numpy(images: torch.Tensor) -> np.ndarray:
  """uint8 NCHW torch -> uint8 NHWC NumPy."""
  return images.permute(0, 2, 3, 1).contiguous().numpy()


def functional_op(name: str, images: np.ndarray, magnitude: float) -> np.ndarray:
  """The noisy_jax.core.image_ops operation `name` as torchvision v2 functional computes it, on a uint8 NHWC batch.

  The magnitude is what torchvision's `_apply_op` passes: shear m (shear angle degrees(atan(m)), center [0, 0]),
  translation int(m) pixels, factor 1 + m for the four blends.
  """
  x, m = to_torch(images), float(magnitude)
  shear_degrees = math.degrees(math.atan(m))
  calls = {
    "identity": lambda: x,
    "rotate": lambda: F.rotate(x, m, interpolation=NEAREST),
    "shear_x": lambda: F.affine(x, 0.0, [0, 0], 1.0, [shear_degrees, 0.0], interpolation=NEAREST, center=[0, 0]),
    "shear_y": lambda: F.affine(x, 0.0, [0, 0], 1.0, [0.0, shear_degrees], interpolation=NEAREST, center=[0, 0]),
    "translate_x": lambda: F.affine(x, 0.0, [int(m), 0], 1.0, [0.0, 0.0], interpolation=NEAREST),
    "translate_y": lambda: F.affine(x, 0.0, [0, int(m)], 1.0, [0.0, 0.0], interpolation=NEAREST),
    "brightness": lambda: F.adjust_brightness(x, 1.0 + m),
    "color": lambda: F.adjust_saturation(x, 1.0 + m),
    "contrast": lambda: F.adjust_contrast(x, 1.0 + m),
    "sharpness": lambda: F.adjust_sharpness(x, 1.0 + m),
    "posterize": lambda: F.posterize(x, int(m)),
    "solarize": lambda: F.solarize(x, m),
    "autocontrast": lambda: F.autocontrast(x),
    "equalize": lambda: F.equalize(x),
    "invert": lambda: F.invert(x),
  }
  return to_numpy(calls[name]())


_DISPATCH = v2.AutoAugment()  # its `_apply_image_or_video_transform` is torchvision's `_apply_op` for v2


def policy_op(op_name: str, image: np.ndarray, magnitude: float) -> np.ndarray:
  """torchvision's own dispatch of an AutoAugment / RandAugment operation (OP_NAMES spelling) on uint8 NHWC images.

  v2's Solarize takes the threshold as a fraction of 255 (its table is linspace(1, 0)); v1's `_apply_op`, whose
  magnitudes noisy_jax uses, takes it in levels (linspace(255, 0)): the fraction given is threshold / 255.
  """
  if op_name == "Solarize":
    magnitude = float(magnitude) / 255.0
  x = to_torch(image)
  out = _DISPATCH._apply_image_or_video_transform(x, op_name, float(magnitude), NEAREST, _DISPATCH._fill)
  return to_numpy(out)


def differences(ours, theirs) -> tuple[int, int, int]:
  """(pixels compared, pixels unequal, worst absolute difference in levels) of two uint8 arrays of one shape."""
  ours, theirs = np.asarray(ours), np.asarray(theirs)
  assert ours.shape == theirs.shape and ours.dtype == theirs.dtype == np.uint8, (ours.shape, theirs.shape)
  difference = np.abs(ours.astype(np.int32) - theirs.astype(np.int32))
  return difference.size, int((difference > 0).sum()), int(difference.max(initial=0))


def describe(label: str, pixels: int, unequal: int, worst: int) -> str:
  fraction = 1 - unequal / pixels
  return f"{label}: {pixels} pixels compared, {pixels - unequal} equal ({fraction:.4%}), worst difference {worst}"


def assert_matches(label: str, ours, theirs, *, exact: bool) -> str:
  """Asserts the images agree: exactly, or (exact=False, where float rounding may differ) on >= 99% of the pixels
  with every pixel within one intensity level. Returns the description (pixels, equal, worst difference)."""
  pixels, unequal, worst = differences(ours, theirs)
  message = describe(label, pixels, unequal, worst)
  if exact:
    assert unequal == 0, message
  else:
    assert unequal <= 0.01 * pixels and worst <= 1, message
  return message
