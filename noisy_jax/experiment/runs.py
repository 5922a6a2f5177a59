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
import numpy as np

from noisy_jax import models
from noisy_jax.core import label_issues
from noisy_jax.core import noise as noise_lib
from noisy_jax.data import bad_files
from noisy_jax.experiment import export as export_lib
from noisy_jax.experiment import inputs as inputs_lib
from noisy_jax.experiment import pretrained
from noisy_jax.experiment import reporting
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.experiment.inputs import load_dataset  # pylint: disable=g-importing-member
from noisy_jax.experiment.inputs import noisy_training_labels  # pylint: disable=g-importing-member
from noisy_jax.methods import loss_correction
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import distributed
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.parallel import streaming
from noisy_jax.train import checkpoint as checkpoint_lib
from noisy_jax.train import predict as predict_lib
from noisy_jax.train import state as state_lib

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


def run_keys(config) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(stage-1 key, noise key, stage-2 key) of a run: PRNGKey(config.seed) split in three."""
  return tuple(jax.random.split(jax.random.PRNGKey(int(config.seed)), 3))


def noise_key(config) -> jax.Array:
  """The key from which a run of `config` draws its label noise (`run_keys`)."""
  return run_keys(config)[1]


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
  LabelTable), and for methods that keep a state of their own (TrainState.method_state: ELR+'s weight averages,
  ProMix's class priors) "stage1_method_state".

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
  stage1_key, noise_key, stage2_key = run_keys(config)
  noisy, report = noisy_training_labels(config, dataset, noise_key)
  dataset = inputs_lib.selection_dataset(config, dataset, noise_key)
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
  # Several processes (multi-host): only process 0 writes metrics, TensorBoard and summaries; every process takes
  # part in the checkpoints (orbax coordinates the write of the global arrays).
  writes = bool(workdir) and distributed.is_main_process()
  if workdir:
    os.makedirs(workdir, exist_ok=True)
  recorder = RecordWriter(workdir if writes else None, log_fn=log_fn, resume_fn=resume_fn)
  if writes:
    inputs_lib.write_classes(dataset, config, workdir)  # classes.json, for datasets that name their classes
  hooks = stage_hooks(config, workdir, writes, dataset, stages, recorder)
  skipped_files = hooks.skipped_files
  try:
    trained, products = stages_lib.train_stages(
      config,
      stages,
      dataset=dataset,
      noisy=noisy,
      clean=clean,
      model=model,
      mesh=mesh,
      init_variables=init_variables,
      transition=transition,
      keys=(stage1_key, stage2_key),
      history_wanted=issue_settings.history_length if workdir else None,
      hooks=hooks,
    )
  finally:
    recorder.close()
  summary, arrays = stage_summaries(trained, model=model, seed=int(config.seed))
  entries = {
    **transition_entry(spec, transition_summary, products, trained),
    "noise": noise_summary(config, report, clean_known=clean_labels_known(config)),
  }
  outputs = RunOutputs(workdir, writes, dataset, model, mesh, skipped_files, issue_settings)
  finish_run(config, outputs, trained, summary, arrays, entries=entries, start=start)
  if keep_arrays:
    summary["arrays"] = arrays
  return summary


def stage_hooks(config, workdir: str | None, writes: bool, dataset, stages, recorder) -> stages_lib.StageHooks:
  """The stages' hooks: records to `recorder`, each stage's checkpoint folder (None without a workdir, with
  checkpoint_every 0 and for an auxiliary stage), the skipped files logged once (in the first recorded stage's
  folder)."""
  checkpointed = bool(workdir) and settings_lib.fit_field(config, "checkpoint_every") > 0

  def checkpoint_dir(stage):
    return checkpoint_lib.stage_dir(workdir, stage.name) if checkpointed and not stage.auxiliary else None

  first_recorded = next(stage for stage in stages if not stage.auxiliary)
  skipped_files = skipped_files_log(config, dataset, workdir if writes else None, checkpoint_dir(first_recorded))
  return stages_lib.StageHooks(
    log=recorder.log, on_resume=recorder.on_resume, checkpoint_dir=checkpoint_dir, skipped_files=skipped_files
  )


@dataclasses.dataclass(frozen=True)
class RunOutputs:
  """What a run writes its results with (`finish_run`): its workdir (None: nothing written), whether this process
  writes files, its dataset, network, mesh, skipped files and label-issue settings."""

  workdir: str | None
  writes: bool
  dataset: Any
  model: Any
  mesh: Any
  skipped_files: Any
  issue_settings: Any


def finish_run(config, outputs: RunOutputs, trained: dict, summary: dict, arrays: dict, *, entries, start) -> None:
  """Completes `summary` (in place) once the stages are trained: the delivered stage's accuracies, `entries` (the
  transition's and the noise's) and the seconds; with a workdir, the exported network, the carved validation rows'
  scores, label_issues.csv and summary.json."""
  workdir, dataset, model = outputs.workdir, outputs.dataset, outputs.model
  delivered = next(r for r in trained.values() if r.stage.delivers)
  if outputs.writes:
    export_delivered(workdir, delivered, dataset, model, method_name=summary["method"], seed=int(config.seed))
  carved_probs = None
  if workdir and carved_validation_scored(config, dataset):  # on every process: the prediction is a global program
    carved_probs = carved_validation_probs(
      delivered.config,
      dataset,
      model,
      arrays[delivered.stage.name],
      num_networks=delivered.method.num_networks,
      mesh=outputs.mesh,
    )
  summary.update(summary_of(delivered.history))
  summary.update(entries)
  summary["seconds"] = time.perf_counter() - start
  summary["history"] = summary.pop("history")
  if outputs.writes:
    scoring = next(r for r in trained.values() if r.stage.scores_labels)
    summary.update(
      write_label_issues(
        workdir, scoring, dataset, outputs.issue_settings, skipped_files=outputs.skipped_files, carved=carved_probs
      )
    )
    write_summary(workdir, summary, config)


class RecordWriter:
  """Where a run's epoch records go: WORKDIR/metrics.jsonl and TensorBoard (with a workdir: process 0 of a run
  that has one), and the caller's log_fn / resume_fn."""

  def __init__(self, workdir: str | None, *, log_fn: Callable | None, resume_fn: Callable | None):
    self._workdir, self._log_fn, self._resume_fn = workdir, log_fn, resume_fn
    self._jsonl = None
    self._scalars = reporting.ScalarWriter(workdir) if workdir else None

  def _write(self, record: dict) -> None:
    if self._jsonl is None:  # opened (and truncated) at the first record: a refused resume leaves the old file alone
      self._jsonl = open(os.path.join(self._workdir, "metrics.jsonl"), "w")
    self._jsonl.write(json.dumps(record) + "\n")
    self._jsonl.flush()

  def log(self, record: dict) -> None:
    """An epoch trained now."""
    if self._workdir:
      self._write(record)
      self._scalars.write(record)
    if self._log_fn is not None:
      self._log_fn(record)

  def on_resume(self, records: list[dict]) -> None:
    """Restored epochs: into metrics.jsonl (rewritten whole), not logged again; TensorBoard steps continue."""
    if self._workdir:
      for record in records:
        self._write(record)
      self._scalars.step += len(records)
    if self._resume_fn is not None:
      self._resume_fn(records)

  def close(self) -> None:
    for sink in (self._jsonl, self._scalars):
      if sink is not None:
        sink.close()


LABEL_METRIC_PREFIXES = ("label_", "detection_", "pruned_", "relabelled_")


def stage_summaries(trained: dict, *, model, seed: int) -> tuple[dict, dict]:
  """(summary, arrays) of a run's trained stages: the method, model and seed, each recorded stage's accuracies
  (`summary_of`; the label-scoring stage's label metrics of its last epoch), every recorded epoch in order under
  "history"; the arrays of run_single's keep_arrays."""
  own = next(r for r in trained.values() if r.stage.build is None)  # the method's own training
  scoring = next(r for r in trained.values() if r.stage.scores_labels)
  summary = {"method": own.method.name, "model": type(model).__name__, "seed": seed}
  arrays = {"label_table": scoring.table}
  history = []
  for result in trained.values():
    if result.stage.auxiliary:
      continue
    summary[result.stage.name] = summary_of(result.history)
    if result.stage.scores_labels:
      last = result.history[-1]
      summary[result.stage.name].update({k: v for k, v in last.items() if k.startswith(LABEL_METRIC_PREFIXES)})
    arrays[result.stage.name] = state_lib.variables_of(result.state)
    if jax.tree.leaves(result.state.method_state):
      arrays[f"{result.stage.name}_method_state"] = result.state.method_state
    history = history + result.history
  summary["history"] = history
  return summary, arrays


def noise_summary(config, report: dict, *, clean_known: bool) -> dict:
  """The summary's noise entry: requested rate and type, the realised rate (when the true labels are known), the
  noisy labels' checksum, and pseudo-labels' accuracy when the run made them."""
  noise = {
    "requested_rate": float(config.noise.rate),
    "type": config.noise.type,
    "realised_rate": float(report["flip_rate"]),
    "sha256": report["sha256"],
  }
  if not clean_known:  # labels taken as given: no known flip rate
    del noise["realised_rate"]
  if "pseudo_label_accuracy" in report:
    noise["pseudo_label_accuracy"] = report["pseudo_label_accuracy"]
  return noise


def write_label_issues(workdir: str, scoring, dataset, settings, *, skipped_files, carved) -> dict:
  """WORKDIR/label_issues.csv from the label-scoring stage (rows of files never read left out; the carved
  validation rows' `carved` softmax after the training rows); returns the summary's entries for it and for the
  skipped files."""
  out = {}
  issues = label_issues.from_run(scoring.method, scoring.table, score=settings.score, rule=settings.rule)
  unread = streamed_skipped_rows(dataset, skipped_files)
  if issues is not None and len(unread):  # files never read: no verdict (listed in skipped_files.txt)
    issues = label_issues.without(issues, unread)
  if issues is not None:
    sources = getattr(dataset, "train_sources", None)
    if carved is not None:  # the held-out training files after the trained-on ones: index N_train + j
      held_out = label_issues.held_out(
        carved,
        np.asarray(dataset.y_val),
        first_index=scoring.table.num_examples,
        what=CARVED_VALIDATION_EVIDENCE,
        score=settings.score,
        rule=settings.rule,
      )
      issues = label_issues.concatenate(issues, held_out)
      if sources is not None:
        sources = np.concatenate([sources, dataset.val_sources])
    label_issues.write_csv(
      os.path.join(workdir, label_issues.CSV_FILE),
      issues,
      sources=sources,
      class_names=getattr(dataset, "class_names", None),
    )
    out["label_issues"] = {"file": label_issues.CSV_FILE, "flagged": int(issues.records["is_issue"].sum())}
    if carved is not None:
      out["label_issues"]["carved_validation_rows"] = len(carved)
  if skipped_files is not None:
    out["skipped_files"] = {"file": bad_files.FILE_NAME, "count": len(skipped_files)}
  return out


def write_summary(workdir: str, summary: dict, config) -> None:
  """WORKDIR/summary.json, and WORKDIR/curves.png when config.plots asks for it."""
  with open(os.path.join(workdir, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
  if config.get("plots", False):
    title = f"{summary['method']}, seed {int(config.seed)}"
    reporting.save_curves(summary["history"], os.path.join(workdir, "curves.png"), title=title)


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


def network_variables(variables, model, input_shape) -> dict:
  """The network's own variables of a trained state's: the top-level params entries that `model` initialises, a
  method's own trainable parameters beside them (added by its EpochProgram.init_state: T-Revision's slack) left
  out."""
  own = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), jnp.zeros((1, *input_shape)), train=False))["params"]
  return {**variables, "params": {name: tree for name, tree in variables["params"].items() if name in own}}


def export_delivered(
  workdir: str, delivered: stages_lib.StageResult, dataset, model, *, method_name: str, seed: int
) -> None:
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
        "config": settings_lib.config_json(delivered.config),
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
  options = settings_lib.compiler_options(config, model, mesh.devices.flat[0].platform)
  workers = settings_lib.fit_field(config, "input_workers")
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


def transition_entry(spec, given: dict | None, products: dict, trained: dict) -> dict:
  """The summary's "transition" entry of a method that reads one (MethodSpec.needs_transition): the given matrix's
  (`given`, correction_transition's summary) or the one an earlier stage estimated; {} for other methods."""
  if not spec.needs_transition:
    return {}
  return {"transition": given if given is not None else estimated_transition_summary(products, trained)}


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
