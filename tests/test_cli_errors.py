"""A user's wrong input stops a run at once, says what to do, and leaves nothing behind (noisy_jax.core.errors,
experiments/cli.py).

- Pretrained weights (config.model.pretrained) that do not fit the network, a truncated .safetensors, a missing file
  and a whole pickled model stop the run before the dataset is read and before the workdir exists, with a message
  that names the file (and, for a torchvision ResNet, the config.model.name that builds it).
- A paper config whose dataset is a manual download (Clothing1M, mini-WebVision) run without its folder names the
  flag to set and what the folder must hold; every config's dataset is checked the same way.
- On the command line such an error is one line on stderr, `error: MESSAGE`, exit status 2, no traceback; a
  programming error keeps its traceback.

The weights are torchvision's ResNet class with one BasicBlock per stage (a "ResNet-10": the layout and names of
ResNet-18, half its blocks), random, saved with torch.save or safetensors.
"""

from __future__ import annotations

import glob
import importlib
import os
import subprocess
import sys

import ml_collections
import numpy as np
from PIL import Image
import pytest
import safetensors.numpy
import torch

from experiments import cli
from experiments.configs import clothing1m_paper
from experiments.configs import own_data
from experiments.configs import webvision_paper
from noisy_jax import data
from noisy_jax.core import errors
from noisy_jax.experiment import comparison
from noisy_jax.experiment import inputs
from noisy_jax.experiment import runs
import torchvision_reference  # noqa: F401  (torchvision importable beside a CPU torch)

# isort: split
# torchvision after torchvision_reference, which makes it importable beside a CPU torch.
import torchvision

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESNET10_FLAGS = "--config.model.name=imagenet_resnet18 --config.model.kwargs=\"{'blocks_per_stage': (1, 1, 1, 1)}\""


def resnet10():
  torch.manual_seed(0)
  return torchvision.models.resnet.ResNet(torchvision.models.resnet.BasicBlock, [1, 1, 1, 1])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  """{'pth', 'truncated', 'whole', 'missing', 'folder', 'gray'}: a ResNet-10 state_dict, the first half of its
  .safetensors, the pickled network itself, a path that does not exist; an image folder of 36x36 RGB noise images
  in 3 classes and one of grayscale ones."""
  root = tmp_path_factory.mktemp("inputs")
  network = resnet10()
  paths = {name: str(root / name) for name in ("resnet10.pth", "truncated.safetensors", "whole.pth", "missing.pth")}
  torch.save(network.state_dict(), paths["resnet10.pth"])
  whole = root / "whole.safetensors"
  safetensors.numpy.save_file({k: v.numpy() for k, v in network.state_dict().items()}, str(whole))
  raw = whole.read_bytes()
  (root / "truncated.safetensors").write_bytes(raw[: len(raw) // 2])
  torch.save(network, paths["whole.pth"])
  rng = np.random.default_rng(0)
  for folder, shape in (("folder", (36, 36, 3)), ("gray", (36, 36))):
    for split, per_class in (("train", 4), ("test", 1)):
      for label in "abc":
        os.makedirs(root / folder / split / label)
        for i in range(per_class):
          image = rng.integers(0, 256, shape, dtype=np.uint8)
          Image.fromarray(image).save(root / folder / split / label / f"{i}.png")
  return {
    "pth": paths["resnet10.pth"],
    "truncated": paths["truncated.safetensors"],
    "whole": paths["whole.pth"],
    "missing": paths["missing.pth"],
    "folder": str(root / "folder"),
    "gray": str(root / "gray"),
  }


def own_data_config(folder: str, model: str, pretrained: str, kwargs=None) -> ml_collections.ConfigDict:
  config = own_data.get_config()
  config.dataset_kwargs.root = folder
  config.model.name = model
  config.model.kwargs = kwargs or {}
  config.model.pretrained = pretrained
  return config


@pytest.fixture
def no_data_read(monkeypatch):
  """Fails the test if a run reads its dataset."""

  def load_dataset(config):
    raise AssertionError(f"the dataset {config.dataset!r} was read")

  monkeypatch.setattr(runs, "load_dataset", load_dataset)
  monkeypatch.setattr(comparison.inputs, "load_dataset", load_dataset)


CASES = {  # (file, model.name, what the message says besides the file)
  "resnet50 from a ResNet-10 file": (
    "pth",
    "resnet50",
    r"layer1\.0\.bn3\.running_mean\) is not in the file.* The file holds a ResNet-10 \(basic blocks \(1, 1, 1, 1\)\), "
    "which " + RESNET10_FLAGS.replace("(", r"\(").replace(")", r"\)") + " builds",
  ),
  "'auto' from a ResNet-10 file": (
    "pth",
    "auto",
    r"a PyTorch state_dict fits an ImageNet ResNet only, and config\.model\.name='auto' picks a small CNN or a "
    r"pre-activation ResNet-32.* The file holds a ResNet-10",
  ),
  "a truncated .safetensors": ("truncated", "imagenet_resnet18", r"is truncated: its header describes [\d,]+ bytes"),
  "a missing file": ("missing", "imagenet_resnet18", "no such file"),
  "a whole pickled model": (
    "whole",
    "imagenet_resnet18",
    r"holds pickled Python objects \(the first: torchvision\.models\.resnet\.ResNet\).*torch\.save\(model\)\? Save "
    r"its weights instead: torch\.save\(model\.state_dict\(\)",
  ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_weights_stop_the_run_before_the_data_are_read(case, files, tmp_path, no_data_read):
  which, model, says = CASES[case]
  workdir = tmp_path / "w"
  config = own_data_config(files["folder"], model, files[which])
  with pytest.raises(errors.InputError, match=f"{files[which]}.*{says}") as raised:
    runs.run_single(config, str(workdir))
  assert isinstance(raised.value, ValueError) and not workdir.exists()
  if which == "missing":
    assert isinstance(raised.value, FileNotFoundError)


def test_an_unknown_model_stops_the_run_before_the_data_are_read(files, tmp_path, no_data_read):
  with pytest.raises(errors.InputError, match=r"Unknown model 'resnet99'; allowed: .*'imagenet_resnet18'"):
    runs.run_single(own_data_config(files["folder"], "resnet99", "none"), str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()


def test_a_comparison_checks_every_run_before_the_data_are_read(files, tmp_path, no_data_read):
  config = own_data.get_config("compare")
  config.dataset_kwargs.root = files["folder"]
  config.shared.model.name = "resnet50"
  config.shared.model.pretrained = files["pth"]
  with pytest.raises(errors.InputError, match=f"{files['pth']}.*holds a ResNet-10"):
    comparison.run(config, str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()


def test_weights_that_do_not_fit_the_data_stop_before_anything_is_written(files, tmp_path):
  """An RGB file fits the network before the data are read (3 input channels, its own); the grayscale folder then
  builds a 1-channel stem: found after the data are read, before the workdir is made."""
  config = own_data_config(files["gray"], "imagenet_resnet18", files["pth"], {"blocks_per_stage": (1, 1, 1, 1)})
  with pytest.raises(
    errors.InputError,
    match=rf"{files['pth']}: conv1\.weight has shape \(7, 7, 3, 64\).*"
    r"The images have 1 channel\(s\), the file's network takes 3: --config\.dataset_kwargs\.channels=3 reads them",
  ):
    runs.run_single(config, str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
  "module, flag, holds",
  [
    (clothing1m_paper, "--config.dataset_kwargs.root=DIR", "noisy_label_kv.txt"),
    (webvision_paper, "--config.dataset_kwargs.root=DIR", "info/train_filelist_google.txt"),
  ],
)
def test_a_manual_download_without_its_folder_names_the_flag(module, flag, holds, files, tmp_path, no_data_read):
  config = module.get_config()
  config.model.pretrained = files["pth"]
  with pytest.raises(errors.MissingInputError, match=f"needs its root: set {flag}, the folder holding .*{holds}"):
    runs.run_single(config, str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()


def test_loaders_without_their_folder_or_file_say_what_to_give():
  with pytest.raises(errors.MissingInputError, match=r"dataset 'clothing1m' needs root=DIR, the folder holding"):
    data.load("clothing1m")
  with pytest.raises(errors.MissingInputError, match=r"'animal10n' needs root=DIR.*training/<label>_<id>\.jpg"):
    data.load("animal10n", image_size=32)
  with pytest.raises(errors.MissingInputError, match=r"'npz' needs path=FILE\.npz, an archive of the arrays x_train"):
    data.load("npz")
  assert data.missing_arguments("mnist5k", {}) == {} and data.missing_arguments("image_folder", {}) == {}


def test_every_config_names_the_flag_of_a_missing_folder():
  """Each config of experiments/configs (its default variant): its dataset needs no argument the config lacks, or
  the run stops before reading it, naming the --config flag that gives it."""
  checked = []
  for path in sorted(glob.glob(os.path.join(REPO, "experiments", "configs", "*.py"))):
    module = importlib.import_module(f"experiments.configs.{os.path.basename(path)[:-3]}")
    try:
      config = module.get_config()
    except (AttributeError, TypeError):  # base.py, real_noise.py: helpers, not configs
      continue
    data_config, prefix = (config.shared, "--config.shared.") if "shared" in config else (config, "--config.")
    try:
      inputs.check_arguments(data_config, flag_prefix=prefix)
    except errors.MissingInputError as error:
      assert f"set {prefix}dataset_kwargs.root=DIR, the folder holding" in str(error), (path, error)
      checked.append(data_config.dataset)
  assert set(checked) == {"clothing1m", "mini_webvision"}, checked


def command(*args, timeout=120):
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  return subprocess.run(
    [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
  )


def test_train_prints_the_message_alone(files, tmp_path):
  """`python -m experiments.train` with weights that do not fit, and with Clothing1M and no folder: one line on
  stderr, `error: ...`, status 2, no workdir."""
  workdir = tmp_path / "w"
  done = command(
    "-m",
    "experiments.train",
    "--config=experiments/configs/own_data.py",
    f"--config.dataset_kwargs.root={files['folder']}",
    "--config.model.name=resnet50",
    f"--config.model.pretrained={files['pth']}",
    f"--workdir={workdir}",
  )
  assert done.returncode == cli.EXIT_INPUT_ERROR, done.stderr[-3000:]
  assert done.stderr.startswith(f"error: pretrained weights {files['pth']}: ") and done.stderr.count("\n") == 1
  assert RESNET10_FLAGS in done.stderr and "Traceback" not in done.stderr and not workdir.exists()
  done = command(
    "-m",
    "experiments.train",
    "--config=experiments/configs/clothing1m_paper.py",
    f"--config.model.pretrained={files['pth']}",
    f"--workdir={workdir}",
  )
  assert done.returncode == cli.EXIT_INPUT_ERROR, done.stderr[-3000:]
  assert done.stderr.startswith("error: dataset 'clothing1m' needs its root: set --config.dataset_kwargs.root=DIR")
  assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr and not workdir.exists()


ENTRY = """
import sys
from experiments import cli
from noisy_jax.core import errors

def main(argv):
  if sys.argv[1] == "input":
    raise errors.MissingInputError("weights 'w.pth': no such file.")
  raise KeyError("a bug")

cli.run(main)
"""


def test_an_input_error_prints_its_message_and_a_programming_error_its_traceback():
  done = command("-c", ENTRY, "input")
  assert (done.returncode, done.stderr) == (2, "error: weights 'w.pth': no such file.\n")
  done = command("-c", ENTRY, "bug")
  assert done.returncode == 1 and "Traceback" in done.stderr and "KeyError: 'a bug'" in done.stderr
  done = command(
    "-m", "experiments.train", "--config=experiments/configs/clothing1m_paper.py:sgd", "--config.model.nme=x"
  )
  assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
  assert "clothing1m_paper config string 'sgd' must be a METHOD, one of joint_optimization, ce, gce." in done.stderr
  done = command("-m", "experiments.train", "--config=experiments/configs/clothing1m_paper.py", "--config.model.nme=x")
  assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
  assert "--config.model.nme: the config has no field 'nme' (did you mean 'name'?)." in done.stderr
