"""The cost of the baselines' extra work in the train step: two networks (Co-teaching) and per-example state (ELR's
targets, SOP's u and v), against one network with cross entropy, noisy_jax only.

Donated, jitted train steps (`noisy_jax.train.train_step` under `jax.shard_map`, as the epoch program runs it) on one
fixed batch, timed alternately in one process:
  * 'CE': one network, cross entropy (the unit);
  * 'ELR', 'SOP': one network, their per-example rows read and written by index (SOP's also differentiated);
  * 'Co-teaching (loop)', 'Co-teaching (vmap)': the pair in one step, its forward pass mapped over the two networks
    by a Python loop traced into the program or by jax.vmap (noisy_jax.members), the small-loss exchange and both
    updates.
Ratio = median time / CE median time (and the median of the per-repeat ratios). The goal for a two-network method is
<= 2.0: no cost beyond the second network's own work.

  python -m experiments.benchmarks.two_networks [--model small_cnn|preact_resnet32] [--repeats 20]
"""

from __future__ import annotations

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
  from noisy_jax import methods  # pylint: disable=g-import-not-at-top

  batch = np.random.default_rng(0).standard_normal((args.batch_size, *INPUT_SHAPES[args.model])).astype(np.float32)
  coteaching = methods.coteaching_method(forget_rate=0.5, num_epochs=10)
  variants = {"CE": (jax_side.make_method("ce"), "loop"),
              "ELR": (methods.elr_method(), "loop"),
              "SOP": (methods.sop_method(), "loop"),
              "Co-teaching (loop)": (coteaching, "loop"),
              "Co-teaching (vmap)": (coteaching, "vmap")}
  runners = {name: jax_side.StepRunner(model_name=args.model, method=method, batch=batch,
                                       num_examples=args.num_examples, member_map=member_map)
             for name, (method, member_map) in variants.items()}
  sides = {name: (lambda r=runner: r(args.steps)) for name, runner in runners.items()}
  times = common.alternate(sides, repeats=args.repeats, warmup=args.warmup)
  summary = common.summarize(times, work=args.batch_size * args.steps, unit="images/s")
  ratios = common.format_table(
      ["side", "ms per step (median)", "x CE (medians)", "x CE (paired)"],
      [[name, s["median_s"] * 1e3 / args.steps, s["ratio_of_medians"], s["median_ratio"]]
       for name, s in summary.items()])
  shape = ",".join(map(str, INPUT_SHAPES[args.model]))
  settings = {"model": args.model, "batch_size": args.batch_size, "input": f"synthetic [B,{shape}]",
              "table_rows": args.num_examples, "steps_per_unit": args.steps}
  common.report("two_networks", args=args, threads=threads, settings=settings, results=summary,
                tables=[common.timing_table(summary, unit="images/s"), ratios],
                notes=["synthetic data (random normal images, random labels); timing only.",
                       "x CE = the side's time / the one-network CE step's time; goal for Co-teaching: <= 2.0."])


if __name__ == "__main__":
  main()
