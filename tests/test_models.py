"""Tests for noisy_jax.models: shapes, parameter counts, BatchNorm behaviour, dtypes, device-axis statistics."""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from noisy_jax import models

SHAPES = [(28, 28, 1), (8, 8, 1)]


def _init(model, shape, seed=0):
  init = jax.jit(functools.partial(model.init, train=False))  # one compilation beats op-by-op dispatch
  return init(jax.random.key(seed), jnp.zeros((1, *shape), jnp.float32))


def _shapes(model, shape):
  """The variables' shapes and dtypes, without running or compiling anything."""
  return jax.eval_shape(
    functools.partial(model.init, train=False), jax.random.key(0), jnp.zeros((1, *shape), jnp.float32)
  )


def _apply(model, variables, x, *, train, mutable=False, **kwargs):
  """model.apply under jit (mutable=['batch_stats'] -> (logits, updates), as in Flax)."""
  return jax.jit(functools.partial(model.apply, train=train, mutable=mutable, **kwargs))(variables, x)


def _count(tree) -> int:
  return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(tree))


def _images(batch, shape, seed=0):
  return jax.random.normal(jax.random.key(seed), (batch, *shape), jnp.float32)


@pytest.mark.parametrize("name", ["mlp", "small_cnn"])
@pytest.mark.parametrize("shape", SHAPES)
def test_output_shapes_and_dtype(name, shape):
  model = models.get(name, num_classes=7)
  variables = _init(model, shape)
  x = _images(5, shape)
  logits, updates = _apply(model, variables, x, train=True, mutable=("batch_stats",))
  assert logits.shape == (5, 7) and logits.dtype == jnp.float32
  assert jax.tree.structure(updates["batch_stats"]) == jax.tree.structure(variables["batch_stats"])
  eval_logits = _apply(model, variables, x, train=False)
  assert eval_logits.shape == (5, 7) and eval_logits.dtype == jnp.float32
  assert np.all(np.isfinite(eval_logits))


def test_mlp_parameter_count():
  d = 28 * 28
  model = models.get("mlp", num_classes=10)
  variables = _shapes(model, (28, 28, 1))
  # Dense without bias (BN follows) + BN scale and bias, twice; then Dense(10) with bias.
  assert _count(variables["params"]) == (d * 256 + 2 * 256) + (256 * 256 + 2 * 256) + (256 * 10 + 10)
  assert _count(variables["batch_stats"]) == 2 * (256 + 256)  # mean and var per BN feature
  plain = _shapes(models.get("mlp", num_classes=3, hidden_sizes=(5, 4), use_batch_norm=False), (13,))
  assert _count(plain["params"]) == (13 * 5 + 5) + (5 * 4 + 4) + (4 * 3 + 3)
  assert "batch_stats" not in plain


@pytest.mark.parametrize("shape, final_side", [((28, 28, 1), 7), ((8, 8, 1), 2)])
def test_small_cnn_parameter_count(shape, final_side):
  """Maps: 28 -> 14 -> 7 and 8 -> 4 -> 2 (pooling stops at 2x2); bias-free 3x3 convs, each with BN."""
  w1, w2, w3 = 12, 24, 48  # the defaults
  convs = 9 * 1 * w1 + 9 * w1 * w2 + 9 * w2 * w3
  bns = 2 * (w1 + w2 + w3)
  variables = _shapes(models.get("small_cnn", num_classes=10), shape)
  head = final_side * final_side * w3 * 10 + 10  # flatten -> Dense(10)
  assert _count(variables["params"]) == convs + bns + head
  assert variables["params"]["Conv_2"]["kernel"].shape == (3, 3, w2, w3)
  assert _count(variables["batch_stats"]) == bns
  avg = _shapes(models.get("small_cnn", num_classes=10, widths=(4, 6), head="avg", dense_size=5), shape)
  assert _count(avg["params"]) == (9 * 4 + 9 * 4 * 6) + 2 * (4 + 6) + (6 * 5 + 5) + (5 * 10 + 10)


def test_small_cnn_conv_init_is_he_normal():
  kernel = _init(models.get("small_cnn", num_classes=10), (28, 28, 1))["params"]["Conv_2"]["kernel"]
  fan_in = 3 * 3 * 24
  assert abs(float(jnp.std(kernel)) / np.sqrt(2.0 / fan_in) - 1.0) < 0.05
  assert abs(float(jnp.mean(kernel))) < 0.01


def _mlp_one_layer(x, params, mean, var, eps=1e-5):
  """NumPy re-computation of MLP(hidden_sizes=(H,)) with given BN statistics."""
  x = np.asarray(x, np.float64).reshape(len(x), -1)
  h = x @ np.asarray(params["Dense_0"]["kernel"])
  h = (h - mean) / np.sqrt(var + eps) * np.asarray(params["BatchNorm_0"]["scale"]) + np.asarray(
    params["BatchNorm_0"]["bias"]
  )
  h = np.maximum(h, 0.0)
  return h @ np.asarray(params["Dense_1"]["kernel"]) + np.asarray(params["Dense_1"]["bias"])


def test_mlp_batch_norm_train_and_eval_closed_form():
  model = models.get("mlp", num_classes=4, hidden_sizes=(6,))
  variables = _init(model, (3, 3, 1))
  params = variables["params"]
  x = _images(16, (3, 3, 1), seed=1) * 2.0 + 0.5
  h = np.asarray(x, np.float64).reshape(16, -1) @ np.asarray(params["Dense_0"]["kernel"])
  batch_mean, batch_var = h.mean(axis=0), h.var(axis=0)  # biased variance
  # Train mode: normalise with the batch statistics; running averages move with momentum 0.9.
  logits, updates = _apply(model, variables, x, train=True, mutable=("batch_stats",))
  np.testing.assert_allclose(logits, _mlp_one_layer(x, params, batch_mean, batch_var), rtol=1e-4, atol=1e-4)
  stats = updates["batch_stats"]["BatchNorm_0"]
  np.testing.assert_allclose(stats["mean"], 0.9 * 0.0 + 0.1 * batch_mean, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(stats["var"], 0.9 * 1.0 + 0.1 * batch_var, rtol=1e-5, atol=1e-6)
  # Eval mode: normalise with the stored running statistics, which are left unchanged.
  trained = {"params": params, "batch_stats": updates["batch_stats"]}
  eval_logits, eval_updates = _apply(model, trained, x, train=False, mutable=("batch_stats",))
  np.testing.assert_allclose(
    eval_logits, _mlp_one_layer(x, params, np.asarray(stats["mean"]), np.asarray(stats["var"])), rtol=1e-4, atol=1e-4
  )
  jax.tree.map(np.testing.assert_array_equal, eval_updates["batch_stats"], updates["batch_stats"])


def _conv3x3_same(x, kernel):
  """NumPy 3x3 'SAME' convolution (cross-correlation) of [B, H, W, Ci] with [3, 3, Ci, Co]."""
  x, kernel = np.asarray(x, np.float64), np.asarray(kernel, np.float64)
  padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
  h, w = x.shape[1:3]
  return sum(padded[:, i : i + h, j : j + w] @ kernel[i, j] for i in range(3) for j in range(3))


@pytest.mark.parametrize("shape", SHAPES)
def test_small_cnn_batch_stats_train_updates_eval_does_not(shape):
  model = models.get("small_cnn", num_classes=10)
  variables = _init(model, shape)
  x = _images(8, shape, seed=2)
  _, updates = _apply(model, variables, x, train=True, mutable=("batch_stats",))
  first = _conv3x3_same(x, variables["params"]["Conv_0"]["kernel"])
  stats = updates["batch_stats"]["BatchNorm_0"]
  np.testing.assert_allclose(stats["mean"], 0.1 * first.mean(axis=(0, 1, 2)), rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(stats["var"], 0.9 + 0.1 * first.var(axis=(0, 1, 2)), rtol=1e-4, atol=1e-6)
  for layer in ("BatchNorm_1", "BatchNorm_2"):  # deeper layers moved too
    assert not np.allclose(updates["batch_stats"][layer]["mean"], 0.0)
  trained = {"params": variables["params"], "batch_stats": updates["batch_stats"]}
  eval_logits, eval_updates = _apply(model, trained, x, train=False, mutable=("batch_stats",))
  jax.tree.map(np.testing.assert_array_equal, eval_updates["batch_stats"], updates["batch_stats"])
  # Eval: each example's logits do not depend on the rest of the batch; train: they do (batch statistics).
  np.testing.assert_allclose(_apply(model, trained, x[:1], train=False), eval_logits[:1], rtol=1e-5, atol=1e-5)
  alone, _ = _apply(model, trained, x[:2], train=True, mutable=("batch_stats",))
  together, _ = _apply(model, trained, x, train=True, mutable=("batch_stats",))
  assert not np.allclose(alone, together[:2], atol=1e-3)


@pytest.mark.parametrize("name", ["mlp", "small_cnn"])
def test_bfloat16_compute_gives_finite_float32_logits(name):
  shape = (8, 8, 1)
  model32 = models.get(name, num_classes=10)
  model16 = models.get(name, num_classes=10, dtype=jnp.bfloat16)
  variables = _init(model16, shape)
  assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(variables))  # params stay float32
  x = _images(16, shape, seed=3) * 100.0  # large inputs: bf16 must not overflow
  for train in (True, False):
    logits16 = _apply(model16, variables, x, train=train, mutable=("batch_stats",))[0]
    logits32 = _apply(model32, variables, x, train=train, mutable=("batch_stats",))[0]
    assert logits16.dtype == jnp.float32 and np.all(np.isfinite(logits16))
    scale = float(jnp.max(jnp.abs(logits32)))
    assert float(jnp.max(jnp.abs(logits16 - logits32))) < 0.1 * scale  # bf16 has ~3 significant digits


@pytest.mark.parametrize("name, shape", [("mlp", (8, 8, 1)), ("small_cnn", (8, 8, 1)), ("small_cnn", (28, 28, 1))])
def test_bn_axis_name_syncs_batch_statistics_under_vmap(name, shape):
  """Two 'devices' with 4 examples each, averaging over the axis, equal one batch of 8."""
  x = _images(8, shape, seed=4)
  whole_model = models.get(name, num_classes=5)
  variables = _init(whole_model, shape)
  whole_logits, whole = _apply(whole_model, variables, x, train=True, mutable=("batch_stats",))

  def per_device(model, shard):
    return _apply(model, variables, shard, train=True, mutable=("batch_stats",))

  synced = models.get(name, num_classes=5, bn_axis_name="devices")
  shards = x.reshape(2, 4, *shape)
  logits, updates = jax.vmap(lambda s: per_device(synced, s), axis_name="devices")(shards)
  np.testing.assert_allclose(logits.reshape(8, 5), whole_logits, rtol=1e-4, atol=1e-4)
  for device in range(2):
    jax.tree.map(
      lambda a, b: np.testing.assert_allclose(a[device], b, rtol=1e-4, atol=1e-5),
      updates["batch_stats"],
      whole["batch_stats"],
    )
  # Without the axis name each device uses its own 4 examples: different statistics (the test can fail).
  _, local = jax.vmap(lambda s: per_device(whole_model, s), axis_name="devices")(shards)
  first = jax.tree.leaves(local["batch_stats"])[0]
  assert not np.allclose(first[0], jax.tree.leaves(whole["batch_stats"])[0], atol=1e-4)


def test_max_pool_2x2_matches_flax_max_pool():
  from noisy_jax.models import small_cnn  # pylint: disable=g-import-not-at-top

  for side in (7, 8):
    x = _images(2, (side, side + 1, 3), seed=side)
    np.testing.assert_array_equal(small_cnn.max_pool_2x2(x), nn.max_pool(x, (2, 2), strides=(2, 2)))
    # and the gradient of XLA's windowed max (select-and-scatter) on tie-free inputs: one window element each
    cotangent = _images(2, (side // 2, (side + 1) // 2, 3), seed=side + 10)
    grad = lambda pool: jax.jit(jax.grad(lambda x: jnp.sum(pool(x) * cotangent)))(x)
    np.testing.assert_array_equal(grad(small_cnn.max_pool_2x2), grad(lambda x: nn.max_pool(x, (2, 2), strides=(2, 2))))


def test_mlp_dropout_only_in_train_mode():
  model = models.get("mlp", num_classes=3, hidden_sizes=(32,), dropout_rate=0.5)
  variables = _init(model, (10,))
  x = _images(4, (10,))
  train = lambda seed: _apply(
    model, variables, x, train=True, mutable=("batch_stats",), rngs={"dropout": jax.random.key(seed)}
  )[0]
  assert not np.allclose(train(0), train(1))
  no_dropout = models.get("mlp", num_classes=3, hidden_sizes=(32,))  # same parameter tree
  np.testing.assert_allclose(
    _apply(model, variables, x, train=False), _apply(no_dropout, variables, x, train=False), rtol=1e-6
  )  # eval mode: dropout is the identity, and needs no RNG


@pytest.mark.parametrize("name", ["mlp", "small_cnn"])
def test_models_learn_digits(name):
  """A few epochs of SGD on scikit-learn's digits (real data): the models can learn, not merely run."""
  from noisy_jax import data  # pylint: disable=g-import-not-at-top

  ds = data.standardize(data.load("digits"), "per_channel")
  model = models.get(name, num_classes=10)
  variables = _init(model, ds.input_shape)
  tx = optax.sgd(0.05, momentum=0.9)
  params, batch_stats = variables["params"], variables["batch_stats"]
  opt_state = tx.init(params)

  @jax.jit
  def step(params, batch_stats, opt_state, x, y):
    def loss_fn(p):
      logits, updates = _apply(
        model, {"params": p, "batch_stats": batch_stats}, x, train=True, mutable=("batch_stats",)
      )
      return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), updates["batch_stats"]

    (_, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    updates, opt_state = tx.update(grads, opt_state)
    return optax.apply_updates(params, updates), batch_stats, opt_state

  rng = np.random.default_rng(0)
  for _ in range(6):
    order = rng.permutation(ds.num_train)
    for start in range(0, ds.num_train - 63, 64):
      rows = order[start : start + 64]
      params, batch_stats, opt_state = step(params, batch_stats, opt_state, ds.x_train[rows], ds.y_train[rows])
  logits = _apply(model, {"params": params, "batch_stats": batch_stats}, ds.x_test, train=False)
  assert float(np.mean(np.argmax(logits, -1) == ds.y_test)) > 0.9


def test_small_cnn_rejects_vectors_and_bad_fields():
  with pytest.raises(ValueError, match=r"\[B, H, W, C\].*\(1, 13\).*'mlp'"):
    _init(models.get("small_cnn", num_classes=3), (13,))
  with pytest.raises(ValueError, match=r"'max'.*'avg'.*'flatten'"):
    _init(models.get("small_cnn", num_classes=3, head="max"), (8, 8, 1))
  with pytest.raises(ValueError, match=r"widths=\(\)"):
    _init(models.get("small_cnn", num_classes=3, widths=()), (8, 8, 1))


def test_registry_errors():
  assert set(models.MODELS) == {
    "mlp",
    "small_cnn",
    "preact_resnet32",
    "preact_resnet_jo",
    "resnet18",
    "resnet34",
    "apl_cnn",
    "apl_cnn_mnist",
    "resnet50",
    "imagenet_resnet18",
    "imagenet_resnet34",
    "coteaching_cnn",
    "vit_small_patch14_dinov2",
    "vit_base_patch14_dinov2",
    "vit_large_patch14_dinov2",
    "vit_small_patch14_reg4_dinov2",
    "vit_base_patch14_reg4_dinov2",
    "vit_large_patch14_reg4_dinov2",
    "vit_base_patch16_clip",
    "vit_large_patch14_clip",
    "vit_base_patch16_clip_openai",
    "vit_large_patch14_clip_openai",
  }
  assert isinstance(models.get("mlp", num_classes=3), models.MLP)
  with pytest.raises(ValueError, match=r"'resnet9'.*'mlp'.*'small_cnn'"):
    models.get("resnet9", num_classes=10)
  with pytest.raises(ValueError, match=r"num_classes=0"):
    models.get("mlp", num_classes=0)


def test_auto_model_follows_the_input_shape():
  for shape, name in (
    ((28, 28, 1), "small_cnn"),
    ((31, 64, 3), "small_cnn"),
    ((32, 32, 3), "preact_resnet32"),
    ((36, 36, 3), "preact_resnet32"),
    ((224, 224, 3), "preact_resnet32"),
    ((784,), "mlp"),
  ):
    assert models.resolve("auto", shape) == name, shape
  assert models.resolve("resnet18", (28, 28, 1)) == "resnet18"  # a named model is kept whatever the inputs
  with pytest.raises(ValueError, match=r"input shape \(28, 28\)\. Name a model instead"):
    models.resolve("auto", (28, 28))
  with pytest.raises(ValueError, match=r"'auto' is picked from the input shape: pass models\.resolve"):
    models.get("auto", num_classes=10)


@pytest.mark.parametrize("name", ["mlp", "small_cnn"])
def test_fused_batch_norm_gives_the_same_training_step(name):
  """batch_norm='fused' (hand-written backward) and 'flax' give the same logits, statistics and gradients."""
  import optax

  shape = (8, 8, 1)
  x = jax.random.normal(jax.random.PRNGKey(0), (16, *shape))
  y = jax.random.randint(jax.random.PRNGKey(1), (16,), 0, 3)
  outs = []
  for kind in ("flax", "fused"):
    model = models.get(name, num_classes=3, batch_norm=kind)
    variables = model.init(jax.random.PRNGKey(2), x[:1], train=False)

    def loss(params):
      logits, upd = model.apply(
        {"params": params, "batch_stats": variables["batch_stats"]}, x, train=True, mutable=["batch_stats"]
      )
      return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), upd

    (value, upd), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(variables["params"])
    outs.append((value, upd, grads))
  for a, b in zip(jax.tree.leaves(outs[0]), jax.tree.leaves(outs[1])):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
  with pytest.raises(ValueError, match=r"batch_norm 'torch'.*'fused'.*'flax'"):
    _init(models.get(name, num_classes=3, batch_norm="torch"), shape)
