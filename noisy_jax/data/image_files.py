"""A split of images kept on disk, decoded on demand: the inputs of a dataset too large to hold in memory.

  files = ImageFiles(paths, image_size=32, channels=3)   # nothing decoded yet
  files.shape                                             # (N, 32, 32, 3), dtype uint8
  files[7]                                                # uint8 [32, 32, 3]: decodes paths[7]
  files[rows]                                             # an ImageFiles of those rows (no decoding)
  codes = files.load()                                    # uint8 [N, 32, 32, 3] in memory (decoded in threads)

Used as a Dataset's x_train / x_val / x_test by the loaders of files (noisy_jax.data.disk with decode=False, and
the Clothing1M / WebVision / ANIMAL-10N readers): the trainer either loads it (resident input, when it fits
`config.input_budget_mib`) or streams it (noisy_jax.parallel.streaming: ImageFiles is a Grain random-access source; it
pickles as a list of paths, so worker processes decode).

Every row decodes through `images.decode_file` (pillow; resize the shorter side to `image_size` and centre-crop;
grayscale repeated over 3 channels when `channels` = 3), so a loaded split and a streamed one hold the same
bytes. A file that cannot be decoded, or whose size differs from the split's without `image_size`, or a colour
file in a 1-channel split, raises ValueError naming the file, when it is decoded. With on_bad_file='skip' a file
that cannot be decoded is reported instead (`decode_row`, `load_skipping`; noisy_jax.data.bad_files says what the
trainer then does).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from noisy_jax.data import bad_files
from noisy_jax.data import images

_BAD = (images.BadImageFile, FileNotFoundError)  # what on_bad_file='skip' skips


@dataclasses.dataclass(frozen=True, eq=False)
class ImageFiles:
  """Row i is `paths[i]` decoded: uint8 [height, width, channels].

  on_bad_file, max_bad_fraction: what a file that cannot be decoded does ('error' raises, 'skip' reports it) and the
  fraction of the split that may be skipped (noisy_jax.data.bad_files); row selections keep both.
  """

  paths: tuple[str, ...]
  height: int
  width: int
  channels: int
  image_size: int | None = None
  on_bad_file: str = "error"
  max_bad_fraction: float = bad_files.DEFAULT_MAX_FRACTION

  def __post_init__(self):
    object.__setattr__(self, "paths", tuple(str(p) for p in self.paths))
    if self.channels not in (1, 3):
      raise ValueError(f"channels={self.channels!r} must be 1 (grayscale) or 3 (RGB).")
    bad_files.check_options(self.on_bad_file, self.max_bad_fraction)

  @property
  def skips(self) -> bool:
    """True when files that cannot be decoded are skipped (on_bad_file='skip')."""
    return self.on_bad_file == "skip"

  @classmethod
  def probe(
    cls, paths: Sequence[str], *, image_size: int | None = None, channels: int | None = None, first: str | None = None
  ) -> "ImageFiles":
    """The split of `paths`, its example shape read from one file (`first`, default paths[0]): the size is
    image_size x image_size, or that file's size without image_size; channels 1 when that file is grayscale
    (unless `channels` says otherwise)."""
    pixels = images.decode_file(first or paths[0], image_size)
    if channels is None:
      channels = 3 if pixels.ndim == 3 else 1
    return cls(tuple(paths), pixels.shape[0], pixels.shape[1], int(channels), image_size)

  # Array-like surface: enough for Dataset, from_arrays' row selection and the trainer.
  dtype = np.dtype(np.uint8)
  ndim = 4

  @property
  def shape(self) -> tuple[int, int, int, int]:
    return (len(self.paths), self.height, self.width, self.channels)

  @property
  def nbytes(self) -> int:
    """Bytes of the loaded uint8 split."""
    return int(np.prod(self.shape))

  def __len__(self) -> int:
    return len(self.paths)

  def __getitem__(self, rows):
    if isinstance(rows, (int, np.integer)):
      return self.decode(self.paths[int(rows)])
    if isinstance(rows, slice):
      return dataclasses.replace(self, paths=self.paths[rows])
    rows = np.asarray(rows)
    if rows.dtype == bool:
      rows = np.flatnonzero(rows)
    return dataclasses.replace(self, paths=tuple(self.paths[int(i)] for i in rows))

  def decode(self, path: str) -> np.ndarray:
    """uint8 [height, width, channels] of one file (errors name the file)."""
    pixels = images.decode_file(path, self.image_size)
    if pixels.shape[:2] != (self.height, self.width):
      raise ValueError(
        f"{path!r} is {pixels.shape[1]}x{pixels.shape[0]} (width x height), but the images of "
        f"this split are {self.width}x{self.height}; pass image_size=S (in dataset_kwargs) to "
        "resize every image's shorter side to S and centre-crop S x S."
      )
    if pixels.ndim == 2:
      return pixels[..., None] if self.channels == 1 else np.repeat(pixels[..., None], 3, axis=-1)
    if self.channels == 1:
      raise ValueError(
        f"{path!r} is a colour image, but this split was read as grayscale (1 channel) from its "
        "first file; pass channels=3 (in dataset_kwargs) to read every image as RGB."
      )
    return pixels

  def decode_row(self, row: int) -> tuple[np.ndarray, str | None]:
    """(pixels, None) of row `row`; with on_bad_file='skip', (zeros, the error message) for a file that cannot be
    decoded (with 'error' that file raises)."""
    path = self.paths[int(row)]
    if not self.skips:
      return self.decode(path), None
    try:
      return self.decode(path), None
    except _BAD as e:
      return np.zeros(self.shape[1:], np.uint8), str(e)

  def load(self, *, num_workers: int | None = None) -> np.ndarray:
    """Every row decoded: uint8 [N, height, width, channels] (the first bad file raises, nothing returned)."""
    out = np.empty(self.shape, np.uint8)
    decoded = images.map_files(self.decode, self.paths, num_workers=num_workers)
    for i, pixels in enumerate(decoded):
      out[i] = pixels
    return out

  def load_skipping(self, *, num_workers: int | None = None) -> tuple[np.ndarray, dict[int, str]]:
    """Every row decoded, files that cannot be decoded reported instead of raised: (uint8 [N, height, width,
    channels] with zeros in their rows, {row: error message}). Any other error still raises."""
    out = np.empty(self.shape, np.uint8)
    failed = {}
    decoded = images.map_files(self.decode_row, range(len(self.paths)), num_workers=num_workers)
    for i, (pixels, error) in enumerate(decoded):
      out[i] = pixels
      if error is not None:
        failed[i] = error
    return out, failed

  def find_bad(self, *, num_workers: int | None = None) -> dict[int, str]:
    """{row: error message} of the files that cannot be decoded (each file decoded once, nothing kept)."""
    decoded = images.map_files(lambda row: self.decode_row(row)[1], range(len(self.paths)), num_workers=num_workers)
    return {i: error for i, error in enumerate(decoded) if error is not None}

  def __array__(self, dtype=None, copy=None):  # np.asarray(files) loads the split
    del copy
    out = self.load()
    return out if dtype is None else out.astype(dtype)

  def __repr__(self) -> str:
    return f"ImageFiles({len(self.paths)} files, {self.height}x{self.width}x{self.channels})"
