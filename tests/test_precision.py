"""noisy_jax.core.precision: a run computes in float32, or wholly in float64 under JAX's x64 mode."""

import jax
import jax.numpy as jnp
import numpy as np

from experiments import golden
from noisy_jax import models
from noisy_jax.core import label_table
from noisy_jax.core import precision
from noisy_jax.experiment import runs


def test_float_dtype_follows_x64_and_at_least_never_narrows():
  assert precision.float_dtype() == jnp.float32 and not precision.x64_enabled()
  assert precision.at_least(jnp.bfloat16) == jnp.float32 and precision.at_least(jnp.int32) == jnp.float32
  with jax.enable_x64(True):
    assert precision.float_dtype() == jnp.float64
    assert precision.at_least(jnp.bfloat16) == jnp.float64 and precision.at_least(jnp.float32) == jnp.float64
  tree = {"w": jnp.ones((2,), jnp.float32), "n": jnp.ones((2,), jnp.int32)}
  assert precision.widen(tree) is tree  # float32 mode: untouched
  with jax.enable_x64(True):
    wide = precision.widen(tree)
    assert wide["w"].dtype == jnp.float64 and wide["n"].dtype == jnp.int32


def test_models_and_tables_are_float32_by_default_and_float64_under_x64():
  for x64, dtype in ((False, jnp.float32), (True, jnp.float64)):
    with jax.enable_x64(x64):
      model = models.get("small_cnn", num_classes=10)
      variables = model.init(jax.random.PRNGKey(0), jnp.zeros((2, 8, 8, 1)), train=False)
      assert {x.dtype for x in jax.tree.leaves(variables["params"])} == {jnp.dtype(dtype)}
      assert model.apply(variables, jnp.zeros((2, 8, 8, 1)), train=False).dtype == dtype
      table = label_table.create(np.array([0, 1, 2]), 3, history_length=2)
      assert table.soft_labels.dtype == table.weights.dtype == table.history.dtype == dtype


def test_a_run_under_x64_is_float64_throughout():
  """Parameters, batch statistics and the label table with the method's rows (SOP's u and v) all come out float64."""
  config = golden.run_configs()["sop"]
  config.num_epochs = 1
  with jax.enable_x64(True):
    summary = runs.run_single(config, keep_arrays=True)
  arrays = summary["arrays"]
  floats = [
    x.dtype for x in jax.tree.leaves((arrays["stage1"], arrays["label_table"])) if jnp.issubdtype(x.dtype, jnp.floating)
  ]
  assert floats and set(floats) == {jnp.dtype(jnp.float64)}
  assert np.isfinite(summary["history"][0]["train_loss"])
