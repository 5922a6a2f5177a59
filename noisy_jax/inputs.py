"""The input side of a run: the dataset a config names and the noisy training labels it trains on.

  dataset = load_dataset(config)                                  # data.load(config.dataset) + standardize
  noisy, report = noisy_training_labels(config, dataset, key)     # config.noise applied to the clean labels
  write_classes(dataset, config, workdir)                         # WORKDIR/classes.json (datasets from disk)

Moved out of noisy_jax/train.py (which keeps these names for its callers): the trainer consumes a dataset and a
label vector and does not care where they came from.
"""

from __future__ import annotations

import json
import os

import jax
import numpy as np

from noisy_jax import noise as noise_lib
from noisy_jax import pseudo_labels as pseudo_labels_lib


# config.noise.type for Joint Optimization's pseudo-label noise (noisy_jax.pseudo_labels): a fraction `rate` of the
# training set takes the class matched to its k-means cluster of PCA features (`num_components`, default 50).
PSEUDO_LABEL_NOISE = "pseudo_labels"
# config.noise.type for labels that come with the dataset (`dataset.noisy_y_train`, e.g. CIFAR-10N/100N's human
# labels): used as they are; `rate` and `exact` are ignored, the report measures the real noise.
DATASET_NOISE = "dataset"


def noisy_training_labels(config, dataset, key: jax.Array):
  """Corrupts the clean training labels as `config.noise` says; returns (noisy labels, noise report)."""
  noise_config = config.noise
  if noise_config.type == DATASET_NOISE:
    noisy = getattr(dataset, "noisy_y_train", None)
    if noisy is None:
      raise ValueError(f"noise type {DATASET_NOISE!r} uses the noisy labels that come with the dataset, but "
                       f"dataset {getattr(dataset, 'name', '?')!r} has none (noisy_y_train is None); use e.g. "
                       "dataset='cifar10_n' or 'cifar100_n', or another noise type.")
    noisy = np.asarray(noisy)
    return noisy, noise_lib.noise_report(dataset.y_train, noisy, dataset.num_classes)
  seed = int(jax.random.randint(key, (), 0, np.iinfo(np.int32).max))
  if noise_config.type == PSEUDO_LABEL_NOISE:
    features = pseudo_labels_lib.pca_features(dataset.x_train, int(noise_config.get("num_components", 50)))
    noisy, info = pseudo_labels_lib.corrupt_with_pseudo_labels(
        features, dataset.y_train, dataset.num_classes, float(noise_config.rate), seed=seed)
    return noisy, {**noise_lib.noise_report(dataset.y_train, noisy, dataset.num_classes), **info}
  transition = noise_lib.make_transition(noise_config.type, dataset.num_classes, float(noise_config.rate),
                                         dataset=noise_config.get("dataset") or None)
  noisy = noise_lib.corrupt_labels(dataset.y_train, transition, seed=seed, exact=bool(noise_config.exact))
  return noisy, noise_lib.noise_report(dataset.y_train, noisy, dataset.num_classes)


def dataset_kwargs(config) -> dict:
  """config.dataset_kwargs as a dict, without the entries that are None: an unset placeholder
  (`ml_collections.config_dict.placeholder(str)`, declared so that --config.dataset_kwargs.KEY=VALUE works on a
  locked config) leaves the loader's own default in place."""
  kwargs = config.get("dataset_kwargs") or {}
  kwargs = kwargs.to_dict() if hasattr(kwargs, "to_dict") else dict(kwargs)
  return {k: v for k, v in kwargs.items() if v is not None}


def load_dataset(config):
  from noisy_jax import data  # pylint: disable=g-import-not-at-top  (data loaders import heavy packages lazily)
  dataset = data.load(config.dataset, **dataset_kwargs(config))
  return data.standardize(dataset, config.get("normalization", "per_channel"))


CLASSES_FILE = "classes.json"
_PATH_KWARGS = ("root", "manifest", "path", "data_dir")  # dataset_kwargs that name files: written absolute


def write_classes(dataset, config, workdir: str | None) -> str | None:
  """Writes WORKDIR/classes.json when the dataset names its classes (datasets from disk); returns its path.

  Content: {"class_names": [name of class 0, ...], "source": {"dataset": config.dataset, **config.dataset_kwargs}}
  without its unset (None) entries and with file and folder paths made absolute, so that class ids in the run's
  outputs can be read back as names and the data found again. Nothing is written for a dataset without
  class_names or without a workdir. The caller writes from one process only (process 0, as summary.json).
  """
  names = getattr(dataset, "class_names", None)
  if names is None or not workdir:
    return None
  kwargs = dataset_kwargs(config)
  source = {"dataset": config.get("dataset", getattr(dataset, "name", None))}
  source.update({k: os.path.abspath(v) if k in _PATH_KWARGS and isinstance(v, str) else v for k, v in kwargs.items()})
  os.makedirs(workdir, exist_ok=True)
  path = os.path.join(workdir, CLASSES_FILE)
  with open(path, "w") as f:
    json.dump({"class_names": list(names), "source": source}, f, indent=1, default=str)
  return path
