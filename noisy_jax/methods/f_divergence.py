"""The f-divergence method (Wei & Liu, "When Optimizing f-divergence is Robust with Label Noise", ICLR 2021, arXiv
2011.03687): a cross-entropy warm-up, then the variational f-divergence between the classifier's predictions and the
noisy labels maximised, its peers drawn as Peer Loss's. The pure pieces (each divergence's activation g and conjugate
f*, the pair loss) are noisy_jax.core.f_divergence's.

Original code: UCSC-REAL/Robust-f-divergence-measures@93d9efe (CIFAR-10/runner_CE.py the warm-up, CIFAR-10/runner.py
the f-divergence stage; CIFAR-100's pair). The replication: KlemenVovk/noisy-labels (f_divergence/f_divergence.py,
f_divergence/utils.py).

The loss of step s (global batch of B rows with logits z_i [C] and given labels y_i; peers x'_i, y'_i):

  L = sum_i v_i l_i / sum_i v_i,   l_i = -g(p_{y_i}(x_i)) + f*(g(p_{y'_i}(x'_i)))   (`core.f_divergence.pair_loss`)

(v: valid rows), minus the variational lower bound of D_f (runner.py:139-143: activation(prob_reg) -
conjugate(prob_peer), the code's activation(x) = -mean g(x), conjugate(x) = -mean f*(g(x))); p_y the softmax
probability of the label (runner.py:94-103: no log; `prob_epsilon` the CIFAR-100 code's + 1e-5). The peers: each
step x' = the inputs of B training rows n1 and y' = the given labels of B other rows n2, two independent uniform draws
over the whole training split, augmented as the batch, and a second train-mode forward on x' (runner.py:127-138:
input1 and target2 from two batches of the shuffled peer loader over the training split,
noise_data_cifar_10.py:213-228).
The epoch is noisy_jax.methods.peer_loss's program (`peer_loss.make_epoch_fn` with this pair loss: its docstring
gives the order, the peer rows' keys, the augmentation, the BatchNorm statistics and the mesh split), S = ceil(N / B)
steps of the run's optimiser.

The run (`stages`), runner_CE.py then runner.py:
  'warmup'  cross entropy from a fresh network, config.warmup's epochs and optimiser (runner_CE.py: 240 epochs, SGD
            momentum 0.9, weight decay 5e-4, lr 0.1 / 0.01 / 0.001 / 0.0001 from epochs 0 / 60 / 120 / 180, :110-117)
  'stage1'  the f-divergence loss from the warm-up's best network (runner.py:212 loads the network runner_CE.py:126-128
            saved at each validation accuracy >= the best), a new optimiser: the run's num_epochs and optimizer
            (runner.py:21, 224-234: 100 epochs, SGD momentum 0.9, weight decay 5e-4, lr 0.01 / 1e-3 / 1e-4 / 1e-5 from
            epochs 0 / 30 / 60 / 90). `warmup_start='final'` starts from the warm-up's last network instead.
With `warmup=False` the run is the f-divergence stage alone from a fresh network (the README's hint (2) calls a
warm-up or a pre-trained CE network what makes the training stable).

config.method fields:
  divergence    one of core.f_divergence.DIVERGENCES (default 'Total-Variation': the replication's default,
                f_divergence.py:26, and the first of the READMEs' "used divergence list"; its g is bounded, the
                paper's robust case without bias correction [recalled]). 'Jenson-Shannon' is the code's spelling;
                'Neyman' is the paper's pair f*(g(v)), 'Neyman-code' the code's (runner.py:73-76: f*(v)).
  prob_epsilon  0 (default, CIFAR-10/runner.py:103 and the replication's utils.py:26: v = p_y) or the offset added to
                p_y (CIFAR-100/runner.py:105: 1e-5, `core.f_divergence.CIFAR100_PROB_EPSILON`); in [0, 1].
  warmup        True (default: a cross-entropy warm-up stage first) or False.
  warmup_start  'best' (default, runner.py:212) or 'final': the warm-up network the f-divergence stage starts from.

Differences from the original code:
- Model selection: the code keeps the f-divergence stage's network of the highest f-score on the validation split
  (runner.py:253-265: f_calculate, minus the validation loss with its own peers, :181-207; the replication likewise,
  f_divergence.py:193-209). The trainer selects every stage by validation accuracy, so the run's 'best' network here
  is the one of the best validation accuracy; the f-score is not computed. The warm-up's best network is chosen by
  validation accuracy in both codes (runner_CE.py:126, the replication's f_divergence.py:194-203), as here.
- The peers: the code draws input1 and target2 as the first two batches of a freshly shuffled loader each step (2B
  distinct rows, without replacement within a step); here two independent draws with replacement (Peer Loss's
  program). The code skips a last batch smaller than B (runner.py:114); here it is filled up with invalid rows and
  the loss is the mean over its valid rows, each with its own peer pair.
- The warm-up's cross entropy: the code's CrossEntropyLossStable is -log(p_y + 1e-5) (runner_CE.py:30-39); here the
  exact cross entropy (plain_loss's warm-up stage, as GLS's and PES's).
- The code builds a new SGD every epoch (runner.py:234, runner_CE.py:117: the momentum restarts each epoch); here one
  optimiser per stage, its schedule counting from the stage's first step.
- The replication (f_divergence.py:113-132) trains both stages in one Lightning run, the f-divergence stage after
  `warmup_epochs - 1` epochs, with its own optimiser and scheduler; here two stages, each its own epochs and schedule.
- Soft labels (a table another method relabelled): v = sum_c y_c p_c; for one-hot labels p_y as the code's.
- Bias correction (runner_bias_*.py: a transition-matrix correction of the product term, hard-coded for 10 classes)
  is not offered; the READMEs call its effect negligible for the listed divergences.
- A row-sharded label table and streamed inputs are refused (the peers need the resident split).
"""

from __future__ import annotations

import dataclasses
import functools

from jax import lax
import jax.numpy as jnp

from noisy_jax.core import _checks
from noisy_jax.core import f_divergence as fdiv_core
from noisy_jax.methods import peer_loss
from noisy_jax.methods import plain_loss
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import method as method_lib

DEFAULT_DIVERGENCE = "Total-Variation"
WARMUP_STARTS = ("best", "final")


@dataclasses.dataclass(frozen=True)
class FDivergenceSettings:
  """The f-divergence method's settings (module docstring).

  Attributes:
    divergence: one of core.f_divergence.DIVERGENCES.
    prob_epsilon: the offset added to p_y, in [0, 1] (CIFAR-100's code: 1e-5).
    warmup: a cross-entropy warm-up stage first.
    warmup_start: 'best' or 'final': the warm-up network the f-divergence stage starts from.
  """

  divergence: str = DEFAULT_DIVERGENCE
  prob_epsilon: float = 0.0
  warmup: bool = True
  warmup_start: str = "best"

  def __post_init__(self):
    fdiv_core.check_divergence(self.divergence)
    _checks.check_range("prob_epsilon", self.prob_epsilon, 0.0, 1.0)
    if not isinstance(self.warmup, bool):
      raise ValueError(f"warmup={self.warmup!r} must be True or False.")
    _checks.check_choice("warmup_start", self.warmup_start, WARMUP_STARTS)


def batch_loss(logits, labels, peer_logits, peer_labels, valid, axis_name=None, *, settings: FDivergenceSettings):
  """L = sum_i v_i l_i / sum_i v_i over the global batch (`core.f_divergence.pair_loss` l [B]; logits and labels
  [B, C], valid [B]); the sums psum-ed over `axis_name`."""
  per_example = fdiv_core.pair_loss(
    logits, labels, peer_logits, peer_labels, divergence=settings.divergence, prob_epsilon=settings.prob_epsilon
  )
  v = valid.astype(per_example.dtype)
  total, count = jnp.sum(v * per_example), jnp.sum(v)
  if axis_name is not None:
    total, count = lax.psum(total, axis_name), lax.psum(count, axis_name)
  return total / jnp.maximum(count, 1.0)


def make_epoch_fn(mesh, *, settings: FDivergenceSettings, **options):
  """`epoch_fn(state, table, images, key, epoch) -> (state, table, metrics)`: peer loss's program
  (`peer_loss.make_epoch_fn`, its options) with `batch_loss` as the step's loss."""
  pair = lambda *args: batch_loss(*args, settings=settings)
  program_settings = peer_loss.PeerLossSettings(alpha=0.0)  # the alpha is not used with a pair loss
  name = "The f-divergence method"
  return peer_loss.make_epoch_fn(mesh, settings=program_settings, pair_loss=pair, name=name, **options)


def method(settings: FDivergenceSettings) -> method_lib.Method:
  """The f-divergence stage: its epoch program (`make_epoch_fn`). The objective (the batch's own term, the weighted
  mean of -g(p_y)) serves only a caller of the shared step; the method's program does not use it."""

  def objective(logits, soft_labels, weights, valid, axis_name=None):
    v = fdiv_core.label_probability(logits, soft_labels, prob_epsilon=settings.prob_epsilon)
    own = -fdiv_core.activation(v, divergence=settings.divergence).astype(logits.dtype)
    return method_lib.weighted_batch_mean(own, weights, valid, axis_name)

  return method_lib.Method(
    name="f_divergence",
    objective=method_lib.batch_objective(objective),
    program=method_lib.own_program(functools.partial(make_epoch_fn, settings=settings)),
  )


def settings_of(method_config) -> FDivergenceSettings:
  """FDivergenceSettings from config.method (ValueError naming a value out of range)."""
  return FDivergenceSettings(
    **spec_lib.given(method_config, divergence=str, prob_epsilon=float, warmup=bool, warmup_start=str)
  )


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  del context
  return method(settings_of(method_config))


# The warm-up: cross entropy from a fresh network with config.warmup's epochs and optimiser (runner_CE.py).
WARMUP = spec_lib.Stage("warmup", key_stream=0, build=plain_loss.cross_entropy_stage, config_section="warmup")


def stages(method_config) -> tuple[spec_lib.Stage, ...]:
  """The warm-up then the f-divergence stage from its best (or final) network with a new optimiser, or the
  f-divergence stage alone (module docstring)."""
  settings = settings_of(method_config)
  if not settings.warmup:
    return (spec_lib.OWN_STAGE,)
  network = "previous_best" if settings.warmup_start == "best" else "previous_final"
  own = spec_lib.Stage("stage1", key_stream=1, network=network, delivers=True, scores_labels=True)
  return (WARMUP, own)


# The tiny runs: 2 warm-up epochs then the run's 3 of Total-Variation from the warm-up's best network; KL with
# CIFAR-100's epsilon trained directly.
SPEC = spec_lib.MethodSpec(
  name="f_divergence",
  fields=("divergence", "prob_epsilon", "warmup", "warmup_start"),
  build=_build,
  tiny={
    "f_divergence": {"method": {"name": "f_divergence"}, "warmup": {"num_epochs": 2}},
    "f_divergence_direct": {
      "method": {"name": "f_divergence", "divergence": "KL", "prob_epsilon": 1e-5, "warmup": False},
    },
  },
  stages=stages,
)
