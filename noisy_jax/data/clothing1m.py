"""Clothing1M (Xiao et al., "Learning from Massive Noisy Labeled Data for Image Classification", CVPR 2015).

About one million clothing images from shopping websites, 14 classes, labels from the surrounding text (about 38%
wrong), plus small hand-checked clean splits. Manual download only (request access at
https://github.com/Cysu/noisy_label); noisy_jax never downloads it. This module reads the release's lists into
index-carrying split descriptors (paths, labels, indices), builds the registry's Dataset from them (`load`, splits
left on disk), and has a host-side batch iterator that decodes the JPEGs of one batch at a time with pillow.

Folder layout of the official release, after `tar -xf images/N.tar` for N = 0..9 inside `images/` (the annotation
files may also sit in `ROOT/annotations/`, as several codebases keep them):

  ROOT/
    images/0/ .. images/9/            the JPEGs, e.g. images/0/61/2358596911,1.jpg
    category_names_eng.txt            14 lines, class id = line number: T-Shirt, Shirt, Knitwear, Chiffon, Sweater,
                                      Hoodie, Windbreaker, Jacket, Down Coat, Suit, Shawl, Dress, Vest, Underwear
    noisy_label_kv.txt                "<key> <label>" per line: the noisy (text-derived) label of ~1M images
    clean_label_kv.txt                "<key> <label>" per line: the hand-checked label of ~72k images
    noisy_train_key_list.txt          one key per line: the noisy training split (1,000,000 images)
    clean_train_key_list.txt          the clean training split (47,570)
    clean_val_key_list.txt            the clean validation split (14,313)
    clean_test_key_list.txt           the clean test split (10,526)

A key is the image's path relative to ROOT (it starts with `images/`). Splits here: 'noisy_train' (labels from
noisy_label_kv.txt; `clean_labels` from clean_label_kv.txt where an image has one, else -1), 'clean_train',
'clean_val', 'clean_test' (labels from clean_label_kv.txt). Example i of a split is row i of its key list: the
index the trainer's label table would use.

Registry loader `load` ('clothing1m' in noisy_jax.data.DATASETS): a Dataset whose training rows are the noisy
training split (row i = line i of noisy_train_key_list.txt) with its NOISY labels in y_train (the hand-checked label
of most of these images is unknown, so the labels are taken as given: train with noise type 'none'), validation =
clean_val, test = clean_test, class names from category_names_eng.txt and sources = keys (paths relative to ROOT).
By default the splits stay on disk (image_files.ImageFiles, decode=False): a million decoded 224x224 RGB images
are 150 GB, so the trainer streams them (or loads a split that fits its memory budget).

The usual preprocessing of the papers' code (ResNet-50 on 224x224; DivideMix's and ELR's dataloaders): resize the
shorter side to 256, then a random 224 crop and horizontal flip for training, a center 224 crop for evaluation.
`iterate_batches` does exactly that, deterministically from (seed, epoch, example index). `load` decodes every
split the evaluation way instead (shorter side to `image_size`, default 224, then the centre crop:
noisy_jax.data.images); the trainer's augmentation runs on the device.
"""

from __future__ import annotations

from concurrent import futures
import dataclasses
import os
from typing import Iterator

import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import errors
from noisy_jax.data import arrays
from noisy_jax.data import bad_files
from noisy_jax.data import disk
from noisy_jax.data import file_lists

NUM_CLASSES = 14
CATEGORY_FILE = "category_names_eng.txt"
NOISY_LABELS_FILE = "noisy_label_kv.txt"
CLEAN_LABELS_FILE = "clean_label_kv.txt"
# split -> (key list, label file)
SPLITS = {
  "noisy_train": ("noisy_train_key_list.txt", NOISY_LABELS_FILE),
  "clean_train": ("clean_train_key_list.txt", CLEAN_LABELS_FILE),
  "clean_val": ("clean_val_key_list.txt", CLEAN_LABELS_FILE),
  "clean_test": ("clean_test_key_list.txt", CLEAN_LABELS_FILE),
}
# What ROOT must hold, for the message of a run that names none (noisy_jax.data.missing_arguments).
ROOT_HOLDS = (
  "the Clothing1M release: category_names_eng.txt, noisy_label_kv.txt, clean_label_kv.txt and the four "
  "*_key_list.txt files (in ROOT or ROOT/annotations) and the JPEGs under ROOT/images/0 .. images/9"
)
_HOW_TO_GET = (
  "Clothing1M is a manual download (request it at https://github.com/Cysu/noisy_label), then untar "
  "images/0.tar .. images/9.tar inside ROOT/images; see noisy_jax/data/clothing1m.py for the layout."
)


@dataclasses.dataclass(frozen=True, eq=False)
class Split:
  """One Clothing1M split, described, not loaded.

  Attributes:
    name: 'noisy_train', 'clean_train', 'clean_val' or 'clean_test'.
    root: the dataset folder; image i is at os.path.join(root, keys[i]).
    keys: object [N] image keys (paths relative to root) in the order of the split's key list.
    labels: int32 [N] the split's labels: noisy for 'noisy_train', hand-checked for the clean splits.
    clean_labels: int32 [N] hand-checked labels where known, -1 elsewhere (equal to `labels` for clean splits).
    class_names: the 14 names of category_names_eng.txt.
  """

  name: str
  root: str
  keys: np.ndarray
  labels: np.ndarray
  clean_labels: np.ndarray
  class_names: tuple[str, ...]

  @property
  def num_examples(self) -> int:
    return len(self.keys)

  @property
  def indices(self) -> np.ndarray:
    """int64 [N]: example i has index i (its row in the key list and in a label table)."""
    return np.arange(self.num_examples, dtype=np.int64)

  def path(self, index: int) -> str:
    return os.path.join(self.root, self.keys[index])


def annotation_dir(root: str) -> str:
  """The folder holding the annotation files: `root` itself, or `root/annotations`.

  Raises:
    FileNotFoundError: naming `root` when it is not a folder, or category_names_eng.txt when neither place has it.
  """
  if not os.path.isdir(root):
    raise errors.MissingInputError(f"Clothing1M root {root!r} is not a folder. {_HOW_TO_GET}")
  for folder in (root, os.path.join(root, "annotations")):
    if os.path.isfile(os.path.join(folder, CATEGORY_FILE)):
      return folder
  raise errors.MissingInputError(
    f"Clothing1M: {CATEGORY_FILE} is missing from {root!r} (looked in {root!r} and "
    f"{os.path.join(root, 'annotations')!r}). {_HOW_TO_GET}"
  )


def check_layout(root: str, splits=tuple(SPLITS)) -> str:
  """Checks the files that `splits` need (and images/) exist; returns the annotation folder.

  Raises:
    FileNotFoundError: naming the first missing file or folder.
  """
  folder = annotation_dir(root)
  for split in splits:
    _checks.check_choice("Clothing1M split", split, SPLITS)
  needed = [CATEGORY_FILE] + sorted({f for split in splits for f in SPLITS[split]})
  for name in needed:
    if not os.path.isfile(os.path.join(folder, name)):
      raise errors.MissingInputError(f"Clothing1M: {name} is missing from {folder!r}. {_HOW_TO_GET}")
  if not os.path.isdir(os.path.join(root, "images")):
    raise errors.MissingInputError(
      f"Clothing1M: the image folder {os.path.join(root, 'images')!r} is missing. {_HOW_TO_GET}"
    )
  return folder


def _read_lines(path: str) -> list[str]:
  with open(path, encoding="utf-8") as f:
    return [line.strip() for line in f if line.strip()]


def _read_labels(path: str) -> dict[str, int]:
  """'<key> <label>' lines -> {key: label}; the label is the last field (keys hold commas, never spaces)."""
  labels = {}
  for number, line in enumerate(_read_lines(path), start=1):
    fields = line.rsplit(maxsplit=1)
    if len(fields) != 2 or not fields[1].lstrip("-").isdigit():
      raise errors.InputError(f"{path}, line {number}: {line!r} is not '<image key> <integer label>'.")
    labels[fields[0]] = int(fields[1])
  return labels


def class_names(root: str) -> tuple[str, ...]:
  """The 14 class names, class id = line number of category_names_eng.txt."""
  names = tuple(_read_lines(os.path.join(annotation_dir(root), CATEGORY_FILE)))
  if len(names) != NUM_CLASSES:
    raise errors.InputError(f"Clothing1M: {CATEGORY_FILE} lists {len(names)} classes; expected {NUM_CLASSES}.")
  return names


def load_split(root: str, split: str, *, max_examples: int | None = None) -> Split:
  """Reads one split's key list and labels (not its images).

  Args:
    root: the dataset folder (layout in the module docstring).
    split: 'noisy_train', 'clean_train', 'clean_val' or 'clean_test'.
    max_examples: keep only the first max_examples keys of the list (quick runs); None keeps all.

  Raises:
    FileNotFoundError: a missing file or folder (named), or a missing first image (a layout problem, e.g. the tars
      extracted without their images/ prefix).
    ValueError: an unknown split, a key without a label, a label outside [0, 14), a malformed line.
  """
  folder = check_layout(root, (split,))
  names = class_names(root)
  key_file, label_file = SPLITS[split]
  keys = _read_lines(os.path.join(folder, key_file))
  if max_examples is not None:
    _checks.check_range("max_examples", max_examples, 1, float("inf"))
    keys = keys[: int(max_examples)]
  if not keys:
    raise errors.InputError(f"Clothing1M: {key_file} lists no image.")
  given = _read_labels(os.path.join(folder, label_file))
  missing = [k for k in keys if k not in given]
  if missing:
    raise errors.InputError(
      f"Clothing1M: {len(missing)} key(s) of {key_file} have no label in {label_file}, e.g. {missing[0]!r}."
    )
  labels = np.array([given[k] for k in keys], np.int64)
  bad = np.flatnonzero((labels < 0) | (labels >= NUM_CLASSES))
  if bad.size:
    raise errors.InputError(
      f"Clothing1M: {label_file} gives {keys[bad[0]]!r} (listed in {key_file}) the label "
      f"{labels[bad[0]]}, outside the class ids 0..{NUM_CLASSES - 1}."
    )
  if label_file == CLEAN_LABELS_FILE:
    clean = labels
  else:
    clean_given = _read_labels(os.path.join(folder, CLEAN_LABELS_FILE))
    clean = np.array([clean_given.get(k, -1) for k in keys], np.int64)
  first = os.path.join(root, keys[0])
  if not os.path.isfile(first):
    raise errors.MissingInputError(
      f"Clothing1M: the first image of {key_file}, {first!r}, does not exist. {_HOW_TO_GET}"
    )
  return Split(
    name=split,
    root=root,
    keys=np.array(keys, dtype=object),
    labels=labels.astype(np.int32),
    clean_labels=clean.astype(np.int32),
    class_names=names,
  )


def load(
  root: str,
  *,
  image_size: int | None = 224,
  noisy_train: bool = True,
  max_examples: int | None = None,
  validation_size: int | float | None = None,
  seed: int = disk.SPLIT_SEED,
  channels: int = 3,
  decode: bool = False,
  on_bad_file: str = "error",
  max_bad_fraction: float = bad_files.DEFAULT_MAX_FRACTION,
) -> arrays.Dataset:
  """Clothing1M as a Dataset for the trainer (registered as 'clothing1m'; layout in the module docstring).

  Rows: training example i is key i of noisy_train_key_list.txt (clean_train_key_list.txt with noisy_train=False),
  validation and test rows follow clean_val_key_list.txt and clean_test_key_list.txt. Class id c is line c of
  category_names_eng.txt (never re-sorted). Sources are the keys, e.g. 'images/0/61/2358596911,1.jpg'.

  Args:
    root: the dataset folder (annotation files in it or in root/annotations).
    image_size: S: every image's shorter side resized to S, then the centre S x S crop (noisy_jax.data.images);
      None keeps the files' size, which then must agree (it does not in Clothing1M).
    noisy_train: train on the 1M noisy rows with their noisy labels (True: what the papers do; labels taken as
      given, so the trainer's noise type is 'none') or on the 47,570 hand-checked clean_train rows (False).
    max_examples: keep the first max_examples rows of every split (quick runs); None keeps all.
    validation_size: None: clean_val is the validation split. An int count or float fraction carves the
      validation split from the training rows instead (stratified by their labels, noisy ones with noisy_train;
      clean_val is then not read); 0: no validation split.
    seed: seed of that carving.
    channels: 3 (default: a grayscale file is repeated over RGB) or 1.
    decode: False (default) keeps every split on disk as image_files.ImageFiles (decoded when the trainer reads
      it); True decodes everything now (uint8 [N, S, S, channels]: only sensible with max_examples).
    on_bad_file, max_bad_fraction: what a file that cannot be decoded does (disk.image_folder; default
      'error').

  Returns:
    A Dataset: x_* uint8 images or ImageFiles (pixel_max 255), y_train the given (noisy) training labels, y_val
    and y_test hand-checked labels, the 14 class_names, sources per row.

  Raises:
    FileNotFoundError: naming a missing annotation file or folder, or a listed image that does not exist (with its
      key list and row).
    ValueError: a malformed line, a key without a label, or a label outside 0..13 (naming the file and key).
  """
  bad_files.check_options(on_bad_file, max_bad_fraction)  # before any file is listed
  splits = {"train": "noisy_train" if noisy_train else "clean_train", "test": "clean_test"}
  if validation_size is None:
    splits["val"] = "clean_val"
  names = class_names(root)
  listing = {}
  for split, name in splits.items():
    rows = load_split(root, name, max_examples=max_examples)
    missing = file_lists.first_missing(root, rows.keys)
    if missing is not None:
      raise errors.MissingInputError(
        f"Clothing1M: image {rows.path(missing)!r} does not exist; it is key {missing + 1} "
        f"of {SPLITS[name][0]}. {_HOW_TO_GET}"
      )
    listing[split] = [(str(key), names[label]) for key, label in zip(rows.keys, rows.labels)]
  return disk.from_listing(
    "clothing1m",
    listing,
    root,
    image_size=image_size,
    classes=names,
    validation_size=validation_size,
    seed=seed,
    where=f"Clothing1M at {root!r}",
    channels=channels,
    decode=decode,
    on_bad_file=on_bad_file,
    max_bad_fraction=max_bad_fraction,
  )


def decode(path: str, *, resize: int = 256, crop: int = 224, rng: np.random.Generator | None = None) -> np.ndarray:
  """One image: decode (pillow, RGB), resize its shorter side to `resize` (bilinear), crop `crop` x `crop`.

  With `rng` the crop is uniformly random and the image is flipped horizontally with probability 1/2 (training);
  without, the crop is centred (evaluation). Returns uint8 [crop, crop, 3].
  """
  from PIL import Image  # pylint: disable=g-import-not-at-top

  with Image.open(path) as image:
    image = image.convert("RGB")
    width, height = image.size
    scale = resize / min(width, height)
    size = (max(crop, round(width * scale)), max(crop, round(height * scale)))
    image = image.resize(size, Image.BILINEAR)
  width, height = size
  if rng is None:
    left, top = (width - crop) // 2, (height - crop) // 2
  else:
    left, top = int(rng.integers(0, width - crop + 1)), int(rng.integers(0, height - crop + 1))
  pixels = np.asarray(image.crop((left, top, left + crop, top + crop)), np.uint8)
  if rng is not None and rng.random() < 0.5:
    pixels = pixels[:, ::-1]
  return np.ascontiguousarray(pixels)


def iterate_batches(
  split: Split,
  *,
  batch_size: int,
  seed: int = 0,
  epoch: int = 0,
  train: bool = True,
  shuffle: bool | None = None,
  drop_remainder: bool = False,
  dtype: str = "uint8",
  resize: int = 256,
  crop: int = 224,
  num_workers: int = 4,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
  """Yields the split's batches as (indices int64 [B], images [B, crop, crop, 3], labels int32 [B]).

  Deterministic: the order is a permutation drawn from (seed, epoch) (when shuffling), and example i's random crop
  and flip from (seed, epoch, i), so they do not depend on the batch size or on num_workers.

  Args:
    split: from `load_split`.
    batch_size: B; the last batch is smaller unless drop_remainder.
    seed, epoch: the randomness (vary the epoch for a new order and new crops every epoch).
    train: random crop + horizontal flip (True) or a center crop (False).
    shuffle: permute the examples; defaults to `train`.
    dtype: 'uint8' (0..255) or 'float32' (pixel / 255, in [0, 1]).
    resize, crop: the shorter side is resized to `resize`, then a `crop` x `crop` window is cut.
    num_workers: threads decoding one batch (pillow releases the GIL); 0 decodes in this thread.
  """
  _checks.check_choice("dtype", dtype, ("uint8", "float32"))
  if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
    raise ValueError(f"batch_size={batch_size!r} must be an integer >= 1.")
  if crop > resize:
    raise ValueError(f"crop={crop} must be <= resize={resize}.")
  shuffle = train if shuffle is None else shuffle
  order = (
    np.random.default_rng((seed, epoch)).permutation(split.num_examples) if shuffle else np.arange(split.num_examples)
  )
  stop = (len(order) // batch_size) * batch_size if drop_remainder else len(order)

  def one(index):
    rng = np.random.default_rng((seed, epoch, int(index))) if train else None
    return decode(split.path(index), resize=resize, crop=crop, rng=rng)

  pool = futures.ThreadPoolExecutor(num_workers) if num_workers > 0 else None
  try:
    for start in range(0, stop, batch_size):
      indices = order[start : min(start + batch_size, stop)].astype(np.int64)
      images = np.stack(list(pool.map(one, indices) if pool else map(one, indices)))
      if dtype == "float32":
        images = np.multiply(images, np.float32(1.0 / 255.0), dtype=np.float32)
      yield indices, images, split.labels[indices]
  finally:
    if pool is not None:
      pool.shutdown(wait=True)
