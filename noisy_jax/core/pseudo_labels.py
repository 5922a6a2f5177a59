"""Pseudo-label noise (Joint Optimization's third setting): labels from clustering features, matched to classes.

Tanaka et al. (2018) build a noisy CIFAR-10 by clustering image features (from an ImageNet-trained network) with
k-means and giving a fraction r of the training set the class matched to its cluster: the mistakes are then
structured (look-alike images share a wrong label), unlike uniform noise. Here:

1. k-means with C clusters on caller-supplied features [N, D] (default: `pca_features` of the pixels);
2. the clusters are matched one-to-one to classes by the Hungarian assignment that maximises agreement with the
   clean labels on the confusion matrix (cluster x class);
3. a uniformly chosen subset of exactly round(r N) examples takes its matched cluster class as its label; the rest
   keep the clean label. Some chosen examples' cluster class equals their clean label, so the realised flip rate is
   r x (1 - pseudo-label accuracy on that subset).

NumPy + SciPy only (SciPy comes with the `data` extra), deterministic for a seed.
"""

from __future__ import annotations

import numpy as np

from noisy_jax.core import _checks


def pca_features(x: np.ndarray, num_components: int = 50) -> np.ndarray:
  """Projects flattened inputs [N, ...] onto their top `num_components` principal components; returns [N, K]."""
  x = np.asarray(x, np.float64).reshape(len(x), -1)
  _checks.check_range("num_components", num_components, 1, x.shape[1])
  centred = x - x.mean(axis=0)
  _, _, vt = np.linalg.svd(centred, full_matrices=False)
  return centred @ vt[:num_components].T


def kmeans(features: np.ndarray, num_clusters: int, *, seed: int, num_iters: int = 100) -> np.ndarray:
  """Lloyd's k-means with k-means++ seeding; returns the cluster id [N] of every row of `features` [N, D]."""
  features = np.asarray(features, np.float64)
  n = len(features)
  _checks.check_range("num_clusters", num_clusters, 1, n)
  rng = np.random.default_rng(seed)
  centres = [features[rng.integers(n)]]
  for _ in range(1, num_clusters):  # k-means++: the next centre with probability ~ squared distance
    d2 = np.min(((features[:, None, :] - np.asarray(centres)[None]) ** 2).sum(-1), axis=1)
    centres.append(features[rng.choice(n, p=d2 / d2.sum())])
  centres = np.asarray(centres)
  assignment = np.full(n, -1)
  for _ in range(num_iters):
    d2 = (features**2).sum(1)[:, None] - 2 * features @ centres.T + (centres**2).sum(1)[None]
    new = np.argmin(d2, axis=1)
    if np.array_equal(new, assignment):
      break
    assignment = new
    for c in range(num_clusters):
      members = features[assignment == c]
      if len(members):  # an empty cluster keeps its centre
        centres[c] = members.mean(axis=0)
  return assignment


def match_clusters(clusters: np.ndarray, labels: np.ndarray, num_classes: int) -> np.ndarray:
  """The class of each cluster id [C] under the one-to-one assignment that maximises agreement with `labels`."""
  from scipy.optimize import linear_sum_assignment  # pylint: disable=g-import-not-at-top

  confusion = np.zeros((num_classes, num_classes), np.int64)
  np.add.at(confusion, (np.asarray(clusters), np.asarray(labels)), 1)
  rows, cols = linear_sum_assignment(confusion, maximize=True)
  mapping = np.empty(num_classes, np.int64)
  mapping[rows] = cols
  return mapping


def pseudo_labels(features: np.ndarray, labels: np.ndarray, num_classes: int, *, seed: int) -> np.ndarray:
  """k-means on `features` with C clusters, each cluster mapped to its Hungarian-matched class; returns [N]."""
  clusters = kmeans(features, num_classes, seed=seed)
  return match_clusters(clusters, labels, num_classes)[clusters]


def corrupt_with_pseudo_labels(
  features: np.ndarray, labels: np.ndarray, num_classes: int, rate: float, *, seed: int
) -> tuple[np.ndarray, dict]:
  """Gives exactly round(rate N) uniformly chosen examples their pseudo-label; returns (noisy [N], info).

  info: 'pseudo_label_accuracy' (of the pseudo-labels over all N examples), 'num_relabelled' (round(rate N)).
  """
  labels = np.asarray(labels, np.int64)
  _checks.check_range("rate", rate, 0.0, 1.0)
  if len(features) != len(labels):
    raise ValueError(f"features has {len(features)} rows but labels has {len(labels)}; they must match.")
  if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
    raise ValueError(f"labels must lie in [0, {num_classes}), got values in [{labels.min()}, {labels.max()}].")
  pseudo = pseudo_labels(features, labels, num_classes, seed=seed)
  count = int(round(rate * len(labels)))
  chosen = np.random.default_rng(seed + 1).choice(len(labels), size=count, replace=False)
  noisy = labels.copy()
  noisy[chosen] = pseudo[chosen]
  return noisy, {"pseudo_label_accuracy": float(np.mean(pseudo == labels)), "num_relabelled": count}
