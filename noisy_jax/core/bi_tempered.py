"""The bi-tempered logistic loss and the tempered softmax (Amid, Warmuth, Anil & Koren, "Robust Bi-Tempered Logistic
Loss Based on Bregman Divergences", NeurIPS 2019, arXiv 1906.03361; original code: google/bi-tempered-loss, whose
`jax/loss.py` this module matches in value and gradient).

The tempered logarithm and exponential (t = 1: log and exp):

  log_t(x) = (x^(1 - t) - 1) / (1 - t),      exp_t(x) = [1 + (1 - t) x]_+^(1 / (1 - t))

The tempered softmax with temperature t2 is p_c = exp_t2(a_c - lambda(a)), where lambda(a) makes sum_c p_c = 1:
for t2 > 1 (heavy tails) by the original's fixed-point iteration, for t2 < 1 (finite support: classes far below
the largest activation get p = 0 exactly) by bisection, for t2 = 1 exactly (log-sum-exp). The loss with temperature
t1 (bounded for t1 < 1) between labels y and p is the Bregman divergence of the tempered logarithm:

  L(a, y) = sum_c [ y_c (log_t1(y_c + 1e-10) - log_t1(p_c)) - (y_c^(2 - t1) - p_c^(2 - t1)) / (2 - t1) ]

(t1 = t2 = 1: sum_c y_c (log(y_c + 1e-15) - log p_c), cross entropy minus the labels' entropy). The 1e-10 and
1e-15 are the original's guards of log 0. Label smoothing eps replaces y by (1 - C eps / (C - 1)) y + eps / (C - 1),
as the original (the target class keeps 1 - eps, each other class gets eps / (C - 1)).

The gradient is the original's closed form (its custom VJP), the derivative of L for an exactly normalised p:

  dL/da = (p - y) p^(t2 - t1) - e sum_c (p_c - y_c) p_c^(t2 - t1),    e = p^t2 / sum_c p_c^t2 (the escort)

and no gradient reaches the labels. Where p_c = 0 (t2 < 1, outside the support) the term of class c is 0 (the
original computes 0^(t2 - t1), which is inf for t2 < t1, and returns NaN there); elsewhere the two agree.

The number of iterations of the normalisation, `num_iters`: the original's loss runs 5 of either scheme, which
leaves sum_c p_c up to ~1e-2 away from 1 (fixed point at t2 = 2 on logits of scale 10 to 100; bisection for any
t2 < 1). The paper's p is normalised, so by default this module iterates a fixed number of times that reaches
float32's resolution on those logits (`FIXED_POINT_STEPS`, `BISECTION_STEPS`; a fixed count, not a tolerance, so that
an example's result does not depend on the other examples of its batch), and `num_iters=5` reproduces the original.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts

FIXED_POINT_STEPS = 50  # t2 > 1 (the original: 5)
BISECTION_STEPS = 30  # t2 < 1: 2^-30 of the bracket's width, below float32's resolution (the original: 5)


def log_t(x: jax.Array, t) -> jax.Array:
  """The tempered logarithm (x^(1 - t) - 1) / (1 - t); log x at t = 1."""
  one_minus_t = 1.0 - t
  safe = jnp.where(one_minus_t == 0.0, 1.0, one_minus_t)
  return jnp.where(one_minus_t == 0.0, jnp.log(x), (x**safe - 1.0) / safe)


def exp_t(x: jax.Array, t) -> jax.Array:
  """The tempered exponential [1 + (1 - t) x]_+^(1 / (1 - t)); exp x at t = 1."""
  one_minus_t = 1.0 - t
  safe = jnp.where(one_minus_t == 0.0, 1.0, one_minus_t)
  return jnp.where(one_minus_t == 0.0, jnp.exp(x), jnp.maximum(1.0 + safe * x, 0.0) ** (1.0 / safe))


def _normalization(activations: jax.Array, t, num_iters: int | None) -> jax.Array:
  """lambda(a) [..., 1] with sum_c exp_t(a_c - lambda(a)) = 1 (module docstring)."""
  largest = jnp.max(activations, axis=-1, keepdims=True)
  shifted = activations - largest

  def fixed_point(_):
    def step(_, current):
      partition = jnp.sum(exp_t(current, t), axis=-1, keepdims=True)
      return shifted * partition ** (1.0 - t)

    steps = FIXED_POINT_STEPS if num_iters is None else num_iters
    current = jax.lax.fori_loop(0, steps, step, shifted)
    partition = jnp.sum(exp_t(current, t), axis=-1, keepdims=True)
    return -log_t(1.0 / partition, t) + largest

  def bisection(_):
    # Only classes above -1 / (1 - t) can have p > 0; lambda lies in [0, -log_t(1 / their count)].
    support = jnp.sum((shifted > -1.0 / (1.0 - t)).astype(shifted.dtype), axis=-1, keepdims=True)
    lower = jnp.zeros_like(largest)
    upper = -log_t(1.0 / support, t)

    def step(_, bracket):
      lower, upper = bracket
      middle = (lower + upper) / 2.0
      below_one = jnp.sum(exp_t(shifted - middle, t), axis=-1, keepdims=True) < 1.0
      return jnp.where(below_one, lower, middle), jnp.where(below_one, middle, upper)

    steps = BISECTION_STEPS if num_iters is None else num_iters
    lower, upper = jax.lax.fori_loop(0, steps, step, (lower, upper))
    return (lower + upper) / 2.0 + largest

  def exact(_):
    return jax.nn.logsumexp(activations, axis=-1, keepdims=True)

  branch = jnp.where(t < 1.0, 0, jnp.where(t == 1.0, 1, 2))
  return jax.lax.switch(branch, (bisection, exact, fixed_point), None)


def tempered_softmax(logits, *, t: float, num_iters: int | None = None) -> jax.Array:
  """p = exp_t(a - lambda(a)) [..., C], the tempered softmax of `logits` [..., C] with temperature t > 0 (t = 1: the
  softmax); `num_iters` steps of the normalisation (module docstring). Computed in at least float32, returned in the
  logits' dtype."""
  _checks.check_range("t", t, 0.0, np.inf, low_open=True)
  logits = jnp.asarray(logits)
  activations = logits.astype(loss_parts.compute_dtype(logits.dtype))
  t = loss_parts.hyper(t, activations.dtype)
  probabilities = exp_t(activations - _normalization(activations, t, num_iters), t)
  return probabilities.astype(loss_parts.output_dtype(logits.dtype))


def _loss_and_probabilities(activations, labels, t1, t2, num_iters):
  probabilities = exp_t(activations - _normalization(activations, t2, num_iters), t2)
  label_term = jnp.where(labels > 0, labels * (log_t(labels + 1e-10, t1) - log_t(probabilities, t1)), 0.0)
  tempered = jnp.sum(label_term - (labels ** (2.0 - t1) - probabilities ** (2.0 - t1)) / (2.0 - t1), axis=-1)
  cross_entropy = jnp.sum(labels * (jnp.log(labels + 1e-15) - jax.nn.log_softmax(activations, axis=-1)), axis=-1)
  return jnp.where((t1 == 1.0) & (t2 == 1.0), cross_entropy, tempered), probabilities


def _bi_tempered(activations, labels, t1, t2, num_iters):
  return _loss_and_probabilities(activations, labels, t1, t2, num_iters)[0]


def _bi_tempered_forward(activations, labels, t1, t2, num_iters):
  value, probabilities = _loss_and_probabilities(activations, labels, t1, t2, num_iters)
  return value, (labels, t1, t2, probabilities)


def _bi_tempered_backward(num_iters, residuals, cotangent):
  del num_iters
  labels, t1, t2, probabilities = residuals
  on_support = probabilities > 0.0
  safe = jnp.where(on_support, probabilities, 1.0)
  forgotten = jnp.where(on_support, (probabilities - labels) * safe ** (t2 - t1), 0.0)
  escorts = jnp.where(on_support, safe**t2, 0.0)
  escorts = escorts / jnp.sum(escorts, axis=-1, keepdims=True)
  derivative = forgotten - escorts * jnp.sum(forgotten, axis=-1, keepdims=True)
  return cotangent[..., None] * derivative, jnp.zeros_like(labels), jnp.zeros_like(t1), jnp.zeros_like(t2)


_bi_tempered = jax.custom_vjp(_bi_tempered, nondiff_argnums=(4,))
_bi_tempered.defvjp(_bi_tempered_forward, _bi_tempered_backward)


def bi_tempered_logistic_loss(
  logits,
  labels,
  *,
  t1: float = 0.8,
  t2: float = 1.2,
  label_smoothing: float = 0.0,
  num_iters: int | None = None,
) -> jax.Array:
  """The bi-tempered logistic loss L(a, y) of the module docstring, with its closed-form gradient.

  Args:
    logits: [..., C] activations a.
    labels: [..., C] probability vectors y.
    t1: temperature of the loss in [0, 1] (< 1: bounded; default 0.8, our choice: the original has no default
      and calls 0 <= t1 < 1 with t2 > 1 the robust range).
    t2: temperature of the tempered softmax > 0 (> 1: heavy tails, < 1: finite support; default 1.2).
    label_smoothing: eps in [0, 1) (the original's smoothing; default 0).
    num_iters: steps of the normalisation (default None: `FIXED_POINT_STEPS` for t2 > 1, `BISECTION_STEPS` for
      t2 < 1; 5 reproduces the original).

  Returns:
    [...] per-example loss.
  """
  _checks.check_range("t1", t1, 0.0, 1.0)
  _checks.check_range("t2", t2, 0.0, np.inf, low_open=True)
  _checks.check_range("label_smoothing", label_smoothing, 0.0, 1.0, high_open=True)
  if num_iters is not None and (isinstance(num_iters, bool) or not isinstance(num_iters, int) or num_iters < 1):
    raise ValueError(f"num_iters must be a positive int or None, got {num_iters!r}.")
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  num_classes = labels.shape[-1]
  if _checks.is_concrete(label_smoothing) and label_smoothing > 0 and num_classes < 2:
    raise ValueError(f"label_smoothing > 0 needs at least 2 classes, got C = {num_classes}.")
  eps = loss_parts.hyper(label_smoothing, labels.dtype)
  spread = max(num_classes - 1, 1)
  labels = (1.0 - num_classes / spread * eps) * labels + eps / spread
  t1 = loss_parts.hyper(t1, logits.dtype)
  t2 = loss_parts.hyper(t2, logits.dtype)
  return _bi_tempered(logits, labels, t1, t2, num_iters).astype(out_dtype)
