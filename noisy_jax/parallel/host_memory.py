"""Host memory: keep freed memory for reuse, so that XLA:CPU's scratch buffer is not page-faulted in on every step.

Why. Each execution of a compiled XLA:CPU program allocates its scratch ("temporaries") buffer and frees it when
done: 449 MiB per pre-activation ResNet-32 train step at batch 128. glibc's malloc serves any request above 32 MiB
with a fresh `mmap` and gives it back with `munmap` on free, so every step faults ~115,000 new pages in and the
kernel zeroes them: measured on our 2-core CPU, 0.21 s of system time per step, and a step of 447 ms instead of
335 ms (`python -m experiments.benchmarks.train_step --host-malloc system`, then `retain`). Small models (the SmallCNN's
29 MiB) stay under the threshold and are unaffected.

What `retain_freed_memory` does (glibc only, through `mallopt`):
  * M_ARENA_MAX = 1: every thread allocates from the main heap (a thread's own arena cannot hold a block larger
    than 64 MiB and would `mmap` it whatever the settings);
  * M_MMAP_MAX = 0: no allocation is served by `mmap`; large blocks come from the heap;
  * M_TRIM_THRESHOLD = 2 GiB - 1: freed memory at the top of the heap is kept, not handed back to the kernel.
The process keeps its peak heap size for its whole life. The heap does not reach it in the first step every time:
now and then no free block fits the scratch buffer (small live allocations split the freed ones), the heap grows by
one buffer and that step faults its pages in as before. Measured with a 64 MiB buffer in fresh processes: 0 to 6 such
executions out of 60, the last by the 35th (`tests/test_host_memory.py` bounds it); a training run's thousands of
steps amortise them.

It must run BEFORE the JAX backend starts (the first `jax.devices()` or computation): threads that have already
allocated keep their own arenas, and the setting then changes nothing (measured). `experiments/train.py` calls it
first thing (`--host_malloc`); in a notebook, call it in the first cell.

Default policy (`should_retain`): on, unless an accelerator plugin (libtpu, jax-cuda*, jax-rocm*) is installed and
JAX_PLATFORMS does not force the CPU: on an accelerator host the scratch buffers live on the device, and one heap
for all host threads could make a many-core host's input threads wait on each other.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.metadata
import os
import platform

# mallopt parameter numbers from glibc's <malloc.h>.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
M_ARENA_MAX = -8
KEEP_UP_TO_BYTES = 2**31 - 1  # mallopt takes an int: the largest trim threshold it can express
MODES = ("auto", "retain", "system")
ACCELERATOR_PLUGIN_PREFIXES = ("libtpu", "jax-cuda", "jax-rocm")

_applied = False


def is_glibc() -> bool:
  """True on Linux with glibc (the only malloc whose settings we know)."""
  return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def accelerator_plugins() -> list[str]:
  """Names of the installed distributions that give JAX a TPU or GPU backend (e.g. 'libtpu', 'jax-cuda12-plugin')."""
  found = set()
  for dist in importlib.metadata.distributions():
    name = (dist.metadata["Name"] or "").lower().replace("_", "-")
    if name.startswith(ACCELERATOR_PLUGIN_PREFIXES):
      found.add(name)
  return sorted(found)


def should_retain(mode: str = "auto", *, jax_platforms: str | None = None) -> bool:
  """Whether `mode` asks for retained host memory here.

  mode: 'retain' (always, where glibc allows), 'system' (never: the C library's defaults), or 'auto': retain unless
  an accelerator plugin is installed, where `jax_platforms` (default: the JAX_PLATFORMS environment variable) equal
  to 'cpu' still retains.
  """
  if mode not in MODES:
    raise ValueError(f"host malloc mode {mode!r} is not one of {MODES}.")
  if mode == "system" or not is_glibc():
    return False
  if mode == "retain":
    return True
  if jax_platforms is None:
    jax_platforms = os.environ.get("JAX_PLATFORMS", "")
  if jax_platforms.strip().lower() == "cpu":
    return True
  return not accelerator_plugins()


def retain_freed_memory() -> bool:
  """Sets glibc's malloc to keep freed memory for reuse (module docstring). Returns True if the settings are in force.

  Idempotent. Returns False (and changes nothing) where the C library is not glibc. Call it before the JAX backend
  starts; later it is harmless but ineffective.
  """
  global _applied
  if _applied:
    return True
  if not is_glibc():
    return False
  libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
  settings = ((M_ARENA_MAX, 1), (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, KEEP_UP_TO_BYTES))
  for param, value in settings:
    if libc.mallopt(ctypes.c_int(param), ctypes.c_int(value)) != 1:  # mallopt returns 1 on success
      raise OSError(f"glibc mallopt({param}, {value}) failed.")
  _applied = True
  return True


def configure(mode: str = "auto") -> bool:
  """`retain_freed_memory()` if `should_retain(mode)`; returns whether retention is in force."""
  return retain_freed_memory() if should_retain(mode) else _applied
