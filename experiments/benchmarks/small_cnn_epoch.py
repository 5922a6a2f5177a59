"""SmallCNN on real mnist5k, one whole training epoch: noisy_jax's epoch program vs equivalent PyTorch eager loops.

The library's default experiment in miniature: `SmallCNN` (widths 12/24/48, BatchNorm, 2x2 max-pool, flatten
head) on the 3,600 mnist5k training images (standardised per channel), batch 128, cross entropy, SGD momentum 0.9
+ weight decay 5e-4, no augmentation, random labels-free: the given (clean) labels.

noisy_jax: `epoch_lib.make_epoch_fn` (`--jax-mode`: 'auto' = one compiled step per batch on CPU ('steps'), the whole
epoch as one `lax.scan` program on an accelerator ('scan')) with the images resident on the device, then the epoch
metrics fetched to the host (what `fit` does before evaluating).
PyTorch, two loops over the same NCHW tensors:
  * 'DataLoader': `DataLoader(TensorDataset(x, y, index), batch_size=128, shuffle=True)`, the ports' habit;
  * 'slices': `torch.randperm` and tensor indexing, the fastest plain eager loop.
Both sum the loss and count correct predictions per batch (`.item()`), as the ports' logging does.
`--torch-device cuda`: the network on the GPU; the DataLoader keeps the tensors on the host and moves each batch
with `.to(device, non_blocking=True)` from pinned memory (pin_memory=True), the slices loop holds the tensors on
the GPU (randperm and indexing there); each epoch ends with torch.cuda.synchronize().

  python -m experiments.benchmarks.small_cnn_epoch [--repeats 10] [--jax-mode auto|scan|steps] [--quick]
  python -m experiments.benchmarks.small_cnn_epoch --jax-mode scan --torch-device cuda   # on a GPU machine
"""

from __future__ import annotations

import math

from experiments.benchmarks import common


def _parse_args(argv):
  """The command line (common.base_parser's flags and this script's), --quick's repeats applied."""
  parser = common.base_parser(__doc__.splitlines()[0], repeats=10, torch_device=True)
  parser.add_argument("--batch-size", type=int, default=128)
  parser.add_argument(
    "--jax-mode",
    choices=("auto", "scan", "steps"),
    default="auto",
    help="make_epoch_fn mode ('auto': 'steps' on CPU, 'scan' on an accelerator)",
  )
  args = parser.parse_args(argv)
  if args.quick:
    args.repeats, args.warmup = 3, 1
  return args


def _torch_batches(loader_kind: str, tensors, *, batch_size: int, device):
  """`batches()`: one epoch's (inputs, targets, index) on `device`, from a DataLoader of the host tensors
  (loader_kind 'dataloader') or slices of a random permutation of the tensors already there ('slices').
  tensors: (x, y) on the host and (x, y) on the device."""
  import torch  # pylint: disable=g-import-not-at-top

  (x, y), (x_on, y_on) = tensors
  n = len(y)
  if loader_kind == "dataloader":
    loader = torch.utils.data.DataLoader(
      torch.utils.data.TensorDataset(x, y, torch.arange(n)),
      batch_size=batch_size,
      shuffle=True,
      pin_memory=device.type == "cuda",
    )

    def batches():
      for inputs, targets, index in loader:
        yield (inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True), index)
  else:

    def batches():
      perm = torch.randperm(n, device=device)
      for start in range(0, n, batch_size):
        index = perm[start : start + batch_size]
        yield x_on[index], y_on[index], index

  return batches


def main(argv=None):
  args = _parse_args(argv)
  threads = common.configure_threads(args.threads, host_malloc=args.host_malloc)
  device = common.torch_device(args.torch_device)  # fails here, before any work, if CUDA is asked and missing

  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import torch.nn.functional as F  # pylint: disable=g-import-not-at-top

  from experiments.benchmarks import jax_side  # pylint: disable=g-import-not-at-top
  from experiments.benchmarks import torch_side  # pylint: disable=g-import-not-at-top
  from noisy_jax import data  # pylint: disable=g-import-not-at-top
  from noisy_jax.parallel import mesh as mesh_lib
  from noisy_jax.parallel import xla_options
  from noisy_jax.train import epoch as epoch_lib

  dataset = data.standardize(data.load("mnist5k"), "per_channel")
  x_train = np.array(dataset.x_train, np.float32)  # a writable copy (torch.from_numpy)
  y_train = np.asarray(dataset.y_train, np.int64)
  if args.quick:
    x_train, y_train = x_train[:512], y_train[:512]
  n, batch_size, num_classes = len(y_train), args.batch_size, 10
  steps_per_epoch = math.ceil(n / batch_size)

  # --- noisy_jax
  mesh = mesh_lib.make_mesh(1)
  model = jax_side.make_model("small_cnn", num_classes)
  method = jax_side.make_method("ce", num_classes)
  state = jax_side.make_state(model, x_train.shape[1:], steps_per_epoch=steps_per_epoch)
  num_parameters = jax_side.count_parameters(state.params)
  jx = {
    "state": mesh_lib.replicate(state, mesh),
    "table": mesh_lib.replicate(jax_side.make_table(method, y_train, num_classes), mesh),
    "epoch": 0,
  }
  images = mesh_lib.replicate(jnp.asarray(x_train), mesh)
  epoch_fn = epoch_lib.make_epoch_fn(
    method,
    mesh,
    batch_size=batch_size,
    num_examples=n,
    mode=args.jax_mode,
    compiler_options=xla_options.compiler_options(model, mesh.devices.flat[0].platform),
  )
  order_key = jax.random.key(1)

  def jax_epoch():
    jx["epoch"] += 1
    epoch = jx["epoch"]
    jx["state"], jx["table"], metrics = epoch_fn(
      jx["state"], jx["table"], images, jax.random.fold_in(order_key, epoch), jnp.asarray(epoch, jnp.int32)
    )
    return jax.device_get(metrics)

  # --- PyTorch
  torch.manual_seed(0)
  x = torch.from_numpy(x_train).permute(0, 3, 1, 2).contiguous()  # host tensors (the DataLoader's dataset)
  y = torch.from_numpy(y_train)
  x_on, y_on = x.to(device), y.to(device)  # the slices loop's tensors, on the PyTorch side's device

  def torch_epoch(loader_kind):
    net = torch_side.on_device(torch_side.SmallCNN(num_classes, in_channels=x.shape[1], image_size=x.shape[2]), device)
    assert torch_side.count_parameters(net) == num_parameters, (torch_side.count_parameters(net), num_parameters)
    optimizer = torch_side.sgd(net, lr=0.1, momentum=0.9, weight_decay=5e-4)
    batches = _torch_batches(loader_kind, ((x, y), (x_on, y_on)), batch_size=batch_size, device=device)

    def run():
      net.train()
      total_loss, correct = 0.0, 0
      for inputs, targets, _ in batches():
        optimizer.zero_grad(set_to_none=True)
        logits = net(inputs)
        loss = F.cross_entropy(logits, targets)
        loss.backward()
        optimizer.step()
        total_loss += loss.item() * len(targets)
        correct += (logits.argmax(1) == targets).sum().item()
      common.torch_sync(device)  # explicit end of the epoch on a GPU (the .item()s already waited for the stream)
      return total_loss / n, correct / n

    return run

  torch_name = "torch eager" if device.type == "cpu" else f"torch {device.type} eager"
  sides = {
    f"noisy_jax (make_epoch_fn, {args.jax_mode})": jax_epoch,
    f"{torch_name}, DataLoader": torch_epoch("dataloader"),
    f"{torch_name}, tensor slices": torch_epoch("slices"),
  }
  times = common.alternate(sides, repeats=args.repeats, warmup=args.warmup)
  summary = common.summarize(times, work=n, unit="images/s")
  settings = {
    "model": "small_cnn (12, 24, 48)",
    "parameters": num_parameters,
    "dataset": "mnist5k train (real)",
    "num_examples": n,
    "batch_size": batch_size,
    "steps_per_epoch": steps_per_epoch,
    "loss": "CE",
    "jax_mode": args.jax_mode,
    "torch_device": args.torch_device,
  }
  common.report(
    "small_cnn_epoch",
    args=args,
    threads=threads,
    settings=settings,
    results=summary,
    tables=[common.timing_table(summary, unit="images/s")],
    notes=[
      "real data: noisy_jax.data.load('mnist5k'), standardised per channel"
      + (" (first 512 training images: --quick)" if args.quick else ""),
      "noisy_jax pads the last batch to 128 (padding rows masked out); PyTorch runs a short last batch.",
      "one unit = one epoch; ratio > 1: that side's epoch takes longer than noisy_jax's.",
    ],
  )


if __name__ == "__main__":
  main()
