"""What every benchmark shares: flags, thread settings, the alternating timer, statistics, tables, the JSON line.

Method (the same in every script):
  * both sides run in ONE process (except where memory is measured), on the same number of cores;
  * each side is warmed up first (compilation, oneDNN primitive caches, allocator pools);
  * then the sides are timed ALTERNATELY, A, B, A, B, ... (one unit of work each), so that a change in the load of
    the machine hits both sides alike; every unit ends by waiting for its result (`block_until_ready`; PyTorch's CPU
    eager mode is synchronous);
  * reported: the median and the interquartile range (and min/max) of the unit times, the throughput at the
    median, and each side's ratio to the first side: the ratio of the medians, and the median of the per-repeat
    ratios (robust to slow drifts of the load).

Threads: `--threads N` (default: every core this process may use) restricts the process to N cores with
`os.sched_setaffinity` BEFORE JAX starts its CPU backend (XLA sizes its intra-op thread pool from the schedulable
CPUs) and calls `torch.set_num_threads(N)`; both counts are printed.

Host malloc: `--host-malloc` (default 'auto', what `experiments/train.py` does: retained freed memory on a CPU-only
machine, glibc's defaults where an accelerator plugin is installed, `host_memory.should_retain`) applies
`noisy_jax.parallel.host_memory` before JAX starts; 'retain' forces it, 'system' measures with glibc's defaults. The
setting is process-wide, so in the one-process benchmarks the PyTorch side runs under it too (it changes PyTorch's step
by less than the noise: experiments/benchmarks/README.md).

PyTorch's device: `--torch-device cuda` (train_step, small_cnn_epoch, epoch) puts the PyTorch model and its fixed
tensors on the GPU (`torch_device`; an error, never a silent CPU run, where CUDA is not available), moves
DataLoader batches with `.to(device, non_blocking=True)` from pinned memory, and ends every timed unit with
`torch_sync` (`torch.cuda.synchronize()`), as the JAX side ends its units with `block_until_ready`. The header and
the JSON record's 'machine' name the devices both frameworks ran on (`machine_info`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import time
from typing import Callable, Mapping, Sequence


def base_parser(
  description: str, *, repeats: int, warmup: int = 2, torch_device: bool = False
) -> argparse.ArgumentParser:
  """The flags of every benchmark: --repeats, --warmup, --quick, --threads, --host-malloc; with `torch_device`
  (the scripts whose PyTorch side can run on a GPU) also --torch-device."""
  parser = argparse.ArgumentParser(description=description)
  parser.add_argument("--repeats", type=int, default=repeats, help="timed units per side (default %(default)s)")
  parser.add_argument("--warmup", type=int, default=warmup, help="untimed units per side first (default %(default)s)")
  parser.add_argument("--quick", action="store_true", help="tiny sizes and few repeats: a smoke run (< 60 s)")
  parser.add_argument(
    "--threads", type=int, default=0, help="cores for both frameworks (default 0: every core this process may use)"
  )
  parser.add_argument(
    "--host-malloc",
    default="auto",
    choices=("auto", "retain", "system"),
    help="glibc malloc policy set before JAX starts (parallel.host_memory; default %(default)s: "
    "retain unless an accelerator plugin is installed)",
  )
  if torch_device:
    parser.add_argument(
      "--torch-device",
      default="cpu",
      choices=("cpu", "cuda"),
      help="device of the PyTorch side (default %(default)s; cuda: an error if CUDA is not available)",
    )
  return parser


def configure_threads(threads: int = 0, *, with_torch: bool = True, host_malloc: str = "auto") -> dict:
  """Pins the process to `threads` cores (0: all allowed) and sets PyTorch's intra-op threads to match.

  Also applies the `host_malloc` policy ('auto', 'retain' or 'system', `noisy_jax.parallel.host_memory`); the returned
  counts carry whether retention is in force as 'host_malloc_retained'.

  Call before the first JAX computation (the CPU backend reads the affinity when it starts). Returns the counts
  to report: the cores allowed, JAX's CPU pool (= cores allowed) and `torch.get_num_threads()` (None without
  torch, or with `with_torch=False`: torch is then not imported).
  """
  allowed = sorted(os.sched_getaffinity(0))
  if threads:
    if threads > len(allowed):
      raise ValueError(f"--threads={threads} exceeds the {len(allowed)} cores this process may use.")
    allowed = allowed[:threads]
    os.sched_setaffinity(0, allowed)
  from noisy_jax.parallel import host_memory  # pylint: disable=g-import-not-at-top  (imports no JAX)

  info = {
    "cores": len(allowed),
    "jax_cpu_threads": len(os.sched_getaffinity(0)),
    "torch_threads": None,
    "host_malloc_retained": host_memory.configure(host_malloc),
  }
  if not with_torch:
    return info
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    return info
  torch.set_num_threads(len(allowed))
  info["torch_threads"] = torch.get_num_threads()
  info["torch_interop_threads"] = torch.get_num_interop_threads()
  return info


def torch_device(name: str):
  """`torch.device(name)` for the PyTorch side ('cpu' or 'cuda'), checked: 'cuda' raises where
  `torch.cuda.is_available()` is False, so that no benchmark silently measures PyTorch on the CPU. On 'cuda' it
  sets `torch.backends.cudnn.benchmark = True` (cuDNN picks each convolution's algorithm by timing them, as the
  CIFAR ports do and as XLA:GPU autotunes its own)."""
  import torch  # pylint: disable=g-import-not-at-top

  if name not in ("cpu", "cuda"):
    raise ValueError(f"--torch-device={name!r}; 'cpu' or 'cuda'.")
  if name == "cuda":
    if not torch.cuda.is_available():
      raise RuntimeError(
        f"--torch-device=cuda, but torch.cuda.is_available() is False (torch {torch.__version__}, "
        f"built with CUDA {torch.version.cuda}): no GPU for PyTorch here. Use --torch-device cpu."
      )
    torch.backends.cudnn.benchmark = True
  return torch.device(name)


def torch_sync(device) -> None:
  """Waits for the PyTorch work queued on `device` (`torch.cuda.synchronize()` on a GPU; CPU eager is synchronous)."""
  if device.type == "cuda":
    import torch  # pylint: disable=g-import-not-at-top

    torch.cuda.synchronize(device)


def device_info(torch_device_name: str = "cpu") -> dict:
  """The devices the two sides run on: JAX's default backend (platform, device kind, count) and PyTorch's device
  (with the GPU's name and torch's CUDA version on 'cuda'). Imports jax (and torch for 'cuda'): call it after the
  measurements (it starts JAX's backend if nothing has)."""
  info = {}
  try:
    import jax  # pylint: disable=g-import-not-at-top

    devices = jax.devices()
    info["jax"] = {"platform": devices[0].platform, "device_kind": devices[0].device_kind, "count": len(devices)}
  except Exception as error:  # pylint: disable=broad-except  (the header must still print)
    info["jax"] = {"error": repr(error)}
  info["torch"] = {"device": torch_device_name}
  if torch_device_name == "cuda":
    import torch  # pylint: disable=g-import-not-at-top

    info["torch"].update(
      device_name=torch.cuda.get_device_name(),
      cuda_version=torch.version.cuda,
      cudnn_version=torch.backends.cudnn.version(),
      cudnn_benchmark=torch.backends.cudnn.benchmark,
    )
  return info


def machine_info(torch_device_name: str = "cpu") -> dict:
  """CPU model, core count, load average, versions, the devices of both sides (`device_info`): what a reader needs
  to judge the numbers."""
  cpu = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          cpu = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  versions = {"python": platform.python_version()}
  for name in ("jax", "jaxlib", "flax", "optax", "torch", "numpy"):
    try:
      versions[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      pass
  return {
    "cpu": cpu,
    "os_cpu_count": os.cpu_count(),
    "platform": platform.platform(),
    "load_average": [round(x, 2) for x in os.getloadavg()],
    "versions": versions,
    "devices": device_info(torch_device_name),
  }


def alternate(sides: Mapping[str, Callable[[], object]], *, repeats: int, warmup: int) -> dict[str, list[float]]:
  """Runs each side's unit `warmup` times (untimed), then `repeats` times in turn A, B, ..., A, B, ...

  Each callable does one unit of work and returns only when it is finished. Returns name -> unit seconds.
  """
  for _ in range(warmup):
    for fn in sides.values():
      fn()
  times = {name: [] for name in sides}
  for _ in range(repeats):
    for name, fn in sides.items():
      start = time.perf_counter()
      fn()
      times[name].append(time.perf_counter() - start)
  return times


def _quartiles(values: Sequence[float]) -> tuple[float, float]:
  if len(values) < 2:
    return values[0], values[0]
  q = statistics.quantiles(values, n=4, method="inclusive")
  return q[0], q[2]


def summarize(times: Mapping[str, Sequence[float]], *, work: float, unit: str) -> dict[str, dict]:
  """Per side: median / q1 / q3 / min / max seconds, `work / median` in `unit` (e.g. images/s), ratios to the
  first side (`ratio_of_medians`: this side's median time / the first side's; `median_ratio`: median over
  repeats of the per-repeat time ratio). A ratio above 1 means this side is slower than the first."""
  names = list(times)
  ref = times[names[0]]
  out = {}
  for name in names:
    t = list(times[name])
    q1, q3 = _quartiles(t)
    median = statistics.median(t)
    out[name] = {
      "median_s": median,
      "q1_s": q1,
      "q3_s": q3,
      "min_s": min(t),
      "max_s": max(t),
      "repeats": len(t),
      f"{unit}_at_median": work / median,
      "ratio_of_medians": median / statistics.median(ref),
      "median_ratio": statistics.median(a / b for a, b in zip(t, ref)),
    }
  return out


def format_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
  """A plain text table with right-aligned columns."""
  cells = [[str(h) for h in header]] + [[_fmt(c) for c in row] for row in rows]
  widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
  lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
  lines.insert(1, "  ".join("-" * w for w in widths))
  return "\n".join(lines)


def _fmt(value) -> str:
  if isinstance(value, float):
    if value == 0 or 0.01 <= abs(value) < 1e5:
      return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    return f"{value:.3g}"
  return str(value)


def timing_table(
  summary: Mapping[str, Mapping[str, float]], *, unit: str, scale: float = 1e3, time_unit: str = "ms"
) -> str:
  """The standard table of `summarize`'s result: one row per side."""
  header = [
    "side",
    f"median {time_unit}",
    f"IQR {time_unit}",
    f"min-max {time_unit}",
    unit,
    "x first (medians)",
    "x first (paired)",
  ]
  rows = []
  for name, s in summary.items():
    rows.append(
      [
        name,
        s["median_s"] * scale,
        f"{s['q1_s'] * scale:.1f}-{s['q3_s'] * scale:.1f}",
        f"{s['min_s'] * scale:.1f}-{s['max_s'] * scale:.1f}",
        s[f"{unit}_at_median"],
        s["ratio_of_medians"],
        s["median_ratio"],
      ]
    )
  return format_table(header, rows)


def max_rss_mb() -> float:
  """This process's peak resident set size so far, MiB (`resource.getrusage`; Linux reports KiB)."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _devices_line(devices: dict) -> str:
  """E.g. 'JAX gpu (NVIDIA H100 80GB HBM3) x1; PyTorch cuda (NVIDIA H100 80GB HBM3, CUDA 13.0, cudnn.benchmark)'."""
  jax_info, torch_info = devices["jax"], devices["torch"]
  if "error" in jax_info:
    text = f"JAX: no device ({jax_info['error']})"
  else:
    text = f"JAX {jax_info['platform']} ({jax_info['device_kind']}) x{jax_info['count']}"
  text += f"; PyTorch {torch_info['device']}"
  if torch_info["device"] == "cuda":
    text += (
      f" ({torch_info['device_name']}, CUDA {torch_info['cuda_version']}, cuDNN {torch_info['cudnn_version']}"
      + (", cudnn.benchmark" if torch_info["cudnn_benchmark"] else "")
      + ")"
    )
  return text


def report(
  benchmark: str,
  *,
  args: argparse.Namespace,
  threads: dict,
  settings: dict,
  results: dict,
  notes: Sequence[str] = (),
  tables: Sequence[str] = (),
) -> None:
  """Prints the header, the tables, the notes and, last, one JSON line with everything."""
  machine = machine_info(getattr(args, "torch_device", "cpu"))
  print(f"== {benchmark} ==")
  print(f"cpu: {machine['cpu']} ({machine['os_cpu_count']} logical cores), load average now {machine['load_average']}")
  print("devices: " + _devices_line(machine["devices"]))
  print(
    f"threads: JAX/XLA CPU pool {threads['jax_cpu_threads']}, torch.get_num_threads() "
    f"{threads['torch_threads']}; host malloc retained: {threads.get('host_malloc_retained')}"
  )
  print("versions: " + ", ".join(f"{k} {v}" for k, v in machine["versions"].items()))
  print("settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
  for table in tables:
    print()
    print(table)
  notes = list(notes)
  if machine["load_average"][0] > 1.25 * (machine["os_cpu_count"] or 1):
    notes.append(
      f"BUSY MACHINE: 1-minute load average {machine['load_average'][0]} on {machine['os_cpu_count']} "
      "cores: other processes shared the CPU, these timings are not publishable. PyTorch's OpenMP "
      "threads suffer most (a thread waiting at a barrier for a descheduled one)."
    )
  if notes:
    print()
    for note in notes:
      print(f"note: {note}")
  record = {
    "benchmark": benchmark,
    "quick": bool(args.quick),
    "repeats": args.repeats,
    "warmup": args.warmup,
    "threads": threads,
    "machine": machine,
    "settings": settings,
    "results": results,
  }
  print(json.dumps(record, sort_keys=True, default=str))


# ---------------------------------------------------------------------------------------------------------------
# Train-step variants side by side (label_table_overhead.py, two_networks.py)

STEP_INPUT_SHAPES = {"small_cnn": (28, 28, 1), "preact_resnet32": (32, 32, 3)}


def step_variants_args(description: str, argv=None):
  """(args, threads) of a benchmark that times train-step variants alternately on one synthetic batch: the base
  flags plus --model, --batch-size, --num-examples (label-table rows), --steps (per timed unit); --quick shrinks
  them all. Threads are configured before JAX is imported."""
  parser = base_parser(description, repeats=20)
  parser.add_argument("--model", choices=tuple(STEP_INPUT_SHAPES), default="small_cnn")
  parser.add_argument("--batch-size", type=int, default=128)
  parser.add_argument("--num-examples", type=int, default=50_000)
  parser.add_argument("--steps", type=int, default=10, help="train steps per timed unit")
  args = parser.parse_args(argv)
  if args.quick:
    args.repeats, args.warmup, args.steps, args.num_examples, args.batch_size = 3, 1, 2, 1000, 32
  return args, configure_threads(args.threads, host_malloc=args.host_malloc)


def step_variants_settings(args, **extra) -> dict:
  """The settings line of such a benchmark: model, batch, synthetic input shape, table rows, steps per unit."""
  shape = ",".join(map(str, STEP_INPUT_SHAPES[args.model]))
  return {
    "model": args.model,
    "batch_size": args.batch_size,
    "input": f"synthetic [B,{shape}]",
    "table_rows": args.num_examples,
    **extra,
    "steps_per_unit": args.steps,
  }
