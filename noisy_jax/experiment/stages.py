"""A run's stages trained in order (`train_stages`): each stage's config, method, key, label table, starting
network and optimiser, from its declaration (noisy_jax.methods.spec.Stage) and the stages before it."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
import ml_collections
import numpy as np

from noisy_jax import models
from noisy_jax.core import label_issues
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.data import bad_files
from noisy_jax.experiment import inputs as inputs_lib
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.parallel import table_sharding
from noisy_jax.train import loop
from noisy_jax.train import optim
from noisy_jax.train import predict as predict_lib
from noisy_jax.train import state as state_lib

# The stream of the stage-1 key that initialises a method's per-example state (SOP's u, v): fold_in(stage1_key, it),
# a key that neither the init nor the data order (split(stage1_key)) uses, so other methods' runs are unchanged.
METHOD_ROWS_STREAM = 0x726F7773


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


def stage_table(stage, previous, noisy, num_classes, method, settings, mesh, stage1_key) -> label_table_lib.LabelTable:
  """The label table a stage starts from. 'noisy': the run's labels, with the method's per-example rows (their key
  fold_in(stage1_key, METHOD_ROWS_STREAM)), split over the devices when the stage's FitSettings `settings` ask for
  it (loop.table_sharded); 'previous': a fresh replicated table holding the previous stage's soft labels."""
  if stage.table == "previous":
    return label_table_lib.create(noisy, num_classes).replace(
      soft_labels=jnp.asarray(jax.device_get(previous.table.soft_labels))
    )
  if loop.table_sharded(
    settings,
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


def continued_optimizer(earlier: StageResult, renewed: set[str] = frozenset()) -> Callable:
  """The init_opt_state (loop.fit) that starts a stage's optimiser from `earlier`'s final optimiser state, on the
  host (Stage.optimizer_from), with the state of the top-level modules `renewed` since (a later stage's
  Stage.renew: new modules have no optimiser history, as a PyTorch module created anew has no momentum buffer)
  zeroed: momentum, Adam's moments; the schedule and bias-correction counts are kept.

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
    return jax.tree_util.tree_map_with_path(
      lambda path, x: np.zeros_like(x) if _module_of(path) in renewed else np.asarray(x), saved
    )

  return start


def _module_of(path) -> str | None:
  """The top-level module of a leaf of an optimiser state: the first dict key on its path (the state's copies of the
  params tree), None for a leaf outside them (a step count)."""
  return next((str(entry.key) for entry in path if isinstance(entry, jax.tree_util.DictKey)), None)


def renewed_since(stages: tuple[spec_lib.Stage, ...], position: int, params, model) -> set[str]:
  """The top-level modules of `params` that the stages after `stages[position].optimizer_from` and before
  `stages[position]` renewed (Stage.renew), resolved as previous_network resolves them."""
  names = [s.name for s in stages]
  first = names.index(stages[position].optimizer_from) + 1
  entries = [entry for stage in stages[first:position] for entry in stage.renew]
  entries = [models.classifier_name(model) if entry == optim.CLASSIFIER else entry for entry in entries]
  return optim.trainable_names(params, entries, None) if entries else set()


def stage_clock(stage: spec_lib.Stage, stage_config) -> int:
  """The epochs `stage` counts on the run's clock (Stage.clock_epochs; its num_epochs by default)."""
  return int(stage_config.num_epochs) if stage.clock_epochs is None else int(stage.clock_epochs)


def training_probs(config, dataset, model, variables, *, mesh: Mesh) -> np.ndarray:
  """A trained network's eval-mode softmax [N, C] of the training split, float64 (the normalisation and XLA options
  of `config`, the stage that trained `variables`)."""
  options = settings_lib.compiler_options(config, model, mesh.devices.flat[0].platform)  # deterministic as fit's
  predict = predict_lib.make_evaluate(
    predict_lib.make_predict_fn(model, normalize=inputs_lib.normalizer(config, dataset), compiler_options=options)
  )
  return np.asarray(predict(variables, dataset.x_train), np.float64)


def total_epochs(config) -> int:
  """Epochs of one run of `config`: those of each stage whose epochs are logged (all but auxiliary ones)."""
  stages = registry.get(config.method.name).stages(config.method)
  return sum(int(config_of_stage(config, stage).num_epochs) for stage in stages if not stage.auxiliary)


@dataclasses.dataclass(frozen=True)
class StageHooks:
  """What a run gives its stages besides data and config: `log(record)` and `on_resume(records)` for the stages
  whose epochs are recorded, `checkpoint_dir(stage)` (None: not checkpointed) and the skipped-files log."""

  log: Callable
  on_resume: Callable
  checkpoint_dir: Callable[[spec_lib.Stage], str | None]
  skipped_files: bad_files.Log | None


def stage_method(stage: spec_lib.Stage, config, context: spec_lib.Context, *, history_wanted: int | None, dataset):
  """The method `stage` trains: the run's method (`build` None) or the stage's own. For the stage that scores
  labels, with `history_wanted` epochs of predictions recorded (label_issues.history_length) when the method keeps
  no evidence of its own (Method.label_evidence, or its own epoch program: DivideMix's and ELR+'s record nothing,
  DISC's state holds each example's last predictions); history_wanted None: nothing recorded."""
  method = registry.build(config.method, context) if stage.build is None else stage.build(config.method, context)
  if not stage.scores_labels or history_wanted is None or method.program.own or method.label_evidence is not None:
    return method
  extra_history = label_issues.history_length(
    history_wanted,
    method,
    num_epochs=int(config.num_epochs),
    num_examples=context.num_examples,
    num_classes=dataset.num_classes,
  )
  return dataclasses.replace(method, history_length=extra_history) if extra_history else method


def stage_key(stage: spec_lib.Stage, stage1_key: jax.Array, stage2_key: jax.Array) -> jax.Array:
  """The key `stage` trains with (Stage.key_stream): 0 the first stage key, 1 the second, n > 1 fold_in(second, n)."""
  if stage.key_stream in (0, 1):
    return (stage1_key, stage2_key)[stage.key_stream]
  return jax.random.fold_in(stage2_key, stage.key_stream)


def train_stages(
  config,
  stages: tuple[spec_lib.Stage, ...],
  *,
  dataset,
  noisy,
  clean,
  model,
  mesh: Mesh,
  init_variables: Callable | None,
  transition,
  keys: tuple[jax.Array, jax.Array],
  history_wanted: int | None,
  hooks: StageHooks,
) -> tuple[dict, dict]:
  """Trains `stages` in order with loop.fit; returns ({stage name: StageResult}, {product name: value}).

  Args:
    config: the run's config (each stage's is `config_of_stage`).
    stages: the method's checked stages.
    dataset: the run's data; noisy: its [N] training labels as trained on; clean: the true ones or None.
    model: the network; mesh: the devices; init_variables: a fresh stage's start (pretrained weights) or None.
    transition: the resolved transition matrix (Context.transition) or None.
    keys: the run's first and second stage keys.
    history_wanted: `stage_method`'s.
    hooks: what the recorded stages log to, their checkpoint folders and the skipped-files log.
  """
  stage1_key, stage2_key = keys
  products, trained = {}, {}
  previous, epochs_before = None, 0
  for position, stage in enumerate(stages):
    stage_config = config_of_stage(config, stage)
    context = spec_lib.Context(
      num_classes=dataset.num_classes,
      num_epochs=int(config.num_epochs),
      transition=transition,
      num_examples=len(noisy),
      products=dict(products),
      epochs_before=epochs_before,
    )
    method = stage_method(stage, config, context, history_wanted=history_wanted, dataset=dataset)
    recorded = not stage.auxiliary
    fit_settings = settings_lib.fit_settings(stage_config)
    state, table, history, best = loop.fit(
      model=model,
      method=method,
      table=stage_table(stage, previous, noisy, dataset.num_classes, method, fit_settings, mesh, stage1_key),
      dataset=dataset,
      clean_train_labels=clean,
      settings=fit_settings,
      key=stage_key(stage, stage1_key, stage2_key),
      mesh=mesh,
      stage=stage.name,
      log_fn=hooks.log if recorded else None,
      checkpoint_dir=hooks.checkpoint_dir(stage),
      on_resume=hooks.on_resume if recorded else None,
      init_variables=init_variables if stage.network == "fresh" else previous_network(previous, stage, model),
      init_opt_state=None
      if stage.optimizer_from is None
      else continued_optimizer(
        trained[stage.optimizer_from], renewed_since(stages, position, previous.state.params, model)
      ),
      skipped_files=hooks.skipped_files if recorded else None,
    )
    epochs_before += stage_clock(stage, stage_config)
    if stage.product is not None:
      variables = best if stage.product_from == "best_val" else state_lib.variables_of(state)
      probs = training_probs(stage_config, dataset, model, variables, mesh=mesh)
      products.update(stage.product(probs, config.method))
    previous = trained[stage.name] = StageResult(stage, stage_config, method, state, table, history, best)
  return trained, products
