"""One training step of a method on this device's shard of the batch, reading and writing the label table."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
from jax import lax
import jax.numpy as jnp

from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import precision
from noisy_jax.models import masked_batch_norm
from noisy_jax.parallel.mesh import AXIS  # pylint: disable=g-importing-member
from noisy_jax.train import members as members_lib
from noisy_jax.train import method as method_lib
from noisy_jax.train import state as state_lib
from noisy_jax.train import update as update_lib


def train_step(
  state: state_lib.TrainState,
  table: label_table_lib.LabelTable,
  images: jax.Array,
  indices: jax.Array,
  valid: jax.Array,
  *,
  method: method_lib.Method,
  epoch,
  axis_name: str | None = AXIS,
  table_axis: str | None = None,
  member_map: str = "loop",
  strong_images: jax.Array | None = None,
  method_key: jax.Array | None = None,
):
  """One SGD step on this device's shard of the batch; returns (state, table, step metrics).

  Args:
    state: replicated (for a two-network method, the pair's TrainStates stacked on a leading axis of 2).
    table: replicated, or this device's rows of a row-sharded table (`table_axis`).
    images: [b, ...] this device's inputs; indices [b] their rows in the table; valid [b] False for padding.
    epoch: scalar int, the 1-based epoch: the history slot that predictions are recorded into (ring position
      epoch % H), and the epoch the objective sees (Co-teaching's forget rate).
    axis_name: the device axis (None outside any mapping).
    table_axis: None (replicated table) or the axis its rows are split over (noisy_jax.parallel.table_sharding):
      reads and writes then go through label_table.sharded_targets / sharded_record / sharded_*_rows.
    member_map: how a two-network method maps its forward pass over the pair ('vmap' or 'loop',
      noisy_jax.train.members).
    strong_images: None, or [b, ...] the strong view of the same examples (a method with `strong_view`): forwarded
      with `images` as one batch [2b, ...], as SOP+'s original does (BatchNorm statistics over both views).
    method_key: the step's key for the method's own randomness (DISC's mixup), the objective's `key`; the same on
      every device.

  The objective gets what the step has of the batch (noisy_jax.train.method): a method's per-example state
  (table.method_rows: ELR's targets, SOP's u and v), differentiated with the parameters when `rows_trainable`,
  updated by `method.row_update` and written back like the history (the all-gathered rows of the global batch,
  padding rows dropped); the epoch; the parameters being differentiated, `params` (a method's own trainable
  parameters live there beside the network's, added by its init_state); `images` [b, ...] (and `strong_images`);
  `key` (method_key); and
  `forward(x [b, ...], mask bool [b]) -> logits`: another train-mode pass of the parameters being differentiated
  (for one network; no two-network method calls it), every BatchNorm layer normalising with the statistics of the
  mask's rows (noisy_jax.models.masked_batch_norm; psum-ed over the devices as the model's own layers are). The
  running statistics are chained through the passes in call order, starting from the step's own pass, as a
  PyTorch model in train mode updates them at every forward; an objective that never calls `forward` leaves the
  step's own.
  """
  soft_labels, weights, rows = label_table_lib.read_batch(table, indices, table_axis=table_axis)
  pair = method.num_networks > 1
  _check_views(method, strong_images)
  loss_fn = _loss_fn(
    state,
    method,
    images,
    strong_images,
    soft_labels,
    weights,
    valid,
    rows,
    epoch=epoch,
    axis_name=axis_name,
    member_map=member_map,
    method_key=method_key,
  )
  state, loss, (logits, rows_out), row_grads = update_lib.update(
    state, loss_fn, axis_name=axis_name, pair=pair, rows=rows if method.rows_trainable else None
  )
  if pair:
    logits = jnp.mean(logits, axis=0)  # the pair's prediction: the mean of the two networks' logits
  probs = jax.nn.softmax(logits)
  changes = RowChanges(probs=probs, rows=rows, rows_out=rows_out, row_grads=row_grads)
  table = _write_back(table, method, indices, valid, changes, epoch=epoch, axis_name=axis_name, table_axis=table_axis)
  return state, table, _step_metrics(loss, logits, soft_labels, valid, axis_name, num_networks=method.num_networks)


def _check_views(method: method_lib.Method, strong_images) -> None:
  """ValueError unless the step gets a strong view exactly when the method trains on one here. A method with its
  own epoch program draws its strong view there; its warm-up steps here train on the weak view."""
  if (method.strong_view and not method.program.own) != (strong_images is not None):
    raise ValueError(
      f"method {method.name!r} {'needs' if method.strong_view else 'takes no'} strong view (strong_images); "
      "config.augment.strong gives it (noisy_jax.train.views)."
    )


def _loss_fn(
  state, method, images, strong_images, soft_labels, weights, valid, rows, *, epoch, axis_name, member_map, method_key
):
  """`loss_fn(params, rows) -> (loss, (batch_stats, (logits, rows_out)))` of the step (train_step's docstring):
  the forward pass of both views, then the method's objective."""
  inputs = images if strong_images is None else jnp.concatenate([images, strong_images.astype(images.dtype)])

  def forward(params, batch_stats, x=inputs):
    logits, updates = state.apply_fn(
      {"params": params, "batch_stats": batch_stats}, x, train=True, mutable=["batch_stats"]
    )
    return logits.astype(precision.at_least(logits.dtype)), updates["batch_stats"]

  if method.num_networks > 1:
    forward = members_lib.map_members(forward, member_map)

  def loss_fn(params, rows=rows):
    logits, batch_stats = forward(params, state.batch_stats)
    views = {}
    if strong_images is not None:  # [..., 2b, C]: the weak view's rows, then the strong view's
      logits, views["strong_logits"] = jnp.split(logits, 2, axis=-2)
      views["strong_images"] = strong_images.astype(images.dtype)
    chained = [batch_stats]  # the running statistics after each pass, the step's own first

    def masked_forward(x, mask):  # traced only when the objective calls it
      with masked_batch_norm.statistics_over(mask):
        out, stats = forward(params, chained[-1], x)
      chained.append(stats)
      return out

    loss, rows_out = method.objective(
      logits,
      soft_labels,
      weights,
      valid,
      axis_name,
      rows=rows,
      epoch=epoch,
      images=images,
      key=method_key,
      forward=masked_forward,
      params=params,
      **views,
    )
    return loss, (chained[-1], (logits, rows_out))

  return loss_fn


class RowChanges(NamedTuple):
  """What a step writes back into the table: the batch's softmax [b, C] (the history) and its method rows as read,
  as the objective returned them, and their gradients (None unless `rows_trainable`)."""

  probs: jax.Array
  rows: Any
  rows_out: Any
  row_grads: Any


def _write_back(table, method, indices, valid, changes: RowChanges, *, epoch, axis_name, table_axis):
  """`table` with the batch's predictions recorded in its history (a method with `history_length`) and its method
  rows updated by `method.row_update`: the all-gathered rows of the global batch, padding rows dropped (row N of a
  replicated table, -1, owned by no device, of a sharded one)."""
  if not (method.history_length or table.method_rows):
    return table
  write_rows = jnp.where(valid, indices, table.num_examples if table_axis is None else -1)
  gather = (lambda x: x) if axis_name is None else (lambda x: lax.all_gather(x, axis_name, tiled=True))
  write_rows = gather(write_rows)
  if method.history_length:
    probs_all = gather(changes.probs)
    if table_axis is None:
      table = label_table_lib.record(table, write_rows, probs_all, slot=epoch)
    else:
      table = label_table_lib.sharded_record(table, write_rows, probs_all, slot=epoch, axis_name=table_axis)
  if table.method_rows and method.row_update is not None:  # a method without row logic leaves them as they are
    new_rows = jax.tree.map(gather, method.row_update(changes.rows, changes.rows_out, changes.row_grads))
    if table_axis is None:
      table = label_table_lib.write_rows(table, write_rows, new_rows)
    else:
      table = label_table_lib.sharded_write_rows(table, write_rows, new_rows, axis_name=table_axis)
  return table


def _step_metrics(loss, logits, soft_labels, valid, axis_name, *, num_networks: int) -> dict:
  """{"loss": the mean loss x rows, "correct": rows predicted as their given label, "count": rows} of the global
  batch; a pair reports the mean of its two networks' losses."""
  given = jnp.argmax(soft_labels, axis=-1)
  valid_f = valid.astype(precision.float_dtype())
  correct = jnp.sum((jnp.argmax(logits, axis=-1) == given) * valid_f)
  count = jnp.sum(valid_f)
  if axis_name is not None:
    correct, count = lax.psum(correct, axis_name), lax.psum(count, axis_name)
  loss = loss / num_networks
  return {"loss": loss * count, "correct": correct, "count": count}
