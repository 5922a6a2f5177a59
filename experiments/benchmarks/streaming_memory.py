"""Memory measurements of experiments/benchmarks/streaming.py: the peak RSS of this process and its workers while
a side runs (`RssSampler`), and the resident training split's memory, float32 vs uint8, each in a fresh process
(`resident_memory`). See streaming.py's docstring (measurements 3 and 4).
"""

from __future__ import annotations

import threading

MIB = 2.0**20


# ---------------------------------------------------------------------------------------------------------------
# Peak RSS of this process and its workers


class RssSampler:
  """Samples RSS (this process, and the sum over its child processes) in a thread; peaks per labelled window."""

  def __init__(self, interval: float):
    import psutil  # pylint: disable=g-import-not-at-top

    self._psutil = psutil
    self._proc = psutil.Process()
    self._interval = interval
    self._label = None
    self._lock = threading.Lock()
    self._skip = {}  # pid -> True for multiprocessing's resource tracker (not a worker)
    self.peaks: dict[str, dict] = {}
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._run, daemon=True)
    self._thread.start()

  def _is_tracker(self, child) -> bool:
    if child.pid not in self._skip:
      try:
        self._skip[child.pid] = "resource_tracker" in " ".join(child.cmdline())
      except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
        return True
    return self._skip[child.pid]

  def sample(self) -> tuple[int, int, int, int]:
    """(this process's RSS, the workers' RSS summed, their USS summed, the number of workers): bytes."""
    own = self._proc.memory_info().rss
    workers, unique, count = 0, 0, 0
    for child in self._proc.children(recursive=True):
      try:
        if self._is_tracker(child):
          continue
        info = child.memory_full_info()  # uss: the pages only this process maps
        workers += info.rss
        unique += info.uss
        count += 1
      except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
        pass
    return own, workers, unique, count

  def _record(self, label: str) -> None:
    own, workers, unique, count = self.sample()
    with self._lock:
      p = self.peaks.setdefault(
        label,
        {
          "process_at_start_mib": own / MIB,
          "peak_total_mib": 0.0,
          "peak_process_mib": 0.0,
          "peak_workers_mib": 0.0,
          "peak_workers_uss_mib": 0.0,
          "max_workers_seen": 0,
          "samples": 0,
        },
      )
      p["peak_total_mib"] = max(p["peak_total_mib"], (own + workers) / MIB)
      p["peak_process_mib"] = max(p["peak_process_mib"], own / MIB)
      p["peak_workers_mib"] = max(p["peak_workers_mib"], workers / MIB)
      p["peak_workers_uss_mib"] = max(p["peak_workers_uss_mib"], unique / MIB)
      p["max_workers_seen"] = max(p["max_workers_seen"], count)
      p["samples"] += 1

  def _run(self) -> None:
    while not self._stop.wait(self._interval):
      label = self._label
      if label is not None:
        self._record(label)

  def watch(self, label: str, fn):
    """fn wrapped: the sampler attributes its samples to `label` while it runs (one sample at each end too)."""

    def run():
      self._record(label)
      self._label = label
      try:
        return fn()
      finally:
        self._label = None
        self._record(label)

    return run

  def close(self) -> None:
    self._stop.set()
    self._thread.join()


# ---------------------------------------------------------------------------------------------------------------
# The resident split's memory, float32 vs uint8 (fresh processes)


def _resident_child(dtype_name: str, num_examples: int, conn) -> None:
  """In a fresh (spawned) process: RSS before/after jax.device_put of a fresh [N, 32, 32, 3] array."""
  import gc  # pylint: disable=g-import-not-at-top

  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import psutil  # pylint: disable=g-import-not-at-top

  proc = psutil.Process()
  jax.block_until_ready(jax.device_put(np.zeros(8, np.float32)))  # the CPU client started
  before = proc.memory_info().rss
  host = np.empty((num_examples, 32, 32, 3), np.dtype(dtype_name))
  pattern = (np.arange(32 * 32 * 3) % 251).reshape(32, 32, 3)
  host[...] = pattern / 255.0 if host.dtype == np.float32 else pattern  # every page touched
  with_host = proc.memory_info().rss
  on_device = jax.block_until_ready(jax.device_put(host))
  after_put = proc.memory_info().rss
  aliases = None
  try:
    aliases = on_device.unsafe_buffer_pointer() == host.ctypes.data
  except Exception:  # pylint: disable=broad-except
    pass
  del host
  gc.collect()
  device_only = proc.memory_info().rss
  conn.send(
    {
      "dtype": dtype_name,
      "bytes": int(on_device.nbytes),
      "host_array_rss_mib": (with_host - before) / MIB,
      "device_put_rss_increase_mib": (after_put - with_host) / MIB,
      "kept_after_host_deleted_mib": (device_only - before) / MIB,
      "device_aliases_host": aliases,
    }
  )
  conn.close()


def resident_memory(num_examples: int) -> list[dict]:
  import multiprocessing  # pylint: disable=g-import-not-at-top

  ctx = multiprocessing.get_context("spawn")
  out = []
  for dtype_name in ("float32", "uint8"):
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_resident_child, args=(dtype_name, num_examples, send))
    child.start()
    send.close()
    out.append(receive.recv())
    child.join()
  return out
