"""A run's training state: flax's TrainState with BatchNorm statistics and a method's own state, and its creation."""

from __future__ import annotations

import functools
from typing import Any, Callable

import flax
from flax.training import train_state
import jax
import jax.numpy as jnp

from noisy_jax.core import precision
from noisy_jax.train import members as members_lib


class TrainState(train_state.TrainState):
  """Flax TrainState with BatchNorm statistics and a method's own state of the network that is not per example
  (`method_state`, a pytree the method's EpochProgram.init_state makes: ELR+'s weight averages, ProMix's moving class
  priors; empty otherwise)."""

  batch_stats: Any = None
  method_state: Any = flax.core.FrozenDict()


def create_train_state(
  model, key: jax.Array, input_shape, tx, *, num_networks: int = 1, init_variables: Callable | None = None
) -> TrainState:
  """The initial TrainState of `model` from `key`; with num_networks = 2, the two networks of a pair, initialised
  from jax.random.split(key) and stacked on a leading axis (noisy_jax.train.members). Parameters and statistics are in
  precision.float_dtype() (float64 with x64 on). `init_variables`, when given, maps each network's fresh variables
  ({'params', 'batch_stats'}) to its starting ones (pretrained weights: noisy_jax.experiment.pretrained)."""
  # Jitted: eager init runs the network op by op (~7 s for a ResNet-32 on a 2-core CPU). Same values as eager for
  # truncated-normal initialisers (SmallCNN, MLP: checked bit for bit), within 1 ulp for plain normal ones. One
  # program for every network of a pair.
  init = jax.jit(functools.partial(model.init, train=False))

  def one_network(network_key):
    variables = init(network_key, jnp.zeros((1, *input_shape), precision.float_dtype()))
    if init_variables is not None:
      variables = init_variables(flax.core.unfreeze(variables))
    variables = precision.widen(variables)
    return TrainState.create(
      apply_fn=model.apply,
      params=variables["params"],
      tx=tx,
      batch_stats=variables.get("batch_stats", flax.core.FrozenDict()),
    )

  if num_networks > 1:
    return members_lib.stack([one_network(k) for k in jax.random.split(key, num_networks)])
  return one_network(key)


def variables_of(state: TrainState):
  return {"params": state.params, "batch_stats": state.batch_stats}
