"""Sweeps: many members of one config (seeds x numeric hyper-parameters) trained together in one program.

A sweep config is a single-run config plus `config.sweep`:

  grid      ((dotted field path, (values...)), ...), e.g. (('method.loss_kwargs.q', (0.1, 0.5)),
            ('noise.rate', (0.2, 0.4))); the members are the product of the value tuples x seeds
  seeds     the seeds of every grid point, e.g. (0, 1, 2)
  member_map              'auto' | 'vmap' | 'loop': how the members share the compiled program (below)
  max_members_per_program  0 (all) or the most members trained at once (memory / compile-size bound)
  sequential  True: run the same members one after another with runs.run_single (for timing comparisons)
  table_keys, plot_keys   the summary metrics of the grid tables and of the figure (sweep.png)

What may differ between members (everything else, i.e. the program's structure, is shared):
  seed                       the init key, the data-order key and the noise draw (exactly as runs.run_single)
  noise.rate                 only changes the member's noisy labels (drawn on the host by inputs.noisy_training_labels)
  method.loss_kwargs.NAME    method 'loss': a numeric keyword of the loss (GCE's q, SCE's alpha/beta, ...)
  method.q, method.k         truncated Lq
  method.log_end             encouraging loss
  method.alpha, method.beta  Joint Optimization stage 1 (stage 2 is not run in sweeps: set method.stage2=False)
The method's hyper-parameters are traced: each member's Method is built inside the mapped function from its own
scalars (noisy_jax.methods accepts traced values), so one compiled step serves every member and every grid point.

The program: member m's TrainState and LabelTable are row m of stacked pytrees ([M, ...] leaves); the training
images are shared (not mapped). An epoch maps the per-member train step (step_lib.train_step, axis_name=None) over the
members, and so do evaluation and the label-table updates (truncated Lq pruning with each member's own
best-validation parameters, Joint Optimization's relabelling). Member m reproduces runs.run_single of its config up
to float rounding (tests/test_sweep.py). Two ways to map the members:

  'vmap'  jax.vmap over the members: one dispatch per batch (or per epoch with epoch_mode 'scan') for all of them.
          What accelerators want, and the MLP on CPU.
  'loop'  the same compiled per-member step, called once per member with the member's index as an argument (it
          reads row m of the stacked state and writes it back in place). XLA's CPU backend runs a vmapped
          convolution (a different kernel per member) as a grouped convolution: a vmapped small-CNN step measured
          ~4x slower per member than the plain one on a 2-core CPU (~2x with convolutions rewritten as patch
          matmuls), so a sweep of convolutional networks on CPU wins only what sequential runs waste: one
          compilation instead of one per run (step, evaluation, init), no per-run setup.
  'auto'  'loop' on CPU for any model but the MLP, 'vmap' otherwise.

Not in sweeps: model selection on noisy validation labels (validation_labels 'noisy' is refused), checkpointing
(`checkpoint_every` is ignored), several devices (the sweep runs on the first local
device), Joint Optimization's stage 2. The train split is scored (train_accuracy_* records) only with eval_train or
when a table update needs it, not every epoch as loop.fit does for truncated Lq.

  python -m experiments.train --config=experiments/configs/q_sweep.py --workdir=workdirs/q_sweep
  python -m experiments.train --config=experiments/configs/q_sweep.py --config.sweep.sequential=True ...
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import time
from typing import Callable

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from noisy_jax import models
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import metrics as metrics_lib
from noisy_jax.data import normalization
from noisy_jax.experiment import inputs
from noisy_jax.experiment import pretrained
from noisy_jax.experiment import reporting
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import sweep_grid
from noisy_jax.methods import registry
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import members as members_lib
from noisy_jax.train import method as method_lib
from noisy_jax.train import optim
from noisy_jax.train import predict as predict_lib
from noisy_jax.train import state as state_lib
from noisy_jax.train import step as step_lib
from noisy_jax.train import table_metrics
from noisy_jax.train import views as views_lib


def _method_builder(method_dict: dict, num_classes: int) -> Callable:
  """`build_method(hypers) -> Method`: the member's Method from the config's method (a plain dict), its swept
  hyper-parameters (dotted paths under `method.`) traced scalars."""

  def build_method(hypers) -> method_lib.Method:
    member_method = copy.deepcopy(method_dict)  # a plain dict: ConfigDict refuses to turn a float into a tracer
    for path, value in hypers.items():
      sweep_grid.set_path(member_method, path.split(".", 1)[1], value)
    return registry.make(ml_collections.ConfigDict(member_method), num_classes=num_classes)

  return build_method


def _member_step_fn(build_method: Callable, normalize: Callable, augment) -> Callable:
  """`member_step(carry, hypers, images, indices, valid, key, step, epoch) -> carry`: one train step of one member
  on its batch `step` (indices [S, B] of this member's epoch order); carry: (state, table, totals)."""

  def member_step(carry, hypers, images, indices, valid, key, step, epoch):
    state, table, totals = carry
    rows, ok = indices[step], valid[step]
    x = normalize(jnp.take(images, rows, axis=0))
    if augment is not None:
      x = augment(epoch_lib.augmentation_key(key, step), x, rows)
    state, table, step_metrics = step_lib.train_step(
      state, table, x, rows, ok, method=build_method(hypers), epoch=epoch, axis_name=None
    )
    return state, table, jax.tree.map(jnp.add, totals, step_metrics)

  return member_step


def _scan_epoch_fn(member_step: Callable, batches: Callable, num_steps: int, member_map: str, options) -> Callable:
  """Programs.epoch of epoch mode 'scan': each member's epoch one lax.scan over its steps."""

  def member_epoch(carry, hypers, images, key, epoch):
    indices, valid = batches(key)
    body = lambda c, step: (member_step(c, hypers, images, indices, valid, key, step, epoch), None)
    return jax.lax.scan(body, carry, jnp.arange(num_steps, dtype=jnp.int32))[0]

  program = members_lib.member_program(member_epoch, (0, None, 0, None), member_map, options)

  def epoch_fn(states, tables, hypers, images, keys, epoch):
    totals = members_lib.stack([epoch_lib.zero_totals()] * keys.shape[0])
    return program((states, tables, totals), hypers, images, keys, epoch)

  return epoch_fn


def _steps_epoch_fn(member_step: Callable, batches: Callable, num_steps: int, member_map: str, options) -> Callable:
  """Programs.epoch of epoch mode 'steps': one call of the members' step program per step."""
  program = members_lib.member_program(member_step, (0, None, 0, 0, 0, None, None), member_map, options)
  batches_fn = jax.jit(jax.vmap(batches))

  def epoch_fn(states, tables, hypers, images, keys, epoch):
    indices, valid = batches_fn(keys)
    parts = program.split((states, tables, members_lib.stack([epoch_lib.zero_totals()] * keys.shape[0])))
    for step in range(num_steps):
      parts = program(parts, hypers, images, indices, valid, keys, np.int32(step), epoch)
    return program.join(parts)

  return epoch_fn


def _predict_fn(model, normalize: Callable, member_map: str, options) -> Callable:
  """Programs.predict: `predict(variables [M], images [N, ...]) -> probabilities [M, N, C]` (NumPy)."""
  if member_map == "vmap":  # XLA options go to the top-level program only (jax refuses them on a nested jit)
    predict_one = predict_lib.make_predict_fn(model, normalize=normalize)
    predict_all = jax.jit(jax.vmap(predict_one, in_axes=(0, None)), compiler_options=options)
    return lambda variables, x: np.asarray(predict_all(variables, x))
  predict_one = predict_lib.make_predict_fn(model, normalize=normalize, compiler_options=options)
  take = jax.jit(members_lib.take)
  return lambda variables, x: np.stack(
    [np.asarray(predict_one(take(variables, np.int32(m)), x)) for m in range(jax.tree.leaves(variables)[0].shape[0])]
  )


def _init_fn(config, model, input_shape, num_steps: int) -> Callable:
  """Programs.init: state_lib.create_train_state of every init key [M] in one compiled call (same values as one by
  one, where each call compiles anew: ~2-4 s per member on a 2-core CPU)."""
  tx = optim.make_optimizer(
    settings_lib.optimizer_settings(config.optimizer),
    num_steps,
    int(config.num_epochs),
    classifier=models.classifier_name(model),
    layers=models.layer_index(model),
  )
  init_variables = pretrained.initializer(config)  # every member starts from the same weights, if any
  return jax.jit(
    jax.vmap(lambda key: state_lib.create_train_state(model, key, input_shape, tx, init_variables=init_variables))
  )


class Programs:
  """The compiled pieces of one sweep (built once, reused by every chunk of members of the same size).

  Attributes:
    init(keys [M]) -> states: the members' initial TrainStates.
    epoch(states, tables, hypers, images, keys [M], epoch) -> (states, tables, totals [M]): one training epoch.
    predict(variables [M], images [N, ...]) -> probabilities [M, N, C] (NumPy).
    update_table(tables, probs [M, N, C] or None, hypers) -> tables: the method's table policy.
    best(best, current, improved [M]) -> best: keeps each member's best-validation variables.
  """

  def __init__(
    self, config, model, method: method_lib.Method, *, input_shape, num_examples: int, member_map: str, normalize=None
  ):
    epoch_mode = epoch_lib.resolve_epoch_mode(settings_lib.fit_field(config, "epoch_mode"), jax.devices()[0].platform)
    member_map = members_lib.resolve_member_map(
      member_map, jax.devices()[0].platform, models.resolve(config.model.name, input_shape)
    )
    self.epoch_mode, self.member_map = epoch_mode, member_map
    batch_size = int(config.batch_size)
    normalize = normalize or normalization.identity()
    build_method = _method_builder(config.method.to_dict(), model.num_classes)
    member_step = _member_step_fn(
      build_method, normalize, views_lib.weak_augment(settings_lib.augment_fields(config.get("augment")))
    )
    batches = functools.partial(epoch_lib.epoch_batches, num_examples=num_examples, batch_size=batch_size)
    num_steps = math.ceil(num_examples / batch_size)
    options = settings_lib.compiler_options(config, model, jax.devices()[0].platform)
    epoch_fn = _scan_epoch_fn if epoch_mode == "scan" else _steps_epoch_fn
    self.epoch = epoch_fn(member_step, batches, num_steps, member_map, options)
    self.predict = _predict_fn(model, normalize, member_map, options)
    self.epoch_end = None
    if method.epoch_end is not None:
      self.epoch_end = jax.jit(
        jax.vmap(
          lambda table, probs, hypers, epoch: build_method(hypers).epoch_end.update(table, probs, epoch, num_examples),
          in_axes=(0, 0, 0, None),
        )
      )
    self.init = _init_fn(config, model, input_shape, num_steps)
    self.best = jax.jit(
      lambda best, current, improved: jax.tree.map(
        lambda b, c: jnp.where(improved.reshape((-1,) + (1,) * (c.ndim - 1)), c, b), best, current
      )
    )


# ---------------------------------------------------------------------------------------------------------------
# Training a chunk of members


def _member_hypers(members: list[sweep_grid.Member], fields) -> dict[str, jax.Array]:
  """The traced method hyper-parameters of the members, {dotted path: [M] float32}."""
  return {
    field: jnp.asarray([m.point[i] for m in members], jnp.float32)
    for i, field in enumerate(fields)
    if field.startswith("method.")
  }


def _member_starts(members: list[sweep_grid.Member], dataset, method: method_lib.Method):
  """(tables [M], init keys [M], data-order keys [M], noise reports) of the members, as runs.run_single draws them:
  PRNGKey(seed) splits into (stage 1, noise, stage 2); stage 1 into (init, data order)."""
  tables, init_keys, order_keys, reports = [], [], [], []
  for member in members:
    stage1_key, noise_key, _ = jax.random.split(jax.random.PRNGKey(member.seed), 3)
    noisy, report = inputs.noisy_training_labels(member.config, dataset, noise_key)
    init_key, order_key = jax.random.split(stage1_key)
    tables.append(label_table_lib.create(noisy, dataset.num_classes, history_length=method.history_length))
    init_keys.append(init_key)
    order_keys.append(order_key)
    reports.append(report)
  return members_lib.stack(tables), jnp.stack(init_keys), jnp.stack(order_keys), reports


def _train_records(epoch: int, totals: dict, num_members: int, steps_per_second: float) -> list[dict]:
  """Each member's record of a training epoch: its mean loss and accuracy on the given labels ([M] totals)."""
  return [
    {
      "stage": "stage1",
      "epoch": epoch,
      "train_loss": float(totals["loss"][m] / totals["count"][m]),
      "train_accuracy_given": float(totals["correct"][m] / totals["count"][m]),
      "steps_per_second": steps_per_second,
    }
    for m in range(num_members)
  ]


def _add_evaluation(records: list[dict], programs: Programs, variables, dataset) -> None:
  """Adds each member's test accuracy (and mean log-margin of its correct test predictions) and validation accuracy
  to its record, for the splits the dataset has."""
  has_val, has_test = dataset.x_val.shape[0] > 0, dataset.x_test.shape[0] > 0
  test_probs = programs.predict(variables, dataset.x_test) if has_test else None
  val_probs = programs.predict(variables, dataset.x_val) if has_val else None
  for m, record in enumerate(records):
    if has_test:
      record["test_accuracy"] = float(metrics_lib.accuracy(test_probs[m], dataset.y_test))
      margins = np.asarray(metrics_lib.log_margins(test_probs[m], dataset.y_test))
      if (margins > 0).any():
        record["test_margin_correct"] = float(np.mean(margins[margins > 0]))
    if has_val:
      record["val_accuracy"] = float(metrics_lib.accuracy(val_probs[m], dataset.y_val))


def _update_best(programs: Programs, records: list[dict], variables, best_val: np.ndarray, best_variables):
  """(best_val, best_variables) after this epoch: each member's best validation accuracy and its variables (a copy
  of the first epoch's at first)."""
  val = np.array([r["val_accuracy"] for r in records])
  improved = val > best_val
  best_val = np.where(improved, val, best_val)
  if best_variables is None:
    return best_val, jax.tree.map(jnp.copy, variables)
  return best_val, programs.best(best_variables, variables, jnp.asarray(improved))


def _score_train_split(programs: Programs, records: list[dict], variables, dataset, given, clean) -> np.ndarray:
  """The members' probabilities [M, N, C] on the training split; adds each member's train-split metrics (against its
  noisy labels `given[m]` and the clean labels, None when unknown) to its record."""
  train_probs = programs.predict(variables, dataset.x_train)
  for m, record in enumerate(records):
    record.update(metrics_lib.train_split_metrics(train_probs[m], given[m], clean))
  return train_probs


def _epoch_end(programs: Programs, method, tables, hypers, epoch: int, *, current, best_variables, x_train):
  """The tables after the method's epoch-end update (EpochEnd.probs: `current()` gives the members' softmax of the
  training split, best_variables the best-validation members' or None)."""
  best = None if best_variables is None else (lambda: programs.predict(best_variables, x_train))
  probs = method.epoch_end.probs(current=current, best=best)
  return programs.epoch_end(tables, probs, hypers, jnp.asarray(epoch, jnp.int32))


def _add_table_metrics(records: list[dict], tables, clean, method) -> None:
  """Adds each member's label-table metrics (table_metrics.table_metrics) to its record."""
  host_tables = jax.device_get(tables)
  for m, record in enumerate(records):
    record.update(table_metrics.table_metrics(members_lib.take(host_tables, m), clean, method))


def train_members(
  config,
  members: list[sweep_grid.Member],
  *,
  dataset,
  model,
  programs: Programs,
  fields,
  log_fn: Callable[[int, list[dict]], None] | None = None,
):
  """Trains `members` together; returns (states, tables, histories, noise reports) with member axis [M].

  Each member's keys, noisy labels and initial state are those of runs.run_single with its config: the root key
  PRNGKey(seed) splits into (stage 1, noise, stage 2); stage 1 splits into (init, data order); the labels come
  from inputs.noisy_training_labels. `log_fn(epoch, records)` sees every epoch's per-member records.
  """
  method = registry.make(config.method, num_classes=dataset.num_classes)
  num_examples = dataset.x_train.shape[0]
  steps_per_epoch = math.ceil(num_examples / config.batch_size)
  tables, init_keys, order_keys, reports = _member_starts(members, dataset, method)
  states = programs.init(init_keys)
  hypers = _member_hypers(members, fields)
  images = jnp.asarray(np.asarray(dataset.x_train))
  clean = np.asarray(dataset.y_train) if runs.clean_labels_known(config) else None
  given = [np.asarray(r) for r in np.asarray(tables.noisy_labels)]
  has_val = dataset.x_val.shape[0] > 0
  best_val = np.full(len(members), -1.0)
  best_variables = None
  histories = [[] for _ in members]
  fold_in = jax.jit(jax.vmap(jax.random.fold_in, in_axes=(0, None)))
  for epoch in range(1, int(config.num_epochs) + 1):
    start = time.perf_counter()
    states, tables, totals = programs.epoch(
      states, tables, hypers, images, fold_in(order_keys, epoch), jnp.asarray(epoch, jnp.int32)
    )
    totals = jax.device_get(totals)
    train_seconds = time.perf_counter() - start
    variables = {"params": states.params, "batch_stats": states.batch_stats}
    records = _train_records(epoch, totals, len(members), steps_per_epoch * len(members) / train_seconds)
    _add_evaluation(records, programs, variables, dataset)
    if has_val:
      best_val, best_variables = _update_best(programs, records, variables, best_val, best_variables)
    train_probs = None
    if settings_lib.fit_field(config, "eval_train"):
      train_probs = _score_train_split(programs, records, variables, dataset, given, clean)
    if programs.epoch_end is not None and method.epoch_end.due(epoch):
      scored = train_probs  # (bound now: the thunk below runs in this epoch)

      def current(scored=scored, records=records, variables=variables):
        return scored if scored is not None else _score_train_split(programs, records, variables, dataset, given, clean)

      tables = _epoch_end(
        programs, method, tables, hypers, epoch, current=current, best_variables=best_variables, x_train=dataset.x_train
      )
    if method.history_length or method.reads_train_probs:
      _add_table_metrics(records, tables, clean, method)
    seconds = time.perf_counter() - start
    for m, record in enumerate(records):
      record["seconds"] = seconds
      histories[m].append(record)
    if log_fn is not None:
      log_fn(epoch, records)
  return states, tables, histories, reports


def member_summary(
  member: sweep_grid.Member, method_name: str, history: list[dict], report: dict, seconds: float
) -> dict:
  """The summary runs.run_single returns for this member (stage 1 only)."""
  summary = {"method": method_name, "seed": member.seed, "stage1": runs.summary_of(history)}
  summary["stage1"].update(
    {k: v for k, v in history[-1].items() if k.startswith(("label_", "detection_", "pruned_", "relabelled_"))}
  )
  summary.update(runs.summary_of(history))  # pylint: disable=protected-access
  summary["noise"] = {
    "requested_rate": float(member.config.noise.rate),
    "type": member.config.noise.type,
    "realised_rate": float(report["flip_rate"]),
    "sha256": report["sha256"],
  }
  if not runs.clean_labels_known(member.config):  # labels taken as given: no known flip rate (as run_single)
    del summary["noise"]["realised_rate"]
  summary["seconds"] = seconds
  summary["history"] = history
  return summary


# ---------------------------------------------------------------------------------------------------------------
# The entry point, tables and figure


def _sweep_dataset(config, sweep, base_config, dataset):
  """The dataset of the sweep: `dataset`, or config's loaded when None (a sweep that cannot start says so before
  the data are read); loaded into memory unless sequential.

  Raises:
    ValueError: when members trained together would stream the dataset.
  """
  if dataset is None:
    runs.check_before_data(config)
  dataset = inputs.load_dataset(config) if dataset is None else dataset
  if not sweep.sequential and inputs.input_mode(base_config, dataset) == "streaming":
    raise ValueError(
      "a sweep trains its members together on resident data; this dataset would be streamed "
      "(config.input / input_budget_mib): set sweep.sequential=True, or input='resident'."
    )
  if not sweep.sequential:
    dataset = dataset.load()
  return dataset


def _run_sequential(config, members, fields, dataset, progress) -> list[dict]:
  """The members' summaries, each run one after another by runs.run_single."""
  mesh = mesh_lib.make_mesh(config.get("num_devices") or None)
  summaries = []
  for i, member in enumerate(members):
    progress.prefix = (
      f"member {i + 1}/{len(members)} ({sweep_grid.point_label(fields, member.point)}, seed {member.seed})"
    )
    summaries.append(runs.run_single(member.config, None, dataset=dataset, mesh=mesh, log_fn=progress))
  return summaries


def _chunk_logger(config, progress, *, first: int, group, num_members: int, start: float) -> Callable:
  """`log(epoch, records)` of the chunk of members `group` (from index `first`): ticks `progress` and logs the
  chunk's mean score (test accuracy, else validation accuracy), the epoch's seconds, elapsed time and ETA."""

  def log(epoch, records):
    progress.tick(len(records))
    scored = "test_accuracy" if "test_accuracy" in records[0] else "val_accuracy"
    mean_score = np.mean([r.get(scored, np.nan) for r in records])
    logging.info(
      "members %d-%d/%d epoch %d/%d: mean %s %.2f%%, %.1f s; elapsed %s, ETA %s",
      first + 1,
      first + len(group),
      num_members,
      epoch,
      int(config.num_epochs),
      scored,
      100 * mean_score,
      records[0]["seconds"],
      reporting.format_duration(time.perf_counter() - start),
      reporting.format_duration(progress.eta_seconds()),
    )

  return log


def _run_together(config, sweep, members, fields, dataset, method, progress, start: float):
  """(mode, summaries): the members trained together in chunks of at most sweep.max_members_per_program members,
  one Programs for all chunks; mode: its member map and epoch mode."""
  base_config = members[0].config
  model = models.build(
    base_config.model.name,
    dataset.num_classes,
    dataset.x_train.shape[1:],
    kwargs=base_config.model.get("kwargs"),
    bn_axis_name=None,
  )
  programs = Programs(
    base_config,
    model,
    method,
    input_shape=dataset.x_train.shape[1:],
    num_examples=dataset.x_train.shape[0],
    member_map=sweep.member_map,
    normalize=inputs.normalizer(base_config, dataset),
  )
  chunk = int(sweep.max_members_per_program) or len(members)
  summaries = []
  for first in range(0, len(members), chunk):
    group = members[first : first + chunk]
    chunk_start = time.perf_counter()
    log = _chunk_logger(config, progress, first=first, group=group, num_members=len(members), start=start)
    _, _, histories, reports = train_members(
      base_config, group, dataset=dataset, model=model, programs=programs, fields=fields, log_fn=log
    )
    seconds = (time.perf_counter() - chunk_start) / len(group)
    summaries += [
      member_summary(member, method.name, history, report, seconds)
      for member, history, report in zip(group, histories, reports)
    ]
  return f"{programs.member_map}, {programs.epoch_mode}", summaries


def _write_outputs(workdir: str, out: dict, config, sweep, fields, values, dataset) -> None:
  """Writes summary.json, classes.json (datasets that name their classes) and, for one or two fields with
  sweep.plot_keys, sweep.png in `workdir`."""
  os.makedirs(workdir, exist_ok=True)
  with open(os.path.join(workdir, "summary.json"), "w") as f:
    json.dump(out, f, indent=1)
  inputs.write_classes(dataset, config, workdir)  # classes.json, for datasets that name their classes
  if len(fields) in (1, 2) and sweep.plot_keys:
    sweep_grid.save_sweep_plot(
      out["mean_std"],
      fields,
      values,
      tuple(sweep.plot_keys),
      os.path.join(workdir, "sweep.png"),
      title=f"{out['title']} (mean ± std over {len(out['seeds'])} seeds)",
    )


def run_sweep(config, workdir: str | None = None, *, dataset=None) -> dict:
  """Runs every member of a sweep config; prints the tables, writes summary.json and sweep.png in `workdir`.

  Returns {'title', 'fields', 'values', 'seeds', 'mode', 'members': [{'point', 'seed', 'summary'}],
  'mean_std': {point label: {metric: {'mean', 'std'}}} (over seeds), 'seconds', 'config'}.
  """
  start = time.perf_counter()
  sweep, fields, values = sweep_grid.check_sweep(config)
  members = sweep_grid.make_members(config)
  seeds = tuple(sweep.seeds)
  base_config = members[0].config
  dataset = _sweep_dataset(config, sweep, base_config, dataset)
  method = registry.make(base_config.method, num_classes=dataset.num_classes)
  progress = reporting.Progress(len(members) * int(config.num_epochs))
  if sweep.sequential:
    mode, summaries = "sequential", _run_sequential(config, members, fields, dataset, progress)
  else:
    mode, summaries = _run_together(config, sweep, members, fields, dataset, method, progress, start)
  total = time.perf_counter() - start
  results = sweep_grid.grid_results(members, summaries, fields, values)
  title = config.get("title") or f"{config.dataset}, {method.name} sweep over {', '.join(fields) or 'seeds'}"
  out = {
    "title": title,
    "fields": list(fields),
    "values": [list(v) for v in values],
    "seeds": list(seeds),
    "mode": mode,
    "seconds": total,
    "mean_std": results,
    "members": [
      {"point": dict(zip(fields, m.point)), "seed": m.seed, "summary": s} for m, s in zip(members, summaries)
    ],
    "config": config.to_dict(),
  }
  sweep_grid.print_tables(out, sweep, fields, values, len(members))
  if workdir:
    _write_outputs(workdir, out, config, sweep, fields, values, dataset)
  return out
