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
original's GCELoss), lamd_ce 1 and lamd_h 1 (0.2 at 60% / 80% noise), plus the mixup loss of each view's purified
rows (`mixup_subset`, `mixup_loss`), each an extra forward pass of mixed images.

Padding rows (valid False) count in no set and no mean; over several devices the counts and sums are the global
batch's (psum over `axis_name`), B the global number of valid rows.

As a method (`method`, registry name 'disc'): one network trained on the weak and the strong view of each batch,
forwarded as one batch [weak; strong] (the original's torch.cat), with the state above in the label table's method
rows (ROWS; sharded with the table, saved in its checkpoints):

  disc_w_probs, disc_s_probs [N, C]   p_w, p_s as the last step that saw the example gave them (0 before any)
  disc_w_confidence, disc_s_confidence [N]   c_w, c_s (1/N at first)
  disc_clean, disc_hard, disc_purified [N] bool   C, H, M of the last division (none at first)
  disc_purified_labels [N] int32   the labels M trains with

Epochs 1 .. start_epoch (the original's 0-based `epoch < start_epoch`) train `warmup_loss`; later ones
`supervised_loss` plus the mixup loss of each view. Every epoch, warm-up included, ends with `divide` (the method's
table update). The mixup draws lam and its permutation from the step's key (view w from fold 0, s from fold 1) over
the purified rows of the global batch: with several devices the views, labels and mask are all-gathered, mixed once,
and each device forwards its own slice, so N devices train what one does. Each mixup pass normalises with the
statistics of its rows (noisy_jax.models.masked_batch_norm) and chains the BatchNorm running averages after the
step's own pass, as the original's three forwards do.

Differences from the original, named: (1) the mixup passes also run during the warm-up, on an empty mask (no rows, no
loss, running averages untouched): the same training, two more forwards per warm-up step; (2) a batch whose loss is
exactly 0 (no clean, hard or purified row after the warm-up) still takes an optimiser step with zero gradients
(weight decay and momentum act), where the original skips `optimizer.step()`; (3) BatchNorm's running variance is
flax's biased one (the whole package's difference from PyTorch).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import label_issues
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import loss_parts
from noisy_jax.core import precision
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import method as method_lib

GCE_Q = 0.7  # losses/loss_other.py GCELoss default, as DISC builds it
GCE_CLAMP = 1e-7  # GCELoss: torch.clamp(softmax, min=1e-7, max=1.0)
SIGMA = 0.5  # DISC.__init__: self.sigma
MAX_THRESHOLD = 0.99  # DISC.train: torch.min(ws_threshold, 0.99)
ROWS = (
  "disc_w_probs",
  "disc_s_probs",
  "disc_w_confidence",
  "disc_s_confidence",
  "disc_clean",
  "disc_hard",
  "disc_purified",
  "disc_purified_labels",
)


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
  return (
    jnp.zeros((size,), jnp.int32).at[subset].set(jnp.where(positions < count, subset[sigma], subset).astype(jnp.int32))
  )


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


def init_rows(num_rows: int, num_classes: int, num_examples: int) -> dict:
  """DISC's state before training (ROWS, module docstring) for a table of `num_rows` rows (N, or more with a sharded
  table's padding) of a training split of `num_examples`: zero predictions, thresholds 1/num_examples, empty sets,
  purified labels 0 (read only where an example is purified, and written there by each division)."""
  dtype = precision.float_dtype()
  # a new array per row (never one buffer twice: the trainer donates the table)
  probs = lambda: jnp.zeros((int(num_rows), int(num_classes)), dtype)
  confidence = lambda: jnp.full((int(num_rows),), 1.0 / int(num_examples), dtype)
  flags = lambda: jnp.zeros((int(num_rows),), bool)
  return {
    "disc_w_probs": probs(),
    "disc_s_probs": probs(),
    "disc_w_confidence": confidence(),
    "disc_s_confidence": confidence(),
    "disc_clean": flags(),
    "disc_hard": flags(),
    "disc_purified": flags(),
    "disc_purified_labels": jnp.zeros((int(num_rows),), jnp.int32),
  }


def table_update(table, *, sigma: float, momentum: float):
  """The epoch-end division (`divide`) of a label table's DISC rows against its given labels: the table with the
  new sets, purified labels and thresholds."""
  rows = table.method_rows
  division = divide(
    rows["disc_w_probs"],
    rows["disc_s_probs"],
    table.noisy_labels,
    rows["disc_w_confidence"],
    rows["disc_s_confidence"],
    rows["disc_purified_labels"],
    sigma=sigma,
    momentum=momentum,
  )
  new_rows = dict(rows)
  new_rows.update(
    disc_clean=division.clean,
    disc_hard=division.hard,
    disc_purified=division.purified,
    disc_purified_labels=division.purified_labels,
    disc_w_confidence=division.w_confidence.astype(rows["disc_w_confidence"].dtype),
    disc_s_confidence=division.s_confidence.astype(rows["disc_s_confidence"].dtype),
  )
  return label_table_lib.with_method_rows(table, new_rows)


def _gather(x, axis_name):
  return x if axis_name is None else jax.lax.all_gather(x, axis_name, tiled=True)


def mixup_pass(key, x, labels, mask, forward, axis_name, *, num_classes: int, alpha: float):
  """The mixup loss of the masked rows of one view (module docstring; ProMix's mixup of its selected rows too): mixed
  over the global batch's masked rows (`mixup_subset`), this device's slice forwarded by `forward(x, mask) -> logits`
  (BatchNorm statistics over its masked rows), `mixup_loss` of the result."""
  mixed, targets, _ = mixup_subset(
    key,
    _gather(x, axis_name),
    _gather(labels, axis_name),
    _gather(mask, axis_name),
    num_classes=num_classes,
    alpha=alpha,
  )
  if axis_name is not None:
    start = jax.lax.axis_index(axis_name) * x.shape[0]
    mixed, targets = (jax.lax.dynamic_slice_in_dim(a, start, x.shape[0]) for a in (mixed, targets))
  logits = forward(mixed, mask)
  return mixup_loss(logits, targets.astype(logits.dtype), mask, axis_name)


def method(
  *,
  num_examples: int,
  start_epoch: int = 20,
  momentum: float = 0.99,
  sigma: float = SIGMA,
  lamd_ce: float = 1.0,
  lamd_h: float = 1.0,
  mixup_alpha: float = 5.0,
  gce_q: float = GCE_Q,
) -> method_lib.Method:
  """DISC as a method (module docstring).

  Args:
    num_examples: N, the training split's size (the first thresholds are 1/N).
    start_epoch: the warm-up epochs (the original's CIFAR value 20; 15 with instance-dependent noise).
    momentum: m of the thresholds' moving average (0.99; 0.95 for asymmetric noise and CIFAR at 60% / 80%).
    sigma: the correction threshold's margin (0.5).
    lamd_ce, lamd_h: the weights of the clean and the hard part (1 and 1; lamd_h 0.2 for CIFAR at 60% / 80%).
    mixup_alpha: Beta(alpha, alpha) of the mixup (5.0, DISC_CIFAR.py's alpha).
    gce_q: q of the hard rows' GCE (0.7).
  """
  if int(num_examples) < 1:
    raise ValueError(f"DISC needs the training split's size: num_examples={num_examples!r} must be >= 1.")
  if isinstance(start_epoch, bool) or int(start_epoch) != start_epoch or start_epoch < 0:
    raise ValueError(f"start_epoch={start_epoch!r} must be an integer >= 0.")
  _checks.check_range("momentum", momentum, 0.0, 1.0)
  _checks.check_range("sigma", sigma, 0.0, np.inf)
  _checks.check_range("lamd_ce", lamd_ce, 0.0, np.inf)
  _checks.check_range("lamd_h", lamd_h, 0.0, np.inf)
  _checks.check_range("mixup_alpha", mixup_alpha, 0.0, np.inf)
  _checks.check_range("gce_q", gce_q, 0.0, 1.0, low_open=True)
  start_epoch = int(start_epoch)

  def objective(
    logits,
    soft_labels,
    weights,
    valid,
    axis_name=None,
    *,
    rows,
    epoch,
    strong_logits,
    images,
    strong_images,
    key,
    forward,
    **unused,
  ):
    del weights, unused
    num_classes = logits.shape[-1]
    labels = jnp.argmax(soft_labels, axis=-1).astype(jnp.int32)
    valid = jnp.asarray(valid, bool)
    warm_up = epoch <= start_epoch
    supervised = supervised_loss(
      logits, strong_logits, labels, rows["disc_clean"], rows["disc_hard"], valid, axis_name,
      lamd_ce=lamd_ce, lamd_h=lamd_h, q=gce_q,
    )  # fmt: skip
    loss = jnp.where(warm_up, warmup_loss(logits, strong_logits, labels, valid, axis_name), supervised)
    mix_rows = jnp.asarray(rows["disc_purified"], bool) & valid & ~warm_up
    for view, x in enumerate((images, strong_images)):  # each view its own lam and permutation
      loss = loss + mixup_pass(
        jax.random.fold_in(key, view),
        x,
        rows["disc_purified_labels"],
        mix_rows,
        forward,
        axis_name,
        num_classes=num_classes,
        alpha=mixup_alpha,
      )
    rows_out = dict(rows)
    rows_out["disc_w_probs"] = jax.nn.softmax(jax.lax.stop_gradient(logits), axis=-1)
    rows_out["disc_s_probs"] = jax.nn.softmax(jax.lax.stop_gradient(strong_logits), axis=-1)
    return loss, rows_out

  def label_evidence(table):
    rows = table.method_rows
    probs = (np.asarray(rows["disc_w_probs"], np.float64) + np.asarray(rows["disc_s_probs"], np.float64)) / 2
    return label_issues.MethodEvidence(what="DISC's mean of the last weak and strong softmax", probs=probs)

  return method_lib.Method(
    name="disc",
    objective=objective,
    init_rows=lambda key, num_rows, num_classes: init_rows(num_rows, num_classes, num_examples),
    row_update=lambda rows, rows_out, grads: rows_out,
    epoch_end=method_lib.EpochEnd(
      update=lambda table, probs, epoch, num_examples: table_update(table, sigma=sigma, momentum=momentum)
    ),
    label_evidence=label_evidence,
    strong_view=True,
  )


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  if context.num_examples is None:
    raise ValueError("method 'disc' needs the training split's size: registry.make(..., num_examples=N).")
  fields = spec_lib.given(
    method_config,
    start_epoch=int,
    momentum=float,
    sigma=float,
    lamd_ce=float,
    lamd_h=float,
    mixup_alpha=float,
    gce_q=float,
  )
  return method(num_examples=context.num_examples, **fields)


SPEC = spec_lib.MethodSpec(
  name="disc",
  fields=("start_epoch", "momentum", "sigma", "lamd_ce", "lamd_h", "mixup_alpha", "gce_q"),
  build=_build,
  # One warm-up epoch, then two of DISC's (its sets from the warm-up's predictions; sigma 0.1 so that some rows are
  # corrected within 3 epochs); a strong view of Cutout only (the policies' own tests: tests/test_autoaugment.py).
  tiny={
    "disc": {
      "method": {"name": "disc", "start_epoch": 1, "momentum": 0.9, "sigma": 0.1, "lamd_h": 0.5},
      "augment": {"crop_padding": 0, "flip": False, "strong": {"policy": "none", "cutout": 4}},
    }
  },
)
