"""Joint Optimization, stage 1 (Tanaka et al., CVPR 2018): network parameters and the label table optimised in turn.

The objective is Lc + alpha Lp + beta Le against the table's soft labels (losses.joint_optimization_loss: the class
prior `prior` [C], 'uniform' by default); every epoch records the softmax of each example into the table's history
ring of `history_length` epochs; from epoch `begin` on, the labels are relabelled (soft or hard) from the mean of the
recorded epochs. Stage 2, when `stage2` (default True), is the run's second stage (`stages`): a fresh network trained
with cross entropy on the stage-1 soft labels, with the config's `stage2` fields (epochs, optimiser) over the run's;
it delivers the run's network, and stage 1's label table gives its label issues.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from noisy_jax.core import _checks
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import losses
from noisy_jax.core import precision
from noisy_jax.methods import plain_loss
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import method as method_lib

RELABEL_MODES = label_table_lib.RELABEL_MODES + ("hard_top_k",)


def uniform_prior(num_classes: int) -> jax.Array:
  """The uniform class prior [C] of Lp."""
  return jnp.full((num_classes,), 1.0 / num_classes, precision.float_dtype())


def method(
  *,
  alpha: float,
  beta: float,
  prior,
  begin: int,
  history_length: int = 10,
  relabel: str = "soft",
  relabel_k: int = 0,
) -> method_lib.Method:
  """Stage 1 of Joint Optimization (module docstring). `prior` is the class prior [C].

  relabel: 'soft' (y_i = history mean, the paper's choice), 'hard' (one-hot of its argmax, every example) or
  'hard_top_k' (hard, only the `relabel_k` examples whose mean prediction disagrees most with their label;
  `label_table.relabel_top_k`).
  """
  _checks.check_choice("relabel", relabel, RELABEL_MODES)
  if relabel == "hard_top_k" and (not isinstance(relabel_k, int) or relabel_k < 1):
    raise ValueError(f"relabel_k={relabel_k!r} must be a positive int with relabel='hard_top_k'.")
  if relabel != "hard_top_k" and relabel_k:
    raise ValueError(f"relabel_k={relabel_k!r} is only used with relabel='hard_top_k', not {relabel!r}.")
  if history_length < 1:
    raise ValueError(f"history_length={history_length!r} must be >= 1 for Joint Optimization.")
  if begin < 1:
    raise ValueError(f"begin={begin!r} must be >= 1 (the first epoch after which labels are updated).")
  prior = jnp.asarray(prior, precision.float_dtype())

  def objective(logits, soft_labels, weights, valid, axis_name=None):
    del weights  # Joint Optimization has no per-example weights.
    return losses.joint_optimization_loss(
      logits, soft_labels, prior=prior, alpha=alpha, beta=beta, axis_name=axis_name, where=valid
    )

  return method_lib.Method(
    name="joint_optimization",
    objective=method_lib.batch_objective(objective),
    history_length=history_length,
    epoch_end=method_lib.EpochEnd(
      update=(
        (lambda table, probs, epoch, num_examples: label_table_lib.relabel_top_k(table, relabel_k))
        if relabel == "hard_top_k"
        else (lambda table, probs, epoch, num_examples: label_table_lib.relabel(table, mode=relabel))
      ),
      due=lambda epoch: epoch >= begin,
    ),
  )


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  prior = method_config.get("prior", "uniform")
  prior = uniform_prior(context.num_classes) if isinstance(prior, str) and prior == "uniform" else prior
  return method(
    prior=prior,
    **spec_lib.given(
      method_config,
      alpha=spec_lib.as_is,
      beta=spec_lib.as_is,
      begin=int,
      history_length=int,
      relabel=str,
      relabel_k=spec_lib.as_is,
    ),
  )


# Stage 2: a fresh network, cross entropy on stage 1's soft labels, with config.stage2's fields; the run's network.
STAGE2 = spec_lib.Stage(
  "stage2",
  key_stream=1,
  build=plain_loss.cross_entropy_stage,
  config_section="stage2",
  table="previous",
  delivers=True,
)


def stages(method_config) -> tuple[spec_lib.Stage, ...]:
  """Stage 1 (the labels and their issues), then stage 2 (the network) unless `stage2` is False."""
  if not bool(method_config.get("stage2", True)):
    return spec_lib.one_stage(method_config)
  return (dataclasses.replace(spec_lib.OWN_STAGE, delivers=False), STAGE2)


SPEC = spec_lib.MethodSpec(
  name="joint_optimization",
  fields=("alpha", "beta", "prior", "begin", "history_length", "relabel", "relabel_k", "stage2"),
  build=_build,
  tiny={
    "joint_optimization": {
      "method": {
        "name": "joint_optimization",
        "alpha": 1.2,
        "beta": 0.8,
        "prior": "uniform",
        "begin": 1,
        "history_length": 2,
        "relabel": "soft",
        "stage2": True,
      },
      "optimizer.learning_rate": 0.08,
      "stage2": {
        "num_epochs": 2,
        "optimizer": {
          "learning_rate": 0.05,
          "lr_boundaries": (1,),
          "lr_decay": 0.1,
          "momentum": 0.9,
          "nesterov": False,
          "weight_decay": 0.0005,
        },
      },
    }
  },
  stages=stages,
  sweep_fields=lambda method_config: ("alpha", "beta"),
)
