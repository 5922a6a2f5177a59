"""Run-to-run determinism on this machine's default device: one config and seed trained in fresh processes.

A run must be reproducible from its config and seed. On the CPU it is (bit-identical); on a GPU, XLA's atomic
scatter-adds, select-and-scatter (the max-pool gradient) and timing-based kernel autotuning can make two runs of
one program differ, so `fit` compiles with `train.GPU_DETERMINISM_OPTIONS` unless `config.gpu_deterministic` is
False. This script trains the same config `--runs` times, each in its own process (autotuning starts afresh), with
`gpu_deterministic` True and/or False, and prints whether the per-epoch records and the final parameters are
bit-identical across the processes, and the largest parameter difference if not.

The config: cross entropy, SmallCNN on the 8x8 digits with 20% symmetric noise, 1-pixel crops and flips (the
augmentation gathers pixels by index; the max-pool gradient scatters), batch 128.

  python -m experiments.benchmarks.determinism [--runs 2] [--epochs 3] [--gpu-deterministic both|true|false]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

TIMING = ("seconds", "steps_per_second")


def _config(epochs: int, gpu_deterministic: bool):
  import ml_collections  # pylint: disable=g-import-not-at-top

  from experiments.configs import ce  # pylint: disable=g-import-not-at-top

  config = ce.get_config()
  config.dataset = "digits"
  config.noise.rate = 0.2
  config.num_epochs = epochs
  config.model = ml_collections.ConfigDict({"name": "small_cnn", "kwargs": {}})
  config.augment.update({"crop_padding": 1, "flip": True})
  config.gpu_deterministic = gpu_deterministic
  return config


def _child(epochs: int, gpu_deterministic: bool) -> None:
  """Trains once; prints one JSON line: the records without timings and the final parameters as lists."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  from noisy_jax.experiment import runs  # pylint: disable=g-import-not-at-top

  out = runs.run_single(_config(epochs, gpu_deterministic), keep_arrays=True)
  history = [{k: v for k, v in r.items() if k not in TIMING} for r in out["history"]]
  params = [np.asarray(x, np.float64).ravel().tolist() for x in jax.tree.leaves(out["arrays"]["stage1"])]
  print("RESULT " + json.dumps({"history": history, "params": params, "device": str(jax.devices()[0])}))


def _run_child(epochs: int, gpu_deterministic: bool) -> dict:
  cmd = [
    sys.executable,
    "-m",
    "experiments.benchmarks.determinism",
    "--child",
    str(gpu_deterministic),
    "--epochs",
    str(epochs),
  ]
  proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
  if proc.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
  return json.loads(line[len("RESULT ") :])


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", type=int, default=2, help="fresh processes per setting (>= 2)")
  parser.add_argument("--epochs", type=int, default=3)
  parser.add_argument("--gpu-deterministic", default="both", choices=("both", "true", "false"))
  parser.add_argument("--child", choices=("True", "False"), help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child is not None:
    _child(args.epochs, args.child == "True")
    return
  if args.runs < 2:
    parser.error(f"--runs={args.runs}: at least 2 runs are needed to compare")
  settings = {"both": (True, False), "true": (True,), "false": (False,)}[args.gpu_deterministic]
  record = {"benchmark": "determinism", "epochs": args.epochs, "runs": args.runs, "results": {}}
  for deterministic in settings:
    outs = [_run_child(args.epochs, deterministic) for _ in range(args.runs)]
    first = outs[0]
    same_history = all(o["history"] == first["history"] for o in outs[1:])
    max_diff = max(abs(a - b) for o in outs[1:] for pa, pb in zip(o["params"], first["params"]) for a, b in zip(pa, pb))
    accuracies = [o["history"][-1].get("test_accuracy") for o in outs]
    record["results"][f"gpu_deterministic={deterministic}"] = {
      "records_identical": same_history,
      "max_param_difference": max_diff,
      "last_test_accuracy": accuracies,
    }
    record["device"] = first["device"]
    print(
      f"gpu_deterministic={deterministic}: {args.runs} processes on {first['device']}: records "
      f"{'identical' if same_history else 'DIFFER'}, largest parameter difference {max_diff:.3g}, "
      f"last test accuracies {accuracies}"
    )
  print(json.dumps(record))


if __name__ == "__main__":
  main()
