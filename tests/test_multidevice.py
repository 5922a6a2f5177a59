"""1-device == N-device: the per-device step mapped with shard_map gives the same training on any mesh size.

joint_optimization_streamed: the N-device run streams its batches from the host (noisy_jax.parallel.streaming) where the
1-device run gathers them from resident uint8 codes: device placement and input path together change nothing.

The comparison runs in a separate process with 4 simulated CPU devices. PJRT_NPROC=8 is set before jax is imported
there: without it, collectives on simulated devices deadlock on a 2-core machine (shared/DESIGN.md). The process is
bounded by a timeout so a hang fails the test instead of freezing the suite.
"""

import pytest

import simulated_devices

NUM_DEVICES = 4
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def multidevice_result():
  return simulated_devices.run_worker("multidevice_worker.py", NUM_DEVICES, "3")


@pytest.mark.parametrize(
  "method",
  [
    "cross_entropy",
    "truncated_lq",
    "joint_optimization",
    "cross_entropy_augmented",
    "cross_entropy_augmented_scan",
    "joint_optimization_streamed",
    "elr",
    "sop",
    "sop_sharded",
    "coteaching",
  ],
)
def test_one_device_equals_four_devices(multidevice_result, method):
  diffs = multidevice_result[method]
  # Training really moved the parameters, so equality is not trivial.
  assert diffs["param_change"] > 1e-3
  for key in ("params", "batch_stats", "table", "loss"):
    assert diffs[key] <= TOLERANCE, (method, key, diffs)
  if method in ("elr", "sop", "sop_sharded"):  # the per-example state moved, and moved alike
    assert diffs["rows_change"] > 1e-3, diffs
  if method.startswith("cross_entropy_augmented"):  # augmentation was applied: training differs from plain CE
    assert diffs["vs_unaugmented"] > 1e-3, diffs


def test_method_rows_built_on_a_sharded_table_equal_the_unsharded_init(multidevice_result):
  built = multidevice_result["sop_rows_built_sharded"]
  assert built["sharded"]
  assert built["rows"] <= TOLERANCE, built  # partitioned normal draws: equal up to float rounding (~6e-8)


@pytest.mark.parametrize("variant", ["dividemix", "dividemix_sharded"])
def test_dividemix_one_device_equals_four_devices(multidevice_result, variant):
  diffs = multidevice_result[variant]  # _sharded: the 4-device run's table (division, loss history) row-sharded
  assert 0.05 < diffs["labelled_fraction"] < 0.95, diffs  # the GMM divided the examples
  for key in ("params", "batch_stats", "table", "loss"):
    assert diffs[key] <= 1e-5, (key, diffs)


@pytest.mark.parametrize("variant", ["elr_plus", "elr_plus_sharded"])
def test_elr_plus_one_device_equals_four_devices(multidevice_result, variant):
  diffs = multidevice_result[variant]  # _sharded: the 4-device run's table (both target tables) row-sharded
  assert diffs["targets_moved"] > 0.1, diffs  # the targets were written
  for key in ("params", "batch_stats", "ema_params", "table", "loss"):
    assert diffs[key] <= 1e-5, (key, diffs)
