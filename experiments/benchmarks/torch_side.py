"""The PyTorch side of the benchmarks, written the way the original PyTorch ports of the papers are written.

Models (same architecture and parameter count as noisy_jax.models; the scripts assert equal counts):
  PreActResNet32: 3x3 stem conv (16), 3 stages x 5 pre-activation basic blocks (16/32/64, stride 2 at the first
    block of stages 2 and 3, 1x1 projection shortcut of the pre-activated input where the shape changes), then
    BN -> ReLU -> global average pool -> Linear. Bias-free convolutions, BN eps 1e-5, momentum 0.1 (= Flax 0.9).
  SmallCNN: stages of Conv3x3 (bias-free) -> BN -> ReLU, a 2x2 max-pool between stages while the map is larger
    than 2x2, flatten, Linear.

Data: `IndexedImages`, a map-style Dataset returning (image, label, index) like the ports' CIFAR wrappers, with
per-example torchvision-style transforms written here in NumPy/PyTorch (this environment has no torchvision):
`RandomCrop(32, padding=4)` (zero pad the raw uint8 image, crop at a uniform offset), `RandomHorizontalFlip()`,
`ToTensor()` (HWC uint8 -> CHW float in [0, 1]) and `Normalize(mean, std)` per channel, in that order.

Joint Optimization: the batch loss Lc + alpha Lp + beta Le against the table's soft labels and the per-index
history record, as the original code does (its history is an array written with the batch's indices: on the host,
or on the GPU with `--torch-device cuda`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F


def count_parameters(model: nn.Module) -> int:
  """Trainable parameters (BatchNorm running statistics are buffers, not counted)."""
  return sum(p.numel() for p in model.parameters() if p.requires_grad)


def on_device(model: nn.Module, device, memory_format=None) -> nn.Module:
  """`model.to(device[, memory_format])`, checked: every parameter and buffer ends on `device`'s type (no silent
  CPU copy left behind when the benchmark asked for a GPU)."""
  model = model.to(device) if memory_format is None else model.to(device, memory_format=memory_format)
  device = torch.device(device)
  misplaced = [
    name for name, t in list(model.named_parameters()) + list(model.named_buffers()) if t.device.type != device.type
  ]
  if misplaced:
    raise RuntimeError(f"{type(model).__name__}: {misplaced[:3]} not on {device} after .to({device}).")
  return model


def _he_init(module: nn.Module) -> None:
  for m in module.modules():
    if isinstance(m, nn.Conv2d):
      nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")


class PreActBlock(nn.Module):
  """out = conv3x3(relu(bn2(conv3x3_s(a)))) + shortcut, a = relu(bn1(x)); shortcut conv1x1_s(a) or x."""

  def __init__(self, in_channels: int, channels: int, stride: int):
    super().__init__()
    self.bn1 = nn.BatchNorm2d(in_channels)
    self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False)
    self.bn2 = nn.BatchNorm2d(channels)
    self.conv2 = nn.Conv2d(channels, channels, 3, stride=1, padding=1, bias=False)
    self.shortcut = None
    if stride != 1 or in_channels != channels:
      self.shortcut = nn.Conv2d(in_channels, channels, 1, stride=stride, bias=False)

  def forward(self, x):
    a = F.relu(self.bn1(x))
    h = self.conv2(F.relu(self.bn2(self.conv1(a))))
    return h + (x if self.shortcut is None else self.shortcut(a))


class PreActResNet32(nn.Module):
  """Pre-activation ResNet-32 for 32x32 inputs (NCHW), widths 16/32/64, 3 x 5 blocks."""

  def __init__(self, num_classes: int = 10, widths=(16, 32, 64), blocks_per_stage=(5, 5, 5), in_channels: int = 3):
    super().__init__()
    self.stem = nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False)
    blocks, c_in = [], widths[0]
    for stage, (width, count) in enumerate(zip(widths, blocks_per_stage)):
      for block in range(count):
        blocks.append(PreActBlock(c_in, width, 2 if stage > 0 and block == 0 else 1))
        c_in = width
    self.blocks = nn.Sequential(*blocks)
    self.final_bn = nn.BatchNorm2d(c_in)
    self.head = nn.Linear(c_in, num_classes)
    _he_init(self)

  def forward(self, x):
    x = F.relu(self.final_bn(self.blocks(self.stem(x))))
    return self.head(x.mean(dim=(2, 3)))


class SmallCNN(nn.Module):
  """noisy_jax's SmallCNN in PyTorch: Conv3x3-BN-ReLU stages, 2x2 max-pool between them, flatten head."""

  def __init__(self, num_classes: int = 10, widths=(12, 24, 48), in_channels: int = 1, image_size: int = 28):
    super().__init__()
    layers, c_in, size = [], in_channels, image_size
    for stage, width in enumerate(widths):
      if stage and size > 2:
        layers.append(nn.MaxPool2d(2))
        size //= 2
      layers += [nn.Conv2d(c_in, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
      c_in = width
    self.features = nn.Sequential(*layers)
    self.head = nn.Linear(c_in * size * size, num_classes)
    _he_init(self)

  def forward(self, x):
    return self.head(torch.flatten(self.features(x), 1))


def sgd(model: nn.Module, *, lr: float = 0.1, momentum: float = 0.9, weight_decay: float = 5e-4):
  """SGD with momentum and coupled weight decay on every parameter (what train.optim.make_optimizer builds)."""
  return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)


def joint_optimization_loss(logits, soft_labels, prior, *, alpha: float, beta: float):
  """Tanaka et al.'s L = Lc + alpha Lp + beta Le for one batch (Lc written as cross entropy: same gradient)."""
  log_p = F.log_softmax(logits, dim=1)
  p = log_p.exp()
  lc = -(soft_labels * log_p).sum(dim=1).mean()
  mean_p = p.mean(dim=0)
  lp = (prior * (prior.log() - mean_p.log())).sum()
  le = -(p * log_p).sum(dim=1).mean()
  return lc + alpha * lp + beta * le


# ---------------------------------------------------------------------------------------------------------------
# Data, per example, like torchvision on a CIFAR-style dataset


class RandomCrop:
  """torchvision RandomCrop(size, padding): zero-pad an HWC uint8 image, crop size x size at a uniform offset."""

  def __init__(self, size: int, padding: int):
    self.size, self.padding = size, padding

  def __call__(self, image: np.ndarray) -> np.ndarray:
    p = self.padding
    padded = np.pad(image, ((p, p), (p, p), (0, 0)))
    top, left = np.random.randint(0, padded.shape[0] - self.size + 1, size=2)
    return padded[top : top + self.size, left : left + self.size]


class RandomHorizontalFlip:
  """torchvision RandomHorizontalFlip(p=0.5) on an HWC image."""

  def __call__(self, image: np.ndarray) -> np.ndarray:
    return image[:, ::-1] if np.random.rand() < 0.5 else image


class ToTensor:
  """torchvision ToTensor: HWC uint8 -> CHW float32 tensor in [0, 1]."""

  def __call__(self, image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).float().div_(255.0)


class Normalize:
  """torchvision Normalize(mean, std) per channel on a CHW tensor."""

  def __init__(self, mean, std):
    self.mean = torch.as_tensor(mean, dtype=torch.float32).view(-1, 1, 1)
    self.std = torch.as_tensor(std, dtype=torch.float32).view(-1, 1, 1)

  def __call__(self, x: torch.Tensor) -> torch.Tensor:
    return (x - self.mean) / self.std


class Compose:
  def __init__(self, transforms):
    self.transforms = list(transforms)

  def __call__(self, x):
    for t in self.transforms:
      x = t(x)
    return x


def cifar_train_transform(mean, std, *, crop_padding: int = 4, flip: bool = True) -> Compose:
  """The ports' CIFAR training transform: RandomCrop(32, padding=4), RandomHorizontalFlip, ToTensor, Normalize."""
  transforms = []
  if crop_padding:
    transforms.append(RandomCrop(32, crop_padding))
  if flip:
    transforms.append(RandomHorizontalFlip())
  return Compose(transforms + [ToTensor(), Normalize(mean, std)])


class IndexedImages(torch.utils.data.Dataset):
  """(transform(image), label, index) for HWC uint8 images [N, H, W, C] and int labels [N]."""

  def __init__(self, images: np.ndarray, labels: np.ndarray, transform):
    self.images, self.labels, self.transform = images, np.asarray(labels, np.int64), transform

  def __len__(self):
    return len(self.labels)

  def __getitem__(self, index):
    return self.transform(self.images[index]), int(self.labels[index]), index


def seed_worker(worker_id: int) -> None:
  """DataLoader worker_init_fn: a distinct NumPy seed per worker (the transforms draw from np.random)."""
  np.random.seed((torch.initial_seed() + worker_id) % 2**32)
