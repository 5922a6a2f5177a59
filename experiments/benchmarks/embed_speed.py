"""Images/s of `python -m experiments.embed`'s jitted ResNet-50 vs torchvision's ResNet-50 in PyTorch, one CPU, one run.

  python -m experiments.benchmarks.embed_speed [--batch 32] [--size 224] [--repeats 5] [--threads N] [--quick]

Both networks have the same random weights (a torchvision resnet50() state_dict, saved as .safetensors and read by
noisy_jax.experiment.embedders.build('resnet50', ...)) and embed with the classifier removed (D = 2048). Two rows:

  decode excluded   one batch of uint8 [B, S, S, 3] pixels already in memory: noisy_jax's jitted features (the
                    normalisation inside) vs torch (uint8 -> float / 255, Normalize, the network; eval, no_grad)
  decode included   B JPEG files (500x375) decoded and preprocessed in this process, then embedded: noisy_jax's
                    Preprocessing.decode (pillow: resize 256, centre crop 224) vs torchvision's transforms
                    (Resize(256), CenterCrop(224), ToTensor, Normalize) on the PIL images

The sides alternate unit by unit (experiments/benchmarks/common.py); torch gets the same threads as XLA. torchvision
is imported through tests/torchvision_reference.py (the CPU build of torch needs its workaround).
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

from experiments.benchmarks import common

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _torch_side(size: int):
  """(torchvision resnet50 with fc = Identity in eval mode, its state_dict, the eval transform of PIL images)."""
  sys.path.insert(0, os.path.join(REPO, "tests"))
  from torchvision_reference import import_torchvision  # pylint: disable=g-import-not-at-top

  import_torchvision()
  import torch  # pylint: disable=g-import-not-at-top
  import torchvision  # pylint: disable=g-import-not-at-top

  torch.manual_seed(0)
  net = torchvision.models.resnet50()
  state = {k: v.contiguous() for k, v in net.state_dict().items()}
  net.fc = torch.nn.Identity()
  t = torchvision.transforms
  resize = round(size * 256 / 224)
  transform = t.Compose(
    [t.Resize(resize), t.CenterCrop(size), t.ToTensor(), t.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))]
  )
  return net.eval(), state, transform


def _jpegs(directory: str, count: int) -> list[str]:
  """`count` smooth random 500x375 JPEG files (photographs' sizes and compressibility, roughly)."""
  from PIL import Image  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(0)
  paths = []
  for i in range(count):
    small = rng.integers(0, 256, (15, 20, 3), dtype=np.uint8)
    image = Image.fromarray(small).resize((500, 375), Image.BICUBIC)
    paths.append(os.path.join(directory, f"{i:03d}.jpg"))
    image.save(paths[-1], quality=90)
  return paths


def main(argv=None):
  parser = common.base_parser(__doc__.splitlines()[0], repeats=5, warmup=1)
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--size", type=int, default=224)
  args = parser.parse_args(argv)
  if args.quick:
    args.batch, args.size, args.repeats = 4, 64, 2
  threads = common.configure_threads(args.threads, host_malloc=args.host_malloc)
  import jax  # pylint: disable=g-import-not-at-top
  from safetensors.torch import save_file  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top

  from noisy_jax.experiment import embedders  # pylint: disable=g-import-not-at-top

  net, state, transform = _torch_side(args.size)
  with tempfile.TemporaryDirectory() as tmp:
    save_file(state, os.path.join(tmp, "resnet50.safetensors"))
    embedder = embedders.build("resnet50", os.path.join(tmp, "resnet50.safetensors"), args.size)
    paths = _jpegs(tmp, args.batch)
    pixels = np.stack([embedder.preprocessing.decode(p) for p in paths])
    mean = torch.tensor((0.485, 0.456, 0.406))[:, None, None]
    std = torch.tensor((0.229, 0.224, 0.225))[:, None, None]
    codes = torch.from_numpy(pixels).permute(0, 3, 1, 2).contiguous()

    def torch_pixels():
      with torch.no_grad():
        return net((codes.float() / 255.0 - mean) / std)

    def torch_files():
      from PIL import Image  # pylint: disable=g-import-not-at-top

      with torch.no_grad():
        return net(torch.stack([transform(Image.open(p).convert("RGB")) for p in paths]))

    def jax_files():
      return embedder.features(np.stack([embedder.preprocessing.decode(p) for p in paths])).block_until_ready()

    sides = {
      "noisy_jax, decode excluded": lambda: embedder.features(pixels).block_until_ready(),
      "torch, decode excluded": torch_pixels,
      "noisy_jax, decode included": jax_files,
      "torch, decode included": torch_files,
    }
    ours = np.asarray(embedder.features(pixels))
    theirs = torch_pixels().numpy()
    relative = float(np.linalg.norm(ours - theirs) / np.linalg.norm(theirs))
    times = common.alternate(sides, repeats=args.repeats, warmup=args.warmup)
  summary = common.summarize(times, work=args.batch, unit="images/s")
  ratios = {
    row: summary[f"torch, decode {row}"]["median_s"] / summary[f"noisy_jax, decode {row}"]["median_s"]
    for row in ("excluded", "included")
  }
  notes = [f"torch / noisy_jax time (above 1: noisy_jax faster), decode {k}: {v:.2f}" for k, v in ratios.items()]
  notes.append(f"relative difference of the two networks' embeddings: {relative:.2e}; JAX {jax.__version__}")
  common.report(
    "embed_speed",
    args=args,
    threads=threads,
    settings={"batch": args.batch, "size": args.size, "backbone": "resnet50", "dim": embedder.dim},
    results={"summary": summary, "torch_over_noisy_jax": ratios, "relative_difference": relative},
    notes=notes,
    tables=[common.timing_table(summary, unit="images/s")],
  )


if __name__ == "__main__":
  main()
