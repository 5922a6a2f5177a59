"""The input side of a run: the dataset it names, how it reaches the devices, and its noisy training labels.

  dataset = load_dataset(settings)                                # data.load(settings.dataset), as stored (uint8)
  input_mode(dataset, mode=..., budget_mib=...)                   # 'resident' or 'streaming'
  normalize = normalizer(dataset, normalization)                  # codes -> float32, applied on the device
  noisy, report = noisy_training_labels(noise, dataset, key, normalization=...)  # the noise applied to clean labels
  dataset = with_noisy_validation(noise, dataset, key)            # selection on noisy validation labels (optional)
  write_classes(dataset, workdir, dataset_name=..., dataset_kwargs=...)          # WORKDIR/classes.json

Every function takes plain values or the frozen settings below (InputSettings, NoiseSettings); a run's config is
read into them by noisy_jax.experiment.inputs, which also offers each of these functions for a config.

Input modes (a run's `input`): 'resident' puts the training split on every device as stored (uint8 images: 4x less
memory than float32) and gathers each batch there; 'streaming' reads each batch from the host or from disk with
Grain worker processes (noisy_jax.parallel.streaming), for data that does not fit; 'auto' (DEFAULT_INPUT_MODE) keeps
the data resident when its training split takes at most `input_budget_mib` (DEFAULT_INPUT_BUDGET_MIB) and streams it
otherwise. Loaders of files (data.ON_DISK) then leave the files on disk until the choice is made: decoded in full
for resident input, one batch at a time when streaming. Both modes train the same network.

The trainer (noisy_jax.train.loop.fit) asks this module only how a dataset it is given reaches the devices
(`input_mode`, `normalizer`); what the dataset is and where its labels came from is decided here, before it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Mapping

import jax
import numpy as np

from noisy_jax.core import errors
from noisy_jax.core import noise as noise_lib
from noisy_jax.core import pseudo_labels as pseudo_labels_lib
from noisy_jax.data import normalization as normalization_lib

# noise.type for Joint Optimization's pseudo-label noise (noisy_jax.core.pseudo_labels): a fraction `rate` of the
# training set takes the class matched to its k-means cluster of PCA features (`num_components`,
# DEFAULT_NUM_COMPONENTS).
PSEUDO_LABEL_NOISE = "pseudo_labels"
DEFAULT_NUM_COMPONENTS = 50
# noise.type for labels that come with the dataset (`dataset.noisy_y_train`, e.g. CIFAR-10N/100N's human labels):
# used as they are; `rate` and `exact` are ignored, the report measures the real noise.
DATASET_NOISE = "dataset"
# How a run's validation split is labelled for model selection (a run's `validation_labels`): 'clean' (the dataset's
# clean labels) or 'noisy' (`with_noisy_validation`: the labels a user of noisy data would have).
VALIDATION_LABELS = ("clean", "noisy")
VALIDATION_NOISE_STREAM = 0x76616C  # the fold of the run's noise key that draws the validation rows' noise

INPUT_MODES = ("auto", "resident", "streaming")
DEFAULT_INPUT_MODE = "auto"
DEFAULT_INPUT_BUDGET_MIB = 2048  # 'auto': a training split up to this size (as stored) stays on the devices
DEFAULT_FLAG_PREFIX = "--config."  # how a run's data settings are given on the command line


@dataclasses.dataclass(frozen=True)
class NoiseSettings:
  """How the clean training labels are corrupted (a run's `noise` section).

  type: a noise model of noise_lib.make_transition, PSEUDO_LABEL_NOISE or DATASET_NOISE. rate: its noise rate.
  exact: flip exactly round(rate N) labels (noise_lib.corrupt_labels) instead of each with probability rate.
  dataset: the dataset a noise model is defined for (None: none). num_components: the PCA dimensions of
  pseudo-label noise.
  """

  type: str
  rate: float
  exact: bool
  dataset: str | None
  num_components: int


@dataclasses.dataclass(frozen=True)
class InputSettings:
  """Which dataset a run loads and how its inputs reach the devices (the module docstring).

  dataset: a loader's name (data.load). dataset_kwargs: the loader's arguments (unset ones left out, the loader's
  defaults then apply). input: one of INPUT_MODES. input_budget_mib: the budget of 'auto' and of decoding the
  evaluation splits when streaming. normalization: a mode of noisy_jax.data.normalization.
  """

  dataset: str
  dataset_kwargs: Mapping[str, Any]
  input: str
  input_budget_mib: float
  normalization: str


def noisy_training_labels(noise: NoiseSettings, dataset, key: jax.Array, *, normalization: str):
  """Corrupts the clean training labels as `noise` says; returns (noisy labels, noise report). `normalization`:
  the run's, for the features of pseudo-label noise (`host_features`)."""
  if noise.type == DATASET_NOISE:
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
  if noise.type == PSEUDO_LABEL_NOISE:
    features = pseudo_labels_lib.pca_features(host_features(dataset, normalization), int(noise.num_components))
    noisy, info = pseudo_labels_lib.corrupt_with_pseudo_labels(
      features, dataset.y_train, dataset.num_classes, float(noise.rate), seed=seed
    )
    return noisy, {**noise_lib.noise_report(dataset.y_train, noisy, dataset.num_classes), **info}
  transition = noise_lib.make_transition(noise.type, dataset.num_classes, float(noise.rate), dataset=noise.dataset)
  noisy = noise_lib.corrupt_labels(dataset.y_train, transition, seed=seed, exact=bool(noise.exact))
  return noisy, noise_lib.noise_report(dataset.y_train, noisy, dataset.num_classes)


def noisy_validation_labels(noise: NoiseSettings, dataset, key: jax.Array) -> np.ndarray:
  """The validation rows' noisy labels [N_val]: the dataset's own (`dataset.noisy_y_val`, CIFAR-N's human labels)
  for noise type DATASET_NOISE; otherwise the clean labels corrupted by the same noise model as the training rows
  (its transition, rate and exactness) with their own draw, fold_in(key, VALIDATION_NOISE_STREAM).

  Raises:
    ValueError: noise type DATASET_NOISE on a dataset without noisy_y_val, or PSEUDO_LABEL_NOISE (its labels come
      from clustering the training split: there is no such model of the validation rows).
  """
  if noise.type == DATASET_NOISE:
    noisy = getattr(dataset, "noisy_y_val", None)
    if noisy is None:
      raise ValueError(
        f"validation_labels='noisy' with noise type {DATASET_NOISE!r} needs the dataset's own validation labels, "
        f"but dataset {getattr(dataset, 'name', '?')!r} has none (noisy_y_val is None); CIFAR-10N / CIFAR-100N have "
        "them, or use validation_labels='clean'."
      )
    return np.asarray(noisy)
  if noise.type == PSEUDO_LABEL_NOISE:
    raise ValueError(
      f"validation_labels='noisy' is not defined for noise type {PSEUDO_LABEL_NOISE!r} (its labels come from "
      "clustering the training split); use validation_labels='clean'."
    )
  val_key = jax.random.fold_in(key, VALIDATION_NOISE_STREAM)
  seed = int(jax.random.randint(val_key, (), 0, np.iinfo(np.int32).max))
  transition = noise_lib.make_transition(noise.type, dataset.num_classes, float(noise.rate), dataset=noise.dataset)
  return noise_lib.corrupt_labels(dataset.y_val, transition, seed=seed, exact=bool(noise.exact))


def with_noisy_validation(noise: NoiseSettings, dataset, key: jax.Array, validation_labels: str = "noisy"):
  """`dataset` as a run selects its model on it: itself for validation_labels 'clean', else a copy whose y_val are
  `noisy_validation_labels` (the training rows and every other split unchanged). ValueError naming a label choice
  outside VALIDATION_LABELS."""
  from noisy_jax.core import _checks  # pylint: disable=g-import-not-at-top

  _checks.check_choice("validation_labels", validation_labels, VALIDATION_LABELS)
  if validation_labels == "clean" or not len(dataset.y_val):
    return dataset
  return dataclasses.replace(dataset, y_val=noisy_validation_labels(noise, dataset, key))


def input_mode(dataset, *, mode: str, budget_mib: float) -> str:
  """'resident' or 'streaming' for `dataset` under input mode `mode` (one of INPUT_MODES) and the budget of 'auto'
  (see the module docstring)."""
  from noisy_jax.core import _checks  # pylint: disable=g-import-not-at-top

  _checks.check_choice("input", mode, INPUT_MODES)
  if mode != "auto":
    return mode
  return "streaming" if dataset.x_train.nbytes > float(budget_mib) * 2**20 else "resident"


def normalizer(dataset, normalization: str):
  """The on-device normalisation of `dataset`'s inputs for mode `normalization`: noisy_jax.data.normalization.fit,
  statistics of the training split."""
  return normalization_lib.fit(dataset, normalization)


def host_features(dataset, normalization: str) -> np.ndarray:
  """The normalised training inputs as float32 on the host (what the PCA of pseudo-label noise works on):
  data.standardize with mode `normalization` ('imagenet': the same constants as on the device)."""
  from noisy_jax import data  # pylint: disable=g-import-not-at-top

  if normalization in data.STANDARDIZE_MODES:
    return data.standardize(dataset, normalization).x_train
  return normalizer(dataset, normalization).numpy(dataset.load().x_train)


def check_arguments(
  dataset_name: str, dataset_kwargs: Mapping[str, Any], flag_prefix: str = DEFAULT_FLAG_PREFIX
) -> None:
  """Stops a run whose dataset lacks a required argument of its loader (data.missing_arguments: the folder of the
  Clothing1M, mini-WebVision or ANIMAL-10N release, which no config can know), before anything is read, naming the
  flag that gives it (`flag_prefix` + 'dataset_kwargs.ARG'; a comparison's data settings are under 'shared.') and
  what it must name.

  Raises:
    errors.MissingInputError (a FileNotFoundError): naming the flag.
  """
  from noisy_jax import data  # pylint: disable=g-import-not-at-top

  missing = data.missing_arguments(dataset_name, dict(dataset_kwargs))
  if missing:
    raise errors.MissingInputError(
      "; ".join(
        f"dataset {dataset_name!r} needs its {arg}: set {flag_prefix}dataset_kwargs.{arg}={text or '...'}"
        for arg, text in missing.items()
      )
      + "."
    )


def load_dataset(settings: InputSettings):
  """The dataset of `settings` as stored (not normalised: the trainer does that on the device, `normalizer`).

  A loader of files (data.ON_DISK) reads only the listing unless settings.input is 'resident'; the splits are then
  decoded here when `input_mode` says resident, and the training split is left on disk for streaming (the val and
  test splits are decoded when each fits input_budget_mib, else streamed in order at evaluation). A dataset_kwargs
  `decode` given by the user wins. With dataset_kwargs on_bad_file='skip' (noisy_jax.data.bad_files) the files that
  cannot be decoded leave the splits decoded here and the evaluation splits left on disk; the streamed training
  split keeps them, masked when they are met.
  """
  from noisy_jax import data  # pylint: disable=g-import-not-at-top  (data loaders import heavy packages lazily)

  check_arguments(settings.dataset, settings.dataset_kwargs)
  kwargs = dict(settings.dataset_kwargs)
  if settings.input != "resident" and settings.dataset in data.ON_DISK:
    kwargs.setdefault("decode", False)
  dataset = data.load(settings.dataset, **kwargs)
  if input_mode(dataset, mode=settings.input, budget_mib=settings.input_budget_mib) == "resident":
    return dataset.load()
  # Streaming: the evaluation splits are read every epoch; those within the budget are decoded once here. Those
  # left on disk lose their undecodable files here too (on_bad_file='skip': one reading of every file).
  budget = float(settings.input_budget_mib) * 2**20
  resident = [s for s in ("val", "test") if getattr(dataset, f"x_{s}").nbytes <= budget]
  return dataset.load(resident).drop_bad_files([s for s in ("val", "test") if s not in resident])


CLASSES_FILE = "classes.json"
_PATH_KWARGS = ("root", "manifest", "path", "data_dir")  # dataset_kwargs that name files: written absolute


def write_classes(
  dataset, workdir: str | None, *, dataset_name: str | None, dataset_kwargs: Mapping[str, Any]
) -> str | None:
  """Writes WORKDIR/classes.json when the dataset names its classes (datasets from disk); returns its path.

  Content: {"class_names": [name of class 0, ...], "source": {"dataset": dataset_name, **dataset_kwargs}} (the
  name: dataset.name when `dataset_name` is None) with file and folder paths made absolute, so that class ids in
  the run's outputs can be read back as names and the data found again. Nothing is written for a dataset without
  class_names or without a workdir. The caller writes from one process only (process 0, as summary.json).
  """
  names = getattr(dataset, "class_names", None)
  if names is None or not workdir:
    return None
  source = {"dataset": getattr(dataset, "name", None) if dataset_name is None else dataset_name}
  source.update(
    {k: os.path.abspath(v) if k in _PATH_KWARGS and isinstance(v, str) else v for k, v in dataset_kwargs.items()}
  )
  os.makedirs(workdir, exist_ok=True)
  path = os.path.join(workdir, CLASSES_FILE)
  with open(path, "w") as f:
    json.dump({"class_names": list(names), "source": source}, f, indent=1, default=str)
  return path
