"""JoCoR: two networks trained together on a joint loss with co-regularisation (Wei et al., CVPR 2020).

Each example's joint loss over the pair's logits z1, z2 [C] (softmaxes p1, p2) and its label y:

  l_i = (1 - lambda) (CE(z1_i, y_i) + CE(z2_i, y_i)) + lambda (KL(p1_i || p2_i) + KL(p2_i || p1_i))

Each batch keeps the n = floor((1 - R(e)) N) examples of smallest joint loss (N valid examples of the global batch,
R(e) the forget rate of Co-teaching's schedule: coteaching.forget_rate_schedule, `ramp`), and both networks are
updated by the one loss L = sum_{i kept} l_i / n (one optimiser over both; the paper's Algorithm 1, the original's
`loss_jocor`). The KL terms reach both networks (neither softmax is detached, as in the original's
`F.kl_div(log_softmax(z1), softmax(z2))`): training pulls the two predictions together ("agreement").

config.method: `forget_rate` tau (required; the original's default is the noise rate, half of it for asymmetric noise:
algorithm/jocor.py), `co_lambda` lambda (default 0.1, main.py's; its README calls 0.9 best for CIFAR-10 at 20% / 50%
symmetric and 40% asymmetric noise, 0.65 at 80%, 0.85 for CIFAR-100), `num_gradual` T_k (10), `exponent` c (1), `ramp`
('paper' | 'original'). The original trains with Co-teaching's Adam plan (optimizer 'coteaching_adam': lr 0.001, decay
from epoch 80 on CIFAR-10 and MNIST, 100 on CIFAR-100).

Where the original (hongxin001/JoCoR) differs, noisy_jax follows the paper and names the difference:
- The ramp: main.py's linspace reaches tau one epoch early (ramp='original' reproduces it), and its loop starts at
  epoch 1, so epoch 0 is never trained and the last epoch's rate is R(n_epoch - 1) (as Co-teaching's main.py).
- `num_iter_per_epoch` (400): main.py stops an epoch after 401 batches (MNIST's 469 are cut; CIFAR's 391 are not).
  Not offered: an epoch is every batch here.
- Ties in the ranking go to the lower batch position (a stable sort; np.argsort's quicksort is not stable).
- Evaluation: the original reports each network's accuracy; noisy_jax evaluates the pair by the mean of its logits,
  as for every two-network method.
- No example kept (n = 0: a batch of fewer than 1 / (1 - R(e)) valid examples, e.g. a short last batch late in the
  ramp, or R(e) = 1): the original's `torch.mean` over no rows is NaN (its logged loss) with a zero gradient; here
  L = 0 (`coteaching.coteaching_loss`: n clipped to 1), with the same zero gradient, so the update is the
  original's and only the reported loss differs. Not offered.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from noisy_jax.core import _checks
from noisy_jax.core import losses
from noisy_jax.methods import coteaching
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import method as method_lib


def _kl(log_p: jax.Array, log_q: jax.Array) -> jax.Array:
  """KL(p || q) = sum_c p_c (log p_c - log q_c) [B] from log-probabilities [B, C] (finite where p_c underflows)."""
  return jnp.sum(jnp.exp(log_p) * (log_p - log_q), axis=-1)


def joint_loss(logits_1, logits_2, labels, *, co_lambda: float) -> jax.Array:
  """The per-example joint loss l_i [B] (module docstring) of logits [B, C] and labels [B, C] (one-hot or soft)."""
  log_p1, log_p2 = jax.nn.log_softmax(logits_1, axis=-1), jax.nn.log_softmax(logits_2, axis=-1)
  supervised = losses.cross_entropy(logits_1, labels) + losses.cross_entropy(logits_2, labels)
  agreement = _kl(log_p1, log_p2) + _kl(log_p2, log_p1)
  return (1.0 - co_lambda) * supervised + co_lambda * agreement


def jocor_loss(logits_1, logits_2, labels, valid, forget_rate, *, co_lambda: float, axis_name=None):
  """The batch loss L = sum_{i kept} l_i / n and the kept mask [B] (module docstring; padding rows, valid = 0, are
  never kept; over the global batch with `axis_name`). With n = 0, L = 0 and its gradient is zero (the original: a NaN
  value, a zero gradient).
  """
  per_example = joint_loss(logits_1, logits_2, labels, co_lambda=co_lambda)
  ranked = jax.lax.stop_gradient(per_example)
  keep, _ = coteaching.small_loss_selection(ranked, ranked, valid, forget_rate, axis_name=axis_name)
  return coteaching.coteaching_loss(per_example, keep, axis_name), keep


def method(
  *,
  forget_rate: float,
  num_epochs: int,
  co_lambda: float = 0.1,
  num_gradual: int = 10,
  exponent: float = 1.0,
  ramp: str = "paper",
) -> method_lib.Method:
  """JoCoR on two networks (module docstring). Epoch e (1-based here) trains with the forget rate R(e - 1) of
  `coteaching.forget_rate_schedule(num_epochs, forget_rate, ...)`."""
  _checks.check_range("co_lambda", co_lambda, 0.0, 1.0)
  schedule = jnp.asarray(
    coteaching.forget_rate_schedule(
      int(num_epochs), forget_rate, num_gradual=int(num_gradual), exponent=exponent, ramp=ramp
    ),
    jnp.float32,
  )

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, rows, epoch, **unused):
    del weights
    rate = schedule[jnp.clip(epoch - 1, 0, schedule.shape[0] - 1)]
    loss, _ = jocor_loss(logits[0], logits[1], soft_labels, valid, rate, co_lambda=co_lambda, axis_name=axis_name)
    return loss, rows

  return method_lib.Method(
    name="jocor",
    objective=objective,
    row_update=lambda rows, rows_out, grads: rows_out,
    num_networks=2,
  )


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  return method(
    **coteaching.schedule_arguments(method_config, context, default_hint="the original uses the noise rate"),
    **spec_lib.given(method_config, co_lambda=float, num_gradual=int, exponent=float, ramp=str),
  )


SPEC = spec_lib.MethodSpec(
  name="jocor",
  fields=("forget_rate", "co_lambda", "num_gradual", "exponent", "ramp"),
  build=_build,
  # Both networks in one state, the Adam plan of Co-teaching (lr / beta1 decay from epoch 2), lambda 0.9
  tiny={
    "jocor": {
      "method": {"name": "jocor", "forget_rate": 0.4, "num_gradual": 2, "co_lambda": 0.9},
      "optimizer": {"name": "coteaching_adam", "learning_rate": 1e-2, "decay_start": 2},
    }
  },
)
