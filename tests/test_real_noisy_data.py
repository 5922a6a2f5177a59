"""The published noisy-label datasets (Clothing1M, mini-WebVision, ANIMAL-10N) read from their release layouts.

Each test writes a miniature release in pytest's tmp_path: a few JPEG or PNG files in the official folders, each
image one flat colour that encodes its row, so a loaded row can be traced back to its file by its pixels. Nothing
here needs the real data or JAX.
"""

from __future__ import annotations

import os

import numpy as np
from PIL import Image
import pytest

from noisy_jax import data
from noisy_jax.data import animal10n
from noisy_jax.data import clothing1m
from noisy_jax.data import image_files
from noisy_jax.data import webvision


def _color(i: int) -> tuple[int, int, int]:
  """A flat colour per image number, far enough apart that JPEG's error cannot confuse two of them."""
  return (20 * (i % 12), 20 * ((i // 12) % 12), 200 - 10 * (i % 7))


def _write(path, i: int, size=(12, 10)):
  """Writes image number i (width x height `size`) at `path`, JPEG or PNG by its extension."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  Image.new("RGB", size, _color(i)).save(path, quality=95)


def _number(row: np.ndarray) -> int:
  """The image number whose colour a decoded row shows (nearest colour among the first 200)."""
  mean = np.asarray(row, np.float64).reshape(-1, row.shape[-1]).mean(axis=0)
  return int(np.argmin([np.abs(mean - _color(i)).max() for i in range(200)]))


def _same_dataset(a, b):
  """Equal splits, labels, class names and sources; a's splits may be on disk (ImageFiles), b's decoded."""
  assert a.class_names == b.class_names and a.num_classes == b.num_classes
  for split in ("train", "val", "test"):
    x = getattr(a, f"x_{split}")
    if len(x):
      assert isinstance(x, image_files.ImageFiles)
    np.testing.assert_array_equal(np.asarray(x), getattr(b, f"x_{split}"))
    np.testing.assert_array_equal(getattr(a, f"y_{split}"), getattr(b, f"y_{split}"))
    np.testing.assert_array_equal(getattr(a, f"{split}_sources"), getattr(b, f"{split}_sources"))


def test_registered_as_file_loaders():
  for name in ("clothing1m", "mini_webvision", "animal10n"):
    assert name in data.DATASETS and name in data.ON_DISK


# ---------------------------------------------------------------------------------------------------------------
# Clothing1M

CLOTHING_NAMES = tuple(f"garment {c}" for c in range(14))


def _clothing(root, *, num_noisy=8):
  """A miniature Clothing1M: numbers 0..num_noisy-1 noisy training images, then clean train, val and 2 test.

  Noisy label of image i: (3 * i) % 14; clean label: (i + 1) % 14. Returns {split: [keys]}.
  """
  keys = [f"images/{i % 3}/{i:02d}/{5000 + i},1.jpg" for i in range(num_noisy + 4)]
  for i, key in enumerate(keys):
    _write(root / key, i, size=(14, 10) if i % 2 else (10, 12))
  split_keys = {
    "noisy_train": keys[:num_noisy],
    "clean_train": keys[num_noisy : num_noisy + 1],
    "clean_val": keys[num_noisy + 1 : num_noisy + 2],
    "clean_test": keys[num_noisy + 2 :],
  }
  clean = [keys[num_noisy - 1]] + keys[num_noisy:]  # the last noisy image has a clean label as well
  (root / "category_names_eng.txt").write_text("\n".join(CLOTHING_NAMES) + "\n")
  (root / "noisy_label_kv.txt").write_text("".join(f"{k} {(3 * i) % 14}\n" for i, k in enumerate(keys[:num_noisy])))
  (root / "clean_label_kv.txt").write_text("".join(f"{k} {(keys.index(k) + 1) % 14}\n" for k in clean))
  for split, listed in split_keys.items():
    (root / f"{split}_key_list.txt").write_text("\n".join(listed) + "\n")
  return split_keys


def test_clothing1m_rows_labels_names_and_sources(tmp_path):
  keys = _clothing(tmp_path)
  ds = data.load("clothing1m", root=str(tmp_path), image_size=8)
  assert ds.name == "clothing1m" and ds.num_classes == 14 and ds.class_names == CLOTHING_NAMES
  assert ds.on_disk and ds.input_shape == (8, 8, 3) and ds.sizes == {"train": 8, "val": 1, "test": 2}
  assert list(ds.train_sources) == keys["noisy_train"]
  assert list(ds.val_sources) == keys["clean_val"] and list(ds.test_sources) == keys["clean_test"]
  np.testing.assert_array_equal(ds.y_train, [(3 * i) % 14 for i in range(8)])  # the noisy labels, as given
  np.testing.assert_array_equal(ds.y_val, [10])  # clean labels of images 9, 10, 11
  np.testing.assert_array_equal(ds.y_test, [11, 12])
  loaded = ds.load()
  assert [_number(x) for x in loaded.x_train] == list(range(8)) and _number(loaded.x_test[1]) == 11
  _same_dataset(ds, data.load("clothing1m", root=str(tmp_path), image_size=8, decode=True))


def test_clothing1m_options(tmp_path):
  keys = _clothing(tmp_path)
  clean = clothing1m.load(str(tmp_path), image_size=8, noisy_train=False, validation_size=0)
  assert list(clean.train_sources) == keys["clean_train"] and clean.sizes == {"train": 1, "val": 0, "test": 2}
  np.testing.assert_array_equal(clean.y_train, [9])
  short = clothing1m.load(str(tmp_path), image_size=8, max_examples=1)
  assert short.sizes == {"train": 1, "val": 1, "test": 1}
  carved = clothing1m.load(str(tmp_path), image_size=8, validation_size=2)  # from the noisy rows, not clean_val
  assert carved.sizes == {"train": 6, "val": 2, "test": 2}
  assert set(carved.val_sources) <= set(keys["noisy_train"])


def test_clothing1m_bad_input_is_named(tmp_path):
  keys = _clothing(tmp_path)
  os.remove(tmp_path / keys["noisy_train"][5])
  with pytest.raises(FileNotFoundError, match=r"5005,1\.jpg' does not exist; it is key 6 of noisy_train_key_list"):
    clothing1m.load(str(tmp_path))
  _write(tmp_path / keys["noisy_train"][5], 5)
  labels = tmp_path / "noisy_label_kv.txt"
  good = labels.read_text()
  labels.write_text(good.replace(" 6\n", " 14\n"))  # image 2's label
  with pytest.raises(ValueError, match=r"noisy_label_kv.txt gives 'images/2/02/5002,1.jpg' .* label 14, outside"):
    clothing1m.load(str(tmp_path))
  labels.write_text(good.replace(" 6\n", "\n"))
  with pytest.raises(ValueError, match=r"noisy_label_kv.txt, line 3: .* is not '<image key> <integer label>'"):
    clothing1m.load(str(tmp_path))
  labels.write_text(good)
  os.remove(tmp_path / "clean_test_key_list.txt")
  with pytest.raises(FileNotFoundError, match="clean_test_key_list.txt is missing"):
    clothing1m.load(str(tmp_path))


# ---------------------------------------------------------------------------------------------------------------
# mini-WebVision


def _webvision(root, labels_train=(0, 1, 60, 2, 50, 1, 49), labels_test=(1, 0, 55, 2)):
  """A miniature WebVision: training image i has labels_train[i] (numbers 0..), test image j labels_test[j]
  (numbers 100 + j). Returns ([train paths], [test paths]) as listed."""
  train, test = [], []
  for i, label in enumerate(labels_train):
    listed = f"google_resized/q{label:04d}/q{label:04d}_{i:06d}.jpg"
    _write(root / listed, i, size=(16, 12))
    train.append(listed)
  for j, label in enumerate(labels_test):
    listed = f"val{j:08d}.jpg"
    _write(root / "val_images_256" / listed, 100 + j, size=(12, 16))
    test.append(listed)
  (root / "info").mkdir()
  (root / "info" / "train_filelist_google.txt").write_text("".join(f"{p} {y}\n" for p, y in zip(train, labels_train)))
  (root / "info" / "val_filelist.txt").write_text("".join(f"{p} {y}\n" for p, y in zip(test, labels_test)) + "\n")
  return train, test


def test_webvision_keeps_the_first_classes_in_list_order(tmp_path):
  train, test = _webvision(tmp_path)
  ds = data.load("mini_webvision", root=str(tmp_path), image_size=8, validation_size=0)
  assert ds.name == "mini_webvision" and ds.num_classes == 50 and ds.on_disk
  assert ds.class_names == tuple(str(c) for c in range(50)) and ds.input_shape == (8, 8, 3)
  kept = [0, 1, 3, 5, 6]  # labels 60 and 50 are not among the first 50 classes
  assert list(ds.train_sources) == [train[i] for i in kept]
  np.testing.assert_array_equal(ds.y_train, [0, 1, 2, 1, 49])
  assert list(ds.test_sources) == [f"val_images_256/{test[j]}" for j in (0, 1, 3)]
  np.testing.assert_array_equal(ds.y_test, [1, 0, 2])
  loaded = ds.load()
  assert [_number(x) for x in loaded.x_train] == kept
  assert [_number(x) for x in loaded.x_test] == [100, 101, 103]
  _same_dataset(ds, webvision.mini_webvision(str(tmp_path), image_size=8, validation_size=0, decode=True))
  wide = webvision.mini_webvision(str(tmp_path), num_classes=61, image_size=8, validation_size=0)
  assert wide.num_train == 7 and wide.num_test == 4 and wide.class_names[60] == "60"


def test_webvision_class_names_from_synsets_and_carved_validation(tmp_path):
  _webvision(tmp_path)
  (tmp_path / "info" / "synsets.txt").write_text("".join(f"n{c:08d} animal {c}\n" for c in range(1000)))
  ds = webvision.mini_webvision(str(tmp_path), image_size=8, validation_size=1)
  assert ds.class_names[:2] == ("n00000000 animal 0", "n00000001 animal 1") and len(ds.class_names) == 50
  assert ds.sizes == {"train": 4, "val": 1, "test": 3}
  (tmp_path / "info" / "synsets.txt").write_text("n0 a\n")
  with pytest.raises(ValueError, match=r"synsets.txt' names 1 classes, fewer than num_classes=50"):
    webvision.mini_webvision(str(tmp_path))


@pytest.mark.parametrize(
  "case", ["missing list", "missing image", "malformed line", "label out of range", "no kept row", "num_classes"]
)
def test_webvision_bad_input_is_named(tmp_path, case):
  train, test = _webvision(tmp_path)
  lists = tmp_path / "info"
  error, match, kwargs = ValueError, None, {}
  if case == "missing list":
    os.remove(lists / "val_filelist.txt")
    error, match = FileNotFoundError, r"list file .*info/val_filelist.txt' does not exist"
  elif case == "missing image":
    os.remove(tmp_path / "val_images_256" / test[3])
    error, match = FileNotFoundError, rf"val_filelist.txt, line 4: image .*val_images_256/{test[3]}' does not exist"
  elif case == "malformed line":
    (lists / "train_filelist_google.txt").write_text(f"{train[0]} 0\n{train[1]}\n")
    match = r"train_filelist_google.txt, line 2: .* is not '<image path> <integer label>'"
  elif case == "label out of range":
    (lists / "train_filelist_google.txt").write_text(f"{train[0]} 1000\n")
    match = r"train_filelist_google.txt, line 1: label 1000 of .* is outside WebVision's class ids 0..999"
  elif case == "no kept row":
    (lists / "val_filelist.txt").write_text(f"{test[2]} 55\n")
    match = r"val_filelist.txt' has no row with a label below num_classes=50"
  else:
    kwargs, match = {"num_classes": 0}, r"num_classes=0 must be an integer in 1..1000"
  with pytest.raises(error, match=match):
    webvision.mini_webvision(str(tmp_path), **kwargs)


# ---------------------------------------------------------------------------------------------------------------
# ANIMAL-10N


def _animal(root):
  """A miniature ANIMAL-10N: 8x8 PNGs named '<label>_<id>.png'. Returns {split: {file name: image number}}."""
  names = {
    "training": ["3_10.png", "3_9.png", "0_2.png", "9_1.png", "0_1.png", "7_x.png"],
    "testing": ["1_5.png", "0_7.png"],
  }
  counter = iter(range(100))
  numbers = {split: {name: next(counter) for name in files} for split, files in names.items()}
  for split, files in numbers.items():
    for name, number in files.items():
      _write(root / split / name, number, size=(8, 8))
  (root / "training" / ".DS_Store").write_text("ignored")
  return numbers


def test_animal10n_rows_labels_names_and_sources(tmp_path):
  numbers = _animal(tmp_path)
  ds = data.load("animal10n", root=str(tmp_path), validation_size=0)
  assert ds.name == "animal10n" and not ds.on_disk and ds.input_shape == (8, 8, 3)  # decoded by default
  assert ds.class_names == (
    "cat",
    "lynx",
    "wolf",
    "coyote",
    "cheetah",
    "jaguar",
    "chimpanzee",
    "orangutan",
    "hamster",
    "guinea pig",
  )
  order = ["0_1.png", "0_2.png", "3_9.png", "3_10.png", "7_x.png", "9_1.png"]  # by label, then id as a number
  assert list(ds.train_sources) == [f"training/{n}" for n in order]
  np.testing.assert_array_equal(ds.y_train, [0, 0, 3, 3, 7, 9])
  assert [_number(x) for x in ds.x_train] == [numbers["training"][n] for n in order]
  assert list(ds.test_sources) == ["testing/0_7.png", "testing/1_5.png"]
  np.testing.assert_array_equal(ds.y_test, [0, 1])
  assert [_number(x) for x in ds.x_test] == [numbers["testing"]["0_7.png"], numbers["testing"]["1_5.png"]]
  _same_dataset(animal10n.animal10n(str(tmp_path), validation_size=0, decode=False), ds)
  resized = animal10n.animal10n(str(tmp_path), image_size=4, validation_size=2)
  assert resized.input_shape == (4, 4, 3) and resized.sizes == {"train": 4, "val": 2, "test": 2}


@pytest.mark.parametrize(
  "name, match",
  [
    ("cat_3.png", r"cat_3.png': an ANIMAL-10N file name is '<label>_<id>.jpg' with the class id 0..9"),
    ("12.png", r"12.png': an ANIMAL-10N file name is"),
    ("10_3.png", r"10_3.png': label 10 is not an ANIMAL-10N class id \(0..9\)"),
    ("4_3.txt", r"4_3.txt' is not an image file"),
  ],
)
def test_animal10n_bad_file_names_are_named(tmp_path, name, match):
  _animal(tmp_path)
  (tmp_path / "testing" / name).write_text("x")
  with pytest.raises(ValueError, match=match):
    animal10n.animal10n(str(tmp_path))


def test_animal10n_missing_folder_and_undecodable_file(tmp_path):
  _animal(tmp_path)
  (tmp_path / "training" / "5_1.png").write_text("not an image")
  with pytest.raises(ValueError, match=r"cannot decode image file .*training/5_1.png"):
    animal10n.animal10n(str(tmp_path))
  os.rename(tmp_path / "testing", tmp_path / "test")
  with pytest.raises(FileNotFoundError, match=r"the folder .*testing' is missing"):
    animal10n.animal10n(str(tmp_path))


@pytest.mark.parametrize("reader", ["clothing1m", "mini_webvision", "animal10n"])
def test_every_reader_passes_on_bad_file_on(tmp_path, reader):
  """A cut training file: 'error' names it, 'skip' (max_bad_fraction raised: the datasets are tiny) drops its row."""
  if reader == "clothing1m":
    bad = _clothing(tmp_path)["noisy_train"][2]
  elif reader == "mini_webvision":
    bad = _webvision(tmp_path)[0][1]
  else:
    _animal(tmp_path)
    bad = "training/0_2.png"
  whole = data.load(reader, root=str(tmp_path), image_size=8, decode=True)
  (tmp_path / bad).write_bytes((tmp_path / bad).read_bytes()[:20])
  with pytest.raises(ValueError, match=os.path.basename(bad)):
    data.load(reader, root=str(tmp_path), image_size=8, decode=True)
  skipped = data.load(reader, root=str(tmp_path), image_size=8, on_bad_file="skip", max_bad_fraction=0.5).load()
  (gone,) = skipped.skipped_files
  assert gone.split == "train" and bad.endswith(gone.file) and gone.error.startswith("cannot decode image file")
  keep = whole.train_sources != gone.file
  assert keep.sum() == len(keep) - 1
  np.testing.assert_array_equal(skipped.train_sources, whole.train_sources[keep])
  np.testing.assert_array_equal(skipped.x_train, whole.x_train[keep])
