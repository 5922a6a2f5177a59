"""Dataset registry: name -> loader returning a `Dataset` (clean labels; row i of x_train is example i).

Loaders import their heavy dependencies (mlxtend, scikit-learn, TFDS) only when called.
"""

from __future__ import annotations

from noisy_jax import _checks
from noisy_jax.data.arrays import Dataset, NORMALIZATIONS, from_arrays, standardize, stratified_split
from noisy_jax.data import embedded

DATASETS = {
    "mnist5k": embedded.mnist5k,
    "digits": embedded.digits,
}


def load(name: str, **kwargs) -> Dataset:
  """Loads the dataset called `name` (a key of DATASETS)."""
  _checks.check_choice("dataset", name, DATASETS)
  return DATASETS[name](**kwargs)
