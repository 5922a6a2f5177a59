"""A full training epoch with augmentation and label-table work: noisy_jax's epoch program vs a PyTorch port loop.

Both sides train a pre-activation ResNet-32 for one epoch over N CIFAR-shaped examples (synthetic uint8 images
and labels: the work does not depend on the pixels) with batch 128, random crop (padding 4) + horizontal flip,
SGD momentum 0.9 + weight decay, and, by default, Joint Optimization's label-table work: each batch reads its soft
labels by index, the JO loss, each example's softmax recorded into the history at its index, and the soft relabel
from the history mean at the end of the epoch (`--method ce`: cross entropy, no history, no relabel).

noisy_jax (what `noisy_jax.train.loop.fit` runs per epoch): the images resident on the device as uint8 codes;
`epoch_lib.make_epoch_fn` with `normalize` = `normalization.fit(<the split>, 'per_channel')` (fit's default: per-channel
statistics of the training split, applied on the device to each gathered batch inside the step), on-device
permutation, gather, normalisation, `noisy_jax.core.augment` crop + flip, the train step with the table gather and
history write (`--jax-mode`: 'auto' = one compiled step per batch on CPU ('steps'), the whole epoch as one
`lax.scan` program on an accelerator ('scan')), then the method's jitted table update, then the epoch metrics
fetched to the host.
PyTorch (how the ports are written): a map-style Dataset returning (image, label, index) with per-example
torchvision-style transforms (RandomCrop(32, padding=4), RandomHorizontalFlip, ToTensor, Normalize), a
DataLoader(batch_size=128, shuffle=True, num_workers=W), the index used to read the soft labels and write the
history (tensors on the PyTorch side's device), the relabel at the epoch end. `--torch-device cuda`: the network,
the soft labels, the history and the prior on the GPU; the DataLoader pins its batches (pin_memory=True) and each
batch's images, labels and indices move with `.to(device, non_blocking=True)`, the table read and written there by
the GPU-resident indices; each epoch ends with torch.cuda.synchronize().

  python -m experiments.benchmarks.epoch [--num-examples 5000] [--method jo|ce] [--workers 0,2] [--repeats 3]
  python -m experiments.benchmarks.epoch --workers 0,2 --jax-mode scan --torch-device cuda   # on a GPU machine
"""

from __future__ import annotations

import math

from experiments.benchmarks import common


def _parse_args(argv):
  """The command line (common.base_parser's flags and this script's), --quick's sizes applied."""
  parser = common.base_parser(__doc__.splitlines()[0], repeats=3, warmup=1, torch_device=True)
  parser.add_argument("--num-examples", type=int, default=5000)
  parser.add_argument("--batch-size", type=int, default=128)
  parser.add_argument("--method", choices=("jo", "ce"), default="jo")
  parser.add_argument(
    "--workers", default="0", help="comma-separated DataLoader num_workers values, one torch side each (e.g. 0,2)"
  )
  parser.add_argument(
    "--jax-mode",
    choices=("auto", "scan", "steps"),
    default="auto",
    help="make_epoch_fn mode ('auto': 'steps' on CPU, 'scan' on an accelerator)",
  )
  args = parser.parse_args(argv)
  if args.quick:
    args.repeats, args.warmup, args.num_examples, args.batch_size = 2, 1, 96, 32
  return args


def _jax_side(args, images_u8, labels, num_classes: int, steps_per_epoch: int):
  """(jax_epoch, method, number of parameters): `jax_epoch()` runs one epoch of fit's epoch program (and the
  method's table update when due) and returns its metrics."""
  import types  # pylint: disable=g-import-not-at-top

  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  from experiments.benchmarks import jax_side  # pylint: disable=g-import-not-at-top
  from noisy_jax.core import augment as augment_lib  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import normalization  # pylint: disable=g-import-not-at-top
  from noisy_jax.parallel import mesh as mesh_lib
  from noisy_jax.parallel import xla_options
  from noisy_jax.train import epoch as epoch_lib

  mesh = mesh_lib.make_mesh(1)
  model = jax_side.make_model("preact_resnet32", num_classes)
  method = jax_side.make_method(args.method, num_classes)
  state = jax_side.make_state(model, (32, 32, 3), steps_per_epoch=steps_per_epoch)
  num_parameters = jax_side.count_parameters(state.params)
  jx = {
    "state": mesh_lib.replicate(state, mesh),
    "table": mesh_lib.replicate(jax_side.make_table(method, labels, num_classes), mesh),
    "epoch": 0,
  }
  # As fit: uint8 codes on the device, normalised in the step (inputs.normalizer: normalization.fit, per channel).
  normalize = normalization.fit(types.SimpleNamespace(x_train=images_u8, pixel_max=255.0), "per_channel")
  images = mesh_lib.replicate(jnp.asarray(images_u8), mesh)
  epoch_fn = epoch_lib.make_epoch_fn(
    method,
    mesh,
    batch_size=args.batch_size,
    num_examples=args.num_examples,
    mode=args.jax_mode,
    augment=augment_lib.make_augment(crop_padding=4, flip=True),
    normalize=normalize,
    compiler_options=xla_options.compiler_options(model, mesh.devices.flat[0].platform),
  )
  end = method.epoch_end
  update_table = None if end is None else jax.jit(end.update, static_argnames=("num_examples",))
  order_key = jax.random.key(1)

  def jax_epoch():
    jx["epoch"] += 1
    epoch = jx["epoch"]
    jx["state"], jx["table"], metrics = epoch_fn(
      jx["state"], jx["table"], images, jax.random.fold_in(order_key, epoch), jnp.asarray(epoch, jnp.int32)
    )
    metrics = jax.device_get(metrics)  # fit's record of the epoch waits for it
    if update_table is not None and end.due(epoch):  # JO's relabelling reads no softmax
      jx["table"] = update_table(jx["table"], None, epoch, num_examples=args.num_examples)
    jax.block_until_ready(jx["table"])
    return metrics

  return jax_epoch, method, num_parameters


def _torch_side(args, images_u8, labels, *, num_classes: int, method, num_parameters: int, device):
  """`torch_epoch(num_workers) -> run`: `run()` trains one epoch of the ports' loop (PyTorch, a DataLoader with
  `num_workers` workers) and returns its mean loss and accuracy."""
  import warnings  # pylint: disable=g-import-not-at-top

  import numpy as np  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import torch.nn.functional as F  # pylint: disable=g-import-not-at-top

  from experiments.benchmarks import jax_side  # pylint: disable=g-import-not-at-top
  from experiments.benchmarks import torch_side  # pylint: disable=g-import-not-at-top

  n, batch_size = args.num_examples, args.batch_size
  mean = images_u8.reshape(-1, 3).mean(axis=0) / 255.0
  std = images_u8.reshape(-1, 3).std(axis=0) / 255.0
  torch.manual_seed(0)
  np.random.seed(0)
  net = torch_side.on_device(torch_side.PreActResNet32(num_classes), device)
  assert torch_side.count_parameters(net) == num_parameters, (torch_side.count_parameters(net), num_parameters)
  optimizer = torch_side.sgd(net, lr=0.1, momentum=0.9, weight_decay=5e-4)
  dataset = torch_side.IndexedImages(images_u8, labels, torch_side.cifar_train_transform(mean, std))
  history_length = method.history_length
  # The label table where the network is (host tensors on CPU, as the ports; GPU-resident with --torch-device cuda).
  tt = {
    "soft_labels": F.one_hot(torch.from_numpy(labels), num_classes).float().to(device),
    "history": torch.zeros(history_length, n, num_classes, device=device),
    "filled": torch.zeros(history_length, dtype=bool, device=device),
    "epoch": 0,
  }
  prior = torch.full((num_classes,), 1.0 / num_classes, device=device)

  # DataLoader workers are forked (Linux default, as in the ports); they run only NumPy/PyTorch transforms and
  # never call into JAX, so JAX's warning about forking a multithreaded process does not apply here.
  warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)

  def torch_epoch(num_workers):
    loader = torch.utils.data.DataLoader(
      dataset,
      batch_size=batch_size,
      shuffle=True,
      num_workers=num_workers,
      worker_init_fn=torch_side.seed_worker if num_workers else None,
      pin_memory=device.type == "cuda",
    )

    def run():
      tt["epoch"] += 1
      net.train()
      total_loss, correct = 0.0, 0
      for inputs, targets, index in loader:
        inputs = inputs.to(device, non_blocking=True)  # no-ops on CPU
        targets = targets.to(device, non_blocking=True)
        index = index.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        logits = net(inputs)
        if args.method == "jo":
          loss = torch_side.joint_optimization_loss(
            logits,
            tt["soft_labels"][index],
            prior,
            alpha=jax_side.JO_SETTINGS["alpha"],
            beta=jax_side.JO_SETTINGS["beta"],
          )
        else:
          loss = F.cross_entropy(logits, targets)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
          if history_length:
            slot = tt["epoch"] % history_length
            tt["history"][slot, index] = F.softmax(logits, dim=1)
            tt["filled"][slot] = True
          total_loss += loss.item() * len(index)
          correct += (logits.argmax(1) == targets).sum().item()
      if args.method == "jo" and tt["epoch"] >= jax_side.JO_SETTINGS["begin"]:
        tt["soft_labels"] = tt["history"][tt["filled"]].mean(dim=0)
      common.torch_sync(device)  # the relabel too: the epoch ends when the table is written
      return total_loss / n, correct / n

    return run

  return torch_epoch


def main(argv=None):
  args = _parse_args(argv)
  workers = [int(w) for w in args.workers.split(",")]
  threads = common.configure_threads(args.threads, host_malloc=args.host_malloc)
  device = common.torch_device(args.torch_device)  # fails here, before any work, if CUDA is asked and missing

  import numpy as np  # pylint: disable=g-import-not-at-top

  n, batch_size, num_classes = args.num_examples, args.batch_size, 10
  rng = np.random.default_rng(0)
  images_u8 = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
  labels = rng.integers(0, num_classes, n)
  steps_per_epoch = math.ceil(n / batch_size)

  # --- noisy_jax: the epoch program of `fit`; PyTorch: the ports' loop.
  jax_epoch, method, num_parameters = _jax_side(args, images_u8, labels, num_classes, steps_per_epoch)
  torch_epoch = _torch_side(
    args, images_u8, labels, num_classes=num_classes, method=method, num_parameters=num_parameters, device=device
  )

  torch_name = "torch" if device.type == "cpu" else f"torch {device.type}"
  sides = {f"noisy_jax (make_epoch_fn, {args.jax_mode})": jax_epoch}
  for w in workers:
    sides[f"{torch_name} DataLoader workers={w}"] = torch_epoch(w)
  times = common.alternate(sides, repeats=args.repeats, warmup=args.warmup)
  summary = common.summarize(times, work=n, unit="images/s")
  settings = {
    "model": "preact_resnet32",
    "parameters": num_parameters,
    "num_examples": n,
    "batch_size": batch_size,
    "steps_per_epoch": steps_per_epoch,
    "method": args.method,
    "augment": "crop padding 4 + horizontal flip",
    "jax_mode": args.jax_mode,
    "workers": workers,
    "input": "synthetic CIFAR-shaped uint8 [N,32,32,3]",
    "jax_input": "uint8 on the device, per-channel normalisation in the step (as fit)",
    "torch_device": args.torch_device,
  }
  common.report(
    "epoch",
    args=args,
    threads=threads,
    settings=settings,
    results=summary,
    tables=[common.timing_table(summary, unit="images/s", scale=1.0, time_unit="s")],
    notes=[
      "synthetic data (uniform random uint8 images, random labels); timing only.",
      "one unit = one epoch; ratio > 1: that side's epoch takes longer than noisy_jax's.",
      "torch workers > 0 start new worker processes every epoch (persistent_workers=False, as "
      "the ports do); the workers share the same cores as the training threads.",
    ],
  )


if __name__ == "__main__":
  main()
