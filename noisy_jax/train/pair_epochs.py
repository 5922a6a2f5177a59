"""The compiled per-network step of methods whose networks train in turn, one epoch each (DivideMix, ELR+).

`network_programs(network_step, mesh, ...)` compiles `network_step(state, table, totals, *replicated, m=, shard_table=)`
once per table layout under shard_map over the mesh, with the network's index m an argument of the program (an int32
scalar: one program serves both networks, so a pair compiles one step, not two): the stacked pair and the totals
replicated and donated, the table replicated or row-sharded (noisy_jax.parallel.table_sharding), every other argument
replicated. The
totals are running sums {"loss", "correct", "count"} of the epoch, kept on the devices (`zero_totals`), read once at
the end (`epoch.mean_metrics`).
"""

from __future__ import annotations

import jax
from jax.sharding import PartitionSpec as P

from noisy_jax.parallel import table_sharding
from noisy_jax.train import epoch as epoch_lib


def network_programs(network_step, mesh, *, axis: str, num_replicated: int, compiler_options=None):
  """`program(shard_table)`: the jitted, shard-mapped `network_step` (compiled on first use), called as
  `program(shard_table)(state, table, totals, m, *replicated)` with m the network's index (a traced int32 scalar).

  num_replicated: how many arguments follow m, all replicated.
  """
  programs = {}

  def program(shard_table: bool):
    if shard_table not in programs:
      table_spec = table_sharding.specs(axis, sharded=shard_table)

      def step(state, table, totals, m, *replicated):
        return network_step(state, table, totals, *replicated, m=m, shard_table=shard_table)

      mapped = jax.shard_map(
        step,
        mesh=mesh,
        in_specs=(P(), table_spec, P(), P()) + (P(),) * num_replicated,
        out_specs=(P(), table_spec, P()),
        check_vma=False,
      )
      programs[shard_table] = jax.jit(mapped, donate_argnums=(0, 2), compiler_options=compiler_options)
    return programs[shard_table]

  return program


def zero_totals(mesh) -> dict:
  """The epoch's running sums (epoch.zero_totals), zero, replicated over the mesh."""
  return jax.device_put(epoch_lib.zero_totals(), jax.sharding.NamedSharding(mesh, P()))


def refuse_inside_epoch(method_name: str, unused: dict) -> None:
  """ValueError when a method's own epoch program is asked to resume inside an epoch (`unused`: the keyword
  arguments of make_epoch_fn's 'steps' mode it does not take: start, totals, after_step)."""
  if unused:
    raise ValueError(
      f"{method_name}'s epoch does not resume inside an epoch ({sorted(unused)}): use checkpoint_every_steps=0."
    )


def add_to_totals(totals: dict, loss, correct, count) -> dict:
  """totals + (loss x count, correct, count) of one step (loss: the step's mean)."""
  return {
    "loss": totals["loss"] + loss * count,
    "correct": totals["correct"] + correct,
    "count": totals["count"] + count,
  }
