"""T-Revision's pure pieces: importance-reweighted cross entropy and the revised transition T + dT.

Xia et al., "Are Anchor Points Really Indispensable in Label-Noise Learning?", NeurIPS 2019 (arXiv 1906.00189);
original code xiaoboxia/T-Revision@b598cf2 (loss.py, main.py, Resnet.py, tools.py).

T [C, C] is row-stochastic in noisy_jax's convention (noisy_jax.core.noise): T[i, j] = P(given label j | true label
i). With p = softmax(logits) the network's estimate of the clean posterior P(Y | x), the noisy posterior is

  P(Y~ | x) ~= T^T p = p @ T                                       (`noisy_posterior`)

and the importance weight of an example given label j is the ratio of the clean to the noisy posterior at j:

  beta_j(x) = p_j / (p @ T)_j                                      (`importance_weights`)

The reweighted risk (the paper's R_{n,w}(T, f)) is the batch mean of beta_y~ CE(p, y~), CE = -log p_y~
(`reweighted_cross_entropy`, then `batch_mean`). Revision adds a slack variable dT [C, C], zero at the start of the
revision stage, and minimises the same risk with T + dT in place of T, over the network and dT together
(`revised_transition`, `revision_cross_entropy`). dT reaches the risk only through beta, so beta must carry a
gradient there.

The three stages of the original main.py: (1) cross entropy for n_epoch_estimate epochs (plain SGD), then T from
anchor points of the best-validation epoch's training-set probabilities (noisy_jax.methods.loss_correction's
`estimate_transition`); (2) the reweighted loss with that T, beta detached; (3) the revision loss with T + dT, beta
not detached, Adam at lr 5e-7 over the network and dT.

For soft labels (the label table's rows) every loss takes the expectation over the label, sum_j y_j l(p, j), which is
the paper's form for one-hot labels.

Numerics. beta_j is computed as exp(log p_j - m_j) / sum_k exp(log p_k - m_j) M[k, j] with M = T (+ dT) and m_j the
largest log p_k among the k with M[k, j] != 0 (a constant for the gradient): the same number as p_j / (p @ M)_j, but
finite where both underflow (logits far apart with a sparse T such as the identity or a pair flip, where the
original's plain ratio is 0/0). No clamp of beta, of p or of T + dT, as in the original: beta is finite whenever M is
non-negative with a non-zero diagonal; an entry of T + dT that goes negative can make it negative or unbounded, as
there. The cost is O(C^2) per example (a [..., C, C] reduction).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts

# Where gradients flow through beta: 'none' (beta is a constant: the original's reweighting stage, loss.py:25),
# 'transition' (into T + dT only: the network's probabilities inside beta are constants) or 'all' (into the network
# and T + dT: the original's revision stage, loss.py:52).
WEIGHT_GRADIENTS = ("none", "transition", "all")


def _check_matrix(name: str, matrix, num_classes: int) -> None:
  if jnp.shape(matrix) != (num_classes, num_classes):
    raise ValueError(
      f"{name} must be [C, C] = [{num_classes}, {num_classes}] for C = {num_classes} classes, got shape "
      f"{jnp.shape(matrix)}."
    )


def _weights(log_p: jax.Array, matrix: jax.Array, present: jax.Array | None = None) -> jax.Array:
  """beta_j = p_j / (p @ M)_j [..., C] from log p [..., C] and M [..., C, C] (leading axes broadcast).

  `present` [..., C] (bool): columns where it is False get a denominator of 1, so that a column nobody reads (a label
  entry of 0) cannot put 0 * inf into the gradient.
  """
  nonzero = matrix != 0
  # m_j = max{log p_k : M[k, j] != 0}; 0 for a column of zeros. Only a shift: no gradient.
  shift = jnp.max(jnp.where(nonzero, log_p[..., :, None], -jnp.inf), axis=-2)
  shift = jax.lax.stop_gradient(jnp.where(jnp.isfinite(shift), shift, 0.0))
  exponent = log_p[..., :, None] - shift[..., None, :]
  # exponent <= 0 wherever M[k, j] != 0. Where M[k, j] == 0 the term is 0 whatever the exponent; the cap keeps
  # exp finite there (0 * inf would be NaN) and only limits d/dM[k, j] once p_k / p_m exceeds exp(cap).
  cap = 0.5 * float(np.log(jnp.finfo(log_p.dtype).max))
  scaled_noisy = jnp.sum(jnp.exp(jnp.minimum(exponent, cap)) * matrix, axis=-2)  # (p @ M)_j / exp(m_j)
  if present is not None:
    scaled_noisy = jnp.where(present, scaled_noisy, 1.0)
  return jnp.exp(log_p - shift) / scaled_noisy


def _reweighted(log_p: jax.Array, labels: jax.Array, matrix: jax.Array, weight_gradient: str) -> jax.Array:
  present = labels != 0
  if weight_gradient == "none":
    beta = jax.lax.stop_gradient(_weights(log_p, matrix, present))
  elif weight_gradient == "transition":
    beta = _weights(jax.lax.stop_gradient(log_p), matrix, present)
  else:
    beta = _weights(log_p, matrix, present)
  beta = jnp.where(present, beta, 0.0)
  return -jnp.sum(labels * beta * log_p, axis=-1)


def noisy_posterior(logits, *, transition) -> jax.Array:
  """The noisy class posterior P(Y~ | x) ~= T^T p = p @ T, p = softmax(logits).

  The original uses it for the training and validation accuracy of stages 2 and 3 (argmax against the noisy labels,
  main.py:250-254 with T, 323-327 and 341-346 with T + dT) and the validation accuracy selects stage 2's epoch.

  Args:
    logits: [..., C] unnormalised scores.
    transition: [C, C] T (or T + dT, `revised_transition`), T[i, j] = P(given j | true i).

  Returns:
    [..., C] in the logits' dtype; rows sum to 1 when T is row-stochastic.
  """
  logits = jnp.asarray(logits)
  compute = loss_parts.compute_dtype(logits.dtype)
  _check_matrix("transition", transition, logits.shape[-1])
  p = jax.nn.softmax(logits.astype(compute), axis=-1)
  return (p @ jnp.asarray(transition, compute)).astype(loss_parts.output_dtype(logits.dtype))


def initial_correction(num_classes: int, *, dtype=jnp.float32) -> jax.Array:
  """The slack variable dT [C, C] at the start of the revision stage: zeros.

  The original keeps dT as the weight of a bias-free nn.Linear(C, C) beside the network (Resnet.py:77, Lenet.py:12),
  unused before stage 3, and sets it to 0 when stage 3 starts (main.py:300).

  Args:
    num_classes: C.
    dtype: the array's dtype.

  Returns:
    [C, C] zeros.
  """
  _checks.check_range("num_classes", num_classes, 1, np.inf)
  return jnp.zeros((num_classes, num_classes), dtype)


def revised_transition(transition, correction) -> jax.Array:
  """T + dT, the revised transition matrix; nothing else.

  As in the paper (T^ + dT) and the original (loss.py:47, main.py:323, Resnet.py:89: the nn.Linear weight added as
  it is, untransposed): no row normalisation, no clamp, no projection onto the simplex. T + dT need not be
  row-stochastic nor non-negative; the original's Adam step also applies its weight decay 1e-4 to dT (main.py:85),
  which is the optimiser's business, not this function's.

  Args:
    transition: [C, C] T, fixed during revision.
    correction: [C, C] dT, learned.

  Returns:
    [C, C] T + dT in the promoted dtype.
  """
  transition, correction = jnp.asarray(transition), jnp.asarray(correction)
  if transition.ndim != 2 or transition.shape[0] != transition.shape[1]:
    raise ValueError(f"transition must be a square [C, C] matrix, got shape {transition.shape}.")
  _check_matrix("correction", correction, transition.shape[0])
  return transition + correction


def importance_weights(logits, *, transition) -> jax.Array:
  """The importance weights beta_j = p_j / (p @ T)_j for every candidate label j.

  The paper's beta(x, y~) = P(Y = y~ | x) / P(Y~ = y~ | x) with the clean posterior estimated by p = softmax(logits)
  and the noisy one by T^T p (Xia et al. 2019, Sec. 3); the original's pro1 / pro2 (loss.py:20-24, 46-52), from the
  same softmax as the loss, unclamped. The weight of a soft label y is sum_j y_j beta_j. beta = 1 when T = I.
  Computed stably (module docstring); full gradient (the losses below choose where it stops).

  Args:
    logits: [..., C] unnormalised scores.
    transition: [C, C] T or T + dT.

  Returns:
    [..., C] beta in the logits' dtype.
  """
  logits = jnp.asarray(logits)
  compute = loss_parts.compute_dtype(logits.dtype)
  _check_matrix("transition", transition, logits.shape[-1])
  log_p = jax.nn.log_softmax(logits.astype(compute), axis=-1)
  return _weights(log_p, jnp.asarray(transition, compute)).astype(loss_parts.output_dtype(logits.dtype))


def reweighted_cross_entropy(logits, labels, *, transition, weight_gradient: str = "none") -> jax.Array:
  """Importance-reweighted cross entropy: l = sum_j y_j beta_j (-log p_j), beta_j = p_j / (p @ T)_j.

  For a one-hot label y~ this is beta_y~ CE(p, y~), one term of the paper's R_{n,w}(T, f) (Xia et al. 2019, Sec. 3),
  and the original's `reweight_loss` before its batch mean (loss.py:6-29: softmax of the logits for both p_y~ and
  T^T p, F.cross_entropy on the logits, no clamp). Reduce with `batch_mean`.

  weight_gradient: the paper writes one objective and does not say where gradients stop; the original detaches beta
  in this (reweighting) stage: `Variable(beta, requires_grad=True)` (loss.py:25) makes beta a new leaf, so the
  network's gradient is beta_y~ d CE only. 'none' (the default) is that; 'all' also differentiates beta (as the
  original's revision stage does); 'transition' differentiates beta with respect to T only.

  Args:
    logits: [..., C] unnormalised scores.
    labels: [..., C] probability vectors (one-hot or soft), the given (noisy) labels.
    transition: [C, C] T (T + dT for revision: `revision_cross_entropy`).
    weight_gradient: one of WEIGHT_GRADIENTS, where gradients flow through beta.

  Returns:
    [...] per-example loss in the logits' dtype. Equals cross entropy when T = I.
  """
  _checks.check_choice("weight_gradient", weight_gradient, WEIGHT_GRADIENTS)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  _check_matrix("transition", transition, logits.shape[-1])
  log_p = jax.nn.log_softmax(logits, axis=-1)
  return _reweighted(log_p, labels, jnp.asarray(transition, logits.dtype), weight_gradient).astype(out_dtype)


def revision_cross_entropy(
  logits,
  labels,
  *,
  transition,
  correction,
  weight_gradient: str = "all",
  accumulate_correction: bool = False,
) -> jax.Array:
  """The revision stage's loss: reweighted cross entropy with T + dT, l = sum_j y_j beta_j (-log p_j),
  beta_j = p_j / (p @ (T + dT))_j.

  The paper's R_{n,w}(T^ + dT, f), minimised over the network and dT (Xia et al. 2019, Sec. 3 and Algorithm 1);
  the original's `reweighting_revision_loss` before its batch mean (loss.py:32-56). dT enters only through beta, so
  'all' (the default) lets beta's gradient flow, as the original does there (loss.py:52, no detach): into dT and,
  through p in beta, into the network. 'transition' keeps the network's gradient of the reweighting stage (beta
  constant for the network) while dT still learns; 'none' leaves dT without a gradient (the original's unused
  `reweighting_revision_loss_v2`, loss.py:76-90, detaches beta this way, so its dT would never move).

  accumulate_correction: the original adds dT to T inside its loop over the batch (`T = T + correction`,
  loss.py:47), so example i (0-based) of a batch is weighted with T + (i + 1) dT, and dT's gradient is scaled by
  the example's position. False (the default) uses T + dT for every example, as the paper, and as the original's own
  accuracy (main.py:323) and estimation error (main.py:348) do. True reproduces the defect along the leading axis
  of `logits` (needs ndim >= 2), which must then be the original's whole batch in its order (under a device mesh each
  device's shard would restart the count).

  Args:
    logits: [B, ..., C] (or [..., C] when not accumulating) unnormalised scores.
    labels: the same shape, probability vectors (one-hot or soft).
    transition: [C, C] T, fixed.
    correction: [C, C] dT (`initial_correction` at the start of the stage).
    weight_gradient: one of WEIGHT_GRADIENTS, where gradients flow through beta.
    accumulate_correction: True for the original's T + (i + 1) dT (see above).

  Returns:
    [...] per-example loss in the logits' dtype. Equals `reweighted_cross_entropy` with T when dT = 0.
  """
  _checks.check_choice("weight_gradient", weight_gradient, WEIGHT_GRADIENTS)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  num_classes = logits.shape[-1]
  _check_matrix("transition", transition, num_classes)
  _check_matrix("correction", correction, num_classes)
  transition = jnp.asarray(transition, logits.dtype)
  correction = jnp.asarray(correction, logits.dtype)
  if accumulate_correction:
    if logits.ndim < 2:
      raise ValueError(f"accumulate_correction needs a batch axis: logits [B, ..., C], got shape {logits.shape}.")
    position = jnp.arange(1, logits.shape[0] + 1, dtype=logits.dtype).reshape((-1,) + (1,) * (logits.ndim - 2))
    matrix = transition + position[..., None, None] * correction  # [B, 1..., C, C]
  else:
    matrix = revised_transition(transition, correction)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  return _reweighted(log_p, labels, matrix, weight_gradient).astype(out_dtype)


def batch_mean(per_example, valid=None) -> jax.Array:
  """The batch reduction of both original losses: sum_i l_i / B (loss.py:29, 56: `loss / len(target)`).

  The original's last batch of an epoch is smaller (drop_last=False) and is averaged over its own size; `valid`
  marks the real rows of a padded batch, giving the same number.

  Args:
    per_example: [B] (or any shape) per-example losses.
    valid: optional mask of the same shape; True (or 1) for the rows that count.

  Returns:
    The scalar mean over the valid rows (0 when there are none).
  """
  per_example = jnp.asarray(per_example)
  if valid is None:
    return jnp.mean(per_example)
  valid = jnp.asarray(valid, per_example.dtype)
  _checks.check_same_shape("per_example", per_example, "valid", valid)
  return jnp.sum(per_example * valid) / jnp.maximum(jnp.sum(valid), 1.0)
