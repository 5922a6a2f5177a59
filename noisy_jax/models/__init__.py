"""Flax Linen models: a name -> a module class.

Every model is called as `model.apply(variables, x, train=bool, mutable=["batch_stats"])` (mutable only in train
mode) on inputs [B, H, W, C] (the MLP also takes [B, D]) and returns float32 logits [B, num_classes]. Every model
has `bn_axis_name` (the device axis over which BatchNorm averages batch statistics in a per-device train step)
and `dtype` (the compute dtype; parameters stay float32). With JAX's x64 mode on, `get` builds models that compute
in float64 and return float64 logits (noisy_jax.core.precision; the run widens the parameters).

The name 'auto' picks a model from the input shape (`resolve`): configs for data of unknown size (own_data.py).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from absl import logging
import flax.linen as nn

from noisy_jax.core import _checks
from noisy_jax.core import precision
from noisy_jax.models.apl_cnn import APLCNN
from noisy_jax.models.apl_cnn import APLCNNMnist
from noisy_jax.models.coteaching_cnn import CoteachingCNN
from noisy_jax.models.imagenet_resnet import ImageNetResNet
from noisy_jax.models.imagenet_resnet import ImageNetResNet18
from noisy_jax.models.imagenet_resnet import ImageNetResNet34
from noisy_jax.models.imagenet_resnet import ResNet50
from noisy_jax.models.mlp import MLP
from noisy_jax.models.preact_resnet import PreActResNet
from noisy_jax.models.preact_resnet import PreActResNet32
from noisy_jax.models.preact_resnet import PreActResNetJO
from noisy_jax.models.pseudo_head import WithPseudoHead
from noisy_jax.models.resnet import ResNet
from noisy_jax.models.resnet import ResNet18
from noisy_jax.models.resnet import ResNet34
from noisy_jax.models.small_cnn import SmallCNN
from noisy_jax.models.vit import MODELS as VIT_MODELS
from noisy_jax.models.vit import VisionTransformer
from noisy_jax.parallel.mesh import AXIS  # pylint: disable=g-importing-member

MODELS: dict[str, type[nn.Module]] = {
  "mlp": MLP,
  "small_cnn": SmallCNN,
  "preact_resnet32": PreActResNet32,
  "preact_resnet_jo": PreActResNetJO,
  "resnet18": ResNet18,
  "resnet34": ResNet34,
  "apl_cnn": APLCNN,
  "apl_cnn_mnist": APLCNNMnist,
  "resnet50": ResNet50,  # ImageNet style (torchvision's resnet50); resnet18 / resnet34 are CIFAR style
  "imagenet_resnet18": ImageNetResNet18,  # torchvision's resnet18
  "imagenet_resnet34": ImageNetResNet34,  # torchvision's resnet34
  "coteaching_cnn": CoteachingCNN,
  **VIT_MODELS,  # DINOv2 / CLIP ViT backbones (noisy_jax.models.vit; weights: noisy_jax.models.vit_weights)
}


AUTO = "auto"
# 'auto': images whose smaller side is at least this get the pre-activation ResNet-32, smaller ones the SmallCNN.
RESNET_MIN_SIZE = 32


def resolve(name: str, input_shape) -> str:
  """The model name to build for inputs of shape `input_shape` (one example, no batch axis): `name` itself unless
  it is 'auto', which picks by the inputs (the same rule in `build`):

    [D] feature vectors                       -> 'mlp'
    [H, W, C] with min(H, W) < 32             -> 'small_cnn' (built for 28x28: mnist5k, 97-98% clean test accuracy)
    [H, W, C] with min(H, W) >= 32            -> 'preact_resnet32'

  Why ResNet-32 and not ResNet-18 from 32px up: the pre-activation ResNet of the CIFAR literature (0.47M parameters,
  the Joint Optimization paper's family) is global-average-pooled, so it takes any size >= 32, and its train step
  (batch 128, 2-core CPU) takes ~0.3 s against ~1.6 s for the 11.2M-parameter ResNet-18
  (experiments/benchmarks/README.md); pick resnet18 by name (--config.model.name=resnet18) for larger data.

  Raises:
    ValueError: naming `input_shape` when 'auto' cannot read it (neither [D] nor [H, W, C]).
  """
  if name != AUTO:
    return name
  shape = tuple(int(d) for d in input_shape)
  if len(shape) == 1:
    return "mlp"
  if len(shape) != 3:
    raise ValueError(
      f"model 'auto' picks a model for inputs [D] or [H, W, C]; got input shape {shape}. Name a "
      f"model instead (--config.model.name=...), one of {', '.join(MODELS)}."
    )
  return "small_cnn" if min(shape[:2]) < RESNET_MIN_SIZE else "preact_resnet32"


def check_name(name: str) -> None:
  """Raises errors.InputError (a ValueError) listing the models unless `name` is 'auto' or one of MODELS: a config's
  model name, checked before its data are read."""
  if name != AUTO:
    _checks.check_choice("model", name, MODELS)


def get(name: str, *, num_classes: int, **kwargs) -> nn.Module:
  """Builds the model registered as `name` in MODELS with `num_classes` outputs; kwargs set its other fields
  (`dtype` defaults to precision.float_dtype(): float32, or float64 with x64 on).

  Raises:
    ValueError: for an unknown name (listing the known ones) or num_classes < 1.
  """
  if name == AUTO:
    raise ValueError("model 'auto' is picked from the input shape: pass models.resolve(name, input_shape) to get.")
  _checks.check_choice("model", name, MODELS)
  if int(num_classes) != num_classes or num_classes < 1:
    raise ValueError(f"num_classes={num_classes!r} must be an integer >= 1.")
  kwargs.setdefault("dtype", precision.float_dtype())
  return MODELS[name](num_classes=int(num_classes), **kwargs)


__all__ = [
  "AUTO",
  "APLCNN",
  "APLCNNMnist",
  "CoteachingCNN",
  "ImageNetResNet",
  "ImageNetResNet18",
  "ImageNetResNet34",
  "MLP",
  "MODELS",
  "PreActResNet",
  "PreActResNet32",
  "PreActResNetJO",
  "ResNet",
  "ResNet18",
  "ResNet34",
  "ResNet50",
  "SmallCNN",
  "WithPseudoHead",
  "check_name",
  "classifier_name",
  "get",
  "layer_index",
  "resolve",
]


def classifier_name(model: nn.Module) -> str | None:
  """The name of `model`'s classifier, its last Dense layer (a top-level key of its params), or None for a model not
  listed here:

    ImageNetResNet (resnet50, imagenet_resnet18/34), ResNet, PreActResNet   'head'
    VisionTransformer (vit_*)                                               'head'
    APLCNN                                                                  'fc2'
    CoteachingCNN                                                           'fc'
    SmallCNN                                                                'Dense_1' with a hidden Dense layer
                                                                            (dense_size > 0), else 'Dense_0'
    MLP                                                                     'Dense_{len(hidden_sizes)}'

  (SmallCNN's and MLP's layers keep Flax's automatic names, so that their checkpoints stay readable.) What
  `optimizer.backbone_lr_scale` leaves at the full learning rate (noisy_jax.train.optim).
  """
  if isinstance(model, (ImageNetResNet, ResNet, PreActResNet, VisionTransformer)):
    return "head"
  if isinstance(model, APLCNN):
    return "fc2"
  if isinstance(model, CoteachingCNN):
    return "fc"
  if isinstance(model, SmallCNN):
    return "Dense_1" if model.dense_size else "Dense_0"
  if isinstance(model, MLP):
    return f"Dense_{len(model.hidden_sizes)}"
  return None


def build(
  name: str,
  num_classes: int,
  input_shape=None,
  *,
  kwargs: Mapping[str, Any] | None = None,
  bn_axis_name: str | None = AXIS,
) -> nn.Module:
  """The network `name` (a run's model.name) with `kwargs` (its model.kwargs; None: none) for `num_classes`
  classes: `get`, with BatchNorm's statistics averaged over `bn_axis_name` (the mesh axis `batch`; None outside a
  device mapping, as a sweep's vmapped step). Name 'auto' is picked from `input_shape` (one example's shape) by
  `resolve`. With `kwargs['pseudo_head']` True, the network carries ProMix's second head (WithPseudoHead around
  `get`'s model with 2 num_classes outputs).
  """
  resolved = resolve(name, input_shape) if input_shape is not None else name
  if resolved != name:
    logging.info("model %r: %s for inputs of shape %s", name, resolved, tuple(input_shape))
  kwargs = dict(kwargs or {})
  if not kwargs.pop("pseudo_head", False):
    return get(resolved, num_classes=num_classes, bn_axis_name=bn_axis_name, **kwargs)
  base = get(resolved, num_classes=2 * int(num_classes), bn_axis_name=bn_axis_name, **kwargs)
  return WithPseudoHead(base=base, num_classes=int(num_classes))


# A ViT's top-level modules before its first block (layer 0 of the layer-wise learning-rate decay).
_VIT_EMBEDDINGS = ("patch_embed", "cls_token", "registers", "pos_embed", "ln_pre")


def layer_index(model: nn.Module) -> Callable[[str], tuple[int, int]] | None:
  """For `optimizer.layer_decay` (noisy_jax.train.optim): a function from a top-level module's name in `model`'s
  params to (its layer l, the top layer L), or None for a model without numbered layers (every model but the ViTs).

  VisionTransformer (vit_*) with depth B: patch_embed, cls_token, registers, pos_embed, ln_pre -> 0; blocks_i -> i + 1;
  norm, proj, head -> B + 1 = L (BEiT's and MAE's numbering, `param_groups_lrd`).
  """
  if not isinstance(model, VisionTransformer):
    return None
  top = model.depth + 1

  def index(name: str) -> tuple[int, int]:
    if name in _VIT_EMBEDDINGS:
      return 0, top
    if name.startswith("blocks_"):
      return int(name.split("_")[1]) + 1, top
    return top, top

  return index
