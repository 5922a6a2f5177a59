"""VolMinNet's pure pieces: the learned transition matrix T(W), the forward-corrected NLL and the volume penalty.

Li, Liu, Han, Liu, Tsang, "Provably End-to-end Label-Noise Learning without Anchor Points", ICML 2021
(arXiv 2102.02400); original code xuefeng-li1/Provably-end-to-end-label-noise-learning-without-anchor-points@06e4167
(main.py, models.py); the CIFAR-N replication KlemenVovk/noisy-labels (volminnet/utils.py, volminnet.py). The method
is noisy_jax.methods.volminnet.

T [C, C] is row-stochastic in noisy_jax's convention (noisy_jax.core.noise): T[i, j] = P(given label j | true label i).
It is parameterised by an unconstrained W [C, C] (models.py:149-169, `sig_t`; utils.py:6-14, `SigT`):

  A = I + (1 - I) * sigmoid(W),   T = A / rowsum(A)                                         (`transition_matrix`)

so every entry is in (0, 1), the diagonal the largest of its row, and W's diagonal unused (its gradient is 0). W
starts at -init_t everywhere (`initial_transition_logits`): init_t 2 (models.py:150's default; CIFAR-10 and MNIST),
4.5 on CIFAR-100 (main.py:71). The network's softmax p = softmax(f(x)) is the clean-class posterior; the noisy one is
p @ T (main.py:173), and the objective is (main.py:175-178)

  L = mean_i NLL(log(p_i @ T), y~_i) + lam * log|det T|

`corrected_cross_entropy` is the first term per example, -sum_j y_j log((p @ T)_j) for a probability vector y (the
code's nll_loss for a one-hot y); `log_volume` the second's log|det T| (main.py:175 `t.slogdet().logabsdet`).

Numerics. log((p @ T)_j) = logsumexp_k(log p_k + log T[k, j]), with log p = log_softmax(z) and log T = log A -
log rowsum(A), log A = log_sigmoid(W) off the diagonal and 0 on it (`log_transition_matrix`): the code's
`torch.mm(softmax(z), T).log()` in value, but finite (value and gradient) for logits up to +-1e4 and for W far
below 0, where the code's sigmoid underflows to an entry of exactly 0. The code's F.normalize(A, p=1, dim=1) divides by
max(||A_i||_1, 1e-12), the row sum, which is >= 1 here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts

ORIGINAL_INIT = 2.0  # models.py:150 sig_t(..., init=2); utils.py:7 SigT(init=2)
CIFAR100_INIT = 4.5  # main.py:71 args.init = 4.5


def _check_square(name: str, matrix, num_classes: int | None = None) -> None:
  shape = jnp.shape(matrix)
  if len(shape) != 2 or shape[0] != shape[1] or (num_classes is not None and shape[0] != num_classes):
    wanted = "[C, C]" if num_classes is None else f"[C, C] = [{num_classes}, {num_classes}]"
    raise ValueError(f"{name} must be a square {wanted} matrix, got shape {shape}.")


def initial_transition_logits(num_classes: int, *, init: float = ORIGINAL_INIT, dtype=jnp.float32) -> jax.Array:
  """W at the start of training: -init everywhere [C, C] (models.py:153, utils.py:9).

  T(W) then has 1 / (1 + (C - 1) sigmoid(-init)) on the diagonal and sigmoid(-init) / (1 + (C - 1) sigmoid(-init))
  elsewhere: 0.48 / 0.058 for C = 10, init 2; 0.48 / 0.0053 for C = 100, init 4.5.

  Args:
    num_classes: C >= 1.
    init: init_t, any finite number (the code's 2 and 4.5).
    dtype: the array's dtype.

  Returns:
    [C, C] filled with -init.
  """
  _checks.check_range("num_classes", num_classes, 1, np.inf)
  _checks.check_range("init_t", init, -np.inf, np.inf, low_open=True, high_open=True)
  return jnp.full((num_classes, num_classes), -init, dtype)


def log_transition_matrix(transition_logits) -> jax.Array:
  """log T [C, C] from W [C, C]: log_sigmoid(W) off the diagonal and 0 on it, minus the log of each row's sum
  1 + sum_{j != i} sigmoid(W_ij). Finite for every finite W; W's diagonal gets no gradient."""
  w = jnp.asarray(transition_logits)
  _check_square("transition_logits", w)
  w = w.astype(loss_parts.compute_dtype(w.dtype))
  off = 1.0 - jnp.eye(w.shape[0], dtype=w.dtype)
  log_a = off * jax.nn.log_sigmoid(w)  # the diagonal's term is 0 * finite: 0, no gradient
  log_rows = jnp.log1p(jnp.sum(off * jax.nn.sigmoid(w), axis=-1, keepdims=True))
  return log_a - log_rows


def transition_matrix(transition_logits) -> jax.Array:
  """T [C, C] = rownormalise(I + (1 - I) * sigmoid(W)) (models.py:164-169, utils.py:12-14).

  Args:
    transition_logits: W [C, C], any finite values.

  Returns:
    [C, C] row-stochastic, every entry in (0, 1) (up to underflow), in W's dtype (at least float32).
  """
  return jnp.exp(log_transition_matrix(transition_logits))


def corrected_cross_entropy(logits, labels, *, transition_logits) -> jax.Array:
  """Forward-corrected NLL of the noisy labels: l = -sum_j y_j log((p @ T)_j), p = softmax(logits), T = T(W).

  For a one-hot y~ the code's `F.nll_loss(torch.mm(clean, t).log(), y)` before its batch mean (main.py:169-177;
  replication volminnet.py:62-74); for soft labels the expectation over the label. Computed as a logsumexp over
  log p + log T (module docstring). Gradients reach both the logits and W.

  Args:
    logits: [..., C] the network's unnormalised scores (its softmax is the clean posterior).
    labels: [..., C] probability vectors (one-hot or soft), the given (noisy) labels.
    transition_logits: W [C, C].

  Returns:
    [...] per-example loss in the logits' dtype. Equals cross entropy as T -> I (W -> -inf off the diagonal).
  """
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  _check_square("transition_logits", transition_logits, logits.shape[-1])
  log_t = log_transition_matrix(jnp.asarray(transition_logits).astype(logits.dtype))
  log_p = jax.nn.log_softmax(logits, axis=-1)
  log_noisy = jax.nn.logsumexp(log_p[..., :, None] + log_t, axis=-2)  # [..., C]: log (p @ T)_j
  return -jnp.sum(labels * log_noisy, axis=-1).astype(out_dtype)


def noisy_posterior(logits, *, transition_logits) -> jax.Array:
  """p @ T [..., C], the estimate of P(Y~ | x) (main.py:173, 206: the code's training and validation accuracy and its
  validation loss use it; its test accuracy uses p alone, main.py:223-227)."""
  logits = jnp.asarray(logits)
  compute = loss_parts.compute_dtype(logits.dtype)
  _check_square("transition_logits", transition_logits, logits.shape[-1])
  p = jax.nn.softmax(logits.astype(compute), axis=-1)
  out = p @ transition_matrix(jnp.asarray(transition_logits).astype(compute))
  return out.astype(loss_parts.output_dtype(logits.dtype))


def log_volume(transition_logits) -> jax.Array:
  """log |det T(W)|, the volume penalty before its factor lam (main.py:175, `t.slogdet().logabsdet`;
  replication volminnet.py:45). det T > 0 at the start (T diagonally dominant) and its gradient with respect to T is
  T^{-T}: minimising it shrinks the simplex spanned by T's rows. -inf (as the code's) for a singular T: only in finite
  precision, when sigmoid(W) rounds to 1 off the diagonal (W above ~17 in float32) and T's rows become equal.

  Args:
    transition_logits: W [C, C].

  Returns:
    A scalar in W's dtype (at least float32).
  """
  _check_square("transition_logits", transition_logits)
  # det T = det T^T. Given T^T, the LU's column-major operand is T laid out row-major, so XLA's layout assignment
  # does not turn T's own computation column-major: with the ResNets' XLA:CPU options (YNNPACK elementwise fusions,
  # noisy_jax.models.resnet) a column-major [100, 100] T fails at run time ("unsupported layout in YNN fusion").
  return jnp.linalg.slogdet(transition_matrix(transition_logits).T)[1]
