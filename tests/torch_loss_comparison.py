"""A per-example loss of ours against an original PyTorch loss, both in float64 (tests/test_eps_softmax_losses.py,
tests/test_joint_asymmetric_losses.py). A plain module imported by the tests, not a test file."""

import jax
import jax.numpy as jnp
import numpy as np
import torch


def values_and_gradients(ours, original, logits, labels):
  """(our values [N], the original's [N], our gradients [N, C], the original's [N, C]), float64 NumPy.

  ours: `(logits [C], one-hot label [C]) -> scalar`, vmapped over the N rows; original: `(logits [N, C] tensor,
  labels [N] tensor) -> [N]` per-example losses, differentiated through the sum. logits [N, C], labels [N] ints.
  """
  classes = logits.shape[-1]
  pred = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
  expected = original(pred, torch.tensor(labels))
  expected.sum().backward()
  expected, expected_grad = expected.detach().numpy(), pred.grad.numpy()
  with jax.enable_x64():
    one_hot = jax.nn.one_hot(labels, classes, dtype=jnp.float64)
    value, grad = jax.jit(jax.vmap(jax.value_and_grad(ours)))(jnp.asarray(logits), one_hot)
  value, grad = np.asarray(value), np.asarray(grad)
  assert value.shape == (len(labels),) and value.dtype == np.float64
  return value, expected, grad, expected_grad
