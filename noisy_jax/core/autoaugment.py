"""Strong augmentation on device: AutoAugment's CIFAR-10 policy, RandAugment (N, M) and Cutout, drawn per example.

The policies are torchvision's (`torchvision.transforms.AutoAugment(AutoAugmentPolicy.CIFAR10)`,
`torchvision.transforms.RandAugment`), applied to uint8 batches [B, H, W, C] by `noisy_jax.core.image_ops`, whose
operations equal torchvision's on uint8 tensors (nearest interpolation, fill 0):
  * AutoAugment (Cubuk et al., CVPR 2019): one of the 25 sub-policies uniformly; each of its two operations runs
    when u <= p (u uniform on [0, 1) with 24 bits, as torch.rand; p its probability), with magnitude
    table[bin] from 10 bins, negated with probability 1/2 for the signed operations.
  * RandAugment (Cubuk et al., 2020): num_ops operations, each uniform among 14 (Identity, ShearX, ShearY,
    TranslateX, TranslateY, Rotate, Brightness, Color, Contrast, Sharpness, Posterize, Solarize, AutoContrast,
    Equalize), all with magnitude table[magnitude] from num_magnitude_bins bins (31 by default), signed ones negated
    with probability 1/2.
  * Cutout (DeVries & Taylor, 2017): a square hole of side `size` (16 for CIFAR) at a uniform centre, filled with 0.
The magnitude tables are torchvision's `_augmentation_space` in float32 (its torch.linspace reproduced bit for bit):
shear 0..0.3, translate 0..150/331 of the side (pixels, truncated), rotate 0..30 degrees, brightness / color /
contrast / sharpness 0..0.9 (factor 1 + m), posterize 8 - round(bin / ((bins - 1) / 4)) bits, solarize 255..0 as
v2 gives it (`solarize_thresholds`).

Randomness, as in `noisy_jax.core.augment`: each example's draws are 32-bit words bits(fold_in(key, index), (n,))
of its integer index in the training set, so an image depends on (key, index) only, not on its batch or on how the
batch is split over devices. AutoAugment reads five words: sub-policy = w0 mod 25, u_s = (w_{1+s} >> 8) 2^-24 for
the two stages, sign s = the top bit of w_{3+s}. RandAugment reads 2 num_ops words: op = w_k mod 14, sign = the top
bit of w_{num_ops+k}. Cutout reads two: centre (w0 mod H, w1 mod W). Modulo bias below 25 / 2^32 ~ 6e-9.
The draws are returned by `autoaugment_draws` / `randaugment_draws` (`OpDraws`) and applied by `apply_draws`, so
what was drawn can be inspected and replayed.

Differences from torchvision, knowingly: the random numbers (JAX's threefry per example, not torch's global
generator; the same distributions; a sign is drawn for every stage, used by the signed operations only); as there,
u <= p lets a stage of probability 0 run once in 2^24. Cutout on uint8 images (`make_strong_augment`) leaves a black
hole (0); the trainer's strong view (noisy_jax.train.views) applies it after normalisation, as the originals do after
`Normalize`, where 0 is the mean colour. Otherwise none intended.

`autoaugment_cifar10_tf` reads the same sub-policies (AUTOAUGMENT_CIFAR10_TF: one level differs) with the TF
reference code's level -> magnitude mapping (`tf_magnitude`), the AutoAugment that SOP's code applies through PIL; the
operations are the same image_ops ones, with those magnitudes. They equal SOP's PIL calls except (tests/
test_autoaugment.py): Brightness, Color, Contrast, Sharpness and AutoContrast within one level (PIL rounds,
torchvision's uint8 arithmetic truncates); Rotate and Shear at nearest-pixel ties, where PIL's fixed-point source
position (steps of 2^-16 px) and the float32 one fall on either side of a pixel boundary they lie within ~1e-3 px of
(on 64 x 64 images: 0-2 pixels of 4,096 per Rotate level, and 91 at shear level 4, 0.12, whose rows land exactly on
boundaries; none at the other levels).

Implementation: the stages run in a `lax.scan` of `image_ops.apply_op`, which computes every operation on the whole
batch and keeps, for each example, the one it drew (no Python loop over examples; its cost is that of all the
operations together).
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import disc_randaugment as disc_pool
from noisy_jax.core import image_ops
from noisy_jax.core import promix_randaugment as promix_pool

STRONG_AUGMENT_FIELDS = ("policy", "num_ops", "magnitude", "num_magnitude_bins", "cutout")
DEFAULT_POLICY = "none"
DEFAULT_CUTOUT = 0  # no Cutout
# RandAugment's N, M and bins when not given (torchvision's RandAugment defaults).
RANDAUGMENT_NUM_OPS = 2
RANDAUGMENT_MAGNITUDE = 9
RANDAUGMENT_NUM_BINS = 31
POLICIES = (
  "autoaugment_cifar10",
  "autoaugment_cifar10_tf",
  "randaugment",
  "disc_randaugment",
  "promix_randaugment",
  "none",
)

AugmentFn = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]  # (key, images [B,H,W,C], indices [B]) -> images

# torchvision's AutoAugmentPolicy.CIFAR10: 25 sub-policies of two (operation, probability, magnitude bin) stages.
AUTOAUGMENT_CIFAR10 = (
  (("Invert", 0.1, None), ("Contrast", 0.2, 6)),
  (("Rotate", 0.7, 2), ("TranslateX", 0.3, 9)),
  (("Sharpness", 0.8, 1), ("Sharpness", 0.9, 3)),
  (("ShearY", 0.5, 8), ("TranslateY", 0.7, 9)),
  (("AutoContrast", 0.5, None), ("Equalize", 0.9, None)),
  (("ShearY", 0.2, 7), ("Posterize", 0.3, 7)),
  (("Color", 0.4, 3), ("Brightness", 0.6, 7)),
  (("Sharpness", 0.3, 9), ("Brightness", 0.7, 9)),
  (("Equalize", 0.6, None), ("Equalize", 0.5, None)),
  (("Contrast", 0.6, 7), ("Sharpness", 0.6, 5)),
  (("Color", 0.7, 7), ("TranslateX", 0.5, 8)),
  (("Equalize", 0.3, None), ("AutoContrast", 0.4, None)),
  (("TranslateY", 0.4, 3), ("Sharpness", 0.2, 6)),
  (("Brightness", 0.9, 6), ("Color", 0.2, 8)),
  (("Solarize", 0.5, 2), ("Invert", 0.0, None)),
  (("Equalize", 0.2, None), ("AutoContrast", 0.6, None)),
  (("Equalize", 0.2, None), ("Equalize", 0.6, None)),
  (("Color", 0.9, 9), ("Equalize", 0.6, None)),
  (("AutoContrast", 0.8, None), ("Solarize", 0.2, 8)),
  (("Brightness", 0.1, 3), ("Color", 0.7, 0)),
  (("Solarize", 0.4, 5), ("AutoContrast", 0.9, None)),
  (("TranslateY", 0.9, 9), ("TranslateY", 0.7, 9)),
  (("AutoContrast", 0.9, None), ("Solarize", 0.8, 3)),
  (("Equalize", 0.8, None), ("Invert", 0.1, None)),
  (("TranslateY", 0.7, 9), ("AutoContrast", 0.9, None)),
)
AUTOAUGMENT_NUM_BINS = 10
# The same 25 sub-policies as SOP's code gives them (shengliu66/SOP data_loader/augmentation_archive.py,
# autoaug_paper_cifar10): (operation, probability, level 0..9), read with the TF reference mapping (`tf_magnitude`).
# It differs from torchvision's table in one level only: sub-policy 14's Color is level 6 there, bin 8 here. Its
# TranslateXAbs / TranslateYAbs / Posterize2 are TranslateX / TranslateY / Posterize with the mapping's values.
AUTOAUGMENT_CIFAR10_TF = tuple(
  tuple((op, p, 0 if b is None else (6 if (i, op) == (13, "Color") else b)) for op, p, b in stages)
  for i, stages in enumerate(AUTOAUGMENT_CIFAR10)
)
RANDAUGMENT_OPS = image_ops.OP_NAMES[:14]  # torchvision's RandAugment: all but Invert, in its order


class OpDraws(NamedTuple):
  """What a policy drew for a batch; S = the number of stages (2 for AutoAugment, num_ops for RandAugment).

  op_ids: int32 [B, S], indices into image_ops.OP_NAMES. magnitudes: float32 [B, S], the signed magnitude each stage
  passes to its operation (0 for operations without one). applied: bool [B, S], whether the stage runs. negated:
  bool [B, S], the sign draw (negates the magnitude of signed operations). sub_policy: int32 [B] (AutoAugment) or
  None (RandAugment).
  """

  op_ids: jax.Array
  magnitudes: jax.Array
  applied: jax.Array
  negated: jax.Array
  sub_policy: jax.Array | None


# ---------------------------------------------------------------------------------------------------------------
# Magnitude tables


def _torch_linspace_float32(start: float, end: float, steps: int) -> np.ndarray:
  """torch.linspace(start, end, steps) in float32, bit for bit: step = (end - start) / (steps - 1) in float32, then
  fma(step, i, start) for the first half and fma(-step, steps - 1 - i, end) for the rest (float64 holds the fma)."""
  start32, end32 = np.float32(start), np.float32(end)
  step = np.float64(np.float32((end32 - start32) / np.float32(max(steps - 1, 1))))
  i = np.arange(steps, dtype=np.float64)
  first = step * i + np.float64(start32)
  second = np.float64(end32) - step * (steps - 1 - i)
  return np.where(i < steps // 2, first, second).astype(np.float32)


def solarize_thresholds(num_bins: int) -> np.ndarray:
  """float32 [num_bins]: Solarize's thresholds as torchvision v2 applies them to uint8 tensors, RN32(255 x l_k) with
  l = torch.linspace(1, 0, num_bins) in float32 and the product in float64 (`_apply_image_or_video_transform`:
  `bound * magnitude`; the tensor comparison then rounds it to float32).

  v1's table, torch.linspace(255, 0, num_bins), differs at 31 bins: 119, 102 and 51 (bins 16, 18 and 24) where v2
  gives 119.00001, 102.00001 and 51.000004, so v2 leaves those levels unsolarized there and v1 does not. v2 on a PIL
  image compares the float64 product (PIL's lookup table keeps i < threshold), and so also leaves 170 and 85 at
  AutoAugment's bins 3 and 6 (170.0000051, 85.0000025) where its tensor path, v1 and this table solarize them.
  """
  return np.float32(255.0 * _torch_linspace_float32(1.0, 0.0, num_bins).astype(np.float64))


def magnitude_table(num_bins: int, image_size: tuple[int, int]) -> dict[str, tuple[np.ndarray | None, bool]]:
  """torchvision's `_augmentation_space(num_bins, (H, W))`: op -> (float32 magnitudes [num_bins] or None, signed).

  The same table serves AutoAugment (10 bins) and RandAugment (31 by default); Invert (AutoAugment only) and
  Identity take no magnitude.
  """
  height, width = image_size
  linspace = lambda end, start=0.0: _torch_linspace_float32(start, end, num_bins)
  bins = np.arange(num_bins).astype(np.float32)
  posterize_bits = 8 - np.round(bins / np.float32((num_bins - 1) / 4))
  return {
    "Identity": (None, False),
    "ShearX": (linspace(0.3), True),
    "ShearY": (linspace(0.3), True),
    "TranslateX": (linspace(150.0 / 331.0 * width), True),
    "TranslateY": (linspace(150.0 / 331.0 * height), True),
    "Rotate": (linspace(30.0), True),
    "Brightness": (linspace(0.9), True),
    "Color": (linspace(0.9), True),
    "Contrast": (linspace(0.9), True),
    "Sharpness": (linspace(0.9), True),
    "Posterize": (posterize_bits.astype(np.float32), False),
    "Solarize": (solarize_thresholds(num_bins), False),
    "AutoContrast": (None, False),
    "Equalize": (None, False),
    "Invert": (None, False),
  }


def tf_magnitude(op: str, level: int) -> tuple[float, bool]:
  """(the magnitude image_ops.apply_op takes, signed) of `op` at AutoAugment level 0..9 under the TF reference
  mapping, as SOP's code applies it (augmentation_archive.autoaug2arsaug, then augmentations.py's PIL operations):

    ShearX/Y 0.3 L / 10 and Rotate int(30 L / 10) degrees, both with a random sign;
    TranslateX/Y L pixels (its ...Abs operations: 0..10 pixels, not a fraction of the side), random sign;
    Brightness / Color / Contrast / Sharpness: the factor 0.1 + 1.8 L / 10, never negated (apply_op's magnitude is
      factor - 1); so levels below 5 weaken the image and Color at level 0 almost greys it;
    Posterize: 4 - int(4 L / 10) bits (Posterize2); Solarize: threshold 256 - int(256 L / 10);
    AutoContrast, Equalize, Invert: no magnitude.
  torchvision rescaled every one of these (`magnitude_table`): e.g. Posterize at level 7 keeps 2 bits here, 5 there.
  """
  float_parameter = level * 1.0 / 10  # the TF code's float_parameter(level, 1) and int_parameter(level, maxval)
  if op in ("ShearX", "ShearY"):
    return 0.3 * float_parameter, True
  if op == "Rotate":
    return float(int(level * 30 / 10)), True
  if op in ("TranslateX", "TranslateY"):
    return float(int(level * 10 / 10)), True
  if op in ("Brightness", "Color", "Contrast", "Sharpness"):
    return 1.8 * float_parameter + 0.1 - 1.0, False
  if op == "Posterize":
    return float(4 - int(level * 4 / 10)), False
  if op == "Solarize":
    return float(256 - int(level * 256 / 10)), False
  if op in ("AutoContrast", "Equalize", "Invert", "Identity"):
    return 0.0, False
  raise ValueError(f"tf_magnitude: unknown operation {op!r}; known: {', '.join(image_ops.OP_NAMES)}.")


# ---------------------------------------------------------------------------------------------------------------
# Draws


def _example_bits(key: jax.Array, indices: jax.Array, num_words: int) -> jax.Array:
  """uint32 [B, num_words]: bits(fold_in(key, indices[b]), (num_words,)) for each example."""
  indices = jnp.asarray(indices)
  return jax.vmap(lambda index: jax.random.bits(jax.random.fold_in(key, index), (num_words,), jnp.uint32))(indices)


def _top_bit(words: jax.Array) -> jax.Array:
  return (words >> 31).astype(jnp.bool_)


def _check_size(image_size) -> tuple[int, int]:
  if len(image_size) != 2 or any(
    isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 1 for s in image_size
  ):
    raise ValueError(f"image_size={image_size!r} must be (height, width), two ints >= 1.")
  return int(image_size[0]), int(image_size[1])


MAPPINGS = ("torchvision", "tf")


def autoaugment_draws(
  key: jax.Array,
  indices: jax.Array,
  *,
  image_size: tuple[int, int],
  policy=AUTOAUGMENT_CIFAR10,
  mapping: str = "torchvision",
) -> OpDraws:
  """AutoAugment's choices for the examples `indices` [B] under `key`: sub-policy, stages run, signed magnitudes.

  Example b: sub_policy = w0 mod P; stage s runs when (w_{1+s} >> 8) 2^-24 <= p_s (float32 p, as torchvision's
  `probs[i] <= p`); its magnitude is table[bin_s] (10 bins, `magnitude_table`; mapping 'tf': `tf_magnitude` of the
  level), negated when the top bit of w_{3+s} is set and the operation is signed (torchvision: when its sign draw
  is 0; the same probability 1/2).

  Args:
    key: the batch's PRNG key.
    indices: int [B], example indices in the training set.
    image_size: (H, W), for the translation magnitudes (150/331 of the side).
    policy: sub-policies as AUTOAUGMENT_CIFAR10 (default): ((op, probability, bin or None), ...) per sub-policy.
    mapping: 'torchvision' (bins of `magnitude_table`) or 'tf' (levels read by `tf_magnitude`).
  Returns:
    OpDraws with S = 2 and sub_policy [B].
  """
  if mapping not in MAPPINGS:
    raise ValueError(f"mapping={mapping!r} must be one of {', '.join(map(repr, MAPPINGS))}.")
  table = magnitude_table(AUTOAUGMENT_NUM_BINS, _check_size(image_size))
  if mapping == "tf":
    value_of = lambda op, level: tf_magnitude(op, level)  # noqa: E731
  else:
    value_of = lambda op, b: (0.0 if b is None else table[op][0][b], table[op][1])  # noqa: E731
  op_table = np.array([[image_ops.OP_INDEX[op] for op, _, _ in stages] for stages in policy], np.int32)
  probability_table = np.array([[p for _, p, _ in stages] for stages in policy], np.float32)
  magnitude_values = np.array([[value_of(op, b)[0] for op, _, b in stages] for stages in policy], np.float32)
  signed_table = np.array([[value_of(op, b)[1] for op, _, b in stages] for stages in policy], np.bool_)
  words = _example_bits(key, indices, 5)
  sub_policy = (words[:, 0] % np.uint32(len(policy))).astype(jnp.int32)
  uniform = (words[:, 1:3] >> 8).astype(jnp.float32) * np.float32(2.0**-24)
  negated = _top_bit(words[:, 3:5])
  magnitudes = jnp.asarray(magnitude_values)[sub_policy]
  magnitudes = jnp.where(negated & jnp.asarray(signed_table)[sub_policy], -magnitudes, magnitudes)
  return OpDraws(
    op_ids=jnp.asarray(op_table)[sub_policy],
    magnitudes=magnitudes,
    applied=uniform <= jnp.asarray(probability_table)[sub_policy],
    negated=negated,
    sub_policy=sub_policy,
  )


def _check_randaugment(num_ops, magnitude, num_magnitude_bins) -> None:
  for name, value, low in (("num_ops", num_ops, 0), ("num_magnitude_bins", num_magnitude_bins, 2)):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
      raise ValueError(f"randaugment {name}={value!r} must be an int >= {low}.")
  if (
    isinstance(magnitude, bool)
    or not isinstance(magnitude, numbers.Integral)
    or not 0 <= magnitude < num_magnitude_bins
  ):
    raise ValueError(
      f"randaugment magnitude={magnitude!r} must be an int bin in [0, {num_magnitude_bins - 1}] "
      f"(num_magnitude_bins={num_magnitude_bins})."
    )


def randaugment_draws(
  key: jax.Array,
  indices: jax.Array,
  *,
  image_size: tuple[int, int],
  num_ops: int,
  magnitude: int,
  num_magnitude_bins: int = RANDAUGMENT_NUM_BINS,
) -> OpDraws:
  """RandAugment's choices for the examples `indices` [B] under `key`: num_ops operations, each uniform among 14.

  Example b, stage k: op = RANDAUGMENT_OPS[w_k mod 14], magnitude table[magnitude] of `num_magnitude_bins` bins
  (0 for Identity, AutoContrast, Equalize), negated when the top bit of w_{num_ops + k} is set and the operation is
  signed. Every stage runs (applied is all True).

  Args:
    key: the batch's PRNG key.
    indices: int [B], example indices in the training set.
    image_size: (H, W), for the translation magnitudes.
    num_ops: N, operations per image (int >= 0). magnitude: M, the bin (int in [0, num_magnitude_bins - 1]).
    num_magnitude_bins: number of bins of the tables (torchvision's default 31).
  Returns:
    OpDraws with S = num_ops and sub_policy None.
  """
  _check_randaugment(num_ops, magnitude, num_magnitude_bins)
  table = magnitude_table(num_magnitude_bins, _check_size(image_size))
  op_table = np.array([image_ops.OP_INDEX[op] for op in RANDAUGMENT_OPS], np.int32)
  magnitude_values = np.array([0.0 if table[op][0] is None else table[op][0][magnitude] for op in RANDAUGMENT_OPS])
  signed_table = np.array([table[op][1] for op in RANDAUGMENT_OPS], np.bool_)
  words = _example_bits(key, indices, 2 * num_ops)
  choice = (words[:, :num_ops] % np.uint32(len(RANDAUGMENT_OPS))).astype(jnp.int32)
  negated = _top_bit(words[:, num_ops:])
  magnitudes = jnp.asarray(magnitude_values.astype(np.float32))[choice]
  return OpDraws(
    op_ids=jnp.asarray(op_table)[choice],
    magnitudes=jnp.where(negated & jnp.asarray(signed_table)[choice], -magnitudes, magnitudes),
    applied=jnp.ones(choice.shape, jnp.bool_),
    negated=negated,
    sub_policy=None,
  )


def apply_draws(images: jax.Array, draws: OpDraws) -> jax.Array:
  """Applies the drawn stages in order: images <- image_ops.apply_op(images, op, magnitude) where applied.

  The stages run in a `lax.scan`, so the program holds one copy of `apply_op` whatever the number of stages.
  """
  if draws.op_ids.shape[1] == 0:
    return images
  op_ids = jnp.where(draws.applied, draws.op_ids, image_ops.OP_INDEX["Identity"])

  def stage(images, op_ids_and_magnitudes):
    return image_ops.apply_op(images, *op_ids_and_magnitudes), None

  return jax.lax.scan(stage, images, (op_ids.T, draws.magnitudes.T))[0]


def _check_batch(images, indices) -> None:
  if images.ndim != 4:
    raise ValueError(f"images must be a [B, H, W, C] batch, got shape {tuple(images.shape)}.")
  if tuple(jnp.shape(indices)) != tuple(images.shape[:1]):
    raise ValueError(
      f"indices has shape {tuple(jnp.shape(indices))}; expected one index per image, [{images.shape[0]}]."
    )


def autoaugment(
  key: jax.Array, images: jax.Array, indices: jax.Array, *, policy=AUTOAUGMENT_CIFAR10, mapping: str = "torchvision"
) -> jax.Array:
  """AutoAugment (default: torchvision's CIFAR-10 policy) on uint8 images [B, H, W, C], drawn per example.

  Args:
    key: the batch's PRNG key. images: uint8 [B, H, W, C], C = 1 or 3. indices: int [B] example indices.
    policy: the sub-policies (AUTOAUGMENT_CIFAR10; AUTOAUGMENT_CIFAR10_TF with mapping 'tf').
    mapping: how a stage's level becomes its magnitude (`autoaugment_draws`).
  Returns:
    uint8 [B, H, W, C].
  """
  _check_batch(images, indices)
  draws = autoaugment_draws(key, indices, image_size=images.shape[1:3], policy=policy, mapping=mapping)
  return apply_draws(images, draws)


def randaugment(
  key: jax.Array,
  images: jax.Array,
  indices: jax.Array,
  *,
  num_ops: int = RANDAUGMENT_NUM_OPS,
  magnitude: int = RANDAUGMENT_MAGNITUDE,
  num_magnitude_bins: int = RANDAUGMENT_NUM_BINS,
) -> jax.Array:
  """RandAugment(num_ops, magnitude, num_magnitude_bins) as torchvision's, on uint8 images [B, H, W, C].

  Args:
    key: the batch's PRNG key. images: uint8 [B, H, W, C]. indices: int [B] example indices.
    num_ops: N (torchvision's default 2). magnitude: M, a bin index (default 9).
    num_magnitude_bins: bins of the magnitude tables (default 31).
  """
  _check_batch(images, indices)
  size = images.shape[1:3]
  draws = randaugment_draws(
    key, indices, image_size=size, num_ops=num_ops, magnitude=magnitude, num_magnitude_bins=num_magnitude_bins
  )
  return apply_draws(images, draws)


def cutout_centers(key: jax.Array, indices: jax.Array, *, image_size: tuple[int, int]) -> jax.Array:
  """int32 [B, 2]: each example's hole centre (w0 mod H, w1 mod W), uniform over the pixels as np.random.randint."""
  height, width = _check_size(image_size)
  words = _example_bits(key, indices, 2)
  return (words % np.array([height, width], np.uint32)).astype(jnp.int32)


def random_cutout(key: jax.Array, images: jax.Array, indices: jax.Array, *, size: int) -> jax.Array:
  """Cutout(size) (DeVries & Taylor 2017): one square hole of side `size`, uniform centre, clipped, filled with 0.

  On uint8 images the hole is black; on normalised float images (how the originals apply it, after Normalize) 0 is
  the normalisation mean.
  """
  _check_batch(images, indices)
  size = _check_cutout(size)
  if size == 0:
    return images
  centers = cutout_centers(key, indices, image_size=images.shape[1:3])
  if images.dtype == jnp.uint8:
    return image_ops.cutout(images, centers, size)
  hole = image_ops.cutout_hole(images.shape[1], images.shape[2], centers, size)
  return jnp.where(hole, jnp.zeros((), images.dtype), images)


def _check_cutout(size) -> int:
  if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 0:
    raise ValueError(f"cutout={size!r} must be an int >= 0 (the side of the hole; 0 = no Cutout).")
  return int(size)


# ---------------------------------------------------------------------------------------------------------------
# The strong view from its fields (a run's config.augment.strong, read by noisy_jax.train.views)


class StrongParts(NamedTuple):
  """The parts of a strong view: `policy(key, uint8 images, indices) -> uint8 images` (None: no policy) and the
  Cutout side (0: none); `config` is the fields that were used, with defaults filled in."""

  policy: AugmentFn | None
  cutout: int
  config: dict


def _policy_settings(policy: str, num_ops, magnitude, num_magnitude_bins) -> tuple:
  """(num_ops, magnitude, num_magnitude_bins) of a strong policy: None replaced by the policy's default, checked
  where the policy reads them."""
  if policy == "disc_randaugment":  # RandAugmentwogeo's n and m (disc_randaugment.py), CIFAR-10's defaults
    num_ops = disc_pool.NUM_OPS if num_ops is None else num_ops
    magnitude = disc_pool.MAGNITUDE if magnitude is None else magnitude
    disc_pool._check_pool(num_ops, magnitude)
  elif policy == "promix_randaugment":  # RandomAugment's n (promix_randaugment.py; its m is never read)
    num_ops = promix_pool._check_num_ops(promix_pool.NUM_OPS if num_ops is None else num_ops)
  else:
    num_ops = RANDAUGMENT_NUM_OPS if num_ops is None else num_ops
    magnitude = RANDAUGMENT_MAGNITUDE if magnitude is None else magnitude
  num_magnitude_bins = RANDAUGMENT_NUM_BINS if num_magnitude_bins is None else num_magnitude_bins
  if policy == "randaugment":
    _check_randaugment(num_ops, magnitude, num_magnitude_bins)
  return num_ops, magnitude, num_magnitude_bins


def _policy_fn(policy: str, num_ops, magnitude, num_magnitude_bins) -> tuple[AugmentFn | None, dict]:
  """(`policy(key, uint8 images, indices) -> uint8 images` of a strong policy (None for 'none'), the fields it
  reads besides the policy's name)."""
  if policy == "autoaugment_cifar10":
    return autoaugment, {}
  if policy == "autoaugment_cifar10_tf":

    def policy_fn(key, images, indices):
      return autoaugment(key, images, indices, policy=AUTOAUGMENT_CIFAR10_TF, mapping="tf")

    return policy_fn, {}
  if policy == "randaugment":

    def policy_fn(key, images, indices):
      return randaugment(
        key, images, indices, num_ops=num_ops, magnitude=magnitude, num_magnitude_bins=num_magnitude_bins
      )

    return policy_fn, {"num_ops": num_ops, "magnitude": magnitude, "num_magnitude_bins": num_magnitude_bins}
  if policy == "disc_randaugment":

    def policy_fn(key, images, indices):
      return disc_pool.disc_randaugment(key, images, indices, num_ops=num_ops, magnitude=magnitude)

    return policy_fn, {"num_ops": num_ops, "magnitude": magnitude}
  if policy == "promix_randaugment":

    def policy_fn(key, images, indices):
      return promix_pool.promix_randaugment(key, images, indices, num_ops=num_ops)

    return policy_fn, {"num_ops": num_ops}
  return None, {}


def strong_parts(
  *,
  policy: str = DEFAULT_POLICY,
  num_ops: int | None = None,
  magnitude: int | None = None,
  num_magnitude_bins: int | None = None,
  cutout: int = DEFAULT_CUTOUT,
) -> StrongParts | None:
  """The parts of a strong view, checked (the fields are `make_strong_augment`'s; None for num_ops, magnitude and
  num_magnitude_bins: the policy's own default); None when nothing is asked.

  Raises:
    ValueError: an unknown policy (listing the allowed ones), a value of the wrong type or range.
  """
  if policy not in POLICIES:
    raise ValueError(f"Unknown strong augment policy={policy!r}; allowed: {', '.join(map(repr, POLICIES))}.")
  num_ops, magnitude, num_magnitude_bins = _policy_settings(policy, num_ops, magnitude, num_magnitude_bins)
  size = _check_cutout(cutout)
  if policy == "none" and size == 0:
    return None
  policy_fn, policy_fields = _policy_fn(policy, num_ops, magnitude, num_magnitude_bins)
  return StrongParts(policy_fn, size, {"policy": policy, "cutout": size, **policy_fields})


def make_strong_augment(**fields: Any) -> AugmentFn | None:
  """The strong view `augment(key, images uint8 [B,H,W,C], indices [B]) -> uint8 images` of `fields`, or None.

  fields (keyword arguments, each optional; `strong_parts` holds their defaults):
    policy: "autoaugment_cifar10" (torchvision's AutoAugment CIFAR-10 policy), "autoaugment_cifar10_tf" (the
      same sub-policies with the TF reference code's magnitudes, as SOP+'s code applies them: `tf_magnitude`),
      "randaugment", "disc_randaugment" (DISC's own pool and its CutoutAbs: noisy_jax.core.disc_randaugment),
      "promix_randaugment" (ProMix's own pool and its grey Cutout: noisy_jax.core.promix_randaugment) or "none"
      (default "none");
    num_ops, magnitude, num_magnitude_bins: RandAugment's N, M and bins (defaults 2, 9, 31; read by randaugment
      only); for disc_randaugment its n and m (defaults 2, 5: levels 1..m-1); for promix_randaugment its n
      (default 3);
    cutout: the side of a Cutout hole applied after the policy (int >= 0, default 0 = none; 16 for CIFAR).
  The policy draws from fold_in(key, 1) and Cutout from fold_in(key, 2), so a weak view drawn from `key` itself
  (noisy_jax.core.augment) is independent of the strong one. Returns None when nothing is asked. (The
  trainer composes the same parts with normalisation and the weak crop and flip: noisy_jax.train.views.)

  Raises:
    TypeError: an unknown field.
    ValueError: an unknown policy (listing the allowed ones), a value of the wrong type or range.
  """
  parts = strong_parts(**fields)
  if parts is None:
    return None

  def augment(key: jax.Array, images: jax.Array, indices: jax.Array) -> jax.Array:
    if parts.policy is not None:
      images = parts.policy(jax.random.fold_in(key, 1), images, indices)
    return random_cutout(jax.random.fold_in(key, 2), images, indices, size=parts.cutout)

  augment.config = parts.config
  return augment
