"""PES's pure pieces: prediction-agreement selection, class weights, the class-weighted losses, PES-semi's batch split
and schedules, and the re-initialisation of a network's last modules.

Bai et al., "Understanding and Improving Early Stopping for Learning with Noisy Labels" (PES), NeurIPS 2021 (arXiv
2106.15853); original code tmllab/PES@5466238: PES_cs.py (PES alone), PES_semi.py (PES + MixMatch), PES_noisylabels.py
(PES-semi on CIFAR-N), common/tools.py, networks/ResNet.py. File:line references below are to that commit.

Selection (both scripts, every epoch after the progressive stages; PES_cs.py:82-102, PES_semi.py:167-195):

  p_i = (softmax(f(v1_i)) + softmax(f(v2_i))) / 2     eval mode, two random-crop + flip views  `mean_view_probabilities`
  confident_i = [argmax_c p_ic == y~_i]                 no threshold, no per-class quota          `agreement_selection`
  n_c = #{confident i : y~_i = c},  w_c = mean_{k: n_k > 0} n_k / n_c,  w_c = 0 where n_c = 0,
  PES-semi also w_c <- min(w_c, 3)                                                                `class_weights`

PES (PES_cs.py): the next epoch trains on the confident rows alone with PyTorch's CrossEntropyLoss(weight=w), whose
mean is  sum_i w_{y_i} CE_i / sum_i w_{y_i}  (`class_weighted_cross_entropy`, then `weight_normalised_mean`).
PES-semi (PES_semi.py): confident rows are MixMatch's labelled set (one-hot given labels), the others its unlabelled
set; the step is DivideMix's MixMatch with these differences (PES_semi.py:70-142 against noisy_jax.methods.dividemix):

  - one network: targets_u = sharpen(mean over the 2 views of its own softmax, T=0.5), train mode, no gradient
    (`dividemix.sharpen` of `mean_view_probabilities`; DivideMix co-guesses with both networks, `co_guess`);
  - targets_x = the one-hot given labels, no co-refinement and no sharpening (DivideMix: `refine_labels`);
  - Lx is class-weighted: Lx = sum_c w_c mean_i(-t_ic log p_ic) (`semi_labelled_loss`; DivideMix's is unweighted);
    Lu is DivideMix's, mean over rows and classes of (p - t)^2 (`dividemix.losses_x_u`, lu_reduction='mean');
  - no uniform-prior penalty (DivideMix adds `uniform_prior_penalty`);
  - labelled / unlabelled rows per step in proportion to the split, 128 in all (`semi_batch_sizes`; DivideMix:
    64 + 64), and int(50000 / 128) = 390 steps every epoch (`semi_steps_per_epoch`);
  - Beta(alpha, alpha) with alpha 4 until half the epochs, 0.75 after (`mixup_alpha`; DivideMix: 4 throughout);
  - the ramp of lambda_u starts at the first MixMatch epoch T1: `dividemix.linear_rampup(epoch + b / 390, T1, 16,
    lambda_u=...)` (PES_semi.py:64-66, 132; the same formula as DivideMix's with warm_up = T1).
  Unchanged: `dividemix.mixmatch` (one permutation of [x1, x2, u1, u2], lambda = max(l, 1 - l)).
  This module is in core and may not import noisy_jax.methods: the method module composes both (tests/test_pes.py
  checks the composition against the original's step).

Progressive stages (networks/ResNet.py:168-185 `renew_layers`): `renewed_modules` names the top-level modules of
noisy_jax's ResNets that a renewal replaces; the trainer re-initialises and trains them alone (spec.Stage.renew and
trainable, noisy_jax.methods.pes). The schedule itself, stage by stage: docs/pes_schedule.md.

Where the original differs from the evident method, and what is the default here:
- After `renew_layers` the main SGD still holds the old parameter objects (PES_cs.py:165, PES_semi.py:258), so the
  re-initialised modules are never stepped again, though the scripts set requires_grad=True on every parameter
  again (PES_cs.py:122-123, PES_semi.py:213-214). Default: every parameter trains after the progressive stages; the
  code's behaviour is the method's option `code_freeze_renewed` (noisy_jax.methods.pes).
- An empty selection: the original's class weights are NaN (mean of nothing); here all zero. A batch whose weights
  sum to 0: PyTorch's weighted mean is 0/0; here 0. A split with unlabelled rows whose share of the 128 rounds to 0:
  the original's DataLoader(batch_size=0) raises; here at least one row (`semi_batch_sizes`, min_unlabelled).
- Ties in an argmax go to the first maximal class (jnp.argmax; torch.max(dim=1) leaves it unspecified).
The paper's own text was not available offline beyond its abstract and introduction: its formulas for the selection
and the weights are not checked here; everything above is the code's.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts
from noisy_jax.core import precision

# PES_semi.py / PES_noisylabels.py constants (argparse defaults unless said).
SHARPEN_TEMPERATURE = 0.5  # PES_semi.py:36 --T
MIXUP_ALPHA = 4.0  # PES_semi.py:35 --alpha
LATE_MIXUP_ALPHA = 0.75  # PES_semi.py:72-73: args.alpha = 0.75 once epoch >= num_epochs / 2
RAMPUP_LENGTH = 16  # PES_semi.py:64 linear_rampup(rampup_length=16)
SEMI_CLASS_WEIGHT_CLIP = 3.0  # PES_semi.py:192 cw[cw > 3] = 3 (PES_cs.py: no clip)
SEMI_EPOCH_EXAMPLES = 50_000  # PES_semi.py:81 num_iter = int(50000 / args.batch_size), whatever the data
HEAD = "head"  # the classifier of noisy_jax's ResNet, PreActResNet (the original's `linear`)


def _labels_as_ids(labels, num_rows: int) -> jax.Array:
  """[N] class ids from [N] ids or [N, C] probability rows (argmax)."""
  labels = jnp.asarray(labels)
  if labels.ndim == 2:
    labels = jnp.argmax(labels, axis=-1)
  if labels.shape != (num_rows,):
    raise ValueError(f"labels must be [N] class ids or [N, C] rows with N = {num_rows}, got shape {labels.shape}.")
  return labels.astype(jnp.int32)


# ---------------------------------------------------------------------------------------------------------------
# Selection and class weights.


def mean_view_probabilities(logits_views) -> jax.Array:
  """p = mean_v softmax(z_v): the original's prediction of the training set (common/tools.py:177-191
  `predict_softmax`: eval mode, two views, (softmax(z1) + softmax(z2)) / 2), and PES-semi's unlabelled guess before
  sharpening (PES_semi.py:101-104, train mode there).

  Args:
    logits_views: [V, N, C] logits of V views (the original: V = 2 random-crop + flip views of transform_train).

  Returns:
    [N, C] probabilities, in at least float32.
  """
  z = jnp.asarray(logits_views)
  if z.ndim != 3:
    raise ValueError(f"logits_views must be [V, N, C], got shape {z.shape}.")
  z = z.astype(loss_parts.compute_dtype(z.dtype))
  return jnp.mean(jax.nn.softmax(z, axis=-1), axis=0)


def agreement_selection(probs, labels, *, where=None) -> jax.Array:
  """The confident rows: the prediction agrees with the given label, argmax_c p_ic == y~_i; bool [N].

  PES_cs.py:67-79 and PES_semi.py:145-164 `splite_confident` (`torch.max(outs, 1)` then `preds[i] ==
  noisy_targets[i]`); the complement is PES-semi's unlabelled set. No confidence threshold, no per-class quota or
  balance: imbalance is handled by `class_weights`. Ties go to the first maximal class.

  Args:
    probs: [N, C] predictions (`mean_view_probabilities`; logits give the same argmax).
    labels: [N] given class ids, or [N, C] label-table rows (their argmax).
    where: optional [N] mask of the rows that exist (padding rows are never selected).

  Returns:
    [N] bool.
  """
  probs = jnp.asarray(probs)
  if probs.ndim != 2:
    raise ValueError(f"probs must be [N, C], got shape {probs.shape}.")
  agree = jnp.argmax(probs, axis=-1).astype(jnp.int32) == _labels_as_ids(labels, probs.shape[0])
  if where is not None:
    where = jnp.asarray(where).astype(bool)
    _checks.check_same_shape("where", where, "probs[:, 0]", probs[:, 0])
    agree = agree & where
  return agree


def class_counts(labels, selected, *, num_classes: int) -> jax.Array:
  """n_c = #{i : selected_i and y~_i = c}, int32 [C] (PES_cs.py:91-93, PES_semi.py:183-185)."""
  labels = jnp.asarray(labels)
  n = labels.shape[0]
  if _checks.is_concrete(labels) and labels.ndim == 1:
    _checks.check_labels("labels", labels, num_classes)
  ids = _labels_as_ids(labels, n)
  selected = jnp.asarray(selected).astype(jnp.int32)
  _checks.check_same_shape("selected", selected, "labels", ids)
  return jnp.zeros((num_classes,), jnp.int32).at[ids].add(selected)


def class_weights(labels, selected, *, num_classes: int, max_weight: float | None = None) -> jax.Array:
  """Inverse-frequency class weights of the selected rows (PES_cs.py:91-99; PES_semi.py:183-193 adds the clip):

    w_c = mean_{k : n_k > 0} n_k / n_c   where n_c > 0,   0 where n_c = 0,   then w_c <- min(w_c, max_weight)

  n_c from `class_counts`. PES-semi and PES_noisylabels clip at 3 (`SEMI_CLASS_WEIGHT_CLIP`), PES_cs does not
  (max_weight None). A class with mean-many rows has weight 1; w_c n_c is the same for every present class.
  With nothing selected every weight is 0 (the original: NaN).

  Args:
    labels: [N] given class ids (or [N, C] rows, their argmax).
    selected: [N] bool, `agreement_selection`.
    num_classes: C.
    max_weight: None or the clip (> 0).

  Returns:
    [C] weights in the run's float dtype (float32, float64 under x64; the original computes in float64 NumPy and
    hands a float32 tensor to the loss).
  """
  if max_weight is not None:
    _checks.check_range("max_weight", max_weight, 0.0, np.inf, low_open=True)
  counts = class_counts(labels, selected, num_classes=num_classes)
  dtype = precision.float_dtype()
  n = counts.astype(dtype)
  present = counts > 0
  mean = jnp.sum(n) / jnp.maximum(jnp.sum(present).astype(dtype), 1.0)
  w = jnp.where(present, mean / jnp.where(present, n, 1.0), 0.0)
  return w if max_weight is None else jnp.minimum(w, jnp.asarray(max_weight, dtype))


# ---------------------------------------------------------------------------------------------------------------
# Losses.


def class_weighted_cross_entropy(logits, labels, *, class_weights) -> jax.Array:
  """Class-weighted cross entropy, per example: l = -sum_c w_c y_c log softmax(z)_c (= w_y CE for one-hot y).

  PES (PES_cs.py:99-101): nn.CrossEntropyLoss(weight=w) on the confident rows, reduced by
  `weight_normalised_mean`. PES-semi (PES_semi.py:127-128): the mixed labelled rows, reduced by a plain mean
  (`semi_labelled_loss`). With w = 1 it is noisy_jax.core.losses.cross_entropy. Finite value and gradient for logits
  up to +-1e4 (log_softmax); the weights are constants (no gradient is meant to reach them).

  Args:
    logits: [..., C].
    labels: [..., C] probability vectors (one-hot given labels, or MixMatch's mixed targets).
    class_weights: [C] non-negative (`class_weights`).

  Returns:
    [...] per-example loss in the logits' dtype.
  """
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  w = jnp.asarray(class_weights).astype(logits.dtype)
  if w.shape != logits.shape[-1:]:
    raise ValueError(f"class_weights must be [C] = [{logits.shape[-1]}], got shape {w.shape}.")
  log_p = jax.nn.log_softmax(logits, axis=-1)
  return (-jnp.sum(labels * w * log_p, axis=-1)).astype(out_dtype)


def _sum(x: jax.Array, axis_name) -> jax.Array:
  total = jnp.sum(x)
  return total if axis_name is None else jax.lax.psum(total, axis_name)


def weight_normalised_mean(per_example, labels, *, class_weights, where=None, axis_name=None) -> jax.Array:
  """PyTorch's weighted 'mean' reduction (CrossEntropyLoss(weight=w) with class ids, PES_cs.py:101):

    L = sum_i l_i / sum_i w_{y_i},    w_{y_i} = sum_c y_ic w_c

  l_i from `class_weighted_cross_entropy` (already weighted). 0 where the weights of the rows sum to 0 (PyTorch: 0/0).

  Args:
    per_example: [B] weighted per-example losses.
    labels: [B, C] the rows' labels (one-hot in PES).
    class_weights: [C].
    where: optional [B] mask of the rows that count (padding).
    axis_name: when given, both sums are over the global batch across this named axis (psum).

  Returns:
    Scalar, in at least float32.
  """
  loss = jnp.asarray(per_example)
  loss = loss.astype(loss_parts.compute_dtype(loss.dtype))
  labels = jnp.asarray(labels).astype(loss.dtype)
  if loss.ndim != 1 or labels.shape[:1] != loss.shape:
    raise ValueError(f"per_example must be [B] and labels [B, C]; got {loss.shape} and {labels.shape}.")
  row_w = labels @ jnp.asarray(class_weights).astype(loss.dtype)
  valid = jnp.ones_like(loss) if where is None else jnp.asarray(where).astype(loss.dtype)
  _checks.check_same_shape("where", valid, "per_example", loss)
  num, den = _sum(valid * loss, axis_name), _sum(valid * row_w, axis_name)
  return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), 0.0)


def semi_labelled_loss(logits_x, mixed_target_x, *, class_weights, axis_name=None) -> jax.Array:
  """PES-semi's Lx on the 2B mixed labelled rows (PES_semi.py:127-128):

    Lx = sum_c w_c mean_i(-t_ic log softmax(z_i)_c) = mean_i `class_weighted_cross_entropy`_i

  (DivideMix's Lx, `dividemix.losses_x_u`, with w = 1.) A plain mean over the rows, not weight-normalised.

  Args:
    logits_x: [2B, C]; mixed_target_x: [2B, C] (`dividemix.mixmatch`'s first 2B rows).
    class_weights: [C] (`class_weights` with max_weight=3).
    axis_name: when given, the mean is over the global batch across this named axis.

  Returns:
    Scalar, in at least float32.
  """
  per_row = class_weighted_cross_entropy(logits_x, mixed_target_x, class_weights=class_weights)
  per_row = per_row.astype(loss_parts.compute_dtype(per_row.dtype))
  count = jnp.asarray(per_row.size, per_row.dtype)
  return _sum(per_row, axis_name) / jnp.maximum(_sum(count, axis_name), 1.0)


# ---------------------------------------------------------------------------------------------------------------
# PES-semi's batch split and schedules (host-side integers; `mixup_alpha` may be traced).


def semi_batch_sizes(num_confident: int, num_unconfident: int, batch_size: int, *, min_unlabelled: int = 1):
  """(labelled rows, unlabelled rows) of one MixMatch step, B in all (PES_semi.py:176-177):

    B_u = B / 2 (int)                    where n_u > n_c
    B_u = int(n_u / (n_c + n_u) * B)     otherwise          (Python float arithmetic, as the original)
    B_x = B - B_u

  Each is a drop_last loader cycled for `semi_steps_per_epoch` steps (PES_semi.py:82-93). Where n_u > 0 but B_u
  rounds to 0 the original's DataLoader(batch_size=0) raises; here B_u = max(B_u, min_unlabelled) (0 gives the
  formula). With n_u = 0, B_u = 0: the step has no unlabelled rows (the original raises there too).

  Raises:
    ValueError: no confident row (n_c = 0: no labelled set; the original's RandomSampler of an empty set raises).
  """
  n_c, n_u, b = int(num_confident), int(num_unconfident), int(batch_size)
  if n_c <= 0 or n_u < 0 or b < 2:
    raise ValueError(f"need num_confident > 0, num_unconfident >= 0, batch_size >= 2; got {n_c}, {n_u}, {b}.")
  b_u = int(b / 2) if n_u > n_c else int(n_u / (n_c + n_u) * b)
  if n_u > 0:
    b_u = max(b_u, int(min_unlabelled))
  return b - b_u, b_u


def semi_steps_per_epoch(batch_size: int, num_examples: int = SEMI_EPOCH_EXAMPLES) -> int:
  """MixMatch steps per epoch, int(num_examples / B) (PES_semi.py:81 hard-codes 50,000, CIFAR's training set: 390 at
  B = 128; pass the run's N for other data). The ramp's clock is epoch + batch_index / this (PES_semi.py:132)."""
  return int(int(num_examples) / int(batch_size))


def mixup_alpha(epoch, num_epochs: int, *, alpha: float = MIXUP_ALPHA, late_alpha: float | None = LATE_MIXUP_ALPHA):
  """Beta(alpha, alpha)'s parameter at `epoch` (0-based): alpha before num_epochs / 2, late_alpha from then on
  (PES_semi.py:72-73 sets args.alpha = 0.75 once epoch >= num_epochs / 2, for good). late_alpha None: alpha always.

  Returns:
    a float scalar array (epoch may be traced).
  """
  dtype = precision.float_dtype()
  if late_alpha is None:
    return jnp.asarray(alpha, dtype)
  return jnp.where(jnp.asarray(epoch) >= num_epochs / 2, jnp.asarray(late_alpha, dtype), jnp.asarray(alpha, dtype))


# ---------------------------------------------------------------------------------------------------------------
# Progressive stages: which modules are re-initialised and trained.


def renewed_modules(num_layers: int, blocks_per_stage: Sequence[int], *, head: str = HEAD) -> tuple[str, ...]:
  """The top-level modules of a noisy_jax ResNet / PreActResNet that the original's `renew_layers(num_layers)`
  re-initialises (networks/ResNet.py:168-185): the last `num_layers` stages of blocks ('stage{s}_block{b}', the
  original's layer{s}) and always the classifier ('head', the original's `linear`). The stem and stage 1 never.

    num_layers 0: head                  (PES_cs.py:177 T3 stage; PES_semi.py:270 and PES_noisylabels.py:305)
    num_layers 1: stage 4 + head        (PES_cs.py:176 T2 stage)
    num_layers 2, 3: stages 3-4, 2-4 + head (not used by the CIFAR scripts)

  noisy_jax's PreActResNet has a 'final_bn' before its pool that the original's PreActResNet18 lacks (and lacks the
  original's stem BatchNorm): it is never named here.

  Args:
    num_layers: 0 .. S - 1 for S stages (the original: 0 .. 3 with S = 4).
    blocks_per_stage: the model's (ResNet-18 and PreActResNet-18: (2, 2, 2, 2); ResNet-34: (3, 4, 6, 3)).
    head: the classifier's name.

  Returns:
    Module names, stages in order, then the head.
  """
  stages = len(blocks_per_stage)
  if not 0 <= int(num_layers) <= stages - 1:
    raise ValueError(f"num_layers={num_layers!r} must be in [0, {stages - 1}] for {stages} stages.")
  names = [
    f"stage{s}_block{b}"
    for s in range(stages - int(num_layers) + 1, stages + 1)
    for b in range(1, int(blocks_per_stage[s - 1]) + 1)
  ]
  return (*names, head)
