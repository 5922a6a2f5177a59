"""What the trainer needs of a method: its batch objective, per-example state and table policy (`Method`).

The trainer (noisy_jax.train) knows a method only through this record; noisy_jax.methods.registry builds one from
`config.method`.

Every method's objective is called by the step (noisy_jax.train.step) the same way:

  objective(logits, soft_labels [B, C], weights [B], valid [B], axis_name, *, rows, epoch, images, key, forward,
            [strong_logits, strong_images]) -> (loss, rows_out)

and returns the loss of the *global* batch (sums `psum`-ed over `axis_name`, the device axis, and divided by the
global number of valid rows; padding rows, valid = 0, contribute nothing) and the batch's method rows as the
method wants them written back. The keyword arguments are what the step has of the batch; an objective takes the
ones it reads and `**unused` for the rest:
  rows: the batch's method rows {name: [B, ...]} (LabelTable.method_rows; differentiated when `rows_trainable`);
  epoch: the 1-based epoch (Co-teaching's forget rate);
  params: the parameters being differentiated: the network's, and a method's own trainable ones beside them
    (added under their own name by EpochProgram.init_state, with the optimiser's state made for them);
  images: the batch's inputs [B, ...] (weak view); key: the step's own key for the method's randomness (DISC's mixup);
  forward(x [B, ...], mask bool [B]) -> logits: another train-mode pass of the parameters being differentiated
    (noisy_jax.train.step);
  strong_logits, strong_images: the strong view's logits and inputs, for a method with `strong_view`.
With `num_networks = 2` the logits are the pair's [2, B, C] and the loss the sum of both networks' losses (each
network's parameters get the gradient of its own). `row_update(rows, rows_out, row_grads)` gives the rows written
back.

Most methods are a loss of the batch alone, objective(logits, soft_labels, weights, valid, axis_name) -> scalar:
`batch_objective` makes one a method's objective.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp


def _psum(x, axis_name):
  return x if axis_name is None else jax.lax.psum(x, axis_name)


def weighted_batch_mean(per_example: jax.Array, weights: jax.Array, valid: jax.Array, axis_name=None):
  """sum_i valid_i w_i l_i / sum_i valid_i over the global batch (psum over `axis_name`).

  Dividing by the number of examples (not by sum w_i) follows the truncated-Lq port: pruned examples lower the
  loss instead of re-scaling the others. The denominator is at least 1.
  """
  valid = valid.astype(per_example.dtype)
  total = _psum(jnp.sum(per_example * weights.astype(per_example.dtype) * valid), axis_name)
  count = _psum(jnp.sum(valid), axis_name)
  return total / jnp.maximum(count, 1.0)


def batch_objective(loss: Callable[..., jax.Array]) -> Callable:
  """The method objective (module docstring) of a loss of the batch alone, `loss(logits, soft_labels, weights,
  valid, axis_name) -> scalar`: the same loss, the rows returned as they came."""

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, rows=None, **unused):
    del unused
    return loss(logits, soft_labels, weights, valid, axis_name), rows

  return objective


def _same_state(state):
  return state


@dataclasses.dataclass(frozen=True)
class EpochProgram:
  """How a method's epochs run: the shared epoch program (noisy_jax.train.epoch.make_epoch_fn) as it is, or the
  method's own built around it, with what the own program keeps besides the shared training state.

  Attributes:
    build: None (the shared program), or `(mesh, shared_epoch_fn, **options) -> epoch_fn`: the method's own epoch
      program (DivideMix, ELR+, ProMix), which may run the shared one (its warm-up epochs). options: batch_size,
      num_examples, augment, compiler_options, normalize, axis (the mesh axis), and strong_view for a method with
      `Method.strong_view` (noisy_jax.train.epoch.make_method_epoch_fn passes them).
    init_state: `(state) -> state`, applied to the new TrainState before training (ELR+'s weight averages,
      `TrainState.method_state`; ProMix's class priors). The shared program's leaves the state as it is.
  """

  build: Callable | None = None
  init_state: Callable = _same_state

  @property
  def own(self) -> bool:
    """Whether the method runs its own epoch program rather than the shared one."""
    return self.build is not None


def own_program(make_epoch_fn: Callable, init_state: Callable = _same_state) -> EpochProgram:
  """The EpochProgram of a method whose every epoch runs its own program, `make_epoch_fn(mesh, **options)` (the
  shared program's epoch function, which `build` is given for warm-up epochs, unused): Peer Loss, f-divergence, PES,
  PES-semi, CORES², CAL."""

  def build(mesh, warmup_epoch_fn, **options):
    del warmup_epoch_fn
    return make_epoch_fn(mesh, **options)

  return EpochProgram(build=build, init_state=init_state)


SHARED_PROGRAM = EpochProgram()

# Which eval-mode softmax of the training split an EpochEnd's update reads.
EPOCH_END_READS = ("nothing", "current", "best_val", "members")


@dataclasses.dataclass(frozen=True)
class EpochEnd:
  """A method's label-table update between epochs: after every epoch e (1-based) where `due(e)`, the trainer
  (noisy_jax.train.loop.fit, noisy_jax.experiment.sweep) sets table <- update(table, probs, e, num_examples),
  jitted once per run.

  Attributes:
    update: pure `(table, probs, epoch, num_examples) -> table`; num_examples N is static; a row-sharded table has
      more rows than N (its padding), and probs then zero rows beyond N.
    due: `(epoch) -> bool`.
    reads: what `probs` is: 'nothing' (None: Joint Optimization relabels from its history, DISC from its rows),
      'current' (the network's softmax [rows, C] after the epoch), 'best_val' (the best-validation network's, the
      current one's before there is one: truncated Lq's pruning, as the paper) or 'members' (each network's of a
      pair, [2, rows, C]: DivideMix's division, ProMix's selection).
  """

  update: Callable
  due: Callable[[int], bool] = lambda epoch: True
  reads: str = "nothing"

  def __post_init__(self):
    if self.reads not in EPOCH_END_READS:
      raise ValueError(f"EpochEnd reads={self.reads!r}; allowed: {EPOCH_END_READS}.")

  def probs(self, *, current: Callable, best: Callable | None = None, members: Callable | None = None):
    """The softmax `update` reads (`reads`), from thunks: `current()` the network's, `best()` the best-validation
    network's (None before there is one: the current one's instead), `members()` each network's. The one end-of-epoch
    policy of the trainer's loop and of sweeps."""
    if self.reads == "nothing":
      return None
    if self.reads == "members":
      return members()
    if self.reads == "best_val" and best is not None:
      return best()
    return current()


@dataclasses.dataclass(frozen=True)
class Method:
  """A batch objective plus the label-table policy applied between epochs.

  Attributes:
    name: the method's name (for tables and logs).
    objective: the batch objective (module docstring).
    history_length: H, the number of epochs of predictions the label table keeps (0: none recorded).
    epoch_end: None (the table never changes between epochs) or its update (`EpochEnd`).
    init_rows: None, or `(key, num_rows, num_classes) -> {name: [num_rows, ...]}`, the method's per-example state
      (LabelTable.method_rows) before training.
    row_update: `(rows, rows_out, row_grads) -> rows` of the batch, written back after the step (row_grads: the
      gradient of the global batch's loss w.r.t. the rows when `rows_trainable`, else None).
    rows_trainable: differentiate the loss w.r.t. the batch's rows as well (SOP's u, v).
    num_networks: 1, or 2 (two TrainStates stacked on a leading axis, trained in one step; evaluated by the mean
      of their logits).
    program: how its epochs run (`EpochProgram`): the shared program, or its own around it.
    label_evidence: None, or `(host table) -> label_issues.MethodEvidence`, the method's own verdict on its labels
      for WORKDIR/label_issues.csv (ELR+, DivideMix: their epochs record no prediction history).
    strong_view: the method trains on two views of each example (SOP+, DISC): the step forwards the weak and the
      strong view (config.augment.strong, noisy_jax.train.views) as one batch [weak; strong] and gives the objective
      the strong view's logits as `strong_logits` and its inputs as `strong_images` (the weak view's are `logits`;
      the history, the metrics and the table see the weak view only). A method with its own epoch program gets the
      view as the program's `strong_view` option instead (ProMix), and its warm-up epochs train on the weak view only.
  """

  name: str
  objective: Callable[..., jax.Array]
  history_length: int = 0
  epoch_end: EpochEnd | None = None
  init_rows: Callable | None = None
  row_update: Callable | None = None
  rows_trainable: bool = False
  num_networks: int = 1
  program: EpochProgram = SHARED_PROGRAM
  label_evidence: Callable | None = None
  strong_view: bool = False

  @property
  def reads_train_probs(self) -> bool:
    """Whether its epoch-end update reads one network's softmax of the training split (truncated Lq's pruning)."""
    return self.epoch_end is not None and self.epoch_end.reads in ("current", "best_val")

  @property
  def relabels_from_history(self) -> bool:
    """Whether the table update relabels from the recorded history (Joint Optimization). A history recorded for
    another method (label issues: `noisy_jax.core.label_issues.history_length`) is only read, never trained on."""
    return bool(self.history_length) and self.epoch_end is not None and self.epoch_end.reads == "nothing"
