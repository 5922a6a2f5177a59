"""Datasets read from disk into memory: a folder of images (or a CSV manifest of image files) and a .npz of arrays.

Registered as 'image_folder' and 'npz' (TFDS datasets by name are 'tfds', in noisy_jax.data.tfds_data).

image_folder, TFDS's layout (SPLIT: train required, val and test optional; LABEL: the class name):

  ROOT/train/LABEL/*.png|*.jpg|*.jpeg
  ROOT/val/LABEL/...          optional: without it a stratified validation split is carved from train
  ROOT/test/LABEL/...          optional: without it the run has no test split (no test accuracy is recorded)

or a CSV manifest (header `path,label[,split]`, paths relative to the CSV's folder, split train / val / test; a
manifest without a split column holds training rows only):

  path,label,split
  images/001.png,cat,train
  images/002.png,dog,test

Rows: training example i (row i of the label table) is the i-th file of ROOT/train in the order (class id, file
name), or the i-th training row of the manifest, minus the rows carved for validation (the rest keep their order).
`Dataset.train_sources[i]` is its path relative to ROOT or to the CSV ('train/cat/001.png'), likewise
val_sources / test_sources. Class ids: the sorted class names of the TRAINING split (folder names, or label
strings of the manifest; integer-looking names sorted as integers: '2' < '10'), or the order of `classes` when
given; a val/test label outside the list is an error. Pixels: uint8 (pixel_max 255, as the embedded datasets;
the trainer normalises on the device), [N, S, S, 1] when every image is grayscale, else [N, S, S, 3]
(noisy_jax.data.images: decoding, channels, resize + centre crop to `image_size`). With decode=False the splits
stay on disk (noisy_jax.data.image_files.ImageFiles) and the trainer streams them or loads them (`config.input`).

npz: one `.npz` holding x_train, y_train and optionally x_test, y_test, x_val, y_val and class_names (str [C]):
`arrays.from_arrays` from the command line. Sources are record ids, 'npz:x_train[17]'.

Commands (a comparison config takes the dataset under `shared`; a single-run config such as ce.py directly,
--config.dataset=...). `dataset_kwargs` is given as one dict: the config is locked, so a new key such as
`--config.shared.dataset_kwargs.root=DIR` is refused.

  python -m experiments.train --config=experiments/configs/default.py --workdir=workdirs/mine \\
    --config.shared.dataset=image_folder --config.shared.dataset_kwargs="{'root': 'DIR', 'image_size': 32}"
  python -m experiments.train --config=experiments/configs/ce.py --workdir=workdirs/mine_ce \\
    --config.dataset=npz --config.dataset_kwargs="{'path': 'data.npz'}"

experiments/configs/own_data.py declares every image_folder option as a field of a top-level dataset_kwargs, unset
until given, so single keys work there: --config.dataset_kwargs.root=DIR --config.dataset_kwargs.image_size=64.

The run writes WORKDIR/classes.json (class names and where the data came from) next to summary.json.

Errors name the file or value: a file pillow cannot decode, a manifest row naming a missing file, a label outside
the class list, an empty class folder, a missing ROOT/train, images of different sizes without
image_size. Nothing is skipped silently (hidden files, names starting with '.', are ignored); with
on_bad_file='skip' the files that cannot be decoded are left out and listed (noisy_jax.data.bad_files).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import re
from typing import Sequence
import zipfile

import numpy as np

from noisy_jax.core import errors
from noisy_jax.data import arrays
from noisy_jax.data import bad_files
from noisy_jax.data import image_files
from noisy_jax.data import images

SPLITS = ("train", "val", "test")
SPLIT_SEED = 20180611  # default seed of the validation carving: part of the dataset's definition (as embedded.py)
DEFAULT_VALIDATION_FRACTION = 0.1  # carved from train when the data has no validation split
NPZ_REQUIRED = ("x_train", "y_train")
NPZ_OPTIONAL = ("x_test", "y_test", "x_val", "y_val", "class_names")

# split -> [(source: path relative to the base folder, label name)]
Listing = dict[str, list[tuple[str, str]]]


def _visible(names) -> list[str]:
  return sorted(n for n in names if not n.startswith("."))


def _list_class_folder(class_folder: str, split: str, label: str) -> list[tuple[str, str]]:
  """[(SPLIT/LABEL/NAME, label)] of the image files of one class folder, sorted by name; InputError for an empty
  folder, a sub-folder or a non-image file."""
  files = _visible(os.listdir(class_folder))
  if not files:
    raise errors.InputError(f"class folder {class_folder!r} is empty; remove it or put its images there.")
  rows = []
  for name in files:
    path = os.path.join(class_folder, name)
    if not os.path.isfile(path) or not name.lower().endswith(images.IMAGE_EXTENSIONS):
      raise errors.InputError(
        f"{path!r} is not an image file: a class folder holds only {', '.join(images.IMAGE_EXTENSIONS)} files."
      )
    rows.append((f"{split}/{label}/{name}", label))
  return rows


def _list_split_folder(folder: str, split: str) -> list[tuple[str, str]]:
  """The rows of one split folder ROOT/SPLIT, class folder by class folder; InputError for a file outside a class
  folder or a split folder without class folders."""
  rows = []
  for label in _visible(os.listdir(folder)):
    class_folder = os.path.join(folder, label)
    if not os.path.isdir(class_folder):
      raise errors.InputError(f"{class_folder!r} is a file, but images belong in class folders: {folder}/LABEL/.")
    rows += _list_class_folder(class_folder, split, label)
  if not rows:
    raise errors.InputError(f"split folder {folder!r} has no class folder.")
  return rows


def list_folder(root: str) -> Listing:
  """The image files of ROOT/SPLIT/LABEL/ per split (train, val, test), sorted by (label folder, file name).

  No image is read.

  Raises:
    FileNotFoundError: naming ROOT or ROOT/train when missing.
    ValueError: naming an unknown split folder, a file outside a class folder, a sub-folder or a non-image file
      inside one, or an empty class folder.
  """
  if not os.path.isdir(root):
    raise errors.MissingInputError(f"image folder root {root!r} is not a folder.")
  listing = {}
  for split in _visible(os.listdir(root)):
    folder = os.path.join(root, split)
    if not os.path.isdir(folder):
      continue  # a README or a manifest next to the split folders
    if split not in SPLITS:
      raise errors.InputError(f"{folder!r} is not a split folder: the splits are {', '.join(SPLITS)} (val optional).")
    listing[split] = _list_split_folder(folder, split)
  if "train" not in listing:
    raise errors.MissingInputError(
      f"{os.path.join(root, 'train')!r} is missing: an image folder needs "
      f"ROOT/train/LABEL/ images (val and test are optional)."
    )
  return {split: listing[split] for split in SPLITS if split in listing}


def read_manifest(manifest: str) -> Listing:
  """The rows of a CSV manifest (`path,label[,split]`) per split (train, val, test), each in file order.

  Paths are relative to the CSV's folder.

  Raises:
    FileNotFoundError: naming the manifest, or a row's missing image file (with its line).
    ValueError: naming a bad header, an empty path or label, an unknown split (with its line), or a manifest
      without training rows.
  """
  if not os.path.isfile(manifest):
    raise errors.MissingInputError(f"manifest {manifest!r} does not exist.")
  base = os.path.dirname(manifest)
  listing = {}
  with open(manifest, newline="", encoding="utf-8") as f:
    reader = csv.DictReader(f)
    columns = [c.strip() for c in reader.fieldnames or ()]
    if "path" not in columns or "label" not in columns or set(columns) - {"path", "label", "split"}:
      raise errors.InputError(
        f"manifest {manifest!r} has the columns {columns}; expected path,label and optionally split."
      )
    reader.fieldnames = columns
    for row in reader:
      line = f"{manifest}, line {reader.line_num}"
      path, label = (row.get("path") or "").strip(), (row.get("label") or "").strip()
      split = (row.get("split") or "").strip() if "split" in columns else "train"
      if not path or not label:
        raise errors.InputError(f"{line}: a row needs a path and a label, got {row!r}.")
      if split not in SPLITS:
        raise errors.InputError(f"{line}: split {split!r} is not one of {', '.join(SPLITS)}.")
      if not os.path.isfile(os.path.join(base, path)):
        raise errors.MissingInputError(f"{line}: image file {os.path.join(base, path)!r} does not exist.")
      listing.setdefault(split, []).append((path, label))
  if "train" not in listing:
    raise errors.InputError(
      f"manifest {manifest!r} has no train row; give rows the split train (or leave out the split "
      "column: every row is then a training row)."
    )
  return {split: listing[split] for split in SPLITS if split in listing}


def class_order(names) -> tuple[str, ...]:
  """Distinct class names, sorted; integer-looking names ('-?[0-9]+') sorted as integers when all are."""
  names = set(names)
  if all(re.fullmatch(r"-?[0-9]+", n) for n in names):
    return tuple(sorted(names, key=lambda n: (int(n), n)))
  return tuple(sorted(names))


def _class_ids(listing: Listing, classes: Sequence[str] | None, where: str) -> tuple[tuple[str, ...], dict]:
  """(class names, {split: int64 [N] ids}); a label outside the class list is a ValueError naming it and its file."""
  names = class_order(label for _, label in listing["train"]) if classes is None else tuple(map(str, classes))
  if len(set(names)) != len(names):
    raise errors.InputError(f"classes={names!r} lists a class twice.")
  index = {name: c for c, name in enumerate(names)}
  ids = {}
  for split, rows in listing.items():
    for source, label in rows:
      if label not in index:
        shown = ", ".join(map(repr, names[:20])) + (", ..." if len(names) > 20 else "")
        raise errors.InputError(
          f"{where}: label {label!r} of {source!r} is not in the class list ({shown}), which "
          f"{'is `classes`' if classes is not None else 'comes from the training split'}."
        )
    ids[split] = np.array([index[label] for _, label in rows], np.int64)
  return names, ids


def assemble(
  name: str,
  x: dict,
  y: dict,
  sources: dict,
  class_names,
  *,
  num_classes: int | None,
  validation_size,
  seed: int,
  where: str,
  pixel_max: float = 255.0,
) -> arrays.Dataset:
  """Splits {'train', 'test'[, 'val']} -> `arrays.from_arrays`; without 'val', validation_size (None: 10%) is
  carved stratified from train with `seed`. Shared by image_folder, npz and tfds_data.by_name."""
  if "val" in x:
    if validation_size:
      raise errors.InputError(
        f"validation_size={validation_size!r} carves a validation split from train, but {where} "
        "has a val split already: drop one of them."
      )
    validation_size = 0
  elif validation_size is None:
    validation_size = DEFAULT_VALIDATION_FRACTION
  return arrays.from_arrays(
    x["train"],
    y["train"],
    x.get("test"),
    y.get("test"),
    x_val=x.get("val"),
    y_val=y.get("val"),
    num_classes=num_classes,
    validation_size=validation_size,
    seed=seed,
    name=name,
    class_names=class_names,
    train_sources=sources["train"],
    val_sources=sources.get("val"),
    test_sources=sources.get("test", []),
    pixel_max=pixel_max,
  )


def image_folder(
  root: str | None = None,
  *,
  manifest: str | None = None,
  image_size: int | None = None,
  classes: Sequence[str] | None = None,
  validation_size: int | float | None = None,
  seed: int = SPLIT_SEED,
  channels: int | None = None,
  decode: bool = True,
  on_bad_file: str = "error",
  max_bad_fraction: float = bad_files.DEFAULT_MAX_FRACTION,
) -> arrays.Dataset:
  """Loads an image folder or a CSV manifest (layouts in the module docstring).

  Args:
    root: ROOT of ROOT/SPLIT/LABEL/*.png|jpg|jpeg (give root or manifest, not both).
    manifest: a CSV file with columns path,label,split (paths relative to the CSV's folder).
    image_size: S: resize each image's shorter side to S (bilinear) and centre-crop S x S; None keeps the files'
      size, which must then be the same for every image.
    classes: the class names in class-id order (default: sorted training labels); a label outside it is an error.
    validation_size: without a val split, the stratified validation split carved from train (an int count or a
      float fraction, arrays.stratified_split); None: 10% without a val split, the val split when there is one.
    seed: seed of the carving (a constant by default, so every experiment sees the same split).
    channels: 1 or 3; None: 1 when every image is grayscale (decode=True) or when the first training file is
      (decode=False), else 3.
    decode: True decodes every file now; False keeps each split on disk (image_files.ImageFiles, decoded when
      read: what the trainer streams, `config.input`), reading one file for the example shape.
    on_bad_file: 'error' (a file that cannot be decoded stops the load, named) or 'skip' (its row is left out, or,
      on disk, when it is read; noisy_jax.data.bad_files).
    max_bad_fraction: with 'skip', the largest fraction of a split's files that may be skipped (else ValueError).

  Returns:
    A Dataset with uint8 [N, S, S, 1 or 3] images (pixel_max 255) or ImageFiles, int32 labels, class_names and
    per-row sources.

  Raises:
    FileNotFoundError, ValueError: naming the bad file, folder or value (see the module docstring).
  """
  bad_files.check_options(on_bad_file, max_bad_fraction)  # before any file is listed
  if (root is None) == (manifest is None):
    raise errors.MissingInputError(
      f"image_folder needs root=DIR or manifest=FILE.csv, exactly one; got root={root!r}, "
      f"manifest={manifest!r}. On the command line: --config.dataset_kwargs.root=DIR (or "
      "--config.dataset_kwargs.manifest=FILE.csv) with experiments/configs/own_data.py."
    )
  where = root if manifest is None else manifest
  listing = list_folder(root) if manifest is None else read_manifest(manifest)
  base = root if manifest is None else os.path.dirname(manifest)
  return from_listing(
    "image_folder",
    listing,
    base,
    image_size=image_size,
    classes=classes,
    validation_size=validation_size,
    seed=seed,
    where=where,
    channels=channels,
    decode=decode,
    order_by_class=manifest is None,
    on_bad_file=on_bad_file,
    max_bad_fraction=max_bad_fraction,
  )


def from_listing(
  name: str,
  listing: Listing,
  base: str,
  *,
  image_size: int | None = None,
  classes: Sequence[str] | None = None,
  validation_size: int | float | None = None,
  seed: int = SPLIT_SEED,
  where: str,
  channels: int | None = None,
  decode: bool = True,
  order_by_class: bool = False,
  on_bad_file: str = "error",
  max_bad_fraction: float = bad_files.DEFAULT_MAX_FRACTION,
) -> arrays.Dataset:
  """A Dataset of image files: `listing` {split: [(path relative to `base`, label name)]}, splits train and test
  (val optional). The shared end of image_folder and the readers of published layouts (Clothing1M, WebVision,
  ANIMAL-10N); arguments as image_folder's. order_by_class: rows sorted by (class id, listing order), as a folder
  is listed; False keeps the listing's order. `where` names the data in error messages.

  With on_bad_file='skip' and decode=True, the files that cannot be decoded leave their splits after the
  validation carving (the rows of the others are those of a folder without them); with decode=False the example
  shape is read from the first training file that decodes."""
  image_size = images.check_image_size(image_size)
  on_bad_file, max_bad_fraction = bad_files.check_options(on_bad_file, max_bad_fraction)
  skip = on_bad_file == "skip"
  if channels is not None and channels not in (1, 3):
    raise errors.InputError(f"channels={channels!r} must be None (from the images), 1 (grayscale) or 3 (RGB).")
  if not listing.get("train"):
    raise errors.InputError(f"{where}: the train split has no image; a dataset needs training images.")
  class_names, y = _class_ids(listing, classes, where)
  if order_by_class:
    for split in listing:
      order = np.argsort(y[split], kind="stable")
      listing[split], y[split] = [listing[split][i] for i in order], y[split][order]
  paths = {split: [os.path.join(base, s) for s, _ in rows] for split, rows in listing.items()}
  sources = {split: [s for s, _ in rows] for split, rows in listing.items()}
  failed = {}  # decode=True with skip: {split: {row: error}} of the listing
  if decode:
    pixels = {split: _decode_all(paths[split], image_size, skip) for split in listing}
    failed = {split: {i: p for i, p in enumerate(pixels[split]) if isinstance(p, str)} for split in listing}
    if sum(map(len, failed.values())) == sum(map(len, pixels.values())):
      raise errors.InputError(
        f"{where}: no image file can be decoded; the first: {next(iter(failed['train'].values()))}"
      )
    good = [(p, path) for split in listing for p, path in zip(pixels[split], paths[split]) if not isinstance(p, str)]
    images.check_same_size([p for p, _ in good], [path for _, path in good])  # across splits, naming the files
    color = images.is_color([p for p, _ in good]) if channels is None else channels == 3
    blank = np.zeros_like(good[0][0])  # the rows of bad files until they are dropped below
    x = {
      split: images.stack([blank if isinstance(q, str) else q for q in p], paths[split], color=color)
      for split, p in pixels.items()
    }
    del pixels, good
  else:
    probe = image_files.ImageFiles.probe(
      paths["train"],
      image_size=image_size,
      channels=channels,
      first=_first_decodable(paths["train"], image_size) if skip else None,
    )
    probe = dataclasses.replace(probe, on_bad_file=on_bad_file, max_bad_fraction=max_bad_fraction)
    x = {split: dataclasses.replace(probe, paths=tuple(p)) for split, p in paths.items()}
  dataset = assemble(
    name,
    x,
    y,
    sources,
    class_names,
    num_classes=len(class_names),
    validation_size=validation_size,
    seed=seed,
    where=where,
  )
  if not any(failed.values()):
    return dataset
  # The listing's bad rows as rows of the assembled splits: found by their sources (a carved validation split holds
  # training files).
  bad = {split: {sources[split][i]: error for i, error in rows.items()} for split, rows in failed.items()}
  in_split = {"train": bad.get("train", {}), "val": bad.get("val", {}), "test": bad.get("test", {})}
  if dataset.val_carved_from_train:
    in_split["val"] = bad.get("train", {})
  rows = {
    split: {i: in_split[split][s] for i, s in enumerate(getattr(dataset, f"{split}_sources")) if s in in_split[split]}
    for split in SPLITS
    if in_split[split] and getattr(dataset, f"{split}_sources") is not None
  }
  return dataset.without_rows(rows, dataset.skipped_rows(rows, max_bad_fraction))


def _decode_all(paths: Sequence[str], image_size: int | None, skip: bool) -> list:
  """images.decode_files of `paths`; with `skip`, the error message (a str) in place of a file that cannot be
  decoded (images.BadImageFile, or a file gone since the listing)."""
  if not skip:
    return images.decode_files(paths, image_size)

  def decode(path):
    try:
      return images.decode_file(path, image_size)
    except (images.BadImageFile, FileNotFoundError) as e:
      return str(e)

  return images.map_files(decode, paths)


def _first_decodable(paths: Sequence[str], image_size: int | None) -> str:
  """The first of `paths` that decodes (ValueError naming the first error when none does)."""
  first_error = None
  for path in paths:
    try:
      images.decode_file(path, image_size)
      return path
    except (images.BadImageFile, FileNotFoundError) as e:
      first_error = first_error or e
  raise errors.InputError(f"no training file can be decoded; the first: {first_error}")


def open_npz(path: str):
  """np.load of a .npz archive of named arrays (no pickles); ValueError naming `path` for anything else."""
  try:
    archive = np.load(path, allow_pickle=False)
  except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
    raise errors.InputError(f"cannot read {path!r} as a .npz archive: {e}") from e
  if not hasattr(archive, "files"):
    raise errors.InputError(f"{path!r} holds a single array (.npy), not a .npz archive of named arrays.")
  return archive


def npz(
  path: str, *, validation_size: int | float | None = None, seed: int = SPLIT_SEED, num_classes: int | None = None
) -> arrays.Dataset:
  """Loads a .npz of x_train, y_train, x_test, y_test [, x_val, y_val, class_names] (`arrays.from_arrays`).

  Inputs are taken as they are (cast to float32, not rescaled), as from_arrays does. C: len(class_names) when the
  file has them, else `num_classes`, else inferred (largest label + 1). validation_size: as `image_folder` (None:
  x_val/y_val when present, else 10% carved from train). Nothing is unpickled (allow_pickle=False).

  Raises:
    FileNotFoundError: naming a missing file.
    ValueError: naming the file for an unreadable archive or missing / unknown arrays; from_arrays' checks.
  """
  if not os.path.isfile(path):
    raise errors.MissingInputError(f"npz file {path!r} does not exist.")
  with open_npz(path) as archive:
    try:
      loaded = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
      raise errors.InputError(f"cannot read {path!r} as a .npz archive: {e}") from e
  missing, unknown = set(NPZ_REQUIRED) - set(loaded), set(loaded) - set(NPZ_REQUIRED) - set(NPZ_OPTIONAL)
  if missing or unknown:
    raise errors.InputError(
      f"npz file {path!r} has the arrays {sorted(loaded)}: it needs {', '.join(NPZ_REQUIRED)} "
      f"(optional: {', '.join(NPZ_OPTIONAL)}); missing {sorted(missing)}, unknown {sorted(unknown)}."
    )
  for split in ("val", "test"):
    if (f"x_{split}" in loaded) != (f"y_{split}" in loaded):
      raise errors.InputError(f"npz file {path!r} has only one of x_{split} and y_{split}; give both or neither.")
  class_names = None
  if "class_names" in loaded:
    class_names = tuple(str(n) for n in np.asarray(loaded["class_names"]).ravel())
    if num_classes is not None and num_classes != len(class_names):
      raise errors.InputError(f"num_classes={num_classes!r} but {path!r} lists {len(class_names)} class_names.")
    num_classes = len(class_names)
  x = {split: loaded[f"x_{split}"] for split in SPLITS if f"x_{split}" in loaded}
  y = {split: loaded[f"y_{split}"] for split in SPLITS if f"y_{split}" in loaded}
  sources = {split: [f"npz:x_{split}[{i}]" for i in range(len(v))] for split, v in x.items()}
  return assemble(
    "npz",
    x,
    y,
    sources,
    class_names,
    num_classes=num_classes,
    validation_size=validation_size,
    seed=seed,
    where=path,
    pixel_max=1.0,
  )
