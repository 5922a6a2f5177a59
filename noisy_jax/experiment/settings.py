"""The config, read once: a stage's config (an ml_collections.ConfigDict or a dict) into the trainer's typed frozen
settings (noisy_jax.train.settings). A field the config leaves out takes the settings' default; nothing below the
experiment layer reads a config.

  fit = fit_settings(stage_config)              # train.settings.FitSettings, for train.loop.fit
  tx = optim.make_optimizer(optimizer_settings(config.optimizer), steps_per_epoch, num_epochs)
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

from noisy_jax.core import augment as augment_lib
from noisy_jax.core import autoaugment
from noisy_jax.parallel import xla_options
from noisy_jax.train import settings as settings_lib


def _optional(cast: Callable) -> Callable:
  return lambda value: None if value is None else cast(value)


def _names(value) -> tuple[str, ...]:
  if isinstance(value, str):
    raise ValueError(f"trainable_modules={value!r} must be a list of module names, not one string.")
  return tuple(str(name) for name in value or ())


def _epochs(value) -> tuple[int, ...]:
  return tuple(int(epoch) for epoch in value or ())


# How each optimizer field is read (None where the config may say None for the default).
_OPTIMIZER_CASTS = {
  "learning_rate": float,
  "name": str,
  "momentum": float,
  "nesterov": bool,
  "weight_decay": float,
  "lr_schedule": str,
  "lr_boundaries": _epochs,
  "lr_decay": float,
  "cosine_epochs": lambda value: value or None,  # checked where the schedule is built: 0 and None mean the default
  "lr_min": float,
  "lr_factors": lambda value: tuple(float(factor) for factor in value or ()),
  "grad_clip_norm": lambda value: float(value or 0.0),
  "l1": lambda value: float(value or 0.0),
  "backbone_lr_scale": float,
  "layer_decay": float,
  "trainable_modules": _names,
  "beta1": _optional(float),
  "beta2": _optional(float),
  "decay_start": int,
  "beta1_after": _optional(float),
}


def _plain(block) -> dict:
  """A config block (a ConfigDict, a dict or None) as a plain dict."""
  if block is None:
    return {}
  return dict(block.to_dict() if hasattr(block, "to_dict") else block)


def _fields(block, allowed: tuple[str, ...], what: str) -> dict:
  """`_plain(block)`; ValueError naming the fields it has that are not `allowed`."""
  fields = _plain(block)
  unknown = sorted(set(fields) - set(allowed))
  if unknown:
    raise ValueError(f"Unknown {what} field(s) {unknown}; allowed: {', '.join(map(repr, allowed))}.")
  return fields


def optimizer_settings(optimizer_config) -> settings_lib.OptimizerSettings:
  """train.settings.OptimizerSettings of a config's optimizer block.

  Raises:
    ValueError: a field the optimiser does not have (listing those it has), no learning_rate, or a value that is not
      of the field's type.
  """
  fields = _fields(optimizer_config, tuple(_OPTIMIZER_CASTS), "optimizer")
  if "learning_rate" not in fields:
    raise ValueError("The optimizer config has no learning_rate (the base lr every optimiser needs).")
  return settings_lib.OptimizerSettings(**{name: _OPTIMIZER_CASTS[name](value) for name, value in fields.items()})


def augment_fields(augment_config) -> dict[str, Any] | None:
  """The weak augmentation's fields of a config's augment block (crop_padding, flip; None when it has none)."""
  fields = _fields(augment_config, augment_lib.AUGMENT_FIELDS, "augment")
  fields.pop("strong", None)
  return fields or None


def strong_augment_fields(augment_config) -> dict[str, Any] | None:
  """The strong view's fields of a config's augment block (its `strong`; None when absent or None)."""
  strong = _plain(augment_config).get("strong")
  if strong is None:
    return None
  return _fields(strong, autoaugment.STRONG_AUGMENT_FIELDS, "strong augment")


def config_json(config) -> dict:
  """The config as plain JSON types (tuples become lists): what a checkpoint stores and a resumed run is checked
  against (train.checkpoint.check_compatible)."""
  return json.loads(json.dumps(_plain(config), default=repr))


def _get(config, name: str, default: Any) -> Any:
  value = config.get(name, default) if hasattr(config, "get") else default
  return default if value is None and default is not None else value


def _default(name: str) -> Any:
  return next(f.default for f in dataclasses.fields(settings_lib.FitSettings) if f.name == name)


# FitSettings' fields read straight from the config's top level, with their casts.
_FIT_CASTS = {
  "eval_train": bool,
  "input": str,
  "input_budget_mib": float,
  "input_workers": int,
  "normalization": str,
  "epoch_mode": str,
  "member_map": str,
  "gpu_deterministic": bool,
  "label_table_sharding": str,
  "label_table_budget_mib": float,
  "checkpoint_every": int,
  "checkpoint_every_steps": int,
  "keep_checkpoints": int,
}


def fit_settings(config) -> settings_lib.FitSettings:
  """train.settings.FitSettings of one stage's config (batch_size, num_epochs, optimizer, model.name and the
  top-level fields of `_FIT_CASTS`; the rest of the config only as `config_json`, what a checkpoint is checked
  against).

  Raises:
    ValueError: no batch_size, num_epochs or optimizer; from `optimizer_settings` and the augment blocks' fields.
  """
  values = _plain(config)
  missing = [name for name in ("batch_size", "num_epochs", "optimizer") if name not in values]
  if missing:
    raise ValueError(f"The config has no {', '.join(missing)} (every training stage needs them).")
  seed, model = values.get("seed"), values.get("model") or {}
  return settings_lib.FitSettings(
    batch_size=int(values["batch_size"]),
    num_epochs=int(values["num_epochs"]),
    optimizer=optimizer_settings(values["optimizer"]),
    model_name=str(model.get("name", "")),
    seed=None if seed is None else int(seed),
    config_json=config_json(values),
    augment=augment_fields(values.get("augment")),
    strong_augment=strong_augment_fields(values.get("augment")),
    **{name: fit_field(values, name) for name in _FIT_CASTS},
  )


def fit_field(config, name: str) -> Any:
  """One of FitSettings' top-level fields (`_FIT_CASTS`) of `config`, its default when the config leaves it out."""
  return _FIT_CASTS[name](_get(config, name, _default(name)))


def compiler_options(config, model, platform: str) -> dict[str, str | bool] | None:
  """xla_options.compiler_options of `model` on `platform` for a run of `config` (GPU determinism as its
  gpu_deterministic says, FitSettings' default when unset): the options `fit` compiles with."""
  return xla_options.compiler_options(model, platform, deterministic=fit_field(config, "gpu_deterministic"))
