"""WANN: weighted adaptive nearest neighbours, a reliability score per training example and a vote weighted by it.

Di Salvo, Doerrich, Rieger & Ledig, "An Embedding is Worth a Thousand Noisy Labels", TMLR 2025, arXiv:2408.14358;
behaviour as their code does it (github.com/francescodisalvo05/wann-noisy-labels at commit
314f2ae9c6e0cd2683ae963076d02ed69711a30a: src/model/WANN.py, src/model/utils.py, src/utils/preprocessing.py).

  features  standardised with the training rows' per-feature mean and standard deviation (preprocessing_knn), then
            Euclidean distance (scikit-learn NearestNeighbors' default metric). A constant feature is centred only
            (the original divides by its zero deviation).
  adaptive k  for training example j with neighbours n_1(j), n_2(j), ... (nearest first, j itself excluded):
            k_j = the smallest k in kmin, kmin + 2, ..., < kmax (odd steps; kmax itself is never tried) for which the
            majority label of n_1..n_k equals y_j (a tie in the count goes to the smallest class id, as np.unique +
            argmax do); k_j = kmax if none does. Reliability score r_j = 1 / k_j (high: the neighbourhood agrees
            with the label at a small k).
  vote      a point x with training neighbours m_1, m_2, ... (nearest first) takes its size from its nearest
            training neighbour, s = k_{m_1}, and votes V[c] = sum_{p <= s, y_{m_p} = c} r_{m_p} (summed in neighbour
            order, float64, as the original's loop); its prediction is the class of largest V, a tie going to the
            class met first in neighbour order (Python's max over an insertion-ordered dict). P[c] = V[c] / sum V.

Ties in distance (duplicated rows are common in crawled data) go to the smaller example index (a stable sort); the
original takes whatever order scikit-learn's search returns, and assumes position 0 of a training row's neighbour
list is the row itself, which a duplicate can break: here the row itself is always excluded by index.

Out of sample (label issues, `out_of_sample_probabilities`): row i's P is the vote for x_i of WANN fitted on the
other N - 1 examples: its neighbours exclude i, and every neighbour's k_j is recomputed without i (the neighbour
lists of the examples that had i among their first kmax - 1 neighbours shift by one), so nothing that decides row i
read y_i. The standardisation uses all N rows (no label is involved). Distances are computed in blocks of rows,
never N x N at once. NumPy only.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from noisy_jax.core import errors

DEFAULT_KMIN = 11  # WANN.py, run_knn.py: --kmin 11
DEFAULT_KMAX = 51  # WANN.py, run_knn.py: --kmax 51
BLOCK_BYTES = 32 * 2**20  # float64 distances held at once: a block of rows x N


@dataclasses.dataclass(frozen=True)
class Fitted:
  """A fitted WANN: standardised training rows x [N, D], labels y [N], the standardisation (center, scale [D]),
  adaptive k [N] and C."""

  x: np.ndarray
  y: np.ndarray
  center: np.ndarray
  scale: np.ndarray
  k: np.ndarray
  num_classes: int


def standardization(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(mean [D], standard deviation [D], ddof 0, 1 where it is 0) of the rows."""
  std = features.std(axis=0)
  return features.mean(axis=0), np.where(std > 0, std, 1.0)


def neighbours(queries, reference, count: int, *, exclude_self: bool = False, block_rows: int | None = None):
  """Indices [Q, count] of each query's `count` nearest reference rows by Euclidean distance, nearest first, ties
  to the smaller index; exclude_self (queries is reference): row i is never its own neighbour."""
  queries, reference = np.asarray(queries, np.float64), np.asarray(reference, np.float64)
  n = len(reference)
  block_rows = block_rows or max(1, BLOCK_BYTES // (8 * n))
  ref_sq = np.einsum("ij,ij->i", reference, reference)
  out = np.empty((len(queries), count), np.int64)
  for start in range(0, len(queries), block_rows):
    q = queries[start : start + block_rows]
    dist = np.einsum("ij,ij->i", q, q)[:, None] - 2.0 * q @ reference.T + ref_sq[None, :]
    if exclude_self:
      dist[np.arange(len(q)), np.arange(start, start + len(q))] = np.inf
    out[start : start + len(q)] = _nearest(dist, count)
  return out


def _nearest(dist: np.ndarray, count: int) -> np.ndarray:
  """The `count` smallest of each row of dist [R, N] (column indices), ordered by (distance, index): a partition,
  then a sort of the `count` kept; rows where ties at the count-th distance leave the kept set ambiguous are sorted
  whole (stable)."""
  if count >= dist.shape[1]:
    return np.argsort(dist, axis=1, kind="stable")[:, :count]
  kept = np.argpartition(dist, count - 1, axis=1)[:, :count]
  kept_dist = np.take_along_axis(dist, kept, axis=1)
  order = np.lexsort((kept, kept_dist), axis=1)
  out = np.take_along_axis(kept, order, axis=1)
  ambiguous = np.flatnonzero(np.sum(dist <= kept_dist.max(axis=1, keepdims=True), axis=1) > count)
  if len(ambiguous):
    out[ambiguous] = np.argsort(dist[ambiguous], axis=1, kind="stable")[:, :count]
  return out


def adaptive_k(neighbour_labels, own_labels, num_classes: int, *, kmin: int, kmax: int, block_rows: int = 4096):
  """k [M] of the module docstring from each row's neighbours' labels [M, L] (nearest first, L >= the largest k
  tried) and its own label [M]."""
  neighbour_labels, own_labels = np.asarray(neighbour_labels), np.asarray(own_labels)
  tried = list(range(kmin, kmax, 2))
  k = np.full(len(own_labels), kmax, np.int64)
  if not tried:
    return k
  for start in range(0, len(own_labels), block_rows):
    labels = neighbour_labels[start : start + block_rows, : tried[-1]]
    counts = np.cumsum(labels[:, :, None] == np.arange(num_classes), axis=1)  # [rows, positions, C]
    found = np.zeros(len(labels), bool)
    for size in tried:
      agrees = ~found & (np.argmax(counts[:, size - 1], axis=1) == own_labels[start : start + block_rows])
      k[start : start + block_rows][agrees] = size
      found |= agrees
  return k


def weighted_vote(neighbour_labels, weights, sizes, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
  """(votes V [M, C] float64, predictions [M]) of the module docstring: row m sums weights[m, p] into its label's
  class over the positions p < sizes[m], in order; the prediction is argmax V, ties to the class met first."""
  neighbour_labels, weights, sizes = np.asarray(neighbour_labels), np.asarray(weights, np.float64), np.asarray(sizes)
  rows = np.arange(len(sizes))
  votes = np.zeros((len(sizes), num_classes), np.float64)
  first = np.full((len(sizes), num_classes), np.iinfo(np.int64).max)
  for p in range(int(sizes.max())):
    live = rows[p < sizes]
    label = neighbour_labels[live, p]
    votes[live, label] += weights[live, p]
    first[live, label] = np.minimum(first[live, label], p)
  best = votes == votes.max(axis=1, keepdims=True)
  predictions = np.argmin(np.where(best, first, np.iinfo(np.int64).max), axis=1)
  return votes, predictions


def _check(features, labels, kmin: int, kmax: int, spare: int):
  features, labels = np.asarray(features, np.float64), np.asarray(labels, np.int64)
  if not 1 <= kmin <= kmax:
    raise errors.InputError(f"kmin={kmin}, kmax={kmax}; allowed: 1 <= kmin <= kmax.")
  if kmax + spare > len(labels):
    raise errors.InputError(
      f"kmax={kmax} needs at least kmax + {spare} = {kmax + spare} examples; got N = {len(labels)}: lower --kmax."
    )
  return features, labels


def fit(features, labels, *, num_classes: int | None = None, kmin: int = DEFAULT_KMIN, kmax: int = DEFAULT_KMAX):
  """WANN fitted to (X [N, D], y [N]): the standardisation, and every training example's adaptive k (N > kmax)."""
  features, labels = _check(features, labels, kmin, kmax, 1)
  num_classes = int(labels.max()) + 1 if num_classes is None else int(num_classes)
  center, scale = standardization(features)
  x = (features - center) / scale
  near = neighbours(x, x, kmax, exclude_self=True)
  k = adaptive_k(labels[near], labels, num_classes, kmin=kmin, kmax=kmax)
  return Fitted(x, labels, center, scale, k, num_classes)


def predict(fitted: Fitted, features) -> tuple[np.ndarray, np.ndarray]:
  """(predictions [M], P [M, C]) for new points: the vote over their training neighbours (module docstring)."""
  x = (np.asarray(features, np.float64) - fitted.center) / fitted.scale
  near = neighbours(x, fitted.x, int(fitted.k.max()))
  votes, predictions = weighted_vote(fitted.y[near], 1.0 / fitted.k[near], fitted.k[near[:, 0]], fitted.num_classes)
  return predictions, votes / votes.sum(axis=1, keepdims=True)


def leave_one_out_k(near, labels, num_classes: int, *, kmin: int, kmax: int) -> np.ndarray:
  """k_without [N, T] (T = the largest k tried): k_without[j, q] is example j's adaptive k once its q-th neighbour
  near[j, q] is removed from the data (its later neighbours move up by one). near: [N, >= T + 1] neighbour lists."""
  tried = range(kmin, kmax, 2)
  tried_max = tried[-1] if len(tried) else 0
  out = np.empty((len(labels), tried_max), np.int64)
  positions = np.arange(near.shape[1] - 1)
  for q in range(tried_max):
    kept = near[:, positions + (positions >= q)]
    out[:, q] = adaptive_k(labels[kept], labels, num_classes, kmin=kmin, kmax=kmax)
  return out


def out_of_sample(features, labels, *, num_classes: int | None = None, kmin=DEFAULT_KMIN, kmax=DEFAULT_KMAX):
  """(P [N, C], predictions [N], k [N]): row i is WANN fitted on the other N - 1 examples voting for x_i (module
  docstring; N >= kmax + 2); k is each example's adaptive k on all N (its reliability 1 / k)."""
  features, labels = _check(features, labels, kmin, kmax, 2)
  num_classes = int(labels.max()) + 1 if num_classes is None else int(num_classes)
  center, scale = standardization(features)
  x = (features - center) / scale
  near = neighbours(x, x, kmax + 1, exclude_self=True)  # [N, kmax + 1]
  k = adaptive_k(labels[near], labels, num_classes, kmin=kmin, kmax=kmax)
  k_without = leave_one_out_k(near, labels, num_classes, kmin=kmin, kmax=kmax)  # [N, T]
  voters = near[:, :kmax]  # [N, kmax]: the vote reads at most kmax neighbours
  k_voter = k[voters]
  if k_without.shape[1]:
    # where i = near[j, q] for q < T, j's k without i is k_without[j, q]
    hit = near[voters, : k_without.shape[1]] == np.arange(len(labels))[:, None, None]  # [N, kmax, T]
    q = np.argmax(hit, axis=2)
    k_voter = np.where(hit.any(axis=2), np.take_along_axis(k_without[voters], q[..., None], axis=2)[..., 0], k_voter)
  votes, predictions = weighted_vote(labels[voters], 1.0 / k_voter, k_voter[:, 0], num_classes)
  return votes / votes.sum(axis=1, keepdims=True), predictions, k


def out_of_sample_probabilities(
  features, labels, *, num_classes: int | None = None, kmin: int = DEFAULT_KMIN, kmax: int = DEFAULT_KMAX
) -> np.ndarray:
  """P [N, C] (float64, rows sum to 1) of `out_of_sample`."""
  return out_of_sample(features, labels, num_classes=num_classes, kmin=kmin, kmax=kmax)[0]
