"""Checks every paper config's test makes the same way (tests/test_*_paper_config.py): the docstring's commands load,
a row shrunk to a smoke run under `tfds.testing.mock_data`, and PyTorch's cosine lr per epoch as the reference. A
plain module imported by the tests, not a test file; the shrinking happens here, never in the configs."""

import re

TINY_RESNET = {"widths": (4, 8), "blocks_per_stage": (1, 1)}  # a ResNet of two 1-block stages


def check_docstring_commands(module, count: int = 2) -> None:
  """The `count` commands of `module`'s docstring name the module and load, and its default string is DEFAULT."""
  name = module.__name__.rsplit(".", 1)[-1]
  found = re.findall(r"--config=experiments/configs/(\w+)\.py:([\w,.=-]+)", module.__doc__)
  assert len(found) == count and all(found_name == name for found_name, _ in found), found
  for _, arg in found:
    module.get_config(arg)
  assert module.get_config().to_dict() == module.get_config(module.DEFAULT).to_dict()


def shrunk(config, *, validation_size: int, sections=()):
  """`config` as a smoke run: 1 epoch of the run and of each stage section in `sections` (their lr steps removed),
  batches of 16 on one device, no checkpoints, `validation_size` validation rows, a TINY_RESNET."""
  for part in (config, *(config[name] for name in sections)):
    part.num_epochs = 1
    part.optimizer.lr_boundaries = ()
  config.batch_size = 16
  config.num_devices = 1
  config.checkpoint_every = 0
  config.dataset_kwargs.validation_size = validation_size
  config.model.kwargs = dict(TINY_RESNET)
  return config


def torch_cosine_lrs(lr: float, epochs: int, eta_min: float = 0.0):
  """The lr PyTorch trains each epoch at with SGD(lr) and CosineAnnealingLR(T_max=epochs, eta_min) stepped after
  every epoch (the codes' `scheduler.step()` at an epoch's end): float64 [epochs]. Momentum and weight decay do not
  move the lr, so the reference optimiser has neither."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top

  optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
  scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs, eta_min=eta_min)
  out = []
  for _ in range(epochs):
    out.append(optimizer.param_groups[0]["lr"])
    optimizer.step()  # no gradient: nothing moves; keeps PyTorch's step order (no warning)
    scheduler.step()
  return np.array(out)
