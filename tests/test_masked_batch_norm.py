"""BatchNorm statistics over a mask of the batch's rows (noisy_jax.models.masked_batch_norm) equal the subset
forwarded alone, the original's `model(x[flags])`: outputs, running averages and gradients, for the package's models
with either BatchNorm kind."""

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from noisy_jax import models
from noisy_jax.models import masked_batch_norm

MASK = np.array([1, 0, 1, 1, 0, 0, 1, 1], bool)  # 5 of 8 rows


def _model_and_inputs(name, batch_norm):
  kwargs = {"hidden_sizes": (16,)} if name == "mlp" else {}
  model = models.get(name, num_classes=4, batch_norm=batch_norm, **kwargs)
  shape = (8, 12, 12, 1) if name == "small_cnn" else (8, 8, 8, 3)
  x = jax.random.normal(jax.random.PRNGKey(0), shape) * 2.0 + 0.5
  variables = model.init(jax.random.PRNGKey(1), x, train=False)
  return model, variables, x


def _loss_and_stats(model, variables, x, mask=None):
  """(sum of the rows' log-softmax at class 0 over the rows in `mask`, new batch_stats), and its parameter
  gradient: masked statistics with `mask`, the rows indexed out and forwarded alone without."""

  def loss_fn(params):
    inputs = x if mask is not None else x[MASK]
    apply = lambda: model.apply(
      {"params": params, "batch_stats": variables["batch_stats"]}, inputs, train=True, mutable=["batch_stats"]
    )
    if mask is None:
      logits, updates = apply()
      return jnp.sum(jax.nn.log_softmax(logits)[:, 0]), updates["batch_stats"]
    with masked_batch_norm.statistics_over(mask):
      logits, updates = apply()
    return jnp.sum(jnp.where(mask, jax.nn.log_softmax(logits)[:, 0], 0.0)), updates["batch_stats"]

  return jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(variables["params"])


@pytest.mark.parametrize("name,batch_norm", [("mlp", "fused"), ("small_cnn", "fused"), ("small_cnn", "flax")])
def test_masked_statistics_equal_the_subset_forwarded_alone(name, batch_norm):
  model, variables, x = _model_and_inputs(name, batch_norm)
  (loss, stats), grads = _loss_and_stats(model, variables, x, jnp.asarray(MASK))
  (ref_loss, ref_stats), ref_grads = _loss_and_stats(model, variables, x)
  np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
  flat = flax.traverse_util.flatten_dict
  assert flat(stats).keys() == flat(ref_stats).keys() and len(flat(stats)) >= 2
  for key, value in flat(stats).items():
    np.testing.assert_allclose(value, flat(ref_stats)[key], rtol=1e-5, atol=1e-6, err_msg=str(key))
    assert not np.allclose(value, flat(variables["batch_stats"])[key]), key  # the averages moved
  for key, value in flat(grads).items():
    np.testing.assert_allclose(value, flat(ref_grads)[key], rtol=2e-4, atol=1e-5, err_msg=str(key))


def test_an_empty_mask_keeps_the_running_averages_and_evaluation_is_untouched():
  model, variables, x = _model_and_inputs("small_cnn", "fused")
  (loss, stats), grads = _loss_and_stats(model, variables, x, jnp.zeros(8, bool))
  assert loss == 0.0 and all(np.all(g == 0) for g in jax.tree.leaves(grads))
  jax.tree.map(np.testing.assert_array_equal, stats, variables["batch_stats"])
  with masked_batch_norm.statistics_over(jnp.asarray(MASK)):
    masked_eval = model.apply(variables, x, train=False)
  np.testing.assert_array_equal(masked_eval, model.apply(variables, x, train=False))


def test_a_mask_of_another_size_is_refused():
  model, variables, x = _model_and_inputs("mlp", "fused")
  with pytest.raises(ValueError, match="the mask has 5 rows, the batch 8"):
    with masked_batch_norm.statistics_over(jnp.ones(5, bool)):
      model.apply(variables, x, train=True, mutable=["batch_stats"])
