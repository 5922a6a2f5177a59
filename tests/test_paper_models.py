"""Tests for the paper-scale models: PreActResNet (standard and Joint Optimization), CIFAR-style ResNet-18/34 and
APL's 8-layer CNN (apl_cnn, apl_cnn_mnist).

Parameter counts are checked against a closed form written here from the architecture arithmetic, against the
published counts of kuangliu/pytorch-cifar, and against a small independent PyTorch definition; the forward pass of
small configurations is checked number for number against that PyTorch definition with the same weights. The big
networks are only traced abstractly (`jax.eval_shape`); a few real forward passes run at batch 2.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from noisy_jax import models
from noisy_jax.models.preact_resnet import PreActResNet
from noisy_jax.models.preact_resnet import PreActResNet32
from noisy_jax.models.preact_resnet import PreActResNetJO
from noisy_jax.models.resnet import ResNet
from noisy_jax.models.resnet import ResNet18
from noisy_jax.models.resnet import ResNet34

CIFAR = jax.ShapeDtypeStruct((2, 32, 32, 3), jnp.float32)
ARCH = {  # name -> (class, widths, blocks per stage, kind)
  "preact_resnet32": (PreActResNet32, (16, 32, 64), (5, 5, 5), "preact"),
  "preact_resnet_jo": (PreActResNetJO, (32, 64, 128), (5, 5, 5), "preact_jo"),
  "resnet18": (ResNet18, (64, 128, 256, 512), (2, 2, 2, 2), "resnet"),
  "resnet34": (ResNet34, (64, 128, 256, 512), (3, 4, 6, 3), "resnet"),
}


def assert_same_logits(net, model, variables, x):
  """The torch module `net` and the flax `model` with `variables` give the same logits on NHWC images `x`, in eval
  and in train mode (batch statistics), to 1e-4."""
  xt = torch.from_numpy(x.transpose(0, 3, 1, 2))
  for train in (False, True):
    net.train(train)
    with torch.no_grad():
      want = net(xt.clone()).numpy()
    got = model.apply(variables, jnp.asarray(x, jnp.float32), train=train, mutable=["batch_stats"] if train else False)
    got = got[0] if train else got
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


def abstract_variables(model, x=CIFAR):
  return jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros(x.shape, x.dtype), train=False))


def count(tree) -> int:
  return int(sum(np.prod(leaf.shape) for leaf in jax.tree.leaves(tree)))


def closed_form_count(kind: str, widths, blocks, num_classes: int, in_channels: int = 3) -> int:
  """Trainable parameters from the architecture arithmetic (BN: scale + bias = 2 per channel)."""
  total = 9 * in_channels * widths[0]  # bias-free 3x3 stem conv
  if kind == "resnet":
    total += 2 * widths[0]  # stem BN
  c_in = widths[0]
  for stage, (w, n) in enumerate(zip(widths, blocks)):
    for b in range(n):
      total += 9 * c_in * w + 9 * w * w + 2 * w + (2 * w if kind == "resnet" else 2 * c_in)
      shape_changes = c_in != w or (stage > 0 and b == 0)
      if shape_changes or (kind == "preact_jo" and b == 0):
        total += c_in * w + (2 * w if kind == "resnet" else 0)  # 1x1 projection (+ BN in the ResNet)
      c_in = w
  if kind != "resnet":
    total += 2 * widths[-1]  # final BN
  return total + widths[-1] * num_classes + num_classes


# A small PyTorch definition written for these tests (kuangliu/pytorch-cifar layout; JO `net.py` layout), with
# attribute names equal to the Flax module names so that weights can be copied one to one.
class TorchBasic(torch.nn.Module):
  def __init__(self, c_in, w, stride):
    super().__init__()
    self.conv1, self.bn1 = torch.nn.Conv2d(c_in, w, 3, stride, 1, bias=False), torch.nn.BatchNorm2d(w)
    self.conv2, self.bn2 = torch.nn.Conv2d(w, w, 3, 1, 1, bias=False), torch.nn.BatchNorm2d(w)
    self.proj = stride != 1 or c_in != w
    if self.proj:
      self.shortcut_conv = torch.nn.Conv2d(c_in, w, 1, stride, 0, bias=False)
      self.shortcut_bn = torch.nn.BatchNorm2d(w)

  def forward(self, x):
    h = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
    return torch.relu(h + (self.shortcut_bn(self.shortcut_conv(x)) if self.proj else x))


class TorchPreAct(torch.nn.Module):
  def __init__(self, c_in, w, stride, project):
    super().__init__()
    self.bn1, self.conv1 = torch.nn.BatchNorm2d(c_in), torch.nn.Conv2d(c_in, w, 3, stride, 1, bias=False)
    self.bn2, self.conv2 = torch.nn.BatchNorm2d(w), torch.nn.Conv2d(w, w, 3, 1, 1, bias=False)
    self.proj = project or stride != 1 or c_in != w
    if self.proj:
      self.shortcut_conv = torch.nn.Conv2d(c_in, w, 1, stride, 0, bias=False)

  def forward(self, x):
    a = torch.relu(self.bn1(x))
    h = self.conv2(torch.relu(self.bn2(self.conv1(a))))
    return h + (self.shortcut_conv(a) if self.proj else x)


class TorchNet(torch.nn.Module):
  def __init__(self, kind, widths, blocks, num_classes):
    super().__init__()
    self.kind = kind
    self.stem_conv = torch.nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
    if kind == "resnet":
      self.stem_bn = torch.nn.BatchNorm2d(widths[0])
    self.blocks = torch.nn.ModuleDict()
    c_in = widths[0]
    for s, (w, n) in enumerate(zip(widths, blocks)):
      for b in range(n):
        stride = 2 if s > 0 and b == 0 else 1
        project = kind == "preact_jo" and b == 0
        self.blocks[f"stage{s + 1}_block{b + 1}"] = (
          TorchBasic(c_in, w, stride) if kind == "resnet" else TorchPreAct(c_in, w, stride, project)
        )
        c_in = w
    if kind != "resnet":
      self.final_bn = torch.nn.BatchNorm2d(c_in)
    self.head = torch.nn.Linear(c_in, num_classes)

  def forward(self, x):
    x = self.stem_conv(x)
    if self.kind == "resnet":
      x = torch.relu(self.stem_bn(x))
    for block in self.blocks.values():
      x = block(x)
    if self.kind != "resnet":
      x = torch.relu(self.final_bn(x))
    return self.head(x.mean(dim=(2, 3)))


def torch_to_flax(net: TorchNet):
  """Flax variables {'params', 'batch_stats'} holding the torch net's weights (conv OIHW -> HWIO)."""
  params, stats = {}, {}
  for name, mod in net.named_modules():
    if not name:
      continue
    path = name.replace("blocks.", "").split(".")
    if isinstance(mod, torch.nn.Conv2d):
      leaf = {"kernel": mod.weight.detach().numpy().transpose(2, 3, 1, 0)}
    elif isinstance(mod, torch.nn.BatchNorm2d):
      leaf = {"scale": mod.weight.detach().numpy(), "bias": mod.bias.detach().numpy()}
      stats_node = stats
      for key in path[:-1]:
        stats_node = stats_node.setdefault(key, {})
      stats_node[path[-1]] = {"mean": mod.running_mean.numpy(), "var": mod.running_var.numpy()}
    elif isinstance(mod, torch.nn.Linear):
      leaf = {"kernel": mod.weight.detach().numpy().T, "bias": mod.bias.detach().numpy()}
    else:
      continue
    node = params
    for key in path[:-1]:
      node = node.setdefault(key, {})
    node[path[-1]] = leaf
  return {"params": params, "batch_stats": stats}


@pytest.mark.parametrize("name", sorted(ARCH))
@pytest.mark.parametrize("num_classes", [10, 100])
def test_parameter_count_matches_closed_form(name, num_classes):
  cls, widths, blocks, kind = ARCH[name]
  variables = abstract_variables(models.get(name, num_classes=num_classes))
  assert count(variables["params"]) == closed_form_count(kind, widths, blocks, num_classes)
  # Running statistics: mean and var per BN channel, i.e. as many as the BN scale + bias parameters.
  bn_params = sum(
    count(v) for k, v in jax.tree_util.tree_flatten_with_path(variables["params"])[0] if "bn" in jax.tree_util.keystr(k)
  )
  assert count(variables["batch_stats"]) == bn_params > 0


def test_parameter_counts_published():
  """kuangliu/pytorch-cifar's CIFAR ResNet-18/34 at 10 classes; the two PreAct counts are this library's."""
  got = {name: count(abstract_variables(models.get(name, num_classes=10))["params"]) for name in ARCH}
  assert got == {
    "resnet18": 11_173_962,
    "resnet34": 21_282_122,
    "preact_resnet32": 466_714,
    "preact_resnet_jo": 1_861_162,
  }


@pytest.mark.parametrize("name", sorted(ARCH))
def test_parameter_count_matches_torch_definition(name):
  _, widths, blocks, kind = ARCH[name]
  net = TorchNet(kind, widths, blocks, 10)
  n_torch = sum(p.numel() for p in net.parameters() if p.requires_grad)
  assert count(abstract_variables(models.get(name, num_classes=10))["params"]) == n_torch


@pytest.mark.parametrize(
  "kind,widths,blocks",
  [
    ("resnet", (4, 8, 8), (1, 2, 1)),
    ("preact", (4, 8, 8), (2, 1, 1)),
    ("preact_jo", (4, 4, 8), (2, 1, 2)),
  ],
)
def test_forward_matches_torch(kind, widths, blocks):
  """Same weights, same logits as the PyTorch definition, in eval and in train mode. The 8x8 input is even, where
  PyTorch's symmetric padding of a stride-2 3x3 convolution differs from XLA's 'SAME' (bottom/right only)."""
  torch.manual_seed(0)
  net = TorchNet(kind, widths, blocks, 5).double()
  for mod in net.modules():  # non-trivial BN affine parameters and running statistics
    if isinstance(mod, torch.nn.BatchNorm2d):
      with torch.no_grad():
        mod.weight.uniform_(0.5, 1.5), mod.bias.uniform_(-0.5, 0.5)
        mod.running_mean.uniform_(-0.5, 0.5), mod.running_var.uniform_(0.5, 2.0)
  x = np.random.default_rng(0).normal(size=(3, 8, 8, 3))
  if kind == "resnet":
    model = ResNet(num_classes=5, widths=widths, blocks_per_stage=blocks)
  else:
    model = PreActResNet(num_classes=5, widths=widths, blocks_per_stage=blocks, project_first_block=kind == "preact_jo")
  variables = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), torch_to_flax(net))
  assert jax.tree.structure(variables) == jax.tree.structure(
    jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 8, 8, 3)), train=False))
  )
  assert_same_logits(net, model, variables, x)


@pytest.mark.parametrize("name", sorted(ARCH))
def test_output_shape_and_dtype(name):
  for num_classes in (10, 100):
    model = models.get(name, num_classes=num_classes)
    variables = abstract_variables(model)
    out = jax.eval_shape(lambda v, x: model.apply(v, x, train=False), variables, CIFAR)
    assert (out.shape, out.dtype) == ((2, num_classes), jnp.float32)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(variables))


@pytest.mark.parametrize(
  "name,hw,maps",
  [
    ("preact_resnet32", 32, [32, 16, 8]),
    ("preact_resnet_jo", 32, [32, 16, 8]),
    ("resnet18", 32, [32, 16, 8, 4]),
    ("resnet34", 32, [32, 16, 8, 4]),
    ("resnet18", 28, [28, 14, 7, 4]),  # FASHION-MNIST size: ceil at stride 2
  ],
)
def test_stride_and_width_schedule(name, hw, maps):
  _, widths, blocks, _ = ARCH[name]
  model = models.get(name, num_classes=10)
  x = jax.ShapeDtypeStruct((2, hw, hw, 1 if hw == 28 else 3), jnp.float32)
  variables = abstract_variables(model, x)
  _, state = jax.eval_shape(lambda v, x: model.apply(v, x, train=False, capture_intermediates=True), variables, x)
  inter = state["intermediates"]
  assert inter["stem_conv"]["__call__"][0].shape == (2, hw, hw, widths[0])
  names = []
  for s, (w, n, m) in enumerate(zip(widths, blocks, maps)):
    for b in range(n):
      names.append(f"stage{s + 1}_block{b + 1}")
      assert inter[names[-1]]["__call__"][0].shape == (2, m, m, w), names[-1]
  assert sorted(k for k in inter if k.startswith("stage")) == sorted(names)


@pytest.mark.parametrize(
  "name,projected",
  [
    ("preact_resnet32", {"stage2_block1": (16, 32), "stage3_block1": (32, 64)}),
    ("preact_resnet_jo", {"stage1_block1": (32, 32), "stage2_block1": (32, 64), "stage3_block1": (64, 128)}),
    ("resnet18", {"stage2_block1": (64, 128), "stage3_block1": (128, 256), "stage4_block1": (256, 512)}),
    ("resnet34", {"stage2_block1": (64, 128), "stage3_block1": (128, 256), "stage4_block1": (256, 512)}),
  ],
)
def test_projection_shortcuts(name, projected):
  """The JO network projects in every stage's first block (also 32 -> 32 at stride 1), the others only where the
  shape changes; only the CIFAR ResNet normalises its projection."""
  params = abstract_variables(models.get(name, num_classes=10))["params"]
  found = {
    block: (p["shortcut_conv"]["kernel"].shape, "shortcut_bn" in p)
    for block, p in params.items()
    if block.startswith("stage") and "shortcut_conv" in p
  }
  assert found == {block: ((1, 1, c_in, w), name.startswith("resnet")) for block, (c_in, w) in projected.items()}


def test_preact_train_mode_updates_batch_stats_and_bf16_is_finite():
  """Real forward passes of preact_resnet32 at batch 2: the first BN's running statistics move by exactly
  momentum 0.9 towards the batch statistics of the stem output (recomputed here with lax.conv); eval mode leaves
  them; bfloat16 compute gives finite float32 logits from float32 parameters. (Run eagerly: compiling these
  graphs with XLA on a 2-core CPU takes longer than running them op by op.)"""
  model = models.get("preact_resnet32", num_classes=10)
  x = jax.random.normal(jax.random.key(1), (2, 32, 32, 3))
  variables = model.init(jax.random.key(0), x, train=False)
  logits, new = model.apply(variables, x, train=True, mutable=["batch_stats"])
  assert logits.shape == (2, 10) and logits.dtype == jnp.float32 and np.isfinite(logits).all()
  stem = jax.lax.conv_general_dilated(
    x, variables["params"]["stem_conv"]["kernel"], (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC")
  )
  got = new["batch_stats"]["stage1_block1"]["bn1"]
  np.testing.assert_allclose(got["mean"], 0.1 * stem.mean(axis=(0, 1, 2)), rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(got["var"], 0.9 + 0.1 * stem.var(axis=(0, 1, 2)), rtol=1e-4, atol=1e-6)
  assert jax.tree.structure(new["batch_stats"]) == jax.tree.structure(variables["batch_stats"])

  bf16 = models.get("preact_resnet32", num_classes=10, dtype=jnp.bfloat16)
  out = bf16.apply(variables, x, train=False)
  assert out.dtype == jnp.float32 and np.isfinite(out).all()
  ref = model.apply(variables, x, train=False)
  assert np.max(np.abs(out - ref)) < 0.1 * (1 + np.max(np.abs(ref)))  # same function at bf16 precision


def test_conv_init_is_untruncated_he_normal():
  """Chainer's HeNormal (the JO code): N(0, 2 / fan_in), not truncated (4.55% of draws beyond 2 sigma). Checked on
  a one-block PreActResNet of width 128 (the JO network's last stage; same code path, cheaper to initialise)."""
  model = PreActResNet(num_classes=2, widths=(128,), blocks_per_stage=(1,), project_first_block=True)
  params = model.init(jax.random.key(0), jnp.zeros((1, 4, 4, 3)), train=False)["params"]
  kernel = np.asarray(params["stage1_block1"]["conv2"]["kernel"])  # 3 x 3 x 128 x 128
  sigma = np.sqrt(2 / (9 * 128))
  assert abs(kernel.std() / sigma - 1) < 0.01 and abs(kernel.mean()) < 0.01 * sigma
  assert 0.040 < np.mean(np.abs(kernel) > 2 * sigma) < 0.051


def test_registry_and_bad_arguments():
  for name, (cls, widths, blocks, _) in ARCH.items():
    model = models.get(name, num_classes=7)
    assert type(model) is cls and model.num_classes == 7
    assert tuple(model.widths) == widths and tuple(model.blocks_per_stage) == blocks
    assert models.MODELS[name] is cls
  assert models.get("resnet18", num_classes=3, dtype=jnp.bfloat16).dtype == jnp.bfloat16
  with pytest.raises(ValueError, match="resnet101.*'resnet18'"):
    models.get("resnet101", num_classes=10)
  with pytest.raises(ValueError, match="num_classes"):
    models.get("resnet18", num_classes=0)
  with pytest.raises(ValueError, match=r"widths=\(8, 16\) and blocks_per_stage=\(1,\)"):
    jax.eval_shape(
      lambda: ResNet(num_classes=2, widths=(8, 16), blocks_per_stage=(1,)).init(
        jax.random.key(0), jnp.zeros((1, 8, 8, 3)), train=False
      )
    )
  with pytest.raises(ValueError, match=r"needs images \[B, H, W, C\], got shape \(2, 3072\)"):
    jax.eval_shape(lambda: PreActResNet32(num_classes=2).init(jax.random.key(0), jnp.zeros((2, 3072)), train=False))


# ---------------------------------------------------------------------------------------------------------------
# APL's 8-layer CNN (Ma et al., ICML 2020; HanxunH/Active-Passive-Losses@2d18de6 models.py `ToyModel`)

APL = {  # name -> (widths, convs per stage, dense size, input [H, W, C])
  "apl_cnn": ((64, 128, 196), 2, 256, (32, 32, 3)),
  "apl_cnn_mnist": ((32, 64), 1, 128, (28, 28, 1)),
}


def apl_closed_form_count(widths, convs, dense, hw, in_channels, num_classes) -> int:
  """Convs 3x3 with bias, BN (2 per channel) after every conv and after fc1, fc1 and fc2 with bias."""
  total, c_in = 0, in_channels
  for w in widths:
    for _ in range(convs):
      total += 9 * c_in * w + w + 2 * w
      c_in = w
    hw //= 2
  flat = hw * hw * c_in
  return total + flat * dense + dense + 2 * dense + dense * num_classes + num_classes


class TorchAPLCNN(torch.nn.Module):
  """APL's ToyModel written from its description for these tests (NCHW, flatten C-major), any widths."""

  def __init__(self, widths, convs, dense, hw, in_channels, num_classes):
    super().__init__()
    self.layers = torch.nn.ModuleList()
    c_in = in_channels
    for w in widths:
      for _ in range(convs):
        self.layers.append(torch.nn.Conv2d(c_in, w, 3, padding=1))
        self.layers.append(torch.nn.BatchNorm2d(w))
        self.layers.append(torch.nn.ReLU())
        c_in = w
      self.layers.append(torch.nn.MaxPool2d(2, 2))
      hw //= 2
    self.fc1, self.fc1_bn, self.fc2 = (
      torch.nn.Linear(hw * hw * c_in, dense),
      torch.nn.BatchNorm1d(dense),
      torch.nn.Linear(dense, num_classes),
    )

  def forward(self, x):
    for layer in self.layers:
      x = layer(x)
    return self.fc2(torch.relu(self.fc1_bn(self.fc1(x.flatten(1)))))


def apl_torch_to_flax(net: TorchAPLCNN, convs: int):
  """Flax variables of the torch net; fc1's rows permuted from NCHW flatten order to NHWC."""
  params, stats = {}, {}
  t = lambda a: a.detach().numpy()

  def add_bn(name, mod):
    params[name] = {"scale": t(mod.weight), "bias": t(mod.bias)}
    stats[name] = {"mean": t(mod.running_mean), "var": t(mod.running_var)}

  convs_bns = [m for m in net.layers if isinstance(m, (torch.nn.Conv2d, torch.nn.BatchNorm2d))]  # conv, bn, conv, ..
  for i, mod in enumerate(convs_bns):
    stage, layer = divmod(i // 2, convs)
    if isinstance(mod, torch.nn.Conv2d):
      params[f"block{stage + 1}_conv{layer + 1}"] = {"kernel": t(mod.weight).transpose(2, 3, 1, 0), "bias": t(mod.bias)}
    else:
      add_bn(f"block{stage + 1}_bn{layer + 1}", mod)
  add_bn("fc1_bn", net.fc1_bn)
  c = convs_bns[-2].out_channels
  hw = int(round((net.fc1.in_features // c) ** 0.5))
  w1 = t(net.fc1.weight).reshape(-1, c, hw, hw).transpose(2, 3, 1, 0).reshape(hw * hw * c, -1)
  params["fc1"] = {"kernel": w1, "bias": t(net.fc1.bias)}
  params["fc2"] = {"kernel": t(net.fc2.weight).T, "bias": t(net.fc2.bias)}
  return {"params": params, "batch_stats": stats}


@pytest.mark.parametrize("name", sorted(APL))
def test_apl_cnn_parameter_count(name):
  widths, convs, dense, (hw, _, c) = APL[name]
  variables = abstract_variables(models.get(name, num_classes=10), jax.ShapeDtypeStruct((2, hw, hw, c), jnp.float32))
  n = count(variables["params"])
  assert n == apl_closed_form_count(widths, convs, dense, hw, c, 10)
  net = TorchAPLCNN(widths, convs, dense, hw, c, 10)
  assert n == sum(p.numel() for p in net.parameters() if p.requires_grad)
  assert n == {"apl_cnn": 1_639_794, "apl_cnn_mnist": 422_090}[name]  # worked out by hand from the layout
  # Running statistics: mean and var of every BN (2 x the BN parameters).
  bn = sum(count(v) for k, v in variables["params"].items() if "bn" in k)
  assert count(variables["batch_stats"]) == bn > 0


@pytest.mark.parametrize("name", sorted(APL))
def test_apl_cnn_shapes(name):
  widths, convs, dense, (hw, _, c) = APL[name]
  model = models.get(name, num_classes=7)
  x = jax.ShapeDtypeStruct((2, hw, hw, c), jnp.float32)
  variables = abstract_variables(model, x)
  out = jax.eval_shape(lambda v, x: model.apply(v, x, train=False), variables, x)
  assert (out.shape, out.dtype) == ((2, 7), jnp.float32)
  final = hw // 2 ** len(widths)  # 4 (CIFAR: 4*4*196 = 3136 inputs of fc1), 7 (MNIST: 7*7*64)
  assert variables["params"]["fc1"]["kernel"].shape == (final * final * widths[-1], dense)
  assert variables["params"]["fc2"]["kernel"].shape == (dense, 7)
  last_in = widths[-1] if convs > 1 else widths[-2]
  assert variables["params"][f"block{len(widths)}_conv{convs}"]["kernel"].shape == (3, 3, last_in, widths[-1])
  assert sorted(k for k in variables["params"] if "conv" in k) == sorted(
    f"block{s + 1}_conv{i + 1}" for s in range(len(widths)) for i in range(convs)
  )


def test_apl_cnn_forward_matches_torch():
  """Same weights (fc1's rows permuted NCHW -> NHWC), same logits in eval and train mode, small widths."""
  torch.manual_seed(0)
  widths, convs, dense = (4, 8, 6), 2, 16
  net = TorchAPLCNN(widths, convs, dense, 16, 3, 5).double()
  for mod in net.modules():
    if isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.BatchNorm1d)):
      with torch.no_grad():
        mod.weight.uniform_(0.5, 1.5), mod.bias.uniform_(-0.5, 0.5)
        mod.running_mean.uniform_(-0.5, 0.5), mod.running_var.uniform_(0.5, 2.0)
  model = models.APLCNN(num_classes=5, widths=widths, convs_per_stage=convs, dense_size=dense)
  variables = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), apl_torch_to_flax(net, convs))
  assert jax.tree.structure(variables) == jax.tree.structure(
    abstract_variables(model, jax.ShapeDtypeStruct((1, 16, 16, 3), jnp.float32))
  )
  x = np.random.default_rng(0).normal(size=(4, 16, 16, 3))
  assert_same_logits(net, model, variables, x)


def test_apl_cnn_init_matches_pytorch():
  """Conv kernels U(+-sqrt(6 / fan_in)) (kaiming_uniform_, relu gain), dense kernels U(+-sqrt(6 / (fan_in +
  fan_out))) (xavier_uniform_), biases U(+-1 / sqrt(fan_in)) (PyTorch's default), BN scale 1 / bias 0, zero / one
  running statistics. Uniform draws: max |w| just below the bound, std = bound / sqrt(3)."""
  model = models.get("apl_cnn", num_classes=10)
  variables = jax.jit(lambda k: model.init(k, jnp.zeros((1, 32, 32, 3)), train=False))(jax.random.key(0))
  params = variables["params"]

  def check_uniform(a, bound, tol):
    a = np.asarray(a)
    assert np.max(np.abs(a)) <= bound
    assert np.max(np.abs(a)) > 0.97 * bound if a.size > 1000 else True
    assert abs(a.std() / (bound / np.sqrt(3)) - 1) < tol and abs(a.mean()) < tol * bound

  c_in = 3
  for s, w in enumerate((64, 128, 196), start=1):
    for i in (1, 2):
      conv = params[f"block{s}_conv{i}"]
      fan_in = 9 * c_in
      check_uniform(conv["kernel"], np.sqrt(6 / fan_in), 0.02 if conv["kernel"].size > 10_000 else 0.1)
      check_uniform(conv["bias"], 1 / np.sqrt(fan_in), 0.3)
      bn = params[f"block{s}_bn{i}"]
      assert np.all(bn["scale"] == 1) and np.all(bn["bias"] == 0)
      c_in = w
  check_uniform(params["fc1"]["kernel"], np.sqrt(6 / (3136 + 256)), 0.01)
  check_uniform(params["fc1"]["bias"], 1 / np.sqrt(3136), 0.3)
  check_uniform(params["fc2"]["kernel"], np.sqrt(6 / (256 + 10)), 0.1)
  assert np.max(np.abs(params["fc2"]["bias"])) <= 1 / np.sqrt(256)
  stats = variables["batch_stats"]
  assert all(np.all(v["mean"] == 0) and np.all(v["var"] == 1) for v in stats.values())


def test_apl_cnn_registry_and_bad_input():
  assert models.MODELS["apl_cnn"] is models.APLCNN and models.MODELS["apl_cnn_mnist"] is models.APLCNNMnist
  model = models.get("apl_cnn_mnist", num_classes=3, bn_axis_name="batch")
  assert (tuple(model.widths), model.convs_per_stage, model.dense_size, model.bn_axis_name) == (
    (32, 64),
    1,
    128,
    "batch",
  )
  with pytest.raises(ValueError, match=r"APLCNN needs images \[B, H, W, C\], got shape \(2, 3072\)"):
    abstract_variables(models.get("apl_cnn", num_classes=10), jax.ShapeDtypeStruct((2, 3072), jnp.float32))
