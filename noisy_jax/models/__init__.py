"""Flax Linen models. Every model: `__call__(x, *, train: bool) -> float32 logits [B, num_classes]`."""

from __future__ import annotations

import flax.linen as nn

from noisy_jax import _checks
from noisy_jax.models.mlp import MLP
from noisy_jax.models.small_cnn import SmallCNN

MODELS = {"mlp": MLP, "small_cnn": SmallCNN}


def get(name: str, *, num_classes: int, **kwargs) -> nn.Module:
  """Builds the model called `name` (a key of MODELS) with `num_classes` outputs."""
  _checks.check_choice("model", name, MODELS)
  return MODELS[name](num_classes=num_classes, **kwargs)
