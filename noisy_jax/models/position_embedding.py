"""Resampling a ViT's learned position embedding to another patch grid, as each original library does it.

A ViT trained on a g x g grid of patches holds one embedding per grid cell, [g, g, D]; an input whose grid is h x w
needs [h, w, D]. The class token's (and registers') embeddings are never resampled. The libraries differ in the
interpolation (shared/REFERENCE.md §17), by ~1e-2 of the features, so a port names the convention it reproduces:

  'antialias'      bicubic with antialias (Keys' cubic, a = -0.5, the kernel stretched by the scale when
                   shrinking, weights normalised over the taps inside the grid) to size (h, w): timm
                   (`resample_abs_pos_embed`, at load and at forward time), open_clip (`resize_pos_embed`, at load
                   time), the original DINOv2 register models and HF Dinov2WithRegisters. Computed with
                   `jax.image.resize(..., 'cubic', antialias=True)`, which is the same operation as torch's
                   `interpolate(mode='bicubic', antialias=True)`.
  'plain'          torch's bicubic without antialias (a = -0.75, align_corners=False, edge taps clamped) to size
                   (h, w): HF Dinov2Model, HF CLIPVisionModel(interpolate_pos_encoding=True).
  'dinov2_offset'  the same kernel called as the original DINOv2 plain models call it, with
                   scale_factor = ((h + 0.1) / g, (w + 0.1) / g) instead of a size: the output is still h x w, but
                   the sample positions use the offset scale (DINOv2 `interpolate_pos_encoding`,
                   `interpolate_offset=0.1`; the offset dates from facebookresearch/dino issue 8).

torch's non-antialiased bicubic maps output index i to the source position s = (i + 0.5) / scale - 0.5 (scale =
out / in unless a scale factor is given), takes the four source rows floor(s) - 1 .. floor(s) + 2, clamped to the
grid, with the cubic-convolution weights of Keys (1981) for a = -0.75:

  W(x) = (a + 2)|x|^3 - (a + 3)|x|^2 + 1          for |x| <= 1
  W(x) = a|x|^3 - 5a|x|^2 + 8a|x| - 4a            for 1 < |x| < 2

The interpolation is separable: out = R_h P R_w^T per channel, with the [out, in] matrices R built here in float64.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

METHODS = ("antialias", "plain", "dinov2_offset")
TORCH_CUBIC_A = -0.75  # torch's upsample_bicubic2d (and OpenCV's) cubic coefficient
DINOV2_OFFSET = 0.1


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
  """Keys' cubic-convolution weights of the taps at offsets -1, 0, 1, 2 from floor(s), t = s - floor(s): [..., 4]."""
  near = lambda x: ((a + 2) * x - (a + 3)) * x * x + 1  # noqa: E731
  far = lambda x: ((a * x - 5 * a) * x + 8 * a) * x - 4 * a  # noqa: E731
  return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=-1)


def torch_bicubic_matrix(in_size: int, out_size: int, scale_factor: float | None = None) -> np.ndarray:
  """The [out_size, in_size] float64 matrix R with R @ v = torch's `interpolate(mode='bicubic', align_corners=False,
  antialias=False)` of a vector v along one axis: to `out_size` (scale_factor None), or with `scale_factor` given as
  torch receives it (then the sample positions use it, not out_size / in_size)."""
  if in_size == out_size and scale_factor is None:
    return np.eye(in_size)  # torch copies the input when the sizes agree
  inverse = 1.0 / scale_factor if scale_factor else in_size / out_size
  source = (np.arange(out_size) + 0.5) * inverse - 0.5
  floor = np.floor(source)
  weights = _cubic_weights(source - floor, TORCH_CUBIC_A)
  taps = np.clip(floor[:, None].astype(np.int64) + np.arange(-1, 3), 0, in_size - 1)
  matrix = np.zeros((out_size, in_size))
  np.add.at(matrix, (np.repeat(np.arange(out_size), 4), taps.ravel()), weights.ravel())
  return matrix


def _separable(grid: jax.Array, rows: np.ndarray, cols: np.ndarray) -> jax.Array:
  dtype = grid.dtype
  return jnp.einsum("hi,wj,ijd->hwd", rows.astype(dtype), cols.astype(dtype), grid, precision="highest")


def resample(grid: jax.Array, size: tuple[int, int], method: str = "antialias") -> jax.Array:
  """The position embeddings `grid` [g_h, g_w, D] resampled to [h, w, D] (`size` = (h, w)) by `method` (module
  docstring), in grid's dtype; `grid` itself when the sizes agree (every library skips the resampling then).

  Raises:
    ValueError: for a method not in METHODS.
  """
  if method not in METHODS:
    raise ValueError(f"position-embedding resampling {method!r}; allowed: {', '.join(METHODS)}.")
  in_h, in_w, dim = grid.shape
  out_h, out_w = (int(s) for s in size)
  if (in_h, in_w) == (out_h, out_w):
    return grid
  if method == "antialias":
    return jax.image.resize(grid, (out_h, out_w, dim), "cubic", antialias=True, precision=jax.lax.Precision.HIGHEST)
  if method == "plain":
    return _separable(grid, torch_bicubic_matrix(in_h, out_h), torch_bicubic_matrix(in_w, out_w))
  rows = torch_bicubic_matrix(in_h, out_h, (out_h + DINOV2_OFFSET) / in_h)
  cols = torch_bicubic_matrix(in_w, out_w, (out_w + DINOV2_OFFSET) / in_w)
  return _separable(grid, rows, cols)
