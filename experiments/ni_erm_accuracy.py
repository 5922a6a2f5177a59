r"""NI-ERM's test accuracy from two embedding stores: the head fitted on one store's embeddings with its labels as
given (noisy), evaluated on another's labels (clean), as NI-ERM's code reports its CIFAR-N rows.

  python -m experiments.ni_erm_accuracy --train=EMB_TRAIN --test=EMB_TEST --grid_search
  python -m experiments.ni_erm_accuracy --train=EMB_TRAIN --test=EMB_TEST --inverse_regularization=0.1 --epochs=50 \
      --output=result.json

--train, --test: workdirs of `python -m experiments.embed` with labels (a class-folder tree, or --config; the test
  store with --split=test), the same backbone, preprocessing and class names (anything else is refused, naming it).
--grid_search: C and the L-BFGS iterations chosen as NI-ERM's code chooses them (noisy_jax.experiment.ni_erm_grid:
  5-fold unshuffled stratified cross-validated accuracy on the training labels over C in {1e-4, ..., 100} x {10, 20,
  50, 100} iterations), then the head refitted on every training row with the choice (GridSearchCV's refit);
  otherwise --inverse_regularization and --epochs. The head: noisy_jax.experiment.ni_erm (multinomial logistic
  regression on the raw embeddings, L-BFGS, full batch; --standardize to centre and scale them first).
Prints N, D, C, the settings (chosen or given) and the test accuracy; --output writes them as JSON (atomically), with
the grid's table when searched. experiments/configs/ni_erm_paper.py lists the commands of its CIFAR-N rows.
"""

from __future__ import annotations

import json
import os
import time

from absl import app
from absl import flags
import numpy as np

from experiments import cli
from noisy_jax.core import atomic_files
from noisy_jax.core import errors
from noisy_jax.experiment import embedding_store


def read_store(workdir: str, flag: str):
  """(embeddings [N, D], labels [N], class names, manifest) of the store `workdir`; InputError naming `flag` when it
  has no labels."""
  embeddings, labels, _, classes = embedding_store.read(workdir)
  if labels is None:
    raise errors.InputError(
      f"--{flag}={workdir}: the store has no labels (embed a class-folder tree DIR/LABEL/... or a --config)."
    )
  with open(os.path.join(workdir, embedding_store.MANIFEST), encoding="utf-8") as f:
    manifest = json.load(f)
  return np.asarray(embeddings, np.float64), np.asarray(labels, np.int64), classes, manifest


def check_pair(train_manifest: dict, test_manifest: dict, train_classes, test_classes) -> None:
  """InputError naming what differs when the two stores are not embeddings of the same backbone, weights,
  preprocessing and classes."""
  for field in ("backbone", "weights", "preprocessing", "dim"):
    mine, theirs = train_manifest.get(field), test_manifest.get(field)
    if field == "weights":
      mine, theirs = (value and {k: value.get(k) for k in ("size", "sha256")} for value in (mine, theirs))
    if mine != theirs:
      raise errors.InputError(
        f"--train and --test were embedded differently: {field} {mine!r} against {theirs!r}; embed both with the "
        "same --backbone, --weights and preprocessing flags."
      )
  if tuple(train_classes) != tuple(test_classes):
    raise errors.InputError(
      f"--train and --test have other classes: {list(train_classes)[:5]}... against {list(test_classes)[:5]}...; "
      "both need the same class names in the same order."
    )


def run(
  train: str,
  test: str,
  *,
  grid_search: bool = False,
  inverse_regularization: float = 1.0,
  epochs: int = 100,
  standardize: bool = False,
  seed: int = 0,
) -> dict:
  """The result of the module docstring: {'num_train', 'num_test', 'dim', 'num_classes', 'settings', 'grid' (rows or
  None), 'test_accuracy', 'seconds'}."""
  import jax  # pylint: disable=g-import-not-at-top  (JAX: after the flags are read)

  from noisy_jax.experiment import ni_erm  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import ni_erm_grid  # pylint: disable=g-import-not-at-top

  start = time.perf_counter()
  if not (inverse_regularization > 0 and epochs >= 1):
    raise errors.InputError(
      f"--inverse_regularization={inverse_regularization}, --epochs={epochs}; allowed: C > 0 and epochs >= 1."
    )
  x_train, y_train, train_classes, train_manifest = read_store(train, "train")
  x_test, y_test, test_classes, test_manifest = read_store(test, "test")
  check_pair(train_manifest, test_manifest, train_classes, test_classes)
  settings = {"inverse_regularization": float(inverse_regularization), "epochs": int(epochs)}
  grid = None
  if grid_search:
    grid = ni_erm_grid.search(x_train, y_train, seed=seed, standardize=standardize)
    settings = grid.best
  head = ni_erm.fit(
    x_train, y_train, num_classes=len(train_classes), key=jax.random.key(seed), standardize=standardize, **settings
  )
  accuracy = float(np.mean(ni_erm.predict(head, x_test) == y_test))
  return {
    "num_train": len(y_train),
    "num_test": len(y_test),
    "dim": int(x_train.shape[1]),
    "num_classes": len(train_classes),
    "settings": {**settings, "standardize": standardize, "grid_search": grid_search},
    "grid": None if grid is None else grid.rows(),
    "test_accuracy": accuracy,
    "seconds": time.perf_counter() - start,
  }


def format_result(result: dict) -> str:
  settings = result["settings"]
  how = "chosen by 5-fold grid search" if settings["grid_search"] else "given"
  return "\n".join(
    [
      f"train N = {result['num_train']}, test N = {result['num_test']}, D = {result['dim']}, "
      f"C = {result['num_classes']} classes",
      f"NI-ERM head: inverse regularisation {settings['inverse_regularization']:g}, "
      f"{settings['epochs']} L-BFGS iterations ({how})",
      f"test accuracy: {100 * result['test_accuracy']:.2f}% ({result['seconds']:.1f} s)",
    ]
  )


def define_flags() -> None:
  flags.DEFINE_string("train", None, "Embedding store of the training images with their given (noisy) labels.")
  flags.DEFINE_string("test", None, "Embedding store of the test images with their clean labels.")
  flags.DEFINE_bool("grid_search", False, "Choose C and the iterations by NI-ERM's code's 5-fold grid search.")
  flags.DEFINE_float("inverse_regularization", 1.0, "C without --grid_search (penalty ||W||^2 / (2 C N)).")
  flags.DEFINE_integer("epochs", 100, "L-BFGS iterations without --grid_search.")
  flags.DEFINE_bool("standardize", False, "Centre and scale the embeddings first (NI-ERM's code: no).")
  flags.DEFINE_integer("seed", 0, "The heads' PRNG keys (a linear L-BFGS head does not depend on it).")
  flags.DEFINE_string("output", None, "Write the result as JSON to this file.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  f = flags.FLAGS
  result = run(
    f.train,
    f.test,
    grid_search=f.grid_search,
    inverse_regularization=f.inverse_regularization,
    epochs=f.epochs,
    standardize=f.standardize,
    seed=f.seed,
  )
  print(format_result(result), flush=True)
  if f.output:
    atomic_files.write_text(f.output, json.dumps(result, indent=1))
    print(f"wrote {f.output}")


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["train", "test"])
  cli.run(main)
