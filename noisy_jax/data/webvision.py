"""mini-WebVision: the first 50 classes of WebVision 1.0's Google images (Li et al., "WebVision Database: Visual
Learning and Understanding from Web Data", arXiv:1708.02862, 2017), the benchmark of DivideMix and ELR.

WebVision 1.0 holds 2.4M web images of the 1000 ILSVRC-2012 classes, labelled by the query that found them (so
the training labels are noisy and no clean label is known). The "mini" benchmark keeps the Google part of the first
50 classes, about 66k training images, and reports accuracy on WebVision's validation set (2,500 images of those
classes, 50 each, hand-labelled) as the TEST accuracy; the papers often add the matching ILSVRC-2012 validation
images, which this module does not read. Manual download from https://data.vision.ee.ethz.ch/cvl/webvision/
(google_resized_256.tar: the Google images, shorter side 256; val_images_256.tar; info.tar: the lists), unpacked
into ROOT; noisy_jax never downloads it.

Layout read here (as DivideMix's dataloader_webvision.py and ELR's ELR_plus/data_loader/webvision.py read it):

  ROOT/
    info/train_filelist_google.txt   '<path> <label>' per line, the image being ROOT/<path> (the path as the list
                                     gives it: keep the folder the Google tar unpacks to where the list expects it)
    info/val_filelist.txt            '<file name> <label>' per line, the image being ROOT/val_images_256/<file name>
    info/synsets.txt                 optional: class c's WordNet id and name on line c ('n01440764 tench, ...')
    val_images_256/                  the validation images

Labels are integers 0..999; rows whose label is not below `num_classes` are dropped (50: mini-WebVision).

Dataset ('mini_webvision' in noisy_jax.data.DATASETS): training example i is the i-th kept row of
train_filelist_google.txt, y_train its given (noisy) label, so the trainer's noise type is 'none'; the test split
is the kept rows of val_filelist.txt; there is no validation split in the release, so `validation_size` (None:
10%) is carved stratified from the training rows (their labels are noisy too; validation_size=0 trains on every
row, as the papers do). Class names: the first `num_classes` lines of info/synsets.txt when it exists, else '0',
'1', ... Sources: paths relative to ROOT (the training list's paths, 'val_images_256/<file name>').

Preprocessing. The papers train an Inception-ResNet-v2 on crops of the stored 256-pixel images, and the recipe
changed between versions of the same code: DivideMix at d9d3058 (the commit ../shared/REFERENCE.md pins) resizes the
shorter side to 320, then takes a RandomResizedCrop(299) with a horizontal flip for training and the centre 299 crop
for testing; its earlier commit 25aed25, and ELR, take a random 227 x 227 crop (flip) for training and the centre
227 crop for testing, without a resize. Here every split is decoded the evaluation way (shorter side resized to
`image_size`, default 224, then the centre crop: noisy_jax.data.images); augmentation is the trainer's, on the device.
"""

from __future__ import annotations

import os

from noisy_jax.core import errors
from noisy_jax.data import arrays
from noisy_jax.data import bad_files
from noisy_jax.data import disk
from noisy_jax.data import file_lists

TRAIN_LIST = os.path.join("info", "train_filelist_google.txt")
TEST_LIST = os.path.join("info", "val_filelist.txt")
SYNSETS = os.path.join("info", "synsets.txt")
TEST_IMAGES = "val_images_256"
ALL_CLASSES = 1000
MINI_CLASSES = 50
# What ROOT must hold, for the message of a run that names none (noisy_jax.data.missing_arguments).
ROOT_HOLDS = (
  f"WebVision 1.0's lists {TRAIN_LIST} and {TEST_LIST} (info.tar), the Google images where the training list "
  f"places them (google_resized_256.tar) and the validation images in ROOT/{TEST_IMAGES} (val_images_256.tar)"
)
_HOW_TO_GET = (
  "WebVision 1.0 is a manual download (https://data.vision.ee.ethz.ch/cvl/webvision/): the resized "
  "Google images, the validation images and the info/ lists; see noisy_jax/data/webvision.py for the "
  "layout."
)


def class_names(root: str, num_classes: int = MINI_CLASSES) -> tuple[str, ...]:
  """Names of classes 0..num_classes-1: the first lines of ROOT/info/synsets.txt, or '0', '1', ... without it.

  Raises:
    ValueError: naming synsets.txt when it has fewer than num_classes lines.
  """
  path = os.path.join(root, SYNSETS)
  if not os.path.isfile(path):
    return tuple(str(c) for c in range(num_classes))
  with open(path, encoding="utf-8") as f:
    lines = [line.strip() for line in f if line.strip()]
  if len(lines) < num_classes:
    raise errors.InputError(f"{path!r} names {len(lines)} classes, fewer than num_classes={num_classes}.")
  return tuple(lines[:num_classes])


def read_list(root: str, list_file: str, num_classes: int, *, folder: str = "") -> list[tuple[str, int]]:
  """The rows of ROOT/list_file whose label is below num_classes, as (path relative to ROOT, label), in file order.

  `folder` is prefixed to each listed path (the validation list names files inside val_images_256/).

  Raises:
    FileNotFoundError: naming the list file when missing, or a kept row's image that does not exist (with its line).
    ValueError: naming the list file and line of a malformed line or of a label outside 0..999.
  """
  path = os.path.join(root, list_file)
  if not os.path.isfile(path):
    raise errors.MissingInputError(f"mini-WebVision: the list file {path!r} does not exist. {_HOW_TO_GET}")
  rows = []
  for number, listed, label in file_lists.read_path_labels(path):
    if not 0 <= label < ALL_CLASSES:
      raise errors.InputError(
        f"{path}, line {number}: label {label} of {listed!r} is outside WebVision's class ids 0..{ALL_CLASSES - 1}."
      )
    if label < num_classes:
      rows.append((number, os.path.join(folder, listed) if folder else listed, label))
  missing = file_lists.first_missing(root, [listed for _, listed, _ in rows])
  if missing is not None:
    number, listed, _ = rows[missing]
    raise errors.MissingInputError(f"{path}, line {number}: image {os.path.join(root, listed)!r} does not exist.")
  return [(listed, label) for _, listed, label in rows]


def mini_webvision(
  root: str,
  *,
  num_classes: int = MINI_CLASSES,
  image_size: int | None = 224,
  validation_size: int | float | None = None,
  seed: int = disk.SPLIT_SEED,
  channels: int = 3,
  decode: bool = False,
  on_bad_file: str = "error",
  max_bad_fraction: float = bad_files.DEFAULT_MAX_FRACTION,
) -> arrays.Dataset:
  """(mini-)WebVision's Google training images and its validation set as the test split (module docstring).

  Args:
    root: ROOT of the layout above.
    num_classes: keep the rows of the first num_classes classes (50: mini-WebVision; up to 1000: all of
      WebVision's Google images).
    image_size: S: every image's shorter side resized to S, then the centre S x S crop; None keeps the files'
      size, which must then agree (it does not in WebVision).
    validation_size: the stratified validation split carved from the training rows (an int count or a float
      fraction; None: 10%; 0: none, every training row is trained on).
    seed: seed of that carving.
    channels: 3 (default: a grayscale file is repeated over RGB) or 1.
    decode: False (default) keeps the splits on disk (image_files.ImageFiles; the trainer streams them or loads
      them when they fit its memory budget); True decodes every image now (66k x 224 x 224 x 3 is 10 GB).
    on_bad_file, max_bad_fraction: what a file that cannot be decoded does (disk.image_folder; default
      'error').

  Returns:
    A Dataset: y_train the given (noisy) labels, y_test the hand-checked validation labels, class_names and
    sources per row.

  Raises:
    FileNotFoundError, ValueError: naming the bad file, line or value (read_list, class_names).
  """
  bad_files.check_options(on_bad_file, max_bad_fraction)  # before any file is listed
  if isinstance(num_classes, bool) or not isinstance(num_classes, int) or not 1 <= num_classes <= ALL_CLASSES:
    raise errors.InputError(f"num_classes={num_classes!r} must be an integer in 1..{ALL_CLASSES} (50: mini-WebVision).")
  if not os.path.isdir(root):
    raise errors.MissingInputError(f"mini-WebVision root {root!r} is not a folder. {_HOW_TO_GET}")
  names = class_names(root, num_classes)
  listing = {}
  for split, list_file, folder in (("train", TRAIN_LIST, ""), ("test", TEST_LIST, TEST_IMAGES)):
    rows = read_list(root, list_file, num_classes, folder=folder)
    if not rows:
      raise errors.InputError(
        f"{os.path.join(root, list_file)!r} has no row with a label below num_classes={num_classes}."
      )
    listing[split] = [(listed, names[label]) for listed, label in rows]
  return disk.from_listing(
    "mini_webvision",
    listing,
    root,
    image_size=image_size,
    classes=names,
    validation_size=validation_size,
    seed=seed,
    where=f"mini-WebVision at {root!r}",
    channels=channels,
    decode=decode,
    on_bad_file=on_bad_file,
    max_bad_fraction=max_bad_fraction,
  )
