"""The f-divergence pieces (noisy_jax.core.f_divergence) against the original code's formulas in float64 PyTorch.

The code's divergences (UCSC-REAL/Robust-f-divergence-measures@93d9efe CIFAR-10/runner.py:48-89), its ProbLossStable
(CIFAR-10/runner.py:94-103: NLLLoss of the softmax; CIFAR-100/runner.py:105: softmax + 1e-5) and its pair loss
activation(prob_reg) - conjugate(prob_peer) (runner.py:139-143) are transcribed as they are; the batch mean of
`pair_loss` and its gradient with respect to both logits are compared with them for every divergence, C = 10 and 100,
several batch shapes and both epsilons. The paper's Neyman pair (f-GAN's f*(t) = 2 - 2 sqrt(1 - t) at t = g(v)) is
compared with its composition written out. COMPARISONS counts the value and gradient checks; the worst relative error
is printed (pytest -s).
"""

import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn as nn

from noisy_jax.core import errors
from noisy_jax.core import f_divergence as fd


def _code_pair(div):
  """runner.py:48-89, verbatim but for `torch.tensor(2.)` in float64."""
  log2 = torch.log(torch.tensor(2.0, dtype=torch.float64))
  if div == "KL":
    return (lambda x: -torch.mean(x)), (lambda x: -torch.mean(torch.exp(x - 1.0)))
  if div == "Reverse-KL":
    return (lambda x: -torch.mean(-torch.exp(x))), (lambda x: -torch.mean(-1.0 - x))
  if div == "Jeffrey":
    return (lambda x: -torch.mean(x)), (
      lambda x: -torch.mean(x + torch.mul(x, x) / 4.0 + torch.mul(torch.mul(x, x), x) / 16.0)
    )
  if div == "Squared-Hellinger":
    return (lambda x: -torch.mean(1.0 - torch.exp(x))), (lambda x: -torch.mean((1.0 - torch.exp(x)) / (torch.exp(x))))
  if div == "Pearson":
    return (lambda x: -torch.mean(x)), (lambda x: -torch.mean(torch.mul(x, x) / 4.0 + x))
  if div == "Neyman-code":  # the code's 'Neyman'
    return (lambda x: -torch.mean(1.0 - torch.exp(x))), (lambda x: -torch.mean(2.0 - 2.0 * torch.sqrt(1.0 - x)))
  if div == "Neyman":  # the paper's: f*(t) = 2 - 2 sqrt(1 - t) at t = g(x) = 1 - exp(x)
    return (lambda x: -torch.mean(1.0 - torch.exp(x))), (
      lambda x: -torch.mean(2.0 - 2.0 * torch.sqrt(1.0 - (1.0 - torch.exp(x))))
    )
  if div == "Jenson-Shannon":
    return (lambda x: -torch.mean(-torch.log(1.0 + torch.exp(-x))) - log2), (
      lambda x: -torch.mean(x + torch.log(1.0 + torch.exp(-x))) + log2
    )
  if div == "Total-Variation":
    return (lambda x: -torch.mean(torch.tanh(x) / 2.0)), (lambda x: -torch.mean(torch.tanh(x) / 2.0))
  raise NotImplementedError(div)


class _ProbLossStable(nn.Module):
  """runner.py:94-103 (eps 0) and CIFAR-100/runner.py:105 (eps added to the softmax)."""

  def __init__(self, eps):
    super().__init__()
    self._eps = eps
    self._nllloss = nn.NLLLoss(reduction="none")

  def forward(self, outputs, labels):
    probs = torch.softmax(outputs, dim=-1)
    return self._nllloss(probs + self._eps if self._eps else probs, labels)


def _code_loss(div, output, target, output1, target2, eps):
  """runner.py:139-143."""
  activation, conjugate = _code_pair(div)
  criterion_prob = _ProbLossStable(eps)
  prob_reg = -criterion_prob(output, target)
  loss_regular = activation(prob_reg)
  prob_peer = -criterion_prob(output1, target2)
  loss_peer = conjugate(prob_peer)
  return loss_regular - loss_peer


WORST = {"relative": 0.0}
COMPARISONS = {"count": 0}


def _close(got, want, rtol=1e-11, atol=1e-13):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
  scale = np.maximum(np.abs(want), 1e-12)
  WORST["relative"] = max(WORST["relative"], float(np.max(np.abs(got - want) / scale)))
  COMPARISONS["count"] += 1


@pytest.mark.parametrize("divergence", fd.DIVERGENCES)
@pytest.mark.parametrize("classes", [10, 100])
@pytest.mark.parametrize("shape", [(8,), (64,), (3, 5)])
@pytest.mark.parametrize("eps", [0.0, fd.CIFAR100_PROB_EPSILON])
def test_pair_loss_and_gradients_equal_the_codes(divergence, classes, shape, eps):
  rng = np.random.default_rng(zlib.crc32(repr((divergence, classes, shape, eps)).encode()))
  scale = 3.0 if classes == 10 else 6.0
  z, z_peer = (rng.normal(size=(*shape, classes)) * scale for _ in range(2))
  y, y_peer = (rng.integers(0, classes, shape) for _ in range(2))
  y[..., 0] = np.argmax(z[..., 0, :] if len(shape) > 1 else z[0], axis=-1)  # one confident, correct row
  t_z = torch.tensor(z.reshape(-1, classes), requires_grad=True)
  t_zp = torch.tensor(z_peer.reshape(-1, classes), requires_grad=True)
  reference = _code_loss(divergence, t_z, torch.tensor(y.ravel()), t_zp, torch.tensor(y_peer.ravel()), eps)
  reference.backward()
  with jax.enable_x64():
    one_hot = lambda labels: jax.nn.one_hot(labels, classes, dtype=jnp.float64)

    def ours(logits, peer_logits):
      per_example = fd.pair_loss(
        logits, one_hot(y), peer_logits, one_hot(y_peer), divergence=divergence, prob_epsilon=eps
      )
      assert per_example.shape == shape
      return jnp.mean(per_example)

    value, grads = jax.value_and_grad(ours, argnums=(0, 1))(jnp.asarray(z), jnp.asarray(z_peer))
    value, grads = float(value), [np.asarray(g) for g in grads]
  _close(value, reference.item())
  _close(grads[0].reshape(-1, classes), t_z.grad.numpy())
  _close(grads[1].reshape(-1, classes), t_zp.grad.numpy())


@pytest.mark.parametrize("divergence", fd.DIVERGENCES)
def test_activation_and_conjugate_are_the_codes_pieces(divergence):
  """g and f*(g) separately: the code's activation(x) = -mean g(x), conjugate(x) = -mean f*(g(x))."""
  v = np.linspace(0.0, 1.0, 41)
  activation, conjugate = _code_pair(divergence)
  with jax.enable_x64():
    g = np.asarray(fd.activation(jnp.asarray(v), divergence=divergence))
    h = np.asarray(fd.conjugate(jnp.asarray(v), divergence=divergence))
  for i, x in enumerate(v):
    x_t = torch.tensor([x], dtype=torch.float64)
    _close(-g[i], activation(x_t).item())
    if not (divergence == "Neyman-code" and x == 1.0):
      _close(-h[i], conjugate(x_t).item())


def test_soft_labels_weigh_the_probabilities():
  rng = np.random.default_rng(0)
  z = rng.normal(size=(4, 6)).astype(np.float32)
  soft = rng.dirichlet(np.ones(6), size=4).astype(np.float32)
  p = np.exp(z - z.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  np.testing.assert_allclose(fd.label_probability(z, soft), (soft * p).sum(-1), rtol=1e-6)
  np.testing.assert_allclose(fd.label_probability(z, soft, prob_epsilon=1e-5), (soft * p).sum(-1) + 1e-5, rtol=1e-6)


@pytest.mark.parametrize("divergence", fd.DIVERGENCES)
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("eps", [0.0, fd.CIFAR100_PROB_EPSILON])
def test_finite_value_and_gradient_for_extreme_logits(divergence, dtype, eps):
  z = jnp.asarray([[1e4, -1e4, 0.0], [-1e4, 1e4, 0.0], [0.0, 0.0, 0.0]], dtype)
  y = jax.nn.one_hot(jnp.asarray([0, 0, 2]), 3, dtype=dtype)
  loss = lambda a, b: jnp.sum(fd.pair_loss(a, y, b, y, divergence=divergence, prob_epsilon=eps).astype(jnp.float32))
  value, grads = jax.value_and_grad(loss, argnums=(0, 1))(z, z[::-1])
  assert np.isfinite(float(value))
  assert all(np.all(np.isfinite(np.asarray(g, np.float32))) for g in grads)
  assert fd.pair_loss(z, y, z, y, divergence=divergence).dtype == dtype


def test_bad_arguments_name_the_value():
  z = jnp.zeros((2, 3))
  with pytest.raises(errors.InputError, match="'Jensen-Shannon'"):
    fd.pair_loss(z, z, z, z, divergence="Jensen-Shannon")
  with pytest.raises(ValueError, match="'chi2'"):
    fd.activation(0.5, divergence="chi2")
  with pytest.raises(ValueError, match="prob_epsilon"):
    fd.pair_loss(z, z, z, z, divergence="KL", prob_epsilon=-1e-5)
  with pytest.raises(ValueError, match="peer_logits"):
    fd.pair_loss(z, z, jnp.zeros((3, 3)), jnp.zeros((3, 3)), divergence="KL")


def test_report_the_comparisons():
  """Runs last (file order): the counts for the report."""
  expected = len(fd.DIVERGENCES) * 2 * 3 * 2 * 3
  assert COMPARISONS["count"] >= expected
  count, worst = COMPARISONS["count"], WORST["relative"]
  print(f"\nf-divergence: {count} comparisons with the code, worst relative error {worst:.2e}")


def test_divergence_names_are_the_codes_and_the_replications():
  """runner.py:48-89's names (and the replication's utils.py:35-67), plus the paper's Neyman pair."""
  code = {"KL", "Reverse-KL", "Jeffrey", "Squared-Hellinger", "Pearson", "Neyman", "Jenson-Shannon", "Total-Variation"}
  assert set(fd.DIVERGENCES) == code | {"Neyman-code"}
  assert fd.DIVERGENCES[0] == "Total-Variation"
