"""Training methods: a batch objective that reads the label table, plus a label-table policy.

A method is built from `config.method` (an ml_collections ConfigDict) by `make(method_config)`:

  name = 'loss'                any loss of noisy_jax.core.losses, `loss` = its name, `loss_kwargs` = its
                               hyper-parameters, `label_smoothing` (default 0) = eps of the smoothed targets
                               (1 - eps) y + eps / C
  name = 'truncated_lq'        Zhang & Sabuncu (NeurIPS 2018) alternating convex search (ACS): the objective is
                               (1/B) sum_i w_i (Lq_i - Lq(k)); before epoch `prune_start` and every `prune_every`
                               epochs after it, w_i = [p_y(x_i) > k] over the training set, with p computed by the
                               best-validation parameters (`prune_params='best_val'`, the paper) or the current ones
                               (`prune_params='current'`).
  name = 'joint_optimization'  Tanaka et al. (CVPR 2018) stage 1: Lc + alpha Lp + beta Le against the table's soft
                               labels; every epoch records the softmax of each example into the history ring; from
                               epoch `begin` on, relabels (soft or hard) from the mean of the last H epochs.
                               Stage 2 (a fresh network, CE on the stage-1 labels) is run by the trainer.
  name = 'encouraging'         Zhao et al. (AAAI 2022) encouraging loss with `log_end`, optional label smoothing.
  name = 'loss_correction'     Patrini et al. (CVPR 2017) forward or backward corrected cross entropy
                               (`correction`) with a transition matrix T (noisy_jax.methods.loss_correction):
                               `transition` 'known' (the run's synthetic noise model), 'estimated' (anchor points of a
                               cross-entropy network trained first on the same labels for the same epochs, `percentile`,
                               default 97; `shared_filter` reproduces the original code's estimate) or an explicit [C,
                               C] matrix. `make` takes the resolved T (`transition=`); noisy_jax.experiment.runs
                               resolves it.
  name = 'elr'                 Liu et al. (NeurIPS 2020) early-learning regularisation: CE + `lam` log(1 - <t_i, p_i>)
                               with each example's target t_i [C] a running average (momentum `beta`) of its own
                               clamped predictions, kept in the table's method rows (noisy_jax.methods.elr).
  name = 'sop'                 Liu et al. (ICML 2022) sparse over-parameterisation: per-example u_i and v_i [C] in
                               the table's method rows, trained with the network by plain SGD (`lr_u`, `lr_v`;
                               initialised N(0, `init_std`^2)); loss CE(p~) + MSE (noisy_jax.methods.sop), plus SOP+'s
                               class-balance term with `ratio_balance` > 0 (`balance_detach_v`: the original's sg(V)).
  name = 'coteaching'          Han et al. (NeurIPS 2018) Co-teaching: two networks, each updated on the `forget_rate`
                               fraction of smallest-loss examples of its peer, R(e) ramped over `num_gradual` epochs
                               (`ramp` 'paper' | 'original'); `plus=True` is Co-teaching+ (Yu et al., ICML 2019):
                               only examples whose predictions disagree, from epoch `init_epoch` (0-based) on.
                               `normalise_twice` reproduces the original's extra 1/n (noisy_jax.methods.coteaching).
  name = 'dividemix'           Li et al. (ICLR 2020) DivideMix: two networks, `warm_up` epochs of CE (+ negative
                               entropy with `warmup_penalty`), then per epoch a GMM division of each network's losses
                               (`loss_window` epochs averaged), co-divide, label co-refinement / co-guessing with
                               `temperature`, MixMatch (`alpha`), Lx + `lambda_u` ramp Lu (+ the uniform-prior
                               `penalty`), `p_threshold` (noisy_jax.methods.dividemix_train; `lu_reduction`).
  name = 'elr_plus'            Liu et al. (NeurIPS 2020) ELR+: two networks, each with a weight average (EMA,
                               `ema_alpha`, `ema_update`, `ema_step`); network m's targets come from the other's
                               average; mixup (`mixup_alpha`) of inputs, labels and targets; the ELR term (`lam`,
                               `beta`) ramped over `coef_step` steps; `warm_up` epochs of CE first;
                               `reweight_labels` (default: iff C = 100, the original's rule)
                               (noisy_jax.methods.elr_plus_train).

Every builder returns a `noisy_jax.train.method.Method`; its docstring gives the objective's signature.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import label_issues
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.core import losses
from noisy_jax.core import noise as noise_lib
from noisy_jax.core import precision
from noisy_jax.methods import coteaching as coteaching_lib
from noisy_jax.methods import dividemix as dividemix_lib
from noisy_jax.methods import dividemix_train
from noisy_jax.methods import elr as elr_lib
from noisy_jax.methods import elr_plus_train
from noisy_jax.methods import loss_correction
from noisy_jax.methods import sop as sop_lib
from noisy_jax.train import method as method_lib

METHOD_NAMES = (
  "loss",
  "truncated_lq",
  "joint_optimization",
  "encouraging",
  "loss_correction",
  "elr",
  "sop",
  "coteaching",
  "dividemix",
  "elr_plus",
)
JO_RELABEL_MODES = label_table_lib.RELABEL_MODES + ("hard_top_k",)
PRUNE_PARAMS = ("best_val", "current")


def loss_method(loss_name: str, *, label_smoothing: float = 0.0, **loss_kwargs) -> method_lib.Method:
  """Any per-example loss of `noisy_jax.core.losses`, averaged over the batch with the table's weights.

  label_smoothing eps > 0 trains on (1 - eps) y + eps / C (losses.smooth_labels) instead of the table's labels y
  (Szegedy et al. 2016; with cross entropy: the label-smoothing baseline of the noisy-label literature).
  """
  loss_fn = losses.get(loss_name)
  _checks.check_range("label_smoothing", label_smoothing, 0.0, 1.0)

  def objective(logits, soft_labels, weights, valid, axis_name=None):
    if label_smoothing:
      soft_labels = losses.smooth_labels(soft_labels, epsilon=label_smoothing)
    return method_lib.weighted_batch_mean(loss_fn(logits, soft_labels, **loss_kwargs), weights, valid, axis_name)

  name = loss_name if not label_smoothing else f"{loss_name}+label_smoothing"
  return method_lib.Method(name=name, objective=objective)


def prune_weights(table: label_table_lib.LabelTable, train_probs: jax.Array, *, k: float):
  """Truncated Lq's pruning step: w_i = [p_y(x_i) > k], p_y = sum_c y_ic p_ic with y the table's labels."""
  p_target = jnp.sum(table.soft_labels * train_probs, axis=-1)
  return label_table_lib.set_all_weights(table, (p_target > k).astype(table.weights.dtype))


def truncated_lq_method(
  *, q: float = 0.7, k: float = 0.5, prune_start: int = 40, prune_every: int = 10, prune_params: str = "best_val"
) -> method_lib.Method:
  """Zhang & Sabuncu's truncated Lq optimised by ACS (see the module docstring)."""
  _checks.check_range("q", q, 0.0, 1.0, low_open=True)
  _checks.check_range("k", k, 0.0, 1.0, low_open=True, high_open=True)
  _checks.check_choice("prune_params", prune_params, PRUNE_PARAMS)
  if prune_start < 1 or prune_every < 1:
    raise ValueError(f"prune_start={prune_start!r} and prune_every={prune_every!r} must both be >= 1 (epochs).")
  lq_at_k = (1.0 - k**q) / q

  def objective(logits, soft_labels, weights, valid, axis_name=None):
    per_example = losses.generalized_cross_entropy(logits, soft_labels, q=q) - lq_at_k
    return method_lib.weighted_batch_mean(per_example, weights, valid, axis_name)

  def update_due(epoch: int) -> bool:
    # Weights are set before epoch prune_start, prune_start + prune_every, ...: after the epoch before it.
    upcoming = epoch + 1
    return upcoming >= prune_start and (upcoming - prune_start) % prune_every == 0

  return method_lib.Method(
    name="truncated_lq",
    objective=objective,
    table_update=lambda table, probs: prune_weights(table, probs, k=k),
    update_due=update_due,
    needs_train_probs=True,
    prune_params=prune_params,
  )


def joint_optimization_method(
  *,
  alpha: float,
  beta: float,
  prior,
  begin: int,
  history_length: int = 10,
  relabel: str = "soft",
  relabel_k: int = 0,
  stage2: bool = True,
) -> method_lib.Method:
  """Tanaka et al.'s stage 1 (see the module docstring). `prior` is the class prior [C].

  relabel: 'soft' (y_i = history mean, the paper's choice), 'hard' (one-hot of its argmax, every example) or
  'hard_top_k' (hard, only the `relabel_k` examples whose mean prediction disagrees most with their label;
  `label_table.relabel_top_k`).
  """
  _checks.check_choice("relabel", relabel, JO_RELABEL_MODES)
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
    objective=objective,
    history_length=history_length,
    table_update=(
      (lambda table, probs: label_table_lib.relabel_top_k(table, relabel_k))
      if relabel == "hard_top_k"
      else (lambda table, probs: label_table_lib.relabel(table, mode=relabel))
    ),
    update_due=lambda epoch: epoch >= begin,
    stage2=stage2,
  )


def encouraging_method(*, log_end: float = 0.75, label_smoothing: float = 0.0) -> method_lib.Method:
  """Zhao et al.'s encouraging loss; label smoothing eps gives (1-eps) EL_y + eps mean_c EL_c."""
  _checks.check_range("label_smoothing", label_smoothing, 0.0, 1.0)

  def objective(logits, soft_labels, weights, valid, axis_name=None):
    if label_smoothing:
      soft_labels = losses.smooth_labels(soft_labels, epsilon=label_smoothing)
    per_example = losses.encouraging_loss(logits, soft_labels, log_end=log_end)
    return method_lib.weighted_batch_mean(per_example, weights, valid, axis_name)

  return method_lib.Method(name="encouraging", objective=objective)


def loss_correction_method(*, correction: str, transition) -> method_lib.Method:
  """Forward or backward corrected cross entropy with the [C, C] transition matrix `transition`."""
  _checks.check_choice("loss correction", correction, loss_correction.CORRECTIONS)
  if correction == "forward":
    matrix = jnp.asarray(noise_lib.check_transition(transition), precision.float_dtype())
    per_example = lambda logits, labels: loss_correction.forward_corrected_cross_entropy(
      logits, labels, transition=matrix
    )
  else:
    inverse = jnp.asarray(loss_correction.inverse(transition), precision.float_dtype())
    per_example = lambda logits, labels: loss_correction.backward_corrected_cross_entropy(
      logits, labels, inverse_transition=inverse
    )

  def objective(logits, soft_labels, weights, valid, axis_name=None):
    return method_lib.weighted_batch_mean(per_example(logits, soft_labels), weights, valid, axis_name)

  return method_lib.Method(name=f"{correction}_correction", objective=objective)


def elr_method(*, lam: float = 3.0, beta: float = 0.7) -> method_lib.Method:
  """ELR (Liu et al., NeurIPS 2020): the batch mean of CE(z_i, y_i) + lam log(1 - <t_i, p_i>), with t_i first
  updated by this step's clamped prediction, t_i <- beta t_i + (1 - beta) sg(p_i) / sum sg(p_i), as the original
  (noisy_jax.methods.elr; t starts at 0). Defaults: CIFAR-10 symmetric (beta 0.7, lam 3); asymmetric and CIFAR-100 use
  beta 0.9 with lam 1 and 7."""
  _checks.check_range("lam", lam, 0.0, np.inf)
  _checks.check_range("beta", beta, 0.0, 1.0)

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, rows, epoch):
    del epoch
    targets = elr_lib.updated_rows(rows["elr_targets"], jax.nn.softmax(logits), beta=beta)
    per_example = elr_lib.elr_loss(logits, soft_labels, targets, lam=lam)
    return method_lib.weighted_batch_mean(per_example, weights, valid, axis_name), {"elr_targets": targets}

  return method_lib.Method(
    name="elr",
    objective=objective,
    extended=True,
    init_rows=lambda key, rows, classes: {"elr_targets": elr_lib.init_targets(rows, classes)},
    row_update=lambda rows, rows_out, grads: rows_out,
  )


def sop_method(
  *,
  lr_u: float = 1.0,
  lr_v: float = 10.0,
  init_std: float = sop_lib.INIT_STD,
  ratio_balance: float = 0.0,
  balance_detach_v: bool = True,
) -> method_lib.Method:
  """SOP (Liu et al., ICML 2022): the batch mean of ce_i + mse_i (noisy_jax.methods.sop.sop_loss) with u_i, v_i read for
  the batch, differentiated with the network, and stepped by their own SGD, u <- u - lr_u g_u, v <- v - lr_v g_v
  (momentum 0, no decay, no schedule; g the gradient of the global batch's mean loss). Defaults: the original's
  CIFAR-100 symmetric rates (1, 10); its asymmetric README rates are (0.1, 100).

  ratio_balance > 0 adds SOP+'s class-balance term, ratio_balance * (-sum_c (1/C) log clamp(mean_i p~_ic, 1e-4, 1))
  over the global batch (sop.balance_loss; SOP+ on CIFAR-100: 0.1), with the original's sg(V) inside p~ by default
  (`balance_detach_v=False` lets it reach v: the original's issue #5). SOP+'s other part, the consistency with a
  strongly augmented second view (AutoAugment + Cutout), is not offered: noisy_jax has no such augmentation."""
  _checks.check_range("lr_u", lr_u, 0.0, np.inf)
  _checks.check_range("ratio_balance", ratio_balance, 0.0, np.inf)
  _checks.check_range("lr_v", lr_v, 0.0, np.inf)
  _checks.check_range("init_std", init_std, 0.0, np.inf)

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, rows, epoch):
    del epoch
    ce, mse = sop_lib.sop_loss(logits, soft_labels, rows["sop_u"], rows["sop_v"])
    loss = method_lib.weighted_batch_mean(ce + mse, weights, valid, axis_name)
    if ratio_balance:
      loss = loss + ratio_balance * sop_lib.balance_loss(
        logits, soft_labels, rows["sop_u"], rows["sop_v"], detach_v=balance_detach_v, where=valid, axis_name=axis_name
      )
    return loss, rows

  def init_rows(key, num_rows, num_classes):
    u, v = sop_lib.init_params(key, num_rows, num_classes, init_std)
    return {"sop_u": u, "sop_v": v}

  def row_update(rows, rows_out, grads):
    del rows_out
    u, v = sop_lib.sgd_update(rows["sop_u"], rows["sop_v"], (grads["sop_u"], grads["sop_v"]), lr_u, lr_v)
    return {"sop_u": u, "sop_v": v}

  return method_lib.Method(
    name="sop", objective=objective, extended=True, init_rows=init_rows, row_update=row_update, rows_trainable=True
  )


def coteaching_method(
  *,
  forget_rate: float,
  num_epochs: int,
  num_gradual: int = 10,
  exponent: float = 1.0,
  ramp: str = "paper",
  plus: bool = False,
  init_epoch: int = 0,
  normalise_twice: bool = False,
) -> method_lib.Method:
  """Co-teaching / Co-teaching+ on two networks (noisy_jax.methods.coteaching). Epoch e (1-based here) trains with the
  forget rate R(e - 1) of `forget_rate_schedule(num_epochs, forget_rate, ...)`; each network's loss is the mean
  cross entropy over the examples its peer selected (`small_loss_selection`, or `disagreement_selection` from
  0-based epoch `init_epoch` on with `plus`), selected over the global batch. The objective is the sum of both."""
  schedule = jnp.asarray(
    coteaching_lib.forget_rate_schedule(
      int(num_epochs), forget_rate, num_gradual=int(num_gradual), exponent=exponent, ramp=ramp
    ),
    jnp.float32,
  )
  if int(init_epoch) < 0:
    raise ValueError(f"init_epoch={init_epoch!r} must be >= 0 (the 0-based epoch where Co-teaching+ starts).")

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, rows, epoch):
    del weights
    rate = schedule[jnp.clip(epoch - 1, 0, schedule.shape[0] - 1)]
    per_example = jax.vmap(losses.cross_entropy, in_axes=(0, None))(logits, soft_labels)  # [2, B]
    ranked = jax.lax.stop_gradient(per_example)
    if plus:
      keep_1, keep_2 = coteaching_lib.disagreement_selection(
        jax.lax.stop_gradient(logits[0]),
        jax.lax.stop_gradient(logits[1]),
        ranked[0],
        ranked[1],
        valid,
        rate,
        epoch=epoch - 1,
        init_epoch=int(init_epoch),
        axis_name=axis_name,
      )
    else:
      keep_1, keep_2 = coteaching_lib.small_loss_selection(ranked[0], ranked[1], valid, rate, axis_name=axis_name)
    loss = coteaching_lib.coteaching_loss(
      per_example[0], keep_1, axis_name, normalise_twice=normalise_twice
    ) + coteaching_lib.coteaching_loss(per_example[1], keep_2, axis_name, normalise_twice=normalise_twice)
    return loss, rows

  return method_lib.Method(
    name="coteaching_plus" if plus else "coteaching",
    objective=objective,
    extended=True,
    row_update=lambda rows, rows_out, grads: rows_out,
    num_networks=2,
  )


@dataclasses.dataclass(frozen=True)
class DividemixSettings:
  """DivideMix's hyper-parameters (Train_cifar.py's defaults: alpha 4, T 0.5; lambda_u, p_threshold per setting,
  noisy_jax.methods.dividemix.SETTINGS; warm_up 10 epochs on CIFAR-10, 30 on CIFAR-100; loss_window 5 at 90% noise)."""

  warm_up: int = 10
  p_threshold: float = 0.5
  lambda_u: float = 25.0
  alpha: float = dividemix_lib.MIXUP_ALPHA
  temperature: float = dividemix_lib.SHARPEN_TEMPERATURE
  loss_window: int = 1
  warmup_penalty: bool = False
  penalty: bool = True
  lu_reduction: str = "mean"


def dividemix_method(settings: DividemixSettings) -> method_lib.Method:
  """DivideMix (see the module docstring and methods.dividemix_train). The objective is the warm-up's: the sum over
  the pair of each network's mean cross entropy (plus its mean negative entropy with `warmup_penalty`)."""
  if int(settings.warm_up) < 1:
    raise ValueError(f"warm_up={settings.warm_up!r} must be >= 1 (epochs of cross entropy before the first division).")
  if int(settings.loss_window) < 1:
    raise ValueError(f"loss_window={settings.loss_window!r} must be >= 1 (epochs of losses averaged for the GMM).")
  _checks.check_range("p_threshold", settings.p_threshold, 0.0, 1.0)
  _checks.check_range("lambda_u", settings.lambda_u, 0.0, np.inf)
  _checks.check_range("alpha", settings.alpha, 0.0, np.inf, low_open=True)
  _checks.check_range("temperature", settings.temperature, 0.0, np.inf, low_open=True)
  _checks.check_choice("lu_reduction", settings.lu_reduction, dividemix_lib.LU_REDUCTIONS)
  window = int(settings.loss_window)

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, rows, epoch):
    del weights, epoch
    loss = 0.0
    for m in range(2):
      loss = loss + method_lib.weighted_batch_mean(
        losses.cross_entropy(logits[m], soft_labels), jnp.ones_like(valid, logits.dtype), valid, axis_name
      )
      if settings.warmup_penalty:
        loss = loss + dividemix_lib.negative_entropy(logits[m], axis_name=axis_name, where=valid)
    return loss, rows

  def member_update(table, member_probs, epoch, num_examples):
    return dividemix_train.divide(
      table, member_probs, epoch=epoch, warm_up=int(settings.warm_up), window=window, num_examples=num_examples
    )

  def epoch_factory(mesh, warmup_epoch_fn, **options):
    return dividemix_train.make_epoch_fn(mesh, settings=settings, warmup_epoch_fn=warmup_epoch_fn, **options)

  def label_evidence(table):
    clean = np.asarray(table.method_rows[dividemix_train.CLEAN_PROB], np.float64)
    return label_issues.MethodEvidence(
      what=f"DivideMix clean probability (mean of the two divisions; flagged where neither exceeds "
      f"p_threshold {settings.p_threshold})",
      quality=clean.mean(axis=1),
      is_issue=clean.max(axis=1) <= settings.p_threshold,
    )

  return method_lib.Method(
    name="dividemix",
    objective=objective,
    extended=True,
    init_rows=lambda key, rows, classes: dividemix_train.init_rows(rows, window),
    row_update=lambda rows, rows_out, grads: rows_out,
    num_networks=2,
    member_update=member_update,
    update_due=lambda epoch: epoch >= int(settings.warm_up),
    epoch_factory=epoch_factory,
    label_evidence=label_evidence,
  )


@dataclasses.dataclass(frozen=True)
class ElrPlusSettings:
  """ELR+'s hyper-parameters (ELR_plus/config_cifar10.json: beta 0.7, lambda 3, mixup_alpha 1, coef_step 0,
  ema_alpha 0.997, ema_update true, ema_step 40000, warmup 0; CIFAR-10 asymmetric beta 0.9, lambda 1; CIFAR-100
  beta 0.9, lambda 7, coef_step 40000). reweight_labels None: the original's rule, re-weight iff C = 100."""

  beta: float = 0.7
  lam: float = 3.0
  mixup_alpha: float = 1.0
  coef_step: int = 0
  ema_alpha: float = 0.997
  ema_update: bool = True
  ema_step: int = 40000
  warm_up: int = 0
  reweight_labels: bool | None = None

  def resolved(self, num_classes: int) -> "ElrPlusSettings":
    """These settings with reweight_labels decided: as given, or (None) the original's rule, C == 100."""
    if self.reweight_labels is not None:
      return self
    return dataclasses.replace(self, reweight_labels=int(num_classes) == 100)


def elr_plus_method(settings: ElrPlusSettings, *, num_classes: int) -> method_lib.Method:
  """ELR+ (see the module docstring and methods.elr_plus_train). The objective is the warm-up's: the sum over the
  pair of each network's mean cross entropy, with each network's targets updated from its own unclamped softmax."""
  _checks.check_range("beta", settings.beta, 0.0, 1.0)
  _checks.check_range("lam", settings.lam, 0.0, np.inf)
  _checks.check_range("mixup_alpha", settings.mixup_alpha, 0.0, np.inf)
  _checks.check_range("ema_alpha", settings.ema_alpha, 0.0, 1.0)
  for name in ("coef_step", "ema_step", "warm_up"):
    value = getattr(settings, name)
    if isinstance(value, bool) or int(value) != value or value < 0:
      raise ValueError(f"{name}={value!r} must be an integer >= 0.")
  settings = settings.resolved(num_classes)

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, rows, epoch):
    del weights, epoch
    loss, targets = 0.0, rows[elr_plus_train.TARGETS]
    for m in range(2):
      loss = loss + method_lib.weighted_batch_mean(
        losses.cross_entropy(logits[m], soft_labels), jnp.ones_like(valid, logits.dtype), valid, axis_name
      )
      targets = targets.at[:, m].set(
        elr_lib.updated_rows(targets[:, m], jax.nn.softmax(logits[m]), beta=settings.beta, clamp=None)
      )
    return loss, {elr_plus_train.TARGETS: targets}

  def epoch_factory(mesh, warmup_epoch_fn, **options):
    return elr_plus_train.make_epoch_fn(mesh, settings=settings, warmup_epoch_fn=warmup_epoch_fn, **options)

  def label_evidence(table):
    return label_issues.MethodEvidence(
      what="ELR+ targets (mean of both networks')", probs=elr_plus_train.target_probabilities(table)
    )

  return method_lib.Method(
    name="elr_plus",
    objective=objective,
    extended=True,
    init_rows=lambda key, rows, classes: elr_plus_train.init_rows(rows, classes),
    row_update=lambda rows, rows_out, grads: rows_out,
    num_networks=2,
    epoch_factory=epoch_factory,
    init_state=elr_plus_train.with_averages,
    label_evidence=label_evidence,
  )


def uniform_prior(num_classes: int) -> jax.Array:
  return jnp.full((num_classes,), 1.0 / num_classes, precision.float_dtype())


_METHOD_FIELDS = {
  "loss": {"name", "loss", "loss_kwargs", "label_smoothing"},
  "truncated_lq": {"name", "q", "k", "prune_start", "prune_every", "prune_params"},
  "joint_optimization": {"name", "alpha", "beta", "prior", "begin", "history_length", "relabel", "relabel_k", "stage2"},
  "encouraging": {"name", "log_end", "label_smoothing"},
  "loss_correction": {"name", "correction", "transition", "percentile", "shared_filter"},
  "elr": {"name", "lam", "beta"},
  "sop": {"name", "lr_u", "lr_v", "init_std", "ratio_balance", "balance_detach_v"},
  "coteaching": {"name", "forget_rate", "num_gradual", "exponent", "ramp", "plus", "init_epoch", "normalise_twice"},
  "dividemix": {"name"} | {f.name for f in dataclasses.fields(DividemixSettings)},
  "elr_plus": {"name"} | {f.name for f in dataclasses.fields(ElrPlusSettings)},
}


def _given(method_config, **casts) -> dict:
  """The fields of `method_config` named in `casts` that the config sets, each cast (name=type): the builder's own
  signature holds every default, once."""
  return {name: cast(method_config[name]) for name, cast in casts.items() if name in method_config}


def make(method_config, *, num_classes: int, transition=None, num_epochs: int | None = None) -> method_lib.Method:
  """Builds a method_lib.Method from `config.method` (see the module docstring for the fields of each name).

  transition: for 'loss_correction', the resolved [C, C] matrix (`runs.correction_transition`).
  num_epochs: the run's epochs, for 'coteaching' (the length of its forget-rate schedule).
  """
  name = method_config.name
  _checks.check_choice("method name", name, METHOD_NAMES)
  unknown = sorted(set(method_config.keys()) - _METHOD_FIELDS[name])
  if unknown:
    raise ValueError(
      f"Unknown field(s) {unknown} in config.method for method {name!r}; allowed: {sorted(_METHOD_FIELDS[name])}."
    )
  if name == "loss":
    return loss_method(
      method_config.loss,
      label_smoothing=float(method_config.get("label_smoothing", 0.0)),
      **dict(method_config.get("loss_kwargs", {})),
    )
  if name == "truncated_lq":
    return truncated_lq_method(
      q=method_config.q,
      k=method_config.k,
      prune_start=method_config.prune_start,
      prune_every=method_config.prune_every,
      prune_params=method_config.prune_params,
    )
  if name == "joint_optimization":
    prior = method_config.get("prior", "uniform")
    prior = uniform_prior(num_classes) if isinstance(prior, str) and prior == "uniform" else prior
    return joint_optimization_method(
      alpha=method_config.alpha,
      beta=method_config.beta,
      prior=prior,
      begin=method_config.begin,
      history_length=method_config.history_length,
      relabel=method_config.relabel,
      relabel_k=method_config.get("relabel_k", 0),
      stage2=method_config.get("stage2", True),
    )
  if name == "elr":
    return elr_method(**_given(method_config, lam=float, beta=float))
  if name == "sop":
    return sop_method(
      **_given(method_config, lr_u=float, lr_v=float, init_std=float, ratio_balance=float, balance_detach_v=bool)
    )
  if name == "dividemix":
    fields = {k: method_config[k] for k in method_config.keys() if k != "name"}
    return dividemix_method(DividemixSettings(**fields))
  if name == "elr_plus":
    fields = {k: method_config[k] for k in method_config.keys() if k != "name"}
    return elr_plus_method(ElrPlusSettings(**fields), num_classes=num_classes)
  if name == "coteaching":
    if num_epochs is None:
      raise ValueError(
        "method 'coteaching' needs the run's epochs for its forget-rate schedule: "
        "make(..., num_epochs=config.num_epochs)."
      )
    if "forget_rate" not in method_config:
      raise ValueError("method 'coteaching' needs method.forget_rate (the paper uses the noise rate).")
    return coteaching_method(
      forget_rate=float(method_config.forget_rate),
      num_epochs=int(num_epochs),
      **_given(
        method_config, num_gradual=int, exponent=float, ramp=str, plus=bool, init_epoch=int, normalise_twice=bool
      ),
    )
  if name == "loss_correction":
    if transition is None:
      raise ValueError(
        "method 'loss_correction' needs its transition matrix: make(..., transition=T); "
        "experiment.runs resolves config.method.transition ('known', 'estimated' or a matrix)."
      )
    if np.shape(transition) != (num_classes, num_classes):
      raise ValueError(
        f"the transition matrix has shape {np.shape(transition)}; [C, C] = [{num_classes}, {num_classes}] expected."
      )
    return loss_correction_method(correction=method_config.correction, transition=transition)
  return encouraging_method(log_end=method_config.log_end, label_smoothing=method_config.get("label_smoothing", 0.0))
