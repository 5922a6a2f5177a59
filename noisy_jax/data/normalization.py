"""Input normalisation applied on the device: pixel codes (uint8) in memory, float32 only inside the step.

A dataset keeps its images as they are stored (uint8 codes 0..`pixel_max`, 4x smaller than float32 on the host and
on every device) and the train step, the evaluation and the streaming pipeline's batches all go through one
`Normalization`:

  x = (codes / pixel_max - mean) / std          float32, computed on the device after the gather

  norm = normalization.fit(dataset, "per_channel")     # statistics of the TRAINING split, float64 -> float32
  x = norm(codes)                                       # jnp, inside jit: [..., H, W, C] -> float32

Modes (as `arrays.standardize`, whose host-side result this matches to float32 rounding):
  'per_channel': mean_c, std_c over every training pixel of channel c (per feature for [N, D] vectors); a zero
    std is replaced by 1. The habit of the GCE paper's code and of most ports.
  'mean_image': mean = the per-pixel (and per-channel) mean training image, std = 1. The Joint Optimization code's
    habit (Tanaka et al., CVPR 2018).
  'none': x = codes / pixel_max.
  'imagenet': the ImageNet statistics that torchvision's pretrained ResNets expect (mean 0.485, 0.456, 0.406; std
    0.229, 0.224, 0.225 on [0, 1] RGB), no pass over the data: the Clothing1M / WebVision papers' preprocessing.

Statistics: float64 sums over the [0, 1] float32 values (code / pixel_max, float32 division as the loaders
compute it), in chunks of 4,096 rows. A training split held on disk (noisy_jax.data.image_files) with more than
STATS_SAMPLE rows is summarised by a seeded sample of STATS_SAMPLE rows (decoding 1M images for two numbers per
channel is not worth it); in memory, every row is used.

A dataset already standardised on the host (`arrays.standardize`, Dataset.normalized set) gets the identity.
"""

from __future__ import annotations

import dataclasses

import numpy as np

MODES = ("none", "per_channel", "mean_image", "imagenet")
DEFAULT_MODE = "per_channel"  # a run's normalization when it sets none, and `fit`'s
IMAGENET_MEAN = (0.485, 0.456, 0.406)  # torchvision's ImageNet statistics of [0, 1] RGB pixels
IMAGENET_STD = (0.229, 0.224, 0.225)
STATS_SAMPLE = 10_000
STATS_SEED = 20221110
_CHUNK = 4096


@dataclasses.dataclass(frozen=True, eq=False)
class Normalization:
  """x = (codes / pixel_max - mean) / std in float32 (mean, std broadcast over the example's trailing axes); on the
  device in float64 when JAX's x64 mode is on (noisy_jax.core.precision)."""

  mode: str
  pixel_max: float
  mean: np.ndarray  # float32 [C] (per_channel, imagenet), [H, W, C] (mean_image) or [] (none: 0)
  std: np.ndarray  # float32, same broadcasting; 1 where the mode has no scale

  def __call__(self, codes):
    """codes [..., example shape] (any dtype) -> float32 normalised inputs (precision.float_dtype(): float64 with
    x64 on), with jax.numpy (inside jit)."""
    import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

    from noisy_jax.core import precision  # pylint: disable=g-import-not-at-top  (jax only where the caller uses it)

    dtype = precision.float_dtype()
    x = codes.astype(dtype)
    if self.pixel_max != 1.0:
      x = x / jnp.asarray(self.pixel_max, dtype)
    if self.mode == "none":
      return x
    return (x - jnp.asarray(self.mean, dtype)) / jnp.asarray(self.std, dtype)

  def numpy(self, codes) -> np.ndarray:
    """The same computation in NumPy float32 (host side: tests, the PCA of pseudo-label noise)."""
    x = np.asarray(codes).astype(np.float32)
    if self.pixel_max != 1.0:
      x = np.divide(x, np.float32(self.pixel_max), dtype=np.float32)
    if self.mode == "none":
      return x
    return ((x - self.mean) / self.std).astype(np.float32)


def identity(pixel_max: float = 1.0) -> Normalization:
  return Normalization("none", float(pixel_max), np.zeros((), np.float32), np.ones((), np.float32))


def unit_floats(x, pixel_max: float) -> np.ndarray:
  """Pixel codes -> float32 values in [0, 1] on the host: x / pixel_max with a float32 division."""
  x = np.asarray(x)
  if pixel_max == 1.0:
    return x.astype(np.float32)
  return np.divide(x, np.float32(pixel_max), dtype=np.float32)


def _rows(x, num_rows: int) -> np.ndarray:
  """The row indices summarised: all rows of an in-memory array, a sorted seeded sample of a split on disk."""
  if isinstance(x, np.ndarray) or num_rows <= STATS_SAMPLE:
    return np.arange(num_rows)
  return np.sort(np.random.default_rng(STATS_SEED).choice(num_rows, STATS_SAMPLE, replace=False))


def _decoded(x) -> np.ndarray:
  """Rows of an array, or of image_files.ImageFiles decoded: without the files it skips (on_bad_file='skip')."""
  if not getattr(x, "skips", False):
    return np.asarray(x)
  codes, failed = x.load_skipping()
  return np.delete(codes, sorted(failed), axis=0)


def training_statistics(x, pixel_max: float, mode: str) -> tuple[np.ndarray, np.ndarray]:
  """(mean, std) float64 of the training inputs `x` [N, ...] (array or image_files.ImageFiles) for `mode`; files
  that a split on disk skips (noisy_jax.data.bad_files) are not counted, as a loaded split has dropped them."""
  rows = _rows(x, len(x))
  count, total, total_sq = 0, 0.0, 0.0
  for start in range(0, len(rows), _CHUNK):
    chunk = unit_floats(_decoded(x[rows[start : start + _CHUNK]]), pixel_max).astype(np.float64)
    axes = tuple(range(chunk.ndim - 1)) if mode == "per_channel" else (0,)
    count += int(np.prod([chunk.shape[a] for a in axes]))
    total = total + chunk.sum(axis=axes)
    total_sq = total_sq + np.square(chunk).sum(axis=axes)
  mean = total / count
  if mode == "mean_image":
    return mean, np.ones_like(mean)
  std = np.sqrt(np.maximum(total_sq / count - np.square(mean), 0.0))
  return mean, np.where(std > 0, std, 1.0)


def fit(dataset, mode: str = DEFAULT_MODE) -> Normalization:
  """The Normalization of `dataset` (statistics of its training split) for `mode` (see the module docstring).

  Raises:
    ValueError: naming an unknown mode, or 'imagenet' for inputs that are not RGB images.
  """
  from noisy_jax.core import _checks  # pylint: disable=g-import-not-at-top

  _checks.check_choice("normalization", mode, MODES)
  pixel_max = float(getattr(dataset, "pixel_max", 1.0))
  if getattr(dataset, "normalized", None):
    return identity()
  if mode == "none":
    return identity(pixel_max)
  if mode == "imagenet":
    shape = tuple(dataset.x_train.shape[1:])
    if len(shape) != 3 or shape[-1] != 3:
      raise ValueError(
        f"normalization='imagenet' is for RGB images [H, W, 3]; dataset "
        f"{getattr(dataset, 'name', '?')!r} has inputs of shape {shape}."
      )
    return Normalization(mode, pixel_max, np.asarray(IMAGENET_MEAN, np.float32), np.asarray(IMAGENET_STD, np.float32))
  mean, std = training_statistics(dataset.x_train, pixel_max, mode)
  return Normalization(mode, pixel_max, mean.astype(np.float32), std.astype(np.float32))
