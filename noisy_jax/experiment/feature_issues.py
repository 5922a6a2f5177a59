"""Label issues from frozen features: out-of-sample class probabilities from embeddings, no network trained.

Inputs: embeddings X [N, D] of the examples (any real dtype; e.g. a pretrained or exported network's penultimate
layer, computed by a network that never saw these labels) and the labels as given y [N] (ints in [0, C)).
Four ways to class probabilities P [N, C] (rows sum to 1), all out of sample: no example's row comes from anything
that read its own label.

  'probe'  `probe_probabilities`, a K-fold linear probe. Folds F_1..F_K = scikit-learn's StratifiedKFold(K,
           shuffle=True, random_state=seed) over the given labels. For each fold j, a pipeline fitted on the other
           folds only: standardise every feature with their mean and standard deviation, then a multinomial
           logistic regression, L2-penalised, LogisticRegression(C=inverse_regularization) with lbfgs (minimises
           sum_i -log softmax(W x_i + b)[y_i] + ||W||^2 / (2 C) over the training folds; for two classes the
           equivalent binary logistic regression); P[F_j] = its predict_proba on F_j. This is how confident
           learning asks for its probabilities: out of sample, by K-fold cross-validation, so that a model cannot
           vouch for a label it was fitted to (Northcutt, Jiang & Chuang, "Confident Learning: Estimating
           Uncertainty in Dataset Labels", JAIR 70, 2021; cleanlab's `estimate_cv_predicted_probabilities` does
           the same). A class absent from a fold's training examples gets probability 0 in that fold (the fitted
           classes' probabilities sum to 1 on their own; each row is renormalised to sum exactly 1); a fold trained
           on one class gives probability 1 to it. The fits and predictions run with scikit-learn's BLAS and OpenMP
           pools limited to `threads` (default 1, threadpoolctl): on a busy 2-core machine the 5-fold probe of
           mnist5k's 3,600 x 128 embedding took 17 s with every thread and 0.6 s with one
           (experiments/benchmarks/results/2026-11-29-label-issues-frozen-features-*.txt).
  'knn'    `knn_probabilities`, a vote of the k nearest neighbours, nothing trained: SimiFeat's local vote (Zhu,
           Dong & Liu, "Detecting Corrupted Labels Without Training a Model to Predict", ICML 2022,
           arXiv:2110.06283; also in Docta). Cosine similarity S = Z Z^T of the L2-normalised features
           z_i = x_i / ||x_i|| (a zero vector stays zero: similarity 0 to everything), computed in float32.
           Each example's neighbours are the k others most similar to it, itself excluded (an exact duplicate of
           it is another example and counts). P[i, c] = (1/k) sum_{j in neighbours(i)} w_ij [y_j = c], an
           unweighted vote: w_ij = 1, except for ties at the k-th place. Ties: with s_k the k-th largest
           similarity of row i (itself excluded), the g examples with S_ij > s_k get w = 1 and the t examples with
           S_ij = s_k share the k - g remaining votes equally, w = (k - g) / t; so P does not depend on the order
           of the examples (up to float32 rounding of S; duplicated files are common in crawled data).
           Similarity weighting is not offered: SimiFeat's vote counts each neighbour once. Computed in blocks of
           rows, never an N x N matrix at once.

  'ni_erm' `ni_erm_probabilities`: the NI-ERM head of noisy_jax.experiment.ni_erm (JAX, optax: a linear head, or
           an MLP, fitted with plain cross entropy to the labels as given, L-BFGS on the raw features by default, as
           Zhu et al.'s code fits scikit-learn's LogisticRegression over DINOv2 features), out of sample over the
           same StratifiedKFold folds as 'probe'; its module has the objective, settings and sources.
  'wann'   `wann_probabilities`: WANN's reliability-weighted adaptive-k vote (Di Salvo et al., TMLR 2025;
           noisy_jax.experiment.wann: standardised features, Euclidean neighbours, k in [kmin, kmax]), leave one out:
           row i is the vote for x_i of WANN fitted on the other N - 1 examples (every neighbour's k recomputed
           without i).

From P, `run_issues` gives the same records and evidence as a training run's (noisy_jax.core.label_issues: its
score, suggested label and flag rules, 'argmax' or confident learning's per-class thresholds 'confident', its CSV
through `label_issues.write_csv`), with the detector named in the evidence column (`method_evidence`), e.g.
"linear probe, 5-fold out of sample: p(given) 0.031, p(suggested) 0.912".
The command is `python -m experiments.label_issues_from_features`.

NumPy, plus scikit-learn and threadpoolctl for the probe (the `data` extra; imported when the probe runs). JAX and
optax only for 'ni_erm' (imported when it runs): the command imports neither JAX nor orbax for 'probe', 'knn' or
'wann' unless it embeds images (--images).
"""

from __future__ import annotations

import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import errors
from noisy_jax.core import label_issues
from noisy_jax.experiment import wann

METHODS = ("probe", "knn", "ni_erm", "wann")
DEFAULT_NUM_FOLDS = 5
DEFAULT_K = 10
DEFAULT_INVERSE_REGULARIZATION = 1.0  # scikit-learn's default C: penalty ||W||^2 / 2 against the summed log loss
DEFAULT_MAX_ITER = 1000  # lbfgs iterations per fold (scikit-learn's default of 100 stops early on wide embeddings)
DEFAULT_PROBE_THREADS = 1  # BLAS/OpenMP threads of the probe's fits (threadpoolctl); None: the libraries' default
DEFAULT_KMIN, DEFAULT_KMAX = wann.DEFAULT_KMIN, wann.DEFAULT_KMAX  # WANN's adaptive k range (its code's defaults)
NI_ERM_OPTIMIZERS = ("lbfgs", "sgd", "adam")  # ni_erm.OPTIMIZERS, here for the command (ni_erm imports JAX)
NI_ERM_DEFAULT_EPOCHS = 100  # ni_erm.DEFAULT_EPOCHS
KNN_BLOCK_BYTES = 32 * 2**20  # float32 similarities held at once by the kNN vote: a block of rows x N


def check_inputs(
  features,
  labels,
  num_classes: int | None = None,
  *,
  features_name: str = "features",
  labels_name: str = "labels",
  num_classes_name: str = "num_classes",
) -> tuple[np.ndarray, np.ndarray, int]:
  """Checks embeddings and labels; returns (features float64 [N, D], labels int64 [N], C).

  Args:
    features: X [N, D], real numbers, all finite.
    labels: y [N], integers in [0, C).
    num_classes: C; default max(y) + 1. Classes without examples are allowed (their column of P is 0).
    features_name: how the errors name the features (a CLI passes its flag and file).
    labels_name: how the errors name the labels.
    num_classes_name: how the errors name where C comes from.

  Raises:
    ValueError naming the input, the bad value and what is allowed.
  """
  features, labels = np.asarray(features), np.asarray(labels)
  if features.ndim != 2:
    raise errors.InputError(
      f"{features_name} must be a 2-D array [N, D] (one embedding per row); got shape {features.shape}."
    )
  if not (np.issubdtype(features.dtype, np.floating) or np.issubdtype(features.dtype, np.integer)):
    raise errors.InputError(f"{features_name} must hold real numbers; got dtype {features.dtype}.")
  if labels.ndim != 1:
    raise errors.InputError(f"{labels_name} must be a 1-D array [N] of class ids; got shape {labels.shape}.")
  if not np.issubdtype(labels.dtype, np.integer):
    raise errors.InputError(
      f"{labels_name} must be integer class ids; got dtype {labels.dtype} (save them as integers, e.g. "
      "labels.astype(np.int64))."
    )
  n = features.shape[0]
  if labels.shape[0] != n:
    raise errors.InputError(
      f"{features_name} has {n} rows but {labels_name} has {labels.shape[0]} labels; one label per row is needed."
    )
  if n == 0 or features.shape[1] == 0:
    raise errors.InputError(
      f"{features_name} is empty (shape {features.shape}); it needs N >= 1 rows of D >= 1 values."
    )
  features = features.astype(np.float64)
  finite = np.isfinite(features)
  if not finite.all():
    row, column = np.argwhere(~finite)[0]
    raise errors.InputError(
      f"{features_name} holds non-finite values ({features[row, column]} at row {row}, column {column}; "
      f"rows with one: {int(np.sum(~finite.all(axis=1)))}); every value must be finite."
    )
  labels = labels.astype(np.int64)
  if num_classes is None:
    num_classes, num_classes_name = max(1, int(labels.max()) + 1), "the largest label + 1"
  bad = (labels < 0) | (labels >= num_classes)
  if bad.any():
    where = int(np.argmax(bad))
    raise errors.InputError(
      f"{labels_name}: label {labels[where]} (row {where}) is outside the class ids [0, {num_classes}) allowed by "
      f"{num_classes_name}; {int(bad.sum())} labels out of range in all."
    )
  return features, labels, int(num_classes)


def probe_probabilities(
  features,
  labels,
  *,
  num_classes: int | None = None,
  num_folds: int = DEFAULT_NUM_FOLDS,
  seed: int = 0,
  inverse_regularization: float = DEFAULT_INVERSE_REGULARIZATION,
  max_iter: int = DEFAULT_MAX_ITER,
  threads: int | None = DEFAULT_PROBE_THREADS,
) -> np.ndarray:
  """Out-of-sample class probabilities P [N, C] (float64) of a K-fold linear probe (module docstring, 'probe').

  Row i comes from the standardiser and logistic regression fitted on the folds without example i:
  P[F_j] = softmax(W_j standardise_j(X[F_j]) + b_j), (W_j, b_j, standardise_j) fitted on X, y outside F_j.

  Args:
    features: X [N, D], the embeddings.
    labels: y [N], the given class ids in [0, C).
    num_classes: C, the columns of P; default max(y) + 1.
    num_folds: K >= 2 (and <= N), the folds of StratifiedKFold. A class with fewer than K examples leaves some
      training folds without it (scikit-learn warns): those folds give it probability 0.
    seed: random_state of the fold shuffle (the lbfgs fit itself is deterministic).
    inverse_regularization: scikit-learn's C of LogisticRegression, the inverse L2 strength (larger: weaker).
    max_iter: lbfgs iterations per fold.
    threads: threads of scikit-learn's BLAS and OpenMP pools during the fits and predictions
      (threadpoolctl.threadpool_limits; the pools are restored afterwards); None: leave them as they are.
  """
  features, labels, num_classes = check_inputs(features, labels, num_classes)
  n = len(labels)
  if not 2 <= num_folds <= n:
    raise errors.InputError(f"num_folds={num_folds}; allowed: 2 <= num_folds <= N = {n}.")
  _checks.check_range("inverse_regularization", inverse_regularization, 0, np.inf, low_open=True)
  try:
    from sklearn import linear_model  # pylint: disable=g-import-not-at-top
    from sklearn import model_selection  # pylint: disable=g-import-not-at-top
    from sklearn import pipeline  # pylint: disable=g-import-not-at-top
    from sklearn import preprocessing  # pylint: disable=g-import-not-at-top
    import threadpoolctl  # pylint: disable=g-import-not-at-top  (a dependency of scikit-learn)
  except ImportError as error:
    raise ImportError(f"the linear probe needs scikit-learn ({error}): pip install -e '.[data]'") from error
  if threads is not None and threads < 1:
    raise errors.InputError(f"threads={threads}; allowed: >= 1, or None (the libraries' default).")
  folds = model_selection.StratifiedKFold(n_splits=num_folds, shuffle=True, random_state=seed)
  probs = np.zeros((n, num_classes), np.float64)
  with threadpoolctl.threadpool_limits(limits=threads):
    for train_rows, held_out_rows in folds.split(features, labels):
      seen = np.unique(labels[train_rows])
      if len(seen) == 1:  # nothing to separate: the one class seen is certain
        probs[held_out_rows, seen[0]] = 1.0
        continue
      probe = pipeline.make_pipeline(
        preprocessing.StandardScaler(),
        linear_model.LogisticRegression(C=inverse_regularization, max_iter=max_iter),
      )
      probe.fit(features[train_rows], labels[train_rows])
      probs[np.ix_(held_out_rows, probe.classes_)] = probe.predict_proba(features[held_out_rows])
  return probs / probs.sum(axis=1, keepdims=True)


def knn_probabilities(
  features, labels, *, num_classes: int | None = None, k: int = DEFAULT_K, block_rows: int | None = None
) -> np.ndarray:
  """Class probabilities P [N, C] (float64) of a k-nearest-neighbour vote, itself excluded (module docstring, 'knn').

  P[i, c] = (1/k) sum_j w_ij [y_j = c] over the k others most cosine-similar to example i, ties at the k-th place
  sharing the remaining votes equally; every P[i, c] is a multiple of 1/k when there are no such ties.

  Args:
    features: X [N, D], the embeddings (L2-normalised here).
    labels: y [N], the given class ids in [0, C).
    num_classes: C, the columns of P; default max(y) + 1.
    k: neighbours per example, 1 <= k <= N - 1.
    block_rows: rows of the similarity matrix computed at once (default: as many as fit in KNN_BLOCK_BYTES of
      float32, at least 1): memory O(block_rows x N), never N x N.
  """
  features, labels, num_classes = check_inputs(features, labels, num_classes)
  n = len(labels)
  if not 1 <= k <= n - 1:
    raise errors.InputError(f"k={k}; allowed: 1 <= k <= N - 1 = {n - 1} (an example is not its own neighbour).")
  if block_rows is None:
    block_rows = max(1, KNN_BLOCK_BYTES // (4 * n))
  if block_rows < 1:
    raise errors.InputError(f"block_rows={block_rows}; allowed: >= 1.")
  norms = np.linalg.norm(features, axis=1, keepdims=True)
  unit = (features / np.where(norms > 0, norms, 1.0)).astype(np.float32)
  probs = np.zeros((n, num_classes), np.float64)
  for start in range(0, n, block_rows):
    stop = min(n, start + block_rows)
    rows = stop - start
    similarity = unit[start:stop] @ unit.T  # [rows, N]
    similarity[np.arange(rows), np.arange(start, stop)] = -np.inf  # not its own neighbour
    # The k + 1 most similar of each row, ascending: [:, 0] the (k+1)-th, [:, 1] the k-th (s_k), [:, 1:] the k.
    candidates = np.argpartition(similarity, n - k - 1, axis=1)[:, n - k - 1 :]
    candidate_similarity = np.take_along_axis(similarity, candidates, axis=1)
    ascending = np.argsort(candidate_similarity, axis=1, kind="stable")
    candidates = np.take_along_axis(candidates, ascending, axis=1)
    candidate_similarity = np.take_along_axis(candidate_similarity, ascending, axis=1)
    kth_largest = candidate_similarity[:, 1]
    tie_rows = np.flatnonzero(candidate_similarity[:, 0] == kth_largest)  # s_k shared beyond the k: split votes
    clear_rows = np.setdiff1d(np.arange(rows), tie_rows)
    cells = [(clear_rows[:, None] * num_classes + labels[candidates[clear_rows, 1:]]).ravel()]
    weights = [np.ones(len(cells[0]))]
    if len(tie_rows):
      tied_similarity, tied_kth = similarity[tie_rows], kth_largest[tie_rows, None]
      above, tied = tied_similarity > tied_kth, tied_similarity == tied_kth
      share = (k - above.sum(axis=1)) / tied.sum(axis=1)  # votes left for the tied examples, each
      for mask, weight in ((above, None), (tied, share)):
        at_row, column = np.nonzero(mask)
        cells.append(tie_rows[at_row] * num_classes + labels[column])
        weights.append(np.ones(len(at_row)) if weight is None else weight[at_row])
    votes = np.bincount(np.concatenate(cells), weights=np.concatenate(weights), minlength=rows * num_classes)
    probs[start:stop] = votes.reshape(rows, num_classes) / k
  return probs


def ni_erm_probabilities(
  features,
  labels,
  *,
  num_classes: int | None = None,
  num_folds: int = DEFAULT_NUM_FOLDS,
  seed: int = 0,
  inverse_regularization: float = DEFAULT_INVERSE_REGULARIZATION,
  **fit_kwargs,
) -> np.ndarray:
  """Out-of-sample P [N, C] (float64) of the NI-ERM head over `probe_probabilities`' folds (module docstring,
  'ni_erm'): ni_erm.out_of_sample_probabilities with C = inverse_regularization and `fit_kwargs` (optimizer,
  epochs, learning_rate, batch_size, hidden_sizes, standardize) as ni_erm.fit takes them."""
  features, labels, num_classes = check_inputs(features, labels, num_classes)
  _checks.check_range("inverse_regularization", inverse_regularization, 0, np.inf, low_open=True)
  from noisy_jax.experiment import ni_erm  # pylint: disable=g-import-not-at-top  (JAX: imported when it runs)

  return ni_erm.out_of_sample_probabilities(
    features,
    labels,
    num_classes=num_classes,
    num_folds=num_folds,
    seed=seed,
    inverse_regularization=inverse_regularization,
    **fit_kwargs,
  )


def wann_probabilities(
  features, labels, *, num_classes: int | None = None, kmin: int = DEFAULT_KMIN, kmax: int = DEFAULT_KMAX
) -> np.ndarray:
  """Leave-one-out P [N, C] (float64) of WANN's weighted adaptive vote (module docstring, 'wann';
  wann.out_of_sample); N >= kmax + 2."""
  features, labels, num_classes = check_inputs(features, labels, num_classes)
  return wann.out_of_sample_probabilities(features, labels, num_classes=num_classes, kmin=kmin, kmax=kmax)


def method_evidence(
  method: str,
  *,
  num_folds: int = DEFAULT_NUM_FOLDS,
  k: int = DEFAULT_K,
  kmin: int = DEFAULT_KMIN,
  kmax: int = DEFAULT_KMAX,
  hidden_sizes=(),
) -> str:
  """The detector's name for the CSV's evidence column: 'linear probe, K-fold out of sample', 'kNN vote, k=K',
  'NI-ERM linear head, K-fold out of sample' (or 'NI-ERM MLP head (hidden 64,32), ...') or
  'WANN vote, k in [kmin, kmax], leave one out'."""
  _checks.check_choice("method", method, METHODS)
  if method == "ni_erm":
    head = f"MLP head (hidden {','.join(str(h) for h in hidden_sizes)})" if hidden_sizes else "linear head"
    return f"NI-ERM {head}, {num_folds}-fold out of sample"
  if method == "wann":
    return f"WANN vote, k in [{kmin}, {kmax}], leave one out"
  return f"linear probe, {num_folds}-fold out of sample" if method == "probe" else f"kNN vote, k={k}"


def run_issues(
  probs, labels, *, evidence: str, score: str = "self_confidence", rule: str = "argmax"
) -> label_issues.RunIssues:
  """The records of `label_issues.find(probs, labels, score, rule)` (most suspect first) and, row for row, the
  evidence string 'EVIDENCE: p(given) a, p(suggested) b', as a training run gives them to `label_issues.write_csv`.

  Args:
    probs: P [N, C], out-of-sample class probabilities (rows sum to 1).
    labels: y [N], the given class ids in [0, C).
    evidence: what P is, e.g. `method_evidence(...)`.
    score: label quality, one of label_issues.SCORES.
    rule: flag rule, one of label_issues.FLAG_RULES.
  """
  found = label_issues.find(probs, labels, score=score, rule=rule)
  probs = np.asarray(probs, np.float64)
  index, given, suggested = found["index"], found["given_label"], found["suggested_label"]
  p_given, p_suggested = probs[index, given], probs[index, suggested]
  return label_issues.RunIssues(
    found, [f"{evidence}: p(given) {a:.3f}, p(suggested) {b:.3f}" for a, b in zip(p_given, p_suggested)]
  )


def find(
  features,
  labels,
  *,
  method: str = "probe",
  num_classes: int | None = None,
  num_folds: int = DEFAULT_NUM_FOLDS,
  k: int = DEFAULT_K,
  seed: int = 0,
  inverse_regularization: float = DEFAULT_INVERSE_REGULARIZATION,
  score: str = "self_confidence",
  rule: str = "argmax",
  threads: int | None = DEFAULT_PROBE_THREADS,
  kmin: int = DEFAULT_KMIN,
  kmax: int = DEFAULT_KMAX,
  ni_erm_options: dict | None = None,
  evidence: str | None = None,
) -> tuple[np.ndarray, label_issues.RunIssues]:
  """Label issues from embeddings: (P [N, C], `run_issues` of P), P from `probe_probabilities`,
  `knn_probabilities`, `ni_erm_probabilities` or `wann_probabilities`.

  Args:
    features: X [N, D], the embeddings.
    labels: y [N], the given class ids in [0, C).
    method: 'probe', 'knn', 'ni_erm' or 'wann' (METHODS).
    num_classes: C; default max(y) + 1.
    num_folds: the probe's and NI-ERM's K.
    k: the kNN vote's neighbours.
    seed: the probe's and NI-ERM's fold shuffle (and NI-ERM's PRNG keys).
    inverse_regularization: the probe's and NI-ERM's C (inverse L2 strength).
    score: label quality, one of label_issues.SCORES.
    rule: flag rule, one of label_issues.FLAG_RULES.
    threads: the probe's BLAS/OpenMP threads (`probe_probabilities`).
    kmin: WANN's smallest k.
    kmax: WANN's largest k.
    ni_erm_options: NI-ERM's other settings, keyword arguments of ni_erm.fit (optimizer, epochs, learning_rate,
      batch_size, hidden_sizes, standardize); None: its defaults.
    evidence: the CSV's name of the detector; None: `method_evidence` of these settings.
  """
  _checks.check_choice("method", method, METHODS)
  _checks.check_choice("score", score, label_issues.SCORES)
  _checks.check_choice("flag rule", rule, label_issues.FLAG_RULES)
  ni_erm_options = dict(ni_erm_options or {})
  if method == "probe":
    probs = probe_probabilities(
      features,
      labels,
      num_classes=num_classes,
      num_folds=num_folds,
      seed=seed,
      inverse_regularization=inverse_regularization,
      threads=threads,
    )
  elif method == "ni_erm":
    probs = ni_erm_probabilities(
      features,
      labels,
      num_classes=num_classes,
      num_folds=num_folds,
      seed=seed,
      inverse_regularization=inverse_regularization,
      **ni_erm_options,
    )
  elif method == "wann":
    probs = wann_probabilities(features, labels, num_classes=num_classes, kmin=kmin, kmax=kmax)
  else:
    probs = knn_probabilities(features, labels, num_classes=num_classes, k=k)
  if evidence is None:
    evidence = method_evidence(
      method, num_folds=num_folds, k=k, kmin=kmin, kmax=kmax, hidden_sizes=ni_erm_options.get("hidden_sizes", ())
    )
  return probs, run_issues(probs, np.asarray(labels).astype(np.int64), evidence=evidence, score=score, rule=rule)
