"""CAL (Zhu et al., CVPR 2021, arXiv 2012.11854): the pure pieces (the method: noisy_jax.methods.cal).

Original code: UCSC-REAL/CAL@bdb376b (lossfuncs/peerloss.py "PL", models/peerreg_CAL.py "PR",
experiments/exptPeerReg.py "EX", datamanage/peerdatasets/CIFAR.py "DS", models/schedulers/alpha_scheduler.py "AS").
Notation: logits z_n [C], p_n = softmax(z_n), noisy label y_n, and with an offset eps (0: exact log_softmax)
l_n[c] = -log(p_n[c] + eps).

Peer-regularised cross entropy (PL:148-170, both runs), per example, with the noisy class prior pi [C]:
  r_n = -log(p_n[y_n] + eps_ce) - alpha sum_c pi_c l_n[c]          (`peer_regularised_ce`)
eps_ce = 1e-8 (PL:21), eps of the prior term 1e-5 (PL:34); the batch loss is the mean of r_n (the code's two means).

The sieve (PR:109-128, the warm-up run, every training step): s_n = -log(p_n[y_n] + 1e-8) - mean_c l_n[c]
(eps 1e-8): the distilled label d_n = y_n where s_n < -8, argmax p_n where s_n > -8; its weight w_n = 1 in both
cases and 0 where s_n == -8 exactly (the code writes neither branch, and its row stays 0 from the epoch's reset):
`sieve`.

The covariance term (PL:55-100 CrossEntropyStableCALMultiple, with the T_mat of DS:199-205 normalised at EX:119-128).
The code's T_mat is [C, C, N]: T[i, j, n] = w_n [d_n = i] ([y_n = j] - K[i, j] / M_i) with K[i, j] = sum_n w_n
[d_n = i][y_n = j] and M_i = max(sum_n w_n [d_n = i], 1) (w binary). Only row i = d_n is non-zero for example n, so
with the [C, C] matrix T_hat = K / M (`distilled_statistics`) everything is per example:
  indicator I_n = w_n [T_hat[d_n, y_n] < 1]    (PL:77's sum_j [T[i, j, n] > 0] for i = d_n: only j = y_n can be > 0)
  c_n = I_n sum_j ([y_n = j] - T_hat[d_n, j]) (l_n[j] - LM[d_n, j])        (PL:83, 96 with T's factor I_n)
  cal = sum_n P[d_n] c_n / S[d_n],  S_i = max(sum_{n in batch} I_n [d_n = i], 1)   (PL:90-91, 96)
with P the distilled class frequencies among w_n = 1 (EX:121-122), eps 1e-5 in l (PL:56) and LM [C, C] the previous
epoch's means LM[i, j] = sum_n I_n [d_n = i] l_n[j] / max(sum_n I_n [d_n = i], 1) over the whole training split
(PL:87 per batch, summed over the epoch at EX:209 and divided at EX:187, 214; zero in the first epoch, EX:30);
`cal_term` returns cal and this batch's sums R[i, j] = sum_n I_n [d_n = i] l_n[j] (`cal_record`). The code's loss is
mean_n r_n - cal (PL:168): cal is not divided by the batch size.

The alpha schedule (AS:96-127 SegAlpha, stepped after every epoch, experiments/baseexperiment.py:126-128): alpha
starts at `base` (opt.alpha 0.0); after epoch e (0-based) it grows by slope[k], k = bisect_right(milestones, e),
while k < L, slope[k] = (alpha_list[k] - alpha_list[k-1]) / (milestones[k] - milestones[k-1]) (alpha_list[-1] =
base, milestones[-1] = 0): `seg_alpha`, accumulated in Python floats as the code does. The code's learning rate of an
epoch is its StepLR rate divided by 1 + alpha (models/schedulers/lr_scheduler.py:36-45).
"""

from __future__ import annotations

import bisect

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts

CE_EPSILON = 1e-8  # PL:21 CrossEntropyLossStable
PRIOR_EPSILON = 1e-5  # PL:34 CrossEntropyLossRegStable
CAL_EPSILON = 1e-5  # PL:56 CrossEntropyStableCALMultiple
SIEVE_EPSILON = 1e-8  # PR:111
SIEVE_THRESHOLD = -8.0  # PR:123-124
LOG_EPSILONS = ("code", "exact")  # the offsets above, or exact log_softmax everywhere


def epsilons(log_epsilons: str) -> dict:
  """{'ce', 'prior', 'cal', 'sieve'}: the code's offsets inside the logs, or 0 (exact) for 'exact'."""
  _checks.check_choice("log_epsilons", log_epsilons, LOG_EPSILONS)
  if log_epsilons == "exact":
    return {"ce": 0.0, "prior": 0.0, "cal": 0.0, "sieve": 0.0}
  return {"ce": CE_EPSILON, "prior": PRIOR_EPSILON, "cal": CAL_EPSILON, "sieve": SIEVE_EPSILON}


def neg_log_probs(logits, epsilon: float = 0.0) -> jax.Array:
  """l = -log(softmax(z) + epsilon) [..., C] (epsilon 0: -log_softmax(z))."""
  if float(epsilon) == 0.0:
    return -jax.nn.log_softmax(logits, axis=-1)
  return -jnp.log(jax.nn.softmax(logits, axis=-1) + epsilon)


def peer_regularised_ce(
  logits, labels, prior, *, alpha, ce_epsilon: float = CE_EPSILON, prior_epsilon: float = PRIOR_EPSILON
) -> jax.Array:
  """r = -sum_c y_c log(p_c + eps_ce) - alpha sum_c pi_c l[c] [...] (module docstring).

  Args:
    logits: [..., C]; labels: [..., C] one-hot (or soft); prior: [C] the noisy prior pi (any scale: the code's
      CIFAR-100 runs multiply it by 10); alpha: the prior term's weight (a number or a traced value).
  """
  _checks.check_range("ce_epsilon", ce_epsilon, 0.0, 1.0)
  _checks.check_range("prior_epsilon", prior_epsilon, 0.0, 1.0)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  own = jnp.sum(labels * neg_log_probs(logits, ce_epsilon), axis=-1)
  peer = jnp.sum(jnp.asarray(prior, logits.dtype) * neg_log_probs(logits, prior_epsilon), axis=-1)
  return (own - loss_parts.hyper(alpha, logits.dtype) * peer).astype(out_dtype)


def sieve(logits, labels, *, threshold: float = SIEVE_THRESHOLD, epsilon: float = SIEVE_EPSILON):
  """(distilled labels [...] int32, weights [...] float32) of logits [..., C] and integer noisy labels [...]
  (module docstring; PR:113-128)."""
  logits = jnp.asarray(logits)
  logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))
  losses = neg_log_probs(logits, epsilon)
  ce = jnp.take_along_axis(losses, jnp.asarray(labels)[..., None], axis=-1)[..., 0]
  score = ce - jnp.mean(losses, axis=-1)
  keep, relabel = score < threshold, score > threshold
  distilled = jnp.where(keep, labels, jnp.where(relabel, jnp.argmax(logits, axis=-1), 0)).astype(jnp.int32)
  return distilled, (keep | relabel).astype(jnp.float32)


def seg_alpha(alpha_list, milestones, num_epochs: int, base: float = 0.0) -> np.ndarray:
  """alpha of epochs 0 ... num_epochs - 1 [num_epochs] float64 (SegAlpha, AS:96-127; module docstring)."""
  alpha_list, milestones = [float(a) for a in alpha_list], [int(m) for m in milestones]
  if len(alpha_list) != len(milestones) or not milestones:
    raise ValueError(f"alpha_list={alpha_list!r} and milestones={milestones!r} must be non-empty and of one length.")
  if milestones != sorted(milestones) or milestones[0] <= 0 or len(set(milestones)) != len(milestones):
    raise ValueError(f"milestones={milestones!r} must be increasing integers > 0.")
  slopes, current, start = [], float(base), 0
  for alpha, milestone in zip(alpha_list, milestones):
    slopes.append((alpha - current) / float(milestone - start))
    current, start = alpha, milestone
  out, alpha = [], float(base)
  for epoch in range(int(num_epochs)):
    out.append(alpha)
    k = bisect.bisect_right(milestones, epoch)
    if k < len(slopes):
      alpha += slopes[k]
  return np.asarray(out, np.float64)


def _float():
  """The default float dtype (float64 with x64 on)."""
  return jnp.result_type(float)


def noisy_prior(noisy_labels, num_classes: int, *, sqrt: bool = False) -> jax.Array:
  """The noisy labels' class frequencies [C] (DS DatasetNumerical.py:207), or sqrt of them renormalised (EX:104-105,
  the warm-up run's)."""
  counts = jnp.bincount(jnp.asarray(noisy_labels), length=num_classes).astype(_float())
  prior = counts / jnp.sum(counts)
  return jnp.sqrt(prior) / jnp.sum(jnp.sqrt(prior)) if sqrt else prior


def distilled_statistics(distilled, weights, noisy_labels, num_classes: int) -> dict:
  """{'transition': T_hat [C, C], 'p_distill': P [C], 'count': sum_n I_n [d_n = i] [C]} over the training split
  (module docstring; EX:119-128, 187). distilled, noisy_labels [N] int; weights [N] in {0, 1}."""
  d = jax.nn.one_hot(distilled, num_classes, dtype=_float()) * jnp.asarray(weights, _float())[:, None]
  y = jax.nn.one_hot(noisy_labels, num_classes, dtype=_float())
  pairs = d.T @ y
  per_class = jnp.sum(d, axis=0)
  transition = pairs / jnp.maximum(per_class, 1.0)[:, None]
  ind = indicator(distilled, weights, noisy_labels, transition)
  count = jnp.sum(jax.nn.one_hot(distilled, num_classes, dtype=_float()) * ind[:, None], axis=0)
  return {"transition": transition, "p_distill": per_class / jnp.maximum(jnp.sum(per_class), 1.0), "count": count}


def indicator(distilled, weights, noisy_labels, transition) -> jax.Array:
  """I_n = w_n [T_hat[d_n, y_n] < 1] [N] float32 (module docstring)."""
  entry = transition[jnp.asarray(distilled), jnp.asarray(noisy_labels)]
  return jnp.asarray(weights, _float()) * (entry < 1.0).astype(_float())


def cal_record(losses, distilled, ind) -> jax.Array:
  """R[i, j] = sum_n I_n [d_n = i] l_n[j] [C, C] of a batch (PL:87), no gradient."""
  d = jax.nn.one_hot(distilled, losses.shape[-1], dtype=losses.dtype) * ind.astype(losses.dtype)[:, None]
  return lax.stop_gradient(d.T @ losses)


def cal_term(losses, noisy_labels, distilled, ind, transition, p_distill, loss_mean, axis_name=None) -> jax.Array:
  """cal = sum_n P[d_n] c_n / S[d_n] of the global batch (module docstring; PL:75-96), its sums psum-ed over
  `axis_name`.

  Args:
    losses: [B, C] l_n (with eps 1e-5: PL:75); noisy_labels, distilled: [B] int; ind: [B] I_n (0 on padding rows);
    transition: [C, C] T_hat; p_distill: [C] P; loss_mean: [C, C] LM, the previous epoch's.
  """
  num_classes = losses.shape[-1]
  ind = ind.astype(losses.dtype)
  d = jax.nn.one_hot(distilled, num_classes, dtype=losses.dtype)
  counts = jnp.sum(d * ind[:, None], axis=0)
  if axis_name is not None:
    counts = lax.psum(counts, axis_name)
  sizes = jnp.maximum(counts, 1.0)
  rows = jnp.take(transition.astype(losses.dtype), distilled, axis=0)
  centred = losses - jnp.take(loss_mean.astype(losses.dtype), distilled, axis=0)
  c = ind * jnp.sum((jax.nn.one_hot(noisy_labels, num_classes, dtype=losses.dtype) - rows) * centred, axis=-1)
  scale = jnp.take(p_distill.astype(losses.dtype) / sizes, distilled)
  total = jnp.sum(scale * c)
  return total if axis_name is None else lax.psum(total, axis_name)


def loss_mean(record, count) -> jax.Array:
  """LM = R / max(count_i, 1) [C, C] from the epoch's summed records (EX:187, 214)."""
  return record / jnp.maximum(count, 1.0)[:, None]
