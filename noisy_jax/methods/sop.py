"""Sparse Over-Parameterization, SOP and SOP+ (Liu, Zhu, Qu, You, ICML 2022, "Robust Training under Label Noise by
Over-parameterization", arXiv 2202.14026), as pure building blocks.

The original code is shengliu66/SOP@4d991ce (`model/loss.py`, `overparametrization_loss`; `train.py`;
`config_cifar100.json`, the only config); see shared REFERENCE.md section 9. The label noise of example i is
modelled by per-example parameters u_i (a scalar: the original's u is [N, 1], here [N]) and v_i [C], trained with
the network by their own plain SGD (`sgd_update`):

  U_i = clamp(u_i^2 y_i, 0, 1)            (mass the model may add on the given label)
  V_i = clamp(v_i^2 (1 - y_i), 0, 1)      (mass on the other classes)
  p~_i = clamp(p_i + U_i - sg(V_i), min 1e-4);  p~_i <- p~_i / max(||p~_i||_1, 1e-4);  p~_i <- clamp(p~_i, 1e-4, 1)
  ce_i  = -sum_c y_ic log p~_ic
  mse_i = sum_c (onehot(argmax sg(z_i)) + U_i - V_i - y_i)_c^2

with p_i = softmax(z_i). The original's loss is mean_i ce_i + sum_i mse_i / B (F.mse_loss(reduction='sum') / B),
i.e. the batch mean of ce_i + mse_i (`sop_loss` returns the two per-example parts). SOP+ adds, on a second
(strongly augmented) view z2 of the same batch,

  + ratio_consistency * mean_i KL(sg(softmax z_i) || softmax z2_i)                         (`consistency_loss`)
  + ratio_balance * ( -sum_c (1/C) log clamp(mean_i p~_ic, 1e-4, 1) )                      (`balance_loss`)

(CIFAR-100: ratio_consistency 0.9, ratio_balance 0.1; plain SOP sets both to 0). With two views the original
computes the CE, MSE and balance terms on the first view's logits only.

Gradient flows (what the original's autograd does, reproduced by `jax.grad` w.r.t. (network params, u_rows,
v_rows) of the batch objective built from these functions):

  network theta : from ce (through p), balance and consistency; NOT from mse: z enters mse only through
                  onehot(argmax sg(z)), piecewise constant, and wrapped in stop_gradient anyway;
  v             : from mse only: in p~ (hence ce and balance) V appears as sg(V);
  u             : from ce, mse and balance: U is never stopped.

So the single stop_gradient that matters is sg(V) inside p~; the sg(z) under the argmax documents that the hard
label is a constant. Clamps follow torch.clamp (`loss_parts.torch_clamp`: the gradient passes where lo <= x <= hi,
ends included), and F.normalize's denominator max(||x||_1, eps) is differentiated as PyTorch does.

Defect (issue #5 of the original repository): the balance term is computed from p~, which contains sg(V), so it
regularises theta and u but never v, although v is what would move mass to other classes. `balance_loss` keeps
that by default (`detach_v=True`, the published numbers' behaviour); `detach_v=False` lets the balance term's
gradient reach v as well (through V in p~; the ce term keeps sg(V) either way).

How the original averages the u, v gradients: they are gradients of the batch-mean objective (a 1/B factor), applied
by torch.optim.SGD(momentum 0, weight_decay 0, no schedule) with lr_u = 1, lr_v = 10 (CIFAR-100, symmetric noise;
asymmetric: lr_u 0.1, lr_v 100 per the README, the paper used lr_u 1). Rows outside the batch get a zero gradient
and do not move.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import loss_parts
from noisy_jax.core import precision
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import method as method_lib

# The original's eps: clamp floors, F.normalize's eps and the balance term's clamp.
EPS = 1e-4
# config_cifar100.json: u, v ~ N(mean 0, std 1e-8).
INIT_STD = 1e-8


def init_params(
  key, num_examples: int, num_classes: int, std: float = INIT_STD, *, mean: float = 0.0
) -> tuple[jax.Array, jax.Array]:
  """u [N] and v [N, C] in precision.float_dtype() (float32; float64 with x64), every entry ~ N(mean, std^2) (the
  original: mean 0, std 1e-8), independent keys.

  The original's u is [N, 1]; here it is [N] (u_i multiplies the whole label vector either way).
  """
  if int(num_examples) < 1 or int(num_classes) < 2:
    raise ValueError(f"need num_examples >= 1 and num_classes >= 2, got {num_examples!r} and {num_classes!r}.")
  _checks.check_range("std", std, 0.0, np.inf)
  key_u, key_v = jax.random.split(key)
  dtype = precision.float_dtype()
  u = mean + std * jax.random.normal(key_u, (int(num_examples),), dtype)
  v = mean + std * jax.random.normal(key_v, (int(num_examples), int(num_classes)), dtype)
  return u.astype(dtype), v.astype(dtype)


def _prepare(logits, labels, u_rows, v_rows):
  logits, labels, out_dtype = loss_parts.prepare(logits, labels)
  u_rows = jnp.asarray(u_rows)
  v_rows = jnp.asarray(v_rows)
  _checks.check_same_shape("u_rows", u_rows, "logits[..., 0]", np.empty(logits.shape[:-1]))
  _checks.check_same_shape("v_rows", v_rows, "logits", logits)
  return logits, labels, u_rows.astype(logits.dtype), v_rows.astype(logits.dtype), out_dtype


def _u_v_terms(labels: jax.Array, u_rows: jax.Array, v_rows: jax.Array) -> tuple[jax.Array, jax.Array]:
  """U = clamp(u^2 y, 0, 1) and V = clamp(v^2 (1 - y), 0, 1), [..., C]."""
  big_u = loss_parts.torch_clamp(jnp.square(u_rows)[..., None] * labels, 0.0, 1.0)
  big_v = loss_parts.torch_clamp(jnp.square(v_rows) * (1.0 - labels), 0.0, 1.0)
  return big_u, big_v


def _prediction(logits: jax.Array, big_u: jax.Array, big_v_in_p: jax.Array) -> jax.Array:
  """p~ = clamp(normalize_1(clamp(p + U - V', min eps)), eps, 1), V' = sg(V) or V as the caller decides."""
  p = jax.nn.softmax(logits, axis=-1)
  p_tilde = loss_parts.torch_clamp(p + big_u - big_v_in_p, EPS)
  norm = loss_parts.torch_clamp(jnp.sum(jnp.abs(p_tilde), axis=-1, keepdims=True), EPS)  # F.normalize(p=1, eps=1e-4)
  return loss_parts.torch_clamp(p_tilde / norm, EPS, 1.0)


def reparameterized_prediction(logits, labels, u_rows, v_rows, *, detach_v: bool = True) -> jax.Array:
  """SOP's p~ [..., C] (module docstring): the prediction with the modelled noise U - V added, renormalised.

  Args:
    logits: [..., C].
    labels: [..., C] the given labels (one-hot in the original).
    u_rows: [...] u of these examples.
    v_rows: [..., C] v of these examples.
    detach_v: V enters under stop_gradient (the original's p~; default True).

  Returns:
    [..., C] in float32 (at least).
  """
  logits, labels, u_rows, v_rows, _ = _prepare(logits, labels, u_rows, v_rows)
  big_u, big_v = _u_v_terms(labels, u_rows, v_rows)
  return _prediction(logits, big_u, jax.lax.stop_gradient(big_v) if detach_v else big_v)


def sop_loss(logits, labels_onehot, u_rows, v_rows) -> tuple[jax.Array, jax.Array]:
  """SOP's per-example (ce_part, mse_part), with the original's stop-gradients (module docstring).

    ce_i  = -sum_c y_ic log p~_ic,   p~ from p + U - sg(V)
    mse_i = sum_c (onehot(argmax sg(z_i)) + U_i - V_i - y_i)_c^2

  The original's loss is mean_i ce_i + mean_i mse_i (its MSE is F.mse_loss(..., reduction='sum') / B): the batch
  mean of ce + mse. jax.grad of that mean w.r.t. (theta, u_rows, v_rows) gives theta the ce gradient only, v the
  mse gradient only and u both, exactly as the original.

  Args:
    logits: [..., C] (view 1 when SOP+ has two views).
    labels_onehot: [..., C] the given labels, one-hot (the original builds them with scatter_; a soft label is
      accepted and plugged into the same formulas).
    u_rows: [...] u of these examples.
    v_rows: [..., C] v of these examples.

  Returns:
    (ce_part [...], mse_part [...]) in the logits' dtype.
  """
  logits, labels, u_rows, v_rows, out_dtype = _prepare(logits, labels_onehot, u_rows, v_rows)
  big_u, big_v = _u_v_terms(labels, u_rows, v_rows)
  p_tilde = _prediction(logits, big_u, jax.lax.stop_gradient(big_v))
  ce = -jnp.sum(labels * jnp.log(p_tilde), axis=-1)
  hard = jax.nn.one_hot(jnp.argmax(jax.lax.stop_gradient(logits), axis=-1), logits.shape[-1], dtype=logits.dtype)
  mse = jnp.sum(jnp.square(hard + big_u - big_v - labels), axis=-1)
  return ce.astype(out_dtype), mse.astype(out_dtype)


def consistency_loss(logits1, logits2) -> jax.Array:
  """SOP+'s consistency per example: KL(sg(p1) || p2) = sum_c p1_c (log p1_c - log p2_c), p_k = softmax(z_k).

  p1 (the weakly augmented view) is a constant; the gradient reaches the network through p2 only. The original
  (F.kl_div(log p2, p1.detach(), reduction='none').sum(1)) averages it over the batch, weighted by
  ratio_consistency (0.9 on CIFAR-100). Computed from log_softmax, finite for any finite logits.

  Args:
    logits1: [..., C] view 1 (crop + flip).
    logits2: [..., C] view 2 (AutoAugment + Cutout).

  Returns:
    [...] per-example divergence in logits1's dtype.
  """
  logits1, logits2, out_dtype = loss_parts.prepare(logits1, logits2)
  log_p1 = jax.lax.stop_gradient(jax.nn.log_softmax(logits1, axis=-1))
  log_p2 = jax.nn.log_softmax(logits2, axis=-1)
  return jnp.sum(jnp.exp(log_p1) * (log_p1 - log_p2), axis=-1).astype(out_dtype)


def balance_loss(logits, labels, u_rows, v_rows, *, detach_v: bool = True, where=None, axis_name=None) -> jax.Array:
  """SOP+'s class-balance term (a batch-level scalar): -sum_c (1/C) log clamp(mean_i p~_ic, 1e-4, 1).

  p~ as in `sop_loss`. The original weights it by ratio_balance (0.1 on CIFAR-100). Its p~ contains sg(V), so the
  term regularises theta and u but not v (issue #5, module docstring): `detach_v=True` (default) reproduces that;
  `detach_v=False` lets the gradient reach v.

  Args:
    logits: [B..., C] the (per-device) batch.
    labels: [B..., C] the given labels.
    u_rows: [B...], v_rows: [B..., C] the batch's u and v.
    detach_v: see above.
    where: optional [B...] mask (nonzero = counts); padding rows are left out of the mean. No valid row: 0.
    axis_name: when given, the mean is over the global batch across this named axis (psum of sums and counts).

  Returns:
    Scalar in the logits' dtype.
  """
  logits, labels, u_rows, v_rows, out_dtype = _prepare(logits, labels, u_rows, v_rows)
  big_u, big_v = _u_v_terms(labels, u_rows, v_rows)
  p_tilde = _prediction(logits, big_u, jax.lax.stop_gradient(big_v) if detach_v else big_v)
  num_classes = logits.shape[-1]
  p_tilde = p_tilde.reshape(-1, num_classes)
  if where is None:
    valid = jnp.ones(p_tilde.shape[:1], bool)
  else:
    where = jnp.asarray(where)
    _checks.check_same_shape("where", where, "logits[..., 0]", np.empty(logits.shape[:-1]))
    valid = (where != 0).reshape(-1)
  total = jnp.sum(jnp.where(valid[:, None], p_tilde, 0.0), axis=0)
  count = jnp.sum(valid.astype(p_tilde.dtype))
  if axis_name is not None:
    total = jax.lax.psum(total, axis_name)
    count = jax.lax.psum(count, axis_name)
  mean = loss_parts.torch_clamp(total / jnp.maximum(count, 1.0), EPS, 1.0)
  value = -jnp.sum(jnp.log(mean)) / num_classes
  return jnp.where(count > 0, value, 0.0).astype(out_dtype)


def sgd_update(u, v, grads, lr_u, lr_v, *, indices=None) -> tuple[jax.Array, jax.Array]:
  """SOP's own optimiser for u and v: plain SGD (momentum 0, weight decay 0, constant rates).

    u <- u - lr_u grad_u,   v <- v - lr_v grad_v

  Args:
    u: [N], v: [N, C] the whole per-example parameters.
    grads: (grad_u, grad_v): full-size ([N], [N, C]) when `indices` is None; otherwise the gradients w.r.t. the rows
      read for the batch ([B], [B, C], e.g. jax.grad w.r.t. u_rows = u[indices]), which are scatter-added into the
      table. Scatter-add of row gradients is the gradient w.r.t. the whole table (repeated indices add up, as in
      PyTorch's autograd through u[index]); the padding index N (anything outside [0, N)) is dropped.
    lr_u, lr_v: learning rates >= 0 (CIFAR-100 sym: 1 and 10; asym: 0.1 and 100).
    indices: [B] the batch's example indices, or None.

  Returns:
    (u, v) updated, in their dtypes.
  """
  _checks.check_range("lr_u", lr_u, 0.0, np.inf)
  _checks.check_range("lr_v", lr_v, 0.0, np.inf)
  u = jnp.asarray(u)
  v = jnp.asarray(v)
  grad_u, grad_v = (jnp.asarray(g) for g in grads)
  step_u = -jnp.asarray(lr_u, u.dtype) * grad_u.astype(u.dtype)
  step_v = -jnp.asarray(lr_v, v.dtype) * grad_v.astype(v.dtype)
  if indices is None:
    _checks.check_same_shape("grad_u", grad_u, "u", u)
    _checks.check_same_shape("grad_v", grad_v, "v", v)
    return u + step_u, v + step_v
  indices = jnp.asarray(indices)
  _checks.check_same_shape("grad_u", grad_u, "indices", indices)
  _checks.check_same_shape("grad_v", grad_v, "v[indices]", np.empty(indices.shape + v.shape[1:]))
  return u.at[indices].add(step_u, mode="drop"), v.at[indices].add(step_v, mode="drop")


def method(
  *,
  lr_u: float = 1.0,
  lr_v: float = 10.0,
  init_std: float = INIT_STD,
  ratio_balance: float = 0.0,
  balance_detach_v: bool = True,
  ratio_consistency: float = 0.0,
) -> method_lib.Method:
  """SOP as a method: the batch mean of ce_i + mse_i (`sop_loss`) with u_i, v_i read for the batch from the table's
  method rows, differentiated with the network, and stepped by their own SGD, u <- u - lr_u g_u, v <- v - lr_v g_v
  (momentum 0, no decay, no schedule; g the gradient of the global batch's mean loss). Defaults: the original's
  CIFAR-100 symmetric rates (1, 10); its asymmetric README rates are (0.1, 100).

  ratio_balance > 0 adds SOP+'s class-balance term, ratio_balance * (-sum_c (1/C) log clamp(mean_i p~_ic, 1e-4, 1))
  over the global batch (`balance_loss`; SOP+ on CIFAR-100: 0.1), with the original's sg(V) inside p~ by default
  (`balance_detach_v=False` lets it reach v: the original's issue #5).

  ratio_consistency > 0 adds SOP+'s other part, ratio_consistency * mean_i KL(sg(p_i) || p2_i) over the valid rows of
  the global batch (`consistency_loss`; SOP+: 0.9), p2 the softmax of a strongly augmented view of the same examples:
  the method then has `strong_view`, the trainer forwards [weak; strong] as one batch, as the original does, and the
  run needs config.augment.strong (AutoAugment's CIFAR-10 policy + Cutout 16 for SOP+; noisy_jax.train.views). The
  CE, MSE and balance terms stay on the weak view's logits, as there."""
  _checks.check_range("lr_u", lr_u, 0.0, np.inf)
  _checks.check_range("ratio_balance", ratio_balance, 0.0, np.inf)
  _checks.check_range("ratio_consistency", ratio_consistency, 0.0, np.inf)
  _checks.check_range("lr_v", lr_v, 0.0, np.inf)
  _checks.check_range("init_std", init_std, 0.0, np.inf)

  def objective(logits, soft_labels, weights, valid, axis_name=None, *, rows, epoch, strong_logits=None, **unused):
    del epoch, unused
    ce, mse = sop_loss(logits, soft_labels, rows["sop_u"], rows["sop_v"])
    loss = method_lib.weighted_batch_mean(ce + mse, weights, valid, axis_name)
    if ratio_balance:
      loss = loss + ratio_balance * balance_loss(
        logits, soft_labels, rows["sop_u"], rows["sop_v"], detach_v=balance_detach_v, where=valid, axis_name=axis_name
      )
    if ratio_consistency:
      consistency = consistency_loss(logits, strong_logits)
      loss = loss + ratio_consistency * method_lib.weighted_batch_mean(
        consistency, jnp.ones_like(consistency), valid, axis_name
      )
    return loss, rows

  def init_rows(key, num_rows, num_classes):
    u, v = init_params(key, num_rows, num_classes, init_std)
    return {"sop_u": u, "sop_v": v}

  def row_update(rows, rows_out, grads):
    del rows_out
    u, v = sgd_update(rows["sop_u"], rows["sop_v"], (grads["sop_u"], grads["sop_v"]), lr_u, lr_v)
    return {"sop_u": u, "sop_v": v}

  return method_lib.Method(
    name="sop",
    objective=objective,
    init_rows=init_rows,
    row_update=row_update,
    rows_trainable=True,
    strong_view=ratio_consistency > 0,
  )


SPEC = spec_lib.MethodSpec(
  name="sop",
  fields=("lr_u", "lr_v", "init_std", "ratio_balance", "balance_detach_v", "ratio_consistency"),
  build=lambda method_config, context: method(
    **spec_lib.given(
      method_config,
      lr_u=float,
      lr_v=float,
      init_std=float,
      ratio_balance=float,
      balance_detach_v=bool,
      ratio_consistency=float,
    )
  ),
  # init std 0.1: rows that move within 3 epochs. sop_plus: SOP+'s two terms with a strong view of Cutout only (the
  # two-view step, key and rows of every test that loops over the cases; the policies' own tests are in
  # tests/test_autoaugment.py and cost a compilation of every operation).
  tiny={
    "sop": {"method": {"name": "sop", "lr_u": 1.0, "lr_v": 10.0, "init_std": 0.1}},
    "sop_plus": {
      "method": {
        "name": "sop",
        "lr_u": 1.0,
        "lr_v": 10.0,
        "init_std": 0.1,
        "ratio_balance": 0.1,
        "ratio_consistency": 0.9,
      },
      "augment": {"crop_padding": 0, "flip": False, "strong": {"policy": "none", "cutout": 4}},
    },
  },
)
