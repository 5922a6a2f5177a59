"""One checkpointed training run in its own process, for tests/test_checkpoint.py.

  python tests/resume_worker.py --workdir=DIR --method=joint_optimization [--stop_stage=stage1 --stop_after_epoch=3]

Runs a tiny case of the method registry (experiments/configs/tiny.py: digits, 40% symmetric noise; 5 epochs here)
with `run_single(config, DIR)`. With --stop_after_epoch=K the process kills itself with SIGKILL (no cleanup, no
atexit, no flushing) as soon as epoch K of --stop_stage has been logged and the newest checkpoint due by then is on
disk (orbax writes in the background; the worker waits for the finished directory): what a preempted machine does.
Started again with the same arguments minus the stop, it resumes in DIR.

  python tests/resume_worker.py --workdir=ROOT --method=ce,sop,dividemix

Several cases (comma-separated) run one after another in ROOT/CASE, in one process: one interpreter start and one
import of JAX for all of them. Each case's output starts with a line `case CASE`, then `done ...`, `stopped CASE` or
`failed CASE` and its traceback, and ends with `seconds CASE S`: the case's wall time in this process
(time.perf_counter; tests/test_checkpoint.py reports it for experiments/ci_shares.py). A failed case does not stop the
others, and the exit code is 1 if any failed.
A stop there needs --stop_with=raise: the run is abandoned by an exception raised where the kill would be (after the
due checkpoint is on disk; nothing is closed or flushed on the way out), and the next case starts.

The golden setup (tests/test_method_runs.py): --setup=golden trains the case as experiments.golden --workdir does
(experiments/configs/tiny.py `checkpointed`: 3 epochs, checkpoints after epochs 2 and 3, in float64), and
--stop_before_last_checkpoint stops it (--stop_with=raise) once the last epoch of stage 1 is trained and before its
checkpoint is written, after the earlier checkpoints are on disk: a preemption after that epoch's work and before
its save. The resumed run starts again from the newest checkpoint before it (epoch 2's in a 3-epoch stage; the
previous stage's last in a stage of 2 epochs, as PES-semi's).

Streaming (tests/test_streaming.py): --image_folder=ROOT trains on that folder with input='streaming' (decoded by
2 Grain worker processes) and --checkpoint_every_steps=K also checkpoints inside epochs; --stop_after_step=S kills
the process right after the mid-epoch checkpoint of stage-1 step S (counted over the stage) is on disk;
--on_bad_file=skip skips the folder's files that do not decode (noisy_jax.data.bad_files).
"""

import argparse
import os
import signal
import sys
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position

from experiments.configs import tiny  # pylint: disable=g-import-not-at-top,wrong-import-position
from noisy_jax.experiment import runs  # pylint: disable=g-import-not-at-top,wrong-import-position
from noisy_jax.experiment import stages as stages_lib  # pylint: disable=g-import-not-at-top,wrong-import-position
from noisy_jax.methods import registry  # pylint: disable=g-import-not-at-top,wrong-import-position
from noisy_jax.train import checkpoint as checkpoint_lib  # pylint: disable=g-import-not-at-top,wrong-import-position


def tiny_config(case: str, *, checkpoint_every: int = 1, model: str = "mlp"):
  """The registry's tiny case `case` (experiments/configs/tiny.py) for 5 epochs with checkpoints, and for the two
  cases with their own kill tests, runs where the label table matters: Joint Optimization relabels after epochs
  2..5 from a 3-epoch history and trains a 4-epoch stage 2; truncated Lq prunes after epochs 2 and 4 with the
  best-validation parameters over 6 epochs."""
  config = tiny.get_config(case)
  if model != "mlp":
    config.model = {"name": model, "kwargs": {}}
  config.checkpoint_every = checkpoint_every
  config.keep_checkpoints = 2
  config.num_epochs = 5
  if case == "joint_optimization":
    config.optimizer.lr_boundaries = ()
    config.method.begin, config.method.history_length = 2, 3
    config.stage2.num_epochs = 4
    config.stage2.optimizer.lr_boundaries = (3,)
  elif case == "truncated_lq":
    config.num_epochs = 6
    config.optimizer.lr_boundaries = (5,)
    config.method.prune_start, config.method.prune_every = 3, 2
  return config


class Stopped(Exception):
  """Raised by --stop_with=raise where --stop_with=kill kills the process."""


def _stage(config, name: str):
  """The declared stage `name` of the config's method (noisy_jax.methods.spec.Stage)."""
  stages = registry.get(config.method.name).stages(config.method)
  return next(stage for stage in stages if stage.name == name)


def stage1_epochs(config) -> int:
  """The number of epochs of the config's stage named 'stage1' (a method's main stage, last in a multi-stage one)."""
  return int(stages_lib.config_of_stage(config, _stage(config, "stage1")).num_epochs)


def wait_for_checkpoint(workdir: str, stage: str, epoch: int, config, timeout: float = 120.0) -> None:
  """Waits until the newest checkpoint due by `epoch` is on disk (orbax saves in a background thread and renames
  the finished directory to its epoch), so that the kill happens right after it, never during it."""
  stage_config = stages_lib.config_of_stage(config, _stage(config, stage))
  num_epochs, every = int(stage_config.num_epochs), int(config.checkpoint_every)
  due = max(e for e in range(1, epoch + 1) if checkpoint_lib.is_due(e, every=every, num_epochs=num_epochs))
  path = os.path.join(checkpoint_lib.stage_dir(workdir, stage), str(due))
  deadline = time.monotonic() + timeout
  while not os.path.isdir(path):
    if time.monotonic() > deadline:
      raise TimeoutError(f"checkpoint {path} did not appear within {timeout} s")
    time.sleep(0.01)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--method", required=True, help="a tiny case of the registry, or several (comma-separated)")
  parser.add_argument("--model", default="mlp")
  parser.add_argument("--checkpoint_every", type=int, default=1)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--stop_stage", default="stage1")
  parser.add_argument("--stop_after_epoch", type=int, default=0, help="0: run to the end")
  parser.add_argument("--stop_with", choices=("kill", "raise"), default="kill", help="SIGKILL, or abandon the run")
  parser.add_argument("--setup", choices=("resume", "golden"), default="resume", help="tiny_config, or the golden run")
  parser.add_argument(
    "--stop_before_last_checkpoint", action="store_true", help="stop before the checkpoint of stage 1's last epoch"
  )
  parser.add_argument("--image_folder", default="", help="stream this image folder instead of digits")
  parser.add_argument("--on_bad_file", default="error", help="the image folder's on_bad_file (error or skip)")
  parser.add_argument("--checkpoint_every_steps", type=int, default=0)
  parser.add_argument("--stop_after_step", type=int, default=0, help="0: no kill inside an epoch")
  parser.add_argument("--num_epochs", type=int, default=0, help="0: the case's")
  parser.add_argument("--stage2_epochs", type=int, default=0, help="0: the case's")
  args = parser.parse_args(argv)
  cases = args.method.split(",")
  unknown = [c for c in cases if c not in tiny.case_names()]
  if unknown:
    parser.error(f"unknown case(s) {unknown}; known: {tiny.case_names()}")
  if len(cases) == 1:
    _run(args, cases[0], args.workdir)
    return 0
  if args.stop_after_step or ((args.stop_after_epoch or args.stop_before_last_checkpoint) and args.stop_with == "kill"):
    parser.error("a stop that kills the process takes one case; several cases stop with --stop_with=raise")
  failed = []
  for case in cases:
    print(f"case {case}", flush=True)
    start = time.perf_counter()
    try:
      _run(args, case, os.path.join(args.workdir, case))
    except Stopped:
      print(f"stopped {case}", flush=True)
    except Exception:  # pylint: disable=broad-exception-caught  (reported; the other cases still run)
      print(f"failed {case}\n{traceback.format_exc()}", flush=True)
      failed.append(case)
    print(f"seconds {case} {time.perf_counter() - start:.3f}", flush=True)
  return 1 if failed else 0


def _stop_before_checkpoint(workdir: str, epoch: int) -> None:
  """Makes checkpoint_lib.save raise Stopped instead of saving stage 1's checkpoint of `epoch` (once the checkpoints
  before it are on disk)."""
  save, stage1 = checkpoint_lib.save, os.path.abspath(checkpoint_lib.stage_dir(workdir, "stage1"))

  def stop_or_save(manager, number, **kwargs):
    if number == epoch and os.path.abspath(str(manager.directory)) == stage1:
      manager.wait_until_finished()
      print(f"epoch stage1 {epoch} trained, not saved", flush=True)
      raise Stopped(f"stage1 epoch {epoch}, before its checkpoint")
    save(manager, number, **kwargs)

  checkpoint_lib.save = stop_or_save


def _config(args, case: str):
  """The config of tiny case `case` with the command line's options (module docstring)."""
  if args.setup == "golden":
    config = tiny.checkpointed(tiny.get_config(case))
  else:
    config = tiny_config(case, checkpoint_every=args.checkpoint_every, model=args.model)
  config.seed = args.seed
  if args.num_epochs:
    config.num_epochs = args.num_epochs
  if args.stage2_epochs:
    config.stage2.num_epochs = args.stage2_epochs
  if args.image_folder:
    config.dataset = "image_folder"
    config.dataset_kwargs = {"root": args.image_folder, "on_bad_file": args.on_bad_file}
    config.input, config.input_workers = "streaming", 2
  config.checkpoint_every_steps = args.checkpoint_every_steps
  return config


def _kill_after_step(step: int) -> None:
  """Makes checkpoint_lib.save kill the process right after the mid-epoch checkpoint of stage step `step`."""
  save = checkpoint_lib.save

  def save_then_maybe_die(manager, number, **kwargs):
    save(manager, number, **kwargs)
    if str(manager.directory).endswith(".steps") and number == step:
      manager.wait_until_finished()  # the mid-epoch checkpoint is on disk: die right after it
      print(f"killed at step {number}", flush=True)
      os.kill(os.getpid(), signal.SIGKILL)

  checkpoint_lib.save = save_then_maybe_die


def _run(args, case: str, workdir: str) -> None:
  """Trains tiny case `case` in `workdir` with the command line's options (module docstring)."""
  config = _config(args, case)

  def log_fn(record):
    print(f"epoch {record['stage']} {record['epoch']}", flush=True)
    if args.stop_after_epoch and (record["stage"], record["epoch"]) == (args.stop_stage, args.stop_after_epoch):
      wait_for_checkpoint(workdir, record["stage"], record["epoch"], config)
      if args.stop_with == "raise":
        raise Stopped(f"{record['stage']} epoch {record['epoch']}")
      os.kill(os.getpid(), signal.SIGKILL)

  save = checkpoint_lib.save
  if args.stop_after_step:
    _kill_after_step(args.stop_after_step)
  if args.stop_before_last_checkpoint:
    _stop_before_checkpoint(workdir, stage1_epochs(config))
  try:
    with jax.enable_x64(args.setup == "golden"):
      summary = runs.run_single(config, workdir, log_fn=log_fn)
  finally:
    checkpoint_lib.save = save  # the next case of the process saves as usual
  print(f"done {summary['last_test_accuracy']:.4f}", flush=True)


if __name__ == "__main__":
  sys.exit(main())
