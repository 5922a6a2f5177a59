"""noisy_jax.experiment.export and experiments/predict.py: a run's network saved, loaded back and used on new inputs.

Three tiny runs (an MLP, 1-2 epochs): cross entropy on the 8x8 digits, cross entropy on an image folder written from
mnist5k (10 train and 3 test PNGs per class), and Joint Optimization on the digits (its stage-2 network is the one
exported). The exported network must predict what the run's own evaluation predicted.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys

import jax
import numpy as np
from PIL import Image
import pytest

from experiments import predict as predict_cli
from experiments.configs import ce
from experiments.configs import joint_optimization
from noisy_jax import models
from noisy_jax.core import metrics
from noisy_jax.data import normalization
from noisy_jax.experiment import export
from noisy_jax.experiment import inputs
from noisy_jax.experiment import runs
from noisy_jax.parallel import xla_options
from noisy_jax.train import predict as predict_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _tiny(config, *, epochs=2):
  config.num_epochs, config.batch_size, config.checkpoint_every = epochs, 64, 0
  config.optimizer.lr_boundaries = ()
  config.model.name, config.model.kwargs = "mlp", {"hidden_sizes": (16,)}
  return config


def _run(config, workdir):
  """(summary with arrays, the dataset) of run_single(config, workdir)."""
  dataset = inputs.load_dataset(config)
  return runs.run_single(config, str(workdir), dataset=dataset, keep_arrays=True), dataset


def _in_run_probs(config, dataset, variables, x):
  """What the run's evaluation computes (loop.fit's predict) for `variables`."""
  model = models.build(
    config.model.name, dataset.num_classes, dataset.x_train.shape[1:], kwargs=config.model.get("kwargs")
  )
  predict = predict_lib.make_predict_fn(
    model,
    normalize=inputs.normalizer(config, dataset),
    compiler_options=xla_options.compiler_options(model, jax.devices()[0].platform),
  )
  return np.asarray(predict(variables, x))


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
  config = _tiny(ce.get_config())
  config.dataset = "digits"
  workdir = tmp_path_factory.mktemp("digits_run")
  summary, dataset = _run(config, workdir)
  return config, str(workdir), summary, dataset


@pytest.fixture(scope="module")
def folder_run(tmp_path_factory):
  """A run on ROOT/{train,test}/WORD/ROW.png written from mnist5k; returns (config, workdir, ROOT, dataset)."""
  from noisy_jax import data  # pylint: disable=g-import-not-at-top

  mnist = data.load("mnist5k")
  root = tmp_path_factory.mktemp("digit_folder")
  for split, x, y, per_class in (("train", mnist.x_train, mnist.y_train, 10), ("test", mnist.x_test, mnist.y_test, 3)):
    for row in np.concatenate([np.flatnonzero(y == c)[:per_class] for c in range(10)]):
      os.makedirs(root / split / WORDS[y[row]], exist_ok=True)
      Image.fromarray(x[row, ..., 0]).save(root / split / WORDS[y[row]] / f"{row:04d}.png")
  config = _tiny(ce.get_config(), epochs=1)
  config.dataset, config.dataset_kwargs = "image_folder", {"root": str(root)}
  workdir = tmp_path_factory.mktemp("folder_run")
  _, dataset = _run(config, workdir)
  return config, str(workdir), str(root), dataset


# ---------------------------------------------------------------------------------------------------------------
# (a) The exported network is the run's network


def test_exported_network_predicts_what_the_run_evaluated(digits_run):
  config, workdir, summary, dataset = digits_run
  loaded = export.load_model(workdir)
  assert loaded.path == os.path.join(workdir, "model", "final")
  assert loaded.input_shape == (8, 8, 1) and loaded.num_classes == 10 and loaded.class_names is None
  probs = loaded.predict(dataset.x_test)
  assert probs.dtype == np.float32 and probs.shape == (len(dataset.y_test), 10)
  np.testing.assert_allclose(
    probs, _in_run_probs(config, dataset, summary["arrays"]["stage1"], dataset.x_test), rtol=0, atol=1e-6
  )
  with open(os.path.join(workdir, "summary.json")) as f:
    written = json.load(f)
  assert float(metrics.accuracy(probs, dataset.y_test)) == written["last_test_accuracy"]
  best = export.load_model(workdir, "best_val").predict(dataset.x_test)
  assert float(metrics.accuracy(best, dataset.y_test)) == written["test_accuracy_at_best_val"]


def test_embedding_is_what_the_head_maps_to_the_predictions(digits_run, folder_run):
  """`embed` gives the head's inputs: softmax(embed(x) @ W + b) with the head's W, b is `predict(x)`; for the MLP they
    are its hidden layer, relu(BN(normalised x @ W1)) with BN's running statistics, recomputed here in NumPy. The same
  from image files on disk as from the arrays they were loaded into."""
  config, workdir, _, dataset = digits_run
  loaded = export.load_model(workdir)
  features = loaded.embed(dataset.x_test)
  params = jax.tree.map(np.asarray, loaded.variables["params"])
  head = params[sorted(params)[-1]]  # the MLP's layers are Dense_0, Dense_1: the last is the head
  assert features.shape == (len(dataset.x_test), 16) and features.dtype == np.float32
  x = loaded.normalization.numpy(dataset.x_test).reshape(len(dataset.x_test), -1)
  stats, bn = loaded.variables["batch_stats"]["BatchNorm_0"], params["BatchNorm_0"]
  pre = x @ params["Dense_0"]["kernel"]
  hidden = np.maximum((pre - stats["mean"]) / np.sqrt(stats["var"] + 1e-5) * bn["scale"] + bn["bias"], 0.0)
  np.testing.assert_allclose(features, hidden, rtol=1e-5, atol=1e-5)
  logits = features.astype(np.float64) @ head["kernel"] + head["bias"]
  probs = np.exp(logits - logits.max(axis=1, keepdims=True))
  np.testing.assert_allclose(probs / probs.sum(axis=1, keepdims=True), loaded.predict(dataset.x_test), atol=1e-5)
  _, folder_workdir, root, folder_dataset = folder_run
  on_disk = export.load_model(folder_workdir)
  _, files = predict_cli.read_folder(os.path.join(root, "test"), on_disk)
  np.testing.assert_allclose(on_disk.embed(files), on_disk.embed(folder_dataset.x_test), rtol=0, atol=0)


def test_stored_normalization_is_fits_bit_for_bit(digits_run):
  _, workdir, _, dataset = digits_run
  for mode in normalization.MODES[:3]:  # none, per_channel, mean_image ([8, 8, 1] statistics)
    fitted = normalization.fit(dataset, mode)
    back = export.normalization_from_json(json.loads(json.dumps(export.normalization_to_json(fitted))))
    assert (back.mode, back.pixel_max) == (fitted.mode, fitted.pixel_max)
    assert back.mean.dtype == back.std.dtype == np.float32
    np.testing.assert_array_equal(back.mean, fitted.mean)
    np.testing.assert_array_equal(back.std, fitted.std)
    np.testing.assert_array_equal(back.numpy(dataset.x_test), fitted.numpy(dataset.x_test))
    np.testing.assert_array_equal(jax.jit(back)(dataset.x_test), jax.jit(fitted)(dataset.x_test))
  stored = export.load_model(workdir).normalization
  np.testing.assert_array_equal(stored.mean, normalization.fit(dataset, "per_channel").mean)
  with open(os.path.join(workdir, "model", "final", export.MODEL_FILE)) as f:
    info = json.load(f)
  assert info["format_version"] == export.FORMAT_VERSION and info["model"]["name"] == "mlp"
  assert info["data"] == {"pixel_max": 16.0, "image_size": None, "channels": 1, "dataset": "digits", "normalized": None}
  assert info["meta"]["stage"] == "stage1" and info["meta"]["which"] == "final"


def test_joint_optimization_exports_its_stage_two_network(tmp_path):
  config = _tiny(joint_optimization.get_config(), epochs=1)
  config.dataset, config.normalization = "digits", "mean_image"
  config.method.begin, config.method.history_length = 1, 1
  config.stage2.num_epochs = 1
  summary, dataset = _run(config, tmp_path)
  loaded = export.load_model(str(tmp_path))
  assert loaded.info["meta"]["stage"] == "stage2" and loaded.normalization.mean.shape == (8, 8, 1)
  np.testing.assert_allclose(
    loaded.predict(dataset.x_test),
    _in_run_probs(config, dataset, summary["arrays"]["stage2"], dataset.x_test),
    rtol=0,
    atol=1e-6,
  )


# ---------------------------------------------------------------------------------------------------------------
# (b) experiments.predict on a folder of images and on an .npz


def test_predict_command_on_an_image_folder(folder_run, tmp_path):
  _, workdir, root, dataset = folder_run
  loaded = export.load_model(workdir)
  assert loaded.class_names == tuple(sorted(WORDS))
  expected = loaded.predict(dataset.x_test)  # the test PNGs as the run's loader read them
  relative = [os.path.relpath(s, "test") for s in dataset.test_sources]  # 'WORD/ROW.png' under ROOT/test
  shutil.copytree(os.path.join(root, "test"), tmp_path / "input")
  (tmp_path / "input" / ".DS_Store").write_bytes(b"junk")  # hidden: skipped

  command = [sys.executable, "-m", "experiments.predict", f"--workdir={workdir}", f"--input={tmp_path / 'input'}"]
  done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  with open(os.path.join(workdir, predict_cli.OUTPUT_FILE), newline="") as f:
    rows = list(csv.reader(f))
  assert rows[0] == ["path", "predicted_class", "predicted_name", "probability"]
  assert sorted(r[0] for r in rows[1:]) == sorted(relative) and len(rows) == 1 + len(relative)
  by_path = {r[0]: r for r in rows[1:]}
  for i, path in enumerate(relative):
    _, predicted, name, probability = by_path[path]
    assert int(predicted) == int(np.argmax(expected[i])) and name == loaded.class_names[int(predicted)]
    assert abs(float(probability) - float(expected[i].max())) <= 1e-6

  output, names, probs = predict_cli.run(
    workdir, str(tmp_path / "input"), output=str(tmp_path / "p.csv"), batch_size=7
  )  # several chunks of decoded images
  assert output == str(tmp_path / "p.csv") and names == sorted(relative)
  order = [relative.index(n) for n in names]
  np.testing.assert_allclose(probs, expected[order], rtol=0, atol=1e-6)
  assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]  # the temporary file was renamed


def test_predict_reads_the_npz_array_x_first(digits_run, tmp_path):
  _, workdir, _, dataset = digits_run
  np.savez(tmp_path / "in.npz", x_test=dataset.x_test[:3], x=dataset.x_test[5:9])
  _, names, probs = predict_cli.run(workdir, str(tmp_path / "in.npz"), which="best_val")
  assert names == [f"npz:x[{i}]" for i in range(4)]
  np.testing.assert_array_equal(probs, export.load_model(workdir, "best_val").predict(dataset.x_test[5:9]))
  with open(os.path.join(workdir, predict_cli.OUTPUT_FILE), newline="") as f:
    rows = list(csv.reader(f))
  assert rows[0] == ["path", "predicted_class", "probability"]  # digits name no classes
  assert [r[0] for r in rows[1:]] == names
  np.savez(tmp_path / "train.npz", x_train=dataset.x_test[:2])
  assert predict_cli.run(workdir, str(tmp_path / "train.npz"))[1] == ["npz:x_train[0]", "npz:x_train[1]"]


# ---------------------------------------------------------------------------------------------------------------
# (c) Errors


def test_errors_name_the_path_the_shapes_and_the_choices(digits_run, folder_run, tmp_path):
  _, workdir, _, dataset = digits_run
  empty = tmp_path / "empty_workdir"
  empty.mkdir()
  with pytest.raises(FileNotFoundError, match=rf"no exported model at {empty}/model/final .*experiments\.train"):
    export.load_model(str(empty))
  with pytest.raises(FileNotFoundError, match=r"does not exist"):
    export.load_model(str(tmp_path / "nowhere"))
  with pytest.raises(ValueError, match=r"Unknown which 'last'; allowed: 'best_val', 'final'"):
    export.load_model(workdir, "last")
  loaded = export.load_model(workdir)
  with pytest.raises(ValueError, match=r"examples of shape \(9, 9, 1\).*takes examples of shape \(8, 8, 1\)"):
    loaded.predict(np.zeros((2, 9, 9, 1), np.uint8))
  with pytest.raises(ValueError, match=r"shape \(8, 8, 1\)"):
    loaded.predict(dataset.x_test[0])  # one example without its batch axis

  comparison = tmp_path / "comparison"  # a comparison's workdir: the runs' models are named
  shutil.copytree(os.path.join(workdir, "model"), comparison / "ce" / "seed0" / "model")
  with pytest.raises(FileNotFoundError, match=r"comparison's workdir.*ce/seed0"):
    export.load_model(str(comparison))

  with pytest.raises(FileNotFoundError, match=r"input .*missing.* does not exist"):
    predict_cli.run(workdir, str(tmp_path / "missing"))
  (tmp_path / "no_images" / "sub").mkdir(parents=True)
  (tmp_path / "no_images" / "notes.txt").write_text("x")
  _, folder_workdir, _, _ = folder_run
  with pytest.raises(ValueError, match=r"holds no image file"):
    predict_cli.run(folder_workdir, str(tmp_path / "no_images"))
  np.savez(tmp_path / "y.npz", y=np.zeros(3))
  with pytest.raises(ValueError, match=r"has the arrays \['y'\]; it needs one named x, x_test or x_train"):
    predict_cli.run(workdir, str(tmp_path / "y.npz"))
  np.savez(tmp_path / "flat.npz", x=np.zeros((3, 64), np.uint8))
  with pytest.raises(ValueError, match=r"examples of shape \(64,\)"):
    predict_cli.run(workdir, str(tmp_path / "flat.npz"))
  with pytest.raises(ValueError, match=r"full intensity 16 .*give an \.npz"):  # digits are codes 0..16, not PNGs
    predict_cli.run(workdir, str(tmp_path))

  (tmp_path / "odd").mkdir()
  Image.fromarray(np.zeros((30, 30), np.uint8)).save(tmp_path / "odd" / "big.png")
  with pytest.raises(ValueError, match=r"takes 28x28 grayscale images \(no resizing.*big\.png' is 30x30"):
    predict_cli.run(folder_workdir, str(tmp_path / "odd"), output=str(tmp_path / "odd.csv"))
  assert not (tmp_path / "odd.csv").exists()


# ---------------------------------------------------------------------------------------------------------------
# (d) All or nothing


def test_export_is_replaced_all_or_nothing(digits_run, tmp_path, monkeypatch):
  config, workdir, summary, dataset = digits_run
  final = summary["arrays"]["stage1"]
  other = jax.tree.map(lambda v: np.asarray(v) + 1, final)
  kwargs = dict(
    model_config=config.model,
    num_classes=10,
    input_shape=(8, 8, 1),
    normalization=normalization.fit(dataset, "per_channel"),
  )
  target = tmp_path / "export"

  def params_of(path):
    return jax.tree.leaves(export.load_model(path).variables["params"])

  export.save(str(target), variables=final, **kwargs)
  export.save(str(target), variables=other, **kwargs)  # replaced in one step (renameat2 where the OS has it)
  assert os.listdir(tmp_path) == ["export"]
  for got, want in zip(params_of(str(target)), jax.tree.leaves(other["params"])):
    np.testing.assert_array_equal(got, want)

  monkeypatch.setattr(export, "_exchange", lambda a, b: False)  # the fallback: move aside, rename, delete
  export.save(str(target), variables=final, **kwargs)
  assert os.listdir(tmp_path) == ["export"]
  for got, want in zip(params_of(str(target)), jax.tree.leaves(final["params"])):
    np.testing.assert_array_equal(got, want)

  def crash(tmp, directory):
    raise KeyboardInterrupt("killed before the rename")

  monkeypatch.setattr(export, "_replace", crash)
  with pytest.raises(KeyboardInterrupt):
    export.save(str(target), variables=other, **kwargs)
  assert os.listdir(tmp_path) == ["export"]  # the half-written copy is gone, the previous export intact
  for got, want in zip(params_of(str(target)), jax.tree.leaves(final["params"])):
    np.testing.assert_array_equal(got, want)
  monkeypatch.undo()

  (tmp_path / ".export.tmp-killed").mkdir()  # what a killed process leaves: ignored, deleted by the next save
  assert export.load_model(str(target)).path == str(target)
  export.save(str(target), variables=other, **kwargs)
  assert os.listdir(tmp_path) == ["export"]

  with pytest.raises(ValueError, match=r"do not fit the model"):
    export.save(str(tmp_path / "bad"), variables=final, **{**kwargs, "input_shape": (9, 9, 1)})
  assert sorted(os.listdir(tmp_path)) == ["export"]
