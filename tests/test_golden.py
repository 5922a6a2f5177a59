"""Golden values (`pytest -k golden`): the data, noise, initialisation and loss numbers against
tests/golden_values.json; every method's runs are compared in tests/test_method_runs.py (test_golden_run).

In the environment that produced the file every value must be equal; in another one (other package versions,
device count, XLA flags or CPU) floats are compared within experiments.golden.TOLERANCES and a warning names the
environment fields that differ. After an intended change: `python -m experiments.golden --write`, then read the
diff of tests/golden_values.json and re-measure the README tables it touches (experiments/regenerate_readme.py).
"""

import json
import os
import subprocess
import sys
import types
from typing import NamedTuple
import warnings

import numpy as np
import pytest

from experiments import ci_shares
from experiments import golden
from noisy_jax.core import losses
from noisy_jax.experiment import environment

STORED = golden.load()
# The selection-based runs: a rounding difference flips a float32 small-loss sort or pruning threshold. DivideMix
# (its GMM split) is left to the golden check on the machine's own ISA: its run was a third of this test's time.
SELECTION_RUNS = ("coteaching", "coteaching_plus", "truncated_lq")


class Computed(NamedTuple):
  """What the golden process computed: its environment, its cases and each case's seconds (experiments.golden
  --timings: its wall time in that process, a group's time split evenly over its cases)."""

  environment: dict
  cases: dict
  seconds: dict


# The groups computed here; the runs group (every method's short run) is computed in tests/test_method_runs.py, where
# the same runs also serve the stop/resume and 1 == 4 devices tests.
GROUPS = tuple(g for g in golden.GROUPS if g != "runs")
CASES = sorted(c for c in STORED["cases"] if c.split("/", 1)[0] in GROUPS)


def _narrowed_arguments(items) -> list[str]:
  """experiments.golden's --groups for the golden cases among `items` (the session's selected tests): every group of
  GROUPS when every case of them is selected, or a test of this module that uses the computed cases other than
  test_golden_case is (test_golden_every_computed_case_is_stored needs them all), else the selected cases' groups."""
  here = os.path.abspath(__file__)
  selected = set()
  for item in items:
    if os.path.abspath(str(item.path)) != here or "current" not in getattr(item, "fixturenames", ()):
      continue
    if getattr(item, "originalname", None) != "test_golden_case":
      selected = set(CASES)
      break
    selected.add(item.callspec.params["case"])
  groups = [g for g in GROUPS if any(c.startswith(g + "/") for c in selected)]
  return ["--groups", ",".join(groups)]


@pytest.fixture(scope="module")
def current(request, tmp_path_factory):
  """Computed(environment, every case computed now, each case's seconds), by `python -m experiments.golden --dump` in
  its own process under the XLA flags the suite was started with: not the suite's own (tests/conftest.py), which
  users do not compile with. Only the selected cases when only some are (_narrowed_arguments: a -k)."""
  folder = tmp_path_factory.mktemp("golden")
  dump, timings = folder / "current.json", folder / "timings.json"
  env = {**os.environ, "XLA_FLAGS": os.environ.get("NOISY_JAX_TESTS_CALLER_XLA_FLAGS", ""), "JAX_PLATFORMS": "cpu"}
  done = subprocess.run(
    [
      sys.executable,
      "-m",
      "experiments.golden",
      "--dump",
      str(dump),
      "--timings",
      str(timings),
      *_narrowed_arguments(request.session.items),
    ],
    cwd=golden.REPO,
    env=env,
    capture_output=True,
    text=True,
    timeout=1800,
  )
  computed = golden.load(str(dump)) if dump.exists() else None  # the exit status says only whether values moved
  assert computed is not None, done.stdout[-4000:] + done.stderr[-4000:]
  seconds = json.loads(timings.read_text())["cases"] if timings.exists() else {}
  return Computed(computed["environment"], computed["cases"], seconds)


@pytest.fixture(scope="module")
def exact(current):
  differences = environment.differences(STORED["environment"], current.environment)
  if differences:
    warnings.warn(
      "golden values were stored in another environment (" + "; ".join(differences) + "): comparing "
      "within experiments.golden.TOLERANCES instead of exactly"
    )
  return not differences


@pytest.mark.parametrize("case", CASES)
def test_golden_case(current, exact, case, request):
  cases = current.cases
  if case in current.seconds:  # its share of the golden process's time (experiments/ci_shares.py)
    ci_shares.record_case_seconds(request.node, current.seconds[case])
  assert case in cases, f"{case} is stored but no longer computed: `{golden.REGENERATE}`"
  problems = golden.compare_case(case, STORED["cases"][case], cases[case], exact=exact)
  assert not problems, (
    "\n".join(problems) + f"\nIf the change is intended: `{golden.REGENERATE}` and re-measure "
    "the README tables it moves (python -m experiments.regenerate_readme)."
  )


def test_golden_every_computed_case_is_stored(current):
  cases = current.cases
  missing = sorted(set(cases) - set(STORED["cases"]))
  assert not missing, f"computed but not stored: {missing}; `{golden.REGENERATE}`"
  assert not [c for c in cases if c.startswith("runs/")]  # computed in tests/test_method_runs.py


def test_golden_process_computes_every_group_unless_only_some_are_selected():
  """CI selects every case (and test_golden_every_computed_case_is_stored): the process computes every group but the
  runs; a -k that selects some golden cases computes only their groups."""

  def item(name, case=None, fixtures=("current", "exact"), path=__file__):
    callspec = types.SimpleNamespace(params={"case": case})
    return types.SimpleNamespace(path=path, fixturenames=fixtures, originalname=name, callspec=callspec)

  every = [item("test_golden_case", case) for case in CASES]
  stored_test = item("test_golden_every_computed_case_is_stored", fixtures=("current",))
  assert _narrowed_arguments(every) == ["--groups", ",".join(GROUPS)]
  assert GROUPS == ("data", "noise", "init", "losses")
  some = [item("test_golden_case", "losses/rce"), item("test_golden_case", "data/digits")]
  assert _narrowed_arguments(some) == ["--groups", "data,losses"]
  assert _narrowed_arguments(some + [stored_test]) == ["--groups", ",".join(GROUPS)]  # it needs every case
  others = [item("test_golden_file_names_its_environment_and_regeneration", fixtures=()), item("test_x", path="x.py")]
  assert _narrowed_arguments(some + others) == ["--groups", "data,losses"]


def test_golden_file_names_its_environment_and_regeneration():
  assert STORED["regenerate"] == golden.REGENERATE
  assert set(STORED["environment"]) >= {"packages", "device_count", "xla_flags", "cpu", "backend"}
  assert {"jax", "jaxlib", "flax", "optax", "numpy"} <= set(STORED["environment"]["packages"])


def test_golden_comparison_sees_one_ulp_in_a_loss_constant_in_any_environment():
  """RCE's log 0 (A = -4) moved by one float32 ulp changes the stored numbers of the loss: exactly (the same
  environment) and beyond the tolerances of another environment (the golden values are float64, so the drift
  between CPUs is far below the ~6e-8 relative change of the loss)."""
  one_ulp = float(np.nextafter(np.float32(losses.DEFAULT_LOG_ZERO), np.float32(0.0)))
  before = golden.loss_cases({"rce": ("reverse_cross_entropy", {"log_zero": losses.DEFAULT_LOG_ZERO})})
  after = golden.loss_cases({"rce": ("reverse_cross_entropy", {"log_zero": one_ulp})})
  problems = golden.compare_case("losses/rce", before["losses/rce"], after["losses/rce"], exact=True)
  assert any("sha256" in p for p in problems), problems
  tolerant = golden.compare_case("losses/rce", before["losses/rce"], after["losses/rce"], exact=False)
  assert any("value_sum" in p for p in tolerant), tolerant
  assert before["losses/joint_optimization_loss"] == after["losses/joint_optimization_loss"]


def test_golden_tolerant_comparison_skips_checksums_and_bounds_floats():
  stored = {"train_loss": [1.0, 0.5], "params_sha256": "aaaa", "params_count": 10, "test_accuracy": [0.5]}
  rel, _ = golden.TOLERANCES["run"]
  near = {"train_loss": [1.0, 0.5 * (1 + rel / 2)], "params_sha256": "bbbb", "params_count": 10, "test_accuracy": [0.5]}
  assert golden.compare_case("runs/x", stored, near, exact=False) == []
  assert golden.compare_case("runs/x", stored, near, exact=True)  # exact: every difference counts
  far = dict(near, train_loss=[1.0, 0.5 * (1 + 3 * rel)])
  assert [p.split(":")[0] for p in golden.compare_case("runs/x", stored, far, exact=False)] == ["runs/x train_loss"]
  assert golden.compare_case("runs/x", stored, dict(near, params_count=11), exact=False)  # integers stay exact
  # One test example of 359 more or less is a selection that moved: never within tolerance.
  assert golden.compare_case("runs/x", stored, dict(near, test_accuracy=[0.5 + 1 / 359]), exact=False)


def test_golden_drift_reports_the_largest_difference_per_kind():
  stored = {
    "runs/x": {"train_loss": [1.0, 2.0], "params_count": 3, "params_sha256": "a"},
    "losses/y": {"value_sum": 4.0},
  }
  current = {
    "runs/x": {"train_loss": [1.0, 2.002], "params_count": 4, "params_sha256": "b"},
    "losses/y": {"value_sum": 4.0},
  }
  worst = golden.drift(stored, current)
  assert worst["run"]["rel"] == pytest.approx(1e-3) and worst["run"]["abs"] == pytest.approx(2e-3)
  assert worst["run"]["where"] == "runs/x train_loss"
  assert worst["loss"] == {"abs": 0.0, "rel": 0.0, "where": ""}


def test_golden_holds_as_users_compile(tmp_path):
  """The losses and the selection-based runs compiled as users compile them, at XLA's default LLVM optimisation
  level 3 (the stored values are level 0's: experiments.golden.COMPILE_FLAG), match the stored values within
  TOLERANCES, although the level does move them: at level 3 LLVM vectorises and contracts multiplies and adds into
  FMA instructions (on this machine's AVX2; without FMA, e.g. --xla_cpu_max_isa=SSE4_2, level 3 gives level 0's
  numbers bit for bit). Other kernels are what another CPU brings too: a golden file written in float32 on an
  AVX-512 Intel Xeon failed Co-teaching+ by 14% on an AVX2 AMD EPYC, which the float64 runs and these tolerances
  are for.
  """
  dump = tmp_path / "level3.json"
  env = {**os.environ, "XLA_FLAGS": "--xla_backend_optimization_level=3", "JAX_PLATFORMS": "cpu"}
  done = subprocess.run(
    [
      sys.executable,
      "-m",
      "experiments.golden",
      "--groups",
      "losses,runs",
      "--runs",
      ",".join(SELECTION_RUNS),
      "--dump",
      str(dump),
    ],
    cwd=golden.REPO,
    env=env,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
  assert "differs from the stored one" in done.stdout and "xla_flags" in done.stdout, done.stdout[-2000:]
  cases = golden.load(str(dump))["cases"]
  moved = golden.drift(STORED["cases"], cases)
  assert moved["run"]["rel"] > 0, "level 3 gave the stored numbers bit for bit: this test shows nothing"
  for case in cases:  # and every accuracy is the same: no selection moved
    for key in cases[case]:
      if "accuracy" in key:
        assert cases[case][key] == STORED["cases"][case][key], (case, key)
