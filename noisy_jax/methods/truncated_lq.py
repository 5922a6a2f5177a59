"""Truncated Lq loss optimised by alternating convex search (ACS): Zhang & Sabuncu, NeurIPS 2018.

The objective is (1/B) sum_i w_i (Lq_i - Lq(k)), Lq = (1 - p_y^q) / q (losses.generalized_cross_entropy); before epoch
`prune_start` and every `prune_every` epochs after it, w_i = [p_y(x_i) > k] over the training set, with p computed
by the best-validation parameters (`prune_params='best_val'`, the paper) or the current ones ('current').
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from noisy_jax.core import _checks
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import losses
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import method as method_lib

PRUNE_PARAMS = ("best_val", "current")


def prune_weights(table: label_table_lib.LabelTable, train_probs: jax.Array, *, k: float):
  """The pruning step: w_i = [p_y(x_i) > k], p_y = sum_c y_ic p_ic with y the table's labels."""
  p_target = jnp.sum(table.soft_labels * train_probs, axis=-1)
  return label_table_lib.set_all_weights(table, (p_target > k).astype(table.weights.dtype))


def method(
  *, q: float = 0.7, k: float = 0.5, prune_start: int = 40, prune_every: int = 10, prune_params: str = "best_val"
) -> method_lib.Method:
  """Truncated Lq with ACS pruning (module docstring)."""
  _checks.check_range("q", q, 0.0, 1.0, low_open=True)
  _checks.check_range("k", k, 0.0, 1.0, low_open=True, high_open=True)
  _checks.check_choice("prune_params", prune_params, PRUNE_PARAMS)
  if prune_start < 1 or prune_every < 1:
    raise ValueError(f"prune_start={prune_start!r} and prune_every={prune_every!r} must both be >= 1 (epochs).")
  lq_at_k = (1.0 - k**q) / q

  def objective(logits, soft_labels, weights, valid, axis_name=None):
    per_example = losses.generalized_cross_entropy(logits, soft_labels, q=q) - lq_at_k
    return method_lib.weighted_batch_mean(per_example, weights, valid, axis_name)

  def update_due(epoch: int) -> bool:
    # Weights are set before epoch prune_start, prune_start + prune_every, ...: after the epoch before it.
    upcoming = epoch + 1
    return upcoming >= prune_start and (upcoming - prune_start) % prune_every == 0

  return method_lib.Method(
    name="truncated_lq",
    objective=method_lib.batch_objective(objective),
    epoch_end=method_lib.EpochEnd(
      update=lambda table, probs, epoch, num_examples: prune_weights(table, probs, k=k),
      due=update_due,
      reads=prune_params,
    ),
  )


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  del context
  return method(
    **spec_lib.given(
      method_config, q=spec_lib.as_is, k=spec_lib.as_is, prune_start=int, prune_every=int, prune_params=str
    )
  )


SPEC = spec_lib.MethodSpec(
  name="truncated_lq",
  fields=("q", "k", "prune_start", "prune_every", "prune_params"),
  build=_build,
  tiny={
    "truncated_lq": {
      "method": {
        "name": "truncated_lq",
        "q": 0.7,
        "k": 0.5,
        "prune_start": 2,
        "prune_every": 1,
        "prune_params": "best_val",
      }
    }
  },
  sweep_fields=lambda method_config: ("q", "k"),
)
