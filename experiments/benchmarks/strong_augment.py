"""The cost of a strong view on the device: a batch of 128 32x32 RGB images, noisy_jax only.

Sides, each one jitted program on one uint8 batch [128, 32, 32, 3] (random pixels, rows 0..127), timed alternately
(experiments/benchmarks/common.py):
  * 'weak': normalisation + crop (padding 4) + flip, the view every run trains on (noisy_jax.core.augment);
  * 'autoaugment_cifar10 + cutout 16': the strong view of noisy_jax.train.views with torchvision's policy;
  * 'autoaugment_cifar10_tf + cutout 16': the same with the TF reference magnitudes (SOP+'s);
  * 'randaugment(2, 9) + cutout 16'.
A strong view is the policy on the uint8 images, normalisation, the crop and flip, then Cutout. Each policy computes
every operation on the whole batch and keeps each example's own (noisy_jax.core.image_ops.apply_op), so its cost does
not depend on what was drawn.

  python -m experiments.benchmarks.strong_augment [--batch 128] [--repeats 30]
"""

from __future__ import annotations

from experiments.benchmarks import common

POLICIES = (
  ("autoaugment_cifar10 + cutout 16", {"policy": "autoaugment_cifar10", "cutout": 16}),
  ("autoaugment_cifar10_tf + cutout 16", {"policy": "autoaugment_cifar10_tf", "cutout": 16}),
  ("randaugment(2, 9) + cutout 16", {"policy": "randaugment", "num_ops": 2, "magnitude": 9, "cutout": 16}),
)


def main(argv=None):
  parser = common.base_parser(__doc__.splitlines()[0], repeats=30, warmup=3)
  parser.add_argument("--batch", type=int, default=128, help="images per batch (default %(default)s)")
  args = parser.parse_args(argv)
  if args.quick:
    args.batch, args.repeats, args.warmup = 16, 3, 1
  threads = common.configure_threads(args.threads, with_torch=False, host_malloc=args.host_malloc)

  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from noisy_jax.core import augment as augment_lib  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import normalization  # pylint: disable=g-import-not-at-top
  from noisy_jax.train import views  # pylint: disable=g-import-not-at-top

  codes = jax.device_put(np.random.default_rng(0).integers(0, 256, (args.batch, 32, 32, 3), dtype=np.uint8))
  rows = jax.device_put(np.arange(args.batch, dtype=np.int32))
  normalize = normalization.Normalization(
    "per_channel", 255.0, np.array([0.49, 0.48, 0.45], np.float32), np.array([0.25, 0.24, 0.26], np.float32)
  )
  weak = augment_lib.make_augment(crop_padding=4, flip=True)
  key = jax.random.PRNGKey(0)
  programs = {"weak": jax.jit(lambda k, c, r: weak(k, normalize(c), r))}
  for name, config in POLICIES:
    programs[name] = jax.jit(views.make_strong_view(config, normalize=normalize, weak=weak))

  def unit(program):
    return lambda: jax.block_until_ready(program(key, codes, rows))

  times = common.alternate({name: unit(p) for name, p in programs.items()}, repeats=args.repeats, warmup=args.warmup)
  summary = common.summarize(times, work=args.batch, unit="images/s")
  common.report(
    "strong_augment",
    args=args,
    threads=threads,
    settings={"batch": args.batch, "image": "32x32x3 uint8", "platform": jax.devices()[0].platform},
    results=summary,
    tables=[common.timing_table(summary, unit="images/s")],
    notes=["random pixels; timing only. 'x first': each view's time / the weak view's."],
  )


if __name__ == "__main__":
  main()
