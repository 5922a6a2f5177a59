"""DivideMix building blocks (Li, Socher & Hoi, ICLR 2020, arXiv 2002.07394): pure functions, no training loop.

What the original code (LiJunnan1992/DivideMix, Train_cifar.py; shared REFERENCE.md section 8) does, and where each
piece lives here:

  epoch boundary, per network (eval mode, no augmentation):
    l_i = CE(z_i, y_i)                                  (noisy_jax.core.losses.cross_entropy, by the caller)
    l <- (l - min l) / (max l - min l)                  `normalize_losses`
    at 90% noise: l <- mean of the last 5 epochs' l     `average_loss_history`
    two-component 1-D GMM on l, w_i = posterior of      `gmm.fit_two_component_gmm` (sklearn GaussianMixture(
      the component with the smaller mean                 n_components=2, max_iter=10, tol=1e-2, reg_covar=5e-4))
    labelled = w > p_threshold, else unlabelled         `split`
    co-divide: net 1 trains on net 2's split and w, and vice versa (the trainer's business).
  each step (net being trained: own; the other in eval mode), B labelled and B' unlabelled rows, 2 views each:
    targets_x = sharpen(w y + (1-w) mean_v p_own(x_v))  `refine_labels`
    targets_u = sharpen(mean over both nets and views)  `co_guess`
    MixUp of [x1, x2, u1, u2], one permutation,         `mixmatch` (`mix_coefficients` draws lambda, permutation)
      lambda ~ Beta(a, a), lambda = max(lambda, 1 - lambda)
    Lx = soft CE, Lu = squared error                    `losses_x_u`
    L = Lx + lambda_u ramp(t) Lu + penalty              `linear_rampup`, `uniform_prior_penalty`
  warm-up (CE on all data; asymmetric noise, Clothing1M: + negative entropy)   `negative_entropy`
  per-setting lambda_u and p_threshold                  `SETTINGS`, `setting`

All functions are jit-able (the GMM of noisy_jax.core.gmm too: a `lax.while_loop` EM), take no hidden state and
compute in at least float32. Targets (`refine_labels`, `co_guess`) carry `stop_gradient`, as the original computes
them under no_grad.

Where this module differs from the original code, on purpose (each is also said where it happens):
- GMM initialisation and precision: see noisy_jax.core.gmm (`fit_two_component_gmm`).
- `normalize_losses` of a constant vector: the original divides 0 by 0 (NaN everywhere); here every loss is 0.
- `negative_entropy`: the original's `probs.log() * probs` is NaN once a probability underflows to 0; here p log p is
  computed from log_softmax and is 0 there. Same value otherwise.
- `losses_x_u`: the unlabelled loss is, as the code has it, the mean over B'*C of (p - target)^2 (default,
  `lu_reduction='mean'`); the paper's Lu is the squared L2 norm averaged over rows [recalled in REFERENCE], C times
  larger (`lu_reduction='squared_l2'`). The default is the code's, against the house rule "paper by default",
  because the paper's lambda_u values (`SETTINGS`) were tuned with, and the paper's numbers produced by, the code's
  normalisation (as MixMatch, Berthelot et al. 2019, writes Lu with 1/(C |U'|)); with 'squared_l2' divide lambda_u
  by C to train the same.
- Mixing coefficient and permutation come from a JAX key (`mix_coefficients`); the original draws lambda from the
  unseeded global `np.random.beta` and the permutation from torch's seeded generator.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import losses
from noisy_jax.core import precision
from noisy_jax.train import method as method_lib

# Epochs of normalised losses averaged at 90% noise (Train_cifar.py: history[-5:].mean(0) when args.r == 0.9).
LOSS_HISTORY_WINDOW = 5
SHARPEN_TEMPERATURE = 0.5
MIXUP_ALPHA = 4.0  # CIFAR; Clothing1M and WebVision use 0.5.
RAMPUP_LENGTH = 16
LU_REDUCTIONS = ("mean", "squared_l2")


def _float(x) -> jax.Array:
  x = jnp.asarray(x)
  return x.astype(jnp.promote_types(x.dtype, jnp.float32))


# ---------------------------------------------------------------------------------------------------------------
# Epoch boundary: per-example losses -> clean probability.


def normalize_losses(losses_per_example) -> jax.Array:
  """Min-max normalisation l' = (l - min l) / (max l - min l), as the original's eval_train.

  A constant vector (max = min) maps to zeros; the original returns NaNs there (0/0).

  Args:
    losses_per_example: [N] per-example losses of the whole training set.

  Returns:
    [N] values in [0, 1], in at least float32.
  """
  x = _float(losses_per_example)
  low, high = jnp.min(x), jnp.max(x)
  spread = high - low
  return jnp.where(spread > 0, (x - low) / jnp.where(spread > 0, spread, 1.0), jnp.zeros_like(x))


def average_loss_history(history, *, window: int = LOSS_HISTORY_WINDOW, filled=None) -> jax.Array:
  """Mean of the last `window` epochs of normalised losses (the original at 90% noise: history[-5:].mean(0)).

  The original appends each epoch's normalised losses to a list (from the first epoch after warm-up on) and, only
  when the noise rate is 0.9, fits the GMM to the mean of the last 5 entries (fewer while fewer exist). The mean is
  not normalised again. `window=1` gives the current losses, i.e. the original's other settings.

  Args:
    history: [E, N], oldest epoch first (the original's list, stacked).
    window: how many of the most recent epochs to average (>= 1).
    filled: optional [E] bool, for a ring buffer of E == window slots written in any order: the mean is over the
      filled slots (the order of the slots does not matter for a mean). With no slot filled the result is 0.

  Returns:
    [N] mean losses, in at least float32.
  """
  history = _float(history)
  if history.ndim != 2:
    raise ValueError(f"history must be [E, N], got shape {history.shape}.")
  if int(window) < 1:
    raise ValueError(f"window={window!r} must be >= 1.")
  if filled is None:
    return jnp.mean(history[-int(window) :], axis=0)
  if history.shape[0] != int(window):
    raise ValueError(f"with `filled`, history must be a ring of window={window} slots, got {history.shape[0]}.")
  filled = jnp.asarray(filled).astype(history.dtype)
  _checks.check_same_shape("filled", filled, "history[:, 0]", history[:, 0])
  return jnp.einsum("e,en->n", filled, history) / jnp.maximum(jnp.sum(filled), 1.0)


def split(clean_prob, *, p_threshold: float) -> jax.Array:
  """The labelled set: clean_prob > p_threshold (strict, as the original's `prob > args.p_threshold`); [N] bool."""
  _checks.check_range("p_threshold", p_threshold, 0.0, 1.0)
  return jnp.asarray(clean_prob) > p_threshold


# ---------------------------------------------------------------------------------------------------------------
# Each step: targets, MixMatch, losses.


def sharpen(p, *, T: float = SHARPEN_TEMPERATURE) -> jax.Array:
  """Temperature sharpening (MixMatch): sharpen(p)_c = p_c^(1/T) / sum_k p_k^(1/T).

  Computed as (p / max_k p_k)^(1/T), normalised: the same value, with the largest entry 1 so that a small T cannot
  underflow every entry of a row.

  Args:
    p: [..., C] probability vectors (non-negative, not all zero).
    T: temperature > 0 (DivideMix: 0.5).

  Returns:
    [..., C] probability vectors, in at least float32.
  """
  _checks.check_range("T", T, 0.0, np.inf, low_open=True)
  p = _float(p)
  scaled = p / jnp.maximum(jnp.max(p, axis=-1, keepdims=True), jnp.finfo(p.dtype).tiny)
  powered = jnp.power(scaled, 1.0 / jnp.asarray(T, p.dtype))
  return powered / jnp.sum(powered, axis=-1, keepdims=True)


def refine_labels(y_onehot, w, p_views_mean, *, T: float = SHARPEN_TEMPERATURE) -> jax.Array:
  """Label co-refinement of the labelled rows: sharpen(w y + (1 - w) p), with stop_gradient.

  p is the mean of the trained network's own softmax over the two augmented views, (p(x1) + p(x2)) / 2; w is the
  clean probability from the *other* network's GMM (co-divide). Li et al., ICLR 2020, section 3.2 (label co-refinement);
  Train_cifar.py: px = w_x*labels_x + (1-w_x)*px; ptx = px**(1/T); targets_x = ptx / ptx.sum(1).

  Args:
    y_onehot: [B, C] the (noisy) labels, one-hot.
    w: [B] (or [B, 1]) clean probabilities in [0, 1].
    p_views_mean: [B, C] mean softmax of the two views.
    T: sharpening temperature.

  Returns:
    [B, C] targets (no gradient).
  """
  y_onehot, p_views_mean = _float(y_onehot), _float(p_views_mean)
  _checks.check_same_shape("y_onehot", y_onehot, "p_views_mean", p_views_mean)
  w = _float(w).reshape(-1, 1)
  if w.shape[0] != y_onehot.shape[0]:
    raise ValueError(f"w has {w.shape[0]} rows but y_onehot has {y_onehot.shape[0]}; they must match.")
  mixed = w * y_onehot + (1.0 - w) * p_views_mean
  return jax.lax.stop_gradient(sharpen(mixed, T=T))


def co_guess(p_net1_views, p_net2_views, *, T: float = SHARPEN_TEMPERATURE) -> jax.Array:
  """Label co-guessing of the unlabelled rows: sharpen of the mean softmax of both networks over the views.

  Train_cifar.py: pu = (p11 + p12 + p21 + p22) / 4, then sharpened; Li et al., ICLR 2020, section 3.2.

  Args:
    p_net1_views: [V, B, C] softmax of the trained network for each of V views (the original: V = 2).
    p_net2_views: [V, B, C] softmax of the other network (eval mode in the original) on the same views.
    T: sharpening temperature.

  Returns:
    [B, C] targets (no gradient).
  """
  p1, p2 = _float(p_net1_views), _float(p_net2_views)
  _checks.check_same_shape("p_net1_views", p1, "p_net2_views", p2)
  if p1.ndim != 3:
    raise ValueError(f"p_net1_views must be [V, B, C], got shape {p1.shape}.")
  mean = 0.5 * (jnp.mean(p1, axis=0) + jnp.mean(p2, axis=0))
  return jax.lax.stop_gradient(sharpen(mean, T=T))


def mix_coefficients(key, n: int, *, alpha: float = MIXUP_ALPHA) -> tuple[jax.Array, jax.Array]:
  """The random draws of one MixMatch step: lambda ~ Beta(alpha, alpha), lambda = max(lambda, 1 - lambda), and a
  permutation of the n rows. key -> (split: beta from the first, permutation from the second).

  Returns:
    (lambda, a float32 scalar in [0.5, 1]; permutation, [n] int32).
  """
  _checks.check_range("alpha", alpha, 0.0, np.inf, low_open=True)
  key_beta, key_perm = jax.random.split(key)
  lam = jax.random.beta(key_beta, alpha, alpha, dtype=precision.float_dtype())
  lam = jnp.maximum(lam, 1.0 - lam)
  return lam, jax.random.permutation(key_perm, n)


def mixmatch(
  inputs_x1, inputs_x2, inputs_u1, inputs_u2, targets_x, targets_u, key, *, alpha: float = MIXUP_ALPHA
) -> tuple[jax.Array, jax.Array]:
  """MixUp of the concatenated batch [x1, x2, u1, u2] with one permutation, as DivideMix's code does.

    all = [x1, x2, u1, u2], targets = [tx, tx, tu, tu]       ([2B + 2B', ...])
    lambda, perm = `mix_coefficients(key, 2B + 2B', alpha=alpha)`
    mixed = lambda all + (1 - lambda) all[perm], mixed_targets = lambda targets + (1 - lambda) targets[perm]

  Rows [:2B] are the mixed labelled rows (their partner may be unlabelled, and vice versa), [2B:] the unlabelled.
  Clothing1M and WebVision's code keeps only the first 2B rows (slice the result). Li et al., ICLR 2020, section 3.2;
  Berthelot et al., MixMatch, NeurIPS 2019.

  Args:
    inputs_x1, inputs_x2: [B, ...] two augmented views of the labelled rows (floating point, e.g. normalised images).
    inputs_u1, inputs_u2: [B', ...] two views of the unlabelled rows (B' may differ from B).
    targets_x: [B, C] (`refine_labels`); targets_u: [B', C] (`co_guess`).
    key: a jax.random key.
    alpha: Beta parameter (CIFAR 4, Clothing1M/WebVision 0.5).

  Returns:
    (mixed inputs [2B + 2B', ...] in the inputs' dtype, mixed targets [2B + 2B', C]).
  """
  inputs = jnp.concatenate(
    [jnp.asarray(inputs_x1), jnp.asarray(inputs_x2), jnp.asarray(inputs_u1), jnp.asarray(inputs_u2)], axis=0
  )
  if not jnp.issubdtype(inputs.dtype, jnp.floating):
    raise ValueError(f"inputs must be floating point (normalised), got dtype {inputs.dtype}.")
  targets_x, targets_u = _float(targets_x), _float(targets_u)
  if targets_x.shape[0] != jnp.shape(inputs_x1)[0] or targets_u.shape[0] != jnp.shape(inputs_u1)[0]:
    raise ValueError("targets_x / targets_u must have as many rows as inputs_x1 / inputs_u1.")
  targets = jnp.concatenate([targets_x, targets_x, targets_u, targets_u], axis=0)
  lam, perm = mix_coefficients(key, inputs.shape[0], alpha=alpha)
  lam_in = lam.astype(inputs.dtype)
  mixed_inputs = lam_in * inputs + (1 - lam_in) * inputs[perm]
  lam_t = lam.astype(targets.dtype)
  mixed_targets = lam_t * targets + (1 - lam_t) * targets[perm]
  return mixed_inputs, mixed_targets


def _global_mean(per_row: jax.Array, axis_name) -> jax.Array:
  total = jnp.sum(per_row)
  count = jnp.asarray(per_row.size, per_row.dtype)
  if axis_name is not None:
    total, count = jax.lax.psum(total, axis_name), jax.lax.psum(count, axis_name)
  return total / jnp.maximum(count, 1.0)


def losses_x_u(
  logits_x, mixed_target_x, logits_u, mixed_target_u, *, lu_reduction: str = "mean", axis_name=None
) -> tuple[jax.Array, jax.Array]:
  """DivideMix's two batch losses on the mixed rows (Train_cifar.py, SemiLoss).

    Lx = mean_i -sum_c t_ic log softmax(z_i)_c                               (soft cross entropy, labelled rows)
    Lu = mean_i mean_c (softmax(z_i)_c - t_ic)^2      lu_reduction='mean'      (the code, default)
    Lu = mean_i sum_c (softmax(z_i)_c - t_ic)^2       lu_reduction='squared_l2' (the paper [recalled]; C times larger)

  See the module docstring for why the code's reduction is the default. Gradients flow through the logits only
  (the targets are stop-gradient'ed where they are made).

  Args:
    logits_x: [2B, C] logits of the mixed labelled rows; mixed_target_x: [2B, C].
    logits_u: [2B', C] logits of the mixed unlabelled rows; mixed_target_u: [2B', C].
    lu_reduction: 'mean' or 'squared_l2'.
    axis_name: when given, the means are over the global batch across this named axis (psum of sums and counts).

  Returns:
    (Lx, Lu), float32 (or wider) scalars.
  """
  _checks.check_choice("lu_reduction", lu_reduction, LU_REDUCTIONS)
  logits_x, logits_u = _float(logits_x), _float(logits_u)
  lx = _global_mean(losses.cross_entropy(logits_x, _float(mixed_target_x)), axis_name)
  mixed_target_u = _float(mixed_target_u)
  _checks.check_same_shape("logits_u", logits_u, "mixed_target_u", mixed_target_u)
  squared = jnp.square(jax.nn.softmax(logits_u, axis=-1) - mixed_target_u)
  per_row = jnp.mean(squared, axis=-1) if lu_reduction == "mean" else jnp.sum(squared, axis=-1)
  return lx, _global_mean(per_row, axis_name)


def fractional_epoch(epoch, batch_index, num_labelled: int, batch_size: int):
  """The original's ramp-up clock: epoch + batch_index / num_iter, num_iter = num_labelled // batch_size + 1.

  (num_iter is one more than the number of batches when num_labelled is a multiple of batch_size, as written.)
  """
  return epoch + batch_index / (num_labelled // batch_size + 1)


def linear_rampup(current, warm_up, rampup_length: float = RAMPUP_LENGTH, *, lambda_u) -> jax.Array:
  """The weight of Lu: lambda_u * clip((current - warm_up) / rampup_length, 0, 1).

  current = epoch + batch_index / num_iter (`fractional_epoch`), epochs counted from 0 with the warm-up epochs
  0..warm_up-1 (CIFAR-10: 10, CIFAR-100: 30, Clothing1M and WebVision: 1). Train_cifar.py, linear_rampup.

  Args:
    current: the fractional epoch (scalar, may be traced).
    warm_up: the number of warm-up epochs.
    rampup_length: epochs to reach lambda_u (16 in the code, > 0).
    lambda_u: the full weight (`SETTINGS`).

  Returns:
    float32 scalar.
  """
  _checks.check_range("rampup_length", rampup_length, 0.0, np.inf, low_open=True)
  _checks.check_range("lambda_u", lambda_u, 0.0, np.inf)
  dtype = precision.float_dtype()
  ramp = jnp.clip((jnp.asarray(current, dtype) - warm_up) / rampup_length, 0.0, 1.0)
  return jnp.asarray(lambda_u, dtype) * ramp


def uniform_prior_penalty(logits_mixed, *, axis_name=None, where=None) -> jax.Array:
  """The regulariser sum_c (1/C) log((1/C) / mean_i p_ic) = KL(uniform || mean softmax) over the whole mixed batch
  (labelled and unlabelled rows together), weight 1 in the original (Li et al., ICLR 2020, section 3.2;
  Train_cifar.py: penalty = sum(prior * log(prior / pred_mean))).

  Exactly `noisy_jax.core.losses.prior_penalty` with a uniform prior (log-mean-exp of log_softmax: finite when a class's
  mean probability vanishes, where the original's log(prior / 0) is inf).

  Args:
    logits_mixed: [N, C] (or [..., C]) logits of the mixed batch.
    axis_name: when given, the mean softmax is over the global batch across this named axis.
    where: optional [...] mask of the rows that count.

  Returns:
    Scalar, in the logits' dtype.
  """
  num_classes = jnp.shape(logits_mixed)[-1]
  prior = jnp.full((num_classes,), 1.0 / num_classes, precision.float_dtype())
  return losses.prior_penalty(logits_mixed, prior, axis_name=axis_name, where=where)


def negative_entropy(logits, *, axis_name=None, where=None) -> jax.Array:
  """The warm-up confidence penalty mean_i sum_c p_ic log p_ic = -mean_i H(p_i) (added to CE for asymmetric noise
  on CIFAR and for Clothing1M; Train_cifar.py NegEntropy; Li et al., ICLR 2020, section 3, after Pereyra et al.
  2017). Computed from log_softmax: 0 log 0 = 0 (the original's probs.log() * probs is NaN there).

  Args:
    logits: [..., C].
    axis_name: when given, the mean is over the global batch across this named axis (psum of sums and counts).
    where: optional [...] mask (nonzero = row counts), e.g. padding rows of the last batch.

  Returns:
    Scalar (<= 0), float32 or wider.
  """
  entropy = losses.entropy(_float(logits))
  valid = jnp.ones(entropy.shape, bool) if where is None else jnp.asarray(where) != 0
  _checks.check_same_shape("where", valid, "logits[..., 0]", entropy)
  total = jnp.sum(jnp.where(valid, -entropy, 0.0))
  count = jnp.sum(valid.astype(entropy.dtype))
  if axis_name is not None:
    total, count = jax.lax.psum(total, axis_name), jax.lax.psum(count, axis_name)
  return total / jnp.maximum(count, 1.0)


def pair_warmup_objective(*, penalty: bool, clamp_logits: bool = False):
  """The warm-up objective of two networks trained side by side (DivideMix's and ProMix's warm-up epochs), as an
  extended objective (noisy_jax.train.method): sum over the pair m of CE(logits[m], soft labels), each the mean over
  the global batch's valid rows, plus `negative_entropy(logits[m])` with `penalty` (the confidence penalty of the
  asymmetric-noise rows). Per-example weights are ignored: the warm-up trains on every given label.

  Args:
    penalty: add the confidence penalty.
    clamp_logits: penalise max(logits, 1e-12) instead of the logits (ProMix's original, `penalty_clamps_logits`).

  Returns:
    objective(logits [2, B, C], soft_labels [B, C], weights, valid [B], axis_name, *, rows, epoch) -> (loss, rows).
  """

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, rows, epoch, **unused):
    del weights, epoch
    loss = 0.0
    for m in range(2):
      loss = loss + method_lib.weighted_batch_mean(
        losses.cross_entropy(logits[m], soft_labels), jnp.ones_like(valid, logits.dtype), valid, axis_name
      )
      if penalty:
        penalised = jnp.maximum(logits[m], 1e-12) if clamp_logits else logits[m]
        loss = loss + negative_entropy(penalised, axis_name=axis_name, where=valid)
    return loss, rows

  return objective


# ---------------------------------------------------------------------------------------------------------------
# Per-setting hyper-parameters.


@dataclasses.dataclass(frozen=True)
class Setting:
  """lambda_u and p_threshold of one DivideMix setting, with where each value comes from.

  source: 'paper' (App. Table 7, partly confirmed in the repository's issues #10, #15, #50), 'code' (the training
    script's defaults, for Clothing1M and WebVision).
  marks: {field: mark} for values REFERENCE.md flags: 'recalled' (not read in a primary source; check before relying
    on it) or '3rd party' (reported by others, not by the authors).
  """

  lambda_u: float
  p_threshold: float
  source: str = "paper"
  marks: tuple[tuple[str, str], ...] = ()

  @property
  def unverified(self) -> dict[str, str]:
    return dict(self.marks)


# Keys: (dataset, the original's --noise_mode, rate). The original's 'sym' draws the new label from all C classes
# (noisy_jax.core.noise 'symmetric_include_true': realised flip rate r (C-1)/C); its 'asym' maps a random r of all
# examples through the class map (CIFAR-10 truck->automobile, bird->airplane, deer->horse, cat<->dog): per mapped
# class a flip rate of r, as noise 'asymmetric' with rate r, but about r/2 of all labels. Real noise: ('real', None).
# The original code's defaults (lambda_u 25, p_threshold 0.5) do not match several of these (issues #9, #17, #26).
SETTINGS: dict[tuple[str, str, float | None], Setting] = {
  ("cifar10", "sym", 0.2): Setting(lambda_u=0.0, p_threshold=0.5),
  ("cifar10", "sym", 0.5): Setting(lambda_u=25.0, p_threshold=0.5),
  ("cifar10", "sym", 0.8): Setting(lambda_u=25.0, p_threshold=0.5, marks=(("lambda_u", "recalled"),)),
  ("cifar10", "sym", 0.9): Setting(lambda_u=50.0, p_threshold=0.6, marks=(("lambda_u", "3rd party"),)),
  ("cifar10", "asym", 0.4): Setting(lambda_u=0.0, p_threshold=0.5),
  ("cifar100", "sym", 0.2): Setting(lambda_u=25.0, p_threshold=0.5),
  ("cifar100", "sym", 0.5): Setting(lambda_u=150.0, p_threshold=0.5),
  ("cifar100", "sym", 0.8): Setting(lambda_u=150.0, p_threshold=0.5),
  ("cifar100", "sym", 0.9): Setting(lambda_u=150.0, p_threshold=0.6),
  ("clothing1m", "real", None): Setting(lambda_u=0.0, p_threshold=0.5, source="code"),
  ("webvision", "real", None): Setting(lambda_u=0.0, p_threshold=0.5, source="code"),
}

# This codebase's noise types (noisy_jax.core.noise.NOISE_TYPES) -> the original's --noise_mode they correspond to.
# 'symmetric' (flips to the C-1 other classes only) is mapped to 'sym' too: realised rate r instead of r (C-1)/C.
NOISE_MODES = {
  "sym": "sym",
  "asym": "asym",
  "real": "real",
  "symmetric_include_true": "sym",
  "symmetric": "sym",
  "asymmetric": "asym",
}


def setting(dataset: str, noise: str, rate: float | None = None) -> Setting:
  """SETTINGS[(dataset, noise mode, rate)], accepting this codebase's noise-type names; ValueError listing the known
  settings otherwise."""
  _checks.check_choice("noise", noise, NOISE_MODES)
  key = (dataset.lower(), NOISE_MODES[noise], None if rate is None else round(float(rate), 6))
  if key not in SETTINGS:
    known = ", ".join(map(repr, SETTINGS))
    raise ValueError(f"No DivideMix setting for {key!r}; known: {known}.")
  return SETTINGS[key]
