"""Run in its own process by test_multidevice.py: trains the same epochs on a 1-device and an N-device mesh; and by
test_method_runs.py (`N registered ROOT`): every registered method's golden run on N devices, checkpointed in ROOT.

Environment (set by the caller before jax is imported): XLA_FLAGS=--xla_force_host_platform_device_count=N and
PJRT_NPROC=2N (without it, collectives on simulated CPU devices deadlock on a 2-core machine).
Prints one JSON line: for each method, the largest absolute difference of params, batch stats and label table, and
under "case_seconds" each comparison's wall time in this process (time.perf_counter: both meshes' runs; the tests
report it for experiments/ci_shares.py).
"""

import json
import os
import sys
import time
from typing import NamedTuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository: experiments/

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import jax.numpy as jnp
import ml_collections
import numpy as np

from experiments.configs import tiny  # pylint: disable=g-import-not-at-top,wrong-import-position
from noisy_jax import data
from noisy_jax import models
from noisy_jax.core import augment as augment_lib
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.data import normalization
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import registry
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.parallel import table_sharding
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import optim
from noisy_jax.train import state as state_lib

# One tiny case per registered method: the first of its MethodSpec.tiny (a method added to the registry is compared
# here without a line of this file).
REGISTERED = [next(iter(spec.tiny)) for spec in registry.SPECS.values()]


def _max_diff(a, b):
  diffs = jax.tree.map(
    lambda x, y: float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)), initial=0.0)), a, b
  )
  return max(jax.tree.leaves(diffs), default=0.0)


class _Inputs(NamedTuple):
  """What every variant trains on: the [n, 6, 6, 1] float images and their uint8 codes, the noisy labels, n, c, the
  initial states (one network, a pair), the codes' normalisation and the augmentation."""

  images: np.ndarray
  codes: np.ndarray
  noisy: np.ndarray
  n: int
  c: int
  state0: object
  state_pair: object
  normalize: object
  augment: object


def _variants(c: int) -> dict:
  """{variant name: method}: the input and table paths compared, on methods of the registry's tiny cases (every
  method's whole run: `registered_runs`)."""
  ce_method = registry.make(tiny.get_config("ce").method, num_classes=c)
  jo_method = registry.make(tiny.get_config("joint_optimization").method, num_classes=c)
  return {
    "cross_entropy": ce_method,
    # Random crop + flip of the [6, 6, 1] images inside the step (the MLP flattens them afterwards), in both
    # epoch modes: each example's augmentation depends on (step key, its index), not on the device split.
    "cross_entropy_augmented": ce_method,
    "cross_entropy_augmented_scan": ce_method,
    # Streamed input (noisy_jax.parallel.streaming) on N devices against resident input on 1: the host's batches split
    # over the mesh by make_array_from_process_local_data, uint8 codes normalised in the step.
    "joint_optimization_streamed": jo_method,
    # SOP's u, v (differentiated and stepped; init std 0.3 so that their gradients are not ~1e-8) on a row-sharded
    # table, with SOP+'s balance term (a mean over the global batch).
    "sop_sharded": registry.make(
      ml_collections.ConfigDict({"name": "sop", "init_std": 0.3, "ratio_balance": 0.1}), num_classes=c
    ),
  }


def _train_variant(name: str, method, devices: int, inputs: _Inputs, epochs: int) -> dict:
  """Variant `name` trained for `epochs` epochs on a mesh of `devices`: its params, batch stats, host label table
  (relabelled when the method keeps a history), losses and starting state."""
  n, c = inputs.n, inputs.c
  mesh = mesh_lib.make_mesh(devices)
  table = label_table_lib.create(inputs.noisy, c, history_length=method.history_length)
  if method.init_rows is not None:
    table = label_table_lib.with_method_rows(table, method.init_rows(jax.random.PRNGKey(7), n, c))
  start = inputs.state_pair if method.num_networks > 1 else inputs.state0
  state = mesh_lib.replicate(jax.tree.map(jnp.copy, start), mesh)
  sharded = name.endswith("_sharded") and devices > 1
  table = table_sharding.shard(table, mesh, mesh_lib.AXIS) if sharded else mesh_lib.replicate(table, mesh)
  streamed = name.endswith("_streamed")
  x = mesh_lib.replicate(jnp.asarray(inputs.codes if streamed else inputs.images), mesh)
  augmented = name.startswith("cross_entropy_augmented") or streamed
  source = inputs.codes if streamed and devices > 1 else None
  epoch_fn = epoch_lib.make_epoch_fn(
    method,
    mesh,
    batch_size=128,
    num_examples=n,
    mode="scan" if name.endswith("_scan") else "auto",
    augment=inputs.augment if augmented else None,
    normalize=inputs.normalize if streamed else None,
    source=source,
    shard_table=sharded,
  )
  if source is not None:
    x = None
  losses = []
  for epoch in range(1, epochs + 1):
    state, table, metrics = epoch_fn(state, table, x, jax.random.PRNGKey(100 + epoch), jnp.int32(epoch))
    jax.block_until_ready((state, table))
    losses.append(float(metrics["train_loss"]))
  if method.history_length:
    table = label_table_lib.relabel(table, mode="soft")
  if sharded:
    table = table_sharding.host_table(table, n)
  return {
    "params": jax.device_get(state.params),
    "batch_stats": jax.device_get(state.batch_stats),
    "table": jax.device_get(table),
    "losses": losses,
    "start": start,
  }


def _differences(one: dict, many: dict, method, n: int, c: int) -> dict:
  """The largest differences between the 1-device and the N-device run, how far training moved the parameters (and
  the method's rows), and the 1-device run's parameters ("first_params")."""
  out = {
    "params": _max_diff(one["params"], many["params"]),
    "batch_stats": _max_diff(one["batch_stats"], many["batch_stats"]),
    "table": _max_diff(one["table"], many["table"]),
    "loss": max(abs(a - b) for a, b in zip(one["losses"], many["losses"])),
    "param_change": _max_diff(one["start"].params, one["params"]),
  }
  if method.init_rows is not None:  # the rows really changed in training
    out["rows_change"] = _max_diff(method.init_rows(jax.random.PRNGKey(7), n, c), one["table"].method_rows)
  out["first_params"] = one["params"]
  return out


def _sop_rows_built_sharded(sop, noisy, n: int, c: int, num_devices: int) -> dict:
  """A sharded table built in place (table_sharding.create, as run_single does for a large table) gets SOP's u, v
  computed where its rows live: whether they are sharded, and their largest difference from the unsharded init
  (padding rows aside)."""
  mesh = mesh_lib.make_mesh(num_devices)
  built = table_sharding.add_method_rows(
    table_sharding.create(noisy, c, history_length=0, mesh=mesh, axis=mesh_lib.AXIS),
    lambda rows: sop.init_rows(jax.random.PRNGKey(7), rows, c),
    mesh=mesh,
    axis=mesh_lib.AXIS,
  )
  return {
    "sharded": not built.method_rows["sop_v"].is_fully_replicated,
    "rows": _max_diff(table_sharding.host_table(built, n).method_rows, sop.init_rows(jax.random.PRNGKey(7), n, c)),
  }


def main(num_devices: int, epochs: int):
  assert jax.device_count() >= num_devices, jax.devices()
  rng = np.random.default_rng(0)
  n, c = 300, 5  # 300 = 2 full batches of 128 + one padded batch of 44: exercises the padding path too.
  images = rng.normal(size=(n, 6, 6, 1)).astype(np.float32)
  noisy = rng.integers(0, c, n)
  model = models.get("mlp", num_classes=c, hidden_sizes=(32,), bn_axis_name=mesh_lib.AXIS)
  opt = ml_collections.ConfigDict(
    {"learning_rate": 0.05, "momentum": 0.9, "weight_decay": 5e-4, "lr_boundaries": (1,), "lr_decay": 0.5}
  )
  tx = optim.make_optimizer(settings_lib.optimizer_settings(opt), steps_per_epoch=3)
  state0 = state_lib.create_train_state(model, jax.random.PRNGKey(1), images.shape[1:], tx)
  variants = _variants(c)
  state_pair = state_lib.create_train_state(model, jax.random.PRNGKey(1), images.shape[1:], tx, num_networks=2)
  codes = rng.integers(0, 256, size=images.shape).astype(np.uint8)
  normalize = normalization.fit(data.from_arrays(codes, noisy, codes[:1], noisy[:1], pixel_max=255.0), "per_channel")
  augment = augment_lib.make_augment(crop_padding=1, flip=True)
  inputs = _Inputs(images, codes, noisy, n, c, state0, state_pair, normalize, augment)
  out, seconds = {}, {}
  for name, method in variants.items():
    began = time.perf_counter()
    one = _train_variant(name, method, 1, inputs, epochs)
    many = _train_variant(name, method, num_devices, inputs, epochs)
    out[name] = _differences(one, many, method, n, c)
    seconds[name] = time.perf_counter() - began
  # Augmentation really changed the training (else the augmented comparison would prove nothing new).
  for name in ("cross_entropy_augmented", "cross_entropy_augmented_scan"):
    out[name]["vs_unaugmented"] = _max_diff(out[name]["first_params"], out["cross_entropy"]["first_params"])
  for name in out:
    del out[name]["first_params"]
  began = time.perf_counter()
  out["sop_rows_built_sharded"] = _sop_rows_built_sharded(variants["sop_sharded"], noisy, n, c, num_devices)
  seconds["sop_rows_built_sharded"] = time.perf_counter() - began
  out["case_seconds"] = seconds
  print("RESULT " + json.dumps(out))


# Methods whose 4-device run keeps its label table row-sharded instead of replicated: their tables hold the most
# per-example state (DivideMix's division and loss history, ELR+'s two target tables, ProMix's two selections). The
# replicated table of N devices is compared on every other method.
SHARDED_TABLE_CASES = ("dividemix", "elr_plus", "promix")


def registered_runs(num_devices: int, root: str) -> dict:
  """Trains the first tiny case of every registered method (noisy_jax.methods.registry.SPECS) as the golden runs are
  trained (experiments/configs/tiny.py `checkpointed`, in float64), on `num_devices` devices, in root/CASE; the
  SHARDED_TABLE_CASES with their table row-sharded. Returns {"layouts": {case: the table's layout},
  "case_seconds": {case: its wall time}}. tests/test_method_runs.py compares the checkpoints and records with those
  of the golden process's 1-device runs: in float64 (~1e-16 rounding) another reduction order moves no selection
  (Co-teaching's small-loss sets, DivideMix's GMM), where float32 (~1e-7) would within a few epochs."""
  layouts, seconds = {}, {}
  for case in REGISTERED:
    began = time.perf_counter()
    config = tiny.checkpointed(tiny.get_config(case))
    config.num_devices = num_devices
    config.label_table_sharding = "sharded" if case in SHARDED_TABLE_CASES else "replicated"
    with jax.enable_x64(True):
      runs.run_single(config, os.path.join(root, case))
    layouts[case] = config.label_table_sharding
    seconds[case] = time.perf_counter() - began
  return {"layouts": layouts, "case_seconds": seconds}


if __name__ == "__main__":
  if sys.argv[2] == "registered":  # N registered ROOT
    print("RESULT " + json.dumps(registered_runs(int(sys.argv[1]), sys.argv[3])))
  else:  # N EPOCHS: the input and table paths
    main(int(sys.argv[1]), int(sys.argv[2]))
