"""Peer loss (Liu & Guo, ICML 2020, arXiv 1910.03231) as a method with its own epoch program; the pure pieces are
noisy_jax.core.peer_loss's (its docstring: the formula, how the codes draw the peers, the alpha schedules).

Each epoch (`make_epoch_fn`) is the shared program's order of the training split, `epoch.epoch_batches` with the
epoch key: S = ceil(N / B) batches of B rows, the last one filled up with rows marked invalid. Step s:
  1. rows [B] of batch s, valid [B]; peer key k_s = fold_in(fold_in(epoch key, PEER_STREAM), s); the peer rows
     (n1, n2) [B] = `core.peer_loss.draw_peer_rows`(k_s, B, N): two independent uniform draws with replacement over
     the whole split (cifar-10-100n@b5a80e6 main_min.py:172-185, its two RandomSampler(replacement=True) loaders);
  2. x = augment(normalise(images[rows])) with the shared program's key of the step (`epoch.augmentation_key`),
     x' = augment(normalise(images[n1])) with fold_in(k_s, PEER_AUGMENT_STREAM); y = one-hot given labels of rows,
     y' = one-hot given labels of n2 (the table's noisy_labels, never changed);
  3. two train-mode forwards, the batch's then the peers' (the BatchNorm statistics move with each in turn, as the
     draft's two forwards of one network, main_min.py:70-82); the loss
       L = sum_i v_i l_i / sum_i v_i,  l_i = CE(f(x_i), y_i) - alpha CE(f(x'_i), y'_i)  (`core.peer_loss.peer_loss`)
     over the global batch (v: valid), alpha = `alpha_at`(loop epoch) of the setting ('sparse', 'uniform': the
     replication's f_alpha, peer_loss/utils.py:18-37) or the constant given; loop epoch = epochs_before + epoch - 1
     (0-based). The schedules start with 20 epochs of alpha 0: plain cross entropy (the replication's CE epoch 0
     and more; the peer forward still runs and moves the BatchNorm statistics);
  4. one optimiser step (`update.update`), the schedule's count set to loop epoch x S + s.
The batch is split over the mesh's devices (each its B / D rows of the batch and of the peers), the loss's sums
psum-ed and the BatchNorm statistics synchronised, as PES's epoch program.

Differences from the codes: the replication (KlemenVovk/noisy-labels peer_loss.py:122-132) pairs each batch with a
second shuffled loader over a fixed permutation of the images; here the draft's independent draws. The learning-rate
plan (`core.peer_loss.lr_factor`) is the run's optimiser's to apply: experiments/configs/peer_loss_paper.py sets it as
lr_schedule 'per_epoch' (noisy_jax.train.optim). A row-sharded label table
and streamed inputs are refused (the peers need the resident split).

The program is shared: `make_epoch_fn(..., pair_loss=F)` runs the same steps (peer rows, inputs, two forwards,
update) with another method's batch loss F(logits, labels, peer_logits, peer_labels, valid, axis_name) in place of
step 3's L (noisy_jax.methods.f_divergence); the epoch's alpha is then neither used nor reported.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import peer_loss as peer_core
from noisy_jax.core import precision
from noisy_jax.data import normalization
from noisy_jax.methods import dividemix_train
from noisy_jax.methods import plain_loss
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import table_sharding
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import method as method_lib
from noisy_jax.train import pair_epochs
from noisy_jax.train import update as update_lib

PEER_STREAM = 0x70656572  # the fold of the epoch key whose step folds draw the peer rows
PEER_AUGMENT_STREAM = 2  # the fold of a step's peer key that augments the peer inputs (0 and 1: draw_peer_rows')
ALPHA_SETTINGS = tuple(peer_core.ALPHA_PIECES)


@dataclasses.dataclass(frozen=True)
class PeerLossSettings:
  """Peer loss's settings (module docstring).

  Attributes:
    alpha: 'sparse' (the replication's, r = 0.1), 'uniform', or a constant weight >= 0 of the peer term.
    log_epsilon: 0 (exact cross entropies) or the offset inside their log (the replication's 1e-5).
    epochs_before: the run's clock at this stage's start (Context.epochs_before), where the schedule continues.
  """

  alpha: str | float = "sparse"
  log_epsilon: float = 0.0
  epochs_before: int = 0


def check_settings(settings: PeerLossSettings) -> None:
  """ValueError naming the first setting out of its range."""
  alpha = settings.alpha
  if isinstance(alpha, str):
    _checks.check_choice("alpha", alpha, ALPHA_SETTINGS)
  elif isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= float(alpha) < np.inf:
    raise ValueError(f"alpha={alpha!r} must be one of {ALPHA_SETTINGS} or a number >= 0.")
  _checks.check_range("log_epsilon", settings.log_epsilon, 0.0, 1.0)
  if int(settings.epochs_before) != settings.epochs_before or settings.epochs_before < 0:
    raise ValueError(f"epochs_before={settings.epochs_before!r} must be an integer >= 0.")


def epoch_alpha(settings: PeerLossSettings, loop_epoch: int) -> float:
  """alpha of 0-based `loop_epoch`: `core.peer_loss.alpha_at` of the setting, or the constant."""
  if isinstance(settings.alpha, str):
    return peer_core.alpha_at(loop_epoch, settings.alpha)
  return float(settings.alpha)


def peer_rows(key, step, batch_size: int, num_examples: int):
  """(peer key k_s, n1 [B], n2 [B]) of step `step` (module docstring, step 1)."""
  peer_key = jax.random.fold_in(jax.random.fold_in(key, PEER_STREAM), step)
  n1, n2 = peer_core.draw_peer_rows(peer_key, batch_size, num_examples)
  return peer_key, n1, n2


def batch_loss(logits, labels, peer_logits, peer_labels, valid, *, alpha, log_epsilon, axis_name=None):
  """L = sum_i v_i l_i / sum_i v_i over the global batch (`core.peer_loss.peer_loss` l [B]; logits and labels
  [B, C], valid [B]); the sums psum-ed over `axis_name`."""
  per_example = peer_core.peer_loss(logits, labels, peer_logits, peer_labels, alpha=alpha, log_epsilon=log_epsilon)
  v = valid.astype(per_example.dtype)
  total, count = jnp.sum(v * per_example), jnp.sum(v)
  if axis_name is not None:
    total, count = lax.psum(total, axis_name), lax.psum(count, axis_name)
  return total / jnp.maximum(count, 1.0)


def _inputs(images, rows, key, normalize, augment):
  """normalise(images[rows]), augmented with `key` when there is an augmentation."""
  x = normalize(jnp.take(images, rows, axis=0))
  return x if augment is None else augment(key, x, rows)


def make_epoch_fn(
  mesh,
  *,
  settings: PeerLossSettings,
  batch_size: int,
  num_examples: int,
  augment=None,
  compiler_options=None,
  normalize=None,
  axis: str = "batch",
  pair_loss=None,
  name: str = "Peer loss",
  **unused,
):
  """`epoch_fn(state, table, images, key, epoch) -> (state, table, metrics)` of peer loss (module docstring).
  State and table are donated; a row-sharded table or streamed inputs are refused.

  pair_loss: None (peer loss's `batch_loss` with the settings' alpha and log_epsilon) or another method's batch loss
  `(logits, labels, peer_logits, peer_labels, valid, axis_name) -> L` over the global batch (its sums psum-ed over
  axis_name); with one, the metrics carry no 'peer_alpha'. name: the method's, in the refusals' messages."""
  if unused.get("source") is not None:
    raise ValueError(f"{name} draws its peers from the resident training split: streamed inputs are not supported.")
  check_settings(settings)
  normalize = normalize or normalization.identity()
  num_devices = mesh.devices.size
  if batch_size % num_devices:
    raise ValueError(f"{name} splits batch_size={batch_size} over {num_devices} device(s): it must be divisible.")
  local = batch_size // num_devices
  steps = math.ceil(num_examples / batch_size)

  def network_step(state, table, totals, images, rows, valid, key, step, count, alpha, *, m, shard_table):
    del m, shard_table
    d, dtype = lax.axis_index(axis), precision.float_dtype()
    peer_key, n1, n2 = peer_rows(key, step, batch_size, num_examples)
    mine = lambda a: lax.dynamic_slice_in_dim(a, d * local, local)
    my_rows, my_valid, my_n1, my_n2 = mine(rows), mine(valid), mine(n1), mine(n2)
    x = _inputs(images, my_rows, epoch_lib.augmentation_key(key, step), normalize, augment)
    x_peer = _inputs(images, my_n1, jax.random.fold_in(peer_key, PEER_AUGMENT_STREAM), normalize, augment)
    one_hot = lambda r: jax.nn.one_hot(jnp.take(table.noisy_labels, r), table.num_classes, dtype=dtype)
    labels, peer_labels = one_hot(my_rows), one_hot(my_n2)

    def loss_fn(params):
      logits, stats = dividemix_train.train_forward(state, params, state.batch_stats, x)
      peer_logits, stats = dividemix_train.train_forward(state, params, stats, x_peer)
      if pair_loss is not None:
        return pair_loss(logits, labels, peer_logits, peer_labels, my_valid, axis), (stats, logits)
      loss = batch_loss(
        logits,
        labels,
        peer_logits,
        peer_labels,
        my_valid,
        alpha=alpha,
        log_epsilon=settings.log_epsilon,
        axis_name=axis,
      )
      return loss, (stats, logits)

    new_state, loss, logits, _ = update_lib.update(state, loss_fn, axis_name=axis, schedule_count=count)
    hits = (jnp.argmax(logits, -1) == jnp.argmax(labels, -1)) & my_valid
    correct = lax.psum(jnp.sum(hits).astype(dtype), axis)
    examples = lax.psum(jnp.sum(my_valid).astype(dtype), axis)
    return new_state, table, pair_epochs.add_to_totals(totals, loss, correct, examples)

  program = pair_epochs.network_programs(
    network_step, mesh, axis=axis, num_replicated=7, compiler_options=compiler_options
  )
  batches_fn = jax.jit(lambda key: epoch_lib.epoch_batches(key, num_examples, batch_size))

  def epoch_fn(state, table, images, key, epoch, **inside):
    pair_epochs.refuse_inside_epoch(name, inside)
    if table_sharding.is_sharded(table):
      raise ValueError(f"{name} reads the peers' labels from the whole table: set label_table_sharding='replicated'.")
    if images is None:
      raise ValueError(f"{name} draws its peers from the resident training split: images must not be None.")
    loop_epoch = settings.epochs_before + int(epoch) - 1
    alpha = epoch_alpha(settings, loop_epoch)
    order, valid = batches_fn(key)
    totals = pair_epochs.zero_totals(mesh)
    alpha_arg = np.asarray(alpha, precision.float_dtype())
    for step in range(steps):
      count = np.int32(loop_epoch * steps + step)
      state, table, totals = program(False)(
        state, table, totals, np.int32(0), images, order[step], valid[step], key, np.int32(step), count, alpha_arg
      )
    metrics = epoch_lib.mean_metrics(totals, "train_accuracy_given")
    return state, table, metrics if pair_loss is not None else {**metrics, "peer_alpha": alpha}

  return epoch_fn


def method(settings: PeerLossSettings) -> method_lib.Method:
  """Peer loss as a method: its epoch program (`make_epoch_fn`); the objective (cross entropy) is the shared
  program's, used only where a caller runs it (evaluation needs none)."""
  check_settings(settings)

  return method_lib.Method(
    name="peer_loss",
    objective=plain_loss.cross_entropy_objective(),
    program=method_lib.own_program(functools.partial(make_epoch_fn, settings=settings)),
  )


def _alpha_setting(value):
  """A config's alpha: a setting's name as it is, a number as float."""
  return value if isinstance(value, str) else float(value)


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  defaults = PeerLossSettings()
  get = lambda name: method_config.get(name, getattr(defaults, name))
  return method(
    PeerLossSettings(
      alpha=_alpha_setting(get("alpha")),
      log_epsilon=float(get("log_epsilon")),
      epochs_before=int(context.epochs_before),
    )
  )


SPEC = spec_lib.MethodSpec(
  name="peer_loss",
  fields=("alpha", "log_epsilon"),
  build=_build,
  # A constant alpha (the schedules' first 20 epochs are plain cross entropy), the replication's epsilon.
  tiny={
    "peer_loss": {
      "method": {"name": "peer_loss", "alpha": 0.5, "log_epsilon": 1e-5},
      "num_epochs": 3,
    }
  },
)
