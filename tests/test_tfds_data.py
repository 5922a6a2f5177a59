"""TFDS datasets (offline, under tfds.testing.mock_data), CIFAR-N labels into the trainer, Clothing1M on a tiny folder.

Nothing here touches the network: the TFDS tests run under `tfds.testing.mock_data` (random examples with the real
feature specs of each dataset), the missing-data tests point `data_dir` at an empty folder, and the Clothing1M tests
build a few JPEGs in pytest's tmp_path (a fixture, never a fallback of the library).
"""

import os

import jax
import ml_collections
import numpy as np
import pytest
import tensorflow_datasets as tfds

from experiments.configs import ce
from noisy_jax import data
from noisy_jax.data import arrays
from noisy_jax.data import clothing1m
from noisy_jax.data import tfds_data
from noisy_jax.experiment import inputs
from noisy_jax.experiment import runs

NUM_MOCK = 40
SHAPES = {
  "mnist": (28, 28, 1),
  "fashion_mnist": (28, 28, 1),
  "cifar10": (32, 32, 3),
  "cifar100": (32, 32, 3),
  "cifar10_n": (32, 32, 3),
  "cifar100_n": (32, 32, 3),
}
CLASSES = {"mnist": 10, "fashion_mnist": 10, "cifar10": 10, "cifar100": 100, "cifar10_n": 10, "cifar100_n": 100}


def _source(name, split):
  """The mocked TFDS records, read directly (what the loader must reproduce row by row)."""
  source = tfds.data_source(name, split=split, download=False)
  return [source[i] for i in range(len(source))]


@pytest.fixture
def mock():
  with tfds.testing.mock_data(num_examples=NUM_MOCK):
    yield


# ---------------------------------------------------------------------------------------------------------------
# Loading


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_dataset_loads_with_its_shapes_and_ranges(mock, name):
  validation = 8 if name in ("cifar10", "cifar100") else 0  # the CIFAR default (5,000) exceeds the mock
  ds = data.load(name, validation_size=validation)
  assert ds.name == name and ds.num_classes == CLASSES[name]
  assert ds.input_shape == SHAPES[name]
  assert ds.sizes == {"train": NUM_MOCK - validation, "val": validation, "test": NUM_MOCK}
  for x, y in ((ds.x_train, ds.y_train), (ds.x_val, ds.y_val), (ds.x_test, ds.y_test)):
    assert x.dtype == np.uint8 and y.dtype == np.int32 and ds.pixel_max == 255
    assert x.shape == (len(y), *SHAPES[name])
    assert not x.flags.writeable
    if len(y):
      assert 0 <= y.min() and y.max() < CLASSES[name]
  assert (ds.noisy_y_train is not None) == name.endswith("_n")
  # The images are TFDS's records, row for row (validation_size 0 keeps TFDS's order).
  if not validation:
    records = _source(name, "train")
    np.testing.assert_array_equal(ds.y_train, [r["label"] for r in records])
    np.testing.assert_array_equal(ds.x_train[3], records[3]["image"])


@pytest.mark.parametrize("noise_key,feature", sorted(tfds_data.CIFAR10N_NOISE_KEYS.items()))
def test_cifar10_n_noise_keys_read_their_human_labels_row_by_row(mock, noise_key, feature):
  ds = data.load("cifar10_n", noise_key=noise_key)
  records = _source("cifar10_n", "train")
  np.testing.assert_array_equal(ds.noisy_y_train, [r[feature] for r in records])
  np.testing.assert_array_equal(ds.y_train, [r["label"] for r in records])
  assert ds.noisy_y_train.dtype == np.int32 and not ds.noisy_y_train.flags.writeable


def test_cifar10_n_keeps_the_human_labels_of_its_validation_rows(mock):
  """A carved validation split keeps its rows' human labels in noisy_y_val (model selection on noisy labels), the
  rows the stratified carving chose, as noisy_y_train keeps the others'."""
  ds = data.load("cifar10_n", noise_key="worst", validation_size=8)
  records = _source("cifar10_n", "train")
  clean = np.array([r["label"] for r in records])
  worst = np.array([r["worse_label"] for r in records])
  val_rows, train_rows = arrays.stratified_split(clean, [8, None], seed=tfds_data.SPLIT_SEED)
  np.testing.assert_array_equal(ds.noisy_y_val, worst[val_rows])
  np.testing.assert_array_equal(ds.noisy_y_train, worst[train_rows])
  np.testing.assert_array_equal(ds.y_val, clean[val_rows])
  assert ds.noisy_y_val.dtype == np.int32 and not ds.noisy_y_val.flags.writeable
  assert data.load("cifar10", validation_size=8).noisy_y_val is None


def test_cifar_n_feature_names_and_defaults(mock):
  assert tfds_data.CIFAR10N_NOISE_KEYS == {
    "aggregate": "aggre_label",
    "random1": "random_label1",
    "random2": "random_label2",
    "random3": "random_label3",
    "worst": "worse_label",
  }
  # The mocked records carry the real TFDS feature specs: every name we map to exists.
  record = _source("cifar10_n", "train")[0]
  assert set(tfds_data.CIFAR10N_NOISE_KEYS.values()) <= set(record)
  assert set(tfds_data.CIFAR100N_NOISE_KEYS.values()) <= set(_source("cifar100_n", "train")[0])
  default = data.load("cifar10_n")
  np.testing.assert_array_equal(default.noisy_y_train, data.load("cifar10_n", noise_key="aggregate").noisy_y_train)
  c100 = data.load("cifar100_n")
  np.testing.assert_array_equal(c100.noisy_y_train, [r["noise_label"] for r in _source("cifar100_n", "train")])
  assert c100.noisy_y_train.max() < 100


def test_bad_options_are_named(mock):
  with pytest.raises(ValueError, match="'worse'.*allowed.*'aggregate'"):
    data.load("cifar10_n", noise_key="worse")
  with pytest.raises(ValueError, match="noise_key='aggregate' is only for"):
    data.load("cifar10", noise_key="aggregate", validation_size=4)
  with pytest.raises(ValueError, match="validation_size=5000 is outside"):  # CIFAR's default is the 5k split
    data.load("cifar10")
  with pytest.raises(ValueError, match="Unknown dataset 'cifar1O'"):
    data.load("cifar1O")


def _balanced_source(num_per_class):
  """A mocked `as_data_source` with exactly `num_per_class` examples of every class, row id in pixel (0, 0, 0).

  The noisy features are (label + row) % C, so a row's noisy label can be recomputed from its id.
  """

  def as_data_source(builder, split, **kwargs):
    del kwargs
    num_classes = CLASSES[builder.name]
    shape = SHAPES[builder.name]
    rng = np.random.default_rng(0 if split == "train" else 1)
    labels = rng.permutation(np.repeat(np.arange(num_classes), num_per_class))
    records = []
    for row, label in enumerate(labels):
      image = rng.integers(0, 256, shape, dtype=np.uint8)
      image[0, 0, 0] = row
      noisy = (label + row) % num_classes
      records.append(
        {
          "image": image,
          "label": label,
          "aggre_label": noisy,
          "worse_label": noisy,
          "random_label1": noisy,
          "random_label2": noisy,
          "random_label3": noisy,
          "noise_label": noisy,
        }
      )
    return records

  return as_data_source


@pytest.mark.parametrize("name", ["cifar10", "cifar10_n"])
def test_validation_split_is_class_balanced_and_noisy_labels_follow_their_rows(name):
  # CIFAR-10's 45k / 5k split (500 per class), scaled down: 20 per class, a validation split of 50 = 5 per class.
  with tfds.testing.mock_data(as_data_source_fn=_balanced_source(20)):
    ds = data.load(name, validation_size=50)
  assert ds.sizes == {"train": 150, "val": 50, "test": 200}
  np.testing.assert_array_equal(np.bincount(ds.y_val, minlength=10), [5] * 10)
  np.testing.assert_array_equal(np.bincount(ds.y_train, minlength=10), [15] * 10)
  rows = ds.x_train[:, 0, 0, 0].astype(int)
  assert len(set(rows)) == 150 and np.all(np.diff(rows) > 0)  # kept rows, in TFDS's order
  val_rows = ds.x_val[:, 0, 0, 0].astype(int)
  assert not set(rows) & set(val_rows)
  if name == "cifar10_n":
    np.testing.assert_array_equal(ds.noisy_y_train, (ds.y_train + rows) % 10)
  # The carving is fixed (SPLIT_SEED) unless a seed is given.
  with tfds.testing.mock_data(as_data_source_fn=_balanced_source(20)):
    again = data.load(name, validation_size=50)
    other = data.load(name, validation_size=50, seed=1)
  np.testing.assert_array_equal(again.x_val, ds.x_val)
  assert not np.array_equal(other.x_val, ds.x_val)


def test_dataset_checks_and_keeps_noisy_labels(mock):
  ds = data.load("cifar10_n")
  standardized = data.standardize(ds, "per_channel")
  np.testing.assert_array_equal(standardized.noisy_y_train, ds.noisy_y_train)
  fields = dict(
    name="x",
    num_classes=10,
    x_train=ds.x_train,
    y_train=ds.y_train,
    x_val=ds.x_val,
    y_val=ds.y_val,
    x_test=ds.x_test,
    y_test=ds.y_test,
  )
  with pytest.raises(ValueError, match=f"noisy_y_train has 3 labels but the training split has {NUM_MOCK}"):
    data.Dataset(**fields, noisy_y_train=np.zeros(3, int))
  with pytest.raises(ValueError, match="noisy_y_train holds class id 10 outside"):
    data.Dataset(**fields, noisy_y_train=np.full(NUM_MOCK, 10))
  assert data.Dataset(**fields).noisy_y_train is None


@pytest.mark.parametrize("name", ["cifar10", "cifar10_n", "mnist"])
def test_missing_data_says_how_to_prepare_it(tmp_path, name):
  empty = str(tmp_path / "tfds")
  with pytest.raises(FileNotFoundError) as error:
    data.load(name, data_dir=empty)
  message = str(error.value)
  assert f"'{name}' is not prepared in {empty}" in message
  assert f"tfds build {name} --file_format=array_record --data_dir={empty}" in message
  assert "never downloads" in message
  if name == "cifar10_n":
    assert "MANUAL download" in message and "https://github.com/UCSC-REAL/cifar-10-100n" in message
    assert "--manual_dir=MANUAL" in message
  assert not os.path.exists(empty)  # nothing was downloaded or created


# ---------------------------------------------------------------------------------------------------------------
# Into the trainer


def _config(noise_type="dataset"):
  return ml_collections.ConfigDict({"noise": {"type": noise_type, "rate": 0.4, "exact": True, "dataset": ""}})


def test_dataset_noise_uses_the_human_labels(mock):
  ds = data.load("cifar10_n", noise_key="worst")
  noisy, report = inputs.noisy_training_labels(_config(), ds, jax.random.PRNGKey(0))
  np.testing.assert_array_equal(noisy, ds.noisy_y_train)
  assert report["flip_rate"] == pytest.approx(np.mean(ds.noisy_y_train != ds.y_train))
  assert report["counts"].sum() == ds.num_train
  # Other noise types still corrupt the CLEAN labels of a CIFAR-N dataset.
  symmetric, report = inputs.noisy_training_labels(_config("symmetric"), ds, jax.random.PRNGKey(0))
  assert report["flip_rate"] == pytest.approx(np.mean(symmetric != ds.y_train))
  assert 0.2 < report["flip_rate"] <= 0.5  # 40% per class, rounded per class on 40 examples
  assert not np.array_equal(symmetric, ds.noisy_y_train)


def test_dataset_noise_needs_a_dataset_with_noisy_labels(mock):
  ds = data.load("mnist")
  with pytest.raises(ValueError, match="dataset 'mnist' has none"):
    inputs.noisy_training_labels(_config(), ds, jax.random.PRNGKey(0))


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_one_training_epoch_per_dataset(mock, name):
  config = ce.get_config()
  config.dataset = name
  config.dataset_kwargs = {"validation_size": 8} if name in ("cifar10", "cifar100") else {}
  config.noise.type = "dataset" if name.endswith("_n") else "symmetric"
  config.noise.rate = 0.25
  config.num_epochs = 1
  config.batch_size = 16
  config.optimizer.lr_boundaries = ()
  config.model.name = "mlp"
  config.model.kwargs = {"hidden_sizes": (16,)}
  summary = runs.run_single(config)
  (record,) = summary["history"]
  assert np.isfinite(record["train_loss"])
  assert 0.0 <= summary["last_test_accuracy"] <= 1.0
  assert ("val_accuracy" in record) == (name in ("cifar10", "cifar100"))
  assert summary["noise"]["type"] == config.noise.type
  if name.endswith("_n"):  # the human labels, as they are
    ds = data.load(name)
    assert summary["noise"]["realised_rate"] == pytest.approx(np.mean(ds.noisy_y_train != ds.y_train))
  else:  # 25% of each class, rounded per class (CIFAR-100's 40 mock examples: mostly 1 per class, none flipped)
    assert 0.0 <= summary["noise"]["realised_rate"] <= 0.4


# ---------------------------------------------------------------------------------------------------------------
# Clothing1M


def _clothing_folder(root, *, num_noisy=6, sizes=((300, 260), (260, 400), (500, 256), (280, 280))):
  """A miniature Clothing1M release: a few generated JPEGs in the official layout (a test fixture)."""
  from PIL import Image  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(0)
  keys = []
  for i in range(num_noisy + 3):
    key = f"images/{i % 10}/{i:02d}/{1000 + i},1.jpg"
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    width, height = sizes[i % len(sizes)]
    Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(path, quality=95)
    keys.append(key)
  noisy_keys, clean_keys = keys[:num_noisy], keys[num_noisy - 1 :]  # one image has both kinds of label
  (root / "category_names_eng.txt").write_text("\n".join(f"class{c}" for c in range(14)) + "\n")
  (root / "noisy_label_kv.txt").write_text("".join(f"{k} {i % 14}\n" for i, k in enumerate(noisy_keys)))
  (root / "clean_label_kv.txt").write_text("".join(f"{k} {(i + 5) % 14}\n" for i, k in enumerate(clean_keys)))
  (root / "noisy_train_key_list.txt").write_text("\n".join(noisy_keys) + "\n")
  (root / "clean_train_key_list.txt").write_text(clean_keys[0] + "\n")
  (root / "clean_val_key_list.txt").write_text(clean_keys[1] + "\n")
  (root / "clean_test_key_list.txt").write_text("\n".join(clean_keys[2:]) + "\n")
  return noisy_keys, clean_keys


def test_clothing1m_split_descriptors(tmp_path):
  noisy_keys, clean_keys = _clothing_folder(tmp_path)
  split = clothing1m.load_split(str(tmp_path), "noisy_train")
  assert split.num_examples == 6 and list(split.keys) == noisy_keys
  np.testing.assert_array_equal(split.indices, np.arange(6))
  np.testing.assert_array_equal(split.labels, [0, 1, 2, 3, 4, 5])
  np.testing.assert_array_equal(split.clean_labels, [-1, -1, -1, -1, -1, 5])  # only the last has a clean label
  assert split.class_names == tuple(f"class{c}" for c in range(14))
  assert os.path.isfile(split.path(2))
  test = clothing1m.load_split(str(tmp_path), "clean_test")
  assert list(test.keys) == clean_keys[2:]
  np.testing.assert_array_equal(test.labels, [7, 8])
  np.testing.assert_array_equal(test.clean_labels, test.labels)
  assert clothing1m.load_split(str(tmp_path), "noisy_train", max_examples=2).num_examples == 2


@pytest.mark.parametrize("missing", ["noisy_label_kv.txt", "clean_val_key_list.txt", "category_names_eng.txt"])
def test_clothing1m_missing_file_is_named(tmp_path, missing):
  _clothing_folder(tmp_path)
  os.remove(tmp_path / missing)
  split = {"noisy_label_kv.txt": "noisy_train", "clean_val_key_list.txt": "clean_val"}.get(missing, "clean_test")
  with pytest.raises(FileNotFoundError, match=f"{missing} is missing"):
    clothing1m.load_split(str(tmp_path), split)
  with pytest.raises(FileNotFoundError, match=missing):
    clothing1m.check_layout(str(tmp_path))


def test_clothing1m_layout_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="is not a folder"):
    clothing1m.load_split(str(tmp_path / "nowhere"), "clean_test")
  _clothing_folder(tmp_path)
  (tmp_path / "clean_test_key_list.txt").write_text("images/9/99/missing,1.jpg\n")
  with pytest.raises(ValueError, match="have no label in clean_label_kv.txt, e.g. 'images/9/99/missing,1.jpg'"):
    clothing1m.load_split(str(tmp_path), "clean_test")
  with pytest.raises(ValueError, match="Unknown Clothing1M split 'train'"):
    clothing1m.load_split(str(tmp_path), "train")
  os.rename(tmp_path / "images", tmp_path / "imgs")
  with pytest.raises(FileNotFoundError, match="image folder .*images' is missing"):
    clothing1m.load_split(str(tmp_path), "noisy_train")


def test_clothing1m_annotations_folder_is_accepted(tmp_path):
  _clothing_folder(tmp_path)
  (tmp_path / "annotations").mkdir()
  for name in os.listdir(tmp_path):
    if name.endswith(".txt"):
      os.rename(tmp_path / name, tmp_path / "annotations" / name)
  assert clothing1m.load_split(str(tmp_path), "noisy_train").num_examples == 6


def test_clothing1m_batches_are_deterministic_crops(tmp_path):
  _clothing_folder(tmp_path)
  split = clothing1m.load_split(str(tmp_path), "noisy_train")
  batches = list(clothing1m.iterate_batches(split, batch_size=4, seed=3, epoch=1))
  assert [len(b[0]) for b in batches] == [4, 2]
  indices = np.concatenate([b[0] for b in batches])
  assert sorted(indices) == list(range(6)) and not np.array_equal(indices, np.arange(6))  # shuffled, complete
  for idx, images, labels in batches:
    assert images.shape == (len(idx), 224, 224, 3) and images.dtype == np.uint8
    np.testing.assert_array_equal(labels, split.labels[idx])
  # Same seed and epoch: same order, same crops, whatever the batch size and the number of threads.
  again = list(clothing1m.iterate_batches(split, batch_size=3, seed=3, epoch=1, num_workers=0))
  np.testing.assert_array_equal(np.concatenate([b[0] for b in again]), indices)
  np.testing.assert_array_equal(np.concatenate([b[1] for b in again]), np.concatenate([b[1] for b in batches]))
  # Another epoch: another order or other crops.
  other = list(clothing1m.iterate_batches(split, batch_size=6, seed=3, epoch=2))[0]
  by_index = {int(i): im for i, im in zip(other[0], other[1])}
  assert any(not np.array_equal(by_index[int(i)], im) for b in batches for i, im in zip(b[0], b[1]))
  # Evaluation: in order, center crops of the resized image, float32 in [0, 1].
  (idx, images, _), *_ = clothing1m.iterate_batches(split, batch_size=6, train=False, dtype="float32")
  np.testing.assert_array_equal(idx, np.arange(6))
  assert images.dtype == np.float32 and 0.0 <= images.min() and images.max() <= 1.0
  from PIL import Image  # pylint: disable=g-import-not-at-top

  with Image.open(split.path(0)) as image:  # 300 x 260: shorter side 260 -> 256, width 295
    resized = np.asarray(image.convert("RGB").resize((295, 256), Image.BILINEAR))
  np.testing.assert_allclose(images[0], resized[16:240, 35:259] / 255.0, atol=1e-6)
  with pytest.raises(ValueError, match="batch_size=0"):
    next(clothing1m.iterate_batches(split, batch_size=0))
  with pytest.raises(ValueError, match="Unknown dtype 'float16'"):
    next(clothing1m.iterate_batches(split, batch_size=2, dtype="float16"))
