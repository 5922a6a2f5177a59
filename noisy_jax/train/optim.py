"""The optimiser of every run: SGD with momentum, coupled weight decay, a per-epoch lr schedule, optional clipping.

`make_optimizer(settings, steps_per_epoch, num_epochs)` builds, from the fields of `settings` (a run's
`noisy_jax.train.settings.OptimizerSettings`, read from its config.optimizer by noisy_jax.experiment.settings):

  learning_rate     base lr
  momentum          SGD momentum (default 0.9); nesterov (default False)
  weight_decay      coupled L2 (PyTorch SGD's `weight_decay`): g <- g + wd * w before momentum (default 0)
  lr_schedule       'piecewise' (default) | 'cosine' | 'per_epoch'; all change the lr only at epoch boundaries:
    'piecewise'     lr_e = learning_rate * lr_decay ** #{b in lr_boundaries : b <= e}   (0-based epoch e;
                    lr_decay default 0.1, lr_boundaries default ())
    'cosine'        lr_e = lr_min + (learning_rate - lr_min) (1 + cos(pi e / T)) / 2, T = cosine_epochs
                    (default: the stage's num_epochs), lr_min default 0. PyTorch's CosineAnnealingLR(T_max=T,
                    eta_min=lr_min) with `scheduler.step()` called once after each epoch, as APL's main.py does
                    (Ma et al., ICML 2020, github.com/HanxunH/Active-Passive-Losses). Epoch 0 trains at
                    learning_rate; epoch T - 1, the last of a T-epoch run, at lr_min + (lr - lr_min) sin^2(pi/2T).
    'per_epoch'     lr_e = learning_rate * lr_factors[e], a factor for each of the stage's epochs (lr_factors: at
                    least num_epochs numbers >= 0; read by this schedule only): PyTorch's LambdaLR(lr_lambda=
                    lambda e: lr_factors[e]) stepped once after each epoch (the CIFAR-N replication's Peer Loss and
                    CORES² plans, lr / (1 + alpha_e) and lr / (1 + beta_e)).
  grad_clip_norm    0 (default: off) or c > 0: g <- g * min(1, c / ||g||_2), ||g||_2 the global norm over every
                    parameter, on the raw device-averaged gradient, before weight decay is added. PyTorch's
                    `clip_grad_norm_(model.parameters(), c)` before a SGD step with coupled weight decay (APL's
                    trainer.py, c = 5). PyTorch divides by ||g|| + 1e-6: a clipped norm 1e-6 / ||g|| relative smaller
                    than here (not reproduced).

  l1                0 (default: off) or delta > 0: g <- g + delta sign(w) on every parameter, the gradient of
                    delta ||theta||_1 added to the batch loss (Active Negative Loss, Ye et al. NeurIPS 2023: its
                    trainer adds delta * sum |p| over model.parameters() to the loss before backward, so the term is
                    clipped with the loss's gradient; sign(0) = 0, as torch's abs). The logged loss leaves it out.

  backbone_lr_scale 1.0 (default: every parameter at the schedule's lr) or s >= 0: the update of every parameter outside
                    the classifier (the model's last Dense layer, `models.classifier_name`) is multiplied by s, so the
                    backbone trains at lr * s and the classifier at lr. PyTorch's SGD with two parameter groups,
                    {backbone: lr * s}, {classifier: lr} (the momentum buffer does not depend on the lr, so scaling the
                    final update is the same step), a common fine-tuning choice for pretrained weights
                    (config.model.pretrained). s = 0 trains the classifier alone (the backbone stays where it starts).

  layer_decay       1.0 (default: off) or 0 < d < 1: layer-wise learning-rate decay for transformers (BEiT, Bao et al.,
                    ICLR 2022; the fine-tuning recipe of MAE and DINOv2's evaluations): the update of every parameter of
                    layer l is multiplied by d ** (L - l), where the model numbers its top-level modules
                    (`models.layer_index`: a ViT's embeddings 0, block i i + 1, the final norm, projection and head
                    L = depth + 1), so the head trains at lr and each block below it at d times the block above.
                    PyTorch's one parameter group per layer with lr * d ** (L - l).

  trainable_modules None or () (default: every parameter trains) or a list of top-level modules of the network's
                    params: a module trains when its name starts with one of the entries (CLASSIFIER stands for the
                    model's classifier, `models.classifier_name`); every other parameter is frozen: zero update, no
                    weight decay, no optimiser state (optax.multi_transform with set_to_zero). PyTorch's
                    `requires_grad = False` on the frozen modules with an optimiser over the others (PES's refine
                    stages: the last block and the classifier re-initialised and trained alone). BatchNorm statistics
                    of frozen modules still move in train mode, as PyTorch's.

The chain is: L1 (if on) -> clip (if on) -> add weight decay -> SGD with momentum and the schedule (optax.sgd: the
momentum buffer m <- momentum * m + g, update -lr * m, as PyTorch's SGD with dampening 0) -> backbone scale (if not
1) -> layer decay (if not 1); with trainable_modules, the whole chain sees only the trainable parameters.

`name` = 'sgd' (default, all of the above), 'adam' (PyTorch's Adam: the same L1, clip, coupled weight decay and lr
schedule, then Adam's moments with betas (`beta1`, `beta2`, default 0.9, 0.999) and eps 1e-8 in place of SGD's
momentum: T-Revision's revision stage) or 'coteaching_adam': Co-teaching's Adam (both Co-teaching repositories'
main.py), lr `learning_rate` and beta1 0.9 until epoch `decay_start` (0-based), then lr decayed linearly towards 0 at
the stage's num_epochs and beta1 `beta1_after` (0.1); beta2 0.999, no weight decay, optional L1 and clipping first
(noisy_jax.train.coteaching_adam.adam_schedule: what PyTorch's Adam does with its lr and betas set at each epoch's
start), and the backbone scale last.
"""

from __future__ import annotations

from collections.abc import Callable
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax

from noisy_jax.core import _checks
from noisy_jax.core import precision
from noisy_jax.train import coteaching_adam
from noisy_jax.train.settings import OptimizerSettings  # pylint: disable=g-importing-member

LR_SCHEDULES = ("piecewise", "cosine", "per_epoch")
OPTIMIZERS = ("sgd", "adam", "coteaching_adam")
ADAM_BETAS = (0.9, 0.999)  # torch.optim.Adam's defaults, as its eps
ADAM_EPS = 1e-8
CLASSIFIER = "<classifier>"  # in trainable_modules: the model's classifier, whatever its name


def _or(value: float | None, default: float) -> float:
  """`value`, or the optimiser's own `default` when the settings leave it None."""
  return default if value is None else value


def _cosine_epochs(settings: OptimizerSettings, num_epochs: int | None) -> int:
  """T of the cosine schedule: settings.cosine_epochs when set (> 0), else the stage's num_epochs."""
  value = settings.cosine_epochs or num_epochs
  if value is None:
    raise ValueError("lr_schedule='cosine' needs optimizer.cosine_epochs or the stage's num_epochs (neither given).")
  if int(value) != value or value < 1:
    raise ValueError(f"cosine_epochs={value!r} must be an integer >= 1 (the cosine's period T in epochs).")
  return int(value)


def _per_epoch_schedule(learning_rate, lr_factors, steps_per_epoch: int, num_epochs: int | None) -> optax.Schedule:
  """lr_e = learning_rate * lr_factors[e] of the step count's epoch e (module docstring, 'per_epoch')."""
  factors = np.asarray(lr_factors, np.float64)
  if factors.ndim != 1 or not factors.size or not np.all(np.isfinite(factors)) or np.any(factors < 0):
    raise ValueError(
      f"lr_schedule='per_epoch' needs optimizer.lr_factors, a list of finite numbers >= 0, one per epoch; "
      f"got {tuple(lr_factors)!r}."
    )
  if num_epochs is not None and num_epochs > factors.size:
    raise ValueError(f"optimizer.lr_factors has {factors.size} factor(s) for a stage of {num_epochs} epochs.")
  rates = jnp.asarray(learning_rate * factors, precision.float_dtype())

  def schedule(count):
    epoch = jnp.minimum(jnp.asarray(count) // steps_per_epoch, factors.size - 1)
    return rates[epoch]

  return schedule


def learning_rate_schedule(
  settings: OptimizerSettings, steps_per_epoch: int, num_epochs: int | None = None
) -> optax.Schedule:
  """The per-epoch lr schedule of `settings.lr_schedule` (module docstring) as an optax schedule of the step count.

  Args:
    settings: the optimiser's settings (learning_rate and the schedule's fields).
    steps_per_epoch: optimiser steps per epoch (epoch e covers steps [e * steps_per_epoch, (e + 1) * steps_per_epoch)).
    num_epochs: the stage's epochs, the cosine's default T and the length 'per_epoch' needs (unused by 'piecewise').

  Raises:
    ValueError: an unknown lr_schedule, a negative lr_min, a missing / non-positive cosine period, lr_factors
      with another schedule, or lr_factors that are not one number >= 0 per epoch.
  """
  kind = settings.lr_schedule
  _checks.check_choice("lr_schedule", kind, LR_SCHEDULES)
  learning_rate = settings.learning_rate
  if settings.lr_factors and kind != "per_epoch":
    raise ValueError(f"optimizer.lr_factors is read by lr_schedule='per_epoch' only (lr_schedule={kind!r}).")
  if kind == "per_epoch":
    return _per_epoch_schedule(learning_rate, settings.lr_factors, steps_per_epoch, num_epochs)
  if kind == "piecewise":
    boundaries = {epoch * steps_per_epoch: settings.lr_decay for epoch in settings.lr_boundaries}
    return optax.piecewise_constant_schedule(learning_rate, boundaries)
  period = _cosine_epochs(settings, num_epochs)
  lr_min = settings.lr_min
  _checks.check_range("lr_min", lr_min, 0.0, np.inf)

  def schedule(count):
    # (1 + cos(pi e / T)) / 2 written as sin^2(pi (T - e) / 2T): the same value for every e, without float32's
    # cancellation near e = T (the last epoch's lr, ~2e-4 of the base lr at T = 120, keeps ~1e-7 relative precision).
    epoch = jnp.asarray(count) // steps_per_epoch
    remaining = (period - epoch).astype(precision.float_dtype())
    return lr_min + (learning_rate - lr_min) * jnp.square(jnp.sin((0.5 * math.pi / period) * remaining))

  return schedule


def make_optimizer(
  settings: OptimizerSettings,
  steps_per_epoch: int,
  num_epochs: int | None = None,
  *,
  classifier: str | None = None,
  layers: Callable[[str], tuple[int, int]] | None = None,
) -> optax.GradientTransformation:
  """`optimizer_chain`, then the layer decay (`scale_by_layer`, when settings.layer_decay is not 1), restricted to
  settings.trainable_modules when set (`train_only`; module docstring). layers: the model's `models.layer_index`.

  Raises:
    ValueError: those of `optimizer_chain`; trainable_modules not a list of names; when the optimizer is
      initialised, an entry that names no top-level module of the params; a layer_decay outside (0, 1] or one
      other than 1 for a model without layers.
  """
  chain = optimizer_chain(settings, steps_per_epoch, num_epochs, classifier=classifier)
  decay = settings.layer_decay
  _checks.check_range("layer_decay", decay, 0.0, 1.0, low_open=True)
  if decay != 1.0:
    chain = optax.chain(chain, scale_by_layer(decay, layers))
  trainable = settings.trainable_modules
  return chain if not trainable else train_only(chain, trainable, classifier)


def optimizer_chain(
  settings: OptimizerSettings, steps_per_epoch: int, num_epochs: int | None = None, *, classifier: str | None = None
) -> optax.GradientTransformation:
  """SGD with momentum, coupled (PyTorch-style, before momentum) weight decay on every parameter, the lr schedule of
  `learning_rate_schedule`, and first, when on, the L1 term's gradient (`l1` > 0) and global-norm clipping
  (`grad_clip_norm` > 0) of the raw gradient; last, when `backbone_lr_scale` is not 1, the update of every parameter
  outside `classifier` multiplied by that scale (module docstring). With the scale at 1 the transformation (and its
  state, what checkpoints hold) is the one without the field.

  Args:
    settings: the optimiser's settings (module docstring).
    steps_per_epoch: optimiser steps per epoch (the schedules change at epoch boundaries).
    num_epochs: the stage's epochs (the cosine's default period; coteaching_adam's end).
    classifier: the name of the model's classifier, a top-level key of its params (`models.classifier_name`); needed
      only when backbone_lr_scale is not 1.

  Raises:
    ValueError: a negative or non-finite grad_clip_norm, l1 or backbone_lr_scale, a backbone_lr_scale other than 1
      without `classifier`, and the schedule's errors; when the optimizer is initialised, a `classifier` that is not a
      top-level key of the params.
  """
  clip = settings.grad_clip_norm
  _checks.check_range("grad_clip_norm", clip, 0.0, np.inf, high_open=True)
  l1 = settings.l1
  _checks.check_range("l1", l1, 0.0, np.inf, high_open=True)
  backbone_scale = settings.backbone_lr_scale
  _checks.check_range("backbone_lr_scale", backbone_scale, 0.0, np.inf, high_open=True)
  last = [] if backbone_scale == 1.0 else [scale_backbone(backbone_scale, classifier)]
  steps = [add_l1_gradient(l1)] if l1 > 0 else []
  steps += [optax.clip_by_global_norm(clip)] if clip > 0 else []
  name = settings.name
  _checks.check_choice("optimizer name", name, OPTIMIZERS)
  if name == "coteaching_adam":
    if num_epochs is None:
      raise ValueError("optimizer 'coteaching_adam' needs the stage's num_epochs (its lr decays to 0 there).")
    return optax.chain(
      *steps,
      coteaching_adam.adam_schedule(
        settings.learning_rate,
        int(num_epochs),
        settings.decay_start,
        steps_per_epoch=steps_per_epoch,
        beta1=_or(settings.beta1, coteaching_adam.ORIGINAL_BETA1),
        beta1_after=_or(settings.beta1_after, coteaching_adam.ORIGINAL_BETA1_AFTER),
      ),
      *last,
    )
  if name == "adam":
    steps += [
      optax.add_decayed_weights(settings.weight_decay),
      optax.adam(
        learning_rate_schedule(settings, steps_per_epoch, num_epochs),
        b1=_or(settings.beta1, ADAM_BETAS[0]),
        b2=_or(settings.beta2, ADAM_BETAS[1]),
        eps=ADAM_EPS,
      ),
    ]
    return optax.chain(*steps, *last)
  steps += [
    optax.add_decayed_weights(settings.weight_decay),
    optax.sgd(
      learning_rate_schedule(settings, steps_per_epoch, num_epochs),
      momentum=settings.momentum,
      nesterov=settings.nesterov,
    ),
  ]
  return optax.chain(*steps, *last)


def trainable_names(params, entries, classifier: str | None) -> set:
  """The top-level modules of `params` whose name starts with one of `entries` (CLASSIFIER: `classifier`).

  Raises:
    ValueError: naming the entry and the params' modules when an entry matches none, or CLASSIFIER without a
      known classifier.
  """
  names = set()
  for entry in entries:
    if entry == CLASSIFIER:
      if classifier is None:
        raise ValueError(f"trainable_modules names {CLASSIFIER!r}, but this model's classifier is not known.")
      entry = classifier
    matched = {name for name in params if str(name).startswith(entry)}
    if not matched:
      raise ValueError(
        f"trainable_modules entry {entry!r} names no module of the network (its modules: "
        f"{', '.join(map(repr, params))})."
      )
    names |= matched
  return names


def train_only(chain: optax.GradientTransformation, entries, classifier: str | None) -> optax.GradientTransformation:
  """`chain` on the parameters of the top-level modules `trainable_names(params, entries, classifier)`, a zero
  update (and no state) for every other parameter.

  Raises:
    ValueError: `entries` not a list of strings.
  """
  entries = tuple(entries)
  if not all(isinstance(entry, str) for entry in entries):
    raise ValueError(f"trainable_modules={entries!r} must be a list of module names (or name prefixes).")

  def labels(params):
    names = trainable_names(params, entries, classifier)
    return jax.tree_util.tree_map_with_path(lambda path, _: path[0].key in names, params)

  return optax.multi_transform({True: chain, False: optax.set_to_zero()}, labels)


def backbone_mask(params, classifier: str):
  """The tree of `params` with True at every leaf outside the top-level module `classifier`, False inside it.

  Raises:
    ValueError: naming the top-level modules when `classifier` is not one of them.
  """
  if classifier not in params:
    raise ValueError(
      f"backbone_lr_scale: the classifier {classifier!r} is not a module of the network (its modules: "
      f"{', '.join(map(repr, params))})."
    )
  return jax.tree_util.tree_map_with_path(lambda path, _: path[0].key != classifier, params)


def scale_backbone(scale: float, classifier: str | None) -> optax.GradientTransformation:
  """u <- scale * u for every parameter outside the top-level module `classifier` (`backbone_mask`), the classifier's
  updates unchanged: placed after the lr, the backbone trains at lr * scale.

  Raises:
    ValueError: when `classifier` is None (a model without a known classifier).
  """
  if classifier is None:
    raise ValueError(
      f"optimizer.backbone_lr_scale={scale} scales the parameters outside the classifier, but this model's classifier "
      "is not known (noisy_jax.models.classifier_name): leave backbone_lr_scale at 1 for it."
    )
  return optax.masked(optax.scale(scale), lambda params: backbone_mask(params, classifier))


def scale_by_layer(decay: float, layers: Callable[[str], tuple[int, int]] | None) -> optax.GradientTransformation:
  """u <- decay ** (L - l) * u for the parameters of each top-level module, (l, L) = layers(its name) (module
  docstring, layer_decay). Stateless.

  Raises:
    ValueError: when `layers` is None (the model numbers no layers).
  """
  if layers is None:
    raise ValueError(
      f"optimizer.layer_decay={decay} needs a model that numbers its layers (noisy_jax.models.layer_index: the ViTs); "
      "leave layer_decay at 1 for this one."
    )

  def update(updates, state, params=None):
    del params
    scaled = {}
    for name, tree in updates.items():
      index, top = layers(name)
      scaled[name] = jax.tree.map(lambda u, f=decay ** (top - index): u * jnp.asarray(f, u.dtype), tree)
    return type(updates)(scaled), state

  return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def add_l1_gradient(strength: float) -> optax.GradientTransformation:
  """g <- g + strength * sign(w) for every parameter w: the gradient of strength * sum |w| (sign(0) = 0)."""

  def update(updates, state, params=None):
    if params is None:
      raise ValueError("the L1 term needs the parameters: call the optimizer's update with params.")
    return jax.tree.map(lambda g, w: g + strength * jnp.sign(w).astype(g.dtype), updates, params), state

  return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def at_epoch(opt_state, count):
  """`opt_state` with the step count of every lr schedule (optax's ScaleByScheduleState) set to `count` (int, or
  a traced int), so that the next update uses the schedule's rate at that count: DivideMix (whose epochs have a
  data-dependent number of steps) sets it to the epoch's first step, (epoch - 1) x steps_per_epoch, so a schedule
  written in epochs gives the epoch's rate. Other state (momentum, Adam's bias-correction count) is untouched.
  Works on stacked states (a pair of networks: counts [2])."""

  def reset(node):
    if isinstance(node, optax.ScaleByScheduleState):
      return node._replace(count=jnp.full_like(node.count, count))
    return node

  return jax.tree.map(reset, opt_state, is_leaf=lambda node: isinstance(node, optax.ScaleByScheduleState))
