"""ProMix building blocks (noisy_jax.methods.promix) against NumPy re-computations of the original code's formulas
(Justherozen/ProMix@HEAD: Train_promix.py label_guessing, train() and eval_train(); utils/utils.py debias_pl,
debias_output, bias_update, CE_Soft_Label, linear_rampup2), written line by line after the torch code."""

from __future__ import annotations

import math
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from noisy_jax.methods import promix

# ------------------------------------------------------------------------------------------------------------
# NumPy re-computations, written after the original code (torch ops replaced by their NumPy equivalents).


def np_softmax(z):
  e = np.exp(z - z.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def np_log_softmax(z):
  m = z.max(-1, keepdims=True)
  return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def np_debias_pl(logit, bias, tau):
  """utils.debias_pl: F.softmax(logit - tau * torch.log(bias), dim=1)."""
  return np_softmax(logit - tau * np.log(bias))


def np_debias_output(logit, bias, tau):
  """utils.debias_output: logit + tau * torch.log(bias)."""
  return logit + tau * np.log(bias)


def np_bias_update(inp, bias, momentum):
  """utils.bias_update without bias_mask (as train() calls it, on px[idx_chosen]): input.mean(dim=0)."""
  input_mean = inp.mean(axis=0)
  return momentum * bias + (1 - momentum) * input_mean


def np_ce_soft_label(outputs, targets):
  """CE_Soft_Label.forward: the per-row vector -sum(log_softmax(outputs) * targets)."""
  return -(np_log_softmax(outputs) * targets).sum(axis=1)


def np_sharpen(p, T):
  """train(): ptx = p ** (1 / T); ptx / ptx.sum(dim=1, keepdim=True)."""
  ptx = p ** (1 / T)
  return ptx / ptx.sum(axis=1, keepdims=True)


def np_linear_rampup2(current, rampup_length):
  assert current >= 0 and rampup_length >= 0
  if current >= rampup_length:
    return 1.0
  else:
    return current / rampup_length


def np_weights(epoch, warmup_ep, debias_beta_pl):
  """train(): w, and beta as it is when the losses use it (after the `beta = 0 if ...` line)."""
  w = np_linear_rampup2(epoch, warmup_ep)
  beta = 0.1 * np_linear_rampup2(epoch, 2 * warmup_ep) if debias_beta_pl else 1
  beta = 0 if (epoch >= 2 * warmup_ep and beta < 1) else beta
  return w, beta


def np_rho(epoch, rho_range="0.2,0.6", warmup_ep=50):
  rho_start, rho_end = [float(item) for item in rho_range.split(",")]
  return rho_start + (rho_end - rho_start) * np_linear_rampup2(epoch, warmup_ep)


def np_eval_train_selection(raw_losses, targets, rho, num_class):
  """eval_train after the loss loop: min-max normalisation (float32, as torch), then the class loop. Returns prob."""
  losses = np.asarray(raw_losses, np.float32)
  targets_list = np.asarray(targets, np.float32)  # torch.zeros(50000) holds the targets as floats
  losses = (losses - losses.min()) / (losses.max() - losses.min())
  prob = np.zeros(targets_list.shape[0])
  idx_chosen_sm = []
  for j in range(num_class):
    indices = np.where(targets_list == j)[0]
    if len(indices) == 0:
      continue
    bs_j = targets_list.shape[0] * (1.0 / num_class)
    pseudo_loss_vec_j = losses[indices]
    sorted_idx_j = np.argsort(pseudo_loss_vec_j, kind="stable")  # .sort()[1]; distinct values: no ties
    partition_j = max(min(int(math.ceil(bs_j * rho)), len(indices)), 1)
    idx_chosen_sm.append(indices[sorted_idx_j[:partition_j]])
  idx_chosen_sm = np.concatenate(idx_chosen_sm)
  prob[idx_chosen_sm] = 1
  return prob, losses


def np_label_guessing(w_x, score1, score2, match, tau, threshold):
  """Train_promix.label_guessing (idx_chosen = torch.where(w_x == 1)[0], batch_size = inputs_x.size(0)).

  Returns (w_x2, info) with info the branch taken, for the tests to check that each case really occurs."""
  batch_size = w_x.shape[0]
  idx_chosen = np.where(w_x == 1)[0]
  w_x2 = w_x.copy()
  info = {"applies": False, "candidates": 0, "max_to_sel_num": None, "capped": False}
  if (1.0 * idx_chosen.shape[0] / batch_size) < threshold:
    info["applies"] = True
    high_conf_cond2 = (score1 > tau) * (score2 > tau) * match
    high_conf_cond2 = (1.0 * high_conf_cond2 - w_x) > 0
    hc2_idx = np.where(high_conf_cond2)[0]
    max_to_sel_num = int(batch_size * threshold) - idx_chosen.shape[0]
    info["candidates"], info["max_to_sel_num"] = int(high_conf_cond2.sum()), max_to_sel_num
    if high_conf_cond2.sum() > max_to_sel_num:
      info["capped"] = True
      score_mean = (score1 + score2) / 2
      idx_remove = np.argsort(-score_mean[hc2_idx], kind="stable")[max_to_sel_num:]
      high_conf_cond2[hc2_idx[idx_remove]] = False
    w_x2[high_conf_cond2] = 1
  return w_x2, info


def np_network_loss(z_w, z_s, h_w, h_s, mixed, pseudo_label_l, idx_chosen, idx_unchosen, pi1, pi1_unrel, args):
  """train()'s loss_net1 + loss_net1_ph for net 1 (mixup / FMix losses given as scalars)."""
  alpha_output, debias_beta_pl, T, w, beta = args
  outputs_x = np_debias_output(z_w, pi1, alpha_output)
  outputs_x2 = np_debias_output(z_s, pi1, alpha_output)
  outputs_x_unrel_ph = np_debias_output(h_w, pi1_unrel, alpha_output)
  outputs_x2_unrel_ph = np_debias_output(h_s, pi1_unrel, alpha_output)
  outputs_x_ph = np_debias_output(h_w, pi1, alpha_output)
  outputs_x2_ph = np_debias_output(h_s, pi1, alpha_output)
  debias_px_unrel = np_debias_pl(z_w, pi1_unrel, debias_beta_pl)
  ce = np_ce_soft_label
  loss_cr = ce(outputs_x2[idx_chosen], pseudo_label_l[idx_chosen]).mean()
  loss_cr_ph = ce(outputs_x2_ph[idx_chosen], pseudo_label_l[idx_chosen]).mean()
  loss_ce = ce(outputs_x[idx_chosen], pseudo_label_l[idx_chosen]).mean()
  loss_ce_ph = ce(outputs_x_ph[idx_chosen], pseudo_label_l[idx_chosen]).mean()
  loss_net1 = loss_ce + w * (loss_cr + mixed["mix"] + mixed["fmix"])
  ptx = debias_px_unrel ** (1 / T)
  ptx = ptx / ptx.sum(axis=1, keepdims=True)
  targets_urel = ptx
  loss_unrel_ph = (
    ce(outputs_x_unrel_ph[idx_unchosen], targets_urel[idx_unchosen]).mean()
    + w * ce(outputs_x2_unrel_ph[idx_unchosen], targets_urel[idx_unchosen]).mean()
  )
  loss_net1_ph = beta * loss_unrel_ph + loss_ce_ph + w * (loss_cr_ph + mixed["mix_ph"] + mixed["fmix_ph"])
  return loss_net1 + loss_net1_ph, loss_net1, loss_net1_ph


# ------------------------------------------------------------------------------------------------------------
# Inputs.


def random_prior(rng, c):
  return rng.dirichlet(np.full(c, 2.0)) * 0.9 + 0.1 / c  # positive, away from 0


def confident_probs(rng, b, c, confident_rows, cls=None):
  """float32 [b, c] softmaxes; `confident_rows` get a max probability above 0.99 (distinct per row), the others far
  below. `cls`: the class of each confident row (else random)."""
  logits = rng.normal(0.0, 1.0, (b, c))
  cls = rng.integers(0, c, b) if cls is None else cls
  boost = np.where(confident_rows, np.log(c) + 6.5 + rng.uniform(0.0, 3.0, b), 0.0)
  logits[np.arange(b), cls] += boost
  return np_softmax(logits).astype(np.float32)


SIZES = [(8, 3), (64, 10), (257, 100)]

# The comparisons call the blocks jitted (as promix_train does): one compilation per shape instead of one per
# operation keeps the file fast. test_blocks_under_jit_give_the_same_values checks eager against jitted.
J = types.SimpleNamespace(
  updated_prior=jax.jit(promix.updated_prior),
  matched_high_confidence=jax.jit(promix.matched_high_confidence),
  pseudo_labels=jax.jit(promix.pseudo_labels),
  subset_mean=jax.jit(promix.subset_mean, static_argnames="axis_name"),
  class_small_loss_selection=jax.jit(promix.class_small_loss_selection, static_argnames="num_classes"),
  label_guessing=jax.jit(promix.label_guessing, static_argnames="threshold"),  # tau traced; the cap's table static
  network_loss=jax.jit(promix.network_loss, static_argnames="axis_name"),
)

# ------------------------------------------------------------------------------------------------------------
# Debiasing, sharpening, cross entropies.


def elementwise_blocks_eager(z, prior, probs, labels, t, T):
  """The five per-row blocks; jitted below as one program (one compilation per shape and dtype)."""
  return {
    "debias_output": promix.debias_output(z, prior, t),
    "debias_pl": promix.debias_pl(z, prior, t),
    "sharpen": promix.sharpen(probs, T),
    "soft_cross_entropy": promix.soft_cross_entropy(z, probs),
    "hard_cross_entropy": promix.hard_cross_entropy(z, labels),
  }


elementwise_blocks = jax.jit(elementwise_blocks_eager)


def np_elementwise_blocks(z, prior, probs, labels, t, T):
  return {
    "debias_output": np_debias_output(z, prior, t),
    "debias_pl": np_debias_pl(z, prior, t),
    "sharpen": np_sharpen(probs, T),
    "soft_cross_entropy": np_ce_soft_label(z, probs),
    "hard_cross_entropy": np_ce_soft_label(z, np.eye(z.shape[1])[labels]),  # CE_Soft_Label on one-hot targets
  }


@pytest.mark.parametrize("b,c", SIZES)
def test_debias_sharpen_and_cross_entropies_match_the_original(b, c):
  rng = np.random.default_rng(b * 1000 + c)
  z = rng.normal(0.0, 3.0, (b, c))
  prior = random_prior(rng, c)
  probs = rng.dirichlet(np.ones(c), b)
  labels = rng.integers(0, c, b)
  for t, T in ((0.0, 0.5), (0.5, 1.0), (0.8, 0.5), (0.8, 2.0)):
    expected = np_elementwise_blocks(z, prior, probs, labels, t, T)
    with jax.enable_x64(True):
      got = elementwise_blocks(jnp.asarray(z), jnp.asarray(prior), jnp.asarray(probs), jnp.asarray(labels), t, T)
      for key in expected:
        assert got[key].dtype == jnp.float64, key
        np.testing.assert_allclose(got[key], expected[key], rtol=1e-12, atol=1e-13, err_msg=key)
    # float32, as the original computes
    f32 = lambda a: a.astype(np.float32)
    got = elementwise_blocks(f32(z), f32(prior), f32(probs), labels, t, T)
    for key in expected:
      assert got[key].dtype == jnp.float32, key
      np.testing.assert_allclose(got[key], expected[key], rtol=1e-4, atol=2e-6, err_msg=key)


# ------------------------------------------------------------------------------------------------------------
# Priors.


@pytest.mark.parametrize("b,c", SIZES)
@pytest.mark.parametrize("momentum", [0.9999, 0.5])
def test_updated_prior_matches_bias_update_over_the_masked_rows(b, c, momentum):
  rng = np.random.default_rng(7 + b + c)
  prior = random_prior(rng, c)
  probs = rng.dirichlet(np.ones(c), b)
  mask = rng.random(b) < 0.4
  mask[0] = True
  with jax.enable_x64(True):
    got = J.updated_prior(jnp.asarray(prior), jnp.asarray(probs), jnp.asarray(mask), momentum)
    np.testing.assert_allclose(got, np_bias_update(probs[mask], prior, momentum), rtol=1e-13, atol=1e-16)
    # every row
    got = J.updated_prior(jnp.asarray(prior), jnp.asarray(probs), np.ones(b, bool), momentum)
    np.testing.assert_allclose(got, np_bias_update(probs, prior, momentum), rtol=1e-13, atol=1e-16)
  got32 = J.updated_prior(prior.astype(np.float32), probs.astype(np.float32), mask, momentum)
  assert got32.dtype == jnp.float32
  np.testing.assert_allclose(got32, np_bias_update(probs[mask], prior, momentum), rtol=1e-6)


def test_updated_prior_keeps_the_prior_on_an_empty_mask_where_the_original_is_nan():
  rng = np.random.default_rng(3)
  prior = random_prior(rng, 10).astype(np.float32)
  probs = rng.dirichlet(np.ones(10), 64).astype(np.float32)
  empty = np.zeros(64, bool)
  got = J.updated_prior(prior, probs, empty, 0.9999)
  np.testing.assert_array_equal(got, prior)  # module docstring, difference (1)
  with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
    original = np_bias_update(probs[empty], prior, 0.9999)  # mean over no rows
  assert np.all(np.isnan(original))


def test_initial_priors_are_uniform():
  priors = promix.initial_priors(7)
  for key in ("reliable", "unreliable"):
    np.testing.assert_allclose(priors[key], np.full(7, 1 / 7, np.float32))


# ------------------------------------------------------------------------------------------------------------
# MHCS, pseudo-labels.


@pytest.mark.parametrize("b,c", SIZES)
def test_matched_high_confidence_matches_the_original(b, c):
  rng = np.random.default_rng(11 * b + c)
  labels = rng.integers(0, c, b)
  confident = rng.random(b) < 0.5
  # the confident rows are confident in their given label for half of them, in a random class for the rest
  cls = np.where(rng.random(b) < 0.5, labels, rng.integers(0, c, b))
  px = confident_probs(rng, b, c, confident, cls)
  labels_x = np.eye(c, dtype=np.float32)[labels]
  for tau in (0.99, 0.95, 0.5):
    expected = (labels_x * px).sum(axis=1) > tau
    got = J.matched_high_confidence(px, labels, tau)
    np.testing.assert_array_equal(got, expected)
  assert 0 < expected.sum() < b or b == 8


@pytest.mark.parametrize("b,c", SIZES)
def test_pseudo_labels_are_the_argmax_of_the_originals_mixture(b, c):
  rng = np.random.default_rng(5 * b + c)
  labels = rng.integers(0, c, b)
  prior = random_prior(rng, c)
  z = rng.normal(0.0, 2.0, (b, c)).astype(np.float32)
  debias_px = np_debias_pl(z.astype(np.float64), prior, 0.8)
  pred = np.argmax(debias_px, axis=1)
  w_x = (rng.random(b) < 0.5).astype(np.float32)
  labels_x = np.eye(c)[labels]
  pred_net = np.eye(c)[pred]
  pseudo_label_l = labels_x * w_x[:, None] + pred_net * (1 - w_x[:, None])
  assert np.all(pseudo_label_l.sum(1) == 1) and np.all(pseudo_label_l.max(1) == 1)  # one-hot
  guessed = jnp.argmax(elementwise_blocks(z, prior.astype(np.float32), z, labels, 0.8, 0.5)["debias_pl"], axis=1)
  np.testing.assert_array_equal(guessed, pred)
  got = J.pseudo_labels(labels, guessed, w_x == 1)
  np.testing.assert_array_equal(got, np.argmax(pseudo_label_l, axis=1))


# ------------------------------------------------------------------------------------------------------------
# CSS.


def distinct_losses(rng, n):
  """Losses that stay distinct after the original's float32 min-max normalisation."""
  raw = rng.permutation(n).astype(np.float64) + rng.uniform(0.1, 0.4, n)
  raw = (raw * 0.01).astype(np.float32)
  norm = (raw - raw.min()) / (raw.max() - raw.min())
  assert np.unique(norm).size == n
  return raw


CSS_CASES = [
  # (n, C, rho, class probabilities or None for uniform)
  (200, 10, 0.2, None),
  (200, 10, 0.6, None),
  (1000, 7, 0.37, None),
  (300, 6, 0.3, [0.5, 0.3, 0.15, 0.04, 0.01, 0.0]),  # classes 3, 4 under the budget of 15; class 5 empty
  (120, 4, 0.0, [0.6, 0.3, 0.1, 0.0]),  # budget 0 -> 1 per class
  (50, 5, 1.0, None),  # everything
]


@pytest.mark.parametrize("n,c,rho,class_p", CSS_CASES)
def test_class_small_loss_selection_matches_eval_train(n, c, rho, class_p):
  rng = np.random.default_rng(n + c)
  labels = rng.choice(c, n, p=class_p) if class_p is not None else rng.integers(0, c, n)
  raw = distinct_losses(rng, n)
  prob, norm = np_eval_train_selection(raw, labels, rho, c)
  budget = promix.css_budget(n, c, rho)
  assert budget == int(math.ceil(n * (1.0 / c) * rho))
  counts = np.bincount(labels, minlength=c)
  if class_p is not None:
    assert counts[-1] == 0 and (np.any((counts > 0) & (counts < budget)) or budget == 0)
  for losses in (raw, norm):  # the normalisation is monotone: the same rows
    got = J.class_small_loss_selection(losses, labels, budget, num_classes=c, valid=np.ones(n, bool))
    np.testing.assert_array_equal(np.asarray(got), prob == 1)
  expected_sizes = [max(min(budget, k), 1) if k else 0 for k in counts]
  np.testing.assert_array_equal(np.bincount(labels[np.asarray(got)], minlength=c), expected_sizes)


@pytest.mark.parametrize("n,c,rho,class_p", CSS_CASES[:4])
def test_class_small_loss_selection_excludes_invalid_rows(n, c, rho, class_p):
  rng = np.random.default_rng(100 + n + c)
  labels = rng.choice(c, n, p=class_p) if class_p is not None else rng.integers(0, c, n)
  raw = distinct_losses(rng, n)
  valid = rng.random(n) < 0.8
  # invalid rows with the smallest losses and arbitrary labels: they must neither be selected nor use up budget
  raw = np.where(valid, raw, -1.0 - rng.random(n)).astype(np.float32)
  padded_labels = np.where(valid, labels, rng.integers(0, c, n))
  n_valid = int(valid.sum())
  budget = promix.css_budget(n_valid, c, rho)
  prob, _ = np_eval_train_selection(raw[valid], labels[valid], rho, c)  # the original on the valid rows only
  expected = np.zeros(n, bool)
  expected[np.where(valid)[0]] = prob == 1
  got = J.class_small_loss_selection(raw, padded_labels, budget, num_classes=c, valid=valid)
  np.testing.assert_array_equal(np.asarray(got), expected)


@pytest.mark.parametrize("n,c", [(50000, 10), (50000, 100), (5000, 10)])
def test_css_budget_and_selection_ratio_follow_the_originals_arithmetic(n, c):
  for epoch in (0, 10, 25, 50, 100):
    rho = np_rho(epoch, "0.2,0.6", 50)
    assert promix.selection_ratio(epoch, rho_start=0.2, rho_end=0.6, warmup_ep=50) == rho
    bs_j = n * (1.0 / c)
    assert promix.css_budget(n, c, rho) == int(math.ceil(bs_j * rho))
  # the table, as the original's double arithmetic gives it (epoch 10: rho = 0.28, 5000 * 0.28 = 1400.0000000000002)
  table = {(50000, 10): [1000, 1401, 2000, 3000, 3000], (50000, 100): [100, 140, 200, 300, 300]}
  table[(5000, 10)] = table[(50000, 100)]
  got = [
    promix.css_budget(n, c, promix.selection_ratio(e, rho_start=0.2, rho_end=0.6, warmup_ep=50))
    for e in (0, 10, 25, 50, 100)
  ]
  assert got == table[(n, c)]
  # every epoch of the ramp, where the double rounding often moves the exact ceil(rho N / C) by one
  for epoch in range(0, 60):
    rho = np_rho(epoch, "0.2,0.6", 50)
    assert promix.css_budget(n, c, promix.selection_ratio(epoch, rho_start=0.2, rho_end=0.6, warmup_ep=50)) == int(
      math.ceil(n * (1.0 / c) * rho)
    )


# ------------------------------------------------------------------------------------------------------------
# LGA.


def lga_batch(seed, b, c, n_selected, n_confident, agree=0.8):
  """selected rows (w_x == 1), probs of both networks: `n_confident` rows confident in both, in the same class for
  a fraction `agree` of them."""
  rng = np.random.default_rng(seed)
  w_x = np.zeros(b, np.float32)
  w_x[rng.choice(b, n_selected, replace=False)] = 1
  confident = np.zeros(b, bool)
  confident[rng.choice(b, n_confident, replace=False)] = True
  cls1 = rng.integers(0, c, b)
  cls2 = np.where(rng.random(b) < agree, cls1, (cls1 + 1) % c)
  px = confident_probs(rng, b, c, confident, cls1)
  px2 = confident_probs(rng, b, c, confident | (rng.random(b) < 0.3), cls2)
  return w_x, px, px2


def np_lga_inputs(px, px2):
  score1, score2 = px.max(axis=1), px2.max(axis=1)
  match = px.argmax(axis=1) == px2.argmax(axis=1)
  return score1, score2, match


LGA_CASES = [
  # (seed, B, C, |selected|, confident rows, agreeing fraction, threshold, expected branch)
  (0, 64, 10, 10, 64, 1.0, 0.9, "capped"),
  (1, 64, 10, 40, 64, 0.9, 0.9, "capped"),
  (2, 256, 100, 60, 256, 1.0, 0.9, "capped"),
  (3, 64, 10, 10, 40, 0.8, 0.5, "capped"),
  (4, 64, 10, 20, 10, 0.8, 0.9, "uncapped"),
  (5, 256, 10, 100, 60, 0.8, 0.9, "uncapped"),
  (6, 64, 10, 58, 60, 0.8, 0.9, "full"),  # 58 / 64 >= 0.9: nothing added
  (7, 10, 3, 9, 10, 0.8, 0.9, "full"),  # 9 / 10 == 0.9 exactly: nothing added
  (8, 100, 10, 28, 90, 0.8, 0.3, "capped"),  # room 30 - 28 = 2
  (9, 100, 10, 29, 90, 0.8, 0.3, "capped"),  # room 1
]


@pytest.mark.parametrize("seed,b,c,n_sel,n_conf,agree,threshold,branch", LGA_CASES)
def test_label_guessing_matches_the_original(seed, b, c, n_sel, n_conf, agree, threshold, branch):
  tau = 0.99
  w_x, px, px2 = lga_batch(seed, b, c, n_sel, n_conf, agree)
  score1, score2, match = np_lga_inputs(px, px2)
  expected, info = np_label_guessing(w_x, score1, score2, match, tau, threshold)
  if branch == "full":
    assert not info["applies"]
  else:
    assert info["applies"] and info["candidates"] > 0
    assert info["capped"] == (branch == "capped"), info
    if info["capped"]:  # the ranking decides: no tie at the cut, so torch's unstable sort cannot matter
      cand = ((score1 > tau) & (score2 > tau) & match) & (w_x == 0)
      ranked = np.sort(((score1 + score2) / 2)[cand])[::-1]
      room = info["max_to_sel_num"]
      assert room == 0 or ranked[room - 1] > ranked[room]
  got = J.label_guessing(w_x == 1, px, px2, np.ones(b, bool), tau=tau, threshold=threshold)
  np.testing.assert_array_equal(np.asarray(got), expected == 1)


@pytest.mark.parametrize("seed,b,c,n_sel,n_conf,agree,threshold,branch", [LGA_CASES[i] for i in (0, 1, 3, 4)])
def test_label_guessing_with_padding_is_the_original_on_the_valid_rows(
  seed, b, c, n_sel, n_conf, agree, threshold, branch
):
  tau = 0.99
  w_x, px, px2 = lga_batch(seed, b, c, n_sel, n_conf, agree)
  rng = np.random.default_rng(seed + 50)
  n_pad = 36  # 100 rows in all, as cases 8 and 9 (one compilation)
  # padding rows: selected and confident, agreeing, with the highest scores: any leak would show
  pad_p = np.zeros((n_pad, c), np.float32)
  pad_p[:, 0] = 1.0
  pad_w = (rng.random(n_pad) < 0.5).astype(np.float32)
  order = rng.permutation(b + n_pad)
  all_w = np.concatenate([w_x, pad_w])[order]
  all_px, all_px2 = np.concatenate([px, pad_p])[order], np.concatenate([px2, pad_p])[order]
  valid = np.concatenate([np.ones(b, bool), np.zeros(n_pad, bool)])[order]
  score1, score2, match = np_lga_inputs(px, px2)
  expected_valid, info = np_label_guessing(w_x, score1, score2, match, tau, threshold)
  assert info["applies"] and info["capped"] == (branch == "capped")
  expected = np.zeros(b + n_pad, bool)
  expected[valid] = (expected_valid == 1)[order[valid]]  # position k holds row order[k]
  got = J.label_guessing(all_w == 1, all_px, all_px2, valid, tau=tau, threshold=threshold)
  np.testing.assert_array_equal(np.asarray(got), expected)
  assert not np.any(np.asarray(got)[~valid])


def test_label_guessing_cap_rounds_as_the_originals_double_product():
  b, c, tau, threshold = 90, 3, 0.5, 0.7
  assert int(b * threshold) == 62
  px = np.zeros((b, c), np.float32)
  px[:, 0] = 1.0
  px[:, 0] -= np.linspace(0.0, 0.1, b, dtype=np.float32)  # distinct scores, all above tau
  px[:, 1] = 1.0 - px[:, 0]
  w_x = np.zeros(b, np.float32)
  score1, score2, match = np_lga_inputs(px, px)
  expected, _ = np_label_guessing(w_x, score1, score2, match, tau, threshold)
  assert expected.sum() == 62
  got = J.label_guessing(w_x == 1, px, px, np.ones(b, bool), tau=tau, threshold=threshold)
  np.testing.assert_array_equal(np.asarray(got), expected == 1)  # 62 rows: float32 would make 90 x 0.7 = 63


# ------------------------------------------------------------------------------------------------------------
# Weights.


@pytest.mark.parametrize("debias_beta_pl", [0.8, 0.0])
def test_consistency_and_unreliable_weights_match_train(debias_beta_pl):
  warmup_ep = 50
  for epoch in range(151):
    w, beta = np_weights(epoch, warmup_ep, debias_beta_pl)
    assert promix.consistency_weight(epoch, warmup_ep) == w
    assert promix.unreliable_weight(epoch, warmup_ep, debias_beta_pl) == beta
  assert promix.linear_rampup(3, 0) == np_linear_rampup2(3, 0) == 1.0
  assert promix.linear_rampup(0, 0) == np_linear_rampup2(0, 0) == 1.0


# ------------------------------------------------------------------------------------------------------------
# Losses.


def loss_inputs(seed, b, c, n_pad=0):
  rng = np.random.default_rng(seed)
  heads = {k: rng.normal(0.0, 2.0, (b, c)) for k in ("z_w", "z_s", "h_w", "h_s")}
  mixed = {k: float(v) for k, v in zip(("mix", "fmix", "mix_ph", "fmix_ph"), rng.uniform(0.2, 3.0, 4))}
  labels = rng.integers(0, c, b)
  w_x = (rng.random(b) < 0.5).astype(np.float64)
  w_x[:2] = [1, 0]  # both sets non-empty
  pi, pi_u = random_prior(rng, c), random_prior(rng, c)
  # pseudo-labels as the original builds them: labels_x * w_x + pred_net * (1 - w_x)
  pred_net = np.eye(c)[np_debias_pl(heads["z_w"], pi, 0.8).argmax(1)]
  pseudo_label_l = np.eye(c)[labels] * w_x[:, None] + pred_net * (1 - w_x[:, None])
  selected = w_x == 1
  if n_pad:  # LGA-style extra selected rows do not matter here; padding: rows in neither set, wild logits
    pad_heads = {k: rng.normal(0.0, 50.0, (n_pad, c)) for k in heads}
    heads = {k: np.concatenate([heads[k], pad_heads[k]]) for k in heads}
    pseudo_label_l = np.concatenate([pseudo_label_l, np.eye(c)[rng.integers(0, c, n_pad)]])
  return heads, mixed, pseudo_label_l, selected, pi, pi_u


@pytest.mark.parametrize("b,c", SIZES)
@pytest.mark.parametrize("epoch,debias_beta_pl,t", [(30, 0.8, 0.8), (120, 0.8, 0.5), (75, 0.0, 0.8), (0, 0.8, 0.8)])
def test_network_loss_matches_the_originals_net1_loss(b, c, epoch, debias_beta_pl, t):
  heads, mixed, pseudo_label_l, selected, pi, pi_u = loss_inputs(b + c + epoch, b, c)
  T = 0.5
  w, beta = np_weights(epoch, 50, debias_beta_pl)
  assert (w, beta) == (promix.consistency_weight(epoch, 50), promix.unreliable_weight(epoch, 50, debias_beta_pl))
  idx_chosen, idx_unchosen = np.where(selected)[0], np.where(~selected)[0]
  total, net1, net1_ph = np_network_loss(
    heads["z_w"],
    heads["z_s"],
    heads["h_w"],
    heads["h_s"],
    mixed,
    pseudo_label_l,
    idx_chosen,
    idx_unchosen,
    pi,
    pi_u,
    (t, debias_beta_pl, T, w, beta),
  )
  kwargs = dict(strength=t, strength_pl=debias_beta_pl, temperature=T, weight=float(w), beta=float(beta))
  labels = pseudo_label_l.argmax(1)
  with jax.enable_x64(True):
    jheads = {k: jnp.asarray(v) for k, v in heads.items()}
    priors = {"reliable": jnp.asarray(pi), "unreliable": jnp.asarray(pi_u)}
    loss, parts = J.network_loss(jheads, mixed, labels, selected, ~selected, priors, **kwargs)
    assert loss.dtype == jnp.float64
    np.testing.assert_allclose(loss, total, rtol=1e-12)
    np.testing.assert_allclose(parts["primary"], net1, rtol=1e-12)
    np.testing.assert_allclose(parts["pseudo"], net1_ph, rtol=1e-12)
  if (b, c) != (64, 10):  # float32 at one size (compilations are the file's time)
    return
  f32 = lambda a: np.asarray(a, np.float32)
  loss32, _ = J.network_loss(
    {k: f32(v) for k, v in heads.items()},
    mixed,
    labels,
    selected,
    ~selected,
    {"reliable": f32(pi), "unreliable": f32(pi_u)},
    **kwargs,
  )
  np.testing.assert_allclose(loss32, total, rtol=2e-5)


@pytest.mark.parametrize("b,c", SIZES[1:])
def test_network_loss_counts_only_the_valid_rows(b, c):
  """Padding rows (in neither set, wild logits) leave the value the original's on the valid rows."""
  n_pad = 5
  b -= n_pad  # the padded batch has a shape of the test above (one compilation)
  heads, mixed, pseudo_label_l, selected, pi, pi_u = loss_inputs(b * c, b, c, n_pad=n_pad)
  kwargs = dict(strength=0.8, strength_pl=0.8, temperature=0.5, weight=0.6, beta=0.03)
  idx_chosen, idx_unchosen = np.where(selected)[0], np.where(~selected)[0]
  total, _, _ = np_network_loss(
    heads["z_w"][:b],
    heads["z_s"][:b],
    heads["h_w"][:b],
    heads["h_s"][:b],
    mixed,
    pseudo_label_l[:b],
    idx_chosen,
    idx_unchosen,
    pi,
    pi_u,
    (0.8, 0.8, 0.5, 0.6, 0.03),
  )
  labels = pseudo_label_l.argmax(1)
  sel = np.concatenate([selected, np.zeros(n_pad, bool)])
  uns = np.concatenate([~selected, np.zeros(n_pad, bool)])
  with jax.enable_x64(True):
    priors = {"reliable": jnp.asarray(pi), "unreliable": jnp.asarray(pi_u)}
    padded, _ = J.network_loss({k: jnp.asarray(v) for k, v in heads.items()}, mixed, labels, sel, uns, priors, **kwargs)
    np.testing.assert_allclose(padded, total, rtol=1e-12)
    # the padding's pseudo-labels and logits do not matter either
    heads = {k: np.concatenate([v[:b], -v[b:]]) for k, v in heads.items()}
    labels = np.concatenate([labels[:b], (labels[b:] + 1) % c])
    moved, _ = J.network_loss({k: jnp.asarray(v) for k, v in heads.items()}, mixed, labels, sel, uns, priors, **kwargs)
    np.testing.assert_allclose(moved, padded, rtol=1e-14)


def test_subset_mean_of_no_rows_is_zero():
  x = np.asarray([1.0, 2.0, 3.0], np.float32)
  assert float(J.subset_mean(x, np.zeros(3, bool))) == 0.0
  np.testing.assert_allclose(J.subset_mean(x, np.asarray([True, False, True])), 2.0)
  assert float(J.subset_mean(np.zeros((0,), np.float32), np.zeros((0,), bool))) == 0.0


# ------------------------------------------------------------------------------------------------------------
# Settings.


@pytest.mark.parametrize(
  "field,value",
  [
    ("tau", 1.5),
    ("tau", -0.1),
    ("threshold", 1.2),
    ("bias_m", -0.5),
    ("rho_start", 2.0),
    ("rho_end", float("nan")),
    ("debias_output", -0.8),
    ("debias_pl", -1.0),
    ("mixup_alpha", -4.0),
    ("temperature", 0.0),
    ("pretrain_ep", -1),
    ("warmup_ep", 2.5),
    ("start_expand", True),
  ],
)
def test_check_settings_names_the_bad_value(field, value):
  with pytest.raises(ValueError, match=field):
    promix.check_settings(**{field: value})


def test_check_settings_accepts_the_papers_values():
  promix.check_settings(
    tau=0.99,
    threshold=0.9,
    bias_m=0.9999,
    rho_start=0.2,
    rho_end=0.6,
    debias_output=0.8,
    debias_pl=0.8,
    mixup_alpha=4.0,
    temperature=0.5,
    pretrain_ep=10,
    warmup_ep=50,
    start_expand=250,
  )
  promix.check_settings(tau=0.95, debias_pl=0.0, debias_output=0.5, pretrain_ep=0, warmup_ep=0)


# ------------------------------------------------------------------------------------------------------------
# jit.


def test_blocks_under_jit_give_the_same_values():
  """Eager against jitted (the other tests call the blocks jitted; the shapes here are theirs, so the jitted programs
  are compiled once)."""
  b, c = 64, 10
  rng = np.random.default_rng(99)
  z = rng.normal(0.0, 2.0, (b, c)).astype(np.float32)
  prior = random_prior(rng, c).astype(np.float32)
  probs = rng.dirichlet(np.ones(c), b).astype(np.float32)
  labels = rng.integers(0, c, b)
  mask = rng.random(b) < 0.5

  def same(eager, jitted, rtol=1e-6):
    jax.tree.map(lambda e, j: np.testing.assert_allclose(j, e, rtol=rtol, atol=1e-7), eager, jitted)

  same(
    elementwise_blocks_eager(z, prior, probs, labels, 0.8, 0.5), elementwise_blocks(z, prior, probs, labels, 0.8, 0.5)
  )
  same(promix.updated_prior(prior, probs, mask, 0.9999), J.updated_prior(prior, probs, mask, 0.9999))
  same(promix.subset_mean(probs[:, 0], mask), J.subset_mean(probs[:, 0], mask))
  same(promix.matched_high_confidence(probs, labels, 0.5), J.matched_high_confidence(probs, labels, 0.5))
  guessed = np.argmax(z, 1)
  same(promix.pseudo_labels(labels, guessed, mask), J.pseudo_labels(labels, guessed, mask))

  # CSS (a traced budget; valid=None, which the other tests do not use), LGA and the loss (weight and beta traced):
  # jitted against the original (promix_train calls them inside its jitted programs; eagerly, op by op, each of their
  # operations would be one more compilation)
  n = 200
  raw = distinct_losses(rng, n)
  css_labels = rng.integers(0, 10, n)
  for rho in (0.0, 0.3):
    prob, _ = np_eval_train_selection(raw, css_labels, rho, 10)
    got = J.class_small_loss_selection(raw, css_labels, jnp.asarray(promix.css_budget(n, 10, rho)), num_classes=10)
    np.testing.assert_array_equal(np.asarray(got), prob == 1)

  w_x, px, px2 = lga_batch(0, 64, 10, 10, 64, 1.0)
  expected, info = np_label_guessing(w_x, *np_lga_inputs(px, px2), 0.99, 0.9)
  assert info["capped"]
  got = J.label_guessing(w_x == 1, px, px2, np.ones(64, bool), tau=jnp.float32(0.99), threshold=0.9)
  np.testing.assert_array_equal(np.asarray(got), expected == 1)

  heads, mixed, pseudo_label_l, selected, pi, pi_u = loss_inputs(1, b, c)
  heads32 = {k: v.astype(np.float32) for k, v in heads.items()}
  priors = {"reliable": pi.astype(np.float32), "unreliable": pi_u.astype(np.float32)}
  labels = pseudo_label_l.argmax(1)
  kwargs = dict(strength=0.8, strength_pl=0.8, temperature=0.5, weight=0.6, beta=0.03)
  jitted, _ = J.network_loss(heads32, mixed, labels, selected, ~selected, priors, **kwargs)
  total, _, _ = np_network_loss(
    *(heads32[k].astype(np.float64) for k in ("z_w", "z_s", "h_w", "h_s")),
    mixed,
    pseudo_label_l,
    np.where(selected)[0],
    np.where(~selected)[0],
    priors["reliable"].astype(np.float64),
    priors["unreliable"].astype(np.float64),
    (0.8, 0.8, 0.5, 0.6, 0.03),
  )
  np.testing.assert_allclose(jitted, total, rtol=2e-5)
