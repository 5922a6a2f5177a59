"""`config.model.pretrained`: where a run's networks start.

  'none' (every config's default)   the model's own random initialisation
  'required' (REQUIRED)             a recipe that fine-tunes (clothing1m_paper.py): the run stops, saying how to go on
  FILE.pth / .pt / .bin / .safetensors
                                    a torchvision or timm ResNet-18/34/50 state_dict (noisy_jax.models.pretrained maps
                                    the names onto `imagenet_resnet18`, `imagenet_resnet34`, `resnet50`)
  DIR                               a noisy_jax run's workdir (its WORKDIR/model/final) or an export directory
                                    (noisy_jax.experiment.export): the variables of one network of the same model

Every network of the run starts from these weights (both networks of a two-network method, and Joint
Optimization's stage 2 as well as its stage 1), except the classifier head when the stored one has another number of
classes: it keeps the network's random initialisation, drawn from the network's own key as without weights.

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

from noisy_jax.experiment import export as export_lib
from noisy_jax.models import pretrained as pretrained_lib

NONE = "none"
# config.model.pretrained of a config whose recipe fine-tunes pretrained weights (clothing1m_paper.py): a run stops
# (`check_given`) until a path or 'none' replaces it.
REQUIRED = "required"
EXPECTED_NORMALIZATION = "imagenet"  # what torchvision's and timm's ImageNet ResNets were trained with


def check_given(config) -> None:
  """Stops a run whose config.model.pretrained is still REQUIRED (a config that fine-tunes, as the recipe
  it reproduces does), saying why and how to go on. 'none', a path or an absent field pass.

  Raises:
    ValueError: when config.model.pretrained is REQUIRED.
  """
  if config.model.get("pretrained", NONE) != REQUIRED:
    return
  raise ValueError(
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
    FileNotFoundError: naming `path` when it does not exist, or a directory without an exported model.
    ValueError: a file of an unknown type or content, or the export of a two-network method (a pair of networks).
  """
  if not os.path.isdir(path):
    return pretrained_lib.StoredWeights(path, pretrained_lib.read_state_dict(path), "torch")
  loaded = export_lib.load_model(path, "final")
  networks = int(loaded.info["variables"].get("num_networks", 1))
  if networks != 1:
    raise ValueError(
      f"pretrained weights {loaded.path}: the export of a two-network method holds {networks} networks; start from "
      "a one-network run's export."
    )
  flat = flax.traverse_util.flatten_dict({k: v for k, v in loaded.variables.items() if v})
  return pretrained_lib.StoredWeights(loaded.path, {"/".join(p): np.asarray(v) for p, v in flat.items()}, "flax")


def initializer(config) -> Callable[[Any], Any] | None:
  """`template -> variables` that puts `config.model.pretrained`'s weights into a network's fresh variables
  (noisy_jax.models.pretrained.fit_into; read once, here), or None when the run starts from random weights.

  Raises:
    FileNotFoundError, ValueError: as `read`; the mismatches of fit_into when the returned function is called.
  """
  check_given(config)
  path = path_of(config.model)
  if path is None:
    return None
  weights = read(path)
  if weights.layout == "torch" and config.get("normalization", "per_channel") != EXPECTED_NORMALIZATION:
    logging.warning(
      "pretrained weights %s come from PyTorch, whose ImageNet networks expect normalization=%r; this run uses %r.",
      path,
      EXPECTED_NORMALIZATION,
      config.get("normalization", "per_channel"),
    )

  def initialize(template):
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
