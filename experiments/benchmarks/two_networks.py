"""The cost of the baselines' extra work in the train step: two networks (Co-teaching) and per-example state (ELR's
targets, SOP's u and v), against one network with cross entropy, noisy_jax only.

Donated, jitted train steps (`noisy_jax.train.step.train_step` under `jax.shard_map`, as the epoch program runs it) on
one fixed batch, timed alternately in one process:
  * 'CE': one network, cross entropy (the unit);
  * 'ELR', 'SOP': one network, their per-example rows read and written by index (SOP's also differentiated);
  * 'Co-teaching (loop)', 'Co-teaching (vmap)': the pair in one step, its forward pass mapped over the two networks
    by a Python loop traced into the program or by jax.vmap (noisy_jax.train.members), the small-loss exchange and both
    updates;
  * 'CE, batch 2B': one network on twice the batch, the same arithmetic as the pair's two networks in one program:
    what doubling the work costs on this machine (cache and memory effects included), beside the pair.
Ratio = median time / CE median time (and the median of the per-repeat ratios). The goal for a two-network method is
<= 2.0: no cost beyond the second network's own work. (The images/s column counts B images per step for every
side, also for 'CE, batch 2B'.)

  python -m experiments.benchmarks.two_networks [--model small_cnn|preact_resnet32] [--repeats 20]
"""

from __future__ import annotations

from experiments.benchmarks import common


def main(argv=None):
  args, threads = common.step_variants_args(__doc__.splitlines()[0], argv)

  from experiments.benchmarks import jax_side  # pylint: disable=g-import-not-at-top
  from noisy_jax.methods import coteaching as coteaching_lib
  from noisy_jax.methods import elr
  from noisy_jax.methods import sop

  coteaching = coteaching_lib.method(forget_rate=0.5, num_epochs=10)
  variants = {
    "CE": jax_side.make_method("ce"),
    "ELR": elr.method(),
    "SOP": sop.method(),
    "Co-teaching (loop)": (coteaching, "loop"),
    "Co-teaching (vmap)": (coteaching, "vmap"),
    "CE, batch 2B": (jax_side.make_method("ce"), "loop", 2),
  }
  summary = jax_side.time_step_variants(variants, args)
  ratios = common.format_table(
    ["side", "ms per step (median)", "x CE (medians)", "x CE (paired)"],
    [[name, s["median_s"] * 1e3 / args.steps, s["ratio_of_medians"], s["median_ratio"]] for name, s in summary.items()],
  )
  settings = common.step_variants_settings(args)
  common.report(
    "two_networks",
    args=args,
    threads=threads,
    settings=settings,
    results=summary,
    tables=[common.timing_table(summary, unit="images/s"), ratios],
    notes=[
      "synthetic data (random normal images, random labels); timing only.",
      "x CE = the side's time / the one-network CE step's time; goal for Co-teaching: <= 2.0.",
    ],
  )


if __name__ == "__main__":
  main()
