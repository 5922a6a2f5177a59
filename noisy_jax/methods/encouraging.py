"""The encouraging loss as a method (Zhao et al., AAAI 2022): losses.encouraging_loss with `log_end`, optionally
label-smoothed: eps gives (1 - eps) EL_y + eps mean_c EL_c."""

from __future__ import annotations

from noisy_jax.core import _checks
from noisy_jax.core import losses
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import method as method_lib


def method(*, log_end: float = 0.75, label_smoothing: float = 0.0) -> method_lib.Method:
  """The batch mean of the encouraging loss against the table's (smoothed with `label_smoothing`) labels."""
  _checks.check_range("label_smoothing", label_smoothing, 0.0, 1.0)

  def objective(logits, soft_labels, weights, valid, axis_name=None):
    if label_smoothing:
      soft_labels = losses.smooth_labels(soft_labels, epsilon=label_smoothing)
    per_example = losses.encouraging_loss(logits, soft_labels, log_end=log_end)
    return method_lib.weighted_batch_mean(per_example, weights, valid, axis_name)

  return method_lib.Method(name="encouraging", objective=method_lib.batch_objective(objective))


SPEC = spec_lib.MethodSpec(
  name="encouraging",
  fields=("log_end", "label_smoothing"),
  build=lambda method_config, context: method(
    **spec_lib.given(method_config, log_end=spec_lib.as_is, label_smoothing=float)
  ),
  tiny={"encouraging": {"method": {"name": "encouraging", "label_smoothing": 0.0, "log_end": 0.75}}},
  sweep_fields=lambda method_config: ("log_end",),
)
