"""Pseudo-label noise: k-means, Hungarian matching and exact-count corruption, checked on constructed data."""

import itertools

import numpy as np
import pytest

from noisy_jax.core import pseudo_labels


def blobs(num_classes=4, per_class=30, spread=0.05, seed=0):
  """Well separated Gaussian blobs: class c centred at 10 * e_c."""
  rng = np.random.default_rng(seed)
  labels = np.repeat(np.arange(num_classes), per_class)
  features = 10 * np.eye(num_classes)[labels] + spread * rng.normal(size=(len(labels), num_classes))
  return features, labels


def test_kmeans_recovers_separated_blobs():
  features, labels = blobs()
  clusters = pseudo_labels.kmeans(features, 4, seed=1)
  # Same partition up to renaming: every class is one cluster.
  for c in range(4):
    assert len(set(clusters[labels == c])) == 1
  assert len(set(clusters)) == 4


def test_match_clusters_is_the_best_one_to_one_assignment():
  rng = np.random.default_rng(0)
  clusters, labels = rng.integers(0, 4, 200), rng.integers(0, 4, 200)
  mapping = pseudo_labels.match_clusters(clusters, labels, 4)
  assert sorted(mapping) == [0, 1, 2, 3]
  agreement = lambda m: np.sum(np.asarray(m)[clusters] == labels)
  best = max(agreement(p) for p in itertools.permutations(range(4)))  # brute force over all 24 matchings
  assert agreement(mapping) == best


def test_pseudo_labels_on_blobs_are_the_clean_labels():
  features, labels = blobs()
  np.testing.assert_array_equal(pseudo_labels.pseudo_labels(features, labels, 4, seed=3), labels)


def test_corruption_counts_and_determinism():
  rng = np.random.default_rng(1)
  labels = rng.integers(0, 5, 300)
  features = rng.normal(size=(300, 6))  # unrelated to the labels: pseudo-labels are mostly wrong
  noisy, info = pseudo_labels.corrupt_with_pseudo_labels(features, labels, 5, 0.4, seed=7)
  assert info["num_relabelled"] == 120
  assert 0 < np.mean(noisy != labels) <= 0.4
  again, _ = pseudo_labels.corrupt_with_pseudo_labels(features, labels, 5, 0.4, seed=7)
  np.testing.assert_array_equal(noisy, again)
  untouched, _ = pseudo_labels.corrupt_with_pseudo_labels(features, labels, 5, 0.0, seed=7)
  np.testing.assert_array_equal(untouched, labels)


def test_bad_arguments():
  features, labels = blobs()
  with pytest.raises(ValueError, match="rate"):
    pseudo_labels.corrupt_with_pseudo_labels(features, labels, 4, 1.5, seed=0)
  with pytest.raises(ValueError, match="labels must lie in"):
    pseudo_labels.corrupt_with_pseudo_labels(features, labels + 1, 4, 0.5, seed=0)
  with pytest.raises(ValueError, match="rows"):
    pseudo_labels.corrupt_with_pseudo_labels(features[:5], labels, 4, 0.5, seed=0)


def test_pca_features_keep_the_leading_directions():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(100, 1)) * np.array([[5.0, 0.0, 0.0]]) + 0.01 * rng.normal(size=(100, 3))
  projected = pseudo_labels.pca_features(x, 1)
  np.testing.assert_allclose(np.abs(np.corrcoef(projected[:, 0], x[:, 0])[0, 1]), 1.0, atol=1e-3)
