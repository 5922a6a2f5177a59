"""The method 'loss': any per-example loss of noisy_jax.core.losses, averaged over the batch with the table's weights.

config.method: `loss` (the loss's name in losses.get), `loss_kwargs` (its hyper-parameters), `label_smoothing` eps
(default 0): train on (1 - eps) y + eps / C instead of the table's labels y (Szegedy et al. 2016; with cross
entropy, the label-smoothing baseline of the noisy-label literature).
"""

from __future__ import annotations

from noisy_jax.core import _checks
from noisy_jax.core import losses
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import method as method_lib


def method(loss_name: str, *, label_smoothing: float = 0.0, **loss_kwargs) -> method_lib.Method:
  """The batch mean sum_i valid_i w_i loss(z_i, y_i; loss_kwargs) / sum_i valid_i of `loss_name`, with y the
  table's soft labels, smoothed with `label_smoothing` > 0 (losses.smooth_labels)."""
  loss_fn = losses.get(loss_name)
  _checks.check_range("label_smoothing", label_smoothing, 0.0, 1.0)

  def objective(logits, soft_labels, weights, valid, axis_name=None):
    if label_smoothing:
      soft_labels = losses.smooth_labels(soft_labels, epsilon=label_smoothing)
    return method_lib.weighted_batch_mean(loss_fn(logits, soft_labels, **loss_kwargs), weights, valid, axis_name)

  name = loss_name if not label_smoothing else f"{loss_name}+label_smoothing"
  return method_lib.Method(name=name, objective=method_lib.batch_objective(objective))


def cross_entropy_stage(method_config, context: spec_lib.Context) -> method_lib.Method:
  """A Stage's `build` that trains plain cross entropy whatever the run's method (the warm-ups and estimation runs
  of multi-stage methods: Joint Optimization, loss correction, T-Revision, PES, PES-semi, GLS)."""
  del method_config, context
  return method("cross_entropy")


def cross_entropy_objective():
  """`method('cross_entropy')`'s objective: what a method with its own epoch program gives as its Method.objective
  (its program never calls it; a caller that runs the shared step gets plain cross entropy)."""
  return method("cross_entropy").objective


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  del context
  return method(
    method_config.loss,
    **spec_lib.given(method_config, label_smoothing=float),
    **dict(method_config.get("loss_kwargs", {})),
  )


SPEC = spec_lib.MethodSpec(
  name="loss",
  fields=("loss", "loss_kwargs", "label_smoothing"),
  build=_build,
  tiny={
    "ce": {"method": {"name": "loss", "loss": "cross_entropy", "loss_kwargs": {}}},
    "gce": {"method": {"name": "loss", "loss": "generalized_cross_entropy", "loss_kwargs": {"q": 0.7}}},
  },
  sweep_fields=lambda method_config: tuple(
    f"loss_kwargs.{name}"
    for name, value in dict(method_config.get("loss_kwargs", {})).items()
    if isinstance(value, (int, float)) and not isinstance(value, bool)
  ),
)
