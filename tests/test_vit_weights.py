"""noisy_jax.models.vit_weights: state dicts of timm, facebookresearch/dinov2, HF Dinov2, open_clip and HF CLIP
(random weights, 2 blocks at the real widths, small images) loaded into the Flax ViT give the features the PyTorch
model gives, at the size it was built for and at a resampled size; bad files raise InputError naming the file."""

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import safetensors.torch
import torch

from torchvision_reference import import_torchvision

import_torchvision()  # before timm, open_clip and transformers' vision models (tests/torchvision_reference.py)

import open_clip  # noqa: E402
import timm  # noqa: E402
import timm.models.vision_transformer  # noqa: E402
import transformers  # noqa: E402

from noisy_jax.core import errors  # noqa: E402
from noisy_jax.models import pretrained  # noqa: E402
from noisy_jax.models import vit_weights  # noqa: E402

F = torch.nn.functional
TOLERANCE = 1e-4  # float32: max |ours - theirs| <= TOLERANCE * max |theirs|


def _randomize(model: torch.nn.Module) -> torch.nn.Module:
  """Every parameter perturbed; LayerScale drawn from U(0.1, 0.5) so that no block is near the identity."""
  generator = torch.Generator().manual_seed(0)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("gamma") or name.endswith("lambda1"):
        p.copy_(0.1 + 0.4 * torch.rand(p.shape, generator=generator))
      else:
        p.add_(0.02 * torch.randn(p.shape, generator=generator))
  return model.eval()


def _save(state_dict, path: str) -> str:
  tensors = {k: v.detach().contiguous() for k, v in state_dict.items()}
  if path.endswith(".safetensors"):
    safetensors.torch.save_file(tensors, path)
  else:
    torch.save(tensors, path)
  return path


@functools.lru_cache(maxsize=None)
def _features_fn(module):
  return jax.jit(functools.partial(module.apply, method="features"))


def _images(size: int, dtype=np.float32) -> np.ndarray:
  return np.random.default_rng(size).normal(size=(2, size, size, 3)).astype(dtype)


def _nchw(x: np.ndarray) -> torch.Tensor:
  return torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))


def _assert_close(ours, theirs, tolerance: float, label: str) -> None:
  ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
  assert ours.shape == theirs.shape, (label, ours.shape, theirs.shape)
  worst = np.abs(ours - theirs).max() / np.abs(theirs).max()
  assert worst <= tolerance, f"{label}: max rel difference {worst:.3g} > {tolerance}"


def _check(name: str, path: str, reference, sizes, **fields) -> None:
  """Loads `path` as `name` and compares the features with reference(x_nchw, size) at each size (float32)."""
  module, variables = vit_weights.load(name, path, **fields)
  for size in sizes:
    x = _images(size)
    with torch.no_grad():
      theirs = reference(_nchw(x), size).numpy()
    _assert_close(_features_fn(module)(variables, x), theirs, TOLERANCE, f"{name} {os.path.basename(path)} {size}")


def _timm(name: str, **kwargs):
  model = timm.create_model(name, pretrained=False, img_size=56, dynamic_img_size=True, depth=2, **kwargs)
  return _randomize(model)


def _timm_features(model):
  return lambda x, size: model.forward_head(model.forward_features(x), pre_logits=True)


@pytest.fixture(scope="module")
def timm_base():
  return _timm("vit_base_patch14_dinov2")


@pytest.mark.parametrize("suffix", [".safetensors", ".pth"])
def test_timm_dinov2_base(timm_base, tmp_path, suffix):
  path = _save(timm_base.state_dict(), str(tmp_path / f"vitb{suffix}"))
  _check("vit_base_patch14_dinov2", path, _timm_features(timm_base), (56, 84), depth=2)


def test_timm_dinov2_float64_at_the_trained_size(timm_base, tmp_path):
  """float64 on both sides at 56 px: the same numbers to ~1e-15. (At a resampled size timm interpolates the position
  embedding in float32, which bounds the agreement to ~1e-7.)"""
  path = _save(timm_base.state_dict(), str(tmp_path / "vitb.safetensors"))
  x = _images(56, np.float64)
  with jax.enable_x64(True):
    module, variables = vit_weights.load("vit_base_patch14_dinov2", path, depth=2, dtype=jnp.float64)
    ours = np.asarray(jax.jit(functools.partial(module.apply, method="features"))(variables, x))
  with torch.no_grad():
    theirs = timm_base.double()(_nchw(x)).numpy()
  timm_base.float()
  _assert_close(ours, theirs, 1e-12, "float64")


def test_timm_dinov2_large_registers(tmp_path):
  model = _timm("vit_large_patch14_reg4_dinov2")
  path = _save(model.state_dict(), str(tmp_path / "vitl_reg4.safetensors"))
  _check("vit_large_patch14_reg4_dinov2", path, _timm_features(model), (56, 84), depth=2)


def _dinov2_resample(posemb, new_size, old_size, num_prefix_tokens=1, **_):
  """The original DINOv2 `interpolate_pos_encoding` of its plain models (float32, scale factors with the 0.1 offset,
  no antialias), in timm's calling convention, to stand in for timm's resampling in the reference."""
  if tuple(new_size) == tuple(old_size):
    return posemb  # DINOv2 resamples only when the grid differs
  prefix, grid = posemb[:, :num_prefix_tokens], posemb[:, num_prefix_tokens:]
  dim = grid.shape[-1]
  grid = grid.float().reshape(1, old_size[0], old_size[1], dim).permute(0, 3, 1, 2)
  scale = ((new_size[0] + 0.1) / old_size[0], (new_size[1] + 0.1) / old_size[1])
  grid = F.interpolate(grid, scale_factor=scale, mode="bicubic", antialias=False)
  return torch.cat([prefix, grid.permute(0, 2, 3, 1).reshape(1, -1, dim).to(posemb.dtype)], dim=1)


def test_original_dinov2_layout(timm_base, tmp_path, monkeypatch):
  """The torch-hub layout (mask_token beside the same names) resamples as DINOv2 does: scale factors with the 0.1
  offset, no antialias."""
  state_dict = dict(timm_base.state_dict(), mask_token=torch.zeros(1, 768))
  path = _save(state_dict, str(tmp_path / "dinov2_vitb14.pth"))
  module, _ = vit_weights.load("vit_base_patch14_dinov2", path, depth=2)
  assert module.pos_interpolation == "dinov2_offset"
  monkeypatch.setattr(timm.models.vision_transformer, "resample_abs_pos_embed", _dinov2_resample)
  _check("vit_base_patch14_dinov2", path, _timm_features(timm_base), (56, 84), depth=2)


def test_original_dinov2_register_layout(tmp_path):
  """DINOv2's register models keep a class-token position row (timm folds it into cls_token) and resample with
  antialias: rebuilt from a timm model with a random class row, the features are timm's."""
  model = _timm("vit_small_patch14_reg4_dinov2")
  state = model.state_dict()
  row = 0.1 * torch.randn(1, 1, 384)
  original = {k: v for k, v in state.items() if k not in ("reg_token", "cls_token", "pos_embed")}
  original.update(
    register_tokens=state["reg_token"],
    cls_token=state["cls_token"] - row,
    pos_embed=torch.cat([row, state["pos_embed"]], dim=1),
    mask_token=torch.zeros(1, 384),
  )
  path = _save(original, str(tmp_path / "dinov2_vits14_reg4.safetensors"))
  _check("vit_small_patch14_reg4_dinov2", path, _timm_features(model), (56, 84), depth=2)


def _hf_dinov2(registers: int, width: int, heads: int):
  common = dict(
    hidden_size=width,
    num_hidden_layers=2,
    num_attention_heads=heads,
    image_size=56,
    patch_size=14,
    layerscale_value=1.0,
  )
  if registers:
    config = transformers.Dinov2WithRegistersConfig(num_register_tokens=registers, **common)
    return _randomize(transformers.Dinov2WithRegistersModel(config))
  return _randomize(transformers.Dinov2Model(transformers.Dinov2Config(**common)))


@pytest.mark.parametrize("registers", [0, 4])
def test_hf_dinov2(tmp_path, registers):
  model = _hf_dinov2(registers, 768, 12)
  path = _save(model.state_dict(), str(tmp_path / "model.safetensors"))
  name = "vit_base_patch14_reg4_dinov2" if registers else "vit_base_patch14_dinov2"
  module, _ = vit_weights.load(name, path, depth=2)
  assert module.pos_interpolation == ("antialias" if registers else "plain")
  _check(name, path, lambda x, size: model(pixel_values=x).pooler_output, (56, 84), depth=2)
  if not registers:  # the hub files' names (before transformers 5): attention.attention.{query,key,value}, output.dense
    old = {
      "q_proj": "attention.query",
      "k_proj": "attention.key",
      "v_proj": "attention.value",
      "o_proj": "output.dense",
    }
    renamed = {}
    for key, value in model.state_dict().items():
      for new, before in old.items():
        key = key.replace(f"attention.{new}.", f"attention.{before}.")
      renamed[key] = value
    assert "encoder.layer.1.attention.attention.key.bias" in renamed
    path = _save(renamed, str(tmp_path / "pytorch_model.bin"))
    _check(name, path, lambda x, size: model(pixel_values=x).pooler_output, (84,), depth=2)


def _open_clip(image_size: int, width: int, patch: int, embed_dim: int, quick_gelu: bool):
  vision = open_clip.model.CLIPVisionCfg(layers=2, width=width, patch_size=patch, image_size=image_size)
  text = open_clip.model.CLIPTextCfg(context_length=8, vocab_size=64, width=64, heads=1, layers=1)
  return open_clip.model.CLIP(embed_dim=embed_dim, vision_cfg=vision, text_cfg=text, quick_gelu=quick_gelu)


def _open_clip_reference(model, state_dict, trained: int, width: int, patch: int, embed_dim: int, quick_gelu: bool):
  """encode_image at the trained size; at another size, open_clip's model for that size with the state dict resized
  by open_clip at load time (antialiased bicubic)."""

  def features(x, size):
    if size == trained:
      return model.encode_image(x)
    other = _open_clip(size, width, patch, embed_dim, quick_gelu).eval()
    resized = dict(state_dict)
    open_clip.model.resize_pos_embed(resized, other)
    other.load_state_dict(resized)
    return other.encode_image(x)

  return features


def test_open_clip_whole_checkpoint_quickgelu(tmp_path):
  """A whole CLIP state dict (text tower, logit_scale: ignored), OpenAI's QuickGELU, ViT-B/16 width."""
  model = _randomize(_open_clip(64, 768, 16, 512, quick_gelu=True))
  state_dict = model.state_dict()
  assert "logit_scale" in state_dict and "token_embedding.weight" in state_dict
  path = _save(state_dict, str(tmp_path / "open_clip_model.safetensors"))
  reference = _open_clip_reference(model, state_dict, 64, 768, 16, 512, True)
  _check("vit_base_patch16_clip_openai", path, reference, (64, 96), depth=2)


def test_open_clip_visual_only_large(tmp_path):
  """A visual-only state dict (names without 'visual.'), exact GELU, ViT-L/14 width."""
  model = _randomize(_open_clip(56, 1024, 14, 768, quick_gelu=False))
  path = _save(model.visual.state_dict(), str(tmp_path / "visual.pth"))
  _check("vit_large_patch14_clip", path, lambda x, size: model.encode_image(x), (56,), depth=2)


def test_hf_clip_vision_with_projection(tmp_path):
  config = transformers.CLIPVisionConfig(
    hidden_size=768,
    intermediate_size=3072,
    projection_dim=512,
    num_hidden_layers=2,
    num_attention_heads=12,
    image_size=64,
    patch_size=16,
    hidden_act="quick_gelu",
    layer_norm_eps=1e-5,
  )
  model = _randomize(transformers.CLIPVisionModelWithProjection(config))
  path = _save(model.state_dict(), str(tmp_path / "clip_vision.safetensors"))

  def reference(x, size):
    return model(pixel_values=x, interpolate_pos_encoding=size != 64).image_embeds

  _check("vit_base_patch16_clip_openai", path, reference, (64, 96), depth=2)


# Bad files: each raises an InputError naming the file, and nothing is returned.


def test_another_backbone_is_named(timm_base, tmp_path):
  path = _save(timm_base.state_dict(), str(tmp_path / "vitb.safetensors"))
  with pytest.raises(errors.InputError, match=r"vitb\.safetensors hold a ViT-B/14 DINOv2 \(width 768, depth 2\), not "):
    vit_weights.load("vit_small_patch14_dinov2", path, depth=2)
  with pytest.raises(errors.InputError, match=r"ViT-B/14 DINOv2 .*not vit_base_patch16_clip"):
    vit_weights.load("vit_base_patch16_clip", path, depth=2)
  with pytest.raises(errors.InputError, match=r"vitb\.safetensors.*'timm' layout.*asked for 'hf_clip'"):
    vit_weights.load("vit_base_patch14_dinov2", path, depth=2, layout="hf_clip")


def test_truncated_and_missing_files(timm_base, tmp_path):
  path = _save(timm_base.state_dict(), str(tmp_path / "vitb.safetensors"))
  with open(path, "rb") as f:
    raw = f.read()
  cut = str(tmp_path / "cut.safetensors")
  with open(cut, "wb") as f:
    f.write(raw[: len(raw) // 2])
  with pytest.raises(errors.InputError, match=r"cut\.safetensors is truncated"):
    vit_weights.load("vit_base_patch14_dinov2", cut, depth=2)
  with pytest.raises(errors.MissingInputError, match=r"nowhere\.pth"):
    vit_weights.load("vit_base_patch14_dinov2", str(tmp_path / "nowhere.pth"), depth=2)


def test_missing_extra_and_misshapen_tensors(timm_base, tmp_path):
  state = dict(timm_base.state_dict())
  missing = {k: v for k, v in state.items() if k != "blocks.1.attn.proj.bias"}
  path = _save(missing, str(tmp_path / "missing.safetensors"))
  with pytest.raises(errors.InputError, match=r"missing\.safetensors: the network's params/blocks_1/proj/bias "):
    vit_weights.load("vit_base_patch14_dinov2", path, depth=2)
  path = _save({k: v for k, v in state.items() if k != "pos_embed"}, str(tmp_path / "no_pos.safetensors"))
  with pytest.raises(errors.InputError, match=r"no_pos\.safetensors: pos_embed is not in the file"):
    vit_weights.load("vit_base_patch14_dinov2", path, depth=2)
  path = _save(dict(state, extra=torch.zeros(3)), str(tmp_path / "extra.safetensors"))
  with pytest.raises(errors.InputError, match=r"extra\.safetensors: 1 stored tensors the network does not have: extra"):
    vit_weights.load("vit_base_patch14_dinov2", path, depth=2)
  path = _save(dict(state, **{"blocks.0.ls1.gamma": torch.zeros(5)}), str(tmp_path / "shape.safetensors"))
  with pytest.raises(errors.InputError, match=r"shape\.safetensors: blocks\.0\.ls1\.gamma has shape \(5,\)"):
    vit_weights.load("vit_base_patch14_dinov2", path, depth=2)
  path = _save(state, str(tmp_path / "grid.safetensors"))
  with pytest.raises(errors.InputError, match=r"grid\.safetensors: pos_embed has shape \(17, 768\)"):
    vit_weights.load("vit_base_patch14_dinov2", path, depth=2, image_size=84)


def test_check_fits_and_head(timm_base, tmp_path):
  path = _save(timm_base.state_dict(), str(tmp_path / "vitb.safetensors"))
  weights = pretrained.StoredWeights(source=path, arrays=pretrained.read_state_dict(path))
  module, info = vit_weights.build("vit_base_patch14_dinov2", weights, num_classes=3, depth=2)
  assert info["text"] == "a ViT-B/14 DINOv2 (width 768, depth 2)" and info["image_size"] == 56
  report = vit_weights.check_fits(module, weights)
  assert report == {"source": path, "layout": "timm", "loaded": 2 * 14 + 6, "head": "initialised"}
  variables, _ = vit_weights.fit_into(module, weights, jax.random.key(1))
  np.testing.assert_array_equal(variables["params"]["blocks_1"]["ls2"], timm_base.blocks[1].ls2.gamma.detach())
  assert variables["params"]["head"]["kernel"].shape == (768, 3) and np.any(variables["params"]["head"]["kernel"])
  # A timm file with a classifier fills the head.
  classifier = _timm("vit_small_patch14_dinov2", num_classes=4)
  path = _save(classifier.state_dict(), str(tmp_path / "classifier.pth"))
  module, variables = vit_weights.load("vit_small_patch14_dinov2", path, depth=2)
  x = _images(56)
  with torch.no_grad():
    theirs = classifier(_nchw(x)).numpy()
  assert module.num_classes == 4
  _assert_close(jax.jit(module.apply)(variables, x), theirs, TOLERANCE, "logits")


def test_fine_tuning_run_starts_from_a_timm_file_with_layer_decay(tmp_path):
  """--config.model.name=vit_small_patch14_dinov2 --config.model.pretrained=FILE (timm, 2 blocks, trained grid
  2 x 2 = 28 px) on mock CIFAR-10 (32 px: the patch grid keeps 28 x 28), one epoch of SGD with layer_decay 1e-20:
  the run starts from the file's weights (its head re-initialised for 10 classes), and the embeddings, 3 layers
  below the head, keep the file's values bit for bit (update x 1e-60, 0 in float32) while the top layer moves.
  Without model.kwargs.image_size the run stops before training, saying which value the file needs."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  from experiments.configs import tiny  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import runs  # pylint: disable=g-import-not-at-top

  torch.manual_seed(0)
  net = timm.create_model("vit_small_patch14_dinov2", pretrained=False, img_size=28, depth=2)
  path = _save(net.state_dict(), str(tmp_path / "vits14.safetensors"))
  config = tiny.base()
  config.dataset, config.dataset_kwargs = "cifar10", {"validation_size": 4}
  config.num_epochs, config.batch_size, config.num_devices = 1, 8, 1
  config.normalization = "imagenet"
  config.model = ml_collections.ConfigDict(
    {"name": "vit_small_patch14_dinov2", "kwargs": {"image_size": 28, "depth": 2}, "pretrained": path}
  )
  config.optimizer.learning_rate, config.optimizer.weight_decay = 0.05, 0.0
  config.optimizer.layer_decay = 1e-20
  with tfds.testing.mock_data(num_examples=16):
    summary = runs.run_single(config, keep_arrays=True)
    params = summary["arrays"]["stage1"]["params"]
    stored = pretrained.read_state_dict(path)
    np.testing.assert_array_equal(np.asarray(params["cls_token"]), stored["cls_token"].reshape(-1))
    np.testing.assert_array_equal(
      np.asarray(params["patch_embed"]["kernel"]), stored["patch_embed.proj.weight"].transpose(2, 3, 1, 0)
    )
    assert np.asarray(params["head"]["kernel"]).shape == (384, 10) and np.abs(params["head"]["kernel"]).max() > 0
    moved = np.abs(np.asarray(params["norm"]["scale"]) - stored["norm.weight"]).max()
    assert moved > 0  # the top layer (norm, head) trained at the full lr
    config.model.kwargs = {"depth": 2}
    with pytest.raises(errors.InputError, match=r"vits14.safetensors.*kwargs.image_size=28"):
      runs.run_single(config)
