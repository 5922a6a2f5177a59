"""The device mesh of a run: one axis, `batch`, over the devices of every process, and placing a pytree on it."""

from __future__ import annotations

import jax
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
import numpy as np

from noisy_jax.parallel import distributed

AXIS = "batch"


def make_mesh(num_devices: int | None = None) -> Mesh:
  """A 1-D mesh with axis `batch` over the first `num_devices` local devices (all by default).

  In a multi-process run (noisy_jax.parallel.distributed) the mesh spans every process's devices (`jax.devices()`), and
  `num_devices` must be None or that global count: every process takes part in every step.
  """
  if jax.process_count() > 1:
    devices = jax.devices()
    if num_devices not in (None, len(devices)):
      raise ValueError(
        f"num_devices={num_devices!r}: a run over {jax.process_count()} processes uses all "
        f"{len(devices)} devices (leave num_devices unset or 0)."
      )
    return Mesh(np.asarray(devices), (AXIS,))
  devices = jax.local_devices()
  num_devices = len(devices) if num_devices is None else num_devices
  if not 1 <= num_devices <= len(devices):
    raise ValueError(f"num_devices={num_devices!r} must be in [1, {len(devices)}] (the local device count).")
  return Mesh(np.asarray(devices[:num_devices]), (AXIS,))


def replicate(tree, mesh: Mesh):
  """A replicated copy of `tree` on every device of `mesh` (never an alias: the epoch program donates it).

  A mesh with other processes' devices gets global arrays built from this process's host copy
  (noisy_jax.parallel.distributed.replicated): every process must pass the same values.
  """
  if not mesh.is_multi_process:
    return jax.device_put(tree, jax.sharding.NamedSharding(mesh, P()), may_alias=False)
  return distributed.replicated(tree, mesh)
