r"""Re-runs the commands behind README's tables in a clean environment and shows the new tables beside the old.

  python -m experiments.regenerate_readme --list
  python -m experiments.regenerate_readme --only default3,memorisation     # run, render, compare
  python -m experiments.regenerate_readme --only default3 --reuse          # render from an earlier run's workdir
  python -m experiments.regenerate_readme --write                          # ... and replace the tables in place
  python -m experiments.regenerate_readme --only baselines_sym60 --rows jocor --write  # re-measure one row
  python -m experiments.regenerate_readme --root /tmp/regen --only q_sweep # another root (default workdirs/regen)

Each run's command is the one written in the README next to its table, run from the repository root through
`bash -c` with `noisy_jax.experiment.environment.clean_environ()` (no XLA_FLAGS, no JAX_*/PJRT_* variables: one CPU
device, XLA's defaults), its `--workdir=...` (or, for the benchmarks, its output directory) replaced by
`REGEN_ROOT/NAME` (emptied first, so no checkpoint is resumed). Tables made by one command (README's Speed table and the
benchmarks README's Results table) share one run. The run's output goes to `REGEN_ROOT/NAME/stdout.txt` and its record
(command, start, seconds, load average before and after, cores, the child's `environment.describe()`) to
`REGEN_ROOT/NAME/regen_run.json`.

Tables, their commands and renderers: `experiments/readme_tables.py`. In a README each table sits under a
`<!-- table: NAME -->` marker and is followed, after one blank line, by its environment line
(`<sub>Environment: ...</sub>`), which this script owns: when, how long, the load, and `environment.summary_line`
of the run. Without --write it prints, per table, the README's table, the new one, the changed cells
('old -> new') and the new environment line, and lists the numbers of the prose after the table that the new table
no longer holds (that prose must be re-read). --write replaces each table and its environment line in place and
nothing else.

--rows RUN[,RUN] re-measures some rows of a comparison's table (one row per run of its config: `Table.rows`): the
command runs with `--runs=RUN,...` into `REGEN_ROOT/NAME-rows`, those rows replace theirs in the README's table (a
new run's row goes where the table's order puts it), the environment line of the whole table stays, and a line
`<sub>Rows RUN,...: measured ...</sub>` after it says when and where these rows were measured. The next
regeneration of the whole table drops those lines.

Not part of CI: the full set takes about an hour on a 2-core CPU. Use it before any submission that moves numbers:

  python -m experiments.regenerate_readme --write
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import time

from experiments import readme_tables
from noisy_jax.core import atomic_files
from noisy_jax.experiment import environment

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_REGEN_ROOT = os.path.join("workdirs", "regen")
RUN_RECORD = "regen_run.json"
STDOUT = "stdout.txt"
LOAD_SAMPLE_SECONDS = 10.0
_WORKDIR_FLAG = re.compile(r"--workdir[= ](\S+)")
_DESCRIBE = "import json; from noisy_jax.experiment import environment; print(json.dumps(environment.describe()))"


def with_workdir(command: str, workdir: str) -> str:
  """`command` with its --workdir flag pointing at `workdir` (unchanged when it has none)."""
  return _WORKDIR_FLAG.sub(f"--workdir={workdir}", command)


def child_environment(env: dict[str, str]) -> dict:
  """`environment.describe()` as a process started with `env` sees it."""
  out = subprocess.run([sys.executable, "-c", _DESCRIBE], env=env, cwd=REPO, check=True, capture_output=True, text=True)
  return json.loads(out.stdout.strip().splitlines()[-1])


def with_output_dir(command: str, workdir: str, output_dir: str | None = None) -> str:
  """`command` writing into `workdir`: its --workdir flag rewritten, and every occurrence of `output_dir` (the
  output path of a command without --workdir, e.g. the benchmarks' OUTDIR) replaced."""
  command = with_workdir(command, workdir)
  return command.replace(output_dir, workdir) if output_dir else command


def run_recorded(command: str, workdir: str, output_dir: str | None = None) -> dict:
  """Runs `command` (a README command) with its workdir set to `workdir`, in a clean environment.

  `workdir` is emptied first; `output_dir` is the output path written in a command without --workdir
  (`with_output_dir`). Returns (and writes to WORKDIR/regen_run.json) the run's record; raises RuntimeError naming
  the command and the log when it fails.
  """
  workdir = os.path.abspath(workdir)
  if os.path.exists(workdir):
    shutil.rmtree(workdir)
  os.makedirs(workdir)
  env = environment.clean_environ()
  record = {
    "command": command,
    "run_as": with_output_dir(command, workdir, output_dir),
    "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "load_before": environment.load_average(),
    "cpu_count": len(os.sched_getaffinity(0)),
    "environment": child_environment(env),
  }
  start = time.perf_counter()
  load_samples = []  # the 1-minute load average every LOAD_SAMPLE_SECONDS while the command runs
  with open(os.path.join(workdir, STDOUT), "w") as log:
    process = subprocess.Popen(
      ["bash", "-c", record["run_as"]], env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT
    )
    while True:
      try:
        returncode = process.wait(timeout=LOAD_SAMPLE_SECONDS)
        break
      except subprocess.TimeoutExpired:
        load = environment.load_average()
        if load:
          load_samples.append(load[0])
  record.update(
    seconds=round(time.perf_counter() - start, 1), load_after=environment.load_average(), returncode=returncode
  )
  if load_samples:
    record["load_during"] = {
      "mean": round(sum(load_samples) / len(load_samples), 2),
      "max": max(load_samples),
      "samples": len(load_samples),
    }
  with open(os.path.join(workdir, RUN_RECORD), "w") as f:
    json.dump(record, f, indent=1)
  if returncode:
    raise RuntimeError(f"{command!r} failed with exit code {returncode}; its output: {os.path.join(workdir, STDOUT)}")
  return record


def read_record(workdir: str) -> dict:
  """The record `run_recorded` wrote in `workdir` (FileNotFoundError naming the file if there is none)."""
  path = os.path.join(workdir, RUN_RECORD)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path} does not exist: run the table's command first (without --reuse).")
  with open(path) as f:
    return json.load(f)


# ---------------------------------------------------------------------------------------------------------------
# Tables in a README: the block under a marker (table, blank line, environment line)

MARKER = "<!-- table: {} -->"
ENV_PREFIX = "<sub>Environment: "
ROWS_PREFIX = "<sub>Rows "
ENV_SUFFIX = "</sub>"


@dataclasses.dataclass(frozen=True)
class Block:
  """Where a table is in a README's lines: table lines [start, end), its environment line (None if absent) and the
  number of rows lines right after it (`--rows`)."""

  start: int
  end: int
  env: int | None
  rows_lines: int = 0

  def after(self) -> int:
    """The first line after the block (after the environment and rows lines when there are some)."""
    return self.env + 1 + self.rows_lines if self.env is not None else self.end


def find_block(lines: list[str], name: str, path: str = "README") -> Block:
  """The block of table `name` in `lines`; ValueError naming the file when its marker is missing or repeated, or no
  table follows it."""
  marker = MARKER.format(name)
  found = [i for i, line in enumerate(lines) if line.strip() == marker]
  if len(found) != 1:
    raise ValueError(f"{path} has {len(found)} lines {marker!r}; a table needs exactly one.")
  start = end = found[0] + 1
  while end < len(lines) and lines[end].startswith("|"):
    end += 1
  if end == start:
    raise ValueError(f"no Markdown table right after {marker!r} in {path} (line {start + 1}).")
  env = end + 1 if end + 1 < len(lines) and not lines[end].strip() and lines[end + 1].startswith(ENV_PREFIX) else None
  rows_lines = 0
  while env is not None and env + 1 + rows_lines < len(lines) and lines[env + 1 + rows_lines].startswith(ROWS_PREFIX):
    rows_lines += 1
  return Block(start, end, env, rows_lines)


def current_table(text: str, name: str, path: str = "README") -> tuple[str, str | None]:
  """(table, environment line or None) of `name` in a README's text."""
  lines = text.split("\n")
  block = find_block(lines, name, path)
  return "\n".join(lines[block.start : block.end]), (lines[block.env] if block.env is not None else None)


def replace_table(text: str, name: str, table: str, env_line: str, path: str = "README") -> str:
  """`text` with table `name` and its environment line replaced (inserted after a blank line if it had none); the
  rows lines of earlier `--rows` runs go."""
  lines = text.split("\n")
  block = find_block(lines, name, path)
  return "\n".join(lines[: block.start] + table.split("\n") + ["", env_line] + lines[block.after() :])


def splice_rows(table: str, rows_table: str, labels: list[str]) -> str:
  """`table` with the rows of `rows_table` in place of its rows of the same label (first cell).

  labels: every row label of the table in its order: a row new to `table` goes where it puts it, and a row of
  `table` whose label is not in it (a run the config no longer has) goes. ValueError when the headers differ.
  """
  old, new = table.split("\n"), rows_table.split("\n")
  if [re.sub(r"\s", "", line) for line in old[:2]] != [re.sub(r"\s", "", line) for line in new[:2]]:
    raise ValueError(f"the new rows' header {new[0]!r} is not the table's {old[0]!r}.")
  label = lambda line: line.strip()[1:-1].split("|")[0].strip()
  lines_by_label = {label(line): line for line in old[2:]}
  lines_by_label.update({label(line): line for line in new[2:]})
  return "\n".join(old[:2] + [lines_by_label[name] for name in labels if name in lines_by_label])


def replace_rows(
  text: str, name: str, rows_table: str, labels: list[str], rows_line: str, runs: list[str], path: str = "README"
) -> str:
  """`text` with the rows of `rows_table` spliced into table `name` (`splice_rows`) and `rows_line` after its
  environment line. An earlier rows line no longer names `runs` (and goes when it named no other run). ValueError
  when the table has no environment line (regenerate it whole first)."""
  lines = text.split("\n")
  block = find_block(lines, name, path)
  if block.env is None:
    raise ValueError(f"table {name!r} in {path} has no environment line: regenerate it whole before some rows.")
  table = splice_rows("\n".join(lines[block.start : block.end]), rows_table, labels)
  kept = []
  for line in lines[block.env + 1 : block.after()]:
    others = [run for run in line[len(ROWS_PREFIX) :].split(":", 1)[0].split(",") if run not in runs]
    if others:
      kept.append(f"{ROWS_PREFIX}{','.join(others)}:{line.split(':', 1)[1]}")
  return "\n".join(
    lines[: block.start] + table.split("\n") + ["", lines[block.env]] + kept + [rows_line] + lines[block.after() :]
  )


def parse_table(table: str) -> list[list[str]]:
  """Rows of cells (header first, the '---' rule left out); ValueError when a row's cell count differs."""
  lines = table.strip().split("\n")
  rows = [[cell.strip() for cell in line.strip()[1:-1].split("|")] for line in lines]
  if len(rows) < 2 or not all(set(cell) <= set("-: ") and cell for cell in rows[1]):
    raise ValueError(f"not a Markdown table (no '|---|' rule under the header):\n{table}")
  rows = [rows[0]] + rows[2:]
  for line, row in zip(lines[:1] + lines[2:], rows):
    if len(row) != len(rows[0]):
      raise ValueError(f"row {line!r} has {len(row)} cells, the header {len(rows[0])}.")
  return rows


def prose_after(text: str, name: str, path: str = "README") -> str:
  """The paragraph after table `name` (after its environment line)."""
  lines = text.split("\n")
  i = find_block(lines, name, path).after()
  while i < len(lines) and not lines[i].strip():
    i += 1
  paragraph = []
  while i < len(lines) and lines[i].strip() and not lines[i].startswith(("|", "<!--", "#", "```")):
    paragraph.append(lines[i])
    i += 1
  return "\n".join(paragraph)


# ---------------------------------------------------------------------------------------------------------------
# Environment lines and comparisons


def _format_load(load) -> str:
  return "?" if not load else f"{load[0]:.2f}"


def env_line(record: dict, runs: list[str] | None = None) -> str:
  """The environment line of a run: start (UTC), seconds, 1-minute load (mean and max while it ran, when sampled;
  else before -> after), cores, summary_line. A load well above the run's own threads means other work shared the
  CPU: its times are slow, its accuracies are not affected (a run is deterministic in its environment). With
  `runs`, the rows line of a `--rows` run of those runs."""
  started = datetime.datetime.fromisoformat(record["started"]).astimezone(datetime.timezone.utc)
  cores = f" on {record['cpu_count']} cores" if record.get("cpu_count") else ""
  during = record.get("load_during")
  load = (
    f"1-minute load {during['mean']:.1f} mean, {during['max']:.1f} max while it ran"
    if during
    else f"1-minute load {_format_load(record.get('load_before'))} -> {_format_load(record.get('load_after'))}"
  )
  prefix, how = (ENV_PREFIX, "") if runs is None else (f"{ROWS_PREFIX}{','.join(runs)}: ", f" --rows {','.join(runs)}")
  return (
    f"{prefix}measured {started:%Y-%m-%d %H:%M} UTC by experiments/regenerate_readme.py{how}, "
    f"{record['seconds']:,.0f} s, {load}{cores}; {environment.summary_line(record['environment'])}"
    f"{ENV_SUFFIX}"
  )


def cell_changes(old: str, new: str) -> list[str] | None:
  """'row R, column C: old -> new' per changed cell; None when the two tables differ in shape (use a line diff)."""
  a, b = parse_table(old), parse_table(new)
  if len(a) != len(b) or any(len(x) != len(y) for x, y in zip(a, b)):
    return None
  header = b[0]
  changes = []
  for i, (row_a, row_b) in enumerate(zip(a, b)):
    for j, (x, y) in enumerate(zip(row_a, row_b)):
      if x != y:
        where = "header" if i == 0 else f"row {row_b[0] or i!r}"
        changes.append(f"{where}, column {header[j] or j + 1!r}: {x} -> {y}")
  return changes


_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def _numbers(text: str) -> list[str]:
  return [m.group(0).rstrip(",").replace(",", "") for m in _NUMBER.finditer(re.sub(r"`[^`]*`", "", text))]


def _occurs(number: str, values: list[float]) -> bool:
  """Whether a value of the table rounds to `number` at its precision (prose '92.5' matches '92.50 ± 0.82')."""
  decimals = len(number.split(".")[1]) if "." in number else 0
  return any(abs(round(v, decimals) - float(number)) < 1e-9 for v in values)


def stale_prose_numbers(prose: str, old_table: str, new_table: str) -> list[str]:
  """Numbers of `prose` that no value of `new_table` rounds to, those of the old table marked '(was in the table)'."""
  old_values = [float(n) for n in _numbers(old_table)]
  new_values = [float(n) for n in _numbers(new_table)]
  out = []
  for number in dict.fromkeys(_numbers(prose)):
    if not _occurs(number, new_values):
      out.append(number + (" (was in the table)" if _occurs(number, old_values) else ""))
  return out


def comparison(table: readme_tables.Table, text: str, new_table: str, new_env: str, path: str) -> str:
  """The report of one table: old and new tables, the changed cells, the environment lines, stale prose numbers."""
  old_table, old_env = current_table(text, table.name, path)
  out = [
    f"== {table.name} ({table.readme}) ==",
    f"command: {table.command}",
    "",
    "README now:",
    old_table,
    "",
    "regenerated:",
    new_table,
    "",
  ]
  if old_table == new_table:
    out.append("table unchanged.")
  else:
    changes = cell_changes(old_table, new_table)
    if changes is None:
      out.append("the tables differ in shape:")
      out += list(
        difflib.unified_diff(old_table.split("\n"), new_table.split("\n"), "README", "regenerated", lineterm="")
      )
    else:
      out.append(f"{len(changes)} changed cell(s):")
      out += [f"  {change}" for change in changes]
    stale = stale_prose_numbers(prose_after(text, table.name, path), old_table, new_table)
    if stale:
      out.append(
        "numbers of the prose after the table that the new table does not hold (re-read it): " + ", ".join(stale)
      )
  out += ["", f"environment now: {old_env or '(none)'}", f"environment new: {new_env}", ""]
  return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------------
# Running, writing, the command line


def write_atomically(path: str, text: str) -> None:
  """Writes `text` to `path` whole or not at all (noisy_jax.core.atomic_files.write_text)."""
  atomic_files.write_text(path, text)


def obtain_run(table: readme_tables.Table, root: str, reuse: bool, runs: list[str] | None = None) -> tuple[str, dict]:
  """(workdir, record) of the table's run, or with `runs` of its command restricted to those runs (`--runs=...`,
  in ROOT/NAME-rows): an earlier one with `reuse` (FileNotFoundError naming a missing workdir; RuntimeError for a
  failed run), else a new one."""
  workdir = os.path.join(root, table.run_name + ("-rows" if runs else ""))
  command = table.command + (f" --runs={','.join(runs)}" if runs else "")
  if not reuse:
    return workdir, run_recorded(command, workdir, table.output_dir)
  if not os.path.isdir(workdir):
    raise FileNotFoundError(f"workdir {workdir} does not exist: run {table.name!r} without --reuse first.")
  record = read_record(workdir)
  if record.get("command") != command:
    raise RuntimeError(f"the run in {workdir} ran {record.get('command')!r}, not {command!r}: run it without --reuse.")
  if record.get("returncode"):
    raise RuntimeError(
      f"the run in {workdir} failed (exit code {record['returncode']}); see {os.path.join(workdir, STDOUT)}."
    )
  return workdir, record


def list_tables(tables, readme_root: str) -> str:
  """One paragraph per table: name, file, command, the environment line now in the README."""
  out = []
  for table in tables:
    path = os.path.join(readme_root, table.readme)
    try:
      with open(path) as f:
        _, env = current_table(f.read(), table.name, path)
      env = env or "(no environment line)"
    except (OSError, ValueError) as e:
      env = f"(unreadable: {e})"
    out.append(f"{table.name}\n  file: {table.readme}\n  command: {table.command}\n  environment: {env}")
  return "\n".join(out)


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--list", action="store_true", help="list the tables, their commands and environment lines")
  parser.add_argument("--only", default="", help="comma-separated table names (default: all)")
  parser.add_argument(
    "--root",
    default=DEFAULT_REGEN_ROOT,
    help="where the runs go, one workdir per table (default %(default)s, relative to the repository root)",
  )
  parser.add_argument("--reuse", action="store_true", help="render from ROOT/NAME's earlier run instead of running")
  parser.add_argument("--write", action="store_true", help="replace the tables and environment lines in place")
  parser.add_argument(
    "--rows",
    default="",
    help="comma-separated run names: re-measure only these rows of the (comparison) tables named by --only",
  )
  parser.add_argument(
    "--readme-root", default=REPO, help="directory the README paths are relative to (default: the repository root)"
  )
  return parser.parse_args(argv)


def _table_run(table: readme_tables.Table, runs: dict, *, root: str, reuse: bool, rows) -> tuple[str, dict]:
  """(workdir, record) of the table's run (`obtain_run`), kept in `runs` by run name for the tables that share it,
  a failure too (RuntimeError naming it, for every table of that run)."""
  if table.run_name not in runs:
    try:
      runs[table.run_name] = obtain_run(table, root, reuse, rows)
    except (OSError, RuntimeError) as e:
      runs[table.run_name] = e
  if isinstance(runs[table.run_name], Exception):
    raise RuntimeError(f"no usable run {table.run_name!r}: {runs[table.run_name]}")
  return runs[table.run_name]


def _regenerate(table: readme_tables.Table, args, *, root: str, rows, runs: dict, texts: dict) -> None:
  """Renders `table` (or with `rows` only those rows) from its run, prints the comparison with the README's and
  puts the new text in texts[README path] (read first when not there yet)."""
  path = os.path.join(args.readme_root, table.readme)
  rows_of = table.rows_of(rows) if rows else None
  workdir, record = _table_run(table, runs, root=root, reuse=args.reuse, rows=rows)
  if path not in texts:
    with open(path) as f:
      texts[path] = f.read()
  if rows_of:
    new_env = env_line(record, rows)
    labels = [label for _, label in table.rows()]
    rows_table = table.render_rows(workdir, rows_of)
    new_table = splice_rows(current_table(texts[path], table.name, table.readme)[0], rows_table, labels)
    print(comparison(table, texts[path], new_table, new_env, table.readme))
    texts[path] = replace_rows(texts[path], table.name, rows_table, labels, new_env, rows, table.readme)
    return
  new_table, new_env = table.render(workdir), env_line(record)
  print(comparison(table, texts[path], new_table, new_env, table.readme))
  texts[path] = replace_table(texts[path], table.name, new_table, new_env, table.readme)


def main(argv=None) -> int:
  """Runs (or reuses), renders, compares and, with --write, writes. Returns 0, or 1 when a table failed."""
  args = parse_args(argv)
  names = [n.strip() for n in args.only.split(",") if n.strip()] or None
  try:
    tables = readme_tables.by_name(names)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if args.list:
    print(list_tables(tables, args.readme_root))
    return 0
  rows = [r.strip() for r in args.rows.split(",") if r.strip()] or None
  if rows and names is None:
    print("error: --rows needs --only naming the tables whose rows to re-measure", file=sys.stderr)
    return 2
  root = os.path.join(REPO, args.root)  # an absolute --root stays as it is
  runs, texts, failed = {}, {}, []
  for table in tables:
    try:
      _regenerate(table, args, root=root, rows=rows, runs=runs, texts=texts)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
      failed.append(table.name)
      print(f"== {table.name} ({table.readme}) ==\nerror: {e}\n", file=sys.stderr)
  if args.write:
    for path, text in texts.items():
      write_atomically(path, text)
      print(f"wrote {path}")
  if failed:
    print(f"not regenerated: {', '.join(failed)}", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
