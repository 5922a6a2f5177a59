"""CAL's pure pieces (noisy_jax.core.cal) against the original code (UCSC-REAL/CAL@bdb376b), transcribed below in
float64 PyTorch as it is there: the dense [C, C, N] T_mat of DS:199-205 normalised as EX:119-128, the covariance term
CrossEntropyStableCALMultiple.forward (PL:66-100), the epoch's loss means (EX:187, 209, 214), the peer-regularised
cross entropy (PL:16-60, 148-170), the sieve (PR:109-128) and SegAlpha (AS:96-127). Values and gradients with respect
to the logits; C = 10 and 100; several N. COMPARISONS counts the assert_allclose calls against the code, WORST the
worst relative error seen (printed by the last test).
"""

import bisect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from noisy_jax.core import cal

STATS = {"comparisons": 0, "worst": 0.0}


def _compare(got, want, rtol, atol=0.0):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
  STATS["comparisons"] += 1
  scale = np.maximum(np.abs(want), 1e-300)
  mask = np.abs(want) > 1e-12
  if mask.any():
    STATS["worst"] = max(STATS["worst"], float(np.max(np.abs(got - want)[mask] / scale[mask])))


# ------------------------------------------------------------------------------------------------------------------
# The original code, transcribed (float64 torch).


def _code_t_mat(distilled, weights, noisy, num_classes):
  """DS:199-205 T_mat, then EX:121-128's normalisation; returns (T_mat [C, C, N], P_y_distill [C])."""
  distilled, noisy, weights = torch.tensor(distilled), torch.tensor(noisy), torch.tensor(weights, dtype=torch.float64)
  row = col = num_classes
  T_mat = torch.zeros((row, col, distilled.shape[0]), dtype=torch.float64)
  for i in range(row):
    for j in range(col):
      T_mat[i][j] = ((distilled == i) * (noisy == j) * (weights > 0.0)) * 1.0
  distilled_weight = (weights > 0.0) * 1.0
  P_y_distill = torch.tensor(
    [torch.sum((distilled == i) * (distilled_weight == 1.0)) for i in range(num_classes)], dtype=torch.float64
  )
  P_y_distill /= torch.sum(P_y_distill)
  for i in range(num_classes):
    for j in range(num_classes):
      weight_sum = np.max((torch.sum(distilled_weight * (distilled == i)).item(), 1.0))
      T_mat[i, j] = (T_mat[i, j] - torch.sum(T_mat[i, j]) / weight_sum) * distilled_weight * (distilled == i)
  return T_mat, P_y_distill


def _code_cal_forward(outputs, T_mat_all, raw_idx, loss_mean_all, P_y_distill, eps=1e-5):
  """PL:66-100 CrossEntropyStableCALMultiple.forward with T_mat_true None: (loss_out, loss_rec_all)."""
  log_out = -torch.log(torch.softmax(outputs, dim=-1) + eps)
  T_mat = T_mat_all[:, :, raw_idx]
  T_mat_indicator = torch.sum(T_mat > 0.0, 1).view(T_mat.shape[0], 1, -1).repeat(1, T_mat.shape[0], 1).double()
  loss_all = torch.transpose(log_out, 0, 1).reshape(1, T_mat.shape[0], -1).repeat(T_mat.shape[0], 1, 1)
  loss_all_norm = (
    loss_all - loss_mean_all.view(T_mat.shape[0], T_mat.shape[0], 1).repeat(1, 1, T_mat.shape[2])
  ) * T_mat_indicator
  loss_rec_all = torch.sum(T_mat_indicator * loss_all, dim=2)
  T_mat_indicator_sum = torch.sum(T_mat_indicator, dim=2)
  T_mat_indicator_sum[T_mat_indicator_sum == 0] = 1.0
  loss_out = torch.sum(torch.sum(torch.sum(T_mat * loss_all_norm, dim=2) / T_mat_indicator_sum, dim=1) * P_y_distill)
  return loss_out, loss_rec_all


def _code_indicator_sum(T_mat):
  """EX:187 T_mat_indicator_sum [C, C]."""
  C = T_mat.shape[0]
  return torch.max(
    torch.sum(torch.sum(torch.sum(T_mat > 0.0, 2), 1).view(C, 1, -1).repeat(1, C, 1), 2) * 1.0,
    torch.ones((C, C), dtype=torch.float64),
  )


def _code_peer_reg(outputs, labels, prior, alpha):
  """PL:148-170 PeerLossRegCE('crossentropy').forward with output_peer = outputs (PR:94): base - alpha peer."""
  base = torch.nn.NLLLoss()(torch.log(torch.softmax(outputs, dim=-1) + 1e-8), labels)
  log_out = torch.log(torch.softmax(outputs, dim=-1) + 1e-5)
  peer = -torch.mean(torch.sum(torch.mul(prior, log_out), dim=1))
  return base - alpha * peer


def _code_sieve(outputs, labels, n_total):
  """PR:109-128 on a zeroed epoch's arrays (EX:143-144, 180-181): (distilled_label_new, distilled_weight_new)."""
  weight_new, label_new = np.zeros(n_total), np.zeros(n_total)
  raw_idx = torch.arange(outputs.shape[0])
  preds = torch.max(outputs, 1)[1]
  out_prob = torch.softmax(outputs, dim=-1)
  probs_label = out_prob.gather(1, labels.view(-1, 1)).view(-1)
  log_out_prob = -torch.log(out_prob + 1e-8)
  ce_term = -torch.log(probs_label + 1e-8)
  norm_term = torch.mean(log_out_prob, dim=1)
  idx_true = (ce_term - norm_term < -8.0).detach()
  idx_false = (ce_term - norm_term > -8.0).detach()
  weight_new[raw_idx[idx_true]] = 1.0
  weight_new[raw_idx[idx_false]] = 1.0
  label_new[raw_idx[idx_true]] = labels[idx_true].numpy().astype(int)
  label_new[raw_idx[idx_false]] = preds[idx_false].numpy().astype(int)
  return label_new.astype(int), weight_new


class _Loss:
  _name = "peer loss function with noisy prior"

  def __init__(self, alpha):
    self._alpha = alpha


def _code_seg_alpha(alpha_list, milestones, epochs, base=0.0):
  """AS:8-30, 96-127 SegAlpha, stepped after each epoch as baseexperiment.py:126-128: alpha of each epoch."""
  lossfunc = _Loss(base)
  # AlphaScheduler.__init__ (AS:9-23) then SegAlpha's (AS:103-121).
  step_count = 0
  slopes, alpha_cur, epoch_cur = [], base, 0
  for i in range(len(alpha_list)):
    slopes.append((alpha_list[i] - alpha_cur) / float(milestones[i] - epoch_cur))
    alpha_cur, epoch_cur = alpha_list[i], milestones[i]
  current = base
  out = []
  for _ in range(epochs):
    out.append(lossfunc._alpha)
    step_count += 1
    idx = bisect.bisect_right(milestones, step_count - 1)
    if idx < len(alpha_list):
      current += slopes[idx]
    lossfunc._alpha = current
  return np.array(out)


# ------------------------------------------------------------------------------------------------------------------


def _case(seed, n, num_classes, keep=0.7):
  """Noisy labels, distilled labels (the noisy one with probability keep) and weights (a few 0), logits."""
  rng = np.random.default_rng(seed)
  noisy = rng.integers(0, num_classes, n)
  distilled = np.where(rng.random(n) < keep, noisy, rng.integers(0, num_classes, n))
  weights = (rng.random(n) > 0.1).astype(np.float64)
  logits = rng.normal(size=(n, num_classes)) * 3.0
  return noisy, distilled, weights, logits


def _ours_cal(logits, noisy, distilled, weights, loss_mean, num_classes, rows):
  stats = cal.distilled_statistics(distilled, weights, noisy, num_classes)
  ind = cal.indicator(distilled[rows], weights[rows], noisy[rows], stats["transition"])

  def f(z):
    losses = cal.neg_log_probs(z, cal.CAL_EPSILON)
    return cal.cal_term(
      losses, noisy[rows], distilled[rows], ind, stats["transition"], stats["p_distill"], jnp.asarray(loss_mean)
    )

  value, grad = jax.value_and_grad(f)(jnp.asarray(logits[rows]))
  record = cal.cal_record(cal.neg_log_probs(jnp.asarray(logits[rows]), cal.CAL_EPSILON), distilled[rows], ind)
  return value, grad, record, stats


@pytest.mark.parametrize("num_classes,n,batch", [(10, 200, 32), (10, 57, 57), (100, 400, 64), (100, 150, 17)])
def test_covariance_term_is_the_codes_dense_form(num_classes, n, batch):
  noisy, distilled, weights, logits = _case(num_classes + n, n, num_classes)
  if num_classes == 10:  # a class whose distilled examples all carry one noisy label: T_hat == 1, indicator 0
    distilled[distilled == 3] = 4
    distilled[:3] = 3
    noisy[:3] = 5
  rng = np.random.default_rng(n)
  loss_mean = rng.random((num_classes, num_classes)) * 2.0
  T_mat, P = _code_t_mat(distilled, weights, noisy, num_classes)
  rows = rng.permutation(n)[:batch]
  with jax.enable_x64():
    value, grad, record, stats = _ours_cal(logits, noisy, distilled, weights, loss_mean, num_classes, rows)
    _compare(stats["p_distill"], P.numpy(), rtol=1e-12)
  outputs = torch.tensor(logits[rows], dtype=torch.float64, requires_grad=True)
  want, rec = _code_cal_forward(outputs, T_mat, torch.tensor(rows), torch.tensor(loss_mean), P)
  want.backward()
  _compare(value, want.item(), rtol=1e-10, atol=1e-13)
  _compare(grad, outputs.grad.numpy(), rtol=1e-9, atol=1e-14)
  _compare(record, rec.detach().numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("num_classes,n,batch", [(10, 90, 16), (100, 300, 64)])
def test_the_epoch_loss_means_are_the_codes(num_classes, n, batch):
  """EX:187-214: loss_rec_all summed over an epoch's batches (every row once), divided by T_mat_indicator_sum."""
  noisy, distilled, weights, logits = _case(7 * num_classes, n, num_classes, keep=0.5)
  T_mat, P = _code_t_mat(distilled, weights, noisy, num_classes)
  order = np.random.default_rng(3).permutation(n)
  code_total = torch.zeros((num_classes, num_classes), dtype=torch.float64)
  with jax.enable_x64():
    ours_total = jnp.zeros((num_classes, num_classes))
    for start in range(0, n, batch):
      rows = order[start : start + batch]
      _, rec = _code_cal_forward(
        torch.tensor(logits[rows]), T_mat, torch.tensor(rows), torch.zeros(num_classes, num_classes).double(), P
      )
      code_total += rec
      _, _, record, stats = _ours_cal(logits, noisy, distilled, weights, np.zeros((1, 1)), num_classes, rows)
      ours_total = ours_total + record
    ours = cal.loss_mean(ours_total, stats["count"])
  code = code_total / _code_indicator_sum(T_mat)
  _compare(ours, code.numpy(), rtol=1e-12, atol=1e-14)
  _compare(np.broadcast_to(np.maximum(stats["count"], 1.0)[:, None], code.shape), _code_indicator_sum(T_mat), rtol=0)


@pytest.mark.parametrize("num_classes", [10, 100])
@pytest.mark.parametrize("alpha,scale", [(0.0, 1.0), (2.0, 1.0), (1.0, 10.0)])
def test_peer_regularised_ce_is_the_codes(num_classes, alpha, scale):
  rng = np.random.default_rng(num_classes)
  z = rng.normal(size=(24, num_classes)) * 4.0
  y = rng.integers(0, num_classes, 24)
  counts = np.bincount(rng.integers(0, num_classes, 500), minlength=num_classes) + 1
  prior = counts / counts.sum() * scale
  outputs = torch.tensor(z, requires_grad=True)
  want = _code_peer_reg(outputs, torch.tensor(y), torch.tensor(prior).unsqueeze(0), alpha)
  want.backward()
  with jax.enable_x64():
    f = lambda logits: jnp.mean(
      cal.peer_regularised_ce(logits, jax.nn.one_hot(y, num_classes, dtype=jnp.float64), prior, alpha=alpha)
    )
    value, grad = jax.value_and_grad(f)(jnp.asarray(z))
  _compare(value, want.item(), rtol=1e-12)
  _compare(grad, outputs.grad.numpy(), rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("num_classes", [10, 100])
def test_the_sieve_is_the_codes(num_classes):
  rng = np.random.default_rng(11)
  y = rng.integers(0, num_classes, 300)
  z = rng.normal(size=(300, num_classes)) * 2.0
  z[:100, :] = -30.0
  z[np.arange(100), y[:100]] = 30.0  # confident on the label: kept
  z[100:150, :] = -30.0
  z[np.arange(100, 150), (y[100:150] + 1) % num_classes] = 30.0  # confident elsewhere: relabelled
  want_labels, want_weights = _code_sieve(torch.tensor(z), torch.tensor(y), 300)
  with jax.enable_x64():
    labels, weights = cal.sieve(jnp.asarray(z), jnp.asarray(y))
  np.testing.assert_array_equal(np.asarray(labels), want_labels)
  _compare(weights, want_weights, rtol=0)
  STATS["comparisons"] += 1
  assert (np.asarray(labels)[:100] == y[:100]).all() and (np.asarray(labels)[100:150] != y[100:150]).all()


def test_the_sieve_leaves_an_exact_tie_unweighted():
  """score == threshold: neither branch (PR:123-128): label 0, weight 0 (a threshold at the score itself)."""
  z = jnp.asarray([[2.0, 0.0, -1.0]])
  losses = cal.neg_log_probs(z, cal.SIEVE_EPSILON)
  score = float(losses[0, 1] - jnp.mean(losses[0]))
  labels, weights = cal.sieve(z, jnp.asarray([1]), threshold=score)
  assert int(labels[0]) == 0 and float(weights[0]) == 0.0


@pytest.mark.parametrize(
  "alpha_list,milestones,epochs",
  [([0.0, 2.0, 2.0], [10, 40, 80], 100), ([0.0, 1.0, 1.0], [10, 40, 80], 100), ([0.0, 2.0], [10, 40], 65)],
)
def test_seg_alpha_is_the_codes(alpha_list, milestones, epochs):
  want = _code_seg_alpha(alpha_list, milestones, epochs)
  got = cal.seg_alpha(alpha_list, milestones, epochs)
  np.testing.assert_array_equal(got, want)
  STATS["comparisons"] += 1
  assert got[10] == 0.0 and got[11] > 0 and abs(got[40] - alpha_list[1]) < 1e-12


def test_noisy_priors_are_the_codes():
  """DatasetNumerical.py:207 class frequencies; EX:104-105 sqrt(a) / sum(sqrt(a))."""
  y = np.random.default_rng(0).integers(0, 10, 1000)
  a = np.bincount(y, minlength=10) / 1000.0
  with jax.enable_x64():
    _compare(cal.noisy_prior(y, 10), a, rtol=1e-15)
    _compare(cal.noisy_prior(y, 10, sqrt=True), np.sqrt(a) / np.sum(np.sqrt(a)), rtol=1e-14)


def test_per_example_form_never_builds_the_dense_tensor_and_is_float32_finite():
  noisy, distilled, weights, logits = _case(1, 64, 10)
  logits = logits * 1e3
  stats = cal.distilled_statistics(distilled, weights, noisy, 10)
  ind = cal.indicator(distilled, weights, noisy, stats["transition"])
  f = lambda z: cal.cal_term(
    cal.neg_log_probs(z, cal.CAL_EPSILON),
    noisy,
    distilled,
    ind,
    stats["transition"],
    stats["p_distill"],
    jnp.zeros((10, 10)),
  )
  value, grad = jax.value_and_grad(f)(jnp.asarray(logits, jnp.float32))
  assert np.isfinite(float(value)) and np.all(np.isfinite(np.asarray(grad)))


@pytest.mark.parametrize(
  "args,message",
  [
    (([0.0, 1.0], [10]), r"must be non-empty and of one length"),
    (([0.0, 1.0], [40, 10]), r"milestones=\[40, 10\] must be increasing"),
    (([0.0], [0]), r"milestones=\[0\]"),
  ],
)
def test_bad_schedules_name_the_value(args, message):
  with pytest.raises(ValueError, match=message):
    cal.seg_alpha(*args, 10)


def test_bad_epsilon_setting_is_named():
  with pytest.raises(ValueError, match="'approximate'"):
    cal.epsilons("approximate")


def test_zz_report_counts():
  print(f"\nCAL comparisons with the original: {STATS['comparisons']}, worst relative error {STATS['worst']:.3e}")
  assert STATS["comparisons"] > 0
