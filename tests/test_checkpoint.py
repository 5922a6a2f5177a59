"""Checkpoint/resume: a run killed (SIGKILL, another process) and resumed equals an uninterrupted one bit for bit.

The kill tests run tests/resume_worker.py in subprocesses: an uninterrupted reference run, a run that kills itself
right after an epoch's checkpoint, and a second process that resumes in the killed run's workdir. The final
checkpoints of each stage (params, batch statistics, optimiser state, step, label table, best-validation variables)
must be exactly equal, and metrics.jsonl must hold the same records, every epoch once. Every registered method is
stopped and resumed against its golden run in tests/test_method_runs.py.
"""

import json
import os
import shutil
import signal
import sys

import ml_collections
import pytest

from noisy_jax.experiment import reporting
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.train import checkpoint as checkpoint_lib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import resume_processes as processes  # pylint: disable=g-import-not-at-top,wrong-import-position
import resume_worker  # pylint: disable=g-import-not-at-top,wrong-import-position

# ---------------------------------------------------------------------------------------------------------------
# Killed and resumed in separate processes


@pytest.fixture(scope="module")
def joint_optimization_runs(tmp_path_factory):
  """JO (stage 1: 5 epochs, history 3, relabelling; stage 2: 4 epochs): a reference run, a run killed after
  stage-1 epoch 3 and one killed after stage-2 epoch 2, then both resumed by new processes."""
  root = tmp_path_factory.mktemp("jo")
  ref, kill1, kill2 = str(root / "reference"), str(root / "killed_stage1"), str(root / "killed_stage2")
  method = "joint_optimization"
  first = processes.run_all(
    [
      processes.worker_cmd(ref, method),
      processes.worker_cmd(kill1, method, stop_stage="stage1", stop_after_epoch=3),
      processes.worker_cmd(kill2, method, stop_stage="stage2", stop_after_epoch=2),
    ]
  )
  processes.check(first, (0, -signal.SIGKILL, -signal.SIGKILL))
  at_kill = {
    "stage1": (
      checkpoint_lib.latest_epoch(checkpoint_lib.open_manager(checkpoint_lib.stage_dir(kill1, "stage1"), keep=100)),
      len(processes.records(kill1)),
    ),
    "stage2": (
      checkpoint_lib.latest_epoch(checkpoint_lib.open_manager(checkpoint_lib.stage_dir(kill2, "stage2"), keep=100)),
      len(processes.records(kill2)),
    ),
  }
  stage2_started = os.path.isdir(checkpoint_lib.stage_dir(kill1, "stage2"))
  second = processes.run_all([processes.worker_cmd(kill1, method), processes.worker_cmd(kill2, method)])
  processes.check(second, (0, 0))
  return {
    "ref": ref,
    "kill1": kill1,
    "kill2": kill2,
    "first": first,
    "second": second,
    "at_kill": at_kill,
    "stage2_started_before_kill1": stage2_started,
  }


def test_killed_in_stage1_resumes_bit_identical(joint_optimization_runs):
  runs = joint_optimization_runs
  # The killed process got through epoch 3 exactly: its checkpoint of epoch 3 was the newest, nothing of stage 2.
  assert processes.epochs_seen(runs["first"][1][1]) == [("stage1", 1), ("stage1", 2), ("stage1", 3)]
  assert runs["at_kill"]["stage1"] == (3, 3)
  assert not runs["stage2_started_before_kill1"]
  # The resumed process trained only what was left.
  assert processes.epochs_seen(runs["second"][0][1]) == [("stage1", 4), ("stage1", 5)] + [
    ("stage2", e) for e in range(1, 5)
  ]
  for stage in ("stage1", "stage2"):
    processes.assert_bit_identical(runs["ref"], runs["kill1"], stage)
  assert processes.records(runs["kill1"]) == processes.records(runs["ref"])  # every epoch once, same numbers


def test_killed_in_stage2_skips_stage1_and_resumes_bit_identical(joint_optimization_runs):
  runs = joint_optimization_runs
  assert processes.epochs_seen(runs["first"][2][1])[-2:] == [("stage2", 1), ("stage2", 2)]
  assert runs["at_kill"]["stage2"] == (2, 7)  # 5 stage-1 + 2 stage-2 records before the kill
  # Stage 1 is restored from its final checkpoint, not retrained.
  assert processes.epochs_seen(runs["second"][1][1]) == [("stage2", 3), ("stage2", 4)]
  for stage in ("stage1", "stage2"):
    processes.assert_bit_identical(runs["ref"], runs["kill2"], stage)
  records = processes.records(runs["kill2"])
  assert [(r["stage"], r["epoch"]) for r in records] == [("stage1", e) for e in range(1, 6)] + [
    ("stage2", e) for e in range(1, 5)
  ]
  assert records == processes.records(runs["ref"])
  summary = json.loads(open(os.path.join(runs["kill2"], "summary.json")).read())
  reference = json.loads(open(os.path.join(runs["ref"], "summary.json")).read())
  for key in ("last_test_accuracy", "best_test_accuracy", "stage1", "stage2", "noise"):
    assert summary[key] == reference[key], key


# ---------------------------------------------------------------------------------------------------------------
# In one process


def _tiny(**overrides):
  config = resume_worker.tiny_config("truncated_lq", checkpoint_every=2)
  config.num_epochs = 5
  for key, value in overrides.items():
    config[key] = value
  return config


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
  """A finished 5-epoch truncated-Lq run with checkpoint_every=2, keep_checkpoints=2."""
  workdir = str(tmp_path_factory.mktemp("finished"))
  summary = runs.run_single(_tiny(), workdir)
  return workdir, summary


def test_keeps_the_last_checkpoints_and_the_final_epoch(finished_run):
  workdir, summary = finished_run
  manager = checkpoint_lib.open_manager(checkpoint_lib.stage_dir(workdir, "stage1"), keep=100)
  assert manager.all_steps() == [4, 5]  # saved after 2, 4 and the last epoch 5; the oldest pruned
  assert sorted(os.listdir(checkpoint_lib.stage_dir(workdir, "stage1"))) == ["4", "5"]
  meta = checkpoint_lib.restore_meta(manager, 5)
  assert meta["epoch"] == 5 and meta["seed"] == 0 and meta["stage"] == "stage1"
  assert meta["history"] == summary["history"]
  assert meta["config"]["optimizer"]["learning_rate"] == _tiny().optimizer.learning_rate
  assert [r["epoch"] for r in checkpoint_lib.restore_meta(manager, 4)["history"]] == [1, 2, 3, 4]


def test_resuming_a_finished_run_trains_nothing(finished_run, tmp_path):
  workdir, summary = finished_run
  copy = str(tmp_path / "copy")
  shutil.copytree(workdir, copy)
  logged = []
  # Cosmetic fields may change on resume (plots, evaluation of the training split, checkpoint cadence).
  again = runs.run_single(_tiny(plots=True, eval_train=True, checkpoint_every=1), copy, log_fn=logged.append)
  assert logged == []
  assert again["history"] == summary["history"]
  assert [r["epoch"] for r in processes.records(copy)] == [1, 2, 3, 4, 5]
  assert os.path.exists(os.path.join(copy, "curves.png"))
  manager = checkpoint_lib.open_manager(checkpoint_lib.stage_dir(copy, "stage1"), keep=100)
  assert manager.all_steps() == [4, 5]


def test_progress_of_a_resumed_run_counts_the_restored_epochs(finished_run, tmp_path):
  """Resumed after epoch 4 of 5: the one epoch trained is [5/5] with nothing left, not [1/5] with 4 to go."""
  workdir, summary = finished_run
  copy = str(tmp_path / "copy")
  shutil.copytree(workdir, copy)
  shutil.rmtree(os.path.join(checkpoint_lib.stage_dir(copy, "stage1"), "5"))  # the newest checkpoint: epoch 4
  lines = []
  progress = reporting.Progress(5, emit=lines.append)
  again = runs.run_single(_tiny(), copy, log_fn=progress, resume_fn=progress.restored)
  untimed = lambda history: [{k: v for k, v in r.items() if k not in processes.TIMING} for r in history]
  assert untimed(again["history"]) == untimed(summary["history"])
  assert len(lines) == 1 and "epoch   5  [5/5]" in lines[0] and lines[0].endswith("ETA 0:00:00"), lines
  assert (progress.done, progress.trained) == (5, 1)


def test_resume_with_another_seed_or_training_config_is_refused(finished_run):
  workdir, _ = finished_run
  before = open(os.path.join(workdir, "metrics.jsonl")).read()
  with pytest.raises(ValueError, match=r"written with seed=0, this run has seed=1"):
    runs.run_single(_tiny(seed=1), workdir)
  changed = _tiny()
  changed.optimizer.learning_rate = 0.5
  changed.method.k = 0.6
  with pytest.raises(ValueError, match=r"method\.k: saved 0\.5, now 0\.6; optimizer\.learning_rate: saved"):
    runs.run_single(changed, workdir)
  with pytest.raises(ValueError, match=r"num_epochs: saved 5, now 6"):
    runs.run_single(_tiny(num_epochs=6), workdir)
  assert open(os.path.join(workdir, "metrics.jsonl")).read() == before  # a refused resume leaves the log alone


def test_half_written_checkpoint_is_ignored(finished_run, tmp_path):
  """A save interrupted before orbax's final rename leaves `EPOCH.orbax-checkpoint-tmp`: restore skips it."""
  workdir, summary = finished_run
  copy = str(tmp_path / "copy")
  shutil.copytree(workdir, copy)
  stage = checkpoint_lib.stage_dir(copy, "stage1")
  tmp = os.path.join(stage, "5.orbax-checkpoint-tmp")
  os.rename(os.path.join(stage, "5"), tmp)
  shutil.rmtree(os.path.join(tmp, "meta"))  # half written: the array item is there, the JSON item is not
  logged = []
  again = runs.run_single(_tiny(), copy, log_fn=logged.append)
  assert [r["epoch"] for r in logged] == [5]  # resumed from epoch 4's checkpoint
  assert not os.path.exists(tmp)
  processes.assert_bit_identical(workdir, copy, "stage1")
  timing_free = lambda h: [{k: v for k, v in r.items() if k not in processes.TIMING} for r in h]
  assert timing_free(again["history"]) == timing_free(summary["history"])
  assert [r["epoch"] for r in processes.records(copy)] == [1, 2, 3, 4, 5]


# ---------------------------------------------------------------------------------------------------------------
# Helpers


def test_config_differences_ignore_only_cosmetic_fields():
  saved = {
    "seed": 0,
    "plots": False,
    "optimizer": {"learning_rate": 0.1},
    "stage2": {"eval_train": False},
    "seeds": [0],
    "checkpoint_every": 1,
  }
  current = {
    "seed": 0,
    "plots": True,
    "optimizer": {"learning_rate": 0.1},
    "stage2": {"eval_train": True},
    "seeds": [0, 1, 2],
    "checkpoint_every": 5,
  }
  assert checkpoint_lib.config_differences(saved, current) == []
  current["optimizer"]["learning_rate"] = 0.2
  current["augment"] = {"flip": True}
  assert checkpoint_lib.config_differences(saved, current) == ["augment.flip", "optimizer.learning_rate"]
  config = ml_collections.ConfigDict({"lr_boundaries": (3, 5)})
  assert settings_lib.config_json(config) == {"lr_boundaries": [3, 5]}


def test_due_epochs_and_argument_checks():
  assert [e for e in range(1, 8) if checkpoint_lib.is_due(e, every=3, num_epochs=7)] == [3, 6, 7]
  with pytest.raises(ValueError, match=r"checkpoint_every=0 must be >= 1"):
    checkpoint_lib.is_due(1, every=0, num_epochs=3)
  with pytest.raises(ValueError, match=r"keep_checkpoints=0 must be an int >= 1"):
    checkpoint_lib.open_manager("/tmp/unused_noisy_jax_checkpoints", keep=0)
  with pytest.raises(ValueError, match=r"stage=''"):
    checkpoint_lib.stage_dir("/tmp", "")
  assert checkpoint_lib.stage_dir("/w", "stage2") == os.path.join("/w", "checkpoints", "stage2")


def test_orbax_info_records_are_dropped_but_warnings_kept():
  import logging as std_logging

  from noisy_jax.train import checkpoint as checkpoint_lib

  checkpoint_lib.quiet_orbax_info_logs()
  checkpoint_lib.quiet_orbax_info_logs()  # idempotent: one filter
  logger = std_logging.getLogger("absl")
  filters = [f for f in logger.filters if isinstance(f, checkpoint_lib._DropOrbaxInfo)]
  assert len(filters) == 1

  def record(path, level):
    return std_logging.LogRecord("absl", level, path, 1, "msg", None, None)

  orbax_path = os.path.join(os.sep, "site-packages", "orbax", "checkpoint", "x.py")
  assert not filters[0].filter(record(orbax_path, std_logging.INFO))
  assert filters[0].filter(record(orbax_path, std_logging.WARNING))
  assert filters[0].filter(record(os.path.join(os.sep, "noisy_jax", "train.py"), std_logging.INFO))
