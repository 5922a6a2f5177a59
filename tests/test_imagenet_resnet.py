"""Tests for the ImageNet ResNet-50 (noisy_jax.models.imagenet_resnet, registered as 'resnet50').

The parameter count is checked against torchvision's published number, a closed form and a small PyTorch definition
written here; the forward pass against that PyTorch definition with the same weights, at reduced widths in eval and
train mode with the comparison helper of tests/test_paper_models.py (the real size is compared with torchvision's own
resnet50 in tests/test_pretrained.py). The full network is initialised by Flax once (~4 s on a 2-core CPU, see the
fixture) for the init statistics and the train-mode smoke run; everything else runs on PyTorch's weights.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from noisy_jax import models
from noisy_jax.models.imagenet_resnet import ImageNetResNet
from noisy_jax.models.imagenet_resnet import ResNet50
from test_paper_models import assert_same_logits
from test_paper_models import torch_to_flax

WIDTHS, BLOCKS = (64, 128, 256, 512), (3, 4, 6, 3)


def count(tree) -> int:
  return int(sum(np.prod(leaf.shape) for leaf in jax.tree.leaves(tree)))


def abstract_variables(model, shape=(1, 224, 224, 3)):
  return jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros(shape), train=False))


def closed_form_count(num_classes: int, widths=WIDTHS, blocks=BLOCKS, expansion=4) -> int:
  """Stem conv + BN, per bottleneck three convs + three BNs (+ projection conv and BN), head with bias."""
  total = 7 * 7 * 3 * widths[0] + 2 * widths[0]
  c_in = widths[0]
  for stage, (w, n) in enumerate(zip(widths, blocks)):
    for b in range(n):
      out = expansion * w
      total += c_in * w + 9 * w * w + w * out + 2 * (w + w + out)
      if c_in != out or (stage > 0 and b == 0):
        total += c_in * out + 2 * out
      c_in = out
  return total + c_in * num_classes + num_classes


# A PyTorch definition written for these tests from torchvision's layout (v1.5: stride on the 3x3 convolution),
# attribute names equal to the Flax module names so that torch_to_flax copies the weights one to one.
class TorchBottleneck(torch.nn.Module):
  def __init__(self, c_in, w, stride, expansion=4):
    super().__init__()
    out = expansion * w
    self.conv1, self.bn1 = torch.nn.Conv2d(c_in, w, 1, bias=False), torch.nn.BatchNorm2d(w)
    self.conv2, self.bn2 = torch.nn.Conv2d(w, w, 3, stride, 1, bias=False), torch.nn.BatchNorm2d(w)
    self.conv3, self.bn3 = torch.nn.Conv2d(w, out, 1, bias=False), torch.nn.BatchNorm2d(out)
    self.proj = stride != 1 or c_in != out
    if self.proj:
      self.shortcut_conv = torch.nn.Conv2d(c_in, out, 1, stride, bias=False)
      self.shortcut_bn = torch.nn.BatchNorm2d(out)

  def forward(self, x):
    h = torch.relu(self.bn1(self.conv1(x)))
    h = torch.relu(self.bn2(self.conv2(h)))
    h = self.bn3(self.conv3(h))
    return torch.relu(h + (self.shortcut_bn(self.shortcut_conv(x)) if self.proj else x))


class TorchImageNetResNet(torch.nn.Module):
  def __init__(self, widths, blocks, num_classes, expansion=4):
    super().__init__()
    self.stem_conv = torch.nn.Conv2d(3, widths[0], 7, 2, 3, bias=False)
    self.stem_bn = torch.nn.BatchNorm2d(widths[0])
    self.pool = torch.nn.MaxPool2d(3, 2, 1)
    self.blocks = torch.nn.ModuleDict()
    c_in = widths[0]
    for s, (w, n) in enumerate(zip(widths, blocks)):
      for b in range(n):
        self.blocks[f"stage{s + 1}_block{b + 1}"] = TorchBottleneck(c_in, w, 2 if s > 0 and b == 0 else 1, expansion)
        c_in = expansion * w
    self.head = torch.nn.Linear(c_in, num_classes)
    for mod in self.modules():  # torchvision's init (its nn.Linear keeps PyTorch's default)
      if isinstance(mod, torch.nn.Conv2d):
        torch.nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")

  def forward(self, x):
    x = self.pool(torch.relu(self.stem_bn(self.stem_conv(x))))
    for block in self.blocks.values():
      x = block(x)
    return self.head(x.mean(dim=(2, 3)))


def calibrate_batch_norms(net, x):
  """Random BN scales and biases, then running statistics = the statistics of one train-mode forward pass on x
  (momentum None: the cumulative average of one batch), so that eval-mode activations keep their scale through all
  16 blocks (uncalibrated random statistics blow the residual stream up ~2x per block) and the logits stay O(1)."""
  bns = [mod for mod in net.modules() if isinstance(mod, torch.nn.BatchNorm2d)]
  with torch.no_grad():
    for mod in bns:
      mod.weight.uniform_(0.5, 1.5), mod.bias.uniform_(-0.5, 0.5)
      mod.reset_running_stats()
      mod.momentum = None
    net.train()
    net(x)
  for mod in bns:
    mod.momentum = 0.1


def test_parameter_count():
  """torchvision's resnet50: 25,557,032 parameters at 1,000 classes; the head is 2,048 C + C."""
  got = {c: count(abstract_variables(models.get("resnet50", num_classes=c))["params"]) for c in (1000, 10)}
  assert got == {1000: 25_557_032, 10: 23_528_522}
  assert 25_557_032 - 2048 * 990 - 990 == 23_528_522
  assert got[1000] == closed_form_count(1000) and got[10] == closed_form_count(10)
  net = TorchImageNetResNet(WIDTHS, BLOCKS, 1000)
  assert sum(p.numel() for p in net.parameters()) == 25_557_032
  variables = abstract_variables(models.get("resnet50", num_classes=10))
  bn = sum(
    count(v) for k, v in jax.tree_util.tree_flatten_with_path(variables["params"])[0] if "bn" in jax.tree_util.keystr(k)
  )
  assert count(variables["batch_stats"]) == bn == 53_120  # mean + var of every BN channel


def test_stages_strides_and_projections():
  """224x224: 112 (stem) -> 56 (pool) -> 56 / 28 / 14 / 7; a projection in the first block of every stage only;
  the stride on the 3x3 convolution (v1.5)."""
  model = models.get("resnet50", num_classes=10)
  x = jax.ShapeDtypeStruct((2, 224, 224, 3), jnp.float32)
  variables = abstract_variables(model, x.shape)
  _, state = jax.eval_shape(lambda v, x: model.apply(v, x, train=False, capture_intermediates=True), variables, x)
  inter = state["intermediates"]
  assert inter["stem_conv"]["__call__"][0].shape == (2, 112, 112, 64)
  for s, (w, n, side) in enumerate(zip(WIDTHS, BLOCKS, (56, 28, 14, 7)), start=1):
    for b in range(1, n + 1):
      block = inter[f"stage{s}_block{b}"]
      assert block["__call__"][0].shape == (2, side, side, 4 * w)
      assert block["conv2"]["__call__"][0].shape == (2, side, side, w)  # the 3x3 conv already strided
      assert block["conv1"]["__call__"][0].shape[1] == (side if b > 1 or s == 1 else 2 * side)
  params = variables["params"]
  projected = sorted(k for k, p in params.items() if "shortcut_conv" in p)
  assert projected == [f"stage{s}_block1" for s in range(1, 5)]
  assert params["stage1_block1"]["shortcut_conv"]["kernel"].shape == (1, 1, 64, 256)
  assert params["stage4_block1"]["shortcut_conv"]["kernel"].shape == (1, 1, 1024, 2048)
  assert params["head"]["kernel"].shape == (2048, 10)


def test_forward_matches_torch_small():
  """Reduced widths and depth (the same code path): same weights, same logits in eval and train mode (the shared
  helper, 1e-4), on an even input, where PyTorch's symmetric padding of the stride-2 layers differs from XLA's
  'SAME' (which pads bottom/right only)."""
  torch.manual_seed(0)
  widths, blocks = (4, 8, 8, 4), (1, 2, 1, 1)
  net = TorchImageNetResNet(widths, blocks, 5).double()
  x = np.random.default_rng(0).normal(size=(3, 32, 32, 3))
  calibrate_batch_norms(net, torch.from_numpy(x.transpose(0, 3, 1, 2)))
  model = ImageNetResNet(num_classes=5, widths=widths, blocks_per_stage=blocks)
  variables = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), torch_to_flax(net))
  assert jax.tree.structure(variables) == jax.tree.structure(abstract_variables(model, (1, 32, 32, 3)))
  assert_same_logits(net, model, variables, x)


def test_bfloat16_compute_returns_float32_logits():
  """bfloat16 compute returns float32 logits (traced only: with BN statistics of 2-8 values per channel, bf16 rounding
  moves logits of this size by up to ~1, so a closeness bound would test the inputs' conditioning, not the network).
  The real-size forward pass is compared with torchvision's own resnet50 in float64 in tests/test_pretrained.py."""
  model = models.get("resnet50", num_classes=10)
  variables = abstract_variables(model, (1, 64, 64, 3))
  bf16 = jax.eval_shape(
    lambda v, x: models.get("resnet50", num_classes=10, dtype=jnp.bfloat16).apply(v, x, train=False),
    variables,
    jax.ShapeDtypeStruct((2, 64, 64, 3), jnp.float32),
  )
  assert (bf16.shape, bf16.dtype) == ((2, 10), jnp.float32)


@pytest.fixture(scope="module")
def resnet50_built():
  """models.get('resnet50', num_classes=3) initialised by Flax and run once in train mode on 1 x 32 x 32 x 3, in one
  function compiled at XLA's backend optimisation level 0: compiling the init's random draws for 25.6M parameters
  takes ~9 s at the default level on the 2-core CPU (about as long as running it eagerly), ~3 s at level 0."""
  model = models.get("resnet50", num_classes=3)
  x = jax.random.normal(jax.random.key(1), (1, 32, 32, 3))

  def build_and_step(key):
    variables = model.init(key, jnp.zeros((1, 32, 32, 3)), train=False)
    logits, updates = model.apply(variables, x, train=True, mutable=["batch_stats"])
    return variables, logits, updates

  fast_compile = {"xla_backend_optimization_level": 0}
  return (model, *jax.jit(build_and_step, compiler_options=fast_compile)(jax.random.key(0)))


def test_init_like_torchvision(resnet50_built):
  """Convs N(0, 2 / fan_out) untruncated (kaiming_normal_, fan_out = k k C_out), every BN scale 1 / bias 0 (bn3 too:
  no zero-init of the residual branch), zero / one running statistics, head weight and bias U(+-1 / sqrt(2048))."""
  _, variables, _, _ = resnet50_built
  params = variables["params"]
  for path, fan_out in (
    (("stem_conv",), 7 * 7 * 64),
    (("stage4_block2", "conv2"), 9 * 512),
    (("stage3_block1", "conv3"), 1024),
    (("stage4_block1", "shortcut_conv"), 2048),
  ):
    node = params
    for key in path:
      node = node[key]
    kernel = np.asarray(node["kernel"])
    sigma = np.sqrt(2 / fan_out)
    assert abs(kernel.std() / sigma - 1) < 0.02 and abs(kernel.mean()) < 0.04 * sigma, path
    if kernel.size > 1e6:  # untruncated: 4.55% of draws beyond 2 sigma
      assert 0.043 < np.mean(np.abs(kernel) > 2 * sigma) < 0.048
  flat = jax.tree_util.tree_flatten_with_path(params)[0]
  bn = {jax.tree_util.keystr(k): np.asarray(v) for k, v in flat if "bn" in jax.tree_util.keystr(k)}
  assert len(bn) == 2 * 53  # 53 BNs: stem, 3 per block (16 blocks), 4 projections
  assert all(np.all(v == (1 if k.endswith("['scale']") else 0)) for k, v in bn.items())
  assert all(
    np.all(v["mean"] == 0) and np.all(v["var"] == 1)
    for v in jax.tree.leaves(variables["batch_stats"], is_leaf=lambda n: isinstance(n, dict) and "mean" in n)
  )
  bound = 1 / np.sqrt(2048)
  head = params["head"]
  assert np.max(np.abs(head["kernel"])) <= bound and np.max(np.abs(head["bias"])) <= bound
  assert abs(np.std(head["kernel"]) / (bound / np.sqrt(3)) - 1) < 0.05


def test_registry_and_train_mode_smoke(resnet50_built):
  """models.get('resnet50', num_classes=3) builds, and one train-mode forward on 1 x 32 x 32 x 3 gives finite float32
  logits [1, 3] and moved running statistics of the same structure."""
  model, variables, logits, updates = resnet50_built
  assert type(model) is ResNet50 and models.MODELS["resnet50"] is ResNet50
  assert (tuple(model.widths), tuple(model.blocks_per_stage), model.expansion) == (WIDTHS, BLOCKS, 4)
  assert logits.shape == (1, 3) and logits.dtype == jnp.float32 and np.isfinite(logits).all()
  assert jax.tree.structure(updates["batch_stats"]) == jax.tree.structure(variables["batch_stats"])
  assert not np.allclose(updates["batch_stats"]["stem_bn"]["mean"], 0)  # moved towards the batch statistics
  with pytest.raises(ValueError, match=r"ResNet50 needs images \[B, H, W, C\], got shape \(1, 3072\)"):
    jax.eval_shape(lambda: model.apply(variables, jnp.zeros((1, 3072)), train=False))
