"""FMix (Harris et al., 2020, "FMix: Enhancing Mixed Sample Data Augmentation"): masks from low-frequency noise.

FMix mixes two images through a binary mask whose shape is a thresholded random low-frequency image, so the pasted
region is one or a few smooth blobs instead of CutMix's rectangle. For an image of H x W pixels:
  1. Frequency grid (`frequency_grid`): f[i, j] = sqrt(fy_i^2 + fx_j^2) with fy = fftfreq(H) (i / H, then
     (i - H) / H for the upper half) and fx the first W' entries of fftfreq(W), W' = W // 2 + 1 for even W and
     W // 2 + 2 for odd W (the extra entry is the negative frequency -(W // 2) / W).
  2. Spectrum: S[0, i, j, t] = P[0, i, j, t] / max(f[i, j], 1 / max(H, W))^d, with P [1, H, W', 2] standard normal
     (`spectrum_params`; t = 0, 1: the real and imaginary parts) and d the decay power (3).
  3. Image (`low_frequency_image`): the real inverse 2-D FFT of the complex spectrum at size (H, W), min-max
     normalised to [0, 1].
  4. Mask (`binarise`, `sample_mask`): lam ~ Beta(alpha, alpha) (alpha = 1); num = ceil(lam H W) or floor(lam H W)
     (of the exact product), each with probability 1/2; ones at the num largest pixels of the image, zeros elsewhere.
  5. Mixing (`mix`) with a permutation `partner` of the batch: x'_b = m * x_b + (1 - m) * x_partner[b], one mask for
     the whole batch; loss (`fmix_loss_per_example`) lam CE(z_b, y_b) + (1 - lam) CE(z_b, y_partner[b]).

The original code is ProMix's utils/fmix.py (Justherozen/ProMix), a copy of ecs-vlc/FMix's fmix.py: `FMix.__call__`
calls `sample_mask` -> `sample_lam` (scipy.stats.beta.rvs), `make_low_freq_image` (`fftfreqnd`, `get_spectrum`,
np.fft.irfftn) and `binarise_mask` (max_soft = 0, the coin is `random.random() > 0.5`), then mixes NCHW batches with
a [1, H, W] mask over a torch.randperm; `FMix.loss` is `fmix_loss` (cross-entropy means over the batch, of the
argmax of one-hot targets). Here images are NHWC and the loss is per example (the caller takes the mean it wants).

The original's defect, and the two choices of `spectrum`. `make_low_freq_image` forms the complex spectrum as
`spectrum[:, 0] + 1j * spectrum[:, 1]`, which indexes axis 1 of the [1, H, W', 2] array (the grid's rows, the y
frequencies) rather than its last axis: rows 0 and 1 become the real and imaginary parts, giving a complex
[1, W', 2] array Z[0, j, t] = S[0, 0, j, t] + i S[0, 1, j, t]. np.fft.irfftn(Z, (H, W)) transforms its last two axes
and first zero-pads (or crops) them to (H, W // 2 + 1): the grid's column index j becomes the y frequency (the W'
non-negative ones only, cropped when W' > H) and the last axis t becomes the x frequencies 0 and 1 / W. The masks
that result vary along the width with at most one period. The paper means the whole grid: Z[i, j] = S[0, i, j, 0] +
i S[0, i, j, 1], irfftn at (H, W) (for odd W the grid's extra column is cropped away). (The original calls
irfftn(Z, (H, W)) without `axes`, which NumPy >= 2.0 deprecates; it means the last two axes, as reproduced here.)
  * spectrum="paper" (the default): the paper's spectrum.
  * spectrum="original": the code's indexing, reproduced exactly.

The inverse transform is NumPy's irfftn semantics, written out: pad or crop the input to (H, W // 2 + 1), inverse
complex FFT along y, then a real inverse FFT of length W along x, which reads only the real part of the x-frequency 0
column (and of the W / 2 column for even W). Both spectra lack that Hermitian symmetry. NumPy (pocketfft) and XLA's
CPU FFT ignore those imaginary parts, but GPU libraries take complex-to-real input to be Hermitian and may read them
(cuFFT does for some sizes), so they are zeroed here before the 1-D real transform: every backend computes the same.

Randomness: `sample_mask` splits its key three ways, for lam, the spectrum P and the coin. Everything is jnp and
jit-able with static H and W.
"""

from __future__ import annotations

import numbers

import jax
from jax import lax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks

SPECTRA = ("paper", "original")
_MAX_PIXELS = 2**24  # `_count_bounds` forms lam * H * W exactly with 12-bit limbs of H * W


def _check_size(name: str, value) -> int:
  if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 2:
    raise ValueError(f"{name}={value!r} must be an int >= 2.")
  return int(value)


def _check_pixels(height: int, width: int) -> None:
  if height * width >= _MAX_PIXELS:
    raise ValueError(f"a mask of {height} x {width} pixels is too large; at most {_MAX_PIXELS - 1} pixels are allowed.")


def _grid_width(width: int) -> int:
  return width // 2 + 2 if width % 2 else width // 2 + 1


def frequency_grid(height: int, width: int) -> np.ndarray:
  """The 2-D DFT frequency magnitudes f[i, j] = sqrt(fy_i^2 + fx_j^2): float64 [height, W'].

  fy = np.fft.fftfreq(height); fx = the first W' entries of np.fft.fftfreq(width), W' = width // 2 + 1 for even
  width and width // 2 + 2 for odd width (then fx ends with the negative frequency -(width // 2) / width).
  """
  height, width = _check_size("height", height), _check_size("width", width)
  fy = np.fft.fftfreq(height)[:, None]
  fx = np.fft.fftfreq(width)[: _grid_width(width)]
  return np.sqrt(fx * fx + fy * fy)


def spectrum_params(key: jax.Array, height: int, width: int, *, dtype=jnp.float32) -> jax.Array:
  """Standard normal draws P [1, height, W', 2] (W' as in `frequency_grid`): the spectrum before its scaling."""
  height, width = _check_size("height", height), _check_size("width", width)
  return jax.random.normal(key, (1, height, _grid_width(width), 2), dtype)


def _irfft2(z: jax.Array, height: int, width: int) -> jax.Array:
  """np.fft.irfftn(z, s=(height, width), axes=(-2, -1)) for complex z [..., a, b]: real [..., height, width].

  z is cropped or zero-padded to [..., height, width // 2 + 1]; then an inverse complex FFT along axis -2 and a real
  inverse FFT of length `width` along axis -1 that uses only the real parts of columns 0 and width / 2 (even width).
  """
  half = width // 2 + 1
  z = z[..., :height, :half]
  pad = [(0, 0)] * (z.ndim - 2) + [(0, height - z.shape[-2]), (0, half - z.shape[-1])]
  z = jnp.fft.ifft(jnp.pad(z, pad), axis=-2)
  real_columns = np.zeros(half, bool)
  real_columns[0] = True
  real_columns[-1] = width % 2 == 0
  z = jnp.where(real_columns, z.real.astype(z.dtype), z)
  return jnp.fft.irfft(z, n=width, axis=-1)


def low_frequency_image(
  params: jax.Array, height: int, width: int, *, decay_power: float = 3.0, spectrum: str = "paper"
) -> jax.Array:
  """FMix's low-frequency image from spectrum draws: [height, width] in [0, 1], of `params`' dtype.

  S = params / max(f, 1 / max(height, width))^decay_power (f = `frequency_grid`); the image is the real inverse FFT
  of S's complex form at (height, width) (see the module docstring for `spectrum`), then (img - min) / (max - min),
  which is 0 at the minimum and 1 at the maximum as in the original. A constant image (possible only for degenerate
  params, e.g. all zeros) gives zeros instead of 0 / 0.

  Args:
    params: [1, height, W', 2] standard normal draws (`spectrum_params`).
    height: the image's height, an int >= 2.
    width: the image's width, an int >= 2.
    decay_power: d > 0 of the 1 / f^d amplitude decay.
    spectrum: "paper" (the paper's complex spectrum) or "original" (the original code's indexing, exactly).
  """
  height, width = _check_size("height", height), _check_size("width", width)
  _checks.check_range("decay_power", decay_power, 0.0, np.inf, low_open=True)
  _checks.check_choice("spectrum", spectrum, SPECTRA)
  expected = (1, height, _grid_width(width), 2)
  if tuple(params.shape) != expected:
    raise ValueError(f"params has shape {tuple(params.shape)}; a {height} x {width} image needs {expected}.")
  real = jnp.promote_types(params.dtype, jnp.float32)  # XLA's FFTs take float32 and float64 only
  freqs = jnp.asarray(frequency_grid(height, width), real)
  scale = 1.0 / jnp.maximum(freqs, 1.0 / max(height, width)) ** decay_power
  s = scale[None, :, :, None] * params.astype(real)
  if spectrum == "paper":
    image = _irfft2(lax.complex(s[0, ..., 0], s[0, ..., 1]), height, width)
  else:  # rows 0 and 1 of the grid as the real and imaginary parts: [1, W', 2]
    image = _irfft2(lax.complex(s[:, 0], s[:, 1]), height, width)[0]
  image = image - image.min()
  top = image.max()
  # XLA turns the division by a scalar into a product with its reciprocal, which can land one ulp off 1 at the top.
  scaled = jnp.where(image == top, 1, jnp.minimum(image / jnp.where(top > 0, top, 1), 1))
  return jnp.where(top > 0, scaled, 0).astype(params.dtype)


def _count_bounds(lam: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
  """(floor(lam n), ceil(lam n)) as int32, exact for float32 lam in [0, 1] and a static int 0 < n < 2^24.

  The product is what float64 gives for a float32 lam (as the original's Python float), not float32's rounding of
  it, which can land on an integer that lam n is not. lam = m 2^-k with m its 24-bit significand; m n is formed
  in uint32 as hi 2^24 + lo (lo < 2^24) from 12-bit limbs, so floor(lam n) = hi >> (k - 24) (k >= 24 for lam < 1),
  and lam n is an integer when lo and the bits of hi shifted out are all zero. (XLA on the CPU flushes a subnormal
  lam, below 2^-126, to 0 first.)
  """
  lam = jnp.clip(jnp.asarray(lam, jnp.float32), 0.0, 1.0)
  bits = lax.bitcast_convert_type(lam, jnp.uint32)
  biased = bits >> 23
  m = jnp.where(biased > 0, (bits & 0x7FFFFF) | 0x800000, bits)
  k = jnp.where(biased > 0, 150 - biased.astype(jnp.int32), 149)
  m1, m0 = m >> 12, m & 0xFFF
  n1, n0 = n >> 12, n & 0xFFF
  low = m0 * n0
  mid = m1 * n0 + m0 * n1 + (low >> 12)
  hi = m1 * n1 + (mid >> 12)
  lo = ((mid & 0xFFF) << 12) | (low & 0xFFF)
  shift = jnp.clip(k - 24, 0, 31).astype(jnp.uint32)
  floor = (hi >> shift).astype(jnp.int32)
  exact = (lo == 0) & ((hi & ((jnp.uint32(1) << shift) - 1)) == 0)
  floor = jnp.where(lam >= 1, n, floor)
  exact = exact | (lam >= 1)
  return floor, floor + (~exact).astype(jnp.int32)


def binarise(image: jax.Array, lam, round_up) -> jax.Array:
  """Binary mask [H, W] (image's dtype) with ones at the num largest pixels of `image`, zeros elsewhere.

  num = ceil(lam H W) if round_up else floor(lam H W), the product taken exactly for a float32 lam, and in float64 (as
  the original's Python product) for a float64 lam (x64 runs). The pixels
  are ranked in descending order as by the original's `argsort()[::-1]`, here with a stable ascending sort reversed
  (tied pixels last index first). NumPy's default sort is not stable, so tied values at the threshold could be
  chosen differently; ties have probability zero for the continuous images of `low_frequency_image`.

  Args:
    image: [H, W] float image.
    lam: the mask's intended mean, in [0, 1]; may be traced.
    round_up: bool, ceil (True) or floor (False) of lam H W; may be traced.
  """
  if image.ndim != 2:
    raise ValueError(f"image must be [H, W], got shape {tuple(image.shape)}.")
  _checks.check_range("lam", lam, 0.0, 1.0)
  n = image.size
  _check_pixels(*image.shape)
  if jnp.asarray(lam).dtype == jnp.float64:
    product = jnp.asarray(lam) * n
    floor, ceil = jnp.floor(product).astype(jnp.int32), jnp.ceil(product).astype(jnp.int32)
  else:
    floor, ceil = _count_bounds(lam, n)
  num = jnp.where(round_up, ceil, floor)
  order = jnp.argsort(image.reshape(-1))[::-1]
  mask = jnp.zeros(n, image.dtype).at[order].set((jnp.arange(n) < num).astype(image.dtype))
  return mask.reshape(image.shape)


def sample_mask(
  key: jax.Array,
  height: int,
  width: int,
  *,
  alpha: float = 1.0,
  decay_power: float = 3.0,
  spectrum: str = "paper",
  dtype=jnp.float32,
) -> tuple[jax.Array, jax.Array]:
  """(lam, mask [height, width]): one FMix mask, with lam ~ Beta(alpha, alpha) its intended mean.

  key is split three ways: lam = beta(k0, alpha, alpha); params = `spectrum_params(k1, ...)`; round_up =
  uniform(k2) > 0.5. mask = binarise(low_frequency_image(params, ...), lam, round_up).

  Args:
    key: a PRNG key.
    height: the mask's height, an int >= 2.
    width: the mask's width, an int >= 2.
    alpha: > 0, the Beta distribution's two parameters (1: lam uniform on [0, 1]). 0 is refused, not read as
      "no mixing".
    decay_power: d > 0 of the spectrum's 1 / f^d decay.
    spectrum: "paper" or "original" (module docstring).
    dtype: float dtype of lam and the mask.
  """
  height, width = _check_size("height", height), _check_size("width", width)
  _check_pixels(height, width)
  _checks.check_range("alpha", alpha, 0.0, np.inf, low_open=True)
  _checks.check_range("decay_power", decay_power, 0.0, np.inf, low_open=True)
  _checks.check_choice("spectrum", spectrum, SPECTRA)
  k_lam, k_params, k_coin = jax.random.split(key, 3)
  lam = jax.random.beta(k_lam, alpha, alpha, dtype=dtype)
  params = spectrum_params(k_params, height, width, dtype=dtype)
  round_up = jax.random.uniform(k_coin, dtype=dtype) > 0.5
  image = low_frequency_image(params, height, width, decay_power=decay_power, spectrum=spectrum)
  return lam, binarise(image, lam, round_up)


def mix(x: jax.Array, mask: jax.Array, partner: jax.Array) -> jax.Array:
  """x * mask + (1 - mask) * x[partner]: [B, H, W, C], one mask [H, W] for every example and channel.

  Args:
    x: [B, H, W, C] images.
    mask: [H, W] FMix mask (cast to x's dtype).
    partner: int [B], the example whose pixels fill the zeros of the mask (a permutation of the batch).
  """
  if x.ndim != 4 or tuple(mask.shape) != tuple(x.shape[1:3]):
    raise ValueError(f"x must be [B, H, W, C] and mask [H, W]; got {tuple(x.shape)} and {tuple(mask.shape)}.")
  m = mask.astype(x.dtype)[None, :, :, None]
  return x * m + (1 - m) * x[partner]


def fmix_loss_per_example(logits: jax.Array, labels: jax.Array, partner: jax.Array, lam) -> jax.Array:
  """lam CE(logits_b, labels_b) + (1 - lam) CE(logits_b, labels_partner[b]): [B].

  CE(z, y) = -log_softmax(z)_y. The mean over the batch is the original's `fmix_loss`.

  Args:
    logits: [B, K] logits of the mixed images.
    labels: int [B] class ids of the unmixed images.
    partner: int [B], the permutation given to `mix`.
    lam: the mixing weight (sample_mask's lam); may be traced.
  """
  log_p = jax.nn.log_softmax(logits, axis=-1)
  ce = -jnp.take_along_axis(log_p, labels[:, None], axis=-1)[:, 0]
  ce_partner = -jnp.take_along_axis(log_p, labels[partner][:, None], axis=-1)[:, 0]
  return lam * ce + (1 - lam) * ce_partner
