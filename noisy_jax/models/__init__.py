"""Flax Linen models: a name -> a module class.

Every model is called as `model.apply(variables, x, train=bool, mutable=["batch_stats"])` (mutable only in train
mode) on inputs [B, H, W, C] (the MLP also takes [B, D]) and returns float32 logits [B, num_classes]. Every model
has `bn_axis_name` (the device axis over which BatchNorm averages batch statistics in a per-device train step)
and `dtype` (the compute dtype; parameters stay float32).
"""

from __future__ import annotations

import flax.linen as nn

from noisy_jax import _checks
from noisy_jax.models.apl_cnn import APLCNN, APLCNNMnist
from noisy_jax.models.mlp import MLP
from noisy_jax.models.preact_resnet import PreActResNet, PreActResNet32, PreActResNetJO
from noisy_jax.models.resnet import ResNet, ResNet18, ResNet34
from noisy_jax.models.small_cnn import SmallCNN

MODELS: dict[str, type[nn.Module]] = {
    "mlp": MLP, "small_cnn": SmallCNN, "preact_resnet32": PreActResNet32, "preact_resnet_jo": PreActResNetJO,
    "resnet18": ResNet18, "resnet34": ResNet34, "apl_cnn": APLCNN, "apl_cnn_mnist": APLCNNMnist}


def get(name: str, *, num_classes: int, **kwargs) -> nn.Module:
  """Builds the model registered as `name` in MODELS with `num_classes` outputs; kwargs set its other fields.

  Raises:
    ValueError: for an unknown name (listing the known ones) or num_classes < 1.
  """
  _checks.check_choice("model", name, MODELS)
  if int(num_classes) != num_classes or num_classes < 1:
    raise ValueError(f"num_classes={num_classes!r} must be an integer >= 1.")
  return MODELS[name](num_classes=int(num_classes), **kwargs)


__all__ = ["APLCNN", "APLCNNMnist", "MLP", "MODELS", "PreActResNet", "PreActResNet32", "PreActResNetJO", "ResNet",
           "ResNet18", "ResNet34", "SmallCNN", "get"]
