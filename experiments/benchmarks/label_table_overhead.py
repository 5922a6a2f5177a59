"""The cost of Joint Optimization's label-table work in the train step, noisy_jax only: overhead over plain CE.

Three versions of the same donated, jitted train step (`noisy_jax.train.step.train_step` under `jax.shard_map`), same
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


def main(argv=None):
  args, threads = common.step_variants_args(__doc__.splitlines()[0], argv)

  from experiments.benchmarks import jax_side  # pylint: disable=g-import-not-at-top

  jo = jax_side.make_method("jo")
  variants = {"CE": jax_side.make_method("ce"), "JO loss only": dataclasses.replace(jo, history_length=0), "JO": jo}
  summary = jax_side.time_step_variants(variants, args)
  for s in summary.values():
    s["overhead_percent_medians"] = 100.0 * (s["ratio_of_medians"] - 1.0)
    s["overhead_percent_paired"] = 100.0 * (s["median_ratio"] - 1.0)
  overhead = common.format_table(
    ["side", "ms per step (median)", "overhead % (medians)", "overhead % (paired)"],
    [
      [name, s["median_s"] * 1e3 / args.steps, s["overhead_percent_medians"], s["overhead_percent_paired"]]
      for name, s in summary.items()
    ],
  )
  settings = common.step_variants_settings(args, history_length=jo.history_length)
  settings["jo"] = {k: v for k, v in jax_side.JO_SETTINGS.items() if k in ("alpha", "beta")}
  common.report(
    "label_table_overhead",
    args=args,
    threads=threads,
    settings=settings,
    results=summary,
    tables=[common.timing_table(summary, unit="images/s"), overhead],
    notes=[
      "synthetic data (random normal images, random labels); timing only.",
      "overhead of a side = its time / CE's time - 1.",
    ],
  )


if __name__ == "__main__":
  main()
