"""DISC's building blocks (noisy_jax.methods.disc) against a float64 NumPy transcription of the original code
(JackYFL/DISC@a21e910: algorithms/DISC.py's epoch-end selection, correction and threshold update, and its step's
CE + GCE loss; losses/loss_other.py's GCELoss), on fixed random inputs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from noisy_jax.methods import disc

RNG = np.random.default_rng(4)
N, C, B = 40, 5, 12


def _softmax(z):
  z = np.asarray(z, np.float64)
  e = np.exp(z - z.max(axis=-1, keepdims=True))
  return e / e.sum(axis=-1, keepdims=True)


def np_divide(w_probs, s_probs, labels, w_conf, s_conf, weak_labels, sigma, momentum):
  """DISC.train after its loop (torch.no_grad block), in NumPy."""
  weak_labels = weak_labels.copy()
  ws_probs = (w_probs + s_probs) / 2
  ws_label = ws_probs.argmax(axis=1)
  rows = np.arange(len(labels))
  w_mask = w_probs[rows, labels] > w_conf
  s_mask = s_probs[rows, labels] > s_conf
  clean = w_mask & s_mask
  selected = w_mask | s_mask
  hard = (w_mask & ~clean) | (s_mask & ~clean)
  threshold = np.minimum((w_conf + s_conf) / 2 + sigma, 0.99)
  correction = (ws_probs.max(axis=1) > threshold) & ~selected
  weak_flags = correction | selected
  weak_labels[selected] = labels[selected]
  weak_labels[correction] = ws_label[correction]
  w_conf = momentum * w_conf + (1 - momentum) * w_probs.max(axis=1)
  s_conf = momentum * s_conf + (1 - momentum) * s_probs.max(axis=1)
  return clean, hard, weak_flags, weak_labels, w_conf, s_conf


def np_gce(logits, labels, q=0.7):
  pred = np.clip(_softmax(logits), 1e-7, 1.0)
  return np.mean((1.0 - pred[np.arange(len(labels)), labels] ** q) / q)


def np_ce(logits, labels):
  log_p = np.log(_softmax(logits))
  return np.mean(-log_p[np.arange(len(labels)), labels])


def np_supervised(w_logits, s_logits, targets, clean, hard, lamd_ce, lamd_h):
  """DISC.train's loss_sup after the warm-up, without the mixup part."""
  loss = 0.0
  batch_size = len(targets)
  if clean.sum():
    loss += (
      (np_ce(w_logits[clean], targets[clean]) + np_ce(s_logits[clean], targets[clean]))
      * lamd_ce
      * (clean.sum() / batch_size)
    )
  if hard.sum():
    loss += (
      (np_gce(w_logits[hard], targets[hard]) + np_gce(s_logits[hard], targets[hard]))
      * lamd_h
      * (hard.sum() / batch_size)
    )
  return loss


def _inputs():
  labels = RNG.integers(0, C, N)
  w_probs = _softmax(RNG.normal(size=(N, C)) * 2.0)
  s_probs = _softmax(RNG.normal(size=(N, C)) * 2.0)
  w_probs[:5] = np.eye(C)[labels[:5]] * 0.96 + 0.01  # confident on the given label: clean
  s_probs[5:10] = np.eye(C)[(labels[5:10] + 1) % C] * 0.96 + 0.01  # confident elsewhere: corrected when not selected
  w_probs[5:10] = s_probs[5:10]
  w_conf = RNG.uniform(0.1, 0.6, N)
  s_conf = RNG.uniform(0.1, 0.6, N)
  return w_probs, s_probs, labels, w_conf, s_conf, RNG.integers(0, C, N)


@pytest.mark.parametrize("momentum", [0.99, 0.95])
def test_division_and_thresholds_are_the_originals(momentum):
  w_probs, s_probs, labels, w_conf, s_conf, weak_labels = _inputs()
  want = np_divide(w_probs, s_probs, labels, w_conf, s_conf, weak_labels, 0.5, momentum)
  got = jax.jit(lambda *a: disc.divide(*a, momentum=momentum))(w_probs, s_probs, labels, w_conf, s_conf, weak_labels)
  for name, expected, value in zip(
    ("clean", "hard", "purified", "purified_labels", "w_confidence", "s_confidence"), want, got
  ):
    if name.endswith("confidence"):  # float32 (JAX's default) against float64
      np.testing.assert_allclose(np.asarray(value), expected, rtol=1e-6, err_msg=name)
    else:
      np.testing.assert_array_equal(np.asarray(value), expected, err_msg=name)
  clean, hard, purified = (np.asarray(x) for x in got[:3])
  assert clean.any() and hard.any() and (purified & ~clean & ~hard).any()  # every set is exercised
  assert not (clean & hard).any() and not ((clean | hard) & ~purified).any()
  np.testing.assert_allclose(disc.initial_confidence(8), np.full(8, 1 / 8))


def test_supervised_and_warmup_losses_are_the_originals_and_padding_counts_nothing():
  labels = RNG.integers(0, C, B)
  w_logits, s_logits = RNG.normal(size=(B, C)) * 2, RNG.normal(size=(B, C)) * 2
  w_logits[0, labels[0]] = -30.0  # p_y below 1e-7: the GCE clamp
  s_logits[0, labels[0]] = -30.0
  clean = np.zeros(B, bool)
  clean[[1, 2, 5, 7]] = True
  hard = np.zeros(B, bool)
  hard[[0, 3, 8]] = True
  for lamd_h in (1.0, 0.2):
    got = disc.supervised_loss(w_logits, s_logits, labels, clean, hard, np.ones(B, bool), lamd_h=lamd_h)
    np.testing.assert_allclose(
      float(got), np_supervised(w_logits, s_logits, labels, clean, hard, 1.0, lamd_h), rtol=1e-6
    )
  none = disc.supervised_loss(w_logits, s_logits, labels, np.zeros(B, bool), np.zeros(B, bool), np.ones(B, bool))
  assert float(none) == 0.0  # the original skips the step
  np.testing.assert_allclose(
    float(disc.warmup_loss(w_logits, s_logits, labels, np.ones(B, bool))),
    np_ce(w_logits, labels) + np_ce(s_logits, labels),
    rtol=1e-6,
  )

  def pad(a):
    return np.concatenate([a, np.ones_like(a[:3])])

  padded = disc.supervised_loss(
    pad(w_logits), pad(s_logits), pad(labels), pad(clean), pad(hard), np.arange(B + 3) < B, lamd_h=0.2
  )
  np.testing.assert_allclose(float(padded), np_supervised(w_logits, s_logits, labels, clean, hard, 1.0, 0.2), rtol=1e-6)


def test_gce_clamp_passes_no_gradient_below_1e_7():
  logits = jnp.array([[-30.0, 0.0, 0.0], [0.5, 0.0, -0.5]])
  grads = jax.grad(lambda z: jnp.sum(disc.gce(z, jnp.array([0, 0]))))(logits)
  assert float(jnp.abs(grads[0]).max()) == 0.0 and float(jnp.abs(grads[1]).max()) > 0.0
  np.testing.assert_allclose(float(disc.gce(logits, jnp.array([0, 0]))[0]), (1 - 1e-7**0.7) / 0.7, rtol=1e-6)
  with pytest.raises(ValueError, match="q"):
    disc.gce(logits, jnp.array([0, 0]), q=0.0)
  with pytest.raises(ValueError, match="momentum"):
    disc.divide(*_inputs(), momentum=1.5)


def test_subset_permutation_permutes_the_masked_rows_uniformly():
  mask = jnp.array([0, 1, 0, 1, 1, 0], bool)
  partners = jax.jit(jax.vmap(lambda k: disc.subset_permutation(k, mask)))(jax.random.split(jax.random.PRNGKey(0), 600))
  partners = np.asarray(partners)
  np.testing.assert_array_equal(partners[:, [0, 2, 5]], np.tile([0, 2, 5], (600, 1)))  # the others stay
  counts = {}
  for row in partners:
    assert sorted(row[[1, 3, 4]]) == [1, 3, 4]  # a permutation of the masked rows
    counts[tuple(row[[1, 3, 4]])] = counts.get(tuple(row[[1, 3, 4]]), 0) + 1
  assert len(counts) == 6 and all(60 < n < 140 for n in counts.values()), counts  # 100 each: binomial sd 9.1


def np_mixup(x, labels, lam, index, num_classes):
  """losses/loss_mixup.py Mixup.forward on the subset x[flags] with a given lam and randperm `index`, in NumPy."""
  y = np.eye(num_classes)[labels]
  return lam * x + (1 - lam) * x[index], lam * y + (1 - lam) * y[index]


def test_mixup_subset_and_loss_equal_the_originals_mixup_on_the_purified_rows():
  x = RNG.normal(size=(B, 3, 3, 2)).astype(np.float32)
  labels = RNG.integers(0, C, B)
  mask = np.zeros(B, bool)
  mask[[0, 3, 4, 8, 11]] = True
  key = jax.random.PRNGKey(7)
  mixed, targets, lam = jax.jit(lambda k: disc.mixup_subset(k, x, labels, mask, num_classes=C, alpha=5.0))(key)
  subset = np.flatnonzero(mask)
  partner = np.asarray(disc.subset_permutation(jax.random.split(key)[1], mask))
  index = np.searchsorted(subset, partner[subset])  # the original's randperm over the subset
  want_x, want_y = np_mixup(x[mask].astype(np.float64), labels[mask], float(lam), index, C)
  np.testing.assert_allclose(np.asarray(mixed)[mask], want_x, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(np.asarray(targets)[mask], want_y, rtol=1e-6, atol=1e-7)
  np.testing.assert_array_equal(np.asarray(mixed)[~mask], x[~mask])  # the other rows as they were
  assert 0.5 <= float(lam) <= 1.0 and sorted(index) == list(range(5)) and list(index) != list(range(5))

  logits = RNG.normal(size=(B, C)) * 2
  z = logits - logits.max(axis=1, keepdims=True)
  log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
  want = -np.mean(np.sum(log_p[mask] * want_y, axis=1))
  got = disc.mixup_loss(jnp.asarray(logits, jnp.float32), targets, mask)
  np.testing.assert_allclose(got, want, rtol=1e-5)
  assert float(disc.mixup_loss(jnp.asarray(logits, jnp.float32), targets, np.zeros(B, bool))) == 0.0


def test_mixup_lambda_is_the_larger_side_of_a_beta_draw():
  lams = np.asarray(
    jax.jit(jax.vmap(lambda k: disc.mixup_lambda(k, 5.0)))(jax.random.split(jax.random.PRNGKey(1), 4000))
  )
  draws = np.random.default_rng(0).beta(5.0, 5.0, 400_000)
  assert lams.min() >= 0.5 and lams.max() <= 1.0
  assert abs(lams.mean() - np.maximum(draws, 1 - draws).mean()) < 0.008  # standard error ~0.0012
  assert float(disc.mixup_lambda(jax.random.PRNGKey(0), 0.0)) == 1.0
  with pytest.raises(ValueError, match="alpha"):
    disc.mixup_lambda(jax.random.PRNGKey(0), -1.0)
