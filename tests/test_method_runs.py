"""Every registered method's tiny run, trained once and used three times.

The golden process (`python -m experiments.golden --groups runs --workdir ROOT`) trains every golden run
(experiments/configs/tiny.py: 3 epochs on digits, float64) in ROOT/CASE with checkpoints after epochs 2 and 3. That
one run of each method is
- its golden values, compared with tests/golden_values.json (exactly in the stored environment, within
  experiments.golden.TOLERANCES elsewhere; tests/test_golden.py has the other groups);
- the reference of its stop/resume test: tests/resume_worker.py trains the same run, stops it once stage 1's last
  epoch (3) is trained and before its checkpoint is written (an exception in one process for all methods), and a
  new process resumes it from the newest checkpoint before (epoch 2's); every final checkpoint (params of every
  network, optimiser state, the table with the method's rows, weight averages, best-validation variables) and every
  record must be bit-identical;
- the 1-device side of its 1 == 4 devices test: tests/multidevice_worker.py trains the same run on 4 simulated
  devices (the tables of DivideMix, ELR+ and ProMix row-sharded), and every array of its final checkpoints and every
  train loss agree to RUN_TOLERANCE (float64: another reduction order moves no selection).

A new method joins all three by its registry line (the first of its MethodSpec.tiny cases). `-k` narrows the
processes to the selected cases. Each test reports its case's seconds in the four processes (experiments/ci_shares.py).
"""

import json
import os
import subprocess
import sys
import warnings

import jax
import numpy as np
import pytest

from experiments import ci_shares
from experiments import golden
from experiments.configs import tiny
from noisy_jax.experiment import environment
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import table_sharding
from noisy_jax.train import checkpoint as checkpoint_lib
from noisy_jax.train import method as method_lib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import multidevice_worker  # pylint: disable=g-import-not-at-top,wrong-import-position
import resume_processes as processes  # pylint: disable=g-import-not-at-top,wrong-import-position
import resume_worker  # pylint: disable=g-import-not-at-top,wrong-import-position
import simulated_devices  # pylint: disable=g-import-not-at-top,wrong-import-position

STORED = golden.load()
GOLDEN_RUNS = sorted(case.split("/", 1)[1] for case in STORED["cases"] if case.startswith("runs/"))
# One tiny case per registered method: the first of its MethodSpec.tiny.
REGISTERED = [next(iter(spec.tiny)) for spec in registry.SPECS.values()]
NUM_DEVICES = 4
RUN_TOLERANCE = 1e-8  # 1 == 4 devices, whole float64 runs (measured differences ~1e-16 .. 1e-11)


def _selected_cases(items) -> list[str] | None:
  """The cases of this module's tests that use its processes among `items` (the session's selected tests), or None
  (every case) when such a test without a case is selected or every case is."""
  here, cases = os.path.abspath(__file__), set()
  for item in items:
    if os.path.abspath(str(item.path)) != here or not {"reference", "resumed", "four_devices"} & set(
      getattr(item, "fixturenames", ())
    ):
      continue
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "case" not in params:
      return None
    cases.add(params["case"])
  return None if cases >= set(GOLDEN_RUNS) | set(REGISTERED) else sorted(cases)


@pytest.fixture(scope="module")
def selected(request):
  return _selected_cases(request.session.items)


@pytest.fixture(scope="module")
def reference(selected, tmp_path_factory):
  """(ROOT, {case: golden values}, {case: seconds}, environment): the golden process's runs, trained in ROOT/CASE,
  under the XLA flags the suite was started with plus experiments.golden.COMPILE_FLAG (the suite's own: the
  resume and 4-device workers compile with them too)."""
  folder = tmp_path_factory.mktemp("reference")
  root, dump, timings = folder / "runs", folder / "current.json", folder / "timings.json"
  runs = [] if selected is None else ["--runs", ",".join(c for c in selected if c in GOLDEN_RUNS)]
  env = {**os.environ, "XLA_FLAGS": os.environ.get("NOISY_JAX_TESTS_CALLER_XLA_FLAGS", ""), "JAX_PLATFORMS": "cpu"}
  cmd = [sys.executable, "-m", "experiments.golden", "--groups", "runs", *runs, "--workdir", str(root)]
  cmd += ["--dump", str(dump), "--timings", str(timings)]
  done = subprocess.run(cmd, cwd=golden.REPO, env=env, capture_output=True, text=True, timeout=1800)
  assert dump.exists(), done.stdout[-4000:] + done.stderr[-4000:]
  computed = golden.load(str(dump))
  seconds = {case.split("/", 1)[1]: s for case, s in json.loads(timings.read_text())["cases"].items()}
  return str(root), computed["cases"], seconds, computed["environment"]


@pytest.fixture(scope="module")
def exact(reference):
  differences = environment.differences(STORED["environment"], reference[3])
  if differences:
    warnings.warn(
      "golden values were stored in another environment (" + "; ".join(differences) + "): comparing "
      "within experiments.golden.TOLERANCES instead of exactly"
    )
  return not differences


def _registered(selected) -> list[str]:
  return [c for c in REGISTERED if selected is None or c in selected]


@pytest.fixture(scope="module")
def resumed(selected, tmp_path_factory):
  """(ROOT, the stopping worker's output, the resuming worker's output, {case: (stage 1's checkpoint epochs, record
  epochs) after the stop}, {case: seconds}): the registered cases stopped once stage 1's last epoch is trained (before
  its checkpoint), then resumed, in ROOT/CASE."""
  root = str(tmp_path_factory.mktemp("stopped"))
  cases = ",".join(_registered(selected))
  flags = {"setup": "golden", "stop_with": "raise"}
  stop = processes.run_all([processes.worker_cmd(root, cases, stop_before_last_checkpoint=True, **flags)])[0]
  after_stop = {}
  for case, section in processes.sections(stop[1]).items():
    if "stopped " + case in section:
      manager = checkpoint_lib.open_manager(checkpoint_lib.stage_dir(os.path.join(root, case), "stage1"), keep=100)
      records = [r["epoch"] for r in processes.records(os.path.join(root, case)) if r["stage"] == "stage1"]
      after_stop[case] = (list(manager.all_steps()), records)
      manager.close()
  resume = processes.run_all([processes.worker_cmd(root, cases, setup="golden")])[0]
  seconds = {}
  for per_case in (processes.case_seconds(stop[1]), processes.case_seconds(resume[1])):
    for case, value in per_case.items():
      seconds[case] = seconds.get(case, 0.0) + value
  return root, stop, resume, after_stop, seconds


@pytest.fixture(scope="module")
def four_devices(selected, tmp_path_factory):
  """(ROOT, worker result): the registered cases trained on NUM_DEVICES simulated devices in ROOT/CASE."""
  root = str(tmp_path_factory.mktemp("four_devices"))
  result = simulated_devices.run_worker("multidevice_worker.py", NUM_DEVICES, "registered", root)
  return root, result


@pytest.fixture(scope="module")
def method_runs(reference, resumed, four_devices):
  """The module's processes, all started by its first test: one test carries their time, which
  experiments/ci_shares.py gives back to the cases they computed (it re-attributes one carrier per module)."""
  return reference, resumed, four_devices


def _report_seconds(request, case: str, *parts: dict) -> None:
  """Reports `case`'s seconds summed over the processes' `parts` ({case: seconds}) on this test: each test its own
  process's (the golden run the golden process's, the resume test the stopping and resuming workers', the 1 == 4
  test the 4-device worker's), so that the module's reports sum to the processes' measured work."""
  total = sum(part.get(case, 0.0) for part in parts)
  if total:
    ci_shares.record_case_seconds(request.node, total)


# ---------------------------------------------------------------------------------------------------------------
# Golden values


@pytest.mark.parametrize("case", GOLDEN_RUNS)
def test_golden_run(method_runs, exact, case, request):
  _, cases, seconds, _ = method_runs[0]
  _report_seconds(request, case, seconds)
  name = f"runs/{case}"
  assert name in cases, f"{name} is stored but no longer computed: `{golden.REGENERATE}`"
  problems = golden.compare_case(name, STORED["cases"][name], cases[name], exact=exact)
  assert not problems, (
    "\n".join(problems) + f"\nIf the change is intended: `{golden.REGENERATE}` and re-measure "
    "the README tables it moves (python -m experiments.regenerate_readme)."
  )


def test_every_golden_run_is_stored_and_every_method_has_one(method_runs):
  missing = sorted(set(method_runs[0][1]) - set(STORED["cases"]))
  assert not missing, f"computed but not stored: {missing}; `{golden.REGENERATE}`"
  assert set(REGISTERED) <= set(GOLDEN_RUNS)
  assert set(golden.run_configs()) == set(GOLDEN_RUNS)


# ---------------------------------------------------------------------------------------------------------------
# Stopped and resumed


@pytest.mark.parametrize("case", REGISTERED)
def test_every_method_stopped_before_a_checkpoint_resumes_bit_identical(method_runs, case, request):
  """Stopped once stage 1's last epoch (3; PES-semi's stage 1 has 2) is trained and before its checkpoint (epoch
  2's on disk, records of epochs 1-2), resumed by a new process from epoch 2 (epoch 3 trained again), the run ends
  bit-identical to the golden process's run of it. Examples of what that covers: SOP's u, v; Co-teaching's two
  networks with their Adam state and forget-rate ramp; DivideMix's networks with the division written after epoch
  2; ELR+'s networks with their averages and targets; ProMix's networks with their class priors and selections;
  JO's stage 2 after the resumed stage 1. A real SIGKILL and its leftovers are tested on Joint Optimization's two
  stages in test_checkpoint.py and inside an epoch in test_streaming.py."""
  (ref_root, _, _, _), (root, stop, resume, after_stop, seconds), _ = method_runs
  _report_seconds(request, case, seconds)
  assert "stopped " + case in processes.sections(stop[1]).get(case, ""), stop[2][-4000:]
  last = resume_worker.stage1_epochs(tiny.checkpointed(tiny.get_config(case)))
  saved = [e for e in range(1, last) if checkpoint_lib.is_due(e, every=tiny.CHECKPOINT_EVERY, num_epochs=last)]
  assert after_stop[case] == (saved[-2:], list(range(1, last)))  # stage 1's checkpoints (two kept) and records
  section = processes.sections(resume[1]).get(case, "")
  assert "done" in section, (section[-4000:], resume[2][-4000:])
  first = [e for stage, e in processes.epochs_seen(section) if stage == "stage1"][0]
  assert first == (saved[-1] + 1 if saved else 1), section  # restored from the newest checkpoint before the stop
  ref, stopped = os.path.join(ref_root, case), os.path.join(root, case)
  stages = sorted(os.listdir(os.path.dirname(checkpoint_lib.stage_dir(ref, "stage1"))))  # every checkpointed stage
  assert "stage1" in stages, stages
  for stage in stages:
    processes.assert_bit_identical(ref, stopped, stage)
  assert processes.records(stopped) == processes.records(ref)  # every epoch once (3 not duplicated), same numbers
  _assert_the_checkpoint_holds_the_methods_state(case, processes.final_arrays(stopped, "stage1")[1])


def _assert_the_checkpoint_holds_the_methods_state(case: str, arrays: dict) -> None:
  """What the method keeps is in its checkpoint: its per-example rows, both networks of a pair in the one state, and
  a pair's own state (ELR+'s averages, ProMix's priors)."""
  config = tiny.get_config(case)
  spec = registry.get(config.method.name)
  context = spec_lib.Context(num_classes=10, num_epochs=config.num_epochs, transition=np.eye(10), num_examples=4)
  method = spec.build(config.method, context)
  if method.init_rows is not None:
    rows = method.init_rows(jax.random.PRNGKey(0), 4, 10)
    assert {f"table/method_rows/{name}" for name in rows} <= set(arrays), sorted(arrays)
  if method.num_networks == 2:
    assert all(a.shape[0] == 2 for name, a in arrays.items() if name.startswith("state/params/"))
    if method.program.init_state is not method_lib.SHARED_PROGRAM.init_state:
      own = [a.shape[0] for name, a in arrays.items() if name.startswith("state/method_state/")]
      assert own.count(2) >= 2, own


# ---------------------------------------------------------------------------------------------------------------
# 1 == 4 devices


def _real_rows(name: str, one: np.ndarray, many: np.ndarray) -> np.ndarray:
  """`many` (an array of the 4-device checkpoint) without the padding rows of a row-sharded table
  (noisy_jax.parallel.table_sharding: N rows padded to a multiple of the device count) where its row axis is longer
  than `one`'s; `many` itself where the shapes are equal."""
  if one.shape == many.shape:
    return many
  axes = [i for i, (a, b) in enumerate(zip(one.shape, many.shape)) if a != b]
  assert name.startswith("table/") and len(axes) == 1 and one.ndim == many.ndim, (name, one.shape, many.shape)
  assert many.shape[axes[0]] - one.shape[axes[0]] < NUM_DEVICES, (name, one.shape, many.shape)
  return np.take(many, np.arange(one.shape[axes[0]]), axis=axes[0])


def _largest_differences(one: dict, many: dict) -> dict:
  """{array name: largest absolute difference} of two final checkpoints' arrays (the same names; the 4-device
  table's padding rows left out)."""
  assert sorted(one) == sorted(many)
  out = {}
  for name in one:
    a, b = np.asarray(one[name]), _real_rows(name, np.asarray(one[name]), np.asarray(many[name]))
    out[name] = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))
  return out


@pytest.mark.parametrize("case", REGISTERED)
def test_every_method_one_device_equals_four_devices(method_runs, case, request):
  """Each registered method's golden run trained whole on 4 devices: batch means, selections (Co-teaching's
  small-loss sets, DivideMix's MixMatch permutation and GMM) and per-example state are over the global batch, so
  every array of every stage's final checkpoint (params, batch statistics, optimiser state, table and method rows,
  best-validation variables) and every train loss equal the 1-device run's to float64 rounding."""
  (ref_root, _, _, _), _, (root, result) = method_runs
  _report_seconds(request, case, result["case_seconds"])
  assert result["layouts"][case] == ("sharded" if case in multidevice_worker.SHARDED_TABLE_CASES else "replicated")
  one, many = os.path.join(ref_root, case), os.path.join(root, case)
  stages = sorted(os.listdir(os.path.dirname(checkpoint_lib.stage_dir(one, "stage1"))))
  for stage in stages:
    epoch_one, arrays_one = processes.final_arrays(one, stage)
    epoch_many, arrays_many = processes.final_arrays(many, stage)
    assert epoch_one == epoch_many
    worst = {k: v for k, v in _largest_differences(arrays_one, arrays_many).items() if v > RUN_TOLERANCE}
    assert not worst, (case, stage, worst)
  records_one, records_many = processes.records(one), processes.records(many)
  assert len(records_one) == len(records_many)
  losses = [(a["train_loss"], b["train_loss"]) for a, b in zip(records_one, records_many)]
  assert max(abs(a - b) for a, b in losses) <= RUN_TOLERANCE, losses
  assert abs(losses[0][0] - losses[-1][0]) > 1e-3 and records_one[-1]["test_accuracy"] > 0.3  # it trained


def test_two_network_methods_ran_on_a_row_sharded_table(method_runs):
  four_devices = method_runs[2]
  """The 4-device runs of the SHARDED_TABLE_CASES kept their tables row-sharded, and the tables did their work:
  DivideMix's GMM over the gathered losses divided the examples, ELR+'s targets were written, ProMix's class-wise
  selection chose part of each class."""
  assert set(multidevice_worker.SHARDED_TABLE_CASES) <= set(REGISTERED)
  rows = {}
  for case in multidevice_worker.SHARDED_TABLE_CASES:
    _, arrays = processes.final_arrays(os.path.join(four_devices[0], case), "stage1")
    real = arrays["table/noisy_labels"] != table_sharding.PAD_LABEL
    assert 0 < np.sum(~real) < NUM_DEVICES and np.all(arrays["table/weights"][~real] == 0)  # padded, weight 0
    rows[case] = {k.split("/")[-1]: v[real] for k, v in arrays.items() if k.startswith("table/method_rows/")}
  assert 0.05 < np.mean(rows["dividemix"]["dividemix_clean_prob"] > 0.5) < 0.95
  assert np.max(rows["elr_plus"]["elr_plus_targets"]) > 0.1
  assert 0.05 < np.mean(rows["promix"]["promix_selected"]) < 0.95


def test_the_stop_falls_between_the_checkpoints():
  """In a 3-epoch run the stop falls before the checkpoint of epoch 3, the newest before it being epoch 2's: the
  resumed run restores one and trains epoch 3 again."""
  config = tiny.checkpointed(tiny.get_config("ce"))
  due = [
    e
    for e in range(1, config.num_epochs + 1)
    if checkpoint_lib.is_due(e, every=config.checkpoint_every, num_epochs=config.num_epochs)
  ]
  assert config.num_epochs == 3 and due == [2, 3]
