"""Runs a test worker script in its own process on N simulated CPU devices and returns its RESULT record.

The worker prints one line `RESULT {json}`. Set before jax is imported there: XLA_FLAGS with the device count,
PJRT_NPROC = 2N (without it, collectives on simulated devices deadlock on a 2-core machine: shared/DESIGN.md) and
JAX_PLATFORMS=cpu. A timeout bounds the process, so a hang fails the test instead of freezing the suite.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


# A hang (a deadlocked collective) is what the timeout is for; XLA itself aborts one after ~40 s. The bound is wide
# because a worker that trains every method on 1 and 4 devices took ~300 s when another pytest-xdist worker and
# other jobs shared the 2 cores (it timed out at the former 300 s, 2026-11-25).
WORKER_TIMEOUT_S = 900


def xla_flags_with_devices(num_devices: int, flags: str | None = None) -> str:
  """`flags` (default: this process's XLA_FLAGS, which hold the suite's own: tests/conftest.py) with the simulated
  device count set to num_devices (1: no count, XLA's default)."""
  flags = os.environ.get("XLA_FLAGS", "") if flags is None else flags
  kept = [f for f in flags.split() if not f.startswith("--xla_force_host_platform_device_count")]
  if num_devices > 1:
    kept.append(f"--xla_force_host_platform_device_count={num_devices}")
  return " ".join(kept)


def run_worker(script: str, num_devices: int, *args: str, timeout: float = WORKER_TIMEOUT_S) -> dict:
  """Runs tests/`script` with `num_devices` simulated devices and `args`; returns its RESULT json."""
  env = dict(os.environ)
  env["XLA_FLAGS"] = xla_flags_with_devices(num_devices)
  env["PJRT_NPROC"] = str(2 * num_devices)
  env["JAX_PLATFORMS"] = "cpu"
  proc = subprocess.run(
    [sys.executable, os.path.join(HERE, script), str(num_devices), *args],
    env=env,
    capture_output=True,
    text=True,
    timeout=timeout,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
  return json.loads(line[len("RESULT ") :])
