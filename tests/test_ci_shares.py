"""experiments/ci_shares.py: JUnit reports parsed, each test's time given to a registered method by its tiny case or
its module, the shares; on a synthetic report with known times and on a real pytest run's report."""

import os
import subprocess
import sys

import pytest

from experiments import ci_shares
from noisy_jax.methods import registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (classname, name, seconds, the method it goes to): case names of the registry, in the ids' shapes of the suite.
SYNTHETIC = [
  ("tests.test_golden", "test_golden_case[runs/dividemix]", 30.0, "dividemix"),
  ("tests.test_golden", "test_golden_case[runs/elr_plus]", 20.0, "elr_plus"),  # the longest case: not elr's
  ("tests.test_golden", "test_golden_case[runs/elr]", 4.0, "elr"),
  ("tests.test_golden", "test_golden_case[runs/ce_small_cnn]", 3.0, "loss"),  # a variant of the case `ce`
  ("tests.test_golden", "test_golden_case[losses/encouraging_loss]", 0.5, ci_shares.SHARED),  # a loss's test
  ("tests.test_golden", "test_golden_case[data/digits]", 1.0, ci_shares.SHARED),
  ("tests.test_checkpoint", "test_every_method_stopped_between_checkpoints_resumes_bit_identical[sop]", 6.0, "sop"),
  ("tests.test_multidevice", "test_input_and_table_paths_one_device_equals_four_devices[sop_sharded]", 2.0, "sop"),
  (
    "tests.test_baseline_paper_configs",
    "test_coteaching_paper_values[cifar10,coteaching_plus,pairflip45]",
    1.0,
    "coteaching",
  ),
  (
    "tests.test_precision",
    "test_finite_extremes_outside_the_registry[float32-joint_optimization_loss]",
    0.5,
    ci_shares.SHARED,
  ),
  ("tests.test_dividemix_paper_config", "test_bad_strings_name_the_allowed_values[cifar10]", 1.0, "dividemix"),
  ("tests.test_elr_plus_training", "test_two_epochs", 5.0, "elr_plus"),  # module name: longest method name
  ("tests.test_jocor.TestJoint", "test_loss", 1.0, "jocor"),  # a test class inside the module
  ("tests.test_loss_properties", "test_bounded[mean_absolute_error]", 2.0, ci_shares.SHARED),  # not method `loss`'s
  ("tests.test_layers", "test_imports_point_down", 23.0, ci_shares.SHARED),
]


def _junit(rows, wall=None) -> str:
  cases = "".join(f'<testcase classname="{c}" name="{n}" time="{s:.3f}" />' for c, n, s, _ in rows)
  time = "" if wall is None else f' time="{wall:.3f}"'
  return (
    f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest"{time}>{cases}</testsuite></testsuites>'
  )


@pytest.fixture(scope="module")
def rules():
  return ci_shares.rules_from_registry()


def test_synthetic_names_are_registered_cases(rules):
  cases = registry.tiny_cases()
  for name in ("dividemix", "elr_plus", "elr", "ce", "sop", "coteaching_plus"):
    assert name in cases
  assert rules.cases == {case: spec.name for case, (spec, _) in cases.items()}
  assert {"encouraging_loss", "joint_optimization_loss", "mean_absolute_error"} <= rules.losses


def test_parse_report_reads_tests_and_wall_time():
  report = ci_shares.parse_report(_junit(SYNTHETIC, wall=50.0))
  assert report.wall_seconds == 50.0
  assert [(t.classname, t.name, t.seconds) for t in report.tests] == [(c, n, s) for c, n, s, _ in SYNTHETIC]
  assert ci_shares.parse_report(_junit(SYNTHETIC[:2])).wall_seconds is None


# Ids of their own: case names in this test's ids would give its time to the methods.
@pytest.mark.parametrize("classname, name, seconds, method", SYNTHETIC, ids=[f"row{i}" for i in range(len(SYNTHETIC))])
def test_attribute(rules, classname, name, seconds, method):
  assert ci_shares.attribute(ci_shares.Timing(classname, name, seconds), rules) == method


def test_every_registered_case_goes_to_its_method(rules):
  for case, (spec, _) in registry.tiny_cases().items():
    test = ci_shares.Timing("tests.test_golden", f"test_golden_case[runs/{case}]", 1.0)
    assert ci_shares.attribute(test, rules) == spec.name, case


def test_shares_sum_to_one_with_each_methods_seconds(rules):
  report = ci_shares.parse_report(_junit(SYNTHETIC, wall=50.0))
  rows = ci_shares.shares(report.tests, rules)
  total = sum(s for _, _, s, _ in SYNTHETIC)
  expected = {}
  for _, _, seconds, method in SYNTHETIC:
    expected[method] = expected.get(method, 0.0) + seconds
  assert {r.method: r.seconds for r in rows} == pytest.approx(expected)
  assert sum(r.share for r in rows) == pytest.approx(1.0)
  assert {r.method: r.share for r in rows} == pytest.approx({m: s / total for m, s in expected.items()})
  assert sum(r.tests for r in rows) == len(SYNTHETIC)
  assert [r.seconds for r in rows] == sorted((r.seconds for r in rows), reverse=True)
  assert [r.method for r in rows[:3]] == ["dividemix", ci_shares.SHARED, "elr_plus"]  # 31, 27, 25 s


def test_main_prints_the_table_and_the_wall_time(tmp_path, capsys):
  path = tmp_path / "report.xml"
  path.write_text(_junit(SYNTHETIC, wall=50.0))
  assert ci_shares.main([str(path)]) == 0
  out = capsys.readouterr().out
  lines = out.splitlines()
  assert lines[1].split() == ["method", "seconds", "share", "tests"]
  assert lines[2].split() == ["dividemix", "31.0", "31.0%", "2"]  # most seconds first
  assert lines[3].split() == [ci_shares.SHARED, "27.0", "27.0%", "5"]
  assert next(line for line in lines if line.startswith("total")).split() == [
    "total",
    "100.0",
    "100.0%",
    str(len(SYNTHETIC)),
  ]
  assert "sum to 100.0 s, the wall time was 50.0 s (2.00x)" in out


def test_a_real_pytest_report(rules, tmp_path):
  """pytest itself writes the report (tests/test_layers.py: no JAX compilation, seconds): times >= 0 with a positive
  total, every test attributed."""
  path = tmp_path / "report.xml"
  env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}  # CI's own --junitxml
  cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_layers.py", f"--junitxml={path}"]
  result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
  report = ci_shares.parse_report(path.read_text())
  assert len(report.tests) >= 5
  assert all(t.seconds >= 0 for t in report.tests) and sum(t.seconds for t in report.tests) > 0
  assert report.wall_seconds is not None and report.wall_seconds > 0
  assert all(t.classname == "tests.test_layers" for t in report.tests)
  rows = ci_shares.shares(report.tests, rules)
  assert sum(r.tests for r in rows) == len(report.tests)
  assert [r.method for r in rows] == [ci_shares.SHARED]  # its tests are no method's
