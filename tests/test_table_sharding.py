"""The row-sharded label table: placement rule, padding, reads and writes by index, 1 device == 4 devices.

The 4-device comparison runs tests/sharded_table_worker.py in its own process with 4 simulated CPU devices
(PJRT_NPROC=8 set before jax is imported: without it collectives on simulated devices deadlock on a 2-core machine,
shared/DESIGN.md), bounded by a timeout. The rest runs here on one device.
"""

import os
import shutil
import sys

import jax
import numpy as np
import pytest

from noisy_jax.core import label_table as label_table_lib
from noisy_jax.experiment import runs
from noisy_jax.methods import joint_optimization
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.parallel import table_sharding
from noisy_jax.train import checkpoint as checkpoint_lib
from noisy_jax.train import table_metrics

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import resume_worker  # pylint: disable=g-import-not-at-top,wrong-import-position
import sharded_table_worker  # pylint: disable=g-import-not-at-top,wrong-import-position
import simulated_devices  # pylint: disable=g-import-not-at-top,wrong-import-position

NUM_DEVICES = 4
TOLERANCE = 1e-6


# ---------------------------------------------------------------------------------------------------------------
# In its own process: 4 simulated devices


@pytest.fixture(scope="module")
def four_devices():
  return simulated_devices.run_worker("sharded_table_worker.py", NUM_DEVICES, "3")


def _check_reads_and_writes(result, padding_rows):
  for key in ("read_soft", "read_weights", "history", "weights", "soft_unchanged"):
    assert result[key] == 0.0, (key, result)  # values are moved, never computed
  assert result["filled"] == [False, True]  # slot 3 % 2
  assert result["padding_rows"] == padding_rows
  assert result["padding_max"] == 0.0  # no real index reaches a padding row
  assert result["create_in_place"]  # table_sharding.create == shard(label_table.create(...))


def test_sharded_reads_and_writes_equal_numpy_on_four_devices(four_devices):
  _check_reads_and_writes(four_devices["reads_and_writes"], padding_rows=2)  # 30 rows -> 32


@pytest.mark.parametrize("method", ["joint_optimization", "joint_optimization_scan", "truncated_lq"])
def test_one_device_equals_four_devices_with_the_table_sharded(four_devices, method):
  diffs = four_devices["training"][method]
  assert diffs["param_change"] > 1e-3  # training moved the parameters: equality is not trivial
  for key in ("params", "table", "loss"):
    assert diffs[key] <= TOLERANCE, (method, key, diffs)
  # 302 rows padded to 304: each of the 4 devices holds 76 rows of soft labels, weights and history.
  assert diffs["rows_per_device"] == [76] * NUM_DEVICES and diffs["devices_holding"] == NUM_DEVICES
  assert diffs["history_rows_per_device"] == [76] * NUM_DEVICES
  assert diffs["table_rows"] == 302  # the host copy holds the real rows only
  if method.startswith("joint_optimization"):
    assert diffs["relabelled"] > 0.05, diffs  # the relabelling really changed labels
    assert diffs["top_k"] <= TOLERANCE and diffs["top_k_changed"] > 0, diffs
  else:
    assert 0 < diffs["pruned"] < 1, diffs  # pruning really set some weights to 0


def test_sharded_run_on_four_devices_checkpoints_its_rows_in_place_and_resumes_bit_identical(four_devices):
  resume = four_devices["resume"]
  assert resume["epoch"] == 3 and resume["resumed_epochs"] == [3]
  assert resume["bit_identical"], resume
  # The checkpoint holds the table as the devices hold it: the real rows padded to a multiple of 4 (label -1,
  # weight 0).
  n = resume["dataset_rows"]
  assert resume["checkpoint_rows"] == table_sharding.padded_rows(n, NUM_DEVICES) == n + 2
  assert resume["real_rows_labelled"] and resume["padding_labels"] == [-1, -1]
  assert resume["padding_weights"] == [0.0, 0.0]
  assert 0 < resume["pruned_fraction"] < 1
  assert resume["pruned_fraction"] == resume["pruned_numpy"]  # the on-device count equals NumPy's on the real rows
  # Resumed with a replicated table: the padded checkpoint is read on the host and its real rows placed again.
  assert resume["other_layout_rows"] == n
  assert resume["other_layout_params_diff"] <= TOLERANCE and resume["other_layout_weights_equal"], resume
  assert resume["other_pruned_fraction"] == resume["pruned_fraction"]


# ---------------------------------------------------------------------------------------------------------------
# Here: one device


def test_sharded_reads_and_writes_equal_numpy_on_one_device():
  _check_reads_and_writes(sharded_table_worker.check_reads_and_writes(mesh_lib.make_mesh(1)), padding_rows=0)


def test_auto_rule_and_memory_per_device():
  mib = 2**20
  # Clothing1M with JO's history: 1M x 14 x (1 + 10) floats + 8 bytes a row = 624 MB.
  assert table_sharding.row_bytes(14, 10) == 624
  assert table_sharding.table_bytes(1_000_000, 14, 10) == 624_000_000 + 10
  assert table_sharding.table_bytes(1_000_000, 14, 10, num_devices=8) == 78_000_000 + 10
  # 2.4M x 1000 classes over 256 devices: 9,375 rows a device.
  assert table_sharding.table_bytes(2_400_000, 1000, 0, num_devices=256) == 37_575_000
  assert table_sharding.table_bytes(2_400_000, 1000, 10, num_devices=256) == 412_575_000 + 10
  auto = lambda n, c, h, d, **kw: table_sharding.use_sharded(
    "auto", num_examples=n, num_classes=c, history_length=h, num_devices=d, **kw
  )
  assert not auto(1_000_000, 14, 10, 1)  # one device: always replicated
  assert auto(1_000_000, 14, 10, 8)
  assert not auto(50_000, 100, 10, 8)  # the largest table of this repository (CIFAR-100, JO): 210 MiB
  assert table_sharding.table_bytes(50_000, 100, 10) < 256 * mib
  assert auto(50_000, 100, 10, 8, budget_mib=100)
  assert table_sharding.use_sharded("sharded", num_examples=10, num_classes=2, history_length=0, num_devices=1)
  assert not table_sharding.use_sharded(
    "replicated", num_examples=10**9, num_classes=2, history_length=0, num_devices=8
  )
  with pytest.raises(ValueError, match=r"label_table_sharding.*'rows'"):
    table_sharding.use_sharded("rows", num_examples=10, num_classes=2, history_length=0, num_devices=1)
  with pytest.raises(ValueError, match=r"label_table_budget_mib=0 must be > 0"):
    auto(10, 2, 0, 2, budget_mib=0)


def test_pad_and_unpad():
  table = label_table_lib.create(np.array([1, 0, 2, 2, 1]), 3, history_length=2)
  padded = table_sharding.pad(table, 4)
  assert padded.num_examples == 8 and padded.history.shape == (2, 8, 3)
  np.testing.assert_array_equal(padded.noisy_labels[5:], [-1, -1, -1])
  assert not np.any(padded.soft_labels[5:]) and not np.any(padded.weights[5:])
  assert table_sharding.pad(table, 5) is table and table_sharding.unpad(table, 5) is table
  back = table_sharding.unpad(padded, 5)
  for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(table)):
    np.testing.assert_array_equal(a, b)
  # Top-k relabelling never picks a padding row, even with k = every real row.
  picked = label_table_lib.relabel_top_k(padded.replace(history_filled=padded.history_filled.at[0].set(True)), 5)
  np.testing.assert_array_equal(picked.soft_labels[5:], padded.soft_labels[5:])
  with pytest.raises(ValueError, match=r"exceeds the table's 5 rows"):
    table_sharding.unpad(table, 6)


def _arrays(workdir):
  manager = checkpoint_lib.open_manager(checkpoint_lib.stage_dir(workdir, "stage1"), keep=100)
  epoch = checkpoint_lib.latest_epoch(manager)
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

  restored = manager.restore(epoch, args=ocp.args.Composite(arrays=ocp.args.StandardRestore()))["arrays"]
  manager.close()
  return epoch, jax.tree.map(np.asarray, restored)


def test_sharded_run_resumes_with_a_replicated_table(tmp_path):
  """A 3-epoch truncated-Lq run with the table sharded (a mesh of one), a checkpoint each epoch; with the last one
  removed the run resumes after epoch 2 with a replicated table and ends within float rounding of the first run
  (the checkpoint holds the table's real rows, whatever its sharding; the exact resume of a sharded table with
  padding rows is the 4-device worker's)."""
  config = resume_worker.tiny_config("truncated_lq", checkpoint_every=1)
  config.num_epochs = 3
  config.method.prune_start, config.method.prune_every = 2, 1  # prunes after every epoch
  config.label_table_sharding = "sharded"
  reference = str(tmp_path / "reference")
  summary = runs.run_single(config, reference)
  assert 0 < summary["stage1"]["pruned_fraction"] < 1
  epoch, ref = _arrays(reference)
  assert epoch == 3
  resumed = str(tmp_path / "resumed")
  shutil.copytree(reference, resumed)
  shutil.rmtree(os.path.join(checkpoint_lib.stage_dir(resumed, "stage1"), "3"))
  config.label_table_sharding = "replicated"
  logged = []
  runs.run_single(config, resumed, log_fn=logged.append)
  assert [r["epoch"] for r in logged] == [3]
  _, again = _arrays(resumed)
  leaves_ref, leaves_again = jax.tree_util.tree_leaves_with_path(ref), jax.tree_util.tree_leaves_with_path(again)
  assert [p for p, _ in leaves_ref] == [p for p, _ in leaves_again]
  for (path, a), (_, b) in zip(leaves_ref, leaves_again):
    assert a.shape == b.shape, jax.tree_util.keystr(path)
    assert np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0) <= TOLERANCE, path


def test_table_metrics_on_a_padded_table_count_real_rows_and_need_clean_labels_for_recovery():
  """table_metrics.table_metrics on a table padded for 4 devices equals NumPy on its real rows; without clean labels it
  gives only the relabelled (or pruned) fraction."""
  rng = np.random.default_rng(2)
  n, c = 10, 3
  given = rng.integers(0, c, n)
  clean = np.where(rng.random(n) < 0.5, given, (given + 1) % c)
  soft = np.eye(c, dtype=np.float32)[np.where(rng.random(n) < 0.6, clean, given)]
  table = label_table_lib.create(given, c, history_length=1).replace(soft_labels=soft)
  padded = table_sharding.pad(table, 4)  # 12 rows: 2 padding rows (label -1)
  jo = joint_optimization.method(
    alpha=1.2, beta=0.8, prior=joint_optimization.uniform_prior(c), begin=1, history_length=1
  )
  out = table_metrics.table_metrics(padded, clean, jo, num_examples=n)
  changed = soft.argmax(1) != given
  noisy = clean != given
  assert out["relabelled_fraction"] == np.mean(changed)
  assert out["label_recovery_overall"] == pytest.approx(np.mean(soft.argmax(1) == clean))
  tp = np.sum(changed & noisy)
  assert out["detection_precision"] == pytest.approx(tp / np.sum(changed))
  assert out["detection_recall"] == pytest.approx(tp / np.sum(noisy))
  assert table_metrics.table_metrics(padded, None, jo, num_examples=n) == {"relabelled_fraction": np.mean(changed)}
