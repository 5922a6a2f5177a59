"""First-step cost (compilation) and peak memory of the train step: pre-activation ResNet-32 and SmallCNN,
noisy_jax vs PyTorch, each measured in a FRESH process (so that memory and caches belong to one side only).

Per (framework, model) worker process, batch 128 (synthetic data), cross entropy, SGD momentum 0.9 + wd:
  import s        importing the framework (and noisy_jax / the torch models);
  init s          building the model, its parameters and the optimizer state (Flax `model.init` runs op by op);
  first step s    time to the first finished train step from there: tracing + lowering + XLA compilation + one run
                  for noisy_jax (a fresh `jax.jit`), oneDNN primitive creation + one run for PyTorch;
  lower s, compile s  noisy_jax only, on a second fresh jit of the same step: `jitted.lower(...)`, `.compile()`;
  step ms         the median of the following steps (steady state, for scale);
  RSS after import / peak RSS  MiB, `resource.getrusage(RUSAGE_SELF).ru_maxrss` after the imports and at the end;
  XLA buffers     noisy_jax only: the compiled step's `memory_analysis()` (arguments, outputs, temporaries) and,
                  where the backend has them, `device.memory_stats()` (the CPU backend returns None; on a GPU its
                  'peak_bytes_in_use' is the column 'device peak MiB').
The parent runs the workers alternately (JAX, torch, JAX, torch, ...) `--repeats` times and reports medians.
JAX's persistent compilation cache must be off (it is unless configured): the worker prints its setting.
JAX runs on its default backend (the GPU on a GPU machine); the PyTorch worker always runs on the CPU (this script
has no --torch-device), so on a GPU machine its rows are CPU numbers, for scale only.

  python -m experiments.benchmarks.compile_and_memory [--repeats 3] [--models preact_resnet32,small_cnn] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from experiments.benchmarks import common

_START = time.perf_counter()
INPUT_SHAPES = {"preact_resnet32": (32, 32, 3), "small_cnn": (28, 28, 1)}
FRAMEWORKS = ("noisy_jax", "torch")
FIELDS = (
  "import_s",
  "init_s",
  "first_step_s",
  "lower_s",
  "compile_s",
  "step_ms",
  "rss_after_import_mb",
  "peak_rss_mb",
  "xla_argument_mb",
  "xla_output_mb",
  "xla_alias_mb",
  "xla_temp_mb",
  "device_peak_bytes_in_use_mb",
)  # a worker's measurements: the first 8 in the main table, the rest in the XLA buffers' table


def _jax_worker(model_name: str, batch_size: int, steps: int) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from experiments.benchmarks import jax_side  # pylint: disable=g-import-not-at-top

  out = {
    "import_s": time.perf_counter() - _START,
    "rss_after_import_mb": common.max_rss_mb(),
    "compilation_cache_dir": jax.config.jax_compilation_cache_dir,
  }
  batch = np.random.default_rng(0).standard_normal((batch_size, *INPUT_SHAPES[model_name])).astype(np.float32)
  start = time.perf_counter()
  runner = jax_side.StepRunner(
    model_name=model_name, method="ce", batch=batch, num_examples=50_000, jit_init=False
  )  # as fit builds it
  jax.block_until_ready(runner.state)
  out["init_s"] = time.perf_counter() - start
  start = time.perf_counter()
  runner(1)
  out["first_step_s"] = time.perf_counter() - start
  out["step_ms"] = _median_step_ms(lambda: runner(1), steps)

  fresh = jax_side.make_step(runner.method, runner.mesh, runner.model)  # a new jit: nothing cached for it
  start = time.perf_counter()
  lowered = fresh.lower(*runner.args())
  out["lower_s"] = time.perf_counter() - start
  start = time.perf_counter()
  compiled = lowered.compile()
  out["compile_s"] = time.perf_counter() - start
  analysis = compiled.memory_analysis()
  if analysis is not None:
    for field in (
      "argument_size_in_bytes",
      "output_size_in_bytes",
      "alias_size_in_bytes",
      "temp_size_in_bytes",
      "generated_code_size_in_bytes",
    ):
      if hasattr(analysis, field):
        out[f"xla_{field.replace('_size_in_bytes', '')}_mb"] = getattr(analysis, field) / 2**20
  stats = jax.local_devices()[0].memory_stats()
  if stats:
    out["device_peak_bytes_in_use_mb"] = stats.get("peak_bytes_in_use", 0) / 2**20
  out["device_memory_stats"] = "available" if stats else "None (not provided by this backend)"
  out["parameters"] = runner.num_parameters
  out["peak_rss_mb"] = common.max_rss_mb()
  return out


def _torch_worker(model_name: str, batch_size: int, steps: int) -> dict:
  import torch  # pylint: disable=g-import-not-at-top
  import torch.nn.functional as F  # pylint: disable=g-import-not-at-top

  from experiments.benchmarks import torch_side  # pylint: disable=g-import-not-at-top

  out = {"import_s": time.perf_counter() - _START, "rss_after_import_mb": common.max_rss_mb()}
  h, w, c = INPUT_SHAPES[model_name]
  torch.manual_seed(0)
  x, y = torch.randn(batch_size, c, h, w), torch.randint(0, 10, (batch_size,))
  start = time.perf_counter()
  if model_name == "small_cnn":
    net = torch_side.SmallCNN(10, in_channels=c, image_size=h)
  else:
    net = torch_side.PreActResNet32(10)
  optimizer = torch_side.sgd(net, lr=0.1, momentum=0.9, weight_decay=5e-4)
  net.train()
  out["init_s"] = time.perf_counter() - start

  def step():
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()

  start = time.perf_counter()
  step()
  out["first_step_s"] = time.perf_counter() - start
  out["step_ms"] = _median_step_ms(step, steps)
  out["parameters"] = torch_side.count_parameters(net)
  out["peak_rss_mb"] = common.max_rss_mb()
  return out


def _median_step_ms(step, steps: int) -> float:
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
  return 1e3 * statistics.median(times)


def _run_worker(framework: str, model: str, args) -> dict:
  command = [
    sys.executable,
    "-m",
    "experiments.benchmarks.compile_and_memory",
    "--worker",
    f"{framework}:{model}",
    "--batch-size",
    str(args.batch_size),
    "--steps",
    str(args.steps),
    "--threads",
    str(args.threads),
    "--host-malloc",
    args.host_malloc,
  ]
  result = subprocess.run(command, capture_output=True, text=True, check=False)
  if result.returncode:
    raise RuntimeError(f"worker {framework}:{model} failed ({result.returncode}):\n{result.stderr[-3000:]}")
  return json.loads(result.stdout.strip().splitlines()[-1])


def _parse_args(argv):
  """The command line (common.base_parser's flags and this script's)."""
  parser = common.base_parser(__doc__.splitlines()[0], repeats=3, warmup=0)
  parser.add_argument(
    "--models", default=None, help="comma-separated (default preact_resnet32,small_cnn; --quick: small_cnn)"
  )
  parser.add_argument("--batch-size", type=int, default=128)
  parser.add_argument("--steps", type=int, default=5, help="steady-state steps timed after the first")
  parser.add_argument("--worker", default="", help=argparse.SUPPRESS)  # internal: FRAMEWORK:MODEL
  return parser.parse_args(argv)


def _worker_main(args) -> None:
  """One measurement (args.worker: FRAMEWORK:MODEL) in this fresh process; prints one JSON line."""
  framework, model = args.worker.split(":")
  threads = common.configure_threads(args.threads, with_torch=framework == "torch", host_malloc=args.host_malloc)
  fn = _jax_worker if framework == "noisy_jax" else _torch_worker
  print(json.dumps({**fn(model, args.batch_size, args.steps), "threads": threads}))


def _models(args) -> list[str]:
  """The models to measure (--models, or the defaults of --quick or not), checked."""
  models = (args.models or ("small_cnn" if args.quick else "preact_resnet32,small_cnn")).split(",")
  for model in models:
    if model not in INPUT_SHAPES:
      raise ValueError(f"unknown model {model!r}; choose from {sorted(INPUT_SHAPES)}.")
  return models


def _measure(models: list[str], args) -> dict:
  """{(framework, model): [worker records]}: the workers run alternately (JAX, torch, JAX, torch, ...) `repeats`
  times."""
  runs = {(f, m): [] for m in models for f in FRAMEWORKS}
  for _ in range(args.repeats):
    for model in models:
      for framework in FRAMEWORKS:  # alternating: JAX, torch, JAX, torch, ...
        runs[framework, model].append(_run_worker(framework, model, args))
  return runs


def _summary(framework: str, records: list[dict]) -> dict:
  """The median, min and max of each measurement over one row's workers, its parameter count and threads (and,
  for noisy_jax, the compilation cache and device memory statistics of its first worker)."""
  summary = {}
  for field in FIELDS:
    values = [r[field] for r in records if r.get(field) is not None]
    if values:
      summary[field] = statistics.median(values)
      summary[f"{field}_min_max"] = [min(values), max(values)]
  summary["parameters"] = records[0]["parameters"]
  summary["worker_threads"] = records[0]["threads"]
  if framework == "noisy_jax":
    summary["compilation_cache_dir"] = records[0]["compilation_cache_dir"]
    summary["device_memory_stats"] = records[0]["device_memory_stats"]
  return summary


def _tables(results: dict, models: list[str]) -> list[str]:
  """The report's tables: timings and RSS of every row, the XLA buffers of the noisy_jax rows."""
  rows = [[name] + [summary.get(f, "-") for f in FIELDS[:8]] for name, summary in results.items()]
  xla_rows = [[f"noisy_jax/{m}"] + [results[f"noisy_jax/{m}"].get(f, "-") for f in FIELDS[8:]] for m in models]
  return [
    common.format_table(
      [
        "framework/model",
        "import s",
        "init s",
        "first step s",
        "lower s",
        "compile s",
        "step ms",
        "RSS after import MiB",
        "peak RSS MiB",
      ],
      rows,
    ),
    common.format_table(
      [
        "XLA buffers of the step",
        "arguments MiB",
        "outputs MiB",
        "aliased (donated) MiB",
        "temporaries MiB",
        "device peak MiB",
      ],
      xla_rows,
    ),
  ]


def main(argv=None):
  args = _parse_args(argv)
  if args.worker:  # one measurement in this fresh process; prints one JSON line
    _worker_main(args)
    return

  if args.quick:
    args.repeats, args.batch_size, args.steps = 1, 32, 2
  models = _models(args)
  threads = common.configure_threads(args.threads, with_torch=False, host_malloc=args.host_malloc)
  runs = _measure(models, args)
  results = {f"{framework}/{model}": _summary(framework, records) for (framework, model), records in runs.items()}
  params = {m: {f: results[f"{f}/{m}"]["parameters"] for f in FRAMEWORKS} for m in models}
  for model, counts in params.items():
    assert counts["noisy_jax"] == counts["torch"], (model, counts)
  settings = {
    "models": models,
    "batch_size": args.batch_size,
    "steady_steps": args.steps,
    "loss": "CE",
    "input": "synthetic",
    "parameters": {m: c["noisy_jax"] for m, c in params.items()},
  }
  common.report(
    "compile_and_memory",
    args=args,
    threads=threads,
    settings=settings,
    results=results,
    tables=_tables(results, models),
    notes=[
      f"medians over {args.repeats} fresh process(es) per row; synthetic data.",
      f"JAX device.memory_stats(): {results[f'noisy_jax/{models[0]}']['device_memory_stats']}.",
      "peak RSS includes the framework's own footprint (see 'RSS after import').",
    ],
  )


if __name__ == "__main__":
  main()
