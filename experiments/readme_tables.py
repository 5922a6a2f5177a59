"""The README tables that `experiments/regenerate_readme.py` regenerates: which command makes each, and how its output
files become the table's Markdown.

Each `Table` names the README that holds it (the table sits under a `<!-- table: NAME -->` marker there), the command
written in that README's code block before the marker, and `render(workdir)`, which rebuilds the table, in the
README's exact format, from what the command wrote into `workdir`:

  comparisons (experiments.train with `runs`)  WORKDIR/summary.json ('mean_std' per run name) and, for per-epoch
                                               columns, WORKDIR/RUN/seedS/summary.json ('history')
  sweeps (experiments.train with `sweep`)      WORKDIR/summary.json ('mean_std' per point label, e.g.
                                               'q=0.7, noise=60%'; 'values' of the grid)
  experiments.loss_properties                  WORKDIR/stdout.txt (it prints the Markdown table)
  experiments/benchmarks/run_all.sh            WORKDIR/results.jsonl (the last printed line of each benchmark)

Row labels, row order and the chosen epochs are written here, not read from the output: a config's runs come back
sorted by name, and the README orders and names them for a reader.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable, Sequence

from experiments import readme_benchmarks
from experiments.configs import baselines
from experiments.readme_benchmarks import markdown  # pylint: disable=g-importing-member

README = "README.md"
BENCHMARKS_README = os.path.join("experiments", "benchmarks", "README.md")

# The benchmarks' output directory as written in their command; the regenerator points it at its own workdir.
BENCHMARKS_OUTDIR = "workdirs/benchmarks/full"
BENCHMARKS_COMMAND = f"bash experiments/benchmarks/run_all.sh {BENCHMARKS_OUTDIR}"


@dataclasses.dataclass(frozen=True)
class Table:
  """One regenerated table.

  name: the marker's NAME; readme: path from the repository root; command: as written in the README;
  render: workdir -> Markdown table; run: the workdir name under the regeneration root (tables made by one
  command share it, so the command runs once); output_dir: for a command without --workdir, the output path
  written in it that the regenerator replaces with its workdir; rows: for a comparison's table (one row per run of
  its config), () -> ((run name, row label), ...) in the table's order, else None; render_rows: for such a table,
  (workdir, rows) -> the Markdown table of those rows only (`regenerate_readme --rows` re-measures some rows).
  """

  name: str
  readme: str
  command: str
  render: Callable[[str], str]
  run: str = ""
  output_dir: str | None = None
  rows: Callable[[], tuple[tuple[str, str], ...]] | None = None
  render_rows: Callable[[str, tuple[tuple[str, str], ...]], str] | None = None

  @property
  def run_name(self) -> str:
    return self.run or self.name

  def rows_of(self, runs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """(run, label) of `runs`, in the table's order; ValueError when the table has no rows by run, or naming the
    runs it does not show and those it does."""
    if self.rows is None:
      raise ValueError(f"table {self.name!r} is not a comparison of runs: its rows cannot be re-measured one by one.")
    shown = self.rows()
    unknown = [run for run in runs if run not in dict(shown)]
    if unknown or not runs:
      raise ValueError(
        f"table {self.name!r} has no row for run(s) {unknown or list(runs)}; "
        f"its runs: {', '.join(run for run, _ in shown)}."
      )
    return tuple(row for row in shown if row[0] in runs)


# ---------------------------------------------------------------------------------------------------------------
# Reading outputs


def _load_json(path: str) -> dict:
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path} does not exist: the table's command did not write it (did it finish?).")
  with open(path) as f:
    return json.load(f)


def _mean_std(workdir: str, key: str) -> dict:
  """summary.json's 'mean_std'[key] (a KeyError naming the key and the ones there)."""
  results = _load_json(os.path.join(workdir, "summary.json"))["mean_std"]
  if key not in results:
    raise KeyError(f"{key!r} is not in {os.path.join(workdir, 'summary.json')}; it has {sorted(results)}.")
  return results[key]


def _history(workdir: str, run: str, seed: int = 0) -> list[dict]:
  return _load_json(os.path.join(workdir, run, f"seed{seed}", "summary.json"))["history"]


def _at_epoch(history: list[dict], epoch: int, stage: str = "stage1") -> dict:
  for record in history:
    if record["epoch"] == epoch and record.get("stage", stage) == stage:
      return record
  raise ValueError(f"no {stage} record of epoch {epoch} in a history of {len(history)} records.")


# ---------------------------------------------------------------------------------------------------------------
# Formats


def percent(value: float | None, decimals: int = 2) -> str:
  """0.8607 -> '86.07%' ('-' for None)."""
  return "-" if value is None else f"{100 * value:.{decimals}f}%"


def mean_pm_std(stat: dict | None, *, scale: float = 100.0) -> str:
  """{'mean': 0.8607, 'std': 0.0155} -> '86.07 ± 1.55' ('-' for None)."""
  return "-" if stat is None else f"{scale * stat['mean']:.2f} ± {scale * stat['std']:.2f}"


def _mean(stats: dict, key: str) -> float | None:
  return stats[key]["mean"] if key in stats else None


# ---------------------------------------------------------------------------------------------------------------
# README.md, "Run the default experiment"

DEFAULT3_COMMAND = (
  "python -m experiments.train --config=experiments/configs/default.py --workdir=workdirs/default3 "
  '--config.shared.seeds="(0,1,2)"'
)
DEFAULT_RUNS = ("ce", "gce", "truncated_lq", "joint_optimization", "encouraging")


def _default_labels(config: dict) -> dict[str, str]:
  runs = config["runs"]
  gce_q = runs["gce"]["method"]["loss_kwargs"]["q"]
  tlq = runs["truncated_lq"]["method"]
  return {
    "ce": "CE",
    "gce": f"GCE (q = {gce_q:g})",
    "truncated_lq": f"truncated Lq (q = {tlq['q']:g}, k = {tlq['k']:g})",
    "joint_optimization": "Joint Optimization (stage 2)",
    "encouraging": f"encouraging loss (log_end = {runs['encouraging']['method']['log_end']:g})",
  }


def render_default3(workdir: str) -> str:
  summary = _load_json(os.path.join(workdir, "summary.json"))
  labels = _default_labels(summary["config"])
  rows = []
  for run in DEFAULT_RUNS:
    stats = _mean_std(workdir, run)
    rows.append(
      [labels[run]]
      + [
        mean_pm_std(stats.get(key))
        for key in (
          "best_test_accuracy",
          "last_test_accuracy",
          "label_recovery_overall",
          "detection_precision",
          "detection_recall",
        )
      ]
      + [f"{stats['seconds']['mean']:.1f}"]
    )
  return markdown(["method", "best test", "last test", "label recovery", "detect P", "detect R", "wall s"], rows)


# ---------------------------------------------------------------------------------------------------------------
# README.md, "The papers' own experiments on mnist5k"

MEMORISATION_EPOCHS = (1, 8, 20, 32, 44, 60)
MEMORISATION_ROWS = (
  ("train_loss", "train loss"),
  ("train_accuracy_given_labels", "fit of the given labels (eval mode)"),
  ("memorised_fraction", "mislabelled examples predicted as their wrong label"),
  ("test_accuracy", "test accuracy"),
)


def _percent_short(value: float) -> str:
  """One decimal, '100%' when it rounds to 100 (the memorisation table's format)."""
  text = f"{100 * value:.1f}"
  return ("100" if text == "100.0" else text) + "%"


def render_memorisation(workdir: str) -> str:
  history = _history(workdir, "ce_small_lr")
  records = [_at_epoch(history, epoch) for epoch in MEMORISATION_EPOCHS]
  rows = []
  for key, label in MEMORISATION_ROWS:
    fmt = (lambda v: f"{v:.3f}") if key == "train_loss" else _percent_short
    rows.append([label] + [fmt(r[key]) for r in records])
  return markdown(["epoch"] + [str(e) for e in MEMORISATION_EPOCHS], rows)


RELABEL_EPOCHS = (20, 25, 30, 40, 50)
RELABEL_RUNS = (
  ("soft", "soft, all"),
  ("hard_all", "hard, all"),
  ("hard_top360", "hard, top 360"),
  ("hard_top36", "hard, top 36"),
  ("hard_top4", "hard, top 4"),
)


def render_relabel_ablation(workdir: str) -> str:
  rows = []
  for run, label in RELABEL_RUNS:
    history = _history(workdir, run)
    stats = _mean_std(workdir, run)
    rows.append(
      [label]
      + [percent(_at_epoch(history, e)["label_recovery_overall"]) for e in RELABEL_EPOCHS]
      + [
        percent(_mean(stats, "last_test_accuracy")),
        f"{percent(_mean(stats, 'detection_precision'))} / {percent(_mean(stats, 'detection_recall'))}",
      ]
    )
  return markdown(
    ["label recovery after epoch"] + [str(e) for e in RELABEL_EPOCHS] + ["stage-1 last test", "detect P / R"], rows
  )


LR_GRID_LEARNING_RATES = (0.005, 0.02, 0.08)
LR_GRID_NOISE_RATES = (0.3, 0.5, 0.7)
LR_GRID_PAPER_LR = 0.08


def render_lr_noise_grid(workdir: str) -> str:
  rows = []
  for lr in LR_GRID_LEARNING_RATES:
    cells = [f"{lr:g}" + (" (paper)" if lr == LR_GRID_PAPER_LR else "")]
    for noise in LR_GRID_NOISE_RATES:
      stats = _mean_std(workdir, f"lr{round(1000 * lr):04d}_noise{round(100 * noise)}")  # lr_noise_grid.run_name
      cells.append(
        f"{percent(_mean(stats, 'last_test_accuracy'), 1)} / {percent(_mean(stats, 'label_recovery_overall'), 1)}"
      )
    rows.append(cells)
  return markdown(["lr \\ symmetric noise"] + [f"{n:.0%}" for n in LR_GRID_NOISE_RATES], rows)


PSEUDO_LABEL_RUNS = (
  ("ce", "CE"),
  ("gce", "GCE"),
  ("truncated_lq", "truncated Lq"),
  ("joint_optimization", "Joint Optimization (stage 2)"),
  ("encouraging", "EL"),
)


def _detect_pr(stats: dict) -> str:
  if "detection_precision" not in stats:
    return "-"
  return f"{percent(_mean(stats, 'detection_precision'))} / {percent(_mean(stats, 'detection_recall'))}"


def render_pseudo_label_noise(workdir: str) -> str:
  rows = []
  for run, label in PSEUDO_LABEL_RUNS:
    stats = _mean_std(workdir, run)
    rows.append(
      [
        label,
        percent(_mean(stats, "best_test_accuracy")),
        percent(_mean(stats, "last_test_accuracy")),
        percent(_mean(stats, "label_recovery_overall")),
        _detect_pr(stats),
      ]
    )
  return markdown(["method", "best test", "last test", "label recovery", "detect P / R"], rows)


LOG_END_NOISE = (("clean", "clean"), ("noisy60", "60% noisy"))
LOG_END_VALUES = (0.5, 0.75, 1.0)


def render_log_end_sweep(workdir: str) -> str:
  rows = []
  for noise, noise_label in LOG_END_NOISE:
    runs = [(f"{noise}_ce", "CE")] + [(f"{noise}_el{round(100 * v)}", f"EL {v}") for v in LOG_END_VALUES]
    for run, label in runs:
      stats = _mean_std(workdir, run)
      margin = _mean(stats, "test_margin_correct")
      rows.append(
        [
          noise_label,
          label,
          percent(_mean(stats, "best_test_accuracy")),
          percent(_mean(stats, "last_test_accuracy")),
          "-" if margin is None else f"{margin:.2f}",
        ]
      )
  return markdown(["labels", "method", "best test", "last test", "margin"], rows)


def _point(field: str, value: float, noise: float) -> str:
  """sweep_grid.point_label of (value, noise), e.g. 'q=0.7, noise=60%'."""
  return f"{field}={value:g}, noise={noise:.0%}"


def render_q_sweep(workdir: str) -> str:
  """Last-epoch test accuracy per (q, noise); the best mean at the highest noise rate in bold."""
  q_values, noise_rates = _load_json(os.path.join(workdir, "summary.json"))["values"]
  cells = {(q, n): _mean_std(workdir, _point("q", q, n))["last_test_accuracy"] for q in q_values for n in noise_rates}
  best_q = max(q_values, key=lambda q: cells[q, noise_rates[-1]]["mean"])
  rows = []
  for q in q_values:
    row = [f"{q:.1f}"]
    for n in noise_rates:
      text = mean_pm_std(cells[q, n])
      row.append(f"**{text}**" if (q, n) == (best_q, noise_rates[-1]) else text)
    rows.append(row)
  header = ["q", f"{noise_rates[0]:.0%} noise"] + [f"{n:.0%}" for n in noise_rates[1:]]
  return markdown(header, rows)


def render_k_sweep(workdir: str) -> str:
  """Last-epoch test accuracy at every noise rate; pruned fraction and detection (means) at the highest."""
  k_values, noise_rates = _load_json(os.path.join(workdir, "summary.json"))["values"]
  top = noise_rates[-1]
  rows = []
  for k in k_values:
    tests = " / ".join(mean_pm_std(_mean_std(workdir, _point("k", k, n))["last_test_accuracy"]) for n in noise_rates)
    stats = _mean_std(workdir, _point("k", k, top))
    rows.append([f"{k:g}", tests, percent(_mean(stats, "pruned_fraction")), _detect_pr(stats)])
  header = [
    "k",
    "last test " + " / ".join(f"{n:.0%}" for n in noise_rates),
    f"pruned {top:.0%}",
    f"detect P / R at {top:.0%}",
  ]
  return markdown(header, rows)


def render_loss_properties(workdir: str) -> str:
  """The Markdown table experiments.loss_properties prints (its lines that start with '|')."""
  path = os.path.join(workdir, "stdout.txt")
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path} does not exist: run `python -m experiments.loss_properties` first.")
  with open(path) as f:
    lines = [line.rstrip("\n") for line in f if line.startswith("|")]
  if not lines:
    raise ValueError(f"{path} holds no Markdown table.")
  return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# README.md, "Every method side by side": experiments/configs/baselines.py

BASELINE_RUNS = (
  ("ce", "cross entropy"),
  ("gce", "GCE (q 0.7)"),
  ("truncated_lq", "truncated Lq"),
  ("encouraging", "encouraging loss"),
  ("joint_optimization", "Joint Optimization (2 stages)"),
  ("forward_correction", "forward correction (true T)"),
  ("elr", "ELR"),
  ("sop", "SOP"),
  ("sop_plus", "SOP+ (AutoAugment + Cutout view)"),
  ("coteaching", "Co-teaching (2 networks)"),
  ("coteaching_plus", "Co-teaching+ (2 networks)"),
  ("jocor", "JoCoR (2 networks)"),
  ("elr_plus", "ELR+ (2 networks)"),
  ("dividemix", "DivideMix (2 networks)"),
  ("disc", "DISC (its own RandAugment pool view)"),
  ("promix", "ProMix (2 networks, its own RandAugment pool view)"),
  ("t_revision", "T-Revision (3 stages)"),
  ("pes", "PES (4 stages)"),
  ("pes_semi", "PES-semi (3 stages, MixMatch)"),
  ("gls", "GLS (smooth rate -0.2 at lr 1e-6, after 22 CE epochs)"),
  ("peer_loss", "Peer Loss (sparse alpha: CE for 20 epochs, then 0 to 1)"),
  ("volminnet", "VolMinNet (T learned with the network)"),
  ("f_divergence", "f-divergence (Total-Variation, after 28 CE epochs)"),
  ("cores", "CORES² (sample sieve, phase 1)"),
  ("cal", "CAL (16-epoch sieve warm-up, 24 CAL epochs)"),
)


BASELINE_LOSS_RUNS = (
  ("ce", "cross entropy"),
  ("gce", "GCE (q 0.7)"),
  ("agce", "AGCE (a 0.6, q 0.6)"),
  ("aul", "AUL (a 5.5, q 3)"),
  ("ael", "AEL (a 2.5)"),
  ("nce_agce", "NCE+AGCE (1, 4; a 6, q 1.5)"),
  ("nce_aul", "NCE+AUL (1, 4; a 6.3, q 1.5)"),
  ("nce_ael", "NCE+AEL (1, 4; a 5)"),
  ("anl_ce", "ANL-CE (5, 5; L1 5e-5)"),
  ("anl_fl", "ANL-FL (5, 5, gamma 0.5; L1 5e-5)"),
  ("bi_tempered", "bi-tempered (t1 0.8, t2 1.2)"),
  ("poly1", "Poly-1 (epsilon 2)"),
  ("taylor", "Taylor CE (order 2)"),
  ("logit_clip", "LogitClip + CE (temperature 1.5)"),
  ("ece_mae", "CE_eps+MAE (sym: 0.01, 5, m 1e5; asym: 0.02, 5, m 1e3)"),
  ("efl_mae", "FL_eps+MAE (the same, gamma 0.1)"),
  ("jal_ce", "JAL-CE (1, 1; a 30; L1 5e-5)"),
  ("jal_fl", "JAL-FL (1, 1; a 30, gamma 0.5; L1 5e-5)"),
)


def baseline_rows(setting: str) -> Callable[[], tuple[tuple[str, str], ...]]:
  """The rows of the `setting` table: BASELINE_RUNS' rows that the setting's config runs."""

  def rows() -> tuple[tuple[str, str], ...]:
    runs = baselines.get_config(setting).runs
    return tuple(row for row in BASELINE_RUNS if row[0] in runs)

  return rows


def _render_comparison_rows(workdir: str, rows_of: tuple, first_column: str) -> str:
  rows = []
  for run, label in rows_of:
    stats = _mean_std(workdir, run)
    rows.append(
      [label]
      + [
        mean_pm_std(stats.get(key)) for key in ("best_test_accuracy", "last_test_accuracy", "test_accuracy_at_best_val")
      ]
      + [f"{stats['seconds']['mean']:.1f}"]
    )
  return markdown([first_column, "best test", "last test", "test at best val", "wall s"], rows)


def _baselines_table(setting: str, rows: Callable[[], tuple[tuple[str, str], ...]], first_column: str) -> Table:
  """The comparison table of baselines.py's `setting`: one row per run, `rows()` in order."""

  def render_rows(workdir: str, rows_of: tuple[tuple[str, str], ...]) -> str:
    return _render_comparison_rows(workdir, rows_of, first_column)

  command = (
    f"python -m experiments.train --config=experiments/configs/baselines.py:{setting} "
    f"--workdir=workdirs/baselines_{setting}"
  )
  return Table(
    f"baselines_{setting}",
    README,
    command,
    lambda workdir: render_rows(workdir, rows()),
    rows=rows,
    render_rows=render_rows,
  )


# ---------------------------------------------------------------------------------------------------------------
# The registry


def _train(config: str, workdir: str) -> str:
  return f"python -m experiments.train --config=experiments/configs/{config}.py --workdir=workdirs/{workdir}"


TABLES: tuple[Table, ...] = (
  Table("default3", README, DEFAULT3_COMMAND, render_default3),
  Table("memorisation", README, _train("memorisation", "memorisation"), render_memorisation),
  Table("relabel_ablation", README, _train("relabel_ablation", "relabel_ablation"), render_relabel_ablation),
  Table("lr_noise_grid", README, _train("lr_noise_grid", "lr_noise_grid"), render_lr_noise_grid),
  Table("pseudo_label_noise", README, _train("pseudo_label_noise", "pseudo_labels"), render_pseudo_label_noise),
  Table("log_end_sweep", README, _train("log_end_sweep", "log_end_sweep"), render_log_end_sweep),
  Table("q_sweep", README, _train("q_sweep", "q_sweep"), render_q_sweep),
  Table("k_sweep", README, _train("k_sweep", "k_sweep"), render_k_sweep),
  _baselines_table("sym60", baseline_rows("sym60"), "method"),
  _baselines_table("asym40", baseline_rows("asym40"), "method"),
  _baselines_table("losses_sym60", lambda: BASELINE_LOSS_RUNS, "loss"),
  _baselines_table("losses_asym40", lambda: BASELINE_LOSS_RUNS, "loss"),
  Table(
    "speed", README, BENCHMARKS_COMMAND, readme_benchmarks.render_speed, run="benchmarks", output_dir=BENCHMARKS_OUTDIR
  ),
  Table("loss_properties", README, "python -m experiments.loss_properties", render_loss_properties),
  Table(
    "benchmarks",
    BENCHMARKS_README,
    BENCHMARKS_COMMAND,
    readme_benchmarks.render_benchmarks,
    output_dir=BENCHMARKS_OUTDIR,
  ),
)


def by_name(names: Sequence[str] | None = None) -> list[Table]:
  """The tables named (all, in registry order, for None); ValueError naming an unknown name and the known ones."""
  if names is None:
    return list(TABLES)
  known = {t.name: t for t in TABLES}
  unknown = [n for n in names if n not in known]
  if unknown:
    raise ValueError(f"unknown table name(s) {unknown}; known: {', '.join(known)}.")
  return [known[n] for n in names]
