"""In-memory datasets: the Dataset record, user arrays, stratified splits and standardisation (NumPy only)."""

from __future__ import annotations

import dataclasses
import numbers
from typing import Sequence

import numpy as np

from noisy_jax.core import _checks
from noisy_jax.data import bad_files
from noisy_jax.data import image_files
from noisy_jax.data import normalization as normalization_lib

STANDARDIZE_MODES = ("none", "per_channel", "mean_image")


def _inputs(x):
  """One split's inputs as stored: a split on disk (image_files.ImageFiles) as it is, uint8 codes read-only as
  uint8, anything else read-only float32."""
  if isinstance(x, image_files.ImageFiles):
    return x
  x = np.asarray(x)
  return _readonly(x, np.uint8 if x.dtype == np.uint8 else np.float32)


def _readonly(array, dtype) -> np.ndarray:
  """A read-only C-contiguous view of `array` as `dtype` (copied only when the dtype or layout differs)."""
  view = np.ascontiguousarray(array, dtype=dtype).view()
  view.setflags(write=False)
  return view


def _sources(name: str, sources, num_rows: int) -> np.ndarray:
  """Checks one split's sources: a 1-D sequence of `num_rows` strings; returns them as a read-only str array."""
  array = np.asarray(sources)
  if array.dtype == object and all(isinstance(s, str) for s in array.ravel()):
    array = array.astype(str)
  if array.ndim != 1 or len(array) != num_rows or (array.size and array.dtype.kind != "U"):
    raise ValueError(
      f"{name} must hold one string per row of the split: expected [{num_rows}] strings, got "
      f"shape {array.shape} of dtype {array.dtype}."
    )
  return _readonly(array, array.dtype if array.size else str)


def _checked_split(split: str, x, y, train_shape: tuple) -> tuple:
  """(inputs, int32 labels) of one split of a Dataset, read-only; ValueError unless there is one label per row and
  the example shape is that of the training inputs (train_shape: x_train's shape)."""
  x = _inputs(x)
  y = _readonly(y, np.int32)
  if y.ndim != 1 or len(y) != len(x):
    raise ValueError(f"y_{split} has shape {y.shape} but x_{split} has {len(x)} rows; expected [{len(x)}].")
  if x.shape[1:] != train_shape[1:]:
    raise ValueError(f"x_{split} has example shape {x.shape[1:]} but x_train has {train_shape[1:]}; they must match.")
  return x, y


def _checked_noisy_labels(noisy_labels, num_classes: int, num_rows: int, split: str = "train") -> np.ndarray:
  """A Dataset's noisy_y_SPLIT, read-only int32; ValueError unless they are class ids, one per row of the split."""
  name = f"noisy_y_{split}"
  noisy = _checks.check_labels(name, noisy_labels, num_classes)
  if len(noisy) != num_rows:
    what = {"train": "training", "val": "validation"}[split]
    raise ValueError(f"{name} has {len(noisy)} labels but the {what} split has {num_rows} rows; expected [{num_rows}].")
  return _readonly(noisy, np.int32)


def _checked_class_names(class_names, num_classes: int) -> tuple[str, ...]:
  """A Dataset's class_names as a tuple; ValueError unless they are num_classes distinct strings."""
  names = tuple(class_names)
  if len(names) != num_classes or not all(isinstance(n, str) for n in names):
    raise ValueError(f"class_names={names!r} must be {num_classes} strings (one per class).")
  if len(set(names)) != len(names):
    raise ValueError(f"class_names={names!r} holds a name twice; every class needs its own name.")
  return names


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Dataset:
  """Train / validation / test splits of one classification dataset, held in memory.

  The training example with integer index i is row i: `x_train[i]`, `y_train[i]` and row i of the label table
  (noisy_jax.core.label_table) all describe the same example; the trainer's batches carry these indices.

  Attributes:
    name: the registry name (or the user's name for `from_arrays` data).
    num_classes: C; every label is in [0, C).
    x_train, x_val, x_test: images [N, H, W, Ch] or feature vectors [N, D] (from `from_arrays`), as stored:
      uint8 pixel codes (the image is x / pixel_max), float32 values, or, for data read from files that is not
      loaded, an image_files.ImageFiles (decoded on demand; the trainer loads or streams it).
    y_train, y_val, y_test: int32 [N] CLEAN labels. Label noise is injected by the trainer (noisy_jax.core.noise),
      never stored here, except:
    noisy_y_train: None, or int32 [N_train] labels given by the dataset itself for the training rows (real human
      noise: CIFAR-10N / CIFAR-100N, noisy_jax.data.tfds_data); row i describes training example i. The trainer
      uses them with noise type 'dataset' (noisy_jax.data.inputs.noisy_training_labels).
    noisy_y_val: None, or int32 [N_val]: the dataset's own labels of the validation rows, as noisy_y_train (CIFAR-N's
      human labels of the rows carved for validation); model selection on noisy labels reads them
      (noisy_jax.data.inputs.noisy_validation_labels).
    class_names: None, or C names: class id c is called class_names[c] (datasets read from disk,
      noisy_jax.data.disk; the trainer writes them to WORKDIR/classes.json).
    train_sources, val_sources, test_sources: None, or str [N_split]: where row i of the split came from, e.g.
      'train/cat/001.png' (a path relative to the image folder or CSV manifest) or 'npz:x_train[17]' (a record id),
      so per-example results can be traced back to files.
    val_carved_from_train: True when the validation rows are training rows held out (`from_arrays`'
      validation_size): examples given with the training data, labels as given, never trained on; val_sources then
      names their training files. False for a validation split given as such (ROOT/val, x_val, a dataset's own).
    pixel_max: the code of full intensity: the inputs in [0, 1] are x / pixel_max (255 for uint8 images, 16 for
      scikit-learn's digits, 1 for float inputs). The trainer normalises on the device
      (noisy_jax.data.normalization), so images stay uint8 in host and device memory.
    normalized: None, or the `standardize` mode already applied on the host (the trainer then normalises no
      further).
    skipped_files: the files left out of the splits because they could not be decoded (bad_files.Skipped, with
      on_bad_file='skip' of a dataset of files: `load`, `drop_bad_files`); their rows are gone.
  The validation split may have 0 rows. Every array is a read-only NumPy array (C-contiguous), so a Dataset can
  be cached and shared safely. The optional fields default to None, which is what every built-in dataset has.
  """

  name: str
  num_classes: int
  x_train: np.ndarray
  y_train: np.ndarray
  x_val: np.ndarray
  y_val: np.ndarray
  x_test: np.ndarray
  y_test: np.ndarray
  noisy_y_train: np.ndarray | None = None
  noisy_y_val: np.ndarray | None = None
  class_names: tuple[str, ...] | None = None
  train_sources: np.ndarray | None = None
  val_sources: np.ndarray | None = None
  test_sources: np.ndarray | None = None
  val_carved_from_train: bool = False
  pixel_max: float = 1.0
  normalized: str | None = None
  skipped_files: tuple[bad_files.Skipped, ...] = ()

  def __post_init__(self):
    if not (isinstance(self.pixel_max, numbers.Real) and self.pixel_max > 0):
      raise ValueError(f"pixel_max={self.pixel_max!r} must be a positive number (255 for uint8 images).")
    object.__setattr__(self, "pixel_max", float(self.pixel_max))
    for split in ("train", "val", "test"):
      x, y = _checked_split(split, getattr(self, f"x_{split}"), getattr(self, f"y_{split}"), np.shape(self.x_train))
      object.__setattr__(self, f"x_{split}", x)
      object.__setattr__(self, f"y_{split}", y)
    for split in ("train", "val"):
      given = getattr(self, f"noisy_y_{split}")
      if given is not None:
        noisy = _checked_noisy_labels(given, self.num_classes, len(getattr(self, f"y_{split}")), split)
        object.__setattr__(self, f"noisy_y_{split}", noisy)
    if self.class_names is not None:
      object.__setattr__(self, "class_names", _checked_class_names(self.class_names, self.num_classes))
    for split in ("train", "val", "test"):
      sources = getattr(self, f"{split}_sources")
      if sources is not None:
        object.__setattr__(
          self, f"{split}_sources", _sources(f"{split}_sources", sources, len(getattr(self, f"y_{split}")))
        )

  @property
  def input_shape(self) -> tuple[int, ...]:
    """Shape of one example, e.g. (28, 28, 1) for mnist5k or (D,) for feature vectors."""
    return tuple(self.x_train.shape[1:])

  @property
  def on_disk(self) -> bool:
    """True when the training inputs are files decoded on demand (image_files.ImageFiles), not arrays."""
    return isinstance(self.x_train, image_files.ImageFiles)

  def load(self, splits=("train", "val", "test")) -> "Dataset":
    """This dataset with its `splits` that are on disk decoded into uint8 arrays (itself when none is).

    A split with on_bad_file='skip' loses the rows of its files that cannot be decoded (`without_rows`).
    """
    loaded, failed = {}, {}
    for split in splits:
      x = getattr(self, f"x_{split}")
      if not isinstance(x, image_files.ImageFiles):
        continue
      if x.skips:
        loaded[f"x_{split}"], failed[split] = x.load_skipping()
      else:
        loaded[f"x_{split}"] = x.load()
    if not loaded:
      return self
    return dataclasses.replace(self, **loaded).without_rows(failed, self.skipped_rows(failed))

  def drop_bad_files(self, splits=("train", "val", "test")) -> "Dataset":
    """This dataset without the rows of the files that cannot be decoded in its `splits` left on disk with
    on_bad_file='skip' (each file decoded once, the split stays on disk); itself when there are none."""
    failed = {}
    for split in splits:
      x = getattr(self, f"x_{split}")
      if isinstance(x, image_files.ImageFiles) and x.skips:
        failed[split] = x.find_bad()
    return self.without_rows(failed, self.skipped_rows(failed))

  def skipped_rows(
    self, failed: dict[str, dict[int, str]], max_bad_fraction: float | None = None
  ) -> tuple[bad_files.Skipped, ...]:
    """skipped_files plus the rows of `failed` ({split: {row: error message}}) as bad_files.Skipped (named by the
    split's sources, else by the file's path), checked by bad_files.check_fraction against `max_bad_fraction`
    (None: the failed splits' ImageFiles' own) of all the files of the dataset: its rows and those skipped before
    (ValueError naming the files)."""
    skipped, fractions = list(self.skipped_files), []
    for split, rows in failed.items():
      x, sources = getattr(self, f"x_{split}"), getattr(self, f"{split}_sources")
      skipped += [
        bad_files.Skipped(split, str(sources[i]) if sources is not None else x.paths[i], error)
        for i, error in sorted(rows.items())
      ]
      fractions.append(x.max_bad_fraction if max_bad_fraction is None else max_bad_fraction)
    if fractions:
      num_files = sum(self.sizes.values()) + len(self.skipped_files)
      bad_files.check_fraction(skipped, num_files, min(fractions))
    return tuple(skipped)

  def without_rows(self, failed: dict[str, dict[int, str]], skipped: tuple) -> "Dataset":
    """This dataset without the rows of `failed` ({split: {row: ...}}: inputs, labels, noisy labels, sources),
    its skipped_files `skipped` (`skipped_rows`); itself when no row fails."""
    if not any(failed.values()):
      return self
    changes = {"skipped_files": skipped}
    for split, rows in failed.items():
      if not rows:
        continue
      keep = np.setdiff1d(np.arange(len(getattr(self, f"y_{split}"))), np.fromiter(rows, np.int64))
      changes[f"x_{split}"] = getattr(self, f"x_{split}")[keep]
      changes[f"y_{split}"] = getattr(self, f"y_{split}")[keep]
      sources = getattr(self, f"{split}_sources")
      if sources is not None:
        changes[f"{split}_sources"] = sources[keep]
      noisy = getattr(self, f"noisy_y_{split}", None)
      if noisy is not None:
        changes[f"noisy_y_{split}"] = noisy[keep]
    return dataclasses.replace(self, **changes)

  @property
  def num_train(self) -> int:
    return len(self.y_train)

  @property
  def num_val(self) -> int:
    return len(self.y_val)

  @property
  def num_test(self) -> int:
    return len(self.y_test)

  @property
  def sizes(self) -> dict[str, int]:
    """Rows per split: {'train': N_train, 'val': N_val, 'test': N_test}."""
    return {"train": self.num_train, "val": self.num_val, "test": self.num_test}

  def __repr__(self) -> str:
    return (
      f"Dataset(name={self.name!r}, num_classes={self.num_classes}, input_shape={self.input_shape}, sizes={self.sizes})"
    )


def _largest_remainder(total: int, weights: np.ndarray) -> np.ndarray:
  """Integer counts summing to `total`, proportional to `weights` (Hamilton's largest-remainder rounding).

  Ties in the remainder go to the lower index. Assumes 0 <= total <= sum(weights) for integer weights, so no
  count exceeds its weight.
  """
  weights = np.asarray(weights, np.int64)
  if total == 0 or weights.sum() == 0:
    return np.zeros_like(weights)
  ideal = total * weights / weights.sum()
  counts = np.floor(ideal).astype(np.int64)
  order = np.argsort(-(ideal - counts), kind="stable")
  counts[order[: total - counts.sum()]] += 1
  return counts


def _split_totals(sizes: Sequence, num_examples: int) -> list[int]:
  """Turns each split size (int count, float fraction or None for the rest) into a number of examples."""
  if sum(size is None for size in sizes) > 1:
    raise ValueError(f"sizes={list(sizes)!r}: at most one split may be None ('the rest').")
  totals = []
  for size in sizes:
    if size is None:
      totals.append(None)
    elif isinstance(size, numbers.Integral) and not isinstance(size, bool):
      _checks.check_range("split size", int(size), 0, num_examples)
      totals.append(int(size))
    elif isinstance(size, numbers.Real) and not isinstance(size, bool):
      _checks.check_range("split fraction", float(size), 0.0, 1.0)
      totals.append(int(round(float(size) * num_examples)))
    else:
      raise ValueError(f"split size {size!r} must be an int count, a float fraction in [0, 1] or None.")
  known = sum(t for t in totals if t is not None)
  if known > num_examples:
    raise ValueError(f"sizes={list(sizes)!r} ask for {known} examples but there are only {num_examples}.")
  return [num_examples - known if t is None else t for t in totals]


def stratified_split(labels, sizes: Sequence[int | float | None], *, seed: int) -> list[np.ndarray]:
  """Splits example indices into disjoint parts that keep each class's share.

  Each split's size is an int (a number of examples), a float in [0, 1] (a fraction of all N examples, rounded to
  the nearest integer) or None (every example the other splits leave; at most one None). Splits are filled in
  order: split s takes its total from the examples still unassigned, divided over the classes in proportion to
  their unassigned counts by largest-remainder rounding (ties to the lower class id). So per-class counts are
  exact whenever the proportions are integers (500 per class split as (3600, 400, None) gives exactly
  360 / 40 / 100 per class) and otherwise within one of the ideal share, and every split's total is exact.
  Within each class the examples are drawn uniformly at random with `seed`.

  Args:
    labels: [N] integer class ids.
    sizes: one entry per split, as above.
    seed: seed of the NumPy generator that shuffles each class.

  Returns:
    One int64 index array per split, sorted ascending (a split keeps the source order).
  """
  labels = np.asarray(labels)
  if labels.ndim != 1:
    raise ValueError(f"labels must be a 1-D vector of class ids, got shape {labels.shape}.")
  totals = _split_totals(sizes, len(labels))
  rng = np.random.default_rng(seed)
  classes = np.unique(labels)
  shuffled = [rng.permutation(np.flatnonzero(labels == c)) for c in classes]
  used = np.zeros(len(classes), np.int64)
  parts = []
  for total in totals:
    remaining = np.array([len(rows) for rows in shuffled]) - used
    counts = _largest_remainder(total, remaining)
    parts.append(
      np.sort(np.concatenate([rows[u : u + k] for rows, u, k in zip(shuffled, used, counts)] + [np.zeros(0, np.int64)]))
    )
    used += counts
  return parts


def _features(name: str, x) -> np.ndarray:
  """Checks one split's inputs: uint8 [N, H, W, C] (from [N, H, W]) kept as uint8, other numbers converted to
  float32 [N, H, W, C] or [N, D]; a split on disk (image_files.ImageFiles) as it is."""
  if isinstance(x, image_files.ImageFiles):
    return x
  x = np.asarray(x)
  if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
    raise ValueError(f"{name} has dtype {x.dtype}; expected numbers.")
  if x.ndim == 3:  # [N, H, W] single-channel images
    x = x[..., None]
  if x.ndim not in (2, 4):
    raise ValueError(f"{name} has shape {x.shape}; expected [N, H, W], [N, H, W, C] or [N, D].")
  if x.dtype == np.uint8:
    return x
  x = x.astype(np.float32)
  bad = ~np.isfinite(x)
  if bad.any():
    row = int(np.argwhere(bad)[0][0])
    raise ValueError(f"{name} holds a non-finite value ({x[bad][0]}) in row {row}; every value must be finite.")
  return x


def _labels(name: str, y, num_rows: int) -> np.ndarray:
  y = np.asarray(y)
  if y.ndim != 1 or len(y) != num_rows:
    raise ValueError(f"{name} has shape {y.shape} but its inputs have {num_rows} rows; expected [{num_rows}].")
  if y.size and not np.issubdtype(y.dtype, np.number):
    raise ValueError(f"{name} has dtype {y.dtype}; expected integer class ids.")
  return y


def _check_split_arguments(x_val, y_val, x_test, y_test, *, validation_size, val_sources) -> None:
  """ValueError unless from_arrays' optional splits come in (x, y) pairs, a validation split is given or carved (not
  both), and val_sources goes with x_val."""
  if (x_val is None) != (y_val is None):
    raise ValueError(
      f"x_val and y_val must be given together (or neither); got only {'x_val' if y_val is None else 'y_val'}."
    )
  if x_val is not None and validation_size:
    raise ValueError(
      f"validation_size={validation_size!r} carves a validation split from the training data, "
      "but x_val/y_val were given too: pass one or the other."
    )
  if val_sources is not None and x_val is None:
    raise ValueError("val_sources describes the rows of x_val, but x_val was not given.")
  if (x_test is None) != (y_test is None):
    raise ValueError(
      "x_test and y_test must be given together (or neither, for no test split); got only "
      f"{'x_test' if y_test is None else 'y_test'}."
    )


def _checked_arrays(x_train, y_train, x_test, y_test, x_val, y_val) -> tuple[dict, dict]:
  """({split: inputs}, {split: labels}) of from_arrays' splits ('val' only when given; no test split: an empty one
  shaped like the training inputs); ValueError for an empty training split or example shapes that differ."""
  if x_test is None:  # no test split: an empty one shaped like the training inputs
    x_test, y_test = np.asarray(x_train)[:0], np.zeros((0,), np.int64)
  splits = {"train": (x_train, y_train), "test": (x_test, y_test)}
  if x_val is not None:
    splits["val"] = (x_val, y_val)
  xs = {split: _features(f"x_{split}", x) for split, (x, _) in splits.items()}
  ys = {split: _labels(f"y_{split}", y, len(xs[split])) for split, (_, y) in splits.items()}
  if not len(ys["train"]):
    raise ValueError("x_train has 0 rows; the training split needs at least one example.")
  for split, x in xs.items():
    if x.shape[1:] != xs["train"].shape[1:]:
      raise ValueError(
        f"x_{split} has example shape {x.shape[1:]} but x_train has {xs['train'].shape[1:]}; "
        "every split must have the same example shape."
      )
  return xs, ys


def _num_classes(num_classes, ys: dict) -> int:
  """num_classes, checked (an integer >= 1), or when None the largest label over all splits + 1."""
  if num_classes is None:  # negative labels are reported by check_labels below
    num_classes = max(int(max(np.max(y) for y in ys.values() if len(y))) + 1, 1)
  if not isinstance(num_classes, numbers.Integral) or num_classes < 1:
    raise ValueError(f"num_classes={num_classes!r} must be an integer >= 1.")
  return num_classes


def _carve_validation(xs: dict, ys: dict, train_sources, validation_size, seed: int):
  """(xs, ys, train_sources, val_sources) with a stratified validation split of `validation_size` carved from the
  training split (`stratified_split`; the remaining training rows keep their order, the sources follow their
  rows)."""
  num_train = len(ys["train"])
  if isinstance(validation_size, numbers.Integral):
    _checks.check_range("validation_size", validation_size, 0, num_train - 1)
  else:
    _checks.check_range("validation_size", validation_size, 0.0, 1.0, high_open=True)
  val_rows, train_rows = stratified_split(ys["train"], [validation_size, None], seed=seed)
  val_sources = None
  if train_sources is not None:
    train_sources = _sources("train_sources", train_sources, len(ys["train"]))
    train_sources, val_sources = train_sources[train_rows], train_sources[val_rows]
  xs = {**xs, "val": xs["train"][val_rows], "train": xs["train"][train_rows]}
  ys = {**ys, "val": ys["train"][val_rows], "train": ys["train"][train_rows]}
  return xs, ys, train_sources, val_sources


def from_arrays(
  x_train,
  y_train,
  x_test,
  y_test,
  *,
  x_val=None,
  y_val=None,
  num_classes: int | None = None,
  validation_size: int | float = 0,
  seed: int = 0,
  name: str = "arrays",
  class_names: Sequence[str] | None = None,
  train_sources=None,
  val_sources=None,
  test_sources=None,
  pixel_max: float = 1.0,
) -> Dataset:
  """Wraps the user's own NumPy arrays as a Dataset, so every model, method and metric runs on them.

  Args:
    x_train, x_test, x_val: inputs of each split (x_test, y_test may be None: no test split, an empty one):
      images [N, H, W] (stored as [N, H, W, 1]), [N, H, W, C], or feature vectors [N, D] (stored as [N, D]: use the
      'mlp' model; the CNNs need images). uint8 arrays stay uint8 (pixel codes; see pixel_max), others are cast to
      float32; nothing is rescaled; every value must be finite and every split must have the same example shape.
    y_train, y_test, y_val: [N] integer class ids in [0, num_classes) (integral floats are accepted).
    x_val, y_val: an optional validation split (both or neither).
    num_classes: C; inferred as (largest label over all splits) + 1 when None.
    validation_size: without x_val, carve a stratified validation split from the training data: an int is a
      number of examples, a float in (0, 1) a fraction of the training split (see `stratified_split`). 0 (the
      default) gives an empty validation split. The remaining training rows keep their order; a non-empty carved
      split sets Dataset.val_carved_from_train.
    seed: seed of the validation carving.
    name: the Dataset's name.
    class_names, train_sources, val_sources, test_sources: optional, see `Dataset` (one string per row of the
      split as given: a carved validation split takes its rows' training sources; val_sources goes with x_val).
    pixel_max: the value of full intensity (Dataset.pixel_max): 255 for uint8 images that the trainer should see
      in [0, 1], 1 (the default) to take the values as they are.

  Returns:
    A Dataset with read-only uint8 or float32 inputs and int32 labels.

  Raises:
    ValueError: naming the bad value for mismatched lengths or shapes, labels outside [0, C) or not integers,
      non-finite inputs, a validation_size out of range or given together with x_val.
  """
  _check_split_arguments(x_val, y_val, x_test, y_test, validation_size=validation_size, val_sources=val_sources)
  xs, ys = _checked_arrays(x_train, y_train, x_test, y_test, x_val, y_val)
  num_classes = _num_classes(num_classes, ys)
  ys = {split: _checks.check_labels(f"y_{split}", y, num_classes) for split, y in ys.items()}

  if x_val is None:
    xs, ys, train_sources, val_sources = _carve_validation(xs, ys, train_sources, validation_size, seed)
  return Dataset(
    name=name,
    num_classes=int(num_classes),
    x_train=xs["train"],
    y_train=ys["train"],
    x_val=xs["val"],
    y_val=ys["val"],
    x_test=xs["test"],
    y_test=ys["test"],
    class_names=class_names,
    train_sources=train_sources,
    val_sources=val_sources,
    test_sources=test_sources,
    val_carved_from_train=x_val is None and len(ys["val"]) > 0,
    pixel_max=pixel_max,
  )


def standardize(dataset: Dataset, mode: str = "per_channel") -> Dataset:
  """Normalises every split on the host with statistics of the TRAINING split only; returns a float32 Dataset.

  The trainer does not need this: it keeps the pixel codes and normalises on the device
  (noisy_jax.data.normalization, the same statistics). This is the host-side version for code that wants float
  inputs (the PCA of pseudo-label noise, users' own JAX code). Inputs in [0, 1] are x / pixel_max (float32
  division); splits on disk are loaded first.

  Modes (statistics in float64, results float32):
    'per_channel': x' = (x - mean_c) / std_c, mean and (population) std over all training pixels of channel c
      (over training rows, per feature, for [N, D] vectors); a zero std is replaced by 1. The habit of the GCE
      paper's code and of most ports.
    'mean_image': x' = x - mean_image, the per-pixel (and per-channel) mean of the training images. The Joint
      Optimization code's habit (Tanaka et al., CVPR 2018).
    'none': x' = x / pixel_max (the dataset itself when pixel_max is 1 and its inputs are float32 arrays).
  """
  _checks.check_choice("standardize mode", mode, STANDARDIZE_MODES)
  dataset = dataset.load()
  if dataset.normalized:
    return dataset
  if mode == "none" and dataset.pixel_max == 1.0 and dataset.x_train.dtype == np.float32:
    return dataset
  unit = lambda a: normalization_lib.unit_floats(a, dataset.pixel_max)
  if mode == "none":
    apply = unit
  else:
    x = unit(dataset.x_train).astype(np.float64)
    if mode == "per_channel":
      axes = tuple(range(x.ndim - 1))
      mean, std = x.mean(axis=axes), x.std(axis=axes)
      std = np.where(std > 0, std, 1.0)
      apply = lambda a: (unit(a) - mean) / std
    else:
      mean_image = x.mean(axis=0)
      apply = lambda a: unit(a) - mean_image
  return dataclasses.replace(
    dataset,
    x_train=apply(dataset.x_train),
    x_val=apply(dataset.x_val),
    x_test=apply(dataset.x_test),
    pixel_max=1.0,
    normalized=mode,
  )
