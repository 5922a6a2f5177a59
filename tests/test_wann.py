"""noisy_jax.experiment.wann: the original code's formulas transcribed line by line in float64 (scikit-learn
NearestNeighbors, np.unique majority, a dict of weighted votes) give the same adaptive k, predictions and votes; the
leave-one-out probabilities equal WANN refitted without each example; invariants under permutation and duplicates."""

import collections

import numpy as np
import pytest

from noisy_jax.experiment import wann


def original_find_k(x, y, kmin, kmax):
  """find_k of WANN.py, transcribed: neighbours 1..k of NearestNeighbors(kmax + 1) (position 0: the row itself), k in
  range(kmin, kmax, 2), majority by np.unique + argmax, kmax where none agrees."""
  from sklearn.neighbors import NearestNeighbors  # pylint: disable=g-import-not-at-top

  optimal = np.full(len(x), -1)
  _, indices = NearestNeighbors(n_neighbors=kmax + 1).fit(x).kneighbors(x)
  for k in range(kmin, kmax, 2):
    mask = np.flatnonzero(optimal == -1)
    if len(mask) == 0:
      break
    predictions = []
    for row in indices[mask, 1 : k + 1]:
      values, counts = np.unique(y[row], return_counts=True)
      predictions.append(values[np.argmax(counts)])
    optimal[mask[np.asarray(predictions) == y[mask]]] = k
  optimal[optimal == -1] = kmax
  return optimal


def original_predict(x_train, y_train, optimal_k, x_test):
  """predict of WANN.py with adaptive_weighted_prediction of utils.py, transcribed: (predictions, vote dicts)."""
  from sklearn.neighbors import NearestNeighbors  # pylint: disable=g-import-not-at-top

  _, indices = NearestNeighbors(n_neighbors=int(np.max(optimal_k))).fit(x_train).kneighbors(x_test)
  predictions, all_votes = [], []
  for row in indices:
    size = optimal_k[row[0]]
    votes = collections.defaultdict(float)
    for j in row[:size]:
      votes[y_train[j]] += 1.0 / optimal_k[j]
    predictions.append(max(votes, key=votes.get))
    all_votes.append(votes)
  return np.asarray(predictions), all_votes


def standardised(x_train, *others):
  mean, std = x_train.mean(axis=0), x_train.std(axis=0)
  return [(a - mean) / std for a in (x_train, *others)]


def gaussian_data(seed, n=150, d=6, c=4, noise=0.3):
  """Gaussian classes (means 1.5 apart) with a fraction `noise` of labels redrawn: no distance ties."""
  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(c, d)) * 1.5
  clean = rng.integers(0, c, n)
  x = centres[clean] + rng.normal(size=(n, d))
  y = np.where(rng.random(n) < noise, rng.integers(0, c, n), clean)
  return x, y


@pytest.mark.parametrize("seed, kmin, kmax", [(0, 11, 51), (1, 3, 15), (2, 5, 6), (3, 1, 9)])
def test_fit_and_predict_equal_the_original(seed, kmin, kmax):
  x, y = gaussian_data(seed)
  x_test = gaussian_data(seed + 100, n=60)[0]
  fitted = wann.fit(x, y, num_classes=4, kmin=kmin, kmax=kmax)
  xs, xs_test = standardised(x, x_test)
  expected_k = original_find_k(xs, y, kmin, kmax)
  np.testing.assert_array_equal(fitted.k, expected_k)
  assert len(np.unique(fitted.k)) > 1 or kmin + 2 > kmax  # the adaptive k is exercised
  expected, votes = original_predict(xs, y, expected_k, xs_test)
  predictions, probs = wann.predict(fitted, x_test)
  np.testing.assert_array_equal(predictions, expected)
  dense = np.array([[v.get(c, 0.0) for c in range(4)] for v in votes])
  np.testing.assert_array_equal(probs, dense / dense.sum(axis=1, keepdims=True))


def test_vote_ties_go_to_the_class_met_first():
  """Two neighbours of equal weight and different classes: the original's max over the dict keeps the first key."""
  labels = np.array([[2, 0, 1], [0, 2, 1]])
  weights = np.full((2, 3), 0.5)
  votes, predictions = wann.weighted_vote(labels, weights, np.array([2, 2]), 3)
  np.testing.assert_array_equal(predictions, [2, 0])
  np.testing.assert_array_equal(votes, [[0.5, 0, 0.5], [0.5, 0, 0.5]])


def test_majority_ties_go_to_the_smallest_class():
  """k = 2 with one neighbour of class 1 and one of class 0: np.unique + argmax picks 0."""
  k = wann.adaptive_k(np.array([[1, 0, 1, 1], [1, 0, 1, 1]]), np.array([0, 1]), 2, kmin=2, kmax=5)
  np.testing.assert_array_equal(k, [2, 4])  # row 1: 2 -> 0 (tie), 4 -> 1 (3 of 4): k = 4


@pytest.mark.parametrize("seed, kmin, kmax", [(0, 3, 11), (1, 5, 13)])
def test_out_of_sample_equals_refitting_without_each_example(seed, kmin, kmax):
  """Row i of the leave-one-out P is the original's WANN fitted on the other N - 1 (standardised) rows predicting
  x_i: its k recomputed without i, its votes and its prediction."""
  x, y = gaussian_data(seed, n=70)
  probs, predictions, k = wann.out_of_sample(x, y, num_classes=4, kmin=kmin, kmax=kmax)
  (xs,) = standardised(x)
  np.testing.assert_array_equal(k, original_find_k(xs, y, kmin, kmax))
  changed = 0
  for i in range(len(y)):
    others = np.delete(np.arange(len(y)), i)
    optimal = original_find_k(xs[others], y[others], kmin, kmax)
    changed += np.sum(optimal != k[others])
    expected, votes = original_predict(xs[others], y[others], optimal, xs[i : i + 1])
    assert predictions[i] == expected[0], i
    dense = np.array([votes[0].get(c, 0.0) for c in range(4)])
    np.testing.assert_allclose(probs[i], dense / dense.sum(), rtol=0, atol=1e-15, err_msg=str(i))
  assert changed > 0  # some neighbours' k do depend on the held-out example


def test_permutation_of_the_examples_permutes_the_output():
  x, y = gaussian_data(5, n=120)
  order = np.random.default_rng(0).permutation(120)
  probs, predictions, k = wann.out_of_sample(x, y, kmin=3, kmax=15)
  p_probs, p_predictions, p_k = wann.out_of_sample(x[order], y[order], kmin=3, kmax=15)
  np.testing.assert_allclose(p_probs, probs[order], atol=1e-12)
  np.testing.assert_array_equal(p_predictions, predictions[order])
  np.testing.assert_array_equal(p_k, k[order])


def test_duplicates_are_other_examples_and_ties_go_to_the_smaller_index():
  """Rows 60..69 copy rows 0..9: a copy is the nearest neighbour of its original (distance 0, counted, itself not);
  the result equals a re-computation that orders every row's neighbours by (distance, index)."""
  x, y = gaussian_data(7, n=70)
  x[60:] = x[:10]
  y[60:] = (y[:10] + 1) % 4  # the copies disagree with their originals
  probs, predictions, k = wann.out_of_sample(x, y, num_classes=4, kmin=3, kmax=9)
  (xs,) = standardised(x)
  dist = ((xs[:, None] - xs[None]) ** 2).sum(-1)
  near = np.array(
    [sorted(np.delete(np.arange(70), i), key=lambda j, i=i: (round(dist[i, j], 9), j)) for i in range(70)]
  )
  assert np.all(near[np.arange(10), 0] == np.arange(60, 70)) and np.all(near[60:, 0] == np.arange(10))
  np.testing.assert_array_equal(k, wann.adaptive_k(y[near], y, 4, kmin=3, kmax=9))
  # example 0: its copy (label y[0] + 1) is its first voter and sets the vote's size
  assert probs[0, y[60]] > 0 and predictions.shape == (70,)
  np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)


def test_bad_settings_are_refused():
  x, y = gaussian_data(0, n=20)
  with pytest.raises(ValueError, match="kmax=19 needs at least kmax \\+ 2 = 21 examples; got N = 20"):
    wann.out_of_sample(x, y, kmin=3, kmax=19)
  with pytest.raises(ValueError, match="kmin=7, kmax=5"):
    wann.fit(x, y, kmin=7, kmax=5)


def test_neighbours_order_by_distance_then_index():
  """Coordinates on a 0.5 grid (many equal distances, exact in float64) and copied rows: the partition-and-sort
  search equals a stable argsort of the full distance rows, with and without the row itself."""
  rng = np.random.default_rng(0)
  x = np.round(rng.normal(size=(300, 3)) * 2) / 2
  x[250:] = x[:50]
  dist = np.einsum("ij,ij->i", x, x)[:, None] - 2.0 * x @ x.T + np.einsum("ij,ij->i", x, x)[None, :]
  np.testing.assert_array_equal(wann.neighbours(x, x, 20, block_rows=64), np.argsort(dist, 1, kind="stable")[:, :20])
  np.fill_diagonal(dist, np.inf)
  expected = np.argsort(dist, axis=1, kind="stable")[:, :20]
  np.testing.assert_array_equal(wann.neighbours(x, x, 20, exclude_self=True, block_rows=64), expected)
