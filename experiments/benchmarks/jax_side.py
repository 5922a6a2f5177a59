"""The noisy_jax side of the benchmarks: the library's own model registry, optimizer, methods, step and epoch.

Nothing here re-implements the library: the step is `noisy_jax.train.step.train_step` mapped over a one-device mesh
with `jax.shard_map` under `jax.jit` with the state and the label table donated (exactly how `make_epoch_fn`'s
'steps' mode maps it), and the epoch is `noisy_jax.train.epoch.make_epoch_fn`.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import ml_collections
import numpy as np

from noisy_jax import models
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import joint_optimization
from noisy_jax.methods import plain_loss
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.parallel import xla_options
from noisy_jax.train import method as method_lib
from noisy_jax.train import optim
from noisy_jax.train import state as state_lib
from noisy_jax.train import step as step_lib

# Joint Optimization as in experiments/configs/joint_optimization.py (the paper's 70%-noise values), relabelling
# from the first epoch so that every benchmarked epoch does the relabel.
JO_SETTINGS = {"alpha": 1.2, "beta": 0.8, "history_length": 10, "begin": 1}
OPTIMIZER = {"learning_rate": 0.1, "momentum": 0.9, "weight_decay": 5e-4}


def make_model(name: str, num_classes: int = 10):
  """A registered model with BatchNorm statistics averaged over the trainer's device axis."""
  return models.get(name, num_classes=num_classes, bn_axis_name=mesh_lib.AXIS)


def count_parameters(params) -> int:
  return int(sum(np.prod(x.shape) for x in jax.tree.leaves(params)))


def make_method(name: str, num_classes: int = 10) -> method_lib.Method:
  """'ce': cross entropy (no history); 'jo': Joint Optimization stage 1 (records predictions, soft relabel)."""
  if name == "ce":
    return plain_loss.method("cross_entropy")
  if name == "jo":
    return joint_optimization.method(prior=joint_optimization.uniform_prior(num_classes), relabel="soft", **JO_SETTINGS)
  raise ValueError(f"unknown method {name!r}; 'ce' or 'jo'.")


def make_table(method: method_lib.Method, labels: np.ndarray, num_classes: int = 10):
  """The method's table: its history and, for ELR / SOP, its per-example rows (as runs.run_single adds them)."""
  table = label_table_lib.create(labels, num_classes, history_length=method.history_length)
  if method.init_rows is not None:
    table = label_table_lib.with_method_rows(
      table, method.init_rows(jax.random.key(1), table.num_examples, num_classes)
    )
  return table


def make_state(
  model, input_shape, *, steps_per_epoch: int = 1, seed: int = 0, jit_init: bool = True, num_networks: int = 1
) -> state_lib.TrainState:
  """`state_lib.create_train_state` with the library's SGD (momentum 0.9, coupled weight decay 5e-4, lr 0.1).

  jit_init: run the initialisation as one compiled program (the same parameters; only faster to build: Flax's
  `model.init` op by op dispatches every layer's ops one at a time, ~20 s for ResNet-32 on a busy 2-core CPU).
  `fit` does not jit it (compile_and_memory.py measures that path with jit_init=False).
  """
  tx = optim.make_optimizer(settings_lib.optimizer_settings(ml_collections.ConfigDict(OPTIMIZER)), steps_per_epoch)
  create = functools.partial(
    state_lib.create_train_state, model, input_shape=tuple(input_shape), tx=tx, num_networks=num_networks
  )
  return (jax.jit(create) if jit_init else create)(jax.random.key(seed))


def make_step(method: method_lib.Method, mesh, model=None, member_map: str = "loop"):
  """`step(state, table, images [B, ...], indices [B], valid [B], epoch) -> (state, table, metrics)`, jitted,
  state and table donated: `step_lib.train_step` per device under `jax.shard_map`, as the epoch program runs it,
  with the model's XLA options (`xla_options.compiler_options`) as `fit` compiles it. member_map: how a two-network
  method maps over its pair ('loop' or 'vmap', noisy_jax.train.members)."""

  def per_device(state, table, images, indices, valid, epoch):
    return step_lib.train_step(state, table, images, indices, valid, method=method, epoch=epoch, member_map=member_map)

  mapped = jax.shard_map(per_device, mesh=mesh, in_specs=(P(),) * 6, out_specs=(P(),) * 3, check_vma=False)
  options = xla_options.compiler_options(model, mesh.devices.flat[0].platform) if model is not None else None
  return jax.jit(mapped, donate_argnums=(0, 1), compiler_options=options)


class StepRunner:
  """Holds (state, table) on the device and runs `steps` donated train steps on one fixed batch per call."""

  def __init__(
    self,
    *,
    model_name: str,
    method: str | method_lib.Method,
    batch: np.ndarray,
    num_examples: int,
    seed: int = 0,
    jit_init: bool = True,
    xla_options: bool = True,
    member_map: str = "loop",
  ):
    """xla_options: compile the step with the model's XLA options (`xla_options.compiler_options`, as `fit` does);
    False: with XLA's defaults (to measure what the options change). member_map: for a two-network method."""
    self.mesh = mesh_lib.make_mesh(1)
    self.model = make_model(model_name)
    self.method = make_method(method) if isinstance(method, str) else method
    batch_size = batch.shape[0]
    labels = np.random.default_rng(seed).integers(0, 10, num_examples)
    state = make_state(
      self.model,
      batch.shape[1:],
      steps_per_epoch=math.ceil(num_examples / batch_size),
      seed=seed,
      jit_init=jit_init,
      num_networks=self.method.num_networks,
    )
    self.num_parameters = count_parameters(state.params)
    self.state = mesh_lib.replicate(state, self.mesh)
    self.table = mesh_lib.replicate(make_table(self.method, labels), self.mesh)
    self.images = mesh_lib.replicate(jnp.asarray(batch), self.mesh)
    rows = np.random.default_rng(seed + 1).choice(num_examples, batch_size, replace=False).astype(np.int32)
    self.indices = mesh_lib.replicate(jnp.asarray(rows), self.mesh)
    self.valid = mesh_lib.replicate(jnp.ones((batch_size,), bool), self.mesh)
    self.epoch = mesh_lib.replicate(jnp.asarray(1, jnp.int32), self.mesh)
    self.step = make_step(self.method, self.mesh, self.model if xla_options else None, member_map=member_map)

  def args(self):
    return self.state, self.table, self.images, self.indices, self.valid, self.epoch

  def __call__(self, steps: int = 1):
    metrics = None
    for _ in range(steps):
      self.state, self.table, metrics = self.step(*self.args())
    jax.block_until_ready((self.state, self.table, metrics))
    return metrics


def time_step_variants(variants: dict, args) -> dict:
  """Times `variants` ({side: Method, or (Method, member_map), or (Method, member_map, batch multiple)})
  alternately, `args.steps` donated steps per unit on one synthetic batch of `args.batch_size` (times the side's
  multiple, default 1) with a table of `args.num_examples` rows; `common.summarize` of them (its images/s count
  `args.batch_size` images per step for every side)."""
  from experiments.benchmarks import common  # pylint: disable=g-import-not-at-top

  runners = {}
  for name, variant in variants.items():
    method, member_map, multiple = (tuple(variant) + (1,))[:3] if isinstance(variant, tuple) else (variant, "loop", 1)
    batch = (
      np.random.default_rng(0)
      .standard_normal((args.batch_size * multiple, *common.STEP_INPUT_SHAPES[args.model]))
      .astype(np.float32)
    )
    runners[name] = StepRunner(
      model_name=args.model, method=method, batch=batch, num_examples=args.num_examples, member_map=member_map
    )
  sides = {name: (lambda r=runner: r(args.steps)) for name, runner in runners.items()}
  times = common.alternate(sides, repeats=args.repeats, warmup=args.warmup)
  return common.summarize(times, work=args.batch_size * args.steps, unit="images/s")
