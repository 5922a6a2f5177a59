"""AMSE, JAL-CE and JAL-FL (noisy_jax.core.joint_asymmetric_losses) against their original code and AMSE's asymmetry.

cswjl/joint-asymmetric-loss losses.py (AMSELoss :8-18, NCEandAMSE :115-123, NFLandAMSE :125-133, NCELoss :180-189,
NormalizedFocalLoss :346-366) is written out below in float64 PyTorch, per example (the original takes the batch
mean: the per-example values and the gradients of their sum are compared), and compared in float64 at the
original's per-dataset hyper-parameters (config.py:29-30, 57-58, 71-72, 85-86) and others, C = 10 and 100, logits
at scales 1, 10 and 1000.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import loss_references as ref
from noisy_jax.core import joint_asymmetric_losses as jal
from noisy_jax.core import losses
import torch_loss_comparison

# ------------------------------------------------------------------------------------------------------------
# The original, per example (pred: logits [B, C], target: int [B]).


def original_amse(pred, target, a, scale=1.0):
  """AMSELoss, losses.py:14-18: the squared differences to a times the one-hot label, averaged over the classes
  (its .mean() over [B, C] is this per-example mean, then the batch mean)."""
  p = F.softmax(pred, dim=1)
  one_hot = F.one_hot(target, p.shape[1]).double() * a
  return scale * ((p - one_hot) ** 2).mean(1)


def original_nce(pred, target, scale=1.0):
  """NCELoss, losses.py:185-189."""
  log_p = F.log_softmax(pred, dim=1)
  one_hot = F.one_hot(target, log_p.shape[1]).double()
  return scale * -1 * torch.sum(one_hot * log_p, dim=1) / (-log_p.sum(dim=1))


def original_nfl(pred, target, gamma=0.5, scale=1.0, detach=True):
  """NormalizedFocalLoss, losses.py:353-361: the focal factors from detached probabilities (`.data`)."""
  logpt = F.log_softmax(pred, dim=1)
  p = logpt.detach().exp() if detach else logpt.exp()
  normalizor = torch.sum(-1 * (1 - p) ** gamma * logpt, dim=1)
  logpt_y = logpt.gather(1, target.view(-1, 1)).view(-1)
  pt = p.gather(1, target.view(-1, 1)).view(-1)
  return scale * (-1 * (1 - pt) ** gamma * logpt_y) / normalizor


def original_jal_ce(pred, target, alpha, beta, a):
  """NCEandAMSE.forward, losses.py:121-123."""
  return original_nce(pred, target, scale=alpha) + original_amse(pred, target, a, scale=beta)


def original_jal_fl(pred, target, alpha, beta, a, gamma=0.5, detach=True):
  """NFLandAMSE.forward, losses.py:131-133."""
  return original_nfl(pred, target, gamma, scale=alpha, detach=detach) + original_amse(pred, target, a, scale=beta)


# The original's configurations (CIFAR-10, CIFAR-100, WebVision, Clothing1M) and others.
SETTINGS = {
  "c10": {"alpha": 1.0, "beta": 1.0, "a": 30.0},
  "c100": {"alpha": 5.0, "beta": 1.0, "a": 20.0},
  "webvision": {"alpha": 50.0, "beta": 1.0, "a": 30.0},
  "clothing": {"alpha": 5.0, "beta": 0.1, "a": 5.0},
  "small_a": {"alpha": 0.3, "beta": 2.0, "a": 0.5},
}

CASES = [
  ("amse-a30", functools.partial(jal.asymmetric_mean_squared_error, a=30.0), functools.partial(original_amse, a=30.0)),
  ("amse-a1.5", functools.partial(jal.asymmetric_mean_squared_error, a=1.5), functools.partial(original_amse, a=1.5)),
]
for _name, _hyper in SETTINGS.items():
  CASES.append(
    (f"jal_ce-{_name}", functools.partial(jal.jal_ce, **_hyper), functools.partial(original_jal_ce, **_hyper))
  )
  CASES.append(
    (
      f"jal_fl_original-{_name}",
      functools.partial(jal.jal_fl, detach_modulator=True, **_hyper),
      functools.partial(original_jal_fl, **_hyper),
    )
  )
  CASES.append(
    (
      f"jal_fl_differentiated-{_name}",
      functools.partial(jal.jal_fl, **_hyper),
      functools.partial(original_jal_fl, detach=False, **_hyper),
    )
  )
CASES.append(
  (
    "jal_fl_gamma2",
    functools.partial(jal.jal_fl, alpha=2.0, beta=1.0, a=10.0, gamma=2.0, detach_modulator=True),
    functools.partial(original_jal_fl, alpha=2.0, beta=1.0, a=10.0, gamma=2.0),
  )
)


def _inputs(classes, seed=0):
  """Logits at scales 1, 10 and 1000 (12 rows each) and labels (a third at the argmax)."""
  rng = np.random.default_rng(seed + classes)
  logits = rng.normal(size=(36, classes)) * np.repeat([1.0, 10.0, 1000.0], 12)[:, None]
  labels = rng.integers(0, classes, len(logits))
  labels[::3] = np.argmax(logits[::3], -1)
  return logits, labels


def compare_with_original(ours, original, classes, seed=0):
  """(ours, the original's values; ours, the original's gradients) on `_inputs`, all float64 NumPy."""
  return torch_loss_comparison.values_and_gradients(ours, original, *_inputs(classes, seed))


@pytest.mark.parametrize("classes", [10, 100])
@pytest.mark.parametrize("name, ours, original", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_equal_the_original_code(name, ours, original, classes):
  """Float64 both ways: values to 1e-10 relative, gradients to 1e-10 of their largest entry. Differentiated in
  torch, NFL's (1 - p)^gamma has a NaN gradient where p rounds to 1 (0 * inf): those rows are left out there (ours
  is finite)."""
  value, expected, grad, expected_grad = compare_with_original(ours, original, classes)
  np.testing.assert_allclose(value, expected, rtol=1e-10, atol=1e-14)
  assert np.all(np.isfinite(grad))
  finite = np.isfinite(expected_grad).all(-1)
  assert finite.all() or "differentiated" in name
  expected_grad, grad = expected_grad[finite], grad[finite]
  np.testing.assert_allclose(grad, expected_grad, rtol=1e-10, atol=1e-10 * np.abs(expected_grad).max())


# ------------------------------------------------------------------------------------------------------------
# Soft labels, shapes, bounds, asymmetry.


def _soft(seed, shape, classes):
  y = np.random.default_rng(seed).dirichlet(np.ones(classes), size=shape)
  y[..., 0] = 0.0
  return y / y.sum(-1, keepdims=True)


@pytest.mark.parametrize(
  "name, reference",
  [
    ("asymmetric_mean_squared_error", lambda z, y: ref.amse(z, y, a=7.0)),
    ("jal_ce", lambda z, y: 2.0 * ref.nce(z, y) + 0.5 * ref.amse(z, y, a=7.0)),
    ("jal_fl", lambda z, y: 2.0 * ref.nfl(z, y, gamma=1.5) + 0.5 * ref.amse(z, y, a=7.0)),
  ],
)
def test_soft_labels_and_leading_axes_match_numpy(name, reference):
  z = np.random.default_rng(1).normal(size=(2, 3, 7)) * 4.0
  y = _soft(2, (2, 3), 7)
  hyper = {"a": 7.0} if name == "asymmetric_mean_squared_error" else {"alpha": 2.0, "beta": 0.5, "a": 7.0}
  if name == "jal_fl":
    hyper["gamma"] = 1.5
  got = losses.get(name)(z.astype(np.float32), y.astype(np.float32), **hyper)
  assert got.shape == (2, 3) and got.dtype == jnp.float32
  np.testing.assert_allclose(got, reference(z, y), rtol=2e-5, atol=2e-6)


def test_amse_bounds_for_one_hot_labels():
  """(a - 1)^2 / C at p = e_y, (a^2 + 1) / C at p = e_k (k != y), ((1/C - a)^2 + (C - 1) / C^2) / C at uniform p."""
  confident = np.array([[40.0, -40.0, -40.0, -40.0], [-40.0, 40.0, -40.0, -40.0], [0.0, 0.0, 0.0, 0.0]])
  y = np.eye(4)[[0, 0, 0]]
  a = 30.0
  with jax.enable_x64():
    got = jal.asymmetric_mean_squared_error(confident, y, a=a)
  np.testing.assert_allclose(got, [(a - 1) ** 2 / 4, (a**2 + 1) / 4, ((0.25 - a) ** 2 + 3 * 0.25**2) / 4], rtol=1e-12)


def _weighted_risk(u, weights, a):
  """sum_k w_k AMSE(u, e_k) for points u [N, C] of the simplex."""
  eye = np.eye(len(weights))
  return np.stack([((u - a * e) ** 2).mean(-1) for e in eye], -1) @ weights


@pytest.mark.parametrize("weights", [[0.5, 0.3, 0.2], [0.4, 0.35, 0.15, 0.1], [0.3] + [0.1] * 7])
def test_amse_is_asymmetric_exactly_above_the_threshold(weights):
  """e_t minimises the weighted risk over the simplex iff a >= W / (w_t - max_{k != t} w_k): above the threshold no
  random point of the simplex beats e_t; below it, moving a little mass from t to the runner-up lowers the risk."""
  w = np.asarray(weights, np.float64)
  threshold = jal.amse_asymmetry_threshold(w)
  t, runner_up = np.argsort(w)[-1], np.argsort(w)[-2]
  points = np.random.default_rng(0).dirichlet(np.full(len(w), 0.3), 20000)
  vertex = np.eye(len(w))[t][None]
  above = threshold * 1.01
  assert _weighted_risk(points, w, above).min() >= _weighted_risk(vertex, w, above)[0] - 1e-12
  below = threshold * 0.95
  moved = vertex.copy()
  moved[0, t], moved[0, runner_up] = 0.99, 0.01
  assert _weighted_risk(moved, w, below)[0] < _weighted_risk(vertex, w, below)[0]
  np.testing.assert_allclose(threshold, w.sum() / (w[t] - w[runner_up]))


def test_symmetric_noise_thresholds_are_below_the_configured_a():
  """Symmetric noise rate eta over C classes: a >= (C - 1) / (C - 1 - C eta); CIFAR-10 at 80%: 9 <= 30,
  CIFAR-100 at 80%: 99 / 19 <= 20."""
  for classes, eta, configured in ((10, 0.8, 30.0), (100, 0.8, 20.0)):
    w = np.full(classes, eta / (classes - 1))
    w[0] = 1 - eta
    threshold = jal.amse_asymmetry_threshold(w)
    np.testing.assert_allclose(threshold, (classes - 1) / (classes - 1 - classes * eta), rtol=1e-12)
    assert threshold <= configured


def test_amse_is_not_symmetric():
  """The class sum sum_j AMSE(z, e_j) = ||p||^2 + a^2 - 2a/C varies with the prediction."""
  z = np.random.default_rng(5).normal(size=(64, 10)) * 3
  class_sum = np.sum(
    [np.asarray(jal.asymmetric_mean_squared_error(z, np.broadcast_to(e, z.shape))) for e in np.eye(10)], 0
  )
  p = ref.softmax(z)
  np.testing.assert_allclose(class_sum, (p**2).sum(-1) + 30.0**2 - 2 * 30.0 / 10, rtol=1e-5)
  assert np.ptp(class_sum) > 0.1


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_finite_at_extreme_logits_for_every_setting(dtype):
  z = jnp.asarray(np.random.default_rng(4).normal(size=(32, 10)) * 1e4, dtype)
  y = np.eye(10, dtype=np.float32)[np.random.default_rng(5).integers(0, 10, 32)]
  for hyper in SETTINGS.values():
    for fn in (jal.jal_ce, jal.jal_fl, functools.partial(jal.jal_fl, detach_modulator=True)):
      value, grad = jax.value_and_grad(lambda l: jnp.sum(fn(l, y, **hyper).astype(jnp.float32)))(z)
      assert np.isfinite(value) and np.all(np.isfinite(np.asarray(grad, np.float32)))


def test_traced_hyper_parameters():
  z = np.random.default_rng(6).normal(size=(8, 6)).astype(np.float32) * 3
  y = _soft(7, (8,), 6).astype(np.float32)
  kwargs = {"alpha": 2.0, "beta": 0.5, "a": 12.0, "gamma": 1.5}
  traced = jax.jit(lambda h: jal.jal_fl(z, y, **h))(kwargs)
  np.testing.assert_allclose(traced, jal.jal_fl(z, y, **kwargs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
  "call, bad",
  [
    (lambda z, y: jal.asymmetric_mean_squared_error(z, y, a=0.0), r"a=0.0 is outside the allowed range \(0.0, inf\]"),
    (lambda z, y: jal.jal_ce(z, y, a=-3.0), r"a=-3.0 is outside the allowed range \(0.0, inf\]"),
    (lambda z, y: jal.jal_ce(z, y, alpha=-1.0), r"alpha=-1.0 is outside the allowed range \[0.0, inf\]"),
    (lambda z, y: jal.jal_fl(z, y, beta=-0.1), r"beta=-0.1 is outside the allowed range \[0.0, inf\]"),
    (lambda z, y: jal.jal_fl(z, y, gamma=-0.5), r"gamma=-0.5 is outside the allowed range \[0.0, inf\]"),
  ],
)
def test_bad_hyper_parameters_raise_naming_the_value_and_the_range(call, bad):
  z = np.zeros((2, 4), np.float32)
  with pytest.raises(ValueError, match=bad):
    call(z, np.eye(4, dtype=np.float32)[:2])


def test_bad_weights_for_the_threshold():
  with pytest.raises(ValueError, match="unique largest"):
    jal.amse_asymmetry_threshold([0.4, 0.4, 0.2])
  with pytest.raises(ValueError, match="nonnegative"):
    jal.amse_asymmetry_threshold([1.2, -0.2])


def test_registered():
  assert losses.get("asymmetric_mean_squared_error") is jal.asymmetric_mean_squared_error
  assert losses.get("jal_ce") is jal.jal_ce
  assert losses.get("jal_fl") is jal.jal_fl
