"""ELR+ trained by train.fit (Liu, Niles-Weed, Razavian & Fernandez-Granda, NeurIPS 2020, appendix; the original
code shengliu66/ELR@934af53, ELR_plus/trainer/trainer.py and base/base_trainer.py, single-GPU path): the epoch
program, built from the pure blocks of noisy_jax.methods.elr.

The run is fit's loop with a pair of networks (one stacked TrainState, each network with its weight average in
`TrainState.method_state[AVERAGES]`) and a label table whose method rows hold

  elr_plus_targets  [N, 2, C]   t^(m)_i, network m's temporal-ensembling target of example i (0 before any visit)

so a checkpoint holds both networks, both averages and both target tables.

Epochs 1 .. warm_up (every config of the original has none): both networks trained with cross entropy on all data,
and each one's targets updated from its own unclamped softmax, t^(m) <- beta t^(m) + (1 - beta) p^(m) (the
original's `_warmup_epoch` calls `update_hist` with its own output): train.make_epoch_fn's program with the warm-up
objective (methods.elr_plus_method). The averages are not updated during the warm-up (neither are the original's);
they restart as copies of the warmed-up networks at the first ELR+ epoch. The original keeps them at their initial
values, so its network 1 would take a whole epoch of targets from an untrained network: a path none of its configs
runs, not reproduced.

Later epochs: network 1 trains a whole epoch, then network 2 (the original's single-GPU order, so network 2 already
sees network 1's average of this epoch). For network m, its own shuffled order of the training split (the original
has one loader per network) cut into full batches of `batch_size` (the last partial batch is dropped: a deviation,
the original trains it), and per step (`network_step`):

  z_ema   = f(x; ema of network 1 - m), train mode (the original never calls .eval() on the average: BatchNorm
            normalises with the batch's statistics; the average's running statistics are never used, not kept)
  t_i    <- beta t^(m)_i + (1 - beta) softmax(z_ema,i)                     (elr.updated_rows, clamp None)
  lam_mix ~ Beta(a, a), max(lam_mix, 1 - lam_mix); pi a permutation        (elr.mixup, over the global batch)
  x_mix, y_mix = mixup of the inputs and the one-hot given labels; q = lam_mix t + (1 - lam_mix) t[pi]
  loss   = mean_i softCE(f(x_mix,i), y_mix,i) + ramp(s, coef_step) lam log(1 - <q_i, clamp(p_mix,i)>)
           (elr.elr_plus_loss; y_mix re-weighted by q when `reweight_labels`, the original's CIFAR-100 rule)
  one optimiser step of network m; then its average: ema <- a ema + (1 - a) params, a = elr.ema_decay(s)

with s the original's global step: 1-based, counting the steps of the ELR+ epochs only (both networks of one epoch
see the same s). Over several devices the mixup permutation and the batch mean are over the global batch (inputs,
labels and targets are all-gathered, mixed once, and each device trains on its slice), so N devices train what one
does.

The averages start as copies of the networks (the original builds each average as a third, independently
initialised network: with its CIFAR settings the first update keeps 0.997 exp(-5) < 1% of that, so the difference
vanishes after one step; with `ema_update` False the first average is half the initial network's).

Learning rate: before every step of epoch e the network's schedule count is set to (e - 1) x ceil(N / batch_size) +
step (`optim.at_epoch`), so fit's schedules (written in fit's steps per epoch) give the rate of fit's own loop.

Evaluation, as the original's single-GPU test: the mean of the two online networks' logits (not the averages).
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
from noisy_jax.core import label_issues
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import losses
from noisy_jax.core import precision
from noisy_jax.data import normalization
from noisy_jax.methods import elr as elr_lib
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import table_sharding
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import members as members_lib
from noisy_jax.train import method as method_lib
from noisy_jax.train import pair_epochs
from noisy_jax.train import update as update_lib

TARGETS = "elr_plus_targets"
AVERAGES = "ema_params"  # TrainState.method_state's entry: each network's weight average of its parameters
AUGMENT_STREAM = 0x656C7270  # the fold of the epoch key that ELR+'s augmentation and mixup draw from


def init_rows(num_rows: int, num_classes: int) -> dict:
  """Both networks' targets before training: zeros [N, 2, C] (the original's `torch.zeros(num_examp, C)` each)."""
  return {TARGETS: jnp.zeros((int(num_rows), 2, int(num_classes)), precision.float_dtype())}


def target_probabilities(table) -> np.ndarray:
  """[N, C] the mean over the two networks of t^(m) / sum_c t^(m) (a row never visited: uniform), from a host
  table: each example's running average of the peers' weight-averaged predictions (label issues' evidence)."""
  targets = np.asarray(table.method_rows[TARGETS], np.float64)
  sums = targets.sum(axis=-1, keepdims=True)
  normalised = np.where(sums > 0, targets / np.where(sums > 0, sums, 1.0), 1.0 / targets.shape[-1])
  return normalised.mean(axis=1)


def with_averages(state):
  """`state` (a stacked pair) with each network's average initialised to a copy of its parameters."""
  return state.replace(method_state={AVERAGES: jax.tree.map(jnp.copy, state.params)})


def averages(state):
  """Each network's weight average of `state` (a pair's, or one network's of it)."""
  return state.method_state[AVERAGES]


def global_step(epoch, step, *, warm_up: int, steps_per_epoch: int):
  """The original's global step of step `step` (0-based) of epoch `epoch` (1-based, > warm_up): 1-based, ELR+
  epochs only, the same for both networks of an epoch."""
  return (epoch - warm_up - 1) * steps_per_epoch + step + 1


def epoch_order(key, num_examples: int, batch_size: int, m: int):
  """Network m's batches of one epoch, [S, batch_size] rows with S = num_examples // batch_size: its own random
  order of the split (fold m of the epoch key), the last partial batch dropped."""
  steps = num_examples // batch_size
  return jax.random.permutation(jax.random.fold_in(key, m), num_examples)[: steps * batch_size].reshape(
    steps, batch_size
  )


def _check_batches(batch_size: int, num_devices: int, num_examples: int) -> None:
  """ValueError unless batch_size splits evenly over the devices and is at most num_examples (a full batch)."""
  if batch_size % num_devices:
    raise ValueError(
      f"ELR+ splits batch_size={batch_size} over {num_devices} device(s): it must be divisible by {num_devices}."
    )
  if num_examples // batch_size < 1:
    raise ValueError(
      f"ELR+ trains full batches: batch_size={batch_size} is larger than the {num_examples} training examples."
    )


def _train_forward(net, params, batch_stats, inputs):
  """Train-mode logits of network `net` (its apply_fn) with `params`, and its running statistics after the pass."""
  logits, updates = net.apply_fn(
    {"params": params, "batch_stats": batch_stats}, inputs, train=True, mutable=["batch_stats"]
  )
  return logits.astype(precision.at_least(logits.dtype)), updates["batch_stats"]


def _write_targets(table, rows, targets, *, shard_table: bool, axis: str):
  """`table` with the targets of the global batch's `rows` written (each device its own rows when sharded)."""
  if shard_table:
    return label_table_lib.sharded_write_rows(table, rows, {TARGETS: targets}, axis_name=axis)
  return label_table_lib.write_rows(table, rows, {TARGETS: targets})


def make_epoch_fn(
  mesh,
  *,
  settings,
  batch_size: int,
  num_examples: int,
  warmup_epoch_fn,
  augment=None,
  compiler_options=None,
  normalize=None,
  axis: str = "batch",
):
  """`epoch_fn(state, table, images, key, epoch) -> (state, table, metrics)` of ELR+ (module docstring).

  settings: ElrPlusSettings. warmup_epoch_fn: train.make_epoch_fn of the warm-up objective over the same mesh
  and batch size. State and table are donated.
  """
  normalize = normalize or normalization.identity()
  num_devices = mesh.devices.size
  _check_batches(batch_size, num_devices, num_examples)
  num_steps = num_examples // batch_size
  local = batch_size // num_devices
  fit_steps_per_epoch = math.ceil(num_examples / batch_size)  # of the optimiser's schedule (fit's)
  warm_up = int(settings.warm_up)

  def network_step(state, table, totals, images, rows, key, step, epoch, *, m, shard_table: bool):
    d = lax.axis_index(axis)
    mine = lax.dynamic_slice_in_dim(rows, d * local, local)
    labels, _, read = label_table_lib.read_batch(table, mine, table_axis=axis if shard_table else None)
    all_targets = read[TARGETS]
    step_key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(key, AUGMENT_STREAM), m), step)
    key_view, key_mix = jax.random.split(step_key)
    x = normalize(jnp.take(images, mine, axis=0))
    if augment is not None:
      x = augment(key_view, x, mine)
    own, other = members_lib.take(state, m), members_lib.take(state, 1 - m)
    train_forward = functools.partial(_train_forward, own)
    z_ema, _ = train_forward(averages(other), other.batch_stats, x)  # its statistics' update is discarded
    z_ema = lax.stop_gradient(z_ema)
    new_targets = elr_lib.updated_rows(all_targets[:, m], jax.nn.softmax(z_ema), beta=settings.beta, clamp=None)
    gather = lambda a: lax.all_gather(a, axis, tiled=True)
    x_mix, y_mix, perm, lam_mix = elr_lib.mixup(gather(x), gather(labels), key_mix, settings.mixup_alpha)
    q = elr_lib.mix_targets(gather(new_targets), perm, lam_mix)
    x_mix, y_mix, q = (lax.dynamic_slice_in_dim(a, d * local, local) for a in (x_mix, y_mix, q))
    s = global_step(epoch, step, warm_up=warm_up, steps_per_epoch=num_steps)
    coef = elr_lib.sigmoid_ramp(s, settings.coef_step)

    def loss_fn(params):
      logits, new_stats = train_forward(params, own.batch_stats, x_mix)
      per_example = elr_lib.elr_plus_loss(
        logits, y_mix, q, lam=settings.lam, coef=coef, reweight_labels=settings.reweight_labels
      )
      return lax.psum(jnp.sum(per_example), axis) / batch_size, (new_stats, None)

    count = (epoch - 1) * fit_steps_per_epoch + step
    own, loss, _, _ = update_lib.update(own, loss_fn, axis_name=axis, schedule_count=count)
    decay = elr_lib.ema_decay(
      s, ema_update=settings.ema_update, ema_alpha=settings.ema_alpha, ramp_length=settings.ema_step
    )
    own = own.replace(method_state={AVERAGES: elr_lib.update_ema(averages(own), own.params, decay)})
    state = jax.tree.map(lambda whole, one: whole.at[m].set(one), state, own)
    written = all_targets.at[:, m].set(new_targets.astype(all_targets.dtype))
    table = _write_targets(table, rows, gather(written), shard_table=shard_table, axis=axis)
    # Reported: the loss, and how often the peer's average predicts the given label (the original's metrics_ema).
    correct = lax.psum(jnp.sum(jnp.argmax(z_ema, -1) == jnp.argmax(labels, -1)).astype(precision.float_dtype()), axis)
    count = jnp.asarray(float(batch_size), precision.float_dtype())
    return state, table, pair_epochs.add_to_totals(totals, loss, correct, count)

  program = pair_epochs.network_programs(
    network_step, mesh, axis=axis, num_replicated=5, compiler_options=compiler_options
  )

  def epoch_fn(state, table, images, key, epoch, **unused):
    pair_epochs.refuse_inside_epoch("ELR+", unused)
    if int(epoch) <= warm_up:
      return warmup_epoch_fn(state, table, images, key, epoch)
    if warm_up and int(epoch) == warm_up + 1:  # the averages start from the warmed-up networks (module docstring)
      state = with_averages(state)
    shard_table = table_sharding.is_sharded(table)
    totals = pair_epochs.zero_totals(mesh)
    for m in range(2):
      order = epoch_order(key, num_examples, batch_size, m)
      for step in range(num_steps):
        state, table, totals = program(shard_table)(
          state, table, totals, np.int32(m), images, order[step], key, np.int32(step), epoch
        )
    return state, table, epoch_lib.mean_metrics(totals, "peer_average_accuracy_given")

  return epoch_fn


@dataclasses.dataclass(frozen=True)
class ElrPlusSettings:
  """ELR+'s hyper-parameters (ELR_plus/config_cifar10.json: beta 0.7, lambda 3, mixup_alpha 1, coef_step 0,
  ema_alpha 0.997, ema_update true, ema_step 40000, warmup 0; CIFAR-10 asymmetric beta 0.9, lambda 1; CIFAR-100
  beta 0.9, lambda 7, coef_step 40000). reweight_labels None: the original's rule, re-weight iff C = 100."""

  beta: float = 0.7
  lam: float = 3.0
  mixup_alpha: float = 1.0
  coef_step: int = 0
  ema_alpha: float = 0.997
  ema_update: bool = True
  ema_step: int = 40000
  warm_up: int = 0
  reweight_labels: bool | None = None

  def resolved(self, num_classes: int) -> "ElrPlusSettings":
    """These settings with reweight_labels decided: as given, or (None) the original's rule, C == 100."""
    if self.reweight_labels is not None:
      return self
    return dataclasses.replace(self, reweight_labels=int(num_classes) == 100)


def method(settings: ElrPlusSettings, *, num_classes: int) -> method_lib.Method:
  """ELR+ as a method (module docstring): its own epoch program (`make_epoch_fn`) after `warm_up` epochs whose
  objective is the sum over the pair of each network's mean cross entropy, with each network's targets updated from
  its own unclamped softmax."""
  _checks.check_range("beta", settings.beta, 0.0, 1.0)
  _checks.check_range("lam", settings.lam, 0.0, np.inf)
  _checks.check_range("mixup_alpha", settings.mixup_alpha, 0.0, np.inf)
  _checks.check_range("ema_alpha", settings.ema_alpha, 0.0, 1.0)
  for name in ("coef_step", "ema_step", "warm_up"):
    value = getattr(settings, name)
    if isinstance(value, bool) or int(value) != value or value < 0:
      raise ValueError(f"{name}={value!r} must be an integer >= 0.")
  settings = settings.resolved(num_classes)

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, rows, epoch, **unused):
    del weights, epoch
    loss, targets = 0.0, rows[TARGETS]
    for m in range(2):
      loss = loss + method_lib.weighted_batch_mean(
        losses.cross_entropy(logits[m], soft_labels), jnp.ones_like(valid, logits.dtype), valid, axis_name
      )
      targets = targets.at[:, m].set(
        elr_lib.updated_rows(targets[:, m], jax.nn.softmax(logits[m]), beta=settings.beta, clamp=None)
      )
    return loss, {TARGETS: targets}

  def own_epoch_fn(mesh, warmup_epoch_fn, **options):
    return make_epoch_fn(mesh, settings=settings, warmup_epoch_fn=warmup_epoch_fn, **options)

  def label_evidence(table):
    return label_issues.MethodEvidence(what="ELR+ targets (mean of both networks')", probs=target_probabilities(table))

  return method_lib.Method(
    name="elr_plus",
    objective=objective,
    init_rows=lambda key, rows, classes: init_rows(rows, classes),
    row_update=lambda rows, rows_out, grads: rows_out,
    num_networks=2,
    program=method_lib.EpochProgram(build=own_epoch_fn, init_state=with_averages),
    label_evidence=label_evidence,
  )


SPEC = spec_lib.MethodSpec(
  name="elr_plus",
  fields=tuple(f.name for f in dataclasses.fields(ElrPlusSettings)),
  build=lambda method_config, context: method(
    ElrPlusSettings(**{k: method_config[k] for k in method_config.keys() if k != "name"}),
    num_classes=context.num_classes,
  ),
  # 1 warm-up epoch, 2 epochs of ELR+ with the weight averages
  tiny={
    "elr_plus": {
      "method": {"name": "elr_plus", "warm_up": 1, "ema_step": 10, "coef_step": 10},
      "batch_size": 64,
    }
  },
)
