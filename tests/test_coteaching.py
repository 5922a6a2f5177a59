"""Tests for noisy_jax.methods.coteaching (Co-teaching / Co-teaching+ building blocks) and the coteaching_cnn model.

Every function is checked against a NumPy re-computation of the original code's formulas, written here as the
original computes them (bhanML/Co-teaching@7c7fbe2 main.py / loss.py; xingruiyu/coteaching_plus@a68ed61 loss.py):
argsort of the losses, the first int((1 - R) B) indices, the exchange; the schedules as main.py's lists. The Adam
schedule is checked step by step against torch.optim.Adam with main.py's per-epoch `adjust_learning_rate`, and the
9-layer CNN against an independent PyTorch definition of model.py's `CNN` with the same weights.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import torch

from noisy_jax import models
from noisy_jax.methods import coteaching
from noisy_jax.models.coteaching_cnn import CoteachingCNN
from noisy_jax.train import coteaching_adam
import test_paper_models

# ---------------------------------------------------------------------------------------------------------------
# NumPy references, as the original code computes.


def original_rate_schedule(n_epoch, forget_rate, num_gradual=10, exponent=1.0):
  """main.py: rate_schedule = ones * tau; rate_schedule[:num_gradual] = linspace(0, tau ** c, num_gradual)."""
  rate_schedule = np.ones(n_epoch) * forget_rate
  rate_schedule[:num_gradual] = np.linspace(0, forget_rate**exponent, num_gradual)
  return rate_schedule


def original_adam_plan(learning_rate, n_epoch, epoch_decay_start):
  """main.py: alpha_plan and beta1_plan."""
  mom1, mom2 = 0.9, 0.1
  alpha_plan = [learning_rate] * n_epoch
  beta1_plan = [mom1] * n_epoch
  for i in range(epoch_decay_start, n_epoch):
    alpha_plan[i] = float(n_epoch - i) / (n_epoch - epoch_decay_start) * learning_rate
    beta1_plan[i] = mom2
  return alpha_plan, beta1_plan


def original_loss_coteaching(loss_1, loss_2, forget_rate, *, plus_repo=False):
  """loss.py `loss_coteaching` on one batch: returns (ind_1_update, ind_2_update, num_remember) in batch positions.

  Network 1 trains on ind_2_update (its peer's small-loss set), network 2 on ind_1_update. np.argsort is made
  stable (the original's is not) to pin down ties. plus_repo: Co-teaching+'s copy, which falls back to the whole
  set when num_remember is 0."""
  ind_1_sorted = np.argsort(loss_1, kind="stable")
  ind_2_sorted = np.argsort(loss_2, kind="stable")
  remember_rate = 1 - forget_rate
  num_remember = int(remember_rate * len(ind_1_sorted))
  ind_1_update = ind_1_sorted[:num_remember]
  ind_2_update = ind_2_sorted[:num_remember]
  if plus_repo and len(ind_1_update) == 0:
    ind_1_update, ind_2_update = ind_1_sorted, ind_2_sorted
    num_remember = ind_1_update.shape[0]
  return ind_1_update, ind_2_update, num_remember


def original_loss_coteaching_plus(logits, logits2, loss_1, loss_2, forget_rate, ind, step):
  """loss.py `loss_coteaching_plus`'s selection: (positions network 1 trains on, positions network 2 trains on).

  loss_1 / loss_2 are the per-example losses it ranks (the original's are CE of softmax outputs; any array here).
  `ind` are dataset indices: the index-0 filter is reproduced, so callers pick indices >= 1 unless testing it."""
  pred1, pred2 = np.argmax(logits, 1), np.argmax(logits2, 1)
  logical_disagree_id = np.zeros(len(pred1), dtype=bool)
  disagree_id = []
  for idx, p1 in enumerate(pred1):
    if p1 != pred2[idx]:
      disagree_id.append(idx)
      logical_disagree_id[idx] = True
  temp_disagree = ind * logical_disagree_id.astype(np.int64)
  ind_disagree = np.asarray([i for i in temp_disagree if i != 0]).transpose()
  if ind_disagree.shape[0] != len(disagree_id):
    disagree_id = disagree_id[: ind_disagree.shape[0]]
  if len(disagree_id) > 0:
    disagree_id = np.asarray(disagree_id)
    u1, u2, _ = original_loss_coteaching(loss_1[disagree_id], loss_2[disagree_id], forget_rate, plus_repo=True)
    return disagree_id[u2], disagree_id[u1]
  everything = np.arange(len(pred1)) if step < 5000 else np.arange(0)
  return everything, everything


def mask(positions, size):
  out = np.zeros(size, bool)
  out[np.asarray(positions, np.int64)] = True
  return out


def on_valid_rows(valid, fn, *arrays):
  """Runs the original on the valid rows only (it never sees padding); maps the positions back."""
  rows = np.flatnonzero(valid)
  return [rows[np.asarray(p, np.int64)] for p in fn(*(a[rows] for a in arrays))]


def ce_numpy(logits, labels):
  z = logits - logits.max(-1, keepdims=True)
  log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
  return -log_p[np.arange(len(labels)), labels]


def softmax_numpy(logits):
  z = np.exp(logits - logits.max(-1, keepdims=True))
  return z / z.sum(-1, keepdims=True)


# ---------------------------------------------------------------------------------------------------------------
# Forget-rate schedule.


@pytest.mark.parametrize("tau", [0.2, 0.45, 0.5])
@pytest.mark.parametrize("num_gradual,exponent", [(10, 1.0), (5, 2.0), (15, 0.5)])
def test_original_ramp_is_main_py_bit_for_bit(tau, num_gradual, exponent):
  got = coteaching.forget_rate_schedule(200, tau, num_gradual=num_gradual, exponent=exponent, ramp="original")
  want = original_rate_schedule(200, tau, num_gradual, exponent)
  assert got.shape == (200,) and got.dtype == np.float64
  np.testing.assert_array_equal(got, want)


def test_schedule_values_at_chosen_epochs():
  """The off-by-one: main.py's ramp reaches tau at epoch index 9; the paper's (Algorithm 1, updated after each
  epoch) at index 10, starting from 0 at index 0."""
  tau = 0.45
  original = coteaching.forget_rate_schedule(200, tau, ramp="original")
  paper = coteaching.forget_rate_schedule(200, tau)  # the default
  np.testing.assert_allclose(original[[0, 1, 5, 9, 10, 199]], [0, tau / 9, 5 * tau / 9, tau, tau, tau], rtol=1e-15)
  np.testing.assert_allclose(paper[[0, 1, 5, 9, 10, 199]], [0, tau / 10, tau / 2, 0.9 * tau, tau, tau], rtol=1e-15)
  assert original[8] < tau == original[9] and paper[9] < tau == paper[10]
  # main.py trains epochs 1..199: its first trained epoch already forgets tau / 9.
  assert original[1] == pytest.approx(0.05)
  # The exponent: the paper's tau min(e^c / T_k, 1); the original ramps to tau^c then jumps to tau.
  np.testing.assert_allclose(
    coteaching.forget_rate_schedule(12, 0.5, exponent=2.0)[[0, 1, 2, 3, 4]], [0, 0.05, 0.2, 0.45, 0.5]
  )
  orig2 = coteaching.forget_rate_schedule(12, 0.5, exponent=2.0, ramp="original")
  assert orig2[9] == pytest.approx(0.25) and orig2[10] == 0.5


def test_schedule_edge_cases_and_errors():
  np.testing.assert_array_equal(coteaching.forget_rate_schedule(4, 0.3, num_gradual=0), [0.3] * 4)
  np.testing.assert_array_equal(coteaching.forget_rate_schedule(4, 0.3, num_gradual=0, ramp="original"), [0.3] * 4)
  np.testing.assert_allclose(coteaching.forget_rate_schedule(3, 0.9, ramp="original"), [0, 0.1, 0.2])  # truncated
  np.testing.assert_allclose(coteaching.forget_rate_schedule(3, 0.9), [0, 0.09, 0.18])
  with pytest.raises(ValueError, match="forget_rate=1.5"):
    coteaching.forget_rate_schedule(10, 1.5)
  with pytest.raises(ValueError, match="ramp 'linear'"):
    coteaching.forget_rate_schedule(10, 0.2, ramp="linear")
  with pytest.raises(ValueError, match="num_epochs=0"):
    coteaching.forget_rate_schedule(0, 0.2)
  with pytest.raises(ValueError, match="exponent=0"):
    coteaching.forget_rate_schedule(10, 0.2, exponent=0)


# ---------------------------------------------------------------------------------------------------------------
# num_remember and the small-loss exchange.


def test_num_remember_matches_int_on_published_schedules():
  """Every entry of both ramps for the paper's settings (tau 0.2, 0.45, 0.5; and 0.8), at the
  published batch 128 and every smaller valid count whose exact product is not within 1e-5 of an integer."""
  rates, counts = [], []
  for tau in (0.2, 0.45, 0.5, 0.8):
    for ramp in coteaching.RAMPS:
      for r in np.unique(coteaching.forget_rate_schedule(200, tau, ramp=ramp)):
        for b in range(0, 129):
          x = (1 - r) * b
          if b == 128 or abs(x - round(x)) > 1e-5:
            rates.append(r), counts.append(b)
  got = np.asarray(jax.jit(jax.vmap(coteaching.num_remember))(jnp.asarray(rates, jnp.float32), jnp.asarray(counts)))
  want = np.asarray([int((1 - r) * b) for r, b in zip(rates, counts)])
  np.testing.assert_array_equal(got, want)
  assert len(rates) > 8_000


def test_num_remember_guard_and_round_up():
  assert int(coteaching.num_remember(0.1, 10)) == 9  # plain float32 floors 8.9999998 to 8
  assert int(coteaching.num_remember(0.2, 128)) == 102 and int(coteaching.num_remember(0.2, 128, round_up=True)) == 103
  assert int(coteaching.num_remember(0.5, 128, round_up=True)) == 64  # exact: no extra example
  assert int(coteaching.num_remember(0.0, 7)) == 7 and int(coteaching.num_remember(1.0, 7)) == 0
  assert int(coteaching.num_remember(0.3, 0)) == 0
  # The documented divergence: an exact decimal product that float64 rounds just below an integer. The original
  # keeps 77 of 120 at main.py's 7th ramp entry for tau 0.45 (never at its batch of 128); here 78 = 0.65 * 120.
  rate = np.linspace(0, 0.45, 10)[7]
  assert int((1 - rate) * 120) == 77 and int(coteaching.num_remember(rate, 120)) == 78
  with pytest.raises(ValueError, match="forget_rate=-0.1"):
    coteaching.num_remember(-0.1, 10)


@pytest.mark.parametrize("seed", range(5))
def test_small_loss_selection_matches_original_with_padding_and_ties(seed):
  rng = np.random.default_rng(seed)
  b = 64
  # Ties on purpose: losses rounded to one decimal (many equal values), and padding rows with small losses.
  losses_1 = np.round(rng.exponential(size=b), 1).astype(np.float32)
  losses_2 = np.round(rng.exponential(size=b), 1).astype(np.float32)
  valid = rng.random(b) < 0.8
  losses_1[~valid] = 0.0  # padding rows would win every ranking if they were considered
  forget_rate = [0.0, 0.2, 0.45, 0.5, 0.9][seed % 5]
  keep_1, keep_2 = coteaching.small_loss_selection(losses_1, losses_2, valid, forget_rate)
  u1, u2 = on_valid_rows(valid, lambda a, c: original_loss_coteaching(a, c, forget_rate)[:2], losses_1, losses_2)
  n = len(u1)
  np.testing.assert_array_equal(np.asarray(keep_1), mask(u2, b))  # network 1 trains on network 2's selection
  np.testing.assert_array_equal(np.asarray(keep_2), mask(u1, b))
  assert int(np.sum(keep_1)) == int(np.sum(keep_2)) == n == int((1 - forget_rate) * valid.sum())
  assert not np.any(np.asarray(keep_1) & ~valid) and not np.any(np.asarray(keep_2) & ~valid)


def test_small_loss_selection_names_which_mask_is_which():
  """Network 1 finds examples 0, 1 easy, network 2 finds 2, 3 easy: network 1 is updated on 2, 3."""
  losses_1 = np.array([0.1, 0.2, 5.0, 6.0])
  losses_2 = np.array([5.0, 6.0, 0.1, 0.2])
  keep_for_1, keep_for_2 = coteaching.small_loss_selection(losses_1, losses_2, np.ones(4), 0.5)
  np.testing.assert_array_equal(keep_for_1, [False, False, True, True])
  np.testing.assert_array_equal(keep_for_2, [True, True, False, False])


def test_ties_nan_negative_zero_and_infinite_losses():
  """Stable by index; -0.0 ties with 0.0 (as NumPy); NaN ranks last; a valid +inf loss still outranks padding."""
  losses = np.array([1.0, 0.0, -0.0, 1.0, np.nan, 0.0, np.inf, 2.0], np.float32)
  valid = np.array([1, 1, 1, 1, 1, 0, 1, 1], bool)
  for rate in (0.0, 1 / 7, 3 / 7, 5 / 7):
    keep, _ = coteaching.small_loss_selection(np.zeros(8), losses, valid, rate)
    _, u2 = on_valid_rows(valid, lambda a, c: original_loss_coteaching(a, c, rate)[:2], np.zeros(8), losses)
    np.testing.assert_array_equal(np.asarray(keep), mask(u2, 8), err_msg=str(rate))
  keep, _ = coteaching.small_loss_selection(np.zeros(8), losses, valid, 0.0)
  assert np.asarray(keep).tolist() == valid.tolist()  # all 7 valid rows, the inf and NaN ones included


def test_traced_forget_rate_under_jit_compiles_once():
  rng = np.random.default_rng(7)
  losses_1, losses_2 = rng.random(136).astype(np.float32), rng.random(136).astype(np.float32)
  valid = np.ones(136, bool)
  valid[rng.permutation(136)[:8]] = False  # 128 valid rows, as the original's drop_last batches
  select = jax.jit(coteaching.small_loss_selection)
  for rate in coteaching.forget_rate_schedule(200, 0.45, ramp="original")[:12]:
    keep_1, keep_2 = select(losses_1, losses_2, valid, jnp.float32(rate))
    u1, u2 = on_valid_rows(valid, lambda a, c: original_loss_coteaching(a, c, rate)[:2], losses_1, losses_2)
    np.testing.assert_array_equal(np.asarray(keep_1), mask(u2, 136))
    np.testing.assert_array_equal(np.asarray(keep_2), mask(u1, 136))
  assert select._cache_size() == 1


def test_keep_all_if_none():
  losses = np.array([0.3, 0.1, 0.2, 9.0])
  valid = np.array([1, 1, 0, 0], bool)
  keep_1, keep_2 = coteaching.small_loss_selection(losses, losses, valid, 0.6)  # int(0.4 * 2) = 0
  assert not np.any(keep_1) and not np.any(keep_2)
  keep_1, keep_2 = coteaching.small_loss_selection(losses, losses, valid, 0.6, keep_all_if_none=True)
  np.testing.assert_array_equal(keep_1, valid)
  u1, u2, n = original_loss_coteaching(losses[:2], losses[:2], 0.6, plus_repo=True)
  assert n == 2 and mask(u2, 4).tolist() == np.asarray(keep_1).tolist()


# ---------------------------------------------------------------------------------------------------------------
# The exchanged loss.


def test_coteaching_loss_mean_and_original_double_normalisation():
  rng = np.random.default_rng(3)
  b, c = 32, 10
  logits_1, logits_2 = rng.normal(size=(2, b, c)).astype(np.float32)
  labels = rng.integers(0, c, b)
  ce_1, ce_2 = ce_numpy(logits_1, labels), ce_numpy(logits_2, labels)
  valid = np.ones(b, bool)
  valid[-5:] = False
  ce_1[~valid] = np.nan  # padding rows never reach the loss, not even as NaN * 0
  rate = 0.45
  keep_1, keep_2 = coteaching.small_loss_selection(ce_1, ce_2, valid, rate)
  u1, u2 = on_valid_rows(valid, lambda a, d: original_loss_coteaching(a, d, rate)[:2], ce_1, ce_2)
  n = len(u1)
  # loss.py: F.cross_entropy(y_1[ind_2_update], t[ind_2_update]) (a mean over n), then torch.sum(.) / n.
  loss_1_update, loss_2_update = ce_1[u2].mean(), ce_2[u1].mean()
  np.testing.assert_allclose(coteaching.coteaching_loss(ce_1, keep_1), loss_1_update, rtol=1e-6)
  np.testing.assert_allclose(coteaching.coteaching_loss(ce_2, keep_2), loss_2_update, rtol=1e-6)
  np.testing.assert_allclose(
    coteaching.coteaching_loss(ce_1, keep_1, normalise_twice=True), loss_1_update / n, rtol=1e-6
  )
  assert float(coteaching.coteaching_loss(ce_1, np.zeros(b, bool))) == 0.0

  # The gradient reaches exactly the kept rows, with weight 1 / n (1 / n^2 twice normalised); finite despite NaN.
  one_hot = jax.nn.one_hot(labels, c)

  def objective(z, twice):
    from noisy_jax.core import losses

    per_example = jnp.where(jnp.asarray(valid), losses.cross_entropy(z, one_hot), jnp.nan)
    return coteaching.coteaching_loss(per_example, keep_1, normalise_twice=twice)

  for twice, scale in ((False, 1 / n), (True, 1 / n**2)):
    grad = np.asarray(jax.grad(objective)(jnp.asarray(logits_1), twice))
    want = (softmax_numpy(logits_1) - np.eye(c)[labels]) * scale * mask(u2, b)[:, None]
    np.testing.assert_allclose(grad, want, rtol=1e-5, atol=1e-7)


def test_double_softmax_cross_entropy_is_the_original_defect():
  rng = np.random.default_rng(5)
  c = 10
  logits = (5 * rng.normal(size=(16, c))).astype(np.float32)
  labels = rng.integers(0, c, 16)
  got = coteaching.double_softmax_cross_entropy(logits, jax.nn.one_hot(labels, c))
  np.testing.assert_allclose(got, ce_numpy(softmax_numpy(logits.astype(np.float64)), labels), rtol=1e-5)
  want_torch = torch.nn.functional.cross_entropy(
    torch.softmax(torch.from_numpy(logits), 1), torch.from_numpy(labels), reduction="none"
  ).numpy()
  np.testing.assert_allclose(got, want_torch, rtol=1e-5)
  low, high = np.log(c - 1 + np.e) - 1, np.log(c - 1 + np.e)
  assert np.all(np.asarray(got) >= low - 1e-5) and np.all(np.asarray(got) <= high + 1e-5)


# ---------------------------------------------------------------------------------------------------------------
# Co-teaching+.


def _plus_batch(seed, b=48, c=4):
  rng = np.random.default_rng(seed)
  logits_1, logits_2 = rng.normal(size=(2, b, c)).astype(np.float32)
  losses_1, losses_2 = np.round(rng.exponential(size=(2, b)), 1).astype(np.float32)  # ties
  return logits_1, logits_2, losses_1, losses_2


@pytest.mark.parametrize("seed", range(3))
def test_disagreement_selection_before_and_after_init_epoch(seed):
  logits_1, logits_2, losses_1, losses_2 = _plus_batch(seed)
  b = len(losses_1)
  valid = np.ones(b, bool)
  valid[-6:] = False
  ind = np.arange(1, b + 1)  # dataset indices >= 1: the original's index-0 filter stays inert
  rate, init_epoch = 0.45, 20
  select = jax.jit(functools.partial(coteaching.disagreement_selection, init_epoch=init_epoch))
  for epoch in (1, 19, 20, 150):  # traced epoch: one compilation
    keep_1, keep_2 = select(logits_1, logits_2, losses_1, losses_2, valid, rate, epoch=epoch)
    if epoch < init_epoch:
      u1, u2 = on_valid_rows(
        valid, lambda a, d: original_loss_coteaching(a, d, rate, plus_repo=True)[:2], losses_1, losses_2
      )
      want_1, want_2 = u2, u1
    else:
      want_1, want_2 = on_valid_rows(
        valid,
        lambda z1, z2, a, d, i: original_loss_coteaching_plus(z1, z2, a, d, rate, i, step=10_000),
        logits_1,
        logits_2,
        losses_1,
        losses_2,
        ind,
      )
      disagree = (np.argmax(logits_1, 1) != np.argmax(logits_2, 1)) & valid
      assert 0 < len(want_1) < disagree.sum() and set(want_1) <= set(np.flatnonzero(disagree))
    np.testing.assert_array_equal(np.asarray(keep_1), mask(want_1, b), err_msg=f"epoch {epoch}")
    np.testing.assert_array_equal(np.asarray(keep_2), mask(want_2, b), err_msg=f"epoch {epoch}")
  assert select._cache_size() == 1


def test_disagreement_small_sets_and_no_disagreement_fallback():
  logits_1, _, losses_1, losses_2 = _plus_batch(11, b=10)
  valid = np.ones(10, bool)
  ind = np.arange(1, 11)
  # One disagreeing example: int(0.55 * 1) = 0, the original keeps the whole (one-example) set.
  logits_2 = logits_1.copy()
  logits_2[4] = -logits_2[4]
  keep_1, keep_2 = coteaching.disagreement_selection(
    logits_1, logits_2, losses_1, losses_2, valid, 0.45, epoch=5, init_epoch=0
  )
  want_1, want_2 = original_loss_coteaching_plus(logits_1, logits_2, losses_1, losses_2, 0.45, ind, step=10_000)
  assert np.flatnonzero(keep_1).tolist() == want_1.tolist() == [4] and np.flatnonzero(keep_2).tolist() == [4]
  keep_1, _ = coteaching.disagreement_selection(
    logits_1, logits_2, losses_1, losses_2, valid, 0.45, epoch=5, init_epoch=0, keep_all_if_none=False
  )
  assert not np.any(keep_1)
  # No disagreement: no update by default; the original's step < 5000 branch trains on the whole batch.
  for step, fallback in ((10_000, False), (3, True)):
    want_1, want_2 = original_loss_coteaching_plus(logits_1, logits_1, losses_1, losses_2, 0.45, ind, step)
    keep_1, keep_2 = coteaching.disagreement_selection(
      logits_1, logits_1, losses_1, losses_2, valid, 0.45, epoch=5, init_epoch=0, fallback_all=jnp.asarray(step < 5000)
    )
    np.testing.assert_array_equal(keep_1, mask(want_1, 10))
    np.testing.assert_array_equal(keep_2, mask(want_2, 10))
    assert int(np.sum(keep_1)) == (10 if fallback else 0)


def test_index_zero_defect_is_not_reproduced():
  """When dataset row 0 disagrees, the original drops the batch's *last* disagreeing example; here nothing is
  dropped (the selection equals the original's on the same batch with nonzero dataset indices)."""
  logits_1, logits_2, losses_1, losses_2 = _plus_batch(2, b=16)
  disagree = np.flatnonzero(np.argmax(logits_1, 1) != np.argmax(logits_2, 1))
  assert len(disagree) >= 3
  ind = np.arange(100, 116)
  ind[disagree[0]] = 0  # dataset row 0 sits at the first disagreeing position
  buggy_1, _ = original_loss_coteaching_plus(logits_1, logits_2, losses_1, losses_2, 0.0, ind, step=10_000)
  assert set(buggy_1) == set(disagree[:-1])  # the last one is gone, not the one holding index 0
  keep_1, _ = coteaching.disagreement_selection(
    logits_1, logits_2, losses_1, losses_2, np.ones(16), 0.0, epoch=1, init_epoch=0
  )
  assert np.flatnonzero(keep_1).tolist() == disagree.tolist()


def test_disagreement_mask():
  z1 = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [0.0, 1.0]])
  z2 = np.array([[1.0, 0.0], [1.0, 0.0], [2.0, 2.0], [1.0, 0.0]])
  np.testing.assert_array_equal(coteaching.disagreement(z1, z2, [1, 1, 1, 0]), [False, True, False, False])
  with pytest.raises(ValueError, match=r"\[B, C\]"):
    coteaching.disagreement(z1[0], z2[0], [1])


# ---------------------------------------------------------------------------------------------------------------
# Device axis: N devices select (and average) what one device does on the concatenated batch.


def test_axis_name_gives_the_global_selection_and_loss():
  num_devices, b = 4, 12
  logits_1, logits_2, losses_1, losses_2 = _plus_batch(9, b=num_devices * b)
  valid = np.random.default_rng(9).random(num_devices * b) < 0.85
  split = lambda a: a.reshape(num_devices, b, *a.shape[1:])

  def per_device(z1, z2, l1, l2, v, rate, epoch):
    small = coteaching.small_loss_selection(l1, l2, v, rate, axis_name="d")
    plus = coteaching.disagreement_selection(z1, z2, l1, l2, v, rate, epoch=epoch, init_epoch=3, axis_name="d")
    loss = coteaching.coteaching_loss(l1, small[0], "d", normalise_twice=True)
    return small, plus, loss

  mapped = jax.jit(jax.vmap(per_device, in_axes=(0, 0, 0, 0, 0, None, None), axis_name="d"))
  for rate, epoch in ((0.3, 1), (0.45, 5)):
    small, plus, loss = mapped(*map(split, (logits_1, logits_2, losses_1, losses_2, valid)), rate, epoch)
    want_small = coteaching.small_loss_selection(losses_1, losses_2, valid, rate)
    want_plus = coteaching.disagreement_selection(
      logits_1, logits_2, losses_1, losses_2, valid, rate, epoch=epoch, init_epoch=3
    )
    for got, want in zip((*small, *plus), (*want_small, *want_plus)):
      np.testing.assert_array_equal(np.asarray(got).reshape(-1), np.asarray(want))
    want_loss = coteaching.coteaching_loss(losses_1, want_small[0], normalise_twice=True)
    np.testing.assert_allclose(np.asarray(loss), np.full(num_devices, want_loss), rtol=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# Adam plan and schedule.


@pytest.mark.parametrize("n_epoch,decay_start", [(200, 80), (200, 100), (10, 4), (5, 9)])
def test_adam_plan_is_main_py_bit_for_bit(n_epoch, decay_start):
  lr, beta1 = coteaching_adam.adam_plan(0.001, n_epoch, decay_start)
  alpha_plan, beta1_plan = original_adam_plan(0.001, n_epoch, decay_start)
  np.testing.assert_array_equal(lr, alpha_plan)
  np.testing.assert_array_equal(beta1, beta1_plan)


def test_adam_plan_values_at_chosen_epochs():
  lr, beta1 = coteaching_adam.adam_plan(1e-3, 200, 80)
  assert lr[0] == lr[79] == lr[80] == 1e-3 and beta1[79] == 0.9 and beta1[80] == 0.1
  assert lr[140] == pytest.approx(0.5e-3) and lr[199] == pytest.approx(1e-3 / 120)
  with pytest.raises(ValueError, match="decay_start=-1"):
    coteaching_adam.adam_plan(1e-3, 200, -1)
  with pytest.raises(ValueError, match="beta1_after=1.0"):
    coteaching_adam.adam_plan(1e-3, 200, 80, beta1_after=1.0)


@pytest.mark.parametrize("epoch_offset", [0, 1])
def test_adam_schedule_matches_torch_adam_with_per_epoch_adjustment(epoch_offset):
  """main.py: before each epoch, param_group['lr'] = alpha_plan[epoch], ['betas'] = (beta1_plan[epoch], 0.999)."""
  n_epoch, decay_start, steps_per_epoch, base_lr = 6, 3, 3, 0.05
  rng = np.random.default_rng(0)
  w0 = rng.normal(size=5)
  grads = rng.normal(size=((n_epoch - epoch_offset) * steps_per_epoch, 5))
  alpha_plan, beta1_plan = original_adam_plan(base_lr, n_epoch, decay_start)

  w_torch = torch.tensor(w0, requires_grad=True)
  opt = torch.optim.Adam([w_torch], lr=base_lr)
  tx = coteaching_adam.adam_schedule(
    base_lr, n_epoch, decay_start, steps_per_epoch=steps_per_epoch, epoch_offset=epoch_offset
  )
  w = jnp.asarray(w0, jnp.float32)
  state = tx.init(w)
  update = jax.jit(tx.update)
  step = 0
  for epoch in range(epoch_offset, n_epoch):
    for group in opt.param_groups:
      group["lr"], group["betas"] = alpha_plan[epoch], (beta1_plan[epoch], 0.999)
    for _ in range(steps_per_epoch):
      g = grads[step]
      opt.zero_grad()
      w_torch.grad = torch.tensor(g)
      opt.step()
      updates, state = update(jnp.asarray(g, jnp.float32), state)
      w = optax.apply_updates(w, updates)
      assert float(state.hyperparams["learning_rate"]) == pytest.approx(alpha_plan[epoch], rel=1e-6)
      assert float(state.hyperparams["b1"]) == pytest.approx(beta1_plan[epoch], rel=1e-6)
      np.testing.assert_allclose(np.asarray(w), w_torch.detach().numpy(), rtol=1e-5, atol=1e-6)
      step += 1
  # Past the plan's end the last epoch's values are kept.
  for _ in range(2 * steps_per_epoch):
    _, state = update(jnp.zeros(5, jnp.float32), state)
  assert float(state.hyperparams["learning_rate"]) == pytest.approx(alpha_plan[-1], rel=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# The 9-layer CNN (model.py `CNN`).


def cnn_closed_form_count(num_classes, in_channels=3, widths=(128, 128, 128, 256, 256, 256, 512, 256, 128)):
  """9 convolutions 3x3 with bias, a BatchNorm (scale + bias) after each, a dense head with bias."""
  total, c_in = 0, in_channels
  for w in widths:
    total += 9 * c_in * w + w + 2 * w
    c_in = w
  return total + c_in * num_classes + num_classes


class TorchCoteachingCNN(torch.nn.Module):
  """model.py's CNN written from its description for these tests, any widths, dropout in train mode only."""

  def __init__(self, in_channels, num_classes, widths, dropout_rate):
    super().__init__()
    self.dropout_rate = dropout_rate
    chans = [in_channels, *widths]
    self.convs = torch.nn.ModuleList(
      torch.nn.Conv2d(chans[i], chans[i + 1], 3, stride=1, padding=1 if i < 6 else 0) for i in range(9)
    )
    self.bns = torch.nn.ModuleList(torch.nn.BatchNorm2d(w) for w in widths)
    self.fc = torch.nn.Linear(widths[-1], num_classes)

  def forward(self, h):
    for i, (conv, bn) in enumerate(zip(self.convs, self.bns)):
      h = torch.nn.functional.leaky_relu(bn(conv(h)), negative_slope=0.01)
      if i in (2, 5):
        h = torch.nn.functional.max_pool2d(h, kernel_size=2, stride=2)
        h = torch.nn.functional.dropout2d(h, p=self.dropout_rate, training=self.training)
    h = torch.nn.functional.avg_pool2d(h, kernel_size=h.shape[2])
    return self.fc(h.view(h.size(0), h.size(1)))


def cnn_torch_to_flax(net):
  t = lambda a: a.detach().numpy()
  params, stats = {}, {}
  for i, (conv, bn) in enumerate(zip(net.convs, net.bns), start=1):
    params[f"conv{i}"] = {"kernel": t(conv.weight).transpose(2, 3, 1, 0), "bias": t(conv.bias)}
    params[f"bn{i}"] = {"scale": t(bn.weight), "bias": t(bn.bias)}
    stats[f"bn{i}"] = {"mean": t(bn.running_mean), "var": t(bn.running_var)}
  params["fc"] = {"kernel": t(net.fc.weight).T, "bias": t(net.fc.bias)}
  return {"params": params, "batch_stats": stats}


def _abstract(model, shape):
  return jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros(shape), train=False))


def _count(tree):
  return int(sum(np.prod(leaf.shape) for leaf in jax.tree.leaves(tree)))


@pytest.mark.parametrize("shape,num_classes", [((2, 32, 32, 3), 10), ((2, 32, 32, 3), 100), ((2, 28, 28, 1), 10)])
def test_coteaching_cnn_parameter_count(shape, num_classes):
  variables = _abstract(models.get("coteaching_cnn", num_classes=num_classes), shape)
  n = _count(variables["params"])
  assert n == cnn_closed_form_count(num_classes, shape[-1])
  net = TorchCoteachingCNN(shape[-1], num_classes, (128, 128, 128, 256, 256, 256, 512, 256, 128), 0.25)
  assert n == sum(p.numel() for p in net.parameters() if p.requires_grad)
  assert n == {(3, 10): 4_434_570, (3, 100): 4_446_180, (1, 10): 4_432_266}[(shape[-1], num_classes)]
  assert _count(variables["batch_stats"]) == 2 * (3 * 128 + 3 * 256 + 512 + 256 + 128)
  assert variables["params"]["conv7"]["kernel"].shape == (3, 3, 256, 512)
  out = jax.eval_shape(
    lambda v: models.get("coteaching_cnn", num_classes=num_classes).apply(v, jnp.zeros(shape), train=False), variables
  )
  assert (out.shape, out.dtype) == ((2, num_classes), jnp.float32)


def test_coteaching_cnn_forward_matches_torch():
  """Same weights, same logits in eval and train mode (batch statistics; dropout off in both for a deterministic
  comparison), small widths, 32x32 (the last maps are 2x2: avg_pool2d(kernel 2) = the mean). Then the running
  statistics after the train pass: PyTorch's momentum 0.1 = flax's 0.9, eps 1e-5; the running variance moves towards
  the biased batch variance here, the unbiased one in PyTorch (factor (m - 1) / m, m = batch x height x width)."""
  torch.manual_seed(0)
  widths = (4, 4, 5, 6, 6, 7, 8, 6, 5)
  net = TorchCoteachingCNN(3, 5, widths, 0.0).double()
  for bn in net.bns:
    with torch.no_grad():
      bn.weight.uniform_(0.5, 1.5), bn.bias.uniform_(-0.5, 0.5)
      bn.running_mean.uniform_(-0.5, 0.5), bn.running_var.uniform_(0.5, 2.0)
  model = CoteachingCNN(num_classes=5, widths=widths, dropout_rate=0.0)
  hw = 32
  variables = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), cnn_torch_to_flax(net))
  assert jax.tree.structure(variables) == jax.tree.structure(_abstract(model, (1, hw, hw, 3)))
  x = np.random.default_rng(0).normal(size=(4, hw, hw, 3))
  test_paper_models.assert_same_logits(net, model, variables, x)  # eval and train mode; leaves net in train mode
  new_stats = model.apply(variables, jnp.asarray(x, jnp.float32), train=True, mutable=["batch_stats"])[1]["batch_stats"]
  sides = (32, 32, 32, 16, 16, 16, 6, 4, 2)
  for i, (bn, side) in enumerate(zip(net.bns, sides), start=1):
    old = variables["batch_stats"][f"bn{i}"]
    np.testing.assert_allclose(new_stats[f"bn{i}"]["mean"], bn.running_mean.numpy(), rtol=1e-4, atol=1e-5)
    m = len(x) * side * side
    np.testing.assert_allclose(
      new_stats[f"bn{i}"]["var"] - 0.9 * old["var"],
      (bn.running_var.numpy() - 0.9 * np.asarray(old["var"])) * (m - 1) / m,
      rtol=1e-3,
      atol=1e-6,
    )


@pytest.fixture(scope="module")
def cnn_and_variables():
  """A narrow CoteachingCNN (width 16 everywhere) initialised once on 28x28x1 inputs (one compilation)."""
  model = CoteachingCNN(num_classes=3, widths=(16,) * 9)
  x = jax.random.normal(jax.random.key(1), (2, 28, 28, 1))
  return model, jax.jit(functools.partial(model.init, train=False))(jax.random.key(0), x), x


def test_coteaching_cnn_init_matches_pytorch_defaults(cnn_and_variables):
  """Kernels and biases U(+-1 / sqrt(fan_in)) (PyTorch's Conv2d / Linear defaults, 0.3 and >= 1), BN scale 1 /
  bias 0, running statistics 0 / 1."""
  _, variables, _ = cnn_and_variables
  params = variables["params"]
  c_in = 1
  for i in range(1, 10):
    kernel, bias = np.asarray(params[f"conv{i}"]["kernel"]), np.asarray(params[f"conv{i}"]["bias"])
    bound = 1 / np.sqrt(9 * c_in)
    assert np.max(np.abs(kernel)) <= bound and np.max(np.abs(bias)) <= bound
    if kernel.size > 1000:
      assert abs(kernel.std() / (bound / np.sqrt(3)) - 1) < 0.1 and np.max(np.abs(kernel)) > 0.95 * bound
    assert np.all(params[f"bn{i}"]["scale"] == 1) and np.all(params[f"bn{i}"]["bias"] == 0)
    assert np.all(variables["batch_stats"][f"bn{i}"]["mean"] == 0)
    assert np.all(variables["batch_stats"][f"bn{i}"]["var"] == 1)
    c_in = kernel.shape[-1]
  assert np.max(np.abs(params["fc"]["kernel"])) <= 1 / np.sqrt(16)
  assert np.max(np.abs(params["fc"]["bias"])) <= 1 / np.sqrt(16)


def test_coteaching_cnn_dropout_train_only_whole_channels(cnn_and_variables):
  model, variables, x = cnn_and_variables
  no_dropout = model.clone(dropout_rate=0.0)

  @jax.jit
  def run(variables, x):
    train = functools.partial(
      model.apply,
      train=True,
      mutable=["batch_stats", "intermediates"],
      capture_intermediates=lambda mdl, _: isinstance(mdl, nn.Dropout),
    )
    logits_a, state_a = train(variables, x, rngs={"dropout": jax.random.key(2)})
    logits_b, _ = train(variables, x, rngs={"dropout": jax.random.key(3)})
    return (
      logits_a,
      state_a["intermediates"],
      logits_b,
      model.apply(variables, x, train=False),
      no_dropout.apply(variables, x, train=False),
      no_dropout.apply(variables, x, train=True, mutable=["batch_stats"])[0],
    )

  logits_a, intermediates, logits_b, eval_logits, eval_no_dropout, train_no_dropout = run(variables, x)
  dropped = [np.asarray(v["__call__"][0]) for k, v in intermediates.items() if k.startswith("Dropout")]
  assert len(dropped) == 2
  for h in dropped:  # [B, H, W, C]: each (example, channel) map is either all zero or has no zero at all
    zero = h == 0
    per_map = np.all(zero, axis=(1, 2))
    assert per_map.any() and not per_map.all()
    assert np.array_equal(np.any(zero, axis=(1, 2)), per_map)
  assert not np.allclose(logits_a, logits_b) and not np.allclose(logits_a, train_no_dropout)
  # Eval: no dropout (and no RNG needed), the same function as the network with dropout disabled.
  np.testing.assert_array_equal(eval_logits, eval_no_dropout)
  with pytest.raises(Exception, match="dropout"):
    jax.eval_shape(functools.partial(model.apply, train=True, mutable=["batch_stats"]), variables, x)


def test_coteaching_cnn_registry_and_bad_input():
  assert models.MODELS["coteaching_cnn"] is CoteachingCNN
  model = models.get("coteaching_cnn", num_classes=100, dropout_rate=0.0, bn_axis_name="batch")
  assert (model.num_classes, model.dropout_rate, model.bn_axis_name) == (100, 0.0, "batch")
  with pytest.raises(ValueError, match=r"at least 28x28 .*got 16x16"):
    _abstract(models.get("coteaching_cnn", num_classes=10), (1, 16, 16, 3))
  with pytest.raises(ValueError, match=r"needs images \[B, H, W, C\]"):
    _abstract(models.get("coteaching_cnn", num_classes=10), (2, 3072))
  with pytest.raises(ValueError, match="9 convolution widths"):
    _abstract(models.get("coteaching_cnn", num_classes=10, widths=(8, 8)), (1, 32, 32, 3))
