"""The input side of a run: the dataset a config names, how it reaches the devices, and its noisy training labels.

  dataset = load_dataset(config)                                  # data.load(config.dataset), as stored (uint8)
  input_mode(config, dataset)                                     # 'resident' or 'streaming'
  normalize = normalizer(config, dataset)                         # codes -> float32, applied on the device
  noisy, report = noisy_training_labels(config, dataset, key)     # config.noise applied to the clean labels
  write_classes(dataset, config, workdir)                         # WORKDIR/classes.json (datasets from disk)

Input modes (config.input): 'resident' puts the training split on every device as stored (uint8 images: 4x less
memory than float32) and gathers each batch there; 'streaming' reads each batch from the host or from disk with
Grain worker processes (noisy_jax.parallel.streaming), for data that does not fit; 'auto' (the default) keeps the data
resident when its training split takes at most config.input_budget_mib (DEFAULT_INPUT_BUDGET_MIB) and streams it
otherwise. Loaders of files (data.ON_DISK) then leave the files on disk until the choice is made: decoded in full
for resident input, one batch at a time when streaming. Both modes train the same network.

The trainer (noisy_jax.train.loop.fit) asks this module only how a dataset it is given reaches the devices
(`input_mode`, `normalizer`); what the dataset is and where its labels came from is decided here, before it.
"""

from __future__ import annotations

import json
import os

import jax
import numpy as np

from noisy_jax.core import errors
from noisy_jax.core import noise as noise_lib
from noisy_jax.core import pseudo_labels as pseudo_labels_lib

# config.noise.type for Joint Optimization's pseudo-label noise (noisy_jax.core.pseudo_labels): a fraction `rate` of the
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
      raise ValueError(
        f"noise type {DATASET_NOISE!r} uses the noisy labels that come with the dataset, but "
        f"dataset {getattr(dataset, 'name', '?')!r} has none (noisy_y_train is None); use e.g. "
        "dataset='cifar10_n' or 'cifar100_n', or another noise type."
      )
    noisy = np.asarray(noisy)
    return noisy, noise_lib.noise_report(dataset.y_train, noisy, dataset.num_classes)
  seed = int(jax.random.randint(key, (), 0, np.iinfo(np.int32).max))
  if noise_config.type == PSEUDO_LABEL_NOISE:
    features = pseudo_labels_lib.pca_features(
      host_features(config, dataset), int(noise_config.get("num_components", 50))
    )
    noisy, info = pseudo_labels_lib.corrupt_with_pseudo_labels(
      features, dataset.y_train, dataset.num_classes, float(noise_config.rate), seed=seed
    )
    return noisy, {**noise_lib.noise_report(dataset.y_train, noisy, dataset.num_classes), **info}
  transition = noise_lib.make_transition(
    noise_config.type, dataset.num_classes, float(noise_config.rate), dataset=noise_config.get("dataset") or None
  )
  noisy = noise_lib.corrupt_labels(dataset.y_train, transition, seed=seed, exact=bool(noise_config.exact))
  return noisy, noise_lib.noise_report(dataset.y_train, noisy, dataset.num_classes)


INPUT_MODES = ("auto", "resident", "streaming")
DEFAULT_INPUT_BUDGET_MIB = 2048  # 'auto': a training split up to this size (as stored) stays on the devices


def input_mode(config, dataset) -> str:
  """'resident' or 'streaming' for `dataset` under config.input (see the module docstring)."""
  from noisy_jax.core import _checks  # pylint: disable=g-import-not-at-top

  mode = config.get("input", "auto")
  _checks.check_choice("input", mode, INPUT_MODES)
  if mode != "auto":
    return mode
  budget = float(config.get("input_budget_mib", DEFAULT_INPUT_BUDGET_MIB))
  return "streaming" if dataset.x_train.nbytes > budget * 2**20 else "resident"


def normalizer(config, dataset):
  """The on-device normalisation of `dataset`'s inputs for config.normalization (default 'per_channel'):
  noisy_jax.data.normalization.fit, statistics of the training split."""
  from noisy_jax.data import normalization  # pylint: disable=g-import-not-at-top

  return normalization.fit(dataset, config.get("normalization", "per_channel"))


def host_features(config, dataset) -> np.ndarray:
  """The normalised training inputs as float32 on the host (what the PCA of pseudo-label noise works on):
  data.standardize with config.normalization ('imagenet': the same constants as on the device)."""
  from noisy_jax import data  # pylint: disable=g-import-not-at-top

  mode = config.get("normalization", "per_channel")
  if mode in data.STANDARDIZE_MODES:
    return data.standardize(dataset, mode).x_train
  return normalizer(config, dataset).numpy(dataset.load().x_train)


def dataset_kwargs(config) -> dict:
  """config.dataset_kwargs as a dict, without the entries that are None: an unset placeholder
  (`ml_collections.config_dict.placeholder(str)`, declared so that --config.dataset_kwargs.KEY=VALUE works on a
  locked config) leaves the loader's own default in place."""
  kwargs = config.get("dataset_kwargs") or {}
  kwargs = kwargs.to_dict() if hasattr(kwargs, "to_dict") else dict(kwargs)
  return {k: v for k, v in kwargs.items() if v is not None}


def check_arguments(config, flag_prefix: str = "--config.") -> None:
  """Stops a run whose dataset lacks a required argument of its loader (data.missing_arguments: the folder of the
  Clothing1M, mini-WebVision or ANIMAL-10N release, which no config can know), before anything is read, naming the
  flag that gives it (`flag_prefix` + 'dataset_kwargs.ARG'; a comparison's data settings are under 'shared.') and
  what it must name.

  Raises:
    errors.MissingInputError (a FileNotFoundError): naming the flag.
  """
  from noisy_jax import data  # pylint: disable=g-import-not-at-top

  missing = data.missing_arguments(config.dataset, dataset_kwargs(config))
  if missing:
    raise errors.MissingInputError(
      "; ".join(
        f"dataset {config.dataset!r} needs its {arg}: set {flag_prefix}dataset_kwargs.{arg}={text or '...'}"
        for arg, text in missing.items()
      )
      + "."
    )


def load_dataset(config):
  """The dataset of `config` as stored (not normalised: the trainer does that on the device, `normalizer`).

  A loader of files (data.ON_DISK) reads only the listing unless config.input is 'resident'; the splits are then
  decoded here when `input_mode` says resident, and the training split is left on disk for streaming (the val and
  test splits are decoded when each fits input_budget_mib, else streamed in order at evaluation). A dataset_kwargs
  `decode` given by the user wins. With dataset_kwargs on_bad_file='skip' (noisy_jax.data.bad_files) the files that
  cannot be decoded leave the splits decoded here and the evaluation splits left on disk; the streamed training
  split keeps them, masked when they are met.
  """
  from noisy_jax import data  # pylint: disable=g-import-not-at-top  (data loaders import heavy packages lazily)

  check_arguments(config)
  kwargs = dataset_kwargs(config)
  if config.get("input", "auto") != "resident" and config.dataset in data.ON_DISK:
    kwargs.setdefault("decode", False)
  dataset = data.load(config.dataset, **kwargs)
  if input_mode(config, dataset) == "resident":
    return dataset.load()
  # Streaming: the evaluation splits are read every epoch; those within the budget are decoded once here. Those
  # left on disk lose their undecodable files here too (on_bad_file='skip': one reading of every file).
  budget = float(config.get("input_budget_mib", DEFAULT_INPUT_BUDGET_MIB)) * 2**20
  resident = [s for s in ("val", "test") if getattr(dataset, f"x_{s}").nbytes <= budget]
  return dataset.load(resident).drop_bad_files([s for s in ("val", "test") if s not in resident])


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
