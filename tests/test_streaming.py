"""Streaming input (noisy_jax.parallel.streaming) trains what resident input trains, and resumes inside an epoch.

scikit-learn's digits are written out as an image folder (1,797 PNGs of 8x8); the resident run decodes it whole, the
streaming run reads each batch from the files through Grain worker processes. Same order, same augmentation keys,
same normalisation on the device: after 2 epochs the parameters and the label table agree to 1e-6.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import jax
import ml_collections
import numpy as np
from PIL import Image
import pytest

from noisy_jax import data
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.data import image_files
from noisy_jax.data import normalization
from noisy_jax.experiment import inputs
from noisy_jax.experiment import runs
from noisy_jax.methods import plain_loss
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.parallel import streaming
from noisy_jax.train import epoch as epoch_lib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import resume_processes  # pylint: disable=g-import-not-at-top,wrong-import-position
import resume_worker  # pylint: disable=g-import-not-at-top,wrong-import-position


def _write_folder(root, dataset):
  for split in ("train", "val", "test"):
    x, y = getattr(dataset, f"x_{split}"), getattr(dataset, f"y_{split}")
    for i in range(len(y)):
      folder = os.path.join(root, split, str(int(y[i])))
      os.makedirs(folder, exist_ok=True)
      Image.fromarray(np.asarray(x[i, ..., 0])).save(os.path.join(folder, f"{i:05d}.png"))
  return str(root)


@pytest.fixture(scope="module")
def digits_folder(tmp_path_factory):
  return _write_folder(tmp_path_factory.mktemp("digits_folder"), data.load("digits"))


def _config(root, input_mode, **overrides):
  config = resume_worker.tiny_config("joint_optimization")
  config.dataset, config.dataset_kwargs = "image_folder", {"root": root}
  config.model.name, config.model.kwargs = "small_cnn", {}
  config.num_epochs, config.method.begin, config.method.stage2 = 2, 1, False  # relabels after epoch 1
  config.augment = ml_collections.ConfigDict({"crop_padding": 2, "flip": True})
  config.input, config.input_workers, config.checkpoint_every = input_mode, 2, 0
  config.epoch_mode = "steps"  # streaming's mode; the resident run too, so that both run the same program
  for key, value in overrides.items():
    config[key] = value
  return config


def test_streaming_trains_what_resident_trains(digits_folder):
  results = {}
  for mode in ("resident", "streaming"):
    config = _config(digits_folder, mode)
    dataset = inputs.load_dataset(config)
    assert dataset.on_disk == (mode == "streaming")
    assert dataset.x_train.shape == (1258, 8, 8, 1) and dataset.x_test.dtype == np.uint8
    results[mode] = runs.run_single(config, None, dataset=dataset, keep_arrays=True)
  resident, streamed = results["resident"], results["streaming"]
  for a, b in zip(resident["history"], streamed["history"]):
    assert a["train_loss"] == pytest.approx(b["train_loss"], abs=1e-6)
    assert a["test_accuracy"] == b["test_accuracy"]
  params = jax.tree.leaves(
    jax.tree.map(
      lambda x, y: float(np.max(np.abs(np.asarray(x) - np.asarray(y)))),
      resident["arrays"]["stage1"],
      streamed["arrays"]["stage1"],
    )
  )
  assert max(params) <= 1e-6
  table_a, table_b = resident["arrays"]["label_table"], streamed["arrays"]["label_table"]
  np.testing.assert_allclose(table_a.soft_labels, table_b.soft_labels, atol=1e-6)
  np.testing.assert_allclose(table_a.history, table_b.history, atol=1e-6)
  assert np.asarray(label_table_lib.changed(table_a)).any()  # the table was written and relabelled


def test_auto_streams_beyond_the_budget_and_keeps_small_splits_resident(digits_folder):
  config = _config(digits_folder, "auto", input_budget_mib=0.05)  # train 80.5 kB > 52.4 kB >= val 11.5, test 23 kB
  dataset = inputs.load_dataset(config)
  assert inputs.input_mode(config, dataset) == "streaming" and isinstance(dataset.x_train, image_files.ImageFiles)
  assert isinstance(dataset.x_val, np.ndarray) and isinstance(dataset.x_test, np.ndarray)
  config.input_budget_mib = 0.1
  resident = inputs.load_dataset(config)
  assert inputs.input_mode(config, resident) == "resident" and resident.x_train.dtype == np.uint8
  np.testing.assert_array_equal(resident.x_train[:50], dataset.x_train[:50].load())  # the same bytes either way
  with pytest.raises(ValueError, match="'disk'"):
    inputs.input_mode(_config(digits_folder, "disk"), dataset)


def test_uint8_inputs_are_a_quarter_and_normalise_on_device_as_on_the_host():
  dataset = data.load("mnist5k")
  assert dataset.x_train.dtype == np.uint8 and dataset.pixel_max == 255
  host = data.standardize(dataset, "per_channel")
  assert dataset.x_train.nbytes * 4 == host.x_train.nbytes
  for mode in ("per_channel", "mean_image"):
    norm = normalization.fit(dataset, mode)
    on_device = np.asarray(jax.jit(norm)(dataset.x_train))
    np.testing.assert_allclose(on_device, data.standardize(dataset, mode).x_train, atol=1e-6, rtol=0)
  assert normalization.fit(host, "per_channel").mode == "none"  # already standardised: left alone


def test_local_rows_split_every_global_batch_by_process():
  indices = np.arange(24).reshape(3, 8)
  valid = indices < 20
  parts = [streaming.local_rows(indices, valid, p, 4) for p in range(4)]
  np.testing.assert_array_equal(np.concatenate([rows for rows, _ in parts], axis=1), indices)
  np.testing.assert_array_equal(np.concatenate([ok for _, ok in parts], axis=1), valid)
  assert streaming.process_shard() == (0, 1)
  with pytest.raises(ValueError, match="divisible"):
    streaming.local_rows(indices, valid, 0, 3)


def test_epoch_loader_from_a_step_is_the_rest_of_the_epoch():
  source = np.arange(50 * 3, dtype=np.uint8).reshape(50, 3, 1, 1)
  indices, valid = (np.asarray(a) for a in epoch_lib.epoch_batches(jax.random.PRNGKey(3), 50, 8))
  with streaming.epoch_loader(source, indices, valid) as loader:
    whole = list(loader)
  with streaming.epoch_loader(source, indices, valid, start=4) as loader:
    rest = list(loader)
  assert len(whole) == 7 and len(rest) == 3
  for batch, step in zip(whole, range(7)):
    np.testing.assert_array_equal(batch["indices"], indices[step])
    np.testing.assert_array_equal(batch["valid"], valid[step])
    np.testing.assert_array_equal(batch["images"], source[indices[step]])
  for a, b in zip(rest, whole[4:]):
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])


def test_streaming_needs_step_dispatch():
  method = plain_loss.method("cross_entropy")
  with pytest.raises(ValueError, match="scan"):
    epoch_lib.make_epoch_fn(
      method,
      mesh_lib.make_mesh(1),
      batch_size=8,
      num_examples=16,
      mode="scan",
      source=np.zeros((16, 2, 2, 1), np.uint8),
    )


def test_an_undecodable_file_met_while_streaming_is_named(digits_folder, tmp_path):
  root = tmp_path / "folder"
  shutil.copytree(digits_folder, root)  # a copy: the shared folder stays intact
  names = sorted(os.listdir(root / "train" / "7"))
  bad = root / "train" / "7" / names[3]
  bad.write_bytes(b"not a png")
  config = _config(str(root), "streaming", input_workers=0)
  config.num_epochs = 1
  with pytest.raises(ValueError, match=names[3]):
    runs.run_single(config, None)


def test_killed_inside_an_epoch_resumes_bit_identical(digits_folder, tmp_path):
  """JO (2 epochs, then 1 of stage 2) on digits written as PNGs, one of them corrupt and skipped
  (on_bad_file='skip'), streamed by 2 Grain workers, a checkpoint every 3 steps (10 steps an epoch): killed right
  after step 16 (epoch 2, step 6: after the bad file's batch of epoch 1), resumed by a new process, the final
  checkpoints of both stages equal an uninterrupted run's bit for bit, metrics.jsonl holds every epoch once, and both
  runs list the skipped file (met in every epoch, listed once) and give it no row of label_issues.csv."""
  root = tmp_path / "folder"
  shutil.copytree(digits_folder, root)  # a copy: the shared folder stays intact
  bad = sorted(os.listdir(root / "train" / "4"))[5]
  (root / "train" / "4" / bad).write_bytes(b"\x89PNG\r\n\x1a\n truncated")
  ref, killed = str(tmp_path / "reference"), str(tmp_path / "killed")
  flags = {
    "image_folder": str(root),
    "on_bad_file": "skip",
    "checkpoint_every_steps": 3,
    "num_epochs": 2,
    "stage2_epochs": 1,
  }
  lingering = []
  first = resume_processes.run_all(
    [
      resume_processes.worker_cmd(ref, "joint_optimization", **flags),
      resume_processes.worker_cmd(killed, "joint_optimization", stop_after_step=16, **flags),
    ],
    lingering,
  )
  resume_processes.check(first, (0, -signal.SIGKILL))
  assert "killed at step 16" in first[1][1]
  assert lingering == [False, False], lingering  # the killed run's Grain workers exited with it
  assert [r["epoch"] for r in resume_processes.records(killed)] == [1]  # epoch 2 was cut short
  (second,) = resume_processes.run_all([resume_processes.worker_cmd(killed, "joint_optimization", **flags)])
  resume_processes.check([second], (0,))
  assert resume_processes.epochs_seen(second[1])[0] == ("stage1", 2)
  for stage in ("stage1", "stage2"):
    resume_processes.assert_bit_identical(ref, killed, stage)
  assert resume_processes.records(killed) == resume_processes.records(ref)
  summary = json.loads(open(os.path.join(killed, "summary.json")).read())
  assert summary["stage1"] == json.loads(open(os.path.join(ref, "summary.json")).read())["stage1"]
  assert summary["skipped_files"] == {"file": "skipped_files.txt", "count": 1}
  listed = open(os.path.join(killed, "skipped_files.txt")).read()
  assert listed == open(os.path.join(ref, "skipped_files.txt")).read()
  assert listed.splitlines()[1].startswith(f"train\ttrain/4/{bad}\tcannot decode image file "), listed
  issues = open(os.path.join(killed, "label_issues.csv")).read()
  assert issues == open(os.path.join(ref, "label_issues.csv")).read()
  num_train = sum(len(files) for _, _, files in os.walk(root / "train"))
  assert f"train/4/{bad}" not in issues and len(issues.splitlines()) == 1 + num_train - 1  # header + the read files


_PARENT_SCRIPT = """
import multiprocessing, sys, time
from noisy_jax.parallel import streaming

def child(watch, ready):
  if watch:
    streaming._exit_with_parent(0, 1)
  ready.set()
  time.sleep(120)

if __name__ == "__main__":
  context = multiprocessing.get_context("spawn")
  ready = context.Event()
  process = context.Process(target=child, args=(sys.argv[1] == "1", ready))
  process.start()
  ready.wait(60)
  print(process.pid, flush=True)
  time.sleep(120)
"""


@pytest.mark.parametrize("watch", [True, False], ids=["exit_with_parent", "without"])
def test_worker_exits_when_its_parent_is_killed(tmp_path, watch):
  """A spawned worker with streaming's worker_init_fn ends within a second or two of its parent's SIGKILL; without
  it (the control) the orphan keeps running, as Grain's workers did."""
  script = tmp_path / "parent.py"
  script.write_text(_PARENT_SCRIPT)
  parent = subprocess.Popen(
    [sys.executable, str(script), "1" if watch else "0"],
    stdout=subprocess.PIPE,
    text=True,
    start_new_session=True,
    cwd=str(tmp_path),
  )
  try:
    child = int(parent.stdout.readline())  # printed once the child has started (and, when asked, its watch)
    assert resume_processes.group_alive(parent.pid)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while resume_processes.group_alive(parent.pid) and time.monotonic() < deadline:
      time.sleep(0.1)
    assert resume_processes.group_alive(parent.pid) is not watch, child
  finally:
    try:
      os.killpg(parent.pid, signal.SIGKILL)
    except ProcessLookupError:
      pass
    parent.stdout.close()
