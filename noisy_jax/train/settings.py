"""What the trainer reads of a run, as typed frozen values: `OptimizerSettings` (train.optim) and `FitSettings`
(train.loop.fit). Each field's default here is the one every run gets when its config leaves the field out: the
experiment layer reads the config once into these (noisy_jax.experiment.settings) and nothing below it reads a
config.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from noisy_jax.data import inputs as inputs_lib
from noisy_jax.data import normalization
from noisy_jax.parallel import streaming
from noisy_jax.parallel import table_sharding
from noisy_jax.parallel import xla_options

DEFAULT_CHECKPOINT_EVERY = 5  # epochs between a stage's checkpoints (0: none; the last epoch is always written)
DEFAULT_KEEP_CHECKPOINTS = 2
DEFAULT_BACKBONE_LR_SCALE = 1.0  # experiments/configs/base.py's optimizer() sets the same


@dataclasses.dataclass(frozen=True)
class OptimizerSettings:
  """A run's optimiser (noisy_jax.train.optim's module docstring has each field's meaning).

  beta1, beta2, beta1_after None: the optimiser's own (Adam's optim.ADAM_BETAS; coteaching_adam's ORIGINAL_BETA1 and
  ORIGINAL_BETA1_AFTER). cosine_epochs None (or 0): the stage's num_epochs. trainable_modules (): every parameter
  trains.
  """

  learning_rate: float
  name: str = "sgd"
  momentum: float = 0.9
  nesterov: bool = False
  weight_decay: float = 0.0
  lr_schedule: str = "piecewise"
  lr_boundaries: tuple[int, ...] = ()
  lr_decay: float = 0.1
  cosine_epochs: int | None = None
  lr_min: float = 0.0
  lr_factors: tuple[float, ...] = ()
  grad_clip_norm: float = 0.0
  l1: float = 0.0
  backbone_lr_scale: float = DEFAULT_BACKBONE_LR_SCALE
  layer_decay: float = 1.0
  trainable_modules: tuple[str, ...] = ()
  beta1: float | None = None
  beta2: float | None = None
  decay_start: int = 80
  beta1_after: float | None = None


@dataclasses.dataclass(frozen=True)
class FitSettings:
  """What `train.loop.fit` reads of one stage of a run.

  Attributes:
    batch_size, num_epochs: the stage's batch size and epochs.
    optimizer: its OptimizerSettings.
    model_name: the model's registry name (how a pair of networks maps over devices depends on it).
    seed: the run's seed (None: none given), and config_json, the stage's whole config as JSON types: what a
      checkpoint must have been written with to be resumed (train.checkpoint.check_compatible).
    eval_train: also score the training split each epoch.
    input, input_budget_mib, input_workers, normalization: how the data reaches the devices
      (noisy_jax.data.inputs.input_mode and normalizer; streaming's workers, < 0: one per core).
    epoch_mode: 'auto' | 'scan' | 'steps' (train.epoch.resolve_epoch_mode).
    augment: the weak augmentation's fields (core.augment.AUGMENT_FIELDS), or None; strong_augment the strong
      view's (core.autoaugment.STRONG_AUGMENT_FIELDS), or None.
    member_map: how a pair of networks maps over devices ('auto': train.members).
    gpu_deterministic: XLA's deterministic GPU ops (parallel.xla_options).
    label_table_sharding, label_table_budget_mib: when the label table is split over devices (table_sharding).
    checkpoint_every, checkpoint_every_steps, keep_checkpoints: epochs between checkpoints, steps between
      mid-epoch ones (0: none), how many to keep.
  """

  batch_size: int
  num_epochs: int
  optimizer: OptimizerSettings
  model_name: str = ""
  seed: int | None = None
  config_json: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  eval_train: bool = False
  input: str = inputs_lib.DEFAULT_INPUT_MODE
  input_budget_mib: float = inputs_lib.DEFAULT_INPUT_BUDGET_MIB
  input_workers: int = streaming.DEFAULT_WORKERS
  normalization: str = normalization.DEFAULT_MODE
  epoch_mode: str = "auto"
  augment: Mapping[str, Any] | None = None
  strong_augment: Mapping[str, Any] | None = None
  member_map: str = "auto"
  gpu_deterministic: bool = xla_options.DEFAULT_GPU_DETERMINISTIC
  label_table_sharding: str = table_sharding.DEFAULT_SHARDING
  label_table_budget_mib: float = table_sharding.DEFAULT_BUDGET_MIB
  checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY
  checkpoint_every_steps: int = 0
  keep_checkpoints: int = DEFAULT_KEEP_CHECKPOINTS
