"""noisy_jax.models.vit and position_embedding against PyTorch: torch's interpolate for the three resampling
conventions, torch's GELU, and timm's DINOv2 ViT-S/14 (full depth, small images) with random weights."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from torchvision_reference import import_torchvision

import_torchvision()  # before timm (tests/torchvision_reference.py)

import timm  # noqa: E402

from noisy_jax import models  # noqa: E402
from noisy_jax.models import position_embedding  # noqa: E402
from noisy_jax.models import vit  # noqa: E402
from noisy_jax.models import vit_weights  # noqa: E402

F = torch.nn.functional


def torch_resample(grid: np.ndarray, size, method: str) -> np.ndarray:
  """What each library calls: `grid` [g_h, g_w, D] -> [h, w, D] through torch.nn.functional.interpolate."""
  x = torch.from_numpy(grid).permute(2, 0, 1)[None]
  if method == "antialias":
    out = F.interpolate(x, size=size, mode="bicubic", antialias=True, align_corners=False)
  elif method == "plain":
    out = F.interpolate(x, size=size, mode="bicubic", align_corners=False)
  else:  # DINOv2's call: scale factors with the 0.1 offset
    g_h, g_w = grid.shape[:2]
    out = F.interpolate(x, scale_factor=((size[0] + 0.1) / g_h, (size[1] + 0.1) / g_w), mode="bicubic")
  return out[0].permute(1, 2, 0).numpy()


CASES = [(4, (6, 6)), (6, (4, 4)), (37, (16, 16)), (37, (24, 20)), (5, (5, 7))]


@pytest.mark.parametrize("method", position_embedding.METHODS)
def test_resample_equals_torch_interpolate(method):
  rng = np.random.default_rng(0)
  for grid_size, size in CASES:
    grid = rng.normal(size=(grid_size, grid_size, 8))
    with jax.enable_x64(True):
      ours = np.asarray(position_embedding.resample(jnp.asarray(grid), size, method))
    np.testing.assert_allclose(ours, torch_resample(grid, size, method), atol=1e-12, err_msg=f"{grid_size} {size}")
    ours32 = np.asarray(position_embedding.resample(jnp.asarray(grid, jnp.float32), size, method))
    theirs32 = torch_resample(grid.astype(np.float32), size, method)
    np.testing.assert_allclose(ours32, theirs32, atol=2e-5, err_msg=f"float32 {grid_size} {size}")


def test_resample_conventions_differ_and_keep_the_trained_grid():
  grid = jnp.asarray(np.random.default_rng(1).normal(size=(37, 37, 4)), jnp.float32)
  outs = {m: np.asarray(position_embedding.resample(grid, (16, 16), m)) for m in position_embedding.METHODS}
  assert np.abs(outs["antialias"] - outs["plain"]).max() > 1e-2  # §17: the conventions differ by ~1e-2
  assert np.abs(outs["plain"] - outs["dinov2_offset"]).max() > 1e-3
  assert position_embedding.resample(grid, (37, 37), "dinov2_offset") is grid
  with pytest.raises(ValueError, match="'bilinear'.*antialias"):
    position_embedding.resample(grid, (4, 4), "bilinear")


def test_torch_bicubic_matrix_rows_sum_to_one_and_copy_at_equal_size():
  for n_in, n_out in ((4, 9), (37, 16), (7, 7)):
    matrix = position_embedding.torch_bicubic_matrix(n_in, n_out)
    np.testing.assert_allclose(matrix.sum(1), 1.0, atol=1e-12)
  np.testing.assert_array_equal(position_embedding.torch_bicubic_matrix(5, 5), np.eye(5))


def test_gelus():
  x = np.linspace(-6, 6, 101)
  np.testing.assert_allclose(vit.gelu(jnp.asarray(x, jnp.float32), "exact"), F.gelu(torch.tensor(x)), atol=1e-6)
  np.testing.assert_allclose(vit.gelu(jnp.asarray(x, jnp.float32), "quick"), x / (1 + np.exp(-1.702 * x)), atol=1e-6)
  assert np.abs(np.asarray(vit.gelu(jnp.asarray(x), "exact") - jax.nn.gelu(jnp.asarray(x)))).max() > 1e-4
  with pytest.raises(ValueError, match="'tanh'"):
    vit.gelu(jnp.asarray(x), "tanh")


def test_registry_builds_each_backbone_with_its_fields():
  expected = {  # width, depth, heads, patch, registers, proj_dim, gelu, eps, image_size
    "vit_small_patch14_dinov2": (384, 12, 6, 14, 0, 0, "exact", 1e-6, 518),
    "vit_base_patch14_reg4_dinov2": (768, 12, 12, 14, 4, 0, "exact", 1e-6, 518),
    "vit_large_patch14_dinov2": (1024, 24, 16, 14, 0, 0, "exact", 1e-6, 518),
    "vit_base_patch16_clip": (768, 12, 12, 16, 0, 512, "exact", 1e-5, 224),
    "vit_large_patch14_clip_openai": (1024, 24, 16, 14, 0, 768, "quick", 1e-5, 224),
  }
  for name, fields in expected.items():
    model = models.get(name, num_classes=7)
    got = (model.width, model.depth, model.heads, model.patch_size, model.registers, model.proj_dim, model.gelu)
    assert got + (model.eps, model.image_size) == fields, name
    assert models.classifier_name(model) == "head"
    assert vit.family(model) == ("clip" if "clip" in name else "dinov2")
  assert len(vit.MODELS) == 10 and set(vit.MODELS) <= set(models.MODELS)
  shapes = jax.eval_shape(
    lambda: models.get("vit_base_patch14_dinov2", num_classes=7).init(jax.random.key(0), jnp.zeros((1, 28, 28, 3)))
  )
  count = sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(shapes))
  assert count - (768 * 7 + 7) == 86_579_712  # timm vit_base_patch14_dinov2 (518 px, no head)
  assert vit.PREPROCESSING["clip"].mean == (0.48145466, 0.4578275, 0.40821073)
  assert vit.PREPROCESSING["dinov2"].resize == 256 and vit.PREPROCESSING["dinov2"].crop == 224


def test_interface_logits_features_dtypes():
  model = models.get("vit_small_patch14_reg4_dinov2", num_classes=5, depth=1, image_size=28)
  x = jnp.asarray(np.random.default_rng(0).normal(size=(2, 42, 28, 3)), jnp.float32)
  variables = jax.jit(model.init)(jax.random.key(0), x[:, :28])
  assert {leaf.dtype for leaf in jax.tree.leaves(variables)} == {jnp.dtype(jnp.float32)}
  features_fn = jax.jit(functools.partial(model.apply, method="features"))
  features = features_fn(variables, x)
  logits = jax.jit(functools.partial(model.apply, train=True))(variables, x)
  head = variables["params"]["head"]
  assert features.shape == (2, 384) and logits.shape == (2, 5)
  np.testing.assert_allclose(logits, features @ head["kernel"] + head["bias"], rtol=1e-5, atol=1e-5)
  # A remainder past the last whole patch is dropped, as a stride-14 convolution drops it.
  padded = jnp.pad(x, ((0, 0), (0, 5), (0, 13), (0, 0)), constant_values=7.0)
  np.testing.assert_array_equal(features_fn(variables, padded), features)
  bf16 = jax.jit(model.clone(dtype=jnp.bfloat16).apply)(variables, x)
  assert bf16.dtype == jnp.float32 and np.abs(np.asarray(bf16 - logits)).max() < 0.1 * np.abs(logits).max() + 0.1
  with jax.enable_x64(True):
    wide = models.get("vit_small_patch14_dinov2", num_classes=5, depth=1, image_size=28)
    assert wide.dtype == jnp.float64
    shapes = jax.eval_shape(lambda: wide.init(jax.random.key(0), jnp.zeros((1, 28, 28, 3))))
    assert {leaf.dtype for leaf in jax.tree.leaves(shapes)} == {jnp.dtype(jnp.float64)}
  with pytest.raises(ValueError, match=r"\(2, 13, 28, 3\).*14"):
    features_fn(variables, x[:, :13])


def _randomize(model: torch.nn.Module) -> None:
  generator = torch.Generator().manual_seed(0)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("gamma"):
        p.copy_(0.1 + 0.4 * torch.rand(p.shape, generator=generator))
      else:
        p.add_(0.02 * torch.randn(p.shape, generator=generator))


def test_full_vit_small_dinov2_equals_timm(tmp_path):
  """All 12 blocks of ViT-S/14, trained grid 4 x 4 (56 px), float32, at 56 px and 84 px (resampled). (float64:
  tests/test_vit_weights.py, on 2 blocks.)"""
  torch_model = timm.create_model("vit_small_patch14_dinov2", pretrained=False, img_size=56, dynamic_img_size=True)
  _randomize(torch_model.eval())
  path = str(tmp_path / "vits.pth")
  torch.save(torch_model.state_dict(), path)
  x = np.random.default_rng(0).normal(size=(2, 84, 84, 3))
  module, variables = vit_weights.load("vit_small_patch14_dinov2", path)
  assert module.image_size == 56 and module.depth == 12 and module.pos_interpolation == "antialias"
  features = jax.jit(functools.partial(module.apply, method="features"))
  for size in (56, 84):
    xs = np.ascontiguousarray(x[:, :size, :size], np.float32)
    with torch.no_grad():
      theirs = torch_model(torch.from_numpy(xs).permute(0, 3, 1, 2)).numpy()
    assert np.abs(np.asarray(features(variables, xs)) - theirs).max() <= 1e-4 * np.abs(theirs).max(), size
