"""Which training labels are wrong: per-example label quality, a ranking, a flagged set, WORKDIR/label_issues.csv.

Inputs: predicted class probabilities P [N, C] (rows sum to 1) and the labels as given y [N] (ints in [0, C)).
Nothing here needs clean labels.

Label quality q_i in [0, 1], low = suspect (`SCORES`):
  'self_confidence'    q_i = P[i, y_i], the probability of the given label.
  'normalized_margin'  q_i = (1 + P[i, y_i] - max_{k != y_i} P[i, k]) / 2: 0.5 where the given label ties the best
                       other class, below 0.5 where another class is more probable.
Suggested label: s_i = argmax_k P[i, k]; the given label where it ties the maximum (else the lowest class id).
Flagged set (`FLAG_RULES`):
  'argmax'        is_issue_i = [s_i != y_i]: another class is strictly more probable than the given one.
  'confident'     confident learning's per-class thresholds (Northcutt et al., JAIR 2021), exactly as cleanlab 2.9
                  computes find_label_issues(filter_by='confident_learning'), with eps = 1e-6 (`CONFIDENT_EPS`):
                    t_k = max(2 eps, mean of P[i, k] over the examples given label k), the class's threshold (a
                          class no example is given: t_k = inf, never confident);
                    K_i = {k : P[i, k] >= t_k - eps}, the classes example i is confidently in;
                    g_i = the one class of K_i when |K_i| = 1; argmax_k P[i, k] over all classes when |K_i| >= 2;
                    is_issue_i = [|K_i| >= 1 and g_i != y_i and argmax_k (P[i, k] + eps [k = y_i]) != y_i]
                  (the last term: never flag a given label within eps of the most probable). argmax: lowest id on
                  ties. Source (cleanlab 2.9.0): cleanlab/count.py get_confident_thresholds (t, lines 1450-1457),
                  compute_confident_joint (K, g and the flagged |K_i| >= 1, g_i != y_i: lines 581-597 and 616-618),
                  _reduce_issues (lines 211-218), applied by cleanlab/filter.py find_label_issues (lines 425-435).
`rank` orders the examples by q ascending (ties by index: a stable sort), most suspect first.
The scores and rules are cleanlab's (2.9): `cleanlab.rank.get_label_quality_scores` gives the same q, and
`cleanlab.filter.find_label_issues` with filter_by='predicted_neq_given' / 'confident_learning' flags the same
examples as 'argmax' / 'confident' (tests/test_label_issues.py). What differs is which P they are fed.

Which probabilities a training run uses (`from_run`; every one is in-sample: the network was trained on these very
labels, so a memorised wrong label looks right; the earlier epochs of the history count as much as the last):
  Joint Optimization: its label table. P = the mean of the recorded softmax history (the last H epochs, training
    mode, augmented as trained), the suggested label is the table's argmax and is_issue = [the table relabelled the
    example] (Tanaka et al. 2018).
  truncated Lq: is_issue = [pruned: weight 0] (Zhang & Sabuncu 2018); q and the suggestion from the recorded
    history when the run keeps one (`config.label_issues.history_length`), else q = the weight (0 or 1).
  ELR+ and DivideMix (their own epoch programs record no history; `Method.label_evidence` gives their state):
    ELR+: P = the mean over the two networks of their normalised targets t^(m) / sum_c t^(m), each a running
    average of the peer's weight-averaged predictions (noisy_jax.methods.elr_plus_train), with the config's score and
    rule. DivideMix: q = the mean over the two networks of the GMM's clean probability w (the last division),
    is_issue = [neither network's division labels it: max_m w_m <= p_threshold], suggested = the given label
    (DivideMix keeps no class probabilities per example).
  any other method: the recorded history (by default every epoch that fits, `history_length`), with the flag
    rule of the config.
Rows held out of training (a validation split carved from the training files: `held_out`): P = the delivered
network's softmax, out of sample (the network never trained on them), scored and flagged by the config's score and
rule like any probabilities, with per-class thresholds of the 'confident' rule taken over these rows only. They follow
the training rows (`concatenate`), most suspect first among themselves: their quality comes from other evidence than
the training rows', so the two are not ranked against each other. Their index continues the training rows': the
held-out row j has index N_train + j.
Output: `find` returns a NumPy structured array (`RECORD_DTYPE`), one row per example, most suspect first;
`write_csv` writes it with class names and sources (file paths) where the dataset has them.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from typing import Sequence

import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import atomic_files

SCORES = ("self_confidence", "normalized_margin")
FLAG_RULES = ("argmax", "confident")
DEFAULT_SCORE = "self_confidence"  # label_issues.score of a run that sets none, and every function's default
DEFAULT_RULE = "argmax"  # label_issues.rule likewise
AUTO_HISTORY = -1  # label_issues.history_length 'auto' (`history_length`)
DEFAULT_HISTORY_LENGTH = AUTO_HISTORY
CONFIDENT_EPS = 1e-6  # cleanlab's FLOATING_POINT_COMPARISON (cleanlab/internal/constants.py), see 'confident'
CSV_FILE = "label_issues.csv"
CSV_COLUMNS = ("index", "source", "given_label", "suggested_label", "label_quality", "is_issue", "method_evidence")
# History recorded for methods that keep none (config.label_issues.history_length = -1, 'auto'): every epoch of the
# stage, or as many as fit in AUTO_HISTORY_BUDGET_BYTES (N x C x H x 4 bytes on every device holding the table):
# mnist5k (3,600 x 10) all of them; CIFAR-100 (50,000 x 100) 13 epochs; Clothing1M (1M x 14) 4. Every epoch counts:
# on mnist5k the mean over all 20 epochs of a cross-entropy run found the flipped labels better than the mean of the
# last 10 in every noise setting (F1 0.951 vs 0.906 at 20% symmetric noise;
# `python -m experiments.benchmarks.label_issues_vs_cleanlab`).
AUTO_HISTORY_BUDGET_BYTES = 256 * 2**20

RECORD_DTYPE = np.dtype(
  [
    ("index", np.int64),
    ("given_label", np.int32),
    ("suggested_label", np.int32),
    ("label_quality", np.float32),
    ("is_issue", np.bool_),
  ]
)


def _check(probs, given) -> tuple[np.ndarray, np.ndarray]:
  probs, given = np.asarray(probs, np.float64), np.asarray(given)
  if probs.ndim != 2 or given.shape != (probs.shape[0],):
    raise ValueError(f"probs must be [N, C] and labels [N]; got probs {probs.shape} and labels {given.shape}.")
  if not np.issubdtype(given.dtype, np.integer):
    raise ValueError(f"labels must be integers; got dtype {given.dtype}.")
  n, c = probs.shape
  if n and (given.min() < 0 or given.max() >= c):
    bad = given[(given < 0) | (given >= c)][0]
    raise ValueError(f"label {bad} is outside [0, {c}) (C = {c} columns of probs).")
  if not np.all(np.isfinite(probs)) or (n and probs.min() < 0):
    raise ValueError("probs must be finite and non-negative (softmax outputs).")
  return probs, given.astype(np.int64)


def label_quality(probs, given, *, score: str = DEFAULT_SCORE) -> np.ndarray:
  """q [N] in [0, 1] (see the module docstring for the formulas of `SCORES`); float64."""
  _checks.check_choice("score", score, SCORES)
  probs, given = _check(probs, given)
  rows = np.arange(len(given))
  p_given = probs[rows, given]
  if score == "self_confidence":
    return p_given
  others = probs.copy()
  others[rows, given] = -np.inf
  return (1.0 + p_given - others.max(axis=1)) / 2.0


def rank(probs, given, *, score: str = DEFAULT_SCORE) -> np.ndarray:
  """Example indices [N], most suspect first: q ascending, ties by index (works for any probabilities)."""
  return np.argsort(label_quality(probs, given, score=score), kind="stable")


def suggested_labels(probs, given) -> np.ndarray:
  """s [N]: argmax_k P[i, k], except the given label where P[i, y_i] ties the maximum."""
  probs, given = _check(probs, given)
  best = probs.argmax(axis=1)
  return np.where(probs[np.arange(len(given)), given] >= probs.max(axis=1), given, best)


def confident_thresholds(probs, given) -> np.ndarray:
  """t [C] of the 'confident' rule: t_k = max(2 eps, mean_{i: y_i = k} P[i, k]), inf for a class no example is given
  (cleanlab's get_confident_thresholds, which uses 2 there: the same for probabilities <= 1); float64."""
  probs, given = _check(probs, given)
  c = probs.shape[1]
  order = np.argsort(given, kind="stable")  # each class's rows in index order, as a boolean mask selects them
  groups = np.split(probs[order, given[order]], np.cumsum(np.bincount(given, minlength=c))[:-1])
  means = np.array([group.mean() if len(group) else np.inf for group in groups])  # np.mean: cleanlab's rounding
  return np.maximum(means, 2 * CONFIDENT_EPS)


def flag(probs, given, *, rule: str = DEFAULT_RULE) -> np.ndarray:
  """is_issue [N] bool by `rule` (see `FLAG_RULES` in the module docstring)."""
  _checks.check_choice("flag rule", rule, FLAG_RULES)
  probs, given = _check(probs, given)
  if rule == "argmax":
    return suggested_labels(probs, given) != given
  confident = probs >= confident_thresholds(probs, given) - CONFIDENT_EPS  # [N, C]: k in K_i
  count = confident.sum(axis=1)
  guess = np.where(count > 1, probs.argmax(axis=1), confident.argmax(axis=1))  # g_i
  near = probs.copy()
  near[np.arange(len(given)), given] += CONFIDENT_EPS
  return (count > 0) & (guess != given) & (near.argmax(axis=1) != given)


def records(given, suggested, quality, is_issue) -> np.ndarray:
  """The structured array of `RECORD_DTYPE` sorted most suspect first (q ascending, ties by index)."""
  n = len(given)
  out = np.empty(n, RECORD_DTYPE)
  out["index"], out["given_label"], out["suggested_label"] = np.arange(n), given, suggested
  out["label_quality"], out["is_issue"] = quality, is_issue
  return out[np.argsort(np.asarray(quality, np.float64), kind="stable")]


def find(probs, given, *, score: str = DEFAULT_SCORE, rule: str = DEFAULT_RULE) -> np.ndarray:
  """Label issues from any predicted probabilities: `records` of (index, given, argmax, q, is_issue)."""
  probs, given = _check(probs, given)
  return records(
    given, suggested_labels(probs, given), label_quality(probs, given, score=score), flag(probs, given, rule=rule)
  )


@dataclasses.dataclass(frozen=True)
class MethodEvidence:
  """A method's own verdict on its labels (`Method.label_evidence(table)`): class probabilities `probs` [N, C]
  (scored and flagged as any probabilities), or a `quality` [N] in [0, 1] with its `is_issue` [N] (no suggestion:
  the given label); `what` names the state it comes from, for the CSV's evidence column."""

  what: str
  probs: np.ndarray | None = None
  quality: np.ndarray | None = None
  is_issue: np.ndarray | None = None


@dataclasses.dataclass(frozen=True)
class RunIssues:
  """What a run says about its labels: `records` (RECORD_DTYPE, most suspect first) and, in the same order, one
  `evidence` string per row (which state of the method gave the verdict)."""

  records: np.ndarray
  evidence: list[str]


def check_settings(score: str, rule: str) -> tuple[str, str]:
  """(score, rule) of a run's label_issues section, checked (a bad value fails before training, not after it)."""
  _checks.check_choice("config.label_issues.score", score, SCORES)
  _checks.check_choice("config.label_issues.rule", rule, FLAG_RULES)
  return score, rule


def history_length(wanted: int, method, *, num_epochs: int, num_examples: int, num_classes: int) -> int:
  """Epochs of predictions to record for label issues, for a method that records none itself.

  wanted (a run's label_issues.history_length): AUTO_HISTORY (-1): H = min(num_epochs, the most epochs whose
  N x C x H x 4 bytes fit AUTO_HISTORY_BUDGET_BYTES); 0: none; H > 0: H. Methods with a history of their own (Joint
  Optimization) keep theirs: 0 is returned.
  """
  if method.history_length:
    return 0
  wanted = int(wanted)
  if wanted < AUTO_HISTORY:
    raise ValueError(f"config.label_issues.history_length={wanted}; allowed: -1 (auto), 0 (none) or H > 0.")
  if wanted == AUTO_HISTORY:
    return min(int(num_epochs), AUTO_HISTORY_BUDGET_BYTES // max(1, num_examples * num_classes * 4))
  return wanted


def from_run(method, table, *, score: str = DEFAULT_SCORE, rule: str = DEFAULT_RULE) -> RunIssues | None:
  """Label issues from a finished run's method and host label table (numpy arrays; `train.fit` returns one).

  See the module docstring for the evidence of each method. None when the run kept nothing to judge by (a plain
  method without a recorded history).
  """
  given = np.asarray(table.noisy_labels).astype(np.int64)
  filled = int(np.sum(np.asarray(table.history_filled))) if table.history.shape[0] else 0
  probs = None
  if filled:
    history = np.asarray(table.history, np.float64)
    mask = np.asarray(table.history_filled, bool)
    probs = history[mask].mean(axis=0)
  rows = np.arange(len(given))
  if method.relabels_from_history:  # Joint Optimization: the table's own verdict
    soft = np.asarray(table.soft_labels, np.float64)
    suggested = soft.argmax(axis=1)
    probs = soft if probs is None else probs
    quality = label_quality(probs, given, score=score)
    is_issue = suggested != given
    evidence = [
      f"label table argmax {s} (soft label {soft[i, s]:.3f}); mean p(given) {probs[i, y]:.3f} over "
      f"{filled} recorded epochs"
      for i, s, y in zip(rows, suggested, given)
    ]
  elif method.reads_train_probs:  # truncated Lq: the pruning weights
    weights = np.asarray(table.weights, np.float64)
    is_issue = weights == 0
    if probs is None:
      quality, suggested = weights, given.copy()
      evidence = ["pruned (weight 0)" if w == 0 else "kept (weight 1)" for w in weights]
    else:
      quality, suggested = label_quality(probs, given, score=score), suggested_labels(probs, given)
      evidence = [
        f"{'pruned (weight 0)' if w == 0 else 'kept (weight 1)'}; mean p(given) {probs[i, y]:.3f} over "
        f"{filled} recorded epochs"
        for i, w, y in zip(rows, weights, given)
      ]
  elif method.label_evidence is not None:  # the method's own state (ELR+, DivideMix)
    own = method.label_evidence(table)
    if own.probs is not None:
      probs = np.asarray(own.probs, np.float64)
      quality, suggested = label_quality(probs, given, score=score), suggested_labels(probs, given)
      is_issue = flag(probs, given, rule=rule)
      evidence = [
        f"{own.what}: p(given) {probs[i, y]:.3f}, p(suggested) {probs[i, s]:.3f}"
        for i, y, s in zip(rows, given, suggested)
      ]
    else:
      quality, is_issue = np.asarray(own.quality, np.float64), np.asarray(own.is_issue, bool)
      suggested = given.copy()
      evidence = [f"{own.what} {q:.3f}" for q in quality]
  elif probs is not None:
    quality, suggested = label_quality(probs, given, score=score), suggested_labels(probs, given)
    is_issue = flag(probs, given, rule=rule)
    evidence = [
      f"mean p(given) {probs[i, y]:.3f}, p(suggested) {probs[i, s]:.3f} over {filled} recorded epochs"
      for i, y, s in zip(rows, given, suggested)
    ]
  else:
    return None
  order = np.argsort(np.asarray(quality, np.float64), kind="stable")
  return RunIssues(records(given, suggested, quality, is_issue), [evidence[i] for i in order])


def held_out(
  probs, given, *, first_index: int, what: str, score: str = DEFAULT_SCORE, rule: str = DEFAULT_RULE
) -> RunIssues:
  """Label issues of examples the network never trained on, from its predicted probabilities: the records of
  `find(probs, given, score, rule)` (most suspect first) with index first_index + j for row j, and, row for row, the
  evidence 'WHAT: p(given) a, p(suggested) b'.

  Args:
    probs: [M, C] the network's softmax of the held-out rows.
    given: [M] their labels as given, ints in [0, C).
    first_index: the index of row 0: the number of training rows, so that the indices follow theirs.
    what: names the network and says that its prediction is out of sample, for the evidence column.
    score: label quality, one of SCORES.
    rule: flag rule, one of FLAG_RULES.
  """
  found = find(probs, given, score=score, rule=rule)
  probs, given = _check(probs, given)
  rows = found["index"]
  evidence = [
    f"{what}: p(given) {probs[i, given[i]]:.3f}, p(suggested) {probs[i, s]:.3f}"
    for i, s in zip(rows, found["suggested_label"])
  ]
  found["index"] += first_index
  return RunIssues(found, evidence)


def without(issues: RunIssues, indices) -> RunIssues:
  """`issues` without the rows of the examples `indices` (the others keep their order and indices)."""
  keep = ~np.isin(issues.records["index"], np.asarray(indices, np.int64))
  return RunIssues(issues.records[keep], [e for e, k in zip(issues.evidence, keep) if k])


def concatenate(*parts: RunIssues) -> RunIssues:
  """The rows of `parts` one after the other (each keeps its own order and indices)."""
  return RunIssues(np.concatenate([p.records for p in parts]), [e for p in parts for e in p.evidence])


def write_csv(
  path: str, issues: RunIssues, *, sources: Sequence[str] | None = None, class_names: Sequence[str] | None = None
) -> str:
  """Writes `issues` to `path` (CSV_COLUMNS; labels as class names when given, else ids; source = sources[index],
  the example's file path or record id, else its index), whole or not at all (noisy_jax.core.atomic_files).
  Returns the path. With `held_out` rows after the training rows, `sources` is the training rows' followed by the
  held-out rows'; rows left out (`without`) keep their sources unused."""
  n = len(issues.records)
  if sources is not None and n and len(sources) <= int(issues.records["index"].max()):
    raise ValueError(f"{len(sources)} sources, but the rows reach index {int(issues.records['index'].max())}.")
  name = (lambda k: class_names[k]) if class_names is not None else (lambda k: int(k))
  text = io.StringIO(newline="")
  writer = csv.writer(text)
  writer.writerow(CSV_COLUMNS)
  for row, evidence in zip(issues.records, issues.evidence):
    i = int(row["index"])
    writer.writerow(
      [
        i,
        sources[i] if sources is not None else str(i),
        name(row["given_label"]),
        name(row["suggested_label"]),
        f"{float(row['label_quality']):.6f}",
        bool(row["is_issue"]),
        evidence,
      ]
    )
  atomic_files.write_text(path, text.getvalue())
  return path
