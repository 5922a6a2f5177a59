"""What the registry holds of a method: its config fields, its builder, its stages and its tiny test runs.

A method module defines `SPEC = MethodSpec(...)`; noisy_jax.methods.registry lists the specs, one line each. The
trainer never sees a spec: `build` turns `config.method` into the `noisy_jax.train.method.Method` it trains, and
`stages` says which trainings a run of the method is (`Stage`: Joint Optimization's second stage, loss correction's
estimation run); noisy_jax.experiment.runs trains them in order.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import numpy as np

from noisy_jax.train import method as method_lib


@dataclasses.dataclass(frozen=True)
class Context:
  """What a builder may need besides `config.method`.

  Attributes:
    num_classes: C, the dataset's class count.
    num_epochs: the run's stage-1 epochs (Co-teaching's forget-rate schedule, JoCoR's).
    transition: the resolved [C, C] noise transition matrix for methods with `needs_transition`, else None.
    num_examples: N, the training split's size (DISC's first thresholds, 1/N), when the caller knows it.
    products: what the run's earlier stages made for the later ones ({name: value}, `Stage.product`).
    epochs_before: the run's clock at this stage's start: the epochs its earlier stages count (`Stage.clock_epochs`),
      for a stage whose schedules continue the run's (PES's last stage: loop epoch T1 + 1 at its first epoch).
  """

  num_classes: int
  num_epochs: int | None = None
  transition: np.ndarray | None = None
  num_examples: int | None = None
  products: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  epochs_before: int = 0


TABLE_STARTS = ("noisy", "previous")
NETWORK_STARTS = ("fresh", "previous_best", "previous_final")
PRODUCT_SOURCES = ("final", "best_val")


@dataclasses.dataclass(frozen=True)
class Stage:
  """One training of a method's run: noisy_jax.experiment.runs trains a method's stages in order, each with
  noisy_jax.train.loop.fit, resumable from its own checkpoints.

  Attributes:
    name: its records' `stage`, its checkpoint folder (WORKDIR/checkpoints/NAME), its summary entry and its arrays'
      key ("stage1" for the method's own training).
    key_stream: the key it trains with, from the run's seed: 0 the first stage key, 1 the second, n > 1
      fold_in(second, n).
    build: None (the method of config.method, built by its spec) or `(method_config, Context) -> Method` (a stage
      that trains another objective: cross entropy on the first stage's soft labels).
    config_section: None (the run's config) or the name of the config field whose values replace the run's for
      this stage ("stage2": its epochs and optimiser).
    table: where its label table starts: 'noisy' (the run's labels) or 'previous' (a fresh table holding the
      previous stage's soft labels).
    network: where its network starts: 'fresh' (initialised from its key, or the run's pretrained weights),
      'previous_best' or 'previous_final' (the previous stage's best-validation or final variables; its optimiser
      starts afresh).
    renew: top-level modules of the network (names, or name prefixes; `optim.CLASSIFIER` for the model's classifier)
      re-initialised, params and BatchNorm statistics, from the stage's own fresh initialisation when it starts from
      a previous stage's network (PES's refine: the last block and the classifier).
    trainable: () (every parameter trains) or the top-level modules that alone train in this stage, as renew names
      them: the stage's `optimizer.trainable_modules` (noisy_jax.train.optim; the others frozen, their BatchNorm
      statistics still moving in train mode).
    optimizer_from: None (its optimiser starts afresh) or the name of an earlier stage whose final optimiser state
      (momentum, moments, schedule counts) it continues; the two optimisers must have the same structure (PES's
      last stage continues its first stage's SGD across the refines).
    clock_epochs: the epochs this stage counts on the run's clock (Context.epochs_before of the later stages); None:
      its own num_epochs.
    auxiliary: a training whose only use is its product: not checkpointed (a resumed run trains it again, the same
      way), its epochs not logged; its summary is `{"epochs", **summary_of(history)}`.
    product: None, or `(train_probs [N, C] float64, method_config) -> {name: value}`: made from the stage's eval-mode
      softmax of the training split and given to the later stages as Context.products (the estimated transition).
    product_from: which of the stage's networks gives that softmax: 'final' or 'best_val' (its best-validation
      variables; the final ones without a validation split).
    delivers: this stage's network is the run's: exported, scored on carved validation rows; its history gives the
      summary's accuracies.
    scores_labels: its method and label table give label_issues.csv and the summary's label metrics.
  """

  name: str
  key_stream: int = 0
  build: Callable[[Any, "Context"], method_lib.Method] | None = None
  config_section: str | None = None
  table: str = "noisy"
  network: str = "fresh"
  renew: tuple[str, ...] = ()
  trainable: tuple[str, ...] = ()
  optimizer_from: str | None = None
  clock_epochs: int | None = None
  auxiliary: bool = False
  product: Callable[[np.ndarray, Any], dict] | None = None
  product_from: str = "final"
  delivers: bool = False
  scores_labels: bool = False

  def __post_init__(self):
    for field, allowed in (("table", TABLE_STARTS), ("network", NETWORK_STARTS), ("product_from", PRODUCT_SOURCES)):
      if getattr(self, field) not in allowed:
        raise ValueError(f"stage {self.name!r}: {field}={getattr(self, field)!r}; allowed: {allowed}.")
    if self.renew and self.network == "fresh":
      raise ValueError(f"stage {self.name!r}: renew={self.renew!r} needs a network from a previous stage.")
    if self.clock_epochs is not None and (int(self.clock_epochs) != self.clock_epochs or self.clock_epochs < 0):
      raise ValueError(f"stage {self.name!r}: clock_epochs={self.clock_epochs!r} must be an integer >= 0 or None.")


# A method's own training, the whole run for most methods.
OWN_STAGE = Stage("stage1", delivers=True, scores_labels=True)


def check_stages(stages: tuple[Stage, ...], method_name: str) -> tuple[Stage, ...]:
  """`stages` when they make a run (ValueError otherwise): distinct names, exactly one stage that trains the
  method itself (`build` None), one that delivers and one that scores labels, neither auxiliary, no 'previous'
  table or network in the first stage, and an `optimizer_from` that names an earlier stage (not auxiliary)."""
  names = [stage.name for stage in stages]
  problems = []
  if len(set(names)) != len(names):
    problems.append(f"repeated names {names}")
  for what, has in (
    ("trains the method itself (build None)", lambda s: s.build is None),
    ("delivers", lambda s: s.delivers),
    ("scores labels", lambda s: s.scores_labels),
  ):
    if sum(1 for s in stages if has(s)) != 1:
      problems.append(f"not exactly one stage that {what}")
  if any(s.auxiliary and (s.delivers or s.scores_labels) for s in stages):
    problems.append("an auxiliary stage delivers or scores labels")
  if stages and (stages[0].table == "previous" or stages[0].network != "fresh"):
    problems.append("the first stage starts from a previous stage's table or network")
  for position, stage in enumerate(stages):
    earlier = [s.name for s in stages[:position] if not s.auxiliary]
    if stage.optimizer_from is not None and stage.optimizer_from not in earlier:
      problems.append(f"{stage.name!r} continues the optimiser of {stage.optimizer_from!r}, not an earlier stage")
  if problems:
    raise ValueError(f"method {method_name!r}: its stages {names} do not make a run: {'; '.join(problems)}.")
  return tuple(stages)


def one_stage(method_config) -> tuple[Stage, ...]:
  """The stages of a method trained once: its own."""
  del method_config
  return (OWN_STAGE,)


@dataclasses.dataclass(frozen=True)
class MethodSpec:
  """One method of the registry.

  Attributes:
    name: the value of `config.method.name`.
    fields: the other fields `config.method` may set (each one's default lives in the builder's signature).
    build: `(method_config, Context) -> Method`.
    tiny: {case name: overrides} of short test runs on the digits (experiments/configs/tiny.py applies them to a
      3-epoch MLP run at 40% symmetric noise): the golden values, stop/resume and 1 == N device tests run every case.
      An override's key is a top-level config field, replaced whole ("method", "optimizer", "stage2"), or a dotted
      path to one leaf ("optimizer.learning_rate").
    needs_transition: the builder reads `Context.transition` (noisy_jax.experiment.runs resolves
      `config.method.transition` first).
    stages: `(method_config) -> tuple[Stage, ...]`, the trainings of a run in order: exactly one stage that builds
      the method itself (`build` None), one that `delivers` and one that `scores_labels`.
    sweep_fields: None when sweeps (noisy_jax.experiment.sweep) refuse the method (per-example state or two
      networks), else `(method_config) -> paths`: the fields of config.method (dotted paths below it) that may differ
      between a sweep's members (traced: the builder must accept tracers for them, `as_is`).
  """

  name: str
  fields: tuple[str, ...]
  build: Callable[[Any, Context], method_lib.Method]
  tiny: dict[str, dict]
  needs_transition: bool = False
  stages: Callable[[Any], tuple[Stage, ...]] = one_stage
  sweep_fields: Callable[[Any], tuple[str, ...]] | None = None


def as_is(value):
  """The cast of a field that a sweep may trace (noisy_jax.experiment.sweep): float() would refuse a tracer."""
  return value


def given(method_config, **casts) -> dict:
  """The fields of `method_config` named in `casts` that the config sets, each cast (name=type, or `as_is`): the
  builder's own signature holds every default, once."""
  return {name: cast(method_config[name]) for name, cast in casts.items() if name in method_config}
