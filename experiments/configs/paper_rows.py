"""The row strings of the paper configs that take 'DATASET,NOISE,RATE[,OPTION]' or 'DATASET,LABELS[,OPTION]'
(t_revision_paper.py, pes_paper.py): `parse_row` checks one against the config's allowed values, `row_data` sets a
row's data."""

from __future__ import annotations

from typing import Mapping, Sequence

import ml_collections

from experiments.configs import base


def parse_row(
  arg: str,
  *,
  config_name: str,
  datasets: Sequence[str],
  rates: Mapping[str, Sequence[float]],
  human_labels: Mapping[str, Sequence[str]],
  options: Sequence[str],
) -> tuple[str, str, float | str, str | None]:
  """(dataset, noise or 'human', rate or labels, option or None) of `arg`: 'DATASET,NOISE,RATE[,OPTION]' for a
  dataset with synthetic noise (NOISE a key of `rates`, RATE one of its rates), 'DATASET,LABELS[,OPTION]' for one of
  `human_labels`.

  Raises:
    ValueError: naming `config_name`, the bad part of `arg` and the values allowed there.
  """
  parts = [p.strip() for p in arg.split(",")]
  noise_word = "NOISE" if len(rates) > 1 else next(iter(rates))
  form = f"DATASET,{noise_word},RATE[,{'|'.join(options)}] or DATASET,LABELS[,{'|'.join(options)}]"
  if parts[0] not in datasets:
    raise ValueError(f"{config_name}: unknown dataset {parts[0]!r} in {arg!r}; allowed: {', '.join(datasets)}.")
  dataset = parts[0]
  size = 2 if dataset in human_labels else 3
  if len(parts) not in (size, size + 1):
    raise ValueError(f"{config_name} config string {arg!r} must be {form}.")
  option = parts[size] if len(parts) == size + 1 else None
  if option is not None and option not in options:
    raise ValueError(f"{config_name}: unknown option {option!r} in {arg!r}; allowed: {', '.join(options)}.")
  if dataset in human_labels:
    if parts[1] not in human_labels[dataset]:
      allowed = ", ".join(human_labels[dataset])
      raise ValueError(f"{config_name}: unknown labels {parts[1]!r} for {dataset} in {arg!r}; allowed: {allowed}.")
    return dataset, "human", parts[1], option
  noise = parts[1]
  if noise not in rates:
    raise ValueError(f"{config_name}: unknown noise {noise!r} in {arg!r}; allowed: {', '.join(rates)}.")
  try:
    rate = float(parts[2])
  except ValueError:
    rate = None
  if rate not in rates[noise]:
    allowed = ", ".join(map(str, rates[noise]))
    raise ValueError(f"{config_name}: RATE {parts[2]!r} for {noise} in {arg!r}; allowed: {allowed}.")
  return dataset, noise, rate, option


def row_data(
  config: ml_collections.ConfigDict,
  dataset: str,
  noise: str,
  rate_or_labels: float | str,
  *,
  validation_size: int,
  human_validation_size: int | None = None,
  noise_dataset: str = "",
) -> ml_collections.ConfigDict:
  """`config` with the data (base.paper_data) of a row that `parse_row` returned (`dataset`, `noise`, `rate_or_labels`):
  for noise 'human' the dataset's own labels `rate_or_labels` (noise type 'dataset' at rate 0,
  dataset_kwargs.noise_key) with `human_validation_size` examples held out (None: `validation_size`); else noise of
  type `noise` at rate `rate_or_labels` (`noise_dataset`: the class map of 'asymmetric') with `validation_size`."""
  if noise == "human":
    if human_validation_size is None:
      human_validation_size = validation_size
    base.paper_data(config, dataset, noise_type="dataset", rate=0.0, validation_size=human_validation_size)
    config.dataset_kwargs.noise_key = rate_or_labels
  else:
    base.paper_data(
      config,
      dataset,
      noise_type=noise,
      rate=rate_or_labels,
      noise_dataset=noise_dataset,
      validation_size=validation_size,
    )
  return config
