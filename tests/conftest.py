"""Settings of the whole suite.

float32 at full precision on every backend. On GPUs and TPUs XLA's default precision for float32 matrix products and
convolutions is lower (TF32 on NVIDIA GPUs since Ampere, bfloat16 passes on TPUs): about 1e-3 relative, where the
suite compares with NumPy, PyTorch and closed forms at 1e-4 to 1e-6. Measured on an H100 (2026-11-24): 17 tests
failed on those tolerances with the default precision. The tests are about the formulas, so they pin 'highest';
training keeps XLA's default for speed. On the CPU this changes nothing (it computes float32 in full anyway).

One compilation cache for the whole run. Many tests train the same tiny configurations (in this process, in the
other pytest-xdist worker and in the worker processes that the kill/resume and multi-device tests start), and XLA
compiles each program once per process unless JAX's persistent cache is on. The suite turns it on in a new empty
folder, shared through the environment with every process it starts and removed when the run ends, with no minimum
compile time or size, so every program is compiled once per run. The cache's key holds the program, the XLA flags
(`xla_cpu_max_isa`, fast math, the device count), the backend and the JAX version, so a run under other flags
compiles its own. A folder that the caller has set in JAX_COMPILATION_CACHE_DIR is used as it is.

LLVM's optimisation off (XLA_FLAGS=--xla_backend_optimization_level=0, appended to the caller's flags and handed to
every process the suite starts). Most of the suite's time is XLA compiling small programs, and much of that is spent
in LLVM's optimisation passes. The tests compare formulas with re-computations and runs with runs, all under the same
flags; level 0 keeps IEEE semantics (no fast math) and moves only the last bits of float results, except where it
miscompiles: it differentiated a max-pool written as a reshape and a max after a BatchNorm wrongly (models/small_cnn.py
says how the pool is written instead), and tests/test_compiler_options.py checks that forward and reverse mode agree
on the SmallCNN under the suite's flags. The golden values are computed under the same flag
(experiments.golden.COMPILE_FLAG, which tests/test_golden.py's processes add to the caller's flags). A caller who sets
the level in XLA_FLAGS keeps it.
"""

import atexit
import os
import shutil
import tempfile

from experiments import golden

_CACHE_DIR = "JAX_COMPILATION_CACHE_DIR"
if not os.environ.get(_CACHE_DIR):  # the first process of the run (pytest, or pytest-xdist's controller)
  os.environ[_CACHE_DIR] = tempfile.mkdtemp(prefix="noisy_jax_tests_xla_cache_")
  os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
  atexit.register(shutil.rmtree, os.environ[_CACHE_DIR], ignore_errors=True)

_CALLER_XLA_FLAGS = "NOISY_JAX_TESTS_CALLER_XLA_FLAGS"  # the flags before the suite added its own (golden runs)
if _CALLER_XLA_FLAGS not in os.environ:  # the first process of the run
  os.environ[_CALLER_XLA_FLAGS] = os.environ.get("XLA_FLAGS", "")
  os.environ["XLA_FLAGS"] = golden.with_compile_flag(os.environ[_CALLER_XLA_FLAGS])

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position

jax.config.update("jax_default_matmul_precision", "highest")
jax.config.update("jax_compilation_cache_dir", os.environ[_CACHE_DIR])
jax.config.update(
  "jax_persistent_cache_min_compile_time_secs", float(os.environ.get("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", 0))
)
jax.config.update(
  "jax_persistent_cache_min_entry_size_bytes", int(os.environ.get("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", 0))
)


# The files whose tests take longest (a minute or more of one core each, mostly in the processes their fixtures
# start; `--durations=0` per file), longest first. They are handed out first, so that the two pytest-xdist workers of
# README's test command end together instead of one of them running a long file alone at the end. xdist's own order
# (`--loadscope-reorder`, its default: files with the most tests first) would hand them out last.
LONG_FILES = (
  "test_method_runs.py",
  "test_checkpoint.py",
  "test_multidevice.py",
  "test_baseline_training.py",
  "test_golden.py",
  "test_streaming.py",
  "test_multihost.py",
  "test_sweep.py",
  "test_losses.py",
  "test_colabs.py",
  "test_pretrained.py",
  "test_embed.py",
  "test_models.py",
)


def pytest_configure(config):
  if hasattr(config.option, "loadscopereorder"):  # pytest-xdist is installed
    config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
  rank = {name: i for i, name in enumerate(LONG_FILES)}
  items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable: the others in collection order
