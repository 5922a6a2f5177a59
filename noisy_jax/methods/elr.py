"""Early-Learning Regularization, ELR and ELR+ (Liu, Niles-Weed, Razavian, Fernandez-Granda, NeurIPS 2020,
"Early-Learning Regularization Prevents Memorization of Noisy Labels", arXiv 2007.00151), as pure building blocks.

The original code is shengliu66/ELR@934af53 (`ELR/model/loss.py`, `ELR_plus/model/loss.py`,
`ELR_plus/trainer/trainer.py`, `ELR_plus/utils/util.py`); see shared REFERENCE.md section 6. Every function here is
pure and jit-able; the per-example state (the targets table) is an explicit [N, C] array read and written by index.

ELR. Each training example i owns a target t_i [C], a running average of the network's own (detached) predictions:

  p_i  = clamp(softmax(z_i), 1e-4, 1 - 1e-4)                               (the original code's clamp)
  t_i <- beta t_i + (1 - beta) sg(p_i) / sum_c sg(p_ic)                      (`update_targets`, `updated_rows`)
  l_i  = CE(z_i, y_i) + lam log(1 - <t_i, p_i>)                              (`elr_loss`, per example)

and the original's batch loss is mean_i CE_i + lam mean_i log(1 - <t_i, p_i>) = mean_i l_i, i.e. exactly the
batch mean (`noisy_jax.train.method.weighted_batch_mean` with unit weights) of `elr_loss`. The table starts at 0, so
the first target of an example sums to 1 - beta (not 1), the second to 1 - beta^2, ...: there is no bias correction,
and we keep it that way. In the original the update happens inside the loss's forward pass, before the regulariser
is computed, so the step's regulariser already uses the row that includes this step's prediction. A jitted step
reproduces that by computing `rows = updated_rows(targets[idx], softmax(z), beta=...)` inside the differentiated
function (the stop-gradient is built in), passing `rows` to `elr_loss`, returning them as an auxiliary output and
writing them back with `targets.at[idx].set(rows, mode="drop")` (or calling `update_targets` with the same probs).

ELR+. Two networks, each with a weight-averaged (EMA) copy. Network 1's targets come from network 2's EMA on the
unmixed batch (and vice versa), without the clamp: t_i <- beta t_i + (1 - beta) softmax(z_ema,i) / sum (the
normalisation is a no-op up to rounding); `update_targets(..., clamp=None)`. The step mixes inputs and labels
(`mixup`: lam_mix ~ Beta(a, a), lam_mix = max(lam_mix, 1 - lam_mix), one permutation pi), mixes the targets the same
way (`mix_targets`: q_i = lam_mix t_i + (1 - lam_mix) t_pi(i)), and minimises

  l_i = softCE(z_mix,i, y_mix,i) + ramp(step, coef_step) lam log(1 - <q_i, clamp(p_mix,i, 1e-4, 1 - 1e-4)>)

(`elr_plus_loss` with `coef=sigmoid_ramp(step, coef_step)`); the original averages both terms over the batch, so
again its loss is the batch mean of ours. For CIFAR-100 only (`num_classes == 100` in the code) the mixed labels are
first re-weighted by the targets, y_mix <- y_mix q / sum(y_mix q) (`reweight_labels=True`, `reweighted_labels`).
After each optimiser step the EMA is updated with `ema_decay` (`update_ema`).

Clamps follow PyTorch's `torch.clamp` (`loss_parts.torch_clamp`): the value is clipped and the gradient is passed
where lo <= x <= hi (both ends included) and zero outside (`jnp.clip` passes half the gradient at the ends). A
clamped probability therefore blocks the regulariser's gradient, as in the original.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts
from noisy_jax.core import precision
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import method as method_lib

# The original code's clamp of the softmax in ELR's update and regulariser and in ELR+'s regulariser.
PROB_CLAMP = (1e-4, 1.0 - 1e-4)


def _check_clamp(clamp) -> None:
  if clamp is None:
    return
  if len(clamp) != 2 or not 0.0 <= float(clamp[0]) < float(clamp[1]) <= 1.0:
    raise ValueError(f"clamp={clamp!r} must be None or a pair (lo, hi) with 0 <= lo < hi <= 1.")


def _rows_like(name: str, rows, logits: jax.Array) -> jax.Array:
  rows = jnp.asarray(rows)
  _checks.check_same_shape(name, rows, "logits", logits)
  return jax.lax.stop_gradient(rows.astype(logits.dtype))


# ---------------------------------------------------------------------------------------------------------------
# The targets table.


def init_targets(num_examples: int, num_classes: int, dtype=None) -> jax.Array:
  """The initial targets table t = 0, [N, C] (the original's `torch.zeros(num_examp, num_classes)`), in `dtype`
  (default precision.float_dtype())."""
  if int(num_examples) < 1 or int(num_classes) < 2:
    raise ValueError(f"need num_examples >= 1 and num_classes >= 2, got {num_examples!r} and {num_classes!r}.")
  return jnp.zeros((int(num_examples), int(num_classes)), dtype or precision.float_dtype())


def updated_rows(target_rows, probs, *, beta: float, clamp=PROB_CLAMP) -> jax.Array:
  """One temporal-ensembling step of the rows read for a batch: beta t + (1 - beta) sg(p') / sum_c sg(p'_c).

  p' = clamp(probs, *clamp) (ELR's default (1e-4, 1 - 1e-4)), or p' = probs when `clamp` is None (ELR+'s update from
  the other network's EMA). `probs` enter under `stop_gradient` (the original detaches them), so this can be called
  inside a differentiated step without leaking a gradient into the targets.

  Args:
    target_rows: [B, C] the table's rows for the batch (t_i, zeros before the first visit).
    probs: [B, C] softmax outputs for the same examples.
    beta: the average's momentum in [0, 1] (ELR: CIFAR-10 sym 0.7, asym and CIFAR-100 0.9).
    clamp: (lo, hi) applied to probs before the normalisation, or None.

  Returns:
    [B, C] new rows in float32 (at least); each sums to beta sum(t_i) + (1 - beta).
  """
  _checks.check_range("beta", beta, 0.0, 1.0)
  _check_clamp(clamp)
  probs = jnp.asarray(probs)
  compute = loss_parts.compute_dtype(probs.dtype)
  probs = jax.lax.stop_gradient(probs.astype(compute))
  target_rows = jax.lax.stop_gradient(jnp.asarray(target_rows).astype(compute))
  _checks.check_same_shape("target_rows", target_rows, "probs", probs)
  if clamp is not None:
    probs = loss_parts.torch_clamp(probs, clamp[0], clamp[1])
  probs = probs / jnp.maximum(jnp.sum(probs, axis=-1, keepdims=True), jnp.finfo(compute).tiny)
  beta = jnp.asarray(beta, compute)
  return beta * target_rows + (1.0 - beta) * probs


def update_targets(targets, indices, probs, *, beta: float, clamp=PROB_CLAMP) -> jax.Array:
  """ELR's target update for a batch: t[idx_b] <- beta t[idx_b] + (1 - beta) sg(p'_b) / sum_c sg(p'_bc).

  p' = clamp(probs, 1e-4, 1 - 1e-4) by default (ELR's code); `clamp=None` for ELR+ (its update from the other
  network's EMA has no clamp). The table starts at 0 (`init_targets`): the first target of an example sums to
  1 - beta, as in the original (no bias correction). Rows are written by index with `mode="drop"`, so the padding
  index N (and anything outside [0, N)) changes nothing. Duplicate indices within one batch write one of their
  values (unspecified which, as in PyTorch's `target[index] = ...`); the trainer's batches have none.

  Args:
    targets: [N, C] the table.
    indices: [B] example indices of the batch (all-gathered over devices, so every replica writes the same rows).
    probs: [B, C] softmax outputs (ELR: of the network being trained, this step's forward pass).
    beta: momentum in [0, 1].
    clamp: (lo, hi) or None, see `updated_rows`.

  Returns:
    [N, C] the new table, in the table's dtype.
  """
  targets = jnp.asarray(targets)
  indices = jnp.asarray(indices)
  rows = jnp.take(targets, indices, axis=0, mode="clip")  # out-of-range rows are read anyway and dropped on write
  new_rows = updated_rows(rows, probs, beta=beta, clamp=clamp)
  return targets.at[indices].set(new_rows.astype(targets.dtype), mode="drop")


# ---------------------------------------------------------------------------------------------------------------
# ELR.


def _log_one_minus_agreement(logits: jax.Array, target_rows: jax.Array) -> jax.Array:
  """log(1 - <sg t, clamp(softmax z, 1e-4, 1 - 1e-4)>) per example (compute dtype in, compute dtype out)."""
  p = loss_parts.torch_clamp(jax.nn.softmax(logits, axis=-1), *PROB_CLAMP)
  agreement = jnp.sum(jax.lax.stop_gradient(target_rows) * p, axis=-1)
  # log1p: accurate for a small agreement. sum_c t_c <= 1 and p_c <= 1 - 1e-4 keep 1 - <t, p> >= 1e-4; the cap
  # only guards tables whose rows sum above 1 (the value is then log(eps) instead of NaN).
  return jnp.log1p(-jnp.minimum(agreement, 1.0 - jnp.finfo(logits.dtype).eps))


def elr_regularizer(logits, target_rows) -> jax.Array:
  """ELR's regulariser per example: log(1 - <t_i, p_i>), p_i = clamp(softmax(z_i), 1e-4, 1 - 1e-4).

  The targets are constants (stop-gradient); the gradient flows through p only (and not through a clamped p_c).
  It is <= 0 and decreases as the prediction agrees with the target, so minimising lam * this pulls p towards t.

  Args:
    logits: [..., C].
    target_rows: [..., C] the targets t_i of these examples.

  Returns:
    [...] per-example value in the logits' dtype.
  """
  logits = jnp.asarray(logits)
  if logits.ndim < 1:
    raise ValueError(f"logits must have a trailing class axis [..., C], got shape {logits.shape}.")
  out_dtype = loss_parts.output_dtype(logits.dtype)
  logits = logits.astype(loss_parts.compute_dtype(logits.dtype))
  return _log_one_minus_agreement(logits, _rows_like("target_rows", target_rows, logits)).astype(out_dtype)


def elr_loss(logits, labels, targets_rows, *, lam: float) -> jax.Array:
  """ELR's per-example loss: CE(z_i, y_i) + lam log(1 - <t_i, p_i>) (Liu et al., NeurIPS 2020, arXiv 2007.00151).

  CE = -sum_c y_c log softmax(z)_c (through log_softmax); p_i = clamp(softmax(z_i), 1e-4, 1 - 1e-4) as in the
  original (its gradient is zero where the clamp is active); t_i enter under stop-gradient, so the gradient flows only
  through p (and CE). The original computes F.cross_entropy (mean over the batch) plus
  lam * mean_batch log(1 - <t_i, p_i>): its loss is the batch mean of this per-example value (for a final partial
  batch too: a padded batch averaged over its valid rows with `methods.weighted_batch_mean` gives the same number).
  Call it with the rows already updated by this step's prediction (`updated_rows`), as the original does.

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors (one-hot in the original).
    targets_rows: [..., C] the targets t_i (rows of the table for these examples).
    lam: the regulariser's weight lambda >= 0 (CIFAR-10 sym 3, asym 1, CIFAR-100 7).

  Returns:
    [...] per-example loss in the logits' dtype.
  """
  _checks.check_range("lam", lam, 0.0, np.inf)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  target_rows = _rows_like("targets_rows", targets_rows, logits)
  ce = -jnp.sum(labels * jax.nn.log_softmax(logits, axis=-1), axis=-1)
  reg = _log_one_minus_agreement(logits, target_rows)
  return (ce + jnp.asarray(lam, logits.dtype) * reg).astype(out_dtype)


# ---------------------------------------------------------------------------------------------------------------
# ELR+: ramps, EMA, mixup and the loss on the mixed batch.


def sigmoid_ramp(step, length) -> jax.Array:
  """The original's `sigmoid_rampup`: exp(-5 (1 - s / length)^2) with s = clip(step, 0, length); 1 if length == 0.

  Rises from exp(-5) = 0.0067 at step 0 to 1 at step >= length. ELR+ weights its regulariser by
  `sigmoid_ramp(step, coef_step)` (CIFAR-100 coef_step 40000; CIFAR-10 configs 0, i.e. always 1) and ramps its EMA
  decay with `ema_step`. (config_webvision.json has no coef_step, so the original raises KeyError there.)

  Args:
    step: scalar, the original's global iteration count.
    length: scalar >= 0.

  Returns:
    float32 scalar.
  """
  _checks.check_range("length", length, 0.0, np.inf)
  step = jnp.asarray(step, precision.float_dtype())
  length = jnp.asarray(length, precision.float_dtype())
  safe_length = jnp.where(length > 0, length, 1.0)
  phase = 1.0 - jnp.clip(step, 0.0, safe_length) / safe_length
  return jnp.where(length > 0, jnp.exp(-5.0 * phase * phase), 1.0)


def ema_decay(step, *, ema_update: bool, ema_alpha: float, ramp_length) -> jax.Array:
  """ELR+'s EMA decay a (ema <- a ema + (1 - a) params) after optimiser step `step` (trainer.update_ema_variables).

    ema_update True:  a = ema_alpha * sigmoid_ramp(step + 1, ramp_length)      (the code ramps at global_step + 1)
    ema_update False: a = min(1 - 1 / (step + 1), ema_alpha)                    (the mean-teacher warm start)

  `step` is what the original passes as global_step: the 1-based count of optimiser steps so far, this one included
  (the trainer's global_step + local_step after `local_step += 1`). Configs: CIFAR ema_alpha 0.997, ema_update
  true, ema_step 40000; Clothing1M 0.9999 and WebVision 0.997, both ema_update false. The original's
  `ema_alpha == 0` branch raises NameError (it assigns from an undefined `ema_param`); here ema_alpha = 0 gives
  a = 0, i.e. the EMA copies the parameters, which is what that branch meant. The original averages the parameters only
  (`model.parameters()`), not BatchNorm statistics.

  Args:
    step: scalar >= 0 (traceable).
    ema_update: static bool, the config's `ema_update`.
    ema_alpha: the maximal decay in [0, 1].
    ramp_length: the config's `ema_step` (used when ema_update), >= 0.

  Returns:
    float32 scalar decay in [0, ema_alpha].
  """
  _checks.check_range("ema_alpha", ema_alpha, 0.0, 1.0)
  step = jnp.asarray(step, precision.float_dtype())
  alpha = jnp.asarray(ema_alpha, precision.float_dtype())
  if ema_update:
    return alpha * sigmoid_ramp(step + 1.0, ramp_length)
  return jnp.minimum(1.0 - 1.0 / (step + 1.0), alpha)


def update_ema(ema_params: Any, params: Any, decay) -> Any:
  """ema <- decay * ema + (1 - decay) * params, leaf by leaf (the original's `ema.mul_(a).add_(1 - a, param)`)."""

  def average(ema, new):
    d = jnp.asarray(decay, jnp.result_type(ema))
    return d * ema + (1.0 - d) * new

  return jax.tree.map(average, ema_params, params)


def _mix(x: jax.Array, perm: jax.Array, lam: jax.Array) -> jax.Array:
  out_dtype = loss_parts.output_dtype(x.dtype)
  xf = x.astype(loss_parts.compute_dtype(x.dtype))
  lam = lam.astype(xf.dtype)
  return (lam * xf + (1.0 - lam) * jnp.take(xf, perm, axis=0)).astype(out_dtype)


def mixup(x, y, key, alpha) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
  """ELR+'s mixup (trainer._mixup_data): one lam_mix and one permutation pi for the whole batch.

    lam_mix ~ Beta(alpha, alpha), lam_mix <- max(lam_mix, 1 - lam_mix),  pi a random permutation of [0, B)
    x_mix = lam_mix x + (1 - lam_mix) x[pi],  y_mix = lam_mix y + (1 - lam_mix) y[pi]

  alpha = 0 (no mixup in the original): lam_mix = 1 and pi = identity, so x, y come back unchanged (up to the dtype).
  The original draws lam from NumPy's global RNG and pi from torch's; here both come from `key`.

  Args:
    x: [B, ...] inputs (integers are mixed in float32; floating inputs keep their dtype).
    y: [B, C] labels (probability vectors).
    key: a jax.random key.
    alpha: Beta parameter >= 0 (ELR+: 1 on CIFAR, 1.5 on WebVision).

  Returns:
    (x_mix, y_mix, perm [B] int32, lam_mix float32 scalar); mix the targets with `mix_targets(rows, perm, lam_mix)`.
  """
  _checks.check_range("alpha", alpha, 0.0, np.inf)
  x = jnp.asarray(x)
  y = jnp.asarray(y)
  if x.ndim < 1 or y.ndim < 1 or x.shape[0] != y.shape[0]:
    raise ValueError(f"x {x.shape} and y {y.shape} need the same leading batch dimension.")
  batch = x.shape[0]
  key_lam, key_perm = jax.random.split(key)
  alpha = jnp.asarray(alpha, precision.float_dtype())
  on = alpha > 0
  safe_alpha = jnp.where(on, alpha, 1.0)
  draw = jax.random.beta(key_lam, safe_alpha, safe_alpha, dtype=precision.float_dtype())
  lam = jnp.where(on, jnp.maximum(draw, 1.0 - draw), 1.0)
  perm = jnp.where(on, jax.random.permutation(key_perm, batch), jnp.arange(batch)).astype(jnp.int32)
  return _mix(x, perm, lam), _mix(y, perm, lam), perm, lam


def mix_targets(target_rows, perm, lam) -> jax.Array:
  """ELR+'s mixed targets q_i = lam_mix t_i + (1 - lam_mix) t_pi(i) (elr_plus_loss.update_hist), [B, C]."""
  target_rows = jnp.asarray(target_rows)
  return _mix(target_rows, jnp.asarray(perm), jnp.asarray(lam, precision.float_dtype()))


def reweighted_labels(labels_mix, targets_mix) -> jax.Array:
  """ELR+'s CIFAR-100 label re-weighting: y_mix <- y_mix * q / sum_c(y_mix q)_c, [B, C] (constants: no gradient).

  The original divides without a guard (0 / 0 = NaN when q vanishes on the label's classes, e.g. an underflowed
  softmax); here the denominator is floored at the smallest normal float, which turns such a row into zeros.
  """
  labels_mix = jnp.asarray(labels_mix)
  compute = loss_parts.compute_dtype(labels_mix.dtype)
  labels_mix = labels_mix.astype(compute)
  q = jax.lax.stop_gradient(jnp.asarray(targets_mix).astype(compute))
  _checks.check_same_shape("targets_mix", q, "labels_mix", labels_mix)
  weighted = jax.lax.stop_gradient(labels_mix) * q
  return weighted / jnp.maximum(jnp.sum(weighted, axis=-1, keepdims=True), jnp.finfo(compute).tiny)


def elr_plus_loss(logits_mix, labels_mix, targets_mix, *, lam: float, coef, reweight_labels: bool = False) -> jax.Array:
  """ELR+'s per-example loss on the mixed batch (ELR_plus/model/loss.py, elr_plus_loss.forward):

    l_i = -sum_c y'_ic log softmax(z_mix,i)_c + coef * lam * log(1 - <q_i, clamp(p_mix,i, 1e-4, 1 - 1e-4)>)

  with q_i = `mix_targets` of the targets (constants), coef = `sigmoid_ramp(step, coef_step)` and y' = y_mix, or
  y' = `reweighted_labels(y_mix, q)` when `reweight_labels` (the original does that iff num_classes == 100, i.e.
  CIFAR-100 only). The original averages both terms over the batch: its loss is the batch mean of this value.

  Args:
    logits_mix: [..., C] the network's output on the mixed inputs.
    labels_mix: [..., C] the mixed labels.
    targets_mix: [..., C] the mixed targets q.
    lam: lambda >= 0 (CIFAR-10 sym 3, asym 1, CIFAR-100 7).
    coef: the ramp's value (>= 0; traceable).
    reweight_labels: the CIFAR-100 label re-weighting (default False; True reproduces the original on CIFAR-100).

  Returns:
    [...] per-example loss in the logits' dtype.
  """
  _checks.check_range("lam", lam, 0.0, np.inf)
  _checks.check_range("coef", coef, 0.0, np.inf)
  logits, labels, out_dtype = loss_parts.prepare(logits_mix, labels_mix)
  q = _rows_like("targets_mix", targets_mix, logits)
  if reweight_labels:
    labels = reweighted_labels(labels, q)
  soft_ce = -jnp.sum(labels * jax.nn.log_softmax(logits, axis=-1), axis=-1)
  weight = jnp.asarray(coef, logits.dtype) * jnp.asarray(lam, logits.dtype)
  return (soft_ce + weight * _log_one_minus_agreement(logits, q)).astype(out_dtype)


def method(*, lam: float = 3.0, beta: float = 0.7) -> method_lib.Method:
  """ELR as a method: the batch mean of CE(z_i, y_i) + lam log(1 - <t_i, p_i>), with t_i first updated by this step's
  clamped prediction, t_i <- beta t_i + (1 - beta) sg(p_i) / sum sg(p_i), as the original (t starts at 0), kept in
  the table's method rows. Defaults: CIFAR-10 symmetric (beta 0.7, lam 3); asymmetric and CIFAR-100 use beta 0.9
  with lam 1 and 7."""
  _checks.check_range("lam", lam, 0.0, np.inf)
  _checks.check_range("beta", beta, 0.0, 1.0)

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, rows, epoch, **unused):
    del epoch
    targets = updated_rows(rows["elr_targets"], jax.nn.softmax(logits), beta=beta)
    per_example = elr_loss(logits, soft_labels, targets, lam=lam)
    return method_lib.weighted_batch_mean(per_example, weights, valid, axis_name), {"elr_targets": targets}

  return method_lib.Method(
    name="elr",
    objective=objective,
    init_rows=lambda key, rows, classes: {"elr_targets": init_targets(rows, classes)},
    row_update=lambda rows, rows_out, grads: rows_out,
  )


SPEC = spec_lib.MethodSpec(
  name="elr",
  fields=("lam", "beta"),
  build=lambda method_config, context: method(**spec_lib.given(method_config, lam=float, beta=float)),
  tiny={"elr": {"method": {"name": "elr", "lam": 3.0, "beta": 0.7}}},
)
