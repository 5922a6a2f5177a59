"""DivideMix trained by train.fit (Li, Socher & Hoi, ICLR 2020; LiJunnan1992/DivideMix@d9d3058, Train_cifar.py):
the epoch program and the epoch-boundary division, built from the pure blocks of noisy_jax.methods.dividemix.

The run is fit's loop with a pair of networks (one stacked TrainState) and a label table whose method rows hold
  dividemix_clean_prob   [N, 2]     w of each example from each network's GMM (1 before the first division)
  dividemix_loss_history [N, 2, W]  the last W epochs' normalised losses of each network (W = 5 at 90% noise, else 1)
so a checkpoint holds both networks, the division and its loss history.

Epochs 1 .. warm_up (the original's 0 .. warm_up - 1): both networks trained with cross entropy on all data (plus
the negative entropy for asymmetric noise), batch `batch_size`: train.make_epoch_fn with the warm-up objective. The
original warms each network with its own shuffled loader; here both see one order.

After epoch e >= warm_up (`divide`, the epoch boundary; the original does it at the start of the next epoch, with
the same networks): each network's eval-mode cross entropy of every training example, min-max normalised, written
into the loss history (ring slot (e - warm_up) mod W), averaged over the filled slots, a two-component GMM
(`noisy_jax.core.gmm.fit_two_component_gmm`), w = the posterior of the low-loss component.

Epochs after warm_up: network 1 trains on network 2's division, then network 2 on network 1's (co-divide; network 2
already sees network 1's update of this epoch, as in the original). For network m: labelled L = {i: w_{1-m,i} >
p_threshold}, unlabelled U = the rest; batches of b = batch_size / 2 labelled rows (a random order of L, the last
partial batch dropped: a deviation, the original trains it) and b unlabelled rows (a random order of U, cycled: the
original re-shuffles when U is exhausted); n_L // b steps, the ramp's num_iter = n_L // b + 1 as the original.
Each step (`network_step`): two augmented views of both; network m in train mode (its BatchNorm statistics move
with each of its forward passes: u1, u2, x1, x2, then the mixed batch, the original's order), the other network in
eval mode; label co-refinement and co-guessing, sharpening, MixMatch of [x1, x2, u1, u2] with one permutation,
Lx + lambda_u ramp Lu + the uniform-prior penalty; only network m is updated. Over several devices the MixMatch
permutation, Lx, Lu and the penalty are over the global batch (the views are all-gathered, mixed once, and each
device trains on its slice), so N devices train what one does.

Learning rate: fit's optimiser schedules count steps, and a DivideMix epoch has a data-dependent number of steps
(more than ceil(N / batch_size) when more than half the examples are labelled); before every step of epoch e the
network's schedule count is set to (e - 1) x ceil(N / batch_size) (`optim.at_epoch`), so a schedule in epochs
('piecewise' lr_boundaries, 'cosine') gives epoch e's rate to all of its steps, as the original's per-epoch lr.
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
from noisy_jax.core import gmm
from noisy_jax.core import label_issues
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import precision
from noisy_jax.data import normalization
from noisy_jax.methods import dividemix as dm
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import table_sharding
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import members as members_lib
from noisy_jax.train import method as method_lib
from noisy_jax.train import pair_epochs
from noisy_jax.train import update as update_lib

CLEAN_PROB = "dividemix_clean_prob"
LOSS_HISTORY = "dividemix_loss_history"
AUGMENT_STREAM = 0x646D6978  # the fold of the epoch key that DivideMix's views and mixing draw from


def init_rows(num_rows: int, window: int) -> dict:
  """The method rows before the first division: w = 1 (unused until then), an empty loss history."""
  dtype = precision.float_dtype()
  return {CLEAN_PROB: jnp.ones((num_rows, 2), dtype), LOSS_HISTORY: jnp.zeros((num_rows, 2, int(window)), dtype)}


def per_example_cross_entropy(probs, noisy_labels) -> jax.Array:
  """-log p_y from eval-mode softmax probabilities [.., N, C] and labels [N] (floored at 1e-30: a loss <= 69)."""
  p_y = jnp.take_along_axis(probs, jnp.maximum(noisy_labels, 0)[None, :, None], axis=-1)[..., 0]
  return -jnp.log(jnp.maximum(p_y, 1e-30))


def divide(
  table: label_table_lib.LabelTable, member_probs, *, epoch, warm_up: int, window: int, num_examples: int
) -> label_table_lib.LabelTable:
  """The division after epoch `epoch` (1-based, >= warm_up): member_probs [2, rows, C] are each network's eval-mode
  softmax of the training split (rows >= num_examples: padding of a sharded table, left out of the GMM)."""
  n = int(num_examples)
  rows = table.method_rows
  losses = per_example_cross_entropy(member_probs[:, :n], table.noisy_labels[:n])  # [2, n]
  slot = (epoch - warm_up) % window
  filled = jnp.arange(window) < jnp.minimum(epoch - warm_up + 1, window)
  history = rows[LOSS_HISTORY]
  clean = rows[CLEAN_PROB]
  for m in range(2):
    history = history.at[:n, m, slot].set(dm.normalize_losses(losses[m]))
    averaged = dm.average_loss_history(history[:n, m, :].T, window=window, filled=filled)
    clean = clean.at[:n, m].set(gmm.fit_two_component_gmm(averaged).clean_prob.astype(clean.dtype))
  return table.replace(method_rows={**rows, LOSS_HISTORY: history, CLEAN_PROB: clean})


def _orders(key, labelled, num_labelled_batches: int, num_unlabelled: int, batch: int):
  """(labelled rows [S, b], unlabelled rows [S, b]): a random order of L cut into S full batches, and a random
  order of U cycled over S batches (U empty: rows of L stand in; their Lu weight is 0)."""
  key_l, key_u = jax.random.split(key)
  n = labelled.shape[0]
  order_l = jnp.argsort(jnp.where(labelled, jax.random.uniform(key_l, (n,)), 2.0))
  order_u = jnp.argsort(jnp.where(labelled, 2.0, jax.random.uniform(key_u, (n,))))
  steps = max(num_labelled_batches, 1)
  rows_l = order_l[: steps * batch].reshape(steps, batch)
  positions = jnp.arange(steps * batch) % max(num_unlabelled, 1)
  rows_u = (order_u[positions] if num_unlabelled else order_l[: steps * batch]).reshape(steps, batch)
  return rows_l, rows_u


def _check_batch_size(batch_size: int, num_devices: int) -> None:
  """ValueError unless batch_size splits into labelled and unlabelled halves of equal rows on every device."""
  if batch_size % (2 * num_devices):
    raise ValueError(
      f"DivideMix splits batch_size={batch_size} into labelled and unlabelled halves over "
      f"{num_devices} device(s): it must be divisible by {2 * num_devices}."
    )


def train_forward(net, params, batch_stats, x):
  """Train-mode logits of network `net` (its apply_fn) with `params`, and its running statistics after the pass."""
  logits, updates = net.apply_fn({"params": params, "batch_stats": batch_stats}, x, train=True, mutable=["batch_stats"])
  return logits.astype(precision.at_least(logits.dtype)), updates["batch_stats"]


def _eval_forward(net, x):
  """Eval-mode logits of network `net` (its own parameters and running statistics)."""
  logits = net.apply_fn({"params": net.params, "batch_stats": net.batch_stats}, x, train=False)
  return logits.astype(precision.at_least(logits.dtype))


def mixed_batch(own, other, views, soft_labels, clean_prob, mix_key, *, settings, axis: str, half: int):
  """This device's rows of one network's MixMatch batch (module docstring): (inputs [2 (L + U), ...], targets
  [2 (L + U), C], `own`'s BatchNorm statistics after its four train-mode forwards, z_x1 [L, C] the logits of view 1 of
  the labelled rows). views: (x1, x2, u1, u2), this device's two views of its L labelled and L unlabelled rows (half:
  L times the device count, the global batch's labelled rows);
  soft_labels [L, C] and clean_prob w [L] of its labelled rows; the co-guess reads `other`'s eval-mode logits. The
  mix is of the global batch (all-gathered over `axis`); each device keeps its own rows of [X1, X2, U1, U2]."""
  x1, x2, u1, u2 = views
  local, d = x1.shape[0], lax.axis_index(axis)
  own_forward = functools.partial(train_forward, own)
  eval_forward = functools.partial(_eval_forward, other)
  stats = own.batch_stats
  z_u11, stats = own_forward(own.params, stats, u1)
  z_u12, stats = own_forward(own.params, stats, u2)
  z_u21, z_u22 = eval_forward(u1), eval_forward(u2)
  z_x1, stats = own_forward(own.params, stats, x1)
  z_x2, stats = own_forward(own.params, stats, x2)
  z_u11, z_u12, z_x1, z_x2 = (lax.stop_gradient(z) for z in (z_u11, z_u12, z_x1, z_x2))
  softmax = jax.nn.softmax
  targets_x = dm.refine_labels(soft_labels, clean_prob, (softmax(z_x1) + softmax(z_x2)) / 2, T=settings.temperature)
  targets_u = dm.co_guess(
    jnp.stack([softmax(z_u11), softmax(z_u12)]), jnp.stack([softmax(z_u21), softmax(z_u22)]), T=settings.temperature
  )
  gather = lambda a: lax.all_gather(a, axis, tiled=True)
  mixed, mixed_targets = dm.mixmatch(
    gather(x1), gather(x2), gather(u1), gather(u2), gather(targets_x), gather(targets_u), mix_key, alpha=settings.alpha
  )
  # This device's rows of the global [X1, X2, U1, U2] (each block `half` rows): its labelled rows, then unlabelled.
  blocks = [lax.dynamic_slice_in_dim(a, k * half + d * local, local) for a in (mixed, mixed_targets) for k in range(4)]
  return jnp.concatenate(blocks[:4]), jnp.concatenate(blocks[4:]), stats, z_x1


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
  """`epoch_fn(state, table, images, key, epoch) -> (state, table, metrics)` of DivideMix (module docstring).

  settings: the method's DivideMix settings (DividemixSettings). warmup_epoch_fn: train.make_epoch_fn of
  the warm-up objective over the same mesh and batch size. State and table are donated.
  """
  normalize = normalize or normalization.identity()
  num_devices = mesh.devices.size
  _check_batch_size(batch_size, num_devices)
  half = batch_size // 2
  local = half // num_devices
  steps_per_epoch = math.ceil(num_examples / batch_size)  # of the optimiser's schedule (fit's)

  def network_step(
    state, table, totals, images, rows_l, rows_u, key, step, epoch, num_iter, has_unlabelled, *, m, shard_table: bool
  ):
    d, dtype = lax.axis_index(axis), precision.float_dtype()
    my_l = lax.dynamic_slice_in_dim(rows_l, d * local, local)
    my_u = lax.dynamic_slice_in_dim(rows_u, d * local, local)
    soft, _, read = label_table_lib.read_batch(table, my_l, table_axis=axis if shard_table else None)
    w = read[CLEAN_PROB][:, 1 - m]
    step_key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(key, AUGMENT_STREAM), m), step)
    keys = jax.random.split(step_key, 5)

    def view(rows, view_key):
      x = normalize(jnp.take(images, rows, axis=0))
      return x if augment is None else augment(view_key, x, rows)

    x1, x2, u1, u2 = view(my_l, keys[0]), view(my_l, keys[1]), view(my_u, keys[2]), view(my_u, keys[3])
    own, other = members_lib.take(state, m), members_lib.take(state, 1 - m)
    own_forward = functools.partial(train_forward, own)
    views = (x1, x2, u1, u2)
    inputs, targets, stats, z_x1 = mixed_batch(
      own, other, views, soft, w, keys[4], settings=settings, axis=axis, half=half
    )
    current = (epoch - 1).astype(dtype) + step.astype(dtype) / num_iter  # the original's 0-based
    lamb = dm.linear_rampup(current, settings.warm_up, lambda_u=settings.lambda_u) * has_unlabelled

    def loss_fn(params):
      logits, new_stats = own_forward(params, stats, inputs)
      lx, lu = dm.losses_x_u(
        logits[: 2 * local],
        targets[: 2 * local],
        logits[2 * local :],
        targets[2 * local :],
        lu_reduction=settings.lu_reduction,
        axis_name=axis,
      )
      loss = lx + lamb * lu
      if settings.penalty:
        loss = loss + dm.uniform_prior_penalty(logits, axis_name=axis)
      return loss, (new_stats, None)

    # The schedule at this epoch's rate for every step of it: the count set to the epoch's first step each time
    # (an epoch of more than steps_per_epoch steps would otherwise cross into the next epoch's rate).
    own, loss, _, _ = update_lib.update(own, loss_fn, axis_name=axis, schedule_count=(epoch - 1) * steps_per_epoch)
    state = jax.tree.map(lambda s, o: s.at[m].set(o), state, own)
    # Reported: the loss, and how often view 1 of a labelled row is predicted as its given label (before the update).
    correct = lax.psum(jnp.sum(jnp.argmax(z_x1, -1) == jnp.argmax(soft, -1)).astype(dtype), axis)
    count = jnp.asarray(float(half), dtype)
    return state, table, pair_epochs.add_to_totals(totals, loss, correct, count)

  program = pair_epochs.network_programs(
    network_step, mesh, axis=axis, num_replicated=8, compiler_options=compiler_options
  )

  def epoch_fn(state, table, images, key, epoch, **unused):
    pair_epochs.refuse_inside_epoch("DivideMix", unused)
    epoch_number = int(epoch)
    if epoch_number <= settings.warm_up:
      return warmup_epoch_fn(state, table, images, key, epoch)
    shard_table = table_sharding.is_sharded(table)
    totals = pair_epochs.zero_totals(mesh)
    clean = table.method_rows[CLEAN_PROB]
    for m in range(2):
      labelled = dm.split(clean[:num_examples, 1 - m], p_threshold=settings.p_threshold)
      num_labelled = int(jnp.sum(labelled))
      num_unlabelled = num_examples - num_labelled
      num_batches = num_labelled // half
      rows_l, rows_u = _orders(jax.random.fold_in(key, m), labelled, num_batches, num_unlabelled, half)
      num_iter, has_unlabelled = np.float32(num_batches + 1), np.float32(num_unlabelled > 0)
      for step in range(num_batches):
        step_args = (rows_l[step], rows_u[step], key, np.int32(step), epoch, num_iter, has_unlabelled)
        state, table, totals = program(shard_table)(state, table, totals, np.int32(m), images, *step_args)
    return state, table, epoch_lib.mean_metrics(totals, "train_accuracy_given")

  return epoch_fn


@dataclasses.dataclass(frozen=True)
class DividemixSettings:
  """DivideMix's hyper-parameters (Train_cifar.py's defaults: alpha 4, T 0.5; lambda_u, p_threshold per setting,
  noisy_jax.methods.dividemix.SETTINGS; warm_up 10 epochs on CIFAR-10, 30 on CIFAR-100; loss_window 5 at 90% noise)."""

  warm_up: int = 10
  p_threshold: float = 0.5
  lambda_u: float = 25.0
  alpha: float = dm.MIXUP_ALPHA
  temperature: float = dm.SHARPEN_TEMPERATURE
  loss_window: int = 1
  warmup_penalty: bool = False
  penalty: bool = True
  lu_reduction: str = "mean"


def method(settings: DividemixSettings) -> method_lib.Method:
  """DivideMix as a method (module docstring): its own epoch program (`make_epoch_fn`) after `warm_up` epochs whose
  objective is the sum over the pair of each network's mean cross entropy (plus its mean negative entropy with
  `warmup_penalty`), and the division (`divide`) after every epoch from `warm_up` on."""
  if int(settings.warm_up) < 1:
    raise ValueError(f"warm_up={settings.warm_up!r} must be >= 1 (epochs of cross entropy before the first division).")
  if int(settings.loss_window) < 1:
    raise ValueError(f"loss_window={settings.loss_window!r} must be >= 1 (epochs of losses averaged for the GMM).")
  _checks.check_range("p_threshold", settings.p_threshold, 0.0, 1.0)
  _checks.check_range("lambda_u", settings.lambda_u, 0.0, np.inf)
  _checks.check_range("alpha", settings.alpha, 0.0, np.inf, low_open=True)
  _checks.check_range("temperature", settings.temperature, 0.0, np.inf, low_open=True)
  _checks.check_choice("lu_reduction", settings.lu_reduction, dm.LU_REDUCTIONS)
  window = int(settings.loss_window)

  def member_update(table, member_probs, epoch, num_examples):
    return divide(
      table, member_probs, epoch=epoch, warm_up=int(settings.warm_up), window=window, num_examples=num_examples
    )

  def own_epoch_fn(mesh, warmup_epoch_fn, **options):
    return make_epoch_fn(mesh, settings=settings, warmup_epoch_fn=warmup_epoch_fn, **options)

  def label_evidence(table):
    clean = np.asarray(table.method_rows[CLEAN_PROB], np.float64)
    return label_issues.MethodEvidence(
      what=f"DivideMix clean probability (mean of the two divisions; flagged where neither exceeds "
      f"p_threshold {settings.p_threshold})",
      quality=clean.mean(axis=1),
      is_issue=clean.max(axis=1) <= settings.p_threshold,
    )

  return method_lib.Method(
    name="dividemix",
    objective=dm.pair_warmup_objective(penalty=settings.warmup_penalty),
    init_rows=lambda key, rows, classes: init_rows(rows, window),
    row_update=lambda rows, rows_out, grads: rows_out,
    num_networks=2,
    epoch_end=method_lib.EpochEnd(
      update=member_update, due=lambda epoch: epoch >= int(settings.warm_up), reads="members"
    ),
    program=method_lib.EpochProgram(build=own_epoch_fn),
    label_evidence=label_evidence,
  )


SPEC = spec_lib.MethodSpec(
  name="dividemix",
  fields=tuple(f.name for f in dataclasses.fields(DividemixSettings)),
  build=lambda method_config, context: method(
    DividemixSettings(**{k: method_config[k] for k in method_config.keys() if k != "name"})
  ),
  # 1 warm-up epoch, a division, 2 epochs of DivideMix
  tiny={"dividemix": {"method": {"name": "dividemix", "warm_up": 1, "lambda_u": 25.0}, "batch_size": 64}},
)
