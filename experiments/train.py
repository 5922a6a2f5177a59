r"""Runs an experiment: flags -> config -> noisy_jax.experiment.comparison.run(config, workdir).

  python -m experiments.train --config=experiments/configs/default.py --workdir=/tmp/noisy_jax/default
  python -m experiments.train --config=experiments/configs/gce.py --config.noise.rate=0.4 --workdir=/tmp/gce

Any config field can be overridden with --config.FIELD=VALUE. --runs=NAME,... runs only those runs of a comparison
(e.g. one new row of a table).

Multi-host: start the same command on every host with --multihost (or NOISY_JAX_MULTIHOST=1, or a launcher's
JAX_COORDINATOR_ADDRESS); jax.distributed is initialized first (noisy_jax.parallel.distributed.maybe_initialize: Cloud
TPU, Slurm and Open MPI are detected, elsewhere set JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID).
"""

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from experiments import cli
from noisy_jax.experiment import comparison
from noisy_jax.experiment import sweep
from noisy_jax.parallel import distributed
from noisy_jax.parallel import host_memory
from noisy_jax.train import checkpoint

_CONFIG = config_flags.DEFINE_config_file("config", None, "Path to an experiment config file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for metrics, summaries (and checkpoints).")
_RUNS = flags.DEFINE_list(
  "runs",
  None,
  "Run only these runs of a comparison config (comma-separated names of config.runs): to add or re-measure rows.",
)
_MULTIHOST = flags.DEFINE_bool(
  "multihost",
  None,
  "Initialize jax.distributed for a multi-host run. Default: when "
  f"{distributed.ENV_MULTIHOST}=1 or JAX_COORDINATOR_ADDRESS is set.",
)
_HOST_MALLOC = flags.DEFINE_enum(
  "host_malloc",
  "auto",
  list(host_memory.MODES),
  "glibc malloc policy, set before JAX starts: 'retain' keeps freed memory for reuse, so that XLA:CPU's per-step "
  "scratch buffer is not page-faulted in again every step (ResNet-32 step on CPU: 447 -> 335 ms); 'system' leaves "
  "the C library's defaults; 'auto' retains unless a TPU/GPU plugin is installed (noisy_jax.parallel.host_memory).",
)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  host_memory.configure(_HOST_MALLOC.value)  # before the JAX backend starts its threads
  distributed.maybe_initialize(_MULTIHOST.value)  # before any JAX computation
  logging.set_verbosity(logging.INFO)
  checkpoint.quiet_orbax_info_logs()
  if "sweep" in _CONFIG.value:  # many members of one config in one program (noisy_jax.experiment.sweep)
    if _RUNS.value is not None:
      raise app.UsageError(f"--runs={','.join(_RUNS.value)} selects runs of a comparison; a sweep has none.")
    sweep.run_sweep(_CONFIG.value, _WORKDIR.value)
  else:
    comparison.run(_CONFIG.value, _WORKDIR.value, only=_RUNS.value)


if __name__ == "__main__":
  flags.mark_flags_as_required(["config"])
  cli.run(main)
