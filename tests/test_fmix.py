"""FMix masks: the original NumPy code and the paper's spectrum re-computed, exact counts, sampling, mixing, loss."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from noisy_jax.core import fmix

SHAPES = [(32, 32), (28, 28), (7, 9), (3, 8), (2, 9)]  # (3, 8), (2, 9): the grid is wider (W') than H


# ---------------------------------------------------------------------------------------------------------------
# NumPy references, in float64, following ProMix's utils/fmix.py (2-D, one channel, max_soft = 0)


def _np_grid(h, w):
  """fftfreqnd(h, w): odd widths keep w // 2 + 2 entries of fftfreq(w), even ones w // 2 + 1."""
  keep = w // 2 + 2 if w % 2 == 1 else w // 2 + 1
  return np.sqrt(np.fft.fftfreq(w)[:keep] ** 2 + np.fft.fftfreq(h)[:, None] ** 2)


def _np_image(params, h, w, decay, spectrum):
  """make_low_freq_image with `params` as get_spectrum's np.random.randn draws; returns [1, h, w] in [0, 1]."""
  amplitude = 1.0 / np.maximum(_np_grid(h, w), 1.0 / max(w, h)) ** decay
  spec = amplitude[None, :, :, None] * np.asarray(params, np.float64)  # [1, h, w', 2]
  if spectrum == "original":
    z = spec[:, 0] + 1j * spec[:, 1]  # the original's indexing: grid rows 0 and 1, [1, w', 2]
  else:
    z = spec[..., 0] + 1j * spec[..., 1]  # [1, h, w']
  # The original calls irfftn(z, (h, w)) without axes: the last two axes; NumPy >= 2.0 warns unless they are named.
  img = np.real(np.fft.irfftn(z, (h, w), axes=(-2, -1)))[:1, :h, :w]
  img = img - img.min()
  return img / img.max()


def _np_binarise(image, lam, round_up):
  """binarise_mask with max_soft = 0; `round_up` stands for the original's random.random() > 0.5."""
  flat = np.array(image, np.float64).reshape(-1)
  order = flat.argsort()[::-1]
  num = math.ceil(lam * flat.size) if round_up else math.floor(lam * flat.size)
  flat[order[:num]] = 1
  flat[order[num:]] = 0
  return flat.reshape(np.shape(image))


def _params(h, w, seed):
  """Standard normal spectrum draws [1, h, w', 2] from NumPy (spectrum_params' shape; no compilation per shape)."""
  shape = jax.eval_shape(lambda key: fmix.spectrum_params(key, h, w), jax.random.key(0)).shape
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


# One compiled program per shape and spectrum, not one per primitive (eager dispatch compiles each operation).
_image = jax.jit(fmix.low_frequency_image, static_argnames=("height", "width", "spectrum"))
_binarise = jax.jit(jax.vmap(fmix.binarise, in_axes=(None, 0, 0)))  # masks for several (lam, round_up)


# ---------------------------------------------------------------------------------------------------------------
# Against the NumPy code


@pytest.mark.parametrize("h,w", SHAPES)
def test_frequency_grid_is_fftfreqnd(h, w):
  grid = fmix.frequency_grid(h, w)
  assert grid.shape == (h, w // 2 + (2 if w % 2 else 1))
  np.testing.assert_array_equal(grid, _np_grid(h, w))
  spectrum_shape = jax.eval_shape(lambda key: fmix.spectrum_params(key, h, w), jax.random.key(0)).shape
  assert spectrum_shape == (1, *grid.shape, 2)


@pytest.mark.parametrize("spectrum", ["original", "paper"])
@pytest.mark.parametrize("h,w", SHAPES)
def test_image_and_mask_equal_numpy(h, w, spectrum):
  params = _params(h, w, seed=h * w)
  got = np.asarray(_image(params, height=h, width=w, decay_power=3.0, spectrum=spectrum))
  want = _np_image(params, h, w, 3.0, spectrum)[0]
  assert got.dtype == np.float32 and got.shape == (h, w)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  assert got.min() == 0 and got.max() == 1
  lams = np.float32([0.3, 0.5, 0.77, 0.3, 0.5, 0.77])
  round_ups = np.array([False] * 3 + [True] * 3)
  masks = np.asarray(_binarise(jnp.asarray(got), jnp.asarray(lams), jnp.asarray(round_ups)))
  for mask, lam, round_up in zip(masks, lams, round_ups):
    np.testing.assert_array_equal(mask, _np_binarise(want, float(lam), round_up))  # end to end: float64 image
    np.testing.assert_array_equal(mask, _np_binarise(got, float(lam), round_up))  # the same image


def test_the_two_spectra_differ_and_the_original_varies_slowly_along_the_width():
  params = _params(32, 32, seed=1)
  original = np.asarray(_image(params, height=32, width=32, decay_power=3.0, spectrum="original"))
  paper = np.asarray(_image(params, height=32, width=32, decay_power=3.0, spectrum="paper"))
  assert np.abs(original - paper).max() > 0.1
  # Only the x frequencies 0 and 1 / W reach the original's image: each row is a + b cos(2 pi x / W + phi).
  rows = np.fft.rfft(original, axis=1)
  assert np.abs(rows[:, 2:]).max() < 1e-5 * np.abs(rows[:, :2]).max()
  assert np.abs(np.fft.rfft(paper, axis=1)[:, 2:]).max() > 0.1


def test_decay_power_and_dtype():
  params = _params(28, 28, seed=2)
  for decay in [1.0, 2.5]:
    got = _image(params, height=28, width=28, decay_power=decay, spectrum="original")
    np.testing.assert_allclose(got, _np_image(params, 28, 28, decay, "original")[0], rtol=1e-5, atol=1e-6)
  half = _image(_params(7, 9, seed=0).astype(jnp.bfloat16), height=7, width=9, decay_power=3.0, spectrum="paper")
  assert half.dtype == jnp.bfloat16


def test_constant_image_gives_zeros_not_nan():
  img = _image(jnp.zeros((1, 7, 6, 2)), height=7, width=9, decay_power=3.0, spectrum="paper")
  np.testing.assert_array_equal(img, np.zeros((7, 9)))


# ---------------------------------------------------------------------------------------------------------------
# binarise


@pytest.mark.parametrize("h,w", [(7, 9), (28, 28)])
def test_binarise_counts_exactly_and_keeps_the_largest_pixels(h, w):
  n = h * w
  image = jnp.asarray(np.random.default_rng(n).random((h, w)), jnp.float32)
  # lam = j / n in float32 and its neighbours: lam * n in float32 often rounds onto (or off) an integer there.
  exact = (np.arange(n + 1) / n).astype(np.float32)
  lams = np.concatenate([exact, np.nextafter(exact, np.float32(0)), np.nextafter(exact, np.float32(1))])
  lams = np.concatenate([lams[lams > 1e-30], np.random.default_rng(0).random(500).astype(np.float32)])
  float32_wrong = [np.any(r(lams * np.float32(n)) != r(lams.astype(np.float64) * n)) for r in (np.floor, np.ceil)]
  assert any(float32_wrong)  # lam * n in float32 would miss some counts
  for round_up, rounding in [(False, np.floor), (True, np.ceil)]:
    masks = _binarise(image, jnp.asarray(lams), jnp.full(len(lams), round_up))
    masks = np.asarray(masks).reshape(len(lams), -1)
    assert set(np.unique(masks)) <= {0.0, 1.0}
    np.testing.assert_array_equal(masks.sum(1), rounding(lams.astype(np.float64) * n))
    np.testing.assert_array_equal(masks.astype(np.float64).mean(1), rounding(lams.astype(np.float64) * n) / n)
    flat = np.asarray(image).reshape(-1)
    for mask in masks[:: len(masks) // 50]:
      if 0 < mask.sum() < n:
        assert flat[mask == 1].min() > flat[mask == 0].max()


def test_binarise_takes_traced_lam_and_round_up():
  image = jnp.asarray(np.random.default_rng(1).random((5, 5)), jnp.float32)
  f = jax.jit(fmix.binarise)
  assert float(f(image, jnp.float32(0.5), jnp.bool_(True)).sum()) == 13
  assert float(f(image, jnp.float32(0.5), jnp.bool_(False)).sum()) == 12
  assert float(f(image, jnp.float32(0.0), True).sum()) == 0
  assert float(f(image, jnp.float32(1.0), False).sum()) == 25


# ---------------------------------------------------------------------------------------------------------------
# sample_mask


def test_sample_mask_distribution_and_keys():
  num, h, w = 4000, 6, 7

  def sample_and_parts(key, alpha):  # alpha traced: one compiled program for both alphas below
    k_lam, k_params, k_coin = jax.random.split(key, 3)
    parts = jax.random.beta(k_lam, alpha, alpha), fmix.spectrum_params(k_params, h, w), jax.random.uniform(k_coin)
    return fmix.sample_mask(key, h, w, alpha=alpha), parts

  alphas = np.concatenate([np.ones(num, np.float32), np.full(num // 2, 0.5, np.float32)])
  keys = jax.random.split(jax.random.key(11), len(alphas))
  (lams, masks), (beta_draws, params, coins) = jax.jit(jax.vmap(sample_and_parts))(keys, jnp.asarray(alphas))
  lams, masks = np.asarray(lams), np.asarray(masks)

  # lam, the spectrum and the coin each come from their own third of the split key.
  np.testing.assert_array_equal(lams, beta_draws)
  for i in range(5):
    want = _np_binarise(_np_image(params[i], h, w, 3.0, "paper")[0], float(lams[i]), bool(coins[i] > 0.5))
    np.testing.assert_array_equal(masks[i], want)

  lam, masks = lams[:num], masks[:num]
  assert masks.shape == (num, h, w)
  assert set(np.unique(masks)) == {0.0, 1.0}
  # Beta(1, 1) is uniform on [0, 1]: mean 1/2 (sd of the mean 0.0046), variance 1/12 (its sd ~0.0012).
  assert abs(lam.mean() - 0.5) < 0.02
  assert abs(lam.var() - 1 / 12) < 0.006
  # Beta(1/2, 1/2): variance 1 / (4 (2 alpha + 1)) = 1/8 (its sd ~0.002).
  assert abs(lams[num:].mean() - 0.5) < 0.03
  assert abs(lams[num:].var() - 1 / 8) < 0.01
  sums = masks.reshape(num, -1).sum(1)
  low, high = np.floor(lam.astype(np.float64) * h * w), np.ceil(lam.astype(np.float64) * h * w)
  assert np.all((sums == low) | (sums == high))
  differ = low != high
  assert differ.sum() > 0.99 * num
  assert abs((sums[differ] == high[differ]).mean() - 0.5) < 0.04  # a fair coin: sd 0.008


# ---------------------------------------------------------------------------------------------------------------
# Mixing and the loss


def test_mix_equals_numpy():
  rng = np.random.default_rng(3)
  x = rng.normal(size=(5, 7, 9, 3)).astype(np.float32)
  mask = (rng.random((7, 9)) > 0.4).astype(np.float32)
  partner = np.array([3, 0, 4, 1, 2])
  got = jax.jit(fmix.mix)(jnp.asarray(x), jnp.asarray(mask), jnp.asarray(partner))
  want = mask[None, :, :, None] * x + (1 - mask[None, :, :, None]) * x[partner]
  np.testing.assert_array_equal(got, want)
  # In the original's NCHW layout with a [1, H, W] mask, the same numbers.
  nchw = mask[None] * x.transpose(0, 3, 1, 2) + (1 - mask[None]) * x.transpose(0, 3, 1, 2)[partner]
  np.testing.assert_array_equal(np.asarray(got).transpose(0, 3, 1, 2), nchw)


def test_fmix_loss_per_example_equals_numpy():
  rng = np.random.default_rng(4)
  logits = rng.normal(size=(6, 10)).astype(np.float32) * 3
  labels = rng.integers(0, 10, size=6)
  partner = rng.permutation(6)
  lam = 0.3
  got = jax.jit(fmix.fmix_loss_per_example)(logits, labels, partner, jnp.float32(lam))  # lam traced
  z = logits.astype(np.float64)
  log_p = z - z.max(1, keepdims=True)
  log_p = log_p - np.log(np.exp(log_p).sum(1, keepdims=True))
  rows = np.arange(6)
  want = lam * -log_p[rows, labels] + (1 - lam) * -log_p[rows, labels[partner]]
  assert got.shape == (6,)
  np.testing.assert_allclose(got, want, rtol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# Bad arguments


def test_bad_arguments():
  key = jax.random.key(0)
  params = _params(8, 8, seed=0)
  with pytest.raises(ValueError, match="Unknown spectrum 'fourier'; allowed: 'original', 'paper'"):
    fmix.low_frequency_image(params, 8, 8, spectrum="fourier")
  with pytest.raises(ValueError, match="Unknown spectrum 'fourier'"):
    fmix.sample_mask(key, 8, 8, spectrum="fourier")
  for decay in [0.0, -1.0]:
    with pytest.raises(ValueError, match=rf"decay_power={decay} is outside the allowed range \(0.0, inf\]"):
      fmix.low_frequency_image(params, 8, 8, decay_power=decay)
  for alpha in [0.0, -0.5]:
    with pytest.raises(ValueError, match=rf"alpha={alpha} is outside the allowed range \(0.0, inf\]"):
      fmix.sample_mask(key, 8, 8, alpha=alpha)
  with pytest.raises(ValueError, match="height=1 must be an int >= 2"):
    fmix.sample_mask(key, 1, 8)
  with pytest.raises(ValueError, match="width=1 must be an int >= 2"):
    fmix.frequency_grid(8, 1)
  with pytest.raises(ValueError, match="width=8.0 must be an int >= 2"):
    fmix.spectrum_params(key, 8, 8.0)
  with pytest.raises(ValueError, match=r"params has shape \(1, 8, 5, 2\); a 8 x 9 image needs \(1, 8, 6, 2\)"):
    fmix.low_frequency_image(params, 8, 9)
  with pytest.raises(ValueError, match=r"lam=1.5 is outside the allowed range \[0.0, 1.0\]"):
    fmix.binarise(jnp.zeros((4, 4)), 1.5, True)
  with pytest.raises(ValueError, match=r"image must be \[H, W\]"):
    fmix.binarise(jnp.zeros((1, 4, 4)), 0.5, True)
  with pytest.raises(ValueError, match="too large"):
    fmix.sample_mask(key, 4096, 4096)
  with pytest.raises(ValueError, match=r"x must be \[B, H, W, C\] and mask \[H, W\]"):
    fmix.mix(jnp.zeros((2, 4, 4, 3)), jnp.zeros((4, 5)), jnp.arange(2))


def test_binarise_counts_a_float64_lam_as_the_originals_double_product():
  """In x64 runs lam is a float64, as the original's Python float: num is floor / ceil of its double product."""
  with jax.enable_x64(True):
    image = jnp.asarray(np.random.default_rng(3).random((10, 9)))
    for lam in (0.3, 0.7, 1 / 3, 0.55, 62.99999999999999 / 90):
      for round_up in (False, True):
        expected = math.ceil(lam * 90) if round_up else math.floor(lam * 90)
        mask = fmix.binarise(image, jnp.float64(lam), round_up)
        assert mask.dtype == jnp.float64 and int(mask.sum()) == expected, (lam, round_up)
