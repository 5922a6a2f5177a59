"""Multi-host (multi-process) runs: starting `jax.distributed`, and global arrays built from host data.

JAX runs one Python process per host (multi-controller): every process runs the same program, sees its own local
devices and the global device list, and the compiled programs communicate across processes. The trainer needs
three things from this module:

- `maybe_initialize()` at the very start of a multi-host run, before any JAX computation. It calls
  `jax.distributed.initialize()` only when asked to (the `--multihost` flag of experiments/train.py, the
  environment variable NOISY_JAX_MULTIHOST=1, or JAX_COORDINATOR_ADDRESS set by a launcher); a plain run never
  starts the distributed runtime. On Cloud TPU VMs, Slurm and Open MPI, JAX finds the coordinator, the number of
  processes and this process's id itself; elsewhere give them as arguments or as JAX_COORDINATOR_ADDRESS,
  JAX_NUM_PROCESSES and JAX_PROCESS_ID. CPU processes talk through gloo collectives (set before initialization).
- `replicated(tree, mesh)`: the same host value on every device of a mesh that spans processes (parameters,
  optimiser state, the label table, a device-resident dataset). Every process must pass the same value.
- `global_batch(local, mesh)`: a batch-sharded global array from each process's own rows (a host data pipeline
  that reads a different slice of the data on each host).

The trainer (noisy_jax.train) keeps the whole (small) training split resident on every device and computes each
step's global batch indices identically on every process from the same key; each device gathers its own rows of
the batch from its copy, so the data is sharded by device (and so by process) at the gather, and every process
holds the dataset in host memory. A replicated label table: the rows each device writes are all-gathered over the
whole mesh inside the step, so every process keeps the same table. A row-sharded one
(noisy_jax.parallel.table_sharding): each process builds, trains and checkpoints only its own devices' rows.

Reading results on the host: a fully replicated global array reads like a local one (`np.asarray`, `float`,
`jax.device_get` read this process's copy); `host_value` also gathers arrays sharded over processes. Only process 0
should write files (`is_main_process`); collective steps (every jitted computation, orbax checkpoints) must run on
every process in the same order.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import jax
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np

ENV_MULTIHOST = "NOISY_JAX_MULTIHOST"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def requested(multihost: bool | None = None) -> bool:
  """Whether this run is meant to be multi-host: `multihost` if given, else NOISY_JAX_MULTIHOST (1/true/yes/on or
  0/false/no/off), else whether a launcher set JAX_COORDINATOR_ADDRESS."""
  if multihost is not None:
    return bool(multihost)
  value = os.environ.get(ENV_MULTIHOST)
  if value is not None:
    value = value.strip().lower()
    if value not in _TRUE + _FALSE:
      raise ValueError(f"{ENV_MULTIHOST}={value!r}: expected one of {_TRUE + _FALSE[1:]} (or empty).")
    return value in _TRUE
  return bool(os.environ.get("JAX_COORDINATOR_ADDRESS"))


def _env_int(name: str) -> int | None:
  value = os.environ.get(name)
  if value is None or not value.strip():
    return None
  try:
    return int(value)
  except ValueError:
    raise ValueError(f"{name}={value!r} must be an integer.") from None


def maybe_initialize(
  multihost: bool | None = None,
  *,
  coordinator_address: str | None = None,
  num_processes: int | None = None,
  process_id: int | None = None,
  local_device_ids: int | Sequence[int] | None = None,
  initialization_timeout: int = 300,
) -> bool:
  """Starts `jax.distributed` when this is a multi-host run (see `requested`); returns whether it is running.

  Must be called before any JAX computation (JAX raises otherwise). Calling it again is a no-op. The arguments
  left None come from JAX_COORDINATOR_ADDRESS ("host:port" of process 0), JAX_NUM_PROCESSES and JAX_PROCESS_ID,
  else from JAX's own cluster detection (Cloud TPU, Slurm, Open MPI). On CPU, cross-process collectives use gloo
  (JAX's default since 0.5; set here when the configured implementation is empty).
  """
  if jax.distributed.is_initialized():
    return True
  if not requested(multihost):
    return False
  num_processes = _env_int("JAX_NUM_PROCESSES") if num_processes is None else num_processes
  process_id = _env_int("JAX_PROCESS_ID") if process_id is None else process_id
  if num_processes is not None and num_processes < 1:
    raise ValueError(f"num_processes={num_processes!r} must be >= 1.")
  if process_id is not None and num_processes is not None and not 0 <= process_id < num_processes:
    raise ValueError(f"process_id={process_id!r} must be in [0, {num_processes}) (num_processes={num_processes}).")
  if not jax.config.jax_cpu_collectives_implementation:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(
    coordinator_address=coordinator_address,
    num_processes=num_processes,
    process_id=process_id,
    local_device_ids=local_device_ids,
    initialization_timeout=initialization_timeout,
  )
  return True


def is_multiprocess() -> bool:
  """Whether several JAX processes take part in this run."""
  return jax.process_count() > 1


def is_main_process() -> bool:
  """Whether this is process 0: the one that writes metrics, summaries and plots."""
  return jax.process_index() == 0


def _host_array(x) -> np.ndarray:
  if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
    raise ValueError(
      "replicated() takes raw uint32 keys (jax.random.PRNGKey), not typed keys (jax.random.key); "
      "pass jax.random.key_data(key)."
    )
  return np.asarray(x)


def replicated(tree: Any, mesh: Mesh) -> Any:
  """`tree` (host values, or arrays readable on this host) as global arrays replicated on every device of `mesh`.

  Every process must pass the same values (`assert_same_on_all_processes` checks it). Built with
  `jax.make_array_from_callback` from a host copy, so it works whether or not the mesh has devices of other
  processes, and never aliases the input (the trainer donates the result).
  """
  sharding = NamedSharding(mesh, P())

  def one(x):
    host = _host_array(x)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

  return jax.tree.map(one, tree)


def global_batch(local: Any, mesh: Mesh, axis: str = "batch") -> Any:
  """Each process's rows `local` [b_p, ...] as one global array [sum of b_p, ...] sharded over `axis` of `mesh`.

  Process p's rows go to its own devices, in process order; each device's share must divide evenly
  (`jax.make_array_from_process_local_data`).
  """
  sharding = NamedSharding(mesh, P(axis))
  return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x)), local)


def host_value(tree: Any) -> Any:
  """NumPy copies of the global values of `tree`'s arrays on every process (gathered across processes when an
  array is sharded over devices of several processes; a collective then, to be called on every process)."""

  def one(x):
    if not isinstance(x, jax.Array) or x.is_fully_addressable or x.is_fully_replicated:
      return np.asarray(x)
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))

  return jax.tree.map(one, tree)


def assert_same_on_all_processes(tree: Any, what: str = "value") -> None:
  """Raises AssertionError unless `tree` is equal on every process (a collective: call it on every process)."""
  if is_multiprocess():
    multihost_utils.assert_equal(tree, fail_message=f"The {what} differs between JAX processes.")
