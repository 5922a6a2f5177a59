"""The cost of an epoch of each two-network method against one network's cross-entropy epoch, noisy_jax only.

Whole epochs on N synthetic examples, as `loop.fit` runs them, timed alternately in one process:
  * 'CE': one network, cross entropy (epoch_lib.make_epoch_fn, 'steps' mode: the unit);
  * 'Co-teaching': the pair in one step (epoch_lib.make_epoch_fn; forward pass looped over the pair, the CPU default);
  * 'ELR+': each network an epoch in turn, each step the peer's average on the batch + the mixed batch's step
    (noisy_jax.methods.elr_plus_train);
  * 'DivideMix': after its warm-up, each network on its peer's division (here half of the examples labelled), each
    step two views of b = B/2 labelled and b unlabelled rows (noisy_jax.methods.dividemix_train);
  * 'DISC' (one network, two views): after its warm-up, each step the weak and the strong view as one batch of 2B,
    then each view's mixup pass over the batch with BatchNorm statistics of its purified rows (here half of them;
    noisy_jax.methods.disc); the strong view is Cutout only (the policies' cost: strong_augment.py).
  * 'SOP+' (one network, two views): SOP's per-example u, v with its consistency and class-balance terms, each step
    the weak and the strong view forwarded as one batch of 2B (noisy_jax.methods.sop through the trainer's step), the
    same Cutout-only strong view.
  * 'ProMix' (two networks with pseudo heads, two views): after its warm-up, each step both networks' weak and strong
    passes, then each network's mixup and FMix passes for each head over its selected rows (here half of them by
    CSS; noisy_jax.methods.promix_train), the same Cutout-only strong view.
The methods do different amounts of work per epoch, so next to the measured ratio the table gives the work ratio, in
forward passes over one example (a backward pass counted as two forward passes: a step of fwd + bwd = 3):
  CE 3 N;  Co-teaching 2 x 3 N = 6 N;  ELR+ 2 x (3 + 1) N = 8 N;
  DivideMix, labelled fraction f per network: 2 networks x (2 f N / B steps) x (4 b own + 2 b peer forward passes
  + 3 x 4 b for the mixed batch's step) = 36 f N (f = 0.5: 18 N); its per-epoch division (each network's forward
  pass over the split and a GMM) is outside the timed epoch.
  DISC: 3 x 2 N for the two views' step + 2 views x 3 N for the mixup passes, which run over every row of the batch
  (the mask keeps the shapes) = 12 N; the original forwards only the purified rows: 6 N + 6 f N (f = 0.5: 9 N).
  SOP+: 3 x 2 N for the two views' step (u and v's gradient and the two terms are per-example arithmetic) = 6 N.
  ProMix (two networks, each with its pseudo head, two views): per network 3 x 2 N for the weak and the strong view's
  passes + 4 x 3 N for the mixup and FMix passes of each head, which run over every row (the mask keeps the shapes)
  = 18 N, so 36 N for the pair; the original forwards only the selected rows: 2 x (6 N + 12 s N) (s = 0.5: 24 N).
  Its epochs drop the last partial batch; its per-epoch selection (each network's pass over the split) is outside
  the timed epoch.
"overhead" = measured ratio / work ratio: 1.0 means no cost beyond the method's own passes.

  python -m experiments.benchmarks.two_network_epochs [--model small_cnn] [--num-examples 2560] [--repeats 10]
"""

from __future__ import annotations

from experiments.benchmarks import common

WORK = {
  "CE": 3.0,
  "Co-teaching": 6.0,
  "ELR+": 8.0,
  "DISC": 12.0,
  "SOP+": 6.0,
  "ProMix": 36.0,
}  # forward passes per example and epoch (docstring)
LABELLED_FRACTION = 0.5
PURIFIED_FRACTION = 0.5  # DISC: the rows its mixup passes train on
SELECTED_FRACTION = 0.5  # ProMix: each network's CSS selection


def dividemix_work(fraction: float) -> float:
  return 36.0 * fraction


def main(argv=None):
  parser = common.base_parser(__doc__.splitlines()[0], repeats=10)
  parser.add_argument("--model", choices=tuple(common.STEP_INPUT_SHAPES), default="small_cnn")
  parser.add_argument("--batch-size", type=int, default=128)
  parser.add_argument("--num-examples", type=int, default=2560, help="examples per epoch")
  args = parser.parse_args(argv)
  if args.quick:
    args.repeats, args.warmup, args.num_examples, args.batch_size = 2, 1, 256, 32
  threads = common.configure_threads(args.threads, host_malloc=args.host_malloc)

  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import ml_collections  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from experiments.benchmarks import jax_side  # pylint: disable=g-import-not-at-top
  from noisy_jax import models  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import normalization  # pylint: disable=g-import-not-at-top
  from noisy_jax.methods import disc  # pylint: disable=g-import-not-at-top
  from noisy_jax.methods import dividemix_train  # pylint: disable=g-import-not-at-top
  from noisy_jax.methods import promix_train  # pylint: disable=g-import-not-at-top
  from noisy_jax.methods import registry
  from noisy_jax.parallel import mesh as mesh_lib
  from noisy_jax.parallel import xla_options
  from noisy_jax.train import epoch as epoch_lib
  from noisy_jax.train import views

  n, batch = args.num_examples, args.batch_size
  shape = common.STEP_INPUT_SHAPES[args.model]
  rng = np.random.default_rng(0)
  mesh = mesh_lib.make_mesh(1)
  images = mesh_lib.replicate(jnp.asarray(rng.standard_normal((n, *shape)).astype(np.float32)), mesh)
  labels = rng.integers(0, 10, n)
  model = jax_side.make_model(args.model)
  headed_model = models.build(
    args.model, 10, kwargs={"pseudo_head": True}, bn_axis_name=mesh_lib.AXIS
  )  # ProMix's networks
  options = xla_options.compiler_options(model, mesh.devices.flat[0].platform)
  make = lambda config: registry.make(ml_collections.ConfigDict(config), num_classes=10, num_epochs=10)
  dividemix = make({"name": "dividemix", "warm_up": 1})
  disc_method = disc.method(num_examples=n, start_epoch=0)
  promix_method = make({"name": "promix", "pretrain_ep": 1})
  variants = {
    "CE": (jax_side.make_method("ce"), 1),
    "Co-teaching": (make({"name": "coteaching", "forget_rate": 0.4}), 1),
    "ELR+": (make({"name": "elr_plus"}), 1),
    "DivideMix": (dividemix, 2),
    "DISC": (disc_method, 1),
    "SOP+": (make({"name": "sop", "ratio_consistency": 0.9, "ratio_balance": 0.1}), 1),
    "ProMix": (promix_method, 2),
  }
  strong_view = views.make_strong_view({"policy": "none", "cutout": 16}, normalize=normalization.identity(), weak=None)

  class EpochRunner:
    """(state, table) on the device; each call trains one epoch (donated) and waits for it."""

    def __init__(self, method, epoch):
      own_model = headed_model if method is promix_method else model
      state = jax_side.make_state(own_model, shape, steps_per_epoch=-(-n // batch), num_networks=method.num_networks)
      state = method.program.init_state(state)
      table = jax_side.make_table(method, labels)
      if method is dividemix:  # each network's division: half of the examples labelled
        clean = np.where(rng.random((n, 2)) < LABELLED_FRACTION, 0.9, 0.1).astype(np.float32)
        table = table.replace(method_rows={**table.method_rows, dividemix_train.CLEAN_PROB: jnp.asarray(clean)})
      if method is disc_method:  # the division: half purified, of them 3/5 clean and 1/5 hard
        draw = rng.random(n)
        sets = {
          "disc_clean": draw < 0.3,
          "disc_hard": (draw >= 0.3) & (draw < 0.4),
          "disc_purified": draw < PURIFIED_FRACTION,
        }
        table = table.replace(method_rows={**table.method_rows, **{k: jnp.asarray(v) for k, v in sets.items()}})
      if method is promix_method:  # each network's CSS selection: half of the examples
        selected = jnp.asarray(rng.random((n, 2)) < SELECTED_FRACTION)
        table = table.replace(method_rows={**table.method_rows, promix_train.SELECTED: selected})
      self.state, self.table = mesh_lib.replicate(state, mesh), mesh_lib.replicate(table, mesh)
      self.epoch = jnp.asarray(epoch, jnp.int32)
      self.fn = epoch_lib.make_method_epoch_fn(
        method,
        mesh,
        batch_size=batch,
        num_examples=n,
        strong_view=strong_view if method.strong_view else None,
        compiler_options=options,
        mode="steps",
        member_map="loop",
      )
      self.count = 0

    def __call__(self):
      self.count += 1
      self.state, self.table, metrics = self.fn(self.state, self.table, images, jax.random.key(self.count), self.epoch)
      jax.block_until_ready((self.state, self.table, metrics))

  runners = {name: EpochRunner(method, epoch) for name, (method, epoch) in variants.items()}
  times = common.alternate({name: runner for name, runner in runners.items()}, repeats=args.repeats, warmup=args.warmup)
  summary = common.summarize(times, work=n, unit="images/s")
  work = {**WORK, "DivideMix": dividemix_work(LABELLED_FRACTION)}
  rows = []
  for name, s in summary.items():
    work_ratio = work[name] / work["CE"]
    rows.append(
      [name, s["median_s"], s["ratio_of_medians"], s["median_ratio"], work_ratio, s["ratio_of_medians"] / work_ratio]
    )
  ratios = common.format_table(
    ["side", "s per epoch (median)", "x CE (medians)", "x CE (paired)", "work x CE", "overhead"], rows
  )
  settings = {
    "model": args.model,
    "batch_size": batch,
    "examples_per_epoch": n,
    "input": f"synthetic [N,{','.join(map(str, shape))}]",
    "dividemix_labelled_fraction": LABELLED_FRACTION,
    "disc_purified_fraction": PURIFIED_FRACTION,
    "promix_selected_fraction": SELECTED_FRACTION,
  }
  common.report(
    "two_network_epochs",
    args=args,
    threads=threads,
    settings=settings,
    results=summary,
    tables=[common.timing_table(summary, unit="images/s"), ratios],
    notes=[
      "synthetic data (random normal images, random labels); timing only.",
      "work x CE: forward passes per epoch against CE's (module docstring); overhead = x CE / it.",
    ],
  )


if __name__ == "__main__":
  main()
