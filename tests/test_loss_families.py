"""The loss families beside noisy_jax.core.losses against their original code and their papers' properties.

- Against the original code, per example (the originals average over the batch; per-example values and gradients
  of their sum are compared): AGCE, AUL, AEL and the NCE pairs as hitcszx/ALFs lnl/losses.py computes them; NFL,
  NNCE, NNFL, ANL-CE, ANL-FL as Virusdoll/Active-Negative-Loss loss.py does (with its detached focal factors:
  `detach_modulator=True`, and without them, the paper's formula, by default); LogitClip as hongxin001/LogitClip's
  train_batch (with its threshold: `original_threshold=True`). Each is written out below in PyTorch, float64, and
  compared at C = 10 and 100 and logit scales 1 and 10, in float64 (the formula, to 1e-10).
- The bi-tempered loss against a NumPy transcription of google/bi-tempered-loss's jax/loss.py (its iteration schemes
  and its closed-form gradient), and against the values its own tests pin.
- Poly-1 against optax.losses.poly_loss_cross_entropy; Taylor CE against its series.
- The papers' properties: asymmetry (the minimiser of the weighted risk), symmetry of the normalized losses, bounds.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.optimize
import torch
import torch.nn.functional as F

import loss_references as ref
from noisy_jax.core import asymmetric_losses
from noisy_jax.core import bi_tempered
from noisy_jax.core import logit_clip
from noisy_jax.core import losses
from noisy_jax.core import negative_losses
from noisy_jax.core import polynomial_losses

# ------------------------------------------------------------------------------------------------------------
# The original code, per example, in float64 torch (pred: logits [B, C], labels: int [B]).


def _target(values, labels):
  return values.gather(1, labels[:, None]).squeeze(1)


def original_agce(pred, labels, a, q):
  return ((a + 1) ** q - torch.pow(a + _target(F.softmax(pred, 1), labels), q)) / q


def original_aul(pred, labels, a, q):
  return (torch.pow(a - _target(F.softmax(pred, 1), labels), q) - (a - 1) ** q) / q


def original_ael(pred, labels, a):
  return torch.exp(-_target(F.softmax(pred, 1), labels) / a)


def original_nce(pred, labels):
  log_p = F.log_softmax(pred, 1)
  return -_target(log_p, labels) / -log_p.sum(1)


def original_nfl(pred, labels, gamma, detach=True):
  log_p = F.log_softmax(pred, 1)
  p = log_p.detach().exp() if detach else log_p.exp()
  normaliser = torch.sum(-((1 - p) ** gamma) * log_p, 1)
  return -((1 - _target(p, labels)) ** gamma) * _target(log_p, labels) / normaliser


def original_nnce(pred, labels, min_prob=1e-7):
  shifted = -np.log(min_prob) + F.softmax(pred, 1).clamp(min=min_prob, max=1).log()
  return 1 - _target(shifted, labels) / shifted.sum(1)


def original_nnfl(pred, labels, gamma, min_prob=1e-7, detach=True):
  log_min = float(np.log(min_prob))
  largest = -((1 - min_prob) ** gamma) * log_min
  log_p = F.log_softmax(pred, 1).clamp(min=log_min)
  p = log_p.detach().exp() if detach else log_p.exp()
  normaliser = torch.sum(-((1 - p) ** gamma) * log_p, 1)
  focal_y = -((1 - _target(p, labels)) ** gamma) * _target(log_p, labels)
  return 1 - (largest - focal_y) / (pred.shape[1] * largest - normaliser)


def original_logit_clip_ce(pred, labels, temp, lp):
  delta = 1 / temp
  norms = torch.norm(pred, p=lp, dim=-1, keepdim=True) + 1e-7
  clipped = torch.where((norms > temp).expand(-1, pred.shape[-1]), pred / norms * delta, pred)
  return F.cross_entropy(clipped, labels, reduction="none")


# (name, ours, original): ours(logits, one_hot), original(pred, labels).
ORIGINALS = [
  (
    "agce",
    functools.partial(asymmetric_losses.asymmetric_generalized_cross_entropy, a=0.6, q=0.6),
    functools.partial(original_agce, a=0.6, q=0.6),
  ),
  ("agce_q2", asymmetric_losses.asymmetric_generalized_cross_entropy, functools.partial(original_agce, a=1.0, q=2.0)),
  (
    "aul",
    functools.partial(asymmetric_losses.asymmetric_unhinged_loss, a=5.5, q=3.0),
    functools.partial(original_aul, a=5.5, q=3.0),
  ),
  ("aul_q09", asymmetric_losses.asymmetric_unhinged_loss, functools.partial(original_aul, a=1.5, q=0.9)),
  (
    "ael",
    functools.partial(asymmetric_losses.asymmetric_exponential_loss, a=2.5),
    functools.partial(original_ael, a=2.5),
  ),
  (
    "nce_agce",
    functools.partial(asymmetric_losses.nce_agce, alpha=1.0, beta=4.0, a=6.0, q=1.5),
    lambda x, t: original_nce(x, t) + 4.0 * original_agce(x, t, 6.0, 1.5),
  ),
  (
    "nce_aul",
    functools.partial(asymmetric_losses.nce_aul, alpha=10.0, beta=0.015, a=6.0, q=3.0),
    lambda x, t: 10.0 * original_nce(x, t) + 0.015 * original_aul(x, t, 6.0, 3.0),
  ),
  (
    "nce_ael",
    functools.partial(asymmetric_losses.nce_ael, alpha=1.0, beta=4.0, a=5.0),
    lambda x, t: original_nce(x, t) + 4.0 * original_ael(x, t, 5.0),
  ),
  ("nnce", negative_losses.normalized_negative_cross_entropy, original_nnce),
  (
    "nfl_original",
    functools.partial(negative_losses.normalized_focal_loss, detach_modulator=True),
    functools.partial(original_nfl, gamma=0.5),
  ),
  ("nfl_paper", negative_losses.normalized_focal_loss, functools.partial(original_nfl, gamma=0.5, detach=False)),
  (
    "nnfl_original",
    functools.partial(negative_losses.normalized_negative_focal_loss, gamma=0.5, detach_modulator=True),
    functools.partial(original_nnfl, gamma=0.5),
  ),
  (
    "nnfl_paper",
    negative_losses.normalized_negative_focal_loss,
    functools.partial(original_nnfl, gamma=0.5, detach=False),
  ),
  (
    "anl_ce",
    functools.partial(negative_losses.anl_ce, alpha=5.0, beta=5.0),
    lambda x, t: 5.0 * original_nce(x, t) + 5.0 * original_nnce(x, t),
  ),
  (
    "anl_fl_original",
    functools.partial(negative_losses.anl_fl, alpha=5.0, beta=5.0, gamma=0.5, detach_modulator=True),
    lambda x, t: 5.0 * original_nfl(x, t, 0.5) + 5.0 * original_nnfl(x, t, 0.5),
  ),
  (
    "logit_clip_original",
    functools.partial(losses.logit_clip, temperature=1.5, original_threshold=True),
    functools.partial(original_logit_clip_ce, temp=1.5, lp=2),
  ),
  (
    "logit_clip_at_tau_1",  # tau = 1: the paper's threshold and the original's coincide
    functools.partial(losses.logit_clip, temperature=1.0, norm_order=1.0),
    functools.partial(original_logit_clip_ce, temp=1.0, lp=1),
  ),
]


def _inputs(classes, seed=0):
  """Logits at scales 1 and 10 (16 rows each) and labels."""
  rng = np.random.default_rng(seed + classes)
  logits = rng.normal(size=(32, classes)) * np.repeat([1.0, 10.0], 16)[:, None]
  return logits, rng.integers(0, classes, 32)


@pytest.mark.parametrize("classes", [10, 100])
@pytest.mark.parametrize("name, ours, original", ORIGINALS, ids=[o[0] for o in ORIGINALS])
def test_values_and_gradients_equal_the_original_code(name, ours, original, classes):
  """In float64 both ways: the formulas agree to 1e-10 (float32 against NumPy: tests/test_losses.py)."""
  del name
  logits, labels = _inputs(classes)
  pred = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
  expected = original(pred, torch.tensor(labels))
  expected.sum().backward()
  expected, expected_grad = expected.detach().numpy(), pred.grad.numpy()
  with jax.enable_x64():
    one_hot = jax.nn.one_hot(labels, classes, dtype=jnp.float64)
    value, grad = jax.jit(jax.vmap(jax.value_and_grad(lambda z, y: ours(z, y))))(jnp.asarray(logits), one_hot)
  np.testing.assert_allclose(value, expected, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(grad, expected_grad, rtol=1e-10, atol=1e-10 * np.abs(expected_grad).max())


# ------------------------------------------------------------------------------------------------------------
# Soft labels and non-default hyper-parameters against NumPy.


def _soft(seed, shape, classes):
  y = np.random.default_rng(seed).dirichlet(np.ones(classes), size=shape)
  y[..., 0] = 0.0
  return y / y.sum(-1, keepdims=True)


SOFT_CASES = [
  (
    functools.partial(asymmetric_losses.asymmetric_generalized_cross_entropy, a=4.0, q=0.2),
    functools.partial(ref.agce, a=4.0, q=0.2),
  ),
  (
    functools.partial(asymmetric_losses.asymmetric_unhinged_loss, a=3.0, q=0.1),
    functools.partial(ref.aul, a=3.0, q=0.1),
  ),
  (functools.partial(asymmetric_losses.asymmetric_exponential_loss, a=3.5), functools.partial(ref.ael, a=3.5)),
  (
    functools.partial(asymmetric_losses.nce_agce, alpha=10.0, beta=0.1, a=1.8, q=3.0),
    lambda z, y: 10 * ref.nce(z, y) + 0.1 * ref.agce(z, y, 1.8, 3.0),
  ),
  (functools.partial(negative_losses.normalized_focal_loss, gamma=2.0), functools.partial(ref.nfl, gamma=2.0)),
  (
    functools.partial(negative_losses.normalized_negative_cross_entropy, min_prob=1e-4),
    functools.partial(ref.nnce, min_prob=1e-4),
  ),
  (
    functools.partial(negative_losses.normalized_negative_focal_loss, gamma=1.0, min_prob=1e-5),
    functools.partial(ref.nnfl, gamma=1.0, min_prob=1e-5),
  ),
  (functools.partial(negative_losses.anl_ce, alpha=10.0, beta=1.0), lambda z, y: 10 * ref.nce(z, y) + ref.nnce(z, y)),
  (functools.partial(polynomial_losses.poly1_cross_entropy, epsilon=-1.0), functools.partial(ref.poly1, epsilon=-1.0)),
  (functools.partial(polynomial_losses.taylor_cross_entropy, order=6), functools.partial(ref.taylor, order=6)),
  (
    functools.partial(losses.logit_clip, temperature=0.5, loss="generalized_cross_entropy", loss_kwargs={"q": 0.7}),
    lambda z, y: (np.asarray(y) * (1 - ref.softmax(ref.clip_logits(z, 0.5)) ** 0.7) / 0.7).sum(-1),
  ),
]


@pytest.mark.parametrize("case", range(len(SOFT_CASES)))
def test_soft_labels_and_other_hyper_parameters_match_numpy(case):
  ours, reference = SOFT_CASES[case]
  z = np.random.default_rng(case).normal(size=(16, 7)) * 4.0
  y = _soft(case + 100, (16,), 7)
  np.testing.assert_allclose(ours(z.astype(np.float32), y.astype(np.float32)), reference(z, y), rtol=2e-5, atol=2e-6)


# ------------------------------------------------------------------------------------------------------------
# Asymmetry (Zhou et al. 2021): the weighted risk sum_k w_k l(u_k) over the simplex is minimised at e_t exactly when
# max_{k != t} w_k / w_t <= r, the asymmetry ratio (1 for the concave cases: completely asymmetric).

ASYMMETRIC = [
  ("agce", {"a": 1.0, "q": 2.0}, lambda u: ((1 + 1) ** 2 - (1 + u) ** 2) / 2),
  ("agce", {"a": 0.6, "q": 0.6}, lambda u: (1.6**0.6 - (0.6 + u) ** 0.6) / 0.6),
  ("aul", {"a": 1.5, "q": 0.9}, lambda u: ((1.5 - u) ** 0.9 - 0.5**0.9) / 0.9),
  ("aul", {"a": 5.5, "q": 3.0}, lambda u: ((5.5 - u) ** 3 - 4.5**3) / 3),
  ("ael", {"a": 2.5}, lambda u: np.exp(-u / 2.5)),
]


def _weighted_risk_minimum(per_probability, weights, seed) -> float:
  """The smallest sum_k w_k l(u_k) found over the simplex: many random points, then SLSQP from the best ones and
  from the vertices."""
  rng = np.random.default_rng(seed)
  risk = lambda u: float(np.dot(weights, per_probability(np.clip(u, 0.0, 1.0))))
  points = np.concatenate([rng.dirichlet(np.full(len(weights), 0.3), 4000), np.eye(len(weights))])
  risks = np.array([risk(u) for u in points])
  best = float(risks.min())
  constraint = {"type": "eq", "fun": lambda u: np.sum(u) - 1.0}
  for start in points[np.argsort(risks)[:5]]:
    result = scipy.optimize.minimize(
      risk, start, bounds=[(0, 1)] * len(weights), constraints=[constraint], method="SLSQP"
    )
    if result.success and abs(np.sum(result.x) - 1) < 1e-8:
      best = min(best, risk(result.x))
  return best


@pytest.mark.parametrize("case", range(len(ASYMMETRIC)))
def test_asymmetric_exactly_up_to_the_asymmetry_ratio(case):
  name, hyper, per_probability = ASYMMETRIC[case]
  ratio = asymmetric_losses.asymmetry_ratio(name, **hyper)
  vertex = lambda w: float(np.dot(w, per_probability(np.eye(3)[0])))
  below = ratio * 0.97
  weights = np.array([1.0, below, below * 0.6])
  assert _weighted_risk_minimum(per_probability, weights, case) >= vertex(weights) - 1e-9
  if ratio < 1.0:  # convex l: past the ratio, mass on class 1 lowers the risk
    weights = np.array([1.0, min(ratio * 1.05, 0.999), 0.1])
    assert _weighted_risk_minimum(per_probability, weights, case) < vertex(weights) - 1e-6


def test_asymmetry_ratios_are_the_closed_forms():
  assert asymmetric_losses.asymmetry_ratio("agce", a=1.0, q=2.0) == 1.0
  assert asymmetric_losses.asymmetry_ratio("aul", a=1.5, q=0.9) == 1.0
  np.testing.assert_allclose(asymmetric_losses.asymmetry_ratio("agce", a=0.6, q=0.6), (0.6 / 1.6) ** 0.4)
  np.testing.assert_allclose(asymmetric_losses.asymmetry_ratio("aul", a=5.5, q=3.0), (4.5 / 5.5) ** 2)
  np.testing.assert_allclose(asymmetric_losses.asymmetry_ratio("ael", a=2.5), np.exp(-0.4))
  with pytest.raises(ValueError, match="'gce'"):
    asymmetric_losses.asymmetry_ratio("gce", a=1.0, q=0.5)


def test_asymmetric_losses_are_not_symmetric_and_normalized_negative_ones_are():
  """The class sum sum_j L(z, e_j) varies with z for AGCE/AUL/AEL (asymmetric, not symmetric) and is C - 1 for
  NNCE and NNFL, 1 for NFL (normalised: symmetric)."""
  z = np.random.default_rng(5).normal(size=(64, 10)) * 3
  eye = np.eye(10)
  class_sum = lambda fn: np.sum([np.asarray(fn(z, np.broadcast_to(e, z.shape))) for e in eye], axis=0)
  for fn in (
    asymmetric_losses.asymmetric_generalized_cross_entropy,
    asymmetric_losses.asymmetric_unhinged_loss,
    asymmetric_losses.asymmetric_exponential_loss,
  ):
    assert np.ptp(class_sum(fn)) > 1e-2
  np.testing.assert_allclose(class_sum(negative_losses.normalized_negative_cross_entropy), 9.0, rtol=1e-5)
  np.testing.assert_allclose(class_sum(negative_losses.normalized_negative_focal_loss), 9.0, rtol=1e-5)
  np.testing.assert_allclose(class_sum(negative_losses.normalized_focal_loss), 1.0, rtol=1e-5)


def test_bounds_are_reached_at_the_simplex_ends():
  """AGCE in [0, ((a+1)^q - a^q)/q], AUL in [0, (a^q - (a-1)^q)/q], AEL in [e^(-1/a), 1], Taylor CE <= H_t: the
  bounds at p_y -> 0 and p_y -> 1."""
  confident = np.array([[30.0, -30.0, -30.0], [-30.0, 30.0, -30.0]], np.float64)
  y = np.eye(3)[[0, 0]]
  with jax.enable_x64():
    for fn, low, high in (
      (functools.partial(asymmetric_losses.asymmetric_generalized_cross_entropy, a=1.0, q=2.0), 0.0, (4 - 1) / 2),
      (functools.partial(asymmetric_losses.asymmetric_unhinged_loss, a=1.5, q=0.9), 0.0, (1.5**0.9 - 0.5**0.9) / 0.9),
      (functools.partial(asymmetric_losses.asymmetric_exponential_loss, a=3.0), np.exp(-1 / 3), 1.0),
      (functools.partial(polynomial_losses.taylor_cross_entropy, order=3), 0.0, 1 + 1 / 2 + 1 / 3),
    ):
      np.testing.assert_allclose(fn(confident, y), [low, high], atol=1e-12)


# ------------------------------------------------------------------------------------------------------------
# Bi-tempered logistic loss (google/bi-tempered-loss, jax/loss.py).


def test_bi_tempered_equals_the_values_its_original_tests_pin():
  """jax/loss_test.py's test_loss_value: these labels and activations give these losses (atol 1e-4 there)."""
  labels = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1], [0.2, 0.8, 0.0]], np.float32)
  activations = np.array([[-0.5, 0.1, 2.0], [0.1, 1.5, -5.0], [4.0, -3.0, -6.0]], np.float32)
  got = bi_tempered.bi_tempered_logistic_loss(activations, labels, t1=0.5, t2=1.5, num_iters=5)
  np.testing.assert_allclose(got, [0.02301914, 0.18972909, 0.93874922], atol=1e-4)
  got = bi_tempered.bi_tempered_logistic_loss(activations, labels, t1=0.5, t2=0.8, num_iters=20)
  np.testing.assert_allclose(got, [0.21646356, 0.41836615, 1.33997854], atol=1e-4)


# Per-example values and gradients with the original's 5 iterations; the temperatures traced (one compilation per
# shape and dtype for every (t1, t2)).
_bi_tempered_original_iterations = jax.jit(
  jax.vmap(
    jax.value_and_grad(
      lambda z, y, t1, t2: bi_tempered.bi_tempered_logistic_loss(z, y, t1=t1, t2=t2, label_smoothing=0.1, num_iters=5)
    ),
    in_axes=(0, 0, None, None),
  )
)


@pytest.mark.parametrize(
  "t1, t2", [(0.5, 1.5), (0.8, 1.2), (1.0, 2.0), (0.2, 4.0), (0.5, 0.8), (0.9, 0.5), (0.8, 1.0), (1.0, 1.0)]
)
@pytest.mark.parametrize("classes", [10, 100])
def test_bi_tempered_value_and_gradient_equal_the_original(t1, t2, classes):
  """With the original's 5 iterations, value and gradient equal its algorithm (NumPy float64 transcription); soft
  labels with label smoothing 0.1. For t2 < t1 the original's gradient is NaN on every row with a class outside the
  tempered softmax's support (0^(t2 - t1)); there ours gives that class's term 0, and the rest is the original's."""
  logits, labels = _inputs(classes, seed=7)
  y = np.eye(classes)[labels]
  expected = ref.bi_tempered(logits, y, t1, t2, 0.1, num_iters=5)
  with np.errstate(divide="ignore", invalid="ignore"):
    expected_grad = ref.bi_tempered_gradient(logits, y, t1, t2, 0.1, num_iters=5)
  nan_rows = np.isnan(expected_grad).any(-1)
  assert nan_rows.any() == (t2 < t1)
  expected_grad[nan_rows] = ref.bi_tempered_gradient(logits, y, t1, t2, 0.1, num_iters=5, off_support=0.0)[nan_rows]
  with jax.enable_x64():
    value, grad = _bi_tempered_original_iterations(jnp.asarray(logits), jnp.asarray(y), t1, t2)
  np.testing.assert_allclose(value, expected, rtol=1e-9, atol=1e-12)
  np.testing.assert_allclose(grad, expected_grad, rtol=1e-9, atol=1e-12 * np.abs(expected_grad).max())
  value, grad = _bi_tempered_original_iterations(jnp.asarray(logits, jnp.float32), jnp.asarray(y, jnp.float32), t1, t2)
  np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(grad, expected_grad, rtol=1e-4, atol=1e-5 * np.abs(expected_grad).max())


@pytest.mark.parametrize("t", [0.3, 0.8, 1.2, 2.0, 3.0])
def test_tempered_softmax_is_normalised_by_default_and_its_gradient_is_the_derivative(t):
  """The default iteration counts normalise p to float resolution (the original's 5 do not, at these logits), and
  the closed-form gradient is then the derivative of the loss: it equals finite differences (float64)."""
  z = np.random.default_rng(3).normal(size=(64, 10)) * 30.0
  with jax.enable_x64():
    np.testing.assert_allclose(np.sum(bi_tempered.tempered_softmax(z, t=t), -1), 1.0, atol=1e-9)
    np.testing.assert_allclose(
      np.sum(bi_tempered.tempered_softmax(z, t=t), -1), ref.tempered_softmax(z, t, 60).sum(-1), atol=1e-9
    )
    y = jnp.asarray(_soft(4, (3,), 10))
    small = np.asarray(z[:3] / 10.0)
    loss = jax.jit(lambda l: jnp.sum(losses.get("bi_tempered_logistic_loss")(l, y, t1=0.7, t2=t)))
    step = 1e-5
    differences = np.zeros_like(small)
    for index in np.ndindex(*small.shape):
      bump = np.zeros_like(small)
      bump[index] = step
      differences[index] = (loss(small + bump) - loss(small - bump)) / (2 * step)
    # t2 < 1: the bisection's resolution (2^-30 of its bracket) over the step bounds the differences' accuracy.
    tolerance = 1e-7 if t > 1 else 2e-4 * max(1.0, np.abs(differences).max())
    np.testing.assert_allclose(jax.grad(loss)(small), differences, atol=tolerance)
  if t in (0.3, 0.8, 2.0):
    assert np.abs(ref.tempered_softmax(z, t, 5).sum(-1) - 1).max() > 1e-4


def test_bi_tempered_at_unit_temperatures_is_cross_entropy_minus_the_label_entropy():
  z = np.random.default_rng(8).normal(size=(16, 6)) * 3
  y = _soft(9, (16,), 6)
  with jax.enable_x64():
    got = bi_tempered.bi_tempered_logistic_loss(z, y, t1=1.0, t2=1.0)
    entropy = -np.sum(np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0)), 0.0), -1)
    np.testing.assert_allclose(got, ref.cross_entropy(z, y) - entropy, rtol=1e-9)


def test_bi_tempered_loss_is_bounded_for_t1_below_one():
  """For t1 < 1 and a one-hot label c the loss is -log_t1(p_c) - (1 - sum_k p_k^(2 - t1)) / (2 - t1) <= 1 / (1 - t1)
  (the first term is at most 1 / (1 - t1), the second <= 0 as sum_k p_k^(2 - t1) <= 1), however wrong the
  prediction: checked at logit scales 10 to 1e4, where it approaches the bound."""
  t1 = 0.8
  y = np.eye(5)[[1]]
  values = [
    float(bi_tempered.bi_tempered_logistic_loss(np.array([[s, -s, 0, 0, 0]], np.float32), y, t1=t1, t2=1.2)[0])
    for s in (10.0, 100.0, 1e3, 1e4)
  ]
  assert all(0 < v <= 1 / (1 - t1) + 1e-6 for v in values)
  assert values == sorted(values) and values[-1] > 0.99 / (1 - t1)


# ------------------------------------------------------------------------------------------------------------
# Poly-1, Taylor CE, LogitClip.


@pytest.mark.parametrize("epsilon", [-1.0, 0.0, 2.0, 5.0])
def test_poly1_equals_optax(epsilon):
  z = np.random.default_rng(11).normal(size=(32, 10)).astype(np.float32) * 5
  y = _soft(12, (32,), 10).astype(np.float32)
  ours = lambda l: polynomial_losses.poly1_cross_entropy(l, y, epsilon=epsilon)
  theirs = lambda l: optax.losses.poly_loss_cross_entropy(l, y, epsilon=epsilon)
  np.testing.assert_allclose(ours(z), theirs(z), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(
    jax.grad(lambda l: jnp.sum(ours(l)))(z), jax.grad(lambda l: jnp.sum(theirs(l)))(z), rtol=1e-5, atol=1e-6
  )


def test_taylor_cross_entropy_between_mae_and_cross_entropy():
  """Order 1 is MAE / 2 (one-hot labels); the series grows with the order towards CE."""
  z = np.random.default_rng(13).normal(size=(16, 5)) * 2
  y = np.eye(5)[np.arange(16) % 5]
  with jax.enable_x64():
    np.testing.assert_allclose(
      polynomial_losses.taylor_cross_entropy(z, y, order=1), ref.softmax(z)[y > 0] * -1 + 1, rtol=1e-12
    )
    orders = [np.asarray(polynomial_losses.taylor_cross_entropy(z, y, order=t)) for t in (1, 2, 4, 8, 50)]
    assert all(np.all(a <= b + 1e-15) for a, b in zip(orders, orders[1:]))
    likely = ref.softmax(z)[y > 0] > 0.6  # where 50 terms have converged (the remainder is below 0.4^50 / 50)
    np.testing.assert_allclose(orders[-1][likely], ref.cross_entropy(z, y)[likely], rtol=1e-9)


def test_clipped_logits_have_norm_at_most_delta_and_short_ones_pass():
  rng = np.random.default_rng(14)
  z = rng.normal(size=(64, 10)) * np.geomspace(0.01, 100, 64)[:, None]
  for temperature, order in ((1.5, 2.0), (0.5, 2.0), (1.0, 1.0), (2.0, 3.0)):
    with jax.enable_x64():
      clipped = np.asarray(logit_clip.clip_logits(z, temperature=temperature, norm_order=order))
    norms = np.linalg.norm(z, ord=order, axis=-1)
    clipped_norms = np.linalg.norm(clipped, ord=order, axis=-1)
    delta = 1 / temperature
    assert np.all(clipped_norms <= delta + 1e-9)
    short = norms + 1e-7 <= delta
    np.testing.assert_array_equal(clipped[short], z[short])
    np.testing.assert_allclose(clipped[~short], ref.clip_logits(z, temperature, order)[~short], rtol=1e-12)
  # CE on clipped logits is bounded: at most log(1 + (C - 1) e^(2 delta)) for p = 2.
  huge = rng.normal(size=(64, 10)) * 1e4
  value = losses.logit_clip(
    huge.astype(np.float32), np.eye(10)[rng.integers(0, 10, 64)].astype(np.float32), temperature=0.5
  )
  assert float(np.max(value)) <= np.log(1 + 9 * np.exp(2 * 2.0)) + 1e-5


@pytest.mark.parametrize(
  "call, bad",
  [
    (lambda z, y: asymmetric_losses.asymmetric_generalized_cross_entropy(z, y, a=0.0), "a=0.0"),
    (lambda z, y: asymmetric_losses.asymmetric_unhinged_loss(z, y, a=1.0), "a=1.0"),
    (lambda z, y: asymmetric_losses.asymmetric_exponential_loss(z, y, a=-2.0), "a=-2.0"),
    (lambda z, y: asymmetric_losses.nce_agce(z, y, beta=-1.0), "beta=-1.0"),
    (lambda z, y: negative_losses.normalized_negative_cross_entropy(z, y, min_prob=1.0), "min_prob=1.0"),
    (lambda z, y: negative_losses.anl_fl(z, y, gamma=-0.5), "gamma=-0.5"),
    (lambda z, y: bi_tempered.bi_tempered_logistic_loss(z, y, t1=1.5), "t1=1.5"),
    (lambda z, y: bi_tempered.bi_tempered_logistic_loss(z, y, t2=0.0), "t2=0.0"),
    (lambda z, y: bi_tempered.bi_tempered_logistic_loss(z, y, label_smoothing=1.0), "label_smoothing=1.0"),
    (lambda z, y: bi_tempered.bi_tempered_logistic_loss(z, y, num_iters=0), "num_iters.*0"),
    (lambda z, y: polynomial_losses.poly1_cross_entropy(z, y, epsilon=-2.0), "epsilon=-2.0"),
    (lambda z, y: polynomial_losses.taylor_cross_entropy(z, y, order=0), "order.*0"),
    (lambda z, y: losses.logit_clip(z, y, temperature=0.0), "temperature=0.0"),
    (lambda z, y: losses.logit_clip(z, y, loss="logit_clip"), "'logit_clip'"),
    (lambda z, y: losses.logit_clip(z, y, loss="hinge"), "'hinge'"),
  ],
)
def test_bad_hyper_parameters_raise_naming_the_value(call, bad):
  z = np.zeros((2, 4), np.float32)
  with pytest.raises(ValueError, match=bad):
    call(z, np.eye(4, dtype=np.float32)[:2])


def test_traced_hyper_parameters_of_the_new_families():
  """Hyper-parameters may be traced (sweeps vmap over them): the same values as concrete ones."""
  z = np.random.default_rng(15).normal(size=(8, 6)).astype(np.float32) * 3
  y = _soft(16, (8,), 6).astype(np.float32)
  for fn, kwargs in (
    (asymmetric_losses.nce_aul, {"a": 4.0, "q": 1.2}),
    (negative_losses.anl_fl, {"alpha": 2.0, "gamma": 1.5}),
    (bi_tempered.bi_tempered_logistic_loss, {"t1": 0.7, "t2": 1.3}),
    (bi_tempered.bi_tempered_logistic_loss, {"t1": 0.7, "t2": 0.6}),
    (losses.logit_clip, {"temperature": 0.8}),
  ):
    traced = jax.jit(lambda h: fn(z, y, **h))(kwargs)
    np.testing.assert_allclose(traced, fn(z, y, **kwargs), rtol=1e-5, atol=1e-6)
