#!/usr/bin/env bash
# The benchmarks on a GPU machine, in about 7 minutes of wall time: noisy_jax on the GPU vs PyTorch on the same GPU.
#
#   bash experiments/benchmarks/run_device.sh OUTDIR [-- EXTRA FLAGS FOR EVERY SCRIPT]
#
# First OUTDIR/env.txt: the GPU (nvidia-smi), JAX's version and devices, then a preflight (torch's CUDA, the host
# malloc policy, every module the benchmarks import); the run stops there if JAX has no GPU, PyTorch has no CUDA
# or a module is missing, before any GPU time is spent on benchmarks. Then each script, under `timeout`, its output
# (stdout and stderr) in OUTDIR/NAME.txt, its JSON record (the line starting '{"benchmark"') appended to
# OUTDIR/results.jsonl as run_all.sh does, and 'NAME rc seconds' in OUTDIR/status.txt (rc 124: it hit its limit).
# A script gets min(its cap, what is left of BUDGET_S) seconds; one with less than 30 s left is skipped (listed in
# status.txt), so the whole run stays within BUDGET_S plus the preflight. The order is the priority order.
#
# Environment: PYTHON (default python3), BUDGET_S (default 400: seconds for the scripts together),
# XLA_PYTHON_CLIENT_PREALLOCATE (default false: JAX and PyTorch share the GPU in one process, and JAX's default
# preallocation of 75% of the GPU's memory would starve PyTorch's allocator), JAX_PLATFORMS (default cuda,cpu:
# JAX fails at start instead of falling back to the CPU when its CUDA backend cannot start).
# Host malloc: the scripts' default 'auto' (noisy_jax.parallel.host_memory.should_retain) keeps glibc's defaults where a
# JAX accelerator plugin is installed; env.txt records what it decided.
set -uo pipefail

if [[ $# -lt 1 || "$1" == "--" || "$1" == -* ]]; then
  echo "usage: bash experiments/benchmarks/run_device.sh OUTDIR [-- EXTRA FLAGS]" >&2
  exit 2
fi
outdir="$1"
shift
[[ $# -gt 0 && "$1" == "--" ]] && shift
extra=("$@")
python="${PYTHON:-python3}"
budget="${BUDGET_S:-400}"
export XLA_PYTHON_CLIENT_PREALLOCATE="${XLA_PYTHON_CLIENT_PREALLOCATE:-false}"
export JAX_PLATFORMS="${JAX_PLATFORMS:-cuda,cpu}"
export PYTHONUNBUFFERED=1
mkdir -p "$outdir"
outdir="$(cd "$outdir" && pwd)"
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1  # the repository root: python -m experiments.benchmarks...
: > "$outdir/results.jsonl"
: > "$outdir/status.txt"
total_start=$SECONDS

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  "$python" -c 'import jax; print(jax.__version__, jax.devices())'
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); $(uptime)"
  echo "nproc: $(nproc); python: $("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
  echo "XLA_PYTHON_CLIENT_PREALLOCATE=$XLA_PYTHON_CLIENT_PREALLOCATE JAX_PLATFORMS=$JAX_PLATFORMS" \
       "XLA_FLAGS=${XLA_FLAGS:-} extra flags: ${extra[*]}"
} > "$outdir/env.txt" 2>&1
cat "$outdir/env.txt" >&2

# Preflight: the imports and the devices every benchmark needs (seconds, not minutes, if something is missing).
"$python" - >> "$outdir/env.txt" 2>&1 <<'EOF'
import importlib
import sys

problems = []
for module in ("experiments.benchmarks.jax_side", "experiments.benchmarks.torch_side", "noisy_jax.core.augment",
               "noisy_jax.data.normalization", "ml_collections", "mlxtend"):
  try:
    importlib.import_module(module)
  except Exception as error:  # pylint: disable=broad-except
    problems.append(f"import {module}: {type(error).__name__}: {error}")
import jax  # pylint: disable=g-import-not-at-top
import torch  # pylint: disable=g-import-not-at-top
from noisy_jax.parallel import host_memory  # pylint: disable=g-import-not-at-top
device = jax.devices()[0]
print(f"jax: platform {device.platform}, device_kind {device.device_kind}, {jax.device_count()} device(s)")
if device.platform != "gpu":
  problems.append(f"JAX's default device is {device.platform}, not a GPU")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuda available {torch.cuda.is_available()}"
      + (f", {torch.cuda.get_device_name()}, cuDNN {torch.backends.cudnn.version()}"
         if torch.cuda.is_available() else ""))
if not torch.cuda.is_available():
  problems.append("torch.cuda.is_available() is False")
print(f"host malloc 'auto': accelerator plugins {host_memory.accelerator_plugins()}, "
      f"retain {host_memory.should_retain('auto')}")
try:
  from noisy_jax import data  # pylint: disable=g-import-not-at-top
  print(f"mnist5k: {data.load('mnist5k').x_train.shape}")
except Exception as error:  # pylint: disable=broad-except
  problems.append(f"data.load('mnist5k'): {type(error).__name__}: {error}")
for problem in problems:
  print(f"PREFLIGHT FAILED: {problem}")
sys.exit(1 if problems else 0)
EOF
preflight=$?
tail -n 8 "$outdir/env.txt" >&2
if (( preflight )); then
  echo "== preflight failed (see $outdir/env.txt); no benchmark was run" >&2
  exit 1
fi

run() {  # run NAME OUTPUT_NAME CAP_SECONDS [FLAGS...]
  local name="$1" out="$2" cap="$3"
  shift 3
  local left=$((budget - (SECONDS - total_start)))
  if ((left < 30)); then
    echo "== $out: skipped, ${left} s of the ${budget} s budget left" >&2
    echo "$out skipped -" >> "$outdir/status.txt"
    return
  fi
  local limit=$((cap < left ? cap : left))
  echo "== $out: $python -m experiments.benchmarks.$name $* ${extra[*]} (limit $limit s)" >&2
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$python" -m "experiments.benchmarks.$name" "$@" "${extra[@]}" 2>&1 \
    | tee "$outdir/$out.txt"
  local rc=${PIPESTATUS[0]}
  grep '^{"benchmark"' "$outdir/$out.txt" | tail -n 1 >> "$outdir/results.jsonl"
  echo "$out $rc $((SECONDS - start))" >> "$outdir/status.txt"
  echo "== $out: rc $rc, took $((SECONDS - start)) s" >&2
}

gpu=(--torch-device cuda)
run train_step train_step_b128 150 --channels-last --xla-options both "${gpu[@]}" --batch-size 128 --repeats 10 --warmup 3
run small_cnn_epoch small_cnn_epoch_scan 90 --jax-mode scan "${gpu[@]}" --repeats 10 --warmup 3
run small_cnn_epoch small_cnn_epoch_steps 90 --jax-mode steps "${gpu[@]}" --repeats 10 --warmup 3
run epoch epoch_scan 150 --method jo --workers 0,2 --jax-mode scan "${gpu[@]}" --repeats 5 --warmup 2
run epoch epoch_steps 150 --method jo --workers 0,2 --jax-mode steps "${gpu[@]}" --repeats 5 --warmup 2
run train_step train_step_b512 120 --channels-last "${gpu[@]}" --batch-size 512 --repeats 10 --warmup 3
run label_table_overhead label_table_overhead_small_cnn 60 --repeats 10 --warmup 3
run label_table_overhead label_table_overhead_preact_resnet32 90 --model preact_resnet32 --repeats 10 --warmup 3
run strong_augment strong_augment 60 --repeats 20 --warmup 3  # the strong views on the GPU
run compile_and_memory compile_and_memory 150 --repeats 1  # its PyTorch worker runs on the CPU (no --torch-device)

nvidia-smi --query-gpu=name,memory.used,temperature.gpu,clocks.sm,power.draw --format=csv >> "$outdir/env.txt" 2>&1
echo "== all took $((SECONDS - total_start)) s; $(wc -l < "$outdir/results.jsonl") records in $outdir/results.jsonl" >&2
cat "$outdir/status.txt" >&2
