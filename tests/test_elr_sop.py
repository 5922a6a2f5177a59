"""methods.elr and methods.sop against float64 NumPy re-computations of the original PyTorch code's formulas
(shengliu66/ELR@934af53, shengliu66/SOP@4d991ce; REFERENCE.md sections 6 and 9), with the gradient flows the
original's stop-gradients (.detach(), .data, torch.no_grad) give, checked by central finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from noisy_jax.methods import elr
from noisy_jax.methods import sop
from noisy_jax.train import method as method_lib

RNG = np.random.default_rng(0)
B, C, N = 6, 5, 9
LOGITS = (RNG.normal(size=(B, C)) * 1.5).astype(np.float32)
LOGITS[5] = [12.0, 0.0, 0.0, 0.0, 0.0]  # saturated: every entry of the softmax is outside [1e-4, 1 - 1e-4]
GIVEN = np.array([0, 1, 2, 3, 4, 0])
ONE_HOT = np.eye(C, dtype=np.float32)[GIVEN]
INDICES = np.array([3, 0, 7, 1, 8, 5])


# ------------------------------------------------------------------------------------------------------------
# Float64 NumPy references, written as the PyTorch code computes.


def np_softmax(z):
  z = np.asarray(z, np.float64)
  e = np.exp(z - z.max(axis=-1, keepdims=True))
  return e / e.sum(axis=-1, keepdims=True)


def np_log_softmax(z):
  z = np.asarray(z, np.float64)
  m = z.max(axis=-1, keepdims=True)
  return z - m - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def np_elr_forward(target, index, output, label, beta, lam):
  """ELR/model/loss.py elr_loss.forward; `target` [N, C] is updated in place like self.target; labels are ints."""
  y_pred = np.clip(np_softmax(output), 1e-4, 1.0 - 1e-4)
  y_pred_ = y_pred.copy()  # .data.detach()
  target[index] = beta * target[index] + (1 - beta) * (y_pred_ / y_pred_.sum(axis=1, keepdims=True))
  ce_loss = np.mean(-np_log_softmax(output)[np.arange(len(label)), label])  # F.cross_entropy, mean
  elr_reg = np.mean(np.log(1 - (target[index] * y_pred).sum(axis=1)))
  return ce_loss + lam * elr_reg


def np_sigmoid_rampup(current, rampup_length):
  """ELR_plus/utils/util.py sigmoid_rampup."""
  if rampup_length == 0:
    return 1.0
  current = np.clip(current, 0.0, rampup_length)
  phase = 1.0 - current / rampup_length
  return float(np.exp(-5.0 * phase * phase))


def np_ema_alpha(global_step, ema_update, alpha_, ema_step):
  """ELR_plus/trainer/trainer.py update_ema_variables (alpha_ != 0)."""
  if ema_update:
    return np_sigmoid_rampup(global_step + 1, ema_step) * alpha_
  return min(1 - 1 / (global_step + 1), alpha_)


def np_update_hist(pred_hist, out, index, mix_index, mixup_l, beta):
  """ELR_plus elr_plus_loss.update_hist: updates pred_hist in place and returns q."""
  y_pred_ = np_softmax(out)
  pred_hist[index] = beta * pred_hist[index] + (1 - beta) * y_pred_ / y_pred_.sum(axis=1, keepdims=True)
  return mixup_l * pred_hist[index] + (1 - mixup_l) * pred_hist[index][mix_index]


def np_elr_plus_forward(iteration, output, y_labeled, q, num_classes, lam, coef_step):
  """ELR_plus elr_plus_loss.forward."""
  y_pred = np.clip(np_softmax(output), 1e-4, 1.0 - 1e-4)
  if num_classes == 100:
    y_labeled = y_labeled * q
    y_labeled = y_labeled / y_labeled.sum(axis=1, keepdims=True)
  ce_loss = np.mean(-np.sum(y_labeled * np_log_softmax(output), axis=-1))
  reg = np.mean(np.log(1 - (q * y_pred).sum(axis=1)))
  return ce_loss + np_sigmoid_rampup(iteration, coef_step) * (lam * reg)


def np_sop_parts(output, label, u_rows, v_rows, output2=None):
  """SOP model/loss.py overparametrization_loss.forward; returns the terms (before the ratios) as floats."""
  label = np.asarray(label, np.float64)
  u_square = np.clip(np.asarray(u_rows, np.float64)[:, None] ** 2 * label, 0, 1)
  v_square = np.clip(np.asarray(v_rows, np.float64) ** 2 * (1 - label), 0, 1)
  prediction = np.maximum(np_softmax(output) + u_square - v_square, 1e-4)  # V detached (value unchanged)
  prediction = prediction / np.maximum(np.abs(prediction).sum(axis=1, keepdims=True), 1e-4)  # F.normalize p=1
  prediction = np.clip(prediction, 1e-4, 1.0)
  label_one_hot = np.eye(label.shape[1])[np.argmax(output, axis=1)]
  parts = {
    "mse": np.sum((label_one_hot + u_square - v_square - label) ** 2) / len(label),
    "ce": np.mean(-np.sum(label * np.log(prediction), axis=-1)),
  }
  avg_prediction = np.clip(prediction.mean(axis=0), 1e-4, 1.0)
  parts["balance"] = -(1.0 / label.shape[1] * np.log(avg_prediction)).sum()
  if output2 is not None:
    preds1 = np_softmax(output)
    parts["consistency"] = np.mean(np.sum(preds1 * (np.log(preds1) - np_log_softmax(output2)), axis=1))
  return parts


def fd_grad(f, x, h=1e-6):
  """Central finite differences of a scalar float64 function."""
  x = np.array(x, np.float64)
  grad = np.zeros_like(x)
  for i in np.ndindex(x.shape):
    plus, minus = x.copy(), x.copy()
    plus[i] += h
    minus[i] -= h
    grad[i] = (f(plus) - f(minus)) / (2 * h)
  return grad


def assert_grad_close(got, want):
  np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=2e-3, atol=2e-6)


# ------------------------------------------------------------------------------------------------------------
# ELR.


def test_elr_three_steps_match_the_original():
  beta, lam = 0.7, 3.0
  table_np = np.zeros((N, C))
  table = elr.init_targets(N, C)
  batches = [(INDICES, LOGITS), (INDICES[::-1].copy(), LOGITS * 0.5), (INDICES[:4], LOGITS[:4] - 1.0)]
  for step, (idx, z) in enumerate(batches):
    labels = GIVEN[: len(idx)]
    want = np_elr_forward(table_np, idx, z, labels, beta, lam)
    rows = elr.updated_rows(table[idx], jax.nn.softmax(z), beta=beta)
    per_example = elr.elr_loss(z, ONE_HOT[: len(idx)], rows, lam=lam)
    assert per_example.shape == (len(idx),)
    np.testing.assert_allclose(jnp.mean(per_example), want, rtol=1e-5, err_msg=f"step {step}")
    table = elr.update_targets(table, idx, jax.nn.softmax(z), beta=beta)
    np.testing.assert_allclose(table, table_np, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(table[idx], rows, rtol=1e-6)
  # t starts at 0: after k visits a row sums to 1 - beta^k (no bias correction).
  sums = np.asarray(table.sum(axis=1))
  np.testing.assert_array_equal(sums[[2, 4, 6]], 0.0)  # never visited
  np.testing.assert_allclose(sums[[5, 8]], 1 - beta**2, rtol=1e-6)  # visited twice
  np.testing.assert_allclose(sums[[0, 1, 3, 7]], 1 - beta**3, rtol=1e-6)  # three times


def test_elr_first_target_sums_to_one_minus_beta_and_padding_is_dropped():
  table = elr.init_targets(N, C) + 0.25  # any content: padding must not touch it
  padded = np.array([2, N, 4, N])
  probs = jax.nn.softmax(LOGITS[:4])
  new = elr.update_targets(elr.init_targets(N, C), padded, probs, beta=0.9)
  np.testing.assert_allclose(np.asarray(new.sum(axis=1))[[2, 4]], 0.1, rtol=1e-6)
  assert float(np.abs(np.asarray(new)).sum(axis=1)[[0, 1, 3, 5, 6, 7, 8]].max()) == 0.0
  kept = elr.update_targets(table, padded, probs, beta=0.9)
  untouched = [0, 1, 3, 5, 6, 7, 8]
  np.testing.assert_array_equal(np.asarray(kept)[untouched], np.asarray(table)[untouched])
  assert kept.shape == (N, C) and kept.dtype == table.dtype


def test_elr_padded_batch_mean_equals_the_original_on_the_valid_rows():
  beta, lam = 0.9, 7.0
  table_np = np.zeros((N, C))
  want = np_elr_forward(table_np, INDICES[:4], LOGITS[:4], GIVEN[:4], beta, lam)
  idx = np.concatenate([INDICES[:4], [N, N]])
  table = elr.init_targets(N, C)
  rows = elr.updated_rows(jnp.take(table, idx, axis=0, mode="clip"), jax.nn.softmax(LOGITS), beta=beta)
  per_example = elr.elr_loss(LOGITS, ONE_HOT, rows, lam=lam)
  valid = jnp.array([1, 1, 1, 1, 0, 0])
  got = method_lib.weighted_batch_mean(per_example, jnp.ones(B), valid)
  np.testing.assert_allclose(got, want, rtol=1e-5)


def test_elr_gradient_flows_through_p_only():
  beta, lam = 0.7, 3.0
  old_rows = np.abs(np.random.default_rng(1).normal(size=(B, C))) * 0.05

  def jax_objective(z):  # as a jitted step would do it: rows updated inside the differentiated function
    rows = elr.updated_rows(old_rows, jax.nn.softmax(z), beta=beta)
    return jnp.mean(elr.elr_loss(z, ONE_HOT, rows, lam=lam))

  got = jax.grad(jax_objective)(LOGITS)
  # PyTorch: the new rows come from y_pred.data.detach(), i.e. constants of the backward pass.
  p0 = np.clip(np_softmax(LOGITS), 1e-4, 1 - 1e-4)
  fixed_rows = beta * old_rows + (1 - beta) * p0 / p0.sum(axis=1, keepdims=True)

  def original(z):
    y_pred = np.clip(np_softmax(z), 1e-4, 1 - 1e-4)
    ce = np.mean(-np_log_softmax(z)[np.arange(B), GIVEN])
    return ce + lam * np.mean(np.log(1 - (fixed_rows * y_pred).sum(axis=1)))

  want = fd_grad(original, LOGITS)
  assert_grad_close(got, want)
  # The saturated row: its clamped p passes no gradient to the regulariser; only CE's p - y is left.
  np.testing.assert_allclose(got[5], (np_softmax(LOGITS[5]) - ONE_HOT[5]) / B, atol=1e-7)

  def without_stop_gradient(z):  # what differentiating through the target update would give: not the original
    y_pred = np.clip(np_softmax(z), 1e-4, 1 - 1e-4)
    rows = beta * old_rows + (1 - beta) * y_pred / y_pred.sum(axis=1, keepdims=True)
    ce = np.mean(-np_log_softmax(z)[np.arange(B), GIVEN])
    return ce + lam * np.mean(np.log(1 - (rows * y_pred).sum(axis=1)))

  assert np.abs(fd_grad(without_stop_gradient, LOGITS) - want).max() > 1e-3
  rows_grad = jax.grad(lambda t: jnp.sum(elr.elr_loss(LOGITS, ONE_HOT, t, lam=lam)))(fixed_rows.astype(np.float32))
  assert float(jnp.abs(rows_grad).max()) == 0.0


def test_elr_regularizer_is_the_lambda_part():
  rows = np.abs(np.random.default_rng(2).normal(size=(B, C))).astype(np.float32) * 0.1
  p = np.clip(np_softmax(LOGITS), 1e-4, 1 - 1e-4)
  np.testing.assert_allclose(elr.elr_regularizer(LOGITS, rows), np.log(1 - (rows * p).sum(1)), rtol=1e-5)
  diff = elr.elr_loss(LOGITS, ONE_HOT, rows, lam=2.0) - elr.elr_loss(LOGITS, ONE_HOT, rows, lam=0.0)
  np.testing.assert_allclose(diff, 2.0 * elr.elr_regularizer(LOGITS, rows), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------------------------
# ELR+.


@pytest.mark.parametrize("length", [0, 40000, 7])
def test_sigmoid_ramp_matches_the_original(length):
  for step in [0, 1, 3, 7, 20000, 40000, 50000]:
    np.testing.assert_allclose(elr.sigmoid_ramp(step, length), np_sigmoid_rampup(step, length), rtol=1e-6)


def test_ema_decay_matches_the_original():
  for step in [1, 2, 10, 333, 39999, 40000, 100000]:
    for alpha in [0.997, 0.9999]:
      np.testing.assert_allclose(
        elr.ema_decay(step, ema_update=True, ema_alpha=alpha, ramp_length=40000),
        np_ema_alpha(step, True, alpha, 40000),
        rtol=1e-5,
      )
      np.testing.assert_allclose(
        elr.ema_decay(step, ema_update=False, ema_alpha=alpha, ramp_length=40000),
        np_ema_alpha(step, False, alpha, 40000),
        rtol=1e-5,
      )
  # ema_alpha = 0 (a NameError in the original): the EMA copies the parameters.
  assert float(elr.ema_decay(5, ema_update=True, ema_alpha=0.0, ramp_length=10)) == 0.0
  ema, params = {"w": jnp.ones(3)}, {"w": jnp.arange(3.0)}
  np.testing.assert_allclose(elr.update_ema(ema, params, 0.0)["w"], params["w"])
  np.testing.assert_allclose(elr.update_ema(ema, params, 0.75)["w"], 0.75 + 0.25 * np.arange(3.0))


def test_mixup_one_lambda_one_permutation():
  x = np.random.default_rng(3).normal(size=(B, 4, 4, 3)).astype(np.float32)
  key = jax.random.key(3)
  x_mix, y_mix, perm, lam = elr.mixup(x, ONE_HOT, key, 1.0)
  assert sorted(np.asarray(perm).tolist()) == list(range(B))
  assert 0.5 <= float(lam) <= 1.0 and lam.dtype == jnp.float32
  lam64 = float(lam)
  np.testing.assert_allclose(x_mix, lam64 * x + (1 - lam64) * x[np.asarray(perm)], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(y_mix, lam64 * ONE_HOT + (1 - lam64) * ONE_HOT[np.asarray(perm)], rtol=1e-6)
  again = jax.jit(elr.mixup)(x, ONE_HOT, key, 1.0)
  for a, b in zip(again, (x_mix, y_mix, perm, lam)):
    np.testing.assert_allclose(a, b, rtol=1e-6)
  lams = [float(elr.mixup(x, ONE_HOT, k, 1.0)[3]) for k in jax.random.split(jax.random.key(0), 20)]
  assert min(lams) >= 0.5 and len(set(lams)) > 10
  x_same, y_same, identity, one = elr.mixup(x, ONE_HOT, key, 0.0)  # alpha 0: no mixup
  np.testing.assert_array_equal(identity, np.arange(B))
  assert float(one) == 1.0
  np.testing.assert_array_equal(x_same, x)
  np.testing.assert_array_equal(y_same, ONE_HOT)
  images = (np.random.default_rng(4).integers(0, 255, size=(B, 2, 2, 3))).astype(np.uint8)
  assert elr.mixup(images, ONE_HOT, key, 1.0)[0].dtype == jnp.float32


@pytest.mark.parametrize("num_classes_100", [False, True])
def test_elr_plus_step_matches_the_original(num_classes_100):
  beta, lam, coef_step, iteration = 0.9, 7.0, 40000, 12000
  ema_logits = (np.random.default_rng(5).normal(size=(B, C)) * 2).astype(np.float32)
  key = jax.random.key(1)
  _, y_mix, perm, mix_lam = elr.mixup(np.zeros((B, 1), np.float32), ONE_HOT, key, 1.0)
  perm_np, mix_lam64 = np.asarray(perm), float(mix_lam)
  pred_hist = np.zeros((N, C))
  pred_hist[INDICES] = np.abs(np.random.default_rng(6).normal(size=(B, C))) * 0.1
  table = jnp.asarray(pred_hist, jnp.float32)
  q_np = np_update_hist(pred_hist, ema_logits, INDICES, perm_np, mix_lam64, beta)
  y_mix_np = mix_lam64 * ONE_HOT + (1 - mix_lam64) * ONE_HOT[perm_np]
  want = np_elr_plus_forward(iteration, LOGITS, y_mix_np, q_np, 100 if num_classes_100 else C, lam, coef_step)

  table = elr.update_targets(table, INDICES, jax.nn.softmax(ema_logits), beta=beta, clamp=None)
  np.testing.assert_allclose(table, pred_hist, rtol=1e-5, atol=1e-7)
  q = elr.mix_targets(table[INDICES], perm, mix_lam)
  np.testing.assert_allclose(q, q_np, rtol=1e-5, atol=1e-7)
  coef = elr.sigmoid_ramp(iteration, coef_step)
  per_example = elr.elr_plus_loss(LOGITS, y_mix, q, lam=lam, coef=coef, reweight_labels=num_classes_100)
  np.testing.assert_allclose(jnp.mean(per_example), want, rtol=1e-5)

  got = jax.grad(
    lambda z: jnp.mean(elr.elr_plus_loss(z, y_mix, q, lam=lam, coef=coef, reweight_labels=num_classes_100))
  )(LOGITS)
  wanted = fd_grad(
    lambda z: np_elr_plus_forward(iteration, z, y_mix_np, q_np, 100 if num_classes_100 else C, lam, coef_step), LOGITS
  )
  assert_grad_close(got, wanted)


def test_reweighted_labels_guard_and_sum():
  q = np.abs(np.random.default_rng(7).normal(size=(B, C))).astype(np.float32)
  q[0, GIVEN[0]] = 0.0  # label 0 of row 0 has no target mass: 0 / 0 in the original
  labels = elr.reweighted_labels(ONE_HOT, q)
  assert np.isfinite(np.asarray(labels)).all()
  np.testing.assert_allclose(labels.sum(axis=1)[1:], 1.0, rtol=1e-6)
  assert float(labels[0].sum()) == 0.0


# ------------------------------------------------------------------------------------------------------------
# SOP.

U_ROWS = (RNG.uniform(0.2, 0.7, size=B) * RNG.choice([-1, 1], size=B)).astype(np.float32)
V_ROWS = (RNG.normal(size=(B, C)) * 0.3).astype(np.float32)
U_ROWS[2] = 1.3  # u^2 > 1: U clamped at 1, no gradient to u_2
LOGITS2 = (LOGITS + RNG.normal(size=(B, C))).astype(np.float32)


def test_init_params():
  u, v = sop.init_params(jax.random.key(0), 1000, 10)
  assert u.shape == (1000,) and v.shape == (1000, 10) and u.dtype == v.dtype == jnp.float32
  assert 0.9e-8 < float(jnp.std(v)) < 1.1e-8 and abs(float(jnp.mean(v))) < 1e-9
  assert 0.85e-8 < float(jnp.std(u)) < 1.15e-8
  u2, _ = sop.init_params(jax.random.key(0), 1000, 10)
  np.testing.assert_array_equal(u, u2)
  assert float(jnp.abs(sop.init_params(jax.random.key(0), 3, 2, std=0.0)[1]).max()) == 0.0


def test_sop_terms_match_the_original():
  want = np_sop_parts(LOGITS, ONE_HOT, U_ROWS, V_ROWS, LOGITS2)
  ce, mse = sop.sop_loss(LOGITS, ONE_HOT, U_ROWS, V_ROWS)
  assert ce.shape == mse.shape == (B,)
  np.testing.assert_allclose(jnp.mean(ce), want["ce"], rtol=1e-5)
  np.testing.assert_allclose(jnp.mean(mse), want["mse"], rtol=1e-5)
  np.testing.assert_allclose(sop.balance_loss(LOGITS, ONE_HOT, U_ROWS, V_ROWS), want["balance"], rtol=1e-5)
  np.testing.assert_allclose(jnp.mean(sop.consistency_loss(LOGITS, LOGITS2)), want["consistency"], rtol=1e-5)
  p_tilde = sop.reparameterized_prediction(LOGITS, ONE_HOT, U_ROWS, V_ROWS)
  assert float(p_tilde.min()) >= np.float32(1e-4) and float(p_tilde.max()) <= 1.0


def _sop_objective(z, u, v, z2, *, detach_v=True):
  ce, mse = sop.sop_loss(z, ONE_HOT, u, v)
  return (
    jnp.mean(ce)
    + jnp.mean(mse)
    + 0.1 * sop.balance_loss(z, ONE_HOT, u, v, detach_v=detach_v)
    + 0.9 * jnp.mean(sop.consistency_loss(z, z2))
  )


def test_sop_gradient_flows_are_the_originals():
  # Per-term flows: theta (logits) not from MSE, v not from CE, u from both.
  def ce_of(z, u, v):
    return jnp.mean(sop.sop_loss(z, ONE_HOT, u, v)[0])

  def mse_of(z, u, v):
    return jnp.mean(sop.sop_loss(z, ONE_HOT, u, v)[1])

  dce = jax.grad(ce_of, argnums=(0, 1, 2))(LOGITS, U_ROWS, V_ROWS)
  dmse = jax.grad(mse_of, argnums=(0, 1, 2))(LOGITS, U_ROWS, V_ROWS)
  assert float(jnp.abs(dmse[0]).max()) == 0.0  # d mse / d theta
  assert float(jnp.abs(dce[2]).max()) == 0.0  # d ce / d v
  live = np.ones(B, bool)
  live[2] = False  # u_2^2 > 1: clamped
  assert np.all(np.abs(np.asarray(dce[1]))[live] > 1e-6) and np.all(np.abs(np.asarray(dmse[1]))[live] > 1e-6)
  assert float(dce[1][2]) == 0.0 and float(dmse[1][2]) == 0.0

  def np_part(name):
    return lambda z=LOGITS, u=U_ROWS, v=V_ROWS: np_sop_parts(z, ONE_HOT, u, v)[name]

  assert_grad_close(dce[0], fd_grad(lambda z: np_part("ce")(z=z), LOGITS))
  assert_grad_close(dce[1], fd_grad(lambda u: np_part("ce")(u=u), U_ROWS))
  assert_grad_close(dmse[1], fd_grad(lambda u: np_part("mse")(u=u), U_ROWS))
  assert_grad_close(dmse[2], fd_grad(lambda v: np_part("mse")(v=v), V_ROWS))

  # The whole SOP+ objective (ratio_balance 0.1, ratio_consistency 0.9) as the original's autograd differentiates
  # it: z (view 1) from ce + balance (the consistency term reaches the network through view 2 only, p1 is
  # detached), u from ce + mse + balance, v from mse only.
  def np_total(z=LOGITS, u=U_ROWS, v=V_ROWS, parts=("ce", "mse", "balance", "consistency")):
    got = np_sop_parts(z, ONE_HOT, u, v, LOGITS2)
    ratio = {"ce": 1.0, "mse": 1.0, "balance": 0.1, "consistency": 0.9}
    return sum(ratio[k] * got[k] for k in parts)

  dz, du, dv = jax.grad(_sop_objective, argnums=(0, 1, 2))(LOGITS, U_ROWS, V_ROWS, LOGITS2)
  assert_grad_close(dz, fd_grad(lambda z: np_total(z=z, parts=("ce", "balance")), LOGITS))
  assert_grad_close(du, fd_grad(lambda u: np_total(u=u), U_ROWS))
  assert_grad_close(dv, fd_grad(lambda v: np_total(v=v, parts=("mse",)), V_ROWS))
  # Without sg(V) the v gradient would differ (v's value enters ce and balance through V).
  assert np.abs(fd_grad(lambda v: np_total(v=v), V_ROWS) - np.asarray(dv)).max() > 1e-3
  # The balance defect's option: detach_v=False lets the balance term reach v (ce keeps sg(V)).
  dv_open = jax.grad(_sop_objective, argnums=2)(LOGITS, U_ROWS, V_ROWS, LOGITS2, detach_v=False)
  assert_grad_close(dv_open, fd_grad(lambda v: np_total(v=v, parts=("mse", "balance")), V_ROWS))


def test_consistency_gradient_only_through_the_second_view():
  d1, d2 = jax.grad(lambda a, b: jnp.mean(sop.consistency_loss(a, b)), argnums=(0, 1))(LOGITS, LOGITS2)
  assert float(jnp.abs(d1).max()) == 0.0
  np.testing.assert_allclose(d2, (np_softmax(LOGITS2) - np_softmax(LOGITS)) / B, rtol=1e-4, atol=1e-7)


def test_balance_mask_and_empty_batch():
  pad = lambda a: np.concatenate([a, a[:2] * 0 + 7], axis=0)  # noqa: E731
  got = sop.balance_loss(pad(LOGITS), pad(ONE_HOT), pad(U_ROWS), pad(V_ROWS), where=np.arange(B + 2) < B)
  np.testing.assert_allclose(got, np_sop_parts(LOGITS, ONE_HOT, U_ROWS, V_ROWS)["balance"], rtol=1e-5)
  assert float(sop.balance_loss(LOGITS, ONE_HOT, U_ROWS, V_ROWS, where=np.zeros(B))) == 0.0


def test_sgd_update_full_indexed_duplicates_and_padding():
  u0, v0 = sop.init_params(jax.random.key(1), N, C, std=0.3)
  idx = np.array([3, 0, 3, 8, N, N])  # a repeated row and two padding rows
  valid = jnp.asarray(idx < N)

  def objective(u_rows, v_rows):
    ce, mse = sop.sop_loss(LOGITS, ONE_HOT, u_rows, v_rows)
    return method_lib.weighted_batch_mean(ce + mse, jnp.ones(B), valid)

  take = lambda a: jnp.take(a, idx, axis=0, mode="clip")  # noqa: E731
  row_grads = jax.grad(objective, argnums=(0, 1))(take(u0), take(v0))
  full_grads = jax.grad(lambda u, v: objective(take(u), take(v)), argnums=(0, 1))(u0, v0)
  u1, v1 = sop.sgd_update(u0, v0, row_grads, 1.0, 10.0, indices=idx)
  u2, v2 = sop.sgd_update(u0, v0, full_grads, 1.0, 10.0)
  np.testing.assert_allclose(u1, u2, rtol=1e-6, atol=1e-8)
  np.testing.assert_allclose(v1, v2, rtol=1e-6, atol=1e-8)
  np.testing.assert_allclose(u2, u0 - 1.0 * full_grads[0], rtol=1e-6)
  np.testing.assert_allclose(v2, v0 - 10.0 * full_grads[1], rtol=1e-6)
  untouched = [1, 2, 4, 5, 6, 7]  # row N - 1 = 8 is in the batch; padding (read as row 8) adds nothing
  np.testing.assert_array_equal(np.asarray(u1)[untouched], np.asarray(u0)[untouched])
  np.testing.assert_array_equal(np.asarray(v1)[untouched], np.asarray(v0)[untouched])
  assert float(jnp.abs(u1[3] - u0[3])) > 0
  # Padding rows with non-zero "gradients" are dropped, not written into row N - 1.
  junk = (jnp.ones(2), jnp.ones((2, C)))
  u3, v3 = sop.sgd_update(u0, v0, junk, 1.0, 1.0, indices=np.array([N, N + 5]))
  np.testing.assert_array_equal(u3, u0)
  np.testing.assert_array_equal(v3, v0)


# ------------------------------------------------------------------------------------------------------------
# Contract: jit, extreme logits, dtypes, validation.


def test_everything_jits_to_the_same_values():
  rows = np.abs(np.random.default_rng(8).normal(size=(B, C))).astype(np.float32) * 0.1
  table = elr.init_targets(N, C)
  probs = jax.nn.softmax(LOGITS)
  cases = [
    (lambda t, i, p: elr.update_targets(t, i, p, beta=0.7), (table, INDICES, probs)),
    (lambda z, y, t: elr.elr_loss(z, y, t, lam=3.0), (LOGITS, ONE_HOT, rows)),
    (
      lambda z, y, t, c: elr.elr_plus_loss(z, y, t, lam=7.0, coef=c, reweight_labels=True),
      (LOGITS, ONE_HOT, rows, 0.5),
    ),
    (lambda s: elr.ema_decay(s, ema_update=True, ema_alpha=0.997, ramp_length=40000), (1234,)),
    (sop.sop_loss, (LOGITS, ONE_HOT, U_ROWS, V_ROWS)),
    (sop.balance_loss, (LOGITS, ONE_HOT, U_ROWS, V_ROWS)),
    (sop.consistency_loss, (LOGITS, LOGITS2)),
    (
      lambda u, v, g, i: sop.sgd_update(u, v, g, 1.0, 10.0, indices=i),
      (np.zeros(N, np.float32), np.zeros((N, C), np.float32), (U_ROWS, V_ROWS), INDICES),
    ),
  ]
  for fn, args in cases:
    for eager, jitted in zip(jax.tree.leaves(fn(*args)), jax.tree.leaves(jax.jit(fn)(*args))):
      np.testing.assert_allclose(jitted, eager, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_extreme_logits_finite_value_and_gradient(dtype):
  z = jnp.asarray(np.where(np.random.default_rng(9).random((B, C)) < 0.5, 1e4, -1e4), dtype)
  rows = jnp.full((B, C), 1.0 / C)
  funcs = [
    lambda z: elr.elr_loss(z, ONE_HOT, rows, lam=3.0),
    lambda z: elr.elr_plus_loss(z, ONE_HOT, rows, lam=7.0, coef=1.0, reweight_labels=True),
    lambda z: sop.sop_loss(z, ONE_HOT, U_ROWS, V_ROWS)[0],
    lambda z: sop.consistency_loss(z, -z),
  ]
  for fn in funcs:
    value = fn(z)
    assert value.dtype == dtype
    grad = jax.grad(lambda z: jnp.sum(fn(z).astype(jnp.float32)))(z)
    assert np.isfinite(np.asarray(value, np.float32)).all() and np.isfinite(np.asarray(grad, np.float32)).all()


def test_validation():
  with pytest.raises(ValueError, match="beta"):
    elr.update_targets(elr.init_targets(N, C), INDICES, jax.nn.softmax(LOGITS), beta=1.5)
  with pytest.raises(ValueError, match="lam"):
    elr.elr_loss(LOGITS, ONE_HOT, ONE_HOT, lam=-1.0)
  with pytest.raises(ValueError, match="shape"):
    elr.elr_loss(LOGITS, ONE_HOT, ONE_HOT[:3], lam=1.0)
  with pytest.raises(ValueError, match="clamp"):
    elr.updated_rows(ONE_HOT, ONE_HOT, beta=0.5, clamp=(0.5, 0.1))
  with pytest.raises(ValueError, match="u_rows"):
    sop.sop_loss(LOGITS, ONE_HOT, V_ROWS, V_ROWS)
  with pytest.raises(ValueError, match="lr_v"):
    sop.sgd_update(U_ROWS, V_ROWS, (U_ROWS, V_ROWS), 1.0, -1.0)


def test_sop_plus_objective_is_the_originals_loss_and_padding_counts_nothing():
  """SOP+ (ratio_balance 0.1, ratio_consistency 0.9): the method's objective on the weak logits and the strong
  view's is the original's loss (overparametrization_loss.forward on the concatenated outputs); two padding rows
  with other values leave it unchanged."""
  plus = sop.method(ratio_balance=0.1, ratio_consistency=0.9)
  assert plus.strong_view and not sop.method(ratio_balance=0.1).strong_view
  rows = {"sop_u": U_ROWS, "sop_v": V_ROWS}
  loss, _ = plus.objective(
    LOGITS, ONE_HOT, np.ones(B), np.ones(B, bool), None, rows=rows, epoch=1, strong_logits=LOGITS2
  )
  want = np_sop_parts(LOGITS, ONE_HOT, U_ROWS, V_ROWS, LOGITS2)
  total = want["ce"] + want["mse"] + 0.1 * want["balance"] + 0.9 * want["consistency"]
  np.testing.assert_allclose(float(loss), total, rtol=1e-5)

  def pad(a):
    return np.concatenate([a, np.full_like(a[:2], 3)])

  padded, _ = plus.objective(
    pad(LOGITS),
    pad(ONE_HOT),
    np.ones(B + 2),
    np.arange(B + 2) < B,
    None,
    rows={k: pad(v) for k, v in rows.items()},
    epoch=1,
    strong_logits=pad(LOGITS2),
  )
  np.testing.assert_allclose(float(padded), float(loss), rtol=1e-6)
