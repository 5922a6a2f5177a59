"""Co-teaching's optimiser: Adam with a per-epoch learning rate and beta1 plan, as an optax transformation.

Both Co-teaching repositories (Han et al., NeurIPS 2018, github.com/bhanML/Co-teaching; Yu et al., ICML 2019,
github.com/xingruiyu/coteaching_plus) train with Adam and set its lr and beta1 at each epoch's start (main.py's
`adjust_learning_rate`): lr constant, then decayed linearly from `decay_start`, beta1 switched from 0.9 to 0.1 there.
`train.optim.make_optimizer` builds it for `config.optimizer.name = 'coteaching_adam'`.

  adam_plan       the per-epoch lr and beta1 (main.py's alpha_plan, beta1_plan)
  adam_schedule   optax's Adam driven by that plan, read per step from the step count
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax

from noisy_jax.core import _checks
from noisy_jax.core import precision

# The original Adam plan (both repositories, main.py): beta1 0.9 -> 0.1 from `epoch_decay_start`, beta2 0.999.
ORIGINAL_BETA1 = 0.9
ORIGINAL_BETA1_AFTER = 0.1
ORIGINAL_BETA2 = 0.999


def adam_plan(
  base_lr: float,
  num_epochs: int,
  decay_start: int,
  *,
  beta1: float = ORIGINAL_BETA1,
  beta1_after: float = ORIGINAL_BETA1_AFTER,
) -> tuple[np.ndarray, np.ndarray]:
  """The original's per-epoch Adam learning rate and beta1 (main.py's alpha_plan, beta1_plan), float64 [num_epochs].

    lr(e)    = base_lr                                                   e < decay_start
             = (num_epochs - e) / (num_epochs - decay_start) * base_lr   e >= decay_start   (linear decay)
    beta1(e) = beta1 (0.9) before decay_start, beta1_after (0.1) from it on; beta2 stays 0.999.

  lr(decay_start) = base_lr (the decay starts one epoch later in effect); the last epoch trains at
  base_lr / (num_epochs - decay_start), never at 0. Co-teaching: base_lr 1e-3, 200 epochs, decay_start 80 (CIFAR-100:
  100); Co-teaching+: decay_start 80 everywhere. decay_start >= num_epochs: no decay, beta1 never switches.

  Raises:
    ValueError: num_epochs < 1, decay_start < 0, base_lr <= 0, or betas outside [0, 1).
  """
  _check_int("num_epochs", num_epochs, 1)
  _check_int("decay_start", decay_start, 0)
  _checks.check_range("base_lr", base_lr, 0.0, np.inf, low_open=True)
  _checks.check_range("beta1", beta1, 0.0, 1.0, high_open=True)
  _checks.check_range("beta1_after", beta1_after, 0.0, 1.0, high_open=True)
  epochs = np.arange(num_epochs)
  decayed = epochs >= decay_start
  span = max(num_epochs - decay_start, 1)  # unused when nothing decays
  lr = np.where(decayed, (num_epochs - epochs).astype(np.float64) / span * float(base_lr), float(base_lr))
  return lr, np.where(decayed, float(beta1_after), float(beta1))


def adam_schedule(
  base_lr: float,
  num_epochs: int,
  decay_start: int,
  *,
  steps_per_epoch: int,
  beta1: float = ORIGINAL_BETA1,
  beta1_after: float = ORIGINAL_BETA1_AFTER,
  beta2: float = ORIGINAL_BETA2,
  eps: float = 1e-8,
  epoch_offset: int = 0,
) -> optax.GradientTransformation:
  """Adam driven by `adam_plan`: `optax.inject_hyperparams(optax.adam)` whose learning_rate and b1 are read per epoch.

  The optimiser step count c (0 at the first update) is in epoch e = min(epoch_offset + c // steps_per_epoch,
  num_epochs - 1); the update uses lr(e) and beta1(e) of `adam_plan`, beta2 and eps fixed, no weight decay:

    m <- b1(e) m + (1 - b1(e)) g,  v <- b2 v + (1 - b2) g^2,  t = c + 1
    w <- w - lr(e) (m / (1 - b1(e)^t)) / (sqrt(v / (1 - b2^t)) + eps)

  which is PyTorch's Adam with `param_group['lr']` and `['betas']` set at each epoch's start (main.py's
  `adjust_learning_rate`): PyTorch too corrects the bias with the *current* beta1 and keeps m across the switch.
  `epoch_offset=1` reproduces main.py, whose first trained epoch is index 1 (module docstring). The current lr and
  b1 are in the state's `hyperparams` (for logging).

  Raises:
    ValueError: as `adam_plan`; steps_per_epoch < 1; epoch_offset < 0.
  """
  _check_int("steps_per_epoch", steps_per_epoch, 1)
  _check_int("epoch_offset", epoch_offset, 0)
  _checks.check_range("beta2", beta2, 0.0, 1.0, high_open=True)
  _checks.check_range("eps", eps, 0.0, np.inf)
  lr_plan, beta1_plan = adam_plan(base_lr, num_epochs, decay_start, beta1=beta1, beta1_after=beta1_after)
  lr_plan, beta1_plan = lr_plan.astype(precision.float_dtype()), beta1_plan.astype(precision.float_dtype())

  def epoch_of(count):
    return jnp.minimum(epoch_offset + jnp.asarray(count) // steps_per_epoch, num_epochs - 1)

  return optax.inject_hyperparams(optax.adam)(
    learning_rate=lambda count: jnp.asarray(lr_plan)[epoch_of(count)],
    b1=lambda count: jnp.asarray(beta1_plan)[epoch_of(count)],
    b2=float(beta2),
    eps=float(eps),
  )


def _check_int(name, value, low):
  if isinstance(value, bool) or int(value) != value or value < low:
    raise ValueError(f"{name}={value!r} must be an integer >= {low}.")
