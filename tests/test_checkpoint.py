"""Checkpoint/resume: a run killed (SIGKILL, another process) and resumed equals an uninterrupted one bit for bit.

The kill tests run tests/resume_worker.py in subprocesses: an uninterrupted reference run, a run that kills itself
right after an epoch's checkpoint, and a second process that resumes in the killed run's workdir. The final
checkpoints of each stage (params, batch statistics, optimiser state, step, label table, best-validation variables)
must be exactly equal, and metrics.jsonl must hold the same records, every epoch once. Every registered method is
stopped and resumed the same way, its stop an exception (one process stops all of them) rather than a kill.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import flax
import jax
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
import pytest

from experiments import ci_shares
from noisy_jax.experiment import reporting
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import checkpoint as checkpoint_lib
from noisy_jax.train import method as method_lib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import resume_worker  # pylint: disable=g-import-not-at-top,wrong-import-position

WORKER_TIMEOUT = 420  # seconds; a tiny run takes ~10-40 s on a busy 2-core CPU
TIMING = ("seconds", "steps_per_second")  # wall-clock fields, the only ones allowed to differ between runs


def _worker_cmd(workdir, method, **flags):
  cmd = [sys.executable, os.path.join(HERE, "resume_worker.py"), f"--workdir={workdir}", f"--method={method}"]
  return cmd + [f"--{k}={v}" for k, v in flags.items()]


def _group_alive(pgid: int) -> bool:
  """Whether a process of group `pgid` is running. Zombies do not count: an orphan's exit status waits for an init
  process that, in some containers, never reaps it (read from /proc where there is one)."""
  if not os.path.isdir("/proc"):
    try:
      os.killpg(pgid, 0)
      return True
    except ProcessLookupError:
      return False
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
    except OSError:
      continue
    if int(fields[2]) == pgid and fields[0] != "Z":
      return True
  return False


def _run_all(cmds, lingering: list | None = None):
  """Runs the commands one after another (each bounded by WORKER_TIMEOUT); returns [(returncode, stdout, stderr)].

  One after another, not side by side: the workers of a test compile the same programs, and the first one's
  compilations reach the next ones through the test run's compilation cache (tests/conftest.py), where side by side
  every worker would compile them all on the same two cores. Each worker gets its own process group and writes to
  files, not pipes: a worker killed with SIGKILL leaves its input pipeline's processes (Grain's) orphaned, and reading
  a pipe to its end would wait as long as one of them held it. The whole group is killed once the worker has ended.
  lingering: if given, gets for each worker whether processes of its group were still alive 5 s after it ended.
  """
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  results = []
  with tempfile.TemporaryDirectory() as logs:
    for i, cmd in enumerate(cmds):
      with open(os.path.join(logs, f"{i}.out"), "w+") as out, open(os.path.join(logs, f"{i}.err"), "w+") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True, start_new_session=True)
        try:
          proc.wait(timeout=WORKER_TIMEOUT)
          if lingering is not None:
            deadline = time.monotonic() + 5
            while _group_alive(proc.pid) and time.monotonic() < deadline:
              time.sleep(0.1)
            lingering.append(_group_alive(proc.pid))
        finally:
          if proc.poll() is None:
            proc.kill()
            proc.wait()
          try:
            os.killpg(proc.pid, signal.SIGKILL)  # what the worker left behind (start_new_session: pgid == pid)
          except ProcessLookupError:
            pass
        out.seek(0)
        err.seek(0)
        results.append((proc.returncode, out.read(), err.read()))
  return results


def _epochs_seen(stdout):
  """(stage, epoch) pairs the worker trained (it prints one line per epoch logged)."""
  return [(line.split()[1], int(line.split()[2])) for line in stdout.splitlines() if line.startswith("epoch ")]


def _final_arrays(workdir, stage):
  """{path: array} of the newest checkpoint of `stage` in `workdir`, and its epoch."""
  manager = checkpoint_lib.open_manager(checkpoint_lib.stage_dir(workdir, stage), keep=100)
  epoch = checkpoint_lib.latest_epoch(manager)
  restored = manager.restore(epoch, args=ocp.args.Composite(arrays=ocp.args.StandardRestore()))["arrays"]
  manager.close()
  flat = flax.traverse_util.flatten_dict(restored)
  return epoch, {"/".join(k): np.asarray(v) for k, v in flat.items()}


def _assert_bit_identical(workdir_a, workdir_b, stage):
  epoch_a, a = _final_arrays(workdir_a, stage)
  epoch_b, b = _final_arrays(workdir_b, stage)
  assert epoch_a == epoch_b
  assert sorted(a) == sorted(b)
  for group in (
    "state/params/",
    "state/batch_stats/",
    "state/opt_state/",
    "state/step",
    "table/soft_labels",
    "table/weights",
    "table/noisy_labels",
    "best_variables/params/",
  ):
    assert any(name.startswith(group) for name in a), (group, sorted(a))  # the checkpoint holds every part
  unequal = [name for name in a if a[name].dtype != b[name].dtype or not np.array_equal(a[name], b[name])]
  assert not unequal, f"{stage}: arrays differ after resume: {unequal}"


def _records(workdir):
  lines = open(os.path.join(workdir, "metrics.jsonl")).read().splitlines()
  return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]


def _check(results, expect):
  for (code, out, err), want in zip(results, expect):
    assert code == want, f"return code {code}, expected {want}\n{out[-2000:]}\n{err[-4000:]}"


# ---------------------------------------------------------------------------------------------------------------
# Killed and resumed in separate processes


@pytest.fixture(scope="module")
def joint_optimization_runs(tmp_path_factory):
  """JO (stage 1: 5 epochs, history 3, relabelling; stage 2: 4 epochs): a reference run, a run killed after
  stage-1 epoch 3 and one killed after stage-2 epoch 2, then both resumed by new processes."""
  root = tmp_path_factory.mktemp("jo")
  ref, kill1, kill2 = str(root / "reference"), str(root / "killed_stage1"), str(root / "killed_stage2")
  method = "joint_optimization"
  first = _run_all(
    [
      _worker_cmd(ref, method),
      _worker_cmd(kill1, method, stop_stage="stage1", stop_after_epoch=3),
      _worker_cmd(kill2, method, stop_stage="stage2", stop_after_epoch=2),
    ]
  )
  _check(first, (0, -signal.SIGKILL, -signal.SIGKILL))
  at_kill = {
    "stage1": (
      checkpoint_lib.latest_epoch(checkpoint_lib.open_manager(checkpoint_lib.stage_dir(kill1, "stage1"), keep=100)),
      len(_records(kill1)),
    ),
    "stage2": (
      checkpoint_lib.latest_epoch(checkpoint_lib.open_manager(checkpoint_lib.stage_dir(kill2, "stage2"), keep=100)),
      len(_records(kill2)),
    ),
  }
  stage2_started = os.path.isdir(checkpoint_lib.stage_dir(kill1, "stage2"))
  second = _run_all([_worker_cmd(kill1, method), _worker_cmd(kill2, method)])
  _check(second, (0, 0))
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
  assert _epochs_seen(runs["first"][1][1]) == [("stage1", 1), ("stage1", 2), ("stage1", 3)]
  assert runs["at_kill"]["stage1"] == (3, 3)
  assert not runs["stage2_started_before_kill1"]
  # The resumed process trained only what was left.
  assert _epochs_seen(runs["second"][0][1]) == [("stage1", 4), ("stage1", 5)] + [("stage2", e) for e in range(1, 5)]
  for stage in ("stage1", "stage2"):
    _assert_bit_identical(runs["ref"], runs["kill1"], stage)
  assert _records(runs["kill1"]) == _records(runs["ref"])  # every epoch once, same numbers


def test_killed_in_stage2_skips_stage1_and_resumes_bit_identical(joint_optimization_runs):
  runs = joint_optimization_runs
  assert _epochs_seen(runs["first"][2][1])[-2:] == [("stage2", 1), ("stage2", 2)]
  assert runs["at_kill"]["stage2"] == (2, 7)  # 5 stage-1 + 2 stage-2 records before the kill
  # Stage 1 is restored from its final checkpoint, not retrained.
  assert _epochs_seen(runs["second"][1][1]) == [("stage2", 3), ("stage2", 4)]
  for stage in ("stage1", "stage2"):
    _assert_bit_identical(runs["ref"], runs["kill2"], stage)
  records = _records(runs["kill2"])
  assert [(r["stage"], r["epoch"]) for r in records] == [("stage1", e) for e in range(1, 6)] + [
    ("stage2", e) for e in range(1, 5)
  ]
  assert records == _records(runs["ref"])
  summary = json.loads(open(os.path.join(runs["kill2"], "summary.json")).read())
  reference = json.loads(open(os.path.join(runs["ref"], "summary.json")).read())
  for key in ("last_test_accuracy", "best_test_accuracy", "stage1", "stage2", "noise"):
    assert summary[key] == reference[key], key


# One tiny case per registered method: the first of its MethodSpec.tiny (a method added to the registry is tested here
# without a line of this file).
REGISTERED = [next(iter(spec.tiny)) for spec in registry.SPECS.values()]


def _sections(stdout: str) -> dict[str, str]:
  """{case: its part of the output} of a worker that ran several cases (resume_worker's `case CASE` lines)."""
  sections, case = {}, None
  for line in stdout.splitlines(keepends=True):
    if line.startswith("case "):
      case = line.split()[1]
      sections[case] = ""
    elif case is not None:
      sections[case] += line
  return sections


def _case_seconds(stdout: str) -> dict[str, float]:
  """{case: seconds} of a worker that ran several cases (resume_worker's `seconds CASE S` lines)."""
  seconds = {}
  for line in stdout.splitlines():
    if line.startswith("seconds ") and len(line.split()) == 3:
      _, case, value = line.split()
      seconds[case] = float(value)
  return seconds


@pytest.fixture(scope="module")
def registered_runs(tmp_path_factory):
  """Every registered method's tiny case, checkpointed every 2 epochs, in three processes: the uninterrupted runs, the
  runs stopped after epoch 3 (abandoned by an exception once epoch 3 is logged: resume_worker --stop_with=raise) and
  the resumed runs. {"reference": (root, its worker's (code, out, err)), "stopped": (root, its worker's (code, out,
  err)), "after_stop": {case: (checkpoint steps, epochs in metrics.jsonl)}, "resumed": {case: its part of the
  output}, "resume_err": the resuming worker's stderr, "seconds": {case: its seconds in the three workers and in
  reading its checkpoints after the stop}}."""
  ref, stopped = str(tmp_path_factory.mktemp("reference")), str(tmp_path_factory.mktemp("stopped"))
  cases = ",".join(REGISTERED)
  reference = _run_all([_worker_cmd(ref, cases, checkpoint_every=2)])[0]
  stop = _run_all([_worker_cmd(stopped, cases, checkpoint_every=2, stop_after_epoch=3, stop_with="raise")])[0]
  after_stop, reading = {}, {}
  for case, section in _sections(stop[1]).items():
    if "stopped " + case not in section:
      continue
    start = time.perf_counter()
    manager = checkpoint_lib.open_manager(checkpoint_lib.stage_dir(os.path.join(stopped, case), "stage1"), keep=100)
    epochs = [r["epoch"] for r in _records(os.path.join(stopped, case)) if r["stage"] == "stage1"]
    after_stop[case] = (manager.all_steps(), epochs)
    manager.close()
    reading[case] = time.perf_counter() - start
  code, out, err = _run_all([_worker_cmd(stopped, cases, checkpoint_every=2)])[0]
  seconds = {}
  for per_case in (_case_seconds(reference[1]), _case_seconds(stop[1]), reading, _case_seconds(out)):
    for case, value in per_case.items():
      seconds[case] = seconds.get(case, 0.0) + value
  return {
    "reference": (ref, reference),
    "stopped": (stopped, stop),
    "after_stop": after_stop,
    "resumed": _sections(out),
    "resume_err": err,
    "seconds": seconds,
  }


@pytest.mark.parametrize("case", REGISTERED)
def test_every_method_stopped_between_checkpoints_resumes_bit_identical(registered_runs, case, request):
  """Each method's tiny run, 5 epochs (truncated Lq: 6, pruning after epochs 2 and 4) with a checkpoint every 2:
  stopped after epoch 3, resumed from epoch 2's checkpoint by a new process (epoch 3 trained again), it ends
  bit-identical to an uninterrupted run (params of every network, optimiser state, the table with the method's rows,
  weight averages, every record). Examples of what that covers: SOP's u, v; Co-teaching's two networks with their
  Adam state and forget-rate ramp; DivideMix's networks with its GMM division (1 warm-up epoch: the division written
  after epoch 2 is restored); ELR+'s networks with their averages and targets; ProMix's networks with their class
  priors and selections. What a method keeps must be in its checkpoint, so the stop is an exception in one process
  for all methods (registered_runs); a real SIGKILL and its leftovers are tested on Joint Optimization's two stages
  above and inside an epoch in test_streaming.py."""
  if case in registered_runs["seconds"]:  # its share of the workers' time (experiments/ci_shares.py)
    ci_shares.record_case_seconds(request.node, registered_runs["seconds"][case])
  ref_root, (_, ref_out, ref_err) = registered_runs["reference"]
  stopped_root, (_, stop_out, stop_err) = registered_runs["stopped"]
  ref, stopped = os.path.join(ref_root, case), os.path.join(stopped_root, case)
  assert "done" in _sections(ref_out).get(case, ""), (_sections(ref_out).get(case), ref_err[-4000:])
  assert "stopped " + case in _sections(stop_out).get(case, ""), (_sections(stop_out).get(case), stop_err[-4000:])
  # saved after epoch 2; epoch 3 was logged, then stopped before its checkpoint
  assert registered_runs["after_stop"][case] == ([2], [1, 2, 3])
  resumed = registered_runs["resumed"].get(case, "")
  assert "done" in resumed, (resumed[-4000:], registered_runs["resume_err"][-4000:])
  stage1_epochs = 6 if case == "truncated_lq" else 5
  assert _epochs_seen(resumed)[: stage1_epochs - 2] == [("stage1", e) for e in range(3, stage1_epochs + 1)]
  stages = sorted(os.listdir(os.path.dirname(checkpoint_lib.stage_dir(ref, "stage1"))))  # every checkpointed stage
  assert "stage1" in stages, stages
  for stage in stages:
    _assert_bit_identical(ref, stopped, stage)
  records = _records(stopped)
  assert records == _records(ref)  # every epoch once (epoch 3 not duplicated), the same numbers
  if "pruned_fraction" in records[-1]:  # truncated Lq pruned with the best-validation parameters: they mattered
    assert 0 < records[-1]["pruned_fraction"] < 1
  _, arrays = _final_arrays(stopped, "stage1")
  spec = registry.get(resume_worker.tiny_config(case).method.name)
  method = spec.build(
    resume_worker.tiny_config(case).method,
    spec_lib.Context(num_classes=10, num_epochs=5, transition=np.eye(10), num_examples=4),
  )
  if method.init_rows is not None:  # the method's per-example state is in the checkpoint
    rows = method.init_rows(jax.random.PRNGKey(0), 4, 10)
    assert {f"table/method_rows/{name}" for name in rows} <= set(arrays), sorted(arrays)
  if method.num_networks == 2:  # both networks in the one state
    assert all(a.shape[0] == 2 for name, a in arrays.items() if name.startswith("state/params/"))
  if (
    method.num_networks == 2 and method.program.init_state is not method_lib.SHARED_PROGRAM.init_state
  ):  # a pair's own state: ELR+'s averages, ProMix's priors
    own = "state/method_state/"
    assert [a.shape[0] for name, a in arrays.items() if name.startswith(own)].count(2) >= 2


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
  assert [r["epoch"] for r in _records(copy)] == [1, 2, 3, 4, 5]
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
  untimed = lambda history: [{k: v for k, v in r.items() if k not in TIMING} for r in history]
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
  _assert_bit_identical(workdir, copy, "stage1")
  timing_free = lambda h: [{k: v for k, v in r.items() if k not in TIMING} for r in h]
  assert timing_free(again["history"]) == timing_free(summary["history"])
  assert [r["epoch"] for r in _records(copy)] == [1, 2, 3, 4, 5]


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
