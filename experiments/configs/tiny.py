"""Tiny runs of every registered method: what the golden values, stop/resume and 1 == N device tests train.

  python -m experiments.run --config=experiments/configs/tiny.py:coteaching_plus

A case is a method's entry of `MethodSpec.tiny` (noisy_jax.methods.registry.tiny_cases) applied to `base()`: the 8x8
digits at 40% symmetric noise, a one-layer MLP (64 units), 3 epochs of SGD with the learning rate decayed after epoch
2, no checkpoints. A new method's cases join every one of those tests by its registry line.

One run of each case serves all three (tests/test_method_runs.py): `checkpointed(get_config(case))` in a workdir
(`python -m experiments.golden --workdir=DIR`) gives the golden values (checkpoints move no number), is the reference
that a stopped and resumed run must equal bit for bit, and is the 1-device side of 1 == 4 devices.
"""

from __future__ import annotations

import ml_collections

from experiments.configs import ce
from noisy_jax.methods import registry


def base() -> ml_collections.ConfigDict:
  """The run every case starts from (module docstring)."""
  config = ce.get_config()
  config.dataset = "digits"
  config.noise.rate = 0.4
  config.num_epochs = 3
  config.optimizer.lr_boundaries = (2,)
  config.model.name = "mlp"
  config.model.kwargs = {"hidden_sizes": (64,)}
  config.checkpoint_every = 0
  return config


def apply(config: ml_collections.ConfigDict, overrides: dict) -> ml_collections.ConfigDict:
  """`config` with `overrides` (MethodSpec.tiny's form: a top-level key replaces that field whole, a dotted key sets
  one leaf) applied in place; returned for chaining."""
  for key, value in overrides.items():
    if isinstance(value, dict):
      value = ml_collections.ConfigDict(value)
    *parents, last = key.split(".")
    node = config
    for part in parents:
      node = node[part]
    if not parents and last in node and isinstance(node[last], ml_collections.ConfigDict) and value is not None:
      del node[last]  # replaced whole, not merged: a field of the base's block does not survive
    node[last] = value
  return config


# The checkpoints of a run in a workdir: after epoch 2 and after the last (3), so that a run stopped in epoch 3, before
# its checkpoint, resumes from epoch 2's.
CHECKPOINT_EVERY = 2


def checkpointed(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """`config` (in place, returned) checkpointed every CHECKPOINT_EVERY epochs and after its last, keeping two: what a
  tiny run in a workdir writes (module docstring). Training is unchanged."""
  config.checkpoint_every = CHECKPOINT_EVERY
  config.keep_checkpoints = 2
  return config


def case_names() -> tuple[str, ...]:
  return tuple(registry.tiny_cases())


def get_config(case: str = "ce") -> ml_collections.ConfigDict:
  """The tiny run `case` (one of case_names())."""
  cases = registry.tiny_cases()
  if case not in cases:
    raise ValueError(f"tiny case {case!r} is not registered; the cases: {', '.join(cases)}.")
  return apply(base(), cases[case][1])
