r"""Labels new inputs with a run's exported network: flags -> noisy_jax.experiment.export.load_model -> predictions.csv.

  python -m experiments.predict --workdir=W --input=DIR            # a folder of images, read recursively
  python -m experiments.predict --workdir=W --input=data.npz --which=best_val --output=preds.csv

--workdir: a run's workdir (its WORKDIR/model/WHICH, written by every run with a workdir) or an export directory.
--input: a folder: every .png / .jpg / .jpeg file under it (any depth, case-insensitive extensions; hidden files and
  folders, names starting with '.', are skipped), in sorted order of their paths, decoded as the run's loader
  decodes training images (noisy_jax.data.image_files / images: pillow, the run's image_size resize + centre crop,
  gray repeated over 3 channels for an RGB model, a colour image refused by a grayscale one). Or an .npz: the
  array `x` if present, else `x_test`, else `x_train` (the first of these names it holds), [N, *input_shape] as the
  run stored its inputs (uint8 codes for images).
Output (default W/predictions.csv), one row per input, written atomically (a temporary file, then renamed):

  path              the file's path relative to the input folder, or npz:KEY[i]
  predicted_class   the class id with the highest probability
  predicted_name    its class name (only when the run's data named its classes)
  probability       that probability (softmax of the network, float32)
"""

from __future__ import annotations

import csv
import io
import os

from absl import app
from absl import flags
from absl import logging
import numpy as np

from experiments import cli
from noisy_jax.core import atomic_files
from noisy_jax.core import errors
from noisy_jax.data import disk
from noisy_jax.data import image_files
from noisy_jax.data import images
from noisy_jax.experiment import export

NPZ_KEYS = ("x", "x_test", "x_train")  # the array an .npz is read from: the first of these it holds
OUTPUT_FILE = "predictions.csv"


def image_paths(folder: str) -> list[str]:
  """Paths relative to `folder` of its image files (images.IMAGE_EXTENSIONS), recursively, hidden ones skipped,
  sorted. Raises ValueError naming the folder when it holds none."""
  found = []
  for root, dirs, files in os.walk(folder):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    for name in files:
      if not name.startswith(".") and name.lower().endswith(images.IMAGE_EXTENSIONS):
        found.append(os.path.relpath(os.path.join(root, name), folder))
  if not found:
    raise errors.InputError(
      f"input folder {folder!r} holds no image file ({', '.join(images.IMAGE_EXTENSIONS)}, searched recursively)."
    )
  return sorted(found)


def read_folder(folder: str, loaded: export.LoadedModel):
  """(relative paths, image_files.ImageFiles) of the images under `folder`, decoded as the run's loader does."""
  shape, data = loaded.input_shape, loaded.info["data"]
  if len(shape) != 3 or shape[-1] not in (1, 3):
    raise errors.InputError(
      f"this model takes inputs of shape {shape}, not images [H, W, 1 or 3]; give an .npz with an "
      f"array x of shape [N, {', '.join(map(str, shape))}]."
    )
  if data["pixel_max"] != 255.0 or loaded.info.get("input_dtype", "uint8") != "uint8":
    raise errors.InputError(
      f"this model was trained on {loaded.info.get('input_dtype')} inputs with full intensity "
      f"{data['pixel_max']:g} (dataset {data.get('dataset')!r}), but image files decode to uint8 "
      "codes 0..255; give an .npz with the inputs encoded as the training data was."
    )
  paths = image_paths(folder)
  files = image_files.ImageFiles(
    tuple(os.path.join(folder, p) for p in paths), shape[0], shape[1], shape[2], data.get("image_size")
  )
  return paths, files


def read_npz(path: str):
  """(['npz:KEY[i]', ...], the array KEY) of an .npz: KEY the first of NPZ_KEYS that it holds."""
  with disk.open_npz(path) as archive:
    key = next((k for k in NPZ_KEYS if k in archive.files), None)
    if key is None:
      raise errors.InputError(
        f"npz file {path!r} has the arrays {sorted(archive.files)}; it needs one named "
        f"{', '.join(NPZ_KEYS[:-1])} or {NPZ_KEYS[-1]} (read in that order of preference)."
      )
    x = archive[key]
  return [f"npz:{key}[{i}]" for i in range(len(x))], x


def read_input(path: str, loaded: export.LoadedModel):
  """(row names, inputs) of a folder of images or an .npz (module docstring). Raises FileNotFoundError naming a
  missing path, ValueError for an empty folder, an .npz without an input array, or inputs of the wrong shape."""
  if os.path.isdir(path):
    names, x = read_folder(path, loaded)
  elif os.path.isfile(path):
    names, x = read_npz(path)
  else:
    raise errors.MissingInputError(f"input {path!r} does not exist: give a folder of images or an .npz file.")
  loaded.check_inputs(x)
  return names, x


def write_csv(path: str, names, probs: np.ndarray, class_names) -> None:
  """The predictions CSV (module docstring), written whole or not at all (noisy_jax.core.atomic_files)."""
  predicted = np.argmax(probs, axis=-1) if len(probs) else np.zeros((0,), np.int64)
  header = ["path", "predicted_class"] + (["predicted_name"] if class_names else []) + ["probability"]
  text = io.StringIO(newline="")
  writer = csv.writer(text)
  writer.writerow(header)
  for name, c, p in zip(names, predicted, probs):
    row = [name, int(c)] + ([class_names[int(c)]] if class_names else []) + [str(np.float32(p[c]))]
    writer.writerow(row)
  atomic_files.write_text(path, text.getvalue())


def run(workdir: str, input_path: str, *, which: str = "final", output: str | None = None, batch_size: int = 500):
  """Predicts every input and writes the CSV; returns (CSV path, row names, probabilities float32 [N, C])."""
  loaded = export.load_model(workdir, which, batch_size=batch_size)
  names, x = read_input(input_path, loaded)
  try:
    probs = loaded.predict(x)
  except ValueError as e:
    if not isinstance(x, image_files.ImageFiles):
      raise
    h, w, c = loaded.input_shape
    size = loaded.info["data"].get("image_size")
    how = (
      f"every image's shorter side resized to {size}, then centre-cropped"
      if size
      else "no resizing: the run read its images at their own size"
    )
    raise errors.InputError(
      f"an input image does not fit this model, which takes {w}x{h} "
      f"{'grayscale' if c == 1 else 'RGB'} images ({how}): {e}"
    ) from e
  output = output or os.path.join(workdir, OUTPUT_FILE)
  write_csv(output, names, probs, loaded.class_names)
  return output, names, probs


def define_flags() -> None:
  """Defines the command's flags. Called when run as a command only: importing this module defines none, so it can
  share a process with experiments.train, which has a --workdir too."""
  flags.DEFINE_string("workdir", None, "A run's workdir (reads WORKDIR/model/WHICH) or an export directory.")
  flags.DEFINE_string(
    "input", None, "A folder of images (read recursively) or an .npz with an array x (else x_test, else x_train)."
  )
  flags.DEFINE_enum(
    "which",
    "final",
    list(export.WHICH),
    "Which exported network of the workdir: the last epoch's (final) or the best validation epoch's (best_val).",
  )
  flags.DEFINE_string("output", None, f"The CSV written (default WORKDIR/{OUTPUT_FILE}).")
  flags.DEFINE_integer("batch_size", 500, "Examples per forward pass (and per chunk of decoded images).")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  values = {name: getattr(flags.FLAGS, name) for name in ("workdir", "input", "which", "output", "batch_size")}
  if values["batch_size"] < 1:
    raise app.UsageError(f"--batch_size={values['batch_size']} must be >= 1.")
  output, names, _ = run(
    values["workdir"], values["input"], which=values["which"], output=values["output"], batch_size=values["batch_size"]
  )
  logging.info("Wrote %d predictions to %s.", len(names), output)
  print(f"Wrote {len(names)} predictions to {output}")


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["workdir", "input"])
  cli.run(main)
