"""Checkpoints of a training stage with orbax: all or nothing, restored bit for bit.

Layout: `WORKDIR/checkpoints/STAGE/EPOCH/` (STAGE is 'stage1', and 'stage2' for Joint Optimization), one
`orbax.checkpoint.CheckpointManager` per stage directory. Each checkpoint has two items:

  arrays  (StandardSave)  state:  the TrainState's step, params, opt_state, batch_stats, method_state
                                  (ELR+'s averages, ProMix's priors)
                          table:  the whole LabelTable (noisy_labels, soft_labels, weights, history, history_filled,
                                  method_rows)
                                  as the run holds it: N rows when replicated; N_pad rows (padding included, split
                                  over the devices, meta `table_rows`) when row-sharded
                                  (noisy_jax.parallel.table_sharding)
                          best_variables: the best-validation params and batch_stats (truncated Lq prunes with them;
                                          the current variables while no validation score exists yet)
  meta    (JsonSave)      epoch, best_val, has_best, the per-epoch history records, the seed and the root key data
                          of the stage, the stage name and the config (JSON)

All or nothing: orbax writes a checkpoint into `EPOCH.orbax-checkpoint-tmp` and renames it to `EPOCH` only once
every item is written (on file systems without atomic rename, e.g. GCS, it writes a commit marker instead). A process
killed mid-save leaves only the temporary directory: `latest_epoch` and `restore` never see it, and the manager
deletes it when the directory is opened again (`cleanup_tmp_directories`). Nothing here relies on more than that.

Replicated arrays are handed to orbax as host NumPy copies: the trainer donates the state's device buffers to the
next epoch, and on CPU a NumPy view of a jax array can alias its buffer; the copies also let orbax write in the
background while the next epoch trains (see `open_manager`). Arrays split over devices (a row-sharded label table)
are handed over as device copies in the same sharding: each process writes only its own rows, and nothing gathers
the table on one host or device. Restoring into the same layout (same padded row count) reads each device's rows
back where they belong (train.fit); a checkpoint of another layout (replicated, or another device count) is read
on the host, its real rows kept, and placed again.

Resuming checks that the run is the same: the seed and the root key data must match (`check_compatible`), and the
saved config may differ from the current one only in fields that do not change what is trained (`RESUME_FREE_FIELDS`:
logging, plotting, checkpoint cadence and execution settings). Anything else raises a ValueError naming the fields.
"""

from __future__ import annotations

import json
import logging as std_logging
import os
from typing import Any

import flax
import flax.traverse_util
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

CHECKPOINT_DIRNAME = "checkpoints"
FORMAT_VERSION = 1

# Config fields (matched by their last dotted component) that a resumed run may change. They only affect what is
# logged or plotted, how often checkpoints are written, or how the same computation is executed:
#   plots, plot_key, title, epoch_table, curve_table, seeds (the list a comparison iterates; each run has `seed`):
#     reporting only;
#   eval_train: also scores the training split each epoch (more record fields, same training);
#   checkpoint_every, keep_checkpoints, checkpoint_every_steps: checkpoint cadence;
#   input, input_workers, input_budget_mib: resident or streamed input (noisy_jax.data.inputs), the same batches;
#   num_devices, epoch_mode, label_table_sharding, label_table_budget_mib, member_map: the same program on another
#     device count, dispatch mode, label-table placement or mapping of a two-network step over its pair (a checkpoint of
#     another table layout is read on the host, its N real rows kept and placed again);
#     the results then equal an uninterrupted run up to float rounding, not bit for bit.
RESUME_FREE_FIELDS = (
  "plots",
  "plot_key",
  "title",
  "epoch_table",
  "curve_table",
  "seeds",
  "eval_train",
  "checkpoint_every",
  "keep_checkpoints",
  "num_devices",
  "epoch_mode",
  "label_table_sharding",
  "label_table_budget_mib",
  "checkpoint_every_steps",
  "input",
  "input_workers",
  "input_budget_mib",
  "member_map",
)


def stage_dir(workdir: str, stage: str) -> str:
  """`workdir/checkpoints/stage`, the directory of one stage's checkpoints."""
  if not stage:
    raise ValueError(f"stage={stage!r} must be a non-empty name such as 'stage1'.")
  return os.path.join(os.path.abspath(workdir), CHECKPOINT_DIRNAME, stage)


def steps_dir(stage_directory: str) -> str:
  """The directory of a stage's checkpoints written inside an epoch (config checkpoint_every_steps): next to the
  epoch checkpoints, `STAGE.steps/GLOBAL_STEP/`, with the input position (epoch, step, metric sums) in meta."""
  return stage_directory.rstrip(os.sep) + ".steps"


def is_due(epoch: int, *, every: int, num_epochs: int) -> bool:
  """Whether epoch (1-based) is checkpointed: every `every` epochs and always the last epoch of the stage."""
  if every < 1:
    raise ValueError(f"checkpoint_every={every!r} must be >= 1 when checkpointing.")
  return epoch % every == 0 or epoch == num_epochs


def open_manager(directory: str, *, keep: int, async_save: bool = True) -> ocp.CheckpointManager:
  """A CheckpointManager for one stage directory (created if missing) keeping the last `keep` checkpoints.

  Leftover temporary directories of an interrupted save are deleted on opening. With `async_save` (default), `save`
  returns once the arrays are copied to the host and orbax writes them in a background thread while the next epoch
  trains; the next save, `wait_until_finished` or `close` waits for it. A process killed before that leaves the
  previous checkpoint as the newest (all or nothing). `async_save=False`: the checkpoint is on disk when `save`
  returns.
  """
  if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
    raise ValueError(f"keep_checkpoints={keep!r} must be an int >= 1.")
  options = ocp.CheckpointManagerOptions(
    max_to_keep=keep, create=True, cleanup_tmp_directories=True, enable_async_checkpointing=bool(async_save)
  )
  return ocp.CheckpointManager(os.path.abspath(directory), options=options)


def latest_epoch(manager: ocp.CheckpointManager) -> int | None:
  """The epoch of the newest complete checkpoint, None when there is none."""
  manager.reload()
  return manager.latest_step()


def _flat_tree(state, table, best_variables) -> dict:
  """{path tuple: leaf} of the train state (step, params, opt_state, batch_stats; method_state, empty but for ELR+'s
  averages and ProMix's priors), table and best variables."""
  state_dict = flax.serialization.to_state_dict(state)
  tree = {
    "state": {k: state_dict[k] for k in ("step", "params", "opt_state", "batch_stats", "method_state")},
    "table": flax.serialization.to_state_dict(table),
    "best_variables": flax.serialization.to_state_dict(best_variables),
  }
  return flax.traverse_util.flatten_dict(tree, keep_empty_nodes=True)


def _stored(leaf) -> bool:
  """Whether a leaf is written: arrays and numbers with at least one element (orbax refuses zero-size arrays;
  those and empty nodes such as optax's EmptyState are rebuilt from the structure on restore)."""
  return leaf is not flax.traverse_util.empty_node and np.size(leaf) > 0


def _split_over_devices(leaf) -> bool:
  return isinstance(leaf, jax.Array) and not leaf.is_fully_replicated


def _copy(leaf):
  """A copy that no donation reaches: on the host (NumPy) for a replicated leaf, on the devices in the same
  sharding for one split over devices (a row-sharded label table)."""
  if _split_over_devices(leaf):
    return jax.jit(lambda x: x + jnp.zeros((), x.dtype), out_shardings=leaf.sharding)(leaf)
  return np.array(jax.device_get(leaf), copy=True)


def arrays_of(state, table, best_variables) -> dict:
  """The array item of a checkpoint: copies of the train state, the label table and the best variables (host NumPy,
  or device arrays for leaves split over devices; see the module docstring).

  Copies, never views: the trainer donates the state's device buffers to the next epoch.
  """
  flat = _flat_tree(state, table, best_variables)
  stored = {path: _copy(leaf) for path, leaf in flat.items() if _stored(leaf)}
  return flax.traverse_util.unflatten_dict(stored)


def _restore_target(leaf):
  """What orbax restores a leaf as: the same sharding for a leaf split over devices, host NumPy otherwise."""
  if _split_over_devices(leaf):
    return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=leaf.sharding)
  return np.asarray(jax.device_get(leaf))


def key_data(key: jax.Array) -> list[int]:
  """The raw uint32 words of a PRNG key (legacy uint32 keys or new-style typed keys) as a JSON-able list."""
  if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
    key = jax.random.key_data(key)
  return [int(v) for v in np.asarray(key).reshape(-1)]


def save(manager: ocp.CheckpointManager, epoch: int, *, state, table, best_variables, meta: dict) -> None:
  """Writes the checkpoint of `epoch` (all or nothing; see the module docstring) and prunes old ones.

  With an asynchronous manager the write finishes in the background (see `open_manager`).
  """
  arrays = arrays_of(state, table, best_variables)
  # A frozen copy: orbax writes the JSON item in the background, and the caller goes on appending to the lists it
  # passed (fit's per-epoch history): without the copy a busy machine saved epoch 3's record into epoch 2's
  # checkpoint, and a resume from it skipped epoch 3 (seen in tests/test_multihost.py under load).
  meta = json.loads(json.dumps({**meta, "epoch": int(epoch), "format_version": FORMAT_VERSION}))
  manager.save(
    int(epoch), args=ocp.args.Composite(arrays=ocp.args.StandardSave(arrays), meta=ocp.args.JsonSave(meta)), force=True
  )


def restore_meta(manager: ocp.CheckpointManager, epoch: int) -> dict:
  """The JSON item of the checkpoint of `epoch` (cheap: no arrays are read)."""
  return manager.restore(int(epoch), args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]


def restore_arrays(manager: ocp.CheckpointManager, epoch: int, *, state, table, best_variables):
  """Restores (state, table, best_variables) of `epoch` into the structures of the given ones.

  The given pytrees only provide structure, shapes, dtypes and, for leaves split over devices, the sharding (e.g. a
  freshly initialised state and a freshly placed table). Leaves split over devices come back as fresh device arrays
  in that sharding (each process reads its own rows); all others as NumPy, so putting them on devices never
  aliases orbax's buffers.
  """
  flat = _flat_tree(state, table, best_variables)
  target = flax.traverse_util.unflatten_dict(
    {path: _restore_target(leaf) for path, leaf in flat.items() if _stored(leaf)}
  )
  restored = manager.restore(int(epoch), args=ocp.args.Composite(arrays=ocp.args.StandardRestore(target)))["arrays"]
  flat.update(
    {
      path: leaf if isinstance(leaf, jax.Array) else np.asarray(leaf)
      for path, leaf in flax.traverse_util.flatten_dict(restored).items()
    }
  )
  step = flat[("state", "step")]
  # A Python int, as in a fresh TrainState (weakly typed); a pair of networks (stacked states) keeps its [2] steps.
  flat[("state", "step")] = int(step) if np.ndim(step) == 0 else np.asarray(step)
  tree = flax.traverse_util.unflatten_dict(flat)
  state_dict = {**flax.serialization.to_state_dict(state), **tree["state"]}
  return (
    flax.serialization.from_state_dict(state, state_dict),
    flax.serialization.from_state_dict(table, tree["table"]),
    flax.serialization.from_state_dict(best_variables, tree["best_variables"]),
  )


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
  if isinstance(tree, dict):
    out = {}
    for k, v in tree.items():
      out.update(_flatten(v, f"{prefix}{k}."))
    return out
  return {prefix[:-1]: tree}


def config_differences(saved: dict, current: dict) -> list[str]:
  """Dotted names of the fields whose values differ between two JSON configs, ignoring RESUME_FREE_FIELDS."""
  a, b = _flatten(saved), _flatten(current)
  return sorted(
    name
    for name in set(a) | set(b)
    if name.rsplit(".", 1)[-1] not in RESUME_FREE_FIELDS and a.get(name, "<absent>") != b.get(name, "<absent>")
  )


def check_compatible(meta: dict, *, directory: str, seed: int | None, config_json: dict, key: jax.Array) -> None:
  """Raises ValueError unless the checkpoint `meta` was written by this same run: its `seed`, its root `key` and its
  config (`config_json`, the stage's config as JSON types, noisy_jax.experiment.settings.config_json; the fields of
  RESUME_FREE_FIELDS may differ)."""
  if meta.get("format_version") != FORMAT_VERSION:
    raise ValueError(
      f"The checkpoint in {directory} has format_version={meta.get('format_version')!r}; "
      f"this version reads only {FORMAT_VERSION}."
    )
  if meta.get("seed") != seed:
    raise ValueError(
      f"Cannot resume from {directory}: it was written with seed={meta.get('seed')!r}, this run has "
      f"seed={seed!r}. Use another workdir or the same seed."
    )
  if meta.get("key_data") != key_data(key):
    raise ValueError(
      f"Cannot resume from {directory}: its root key {meta.get('key_data')} differs from this run's "
      f"{key_data(key)} (same seed, different key derivation)."
    )
  differing = config_differences(meta.get("config", {}), dict(config_json))
  if differing:
    saved, current = _flatten(meta.get("config", {})), _flatten(dict(config_json))
    shown = "; ".join(
      f"{name}: saved {saved.get(name, '<absent>')!r}, now {current.get(name, '<absent>')!r}" for name in differing[:8]
    )
    raise ValueError(
      f"Cannot resume from {directory}: the config differs in field(s) that change training "
      f"({shown}). Only {', '.join(RESUME_FREE_FIELDS)} may change on resume; use another workdir "
      f"for a different run."
    )


class _DropOrbaxInfo(std_logging.Filter):
  """Drops orbax's own records below WARNING (a dozen INFO lines per save: atomicity, metadata store, deleter)."""

  def filter(self, record: std_logging.LogRecord) -> bool:
    return record.levelno >= std_logging.WARNING or f"{os.sep}orbax{os.sep}" not in record.pathname


def quiet_orbax_info_logs() -> None:
  """Keeps absl's INFO log readable when checkpointing: orbax's INFO records (about 8 lines per progress line of
  the default experiment) are dropped; its warnings and errors still show. Idempotent."""
  logger = std_logging.getLogger("absl")
  if not any(isinstance(f, _DropOrbaxInfo) for f in logger.filters):
    logger.addFilter(_DropOrbaxInfo())
