"""Worker processes of the stop/resume tests and what they leave: tests/resume_worker.py's commands, run one after
another in their own process groups, their output split per case, and the final checkpoints and metrics.jsonl of
their workdirs, compared bit for bit (tests/test_checkpoint.py, tests/test_method_runs.py, tests/test_streaming.py).
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import flax
import jax
import numpy as np
import orbax.checkpoint as ocp

from noisy_jax.train import checkpoint as checkpoint_lib

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER_TIMEOUT = 420  # seconds; a tiny run takes ~10-40 s on a busy 2-core CPU
TIMING = ("seconds", "steps_per_second")  # wall-clock fields, the only ones allowed to differ between runs


def worker_cmd(workdir, method, **flags):
  """The command line of tests/resume_worker.py for `method` (one case or several, comma-separated) in `workdir`;
  a flag whose value is True is passed alone (--name)."""
  cmd = [sys.executable, os.path.join(HERE, "resume_worker.py"), f"--workdir={workdir}", f"--method={method}"]
  return cmd + [f"--{k}" if v is True else f"--{k}={v}" for k, v in flags.items()]


def group_alive(pgid: int) -> bool:
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


def run_all(cmds, lingering: list | None = None):
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
            while group_alive(proc.pid) and time.monotonic() < deadline:
              time.sleep(0.1)
            lingering.append(group_alive(proc.pid))
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


def epochs_seen(stdout):
  """(stage, epoch) pairs the worker trained (it prints one line per epoch logged)."""
  return [(line.split()[1], int(line.split()[2])) for line in stdout.splitlines() if line.startswith("epoch ")]


def final_arrays(workdir, stage):
  """{path: array} of the newest checkpoint of `stage` in `workdir`, and its epoch: read as host NumPy arrays,
  whatever the mesh that wrote them (a 4-device run's row-sharded table included)."""
  manager = checkpoint_lib.open_manager(checkpoint_lib.stage_dir(workdir, stage), keep=100)
  epoch = checkpoint_lib.latest_epoch(manager)
  manager.close()
  path = os.path.join(checkpoint_lib.stage_dir(workdir, stage), str(epoch), "arrays")
  checkpointer = ocp.PyTreeCheckpointer()
  stored = checkpointer.metadata(path).item_metadata
  as_numpy = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), stored)
  restored = checkpointer.restore(path, args=ocp.args.PyTreeRestore(restore_args=as_numpy))
  flat = flax.traverse_util.flatten_dict(restored)
  return epoch, {"/".join(k): np.asarray(v) for k, v in flat.items()}


def assert_bit_identical(workdir_a, workdir_b, stage):
  epoch_a, a = final_arrays(workdir_a, stage)
  epoch_b, b = final_arrays(workdir_b, stage)
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


def records(workdir):
  lines = open(os.path.join(workdir, "metrics.jsonl")).read().splitlines()
  return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]


def check(results, expect):
  for (code, out, err), want in zip(results, expect):
    assert code == want, f"return code {code}, expected {want}\n{out[-2000:]}\n{err[-4000:]}"


def sections(stdout: str) -> dict[str, str]:
  """{case: its part of the output} of a worker that ran several cases (resume_worker's `case CASE` lines)."""
  sections, case = {}, None
  for line in stdout.splitlines(keepends=True):
    if line.startswith("case "):
      case = line.split()[1]
      sections[case] = ""
    elif case is not None:
      sections[case] += line
  return sections


def case_seconds(stdout: str) -> dict[str, float]:
  """{case: seconds} of a worker that ran several cases (resume_worker's `seconds CASE S` lines)."""
  seconds = {}
  for line in stdout.splitlines():
    if line.startswith("seconds ") and len(line.split()) == 3:
      _, case, value = line.split()
      seconds[case] = float(value)
  return seconds
