"""In-memory datasets: the Dataset record, user arrays, stratified splits and normalisation."""

from __future__ import annotations

import dataclasses

import numpy as np

from noisy_jax import _checks

NORMALIZATIONS = ("none", "per_channel", "mean_image")


def _readonly(array: np.ndarray) -> np.ndarray:
  array = np.ascontiguousarray(array)
  array.setflags(write=False)
  return array


@dataclasses.dataclass(frozen=True)
class Dataset:
  """Train / validation / test arrays. Row i of the training split is example i: row i of the label table.

  x_* are float32 [N, H, W, C] images (or [N, D] feature vectors), y_* int32 [N] CLEAN labels; the validation
  split may have 0 rows. Noise is injected by the trainer (noisy_jax.noise), never stored here.
  """
  name: str
  num_classes: int
  x_train: np.ndarray
  y_train: np.ndarray
  x_val: np.ndarray
  y_val: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray

  @property
  def input_shape(self) -> tuple[int, ...]:
    return tuple(self.x_train.shape[1:])

  @property
  def sizes(self) -> dict[str, int]:
    return {"train": len(self.y_train), "val": len(self.y_val), "test": len(self.y_test)}


def stratified_split(labels, fractions_or_counts, *, seed: int) -> list[np.ndarray]:
  """Splits row indices class by class.

  Args:
    labels: [N] class ids.
    fractions_or_counts: per split, either a per-class count (int) or a fraction of each class (float); the last
      split may be None for "the rest".
    seed: fixes the shuffle within each class.

  Returns:
    One sorted index array per split.
  """
  labels = np.asarray(labels)
  rng = np.random.default_rng(seed)
  parts = [[] for _ in fractions_or_counts]
  for c in np.unique(labels):
    rows = rng.permutation(np.flatnonzero(labels == c))
    start = 0
    for i, share in enumerate(fractions_or_counts):
      if share is None:
        take = len(rows) - start
      elif isinstance(share, (int, np.integer)):
        take = int(share)
      else:
        take = int(round(float(share) * len(rows)))
      if start + take > len(rows):
        raise ValueError(f"class {int(c)} has {len(rows)} examples, too few for the requested split "
                         f"{list(fractions_or_counts)!r}.")
      parts[i].append(rows[start:start + take])
      start += take
  return [np.sort(np.concatenate(p)) if p else np.zeros(0, np.int64) for p in parts]


def _as_images(name: str, x) -> np.ndarray:
  x = np.asarray(x)
  if x.ndim == 3:  # [N, H, W] grey images
    x = x[..., None]
  if x.ndim not in (2, 4):
    raise ValueError(f"{name} has shape {x.shape}; expected [N, H, W], [N, H, W, C] or [N, D].")
  if not np.issubdtype(x.dtype, np.number):
    raise ValueError(f"{name} has dtype {x.dtype}; expected numbers.")
  x = x.astype(np.float32)
  if not np.all(np.isfinite(x)):
    raise ValueError(f"{name} holds non-finite values (NaN or inf).")
  return x


def from_arrays(x_train, y_train, x_test, y_test, *, x_val=None, y_val=None, num_classes: int | None = None,
                validation_size: int | float = 0, seed: int = 0, name: str = "arrays") -> Dataset:
  """The user's own NumPy data as a Dataset, so every method runs on it.

  Args:
    x_*: images [N, H, W] / [N, H, W, C] or feature vectors [N, D] (kept as given, in float32; pick the 'mlp'
      model for vectors).
    y_*: [N] integer class ids in [0, num_classes).
    x_val, y_val: an optional validation split. Without one, `validation_size` examples (an int per class, or a
      fraction of each class) are carved from the training split, stratified, with `seed`.
    num_classes: inferred as max label + 1 over all splits when None.
  """
  if (x_val is None) != (y_val is None):
    raise ValueError("give both x_val and y_val, or neither.")
  splits = {"train": (x_train, y_train), "test": (x_test, y_test)}
  if x_val is not None:
    splits["val"] = (x_val, y_val)
  xs, ys = {}, {}
  for split, (x, y) in splits.items():
    xs[split] = _as_images(f"x_{split}", x)
    y = np.asarray(y)
    if y.ndim != 1 or len(y) != len(xs[split]):
      raise ValueError(f"y_{split} has shape {y.shape} but x_{split} has {len(xs[split])} rows; "
                       "labels must be a vector with one id per row.")
    ys[split] = y
  if num_classes is None:
    num_classes = int(max(int(np.max(y)) for y in ys.values() if len(y)) + 1)
  for split in ys:
    ys[split] = _checks.check_labels(f"y_{split}", ys[split], num_classes).astype(np.int32)
  shapes = {split: x.shape[1:] for split, x in xs.items()}
  if len(set(shapes.values())) != 1:
    raise ValueError(f"every split must have the same example shape, got {shapes}.")
  if "val" not in xs:
    if validation_size:
      val_rows, train_rows = stratified_split(ys["train"], [validation_size, None], seed=seed)
      xs["val"], ys["val"] = xs["train"][val_rows], ys["train"][val_rows]
      xs["train"], ys["train"] = xs["train"][train_rows], ys["train"][train_rows]
    else:
      xs["val"] = np.zeros((0, *xs["train"].shape[1:]), np.float32)
      ys["val"] = np.zeros((0,), np.int32)
  return Dataset(name=name, num_classes=int(num_classes),
                 **{f"{k}_{split}": _readonly(v[split]) for k, v in (("x", xs), ("y", ys)) for split in v})


def standardize(dataset: Dataset, mode: str = "per_channel") -> Dataset:
  """Normalises every split with statistics of the TRAINING split only.

  'per_channel': (x - mean_c) / std_c (the GCE port's habit); 'mean_image': x - mean image (the Joint
  Optimization code's habit); 'none': unchanged.
  """
  _checks.check_choice("normalization", mode, NORMALIZATIONS)
  if mode == "none":
    return dataset
  x = dataset.x_train.astype(np.float64)
  if mode == "per_channel":
    axes = tuple(range(x.ndim - 1))
    mean, std = x.mean(axis=axes), x.std(axis=axes)
    std = np.where(std > 0, std, 1.0)
    apply = lambda a: ((a - mean) / std).astype(np.float32)
  else:
    mean_image = x.mean(axis=0)
    apply = lambda a: (a - mean_image).astype(np.float32)
  return dataclasses.replace(dataset, x_train=_readonly(apply(dataset.x_train)),
                             x_val=_readonly(apply(dataset.x_val)), x_test=_readonly(apply(dataset.x_test)))
