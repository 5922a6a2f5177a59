"""Metrics against NumPy / scikit-learn re-computations, eagerly and under jax.jit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn import metrics as sk_metrics

from noisy_jax.core import metrics

RNG = np.random.default_rng(0)
N, C = 200, 6
LOGITS = RNG.normal(size=(N, C)).astype(np.float32)
LABELS = RNG.integers(0, C, size=N)


def _both(fn, *args, **static):
  """(eager result, jitted result); `static` keyword arguments are marked static for jit."""
  eager = fn(*args, **static)
  jitted = jax.jit(fn, static_argnames=tuple(static))(*[jnp.asarray(a) for a in args], **static)
  return eager, jitted


def test_accuracy_logits_probabilities_and_ids():
  expected = np.mean(LOGITS.argmax(axis=1) == LABELS)
  for predictions in (LOGITS, jax.nn.softmax(LOGITS), LOGITS.argmax(axis=1)):
    for value in _both(metrics.accuracy, predictions, LABELS):
      assert float(value) == pytest.approx(expected, abs=1e-6)
  assert float(metrics.accuracy(np.eye(3), [0, 1, 2])) == 1.0
  assert float(metrics.accuracy(np.eye(3), [1, 2, 0])) == 0.0


def test_accuracy_empty_is_nan():
  assert np.isnan(float(metrics.accuracy(np.zeros((0, 3)), np.zeros(0, int))))


def _recovery_reference(table, clean, given):
  recovered = table.argmax(axis=1) == clean
  noisy = given != clean
  mean = lambda x: float(np.mean(x)) if x.size else float("nan")
  return {"overall": mean(recovered), "on_noisy": mean(recovered[noisy]), "on_clean": mean(recovered[~noisy])}


def test_label_recovery_against_numpy():
  clean = LABELS
  given = np.where(RNG.random(N) < 0.4, RNG.integers(0, C, size=N), clean)
  table = jax.nn.softmax(LOGITS + 3 * np.eye(C)[clean] * (RNG.random((N, 1)) < 0.7))
  table = np.asarray(table)
  expected = _recovery_reference(table, clean, given)
  assert 0 < expected["on_noisy"] < 1 and 0 < expected["on_clean"] < 1
  for result in _both(metrics.label_recovery, table, clean, given):
    assert set(result) == {"overall", "on_noisy", "on_clean"}
    for key, value in expected.items():
      assert float(result[key]) == pytest.approx(value, abs=1e-6)
  # Hard ids give the same answer as the one-hot/soft table.
  ids = metrics.label_recovery(table.argmax(axis=1), clean, given)
  assert float(ids["overall"]) == pytest.approx(expected["overall"], abs=1e-6)


def test_label_recovery_empty_subsets_are_nan():
  clean = np.array([0, 1, 2])
  table = np.eye(3)[[0, 1, 0]]
  no_noise = metrics.label_recovery(table, clean, clean)
  assert np.isnan(float(no_noise["on_noisy"]))
  assert float(no_noise["on_clean"]) == pytest.approx(2 / 3)
  all_noisy = jax.jit(metrics.label_recovery)(table, clean, np.array([1, 2, 0]))
  assert np.isnan(float(all_noisy["on_clean"]))
  assert float(all_noisy["on_noisy"]) == pytest.approx(2 / 3)


def test_counted_rows_equal_the_metrics_of_those_rows_alone():
  """`counted` (the real rows of a padded, sharded label table) gives exactly the metrics of the counted rows alone,
  whatever the other rows hold."""
  clean = LABELS
  given = np.where(RNG.random(N) < 0.4, RNG.integers(0, C, size=N), clean)
  table = np.asarray(jax.nn.softmax(LOGITS))
  flagged = RNG.random(N) < 0.3
  counted = RNG.random(N) < 0.7
  junk = lambda x: np.where(counted.reshape((-1,) + (1,) * (x.ndim - 1)), x, np.roll(x, 1, axis=0))
  for name, fn, args in (
    ("recovery", metrics.label_recovery, (table, clean, given)),
    ("detection", metrics.detection_scores, (flagged, given != clean)),
  ):
    alone = fn(*(a[counted] for a in args))
    for result in _both(fn, *(junk(a) for a in args), counted):
      assert set(result) == set(alone)
      for key in alone:
        assert float(result[key]) == float(alone[key]), (name, key)


@pytest.mark.parametrize("case", ["random", "no_flags", "no_noise", "all_flagged", "perfect"])
def test_detection_scores_against_sklearn(case):
  rng = np.random.default_rng(1)
  is_noisy = rng.random(N) < 0.3
  flagged = np.where(rng.random(N) < 0.8, is_noisy, ~is_noisy)
  if case == "no_flags":
    flagged = np.zeros(N, bool)
  elif case == "no_noise":
    is_noisy = np.zeros(N, bool)
  elif case == "all_flagged":
    flagged = np.ones(N, bool)
  elif case == "perfect":
    flagged = is_noisy.copy()
  precision, recall, f1, _ = sk_metrics.precision_recall_fscore_support(
    is_noisy, flagged, average="binary", pos_label=True, zero_division=0
  )
  for result in _both(metrics.detection_scores, flagged, is_noisy):
    assert float(result["precision"]) == pytest.approx(precision, abs=1e-6)
    assert float(result["recall"]) == pytest.approx(recall, abs=1e-6)
    assert float(result["f1"]) == pytest.approx(f1, abs=1e-6)
  if case == "no_flags":
    assert (float(result["precision"]), float(result["recall"]), float(result["f1"])) == (0.0, 0.0, 0.0)
  if case == "perfect":
    assert float(result["f1"]) == 1.0
  # 0/1 integers are the same as booleans.
  ints = metrics.detection_scores(flagged.astype(int), is_noisy.astype(int))
  assert float(ints["f1"]) == pytest.approx(f1, abs=1e-6)


def test_confusion_matrix_against_sklearn():
  predicted = RNG.integers(0, C, size=N)
  expected = sk_metrics.confusion_matrix(LABELS, predicted, labels=np.arange(C))
  for result in _both(metrics.confusion_matrix, LABELS, predicted, num_classes=C):
    assert result.dtype == jnp.int32 and result.shape == (C, C)
    np.testing.assert_array_equal(result, expected)
  # Scores are argmax-ed; rows sum to the class counts.
  from_scores = metrics.confusion_matrix(LABELS, LOGITS, C)
  np.testing.assert_array_equal(
    from_scores, sk_metrics.confusion_matrix(LABELS, LOGITS.argmax(axis=1), labels=np.arange(C))
  )
  np.testing.assert_array_equal(np.asarray(from_scores).sum(axis=1), np.bincount(LABELS, minlength=C))
  # Absent classes give zero rows.
  small = metrics.confusion_matrix([0, 0, 2], [0, 2, 2], 4)
  np.testing.assert_array_equal(small, [[1, 0, 1, 0], [0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]])


def test_confusion_matrix_under_jit_drops_out_of_range_ids():
  jitted = jax.jit(metrics.confusion_matrix, static_argnames="num_classes")
  result = jitted(jnp.array([0, 1, 5, -1]), jnp.array([0, 1, 1, 0]), num_classes=3)
  np.testing.assert_array_equal(result, [[1, 0, 0], [0, 1, 0], [0, 0, 0]])


@pytest.mark.parametrize(
  "call, match",
  [
    (lambda: metrics.accuracy(LOGITS, LABELS[:-1]), "examples"),
    (lambda: metrics.accuracy(LOGITS[None], LABELS), "shape"),
    (lambda: metrics.label_recovery(LOGITS, LABELS, LABELS[:-1]), "examples"),
    (lambda: metrics.label_recovery(LOGITS[:-1], LABELS, LABELS), "examples"),
    (lambda: metrics.detection_scores(np.ones(3, bool), np.ones(4, bool)), "examples"),
    (lambda: metrics.detection_scores(np.array([0.2, 0.9]), np.ones(2, bool)), "booleans"),
    (lambda: metrics.confusion_matrix(LABELS, LABELS[:-1], C), "examples"),
    (lambda: metrics.confusion_matrix([0, 3], [0, 1], 3), "class id 3"),
    (lambda: metrics.confusion_matrix([0, 1], [0, -1], 3), "class id -1"),
    (lambda: metrics.confusion_matrix([0, 1], [0, 1], 0), "num_classes"),
  ],
)
def test_value_errors(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_log_margins_equal_logit_margins():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(20, 5)) * 3
  labels = rng.integers(0, 5, 20)
  probs = np.exp(logits - logits.max(1, keepdims=True))
  probs /= probs.sum(1, keepdims=True)
  others = np.where(np.eye(5, dtype=bool)[labels], -np.inf, logits)
  expected = logits[np.arange(20), labels] - others.max(1)
  np.testing.assert_allclose(metrics.log_margins(probs, labels), expected, rtol=1e-4, atol=1e-4)
  assert np.array_equal(np.asarray(metrics.log_margins(probs, labels)) > 0, logits.argmax(1) == labels)
  with pytest.raises(ValueError, match="probs must be"):
    metrics.log_margins(probs[0], labels)


def test_train_split_metrics_with_and_without_clean_labels():
  probs = np.eye(3)[[0, 1, 2, 2, 1, 0]]  # predicted 0 1 2 2 1 0
  given = np.array([0, 1, 1, 2, 0, 2])
  clean = np.array([0, 1, 2, 2, 1, 2])  # rows 2 and 4 noisy: predicted their true labels; rows 5 fitted wrongly
  out = metrics.train_split_metrics(probs, given, clean)
  assert list(out) == [
    "train_accuracy_clean",
    "train_accuracy_on_clean_examples",
    "memorised_fraction",
    "train_accuracy_true_on_noisy_examples",
    "train_accuracy_given_labels",
  ]
  assert out["train_accuracy_clean"] == 5 / 6 and out["train_accuracy_on_clean_examples"] == 3 / 4
  assert out["memorised_fraction"] == 0.0 and out["train_accuracy_true_on_noisy_examples"] == 1.0
  assert out["train_accuracy_given_labels"] == 3 / 6
  # Labels taken as given: only what needs no truth.
  assert metrics.train_split_metrics(probs, given) == {"train_accuracy_given_labels": 3 / 6}
  # No noisy example: no memorisation entries (a mean over nothing is left out, not NaN).
  assert set(metrics.train_split_metrics(probs, given, given)) == {
    "train_accuracy_clean",
    "train_accuracy_on_clean_examples",
    "train_accuracy_given_labels",
  }
