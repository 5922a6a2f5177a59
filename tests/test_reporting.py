"""Progress line with ETA, TensorBoard scalars read back by TensorBoard's own reader, PNG curves."""

import glob
import io
import json
import re

import matplotlib.image
import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator

from experiments.configs import ce
from experiments.configs import default
from experiments.configs import joint_optimization
from noisy_jax.experiment import comparison
from noisy_jax.experiment import reporting
from noisy_jax.experiment import runs
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.experiment import tfevents


def _record(epoch, stage="stage1", **extra):
  return {
    "stage": stage,
    "epoch": epoch,
    "train_loss": 1.0 / epoch,
    "test_accuracy": 0.5 + 0.01 * epoch,
    "steps_per_second": 20.0,
    **extra,
  }


def test_progress_counts_epochs_and_estimates_time_left(monkeypatch):
  clock = iter([100.0, 110.0, 110.0, 120.0, 120.0, 130.0])  # start, then (line, eta) per epoch
  monkeypatch.setattr(reporting.time, "perf_counter", lambda: next(clock))
  lines = []
  progress = reporting.Progress(4, prefix="ce seed 0", emit=lines.append)
  progress(_record(1))
  progress(_record(2, val_accuracy=0.7))
  assert progress.done == 2
  # 10 s per epoch so far: 2 epochs left -> 20 s.
  assert lines[1].startswith("ce seed 0 stage1 epoch   2  [2/4]  20.0 steps/s")
  assert "val 70.00%" in lines[1]
  assert re.search(r"elapsed 0:00:20  ETA 0:00:20$", lines[1]), lines[1]
  assert reporting.format_duration(3725) == "1:02:05" and reporting.format_duration(float("nan")) == "?"
  with pytest.raises(ValueError, match="total_epochs=0"):
    reporting.Progress(0)


def test_progress_after_a_resume_counts_restored_epochs_but_times_only_trained_ones(monkeypatch):
  clock = iter([0.0, 10.0, 10.0])  # start, then (line, eta) of the first epoch trained
  monkeypatch.setattr(reporting.time, "perf_counter", lambda: next(clock))
  lines = []
  progress = reporting.Progress(70, emit=lines.append)
  progress.restored([_record(e) for e in range(1, 41)])  # resumed after epoch 40: nothing logged
  assert lines == [] and (progress.done, progress.trained) == (40, 0)
  assert np.isnan(progress.eta_seconds())
  progress(_record(41))
  # [41/70]; 10 s for the one epoch trained here, 29 left -> 290 s.
  assert "epoch  41  [41/70]" in lines[0] and lines[0].endswith("elapsed 0:00:10  ETA 0:04:50"), lines[0]
  progress.tick(3)  # epochs a caller logs itself (sweep) count as trained
  assert (progress.done, progress.trained) == (44, 4)


def test_scalars_keep_numbers_only():
  assert reporting.scalars({"stage": "stage1", "epoch": 3, "a": 1, "b": 0.5, "flag": True}) == {"a": 1.0, "b": 0.5}


def test_event_records_are_byte_equal_to_tensorboards_own():
  """tfevents encodes by hand what tensorboard's protobuf messages and RecordWriter write, byte for byte."""
  from tensorboard.compat.proto import event_pb2  # pylint: disable=g-import-not-at-top
  from tensorboard.compat.proto import summary_pb2  # pylint: disable=g-import-not-at-top
  from tensorboard.summary.writer import record_writer  # pylint: disable=g-import-not-at-top

  assert tfevents.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
  for step, scalars in ((1, {"stage1/test_accuracy": 0.51}), (300_001, {"a": -1.5, "b/c": 1e30, "d": 0.0}), (0, {})):
    values = [summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in scalars.items()]
    expected = event_pb2.Event(wall_time=1764.25, step=step, summary=summary_pb2.Summary(value=values))
    assert tfevents.scalar_event(step, scalars, 1764.25) == expected.SerializeToString()
    framed = io.BytesIO()
    record_writer.RecordWriter(framed).write(expected.SerializeToString())
    assert tfevents.record(expected.SerializeToString()) == framed.getvalue()
  version = event_pb2.Event(wall_time=3.0, file_version="brain.Event:2")
  assert tfevents.version_event(3.0) == version.SerializeToString()


def test_scalar_writer_round_trips_through_tensorboard(tmp_path):
  writer = reporting.ScalarWriter(str(tmp_path))
  records = [_record(1), _record(2), _record(1, stage="stage2")]
  for r in records:
    writer.write(r)
  writer.close()
  acc = event_accumulator.EventAccumulator(str(tmp_path))
  acc.Reload()
  events = acc.Scalars("stage1/test_accuracy")
  assert [e.step for e in events] == [1, 2]
  np.testing.assert_allclose([e.value for e in events], [0.51, 0.52], rtol=1e-6)
  # Stage 2 continues the step count where stage 1 ended.
  assert [e.step for e in acc.Scalars("stage2/train_loss")] == [3]


def _load_png(path):
  image = matplotlib.image.imread(path)
  assert image.ndim == 3 and image.shape[2] in (3, 4)
  assert image.shape[0] > 200 and image.shape[1] > 400
  # Not a blank canvas: lines and text make many distinct pixel values.
  assert len(np.unique(image.reshape(-1, image.shape[2]), axis=0)) > 50
  return image


def test_save_curves_and_comparison(tmp_path):
  history = [_record(e, memorised_fraction=0.1 * e, label_recovery_overall=0.8) for e in (1, 2, 3)]
  history += [_record(e, stage="stage2") for e in (1, 2)]
  _load_png(reporting.save_curves(history, str(tmp_path / "c.png"), title="t"))
  _load_png(reporting.save_comparison({"a": history, "b": history[:2]}, str(tmp_path / "cmp.png")))
  with pytest.raises(ValueError, match="empty"):
    reporting.save_curves([], str(tmp_path / "x.png"))


def test_training_run_writes_tensorboard_scalars_and_curves(tmp_path):
  config = joint_optimization.get_config()
  config.update({"dataset": "digits", "num_epochs": 3, "plots": True, "eval_train": True})
  config.model.update({"name": "mlp", "kwargs": {"hidden_sizes": (32,)}})
  config.method.update({"begin": 2, "history_length": 2})
  config.stage2.num_epochs = 2
  summary = runs.run_single(config, str(tmp_path))
  assert stages_lib.total_epochs(config) == 5 == len(summary["history"])
  acc = event_accumulator.EventAccumulator(glob.glob(str(tmp_path / "events.out.tfevents.*"))[0])
  acc.Reload()
  jsonl = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  for stage, first_step in (("stage1", 1), ("stage2", 4)):
    rows = [r for r in jsonl if r["stage"] == stage]
    events = acc.Scalars(f"{stage}/test_accuracy")
    assert [e.step for e in events] == list(range(first_step, first_step + len(rows)))
    np.testing.assert_allclose([e.value for e in events], [r["test_accuracy"] for r in rows], rtol=1e-6)
  assert "stage1/memorised_fraction" in acc.Tags()["scalars"]
  _load_png(str(tmp_path / "curves.png"))


def test_comparison_progress_total_and_plot(tmp_path, capsys):
  config = default.get_config()
  config.shared.update({"dataset": "digits"})
  config.shared.model.update({"name": "mlp", "kwargs": {"hidden_sizes": (32,)}})
  config.runs = {"ce": ce.get_run()}
  config.runs.ce.num_epochs = 2
  config.plots = True
  out = comparison.run(config, str(tmp_path))
  assert out["title"] == "digits, 60% symmetric noise"
  assert "digits, 60% symmetric noise" in capsys.readouterr().out
  _load_png(str(tmp_path / "comparison.png"))
  assert (tmp_path / "ce" / "seed0" / "curves.png").exists()
