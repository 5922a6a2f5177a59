"""Pretrained weights (noisy_jax.models.pretrained, noisy_jax.experiment.pretrained, `config.model.pretrained`).

torchvision's own ResNet-18 and ResNet-50, with random weights and BatchNorm running statistics that are not the
identity, are saved as `.pth` (torch.save) and as `.safetensors` (the safetensors library) and read back into
noisy_jax's `imagenet_resnet18` / `resnet50`; their eval-mode logits are compared with torchvision's on the same
images: to 1e-10 of the logits' scale in float64 (the mapping is exact) and to 2e-4 in float32 (summation order in
50 layers). Then a run fine-tunes from a torchvision ResNet file on mock TFDS CIFAR-10 (its head re-initialised for
10 classes), and its workdir serves as pretrained weights in turn. The errors name the file and the first parameter
that does not fit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
import safetensors.numpy
import torch

from noisy_jax import models
from noisy_jax.experiment import export
from noisy_jax.experiment import pretrained as run_pretrained
from noisy_jax.models import pretrained
import torchvision_reference  # noqa: F401  (torchvision importable beside a CPU torch)

# isort: split
# torchvision after torchvision_reference, which makes it importable beside a CPU torch.
import torchvision

SIZE = 64  # ImageNet networks take any size; 64x64 keeps the test fast (maps 32 -> 16 -> 16 / 8 / 4 / 2)


def torchvision_network(builder, seed: int = 0):
  """A torchvision network with random weights whose BatchNorm layers carry non-trivial scales, biases and running
  statistics (one train-mode pass with momentum None sets the statistics to that batch's), in eval mode."""
  torch.manual_seed(seed)
  network = builder(weights=None)
  for module in network.modules():
    if isinstance(module, torch.nn.BatchNorm2d):
      torch.nn.init.uniform_(module.weight, 0.5, 1.5)
      torch.nn.init.uniform_(module.bias, -0.2, 0.2)
      module.momentum = None
  network.train()
  with torch.no_grad():
    network(torch.randn(8, 3, SIZE, SIZE))
  return network.eval()


def state_dict_arrays(network) -> dict[str, np.ndarray]:
  return {name: value.detach().numpy().copy() for name, value in network.state_dict().items()}


def template(model, dtype=jnp.float32):
  shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, SIZE, SIZE, 3), dtype), train=False))
  return jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes)


@pytest.fixture(scope="module")
def resnet18_files(tmp_path_factory):
  """torchvision's ResNet-18 (random weights) as .pth and .safetensors, and the network itself."""
  directory = tmp_path_factory.mktemp("resnet18")
  network = torchvision_network(torchvision.models.resnet18)
  pth, st = str(directory / "resnet18.pth"), str(directory / "resnet18.safetensors")
  torch.save(network.state_dict(), pth)
  safetensors.numpy.save_file(state_dict_arrays(network), st)
  return network, pth, st


def test_safetensors_and_pth_read_the_same_arrays(resnet18_files):
  network, pth, st = resnet18_files
  expected = state_dict_arrays(network)
  for path in (pth, st):
    got = pretrained.read_state_dict(path)
    assert set(got) == set(expected)
    for name, value in expected.items():
      np.testing.assert_array_equal(got[name], value, err_msg=f"{path}: {name}")
      assert got[name].dtype == value.dtype


def test_resnet18_logits_equal_torchvision(resnet18_files):
  """float32: the network read from .safetensors gives torchvision's eval-mode logits (1,000 classes)."""
  network, _, st = resnet18_files
  x = torch.randn(4, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(1))
  with torch.no_grad():
    expected = network(x).numpy()
  model = models.get("imagenet_resnet18", num_classes=1000)
  variables, report = pretrained.fit_into(template(model), pretrained.StoredWeights(st, pretrained.read_state_dict(st)))
  assert report == {"source": st, "loaded": 102, "head": "loaded", "stored_classes": 1000}
  got = np.asarray(model.apply(variables, jnp.asarray(x.numpy().transpose(0, 2, 3, 1)), train=False))
  scale = np.abs(expected).max()
  assert np.abs(got - expected).max() <= 2e-4 * scale, np.abs(got - expected).max()


def test_resnet50_logits_equal_torchvision_float64(tmp_path):
  """float64 on both sides: torchvision's ResNet-50 (.pth) and noisy_jax's agree to 1e-10 of the logits' scale, so
  every weight lands where it belongs (a transposed kernel or a swapped BatchNorm statistic would show at 1e-1)."""
  network = torchvision_network(torchvision.models.resnet50).double()
  path = str(tmp_path / "resnet50.pth")
  torch.save({"state_dict": {f"module.{k}": v for k, v in network.state_dict().items()}}, path)  # DataParallel's
  x = torch.randn(2, 3, SIZE, SIZE, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
  with torch.no_grad():
    expected = network(x).numpy()
  with jax.enable_x64(True):
    model = models.get("resnet50", num_classes=1000)
    variables, report = pretrained.fit_into(
      template(model, jnp.float64), pretrained.StoredWeights(path, pretrained.read_state_dict(path))
    )
    got = np.asarray(model.apply(variables, jnp.asarray(x.numpy().transpose(0, 2, 3, 1)), train=False))
  assert report["loaded"] == 267 and got.dtype == np.float64
  assert np.abs(got - expected).max() <= 1e-10 * np.abs(expected).max()


def test_head_is_initialised_for_another_class_count(resnet18_files):
  _, _, st = resnet18_files
  model = models.get("imagenet_resnet18", num_classes=10)
  fresh = template(model)
  fresh["params"]["head"] = {"kernel": np.full((512, 10), 0.5, np.float32), "bias": np.full((10,), -1.0, np.float32)}
  variables, report = pretrained.fit_into(fresh, pretrained.StoredWeights(st, pretrained.read_state_dict(st)))
  assert report["head"] == "initialised" and report["stored_classes"] == 1000 and report["loaded"] == 100
  np.testing.assert_array_equal(variables["params"]["head"]["kernel"], fresh["params"]["head"]["kernel"])
  np.testing.assert_array_equal(variables["params"]["head"]["bias"], fresh["params"]["head"]["bias"])
  stored = pretrained.read_state_dict(st)
  np.testing.assert_array_equal(
    variables["params"]["stage2_block1"]["shortcut_conv"]["kernel"],
    stored["layer2.0.downsample.0.weight"].transpose(2, 3, 1, 0),
  )
  np.testing.assert_array_equal(variables["batch_stats"]["stem_bn"]["var"], stored["bn1.running_var"])


@pytest.mark.parametrize(
  "name, builder",
  [("imagenet_resnet18", torchvision.models.resnet18), ("imagenet_resnet34", torchvision.models.resnet34)],
)
def test_parameter_count_equals_torchvision(name, builder):
  """Trainable parameters (BN scale and bias, not running statistics) at 1,000 classes: 11,689,512 and 21,797,672."""
  expected = sum(p.numel() for p in builder(weights=None).parameters())
  shapes = template(models.get(name, num_classes=1000))["params"]
  assert sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(shapes)) == expected
  assert expected == {"imagenet_resnet18": 11_689_512, "imagenet_resnet34": 21_797_672}[name]


def test_torch_names():
  assert pretrained.torch_name(("params", "stem_conv", "kernel")) == ("conv1.weight", True)
  assert pretrained.torch_name(("batch_stats", "stage4_block2", "bn3", "mean")) == ("layer4.1.bn3.running_mean", False)
  assert pretrained.torch_name(("params", "stage3_block1", "shortcut_bn", "scale")) == (
    "layer3.0.downsample.1.weight",
    False,
  )
  assert pretrained.torch_name(("params", "head", "kernel")) == ("fc.weight", True)
  with pytest.raises(ValueError, match="block_conv"):
    pretrained.torch_name(("params", "block_conv", "kernel"))


def test_errors_name_the_file_and_the_parameter(resnet18_files, tmp_path):
  network, pth, st = resnet18_files
  model = models.get("imagenet_resnet18", num_classes=1000)
  fresh = template(model)
  arrays = state_dict_arrays(network)

  def fit(tensors, source="f.safetensors"):
    return pretrained.fit_into(fresh, pretrained.StoredWeights(source, tensors))

  with pytest.raises(ValueError, match=r"f\.safetensors.*stage1_block1/conv1/kernel \(layer1\.0\.conv1\.weight\)"):
    fit({k: v for k, v in arrays.items() if k != "layer1.0.conv1.weight"})
  bad = dict(arrays, **{"layer3.1.conv2.weight": np.zeros((256, 256, 1, 1), np.float32)})
  with pytest.raises(ValueError, match=r"layer3\.1\.conv2\.weight has shape \(1, 1, 256, 256\).*\(3, 3, 256, 256\)"):
    fit(bad)
  resnet34 = state_dict_arrays(torchvision.models.resnet34(weights=None))
  with pytest.raises(ValueError, match=r"stored variables the network does not have: layer1\.2\.bn1\.bias"):
    fit(resnet34)
  text = tmp_path / "notes.pth"
  text.write_text("not weights")
  with pytest.raises(ValueError, match="notes.pth is not a PyTorch state_dict"):
    pretrained.read_state_dict(str(text))
  broken = tmp_path / "broken.safetensors"
  broken.write_bytes((1 << 40).to_bytes(8, "little") + b"{}")
  with pytest.raises(ValueError, match="broken.safetensors is not a safetensors file"):
    pretrained.read_state_dict(str(broken))
  npz = tmp_path / "weights.npz"
  npz.write_bytes(b"")
  with pytest.raises(ValueError, match=r"weights\.npz.*unknown file type; readable: \.safetensors, \.pth"):
    pretrained.read_state_dict(str(npz))
  with pytest.raises(FileNotFoundError, match="missing.pth"):
    pretrained.read_state_dict(str(tmp_path / "missing.pth"))


# One fine-tuning run of a .pth file in its own process, compiled with the caller's XLA flags: under the suite's
# LLVM optimisation level 0 (tests/conftest.py) a ResNet's train step executes ~10x slower. The file is torchvision's
# ResNet class with one BasicBlock per stage (half of ResNet-18, same layout and names), for a shorter compile.
FINE_TUNE = """
import sys
import tensorflow_datasets as tfds
from experiments.configs import tiny
from noisy_jax.experiment import runs

pth, workdir = sys.argv[1:]
config = tiny.base()  # then: 2 steps of 8 on 16 mock CIFAR-10 images (4 for validation), ImageNet normalisation
config.dataset = "cifar10"
config.dataset_kwargs = {"validation_size": 4}
config.noise.rate = 0.2
config.num_epochs = 1
config.batch_size = 8
config.num_devices = 1
config.normalization = "imagenet"
config.model.name = "imagenet_resnet18"
config.model.kwargs = {"blocks_per_stage": (1, 1, 1, 1)}
config.model.pretrained = pth
config.optimizer.learning_rate = 0.01
config.optimizer.weight_decay = 0.0
with tfds.testing.mock_data(num_examples=16):
  runs.run_single(config, workdir)
"""


def test_fine_tuning_run_starts_from_the_file_and_a_run_starts_from_it(tmp_path):
  """A run from a .pth file (a torchvision ResNet on 32x32 mock CIFAR-10, 2 steps): it trains from the file's
  weights, its head re-initialised for 10 classes, and writes ImageNet normalisation into model.json; the run's
  workdir as `pretrained` then gives a network exactly that run's final variables (head included: same class
  count)."""
  pth, workdir = str(tmp_path / "resnet10.pth"), str(tmp_path / "run")
  builder = lambda weights: torchvision.models.resnet.ResNet(torchvision.models.resnet.BasicBlock, [1, 1, 1, 1])
  torch.save(torchvision_network(builder).state_dict(), pth)
  env = {**os.environ, "XLA_FLAGS": os.environ.get("NOISY_JAX_TESTS_CALLER_XLA_FLAGS", ""), "JAX_PLATFORMS": "cpu"}
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  done = subprocess.run(
    [sys.executable, "-c", FINE_TUNE, pth, workdir], env=env, cwd=root, capture_output=True, text=True, timeout=600
  )
  assert done.returncode == 0, done.stderr[-3000:]
  summary = json.load(open(os.path.join(workdir, "summary.json")))
  assert np.isfinite(summary["history"][0]["train_loss"])
  tuned = export.load_model(workdir)
  assert tuned.info["normalization"]["mode"] == "imagenet"
  assert tuned.info["meta"]["config"]["model"]["pretrained"] == pth
  stored = pretrained.read_state_dict(pth)
  kernel = np.asarray(tuned.variables["params"]["stage4_block1"]["conv2"]["kernel"])
  original = stored["layer4.0.conv2.weight"].transpose(2, 3, 1, 0)
  moved = np.abs(kernel - original).max()
  assert 0 < moved < 0.05 * np.abs(original).max()  # fine-tuned: moved, a little, from the file's weights
  assert tuned.variables["params"]["head"]["kernel"].shape == (512, 10)

  config = ml_collections.ConfigDict({"model": {"pretrained": workdir}, "normalization": "imagenet"})
  fresh = template(models.get("imagenet_resnet18", num_classes=10, blocks_per_stage=(1, 1, 1, 1)))
  again = run_pretrained.initializer(config)(fresh)
  jax.tree.map(np.testing.assert_array_equal, again["params"], tuned.variables["params"])
  jax.tree.map(np.testing.assert_array_equal, again["batch_stats"], tuned.variables["batch_stats"])


def test_path_of_and_missing_run_directory(tmp_path):
  assert run_pretrained.path_of({"name": "mlp", "pretrained": "none"}) is None
  assert run_pretrained.path_of({"name": "mlp"}) is None
  assert run_pretrained.path_of({"name": "mlp", "pretrained": "/w/r.pth"}) == "/w/r.pth"
  with pytest.raises(FileNotFoundError, match="no exported model"):
    run_pretrained.read(str(tmp_path))
