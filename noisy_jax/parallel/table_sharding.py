"""Where the label table lives: replicated on every device (small tables) or split by rows over the mesh (large).

A run's `label_table_sharding` = 'auto' (DEFAULT_SHARDING) | 'replicated' | 'sharded' and `label_table_budget_mib`
(DEFAULT_BUDGET_MIB, the budget of 'auto'), read by the trainer (noisy_jax.train.loop.table_sharded): `use_sharded`.

  replicated  every device holds the whole table (N rows); reads and writes are local (label_table.targets/record).
  sharded     the rows are padded up to N_pad = D ceil(N / D) (D devices on the mesh axis) and device d holds rows
              [d n, (d + 1) n), n = N_pad / D, of noisy_labels [N_pad], soft_labels [N_pad, C], weights [N_pad] and
              history [H, N_pad, C] (its row axis); history_filled [H] is replicated. The step reads and writes by
              index with label_table.sharded_targets / sharded_record (no gather of the table).
  auto        sharded iff D > 1 and table_bytes(N, C, H) > budget; replicated otherwise. Every experiment of this
  repository (at most CIFAR-100 with JO's history: 50k x 100 x 11
              floats = 210 MiB) stays replicated; Clothing1M with JO's history (595 MiB) is sharded on D > 1.

Padding rows carry noisy_labels = -1, soft_labels = 0, weights = 0, history = 0. No real index reaches them: batch
indices are in [0, N); relabel_top_k never chooses them; truncated Lq's pruning sees zero probabilities for them
(`pad_rows`) and gives them weight 0. Their content is otherwise unspecified (a hard relabel writes one_hot(0) there)
and never counted: metrics count the real rows only (`counted` in noisy_jax.core.metrics) and `unpad` drops them from
the table `fit` returns. Checkpoints keep them (each device's rows are saved and read back in place).

One process or several (a TPU pod): a sharded table is built block by block where it lives (`create` from the
given labels, `shard` from a host table, both with jax.make_array_from_callback: each process makes only its own
devices' rows), trained, reduced to metrics and checkpointed without being gathered anywhere. The one gather is
the table `fit` returns (host_table).

Memory. A row costs C (1 + H) x 4 bytes (soft labels and H history slots, float32) + 8 (weight and given label):

  per device = ceil(N / D) x (C x (1 + H) x 4 + 8) bytes     (replicated: N x (...), the same on every device)

  Clothing1M with JO's history (N = 1M, C = 14, H = 10): 624 bytes a row, 624 MB in all; fits replicated on one
    accelerator, 78 MB a device sharded over 8.
  N = 2.4M, C = 1000 over D = 256 devices: 9,375 rows a device; without history (H = 0) 4,008 bytes a row, 37.6 MB
    a device (9.6 GB replicated); with H = 10, 44,008 bytes a row, 412.6 MB a device (105.6 GB replicated: only
    the sharded table fits).
  On top of that a step moves the global batch's B indices and a [B, C] float32 block (the reduce-scatter of the
  read) and all-gathers the written [B, C] probabilities: B x C x 4 bytes, 4 MB at B = 1024, C = 1000.

Epoch boundaries (noisy_jax.train.loop's Method.epoch_end): the methods' updates are jitted over the global sharded
arrays with the table's shardings (`shardings`) as out_shardings, their probabilities padded with zero rows.
relabel / history_mean / prune_weights are row-wise; relabel_top_k's top-k moves the [N] disagreements (4 N bytes)
and k rows, see label_table.relabel_top_k. Not sharded yet: truncated Lq's train probabilities [N, C] come from
train.make_predict_fn whole on each device (N C x 4 bytes: 9.6 GB at 2.4M x 1000), and the table `fit` returns is
gathered (on several processes through the devices, host_table).
"""

from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import precision
from noisy_jax.parallel import distributed

SHARDING_MODES = ("auto", "replicated", "sharded")
DEFAULT_SHARDING = "auto"  # label_table_sharding when a run sets none
DEFAULT_BUDGET_MIB = 256
PAD_LABEL = -1  # noisy_labels of a padding row


def row_bytes(num_classes: int, history_length: int) -> int:
  """Bytes of one table row: C (1 + H) float32 (soft labels, history) + a float32 weight + an int32 label."""
  return int(num_classes) * (1 + int(history_length)) * 4 + 8


def table_bytes(num_examples: int, num_classes: int, history_length: int, num_devices: int = 1) -> int:
  """Bytes of the table held by one device when sharded over `num_devices` (1: the whole, replicated table):
  ceil(N / D) x (C (1 + H) x 4 + 8), plus the H flags of history_filled."""
  rows = math.ceil(int(num_examples) / int(num_devices))
  return rows * row_bytes(num_classes, history_length) + int(history_length)


def use_sharded(
  mode: str,
  *,
  num_examples: int,
  num_classes: int,
  history_length: int,
  num_devices: int,
  budget_mib: float = DEFAULT_BUDGET_MIB,
) -> bool:
  """Whether the table is sharded: 'sharded' -> True, 'replicated' -> False, 'auto' -> D > 1 and the whole
  table's bytes (table_bytes with D = 1) exceed `budget_mib` MiB, on one process or several."""
  _checks.check_choice("label_table_sharding", mode, SHARDING_MODES)
  if not float(budget_mib) > 0:
    raise ValueError(f"label_table_budget_mib={budget_mib!r} must be > 0 (MiB).")
  if mode != "auto":
    return mode == "sharded"
  whole = table_bytes(num_examples, num_classes, history_length)
  return int(num_devices) > 1 and whole > float(budget_mib) * 2**20


def padded_rows(num_examples: int, num_devices: int) -> int:
  """N_pad = D ceil(N / D), the smallest multiple of the device count that holds N rows."""
  return int(num_devices) * math.ceil(int(num_examples) / int(num_devices))


def _array_module(x):
  return jnp if isinstance(x, jax.Array) else np  # jax arrays and tracers stay on device; NumPy stays on the host


def pad_rows(x, rows: int):
  """x [N, ...] with zero rows appended up to `rows` (x itself when it has that many already)."""
  extra = rows - x.shape[0]
  if extra < 0:
    raise ValueError(f"Cannot pad {x.shape[0]} rows down to {rows}.")
  if extra == 0:
    return x
  xp = _array_module(x)
  return xp.concatenate([x, xp.zeros((extra, *x.shape[1:]), x.dtype)])


def pad(table: label_table_lib.LabelTable, num_devices: int) -> label_table_lib.LabelTable:
  """The table with padding rows (see the module docstring) up to padded_rows(N, D); unchanged if N_pad = N.
  Host (NumPy) tables are padded on the host, device tables on their device."""
  n = table.num_examples
  rows = padded_rows(n, num_devices)
  if rows == n:
    return table
  xp = _array_module(table.soft_labels)
  labels = xp.concatenate([table.noisy_labels, xp.full((rows - n,), PAD_LABEL, table.noisy_labels.dtype)])
  history = xp.swapaxes(pad_rows(xp.swapaxes(table.history, 0, 1), rows), 0, 1)
  return table.replace(
    noisy_labels=labels,
    soft_labels=pad_rows(table.soft_labels, rows),
    weights=pad_rows(table.weights, rows),
    history=history,
    method_rows={k: pad_rows(v, rows) for k, v in table.method_rows.items()},
  )


def unpad(table: label_table_lib.LabelTable, num_examples: int) -> label_table_lib.LabelTable:
  """The first `num_examples` rows (the real ones) of a padded table; the table itself when it has no padding.

  Works on device arrays (a sliced global array) and on host (NumPy) tables alike.
  """
  if table.num_examples == num_examples:
    return table
  if table.num_examples < num_examples:
    raise ValueError(f"num_examples={num_examples!r} exceeds the table's {table.num_examples} rows.")
  return table.replace(
    noisy_labels=table.noisy_labels[:num_examples],
    soft_labels=table.soft_labels[:num_examples],
    weights=table.weights[:num_examples],
    history=table.history[:, :num_examples],
    method_rows={k: v[:num_examples] for k, v in table.method_rows.items()},
  )


def specs(axis: str, *, sharded: bool) -> label_table_lib.LabelTable:
  """The PartitionSpecs of the table's leaves (a LabelTable of specs, a prefix of the table's pytree): rows on
  `axis` when sharded (history's row axis is its second), P() everywhere when replicated. `method_rows` gets one
  spec, a prefix of whatever per-example state the method keeps (every leaf has its rows first)."""
  if not sharded:
    return label_table_lib.LabelTable(
      noisy_labels=P(), soft_labels=P(), weights=P(), history=P(), history_filled=P(), method_rows=P()
    )
  return label_table_lib.LabelTable(
    noisy_labels=P(axis),
    soft_labels=P(axis),
    weights=P(axis),
    history=P(None, axis),
    history_filled=P(),
    method_rows=P(axis),
  )


def shardings(mesh: Mesh, axis: str, *, sharded: bool) -> label_table_lib.LabelTable:
  """NamedShardings of the table's leaves on `mesh` (see `specs`)."""
  return jax.tree.map(
    lambda spec: NamedSharding(mesh, spec), specs(axis, sharded=sharded), is_leaf=lambda x: isinstance(x, P)
  )


def shard(table: label_table_lib.LabelTable, mesh: Mesh, axis: str) -> label_table_lib.LabelTable:
  """The table padded to a multiple of the mesh's device count and split by rows over `axis`: fresh device buffers
  (never an alias: the epoch program donates them).

  Built with jax.make_array_from_callback, so each process uploads only the rows of its own devices (and builds
  their padding there): the same code on one process or many. Every process must pass the same table.
  """
  host = jax.tree.map(np.asarray, jax.device_get(table))
  n, rows = host.num_examples, padded_rows(host.num_examples, mesh.devices.size)
  out = shardings(mesh, axis, sharded=True)

  def padded(x, sharding, fill, row_axis: int = 0):
    """x with rows appended up to `rows` along row_axis, filled with `fill`, each block built where it lives."""
    shape = (*x.shape[:row_axis], rows, *x.shape[row_axis + 1 :])

    def block(index):  # real rows of the block, then its padding rows
      index = list(index)
      start, stop, _ = index[row_axis].indices(rows)
      index[row_axis] = slice(min(start, n), min(stop, n))
      real = x[tuple(index)]
      extra = list(real.shape)
      extra[row_axis] = (stop - start) - real.shape[row_axis]
      return np.concatenate([real, np.full(extra, fill, x.dtype)], axis=row_axis)

    return jax.make_array_from_callback(shape, sharding, block)

  return label_table_lib.LabelTable(
    noisy_labels=padded(host.noisy_labels, out.noisy_labels, PAD_LABEL),
    soft_labels=padded(host.soft_labels, out.soft_labels, 0),
    weights=padded(host.weights, out.weights, 0),
    history=padded(host.history, out.history, 0, row_axis=1),
    history_filled=jax.make_array_from_callback(
      host.history_filled.shape, out.history_filled, lambda index: host.history_filled[index]
    ),
    method_rows={k: padded(v, out.method_rows, 0) for k, v in host.method_rows.items()},
  )


def create(noisy_labels, num_classes: int, *, history_length: int, mesh: Mesh, axis: str) -> label_table_lib.LabelTable:
  """The initial table of label_table.create, built already split by rows over `axis` of `mesh`: equal to
  shard(label_table.create(noisy_labels, num_classes, history_length=history_length), mesh, axis), but no host or
  device ever holds more than its own rows of soft labels and history (what a table larger than one device, e.g.
  2.4M x 1000 classes with a 10-epoch history, needs). Every process passes the same [N] given labels."""
  labels = _checks.check_labels("noisy_labels", np.asarray(noisy_labels), num_classes).astype(np.int32)
  c, h = int(num_classes), int(history_length)
  if c < 2:
    raise ValueError(f"num_classes={num_classes!r} must be at least 2.")
  if h < 0:
    raise ValueError(f"history_length={history_length!r} must be >= 0.")
  n, rows = labels.shape[0], padded_rows(labels.shape[0], mesh.devices.size)
  out = shardings(mesh, axis, sharded=True)
  given = np.concatenate([labels, np.full((rows - n,), PAD_LABEL, np.int32)])
  dtype = precision.float_dtype()

  def one_hot_rows(index):  # index: (row slice, class slice)
    block = given[index[0]]
    hot = np.zeros((block.shape[0], c), dtype)
    real = block >= 0
    hot[np.nonzero(real)[0], block[real]] = 1.0
    return hot[:, index[1]]

  return label_table_lib.LabelTable(
    noisy_labels=jax.make_array_from_callback((rows,), out.noisy_labels, lambda index: given[index]),
    soft_labels=jax.make_array_from_callback((rows, c), out.soft_labels, one_hot_rows),
    weights=jax.make_array_from_callback((rows,), out.weights, lambda index: (given[index] >= 0).astype(dtype)),
    history=jax.make_array_from_callback(
      (h, rows, c), out.history, lambda index: np.zeros(out.history.shard_shape((h, rows, c)), dtype)
    ),
    history_filled=jax.make_array_from_callback((h,), out.history_filled, lambda index: np.zeros((h,), bool)[index]),
  )


def add_method_rows(
  table: label_table_lib.LabelTable, init_rows: Callable, *, mesh: Mesh | None = None, axis: str | None = None
) -> label_table_lib.LabelTable:
  """The table with a method's per-example state `init_rows(num_rows) -> {name: [num_rows, ...]}` (a pure,
  jit-able function) for every row of the table, padding rows included.

  A row-sharded table gets its state computed where it lives (jit with out_shardings: no device or host holds
  more than its rows); a replicated one as one array. With JAX's partitionable threefry a random state does not
  depend on the padding or the split: row i of a table padded for D devices is row i of the unpadded one, up to the
  rounding of the compiled transform (normal draws: 6e-8 measured, tests/test_multidevice.py).
  """
  rows = table.num_examples
  if is_sharded(table):
    state = jax.jit(lambda: init_rows(rows), out_shardings=NamedSharding(mesh, P(axis)))()
  else:
    state = init_rows(rows)
  return label_table_lib.with_method_rows(table, state)


def is_sharded(table: label_table_lib.LabelTable) -> bool:
  """Whether the table's rows are split over devices (its soft labels are a global array not fully replicated)."""
  leaf = table.soft_labels
  return isinstance(leaf, jax.Array) and not leaf.is_fully_replicated


def host_layout(table: label_table_lib.LabelTable, rows: int) -> label_table_lib.LabelTable:
  """A host (NumPy) table of zeros shaped like `table` but with `rows` rows: the structure to read a checkpoint
  written in another layout into (replicated: N rows, or padded for another device count)."""

  def zeros(x, row_axis):
    shape = list(np.shape(x))
    shape[row_axis] = rows
    return np.zeros(shape, x.dtype)

  return table.replace(
    noisy_labels=zeros(table.noisy_labels, 0),
    soft_labels=zeros(table.soft_labels, 0),
    weights=zeros(table.weights, 0),
    history=zeros(table.history, 1),
    method_rows={k: zeros(v, 0) for k, v in table.method_rows.items()},
    history_filled=np.zeros(np.shape(table.history_filled), table.history_filled.dtype),
  )


def host_table(table: label_table_lib.LabelTable, num_examples: int) -> label_table_lib.LabelTable:
  """A host (NumPy) copy of the table's real rows, on every process (a collective with several processes).

  One process: each device's rows are copied to the host (no device holds the whole table). Several processes:
  the rows are all-gathered (distributed.host_value), which holds the whole table on each device for a moment:
  N x (C (1 + H) x 4 + 8) bytes. train.fit calls it once, on the table it returns.
  """
  return unpad(jax.tree.map(np.asarray, distributed.host_value(table)), num_examples)
