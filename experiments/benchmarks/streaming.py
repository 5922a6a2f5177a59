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

  python -m experiments.benchmarks.streaming [--workers 2] [--num-files 50000] [--epoch-images 5000] [--quick]
"""

from __future__ import annotations

import json
import math
import os
import threading
import time

from experiments.benchmarks import common

CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
GENERATOR_VERSION = 1  # bump when the pictures change, so that a cached folder is rewritten
MARKER = "benchmark_folder.json"
MIB = 2.0**20


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
# Peak RSS of this process and its workers


class RssSampler:
  """Samples RSS (this process, and the sum over its child processes) in a thread; peaks per labelled window."""

  def __init__(self, interval: float):
    import psutil  # pylint: disable=g-import-not-at-top

    self._psutil = psutil
    self._proc = psutil.Process()
    self._interval = interval
    self._label = None
    self._lock = threading.Lock()
    self._skip = {}  # pid -> True for multiprocessing's resource tracker (not a worker)
    self.peaks: dict[str, dict] = {}
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._run, daemon=True)
    self._thread.start()

  def _is_tracker(self, child) -> bool:
    if child.pid not in self._skip:
      try:
        self._skip[child.pid] = "resource_tracker" in " ".join(child.cmdline())
      except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
        return True
    return self._skip[child.pid]

  def sample(self) -> tuple[int, int, int, int]:
    """(this process's RSS, the workers' RSS summed, their USS summed, the number of workers): bytes."""
    own = self._proc.memory_info().rss
    workers, unique, count = 0, 0, 0
    for child in self._proc.children(recursive=True):
      try:
        if self._is_tracker(child):
          continue
        info = child.memory_full_info()  # uss: the pages only this process maps
        workers += info.rss
        unique += info.uss
        count += 1
      except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
        pass
    return own, workers, unique, count

  def _record(self, label: str) -> None:
    own, workers, unique, count = self.sample()
    with self._lock:
      p = self.peaks.setdefault(
        label,
        {
          "process_at_start_mib": own / MIB,
          "peak_total_mib": 0.0,
          "peak_process_mib": 0.0,
          "peak_workers_mib": 0.0,
          "peak_workers_uss_mib": 0.0,
          "max_workers_seen": 0,
          "samples": 0,
        },
      )
      p["peak_total_mib"] = max(p["peak_total_mib"], (own + workers) / MIB)
      p["peak_process_mib"] = max(p["peak_process_mib"], own / MIB)
      p["peak_workers_mib"] = max(p["peak_workers_mib"], workers / MIB)
      p["peak_workers_uss_mib"] = max(p["peak_workers_uss_mib"], unique / MIB)
      p["max_workers_seen"] = max(p["max_workers_seen"], count)
      p["samples"] += 1

  def _run(self) -> None:
    while not self._stop.wait(self._interval):
      label = self._label
      if label is not None:
        self._record(label)

  def watch(self, label: str, fn):
    """fn wrapped: the sampler attributes its samples to `label` while it runs (one sample at each end too)."""

    def run():
      self._record(label)
      self._label = label
      try:
        return fn()
      finally:
        self._label = None
        self._record(label)

    return run

  def close(self) -> None:
    self._stop.set()
    self._thread.join()


# ---------------------------------------------------------------------------------------------------------------
# The resident split's memory, float32 vs uint8 (fresh processes)


def _resident_child(dtype_name: str, num_examples: int, conn) -> None:
  """In a fresh (spawned) process: RSS before/after jax.device_put of a fresh [N, 32, 32, 3] array."""
  import gc  # pylint: disable=g-import-not-at-top

  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import psutil  # pylint: disable=g-import-not-at-top

  proc = psutil.Process()
  jax.block_until_ready(jax.device_put(np.zeros(8, np.float32)))  # the CPU client started
  before = proc.memory_info().rss
  host = np.empty((num_examples, 32, 32, 3), np.dtype(dtype_name))
  pattern = (np.arange(32 * 32 * 3) % 251).reshape(32, 32, 3)
  host[...] = pattern / 255.0 if host.dtype == np.float32 else pattern  # every page touched
  with_host = proc.memory_info().rss
  on_device = jax.block_until_ready(jax.device_put(host))
  after_put = proc.memory_info().rss
  aliases = None
  try:
    aliases = on_device.unsafe_buffer_pointer() == host.ctypes.data
  except Exception:  # pylint: disable=broad-except
    pass
  del host
  gc.collect()
  device_only = proc.memory_info().rss
  conn.send(
    {
      "dtype": dtype_name,
      "bytes": int(on_device.nbytes),
      "host_array_rss_mib": (with_host - before) / MIB,
      "device_put_rss_increase_mib": (after_put - with_host) / MIB,
      "kept_after_host_deleted_mib": (device_only - before) / MIB,
      "device_aliases_host": aliases,
    }
  )
  conn.close()


def resident_memory(num_examples: int) -> list[dict]:
  import multiprocessing  # pylint: disable=g-import-not-at-top

  ctx = multiprocessing.get_context("spawn")
  out = []
  for dtype_name in ("float32", "uint8"):
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_resident_child, args=(dtype_name, num_examples, send))
    child.start()
    send.close()
    out.append(receive.recv())
    child.join()
  return out


# ---------------------------------------------------------------------------------------------------------------


def main(argv=None):
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
  workers = [int(w) for w in args.workers.split(",")]
  data_dir = args.data_dir or default_data_dir(args.num_files)
  if not args.batch_size <= args.epoch_images <= args.num_files:  # epoch_lib.epoch_batches pads from the epoch's rows
    raise SystemExit(
      f"--epoch-images={args.epoch_images} must be in [--batch-size={args.batch_size}, --num-files={args.num_files}]."
    )
  load_at_start = [round(x, 2) for x in os.getloadavg()]
  threads = common.configure_threads(args.threads, host_malloc=args.host_malloc)

  import warnings  # pylint: disable=g-import-not-at-top

  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from PIL import Image  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import torch.nn.functional as F  # pylint: disable=g-import-not-at-top

  from experiments.benchmarks import jax_side  # pylint: disable=g-import-not-at-top
  from experiments.benchmarks import torch_side  # pylint: disable=g-import-not-at-top
  from noisy_jax.core import augment as augment_lib  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import disk  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import image_files  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import normalization  # pylint: disable=g-import-not-at-top
  from noisy_jax.parallel import mesh as mesh_lib
  from noisy_jax.parallel import streaming  # pylint: disable=g-import-not-at-top
  from noisy_jax.parallel import xla_options
  from noisy_jax.train import epoch as epoch_lib

  folder = ensure_folder(data_dir, args.num_files)
  print(
    f"folder {data_dir}: {args.num_files} training PNGs, mean {folder['mean_file_bytes']:.0f} bytes per file "
    f"({'reused' if folder['reused'] else 'written in %.1f s' % folder['write_seconds']})",
    flush=True,
  )
  batch_size, num_classes = args.batch_size, len(CLASSES)

  # Both sides list the same files in the same order (asserted).
  listing = disk.list_folder(data_dir)["train"]
  jax_paths = [os.path.join(data_dir, source) for source, _ in listing]
  class_ids = {name: i for i, name in enumerate(disk.class_order([label for _, label in listing]))}
  jax_labels = np.asarray([class_ids[label] for _, label in listing], np.int32)
  paths, labels = torch_listing(os.path.join(data_dir, "train"))
  assert [os.path.normpath(p) for p in paths] == [os.path.normpath(p) for p in jax_paths], "listings differ"
  assert list(jax_labels) == labels, "class ids differ"
  files = image_files.ImageFiles.probe(jax_paths)
  tenth = files[::10]

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

  def pil_to_tensor(pixels):  # torchvision's PILToTensor: uint8 HWC -> CHW
    return torch.from_numpy(pixels).permute(2, 0, 1)

  # DataLoader workers are forked (Linux default); they run only PIL/NumPy/PyTorch and never call into JAX.
  warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
  sampler = RssSampler(args.rss_interval)
  order_key = jax.random.key(1)

  # --- 1. The data path alone.
  def jax_data(source, w):
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

  def torch_data(w):
    loader = torch.utils.data.DataLoader(
      FolderImages(paths, labels, pil_to_tensor),
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

  data_sides = {}
  for w in workers:
    data_sides[f"noisy_jax W={w}"] = jax_data(files, w)
    data_sides[f"torch W={w}"] = torch_data(w)
    if len(tenth) >= batch_size:  # epoch_lib.epoch_batches pads the last batch from the epoch's own rows
      data_sides[f"noisy_jax W={w}, N/10"] = jax_data(tenth, w)
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

  # --- 2. A whole epoch feeding the ResNet-32 step.
  epoch_results, epoch_summary, epoch_times = {}, {}, {}
  n_epoch = args.epoch_images
  stride = args.num_files // n_epoch
  rows = np.arange(0, stride * n_epoch, stride)
  epoch_files = files[rows]
  epoch_paths, epoch_labels = [paths[i] for i in rows], jax_labels[rows]
  norm = None
  if not args.skip_epoch:
    import types  # pylint: disable=g-import-not-at-top

    norm = normalization.fit(types.SimpleNamespace(x_train=epoch_files, pixel_max=255.0), "per_channel")
    steps_per_epoch = math.ceil(n_epoch / batch_size)
    augment = augment_lib.make_augment(crop_padding=4, flip=True) if args.augment else None
    mesh = mesh_lib.make_mesh(1)
    model = jax_side.make_model("preact_resnet32", num_classes)
    method = jax_side.make_method("ce", num_classes)
    state = jax_side.make_state(model, (32, 32, 3), steps_per_epoch=steps_per_epoch)
    num_parameters = jax_side.count_parameters(state.params)
    jx = {
      "state": mesh_lib.replicate(state, mesh),
      "table": mesh_lib.replicate(jax_side.make_table(method, epoch_labels, num_classes), mesh),
      "epoch": 0,
    }
    waits = {}

    def timed_epoch_loader(*a, **kw):  # streaming.epoch_loader with the time spent waiting for batches counted
      start = time.perf_counter()
      loader = original_epoch_loader(*a, **kw)
      waits["current"] += time.perf_counter() - start
      inner_next = loader.__next__

      class Timed:
        def __iter__(self):
          return self

        def __next__(self):
          t = time.perf_counter()
          try:
            return inner_next()
          finally:
            waits["current"] += time.perf_counter() - t

        def __enter__(self):
          return self

        def __exit__(self, *exc):
          loader.close()

      return Timed()

    original_epoch_loader = streaming.epoch_loader

    def jax_epoch(w):
      fn = epoch_lib.make_epoch_fn(
        method,
        mesh,
        batch_size=batch_size,
        num_examples=n_epoch,
        augment=augment,
        compiler_options=xla_options.compiler_options(model, mesh.devices.flat[0].platform),
        normalize=norm,
        source=epoch_files,
        workers=w,
      )
      name = f"noisy_jax W={w}"

      def run():
        jx["epoch"] += 1
        waits["current"] = 0.0
        streaming.epoch_loader = timed_epoch_loader
        start = time.perf_counter()
        try:
          jx["state"], jx["table"], metrics = fn(
            jx["state"],
            jx["table"],
            None,
            jax.random.fold_in(order_key, jx["epoch"]),
            jnp.asarray(jx["epoch"], jnp.int32),
          )
          metrics = jax.device_get(metrics)  # fit's record of the epoch waits for it
        finally:
          streaming.epoch_loader = original_epoch_loader
        waits.setdefault(name, []).append(waits["current"] / (time.perf_counter() - start))
        return metrics

      return run

    torch.manual_seed(0)
    np.random.seed(0)
    net = torch_side.PreActResNet32(num_classes)
    assert torch_side.count_parameters(net) == num_parameters, (torch_side.count_parameters(net), num_parameters)
    optimizer = torch_side.sgd(net, lr=0.1, momentum=0.9, weight_decay=5e-4)
    mean, std = norm.mean.astype(np.float64), norm.std.astype(np.float64)
    transform = torch_side.cifar_train_transform(mean, std, crop_padding=4 if args.augment else 0, flip=args.augment)
    epoch_dataset = FolderImages(epoch_paths, [int(y) for y in epoch_labels], transform)

    def torch_epoch(w):
      loader = torch.utils.data.DataLoader(
        epoch_dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=w,
        persistent_workers=False,
        worker_init_fn=torch_side.seed_worker if w else None,
      )
      name = f"torch W={w}"

      def run():
        net.train()
        start = time.perf_counter()
        iterator = iter(loader)
        waited = time.perf_counter() - start
        total_loss, correct = 0.0, 0
        while True:
          t = time.perf_counter()
          try:
            inputs, targets = next(iterator)
          except StopIteration:
            break
          finally:
            waited += time.perf_counter() - t
          optimizer.zero_grad(set_to_none=True)
          logits = net(inputs)
          loss = F.cross_entropy(logits, targets)
          loss.backward()
          optimizer.step()
          with torch.no_grad():
            total_loss += loss.item() * len(targets)
            correct += (logits.argmax(1) == targets).sum().item()
        waits.setdefault(name, []).append(waited / (time.perf_counter() - start))
        return total_loss / n_epoch, correct / n_epoch

      return run

    sides = {}
    for w in workers:
      sides[f"noisy_jax W={w}"] = jax_epoch(w)
      sides[f"torch W={w}"] = torch_epoch(w)
    sides = {name: sampler.watch(f"epoch: {name}", fn) for name, fn in sides.items()}
    print(
      f"training epochs: {len(sides)} sides, {args.warmup} + {args.epoch_repeats} epochs of {n_epoch} images each ...",
      flush=True,
    )
    epoch_times = common.alternate(sides, repeats=args.epoch_repeats, warmup=args.warmup)
    epoch_summary = common.summarize(epoch_times, work=n_epoch, unit="images/s")
    for name, s in epoch_summary.items():
      timed = waits[name][args.warmup :]  # the warm-up epochs left out
      s["data_wait_fraction_median"] = float(np.median(timed))
      s["data_wait_fractions"] = timed
    epoch_results = {
      "parameters": num_parameters,
      "steps_per_epoch": steps_per_epoch,
      "normalization": {"mean": norm.mean.tolist(), "std": norm.std.tolist()},
    }
  sampler.close()

  # --- 4. The resident split, float32 vs uint8 (fresh processes).
  resident = resident_memory(args.resident_examples) if args.resident_examples else []

  # --- Tables and the record.
  tables = [
    "data path alone: one unit = one epoch of the files (the N/10 sides: every 10th file); x first per image",
    common.timing_table(data_summary, unit="images/s", scale=1.0, time_unit="s"),
  ]

  def pairs(summary, extra=None):
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

  tables.append(pairs(data_summary))
  rss_rows = []
  for label, p in sampler.peaks.items():
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
  tables += [
    "peak host RSS, MiB (total = this process + its workers' RSS; the process holds both frameworks; "
    "workers USS = pages only the workers map)",
    common.format_table(
      ["side", "peak total", "peak workers", "workers USS", "workers", "process at start", "peak process"], rss_rows
    ),
  ]
  if epoch_summary:
    tables += [
      f"training epoch, ResNet-32, {n_epoch} images, batch {batch_size}{', crop + flip' if args.augment else ''}",
      common.timing_table(epoch_summary, unit="images/s", scale=1.0, time_unit="s"),
      pairs(epoch_summary, "data_wait_fraction_median"),
    ]
  if resident:
    tables += [
      f"resident training split [{args.resident_examples}, 32, 32, 3] on the CPU device (fresh processes)",
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
  settings = {
    "num_files": args.num_files,
    "data_dir": data_dir,
    "mean_file_bytes": folder["mean_file_bytes"],
    "folder_reused": folder["reused"],
    "batch_size": batch_size,
    "workers": workers,
    "epoch_images": n_epoch,
    "epoch_repeats": args.epoch_repeats,
    "augment": bool(args.augment),
    "model": "preact_resnet32",
    "loss": "CE",
    "optimizer": "SGD lr 0.1 momentum 0.9 weight decay 5e-4",
    "rss_interval_s": args.rss_interval,
    "resident_examples": args.resident_examples,
    "load_average_start": load_at_start,
  }
  results = {
    "data_path": data_summary,
    "epoch": epoch_summary,
    "epoch_info": epoch_results,
    "rss": sampler.peaks,
    "resident": resident,
    "folder": folder,
  }
  common.report("streaming", args=args, threads=threads, settings=settings, results=results, notes=notes, tables=tables)


if __name__ == "__main__":
  main()
