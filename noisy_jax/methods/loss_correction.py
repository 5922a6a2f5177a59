"""Forward and backward loss correction with a noise transition matrix (Patrini et al., CVPR 2017, arXiv 1609.03683).

T is row-stochastic [C, C]: T[i, j] = P(given label j | true label i) (noisy_jax.core.noise's convention). With the
network's softmax p [C] clipped to [EPS, 1 - EPS] (the original code's clip, giorgiop/loss-correction):

  forward   l_fwd(p, y~)  = -log (T^T p)_{y~} = -log sum_i p_i T[i, y~]      (no clip after the product, as there)
  backward  l_bwd(p, y~)  = (T^{-1} l)_{y~},  l_j = -log p_j

Backward is unbiased: for a true label y, sum_j T[y, j] l_bwd(p, j) = l_y, the clean cross entropy, so its
expectation over the label noise is the loss on clean labels; it can be negative. Forward makes the network's p
an estimate of the clean posterior whose push through T fits the given labels. For soft labels (the label table's
rows) both take the expectation over the label: sum_j y_j l(p, j), as noisy_jax.core.losses does.

T is known (a synthetic noise model: `noise.make_transition`) or estimated from a network trained with cross
entropy on the same noisy labels (`estimate_transition`, the paper's anchor points).

The method 'loss_correction' (`method`): config.method `correction` ('forward' | 'backward'), `transition`
('known': the run's synthetic noise model; 'estimated': anchor points of a cross-entropy network trained first on the
same labels for the same epochs, `percentile`, default 97, and `shared_filter` to reproduce the original code's
estimate; or an explicit [C, C] matrix). noisy_jax.experiment.runs resolves it; the builder takes the matrix.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts
from noisy_jax.core import noise
from noisy_jax.core import precision
from noisy_jax.methods import plain_loss
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import method as method_lib

# The original code clips the softmax to [EPS, 1 - EPS] before both corrections.
EPS = 1e-7
CORRECTIONS = ("forward", "backward")
# The original code's outlier filter: the anchor of class i is the most probable example below this percentile.
DEFAULT_PERCENTILE = 97.0


def _clipped_probabilities(logits, labels):
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  return jnp.clip(jax.nn.softmax(logits, axis=-1), EPS, 1.0 - EPS), labels, out_dtype


def _check_matrix(transition, num_classes: int, name: str) -> jax.Array:
  matrix = jnp.asarray(transition)
  if matrix.shape != (num_classes, num_classes):
    raise ValueError(
      f"{name} must be [C, C] = [{num_classes}, {num_classes}] for C = {num_classes} classes, got shape {matrix.shape}."
    )
  return matrix


def forward_corrected_cross_entropy(logits, labels, *, transition) -> jax.Array:
  """-sum_j y_j log (p @ T)_j per example; logits, labels [..., C], transition T [C, C] (see the module docstring)."""
  p, labels, out_dtype = _clipped_probabilities(logits, labels)
  matrix = _check_matrix(transition, p.shape[-1], "transition").astype(p.dtype)
  return -jnp.sum(labels * jnp.log(p @ matrix), axis=-1).astype(out_dtype)


def backward_corrected_cross_entropy(logits, labels, *, inverse_transition) -> jax.Array:
  """sum_j y_j (T^{-1} l)_j per example, l = -log p; `inverse_transition` = T^{-1} [C, C] (`inverse`, computed
  once in float64 rather than per step)."""
  p, labels, out_dtype = _clipped_probabilities(logits, labels)
  inverse = _check_matrix(inverse_transition, p.shape[-1], "inverse_transition").astype(p.dtype)
  corrected = -jnp.log(p) @ inverse.T  # (T^{-1} l)_j = sum_k inv[j, k] l_k
  return jnp.sum(labels * corrected, axis=-1).astype(out_dtype)


def inverse(transition) -> np.ndarray:
  """T^{-1} in float64, checked: ValueError naming the condition number when T is singular or nearly so (symmetric
  noise at rate (C - 1) / C makes every row the same)."""
  matrix = noise.check_transition(transition)
  condition = np.linalg.cond(matrix)
  if not np.isfinite(condition) or condition > 1e12:
    raise ValueError(
      f"the transition matrix is singular (condition number {condition:.3g}); backward correction "
      "needs an invertible T."
    )
  return np.linalg.inv(matrix)


def anchor_rows(probs, *, percentile: float | None = DEFAULT_PERCENTILE, shared_filter: bool = False) -> np.ndarray:
  """The anchor rows [C, C] float64: row i the predicted probabilities of class i's anchor, unnormalised (what
  T-Revision's tools.fit, tools.py:27-42, returns).

  The anchor of class i is the example with the largest p_i after the examples at or above the `percentile`-th
  percentile of column i (NumPy's 'higher' method) are left out (None: no filter). `shared_filter`: the filter zeroes
  the entries of one shared copy of `probs` (tools.fit's in-place write through a view), so a row read after column
  j was filtered has 0 where that example was in column j's top; False filters a copy of each column.
  `estimate_transition` normalises each row to sum 1.
  """
  probs = np.array(probs, dtype=np.float64)  # a copy: the caller's array is never changed
  if probs.ndim != 2 or probs.shape[0] < 1 or probs.shape[1] < 2:
    raise ValueError(f"probs must be [N, C] with N >= 1 and C >= 2, got shape {probs.shape}.")
  if percentile is not None and not 0.0 < float(percentile) <= 100.0:
    raise ValueError(f"percentile={percentile!r} must be in (0, 100], or None for no outlier filter.")
  num_classes = probs.shape[1]
  rows = np.empty((num_classes, num_classes))
  for i in range(num_classes):
    column = probs[:, i] if shared_filter else probs[:, i].copy()
    if percentile is not None:
      threshold = np.percentile(column, percentile, method="higher")
      column[column >= threshold] = 0.0
    rows[i] = probs[int(np.argmax(column))]
  return rows


def estimate_transition(
  probs, *, percentile: float | None = DEFAULT_PERCENTILE, shared_filter: bool = False
) -> np.ndarray:
  """The anchor-point estimate of T [C, C] (float64, rows sum to 1) from predicted probabilities [N, C].

  For each class i: the anchor x_i is the example with the largest p_i, after the examples with p_i at or above
  the `percentile`-th percentile of column i (NumPy's 'higher' method) are left out (None: no filter, the paper's
  CIFAR-100 choice); row i of T is the anchor's p(. | x_i), normalised to sum 1.

  shared_filter: the original code zeroes the filtered entries in the one probability matrix it then reads the rows
  from (a NumPy view), so a row read after column j was filtered has 0 wherever that example was in column j's top
  3%. False (the default) filters a copy of each column; True reproduces the original code's estimate.
  """
  transition = anchor_rows(probs, percentile=percentile, shared_filter=shared_filter)
  sums = transition.sum(axis=1, keepdims=True)
  if np.any(sums <= 0):
    raise ValueError("an anchor row has no probability mass left (every entry filtered): use a larger percentile.")
  return transition / sums


def method(*, correction: str, transition) -> method_lib.Method:
  """The batch mean of the forward or backward corrected cross entropy with the [C, C] matrix `transition`."""
  _checks.check_choice("loss correction", correction, CORRECTIONS)
  if correction == "forward":
    matrix = jnp.asarray(noise.check_transition(transition), precision.float_dtype())
    per_example = lambda logits, labels: forward_corrected_cross_entropy(logits, labels, transition=matrix)
  else:
    inverse_matrix = jnp.asarray(inverse(transition), precision.float_dtype())
    per_example = lambda logits, labels: backward_corrected_cross_entropy(
      logits, labels, inverse_transition=inverse_matrix
    )

  def objective(logits, soft_labels, weights, valid, axis_name=None):
    return method_lib.weighted_batch_mean(per_example(logits, soft_labels), weights, valid, axis_name)

  return method_lib.Method(name=f"{correction}_correction", objective=method_lib.batch_objective(objective))


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  transition = context.products.get(TRANSITION, context.transition)
  if transition is None:
    raise ValueError(
      "method 'loss_correction' needs its transition matrix: make(..., transition=T); "
      "experiment.runs resolves config.method.transition ('known', 'estimated' or a matrix)."
    )
  if np.shape(transition) != (context.num_classes, context.num_classes):
    raise ValueError(
      f"the transition matrix has shape {np.shape(transition)}; [C, C] = "
      f"[{context.num_classes}, {context.num_classes}] expected."
    )
  return method(correction=method_config.correction, transition=transition)


# What the estimation stage gives the correction: Context.products' names.
TRANSITION = "transition"
PERCENTILE = "transition_percentile"


def estimated_transition(train_probs: np.ndarray, method_config) -> dict:
  """The estimation stage's product: the anchor-point T (`estimate_transition`, with config.method's `percentile`
  and `shared_filter`) of the estimation network's softmax of the training split [N, C], and the percentile."""
  percentile = method_config.get("percentile", DEFAULT_PERCENTILE)
  shared_filter = bool(method_config.get("shared_filter", False))
  matrix = estimate_transition(train_probs, percentile=percentile, shared_filter=shared_filter)
  return {TRANSITION: matrix, PERCENTILE: percentile}


# With transition='estimated': a network trained first with cross entropy on the same labels, config and epochs
# (the run's second key; not checkpointed: a resumed run trains it again, the same way), whose softmax of the
# training split gives the anchor-point estimate, as the paper's code does.
ESTIMATE = spec_lib.Stage(
  "estimate",
  key_stream=1,
  build=plain_loss.cross_entropy_stage,
  auxiliary=True,
  product=estimated_transition,
)


def stages(method_config) -> tuple[spec_lib.Stage, ...]:
  """The correction's own training, after the estimation stage when T is 'estimated'."""
  source = method_config.get("transition", "known")
  if isinstance(source, str) and source == "estimated":
    return (ESTIMATE, spec_lib.OWN_STAGE)
  return spec_lib.one_stage(method_config)


SPEC = spec_lib.MethodSpec(
  name="loss_correction",
  fields=("correction", "transition", "percentile", "shared_filter"),
  build=_build,
  tiny={
    "forward_correction": {"method": {"name": "loss_correction", "correction": "forward", "transition": "known"}},
    "backward_correction_estimated": {
      "method": {"name": "loss_correction", "correction": "backward", "transition": "estimated"}
    },
  },
  needs_transition=True,
  stages=stages,
)
