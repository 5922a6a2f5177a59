"""PES, progressive early stopping (Bai et al., NeurIPS 2021; tmllab/PES@5466238, PES_cs.py), as a method of
stages: the pure pieces are noisy_jax.core.pes's; the schedule, stage by stage, is docs/pes_schedule.md.

A run is

  'warmup'     cross entropy on every training row, the run's optimiser, `config.warmup` (its num_epochs: T1);
  'refine1'..  for each entry of `refine_modules`: the previous stage's final network with those top-level modules
               re-initialised from the stage's key (Stage.renew) and trained alone (Stage.trainable; the others
               frozen, their BatchNorm statistics moving in train mode), cross entropy on every row,
               `config.refine1`, .. (the original: Adam 1e-4, T2 = 7 epochs for ResNet stage 4 + classifier, then
               T3 = 5 for the classifier); together one epoch of the run's clock, as the original runs them inside
               its loop epoch T1;
  'stage1'     the method's own: the last refine's final network, the warm-up's optimiser continued (momentum kept,
               zero for the renewed modules, which are new; Stage.optimizer_from), the run's num_epochs (the
               original: 200 - T1 - 1) and optimizer; each epoch (`make_epoch_fn`): the selection, then one pass
               over the selected rows.

The selection at the start of every epoch of 'stage1' (PES_cs.py:179, 82-102): each training row predicted in eval
mode on two random-crop + flip views, p = the mean softmax; selected = argmax p == the given label; class weights
w_c = mean_k n_k / n_c over the selected rows' given classes (no clip). The epoch is a random order of the selected
rows cut into full batches of batch_size (the last partial one dropped, as the original's drop_last loader), each a
step of sum_i w_{y_i} CE_i / sum_i w_{y_i} over the global batch (PyTorch's CrossEntropyLoss(weight=w)).

The learning rate of stage1's epoch e is the run's at loop epoch epochs_before + e - 1 (0-based; Context.epochs_before
= T1 + 1): the schedule's count is set to that epoch's first step (`optim.at_epoch`), so the original's MultiStepLR
[100, 150] on its loop epoch is `lr_boundaries` (100, 150) of the run's optimiser.

The method rows keep the last selection and each row's mean-view probability of its given label
(`SELECTED`, `GIVEN_PROBABILITY`): label_issues.csv's evidence (a row is an issue when it was not selected).

Where the original differs, and the default here (docs/pes_schedule.md sections 0 and 7):
  - after the refines the original's SGD still holds the replaced modules' old parameters, so the renewed modules
    never train again: default, every parameter trains; `code_freeze_renewed=True` keeps the renewed modules as the
    refines left them (their BatchNorm statistics still move);
  - the original scores its noisy validation split with the training augmentation and reports the test accuracy at
    the best validation epoch of the whole loop; here validation is not augmented, and the delivered network is
    stage1's best-validation (or final) one, as every method's.
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
from noisy_jax.core import label_issues
from noisy_jax.core import pes as pes_core
from noisy_jax.core import precision
from noisy_jax.data import normalization
from noisy_jax.methods import plain_loss
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import distributed
from noisy_jax.parallel import table_sharding
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import method as method_lib
from noisy_jax.train import optim
from noisy_jax.train import pair_epochs
from noisy_jax.train import update as update_lib

SELECTED = "pes_selected"
GIVEN_PROBABILITY = "pes_given_probability"
SELECTION_STREAM = 0x70657331  # the fold of the epoch key that the selection's two views draw from
ORDER_STREAM = 0x70657332  # the fold of the epoch key that the epoch's order of the selected rows draws from
# PES_cs.py's refines (networks/ResNet.py renew_layers): ResNet stage 4 + classifier (num_layer 1), then the classifier.
REFINE_MODULES = (("stage4", optim.CLASSIFIER), (optim.CLASSIFIER,))


@dataclasses.dataclass(frozen=True)
class PesSettings:
  """PES's settings (module docstring).

  Attributes:
    refine_modules: one entry per refine stage, the top-level modules it re-initialises and trains (names or name
      prefixes; optim.CLASSIFIER for the model's classifier).
    max_class_weight: None (PES_cs.py: no clip) or the class weights' clip (PES-semi's 3).
    code_freeze_renewed: keep the renewed modules frozen after the refines (the original's behaviour).
    epochs_before: the run's clock at stage1's start (Context.epochs_before: T1 + 1).
  """

  refine_modules: tuple[tuple[str, ...], ...] = REFINE_MODULES
  max_class_weight: float | None = None
  code_freeze_renewed: bool = False
  epochs_before: int = 0


def init_rows(num_rows: int) -> dict:
  """The method rows before the first selection: nothing selected, probability 0."""
  dtype = precision.float_dtype()
  return {SELECTED: jnp.zeros((num_rows,), dtype), GIVEN_PROBABILITY: jnp.zeros((num_rows,), dtype)}


def view_predictions(apply_fn, normalize, augment, batch_size: int, compiler_options):
  """`predict(variables, images, key, rows [R]) -> [R, C]` mean softmax over two augmented views, eval mode."""

  def one_chunk(variables, images, key, rows):
    x = normalize(jnp.take(images, rows, axis=0))
    logits = []
    for view in range(2):
      view_x = x if augment is None else augment(jax.random.fold_in(key, view), x, rows)
      z = apply_fn(variables, view_x, train=False)
      logits.append(z.astype(precision.at_least(z.dtype)))
    return pes_core.mean_view_probabilities(jnp.stack(logits))

  chunk_fn = jax.jit(one_chunk, compiler_options=compiler_options)

  def predict(variables, images, key, num_examples: int):
    chunks = []
    for start in range(0, num_examples, batch_size):
      rows = np.arange(start, start + batch_size) % num_examples  # the last chunk wraps: one compiled shape
      chunks.append(
        chunk_fn(variables, images, key, jnp.asarray(rows, jnp.int32))[: min(batch_size, num_examples - start)]
      )
    return jnp.concatenate(chunks)

  return predict


def select(probs, given, *, num_classes: int, max_weight):
  """(selected [N] bool, class weights [C]) of one epoch: pes.agreement_selection and pes.class_weights."""
  selected = pes_core.agreement_selection(probs, given)
  return selected, pes_core.class_weights(given, selected, num_classes=num_classes, max_weight=max_weight)


def selected_order(key, selected: np.ndarray, batch_size: int) -> np.ndarray:
  """[S, batch_size] rows: a random order of the selected rows cut into S = n_selected // batch_size full batches."""
  rows = np.flatnonzero(selected)
  order = rows[np.asarray(jax.random.permutation(key, rows.shape[0]))] if rows.size else rows
  steps = rows.size // batch_size
  return order[: steps * batch_size].reshape(steps, batch_size)


def make_epoch_fn(
  mesh,
  *,
  settings: PesSettings,
  batch_size: int,
  num_examples: int,
  augment=None,
  compiler_options=None,
  normalize=None,
  axis: str = "batch",
  **unused,
):
  """`epoch_fn(state, table, images, key, epoch) -> (state, table, metrics)` of PES's last stage (module
  docstring). State and table are donated; a row-sharded table is refused."""
  del unused
  normalize = normalize or normalization.identity()
  num_devices = mesh.devices.size
  if batch_size % num_devices:
    raise ValueError(f"PES splits batch_size={batch_size} over {num_devices} device(s): it must be divisible.")
  local = batch_size // num_devices
  steps_per_epoch = math.ceil(num_examples / batch_size)  # of the optimiser's schedule (fit's)
  predictor = {}

  def network_step(state, table, totals, images, given, rows, weights, key, step, count, *, m, shard_table):
    del m, shard_table
    d, dtype = lax.axis_index(axis), precision.float_dtype()
    my_rows = lax.dynamic_slice_in_dim(rows, d * local, local)
    x = normalize(jnp.take(images, my_rows, axis=0))
    if augment is not None:
      x = augment(epoch_lib.augmentation_key(key, step), x, my_rows)  # the shared program's key of the step
    labels = jax.nn.one_hot(jnp.take(given, my_rows), weights.shape[0], dtype=dtype)

    def loss_fn(params):
      logits, updates = state.apply_fn(
        {"params": params, "batch_stats": state.batch_stats}, x, train=True, mutable=["batch_stats"]
      )
      logits = logits.astype(precision.at_least(logits.dtype))
      per_example = pes_core.class_weighted_cross_entropy(logits, labels, class_weights=weights)
      loss = pes_core.weight_normalised_mean(per_example, labels, class_weights=weights, axis_name=axis)
      return loss, (updates["batch_stats"], logits)

    before = state.params
    new_state, loss, logits, _ = update_lib.update(state, loss_fn, axis_name=axis, schedule_count=count)
    if settings.code_freeze_renewed:
      renewed = [entry for modules in settings.refine_modules for entry in modules]
      classifier = models.classifier_name(state.apply_fn.__self__)
      new_state = new_state.replace(params=keep_renewed(before, new_state.params, renewed, classifier))
    correct = lax.psum(jnp.sum(jnp.argmax(logits, -1) == jnp.argmax(labels, -1)).astype(dtype), axis)
    return new_state, table, pair_epochs.add_to_totals(totals, loss, correct, jnp.asarray(float(batch_size), dtype))

  program = pair_epochs.network_programs(
    network_step, mesh, axis=axis, num_replicated=7, compiler_options=compiler_options
  )

  def epoch_fn(state, table, images, key, epoch, **inside):
    pair_epochs.refuse_inside_epoch("PES", inside)
    if table_sharding.is_sharded(table):
      raise ValueError("PES keeps its selection in a replicated label table: set label_table_sharding='replicated'.")
    if "predict" not in predictor:
      predictor["predict"] = view_predictions(state.apply_fn, normalize, augment, batch_size, compiler_options)
    given = np.asarray(distributed.host_value(table.noisy_labels))[:num_examples]
    variables = {"params": state.params, "batch_stats": state.batch_stats}
    probs = predictor["predict"](variables, images, jax.random.fold_in(key, SELECTION_STREAM), num_examples)
    selected, weights = select(probs, given, num_classes=table.num_classes, max_weight=settings.max_class_weight)
    given_prob = jnp.take_along_axis(probs, jnp.asarray(given)[:, None], axis=-1)[:, 0]
    order = selected_order(jax.random.fold_in(key, ORDER_STREAM), np.asarray(selected), batch_size)
    count = (settings.epochs_before + int(epoch) - 1) * steps_per_epoch
    totals = pair_epochs.zero_totals(mesh)
    given_device = jnp.asarray(given, jnp.int32)
    for step in range(order.shape[0]):
      state, table, totals = program(False)(
        state,
        table,
        totals,
        np.int32(0),
        images,
        given_device,
        order[step],
        weights,
        key,
        np.int32(step),
        np.int32(count),
      )
    rows = table.method_rows
    dtype = rows[SELECTED].dtype
    table = table.replace(
      method_rows={**rows, SELECTED: selected.astype(dtype), GIVEN_PROBABILITY: given_prob.astype(dtype)}
    )
    metrics = epoch_lib.mean_metrics(totals, "train_accuracy_given")
    # pes_steps 0 (fewer selected rows than a batch): no step, the loss and accuracy read 0.
    selection = {"pes_selected_fraction": jnp.mean(selected.astype(jnp.float32)), "pes_steps": order.shape[0]}
    return state, table, {**metrics, **selection}

  return epoch_fn


def keep_renewed(before, after, entries, classifier):
  """`after` with the top-level modules that `entries` name (optim.trainable_names) as in `before`."""
  names = optim.trainable_names(before, entries, classifier)
  return {name: before[name] if name in names else tree for name, tree in after.items()}


def refine_modules(method_config) -> tuple[tuple[str, ...], ...]:
  """`method_config.refine_modules` as tuples (default REFINE_MODULES), checked: one or more non-empty entries."""
  entries = method_config.get("refine_modules", REFINE_MODULES)
  entries = tuple(tuple(str(name) for name in modules) for modules in entries)
  if not entries or not all(entries):
    raise ValueError(f"refine_modules={entries!r}: one or more refines, each naming one or more modules.")
  return entries


def progressive_stages(entries, *, last_refine_clock: int) -> tuple[spec_lib.Stage, ...]:
  """The warm-up, one refine per entry of `entries` (the modules it renews and trains alone; the last counting
  `last_refine_clock` epochs on the run's clock, the others 0), then the method's own stage continuing the warm-up's
  optimiser: PES's and PES-semi's schedule (docs/pes_schedule.md)."""
  refines = tuple(
    spec_lib.Stage(
      f"refine{k}",
      key_stream=k,
      build=plain_loss.cross_entropy_stage,
      config_section=f"refine{k}",
      network="previous_final",
      renew=modules,
      trainable=modules,
      clock_epochs=last_refine_clock if k == len(entries) else 0,
    )
    for k, modules in enumerate(entries, start=1)
  )
  warmup = spec_lib.Stage("warmup", key_stream=0, build=plain_loss.cross_entropy_stage, config_section="warmup")
  own = spec_lib.Stage(
    "stage1",
    key_stream=len(entries) + 1,
    network="previous_final",
    optimizer_from="warmup",
    delivers=True,
    scores_labels=True,
  )
  return (warmup, *refines, own)


def stages(method_config) -> tuple[spec_lib.Stage, ...]:
  """The warm-up, one refine per entry of refine_modules (the last counting one epoch on the run's clock), then
  PES's own stage (module docstring)."""
  return progressive_stages(refine_modules(method_config), last_refine_clock=1)


def method(settings: PesSettings) -> method_lib.Method:
  """PES's own stage as a method: its epoch program (`make_epoch_fn`) and its selection as label evidence."""
  if settings.max_class_weight is not None and not settings.max_class_weight > 0:
    raise ValueError(f"max_class_weight={settings.max_class_weight!r} must be None or > 0.")

  def label_evidence(table):
    rows = table.method_rows
    return label_issues.MethodEvidence(
      what="PES selection of the last epoch (the mean-view probability of the given label; an issue when the "
      "prediction disagrees with it)",
      quality=np.asarray(rows[GIVEN_PROBABILITY], np.float64),
      is_issue=np.asarray(rows[SELECTED]) == 0,
    )

  return method_lib.Method(
    name="pes",
    objective=plain_loss.cross_entropy_objective(),
    init_rows=lambda key, rows, classes: init_rows(rows),
    program=method_lib.own_program(functools.partial(make_epoch_fn, settings=settings)),
    label_evidence=label_evidence,
  )


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  max_weight = method_config.get("max_class_weight", None)
  return method(
    PesSettings(
      refine_modules=refine_modules(method_config),
      max_class_weight=None if max_weight is None else float(max_weight),
      code_freeze_renewed=bool(method_config.get("code_freeze_renewed", False)),
      epochs_before=int(context.epochs_before),
    )
  )


# The tiny runs: the MLP's hidden layer and classifier renewed, then its classifier; Adam in the refines.
_TINY_ADAM = {"name": "adam", "learning_rate": 1e-2, "weight_decay": 0.0, "lr_boundaries": ()}
_TINY_SECTIONS = {
  "warmup": {"num_epochs": 2},
  "refine1": {"num_epochs": 1, "optimizer": _TINY_ADAM},
  "refine2": {"num_epochs": 1, "optimizer": _TINY_ADAM},
}
_TINY_REFINES = (("Dense_0", optim.CLASSIFIER), (optim.CLASSIFIER,))

SPEC = spec_lib.MethodSpec(
  name="pes",
  fields=("refine_modules", "max_class_weight", "code_freeze_renewed"),
  build=_build,
  stages=stages,
  tiny={
    "pes": {"method": {"name": "pes", "refine_modules": _TINY_REFINES}, **_TINY_SECTIONS},
    # The original's optimiser after the refines (renewed modules frozen) and PES-semi's clipped class weights.
    "pes_original": {
      "method": {"name": "pes", "refine_modules": _TINY_REFINES, "code_freeze_renewed": True, "max_class_weight": 3.0},
      **_TINY_SECTIONS,
    },
  },
)
