"""The views of a training batch: the weak one (crop and flip) and the strong one of methods that train on two
views of each example (SOP+).

  augment = weak_augment(fit_settings.augment)  # (key, x, rows) -> x, or None (noisy_jax.core.augment)
  strong = make_strong_view(fit_settings.strong_augment, normalize=normalize, weak=augment)
  x_strong = strong(key, codes, rows)          # float [b, H, W, C], the step's key and the batch's rows

A method asks for it with `Method.strong_view`; the trainer then gives its objective the logits of both views
(noisy_jax.train.step). Example i's strong view, from the step's augmentation key k:

  codes_i --policy(fold_in(k, 1))--> uint8 --normalize--> --weak(fold_in(k, 3))--> --Cutout(fold_in(k, 2))--> x_i

the order of SOP's transform_train_aug (policy on the image, RandomCrop(32, 4), RandomHorizontalFlip, ToTensor,
Normalize, CutoutDefault(16); shengliu66/SOP data_loader/data_loaders.py): the crop and flip are the run's
`config.augment` ones (noisy_jax.core.augment) drawn from their own key, and Cutout acts on the normalised image, so
its hole is the normalisation mean, as there. The policies and Cutout are noisy_jax.core.autoaugment's, drawn per
example from (key, row): a view does not depend on the batch's split over devices. The weak view stays what it is
without a strong one (`augment(k, normalize(codes), rows)`).

config.augment.strong (noisy_jax.core.autoaugment.STRONG_AUGMENT_FIELDS): policy 'autoaugment_cifar10' |
'randaugment' | 'disc_randaugment' | 'promix_randaugment' | 'none', num_ops, magnitude, num_magnitude_bins, cutout.
'disc_randaugment' (DISC's pool, noisy_jax.core.disc_randaugment) ends with its own grey CutoutAbs on the uint8 image,
before the crop and flip; its original crops and flips first (experiments/configs/disc_paper.py names the difference).
'promix_randaugment' (ProMix's pool, noisy_jax.core.promix_randaugment) ends with its grey Cutout on the uint8 image
too, before the crop and flip, as its original does.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import jax

from noisy_jax.core import augment as augment_lib
from noisy_jax.core import autoaugment

StrongViewFn = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]  # (key, uint8 codes [b,...], rows [b]) -> x


def make_strong_view(
  fields: Mapping[str, Any] | None, *, normalize: Callable[[jax.Array], jax.Array], weak: Callable | None
) -> StrongViewFn | None:
  """The strong view `view(key, codes uint8 [b, H, W, C], rows [b]) -> float [b, H, W, C]` (module docstring), or
  None when `fields` ask for nothing.

  Args:
    fields: the strong view's fields (FitSettings.strong_augment: autoaugment.strong_parts' fields), or None.
    normalize: codes -> float images, the run's on-device normalisation.
    weak: the run's weak augmentation `(key, x, rows) -> x` (crop and flip; noisy_jax.core.augment.make_augment),
      or None.

  Raises:
    ValueError: from `strong_parts`, naming a bad field or value.
  """
  parts = strong_parts(fields)
  if parts is None:
    return None

  def view(key: jax.Array, codes: jax.Array, rows: jax.Array) -> jax.Array:
    if parts.policy is not None:
      codes = parts.policy(jax.random.fold_in(key, 1), codes, rows)
    x = normalize(codes)
    if weak is not None:
      x = weak(jax.random.fold_in(key, 3), x, rows)
    return autoaugment.random_cutout(jax.random.fold_in(key, 2), x, rows, size=parts.cutout)

  view.config = parts.config
  return view


def weak_augment(fields: Mapping[str, Any] | None) -> augment_lib.AugmentFn | None:
  """The run's weak augmentation (crop and flip): augment.make_augment of `fields` (FitSettings.augment: None, or
  some of crop_padding and flip, the others taking make_augment's defaults); None when it asks for nothing.

  Raises:
    ValueError: make_augment's, on a bad value.
  """
  return augment_lib.make_augment(**dict(fields or {}))


def strong_parts(fields: Mapping[str, Any] | None) -> autoaugment.StrongParts | None:
  """autoaugment.strong_parts of `fields` (FitSettings.strong_augment: None, or some of
  autoaugment.STRONG_AUGMENT_FIELDS, the others taking strong_parts' defaults); None when it asks for nothing.

  Raises:
    ValueError: strong_parts' on a bad value.
  """
  return autoaugment.strong_parts(**dict(fields or {}))
