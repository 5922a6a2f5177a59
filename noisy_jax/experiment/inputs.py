"""A run's input settings read from its config: the one place where noisy_jax.data.inputs meets a config.

  settings = input_settings(config)               # data.inputs.InputSettings: dataset, kwargs, input, budget, ...
  noise = noise_settings(config)                  # data.inputs.NoiseSettings of config.noise
  dataset = load_dataset(config)                  # data.inputs.load_dataset(input_settings(config))
  noisy, report = noisy_training_labels(config, dataset, key)
  dataset = selection_dataset(config, dataset, key)  # y_val noisy when config.validation_labels is 'noisy'

and `input_mode`, `normalizer`, `check_arguments`, `write_classes` of a config likewise. A field left out of the
config takes the default that noisy_jax.data.inputs (or noisy_jax.data.normalization) names: DEFAULT_INPUT_MODE,
DEFAULT_INPUT_BUDGET_MIB, DEFAULT_NUM_COMPONENTS, normalization.DEFAULT_MODE.
"""

from __future__ import annotations

import jax

from noisy_jax.data import inputs as data_inputs
from noisy_jax.data import normalization as normalization_lib


def dataset_kwargs(config) -> dict:
  """config.dataset_kwargs as a dict, without the entries that are None: an unset placeholder
  (`ml_collections.config_dict.placeholder(str)`, declared so that --config.dataset_kwargs.KEY=VALUE works on a
  locked config) leaves the loader's own default in place."""
  kwargs = config.get("dataset_kwargs") or {}
  kwargs = kwargs.to_dict() if hasattr(kwargs, "to_dict") else dict(kwargs)
  return {k: v for k, v in kwargs.items() if v is not None}


def _mode(config) -> str:
  return config.get("input", data_inputs.DEFAULT_INPUT_MODE)


def _budget_mib(config) -> float:
  return float(config.get("input_budget_mib", data_inputs.DEFAULT_INPUT_BUDGET_MIB))


def _normalization(config) -> str:
  return config.get("normalization", normalization_lib.DEFAULT_MODE)


def validation_labels(config) -> str:
  """config.validation_labels: 'clean' (default) or 'noisy' (data.inputs.VALIDATION_LABELS)."""
  return config.get("validation_labels", "clean")


def selection_dataset(config, dataset, key: jax.Array):
  """The dataset a run trains and selects its model on: data.inputs.with_noisy_validation of config.noise and
  config.validation_labels, with the run's noise key."""
  return data_inputs.with_noisy_validation(noise_settings(config), dataset, key, validation_labels(config))


def input_settings(config) -> data_inputs.InputSettings:
  """The dataset and input fields of a run's `config` (or a comparison's `config.shared`)."""
  return data_inputs.InputSettings(
    dataset=config.dataset,
    dataset_kwargs=dataset_kwargs(config),
    input=_mode(config),
    input_budget_mib=_budget_mib(config),
    normalization=_normalization(config),
  )


def noise_settings(config) -> data_inputs.NoiseSettings:
  """config.noise: its type, rate and exact (required), dataset ('' or unset: None) and num_components."""
  noise = config.noise
  return data_inputs.NoiseSettings(
    type=noise.type,
    rate=float(noise.rate),
    exact=bool(noise.exact),
    dataset=noise.get("dataset") or None,
    num_components=int(noise.get("num_components", data_inputs.DEFAULT_NUM_COMPONENTS)),
  )


def load_dataset(config):
  """data.inputs.load_dataset of `config`'s input settings: the dataset as stored."""
  return data_inputs.load_dataset(input_settings(config))


def noisy_training_labels(config, dataset, key: jax.Array):
  """data.inputs.noisy_training_labels of config.noise (and config.normalization, for pseudo-label noise):
  (noisy labels, noise report)."""
  return data_inputs.noisy_training_labels(noise_settings(config), dataset, key, normalization=_normalization(config))


def input_mode(config, dataset) -> str:
  """'resident' or 'streaming' for `dataset` under config.input and config.input_budget_mib."""
  return data_inputs.input_mode(dataset, mode=_mode(config), budget_mib=_budget_mib(config))


def normalizer(config, dataset):
  """The on-device normalisation of `dataset` for config.normalization (data.inputs.normalizer)."""
  return data_inputs.normalizer(dataset, _normalization(config))


def check_arguments(config, flag_prefix: str = data_inputs.DEFAULT_FLAG_PREFIX) -> None:
  """data.inputs.check_arguments of config.dataset and its dataset_kwargs: a missing folder stops the run before
  anything is read, naming the flag (`flag_prefix` + 'dataset_kwargs.ARG')."""
  data_inputs.check_arguments(config.dataset, dataset_kwargs(config), flag_prefix)


def write_classes(dataset, config, workdir: str | None) -> str | None:
  """data.inputs.write_classes with config.dataset (dataset.name when unset) and its dataset_kwargs."""
  return data_inputs.write_classes(
    dataset, workdir, dataset_name=config.get("dataset"), dataset_kwargs=dataset_kwargs(config)
  )
