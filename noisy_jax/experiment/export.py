"""A trained network as a standalone artefact: its variables, what it is and how its inputs are prepared.

  export.save(directory, variables=..., model_config=config.model, num_classes=10, input_shape=(28, 28, 1),
              normalization=inputs.normalizer(config, dataset), class_names=dataset.class_names)
  loaded = export.load_model("WORKDIR")              # WORKDIR/model/final (which="best_val": WORKDIR/model/best_val)
  probs = loaded.predict(x)                          # x [N, *input_shape] as stored (uint8 codes) -> float32 [N, C]

A run with a workdir writes two (noisy_jax.experiment.runs.run_single, process 0): WORKDIR/model/final (the variables
after the last epoch) and WORKDIR/model/best_val (those of the first epoch with the best validation accuracy; the final
ones when the run has no validation split). They hold the network the run delivers: stage 1's for one-stage
methods, stage 2's for Joint Optimization (its stage-1 network is a tool for relabelling; it stays in
WORKDIR/checkpoints/stage1 when checkpointing is on). A comparison's workdir holds one run per folder:
WORKDIR/RUN/seedS/model/... On the command line, `python -m experiments.predict` labels a folder of images or an
.npz with one.

Layout of one artefact (DIR = WORKDIR/model/final, or any directory given to `save`):

  DIR/model.json      format_version (FORMAT_VERSION); model: {name (resolved: never 'auto'), kwargs, config (the
                      run's model config as given)}; num_classes; input_shape (one example, e.g. [28, 28, 1]);
                      input_dtype ('uint8' for images); normalization: {mode, pixel_max, mean, std, mean_shape,
                      std_shape}; data: {pixel_max, image_size, channels, dataset, normalized}; class_names (or
                      null); variables: {collections: ['params'(, 'batch_stats')], num_networks: 1, or 2 for the
                      pair of a two-network method (every leaf stacked on a leading axis of 2; predict is the
                      softmax of the mean of the two networks' logits, as the run evaluated)}; meta (free JSON:
                      method, stage, seed, which, the run's config)
  DIR/variables/      orbax (StandardSave of host NumPy arrays, as noisy_jax.train.checkpoint writes its items): the
                      collections listed in model.json (params, and batch_stats for models with BatchNorm); empty
                      collections are not written and come back empty

Normalisation, exactly: a run feeds its network `Normalization(codes)` = (codes / pixel_max - mean) / std in float32
(noisy_jax.data.normalization.fit of the training split, built by noisy_jax.data.inputs.normalizer). model.json keeps
its four fields: the mode, pixel_max, and mean / std as float32 values written as JSON numbers. A float32 widened to a
Python float is exact and JSON writes the shortest decimal that reads back as the same float64, so the values read
back and narrowed to float32 are the same bits; the rebuilt Normalization is the same object field for field, and
`make_predict_fn` compiles the same computation as the run's evaluation (tests/test_export.py checks both).

All or nothing: `save` writes into a hidden sibling `.NAME.tmp-XXXX` and renames it to NAME at the end. An
existing NAME is swapped with the new one in one step where the OS can (Linux renameat2 RENAME_EXCHANGE), else
moved aside to `.NAME.old-XXXX` first (a crash between the two renames leaves the old export there, not at NAME).
A killed save leaves only hidden siblings: load_model never reads them and the next save of NAME deletes them.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import shutil
from typing import Any, Callable, Sequence
import uuid

import flax
import flax.traverse_util
import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax import models
from noisy_jax.core import _checks
from noisy_jax.core import errors
from noisy_jax.core import precision
from noisy_jax.data import image_files
from noisy_jax.data import normalization as normalization_lib
from noisy_jax.parallel import xla_options
from noisy_jax.train import predict as predict_lib

FORMAT_VERSION = 1
MODEL_DIRNAME = "model"  # WORKDIR/model/{final,best_val}
MODEL_FILE = "model.json"
VARIABLES_DIRNAME = "variables"
WHICH = ("final", "best_val")
COLLECTIONS = ("params", "batch_stats")
PRODUCED_BY = (
  "python -m experiments.train --config=... --workdir=WORKDIR (any run with a workdir exports its "
  "network to WORKDIR/model/final and WORKDIR/model/best_val)"
)


def model_dir(workdir: str, which: str = "final") -> str:
  """WORKDIR/model/WHICH, where a run with a workdir exports its network (`which` in WHICH)."""
  _checks.check_choice("which", which, WHICH)
  return os.path.join(os.path.abspath(workdir), MODEL_DIRNAME, which)


# ---------------------------------------------------------------------------------------------------------------
# Normalisation <-> JSON


def normalization_to_json(norm: normalization_lib.Normalization) -> dict:
  """The fields of `norm` as JSON types; float32 values written as exact Python floats (module docstring)."""
  mean, std = np.asarray(norm.mean, np.float32), np.asarray(norm.std, np.float32)
  return {
    "mode": norm.mode,
    "pixel_max": float(norm.pixel_max),
    "mean": mean.tolist(),
    "std": std.tolist(),
    "mean_shape": list(mean.shape),
    "std_shape": list(std.shape),
  }


def normalization_from_json(fields: dict) -> normalization_lib.Normalization:
  """The Normalization that `normalization_to_json` wrote (the same bits)."""
  _checks.check_choice("normalization mode", fields["mode"], normalization_lib.MODES)
  mean = np.asarray(fields["mean"], np.float64).astype(np.float32).reshape(fields["mean_shape"])
  std = np.asarray(fields["std"], np.float64).astype(np.float32).reshape(fields["std_shape"])
  return normalization_lib.Normalization(fields["mode"], float(fields["pixel_max"]), mean, std)


# ---------------------------------------------------------------------------------------------------------------
# Saving


def _host_collections(variables) -> dict:
  """{collection: host NumPy copies} of the non-empty collections of `variables` (params, batch_stats)."""
  variables = flax.core.unfreeze(variables) if isinstance(variables, flax.core.FrozenDict) else dict(variables)
  unknown = set(variables) - set(COLLECTIONS)
  if unknown or "params" not in variables:
    raise ValueError(f"variables has the collections {sorted(variables)}; expected params (and batch_stats).")
  out = {}
  for name in COLLECTIONS:
    tree = variables.get(name)
    if tree is None or not jax.tree.leaves(tree):
      continue
    out[name] = jax.tree.map(lambda x: np.array(np.asarray(x), copy=True), flax.core.unfreeze(tree))
  return out


def _shapes(tree) -> dict:
  """{'path/to/leaf': (shape, dtype name)} of a tree of arrays or ShapeDtypeStructs."""
  return {
    "/".join(map(str, k)): (tuple(v.shape), np.dtype(v.dtype).name)
    for k, v in flax.traverse_util.flatten_dict(tree).items()
  }


def _expected_collections(model, input_shape, num_networks: int = 1) -> dict:
  """{collection: ShapeDtypeStruct tree} that `model` initialises for one example of `input_shape` (with a leading
  axis of `num_networks` when that is more than 1), widened as a run widens them (precision.widen: float64 with
  JAX's x64 mode on, unchanged otherwise)."""
  shapes = jax.eval_shape(
    lambda: precision.widen(model.init(jax.random.PRNGKey(0), jnp.zeros((1, *input_shape), jnp.float32), train=False))
  )
  if num_networks > 1:
    shapes = jax.tree.map(lambda s: jax.ShapeDtypeStruct((num_networks, *s.shape), s.dtype), shapes)
  return {k: flax.core.unfreeze(v) for k, v in shapes.items() if jax.tree.leaves(v)}


def _check_variables(collections: dict, expected: dict, where: str) -> None:
  """Raises ValueError naming the first difference between the variables and what the model initialises."""
  if set(collections) != set(expected):
    raise ValueError(
      f"{where}: the variables have the collections {sorted(collections)}, the model {sorted(expected)}."
    )
  for name in expected:
    got, want = _shapes(collections[name]), _shapes(expected[name])
    if got != want:
      diff = sorted(set(got.items()) ^ set(want.items()))[:4]
      raise ValueError(f"{where}: the {name} do not fit the model (differing leaves, (path, (shape, dtype))): {diff}.")


def _json_model_config(model_config) -> dict:
  raw = model_config.to_dict() if hasattr(model_config, "to_dict") else dict(model_config)
  return json.loads(json.dumps(raw, default=repr))


def save(
  directory: str,
  *,
  variables,
  model_config,
  num_classes: int,
  input_shape: Sequence[int],
  normalization: normalization_lib.Normalization,
  class_names: Sequence[str] | None = None,
  pixel_max: float | None = None,
  image_size: int | None = None,
  input_dtype: str = "uint8",
  dataset: str | None = None,
  normalized: str | None = None,
  meta: dict | None = None,
  num_networks: int = 1,
) -> str:
  """Writes the artefact of one network (or a pair: num_networks = 2) to `directory` (layout in the module
  docstring); returns its path.

  Args:
    variables: {'params': ..., 'batch_stats': ...} (jax or NumPy arrays; copied to the host).
    model_config: the run's model config ({'name', 'kwargs'}; name 'auto' is resolved from `input_shape`).
    num_classes, input_shape: C and one example's shape (no batch axis), as the network was built.
    normalization: what the run applied to its stored inputs (inputs.normalizer(config, dataset)).
    class_names: names of classes 0..C-1, or None.
    pixel_max: the inputs' full-intensity code (255 for uint8 images; default normalization.pixel_max).
    image_size: the loader's image_size (shorter side resized, centre crop) or None (files kept their size).
    input_dtype: the stored inputs' dtype ('uint8' codes, or 'float32').
    dataset, normalized: the dataset's name and its host-side standardisation (Dataset.normalized), recorded.
    meta: free JSON (method, stage, seed, ...).

  An existing export at `directory` is replaced all or nothing (module docstring).

  Raises:
    ValueError: variables that do not fit the model built from model_config for input_shape, bad class_names.
  """
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

  input_shape = tuple(int(d) for d in input_shape)
  config = _json_model_config(model_config)
  name = models.resolve(config["name"], input_shape)
  model = models.build(name, int(num_classes), input_shape, kwargs=_model_kwargs(config.get("kwargs")))
  collections = _host_collections(variables)
  _check_variables(collections, _expected_collections(model, input_shape, int(num_networks)), f"export to {directory}")
  if class_names is not None:
    class_names = [str(n) for n in class_names]
    if len(class_names) != int(num_classes):
      raise ValueError(f"class_names has {len(class_names)} names for {num_classes} classes.")
  info = {
    "format_version": FORMAT_VERSION,
    "model": {"name": name, "kwargs": config.get("kwargs", {}), "config": config},
    "num_classes": int(num_classes),
    "input_shape": list(input_shape),
    "input_dtype": str(np.dtype(input_dtype)),
    "normalization": normalization_to_json(normalization),
    "data": {
      "pixel_max": float(normalization.pixel_max if pixel_max is None else pixel_max),
      "image_size": None if image_size is None else int(image_size),
      "channels": input_shape[-1] if len(input_shape) == 3 else None,
      "dataset": dataset,
      "normalized": normalized,
    },
    "class_names": class_names,
    "variables": {"collections": sorted(collections, key=COLLECTIONS.index), "num_networks": int(num_networks)},
    "meta": json.loads(json.dumps(meta or {}, default=repr)),
  }
  directory = os.path.abspath(directory)
  parent, base = os.path.split(directory)
  os.makedirs(parent, exist_ok=True)
  _remove_leftovers(parent, base)
  tmp = os.path.join(parent, f".{base}.tmp-{uuid.uuid4().hex[:12]}")
  os.mkdir(tmp)
  try:
    checkpointer = ocp.Checkpointer(ocp.StandardCheckpointHandler(), multiprocessing_options=_this_process_only())
    checkpointer.save(os.path.join(tmp, VARIABLES_DIRNAME), args=ocp.args.StandardSave(collections))
    checkpointer.close()
    with open(os.path.join(tmp, MODEL_FILE), "w") as f:
      json.dump(info, f, indent=1)
      f.flush()
      os.fsync(f.fileno())
    _replace(tmp, directory)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return directory


def _this_process_only():
  """Orbax multiprocessing options for a save by this process alone (run_single exports from process 0 only)."""
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

  index = jax.process_index()
  return ocp.options.MultiprocessingOptions(primary_host=index, active_processes={index})


def _model_kwargs(kwargs: dict | None) -> dict:
  """A model.json's model kwargs (None: none) as models.build takes them: JSON lists back to tuples."""
  return _tuples(kwargs or {})


def _tuples(value):
  """JSON lists back to tuples (model kwargs such as hidden_sizes are tuples in the configs)."""
  if isinstance(value, list):
    return tuple(_tuples(v) for v in value)
  if isinstance(value, dict):
    return {k: _tuples(v) for k, v in value.items()}
  return value


def _remove_leftovers(parent: str, base: str) -> None:
  """Deletes hidden siblings left by interrupted saves of `base` (.BASE.tmp-*, .BASE.old-*)."""
  for name in os.listdir(parent):
    if name.startswith((f".{base}.tmp-", f".{base}.old-")):
      shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: str, b: str) -> bool:
  """Swaps the directories `a` and `b` in one step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
  try:
    renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
  except (AttributeError, OSError):
    return False
  renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
  renameat2.restype = ctypes.c_int
  return renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0


def _replace(tmp: str, directory: str) -> None:
  """Puts the finished `tmp` at `directory`, replacing an existing export (module docstring)."""
  if not os.path.lexists(directory):
    os.rename(tmp, directory)
    return
  if not os.path.isfile(os.path.join(directory, MODEL_FILE)):
    raise FileExistsError(f"{directory} exists and is not a model export (no {MODEL_FILE}); not replacing it.")
  if _exchange(tmp, directory):  # tmp now holds the old export
    shutil.rmtree(tmp, ignore_errors=True)
    return
  parent, base = os.path.split(directory)
  old = os.path.join(parent, f".{base}.old-{uuid.uuid4().hex[:12]}")
  os.rename(directory, old)
  os.rename(tmp, directory)
  shutil.rmtree(old, ignore_errors=True)


def save_run(
  directory: str,
  *,
  variables,
  config,
  dataset,
  normalization: normalization_lib.Normalization,
  meta: dict | None = None,
  num_networks: int = 1,
) -> str:
  """`save` of a run's network: the model config, classes and input description taken from `config` and `dataset`
  (what noisy_jax.experiment.runs.run_single calls); `normalization` is the one the stage trained with."""
  from noisy_jax.experiment import inputs  # pylint: disable=g-import-not-at-top

  image_size = inputs.dataset_kwargs(config).get("image_size")
  x = dataset.x_train
  return save(
    directory,
    variables=variables,
    model_config=config.model,
    num_classes=dataset.num_classes,
    input_shape=tuple(x.shape[1:]),
    normalization=normalization,
    class_names=getattr(dataset, "class_names", None),
    pixel_max=float(getattr(dataset, "pixel_max", 1.0)),
    image_size=image_size,
    input_dtype=str(np.dtype(x.dtype)),
    dataset=getattr(dataset, "name", None),
    normalized=getattr(dataset, "normalized", None),
    meta=meta,
    num_networks=num_networks,
  )


# ---------------------------------------------------------------------------------------------------------------
# Loading


@dataclasses.dataclass(frozen=True, eq=False)
class LoadedModel:
  """An exported network, ready to predict. `variables` are host NumPy arrays ({'params'[, 'batch_stats']});
  `info` is model.json as read; `path` the artefact's directory."""

  model: Any
  variables: dict = dataclasses.field(repr=False)
  class_names: tuple[str, ...] | None
  input_shape: tuple[int, ...]
  num_classes: int
  normalization: normalization_lib.Normalization = dataclasses.field(repr=False)
  info: dict = dataclasses.field(repr=False)
  path: str
  _evaluate: Callable = dataclasses.field(repr=False)
  _device_variables: Any = dataclasses.field(repr=False)
  _embed: Callable | None = dataclasses.field(default=None, repr=False)

  def check_inputs(self, x) -> None:
    """Raises errors.InputError (a ValueError) naming both shapes unless x is [N, *input_shape]."""
    shape = tuple(int(d) for d in np.shape(x))
    if len(shape) != len(self.input_shape) + 1 or shape[1:] != self.input_shape:
      raise errors.InputError(
        f"inputs of shape {shape} (examples of shape {shape[1:]}), but this model takes examples of "
        f"shape {self.input_shape}: give x as [N, {', '.join(map(str, self.input_shape))}]."
      )

  def predict(self, x) -> np.ndarray:
    """Softmax probabilities float32 [N, C] of `x` [N, *input_shape]: inputs as the run stored them (uint8 codes for
    images; other dtypes are read as float32, as the datasets do), or an image_files.ImageFiles (decoded in
    chunks of the batch size). Normalised and run in eval mode as the run's evaluation does
    (predict_lib.make_predict_fn)."""
    self.check_inputs(x)
    if not isinstance(x, image_files.ImageFiles):
      x = np.asarray(x)
      x = x if x.dtype == np.uint8 else x.astype(np.float32)
    if len(x) == 0:
      return np.zeros((0, self.num_classes), np.float32)
    return np.asarray(self._evaluate(self._device_variables, x), np.float32)

  def embed(self, x) -> np.ndarray:
    """The network's embeddings float32 [N, D] of `x` (as `predict` takes it): the input of its classifier head
    (predict_lib.penultimate_features), normalised and in eval mode as `predict`.

    Raises:
      ValueError: for the export of a pair of networks (a two-network method), whose embeddings are not one.
    """
    self.check_inputs(x)
    if self._embed is None:
      raise ValueError(f"{self.path} holds a pair of networks (a two-network method): no single embedding.")
    if not isinstance(x, image_files.ImageFiles):
      x = np.asarray(x)
      x = x if x.dtype == np.uint8 else x.astype(np.float32)
    return np.asarray(self._embed(self._device_variables, x), np.float32)


def resolve(path: str, which: str = "final") -> str:
  """The artefact directory of `path`: `path` itself when it holds model.json, else PATH/model/WHICH.

  Raises:
    ValueError: `which` not in WHICH (listing them).
    FileNotFoundError: naming the path looked in and the command that writes a model there.
  """
  _checks.check_choice("which", which, WHICH)
  path = os.path.abspath(path)
  if os.path.isfile(os.path.join(path, MODEL_FILE)):
    return path
  if not os.path.isdir(path):
    raise errors.MissingInputError(
      f"{path} does not exist: give a run's workdir (written by {PRODUCED_BY}) or a model export directory."
    )
  directory = model_dir(path, which)
  if os.path.isfile(os.path.join(directory, MODEL_FILE)):
    return directory
  runs = sorted(os.path.relpath(os.path.dirname(os.path.dirname(p)), path) for p in _glob_models(path, which))
  hint = (
    f" This looks like a comparison's workdir; its runs' models are in: "
    f"{', '.join(os.path.join(path, r) for r in runs[:6])}{', ...' if len(runs) > 6 else ''}."
    if runs
    else ""
  )
  raise errors.MissingInputError(
    f"no exported model at {directory} ({MODEL_FILE} missing). A model is written by "
    f"{PRODUCED_BY}; runs made before model export existed have none.{hint}"
  )


def _glob_models(path: str, which: str) -> list[str]:
  import glob  # pylint: disable=g-import-not-at-top

  return glob.glob(os.path.join(glob.escape(path), "*", "seed*", MODEL_DIRNAME, which))


def load_model(path: str, which: str = "final", *, batch_size: int = 500) -> LoadedModel:
  """Loads an export: `path` is a run's workdir (WORKDIR/model/WHICH is read) or an export directory itself
  (then `which` is only checked). `batch_size`: the chunk size of `predict` (the run evaluated in chunks of 500).

  Raises:
    ValueError: an unknown `which` (listing the allowed values), an unknown format_version, variables that do not
      fit the model.
    FileNotFoundError: a workdir without a model (naming the path and the command that writes one).
  """
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

  directory = resolve(path, which)
  with open(os.path.join(directory, MODEL_FILE)) as f:
    info = json.load(f)
  if info.get("format_version") != FORMAT_VERSION:
    raise errors.InputError(
      f"{directory}/{MODEL_FILE} has format_version={info.get('format_version')!r}; this version "
      f"reads only {FORMAT_VERSION}."
    )
  input_shape = tuple(int(d) for d in info["input_shape"])
  num_classes = int(info["num_classes"])
  model = models.build(
    info["model"]["name"], num_classes, input_shape, kwargs=_model_kwargs(info["model"].get("kwargs"))
  )
  num_networks = int(info["variables"].get("num_networks", 1))
  expected = _expected_collections(model, input_shape, num_networks)
  stored = info["variables"]["collections"]
  if set(stored) != set(expected):
    raise ValueError(f"{directory}: {MODEL_FILE} lists the collections {stored}, the model {sorted(expected)}.")
  target = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), expected)
  checkpointer = ocp.Checkpointer(ocp.StandardCheckpointHandler(), multiprocessing_options=_this_process_only())
  restored = checkpointer.restore(os.path.join(directory, VARIABLES_DIRNAME), args=ocp.args.StandardRestore(target))
  checkpointer.close()
  collections = {k: jax.tree.map(np.asarray, flax.core.unfreeze(v)) for k, v in restored.items()}
  _check_variables(collections, expected, directory)
  variables = {"params": collections["params"], "batch_stats": collections.get("batch_stats", {})}
  norm = normalization_from_json(info["normalization"])
  options = xla_options.compiler_options(model, jax.devices()[0].platform)
  predict = predict_lib.make_predict_fn(
    model, batch_size=batch_size, normalize=norm, compiler_options=options, num_networks=num_networks
  )
  evaluate = predict_lib.make_evaluate(predict, batch_size=batch_size)
  embed = None
  if num_networks == 1:
    embed = predict_lib.make_evaluate(
      predict_lib.make_embed_fn(model, batch_size=batch_size, normalize=norm, compiler_options=options),
      batch_size=batch_size,
    )
  names = info.get("class_names")
  return LoadedModel(
    model=model,
    variables=variables,
    class_names=None if names is None else tuple(names),
    input_shape=input_shape,
    num_classes=num_classes,
    normalization=norm,
    info=info,
    path=directory,
    _evaluate=evaluate,
    _device_variables=jax.device_put(variables),
    _embed=embed,
  )
