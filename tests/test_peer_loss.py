"""Peer loss's pure pieces (noisy_jax.core.peer_loss) against the codes, in float64 PyTorch transcriptions.

The loss with given peer rows against the replication's training_step_stage1 (KlemenVovk/noisy-labels
peer_loss.py:122-132 with CrossEntropyLossStable, utils.py:5-14) and the exact form (F.cross_entropy); the peer draw's
distribution and independence; the replication's alpha schedule and learning-rate plan (utils.py:18-52, their torch
code run as is); the settings' checks. No method is registered (the module docstring says why).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from noisy_jax.core import errors
from noisy_jax.core import peer_loss


def _stable_cross_entropy(outputs, labels, eps=1e-5):
  """utils.py:5-14's CrossEntropyLossStable (reduction 'none')."""
  return F.nll_loss(torch.log(torch.softmax(outputs, dim=-1) + eps), labels, reduction="none")


def _original_step_loss(y_pred, y_noise, y_pred_sh, y_noise_sh, fac, criterion):
  """peer_loss.py:129-132: criterion(y_pred, y_noise) - fac * criterion(y_pred_sh, y_noise_sh), mean reduction."""
  return torch.mean(criterion(y_pred, y_noise)) - fac * torch.mean(criterion(y_pred_sh, y_noise_sh))


def _inputs(seed, num_examples, classes, scale):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(num_examples, classes)) * scale, rng.integers(0, classes, num_examples)


@pytest.mark.parametrize("classes", [10, 100])
@pytest.mark.parametrize("alpha", [0.0, 0.5, 2.0])
@pytest.mark.parametrize("log_epsilon", [0.0, peer_loss.REPLICATION_LOG_EPSILON])
def test_loss_and_its_gradient_equal_the_codes_with_the_same_peer_rows(classes, alpha, log_epsilon):
  """The 'dataset' is 200 examples of logits and labels; the batch is rows 0..63, the peers rows n1 (inputs) and n2
  (labels) drawn by draw_peer_rows; gradients with respect to every example's logits."""
  z, y = _inputs(classes + int(10 * alpha), 200, classes, 4.0)
  inputs_rows, label_rows = (np.asarray(r) for r in peer_loss.draw_peer_rows(jax.random.key(classes), 64, 200))
  criterion = (
    (lambda a, b: F.cross_entropy(a, b, reduction="none"))
    if log_epsilon == 0.0
    else (lambda a, b: _stable_cross_entropy(a, b, log_epsilon))
  )
  logits = torch.tensor(z, dtype=torch.float64, requires_grad=True)
  labels = torch.tensor(y)
  inputs_rows, label_rows = torch.tensor(inputs_rows.copy()), torch.tensor(label_rows.copy())
  loss = _original_step_loss(logits[:64], labels[:64], logits[inputs_rows], labels[label_rows], alpha, criterion)
  loss.backward()
  with jax.enable_x64():
    one_hot = jax.nn.one_hot(y, classes, dtype=jnp.float64)

    def ours(all_logits):
      per_example = peer_loss.peer_loss(
        all_logits[:64],
        one_hot[:64],
        all_logits[inputs_rows.numpy()],
        one_hot[label_rows.numpy()],
        alpha=alpha,
        log_epsilon=log_epsilon,
      )
      return jnp.mean(per_example)

    value, grad = jax.value_and_grad(ours)(jnp.asarray(z))
  np.testing.assert_allclose(float(value), loss.item(), rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(np.asarray(grad), logits.grad.numpy(), rtol=1e-9, atol=1e-15)


def test_zero_alpha_is_cross_entropy_and_the_peer_term_lowers_the_loss():
  z, y = _inputs(1, 32, 10, 3.0)
  one_hot = jax.nn.one_hot(y, 10)
  ce = -jnp.sum(one_hot * jax.nn.log_softmax(jnp.asarray(z, jnp.float32)), axis=-1)
  np.testing.assert_allclose(peer_loss.peer_loss(z, one_hot, z[::-1], one_hot[::-1], alpha=0.0), ce, rtol=1e-6)
  lowered = peer_loss.peer_loss(z, one_hot, z[::-1], one_hot[::-1], alpha=1.0)
  assert np.all(np.asarray(lowered) < np.asarray(ce))


# ------------------------------------------------------------------------------------------------------------
# The peer draw.


def test_peer_rows_are_uniform_independent_and_from_their_own_streams():
  n, draws = 10, 200_000
  inputs_rows, label_rows = (np.asarray(r) for r in peer_loss.draw_peer_rows(jax.random.key(0), draws, n))
  assert inputs_rows.dtype == np.int32 and inputs_rows.min() >= 0 and inputs_rows.max() < n
  # Each uniform over the N rows: chi-square with 9 degrees of freedom (0.999 quantile 27.9).
  for rows in (inputs_rows, label_rows):
    counts = np.bincount(rows, minlength=n)
    assert np.sum((counts - draws / n) ** 2 / (draws / n)) < 27.9
  # Independent: the joint counts [N, N] against the product of the marginals (81 dof; 0.999 quantile 129).
  joint = np.zeros((n, n))
  np.add.at(joint, (inputs_rows, label_rows), 1)
  expected = np.outer(joint.sum(1), joint.sum(0)) / draws
  assert np.sum((joint - expected) ** 2 / expected) < 129.0
  # With replacement (RandomSampler(replacement=True)): a batch of 64 of 50 rows repeats some.
  small, _ = peer_loss.draw_peer_rows(jax.random.key(1), 64, 50)
  assert len(np.unique(np.asarray(small))) < 64
  # The streams are fold_in(key, 0) and fold_in(key, 1); another key draws other rows.
  key = jax.random.key(3)
  again = peer_loss.draw_peer_rows(key, 16, 1000)
  np.testing.assert_array_equal(again[0], jax.random.randint(jax.random.fold_in(key, 0), (16,), 0, 1000))
  np.testing.assert_array_equal(again[1], jax.random.randint(jax.random.fold_in(key, 1), (16,), 0, 1000))
  assert not np.array_equal(again[0], peer_loss.draw_peer_rows(jax.random.key(4), 16, 1000)[0])


# ------------------------------------------------------------------------------------------------------------
# The replication's schedules.


def _f_alpha(epoch, r=0.1):
  """utils.py:18-37 as it is."""
  if r <= 0.3:
    pieces = [(0.0, 0.0, 20), (0.0, 1, 20), (1, 2, 50), (2, 5, 50), (5, 10, 100), (10, 20, 100)]
  else:
    pieces = [(0.0, 0.0, 20), (0.0, 0.1, 20), (1, 2, 50), (2, 2.5, 50), (2.5, 3.3, 100), (3.3, 5, 100)]
  alpha = torch.concatenate([torch.linspace(*p) for p in pieces], axis=0)
  epoch = max(0, min(epoch, 339))
  return alpha[epoch]


def _lr_plan(epoch):
  """utils.py:40-52 as it is."""
  epoch = max(0, min(epoch, 319))
  lr_list = [0.1] * 40 + [0.01] * 40 + [0.001] * 40 + [1e-4] * 40 + [1e-5] * 40 + [1e-6] * 40 + [1e-7] * 40
  lr_list += [1e-8] * 20
  return lr_list[epoch] / (1 + _f_alpha(epoch))


@pytest.mark.parametrize("setting, r", [("sparse", 0.1), ("uniform", 0.5)])
def test_alpha_schedule_is_f_alpha(setting, r):
  ours = peer_loss.alpha_schedule(setting)
  theirs = np.array([_f_alpha(e, r).item() for e in range(340)], np.float32)
  assert ours.shape == (340,) and ours.dtype == np.float32
  np.testing.assert_array_equal(ours, theirs)
  assert peer_loss.alpha_at(-3, setting) == theirs[0] and peer_loss.alpha_at(1000, setting) == theirs[-1]


def test_lr_factor_is_lr_plan():
  for epoch in (-1, 0, 19, 20, 39, 40, 50, 79, 80, 200, 299):
    np.testing.assert_allclose(peer_loss.lr_factor(epoch), float(_lr_plan(epoch)), rtol=1e-6)
  with pytest.raises(IndexError):  # the plan has 300 entries, the clamp allows 319
    _lr_plan(300)
  assert peer_loss.lr_factor(300) == peer_loss.lr_factor(299) == peer_loss.lr_factor(5000)


# ------------------------------------------------------------------------------------------------------------
# Settings.


def test_bad_settings_raise_naming_the_value():
  z, y = _inputs(2, 4, 3, 1.0)
  one_hot = jax.nn.one_hot(y, 3)
  with pytest.raises(errors.InputError, match="alpha=-0.5"):
    peer_loss.peer_loss(z, one_hot, z, one_hot, alpha=-0.5)
  with pytest.raises(errors.InputError, match="log_epsilon=-1e-05"):
    peer_loss.peer_loss(z, one_hot, z, one_hot, alpha=1.0, log_epsilon=-1e-5)
  with pytest.raises(ValueError, match="peer_logits"):
    peer_loss.peer_loss(z, one_hot, z[:2], one_hot[:2], alpha=1.0)
  with pytest.raises(errors.InputError, match="'dense'"):
    peer_loss.alpha_schedule("dense")
  with pytest.raises(ValueError, match="batch_size=0"):
    peer_loss.draw_peer_rows(jax.random.key(0), 0, 10)
