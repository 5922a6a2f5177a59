"""`config.model.pretrained`: where a run's networks start.

  'none' (every config's default)   the model's own random initialisation
  'required' (REQUIRED)             a recipe that fine-tunes (clothing1m_paper.py): the run stops, saying how to go on
  FILE.pth / .pt / .bin / .safetensors
                                    a torchvision or timm ResNet-18/34/50 state_dict (noisy_jax.models.pretrained maps
                                    the names onto `imagenet_resnet18`, `imagenet_resnet34`, `resnet50`), or a DINOv2 /
                                    CLIP image tower for a `vit_*` model (noisy_jax.models.vit_weights: timm, dinov2,
                                    HF or open_clip layouts; model.kwargs.image_size = the file's trained grid x patch)
  DIR                               a noisy_jax run's workdir (its WORKDIR/model/final) or an export directory
                                    (noisy_jax.experiment.export): the variables of one network of the same model

Every network of the run starts from these weights (both networks of a two-network method, and Joint
Optimization's stage 2 as well as its stage 1), except the classifier head when the stored one has another number of
classes: it keeps the network's random initialisation, drawn from the network's own key as without weights.

The weights are read and checked against the run's network before the data are read and before anything is
written (`check`: the network built for the file's own input channels and classes, `jax.eval_shape`, nothing
computed), and again once the data have given the run's inputs and classes (`check` with the dataset). A
file that does not fit stops the run with a message that names it, says what it holds and which config.model.name
fits it (errors.InputError).

torchvision's ImageNet weights expect inputs normalised with ImageNet's channel statistics
(`config.normalization='imagenet'`, noisy_jax.data.normalization); a run that loads a PyTorch file with another
normalisation logs a warning. The run's normalisation is written into its export's model.json as always, so
`export.load_model` and `experiments.predict` prepare inputs as the fine-tuned network saw them.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from absl import logging
import flax.traverse_util
import numpy as np

from noisy_jax import models
from noisy_jax.core import errors
from noisy_jax.experiment import export as export_lib
from noisy_jax.models import pretrained as pretrained_lib

NONE = "none"
# config.model.pretrained of a config whose recipe fine-tunes pretrained weights (clothing1m_paper.py): a run stops
# (`check_given`) until a path or 'none' replaces it.
REQUIRED = "required"
EXPECTED_NORMALIZATION = "imagenet"  # what torchvision's and timm's ImageNet ResNets were trained with
# The network that `check` builds for a PyTorch file before the data are read: inputs of this side (an ImageNet
# ResNet's variables do not depend on it) with the file's stem channels, and the file's classes (else these).
NOMINAL_SIZE = 64
NOMINAL_CLASSES = 1000


def check_given(config) -> None:
  """Stops a run whose config.model.pretrained is still REQUIRED (a config that fine-tunes, as the recipe
  it reproduces does), saying why and how to go on. 'none', a path or an absent field pass.

  Raises:
    errors.InputError (a ValueError): when config.model.pretrained is REQUIRED.
  """
  if config.model.get("pretrained", NONE) != REQUIRED:
    return
  raise errors.InputError(
    f"config.model.pretrained={REQUIRED!r}: this config fine-tunes pretrained weights, as the recipe it "
    "reproduces does (clothing1m_paper.py: DivideMix and ELR+ fine-tune torchvision's ImageNet ResNet-50, "
    "`resnet50(pretrained=True)`, i.e. ResNet50_Weights.IMAGENET1K_V1, the file resnet50-0676ba61.pth), and no "
    "weights are shipped or downloaded. Pass --config.model.pretrained=PATH (a torchvision or timm .pth / "
    ".safetensors state_dict, or a noisy_jax run's workdir), or --config.model.pretrained=none to train from random "
    "initialisation on purpose (its accuracies are then not comparable with the papers')."
  )


def path_of(model_config) -> str | None:
  """config.model.pretrained, or None for 'none' / '' / an absent field."""
  path = model_config.get("pretrained", NONE) if hasattr(model_config, "get") else NONE
  return None if path in (None, "", NONE) else str(path)


def read(path: str) -> pretrained_lib.StoredWeights:
  """The weights at `path` (a PyTorch file, a noisy_jax workdir or export directory), on the host.

  Raises:
    errors.MissingInputError (a FileNotFoundError): naming `path` when it does not exist, or a directory without an
      exported model.
    errors.InputError (a ValueError): a file of an unknown type or content (a truncated file, a whole pickled model),
      or the export of a two-network method (a pair of networks).
  """
  if not os.path.isdir(path):
    return pretrained_lib.StoredWeights(path, pretrained_lib.read_state_dict(path), "torch")
  try:
    loaded = export_lib.load_model(path, "final")
  except FileNotFoundError as error:
    raise errors.MissingInputError(f"pretrained weights {path!r}: {error}") from None
  networks = int(loaded.info["variables"].get("num_networks", 1))
  if networks != 1:
    raise errors.InputError(
      f"pretrained weights {loaded.path}: the export of a two-network method holds {networks} networks; start from "
      "a one-network run's export."
    )
  flat = flax.traverse_util.flatten_dict({k: v for k, v in loaded.variables.items() if v})
  return pretrained_lib.StoredWeights(
    loaded.path,
    {"/".join(p): np.asarray(v) for p, v in flat.items()},
    "flax",
    model=loaded.info["model"],
    num_classes=loaded.num_classes,
    input_shape=loaded.input_shape,
  )


def nominal_shapes(weights: pretrained_lib.StoredWeights) -> tuple[tuple[int, ...], int]:
  """(one example's shape, classes) of the network that `check` builds before the data are read: an export's own;
  for a PyTorch file NOMINAL_SIZE x NOMINAL_SIZE images with its stem's input channels and its head's classes."""
  if weights.layout == "flax" and weights.input_shape is not None:
    return tuple(weights.input_shape), int(weights.num_classes)
  stem, head = weights.arrays.get("conv1.weight"), weights.arrays.get("fc.weight")
  channels = int(stem.shape[1]) if stem is not None and stem.ndim == 4 else 3
  classes = int(head.shape[0]) if head is not None and head.ndim == 2 else NOMINAL_CLASSES
  return (NOMINAL_SIZE, NOMINAL_SIZE, channels), classes


def _what_it_builds(model_config, model) -> str:
  if model_config.name == models.AUTO:
    return (
      f"config.model.name={models.AUTO!r} picks a small CNN or a pre-activation ResNet-32 by the images' size, not an "
      "ImageNet ResNet"
    )
  return f"config.model.name={model_config.name!r} builds {type(model).__name__}, not an ImageNet ResNet"


def _fits(weights: pretrained_lib.StoredWeights, name: str, kwargs: dict) -> bool:
  """Whether `weights` fill the model `name` (with `kwargs`) built for their own inputs and classes."""
  input_shape, classes = nominal_shapes(weights)
  template = pretrained_lib.variable_shapes(models.get(name, num_classes=classes, **kwargs), input_shape)
  try:
    pretrained_lib.check_fits(template, weights)
  except errors.InputError:
    return False
  return True


def _hint(weights: pretrained_lib.StoredWeights, model_config) -> str:
  """' The file holds WHAT, which --config.model.name=NAME builds.' (or what it holds, when no model here fits it)."""
  what = pretrained_lib.describe(weights)
  match = pretrained_lib.matching_model(weights)
  if match is None:
    return f" The {'file' if weights.layout == 'torch' else 'directory'} holds {what}."
  name, kwargs = match
  if not _fits(weights, name, kwargs):
    return f" The file holds {what}, whose shapes no model here has (a wide or grouped variant?)."
  default = pretrained_lib.RESNETS[name][1]
  given = tuple((model_config.get("kwargs", None) or {}).get("blocks_per_stage", default))
  if name == model_config.name and kwargs.get("blocks_per_stage", default) == given:
    return f" The file holds {what}."  # the right model: what differs is in the message (channels, ...)
  flag = f"--config.model.name={name}"
  if kwargs:
    flag += f" --config.model.kwargs=\"{{'blocks_per_stage': {kwargs['blocks_per_stage']}}}\""
  return f" The file holds {what}, which {flag} builds."


def check_fits(weights: pretrained_lib.StoredWeights, model_config, model, input_shape) -> None:
  """Checks that `weights` fill every variable of `model` (built from `model_config` for inputs of `input_shape`)
  as the run will fit them (pretrained_lib.check_fits on jax.eval_shape's shapes: nothing is computed).

  Raises:
    errors.InputError (a ValueError): naming the file, its first variable that does not fit, what the file holds and
      which config.model.name fits it.
  """
  if weights.layout == "torch" and isinstance(model, models.VisionTransformer):
    _check_vit(weights, model)
    return
  if weights.layout == "torch" and not isinstance(model, models.ImageNetResNet):
    raise errors.InputError(
      f"pretrained weights {weights.source}: a PyTorch state_dict fits an ImageNet ResNet only, and "
      f"{_what_it_builds(model_config, model)}.{_hint(weights, model_config)}"
    )
  try:
    pretrained_lib.check_fits(pretrained_lib.variable_shapes(model, input_shape), weights)
  except errors.InputError as error:
    raise errors.InputError(f"{error}{_hint(weights, model_config)}") from None


def _check_vit(weights: pretrained_lib.StoredWeights, model) -> None:
  """vit_weights.check_fits of the run's ViT, with what the file holds and the model kwargs its grid needs.

  Raises:
    errors.InputError: naming the file when it holds another backbone or does not fill the network.
  """
  from noisy_jax.models import vit_weights  # pylint: disable=g-import-not-at-top

  info = vit_weights.describe(weights)
  if info["image_size"] != model.image_size:
    raise errors.InputError(
      f"pretrained weights {weights.source}: their position grid was trained at {info['image_size']} px, the "
      f"network's at {model.image_size}: --config.model.kwargs.image_size={info['image_size']} builds it for them "
      "(the grid is resampled to the images' size at run time)."
    )
  vit_weights.check_fits(model, weights)


def check(
  config, dataset=None, weights: pretrained_lib.StoredWeights | None = None
) -> pretrained_lib.StoredWeights | None:
  """The weights of config.model.pretrained (`weights` when given: as a first call returned them; else read here),
  checked against the run's network before anything else (`check_given`, `read`, `check_fits`); None when the run
  starts from random weights. Without `dataset` (before the data are read) the network is built for the file's own
  inputs and classes (`nominal_shapes`): whatever the data, the file must fit it but for its head; with `dataset`,
  for the data's inputs and classes, as the run builds it. Nothing is computed (jax.eval_shape) and no device is
  started.

  Raises:
    errors.InputError, errors.MissingInputError: as check_given, read and check_fits.
  """
  check_given(config)
  path = path_of(config.model)
  if path is None:
    return None
  weights = read(path) if weights is None else weights
  if dataset is None:
    input_shape, classes = nominal_shapes(weights)
  else:
    input_shape, classes = tuple(dataset.x_train.shape[1:]), dataset.num_classes
  try:
    check_fits(weights, config.model, _network(config.model, classes, input_shape), input_shape)
  except errors.InputError as error:
    raise errors.InputError(f"{error}{_channels_hint(weights, config, input_shape)}") from None
  return weights


def _channels_hint(weights: pretrained_lib.StoredWeights, config, input_shape) -> str:
  """' The images have 1 channel, the file's network takes 3 (...).' when the data's channels and a PyTorch file's
  stem differ; '' otherwise."""
  stem = weights.arrays.get("conv1.weight") if weights.layout == "torch" else None
  if stem is None or stem.ndim != 4 or len(input_shape) != 3 or stem.shape[1] == input_shape[-1]:
    return ""
  rgb = stem.shape[1] == 3 and "channels" in (config.get("dataset_kwargs", None) or {})
  how = ": --config.dataset_kwargs.channels=3 reads them as RGB" if rgb else ""
  return f" The images have {input_shape[-1]} channel(s), the file's network takes {stem.shape[1]}{how}."


def _network(model_config, classes: int, input_shape) -> Any:
  """models.build of `model_config` for `classes` and inputs of `input_shape`, name 'auto' resolved quietly (its
  log line would report the shape that `check` assumes, not the data's)."""
  kwargs = model_config.get("kwargs") or {}
  kwargs = kwargs.to_dict() if hasattr(kwargs, "to_dict") else dict(kwargs)
  resolved = models.resolve(model_config.name, input_shape)
  return models.build(resolved, classes, input_shape, kwargs=kwargs, bn_axis_name=None)


def initializer(config, weights: pretrained_lib.StoredWeights | None = None) -> Callable[[Any], Any] | None:
  """`template -> variables` that puts `config.model.pretrained`'s weights into a network's fresh variables
  (noisy_jax.models.pretrained.fit_into), or None when the run starts from random weights. `weights`: as `check`
  returned them (else read here).

  Raises:
    errors.MissingInputError, errors.InputError: as `read`; the mismatches of fit_into when the returned function is
      called (`check` finds them first).
  """
  check_given(config)
  path = path_of(config.model)
  if path is None:
    return None
  weights = read(path) if weights is None else weights
  if weights.layout == "torch" and config.get("normalization", "per_channel") != EXPECTED_NORMALIZATION:
    logging.warning(
      "pretrained weights %s come from PyTorch, whose ImageNet networks expect normalization=%r; this run uses %r.",
      path,
      EXPECTED_NORMALIZATION,
      config.get("normalization", "per_channel"),
    )

  vit = weights.layout == "torch" and config.model.get("name", None) in models.VIT_MODELS

  def initialize(template):
    if vit:
      from noisy_jax.models import vit_weights  # pylint: disable=g-import-not-at-top

      variables, report = vit_weights.fill(template, weights)
      report["stored_classes"] = "-"
    else:
      variables, report = pretrained_lib.fit_into(template, weights)
    logging.info(
      "pretrained weights %s: %d variables loaded; head %s (stored classes: %s)",
      report["source"],
      report["loaded"],
      report["head"],
      report["stored_classes"],
    )
    return variables

  return initialize
