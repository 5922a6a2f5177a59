"""Train-step throughput, pre-activation ResNet-32, CIFAR-shaped batch: noisy_jax's step vs a PyTorch step.

noisy_jax: `noisy_jax.train.step.train_step` (cross entropy against the label table's targets, SGD momentum 0.9 with
weight decay 5e-4, BatchNorm statistics updated) under `jax.shard_map` + `jax.jit` on a one-device mesh with the
state and the table donated: the step that `make_epoch_fn` dispatches in 'steps' mode, without the batch gather.
PyTorch: model.train(); zero_grad; forward; F.cross_entropy; backward; optimizer.step() (torch.optim.SGD, same
hyper-parameters), eager, NCHW (the ports' layout); `--channels-last` adds a channels-last side. `--torch-device
cuda`: the PyTorch models and the batch on the GPU (cudnn.benchmark on), each unit ended by torch.cuda.synchronize().

One unit = `--steps` consecutive steps on one fixed synthetic batch (random normal images [B, 32, 32, 3], random
labels: no real data is needed to time a step). Throughput = B * steps / unit time.

`--model` picks another CIFAR network of `noisy_jax.models` (the PyTorch sides exist for preact_resnet32 only and
are left out for the others). `--xla-options both` times the noisy_jax step twice, compiled with the model's XLA
options (`train.compiler_options`, what `fit` uses) and with XLA's defaults, alternated like the other sides.

  python -m experiments.benchmarks.train_step [--repeats 10] [--steps 5] [--batch-size 128] [--quick]
  python -m experiments.benchmarks.train_step --channels-last --torch-device cuda   # on a GPU machine
  python -m experiments.benchmarks.train_step --model resnet18 --xla-options both --repeats 5 --steps 2
"""

from __future__ import annotations

from experiments.benchmarks import common


def main(argv=None):
  parser = common.base_parser(__doc__.splitlines()[0], repeats=10, torch_device=True)
  parser.add_argument("--steps", type=int, default=5, help="train steps per timed unit")
  parser.add_argument("--batch-size", type=int, default=128)
  parser.add_argument("--channels-last", action="store_true", help="also time PyTorch with channels_last tensors")
  parser.add_argument(
    "--model", default="preact_resnet32", choices=("preact_resnet32", "preact_resnet_jo", "resnet18", "resnet34")
  )
  parser.add_argument(
    "--xla-options",
    default="model",
    choices=("model", "default", "both"),
    help="compile the noisy_jax step with the model's XLA options, XLA's defaults, or both sides",
  )
  args = parser.parse_args(argv)
  if args.quick:
    args.repeats, args.warmup, args.steps, args.batch_size = 2, 1, 2, 32
  threads = common.configure_threads(args.threads, host_malloc=args.host_malloc)
  device = common.torch_device(args.torch_device)  # fails here, before any work, if CUDA is asked and missing

  import numpy as np  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import torch.nn.functional as F  # pylint: disable=g-import-not-at-top

  from experiments.benchmarks import jax_side  # pylint: disable=g-import-not-at-top
  from experiments.benchmarks import torch_side  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(0)
  batch = rng.standard_normal((args.batch_size, 32, 32, 3)).astype(np.float32)
  labels = rng.integers(0, 10, args.batch_size)

  variants = {"model": [True], "default": [False], "both": [True, False]}[args.xla_options]
  runners = {}
  for with_options in variants:
    name = "noisy_jax (jit, donated)" + (
      "" if len(variants) == 1 else (", model's XLA options" if with_options else ", XLA defaults")
    )
    runners[name] = jax_side.StepRunner(
      model_name=args.model, method="ce", batch=batch, num_examples=50_000, xla_options=with_options
    )
  runner = next(iter(runners.values()))

  torch.manual_seed(0)
  torch_name = "torch eager" if device.type == "cpu" else f"torch {device.type} eager"
  torch_models = {}
  if args.model == "preact_resnet32":
    torch_models[f"{torch_name} (NCHW)"] = torch_side.on_device(torch_side.PreActResNet32(10), device)
  if args.channels_last and torch_models:
    torch_models[f"{torch_name} (channels_last)"] = torch_side.on_device(
      torch_side.PreActResNet32(10), device, memory_format=torch.channels_last
    )
  for model in torch_models.values():
    assert torch_side.count_parameters(model) == runner.num_parameters, (
      torch_side.count_parameters(model),
      runner.num_parameters,
    )
  x_nchw = torch.from_numpy(batch).permute(0, 3, 1, 2).contiguous().to(device)
  y = torch.from_numpy(labels).to(device)

  def torch_unit(model, x):
    optimizer = torch_side.sgd(model, lr=0.1, momentum=0.9, weight_decay=5e-4)
    model.train()

    def unit():
      for _ in range(args.steps):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
      value = loss.item()
      common.torch_sync(device)  # explicit end of the unit on a GPU (the .item() already waited for the stream)
      return value

    return unit

  sides = {name: (lambda r=r: r(args.steps)) for name, r in runners.items()}
  for name, model in torch_models.items():
    x = x_nchw.contiguous(memory_format=torch.channels_last) if "channels_last" in name else x_nchw
    sides[name] = torch_unit(model, x)

  times = common.alternate(sides, repeats=args.repeats, warmup=args.warmup)
  work = args.batch_size * args.steps
  summary = common.summarize(times, work=work, unit="images/s")
  settings = {
    "model": args.model,
    "xla_options": args.xla_options,
    "parameters": runner.num_parameters,
    "batch_size": args.batch_size,
    "steps_per_unit": args.steps,
    "input": "synthetic CIFAR-shaped float32 [B,32,32,3]",
    "loss": "CE",
    "optimizer": "SGD lr 0.1 momentum 0.9 weight decay 5e-4",
    "torch_device": args.torch_device,
  }
  common.report(
    "train_step",
    args=args,
    threads=threads,
    settings=settings,
    results=summary,
    tables=[common.timing_table(summary, unit="images/s")],
    notes=[
      "synthetic data (random normal images, random labels); timing only.",
      "ratio > 1: that side takes longer per unit than noisy_jax.",
    ],
  )


if __name__ == "__main__":
  main()
