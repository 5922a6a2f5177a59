"""The cost of Joint Optimization's label-table work in the train step, noisy_jax only: overhead over plain CE.

Three versions of the same donated, jitted train step (`noisy_jax.train.train_step` under `jax.shard_map`), same
model, same batch, same label table size:
  * 'CE': cross entropy against the table's soft labels (the row gather `table.soft_labels[idx]` is in every step);
  * 'JO loss only': the Joint Optimization loss Lc + alpha Lp + beta Le (prior and entropy terms), no recording;
  * 'JO': the loss plus recording each example's softmax into the history ring `history[epoch % H, idx]` (the
    method as the trainer runs it).
Overhead = median time / CE median time - 1, in percent (and the median of the per-repeat ratios).

The table holds `--num-examples` rows (default 50,000: CIFAR-10's training set; H = 10 epochs of history,
[10, 50000, 10] float32 = 20 MB): with buffer donation the history write costs O(batch), not O(table).

  python -m experiments.benchmarks.label_table_overhead [--model small_cnn|preact_resnet32] [--repeats 20]
"""

from __future__ import annotations

import dataclasses

from experiments.benchmarks import common

INPUT_SHAPES = {"small_cnn": (28, 28, 1), "preact_resnet32": (32, 32, 3)}


def main(argv=None):
  parser = common.base_parser(__doc__.splitlines()[0], repeats=20)
  parser.add_argument("--model", choices=tuple(INPUT_SHAPES), default="small_cnn")
  parser.add_argument("--batch-size", type=int, default=128)
  parser.add_argument("--num-examples", type=int, default=50_000)
  parser.add_argument("--steps", type=int, default=10, help="train steps per timed unit")
  args = parser.parse_args(argv)
  if args.quick:
    args.repeats, args.warmup, args.steps, args.num_examples, args.batch_size = 3, 1, 2, 1000, 32
  threads = common.configure_threads(args.threads, host_malloc=args.host_malloc)

  import numpy as np  # pylint: disable=g-import-not-at-top
  from experiments.benchmarks import jax_side  # pylint: disable=g-import-not-at-top

  batch = np.random.default_rng(0).standard_normal((args.batch_size, *INPUT_SHAPES[args.model])).astype(np.float32)
  jo = jax_side.make_method("jo")
  variants = {"CE": jax_side.make_method("ce"), "JO loss only": dataclasses.replace(jo, history_length=0), "JO": jo}
  runners = {name: jax_side.StepRunner(model_name=args.model, method=method, batch=batch,
                                       num_examples=args.num_examples)
             for name, method in variants.items()}
  sides = {name: (lambda r=runner: r(args.steps)) for name, runner in runners.items()}
  times = common.alternate(sides, repeats=args.repeats, warmup=args.warmup)
  summary = common.summarize(times, work=args.batch_size * args.steps, unit="images/s")
  for s in summary.values():
    s["overhead_percent_medians"] = 100.0 * (s["ratio_of_medians"] - 1.0)
    s["overhead_percent_paired"] = 100.0 * (s["median_ratio"] - 1.0)
  overhead = common.format_table(
      ["side", "ms per step (median)", "overhead % (medians)", "overhead % (paired)"],
      [[name, s["median_s"] * 1e3 / args.steps, s["overhead_percent_medians"], s["overhead_percent_paired"]]
       for name, s in summary.items()])
  shape = ",".join(map(str, INPUT_SHAPES[args.model]))
  settings = {"model": args.model, "batch_size": args.batch_size, "input": f"synthetic [B,{shape}]",
              "table_rows": args.num_examples, "history_length": jo.history_length, "steps_per_unit": args.steps,
              "jo": {k: v for k, v in jax_side.JO_SETTINGS.items() if k in ("alpha", "beta")}}
  common.report("label_table_overhead", args=args, threads=threads, settings=settings, results=summary,
                tables=[common.timing_table(summary, unit="images/s"), overhead],
                notes=["synthetic data (random normal images, random labels); timing only.",
                       "overhead of a side = its time / CE's time - 1."])


if __name__ == "__main__":
  main()
