"""Label issues from one training run (noisy_jax.core.label_issues) vs cleanlab on 5-fold out-of-sample probabilities.

mnist5k (N = 3,600 training examples), the ce config's SmallCNN and SGD, seed 0; planted errors = given != clean.
Settings (`--settings`): sym20, sym40, sym60 (symmetric, exact per class), asym40 (the MNIST map 7->1, 2->7,
5<->6, 3->8: classes outside the map are never flipped) and pseudo40 (Joint Optimization's pseudo-label noise,
as experiments/configs/pseudo_label_noise.py sets it: 40% take their k-means cluster's class).

Training, all through `noisy_jax.train.loop.fit` (the trainer `runs.run_single` calls), E epochs each (`--epochs`,
default 20: half of the ce config's 40, with its lr boundaries (20, 30) scaled to E: (10, 15)); the validation
and test splits are dropped, so no run spends time evaluating them:
  * one cross-entropy run on all N examples with `config.label_issues.history_length = E`: the label table then
    records every epoch's training-mode softmax (ring slot of epoch e = e % E; epochs are 1-based);
  * one Joint Optimization stage-1 run (experiments/configs/joint_optimization.py: lr 0.08 constant, alpha 1.2,
    beta 0.8, history 10, soft relabelling) with num_epochs = E, begin = E // 2, stage2 off;
  * five cross-entropy runs, one per fold of sklearn's StratifiedKFold(5, shuffle=True, random_state=seed) over the
    GIVEN (noisy) labels (what cleanlab's own cross-validation does), each trained on the 4/5 with their noisy labels
    in its label table and normalised with its own training rows' statistics (as `fit` does), predicting the held
    out fifth in eval mode.

Detectors (probabilities P [N, C] -> a ranking by label quality q and a flagged set):
  history_E      our label_issues.from_run on the CE run's table: P = mean of the E recorded epochs.
  history_last10 the same table, only the ring slots of epochs E-9..E kept (what a 10-epoch history records, as
                 JO's does), from_run again: no extra training.
  final_eval     the final CE network's in-sample softmax in eval mode: predict_lib.make_predict_fn with the run's
                 normaliser (inputs.normalizer: per-channel statistics of the training split, as fit uses) on the
                 training split; label_issues.find.
  jo_table       label_issues.from_run on the JO run's table: q from its history mean (last 10 epochs), flagged
                 'argmax' = the table relabelled the example (JO's own verdict); 'confident' = our confident rule on
                 the same history mean.
  cleanlab_oos5  cleanlab on the 5-fold out-of-sample P: flagged = cleanlab.filter.find_label_issues(labels, P)
                 (defaults: filter_by='prune_by_noise_rate'; n_jobs=1, which cleanlab documents as changing only the
                 run time: a forked pool under JAX's threads can hang); ranking = cleanlab.rank.
                 get_label_quality_scores(labels, P, method=self_confidence | normalized_margin).
  Cross-checks (no extra training), to separate the probabilities from the rules:
  ours_on_oos5   our scores and rules on cleanlab's out-of-sample P.
  cleanlab_on_historyE  cleanlab's find_label_issues and scores on history_E's in-sample P.
Scores: 'self_confidence' and 'normalized_margin' (ranking); rules 'argmax' and 'confident' (flagged set).
Metrics against the planted errors: precision, recall, F1 of the flagged set; AUROC and average precision of the
ranking (positive = planted error, score -q: sklearn roc_auc_score / average_precision_score); training compute =
epochs x examples trained (ours E x N per run; cleanlab 5 x E x 0.8 N); wall seconds of the training (compilation
included; the folds' seconds include predicting their held-out fifth) and of the detector's own work after it
(final_eval's prediction of the training split, cleanlab's calls).

  python -m experiments.benchmarks.label_issues_vs_cleanlab [--epochs 20] [--settings sym20,sym40,...] [--quick]

Needs cleanlab (the `bench` extra: pip install -e '.[bench]').
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from experiments.benchmarks import common

SETTINGS = {  # name -> config.noise fields
  "sym20": {"type": "symmetric", "rate": 0.2},
  "sym40": {"type": "symmetric", "rate": 0.4},
  "sym60": {"type": "symmetric", "rate": 0.6},
  "asym40": {"type": "asymmetric", "rate": 0.4, "dataset": "mnist"},
  "pseudo40": {"type": "pseudo_labels", "rate": 0.4, "num_components": 50},
}
QUICK_SETTINGS = ("sym40", "asym40")
SCORES = ("self_confidence", "normalized_margin")
RULES = ("argmax", "confident")
CLEANLAB_RULE = "prune_by_noise_rate"
NUM_FOLDS = 5
CE_EPOCHS_CAP = 20  # default E: the ce config's num_epochs, or this if that is larger


def _import_cleanlab():
  try:
    import cleanlab  # pylint: disable=g-import-not-at-top
    import cleanlab.filter  # pylint: disable=g-import-not-at-top,unused-import
    import cleanlab.rank  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError as error:
    raise SystemExit(
      f"label_issues_vs_cleanlab needs cleanlab ({error}); install the benchmark extra: pip install -e '.[bench]'"
    ) from error
  return cleanlab


def _scaled_boundaries(boundaries, epochs: int, config_epochs: int) -> tuple[int, ...]:
  """The lr boundaries of a `config_epochs` schedule at the same fractions of an `epochs` run."""
  return tuple(int(round(b * epochs / config_epochs)) for b in boundaries)


def _configs(setting: str, epochs: int, seed: int):
  """(CE config, JO stage-1 config) for one noise setting, E epochs each."""
  from experiments.configs import ce  # pylint: disable=g-import-not-at-top
  from experiments.configs import joint_optimization  # pylint: disable=g-import-not-at-top

  ce_config = ce.get_config()
  ce_config.optimizer.lr_boundaries = _scaled_boundaries(
    ce_config.optimizer.lr_boundaries, epochs, int(ce_config.num_epochs)
  )
  jo_config = joint_optimization.get_config()
  for config in (ce_config, jo_config):
    config.seed = seed
    config.num_epochs = epochs
    config.checkpoint_every = 0
    config.noise.update({"exact": True, "dataset": ""})
    for key, value in SETTINGS[setting].items():  # num_components is a new field, as pseudo_label_noise.py adds it
      config.noise[key] = value
  ce_config.label_issues.history_length = epochs
  jo_config.method.begin = max(1, epochs // 2)
  jo_config.method.stage2 = False
  return ce_config, jo_config


def _train(config, dataset, labels, key, mesh, *, clean=None, history_length=None):
  """One `fit` of `config.method` on `dataset` with `labels` as the given labels; (state, host table, history, s)."""
  import jax  # pylint: disable=g-import-not-at-top

  from noisy_jax import models  # pylint: disable=g-import-not-at-top
  from noisy_jax.core import label_issues  # pylint: disable=g-import-not-at-top
  from noisy_jax.core import label_table  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import runs  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import settings as settings_lib  # pylint: disable=g-import-not-at-top
  from noisy_jax.methods import registry  # pylint: disable=g-import-not-at-top
  from noisy_jax.train import loop  # pylint: disable=g-import-not-at-top

  start = time.perf_counter()
  method = registry.make(config.method, num_classes=dataset.num_classes)
  if history_length is None:  # what run_single records for label issues (config.label_issues.history_length)
    history_length = label_issues.history_length(
      runs.label_issue_settings(config).history_length,
      method,
      num_epochs=int(config.num_epochs),
      num_examples=len(labels),
      num_classes=dataset.num_classes,
    )
  if history_length:
    method = dataclasses.replace(method, history_length=history_length)
  table = label_table.create(labels, dataset.num_classes, history_length=method.history_length)
  model = models.build(
    config.model.name, dataset.num_classes, dataset.x_train.shape[1:], kwargs=config.model.get("kwargs")
  )
  state, table, history, _ = loop.fit(
    model=model,
    method=method,
    table=table,
    dataset=dataset,
    clean_train_labels=clean,
    settings=settings_lib.fit_settings(config),
    key=key,
    mesh=mesh,
    stage="stage1",
  )
  table = jax.device_get(table)
  return model, method, state, table, history, time.perf_counter() - start


def _predict(model, config, dataset, state, images, mesh):
  """Eval-mode softmax of `images` by the trained `state`, normalised as `fit` normalised `dataset`."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  from noisy_jax.experiment import inputs  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import settings as settings_lib  # pylint: disable=g-import-not-at-top
  from noisy_jax.train import predict as predict_lib  # pylint: disable=g-import-not-at-top
  from noisy_jax.train import state as state_lib  # pylint: disable=g-import-not-at-top

  options = settings_lib.compiler_options(config, model, mesh.devices.flat[0].platform)
  predict = predict_lib.make_predict_fn(model, normalize=inputs.normalizer(config, dataset), compiler_options=options)
  return np.asarray(predict(state_lib.variables_of(state), np.asarray(images)), np.float64)


def _quality_by_index(issues) -> "object":
  """label_quality [N] in example order from RunIssues' records (sorted most suspect first)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  q = np.empty(len(issues.records), np.float64)
  q[issues.records["index"]] = issues.records["label_quality"]
  return q


def _flags_by_index(issues):
  import numpy as np  # pylint: disable=g-import-not-at-top

  flags = np.empty(len(issues.records), bool)
  flags[issues.records["index"]] = issues.records["is_issue"]
  return flags


def _ours_from_table(method, table):
  """{'quality': {score: q}, 'flags': {rule: is_issue}, 'probs': P} from label_issues.from_run on a host table."""
  from noisy_jax.core import label_issues  # pylint: disable=g-import-not-at-top

  quality, flags = {}, {}
  for score in SCORES:
    for rule in RULES:
      issues = label_issues.from_run(method, table, score=score, rule=rule)
      quality[score] = _quality_by_index(issues)
      flags.setdefault(rule, _flags_by_index(issues))
  return {"quality": quality, "flags": flags}


def _ours_from_probs(probs, given):
  from noisy_jax.core import label_issues  # pylint: disable=g-import-not-at-top

  return {
    "quality": {s: label_issues.label_quality(probs, given, score=s) for s in SCORES},
    "flags": {r: label_issues.flag(probs, given, rule=r) for r in RULES},
  }


def _cleanlab_detector(cleanlab, probs, given):
  import numpy as np  # pylint: disable=g-import-not-at-top

  probs = np.asarray(probs, np.float64)
  probs = probs / probs.sum(axis=1, keepdims=True)  # float32 softmax rows: cleanlab checks they sum to 1
  flagged = cleanlab.filter.find_label_issues(given, probs, filter_by=CLEANLAB_RULE, n_jobs=1)
  return {
    "quality": {s: cleanlab.rank.get_label_quality_scores(given, probs, method=s) for s in SCORES},
    "flags": {CLEANLAB_RULE: np.asarray(flagged, bool)},
  }


def _last_slots_table(table, epochs: int, keep: int):
  """The host table with only the history ring slots of epochs epochs-keep+1..epochs (slot of epoch e: e % H)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  h = table.history.shape[0]
  slots = [e % h for e in range(max(1, epochs - keep + 1), epochs + 1)]
  return table.replace(history=np.asarray(table.history)[slots], history_filled=np.asarray(table.history_filled)[slots])


def _metrics(detector, planted, clean, given, probs=None) -> dict:
  import numpy as np  # pylint: disable=g-import-not-at-top
  from sklearn import metrics  # pylint: disable=g-import-not-at-top

  out = {"flagged": {}, "ranking": {}}
  errors = int(planted.sum())
  for rule, flags in detector["flags"].items():
    hits = int(np.sum(flags & planted))
    n = int(flags.sum())
    precision = hits / n if n else 0.0
    recall = hits / errors if errors else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    out["flagged"][rule] = {"flagged": n, "true_positives": hits, "precision": precision, "recall": recall, "f1": f1}
  for score, q in detector["quality"].items():
    q = np.asarray(q, np.float64)
    out["ranking"][score] = {
      "auroc": float(metrics.roc_auc_score(planted, -q)),
      "average_precision": float(metrics.average_precision_score(planted, -q)),
      # precision among the `errors` most suspect (= recall there): the top-k hit rate
      "precision_at_num_errors": float(planted[np.argsort(q, kind="stable")[:errors]].mean()),
    }
  if probs is not None:  # how well the probabilities themselves know the truth
    out["argmax_accuracy_vs_clean"] = float(np.mean(np.argmax(probs, axis=1) == clean))
    out["argmax_accuracy_vs_given"] = float(np.mean(np.argmax(probs, axis=1) == given))
  return out


def run_setting(setting: str, *, epochs: int, seed: int, cleanlab, mesh, log) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from sklearn.model_selection import StratifiedKFold  # pylint: disable=g-import-not-at-top

  from noisy_jax.experiment import inputs  # pylint: disable=g-import-not-at-top

  ce_config, jo_config = _configs(setting, epochs, seed)
  full = inputs.load_dataset(ce_config)
  # No validation or test split: no run evaluates anything per epoch; the wall times are training + detection.
  dataset = dataclasses.replace(
    full, x_val=full.x_train[:0], y_val=full.y_train[:0], x_test=full.x_train[:0], y_test=full.y_train[:0]
  )
  n = dataset.num_train
  stage1_key, noise_key, _ = jax.random.split(jax.random.PRNGKey(seed), 3)  # as runs.run_single splits its seed
  given, report = inputs.noisy_training_labels(ce_config, dataset, noise_key)
  given = np.asarray(given, np.int64)
  clean = np.asarray(dataset.y_train, np.int64)
  planted = given != clean
  out = {
    "noise": {
      "type": ce_config.noise.type,
      "rate": float(ce_config.noise.rate),
      "realised_rate": float(report["flip_rate"]),
      "planted_errors": int(planted.sum()),
      "num_examples": n,
      "sha256": report["sha256"],
    }
  }
  if "pseudo_label_accuracy" in report:
    out["noise"]["pseudo_label_accuracy"] = float(report["pseudo_label_accuracy"])
  log(f"[{setting}] {int(planted.sum())} planted errors of {n} ({report['flip_rate']:.3f})")
  detectors, probs_of, cost = {}, {}, {}

  # --- ours: one CE run, history of every epoch -----------------------------------------------------------------
  model, method, state, table, history, ce_seconds = _train(ce_config, dataset, given, stage1_key, mesh, clean=clean)
  log(
    f"[{setting}] CE run: {ce_seconds:.1f} s, last epoch {history[-1]['train_accuracy_given']:.3f} "
    "train accuracy on the given labels"
  )
  assert table.history.shape[0] == epochs and bool(np.all(table.history_filled)), "history must hold every epoch"
  assert np.array_equal(np.asarray(table.noisy_labels), given)
  ce_cost = {"runs": 1, "epochs": epochs, "example_epochs": epochs * n, "train_seconds": ce_seconds}
  start = time.perf_counter()
  detectors["history_E"] = _ours_from_table(method, table)
  probs_of["history_E"] = np.asarray(table.history, np.float64).mean(axis=0)
  cost["history_E"] = {**ce_cost, "detect_seconds": time.perf_counter() - start}
  start = time.perf_counter()
  last = _last_slots_table(table, epochs, 10)
  detectors["history_last10"] = _ours_from_table(method, last)
  probs_of["history_last10"] = np.asarray(last.history, np.float64).mean(axis=0)
  cost["history_last10"] = {
    **ce_cost,
    "detect_seconds": time.perf_counter() - start,
    "history_epochs": int(last.history.shape[0]),
  }
  start = time.perf_counter()
  probs_of["final_eval"] = _predict(model, ce_config, dataset, state, dataset.x_train, mesh)
  detectors["final_eval"] = _ours_from_probs(probs_of["final_eval"], given)
  cost["final_eval"] = {**ce_cost, "detect_seconds": time.perf_counter() - start}
  del state, table

  # --- ours: Joint Optimization's table ------------------------------------------------------------------------
  _, jo_method, _, jo_table, jo_history, jo_seconds = _train(jo_config, dataset, given, stage1_key, mesh, clean=clean)
  log(f"[{setting}] JO run: {jo_seconds:.1f} s")
  start = time.perf_counter()
  jo = _ours_from_table(jo_method, jo_table)  # from_run: flags = the table relabelled (whatever the rule)
  jo_probs = np.asarray(jo_table.history, np.float64)[np.asarray(jo_table.history_filled, bool)].mean(axis=0)
  jo["flags"] = {"argmax": jo["flags"]["argmax"], "confident": _ours_from_probs(jo_probs, given)["flags"]["confident"]}
  detectors["jo_table"], probs_of["jo_table"] = jo, jo_probs
  cost["jo_table"] = {
    "runs": 1,
    "epochs": epochs,
    "example_epochs": epochs * n,
    "train_seconds": jo_seconds,
    "detect_seconds": time.perf_counter() - start,
  }
  out["jo_label_recovery"] = {k: v for k, v in jo_history[-1].items() if k.startswith(("label_", "relabelled_"))}

  # --- cleanlab: 5-fold out-of-sample probabilities, same trainer, network, optimiser, epochs --------------------
  oos = np.full((n, dataset.num_classes), np.nan)
  folds = StratifiedKFold(n_splits=NUM_FOLDS, shuffle=True, random_state=seed).split(np.zeros(n), given)
  fold_seconds, fold_examples = [], []
  for k, (train_rows, held_rows) in enumerate(folds):
    fold = dataclasses.replace(dataset, x_train=dataset.x_train[train_rows], y_train=dataset.y_train[train_rows])
    start = time.perf_counter()
    fold_model, _, fold_state, fold_table, _, _ = _train(
      ce_config, fold, given[train_rows], jax.random.fold_in(stage1_key, k + 1), mesh, history_length=0
    )
    assert np.array_equal(np.asarray(fold_table.noisy_labels), given[train_rows])  # trained on the NOISY labels
    oos[held_rows] = _predict(fold_model, ce_config, fold, fold_state, dataset.x_train[held_rows], mesh)
    fold_seconds.append(time.perf_counter() - start)
    fold_examples.append(len(train_rows))
    log(
      f"[{setting}] fold {k + 1}/{NUM_FOLDS}: {fold_seconds[-1]:.1f} s (train {len(train_rows)}, held out "
      f"{len(held_rows)})"
    )
  assert not np.isnan(oos).any()
  oos_cost = {
    "runs": NUM_FOLDS,
    "epochs": epochs,
    "example_epochs": epochs * int(sum(fold_examples)),
    "train_seconds": float(sum(fold_seconds)),
    "fold_seconds": fold_seconds,
  }
  start = time.perf_counter()
  detectors["cleanlab_oos5"] = _cleanlab_detector(cleanlab, oos, given)
  cost["cleanlab_oos5"] = {**oos_cost, "detect_seconds": time.perf_counter() - start}
  probs_of["cleanlab_oos5"] = oos
  # --- cross-checks: our rules on the out-of-sample P; cleanlab on our in-sample history P --------------------
  start = time.perf_counter()
  detectors["ours_on_oos5"], probs_of["ours_on_oos5"] = _ours_from_probs(oos, given), oos
  cost["ours_on_oos5"] = {**oos_cost, "detect_seconds": time.perf_counter() - start}
  start = time.perf_counter()
  detectors["cleanlab_on_historyE"] = _cleanlab_detector(cleanlab, probs_of["history_E"], given)
  probs_of["cleanlab_on_historyE"] = probs_of["history_E"]
  cost["cleanlab_on_historyE"] = {**ce_cost, "detect_seconds": time.perf_counter() - start}

  out["detectors"] = {}
  for name, detector in detectors.items():
    out["detectors"][name] = {**_metrics(detector, planted, clean, given, probs_of[name]), "cost": cost[name]}
  return out


def _tables(results: dict) -> list[str]:
  flagged_rows, ranking_rows, cost_rows = [], [], []
  for setting, res in results.items():
    noise = res["noise"]
    label = f"{setting} ({noise['planted_errors']})"
    for name, det in res["detectors"].items():
      for rule, m in det["flagged"].items():
        flagged_rows.append(
          [label, name, rule, m["flagged"], m["true_positives"], m["precision"], m["recall"], m["f1"]]
        )
      for score, m in det["ranking"].items():
        ranking_rows.append([label, name, score, m["auroc"], m["average_precision"], m["precision_at_num_errors"]])
      c = det["cost"]
      cost_rows.append(
        [
          label,
          name,
          c["runs"],
          c["epochs"],
          c["example_epochs"],
          c["train_seconds"],
          c["detect_seconds"],
          det.get("argmax_accuracy_vs_clean", float("nan")),
        ]
      )
  return [
    "flagged set vs planted errors (setting (number of planted errors)):\n"
    + common.format_table(
      ["setting", "detector", "rule", "flagged", "true pos", "precision", "recall", "F1"], flagged_rows
    ),
    "ranking by label quality (low = suspect) vs planted errors:\n"
    + common.format_table(["setting", "detector", "score", "AUROC", "avg precision", "prec@#errors"], ranking_rows),
    "cost (training: runs x epochs x examples; seconds include compilation) and argmax(P) accuracy vs clean:\n"
    + common.format_table(
      ["setting", "detector", "runs", "epochs", "example-epochs", "train s", "detect s", "argmax acc"], cost_rows
    ),
  ]


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--epochs",
    type=int,
    default=0,
    help=f"E, epochs of every run (default 0: the ce config's num_epochs, at most {CE_EPOCHS_CAP})",
  )
  parser.add_argument(
    "--settings", default=",".join(SETTINGS), help=f"comma-separated subset of {','.join(SETTINGS)} (default all)"
  )
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument(
    "--quick",
    action="store_true",
    help=f"smoke run: 2 epochs, settings {','.join(QUICK_SETTINGS)} (unless --settings is given)",
  )
  parser.add_argument(
    "--threads", type=int, default=0, help="cores for JAX (default 0: every core this process may use)"
  )
  parser.add_argument(
    "--host-malloc",
    default="auto",
    choices=("auto", "retain", "system"),
    help="glibc malloc policy set before JAX starts (parallel.host_memory; default %(default)s)",
  )
  args = parser.parse_args(argv)
  settings = [s.strip() for s in args.settings.split(",") if s.strip()]
  if args.quick and not argv_has(argv, "--settings"):
    settings = list(QUICK_SETTINGS)
  unknown = sorted(set(settings) - set(SETTINGS))
  if unknown or not settings:
    parser.error(f"--settings: unknown {unknown}; choose from {','.join(SETTINGS)}")
  cleanlab = _import_cleanlab()
  threads = common.configure_threads(args.threads, with_torch=False, host_malloc=args.host_malloc)
  args.repeats, args.warmup = 1, 0  # one training per side and setting (common.report's record fields)

  from experiments.configs import ce  # pylint: disable=g-import-not-at-top
  from noisy_jax.parallel import mesh as mesh_lib  # pylint: disable=g-import-not-at-top

  ce_epochs = int(ce.get_config().num_epochs)
  epochs = args.epochs or (2 if args.quick else min(ce_epochs, CE_EPOCHS_CAP))
  mesh = mesh_lib.make_mesh(None)
  start = time.perf_counter()
  results = {}
  for setting in settings:
    results[setting] = run_setting(
      setting, epochs=epochs, seed=args.seed, cleanlab=cleanlab, mesh=mesh, log=lambda line: print(line, flush=True)
    )
  total = time.perf_counter() - start
  ce_config, jo_config = _configs(settings[0], epochs, args.seed)
  run_settings = {
    "dataset": "mnist5k (train split only)",
    "model": ce_config.model.name,
    "batch_size": ce_config.batch_size,
    "epochs": epochs,
    "ce_optimizer": ce_config.optimizer.to_dict(),
    "ce_config_epochs": ce_epochs,
    "jo_method": jo_config.method.to_dict(),
    "jo_optimizer": jo_config.optimizer.to_dict(),
    "seed": args.seed,
    "settings": {s: SETTINGS[s] for s in settings},
    "folds": NUM_FOLDS,
    "cleanlab": cleanlab.__version__,
    "cleanlab_filter_by": CLEANLAB_RULE,
    "total_seconds": total,
  }
  common.report(
    "label_issues_vs_cleanlab",
    args=args,
    threads=threads,
    settings=run_settings,
    results=results,
    tables=_tables(results),
    notes=[
      "planted errors = given label != clean label; positive class = planted error.",
      "history_E, history_last10, final_eval and cleanlab_on_historyE share one CE run; "
      "cleanlab_oos5 and ours_on_oos5 share the 5 fold runs.",
      "jo_table 'argmax' = JO's own verdict (its table relabelled the example).",
      f"total wall time {total:.0f} s.",
    ],
  )


def argv_has(argv, flag: str) -> bool:
  """Whether `flag` was given on the command line (argv None: sys.argv[1:])."""
  import sys  # pylint: disable=g-import-not-at-top

  args = sys.argv[1:] if argv is None else argv
  return any(a == flag or a.startswith(flag + "=") for a in args)


if __name__ == "__main__":
  main()
