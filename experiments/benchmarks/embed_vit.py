"""Time per 10,000 images of `python -m experiments.embed` with DINOv2 ViT backbones, on this machine.

  python -m experiments.benchmarks.embed_vit [--images 192] [--backbones vit_small_patch14_dinov2,...]

Writes `--images` PNGs (mnist5k digits as 256 x 256 RGB, 3 class folders) and, for each backbone, a timm model of
it with random weights (`timm.create_model(name, pretrained=False)`: the released models' shapes, 518 px grid) as
.safetensors; then runs the command as a user would (its own process, the backbone's preprocessing: resize 256,
centre crop 224, bicubic; batch 32, one Grain worker) and prints its summary line, the wall time of the whole
command (imports, reading the weights, compilation included) and that time scaled to 10,000 images. The first
batch's compilation is part of the time, so a larger `--images` gives a lower (steadier) time per image.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from experiments.benchmarks import common

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_BACKBONES = ("vit_small_patch14_dinov2", "vit_base_patch14_dinov2")


def write_inputs(root: str, num_images: int, backbones) -> None:
  """root/images/cK/ROW.png (num_images digits of 3 classes) and root/NAME.safetensors per backbone."""
  sys.path.insert(0, os.path.join(REPO, "tests"))
  from torchvision_reference import import_torchvision  # pylint: disable=g-import-not-at-top

  import_torchvision()  # before timm (the CPU build of torch needs it)
  from PIL import Image  # pylint: disable=g-import-not-at-top
  from safetensors.torch import save_file  # pylint: disable=g-import-not-at-top
  import timm  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top

  from noisy_jax import data  # pylint: disable=g-import-not-at-top

  torch.manual_seed(0)
  for name in backbones:
    state = timm.create_model(name, pretrained=False).state_dict()
    save_file({k: v.contiguous() for k, v in state.items()}, os.path.join(root, f"{name}.safetensors"))
  mnist = data.load("mnist5k")
  per_class = -(-num_images // 3)
  for c in range(3):
    os.makedirs(os.path.join(root, "images", f"c{c}"))
    for row in np.flatnonzero(mnist.y_train == c)[:per_class][: num_images - c * per_class]:
      rgb = np.repeat(mnist.x_train[row], 3, axis=-1).astype(np.uint8)
      Image.fromarray(rgb).resize((256, 256), Image.BILINEAR).save(os.path.join(root, "images", f"c{c}", f"{row}.png"))


def embed(root: str, name: str) -> tuple[str, float]:
  """(the command's summary line, its wall seconds) for backbone `name`."""
  cmd = [
    sys.executable,
    "-m",
    "experiments.embed",
    f"--images={os.path.join(root, 'images')}",
    f"--backbone={name}",
    f"--weights={os.path.join(root, name + '.safetensors')}",
    f"--workdir={os.path.join(root, 'out_' + name)}",
    "--batch_size=32",
    "--shard_size=100000",
    "--workers=1",
    "--progress=false",
  ]
  start = time.perf_counter()
  done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True)
  seconds = time.perf_counter() - start
  line = [line for line in done.stdout.splitlines() if line.startswith("Embedded")][-1]
  return line, seconds


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--images", type=int, default=192)
  parser.add_argument("--backbones", default=",".join(DEFAULT_BACKBONES))
  args = parser.parse_args(argv)
  backbones = [b for b in args.backbones.split(",") if b]
  print(f"machine: {common.machine_info()}", flush=True)
  with tempfile.TemporaryDirectory() as root:
    write_inputs(root, args.images, backbones)
    for name in backbones:
      load_before = os.getloadavg()[0]
      line, seconds = embed(root, name)
      print(line)
      per_10k = seconds / args.images * 1e4 / 60
      print(
        f"{name}: {seconds:.1f} s for {args.images} images (the whole command) -> {per_10k:.1f} min per 10,000 "
        f"images; 1-minute load {load_before:.1f} before, {os.getloadavg()[0]:.1f} after",
        flush=True,
      )


if __name__ == "__main__":
  main()
