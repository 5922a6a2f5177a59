"""Multi-host: a two-process run (jax.distributed over localhost, CPU gloo collectives) trains exactly like one process.

tests/multihost_worker.py trains cross-entropy, Joint Optimization (per-step recording in the label table and
relabelling; epoch modes 'steps' and 'scan') and truncated Lq (pruning from predictions on the training split)
through `noisy_jax.train.loop.fit`, once as a plain single process on one device and once as two processes with 2
simulated devices each, whose mesh spans all four: every collective crosses the process boundary and the devices
within a process. (One device per process runs the same code on a mesh of two; it is left out for CI's time.) Every
worker is bounded by a timeout; on failure all are killed and their stderr tails are in the assertion message. JO
and truncated Lq also train with the label table split by rows over every device of both processes, checkpointed
and resumed.
"""

import json
import os
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from noisy_jax.parallel import distributed
from noisy_jax.parallel import mesh as mesh_lib
import simulated_devices

TOLERANCE = 1e-6
TIMEOUT_S = 900  # bounds a hang; a busy 2-core machine shared with another pytest-xdist worker needs the margin
METHODS = (
  "cross_entropy",
  "joint_optimization",
  "joint_optimization_scan",
  "truncated_lq",
  "joint_optimization_streamed",
  "joint_optimization_sharded",
  "truncated_lq_sharded",
)
WORKER = os.path.join(os.path.dirname(__file__), "multihost_worker.py")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _free_port() -> int:
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _env(devices_per_process: int) -> dict:
  env = {
    k: v
    for k, v in os.environ.items()
    if k not in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", distributed.ENV_MULTIHOST)
  }
  env["JAX_PLATFORMS"] = "cpu"
  env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
  env["XLA_FLAGS"] = simulated_devices.xla_flags_with_devices(devices_per_process)
  env.pop("PJRT_NPROC", None)
  if devices_per_process > 1:  # simulated devices: PJRT_NPROC against the collective deadlock (shared/DESIGN.md)
    env["PJRT_NPROC"] = str(2 * devices_per_process)
  return env


def _start_workers(root, num_processes: int, devices_per_process: int) -> tuple[list[str], list, list]:
  """(output directories, processes, open log files) of the workers started, one per process, each logging to
  ROOT/processPID.log."""
  port = _free_port()
  outs, procs, logs = [], [], []
  for pid in range(num_processes):
    out = os.path.join(root, f"process{pid}")
    os.makedirs(out)
    cmd = [sys.executable, WORKER, f"--out={out}"]
    if num_processes > 1:
      cmd += [f"--num_processes={num_processes}", f"--process_id={pid}", f"--port={port}"]
    log = open(os.path.join(root, f"process{pid}.log"), "w")
    procs.append(subprocess.Popen(cmd, env=_env(devices_per_process), stdout=log, stderr=subprocess.STDOUT))
    outs.append(out)
    logs.append(log)
  return outs, procs, logs


def _wait(procs) -> str | None:
  """Waits until every worker has ended; None, or why it stopped waiting early (a worker failed, the timeout)."""
  deadline = time.monotonic() + TIMEOUT_S
  while any(p.poll() is None for p in procs):
    if any(p.poll() not in (None, 0) for p in procs):
      return "a worker failed"
    if time.monotonic() > deadline:
      return f"timed out after {TIMEOUT_S} s"
    time.sleep(0.5)
  return None


def _stop(procs, logs) -> None:
  """Kills the workers still running and closes their logs."""
  for p in procs:
    if p.poll() is None:
      p.kill()
      p.wait()
  for log in logs:
    log.close()


def _fail_with_logs(root, failed: str | None, codes: list) -> None:
  """pytest.fail with the reason, the exit codes and the tail of every worker's log."""
  tails = []
  for pid in range(len(codes)):
    with open(os.path.join(root, f"process{pid}.log")) as f:
      tails.append(f"--- process {pid} (exit {codes[pid]}):\n{f.read()[-3000:]}")
  pytest.fail(f"{failed or 'a worker failed'}; exit codes {codes}\n" + "\n".join(tails))


def _run_workers(root, num_processes: int, devices_per_process: int = 1) -> list[str]:
  """Starts the workers (one per process), waits for all; returns each process's output directory."""
  outs, procs, logs = _start_workers(root, num_processes, devices_per_process)
  failed = None
  try:
    failed = _wait(procs)
  finally:
    _stop(procs, logs)
  codes = [p.returncode for p in procs]
  if failed or any(codes):
    _fail_with_logs(root, failed, codes)
  return outs


def _load(out: str) -> dict:
  result = {m: dict(np.load(os.path.join(out, f"{m}.npz"))) for m in METHODS}
  with open(os.path.join(out, "history.json")) as f:
    return {"arrays": result, "history": json.load(f)}


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
  return _load(_run_workers(str(tmp_path_factory.mktemp("one_process")), 1)[0])


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
  outs = _run_workers(str(tmp_path_factory.mktemp("two_processes")), 2, devices_per_process=2)
  return {"outs": outs, **_load(outs[0])}


def _max_diff(a: dict, b: dict, prefix: str) -> float:
  keys = [k for k in a if k.startswith(prefix)]
  assert keys and set(keys) == {k for k in b if k.startswith(prefix)}
  return max(float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)), initial=0.0)) for k in keys)


@pytest.mark.parametrize("method", METHODS)
def test_two_processes_equal_one_process(one_process, two_processes, method):
  one, two = one_process["arrays"][method], two_processes["arrays"][method]
  moved = max(
    float(np.max(np.abs(one[k] - one[k.replace("['params']", "['init_params']", 1)])))
    for k in one
    if k.startswith("['params']")
  )
  assert moved > 1e-3, moved  # training really moved the parameters
  for part in ("['params']", "['batch_stats']", "['table']"):
    assert _max_diff(one, two, part) <= TOLERANCE, (method, part, _max_diff(one, two, part))
  for key in ("train_loss", "test_accuracy", "val_accuracy", "train_accuracy_clean"):
    a = [r[key] for r in one_process["history"][method]]
    b = [r[key] for r in two_processes["history"][method]]
    assert np.allclose(a, b, rtol=0, atol=TOLERANCE), (method, key, a, b)
  soft = one["['table']['soft_labels']"]
  if method.startswith("joint_optimization"):  # the table really changed: soft labels moved off the one-hots
    assert np.max(np.abs(soft - np.eye(soft.shape[1])[np.argmax(soft, 1)])) > 1e-3
  if method == "truncated_lq":  # some examples were pruned from predictions on the training split
    assert 0 < np.sum(one["['table']['weights']"] == 0) < soft.shape[0]


def test_streamed_input_trains_what_resident_input_trains(one_process, two_processes):
  """The same JO run fed from the host, batch by batch (each of two processes reading its own columns), and
  gathered from the devices."""
  resident = one_process["arrays"]["joint_optimization"]
  for run in (one_process, two_processes):
    streamed = run["arrays"]["joint_optimization_streamed"]
    for part in ("['params']", "['table']"):
      assert _max_diff(resident, streamed, part) <= TOLERANCE, part


def test_sharded_table_trains_what_the_replicated_table_trains(one_process, two_processes):
  """The label table split by rows over every device of both processes, checkpointed after epoch 2 and resumed by a
  second fit: the same training as the replicated table of one process."""
  for sharded, replicated in (
    ("joint_optimization_sharded", "joint_optimization"),
    ("truncated_lq_sharded", "truncated_lq"),
  ):
    reference = one_process["arrays"][replicated]
    for run in (one_process, two_processes):
      for part in ("['params']", "['table']"):
        assert _max_diff(reference, run["arrays"][sharded], part) <= TOLERANCE, (sharded, part)
      assert [r["epoch"] for r in run["history"][sharded]] == [1, 2, 3]
      for key in ("relabelled_fraction", "pruned_fraction", "detection_f1", "label_recovery_overall"):
        ours = [r.get(key) for r in run["history"][sharded]]
        assert ours == [r.get(key) for r in one_process["history"][replicated]], (sharded, key)


def test_only_process_zero_writes(two_processes):
  first, second = two_processes["outs"]
  assert sorted(os.listdir(first)) == sorted([f"{m}.npz" for m in METHODS] + ["history.json"])
  assert os.listdir(second) == []


def test_initialize_only_when_asked(monkeypatch):
  for name in ("JAX_COORDINATOR_ADDRESS", distributed.ENV_MULTIHOST):
    monkeypatch.delenv(name, raising=False)
  assert not distributed.requested()
  assert not distributed.maybe_initialize()  # a plain run: nothing started
  assert not jax.distributed.is_initialized()
  assert distributed.requested(True) and not distributed.requested(False)
  monkeypatch.setenv(distributed.ENV_MULTIHOST, "1")
  assert distributed.requested() and not distributed.requested(False)
  monkeypatch.setenv(distributed.ENV_MULTIHOST, "0")
  monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "localhost:1234")
  assert not distributed.requested()  # the explicit switch wins over the launcher's variable
  monkeypatch.delenv(distributed.ENV_MULTIHOST)
  assert distributed.requested()
  monkeypatch.setenv(distributed.ENV_MULTIHOST, "maybe")
  with pytest.raises(ValueError, match="NOISY_JAX_MULTIHOST"):
    distributed.requested()


def test_maybe_initialize_checks_arguments(monkeypatch):
  monkeypatch.setenv("JAX_NUM_PROCESSES", "two")
  with pytest.raises(ValueError, match="JAX_NUM_PROCESSES"):
    distributed.maybe_initialize(True)
  monkeypatch.delenv("JAX_NUM_PROCESSES")
  with pytest.raises(ValueError, match="process_id"):
    distributed.maybe_initialize(True, coordinator_address="localhost:1", num_processes=2, process_id=2)
  assert not jax.distributed.is_initialized()


def test_single_process_helpers():
  mesh = mesh_lib.make_mesh(1)
  tree = {"w": np.arange(6.0).reshape(2, 3), "i": np.arange(4, dtype=np.int32)}
  rep = distributed.replicated(tree, mesh)
  assert rep["w"].sharding.is_fully_replicated and rep["i"].dtype == np.int32
  np.testing.assert_array_equal(distributed.host_value(rep)["w"], tree["w"])
  batch = distributed.global_batch(np.arange(8.0), mesh)
  assert batch.shape == (8,) and batch.sharding.spec == jax.sharding.PartitionSpec("batch")
  distributed.assert_same_on_all_processes(tree)  # one process: nothing to compare
  with pytest.raises(ValueError, match="typed keys"):
    distributed.replicated(jax.random.key(0), mesh)
  with pytest.raises(ValueError, match="num_devices"):
    mesh_lib.make_mesh(jax.local_device_count() + 1)
