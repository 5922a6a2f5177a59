"""A sweep's grid: the `config.sweep` block and its checks, the members (grid points x seeds) and their labels, and
the tables and figure of the results over the grid (noisy_jax.experiment.sweep trains the members)."""

from __future__ import annotations

import dataclasses
import itertools

import jax.numpy as jnp
import ml_collections
import numpy as np

from noisy_jax.core import _checks
from noisy_jax.data import inputs
from noisy_jax.experiment import comparison
from noisy_jax.experiment import reporting
from noisy_jax.methods import registry
from noisy_jax.train import members as members_lib

MEMBER_MAPS = members_lib.MEMBER_MAPS
SWEEP_FIELDS = ("grid", "seeds", "member_map", "max_members_per_program", "sequential", "table_keys", "plot_keys")
NOISE_RATE = "noise.rate"


def default_sweep() -> ml_collections.ConfigDict:
  """`config.sweep` with every field at its default; a config sets grid and seeds."""
  return ml_collections.ConfigDict(
    {
      "grid": (),
      "seeds": (0,),
      "member_map": "auto",
      "max_members_per_program": 0,
      "sequential": False,
      "table_keys": ("last_test_accuracy", "best_test_accuracy"),
      "plot_keys": ("last_test_accuracy",),
    }
  )


# ---------------------------------------------------------------------------------------------------------------
# Members


@dataclasses.dataclass(frozen=True)
class Member:
  """One run of a sweep: a grid point (one value per swept field), a seed and the run's full config."""

  point: tuple[float, ...]
  seed: int
  config: ml_collections.ConfigDict


def _has_path(config, path: str) -> bool:
  node = config
  for part in path.split("."):
    if not hasattr(node, "keys") or part not in node:
      return False
    node = node[part]
  return True


def set_path(config, path: str, value) -> None:
  *parents, last = path.split(".")
  node = config
  for part in parents:
    node = node[part]
  node[last] = value


def traced_fields(config) -> tuple[str, ...]:
  """The dotted paths of `config` that a sweep may vary (see the module docstring)."""
  allowed = [NOISE_RATE] if config.noise.type not in ("none", inputs.DATASET_NOISE) else []
  sweep_fields = registry.get(config.method.name).sweep_fields
  allowed += [f"method.{path}" for path in (sweep_fields(config.method) if sweep_fields is not None else ())]
  return tuple(allowed)


def point_label(fields, point) -> str:
  """e.g. 'q=0.3, noise=40%' for fields ('method.loss_kwargs.q', 'noise.rate') and point (0.3, 0.4)."""
  return ", ".join(_field_value(field, value, with_name=True) for field, value in zip(fields, point))


def _field_value(field: str, value, *, with_name: bool = False) -> str:
  if field == NOISE_RATE:
    return f"noise={value:.0%}" if with_name else f"{value:.0%}"
  return f"{field.rsplit('.', 1)[-1]}={value:g}" if with_name else f"{value:g}"


def _check_sweep_block(config) -> None:
  """ValueError unless `config` is a sweep config (a `sweep`, no `runs`) whose sweep block has known fields only."""
  if "sweep" not in config:
    raise ValueError("config has no `sweep` field: not a sweep config (see noisy_jax.experiment.sweep).")
  if "runs" in config:
    raise ValueError("a sweep config is a single-run config plus `sweep`; it cannot also have `runs`.")
  unknown = sorted(set(config.sweep.keys()) - set(SWEEP_FIELDS))
  if unknown:
    raise ValueError(f"Unknown field(s) {unknown} in config.sweep; allowed: {', '.join(SWEEP_FIELDS)}.")
  if config.get("validation_labels", "clean") != "clean":
    raise ValueError(
      f"validation_labels={config.validation_labels!r}: a sweep scores every member on the dataset's clean "
      "validation labels (each member would need its own noisy ones); run the members as single runs instead."
    )


def _grid_axes(grid: tuple) -> tuple[tuple[str, ...], tuple[tuple, ...]]:
  """(fields, values) of config.sweep.grid, checked: (field path, (values, ...)) pairs, no field twice."""
  if any(
    not isinstance(axis, (tuple, list))
    or len(axis) != 2
    or not isinstance(axis[0], str)
    or not isinstance(axis[1], (tuple, list))
    for axis in grid
  ):
    raise ValueError(f"config.sweep.grid={grid!r} must be a tuple of (field path, (values, ...)) pairs.")
  fields, values = tuple(axis[0] for axis in grid), tuple(tuple(axis[1]) for axis in grid)
  if len(set(fields)) != len(fields):
    raise ValueError(f"config.sweep.grid names a field twice: {fields!r}.")
  return fields, values


def _check_grid_field(config, field: str, field_values: tuple, allowed: tuple[str, ...]) -> None:
  """ValueError unless `field` is a field of `config` that a sweep can trace (one of `allowed`) and its values are a
  non-empty tuple of numbers."""
  if not _has_path(config, field):
    raise ValueError(
      f"Unknown field {field!r} in config.sweep.grid: the config has no such field. Fields "
      f"this config can sweep: {', '.join(allowed) or 'none'} (plus seeds: config.sweep.seeds)."
    )
  if field not in allowed:
    raise ValueError(
      f"config.sweep.grid: {field!r} cannot vary within one sweep program (it changes the "
      f"program's structure or is not a traced number); fields this config can sweep: "
      f"{', '.join(allowed) or 'none'}. Use a comparison config (`runs`) for the others."
    )
  if not field_values:
    raise ValueError(f"config.sweep.grid: the values of {field!r} are empty; give at least one value.")
  bad = [v for v in field_values if not isinstance(v, (int, float)) or isinstance(v, bool)]
  if bad:
    raise ValueError(f"config.sweep.grid: the values of {field!r} hold {bad[0]!r}; swept values must be numbers.")


def _check_seeds_and_chunks(sweep) -> None:
  """ValueError unless the seeds are distinct ints (at least one), member_map is known and max_members_per_program
  >= 0."""
  seeds = tuple(sweep.seeds)
  if not seeds or any(not isinstance(s, int) or isinstance(s, bool) for s in seeds):
    raise ValueError(f"config.sweep.seeds={seeds!r} must be a non-empty tuple of ints.")
  if len(set(seeds)) != len(seeds):
    raise ValueError(f"config.sweep.seeds={seeds!r} repeats a seed.")
  _checks.check_choice("member_map", sweep.member_map, MEMBER_MAPS)
  if int(sweep.max_members_per_program) < 0:
    raise ValueError(f"max_members_per_program={sweep.max_members_per_program!r} must be >= 0 (0: all members).")


def _check_method_sweepable(method_config) -> None:
  """ValueError unless the method maps over members (no per-example state, one network) and has one stage."""
  spec = registry.get(method_config.name)
  if spec.sweep_fields is None:
    raise ValueError(
      f"method {method_config.name!r} keeps per-example state or trains two networks, which sweeps "
      "do not map over members: use a comparison config (`runs` + `shared`, one run per seed)."
    )
  stages = spec.stages(method_config)
  if len(stages) > 1:
    raise ValueError(
      f"method {spec.name!r} trains {len(stages)} stages ({', '.join(s.name for s in stages)}), which sweeps do not "
      "run: a sweep trains the method's own stage only (Joint Optimization: set method.stage2=False)."
    )


def check_sweep(config) -> tuple[ml_collections.ConfigDict, tuple[str, ...], tuple[tuple[float, ...], ...]]:
  """(`config.sweep` over its defaults, swept fields, their values), checked: known sweep fields, traceable swept
  fields, non-empty numeric values, distinct int seeds."""
  _check_sweep_block(config)
  sweep = default_sweep()
  sweep.update(config.sweep.to_dict())
  fields, values = _grid_axes(tuple(sweep.grid))
  allowed = traced_fields(config)
  for field, field_values in zip(fields, values):
    _check_grid_field(config, field, field_values, allowed)
  _check_seeds_and_chunks(sweep)
  _check_method_sweepable(config.method)
  return sweep, fields, values


def make_members(config) -> list[Member]:
  """The sweep's members, grid points in order (the first field varies slowest), seeds innermost."""
  sweep, fields, values = check_sweep(config)
  base = ml_collections.ConfigDict(config.to_dict())
  del base.sweep
  members = []
  for point in itertools.product(*values):
    for seed in sweep.seeds:
      member_config = ml_collections.ConfigDict(base.to_dict())
      for field, value in zip(fields, point):
        set_path(member_config, field, float(value))
      member_config.seed = int(seed)
      _check_method_values(member_config.method)
      members.append(Member(point=tuple(float(v) for v in point), seed=int(seed), config=member_config))
  return members


def _check_method_values(method_config) -> None:
  """Builds the method and evaluates its objective once on concrete values: the range checks of the method and of
  its loss (q in (0, 1], ...) run here, not under the sweep's tracing, where they are skipped."""
  method = registry.make(method_config, num_classes=3)
  labels = jnp.eye(3, dtype=jnp.float32)
  method.objective(jnp.zeros((3, 3)), labels, jnp.ones((3,)), jnp.ones((3,), bool), None)


# ---------------------------------------------------------------------------------------------------------------
# The member-mapped programs


_FORMATS = {"test_margin_correct": "{:.2f}", "seconds": "{:.1f}"}


def grid_results(members, summaries, fields, values) -> dict:
  """{point label: {metric: {'mean', 'std'}}}: each grid point's metrics aggregated over its seeds (summaries: the
  members' run summaries, in the order of `members`)."""
  results = {}
  for point in itertools.product(*values):
    point = tuple(float(v) for v in point)
    per_seed = [comparison.flat_metrics(s) for m, s in zip(members, summaries) if m.point == point]  # pylint: disable=protected-access
    results[point_label(fields, point)] = comparison.aggregate(per_seed)
  return results


def print_tables(out: dict, sweep, fields, values, num_members: int) -> None:
  """Prints the sweep's title line, a grid table per sweep.table_keys (one or two fields) and the table of all
  points (out: noisy_jax.experiment.sweep.run_sweep's result)."""
  results, seeds = out["mean_std"], out["seeds"]
  print(f"\n{out['title']}  ({num_members} runs: seeds {seeds}; {out['mode']}; {out['seconds']:.0f} s in all)")
  for key in sweep.table_keys:
    if len(fields) in (1, 2):
      print(f"\n{key.replace('_', ' ')}, mean ± std over seeds:\n{format_grid(results, fields, values, key)}")
  print("\n" + comparison.format_table(results, len(seeds)))


def _cell(agg: dict, key: str) -> str:
  if key not in agg:
    return "-"
  fmt = _FORMATS.get(key, "{:.2%}")
  return f"{fmt.format(agg[key]['mean'])} ±{fmt.format(agg[key]['std']).rstrip('%')}"


def format_grid(results: dict[str, dict], fields, values, key: str) -> str:
  """Text table of one metric: rows = values of the first field, columns = values of the second (if any)."""
  if len(fields) not in (1, 2):
    raise ValueError(f"format_grid needs 1 or 2 swept fields, got {len(fields)}: {fields!r}.")
  columns = values[1] if len(fields) == 2 else (None,)
  first_name = fields[0].rsplit(".", 1)[-1]
  header = [f"{first_name} \\ {fields[1]}" if len(fields) == 2 else first_name]
  header += [key if c is None else _field_value(fields[1], c) for c in columns]
  rows = [header]
  for v in values[0]:
    cells = [_field_value(fields[0], v)]
    for c in columns:
      point = (float(v),) if c is None else (float(v), float(c))
      cells.append(_cell(results[point_label(fields, point)], key))
    rows.append(cells)
  return comparison.text_table(rows)  # pylint: disable=protected-access


def save_sweep_plot(results: dict[str, dict], fields, values, keys, path: str, *, title: str = "") -> str:
  """One panel per metric in `keys`: mean against the first field's values, a line (with a ±std band) per value
  of the second field; saved as a PNG at `path`."""
  plt = reporting._pyplot()  # pylint: disable=protected-access
  fig, axes = plt.subplots(1, len(keys), figsize=(4.6 * len(keys), 3.6), squeeze=False)
  xs = np.asarray(values[0], float)
  lines = values[1] if len(fields) == 2 else (None,)
  for ax, key in zip(axes[0], keys):
    for line in lines:
      points = [(float(x),) if line is None else (float(x), float(line)) for x in xs]
      aggs = [results[point_label(fields, p)].get(key) for p in points]
      if any(a is None for a in aggs):
        continue
      mean = np.array([a["mean"] for a in aggs])
      std = np.array([a["std"] for a in aggs])
      ax.plot(xs, mean, marker="o", label=None if line is None else _field_value(fields[1], line, with_name=True))
      ax.fill_between(xs, mean - std, mean + std, alpha=0.2)
    ax.set_xlabel(fields[0].rsplit(".", 1)[-1])
    ax.set_title(key.replace("_", " "))
    ax.grid(alpha=0.3)
    if len(lines) > 1:
      ax.legend(fontsize=8)
  if title:
    fig.suptitle(title, fontsize=10)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path
