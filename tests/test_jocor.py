"""JoCoR (noisy_jax.methods.jocor) against the original code's formulas (hongxin001/JoCoR, algorithm/loss.py).

The original's `loss_jocor` is written out below in PyTorch, float64, as it is there (F.cross_entropy, F.kl_div of
log_softmax and softmax, np.argsort of the joint loss, int(remember_rate * len), torch.mean of the kept losses):
values and gradients with respect to both networks' logits are compared with noisy_jax's. Whole runs (1 == 4
devices, stop/resume, golden values) come from the registry's tiny case.
"""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from noisy_jax.methods import coteaching
from noisy_jax.methods import jocor
from noisy_jax.methods import registry


def _original_loss_jocor(y_1, y_2, t, forget_rate, co_lambda):
  """algorithm/loss.py's loss_jocor (without its pure-ratio bookkeeping), on float64 torch tensors."""
  kl = lambda pred, soft_targets: torch.sum(
    F.kl_div(F.log_softmax(pred, dim=1), F.softmax(soft_targets, dim=1), reduction="none"), 1
  )
  loss_pick_1 = F.cross_entropy(y_1, t, reduction="none") * (1 - co_lambda)
  loss_pick_2 = F.cross_entropy(y_2, t, reduction="none") * (1 - co_lambda)
  loss_pick = loss_pick_1 + loss_pick_2 + co_lambda * kl(y_1, y_2) + co_lambda * kl(y_2, y_1)
  ind_sorted = np.argsort(loss_pick.detach().numpy())
  num_remember = int((1 - forget_rate) * len(ind_sorted))
  return torch.mean(loss_pick[ind_sorted[:num_remember]]), loss_pick, ind_sorted[:num_remember]


def _inputs(seed, batch, classes, scale):
  rng = np.random.default_rng(seed)
  return (
    rng.normal(size=(batch, classes)) * scale,
    rng.normal(size=(batch, classes)) * scale,
    rng.integers(0, classes, batch),
  )


@pytest.mark.parametrize("classes", [10, 100])
@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_joint_loss_and_its_gradient_equal_the_original(classes, scale):
  z1, z2, y = _inputs(classes + int(scale), 64, classes, scale)
  forget_rate, co_lambda = 0.3, 0.65
  t1, t2 = (torch.tensor(z, dtype=torch.float64, requires_grad=True) for z in (z1, z2))
  loss, per_example, kept = _original_loss_jocor(t1, t2, torch.tensor(y), forget_rate, co_lambda)
  loss.backward()
  with jax.enable_x64():
    one_hot = jax.nn.one_hot(y, classes, dtype=jnp.float64)
    valid = jnp.ones(64, bool)
    ours = jocor.joint_loss(jnp.asarray(z1), jnp.asarray(z2), one_hot, co_lambda=co_lambda)
    np.testing.assert_allclose(np.asarray(ours), per_example.detach().numpy(), rtol=1e-12, atol=1e-12)

    def batch_loss(a, b):
      return jocor.jocor_loss(a, b, one_hot, valid, forget_rate, co_lambda=co_lambda)

    (value, keep), grads = jax.value_and_grad(batch_loss, argnums=(0, 1), has_aux=True)(
      jnp.asarray(z1), jnp.asarray(z2)
    )
  assert sorted(np.flatnonzero(np.asarray(keep))) == sorted(kept.tolist())  # int(0.7 * 64) = 44 kept
  assert int(np.sum(keep)) == 44
  np.testing.assert_allclose(float(value), loss.item(), rtol=1e-12)
  np.testing.assert_allclose(np.asarray(grads[0]), t1.grad.numpy(), rtol=1e-9, atol=1e-15)
  np.testing.assert_allclose(np.asarray(grads[1]), t2.grad.numpy(), rtol=1e-9, atol=1e-15)
  assert np.abs(np.asarray(grads[0])[~np.asarray(keep)]).max() == 0.0  # forgotten rows give no gradient


def test_joint_loss_closed_forms():
  """lambda = 0: the two cross entropies; equal logits: no disagreement term; KL >= 0 and symmetric in the pair."""
  z1, z2, y = _inputs(0, 32, 10, 3.0)
  one_hot = jax.nn.one_hot(y, 10)
  ce = lambda z: -jnp.take_along_axis(jax.nn.log_softmax(jnp.asarray(z)), jnp.asarray(y)[:, None], axis=1)[:, 0]
  np.testing.assert_allclose(jocor.joint_loss(z1, z2, one_hot, co_lambda=0.0), ce(z1) + ce(z2), rtol=1e-5)
  np.testing.assert_allclose(jocor.joint_loss(z1, z1, one_hot, co_lambda=0.5), ce(z1), rtol=1e-5)
  agreement = jocor.joint_loss(z1, z2, one_hot, co_lambda=1.0)
  assert np.all(np.asarray(agreement) > 0)
  np.testing.assert_allclose(agreement, jocor.joint_loss(z2, z1, one_hot, co_lambda=1.0), rtol=1e-6)


def test_finite_at_extreme_logits():
  z1 = jnp.array([[1e4, -1e4, 0.0], [-1e4, 1e4, 0.0]], jnp.float32)
  z2 = -z1
  one_hot = jax.nn.one_hot(jnp.array([0, 2]), 3)
  value, grads = jax.value_and_grad(
    lambda a, b: jocor.jocor_loss(a, b, one_hot, jnp.ones(2, bool), 0.0, co_lambda=0.9)[0], argnums=(0, 1)
  )(z1, z2)
  assert np.isfinite(float(value)) and all(np.all(np.isfinite(np.asarray(g))) for g in grads)


def test_padding_rows_are_never_kept_or_counted():
  z1, z2, y = _inputs(1, 20, 5, 2.0)
  one_hot = jax.nn.one_hot(y, 5)
  valid = np.arange(20) < 13
  value, keep = jocor.jocor_loss(z1, z2, one_hot, valid, 0.25, co_lambda=0.5)
  per_example = np.asarray(jocor.joint_loss(z1, z2, one_hot, co_lambda=0.5))
  n = int(0.75 * 13)  # 9 of the 13 valid rows
  smallest = np.argsort(per_example[:13], kind="stable")[:n]
  assert sorted(np.flatnonzero(np.asarray(keep))) == sorted(smallest)
  np.testing.assert_allclose(float(value), per_example[smallest].mean(), rtol=1e-6)


def test_no_example_kept_gives_zero_where_the_original_reports_nan():
  """n = floor((1 - R) N) = 0 (3 valid rows at R = 0.7): the original's mean over no rows is NaN with a zero
  gradient; ours is 0 with the same zero gradient and an empty kept mask (the module docstring's named difference)."""
  z1, z2, y = _inputs(3, 8, 5, 2.0)
  valid = np.arange(8) < 3
  t1, t2 = (torch.tensor(z[:3], dtype=torch.float64, requires_grad=True) for z in (z1, z2))
  original, _, kept = _original_loss_jocor(t1, t2, torch.tensor(y[:3]), 0.7, 0.5)
  original.backward()
  assert len(kept) == 0 and np.isnan(original.item())
  np.testing.assert_array_equal(t1.grad.numpy(), 0.0)
  one_hot = jax.nn.one_hot(y, 5)
  (value, keep), grads = jax.value_and_grad(
    lambda a, b: jocor.jocor_loss(a, b, one_hot, valid, 0.7, co_lambda=0.5), argnums=(0, 1), has_aux=True
  )(jnp.asarray(z1, jnp.float32), jnp.asarray(z2, jnp.float32))
  assert float(value) == 0.0 and not np.asarray(keep).any()
  for grad in grads:
    np.testing.assert_array_equal(np.asarray(grad), 0.0)


def test_objective_follows_the_forget_rate_schedule():
  """Epoch e (1-based) forgets R(e - 1) of coteaching.forget_rate_schedule; the objective's loss is the mean over
  the kept examples of the pair's [2, B, C] logits."""
  built = registry.make(
    ml_collections.ConfigDict({"name": "jocor", "forget_rate": 0.5, "num_gradual": 4, "co_lambda": 0.3}),
    num_classes=6,
    num_epochs=8,
  )
  assert built.num_networks == 2 and built.name == "jocor"
  schedule = coteaching.forget_rate_schedule(8, 0.5, num_gradual=4)
  z1, z2, y = _inputs(2, 40, 6, 2.0)
  one_hot = jax.nn.one_hot(y, 6)
  per_example = np.asarray(jocor.joint_loss(z1, z2, one_hot, co_lambda=0.3))
  for epoch in (1, 3, 8):
    loss, _ = built.objective(jnp.stack([z1, z2]), one_hot, jnp.ones(40), jnp.ones(40, bool), rows={}, epoch=epoch)
    n = int(np.floor((1 - schedule[epoch - 1]) * 40 + 1e-9))
    np.testing.assert_allclose(float(loss), np.sort(per_example)[:n].mean(), rtol=1e-5)


def test_config_errors_name_the_value():
  make = lambda **fields: registry.make(
    ml_collections.ConfigDict({"name": "jocor", **fields}), num_classes=10, num_epochs=5
  )
  with pytest.raises(ValueError, match="needs method.forget_rate"):
    make(co_lambda=0.5)
  with pytest.raises(ValueError, match="co_lambda"):
    make(forget_rate=0.2, co_lambda=1.5)
  with pytest.raises(ValueError, match=r"Unknown field\(s\) \['plus'\]"):
    make(forget_rate=0.2, plus=True)
  with pytest.raises(ValueError, match="ramp"):
    make(forget_rate=0.2, ramp="linear")
