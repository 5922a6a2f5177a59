"""TensorFlow Datasets image datasets held in memory: MNIST, Fashion-MNIST, CIFAR-10/100 and CIFAR-10N/100N.

Also any other TFDS image classification dataset by name (`by_name`, registered as 'tfds'), with its image and
label keys, optional resizing (image_size), class names from its ClassLabel and sources 'tfds:NAME/SPLIT[i]'; only
that loader can ask TFDS to download (download=True).

Read with `tfds.data_source` random access (ArrayRecord files, pillow decodes the PNGs): no TensorFlow needed,
nothing is ever downloaded. The data must already be prepared in ArrayRecord format in `data_dir` (TFDS's default
`~/tensorflow_datasets` when None); otherwise the loader raises FileNotFoundError with the command that prepares
it. Images stay uint8 [N, H, W, C] with pixel_max 255 (the trainer normalises on the device), like the embedded
loaders; labels int32.

Row order: training example i is row i of TFDS's 'train' split (after the optional validation carving, the kept
rows keep their TFDS order). TFDS stores CIFAR in its own shuffled order, not the order of the original python
pickles, so index-aligned side data published for the pickles does not line up with these rows.

CIFAR-N (Wei et al., "Learning with Noisy Labels Revisited: A Study Using Real-World Human Annotations",
ICLR 2022; https://github.com/UCSC-REAL/cifar-10-100n): human labels of the 50,000 CIFAR training images.
What this module relies on: TFDS's cifar10_n / cifar100_n builders (1.0.4) write each human label INTO the same
record as its image (they invert the published `image_order_c10.npy` / `image_order_c100.npy` mapping while
preparing), so a human label is read from the record of its own image and no order mapping is applied here. The
TFDS features used (tensorflow_datasets/image_classification/cifar10_n/cifar10_n.py, cifar100_n/cifar100_n.py):

  cifar10_n noise_key -> TFDS feature   (10 classes)     cifar100_n noise_key -> TFDS feature   (100 fine classes)
  'aggregate' -> 'aggre_label'  (majority of 3)          'noisy' -> 'noise_label'  (one annotator)
  'random1'   -> 'random_label1'
  'random2'   -> 'random_label2'
  'random3'   -> 'random_label3'
  'worst'     -> 'worse_label'  (a wrong one if any)

The clean label is the feature 'label' in both. The test splits carry no human labels (TFDS stores -1 there).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from noisy_jax.core import _checks
from noisy_jax.core import errors
from noisy_jax.data import arrays

SPLIT_SEED = 20180611  # the validation carving's seed: part of the dataset's definition (as in embedded.py)

CIFAR10N_NOISE_KEYS = {
  "aggregate": "aggre_label",
  "random1": "random_label1",
  "random2": "random_label2",
  "random3": "random_label3",
  "worst": "worse_label",
}
CIFAR100N_NOISE_KEYS = {"noisy": "noise_label"}


@dataclasses.dataclass(frozen=True)
class _Spec:
  tfds_name: str
  num_classes: int
  validation_size: int  # default carving; 5,000 for CIFAR: Tanaka et al.'s 45k / 5k (500 per class for CIFAR-10)
  manual: bool = False  # TFDS needs files downloaded by hand (CIFAR-N's human labels)


SPECS = {
  "mnist": _Spec("mnist", 10, 0),
  "fashion_mnist": _Spec("fashion_mnist", 10, 0),
  "cifar10": _Spec("cifar10", 10, 5000),
  "cifar100": _Spec("cifar100", 100, 5000),
  # CIFAR-N's benchmark (Wei et al. 2022) trains on all 50,000 noisy labels: no validation split by default.
  "cifar10_n": _Spec("cifar10_n", 10, 0, manual=True),
  "cifar100_n": _Spec("cifar100_n", 100, 0, manual=True),
}


def _prepare_instructions(tfds_name: str, data_dir) -> str:
  """How to prepare `tfds_name` elsewhere and point the loader at it (noisy_jax never downloads)."""
  where = data_dir or "DIR"
  command = f"tfds build {tfds_name} --file_format=array_record --data_dir={where}"
  manual = ""
  if tfds_name in SPECS and SPECS[tfds_name].manual:
    n = "10" if tfds_name == "cifar10_n" else "100"
    manual = (
      f"{tfds_name} needs a MANUAL download: put side_info_cifar{n}N.csv, CIFAR-{n}_human_annotations.csv "
      f"(converted from CIFAR-{n}_human_ordered.npy, see the MANUAL_DOWNLOAD_INSTRUCTIONS of TFDS's "
      f"{tfds_name} builder) and image_order_c{n}.npy from https://github.com/UCSC-REAL/cifar-10-100n into a "
      "folder MANUAL; then, "
    )
    command += " --manual_dir=MANUAL"
  if tfds_name in SPECS:
    last = "noisy_jax never downloads."
  else:  # dataset 'tfds' (by_name) can ask TFDS to download
    last = (
      "Or let TFDS download and prepare it here: download=True in dataset_kwargs (needs network, "
      "tensorflow-datasets and, for most datasets, TensorFlow)."
    )
  return (
    f"{manual}{'on' if manual else 'On'} a machine with internet and TensorFlow "
    f"(pip install tensorflow-datasets tensorflow-cpu) run\n  {command}\nthen copy {where} here and pass it as "
    f"data_dir (config: --config.dataset_kwargs.data_dir={where}), or use ~/tensorflow_datasets. {last}"
  )


def _builder(tfds_name: str, data_dir):
  try:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(
      "this dataset needs the 'tensorflow-datasets' package (and pillow), which is not installed: "
      'pip install "noisy_jax[data]"'
    ) from e
  return tfds.builder(tfds_name, data_dir=data_dir)


def _data_source(tfds_name: str, split: str, data_dir):
  """`tfds` random-access source of one split, or a FileNotFoundError/ValueError saying how to prepare it."""
  builder = _builder(tfds_name, data_dir)
  try:
    # Under tfds.testing.mock_data this returns random examples whatever is on disk (the tests use that).
    return builder.as_data_source(split=split)
  except (NotImplementedError, ValueError, FileNotFoundError, AssertionError) as e:
    if not builder.is_prepared():
      raise errors.MissingInputError(
        f"TFDS dataset {tfds_name!r} is not prepared in {builder.data_dir}.\n"
        f"{_prepare_instructions(tfds_name, data_dir)}"
      ) from e
    raise errors.InputError(
      f"TFDS dataset {tfds_name!r} in {builder.data_dir} cannot be read without TensorFlow: it is "
      f"stored as {builder.info.file_format}, random access needs array_record.\n"
      f"{_prepare_instructions(tfds_name, data_dir)}"
    ) from e


def _fit_image(image, image_size: int, where: str) -> np.ndarray:
  """uint8 [H, W, C] (C = 1 or 3) -> [S, S, C]: shorter side resized to S, centre crop (noisy_jax.data.images)."""
  from PIL import Image  # pylint: disable=g-import-not-at-top

  from noisy_jax.data import images as images_lib  # pylint: disable=g-import-not-at-top

  image = np.asarray(image, np.uint8)
  if image.ndim != 3 or image.shape[-1] not in (1, 3):
    raise errors.InputError(
      f"{where}: image of shape {image.shape}; resizing needs [H, W, 1] or [H, W, 3] uint8 pixels."
    )
  fitted = np.asarray(
    images_lib.resize_and_crop(Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image), image_size), np.uint8
  )
  return fitted.reshape(image_size, image_size, image.shape[-1])


def read_split(
  tfds_name: str, split: str, label_keys, *, data_dir=None, image_key: str = "image", image_size: int | None = None
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
  """Reads a whole TFDS split into memory.

  image_size: None keeps the records' images, which must then all have one shape; S resizes each image's shorter
  side to S and centre-crops S x S (noisy_jax.data.images.resize_and_crop).

  Returns:
    (uint8 images [N, H, W, C] in TFDS's row order, {key: int64 [N] for each of `label_keys`}).
  """
  source = _data_source(tfds_name, split, data_dir)
  num = len(source)
  if num == 0:
    raise errors.InputError(f"TFDS split {tfds_name}:{split} has 0 examples.")
  first = source[0]
  missing = [k for k in (image_key, *label_keys) if k not in first]
  if missing:
    raise errors.InputError(f"TFDS dataset {tfds_name!r} has no feature(s) {missing}; it has {sorted(first)}.")

  def pixels(example, i):
    image = example[image_key]
    return image if image_size is None else _fit_image(image, image_size, f"TFDS {tfds_name}:{split}[{i}]")

  shape = np.shape(pixels(first, 0))
  images = np.empty((num, *shape), np.uint8)
  labels = {k: np.empty(num, np.int64) for k in label_keys}
  for i in range(num):  # one record at a time: the batched __getitems__ is not available under the mock
    example = first if i == 0 else source[i]
    image = pixels(example, i)
    if np.shape(image) != shape:
      raise errors.InputError(
        f"TFDS {tfds_name}:{split}[0] has an image of shape {shape} but [{i}] one of "
        f"{np.shape(image)}; pass image_size=S (in dataset_kwargs) to resize every image's shorter "
        "side to S and centre-crop S x S."
      )
    images[i] = image
    for k in label_keys:
      labels[k][i] = example[k]
  return images, labels


def load(
  name: str,
  *,
  validation_size: int | float | None = None,
  data_dir: str | None = None,
  noise_key: str | None = None,
  seed: int = SPLIT_SEED,
) -> arrays.Dataset:
  """Loads a TFDS dataset of SPECS into memory as a Dataset with clean labels (plus CIFAR-N's human labels).

  Args:
    name: a key of SPECS: 'mnist', 'fashion_mnist', 'cifar10', 'cifar100', 'cifar10_n', 'cifar100_n'.
    validation_size: a stratified validation split carved from TFDS's training split (an int count or a float
      fraction, see arrays.stratified_split; its labels are the clean ones). None: the dataset's default, 5,000
      for CIFAR-10/100 (45k / 5k as in Tanaka et al. 2018: exactly 500 per class for CIFAR-10, 50 for CIFAR-100),
      0 for MNIST, Fashion-MNIST and CIFAR-N. The test split is TFDS's 'test' split.
    data_dir: the TFDS data directory (None: TFDS's default, ~/tensorflow_datasets or $TFDS_DATA_DIR).
    noise_key: CIFAR-N only: which human labels fill `noisy_y_train` (see the module docstring); default
      'aggregate' for cifar10_n and 'noisy' for cifar100_n.
    seed: seed of the validation carving (a constant by default, so every experiment sees the same split).

  Returns:
    A Dataset: uint8 [N, H, W, C] images (pixel_max 255), int32 clean labels, and for CIFAR-N the human labels
    of the training rows (`noisy_y_train`) and of the validation rows (`noisy_y_val`: validation scores the clean
    labels unless the run selects on noisy ones, config.validation_labels).

  Raises:
    FileNotFoundError: the dataset is not prepared in data_dir (the message gives the command that prepares it).
    ValueError: an unknown name or noise_key, a validation_size out of range.
  """
  _checks.check_choice("TFDS dataset", name, SPECS)
  spec = SPECS[name]
  noise_keys = {"cifar10_n": CIFAR10N_NOISE_KEYS, "cifar100_n": CIFAR100N_NOISE_KEYS}.get(name)
  if noise_keys is None:
    if noise_key is not None:
      raise errors.InputError(f"noise_key={noise_key!r} is only for 'cifar10_n' and 'cifar100_n', not {name!r}.")
    label_keys = ("label",)
  else:
    noise_key = next(iter(noise_keys)) if noise_key is None else noise_key
    _checks.check_choice(f"{name} noise_key", noise_key, noise_keys)
    label_keys = ("label", noise_keys[noise_key])

  x_train, train_labels = read_split(spec.tfds_name, "train", label_keys, data_dir=data_dir)
  x_test, test_labels = read_split(spec.tfds_name, "test", ("label",), data_dir=data_dir)
  y_train = _checks.check_labels(f"{name} train labels", train_labels["label"], spec.num_classes)
  y_test = _checks.check_labels(f"{name} test labels", test_labels["label"], spec.num_classes)
  noisy = (
    None
    if noise_keys is None
    else _checks.check_labels(f"{name} '{noise_key}' human labels", train_labels[label_keys[1]], spec.num_classes)
  )

  validation_size = spec.validation_size if validation_size is None else validation_size
  if isinstance(validation_size, (int, np.integer)) and not isinstance(validation_size, bool):
    _checks.check_range("validation_size", int(validation_size), 0, len(y_train) - 1)
  else:
    _checks.check_range("validation_size", validation_size, 0.0, 1.0, high_open=True)
  val_rows, train_rows = arrays.stratified_split(y_train, [validation_size, None], seed=seed)
  return arrays.Dataset(
    name=name,
    num_classes=spec.num_classes,
    x_train=x_train[train_rows],
    y_train=y_train[train_rows],
    x_val=x_train[val_rows],
    y_val=y_train[val_rows],
    x_test=x_test,
    y_test=y_test,
    noisy_y_train=None if noisy is None else noisy[train_rows],
    noisy_y_val=None if noisy is None else noisy[val_rows],
    pixel_max=255.0,
  )


def mnist(**kwargs) -> arrays.Dataset:
  """MNIST from TFDS: 60,000 train / 10,000 test 28x28x1 digits, 10 classes. Options: see `load`."""
  return load("mnist", **kwargs)


def fashion_mnist(**kwargs) -> arrays.Dataset:
  """Fashion-MNIST from TFDS: 60,000 train / 10,000 test 28x28x1 images, 10 classes. Options: see `load`."""
  return load("fashion_mnist", **kwargs)


def cifar10(**kwargs) -> arrays.Dataset:
  """CIFAR-10 from TFDS: 45,000 train / 5,000 validation (500 per class) / 10,000 test 32x32x3. See `load`."""
  return load("cifar10", **kwargs)


def cifar100(**kwargs) -> arrays.Dataset:
  """CIFAR-100 (fine labels) from TFDS: 45,000 train / 5,000 validation / 10,000 test 32x32x3. See `load`."""
  return load("cifar100", **kwargs)


def cifar10_n(**kwargs) -> arrays.Dataset:
  """CIFAR-10 with CIFAR-10N human labels in `noisy_y_train` (noise_key: aggregate/random1-3/worst). See `load`."""
  return load("cifar10_n", **kwargs)


def cifar100_n(**kwargs) -> arrays.Dataset:
  """CIFAR-100 (fine) with CIFAR-100N human labels in `noisy_y_train` (noise_key 'noisy'). See `load`."""
  return load("cifar100_n", **kwargs)


def by_name(
  name: str,
  *,
  image_key: str = "image",
  label_key: str = "label",
  train_split: str = "train",
  val_split: str | None = None,
  test_split: str = "test",
  image_size: int | None = None,
  download: bool = False,
  data_dir: str | None = None,
  validation_size: int | float | None = None,
  seed: int = SPLIT_SEED,
) -> arrays.Dataset:
  """Any TFDS image classification dataset by name, held in memory (registered as 'tfds').

    python -m experiments.train --config=experiments/configs/ce.py --config.dataset=tfds \\
      --config.dataset_kwargs="{'name': 'beans', 'val_split': 'validation', 'image_size': 64}"

  Args:
    name: the TFDS name, e.g. 'beans', 'tf_flowers', 'oxford_iiit_pet' (a version too: 'beans:0.1.0').
    image_key, label_key: the features holding the uint8 image [H, W, C] and the integer class id.
    train_split, val_split, test_split: TFDS split names (slices work, e.g. 'train[:90%]'); val_split None:
      `validation_size` is carved from the training split (None: 10%), as noisy_jax.data.disk does.
    image_size: S: resize each image's shorter side to S and centre-crop S x S (needed when sizes differ).
    download: when the dataset is not prepared in data_dir, `builder.download_and_prepare(file_format=
      'array_record')` first. Needs network access, tensorflow-datasets and, for most builders, TensorFlow
      (pip install tensorflow-cpu); some datasets also need a manual download or Apache Beam (see TFDS's catalog).
      False (default): never downloads; an unprepared dataset raises FileNotFoundError with the `tfds build`
      command.
    data_dir: the TFDS data directory (None: ~/tensorflow_datasets or $TFDS_DATA_DIR).
    seed: seed of the validation carving.

  Returns:
    A Dataset: uint8 [N, H, W, C] images (pixel_max 255), int32 labels, class_names from the label's
    ClassLabel feature (when it is one), sources 'tfds:NAME/SPLIT[i]' (row i of that TFDS split).
  """
  from noisy_jax.data import disk  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import images  # pylint: disable=g-import-not-at-top

  image_size = images.check_image_size(image_size)
  builder = _builder(name, data_dir)
  if download and not builder.is_prepared():
    builder.download_and_prepare(file_format="array_record")
  splits = {"train": train_split, "val": val_split, "test": test_split}
  x, y, sources = {}, {}, {}
  for split, tfds_split in splits.items():
    if tfds_split is None:
      continue
    pixels, labels = read_split(
      name, tfds_split, (label_key,), data_dir=data_dir, image_key=image_key, image_size=image_size
    )
    x[split], y[split] = pixels, labels[label_key]
    sources[split] = [f"tfds:{name}/{tfds_split}[{i}]" for i in range(len(pixels))]
  feature = builder.info.features[label_key]  # read_split has checked that the records have it
  class_names = tuple(feature.names) if getattr(feature, "names", None) else None  # a ClassLabel's names
  return disk.assemble(
    name,
    x,
    y,
    sources,
    class_names,
    num_classes=None if class_names is None else len(class_names),
    validation_size=validation_size,
    seed=seed,
    where=f"TFDS dataset {name!r}",
  )
