"""What a run reports while it trains: a progress line with ETA, TensorBoard scalars and PNG curves.

Every training epoch produces one flat record (a dict; see `noisy_jax.train.loop.fit`). The consumers here read those
records and nothing else, so they work the same for one run, a two-stage Joint Optimization run or a comparison of
many runs and seeds:

  progress = Progress(total_epochs=60)         # log_fn for run_single: "... epoch 12/60  85 steps/s  ETA 0:41"
  writer = ScalarWriter(workdir)               # TensorBoard event file in workdir (experiment.tfevents)
  save_curves(history, "curves.png")           # matplotlib, headless

TensorBoard: `tensorboard --logdir WORKDIR`. Tags are "STAGE/METRIC" (e.g. "stage1/test_accuracy"); the step is
the epoch counted across stages, so stage 2 of Joint Optimization continues where stage 1 ended.
"""

from __future__ import annotations

import datetime
import math
import time
from typing import Callable, Sequence

from absl import logging

from noisy_jax.experiment import tfevents

# Record fields that are not per-epoch scalars worth plotting.
_NOT_SCALARS = ("stage", "epoch")


def format_duration(seconds: float) -> str:
  """H:MM:SS for a non-negative number of seconds ('?' when unknown)."""
  if not math.isfinite(seconds) or seconds < 0:
    return "?"
  return str(datetime.timedelta(seconds=int(round(seconds))))


class Progress:
  """A log_fn that logs one line per epoch: epoch i/n, step rate, metrics, elapsed time and ETA.

  The ETA is (wall time so far / epochs trained here) x epochs left, over every epoch this object has timed: it
  counts compilation and data loading at the rate they occurred, which is right for a comparison where each run
  compiles anew. `total_epochs` is the number of epochs of everything this object will see (all stages, runs and
  seeds). Epochs a resumed run restored from its checkpoint (`restored`) count as done, not as timed: a run resumed
  after epoch 40 of 70 shows [41/70] and the ETA of 29 epochs at the rate of the ones it trains.
  """

  def __init__(self, total_epochs: int, *, prefix: str = "", emit: Callable[[str], None] = logging.info):
    if total_epochs < 1:
      raise ValueError(f"total_epochs={total_epochs} must be >= 1.")
    self.total_epochs = int(total_epochs)
    self.prefix = prefix
    self.done = 0  # epochs accounted for: trained here and restored
    self.trained = 0  # epochs trained (and timed) by this object
    self._emit = emit
    self._start = time.perf_counter()

  def eta_seconds(self) -> float:
    if self.trained == 0:
      return float("nan")
    elapsed = time.perf_counter() - self._start
    return elapsed / self.trained * max(self.total_epochs - self.done, 0)

  def restored(self, records: Sequence[dict]) -> None:
    """Counts the epochs of `records` (restored from a checkpoint, not trained here) as done; logs nothing."""
    self.done += len(records)

  def line(self, record: dict) -> str:
    """The progress line for `record` (does not count it as done)."""
    parts = [
      f"{self.prefix} {record.get('stage', '')} epoch {record['epoch']:3d}".strip(),
      f"[{self.done}/{self.total_epochs}]",
    ]
    if "steps_per_second" in record:
      parts.append(f"{record['steps_per_second']:.1f} steps/s")
    parts.append(f"loss {record['train_loss']:.4f}")
    for key, label in (
      ("test_accuracy", "test"),
      ("val_accuracy", "val"),
      ("memorised_fraction", "memorised"),
      ("label_recovery_overall", "recovery"),
      ("pruned_fraction", "pruned"),
    ):
      if key in record:
        parts.append(f"{label} {record[key]:.2%}")
    elapsed = time.perf_counter() - self._start
    parts.append(f"elapsed {format_duration(elapsed)}  ETA {format_duration(self.eta_seconds())}")
    return "  ".join(parts)

  def tick(self, count: int = 1) -> None:
    """Counts `count` epochs trained here as done, without a line (a caller that logs its own)."""
    self.done += count
    self.trained += count

  def __call__(self, record: dict) -> None:
    self.tick()
    self._emit(self.line(record))


def scalars(record: dict) -> dict[str, float]:
  """The numeric fields of a record (bools and strings left out)."""
  return {
    k: float(v)
    for k, v in record.items()
    if k not in _NOT_SCALARS and isinstance(v, (int, float)) and not isinstance(v, bool)
  }


class ScalarWriter:
  """Writes each record's scalars as TensorBoard summaries under `logdir` (tags 'STAGE/METRIC').

  The step is the number of records written so far (1-based): the epoch counted across stages.
  """

  def __init__(self, logdir: str):
    self._writer = tfevents.EventFileWriter(logdir)
    self.step = 0

  def write(self, record: dict) -> None:
    self.step += 1
    stage = record.get("stage") or "train"
    self._writer.write(self.step, {f"{stage}/{key}": value for key, value in scalars(record).items()})

  def close(self) -> None:
    self._writer.close()


# Curves drawn by save_curves: (panel title, record keys). A panel is drawn when any of its keys is present.
CURVE_PANELS = (
  ("accuracy", ("test_accuracy", "val_accuracy", "train_accuracy_given")),
  ("training loss", ("train_loss",)),
  (
    "training split vs clean and given labels",
    (
      "train_accuracy_given_labels",
      "train_accuracy_on_clean_examples",
      "memorised_fraction",
      "train_accuracy_true_on_noisy_examples",
    ),
  ),
  ("label table", ("label_recovery_overall", "label_recovery_on_noisy", "relabelled_fraction", "pruned_fraction")),
)


def _pyplot():
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError('plots need matplotlib: pip install "noisy_jax[report]"') from e
  matplotlib.use("Agg", force=False)
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  return plt


def save_curves(history: Sequence[dict], path: str, *, title: str = "") -> str:
  """Saves per-epoch curves of one run (all its stages) as a PNG at `path`; returns `path`.

  The x axis is the epoch counted across stages; a dotted vertical line marks where a new stage starts.
  """
  if not history:
    raise ValueError("history is empty: nothing to plot.")
  plt = _pyplot()
  panels = [(name, [k for k in keys if any(k in r for r in history)]) for name, keys in CURVE_PANELS]
  panels = [(name, keys) for name, keys in panels if keys]
  fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
  steps = list(range(1, len(history) + 1))
  stage_starts = [i + 1 for i in range(1, len(history)) if history[i].get("stage") != history[i - 1].get("stage")]
  for ax, (name, keys) in zip(axes[0], panels):
    for key in keys:
      xs = [x for x, r in zip(steps, history) if key in r]
      ax.plot(xs, [history[x - 1][key] for x in xs], label=key.replace("_", " "))
    for start in stage_starts:
      ax.axvline(start - 0.5, color="grey", linestyle=":", linewidth=1)
    ax.set_title(name)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("epoch (all stages)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
  if title:
    fig.suptitle(title)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def save_comparison(
  curves: dict[str, Sequence[dict]], path: str, *, key: str = "test_accuracy", title: str = ""
) -> str:
  """One line per run name (e.g. per method, first seed) of `key` against the epoch; saved as a PNG."""
  if not curves:
    raise ValueError("no curves to plot.")
  plt = _pyplot()
  fig, ax = plt.subplots(figsize=(6.5, 4.0))
  for name, history in curves.items():
    xs = [i + 1 for i, r in enumerate(history) if key in r]
    ax.plot(xs, [history[x - 1][key] for x in xs], label=name)
  ax.xaxis.get_major_locator().set_params(integer=True)
  ax.set_xlabel("epoch (all stages)")
  ax.set_ylabel(key.replace("_", " "))
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  ax.set_title(title or key.replace("_", " "))
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path
