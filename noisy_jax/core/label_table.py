"""The label table: the single source of training targets.

Every training example i owns row i of the table (its index in the training split). The train step reads
`soft_labels[idx]` and `weights[idx]` for the batch's indices; methods change the table only through the pure
functions below, at epoch boundaries (relabelling, pruning) or inside the step (recording predictions).

  noisy_labels  [N] int32      the labels as given (possibly wrong); never changed
  soft_labels   [N, C] float32 current targets; starts as one_hot(noisy_labels) (float64 with x64 on: precision)
  weights       [N] float32    per-example weights; starts at 1 (truncated Lq sets them to {0, 1})
  history       [H, N, C]      ring buffer of recorded softmax outputs (H may be 0)
  history_filled [H] bool      which ring slots have been written at least once
  method_rows   {name: [N, ...]}  a method's own per-example state (empty for most methods): ELR's targets
                               `elr_targets` [N, C], SOP's `sop_u` [N] and `sop_v` [N, C]; read and written by
                               index in the step (`read_rows` / `write_rows`), checkpointed and sharded by rows
                               like the rest of the table

Joint Optimization (Tanaka et al., CVPR 2018, arXiv 1803.11364) records each example's softmax once per epoch
into slot `epoch % H` and relabels from the mean of the filled slots (the original code uses H = 10).
Truncated Lq (Zhang & Sabuncu, NeurIPS 2018) sets w_i = [p_y(x_i) > k].

All functions are pure, jit-able and never leave the device. Indices outside [0, N) are dropped on write (the
trainer uses index N to pad a short final batch) and read as row N - 1 (their results are masked out by the caller).

A large table is split by rows over the devices (noisy_jax.parallel.table_sharding: when, padding, specs, memory per
device). Inside the per-device step each device then holds rows [d n, (d + 1) n) and reads and writes by index with
`sharded_targets`, `sharded_record` and `sharded_set_weights` (no gather of the table). The epoch-boundary functions
(history_mean, relabel, relabel_top_k, set_all_weights, methods.prune_weights) are written for the global table and
are jitted over the sharded global arrays; all but top-k are row-wise, so each device computes its own rows.
"""

from __future__ import annotations

import flax
import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import precision

RELABEL_MODES = ("soft", "hard")


@flax.struct.dataclass
class LabelTable:
  """Per-example targets, weights and prediction history (see the module docstring for shapes)."""

  noisy_labels: jax.Array
  soft_labels: jax.Array
  weights: jax.Array
  history: jax.Array
  history_filled: jax.Array
  method_rows: dict = flax.struct.field(default_factory=dict)

  @property
  def num_examples(self) -> int:
    return self.soft_labels.shape[0]

  @property
  def num_classes(self) -> int:
    return self.soft_labels.shape[1]

  @property
  def history_length(self) -> int:
    return self.history.shape[0]


def create(noisy_labels, num_classes: int, *, history_length: int = 0) -> LabelTable:
  """Builds the initial table: soft_labels = one_hot(noisy_labels), weights = 1, empty history.

  Args:
    noisy_labels: [N] integer class ids in [0, num_classes).
    num_classes: C.
    history_length: H >= 0, the number of epochs of predictions kept (Joint Optimization: 10).
  """
  if int(num_classes) < 2:
    raise ValueError(f"num_classes={num_classes!r} must be at least 2.")
  if int(history_length) < 0:
    raise ValueError(f"history_length={history_length!r} must be >= 0.")
  labels = _checks.check_labels("noisy_labels", noisy_labels, num_classes)
  n, dtype = labels.shape[0], precision.float_dtype()
  return LabelTable(
    noisy_labels=jnp.asarray(labels, jnp.int32),
    soft_labels=jax.nn.one_hot(labels, num_classes, dtype=dtype),
    weights=jnp.ones((n,), dtype),
    history=jnp.zeros((history_length, n, num_classes), dtype),
    history_filled=jnp.zeros((history_length,), bool),
  )


def with_method_rows(table: LabelTable, rows: dict) -> LabelTable:
  """The table with a method's per-example state `rows` ({name: [N, ...]}, every leaf with the table's N rows)."""
  for name, value in rows.items():
    if np.shape(value)[:1] != (table.num_examples,):
      raise ValueError(
        f"method row state {name!r} has shape {np.shape(value)}; its first axis must be the table's "
        f"{table.num_examples} rows."
      )
  return table.replace(method_rows=dict(rows))


def read_rows(table: LabelTable, indices: jax.Array) -> dict:
  """{name: method_rows[name][indices]} for the batch's [B] indices (out-of-range ones read row N - 1)."""
  return {name: jnp.take(value, indices, axis=0, mode="clip") for name, value in table.method_rows.items()}


def write_rows(table: LabelTable, indices: jax.Array, rows: dict) -> LabelTable:
  """method_rows[name][indices[b]] = rows[name][b]; indices outside [0, N) are dropped (padding)."""
  return table.replace(
    method_rows={
      name: value.at[indices].set(rows[name].astype(value.dtype), mode="drop")
      for name, value in table.method_rows.items()
    }
  )


def targets(table: LabelTable, indices: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Returns (soft_labels[indices] [B, C], weights[indices] [B]) for the batch's example indices [B]."""
  return (
    jnp.take(table.soft_labels, indices, axis=0, mode="clip"),
    jnp.take(table.weights, indices, axis=0, mode="clip"),
  )


def record(table: LabelTable, indices: jax.Array, probabilities: jax.Array, *, slot) -> LabelTable:
  """Writes history[slot % H, indices[b]] = probabilities[b] and marks the slot filled.

  Args:
    indices: [B] example indices; entries outside [0, N) are dropped (padding).
    probabilities: [B, C] softmax outputs.
    slot: int or scalar int array; the trainer passes the epoch number so the ring cycles over H epochs.
  """
  if table.history_length == 0:
    raise ValueError("record() needs a table with history_length > 0; create it with history_length=H.")
  _checks.check_same_shape(
    "probabilities", probabilities, "soft_labels[indices]", np.empty((np.shape(indices)[0], table.num_classes))
  )
  ring_slot = jnp.asarray(slot, jnp.int32) % table.history_length
  history = table.history.at[ring_slot, indices].set(probabilities.astype(table.history.dtype), mode="drop")
  return table.replace(history=history, history_filled=table.history_filled.at[ring_slot].set(True))


def history_mean(table: LabelTable) -> jax.Array:
  """Mean of the filled history slots, [N, C]; the current soft labels where no slot is filled yet."""
  if table.history_length == 0:
    return table.soft_labels
  filled = table.history_filled.astype(table.history.dtype)
  count = jnp.sum(filled)
  total = jnp.einsum("h,hnc->nc", filled, table.history)
  return jnp.where(count > 0, total / jnp.maximum(count, 1.0), table.soft_labels)


def relabel(table: LabelTable, *, mode: str = "soft") -> LabelTable:
  """Joint Optimization's label update from the history mean s_bar_i.

  soft: y_i = s_bar_i (the paper's better variant and the original code's); hard: y_i = one_hot(argmax s_bar_i).
  """
  _checks.check_choice("relabel mode", mode, RELABEL_MODES)
  mean = history_mean(table)
  if mode == "hard":
    mean = jax.nn.one_hot(jnp.argmax(mean, axis=-1), table.num_classes, dtype=table.soft_labels.dtype)
  return table.replace(soft_labels=mean.astype(table.soft_labels.dtype))


def relabel_top_k(table: LabelTable, k: int) -> LabelTable:
  """Hard relabelling of only the k examples whose history mean disagrees most with their current label.

  Disagreement d_i = -sum_c y_ic log s_bar_ic (cross entropy of the current label y_i under the mean prediction
  s_bar_i); the k largest get y_i = one_hot(argmax s_bar_i), every other row is unchanged (Joint Optimization's
  ablation of hard updates restricted to the top K: K = 50 / 500 / 5000 of CIFAR-10's 50k examples).
  An example whose label already equals its predicted class stays the same. k is static (it fixes a shape).

  Padding rows of a sharded table (noisy_labels < 0, noisy_jax.parallel.table_sharding) get d = -inf and are never
  chosen while k <= the number of real rows. On a row-sharded table d is computed by each device for its rows; the top-k
  of the [N] vector is left to XLA's partitioner under jit (it moves the N floats of d, 4 N bytes, not the table),
  then the k chosen rows' means are gathered ([k, C]) and scattered back into their shards.
  """
  if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= table.num_examples:
    raise ValueError(f"k={k!r} must be an int in [1, {table.num_examples}] (the number of examples).")
  mean = history_mean(table)
  disagreement = -jnp.sum(table.soft_labels * jnp.log(jnp.maximum(mean, 1e-12)), axis=-1)
  disagreement = jnp.where(table.noisy_labels >= 0, disagreement, -jnp.inf)
  _, chosen = lax.top_k(disagreement, k)
  hard = jax.nn.one_hot(jnp.argmax(mean[chosen], axis=-1), table.num_classes, dtype=table.soft_labels.dtype)
  return table.replace(soft_labels=table.soft_labels.at[chosen].set(hard))


def set_weights(table: LabelTable, indices: jax.Array, weights: jax.Array) -> LabelTable:
  """weights[indices[b]] = weights[b]; out-of-range indices are dropped."""
  _checks.check_same_shape("weights", weights, "indices", indices)
  return table.replace(weights=table.weights.at[indices].set(jnp.asarray(weights, table.weights.dtype), mode="drop"))


def set_all_weights(table: LabelTable, weights: jax.Array) -> LabelTable:
  """Replaces the whole weight vector [N]."""
  _checks.check_same_shape("weights", weights, "table.weights", table.weights)
  return table.replace(weights=jnp.asarray(weights, table.weights.dtype))


# ---------------------------------------------------------------------------------------------------------------
# Reads and writes by index on a row-sharded table, inside a per-device program (shard_map over `axis_name`)
#
# `table` is this device's block: n = table.num_examples rows, the global rows [o, o + n) with o = d n and d =
# axis_index(axis_name). A global row r is owned here iff o <= r < o + n; it is local row r - o. Rows outside
# [0, D n) belong to no device. With one device (o = 0, n = N) these equal targets / record / set_weights for
# in-range indices.


def _owned_rows(table: LabelTable, rows: jax.Array, axis_name: str) -> tuple[jax.Array, jax.Array]:
  """(local row r - o clipped into [0, n), owned [..] bool) for global rows `rows`."""
  n = table.num_examples
  local = rows - lax.axis_index(axis_name) * n
  owned = (local >= 0) & (local < n)
  return jnp.where(owned, local, 0), owned


def sharded_targets(table: LabelTable, indices: jax.Array, *, axis_name: str) -> tuple[jax.Array, jax.Array]:
  """`targets` for a row-sharded table: (soft_labels[indices] [b, C], weights[indices] [b]) of this device's [b].

  The devices' indices are all-gathered (I = [i_1 .. i_B], B = D b, this device's at positions [d b, (d + 1) b));
  each device looks up the rows it owns and zeros elsewhere, and the sum over devices is reduce-scattered:

    y_j = sum_e [i_j owned by e] soft_labels_e[i_j - o_e]      for j in this device's [d b, (d + 1) b)

  Exactly one device owns a row in [0, D n), so y_j is that row bit for bit (the others add zeros); indices outside
  [0, D n) read as zeros. Communication per step: B ints and a [B, C + 1] float block, never the table.
  """
  gathered = lax.all_gather(indices, axis_name, tiled=True)
  local, owned = _owned_rows(table, gathered, axis_name)
  soft = jnp.where(owned[:, None], jnp.take(table.soft_labels, local, axis=0), 0)
  weights = jnp.where(owned, jnp.take(table.weights, local, axis=0), 0)
  return (
    lax.psum_scatter(soft, axis_name, scatter_dimension=0, tiled=True),
    lax.psum_scatter(weights, axis_name, scatter_dimension=0, tiled=True),
  )


def sharded_record(
  table: LabelTable, indices: jax.Array, probabilities: jax.Array, *, slot, axis_name: str
) -> LabelTable:
  """`record` for a row-sharded table: history[slot % H, r - o] = p for each (r, p) this device owns.

  Args:
    indices: [B] global rows of the whole (all-gathered) batch; rows no device owns (e.g. -1) are dropped.
    probabilities: [B, C], the same on every device (all-gathered).
    slot: as in `record`; history_filled (replicated) is marked on every device alike.
  """
  if table.history_length == 0:
    raise ValueError("sharded_record() needs a table with history_length > 0; create it with history_length=H.")
  _checks.check_same_shape(
    "probabilities", probabilities, "soft_labels[indices]", np.empty((np.shape(indices)[0], table.num_classes))
  )
  local, owned = _owned_rows(table, indices, axis_name)
  local = jnp.where(owned, local, table.num_examples)  # not ours: out of range, dropped
  ring_slot = jnp.asarray(slot, jnp.int32) % table.history_length
  history = table.history.at[ring_slot, local].set(probabilities.astype(table.history.dtype), mode="drop")
  return table.replace(history=history, history_filled=table.history_filled.at[ring_slot].set(True))


def sharded_set_weights(table: LabelTable, indices: jax.Array, weights: jax.Array, *, axis_name: str) -> LabelTable:
  """`set_weights` for a row-sharded table: weights[r - o] = w for each (r, w) of the [B] (all-gathered) pairs
  this device owns; rows no device owns are dropped."""
  _checks.check_same_shape("weights", weights, "indices", indices)
  local, owned = _owned_rows(table, indices, axis_name)
  local = jnp.where(owned, local, table.num_examples)
  return table.replace(weights=table.weights.at[local].set(jnp.asarray(weights, table.weights.dtype), mode="drop"))


def sharded_read_rows(table: LabelTable, indices: jax.Array, *, axis_name: str) -> dict:
  """`read_rows` for a row-sharded table (this device's [b] indices), by the reduce-scatter of `sharded_targets`:
  each row comes bit for bit from the one device that owns it."""
  gathered = lax.all_gather(indices, axis_name, tiled=True)
  local, owned = _owned_rows(table, gathered, axis_name)
  out = {}
  for name, value in table.method_rows.items():
    mask = owned.reshape(owned.shape + (1,) * (value.ndim - 1))
    block = jnp.where(mask, jnp.take(value, local, axis=0), 0)
    out[name] = lax.psum_scatter(block, axis_name, scatter_dimension=0, tiled=True)
  return out


def read_batch(table: LabelTable, indices: jax.Array, *, table_axis: str | None = None) -> tuple:
  """(soft_labels [b, C], weights [b], method rows {name: [b, ...]}) of the batch's rows: `targets` and `read_rows`
  of a replicated table (table_axis None), or `sharded_targets` and `sharded_read_rows` of a table row-sharded over
  `table_axis` (this device's [b] indices)."""
  if table_axis is None:
    soft_labels, weights = targets(table, indices)
    return soft_labels, weights, read_rows(table, indices)
  soft_labels, weights = sharded_targets(table, indices, axis_name=table_axis)
  return soft_labels, weights, sharded_read_rows(table, indices, axis_name=table_axis)


def sharded_write_rows(table: LabelTable, indices: jax.Array, rows: dict, *, axis_name: str) -> LabelTable:
  """`write_rows` for a row-sharded table: the [B] all-gathered (index, row) pairs this device owns are written;
  rows no device owns (e.g. -1) are dropped."""
  local, owned = _owned_rows(table, indices, axis_name)
  local = jnp.where(owned, local, table.num_examples)
  return table.replace(
    method_rows={
      name: value.at[local].set(rows[name].astype(value.dtype), mode="drop")
      for name, value in table.method_rows.items()
    }
  )


def current_labels(table: LabelTable) -> jax.Array:
  """argmax of the soft labels, [N] int32 (what label-recovery accuracy compares to the clean labels)."""
  return jnp.argmax(table.soft_labels, axis=-1).astype(jnp.int32)


def changed(table: LabelTable) -> jax.Array:
  """[N] bool: the current argmax label differs from the given (noisy) label, i.e. the example was relabelled."""
  return current_labels(table) != table.noisy_labels
