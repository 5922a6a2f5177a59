r"""Each method's share of the CI time: pytest's JUnit XML reports read, each test's time given to one method.

  python -m experiments.ci_shares ci-report-python3.xml [ci-report-newest.xml ...]

.ci/run has each of its parts write a report (PYTEST_ADDOPTS="--junitxml=ci-report-PART.xml") and prints this for
it; by hand, add `--junitxml=PATH` to any pytest command. Several reports are added up into one table.

A test's time (pytest's: its setup, call and teardown) goes to:
1. the registered method one of whose tiny cases (MethodSpec.tiny; registry.tiny_cases) is in the test's parametrize
   id. The id's words (split at anything but letters, digits and '_': pytest joins ids with '-', the golden cases
   are `runs/NAME`, the paper configs `paper:dataset,noise`) are compared with the case names; a word matches a case
   that it is, or that it starts with followed by '_' (`ce_small_cnn`, `sop_sharded`, `elr_paper`). The longest
   matching name wins: `elr_plus` is ELR+'s, not ELR's. The names of noisy_jax.core.losses' functions (its
   registry's and the others it defines, such as the batch loss `joint_optimization_loss`) compete as well, so
   `encouraging_loss` and `joint_optimization_loss` are tests of those losses, not of the methods.
2. else the method its test module is named after: tests/test_METHOD.py or tests/test_METHOD_*.py (Rules.modules;
   the longest name wins again: test_elr_plus_training.py is elr_plus's; test_elr_sop.py, which checks SOP's terms
   too, is elr's), except the plain-loss method `loss`, whose name begins the modules of the loss functions
   (test_loss_properties.py, test_loss_families.py).
3. else SHARED.

Module fixtures that compute every method's case at once: pytest times a module-scoped fixture in the first test that
uses it, so the processes that tests/test_golden.py (every golden case in one `experiments.golden --dump`),
test_checkpoint.py (registered_runs: resume_worker.py's reference, stopped and resumed runs) and test_multidevice.py
(multidevice_worker.py, 1 and 4 devices) start for all methods would be one test's time. Their workers time each
case (time.perf_counter around its work) and each per-case test reports its case's seconds as a JUnit property
`case_seconds` (record_case_seconds). Per report and per test module (reattribute): each test with the property is
charged its case's seconds, and their sum, the fixture's measured work, is taken off the module's longest test with
the property (the one whose setup ran the fixture), never below 0 (if that test is shorter, the cases' seconds are
scaled down to what it had, so the total stays the report's). What stays with that test is the fixture's unmeasured
part: the processes' start, imports and what the fixture did between cases. The modules so re-attributed are printed.

What the numbers are: with pytest-xdist's -n N (README's `-n 2`) N workers run tests at the same time, so the per-test
times sum to about N times the run's wall time; the shares are of that sum, the wall time (the report's session,
from pytest's session start: its start-up before is not in it) is printed next to it. Any other module fixture is
still timed in the first test that uses it; the slowest tests (after the re-attribution) are listed below the table to
show where such costs sit.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from typing import NamedTuple
from xml.etree import ElementTree

SHARED = "(shared)"
# The JUnit property of a test that reports its case's seconds computed in a module fixture's process.
CASE_SECONDS = "case_seconds"
# Registered methods whose name does not name their test modules: `loss` (plain_loss: any loss of core.losses)
# begins test_loss_properties.py and test_loss_families.py, which test the loss functions.
NOT_MODULE_NAMES = ("loss",)


class Timing(NamedTuple):
  """One <testcase> of a report: classname (`tests.test_golden`, or `tests.test_x.TestClass`), name (the test
  function with its parametrize id: `test_golden_case[runs/ce]`), seconds, and case_seconds: its CASE_SECONDS
  property (the seconds its case took in a module fixture's process), None without one."""

  classname: str
  name: str
  seconds: float
  case_seconds: float | None = None


class Reattributed(NamedTuple):
  """A test module whose fixture's time was spread over its tests (reattribute): module (`tests.test_golden`), the
  number of tests with case_seconds, their sum, what was taken off the carrier (the sum, or the carrier's seconds if
  fewer), and the carrier, the test whose setup ran the fixture, as the report had it."""

  module: str
  tests: int
  case_seconds: float
  taken: float
  carrier: Timing


class Report(NamedTuple):
  """What a JUnit report holds for these shares: its tests and its wall time (the <testsuite> elements' `time`
  attributes added up; None when one of them has none)."""

  tests: list[Timing]
  wall_seconds: float | None


class Rules(NamedTuple):
  """How tests are given to methods: cases {tiny case name: method}, losses (loss function names, which are no
  method's), modules {module prefix `test_METHOD`: method}."""

  cases: dict[str, str]
  losses: frozenset[str]
  modules: dict[str, str]


class Share(NamedTuple):
  """One row of the table: a method (or SHARED), its seconds, their fraction of all tests' seconds, its tests."""

  method: str
  seconds: float
  share: float
  tests: int


def parse_report(xml_text: str) -> Report:
  """The tests and wall time of a JUnit XML report (pytest's --junitxml, with or without pytest-xdist)."""
  root = ElementTree.fromstring(xml_text)
  suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
  tests, walls = [], []
  for suite in suites:
    wall = suite.get("time")
    walls.append(None if wall is None else float(wall))
    for case in suite.iter("testcase"):
      seconds = float(case.get("time") or 0.0)
      tests.append(Timing(case.get("classname", ""), case.get("name", ""), seconds, _case_seconds(case)))
  wall_seconds = None if not walls or None in walls else sum(walls)
  return Report(tests, wall_seconds)


def _case_seconds(testcase) -> float | None:
  """The CASE_SECONDS property of a <testcase> element (its last, if several); None without one or if not a number."""
  values = [p.get("value") for p in testcase.iter("property") if p.get("name") == CASE_SECONDS]
  try:
    return float(values[-1]) if values else None
  except (TypeError, ValueError):
    return None


def record_case_seconds(node, seconds: float) -> None:
  """Reports on a pytest item (`request.node`) the seconds its case took in a module fixture's process, as the JUnit
  property CASE_SECONDS. What pytest's record_property fixture does, without its warning that properties are not in
  the xunit2 schema (pytest's default family, whose report has them all the same)."""
  node.user_properties.append((CASE_SECONDS, float(seconds)))


def rules_from_registry() -> Rules:
  """The Rules of the registered methods (noisy_jax.methods.registry) and the losses of noisy_jax.core.losses: the
  names of its registry and of the other public functions it defines (joint_optimization_loss, entropy, ...)."""
  from noisy_jax.core import losses  # pylint: disable=g-import-not-at-top
  from noisy_jax.methods import registry  # pylint: disable=g-import-not-at-top

  functions = [
    name
    for name, value in vars(losses).items()
    if inspect.isfunction(value) and value.__module__ == losses.__name__ and not name.startswith("_")
  ]
  return make_rules(
    {case: spec.name for case, (spec, _) in registry.tiny_cases().items()},
    registry.METHOD_NAMES,
    [*losses.names(), *functions],
  )


def make_rules(cases: dict[str, str], method_names, loss_names) -> Rules:
  """Rules of these {case: method}, method names (each but NOT_MODULE_NAMES names modules) and loss names."""
  modules = {f"test_{name}": name for name in method_names if name not in NOT_MODULE_NAMES}
  return Rules(dict(cases), frozenset(loss_names), modules)


def parametrize_id(name: str) -> str:
  """The parametrize id of a test name: `runs/ce` of `test_golden_case[runs/ce]`; '' without one."""
  start = name.find("[")
  return name[start + 1 : name.rfind("]")] if start >= 0 and name.endswith("]") else ""


def _longest_match(word: str, names) -> str | None:
  """The longest of `names` that `word` is, or starts with followed by '_'; None if none."""
  matches = [n for n in names if word == n or word.startswith(n + "_")]
  return max(matches, key=len) if matches else None


def method_of_id(param_id: str, rules: Rules) -> str | None:
  """The method whose tiny case names a word of a parametrize id (the module docstring's rule 1); None if none."""
  best = None
  for word in re.split(r"[^A-Za-z0-9_]+", param_id):
    name = _longest_match(word, [*rules.cases, *rules.losses])
    if name is not None and name not in rules.losses and (best is None or len(name) > len(best)):
      best = name
  return None if best is None else rules.cases[best]


def module_path(classname: str) -> str:
  """The classname up to its test module: `tests.test_x` of `tests.test_x` and of `tests.test_x.TestClass`."""
  parts = classname.split(".")
  modules = [i for i, p in enumerate(parts) if p.startswith("test_")]
  return ".".join(parts[: modules[-1] + 1]) if modules else classname


def module_name(classname: str) -> str:
  """The test module of a JUnit classname: `test_golden` of `tests.test_golden` and of `tests.test_x.TestClass`."""
  parts = classname.split(".")
  modules = [p for p in parts if p.startswith("test_")]
  return modules[-1] if modules else parts[-1]


def method_of_module(module: str, rules: Rules) -> str | None:
  """The method a test module is named after (the module docstring's rule 2); None if none."""
  prefix = _longest_match(module, rules.modules)
  return None if prefix is None else rules.modules[prefix]


def attribute(test: Timing, rules: Rules) -> str:
  """The method a test's time goes to: by its parametrize id, else by its module, else SHARED."""
  return (
    method_of_id(parametrize_id(test.name), rules) or method_of_module(module_name(test.classname), rules) or SHARED
  )


def reattribute(tests: list[Timing]) -> tuple[list[Timing], list[Reattributed]]:
  """The tests of one report with module fixtures' time given to the cases it computed (the module docstring), and
  the modules so changed. In each module with case_seconds, each such test gets its case_seconds added and their sum
  is taken off the longest of them (by the report's times), never below 0: if that one is shorter than the sum, the
  case_seconds are scaled to what it had, so the tests' total is unchanged."""
  modules = {}
  for i, test in enumerate(tests):
    if test.case_seconds is not None:
      modules.setdefault(module_path(test.classname), []).append(i)
  out, changed = list(tests), []
  for module, indices in modules.items():
    case_seconds = sum(max(tests[i].case_seconds, 0.0) for i in indices)
    carrier = max(indices, key=lambda i: tests[i].seconds)
    taken = min(case_seconds, max(tests[carrier].seconds, 0.0))
    scale = taken / case_seconds if case_seconds > 0 else 0.0
    out[carrier] = out[carrier]._replace(seconds=tests[carrier].seconds - taken)
    for i in indices:
      out[i] = out[i]._replace(seconds=out[i].seconds + max(tests[i].case_seconds, 0.0) * scale)
    changed.append(Reattributed(module, len(indices), case_seconds, taken, tests[carrier]))
  return out, changed


def shares(tests, rules: Rules) -> list[Share]:
  """One Share per method that has tests (SHARED included), most seconds first."""
  seconds, counts = {}, {}
  for test in tests:
    method = attribute(test, rules)
    seconds[method] = seconds.get(method, 0.0) + test.seconds
    counts[method] = counts.get(method, 0) + 1
  total = sum(seconds.values())
  rows = [Share(m, s, s / total if total > 0 else 0.0, counts[m]) for m, s in seconds.items()]
  return sorted(rows, key=lambda r: (-r.seconds, r.method))


def format_shares(reports: list[Report], rules: Rules, slowest: int = 5) -> str:
  """The table of shares of these reports' tests (each report's fixtures re-attributed: reattribute), their total
  against the wall time, the modules re-attributed and the slowest tests."""
  tests, changed = [], []
  for report in reports:
    report_tests, report_changed = reattribute(report.tests)
    tests += report_tests
    changed += report_changed
  rows = shares(tests, rules)
  total = sum(r.seconds for r in rows)
  width = max([len("method"), len("total"), *(len(r.method) for r in rows)])
  lines = [f"{'method':<{width}}  {'seconds':>9}  {'share':>6}  {'tests':>5}"]
  lines += [f"{r.method:<{width}}  {r.seconds:9.1f}  {r.share:6.1%}  {r.tests:5d}" for r in rows]
  lines.append(f"{'total':<{width}}  {total:9.1f}  {1.0 if total > 0 else 0.0:6.1%}  {len(tests):5d}")
  walls = [r.wall_seconds for r in reports]
  if tests and None not in walls and sum(walls) > 0:
    wall = sum(walls)
    lines.append(
      f"The per-test times sum to {total:.1f} s, the wall time was {wall:.1f} s ({total / wall:.2f}x): with\n"
      "pytest-xdist's -n N, N workers run tests at the same time, so the per-test times sum to about N times the\n"
      "wall time. The shares are of the per-test sum."
    )
  elif tests:
    lines.append(f"The per-test times sum to {total:.1f} s (no wall time in the report).")
  else:
    lines.append("No tests in the report.")
  if changed:
    lines.append(f"Module fixtures re-attributed to their tests' cases ({CASE_SECONDS}, measured in their processes):")
    for c in changed:
      scaled = "" if c.taken >= c.case_seconds else f", scaled to the {c.taken:.1f} s it had"
      lines.append(
        f"  {c.module}: {c.case_seconds:.1f} s over {c.tests} tests{scaled}, taken off {c.carrier.name} "
        f"({c.carrier.seconds:.1f} s -> {c.carrier.seconds - c.taken:.1f} s)"
      )
  elif tests:
    lines.append(f"No module fixture re-attributed: no test has a {CASE_SECONDS} property.")
  if tests and slowest > 0:
    lines.append(
      f"The {min(slowest, len(tests))} slowest tests (after that; any other module-scoped fixture is timed in the\n"
      "first test that uses it):"
    )
    for test in sorted(tests, key=lambda t: -t.seconds)[:slowest]:
      lines.append(f"  {test.seconds:9.1f} s  {attribute(test, rules):<{width}}  {test.classname}::{test.name}")
  return "\n".join(lines)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
    description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
  )
  parser.add_argument("reports", nargs="+", help="pytest JUnit XML reports (--junitxml), added up")
  parser.add_argument("--slowest", type=int, default=5, help="how many of the slowest tests to list (default: 5)")
  args = parser.parse_args(argv)
  reports = []
  for path in args.reports:
    with open(path, encoding="utf-8") as f:
      reports.append(parse_report(f.read()))
  print(f"Each method's share of the tests' time in {', '.join(args.reports)}:")
  print(format_shares(reports, rules_from_registry(), slowest=args.slowest))
  return 0


if __name__ == "__main__":
  sys.exit(main())
