"""experiments/embed.py, noisy_jax.experiment.embedders and embedding_store: embeddings of an image folder.

A folder of 48 RGB PNGs (3 classes of mnist5k digits, tinted, 40x32 so that the resize and crop matter) and a
torchvision ResNet-18 with random weights (random BatchNorm statistics too) saved as .pth and .safetensors. The
ResNet tests run at --image_size=56 (resize 64, crop 56). Checked: the preprocessing equals torchvision's transform
pixel for pixel, the embeddings equal torchvision's network on the same inputs, the store's layout and manifest,
kill-and-resume (byte-identical shards, finished ones not recomputed), 1 device == 2 devices, bad image files with
on_bad_file skip / error, bad weights refused before anything is written, and a noisy_jax export as backbone.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from PIL import Image
import pytest
import torch

from experiments import embed
from noisy_jax.core import errors
from noisy_jax.experiment import embedders
from noisy_jax.experiment import embedding_store
import simulated_devices
from torchvision_reference import import_torchvision

import_torchvision()
import torchvision  # noqa: E402  (after import_torchvision: tests/torchvision_reference.py)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE = 56  # crop; resize round(56 * 256 / 224) = 64
SHARD, BATCH = 20, 8  # 48 images: shards of 20, 20, 8; the second shard's last batch is padded
SUBPROCESS_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
  """ROOT/cK/ROW.png: 16 tinted digits of each of 3 classes, 40x32 RGB."""
  from noisy_jax import data  # pylint: disable=g-import-not-at-top

  mnist = data.load("mnist5k")
  root = tmp_path_factory.mktemp("images")
  tints = np.asarray([[1.0, 0.6, 0.2], [0.3, 1.0, 0.5], [0.7, 0.4, 1.0]])
  for c in range(3):
    os.makedirs(root / f"c{c}")
    for row in np.flatnonzero(mnist.y_train == c)[:16]:
      rgb = (mnist.x_train[row] * tints[c]).astype(np.uint8)
      Image.fromarray(rgb).resize((40, 32), Image.BILINEAR).save(root / f"c{c}" / f"{row:04d}.png")
  return str(root)


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
  """(torch resnet18 in eval mode with fc = Identity, .pth path, .safetensors path)."""
  from safetensors.torch import save_file  # pylint: disable=g-import-not-at-top

  torch.manual_seed(0)
  net = torchvision.models.resnet18()
  for module in net.modules():
    if isinstance(module, torch.nn.BatchNorm2d):
      module.running_mean.uniform_(-0.2, 0.2)
      module.running_var.uniform_(0.5, 1.5)
      module.weight.data.uniform_(0.5, 1.5)
      module.bias.data.uniform_(-0.2, 0.2)
  directory = tmp_path_factory.mktemp("weights")
  pth, safetensors = str(directory / "resnet18.pth"), str(directory / "resnet18.safetensors")
  torch.save(net.state_dict(), pth)
  save_file({k: v.contiguous() for k, v in net.state_dict().items()}, safetensors)
  net.fc = torch.nn.Identity()
  return net.eval(), pth, safetensors


def _run(folder, weights_path, workdir, **kwargs):
  kwargs = {"batch_size": BATCH, "shard_size": SHARD, "image_size": SIZE, "workers": 0, "progress": False, **kwargs}
  return embed.run(folder, kwargs.pop("backbone", "imagenet_resnet18"), weights_path, str(workdir), **kwargs)


@pytest.fixture(scope="module")
def pth_run(folder, weights, tmp_path_factory):
  workdir = tmp_path_factory.mktemp("pth_run") / "store"
  return _run(folder, weights[1], workdir), str(workdir)


def test_preprocessing_is_torchvisions_eval_transform(folder):
  transforms = torchvision.transforms
  paths = [os.path.join(folder, p) for p in embedding_store.list_images(folder)[::7]]
  for preprocessing, (resize, crop) in (
    (embedders.sized(embedders.IMAGENET_EVAL, SIZE), (64, 56)),
    (embedders.IMAGENET_EVAL, (256, 224)),
  ):
    reference = transforms.Compose([transforms.Resize(resize), transforms.CenterCrop(crop)])
    for path in paths:
      theirs = np.asarray(reference(Image.open(path).convert("RGB")))
      np.testing.assert_array_equal(preprocessing.decode(path), theirs)
  assert (preprocessing.resize, preprocessing.crop) == (256, 224)


def test_resnet18_embeddings_equal_torchvisions(folder, weights, pth_run):
  net = weights[0]
  _, workdir = pth_run
  ours, labels, files, classes = embedding_store.read(workdir)
  preprocessing = embedders.sized(embedders.IMAGENET_EVAL, SIZE)
  x = np.stack([preprocessing.decode(os.path.join(folder, f)) for f in files])
  x = (
    torch.from_numpy(x).permute(0, 3, 1, 2).float() / 255.0 - torch.tensor([0.485, 0.456, 0.406])[:, None, None]
  ) / torch.tensor([0.229, 0.224, 0.225])[:, None, None]
  with torch.no_grad():
    theirs = net(x).numpy()
  assert ours.shape == theirs.shape == (48, 512) and np.std(theirs) > 1e-2
  relative = np.linalg.norm(ours - theirs) / np.linalg.norm(theirs)
  assert relative <= 1e-4, relative
  np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-4 * np.abs(theirs).max())
  # The .safetensors file: the subprocess runs below read it and must give these bytes.


def test_store_layout_and_manifest(folder, pth_run):
  summary, workdir = pth_run
  assert (summary.num_examples, summary.dim, summary.written, summary.reused) == (48, 512, 3, 0)
  files = embedding_store.list_images(folder)
  with open(os.path.join(workdir, "files.txt")) as f:
    assert f.read().splitlines() == files == sorted(files)
  np.testing.assert_array_equal(np.load(os.path.join(workdir, "labels.npy")), np.repeat([0, 1, 2], 16))
  with open(os.path.join(workdir, "classes.txt")) as f:
    assert f.read().splitlines() == ["c0", "c1", "c2"]
  with open(os.path.join(workdir, "manifest.json")) as f:
    manifest = json.load(f)
  names = sorted(os.listdir(os.path.join(workdir, "shards")))
  assert names == [f"embeddings-0000{i}-of-00003.npy" for i in range(3)]
  assert manifest["complete"] and manifest["num_shards"] == 3 and manifest["shard_size"] == SHARD
  assert manifest["preprocessing"]["resize"] == 64 and manifest["image_size"] == SIZE and manifest["dim"] == 512
  assert manifest["weights"]["size"] == os.path.getsize(manifest["weights"]["path"])
  parts = []
  for i, name in enumerate(names):
    entry = manifest["shards"][str(i)]
    assert entry["rows"] == [SHARD * i, min(SHARD * (i + 1), 48)]
    assert entry["sha256"] == embedding_store.sha256_file(os.path.join(workdir, "shards", name))
    parts.append(np.load(os.path.join(workdir, "shards", name)))
    assert parts[-1].dtype == np.float32 and parts[-1].shape == (entry["rows"][1] - entry["rows"][0], 512)
  embeddings, labels, read_files, classes = embedding_store.read(workdir)
  np.testing.assert_array_equal(embeddings, np.concatenate(parts))
  assert read_files == files and classes == ("c0", "c1", "c2") and labels.dtype == np.int64
  assert not [n for n in os.listdir(workdir) if n.endswith(".tmp")]


def test_labels_only_from_a_class_layout():
  labels, classes = embedding_store.folder_labels([os.path.join("10", "a.png"), os.path.join("2", "b.jpg"), "2/c.png"])
  assert labels.tolist() == [1, 0, 0] and classes == ("2", "10")  # integer-looking names sorted as integers
  assert embedding_store.folder_labels(["a.png", os.path.join("x", "b.png")]) == (None, None)


def test_resume_with_other_settings_names_what_differs(folder, weights, pth_run):
  _, workdir = pth_run
  with pytest.raises(errors.InputError, match="shard_size: stored 20, now 16"):
    _run(folder, weights[1], workdir, shard_size=16)
  with pytest.raises(errors.InputError, match="crop"):
    _run(folder, weights[1], workdir, image_size=48)


def _environment(devices=1, **extra):
  """The environment of an experiments.embed subprocess on `devices` simulated CPU devices, plus `extra`."""
  env = {k: v for k, v in os.environ.items() if k not in ("PJRT_NPROC", embed.KILL_AFTER_ENV)}
  env.update({"XLA_FLAGS": simulated_devices.xla_flags_with_devices(devices), "JAX_PLATFORMS": "cpu"})
  if devices > 1:
    env["PJRT_NPROC"] = str(2 * devices)
  return {**env, **extra}


def _command_line(folder, weights_path, workdir, workers=0):
  args = [f"--images={folder}", "--backbone=imagenet_resnet18", f"--weights={weights_path}", f"--workdir={workdir}"]
  args += [f"--image_size={SIZE}", f"--batch_size={BATCH}", f"--shard_size={SHARD}", f"--workers={workers}"]
  return [sys.executable, "-m", "experiments.embed", *args, "--noprogress"]


def _command(folder, weights_path, workdir, *, devices=1, kill_after=None, workers=0):
  extra = {} if kill_after is None else {embed.KILL_AFTER_ENV: str(kill_after)}
  return subprocess.run(
    _command_line(folder, weights_path, workdir, workers),
    cwd=REPO,
    env=_environment(devices, **extra),
    capture_output=True,
    text=True,
    timeout=SUBPROCESS_TIMEOUT_S,
  )


def _shards(workdir):
  folder = os.path.join(workdir, "shards")
  return {name: os.path.join(folder, name) for name in sorted(os.listdir(folder))}


def test_killed_run_resumes_with_byte_identical_shards(folder, weights, pth_run, tmp_path):
  workdir = str(tmp_path / "store")
  killed = _command(folder, weights[2], workdir, kill_after=1, workers=1)  # its Grain worker must not linger
  assert killed.returncode == -9, (killed.returncode, killed.stderr[-3000:])
  first = _shards(workdir)
  assert list(first) == ["embeddings-00000-of-00003.npy"]  # one whole shard, nothing half-written
  with open(os.path.join(workdir, "manifest.json")) as f:
    assert list(json.load(f)["shards"]) == ["0"]
  with pytest.raises(errors.InputError, match="incomplete: 2 of 3 shards missing .embeddings-00001-of-00003.npy"):
    embedding_store.read(workdir)
  before = os.stat(first["embeddings-00000-of-00003.npy"])
  resumed = _command(folder, weights[2], workdir)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "3 shards written" not in resumed.stdout and "2 shards written, 1 reused" in resumed.stdout, resumed.stdout
  after = os.stat(first["embeddings-00000-of-00003.npy"])
  assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not recomputed
  reference = _shards(pth_run[1])  # an uninterrupted run (in this process, from the .pth file)
  assert list(_shards(workdir)) == list(reference)
  for name, path in _shards(workdir).items():
    with open(path, "rb") as ours, open(reference[name], "rb") as theirs:
      assert ours.read() == theirs.read(), name
  assert not [n for n in os.listdir(workdir) + os.listdir(os.path.join(workdir, "shards")) if n.endswith(".tmp")]


def test_two_devices_give_the_embeddings_of_one(folder, weights, pth_run, tmp_path):
  workdir = str(tmp_path / "store")
  done = _command(folder, weights[2], workdir, devices=2)
  assert done.returncode == 0, done.stderr[-3000:]
  assert "on 2 device(s)" in done.stdout, done.stdout
  two, *_ = embedding_store.read(workdir)
  one, *_ = embedding_store.read(pth_run[1])
  np.testing.assert_allclose(two, one, rtol=1e-5, atol=1e-6 * np.abs(one).max())


@pytest.fixture(scope="module")
def bad_folder(folder, tmp_path_factory):
  """Two classes of 4 images from `folder`, and c1/broken.png which is not an image."""
  root = tmp_path_factory.mktemp("bad_images")
  for c in ("c0", "c1"):
    os.makedirs(root / c)
    for name in sorted(os.listdir(os.path.join(folder, c)))[:4]:
      with open(os.path.join(folder, c, name), "rb") as src, open(root / c / name, "wb") as dst:
        dst.write(src.read())
  with open(root / "c1" / "broken.png", "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n not really a png")
  return str(root)


def test_on_bad_file_skip_lists_the_file_and_read_drops_its_row(bad_folder, weights, tmp_path):
  summary = _run(bad_folder, weights[1], tmp_path / "store", on_bad_file="skip", shard_size=4)
  assert summary.skipped == 1 and summary.num_examples == 9
  files = embedding_store.list_images(bad_folder)
  row = files.index(os.path.join("c1", "broken.png"))
  with open(tmp_path / "store" / "manifest.json") as f:
    skipped = json.load(f)["skipped"]
  assert [(s["row"], s["file"]) for s in skipped] == [(row, os.path.join("c1", "broken.png"))]
  assert "broken.png" in (tmp_path / "store" / "skipped.txt").read_text()
  kept, labels, kept_files, _ = embedding_store.read(str(tmp_path / "store"))
  assert kept.shape == (8, 512) and np.isfinite(kept).all() and "c1/broken.png" not in kept_files
  assert labels.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
  every, *_ = embedding_store.read(str(tmp_path / "store"), drop_skipped=False)
  assert np.isnan(every[row]).all() and np.isfinite(np.delete(every, row, axis=0)).all()


def test_on_bad_file_error_names_the_file(bad_folder, weights, tmp_path):
  with pytest.raises(errors.InputError, match="broken.png"):
    _run(bad_folder, weights[1], tmp_path / "store", shard_size=4)
  with open(tmp_path / "store" / "manifest.json") as f:
    manifest = json.load(f)
  assert not manifest["complete"] and "2" not in manifest["shards"]  # the shard of the bad file is not written


def _truncated(path, directory):
  out = os.path.join(directory, "truncated" + os.path.splitext(path)[1])
  with open(path, "rb") as src, open(out, "wb") as dst:
    dst.write(src.read()[: os.path.getsize(path) // 2])
  return out


def test_bad_weights_are_refused_before_anything_is_written(folder, weights, tmp_path):
  _, pth, safetensors = weights
  cases = [
    ("resnet50", pth, errors.InputError, "--backbone=imagenet_resnet18 reads"),  # a ResNet-18 file as ResNet-50
    ("imagenet_resnet34", safetensors, errors.InputError, "--backbone=imagenet_resnet18 reads"),
    ("imagenet_resnet18", _truncated(pth, tmp_path), errors.InputError, "truncated"),
    ("imagenet_resnet18", _truncated(safetensors, tmp_path), errors.InputError, "truncated"),
    ("imagenet_resnet18", str(tmp_path / "missing.pth"), errors.MissingInputError, "no such file"),
    ("vit_huge", pth, errors.InputError, "known backbones: imagenet_resnet18, imagenet_resnet34, resnet50, run"),
  ]
  for backbone, path, kind, message in cases:
    workdir = tmp_path / f"store_{backbone}_{os.path.basename(path)}"
    with pytest.raises(kind, match=message) as raised:
      _run(folder, path, workdir, backbone=backbone)
    assert backbone == "vit_huge" or path in str(raised.value), str(raised.value)
    assert not os.path.exists(workdir)


def test_noisy_jax_export_as_backbone(folder, tmp_path):
  import jax  # pylint: disable=g-import-not-at-top

  from noisy_jax import models  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import image_files  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import normalization  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import export  # pylint: disable=g-import-not-at-top

  shape = (16, 16, 3)
  model = models.build("mlp", 3, shape, kwargs={"hidden_sizes": (24,)})
  variables = model.init(jax.random.PRNGKey(1), np.zeros((1, *shape), np.float32), train=False)
  norm = normalization.Normalization("per_channel", 255.0, np.float32([0.4, 0.5, 0.3]), np.float32([0.2, 0.3, 0.25]))
  directory = export.save(
    str(tmp_path / "export"),
    variables=variables,
    model_config={"name": "mlp", "kwargs": {"hidden_sizes": (24,)}},
    num_classes=3,
    input_shape=shape,
    normalization=norm,
    image_size=16,
  )
  summary = _run(folder, directory, tmp_path / "store", backbone="run", image_size=None)
  ours, _, files, _ = embedding_store.read(summary.workdir)
  loaded = export.load_model(directory)
  theirs = loaded.embed(image_files.ImageFiles(tuple(os.path.join(folder, f) for f in files), 16, 16, 3, 16))
  assert ours.shape == (48, 24) and summary.dim == 24
  np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)  # other batch shapes: matmul rounding


class _TinyBackbone(nn.Module):
  """A stand-in for a ViT backbone: features = Dense(mean over the image) of the normalised input."""

  @nn.compact
  def features(self, x):
    return nn.Dense(5, name="proj")(jnp.mean(x, axis=(1, 2)))


LOADED_SIZES = []


def load(name, path, image_size=None):
  """The loader API that embedders.module_builder calls (as noisy_jax.models.vit_weights.load will be called)."""
  del name, path
  LOADED_SIZES.append(image_size)
  module = _TinyBackbone()
  return module, module.init(jax.random.PRNGKey(0), jnp.zeros((1, image_size, image_size, 3)), method="features")


def test_a_module_backbone_is_one_builder(folder, weights):
  preprocessing = embedders.torchvision_eval(36, 32, interpolation="bicubic", mean=(0.5, 0.4, 0.3), std=(0.2, 0.3, 0.4))
  embedder = embedders.module_builder("tiny", "test_embed", preprocessing)(weights[1], None)
  assert embedder.dim == 5 and LOADED_SIZES[-1] == 32 and embedder.preprocessing.output_shape == (32, 32, 3)
  x = np.stack([preprocessing.decode(os.path.join(folder, f)) for f in embedding_store.list_images(folder)[:5]])
  normalised = (x.astype(np.float32) / 255.0 - np.float32([0.5, 0.4, 0.3])) / np.float32([0.2, 0.3, 0.4])
  module, variables = load("tiny", None, 32)
  expected = module.apply(variables, normalised, method="features")
  np.testing.assert_allclose(np.asarray(embedder.features(x)), np.asarray(expected), rtol=1e-5, atol=1e-6)


def test_label_issues_from_the_store(pth_run, tmp_path):
  """The second command of the foundation-model path: python -m experiments.label_issues_from_features
  --embeddings=STORE reads the store's embeddings, its class folders' ids and names and its files as sources, and
  writes label_issues.csv; a labelless store and --sources beside it are refused by name."""
  from experiments import label_issues_from_features as from_features  # pylint: disable=g-import-not-at-top
  from noisy_jax.core import label_issues  # pylint: disable=g-import-not-at-top

  _, workdir = pth_run
  summary = from_features.run(None, None, str(tmp_path / "out"), method="knn", k=5, embeddings=workdir)
  assert (summary.num_examples, summary.num_classes, summary.num_features) == (48, 3, 512)
  with open(summary.csv_path, newline="") as f:
    rows = list(csv.DictReader(f))
  assert list(rows[0]) == list(label_issues.CSV_COLUMNS) and len(rows) == 48
  assert {r["source"].split("/")[0] for r in rows} == {"c0", "c1", "c2"}  # the store's files
  assert {r["given_label"] for r in rows} == {"c0", "c1", "c2"}  # its class names
  with pytest.raises(errors.InputError, match="drop --sources"):
    from_features.run(None, None, str(tmp_path / "x"), embeddings=workdir, sources_path="s.txt")
  with pytest.raises(errors.InputError, match="give one of"):
    from_features.run("f.npy", None, str(tmp_path / "y"), embeddings=workdir)
  assert not os.path.exists(tmp_path / "x") and not os.path.exists(tmp_path / "y")


def test_dinov2_backbone_embeds_as_timm_does(folder, tmp_path):
  """--backbone=vit_small_patch14_dinov2 with a timm file (random weights, trained grid 4 x 4 = 56 px) at
  --image_size=42 (resize 48, crop 42, bicubic: DINOv2's evaluation transform scaled): the stored embeddings equal
  timm's CLS features of the same preprocessed images (its position grid resampled to 3 x 3 as timm does)."""
  from safetensors.torch import save_file  # pylint: disable=g-import-not-at-top
  import timm  # pylint: disable=g-import-not-at-top

  torch.manual_seed(1)
  net = timm.create_model("vit_small_patch14_dinov2", pretrained=False, img_size=56, dynamic_img_size=True).eval()
  path = str(tmp_path / "dinov2_vits14.safetensors")
  save_file({k: v.contiguous() for k, v in net.state_dict().items()}, path)
  summary = _run(folder, path, tmp_path / "store", backbone="vit_small_patch14_dinov2", image_size=42)
  ours, _, files, _ = embedding_store.read(str(tmp_path / "store"))
  assert (summary.num_examples, summary.dim) == (48, 384)
  preprocessing = embedders.sized(embedders.vit_preprocessing("vit_small_patch14_dinov2"), 42)
  assert (preprocessing.resize, preprocessing.crop, preprocessing.interpolation) == (48, 42, "bicubic")
  x = np.stack([preprocessing.decode(os.path.join(folder, f)) for f in files])
  x = (
    torch.from_numpy(x).permute(0, 3, 1, 2).float() / 255.0 - torch.tensor([0.485, 0.456, 0.406])[:, None, None]
  ) / torch.tensor([0.229, 0.224, 0.225])[:, None, None]
  with torch.no_grad():
    theirs = net.forward_head(net.forward_features(x), pre_logits=True).numpy()
  relative = np.linalg.norm(ours - theirs) / np.linalg.norm(theirs)
  assert relative <= 1e-4, relative
  with pytest.raises(errors.InputError, match="dinov2_vits14.safetensors"):  # another backbone's file, named
    embedders.build("vit_base_patch14_dinov2", path)


def test_a_configs_dataset_is_embedded_with_the_runs_noisy_labels(weights, tmp_path):
  """--config (experiments/configs/tiny.py's digits at 40% symmetric noise): every training image embedded (gray
  repeated to RGB, the backbone's resize and crop), rows named 'digits:train[i]', labelled with the noisy labels a
  run of the config trains on; the same workdir with another seed (other noisy labels) is refused by name."""
  from experiments.configs import tiny  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import inputs as inputs_lib  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import runs  # pylint: disable=g-import-not-at-top

  config = tiny.base()
  workdir = str(tmp_path / "store")
  settings = {"batch_size": 64, "shard_size": 512, "image_size": 32, "workers": 0, "progress": False}
  summary = embed.run(None, "imagenet_resnet18", weights[1], workdir, config=config, **settings)
  ours, labels, files, classes = embedding_store.read(workdir)
  dataset = inputs_lib.load_dataset(config)
  noisy, report = inputs_lib.noisy_training_labels(config, dataset, runs.noise_key(config))
  assert summary.num_examples == len(dataset.x_train) == len(files) and files[1] == "digits:train[1]"
  np.testing.assert_array_equal(labels, noisy)
  assert 0.3 < np.mean(labels != dataset.y_train) < 0.5 and len(classes) == 10
  embedder = embedders.build("imagenet_resnet18", weights[1], 32)
  codes = np.round(dataset.x_train[3].astype(np.float32) * 255.0 / 16.0).astype(np.uint8)  # digits: 0..16 -> 0..255
  first = embedder.preprocessing.prepare(codes)
  assert first.shape == (32, 32, 3) and np.array_equal(first[..., 0], first[..., 2])  # gray as RGB
  assert first.max() > 200  # full intensity
  np.testing.assert_allclose(ours[3], np.asarray(embedder.features(first[None]))[0], rtol=1e-4, atol=1e-5)
  config.seed = 1
  with pytest.raises(errors.InputError, match="labels_sha256"):
    embed.run(None, "imagenet_resnet18", weights[1], workdir, config=config, **settings)
  with pytest.raises(errors.InputError, match="one of them"):
    embed.run(None, "imagenet_resnet18", weights[1], str(tmp_path / "none"), workers=0, progress=False)


def test_a_configs_test_split_is_embedded_with_its_test_labels_and_a_resize_override(weights, folder, tmp_path):
  """--split=test --resize=32 --interpolation=bicubic: the test images of tiny.py's digits, rows 'digits:test[i]',
  labelled with the clean test labels, each image stretched whole onto the 32 x 32 crop with bicubic (the manifest
  records it); a split without --config, a resize below the crop and an unknown filter are refused, nothing written."""
  from experiments.configs import tiny  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import inputs as inputs_lib  # pylint: disable=g-import-not-at-top

  config = tiny.base()
  workdir = str(tmp_path / "test_store")
  settings = {"batch_size": 64, "shard_size": 512, "image_size": 32, "workers": 0, "progress": False}
  embed.run(
    None,
    "imagenet_resnet18",
    weights[1],
    workdir,
    config=config,
    split="test",
    resize=32,
    interpolation="bicubic",
    **settings,
  )
  ours, labels, files, _ = embedding_store.read(workdir)
  dataset = inputs_lib.load_dataset(config)
  assert len(files) == len(dataset.x_test) and files[2] == "digits:test[2]"
  np.testing.assert_array_equal(labels, dataset.y_test)
  embedder = embedders.build("imagenet_resnet18", weights[1], 32, resize=32, interpolation="bicubic")
  with open(os.path.join(workdir, "manifest.json"), encoding="utf-8") as f:
    recorded = json.load(f)["preprocessing"]
  assert (recorded["resize"], recorded["crop"], recorded["interpolation"]) == (32, 32, "bicubic")
  codes = np.round(dataset.x_test[5].astype(np.float32) * 255.0 / 16.0).astype(np.uint8)
  whole = embedder.preprocessing.prepare(codes)
  np.testing.assert_allclose(ours[5], np.asarray(embedder.features(whole[None]))[0], rtol=1e-4, atol=1e-5)
  default = embedders.build("imagenet_resnet18", weights[1], 32).preprocessing.prepare(codes)
  assert not np.array_equal(whole, default)  # the backbone's own resize 37 / crop 32 cuts the border off
  refused = [
    ({"images": folder, "split": "test"}, "--split='test'; allowed: train, test, the splits of a --config"),
    ({"config": config, "resize": 31}, "--resize=31; allowed: an integer >= the crop 32"),
    ({"config": config, "interpolation": "area"}, "--interpolation='area'; allowed: nearest, bilinear"),
  ]
  for kwargs, message in refused:
    with pytest.raises(errors.InputError, match=re.escape(message)):
      embed.run(
        kwargs.pop("images", None), "imagenet_resnet18", weights[1], str(tmp_path / "bad"), **kwargs, **settings
      )
    assert not os.path.exists(tmp_path / "bad")


def test_two_processes_embed_as_one(folder, weights, pth_run, tmp_path):
  """Two JAX processes (jax.distributed over localhost, one CPU device each, NOISY_JAX_MULTIHOST=1) embed the folder
  into one store: each reads its half of every batch, process 0 alone writes; the store equals the one-process
  store (same files, labels and shard layout; embeddings to float rounding)."""
  import socket  # pylint: disable=g-import-not-at-top

  from noisy_jax.parallel import distributed  # pylint: disable=g-import-not-at-top

  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(("localhost", 0))
    port = s.getsockname()[1]
  workdir = str(tmp_path / "store")
  procs = []
  for pid in range(2):
    env = _environment(
      1,
      **{
        distributed.ENV_MULTIHOST: "1",
        "JAX_COORDINATOR_ADDRESS": f"localhost:{port}",
        "JAX_NUM_PROCESSES": "2",
        "JAX_PROCESS_ID": str(pid),
      },
    )
    cmd = _command_line(folder, weights[1], workdir)
    procs.append(subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
  try:
    outputs = [p.communicate(timeout=SUBPROCESS_TIMEOUT_S) for p in procs]
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
  for p, (out, err) in zip(procs, outputs):
    assert p.returncode == 0, err[-3000:]
  assert "on 2 device(s)" in outputs[0][0], outputs[0][0]
  ours, labels, files, classes = embedding_store.read(workdir)
  single, single_labels, single_files, single_classes = embedding_store.read(pth_run[1])
  assert (files, classes) == (single_files, single_classes) and np.array_equal(labels, single_labels)
  assert sorted(_shards(workdir)) == sorted(_shards(pth_run[1]))
  np.testing.assert_allclose(ours, single, rtol=1e-5, atol=1e-5 * np.abs(single).max())
