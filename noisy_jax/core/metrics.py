"""Evaluation metrics for learning with noisy labels.

jax.numpy functions: they accept NumPy or JAX arrays and work under `jax.jit` (pass `num_classes` of
`confusion_matrix` as a static argument). Shapes are checked eagerly (they are static under jit too); value checks
(class ids in range, boolean flags) run only on concrete inputs.

  accuracy            fraction of argmax predictions equal to the labels
  label_recovery      Joint Optimization's "recovery accuracy" (Tanaka et al., CVPR 2018): how often the label
                      table's argmax equals the clean label, overall / on noisy / on clean examples
  detection_scores    precision / recall / F1 of flagging noisy examples (e.g. truncated Lq's pruned set)
  confusion_matrix    M[i, j] = #(true = i, predicted = j)

Scalar results are float32 JAX scalars; a fraction over an empty set is NaN (accuracy, label_recovery), except
for detection scores, where a zero denominator gives 0.0 (scikit-learn's `zero_division=0`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks


def _class_ids(name: str, values) -> jax.Array:
  """[N] ids -> int32 [N]; [N, C] scores or probabilities -> argmax over C (first maximum on ties)."""
  values = jnp.asarray(values)
  if values.ndim == 2:
    return jnp.argmax(values, axis=-1).astype(jnp.int32)
  if values.ndim == 1:
    return values.astype(jnp.int32)
  raise ValueError(f"{name} must be class ids [N] or scores [N, C], got shape {values.shape}.")


def _check_length(name_a: str, a, name_b: str, b) -> None:
  if a.shape[0] != b.shape[0]:
    raise ValueError(f"{name_a} has {a.shape[0]} examples but {name_b} has {b.shape[0]}; they must match.")


def _mean_or_nan(mask: jax.Array, where: jax.Array) -> jax.Array:
  """sum(mask & where) / sum(where) as float32; NaN when `where` is empty."""
  total = jnp.sum(where, dtype=jnp.float32)
  hits = jnp.sum(mask & where, dtype=jnp.float32)
  return jnp.where(total > 0, hits / jnp.maximum(total, 1.0), jnp.nan)


def _safe_ratio(numerator: jax.Array, denominator: jax.Array) -> jax.Array:
  """numerator / denominator, 0.0 where the denominator is 0."""
  return jnp.where(denominator > 0, numerator / jnp.maximum(denominator, 1.0), 0.0)


def accuracy(predictions, labels) -> jax.Array:
  """Top-1 accuracy: mean_i [argmax_c predictions[i, c] = labels[i]].

  Args:
    predictions: [N, C] logits or probabilities (argmax taken), or [N] predicted class ids.
    labels: [N] integer class ids.

  Returns:
    float32 scalar in [0, 1]; NaN when N = 0.
  """
  predicted = _class_ids("predictions", predictions)
  labels = jnp.asarray(labels)
  if labels.ndim != 1:
    raise ValueError(f"labels must be class ids [N], got shape {labels.shape}.")
  _check_length("predictions", predicted, "labels", labels)
  return _mean_or_nan(predicted == labels.astype(jnp.int32), jnp.ones(labels.shape, bool))


def log_margins(probs, labels) -> jax.Array:
  """Per-example margin log p_y - max_{c != y} log p_c of probabilities [N, C] for class ids [N]; returns [N].

  Equal to the logit margin z_y - max_{c != y} z_c (softmax preserves logit differences); positive exactly when
  the example is classified correctly (ties aside). Probabilities are floored at 1e-30 before the log.
  """
  probs = jnp.asarray(probs, jnp.float32)
  labels = jnp.asarray(labels)
  if probs.ndim != 2 or labels.ndim != 1:
    raise ValueError(f"probs must be [N, C] and labels [N], got shapes {probs.shape} and {labels.shape}.")
  _check_length("probs", probs, "labels", labels)
  log_p = jnp.log(jnp.maximum(probs, 1e-30))
  target = jnp.take_along_axis(log_p, labels[:, None].astype(jnp.int32), axis=1)[:, 0]
  others = jnp.where(jax.nn.one_hot(labels, probs.shape[1], dtype=bool), -jnp.inf, log_p)
  return target - jnp.max(others, axis=1)


def label_recovery(table_labels, clean_labels, given_labels, counted=None) -> dict[str, jax.Array]:
  """Label recovery accuracy of a label table (Tanaka et al., CVPR 2018, "recovery accuracy").

  recovered_i = [argmax_c table_labels[i, c] = clean_i]; with noisy_i = [given_i != clean_i]:
    overall  = mean_i recovered_i
    on_noisy = mean of recovered_i over examples whose given label was wrong (noisy_i)
    on_clean = mean of recovered_i over examples whose given label was right (not noisy_i)

  Args:
    table_labels: [N, C] soft labels (argmax taken; first maximum on ties) or [N] class ids.
    clean_labels: [N] true class ids.
    given_labels: [N] the (noisy) class ids the training started from.
    counted: None (every example) or [N] bool, the examples the means run over (e.g. the real rows of a label
      table padded for sharding, noisy_jax.parallel.table_sharding); the others are ignored whatever their values.

  Returns:
    {'overall', 'on_noisy', 'on_clean'}: float32 scalars; NaN for an empty subset.
  """
  table_ids = _class_ids("table_labels", table_labels)
  clean = _class_ids("clean_labels", clean_labels)
  given = _class_ids("given_labels", given_labels)
  if np.ndim(clean_labels) != 1 or np.ndim(given_labels) != 1:
    raise ValueError(
      f"clean_labels and given_labels must be class ids [N], got shapes "
      f"{np.shape(clean_labels)} and {np.shape(given_labels)}."
    )
  _check_length("table_labels", table_ids, "clean_labels", clean)
  _check_length("given_labels", given, "clean_labels", clean)
  counted = jnp.ones(clean.shape, bool) if counted is None else _as_flags("counted", counted)
  _check_length("counted", counted, "clean_labels", clean)
  recovered = table_ids == clean
  is_noisy = given != clean
  return {
    "overall": _mean_or_nan(recovered, counted),
    "on_noisy": _mean_or_nan(recovered, is_noisy & counted),
    "on_clean": _mean_or_nan(recovered, ~is_noisy & counted),
  }


def _as_flags(name: str, values) -> jax.Array:
  if np.ndim(values) != 1:
    raise ValueError(f"{name} must be a 1-D boolean vector, got shape {np.shape(values)}.")
  if _checks.is_concrete(values):
    host = np.asarray(values)
    if host.dtype != bool and not np.all((host == 0) | (host == 1)):
      raise ValueError(f"{name} must hold booleans (or 0/1), got values {np.unique(host)[:5]!r}.")
  return jnp.asarray(values).astype(bool)


def detection_scores(flagged, is_noisy, counted=None) -> dict[str, jax.Array]:
  """Precision, recall and F1 of noisy-label detection, the positive class being "noisy".

  With TP = #(flagged & is_noisy), FP = #(flagged & ~is_noisy), FN = #(~flagged & is_noisy):
    precision = TP / (TP + FP),  recall = TP / (TP + FN),  f1 = 2 TP / (2 TP + FP + FN)
  (f1 is the harmonic mean of precision and recall). A zero denominator gives 0.0, as scikit-learn's
  `precision_recall_fscore_support(..., zero_division=0)`: no flags -> precision 0; no noisy example ->
  recall 0; neither -> f1 0.

  Args:
    flagged: [N] bool (or 0/1), True = predicted noisy (e.g. pruned by truncated Lq).
    is_noisy: [N] bool (or 0/1), True = the given label differs from the clean one.
    counted: None (every example) or [N] bool, the examples counted in TP, FP and FN (see label_recovery).

  Returns:
    {'precision', 'recall', 'f1'}: float32 scalars in [0, 1].
  """
  flagged = _as_flags("flagged", flagged)
  is_noisy = _as_flags("is_noisy", is_noisy)
  _check_length("flagged", flagged, "is_noisy", is_noisy)
  if counted is not None:
    counted = _as_flags("counted", counted)
    _check_length("counted", counted, "is_noisy", is_noisy)
    flagged, is_noisy = flagged & counted, is_noisy & counted
  true_pos = jnp.sum(flagged & is_noisy, dtype=jnp.float32)
  false_pos = jnp.sum(flagged & ~is_noisy, dtype=jnp.float32)
  false_neg = jnp.sum(~flagged & is_noisy, dtype=jnp.float32)
  return {
    "precision": _safe_ratio(true_pos, true_pos + false_pos),
    "recall": _safe_ratio(true_pos, true_pos + false_neg),
    "f1": _safe_ratio(2.0 * true_pos, 2.0 * true_pos + false_pos + false_neg),
  }


def confusion_matrix(true_labels, predicted_labels, num_classes: int) -> jax.Array:
  """Confusion counts M[i, j] = #(true = i, predicted = j).

  Args:
    true_labels: [N] class ids in [0, C).
    predicted_labels: [N] class ids, or [N, C] scores (argmax taken).
    num_classes: C (static under jit).

  Returns:
    int32 [C, C]; rows sum to the true class counts. Out-of-range ids raise ValueError on concrete input and
    are not counted under jit.
  """
  if isinstance(num_classes, bool) or int(num_classes) != num_classes or num_classes < 1:
    raise ValueError(f"num_classes={num_classes!r} must be a positive integer.")
  num_classes = int(num_classes)
  true_ids = _class_ids("true_labels", true_labels)
  if np.ndim(true_labels) != 1:
    raise ValueError(f"true_labels must be class ids [N], got shape {np.shape(true_labels)}.")
  predicted = _class_ids("predicted_labels", predicted_labels)
  _check_length("true_labels", true_ids, "predicted_labels", predicted)
  if _checks.is_concrete(true_labels):
    _checks.check_labels("true_labels", true_labels, num_classes)
  if np.ndim(predicted_labels) == 1 and _checks.is_concrete(predicted_labels):
    _checks.check_labels("predicted_labels", predicted_labels, num_classes)
  valid = (true_ids >= 0) & (true_ids < num_classes) & (predicted >= 0) & (predicted < num_classes)
  flat = jnp.where(valid, true_ids * num_classes + predicted, 0)
  counts = jnp.bincount(flat, weights=valid.astype(jnp.int32), length=num_classes * num_classes)
  return counts.astype(jnp.int32).reshape(num_classes, num_classes)


def train_split_metrics(probs, given_labels, clean_labels=None) -> dict[str, float]:
  """What the network predicts on its own training split, against the labels it trains on and the true ones.

  With predicted_i = argmax_c probs[i, c] and noisy_i = [given_i != clean_i]:
    train_accuracy_clean                    mean_i [predicted_i = clean_i]
    train_accuracy_on_clean_examples        mean over not noisy_i of [predicted_i = given_i]  (fitted)
    memorised_fraction                      mean over noisy_i of [predicted_i = given_i]      (wrong labels memorised)
    train_accuracy_true_on_noisy_examples   mean over noisy_i of [predicted_i = clean_i]
    train_accuracy_given_labels             mean_i [predicted_i = given_i]  (what the loss is fitting)
  Without clean labels (None: labels taken as given) only train_accuracy_given_labels exists; a mean over an empty
  subset is left out. Python floats (float64 means of NumPy booleans), in this order.

  Args:
    probs: [N, C] probabilities (or scores) on the training split.
    given_labels: [N] the labels trained on.
    clean_labels: [N] the true labels, or None.
  """
  predicted = np.argmax(np.asarray(probs), axis=-1)
  given = np.asarray(given_labels)
  out = {}
  if clean_labels is not None:
    clean = np.asarray(clean_labels)
    is_noisy = clean != given
    out["train_accuracy_clean"] = float(np.mean(predicted == clean))
    if (~is_noisy).any():
      out["train_accuracy_on_clean_examples"] = float(np.mean(predicted[~is_noisy] == given[~is_noisy]))
    if is_noisy.any():
      out["memorised_fraction"] = float(np.mean(predicted[is_noisy] == given[is_noisy]))
      out["train_accuracy_true_on_noisy_examples"] = float(np.mean(predicted[is_noisy] == clean[is_noisy]))
  out["train_accuracy_given_labels"] = float(np.mean(predicted == given))
  return out
