r"""Golden values: exact numbers of short runs of every method, stored with the environment that produced them.

  python -m experiments.golden            # compute, compare with tests/golden_values.json, print what moved
  python -m experiments.golden --write    # after an intended change: store the new values (then `git diff`)

`tests/test_golden.py` (`pytest -k golden`) computes the same cases and compares them with the stored file:
- in the environment that produced the file (`noisy_jax.experiment.environment.describe()`: package versions, backend,
  device count, XLA flags, CPU model and its vector ISA) every value must be *equal*, float for float and checksum
  for checksum;
- in another environment (the other CPU vendor's kernels, another JAX, 2 devices, fast math) floats are compared
  within the tolerances of `TOLERANCES`, checksums are not compared, and the test warns which environment fields
  differ. One float32 ulp in a loss constant still fails there.

Why that holds: the losses and the runs are computed in float64 (`jax.enable_x64`: inputs, parameters, logits,
label table and method state; noisy_jax.core.precision). Another CPU's kernels (an AVX-512 vs an AVX2 matrix product)
round differently; in float32 that is ~1e-7 per product, and a small-loss selection (Co-teaching's sort, truncated
Lq's pruning, DivideMix's GMM split) turns it into another selected set within 3 epochs: the float32 golden runs of
Co-teaching+ written on an Intel Xeon ended 14% apart in parameter sum on an AMD EPYC. In float64 the rounding is
~1e-16 and no selection moves, so a run stays continuous in the rounding: its drift across environments measured
at most 4e-11 (losses 8e-16; TOLERANCES), far below what one float32 ulp of a constant moves (~6e-8). The data,
noise and initialisation cases are float32 (what users get): integer draws and elementwise code, bit for bit the
same on AVX2 and AVX-512 machines, one float32 ulp apart where the CPU path has no FMA (within TOLERANCES["data"]).

The cases (each a flat dict of named numbers):
- `data/NAME`: the embedded datasets' splits (sizes, label checksums, image statistics).
- `noise/TYPE`: every noise model drawn on digits' training labels (flip count, noisy-label checksum).
- `init/MODEL`: initial parameters of the models (count, sum of squares, checksum).
- `losses/NAME`: every per-example loss and the JO batch loss on fixed logits: values and gradients.
- `runs/NAME`: a 3-epoch run of every method on digits (MLP), JO with its stage 2, one small-CNN run, one run of
  NCE+AGCE: per-epoch
  train loss and test / validation accuracy, final parameters' and label table's sums and checksums (with the
  method's own rows: ELR's targets, SOP's u and v; both networks' parameters for Co-teaching).

`--timings PATH` also writes how long each case took to compute (time.perf_counter; never part of the values
compared or stored): {"cases": {case: seconds}, "groups": {group: seconds}}. Each run is timed alone; the other groups
are computed in one go (the losses in one program) and their time is split evenly over their cases.
tests/test_golden.py and tests/test_method_runs.py report each case's seconds in its test (experiments/ci_shares.py).

`--workdir DIR` trains each run in DIR/NAME with checkpoints (experiments/configs/tiny.py `checkpointed`), with the
same numbers: tests/test_method_runs.py computes the runs so, once, and also uses them as the reference of each
method's stop/resume test and as the 1-device side of its 1 == 4 devices test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
import warnings

import ml_collections
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Golden values are compiled with LLVM's optimisation passes off, as the test suite compiles everything
# (tests/conftest.py): IEEE semantics are kept (no fast math), and the runs compile faster.
# main() adds it to the caller's XLA_FLAGS before JAX starts; a caller who sets the level keeps theirs (and is then
# in another environment: the comparison is within TOLERANCES).
COMPILE_FLAG = "--xla_backend_optimization_level=0"
GOLDEN_FILE = os.path.join(REPO, "tests", "golden_values.json")
REGENERATE = "python -m experiments.golden --write"

# Tolerances used only when the environment differs from the stored one: (relative, absolute) per kind of value.
# Measured drift of the float64 cases against this machine's own (AMD EPYC, AVX2; `python -m experiments.golden
# --groups losses,runs --dump A.json`, then each setting with `--stored A.json`, which prints the largest
# differences by kind): XLA_FLAGS=--xla_cpu_max_isa=AVX or SSE4_2 (other kernels, no FMA) moved losses by 4.2e-16
# and runs by 1.7e-11 (Co-teaching+'s parameter sum: Adam divides rounding noise in near-zero gradients by its own
# square root); 2 simulated devices (another reduction order) 0 and 1.6e-11; XLA fast math 3.3e-13 and 3.5e-11. No
# accuracy moved in any of them. The bounds below are ~300x the largest, and still ~600x below the 6e-8 relative
# change that one float32 ulp of a loss constant (RCE's A) makes. The float32 cases (data, init) are elementwise
# code and integer draws: equal on AVX-512 and AVX2 machines (an Intel-written file matched an AMD EPYC bit for bit),
# one float32 ulp apart without FMA.
TOLERANCES = {
  "loss": (1e-10, 1e-12),  # one evaluation of a loss and its gradient (float64)
  "accuracy": (0.0, 1e-9),  # a fraction of 180-359 examples after 2-3 epochs: must not move by one example
  "run": (1e-8, 1e-10),  # train losses, sums (of squares) of parameters and label tables (float64 runs)
  "data": (1e-6, 1e-7),  # image statistics, initial parameters (float32)
}


# ---------------------------------------------------------------------------------------------------------------
# Building blocks


def checksum(*arrays) -> str:
  """sha256 (first 16 hex digits) of the arrays' dtypes, shapes and bytes, in order."""
  digest = hashlib.sha256()
  for array in arrays:
    array = np.ascontiguousarray(np.asarray(array))
    digest.update(f"{array.dtype.str}{array.shape}".encode())
    digest.update(array.tobytes())
  return digest.hexdigest()[:16]


def tree_numbers(tree, prefix: str) -> dict:
  """Count, sum, sum of squares (float64) and checksum of every leaf of a pytree, in the tree's leaf order."""
  import jax  # pylint: disable=g-import-not-at-top

  leaves = [np.asarray(x) for x in jax.tree.leaves(jax.device_get(tree))]
  flat = np.concatenate([x.astype(np.float64).ravel() for x in leaves]) if leaves else np.zeros(0)
  return {
    f"{prefix}_count": int(flat.size),
    f"{prefix}_sum": float(flat.sum()),
    f"{prefix}_sum_squares": float(np.sum(flat * flat)),
    f"{prefix}_sha256": checksum(*leaves),
  }


def kind_of(case: str, key: str) -> str:
  """Which tolerance of TOLERANCES a value takes in another environment."""
  if case.startswith("losses/"):
    return "loss"
  if "accuracy" in key:
    return "accuracy"
  if case.startswith(("data/", "init/")):
    return "data"
  return "run"


# ---------------------------------------------------------------------------------------------------------------
# The cases


def data_cases() -> dict[str, dict]:
  from noisy_jax import data  # pylint: disable=g-import-not-at-top

  out = {}
  for name in ("digits", "mnist5k"):
    dataset = data.load(name)
    case = {}
    for split in ("train", "val", "test"):
      x, y = getattr(dataset, f"x_{split}"), getattr(dataset, f"y_{split}")
      case[f"{split}_size"] = int(len(y))
      case[f"{split}_labels_sha256"] = checksum(y)
      case[f"{split}_images_sha256"] = checksum(x)
      case[f"{split}_image_mean"] = float(np.mean(x, dtype=np.float64))
    standardized = data.standardize(dataset, "per_channel")
    case["standardized_train_sum_squares"] = float(np.sum(np.square(standardized.x_train, dtype=np.float64)))
    out[f"data/{name}"] = case
  return out


def noise_cases() -> dict[str, dict]:
  import jax  # pylint: disable=g-import-not-at-top
  import ml_collections  # pylint: disable=g-import-not-at-top

  from noisy_jax import data  # pylint: disable=g-import-not-at-top
  from noisy_jax.data import inputs as data_inputs  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import inputs  # pylint: disable=g-import-not-at-top

  dataset = data.load("digits")
  settings = {
    "symmetric": ("symmetric", 0.4, ""),
    "symmetric_include_true": ("symmetric_include_true", 0.4, ""),
    "pairflip": ("pairflip", 0.45, ""),
    "asymmetric_mnist": ("asymmetric", 0.4, "mnist"),
    "pseudo_labels": (data_inputs.PSEUDO_LABEL_NOISE, 0.4, ""),
  }
  out = {}
  for name, (noise_type, rate, noise_dataset) in settings.items():
    config = ml_collections.ConfigDict(
      {"noise": {"type": noise_type, "rate": rate, "exact": True, "dataset": noise_dataset, "num_components": 20}}
    )
    noisy, report = inputs.noisy_training_labels(config, dataset, jax.random.PRNGKey(0))
    out[f"noise/{name}"] = {
      "flipped": int(np.sum(noisy != dataset.y_train)),
      "noisy_labels_sha256": checksum(noisy),
      "flip_rate": float(report["flip_rate"]),
    }
  return out


# (model name, input shape): the default experiment's networks. The ResNets are left out for time (~5-13 s to
# compile an init on 2 cores); tests/test_paper_models.py checks them against an independent PyTorch definition.
INIT_MODELS = (("mlp", (8, 8, 1)), ("small_cnn", (28, 28, 1)))


def init_cases() -> dict[str, dict]:
  import jax  # pylint: disable=g-import-not-at-top

  from noisy_jax import models  # pylint: disable=g-import-not-at-top

  out = {}
  for name, shape in INIT_MODELS:
    model = models.get(name, num_classes=10)
    variables = jax.jit(lambda key, m=model, s=shape: m.init(key, np.zeros((1, *s), np.float32), train=False))(
      jax.random.PRNGKey(0)
    )
    out[f"init/{name}"] = tree_numbers(variables["params"], "params")
  return out


def _loss_inputs(num_classes: int = 10):
  """Fixed logits [24, C] at scales 1 to 30 (30 puts p within 1e-5 of 0 or 1: the clamps), one-hot and soft labels:
  float32 values, widened to float64."""
  rng = np.random.default_rng(20261124)
  scale = np.repeat(np.array([1.0, 3.0, 10.0, 30.0], np.float32), 6)[:, None]
  logits = rng.standard_normal((24, num_classes)).astype(np.float32) * scale
  one_hot = np.eye(num_classes, dtype=np.float32)[rng.integers(0, num_classes, 24)]
  soft = rng.dirichlet(np.ones(num_classes), 24).astype(np.float32)
  return tuple(x.astype(np.float64) for x in (logits, one_hot, soft))


def loss_settings() -> dict[str, tuple]:
  """case name -> (loss name, keyword hyper-parameters): every loss at its defaults, plus the named conventions."""
  from noisy_jax.core import losses  # pylint: disable=g-import-not-at-top

  settings = {name: (name, {}) for name in losses.names()}
  settings["nce_rce_apl_log_zero"] = ("nce_rce", {"log_zero": losses.APL_LOG_ZERO})
  settings["symmetric_cross_entropy_apl_log_zero"] = ("symmetric_cross_entropy", {"log_zero": losses.APL_LOG_ZERO})
  settings["generalized_cross_entropy_q0.3"] = ("generalized_cross_entropy", {"q": 0.3})
  settings["encouraging_loss_log_end1"] = ("encouraging_loss", {"log_end": 1.0})
  settings["anl_fl_detached"] = ("anl_fl", {"alpha": 5.0, "beta": 5.0, "detach_modulator": True})
  settings["bi_tempered_original_iterations"] = ("bi_tempered_logistic_loss", {"t1": 0.5, "t2": 1.5, "num_iters": 5})
  settings["bi_tempered_finite_support"] = ("bi_tempered_logistic_loss", {"t1": 0.8, "t2": 0.7, "label_smoothing": 0.1})
  settings["logit_clip_original_threshold"] = ("logit_clip", {"temperature": 1.5, "original_threshold": True})
  return settings


def loss_cases(settings: dict[str, tuple] | None = None, *, x64: bool = True) -> dict[str, dict]:
  """Values and gradients of every loss of `settings` (default `loss_settings()`) and of the JO batch loss, in
  float64 (x64=False: in float32, to measure what float32 would drift; never stored)."""
  import jax  # pylint: disable=g-import-not-at-top

  with jax.enable_x64(x64):
    return _loss_cases(settings)


def _loss_cases(settings):
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  from noisy_jax.core import losses  # pylint: disable=g-import-not-at-top

  logits, one_hot, soft = _loss_inputs()
  settings = loss_settings() if settings is None else settings
  prior = np.full((10,), 0.1, np.float64)

  @jax.jit
  def every_loss(logits, one_hot, soft):  # one program for all cases: one compilation, not 40
    results = {}
    for case, (name, kwargs) in settings.items():
      per_example = jax.vmap(jax.value_and_grad(lambda z, y, fn=losses.get(name), kw=kwargs: fn(z, y, **kw)))
      results[case] = {"one_hot": per_example(logits, one_hot), "soft": per_example(logits, soft)}
    results["joint_optimization_loss"] = jax.value_and_grad(
      lambda z: losses.joint_optimization_loss(z, soft, prior=prior, alpha=1.2, beta=0.8)
    )(logits)
    return results

  results = jax.device_get(every_loss(jnp.asarray(logits), jnp.asarray(one_hot), jnp.asarray(soft)))
  out = {}
  for case in settings:
    numbers = {}
    for label_name, (values, grads) in results[case].items():
      numbers.update(
        {
          f"{label_name}_value_sum": float(values.astype(np.float64).sum()),
          f"{label_name}_value_max": float(values.max()),
          f"{label_name}_grad_sum_squares": float(np.sum(grads.astype(np.float64) ** 2)),
          f"{label_name}_sha256": checksum(values, grads),
        }
      )
    out[f"losses/{case}"] = numbers
  value, grad = results["joint_optimization_loss"]
  out["losses/joint_optimization_loss"] = {
    "value": float(value),
    "grad_sum_squares": float(np.sum(np.asarray(grad, np.float64) ** 2)),
    "sha256": checksum(value, grad),
  }
  return out


def run_configs() -> dict:
  """name -> config of a short run on digits at 40% symmetric noise: every registered method's tiny cases
  (experiments/configs/tiny.py: 3 epochs, an MLP), one 2-epoch small-CNN run, and one run of an asymmetric loss's
  active-passive pair (NCE+AGCE with ALFs' CIFAR-10 values)."""
  from experiments.configs import tiny  # pylint: disable=g-import-not-at-top

  configs = {case: tiny.get_config(case) for case in tiny.case_names()}
  cnn = tiny.base()
  cnn.model = ml_collections.ConfigDict({"name": "small_cnn", "kwargs": {}})
  cnn.num_epochs = 2
  cnn.optimizer.lr_boundaries = ()
  configs["ce_small_cnn"] = cnn
  asymmetric_pair = tiny.base()
  asymmetric_pair.method = ml_collections.ConfigDict(
    {"name": "loss", "loss": "nce_agce", "loss_kwargs": {"alpha": 1.0, "beta": 4.0, "a": 6.0, "q": 1.5}}
  )
  configs["nce_agce"] = asymmetric_pair
  return configs


def run_cases(
  names=None, *, x64: bool = True, seconds: dict | None = None, workdir: str | None = None
) -> dict[str, dict]:
  """The `runs/NAME` cases (all, or those of `names`), each run in float64 (noisy_jax.core.precision; x64=False: in
  float32, to measure what float32 would drift; never stored). seconds: if given, gets each case's wall time.
  workdir: if given, each run is trained in workdir/NAME, checkpointed (experiments/configs/tiny.py `checkpointed`:
  its checkpoints, metrics.jsonl and summary stay there), with the same numbers as without."""
  import jax  # pylint: disable=g-import-not-at-top

  from experiments.configs import tiny  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import runs  # pylint: disable=g-import-not-at-top

  out = {}
  for name, config in run_configs().items():
    if names is not None and name not in names:
      continue
    start = time.perf_counter()
    run_dir = os.path.join(workdir, name) if workdir else None
    if run_dir:
      tiny.checkpointed(config)
    with jax.enable_x64(x64):
      summary = runs.run_single(config, run_dir, keep_arrays=True)
    history = summary["history"]
    case = {
      "train_loss": [float(r["train_loss"]) for r in history],
      "test_accuracy": [float(r["test_accuracy"]) for r in history],
      "val_accuracy": [float(r["val_accuracy"]) for r in history],
      "realised_noise_rate": float(summary["noise"]["realised_rate"]),
      "noise_sha256": summary["noise"]["sha256"],
    }
    arrays = summary["arrays"]
    case.update(tree_numbers(arrays["stage1"]["params"], "params"))
    table = arrays["label_table"]
    case.update(tree_numbers(table.soft_labels, "table_soft_labels"))
    case.update(tree_numbers(table.weights, "table_weights"))
    if "stage2" in arrays:
      case.update(tree_numbers(arrays["stage2"]["params"], "stage2_params"))
    if "ema_params" in arrays.get("stage1_method_state", {}):  # ELR+'s weight averages
      case.update(tree_numbers(arrays["stage1_method_state"]["ema_params"], "ema_params"))
    for row_name, rows in sorted(table.method_rows.items()):
      case.update(tree_numbers(rows, f"table_{row_name}"))
    out[f"runs/{name}"] = case
    if seconds is not None:
      seconds[f"runs/{name}"] = time.perf_counter() - start
  return out


GROUPS = {"data": data_cases, "noise": noise_cases, "init": init_cases, "losses": loss_cases, "runs": run_cases}


def compute(
  groups=tuple(GROUPS), *, run_names=None, x64: bool = True, timings: dict | None = None, workdir: str | None = None
) -> dict[str, dict]:
  """Every case of the named groups (default: all), keyed 'group/name'; `run_names` limits the runs group; x64=False
  computes the losses and runs in float32 (a measurement of float32's drift, never stored). timings: if given, gets
  {"cases": {case: seconds}, "groups": {group: seconds}} (the module docstring's --timings). workdir: the runs are
  trained there, checkpointed (`run_cases`)."""
  cases, case_seconds, group_seconds = {}, {}, {}
  for group in groups:
    start = time.perf_counter()
    if group == "runs":
      computed = run_cases(run_names, x64=x64, seconds=case_seconds, workdir=workdir)
    elif group == "losses":
      computed = loss_cases(x64=x64)
    else:
      computed = GROUPS[group]()
    group_seconds[group] = time.perf_counter() - start
    if group != "runs":  # computed in one go: its time split evenly over its cases
      case_seconds.update({case: group_seconds[group] / len(computed) for case in computed})
    cases.update(computed)
  if timings is not None:
    timings.update({"cases": case_seconds, "groups": group_seconds})
  return cases


# ---------------------------------------------------------------------------------------------------------------
# Storing and comparing


def load(path: str = GOLDEN_FILE) -> dict:
  """The stored golden file: {"environment", "regenerate", "cases"}."""
  with open(path) as f:
    return json.load(f)


def store(cases: dict[str, dict], env: dict, path: str = GOLDEN_FILE) -> None:
  """Writes the golden file (sorted keys, one value per line: a diff shows what moved), via a temp file."""
  payload = {"regenerate": REGENERATE, "environment": env, "cases": cases}
  from noisy_jax.core import atomic_files  # pylint: disable=g-import-not-at-top  (main sets XLA_FLAGS first)

  atomic_files.write_text(path, json.dumps(payload, indent=1, sort_keys=True) + "\n")


def _close(stored: float, current: float, rel: float, abs_: float) -> bool:
  if math.isnan(stored) or math.isnan(current):
    return math.isnan(stored) and math.isnan(current)
  return abs(stored - current) <= max(abs_, rel * abs(stored))


def compare_case(case: str, stored: dict, current: dict, *, exact: bool) -> list[str]:
  """The differences of one case: 'case key: stored -> current' lines (empty when it matches).

  exact: every value must be equal (the same environment). Otherwise floats are compared within TOLERANCES[kind]
  and checksums (keys ending in "sha256") are skipped; integers (sizes, counts) must still be equal.
  """
  problems = []
  for key in sorted(set(stored) | set(current)):
    if key not in stored or key not in current:
      problems.append(
        f"{case} {key}: {'absent' if key not in stored else stored[key]!r} -> "
        f"{'absent' if key not in current else current[key]!r}"
      )
      continue
    a, b = stored[key], current[key]
    if exact:
      if a != b:
        problems.append(f"{case} {key}: {a!r} -> {b!r}")
      continue
    if key.endswith("sha256"):
      continue
    rel, abs_ = TOLERANCES[kind_of(case, key)]
    a_list, b_list = (a, b) if isinstance(a, list) else ([a], [b])
    if len(a_list) != len(b_list):
      problems.append(f"{case} {key}: {len(a_list)} values -> {len(b_list)}")
    elif any(
      x != y if isinstance(x, int) and isinstance(y, int) else not _close(float(x), float(y), rel, abs_)
      for x, y in zip(a_list, b_list)
    ):
      problems.append(f"{case} {key}: {a!r} -> {b!r} (beyond rel {rel:g} / abs {abs_:g})")
  return problems


def drift(stored_cases: dict[str, dict], cases: dict[str, dict]) -> dict[str, dict]:
  """The largest difference per kind of value (TOLERANCES' kinds) between stored and computed floats:
  {kind: {"abs": max |a - b|, "rel": max |a - b| / |a|, "where": 'case key' of the largest relative one}}.
  Checksums and integers are left out. What the tolerances were chosen from (run it in another environment)."""
  worst = {}
  for case in sorted(set(stored_cases) & set(cases)):
    for key in sorted(set(stored_cases[case]) & set(cases[case])):
      a, b = stored_cases[case][key], cases[case][key]
      if key.endswith("sha256"):
        continue
      for x, y in zip(*((a, b) if isinstance(a, list) else ([a], [b]))):
        if isinstance(x, int) and isinstance(y, int):
          continue
        entry = worst.setdefault(kind_of(case, key), {"abs": 0.0, "rel": 0.0, "where": ""})
        diff = abs(float(x) - float(y))
        entry["abs"] = max(entry["abs"], diff)
        rel = diff / abs(float(x)) if x else (0.0 if not diff else math.inf)
        if rel > entry["rel"]:
          entry["rel"], entry["where"] = rel, f"{case} {key}"
  return worst


def compare(stored_file: dict, cases: dict[str, dict], current_env: dict) -> tuple[bool, list[str], list[str]]:
  """(exact?, environment differences, value differences) of computed `cases` against a stored golden file."""
  from noisy_jax.experiment import environment  # pylint: disable=g-import-not-at-top

  env_differences = environment.differences(stored_file["environment"], current_env)
  exact = not env_differences
  problems = []
  for case in sorted(set(stored_file["cases"]) | set(cases)):
    if case not in cases or case not in stored_file["cases"]:
      where = "stored only" if case not in cases else "computed only (not stored)"
      problems.append(f"{case}: {where}; regenerate with `{REGENERATE}`")
      continue
    problems += compare_case(case, stored_file["cases"][case], cases[case], exact=exact)
  return exact, env_differences, problems


def with_compile_flag(flags: str) -> str:
  """XLA_FLAGS `flags` with COMPILE_FLAG added, unless they set the optimisation level themselves."""
  return flags if "xla_backend_optimization_level" in flags else f"{flags} {COMPILE_FLAG}".strip()


def main(argv=None) -> int:
  os.environ["XLA_FLAGS"] = with_compile_flag(os.environ.get("XLA_FLAGS", ""))  # before JAX's backend starts
  parser = argparse.ArgumentParser(
    description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
  )
  parser.add_argument("--write", action="store_true", help=f"store the computed values in {GOLDEN_FILE}")
  parser.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated subset of {list(GROUPS)}")
  parser.add_argument(
    "--runs", default="", help="comma-separated names of the runs to compute (default: all of run_configs())"
  )
  parser.add_argument(
    "--float32",
    action="store_true",
    help="compute the losses and runs in float32 instead of "
    "float64: to measure how far float32 drifts (with --dump / --stored); cannot be written",
  )
  parser.add_argument(
    "--timings", default="", help="also write each case's compute time in seconds to this JSON file (never stored)"
  )
  parser.add_argument(
    "--workdir",
    default="",
    help="train each run in WORKDIR/NAME with checkpoints (the same numbers): tests/test_method_runs.py resumes "
    "stopped runs against them and compares them with 4 devices",
  )
  parser.add_argument("--stored", default=GOLDEN_FILE, help="the golden file to compare with (default: %(default)s)")
  parser.add_argument(
    "--dump",
    default="",
    help="also write the computed values with this environment to this path "
    "(a golden file of this environment: compare another one with it through --stored)",
  )
  args = parser.parse_args(argv)
  groups = tuple(g for g in args.groups.split(",") if g)
  unknown = sorted(set(groups) - set(GROUPS))
  if unknown:
    parser.error(f"unknown group(s) {unknown}; known: {list(GROUPS)}")
  from noisy_jax.experiment import environment  # pylint: disable=g-import-not-at-top

  env = environment.describe()
  run_names = tuple(n for n in args.runs.split(",") if n) or None
  unknown = sorted(set(run_names or ()) - set(run_configs()))
  if unknown:
    parser.error(f"unknown run(s) {unknown}; known: {sorted(run_configs())}")
  if args.write and (run_names or set(groups) != set(GROUPS) or args.float32):
    parser.error("--write stores every group and run in float64: leave --groups, --runs and --float32 out")
  timings = {}
  cases = compute(groups, run_names=run_names, x64=not args.float32, timings=timings, workdir=args.workdir or None)
  if args.timings:
    with open(args.timings, "w") as f:
      json.dump(timings, f, indent=1, sort_keys=True)
  if args.write:
    store(cases, env)
    print(f"wrote {len(cases)} cases to {GOLDEN_FILE} ({environment.summary_line(env)})")
    return 0
  if args.dump:
    store(cases, env, args.dump)
  stored = load(args.stored)
  stored["cases"] = {
    k: v
    for k, v in stored["cases"].items()
    if k.split("/")[0] in groups and (run_names is None or not k.startswith("runs/") or k.split("/", 1)[1] in run_names)
  }
  exact, env_differences, problems = compare(stored, cases, env)
  print(
    "environment: "
    + (
      "same as the stored one: values must be equal"
      if exact
      else "differs from the stored one (" + "; ".join(env_differences) + "): within tolerances"
    )
  )
  print("\n".join(problems) if problems else f"all {len(cases)} cases match")
  if not exact:
    print("largest differences from the stored values, by kind (tolerance: relative / absolute):")
    for kind, entry in sorted(drift(stored["cases"], cases).items()):
      rel, abs_ = TOLERANCES[kind]
      print(
        f"  {kind:8s} rel {entry['rel']:.2g}, abs {entry['abs']:.2g} ({rel:g} / {abs_:g})"
        + (f"  at {entry['where']}" if entry["where"] else "")
      )
  return 1 if problems else 0


if __name__ == "__main__":
  warnings.simplefilter("default")
  sys.exit(main())
