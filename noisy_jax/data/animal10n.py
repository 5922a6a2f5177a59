"""ANIMAL-10N (Song, Kim and Lee, "SELFIE: Refurbishing Unclean Samples for Robust Deep Learning", ICML 2019).

55,000 64x64 RGB images of ten animals chosen in five confusable pairs (cat / lynx, wolf / coyote, cheetah /
jaguar, chimpanzee / orangutan, hamster / guinea pig), labelled by people: the training labels are noisy
(the authors estimate 8% wrong) and taken as given. 50,000 training and 5,000 test images. Manual download
(https://dm.kaist.ac.kr/datasets/animal-10n/); noisy_jax never downloads it.

Layout (the image release; the binary one is not read), the label being the class id before the first '_':

  ROOT/training/<label>_<id>.jpg    a name starting '3_' is a coyote
  ROOT/testing/<label>_<id>.jpg

Dataset ('animal10n' in noisy_jax.data.DATASETS): training example i is the i-th file of ROOT/training in the order
(label, id: numerically when the id is a number, then by name); y_train the given (noisy) labels, so the trainer's
noise type is 'none'; the test rows are ROOT/testing in the same order; the release has no validation split, so
`validation_size` (None: 10%) is carved stratified from the training rows. Sources: 'training/<name>'.
Class names in class-id order, as the dataset's README lists them: cat, lynx, wolf, coyote, cheetah, jaguar,
chimpanzee, orangutan, hamster, guinea pig.

Preprocessing: SELFIE trains DenseNet and VGG networks on the 64x64 images as they are (no resize); this loader
keeps them so by default (image_size=None).
"""

from __future__ import annotations

import os
import re

from noisy_jax.core import errors
from noisy_jax.data import arrays
from noisy_jax.data import bad_files
from noisy_jax.data import disk
from noisy_jax.data import images

# Class id c is CLASS_NAMES[c]: the order of the dataset's README as the loaders of several public codebases
# reproduce it (the README itself was not read here). One of those codebases remarks that in the released files
# ids 4 and 5 (cheetah, jaguar) look swapped; that is unchecked here, and the ids stay the files' own.
CLASS_NAMES = ("cat", "lynx", "wolf", "coyote", "cheetah", "jaguar", "chimpanzee", "orangutan", "hamster", "guinea pig")
SPLIT_FOLDERS = {"train": "training", "test": "testing"}
_FILE_NAME = re.compile(r"([0-9]+)_(.+)")
# What ROOT must hold, for the message of a run that names none (noisy_jax.data.missing_arguments).
ROOT_HOLDS = "ANIMAL-10N's image release: ROOT/training/<label>_<id>.jpg and ROOT/testing/<label>_<id>.jpg"
_HOW_TO_GET = (
  "ANIMAL-10N is a manual download (https://dm.kaist.ac.kr/datasets/animal-10n/): unpack its "
  "training/ and testing/ image folders into ROOT; see noisy_jax/data/animal10n.py for the layout."
)


def _order(name: str):
  """Sort key of a checked file name: (label, id as a number when it is one, name)."""
  label, rest = _FILE_NAME.fullmatch(name).groups()
  stem = os.path.splitext(rest)[0]
  return (int(label), 0 if stem.isdigit() else 1, int(stem) if stem.isdigit() else 0, name)


def list_files(root: str) -> disk.Listing:
  """{'train': [('training/<name>', class name)], 'test': [...]}, each sorted by (label, id); no image is read.

  Hidden files (names starting with '.') are ignored.

  Raises:
    FileNotFoundError: naming ROOT, ROOT/training or ROOT/testing when missing.
    ValueError: naming a file whose name is not '<label>_<id>' with a label in 0..9, a non-image file, a
      sub-folder, or an empty split folder.
  """
  if not os.path.isdir(root):
    raise errors.MissingInputError(f"ANIMAL-10N root {root!r} is not a folder. {_HOW_TO_GET}")
  listing = {}
  for split, folder_name in SPLIT_FOLDERS.items():
    folder = os.path.join(root, folder_name)
    if not os.path.isdir(folder):
      raise errors.MissingInputError(f"ANIMAL-10N: the folder {folder!r} is missing. {_HOW_TO_GET}")
    names = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    for name in names:
      path = os.path.join(folder, name)
      if not os.path.isfile(path) or not name.lower().endswith(images.IMAGE_EXTENSIONS):
        raise errors.InputError(
          f"{path!r} is not an image file: ANIMAL-10N's {folder_name}/ holds only "
          f"<label>_<id>{'|'.join(images.IMAGE_EXTENSIONS)} files."
        )
      match = _FILE_NAME.fullmatch(name)
      if match is None:
        raise errors.InputError(
          f"{path!r}: an ANIMAL-10N file name is '<label>_<id>.jpg' with the class id 0..9 before the first '_'."
        )
      if int(match.group(1)) >= len(CLASS_NAMES):
        raise errors.InputError(f"{path!r}: label {match.group(1)} is not an ANIMAL-10N class id (0..9).")
    if not names:
      raise errors.InputError(f"ANIMAL-10N: the folder {folder!r} holds no image. {_HOW_TO_GET}")
    listing[split] = [
      (f"{folder_name}/{name}", CLASS_NAMES[int(_FILE_NAME.fullmatch(name).group(1))])
      for name in sorted(names, key=_order)
    ]
  return listing


def animal10n(
  root: str,
  *,
  image_size: int | None = None,
  validation_size: int | float | None = None,
  seed: int = disk.SPLIT_SEED,
  channels: int = 3,
  decode: bool = True,
  on_bad_file: str = "error",
  max_bad_fraction: float = bad_files.DEFAULT_MAX_FRACTION,
) -> arrays.Dataset:
  """ANIMAL-10N's training and test images with their given labels (layout in the module docstring).

  Args:
    root: ROOT holding training/ and testing/.
    image_size: None (default) keeps the 64x64 files; S resizes every image's shorter side to S and centre-crops
      S x S (noisy_jax.data.images).
    validation_size: the stratified validation split carved from the training rows (an int count or a float
      fraction; None: 10%; 0: none).
    seed: seed of that carving.
    channels: 3 (default: a grayscale file is repeated over RGB) or 1.
    decode: True (default) decodes every image now: 55,000 x 64 x 64 x 3 uint8 is 676 MB, which fits in the host
      memory of any machine that trains on it, and gives arrays that every part of the library accepts. False
      keeps the splits on disk (image_files.ImageFiles). The trainer passes decode=False itself unless
      config.input is 'resident', then loads or streams the splits by its memory budget, so the default only
      matters when the loader is called directly.
    on_bad_file, max_bad_fraction: what a file that cannot be decoded does (disk.image_folder; default
      'error').

  Returns:
    A Dataset: uint8 [N, 64, 64, 3] images (pixel_max 255) or ImageFiles, y_train the given (noisy) labels, the
    ten class_names and sources per row.

  Raises:
    FileNotFoundError, ValueError: naming the bad file or folder (list_files), or an undecodable image.
  """
  bad_files.check_options(on_bad_file, max_bad_fraction)  # before any file is listed
  listing = list_files(root)
  return disk.from_listing(
    "animal10n",
    listing,
    root,
    image_size=image_size,
    classes=CLASS_NAMES,
    validation_size=validation_size,
    seed=seed,
    where=f"ANIMAL-10N at {root!r}",
    channels=channels,
    decode=decode,
    on_bad_file=on_bad_file,
    max_bad_fraction=max_bad_fraction,
  )
