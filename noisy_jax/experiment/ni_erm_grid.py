"""NI-ERM's C and iteration count chosen as its original code chooses them: K-fold cross-validated accuracy on the
labels as given, over a grid.

The original (allan-z/label_noise_ignorance@18f88a77c6e125f033bd7ac52f2347de41ddf2be, main.py) runs scikit-learn's
GridSearchCV(LogisticRegression(multi_class='multinomial'), {'C': [1e-4, 1e-3, 1e-2, 0.1, 1, 10, 100], 'solver':
['lbfgs'], 'max_iter': [10, 20, 50, 100]}, cv=5, scoring='accuracy') on the noisy training labels, then predicts with
the best candidate refitted on all of them. `search` does the same with ni_erm's head:

  candidates  (C, T) in GridSearchCV's order: C-major (its ParameterGrid sorts the keys, and the last key, max_iter,
              varies fastest);
  folds       F_1..F_K = StratifiedKFold(K) over y, without shuffling (GridSearchCV's cv=K for a classifier);
  score       acc_j(C, T) = mean over i in F_j of [argmax_c f(x_i)_c == y_i], f fitted on the other folds for T
              epochs (lbfgs: iterations) at C, on the classes those folds hold;
  choice      the candidate of the largest mean_j acc_j; among equal means the first in candidate order
              (GridSearchCV's rank_test_score, 'min' ranks, and its argmin).

For each fold and C the heads of every T come from one run (ni_erm.fit_path), the same heads as separate fits.
What differs from the original: ni_erm's L-BFGS (optax) reaches the same solution as scikit-learn's once both have
converged but takes other iterates, so the candidates with few iterations (10, 20) are other heads than the
original's and can score otherwise (ni_erm's module docstring; experiments/configs/ni_erm_paper.py DIFFERENCES).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from noisy_jax.core import errors
from noisy_jax.experiment import ni_erm

PAPER_INVERSE_REGULARIZATIONS = (1e-4, 1e-3, 1e-2, 0.1, 1.0, 10.0, 100.0)  # main.py param_grid['C']
PAPER_EPOCHS = (10, 20, 50, 100)  # main.py param_grid['max_iter'] (lbfgs iterations)
PAPER_NUM_FOLDS = 5  # main.py GridSearchCV(cv=5)


@dataclasses.dataclass(frozen=True)
class GridResult:
  """The grid's cross-validated accuracies.

  Attributes:
    candidates: ((C, T), ...) [S], in GridSearchCV's order.
    fold_accuracy: acc [S, K] (float64), candidate by held-out fold.
  """

  candidates: tuple[tuple[float, int], ...]
  fold_accuracy: np.ndarray

  @property
  def mean_accuracy(self) -> np.ndarray:
    """[S]: mean over the folds (GridSearchCV's mean_test_score)."""
    return np.mean(self.fold_accuracy, axis=1)

  @property
  def std_accuracy(self) -> np.ndarray:
    """[S]: population standard deviation over the folds (GridSearchCV's std_test_score)."""
    return np.std(self.fold_accuracy, axis=1)

  @property
  def best_index(self) -> int:
    """The first candidate of the largest mean accuracy."""
    return int(np.argmax(self.mean_accuracy))

  @property
  def best(self) -> dict:
    """{'inverse_regularization': C, 'epochs': T} of the best candidate, as ni_erm.fit takes them."""
    inverse_regularization, epochs = self.candidates[self.best_index]
    return {"inverse_regularization": inverse_regularization, "epochs": epochs}

  def rows(self) -> list[dict]:
    """One dict per candidate: C, T, each fold's accuracy, mean, std and rank (1 the best; equal means share the
    smaller rank, as GridSearchCV's rank_test_score)."""
    means = self.mean_accuracy
    ranks = [1 + int(np.sum(means > mean)) for mean in means]
    return [
      {
        "inverse_regularization": c,
        "epochs": t,
        **{f"fold{j}_accuracy": float(a) for j, a in enumerate(self.fold_accuracy[s])},
        "mean_accuracy": float(means[s]),
        "std_accuracy": float(self.std_accuracy[s]),
        "rank": ranks[s],
      }
      for s, (c, t) in enumerate(self.candidates)
    ]


def _check_grid(inverse_regularizations, epochs, num_folds, labels) -> None:
  if not inverse_regularizations or any(not c > 0 for c in inverse_regularizations):
    raise errors.InputError(f"inverse_regularizations={tuple(inverse_regularizations)}; allowed: one or more C > 0.")
  if not epochs or any(int(t) < 1 for t in epochs) or len(set(epochs)) != len(epochs):
    raise errors.InputError(f"epochs={tuple(epochs)}; allowed: one or more distinct counts >= 1.")
  fewest = int(np.min(np.bincount(labels)[np.unique(labels)]))
  if not 2 <= num_folds <= fewest:
    raise errors.InputError(
      f"num_folds={num_folds}; allowed: 2 <= num_folds <= {fewest}, the examples of the smallest class (each fold "
      "holds some of every class out)."
    )


def search(
  features,
  labels,
  *,
  inverse_regularizations=PAPER_INVERSE_REGULARIZATIONS,
  epochs=PAPER_EPOCHS,
  num_folds: int = PAPER_NUM_FOLDS,
  seed: int = 0,
  **fit_settings,
) -> GridResult:
  """The cross-validated accuracy of every (C, T) of the grid (module docstring).

  Args:
    features: X [N, D].
    labels: y [N], the given class ids.
    inverse_regularizations: the grid's C values, each > 0 (np.inf: no penalty).
    epochs: the grid's epoch counts T (lbfgs: iterations), each >= 1.
    num_folds: K, 2 <= K <= the smallest class's examples.
    seed: the heads' PRNG keys (fold j: fold_in(key(seed), j)); the folds do not shuffle.
    **fit_settings: ni_erm.fit_path's other settings (optimizer, hidden_sizes, standardize, dtype, ...).
  """
  from sklearn import model_selection  # pylint: disable=g-import-not-at-top

  features, labels = np.asarray(features, np.float64), np.asarray(labels, np.int64)
  _check_grid(inverse_regularizations, epochs, num_folds, labels)
  candidates = tuple((float(c), int(t)) for c in inverse_regularizations for t in epochs)
  stops = sorted({int(t) for t in epochs})
  splits = list(model_selection.StratifiedKFold(n_splits=num_folds).split(features, labels))
  largest = max(len(train_rows) for train_rows, _ in splits)
  accuracy = np.zeros((len(candidates), num_folds))
  for fold, (train_rows, held_out_rows) in enumerate(splits):
    seen, train_labels = np.unique(labels[train_rows], return_inverse=True)
    for c_index, c in enumerate(inverse_regularizations):
      heads = ni_erm.fit_path(
        features[train_rows],
        train_labels,
        epochs=stops,
        num_classes=len(seen),
        key=jax.random.fold_in(jax.random.key(seed), fold),
        inverse_regularization=c,
        pad_rows=largest,
        **fit_settings,
      )
      for t_index, t in enumerate(epochs):
        predicted = seen[ni_erm.predict(heads[stops.index(int(t))], features[held_out_rows])]
        accuracy[c_index * len(epochs) + t_index, fold] = np.mean(predicted == labels[held_out_rows])
  return GridResult(candidates, accuracy)
