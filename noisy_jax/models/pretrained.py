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

Every error names the file and is a noisy_jax.core.errors.InputError (a ValueError; a missing file a
MissingInputError, a FileNotFoundError): a truncated file, a whole pickled model (`torch.save(model)`: save its
state_dict), a variable the file lacks or has in another shape. `check_fits` makes the same checks on the shapes of a
network's variables (`variable_shapes`, jax.eval_shape) without computing anything, so a run can check a file before
it reads its data; `describe` and `matching_model` say what a torchvision file holds and which ImageNet ResNet
(RESNETS) has its layout.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any, Mapping

import flax
import flax.traverse_util
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from noisy_jax.core import errors
from noisy_jax.models import imagenet_resnet

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
_MAX_HEADER_BYTES = 100 * 2**20  # the safetensors library's limit on a header's length
_COPY_AGAIN = "Was its download or copy interrupted? Fetch it again."
# The ImageNet ResNets a PyTorch file can fill (noisy_jax.models.MODELS names): (block, default blocks per stage).
RESNETS = {
  "imagenet_resnet18": ("basic", tuple(imagenet_resnet.ImageNetResNet18.blocks_per_stage)),
  "imagenet_resnet34": ("basic", tuple(imagenet_resnet.ImageNetResNet34.blocks_per_stage)),
  "resnet50": ("bottleneck", tuple(imagenet_resnet.ResNet50.blocks_per_stage)),
}


def read_safetensors(path: str) -> dict[str, np.ndarray]:
  """The tensors of a .safetensors file as NumPy arrays (name -> array, copies), read without PyTorch.

  Raises:
    errors.InputError (a ValueError): naming `path` when it is truncated (its header describes more bytes than it
      holds), its header is not a safetensors header, a dtype is not one of the format's, or a tensor's byte range does
      not fit its shape.
  """
  with open(path, "rb") as f:
    raw = f.read()
  if len(raw) < 8:
    raise errors.InputError(
      f"{path} is not a safetensors file: {len(raw)} bytes, shorter than the 8-byte header length."
    )
  header_length = int.from_bytes(raw[:8], "little")
  if header_length > len(raw) - 8:
    truncated = header_length < _MAX_HEADER_BYTES and raw[8:9] == b"{"
    raise errors.InputError(
      f"{path} is truncated: its header alone is {header_length + 8:,} bytes and the file has {len(raw):,}. "
      f"{_COPY_AGAIN}"
      if truncated
      else f"{path} is not a safetensors file: its header length {header_length} exceeds the file."
    )
  try:
    header = json.loads(raw[8 : 8 + header_length].decode("utf-8"))
  except (UnicodeDecodeError, json.JSONDecodeError) as error:
    raise errors.InputError(f"{path} is not a safetensors file: its header is not JSON ({error}).") from None
  if not isinstance(header, dict):
    raise errors.InputError(f"{path} is not a safetensors file: its header is not a JSON object.")
  data = memoryview(raw)[8 + header_length :]
  ends = [_end_offset(entry) for name, entry in header.items() if name != "__metadata__"]
  if ends and max(ends) > len(data):
    raise errors.InputError(
      f"{path} is truncated: its header describes {8 + header_length + max(ends):,} bytes and the file has "
      f"{len(raw):,}. {_COPY_AGAIN}"
    )
  tensors = {}
  for name, entry in header.items():
    if name == "__metadata__":
      continue
    dtype = _SAFETENSORS_DTYPES.get(entry.get("dtype") if isinstance(entry, dict) else None)
    if dtype is None:
      raise errors.InputError(
        f"{path}: tensor {name!r} has dtype {entry.get('dtype') if isinstance(entry, dict) else entry!r}; "
        f"readable: {', '.join(_SAFETENSORS_DTYPES)}."
      )
    shape = tuple(int(d) for d in entry["shape"])
    begin, end = (int(o) for o in entry["data_offsets"])
    if not 0 <= begin <= end <= len(data) or end - begin != int(np.prod(shape)) * dtype.itemsize:
      raise errors.InputError(f"{path}: tensor {name!r} of shape {shape} ({dtype}) has byte range [{begin}, {end}).")
    tensors[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(shape).copy()
  return tensors


def _end_offset(entry) -> int:
  """The end of a safetensors header entry's byte range (0 when the entry has none: reported later)."""
  try:
    return int(entry["data_offsets"][1])
  except (KeyError, IndexError, TypeError, ValueError):
    return 0


def _torch_load_error(path: str, error: Exception) -> errors.InputError:
  """What a failed torch.load(weights_only=True) of `path` means for the user: a whole pickled model, a truncated
  file, or another file."""
  text = str(error)
  pickled = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
  if pickled:
    return errors.InputError(
      f"{path} holds pickled Python objects (the first: {pickled[1]}), not only tensors; noisy_jax does not "
      "unpickle them (torch.load(weights_only=True): unpickling runs code). A whole model saved with "
      f"torch.save(model)? Save its weights instead: torch.save(model.state_dict(), {path!r})."
    )
  if "central directory" in text:
    return errors.InputError(
      f"{path} is truncated or not a PyTorch file (torch.load: {text.split('.')[0]}). {_COPY_AGAIN}"
    )
  return errors.InputError(f"{path} is not a PyTorch state_dict file torch.load can read: {text}")


def read_torch(path: str) -> dict[str, np.ndarray]:
  """The tensors of a PyTorch state_dict file (torch.load with weights_only=True) as NumPy arrays.

  Raises:
    ImportError: when PyTorch is not installed (saying to convert the file to .safetensors).
    errors.InputError (a ValueError): naming `path` when torch cannot read it (a whole pickled model: saying to save
      its state_dict; a truncated file) or it holds no dict of tensors.
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
    raise _torch_load_error(path, error) from None
  for key in ("state_dict", "model"):
    if isinstance(loaded, dict) and isinstance(loaded.get(key), dict):
      loaded = loaded[key]
  if not isinstance(loaded, dict) or not loaded:
    raise errors.InputError(f"{path} holds a {type(loaded).__name__}, not a state_dict (a dict of parameter tensors).")
  tensors = {}
  for name, value in loaded.items():
    if not isinstance(value, torch.Tensor):
      raise errors.InputError(f"{path}: entry {name!r} is a {type(value).__name__}, not a tensor.")
    value = value.detach().cpu()
    tensors[name] = (value.float() if value.dtype == torch.bfloat16 else value).numpy().copy()
  return tensors


def read_state_dict(path: str) -> dict[str, np.ndarray]:
  """The named tensors of a PyTorch weight file, `.safetensors` or `.pth` / `.pt` / `.bin` (see the module
  docstring), with a leading 'module.' dropped.

  Raises:
    errors.MissingInputError (a FileNotFoundError): naming `path` when it does not exist.
    errors.InputError (a ValueError): for another suffix (listing the readable ones) or a file that is not what its
      suffix says.
  """
  if not os.path.isfile(path):
    raise errors.MissingInputError(f"pretrained weights {path!r}: no such file.")
  if path.endswith(SAFETENSORS_SUFFIX):
    tensors = read_safetensors(path)
  elif path.endswith(TORCH_SUFFIXES):
    tensors = read_torch(path)
  else:
    raise errors.InputError(
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
  noisy_jax run's variables). model, num_classes, input_shape: for a noisy_jax export, the network it holds (its
  model config {'name', 'kwargs'}, classes and one example's shape); None otherwise.
  """

  source: str
  arrays: Mapping[str, np.ndarray]
  layout: str = "torch"
  model: Mapping[str, Any] | None = None
  num_classes: int | None = None
  input_shape: tuple[int, ...] | None = None


def resnet_layout(arrays: Mapping[str, np.ndarray]) -> tuple[str, tuple[int, ...]] | None:
  """('basic' | 'bottleneck', blocks per stage) of a torchvision ResNet state_dict, read from its names
  (layer{s}.{b}.conv{k}.weight, conv3 in a Bottleneck only), or None when they are not a ResNet's."""
  blocks, convs = {}, set()
  for name in arrays:
    match = re.fullmatch(r"layer(\d+)\.(\d+)\.conv(\d+)\.weight", name)
    if match:
      stage = int(match[1])
      blocks[stage] = max(blocks.get(stage, 0), int(match[2]) + 1)
      convs.add(int(match[3]))
  if sorted(blocks) != [1, 2, 3, 4] or "conv1.weight" not in arrays:
    return None
  return ("bottleneck" if 3 in convs else "basic"), tuple(blocks[s] for s in range(1, 5))


def describe(weights: StoredWeights) -> str:
  """What `weights` hold, for messages: 'a ResNet-18 (basic blocks (2, 2, 2, 2))', 'no torchvision ResNet (...)',
  or the network of a noisy_jax export."""
  if weights.layout == "flax":
    if weights.model is None:
      return "a noisy_jax network"
    return (
      f"a noisy_jax {weights.model['name']!r} network for inputs {tuple(weights.input_shape)} and "
      f"{weights.num_classes} classes"
    )
  layout = resnet_layout(weights.arrays)
  if layout is None:
    return "no torchvision ResNet (no conv1 and layer1..layer4 convolutions among its names)"
  block, blocks = layout
  depth = (3 if block == "bottleneck" else 2) * sum(blocks) + 2
  return f"a ResNet-{depth} ({block} blocks {blocks})"


def matching_model(weights: StoredWeights) -> tuple[str, dict] | None:
  """(model name, kwargs) of the ImageNet ResNet (RESNETS) laid out as the torchvision ResNet that `weights` hold:
  the one with the same block, with kwargs blocks_per_stage when the file's differ from its own; None when the file
  holds no ResNet. Only names are compared: a wide or grouped ResNet matches a layout whose shapes it does not have
  (`check_fits` tells)."""
  layout = resnet_layout(weights.arrays) if weights.layout == "torch" else None
  if layout is None:
    return None
  block, blocks = layout
  names = [name for name, (kind, _) in RESNETS.items() if kind == block]
  exact = [name for name in names if RESNETS[name][1] == blocks]
  return (exact[0], {}) if exact else (names[0], {"blocks_per_stage": blocks})


def variable_shapes(model, input_shape) -> Any:
  """The variables ({'params', 'batch_stats'}) that `model` initialises for one example of `input_shape`, as
  jax.ShapeDtypeStruct leaves (jax.eval_shape: nothing is computed): the template `check_fits` takes."""
  example = jax.ShapeDtypeStruct((1, *input_shape), jnp.float32)
  key = jax.ShapeDtypeStruct((2,), jnp.uint32)  # a raw PRNG key, as jax.random.PRNGKey makes
  return jax.eval_shape(lambda k, x: model.init(k, x, train=False), key, example)


def _is_head(path: tuple[str, ...]) -> bool:
  return len(path) == 3 and path[1] == HEAD


def _stored_name(path: tuple[str, ...], weights: StoredWeights) -> tuple[str, bool]:
  """(name in `weights`, is a kernel to transpose) of a network's variable path."""
  if weights.layout == "flax":
    return "/".join(path), False
  try:
    return torch_name(path)
  except ValueError:
    raise errors.InputError(
      f"pretrained weights {weights.source}: a PyTorch state_dict fits an ImageNet ResNet only ({', '.join(RESNETS)} "
      f"in noisy_jax.models), and the network's variable {'/'.join(path)} is not one of an ImageNet ResNet's."
    ) from None


def _matched(flat: dict, weights: StoredWeights) -> tuple[dict, bool]:
  """({variable path: (stored name, value in the network's layout)} for every leaf of `flat` (a network's flattened
  variables, arrays or ShapeDtypeStructs), whether the stored head has the network's shape); raises as fit_into."""
  if weights.layout not in ("torch", "flax"):
    raise ValueError(f"StoredWeights.layout={weights.layout!r}; allowed: 'torch', 'flax'.")
  stored = {name: value for name, value in weights.arrays.items() if not name.endswith("num_batches_tracked")}
  values = {}
  for path in flat:
    name, transpose = _stored_name(path, weights)
    if name not in stored:
      raise errors.InputError(
        f"pretrained weights {weights.source}: the network's {'/'.join(path)} ({name}) is not in the file; are "
        "they the weights of another architecture?"
      )
    values[path] = (name, _as_flax(np.asarray(stored[name]), transpose))
  unused = sorted(set(stored) - {name for name, _ in values.values()})
  if unused:
    shown = ", ".join(unused[:5]) + (f" and {len(unused) - 5} more" if len(unused) > 5 else "")
    raise errors.InputError(
      f"pretrained weights {weights.source}: {len(unused)} stored variables the network does not have: {shown}; "
      "are they the weights of a deeper network or of another architecture?"
    )
  head_fits = all(values[path][1].shape == tuple(leaf.shape) for path, leaf in flat.items() if _is_head(path))
  for path, leaf in flat.items():
    name, value = values[path]
    if value.shape != tuple(leaf.shape) and not (_is_head(path) and not head_fits):
      raise errors.InputError(
        f"pretrained weights {weights.source}: {name} has shape {value.shape} (in the network's layout), the "
        f"network's {'/'.join(path)} {tuple(leaf.shape)}."
      )
  return values, head_fits


def _report(flat: dict, values: dict, head_fits: bool, weights: StoredWeights) -> dict:
  heads = [values[path][1] for path in flat if _is_head(path)]
  return {
    "source": weights.source,
    "loaded": sum(1 for path in flat if head_fits or not _is_head(path)),
    "head": "loaded" if head_fits else "initialised",
    "stored_classes": int(heads[0].shape[-1]) if heads else None,
  }


def check_fits(template, weights: StoredWeights) -> dict:
  """Checks that `weights` fill every variable of `template` (a network's variables, or only their shapes:
  `variable_shapes`) as `fit_into` would, computing nothing; returns fit_into's report.

  Raises:
    errors.InputError (a ValueError): as fit_into.
  """
  flat = flax.traverse_util.flatten_dict(flax.core.unfreeze(template))
  values, head_fits = _matched(flat, weights)
  return _report(flat, values, head_fits, weights)


def fit_into(template, weights: StoredWeights) -> tuple[Any, dict]:
  """The variables of `template` (a network's fresh {'params', 'batch_stats'}) with every leaf taken from
  `weights`, except the classifier head when its stored shape differs from the network's (then the head keeps its
  fresh initialisation: a 1,000-class ImageNet head on a data set of C classes). Returns (variables, report) with
  report = {'source', 'loaded': number of leaves taken, 'head': 'loaded' | 'initialised', 'stored_classes'}.
  Traceable in `template` (the stored values enter as constants), so it can run inside jit or vmap.

  Raises:
    errors.InputError (a ValueError): naming `weights.source` and the first variable of the network that the file
      lacks or has in another shape (both shapes), the stored variables the network does not have, or, for a
      PyTorch file, a network that is not an ImageNet ResNet.
  """
  flat = flax.traverse_util.flatten_dict(flax.core.unfreeze(template))
  values, head_fits = _matched(flat, weights)
  out = {}
  for path, leaf in flat.items():
    if _is_head(path) and not head_fits:
      out[path] = leaf
    else:
      out[path] = jnp.asarray(values[path][1], dtype=leaf.dtype)
  return flax.traverse_util.unflatten_dict(out), _report(flat, values, head_fits, weights)
