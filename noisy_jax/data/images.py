"""Image files and image arrays -> uint8 pixel arrays of one size (pillow; used by noisy_jax.data.disk / tfds_data).

  pixels = decode_file("ROOT/train/cat/001.png", image_size=32)   # uint8 [32, 32] (grayscale) or [32, 32, 3]
  x = stack([pixels, ...], ["train/cat/001.png", ...])            # uint8 [N, H, W, 1] or [N, H, W, 3]

Channels: a grayscale file ('1' or 'L' mode, 'LA' without its alpha) decodes to [H, W]; every other 8-bit mode
(RGB, RGBA, palette, CMYK, ...) to RGB [H, W, 3] (alpha dropped). `stack` keeps one channel when every image is
grayscale and otherwise repeats the gray images over 3 channels (pillow's L -> RGB), so a folder of grayscale
digits stays [N, H, W, 1]. 16-bit and float images ('I', 'I;16', 'F') are refused: convert them to 8 bits first.

Size: with `image_size` = S, the shorter side is resized to S (bilinear, width and height rounded, never below S)
and the centre S x S window is cut: left = (W' - S) // 2, top = (H' - S) // 2 of the resized W' x H' image (the
evaluation preprocessing of the papers; an image whose shorter side already is S is only cropped). Without
`image_size` every image must have the same size; `stack` names two files that differ.
"""

from __future__ import annotations

from concurrent import futures
import os
from typing import Sequence

import numpy as np

from noisy_jax.core import errors

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg")  # what an image folder may hold (case-insensitive)
_GRAY_MODES = ("1", "L", "LA")


class BadImageFile(errors.InputError):
  """A file that pillow cannot decode into 8-bit pixels (not an image, truncated, 16-bit or float, ...); the
  message names the file. What dataset_kwargs on_bad_file='skip' skips (noisy_jax.data.bad_files)."""


def resize_and_crop(image, image_size: int):
  """A PIL image resized (bilinear) so that its shorter side is `image_size`, then centre-cropped to a square."""
  from PIL import Image  # pylint: disable=g-import-not-at-top

  width, height = image.size
  if min(width, height) != image_size:
    scale = image_size / min(width, height)
    size = (max(image_size, round(width * scale)), max(image_size, round(height * scale)))
    image = image.resize(size, Image.BILINEAR)
  width, height = image.size
  left, top = (width - image_size) // 2, (height - image_size) // 2
  return image.crop((left, top, left + image_size, top + image_size))


def to_pixels(image, image_size: int | None, *, where: str) -> np.ndarray:
  """A decoded PIL image -> uint8 [H, W] (grayscale) or [H, W, 3], resized and cropped when image_size is set.

  Raises:
    BadImageFile: naming `where` for a 16-bit or float image, or one pillow cannot convert.
  """
  if image.mode.startswith("I") or image.mode == "F":
    raise BadImageFile(
      f"{where}: pillow mode {image.mode!r} (16-bit or float pixels) is not supported; save the "
      "image as 8-bit grayscale or RGB."
    )
  target = "L" if image.mode in _GRAY_MODES else "RGB"
  if image.mode != target:
    try:
      image = image.convert(target)
    except (OSError, ValueError) as e:
      raise BadImageFile(f"{where}: cannot convert pillow mode {image.mode!r} to {target}: {e}") from e
  if image_size is not None:
    image = resize_and_crop(image, image_size)
  return np.asarray(image, np.uint8)


def check_image_size(image_size) -> int | None:
  """None, or `image_size` as an int >= 1 (ValueError naming the value otherwise)."""
  if image_size is None:
    return None
  if isinstance(image_size, bool) or not isinstance(image_size, (int, np.integer)) or image_size < 1:
    raise ValueError(
      f"image_size={image_size!r} must be None (keep the files' size) or an integer >= 1 (resize "
      "the shorter side to it, then centre-crop a square)."
    )
  return int(image_size)


def decode_file(path: str, image_size: int | None = None) -> np.ndarray:
  """Decodes one image file with pillow: uint8 [H, W] (grayscale) or [H, W, 3] (see the module docstring).

  Raises:
    FileNotFoundError: naming a missing `path`.
    BadImageFile (a ValueError): naming `path` when pillow cannot decode it (not an image, truncated, 16-bit, ...).
  """
  from PIL import Image  # pylint: disable=g-import-not-at-top

  if not os.path.isfile(path):
    raise errors.MissingInputError(f"image file {path!r} does not exist.")
  undecodable = (OSError, SyntaxError, ValueError)  # pillow's UnidentifiedImageError is an OSError
  try:
    image = Image.open(path)
  except undecodable as e:
    raise BadImageFile(f"cannot decode image file {path!r}: {e}") from e
  with image:
    try:
      image.load()  # decode now: a truncated file fails here, not later
    except undecodable as e:
      raise BadImageFile(f"cannot decode image file {path!r}: {e}") from e
    return to_pixels(image, image_size, where=path)


def map_files(fn, paths: Sequence[str], *, num_workers: int | None = None) -> list:
  """`fn(path)` of every path, in order, on a thread pool (pillow releases the GIL while decoding).

  The first file that fails raises its error; nothing is returned then.
  """
  workers = min(8, os.cpu_count() or 1) if num_workers is None else num_workers
  if workers <= 1 or len(paths) < 2:
    return [fn(p) for p in paths]
  with futures.ThreadPoolExecutor(workers) as pool:
    return list(pool.map(fn, paths))


def decode_files(paths: Sequence[str], image_size: int | None = None, *, num_workers: int | None = None) -> list:
  """`decode_file` of every path, in order, on a thread pool (`map_files`)."""
  return map_files(lambda p: decode_file(p, image_size), paths, num_workers=num_workers)


def stack(pixels: Sequence[np.ndarray], names: Sequence[str], *, color: bool | None = None) -> np.ndarray:
  """uint8 images of one size -> uint8 [N, H, W, 1] (all grayscale) or [N, H, W, 3].

  Args:
    pixels: [H, W] (grayscale) or [H, W, 3] uint8 arrays.
    names: one name per image (a file path or record id), for the error messages.
    color: 3 channels (True) or 1 (False: every image must be grayscale); None: 3 when any image is colour.
      Pass `is_color` of all the splits of a dataset to each, so that their shapes agree.

  Raises:
    ValueError: naming two images of different sizes (and suggesting image_size), or a colour image when
      color=False.
  """
  if not len(pixels):
    raise ValueError("no image to stack.")
  if color is False and is_color(pixels):
    name = next(n for n, p in zip(names, pixels) if p.ndim == 3)
    raise ValueError(f"{name!r} is a colour image, but 1-channel (grayscale) images were asked for.")
  check_same_size(pixels, names)
  first = pixels[0].shape[:2]
  if color is None:
    color = is_color(pixels)
  out = np.empty((len(pixels), *first, 3 if color else 1), np.uint8)
  for i, p in enumerate(pixels):
    out[i] = p if p.ndim == 3 else p[..., None]  # broadcasting repeats a gray image over the 3 channels
  return out


def check_same_size(pixels: Sequence[np.ndarray], names: Sequence[str]) -> None:
  """Raises ValueError naming the first image and the first one whose height or width differs from it."""
  first = pixels[0].shape[:2]
  for name, p in zip(names, pixels):
    if p.shape[:2] != first:
      raise ValueError(
        f"images differ in size: {names[0]!r} is {first[1]}x{first[0]} (width x height) but "
        f"{name!r} is {p.shape[1]}x{p.shape[0]}; pass image_size=S (in dataset_kwargs) to resize "
        "every image's shorter side to S and centre-crop S x S."
      )


def is_color(pixels: Sequence[np.ndarray]) -> bool:
  """True when any of the decoded images is colour ([H, W, 3])."""
  return any(p.ndim == 3 for p in pixels)
