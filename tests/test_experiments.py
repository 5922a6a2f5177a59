"""Each experiment config of experiments/configs runs end to end at a tiny size."""

import json

import pytest

from experiments.configs import memorisation
from noisy_jax import train


def shrink(config, epochs=3):
  config.shared.dataset = "digits"
  config.shared.model.update({"name": "mlp", "kwargs": {"hidden_sizes": (32,)}})
  for run in config.runs.values():
    run.num_epochs = epochs
  return config


def test_memorisation_config(tmp_path, capsys):
  config = shrink(memorisation.get_config())
  out = train.run(config, str(tmp_path))
  printed = capsys.readouterr().out
  assert "ce_small_lr, seed 0, per epoch:" in printed
  for column in config.epoch_table:
    assert column in printed
  # 90% in the "true class included" convention changes 9/10 of those labels: 81% realised.
  assert out["mean_std"]["ce_small_lr"]["realised_noise_rate"]["mean"] == pytest.approx(0.81, abs=0.005)
  history = json.loads((tmp_path / "ce_small_lr" / "seed0" / "summary.json").read_text())["history"]
  assert len(history) == 3 and all("memorised_fraction" in r for r in history)
  assert (tmp_path / "comparison.png").stat().st_size > 5000
  assert (tmp_path / "ce_small_lr" / "seed0" / "curves.png").stat().st_size > 5000


def test_format_epoch_table():
  history = [{"stage": "stage1", "epoch": 1, "train_loss": 2.5, "test_accuracy": 0.5},
             {"stage": "stage1", "epoch": 2, "train_loss": 1.25}]
  lines = train.format_epoch_table(history, ("train_loss", "test_accuracy")).splitlines()
  assert lines[0].split() == ["stage", "epoch", "train_loss", "test_accuracy"]
  assert lines[2].split() == ["stage1", "1", "2.5000", "50.00%"]
  assert lines[3].split() == ["stage1", "2", "1.2500", "-"]
