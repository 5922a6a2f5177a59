"""Numerical checks of the robustness conditions that the GCE paper builds on, for any per-example loss.

Ghosh et al. (AAAI 2017), used by Zhang & Sabuncu (2018): a loss L is *symmetric* when, for every input,
sum_{j=1..C} L(f(x), j) = K, a constant that does not depend on f(x); symmetric losses are tolerant to uniform label
noise below (C - 1) / C. *Bounded* losses (sup L < inf) are the weaker property that GCE trades for: Lq <= 1 / q.

Both are checked on random logits, numerically:
- symmetric: the spread (max - min) of S(z) = sum_j L(z, e_j) over many random logit vectors z, at several logit
  scales, is below `tolerance` times max(1, range of L), the range (max - min) of the loss values L(z, e_j) seen. Not
  relative to |mean S|: a large constant in L (AMSE's a^2 / C, `joint_asymmetric_losses`) would hide a class sum
  that varies (by 1 - 1/C there, for a mean of 895);
- bounded: the largest loss seen stays finite and stops growing when the logits are scaled up (max at the largest
  scale <= max at the previous scale x (1 + tolerance) + tolerance). CE grows linearly with the logit scale, so it
  fails; MAE never exceeds 2.

  python -m experiments.loss_properties      # the table for every loss in noisy_jax.core.losses
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import losses

DEFAULT_SCALES = (1.0, 10.0, 100.0, 1000.0)


@dataclasses.dataclass(frozen=True)
class LossProperties:
  """Result of `check`: whether L is symmetric and bounded, with the numbers behind each verdict."""

  name: str
  symmetric: bool
  bounded: bool
  class_sum_min: float  # min over samples of sum_j L(z, e_j)
  class_sum_max: float
  max_loss_per_scale: tuple[float, ...]  # max over samples and labels of L, one per logit scale


def losses_per_label(loss_fn: Callable[..., jax.Array], logits: jax.Array) -> jax.Array:
  """L(z, e_j) for logits [N, C] and every one-hot label e_j of the C classes; returns [C, N].

  The class sum S(z) = sum_j L(z, e_j) is `.sum(axis=0)` of the result.
  """
  eye = jnp.eye(logits.shape[-1], dtype=logits.dtype)
  return jax.vmap(lambda label: loss_fn(logits, jnp.broadcast_to(label, logits.shape)))(eye)


def check(
  loss_fn: Callable[..., jax.Array],
  *,
  name: str = "",
  num_classes: int = 10,
  num_samples: int = 512,
  scales: Sequence[float] = DEFAULT_SCALES,
  seed: int = 0,
  tolerance: float = 1e-3,
) -> LossProperties:
  """Checks symmetry and boundedness of `loss_fn(logits [N, C], labels [N, C]) -> [N]` on random logits.

  Logits are standard normal (float64 when x64 is enabled, float32 otherwise) times each scale of `scales`.
  """
  _checks.check_range("num_classes", num_classes, 2, np.inf)
  _checks.check_range("num_samples", num_samples, 1, np.inf)
  _checks.check_range("tolerance", tolerance, 0.0, 1.0)
  if len(scales) < 2 or any(s <= 0 for s in scales) or list(scales) != sorted(scales):
    raise ValueError(f"scales={tuple(scales)} must be at least two increasing positive numbers.")
  base = jax.random.normal(jax.random.PRNGKey(seed), (num_samples, num_classes))
  sums, maxima, minima = [], [], []
  for scale in scales:
    per_label = np.asarray(losses_per_label(loss_fn, base * scale), np.float64)  # [C, N]
    sums.append(per_label.sum(axis=0))
    maxima.append(float(per_label.max()))
    minima.append(float(per_label.min()))
  all_sums = np.concatenate(sums)
  spread = float(all_sums.max() - all_sums.min())
  loss_range = max(maxima) - min(minima)
  symmetric = bool(np.all(np.isfinite(all_sums)) and spread <= tolerance * max(1.0, loss_range))
  bounded = bool(np.all(np.isfinite(maxima)) and maxima[-1] <= maxima[-2] * (1 + tolerance) + tolerance)
  return LossProperties(
    name=name,
    symmetric=symmetric,
    bounded=bounded,
    class_sum_min=float(all_sums.min()),
    class_sum_max=float(all_sums.max()),
    max_loss_per_scale=tuple(maxima),
  )


def check_all(**kwargs) -> list[LossProperties]:
  """`check` for every per-example loss of `noisy_jax.core.losses.LOSSES`, with its default hyper-parameters."""
  return [check(losses.get(name), name=name, **kwargs) for name in losses.names()]


def format_table(results: Sequence[LossProperties]) -> str:
  """A Markdown table: loss, symmetric, bounded, range of the class sum, max loss at the two largest scales."""
  lines = [
    "| loss | symmetric | bounded | sum_j L(z, j): min .. max | max L (scale 100 / 1000) |",
    "|---|---|---|---|---|",
  ]
  for r in results:
    lines.append(
      f"| {r.name} | {'yes' if r.symmetric else 'no'} | {'yes' if r.bounded else 'no'} | "
      f"{r.class_sum_min:.4g} .. {r.class_sum_max:.4g} | "
      f"{r.max_loss_per_scale[-2]:.4g} / {r.max_loss_per_scale[-1]:.4g} |"
    )
  return "\n".join(lines)
