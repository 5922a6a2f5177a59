"""LabelTable against a NumPy re-implementation of record / relabel / weights."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from noisy_jax.core import label_table


class NumpyTable:
  """Reference: the same bookkeeping written with plain NumPy loops."""

  def __init__(self, noisy, num_classes, history_length):
    self.noisy = np.asarray(noisy)
    self.soft = np.eye(num_classes)[self.noisy]
    self.weights = np.ones(len(noisy))
    self.history = np.zeros((history_length, len(noisy), num_classes))
    self.filled = np.zeros(history_length, bool)

  def record(self, indices, probs, slot):
    s = slot % len(self.history)
    for i, p in zip(indices, probs):
      if 0 <= i < len(self.noisy):
        self.history[s, i] = p
    self.filled[s] = True

  def relabel(self, mode):
    if self.filled.any():
      mean = self.history[self.filled].mean(axis=0)
    else:
      mean = self.soft
    if mode == "hard":
      mean = np.eye(self.soft.shape[1])[mean.argmax(axis=1)]
    self.soft = mean


def _random_probs(rng, n, c):
  logits = rng.normal(size=(n, c)) * 3
  e = np.exp(logits - logits.max(axis=1, keepdims=True))
  return e / e.sum(axis=1, keepdims=True)


def test_create_one_hot_and_shapes():
  table = label_table.create(np.array([2, 0, 1, 2]), 3, history_length=5)
  np.testing.assert_array_equal(table.soft_labels, np.eye(3)[[2, 0, 1, 2]])
  np.testing.assert_array_equal(table.weights, np.ones(4))
  assert table.history.shape == (5, 4, 3)
  assert (table.num_examples, table.num_classes, table.history_length) == (4, 3, 5)
  assert table.noisy_labels.dtype == jnp.int32


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_record_and_relabel_match_numpy(mode):
  rng = np.random.default_rng(0)
  n, c, h = 37, 4, 3
  noisy = rng.integers(0, c, n)
  table = label_table.create(noisy, c, history_length=h)
  ref = NumpyTable(noisy, c, h)
  record = jax.jit(label_table.record)
  # Five epochs over a ring of three slots, in shuffled batches of 8 with out-of-range padding rows.
  for epoch in range(1, 6):
    perm = rng.permutation(n)
    perm = np.concatenate([perm, np.full(-n % 8, n)])
    for batch in perm.reshape(-1, 8):
      probs = _random_probs(rng, 8, c)
      table = record(table, jnp.asarray(batch), jnp.asarray(probs, jnp.float32), slot=epoch)
      ref.record(batch, probs, epoch)
    np.testing.assert_allclose(
      label_table.history_mean(table), ref.history[ref.filled].mean(axis=0), rtol=1e-5, atol=1e-6
    )
  np.testing.assert_array_equal(table.history_filled, ref.filled)
  np.testing.assert_allclose(table.history, ref.history, rtol=1e-6, atol=1e-7)
  table = jax.jit(label_table.relabel, static_argnames="mode")(table, mode=mode)
  ref.relabel(mode)
  np.testing.assert_allclose(table.soft_labels, ref.soft, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(label_table.current_labels(table), ref.soft.argmax(axis=1))
  np.testing.assert_array_equal(label_table.changed(table), ref.soft.argmax(axis=1) != noisy)
  # The given labels never change.
  np.testing.assert_array_equal(table.noisy_labels, noisy)


def test_partial_ring_mean_uses_only_filled_slots():
  table = label_table.create(np.array([0, 1]), 2, history_length=4)
  table = label_table.record(table, jnp.array([0, 1]), jnp.array([[0.2, 0.8], [0.6, 0.4]]), slot=7)
  np.testing.assert_allclose(label_table.history_mean(table), [[0.2, 0.8], [0.6, 0.4]], rtol=1e-6)
  table = label_table.record(table, jnp.array([0, 1]), jnp.array([[0.4, 0.6], [1.0, 0.0]]), slot=8)
  np.testing.assert_allclose(label_table.history_mean(table), [[0.3, 0.7], [0.8, 0.2]], rtol=1e-6)


def test_relabel_before_any_record_keeps_labels():
  table = label_table.create(np.array([1, 0, 1]), 2, history_length=2)
  np.testing.assert_array_equal(label_table.relabel(table, mode="soft").soft_labels, table.soft_labels)


def test_targets_and_weights_match_numpy():
  rng = np.random.default_rng(1)
  noisy = rng.integers(0, 5, 20)
  table = label_table.create(noisy, 5)
  idx = np.array([3, 7, 11, 3])
  new_w = np.array([0.0, 0.5, 1.0, 0.0], np.float32)
  table = jax.jit(label_table.set_weights)(table, jnp.asarray(idx), jnp.asarray(new_w))
  ref_w = np.ones(20)
  ref_w[idx] = new_w
  np.testing.assert_allclose(table.weights, ref_w)
  soft, w = jax.jit(label_table.targets)(table, jnp.array([11, 3, 0]))
  np.testing.assert_array_equal(soft, np.eye(5)[noisy[[11, 3, 0]]])
  np.testing.assert_allclose(w, ref_w[[11, 3, 0]])
  # Out-of-range rows are dropped on write.
  dropped = label_table.set_weights(table, jnp.array([20, 25]), jnp.array([0.0, 0.0]))
  np.testing.assert_array_equal(dropped.weights, table.weights)


def test_table_is_a_pytree_and_immutable():
  table = label_table.create(np.array([0, 1, 1]), 2, history_length=1)
  leaves = jax.tree.leaves(table)
  assert len(leaves) == 5
  with pytest.raises(Exception):
    table.weights = jnp.zeros(3)  # frozen dataclass


@pytest.mark.parametrize(
  "kwargs, match",
  [
    (dict(noisy_labels=[0, 3], num_classes=3), "3"),
    (dict(noisy_labels=[-1, 0], num_classes=3), "-1"),
    (dict(noisy_labels=[0, 1], num_classes=3, history_length=-2), "-2"),
  ],
)
def test_create_rejects_bad_input(kwargs, match):
  with pytest.raises(ValueError, match=match):
    label_table.create(**kwargs)


def test_record_needs_history_and_bad_mode():
  table = label_table.create(np.array([0, 1]), 2)
  with pytest.raises(ValueError, match="history_length"):
    label_table.record(table, jnp.array([0]), jnp.array([[0.5, 0.5]]), slot=0)
  with pytest.raises(ValueError, match="'medium'"):
    label_table.relabel(table, mode="medium")


def test_relabel_top_k_matches_numpy():
  rng = np.random.default_rng(3)
  n, c, k = 40, 5, 7
  noisy = rng.integers(0, c, n)
  table = label_table.create(noisy, c, history_length=2)
  probs = [_random_probs(rng, n, c) for _ in range(2)]
  for slot, p in enumerate(probs):
    table = label_table.record(table, jnp.arange(n), jnp.asarray(p, jnp.float32), slot=slot)
  new = jax.jit(label_table.relabel_top_k, static_argnums=1)(table, k)
  # NumPy: cross entropy of the current (one-hot) label under the mean prediction; the k largest go hard.
  mean = (probs[0] + probs[1]) / 2
  disagreement = -np.log(mean[np.arange(n), noisy])
  chosen = np.argsort(-disagreement, kind="stable")[:k]
  expected = np.eye(c)[noisy]
  expected[chosen] = np.eye(c)[mean[chosen].argmax(axis=1)]
  np.testing.assert_allclose(new.soft_labels, expected, atol=1e-6)
  assert int(np.sum(np.any(np.asarray(new.soft_labels) != np.eye(c)[noisy], axis=1))) <= k
  with pytest.raises(ValueError, match=r"k=0 must be an int in \[1, 40\]"):
    label_table.relabel_top_k(table, 0)
