"""The epoch program: data order, batches, augmentation keys and the scan over `train_step`, in one compiled call."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable

import jax
from jax import lax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import augment as augment_lib
from noisy_jax.core import precision
from noisy_jax.data import normalization
from noisy_jax.parallel import streaming
from noisy_jax.parallel import table_sharding
from noisy_jax.parallel.mesh import AXIS  # pylint: disable=g-importing-member
from noisy_jax.train import method as method_lib
from noisy_jax.train import step as step_lib


def epoch_batches(key: jax.Array, num_examples: int, batch_size: int):
  """A shuffled epoch as fixed-size batches: (indices [S, B], valid [S, B]), S = ceil(N / B).

  The last batch is filled up with the first examples of the permutation (cycling through it again when the split
  is smaller than the padding), marked invalid: every example is used exactly once, and BatchNorm never sees a batch
  of repeated padding.
  """
  steps = math.ceil(num_examples / batch_size)
  perm = jax.random.permutation(key, num_examples)
  pad = steps * batch_size - num_examples
  indices = jnp.concatenate([perm, jnp.resize(perm, (pad,))]) if pad else perm
  valid = jnp.arange(steps * batch_size) < num_examples
  return indices.reshape(steps, batch_size), valid.reshape(steps, batch_size)


EPOCH_MODES = ("auto", "scan", "steps")

# The epoch key orders the data (`jax.random.permutation` in `epoch_batches` uses its children 0 and 1, and theirs;
# split(key)[i] == fold_in(key, i) with JAX's default partitionable threefry); the epoch's augmentation uses its child
# number AUGMENT_STREAM, a different stream, so the data order is the same with and without augmentation.
AUGMENT_STREAM = 0x61756721
# The stream of the methods' own randomness in a step (the objective's `key`: DISC's mixup).
METHOD_STREAM = 0x6D746864


def resolve_epoch_mode(mode: str, platform: str, *, streamed: bool = False) -> str:
  """'scan' or 'steps' for epoch mode `mode` on devices of `platform` (see make_epoch_fn); streamed input needs
  'steps' (ValueError for 'scan')."""
  _checks.check_choice("epoch mode", mode, EPOCH_MODES)
  if streamed and mode == "scan":
    raise ValueError(
      "epoch_mode='scan' compiles a whole epoch over data on the devices; streaming input feeds "
      "one step at a time: use epoch_mode 'steps' or 'auto' (or input='resident')."
    )
  if mode == "auto":
    return "steps" if streamed or platform == "cpu" else "scan"
  return mode


def augmentation_key(epoch_key: jax.Array, step) -> jax.Array:
  """The key that augments train step `step` of an epoch: fold_in(fold_in(epoch_key, AUGMENT_STREAM), step)."""
  return jax.random.fold_in(jax.random.fold_in(epoch_key, AUGMENT_STREAM), step)


def method_key(epoch_key: jax.Array, step) -> jax.Array:
  """The key of a method's own draws in train step `step`: fold_in(fold_in(epoch_key, METHOD_STREAM), step)."""
  return jax.random.fold_in(jax.random.fold_in(epoch_key, METHOD_STREAM), step)


def zero_totals() -> dict:
  """An epoch's running sums {"loss": sum of loss x rows, "correct", "count": rows}, zero (not placed)."""
  return {"loss": jnp.zeros(()), "correct": jnp.zeros(()), "count": jnp.zeros(())}


def mean_metrics(totals: dict, accuracy_name: str = "train_accuracy_given") -> dict:
  """{"train_loss": mean loss per row, accuracy_name: correct / count} of an epoch's running sums."""
  count = jnp.maximum(totals["count"], 1.0)
  return {"train_loss": totals["loss"] / count, accuracy_name: totals["correct"] / count}


def make_epoch_fn(
  method: method_lib.Method,
  mesh: Mesh,
  *,
  batch_size: int,
  num_examples: int,
  mode: str = "auto",
  augment: augment_lib.AugmentFn | None = None,
  compiler_options: dict[str, str] | None = None,
  shard_table: bool = False,
  normalize: Callable | None = None,
  source=None,
  workers: int = 0,
  member_map: str = "loop",
  strong_view: Callable | None = None,
) -> Callable:
  """Builds `epoch_fn(state, table, images, key, epoch) -> (state, table, metrics)` over `mesh`.

  strong_view: None, or `view(key, codes, rows) -> x` (noisy_jax.train.views.make_strong_view) for a method with
  `strong_view`: each step gives train_step the batch's strong view too, drawn with the step's augmentation key.

  member_map: 'vmap' or 'loop', how a two-network method's step maps its forward pass over the pair (train_step).

  normalize: the inputs as stored -> float32 network inputs, applied on the device to each gathered (or streamed)
  batch before augmentation (noisy_jax.data.normalization; inputs.normalizer). None: the inputs are float already.

  source: None (resident: `images` is the training split on the devices), or the training inputs on the host
  (image_files.ImageFiles or an array [N, ...]) that each step's batch is streamed from (noisy_jax.parallel.streaming,
  with `workers` Grain processes); `images` is then ignored (pass None). Streaming dispatches one step at a time, so
  mode 'scan' is refused and 'auto' means 'steps'. The batches, their order and their augmentation keys are the
  resident path's, so both train the same network.

  In mode 'steps' epoch_fn also takes `start` (the first step: resume inside an epoch), `totals` (the metric sums
  of the steps before it) and `after_step(steps_done, state, table, totals)` (called after every step: mid-epoch
  checkpoints); the epoch's metrics cover all its steps. Streaming, it also takes `on_skipped(rows)`: called with
  the rows (int32 [k]) of a batch's files that the source skipped (masked as padding; noisy_jax.data.bad_files).

  shard_table: the table is row-sharded over the mesh axis (table_sharding.shard; rows padded to a multiple of the
  device count): the program's in/out specs take table_sharding.specs (rows on `batch`) instead of P(), and the
  step reads and writes by index (train_step's table_axis). False: the table is replicated (today's program).

  `images` [N, ...] is the whole (device-resident) training split; `key` orders this epoch; `epoch` (1-based int)
  is the history slot. State and table are donated: do not reuse the arguments after the call.

  augment: None, or `augment(key, x [b, H, W, C], rows [b]) -> x` (noisy_jax.core.augment.make_augment), applied to
  each device's gathered batch with the step's `augmentation_key(key, step)`. Each example's randomness depends
  only on that key and its row, so the result does not depend on the number of devices.

  compiler_options: XLA options for the step (or epoch) program, e.g. `compiler_options(model, platform)`.

  mode: 'scan' compiles the whole epoch into one program (`lax.scan` over the steps): no host work between steps,
  what accelerators want. 'steps' dispatches one compiled step per batch from the host: XLA's CPU backend runs
  convolutions inside a while loop ~10x slower than at top level, so this is faster there (SmallCNN epoch on
  mnist5k, 2-core CPU: 4.3 s with 'scan', 0.39 s with 'steps'; `python -m experiments.benchmarks.small_cnn_epoch
  --jax-mode scan`, then `steps`). 'auto' picks 'steps' on CPU and 'scan' elsewhere. Both trace the step once per run.
  """
  _checks.check_choice("epoch mode", mode, EPOCH_MODES)
  mode = resolve_epoch_mode(mode, mesh.devices.flat[0].platform, streamed=source is not None)
  num_devices = mesh.devices.size
  if batch_size % num_devices:
    raise ValueError(f"batch_size={batch_size} must be divisible by the number of devices ({num_devices}).")
  parts = StepParts(
    method=method,
    mesh=mesh,
    local=batch_size // num_devices,
    normalize=normalize or normalization.identity(),
    augment=augment,
    strong_view=strong_view,
    shard_table=shard_table,
    member_map=member_map,
  )
  if mode == "scan":
    return _scan_epoch_fn(parts, batch_size=batch_size, num_examples=num_examples, compiler_options=compiler_options)
  return _steps_epoch_fn(
    parts,
    batch_size=batch_size,
    num_examples=num_examples,
    compiler_options=compiler_options,
    source=source,
    workers=workers,
  )


@dataclasses.dataclass(frozen=True)
class StepParts:
  """What every epoch program of `make_epoch_fn` builds its step from (its Args); `local` = batch_size / devices."""

  method: method_lib.Method
  mesh: Mesh
  local: int
  normalize: Callable
  augment: augment_lib.AugmentFn | None
  strong_view: Callable | None
  shard_table: bool
  member_map: str

  def step_on(self, state, table, codes, rows, ok, epoch, key, step):
    """One train step on this device's batch: inputs as stored [b, ...], their rows [b] and valid flags [b]."""
    x = self.normalize(codes)
    augment_key = augmentation_key(key, step)
    if self.augment is not None:
      x = self.augment(augment_key, x, rows)
    strong = None if self.strong_view is None else self.strong_view(augment_key, codes, rows)
    return step_lib.train_step(
      state,
      table,
      x,
      rows,
      ok,
      method=self.method,
      epoch=epoch,
      table_axis=AXIS if self.shard_table else None,
      member_map=self.member_map,
      strong_images=strong,
      method_key=method_key(key, step),
    )

  def local_step(self, state, table, images, indices, valid, epoch, key, step):
    """This device's slice of the global batch `indices`/`valid` [B], gathered from the resident `images`."""
    start = lax.axis_index(AXIS) * self.local
    rows = lax.dynamic_slice_in_dim(indices, start, self.local)
    ok = lax.dynamic_slice_in_dim(valid, start, self.local)
    return self.step_on(state, table, jnp.take(images, rows, axis=0), rows, ok, epoch, key, step)

  def shard(self, fn, num_in: int, num_out: int, batch_args=()):
    """`fn` under shard_map over the mesh: argument and result 1 are the table (row-sharded or replicated), the
    `batch_args` split over the devices (streamed batches), everything else replicated."""
    table_spec = table_sharding.specs(AXIS, sharded=True) if self.shard_table else P()
    in_specs, out_specs = [P()] * num_in, [P()] * num_out
    in_specs[1] = out_specs[1] = table_spec
    for i in batch_args:  # streamed batches arrive split over the devices
      in_specs[i] = P(AXIS)
    return jax.shard_map(fn, mesh=self.mesh, in_specs=tuple(in_specs), out_specs=tuple(out_specs), check_vma=False)


def _scan_epoch_fn(parts: StepParts, *, batch_size: int, num_examples: int, compiler_options) -> Callable:
  """make_epoch_fn's mode 'scan': the whole epoch one program, lax.scan over its steps."""

  def per_device_epoch(state, table, images, key, epoch):
    indices, valid = epoch_batches(key, num_examples, batch_size)
    steps = jnp.arange(indices.shape[0], dtype=jnp.int32)

    def body(carry, batch):
      indices, valid, step = batch
      state, table, step_metrics = parts.local_step(*carry, images, indices, valid, epoch, key, step)
      return (state, table), step_metrics

    (state, table), step_metrics = lax.scan(body, (state, table), (indices, valid, steps))
    return state, table, mean_metrics(jax.tree.map(jnp.sum, step_metrics))

  return jax.jit(parts.shard(per_device_epoch, 5, 3), donate_argnums=(0, 1), compiler_options=compiler_options)


def _steps_epoch_fn(
  parts: StepParts, *, batch_size: int, num_examples: int, compiler_options, source, workers: int
) -> Callable:
  """make_epoch_fn's mode 'steps': one compiled step per batch dispatched from the host, gathered from the resident
  images (`source` None) or streamed from `source`."""

  def per_device_step(state, table, totals, images, indices, valid, step, epoch, key):
    state, table, step_metrics = parts.local_step(state, table, images, indices[step], valid[step], epoch, key, step)
    return state, table, jax.tree.map(jnp.add, totals, step_metrics)

  def per_device_streamed_step(state, table, totals, codes, rows, ok, step, epoch, key):
    state, table, step_metrics = parts.step_on(state, table, codes, rows, ok, epoch, key, step)
    return state, table, jax.tree.map(jnp.add, totals, step_metrics)

  if source is None:
    mapped = parts.shard(per_device_step, 9, 3)
  else:
    mapped = parts.shard(per_device_streamed_step, 9, 3, batch_args=(3, 4, 5))
  step_fn = jax.jit(mapped, donate_argnums=(0, 1, 2), compiler_options=compiler_options)
  batches_fn = jax.jit(functools.partial(epoch_batches, num_examples=num_examples, batch_size=batch_size))
  finish_fn = jax.jit(mean_metrics)
  num_steps = math.ceil(num_examples / batch_size)
  replicated = jax.sharding.NamedSharding(parts.mesh, P())
  split = jax.sharding.NamedSharding(parts.mesh, P(AXIS))

  def epoch_fn(state, table, images, key, epoch, *, start: int = 0, totals=None, after_step=None, on_skipped=None):
    indices, valid = batches_fn(key)
    totals = zero_totals() if totals is None else totals
    totals = jax.device_put({k: jnp.asarray(v, precision.float_dtype()) for k, v in totals.items()}, replicated)
    steps = range(start, num_steps)
    if source is None:
      batches = ((step, (images, indices, valid)) for step in steps)
      state, table, totals = _run_steps(step_fn, batches, state, table, totals, key, epoch, after_step)
      return state, table, finish_fn(totals)
    with streaming.epoch_loader(source, np.asarray(indices), np.asarray(valid), start=start, workers=workers) as loader:
      batches = _streamed_batches(zip(steps, loader), split, on_skipped)
      state, table, totals = _run_steps(step_fn, batches, state, table, totals, key, epoch, after_step)
    return state, table, finish_fn(totals)

  return epoch_fn


def _run_steps(step_fn, batches, state, table, totals, key, epoch, after_step):
  """(state, table, totals) after `step_fn` on each (step, batch arrays) of `batches`, `after_step` after each."""
  for step, arrays in batches:
    state, table, totals = step_fn(state, table, totals, *arrays, np.int32(step), epoch, key)
    if after_step is not None:
      after_step(step + 1, state, table, totals)
  return state, table, totals


def _streamed_batches(loaded, split, on_skipped):
  """(step, (codes, rows, ok)) of each (step, streamed batch) of `loaded`, placed split over the devices; the rows
  of a batch's skipped files go to `on_skipped` first."""
  for step, batch in loaded:
    if on_skipped is not None and batch["skipped"].any():
      on_skipped(batch["indices"][batch["skipped"]])
    yield step, tuple(jax.make_array_from_process_local_data(split, batch[k]) for k in ("images", "indices", "valid"))


def make_method_epoch_fn(
  method: method_lib.Method,
  mesh: Mesh,
  *,
  batch_size: int,
  num_examples: int,
  strong_view: Callable | None = None,
  augment: augment_lib.AugmentFn | None = None,
  compiler_options: dict[str, str] | None = None,
  normalize: Callable | None = None,
  **shared_options,
) -> Callable:
  """The epoch program of `method` (`Method.program`): `make_epoch_fn`'s, or the method's own built around it.

  The shared program gets the strong view of a method that trains on two (`Method.strong_view`); an own program gets
  it as its `strong_view` option instead, and the shared program it may run (warm-up epochs) trains on the weak view
  only. Args are make_epoch_fn's; `shared_options` (mode, shard_table, source, workers, member_map) go to the shared
  program only. An own program trains from resident data, one epoch per call: ValueError for streamed input
  (`source`).
  """
  program = method.program
  if program.own and shared_options.get("source") is not None:
    raise ValueError(f"method {method.name!r} trains from resident data, one epoch per call: set input='resident'.")
  shared = make_epoch_fn(
    method,
    mesh,
    batch_size=batch_size,
    num_examples=num_examples,
    augment=augment,
    compiler_options=compiler_options,
    normalize=normalize,
    strong_view=None if program.own else strong_view,
    **shared_options,
  )
  if not program.own:
    return shared
  return program.build(
    mesh,
    shared,
    batch_size=batch_size,
    num_examples=num_examples,
    augment=augment,
    compiler_options=compiler_options,
    normalize=normalize,
    axis=AXIS,
    **({"strong_view": strong_view} if method.strong_view else {}),
  )
