"""Prediction and evaluation of a trained network: batched softmax over a split, accuracy on a split."""

from __future__ import annotations

import functools
import math
from typing import Callable

import flax.linen as nn
import jax
from jax import lax
import jax.numpy as jnp

from noisy_jax.core import precision
from noisy_jax.data import normalization
from noisy_jax.parallel import streaming
from noisy_jax.train import members as members_lib


def make_predict_fn(
  model,
  *,
  batch_size: int = 500,
  normalize: Callable | None = None,
  compiler_options: dict | None = None,
  num_networks: int = 1,
) -> Callable:
  """`predict(variables, images [N, ...]) -> softmax probabilities [N, C]` in eval mode, in fixed-size chunks.

  normalize: the inputs as stored -> float32 network inputs (on the device); None: they are float already.
  compiler_options: XLA options for the program (`compiler_options(model, platform)`, as for the train step).
  num_networks: 2 for the variables of a pair (stacked on a leading axis): the softmax of the mean of the two
    networks' logits, how DivideMix and ELR+ evaluate (argmax (z1 + z2)).
  """
  normalize = normalize or normalization.identity()

  def apply(variables, x, train):
    if num_networks == 1:
      return model.apply(variables, x, train=train)
    # A pair: the networks one after the other on the chunk (plain kernels on every backend), their logits averaged.
    return jnp.mean(
      jnp.stack([model.apply(members_lib.take(variables, m), x, train=train) for m in range(num_networks)]), axis=0
    )

  @functools.partial(jax.jit, compiler_options=compiler_options)
  def predict(variables, images):
    logits = map_in_chunks(lambda x: apply(variables, normalize(x), train=False), images, batch_size)
    return jax.nn.softmax(logits.astype(precision.at_least(logits.dtype)))[: images.shape[0]]

  return predict


def map_in_chunks(fn: Callable, images, batch_size: int):
  """fn over `images` [N, ...] in chunks of `batch_size` (lax.map), the last chunk padded with zeros: fn's outputs
  flattened to [ceil(N / batch_size) * batch_size, -1], padding rows last (callers keep the first N)."""
  n = images.shape[0]
  chunks = math.ceil(n / batch_size)
  pad = chunks * batch_size - n
  padded = jnp.concatenate([images, jnp.zeros((pad, *images.shape[1:]), images.dtype)]) if pad else images
  out = lax.map(fn, padded.reshape(chunks, batch_size, *images.shape[1:]))
  return out.reshape(chunks * batch_size, -1)


def penultimate_features(model, variables, x):
  """The input of `model`'s last Dense layer (the classifier head), flattened to [B, D], eval mode: the network's
  embedding of `x` [B, ...] (the activations the head maps to logits; noisy_jax.models' networks all end in a Dense).

  Raises:
    ValueError: naming the model when it calls no Dense layer.
  """
  seen = []

  def record_dense_inputs(next_fun, args, kwargs, context):
    if isinstance(context.module, nn.Dense) and context.method_name == "__call__":
      seen.append(args[0])
    return next_fun(*args, **kwargs)

  with nn.intercept_methods(record_dense_inputs):
    model.apply(variables, x, train=False)
  if not seen:
    raise ValueError(f"{type(model).__name__} has no Dense layer: its penultimate features are not defined.")
  return seen[-1].reshape(x.shape[0], -1)


def make_embed_fn(
  model, *, batch_size: int = 500, normalize: Callable | None = None, compiler_options: dict | None = None
) -> Callable:
  """`embed(variables, images [N, ...]) -> float32 [N, D]`: `penultimate_features` of the normalised inputs, in
  fixed-size chunks as `make_predict_fn` (one network's variables)."""
  normalize = normalize or normalization.identity()

  @functools.partial(jax.jit, compiler_options=compiler_options)
  def embed(variables, images):
    features = map_in_chunks(lambda x: penultimate_features(model, variables, normalize(x)), images, batch_size)
    return features[: images.shape[0]].astype(jnp.float32)

  return embed


def make_evaluate(predict: Callable, *, workers: int = 0, batch_size: int = 500) -> Callable:
  """`evaluate(variables, x) -> probabilities [N, C]`: `predict` of an array split, or of a split on disk
  (image_files.ImageFiles) streamed in order in chunks of `batch_size` (parallel.streaming.ordered_batches). Any
  per-example function of (variables, images) works as `predict` (make_embed_fn's embeddings too)."""
  from noisy_jax.data import image_files  # pylint: disable=g-import-not-at-top

  def evaluate(variables, x):
    if not isinstance(x, image_files.ImageFiles):
      return predict(variables, x)
    with streaming.ordered_batches(x, batch_size, workers=workers) as loader:
      return jnp.concatenate([predict(variables, batch["images"]) for batch in loader])

  return evaluate
