"""Settings of the whole suite.

float32 at full precision on every backend. On GPUs and TPUs XLA's default precision for float32 matrix products and
convolutions is lower (TF32 on NVIDIA GPUs since Ampere, bfloat16 passes on TPUs): about 1e-3 relative, where the
suite compares with NumPy, PyTorch and closed forms at 1e-4 to 1e-6. Measured on an H100 (2026-11-24): 17 tests
failed on those tolerances with the default precision. The tests are about the formulas, so they pin 'highest';
training keeps XLA's default for speed. On the CPU this changes nothing (it computes float32 in full anyway).
"""

import jax

jax.config.update("jax_default_matmul_precision", "highest")
