"""The epoch loop of one stage: `fit` trains, evaluates, applies the method's table policy and checkpoints."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable

from absl import logging
import jax
import jax.numpy as jnp
from jax.sharding import Mesh
import numpy as np

from noisy_jax import models
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import metrics as metrics_lib
from noisy_jax.data import bad_files
from noisy_jax.data import inputs as inputs_lib
from noisy_jax.parallel import distributed
from noisy_jax.parallel import streaming
from noisy_jax.parallel import table_sharding
from noisy_jax.parallel import xla_options
from noisy_jax.parallel.mesh import AXIS  # pylint: disable=g-importing-member
from noisy_jax.parallel.mesh import replicate  # pylint: disable=g-importing-member
from noisy_jax.train import checkpoint as checkpoint_lib
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import members as members_lib
from noisy_jax.train import method as method_lib
from noisy_jax.train import optim
from noisy_jax.train import predict as predict_lib
from noisy_jax.train import settings as settings_lib
from noisy_jax.train import state as state_lib
from noisy_jax.train import table_metrics as table_metrics_lib
from noisy_jax.train import views as views_lib


def _member_map(settings: settings_lib.FitSettings, mesh: Mesh, input_shape) -> str:
  """How a two-network step maps over its pair: settings.member_map ('auto': noisy_jax.train.members)."""
  return members_lib.resolve_member_map(
    settings.member_map, mesh.devices.flat[0].platform, models.resolve(settings.model_name, input_shape)
  )


def _strong_view(settings: settings_lib.FitSettings, method, *, normalize, weak):
  """The strong view of a method that trains on two (`Method.strong_view`), from settings.strong_augment
  (noisy_jax.train.views); None for the others. ValueError when the settings and the method disagree."""
  strong = views_lib.make_strong_view(settings.strong_augment, normalize=normalize, weak=weak)
  if method.strong_view and strong is None:
    raise ValueError(
      f"method {method.name!r} trains on a weak and a strong view of each example, but config.augment.strong asks "
      "for none: set it, e.g. --config.augment.strong=\"{'policy': 'autoaugment_cifar10', 'cutout': 16}\" (SOP+'s)."
    )
  if strong is not None and not method.strong_view:
    raise ValueError(
      f"config.augment.strong={strong.config!r} is set, but method {method.name!r} trains on one view of each "
      "example and would ignore it: remove it (or choose a method that uses it, e.g. SOP+: sop with "
      "ratio_consistency > 0)."
    )
  return strong


def _compiler_options(settings: settings_lib.FitSettings, model, mesh: Mesh) -> dict[str, str | bool] | None:
  """xla_options.compiler_options of `model` on `mesh`'s platform, GPU determinism as settings.gpu_deterministic."""
  return xla_options.compiler_options(model, mesh.devices.flat[0].platform, deterministic=settings.gpu_deterministic)


def table_sharded(
  settings: settings_lib.FitSettings, *, num_examples: int, num_classes: int, history_length: int, num_devices: int
) -> bool:
  """table_sharding.use_sharded for a run of `settings` (its label_table_sharding and label_table_budget_mib)."""
  return table_sharding.use_sharded(
    settings.label_table_sharding,
    num_examples=num_examples,
    num_classes=num_classes,
    history_length=history_length,
    num_devices=num_devices,
    budget_mib=settings.label_table_budget_mib,
  )


def _to_python(tree):
  return jax.tree.map(lambda x: x.item() if hasattr(x, "item") and np.ndim(x) == 0 else x, jax.device_get(tree))


@dataclasses.dataclass(frozen=True)
class _EpochRun:
  """What every epoch of one `fit` trains with: the stage's name, method, settings and compiled programs, the
  dataset and its resident images, the given and clean training labels, the data-order key, steps per epoch."""

  stage: str
  method: method_lib.Method
  settings: settings_lib.FitSettings
  programs: Any
  dataset: Any
  images: Any
  given: Any
  clean: Any
  order_key: jax.Array
  steps_per_epoch: int

  def train(self, epoch: int, state, table, progress: "Progress", inside_epoch: dict):
    """(state, table, progress) after epoch `epoch`: trained, evaluated (test, validation; the training split when
    eval_train or the method reads it), the table's epoch end applied, its record appended to progress.history."""
    start = time.perf_counter()
    programs, dataset, method = self.programs, self.dataset, self.method
    state, table, train_metrics = programs.epoch_fn(
      state,
      table,
      self.images,
      jax.random.fold_in(self.order_key, epoch),
      jnp.asarray(epoch, jnp.int32),
      **inside_epoch,
    )
    variables = state_lib.variables_of(state)
    record = {"stage": self.stage, "epoch": epoch, **_to_python(train_metrics)}  # _to_python waits for the epoch
    record["steps_per_second"] = self.steps_per_epoch / (time.perf_counter() - start)
    record.update(_evaluation(programs.predict, variables, dataset))
    progress = progress.seen(record, variables)
    train_probs = None
    if self.settings.eval_train or method.reads_train_probs:  # fitted, memorised (metrics.train_split_metrics)
      train_probs = programs.predict(variables, dataset.x_train)
      record.update(metrics_lib.train_split_metrics(train_probs, self.given, self.clean))
    table = _epoch_end(method, programs, table, epoch, variables, progress.best_variables, train_probs, dataset)
    num_examples = dataset.x_train.shape[0]
    record.update(table_metrics_lib.table_metrics(table, self.clean, method, num_examples=num_examples))
    record["seconds"] = time.perf_counter() - start
    progress.history.append(record)
    return state, table, progress


def fit(
  *,
  model,
  method: method_lib.Method,
  table: label_table_lib.LabelTable,
  dataset,
  clean_train_labels,
  settings: settings_lib.FitSettings,
  key: jax.Array,
  mesh: Mesh,
  stage: str = "",
  log_fn: Callable | None = None,
  checkpoint_dir: str | None = None,
  on_resume: Callable[[list[dict]], None] | None = None,
  init_variables: Callable | None = None,
  init_opt_state: Callable | None = None,
  skipped_files: bad_files.Log | None = None,
):
  """Trains one network with one method; returns (state, table, per-epoch history list, best-val variables).

  checkpoint_dir: None (no checkpoints) or this stage's checkpoint directory (noisy_jax.train.checkpoint). If it holds a
  checkpoint, training resumes after its epoch (seed, key and config_json must match, else ValueError); `on_resume` is
  then called once with the restored per-epoch records, and `log_fn` only sees the epochs trained here. A checkpoint
  is written every `settings.checkpoint_every` epochs and after the last epoch, keeping the newest
  `settings.keep_checkpoints`; the save starts before `log_fn` sees the epoch's record and orbax
  finishes it in the background while the next epoch trains (all or nothing; `fit` waits for it before returning).

  settings: the stage's train.settings.FitSettings (the experiment layer reads them from its config): input,
  input_budget_mib, normalization (how `dataset` reaches the devices: noisy_jax.data.inputs's input_mode and
  normalizer), batch_size, num_epochs, optimizer (noisy_jax.train.optim; the cosine's period defaults to this
  stage's num_epochs), eval_train (also score the training split each epoch), augment (training-time augmentation,
  noisy_jax.train.views.weak_augment; evaluation never augments), gpu_deterministic, label_table_sharding ('auto' |
  'replicated' | 'sharded': 'auto' splits the table iff >1 device and its N x (C (1 + H) x 4 + 8) bytes exceed
  label_table_budget_mib; noisy_jax.parallel.table_sharding has the cost per device). A sharded table is padded on
  the devices (one process or several) and stays split: metrics are reduced on the devices, checkpoints hold each
  device's rows (a run may resume on another table sharding: the rows are then read on the host and placed again),
  and only the returned table is its N real rows on the host.
  `table` is then a host table, or one already split with table_sharding.create (used as it is, and donated).
  init_variables: None (random initialisation) or a map of each network's fresh variables to its starting ones
  (pretrained weights; state.create_train_state). A resumed run takes its variables from the checkpoint.
  init_opt_state: None (the optimiser starts afresh) or a map of the fresh optimiser state to the starting one (an
  earlier stage's, continued). A resumed run takes it from the checkpoint.
  skipped_files: where the training files that streaming skips are recorded (a streamed x_train with
  on_bad_file='skip', noisy_jax.data.bad_files: each epoch meets them again, the log lists them once and raises
  once more than max_bad_fraction of the dataset's files are skipped); None: a log in memory, for that check only.
  """
  init_key, order_key = jax.random.split(key)
  num_examples = dataset.x_train.shape[0]
  plan = _input_plan(settings, dataset, mesh)
  steps_per_epoch = math.ceil(num_examples / settings.batch_size)
  classifier = models.classifier_name(model)  # what optimizer.backbone_lr_scale leaves at the full lr
  layers = models.layer_index(model)  # what optimizer.layer_decay scales by
  tx = optim.make_optimizer(
    settings.optimizer, steps_per_epoch, settings.num_epochs, classifier=classifier, layers=layers
  )
  state = state_lib.create_train_state(
    model, init_key, dataset.x_train.shape[1:], tx, num_networks=method.num_networks, init_variables=init_variables
  )
  if init_opt_state is not None:
    state = state.replace(opt_state=init_opt_state(state.opt_state))
  state = replicate(method.program.init_state(state), mesh)  # with its own program's part (ELR+'s weight averages)
  shard_table, place_table, table, given = _placed_table(settings, table, mesh, num_examples)
  images = None if plan.streamed else replicate(jnp.asarray(np.asarray(dataset.x_train)), mesh)
  programs = _programs(model, method, mesh, settings, dataset, plan, num_examples=num_examples, shard_table=shard_table)
  clean = None if clean_train_labels is None else np.asarray(clean_train_labels)
  progress = Progress(best_val=-1.0, best_variables=None, history=[])
  saving, resumed = None, None
  if checkpoint_dir:
    saving, resumed = _open_checkpoints(
      checkpoint_dir,
      stage,
      plan.every_steps,
      settings=settings,
      key=key,
      state=state,
      table=table,
      num_examples=num_examples,
      mesh=mesh,
      place_table=place_table,
    )
  position = None
  if resumed is not None:
    state, table, position = resumed.state, resumed.table, resumed.position
    progress = Progress(best_val=resumed.best_val, best_variables=resumed.best_variables, history=resumed.history)
    if on_resume is not None:
      on_resume(list(progress.history))
  on_skipped = _skip_recorder(dataset, plan.streamed, skipped_files)
  first_epoch = progress.history[-1]["epoch"] + 1 if progress.history else 1
  epochs = _EpochRun(stage, method, settings, programs, dataset, images, given, clean, order_key, steps_per_epoch)
  for epoch in range(first_epoch, settings.num_epochs + 1):
    inside_epoch = _inside_epoch(on_skipped, position, saving, progress, epoch, steps_per_epoch)
    position = None
    state, table, progress = epochs.train(epoch, state, table, progress, inside_epoch)
    if saving is not None and checkpoint_lib.is_due(epoch, every=saving.every, num_epochs=settings.num_epochs):
      _save(saving.manager, epoch, state, table, progress, saving.meta)
    if log_fn is not None:
      log_fn(progress.history[-1])
  return _finish(saving, state, table, progress, shard_table=shard_table, num_examples=num_examples)


@dataclasses.dataclass(frozen=True)
class InputPlan:
  """How one fit reads its data: streamed or resident, normalised how, with how many host workers, in which epoch
  mode, with mid-epoch checkpoints every `every_steps` steps (0: none)."""

  streamed: bool
  normalize: Callable
  workers: int
  epoch_mode: str
  every_steps: int


def _input_plan(settings: settings_lib.FitSettings, dataset, mesh: Mesh) -> InputPlan:
  """The InputPlan of `settings` (fit's docstring) for `dataset` on `mesh`; ValueError for mid-epoch checkpoints of
  a 'scan' epoch."""
  mode, budget_mib = settings.input, settings.input_budget_mib
  streamed = inputs_lib.input_mode(dataset, mode=mode, budget_mib=budget_mib) == "streaming"
  workers = settings.input_workers
  epoch_mode = epoch_lib.resolve_epoch_mode(settings.epoch_mode, mesh.devices.flat[0].platform, streamed=streamed)
  every_steps = settings.checkpoint_every_steps
  if every_steps and epoch_mode != "steps":
    raise ValueError(
      f"checkpoint_every_steps={every_steps} saves inside an epoch, which epoch_mode 'scan' runs as "
      "one program: use epoch_mode='steps', or checkpoint_every_steps=0."
    )
  return InputPlan(
    streamed=streamed,
    normalize=inputs_lib.normalizer(dataset, settings.normalization),
    workers=streaming.default_workers() if workers < 0 else workers,
    epoch_mode=epoch_mode,
    every_steps=every_steps,
  )


def _placed_table(settings: settings_lib.FitSettings, table, mesh: Mesh, num_examples: int):
  """(sharded, place_table, the table on the mesh, the given labels [N] on the host): a table built in place
  (table_sharding.create) is used as it is."""
  shard_table = table_sharded(
    settings,
    num_examples=num_examples,
    num_classes=table.num_classes,
    history_length=table.history_length,
    num_devices=mesh.devices.size,
  )
  place_table = (lambda t: table_sharding.shard(t, mesh, AXIS)) if shard_table else (lambda t: replicate(t, mesh))
  if shard_table and table_sharding.is_sharded(table):
    return shard_table, place_table, table, np.asarray(distributed.host_value(table.noisy_labels))[:num_examples]
  given = np.asarray(jax.device_get(table.noisy_labels))
  return shard_table, place_table, place_table(table), given


@dataclasses.dataclass(frozen=True)
class Programs:
  """The compiled pieces of one fit: the epoch program, the evaluation, and the method's epoch-end update (None
  without one) with `predict_each` (one network's evaluation) for an update that reads each network's softmax."""

  epoch_fn: Callable
  predict: Callable
  epoch_end: Callable | None = None
  predict_each: Callable | None = None


def _programs(
  model,
  method,
  mesh: Mesh,
  settings: settings_lib.FitSettings,
  dataset,
  plan: InputPlan,
  *,
  num_examples: int,
  shard_table: bool,
):
  """The Programs of `method` on `mesh` for a run of `settings` (fit's docstring)."""
  options = _compiler_options(settings, model, mesh)
  augment = views_lib.weak_augment(settings.augment)
  strong_view = _strong_view(settings, method, normalize=plan.normalize, weak=augment)
  if method.program.own and plan.every_steps:  # (its streamed input: make_method_epoch_fn refuses it)
    raise ValueError(
      f"method {method.name!r} runs its own epoch program, one epoch per call: set checkpoint_every_steps=0."
    )
  epoch_fn = epoch_lib.make_method_epoch_fn(
    method,
    mesh,
    batch_size=settings.batch_size,
    num_examples=num_examples,
    strong_view=strong_view,
    augment=augment,
    compiler_options=options,
    normalize=plan.normalize,
    mode=plan.epoch_mode,
    shard_table=shard_table,
    source=dataset.x_train if plan.streamed else None,
    workers=plan.workers,
    member_map=(_member_map(settings, mesh, dataset.x_train.shape[1:]) if method.num_networks > 1 else "loop"),
  )
  predict_fn = predict_lib.make_predict_fn(
    model, normalize=plan.normalize, compiler_options=options, num_networks=method.num_networks
  )
  programs = Programs(epoch_fn=epoch_fn, predict=predict_lib.make_evaluate(predict_fn, workers=plan.workers))
  if method.epoch_end is None:
    return programs
  epoch_end = jax.jit(
    method.epoch_end.update,
    static_argnames=("num_examples",),
    out_shardings=table_sharding.shardings(mesh, AXIS, sharded=True) if shard_table else None,
  )
  predict_each = None
  if method.epoch_end.reads == "members":  # each network's predictions (DivideMix, ProMix)
    predict_each = predict_lib.make_evaluate(
      predict_lib.make_predict_fn(model, normalize=plan.normalize, compiler_options=options), workers=plan.workers
    )
  return dataclasses.replace(programs, epoch_end=epoch_end, predict_each=predict_each)


@dataclasses.dataclass(frozen=True)
class Progress:
  """What fit's epochs have given so far: the best validation accuracy (-1 before any), its variables (None before
  any), and the per-epoch records (appended to in place)."""

  best_val: float
  best_variables: Any
  history: list

  def seen(self, record: dict, variables) -> Progress:
    """This progress after an epoch whose record (with its val_accuracy, when there is a validation split) and
    variables are these."""
    if "val_accuracy" in record and record["val_accuracy"] > self.best_val:
      # A copy: the state's buffers are donated next epoch.
      return dataclasses.replace(
        self, best_val=record["val_accuracy"], best_variables=jax.tree.map(jnp.copy, variables)
      )
    return self


def _evaluation(predict: Callable, variables, dataset) -> dict:
  """The epoch's test accuracy (and the mean log-margin of the test examples it gets right) and validation accuracy,
  for the splits the dataset has."""
  record = {}
  if dataset.x_test.shape[0] > 0:
    test_probs = predict(variables, dataset.x_test)
    record["test_accuracy"] = float(metrics_lib.accuracy(test_probs, dataset.y_test))
    margins = np.asarray(metrics_lib.log_margins(test_probs, dataset.y_test))
    if (margins > 0).any():  # the confidence gap of the test examples the network gets right
      record["test_margin_correct"] = float(np.mean(margins[margins > 0]))
  if dataset.x_val.shape[0] > 0:
    record["val_accuracy"] = float(metrics_lib.accuracy(predict(variables, dataset.x_val), dataset.y_val))
  return record


def _epoch_end(method, programs: Programs, table, epoch: int, variables, best_variables, train_probs, dataset):
  """The table after epoch `epoch`'s update (Method.epoch_end, when due), given the softmax it reads
  (EpochEnd.probs); zero rows for the padding of a row-sharded table."""
  if programs.epoch_end is None or not method.epoch_end.due(epoch):
    return table
  num_examples = dataset.x_train.shape[0]

  def members():
    return jnp.stack(
      [programs.predict_each(members_lib.take(variables, m), dataset.x_train) for m in range(method.num_networks)]
    )

  probs = method.epoch_end.probs(
    current=lambda: train_probs,
    best=None if best_variables is None else (lambda: programs.predict(best_variables, dataset.x_train)),
    members=members,
  )
  if probs is not None and table.num_examples != num_examples:  # a padded (sharded) table: zero rows for the padding
    padding = [(0, 0)] * probs.ndim
    padding[-2] = (0, table.num_examples - num_examples)
    probs = jnp.pad(probs, padding)
  return programs.epoch_end(table, probs, jnp.asarray(epoch, jnp.int32), num_examples=num_examples)


@dataclasses.dataclass(frozen=True)
class Saving:
  """fit's checkpoints: the epoch checkpoints' manager, the mid-epoch one's (None without checkpoint_every_steps),
  the meta every checkpoint holds, the epochs between checkpoints and the steps between mid-epoch ones."""

  manager: Any
  step_manager: Any
  meta: dict
  every: int
  every_steps: int


def _open_checkpoints(
  checkpoint_dir: str, stage: str, every_steps: int, *, settings: settings_lib.FitSettings, key, **resume_args
):
  """(Saving, Resumed or None): the managers of `checkpoint_dir` and what they restore (the newest of the epoch and
  the mid-epoch checkpoints when the latter is past the former). resume_args: `_resume`'s state, table,
  num_examples, mesh, place_table."""
  checkpoint_every = settings.checkpoint_every
  if checkpoint_every < 1:
    raise ValueError(f"checkpoint_every={checkpoint_every!r} must be >= 1 when checkpoint_dir is given.")
  manager = checkpoint_lib.open_manager(checkpoint_dir, keep=settings.keep_checkpoints)
  meta = {
    "stage": stage,
    "seed": settings.seed,
    "key_data": checkpoint_lib.key_data(key),
    "config": dict(settings.config_json),
    "table_rows": resume_args["table"].num_examples,  # N, or N_pad when sharded: the layout saved
  }
  resumed = _resume(manager, checkpoint_dir, settings=settings, key=key, **resume_args)
  step_manager = None
  if every_steps:  # mid-epoch checkpoints: the newest wins when it is past the newest epoch checkpoint
    steps_dir = checkpoint_lib.steps_dir(checkpoint_dir)
    step_manager = checkpoint_lib.open_manager(steps_dir, keep=1)
    inside = _resume(step_manager, steps_dir, settings=settings, key=key, **resume_args)
    done = len(resumed.history) if resumed is not None else 0
    if inside is not None and inside.position["epoch"] > done:
      resumed = inside
  return Saving(manager, step_manager, meta, checkpoint_every, every_steps), resumed


def _save(manager, step: int, state, table, progress: Progress, meta: dict, position: dict | None = None) -> None:
  """One checkpoint at `step` of `manager`: state, table, best-validation variables (the current ones before any)
  and the progress in its meta (with the position inside an epoch, for a mid-epoch one)."""
  best = progress.best_variables
  meta = {**meta, "best_val": progress.best_val, "has_best": best is not None, "history": progress.history}
  if position is not None:
    meta["position"] = position
  checkpoint_lib.save(
    manager,
    step,
    state=state,
    table=table,
    best_variables=state_lib.variables_of(state) if best is None else best,
    meta=meta,
  )


def _save_inside(saving: Saving, progress: Progress, epoch: int, steps_per_epoch: int) -> Callable:
  """The epoch program's `after_step`: a mid-epoch checkpoint every `saving.every_steps` steps of epoch `epoch`
  (not after its last step: the epoch checkpoint follows)."""

  def save_inside(steps_done, state, table, totals):
    if steps_done % saving.every_steps or steps_done == steps_per_epoch:
      return
    position = {"epoch": epoch, "step": steps_done, "totals": _to_python(totals)}
    step = (epoch - 1) * steps_per_epoch + steps_done
    _save(saving.step_manager, step, state, table, progress, saving.meta, position)

  return save_inside


def _inside_epoch(on_skipped, position, saving, progress, epoch: int, steps_per_epoch: int) -> dict:
  """The epoch program's keyword arguments for epoch `epoch`: on_skipped, the first step and totals when resumed
  inside it (`position`), after_step with mid-epoch checkpoints."""
  inside = {} if on_skipped is None else {"on_skipped": on_skipped}
  if position is not None:  # resumed inside this epoch: its first steps are trained
    inside.update(start=int(position["step"]), totals=position["totals"])
  if saving is not None and saving.step_manager is not None:
    inside["after_step"] = _save_inside(saving, progress, epoch, steps_per_epoch)
  return inside


def _skip_recorder(dataset, streamed: bool, skipped_files: bad_files.Log | None) -> Callable | None:
  """The epoch program's `on_skipped` for a streamed x_train that skips bad files (fit's docstring), else None."""
  if not (streamed and getattr(dataset.x_train, "skips", False)):
    return None
  if skipped_files is None:
    skipped_files = bad_files.Log(
      dataset.skipped_files, num_files=bad_files.num_files(dataset), max_bad_fraction=dataset.x_train.max_bad_fraction
    )

  def on_skipped(rows):
    skipped_files.add(bad_files.met_while_streaming(dataset, rows))

  return on_skipped


def _finish(saving: Saving | None, state, table, progress: Progress, *, shard_table: bool, num_examples: int):
  """fit's result once its epochs are trained: the managers closed (their saves finished), the best-validation
  variables (the final ones without a validation split), a sharded table's real rows on the host."""
  if saving is not None:
    for manager in (saving.manager, saving.step_manager):
      if manager is not None:
        manager.close()
  best_variables = progress.best_variables
  if best_variables is None:
    best_variables = jax.tree.map(jnp.copy, state_lib.variables_of(state))
  if shard_table:  # its real rows, on the host (table_sharding.host_table: the one gather of the run)
    table = table_sharding.host_table(table, num_examples)
  return state, table, progress.history, best_variables


@dataclasses.dataclass(frozen=True)
class Resumed:
  """What a checkpoint restores: the state and table placed on the mesh, the best-validation variables (None when
  none was kept) and accuracy, the epochs' records so far, and the position inside an epoch (None for a checkpoint
  written at an epoch's end, else {"epoch", "step", "totals"})."""

  state: state_lib.TrainState
  table: label_table_lib.LabelTable
  best_variables: Any
  best_val: float
  history: list
  position: dict | None


def _resume(
  manager,
  directory: str,
  *,
  settings: settings_lib.FitSettings,
  key: jax.Array,
  state: state_lib.TrainState,
  table: label_table_lib.LabelTable,
  num_examples: int,
  mesh: Mesh,
  place_table: Callable,
) -> Resumed | None:
  """The newest checkpoint in `manager` (at `directory`), checked against this run's `settings` (seed, config_json)
  and `key` and placed on `mesh`; None when there is none. `state` and `table` are the fresh ones, placed
  (structure, sharding and given labels), of the table's `num_examples` real rows.

  A table saved in this run's layout (meta `table_rows` equal to the placed table's rows) is read straight into its
  sharding; one of another layout (replicated, or padded for another device count) is read on the host, its
  `num_examples` real rows kept and placed again with `place_table`.
  """
  epoch = checkpoint_lib.latest_epoch(manager)
  if epoch is None:
    return None
  meta = checkpoint_lib.restore_meta(manager, epoch)
  checkpoint_lib.check_compatible(
    meta, directory=directory, seed=settings.seed, config_json=settings.config_json, key=key
  )
  saved_rows = int(meta.get("table_rows", num_examples))
  same_layout = saved_rows == table.num_examples
  restored_state, restored_table, best = checkpoint_lib.restore_arrays(
    manager,
    epoch,
    state=state,
    table=table if same_layout else table_sharding.host_layout(table, saved_rows),
    best_variables=state_lib.variables_of(state),
  )
  given = lambda t: np.asarray(distributed.host_value(t.noisy_labels))[:num_examples]
  if not np.array_equal(given(restored_table), given(table)):
    raise ValueError(
      f"Cannot resume from {directory}: its label table's given labels differ from this run's "
      f"(a different dataset or noise); use another workdir."
    )
  logging.info("Resuming %s from %s after epoch %d.", meta.get("stage") or "training", directory, epoch)
  # Fresh device buffers (replicate never aliases; a sharded restore is fresh): the epoch program donates them.
  if not (same_layout and table_sharding.is_sharded(restored_table)):
    restored_table = place_table(table_sharding.unpad(restored_table, num_examples))
  return Resumed(
    state=replicate(restored_state, mesh),
    table=restored_table,
    best_variables=replicate(best, mesh) if meta["has_best"] else None,
    best_val=float(meta["best_val"]),
    history=list(meta["history"]),
    position=meta.get("position"),
  )
