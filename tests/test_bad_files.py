"""Image files that do not decode (noisy_jax.data.bad_files): dataset_kwargs on_bad_file and max_bad_fraction.

A folder of mnist5k digits saved as JPEGs (12 train and 3 test files per class) gets one corrupt file: a JPEG cut
after its first 300 bytes (pillow reads its header, then fails to decode it). With 'error' (the default) the run
stops naming it and writes nothing; with 'skip' it trains without it and lists it. What streaming does with the
same file (masked as padding, kill and resume bit-identical) is in tests/test_streaming.py.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sys

import numpy as np
import pytest

from noisy_jax import data
from noisy_jax.data import bad_files
from noisy_jax.data import disk
from noisy_jax.data import image_files
from noisy_jax.data import images
from noisy_jax.experiment import runs
from noisy_jax.parallel import streaming

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_own_data  # pylint: disable=g-import-not-at-top,wrong-import-position

WORDS = test_own_data.WORDS
BAD = "train/three/bad.jpg"  # the corrupt file, relative to the folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
  """(root with BAD corrupt, root with BAD a valid image): 12 train and 3 test JPEG digits per class + BAD."""
  mnist = data.load("mnist5k")
  good = tmp_path_factory.mktemp("good")
  for split, x, y, per_class in (("train", mnist.x_train, mnist.y_train, 12), ("test", mnist.x_test, mnist.y_test, 3)):
    for row in np.concatenate([np.flatnonzero(y == c)[:per_class] for c in range(10)]):
      pixels = np.rint(x[row, ..., 0] * 255).astype(np.uint8)
      test_own_data._write(good, split, WORDS[y[row]], f"{row:04d}.jpg", pixels)  # pylint: disable=protected-access
  test_own_data._write(good, *BAD.split("/"), np.rint(mnist.x_train[-1, ..., 0] * 255).astype(np.uint8))  # pylint: disable=protected-access
  bad = tmp_path_factory.mktemp("bad") / "folder"
  shutil.copytree(good, bad)
  (bad / BAD).write_bytes((good / BAD).read_bytes()[:300])
  return str(bad), str(good)


def test_a_cut_jpeg_and_a_non_image_are_bad_files_named_by_their_path(folder, tmp_path):
  bad, _ = folder
  with pytest.raises(images.BadImageFile, match="bad.jpg"):
    images.decode_file(os.path.join(bad, BAD))
  (tmp_path / "x.png").write_bytes(b"not an image")
  with pytest.raises(images.BadImageFile, match="x.png"):
    images.decode_file(str(tmp_path / "x.png"))
  files = image_files.ImageFiles((os.path.join(bad, BAD), str(tmp_path / "x.png")), 28, 28, 1, on_bad_file="skip")
  pixels, error = files.decode_row(0)
  assert error.startswith("cannot decode image file") and "bad.jpg" in error
  assert pixels.shape == (28, 28, 1) and not pixels.any()


def test_options_are_checked():
  with pytest.raises(ValueError, match="on_bad_file='ignore' must be one of 'error', 'skip'"):
    bad_files.check_options("ignore", 0.01)
  for fraction in (1.5, -0.1, True, "0.1"):
    with pytest.raises(ValueError, match="max_bad_fraction=.* must be a number in"):
      bad_files.check_options("skip", fraction)
  with pytest.raises(ValueError, match="on_bad_file='Skip'"):
    disk.image_folder("/nonexistent", on_bad_file="Skip")


TINY = (
  "--config.num_epochs=1",
  "--config.method.begin=1",
  "--config.method.history_length=1",
  "--config.stage2.num_epochs=1",
  "--config.batch_size=32",
  "--config.checkpoint_every=0",
  "--config.model.name=mlp",  # the smallest network: what is tested is the data path
)


def _parse(*overrides):
  """The locked config of `experiments/train.py --config=own_data.py OVERRIDES`, made tiny."""
  return test_own_data._parse(*overrides, *TINY)  # pylint: disable=protected-access


def test_error_names_the_file_and_writes_nothing(folder, tmp_path):
  bad, _ = folder
  workdir = tmp_path / "w"
  with pytest.raises(ValueError, match="bad.jpg"):
    runs.run_single(_parse(f"--config.dataset_kwargs.root={bad}"), str(workdir))
  assert not workdir.exists()


def test_skip_trains_without_the_file_and_lists_it(folder, tmp_path):
  bad, _ = folder
  workdir = tmp_path / "w"
  summary = runs.run_single(
    _parse(f"--config.dataset_kwargs.root={bad}", "--config.dataset_kwargs.on_bad_file=skip"), str(workdir)
  )
  assert summary["skipped_files"] == {"file": "skipped_files.txt", "count": 1}
  lines = (workdir / "skipped_files.txt").read_text().splitlines()
  assert lines[0] == "split\tfile\terror" and len(lines) == 2
  split, name, error = lines[1].split("\t")
  assert split in ("train", "val") and name == BAD  # 'val' when the carving held it out
  assert error.startswith(f"cannot decode image file {os.path.join(bad, BAD)!r}"), error
  assert bad_files.read(str(workdir / "skipped_files.txt")) == [bad_files.Skipped(split, name, error)]
  # label_issues.csv: a row for every other training file (the carved validation rows included), none for BAD.
  rows = list(csv.DictReader(open(workdir / "label_issues.csv")))
  train = {os.path.relpath(os.path.join(d, f), bad) for d, _, fs in os.walk(os.path.join(bad, "train")) for f in fs}
  assert len(rows) == len(train) - 1 == 120 and {r["source"] for r in rows} == train - {BAD}
  assert json.loads((workdir / "summary.json").read_text())["skipped_files"]["count"] == 1


@pytest.mark.parametrize("decode", [True, False], ids=["decoded_by_the_loader", "loaded_by_the_trainer"])
def test_a_skipped_file_leaves_every_other_file_where_a_good_one_would(folder, decode):
  """The folder with BAD corrupt, skipped, is the folder with BAD valid less BAD's row: same splits (BAD takes part
  in the validation carving either way), same order, same pixels; both ways of decoding."""
  bad, good = folder
  skipped = disk.image_folder(bad, on_bad_file="skip", decode=decode).load()
  whole = disk.image_folder(good)
  (split,) = [s for s in ("train", "val") if BAD in getattr(whole, f"{s}_sources")]
  assert skipped.skipped_files == (bad_files.Skipped(split, BAD, skipped.skipped_files[0].error),)
  for s in ("train", "val", "test"):
    keep = getattr(whole, f"{s}_sources") != BAD
    np.testing.assert_array_equal(getattr(skipped, f"{s}_sources"), getattr(whole, f"{s}_sources")[keep])
    np.testing.assert_array_equal(getattr(skipped, f"y_{s}"), getattr(whole, f"y_{s}")[keep])
    np.testing.assert_array_equal(getattr(skipped, f"x_{s}"), getattr(whole, f"x_{s}")[keep])


def test_more_than_max_bad_fraction_stops_naming_the_files(folder, tmp_path):
  """151 files: 1 bad is within 1% (1.51 files), 2 are not; max_bad_fraction=0.02 lets 2 (3.02 files) through."""
  bad, _ = folder
  root = tmp_path / "folder"
  shutil.copytree(bad, root)
  second = sorted(os.listdir(root / "test" / "five"))[0]
  (root / "test" / "five" / second).write_bytes(b"")
  for decode in (True, False):
    with pytest.raises(
      ValueError, match=r"2 of the 151 image files cannot be decoded, more than max_bad_fraction=0.01"
    ):
      disk.image_folder(str(root), on_bad_file="skip", decode=decode).load()
  loaded = disk.image_folder(str(root), on_bad_file="skip", max_bad_fraction=0.02)
  assert sorted(s.file for s in loaded.skipped_files) == [f"test/five/{second}", BAD]


def test_a_streamed_bad_file_is_a_padding_row_and_the_log_stops_past_the_fraction(folder, tmp_path):
  bad, _ = folder
  files = disk.image_folder(bad, on_bad_file="skip", decode=False, validation_size=0).x_train
  row = files.paths.index(os.path.join(bad, BAD))
  indices = np.array([[row, 0, 1, 2]])
  with streaming.epoch_loader(files, indices, np.ones_like(indices, bool)) as loader:
    (batch,) = list(loader)
  np.testing.assert_array_equal(batch["skipped"], [True, False, False, False])
  np.testing.assert_array_equal(batch["valid"], [False, True, True, True])
  assert not batch["images"][0].any()
  np.testing.assert_array_equal(batch["images"][1:], files[np.array([0, 1, 2])].load())
  # The run's log: each file once, written whole each time it grows; past the fraction it raises, listing all.
  path = str(tmp_path / "skipped_files.txt")
  log = bad_files.Log(num_files=200, max_bad_fraction=0.01, path=path)
  assert bad_files.read(path) == []
  first = bad_files.Skipped("train", "a.jpg", "cannot decode\tit")
  log.add([first, first])
  log.add([bad_files.Skipped("train", "b.jpg", "truncated")])
  assert len(log) == 2 and [s.file for s in bad_files.read(path)] == ["a.jpg", "b.jpg"]
  assert bad_files.read(path)[0].error == "cannot decode it"  # a tab in a message would split its line
  with pytest.raises(ValueError, match=r"3 of the 200 image files cannot be decoded.*a.jpg \(train\)"):
    log.add([bad_files.Skipped("test", "c.jpg", "empty")])
  assert len(bad_files.read(path)) == 3
