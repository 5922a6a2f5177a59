"""noisy_jax.experiment.feature_issues and experiments/label_issues_from_features.py: label issues from frozen
features. The probe's probabilities are out of sample and equal scikit-learn's cross_val_predict; the kNN vote equals
a brute-force re-computation, ties included; the flags equal cleanlab's; the command writes a training run's CSV or
nothing."""

import csv
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from experiments import label_issues_from_features as cli
from noisy_jax.core import label_issues
from noisy_jax.experiment import feature_issues

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def planted_clusters(seed=0, n=400, d=16, c=4, radius=8.0, noise_rate=0.2):
  """(features [n, d], given labels, clean labels): c Gaussian clusters (centres at distance `radius` from the
  origin in random directions, unit variance), every class separable from the others by a plane; a fraction
  `noise_rate` of the labels moved to another class chosen uniformly."""
  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(c, d))
  centres *= radius / np.linalg.norm(centres, axis=1, keepdims=True)
  clean = rng.integers(0, c, n)
  features = centres[clean] + rng.normal(size=(n, d))
  flipped = rng.permutation(n)[: int(noise_rate * n)]
  given = clean.copy()
  given[flipped] = (clean[flipped] + rng.integers(1, c, len(flipped))) % c
  return features, given, clean


def probe_pipeline():
  """The probe's model, written out as feature_issues documents it."""
  from sklearn import linear_model  # pylint: disable=g-import-not-at-top
  from sklearn import pipeline  # pylint: disable=g-import-not-at-top
  from sklearn import preprocessing  # pylint: disable=g-import-not-at-top

  return pipeline.make_pipeline(
    preprocessing.StandardScaler(),
    linear_model.LogisticRegression(
      C=feature_issues.DEFAULT_INVERSE_REGULARIZATION, max_iter=feature_issues.DEFAULT_MAX_ITER
    ),
  )


def flags_by_index(issues: label_issues.RunIssues) -> np.ndarray:
  flagged = np.zeros(len(issues.records), bool)
  flagged[issues.records["index"]] = issues.records["is_issue"]
  return flagged


@pytest.fixture(scope="module")
def clusters():
  return planted_clusters()


@pytest.fixture(scope="module")
def cluster_probs(clusters):
  """P of each method on `clusters`, computed once for the tests that read it."""
  features, given, _ = clusters
  return {
    "probe": feature_issues.probe_probabilities(features, given),
    "knn": feature_issues.knn_probabilities(features, given),
  }


# (a) out of sample: nothing vouches for its own label


def test_probe_and_knn_are_out_of_sample_on_unpredictable_labels():
  """Random labels on random features: no example's label can be predicted from the others, so out-of-sample P gives
  the given label about chance (1/4) on average, where the same probe fitted on all examples memorises them."""
  rng = np.random.default_rng(0)
  features, given = rng.normal(size=(200, 100)), rng.integers(0, 4, 200)
  rows = np.arange(200)
  out_of_sample = feature_issues.probe_probabilities(features, given, num_folds=3)
  in_sample = probe_pipeline().fit(features, given).predict_proba(features)
  knn = feature_issues.knn_probabilities(features, given, k=10)
  assert out_of_sample[rows, given].mean() < 0.32  # measured 0.236
  assert knn[rows, given].mean() < 0.32  # measured 0.245
  assert in_sample[rows, given].mean() > 0.6  # measured 0.836
  np.testing.assert_allclose(out_of_sample.sum(axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize(
  "method, min_precision, min_recall",
  [("probe", 0.9, 0.95), ("knn", 0.95, 0.95)],  # measured: probe 0.963 / 0.988, knn 1.000 / 1.000
)
def test_planted_flips_are_found(clusters, cluster_probs, method, min_precision, min_recall):
  """Separated clusters with 20% of the labels flipped (80 of 400): the flagged set (rule 'argmax') is the flips."""
  _, given, clean = clusters
  issues = feature_issues.run_issues(cluster_probs[method], given, evidence=method)
  flagged, planted = flags_by_index(issues), given != clean
  precision = np.sum(flagged & planted) / np.sum(flagged)
  recall = np.sum(flagged & planted) / np.sum(planted)
  assert precision >= min_precision and recall >= min_recall, (precision, recall)


# (b) equal to independent re-computations


def test_probe_equals_sklearn_cross_val_predict():
  from sklearn import model_selection  # pylint: disable=g-import-not-at-top

  seed = 3

  features, given, _ = planted_clusters(seed=seed, n=120, d=6, c=3, radius=2.0)
  folds = model_selection.StratifiedKFold(n_splits=4, shuffle=True, random_state=seed)
  theirs = model_selection.cross_val_predict(probe_pipeline(), features, given, cv=folds, method="predict_proba")
  ours = feature_issues.probe_probabilities(features, given, num_folds=4, seed=seed)
  np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


def test_probe_gives_zero_to_a_class_missing_from_the_training_folds():
  """Class 3 has one example, so the fold that holds it out trains without class 3; class 4 has none at all. P keeps
  C = 5 columns, 0 where a class was not trained on, rows summing to 1; the other columns are cross_val_predict's."""
  from sklearn import model_selection  # pylint: disable=g-import-not-at-top

  features, given, _ = planted_clusters(seed=1, n=60, d=5, c=3, radius=3.0)
  given[17] = 3
  folds = model_selection.StratifiedKFold(n_splits=3, shuffle=True, random_state=0)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # scikit-learn warns about the class with fewer members than folds
    ours = feature_issues.probe_probabilities(features, given, num_classes=5, num_folds=3)
    theirs = model_selection.cross_val_predict(probe_pipeline(), features, given, cv=folds, method="predict_proba")
    held_out_with_17 = next(test for _, test in folds.split(features, given) if 17 in test)
  assert ours.shape == (60, 5)
  np.testing.assert_allclose(ours.sum(axis=1), 1.0, atol=1e-12)
  assert np.all(ours[:, 4] == 0) and np.all(ours[held_out_with_17, 3] == 0)
  assert np.all(ours[np.setdiff1d(np.arange(60), held_out_with_17), 3] > 0)
  np.testing.assert_allclose(ours[:, :4], theirs, rtol=0, atol=1e-12)
  issues = feature_issues.run_issues(ours, given, evidence="probe")
  assert flags_by_index(issues)[17] and issues.records[0]["index"] == 17  # p(given) = 0: the most suspect


def test_probe_fold_trained_on_one_class_is_certain_of_it():
  features = np.arange(10.0).reshape(5, 2)
  given = np.array([0, 0, 0, 0, 1])
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    probs = feature_issues.probe_probabilities(features, given, num_folds=2)
  np.testing.assert_array_equal(probs[4], [1.0, 0.0])  # its training fold held class 0 only


def knn_brute_force(features, labels, num_classes, k):
  """The documented vote, one row at a time from the full N x N similarity matrix: the neighbours more similar than
  the k-th largest similarity (itself excluded) vote 1, those equal to it share the remaining votes."""
  unit = features / np.linalg.norm(features, axis=1, keepdims=True)
  similarity = unit @ unit.T
  probs = np.zeros((len(labels), num_classes))
  for i, row in enumerate(similarity):
    others = np.delete(np.arange(len(labels)), i)
    kth = np.sort(row[others])[::-1][k - 1]
    above, tied = others[row[others] > kth], others[row[others] == kth]
    for j in above:
      probs[i, labels[j]] += 1.0 / k
    for j in tied:
      probs[i, labels[j]] += (k - len(above)) / len(tied) / k
  return probs


@pytest.mark.parametrize("k", [1, 3, 10])
@pytest.mark.parametrize("block_rows", [None, 7])
@pytest.mark.parametrize("data", ["with_ties", "gaussian"])
def test_knn_equals_brute_force(k, block_rows, data):
  """'with_ties': vectors of four entries +-1 among eight (norm 2), so every similarity is a multiple of 1/4, exact
  in float32, and many tie at the k-th place; rows 30..39 duplicate rows 0..9 (other examples, so they count).
  'gaussian': no ties, the k nearest are unique."""
  rng = np.random.default_rng(k)
  if data == "with_ties":
    features = np.zeros((40, 8))
    for row in features:
      row[rng.permutation(8)[:4]] = rng.choice([-1.0, 1.0], 4)
    features[30:] = features[:10]
  else:
    features = rng.normal(size=(40, 8))
  labels = rng.integers(0, 3, 40)
  expected = knn_brute_force(features, labels, 3, k)
  ours = feature_issues.knn_probabilities(features, labels, k=k, block_rows=block_rows)
  np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-12)
  np.testing.assert_allclose(ours.sum(axis=1), 1.0, atol=1e-12)


def test_knn_excludes_itself_and_splits_ties():
  """Example 0 has two exact copies (labels 0 and 1) and k = 1: they tie for its one neighbour, half a vote each."""
  features = np.array([[1.0, 0], [1, 0], [2, 0], [0, 1], [-1, 0]])
  labels = np.array([1, 0, 1, 0, 0])
  probs = feature_issues.knn_probabilities(features, labels, k=1)
  np.testing.assert_array_equal(probs[0], [0.5, 0.5])  # itself (label 1) not counted
  np.testing.assert_array_equal(probs[1], [0.0, 1.0])  # rows 0 and 2 tie, both label 1
  np.testing.assert_array_equal(probs[3], [2 / 4, 2 / 4])  # orthogonal to all four others: every one ties
  # k = 3 for [-1, 0]: row 3 (similarity 0) votes 1; rows 0, 1, 2 tie at -1 and share the 2 votes left, 2/3 each
  np.testing.assert_allclose(feature_issues.knn_probabilities(features, labels, k=3)[4], [5 / 9, 4 / 9], atol=1e-15)


# (c) the flags are cleanlab's


def test_argmax_flags_equal_cleanlabs_predicted_neq_given(clusters, cluster_probs):
  """cleanlab's find_label_issues(filter_by='predicted_neq_given') flags the same examples as our 'argmax' rule, on
  the probe's P and on the kNN vote's (multiples of 1/k, where the given label often ties the maximum: cleanlab then
  keeps the given label too, as our rule does)."""
  cleanlab_filter = pytest.importorskip("cleanlab.filter")
  _, given, _ = clusters
  probe = cluster_probs["probe"]
  theirs = cleanlab_filter.find_label_issues(given, probe, filter_by="predicted_neq_given", n_jobs=1)
  np.testing.assert_array_equal(flags_by_index(feature_issues.run_issues(probe, given, evidence="probe")), theirs)

  rng = np.random.default_rng(0)
  features, given = rng.normal(size=(200, 8)), rng.integers(0, 4, 200)
  knn = feature_issues.knn_probabilities(features, given, k=10)
  theirs = cleanlab_filter.find_label_issues(given, knn, filter_by="predicted_neq_given", n_jobs=1)
  ours = flags_by_index(feature_issues.run_issues(knn, given, evidence="knn"))
  given_ties_a_lower_class = (knn[np.arange(200), given] == knn.max(axis=1)) & (knn.argmax(axis=1) < given)
  assert given_ties_a_lower_class.sum() > 5  # the ties are exercised (16 here)
  np.testing.assert_array_equal(ours, theirs)


def confident_by_loop(probs, given, eps=1e-6):
  """The 'confident' rule re-computed example by example (noisy_jax.core.label_issues' docstring): per-class
  thresholds t_k = max(2 eps, mean P[i, k] over the examples given k), confident classes P[i, k] >= t_k - eps, the
  guess (the one confident class, or the most probable of all when several are), flagged when the guess is not the
  given label and the given label is not within eps of the most probable."""
  n, c = probs.shape
  t = [max(2 * eps, np.mean([probs[i, k] for i in range(n) if given[i] == k])) for k in range(c)]
  flagged = np.zeros(n, bool)
  for i, y in enumerate(given):
    confident = [k for k in range(c) if probs[i, k] >= t[k] - eps]
    guess = confident[0] if len(confident) == 1 else int(np.argmax(probs[i]))
    given_near_max = int(np.argmax(probs[i] + eps * (np.arange(c) == y))) == y
    flagged[i] = bool(confident) and guess != y and not given_near_max
  return flagged


def test_confident_flags_equal_cleanlabs_confident_learning(clusters, cluster_probs):
  """cleanlab's find_label_issues(filter_by='confident_learning') flags the same examples as our 'confident' rule,
  and so does a loop over the examples: on the probe's and the kNN vote's P of the clusters, and on a kNN vote of
  random labels (multiples of 1/10, many ties), where the rule noisy_jax had before (the most probable confident
  class, no eps, no reduction) flagged 15 examples differently."""
  cleanlab_filter = pytest.importorskip("cleanlab.filter")
  rng = np.random.default_rng(0)
  features, random_given = rng.normal(size=(200, 8)), rng.integers(0, 4, 200)
  cases = {
    "probe": (cluster_probs["probe"], clusters[1]),
    "knn": (cluster_probs["knn"], clusters[1]),
    "knn, random labels": (feature_issues.knn_probabilities(features, random_given, k=10), random_given),
  }
  for name, (probs, given) in cases.items():
    ours = flags_by_index(feature_issues.run_issues(probs, given, evidence=name, rule="confident"))
    theirs = cleanlab_filter.find_label_issues(given, probs, filter_by="confident_learning", n_jobs=1)
    np.testing.assert_array_equal(ours, theirs, err_msg=name)
    np.testing.assert_array_equal(ours, confident_by_loop(probs, given), err_msg=name)
    assert 0 < ours.sum() < len(given), name


def test_run_issues_are_label_issues_find_with_evidence():
  rng = np.random.default_rng(2)
  probs, given = rng.dirichlet(np.ones(3), size=50), rng.integers(0, 3, 50)
  issues = feature_issues.run_issues(probs, given, evidence="kNN vote, k=10", score="normalized_margin")
  np.testing.assert_array_equal(issues.records, label_issues.find(probs, given, score="normalized_margin"))
  first = issues.records[0]
  i, y, s = first["index"], first["given_label"], first["suggested_label"]
  assert issues.evidence[0] == f"kNN vote, k=10: p(given) {probs[i, y]:.3f}, p(suggested) {probs[i, s]:.3f}"
  assert feature_issues.method_evidence("probe", num_folds=5) == "linear probe, 5-fold out of sample"


# (d) the command


def write_inputs(folder, n=60, seed=0):
  features, given, _ = planted_clusters(seed=seed, n=n, d=6, c=3, radius=4.0)
  paths = {"features": str(folder / "features.npy"), "labels": str(folder / "labels.npy")}
  np.save(paths["features"], features)
  np.save(paths["labels"], given)
  return paths, features, given


def read_csv(path):
  with open(path, newline="", encoding="utf-8") as f:
    return list(csv.reader(f))


def test_command_writes_a_training_runs_csv(tmp_path):
  paths, features, given = write_inputs(tmp_path)
  (tmp_path / "sources.txt").write_text("".join(f"images/{i:03d}.png\n" for i in range(60)), encoding="utf-8")
  command = [
    sys.executable,
    "-m",
    "experiments.label_issues_from_features",
    f"--features={paths['features']}",
    f"--labels={paths['labels']}",
    f"--workdir={tmp_path / 'out'}",
    "--method=knn",
    "--k=5",
    f"--sources={tmp_path / 'sources.txt'}",
    "--class_names=cat,dog,fox",
  ]
  done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  rows = read_csv(tmp_path / "out" / label_issues.CSV_FILE)
  assert tuple(rows[0]) == label_issues.CSV_COLUMNS and len(rows) == 61
  _, issues = feature_issues.find(features, given, method="knn", k=5)
  names = ["cat", "dog", "fox"]
  assert [int(r[0]) for r in rows[1:]] == issues.records["index"].tolist()
  assert all(r[1] == f"images/{int(r[0]):03d}.png" and r[2] == names[given[int(r[0])]] for r in rows[1:])
  assert [r[6] for r in rows[1:]] == issues.evidence and rows[1][6].startswith("kNN vote, k=5: p(given)")
  assert f"flagged: {int(issues.records['is_issue'].sum())} " in done.stdout and "N = 60 examples" in done.stdout

  summary = cli.run(paths["features"], paths["labels"], str(tmp_path / "probe"), num_folds=3, rule="confident")
  _, issues = feature_issues.find(features, given, num_folds=3, rule="confident")
  rows = read_csv(summary.csv_path)
  assert [int(r[0]) for r in rows[1:]] == issues.records["index"].tolist()
  assert [r[5] == "True" for r in rows[1:]] == issues.records["is_issue"].tolist()
  assert rows[1][6].startswith("linear probe, 3-fold out of sample: p(given)")
  assert (summary.num_examples, summary.num_classes, summary.num_flagged) == (60, 3, issues.records["is_issue"].sum())


@pytest.mark.parametrize(
  "change, expected",
  [
    ({"features": np.zeros((59, 6))}, "has 59 rows but"),
    ({"features": np.zeros(60)}, r"2-D array \[N, D\].*shape \(60,\)"),
    ({"nan_at": (7, 2)}, r"non-finite values \(nan at row 7, column 2"),
    ({"labels_value": (5, 3)}, r"label 3 \(row 5\) is outside the class ids \[0, 3\) allowed by --class_names"),
    ({"labels_value": (4, -1)}, r"label -1 \(row 4\) is outside"),
    ({"labels": np.zeros(60)}, "must be integer class ids; got dtype float64"),
    ({"k": 60, "method": "knn"}, r"--k=60; allowed: 1 <= k <= N - 1 = 59"),
    ({"num_folds": 1}, r"--num_folds=1"),
    ({"num_folds": 25, "few_of_class_2": 4}, r"--num_folds=25, with 4 example\(s\) of class 2 \('fox'\)"),
    ({"sources_lines": 59}, r"has 59 lines for 60 examples"),
    ({"class_names": "cat,dog,cat"}, r"names \['cat'\] more than once"),
    ({"missing": "features"}, r"--features='.*nowhere.npy': no such file"),
    ({"npz": True}, r"is an .npz archive"),
    ({"text": True}, r"--features='.*features.txt' is not a NumPy .npy array"),
  ],
)
def test_command_refuses_bad_inputs_and_writes_nothing(tmp_path, change, expected):
  paths, features, given = write_inputs(tmp_path)
  if "features" in change:
    np.save(paths["features"], change["features"])
  if "nan_at" in change:
    features[change["nan_at"]] = np.nan
    np.save(paths["features"], features)
  if "labels_value" in change:
    row, value = change["labels_value"]
    given[row] = value
    np.save(paths["labels"], given)
  if "labels" in change:
    np.save(paths["labels"], change["labels"])
  if "few_of_class_2" in change:
    given[given == 2] = 0
    given[: change["few_of_class_2"]] = 2
    np.save(paths["labels"], given)
  if "missing" in change:
    paths["features"] = str(tmp_path / "nowhere.npy")
  if "npz" in change:
    paths["features"] = str(tmp_path / "features.npz")
    np.savez(paths["features"], x=features)
  if "text" in change:
    paths["features"] = str(tmp_path / "features.txt")
    np.savetxt(paths["features"], features)
  sources = None
  if "sources_lines" in change:
    sources = str(tmp_path / "sources.txt")
    (tmp_path / "sources.txt").write_text("a\n" * change["sources_lines"], encoding="utf-8")
  workdir = tmp_path / "out"
  with pytest.raises((ValueError, FileNotFoundError), match=expected):
    cli.run(
      paths["features"],
      paths["labels"],
      str(workdir),
      method=change.get("method", "probe"),
      num_folds=change.get("num_folds", 5),
      k=change.get("k", 10),
      sources_path=sources,
      class_names=change.get("class_names", "cat,dog,fox"),
    )
  assert not workdir.exists() or os.listdir(workdir) == []


def test_command_exits_with_the_message(tmp_path):
  paths, _, _ = write_inputs(tmp_path)
  command = [
    sys.executable,
    "-m",
    "experiments.label_issues_from_features",
    f"--features={paths['features']}",
    f"--labels={paths['labels']}",
    f"--workdir={tmp_path / 'out'}",
    "--method=knn",
    "--k=100",
  ]
  done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
  assert done.returncode != 0
  assert "--k=100; allowed: 1 <= k <= N - 1 = 59" in done.stderr, done.stderr[-3000:]
  assert not (tmp_path / "out").exists()


def test_probe_limits_the_threads_during_the_fit(monkeypatch):
  """Every BLAS/OpenMP pool threadpoolctl sees holds `threads` threads while LogisticRegression fits (1 by default;
  the pools are set to 2 around the call, so a probe that did not limit them would see 2), and the pools are
  restored afterwards; threads=None leaves them alone."""
  from sklearn import linear_model  # pylint: disable=g-import-not-at-top
  import threadpoolctl  # pylint: disable=g-import-not-at-top

  seen = []
  fit = linear_model.LogisticRegression.fit

  def recording_fit(self, *args, **kwargs):
    seen.append({(pool["user_api"], pool["filepath"]): pool["num_threads"] for pool in threadpoolctl.threadpool_info()})
    return fit(self, *args, **kwargs)

  monkeypatch.setattr(linear_model.LogisticRegression, "fit", recording_fit)
  features, given, _ = planted_clusters(n=60, d=4, c=3)
  with threadpoolctl.threadpool_limits(limits=2):
    feature_issues.probe_probabilities(features, given, num_folds=3)
    after = [pool["num_threads"] for pool in threadpoolctl.threadpool_info()]
    feature_issues.probe_probabilities(features, given, num_folds=3, threads=None)
  assert len(seen) == 6 and "blas" in {api for api, _ in seen[0]}, seen  # NumPy's and SciPy's BLAS at least
  assert all(set(pools.values()) == {1} for pools in seen[:3]), seen[:3]
  assert after == [2] * len(after) and all(set(pools.values()) == {2} for pools in seen[3:]), (after, seen[3:])
  with pytest.raises(ValueError, match="threads=0"):
    feature_issues.probe_probabilities(features, given, num_folds=3, threads=0)


@pytest.mark.parametrize("method", ["probe", "knn", "wann"])
def test_features_path_imports_no_jax(tmp_path, method):
  """`python -m experiments.label_issues_from_features --features=... --labels=...` (its __main__, through absl's
  app.run) writes the CSV without importing JAX, Flax or orbax (about 2 s per call): they are imported for
  --images only."""
  paths, _, _ = write_inputs(tmp_path)
  argv = [
    "label_issues_from_features",
    f"--features={paths['features']}",
    f"--labels={paths['labels']}",
    f"--workdir={tmp_path / 'out'}",
    f"--method={method}",
    "--num_folds=3",
    "--kmin=3",
    "--kmax=11",
  ]
  script = (
    "import runpy, sys\n"
    f"sys.argv = {argv!r}\n"
    "try:\n"
    "  runpy.run_module('experiments.label_issues_from_features', run_name='__main__', alter_sys=True)\n"
    "except SystemExit as exit:\n"
    "  assert not exit.code, exit.code\n"
    "print('heavy:', sorted({m.split('.')[0] for m in sys.modules} & {'jax', 'jaxlib', 'flax', 'orbax'}))\n"
  )
  done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
  assert done.returncode == 0, done.stderr[-3000:]
  assert "heavy: []" in done.stdout, done.stdout[-3000:]
  assert (tmp_path / "out" / label_issues.CSV_FILE).exists()


def test_command_prints_a_wrong_input_alone(tmp_path):
  """A missing --features file at the command line: `error: MESSAGE` on stderr, one line and no traceback, exit
  status 2 (experiments/cli.py), nothing written."""
  paths, _, _ = write_inputs(tmp_path)
  command = [
    sys.executable,
    "-m",
    "experiments.label_issues_from_features",
    f"--features={tmp_path / 'nowhere.npy'}",
    f"--labels={paths['labels']}",
    f"--workdir={tmp_path / 'out'}",
  ]
  done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
  assert done.returncode == 2, done.stderr[-3000:]
  assert done.stderr.strip().splitlines() == [
    f"error: --features={str(tmp_path / 'nowhere.npy')!r}: no such file (an .npy array is expected)."
  ], done.stderr[-3000:]
  assert not (tmp_path / "out").exists()


def test_images_embedded_by_an_exported_network(tmp_path):
  """--images=DIR --model=EXPORT: every file of DIR/LABEL/ gets a row, its class is its folder's, and the CSV is
  feature_issues.find of the network's embeddings (LoadedModel.embed) of the same images, as arrays. The network is
  an MLP with random weights on 8x8 images (what is tested is the path from files to rows, not the network)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import ml_collections  # pylint: disable=g-import-not-at-top
  from PIL import Image  # pylint: disable=g-import-not-at-top
  from sklearn import datasets  # pylint: disable=g-import-not-at-top

  from noisy_jax import models  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import normalization  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import export  # pylint: disable=g-import-not-at-top

  digits = datasets.load_digits()
  codes = (digits.images[:45] * 255 / 16).round().astype(np.uint8)
  names = ("eight", "five", "one")  # folders: sorted names are the class ids, whatever the digit
  for i, image in enumerate(codes):
    os.makedirs(tmp_path / "images" / names[i % 3] / "nested", exist_ok=True)
    Image.fromarray(image).save(tmp_path / "images" / names[i % 3] / ("nested" if i % 2 else "") / f"{i:02d}.png")
  model_config = ml_collections.ConfigDict({"name": "mlp", "kwargs": {"hidden_sizes": (12,)}})
  model = models.build(model_config.name, 3, (8, 8, 1), kwargs=model_config.kwargs, bn_axis_name=None)
  variables = model.init(jax.random.key(0), jnp.zeros((1, 8, 8, 1)), train=False)
  norm = normalization.Normalization("per_channel", 255.0, np.float32([[[0.3]]]), np.float32([[[0.25]]]))
  export.save(
    str(tmp_path / "model"),
    variables=variables,
    model_config=model_config,
    num_classes=3,
    input_shape=(8, 8, 1),
    normalization=norm,
    pixel_max=255.0,
  )
  summary = cli.run(
    None, None, str(tmp_path / "out"), method="knn", k=3, images=str(tmp_path / "images"), model=str(tmp_path / "model")
  )
  rows = read_csv(summary.csv_path)
  paths = sorted(
    os.path.relpath(os.path.join(r, f), tmp_path / "images") for r, _, fs in os.walk(tmp_path / "images") for f in fs
  )
  assert summary.num_examples == 45 and summary.num_features == 12 and len(rows) == 46
  assert sorted(r[1] for r in rows[1:]) == paths
  assert all(r[2] == r[1].split(os.sep)[0] for r in rows[1:])  # given label = the class folder's name
  order = {p: i for i, p in enumerate(paths)}
  x = np.stack([np.asarray(Image.open(tmp_path / "images" / p))[..., None] for p in paths])
  features = export.load_model(str(tmp_path / "model")).embed(x)
  given = np.asarray([names.index(p.split(os.sep)[0]) for p in paths])
  _, expected = feature_issues.find(features, given, method="knn", k=3)
  assert [order[r[1]] for r in rows[1:]] == expected.records["index"].tolist()
  np.testing.assert_allclose([float(r[4]) for r in rows[1:]], expected.records["label_quality"], atol=1e-6)
  (tmp_path / "images" / "stray.png").write_bytes((tmp_path / "images" / "one" / "02.png").read_bytes())
  with pytest.raises(ValueError, match=r"stray\.png is not inside a class folder"):
    cli.run(None, None, str(tmp_path / "out2"), images=str(tmp_path / "images"), model=str(tmp_path / "model"))
  assert not os.path.exists(tmp_path / "out2")
  with pytest.raises(ValueError, match="give one of --features and --labels"):
    cli.run("f.npy", None, str(tmp_path / "out3"), images=str(tmp_path / "images"), model=str(tmp_path / "model"))


# (e) NI-ERM and WANN through feature_issues and the command


def test_ni_erm_and_wann_through_find_and_the_command(tmp_path):
  """--method=ni_erm (a subprocess: the flags, JAX) and --method=wann (cli.run) write the CSV of feature_issues.find
  with the same settings, the detector named in the evidence column; find's P is the detector's own."""
  from noisy_jax.experiment import ni_erm  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import wann  # pylint: disable=g-import-not-at-top

  paths, features, given = write_inputs(tmp_path)
  command = [
    sys.executable,
    "-m",
    "experiments.label_issues_from_features",
    f"--features={paths['features']}",
    f"--labels={paths['labels']}",
    f"--workdir={tmp_path / 'ni_erm'}",
    "--method=ni_erm",
    "--num_folds=3",
    "--ni_erm_epochs=30",
  ]
  done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  options = {"epochs": 30}
  probs, issues = feature_issues.find(features, given, method="ni_erm", num_folds=3, ni_erm_options=options)
  np.testing.assert_array_equal(probs, ni_erm.out_of_sample_probabilities(features, given, num_folds=3, epochs=30))
  rows = read_csv(tmp_path / "ni_erm" / label_issues.CSV_FILE)
  assert [int(r[0]) for r in rows[1:]] == issues.records["index"].tolist() and len(rows) == 61
  assert rows[1][6].startswith("NI-ERM linear head, 3-fold out of sample: p(given)")
  assert "detector: NI-ERM linear head, 3-fold out of sample" in done.stdout

  summary = cli.run(paths["features"], paths["labels"], str(tmp_path / "wann"), method="wann", kmin=3, kmax=11)
  probs, issues = feature_issues.find(features, given, method="wann", kmin=3, kmax=11)
  np.testing.assert_array_equal(probs, wann.out_of_sample_probabilities(features, given, kmin=3, kmax=11))
  rows = read_csv(summary.csv_path)
  assert [int(r[0]) for r in rows[1:]] == issues.records["index"].tolist()
  assert rows[1][6].startswith("WANN vote, k in [3, 11], leave one out: p(given)")
  assert summary.evidence == "WANN vote, k in [3, 11], leave one out"
  assert feature_issues.method_evidence("ni_erm", num_folds=5, hidden_sizes=(64, 32)) == (
    "NI-ERM MLP head (hidden 64,32), 5-fold out of sample"
  )
  assert feature_issues.NI_ERM_OPTIMIZERS == ni_erm.OPTIMIZERS
  assert feature_issues.NI_ERM_DEFAULT_EPOCHS == ni_erm.DEFAULT_EPOCHS


def test_planted_flips_are_found_by_ni_erm_and_wann(clusters):
  """The separated clusters with 20% flipped labels: both new detectors flag the flips (rule 'argmax')."""
  features, given, clean = clusters
  for method, options in (("ni_erm", {"ni_erm_options": {"epochs": 50}}), ("wann", {"kmin": 5, "kmax": 21})):
    _, issues = feature_issues.find(features, given, method=method, **options)
    flagged, planted = flags_by_index(issues), given != clean
    precision = np.sum(flagged & planted) / np.sum(flagged)
    recall = np.sum(flagged & planted) / np.sum(planted)
    assert precision >= 0.9 and recall >= 0.95, (method, precision, recall)


@pytest.mark.parametrize(
  "settings, expected",
  [
    ({"method": "wann", "kmax": 59}, r"--kmin=11, --kmax=59; allowed: 1 <= kmin <= kmax <= N - 2 = 58"),
    ({"method": "wann", "kmin": 13, "kmax": 11}, r"--kmin=13, --kmax=11"),
    ({"method": "ni_erm", "ni_erm": {"batch_size": 8}}, r"--ni_erm_batch_size=8 with --ni_erm_optimizer=lbfgs"),
    ({"method": "ni_erm", "num_folds": 1}, r"--num_folds=1"),
    ({"flags": {"epochs": 0}}, r"--ni_erm_epochs=0; allowed: >= 1"),
    ({"flags": {"hidden_sizes": "64,x"}}, r"--ni_erm_hidden_sizes='64,x'"),
    ({"flags": {"optimizer": "rmsprop"}}, r"--ni_erm_optimizer"),
    ({"flags": {"learning_rate": -1.0}}, r"--ni_erm_learning_rate=-1.0"),
    ({"flags": {"batch_size": -2}}, r"--ni_erm_batch_size=-2"),
  ],
)
def test_ni_erm_and_wann_settings_are_refused_by_name(tmp_path, settings, expected):
  paths, _, _ = write_inputs(tmp_path)
  workdir = tmp_path / "out"
  with pytest.raises(ValueError, match=expected):
    ni_erm = cli.ni_erm_options(**settings["flags"]) if "flags" in settings else None
    if "ni_erm" in settings:
      ni_erm = {**cli.ni_erm_options(), **settings["ni_erm"]}
    cli.run(
      paths["features"],
      paths["labels"],
      str(workdir),
      method=settings.get("method", "ni_erm"),
      num_folds=settings.get("num_folds", 3),
      kmin=settings.get("kmin", 11),
      kmax=settings.get("kmax", 51),
      ni_erm=ni_erm,
    )
  assert not workdir.exists()
