"""What a method's own state says about the labels, per epoch: the label-table records of `loop.fit`.

table_metrics(table, clean, method)   relabelled / pruned fraction, label recovery, noise detection
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import metrics as metrics_lib
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import method as method_lib


def table_metrics(
  table: label_table_lib.LabelTable,
  clean: np.ndarray | None,
  method: method_lib.Method,
  *,
  num_examples: int | None = None,
) -> dict:
  """What the method's own state says about the labels: the fraction it relabelled (JO) or pruned (truncated Lq)
  and, when the clean labels are known, label recovery and noise detection (precision / recall / F1 of that set).

  clean: [N] true labels, or None (labels taken as given: only the fractions). num_examples: N, the real rows
  (default len(clean), else the table's rows). Computed where the table lives: one jitted reduction over its rows,
  replicated or sharded over the devices of one process or several (no copy of the table to the host or onto one
  device). A sharded table's padding rows are left out of every count (`counted`).
  """
  relabels = method.relabels_from_history
  if not relabels and not method.reads_train_probs:
    return {}
  rows = table.num_examples
  n = int(num_examples if num_examples is not None else (rows if clean is None else np.shape(clean)[0]))
  clean_rows = np.full((rows,), -1, np.int32)
  if clean is not None:
    clean_rows[:n] = np.asarray(clean)
  sharding = getattr(table.soft_labels, "sharding", None)
  if isinstance(sharding, jax.sharding.NamedSharding):  # beside the table, on its mesh
    clean_rows = mesh_lib.replicate(clean_rows, sharding.mesh)
  values = {
    k: v.item()
    for k, v in jax.device_get(_table_metric_values(table, clean_rows, num_examples=n, relabels=relabels)).items()
  }
  flagged = values.pop("flagged") / n
  if clean is None:
    return {"relabelled_fraction" if relabels else "pruned_fraction": flagged}
  out = {}
  if relabels:
    out.update({k: values[k] for k in values if k.startswith("label_recovery_")})
    out["relabelled_fraction"] = flagged  # argmax of the table differs from the given label
  else:
    out["pruned_fraction"] = flagged
  out.update({k: values[k] for k in values if k.startswith("detection_")})
  return out


@functools.partial(jax.jit, static_argnames=("num_examples", "relabels"))
def _table_metric_values(table: label_table_lib.LabelTable, clean_rows, *, num_examples: int, relabels: bool):
  """The scalars of table_metrics: clean_rows [N_pad] (-1 on padding rows); rows >= num_examples not counted."""
  counted = jnp.arange(table.num_examples) < num_examples
  given = table.noisy_labels
  out = {}
  if relabels:
    recovery = metrics_lib.label_recovery(table.soft_labels, clean_rows, given, counted=counted)
    out.update({f"label_recovery_{k}": v for k, v in recovery.items()})
    flagged = label_table_lib.changed(table)
  else:
    flagged = table.weights == 0
  out["flagged"] = jnp.sum(flagged & counted, dtype=jnp.int32)
  detection = metrics_lib.detection_scores(flagged, given != clean_rows, counted=counted)
  out.update({f"detection_{k}": v for k, v in detection.items()})
  return out
