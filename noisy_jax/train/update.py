"""The optimiser update of every step program: a loss's gradient, averaged over the devices, applied (`update`).

The shared step (noisy_jax.train.step) and the methods' own epoch programs (DivideMix, ELR+, ProMix) all update
their networks here, so the device averaging, the BatchNorm statistics and the schedule count are done one way.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
from jax import lax

from noisy_jax.train import optim
from noisy_jax.train import state as state_lib


class Update(NamedTuple):
  """What `update` returns besides the new state.

  Attributes:
    state: the TrainState after the optimiser step (a pair's: both networks', stacked).
    loss: the loss value before the step (as `loss_fn` returned it).
    aux: what `loss_fn` returned besides the loss and the BatchNorm statistics.
    row_grads: the gradient w.r.t. the per-example rows when `rows` was given (this device's rows: the D-fold share
      of a psum-ed loss divided out), else None.
  """

  state: state_lib.TrainState
  loss: jax.Array
  aux: Any
  row_grads: Any


def update(
  state: state_lib.TrainState,
  loss_fn: Callable,
  *,
  axis_name: str | None,
  pair: bool = False,
  rows=None,
  schedule_count=None,
) -> Update:
  """One optimiser step of `state` on the gradient of `loss_fn`.

  loss_fn(params) -> (loss, (batch_stats, aux)), or loss_fn(params, rows) -> the same when `rows` is given (then
  differentiated w.r.t. both). The loss is the global batch's (its sums psum-ed over `axis_name`), so each device's
  gradient is its D-fold share: `lax.pmean` over the devices gives the global gradient, and the new BatchNorm
  statistics are averaged the same way. Then the schedule's count is set to `schedule_count` when given
  (optim.at_epoch: a method whose epochs have their own number of steps), and the update applied: with `pair`, each
  network of the stacked pair its own (a global-norm clip, if any, per network).

  Args:
    state: the TrainState to update (a pair's stacked on a leading axis of 2 with `pair`).
    loss_fn: the loss (above), closed over the batch.
    axis_name: the device axis (None outside any mapping: nothing averaged).
    pair: apply the stacked networks' updates one by one (jax.vmap).
    rows: None, or the batch's per-example rows to differentiate as well (SOP's u and v).
    schedule_count: None, or the lr schedules' step count for this update (int, traced allowed).
  """
  params = state.params
  if rows is None:
    (loss, (batch_stats, aux)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    row_grads = None
  else:
    (loss, (batch_stats, aux)), (grads, row_grads) = jax.value_and_grad(loss_fn, argnums=(0, 1), has_aux=True)(
      params, rows
    )
  if axis_name is not None:
    grads = lax.pmean(grads, axis_name)
    batch_stats = lax.pmean(batch_stats, axis_name)
    if row_grads is not None:
      # The rows are this device's own, and the psum-ed loss gives each of them D times its gradient: divide.
      row_grads = jax.tree.map(lambda g: g / lax.psum(1, axis_name), row_grads)
  if schedule_count is not None:
    state = state.replace(opt_state=optim.at_epoch(state.opt_state, schedule_count))
  if pair:
    state = jax.vmap(lambda s, g, b: s.apply_gradients(grads=g, batch_stats=b))(state, grads, batch_stats)
  else:
    state = state.apply_gradients(grads=grads, batch_stats=batch_stats)
  return Update(state, loss, aux, row_grads)
