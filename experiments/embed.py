r"""Embeds every image of a folder with a frozen backbone: streamed, sharded over devices, written in resumable shards.

  python -m experiments.embed --images=DIR --backbone=imagenet_resnet18 --weights=resnet18.pth --workdir=W
  python -m experiments.embed --images=DIR --backbone=resnet50 --weights=resnet50.safetensors --workdir=W \
    --batch_size=128 --shard_size=50000 --workers=8 --on_bad_file=skip
  python -m experiments.embed --images=DIR --backbone=run --weights=RUN_WORKDIR --workdir=W
  python -m experiments.embed --config=experiments/configs/ce.py --config.dataset=cifar10_n \
    --config.noise.type=dataset --backbone=vit_small_patch14_dinov2 --weights=dinov2_vits14_pretrain.pth --workdir=W
  python -m experiments.embed --config=experiments/configs/ce.py --config.dataset=cifar10_n --split=test \
    --backbone=vit_large_patch14_dinov2 --weights=dinov2_vitl14_pretrain.pth --resize=224 --workdir=W_TEST

Input (--images): every .png / .jpg / .jpeg file under DIR (any depth, hidden names skipped), in sorted order of
their relative paths. A folder DIR/LABEL/... also gives class ids (the sorted LABEL names).
Input (--config=CONFIG.py[:ARG], instead of --images; its fields overridable as in experiments.train, e.g.
--config.dataset=cifar10_n): the training rows of the config's dataset as loaded (images held in memory, e.g. a
TFDS dataset, whose loader holds --config.dataset_kwargs.validation_size rows out: 5,000 of CIFAR's by default, 0
keeps all 50,000), rows named 'DATASET:train[i]', labelled with the
noisy labels a run of the config trains on (the same noise draw from config.seed; a dataset's own labels, CIFAR-N's
human ones, under noise type 'dataset'), classes the dataset's names. --split=test embeds the test split instead,
rows 'DATASET:test[i]' labelled with its (clean) test labels. Each image goes through the backbone's
preprocessing as a file would (gray repeated to RGB; codes of a dataset whose full intensity is not 255, such as the
8x8 digits' 16, scaled to 0..255 first).

Backbones (--backbone, --weights; noisy_jax.experiment.embedders has the details):
  imagenet_resnet18 | imagenet_resnet34 | resnet50   a torchvision / timm ImageNet ResNet state_dict (.pth, .pt, .bin
      or .safetensors); D = 512 / 512 / 2048, the pooled input of the classifier. Preprocessing: torchvision's
      ImageNet evaluation transform: RGB, shorter side resized to 256 (bilinear), centre crop 224, ImageNet mean and
      std. --image_size=S crops S and resizes to round(S * 256 / 224).
  run   a noisy_jax run's workdir or export directory; D = the input width of its classifier head. Preprocessing:
      the run's own (its loader's resize and crop, its normalisation).
--resize=R, --interpolation=I (torchvision-style backbones): resize the shorter side to R >= the crop with I
  (nearest | bilinear | bicubic | lanczos) instead of the backbone's own; --resize=224 with a 224 crop stretches a
  square image whole (Resize((224, 224)), as NI-ERM's code feeds CIFAR's 32 x 32 images to DINOv2).
Every check of the backbone and its weights (unknown name, missing, truncated or another network's file) comes
before anything is written: a bad --weights leaves --workdir untouched.

Computation: images are decoded and resized by Grain (--workers processes; 0: in this process), in global batches of
--batch_size (a multiple of the device count) sharded over every local device (the mesh axis `batch`), the
features computed by one jitted program and gathered to the host. A batch never spans two shards; the last batch of
a shard is padded with its first row and the padding dropped. Several JAX processes (jax.distributed, e.g.
NOISY_JAX_MULTIHOST=1): each reads its columns of every global batch (grain.sharding.ShardByJaxProcess), all
compute, and process 0 alone writes (the features are gathered to every process: the simplest correct choice;
tests/test_embed.py runs two processes and gets the one-process store).

Output (--workdir; layout in noisy_jax.experiment.embedding_store): files.txt, labels.npy + classes.txt (class
layout only), shards/embeddings-0000i-of-0000n.npy (float32 [n_i, D], shard i = rows [i S, (i + 1) S) for
S = --shard_size), skipped.txt, manifest.json (backbone, weights fingerprint, preprocessing, D, N, shard sha256s).
Read it back with `embedding_store.read(W) -> (embeddings [N, D], labels or None, files, class names)`.

Resume: run the same command again. With the same backbone, weights, preprocessing, file list and shard size the
finished shards (present, sha256 as in the manifest) are kept and only the missing ones computed; anything else
stops with an error naming what differs. A killed run leaves only whole shards (written to a temporary name,
renamed when complete).

--on_bad_file: 'error' (default) stops at the first file that cannot be decoded, naming it (the shards finished
before it stay, whole); 'skip' keeps its row as NaN and lists it in manifest.json and skipped.txt (`read` drops such
rows unless drop_skipped=False).

Prints a progress bar (images/s, ETA) on stderr and at the end N, D, the shards written and reused, the files
skipped, the wall time and the images per second of the computed part.

Test hook: with the environment variable NOISY_JAX_EMBED_KILL_AFTER_SHARDS=K the process kills itself (SIGKILL)
after writing its K-th shard (tests/test_embed.py's kill-and-resume test).
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import sys
import time

from absl import app
from absl import flags
from ml_collections import config_flags
import numpy as np

from experiments import cli
from noisy_jax.core import errors
from noisy_jax.data import bad_files
from noisy_jax.experiment import embedding_store

KILL_AFTER_ENV = "NOISY_JAX_EMBED_KILL_AFTER_SHARDS"
DEFAULT_BATCH_SIZE = 64
DEFAULT_SHARD_SIZE = 10_000
SPLITS = ("train", "test")


@dataclasses.dataclass(frozen=True)
class Summary:
  """What `run` did: N, D, shards written and reused, files skipped, wall seconds, images/s of the computed rows."""

  workdir: str
  num_examples: int
  dim: int
  written: int
  reused: int
  skipped: int
  seconds: float
  images_per_second: float
  devices: int = 1

  def line(self) -> str:
    return (
      f"Embedded N={self.num_examples} images, D={self.dim} into {self.workdir}: {self.written} shards written, "
      f"{self.reused} reused, {self.skipped} files skipped; {self.seconds:.1f} s, "
      f"{self.images_per_second:.1f} images/s on {self.devices} device(s)"
    )


def batch_plan(todo: list[int], shard_size: int, num_examples: int, batch_size: int):
  """(indices int64 [T, B], valid bool [T, B], shard of each batch int [T]) of the shards `todo`: each shard's rows
  in order, its last batch padded with its first row (valid False)."""
  indices, valid, owner = [], [], []
  for shard in todo:
    start, end = embedding_store.shard_rows(shard, shard_size, num_examples)
    batches = math.ceil((end - start) / batch_size)
    pad = batches * batch_size - (end - start)
    indices.append(np.concatenate([np.arange(start, end), np.full(pad, start)]).reshape(batches, batch_size))
    valid.append(np.concatenate([np.ones(end - start, bool), np.zeros(pad, bool)]).reshape(batches, batch_size))
    owner += [shard] * batches
  if not indices:
    return np.zeros((0, batch_size), np.int64), np.zeros((0, batch_size), bool), np.zeros((0,), np.int64)
  return np.concatenate(indices).astype(np.int64), np.concatenate(valid), np.asarray(owner, np.int64)


def check_sizes(batch_size: int, shard_size: int, num_devices: int, num_processes: int) -> None:
  """InputError naming --batch_size or --shard_size when it is not a positive integer, or a batch that does not
  divide over the devices and processes."""
  if batch_size < 1 or shard_size < 1:
    raise errors.InputError(f"--batch_size={batch_size} and --shard_size={shard_size} must be >= 1.")
  if batch_size % num_devices or batch_size % num_processes:
    raise errors.InputError(
      f"--batch_size={batch_size} must be a multiple of the device count {num_devices} (and of the process count "
      f"{num_processes}): each device embeds an equal part of every batch."
    )


class _ShardBuffer:
  """The rows of the shards being computed, written when their last batch is in (process 0 only writes)."""

  def __init__(self, writer, source, files, dim, *, on_bad_file: str, shard_size: int):
    self.writer, self.source, self.files, self.dim = writer, source, files, dim
    self.on_bad_file, self.shard_size = on_bad_file, shard_size
    self.rows, self.skipped, self.written = {}, {}, 0

  def add(self, shard: int, rows: np.ndarray, valid: np.ndarray, skipped: np.ndarray, features: np.ndarray) -> None:
    start, end = embedding_store.shard_rows(shard, self.shard_size, len(self.files))
    if shard not in self.rows:
      self.rows[shard] = np.full((end - start, self.dim), np.nan, np.float32)
      self.skipped[shard] = []
    skipped = skipped & valid  # padding repeats a row: a bad file is met once per copy
    keep = valid & ~skipped
    self.rows[shard][rows[keep] - start] = features[keep]
    for row in rows[skipped]:
      error = self.source.decode_row(int(row))[1] or "could not be decoded while streaming"
      if self.on_bad_file == "error":
        raise errors.InputError(
          f"{error} (--on_bad_file=skip embeds the other files and lists this one in skipped.txt)."
        )
      self.skipped[shard].append({"row": int(row), "file": self.files[int(row)], "error": error})

  def finish(self, shard: int) -> None:
    if self.writer is not None:
      self.writer.write_shard(shard, self.rows.pop(shard), sorted(self.skipped.pop(shard), key=lambda s: s["row"]))
    self.written += 1
    kill_after = os.environ.get(KILL_AFTER_ENV)
    if kill_after and self.written >= int(kill_after):
      os.kill(os.getpid(), signal.SIGKILL)  # the test hook of the module docstring


def _progress(total: int, enabled: bool):
  from tqdm import tqdm  # pylint: disable=g-import-not-at-top

  return tqdm(total=total, unit="img", file=sys.stderr, disable=not enabled, mininterval=1.0, desc="embed")


def embed_shards(embedder, source, plan, buffer: _ShardBuffer, mesh, *, workers: int, progress: bool) -> int:
  """Streams the batches of `plan` (batch_plan) through `embedder` on `mesh` into `buffer`; returns the number of
  rows computed."""
  from noisy_jax.parallel import distributed  # pylint: disable=g-import-not-at-top
  from noisy_jax.parallel import streaming  # pylint: disable=g-import-not-at-top

  indices, valid, owner = plan
  if not len(owner):
    return 0
  index, count = streaming.process_shard()
  local_rows, local_valid = streaming.local_rows(indices, valid, index, count)
  placed = embedder.on(mesh)
  loader = streaming.Loader(
    source, local_rows.reshape(-1), local_valid.reshape(-1), batch_size=local_rows.shape[1], workers=workers
  )
  with loader, _progress(int(valid.sum()), progress) as bar:
    for t, batch in enumerate(loader):
      images = distributed.global_batch(batch["images"], mesh)
      features = distributed.host_value(placed.features(images))
      skipped = distributed.host_value(distributed.global_batch(batch["skipped"], mesh))
      buffer.add(int(owner[t]), indices[t], valid[t], np.asarray(skipped, bool), np.asarray(features))
      bar.update(int(valid[t].sum()))
      if t + 1 == len(owner) or owner[t + 1] != owner[t]:
        buffer.finish(int(owner[t]))
  return int(valid.sum())


def run(
  images: str | None,
  backbone: str,
  weights: str | None,
  workdir: str,
  *,
  batch_size: int = DEFAULT_BATCH_SIZE,
  shard_size: int = DEFAULT_SHARD_SIZE,
  image_size: int | None = None,
  on_bad_file: str = "error",
  workers: int = 0,
  progress: bool = True,
  config=None,
  split: str = "train",
  resize: int | None = None,
  interpolation: str | None = None,
) -> Summary:
  """Embeds the folder `images`, or the training split of `config`'s dataset, into the store `workdir` (module
  docstring); returns the Summary.

  Raises:
    errors.InputError, errors.MissingInputError: a bad flag, backbone, weights file or images folder (before anything
      is written), a workdir holding other embeddings, a file that cannot be decoded with on_bad_file='error'.
  """
  import jax  # pylint: disable=g-import-not-at-top

  from noisy_jax.experiment import embedders  # pylint: disable=g-import-not-at-top
  from noisy_jax.parallel import mesh as mesh_lib  # pylint: disable=g-import-not-at-top

  started = time.perf_counter()
  store = embedding_store
  try:
    bad_files.check_options(on_bad_file, 0.0)
  except ValueError as error:
    raise errors.InputError(f"--{error}") from None
  mesh = mesh_lib.make_mesh()
  check_sizes(batch_size, shard_size, mesh.devices.size, jax.process_count())
  if split not in SPLITS or (split != "train" and config is None):
    raise errors.InputError(f"--split={split!r}; allowed: {', '.join(SPLITS)}, the splits of a --config's dataset.")
  embedder = embedders.build(backbone, weights, image_size, resize=resize, interpolation=interpolation)
  files, labels, classes, source = inputs(images, config, embedder, split)
  ident = store.identity(
    backbone=backbone,
    weights=store.fingerprint(embedder.weights),
    preprocessing=embedder.preprocessing.to_json(),
    dim=embedder.dim,
    paths=files,
    shard_size=shard_size,
    labels=labels if config is not None else None,
  )
  writer = store.Writer.open(workdir, ident, files, labels, classes) if jax.process_index() == 0 else None
  todo = _agreed_todo(writer, store.num_shards(len(files), shard_size))
  buffer = _ShardBuffer(writer, source, files, embedder.dim, on_bad_file=on_bad_file, shard_size=shard_size)
  plan = batch_plan(todo, shard_size, len(files), batch_size)
  computing = time.perf_counter()
  rows = embed_shards(embedder, source, plan, buffer, mesh, workers=workers, progress=progress)
  seconds = time.perf_counter() - started
  manifest = writer.manifest if writer is not None else {"skipped": []}
  return Summary(
    os.path.abspath(workdir),
    len(files),
    embedder.dim,
    buffer.written,
    store.num_shards(len(files), shard_size) - len(todo),
    len(manifest["skipped"]),
    seconds,
    rows / max(time.perf_counter() - computing, 1e-9),
    int(mesh.devices.size),
  )


def inputs(images: str | None, config, embedder, split: str = "train"):
  """(row names, labels or None, class names or None, the Grain source of the rows' pixels): the files of the folder
  `images` (module docstring), or the `split` of `config`'s dataset (`config_inputs`).

  Raises:
    errors.InputError: naming --images and --config when both or neither are given.
  """
  from noisy_jax.experiment import embedders  # pylint: disable=g-import-not-at-top

  if (images is None) == (config is None):
    raise errors.InputError(
      f"give --images (a folder of image files) or --config (a config whose dataset to embed), one of them; got "
      f"--images={images!r} and {'a' if config is not None else 'no'} --config."
    )
  if config is not None:
    return config_inputs(config, embedder, split)
  files = embedding_store.list_images(images)
  labels, classes = embedding_store.folder_labels(files)
  return (
    files,
    labels,
    classes,
    embedders.ImageSource(tuple(os.path.join(images, f) for f in files), embedder.preprocessing),
  )


def config_inputs(config, embedder, split: str = "train"):
  """`inputs` of a config's dataset: its training split as stored (uint8 images in memory), rows named
  'DATASET:train[i]', labelled with the noisy labels a run of the config trains on (its noise drawn from its seed's
  noise key, as noisy_jax.experiment.runs.run_single draws it; a dataset's own labels for noise type 'dataset',
  e.g. CIFAR-N), classes the dataset's names; split 'test': its test split, rows 'DATASET:test[i]', labelled with
  the test labels.

  Raises:
    errors.InputError: naming the config's dataset when its training split is not images in memory (a folder or a
      streamed split: embed its files with --images) or the backbone reads files only (--backbone=run).
  """
  from noisy_jax.experiment import embedders  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import inputs as inputs_lib  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import runs  # pylint: disable=g-import-not-at-top

  if embedder.preprocessing.style != "torchvision":
    raise errors.InputError(f"--backbone={embedder.name} embeds image files only: use --images with it.")
  dataset = inputs_lib.load_dataset(config)
  pixels = dataset.x_train if split == "train" else dataset.x_test
  if not isinstance(pixels, np.ndarray) or pixels.dtype != np.uint8 or pixels.ndim not in (3, 4):
    raise errors.InputError(
      f"--config: dataset {config.dataset!r} does not hold its {split} images in memory as uint8 [N, H, W, C] "
      "(a folder or a split read from disk): embed its files with --images=DIR."
    )
  pixel_max = float(getattr(dataset, "pixel_max", 255.0))
  if pixel_max != 255.0:  # codes of another range (the 8x8 digits: 0..16) as 0..255 pixels
    pixels = np.round(pixels.astype(np.float32) * (255.0 / pixel_max)).clip(0, 255).astype(np.uint8)
  if split == "train":
    labels, _ = inputs_lib.noisy_training_labels(config, dataset, runs.noise_key(config))
  else:
    labels = dataset.y_test
  name = getattr(dataset, "name", None) or str(config.dataset)
  files = [f"{name}:{split}[{i}]" for i in range(len(pixels))]
  names = getattr(dataset, "class_names", None)
  classes = tuple(names) if names else tuple(str(c) for c in range(int(dataset.num_classes)))
  return files, np.asarray(labels, np.int64), classes, embedders.ArraySource(pixels, embedder.preprocessing)


def _agreed_todo(writer, count: int) -> list[int]:
  """The shards to compute: process 0's writer decides, the others receive its list."""
  import jax  # pylint: disable=g-import-not-at-top

  mask = np.zeros(count, np.int32)
  if writer is not None:
    mask[writer.todo] = 1
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

    mask = np.asarray(multihost_utils.broadcast_one_to_all(mask))
  return [int(i) for i in np.flatnonzero(mask)]


def define_flags() -> None:
  """The command's flags (defined when run as a command only, as experiments.predict does)."""
  flags.DEFINE_string("images", None, "A folder of image files (read recursively; DIR/LABEL/... gives labels).")
  config_flags.DEFINE_config_file(
    "config", None, "Instead of --images: a config whose dataset's training split to embed."
  )
  flags.DEFINE_string("backbone", None, "The backbone: imagenet_resnet18, imagenet_resnet34, resnet50 or run.")
  flags.DEFINE_string("weights", None, "Its weights: a .pth / .safetensors file, or a run's workdir or export.")
  flags.DEFINE_string("workdir", None, "The embedding store written (and resumed).")
  flags.DEFINE_integer("batch_size", DEFAULT_BATCH_SIZE, "Images per global batch (a multiple of the device count).")
  flags.DEFINE_integer("shard_size", DEFAULT_SHARD_SIZE, "Rows per shard file.")
  flags.DEFINE_integer("image_size", None, "Override of the crop size S (resize scaled with it).")
  flags.DEFINE_integer("resize", None, "Override of the shorter side's resize R >= the crop (R = crop: whole image).")
  flags.DEFINE_enum(
    "interpolation", None, ["nearest", "bilinear", "bicubic", "lanczos"], "Override of the resize filter."
  )
  flags.DEFINE_enum(
    "split", "train", list(SPLITS), "With --config: the dataset split to embed (test: its test labels)."
  )
  flags.DEFINE_enum("on_bad_file", "error", list(bad_files.ON_BAD_FILE), "A file that cannot be decoded: error | skip.")
  flags.DEFINE_integer("workers", None, "Grain worker processes decoding (0: in this process; default min(8, CPUs-1)).")
  flags.DEFINE_bool("progress", True, "Show a progress bar on stderr.")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  from noisy_jax.parallel import distributed  # pylint: disable=g-import-not-at-top
  from noisy_jax.parallel import streaming  # pylint: disable=g-import-not-at-top

  distributed.maybe_initialize()
  f = flags.FLAGS
  summary = run(
    f.images,
    f.backbone,
    f.weights,
    f.workdir,
    batch_size=f.batch_size,
    shard_size=f.shard_size,
    image_size=f.image_size,
    on_bad_file=f.on_bad_file,
    workers=streaming.default_workers() if f.workers is None else f.workers,
    progress=f.progress,
    config=f.config,
    split=f.split,
    resize=f.resize,
    interpolation=f.interpolation,
  )
  print(summary.line(), flush=True)


if __name__ == "__main__":
  define_flags()
  flags.mark_flags_as_required(["backbone", "workdir"])
  cli.run(main)
