"""Data augmentation on device: random crop after zero padding, random horizontal flip (pure, jit-able).

Both papers this library follows train CIFAR with the same two augmentations:
  * Joint Optimization (Tanaka et al., CVPR 2018): subtract the per-pixel mean image, place the 32x32 image in the
    centre of a 40x40 canvas filled with 0 (chainercv `resize_contain`, default fill=0), crop 32x32 at a uniformly
    random position, flip horizontally with probability 1/2 (chainercv `random_crop`, `random_flip(x_random=True)`).
    The canvas is filled AFTER the mean subtraction, so the border is 0 in normalised units: what this module does
    on data standardised with `data.standardize(..., 'mean_image')`. padding=4.
  * Generalized Cross Entropy: the paper states no augmentation; its popular PyTorch port (Truncated-Loss) uses
    torchvision `RandomCrop(32, padding=4)` and `RandomHorizontalFlip()` on the raw image, THEN `Normalize` per
    channel. Its border is therefore raw black, i.e. -mean_c / std_c after normalisation, whereas here (augmenting
    already standardised data, `standardize(..., 'per_channel')`) the border is 0 = the channel mean. A small
    difference in the border value only; the crop offsets and flips have the same distribution.

Normalisation happens once on the host (`noisy_jax.data.standardize`, in `inputs.load_dataset`) before the data is
put on the device; augmentation runs inside the compiled train step on the gathered batch, so zero padding is
padding with the (mean-image or per-channel) mean.

Randomness: `augment_batch` draws each example's crop offset and flip from `fold_in(key, index)`, the example's
integer index in the training set: three random 32-bit words u0, u1, u2 = bits(fold_in(key, index), (3,)) give
top = u0 mod (2p + 1), left = u1 mod (2p + 1) and flip = the top bit of u2 (modulo bias below (2p + 1) / 2^32,
i.e. ~2e-9 for p = 4). The result for an example therefore depends only on (key, index), not on the batch it is in nor
on how the global batch is split over devices: 1 device and N devices augment identically.

Shapes: images are [B, H, W, C] (NHWC, the layout of every model in `noisy_jax.models`); offsets are [B, 2] int32
(top, left) in the padded image, each in [0, 2 * padding]; flip masks are [B] bool.

Implementation: the crop pads the batch once and takes a vmapped `lax.dynamic_slice` per example (XLA lowers it
to one gather of contiguous windows). Measured on this project's shared 2-core CPU for a [128, 32, 32, 3] float32
batch with padding 4: ~190 us, against ~230 us for an index gather with a validity mask and ~1 ms for one-hot
shift matrices (einsum); no Python loop over examples anywhere. One threefry `bits` call of 3 words per example
costs ~40 us for 128 examples, ~5x less than separate randint / bernoulli draws from split keys.
"""

from __future__ import annotations

import numbers
from typing import Callable

import jax
from jax import lax
import jax.numpy as jnp

AUGMENT_FIELDS = ("crop_padding", "flip", "strong")  # strong: a second view's block (noisy_jax.train.views)
DEFAULT_CROP_PADDING = 0  # no crop
DEFAULT_FLIP = False

AugmentFn = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]  # (key, images [B,H,W,C], indices [B]) -> images


def _check_images(images) -> None:
  if images.ndim != 4:
    raise ValueError(
      f"images must be a [B, H, W, C] batch of images, got shape {tuple(images.shape)}; augmentation "
      "needs images (feature vectors [B, D] cannot be cropped or flipped)."
    )


def _check_padding(padding) -> int:
  if isinstance(padding, bool) or not isinstance(padding, numbers.Integral) or padding < 0:
    raise ValueError(f"crop padding={padding!r} must be an int >= 0 (0 = no crop).")
  return int(padding)


def _is_key_batch(key: jax.Array) -> bool:
  """True for one key per example (typed keys [B] or raw uint32 keys [B, 2]), False for a single key."""
  if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
    return key.ndim == 1
  return key.ndim == 2


def _example_keys(key: jax.Array, batch_size: int) -> jax.Array:
  """`key` as one key per example: a single key is split into `batch_size` keys; a batch of keys is kept."""
  if _is_key_batch(key):
    if key.shape[0] != batch_size:
      raise ValueError(f"got {key.shape[0]} per-example keys for a batch of {batch_size} images; they must match.")
    return key
  return jax.random.split(key, batch_size)


def _example_bits(keys: jax.Array, num_words: int) -> jax.Array:
  """uint32 [B, num_words]: `num_words` random 32-bit words from each example's key."""
  return jax.vmap(lambda k: jax.random.bits(k, (num_words,), jnp.uint32))(keys)


def _offsets_from_bits(bits: jax.Array, padding: int) -> jax.Array:
  return (bits % jnp.uint32(2 * padding + 1)).astype(jnp.int32)


def _mask_from_bits(bits: jax.Array) -> jax.Array:
  return (bits >> 31).astype(jnp.bool_)  # the top bit: Bernoulli(1/2)


# ---------------------------------------------------------------------------------------------------------------
# Random crop


def crop_offsets(key: jax.Array, batch_size: int, *, padding: int) -> jax.Array:
  """Per-example crop positions: int32 [B, 2] (top, left), each uniform on {0, ..., 2 * padding}.

  `key` is one key (split into B) or one key per example ([B] typed or [B, 2] raw); with per-example keys,
  example b's offset is bits(key[b], (2,)) mod (2 * padding + 1), a function of key[b] only.
  """
  padding = _check_padding(padding)
  return _offsets_from_bits(_example_bits(_example_keys(key, batch_size), 2), padding)


def crop(images: jax.Array, offsets: jax.Array, *, padding: int) -> jax.Array:
  """Zero-pads `images` [B, H, W, C] by `padding` on each side of H and W, then crops H x W at `offsets` [B, 2].

  out[b, i, j] = images[b, i + top_b - padding, j + left_b - padding] where that pixel exists, else 0. An offset of
  (padding, padding) is the identity. Offsets are clamped into [0, 2 * padding] (lax.dynamic_slice semantics).
  """
  padding = _check_padding(padding)
  _check_images(images)
  if padding == 0:
    return images
  _, h, w, c = images.shape
  padded = jnp.pad(images, ((0, 0), (padding, padding), (padding, padding), (0, 0)))
  zero = jnp.zeros((), offsets.dtype)
  return jax.vmap(lambda x, o: lax.dynamic_slice(x, (o[0], o[1], zero), (h, w, c)))(padded, offsets)


def random_crop(key: jax.Array, images: jax.Array, *, padding: int) -> jax.Array:
  """torchvision `RandomCrop(H, padding=padding)` on a batch [B, H, W, C]: zero pad, crop at a uniform offset.

  Each example gets its own offset (`crop_offsets(key, B, padding=padding)`), uniform over the (2p + 1)^2
  positions. Joint Optimization's 32 -> 40 -> 32 is padding=4.
  """
  _check_images(images)
  if _check_padding(padding) == 0:
    return images
  return crop(images, crop_offsets(key, images.shape[0], padding=padding), padding=padding)


# ---------------------------------------------------------------------------------------------------------------
# Random horizontal flip


def flip_mask(key: jax.Array, batch_size: int) -> jax.Array:
  """Per-example Bernoulli(1/2) draws: bool [B], True = flip (the top bit of bits(key[b], (1,))).

  Keys as in `crop_offsets`.
  """
  return _mask_from_bits(_example_bits(_example_keys(key, batch_size), 1)[:, 0])


def flip_images(images: jax.Array, mask: jax.Array) -> jax.Array:
  """Mirrors the examples where `mask` [B] is True left-right (along W): out[b, i, j] = images[b, i, W - 1 - j]."""
  _check_images(images)
  return jnp.where(mask[:, None, None, None], images[:, :, ::-1, :], images)


def random_flip(key: jax.Array, images: jax.Array) -> jax.Array:
  """torchvision `RandomHorizontalFlip()` on a batch [B, H, W, C]: each example mirrored with probability 1/2."""
  _check_images(images)
  return flip_images(images, flip_mask(key, images.shape[0]))


# ---------------------------------------------------------------------------------------------------------------
# The composition used by the trainer


def example_draws(key: jax.Array, indices: jax.Array, *, padding: int) -> tuple[jax.Array, jax.Array]:
  """(crop offsets int32 [B, 2], flip mask bool [B]) of the examples `indices` [B] under the batch key `key`.

  Example b: u = bits(fold_in(key, indices[b]), (3,)); offsets[b] = u[:2] mod (2 * padding + 1); mask[b] = top bit
  of u[2]. A function of (key, indices[b]) only, never of the example's position in the batch.
  """
  padding = _check_padding(padding)
  bits = _example_bits(jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, indices), 3)
  return _offsets_from_bits(bits[:, :2], padding), _mask_from_bits(bits[:, 2])


def augment_batch(
  key: jax.Array,
  images: jax.Array,
  indices: jax.Array,
  *,
  crop_padding: int = DEFAULT_CROP_PADDING,
  flip: bool = DEFAULT_FLIP,
) -> jax.Array:
  """Random crop (zero padding `crop_padding`) then random horizontal flip, example by example.

  Args:
    key: one PRNG key for the batch (the trainer derives it from the epoch key and the step number).
    images: [B, H, W, C] normalised images (padding fills 0 = the normalisation mean; see the module docstring).
    indices: [B] integer example indices; example b's randomness is `fold_in(key, indices[b])`, so augmenting a
      batch whole or in any split gives the same images.
    crop_padding: int >= 0; 0 = no crop. flip: mirror left-right with probability 1/2.

  Returns:
    [B, H, W, C], same dtype. With crop_padding=0 and flip=False, `images` itself.
  """
  crop_padding = _check_padding(crop_padding)
  _check_images(images)
  if indices.shape != images.shape[:1]:
    raise ValueError(f"indices has shape {tuple(indices.shape)}; expected one index per image, [{images.shape[0]}].")
  if not crop_padding and not flip:
    return images
  offsets, mask = example_draws(key, indices, padding=crop_padding)
  if crop_padding:
    images = crop(images, offsets, padding=crop_padding)
  if flip:
    images = flip_images(images, mask)
  return images


def make_augment(*, crop_padding: int = DEFAULT_CROP_PADDING, flip: bool = DEFAULT_FLIP) -> AugmentFn | None:
  """The trainer's augmentation `augment(key, images [B,H,W,C], indices [B]) -> images`, or None.

  Args:
    crop_padding: int >= 0 (0: no crop); 4 is torchvision RandomCrop(32, padding=4) / JO's 40 -> 32.
    flip: bool: random horizontal flip with probability 1/2.

  A run's config.augment block holds these two fields (and `strong`, the strong view of methods that train on two);
  noisy_jax.train.views.weak_augment reads it. Returns None when nothing is asked (padding 0 without flip):
  training is then exactly the unaugmented program.

  Raises:
    ValueError: a padding that is not an int >= 0, a non-bool flip.
  """
  crop_padding = _check_padding(crop_padding)
  if not isinstance(flip, bool):
    raise ValueError(f"augment flip={flip!r} must be True or False.")
  if not crop_padding and not flip:
    return None

  def augment(key: jax.Array, images: jax.Array, indices: jax.Array) -> jax.Array:
    return augment_batch(key, images, indices, crop_padding=crop_padding, flip=flip)

  augment.config = {"crop_padding": crop_padding, "flip": flip}
  return augment
