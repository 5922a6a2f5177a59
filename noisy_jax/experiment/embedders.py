"""The frozen backbones that embed images (`python -m experiments.embed`): a name, its weights, its preprocessing.

  embedder = embedders.build("imagenet_resnet18", "resnet18.pth")     # read and checked; nothing computed yet
  pixels = embedder.preprocessing.decode("DIR/cat/001.jpg")          # uint8 [S, S, 3], the backbone's own way
  z = embedder.features(batch)                                        # uint8 [B, S, S, 3] -> float32 [B, D] (jitted)

An Embedder is a frozen network and the preprocessing it was trained with:
  decode (on the host, in Grain's worker processes): the file read with pillow, converted to RGB, its shorter side
    resized to R with the backbone's interpolation, the centre S x S window cut (Preprocessing);
  features (on the devices, jitted): x = (codes / 255 - mean) / std in float32, then the network's embedding.

BACKBONES (name -> builder(weights_path, image_size) -> Embedder):
  imagenet_resnet18, imagenet_resnet34, resnet50
      a torchvision or timm ImageNet ResNet state_dict (.pth / .pt / .bin / .safetensors, read by
      noisy_jax.models.pretrained onto noisy_jax.models.imagenet_resnet), D = 512 / 512 / 2048: the global average
      pool of the last stage, i.e. the input of the classifier `fc` (torchvision's model with fc = Identity).
      Preprocessing: torchvision's ImageNet evaluation transform, Resize(256) (bilinear, on the PIL image) ->
      CenterCrop(224) -> ToTensor -> Normalize(mean 0.485, 0.456, 0.406; std 0.229, 0.224, 0.225), with its
      arithmetic: the longer side becomes int(256 * long / short), the crop offset round((side - 224) / 2).
  vit_{small,base,large}_patch14_dinov2, ..._reg4_dinov2, vit_{base_patch16,large_patch14}_clip[_openai]
      DINOv2 / CLIP image towers from their released weights in any layout noisy_jax.models.vit_weights reads (timm,
      facebookresearch/dinov2, HF Dinov2, OpenAI / open_clip, HF CLIP), D = the final-norm CLS token (DINOv2:
      384 / 768 / 1024) or CLIP's projected embedding (512 / 768). Preprocessing: the family's evaluation
      transform, bicubic: DINOv2 (dinov2/data/transforms.py) Resize(256) -> CenterCrop(224), ImageNet mean and std;
      CLIP (clip/clip.py) Resize(224) -> CenterCrop(224), mean 0.48145466, 0.4578275, 0.40821073, std 0.26862954,
      0.26130258, 0.27577711. The position embedding is resampled from the file's grid to the crop's as the
      weights' library does.
  run
      a noisy_jax run's workdir (its model/final) or an export directory (noisy_jax.experiment.export), D = the
      input width of its classifier head (export.LoadedModel.embed). Preprocessing: the run's own: its loader's
      decode (noisy_jax.data.images: shorter side resized to the run's image_size, bilinear, centre crop; gray
      repeated over 3 channels for an RGB network) and its normalisation from model.json.

image_size (--image_size) = S overrides the crop of a torchvision-style backbone and scales the resize with it
(R = round(S * R0 / S0): 56 -> resize 64, crop 56 for the ResNets); a run's network keeps its own input size.

Errors (errors.InputError, a ValueError; a missing file or directory errors.MissingInputError), all raised by
`build` before anything is written: an unknown backbone (listing BACKBONES), no --weights, a missing weights file, a
file of another network (naming the file, what it holds and which --backbone reads it: e.g. a ResNet-50 file given as
imagenet_resnet18), a truncated or unreadable file, an export that is not one network over images.

Adding a backbone is one entry in BACKBONES: `module_builder(name, "package.module", PREPROCESSING)` for a Flax
module whose loader `package.module.load(name, path, image_size=S) -> (module, variables)` gives features through
`module.apply(variables, x, method="features")` on normalised NHWC float32 images.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax import models
from noisy_jax.core import errors
from noisy_jax.data import image_files
from noisy_jax.data import images
from noisy_jax.data import normalization as normalization_lib
from noisy_jax.experiment import export
from noisy_jax.models import pretrained as pretrained_lib
from noisy_jax.models import vit
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.parallel import xla_options
from noisy_jax.train import predict as predict_lib

INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "lanczos")  # pillow's filters by name
STYLES = ("torchvision", "noisy_jax")  # whose resize / crop arithmetic `Preprocessing.decode` follows


@dataclasses.dataclass(frozen=True)
class Preprocessing:
  """How a file becomes a backbone's input: uint8 [height, width, channels] = `output_shape`.

  style 'torchvision': RGB; shorter side resized to `resize` (None: kept) with `interpolation`, longer side
    int(resize * long / short); centre crop `crop` x `crop` at offsets round((side - crop) / 2) (torchvision's
    Resize + CenterCrop on a PIL image). 'noisy_jax': a run's loader (image_files.ImageFiles.decode: shorter side
    resized to `resize` = `crop`, bilinear, offsets floor((side - crop) / 2); no resize: the file's own size, which
    must be output_shape's).
  mean, std: per channel of the [0, 1] pixels (x = (codes / 255 - mean) / std); None when the normalisation is not
  per channel (a run's 'mean_image': described by `normalization`).
  """

  output_shape: tuple[int, int, int]
  resize: int | None
  crop: int | None
  interpolation: str = "bilinear"
  mean: tuple[float, ...] | None = normalization_lib.IMAGENET_MEAN
  std: tuple[float, ...] | None = normalization_lib.IMAGENET_STD
  style: str = "torchvision"
  normalization: str = "imagenet"

  def __post_init__(self):
    if self.interpolation not in INTERPOLATIONS or self.style not in STYLES:
      raise ValueError(
        f"interpolation={self.interpolation!r}, style={self.style!r}; allowed {INTERPOLATIONS}, {STYLES}."
      )

  def decode(self, path: str) -> np.ndarray:
    """uint8 `output_shape` of the image file at `path`.

    Raises:
      errors.MissingInputError: naming a missing file. images.BadImageFile: naming a file pillow cannot decode.
      ValueError: a file that decodes but does not fit (another size without resize, colour for a gray network).
    """
    height, width, channels = self.output_shape
    if self.style == "noisy_jax":
      return image_files.ImageFiles((), height, width, channels, self.resize).decode(path)
    return self.prepare(images.decode_file(path), where=repr(path))

  def prepare(self, pixels: np.ndarray, where: str = "an image") -> np.ndarray:
    """uint8 `output_shape` of decoded pixels uint8 [H, W] or [H, W, C] (style 'torchvision'; gray repeated to RGB):
    what `decode` does after reading the file (`where` names it in errors)."""
    from PIL import Image  # pylint: disable=g-import-not-at-top

    if self.style != "torchvision":
      raise ValueError(f"Preprocessing.prepare: style {self.style!r} reads files only (decode).")
    height, width, _ = self.output_shape
    pixels = np.asarray(pixels, np.uint8)
    image = Image.fromarray(pixels[..., 0] if pixels.ndim == 3 and pixels.shape[-1] == 1 else pixels).convert("RGB")
    if self.resize is not None:
      w, h = image.size
      short, long = min(w, h), max(w, h)
      new_long = int(self.resize * long / short)
      size = (self.resize, new_long) if w <= h else (new_long, self.resize)
      image = image.resize(size, getattr(Image.Resampling, self.interpolation.upper()))
    w, h = image.size
    left, top = int(round((w - width) / 2.0)), int(round((h - height) / 2.0))
    if left < 0 or top < 0:
      raise errors.InputError(f"{where} is {w}x{h} after resizing, smaller than the crop {width}x{height}.")
    return np.asarray(image.crop((left, top, left + width, top + height)), np.uint8)

  def to_json(self) -> dict:
    return json_ready(dataclasses.asdict(self))


_BAD = (images.BadImageFile, FileNotFoundError)  # what decode_row reports instead of raising


@dataclasses.dataclass(frozen=True)
class ImageSource:
  """A Grain random-access source (noisy_jax.parallel.streaming): row i = `preprocessing.decode(paths[i])`. It pickles
  as its paths and preprocessing, so Grain's worker processes decode."""

  paths: tuple[str, ...]
  preprocessing: Preprocessing

  def __len__(self) -> int:
    return len(self.paths)

  def __getitem__(self, row) -> np.ndarray:
    return self.preprocessing.decode(self.paths[int(row)])

  def decode_row(self, row) -> tuple[np.ndarray, str | None]:
    """(pixels, None), or (zeros, the error message) for a file that cannot be decoded or disappeared; the caller
    decides (on_bad_file). Any other error (a file that decodes but does not fit) raises."""
    try:
      return self[row], None
    except _BAD as error:
      return np.zeros(self.preprocessing.output_shape, np.uint8), str(error)


@dataclasses.dataclass(frozen=True)
class ArraySource:
  """A Grain random-access source of images held in memory, uint8 [N, H, W, C]: row i =
  `preprocessing.prepare(pixels[i])` (a config's dataset, `python -m experiments.embed --config`)."""

  pixels: np.ndarray
  preprocessing: Preprocessing

  def __len__(self) -> int:
    return len(self.pixels)

  def __getitem__(self, row) -> np.ndarray:
    return self.preprocessing.prepare(self.pixels[int(row)], where=f"row {int(row)}")

  def decode_row(self, row) -> tuple[np.ndarray, str | None]:
    """(pixels, None): an array in memory always decodes."""
    return self[row], None


def json_ready(value):
  """Tuples as lists, recursively (a JSON round trip gives back what was written)."""
  if isinstance(value, (list, tuple)):
    return [json_ready(v) for v in value]
  if isinstance(value, dict):
    return {k: json_ready(v) for k, v in value.items()}
  return value


def torchvision_eval(resize: int, crop: int, *, interpolation: str = "bilinear", mean=None, std=None) -> Preprocessing:
  """torchvision's evaluation transform Resize(resize) -> CenterCrop(crop) -> Normalize(mean, std) (default
  ImageNet's statistics) as a Preprocessing of RGB images."""
  mean = normalization_lib.IMAGENET_MEAN if mean is None else tuple(mean)
  std = normalization_lib.IMAGENET_STD if std is None else tuple(std)
  return Preprocessing((crop, crop, 3), resize, crop, interpolation, mean, std, "torchvision", "per_channel")


IMAGENET_EVAL = dataclasses.replace(torchvision_eval(256, 224), normalization="imagenet")


def sized(preprocessing: Preprocessing, image_size: int | None) -> Preprocessing:
  """`preprocessing` with crop S = image_size and resize round(S * resize / crop) (None: unchanged)."""
  if image_size is None:
    return preprocessing
  size = images.check_image_size(image_size)
  resize = None if preprocessing.resize is None else max(size, round(size * preprocessing.resize / preprocessing.crop))
  return dataclasses.replace(
    preprocessing, output_shape=(size, size, preprocessing.output_shape[2]), resize=resize, crop=size
  )


def resized(preprocessing: Preprocessing, resize: int | None, interpolation: str | None) -> Preprocessing:
  """`preprocessing` with the shorter side resized to `resize` (>= its crop) with `interpolation` (INTERPOLATIONS)
  before the centre crop; None keeps the backbone's own. resize = crop stretches a square image whole onto the crop
  (torchvision's Resize((S, S)), as NI-ERM's code feeds CIFAR to DINOv2).

  Raises:
    errors.InputError: naming --resize or --interpolation for a run's own preprocessing (style 'noisy_jax'), a
      resize below the crop, or an unknown interpolation.
  """
  if resize is None and interpolation is None:
    return preprocessing
  if preprocessing.style != "torchvision":
    raise errors.InputError("--resize / --interpolation: --backbone=run embeds with its run's own preprocessing.")
  if resize is not None and not (isinstance(resize, int) and resize >= preprocessing.crop):
    raise errors.InputError(f"--resize={resize}; allowed: an integer >= the crop {preprocessing.crop}.")
  if interpolation is not None and interpolation not in INTERPOLATIONS:
    raise errors.InputError(f"--interpolation={interpolation!r}; allowed: {', '.join(INTERPOLATIONS)}.")
  return dataclasses.replace(
    preprocessing,
    resize=preprocessing.resize if resize is None else resize,
    interpolation=interpolation or preprocessing.interpolation,
  )


def per_channel_normalizer(preprocessing: Preprocessing) -> Callable:
  """codes uint8 [..., C] -> float32 (codes / 255 - mean) / std, computed as torchvision's ToTensor + Normalize."""
  mean = jnp.asarray(preprocessing.mean, jnp.float32)
  std = jnp.asarray(preprocessing.std, jnp.float32)
  return lambda codes: (codes.astype(jnp.float32) / jnp.float32(255.0) - mean) / std


@dataclasses.dataclass(frozen=True, eq=False)
class Embedder:
  """A frozen backbone: `apply(variables, uint8 [B, *preprocessing.output_shape]) -> float32 [B, dim]` jitted, the
  normalisation inside; `weights` the file or directory its variables came from."""

  name: str
  apply: Callable = dataclasses.field(repr=False)
  variables: Any = dataclasses.field(repr=False)
  preprocessing: Preprocessing
  dim: int
  weights: str

  def features(self, images_uint8) -> jax.Array:
    """float32 [B, dim] embeddings of uint8 images [B, H, W, C] (a NumPy batch, or a global array on a mesh)."""
    return self.apply(self.variables, images_uint8)

  def on(self, mesh) -> "Embedder":
    """This embedder with its variables replicated on every device of `mesh` (batches sharded over its axis)."""
    return dataclasses.replace(self, variables=mesh_lib.replicate(self.variables, mesh))


def embedder(name: str, weights: str, fn: Callable, variables, preprocessing: Preprocessing, *, options=None):
  """An Embedder whose features are fn(variables, normalised float32 images) of the per-channel normalisation of
  `preprocessing`, jitted (XLA `options` when given), D read with jax.eval_shape."""
  normalize = per_channel_normalizer(preprocessing)
  apply = jax.jit(
    lambda v, x: fn(v, normalize(x)).reshape(x.shape[0], -1).astype(jnp.float32), compiler_options=options
  )
  return _with_dim(name, weights, apply, variables, preprocessing)


def _with_dim(name, weights, apply, variables, preprocessing) -> Embedder:
  example = jax.ShapeDtypeStruct((1, *preprocessing.output_shape), jnp.uint8)
  dim = int(jax.eval_shape(apply, variables, example).shape[-1])
  return Embedder(name, apply, variables, preprocessing, dim, os.path.abspath(weights))


def _require_weights(name: str, path: str | None, what: str) -> str:
  if not path:
    raise errors.InputError(f"--backbone={name} needs --weights=PATH ({what}); no weights are shipped or downloaded.")
  if not os.path.exists(path):
    raise errors.MissingInputError(f"--weights={path!r} ({what} for --backbone={name}): no such file or directory.")
  return str(path)


def _resnet_hint(weights: pretrained_lib.StoredWeights) -> str:
  """' The file holds a ResNet-50 (...), which --backbone=resnet50 reads.' (or what it holds)."""
  match = pretrained_lib.matching_model(weights)
  what = pretrained_lib.describe(weights)
  if match is None or match[1]:
    return f" The file holds {what}, which no backbone here reads."
  return f" The file holds {what}, which --backbone={match[0]} reads."


def fit_resnet(name: str, path: str):
  """(model, variables) of the ImageNet ResNet `name` filled from the PyTorch file `path` (its own classes, so the
  head loads too); InputError naming the file, what it holds and the backbone that reads it when it does not fit."""
  if os.path.isdir(path):
    raise errors.InputError(
      f"--weights={path!r} is a directory; --backbone={name} reads a torchvision/timm state_dict file "
      "(.pth / .pt / .bin / .safetensors). A noisy_jax run or export directory is read by --backbone=run."
    )
  weights = pretrained_lib.read_state_dict(path)
  stored = pretrained_lib.StoredWeights(path, weights, "torch")
  head = weights.get("fc.weight")
  classes = int(head.shape[0]) if head is not None and head.ndim == 2 else 1000
  model = models.get(name, num_classes=classes)
  template = pretrained_lib.variable_shapes(model, (64, 64, 3))
  try:
    variables, _ = pretrained_lib.fit_into(template, stored)
  except errors.InputError as error:
    raise errors.InputError(f"{error}{_resnet_hint(stored)}") from None
  return model, variables


def resnet_builder(name: str, preprocessing: Preprocessing = IMAGENET_EVAL) -> Callable:
  """builder(weights_path, image_size) of the torchvision/timm ImageNet ResNet `name` (pretrained_lib.RESNETS):
  features = the pooled penultimate layer (the classifier's input)."""

  def build(path: str | None, image_size: int | None = None) -> Embedder:
    path = _require_weights(name, path, "a torchvision or timm ImageNet ResNet state_dict")
    model, variables = fit_resnet(name, path)
    fn = functools.partial(predict_lib.penultimate_features, model)
    options = xla_options.compiler_options(model, jax.devices()[0].platform)
    return embedder(name, path, fn, variables, sized(preprocessing, image_size), options=options)

  return build


def module_builder(name: str, loader: str, preprocessing: Preprocessing, method: str = "features") -> Callable:
  """builder(weights_path, image_size) of a Flax backbone whose module `loader` (imported when built) has
  `load(name, path, image_size=S) -> (module, variables)`; features = module.apply(variables, x, method=method) of
  the normalised images. S is the crop (image_size, else the preprocessing's)."""

  def build(path: str | None, image_size: int | None = None) -> Embedder:
    path = _require_weights(name, path, f"the weights that {loader}.load reads")
    prepared = sized(preprocessing, image_size)
    module, variables = importlib.import_module(loader).load(name, path, image_size=prepared.crop)
    fn = functools.partial(module.apply, method=method)
    return embedder(name, path, fn, variables, prepared)

  return build


def _export_preprocessing(loaded) -> Preprocessing:
  """The decode and normalisation of the run that exported `loaded` (export.LoadedModel)."""
  shape, data, norm = loaded.input_shape, loaded.info["data"], loaded.normalization
  if len(shape) != 3 or shape[-1] not in (1, 3):
    raise errors.InputError(f"--weights={loaded.path}: the network takes inputs of shape {shape}, not images.")
  if data.get("pixel_max") != 255.0 or loaded.info.get("input_dtype", "uint8") != "uint8":
    raise errors.InputError(
      f"--weights={loaded.path}: the network was trained on {loaded.info.get('input_dtype')} inputs of full "
      f"intensity {data.get('pixel_max')}, not on uint8 image codes 0..255."
    )
  per_channel = norm.mean.ndim <= 1 and norm.std.ndim <= 1 and norm.pixel_max == 255.0
  channels = int(shape[-1])
  mean = tuple(np.broadcast_to(norm.mean, (channels,)).tolist()) if per_channel else None
  std = tuple(np.broadcast_to(norm.std, (channels,)).tolist()) if per_channel else None
  size = data.get("image_size")
  return Preprocessing(tuple(int(d) for d in shape), size, size, "bilinear", mean, std, "noisy_jax", norm.mode)


def run_builder(path: str | None, image_size: int | None = None) -> Embedder:
  """The Embedder of a noisy_jax run's exported network (module docstring, backbone 'run')."""
  path = _require_weights("run", path, "a noisy_jax run's workdir or an export directory")
  try:
    loaded = export.load_model(path)
  except errors.InputError:
    raise
  except (ValueError, OSError, KeyError) as error:
    raise errors.InputError(f"--weights={path!r}: cannot read the exported network ({error}).") from None
  if int(loaded.info["variables"].get("num_networks", 1)) != 1:
    raise errors.InputError(f"--weights={loaded.path}: the export of a pair of networks has no single embedding.")
  preprocessing = _export_preprocessing(loaded)
  if image_size is not None and image_size != preprocessing.output_shape[0]:
    raise errors.InputError(
      f"--image_size={image_size}: the run's network at {loaded.path} takes {preprocessing.output_shape} images "
      "(its own size); leave --image_size unset for --backbone=run."
    )
  model, norm = loaded.model, loaded.normalization
  options = xla_options.compiler_options(model, jax.devices()[0].platform)

  def apply(variables, codes):
    return predict_lib.penultimate_features(model, variables, norm(codes)).astype(jnp.float32)

  variables = jax.tree.map(jnp.asarray, loaded.variables)
  return _with_dim("run", loaded.path, jax.jit(apply, compiler_options=options), variables, preprocessing)


def vit_preprocessing(name: str) -> Preprocessing:
  """The evaluation transform of the ViT backbone `name`'s family (vit.PREPROCESSING: DINOv2 resize 256, crop 224,
  ImageNet mean / std; CLIP resize 224, crop 224, CLIP mean / std; both bicubic), with torchvision's arithmetic."""
  family = vit.PREPROCESSING["clip" if "_clip" in name else "dinov2"]
  return torchvision_eval(
    family.resize, family.crop, interpolation=family.interpolation, mean=family.mean, std=family.std
  )


def vit_builder(name: str) -> Callable:
  """builder(weights_path, image_size) of the DINOv2 / CLIP backbone `name` (noisy_jax.models.vit.MODELS) from its
  released weights (noisy_jax.models.vit_weights.load: any of its layouts; the position grid read from the file and
  resampled to the crop when the images are embedded); D = the final-norm CLS token (DINOv2) or the projected
  embedding (CLIP). image_size S: crop S, resize scaled with it (`sized`)."""
  preprocessing = vit_preprocessing(name)

  def build(path: str | None, image_size: int | None = None) -> Embedder:
    from noisy_jax.models import vit_weights  # pylint: disable=g-import-not-at-top

    path = _require_weights(name, path, "a DINOv2 or CLIP state_dict (.safetensors, .pth, .pt or .bin)")
    module, variables = vit_weights.load(name, path)
    fn = functools.partial(module.apply, method="features")
    return embedder(name, path, fn, variables, sized(preprocessing, image_size))

  return build


BACKBONES: dict[str, Callable[[str | None, int | None], Embedder]] = {
  "imagenet_resnet18": resnet_builder("imagenet_resnet18"),
  "imagenet_resnet34": resnet_builder("imagenet_resnet34"),
  "resnet50": resnet_builder("resnet50"),
  "run": run_builder,
  **{name: vit_builder(name) for name in vit.MODELS},
}


def build(
  name: str,
  weights: str | None,
  image_size: int | None = None,
  *,
  resize: int | None = None,
  interpolation: str | None = None,
) -> Embedder:
  """The Embedder of backbone `name` (BACKBONES) with the weights at `weights`, every check of the module docstring
  made (nothing written, nothing computed but jax.eval_shape); image_size, resize, interpolation: overrides of its
  preprocessing (`sized`, then `resized`; None: the backbone's own).

  Raises:
    errors.InputError, errors.MissingInputError: as the module docstring lists.
  """
  if name not in BACKBONES:
    raise errors.InputError(f"--backbone={name!r} is not known; known backbones: {', '.join(BACKBONES)}.")
  if image_size is not None:
    try:
      images.check_image_size(image_size)
    except ValueError as error:
      raise errors.InputError(f"--image_size: {error}") from None
  built = BACKBONES[name](weights, image_size)
  if resize is None and interpolation is None:
    return built
  return dataclasses.replace(built, preprocessing=resized(built.preprocessing, resize, interpolation))
