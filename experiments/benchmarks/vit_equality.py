"""noisy_jax's ViT backbones (noisy_jax.models.vit) against the PyTorch libraries that define them, at full size.

For each backbone, a PyTorch model with random weights (timm `create_model(..., pretrained=False)` for DINOv2, with
`dynamic_img_size=True` so that it resamples its position embedding at forward time; open_clip
`create_model(..., pretrained=None)` for CLIP), every parameter perturbed (+ 0.02 N(0, 1), LayerScale drawn from
U(0.1, 0.5), so that no block is close to the identity), its state_dict written to .safetensors and loaded with
noisy_jax.models.vit_weights.load. Then, in float32 on this CPU:

  equality  the features of 2 random images (N(0, 1) pixels) at 224 px and at --other px: timm's
            `forward_head(forward_features(x), pre_logits=True)` / open_clip's `encode_image(x)` against
            `apply(..., method='features')`; max |ours - theirs| and that over max |theirs| (max rel). DINOv2 is
            trained on a 37 x 37 grid (518 px): both sizes resample it (timm: antialiased bicubic). CLIP is trained
            at 224 px; at the other size the reference is an open_clip model built for that size whose state_dict
            went through open_clip's `resize_pos_embed` (antialiased bicubic, at load time, as open_clip does).
  speed     images/s of one forward pass of a batch of --batch 224-px images (the features), our jitted function
            against the PyTorch model in eval mode under no_grad, timed alternately after a warm-up
            (experiments/benchmarks/common.py), the ratio of the medians reported (PyTorch's time / ours: > 1 when
            ours is faster).

  python -m experiments.benchmarks.vit_equality [--other 336] [--batch 8] [--repeats 3] [--only vit_small...]
"""

from __future__ import annotations

import os
import sys
import tempfile

from experiments.benchmarks import common

# (noisy_jax name, library, the library's model name)
BACKBONES = (
  ("vit_small_patch14_dinov2", "timm", "vit_small_patch14_dinov2"),
  ("vit_base_patch14_dinov2", "timm", "vit_base_patch14_dinov2"),
  ("vit_large_patch14_dinov2", "timm", "vit_large_patch14_dinov2"),
  ("vit_small_patch14_reg4_dinov2", "timm", "vit_small_patch14_reg4_dinov2"),
  ("vit_base_patch14_reg4_dinov2", "timm", "vit_base_patch14_reg4_dinov2"),
  ("vit_large_patch14_reg4_dinov2", "timm", "vit_large_patch14_reg4_dinov2"),
  ("vit_base_patch16_clip", "open_clip", "ViT-B-16"),
  ("vit_large_patch14_clip", "open_clip", "ViT-L-14"),
)


def import_torchvision() -> None:
  """Imports torchvision (which timm and open_clip import) beside the CPU build of torch, through
  tests/torchvision_reference.py's workaround (its wheel registers fake kernels for operators the CPU torch lacks)."""
  sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests")
  )
  from torchvision_reference import import_torchvision as imported  # pylint: disable=g-import-not-at-top

  imported()


def randomize(model, seed: int) -> None:
  """Perturbs every parameter of a torch model in place (module docstring)."""
  import torch  # pylint: disable=g-import-not-at-top

  generator = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("gamma") or "lambda1" in name:
        p.copy_(0.1 + 0.4 * torch.rand(p.shape, generator=generator))
      else:
        p.add_(0.02 * torch.randn(p.shape, generator=generator))


def torch_model(library: str, name: str, image_size: int | None = None):
  """(model in eval mode, features function x_nchw -> features) of the library's backbone."""
  if library == "timm":
    import timm  # pylint: disable=g-import-not-at-top

    model = timm.create_model(name, pretrained=False, dynamic_img_size=True).eval()
    return model, lambda x: model.forward_head(model.forward_features(x), pre_logits=True)
  import open_clip  # pylint: disable=g-import-not-at-top

  kwargs = {"force_image_size": image_size} if image_size else {}
  model = open_clip.create_model(name, pretrained=None, **kwargs).eval()
  return model, model.encode_image


def _differences(ours, theirs) -> tuple[float, float]:
  import numpy as np  # pylint: disable=g-import-not-at-top

  ours, theirs = np.asarray(ours, np.float64), theirs.detach().double().numpy()
  worst = float(np.abs(ours - theirs).max())
  return worst, worst / float(np.abs(theirs).max())


def _clip_at(name: str, state_dict, size: int):
  """open_clip's model built for `size` px with the 224-px `state_dict` resized as open_clip does at load time."""
  import open_clip  # pylint: disable=g-import-not-at-top

  model, features = torch_model("open_clip", name, size)
  resized = dict(state_dict)
  open_clip.model.resize_pos_embed(resized, model)
  model.load_state_dict(resized)
  return features


def compare(row, sizes, batch: int, repeats: int, directory: str) -> tuple[list, dict]:
  """Equality rows [(backbone, library, size, max abs, max rel)] and the timing summary of one backbone."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import safetensors.torch  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top

  from noisy_jax.models import vit_weights  # pylint: disable=g-import-not-at-top

  ours_name, library, their_name = row
  model, features = torch_model(library, their_name)
  randomize(model, seed=0)
  state_dict = {k: v.contiguous() for k, v in model.state_dict().items()}
  path = os.path.join(directory, f"{ours_name}.safetensors")
  safetensors.torch.save_file(state_dict, path)
  module, variables = vit_weights.load(ours_name, path)
  ours = jax.jit(lambda v, x: module.apply(v, x, method="features"))
  rng = np.random.default_rng(0)
  rows = []
  for size in sizes:
    x = rng.normal(size=(2, size, size, 3)).astype(np.float32)
    theirs_fn = features if library == "timm" or size == module.image_size else _clip_at(their_name, state_dict, size)
    with torch.no_grad():
      theirs = theirs_fn(torch.from_numpy(x).permute(0, 3, 1, 2).contiguous())
    rows.append((ours_name, library, size, *_differences(ours(variables, x), theirs)))
  x = rng.normal(size=(batch, 224, 224, 3)).astype(np.float32)
  x_torch = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous()

  def torch_side():
    with torch.no_grad():
      features(x_torch)

  times = common.alternate(
    {"noisy_jax": lambda: ours(variables, x).block_until_ready(), library: torch_side}, repeats=repeats, warmup=1
  )
  return rows, common.summarize(times, work=batch, unit="images/s")


def main(argv=None) -> None:
  parser = common.base_parser(__doc__.splitlines()[0], repeats=3, warmup=1)
  parser.add_argument("--other", type=int, default=336, help="the second image size (default %(default)s)")
  parser.add_argument("--batch", type=int, default=8, help="images per timed forward pass (default %(default)s)")
  parser.add_argument("--only", default="", help="comma-separated noisy_jax names (default: every backbone)")
  args = parser.parse_args(argv)
  threads = common.configure_threads(args.threads, host_malloc=args.host_malloc)
  import_torchvision()
  info = common.machine_info()
  print(f"CPU: {info['cpu']}; cores {threads['cores']}, torch threads {threads['torch_threads']}")
  print(f"load average at start: {info['load_average']}; versions: {info['versions']}")
  chosen = [r for r in BACKBONES if not args.only or r[0] in args.only.split(",")]
  equality, speed = [], []
  with tempfile.TemporaryDirectory() as directory:
    for row in chosen:
      rows, summary = compare(row, (224, args.other), args.batch, args.repeats, directory)
      equality.extend(rows)
      ours, theirs = summary["noisy_jax"], summary[row[1]]
      speed.append(
        (row[0], row[1], ours["images/s_at_median"], theirs["images/s_at_median"], theirs["ratio_of_medians"])
      )
      print(common.format_table(["backbone", "library", "size", "max abs", "max rel"], rows), flush=True)
  print("\nfeatures, float32, random weights (noisy_jax vs the library):")
  print(common.format_table(["backbone", "library", "size", "max abs", "max rel"], equality))
  print(f"\nforward pass, batch {args.batch} at 224 px, images/s at the median of {args.repeats} alternated repeats:")
  print(common.format_table(["backbone", "library", "noisy_jax", "library", "torch time / ours"], speed))
  print(f"load average at end: {[round(x, 2) for x in os.getloadavg()]}")


if __name__ == "__main__":
  main()
