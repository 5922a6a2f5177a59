"""Label issues of mnist5k from frozen features of a network that never saw mnist, beside label_issues_vs_cleanlab.

The same planted errors as experiments/benchmarks/label_issues_vs_cleanlab.py (its settings, seed, key split and
noise code, so the given labels are the same arrays; the JSON line records each setting's count and the noise
report's sha256), detected without training on mnist5k at all:

  features   a SmallCNN (the ce config's widths, a 128-unit dense layer before the head) trained with cross entropy
             for E epochs (default 20, SGD as the ce config) on scikit-learn's 8x8 digits (1,797 images, their own
             clean labels; another data set: scanned digits of 43 people, not NIST's), each upsampled to 20x20
             (bilinear) and zero-padded to 28x28 as MNIST centres its digits, codes 0..16 scaled to 0..255; trained
             through runs.run_single and its export (noisy_jax.experiment.export); the embedding of mnist5k's
             3,600 training images is `LoadedModel.embed` (the 128 inputs of the head, digits' normalisation).
  pixels     the raw 784 pixel codes / 255, as a control: what the detectors get from no network.
Detectors (noisy_jax.experiment.feature_issues.find, score 'self_confidence'): 'probe' (5-fold out-of-sample
logistic regression on standardised features; scikit-learn's BLAS/OpenMP pools at --probe_threads, default 1 as the
probe's own), 'knn' (cosine kNN vote, k = 10, self excluded), 'ni_erm' (NI-ERM's linear head in JAX, 5-fold
out of sample on the same folds: raw features, L-BFGS, 100 iterations, C = 1, noisy_jax.experiment.ni_erm's
defaults), 'ni_erm_grid' (the same head with C and the iterations chosen as NI-ERM's code chooses them:
noisy_jax.experiment.ni_erm_grid.search over its grid, C in {1e-4, ..., 100} x {10, 20, 50, 100} iterations, 5
unshuffled folds of the given labels; then 5-fold out of sample as 'ni_erm') and 'wann' (WANN's reliability-weighted
vote, k in [11, 51], leave one out); each flagged set by both rules of
noisy_jax.core.label_issues on the same P: 'argmax' (another class more probable) and 'confident' (confident
learning's per-class thresholds, as cleanlab's find_label_issues(filter_by='confident_learning')). Metrics:
label_issues_vs_cleanlab._metrics (flagged, precision, recall and F1 of each flagged set, AP and AUROC of the
ranking). Wall seconds: the digits network's training (once, compilation included), the embedding (once), each
detector (per setting: P and the argmax rule's records; the confident rule on the same P adds milliseconds).

  python -m experiments.benchmarks.label_issues_from_frozen_features [--epochs 20] [--settings sym20,...]
      [--probe_threads 1]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time

from experiments.benchmarks import common
from experiments.benchmarks import label_issues_vs_cleanlab as vs_cleanlab

FEATURE_DENSE_SIZE = 128
DIGITS_EPOCHS = 20
DETECTORS = ("probe", "knn", "ni_erm", "ni_erm_grid", "wann")
SCORE, RULE = "self_confidence", "argmax"
RULES = ("argmax", "confident")


def digits_as_mnist():
  """scikit-learn's digits as MNIST-like uint8 images [1797, 28, 28, 1] and their labels [1797]."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from sklearn import datasets  # pylint: disable=g-import-not-at-top

  digits = datasets.load_digits()
  small = np.asarray(digits.images, np.float32)[..., None] / 16.0  # [N, 8, 8, 1] in [0, 1]
  up = np.asarray(jax.image.resize(small, (len(small), 20, 20, 1), "bilinear"))
  images = np.zeros((len(small), 28, 28, 1), np.uint8)
  images[:, 4:24, 4:24] = np.clip(np.round(up * 255.0), 0, 255).astype(np.uint8)
  return images, np.asarray(digits.target, np.int64)


def train_feature_network(workdir: str, *, epochs: int, seed: int) -> float:
  """Trains the digits SmallCNN (module docstring) into `workdir` (its export: WORKDIR/model/final); seconds."""
  from experiments.configs import ce  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import arrays  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import runs  # pylint: disable=g-import-not-at-top

  images, labels = digits_as_mnist()
  dataset = arrays.from_arrays(
    images, labels, None, None, validation_size=0.1, seed=seed, name="digits_28x28", pixel_max=255.0
  )
  config = ce.get_config()
  config.seed = seed
  config.noise.type = "none"
  config.noise.rate = 0.0
  config.num_epochs = epochs
  config.optimizer.lr_boundaries = vs_cleanlab._scaled_boundaries(  # pylint: disable=protected-access
    config.optimizer.lr_boundaries, epochs, int(ce.get_config().num_epochs)
  )
  config.model.kwargs = {"dense_size": FEATURE_DENSE_SIZE}
  config.checkpoint_every = 0
  start = time.perf_counter()
  summary = runs.run_single(config, workdir, dataset=dataset)
  seconds = time.perf_counter() - start
  accuracy = summary["history"][-1]["val_accuracy"]
  print(f"digits network: {seconds:.1f} s, validation accuracy {accuracy:.3f}", flush=True)
  return seconds


def given_labels(setting: str, *, epochs: int, seed: int):
  """(mnist5k training dataset, given labels [N], clean labels [N], noise report) of label_issues_vs_cleanlab."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from noisy_jax.experiment import inputs  # pylint: disable=g-import-not-at-top

  ce_config, _ = vs_cleanlab._configs(setting, epochs, seed)  # pylint: disable=protected-access
  full = inputs.load_dataset(ce_config)
  dataset = dataclasses.replace(
    full, x_val=full.x_train[:0], y_val=full.y_train[:0], x_test=full.x_train[:0], y_test=full.y_train[:0]
  )
  _, noise_key, _ = jax.random.split(jax.random.PRNGKey(seed), 3)  # as that benchmark and runs.run_single split
  given, report = inputs.noisy_training_labels(ce_config, dataset, noise_key)
  return dataset, np.asarray(given, np.int64), np.asarray(dataset.y_train, np.int64), report


def detect(x, given, detector: str, *, seed: int, probe_threads: int | None):
  """(P, issues, chosen) of one detector on features x and given labels; chosen: ni_erm_grid's {C, epochs}, else
  None. The grid search's seconds count with the detector's."""
  from noisy_jax.experiment import feature_issues  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import ni_erm_grid  # pylint: disable=g-import-not-at-top

  settings = {"num_classes": 10, "seed": seed, "score": SCORE, "rule": RULE, "threads": probe_threads}
  if detector != "ni_erm_grid":
    return (*feature_issues.find(x, given, method=detector, **settings), None)
  chosen = ni_erm_grid.search(x, given, seed=seed).best
  probs, issues = feature_issues.find(
    x,
    given,
    method="ni_erm",
    inverse_regularization=chosen["inverse_regularization"],
    ni_erm_options={"epochs": chosen["epochs"]},
    **settings,
  )
  return probs, issues, chosen


def run(settings, *, epochs: int, seed: int, probe_threads: int | None = 1) -> tuple[dict, dict]:
  """(results per setting, costs): metrics of each (features, detector) and the wall seconds of each part."""
  from noisy_jax.core import label_issues  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import export  # pylint: disable=g-import-not-at-top

  costs = {}
  with tempfile.TemporaryDirectory(prefix="frozen_features_") as workdir:
    costs["digits_training_seconds"] = train_feature_network(workdir, epochs=epochs, seed=seed)
    loaded = export.load_model(workdir)
    dataset, _, _, _ = given_labels(settings[0], epochs=epochs, seed=seed)
    start = time.perf_counter()
    embedded = loaded.embed(dataset.x_train)
    costs["embedding_seconds"] = time.perf_counter() - start
  features = {"digits_cnn": embedded, "pixels": dataset.x_train.reshape(len(dataset.x_train), -1) / 255.0}
  print(f"embedding: {embedded.shape} in {costs['embedding_seconds']:.1f} s", flush=True)
  results = {}
  for setting in settings:
    _, given, clean, report = given_labels(setting, epochs=epochs, seed=seed)
    planted = given != clean
    out = {"noise": {"planted_errors": int(planted.sum()), "sha256": report["sha256"]}, "detectors": {}}
    for source, x in features.items():
      for detector in DETECTORS:
        start = time.perf_counter()
        probs, issues, chosen = detect(x, given, detector, seed=seed, probe_threads=probe_threads)
        seconds = time.perf_counter() - start
        found = {
          "quality": {SCORE: vs_cleanlab._quality_by_index(issues)},  # pylint: disable=protected-access
          "flags": {
            RULE: vs_cleanlab._flags_by_index(issues),  # pylint: disable=protected-access
            "confident": label_issues.flag(probs, given, rule="confident"),  # by index, as the flags above
          },
        }
        metrics = vs_cleanlab._metrics(found, planted, clean, given, probs)  # pylint: disable=protected-access
        metrics["seconds"] = seconds
        if chosen is not None:
          metrics["chosen"] = chosen
        out["detectors"][f"{source}_{detector}"] = metrics
        flagged = metrics["flagged"]
        print(
          f"[{setting}] {source} {detector}: F1 {flagged['argmax']['f1']:.3f} (argmax), "
          f"{flagged['confident']['f1']:.3f} (confident), AP {metrics['ranking'][SCORE]['average_precision']:.3f}, "
          f"{seconds:.2f} s" + (f", chose {chosen}" if chosen else ""),
          flush=True,
        )
    results[setting] = out
  return results, costs


def _table(results) -> str:
  rows = []
  for setting, out in results.items():
    for name, metrics in out["detectors"].items():
      ranking = metrics["ranking"][SCORE]
      by_rule = [
        f"{flagged[key]:{spec}}"
        for flagged in (metrics["flagged"][rule] for rule in RULES)
        for key, spec in (("flagged", "d"), ("precision", ".3f"), ("recall", ".3f"), ("f1", ".3f"))
      ]
      rows.append(
        [
          setting,
          out["noise"]["planted_errors"],
          name,
          *by_rule,
          f"{ranking['auroc']:.3f}",
          f"{ranking['average_precision']:.3f}",
          f"{metrics['seconds']:.2f}",
        ]
      )
  short = {"argmax": "argmax", "confident": "conf"}
  by_rule = [f"{short[rule]}_{key}" for rule in RULES for key in ("flagged", "precision", "recall", "F1")]
  header = ["setting", "planted", "features_detector", *by_rule, "AUROC", "AP", "seconds"]
  return common.format_table(header, rows)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--epochs", type=int, default=DIGITS_EPOCHS, help="epochs of the digits network")
  parser.add_argument("--settings", default=",".join(vs_cleanlab.SETTINGS), help="comma-separated subset")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--threads", type=int, default=0, help="cores for JAX (default 0: every core)")
  parser.add_argument(
    "--probe_threads", type=int, default=1, help="the probe's BLAS/OpenMP threads (default 1; 0: the libraries' own)"
  )
  args = parser.parse_args(argv)
  settings = [s.strip() for s in args.settings.split(",") if s.strip()]
  unknown = sorted(set(settings) - set(vs_cleanlab.SETTINGS))
  if unknown or not settings:
    parser.error(f"--settings: unknown {unknown}; choose from {','.join(vs_cleanlab.SETTINGS)}")
  threads = common.configure_threads(args.threads, with_torch=False)
  args.repeats, args.warmup, args.quick = 1, 0, False
  start = time.perf_counter()
  # The noisy labels are those of label_issues_vs_cleanlab at its default E (its noise does not depend on E).
  probe_threads = args.probe_threads or None
  results, costs = run(settings, epochs=args.epochs, seed=args.seed, probe_threads=probe_threads)
  costs["total_seconds"] = time.perf_counter() - start
  common.report(
    "label_issues_from_frozen_features",
    args=args,
    threads=threads,
    settings={
      "digits_epochs": args.epochs,
      "seed": args.seed,
      "score": SCORE,
      "rules": list(RULES),
      "probe_threads": probe_threads or "libraries' default",
      **costs,
    },
    results=results,
    tables=[_table(results)],
    notes=[
      "planted errors = given label != clean label, as label_issues_vs_cleanlab plants them.",
      "argmax_* / conf_*: the flagged set of the 'argmax' / 'confident' rule (noisy_jax.core.label_issues).",
    ],
  )


if __name__ == "__main__":
  main()
