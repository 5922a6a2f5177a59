"""Augmentation on device: crops and flips against NumPy, their distributions, per-example keys, the trainer."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from experiments.configs import ce
from noisy_jax import models
from noisy_jax.core import augment
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import plain_loss
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import optim
from noisy_jax.train import state as state_lib
from noisy_jax.train import views


def _images(shape, seed=0):
  """Strictly positive random images, so a zero in an output can only come from the padding."""
  return jnp.asarray(np.random.default_rng(seed).uniform(0.5, 1.5, size=shape).astype(np.float32))


def numpy_crop(images, offsets, padding):
  """Reference: np.pad with zeros, then slice [top:top+H, left:left+W] for each example."""
  images = np.asarray(images)
  _, h, w, _ = images.shape
  padded = np.pad(images, ((0, 0), (padding, padding), (padding, padding), (0, 0)))
  return np.stack([p[t : t + h, l : l + w] for p, (t, l) in zip(padded, np.asarray(offsets))])


# ---------------------------------------------------------------------------------------------------------------
# Crop


@pytest.mark.parametrize("shape,padding", [((64, 8, 8, 1), 1), ((32, 32, 32, 3), 4), ((16, 5, 7, 2), 3)])
def test_random_crop_equals_numpy_with_the_same_offsets(shape, padding):
  key = jax.random.PRNGKey(3)
  x = _images(shape)
  offsets = augment.crop_offsets(key, shape[0], padding=padding)
  assert offsets.shape == (shape[0], 2) and offsets.dtype == jnp.int32
  got = augment.random_crop(key, x, padding=padding)
  assert got.shape == x.shape and got.dtype == x.dtype
  np.testing.assert_array_equal(np.asarray(got), numpy_crop(x, offsets, padding))


def test_cropped_pixels_are_shifted_input_pixels_or_zero():
  padding, (b, h, w, c) = 3, (200, 6, 5, 2)
  x = np.asarray(_images((b, h, w, c), seed=1))
  key = jax.random.PRNGKey(0)
  out = np.asarray(augment.random_crop(key, jnp.asarray(x), padding=padding))
  offsets = np.asarray(augment.crop_offsets(key, b, padding=padding))
  for img, src, (top, left) in zip(out, x, offsets):
    dy, dx = top - padding, left - padding  # out[i, j] = src[i + dy, j + dx]
    for i in range(h):
      for j in range(w):
        if 0 <= i + dy < h and 0 <= j + dx < w:
          np.testing.assert_array_equal(img[i, j], src[i + dy, j + dx])
        else:
          np.testing.assert_array_equal(img[i, j], 0.0)
    # The number of zero pixels is exactly the part of the window outside the image.
    assert np.sum(img[..., 0] == 0) == h * w - max(h - abs(dy), 0) * max(w - abs(dx), 0)


@pytest.mark.parametrize("draw", ["split_keys", "example_indices"])
def test_crop_offsets_are_uniform_over_all_positions(draw):
  padding, n = 2, 20_000
  key = jax.random.PRNGKey(7)
  if draw == "split_keys":
    offsets = np.asarray(augment.crop_offsets(key, n, padding=padding))
  else:  # the trainer's draws: one fold_in per example index
    offsets, mask = map(np.asarray, augment.example_draws(key, jnp.arange(n), padding=padding))
    assert abs(mask.mean() - 0.5) < 0.02, mask.mean()  # binomial std 0.0035
    assert abs(np.corrcoef(mask, offsets[:, 0])[0, 1]) < 0.05  # flip independent of the crop
  assert offsets.min() == 0 and offsets.max() == 2 * padding
  counts = np.bincount(offsets[:, 0] * (2 * padding + 1) + offsets[:, 1], minlength=(2 * padding + 1) ** 2)
  expected = n / (2 * padding + 1) ** 2
  chi2 = np.sum((counts - expected) ** 2 / expected)
  assert chi2 < 60, (chi2, counts)  # 24 degrees of freedom: P(chi2 > 60) < 1e-4 when uniform
  assert abs(np.corrcoef(offsets[:, 0], offsets[:, 1])[0, 1]) < 0.05  # top and left are drawn independently


def test_centre_offset_and_zero_padding_are_the_identity():
  x = _images((10, 8, 8, 3))
  centre = jnp.full((10, 2), 2, jnp.int32)
  np.testing.assert_array_equal(np.asarray(augment.crop(x, centre, padding=2)), np.asarray(x))
  assert augment.random_crop(jax.random.PRNGKey(0), x, padding=0) is x
  assert augment.augment_batch(jax.random.PRNGKey(0), x, jnp.arange(10), crop_padding=0, flip=False) is x


# ---------------------------------------------------------------------------------------------------------------
# Flip


def test_random_flip_mirrors_about_half_the_examples():
  n = 4000
  x = _images((n, 4, 5, 2))
  key = jax.random.PRNGKey(11)
  mask = np.asarray(augment.flip_mask(key, n))
  out = np.asarray(augment.random_flip(key, x))
  np.testing.assert_array_equal(out[mask], np.flip(np.asarray(x)[mask], axis=2))
  np.testing.assert_array_equal(out[~mask], np.asarray(x)[~mask])
  assert abs(mask.mean() - 0.5) < 0.03, mask.mean()  # binomial std 0.008
  # A flip changes an asymmetric image: the mask really is what happened to each example.
  changed = np.any(out != np.asarray(x), axis=(1, 2, 3))
  np.testing.assert_array_equal(changed, mask)


# ---------------------------------------------------------------------------------------------------------------
# The composition: per-example keys


def test_augment_batch_is_crop_then_flip_with_per_example_keys():
  b, padding = 50, 2
  x = _images((b, 7, 7, 3))
  indices = jnp.asarray(np.random.default_rng(0).permutation(1000)[:b])
  key = jax.random.PRNGKey(5)
  got = np.asarray(augment.augment_batch(key, x, indices, crop_padding=padding, flip=True))
  offsets, mask = map(np.asarray, augment.example_draws(key, indices, padding=padding))
  want = numpy_crop(x, offsets, padding)
  want[mask] = want[mask][:, :, ::-1]
  np.testing.assert_array_equal(got, want)
  # The documented draw, example by example: u = bits(fold_in(key, index), (3,)), offsets = u[:2] mod 2p+1,
  # flip = top bit of u[2].
  for b_ in range(b):
    u = np.asarray(jax.random.bits(jax.random.fold_in(key, int(indices[b_])), (3,), jnp.uint32)).astype(np.int64)
    np.testing.assert_array_equal(offsets[b_], u[:2] % (2 * padding + 1))
    assert mask[b_] == (u[2] >= 2**31)
  assert 0 < mask.sum() < b


def test_augmentation_does_not_depend_on_the_batch_split_or_order():
  b = 64
  x = _images((b, 8, 8, 1))
  indices = jnp.arange(100, 100 + b)
  key = jax.random.PRNGKey(9)
  fn = jax.jit(augment.make_augment(crop_padding=2, flip=True))
  whole = np.asarray(fn(key, x, indices))
  halves = [fn(key, x[s], indices[s]) for s in (slice(0, 24), slice(24, b))]
  np.testing.assert_array_equal(whole, np.concatenate([np.asarray(h) for h in halves]))
  perm = np.random.default_rng(1).permutation(b)
  shuffled = fn(key, x[perm], indices[perm])
  np.testing.assert_array_equal(np.asarray(shuffled), whole[perm])
  # Different examples get different augmentations (not one draw shared by the batch).
  offsets = np.asarray(augment.example_draws(key, indices, padding=2)[0])
  assert len({tuple(o) for o in offsets}) > 10


def test_jit_matches_eager_same_key_same_result_new_key_new_result():
  x = _images((32, 8, 8, 3))
  idx = jnp.arange(32)
  fn = augment.make_augment(crop_padding=2, flip=True)
  eager = np.asarray(fn(jax.random.PRNGKey(0), x, idx))
  jitted = jax.jit(fn)
  np.testing.assert_array_equal(np.asarray(jitted(jax.random.PRNGKey(0), x, idx)), eager)
  np.testing.assert_array_equal(np.asarray(jitted(jax.random.PRNGKey(0), x, idx)), eager)
  assert not np.array_equal(np.asarray(jitted(jax.random.PRNGKey(1), x, idx)), eager)
  # Typed keys (jax.random.key) work too.
  typed = np.asarray(jitted(jax.random.key(0), x, idx))
  assert typed.shape == eager.shape


# ---------------------------------------------------------------------------------------------------------------
# Config and errors


def test_make_augment():
  assert augment.make_augment() is None
  assert augment.make_augment(crop_padding=0, flip=False) is None
  fn = augment.make_augment(crop_padding=4, flip=True)
  assert fn.config == {"crop_padding": 4, "flip": True}


def weak_augment_of(augment_config):
  """The trainer's weak augmentation of a config's augment block, read as a run reads it (experiment.settings)."""
  return views.weak_augment(settings_lib.augment_fields(augment_config))


def test_weak_augment_of_a_config():
  """config.augment, read by experiment.settings.augment_fields for train.views.weak_augment: fields left out take
  make_augment's defaults; `strong` is the strong view's."""
  assert weak_augment_of(None) is None
  assert weak_augment_of({}) is None
  assert settings_lib.augment_fields({}) is None
  assert weak_augment_of(ml_collections.ConfigDict({"crop_padding": 0, "flip": False})) is None
  assert weak_augment_of({"flip": True}).config == {"crop_padding": augment.DEFAULT_CROP_PADDING, "flip": True}
  block = ml_collections.ConfigDict({"crop_padding": 4, "flip": True, "strong": None})
  assert settings_lib.augment_fields(block) == {"crop_padding": 4, "flip": True}
  assert weak_augment_of(block).config == {"crop_padding": 4, "flip": True}
  assert ce.get_config().augment.to_dict() == {"crop_padding": 0, "flip": False}  # off unless configured
  assert weak_augment_of(ce.get_config().augment) is None


@pytest.mark.parametrize(
  "config,match",
  [
    ({"crop_padding": 4, "flip": True, "cutout": 8}, r"cutout.*allowed: 'crop_padding', 'flip'"),
    ({"padding": 4}, r"'padding'.*allowed"),
    ({"crop_padding": -1}, r"padding=-1 must be an int >= 0"),
    ({"crop_padding": 2.5}, r"padding=2.5 must be an int >= 0"),
    ({"crop_padding": True}, r"padding=True must be an int >= 0"),
    ({"flip": "yes"}, r"flip='yes' must be True or False"),
  ],
)
def test_bad_config_raises(config, match):
  with pytest.raises(ValueError, match=match):
    weak_augment_of(config)


def test_bad_values_raise():
  with pytest.raises(ValueError, match=r"padding=-1 must be an int >= 0"):
    augment.make_augment(crop_padding=-1)
  with pytest.raises(ValueError, match=r"flip='yes' must be True or False"):
    augment.make_augment(flip="yes")


def test_bad_inputs_raise():
  with pytest.raises(ValueError, match=r"\[B, H, W, C\].*\(8, 64\)"):
    augment.augment_batch(jax.random.PRNGKey(0), jnp.ones((8, 64)), jnp.arange(8), crop_padding=1, flip=True)
  with pytest.raises(ValueError, match=r"indices has shape \(7,\); expected one index per image, \[8\]"):
    augment.augment_batch(jax.random.PRNGKey(0), jnp.ones((8, 4, 4, 1)), jnp.arange(7), crop_padding=1)
  with pytest.raises(ValueError, match=r"got 3 per-example keys for a batch of 8"):
    augment.random_crop(jax.random.split(jax.random.PRNGKey(0), 3), jnp.ones((8, 4, 4, 1)), padding=1)


# ---------------------------------------------------------------------------------------------------------------
# In the trainer


@pytest.mark.parametrize("mode", ["scan", "steps"])
def test_epoch_program_augments_each_batch_with_the_step_key(mode):
  """The step sees exactly augment_batch(augmentation_key(epoch key, step), images[rows], rows), in both modes."""
  n, batch_size, padding = 40, 16, 1
  images = _images((n, 6, 6, 1))
  seen = []

  def probe(key, x, rows):
    out = augment.augment_batch(key, x, rows, crop_padding=padding, flip=True)
    jax.debug.callback(
      lambda k, r, o: seen.append((np.asarray(k), np.asarray(r), np.asarray(o))), key, rows, out, ordered=False
    )
    return out

  model = models.get("mlp", num_classes=3, hidden_sizes=(8,), bn_axis_name=mesh_lib.AXIS)
  mesh = mesh_lib.make_mesh(1)
  tx = optim.make_optimizer(settings_lib.optimizer_settings(ml_collections.ConfigDict({"learning_rate": 0.1})), 3)
  state = mesh_lib.replicate(state_lib.create_train_state(model, jax.random.PRNGKey(0), (6, 6, 1), tx), mesh)
  table = mesh_lib.replicate(label_table_lib.create(np.arange(n) % 3, 3), mesh)
  epoch_fn = epoch_lib.make_epoch_fn(
    plain_loss.method("cross_entropy"), mesh, batch_size=batch_size, num_examples=n, mode=mode, augment=probe
  )
  epoch_key = jax.random.PRNGKey(21)
  state, table, _ = epoch_fn(state, table, mesh_lib.replicate(images, mesh), epoch_key, jnp.int32(1))
  jax.block_until_ready(state)
  indices, _ = epoch_lib.epoch_batches(epoch_key, n, batch_size)
  assert len(seen) == indices.shape[0] == 3
  seen.sort(key=lambda s: [np.array_equal(s[1], np.asarray(r)) for r in indices].index(True))
  for step, (key, rows, out) in enumerate(seen):
    np.testing.assert_array_equal(rows, np.asarray(indices[step]))
    np.testing.assert_array_equal(key, np.asarray(epoch_lib.augmentation_key(epoch_key, step)))
    want = augment.augment_batch(
      epoch_lib.augmentation_key(epoch_key, step), images[rows], jnp.asarray(rows), crop_padding=padding, flip=True
    )
    np.testing.assert_array_equal(out, np.asarray(want))
  # Steps get different keys, and the augmentation key is not the data-order key.
  assert not np.array_equal(seen[0][0], seen[1][0])
  assert not np.array_equal(seen[0][0], np.asarray(epoch_key))


def _digits_cnn_config(**augment_config):
  config = ce.get_config()
  config.dataset = "digits"
  config.noise.rate = 0.2
  config.num_epochs = 2
  config.batch_size = 128
  config.model = ml_collections.ConfigDict({"name": "small_cnn", "kwargs": {}})
  config.augment.update(augment_config)
  return config


@pytest.fixture(scope="module")
def digits_runs():
  timing = ("seconds", "steps_per_second")
  strip = lambda s: [{k: v for k, v in r.items() if k not in timing} for r in s["history"]]
  augmented = _digits_cnn_config(crop_padding=1, flip=True)
  return {
    "augmented": strip(runs.run_single(augmented)),
    "again": strip(runs.run_single(augmented)),
    "plain": strip(runs.run_single(_digits_cnn_config())),
  }


def test_training_with_augmentation_runs_is_deterministic_and_differs(digits_runs):
  augmented, again, plain = digits_runs["augmented"], digits_runs["again"], digits_runs["plain"]
  assert all(np.isfinite(r["train_loss"]) for r in augmented)
  assert augmented == again  # same config and seed: the same numbers
  assert [r["train_loss"] for r in augmented] != [r["train_loss"] for r in plain]
  # Learns despite the 1-pixel shifts and flips of 8x8 digits (chance is 10%).
  assert augmented[-1]["test_accuracy"] > 0.3, augmented[-1]
