"""Run in its own process by test_table_sharding.py: the row-sharded label table on N simulated devices.

Environment (set by the caller before jax is imported): XLA_FLAGS=--xla_force_host_platform_device_count=N and
PJRT_NPROC=2N (without it, collectives on simulated CPU devices deadlock on a 2-core machine).
Prints one JSON line: the sharded reads and writes against NumPy, and for Joint Optimization and truncated Lq the
largest differences between training with today's replicated table on 1 device and the sharded table on N devices
(epoch programs and epoch-boundary updates), with the rows each device holds.

`check_reads_and_writes(mesh)` is also imported by the in-process test (a mesh of one device).
"""

import json
import os
import shutil
import sys
import tempfile

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import ml_collections
import numpy as np
import orbax.checkpoint as ocp

from noisy_jax import models
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.experiment import inputs
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import joint_optimization
from noisy_jax.methods import truncated_lq
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.parallel import table_sharding
from noisy_jax.train import checkpoint as checkpoint_lib
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import optim
from noisy_jax.train import predict as predict_lib
from noisy_jax.train import state as state_lib

AXIS = mesh_lib.AXIS


def _max_diff(a, b):
  diffs = jax.tree.map(
    lambda x, y: float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)), initial=0.0)), a, b
  )
  return max(jax.tree.leaves(diffs), default=0.0)


def check_reads_and_writes(mesh) -> dict:
  """sharded_targets / sharded_record / sharded_set_weights in a shard_map over `mesh` against NumPy.

  A table of 30 rows (padded to a multiple of the device count), 5 reads per device (repeats allowed) and the
  all-gathered batch's writes (unique rows, every 7th one -1: dropped). Returns the largest differences (0 expected:
  reads and writes move values, no arithmetic) and the padding rows' largest absolute value after the writes.
  """
  rng = np.random.default_rng(3)
  n, c, h, per_device = 30, 3, 2, 5
  devices = mesh.devices.size
  batch = devices * per_device
  table = label_table_lib.create(rng.integers(0, c, n), c, history_length=h).replace(
    soft_labels=jnp.asarray(rng.random((n, c)), jnp.float32), weights=jnp.asarray(rng.random(n), jnp.float32)
  )
  read_rows = rng.integers(0, n, batch).astype(np.int32)
  write_rows = rng.permutation(n)[:batch].astype(np.int32)
  write_rows[::7] = -1
  probs = rng.random((batch, c)).astype(np.float32)
  new_weights = rng.random(batch).astype(np.float32)

  def per_device_fn(t, reads, writes, p, w):
    soft, weights = label_table_lib.sharded_targets(t, reads, axis_name=AXIS)
    t = label_table_lib.sharded_record(t, writes, p, slot=3, axis_name=AXIS)
    t = label_table_lib.sharded_set_weights(t, writes, w, axis_name=AXIS)
    return soft, weights, t

  spec = table_sharding.specs(AXIS, sharded=True)
  fn = jax.jit(
    jax.shard_map(
      per_device_fn,
      mesh=mesh,
      in_specs=(spec, P(AXIS), P(), P(), P()),
      out_specs=(P(AXIS), P(AXIS), spec),
      check_vma=False,
    )
  )
  put = lambda x, s: jax.device_put(x, NamedSharding(mesh, s))
  soft, weights, written = fn(
    table_sharding.shard(table, mesh, AXIS),
    put(read_rows, P(AXIS)),
    put(write_rows, P()),
    put(probs, P()),
    put(new_weights, P()),
  )

  ok = write_rows >= 0
  history = np.zeros((h, n, c), np.float32)
  history[3 % h, write_rows[ok]] = probs[ok]
  ref_weights = np.asarray(table.weights).copy()
  ref_weights[write_rows[ok]] = new_weights[ok]
  host = jax.device_get(written)
  real = table_sharding.unpad(host, n)
  padding = [np.abs(np.asarray(x)[n:]).max(initial=0.0) for x in (host.soft_labels, host.weights)]
  padding.append(np.abs(np.asarray(host.history)[:, n:]).max(initial=0.0))
  return {
    "read_soft": _max_diff(soft, np.asarray(table.soft_labels)[read_rows]),
    "read_weights": _max_diff(weights, np.asarray(table.weights)[read_rows]),
    "history": _max_diff(real.history, history),
    "filled": [bool(v) for v in np.asarray(host.history_filled)],
    "weights": _max_diff(real.weights, ref_weights),
    "soft_unchanged": _max_diff(real.soft_labels, table.soft_labels),
    "padding_rows": int(host.num_examples - n),
    "padding_max": float(max(padding)),
    "create_in_place": check_create_in_place(mesh),
  }


def check_create_in_place(mesh) -> bool:
  """table_sharding.create builds, block by block on the devices, the same arrays in the same sharding as
  sharding label_table.create's table (31 rows: padding on 2 and 4 devices)."""
  labels = np.random.default_rng(5).integers(0, 4, 31)
  built = table_sharding.create(labels, 4, history_length=2, mesh=mesh, axis=AXIS)
  expected = table_sharding.shard(label_table_lib.create(labels, 4, history_length=2), mesh, AXIS)
  return all(
    x.sharding == y.sharding and x.dtype == y.dtype and np.array_equal(x, y)
    for x, y in zip(jax.tree.leaves(built), jax.tree.leaves(expected))
  )


def _train(method, images, noisy, c, state0, model, *, devices, sharded, epochs, mode="auto"):
  """`epochs` epochs and the method's epoch-boundary update after each (as loop.fit does), then the final table
  with its N real rows on the host, the parameters and the rows each device holds."""
  n = images.shape[0]
  mesh = mesh_lib.make_mesh(devices)
  table = label_table_lib.create(noisy, c, history_length=method.history_length)
  table = table_sharding.shard(table, mesh, AXIS) if sharded else mesh_lib.replicate(table, mesh)
  # As loop.fit jits the epoch-end update: rows kept split on a sharded table, its padding rows zero probabilities.
  out_shardings = table_sharding.shardings(mesh, AXIS, sharded=True) if sharded else None
  jitted = lambda fn: jax.jit(fn, static_argnames=("num_examples",), out_shardings=out_shardings)
  end = jitted(method.epoch_end.update)
  top_k = jitted(lambda t, p, e, num_examples: label_table_lib.relabel_top_k(t, 40))
  update = lambda t, p: end(t, None if p is None else table_sharding.pad_rows(p, t.num_examples), 0, num_examples=n)
  state = mesh_lib.replicate(jax.tree.map(jnp.copy, state0), mesh)
  x = mesh_lib.replicate(jnp.asarray(images), mesh)
  epoch_fn = epoch_lib.make_epoch_fn(method, mesh, batch_size=128, num_examples=n, mode=mode, shard_table=sharded)
  predict = predict_lib.make_predict_fn(model, batch_size=160)
  losses = []
  for epoch in range(1, epochs + 1):
    state, table, metrics = epoch_fn(state, table, x, jax.random.PRNGKey(100 + epoch), jnp.int32(epoch))
    jax.block_until_ready((state, table))
    losses.append(float(metrics["train_loss"]))
    variables = {"params": state.params, "batch_stats": state.batch_stats}
    probs = predict(variables, x) if method.reads_train_probs else None
    table = jax.block_until_ready(update(table, probs))
  rows = sorted(int(s.data.shape[0]) for s in table.soft_labels.addressable_shards)
  history_rows = sorted(int(s.data.shape[1]) for s in table.history.addressable_shards)
  out = {
    "params": jax.device_get(state.params),
    "losses": losses,
    "rows_per_device": rows,
    "history_rows_per_device": history_rows,
    "devices_holding": len({s.device for s in table.soft_labels.addressable_shards}),
    "table": table_sharding.host_table(table, n),
  }
  if method.history_length:
    out["top_k"] = table_sharding.host_table(jax.block_until_ready(top_k(table, None, 0, num_examples=n)), n)
  return out


def compare_training(num_devices: int, epochs: int) -> dict:
  rng = np.random.default_rng(0)
  n, c = 302, 5  # 2 full batches of 128 + a padded one of 46; 302 rows pad to 304 on 4 devices (76 each)
  images = rng.normal(size=(n, 6, 6, 1)).astype(np.float32)
  noisy = rng.integers(0, c, n)
  model = models.get("mlp", num_classes=c, hidden_sizes=(32,), bn_axis_name=AXIS)
  opt = ml_collections.ConfigDict(
    {"learning_rate": 0.05, "momentum": 0.9, "weight_decay": 5e-4, "lr_boundaries": (1,), "lr_decay": 0.5}
  )
  state0 = state_lib.create_train_state(
    model,
    jax.random.PRNGKey(1),
    images.shape[1:],
    optim.make_optimizer(settings_lib.optimizer_settings(opt), steps_per_epoch=3),
  )
  variants = {
    "joint_optimization": (
      joint_optimization.method(
        alpha=1.2, beta=0.8, prior=joint_optimization.uniform_prior(c), begin=1, history_length=2
      ),
      "auto",
    ),
    "joint_optimization_scan": (
      joint_optimization.method(
        alpha=1.2, beta=0.8, prior=joint_optimization.uniform_prior(c), begin=1, history_length=2
      ),
      "scan",
    ),
    "truncated_lq": (truncated_lq.method(k=0.3, prune_start=1, prune_every=1, prune_params="current"), "auto"),
  }
  out = {}
  for name, (method, mode) in variants.items():
    one = _train(method, images, noisy, c, state0, model, devices=1, sharded=False, epochs=epochs, mode=mode)
    many = _train(method, images, noisy, c, state0, model, devices=num_devices, sharded=True, epochs=epochs, mode=mode)
    table_one, table_many = one["table"], many["table"]
    out[name] = {
      "params": _max_diff(one["params"], many["params"]),
      "table": _max_diff(table_one, table_many),
      "loss": max(abs(a - b) for a, b in zip(one["losses"], many["losses"])),
      "param_change": _max_diff(state0.params, one["params"]),
      "rows_per_device": many["rows_per_device"],
      "history_rows_per_device": many["history_rows_per_device"],
      "devices_holding": many["devices_holding"],
      "table_rows": int(table_many.num_examples),
    }
    if method.history_length:
      out[name]["relabelled"] = float(np.mean(np.argmax(table_one.soft_labels, -1) != noisy))
      out[name]["top_k"] = _max_diff(one["top_k"], many["top_k"])
      out[name]["top_k_changed"] = int(
        np.sum(np.any(np.asarray(one["top_k"].soft_labels) != np.asarray(table_one.soft_labels), axis=-1))
      )
    else:
      out[name]["pruned"] = float(np.mean(np.asarray(table_one.weights) == 0))
  return out


def _checkpoint_arrays(workdir):
  manager = checkpoint_lib.open_manager(checkpoint_lib.stage_dir(workdir, "stage1"), keep=100)
  epoch = checkpoint_lib.latest_epoch(manager)
  restored = manager.restore(epoch, args=ocp.args.Composite(arrays=ocp.args.StandardRestore()))["arrays"]
  manager.close()
  return epoch, jax.tree.map(np.asarray, restored)


def check_resume(num_devices: int) -> dict:
  """runs.run_single with the table sharded over the devices (digits, truncated Lq, 3 epochs, a checkpoint each
  epoch); the last checkpoint removed, the same command resumes from epoch 2, reading each device's rows back in
  place. The same again with a replicated table: the padded checkpoint is read on the host, its real rows kept."""
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import resume_worker  # pylint: disable=g-import-not-at-top

  config = resume_worker.tiny_config("truncated_lq", checkpoint_every=1)
  config.num_epochs, config.num_devices, config.label_table_sharding = 3, num_devices, "sharded"
  config.method.prune_start, config.method.prune_every = 2, 1  # prunes after every epoch (best-val params)
  config.batch_size = 128
  with tempfile.TemporaryDirectory() as root:
    reference, resumed, other = (os.path.join(root, name) for name in ("reference", "resumed", "other_layout"))
    summary = runs.run_single(config, reference)
    for directory in (resumed, other):
      shutil.copytree(reference, directory)
      shutil.rmtree(os.path.join(checkpoint_lib.stage_dir(directory, "stage1"), "3"))
    logged = []
    runs.run_single(config, resumed, log_fn=logged.append)
    replicated = ml_collections.ConfigDict(config.to_dict())
    replicated.label_table_sharding = "replicated"
    other_summary = runs.run_single(replicated, other)
    (epoch, a), (_, b), (_, c) = (_checkpoint_arrays(d) for d in (reference, resumed, other))
  leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
  n = int(inputs.load_dataset(config).x_train.shape[0])
  labels = a["table"]["noisy_labels"]
  return {
    "epoch": epoch,
    "resumed_epochs": [r["epoch"] for r in logged],
    "bit_identical": len(leaves_a) == len(leaves_b)
    and all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(leaves_a, leaves_b)),
    "checkpoint_rows": int(a["table"]["soft_labels"].shape[0]),
    "dataset_rows": n,
    "real_rows_labelled": bool(np.all(labels[:n] >= 0)),
    "padding_labels": labels[n:].tolist(),
    "padding_weights": a["table"]["weights"][n:].tolist(),
    "other_layout_rows": int(c["table"]["soft_labels"].shape[0]),
    "other_layout_params_diff": max(
      float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))
      for x, y in zip(jax.tree.leaves(a["state"]["params"]), jax.tree.leaves(c["state"]["params"]))
    ),
    "other_layout_weights_equal": bool(np.array_equal(a["table"]["weights"][:n], c["table"]["weights"])),
    "pruned_fraction": summary["stage1"]["pruned_fraction"],
    "other_pruned_fraction": other_summary["stage1"]["pruned_fraction"],
    "pruned_numpy": float(np.mean(a["table"]["weights"][:n] == 0)),
  }


def main(num_devices: int, epochs: int):
  assert jax.device_count() >= num_devices, jax.devices()
  result = {
    "reads_and_writes": check_reads_and_writes(mesh_lib.make_mesh(num_devices)),
    "training": compare_training(num_devices, epochs),
    "resume": check_resume(num_devices),
  }
  print("RESULT " + json.dumps(result))


if __name__ == "__main__":
  main(int(sys.argv[1]), int(sys.argv[2]))
