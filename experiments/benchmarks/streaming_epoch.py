"""Measurement 2 of experiments/benchmarks/streaming.py (see its docstring): a whole epoch feeding the pre-activation
ResNet-32 train step, noisy_jax's epoch program streaming the files through Grain workers vs PyTorch's DataLoader
loop, with the time each side waits for data.
"""

from __future__ import annotations

import math
import time

from experiments.benchmarks import common


def _timed_epoch_loader(original_epoch_loader, waits: dict):
  """streaming.epoch_loader with the time spent waiting for batches (and creating the loader) added to
  waits["current"]."""

  def timed_epoch_loader(*a, **kw):
    start = time.perf_counter()
    loader = original_epoch_loader(*a, **kw)
    waits["current"] += time.perf_counter() - start
    inner_next = loader.__next__

    class Timed:
      def __iter__(self):
        return self

      def __next__(self):
        t = time.perf_counter()
        try:
          return inner_next()
        finally:
          waits["current"] += time.perf_counter() - t

      def __enter__(self):
        return self

      def __exit__(self, *exc):
        loader.close()

    return Timed()

  return timed_epoch_loader


def _jax_training(args, epoch_files, epoch_labels, *, num_classes: int, order_key, waits: dict):
  """(jax_epoch, number of parameters, steps per epoch, normalisation): `jax_epoch(w)` is `run()`, one epoch of
  epoch_lib.make_epoch_fn streaming `epoch_files` with `w` Grain workers, its data-wait fraction appended to
  waits[its side's name]."""
  import types  # pylint: disable=g-import-not-at-top

  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  from experiments.benchmarks import jax_side  # pylint: disable=g-import-not-at-top
  from noisy_jax.core import augment as augment_lib  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import normalization  # pylint: disable=g-import-not-at-top
  from noisy_jax.parallel import mesh as mesh_lib  # pylint: disable=g-import-not-at-top
  from noisy_jax.parallel import streaming  # pylint: disable=g-import-not-at-top
  from noisy_jax.parallel import xla_options  # pylint: disable=g-import-not-at-top
  from noisy_jax.train import epoch as epoch_lib  # pylint: disable=g-import-not-at-top

  n_epoch, batch_size = args.epoch_images, args.batch_size
  norm = normalization.fit(types.SimpleNamespace(x_train=epoch_files, pixel_max=255.0), "per_channel")
  steps_per_epoch = math.ceil(n_epoch / batch_size)
  augment = augment_lib.make_augment(crop_padding=4, flip=True) if args.augment else None
  mesh = mesh_lib.make_mesh(1)
  model = jax_side.make_model("preact_resnet32", num_classes)
  method = jax_side.make_method("ce", num_classes)
  state = jax_side.make_state(model, (32, 32, 3), steps_per_epoch=steps_per_epoch)
  num_parameters = jax_side.count_parameters(state.params)
  jx = {
    "state": mesh_lib.replicate(state, mesh),
    "table": mesh_lib.replicate(jax_side.make_table(method, epoch_labels, num_classes), mesh),
    "epoch": 0,
  }
  original_epoch_loader = streaming.epoch_loader
  timed_epoch_loader = _timed_epoch_loader(original_epoch_loader, waits)

  def jax_epoch(w):
    fn = epoch_lib.make_epoch_fn(
      method,
      mesh,
      batch_size=batch_size,
      num_examples=n_epoch,
      augment=augment,
      compiler_options=xla_options.compiler_options(model, mesh.devices.flat[0].platform),
      normalize=norm,
      source=epoch_files,
      workers=w,
    )
    name = f"noisy_jax W={w}"

    def run():
      jx["epoch"] += 1
      waits["current"] = 0.0
      streaming.epoch_loader = timed_epoch_loader
      start = time.perf_counter()
      try:
        jx["state"], jx["table"], metrics = fn(
          jx["state"],
          jx["table"],
          None,
          jax.random.fold_in(order_key, jx["epoch"]),
          jnp.asarray(jx["epoch"], jnp.int32),
        )
        metrics = jax.device_get(metrics)  # fit's record of the epoch waits for it
      finally:
        streaming.epoch_loader = original_epoch_loader
      waits.setdefault(name, []).append(waits["current"] / (time.perf_counter() - start))
      return metrics

    return run

  return jax_epoch, num_parameters, steps_per_epoch, norm


def _torch_training(args, epoch_dataset, *, num_classes: int, num_parameters: int, waits: dict):
  """`torch_epoch(w)`: `run()`, one epoch of the PyTorch ResNet-32 over `epoch_dataset` in a DataLoader with `w`
  workers, its data-wait fraction appended to waits[its side's name]."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import torch.nn.functional as F  # pylint: disable=g-import-not-at-top

  from experiments.benchmarks import torch_side  # pylint: disable=g-import-not-at-top

  n_epoch = args.epoch_images
  torch.manual_seed(0)
  np.random.seed(0)
  net = torch_side.PreActResNet32(num_classes)
  assert torch_side.count_parameters(net) == num_parameters, (torch_side.count_parameters(net), num_parameters)
  optimizer = torch_side.sgd(net, lr=0.1, momentum=0.9, weight_decay=5e-4)

  def torch_epoch(w):
    loader = torch.utils.data.DataLoader(
      epoch_dataset,
      batch_size=args.batch_size,
      shuffle=True,
      num_workers=w,
      persistent_workers=False,
      worker_init_fn=torch_side.seed_worker if w else None,
    )
    name = f"torch W={w}"

    def run():
      net.train()
      start = time.perf_counter()
      iterator = iter(loader)
      waited = time.perf_counter() - start
      total_loss, correct = 0.0, 0
      while True:
        t = time.perf_counter()
        try:
          inputs, targets = next(iterator)
        except StopIteration:
          break
        finally:
          waited += time.perf_counter() - t
        optimizer.zero_grad(set_to_none=True)
        logits = net(inputs)
        loss = F.cross_entropy(logits, targets)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
          total_loss += loss.item() * len(targets)
          correct += (logits.argmax(1) == targets).sum().item()
      waits.setdefault(name, []).append(waited / (time.perf_counter() - start))
      return total_loss / n_epoch, correct / n_epoch

    return run

  return torch_epoch


def measure_epochs(
  args, workers, files, labels, torch_files, *, num_classes: int, sampler, order_key
) -> tuple[dict, dict]:
  """(epoch info, epoch summary) of measurement 2 over every (N / epoch_images)-th file (labels: their int32 class
  ids); torch_files: (FolderImages, paths, labels)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  from experiments.benchmarks import torch_side  # pylint: disable=g-import-not-at-top

  folder_images, paths, _ = torch_files
  n_epoch = args.epoch_images
  stride = args.num_files // n_epoch
  rows = np.arange(0, stride * n_epoch, stride)
  epoch_files = files[rows]
  epoch_paths, epoch_labels = [paths[i] for i in rows], labels[rows]
  waits = {}
  jax_epoch, num_parameters, steps_per_epoch, norm = _jax_training(
    args, epoch_files, epoch_labels, num_classes=num_classes, order_key=order_key, waits=waits
  )
  mean, std = norm.mean.astype(np.float64), norm.std.astype(np.float64)
  transform = torch_side.cifar_train_transform(mean, std, crop_padding=4 if args.augment else 0, flip=args.augment)
  epoch_dataset = folder_images(epoch_paths, [int(y) for y in epoch_labels], transform)
  torch_epoch = _torch_training(
    args, epoch_dataset, num_classes=num_classes, num_parameters=num_parameters, waits=waits
  )
  sides = {}
  for w in workers:
    sides[f"noisy_jax W={w}"] = jax_epoch(w)
    sides[f"torch W={w}"] = torch_epoch(w)
  sides = {name: sampler.watch(f"epoch: {name}", fn) for name, fn in sides.items()}
  print(
    f"training epochs: {len(sides)} sides, {args.warmup} + {args.epoch_repeats} epochs of {n_epoch} images each ...",
    flush=True,
  )
  epoch_times = common.alternate(sides, repeats=args.epoch_repeats, warmup=args.warmup)
  epoch_summary = common.summarize(epoch_times, work=n_epoch, unit="images/s")
  for name, s in epoch_summary.items():
    timed = waits[name][args.warmup :]  # the warm-up epochs left out
    s["data_wait_fraction_median"] = float(np.median(timed))
    s["data_wait_fractions"] = timed
  epoch_results = {
    "parameters": num_parameters,
    "steps_per_epoch": steps_per_epoch,
    "normalization": {"mean": norm.mean.tolist(), "std": norm.std.tolist()},
  }
  return epoch_results, epoch_summary
