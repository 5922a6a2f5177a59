"""VolMinNet (Li et al., ICML 2021, arXiv 2102.02400): the network and a transition matrix T(W) learned together.

Original code: xuefeng-li1/Provably-end-to-end-label-noise-learning-without-anchor-points@06e4167 (main.py, models.py,
tools.py); CIFAR-N replication KlemenVovk/noisy-labels (src/noisypy/methods/learning_strategies/volminnet/volminnet.py,
utils.py). The pure pieces (T(W), the corrected NLL, log|det T|) are noisy_jax.core.volminnet.

Each step, for the global batch of B valid rows with logits z [B, C] and given labels y~ [B, C]:

  loss = sum_i w_i (-sum_j y~_ij log((softmax(z_i) @ T)_j)) / B + lam * log|det T|
         (+ the network's coupled weight decay, gradient only: `network_weight_decay`)

T = rownormalise(I + (1 - I) sigmoid(W)) [C, C] (models.py:149-169), W its own trainable parameter: the top-level
params entry TRANSITION, added by `EpochProgram.init_state` as -init_t everywhere (models.py:153), with the optimiser's
state made for the network's params and W together (as noisy_jax.methods.t_revision adds its dT). The network's apply
ignores that entry; the export leaves it out (noisy_jax.experiment.runs.network_variables). The code steps the network
and T with two optimisers after one backward pass of the same loss (main.py:165-190); the run's one optimiser steps
both here (the settings that make it the code's two: below and experiments/configs/volminnet_paper.py).

The network's own softmax is the clean-class posterior (main.py:223-227 tests it alone): evaluation, model selection,
the recorded prediction history and label issues (WORKDIR/label_issues.csv) all use the network's logits, never p @ T.

config.method fields (defaults: the paper where the code differs, the code's behaviour a named option):
  lam                   1e-4: the volume penalty's factor (main.py:24 --lam, run.sh; replication configs lam=1e-4)
  init_t                2.0: W starts at -init_t (models.py:150 default; main.py:71 sets 4.5 for CIFAR-100)
  network_weight_decay  0.0: PyTorch SGD's coupled weight decay g <- g + wd w on the *network's* parameters only,
                        added through the objective's gradient (its value adds exactly 0 to the loss). The code decays
                        the network (optimizer_es, weight_decay 1e-4, main.py:23, 94) but not W (optimizer_trans,
                        weight_decay=0, main.py:53, 68, 85): set network_weight_decay 1e-4 with
                        config.optimizer.weight_decay = 0 for that (the paper config does). With
                        config.optimizer.weight_decay > 0 the run's optimiser decays W as well (W's off-diagonal then
                        drifts towards 0, T towards sigmoid(0) = 0.5 off the diagonal before normalising).

The run's optimiser and the code's two. On CIFAR-10 the code's optimizer_trans is SGD(lr 0.01, momentum 0.9, no
decay) (main.py:68) and optimizer_es SGD(lr 0.01, momentum 0.9, weight decay 1e-4) (main.py:94), both with
MultiStepLR([30, 60], 0.1) stepped after each epoch (main.py:95-96, 194-195): one SGD(lr 0.01, momentum 0.9, weight
decay 0) over {network, W} with network_weight_decay 1e-4 makes exactly both updates (tests/test_volminnet_method.py
checks three steps against torch's two optimisers). On CIFAR-100 and MNIST the code steps T with Adam(lr 0.01, no
decay) (main.py:53, 85), which one optimiser over both cannot do: here W follows the network's SGD (a difference).

Differences from the original code:
- T's optimiser on CIFAR-100 (and MNIST): Adam there, the run's SGD with momentum here (above).
- Model selection: the code keeps every epoch's T and test accuracy and reports the test accuracy of the epoch of the
  lowest validation loss, and of the highest validation accuracy, both computed with p @ T against the *noisy*
  validation labels (main.py:197-214, 244-263); the trainer here selects by its validation accuracy of argmax p (the
  network's own softmax), against the validation labels it has. The code's logged training accuracy is argmax p @ T
  against the given labels (main.py:183-185); here the trainer's, argmax p.
- Per-example weights and soft labels: the label table's weights multiply each row's NLL (1 for every row unless
  another policy changed them) and a soft label takes the expectation of the NLL over the label (the code: hard
  labels, no weights).
- log((p @ T)_j) is computed as a logsumexp over log p + log T (noisy_jax.core.volminnet), the same number as the
  code's `torch.mm(softmax, T).log()`, finite where its product underflows.
- The batch mean: over the global batch's valid rows, which is the code's nll_loss mean over its (last, smaller)
  batch; the penalty is added once per step, as the code adds it once per batch.
- Sweeps (noisy_jax.experiment.sweep) refuse the method: their program does not add W (EpochProgram.init_state).
"""

from __future__ import annotations

import dataclasses

import flax
import jax
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import precision
from noisy_jax.core import volminnet as core
from noisy_jax.methods import spec as spec_lib
from noisy_jax.methods import t_revision
from noisy_jax.train import method as method_lib

# The top-level params entry of W [C, C] (models.py:153's `sig_t.w`, an nn.Parameter beside the network).
TRANSITION = "volminnet_transition"
ORIGINAL_LAM = 1e-4  # main.py:24 --lam default; run.sh --lam 0.0001
ORIGINAL_NETWORK_WEIGHT_DECAY = 1e-4  # main.py:23 --weight_decay, optimizer_es only (main.py:94)


@dataclasses.dataclass(frozen=True)
class VolMinNetSettings:
  """config.method's fields (module docstring), checked when made."""

  lam: float = ORIGINAL_LAM
  init_t: float = core.ORIGINAL_INIT
  network_weight_decay: float = 0.0

  def __post_init__(self):
    _checks.check_range("lam", self.lam, 0.0, np.inf, high_open=True)
    _checks.check_range("init_t", self.init_t, -np.inf, np.inf, low_open=True, high_open=True)
    _checks.check_range("network_weight_decay", self.network_weight_decay, 0.0, np.inf, high_open=True)


def network_params(params) -> dict:
  """The network's own entries of `params` (every top-level entry but TRANSITION)."""
  return {name: tree for name, tree in params.items() if name != TRANSITION}


def batch_loss(logits, soft_labels, weights, valid, axis_name, *, transition_logits, lam: float) -> jax.Array:
  """The weighted mean corrected NLL over the global batch's valid rows plus lam * log|det T(W)| (main.py:175-178)."""
  per_example = core.corrected_cross_entropy(logits, soft_labels, transition_logits=transition_logits)
  nll = method_lib.weighted_batch_mean(per_example, weights, valid, axis_name)
  return nll + lam * core.log_volume(transition_logits).astype(nll.dtype)


def make_init_state(num_classes: int, init_t: float):
  """`(state) -> state` with W = -init_t [C, C] added to its params (TRANSITION) and the optimiser's state made for
  the network's params and W together."""

  def init_state(state):
    frozen = isinstance(state.params, flax.core.FrozenDict)
    params = dict(flax.core.unfreeze(state.params))
    params[TRANSITION] = core.initial_transition_logits(num_classes, init=init_t, dtype=precision.float_dtype())
    params = flax.core.freeze(params) if frozen else params
    return state.replace(params=params, opt_state=state.tx.init(params))

  return init_state


def method(num_classes: int, settings: VolMinNetSettings = VolMinNetSettings()) -> method_lib.Method:
  """VolMinNet's Method for C = `num_classes` classes (module docstring)."""
  _checks.check_range("num_classes", num_classes, 2, np.inf)
  lam, decay = float(settings.lam), float(settings.network_weight_decay)

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, params, rows=None, **unused):
    del unused
    loss = batch_loss(logits, soft_labels, weights, valid, axis_name, transition_logits=params[TRANSITION], lam=lam)
    if decay:
      loss = loss + t_revision.coupled_weight_decay(network_params(params), decay, loss.dtype)
    return loss, rows

  program = method_lib.EpochProgram(init_state=make_init_state(int(num_classes), float(settings.init_t)))
  return method_lib.Method(name="volminnet", objective=objective, program=program)


def settings_of(method_config) -> VolMinNetSettings:
  """VolMinNetSettings from config.method (the dataclass holds every default)."""
  return VolMinNetSettings(**spec_lib.given(method_config, lam=float, init_t=float, network_weight_decay=float))


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  return method(context.num_classes, settings_of(method_config))


SPEC = spec_lib.MethodSpec(
  name="volminnet",
  fields=("lam", "init_t", "network_weight_decay"),
  build=_build,
  tiny={
    # The code's optimisers: W undecayed (the run's weight decay 0), the network's decay through the objective; a
    # lam large enough to move T on the digits in 3 epochs.
    "volminnet": {
      "method": {"name": "volminnet", "lam": 0.01, "init_t": 2.0, "network_weight_decay": 5e-4},
      "optimizer.weight_decay": 0.0,
    },
  },
)
