"""The fused-backward BatchNorm against flax.linen.BatchNorm: outputs, running averages and gradients."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from noisy_jax.models.batch_norm import BatchNorm


def _both(shape, seed=0):
  x = jax.random.normal(jax.random.PRNGKey(seed), shape) * 3.0 + 1.5  # mean far from 0: tests the one-pass variance
  ours, ref = BatchNorm(momentum=0.9, epsilon=1e-5), nn.BatchNorm(momentum=0.9, epsilon=1e-5, use_running_average=False)
  variables = ref.init(jax.random.PRNGKey(1), x)
  c = shape[-1]
  variables = {
    "params": {
      "scale": jax.random.uniform(jax.random.PRNGKey(2), (c,), minval=0.5, maxval=2.0),
      "bias": jax.random.normal(jax.random.PRNGKey(3), (c,)),
    },
    "batch_stats": {
      "mean": jax.random.normal(jax.random.PRNGKey(4), (c,)),
      "var": jax.random.uniform(jax.random.PRNGKey(5), (c,), minval=0.5, maxval=2.0),
    },
  }
  return x, ours, ref, variables


@pytest.mark.parametrize("shape", [(16, 5, 5, 3), (32, 7)])
def test_train_mode_matches_flax(shape):
  x, ours, ref, variables = _both(shape)
  y, stats = ours.apply(variables, x, mutable=["batch_stats"])
  y_ref, stats_ref = ref.apply(variables, x, mutable=["batch_stats"])
  np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-5)
  for k in ("mean", "var"):
    np.testing.assert_allclose(stats["batch_stats"][k], stats_ref["batch_stats"][k], rtol=1e-5, atol=1e-6)
  # Running averages against NumPy: 0.9 old + 0.1 batch value, biased variance.
  xs = np.asarray(x, np.float64).reshape(-1, shape[-1])
  np.testing.assert_allclose(
    stats["batch_stats"]["var"], 0.9 * np.asarray(variables["batch_stats"]["var"]) + 0.1 * xs.var(0), rtol=1e-4
  )


@pytest.mark.parametrize("shape", [(16, 5, 5, 3), (32, 7)])
def test_gradients_match_flax_autodiff(shape):
  x, ours, ref, variables = _both(shape)
  weights = jax.random.normal(jax.random.PRNGKey(9), shape)  # a loss whose upstream gradient is not constant

  def loss(module, params, x):
    y, _ = module.apply({"params": params, "batch_stats": variables["batch_stats"]}, x, mutable=["batch_stats"])
    return jnp.sum(jnp.sin(y) * weights)

  grads = jax.grad(loss, argnums=(1, 2))(ours, variables["params"], x)
  grads_ref = jax.grad(loss, argnums=(1, 2))(ref, variables["params"], x)
  for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(grads_ref)):
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


def test_eval_mode_uses_running_averages():
  x, _, _, variables = _both((8, 4))
  y = BatchNorm(use_running_average=True).apply(variables, x)
  bs, p = variables["batch_stats"], variables["params"]
  expected = (np.asarray(x) - bs["mean"]) / np.sqrt(np.asarray(bs["var"]) + 1e-5) * p["scale"] + p["bias"]
  np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_same_variable_names_as_flax_and_bf16_output():
  x = jnp.ones((4, 3, 3, 2))
  ours = jax.tree.map(jnp.shape, BatchNorm().init(jax.random.PRNGKey(0), x))
  ref = jax.tree.map(jnp.shape, nn.BatchNorm(use_running_average=False).init(jax.random.PRNGKey(0), x))
  assert ours == ref
  y, _ = BatchNorm(dtype=jnp.bfloat16).apply(
    BatchNorm().init(jax.random.PRNGKey(0), x), x * 2.0, mutable=["batch_stats"]
  )
  assert y.dtype == jnp.bfloat16 and bool(jnp.all(jnp.isfinite(y)))
