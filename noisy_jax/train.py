"""Training: TrainState + LabelTable, a per-device step mapped over a device mesh, and the epoch loop.

The flow of one run (`noisy_jax.runs.run_single`, which drives `fit` here once per stage):

  root key --split--> init | data order | noise | stage-2 init
  dataset (clean) --noise.corrupt_labels--> noisy training labels --> LabelTable
  for epoch in 1..E:   (TrainState, LabelTable) --epoch program--> (TrainState, LabelTable)
                       evaluate; the method's label-table policy at the epoch boundary (pure, jitted)
  Joint Optimization: stage 2 trains a fresh network with CE on the stage-1 soft labels.

The epoch program is one compiled call: the permutation, batching, data gather, `lax.scan` over the train steps
and the label-table writes all run on device. It is written per device (named axis `batch`; gradients and batch
statistics are `lax.pmean`-ed; the batch's indices and probabilities are `lax.all_gather`-ed so every replica
writes the same rows into its copy of the table) and mapped over the mesh with `jax.shard_map` under `jax.jit`
with the state and table donated. `check_vma=False` keeps pmap semantics: the explicit `pmean` of the gradients
is what averages them (see shared/DESIGN.md). One device is a mesh of one.

A large label table is split by rows over the mesh instead (config `label_table_sharding`, 'auto' by default: sharded
iff more than one device and N x (C (1 + H) x 4 + 8) bytes > `label_table_budget_mib`, 256; per device the sharded
table costs ceil(N / D) x (C (1 + H) x 4 + 8) bytes: Clothing1M with JO's history 624 MB in all, 78 MB a device
over 8; 2.4M x 1000 classes over 256 devices 37.6 MB a device, 412.6 MB with H = 10). Each device then reads its
batch's rows by index (all-gathered indices, owned rows, reduce-scatter) and keeps the gathered writes of its rows:
noisy_jax.table_sharding and label_table.sharded_targets / sharded_record.

Around it: the optimiser is `noisy_jax.optim`, the dataset and the noisy labels a run trains on come from
`noisy_jax.inputs` (re-exported here), and comparisons of several runs with their tables are `noisy_jax.comparison`.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any, Callable

from absl import logging
import flax
from flax.training import train_state
import jax
from jax import lax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P
import numpy as np

from noisy_jax import _checks
from noisy_jax import augment as augment_lib
from noisy_jax import checkpoint as checkpoint_lib
from noisy_jax import distributed
from noisy_jax import inputs as inputs_lib
from noisy_jax import label_table as label_table_lib
from noisy_jax import members as members_lib
from noisy_jax import methods as methods_lib
from noisy_jax import metrics as metrics_lib
from noisy_jax import optim
from noisy_jax import precision
from noisy_jax.inputs import DATASET_NOISE, PSEUDO_LABEL_NOISE, load_dataset, noisy_training_labels  # pylint: disable=g-importing-member,unused-import  (callers use train.NAME)
from noisy_jax import streaming
from noisy_jax import table_sharding
from noisy_jax.data import normalization
# What a run's records say about its label table, and its XLA options, live in their own modules; the names stay
# here for callers of train.NAME.
from noisy_jax.table_metrics import table_metrics  # pylint: disable=g-importing-member,unused-import
from noisy_jax.xla_options import (GPU_DETERMINISM_OPTIONS, compiler_options,  # pylint: disable=g-importing-member,unused-import
                                   run_compiler_options, _accepted_by_xla)

AXIS = "batch"
# The optimiser lives in noisy_jax.optim; these names stay here for callers of train.make_optimizer.
learning_rate_schedule = optim.learning_rate_schedule
make_optimizer = optim.make_optimizer


class TrainState(train_state.TrainState):
  """Flax TrainState with BatchNorm statistics, and a weight average of the parameters for methods that keep one
  (ELR+: `ema_params`, empty otherwise)."""
  batch_stats: Any = None
  ema_params: Any = flax.core.FrozenDict()


# ---------------------------------------------------------------------------------------------------------------
# Construction


def make_mesh(num_devices: int | None = None) -> Mesh:
  """A 1-D mesh with axis `batch` over the first `num_devices` local devices (all by default).

  In a multi-process run (noisy_jax.distributed) the mesh spans every process's devices (`jax.devices()`), and
  `num_devices` must be None or that global count: every process takes part in every step.
  """
  if jax.process_count() > 1:
    devices = jax.devices()
    if num_devices not in (None, len(devices)):
      raise ValueError(f"num_devices={num_devices!r}: a run over {jax.process_count()} processes uses all "
                       f"{len(devices)} devices (leave num_devices unset or 0).")
    return Mesh(np.asarray(devices), (AXIS,))
  devices = jax.local_devices()
  num_devices = len(devices) if num_devices is None else num_devices
  if not 1 <= num_devices <= len(devices):
    raise ValueError(f"num_devices={num_devices!r} must be in [1, {len(devices)}] (the local device count).")
  return Mesh(np.asarray(devices[:num_devices]), (AXIS,))


def create_train_state(model, key: jax.Array, input_shape, tx, *, num_networks: int = 1) -> TrainState:
  """The initial TrainState of `model` from `key`; with num_networks = 2, the two networks of a pair, initialised
  from jax.random.split(key) and stacked on a leading axis (noisy_jax.members). Parameters and statistics are in
  precision.float_dtype() (float64 with x64 on)."""
  if num_networks > 1:
    return members_lib.stack([create_train_state(model, k, input_shape, tx)
                              for k in jax.random.split(key, num_networks)])
  # Jitted: eager init runs the network op by op (~7 s for a ResNet-32 on a 2-core CPU). Same values as eager for
  # truncated-normal initialisers (SmallCNN, MLP: checked bit for bit), within 1 ulp for plain normal ones.
  init = jax.jit(functools.partial(model.init, train=False))
  variables = precision.widen(init(key, jnp.zeros((1, *input_shape), precision.float_dtype())))
  return TrainState.create(apply_fn=model.apply, params=variables["params"], tx=tx,
                           batch_stats=variables.get("batch_stats", flax.core.FrozenDict()))


# ---------------------------------------------------------------------------------------------------------------
# The step and the epoch program


def train_step(state: TrainState, table: label_table_lib.LabelTable, images: jax.Array, indices: jax.Array,
               valid: jax.Array, *, method: methods_lib.Method, epoch, axis_name: str | None = AXIS,
               table_axis: str | None = None, member_map: str = "loop"):
  """One SGD step on this device's shard of the batch; returns (state, table, step metrics).

  Args:
    state: replicated (for a two-network method, the pair's TrainStates stacked on a leading axis of 2).
    table: replicated, or this device's rows of a row-sharded table (`table_axis`).
    images: [b, ...] this device's inputs; indices [b] their rows in the table; valid [b] False for padding.
    epoch: scalar int, the 1-based epoch: the history slot that predictions are recorded into (ring position
      epoch % H), and the epoch an extended objective sees (Co-teaching's forget rate).
    axis_name: the device axis (None outside any mapping).
    table_axis: None (replicated table) or the axis its rows are split over (noisy_jax.table_sharding): reads and
      writes then go through label_table.sharded_targets / sharded_record / sharded_*_rows.
    member_map: how a two-network method maps its forward pass over the pair ('vmap' or 'loop', noisy_jax.members).

  A method's per-example state (table.method_rows: ELR's targets, SOP's u and v) is read for the batch, given to the
  extended objective (differentiated with the parameters when `rows_trainable`), updated by `method.row_update` and
  written back like the history: the (all-gathered) rows of the global batch, padding rows dropped.
  """
  if table_axis is None:
    soft_labels, weights = label_table_lib.targets(table, indices)
    rows = label_table_lib.read_rows(table, indices)
  else:
    soft_labels, weights = label_table_lib.sharded_targets(table, indices, axis_name=table_axis)
    rows = label_table_lib.sharded_read_rows(table, indices, axis_name=table_axis)
  pair = method.num_networks > 1

  def forward(params, batch_stats):
    logits, updates = state.apply_fn({"params": params, "batch_stats": batch_stats}, images, train=True,
                                     mutable=["batch_stats"])
    return logits.astype(precision.at_least(logits.dtype)), updates["batch_stats"]

  if pair:
    forward = members_lib.map_members(forward, member_map)

  def loss_fn(params, rows):
    logits, batch_stats = forward(params, state.batch_stats)
    if method.extended:
      loss, rows_out = method.objective(logits, soft_labels, weights, valid, axis_name, rows=rows, epoch=epoch)
    else:
      loss, rows_out = method.objective(logits, soft_labels, weights, valid, axis_name), rows
    return loss, (logits, batch_stats, rows_out)

  argnums = (0, 1) if method.rows_trainable else 0
  (loss, (logits, batch_stats, rows_out)), grads = jax.value_and_grad(loss_fn, argnums=argnums, has_aux=True)(
      state.params, rows)
  grads, row_grads = grads if method.rows_trainable else (grads, None)
  if axis_name is not None:
    grads = lax.pmean(grads, axis_name)
    batch_stats = lax.pmean(batch_stats, axis_name)
    if row_grads is not None:
      # Differentiating a psum-ed loss under pmap semantics gives each device D times its rows' gradient (the
      # parameters' D-fold gradients are averaged by the pmean above); the rows are this device's own: divide.
      row_grads = jax.tree.map(lambda g: g / lax.psum(1, axis_name), row_grads)
  if pair:  # each network its own update (a global-norm clip, if any, per network)
    state = jax.vmap(lambda s, g, b: s.apply_gradients(grads=g, batch_stats=b))(state, grads, batch_stats)
    logits = jnp.mean(logits, axis=0)  # the pair's prediction: the mean of the two networks' logits
  else:
    state = state.apply_gradients(grads=grads, batch_stats=batch_stats)

  probs = jax.nn.softmax(logits)
  write_rows = None
  if method.history_length or table.method_rows:
    # Padding rows are dropped by the write: row N of a replicated table, -1 (owned by no device) of a sharded one.
    write_rows = jnp.where(valid, indices, table.num_examples if table_axis is None else -1)
    if axis_name is not None:
      write_rows = lax.all_gather(write_rows, axis_name, tiled=True)
  if method.history_length:
    probs_all = probs if axis_name is None else lax.all_gather(probs, axis_name, tiled=True)
    if table_axis is None:
      table = label_table_lib.record(table, write_rows, probs_all, slot=epoch)
    else:
      table = label_table_lib.sharded_record(table, write_rows, probs_all, slot=epoch, axis_name=table_axis)
  if table.method_rows and method.row_update is not None:  # a method without row logic leaves them as they are
    new_rows = method.row_update(rows, rows_out, row_grads)
    if axis_name is not None:
      new_rows = jax.tree.map(lambda r: lax.all_gather(r, axis_name, tiled=True), new_rows)
    if table_axis is None:
      table = label_table_lib.write_rows(table, write_rows, new_rows)
    else:
      table = label_table_lib.sharded_write_rows(table, write_rows, new_rows, axis_name=table_axis)

  given = jnp.argmax(soft_labels, axis=-1)
  valid_f = valid.astype(precision.float_dtype())
  correct = jnp.sum((jnp.argmax(logits, axis=-1) == given) * valid_f)
  count = jnp.sum(valid_f)
  if axis_name is not None:
    correct, count = lax.psum(correct, axis_name), lax.psum(count, axis_name)
  loss = loss / method.num_networks  # a pair reports the mean of its two networks' losses
  return state, table, {"loss": loss * count, "correct": correct, "count": count}


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


def resolve_epoch_mode(mode: str, platform: str, *, streamed: bool = False) -> str:
  """'scan' or 'steps' for epoch mode `mode` on devices of `platform` (see make_epoch_fn); streamed input needs
  'steps' (ValueError for 'scan')."""
  _checks.check_choice("epoch mode", mode, EPOCH_MODES)
  if streamed and mode == "scan":
    raise ValueError("epoch_mode='scan' compiles a whole epoch over data on the devices; streaming input feeds "
                     "one step at a time: use epoch_mode 'steps' or 'auto' (or input='resident').")
  if mode == "auto":
    return "steps" if streamed or platform == "cpu" else "scan"
  return mode


def augmentation_key(epoch_key: jax.Array, step) -> jax.Array:
  """The key that augments train step `step` of an epoch: fold_in(fold_in(epoch_key, AUGMENT_STREAM), step)."""
  return jax.random.fold_in(jax.random.fold_in(epoch_key, AUGMENT_STREAM), step)


def make_epoch_fn(method: methods_lib.Method, mesh: Mesh, *, batch_size: int, num_examples: int,
                  mode: str = "auto", augment: augment_lib.AugmentFn | None = None,
                  compiler_options: dict[str, str] | None = None, shard_table: bool = False,
                  normalize: Callable | None = None, source=None, workers: int = 0,
                  member_map: str = "loop") -> Callable:
  """Builds `epoch_fn(state, table, images, key, epoch) -> (state, table, metrics)` over `mesh`.

  member_map: 'vmap' or 'loop', how a two-network method's step maps its forward pass over the pair (train_step).

  normalize: the inputs as stored -> float32 network inputs, applied on the device to each gathered (or streamed)
  batch before augmentation (noisy_jax.data.normalization; inputs.normalizer). None: the inputs are float already.

  source: None (resident: `images` is the training split on the devices), or the training inputs on the host
  (image_files.ImageFiles or an array [N, ...]) that each step's batch is streamed from (noisy_jax.streaming, with
  `workers` Grain processes); `images` is then ignored (pass None). Streaming dispatches one step at a time, so
  mode 'scan' is refused and 'auto' means 'steps'. The batches, their order and their augmentation keys are the
  resident path's, so both train the same network.

  In mode 'steps' epoch_fn also takes `start` (the first step: resume inside an epoch), `totals` (the metric sums
  of the steps before it) and `after_step(steps_done, state, table, totals)` (called after every step: mid-epoch
  checkpoints); the epoch's metrics cover all its steps.

  shard_table: the table is row-sharded over the mesh axis (table_sharding.shard; rows padded to a multiple of the
  device count): the program's in/out specs take table_sharding.specs (rows on `batch`) instead of P(), and the
  step reads and writes by index (train_step's table_axis). False: the table is replicated (today's program).

  `images` [N, ...] is the whole (device-resident) training split; `key` orders this epoch; `epoch` (1-based int)
  is the history slot. State and table are donated: do not reuse the arguments after the call.

  augment: None, or `augment(key, x [b, H, W, C], rows [b]) -> x` (noisy_jax.augment.make_augment), applied to
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
  normalize = normalize or normalization.identity()
  num_devices = mesh.devices.size
  if batch_size % num_devices:
    raise ValueError(f"batch_size={batch_size} must be divisible by the number of devices ({num_devices}).")
  local = batch_size // num_devices

  def step_on(state, table, codes, rows, ok, epoch, key, step):
    """One train step on this device's batch: inputs as stored [b, ...], their rows [b] and valid flags [b]."""
    x = normalize(codes)
    if augment is not None:
      x = augment(augmentation_key(key, step), x, rows)
    return train_step(state, table, x, rows, ok, method=method, epoch=epoch,
                      table_axis=AXIS if shard_table else None, member_map=member_map)

  def local_step(state, table, images, indices, valid, epoch, key, step):
    """This device's slice of the global batch `indices`/`valid` [B], gathered from the resident `images`."""
    start = lax.axis_index(AXIS) * local
    rows = lax.dynamic_slice_in_dim(indices, start, local)
    ok = lax.dynamic_slice_in_dim(valid, start, local)
    return step_on(state, table, jnp.take(images, rows, axis=0), rows, ok, epoch, key, step)

  def finish(totals):
    return {"train_loss": totals["loss"] / totals["count"],
            "train_accuracy_given": totals["correct"] / totals["count"]}

  table_spec = table_sharding.specs(AXIS, sharded=True) if shard_table else P()

  def shard(fn, num_in, num_out, batch_args=()):  # argument and result 1 are the table
    in_specs, out_specs = [P()] * num_in, [P()] * num_out
    in_specs[1] = out_specs[1] = table_spec
    for i in batch_args:  # streamed batches arrive split over the devices
      in_specs[i] = P(AXIS)
    return jax.shard_map(fn, mesh=mesh, in_specs=tuple(in_specs), out_specs=tuple(out_specs), check_vma=False)

  if mode == "scan":
    def per_device_epoch(state, table, images, key, epoch):
      indices, valid = epoch_batches(key, num_examples, batch_size)
      steps = jnp.arange(indices.shape[0], dtype=jnp.int32)

      def body(carry, batch):
        indices, valid, step = batch
        state, table, step_metrics = local_step(*carry, images, indices, valid, epoch, key, step)
        return (state, table), step_metrics

      (state, table), step_metrics = lax.scan(body, (state, table), (indices, valid, steps))
      return state, table, finish(jax.tree.map(jnp.sum, step_metrics))

    return jax.jit(shard(per_device_epoch, 5, 3), donate_argnums=(0, 1), compiler_options=compiler_options)

  def per_device_step(state, table, totals, images, indices, valid, step, epoch, key):
    state, table, step_metrics = local_step(state, table, images, indices[step], valid[step], epoch, key, step)
    return state, table, jax.tree.map(jnp.add, totals, step_metrics)

  step_fn = jax.jit(shard(per_device_step, 9, 3), donate_argnums=(0, 1, 2), compiler_options=compiler_options)
  batches_fn = jax.jit(functools.partial(epoch_batches, num_examples=num_examples, batch_size=batch_size))
  finish_fn = jax.jit(finish)
  num_steps = math.ceil(num_examples / batch_size)

  def per_device_streamed_step(state, table, totals, codes, rows, ok, step, epoch, key):
    state, table, step_metrics = step_on(state, table, codes, rows, ok, epoch, key, step)
    return state, table, jax.tree.map(jnp.add, totals, step_metrics)

  if source is not None:
    step_fn = jax.jit(shard(per_device_streamed_step, 9, 3, batch_args=(3, 4, 5)), donate_argnums=(0, 1, 2),
                      compiler_options=compiler_options)
  replicated = jax.sharding.NamedSharding(mesh, P())
  split = jax.sharding.NamedSharding(mesh, P(AXIS))

  def epoch_fn(state, table, images, key, epoch, *, start: int = 0, totals=None, after_step=None):
    indices, valid = batches_fn(key)
    if totals is None:
      totals = {"loss": jnp.zeros(()), "correct": jnp.zeros(()), "count": jnp.zeros(())}
    totals = jax.device_put({k: jnp.asarray(v, precision.float_dtype()) for k, v in totals.items()}, replicated)
    if source is None:
      for step in range(start, num_steps):
        state, table, totals = step_fn(state, table, totals, images, indices, valid, np.int32(step), epoch, key)
        if after_step is not None:
          after_step(step + 1, state, table, totals)
      return state, table, finish_fn(totals)
    with streaming.epoch_loader(source, np.asarray(indices), np.asarray(valid), start=start,
                                workers=workers) as loader:
      for step, batch in zip(range(start, num_steps), loader):
        codes, rows, ok = (jax.make_array_from_process_local_data(split, batch[k])
                           for k in ("images", "indices", "valid"))
        state, table, totals = step_fn(state, table, totals, codes, rows, ok, np.int32(step), epoch, key)
        if after_step is not None:
          after_step(step + 1, state, table, totals)
    return state, table, finish_fn(totals)

  return epoch_fn


def make_predict_fn(model, *, batch_size: int = 500, normalize: Callable | None = None,
                    compiler_options: dict | None = None, num_networks: int = 1) -> Callable:
  """`predict(variables, images [N, ...]) -> softmax probabilities [N, C]` in eval mode, in fixed-size chunks.

  normalize: the inputs as stored -> float32 network inputs (on the device); None: they are float already.
  compiler_options: XLA options for the program (`compiler_options(model, platform)`, as for the train step).
  num_networks: 2 for the variables of a pair (stacked on a leading axis): the softmax of the mean of the two
    networks' logits, how DivideMix and ELR+ evaluate (argmax (z1 + z2)).
  """
  normalize = normalize or normalization.identity()
  def apply(variables, x, train):
    if num_networks == 1:
      return model.apply(variables, x, train=train)
    # A pair: the networks one after the other on the chunk (plain kernels on every backend), their logits averaged.
    return jnp.mean(jnp.stack([model.apply(members_lib.take(variables, m), x, train=train)
                               for m in range(num_networks)]), axis=0)

  @functools.partial(jax.jit, compiler_options=compiler_options)
  def predict(variables, images):
    n = images.shape[0]
    chunks = math.ceil(n / batch_size)
    pad = chunks * batch_size - n
    padded = jnp.concatenate([images, jnp.zeros((pad, *images.shape[1:]), images.dtype)]) if pad else images
    padded = padded.reshape(chunks, batch_size, *images.shape[1:])
    logits = lax.map(lambda x: apply(variables, normalize(x), train=False), padded)
    return jax.nn.softmax(logits.reshape(chunks * batch_size, -1).astype(precision.at_least(logits.dtype)))[:n]

  return predict


def replicate(tree, mesh: Mesh):
  """A replicated copy of `tree` on every device of `mesh` (never an alias: the epoch program donates it).

  A mesh with other processes' devices gets global arrays built from this process's host copy
  (noisy_jax.distributed.replicated): every process must pass the same values.
  """
  if not mesh.is_multi_process:
    return jax.device_put(tree, jax.sharding.NamedSharding(mesh, P()), may_alias=False)
  return distributed.replicated(tree, mesh)


# ---------------------------------------------------------------------------------------------------------------
# The epoch loop


def make_evaluate(predict: Callable, *, workers: int = 0, batch_size: int = 500) -> Callable:
  """`evaluate(variables, x) -> probabilities [N, C]`: `predict` of an array split, or of a split on disk
  (image_files.ImageFiles) streamed in order in chunks of `batch_size` (noisy_jax.streaming.ordered_batches)."""
  from noisy_jax.data import image_files  # pylint: disable=g-import-not-at-top

  def evaluate(variables, x):
    if not isinstance(x, image_files.ImageFiles):
      return predict(variables, x)
    with streaming.ordered_batches(x, batch_size, workers=workers) as loader:
      return jnp.concatenate([predict(variables, batch["images"]) for batch in loader])

  return evaluate


def _member_map(config, mesh: Mesh, input_shape) -> str:
  """How a two-network step maps over its pair: config.member_map ('auto' by default: noisy_jax.members)."""
  from noisy_jax import models  # pylint: disable=g-import-not-at-top  (models import nothing of train)
  return members_lib.resolve_member_map(config.get("member_map", "auto"), mesh.devices.flat[0].platform,
                                        models.resolve(config.model.name, input_shape))


def _variables(state: TrainState):
  return {"params": state.params, "batch_stats": state.batch_stats}


def _to_python(tree):
  return jax.tree.map(lambda x: x.item() if hasattr(x, "item") and np.ndim(x) == 0 else x, jax.device_get(tree))


def fit(*, model, method: methods_lib.Method, table: label_table_lib.LabelTable, dataset, clean_train_labels,
        config, key: jax.Array, mesh: Mesh, stage: str = "", log_fn: Callable | None = None,
        checkpoint_dir: str | None = None, on_resume: Callable[[list[dict]], None] | None = None):
  """Trains one network with one method; returns (state, table, per-epoch history list, best-val variables).

  checkpoint_dir: None (no checkpoints) or this stage's checkpoint directory (noisy_jax.checkpoint). If it holds a
  checkpoint, training resumes after its epoch (seed, key and config must match, else ValueError); `on_resume` is
  then called once with the restored per-epoch records, and `log_fn` only sees the epochs trained here. A checkpoint
  is written every `config.checkpoint_every` epochs (default 1) and after the last epoch, keeping the newest
  `config.keep_checkpoints` (default 2); the save starts before `log_fn` sees the epoch's record and orbax finishes
  it in the background while the next epoch trains (all or nothing; `fit` waits for it before returning).

  config fields: batch_size, num_epochs, optimizer (noisy_jax.optim: learning_rate, momentum, weight_decay,
  lr_schedule, lr_boundaries, lr_decay, cosine_epochs, lr_min, grad_clip_norm; the cosine's period defaults to this
  stage's num_epochs), eval_train (bool, default False: also score the training split each epoch), augment (None
  or {crop_padding, flip}: training-time augmentation, noisy_jax.augment.make_augment; evaluation never augments),
  label_table_sharding ('auto' | 'replicated' | 'sharded', default 'auto': sharded iff >1 device and the table's
  N x (C (1 + H) x 4 + 8) bytes exceed label_table_budget_mib, default 256; noisy_jax.table_sharding has the cost
  per device). A sharded table is padded on the devices (one process or several) and stays split: metrics are
  reduced on the devices, checkpoints hold each device's rows (a run may resume on another table sharding: the
  rows are then read on the host and placed again), and only the returned table is its N real rows on the host.
  `table` is then a host table, or one already split with table_sharding.create (used as it is, and donated).
  """
  init_key, order_key = jax.random.split(key)
  num_examples = dataset.x_train.shape[0]
  streamed = inputs_lib.input_mode(config, dataset) == "streaming"
  normalize = inputs_lib.normalizer(config, dataset)
  workers = int(config.get("input_workers", streaming.DEFAULT_WORKERS))
  workers = streaming.default_workers() if workers < 0 else workers
  epoch_mode = resolve_epoch_mode(config.get("epoch_mode", "auto"), mesh.devices.flat[0].platform,
                                  streamed=streamed)
  every_steps = int(config.get("checkpoint_every_steps", 0))
  if every_steps and epoch_mode != "steps":
    raise ValueError(f"checkpoint_every_steps={every_steps} saves inside an epoch, which epoch_mode 'scan' runs as "
                     "one program: use epoch_mode='steps', or checkpoint_every_steps=0.")
  steps_per_epoch = math.ceil(num_examples / config.batch_size)
  tx = make_optimizer(config.optimizer, steps_per_epoch, int(config.num_epochs))
  state = create_train_state(model, init_key, dataset.x_train.shape[1:], tx, num_networks=method.num_networks)
  if method.init_state is not None:  # the method's own part of the state (ELR+'s weight averages)
    state = method.init_state(state)
  state = replicate(state, mesh)
  shard_table = table_sharding.configured(config, num_examples=num_examples, num_classes=table.num_classes,
                                          history_length=table.history_length, num_devices=mesh.devices.size)
  place_table = (lambda t: table_sharding.shard(t, mesh, AXIS)) if shard_table else (lambda t: replicate(t, mesh))
  if shard_table and table_sharding.is_sharded(table):  # built in place (table_sharding.create): used as it is
    given = np.asarray(distributed.host_value(table.noisy_labels))[:num_examples]
  else:
    given = np.asarray(jax.device_get(table.noisy_labels))
    table = place_table(table)
  images = None if streamed else replicate(jnp.asarray(np.asarray(dataset.x_train)), mesh)
  options = run_compiler_options(config, model, mesh.devices.flat[0].platform)
  epoch_fn = make_epoch_fn(method, mesh, batch_size=config.batch_size, num_examples=num_examples,
                           mode=epoch_mode, augment=augment_lib.make_augment(config.get("augment")),
                           compiler_options=options, shard_table=shard_table, normalize=normalize,
                           source=dataset.x_train if streamed else None, workers=workers,
                           member_map=(_member_map(config, mesh, dataset.x_train.shape[1:])
                                       if method.num_networks > 1 else "loop"))
  predict = make_evaluate(make_predict_fn(model, normalize=normalize, compiler_options=options,
                                          num_networks=method.num_networks), workers=workers)
  if method.epoch_factory is not None:  # the method's own epoch program (DivideMix), around make_epoch_fn's
    if streamed or every_steps:
      raise ValueError(f"method {method.name!r} trains from resident data, one epoch at a time: set input='resident' "
                       "and checkpoint_every_steps=0.")
    epoch_fn = method.epoch_factory(mesh, epoch_fn, batch_size=config.batch_size, num_examples=num_examples,
                                    augment=augment_lib.make_augment(config.get("augment")), compiler_options=options,
                                    normalize=normalize, axis=AXIS)
  member_update, predict_each = None, None
  if method.member_update is not None:  # an epoch-boundary update from each network's predictions (DivideMix)
    member_update = jax.jit(method.member_update, static_argnames=("num_examples",),
                            out_shardings=table_sharding.shardings(mesh, AXIS, sharded=True) if shard_table else None)
    predict_each = make_evaluate(make_predict_fn(model, normalize=normalize, compiler_options=options),
                                 workers=workers)
  update_table = jax.jit(method.table_update) if method.table_update is not None else None
  if update_table is not None and shard_table:
    update_table = table_sharding.sharded_update(method.table_update, mesh, AXIS, table.num_examples)

  clean = None if clean_train_labels is None else np.asarray(clean_train_labels)
  has_val, has_test = dataset.x_val.shape[0] > 0, dataset.x_test.shape[0] > 0
  best_val, best_variables, history = -1.0, None, []
  manager, step_manager, first_epoch, position = None, None, 1, None
  if checkpoint_dir:
    checkpoint_every = int(config.get("checkpoint_every", 1))
    if checkpoint_every < 1:
      raise ValueError(f"checkpoint_every={checkpoint_every!r} must be >= 1 when checkpoint_dir is given.")
    manager = checkpoint_lib.open_manager(checkpoint_dir, keep=int(config.get("keep_checkpoints", 2)))
    checkpoint_meta = {"stage": stage, "seed": None if config.get("seed") is None else int(config.seed),
                       "key_data": checkpoint_lib.key_data(key), "config": checkpoint_lib.config_json(config)}
    checkpoint_meta["table_rows"] = table.num_examples  # N, or N_pad when sharded: the layout saved
    resume_args = dict(config=config, key=key, state=state, table=table, num_examples=num_examples, mesh=mesh,
                       place_table=place_table)
    resumed = _resume(manager, checkpoint_dir, **resume_args)
    if every_steps:  # mid-epoch checkpoints: the newest wins when it is past the newest epoch checkpoint
      step_manager = checkpoint_lib.open_manager(checkpoint_lib.steps_dir(checkpoint_dir), keep=1)
      inside = _resume(step_manager, checkpoint_lib.steps_dir(checkpoint_dir), **resume_args)
      done = len(resumed[4]) if resumed is not None else 0
      if inside is not None and inside[5]["epoch"] > done:
        resumed = inside
    if resumed is not None:
      state, table, best_variables, best_val, history, position = resumed
      first_epoch = history[-1]["epoch"] + 1 if history else 1
      if on_resume is not None:
        on_resume(list(history))
  for epoch in range(first_epoch, config.num_epochs + 1):
    start = time.perf_counter()
    inside_epoch = {}
    if position is not None:  # resumed inside this epoch: its first steps are trained
      inside_epoch = {"start": int(position["step"]), "totals": position["totals"]}
      position = None
    if step_manager is not None:
      def save_inside(steps_done, state, table, totals, epoch=epoch):
        if steps_done % every_steps or steps_done == steps_per_epoch:
          return
        checkpoint_lib.save(step_manager, (epoch - 1) * steps_per_epoch + steps_done, state=state, table=table,
                            best_variables=_variables(state) if best_variables is None else best_variables,
                            meta={**checkpoint_meta, "best_val": best_val, "has_best": best_variables is not None,
                                  "history": history, "position": {"epoch": epoch, "step": steps_done,
                                                                   "totals": _to_python(totals)}})
      inside_epoch["after_step"] = save_inside
    state, table, train_metrics = epoch_fn(state, table, images, jax.random.fold_in(order_key, epoch),
                                           jnp.asarray(epoch, jnp.int32), **inside_epoch)
    variables = _variables(state)
    record = {"stage": stage, "epoch": epoch, **_to_python(train_metrics)}  # _to_python waits for the epoch
    record["steps_per_second"] = steps_per_epoch / (time.perf_counter() - start)
    if has_test:
      test_probs = predict(variables, dataset.x_test)
      record["test_accuracy"] = float(metrics_lib.accuracy(test_probs, dataset.y_test))
      margins = np.asarray(metrics_lib.log_margins(test_probs, dataset.y_test))
      if (margins > 0).any():  # the confidence gap of the test examples the network gets right
        record["test_margin_correct"] = float(np.mean(margins[margins > 0]))
    if has_val:
      record["val_accuracy"] = float(metrics_lib.accuracy(predict(variables, dataset.x_val), dataset.y_val))
    if has_val and record["val_accuracy"] > best_val:
      best_val = record["val_accuracy"]
      best_variables = jax.tree.map(jnp.copy, variables)  # the state's buffers are donated next epoch

    train_probs = None
    if config.get("eval_train", False) or method.needs_train_probs:
      train_probs = predict(variables, dataset.x_train)
    if train_probs is not None:  # fitted, memorised (metrics.train_split_metrics; clean ones only when known)
      record.update(metrics_lib.train_split_metrics(train_probs, given, clean))

    if update_table is not None and method.update_due(epoch):
      probs_for_table = None
      if method.needs_train_probs:
        use_best = method.prune_params == "best_val" and best_variables is not None
        probs_for_table = predict(best_variables, dataset.x_train) if use_best else train_probs
      table = update_table(table, probs_for_table)
    if member_update is not None and method.update_due(epoch):
      member_probs = jnp.stack([predict_each(members_lib.take(variables, m), dataset.x_train)
                                for m in range(method.num_networks)])
      if table.num_examples != num_examples:  # a padded (sharded) table: zero rows for the padding
        member_probs = jnp.pad(member_probs, ((0, 0), (0, table.num_examples - num_examples), (0, 0)))
      table = member_update(table, member_probs, jnp.asarray(epoch, jnp.int32), num_examples=num_examples)
    record.update(table_metrics(table, clean, method, num_examples=num_examples))
    record["seconds"] = time.perf_counter() - start
    history.append(record)
    if manager is not None and checkpoint_lib.is_due(epoch, every=checkpoint_every, num_epochs=config.num_epochs):
      checkpoint_lib.save(manager, epoch, state=state, table=table,
                          best_variables=_variables(state) if best_variables is None else best_variables,
                          meta={**checkpoint_meta, "best_val": best_val, "has_best": best_variables is not None,
                                "history": history})
    if log_fn is not None:
      log_fn(record)
  for m in (manager, step_manager):
    if m is not None:
      m.close()
  if best_variables is None:
    best_variables = jax.tree.map(jnp.copy, _variables(state))
  if shard_table:  # its real rows, on the host (table_sharding.host_table: the one gather of the run)
    table = table_sharding.host_table(table, num_examples)
  return state, table, history, best_variables


def _resume(manager, directory: str, *, config, key: jax.Array, state: TrainState,
            table: label_table_lib.LabelTable, num_examples: int, mesh: Mesh, place_table: Callable):
  """The newest checkpoint in `manager`, checked and placed on `mesh`: (state, table, best variables or None,
  best_val, history, position); None when there is none. `state` and `table` are the fresh ones, placed (structure,
  sharding and given labels). position: None for an epoch checkpoint, {"epoch", "step", "totals"} for one written
  inside an epoch.

  A table saved in this run's layout (meta `table_rows` equal to the placed table's rows) is read straight into its
  sharding; one of another layout (replicated, or padded for another device count) is read on the host, its
  `num_examples` real rows kept and placed again with `place_table`.
  """
  epoch = checkpoint_lib.latest_epoch(manager)
  if epoch is None:
    return None
  meta = checkpoint_lib.restore_meta(manager, epoch)
  checkpoint_lib.check_compatible(meta, directory=directory, config=config, key=key)
  saved_rows = int(meta.get("table_rows", num_examples))
  same_layout = saved_rows == table.num_examples
  restored_state, restored_table, best = checkpoint_lib.restore_arrays(
      manager, epoch, state=state, table=table if same_layout else table_sharding.host_layout(table, saved_rows),
      best_variables=_variables(state))
  given = lambda t: np.asarray(distributed.host_value(t.noisy_labels))[:num_examples]
  if not np.array_equal(given(restored_table), given(table)):
    raise ValueError(f"Cannot resume from {directory}: its label table's given labels differ from this run's "
                     f"(a different dataset or noise); use another workdir.")
  logging.info("Resuming %s from %s after epoch %d.", meta.get("stage") or "training", directory, epoch)
  # Fresh device buffers (replicate never aliases; a sharded restore is fresh): the epoch program donates them.
  if not (same_layout and table_sharding.is_sharded(restored_table)):
    restored_table = place_table(table_sharding.unpad(restored_table, num_examples))
  return (replicate(restored_state, mesh), restored_table,
          replicate(best, mesh) if meta["has_best"] else None, float(meta["best_val"]), list(meta["history"]),
          meta.get("position"))


# One run (noisy_jax.runs) lives in its own module; these names stay here for callers of train.NAME.
_MOVED_TO_RUNS = ("run_single", "build_model", "total_epochs", "_summary_of")


def __getattr__(name):
  if name in _MOVED_TO_RUNS:
    from noisy_jax import runs  # pylint: disable=g-import-not-at-top  (runs imports this module)
    return getattr(runs, name.lstrip("_") if name == "_summary_of" else name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
