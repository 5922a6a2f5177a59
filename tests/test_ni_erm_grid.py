"""noisy_jax.experiment.ni_erm_grid: the grid search is scikit-learn's GridSearchCV (its folds, scores, ranks and
choice) run over ni_erm's head, on converged candidates it chooses as GridSearchCV over LogisticRegression, and
label_issues_from_features --ni_erm_grid_search finds the issues with the chosen settings."""

import csv
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from sklearn import base
from sklearn import linear_model
from sklearn import model_selection

from experiments import label_issues_from_features as cli
from experiments.configs import ni_erm_paper
from noisy_jax.core import label_issues
from noisy_jax.experiment import feature_issues
from noisy_jax.experiment import ni_erm
from noisy_jax.experiment import ni_erm_grid


def noisy_mixture(seed, n=240, d=6, c=3, spread=1.0, flip=0.3):
  """Overlapping Gaussian classes whose labels are flipped at random with probability `flip`."""
  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(c, d)) * spread
  y = rng.integers(0, c, n)
  x = centres[y] + rng.normal(size=(n, d))
  flipped = rng.random(n) < flip
  return x, np.where(flipped, rng.integers(0, c, n), y)


class HeadEstimator(base.ClassifierMixin, base.BaseEstimator):
  """ni_erm's head as a scikit-learn classifier (C, max_iter), so that GridSearchCV itself can search over it."""

  def __init__(self, C=1.0, max_iter=100):  # noqa: N803  (scikit-learn's parameter name)
    self.C = C  # noqa: N815
    self.max_iter = max_iter

  def fit(self, x, y):
    self.classes_, train_labels = np.unique(y, return_inverse=True)
    self.params_ = ni_erm.fit(
      x, train_labels, num_classes=len(self.classes_), epochs=self.max_iter, inverse_regularization=self.C
    )
    return self

  def predict(self, x):
    return self.classes_[ni_erm.predict(self.params_, x)]


def gridsearchcv(estimator, grid, x, y, folds):
  return model_selection.GridSearchCV(estimator, grid, cv=folds, scoring="accuracy").fit(x, y)


def test_search_is_gridsearchcv_over_the_same_head():
  """float64: every fold's accuracy, the means, the ranks and the best (C, T) equal GridSearchCV's over
  HeadEstimator, the original's grid and cv=5; the heads of a fold share one L-BFGS run here, one fit each there."""
  x, y = noisy_mixture(0)
  with jax.enable_x64(True):
    ours = ni_erm_grid.search(x, y, dtype=np.float64)
    theirs = gridsearchcv(
      HeadEstimator(),
      {"C": list(ni_erm_grid.PAPER_INVERSE_REGULARIZATIONS), "max_iter": list(ni_erm_grid.PAPER_EPOCHS)},
      x,
      y,
      ni_erm_grid.PAPER_NUM_FOLDS,
    )
  results = theirs.cv_results_
  assert [(p["C"], p["max_iter"]) for p in results["params"]] == list(ours.candidates)
  for fold in range(ni_erm_grid.PAPER_NUM_FOLDS):
    np.testing.assert_array_equal(ours.fold_accuracy[:, fold], results[f"split{fold}_test_score"])
  np.testing.assert_array_equal(ours.mean_accuracy, results["mean_test_score"])
  np.testing.assert_allclose(ours.std_accuracy, results["std_test_score"], rtol=1e-12)
  assert [row["rank"] for row in ours.rows()] == list(results["rank_test_score"])
  assert ours.best == {"inverse_regularization": theirs.best_params_["C"], "epochs": theirs.best_params_["max_iter"]}
  assert len(set(ours.mean_accuracy)) > 3  # the grid's candidates score differently here


def test_equal_means_choose_the_first_candidate():
  """Well-separated classes: every candidate scores 1.0; the choice is the first, as GridSearchCV's, all rank 1."""
  x, y = noisy_mixture(1, spread=20.0, flip=0.0)
  grid = {"inverse_regularization": (0.1, 1.0), "epochs": (20, 50)}
  ours = ni_erm_grid.search(x, y, inverse_regularizations=grid["inverse_regularization"], epochs=grid["epochs"])
  theirs = gridsearchcv(HeadEstimator(), {"C": [0.1, 1.0], "max_iter": [20, 50]}, x, y, 5)
  assert np.all(ours.mean_accuracy == 1.0)
  assert ours.best == {"inverse_regularization": 0.1, "epochs": 20} and theirs.best_index_ == ours.best_index == 0
  assert [row["rank"] for row in ours.rows()] == [1, 1, 1, 1] == list(theirs.cv_results_["rank_test_score"])


def test_converged_candidates_choose_as_gridsearchcv_over_logistic_regression():
  """Iterations enough for both solvers to converge: the same C chosen, and every fold's accuracy the same as
  GridSearchCV(LogisticRegression) gives (the same minimiser, hence the same held-out predictions)."""
  x, y = noisy_mixture(2, n=300, flip=0.4)
  cs = (1e-3, 1e-2, 0.1, 1.0)
  with jax.enable_x64(True):
    ours = ni_erm_grid.search(x, y, inverse_regularizations=cs, epochs=(300,), dtype=np.float64)
  theirs = gridsearchcv(linear_model.LogisticRegression(max_iter=5000, tol=1e-12), {"C": list(cs)}, x, y, 5)
  for fold in range(5):
    np.testing.assert_array_equal(ours.fold_accuracy[:, fold], theirs.cv_results_[f"split{fold}_test_score"])
  assert ours.best["inverse_regularization"] == theirs.best_params_["C"]
  assert len(set(ours.mean_accuracy)) > 1


def test_fit_path_heads_are_the_separate_fits():
  """fit_path's head after T epochs equals fit(epochs=T), for the L-BFGS path and a minibatch Adam path."""
  x, y = noisy_mixture(3)
  for settings in ({"inverse_regularization": 0.1}, {"optimizer": "adam", "batch_size": 32, "hidden_sizes": (8,)}):
    path = ni_erm.fit_path(x, y, epochs=(3, 10, 25), **settings)
    for head, epochs in zip(path, (3, 10, 25)):
      alone = ni_erm.fit(x, y, epochs=epochs, **settings)
      for ours, theirs in zip(jax.tree.leaves(head), jax.tree.leaves(alone)):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_paper_grid_is_the_configs():
  settings = ni_erm_paper.row("cifar10n_worst").probe
  assert ni_erm_grid.PAPER_INVERSE_REGULARIZATIONS == settings.inverse_regularization_grid
  assert ni_erm_grid.PAPER_EPOCHS == settings.max_iter_grid and ni_erm_grid.PAPER_NUM_FOLDS == settings.cv_folds


@pytest.mark.parametrize(
  "kwargs, message",
  [
    ({"inverse_regularizations": (1.0, 0.0)}, r"inverse_regularizations=\(1.0, 0.0\); allowed: one or more C > 0"),
    ({"inverse_regularizations": ()}, "inverse_regularizations=()"),
    ({"epochs": (10, 0)}, r"epochs=\(10, 0\); allowed: one or more distinct counts >= 1"),
    ({"epochs": (10, 10)}, r"epochs=\(10, 10\)"),
    ({"num_folds": 9}, "num_folds=9; allowed: 2 <= num_folds <= 8, the examples of the smallest class"),
  ],
)
def test_bad_grids_are_refused(kwargs, message):
  x, y = noisy_mixture(4, n=60, flip=0.0)
  y[:52] = np.where(y[:52] == 2, 0, y[:52])  # class 2 keeps 8 examples or fewer
  y[52:] = 2
  with pytest.raises(ValueError, match=message):
    ni_erm_grid.search(x, y, **kwargs)


def read_csv(path):
  with open(path, newline="", encoding="utf-8") as f:
    return list(csv.reader(f))


def test_command_finds_the_issues_with_the_grids_choice(tmp_path):
  """--method=ni_erm --ni_erm_grid_search (a subprocess: the flag): the grid's table in WORKDIR/ni_erm_grid.csv and
  label_issues.csv of feature_issues.find with the chosen C and epochs, named in the evidence column."""
  x, y = noisy_mixture(5, n=90)
  np.save(tmp_path / "features.npy", x)
  np.save(tmp_path / "labels.npy", y)
  command = [
    sys.executable,
    "-m",
    "experiments.label_issues_from_features",
    f"--features={tmp_path / 'features.npy'}",
    f"--labels={tmp_path / 'labels.npy'}",
    f"--workdir={tmp_path / 'out'}",
    "--method=ni_erm",
    "--num_folds=3",
    "--ni_erm_grid_search",
  ]
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  done = subprocess.run(command, cwd=repo, capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  grid = ni_erm_grid.search(x, y, num_folds=3)
  table = read_csv(tmp_path / "out" / cli.GRID_CSV)
  assert table[0] == list(grid.rows()[0]) and len(table) == 1 + len(grid.candidates)
  for row, expected in zip(table[1:], grid.rows()):
    np.testing.assert_allclose([float(v) for v in row], list(expected.values()), rtol=1e-12)
  best = grid.best
  _, issues = feature_issues.find(
    x,
    y,
    method="ni_erm",
    num_folds=3,
    inverse_regularization=best["inverse_regularization"],
    ni_erm_options={"epochs": best["epochs"]},
  )
  rows = read_csv(tmp_path / "out" / label_issues.CSV_FILE)
  assert [int(r[0]) for r in rows[1:]] == issues.records["index"].tolist()
  chosen = f"(C {best['inverse_regularization']:g}, {best['epochs']} epochs by 3-fold grid search)"
  assert rows[1][6].startswith(f"NI-ERM linear head, 3-fold out of sample {chosen}: p(given)")
  assert chosen in done.stdout


def test_grid_search_with_another_method_is_refused(tmp_path):
  x, y = noisy_mixture(6, n=60)
  np.save(tmp_path / "features.npy", x)
  np.save(tmp_path / "labels.npy", y)
  files = (str(tmp_path / "features.npy"), str(tmp_path / "labels.npy"))
  with pytest.raises(ValueError, match="--ni_erm_grid_search with --method=knn; .* use --method=ni_erm"):
    cli.run(*files, str(tmp_path / "out"), method="knn", ni_erm_grid_search=True)
  assert not (tmp_path / "out").exists()
