"""DISC, Dynamic Instance-Specific Selection and Correction (Li, Xiao, Zhu, Chen, Zhang, CVPR 2023), as pure building
blocks: the epoch-end division of the training set and the supervised loss of its clean and hard parts.

The original code is JackYFL/DISC@a21e910 (`algorithms/DISC.py`, class DISC: train; `losses/loss_other.py`:
GCELoss). Each example i keeps, for its weakly (w) and strongly (s) augmented view, the softmax the last epoch's step
gave it, p_w,i and p_s,i [C], and a momentum average of that softmax's maximum, c_w,i and c_s,i (its dynamic,
instance-specific threshold; initialised to 1/N, N the training-set size, as the original). At the end of every
epoch (`divide`), with y_i the given label:

  w_i = p_w,i[y_i] > c_w,i ;  s_i = p_s,i[y_i] > c_s,i
  clean C = w & s ;  selected = w | s ;  hard H = selected & ~C
  p_ws,i = (p_w,i + p_s,i) / 2 ;  corrected P = max_c p_ws,i > min((c_w,i + c_s,i) / 2 + sigma, 0.99) & ~selected
  purified (the mixup set) M = selected | P, with labels y_i on `selected`, argmax p_ws,i on P, the previous
    purified label elsewhere (unused: outside M)
  then c_w,i <- m c_w,i + (1 - m) max_c p_w,i and c_s,i likewise (the division reads the thresholds before this)

The original's mixup (losses/loss_mixup.py, Mixup.forward with alpha 5 on CIFAR) runs on the purified rows of each
batch, once per view, as a forward pass of its own (`mixup_subset`, `mixup_loss`; the forward's BatchNorm statistics
over those rows: noisy_jax.models.masked_batch_norm): lam ~ Beta(alpha, alpha), lam <- max(lam, 1 - lam), a uniform
random permutation pi of the k rows, x~_j = lam x_j + (1 - lam) x_pi(j), y~_j = lam e_yj + (1 - lam) e_y_pi(j) with
the purified labels, and the loss -mean_j sum_c y~_jc log softmax(f(x~_j))_c, added to the step's loss unweighted.

(sigma 0.5 and m 0.99 by default, 0.95 for asymmetric noise and for CIFAR at 60% / 80%; the original sets them per
dataset in DISC.__init__). After the warm-up (epoch >= start_epoch; before it every row gets CE on both views,
`warmup_loss`), the step's supervised loss on a batch of B rows (`supervised_loss`) is

  lamd_ce |C_b| / B (CE_C(z_w) + CE_C(z_s))  +  lamd_h |H_b| / B (GCE_H(z_w) + GCE_H(z_s))

with CE_C / GCE_H the means over the batch's clean / hard rows, GCE (1 - clamp(p_y, 1e-7, 1)^q) / q with q 0.7 (the
original's GCELoss), lamd_ce 1 and lamd_h 1 (0.2 at 60% / 80% noise). The original adds a mixup loss on the purified
rows of each view, an extra forward pass of mixed images: that part belongs to DISC's epoch program, not here.

Padding rows (valid False) count in no set and no mean; over several devices the counts and sums are the global
batch's (psum over `axis_name`), B the global number of valid rows.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts

GCE_Q = 0.7  # losses/loss_other.py GCELoss default, as DISC builds it
GCE_CLAMP = 1e-7  # GCELoss: torch.clamp(softmax, min=1e-7, max=1.0)
SIGMA = 0.5  # DISC.__init__: self.sigma
MAX_THRESHOLD = 0.99  # DISC.train: torch.min(ws_threshold, 0.99)


class Division(NamedTuple):
  """The epoch-end division of the training set (bool [N] each) and the state it carries to the next epoch.

  clean, hard, purified: the sets C, H and M of the module docstring; purified_labels: int32 [N], the labels M trains
  with; w_confidence, s_confidence: float [N], the updated thresholds c_w, c_s.
  """

  clean: jax.Array
  hard: jax.Array
  purified: jax.Array
  purified_labels: jax.Array
  w_confidence: jax.Array
  s_confidence: jax.Array


def initial_confidence(num_examples: int, dtype=jnp.float32) -> jax.Array:
  """float [N] filled with 1/N: the original's first thresholds (torch.ones(N) * 1 / N)."""
  return jnp.full((num_examples,), 1.0 / num_examples, dtype)


def divide(
  w_probs,
  s_probs,
  labels,
  w_confidence,
  s_confidence,
  purified_labels,
  *,
  sigma: float = SIGMA,
  momentum: float,
) -> Division:
  """The epoch-end division and threshold update (module docstring).

  Args:
    w_probs, s_probs: [N, C] the softmax of each example's weak / strong view as the last epoch's step recorded it.
    labels: int [N] the given labels.
    w_confidence, s_confidence: [N] the thresholds c_w, c_s before this epoch's update.
    purified_labels: int [N] the previous purified labels (kept where an example is neither selected nor corrected).
    sigma: the margin of the correction threshold (0.5).
    momentum: m of the thresholds' moving average, in [0, 1].

  Returns:
    Division.
  """
  _checks.check_range("momentum", momentum, 0.0, 1.0)
  w_probs, s_probs = jnp.asarray(w_probs), jnp.asarray(s_probs)
  labels = jnp.asarray(labels).astype(jnp.int32)
  w_given = jnp.take_along_axis(w_probs, labels[:, None], axis=1)[:, 0]
  s_given = jnp.take_along_axis(s_probs, labels[:, None], axis=1)[:, 0]
  w_mask, s_mask = w_given > w_confidence, s_given > s_confidence
  clean = w_mask & s_mask
  selected = w_mask | s_mask
  ws_probs = (w_probs + s_probs) / 2
  threshold = jnp.minimum((w_confidence + s_confidence) / 2 + sigma, jnp.asarray(MAX_THRESHOLD, ws_probs.dtype))
  corrected = (jnp.max(ws_probs, axis=1) > threshold) & ~selected
  new_labels = jnp.where(selected, labels, jnp.asarray(purified_labels, jnp.int32))
  new_labels = jnp.where(corrected, jnp.argmax(ws_probs, axis=1).astype(jnp.int32), new_labels)
  return Division(
    clean=clean,
    hard=selected & ~clean,
    purified=selected | corrected,
    purified_labels=new_labels,
    w_confidence=momentum * w_confidence + (1 - momentum) * jnp.max(w_probs, axis=1),
    s_confidence=momentum * s_confidence + (1 - momentum) * jnp.max(s_probs, axis=1),
  )


def gce(logits, labels, *, q: float = GCE_Q) -> jax.Array:
  """DISC's GCE per example: (1 - clamp(softmax(z)_y, 1e-7, 1)^q) / q (GCELoss; the clamp passes no gradient below
  1e-7, as torch.clamp). logits [..., C], labels int [...]; returns [...] in the logits' dtype."""
  _checks.check_range("q", q, 0.0, 1.0, low_open=True)
  probs = jax.nn.softmax(jnp.asarray(logits), axis=-1)
  given = jnp.take_along_axis(probs, jnp.asarray(labels, jnp.int32)[..., None], axis=-1)[..., 0]
  return (1.0 - jnp.power(loss_parts.torch_clamp(given, GCE_CLAMP, 1.0), q)) / q


def _cross_entropy(logits, labels) -> jax.Array:
  log_p = jax.nn.log_softmax(jnp.asarray(logits), axis=-1)
  return -jnp.take_along_axis(log_p, jnp.asarray(labels, jnp.int32)[..., None], axis=-1)[..., 0]


def _psum(x, axis_name):
  return x if axis_name is None else jax.lax.psum(x, axis_name)


def _subset_mean(per_example, mask, axis_name):
  """(sum over the mask's rows, count) over the global batch; the mean is sum / max(count, 1)."""
  mask = mask.astype(per_example.dtype)
  total = _psum(jnp.sum(per_example * mask), axis_name)
  count = _psum(jnp.sum(mask), axis_name)
  return total / jnp.maximum(count, 1.0), count


def warmup_loss(w_logits, s_logits, labels, valid, axis_name=None) -> jax.Array:
  """CE(z_w) + CE(z_s), each the mean over the valid rows of the global batch (the original's warm-up epochs)."""
  ce_w, _ = _subset_mean(_cross_entropy(w_logits, labels), valid, axis_name)
  ce_s, _ = _subset_mean(_cross_entropy(s_logits, labels), valid, axis_name)
  return ce_w + ce_s


def supervised_loss(
  w_logits,
  s_logits,
  labels,
  clean,
  hard,
  valid,
  axis_name=None,
  *,
  lamd_ce: float = 1.0,
  lamd_h: float = 1.0,
  q: float = GCE_Q,
) -> jax.Array:
  """lamd_ce |C_b| / B (CE_C(z_w) + CE_C(z_s)) + lamd_h |H_b| / B (GCE_H(z_w) + GCE_H(z_s)) (module docstring).

  Args:
    w_logits, s_logits: [B, C] the batch's weak and strong views.
    labels: int [B] the given labels.
    clean, hard: bool [B] the rows' sets (`Division`, read for the batch).
    valid: bool [B] False for padding.
    axis_name: the device axis (None: one device).
    lamd_ce, lamd_h: the weights of the clean and hard parts. q: GCE's exponent.

  Returns:
    Scalar; 0 for a batch with no clean and no hard row (where the original skips the step).
  """
  valid = jnp.asarray(valid, bool)
  clean, hard = jnp.asarray(clean, bool) & valid, jnp.asarray(hard, bool) & valid
  batch = jnp.maximum(_psum(jnp.sum(valid.astype(jnp.float32)), axis_name), 1.0)
  ce_w, clean_count = _subset_mean(_cross_entropy(w_logits, labels), clean, axis_name)
  ce_s, _ = _subset_mean(_cross_entropy(s_logits, labels), clean, axis_name)
  gce_w, hard_count = _subset_mean(gce(w_logits, labels, q=q), hard, axis_name)
  gce_s, _ = _subset_mean(gce(s_logits, labels, q=q), hard, axis_name)
  return lamd_ce * (clean_count / batch) * (ce_w + ce_s) + lamd_h * (hard_count / batch) * (gce_w + gce_s)


def subset_permutation(key: jax.Array, mask: jax.Array) -> jax.Array:
  """int32 [B]: pi(i) for the rows in `mask` (bool [B]), a uniformly random permutation of those rows, and i for the
  others. As the original's `torch.randperm(k)` on `x[mask]`: the k rows in index order m_0 < ... < m_(k-1), a
  uniform permutation sigma of 0..k-1, pi(m_j) = m_sigma(j)."""
  mask = jnp.asarray(mask, bool)
  size = mask.shape[0]
  positions = jnp.arange(size)
  subset = jnp.argsort(~mask, stable=True)  # the masked rows in index order first, then the others
  count = jnp.sum(mask)
  sigma = jnp.argsort(jnp.where(positions < count, jax.random.uniform(key, (size,)), 2.0 + positions))
  return jnp.zeros((size,), jnp.int32).at[subset].set(jnp.where(positions < count, subset[sigma], subset))


def mixup_lambda(key: jax.Array, alpha: float) -> jax.Array:
  """max(lam, 1 - lam) with lam ~ Beta(alpha, alpha); 1 for alpha = 0 (Mixup.forward)."""
  _checks.check_range("alpha", alpha, 0.0, np.inf)
  if alpha == 0:
    return jnp.ones((), jnp.float32)
  lam = jax.random.beta(key, alpha, alpha)
  return jnp.maximum(lam, 1.0 - lam)


def mixup_subset(key: jax.Array, x, labels, mask, *, num_classes: int, alpha: float):
  """The original's Mixup.forward on the rows in `mask` (module docstring), shapes kept.

  Args:
    key: this mixup's key (lam and the permutation from its two halves).
    x: [B, ...] the batch's inputs (one view, normalised).
    labels: int [B] the purified labels.
    mask: bool [B] the batch's purified rows (valid ones).
    num_classes: C.
    alpha: Beta's parameter (5 in the original's CIFAR configs).

  Returns:
    (mixed x [B, ...], mixed targets [B, C], lam): rows outside the mask keep their input and one-hot label, and
    must be masked out of the loss and the BatchNorm statistics by the caller.
  """
  key_lam, key_perm = jax.random.split(key)
  lam = mixup_lambda(key_lam, alpha)
  partner = subset_permutation(key_perm, mask)
  targets = jax.nn.one_hot(jnp.asarray(labels, jnp.int32), num_classes, dtype=jnp.asarray(x).dtype)
  mask = jnp.asarray(mask, bool)

  def mix(a):
    rows = mask.reshape((-1,) + (1,) * (a.ndim - 1))
    return jnp.where(rows, lam * a + (1.0 - lam) * a[partner], a).astype(a.dtype)

  return mix(jnp.asarray(x)), mix(targets), lam


def mixup_loss(logits, targets, mask, axis_name=None) -> jax.Array:
  """-mean over the masked rows of the global batch of sum_c targets_c log softmax(logits)_c; 0 with no row."""
  per_example = -jnp.sum(targets * jax.nn.log_softmax(jnp.asarray(logits), axis=-1), axis=-1)
  mean, _ = _subset_mean(per_example, jnp.asarray(mask, bool), axis_name)
  return mean
