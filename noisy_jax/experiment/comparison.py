"""Comparisons: several methods x seeds of one config, one table (the entry point of experiments/train.py).

  out = comparison.run(config, workdir)    # a comparison config (`runs` + `shared`), or a single run's config

Each run is `runs.run_single`; this module loops over the runs and seeds, aggregates them and prints the
plain-text tables.
"""

from __future__ import annotations

import json
import os
import time
from typing import Sequence

from absl import logging
import ml_collections
import numpy as np

from noisy_jax.core import errors
from noisy_jax.experiment import inputs
from noisy_jax.experiment import pretrained
from noisy_jax.experiment import reporting
from noisy_jax.experiment.runs import check_before_data  # pylint: disable=g-importing-member
from noisy_jax.experiment.runs import run_single  # pylint: disable=g-importing-member
from noisy_jax.experiment.stages import total_epochs  # pylint: disable=g-importing-member
from noisy_jax.parallel import distributed
from noisy_jax.parallel import mesh as mesh_lib

TABLE_COLUMNS = (  # (summary key, header, format)
  ("best_test_accuracy", "best test", "{:.2%}"),
  ("last_test_accuracy", "last test", "{:.2%}"),
  ("test_accuracy_at_best_val", "test@best val", "{:.2%}"),
  ("best_val_accuracy", "best val", "{:.2%}"),  # runs without a test split
  ("label_recovery_overall", "label recovery", "{:.2%}"),
  ("detection_precision", "detect P", "{:.2%}"),
  ("detection_recall", "detect R", "{:.2%}"),
  ("test_margin_correct", "margin", "{:.2f}"),
  ("realised_noise_rate", "noise", "{:.2%}"),
  ("seconds", "wall s", "{:.1f}"),
)


def merged_run_config(config, run_name: str, seed: int):
  """config.shared updated with config.runs[run_name] and the seed: the config of one run of a comparison."""
  merged = ml_collections.ConfigDict(config.shared.to_dict())
  merged.update(config.runs[run_name].to_dict())
  merged.seed = int(seed)
  if "plots" in config:
    merged.plots = bool(config.plots)
  return merged


def flat_metrics(summary: dict) -> dict:
  flat = {
    k: summary[k]
    for k in ("best_test_accuracy", "last_test_accuracy", "test_accuracy_at_best_val", "best_val_accuracy", "seconds")
    if k in summary
  }
  if "realised_rate" in summary["noise"]:
    flat["realised_noise_rate"] = summary["noise"]["realised_rate"]
  if "pseudo_label_accuracy" in summary["noise"]:
    flat["pseudo_label_accuracy"] = summary["noise"]["pseudo_label_accuracy"]
  last = summary["history"][-1]
  if "test_margin_correct" in last:
    flat["test_margin_correct"] = last["test_margin_correct"]
  for k, v in summary["stage1"].items():
    if k.startswith(("label_recovery", "detection_", "pruned_")):
      flat[k] = v
  return flat


def aggregate(per_seed: list[dict]) -> dict:
  """Mean and (population) std over seeds of each flat metric present in every seed."""
  keys = set.intersection(*(set(s) for s in per_seed))
  return {
    k: {"mean": float(np.mean([s[k] for s in per_seed])), "std": float(np.std([s[k] for s in per_seed]))}
    for k in sorted(keys)
  }


def text_table(rows: list[list[str]], *, left_align: bool = False) -> str:
  """Columns padded to their widest cell, a dashed rule under the first (header) row."""
  widths = [max(len(row[j]) for row in rows) for j in range(len(rows[0]))]
  pad = (lambda cell, w: cell.ljust(w)) if left_align else (lambda cell, w: cell.rjust(w))
  lines = ["  ".join(pad(cell, w) for cell, w in zip(row, widths)) for row in rows]
  lines.insert(1, "  ".join("-" * w for w in widths))
  return "\n".join(lines)


def format_table(results: dict[str, dict], num_seeds: int) -> str:
  """Plain-text table of mean (and std when several seeds) per method; '-' where a method lacks a metric, and no
  column for a metric no method has (e.g. label recovery and detection without clean labels)."""
  columns = [c for c in TABLE_COLUMNS if any(c[0] in agg for agg in results.values())]
  header = ["method"] + [h for _, h, _ in columns]
  rows = [header]
  for name, agg in results.items():
    row = [name]
    for key, _, fmt in columns:
      if key not in agg:
        row.append("-")
        continue
      text = fmt.format(agg[key]["mean"])
      if num_seeds > 1:
        text += " ±" + fmt.format(agg[key]["std"]).rstrip("%")
      row.append(text)
    rows.append(row)
  return text_table(rows, left_align=True)


def format_epoch_table(history: list[dict], keys) -> str:
  """Plain-text table of `keys` (record fields) per epoch; '-' where an epoch lacks a field."""
  header = ["stage", "epoch", *keys]
  rows = [header]
  for r in history:
    cells = [str(r.get("stage", "")), str(r["epoch"])]
    for k in keys:
      v = r.get(k)
      cells.append("-" if v is None else (f"{v:.4f}" if "loss" in k else f"{v:.2%}"))
    rows.append(cells)
  return text_table(rows)


def format_curve_table(histories: dict[str, list[dict]], key: str, *, every: int = 1) -> str:
  """Plain-text table of one record field: a row per epoch (every `every`-th and the last), a column per run."""
  if every < 1:
    raise ValueError(f"every={every} must be >= 1.")
  names = list(histories)
  length = max(len(h) for h in histories.values())
  steps = sorted(set(range(every - 1, length, every)) | {length - 1})
  rows = [["epoch", *names]]
  for i in steps:
    cells = [str(i + 1)]
    for name in names:
      h = histories[name]
      cells.append(f"{h[i][key]:.2%}" if i < len(h) and key in h[i] else "-")
    rows.append(cells)
  return text_table(rows)


def _check_only(config, only: Sequence[str] | None) -> None:
  """errors.InputError when `only` (names of runs, or None) is given for a config that is not a comparison, is
  empty, or names a run that the config does not have."""
  if only is not None and "runs" not in config:
    raise errors.InputError(f"only={list(only)} selects runs of a comparison, and this config has no `runs`.")
  if only is not None:
    unknown = [name for name in only if name not in config.runs]
    if unknown or not only:
      raise errors.InputError(f"no run(s) {unknown or list(only)} in the config; its runs: {', '.join(config.runs)}.")


def _run_one(config, workdir: str | None) -> dict:
  """The summary of a single run's config (runs.run_single), its one-row table printed."""
  progress = reporting.Progress(total_epochs(config), prefix=config.method.get("loss", config.method.name))
  summary = run_single(config, workdir, log_fn=progress, resume_fn=progress.restored)
  print(format_table({summary["method"]: aggregate([flat_metrics(summary)])}, 1))
  return summary


def _checked_weights(config, names: list[str], seed: int) -> dict:
  """{run name: its pretrained weights}, every run checked before the data are read (runs.check_before_data), and
  the shared data arguments too."""
  weights = {name: check_before_data(merged_run_config(config, name, seed), dataset_arguments=False) for name in names}
  inputs.check_arguments(config.shared, flag_prefix="--config.shared.")
  return weights


def _load_checked(config, names: list[str], seed: int, weights: dict, workdir: str | None):
  """The shared dataset, loaded; each run's pretrained weights checked against its inputs and classes before
  anything is written; then WORKDIR/classes.json (each run's folder has it too)."""
  dataset = inputs.load_dataset(config.shared)
  for name in names:  # the weights again, for the data's inputs and classes, before anything is written
    pretrained.check(merged_run_config(config, name, seed), dataset, weights[name])
  if workdir and distributed.is_main_process():
    inputs.write_classes(dataset, config.shared, workdir)  # WORKDIR/classes.json (each run's folder has it too)
  return dataset


def _log_seed(name: str, seed: int, summary: dict) -> None:
  """Logs one run's last test and best validation accuracy (those it has) and its seconds."""
  logging.info(
    "%s seed %d: %s, %.1fs",
    name,
    seed,
    ", ".join(
      f"{what} {100 * summary[key]:.2f}%"
      for key, what in (("last_test_accuracy", "last test"), ("best_val_accuracy", "best val"))
      if key in summary
    ),
    summary["seconds"],
  )


def _run_seeds(config, name: str, seeds, workdir: str | None, *, dataset, mesh, progress):
  """(flat metrics of each seed's run of `name`, the first seed's history)."""
  per_seed, first_history = [], None
  for seed in seeds:
    run_dir = os.path.join(workdir, name, f"seed{seed}") if workdir else None
    progress.prefix = f"{name} seed {seed}"
    summary = run_single(
      merged_run_config(config, name, seed),
      run_dir,
      dataset=dataset,
      mesh=mesh,
      log_fn=progress,
      resume_fn=progress.restored,
    )
    first_history = summary["history"] if first_history is None else first_history
    per_seed.append(flat_metrics(summary))
    _log_seed(name, seed, summary)
  return per_seed, first_history


def _print_history_tables(config, first_seed_histories: dict, seed: int) -> None:
  """Prints the first seed's per-epoch tables that the config asks for (epoch_table, curve_table)."""
  if config.get("epoch_table"):
    for name, history in first_seed_histories.items():
      print(f"\n{name}, seed {seed}, per epoch:\n{format_epoch_table(history, tuple(config.epoch_table))}")
  if config.get("curve_table"):
    key, every = config.curve_table.key, int(config.curve_table.get("every", 1))
    print(f"\n{key}, seed {seed}, per epoch:\n{format_curve_table(first_seed_histories, key, every=every)}")


def _write_comparison(workdir: str, out: dict, config, first_seed_histories: dict) -> None:
  """Writes WORKDIR/summary.json and, with config.plots, comparison.png (the first seed's curves)."""
  os.makedirs(workdir, exist_ok=True)
  with open(os.path.join(workdir, "summary.json"), "w") as f:
    json.dump(out, f, indent=1)
  if config.get("plots", False):
    plot_key = config.get("plot_key", "test_accuracy")
    reporting.save_comparison(
      first_seed_histories,
      os.path.join(workdir, "comparison.png"),
      key=plot_key,
      title=f"{out['title']}: {plot_key.replace('_', ' ')}, seed {out['seeds'][0]}",
    )


def run(config, workdir: str | None = None, only: Sequence[str] | None = None) -> dict:
  """Entry point of `experiments/train.py`.

  A config with `runs` (and `shared`) is a comparison: every run x every seed of `config.shared.seeds`, a table
  printed at the end and `summary.json` in the workdir. Any other config is a single run (`config.seed`).

  Args:
    config: a comparison's or a single run's config.
    workdir: where the runs write (None: nowhere).
    only: names of `config.runs` to run, in the config's order (rows to add or re-measure); None runs them all.
      errors.InputError (a ValueError) naming the unknown ones and the config's runs, or when the config is not a
      comparison.

  Before the data are read and before anything is written, every run is checked (runs.check_before_data), and its
  pretrained weights again against the data's inputs and classes once they are read.
  """
  _check_only(config, only)
  if "runs" not in config:
    return _run_one(config, workdir)

  seeds = tuple(config.shared.get("seeds", (config.shared.get("seed", 0),)))
  title = config.get("title") or (
    f"{config.shared.dataset}, {config.shared.noise.rate:.0%} {config.shared.noise.type} noise"
  )
  names = [name for name in config.runs if only is None or name in only]
  weights = _checked_weights(config, names, seeds[0])
  start = time.perf_counter()
  dataset = _load_checked(config, names, seeds[0], weights, workdir)
  mesh = mesh_lib.make_mesh(config.shared.get("num_devices") or None)
  results, summaries, first_seed_histories = {}, {}, {}
  progress = reporting.Progress(sum(total_epochs(merged_run_config(config, name, 0)) for name in names) * len(seeds))
  for name in names:
    per_seed, first_seed_histories[name] = _run_seeds(
      config, name, seeds, workdir, dataset=dataset, mesh=mesh, progress=progress
    )
    results[name] = aggregate(per_seed)
    summaries[name] = per_seed
  _print_history_tables(config, first_seed_histories, seeds[0])
  table = format_table(results, len(seeds))
  total = time.perf_counter() - start
  print(f"\n{title}  (seeds {list(seeds)}, {total:.0f} s in all)\n{table}")
  pseudo = [agg["pseudo_label_accuracy"]["mean"] for agg in results.values() if "pseudo_label_accuracy" in agg]
  if pseudo:
    print(f"pseudo-labels: {pseudo[0]:.2%} of the training set's cluster-matched labels are right (mean over seeds)")
  out = {
    "title": title,
    "seeds": list(seeds),
    "mean_std": results,
    "per_seed": summaries,
    "seconds": total,
    "config": config.to_dict(),
  }
  if workdir and distributed.is_main_process():
    _write_comparison(workdir, out, config, first_seed_histories)
  return out
