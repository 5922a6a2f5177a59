"""experiments/ci_shares.py: JUnit reports parsed, each test's time given to a registered method by its tiny case or
its module, module fixtures' time given to the cases they computed (case_seconds), the shares; on synthetic reports
with known times and on real pytest runs' reports."""

import os
import subprocess
import sys
import textwrap

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


# Module fixtures of every method's cases, as the suite's three report them: (classname, name, seconds, case_seconds).
# The golden fixture ran in data/digits' setup (40 s: 35 s of cases, 5 s of the process's start); a larger test of the
# module without case_seconds (its own process) is not the carrier. test_checkpoint's carrier is its longest test with
# case_seconds, not the JO kill tests' (30 s, a fixture of their own). In test_multidevice the cases' seconds (8 s) are
# more than its carrier had (5 s): scaled to 5 s.
FIXTURES = [
  ("tests.test_golden", "test_golden_case[data/digits]", 40.0, 1.0),
  ("tests.test_golden", "test_golden_case[runs/dividemix]", 0.5, 20.0),
  ("tests.test_golden", "test_golden_case[runs/elr_plus]", 0.25, 10.0),
  ("tests.test_golden", "test_golden_case[runs/ce]", 0.25, 4.0),
  ("tests.test_golden", "test_golden_every_computed_case_is_stored", 0.5, None),
  ("tests.test_golden", "test_golden_holds_as_users_compile", 50.0, None),
  ("tests.test_checkpoint", "test_killed_in_stage1_resumes_bit_identical", 30.0, None),
  ("tests.test_checkpoint", "test_every_method_stopped_between_checkpoints_resumes_bit_identical[ce]", 25.0, 12.0),
  ("tests.test_checkpoint", "test_every_method_stopped_between_checkpoints_resumes_bit_identical[sop]", 1.0, 8.0),
  ("tests.test_multidevice", "test_input_and_table_paths_one_device_equals_four_devices[cross_entropy]", 5.0, 2.0),
  ("tests.test_multidevice", "test_every_method_one_device_equals_four_devices[sop]", 0.0, 6.0),
  ("tests.test_layers", "test_imports_point_down", 3.0, None),
]
# After the re-attribution (what each test is charged, the method it goes to).
REATTRIBUTED = [
  (5.0 + 1.0, ci_shares.SHARED),  # 40 - 35 + its own case's 1
  (20.5, "dividemix"),
  (10.25, "elr_plus"),
  (4.25, "loss"),
  (0.5, ci_shares.SHARED),
  (50.0, ci_shares.SHARED),
  (30.0, ci_shares.SHARED),
  (25.0 - 20.0 + 12.0, "loss"),
  (9.0, "sop"),
  (5.0 - 5.0 + 2.0 * 5 / 8, ci_shares.SHARED),  # cross_entropy: a loss's name
  (6.0 * 5 / 8, "sop"),
  (3.0, ci_shares.SHARED),
]


def _junit_properties(rows, wall=None) -> str:
  """A report of (classname, name, seconds, case_seconds or None) rows, case_seconds as pytest writes properties."""
  cases = []
  for classname, name, seconds, case_seconds in rows:
    properties = (
      ""
      if case_seconds is None
      else f'<properties><property name="{ci_shares.CASE_SECONDS}" value="{case_seconds!r}" /></properties>'
    )
    cases.append(f'<testcase classname="{classname}" name="{name}" time="{seconds:.3f}">{properties}</testcase>')
  time = "" if wall is None else f' time="{wall:.3f}"'
  return (
    f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest"{time}>{"".join(cases)}'
    "</testsuite></testsuites>"
  )


def test_parse_report_reads_case_seconds():
  report = ci_shares.parse_report(_junit_properties(FIXTURES, wall=60.0))
  assert [t.case_seconds for t in report.tests] == [row[3] for row in FIXTURES]
  assert [t.seconds for t in report.tests] == [row[2] for row in FIXTURES]
  other = '<testcase classname="tests.test_x" name="t" time="1.0"><properties><property name="other" value="2" />'
  not_a_number = f'<property name="{ci_shares.CASE_SECONDS}" value="soon" /></properties></testcase>'
  (test,) = ci_shares.parse_report(f"<testsuite>{other}{not_a_number}</testsuite>").tests
  assert test == ci_shares.Timing("tests.test_x", "t", 1.0, None)


def test_reattribute_gives_module_fixtures_time_to_their_cases(rules):
  tests = ci_shares.parse_report(_junit_properties(FIXTURES)).tests
  moved, changed = ci_shares.reattribute(tests)
  assert [t.seconds for t in moved] == pytest.approx([seconds for seconds, _ in REATTRIBUTED])
  assert [ci_shares.attribute(t, rules) for t in moved] == [method for _, method in REATTRIBUTED]
  assert sum(t.seconds for t in moved) == pytest.approx(sum(t.seconds for t in tests))  # nothing made up or lost
  assert [(c.module, c.tests, c.carrier.name) for c in changed] == [
    ("tests.test_golden", 4, "test_golden_case[data/digits]"),
    ("tests.test_checkpoint", 2, "test_every_method_stopped_between_checkpoints_resumes_bit_identical[ce]"),
    ("tests.test_multidevice", 2, "test_input_and_table_paths_one_device_equals_four_devices[cross_entropy]"),
  ]
  assert [c.case_seconds for c in changed] == pytest.approx([35.0, 20.0, 8.0])
  assert [c.taken for c in changed] == pytest.approx([35.0, 20.0, 5.0])  # never below 0: 5 s is what it had
  assert ci_shares.reattribute(ci_shares.parse_report(_junit(SYNTHETIC)).tests) == (
    ci_shares.parse_report(_junit(SYNTHETIC)).tests,
    [],
  )  # without case_seconds nothing moves


def test_reattribute_each_report_and_test_class_of_a_module_together(rules):
  """Two reports (CI's two environments) each ran the fixture: each report's carrier gives its own cases' seconds.
  A test class inside the module is the same module."""
  rows = [
    ("tests.test_golden", "test_golden_case[runs/dividemix]", 10.0, 6.0),
    ("tests.test_golden.TestRuns", "test_case[runs/jocor]", 0.0, 3.0),
  ]
  first = ci_shares.parse_report(_junit_properties(rows, wall=10.0))
  second = ci_shares.parse_report(_junit_properties([(c, n, s * 2, cs * 2) for c, n, s, cs in rows], wall=20.0))
  (golden,) = ci_shares.reattribute(first.tests)[1]
  assert (golden.module, golden.tests, golden.taken) == ("tests.test_golden", 2, 9.0)
  rows = {r.method: r.seconds for r in ci_shares.shares(first.tests + second.tests, rules)}
  assert rows == {"dividemix": 30.0, "jocor": 0.0}  # as the reports had them: shares() itself moves nothing
  out = ci_shares.format_shares([first, second], rules)
  table = {line.split()[0]: float(line.split()[1]) for line in out.splitlines()[1:4]}
  # dividemix: 10 - 9 + 6 in the first report, 20 - 18 + 12 in the second; jocor: 3 + 6
  assert table == pytest.approx({"dividemix": 7.0 + 14.0, "jocor": 9.0, "total": 30.0})
  assert out.count("tests.test_golden: ") == 2


def test_main_prints_the_modules_reattributed(tmp_path, capsys):
  path = tmp_path / "report.xml"
  path.write_text(_junit_properties(FIXTURES, wall=60.0))
  assert ci_shares.main([str(path)]) == 0
  out = capsys.readouterr().out
  assert "Module fixtures re-attributed" in out
  assert "tests.test_golden: 35.0 s over 4 tests, taken off test_golden_case[data/digits] (40.0 s -> 5.0 s)" in out
  assert "tests.test_multidevice: 8.0 s over 2 tests, scaled to the 5.0 s it had, taken off" in out
  assert "tests.test_layers" not in out.split("Module fixtures re-attributed")[1].split("slowest")[0]
  lines = out.splitlines()
  assert lines[2].split() == [ci_shares.SHARED, "90.8", "58.4%", "6"]  # 90.75 of 155.5 s
  assert [line.split()[0] for line in lines[3:7]] == ["loss", "dividemix", "sop", "elr_plus"]  # 21.25, 20.5, ...


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
  assert "No module fixture re-attributed" in out


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


def test_a_real_pytest_report_with_case_seconds(tmp_path):
  """A module fixture that computes two cases, each test reporting its case's seconds (record_case_seconds): pytest
  writes them as properties of their testcases without a warning, and the fixture's time leaves its first test."""
  (tmp_path / "test_fixture_cases.py").write_text(
    textwrap.dedent(
      """
      import time

      import pytest

      from experiments import ci_shares

      @pytest.fixture(scope="module")
      def computed():
        time.sleep(0.4)  # the cases' work, in the first test's setup
        return {"a": 0.2, "b": 0.15}

      @pytest.mark.parametrize("case", ["a", "b"])
      def test_case(computed, case, request):
        ci_shares.record_case_seconds(request.node, computed[case])
      """
    )
  )
  path = tmp_path / "report.xml"
  env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
  env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
  cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_fixture_cases.py", f"--junitxml={path}"]
  result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
  assert "warning" not in result.stdout.lower(), result.stdout[-4000:]
  tests = ci_shares.parse_report(path.read_text()).tests
  assert [(t.name, t.case_seconds) for t in tests] == [("test_case[a]", 0.2), ("test_case[b]", 0.15)]
  assert tests[0].seconds >= 0.4 > tests[1].seconds
  moved, (changed,) = ci_shares.reattribute(tests)
  assert (changed.module, changed.carrier, changed.taken) == ("test_fixture_cases", tests[0], pytest.approx(0.35))
  assert moved[0].seconds == pytest.approx(tests[0].seconds - 0.35 + 0.2)
  assert moved[1].seconds == pytest.approx(tests[1].seconds + 0.15)
