"""Datasets from disk (noisy_jax.data.disk, tfds_data.by_name): image folders, CSV manifests, .npz files, TFDS by name.

The image folders are written in pytest's tmp_path from a stratified subset of mnist5k (20 train and 5 test PNGs per
class), so every loaded pixel and label can be compared with the arrays it came from. The class folders are the
digits' English names, so the sorted class ids ('eight' = 0, ..., 'zero' = 9) differ from the digits. TFDS runs
offline under `tfds.testing.mock_data`.
"""

from __future__ import annotations

import csv
import json
import os
import shutil

from absl import flags
from ml_collections import config_flags
import numpy as np
from PIL import Image
import pytest
import tensorflow_datasets as tfds

from experiments.configs import ce
from noisy_jax import data
from noisy_jax.data import disk
from noisy_jax.data import inputs as data_inputs
from noisy_jax.experiment import inputs
from noisy_jax.experiment import runs

WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
PER_CLASS = {"train": 20, "test": 5}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
  """ROOT/{train,test}/WORD/ROW.png from mnist5k; returns (ROOT, {split: {source: (uint8 image, digit)}})."""
  mnist = data.load("mnist5k")
  root = tmp_path_factory.mktemp("digits")
  expected = {}
  for split, x, y in (("train", mnist.x_train, mnist.y_train), ("test", mnist.x_test, mnist.y_test)):
    rows = np.concatenate([np.flatnonzero(y == c)[: PER_CLASS[split]] for c in range(10)])
    expected[split] = {}
    for row in rows:
      source = f"{split}/{WORDS[y[row]]}/{row:04d}.png"
      os.makedirs(root / split / WORDS[y[row]], exist_ok=True)
      Image.fromarray(x[row, ..., 0]).save(root / source)
      expected[split][source] = (x[row], int(y[row]))
  return str(root), expected


def _check_rows(ds, root, expected, split):
  """Row i of the split is the file sources[i]: its mnist5k pixels (bit for bit, uint8) and digit."""
  x, y, sources = getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}"), getattr(ds, f"{split}_sources")
  assert len(sources) == len(y) == len(x)
  for i, source in enumerate(sources):
    pixels, digit = expected[source]
    np.testing.assert_array_equal(x[i], pixels)
    assert ds.class_names[y[i]] == WORDS[digit]
    assert os.path.isfile(os.path.join(root, source))


def _dataset_equal(a, b):
  assert a.class_names == b.class_names and a.num_classes == b.num_classes
  for split in ("train", "val", "test"):
    np.testing.assert_array_equal(getattr(a, f"x_{split}"), getattr(b, f"x_{split}"))
    np.testing.assert_array_equal(getattr(a, f"y_{split}"), getattr(b, f"y_{split}"))
    np.testing.assert_array_equal(getattr(a, f"{split}_sources"), getattr(b, f"{split}_sources"))


# ---------------------------------------------------------------------------------------------------------------
# Image folders and manifests


def test_image_folder_rows_are_the_files_pixels_labels_and_sources(folder):
  root, expected = folder
  ds = data.load("image_folder", root=root, validation_size=0)
  assert ds.name == "image_folder" and ds.num_classes == 10 and ds.input_shape == (28, 28, 1)  # grayscale: 1 channel
  assert (
    ds.class_names
    == tuple(sorted(WORDS))
    == ("eight", "five", "four", "nine", "one", "seven", "six", "three", "two", "zero")
  )
  assert ds.sizes == {"train": 200, "val": 0, "test": 50}
  for split in ("train", "test"):
    _check_rows(ds, root, expected[split], split)
    assert not getattr(ds, f"{split}_sources").flags.writeable
  # Row order: (class id, file name).
  assert list(ds.train_sources) == sorted(expected["train"], key=lambda s: (ds.class_names.index(s.split("/")[1]), s))
  np.testing.assert_array_equal(np.bincount(ds.y_test, minlength=10), [5] * 10)


def test_image_folder_carves_a_stratified_validation_split(folder):
  root, expected = folder
  full = data.load("image_folder", root=root, validation_size=0)
  ds = data.load("image_folder", root=root)  # no val folder: 10% carved, stratified, with a fixed seed
  assert ds.sizes == {"train": 180, "val": 20, "test": 50}
  np.testing.assert_array_equal(np.bincount(ds.y_val, minlength=10), [2] * 10)
  _check_rows(ds, root, expected["train"], "val")
  _check_rows(ds, root, expected["train"], "train")
  assert set(ds.train_sources).isdisjoint(ds.val_sources)
  assert set(ds.train_sources) | set(ds.val_sources) == set(full.train_sources)
  kept = [s for s in full.train_sources if s in set(ds.train_sources)]
  assert list(ds.train_sources) == kept  # the kept rows keep their order
  _dataset_equal(ds, data.load("image_folder", root=root))
  assert set(data.load("image_folder", root=root, seed=1).val_sources) != set(ds.val_sources)


def test_manifest_gives_the_same_dataset_as_the_folder(folder, tmp_path):
  root, _ = folder
  listing = disk.list_folder(root)
  manifest = os.path.join(root, "manifest.csv")
  with open(manifest, "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["path", "label", "split"])
    writer.writerows([source, label, split] for split, rows in listing.items() for source, label in rows)
  try:
    for kwargs in ({}, {"validation_size": 0}, {"validation_size": 30, "seed": 3}):
      _dataset_equal(
        data.load("image_folder", manifest=manifest, **kwargs), data.load("image_folder", root=root, **kwargs)
      )
  finally:
    os.remove(manifest)  # the folder is shared by the module's tests
  # Rows marked 'val' are the validation split (nothing carved); paths are relative to the CSV's folder.
  moved = tmp_path / "lists" / "m.csv"
  moved.parent.mkdir()
  rows = [
    (os.path.join("..", os.path.relpath(root, tmp_path), s), label, "val" if s.endswith(("0.png",)) else split)
    for split, split_rows in listing.items()
    for s, label in split_rows
  ]
  moved.write_text("path,label,split\n" + "".join(f"{p},{label},{split}\n" for p, label, split in rows))
  ds = data.load("image_folder", manifest=str(moved))
  assert ds.num_val == sum(split == "val" for _, _, split in rows) > 0
  assert list(ds.val_sources) == [p for p, _, split in rows if split == "val"]


def test_class_order_and_given_classes(folder):
  assert disk.class_order(["10", "2", "1", "-3"]) == ("-3", "1", "2", "10")
  assert disk.class_order(["b", "10", "a", "2"]) == ("10", "2", "a", "b")
  root, _ = folder
  ds = data.load("image_folder", root=root, classes=WORDS, validation_size=0)
  assert ds.class_names == WORDS
  np.testing.assert_array_equal(ds.y_train, [WORDS.index(s.split("/")[1]) for s in ds.train_sources])
  with pytest.raises(ValueError, match=r"label 'zero' of 'train/zero/\d+.png' is not in the class list .*`classes`"):
    data.load("image_folder", root=root, classes=WORDS[1:])


def test_integer_class_folders_are_ordered_as_integers(tmp_path):
  for split in ("train", "test"):
    for label in ("10", "2", "7"):
      _save(tmp_path / split / label / "x.png", (4, 4), mode="L")
  ds = data.load("image_folder", root=str(tmp_path), validation_size=0)
  assert ds.class_names == ("2", "7", "10")
  assert list(ds.train_sources) == ["train/2/x.png", "train/7/x.png", "train/10/x.png"]  # (class id, file name)
  np.testing.assert_array_equal(ds.y_train, [0, 1, 2])


def _save(path, size, mode="RGB", seed=0):
  """A random image of `size` = (width, height) at `path`; returns its pixels."""
  rng = np.random.default_rng(seed)
  shape = (size[1], size[0], 3) if mode == "RGB" else (size[1], size[0])
  pixels = rng.integers(0, 256, shape, dtype=np.uint8)
  path.parent.mkdir(parents=True, exist_ok=True)
  Image.fromarray(pixels).save(path)
  return pixels


def test_mixed_sizes_need_image_size_then_resize_and_centre_crop(tmp_path):
  wide = _save(tmp_path / "train/a/wide.png", (40, 30))
  _save(tmp_path / "train/b/tall.png", (30, 50), seed=1)
  gray = _save(tmp_path / "test/a/gray.png", (36, 32), mode="L", seed=2)
  _save(tmp_path / "test/b/square.png", (32, 32), seed=3)
  with pytest.raises(
    ValueError,
    match=r"images differ in size: '.*wide.png' is 40x30 .* but '.*tall.png' is 30x50; "
    r"pass image_size",
  ):
    data.load("image_folder", root=str(tmp_path), validation_size=0)
  ds = data.load("image_folder", root=str(tmp_path), image_size=32, validation_size=0)
  assert ds.input_shape == (32, 32, 3) and ds.sizes == {"train": 2, "val": 0, "test": 2}  # a colour image: RGB
  # 36x32 gray, shorter side already 32: only the centre crop, columns 2..33, repeated over 3 channels.
  np.testing.assert_array_equal(ds.x_test[0], np.repeat(gray[:, 2:34, None], 3, axis=-1))
  # 40x30: shorter side 30 -> 32, width round(40 * 32 / 30) = 43; then columns (43 - 32) // 2 = 5 .. 36.
  resized = np.asarray(Image.fromarray(wide).resize((43, 32), Image.BILINEAR))
  np.testing.assert_array_equal(ds.x_train[0], resized[:, 5:37])
  assert ds.x_train[1].shape == (32, 32, 3)
  with pytest.raises(ValueError, match="image_size=0 must be None"):
    data.load("image_folder", root=str(tmp_path), image_size=0)


def _tiny_folder(root):
  for split in ("train", "test"):
    for label in ("a", "b"):
      for i in range(2):
        _save(root / split / label / f"{i}.png", (8, 8), mode="L", seed=i)


def _manifest(root, rows):
  (root / "m.csv").write_text("".join(f"{line}\n" for line in rows))
  return {"manifest": str(root / "m.csv")}


BAD_INPUTS = {  # case -> (break the tiny folder [and return the loader's kwargs], the error, its message's regex)
  "undecodable file": (
    lambda r: (r / "train/a/0.png").write_bytes(b"not a png"),
    ValueError,
    r"cannot decode image file '.*train/a/0.png'",
  ),
  "truncated file": (
    lambda r: (r / "test/b/1.png").write_bytes((r / "test/b/1.png").read_bytes()[:60]),
    ValueError,
    r"cannot decode image file '.*test/b/1.png'",
  ),
  "manifest names a missing file": (
    lambda r: _manifest(
      r, ["path,label,split", "train/a/0.png,a,train", "train/a/gone.png,a,train", "test/a/0.png,a,test"]
    ),
    FileNotFoundError,
    r"m.csv, line 3: image file '.*train/a/gone.png' does not exist",
  ),
  "label outside the class list": (
    lambda r: _save(r / "test/c/0.png", (8, 8), mode="L"),
    ValueError,
    r"label 'c' of 'test/c/0.png' is not in the class list \('a', 'b'\)",
  ),
  "manifest label outside the class list": (
    lambda r: _manifest(r, ["path,label,split", "train/a/0.png,a,train", "test/a/0.png,cat,test"]),
    ValueError,
    r"label 'cat' of 'test/a/0.png' is not in the class list \('a'\)",
  ),
  "empty class folder": (lambda r: (r / "train/empty").mkdir(), ValueError, r"class folder '.*train/empty' is empty"),
  "unknown split folder": (
    lambda r: os.rename(r / "test", r / "testing"),
    ValueError,
    r"'.*testing' is not a split folder",
  ),
  "no train folder": (
    lambda r: os.rename(r / "train", r / ".train"),
    FileNotFoundError,
    r"'.*/train' is missing: an image folder needs ROOT/train/LABEL/",
  ),
  "non-image file": (
    lambda r: (r / "train/a/notes.txt").write_text("x"),
    ValueError,
    r"'.*train/a/notes.txt' is not an image file",
  ),
  "file outside a class folder": (
    lambda r: (r / "train/x.png").write_bytes(b""),
    ValueError,
    r"'.*train/x.png' is a file, but images belong in class folders",
  ),
  "manifest unknown split": (
    lambda r: _manifest(r, ["path,label,split", "train/a/0.png,a,training"]),
    ValueError,
    r"m.csv, line 2: split 'training' is not one of train, val, test",
  ),
  "manifest bad header": (
    lambda r: _manifest(r, ["file,label", "train/a/0.png,a"]),
    ValueError,
    r"m.csv' has the columns \['file', 'label'\]; expected path,label",
  ),
  "manifest without train rows": (
    lambda r: _manifest(r, ["path,label,split", "test/a/0.png,a,test"]),
    ValueError,
    r"m.csv' has no train row",
  ),
  "root and manifest": (
    lambda r: {"manifest": str(r / "m.csv"), "root": str(r)},
    ValueError,
    r"root=DIR or manifest=FILE.csv, exactly one",
  ),
  "missing root": (lambda r: {"root": str(r / "nowhere")}, FileNotFoundError, r"root '.*nowhere' is not a folder"),
  "val folder and validation_size": (
    lambda r: [_save(r / "val/a/0.png", (8, 8), mode="L"), {"validation_size": 2}][1],
    ValueError,
    r"validation_size=2 carves .* has a val split already",
  ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_named(tmp_path, case):
  _tiny_folder(tmp_path)
  breaking, error, match = BAD_INPUTS[case]
  kwargs = breaking(tmp_path)
  kwargs = kwargs if isinstance(kwargs, dict) else {}
  if "manifest" not in kwargs:
    kwargs.setdefault("root", str(tmp_path))
  with pytest.raises(error, match=match):
    data.load("image_folder", **kwargs)


def test_sixteen_bit_images_are_refused(tmp_path):
  _tiny_folder(tmp_path)
  Image.fromarray(np.full((8, 8), 1000, np.uint16)).save(tmp_path / "train/a/0.png")
  with pytest.raises(ValueError, match=r"train/a/0.png: pillow mode 'I(;16)?' .* not supported"):
    data.load("image_folder", root=str(tmp_path))


# ---------------------------------------------------------------------------------------------------------------
# npz


def test_npz_round_trip_equals_from_arrays(tmp_path):
  mnist = data.load("mnist5k")
  arrays = {
    "x_train": mnist.x_train[:100],
    "y_train": mnist.y_train[:100],
    "x_test": mnist.x_test[:30],
    "y_test": mnist.y_test[:30],
  }
  np.savez(tmp_path / "d.npz", **arrays)
  for validation_size in (None, 0, 25):
    ds = data.load("npz", path=str(tmp_path / "d.npz"), validation_size=validation_size)
    carve = 0.1 if validation_size is None else validation_size  # None: 10% without x_val
    ref = data.from_arrays(*arrays.values(), validation_size=carve, seed=disk.SPLIT_SEED)
    for split in ("train", "val", "test"):
      np.testing.assert_array_equal(getattr(ds, f"x_{split}"), getattr(ref, f"x_{split}"))
      np.testing.assert_array_equal(getattr(ds, f"y_{split}"), getattr(ref, f"y_{split}"))
    assert ds.class_names is None and ds.num_classes == 10
    rows = [int(s.removeprefix("npz:x_train[").removesuffix("]")) for s in ds.train_sources]
    np.testing.assert_array_equal(ds.x_train, arrays["x_train"][rows])
    assert list(ds.test_sources) == [f"npz:x_test[{i}]" for i in range(30)]
  names = np.array([f"digit {c}" for c in range(10)])
  np.savez(tmp_path / "v.npz", **arrays, x_val=mnist.x_val[:20], y_val=mnist.y_val[:20], class_names=names)
  ds = data.load("npz", path=str(tmp_path / "v.npz"))
  assert ds.sizes == {"train": 100, "val": 20, "test": 30} and ds.class_names == tuple(names)
  np.testing.assert_array_equal(ds.x_val, mnist.x_val[:20])
  assert ds.val_sources[19] == "npz:x_val[19]"


def test_npz_bad_files_are_named(tmp_path):
  path = str(tmp_path / "d.npz")
  np.savez(path, x_train=np.zeros((4, 2)), y_train=np.zeros(4, int), x_test=np.zeros((2, 2)), X_test=np.zeros(2))
  with pytest.raises(ValueError, match=r"d.npz' has the arrays .* missing \[\], unknown \['X_test'\]"):
    data.load("npz", path=path)
  np.savez(path, x_train=np.zeros((4, 2)), x_test=np.zeros((2, 2)), y_test=np.zeros(2, int))
  with pytest.raises(ValueError, match=r"d.npz' has the arrays .* missing \['y_train'\]"):
    data.load("npz", path=path)
  np.savez(path, x_train=np.zeros((4, 2)), y_train=np.zeros(4, int), x_test=np.zeros((2, 2)))
  with pytest.raises(ValueError, match=r"d.npz' has only one of x_test and y_test"):
    data.load("npz", path=path)
  (tmp_path / "bad.npz").write_bytes(b"not a zip")
  with pytest.raises(ValueError, match=r"cannot read '.*bad.npz' as a .npz archive"):
    data.load("npz", path=str(tmp_path / "bad.npz"))
  np.save(tmp_path / "one.npy", np.zeros(3))
  with pytest.raises(ValueError, match=r"one.npy' holds a single array"):
    data.load("npz", path=str(tmp_path / "one.npy"))
  with pytest.raises(FileNotFoundError, match=r"npz file '.*nowhere.npz' does not exist"):
    data.load("npz", path=str(tmp_path / "nowhere.npz"))


# ---------------------------------------------------------------------------------------------------------------
# The Dataset fields


def test_dataset_checks_class_names_and_sources(folder):
  root, _ = folder
  ds = data.load("image_folder", root=root)
  standardized = data.standardize(ds, "per_channel")
  assert standardized.class_names == ds.class_names
  np.testing.assert_array_equal(standardized.train_sources, ds.train_sources)
  fields = dict(
    name="x",
    num_classes=10,
    x_train=ds.x_train,
    y_train=ds.y_train,
    x_val=ds.x_val,
    y_val=ds.y_val,
    x_test=ds.x_test,
    y_test=ds.y_test,
  )
  with pytest.raises(ValueError, match=r"train_sources must hold one string per row .* expected \[180\]"):
    data.Dataset(**fields, train_sources=ds.train_sources[:5])
  with pytest.raises(ValueError, match=r"test_sources must hold one string per row .* dtype int64"):
    data.Dataset(**fields, test_sources=np.arange(50))
  with pytest.raises(ValueError, match=r"class_names=\('a', 'b'\) must be 10 strings"):
    data.Dataset(**fields, class_names=("a", "b"))
  plain = data.Dataset(**fields)
  assert plain.class_names is None and plain.train_sources is None and plain.test_sources is None


# ---------------------------------------------------------------------------------------------------------------
# TFDS by name (offline, mocked)


def test_tfds_by_name_reads_any_dataset_with_class_names_and_record_ids():
  with tfds.testing.mock_data(num_examples=20):
    ds = data.load("tfds", name="mnist", validation_size=0)
    ref = data.load("mnist")
    carved = data.load("tfds", name="mnist")
  np.testing.assert_array_equal(ds.x_train, ref.x_train)
  np.testing.assert_array_equal(ds.y_test, ref.y_test)
  assert ds.name == "mnist" and ds.class_names == tuple(str(c) for c in range(10))
  assert ds.train_sources[3] == "tfds:mnist/train[3]" and ds.test_sources[0] == "tfds:mnist/test[0]"
  assert carved.sizes == {"train": 18, "val": 2, "test": 20}  # 10% carved without val_split


def test_tfds_by_name_resizes_and_names_bad_keys(tmp_path):
  with tfds.testing.mock_data(num_examples=6):
    ds = data.load("tfds", name="tf_flowers", test_split="train", image_size=16, validation_size=0)
    with pytest.raises(ValueError, match=r"tf_flowers:train\[0\] has an image of shape .* pass image_size=S"):
      data.load("tfds", name="tf_flowers", test_split="train", validation_size=0)  # the mock's sizes differ
    with pytest.raises(ValueError, match=r"has no feature\(s\) \['img'\]"):
      data.load("tfds", name="tf_flowers", test_split="train", image_key="img")
  assert ds.input_shape == (16, 16, 3) and ds.class_names == ("dandelion", "daisy", "tulips", "sunflowers", "roses")
  with pytest.raises(FileNotFoundError, match=r"(?s)'beans' is not prepared .* download=True in dataset_kwargs"):
    data.load("tfds", name="beans", data_dir=str(tmp_path / "tfds"))


# ---------------------------------------------------------------------------------------------------------------
# Into a run: classes.json, and the documented command line


def test_run_single_on_an_image_folder_writes_classes_json(folder, tmp_path):
  root, _ = folder
  config = ce.get_config()
  config.dataset = "image_folder"
  config.dataset_kwargs = {"root": root}
  config.noise.rate = 0.2
  config.num_epochs = 1
  config.batch_size = 32
  config.checkpoint_every = 0
  config.optimizer.lr_boundaries = ()
  config.model.name = "mlp"
  config.model.kwargs = {"hidden_sizes": (16,)}
  summary = runs.run_single(config, str(tmp_path / "run"))
  assert np.isfinite(summary["history"][0]["train_loss"]) and "val_accuracy" in summary["history"][0]
  with open(tmp_path / "run" / data_inputs.CLASSES_FILE) as f:
    classes = json.load(f)
  assert classes == {"class_names": sorted(WORDS), "source": {"dataset": "image_folder", "root": root}}


def test_no_test_split_trains_and_records_no_test_metric(folder, tmp_path):
  """A folder without ROOT/test (and a manifest without a split column) loads with an empty test split; a run on it
  records validation accuracy and no test accuracy anywhere, and a noise type 'none' run no clean-label metric."""
  root, expected = folder
  only_train = tmp_path / "only_train"
  shutil.copytree(os.path.join(root, "train"), only_train / "train")
  ds = data.load("image_folder", root=str(only_train), validation_size=40)
  assert ds.x_test.shape == (0, *ds.x_train.shape[1:]) and len(ds.y_test) == 0 and len(ds.test_sources) == 0
  assert len(ds.y_train) + len(ds.y_val) == len(expected["train"])
  rows = ["path,label"] + [f"{s},{s.split('/')[1]}" for s in sorted(expected["train"])]
  (only_train / "m.csv").write_text("\n".join(rows) + "\n")
  from_manifest = data.load("image_folder", manifest=str(only_train / "m.csv"), validation_size=40)
  assert len(from_manifest.y_train) == len(ds.y_train) and len(from_manifest.y_test) == 0
  np.savez(tmp_path / "train_only.npz", x_train=ds.x_train, y_train=ds.y_train)
  assert data.load("npz", path=str(tmp_path / "train_only.npz")).x_test.shape[0] == 0

  config = ce.get_config()
  config.dataset, config.dataset_kwargs = "image_folder", {"root": str(only_train), "validation_size": 40}
  config.noise.type, config.noise.rate = "none", 0.0
  config.num_epochs, config.batch_size, config.checkpoint_every, config.eval_train = 2, 32, 0, True
  config.optimizer.lr_boundaries = ()
  config.model.name, config.model.kwargs = "mlp", {"hidden_sizes": (16,)}
  summary = runs.run_single(config, str(tmp_path / "run"))
  for record in summary["history"]:
    assert "val_accuracy" in record and "train_accuracy_given_labels" in record
    assert not [k for k in record if k.startswith(("test_", "train_accuracy_clean", "memorised"))], record
  assert "best_test_accuracy" not in summary and "last_test_accuracy" not in summary
  best = max(r["val_accuracy"] for r in summary["history"])
  assert summary["best_val_accuracy"] == best and summary["best_val_epoch"] in (1, 2)


def test_documented_flag_form_reaches_the_loader(folder):
  root, _ = folder
  argv = [
    "prog",
    "--config=experiments/configs/default.py",
    "--config.shared.dataset=image_folder",
    f"--config.shared.dataset_kwargs={{'root': '{root}', 'image_size': 20}}",
  ]
  flag_values = flags.FlagValues()
  config_flags.DEFINE_config_file("config", None, "", flag_values=flag_values, lock_config=True, sys_argv=argv)
  flag_values(argv)
  shared = flag_values.config.shared
  assert shared.dataset_kwargs.to_dict() == {"root": root, "image_size": 20}
  ds = inputs.load_dataset(shared)
  assert ds.input_shape == (20, 20, 1) and ds.class_names == tuple(sorted(WORDS))
