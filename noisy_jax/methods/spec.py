"""What the registry holds of a method: its config fields, its builder and its tiny test runs (`MethodSpec`).

A method module defines `SPEC = MethodSpec(...)`; noisy_jax.methods.registry lists the specs, one line each. The
trainer never sees a spec: `build` turns `config.method` into the `noisy_jax.train.method.Method` it trains.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

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
  """

  num_classes: int
  num_epochs: int | None = None
  transition: np.ndarray | None = None
  num_examples: int | None = None


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
    has_stage2: `(method_config) -> bool`: whether a run trains a second stage after this method (Joint
      Optimization).
    sweep_fields: None when sweeps (noisy_jax.experiment.sweep) refuse the method (per-example state or two
      networks), else `(method_config) -> paths`: the fields of config.method (dotted paths below it) that may differ
      between a sweep's members (traced: the builder must accept tracers for them, `as_is`).
  """

  name: str
  fields: tuple[str, ...]
  build: Callable[[Any, Context], method_lib.Method]
  tiny: dict[str, dict]
  needs_transition: bool = False
  has_stage2: Callable[[Any], bool] = lambda method_config: False
  sweep_fields: Callable[[Any], tuple[str, ...]] | None = None


def as_is(value):
  """The cast of a field that a sweep may trace (noisy_jax.experiment.sweep): float() would refuse a tracer."""
  return value


def given(method_config, **casts) -> dict:
  """The fields of `method_config` named in `casts` that the config sets, each cast (name=type, or `as_is`): the
  builder's own signature holds every default, once."""
  return {name: cast(method_config[name]) for name, cast in casts.items() if name in method_config}
