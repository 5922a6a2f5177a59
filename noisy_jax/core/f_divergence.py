"""The f-divergence objective (Wei & Liu, "When Optimizing f-divergence is Robust with Label Noise", ICLR 2021,
arXiv 2011.03687): its pure pieces (the method: noisy_jax.methods.f_divergence).

The classifier h maximises the variational lower bound of D_f between the joint distribution of (h(X), noisy Y) and
the product of their marginals (f-GAN's form, Nowozin et al. 2016):

  D_f >= E_{Z ~ joint}[g(v(Z))] - E_{Z ~ product}[f*(g(v(Z)))],   v = p_y(x) = softmax(f(x))_y

with g the divergence's activation and f* its conjugate. On a batch (x_i, y_i) and peer pairs (x'_j of one random
training example, y'_j of another, drawn independently, as Peer Loss's) the loss minimised is minus that bound:

  L = mean_i l_i,   l_i = -g(v_i) + f*(g(v'_i)),   v_i = p_{y_i}(x_i) [+ eps],   v'_i = p_{y'_i}(x'_i) [+ eps]

`pair_loss` is l [...] from the batch's and the peers' logits and labels [..., C]; `activation` is g(v) and
`conjugate` f*(g(v)) of a probability v. Each divergence's pair, as the code writes them (its `activation(x)` is
-mean g(x), its `conjugate(x)` -mean f*(g(x)); UCSC-REAL/Robust-f-divergence-measures@93d9efe CIFAR-10/runner.py:48-89,
the replication's Divergence, KlemenVovk/noisy-labels f_divergence/utils.py:29-71):

  divergence          g(v)                    f*(g(v))                         runner.py
  'Total-Variation'   tanh(v) / 2             tanh(v) / 2                      :83-86
  'Jenson-Shannon'    log 2 - log(1 + e^-v)   v + log(1 + e^-v) - log 2        :78-81 (the code's spelling)
  'Pearson'           v                       v^2 / 4 + v                      :68-71
  'KL'                v                       exp(v - 1)                       :48-51
  'Reverse-KL'        -exp(v)                 -1 - v                           :53-56 (f*(t) = -1 - log(-t))
  'Jeffrey'           v                       v + v^2 / 4 + v^3 / 16           :58-61 (the code's Taylor polynomial
                                                                                      of Jeffrey's conjugate)
  'Squared-Hellinger' 1 - exp(v)              (1 - exp(v)) / exp(v)            :63-66
  'Neyman'            1 - exp(v)              2 - 2 exp(v / 2)                 the paper's f*(g(v)): f*(t) =
                                                                               2 - 2 sqrt(1 - t) at t = g(v)
  'Neyman-code'       1 - exp(v)              2 - 2 sqrt(1 - v)                :73-76: f* of v itself (the only
                                                                               pair of the code not composed)

v: the code's ProbLossStable (runner.py:94-103) is NLLLoss(softmax(z)) = -p_y: v = p_y, no log and no epsilon on
CIFAR-10 (its eps=1e-5 argument unused; the replication's utils.py:17-26 likewise); CIFAR-100/runner.py:105 is
NLLLoss(softmax(z) + 1e-5): v = p_y + 1e-5 (`prob_epsilon`, default 0). With soft labels y [C], v = sum_c y_c p_c
(+ eps), p_y for one-hot y.
The warm-up's cross entropy (runner_CE.py:30-39, CrossEntropyLossStable) is not here: the method's warm-up stage.

Numerics: 'Neyman-code's sqrt(1 - v) is taken at max(1 - v, 1e-30) (its gradient there is 0 where float32's p_y
rounds to 1, instead of the code's 0 x inf = nan; with eps > 0 the code's 1 - v < 0 gives nan); the others are
finite for every v in [0, 1 + eps].
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts

DIVERGENCES = (
  "Total-Variation",
  "Jenson-Shannon",
  "Pearson",
  "KL",
  "Reverse-KL",
  "Jeffrey",
  "Squared-Hellinger",
  "Neyman",
  "Neyman-code",
)
# The code's ProbLossStable epsilon on CIFAR-100 (CIFAR-100/runner.py:97, 105); CIFAR-10's is not added (:103).
CIFAR100_PROB_EPSILON = 1e-5
_LOG2 = float(np.log(2.0))
_SQRT_FLOOR = 1e-30


def _neyman_code_conjugate(v):
  """2 - 2 sqrt(1 - v), the root's argument floored at 1e-30 (module docstring)."""
  return 2.0 - 2.0 * jnp.sqrt(jnp.maximum(1.0 - v, _SQRT_FLOOR))


_ACTIVATIONS = {
  "Total-Variation": lambda v: jnp.tanh(v) / 2.0,
  "Jenson-Shannon": lambda v: _LOG2 - jax.nn.softplus(-v),
  "Pearson": lambda v: v,
  "KL": lambda v: v,
  "Reverse-KL": lambda v: -jnp.exp(v),
  "Jeffrey": lambda v: v,
  "Squared-Hellinger": lambda v: 1.0 - jnp.exp(v),
  "Neyman": lambda v: 1.0 - jnp.exp(v),
  "Neyman-code": lambda v: 1.0 - jnp.exp(v),
}
_CONJUGATES = {
  "Total-Variation": lambda v: jnp.tanh(v) / 2.0,
  "Jenson-Shannon": lambda v: jax.nn.softplus(v) - _LOG2,
  "Pearson": lambda v: v * v / 4.0 + v,
  "KL": lambda v: jnp.exp(v - 1.0),
  "Reverse-KL": lambda v: -1.0 - v,
  "Jeffrey": lambda v: v + v * v / 4.0 + v * v * v / 16.0,
  "Squared-Hellinger": lambda v: jnp.exp(-v) - 1.0,
  "Neyman": lambda v: 2.0 - 2.0 * jnp.exp(v / 2.0),
  "Neyman-code": _neyman_code_conjugate,
}


def check_divergence(divergence: str) -> None:
  """ValueError (errors.InputError) naming `divergence` unless it is one of DIVERGENCES."""
  _checks.check_choice("divergence", divergence, DIVERGENCES)


def activation(v, *, divergence: str) -> jax.Array:
  """g(v) [...] of probabilities v [...] (module docstring's table)."""
  check_divergence(divergence)
  return _ACTIVATIONS[divergence](jnp.asarray(v))


def conjugate(v, *, divergence: str) -> jax.Array:
  """f*(g(v)) [...] of probabilities v [...] (module docstring's table; 'Neyman-code': f*(v))."""
  check_divergence(divergence)
  return _CONJUGATES[divergence](jnp.asarray(v))


def label_probability(logits, labels, *, prob_epsilon=0.0) -> jax.Array:
  """v = sum_c y_c softmax(z)_c + prob_epsilon [...] of logits z and labels y [..., C] (p_y for one-hot y), in the
  compute dtype (at least float32)."""
  _checks.check_range("prob_epsilon", prob_epsilon, 0.0, 1.0)
  logits, labels, _ = loss_parts.prepare(logits, labels)
  p = jax.nn.softmax(logits, axis=-1)
  return jnp.sum(labels * p, axis=-1) + loss_parts.hyper(prob_epsilon, logits.dtype)


def pair_loss(logits, labels, peer_logits, peer_labels, *, divergence: str, prob_epsilon=0.0) -> jax.Array:
  """l_i = -g(v_i) + f*(g(v'_i)) [...] (module docstring); its batch mean is the code's
  activation(prob_reg) - conjugate(prob_peer) (runner.py:139-143).

  Args:
    logits: [..., C] the batch's logits.
    labels: [..., C] its labels (one-hot or soft).
    peer_logits: [..., C] the logits of the peer inputs x'.
    peer_labels: [..., C] the peer labels y' (of other examples than x').
    divergence: one of DIVERGENCES.
    prob_epsilon: 0 (CIFAR-10's v = p_y, the default) or the offset added to p_y (CIFAR-100's 1e-5).

  Returns:
    [...] per-example loss in the logits' dtype, computed in at least float32.
  """
  check_divergence(divergence)
  out_dtype = loss_parts.output_dtype(jnp.asarray(logits).dtype)
  _checks.check_same_shape("logits", jnp.asarray(logits), "peer_logits", jnp.asarray(peer_logits))
  v = label_probability(logits, labels, prob_epsilon=prob_epsilon)
  v_peer = label_probability(peer_logits, peer_labels, prob_epsilon=prob_epsilon)
  return (-_ACTIVATIONS[divergence](v) + _CONJUGATES[divergence](v_peer)).astype(out_dtype)
