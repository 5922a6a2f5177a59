"""The benchmarks' tables that experiments/regenerate_readme.py regenerates (experiments.readme_tables lists them):
README.md's Speed table and experiments/benchmarks/README.md's Results table, from the results.jsonl that
experiments/benchmarks/run_all.sh writes, and the Markdown table format every README table shares (`markdown`)."""

from __future__ import annotations

import json
import os
from typing import Sequence


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
  """A Markdown table in the README's style ('| a | b |', '|---|---|'; an empty cell is '| |')."""

  def line(cells):
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"

  return "\n".join([line(header), "|" + "---|" * len(header)] + [line(row) for row in rows])


STEP_GOAL, EPOCH_GOAL, SMALL_CNN_GOAL, OVERHEAD_GOAL_PERCENT, FIRST_STEP_GOAL_S = 0.8, 1.0, 2.0, 5.0, 20.0


def benchmark_records(workdir: str) -> dict[str, dict]:
  """results.jsonl as {key: record}: 'train_step' (the first), 'train_step_1thread' (a train_step record on one
  core after the first), 'epoch', 'small_cnn_epoch', 'label_table_overhead/MODEL', 'compile_and_memory'."""
  path = os.path.join(workdir, "results.jsonl")
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path} does not exist: run the benchmarks' command first.")
  records = {}
  with open(path) as f:
    for line in f:
      if not line.strip():
        continue
      record = json.loads(line)
      key = record["benchmark"]
      if key == "label_table_overhead":
        key += "/" + record["settings"]["model"]
      elif key == "train_step" and key in records and record["threads"]["cores"] == 1:
        key = "train_step_1thread"
      records[key] = record
  return records


_TIME_FIELDS = ("median_s", "q1_s", "q3_s", "min_s", "max_s")


def _need(records: dict, key: str) -> dict:
  if key not in records:
    raise KeyError(f"results.jsonl has no {key!r} record; it has {sorted(records)}.")
  return records[key]["results"]


def per_step(record: dict) -> dict:
  """A train_step record's results with times per step: the script times units of `settings.steps_per_unit`
  steps (5 by default), so each time field is divided by it; ratios are unchanged."""
  steps = record["settings"].get("steps_per_unit", 1)
  return {
    side: {k: (v / steps if k in _TIME_FIELDS else v) for k, v in stats.items()}
    for side, stats in record["results"].items()
  }


def _need_per_step(records: dict, key: str) -> dict:
  _need(records, key)
  return per_step(records[key])


def _side(results: dict, word: str) -> dict:
  """The side whose name contains `word` (e.g. 'noisy_jax', 'NCHW', 'workers=2')."""
  for name, stats in results.items():
    if word in name:
      return stats
  raise KeyError(f"no side containing {word!r} among {sorted(results)}.")


def _ms(stats: dict) -> str:
  return f"{1e3 * stats['median_s']:.0f} ms"


def _iqr(stats: dict, scale: float, decimals: int) -> str:
  return f"IQR {scale * stats['q1_s']:.{decimals}f}-{scale * stats['q3_s']:.{decimals}f}"


def _speed(stats: dict) -> str:
  """PyTorch's time / noisy_jax's time, e.g. '0.74x'."""
  return f"{stats['ratio_of_medians']:.2f}x"


def _met(speeds: Sequence[float], goal: float) -> str:
  return "yes" if min(speeds) >= goal else "no"


def _overhead(results: dict) -> tuple[float, float, str]:
  jo = results["JO"]
  medians, paired = jo["overhead_percent_medians"], jo["overhead_percent_paired"]
  text = f"{medians:+.1f}% (medians), {paired:+.1f}% (paired)"
  if (medians < 0) != (paired < 0):
    text += ": within noise"
  return medians, paired, text


def _mib(value: float) -> str:
  return f"{value:,.0f} MiB"


def render_benchmarks(workdir: str) -> str:
  records = benchmark_records(workdir)
  rows = []
  step = _need_per_step(records, "train_step")
  jax_step, nchw, cl = _side(step, "noisy_jax"), _side(step, "NCHW"), _side(step, "channels_last")
  rows.append(
    [
      "ResNet-32 train step, batch 128 (`train_step.py`)",
      f"{_ms(jax_step)} ({_iqr(jax_step, 1e3, 0)})",
      f"{_ms(nchw)} NCHW, {_ms(cl)} channels_last",
      f"{_speed(nchw)}, {_speed(cl)}",
      f">= {STEP_GOAL}x",
      _met([nchw["ratio_of_medians"], cl["ratio_of_medians"]], STEP_GOAL),
    ]
  )
  one = _need_per_step(records, "train_step_1thread")
  nchw1, cl1 = _side(one, "NCHW"), _side(one, "channels_last")
  rows.append(
    [
      "the same step, 1 thread each",
      _ms(_side(one, "noisy_jax")),
      f"{_ms(nchw1)} NCHW, {_ms(cl1)} channels_last",
      f"{_speed(nchw1)}, {_speed(cl1)}",
      "",
      "",
    ]
  )
  epoch = _need(records, "epoch")
  jax_epoch, w0, w2 = _side(epoch, "noisy_jax"), _side(epoch, "workers=0"), _side(epoch, "workers=2")
  rows.append(
    [
      "full epoch, ResNet-32, 5,000 CIFAR-shaped images, crop + flip, JO label-table work (`epoch.py --workers 0,2`)",
      f"{jax_epoch['median_s']:.1f} s ({_iqr(jax_epoch, 1, 1)})",
      f"{w0['median_s']:.1f} s (DataLoader, 0 workers), {w2['median_s']:.1f} s (2 workers)",
      f"{_speed(w0)}, {_speed(w2)}",
      f">= {EPOCH_GOAL}x",
      _met([w0["ratio_of_medians"], w2["ratio_of_medians"]], EPOCH_GOAL),
    ]
  )
  small = _need(records, "small_cnn_epoch")
  jax_small, loader, slices = _side(small, "noisy_jax"), _side(small, "DataLoader"), _side(small, "slices")
  rows.append(
    [
      "SmallCNN epoch on mnist5k (`small_cnn_epoch.py`)",
      f"{_ms(jax_small)} ({_iqr(jax_small, 1e3, 0)})",
      f"{_ms(loader)} (DataLoader), {_ms(slices)} (tensor slices)",
      f"{_speed(loader)}, {_speed(slices)}",
      f">= {SMALL_CNN_GOAL:g}x",
      _met([loader["ratio_of_medians"], slices["ratio_of_medians"]], SMALL_CNN_GOAL),
    ]
  )
  for model, label, where in (
    ("small_cnn", "SmallCNN", "`label_table_overhead.py`"),
    ("preact_resnet32", "ResNet-32", "`--model preact_resnet32`"),
  ):
    record = records.get(f"label_table_overhead/{model}")
    results = _need(records, f"label_table_overhead/{model}")
    step_ms = 1e3 * results["CE"]["median_s"] / record["settings"]["steps_per_unit"]
    medians, paired, text = _overhead(results)
    step_text = f"{step_ms:.1f}" if step_ms < 100 else f"{step_ms:.0f}"
    rows.append(
      [
        f"JO label-table overhead, {label} step {step_text} ms ({where})",
        text,
        "",
        "",
        f"<= {OVERHEAD_GOAL_PERCENT:g}%",
        "yes" if max(medians, paired) <= OVERHEAD_GOAL_PERCENT else "no",
      ]
    )
  memory = _need(records, "compile_and_memory")
  jax_r32, torch_r32 = memory["noisy_jax/preact_resnet32"], memory["torch/preact_resnet32"]
  rows.append(
    [
      "ResNet-32 first step, fresh process (`compile_and_memory.py`)",
      f"{jax_r32['first_step_s']:.1f} s (lower {jax_r32['lower_s']:.1f} s + compile "
      f"{jax_r32['compile_s']:.1f} s); init {jax_r32['init_s']:.1f} s",
      f"first step {torch_r32['first_step_s']:.2f} s",
      "",
      f"<= {FIRST_STEP_GOAL_S:g} s",
      "yes" if jax_r32["first_step_s"] <= FIRST_STEP_GOAL_S else "no",
    ]
  )
  rows.append(
    [
      "peak RSS, ResNet-32 step (same)",
      f"{_mib(jax_r32['peak_rss_mb'])} (XLA temporaries {_mib(jax_r32['xla_temp_mb'])})",
      _mib(torch_r32["peak_rss_mb"]),
      "",
      "",
      "",
    ]
  )
  return markdown(["benchmark", "noisy_jax", "PyTorch", "speed vs PyTorch", "goal", "met?"], rows)


def render_speed(workdir: str) -> str:
  """README's summary of the benchmarks (the same results.jsonl as `render_benchmarks`)."""
  records = benchmark_records(workdir)
  step = _need_per_step(records, "train_step")
  jax_step, nchw, cl = _side(step, "noisy_jax"), _side(step, "NCHW"), _side(step, "channels_last")
  epoch = _need(records, "epoch")
  jax_epoch, w0, w2 = _side(epoch, "noisy_jax"), _side(epoch, "workers=0"), _side(epoch, "workers=2")
  small = _need(records, "small_cnn_epoch")
  jax_small, loader, slices = _side(small, "noisy_jax"), _side(small, "DataLoader"), _side(small, "slices")
  overheads = [
    abs(v)
    for model in ("small_cnn", "preact_resnet32")
    for v in _overhead(_need(records, f"label_table_overhead/{model}"))[:2]
  ]
  first_step = _need(records, "compile_and_memory")["noisy_jax/preact_resnet32"]["first_step_s"]
  rows = [
    [
      "pre-activation ResNet-32 train step, batch 128",
      _ms(jax_step),
      f"{_ms(nchw)} (NCHW), {_ms(cl)} (channels_last)",
      f"{_speed(nchw)}, {_speed(cl)}",
    ],
    [
      "ResNet-32 epoch of 5,000 CIFAR-shaped images, crop + flip, Joint Optimization",
      f"{jax_epoch['median_s']:.1f} s",
      f"{w0['median_s']:.1f} s (DataLoader), {w2['median_s']:.1f} s (2 workers)",
      f"{_speed(w0)}, {_speed(w2)}",
    ],
    [
      "SmallCNN epoch on mnist5k",
      f"{jax_small['median_s']:.2f} s",
      f"{loader['median_s']:.2f} s (DataLoader), {slices['median_s']:.2f} s (tensor slices)",
      f"{_speed(loader)}, {_speed(slices)}",
    ],
    ["Joint Optimization's label-table work", f"<= {max(overheads):.1f}% of a step", "", ""],
    ["ResNet-32 step compile, first step", f"{first_step:.1f} s", "", ""],
  ]
  return markdown(["", "noisy_jax", "PyTorch", "noisy_jax's speed"], rows)
