"""A run's XLA compiler options: the model's own on the CPU, run-to-run determinism on GPUs.

  compiler_options(model, platform, deterministic=True)   the options of `model`'s programs on `platform`

A run's `gpu_deterministic` (DEFAULT_GPU_DETERMINISTIC when unset) is read by the trainer (noisy_jax.train.loop's
compiler_options) and given here as `deterministic`.

noisy_jax.train.loop.fit, the sweep, the loss-correction estimate, the export and the benchmarks all take their
options here, so a run's programs are compiled alike wherever they are built.
"""

from __future__ import annotations

import functools

from absl import logging
import jax
import jax.numpy as jnp

# XLA:GPU's run-to-run determinism: scatter-adds and select-and-scatter (max-pool gradients) without atomics, and
# no timing-based autotuning (which can pick another convolution algorithm, so other rounding, in another process).
# On by default (`config.gpu_deterministic`): a run is reproducible from its config and seed. Measured on an H100
# (2026-11-24): without it, the same augmented SmallCNN config run twice in one process gave different test
# accuracies after one epoch (tests/test_augment.py).
GPU_DETERMINISM_OPTIONS = {"xla_gpu_deterministic_ops": True}
DEFAULT_GPU_DETERMINISTIC = True


def compiler_options(
  model, platform: str, *, deterministic: bool = DEFAULT_GPU_DETERMINISTIC
) -> dict[str, str | bool] | None:
  """XLA options for compiling `model`'s programs for devices of `platform` ('cpu', 'gpu', 'tpu'), or None.

  A model class may declare `xla_cpu_compiler_options` (the ResNets do: `models.resnet.XLA_CPU_COMPILER_OPTIONS`,
  measured faster); they apply on the CPU only. If this jaxlib rejects them (they are XLA's experimental
  options), a warning names them and the defaults are used: only speed is at stake, never the numbers' meaning.
  On GPUs, `deterministic` adds GPU_DETERMINISM_OPTIONS (the CPU and TPU backends are deterministic already).
  """
  if platform == "gpu":
    return dict(GPU_DETERMINISM_OPTIONS) if deterministic else None
  options = getattr(model, "xla_cpu_compiler_options", None)
  if not options or platform != "cpu":
    return None
  return dict(options) if _accepted_by_xla(tuple(sorted(options.items()))) else None


@functools.lru_cache(maxsize=None)
def _accepted_by_xla(options: tuple[tuple[str, str], ...]) -> bool:
  try:
    jax.jit(lambda x: x + 1, compiler_options=dict(options)).lower(jnp.zeros((2,), jnp.float32)).compile()
  except jax.errors.JaxRuntimeError as error:
    logging.warning(
      "XLA rejected the compiler options %s (%s); compiling with XLA's defaults.",
      dict(options),
      str(error).splitlines()[0],
    )
    return False
  return True
