"""One run of a config: noise injection, stage 1, stage 2 (Joint Optimization), its files and summary.

  summary = run_single(config, workdir)        # noisy_jax.train.loop.fit per stage; metrics.jsonl, summary.json, ...

The step and the epoch loop are noisy_jax.train; the dataset and labels come from noisy_jax.data.inputs (its settings
read from the config by noisy_jax.experiment.inputs); several runs of a comparison are
noisy_jax.experiment.comparison.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
import ml_collections
import numpy as np

from noisy_jax import models
from noisy_jax.core import label_issues
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import noise as noise_lib
from noisy_jax.data import bad_files
from noisy_jax.experiment import export as export_lib
from noisy_jax.experiment import inputs as inputs_lib
from noisy_jax.experiment import pretrained
from noisy_jax.experiment import reporting
from noisy_jax.experiment.inputs import load_dataset  # pylint: disable=g-importing-member
from noisy_jax.experiment.inputs import noisy_training_labels  # pylint: disable=g-importing-member
from noisy_jax.methods import loss_correction
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import distributed
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.parallel import streaming
from noisy_jax.parallel import table_sharding
from noisy_jax.train import checkpoint as checkpoint_lib
from noisy_jax.train import loop
from noisy_jax.train import optim
from noisy_jax.train import predict as predict_lib
from noisy_jax.train import state as state_lib

# The stream of the stage-1 key that initialises a method's per-example state (SOP's u, v): fold_in(stage1_key, it),
# a key that neither the init nor the data order (split(stage1_key)) uses, so other methods' runs are unchanged.
METHOD_ROWS_STREAM = 0x726F7773
# method_evidence of the label_issues.csv rows of a validation split carved from the training files.
CARVED_VALIDATION_EVIDENCE = "final network, out of sample (validation row, not trained on)"


def summary_of(history: list[dict]) -> dict:
  """Best and last test accuracy, and the test accuracy at the epoch of best validation accuracy (first such
  epoch); each only when its split exists (no test split: only the best validation epoch and accuracy)."""
  out = {}
  tests = [r["test_accuracy"] for r in history if "test_accuracy" in r]
  if tests:
    out.update({"best_test_accuracy": max(tests), "last_test_accuracy": tests[-1]})
  if "val_accuracy" in history[0]:
    best = int(np.argmax([r["val_accuracy"] for r in history]))
    if tests:
      out["test_accuracy_at_best_val"] = tests[best]
    else:
      out["best_val_accuracy"] = history[best]["val_accuracy"]
    out["best_val_epoch"] = history[best]["epoch"]
  return out


def clean_labels_known(config) -> bool:
  """Whether the run knows its training split's true labels: every noise type but 'none', which takes the labels
  as given (a user's own data, Clothing1M, WebVision): metrics that need the truth (label recovery, detection,
  memorisation, the realised noise rate) are then left out, not faked."""
  return config.noise.type != "none"


def run_single(
  config,
  workdir: str | None = None,
  *,
  dataset=None,
  mesh: Mesh | None = None,
  log_fn: Callable | None = None,
  resume_fn: Callable | None = None,
  keep_arrays: bool = False,
) -> dict:
  """Runs one method with one seed: noise injection, then the method's stages in order; returns a summary.

  The stages (noisy_jax.methods.spec.Stage, from the method's spec) are trained one after the other with
  noisy_jax.train.loop.fit: the method's own (stage 1), and for some methods a stage before it (loss correction's
  estimation run) or after it (Joint Optimization's stage 2). The summary holds the final and best accuracies of
  the delivering stage, each stage's own, the label-table metrics, the realised noise and the history of per-epoch
  records. When `workdir` is given, per-epoch records go to `metrics.jsonl` and the summary to `summary.json`
  there, and with `config.checkpoint_every` > 0 (default checkpoint.DEFAULT_EVERY) each stage but an auxiliary one
  is checkpointed under `workdir/checkpoints/STAGE` (noisy_jax.train.checkpoint): a run started again in the same
  workdir resumes from the newest checkpoint (a finished stage is restored, not retrained) and rewrites
  metrics.jsonl with every epoch once.
  The network of the delivering stage is exported to `workdir/model/final` and `workdir/model/best_val`
  (noisy_jax.experiment.export; read back with export.load_model). `workdir/label_issues.csv`
  (noisy_jax.core.label_issues.from_run, from the method and label table of the stage that scores labels) holds one
  row per training example; when the validation split was carved from the training files of a run with labels as
  given (`carved_validation_scored`), its rows follow, scored from the final delivered network's softmax (out of
  sample: `carved_validation_probs`), with index N_train + j for validation row j and method_evidence
  CARVED_VALIDATION_EVIDENCE.

  log_fn: called with each epoch's record as it is trained. resume_fn: called with the records of the epochs a
  resumed stage restored from its checkpoint (they do not reach log_fn), e.g. reporting.Progress.restored.
  keep_arrays: also return the final arrays under summary["arrays"] (not written to summary.json): the variables
  of each stage's network under its name ("stage1", "stage2"), "label_table" (the label-scoring stage's
  LabelTable), and for methods with weight averages (ELR+) "stage1_ema_params".

  Raises:
    noisy_jax.core.errors.InputError: before the data are read and before anything is written, as
      `check_before_data`; once the data are read, before anything is written, pretrained weights that do not fit
      the network built for them (pretrained.check).
  """
  weights = check_before_data(config, dataset_arguments=dataset is None)
  start = time.perf_counter()
  if dataset is None:
    dataset = load_dataset(config)
  weights = pretrained.check(config, dataset, weights)  # for the data's inputs and classes (a grayscale folder)
  mesh = mesh_lib.make_mesh(config.get("num_devices") or None) if mesh is None else mesh
  root = jax.random.PRNGKey(int(config.seed))
  stage1_key, noise_key, stage2_key = jax.random.split(root, 3)
  noisy, report = noisy_training_labels(config, dataset, noise_key)
  clean = dataset.y_train if clean_labels_known(config) else None
  model = models.build(
    config.model.name, dataset.num_classes, dataset.x_train.shape[1:], kwargs=config.model.get("kwargs")
  )
  # Checked again for the data's inputs and classes (a grayscale folder and an RGB file), before anything is written.
  init_variables = pretrained.initializer(config, weights)
  spec = registry.get(config.method.name)
  stages = spec_lib.check_stages(spec.stages(config.method), spec.name)
  transition, transition_summary = correction_transition(config, dataset) if spec.needs_transition else (None, None)
  issue_settings = label_issue_settings(config)
  issue_score, issue_rule = issue_settings.score, issue_settings.rule

  jsonl, scalar_writer, checkpointed = None, None, False
  # Several processes (multi-host): only process 0 writes metrics, TensorBoard and summaries; every process takes
  # part in the checkpoints (orbax coordinates the write of the global arrays).
  writes = bool(workdir) and distributed.is_main_process()
  if workdir:
    os.makedirs(workdir, exist_ok=True)
    if writes:
      scalar_writer = reporting.ScalarWriter(workdir)
      inputs_lib.write_classes(dataset, config, workdir)  # classes.json, for datasets that name their classes
    checkpointed = int(config.get("checkpoint_every", checkpoint_lib.DEFAULT_EVERY)) > 0

  def checkpoint_dir(stage):
    return checkpoint_lib.stage_dir(workdir, stage.name) if checkpointed and not stage.auxiliary else None

  first_recorded = next(stage for stage in stages if not stage.auxiliary)
  skipped_files = skipped_files_log(config, dataset, workdir if writes else None, checkpoint_dir(first_recorded))

  def write_jsonl(record):
    nonlocal jsonl
    if jsonl is None:  # opened (and truncated) at the first record: a refused resume leaves the old file alone
      jsonl = open(os.path.join(workdir, "metrics.jsonl"), "w")
    jsonl.write(json.dumps(record) + "\n")
    jsonl.flush()

  def log(record):
    if writes:
      write_jsonl(record)
      scalar_writer.write(record)
    if log_fn is not None:
      log_fn(record)

  def on_resume(records):
    """Restored epochs: into metrics.jsonl (rewritten whole), not logged again; TensorBoard steps continue."""
    if writes:
      for record in records:
        write_jsonl(record)
      scalar_writer.step += len(records)
    if resume_fn is not None:
      resume_fn(records)

  keys = {0: stage1_key, 1: stage2_key}
  products, trained = {}, {}
  try:
    previous, epochs_before = None, 0
    for stage in stages:
      stage_config = config_of_stage(config, stage)
      context = spec_lib.Context(
        num_classes=dataset.num_classes,
        num_epochs=int(config.num_epochs),
        transition=transition,
        num_examples=len(noisy),
        products=dict(products),
        epochs_before=epochs_before,
      )
      method = registry.build(config.method, context) if stage.build is None else stage.build(config.method, context)
      if stage.scores_labels and workdir and not (method.program.own or method.label_evidence is not None):
        # Predictions recorded for WORKDIR/label_issues.csv by a method that records none itself (not for a method
        # with its own evidence, Method.label_evidence: DivideMix's and ELR+'s epoch programs record nothing, DISC's
        # state holds each example's last predictions).
        extra_history = label_issues.history_length(
          issue_settings.history_length,
          method,
          num_epochs=int(config.num_epochs),
          num_examples=len(noisy),
          num_classes=dataset.num_classes,
        )
        if extra_history:
          method = dataclasses.replace(method, history_length=extra_history)
      key = keys.get(stage.key_stream, None)
      key = jax.random.fold_in(stage2_key, stage.key_stream) if key is None else key
      state, table, history, best = loop.fit(
        model=model,
        method=method,
        table=stage_table(stage, previous, noisy, dataset.num_classes, method, config, mesh, stage1_key),
        dataset=dataset,
        clean_train_labels=clean,
        config=stage_config,
        key=key,
        mesh=mesh,
        stage=stage.name,
        log_fn=None if stage.auxiliary else log,
        checkpoint_dir=checkpoint_dir(stage),
        on_resume=None if stage.auxiliary else on_resume,
        init_variables=init_variables if stage.network == "fresh" else previous_network(previous, stage, model),
        init_opt_state=None if stage.optimizer_from is None else continued_optimizer(trained[stage.optimizer_from]),
        skipped_files=None if stage.auxiliary else skipped_files,
      )
      epochs_before += stage_clock(stage, stage_config)
      if stage.product is not None:
        variables = best if stage.product_from == "best_val" else state_lib.variables_of(state)
        probs = training_probs(stage_config, dataset, model, variables, mesh=mesh)
        products.update(stage.product(probs, config.method))
      previous = trained[stage.name] = StageResult(stage, stage_config, method, state, table, history, best)
  finally:
    if jsonl is not None:
      jsonl.close()
    if scalar_writer is not None:
      scalar_writer.close()
  own = next(r for r in trained.values() if r.stage.build is None)  # the method's own training
  delivered = next(r for r in trained.values() if r.stage.delivers)
  scoring = next(r for r in trained.values() if r.stage.scores_labels)
  if spec.needs_transition and transition_summary is None:  # estimated by an earlier stage
    transition_summary = estimated_transition_summary(products, trained)
  summary = {"method": own.method.name, "model": type(model).__name__, "seed": int(config.seed)}
  arrays = {"label_table": scoring.table}
  history = []
  for result in trained.values():
    if result.stage.auxiliary:
      continue
    summary[result.stage.name] = summary_of(result.history)
    if result.stage.scores_labels:
      summary[result.stage.name].update(
        {
          k: v
          for k, v in result.history[-1].items()
          if k.startswith(("label_", "detection_", "pruned_", "relabelled_"))
        }
      )
    arrays[result.stage.name] = state_lib.variables_of(result.state)
    if jax.tree.leaves(result.state.ema_params):
      arrays[f"{result.stage.name}_ema_params"] = result.state.ema_params
    history = history + result.history
  if writes:
    export_delivered(workdir, delivered, dataset, model, method_name=own.method.name, seed=int(config.seed))
  carved_probs = None
  if workdir and carved_validation_scored(config, dataset):  # on every process: the prediction is a global program
    carved_probs = carved_validation_probs(
      delivered.config,
      dataset,
      model,
      arrays[delivered.stage.name],
      num_networks=delivered.method.num_networks,
      mesh=mesh,
    )
  summary.update(summary_of(delivered.history))
  if transition_summary is not None:
    summary["transition"] = transition_summary
  summary["noise"] = {
    "requested_rate": float(config.noise.rate),
    "type": config.noise.type,
    "realised_rate": float(report["flip_rate"]),
    "sha256": report["sha256"],
  }
  if clean is None:  # labels taken as given: no known flip rate
    del summary["noise"]["realised_rate"]
  if "pseudo_label_accuracy" in report:
    summary["noise"]["pseudo_label_accuracy"] = report["pseudo_label_accuracy"]
  summary["seconds"] = time.perf_counter() - start
  summary["history"] = history
  if writes:
    issues = label_issues.from_run(scoring.method, scoring.table, score=issue_score, rule=issue_rule)
    unread = streamed_skipped_rows(dataset, skipped_files)
    if issues is not None and len(unread):  # files never read: no verdict (listed in skipped_files.txt)
      issues = label_issues.without(issues, unread)
    if issues is not None:
      sources = getattr(dataset, "train_sources", None)
      if carved_probs is not None:  # the held-out training files after the trained-on ones: index N_train + j
        carved = label_issues.held_out(
          carved_probs,
          np.asarray(dataset.y_val),
          first_index=len(noisy),
          what=CARVED_VALIDATION_EVIDENCE,
          score=issue_score,
          rule=issue_rule,
        )
        issues = label_issues.concatenate(issues, carved)
        if sources is not None:
          sources = np.concatenate([sources, dataset.val_sources])
      label_issues.write_csv(
        os.path.join(workdir, label_issues.CSV_FILE),
        issues,
        sources=sources,
        class_names=getattr(dataset, "class_names", None),
      )
      summary["label_issues"] = {"file": label_issues.CSV_FILE, "flagged": int(issues.records["is_issue"].sum())}
      if carved_probs is not None:
        summary["label_issues"]["carved_validation_rows"] = len(carved_probs)
    if skipped_files is not None:
      summary["skipped_files"] = {"file": bad_files.FILE_NAME, "count": len(skipped_files)}
    with open(os.path.join(workdir, "summary.json"), "w") as f:
      json.dump(summary, f, indent=1)
    if config.get("plots", False):
      reporting.save_curves(
        history, os.path.join(workdir, "curves.png"), title=f"{own.method.name}, seed {int(config.seed)}"
      )
  if keep_arrays:
    summary["arrays"] = arrays
  return summary


@dataclasses.dataclass(frozen=True)
class LabelIssueSettings:
  """A run's label_issues section: the score and flag rule of WORKDIR/label_issues.csv (checked) and the epochs of
  predictions to record for a method that records none (label_issues.history_length's `wanted`)."""

  score: str
  rule: str
  history_length: int


def label_issue_settings(config) -> LabelIssueSettings:
  """config.label_issues read, label_issues.DEFAULT_SCORE, DEFAULT_RULE and DEFAULT_HISTORY_LENGTH where unset;
  a bad score or rule raises ValueError here, before training."""
  section = config.get("label_issues", {})
  score, rule = label_issues.check_settings(
    section.get("score", label_issues.DEFAULT_SCORE), section.get("rule", label_issues.DEFAULT_RULE)
  )
  return LabelIssueSettings(score, rule, int(section.get("history_length", label_issues.DEFAULT_HISTORY_LENGTH)))


@dataclasses.dataclass(frozen=True)
class StageResult:
  """One trained stage of a run: its declaration, its config, method, final state and label table, its per-epoch
  history and its best-val variables."""

  stage: spec_lib.Stage
  config: Any
  method: Any
  state: state_lib.TrainState
  table: label_table_lib.LabelTable
  history: list
  best: Any


def config_of_stage(config, stage: spec_lib.Stage):
  """The config a stage trains with: the run's, with the fields of `config[stage.config_section]` replacing it, and
  `optimizer.trainable_modules` set to the stage's `trainable` modules when it names some."""
  if stage.config_section is None and not stage.trainable:
    return config
  stage_config = ml_collections.ConfigDict(config.to_dict())
  if stage.config_section is not None:
    stage_config.update(config[stage.config_section])
  if stage.trainable:
    stage_config.optimizer.trainable_modules = list(stage.trainable)
  return stage_config


def stage_table(stage, previous, noisy, num_classes, method, config, mesh, stage1_key) -> label_table_lib.LabelTable:
  """The label table a stage starts from. 'noisy': the run's labels, with the method's per-example rows (their key
  fold_in(stage1_key, METHOD_ROWS_STREAM)), split over the devices when the config asks for it
  (loop.table_sharded); 'previous': a fresh replicated table holding the previous stage's soft labels."""
  if stage.table == "previous":
    return label_table_lib.create(noisy, num_classes).replace(
      soft_labels=jnp.asarray(jax.device_get(previous.table.soft_labels))
    )
  if loop.table_sharded(
    config,
    num_examples=len(noisy),
    num_classes=num_classes,
    history_length=method.history_length,
    num_devices=mesh.devices.size,
  ):
    # Built already split over the devices: no device or host ever holds the whole table.
    table = table_sharding.create(
      noisy, num_classes, history_length=method.history_length, mesh=mesh, axis=mesh_lib.AXIS
    )
  else:
    table = label_table_lib.create(noisy, num_classes, history_length=method.history_length)
  if method.init_rows is not None:  # the method's per-example state (ELR's targets, SOP's u, v), beside the labels
    rows_key = jax.random.fold_in(stage1_key, METHOD_ROWS_STREAM)
    table = table_sharding.add_method_rows(
      table, lambda rows: method.init_rows(rows_key, rows, num_classes), mesh=mesh, axis=mesh_lib.AXIS
    )
  return table


def previous_network(previous: StageResult, stage: spec_lib.Stage, model) -> Callable:
  """The init_variables (loop.fit) that start `stage`'s network from the previous stage's best-validation
  ('previous_best') or final ('previous_final') variables, on the host, with the top-level modules of `stage.renew`
  taken from the fresh initialisation instead (their params and BatchNorm statistics)."""
  which = stage.network
  variables = jax.device_get(previous.best if which == "previous_best" else state_lib.variables_of(previous.state))
  entries = [models.classifier_name(model) if entry == optim.CLASSIFIER else entry for entry in stage.renew]

  def start(fresh):
    renewed = optim.trainable_names(fresh["params"], entries, None) if entries else set()
    started = {}
    for collection, value in variables.items():
      value = {name: jax.tree.map(np.asarray, tree) for name, tree in value.items()}
      fresh_collection = fresh.get(collection, {})
      value.update({name: fresh_collection[name] for name in renewed if name in fresh_collection})
      started[collection] = value
    return started

  return start


def continued_optimizer(earlier: StageResult) -> Callable:
  """The init_opt_state (loop.fit) that starts a stage's optimiser from `earlier`'s final optimiser state, on the
  host (Stage.optimizer_from).

  Raises:
    ValueError: when the stage's fresh optimiser state differs from that one in structure or shapes (another kind of
      optimiser, another trainable set).
  """
  saved = jax.device_get(earlier.state.opt_state)

  def start(fresh):
    same_tree = jax.tree.structure(fresh) == jax.tree.structure(saved)
    if not same_tree or any(
      np.shape(a) != np.shape(b) for a, b in zip(jax.tree.leaves(fresh), jax.tree.leaves(saved), strict=True)
    ):
      raise ValueError(
        f"a stage continues the optimiser of stage {earlier.stage.name!r}, but its own optimiser's state has another "
        "structure: give both stages the same optimizer (name, trainable_modules, clipping, L1)."
      )
    return jax.tree.map(np.asarray, saved)

  return start


def stage_clock(stage: spec_lib.Stage, stage_config) -> int:
  """The epochs `stage` counts on the run's clock (Stage.clock_epochs; its num_epochs by default)."""
  return int(stage_config.num_epochs) if stage.clock_epochs is None else int(stage.clock_epochs)


def network_variables(variables, model, input_shape) -> dict:
  """The network's own variables of a trained state's: the top-level params entries that `model` initialises, a
  method's own trainable parameters beside them (added by its EpochProgram.init_state: T-Revision's slack) left
  out."""
  own = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), jnp.zeros((1, *input_shape)), train=False))["params"]
  return {**variables, "params": {name: tree for name, tree in variables["params"].items() if name in own}}


def export_delivered(workdir: str, delivered: StageResult, dataset, model, *, method_name: str, seed: int) -> None:
  """WORKDIR/model/{final,best_val} (noisy_jax.experiment.export): the delivering stage's network (its own
  variables, `network_variables`), normalised as that stage trained."""
  normalize = inputs_lib.normalizer(delivered.config, dataset)
  final = state_lib.variables_of(delivered.state)
  for which, variables in (("final", final), ("best_val", delivered.best)):
    if delivered.method.num_networks == 1:
      variables = network_variables(variables, model, dataset.x_train.shape[1:])
    export_lib.save_run(
      export_lib.model_dir(workdir, which),
      variables=variables,
      config=delivered.config,
      dataset=dataset,
      normalization=normalize,
      meta={
        "method": method_name,
        "stage": delivered.stage.name,
        "seed": seed,
        "which": which,
        "config": checkpoint_lib.config_json(delivered.config),
      },
      num_networks=delivered.method.num_networks,
    )


def check_before_data(config, *, dataset_arguments: bool = True):
  """What stops a run of `config` that needs no data, checked in the order a user meets it, before the data are
  read (hours for Clothing1M) and before anything is written: config.model.pretrained left at REQUIRED, an unknown
  model name, the dataset's missing folder (`dataset_arguments`: inputs_lib.check_arguments), a weights file that
  is missing, unreadable or does not fit the network (pretrained.check, on the network's shapes). Returns the
  weights (pretrained.StoredWeights; None: random initialisation).

  Raises:
    noisy_jax.core.errors.InputError, MissingInputError: the message says what to give instead.
  """
  pretrained.check_given(config)
  models.check_name(config.model.name)
  if dataset_arguments:
    inputs_lib.check_arguments(config)
  return pretrained.check(config)


def streamed_skipped_rows(dataset, skipped_files: bad_files.Log | None) -> np.ndarray:
  """The training rows of `skipped_files` that are still rows of `dataset` (its training split streamed from disk,
  where a skipped file keeps its row): int64 [k], sorted."""
  if skipped_files is None or not dataset.on_disk:
    return np.zeros(0, np.int64)
  names = dataset.train_sources if dataset.train_sources is not None else dataset.x_train.paths
  skipped = {s.file for s in skipped_files.skipped if s.split == "train"}
  return np.array([i for i, name in enumerate(names) if str(name) in skipped], np.int64)


def skipped_files_log(config, dataset, workdir: str | None, checkpoint_dir: str | None) -> bad_files.Log | None:
  """The run's list of the files it skipped (dataset_kwargs on_bad_file='skip', noisy_jax.data.bad_files), None
  otherwise: those the dataset left out at load, with those a resumed run had met while streaming (read back from
  WORKDIR/skipped_files.txt when `checkpoint_dir` holds a checkpoint); written there now and as it grows when
  `workdir` is given."""
  if inputs_lib.dataset_kwargs(config).get("on_bad_file", "error") != "skip":
    return None
  path = os.path.join(workdir, bad_files.FILE_NAME) if workdir else None
  resuming = (
    path is not None and checkpoint_dir is not None and os.path.isdir(checkpoint_dir) and os.listdir(checkpoint_dir)
  )
  earlier = bad_files.read(path) if resuming else []
  fraction = inputs_lib.dataset_kwargs(config).get("max_bad_fraction", bad_files.DEFAULT_MAX_FRACTION)
  return bad_files.Log(
    [*dataset.skipped_files, *earlier], num_files=bad_files.num_files(dataset), max_bad_fraction=fraction, path=path
  )


def carved_validation_scored(config, dataset) -> bool:
  """Whether WORKDIR/label_issues.csv also scores the validation rows: they were carved from the training files
  (Dataset.val_carved_from_train) and the run takes its labels as given (noise type 'none'), so their labels are
  given as the training rows' are and every training file gets a row."""
  return bool(getattr(dataset, "val_carved_from_train", False)) and not clean_labels_known(config)


def carved_validation_probs(config, dataset, model, variables, *, num_networks: int, mesh: Mesh) -> np.ndarray:
  """The delivered network's eval-mode softmax [N_val, C] of the validation split, float64: predict.make_predict_fn
  as the trainer evaluates (the normalisation and XLA options of `config`, the stage that trained `variables`; a
  pair of networks (num_networks 2) averages its logits), streamed in order when the split is on disk."""
  options = loop.compiler_options(config, model, mesh.devices.flat[0].platform)
  workers = int(config.get("input_workers", streaming.DEFAULT_WORKERS))
  predict = predict_lib.make_evaluate(
    predict_lib.make_predict_fn(
      model,
      normalize=inputs_lib.normalizer(config, dataset),
      compiler_options=options,
      num_networks=num_networks,
    ),
    workers=streaming.default_workers() if workers < 0 else workers,
  )
  return np.asarray(predict(variables, dataset.x_val), np.float64)


def correction_transition(config, dataset) -> tuple[np.ndarray | None, dict | None]:
  """The transition matrix T [C, C] of a 'loss_correction' run and what to record of it, or (None, None) when an
  earlier stage estimates it (`estimated_transition_summary`).

  config.method.transition: 'known': the run's synthetic noise model (noise.make_transition of config.noise);
  'estimated': made by the method's estimation stage (noisy_jax.methods.loss_correction.ESTIMATE: a network trained
  with cross entropy on the same noisy labels, config and epochs, then the anchor-point estimate from its
  eval-mode softmax of the training split); or an explicit [C, C] matrix.
  """
  source = config.method.get("transition", "known")
  num_classes = dataset.num_classes
  if isinstance(source, str) and source == "known":
    if config.noise.type not in noise_lib.NOISE_TYPES:
      raise ValueError(
        f"method.transition='known' needs a synthetic noise model with a transition matrix "
        f"({', '.join(noise_lib.NOISE_TYPES)}); noise type {config.noise.type!r} has none: "
        "use method.transition='estimated'."
      )
    matrix = noise_lib.make_transition(
      config.noise.type, num_classes, float(config.noise.rate), dataset=config.noise.get("dataset") or None
    )
    return matrix, {"source": "known", "matrix": matrix.tolist()}
  if isinstance(source, str) and source == "estimated":
    return None, None
  if isinstance(source, str):
    raise ValueError(f"method.transition={source!r}; allowed: 'known', 'estimated' or a [C, C] matrix.")
  matrix = noise_lib.check_transition(np.asarray(source, np.float64))
  return matrix, {"source": "given", "matrix": matrix.tolist()}


def estimated_transition_summary(products: dict, trained: dict) -> dict:
  """What a run records of a transition matrix that its estimation stage made: the matrix, the percentile of the
  anchor filter and the estimation run's epochs and accuracies."""
  history = trained[loss_correction.ESTIMATE.name].history
  return {
    "source": "estimated",
    "matrix": np.asarray(products[loss_correction.TRANSITION]).tolist(),
    "percentile": products[loss_correction.PERCENTILE],
    "estimate_run": {"epochs": len(history), **summary_of(history)},
  }


def training_probs(config, dataset, model, variables, *, mesh: Mesh) -> np.ndarray:
  """A trained network's eval-mode softmax [N, C] of the training split, float64 (the normalisation and XLA options
  of `config`, the stage that trained `variables`)."""
  options = loop.compiler_options(config, model, mesh.devices.flat[0].platform)  # deterministic as fit's
  predict = predict_lib.make_evaluate(
    predict_lib.make_predict_fn(model, normalize=inputs_lib.normalizer(config, dataset), compiler_options=options)
  )
  return np.asarray(predict(variables, dataset.x_train), np.float64)


def total_epochs(config) -> int:
  """Epochs of one run of `config`: those of each stage whose epochs are logged (all but auxiliary ones)."""
  stages = registry.get(config.method.name).stages(config.method)
  return sum(int(config_of_stage(config, stage).num_epochs) for stage in stages if not stage.auxiliary)
