"""Pretrained weights from PyTorch files, mapped by name onto the ImageNet ResNets of `noisy_jax.models`.

Reads a torchvision (or timm: same names) ResNet-18/34/50 `state_dict` from

  FILE.pth / .pt / .bin   `torch.load(weights_only=True)`: PyTorch must be installed (nothing is unpickled but
                          tensors); a dict holding the weights under 'state_dict' or 'model' is opened too
  FILE.safetensors        read here with NumPy (the format's 8-byte header length, JSON header, raw little-endian
                          data), PyTorch not needed

and lays it out as the variables of `models.imagenet_resnet.ImageNetResNet` (`imagenet_resnet18`,
`imagenet_resnet34`, `resnet50`). The names map one to one (s, b from 1 on the Flax side, b from 0 on PyTorch's):

  conv1.weight [O, I, kh, kw]              -> params/stem_conv/kernel [kh, kw, I, O]
  bn1.{weight, bias}                       -> params/stem_bn/{scale, bias}
  bn1.{running_mean, running_var}          -> batch_stats/stem_bn/{mean, var}
  layer{s}.{b-1}.conv{k}.weight            -> params/stage{s}_block{b}/conv{k}/kernel (k = 1, 2, and 3 in a Bottleneck)
  layer{s}.{b-1}.bn{k}.*                   -> stage{s}_block{b}/bn{k}/* (as bn1 above)
  layer{s}.{b-1}.downsample.0.weight       -> params/stage{s}_block{b}/shortcut_conv/kernel
  layer{s}.{b-1}.downsample.1.*            -> stage{s}_block{b}/shortcut_bn/*
  fc.weight [C, D], fc.bias [C]            -> params/head/kernel [D, C], params/head/bias [C]

A leading 'module.' (nn.DataParallel) is dropped and `num_batches_tracked` is ignored. The classifier head keeps the
network's own initialisation when its shape differs from the file's (an ImageNet file, 1,000 classes, fine-tuned on
a data set of C classes); every other parameter must be in the file with the shape the network has, and every
parameter of the file must be used (a ResNet-101 file does not silently fill a ResNet-50). Values keep the
network's dtype. BatchNorm's running variance is taken as stored (PyTorch's unbiased running estimate); eval mode
then computes what PyTorch's eval mode computes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any, Mapping

import flax
import flax.traverse_util
import jax.numpy as jnp
import ml_dtypes
import numpy as np

TORCH_SUFFIXES = (".pth", ".pt", ".bin")
SAFETENSORS_SUFFIX = ".safetensors"
HEAD = "head"  # the classifier's module name in every ImageNetResNet

# safetensors dtype names -> NumPy dtypes (the format stores little-endian data).
_SAFETENSORS_DTYPES = {
  "F64": np.dtype("<f8"),
  "F32": np.dtype("<f4"),
  "F16": np.dtype("<f2"),
  "BF16": np.dtype(ml_dtypes.bfloat16),
  "I64": np.dtype("<i8"),
  "I32": np.dtype("<i4"),
  "I16": np.dtype("<i2"),
  "I8": np.dtype("i1"),
  "U8": np.dtype("u1"),
  "BOOL": np.dtype("?"),
}
_BN_NAMES = {"scale": "weight", "bias": "bias", "mean": "running_mean", "var": "running_var"}


def read_safetensors(path: str) -> dict[str, np.ndarray]:
  """The tensors of a .safetensors file as NumPy arrays (name -> array, copies), read without PyTorch.

  Raises:
    ValueError: naming `path` when its header is not a safetensors header, a dtype is not one of the format's, or a
      tensor's byte range does not fit its shape or the file.
  """
  with open(path, "rb") as f:
    raw = f.read()
  if len(raw) < 8:
    raise ValueError(f"{path} is not a safetensors file: {len(raw)} bytes, shorter than the 8-byte header length.")
  header_length = int.from_bytes(raw[:8], "little")
  if header_length > len(raw) - 8:
    raise ValueError(f"{path} is not a safetensors file: its header length {header_length} exceeds the file.")
  try:
    header = json.loads(raw[8 : 8 + header_length].decode("utf-8"))
  except (UnicodeDecodeError, json.JSONDecodeError) as error:
    raise ValueError(f"{path} is not a safetensors file: its header is not JSON ({error}).") from None
  if not isinstance(header, dict):
    raise ValueError(f"{path} is not a safetensors file: its header is not a JSON object.")
  data = memoryview(raw)[8 + header_length :]
  tensors = {}
  for name, entry in header.items():
    if name == "__metadata__":
      continue
    dtype = _SAFETENSORS_DTYPES.get(entry.get("dtype") if isinstance(entry, dict) else None)
    if dtype is None:
      raise ValueError(
        f"{path}: tensor {name!r} has dtype {entry.get('dtype') if isinstance(entry, dict) else entry!r}; "
        f"readable: {', '.join(_SAFETENSORS_DTYPES)}."
      )
    shape = tuple(int(d) for d in entry["shape"])
    begin, end = (int(o) for o in entry["data_offsets"])
    if not 0 <= begin <= end <= len(data) or end - begin != int(np.prod(shape)) * dtype.itemsize:
      raise ValueError(f"{path}: tensor {name!r} of shape {shape} ({dtype}) has byte range [{begin}, {end}).")
    tensors[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(shape).copy()
  return tensors


def read_torch(path: str) -> dict[str, np.ndarray]:
  """The tensors of a PyTorch state_dict file (torch.load with weights_only=True) as NumPy arrays.

  Raises:
    ImportError: when PyTorch is not installed (saying to convert the file to .safetensors).
    ValueError: naming `path` when torch cannot read it or it holds no dict of tensors.
  """
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise ImportError(
      f"reading {path} needs PyTorch (pip install torch); or save the state_dict as {SAFETENSORS_SUFFIX}, which "
      "noisy_jax reads without it."
    ) from None
  try:
    loaded = torch.load(path, map_location="cpu", weights_only=True)
  except Exception as error:  # pylint: disable=broad-except  # torch raises many kinds for a wrong file
    raise ValueError(f"{path} is not a PyTorch state_dict file torch.load can read: {error}") from None
  for key in ("state_dict", "model"):
    if isinstance(loaded, dict) and isinstance(loaded.get(key), dict):
      loaded = loaded[key]
  if not isinstance(loaded, dict) or not loaded:
    raise ValueError(f"{path} holds a {type(loaded).__name__}, not a state_dict (a dict of parameter tensors).")
  tensors = {}
  for name, value in loaded.items():
    if not isinstance(value, torch.Tensor):
      raise ValueError(f"{path}: entry {name!r} is a {type(value).__name__}, not a tensor.")
    value = value.detach().cpu()
    tensors[name] = (value.float() if value.dtype == torch.bfloat16 else value).numpy().copy()
  return tensors


def read_state_dict(path: str) -> dict[str, np.ndarray]:
  """The named tensors of a PyTorch weight file, `.safetensors` or `.pth` / `.pt` / `.bin` (see the module
  docstring), with a leading 'module.' dropped.

  Raises:
    FileNotFoundError: naming `path` when it does not exist.
    ValueError: for another suffix (listing the readable ones) or a file that is not what its suffix says.
  """
  if not os.path.isfile(path):
    raise FileNotFoundError(f"pretrained weights {path!r}: no such file.")
  if path.endswith(SAFETENSORS_SUFFIX):
    tensors = read_safetensors(path)
  elif path.endswith(TORCH_SUFFIXES):
    tensors = read_torch(path)
  else:
    raise ValueError(
      f"pretrained weights {path!r}: unknown file type; readable: {', '.join((SAFETENSORS_SUFFIX, *TORCH_SUFFIXES))} "
      "(a PyTorch state_dict), or a noisy_jax run's workdir or exported model directory."
    )
  return {name.removeprefix("module."): value for name, value in tensors.items()}


def torch_name(path: tuple[str, ...]) -> tuple[str, bool]:
  """(PyTorch name, is a kernel to transpose) of a Flax variable path of an ImageNetResNet, e.g.
  ('params', 'stage2_block1', 'shortcut_conv', 'kernel') -> ('layer2.0.downsample.0.weight', True).

  Raises:
    ValueError: for a path that is not one of an ImageNetResNet's variables.
  """
  collection, *modules, leaf = path
  prefix = []
  if modules and (match := re.fullmatch(r"stage(\d+)_block(\d+)", modules[0])):
    prefix, modules = [f"layer{match[1]}", str(int(match[2]) - 1)], modules[1:]
  renamed = {"stem_conv": "conv1", "stem_bn": "bn1", "shortcut_conv": "downsample.0", "shortcut_bn": "downsample.1"}
  if len(modules) == 1 and modules[0] == HEAD and not prefix and leaf in ("kernel", "bias"):
    return ("fc.weight" if leaf == "kernel" else "fc.bias"), leaf == "kernel"
  if len(modules) == 1:
    module = renamed.get(modules[0], modules[0])
    if leaf == "kernel" and collection == "params" and re.fullmatch(r"conv\d+|downsample\.0", module):
      return ".".join([*prefix, module, "weight"]), True
    if leaf in _BN_NAMES and re.fullmatch(r"bn\d+|downsample\.1", module):
      return ".".join([*prefix, module, _BN_NAMES[leaf]]), False
  raise ValueError(f"variable {'/'.join(path)} is not one of an ImageNet ResNet's (noisy_jax.models.imagenet_resnet).")


def _as_flax(value: np.ndarray, transpose: bool) -> np.ndarray:
  """A PyTorch tensor in Flax's layout: conv [O, I, kh, kw] -> [kh, kw, I, O], dense [C, D] -> [D, C]."""
  if transpose:
    return np.transpose(value, (2, 3, 1, 0)) if value.ndim == 4 else value.T
  return value


@dataclasses.dataclass(frozen=True)
class StoredWeights:
  """Weights read from a file, before they are fitted into a network (`fit_into`).

  source: the file or directory, for messages. layout: 'torch' (`arrays` keyed by PyTorch names, PyTorch layouts;
  `read_state_dict`) or 'flax' (keyed by '/'-joined variable paths such as 'params/head/kernel', Flax layouts; a
  noisy_jax run's variables).
  """

  source: str
  arrays: Mapping[str, np.ndarray]
  layout: str = "torch"


def _is_head(path: tuple[str, ...]) -> bool:
  return len(path) == 3 and path[1] == HEAD


def fit_into(template, weights: StoredWeights) -> tuple[Any, dict]:
  """The variables of `template` (a network's fresh {'params', 'batch_stats'}) with every leaf taken from
  `weights`, except the classifier head when its stored shape differs from the network's (then the head keeps its
  fresh initialisation: a 1,000-class ImageNet head on a data set of C classes). Returns (variables, report) with
  report = {'source', 'loaded': number of leaves taken, 'head': 'loaded' | 'initialised', 'stored_classes'}.
  Traceable in `template` (the stored values enter as constants), so it can run inside jit or vmap.

  Raises:
    ValueError: naming `weights.source` and the first variable of the network that the file lacks or has in another
      shape (both shapes), or the stored variables the network does not have.
  """
  if weights.layout not in ("torch", "flax"):
    raise ValueError(f"StoredWeights.layout={weights.layout!r}; allowed: 'torch', 'flax'.")
  flat = flax.traverse_util.flatten_dict(flax.core.unfreeze(template))
  stored = {name: value for name, value in weights.arrays.items() if not name.endswith("num_batches_tracked")}
  values = {}
  for path in flat:
    name, transpose = torch_name(path) if weights.layout == "torch" else ("/".join(path), False)
    if name not in stored:
      raise ValueError(
        f"pretrained weights {weights.source}: the network's {'/'.join(path)} ({name}) is not in the file; are "
        "they the weights of another architecture?"
      )
    values[path] = (name, _as_flax(np.asarray(stored[name]), transpose))
  unused = sorted(set(stored) - {name for name, _ in values.values()})
  if unused:
    shown = ", ".join(unused[:5]) + (f" and {len(unused) - 5} more" if len(unused) > 5 else "")
    raise ValueError(
      f"pretrained weights {weights.source}: {len(unused)} stored variables the network does not have: {shown}; "
      "are they the weights of a deeper network or of another architecture?"
    )
  head_fits = all(values[path][1].shape == leaf.shape for path, leaf in flat.items() if _is_head(path))
  out = {}
  for path, leaf in flat.items():
    name, value = values[path]
    if _is_head(path) and not head_fits:
      out[path] = leaf
    elif value.shape != tuple(leaf.shape):
      raise ValueError(
        f"pretrained weights {weights.source}: {name} has shape {value.shape} (in the network's layout), the "
        f"network's {'/'.join(path)} {tuple(leaf.shape)}."
      )
    else:
      out[path] = jnp.asarray(value, dtype=leaf.dtype)
  heads = [values[path][1] for path in flat if _is_head(path)]
  report = {
    "source": weights.source,
    "loaded": sum(1 for path in flat if head_fits or not _is_head(path)),
    "head": "loaded" if head_fits else "initialised",
    "stored_classes": int(heads[0].shape[-1]) if heads else None,
  }
  return flax.traverse_util.unflatten_dict(out), report
