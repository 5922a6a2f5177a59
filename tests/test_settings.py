"""noisy_jax.experiment.settings: the config read once into the trainer's typed frozen settings (train.settings), each
default in one place (the settings' fields), bad fields named."""

import dataclasses

import ml_collections
import pytest

from experiments.configs import base
from experiments.configs import ce
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.train import settings as train_settings


def _minimal(**top):
  return ml_collections.ConfigDict(
    {"batch_size": 32, "num_epochs": 3, "optimizer": {"learning_rate": 0.05}, "model": {"name": "mlp"}, **top}
  )


def test_a_config_that_leaves_every_field_out_gets_the_settings_defaults():
  config = _minimal()
  got = settings_lib.fit_settings(config)
  assert got == train_settings.FitSettings(
    batch_size=32,
    num_epochs=3,
    optimizer=train_settings.OptimizerSettings(learning_rate=0.05),
    model_name="mlp",
    config_json=settings_lib.config_json(config),
  )
  for name in settings_lib._FIT_CASTS:
    assert settings_lib.fit_field(config, name) == getattr(got, name), name


def test_each_field_the_config_sets_is_read_and_cast():
  config = _minimal(
    seed=7,
    eval_train=1,
    input="streaming",
    input_budget_mib="512",
    input_workers=2,
    normalization="none",
    epoch_mode="steps",
    member_map="loop",
    gpu_deterministic=False,
    label_table_sharding="sharded",
    label_table_budget_mib=64,
    checkpoint_every=3,
    checkpoint_every_steps=10,
    keep_checkpoints=4,
    augment={"crop_padding": 4, "flip": True, "strong": {"policy": "none", "cutout": 16}},
  )
  config.optimizer = ml_collections.ConfigDict(
    {
      "name": "adam",
      "learning_rate": 1,
      "lr_boundaries": (3, 5.0),
      "trainable_modules": ["layer4", "linear"],
      "beta1": 0.5,
      "cosine_epochs": 0,
      "grad_clip_norm": None,
    }
  )
  got = settings_lib.fit_settings(config)
  assert (got.seed, got.eval_train, got.input, got.input_budget_mib, got.input_workers) == (
    7,
    True,
    "streaming",
    512.0,
    2,
  )
  assert (got.normalization, got.epoch_mode, got.member_map, got.gpu_deterministic) == ("none", "steps", "loop", False)
  assert (got.label_table_sharding, got.label_table_budget_mib) == ("sharded", 64.0)
  assert (got.checkpoint_every, got.checkpoint_every_steps, got.keep_checkpoints) == (3, 10, 4)
  assert got.augment == {"crop_padding": 4, "flip": True}
  assert got.strong_augment == {"policy": "none", "cutout": 16}
  opt = got.optimizer
  assert (opt.name, opt.learning_rate, opt.lr_boundaries, opt.trainable_modules) == (
    "adam",
    1.0,
    (3, 5),
    ("layer4", "linear"),
  )
  assert (opt.beta1, opt.beta2, opt.cosine_epochs, opt.grad_clip_norm) == (0.5, None, None, 0.0)
  assert isinstance(opt.learning_rate, float) and isinstance(got.input_budget_mib, float)
  assert got.config_json["optimizer"]["lr_boundaries"] == [3, 5.0]  # what a checkpoint compares, as JSON
  with pytest.raises(dataclasses.FrozenInstanceError):
    got.batch_size = 64


def test_a_dict_and_a_config_dict_read_the_same():
  config = _minimal(augment={"flip": True})
  assert settings_lib.fit_settings(config.to_dict()) == settings_lib.fit_settings(config)


def test_the_base_config_sets_the_settings_defaults():
  """Where experiments/configs/base.py spells out a field the trainer reads, it spells the trainer's default, but
  one: the shipped configs decode streamed images in worker processes (input_workers -1: one per core but one),
  where a config that leaves the field out (a library user's) decodes in the training process (0)."""
  config = base.get_shared()
  defaults = train_settings.FitSettings(batch_size=1, num_epochs=1, optimizer=None)
  spelled = [name for name in settings_lib._FIT_CASTS if name in config]
  assert "checkpoint_every" in spelled and "input" in spelled
  differing = {
    name: (settings_lib.fit_field(config, name), getattr(defaults, name))
    for name in spelled
    if settings_lib.fit_field(config, name) != getattr(defaults, name)
  }
  assert differing == {"input_workers": (-1, 0)}


@pytest.mark.parametrize(
  "optimizer,match",
  [
    (
      {"learning_rate": 0.1, "learnig_rate": 0.1},
      r"Unknown optimizer field\(s\) \['learnig_rate'\]; allowed: 'learning",
    ),
    ({"momentum": 0.9}, r"no learning_rate"),
    ({"learning_rate": 0.1, "trainable_modules": "linear"}, r"trainable_modules='linear' must be a list"),
    ({"learning_rate": "fast"}, r"could not convert string to float: 'fast'"),
  ],
)
def test_bad_optimizer_fields_are_named(optimizer, match):
  with pytest.raises(ValueError, match=match):
    settings_lib.optimizer_settings(optimizer)


def test_a_config_without_what_training_needs_is_named():
  with pytest.raises(ValueError, match=r"The config has no num_epochs, optimizer"):
    settings_lib.fit_settings({"batch_size": 8})


def test_bad_augment_fields_are_named():
  with pytest.raises(ValueError, match=r"Unknown augment field\(s\) \['cutout'\]; allowed: 'crop_padding', 'flip'"):
    settings_lib.fit_settings(_minimal(augment={"cutout": 8}))
  with pytest.raises(ValueError, match=r"Unknown strong augment field\(s\) \['polcy'\]"):
    settings_lib.fit_settings(_minimal(augment={"strong": {"polcy": "randaugment"}}))


def test_every_shipped_default_config_reads():
  """The default experiment's config reads without error and with its own values."""
  config = ce.get_config()
  got = settings_lib.fit_settings(config)
  assert (got.batch_size, got.num_epochs, got.optimizer.learning_rate) == (
    config.batch_size,
    config.num_epochs,
    config.optimizer.learning_rate,
  )
