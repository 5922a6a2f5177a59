"""ProMix trained by train.fit (Xiao et al., IJCAI 2023; Justherozen/ProMix, Train_promix.py): the epoch program
and the method, built from the pure blocks of noisy_jax.methods.promix.

The run is fit's loop with a pair of networks (one stacked TrainState), each with ProMix's pseudo head
(config.model.kwargs.pseudo_head = True: noisy_jax.models.pseudo_head) and its moving class priors in
`TrainState.method_state` ({"reliable", "unreliable"}: [2, C], uniform at first), and a label table whose method
rows hold

  promix_selected  [N, 2] bool   network k's class-wise small-loss selection (CSS) for the next epoch

so a checkpoint holds both networks, their priors and their selections. Epoch k of the run is the original's 0-based
epoch e = k - 1; a run of E + 1 epochs is the original's `--num_epochs E` (its loop runs epochs 0 .. E).

Epochs 1 .. pretrain_ep (the original's e < pretrain_ep): both networks trained with cross entropy on the weak view
(the primary head; plus the softmax's negative entropy with `warmup_penalty`, the original's asymmetric-noise rows),
train.make_epoch_fn's program with the warm-up objective.

After every epoch k >= pretrain_ep (`member_update`, its EpochEnd, from each network's eval-mode softmax of the
training split, as the original's eval_train before its epoch k + 1): CSS with rho of e = k.

Later epochs, per step on a batch of B rows (`full_batches`: a shuffled order of the split cut into N // B full
batches, the last partial batch dropped as the original's ProMix-phase loader does), for each network m: a
train-mode forward of the weak and of the strong view (config.augment.strong; two passes, each with its own BatchNorm
statistics, as the original's), the selection (CSS | MHCS, then LGA in the last `start_expand` epochs over the global
batch), the pseudo-labels, the mixup and FMix passes of the selected rows' weak views for the primary and the pseudo
head (each a pass of its own, BatchNorm statistics over the selected rows; lam, permutations and masks over the
global batch from the step's method key), `promix.network_loss`; then one optimiser step of both networks on the sum
of their losses (the schedules' count set to (k - 1) ceil(N / B) + step first, `optim.at_epoch`, so that epoch k
trains at the rate fit's schedule gives it), then the priors from this step's selections. The running BatchNorm
averages of network m chain through its passes in the original's order: weak, strong, mixup, FMix, mixup (pseudo
head), FMix (pseudo head).

Differences from the original besides those of noisy_jax.methods.promix: (1) the warm-up's last batch is padded
with rows of the epoch's order marked invalid (BatchNorm sees them; no loss does, fit's epochs), where the original's
is smaller; (2) in the warm-up the pseudo head has no gradient but this package's coupled weight decay still shrinks
it (PyTorch's SGD skips parameters without a gradient); (3) the networks' projection heads (`head`, whose output no
loss of the original reads) are not built; (4) the strong view is config.augment.strong's (paper configs:
experiments/configs/promix_paper.py, whose default is the original's own RandomAugment pool and Cutout, policy
'promix_randaugment', noisy_jax.core.promix_randaugment).

Evaluation, as the original's "Acc Mean": the mean of the two networks' primary-head logits.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import fmix as fmix_lib
from noisy_jax.core import label_issues
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import precision
from noisy_jax.data import normalization
from noisy_jax.methods import disc
from noisy_jax.methods import dividemix
from noisy_jax.methods import promix
from noisy_jax.methods import spec as spec_lib
from noisy_jax.models import masked_batch_norm
from noisy_jax.models import pseudo_head
from noisy_jax.parallel import table_sharding
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import members as members_lib
from noisy_jax.train import method as method_lib
from noisy_jax.train import pair_epochs
from noisy_jax.train import update as update_lib

SELECTED = "promix_selected"
FMIX_SPECTRA = ("paper", "original")


@dataclasses.dataclass(frozen=True)
class ProMixSettings:
  """ProMix's hyper-parameters: Train_promix.py's argument defaults (run.sh sets rho_range, tau, pretrain_ep and the
  debias strengths per row: experiments/configs/promix_paper.py).

  pretrain_ep: warm-up epochs (10; 30 on CIFAR-100). warmup_ep: the ramp of w, beta and rho (50).
  rho_start, rho_end: CSS's ratio ramp (0.2, 0.6; run.sh: 0.5 or 0.7 constant). tau: MHCS and LGA confidence (0.99).
  threshold: LGA's cap (0.9). start_expand: LGA's last epochs (250). debias_output, debias_pl: t, t' (0.8).
  bias_m: the priors' momentum (0.9999). temperature: T (0.5). mixup_alpha: Beta(4, 4).
  fmix_alpha, fmix_decay_power: FMix's Beta(1, 1) and 1/f^3 (FMix's defaults). fmix_spectrum: 'paper' or
  'original' (noisy_jax.core.fmix: the original's indexing of the spectrum).
  warmup_penalty: the warm-up's confidence penalty (the original's asymmetric-noise rows); penalty_clamps_logits: the
  original's clamp of the logits at 1e-12 inside that penalty.
  """

  pretrain_ep: int = 10
  warmup_ep: int = 50
  rho_start: float = 0.2
  rho_end: float = 0.6
  tau: float = promix.TAU
  threshold: float = promix.THRESHOLD
  start_expand: int = 250
  debias_output: float = 0.8
  debias_pl: float = 0.8
  bias_m: float = promix.BIAS_MOMENTUM
  temperature: float = promix.TEMPERATURE
  mixup_alpha: float = promix.MIXUP_ALPHA
  fmix_alpha: float = 1.0
  fmix_decay_power: float = 3.0
  fmix_spectrum: str = "paper"
  warmup_penalty: bool = False
  penalty_clamps_logits: bool = False


def init_rows(num_rows: int) -> dict:
  """No selection before the first CSS: False [N, 2]."""
  return {SELECTED: jnp.zeros((int(num_rows), 2), bool)}


def with_priors(state, num_classes: int):
  """`state` (a stacked pair) with both networks' priors uniform (promix.initial_priors, stacked [2, C]).

  Raises:
    ValueError: when the networks have no pseudo head (config.model.kwargs.pseudo_head not set).
  """
  if not isinstance(getattr(state.apply_fn, "__self__", None), pseudo_head.WithPseudoHead):
    raise ValueError(
      "ProMix trains a pseudo head beside each network's classifier: set --config.model.kwargs.pseudo_head=True "
      "(noisy_jax.models.pseudo_head)."
    )
  priors = promix.initial_priors(num_classes, precision.float_dtype())
  return state.replace(method_state={k: jnp.stack([v, v]) for k, v in priors.items()})


def css_selection(member_probs, labels, budget, *, num_examples: int):
  """bool [N_rows, 2]: each network's CSS (promix.class_small_loss_selection) from its eval-mode softmax [2, N_rows,
  C] of the training split, losses -log p[y]; rows from num_examples on (a sharded table's padding) never chosen."""
  num_classes = member_probs.shape[-1]
  rows = member_probs.shape[1]
  valid = jnp.arange(rows) < num_examples
  given = jnp.take_along_axis(member_probs, jnp.asarray(labels, jnp.int32)[None, :, None], axis=2)[..., 0]
  chosen = [
    promix.class_small_loss_selection(-jnp.log(given[m]), labels, budget, num_classes=num_classes, valid=valid)
    for m in range(2)
  ]
  return jnp.stack(chosen, axis=1)


def _budgets(settings: ProMixSettings, num_epochs: int, num_examples: int, num_classes: int) -> np.ndarray:
  """int [num_epochs + 1]: CSS's per-class budget before the run's epoch k + 1 (index k, e = k), Python doubles."""
  return np.array(
    [
      promix.css_budget(
        num_examples,
        num_classes,
        promix.selection_ratio(e, rho_start=settings.rho_start, rho_end=settings.rho_end, warmup_ep=settings.warmup_ep),
      )
      for e in range(int(num_epochs) + 1)
    ],
    np.int32,
  )


def full_batches(key, num_examples: int, batch_size: int):
  """(indices [S, B], valid [S, B], all True): a random order of the split (jax.random.permutation with the epoch's
  key) cut into S = N // B full batches, the last partial batch dropped (the original's drop_last)."""
  steps = num_examples // batch_size
  indices = jax.random.permutation(key, num_examples)[: steps * batch_size].reshape(steps, batch_size)
  return indices, jnp.ones_like(indices, bool)


@dataclasses.dataclass(frozen=True)
class _StepContext:
  """What a ProMix step reads besides its arguments: the settings, this device's rows per batch (`local`), fit's
  steps per epoch (the schedules' count), the input functions and the mesh axis."""

  settings: ProMixSettings
  local: int
  fit_steps_per_epoch: int
  normalize: Callable
  augment: Callable | None
  strong_view: Callable
  axis: str


def _check_batches(strong_view, batch_size: int, num_devices: int, num_examples: int) -> None:
  """ValueError unless there is a strong view and batch_size is divisible by the devices and at most num_examples."""
  if strong_view is None:
    raise ValueError(
      "ProMix trains on a weak and a strong view of each example: set config.augment.strong, e.g. "
      "--config.augment.strong=\"{'policy': 'promix_randaugment', 'num_ops': 3}\" (the original's pool and Cutout)."
    )
  if batch_size % num_devices:
    raise ValueError(f"batch_size={batch_size} must be divisible by the number of devices ({num_devices}).")
  if num_examples // batch_size < 1:  # the original's ProMix-phase loader drops the last partial batch
    raise ValueError(
      f"ProMix trains full batches: batch_size={batch_size} is larger than the {num_examples} training examples."
    )


def _forward(state, params, stats, x, mask=None):
  """Both heads' train-mode logits of one network and its running statistics after the pass (BatchNorm statistics
  over the rows of `mask` when given)."""

  def apply():
    (z, h), updates = state.apply_fn(
      {"params": params, "batch_stats": stats}, x, train=True, pseudo_head=True, mutable=["batch_stats"]
    )
    wide = precision.at_least(z.dtype)
    return z.astype(wide), h.astype(wide), updates["batch_stats"]

  if mask is None:
    return apply()
  with masked_batch_norm.statistics_over(mask):
    return apply()


def _gather(a, axis: str):
  """`a` of every device, concatenated along its first axis (the global batch)."""
  return lax.all_gather(a, axis, tiled=True)


def _fmix_pass(key, x, labels, mask, net_forward, *, settings: ProMixSettings, axis: str):
  """FMix of the mask's rows of the global batch (noisy_jax.core.fmix), this device's slice forwarded; the mean of
  lam CE(z, y) + (1 - lam) CE(z, y_partner) over those rows."""
  s = settings
  xs, ys, ms = _gather(x, axis), _gather(labels, axis), _gather(mask, axis)
  key_perm, key_mask = jax.random.split(key)
  partner = disc.subset_permutation(key_perm, ms)
  lam, fmask = fmix_lib.sample_mask(
    key_mask, x.shape[1], x.shape[2], alpha=s.fmix_alpha, decay_power=s.fmix_decay_power, spectrum=s.fmix_spectrum,
    dtype=precision.float_dtype(),
  )  # fmt: skip
  rows = ms.reshape((-1,) + (1,) * (xs.ndim - 1))
  mixed = jnp.where(rows, fmix_lib.mix(xs, fmask, partner), xs).astype(x.dtype)
  start = lax.axis_index(axis) * x.shape[0]
  mine = lambda a: lax.dynamic_slice_in_dim(a, start, x.shape[0])
  logits = net_forward(mine(mixed), mask)
  per_example = lam * promix.hard_cross_entropy(logits, labels) + (1 - lam) * promix.hard_cross_entropy(
    logits, mine(ys[partner])
  )
  return promix.subset_mean(per_example, mask, axis)


def _views(ctx: _StepContext, images, rows, key, step):
  """(weak view, strong view) of this device's rows: the normalised (and augmented) images and the strong policy's,
  both keyed by the step's augmentation key."""
  codes = jnp.take(images, rows, axis=0)
  augment_key = epoch_lib.augmentation_key(key, step)
  x_w = ctx.normalize(codes)
  if ctx.augment is not None:
    x_w = ctx.augment(augment_key, x_w, rows)
  x_s = ctx.strong_view(augment_key, codes, rows).astype(x_w.dtype)
  return x_w, x_s


def _both_heads(state, params, x_w, x_s):
  """(heads, stats, probs), one entry per network: both heads' logits of the weak and the strong view, the running
  statistics after the two passes, the weak view's softmax (no gradient)."""
  heads, stats, probs = [], [], []
  for k in range(2):
    own_params = members_lib.take(params, k)
    z_w, h_w, st = _forward(state, own_params, members_lib.take(state.batch_stats, k), x_w)
    z_s, h_s, st = _forward(state, own_params, st, x_s)
    heads.append({"z_w": z_w, "z_s": z_s, "h_w": h_w, "h_s": h_s})
    stats.append(st)
    probs.append(jax.nn.softmax(lax.stop_gradient(z_w), axis=-1))
  return heads, stats, probs


def _selections(ctx: _StepContext, d, heads, probs, priors, css, labels, ok, guessing):
  """(selected, pseudo), one entry per network: its selection (CSS | MHCS, or LGA over the global batch when
  `guessing`; d: this device's index) and its pseudo-labels."""
  s, axis, local = ctx.settings, ctx.axis, ctx.local
  selected, pseudo = [], []
  for k in range(2):
    pi = members_lib.take(priors, k)
    kept = (css[:, k] | promix.matched_high_confidence(probs[k], labels, s.tau)) & ok
    guessed = jnp.argmax(promix.debias_pl(lax.stop_gradient(heads[k]["z_w"]), pi["reliable"], s.debias_pl), -1)
    pseudo.append(promix.pseudo_labels(labels, guessed, kept))
    guess = promix.label_guessing(
      _gather(kept, axis), _gather(probs[0], axis), _gather(probs[1], axis), _gather(ok, axis), tau=s.tau,
      threshold=s.threshold,
    )  # fmt: skip
    guess = lax.dynamic_slice_in_dim(guess, d * local, local)
    selected.append(jnp.where(guessing, guess, kept))
  return selected, pseudo


def _mixed_losses(ctx: _StepContext, key, x_w, pseudo, selected, num_classes: int, head_forward) -> dict:
  """The mixup and FMix losses of one network's selected rows for the primary head ("mix", "fmix") and the pseudo
  head ("mix_ph", "fmix_ph"), in that order (each pass chains the network's BatchNorm statistics)."""
  keys = jax.random.split(key, 4)
  mixed = {}
  for head, (mix_name, fmix_name) in enumerate((("mix", "fmix"), ("mix_ph", "fmix_ph"))):
    net_forward = lambda x, mask, head=head: head_forward(x, mask, head)
    mixed[mix_name] = disc.mixup_pass(
      keys[2 * head], x_w, pseudo, selected, net_forward, ctx.axis,
      num_classes=num_classes, alpha=ctx.settings.mixup_alpha,
    )  # fmt: skip
    mixed[fmix_name] = _fmix_pass(
      keys[2 * head + 1], x_w, pseudo, selected, net_forward, settings=ctx.settings, axis=ctx.axis
    )
  return mixed


def _network_loss(
  ctx: _StepContext, state, own_params, stats, pi, heads, x_w, pseudo, selected, ok, key, *, weight, beta, num_classes
):
  """(promix.network_loss of one network, its running statistics after its mixup and FMix passes): its parameters,
  running statistics after the weak and strong passes, priors, heads, pseudo-labels and selection."""
  s = ctx.settings
  chain = [stats]

  def head_forward(x, mask, head):
    z, h, st = _forward(state, own_params, chain[-1], x, mask)
    chain.append(st)
    return promix.debias_output(h if head else z, pi["reliable"], s.debias_output)

  mixed = _mixed_losses(ctx, key, x_w, pseudo, selected, num_classes, head_forward)
  loss, _ = promix.network_loss(
    heads, mixed, pseudo, selected, ok & ~selected, pi,
    strength=s.debias_output, strength_pl=s.debias_pl, temperature=s.temperature,
    weight=weight, beta=beta, axis_name=ctx.axis,
  )  # fmt: skip
  return loss, chain[-1]


def _updated_priors(ctx: _StepContext, priors, probs, selected, ok):
  """Both networks' priors after this step's selections, stacked (promix.updated_prior)."""
  s, axis = ctx.settings, ctx.axis
  new_priors = []
  for k in range(2):
    pi = members_lib.take(priors, k)
    unselected = ok & ~selected[k]
    new_priors.append(
      {
        "reliable": promix.updated_prior(pi["reliable"], probs[k], selected[k], s.bias_m, axis),
        "unreliable": promix.updated_prior(pi["unreliable"], probs[k], unselected, s.bias_m, axis),
      }
    )
  return members_lib.stack(new_priors)


def _network_step(
  state, table, totals, images, indices, valid, key, step, epoch, weight, beta, guessing, *, m, shard_table, ctx
):
  """One ProMix step of both networks (module docstring) on this device's slice of the batch `indices`."""
  del m  # both networks train in every step
  axis, local = ctx.axis, ctx.local
  d = lax.axis_index(axis)
  rows = lax.dynamic_slice_in_dim(indices, d * local, local)
  ok = lax.dynamic_slice_in_dim(valid, d * local, local)
  soft, _, read = label_table_lib.read_batch(table, rows, table_axis=axis if shard_table else None)
  css = read[SELECTED]
  labels = jnp.argmax(soft, axis=-1).astype(jnp.int32)
  x_w, x_s = _views(ctx, images, rows, key, step)
  method_key = epoch_lib.method_key(key, step)
  priors = state.method_state

  def loss_fn(params):
    heads, stats, probs = _both_heads(state, params, x_w, x_s)
    selected, pseudo = _selections(ctx, d, heads, probs, priors, css, labels, ok, guessing)
    total = 0.0
    for k in range(2):
      loss, stats[k] = _network_loss(
        ctx, state, members_lib.take(params, k), stats[k], members_lib.take(priors, k), heads[k], x_w, pseudo[k],
        selected[k], ok, jax.random.fold_in(method_key, k), weight=weight, beta=beta, num_classes=soft.shape[-1],
      )  # fmt: skip
      total = total + loss
    return total, (members_lib.stack(stats), (probs, selected))

  count = (epoch - 1) * ctx.fit_steps_per_epoch + step
  state, loss, (probs, selected), _ = update_lib.update(state, loss_fn, axis_name=axis, pair=True, schedule_count=count)
  state = state.replace(method_state=_updated_priors(ctx, priors, probs, selected, ok))
  dtype = precision.float_dtype()
  mean_probs = (probs[0] + probs[1]) / 2
  correct = lax.psum(jnp.sum((jnp.argmax(mean_probs, -1) == labels) & ok).astype(dtype), axis)
  count = lax.psum(jnp.sum(ok).astype(dtype), axis)
  return state, table, pair_epochs.add_to_totals(totals, loss / 2, correct, count)


def _epoch_scalars(settings: ProMixSettings, k: int, last_epoch: int):
  """(weight, beta, guessing) of the run's epoch k (the original's e = k - 1; last_epoch: its E)."""
  e = k - 1
  weight = np.float32(promix.consistency_weight(e, settings.warmup_ep))
  beta = np.float32(promix.unreliable_weight(e, settings.warmup_ep, settings.debias_pl))
  guessing = np.bool_(e > last_epoch - settings.start_expand)
  return weight, beta, guessing


def make_epoch_fn(
  mesh,
  *,
  settings: ProMixSettings,
  num_epochs: int,
  batch_size: int,
  num_examples: int,
  warmup_epoch_fn,
  augment=None,
  strong_view=None,
  compiler_options=None,
  normalize=None,
  axis: str = "batch",
):
  """`epoch_fn(state, table, images, key, epoch) -> (state, table, metrics)` of ProMix (module docstring).

  settings: ProMixSettings. num_epochs: the run's epochs (E + 1). warmup_epoch_fn: train.make_epoch_fn of the warm-up
  objective over the same mesh and batch size. strong_view: views.make_strong_view's (required). State and table
  are donated.
  """
  num_devices = mesh.devices.size
  _check_batches(strong_view, batch_size, num_devices, num_examples)
  num_steps = num_examples // batch_size  # the original's ProMix-phase loader drops the last partial batch
  ctx = _StepContext(
    settings=settings,
    local=batch_size // num_devices,
    fit_steps_per_epoch=math.ceil(num_examples / batch_size),  # of the optimiser's schedule (fit's)
    normalize=normalize or normalization.identity(),
    augment=augment,
    strong_view=strong_view,
    axis=axis,
  )
  program = pair_epochs.network_programs(
    functools.partial(_network_step, ctx=ctx), mesh, axis=axis, num_replicated=9, compiler_options=compiler_options
  )
  batches = jax.jit(lambda key: full_batches(key, num_examples, batch_size))
  last_epoch = int(num_epochs) - 1  # the original's E

  def epoch_fn(state, table, images, key, epoch, **unused):
    pair_epochs.refuse_inside_epoch("ProMix", unused)
    k = int(epoch)
    if k <= settings.pretrain_ep:
      return warmup_epoch_fn(state, table, images, key, epoch)
    weight, beta, guessing = _epoch_scalars(settings, k, last_epoch)
    shard_table = table_sharding.is_sharded(table)
    totals = pair_epochs.zero_totals(mesh)
    indices, valid = batches(key)
    for step in range(num_steps):
      state, table, totals = program(shard_table)(
        state, table, totals, np.int32(0), images, indices[step], valid[step], key, np.int32(step), np.int32(k),
        weight, beta, guessing,
      )  # fmt: skip
    return state, table, epoch_lib.mean_metrics(totals, "train_accuracy_given")

  return epoch_fn


def method(settings: ProMixSettings, *, num_classes: int, num_epochs: int) -> method_lib.Method:
  """ProMix as a method (module docstring): its own epoch program after `pretrain_ep` warm-up epochs of cross entropy
  on both networks, CSS after every epoch from `pretrain_ep` on.

  Args:
    settings: ProMixSettings.
    num_classes: C (the priors' size).
    num_epochs: the run's epochs (E + 1 for the original's --num_epochs E): LGA's epochs count back from its end.
  """
  promix.check_settings(**dataclasses.asdict(settings))
  _checks.check_choice("fmix_spectrum", settings.fmix_spectrum, FMIX_SPECTRA)
  if int(num_epochs) < 1:
    raise ValueError(f"ProMix needs the run's epochs: num_epochs={num_epochs!r} must be >= 1.")

  def member_update(table, member_probs, epoch, num_examples):
    budgets = jnp.asarray(_budgets(settings, num_epochs, num_examples, member_probs.shape[-1]))
    budget = budgets[jnp.minimum(epoch, budgets.shape[0] - 1)]
    selected = css_selection(member_probs, table.noisy_labels, budget, num_examples=num_examples)
    return label_table_lib.with_method_rows(table, {SELECTED: selected})

  def own_epoch_fn(mesh, warmup_epoch_fn, **options):
    return make_epoch_fn(mesh, settings=settings, num_epochs=num_epochs, warmup_epoch_fn=warmup_epoch_fn, **options)

  def label_evidence(table):
    selected = np.asarray(table.method_rows[SELECTED], bool)
    return label_issues.MethodEvidence(
      what="ProMix class-wise small-loss selection (the fraction of the two networks that select the example; "
      "flagged where neither does)",
      quality=selected.mean(axis=1),
      is_issue=~selected.any(axis=1),
    )

  return method_lib.Method(
    name="promix",
    objective=dividemix.pair_warmup_objective(
      penalty=settings.warmup_penalty, clamp_logits=settings.penalty_clamps_logits
    ),
    init_rows=lambda key, rows, classes: init_rows(rows),
    row_update=lambda rows, rows_out, grads: rows_out,
    num_networks=2,
    epoch_end=method_lib.EpochEnd(
      update=member_update, due=lambda epoch: epoch >= int(settings.pretrain_ep), reads="members"
    ),
    program=method_lib.EpochProgram(build=own_epoch_fn, init_state=lambda state: with_priors(state, num_classes)),
    label_evidence=label_evidence,
    strong_view=True,
  )


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  if context.num_epochs is None:
    raise ValueError("method 'promix' needs the run's epochs: registry.make(..., num_epochs=E).")
  fields = {k: method_config[k] for k in method_config.keys() if k != "name"}
  return method(ProMixSettings(**fields), num_classes=context.num_classes, num_epochs=context.num_epochs)


SPEC = spec_lib.MethodSpec(
  name="promix",
  fields=tuple(f.name for f in dataclasses.fields(ProMixSettings)),
  build=_build,
  # 1 warm-up epoch, CSS, 2 epochs of ProMix with label guessing in the last; the pseudo head on the MLP; a strong
  # view of Cutout only (the policies' own tests: tests/test_autoaugment.py).
  tiny={
    "promix": {
      "method": {"name": "promix", "pretrain_ep": 1, "warmup_ep": 2, "start_expand": 1, "rho_start": 0.5,
                 "rho_end": 0.5, "tau": 0.9},
      "model.kwargs": {"hidden_sizes": (64,), "pseudo_head": True},
      "augment": {"crop_padding": 0, "flip": False, "strong": {"policy": "none", "cutout": 4}},
      "batch_size": 64,
    }
  },
)  # fmt: skip
