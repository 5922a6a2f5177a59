"""Streaming input from a folder of PNGs: noisy_jax's Grain pipeline vs a PyTorch ImageFolder + DataLoader loop.

The data: N = 50,000 RGB PNGs of 32x32 in the image_folder layout ROOT/train/CLASS/NNNNN.png (10 classes, 5,000
each; plus ROOT/test with N/50 files, so that the folder is also a valid `image_folder` dataset). The pixels are
seeded and CIFAR-like in the way that matters for PNG: smooth random colour fields (three octaves of bilinearly
upsampled random grids around a random mean colour) plus Gaussian noise (sigma 6), which PNG compresses to about
2.2 KB per file (raw: 3,072 bytes); the output prints the measured mean. The folder is written once under
--data-dir (default workdirs/benchmarks/png50k; another N gets its own folder) and reused while its marker file
matches N and the generator version.

Four measurements, in one process (Grain's workers are spawned, PyTorch's forked, as each library does by default):

1. Data path alone, one unit = one epoch of the N files, every batch of 128 consumed, sides alternated:
   noisy_jax: `streaming.epoch_loader` over an `ImageFiles` of ROOT/train (listed by `data.disk.list_folder`, as
     the image_folder loader lists it) with W Grain worker processes, in the order `epoch_lib.epoch_batches` gives
     one epoch key (the last batch padded to 128 with invalid rows, as the trainer reads it);
   PyTorch: a Dataset written here that does what torchvision's `ImageFolder` + `PILToTensor()` do (the classes
     are the sorted sub-folders of ROOT/train, the files of each sorted; a sample is opened with PIL, converted to
     RGB and returned as a uint8 CHW tensor), in `DataLoader(batch_size=128, shuffle=True, num_workers=W,
     persistent_workers=False)` (torchvision is not installed here, see README). A noisy_jax side over every 10th
     file (N/10) shows how its memory depends on N.
2. A whole epoch feeding the pre-activation ResNet-32 train step (batch 128, cross entropy, SGD momentum 0.9 +
   weight decay 5e-4) over --epoch-images files (default 5,000: every (N / 5,000)-th file of the folder, the
   classes balanced; a full 50,000-image epoch is ~200 s per side on a 2-core CPU):
   noisy_jax: `epoch_lib.make_epoch_fn(..., source=ImageFiles, normalize=normalization.fit(<those files>,
     'per_channel'), workers=W)`: what `loop.fit` runs per epoch with config.input='streaming' (uint8 batches
     from the Grain workers, normalised on the device inside the step), then the metrics fetched;
   PyTorch: the Dataset above with ToTensor + Normalize(the same mean and std) per example (torch_side.py) in the
     same DataLoader, the step as in train_step.py / epoch.py.
   `--augment` adds random crop (padding 4) + horizontal flip to both (noisy_jax.core.augment on the device; the
   per-example torchvision-style transforms of torch_side.py).
   Waiting for data: the time spent in next(loader) (and in creating the loader: worker start) over the epoch
   time. PyTorch's step is synchronous, so that is the time its step waited. noisy_jax dispatches steps
   asynchronously, so the host may wait for data while the previous step still runs: its fraction bounds the
   time the step waited from above. (Measured by wrapping `streaming.epoch_loader` for the noisy_jax epoch.)
3. Peak host RSS per side: a background thread samples the RSS of this process plus that of all its child
   processes (the workers; multiprocessing's resource tracker left out) every --rss-interval seconds while the
   side runs. Both sides live in this one process, so its own RSS holds both frameworks; the workers' RSS is each
   side's own. RSS counts shared pages in every process that maps them (forked workers share the parent's pages
   copy-on-write), so the sum overstates what the workers add; the workers' USS (pages mapped by that process only,
   psutil's memory_full_info) is reported beside it.
4. The resident path's memory before/after uint8: a CIFAR-shaped training split [50,000, 32, 32, 3] as float32 (the
   old resident storage, standardised on the host) and as uint8 (today's): its bytes, and the RSS increase of
   `jax.device_put` of a fresh host array (block_until_ready) on the CPU device, each in a fresh process with
   glibc's default malloc (so that freed memory returns to the system); also what remains once the host array is
   deleted (the device copy, or the host array if the CPU device aliases it).

Measurement 2 is in streaming_epoch.py, the memory measurements (3, 4) in streaming_memory.py.

  python -m experiments.benchmarks.streaming [--workers 2] [--num-files 50000] [--epoch-images 5000] [--quick]
"""

from __future__ import annotations

import json
import os
import time

from experiments.benchmarks import common
from experiments.benchmarks import streaming_epoch
from experiments.benchmarks import streaming_memory

CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
GENERATOR_VERSION = 1  # bump when the pictures change, so that a cached folder is rewritten
MARKER = "benchmark_folder.json"
MIB = streaming_memory.MIB


# ---------------------------------------------------------------------------------------------------------------
# The folder of PNGs


def default_data_dir(num_files: int) -> str:
  name = f"png{num_files // 1000}k" if num_files % 1000 == 0 else f"png{num_files}"
  return os.path.join("workdirs", "benchmarks", name)


def _upsample_matrix(grid: int, size: int = 32):
  """[size, grid] bilinear weights from `grid` points to `size` pixels (corners aligned)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  pos = np.linspace(0, grid - 1, size)
  lo = np.floor(pos).astype(int).clip(0, grid - 2)
  frac = pos - lo
  m = np.zeros((size, grid))
  m[np.arange(size), lo] = 1 - frac
  m[np.arange(size), lo + 1] = frac
  return m


def synthetic_pictures(rng, count: int):
  """uint8 [count, 32, 32, 3]: a random mean colour + smooth random fields (grids of 3, 6, 12 points, amplitudes
  70, 35, 18) + Gaussian noise (sigma 6), rounded and clipped."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  x = rng.uniform(60, 190, (count, 1, 1, 3)) + rng.normal(0, 6, (count, 32, 32, 3))
  for grid, amplitude in ((3, 70), (6, 35), (12, 18)):
    m = _upsample_matrix(grid)
    x = x + np.einsum("hi,nijc,wj->nhwc", m, rng.normal(0, amplitude, (count, grid, grid, 3)), m)
  return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def _write_split(root: str, split: str, count: int, rng, first_index: int = 0) -> int:
  """Writes `count` PNGs to root/split/CLASS/NNNNN.png (file i in class i % 10); returns their total bytes."""
  from PIL import Image  # pylint: disable=g-import-not-at-top

  for name in CLASSES:
    os.makedirs(os.path.join(root, split, name), exist_ok=True)
  total, chunk = 0, 1000
  for start in range(0, count, chunk):
    pictures = synthetic_pictures(rng, min(chunk, count - start))
    for j, pixels in enumerate(pictures):
      i = first_index + start + j
      path = os.path.join(root, split, CLASSES[i % len(CLASSES)], f"{i:05d}.png")
      Image.fromarray(pixels).save(path, format="PNG")
      total += os.path.getsize(path)
  return total


def ensure_folder(root: str, num_files: int, *, seed: int = 0) -> dict:
  """The folder of `num_files` training PNGs at `root`, written now unless a matching one is there; its marker
  (N, seed, version, sizes, time to write)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  want = {
    "num_files": num_files,
    "num_test_files": max(len(CLASSES), num_files // 50),
    "seed": seed,
    "version": GENERATOR_VERSION,
  }
  marker_path = os.path.join(root, MARKER)
  if os.path.exists(marker_path):
    with open(marker_path) as f:
      marker = json.load(f)
    if {k: marker.get(k) for k in want} == want:
      return dict(marker, reused=True)
    raise SystemExit(
      f"{root!r} holds another benchmark folder ({marker_path}: "
      f"{ {k: marker.get(k) for k in want} }, wanted {want}); remove it or pass another --data-dir."
    )
  if os.path.exists(root) and os.listdir(root):
    raise SystemExit(f"{root!r} exists without {MARKER}; remove it or pass another --data-dir.")
  partial = f"{root}.partial-{os.getpid()}"
  start = time.perf_counter()
  rng = np.random.default_rng(seed)
  train_bytes = _write_split(partial, "train", num_files, rng)
  _write_split(partial, "test", want["num_test_files"], rng, first_index=num_files)
  marker = dict(
    want, mean_file_bytes=train_bytes / num_files, train_bytes=train_bytes, write_seconds=time.perf_counter() - start
  )
  with open(os.path.join(partial, MARKER), "w") as f:
    json.dump(marker, f, indent=1)
  os.makedirs(os.path.dirname(os.path.abspath(root)), exist_ok=True)
  if os.path.exists(root):
    os.rmdir(root)  # empty (checked above)
  os.rename(partial, root)
  return dict(marker, reused=False)


def torch_listing(train_dir: str):
  """(paths, labels) as torchvision's ImageFolder lists them: classes = the sorted sub-folders, files of each class
  sorted, class ids in that order."""
  classes = sorted(e.name for e in os.scandir(train_dir) if e.is_dir())
  paths, labels = [], []
  for label, name in enumerate(classes):
    folder = os.path.join(train_dir, name)
    for file in sorted(os.listdir(folder)):
      if file.lower().endswith((".png", ".jpg", ".jpeg")):
        paths.append(os.path.join(folder, file))
        labels.append(label)
  return paths, labels


# ---------------------------------------------------------------------------------------------------------------
# The command line, the listings and the PyTorch dataset


def _parse_args(argv):
  """The command line (common.base_parser's flags and this script's), --quick's sizes applied, --epoch-images
  checked."""
  parser = common.base_parser(__doc__.splitlines()[0], repeats=5, warmup=1)
  parser.add_argument(
    "--workers",
    default="2",
    help="comma-separated worker counts W (Grain workers and DataLoader num_workers alike), one "
    "pair of sides each, e.g. 0,2 (default %(default)s)",
  )
  parser.add_argument("--num-files", type=int, default=50_000, help="training PNGs in the folder (N)")
  parser.add_argument("--data-dir", default=None, help="the folder (default workdirs/benchmarks/png50k for N=50,000)")
  parser.add_argument("--batch-size", type=int, default=128)
  parser.add_argument(
    "--epoch-images",
    type=int,
    default=5000,
    help="files per training epoch (every (N / this)-th file; default %(default)s)",
  )
  parser.add_argument("--epoch-repeats", type=int, default=3, help="timed training epochs per side")
  parser.add_argument("--augment", action="store_true", help="crop (padding 4) + flip in the training epochs")
  parser.add_argument("--skip-epoch", action="store_true", help="measure the data path only")
  parser.add_argument(
    "--resident-examples",
    type=int,
    default=50_000,
    help="rows of the CIFAR-shaped split of the resident memory measurement (0: skip it)",
  )
  parser.add_argument("--rss-interval", type=float, default=0.05, help="seconds between RSS samples")
  args = parser.parse_args(argv)
  if args.quick:  # every code path once, tiny: 640 files, batch 32, 2 training steps
    args.repeats, args.warmup, args.epoch_repeats, args.batch_size = 1, 1, 1, 32
    args.num_files, args.epoch_images, args.resident_examples = 640, 64, 5000
  if not args.batch_size <= args.epoch_images <= args.num_files:  # epoch_lib.epoch_batches pads from the epoch's rows
    raise SystemExit(
      f"--epoch-images={args.epoch_images} must be in [--batch-size={args.batch_size}, --num-files={args.num_files}]."
    )
  return args


def _listings(data_dir: str):
  """(files, labels, paths, torch labels): the training files as noisy_jax lists them (an ImageFiles, int32 class
  ids) and as torchvision's ImageFolder does (paths, ids); both the same files in the same order (asserted)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  from noisy_jax.data import disk  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import image_files  # pylint: disable=g-import-not-at-top

  listing = disk.list_folder(data_dir)["train"]
  jax_paths = [os.path.join(data_dir, source) for source, _ in listing]
  class_ids = {name: i for i, name in enumerate(disk.class_order([label for _, label in listing]))}
  jax_labels = np.asarray([class_ids[label] for _, label in listing], np.int32)
  paths, labels = torch_listing(os.path.join(data_dir, "train"))
  assert [os.path.normpath(p) for p in paths] == [os.path.normpath(p) for p in jax_paths], "listings differ"
  assert list(jax_labels) == labels, "class ids differ"
  return image_files.ImageFiles.probe(jax_paths), jax_labels, paths, labels


def _folder_images_class():
  """The PyTorch Dataset of torchvision's ImageFolder: `FolderImages(paths, labels, transform)`, whose sample is
  PIL open, convert('RGB'), then `transform` of the HWC uint8 array, and the label."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from PIL import Image  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top

  class FolderImages(torch.utils.data.Dataset):
    """ImageFolder's sample: PIL open, convert('RGB'), then `transform` of the HWC uint8 array, and the label."""

    def __init__(self, paths, labels, transform):
      self.paths, self.labels, self.transform = list(paths), list(labels), transform

    def __len__(self):
      return len(self.paths)

    def __getitem__(self, i):
      with open(self.paths[i], "rb") as f:
        image = Image.open(f).convert("RGB")  # torchvision's pil_loader
      return self.transform(np.array(image)), self.labels[i]  # one copy of the pixels, as torchvision makes

  return FolderImages


def _pil_to_tensor(pixels):
  """torchvision's PILToTensor: uint8 HWC -> CHW."""
  import torch  # pylint: disable=g-import-not-at-top

  return torch.from_numpy(pixels).permute(2, 0, 1)


# ---------------------------------------------------------------------------------------------------------------
# 1. The data path alone


def _jax_data_side(source, w: int, *, batch_size: int, order_key):
  """`run()`: one epoch of `source` through streaming.epoch_loader with `w` Grain workers, every batch consumed."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from noisy_jax.parallel import streaming  # pylint: disable=g-import-not-at-top
  from noisy_jax.train import epoch as epoch_lib  # pylint: disable=g-import-not-at-top

  state = {"epoch": 0}

  def run():
    state["epoch"] += 1
    indices, valid = epoch_lib.epoch_batches(jax.random.fold_in(order_key, state["epoch"]), len(source), batch_size)
    count = 0
    with streaming.epoch_loader(source, np.asarray(indices), np.asarray(valid), workers=w) as loader:
      for batch in loader:
        assert batch["images"].shape[1:] == (32, 32, 3) and batch["images"].dtype == np.uint8
        count += int(batch["valid"].sum())
    assert count == len(source), (count, len(source))

  return run


def _torch_data_side(folder_images, paths, labels, w: int, *, batch_size: int):
  """`run()`: one epoch of the files (uint8 CHW samples of `folder_images`) through a shuffling DataLoader with `w`
  workers."""
  import torch  # pylint: disable=g-import-not-at-top

  loader = torch.utils.data.DataLoader(
    folder_images(paths, labels, _pil_to_tensor),
    batch_size=batch_size,
    shuffle=True,
    num_workers=w,
    persistent_workers=False,
  )

  def run():
    count = 0
    for images, targets in loader:
      assert images.dtype == torch.uint8 and tuple(images.shape[1:]) == (3, 32, 32)
      count += len(targets)
    assert count == len(paths)

  return run


def _measure_data_path(args, workers, files, torch_files, *, sampler, order_key) -> dict:
  """The data path's summary (measurement 1): per side, seconds per epoch and images/s, ratios per image.
  torch_files: (FolderImages, paths, labels)."""
  tenth = files[::10]
  data_sides = {}
  for w in workers:
    data_sides[f"noisy_jax W={w}"] = _jax_data_side(files, w, batch_size=args.batch_size, order_key=order_key)
    data_sides[f"torch W={w}"] = _torch_data_side(*torch_files, w, batch_size=args.batch_size)
    if len(tenth) >= args.batch_size:  # epoch_lib.epoch_batches pads the last batch from the epoch's own rows
      data_sides[f"noisy_jax W={w}, N/10"] = _jax_data_side(tenth, w, batch_size=args.batch_size, order_key=order_key)
  data_sides = {name: sampler.watch(f"data: {name}", fn) for name, fn in data_sides.items()}
  print(f"data path: {len(data_sides)} sides, {args.warmup} + {args.repeats} epochs each ...", flush=True)
  data_times = common.alternate(data_sides, repeats=args.repeats, warmup=args.warmup)
  work = {name: (len(tenth) if name.endswith("N/10") else len(files)) for name in data_sides}
  # Ratios to the first side per image (the N/10 sides read fewer files): summarize the seconds per image.
  per_image = {name: [t / work[name] for t in times] for name, times in data_times.items()}
  data_summary = common.summarize(per_image, work=1.0, unit="images/s")
  for name, s in data_summary.items():  # back to seconds per epoch
    for key in ("median_s", "q1_s", "q3_s", "min_s", "max_s"):
      s[key] *= work[name]
  return data_summary


# ---------------------------------------------------------------------------------------------------------------
# Tables and the record


def _pairs_table(summary: dict, workers, extra: str | None = None) -> str:
  """noisy_jax vs PyTorch at each W: images/s of both and the speed ratio (and both sides' `extra` field)."""
  rows_ = []
  for w in workers:
    jx_s, th_s = summary[f"noisy_jax W={w}"], summary[f"torch W={w}"]
    row = [w, jx_s["images/s_at_median"], th_s["images/s_at_median"], th_s["median_s"] / jx_s["median_s"]]
    if extra:
      row += [jx_s[extra], th_s[extra]]
    rows_.append(row)
  header = ["W", "noisy_jax images/s", "torch images/s", "speed vs PyTorch"]
  if extra:
    header += ["noisy_jax data wait", "torch data wait"]
  return common.format_table(header, rows_)


def _rss_tables(peaks: dict) -> list[str]:
  """The peak host RSS table of every watched side, with its title."""
  rss_rows = []
  for label, p in peaks.items():
    rss_rows.append(
      [
        label,
        p["peak_total_mib"],
        p["peak_workers_mib"],
        p["peak_workers_uss_mib"],
        p["max_workers_seen"],
        p["process_at_start_mib"],
        p["peak_process_mib"],
      ]
    )
  return [
    "peak host RSS, MiB (total = this process + its workers' RSS; the process holds both frameworks; "
    "workers USS = pages only the workers map)",
    common.format_table(
      ["side", "peak total", "peak workers", "workers USS", "workers", "process at start", "peak process"], rss_rows
    ),
  ]


def _resident_tables(resident: list[dict], num_examples: int) -> list[str]:
  """The resident split's memory table (measurement 4), with its title."""
  return [
    f"resident training split [{num_examples}, 32, 32, 3] on the CPU device (fresh processes)",
    common.format_table(
      [
        "dtype",
        "bytes MiB",
        "host array RSS",
        "device_put RSS increase",
        "kept after host array deleted",
        "device aliases host",
      ],
      [
        [
          r["dtype"],
          r["bytes"] / MIB,
          r["host_array_rss_mib"],
          r["device_put_rss_increase_mib"],
          r["kept_after_host_deleted_mib"],
          r["device_aliases_host"],
        ]
        for r in resident
      ],
    ),
  ]


def _tables(args, workers, *, data_summary: dict, epoch_summary: dict, peaks: dict, resident: list[dict]) -> list[str]:
  """The report's tables: the data path, peak RSS, the training epoch (if measured), the resident split (if
  measured)."""
  tables = [
    "data path alone: one unit = one epoch of the files (the N/10 sides: every 10th file); x first per image",
    common.timing_table(data_summary, unit="images/s", scale=1.0, time_unit="s"),
  ]
  tables.append(_pairs_table(data_summary, workers))
  tables += _rss_tables(peaks)
  if epoch_summary:
    tables += [
      f"training epoch, ResNet-32, {args.epoch_images} images, batch {args.batch_size}"
      f"{', crop + flip' if args.augment else ''}",
      common.timing_table(epoch_summary, unit="images/s", scale=1.0, time_unit="s"),
      _pairs_table(epoch_summary, workers, "data_wait_fraction_median"),
    ]
  if resident:
    tables += _resident_tables(resident, args.resident_examples)
  return tables


def _notes(args, folder: dict) -> list[str]:
  """The report's notes on the files, the ratios, batches, prefetching, workers, data wait and RSS."""
  batch_size = args.batch_size
  example_bytes = 32 * 32 * 3
  prefetch_batches = 2  # streaming.Loader's per_worker_buffer_size
  notes = [
    f"files: {args.num_files} PNGs, mean {folder['mean_file_bytes']:.0f} bytes (raw pixels: {example_bytes}); "
    "the warm-up epoch puts them in the page cache, so the timed epochs measure decoding, not the disk.",
    "speed vs PyTorch = PyTorch's time / noisy_jax's time at the same W (above 1: noisy_jax is faster).",
    f"noisy_jax reads ceil(N/{batch_size}) full batches (the last one padded with invalid rows, as the trainer "
    "does); PyTorch's last batch is short.",
    f"prefetch bound: noisy_jax keeps {prefetch_batches} batches per Grain worker "
    f"({prefetch_batches} x {batch_size} x {example_bytes} bytes = "
    f"{prefetch_batches * batch_size * example_bytes / MIB:.2f} MiB each); PyTorch's DataLoader "
    "prefetch_factor 2 per worker likewise; each worker also holds the list of N paths (its only O(N) state).",
    "workers start anew every epoch on both sides (persistent_workers=False; Grain spawns, the DataLoader "
    "forks) and share the cores with the training threads.",
    "data wait: time in next(loader) and creating the loader / epoch time; PyTorch's step is synchronous (the "
    "step waited that long), noisy_jax dispatches asynchronously (an upper bound on the step's wait).",
    "RSS sums count shared pages in every process (forked workers share the parent's pages copy-on-write); "
    "the workers' USS (unique set size) leaves shared pages out.",
  ]
  if args.quick:
    notes.append("--quick: a smoke run (640 files, batch 32, 2 training steps); the numbers mean nothing.")
  return notes


def _settings(args, workers, data_dir: str, folder: dict, load_at_start) -> dict:
  """The report's settings."""
  return {
    "num_files": args.num_files,
    "data_dir": data_dir,
    "mean_file_bytes": folder["mean_file_bytes"],
    "folder_reused": folder["reused"],
    "batch_size": args.batch_size,
    "workers": workers,
    "epoch_images": args.epoch_images,
    "epoch_repeats": args.epoch_repeats,
    "augment": bool(args.augment),
    "model": "preact_resnet32",
    "loss": "CE",
    "optimizer": "SGD lr 0.1 momentum 0.9 weight decay 5e-4",
    "rss_interval_s": args.rss_interval,
    "resident_examples": args.resident_examples,
    "load_average_start": load_at_start,
  }


def main(argv=None):
  args = _parse_args(argv)
  workers = [int(w) for w in args.workers.split(",")]
  data_dir = args.data_dir or default_data_dir(args.num_files)
  load_at_start = [round(x, 2) for x in os.getloadavg()]
  threads = common.configure_threads(args.threads, host_malloc=args.host_malloc)

  import warnings  # pylint: disable=g-import-not-at-top

  import jax  # pylint: disable=g-import-not-at-top

  folder = ensure_folder(data_dir, args.num_files)
  print(
    f"folder {data_dir}: {args.num_files} training PNGs, mean {folder['mean_file_bytes']:.0f} bytes per file "
    f"({'reused' if folder['reused'] else 'written in %.1f s' % folder['write_seconds']})",
    flush=True,
  )
  # Both sides list the same files in the same order (asserted).
  files, jax_labels, paths, labels = _listings(data_dir)
  torch_files = (_folder_images_class(), paths, labels)
  # DataLoader workers are forked (Linux default); they run only PIL/NumPy/PyTorch and never call into JAX.
  warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
  sampler = streaming_memory.RssSampler(args.rss_interval)
  order_key = jax.random.key(1)

  # --- 1. The data path alone.
  data_summary = _measure_data_path(args, workers, files, torch_files, sampler=sampler, order_key=order_key)
  # --- 2. A whole epoch feeding the ResNet-32 step.
  epoch_results, epoch_summary = {}, {}
  if not args.skip_epoch:
    epoch_results, epoch_summary = streaming_epoch.measure_epochs(
      args, workers, files, jax_labels, torch_files, num_classes=len(CLASSES), sampler=sampler, order_key=order_key
    )
  sampler.close()
  # --- 4. The resident split, float32 vs uint8 (fresh processes).
  resident = streaming_memory.resident_memory(args.resident_examples) if args.resident_examples else []

  # --- Tables and the record.
  tables = _tables(
    args, workers, data_summary=data_summary, epoch_summary=epoch_summary, peaks=sampler.peaks, resident=resident
  )
  results = {
    "data_path": data_summary,
    "epoch": epoch_summary,
    "epoch_info": epoch_results,
    "rss": sampler.peaks,
    "resident": resident,
    "folder": folder,
  }
  common.report(
    "streaming",
    args=args,
    threads=threads,
    settings=_settings(args, workers, data_dir, folder, load_at_start),
    results=results,
    notes=_notes(args, folder),
    tables=tables,
  )


if __name__ == "__main__":
  main()
