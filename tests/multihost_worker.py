"""Run as a separate process by test_multihost.py: trains tiny configs through `train.loop.fit` and saves them.

  python tests/multihost_worker.py --out=DIR                                            # one process
  python tests/multihost_worker.py --out=DIR --num_processes=2 --process_id=P --port=N  # one of two processes

With --num_processes > 1 the process joins a `jax.distributed` run over localhost (CPU, gloo collectives) through
noisy_jax.parallel.distributed.maybe_initialize; the trainer's mesh then spans every process's devices. Each method
trains 3 epochs of an MLP on the same random [300, 6, 6, 1] data. Process 0 writes DIR/METHOD.npz (final params, batch
statistics and label table) and DIR/history.json (per-epoch records); the other processes write nothing.
"""

import argparse
import functools
import json
import os
import shutil
import sys

from noisy_jax.experiment import settings as settings_lib
from noisy_jax.parallel import distributed  # imports no JAX backend: initialization comes first


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--out", required=True)
  parser.add_argument("--num_processes", type=int, default=1)
  parser.add_argument("--process_id", type=int, default=0)
  parser.add_argument("--port", type=int, default=0)
  args = parser.parse_args()
  if args.num_processes > 1:
    assert distributed.maybe_initialize(
      True,
      coordinator_address=f"localhost:{args.port}",
      num_processes=args.num_processes,
      process_id=args.process_id,
      initialization_timeout=120,
    )
  else:
    assert not distributed.maybe_initialize()  # no flag, no env: a plain run never starts jax.distributed

  import jax  # pylint: disable=g-import-not-at-top
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  import ml_collections  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from noisy_jax import data  # pylint: disable=g-import-not-at-top
  from noisy_jax import models  # pylint: disable=g-import-not-at-top
  from noisy_jax.core import label_table as label_table_lib  # pylint: disable=g-import-not-at-top
  from noisy_jax.methods import joint_optimization
  from noisy_jax.methods import plain_loss
  from noisy_jax.methods import truncated_lq
  from noisy_jax.parallel import mesh as mesh_lib
  from noisy_jax.train import loop
  from noisy_jax.train import optim
  from noisy_jax.train import state as state_lib

  assert jax.process_count() == args.num_processes, (jax.process_count(), args.num_processes)
  mesh = mesh_lib.make_mesh()
  print(
    f"process {jax.process_index()}/{jax.process_count()}: mesh {mesh.devices.tolist()}, local {jax.local_devices()}",
    file=sys.stderr,
    flush=True,
  )

  rng = np.random.default_rng(0)
  n, c = 300, 5  # 2 full batches of 128 + one padded batch of 44
  dataset = data.from_arrays(
    rng.normal(size=(n, 6, 6, 1)),
    rng.integers(0, c, n),
    rng.normal(size=(60, 6, 6, 1)),
    rng.integers(0, c, 60),
    x_val=rng.normal(size=(40, 6, 6, 1)),
    y_val=rng.integers(0, c, 40),
    num_classes=c,
  )
  noisy = rng.integers(0, c, n)
  distributed.assert_same_on_all_processes((dataset.x_train, noisy), "training data")
  model = models.get("mlp", num_classes=c, hidden_sizes=(32,), bn_axis_name=mesh_lib.AXIS)
  config = ml_collections.ConfigDict(
    {
      "batch_size": 128,
      "num_epochs": 3,
      "eval_train": True,
      "seed": 0,
      "optimizer": {
        "learning_rate": 0.05,
        "momentum": 0.9,
        "weight_decay": 5e-4,
        "lr_boundaries": (2,),
        "lr_decay": 0.5,
      },
    }
  )
  variants = {
    "cross_entropy": (plain_loss.method("cross_entropy"), "auto"),
    # Records predictions in the table every step (all-gathered over the mesh) and relabels at each epoch's end.
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
    # Prunes weights from predictions on the training split (evaluation path) at each epoch's end.
    "truncated_lq": (truncated_lq.method(prune_start=1, prune_every=1), "auto"),
    # Streamed input (noisy_jax.parallel.streaming): each process reads only its columns of every global batch
    # (ShardByJaxProcess) and the global batch is assembled with make_array_from_process_local_data.
    "joint_optimization_streamed": (
      joint_optimization.method(
        alpha=1.2, beta=0.8, prior=joint_optimization.uniform_prior(c), begin=1, history_length=2
      ),
      "auto",
    ),
    # The label table split by rows over every device of every process (noisy_jax.parallel.table_sharding),
    # checkpointed each epoch (each process writes its own rows); the last checkpoint removed, a second fit resumes
    # for epoch 3.
    "joint_optimization_sharded": (
      joint_optimization.method(
        alpha=1.2, beta=0.8, prior=joint_optimization.uniform_prior(c), begin=1, history_length=2
      ),
      "auto",
    ),
    "truncated_lq_sharded": (truncated_lq.method(prune_start=1, prune_every=1), "auto"),
  }
  histories = {}
  for name, (method, mode) in variants.items():
    table = label_table_lib.create(noisy, c, history_length=method.history_length)
    run_config = ml_collections.ConfigDict(
      {
        **config.to_dict(),
        "epoch_mode": mode,
        "input_workers": 0,
        "input": "streaming" if name.endswith("_streamed") else "resident",
      }
    )
    fit = functools.partial(
      loop.fit,
      model=model,
      method=method,
      dataset=dataset,
      clean_train_labels=dataset.y_train,
      key=jax.random.PRNGKey(1),
      mesh=mesh,
      stage="stage1",
    )
    if name.endswith("_sharded"):
      run_config.label_table_sharding = "sharded"
      run_config.checkpoint_every = 1  # a checkpoint after every epoch: epoch 2's is resumed from below
      checkpoints = os.path.join(os.path.dirname(os.path.abspath(args.out)), "checkpoints", name)
      fit(table=table, settings=settings_lib.fit_settings(run_config), checkpoint_dir=checkpoints)
      if distributed.is_main_process():  # as if killed during epoch 3
        shutil.rmtree(os.path.join(checkpoints, "3"))
      multihost_utils.sync_global_devices("checkpoint 3 removed")
      resumed = []
      state, table, history, _ = fit(
        table=label_table_lib.create(noisy, c, history_length=method.history_length),
        settings=settings_lib.fit_settings(run_config),
        checkpoint_dir=checkpoints,
        on_resume=resumed.extend,
      )
      assert [r["epoch"] for r in resumed] == [1, 2], resumed  # restored, then epoch 3 trained
    else:
      state, table, history, _ = fit(table=table, settings=settings_lib.fit_settings(run_config))
    assert state.params["Dense_0"]["kernel"].sharding.mesh.devices.size == jax.device_count()
    init = state_lib.create_train_state(
      model,
      jax.random.split(jax.random.PRNGKey(1))[0],
      dataset.x_train.shape[1:],
      optim.make_optimizer(settings_lib.optimizer_settings(config.optimizer), 3),
    )
    arrays = {
      "params": state.params,
      "batch_stats": state.batch_stats,
      "init_params": init.params,
      "table": {"soft_labels": table.soft_labels, "weights": table.weights, "history": table.history},
    }
    flat = {
      jax.tree_util.keystr(path): value
      for path, value in jax.tree_util.tree_leaves_with_path(distributed.host_value(arrays))
    }
    histories[name] = history
    if distributed.is_main_process():
      np.savez(os.path.join(args.out, f"{name}.npz"), **flat)
  if distributed.is_main_process():
    with open(os.path.join(args.out, "history.json"), "w") as f:
      json.dump(histories, f)
  print(f"process {jax.process_index()} done", file=sys.stderr, flush=True)


if __name__ == "__main__":
  main()
