"""noisy_jax.core.label_issues: the scores and flag rules against hand computations and NumPy loops, bad input, and
WORKDIR/label_issues.csv of real runs against the planted errors (the injected noise) and the method's own state."""

import csv
import functools

import ml_collections
import numpy as np
import pytest

from experiments.configs import ce
from noisy_jax import data
from noisy_jax.core import label_issues
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.experiment import runs
from noisy_jax.methods import joint_optimization
from noisy_jax.methods import plain_loss
import resume_worker

PROBS = np.array([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
GIVEN = np.array([0, 2, 1, 0])


def test_scores_are_the_formulas():
  np.testing.assert_allclose(label_issues.label_quality(PROBS, GIVEN), [0.7, 0.3, 0.5, 0.2])
  # (1 + p_y - max_{k != y} p_k) / 2
  np.testing.assert_allclose(
    label_issues.label_quality(PROBS, GIVEN, score="normalized_margin"),
    [(1 + 0.7 - 0.2) / 2, (1 + 0.3 - 0.6) / 2, (1 + 0.5 - 0.5) / 2, (1 + 0.2 - 0.5) / 2],
  )
  np.testing.assert_array_equal(label_issues.rank(PROBS, GIVEN), [3, 1, 2, 0])
  ties = np.full((4, 2), 0.5)
  np.testing.assert_array_equal(label_issues.rank(ties, np.array([1, 0, 1, 0])), [0, 1, 2, 3])  # stable


def test_flag_rules_against_loops():
  # argmax: another class strictly more probable (row 2 ties its given label 1 with class 0: not flagged)
  np.testing.assert_array_equal(label_issues.flag(PROBS, GIVEN), [False, True, False, True])
  rng = np.random.default_rng(0)
  probs = rng.dirichlet(np.ones(4) * 0.5, size=200)
  given = rng.integers(0, 4, 200)
  np.testing.assert_array_equal(label_issues.flag(probs, given, rule="confident"), confident_by_loop(probs, given))
  for probs, given in edge_cases(np.random.default_rng(3), 20):
    np.testing.assert_array_equal(label_issues.flag(probs, given, rule="confident"), confident_by_loop(probs, given))


def confident_by_loop(probs, given, eps=1e-6):
  """The 'confident' rule example by example, as label_issues' docstring states it: thresholds t_k (the mean
  probability of class k over the examples given k, at least 2 eps; a class nobody is given: never confident), the
  confident classes K_i (P >= t - eps), the guess (the one class of K_i, or the most probable of all classes when
  K_i holds several; lowest id on ties), flagged unless the given label is within eps of the most probable."""
  n, c = probs.shape
  thresholds = [
    max(2 * eps, np.mean([probs[i, k] for i in range(n) if given[i] == k])) if k in given else np.inf for k in range(c)
  ]
  flagged = []
  for i in range(n):
    confident = [k for k in range(c) if probs[i, k] >= thresholds[k] - eps]
    y = given[i]
    guess = confident[0] if len(confident) == 1 else max(range(c), key=lambda k: (probs[i, k], -k))
    given_near_max = all(probs[i, y] + eps > probs[i, k] for k in range(y)) and all(
      probs[i, y] + eps >= probs[i, k] for k in range(y + 1, c)
    )
    flagged.append(bool(confident) and guess != y and not given_near_max)
  return np.array(flagged)


def edge_cases(rng, trials, n=40):
  """(probs [n, C], given [n]) pairs where the 'confident' rule meets its edge cases often: skewed Dirichlet
  concentrations (thresholds far apart) and, every other trial, probabilities quantised to multiples of 1/k as a
  kNN vote gives them (ties, and values equal to a threshold up to rounding)."""
  for trial in range(trials):
    c, k = int(rng.integers(2, 6)), int(rng.integers(2, 11))
    alpha = rng.uniform(0.05, 2.0, c)
    if trial % 2:
      probs = np.stack([rng.multinomial(k, rng.dirichlet(alpha)) for _ in range(n)]) / k
    else:
      probs = rng.dirichlet(alpha, n)
    yield probs, rng.integers(0, c, n)


def test_scores_and_rules_equal_cleanlabs():
  """cleanlab (2.9) computes the same quality scores, and its 'predicted_neq_given' and 'confident_learning' filters
  flag the same examples as our 'argmax' and 'confident' rules."""
  import cleanlab.filter  # pylint: disable=g-import-not-at-top  (the test extra installs it)
  import cleanlab.rank  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(1)
  for c, concentration in ((3, 1.0), (5, 0.5), (10, 0.2)):
    probs = rng.dirichlet(np.ones(c) * concentration, size=400)
    given = rng.integers(0, c, 400)
    for score in label_issues.SCORES:
      np.testing.assert_allclose(
        label_issues.label_quality(probs, given, score=score),
        cleanlab.rank.get_label_quality_scores(given, probs, method=score),
        atol=1e-12,
      )
    for rule, filter_by in (("argmax", "predicted_neq_given"), ("confident", "confident_learning")):
      theirs = cleanlab.filter.find_label_issues(given, probs, filter_by=filter_by, n_jobs=1)
      np.testing.assert_array_equal(label_issues.flag(probs, given, rule=rule), theirs, err_msg=rule)


def test_confident_rule_equals_cleanlabs_at_its_edges():
  """cleanlab's find_label_issues(filter_by='confident_learning') flags the same examples as our 'confident' rule
  where the two could part: several confident classes whose most probable class is not one of them (cleanlab
  guesses the overall argmax), a given label that is the most probable but below its threshold while another class
  is above its own (cleanlab's _reduce_issues keeps it), probabilities within eps = 1e-6 below a threshold, ties.
  The rule of the earlier noisy_jax (the most probable confident class, no eps, no reduction) differed on 87 of
  these 1,607 examples."""
  import cleanlab.filter  # pylint: disable=g-import-not-at-top  (the test extra installs it)

  # t_0 = (0.1 + 0.2 + 0.3) / 3 = 0.20000000000000004 in float64: the last row's p_0 = 0.2 is confident within eps
  within_eps = (
    np.array([[0.1, 0.9, 0], [0.2, 0.8, 0], [0.3, 0.7, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1], [0.2, 0.5, 0.3]]),
    np.array([0, 0, 0, 1, 1, 2, 2]),
  )
  seen = {"argmax_not_confident": 0, "given_max_below_threshold": 0, "within_eps": 0}
  for probs, given in [within_eps, *edge_cases(np.random.default_rng(4), 40)]:
    theirs = cleanlab.filter.find_label_issues(given, probs, filter_by="confident_learning", n_jobs=1)
    np.testing.assert_array_equal(label_issues.flag(probs, given, rule="confident"), theirs)
    t = label_issues.confident_thresholds(probs, given)
    confident, rows = probs >= t - 1e-6, np.arange(len(given))
    best = probs.argmax(axis=1)
    seen["argmax_not_confident"] += int(np.sum((confident.sum(axis=1) > 1) & ~confident[rows, best]))
    seen["given_max_below_threshold"] += int(np.sum((best == given) & ~confident[rows, given] & confident.any(axis=1)))
    seen["within_eps"] += int(np.sum((probs >= t - 1e-6) & (probs < t)))
  assert min(seen.values()) > 0, seen


def test_find_sorts_most_suspect_first():
  found = label_issues.find(PROBS, GIVEN)
  assert found.dtype == label_issues.RECORD_DTYPE
  np.testing.assert_array_equal(found["index"], [3, 1, 2, 0])
  np.testing.assert_array_equal(found["suggested_label"], [2, 1, 1, 0])  # the tie keeps the given label
  np.testing.assert_array_equal(found["is_issue"], [True, True, False, False])
  assert np.all(np.diff(found["label_quality"]) >= 0)


@pytest.mark.parametrize(
  "probs, given, match",
  [
    (PROBS, np.array([0, 3, 1, 0]), "label 3 is outside"),
    (PROBS, GIVEN[:3], "must be"),
    (PROBS, GIVEN.astype(float), "integers"),
    (-PROBS, GIVEN, "non-negative"),
  ],
)
def test_bad_input_is_named(probs, given, match):
  with pytest.raises(ValueError, match=match):
    label_issues.find(probs, given)


def test_bad_settings_fail_before_training():
  config = ce.get_config()
  config.label_issues.score = "loss"
  with pytest.raises(ValueError, match="'normalized_margin', 'self_confidence'"):
    runs.label_issue_settings(config)
  with pytest.raises(ValueError, match="'argmax', 'confident'"):
    label_issues.check_settings("self_confidence", "threshold")
  config.label_issues.score, config.label_issues.history_length = "self_confidence", -2
  wanted = runs.label_issue_settings(config).history_length
  with pytest.raises(ValueError, match="history_length=-2"):
    label_issues.history_length(
      wanted, plain_loss.method("cross_entropy"), num_epochs=1, num_examples=10, num_classes=2
    )


def test_settings_left_unset_take_the_defaults():
  config = ce.get_config()
  del config.label_issues
  assert runs.label_issue_settings(config) == runs.LabelIssueSettings(
    label_issues.DEFAULT_SCORE, label_issues.DEFAULT_RULE, label_issues.DEFAULT_HISTORY_LENGTH
  )


def test_auto_history_records_every_epoch_that_fits_the_budget():
  plain = plain_loss.method("cross_entropy")
  auto = functools.partial(label_issues.history_length, label_issues.AUTO_HISTORY, plain, num_epochs=40)
  assert auto(num_examples=3_600, num_classes=10) == 40  # 5.5 MiB
  assert auto(num_examples=50_000, num_classes=100) == 13  # 19 MiB an epoch
  assert auto(num_examples=1_000_000, num_classes=14) == 4  # 53 MiB an epoch
  assert auto(num_examples=1_281_167, num_classes=1000) == 0  # 4.8 GiB
  assert label_issues.history_length(3, plain, num_epochs=40, num_examples=1_000_000, num_classes=14) == 3
  jo = joint_optimization.method(alpha=1.0, beta=0.5, prior=joint_optimization.uniform_prior(3), begin=1)
  assert label_issues.history_length(-1, jo, num_epochs=40, num_examples=10, num_classes=3) == 0  # keeps its own


def test_write_csv_with_names_and_sources(tmp_path):
  table = label_table_lib.create(np.array([0, 1, 1]), 2, history_length=2)
  table = label_table_lib.record(table, np.arange(3), np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7]]), slot=0)
  issues = label_issues.from_run(plain_loss.method("cross_entropy"), table)
  path = label_issues.write_csv(
    str(tmp_path / "issues.csv"), issues, sources=["a.png", "b.png", "c.png"], class_names=["cat", "dog"]
  )
  rows = list(csv.DictReader(open(path)))
  assert tuple(rows[0]) == label_issues.CSV_COLUMNS
  assert [r["source"] for r in rows] == ["b.png", "c.png", "a.png"]  # p(given): 0.2, 0.7, 0.9
  assert rows[0]["given_label"] == "dog" and rows[0]["suggested_label"] == "cat" and rows[0]["is_issue"] == "True"
  assert [p.name for p in tmp_path.iterdir()] == ["issues.csv"]  # no temporary file left
  with pytest.raises(ValueError, match="2 sources, but the rows reach index 2"):
    label_issues.write_csv(str(tmp_path / "x.csv"), issues, sources=["a", "b"])
  fewer = label_issues.without(issues, [2])  # example 2's file was never read: no row, the others as they were
  path = label_issues.write_csv(str(tmp_path / "fewer.csv"), fewer, sources=["a.png", "b.png", "c.png"])
  assert [r["source"] for r in csv.DictReader(open(path))] == ["b.png", "a.png"]
  assert fewer.evidence == [issues.evidence[0], issues.evidence[2]]
  assert (
    label_issues.from_run(plain_loss.method("cross_entropy"), label_table_lib.create(np.array([0, 1]), 2)) is None
  )  # nothing recorded


@pytest.mark.parametrize("score, rule", [("self_confidence", "argmax"), ("normalized_margin", "confident")])
def test_held_out_rows_follow_the_training_rows(score, rule, tmp_path):
  """held_out against a NumPy recomputation (quality, suggestion, flag per row; index N_train + j; most suspect
  first among themselves), after the training rows in the CSV, each with its source."""
  rng = np.random.default_rng(2)
  probs = rng.dirichlet(np.ones(3), size=30)
  given = rng.integers(0, 3, 30)
  carved = label_issues.held_out(probs, given, first_index=4, what="out of sample", score=score, rule=rule)
  rows = carved.records["index"] - 4
  assert sorted(rows) == list(range(30))
  if score == "self_confidence":
    quality = probs[np.arange(30), given]
  else:
    others = np.array([max(p for k, p in enumerate(probs[i]) if k != given[i]) for i in range(30)])
    quality = (1 + probs[np.arange(30), given] - others) / 2
  np.testing.assert_allclose(carved.records["label_quality"], quality[rows], rtol=1e-6)
  assert np.all(np.diff(carved.records["label_quality"]) >= 0)
  np.testing.assert_array_equal(carved.records["suggested_label"], probs[rows].argmax(axis=1))  # no ties
  np.testing.assert_array_equal(carved.records["given_label"], given[rows])
  np.testing.assert_array_equal(carved.records["is_issue"], label_issues.flag(probs, given, rule=rule)[rows])
  j, s = rows[0], probs[rows[0]].argmax()
  assert carved.evidence[0] == f"out of sample: p(given) {probs[j, given[j]]:.3f}, p(suggested) {probs[j, s]:.3f}"

  trained = label_issues.find(PROBS, GIVEN)
  both = label_issues.concatenate(label_issues.RunIssues(trained, ["trained"] * 4), carved)
  sources = [f"t{i}" for i in range(4)] + [f"v{j}" for j in range(30)]
  csv_rows = list(csv.DictReader(open(label_issues.write_csv(str(tmp_path / "i.csv"), both, sources=sources))))
  assert [r["source"] for r in csv_rows] == [f"t{i}" for i in trained["index"]] + [f"v{j}" for j in rows]
  assert [int(r["index"]) for r in csv_rows[4:]] == list(carved.records["index"])


def _digits(name: str):
  if name == "cross_entropy":
    config = ce.get_config()
    config.dataset, config.num_epochs = "digits", 12
    config.model = ml_collections.ConfigDict({"name": "mlp", "kwargs": {"hidden_sizes": (32,)}})
  else:
    config = resume_worker.tiny_config(name, checkpoint_every=0)
  config.noise.rate = 0.3
  return config


@pytest.mark.parametrize("name", ["cross_entropy", "joint_optimization", "truncated_lq"])
def test_run_writes_label_issues_csv(name, tmp_path):
  summary = runs.run_single(_digits(name), str(tmp_path))
  rows = list(csv.DictReader(open(tmp_path / label_issues.CSV_FILE)))
  clean = data.load("digits").y_train
  assert sorted(int(r["index"]) for r in rows) == list(range(len(clean)))
  quality = np.array([float(r["label_quality"]) for r in rows])
  assert np.all(np.diff(quality) >= 0) and quality.min() >= 0 and quality.max() <= 1
  index = np.array([int(r["index"]) for r in rows])
  planted = np.array([int(r["given_label"]) for r in rows]) != clean[index]
  flagged = np.array([r["is_issue"] == "True" for r in rows])
  assert summary["label_issues"] == {"file": label_issues.CSV_FILE, "flagged": int(flagged.sum())}
  top = planted[: planted.sum()].mean()  # precision of the top-k rows, k = the number of planted errors
  if name == "cross_entropy":  # every epoch's predictions (12): 0.95 measured; chance is 0.3
    assert top >= 0.85, top
    assert "over 12 recorded epochs" in rows[0]["method_evidence"]
  elif name == "joint_optimization":  # flagged = relabelled by the table (the run's own detection metrics)
    assert flagged.mean() == pytest.approx(summary["stage1"]["relabelled_fraction"])
    assert planted[flagged].mean() == pytest.approx(summary["stage1"]["detection_precision"], abs=1e-6)
    assert top >= 0.85, top
  else:  # flagged = pruned
    assert flagged.mean() == pytest.approx(summary["stage1"]["pruned_fraction"])
    assert all(r["method_evidence"].startswith("pruned") == (r["is_issue"] == "True") for r in rows)
