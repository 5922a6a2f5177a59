"""1-device == N-device: the per-device step mapped with shard_map gives the same training on any mesh size.

joint_optimization_streamed: the N-device run streams its batches from the host (noisy_jax.parallel.streaming) where the
1-device run gathers them from resident uint8 codes: device placement and input path together change nothing.

The comparison runs in a separate process with 4 simulated CPU devices. PJRT_NPROC=8 is set before jax is imported
there: without it, collectives on simulated devices deadlock on a 2-core machine (shared/DESIGN.md). The process is
bounded by a timeout so a hang fails the test instead of freezing the suite. Every registered method's whole run
on 4 devices is compared with its golden run in tests/test_method_runs.py.
"""

import pytest

from experiments import ci_shares
import simulated_devices

NUM_DEVICES = 4
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def multidevice_result():
  return simulated_devices.run_worker("multidevice_worker.py", NUM_DEVICES, "3")


def _record_seconds(request, result, name):
  """Reports comparison `name`'s seconds in the worker ("case_seconds") on this test: experiments/ci_shares.py."""
  if name in result.get("case_seconds", {}):
    ci_shares.record_case_seconds(request.node, result["case_seconds"][name])


@pytest.mark.parametrize(
  "method",
  [
    "cross_entropy",
    "cross_entropy_augmented",
    "cross_entropy_augmented_scan",
    "joint_optimization_streamed",
    "sop_sharded",
  ],
)
def test_input_and_table_paths_one_device_equals_four_devices(multidevice_result, method, request):
  _record_seconds(request, multidevice_result, method)
  diffs = multidevice_result[method]
  # Training really moved the parameters, so equality is not trivial.
  assert diffs["param_change"] > 1e-3
  for key in ("params", "batch_stats", "table", "loss"):
    assert diffs[key] <= TOLERANCE, (method, key, diffs)
  if method == "sop_sharded":  # the per-example state moved, and moved alike
    assert diffs["rows_change"] > 1e-3, diffs
  if method.startswith("cross_entropy_augmented"):  # augmentation was applied: training differs from plain CE
    assert diffs["vs_unaugmented"] > 1e-3, diffs


def test_method_rows_built_on_a_sharded_table_equal_the_unsharded_init(multidevice_result, request):
  _record_seconds(request, multidevice_result, "sop_rows_built_sharded")
  built = multidevice_result["sop_rows_built_sharded"]
  assert built["sharded"]
  assert built["rows"] <= TOLERANCE, built  # partitioned normal draws: equal up to float rounding (~6e-8)
