#!/usr/bin/env bash
# Runs every benchmark with its default settings, one after the other, on a quiet machine.
#
#   bash experiments/benchmarks/run_all.sh [OUTDIR] [-- EXTRA FLAGS FOR EVERY SCRIPT, e.g. --threads 2]
#
# Each script's full output goes to OUTDIR/NAME.txt (default workdirs/benchmarks/DATE-TIME); the last line of each
# is its JSON record, collected in OUTDIR/results.jsonl. Run from the repository root with the venv active.
# The total time is printed at the end (the benchmarks README's environment line quotes the last full run).
set -euo pipefail

outdir="workdirs/benchmarks/$(date +%Y%m%d-%H%M%S)"
if [[ $# -gt 0 && "$1" != "--" ]]; then
  outdir="$1"
  shift
fi
[[ $# -gt 0 && "$1" == "--" ]] && shift
extra=("$@")
mkdir -p "$outdir"
: > "$outdir/results.jsonl"

run() {  # run NAME OUTPUT_NAME [FLAGS...]
  local name="$1" out="$2"
  shift 2
  echo "== $out: python -m experiments.benchmarks.$name $* ${extra[*]}" >&2
  local start=$SECONDS
  python -m "experiments.benchmarks.$name" "$@" "${extra[@]}" | tee "$outdir/$out.txt"
  tail -n 1 "$outdir/$out.txt" >> "$outdir/results.jsonl"
  echo "== $out took $((SECONDS - start)) s" >&2
}

total_start=$SECONDS
uptime >&2
run train_step train_step --channels-last
run train_step train_step_1thread --threads 1 --channels-last --repeats 6  # the benchmarks README's 1-thread row
run epoch epoch --workers 0,2
run small_cnn_epoch small_cnn_epoch
run label_table_overhead label_table_overhead_small_cnn
run label_table_overhead label_table_overhead_preact_resnet32 --model preact_resnet32 --repeats 5 --steps 3
run two_networks two_networks
run two_network_epochs two_network_epochs
run strong_augment strong_augment
run compile_and_memory compile_and_memory
run streaming streaming  # writes workdirs/benchmarks/png50k once (50,000 PNGs), then reuses it
uptime >&2
echo "== all benchmarks took $((SECONDS - total_start)) s; outputs in $outdir" >&2
