"""Float64 NumPy re-computations of the loss families beside noisy_jax.core.losses, for soft labels y [..., C]
(one-hot labels are the papers' case): each written from the paper's formula and the original code's arithmetic
(clamps, guards, iteration schemes), independently of the library. Used by tests/test_losses.py (every loss of the
catalogue against NumPy) and tests/test_loss_families.py."""

from __future__ import annotations

import functools

import numpy as np


def log_softmax(z):
  z = np.asarray(z, np.float64)
  shifted = z - z.max(-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def softmax(z):
  return np.exp(log_softmax(z))


def per_class(z, y, fn):
  return (np.asarray(y, np.float64) * fn(softmax(z))).sum(-1)


def agce(z, y, a=1.0, q=2.0):
  return per_class(z, y, lambda p: ((a + 1) ** q - (a + p) ** q) / q)


def aul(z, y, a=1.5, q=0.9):
  return per_class(z, y, lambda p: ((a - p) ** q - (a - 1) ** q) / q)


def ael(z, y, a=3.0):
  return per_class(z, y, lambda p: np.exp(-p / a))


def nce(z, y):
  log_p = log_softmax(z)
  return -(np.asarray(y, np.float64) * log_p).sum(-1) / -log_p.sum(-1)


def focal_terms(log_p, gamma):
  return -((1.0 - np.exp(log_p)) ** gamma) * log_p


def nfl(z, y, gamma=0.5):
  terms = focal_terms(log_softmax(z), gamma)
  return (np.asarray(y, np.float64) * terms).sum(-1) / terms.sum(-1)


def nnce(z, y, min_prob=1e-7):
  shifted = -np.log(min_prob) + np.log(np.clip(softmax(z), min_prob, 1.0))
  return 1.0 - (np.asarray(y, np.float64) * shifted).sum(-1) / shifted.sum(-1)


def nnfl(z, y, gamma=0.5, min_prob=1e-7):
  log_p = np.maximum(log_softmax(z), np.log(min_prob))
  terms = focal_terms(log_p, gamma)
  largest = -((1 - min_prob) ** gamma) * np.log(min_prob)
  num_classes = np.shape(z)[-1]
  return 1.0 - (largest - (np.asarray(y, np.float64) * terms).sum(-1)) / (num_classes * largest - terms.sum(-1))


def log_t(x, t):
  return np.log(x) if t == 1.0 else (x ** (1.0 - t) - 1.0) / (1.0 - t)


def exp_t(x, t):
  return np.exp(x) if t == 1.0 else np.maximum(1.0 + (1.0 - t) * x, 0.0) ** (1.0 / (1.0 - t))


def tempered_normalization(a, t, num_iters):
  """google/bi-tempered-loss's scheme: fixed point for t > 1, bisection for t < 1, log-sum-exp at 1."""
  a = np.asarray(a, np.float64)
  mu = a.max(-1, keepdims=True)
  a0 = a - mu
  if t == 1.0:
    return mu + np.log(np.exp(a0).sum(-1, keepdims=True))
  if t > 1.0:
    current = a0
    for _ in range(num_iters):
      current = a0 * exp_t(current, t).sum(-1, keepdims=True) ** (1.0 - t)
    return -log_t(1.0 / exp_t(current, t).sum(-1, keepdims=True), t) + mu
  support = (a0 > -1.0 / (1.0 - t)).sum(-1, keepdims=True).astype(np.float64)
  lower, upper = np.zeros_like(mu), -log_t(1.0 / support, t)
  for _ in range(num_iters):
    middle = (lower + upper) / 2.0
    below = exp_t(a0 - middle, t).sum(-1, keepdims=True) < 1.0
    lower, upper = np.where(below, lower, middle), np.where(below, middle, upper)
  return (lower + upper) / 2.0 + mu


def tempered_softmax(a, t, num_iters):
  return exp_t(np.asarray(a, np.float64) - tempered_normalization(a, t, num_iters), t)


def smoothed(y, eps):
  num_classes = np.shape(y)[-1]
  return (1 - num_classes / (num_classes - 1) * eps) * np.asarray(y, np.float64) + eps / (num_classes - 1)


def bi_tempered(a, y, t1=0.8, t2=1.2, label_smoothing=0.0, num_iters=5):
  """The original's forward: the tempered softmax, then the Bregman form (KL at t1 = t2 = 1)."""
  y = smoothed(y, label_smoothing) if label_smoothing > 0 else np.asarray(y, np.float64)
  p = tempered_softmax(a, t2, num_iters)
  if t1 == 1.0 and t2 == 1.0:
    return (y * (np.log(y + 1e-15) - log_softmax(a))).sum(-1)
  with np.errstate(invalid="ignore", divide="ignore"):
    label_term = np.where(y > 0, y * (log_t(y + 1e-10, t1) - log_t(p, t1)), 0.0)
  return (label_term - (y ** (2 - t1) - p ** (2 - t1)) / (2 - t1)).sum(-1)


def bi_tempered_gradient(a, y, t1=0.8, t2=1.2, label_smoothing=0.0, num_iters=5, off_support=None):
  """The original's custom gradient d(sum of losses)/da [..., C]; `off_support` replaces its term of the classes
  with p = 0 (the original: none, so 0^(t2 - t1) is inf for t2 < t1)."""
  y = smoothed(y, label_smoothing) if label_smoothing > 0 else np.asarray(y, np.float64)
  p = tempered_softmax(a, t2, num_iters)
  forgotten = (p - y) * p ** (t2 - t1)
  if off_support is not None:
    forgotten = np.where(p > 0, forgotten, off_support)
  escorts = p**t2 / (p**t2).sum(-1, keepdims=True)
  return forgotten - escorts * forgotten.sum(-1, keepdims=True)


def poly1(z, y, epsilon=2.0):
  y = np.asarray(y, np.float64)
  return -(y * log_softmax(z)).sum(-1) + epsilon * (y * (1 - softmax(z))).sum(-1)


def taylor(z, y, order=2):
  return per_class(z, y, lambda p: sum((1 - p) ** k / k for k in range(1, order + 1)))


def clip_logits(z, temperature=1.0, norm_order=2.0, original_threshold=False):
  z = np.asarray(z, np.float64)
  norm = (np.abs(z) ** norm_order).sum(-1, keepdims=True) ** (1.0 / norm_order) + 1e-7
  delta = 1.0 / temperature
  return np.where(norm > (temperature if original_threshold else delta), delta * z / norm, z)


def cross_entropy(z, y):
  return -(np.asarray(y, np.float64) * log_softmax(z)).sum(-1)


def eps_softmax(z, m, min_prob=1e-8):
  """cswjl/eps-softmax losses.py:15-18: (p + m e_argmax) / (m + 1), clamped below at min_prob."""
  p = softmax(z)
  top = np.eye(np.shape(z)[-1])[np.argmax(p, -1)]
  return np.maximum((p + m * top) / (m + 1), min_prob)


def ece_mae(z, y, alpha=0.01, beta=5.0, m=1e5):
  y = np.asarray(y, np.float64)
  ece = -(y * np.log(eps_softmax(z, m))).sum(-1)
  return alpha * ece + beta * 2 * (1 - (y * softmax(z)).sum(-1))


def efl_mae(z, y, alpha=0.01, beta=5.0, m=1e5, gamma=0.1):
  y = np.asarray(y, np.float64)
  p = eps_softmax(z, m)
  efl = -(y * (1 - p) ** gamma * np.log(p)).sum(-1)
  return alpha * efl + beta * 2 * (1 - (y * softmax(z)).sum(-1))


def amse(z, y, a=30.0):
  """cswjl/joint-asymmetric-loss losses.py:14-18: the mean over the classes of (p - a y)^2."""
  return ((softmax(z) - a * np.asarray(y, np.float64)) ** 2).mean(-1)


# Each loss of these families at its default hyper-parameters.
NUMPY_REFERENCES = {
  "asymmetric_generalized_cross_entropy": agce,
  "asymmetric_unhinged_loss": aul,
  "asymmetric_exponential_loss": ael,
  "nce_agce": lambda z, y: nce(z, y) + agce(z, y, a=3.0, q=1.5),
  "nce_aul": lambda z, y: nce(z, y) + aul(z, y, a=6.0, q=1.5),
  "nce_ael": lambda z, y: nce(z, y) + 4.0 * ael(z, y, a=2.5),
  "normalized_focal_loss": nfl,
  "normalized_negative_cross_entropy": nnce,
  "normalized_negative_focal_loss": nnfl,
  "anl_ce": lambda z, y: nce(z, y) + nnce(z, y),
  "anl_fl": lambda z, y: nfl(z, y) + nnfl(z, y),
  "bi_tempered_logistic_loss": functools.partial(bi_tempered, num_iters=50),
  "poly1_cross_entropy": poly1,
  "taylor_cross_entropy": taylor,
  "logit_clip": lambda z, y: cross_entropy(clip_logits(z), y),
  "ece_mae": ece_mae,
  "efl_mae": efl_mae,
  "asymmetric_mean_squared_error": amse,
  "jal_ce": lambda z, y: nce(z, y) + amse(z, y),
  "jal_fl": lambda z, y: nfl(z, y) + amse(z, y),
}
