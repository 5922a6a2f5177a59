"""CORES² phase 1, the confidence-regularised sample sieve (Cheng et al., ICLR 2021, arXiv 2010.02347): its pure
pieces (the method: noisy_jax.methods.cores).

For an example with logits z [C], p = softmax(z), given label y (a probability vector [C]) and the noise prior
pi [C] (the class frequencies of the labels the sieve keeps, `updated_prior`):

  l       = CE(z, y) - beta_e sum_c w_c (-log(p_c + 1e-8))     w = pi (use_prior) or 1/C   (`regularised_loss`)
  l_sel   = CE(z, y) - mean_c (-log(p_c + 1e-8))                                           (`sieve_margin`)
  keep    = (the sieve is off this epoch) or l_sel <= 0                                    (`sieve_keep`)
  L       = sum_i keep_i l_i / #kept  over the batch (0 when nothing is kept)              (`sieved_batch_loss`)

with CE(z, y) = -sum_c y_c log p_c exact (F.cross_entropy). The CR term -sum_c w_c(-log(p_c + 1e-8)) rewards
confident predictions; l_sel <= 0 keeps an example whose loss on its label is at most its mean loss over all labels.
beta_e (`beta_at`) is 0 for the first 10 epochs, linear from 0 to 2 over the next 30 (np.linspace(0, 2, 30)), then 2;
the learning rate of epoch e is lr_plan[e] / (1 + beta_e) (`lr_factor`). After each epoch the prior becomes
(pi_0 N - s) / sum(pi_0 N - s), pi_0 the given labels' class frequencies over the N training rows and s [C] the
epoch's per-class counts of sieved-out rows (their given classes).

Original code (UCSC-REAL/cores@cf0945e): loss.py:23-54 (loss_cores), :56-62 (f_beta); phase1.py:45-47 (the lr plan
divided by 1 + f_beta), :67-111 (the epoch: the prior as a [1, C] float32 tensor, :73-74; sieved-out rows counted per
given class, :92-95), :189 (lr_plan [0.1] * 50 + [0.01] * 50), :205-212 (the prior update from the *initial* prior,
every epoch); data/cifar.py:97-100 (the initial prior: the noisy labels' class frequencies). Epochs are 0-based there
and here (`beta_at(0)` is the first epoch's). The CIFAR-N replication (KlemenVovk/noisy-labels, cores2/utils.py:9-49,
cores2.py:62-103) is the same loss with the prior as a [C] tensor and f_beta one entry longer (101).

Differences from the original code (each named, none changes a value the code computes):
  - f_beta is a 100-entry table (loss.py:57-62; 101 in the replication): epoch 100 raises IndexError there. Here
    every epoch past the ramp has beta_max.
  - When the sieve keeps no row of a batch, loss_cores returns the single value mean(0 * l) / 1e8 = 0 (loss.py:51-52)
    where its caller unpacks two (phase1.py:91): a TypeError. Here the batch's loss is 0 (zero gradient), the value
    the code computes, and training goes on.
  - The sieve's threshold: the code compares CE with the *uniform* mean of -log(p + 1e-8) (loss.py:34), whatever
    the prior; `sieve_margin(..., weights=pi)` takes the mean with the prior instead (the REFERENCE notes' reading of
    the paper), offered as the method's `sieve_mean='prior'`; default the code's.
"""

from __future__ import annotations

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts

LOG_EPSILON = 1e-8  # loss.py:32: -torch.log(F.softmax(y) + 1e-8)
BETA_WARMUP_EPOCHS = 10  # loss.py:57: np.linspace(0.0, 0.0, num=10)
BETA_RAMP_EPOCHS = 30  # loss.py:58: np.linspace(0.0, 2, num=30)
BETA_MAX = 2.0  # loss.py:58-59
SIEVE_WARMUP_EPOCHS = 31  # loss.py:44: `if epoch <= 30` keeps every row (0-based epochs 0..30)
CODE_LR_PLAN = (0.1,) * 50 + (0.01,) * 50  # phase1.py:189 alpha_plan


def _neg_log_probs(logits) -> jax.Array:
  """-log(softmax(z) + 1e-8) [..., C] (loss.py:32)."""
  return -jnp.log(jax.nn.softmax(logits, axis=-1) + LOG_EPSILON)


def _class_weights(weights, logits) -> jax.Array:
  """w [C] (or broadcastable to the logits): the given weights, or 1/C."""
  num_classes = logits.shape[-1]
  if weights is None:
    return jnp.full((num_classes,), 1.0 / num_classes, logits.dtype)
  weights = jnp.asarray(weights, logits.dtype)
  if weights.shape[-1] != num_classes:
    raise ValueError(f"prior/weights of shape {weights.shape} do not match the logits' {num_classes} classes.")
  return weights


def _cross_entropy(logits, labels) -> jax.Array:
  return -jnp.sum(labels * jax.nn.log_softmax(logits, axis=-1), axis=-1)


def regularised_loss(logits, labels, *, beta, prior=None) -> jax.Array:
  """l = CE(z, y) - beta sum_c w_c (-log(p_c + 1e-8)) [...] (module docstring; loss.py:27-38).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors (one-hot: the given labels).
    beta: the CR term's weight (>= 0; a number or a traced value).
    prior: None (w = 1/C, loss.py:36) or the noise prior pi [C] (loss.py:38).

  Returns:
    [...] in the logits' dtype, computed in at least float32.
  """
  _checks.check_range("beta", beta, 0.0, np.inf, high_open=True)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  weights = _class_weights(prior, logits)
  regulariser = jnp.sum(weights * _neg_log_probs(logits), axis=-1)
  loss = _cross_entropy(logits, labels) - loss_parts.hyper(beta, logits.dtype) * regulariser
  return loss.astype(out_dtype)


def sieve_margin(logits, labels, *, weights=None) -> jax.Array:
  """l_sel = CE(z, y) - sum_c w_c (-log(p_c + 1e-8)) [...], w = 1/C by default (loss.py:34, the code's sieve
  metric) or the given weights [C] (the prior: `sieve_mean='prior'`). The sieve keeps l_sel <= 0."""
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  weights = _class_weights(weights, logits)
  margin = _cross_entropy(logits, labels) - jnp.sum(weights * _neg_log_probs(logits), axis=-1)
  return margin.astype(out_dtype)


def sieve_keep(margin, *, active) -> jax.Array:
  """keep [...] bool: every row while the sieve is not `active` (a bool, traced allowed), else l_sel <= 0
  (loss.py:43-47)."""
  return jnp.logical_or(jnp.logical_not(active), margin <= 0)


def sieved_batch_loss(per_example, keep, valid=None, axis_name=None) -> jax.Array:
  """L = sum_i k_i l_i / sum_i k_i over the global batch (k = keep and valid; sums psum-ed over `axis_name`); 0, with
  a zero gradient, when no row is kept (loss.py:49-54; module docstring)."""
  kept = keep if valid is None else jnp.logical_and(keep, valid)
  kept = kept.astype(per_example.dtype)
  total, count = jnp.sum(kept * per_example), jnp.sum(kept)
  if axis_name is not None:
    total, count = lax.psum(total, axis_name), lax.psum(count, axis_name)
  return total / jnp.maximum(count, 1.0)


def check_schedule(warmup_epochs: int, ramp_epochs: int, beta_max: float) -> None:
  """ValueError naming the first of beta's schedule settings out of its range."""
  for name, value, low in (("beta_warmup_epochs", warmup_epochs, 0), ("beta_ramp_epochs", ramp_epochs, 1)):
    if isinstance(value, bool) or int(value) != value or value < low:
      raise ValueError(f"{name}={value!r} must be an integer >= {low}.")
  if isinstance(beta_max, bool) or not isinstance(beta_max, (int, float)) or not 0.0 <= float(beta_max) < np.inf:
    raise ValueError(f"beta_max={beta_max!r} must be a number >= 0.")


def beta_schedule(
  warmup_epochs: int = BETA_WARMUP_EPOCHS, ramp_epochs: int = BETA_RAMP_EPOCHS, beta_max: float = BETA_MAX
) -> np.ndarray:
  """beta of epochs 0 ... warmup + ramp - 1 [warmup + ramp] float64: zeros, then np.linspace(0, beta_max, ramp)
  (f_beta, loss.py:56-62, without its constant tail: `beta_at` clamps to beta_max)."""
  check_schedule(warmup_epochs, ramp_epochs, beta_max)
  return np.concatenate([np.zeros(int(warmup_epochs)), np.linspace(0.0, float(beta_max), num=int(ramp_epochs))])


def beta_at(
  epoch: int, warmup_epochs: int = BETA_WARMUP_EPOCHS, ramp_epochs: int = BETA_RAMP_EPOCHS, beta_max: float = BETA_MAX
) -> float:
  """beta of 0-based `epoch` (f_beta; beta_max from the ramp's end on, where the code's table ends at epoch 99)."""
  if int(epoch) < 0:
    raise ValueError(f"epoch={epoch!r} must be >= 0 (0-based).")
  schedule = beta_schedule(warmup_epochs, ramp_epochs, beta_max)
  return float(schedule[int(epoch)]) if int(epoch) < schedule.shape[0] else float(beta_max)


def lr_factor(epoch: int, **schedule) -> float:
  """1 / (1 + beta_at(epoch)): the factor of the lr plan (phase1.py:45-47: alpha_plan[e] / (1 + f_beta(e)))."""
  return 1.0 / (1.0 + beta_at(epoch, **schedule))


def class_prior(labels, num_classes: int) -> np.ndarray:
  """pi_0 [C] float64: the class frequencies of the given labels [N] ints (data/cifar.py:97-100)."""
  labels = _checks.check_labels("labels", labels, num_classes)
  counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
  return counts / counts.sum()


def updated_prior(initial_prior, num_examples: int, sieved_out) -> np.ndarray:
  """(pi_0 N - s) / sum(pi_0 N - s) [C] float64 (phase1.py:211-212): `sieved_out` s [C] the epoch's per-class counts
  of rows the sieve dropped (by given class)."""
  prior = np.asarray(initial_prior, np.float64) * int(num_examples) - np.asarray(sieved_out, np.float64)
  total = prior.sum()
  if not total > 0:
    raise ValueError(f"updated_prior: the sieve dropped every row ({np.asarray(sieved_out).sum()} of {num_examples}).")
  return prior / total
