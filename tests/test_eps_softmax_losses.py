"""The epsilon-softmax losses ECE+MAE and EFL+MAE (noisy_jax.core.eps_softmax_losses) against their original code.

cswjl/eps-softmax losses.py (ECELoss :8-21, ECEandMAE :23-33, EFLandMAE :34-44, EFocalLoss :47-87, MAELoss :144-153)
is written out below in float64 PyTorch, per example (the original takes the batch mean: the per-example values and
the gradients of their sum are compared), and compared in float64 at the original's per-dataset hyper-parameters
(config.py:101-129) and others, C = 10 and 100, logits at scales 1, 10 and 1000 and rows with ties.
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
from noisy_jax.core import eps_softmax_losses
from noisy_jax.core import losses
import torch_loss_comparison

# ------------------------------------------------------------------------------------------------------------
# The original, per example (pred: logits [B, C], target: int [B]).


def original_eps_softmax(pred, m, eps):
  """losses.py:15-18 (and 67-70): softmax, + m at the argmax, / (m + 1), clamped below at eps."""
  out = F.softmax(pred, dim=1).clone()
  out[torch.arange(len(out)), torch.argmax(out, dim=1)] += m
  return torch.clamp(out / (m + 1), min=eps)


def original_ece(pred, target, m, eps=1e-8):
  """ECELoss, losses.py:19-20: nll of log(clamped epsilon-softmax)."""
  return F.nll_loss(torch.log(original_eps_softmax(pred, m, eps)), target, reduction="none")


def original_efl(pred, target, m, gamma=0.1, eps=1e-8, detach=True):
  """EFocalLoss, losses.py:72-83 with alpha=None: -(1 - pt)^gamma log pt, pt from the detached log pt."""
  logpt = torch.log(original_eps_softmax(pred, m, eps)).gather(1, target.view(-1, 1)).view(-1)
  pt = logpt.detach().exp() if detach else logpt.exp()
  return -1 * (1 - pt) ** gamma * logpt


def original_mae(pred, target):
  """MAELoss(scale=2.0), losses.py:150-153."""
  return 2.0 * (1.0 - F.softmax(pred, dim=1).gather(1, target.view(-1, 1)).view(-1))


def original_ece_mae(pred, target, alpha, beta, m, eps=1e-8):
  """ECEandMAE.forward, losses.py:31-33."""
  return alpha * original_ece(pred, target, m, eps) + beta * original_mae(pred, target)


def original_efl_mae(pred, target, alpha, beta, m, gamma=0.1, eps=1e-8, detach=True):
  """EFLandMAE.forward, losses.py:42-44."""
  return alpha * original_efl(pred, target, m, gamma, eps, detach) + beta * original_mae(pred, target)


# (id, ours, original): the original's configurations (config.py:101-124) and others.
SETTINGS = {
  "c10_sym": {"alpha": 0.01, "beta": 5.0, "m": 1e5},
  "c10_asym": {"alpha": 0.02, "beta": 5.0, "m": 1e3},
  "c10_dependent": {"alpha": 0.045, "beta": 10.0, "m": 1e5},
  "c100_sym40": {"alpha": 0.03, "beta": 1.0, "m": 1e4},
  "c100_asym40": {"alpha": 0.004, "beta": 1.0, "m": 1e2},
  "webvision": {"alpha": 0.015, "beta": 0.3, "m": 1e3},
  "plain_softmax": {"alpha": 1.0, "beta": 1.0, "m": 0.0},
  "large_clamp": {"alpha": 2.0, "beta": 0.5, "m": 3.0, "min_prob": 1e-3},
}


def _original_kwargs(hyper):
  kwargs = dict(hyper)
  if "min_prob" in kwargs:
    kwargs["eps"] = kwargs.pop("min_prob")
  return kwargs


CASES = []
for _name, _hyper in SETTINGS.items():
  CASES.append(
    (
      f"ece_mae-{_name}",
      functools.partial(eps_softmax_losses.ece_mae, **_hyper),
      functools.partial(original_ece_mae, **_original_kwargs(_hyper)),
    )
  )
  CASES.append(
    (
      f"efl_mae-{_name}",
      functools.partial(eps_softmax_losses.efl_mae, **_hyper),
      functools.partial(original_efl_mae, **_original_kwargs(_hyper)),
    )
  )
CASES += [
  (
    "efl_mae-gamma2",
    functools.partial(eps_softmax_losses.efl_mae, alpha=0.5, beta=1.0, m=10.0, gamma=2.0),
    functools.partial(original_efl_mae, alpha=0.5, beta=1.0, m=10.0, gamma=2.0),
  ),
  (
    "efl_mae-differentiated_modulator",
    functools.partial(eps_softmax_losses.efl_mae, alpha=0.5, beta=1.0, m=10.0, gamma=0.5, detach_modulator=False),
    functools.partial(original_efl_mae, alpha=0.5, beta=1.0, m=10.0, gamma=0.5, detach=False),
  ),
]


def _inputs(classes, seed=0):
  """Logits at scales 1, 10 and 1000 (12 rows each), rows with tied maxima, and labels (some at the argmax)."""
  rng = np.random.default_rng(seed + classes)
  logits = rng.normal(size=(36, classes)) * np.repeat([1.0, 10.0, 1000.0], 12)[:, None]
  ties = np.zeros((3, classes))
  ties[1, :2] = 5.0  # two tied maxima
  ties[2, 1:3] = -3.0
  logits = np.concatenate([logits, ties])
  labels = rng.integers(0, classes, len(logits))
  labels[::4] = np.argmax(logits[::4], -1)
  labels[-3:] = [0, 1, 2]
  return logits, labels


def compare_with_original(ours, original, classes, seed=0):
  """(ours, the original's values; ours, the original's gradients) on `_inputs`, all float64 NumPy."""
  return torch_loss_comparison.values_and_gradients(ours, original, *_inputs(classes, seed))


@pytest.mark.parametrize("classes", [10, 100])
@pytest.mark.parametrize("name, ours, original", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_equal_the_original_code(name, ours, original, classes):
  """Float64 both ways: values to 1e-9 relative (1e-14 absolute: a confidently right example's loss of ~1e-8 is
  1 - p_y, which neither side computes to better than ~1e-16 absolute), gradients to 1e-9 of their largest entry."""
  value, expected, grad, expected_grad = compare_with_original(ours, original, classes)
  np.testing.assert_allclose(value, expected, rtol=1e-9, atol=1e-14)
  assert np.all(np.isfinite(grad))
  finite = np.isfinite(expected_grad).all(-1)
  # Differentiated in torch, (1 - pt)^gamma has a NaN gradient where pt rounds to 1 (0 * inf); ours is finite there.
  assert finite.all() or "differentiated" in name
  expected_grad, grad = expected_grad[finite], grad[finite]
  np.testing.assert_allclose(grad, expected_grad, rtol=1e-9, atol=1e-9 * np.abs(expected_grad).max())


# ------------------------------------------------------------------------------------------------------------
# Soft labels, shapes, dtypes and bounds.


def _soft(seed, shape, classes):
  y = np.random.default_rng(seed).dirichlet(np.ones(classes), size=shape)
  y[..., 0] = 0.0
  return y / y.sum(-1, keepdims=True)


@pytest.mark.parametrize("name", ["ece_mae", "efl_mae"])
def test_soft_labels_and_leading_axes_match_numpy(name):
  """Soft labels take the expectation over the classes; any leading shape [...]: the result is [...]."""
  z = np.random.default_rng(1).normal(size=(2, 3, 7)) * 4.0
  y = _soft(2, (2, 3), 7)
  hyper = {"alpha": 0.3, "beta": 2.0, "m": 5.0}
  got = losses.get(name)(z.astype(np.float32), y.astype(np.float32), **hyper)
  assert got.shape == (2, 3) and got.dtype == jnp.float32
  reference = ref.ece_mae if name == "ece_mae" else ref.efl_mae
  np.testing.assert_allclose(got, reference(z, y, **hyper), rtol=2e-5, atol=2e-6)


def test_plain_softmax_without_clamp_is_cross_entropy_plus_mae():
  """m = 0 and a negligible clamp: ECE is cross entropy, EFL the focal loss (detached factor: the same value)."""
  z = np.random.default_rng(3).normal(size=(16, 6)) * 3
  y = np.eye(6)[np.arange(16) % 6]
  with jax.enable_x64():
    ce = losses.cross_entropy(z, y)
    mae = losses.mean_absolute_error(z, y)
    ece = eps_softmax_losses.ece_mae(z, y, alpha=1.0, beta=0.0, m=0.0, min_prob=1e-300)
    np.testing.assert_allclose(ece, ce, rtol=1e-12)
    np.testing.assert_allclose(eps_softmax_losses.ece_mae(z, y, alpha=0.0, beta=1.0), mae, rtol=1e-12)
    efl = eps_softmax_losses.efl_mae(z, y, alpha=1.0, beta=0.0, m=0.0, gamma=2.0, min_prob=1e-300)
    np.testing.assert_allclose(efl, losses.focal_loss(z, y, gamma=2.0), rtol=1e-12)


def test_bounded_by_the_clamp():
  """A confidently wrong prediction reaches alpha (-log min_prob) + 2 beta; a confidently right one tends to 0."""
  z = np.array([[-1e4, 1e4, 0.0, 0.0], [1e4, -1e4, 0.0, 0.0]], np.float32)
  y = np.eye(4, dtype=np.float32)[[0, 0]]
  for fn in (eps_softmax_losses.ece_mae, eps_softmax_losses.efl_mae):
    got = np.asarray(fn(z, y, alpha=0.5, beta=2.0, m=100.0))
    np.testing.assert_allclose(got, [0.5 * -np.log(1e-8) + 4.0, 0.0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_finite_at_extreme_logits_for_every_setting(dtype):
  z = jnp.asarray(np.random.default_rng(4).normal(size=(32, 10)) * 1e4, dtype)
  y = np.eye(10, dtype=np.float32)[np.random.default_rng(5).integers(0, 10, 32)]
  for hyper in SETTINGS.values():
    for fn in (eps_softmax_losses.ece_mae, functools.partial(eps_softmax_losses.efl_mae, detach_modulator=False)):
      value, grad = jax.value_and_grad(lambda l: jnp.sum(fn(l, y, **hyper).astype(jnp.float32)))(z)
      assert np.isfinite(value) and np.all(np.isfinite(np.asarray(grad, np.float32)))


def test_traced_hyper_parameters():
  z = np.random.default_rng(6).normal(size=(8, 6)).astype(np.float32) * 3
  y = _soft(7, (8,), 6).astype(np.float32)
  kwargs = {"alpha": 0.2, "beta": 1.5, "m": 30.0, "gamma": 0.7}
  traced = jax.jit(lambda h: eps_softmax_losses.efl_mae(z, y, **h))(kwargs)
  np.testing.assert_allclose(traced, eps_softmax_losses.efl_mae(z, y, **kwargs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
  "call, bad",
  [
    (
      lambda z, y: eps_softmax_losses.ece_mae(z, y, alpha=-1.0),
      r"alpha=-1.0 is outside the allowed range \[0.0, inf\]",
    ),
    (lambda z, y: eps_softmax_losses.ece_mae(z, y, beta=-0.5), r"beta=-0.5 is outside the allowed range \[0.0, inf\]"),
    (lambda z, y: eps_softmax_losses.ece_mae(z, y, m=-1.0), r"m=-1.0 is outside the allowed range \[0.0, inf\]"),
    (lambda z, y: eps_softmax_losses.ece_mae(z, y, min_prob=0.0), r"min_prob=0.0 .* \(0.0, 1.0\)"),
    (lambda z, y: eps_softmax_losses.efl_mae(z, y, min_prob=1.0), r"min_prob=1.0 .* \(0.0, 1.0\)"),
    (
      lambda z, y: eps_softmax_losses.efl_mae(z, y, gamma=-0.1),
      r"gamma=-0.1 is outside the allowed range \[0.0, inf\]",
    ),
    (lambda z, y: eps_softmax_losses.efl_mae(z, y, m=float("nan")), r"m=nan"),
  ],
)
def test_bad_hyper_parameters_raise_naming_the_value_and_the_range(call, bad):
  z = np.zeros((2, 4), np.float32)
  with pytest.raises(ValueError, match=bad):
    call(z, np.eye(4, dtype=np.float32)[:2])


def test_registered():
  assert losses.get("ece_mae") is eps_softmax_losses.ece_mae
  assert losses.get("efl_mae") is eps_softmax_losses.efl_mae
