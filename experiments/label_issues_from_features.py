r"""Label issues from frozen features: embeddings and given labels -> WORKDIR/label_issues.csv, no network trained.

  python -m experiments.label_issues_from_features --features=F.npy --labels=L.npy --workdir=OUT
  python -m experiments.label_issues_from_features --features=F.npy --labels=L.npy --workdir=OUT --method=knn --k=10
  python -m experiments.label_issues_from_features --features=F.npy --labels=L.npy --workdir=OUT --method=ni_erm
  python -m experiments.label_issues_from_features --features=F.npy --labels=L.npy --workdir=OUT --method=wann
  python -m experiments.label_issues_from_features --images=DIR --model=RUN_WORKDIR --workdir=OUT
  python -m experiments.label_issues_from_features --embeddings=EMBED_WORKDIR --method=ni_erm --workdir=OUT
  python -m experiments.label_issues_from_features --embeddings=EMBED_WORKDIR --method=ni_erm --ni_erm_grid_search \
      --workdir=OUT

--features: an .npy array X [N, D] (one embedding per example, finite real numbers), e.g. the penultimate layer of a
  pretrained network or of another run's exported network. --labels: an .npy array y [N] of integer class ids.
--method: 'probe', a --num_folds-fold out-of-sample linear probe (standardised features, multinomial logistic
  regression with L2 strength 1 / --inverse_regularization), or 'knn', a vote of each example's --k nearest
  neighbours by cosine similarity, itself excluded (SimiFeat's vote), or 'ni_erm', NI-ERM's head (JAX/optax; a
  linear head by default, --ni_erm_hidden_sizes for an MLP) fitted with cross entropy to the labels as given, out of
  sample over the probe's --num_folds folds (--inverse_regularization, --ni_erm_optimizer, --ni_erm_epochs,
  --ni_erm_learning_rate, --ni_erm_batch_size, --ni_erm_standardize; --ni_erm_grid_search: C and the epochs chosen
  as the NI-ERM code chooses them, by cross-validated accuracy on the labels as given over its grid, C in
  {1e-4, ..., 100} x epochs in {10, 20, 50, 100}, --num_folds unshuffled stratified folds, scikit-learn
  GridSearchCV's rule (noisy_jax.experiment.ni_erm_grid); every candidate's fold accuracies in
  WORKDIR/ni_erm_grid.csv), or 'wann', WANN's reliability-weighted vote
  with adaptive k in [--kmin, --kmax], leave one out: noisy_jax.experiment.feature_issues has the formulas and
  references. Then the label quality (--score), suggested label and flag rule (--rule) of
  noisy_jax.core.label_issues, as after a training run.
--images, --model (instead of --features and --labels): a folder DIR/LABEL/... of image files (every .png / .jpg /
  .jpeg under each class folder, recursively, hidden names skipped; class ids: the sorted LABEL names, integers as
  integers) embedded by a noisy_jax run's exported network (--model: the run's workdir or an export directory;
  export.LoadedModel.embed: the inputs of its classifier head, the images decoded and normalised as that run's
  loader did). Sources are the paths relative to DIR and class names the LABEL names.
--embeddings (instead of the above): the workdir of `python -m experiments.embed` on a folder DIR/LABEL/...: its
  embeddings, the class ids and names of its class folders, its file paths as sources (files that could not be
  decoded left out).
--sources: a text file with one line per example (its file path or record id) for the CSV's source column; default
  the example's index. --class_names: the C class names, comma-separated or a text file with one per line; the CSV
  then writes labels as names (default: class ids, C = the largest label + 1).
Output: WORKDIR/label_issues.csv with the columns of a training run's (label_issues.CSV_COLUMNS), most suspect first,
the detector named in method_evidence ('linear probe, 5-fold out of sample' / 'kNN vote, k=10'); written atomically
(a temporary file renamed at the end), and only after every input has been checked: a bad input stops with an error
that names the flag, the file and the value, and writes nothing. Prints N, C, the number flagged and the wall time
(reading the inputs, the detector and writing the CSV).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import time

from absl import app
from absl import flags
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import atomic_files
from noisy_jax.core import errors
from noisy_jax.core import label_issues
from noisy_jax.experiment import feature_issues

GRID_CSV = "ni_erm_grid.csv"

# experiments.predict, noisy_jax.data.disk and noisy_jax.experiment.export (JAX, Flax, orbax: ~2 s to import) are
# imported by `embed_folder` only: --features needs none of them (tests/test_feature_issues.py checks it).


@dataclasses.dataclass(frozen=True)
class Summary:
  """What a call of `run` did: the CSV written, N, C, D, the detector, how many examples it flagged, wall seconds."""

  csv_path: str
  num_examples: int
  num_classes: int
  num_features: int
  evidence: str
  num_flagged: int
  seconds: float


def load_array(path: str, flag: str) -> np.ndarray:
  """The array of the .npy file at `path`; FileNotFoundError or ValueError naming `--flag=path` when it is missing or
  holds anything else (an .npz archive, pickled objects, text)."""
  if not os.path.isfile(path):
    raise errors.MissingInputError(f"--{flag}={path!r}: no such file (an .npy array is expected).")
  try:
    loaded = np.load(path, allow_pickle=False)
  except (ValueError, OSError) as error:
    raise errors.InputError(f"--{flag}={path!r} is not a NumPy .npy array of numbers ({error}).") from error
  if not isinstance(loaded, np.ndarray):
    loaded.close()
    raise errors.InputError(f"--{flag}={path!r} is an .npz archive; give one array saved with np.save (.npy).")
  return loaded


def read_lines(path: str, flag: str) -> list[str]:
  """The lines of a UTF-8 text file (line ends removed); FileNotFoundError naming `--flag=path`."""
  if not os.path.isfile(path):
    raise errors.MissingInputError(
      f"--{flag}={path!r}: no such file (a text file with one entry per line is expected)."
    )
  with open(path, encoding="utf-8") as f:
    return f.read().splitlines()


def parse_class_names(value: str | None) -> list[str] | None:
  """--class_names: None when empty; the lines of the file it names; else its comma-separated names."""
  if not value:
    return None
  names = read_lines(value, "class_names") if os.path.isfile(value) else [name.strip() for name in value.split(",")]
  if not names or any(not name for name in names):
    raise errors.InputError(f"--class_names={value!r} holds an empty name; every class needs one.")
  repeated = sorted({name for name in names if names.count(name) > 1})
  if repeated:
    raise errors.InputError(f"--class_names={value!r} names {repeated} more than once; every class needs its own name.")
  return names


def check_method_settings(
  method: str,
  labels: np.ndarray,
  *,
  num_folds: int,
  k: int,
  class_names=None,
  kmin: int = feature_issues.DEFAULT_KMIN,
  kmax: int = feature_issues.DEFAULT_KMAX,
  **ni_erm,
) -> None:
  """ValueError naming the flag unless the method can run on these labels: the probe and NI-ERM need 2 <= --num_folds
  <= the examples of the smallest class (so that every training fold holds every class), the kNN vote
  1 <= --k <= N - 1, WANN 1 <= --kmin <= --kmax <= N - 2; NI-ERM's L-BFGS a full batch (`ni_erm`: the options of
  `ni_erm_options`)."""
  n = len(labels)
  if method == "knn":
    if not 1 <= k <= n - 1:
      raise errors.InputError(
        f"--k={k}; allowed: 1 <= k <= N - 1 = {n - 1} (N = {n} examples; none is its own neighbour)."
      )
    return
  if method == "wann":
    if not 1 <= kmin <= kmax <= n - 2:
      raise errors.InputError(
        f"--kmin={kmin}, --kmax={kmax}; allowed: 1 <= kmin <= kmax <= N - 2 = {n - 2} (N = {n} examples; WANN "
        "left one out needs kmax + 1 neighbours besides the example)."
      )
    return
  if method == "ni_erm" and ni_erm.get("optimizer", "lbfgs") == "lbfgs" and ni_erm.get("batch_size", n) < n:
    raise errors.InputError(
      f"--ni_erm_batch_size={ni_erm['batch_size']} with --ni_erm_optimizer=lbfgs; L-BFGS takes the full batch "
      "(--ni_erm_batch_size=0); use --ni_erm_optimizer=sgd or adam for minibatches."
    )
  check_folds(labels, num_folds, class_names)


def check_folds(labels: np.ndarray, num_folds: int, class_names=None) -> None:
  """ValueError naming --num_folds unless 2 <= --num_folds <= the examples of the smallest class."""
  counts = np.bincount(labels)
  present = np.flatnonzero(counts)
  smallest = int(present[np.argmin(counts[present])])
  fewest = int(counts[smallest])
  name = f"class {smallest}" + (f" ({class_names[smallest]!r})" if class_names is not None else "")
  if not 2 <= num_folds <= fewest:
    allowed = (
      f"allowed: 2 <= num_folds <= {fewest}, or --method=knn"
      if fewest >= 2
      else "no number of folds can both hold it out and train on it; use --method=knn"
    )
    raise errors.InputError(
      f"--num_folds={num_folds}, with {fewest} example(s) of {name}, the smallest class: each fold must hold "
      f"examples out and keep some of every class to train on (a training fold without a class scores its examples "
      f"0); {allowed}."
    )


def ni_erm_options(
  *,
  optimizer: str = "lbfgs",
  epochs: int = feature_issues.NI_ERM_DEFAULT_EPOCHS,
  learning_rate: float = 0.0,
  batch_size: int = 0,
  hidden_sizes: str = "",
  standardize: bool = False,
) -> dict:
  """NI-ERM's --ni_erm_* flags as ni_erm.fit's keyword arguments (learning_rate 0: the optimiser's default,
  batch_size 0: the full batch, hidden_sizes: comma-separated widths, '' for the linear head); ValueError naming
  the flag of a bad value."""
  _checks.check_choice("--ni_erm_optimizer", optimizer, feature_issues.NI_ERM_OPTIMIZERS)
  if epochs < 1:
    raise errors.InputError(f"--ni_erm_epochs={epochs}; allowed: >= 1.")
  if not learning_rate >= 0:
    raise errors.InputError(f"--ni_erm_learning_rate={learning_rate}; allowed: > 0, or 0 (the optimiser's default).")
  if batch_size < 0:
    raise errors.InputError(f"--ni_erm_batch_size={batch_size}; allowed: >= 1, or 0 (the full batch).")
  try:
    widths = tuple(int(w) for w in hidden_sizes.split(",") if w.strip()) if hidden_sizes else ()
  except ValueError:
    widths = (0,)
  if any(w < 1 for w in widths):
    raise errors.InputError(
      f"--ni_erm_hidden_sizes={hidden_sizes!r}; allowed: comma-separated widths >= 1 (e.g. 256,128), or '' (linear)."
    )
  options = {"optimizer": optimizer, "epochs": int(epochs), "hidden_sizes": widths, "standardize": bool(standardize)}
  if learning_rate:
    options["learning_rate"] = float(learning_rate)
  if batch_size:
    options["batch_size"] = int(batch_size)
  return options


def embed_folder(images: str, model: str) -> tuple[np.ndarray, np.ndarray, list[str], tuple[str, ...]]:
  """(embeddings [N, D], class ids [N], paths relative to `images`, class names) of the folder images/LABEL/...,
  embedded by the exported network at `model` (see the module docstring).

  Raises:
    FileNotFoundError: naming --images or --model when it does not exist (or holds no exported model).
    ValueError: an image file outside a class folder, a folder without images, images the network cannot take.
  """
  from experiments import predict as predict_cli  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import disk  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import export  # pylint: disable=g-import-not-at-top

  if not os.path.isdir(images):
    raise errors.MissingInputError(f"--images={images!r}: no such folder (a folder DIR/LABEL/... of image files).")
  loaded = export.load_model(model)
  paths, files = predict_cli.read_folder(images, loaded)
  loose = [p for p in paths if os.sep not in p]
  if loose:
    raise errors.InputError(
      f"--images={images!r}: {os.path.join(images, loose[0])} is not inside a class folder; the layout is "
      "DIR/LABEL/FILE, the LABEL folder naming the file's given class."
    )
  given = [p.split(os.sep, 1)[0] for p in paths]
  names = disk.class_order(given)
  ids = {name: i for i, name in enumerate(names)}
  return loaded.embed(files), np.asarray([ids[g] for g in given], np.int64), paths, names


def read_inputs(
  features_path: str | None,
  labels_path: str | None,
  *,
  class_names: str | None = None,
  images: str | None = None,
  model: str | None = None,
  embeddings: str | None = None,
):
  """(features, labels, sources or None, class names or None, the flags to name in errors for the features, labels
  and class count) from exactly one of: --features and --labels, --images and --model, --embeddings.

  Raises:
    errors.InputError: naming the flags when none or more than one of those inputs is given, or --class_names with
      an input that names its classes itself.
  """
  given = {"arrays": bool(features_path or labels_path), "folder": bool(images or model), "store": bool(embeddings)}
  if sum(given.values()) != 1 or (given["folder"] and not (images and model)):
    raise errors.InputError(
      "give one of --features and --labels (arrays), --images and --model (a folder embedded by a run's network) "
      f"or --embeddings (a store of python -m experiments.embed); got --features={features_path!r}, "
      f"--labels={labels_path!r}, --images={images!r}, --model={model!r}, --embeddings={embeddings!r}."
    )
  if given["arrays"]:
    names = parse_class_names(class_names)
    where = (
      f"--features={features_path!r}",
      f"--labels={labels_path!r}",
      "num_classes" if names is None else f"--class_names ({len(names)} names)",
    )
    return load_array(features_path, "features"), load_array(labels_path, "labels"), None, names, where
  if class_names:
    raise errors.InputError("--images and --embeddings take their class names from the folder: drop --class_names.")
  if given["folder"]:
    features, labels, sources, names = embed_folder(images, model)
    return (
      features,
      labels,
      sources,
      names,
      (f"--images={images!r}",) * 2 + (f"--images={images!r} ({len(names)} class folders)",),
    )
  return read_store(embeddings)


def read_store(embeddings: str):
  """read_inputs's tuple from an embedding store (experiments.embed's workdir): its embeddings, the class ids of its
  folder layout, its files as sources and its class names; rows of files that could not be decoded left out.

  Raises:
    errors.InputError: naming --embeddings when the store is incomplete or its images had no class folders.
  """
  from noisy_jax.experiment import embedding_store  # pylint: disable=g-import-not-at-top

  features, labels, files, names = embedding_store.read(embeddings)
  if labels is None:
    raise errors.InputError(
      f"--embeddings={embeddings!r}: the embedded images had no class folders (DIR/LABEL/...), so there are no "
      "given labels to check; embed a folder laid out by class."
    )
  flag = f"--embeddings={embeddings!r}"
  return features, labels, list(files), list(names), (flag, flag, f"{flag} ({len(names)} classes)")


def run(
  features_path: str | None,
  labels_path: str | None,
  workdir: str,
  *,
  method: str = "probe",
  num_folds: int = feature_issues.DEFAULT_NUM_FOLDS,
  k: int = feature_issues.DEFAULT_K,
  seed: int = 0,
  inverse_regularization: float = feature_issues.DEFAULT_INVERSE_REGULARIZATION,
  score: str = "self_confidence",
  rule: str = "argmax",
  sources_path: str | None = None,
  class_names: str | None = None,
  images: str | None = None,
  model: str | None = None,
  kmin: int = feature_issues.DEFAULT_KMIN,
  kmax: int = feature_issues.DEFAULT_KMAX,
  ni_erm: dict | None = None,
  embeddings: str | None = None,
  ni_erm_grid_search: bool = False,
) -> Summary:
  """Checks every input, computes P and the label issues (feature_issues.find) and writes
  WORKDIR/label_issues.csv. Arguments as the flags of the same names (class_names: the flag's string; ni_erm: the
  --ni_erm_* flags as `ni_erm_options` returns them, None: their defaults); either features_path and labels_path, or
  images and model. Raises FileNotFoundError or ValueError naming the flag and value before anything is written."""
  start = time.perf_counter()
  _checks.check_choice("--method", method, feature_issues.METHODS)
  _checks.check_choice("--score", score, label_issues.SCORES)
  _checks.check_choice("--rule", rule, label_issues.FLAG_RULES)
  if ni_erm_grid_search and method != "ni_erm":
    raise errors.InputError(
      f"--ni_erm_grid_search with --method={method}; the grid search chooses NI-ERM's C and epochs: use "
      "--method=ni_erm."
    )
  if not inverse_regularization > 0:
    raise errors.InputError(f"--inverse_regularization={inverse_regularization}; allowed: > 0.")
  if sources_path and (images or model or embeddings):
    raise errors.InputError("--images and --embeddings take their sources from the files: drop --sources.")
  raw_features, raw_labels, sources, names, where = read_inputs(
    features_path, labels_path, class_names=class_names, images=images, model=model, embeddings=embeddings
  )
  features, labels, num_classes = feature_issues.check_inputs(
    raw_features,
    raw_labels,
    None if names is None else len(names),
    features_name=where[0],
    labels_name=where[1],
    num_classes_name=where[2],
  )
  if sources_path:
    sources = read_lines(sources_path, "sources")
    if len(sources) != len(labels):
      raise errors.InputError(
        f"--sources={sources_path!r} has {len(sources)} lines for {len(labels)} examples; one line per example."
      )
  ni_erm = ni_erm_options() if ni_erm is None else ni_erm
  check_method_settings(method, labels, num_folds=num_folds, k=k, class_names=names, kmin=kmin, kmax=kmax, **ni_erm)
  evidence = feature_issues.method_evidence(
    method, num_folds=num_folds, k=k, kmin=kmin, kmax=kmax, hidden_sizes=ni_erm["hidden_sizes"]
  )
  grid = None
  if ni_erm_grid_search:
    grid = search_ni_erm_grid(features, labels, num_folds=num_folds, seed=seed, ni_erm=ni_erm)
    inverse_regularization, ni_erm = grid.best["inverse_regularization"], {**ni_erm, "epochs": grid.best["epochs"]}
    evidence += f" (C {inverse_regularization:g}, {ni_erm['epochs']} epochs by {num_folds}-fold grid search)"
  _, issues = feature_issues.find(
    features,
    labels,
    method=method,
    num_classes=num_classes,
    num_folds=num_folds,
    k=k,
    seed=seed,
    inverse_regularization=inverse_regularization,
    score=score,
    rule=rule,
    kmin=kmin,
    kmax=kmax,
    ni_erm_options=ni_erm,
    evidence=evidence,
  )
  csv_path = label_issues.write_csv(
    os.path.join(workdir, label_issues.CSV_FILE), issues, sources=sources, class_names=names
  )
  if grid is not None:
    write_grid_csv(os.path.join(workdir, GRID_CSV), grid)
  return Summary(
    csv_path=csv_path,
    num_examples=len(labels),
    num_classes=num_classes,
    num_features=features.shape[1],
    evidence=evidence,
    num_flagged=int(issues.records["is_issue"].sum()),
    seconds=time.perf_counter() - start,
  )


def search_ni_erm_grid(features, labels, *, num_folds: int, seed: int, ni_erm: dict):
  """ni_erm_grid.search over the NI-ERM code's grid with --num_folds folds and the other --ni_erm_* settings
  (`ni_erm`, as `ni_erm_options` returns them; its epochs are the grid's)."""
  from noisy_jax.experiment import ni_erm_grid  # pylint: disable=g-import-not-at-top  (JAX: imported when it runs)

  settings = {name: value for name, value in ni_erm.items() if name != "epochs"}
  return ni_erm_grid.search(features, labels, num_folds=num_folds, seed=seed, **settings)


def write_grid_csv(path: str, grid) -> None:
  """The grid's rows (ni_erm_grid.GridResult.rows: C, epochs, each fold's accuracy, mean, std, rank), atomically."""
  rows = grid.rows()
  text = io.StringIO()
  writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
  writer.writeheader()
  writer.writerows(rows)
  atomic_files.write_text(path, text.getvalue())


def format_summary(summary: Summary, *, score: str, rule: str) -> str:
  share = summary.num_flagged / summary.num_examples
  return "\n".join(
    [
      f"N = {summary.num_examples} examples, C = {summary.num_classes} classes, D = {summary.num_features} features",
      f"detector: {summary.evidence} (score {score}, rule {rule})",
      f"flagged: {summary.num_flagged} ({100 * share:.1f}%)",
      f"wall time: {summary.seconds:.2f} s (reading the inputs, the detector, writing the CSV)",
      f"wrote {summary.csv_path}",
    ]
  )


def define_flags() -> None:
  """Defines the command's flags. Called when run as a command only: importing this module defines none, so it can
  share a process with another command that has a --workdir."""
  flags.DEFINE_string("features", None, "An .npy array [N, D]: one embedding per example.")
  flags.DEFINE_string("labels", None, "An .npy array [N] of integer class ids, the labels as given.")
  flags.DEFINE_string("workdir", None, f"Folder of the output, WORKDIR/{label_issues.CSV_FILE} (created if needed).")
  flags.DEFINE_enum(
    "method",
    "probe",
    list(feature_issues.METHODS),
    "probe: out-of-sample K-fold linear probe; knn: vote of the k nearest neighbours (cosine), itself excluded; "
    "ni_erm: NI-ERM's head (JAX), K-fold out of sample; wann: WANN's weighted adaptive-k vote, leave one out.",
  )
  flags.DEFINE_integer("num_folds", feature_issues.DEFAULT_NUM_FOLDS, "The probe's folds K (2 <= K <= smallest class).")
  flags.DEFINE_integer("k", feature_issues.DEFAULT_K, "The kNN vote's neighbours (1 <= k <= N - 1).")
  flags.DEFINE_integer("seed", 0, "Shuffle of the probe's stratified folds.")
  flags.DEFINE_float(
    "inverse_regularization",
    feature_issues.DEFAULT_INVERSE_REGULARIZATION,
    "The probe's C: inverse L2 strength of the logistic regression (scikit-learn's LogisticRegression(C=...)).",
  )
  flags.DEFINE_enum(
    "score", "self_confidence", list(label_issues.SCORES), "Label quality (noisy_jax.core.label_issues)."
  )
  flags.DEFINE_enum("rule", "argmax", list(label_issues.FLAG_RULES), "Flag rule (noisy_jax.core.label_issues).")
  flags.DEFINE_integer("kmin", feature_issues.DEFAULT_KMIN, "WANN's smallest k (1 <= kmin <= kmax).")
  flags.DEFINE_integer("kmax", feature_issues.DEFAULT_KMAX, "WANN's largest k (kmax <= N - 2).")
  flags.DEFINE_enum(
    "ni_erm_optimizer", "lbfgs", list(feature_issues.NI_ERM_OPTIMIZERS), "NI-ERM's optimiser (lbfgs: full batch)."
  )
  flags.DEFINE_integer("ni_erm_epochs", feature_issues.NI_ERM_DEFAULT_EPOCHS, "NI-ERM's epochs (lbfgs: iterations).")
  flags.DEFINE_float("ni_erm_learning_rate", 0.0, "NI-ERM's learning rate; 0: the optimiser's default.")
  flags.DEFINE_integer("ni_erm_batch_size", 0, "NI-ERM's minibatch size (sgd, adam); 0: the full batch.")
  flags.DEFINE_string("ni_erm_hidden_sizes", "", "NI-ERM's MLP hidden widths, comma-separated; '': a linear head.")
  flags.DEFINE_bool("ni_erm_standardize", False, "Standardise the features before NI-ERM's head (the paper: no).")
  flags.DEFINE_bool(
    "ni_erm_grid_search",
    False,
    f"Choose NI-ERM's C and epochs by --num_folds-fold cross-validated accuracy over its code's grid (replaces "
    f"--inverse_regularization and --ni_erm_epochs); writes WORKDIR/{GRID_CSV}.",
  )
  flags.DEFINE_string("sources", None, "A text file, one line per example (file path or record id); default index.")
  flags.DEFINE_string("class_names", None, "Class names, comma-separated or a text file with one per line.")
  flags.DEFINE_string("images", None, "Instead of --features/--labels: a folder DIR/LABEL/... of image files.")
  flags.DEFINE_string(
    "embeddings", None, "Instead of --features/--labels: the workdir of python -m experiments.embed (a class folder)."
  )
  flags.DEFINE_string("model", None, "With --images: the run (workdir or export directory) whose network embeds them.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  values = flags.FLAGS
  summary = run(  # a wrong input raises errors.InputError, which cli.run prints without a traceback
    values.features,
    values.labels,
    values.workdir,
    method=values.method,
    num_folds=values.num_folds,
    k=values.k,
    seed=values.seed,
    inverse_regularization=values.inverse_regularization,
    score=values.score,
    rule=values.rule,
    sources_path=values.sources,
    class_names=values.class_names,
    images=values.images,
    model=values.model,
    embeddings=values.embeddings,
    kmin=values.kmin,
    kmax=values.kmax,
    ni_erm_grid_search=values.ni_erm_grid_search,
    ni_erm=ni_erm_options(
      optimizer=values.ni_erm_optimizer,
      epochs=values.ni_erm_epochs,
      learning_rate=values.ni_erm_learning_rate,
      batch_size=values.ni_erm_batch_size,
      hidden_sizes=values.ni_erm_hidden_sizes,
      standardize=values.ni_erm_standardize,
    ),
  )
  print(format_summary(summary, score=values.score, rule=values.rule))


if __name__ == "__main__":
  from experiments import cli  # pylint: disable=g-import-not-at-top  (the entry point only: imports no JAX)

  define_flags()
  flags.mark_flags_as_required(["workdir"])
  cli.run(main)
