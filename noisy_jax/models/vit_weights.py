"""Released DINOv2 and CLIP image-tower weights, read from PyTorch files and mapped by name onto
noisy_jax.models.vit's VisionTransformer.

  module, variables = vit_weights.load("vit_base_patch14_dinov2", "dinov2_vitb14.pth")
  embedding = module.apply(variables, images, method="features")      # images [B, H, W, 3], normalised

Files: a state_dict in .safetensors, .pth, .pt or .bin, read by noisy_jax.models.pretrained.read_state_dict (a
leading 'module.' dropped). Layouts, told apart by their names (or given as `layout`), i from 0:

  'timm'       timm `vit_*_patch14_dinov2*`: cls_token, reg_token, pos_embed, patch_embed.proj.*,
               blocks.i.{norm1, attn.qkv, attn.proj, ls1.gamma, norm2, mlp.fc1, mlp.fc2, ls2.gamma}, norm, head
  'dinov2'     facebookresearch/dinov2 (torch hub): as timm, with register_tokens; mask_token is ignored
  'hf_dinov2'  transformers Dinov2Model / Dinov2WithRegistersModel: embeddings.{cls_token, register_tokens,
               position_embeddings, patch_embeddings.projection}, encoder.layer.i.{norm1,
               attention.attention.{query, key, value}, attention.output.dense, layer_scale1.lambda1, norm2,
               mlp.fc1, mlp.fc2, layer_scale2.lambda1}, layernorm (the hub files; transformers 5 saves the attention
               as attention.{q, k, v, o}_proj, read too); mask_token is ignored
  'open_clip'  OpenAI CLIP / open_clip: visual.{class_embedding, positional_embedding, conv1, ln_pre,
               transformer.resblocks.i.{ln_1, attn.in_proj_*, attn.out_proj, ln_2, mlp.c_fc, mlp.c_proj}, ln_post,
               proj}; in a whole CLIP file every name outside visual.* (text tower, logit_scale) is ignored; a
               visual-only state dict has the same names without 'visual.'
  'hf_clip'    transformers CLIPVisionModelWithProjection (or CLIPModel): vision_model.{embeddings.{class_embedding,
               patch_embedding, position_embedding}, pre_layrnorm, encoder.layers.i.{layer_norm1,
               self_attn.{q, k, v, out}_proj, layer_norm2, mlp.fc1, mlp.fc2}, post_layernorm},
               visual_projection; other names (text tower, position_ids, logit_scale) are ignored

Mapping: a Linear weight [out, in] -> kernel [in, out]; the patch convolution [D, 3, p, p] -> [p, p, 3, D]; fused
qkv as stored, separate q, k, v concatenated in that order; LayerNorm weight -> scale; LayerScale vectors, tokens and
position embeddings reshaped to the network's shapes. timm's register models keep no position row for the class
token (timm folds it into cls_token): the network's row 0 is then zero, which adds nothing. Every other variable of
the network must be in the file with its shape, and every stored tensor not listed as ignored must be used. The
classifier `head` is loaded from a timm file that has one of the network's shape and initialised otherwise.

Which GELU a CLIP file was trained with is not in it: the name says (`*_openai`: QuickGELU). The grid the position
embedding was trained on is read from the file (image_size = grid x patch size) unless `image_size` is given. The
position-embedding resampling for other input sizes defaults to what the layout's library does (INTERPOLATION).
"""

from __future__ import annotations

import math
import re
from typing import Any

import flax
import flax.linen as nn
import flax.traverse_util
import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import errors
from noisy_jax.models import pretrained
from noisy_jax.models import vit

LAYOUTS = ("timm", "dinov2", "hf_dinov2", "open_clip", "hf_clip")
# The resampling each library applies for another input size (position_embedding.METHODS), without / with registers.
INTERPOLATION = {
  "timm": ("antialias", "antialias"),
  "dinov2": ("dinov2_offset", "antialias"),
  "hf_dinov2": ("plain", "antialias"),
  "open_clip": ("antialias", "antialias"),
  "hf_clip": ("plain", "plain"),
}
_SIZES = {384: "S", 768: "B", 1024: "L", 1280: "H", 1536: "g"}


def _linear(flax_name: str, torch_name: str) -> dict:
  return {f"{flax_name}/kernel": ((f"{torch_name}.weight",), "T"), f"{flax_name}/bias": ((f"{torch_name}.bias",), "")}


def _norm(flax_name: str, torch_name: str) -> dict:
  return {f"{flax_name}/scale": ((f"{torch_name}.weight",), ""), f"{flax_name}/bias": ((f"{torch_name}.bias",), "")}


def _qkv(names: tuple[str, str, str]) -> dict:
  return {
    "qkv/kernel": (tuple(f"{n}.weight" for n in names), "T"),
    "qkv/bias": (tuple(f"{n}.bias" for n in names), ""),
  }


def _dinov2_spec(registers: str) -> tuple[dict, str, dict]:
  top = {
    "patch_embed/kernel": (("patch_embed.proj.weight",), "conv"),
    "patch_embed/bias": (("patch_embed.proj.bias",), ""),
    "cls_token": (("cls_token",), ""),
    "registers": ((registers,), ""),
    "pos_embed": (("pos_embed",), "pos"),
    **_norm("norm", "norm"),
    **_linear("head", "head"),
  }
  block = {
    **_norm("norm1", "norm1"),
    **_linear("qkv", "attn.qkv"),
    **_linear("proj", "attn.proj"),
    "ls1": (("ls1.gamma",), ""),
    **_norm("norm2", "norm2"),
    **_linear("fc1", "mlp.fc1"),
    **_linear("fc2", "mlp.fc2"),
    "ls2": (("ls2.gamma",), ""),
  }
  return top, "blocks.{i}.", block


def _hf_dinov2_spec(v5: bool) -> tuple[dict, str, dict]:
  top = {
    "patch_embed/kernel": (("embeddings.patch_embeddings.projection.weight",), "conv"),
    "patch_embed/bias": (("embeddings.patch_embeddings.projection.bias",), ""),
    "cls_token": (("embeddings.cls_token",), ""),
    "registers": (("embeddings.register_tokens",), ""),
    "pos_embed": (("embeddings.position_embeddings",), "pos"),
    **_norm("norm", "layernorm"),
  }
  block = {
    **_norm("norm1", "norm1"),
    **_qkv(
      tuple(f"attention.{n}_proj" for n in "qkv")
      if v5
      else tuple(f"attention.attention.{n}" for n in ("query", "key", "value"))
    ),
    **_linear("proj", "attention.o_proj" if v5 else "attention.output.dense"),
    "ls1": (("layer_scale1.lambda1",), ""),
    **_norm("norm2", "norm2"),
    **_linear("fc1", "mlp.fc1"),
    **_linear("fc2", "mlp.fc2"),
    "ls2": (("layer_scale2.lambda1",), ""),
  }
  return top, "encoder.layer.{i}.", block


def _open_clip_spec(prefix: str) -> tuple[dict, str, dict]:
  top = {
    "patch_embed/kernel": ((f"{prefix}conv1.weight",), "conv"),
    "cls_token": ((f"{prefix}class_embedding",), ""),
    "pos_embed": ((f"{prefix}positional_embedding",), "pos"),
    **_norm("ln_pre", f"{prefix}ln_pre"),
    **_norm("norm", f"{prefix}ln_post"),
    "proj": ((f"{prefix}proj",), ""),
  }
  block = {
    **_norm("norm1", "ln_1"),
    "qkv/kernel": (("attn.in_proj_weight",), "T"),
    "qkv/bias": (("attn.in_proj_bias",), ""),
    **_linear("proj", "attn.out_proj"),
    **_norm("norm2", "ln_2"),
    **_linear("fc1", "mlp.c_fc"),
    **_linear("fc2", "mlp.c_proj"),
  }
  return top, prefix + "transformer.resblocks.{i}.", block


def _hf_clip_spec() -> tuple[dict, str, dict]:
  v = "vision_model."
  top = {
    "patch_embed/kernel": ((f"{v}embeddings.patch_embedding.weight",), "conv"),
    "cls_token": ((f"{v}embeddings.class_embedding",), ""),
    "pos_embed": ((f"{v}embeddings.position_embedding.weight",), "pos"),
    **_norm("ln_pre", f"{v}pre_layrnorm"),
    **_norm("norm", f"{v}post_layernorm"),
    "proj": (("visual_projection.weight",), "T"),
  }
  block = {
    **_norm("norm1", "layer_norm1"),
    **_qkv(tuple(f"self_attn.{n}_proj" for n in "qkv")),
    **_linear("proj", "self_attn.out_proj"),
    **_norm("norm2", "layer_norm2"),
    **_linear("fc1", "mlp.fc1"),
    **_linear("fc2", "mlp.fc2"),
  }
  return top, v + "encoder.layers.{i}.", block


def detect_layout(arrays) -> tuple[str, str] | None:
  """(layout, name prefix) of a state dict, from its names ('open_clip' with prefix 'visual.' or ''); None when
  it is none of LAYOUTS."""
  if "vision_model.embeddings.class_embedding" in arrays:
    return "hf_clip", ""
  for prefix in ("visual.", ""):
    if f"{prefix}class_embedding" in arrays and f"{prefix}conv1.weight" in arrays:
      return "open_clip", prefix
  if "embeddings.cls_token" in arrays:
    return "hf_dinov2", ""
  if "cls_token" in arrays:
    return ("dinov2" if "mask_token" in arrays or "register_tokens" in arrays else "timm"), ""
  return None


def _spec(layout: str, prefix: str, arrays) -> tuple[dict, str, dict]:
  if layout == "timm":
    return _dinov2_spec("reg_token")
  if layout == "dinov2":
    return _dinov2_spec("register_tokens")
  if layout == "hf_dinov2":
    return _hf_dinov2_spec("encoder.layer.0.attention.q_proj.weight" in arrays)
  if layout == "open_clip":
    return _open_clip_spec(prefix)
  return _hf_clip_spec()


def _ignored(name: str, layout: str, prefix: str) -> bool:
  """Whether a stored tensor is not part of the image tower (documented in the module docstring)."""
  if layout in ("dinov2", "hf_dinov2"):
    return name in ("mask_token", "embeddings.mask_token")
  if layout == "open_clip":
    return not name.startswith(prefix)
  if layout == "hf_clip":
    return name == "vision_model.embeddings.position_ids" or not (
      name.startswith("vision_model.") or name == "visual_projection.weight"
    )
  return False


def _layout(weights: pretrained.StoredWeights, layout: str | None) -> tuple[str, str]:
  detected = detect_layout(weights.arrays)
  if detected is None or (layout is not None and detected[0] != layout):
    shown = ", ".join(list(weights.arrays)[:4])
    what = "no DINOv2 or CLIP ViT state dict" if detected is None else f"the {detected[0]!r} layout"
    raise errors.InputError(
      f"pretrained weights {weights.source}: holds {what} (names {shown}, ...); readable layouts: "
      f"{', '.join(LAYOUTS)}{f', asked for {layout!r}' if layout else ''}."
    )
  return detected


def describe(weights: pretrained.StoredWeights, layout: str | None = None) -> dict:
  """What a DINOv2 / CLIP file holds, read from its shapes: {'layout', 'prefix', 'family' ('dinov2' | 'clip'),
  'width', 'depth', 'patch_size', 'registers', 'proj_dim', 'image_size', 'text'} ('text': for messages, e.g. 'a
  ViT-B/14 DINOv2 (width 768, depth 12)').

  Raises:
    errors.InputError: naming the file when it holds neither (or not the `layout` asked for), or lacks the class
      token, the patch embedding or the position embedding.
  """
  layout, prefix = _layout(weights, layout)
  top, block_prefix, _ = _spec(layout, prefix, weights.arrays)
  arrays = weights.arrays
  pattern = re.escape(block_prefix).replace(r"\{i\}", r"(\d+)")
  depth = 1 + max((int(m[1]) for n in arrays if (m := re.match(pattern, n))), default=-1)
  for key in ("cls_token", "patch_embed/kernel", "pos_embed"):
    if top[key][0][0] not in arrays:
      raise errors.InputError(
        f"pretrained weights {weights.source}: {top[key][0][0]} is not in the file (a {layout!r} state dict by its "
        "other names); is it complete?"
      )
  cls = arrays[top["cls_token"][0][0]]
  patch = arrays[top["patch_embed/kernel"][0][0]].shape[-1]
  rows = int(np.prod(arrays[top["pos_embed"][0][0]].shape[:-1]))
  grid = math.isqrt(rows - (0 if math.isqrt(rows) ** 2 == rows else 1))
  registers_name = top.get("registers", ((None,),))[0][0]
  registers = int(np.prod(arrays[registers_name].shape[:-1])) if registers_name in arrays else 0
  proj = arrays.get(top["proj"][0][0]) if "proj" in top else None
  proj_dim = 0 if proj is None else int(proj.shape[0] if layout == "hf_clip" else proj.shape[-1])
  family = "clip" if layout in ("open_clip", "hf_clip") else "dinov2"
  width = int(cls.shape[-1])
  text = f"a ViT-{_SIZES.get(width, '?')}/{patch} {'CLIP' if family == 'clip' else 'DINOv2'}"
  text += f" (width {width}, depth {depth}{f', {registers} registers' if registers else ''})"
  return dict(
    layout=layout,
    prefix=prefix,
    family=family,
    width=width,
    depth=depth,
    patch_size=int(patch),
    registers=registers,
    proj_dim=proj_dim,
    image_size=int(grid * patch),
    text=text,
  )


def _model_text(model: vit.VisionTransformer) -> str:
  registers = f", {model.registers} registers" if model.registers else ""
  return f"width {model.width}, depth {model.depth}{registers}"


def build(name: str, weights: pretrained.StoredWeights, *, num_classes=None, image_size=None, layout=None, **fields):
  """(module, file description) for the backbone `name` (vit.MODELS) filled from `weights`: its fields
  overridden by `fields` (e.g. depth), image_size from the file unless given, pos_interpolation the layout's
  library's (INTERPOLATION) unless given, num_classes the file's head's (timm) or 1 when the file has none.

  Raises:
    errors.InputError: naming the file when it holds another backbone than `name` describes (family, width, depth,
      patch size, registers or projection), or for an unknown name.
  """
  if name not in vit.MODELS:
    raise errors.InputError(f"ViT backbone {name!r}; known: {', '.join(vit.MODELS)}.")
  info = describe(weights, layout)
  head = weights.arrays.get("head.weight") if info["layout"] == "timm" else None
  classes = num_classes if num_classes is not None else (int(head.shape[0]) if head is not None else 1)
  fields.setdefault("pos_interpolation", INTERPOLATION[info["layout"]][bool(info["registers"])])
  fields["image_size"] = int(image_size) if image_size is not None else info["image_size"]
  module = vit.MODELS[name](num_classes=classes, **fields)
  wanted = (vit.family(module), module.width, module.depth, module.patch_size, module.registers, module.proj_dim)
  found = tuple(info[k] for k in ("family", "width", "depth", "patch_size", "registers", "proj_dim"))
  if wanted != found:
    raise errors.InputError(
      f"pretrained weights {weights.source} hold {info['text']}, not {name} ({_model_text(module)}"
      f"{f', projection {module.proj_dim}' if module.proj_dim else ''}); pick the matching model name."
    )
  return module, info


def _value(arrays, names: tuple[str, ...], transform: str, shape: tuple[int, ...]) -> np.ndarray:
  """A stored tensor (or q, k, v concatenated) in the network's layout (`shape`: the network's, for reshapes)."""
  value = (
    np.concatenate([np.asarray(arrays[n]) for n in names], axis=0) if len(names) > 1 else np.asarray(arrays[names[0]])
  )
  if transform == "T":
    return value.T
  if transform == "conv":
    return np.transpose(value, (2, 3, 1, 0))
  if transform == "pos":
    value = value.reshape(-1, value.shape[-1])
    if math.isqrt(len(value)) ** 2 == len(value):  # no class-token row (timm's register models)
      value = np.concatenate([np.zeros_like(value[:1]), value])
    return value
  return value.reshape(shape) if value.size == int(np.prod(shape)) else value


def _stored(path: tuple[str, ...], top: dict, block_prefix: str, block: dict):
  """(stored names, transform) of a network variable path ('params', ...)."""
  key = "/".join(path[1:])
  match = re.fullmatch(r"blocks_(\d+)/(.+)", key)
  if match:
    names, transform = block[match[2]]
    return tuple(block_prefix.format(i=match[1]) + n for n in names), transform
  return top.get(key, ((), ""))  # (): a variable this layout does not store (the head of a backbone-only file)


def _matched(flat: dict, weights: pretrained.StoredWeights, info: dict) -> tuple[dict, bool]:
  """({path: (names, value)} for every variable of `flat` found, whether the head was found with its shape)."""
  top, block_prefix, block = _spec(info["layout"], info["prefix"], weights.arrays)
  arrays, values = weights.arrays, {}
  for path, leaf in flat.items():
    names, transform = _stored(path, top, block_prefix, block)
    is_head = path[1] == "head"
    if not names or not all(n in arrays for n in names):
      if is_head:
        continue
      raise errors.InputError(
        f"pretrained weights {weights.source}: the network's {'/'.join(path)} ({', '.join(names)}) is not in the "
        f"file, which holds {info['text']}."
      )
    value = _value(arrays, names, transform, tuple(leaf.shape))
    if value.shape != tuple(leaf.shape) and not is_head:
      raise errors.InputError(
        f"pretrained weights {weights.source}: {', '.join(names)} has shape {value.shape} (in the network's "
        f"layout), the network's {'/'.join(path)} {tuple(leaf.shape)}."
      )
    values[path] = (names, value)
  used = {n for names, _ in values.values() for n in names}
  unused = sorted(n for n in arrays if n not in used and not _ignored(n, info["layout"], info["prefix"]))
  unused = [n for n in unused if not n.startswith("head.")]
  if unused:
    shown = ", ".join(unused[:5]) + (f" and {len(unused) - 5} more" if len(unused) > 5 else "")
    raise errors.InputError(
      f"pretrained weights {weights.source}: {len(unused)} stored tensors the network does not have: {shown}."
    )
  heads = [path for path in flat if path[1] == "head"]
  head_fits = all(p in values and values[p][1].shape == tuple(flat[p].shape) for p in heads)
  return values, head_fits


def _fit(module: vit.VisionTransformer, weights: pretrained.StoredWeights, layout: str | None):
  info = describe(weights, layout)
  template = pretrained.variable_shapes(module, (module.image_size, module.image_size, 3))
  flat = flax.traverse_util.flatten_dict(flax.core.unfreeze(template))
  values, head_fits = _matched(flat, weights, info)
  loaded = sum(1 for path in values if head_fits or path[1] != "head")
  report = {
    "source": weights.source,
    "layout": info["layout"],
    "loaded": loaded,
    "head": "loaded" if head_fits else "initialised",
  }
  return flat, values, head_fits, report


def check_fits(module: vit.VisionTransformer, weights: pretrained.StoredWeights, layout: str | None = None) -> dict:
  """Checks, computing nothing (shapes only), that `weights` fill every variable of `module` and that every stored
  tensor is used; returns {'source', 'layout', 'loaded' (variables taken from the file), 'head': 'loaded' |
  'initialised'}.

  Raises:
    errors.InputError: naming the file and the first variable missing or of another shape, or the unused tensors.
  """
  return _fit(module, weights, layout)[-1]


def fit_into(module, weights: pretrained.StoredWeights, key: jax.Array, layout: str | None = None) -> tuple[Any, dict]:
  """(variables, check_fits's report): every variable of `module` from `weights` in the module's parameter dtype,
  the head initialised from `key` unless the file has one of its shape.

  Raises:
    errors.InputError: as check_fits.
  """
  flat, values, head_fits, report = _fit(module, weights, layout)
  head_dtype = flat[("params", "head", "kernel")].dtype
  head = nn.Dense(module.num_classes, kernel_init=vit.INIT, param_dtype=head_dtype)
  fresh = head.init(key, jnp.zeros((1, module.feature_dim), head_dtype))["params"]
  out = {}
  for path, leaf in flat.items():
    if path[1] == "head" and not head_fits:
      out[path] = fresh[path[2]]
    else:
      out[path] = jnp.asarray(values[path][1], dtype=leaf.dtype)
  return flax.traverse_util.unflatten_dict(out), report


def fill(template, weights: pretrained.StoredWeights, layout: str | None = None) -> tuple[Any, dict]:
  """(variables, check_fits's report) of a network's fresh variables `template` ({'params': ...}, arrays) with every
  variable taken from `weights` in the template's dtypes, except a head the file lacks or has with another shape,
  which keeps the template's initialisation (a fine-tuning run's classifier for its own classes).

  Raises:
    errors.InputError: as check_fits.
  """
  info = describe(weights, layout)
  flat = flax.traverse_util.flatten_dict(flax.core.unfreeze(template))
  values, head_fits = _matched(flat, weights, info)
  out, loaded = {}, 0
  for path, leaf in flat.items():
    if path in values and (head_fits or path[1] != "head"):
      out[path] = jnp.asarray(values[path][1], dtype=leaf.dtype)
      loaded += 1
    else:
      out[path] = leaf
  report = {
    "source": weights.source,
    "layout": info["layout"],
    "loaded": loaded,
    "head": "loaded" if head_fits else "initialised",
  }
  return flax.traverse_util.unflatten_dict(out), report


def load(
  name: str,
  path: str,
  *,
  num_classes: int | None = None,
  image_size: int | None = None,
  layout: str | None = None,
  key: jax.Array | None = None,
  **fields,
) -> tuple[vit.VisionTransformer, Any]:
  """(module, variables): the backbone `name` (vit.MODELS) built as `build` says and filled from the state dict in
  `path` (`fit_into`; the head from `key`, default PRNGKey(0), unless the file has it). `fields` set other module
  fields (dtype, depth, pos_interpolation, ...).

  Raises:
    errors.MissingInputError: naming `path` when it does not exist.
    errors.InputError: naming `path` when it is truncated or unreadable, holds another backbone, or lacks a variable
      of the network (or has it in another shape), or holds tensors the network does not use.
  """
  weights = pretrained.StoredWeights(source=path, arrays=pretrained.read_state_dict(path))
  module, info = build(name, weights, num_classes=num_classes, image_size=image_size, layout=layout, **fields)
  key = jax.random.PRNGKey(0) if key is None else key
  variables, _ = fit_into(module, weights, key, info["layout"])
  return module, variables
