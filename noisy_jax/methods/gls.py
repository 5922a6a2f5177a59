"""GLS: generalised label smoothing, positive or negative (Wei et al., ICML 2022, arXiv 2106.04149).

Original code: UCSC-REAL/negative-label-smoothing (loss.py, main_warmup.py, main_GLS_load.py,
main_GLS_direct_train.py). The loss of one example with logits z [C] (p = softmax z), label y [C] (one-hot or soft)
and smooth rate r <= 1 (r < 0: negative label smoothing, NLS; r > 0: positive, PLS):

  l = -sum_c t_c log p_c,   t = (wa + wb (1 - r)) y + wb r / C

With the defaults wa = 0, wb = 1, t = (1 - r) y + r / C is the paper's GLS target (its entries sum to 1, the true
class's may exceed 1 and the others be negative when r < 0), and l is loss.py:25-34's `loss_gls`:
(wa + wb (1 - r)) (-log p_y) + wb r (-(1/C) sum_c log p_c), no normalisation of t beyond that. wa, wb weigh a plain
cross entropy against the GLS term (README: "wa * Vanilla Loss + wb * GLS"; main_warmup.py is wa = 1, wb = 0).
The batch loss is the mean over the global batch's valid rows (loss.py:32-34: sum / batch size), weighted by the
table's weights (1 unless another policy sets them).

The run (`stages`), main_warmup.py then main_GLS_load.py:
  'warmup'  cross entropy from a fresh network, config.warmup's epochs and optimiser (main_warmup.py: 120 epochs, SGD
            without momentum or weight decay, lr 0.1 / 0.01 / 0.001 for 40 epochs each, :127, :144)
  'stage1'  the GLS loss from the warm-up's best network (main_GLS_load.py:131 loads `...best.pth.tar`, saved by
            main_warmup.py:84-91 at each new best test accuracy), a new optimiser (main_GLS_load.py:134: SGD momentum
            0.9, Nesterov, weight decay 1e-4; lr 1e-6 constant for 100 epochs, :151): the run's own num_epochs and
            optimizer. `warmup_start='final'` starts from the warm-up's last network instead.
With `warmup=False` the run is one stage of GLS from a fresh network (main_GLS_direct_train.py: 200 epochs, SGD
momentum 0.9 Nesterov wd 1e-4, lr 0.1 / 0.01 / 0.001 for 100 / 50 / 50 epochs; the README's choice for low noise).

config.method fields:
  smooth_rate  r (required: the paper tunes it per setting; README's candidates 0.8 ... -8.0; loss.py's and
               main_GLS_load.py:32's default 0.1 is not taken as one). The paper's range (-inf, 1]; r > 1 or a
               non-finite r is a ValueError (the code checks nothing).
  wa, wb       the weights above (main_GLS_load.py:30-31: 0 and 1); both >= 0, wa + wb > 0.
  warmup       True (default: main_warmup.py then main_GLS_load.py) or False (main_GLS_direct_train.py).
  warmup_start 'best' (default, main_GLS_load.py:131) or 'final': which warm-up network stage1 starts from.

Differences from the original code:
- The warm-up's best network is chosen by the trainer's validation accuracy (the run's validation split; the final
  network without one); main_warmup.py chooses it by *test* accuracy (evaluate() on test_loader, :84-91). The
  CIFAR-N replication (KlemenVovk/noisy-labels GLS.py:132-136) chooses by validation accuracy, as here.
- Soft labels y (a label table another method relabelled) give the target above with y in place of the one-hot
  e_y; the code takes class ids only. For one-hot y the two are the same.
- The replication (GLS.py:80-101) trains both stages in one Lightning run: stage 1 starts after `warmup_epochs`,
  its scheduler not stepped at the switch; here the two stages are separate trainings, each with its own epochs and
  schedule (the replication's CIFAR-10 config: 2 warm-up epochs, SGD lr 0.01 momentum 0.9 wd 5e-4, MultiStepLR [60]
  0.1, 100 epochs in all, so 98 GLS epochs).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts
from noisy_jax.methods import plain_loss
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import method as method_lib

WARMUP_STARTS = ("best", "final")
# README's smooth rates (the paper's sweep), named in the error of a missing smooth_rate.
PAPER_SMOOTH_RATES = (0.8, 0.6, 0.4, 0.2, 0.0, -0.2, -0.4, -0.6, -0.8, -1.0, -2.0, -4.0, -6.0, -8.0)


@dataclasses.dataclass(frozen=True)
class GlsSettings:
  """GLS's settings (module docstring).

  Attributes:
    smooth_rate: r in (-inf, 1].
    wa: the plain cross entropy's weight (>= 0).
    wb: the GLS term's weight (>= 0; wa + wb > 0).
    warmup: a cross-entropy warm-up stage first.
    warmup_start: 'best' or 'final': the warm-up network stage1 starts from.
  """

  smooth_rate: float
  wa: float = 0.0
  wb: float = 1.0
  warmup: bool = True
  warmup_start: str = "best"

  def __post_init__(self):
    check_smooth_rate(self.smooth_rate)
    for name in ("wa", "wb"):
      _checks.check_range(name, getattr(self, name), 0.0, math.inf, high_open=True)
    if _checks.is_concrete(self.wa) and _checks.is_concrete(self.wb) and not float(self.wa) + float(self.wb) > 0:
      raise ValueError(f"wa={self.wa!r} and wb={self.wb!r}: their sum must be > 0 (a loss of weight 0).")
    _checks.check_choice("warmup_start", self.warmup_start, WARMUP_STARTS)


def check_smooth_rate(smooth_rate) -> None:
  """ValueError (errors.InputError) naming `smooth_rate` unless it is a finite r <= 1 (the paper's range)."""
  _checks.check_range("smooth_rate", smooth_rate, -math.inf, 1.0, low_open=True)


def gls_targets(labels, *, smooth_rate, wa=0.0, wb=1.0) -> jax.Array:
  """The target t = (wa + wb (1 - r)) y + wb r / C [..., C] of labels y [..., C] (module docstring); entries may be
  negative or exceed 1 when r < 0."""
  labels = jnp.asarray(labels)
  r = loss_parts.hyper(smooth_rate, labels.dtype)
  return (wa + wb * (1.0 - r)) * labels + wb * r / labels.shape[-1]


def gls_loss(logits, labels, *, smooth_rate, wa=0.0, wb=1.0) -> jax.Array:
  """The per-example GLS loss -sum_c t_c log p_c [...] of logits [..., C] and labels [..., C] (module docstring;
  loss.py:25-31 for one-hot labels), in the logits' dtype, computed in at least float32."""
  check_smooth_rate(smooth_rate)
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  targets = gls_targets(labels, smooth_rate=smooth_rate, wa=wa, wb=wb)
  return (-jnp.sum(targets * log_p, axis=-1)).astype(out_dtype)


def method(settings: GlsSettings) -> method_lib.Method:
  """GLS's own stage: the batch mean sum_i valid_i w_i l_i / sum_i valid_i of `gls_loss`."""

  def objective(logits, soft_labels, weights, valid, axis_name=None):
    per_example = gls_loss(logits, soft_labels, smooth_rate=settings.smooth_rate, wa=settings.wa, wb=settings.wb)
    return method_lib.weighted_batch_mean(per_example, weights, valid, axis_name)

  return method_lib.Method(name="gls", objective=method_lib.batch_objective(objective))


def settings_of(method_config) -> GlsSettings:
  """GlsSettings from config.method (ValueError when smooth_rate is missing or a value is out of range)."""
  if "smooth_rate" not in method_config:
    raise ValueError(
      f"method 'gls' needs config.method.smooth_rate (r <= 1; the paper's candidates: {PAPER_SMOOTH_RATES})."
    )
  return GlsSettings(
    **spec_lib.given(method_config, smooth_rate=spec_lib.as_is, wa=spec_lib.as_is, wb=spec_lib.as_is),
    **spec_lib.given(method_config, warmup=bool, warmup_start=str),
  )


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  del context
  return method(settings_of(method_config))


# The warm-up: cross entropy from a fresh network with config.warmup's epochs and optimiser (main_warmup.py).
WARMUP = spec_lib.Stage("warmup", key_stream=0, build=plain_loss.cross_entropy_stage, config_section="warmup")


def stages(method_config) -> tuple[spec_lib.Stage, ...]:
  """The warm-up then GLS from its best (or final) network with a new optimiser, or GLS alone (module docstring)."""
  settings = settings_of(method_config)
  if not settings.warmup:
    return (spec_lib.OWN_STAGE,)
  network = "previous_best" if settings.warmup_start == "best" else "previous_final"
  own = spec_lib.Stage("stage1", key_stream=1, network=network, delivers=True, scores_labels=True)
  return (WARMUP, own)


# The tiny runs: 2 warm-up epochs (the run's SGD), then the run's 3 epochs of GLS from the warm-up's best network.
SPEC = spec_lib.MethodSpec(
  name="gls",
  fields=("smooth_rate", "wa", "wb", "warmup", "warmup_start"),
  build=_build,
  tiny={
    "gls_negative": {"method": {"name": "gls", "smooth_rate": -0.4}, "warmup": {"num_epochs": 2}},
    # Positive smoothing trained directly (main_GLS_direct_train.py).
    "gls_direct": {"method": {"name": "gls", "smooth_rate": 0.4, "warmup": False}},
  },
  stages=stages,
  sweep_fields=lambda method_config: tuple(name for name in ("smooth_rate", "wa", "wb") if name in method_config),
)
