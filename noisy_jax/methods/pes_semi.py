"""PES-semi: PES's progressive stages, then MixMatch on PES's selection (Bai et al., NeurIPS 2021; tmllab/PES@5466238,
PES_semi.py), as a method of stages. The pure pieces are noisy_jax.core.pes's and noisy_jax.methods.dividemix's; the
selection pass is noisy_jax.methods.pes's; the schedule, stage by stage, is docs/pes_schedule.md section 8.

A run is

  'warmup'     cross entropy on every training row, the run's optimiser, `config.warmup` (num_epochs: T1, the
               original's 20 on CIFAR-10, 35 on CIFAR-100);
  'refine1'..  for each entry of `refine_modules` (default: the classifier alone, PES_semi.py:270 renew_layers(0)):
               the previous network with those modules re-initialised and trained alone, cross entropy on every row,
               `config.refine1` (the original: Adam 1e-4, T2 = 5 epochs); clock_epochs 0: the original runs the
               refine inside loop epoch T1 and trains its first MixMatch epoch in that same loop epoch
               (PES_semi.py:269-273), so the MixMatch stage's epoch e is loop epoch T1 + e - 1 (0-based);
  'stage1'     the method's own, MixMatch: the last refine's network, the warm-up's optimiser continued
               (Stage.optimizer_from), the run's num_epochs (the original: 300 - T1) and optimizer.

Each epoch of 'stage1' (`make_epoch_fn`; PES_semi.py:272-273, 167-195, 70-142):
  1. selection, as PES's (noisy_jax.methods.pes `view_predictions`, `select`): p = mean eval-mode softmax of two
     augmented views, confident = argmax p == given label, w_c = mean_k n_k / n_c clipped at `max_class_weight` (3);
  2. batch split (`pes.semi_batch_sizes`): B_u = B / 2 if n_u > n_c else int(n_u / N * B), B_x = B - B_u;
  3. orders (`cycled_batches`): the confident rows in drop_last batches of B_x, the others in batches of B_u, each
     reshuffled whenever it is used up (the original's two shuffled drop_last loaders, re-iterated on StopIteration);
  4. S = `steps_per_epoch` steps (default `pes.semi_steps_per_epoch(B)` = int(50000 / B), 390 at B = 128, whatever
     N), step s (`mixmatch_loss`): x1, x2, u1, u2 the views of the step's rows; targets_x = one-hot given labels;
     targets_u = sharpen((softmax f(u1) + softmax f(u2)) / 2, T), train mode, no gradient (the BatchNorm statistics
     move with the u1 pass, then u2's, then the mixed batch's, as the original's three forwards);
     mixed = `dividemix.mixmatch`([x1, x2, u1, u2]) with Beta(alpha, alpha), alpha = `pes.mixup_alpha` (4, then
     0.75 from loop epoch run_epochs / 2 on); one train-mode forward of the mixed batch;
     L = Lx + lambda_u clip((t - T1) / 16, 0, 1) Lu, t = loop epoch + s / S: Lx = `pes.semi_labelled_loss` (class
     weighted) on the first 2 B_x rows, Lu = `dividemix.losses_x_u`'s mean squared error on the rest; one SGD step
     at the run's learning rate of the loop epoch (`optim.at_epoch`, as pes.py).
The selection is kept in the method rows (pes.SELECTED, pes.GIVEN_PROBABILITY) and is the run's label evidence.

Shapes: B_x and B_u depend on the epoch's split, and each step is compiled for its sizes: the step's row arguments
have shapes [B_x] and [B_u], so jax.jit traces a new program when the split's sizes change and reuses the cached
one when they recur (B_x + B_u = B, so at most B / 2 + 1 programs in a run). Not padded: padding rows would change
the BatchNorm batch statistics of the u1, u2 and mixed passes and the MixMatch permutation.

Devices: the step runs under the mesh's shard_map, as pes.py's, but it is not split over the devices: B_x and B_u
change with every split and seldom divide by D, so every device computes the whole step on all B rows (the losses
are the local means of the whole batch, axis_name None; the gradients and BatchNorm statistics, pmean-ed over the
devices by update.update and by the model's synchronised BatchNorm, are the same on every device). D devices train
what one does, with no data-parallel speed-up.

Where this differs from the original (the pieces' own differences: noisy_jax.core.pes's docstring):
  - no confident row (n_c = 0): the epoch makes no step (the original's empty loader raises); n_u = 0: B_u = 0 and
    the step has no unlabelled rows, Lu = 0 (the original's DataLoader(batch_size=0) raises); n_u > 0 with B_u
    rounding to 0: B_u = 1 (`pes.semi_batch_sizes`, min_unlabelled; the original raises);
  - a set with fewer rows than its batch (n < B_x or n_u < B_u, where the original's drop_last loader is empty and
    raises): one shuffled order of it, cycled, so rows repeat within a batch;
  - the views' and the mixing's randomness come from JAX keys (the original: torch's and NumPy's global generators);
  - as pes.py: after the refines every parameter trains (the original's SGD still holds the old classifier, which
    never trains again: `code_freeze_renewed=True` keeps it as the refine left it);
  - as pes.py: the delivered network is stage1's best-validation (or final) one; the original reports the best test
    accuracy over its epochs;
  - `train_accuracy_given` is the selection's agreement (the fraction of rows whose two-view eval-mode prediction is
    the given label), as the steps see only mixed inputs.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from noisy_jax import models
from noisy_jax.core import _checks
from noisy_jax.core import label_issues
from noisy_jax.core import pes as pes_core
from noisy_jax.core import precision
from noisy_jax.data import normalization
from noisy_jax.methods import dividemix as dm
from noisy_jax.methods import dividemix_train
from noisy_jax.methods import pes
from noisy_jax.methods import plain_loss
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import distributed
from noisy_jax.parallel import table_sharding
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import method as method_lib
from noisy_jax.train import optim
from noisy_jax.train import pair_epochs
from noisy_jax.train import update as update_lib

STEP_STREAM = 0x70737331  # the fold of the epoch key that the MixMatch steps' views and mixing draw from
LABELLED_STREAM = 0x70737332  # the fold of the epoch key that the confident rows' orders draw from
UNLABELLED_STREAM = 0x70737333  # the fold of the epoch key that the other rows' orders draw from
LAMBDA_U = 150.0  # PES_semi.py:37 --lambda_u default (CIFAR; its README runs 15 and 50 for other settings)
# PES_semi.py:270 noisy_refine(model, train_loader, 0, T2): renew_layers(0) renews the classifier alone.
REFINE_MODULES = ((optim.CLASSIFIER,),)


@dataclasses.dataclass(frozen=True)
class PesSemiSettings:
  """PES-semi's settings (module docstring).

  Attributes:
    refine_modules: one entry per refine stage, the top-level modules it re-initialises and trains.
    lambda_u: the full weight of Lu (PES_semi.py:37, 150).
    temperature: T of the unlabelled targets' sharpening (PES_semi.py:36, 0.5).
    alpha: Beta(alpha, alpha) of the mixing until half the run (PES_semi.py:35, 4).
    late_alpha: alpha from loop epoch run_epochs / 2 on (PES_semi.py:72-73, 0.75); None: `alpha` throughout.
    max_class_weight: the class weights' clip (PES_semi.py:192, 3); None: no clip.
    steps_per_epoch: MixMatch steps per epoch; None: int(50000 / batch_size) (PES_semi.py:81).
    code_freeze_renewed: keep the renewed modules as the refines left them (the original's behaviour).
    epochs_before: the run's clock at stage1's start (Context.epochs_before: T1), the ramp's start.
    run_epochs: the run's loop epochs (epochs_before + stage1's num_epochs: the original's 300), whose half switches
      alpha; None only when late_alpha is None.
  """

  refine_modules: tuple[tuple[str, ...], ...] = REFINE_MODULES
  lambda_u: float = LAMBDA_U
  temperature: float = pes_core.SHARPEN_TEMPERATURE
  alpha: float = pes_core.MIXUP_ALPHA
  late_alpha: float | None = pes_core.LATE_MIXUP_ALPHA
  max_class_weight: float | None = pes_core.SEMI_CLASS_WEIGHT_CLIP
  steps_per_epoch: int | None = None
  code_freeze_renewed: bool = False
  epochs_before: int = 0
  run_epochs: int | None = None


def check_settings(settings: PesSemiSettings) -> None:
  """ValueError naming the first setting out of its range."""
  _checks.check_range("lambda_u", settings.lambda_u, 0.0, np.inf)
  _checks.check_range("temperature", settings.temperature, 0.0, np.inf, low_open=True)
  _checks.check_range("alpha", settings.alpha, 0.0, np.inf, low_open=True)
  for name in ("late_alpha", "max_class_weight"):
    value = getattr(settings, name)
    if value is not None and not float(value) > 0:
      raise ValueError(f"{name}={value!r} must be None or > 0.")
  steps = settings.steps_per_epoch
  if steps is not None and (int(steps) != steps or steps < 1):
    raise ValueError(f"steps_per_epoch={steps!r} must be None or an integer >= 1.")
  if settings.run_epochs is not None and int(settings.run_epochs) < 1:
    raise ValueError(f"run_epochs={settings.run_epochs!r} must be None or >= 1.")


# ---------------------------------------------------------------------------------------------------------------
# The epoch's orders.


def cycled_batches(key, rows, batch: int, steps: int) -> np.ndarray:
  """[steps, batch] int32: `rows` in drop_last batches of `batch`, reshuffled at every pass (pass p: the permutation
  of fold_in(key, p)), as a shuffled drop_last DataLoader re-iterated when used up (PES_semi.py:82-93). Fewer rows
  than a batch: one permutation of them, cycled (the original raises). batch 0: [steps, 0].

  Args:
    key: a jax.random key.
    rows: [n] the set's row indices.
    batch: rows per step.
    steps: steps of the epoch.
  """
  rows = np.asarray(rows)
  if batch == 0 or steps == 0:
    return np.zeros((steps, batch), np.int32)
  if rows.size == 0:
    raise ValueError(f"no rows to draw batches of {batch} from.")
  per_pass = rows.size // batch
  if per_pass == 0:
    order = rows[np.asarray(jax.random.permutation(jax.random.fold_in(key, 0), rows.size))]
    return order[np.arange(steps * batch) % rows.size].reshape(steps, batch).astype(np.int32)
  passes = -(-steps // per_pass)
  keys = jax.vmap(lambda p: jax.random.fold_in(key, p))(jnp.arange(passes))
  perms = np.asarray(jax.vmap(lambda k: jax.random.permutation(k, rows.size))(keys))
  batches = rows[perms[:, : per_pass * batch]].reshape(passes * per_pass, batch)
  return batches[:steps].astype(np.int32)


def epoch_orders(key, selected, batch_size: int, steps: int) -> tuple[np.ndarray, np.ndarray]:
  """(labelled rows [S, B_x], unlabelled rows [S, B_u]) of one epoch: the confident rows (`selected`) and the others
  (`cycled_batches`, keys fold_in(key, LABELLED_STREAM) and fold_in(key, UNLABELLED_STREAM)), B_x and B_u from
  `pes.semi_batch_sizes`. Nothing selected: S = 0 (no step)."""
  selected = np.asarray(selected).astype(bool)
  confident, others = np.flatnonzero(selected), np.flatnonzero(~selected)
  if confident.size == 0:
    return np.zeros((0, batch_size), np.int32), np.zeros((0, 0), np.int32)
  b_x, b_u = pes_core.semi_batch_sizes(confident.size, others.size, batch_size)
  rows_x = cycled_batches(jax.random.fold_in(key, LABELLED_STREAM), confident, b_x, steps)
  rows_u = cycled_batches(jax.random.fold_in(key, UNLABELLED_STREAM), others, b_u, steps)
  return rows_x, rows_u


# ---------------------------------------------------------------------------------------------------------------
# One MixMatch step.


def guess_targets(state, batch_stats, u1, u2, *, num_classes: int, temperature: float):
  """(targets_u [B_u, C], batch stats): sharpen(mean over u1, u2 of the train-mode softmax, T), no gradient; the
  BatchNorm statistics moved by the u1 pass, then u2's (PES_semi.py:100-108). B_u = 0: no pass."""
  if u1.shape[0] == 0:
    return jnp.zeros((0, num_classes), precision.float_dtype()), batch_stats
  z1, batch_stats = dividemix_train.train_forward(state, state.params, batch_stats, u1)
  z2, batch_stats = dividemix_train.train_forward(state, state.params, batch_stats, u2)
  probs = pes_core.mean_view_probabilities(lax.stop_gradient(jnp.stack([z1, z2])))
  return lax.stop_gradient(dm.sharpen(probs, T=temperature)), batch_stats


def mixmatch_loss(logits, mixed_targets, *, num_labelled: int, class_weights, ramp, axis_name=None):
  """(L, Lx, Lu) of the mixed batch: Lx = `pes.semi_labelled_loss` on the first 2 B_x rows, Lu = the mean squared
  error of the rest (`dividemix.losses_x_u`, 'mean'), L = Lx + ramp Lu (PES_semi.py:123-132).

  Args:
    logits: [2 B_x + 2 B_u, C] of the mixed batch; mixed_targets: the same shape.
    num_labelled: B_x.
    class_weights: [C].
    ramp: lambda_u times the ramp (`dividemix.linear_rampup`).
    axis_name: the device axis (the means over the global batch).
  """
  cut = 2 * num_labelled
  lx = pes_core.semi_labelled_loss(logits[:cut], mixed_targets[:cut], class_weights=class_weights, axis_name=axis_name)
  _, lu = dm.losses_x_u(logits[:cut], mixed_targets[:cut], logits[cut:], mixed_targets[cut:], axis_name=axis_name)
  return lx + ramp * lu, lx, lu


def _views(images, rows, key, normalize, augment):
  """Two augmented views of `rows` (keys split from `key`)."""
  x = normalize(jnp.take(images, rows, axis=0))
  if augment is None:
    return x, x
  k1, k2 = jax.random.split(key)
  return augment(k1, x, rows), augment(k2, x, rows)


def _check_epoch_setup(settings: PesSemiSettings) -> None:
  """ValueError for bad settings, or an alpha switch without run_epochs."""
  check_settings(settings)
  if settings.late_alpha is not None and settings.run_epochs is None:
    raise ValueError("PES-semi's alpha switch needs run_epochs (the run's loop epochs); got None.")


def make_epoch_fn(
  mesh,
  *,
  settings: PesSemiSettings,
  batch_size: int,
  num_examples: int,
  augment=None,
  compiler_options=None,
  normalize=None,
  axis: str = "batch",
  **unused,
):
  """`epoch_fn(state, table, images, key, epoch) -> (state, table, metrics)` of PES-semi's MixMatch stage (module
  docstring). State and table are donated; a row-sharded table is refused; every device computes the whole step."""
  del unused
  _check_epoch_setup(settings)
  normalize = normalize or normalization.identity()
  steps = settings.steps_per_epoch or pes_core.semi_steps_per_epoch(batch_size)
  schedule_steps = math.ceil(num_examples / batch_size)  # of the optimiser's schedule (fit's)
  predictor = {}

  def network_step(state, table, totals, images, given, rows_x, rows_u, weights, key, step, count, clock, alpha, **kw):
    del kw
    dtype, num_classes = precision.float_dtype(), weights.shape[0]
    keys = jax.random.split(jax.random.fold_in(jax.random.fold_in(key, STEP_STREAM), step), 3)
    x1, x2 = _views(images, rows_x, keys[0], normalize, augment)
    u1, u2 = _views(images, rows_u, keys[1], normalize, augment)
    targets_u, stats = guess_targets(
      state, state.batch_stats, u1, u2, num_classes=num_classes, temperature=settings.temperature
    )
    targets_x = jax.nn.one_hot(jnp.take(given, rows_x), num_classes, dtype=dtype)
    mixed, mixed_targets = dm.mixmatch(x1, x2, u1, u2, targets_x, targets_u, keys[2], alpha=alpha)
    ramp = dm.linear_rampup(clock, settings.epochs_before, pes_core.RAMPUP_LENGTH, lambda_u=settings.lambda_u)

    def loss_fn(params):
      logits, new_stats = dividemix_train.train_forward(state, params, stats, mixed)
      loss, _, _ = mixmatch_loss(
        logits, mixed_targets, num_labelled=rows_x.shape[0], class_weights=weights, ramp=ramp, axis_name=None
      )  # every device holds the whole batch (module docstring, Devices)
      return loss, (new_stats, None)

    before = state.params
    new_state, loss, _, _ = update_lib.update(state, loss_fn, axis_name=axis, schedule_count=count)
    if settings.code_freeze_renewed:
      renewed = [entry for modules in settings.refine_modules for entry in modules]
      classifier = models.classifier_name(state.apply_fn.__self__)
      new_state = new_state.replace(params=pes.keep_renewed(before, new_state.params, renewed, classifier))
    rows = jnp.asarray(float(batch_size), dtype)
    return new_state, table, pair_epochs.add_to_totals(totals, loss, jnp.zeros((), dtype), rows)

  program = pair_epochs.network_programs(
    network_step, mesh, axis=axis, num_replicated=10, compiler_options=compiler_options
  )

  def run_steps(state, table, images, given, selected, weights, key, loop_epoch):
    rows_x, rows_u = epoch_orders(key, selected, batch_size, steps)
    dtype = precision.float_dtype()
    alpha = pes_core.mixup_alpha(loop_epoch, settings.run_epochs, alpha=settings.alpha, late_alpha=settings.late_alpha)
    totals = pair_epochs.zero_totals(mesh)
    for step in range(rows_x.shape[0]):
      clock = np.asarray(loop_epoch + step / steps, dtype)
      replicated = (images, given, rows_x[step], rows_u[step], weights, key, np.int32(step))
      state, table, totals = program(False)(
        state, table, totals, np.int32(0), *replicated, np.int32(loop_epoch * schedule_steps), clock, alpha
      )
    return state, table, totals, rows_x.shape[0], rows_u.shape[1]

  def epoch_fn(state, table, images, key, epoch, **inside):
    pair_epochs.refuse_inside_epoch("PES-semi", inside)
    if table_sharding.is_sharded(table):
      raise ValueError(
        "PES-semi keeps its selection in a replicated label table: set label_table_sharding='replicated'."
      )
    if "predict" not in predictor:
      predictor["predict"] = pes.view_predictions(state.apply_fn, normalize, augment, batch_size, compiler_options)
    given = np.asarray(distributed.host_value(table.noisy_labels))[:num_examples]
    variables = {"params": state.params, "batch_stats": state.batch_stats}
    probs = predictor["predict"](variables, images, jax.random.fold_in(key, pes.SELECTION_STREAM), num_examples)
    selected, weights = pes.select(probs, given, num_classes=table.num_classes, max_weight=settings.max_class_weight)
    selected = np.asarray(selected)
    loop_epoch = settings.epochs_before + int(epoch) - 1
    state, table, totals, num_steps, b_u = run_steps(
      state, table, images, jnp.asarray(given, jnp.int32), selected, weights, key, loop_epoch
    )
    given_prob = jnp.take_along_axis(probs, jnp.asarray(given)[:, None], axis=-1)[:, 0]
    table = record_selection(table, selected, given_prob)
    fraction = jnp.mean(jnp.asarray(selected, jnp.float32))
    metrics = {**epoch_lib.mean_metrics(totals, "train_accuracy_given"), "train_accuracy_given": fraction}
    return (
      state,
      table,
      {**metrics, "pes_selected_fraction": fraction, "pes_steps": num_steps, "pes_unlabelled_batch": b_u},
    )

  return epoch_fn


def record_selection(table, selected, given_prob):
  """`table` with the epoch's selection in its method rows (pes.SELECTED, pes.GIVEN_PROBABILITY)."""
  rows = table.method_rows
  dtype = rows[pes.SELECTED].dtype
  new = {pes.SELECTED: jnp.asarray(selected).astype(dtype), pes.GIVEN_PROBABILITY: given_prob.astype(dtype)}
  return table.replace(method_rows={**rows, **new})


def label_evidence(table) -> label_issues.MethodEvidence:
  """The last epoch's selection as the run's label evidence (an issue: a row not selected)."""
  rows = table.method_rows
  return label_issues.MethodEvidence(
    what="PES-semi selection of the last epoch (the mean-view probability of the given label; an issue when the "
    "prediction disagrees with it)",
    quality=np.asarray(rows[pes.GIVEN_PROBABILITY], np.float64),
    is_issue=np.asarray(rows[pes.SELECTED]) == 0,
  )


# ---------------------------------------------------------------------------------------------------------------
# The method, its stages and its spec.


def refine_modules(method_config) -> tuple[tuple[str, ...], ...]:
  """`method_config.refine_modules` (default REFINE_MODULES: the classifier), checked as pes.refine_modules."""
  return pes.refine_modules({"refine_modules": method_config.get("refine_modules", REFINE_MODULES)})


def stages(method_config) -> tuple[spec_lib.Stage, ...]:
  """The warm-up, one refine per entry of refine_modules (each counting 0 epochs on the run's clock: the first
  MixMatch epoch shares the refine's loop epoch T1), then the MixMatch stage (module docstring)."""
  return pes.progressive_stages(refine_modules(method_config), last_refine_clock=0)


def method(settings: PesSemiSettings) -> method_lib.Method:
  """PES-semi's MixMatch stage as a method: its epoch program (`make_epoch_fn`) and its selection as label evidence."""
  check_settings(settings)

  return method_lib.Method(
    name="pes_semi",
    objective=plain_loss.cross_entropy_objective(),
    init_rows=lambda key, rows, classes: pes.init_rows(rows),
    program=method_lib.own_program(functools.partial(make_epoch_fn, settings=settings)),
    label_evidence=label_evidence,
  )


def _optional(value, cast):
  return None if value is None else cast(value)


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  defaults = PesSemiSettings()
  get = lambda name: method_config.get(name, getattr(defaults, name))
  epochs_before = int(context.epochs_before)
  return method(
    PesSemiSettings(
      refine_modules=refine_modules(method_config),
      lambda_u=float(get("lambda_u")),
      temperature=float(get("temperature")),
      alpha=float(get("alpha")),
      late_alpha=_optional(get("late_alpha"), float),
      max_class_weight=_optional(get("max_class_weight"), float),
      steps_per_epoch=_optional(get("steps_per_epoch"), int),
      code_freeze_renewed=bool(get("code_freeze_renewed")),
      epochs_before=epochs_before,
      run_epochs=_optional(context.num_epochs, lambda n: epochs_before + int(n)),
    )
  )


# The tiny run: 2 warm-up epochs, the classifier refined for 1 (Adam), 2 MixMatch epochs of 4 steps.
_TINY_ADAM = {"name": "adam", "learning_rate": 1e-2, "weight_decay": 0.0, "lr_boundaries": ()}

SPEC = spec_lib.MethodSpec(
  name="pes_semi",
  fields=(
    "refine_modules",
    "lambda_u",
    "temperature",
    "alpha",
    "late_alpha",
    "max_class_weight",
    "steps_per_epoch",
    "code_freeze_renewed",
  ),
  build=_build,
  stages=stages,
  tiny={
    "pes_semi": {
      "method": {"name": "pes_semi", "lambda_u": 15.0, "steps_per_epoch": 4},
      "num_epochs": 2,
      "warmup": {"num_epochs": 2},
      "refine1": {"num_epochs": 1, "optimizer": _TINY_ADAM},
    },
  },
)
