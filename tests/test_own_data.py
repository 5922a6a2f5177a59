"""experiments/configs/own_data.py: the documented command on a tiny image folder, `:compare`, and a missing root;
label_issues.csv with a row for every file of DIR/train, with and without DIR/val.

Two folders are written in pytest's tmp_path: 28x28 grayscale digits from mnist5k (10 train and 3 test PNGs per
class) and 36x36 RGB noise images of 3 classes; the model picked for them is the small CNN and the ResNet-32.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys

from absl import flags
import ml_collections
from ml_collections import config_flags
import numpy as np
from PIL import Image
import pytest

from experiments.configs import ce
from experiments.configs import default
from experiments.configs import own_data
from noisy_jax import data
from noisy_jax import models
from noisy_jax.core import label_issues
from noisy_jax.experiment import comparison
from noisy_jax.experiment import export
from noisy_jax.experiment import inputs
from noisy_jax.experiment import runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = "experiments/configs/own_data.py"
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _write(root, split, label, name, pixels):
  os.makedirs(root / split / label, exist_ok=True)
  Image.fromarray(pixels).save(root / split / label / name)


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
  """ROOT/{train,test}/WORD/ROW.png: 10 train and 3 test mnist5k digits per class, 28x28 grayscale."""
  mnist = data.load("mnist5k")
  root = tmp_path_factory.mktemp("digits")
  for split, x, y, per_class in (("train", mnist.x_train, mnist.y_train, 10), ("test", mnist.x_test, mnist.y_test, 3)):
    for row in np.concatenate([np.flatnonzero(y == c)[:per_class] for c in range(10)]):
      _write(root, split, WORDS[y[row]], f"{row:04d}.png", np.rint(x[row, ..., 0] * 255).astype(np.uint8))
  return str(root)


@pytest.fixture(scope="module")
def colour(tmp_path_factory):
  """ROOT/{train,test}/{a,b,c}/I.png: 36x36 RGB noise, 6 train and 2 test per class."""
  rng = np.random.default_rng(0)
  root = tmp_path_factory.mktemp("colour")
  for split, per_class in (("train", 6), ("test", 2)):
    for label in "abc":
      for i in range(per_class):
        _write(root, split, label, f"{i}.png", rng.integers(0, 256, (36, 36, 3), dtype=np.uint8))
  return str(root)


def _files(root, split):
  """Paths relative to `root` of the image files under root/split ('train/one/0003.png')."""
  return {
    os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(os.path.join(root, split)) for f in files
  }


def _parse(*overrides, variant=""):
  """The locked config that `experiments/train.py --config=own_data.py[:variant] OVERRIDES` builds."""
  argv = ["prog", f"--config={CONFIG}" + (f":{variant}" if variant else ""), *overrides]
  flag_values = flags.FlagValues()
  config_flags.DEFINE_config_file("config", None, "", flag_values=flag_values, lock_config=True, sys_argv=argv)
  flag_values(argv)
  return flag_values.config


def test_documented_command_trains_joint_optimization_on_a_folder(digits, tmp_path):
  workdir = tmp_path / "w"
  tiny = [
    "--config.num_epochs=1",
    "--config.method.begin=1",
    "--config.method.history_length=1",
    "--config.stage2.num_epochs=1",
    "--config.batch_size=32",
    "--config.checkpoint_every=0",
  ]
  command = [
    sys.executable,
    "-m",
    "experiments.train",
    f"--config={CONFIG}",
    f"--config.dataset_kwargs.root={digits}",
    f"--workdir={workdir}",
    *tiny,
  ]
  done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["method"] == "joint_optimization" and summary["model"] == "SmallCNN"  # 28 px: the small CNN
  assert [r["stage"] for r in summary["history"]] == ["stage1", "stage2"]
  assert summary["noise"]["type"] == "none" and "realised_rate" not in summary["noise"]  # labels as given
  assert 0.0 <= summary["stage1"]["relabelled_fraction"] <= 1.0
  # No clean labels: no metric that needs them, anywhere (no zeros, no NaN standing in for them).
  needs_truth = (
    "label_recovery",
    "detection_",
    "memorised",
    "train_accuracy_clean",
    "train_accuracy_on_clean",
    "train_accuracy_true",
  )
  records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  assert len(records) == 2 and all("relabelled_fraction" in r for r in records[:1])
  for where in records + summary["history"] + [summary["stage1"], summary]:
    assert not [k for k in where if k.startswith(needs_truth)], where
  classes = json.loads((workdir / "classes.json").read_text())
  assert classes == {"class_names": sorted(WORDS), "source": {"dataset": "image_folder", "root": digits}}
  # label_issues.csv: one row per file of DIR/train, the 10 held out for validation included (out of sample).
  rows = list(csv.DictReader(open(workdir / label_issues.CSV_FILE)))
  assert len(rows) == 100 and {r["source"] for r in rows} == _files(digits, "train")
  assert sorted(int(r["index"]) for r in rows) == list(range(100))
  carved = [r for r in rows if r["method_evidence"].startswith(runs.CARVED_VALIDATION_EVIDENCE + ":")]
  assert [int(r["index"]) for r in carved] == [int(r["index"]) for r in rows[90:]]  # after the training rows
  assert summary["label_issues"]["carved_validation_rows"] == 10
  dataset = inputs.load_dataset(_parse(f"--config.dataset_kwargs.root={digits}"))
  assert dataset.val_carved_from_train and {r["source"] for r in carved} == set(dataset.val_sources)
  # Their quality is p(given) of the exported final network on the held-out images (self_confidence, argmax).
  probs = np.asarray(export.load_model(str(workdir)).predict(dataset.x_val), np.float64)
  row_of = {s: j for j, s in enumerate(dataset.val_sources)}
  j = np.array([row_of[r["source"]] for r in carved])
  given = np.asarray(dataset.y_val)[j]
  np.testing.assert_array_equal([int(r["index"]) for r in carved], 90 + j)
  assert [r["given_label"] for r in carved] == [dataset.class_names[y] for y in given]
  np.testing.assert_allclose([float(r["label_quality"]) for r in carved], probs[j, given], atol=2e-6)
  flagged = probs[j].argmax(axis=1) != given  # no exact ties in float32 softmax here
  np.testing.assert_array_equal([r["is_issue"] == "True" for r in carved], flagged)


def test_a_given_val_split_is_not_in_label_issues(digits, tmp_path):
  """With DIR/val the validation files are not training files: label_issues.csv has one row per file of DIR/train,
  no more."""
  root = tmp_path / "with_val"
  for source in _files(digits, "train"):
    split = "val" if source.endswith(("0.png", "1.png")) else "train"  # the files whose row number ends in 0 or 1
    target = root / split / os.path.relpath(source, "train")
    os.makedirs(target.parent, exist_ok=True)
    shutil.copy(os.path.join(digits, source), target)
  config = ce.get_config()  # a one-stage method and a small MLP: the quickest run with labels as given
  config.dataset, config.dataset_kwargs = "image_folder", {"root": str(root), "image_size": 8}
  config.noise.type, config.num_epochs, config.checkpoint_every = "none", 2, 0
  config.model = ml_collections.ConfigDict({"name": "mlp", "kwargs": {"hidden_sizes": (16,)}})
  dataset = inputs.load_dataset(config)
  assert dataset.num_val > 0 and not dataset.val_carved_from_train
  summary = runs.run_single(config, str(tmp_path / "w"), dataset=dataset)
  rows = list(csv.DictReader(open(tmp_path / "w" / label_issues.CSV_FILE)))
  assert {r["source"] for r in rows} == _files(str(root), "train") and len(rows) == dataset.num_train
  assert "carved_validation_rows" not in summary["label_issues"]


def test_every_loader_option_is_a_flag_and_the_model_follows_the_images(digits, colour):
  config = _parse(f"--config.dataset_kwargs.root={digits}")
  assert inputs.dataset_kwargs(config) == {"root": digits}  # the unset options are left to the loader
  gray = inputs.load_dataset(config)
  assert gray.input_shape == (28, 28, 1) and gray.sizes == {"train": 90, "val": 10, "test": 30}
  assert gray.val_carved_from_train and runs.carved_validation_scored(config, gray)  # label_issues.csv scores them
  noisy = _parse(f"--config.dataset_kwargs.root={digits}", "--config.noise.type=symmetric")
  assert not runs.carved_validation_scored(noisy, gray)  # their labels are the clean ones, not the ones trained on
  assert models.resolve(config.model.name, gray.input_shape) == "small_cnn"
  assert isinstance(models.build(config.model.name, gray.num_classes, gray.input_shape), models.SmallCNN)

  config = _parse(
    f"--config.dataset_kwargs.root={colour}",
    "--config.dataset_kwargs.validation_size=3",
    "--config.dataset_kwargs.classes=('c', 'b', 'a')",
    "--config.dataset_kwargs.seed=1",
  )
  rgb = inputs.load_dataset(config)
  assert rgb.input_shape == (36, 36, 3) and rgb.class_names == ("c", "b", "a") and rgb.sizes["val"] == 3
  assert models.resolve(config.model.name, rgb.input_shape) == "preact_resnet32"  # 36 px: the ResNet
  assert isinstance(models.build(config.model.name, rgb.num_classes, rgb.input_shape), models.PreActResNet32)

  config = _parse(f"--config.dataset_kwargs.root={colour}", "--config.dataset_kwargs.image_size=24")
  assert models.resolve(config.model.name, inputs.load_dataset(config).input_shape) == "small_cnn"  # resized
  config = _parse(f"--config.dataset_kwargs.root={colour}", "--config.model.name=resnet18")  # overridable
  assert isinstance(models.build(config.model.name, 3, rgb.input_shape), models.ResNet18)


def test_compare_runs_the_default_comparison_on_the_folder(digits):
  config = _parse(f"--config.dataset_kwargs.root={digits}", "--config.dataset_kwargs.image_size=20", variant="compare")
  reference = default.get_config()
  assert set(config.runs) == set(reference.runs) == {"ce", "gce", "truncated_lq", "joint_optimization", "encouraging"}
  for name in config.runs:
    merged, expected = comparison.merged_run_config(config, name, 0), comparison.merged_run_config(reference, name, 0)
    assert merged.dataset == "image_folder"
    assert inputs.dataset_kwargs(merged) == {"root": digits, "image_size": 20}
    assert merged.noise.type == "none" and merged.model.name == "auto"
    assert merged.method.to_dict() == expected.method.to_dict() and merged.num_epochs == expected.num_epochs
    assert merged.optimizer.to_dict() == expected.optimizer.to_dict()
  assert inputs.load_dataset(config.shared).input_shape == (20, 20, 1)  # what comparison.run loads once for all


def test_missing_root_or_unknown_variant_says_what_to_pass():
  with pytest.raises(
    ValueError,
    match=r"root=None, manifest=None\. On the command line: "
    r"--config\.dataset_kwargs\.root=DIR",
  ):
    inputs.load_dataset(_parse())
  with pytest.raises(ValueError, match=r"root=None, .*--config\.dataset_kwargs\.root=DIR"):
    inputs.load_dataset(_parse(variant="compare").shared)
  with pytest.raises(ValueError, match=r"own_data config string 'jo': use none .* or 'compare'"):
    own_data.get_config("jo")
