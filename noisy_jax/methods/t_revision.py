"""T-Revision (Xia et al., NeurIPS 2019, arXiv 1906.00189): a run of three stages, as the original main.py trains them.

Original code: xiaoboxia/T-Revision@b598cf2 (main.py, loss.py, tools.py, Resnet.py); its pure pieces are
noisy_jax.core.t_revision (the reweighted and revision cross entropies, T + dT, where gradients stop in beta).

  stage      objective                                network starts     config            product
  'warmup'   cross entropy                            fresh              config.warmup     T: anchor points of its
                                                                                           best-validation network's
                                                                                           training-split softmax
  'reweight' reweighted CE with T, beta detached      warm-up's best     config.reweight   -
  'stage1'   revision CE with T + dT over the         reweight's best    the run's own     - (delivers; its label
             network and dT (dT zero at the start)                       (num_epochs,      table and predictions
                                                                         optimizer)        give label issues)

main.py: (1) `n_epoch_estimate` epochs of cross entropy (optimizer_es: SGD, no momentum, lr 0.01, wd 1e-4); the
training split's softmax is recorded after every epoch and the best-validation epoch's gives T (tools.fit, then
tools.norm; main.py:153-213); (2) from that epoch's network, `n_epoch` epochs of `reweight_loss` with T (SGD momentum
0.9, lr 0.01, wd 1e-4, MultiStepLR [40, 80]; main.py:224-291); (3) from the best-validation network of (2), dT := 0
(main.py:300) and `n_epoch_revision` epochs of `reweighting_revision_loss` with T + dT, Adam lr 5e-7, wd 1e-4 over
the network and dT (main.py:85, 304-350). The stage of the method itself, (3), is named 'stage1' as every method's own
training is (noisy_jax.methods.spec.OWN_STAGE: its checkpoints, summary entry and arrays); it trains with the run's
`num_epochs` and `optimizer`, the two stages before it with the `warmup` and `reweight` config sections
(spec.Stage.config_section: their fields replace the run's).

dT is the method's own trainable parameter: `EpochProgram.init_state` adds it to the stage's params as the top-level
entry CORRECTION ([C, C], zeros) beside the network's, with the optimiser's state made for params and dT together; the
objective reads it from `params`. The network's apply ignores the extra entry. Only the revision stage has it.

config.method fields (defaults: the paper where the code differs, the code's behaviour a named option):
  percentile               the anchor filter: the anchor of class i is the most probable example below the
                           percentile-th percentile of column i (97, tools.fit on MNIST and CIFAR-10; None: plain
                           argmax, the code's CIFAR-100)
  shared_filter            False: each column filtered on a copy; True: tools.fit's in-place zeroing of the one
                           probability matrix the anchor rows are then read from (REFERENCE §13, as loss correction's)
  transition_norm          'rows' (default): each anchor row normalised to sum 1, T row-stochastic (the paper's T);
                           'tools_norm': tools.norm's `T / row_sum`, which divides column j by row j's sum (main.py:213;
                           the same T when no entry was filtered away, since softmax rows sum to 1)
  reweight_weight_gradient where gradients flow through beta in stage 'reweight' (core.t_revision.WEIGHT_GRADIENTS):
                           'none' (default, the code: loss.py:25 detaches beta)
  revision_weight_gradient the same in the revision: 'all' (default, the code: loss.py:52 keeps beta's gradient, dT's
                           only one)
  accumulate_correction    False (default, the paper): every example uses T + dT; True: loss.py:47's
                           `T = T + correction` inside the loop over the batch, example i (1-based position in the
                           global batch) uses T + i dT
  revision_weight_decay    1e-4 (main.py:85): PyTorch Adam's coupled weight decay, g <- g + wd w on every parameter
                           of the revision stage (the network's and dT), added through the objective's gradient (its
                           value adds exactly 0 to the loss), because the trainer's Adam (noisy_jax.train.optim
                           'coteaching_adam') has no weight decay. Set 0 with an optimiser that decays itself.

Where this differs from the code besides those options: T is estimated from the eval-mode softmax of the *unaugmented*
training images (noisy_jax.experiment.stages.training_probs); the code's estimate_loader reads the training set with
its training transform (random crop and flip, transformer.py) in eval mode, so its T comes from augmented images.
Its recorded probabilities are float32 (main.py:144), here float64. Model selection ('best_val') is by the trainer's
validation accuracy (argmax of the network's softmax); the code selects by the noisy validation labels, with argmax
of p T in stage 2 (main.py:258-278, 294-295), and its logged training accuracy of stages 2 and 3 is argmax p T (+ dT)
against the given labels, here argmax p. The code's reweighting and revision losses divide by the batch's size (its
last batch is smaller); here the mean is over the global batch's valid rows, the same number.
"""

from __future__ import annotations

import functools

import flax
import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import precision
from noisy_jax.core import t_revision as t_revision_lib
from noisy_jax.methods import loss_correction
from noisy_jax.methods import plain_loss
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import method as method_lib

# The top-level params entry of dT [C, C] in the revision stage (Resnet.py:77's `T_revision`, an nn.Linear weight).
CORRECTION = "t_revision_correction"
# What the warm-up stage gives the later ones: Context.products' name of the estimated T.
TRANSITION = "t_revision_transition"
TRANSITION_NORMS = ("rows", "tools_norm")
DEFAULT_PERCENTILE = loss_correction.DEFAULT_PERCENTILE  # 97, tools.fit
ORIGINAL_WEIGHT_DECAY = 1e-4  # main.py:85 (--weight_decay), Adam's in the revision


# ------------------------------------------------------------------------------------------------------------
# The transition matrix from the warm-up network (tools.fit + tools.norm).


def estimate_transition(
  probs,
  *,
  percentile: float | None = DEFAULT_PERCENTILE,
  shared_filter: bool = False,
  transition_norm: str = "rows",
) -> np.ndarray:
  """T [C, C] float64 from the warm-up network's training-split softmax `probs` [N, C]: the anchor rows
  (`loss_correction.anchor_rows`), normalised by `transition_norm`: 'rows' (each row / its sum: row-stochastic; equal to
  loss_correction.estimate_transition) or 'tools_norm' (tools.norm, tools.py:4-7: `T / T.sum(1)` broadcasts the row
  sums along the last axis, so entry [i, j] is divided by row j's sum)."""
  _checks.check_choice("transition_norm", transition_norm, TRANSITION_NORMS)
  if transition_norm == "rows":
    return loss_correction.estimate_transition(probs, percentile=percentile, shared_filter=shared_filter)
  rows = loss_correction.anchor_rows(probs, percentile=percentile, shared_filter=shared_filter)
  sums = rows.sum(axis=1)
  if np.any(sums <= 0):
    raise ValueError("an anchor row has no probability mass left (every entry filtered): use a larger percentile.")
  return rows / sums[None, :]


def estimated_transition(train_probs: np.ndarray, method_config) -> dict:
  """The warm-up stage's product (spec.Stage.product): {TRANSITION: T} from its best-validation network's softmax of
  the training split, with config.method's percentile, shared_filter and transition_norm."""
  matrix = estimate_transition(
    train_probs,
    percentile=method_config.get("percentile", DEFAULT_PERCENTILE),
    shared_filter=bool(method_config.get("shared_filter", False)),
    transition_norm=str(method_config.get("transition_norm", "rows")),
  )
  return {TRANSITION: matrix}


def _transition(context: spec_lib.Context) -> np.ndarray:
  """T of the warm-up stage (Context.products), else a given Context.transition (a method built outside a run)."""
  matrix = context.products.get(TRANSITION, context.transition)
  if matrix is None:
    raise ValueError(
      "method 't_revision' needs the transition matrix of its warm-up stage (Context.products"
      f"[{TRANSITION!r}]); noisy_jax.experiment.runs trains that stage first, or give Context.transition."
    )
  matrix = np.asarray(matrix, np.float64)
  if matrix.shape != (context.num_classes, context.num_classes):
    raise ValueError(
      f"the transition matrix has shape {matrix.shape}; [C, C] = [{context.num_classes}, {context.num_classes}] "
      "expected."
    )
  return matrix


# ------------------------------------------------------------------------------------------------------------
# The objectives of stages 'reweight' and 'stage1' (the revision).


def reweight_method(transition, *, weight_gradient: str = "none") -> method_lib.Method:
  """Stage 'reweight': the batch mean of the importance-reweighted cross entropy beta_y~ CE(p, y~) with T
  (noisy_jax.core.t_revision.reweighted_cross_entropy; loss.py:6-29), beta detached by default (loss.py:25)."""
  _checks.check_choice("reweight_weight_gradient", weight_gradient, t_revision_lib.WEIGHT_GRADIENTS)
  matrix = jnp.asarray(np.asarray(transition, np.float64), precision.float_dtype())

  def objective(logits, soft_labels, weights, valid, axis_name=None):
    per_example = t_revision_lib.reweighted_cross_entropy(
      logits, soft_labels, transition=matrix, weight_gradient=weight_gradient
    )
    return method_lib.weighted_batch_mean(per_example, weights, valid, axis_name)

  return method_lib.Method(name="t_revision_reweight", objective=method_lib.batch_objective(objective))


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def coupled_weight_decay(params, strength: float, dtype) -> jax.Array:
  """0 (a scalar of `dtype`) whose gradient with respect to `params` is strength * w for every leaf w: added to a
  loss, it adds PyTorch's coupled weight decay (`grad = grad.add(p, alpha=weight_decay)`, torch.optim.Adam) to the
  gradient and nothing to the value."""
  del params, strength
  return jnp.zeros((), dtype)


def _decay_fwd(params, strength, dtype):
  return jnp.zeros((), dtype), params


def _decay_bwd(strength, dtype, params, cotangent):
  del dtype
  return (jax.tree.map(lambda w: (cotangent * strength * w).astype(w.dtype), params),)


coupled_weight_decay.defvjp(_decay_fwd, _decay_bwd)


def _accumulated(logits, soft_labels, valid, axis_name, *, transition, correction, weight_gradient):
  """loss.py:47's accumulation: the example at 1-based position i of the *global* batch uses T + i dT (device d's
  rows follow those of the devices before it, noisy_jax.train.epoch); padding rows use T (their loss is dropped)."""
  local = logits.shape[0]
  offset = 0 if axis_name is None else lax.axis_index(axis_name) * local
  position = jnp.where(valid, offset + jnp.arange(1, local + 1), 0).astype(correction.dtype)

  def one(z, y, k):
    return t_revision_lib.revision_cross_entropy(
      z, y, transition=transition, correction=k * correction, weight_gradient=weight_gradient
    )

  return jax.vmap(one)(logits, soft_labels, position)


def method(
  transition,
  *,
  weight_gradient: str = "all",
  accumulate_correction: bool = False,
  weight_decay: float = ORIGINAL_WEIGHT_DECAY,
) -> method_lib.Method:
  """The revision stage (the method's own): the batch mean of the revision cross entropy with T + dT
  (noisy_jax.core.t_revision.revision_cross_entropy; loss.py:32-56), dT read from params[CORRECTION] and created
  there as zeros by the program's init_state (main.py:300); `weight_decay` > 0 adds `coupled_weight_decay` over every
  parameter."""
  _checks.check_choice("revision_weight_gradient", weight_gradient, t_revision_lib.WEIGHT_GRADIENTS)
  _checks.check_range("revision_weight_decay", weight_decay, 0.0, np.inf, high_open=True)
  transition = np.asarray(transition, np.float64)
  num_classes = transition.shape[0]
  matrix = jnp.asarray(transition, precision.float_dtype())

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, params, rows=None, **unused):
    del unused
    correction = params[CORRECTION]
    if accumulate_correction:
      per_example = _accumulated(
        logits,
        soft_labels,
        valid,
        axis_name,
        transition=matrix,
        correction=correction,
        weight_gradient=weight_gradient,
      )
    else:
      per_example = t_revision_lib.revision_cross_entropy(
        logits, soft_labels, transition=matrix, correction=correction, weight_gradient=weight_gradient
      )
    loss = method_lib.weighted_batch_mean(per_example, weights, valid, axis_name)
    if weight_decay:
      loss = loss + coupled_weight_decay(params, float(weight_decay), loss.dtype)
    return loss, rows

  def init_state(state):
    """The state with dT = 0 [C, C] added to its params (CORRECTION) and the optimiser's state made for both."""
    frozen = isinstance(state.params, flax.core.FrozenDict)
    params = dict(flax.core.unfreeze(state.params))
    params[CORRECTION] = t_revision_lib.initial_correction(num_classes, dtype=precision.float_dtype())
    params = flax.core.freeze(params) if frozen else params
    return state.replace(params=params, opt_state=state.tx.init(params))

  return method_lib.Method(
    name="t_revision", objective=objective, program=method_lib.EpochProgram(init_state=init_state)
  )


# config.method's fields of the revision -> `method`'s keyword arguments (the builder's signature holds the defaults).
_REVISION_FIELDS = (
  ("revision_weight_gradient", "weight_gradient", str),
  ("accumulate_correction", "accumulate_correction", bool),
  ("revision_weight_decay", "weight_decay", float),
)


def _build(method_config, context: spec_lib.Context) -> method_lib.Method:
  kwargs = {name: cast(method_config[field]) for field, name, cast in _REVISION_FIELDS if field in method_config}
  return method(_transition(context), **kwargs)


def _build_reweight(method_config, context: spec_lib.Context) -> method_lib.Method:
  if "reweight_weight_gradient" in method_config:
    return reweight_method(_transition(context), weight_gradient=str(method_config.reweight_weight_gradient))
  return reweight_method(_transition(context))


# ------------------------------------------------------------------------------------------------------------
# The stages and the spec.

# (1) Cross entropy from a fresh network (the run's first key), with config.warmup's epochs and optimiser; its
# best-validation network's softmax of the training split gives T (main.py:193-213). Recorded and checkpointed.
WARMUP = spec_lib.Stage(
  "warmup",
  key_stream=0,
  build=plain_loss.cross_entropy_stage,
  config_section="warmup",
  product=estimated_transition,
  product_from="best_val",
)
# (2) The reweighted loss with T from the warm-up's best-validation network (main.py:224-226), config.reweight's
# epochs and optimiser.
REWEIGHT = spec_lib.Stage(
  "reweight",
  key_stream=1,
  build=_build_reweight,
  config_section="reweight",
  network="previous_best",
)
# (3) The revision from the reweighting's best-validation network (main.py:294-299), the run's epochs and optimiser:
# the method's own stage, which delivers the network and scores the labels.
REVISION = spec_lib.Stage("stage1", key_stream=2, network="previous_best", delivers=True, scores_labels=True)


def stages(method_config) -> tuple[spec_lib.Stage, ...]:
  """Warm-up, reweighting, revision (module docstring)."""
  del method_config
  return (WARMUP, REWEIGHT, REVISION)


# The tiny runs' stage sections: SGD as the code's stages 1 and 2 (no momentum; momentum 0.9 with a step), a few
# epochs each; the revision is the run's own (tiny.py: 3 epochs) with Adam at a learning rate that moves dT.
_TINY_WARMUP = {
  "num_epochs": 2,
  "optimizer": {
    "name": "sgd",
    "learning_rate": 0.05,
    "momentum": 0.0,
    "nesterov": False,
    "weight_decay": 1e-4,
    "lr_boundaries": (),
    "lr_decay": 0.1,
  },
}
_TINY_REWEIGHT = {
  "num_epochs": 2,
  "optimizer": {
    "name": "sgd",
    "learning_rate": 0.05,
    "momentum": 0.9,
    "nesterov": False,
    "weight_decay": 1e-4,
    "lr_boundaries": (1,),
    "lr_decay": 0.1,
  },
}
_TINY_ADAM = {"name": "coteaching_adam", "learning_rate": 1e-3, "decay_start": 1_000_000}

SPEC = spec_lib.MethodSpec(
  name="t_revision",
  fields=(
    "percentile",
    "shared_filter",
    "transition_norm",
    "reweight_weight_gradient",
    "revision_weight_gradient",
    "accumulate_correction",
    "revision_weight_decay",
  ),
  build=_build,
  tiny={
    "t_revision": {
      "method": {"name": "t_revision", "percentile": 97.0},
      "warmup": _TINY_WARMUP,
      "reweight": _TINY_REWEIGHT,
      "optimizer": _TINY_ADAM,
    },
    # The code's options: the shared filter, tools.norm, T + i dT along the batch.
    "t_revision_original": {
      "method": {
        "name": "t_revision",
        "percentile": 97.0,
        "shared_filter": True,
        "transition_norm": "tools_norm",
        "accumulate_correction": True,
      },
      "warmup": _TINY_WARMUP,
      "reweight": _TINY_REWEIGHT,
      "optimizer": _TINY_ADAM,
    },
  },
  stages=stages,
)
