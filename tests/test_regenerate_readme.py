"""The README regenerator: markers, commands and tables in the READMEs, renderers on synthetic outputs, --write.

Fast: nothing is trained. The synthetic workdirs have the layout the real writers produce (`comparison.run`'s and
`sweep.run_sweep`'s summary.json, `run_single`'s per-run summary.json, the benchmarks' JSON records built with
`common.summarize`), with run names and point labels taken from the real configs and `sweep_grid.point_label`.
"""

import json
import os
import re
import shutil

import pytest

from experiments import readme_benchmarks
from experiments import readme_tables
from experiments import regenerate_readme as regen
from experiments.benchmarks import common
from experiments.configs import baselines
from experiments.configs import default
from experiments.configs import k_sweep
from experiments.configs import log_end_sweep
from experiments.configs import lr_noise_grid
from experiments.configs import memorisation
from experiments.configs import pseudo_label_noise
from experiments.configs import q_sweep
from experiments.configs import relabel_ablation
from noisy_jax.experiment import sweep_grid

REPO = regen.REPO
ENVIRONMENT = {
  "python": "3.11.7",
  "packages": {"jax": "0.10.2", "jaxlib": "0.10.2", "flax": "0.12.8", "optax": "0.2.8", "numpy": "2.4.6"},
  "backend": "cpu",
  "device_count": 1,
  "device_kind": "cpu",
  "xla_flags": "",
  "cpu": "Test CPU",
  "machine": "x86_64",
}
METRICS = {
  "best_test_accuracy": 0.93,
  "last_test_accuracy": 0.9,
  "label_recovery_overall": 0.91,
  "detection_precision": 0.96,
  "detection_recall": 0.98,
  "pruned_fraction": 0.6,
  "test_margin_correct": 2.03,
  "realised_noise_rate": 0.6,
  "seconds": 40.0,
}
EPOCH = {
  "train_loss": 0.5,
  "train_accuracy_given_labels": 0.7,
  "memorised_fraction": 0.65,
  "test_accuracy": 0.9,
  "label_recovery_overall": 0.9,
}


def read(path):
  with open(os.path.join(REPO, path)) as f:
    return f.read()


def readme_table(table):
  return regen.current_table(read(table.readme), table.name, table.readme)[0]


# ---------------------------------------------------------------------------------------------------------------
# Synthetic outputs


def write_json(path, obj):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    json.dump(obj, f)


def run_record(command, started):
  """regenerate_readme's record of a finished run of `command` started at `started` (UTC, ISO)."""
  return {
    "command": command,
    "started": f"{started}+00:00",
    "seconds": 7.0,
    "load_before": [1.0, 1, 1],
    "load_after": [1.5, 1, 1],
    "cpu_count": 2,
    "environment": ENVIRONMENT,
    "returncode": 0,
  }


def stats(metrics=METRICS):
  return {k: {"mean": v, "std": 0.01} for k, v in metrics.items()}


def comparison_workdir(path, config):
  """comparison.run's summary.json, and run_single's per-run summary.json with a 60-epoch history."""
  runs = list(config.runs.keys())
  write_json(
    os.path.join(path, "summary.json"),
    {
      "title": "t",
      "seeds": [0],
      "mean_std": {run: stats() for run in runs},
      "per_seed": {run: [METRICS] for run in runs},
      "seconds": 1.0,
      "config": config.to_dict(),
    },
  )
  for run in runs:
    history = [{"stage": "stage1", "epoch": e, **EPOCH} for e in range(1, 61)]
    write_json(os.path.join(path, run, "seed0", "summary.json"), {"method": run, "seed": 0, "history": history})
  return str(path)


def sweep_workdir(path, config):
  """sweep.run_sweep's summary.json: 'values' of the grid, 'mean_std' keyed by sweep_grid.point_label."""
  fields = [field for field, _ in config.sweep.grid]
  values = [list(v) for _, v in config.sweep.grid]
  mean_std = {sweep_grid.point_label(fields, (a, b)): stats() for a in values[0] for b in values[1]}
  write_json(
    os.path.join(path, "summary.json"),
    {"title": "t", "fields": fields, "values": values, "seeds": [0, 1, 2], "mean_std": mean_std, "seconds": 1.0},
  )
  return str(path)


def benchmarks_workdir(path):
  """results.jsonl as run_all.sh plus the one-thread train_step run write it."""

  def results(*names, unit="images/s"):
    return common.summarize(
      {name: [0.3 + 0.01 * i, 0.31 + 0.01 * i] for i, name in enumerate(names)}, work=128, unit=unit
    )

  def record(benchmark, res, settings=None, cores=2):
    return {
      "benchmark": benchmark,
      "quick": False,
      "repeats": 2,
      "warmup": 1,
      "settings": settings or {},
      "threads": {"cores": cores, "jax_cpu_threads": cores, "torch_threads": cores},
      "results": res,
    }

  step_sides = ("noisy_jax (jit, donated)", "torch eager (NCHW)", "torch eager (channels_last)")
  overhead = results("CE", "JO loss only", "JO")
  for s in overhead.values():
    s["overhead_percent_medians"] = 100.0 * (s["ratio_of_medians"] - 1.0)
    s["overhead_percent_paired"] = 100.0 * (s["median_ratio"] - 1.0)
  memory = {
    f"{f}/{m}": {
      "first_step_s": 2.9,
      "lower_s": 0.5,
      "compile_s": 1.4,
      "init_s": 5.3,
      "peak_rss_mb": 1635.0,
      "xla_temp_mb": 596.0,
    }
    for f in ("noisy_jax", "torch")
    for m in ("preact_resnet32", "small_cnn")
  }
  records = [
    record("train_step", results(*step_sides), {"steps_per_unit": 5}),
    record(
      "epoch", results("noisy_jax (make_epoch_fn, steps)", "torch DataLoader workers=0", "torch DataLoader workers=2")
    ),
    record(
      "small_cnn_epoch",
      results("noisy_jax (make_epoch_fn, steps)", "torch eager, DataLoader", "torch eager, tensor slices"),
    ),
    record("label_table_overhead", overhead, {"model": "small_cnn", "steps_per_unit": 10}),
    record("label_table_overhead", overhead, {"model": "preact_resnet32", "steps_per_unit": 3}),
    record("compile_and_memory", memory),
    record("train_step", results(*step_sides), {"steps_per_unit": 5}, cores=1),
  ]
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, "results.jsonl"), "w") as f:
    f.write("".join(json.dumps(r) + "\n" for r in records))
  return str(path)


def loss_properties_workdir(path):
  """experiments.loss_properties' stdout: a line, then the Markdown table (README's own rows stand in)."""
  os.makedirs(path, exist_ok=True)
  table = readme_table(readme_tables.by_name(["loss_properties"])[0])
  with open(os.path.join(path, regen.STDOUT), "w") as f:
    f.write("C = 10, 512 random logit vectors at scales (1, 10, 100, 1000), default hyper-parameters\n" + table + "\n")
  return str(path)


SYNTHETIC = {
  "default3": lambda p: comparison_workdir(p, default.get_config()),
  "baselines_sym60": lambda p: comparison_workdir(p, baselines.get_config("sym60")),
  "baselines_asym40": lambda p: comparison_workdir(p, baselines.get_config("asym40")),
  "baselines_losses_sym60": lambda p: comparison_workdir(p, baselines.get_config("losses_sym60")),
  "baselines_losses_asym40": lambda p: comparison_workdir(p, baselines.get_config("losses_asym40")),
  "memorisation": lambda p: comparison_workdir(p, memorisation.get_config()),
  "relabel_ablation": lambda p: comparison_workdir(p, relabel_ablation.get_config()),
  "lr_noise_grid": lambda p: comparison_workdir(p, lr_noise_grid.get_config()),
  "pseudo_label_noise": lambda p: comparison_workdir(p, pseudo_label_noise.get_config()),
  "log_end_sweep": lambda p: comparison_workdir(p, log_end_sweep.get_config()),
  "q_sweep": lambda p: sweep_workdir(p, q_sweep.get_config()),
  "k_sweep": lambda p: sweep_workdir(p, k_sweep.get_config()),
  "speed": benchmarks_workdir,
  "loss_properties": loss_properties_workdir,
  "benchmarks": benchmarks_workdir,
}


# ---------------------------------------------------------------------------------------------------------------
# The READMEs


@pytest.mark.parametrize("table", readme_tables.TABLES, ids=lambda t: t.name)
def test_marker_command_and_table(table):
  text = read(table.readme)
  marker = regen.MARKER.format(table.name)
  assert text.count(marker) == 1, f"{table.readme} must hold {marker!r} exactly once"
  before = text[: text.index(marker)]
  blocks = re.findall(r"```bash\n(.*?)```", before, re.S)
  assert blocks, f"no bash code block before {marker!r}"
  assert table.command in blocks[-1].splitlines(), (
    f"{table.name}'s command is not in the code block before its marker:\n{table.command}\n---\n{blocks[-1]}"
  )
  rows = regen.parse_table(readme_table(table))
  assert len(rows) > 1
  _, env = regen.current_table(text, table.name, table.readme)
  assert env is not None and env.startswith(regen.ENV_PREFIX) and env.endswith(regen.ENV_SUFFIX)


def test_registry_covers_every_marker():
  names = {t.name for t in readme_tables.TABLES}
  for path in (readme_tables.README, readme_tables.BENCHMARKS_README):
    markers = set(re.findall(r"<!-- table: (\S+) -->", read(path)))
    assert markers <= names, f"{path} has markers without a registry entry: {markers - names}"
  assert set(SYNTHETIC) == names


@pytest.mark.parametrize("table", readme_tables.TABLES, ids=lambda t: t.name)
def test_renderer_matches_readme_format(table, tmp_path):
  rendered = table.render(SYNTHETIC[table.name](str(tmp_path / table.name)))
  new, old = regen.parse_table(rendered), regen.parse_table(readme_table(table))
  assert new[0] == old[0]  # header
  labels = lambda rows: [re.sub(r"\d[\d.,]*", "N", row[0]) for row in rows]  # some labels hold a measured time
  assert labels(new) == labels(old)  # row labels, q and k sweeps' from the grid values
  assert rendered.split("\n")[1] == readme_table(table).split("\n")[1]


def test_renderer_formats(tmp_path):
  default3 = readme_tables.render_default3(SYNTHETIC["default3"](str(tmp_path / "d")))
  assert "| CE | 93.00 ± 1.00 | 90.00 ± 1.00 |" in default3 and default3.endswith("| 40.0 |")
  q = readme_tables.render_q_sweep(SYNTHETIC["q_sweep"](str(tmp_path / "q")))
  assert q.count("**") == 2 and "| 1.0 |" in q
  speed = readme_benchmarks.render_speed(SYNTHETIC["speed"](str(tmp_path / "s")))
  assert "| 61 ms | 63 ms (NCHW), 65 ms (channels_last) | 1.03x, 1.07x |" in speed  # unit times / 5 steps
  assert "| ResNet-32 step compile, first step | 2.9 s | | |" in speed
  memory = readme_tables.render_memorisation(SYNTHETIC["memorisation"](str(tmp_path / "m")))
  assert "| train loss | 0.500 |" in memory and "| 65.0% |" in memory


def test_missing_output_is_named(tmp_path):
  with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "summary.json"))):
    readme_tables.render_default3(str(tmp_path))
  with pytest.raises(FileNotFoundError, match="results.jsonl"):
    readme_benchmarks.render_benchmarks(str(tmp_path))


# ---------------------------------------------------------------------------------------------------------------
# Commands, comparisons, --write


def test_with_workdir():
  command = readme_tables.DEFAULT3_COMMAND
  rewritten = regen.with_workdir(command, "/tmp/regen/default3")
  assert rewritten == command.replace("--workdir=workdirs/default3", "--workdir=/tmp/regen/default3")
  assert regen.with_workdir("python -m x --workdir workdirs/a --b=1", "/w") == "python -m x --workdir=/w --b=1"
  assert regen.with_workdir("python -m experiments.loss_properties", "/w") == "python -m experiments.loss_properties"
  bench = regen.with_output_dir(readme_tables.BENCHMARKS_COMMAND, "/w", readme_tables.BENCHMARKS_OUTDIR)
  assert readme_tables.BENCHMARKS_OUTDIR not in bench
  assert bench == "bash experiments/benchmarks/run_all.sh /w"


def test_unknown_table_and_missing_workdir(tmp_path, capsys):
  with pytest.raises(ValueError, match="unknown table name.*'nope'.*known: default3"):
    readme_tables.by_name(["nope"])
  assert regen.main(["--only", "nope"]) == 2
  assert "known: default3" in capsys.readouterr().err
  assert regen.main(["--only", "q_sweep", "--reuse", "--root", str(tmp_path)]) == 1
  assert f"workdir {tmp_path / 'q_sweep'} does not exist" in capsys.readouterr().err


def test_cell_changes_and_stale_prose():
  old = "| q | 20% |\n|---|---|\n| 0.1 | 92.50 ± 0.82 |\n| 0.2 | 88.00 ± 1.31 |"
  new = "| q | 20% |\n|---|---|\n| 0.1 | 91.00 ± 0.82 |\n| 0.2 | 88.00 ± 1.31 |"
  assert regen.cell_changes(old, new) == ["row '0.1', column '20%': 92.50 ± 0.82 -> 91.00 ± 0.82"]
  assert regen.cell_changes(old, new + "\n| 0.3 | 1 |") is None
  # '1' is left out: 0.82 rounds to it.
  prose = "q = 0.7 is best (92.5%), the CE end gets 88.0%, q = 1 is unstable (65 ± 18%)."
  assert regen.stale_prose_numbers(prose, old, new) == ["0.7", "92.5 (was in the table)", "65", "18"]


def test_env_line():
  record = {
    "started": "2026-11-24T00:25:58+00:00",
    "seconds": 1234.4,
    "load_before": [1.0, 1, 1],
    "load_after": [2.125, 1, 1],
    "cpu_count": 2,
    "environment": ENVIRONMENT,
  }
  line = regen.env_line(record)
  assert line.startswith("<sub>Environment: measured 2026-11-24 00:25 UTC") and line.endswith("</sub>")
  assert "1,234 s, 1-minute load 1.00 -> 2.12 on 2 cores; jax 0.10.2" in line and "(Test CPU)" in line
  sampled = regen.env_line({**record, "load_during": {"mean": 1.94, "max": 3.5, "samples": 120}})
  assert "1,234 s, 1-minute load 1.9 mean, 3.5 max while it ran on 2 cores;" in sampled


def test_run_recorded_samples_the_load_and_records_the_run(tmp_path, monkeypatch):
  """A real (tiny) command: output captured, exit code, seconds, and the load sampled while it runs."""
  monkeypatch.setattr(regen, "LOAD_SAMPLE_SECONDS", 0.05)
  record = regen.run_recorded("sleep 0.3; echo done --workdir=somewhere", str(tmp_path / "run"))
  assert record["returncode"] == 0 and record["seconds"] >= 0.3
  assert record["load_during"]["samples"] >= 3
  assert record["run_as"] == f"sleep 0.3; echo done --workdir={tmp_path / 'run'}"
  assert (tmp_path / "run" / regen.STDOUT).read_text().strip() == f"done --workdir={tmp_path / 'run'}"
  assert regen.read_record(str(tmp_path / "run"))["command"] == record["command"]
  with pytest.raises(RuntimeError, match="exit code 3"):
    regen.run_recorded("exit 3", str(tmp_path / "fails"))


def test_write_round_trip(tmp_path, capsys):
  """--write on copies of the READMEs replaces the table and its environment line, nothing else."""
  for path in (readme_tables.README, readme_tables.BENCHMARKS_README):
    os.makedirs(tmp_path / os.path.dirname(path), exist_ok=True)
    shutil.copy(os.path.join(REPO, path), tmp_path / path)
  workdir = loss_properties_workdir(str(tmp_path / "regen" / "loss_properties"))
  with open(os.path.join(workdir, regen.STDOUT)) as f:
    stdout = f.read()
  with open(os.path.join(workdir, regen.STDOUT), "w") as f:  # one changed cell
    f.write(stdout.replace("| nce_mae | yes | yes | 19 .. 19 |", "| nce_mae | yes | yes | 19 .. 20 |"))
  write_json(
    os.path.join(workdir, regen.RUN_RECORD), run_record("python -m experiments.loss_properties", "2026-11-24T00:25:58")
  )
  args = ["--only", "loss_properties", "--reuse", "--root", str(tmp_path / "regen"), "--readme-root", str(tmp_path)]
  assert regen.main(args) == 0
  printed = capsys.readouterr().out
  assert "row 'nce_mae', column 'sum_j L(z, j): min .. max': 19 .. 19 -> 19 .. 20" in printed
  assert (tmp_path / "README.md").read_text() == read("README.md")  # without --write nothing changes

  assert regen.main(args + ["--write"]) == 0
  before, after = read("README.md").split("\n"), (tmp_path / "README.md").read_text().split("\n")
  block = regen.find_block(before, "loss_properties")
  assert after[: block.start] == before[: block.start]
  assert after[block.after() :] == before[block.after() :]
  changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
  nce_mae_row = next(i for i in range(block.start, block.env) if before[i].startswith("| nce_mae |"))
  assert changed == [nce_mae_row, block.env]  # the nce_mae row and the environment line
  assert after[block.env] == regen.env_line(regen.read_record(workdir))
  assert (tmp_path / readme_tables.BENCHMARKS_README).read_text() == read(readme_tables.BENCHMARKS_README)
  assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]  # no temporary file left


def test_replace_table_inserts_a_missing_env_line():
  text = "intro\n<!-- table: t -->\n| a |\n|---|\n| 1 |\n\nprose 1\n"
  out = regen.replace_table(text, "t", "| a |\n|---|\n| 2 |", "<sub>Environment: x</sub>")
  assert out == "intro\n<!-- table: t -->\n| a |\n|---|\n| 2 |\n\n<sub>Environment: x</sub>\n\nprose 1\n"
  assert regen.replace_table(out, "t", "| a |\n|---|\n| 3 |", "<sub>Environment: y</sub>") == out.replace(
    "| 2 |", "| 3 |"
  ).replace("x</sub>", "y</sub>")
  with pytest.raises(ValueError, match="has 0 lines '<!-- table: u -->'"):
    regen.replace_table(text, "u", "", "")


def test_train_step_times_are_per_step_not_per_timed_unit():
  """train_step.py times units of `steps_per_unit` steps: the tables show per-step times, ratios unchanged."""
  record = {
    "settings": {"steps_per_unit": 5},
    "results": {
      "noisy_jax": {
        "median_s": 2.5,
        "q1_s": 2.4,
        "q3_s": 2.6,
        "min_s": 2.3,
        "max_s": 2.9,
        "ratio_of_medians": 0.7,
        "images/s_at_median": 256.0,
      }
    },
  }
  stats = readme_benchmarks.per_step(record)["noisy_jax"]
  assert stats["median_s"] == pytest.approx(0.5) and stats["q3_s"] == pytest.approx(0.52)
  assert stats["ratio_of_medians"] == 0.7 and stats["images/s_at_median"] == 256.0


def test_splice_rows_replaces_inserts_in_order_and_drops_rows_no_longer_run():
  table = "| method | acc |\n|---|---|\n| a | 1 |\n| c | 3 |\n| gone | 9 |"
  rows = "| method | acc |\n|---|---|\n| b | 2 |\n| c | 4 |"
  assert (
    regen.splice_rows(table, rows, ["a", "b", "c"]) == "| method | acc |\n|---|---|\n| a | 1 |\n| b | 2 |\n| c | 4 |"
  )
  with pytest.raises(ValueError, match="header '\\| loss \\| acc \\|' is not the table's '\\| method \\| acc \\|'"):
    regen.splice_rows(table, rows.replace("method", "loss"), ["a"])


def test_rows_of_names_what_a_table_can_re_measure():
  sym60 = readme_tables.by_name(["baselines_sym60"])[0]
  assert sym60.rows_of(["elr", "jocor"]) == (("elr", "ELR"), ("jocor", "JoCoR (2 networks)"))  # the table's order
  with pytest.raises(ValueError, match="no row for run\\(s\\) \\['nope'\\]; its runs: ce, gce, "):
    sym60.rows_of(["nope", "elr"])
  with pytest.raises(ValueError, match="'q_sweep' is not a comparison of runs"):
    readme_tables.by_name(["q_sweep"])[0].rows_of(["ce"])


def test_rows_round_trip(tmp_path, capsys):
  """--rows: the command runs with --runs, its rows replace theirs, the table's environment line stays and a rows
  line follows it; the same rows again replace that line; the whole table's regeneration drops it. (From README
  without its rows lines: the rows measured apart in the real one would stay in a line of their own.)"""
  readme = "\n".join(line for line in read("README.md").split("\n") if not line.startswith(regen.ROWS_PREFIX))
  (tmp_path / "README.md").write_text(readme)
  config = baselines.get_config("sym60")
  root = tmp_path / "regen"
  workdir = comparison_workdir(str(root / "baselines_sym60-rows"), config)
  metrics = {**METRICS, "best_test_accuracy": 0.1234}
  write_json(os.path.join(workdir, "summary.json"), {"mean_std": {"jocor": stats(metrics), "elr": stats(metrics)}})
  record = run_record(
    readme_tables.by_name(["baselines_sym60"])[0].command + " --runs=jocor,elr", "2026-11-28T06:00:00"
  )
  write_json(os.path.join(workdir, regen.RUN_RECORD), record)
  args = ["--only", "baselines_sym60", "--rows", "jocor,elr", "--reuse", "--root", str(root)]
  args += ["--readme-root", str(tmp_path), "--write"]
  assert regen.main(args) == 0
  before, after = readme.split("\n"), (tmp_path / "README.md").read_text().split("\n")
  old, new = regen.find_block(before, "baselines_sym60"), regen.find_block(after, "baselines_sym60")
  assert after[: old.start] == before[: old.start] and after[new.after() :] == before[old.after() :]
  assert after[new.env] == before[old.env]  # the whole table's environment line
  rows_line = regen.env_line(record, ["jocor", "elr"])
  assert after[new.env + 1 : new.after()] == [rows_line] and rows_line.startswith("<sub>Rows jocor,elr: measured ")
  old_rows = regen.parse_table("\n".join(before[old.start : old.end]))
  new_rows = regen.parse_table("\n".join(after[new.start : new.end]))
  measured = {row[0] for row in old_rows} | {"ELR", "JoCoR (2 networks)"}
  order = [label for _, label in readme_tables.baseline_rows("sym60")()]
  assert [row[0] for row in new_rows] == ["method"] + [label for label in order if label in measured]
  for row in new_rows[1:]:
    if row[0] in ("ELR", "JoCoR (2 networks)"):
      assert row[1] == "12.34 ± 1.00"
    else:
      assert row == next(old for old in old_rows if old[0] == row[0])

  capsys.readouterr()
  assert regen.main(args[:3] + ["jocor"] + args[4:]) == 1  # the reused run measured jocor and elr, not jocor alone
  assert "ran 'python -m experiments.train" in capsys.readouterr().err
  write_json(os.path.join(workdir, regen.RUN_RECORD), {**record, "command": record["command"][: -len(",elr")]})
  assert regen.main(args[:3] + ["jocor"] + args[4:]) == 0  # again, jocor only: the earlier line keeps elr
  again = (tmp_path / "README.md").read_text().split("\n")
  block = regen.find_block(again, "baselines_sym60")
  assert again[block.env + 1 : block.after()] == [
    rows_line.replace("Rows jocor,elr:", "Rows elr:"),
    regen.env_line(record, ["jocor"]),
  ]
  write_json(
    os.path.join(workdir, regen.RUN_RECORD), {**record, "command": record["command"].replace("jocor,elr", "elr,jocor")}
  )
  assert regen.main(args[:3] + ["elr,jocor"] + args[4:]) == 0  # both again: one line
  again = (tmp_path / "README.md").read_text().split("\n")
  block = regen.find_block(again, "baselines_sym60")
  assert again[block.env + 1 : block.after()] == [regen.env_line(record, ["elr", "jocor"])]
  whole = regen.replace_table("\n".join(again), "baselines_sym60", "| a |\n|---|\n| 1 |", "<sub>Environment: x</sub>")
  block = regen.find_block(whole.split("\n"), "baselines_sym60")
  assert block.rows_lines == 0 and whole.split("\n")[block.after() :] == before[old.after() :]
  capsys.readouterr()
  assert regen.main(["--rows", "jocor", "--reuse", "--root", str(root)]) == 2
  assert "--rows needs --only" in capsys.readouterr().err
