"""Model selection on noisy validation labels (config.validation_labels, noisy_jax.data.inputs.with_noisy_validation):
the labels drawn, the dataset's own human ones, the refusals, and a run whose training is untouched while its
validation scores move to the noisy labels."""

import dataclasses

import jax
import numpy as np
import pytest

from experiments.configs import tiny
from noisy_jax import data
from noisy_jax.core import noise as noise_lib
from noisy_jax.data import arrays
from noisy_jax.data import inputs
from noisy_jax.experiment import runs
from noisy_jax.experiment import sweep_grid


def _dataset(num_val=200, num_classes=4, seed=0):
  rng = np.random.default_rng(seed)
  y = lambda n: np.repeat(np.arange(num_classes), n // num_classes)
  x = lambda n: rng.normal(size=(n, 3)).astype(np.float32)
  return arrays.Dataset(
    name="toy",
    num_classes=num_classes,
    x_train=x(40),
    y_train=y(40),
    x_val=x(num_val),
    y_val=y(num_val),
    x_test=x(8),
    y_test=y(8),
  )


def _noise(type_="symmetric", rate=0.4, exact=True):
  return inputs.NoiseSettings(type=type_, rate=rate, exact=exact, dataset=None, num_components=50)


def test_clean_keeps_the_dataset():
  dataset = _dataset()
  assert inputs.with_noisy_validation(_noise(), dataset, jax.random.key(0), "clean") is dataset


@pytest.mark.parametrize("type_,rate", [("symmetric", 0.4), ("pairflip", 0.3), ("symmetric", 0.0)])
def test_noisy_labels_follow_the_training_noise_model_with_their_own_draw(type_, rate):
  """Exact noise flips round(rate n_c) of each class's 50 rows, as noise_lib.corrupt_labels with the transition and
  the seed of fold_in(key, VALIDATION_NOISE_STREAM); only y_val changes."""
  dataset, key = _dataset(), jax.random.key(3)
  noisy = inputs.with_noisy_validation(_noise(type_, rate), dataset, key)
  flipped = noisy.y_val != dataset.y_val
  for c in range(4):
    assert np.sum(flipped[dataset.y_val == c]) == round(rate * 50)
  seed = int(jax.random.randint(jax.random.fold_in(key, inputs.VALIDATION_NOISE_STREAM), (), 0, 2**31 - 1))
  want = noise_lib.corrupt_labels(dataset.y_val, noise_lib.make_transition(type_, 4, rate), seed=seed, exact=True)
  np.testing.assert_array_equal(noisy.y_val, want)
  for field in ("x_train", "y_train", "x_val", "x_test", "y_test"):
    np.testing.assert_array_equal(getattr(noisy, field), getattr(dataset, field))
  again = inputs.with_noisy_validation(_noise(type_, rate), dataset, key)
  np.testing.assert_array_equal(again.y_val, noisy.y_val)


def test_the_draw_is_not_the_training_draw():
  """Validation rows get their own flips: with as many rows as the training split, the two draws differ."""
  dataset, key = _dataset(num_val=40), jax.random.key(1)
  val = inputs.noisy_validation_labels(_noise(), dataset, key)
  train, _ = inputs.noisy_training_labels(_noise(), dataset, key, normalization="none")
  assert not np.array_equal(val != dataset.y_val, train != dataset.y_train)


def test_dataset_noise_uses_the_datasets_own_validation_labels():
  dataset = _dataset()
  human = (dataset.y_val + 1) % 4
  with_human = dataclasses.replace(dataset, noisy_y_train=dataset.y_train, noisy_y_val=human)
  noisy = inputs.with_noisy_validation(_noise("dataset", 0.0), with_human, jax.random.key(0))
  np.testing.assert_array_equal(noisy.y_val, human)
  with pytest.raises(ValueError, match="dataset 'toy' has none \\(noisy_y_val is None\\)"):
    inputs.with_noisy_validation(_noise("dataset", 0.0), dataset, jax.random.key(0))


def test_refusals_name_the_bad_value():
  dataset = _dataset()
  with pytest.raises(ValueError, match="validation_labels 'dirty'"):
    inputs.with_noisy_validation(_noise(), dataset, jax.random.key(0), "dirty")
  with pytest.raises(ValueError, match="not defined for noise type 'pseudo_labels'"):
    inputs.with_noisy_validation(_noise("pseudo_labels", 0.2), dataset, jax.random.key(0))
  with pytest.raises(ValueError, match="noisy_y_val has 3 labels but the validation split has 200 rows"):
    dataclasses.replace(dataset, noisy_y_val=np.zeros(3, np.int32))
  sweep = tiny.get_config("ce")
  sweep.validation_labels = "noisy"
  sweep.sweep = {"seeds": (0, 1)}
  with pytest.raises(ValueError, match="validation_labels='noisy': a sweep scores every member"):
    sweep_grid._check_sweep_block(sweep)  # pylint: disable=protected-access


def test_a_run_selects_on_noisy_labels_and_trains_the_same():
  """The same tiny run (digits: 180 validation rows, 40% symmetric noise) with clean and with noisy validation
  labels: identical training and test accuracies; the validation accuracies are scored on other labels."""
  config = tiny.get_config("ce")
  dataset = data.load("digits")
  clean = runs.run_single(config, dataset=dataset)
  config.validation_labels = "noisy"
  noisy = runs.run_single(config, dataset=dataset)
  for a, b in zip(clean["history"], noisy["history"]):
    assert a["train_loss"] == b["train_loss"] and a["test_accuracy"] == b["test_accuracy"]
  clean_val = [r["val_accuracy"] for r in clean["history"]]
  noisy_val = [r["val_accuracy"] for r in noisy["history"]]
  assert clean_val != noisy_val and max(noisy_val) < max(clean_val)
