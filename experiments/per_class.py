r"""Per-class test accuracy of a run's (or a comparison's) exported networks: which classes a method gets wrong.

  python -m experiments.per_class --workdir=workdirs/baselines_asym40 --runs=forward_correction,ce
  python -m experiments.per_class --workdir=workdirs/ce_run                         # a single run's workdir

--workdir: a comparison's workdir (its RUN/seedS/model/WHICH exports) or one run's (WORKDIR/model/WHICH).
--runs: the comparison's runs to read (default: every run with an export). --which: 'final' or 'best_val'.
The test split is the dataset the export names (its run's config: dataset and dataset_kwargs), loaded as the run
loaded it. Prints one line per exported network: overall accuracy, accuracy of each class (its test examples
predicted as it), and the classes it never predicts.
"""

from __future__ import annotations

import os

from absl import app
from absl import flags
import numpy as np

from noisy_jax import data as data_lib
from noisy_jax.experiment import export


def exported_runs(workdir: str, runs=None, which: str = "final") -> list[tuple[str, str]]:
  """[(label, export directory)] under `workdir`: its own export, or RUN/seedS/model/WHICH of a comparison
  (sorted; `runs` restricts the RUN names, FileNotFoundError naming a run without any export)."""
  own = os.path.join(workdir, "model", which)
  if os.path.isdir(own) and not runs:
    return [(os.path.basename(os.path.normpath(workdir)), own)]
  if not os.path.isdir(workdir):
    raise FileNotFoundError(f"workdir {workdir!r} does not exist.")
  names = sorted(runs) if runs else sorted(n for n in os.listdir(workdir) if os.path.isdir(os.path.join(workdir, n)))
  found = []
  for name in names:
    run_dir = os.path.join(workdir, name)
    seeds = (
      sorted(s for s in os.listdir(run_dir) if os.path.isdir(os.path.join(run_dir, s, "model", which)))
      if os.path.isdir(run_dir)
      else []
    )
    if not seeds and runs:
      raise FileNotFoundError(f"run {name!r} has no exported network ({which!r}) under {run_dir!r}.")
    found += [(f"{name}/{seed}", os.path.join(run_dir, seed, "model", which)) for seed in seeds]
  if not found:
    raise FileNotFoundError(f"no exported network ({which!r}) under {workdir!r}.")
  return found


def per_class_accuracy(predicted, labels, num_classes: int) -> np.ndarray:
  """[C] the fraction of each class's examples predicted as that class (NaN for a class without examples)."""
  predicted, labels = np.asarray(predicted), np.asarray(labels)
  counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
  right = np.bincount(labels[predicted == labels], minlength=num_classes)
  with np.errstate(invalid="ignore", divide="ignore"):
    return np.where(counts > 0, right / counts, np.nan)


def test_split(model: export.LoadedModel):
  """(x_test, y_test) of the dataset the export's run trained on."""
  config = model.info["meta"]["config"]
  dataset = data_lib.load(config["dataset"], **dict(config.get("dataset_kwargs") or {}))
  return dataset.x_test, np.asarray(dataset.y_test)


def report(workdir: str, runs=None, which: str = "final") -> list[dict]:
  """One record per exported network: label, accuracy, per_class [C], never_predicted (class ids)."""
  out = []
  for label, directory in exported_runs(workdir, runs, which):
    model = export.load_model(directory)
    x, y = test_split(model)
    predicted = np.argmax(np.asarray(model.predict(x)), -1)
    c = int(model.info["num_classes"])
    out.append(
      {
        "label": label,
        "accuracy": float(np.mean(predicted == y)),
        "per_class": per_class_accuracy(predicted, y, c),
        "never_predicted": [k for k in range(c) if not np.any(predicted == k)],
      }
    )
  return out


def format_report(records: list[dict]) -> str:
  if not records:
    return ""
  c = len(records[0]["per_class"])
  width = max(len(r["label"]) for r in records)
  lines = [f"{'network':<{width}}  accuracy  " + " ".join(f"{k:>4}" for k in range(c)) + "  never predicted"]
  for r in records:
    classes = " ".join("   -" if np.isnan(a) else f"{100 * a:4.0f}" for a in r["per_class"])
    never = ", ".join(map(str, r["never_predicted"])) or "-"
    lines.append(f"{r['label']:<{width}}  {100 * r['accuracy']:7.2f}%  {classes}  {never}")
  return "\n".join(lines)


def main(argv):
  del argv
  runs = [r for r in flags.FLAGS.runs.split(",") if r] if flags.FLAGS.runs else None
  print(format_report(report(flags.FLAGS.workdir, runs, flags.FLAGS.which)))


if __name__ == "__main__":
  flags.DEFINE_string("workdir", None, "A comparison's workdir (RUN/seedS/model/WHICH) or one run's.")
  flags.DEFINE_string("runs", "", "Comma-separated runs of the comparison (default: all with an export).")
  flags.DEFINE_enum(
    "which", "final", list(export.WHICH), "Which exported network: the last epoch's or the best validation epoch's."
  )
  flags.mark_flag_as_required("workdir")
  app.run(main)
