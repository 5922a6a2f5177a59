"""The package's layers import one way: each module imports only its own layer and the layers below it.

Read from the source with `ast`, module-level and function-level imports alike (nothing is imported), so a module
that reaches up, even inside a function, fails here. From the bottom:

  core        losses, noise, label table, metrics, augmentation, label issues: pure functions of arrays
  parallel    mesh, processes, sharded table, streamed input, XLA options, host memory
  data        datasets and the noisy labels a run trains on
  models      the networks and `models.build`
  train       state, step, epoch program, prediction, `fit`, optimisers, two-network machinery, checkpoints
  methods     each method's objective and state, the two-network methods' epoch programs, the registry
  experiment  runs, comparisons, sweeps, reporting, export, environment

Every import is absolute (`from noisy_jax.core import losses`): a relative one (`from . import x`) would not be seen
by this reading, so none is allowed.

Below `methods` nothing takes a config: no function of core, parallel, data, models or train has a parameter named
`config` or `*_config` (read with `ast` too). The experiment layer reads the config once (noisy_jax.experiment.settings
into the trainer's typed frozen settings, noisy_jax.train.settings) and gives the layers below plain values. A
method's builder reads its own block (`method_config`, config.method: the fields its MethodSpec lists) into the
method's keyword arguments; no function of methods takes any other config.
"""

import ast
import os

import pytest

PACKAGE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "noisy_jax")
LAYERS = ("core", "parallel", "data", "models", "train", "methods", "experiment")


def layer_of(module: str) -> str | None:
  """The layer (first sub-package) of a dotted noisy_jax module name; None for the package itself or another one."""
  parts = module.split(".")
  return parts[1] if parts[0] == "noisy_jax" and len(parts) > 1 else None


def imports_of(path: str) -> list[tuple[int, str]]:
  """(line, noisy_jax module) of every import in the file at any depth: `from P import name` counts as P.name when P
  is the package itself (`from noisy_jax import models`), else as P."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), filename=path)
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("noisy_jax")]
    elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("noisy_jax") and not node.level:
      found += [
        (node.lineno, f"noisy_jax.{alias.name}" if node.module == "noisy_jax" else node.module) for alias in node.names
      ]
  return found


def package_modules() -> list[tuple[str, str]]:
  """(path, dotted name) of every module of noisy_jax."""
  out = []
  for directory, _, names in os.walk(PACKAGE_DIR):
    for name in sorted(names):
      if name.endswith(".py"):
        path = os.path.join(directory, name)
        dotted = os.path.relpath(path, os.path.dirname(PACKAGE_DIR))[:-3].replace(os.sep, ".")
        out.append((path, dotted.removesuffix(".__init__")))
  return out


def upward_imports(modules: list[tuple[str, str]]) -> list[str]:
  """Each import, in `modules` (path, dotted name), of a module of a higher layer or of no layer."""
  bad = []
  for path, module in modules:
    own = layer_of(module)
    for line, imported in imports_of(path):
      theirs = layer_of(imported)
      if theirs is None or own is None:
        continue
      if theirs not in LAYERS:
        bad.append(f"{module}:{line} imports {imported}, which is in no layer")
      elif LAYERS.index(theirs) > LAYERS.index(own):
        bad.append(f"{module}:{line} ({own}) imports {imported} ({theirs}), a higher layer")
  return bad


def test_every_module_sits_in_a_layer():
  outside = sorted(
    name for name in os.listdir(PACKAGE_DIR) if name not in LAYERS and name not in ("__init__.py", "__pycache__")
  )
  assert outside == [], f"modules or folders of noisy_jax outside the layers {LAYERS}: {outside}"


def test_imports_point_down():
  assert upward_imports(package_modules()) == []


def test_an_upward_import_inside_a_function_is_caught(tmp_path):
  core_losses = os.path.join(PACKAGE_DIR, "core", "losses.py")
  with open(core_losses, encoding="utf-8") as f:
    source = f.read()
  reaching = tmp_path / "losses.py"
  reaching.write_text(source + "\n\ndef _late():\n  from noisy_jax.train import loop\n  return loop\n")
  line = len(source.splitlines()) + 4
  assert upward_imports([(core_losses, "noisy_jax.core.losses")]) == []
  assert upward_imports([(str(reaching), "noisy_jax.core.losses")]) == [
    f"noisy_jax.core.losses:{line} (core) imports noisy_jax.train (train), a higher layer"
  ]


def relative_imports(source: str) -> list[str]:
  """`line: from .module import names` for each relative import in the Python `source`, at any depth."""
  return [
    f"{node.lineno}: from {'.' * node.level}{node.module or ''} import {', '.join(a.name for a in node.names)}"
    for node in ast.walk(ast.parse(source))
    if isinstance(node, ast.ImportFrom) and node.level
  ]


def test_no_relative_imports():
  found = []
  for path, module in package_modules():
    with open(path, encoding="utf-8") as f:
      found += [f"{module}:{line}" for line in relative_imports(f.read())]
  assert found == [], f"relative imports (write them as absolute noisy_jax imports): {found}"


def test_a_relative_import_is_caught():
  with open(os.path.join(PACKAGE_DIR, "core", "losses.py"), encoding="utf-8") as f:
    source = f.read()
  line = len(source.splitlines()) + 1
  relative = "from . import noise\n\n\ndef _late():\n  from ..train.loop import fit\n  return fit\n"
  assert relative_imports(source) == []
  assert relative_imports(source + relative) == [
    f"{line}: from . import noise",
    f"{line + 4}: from ..train.loop import fit",
  ]


# The layers below `methods` take plain values: a run's config is read above them (DESIGN.md, "The config is read
# once").
PLAIN_LAYERS = ("core", "parallel", "data", "models", "train")


def config_parameters(source: str) -> list[str]:
  """`line: function(parameter)` for each parameter named `config` or ending in `_config` of a function or lambda
  in the Python `source`, at any depth (positional, keyword-only, *args and **kwargs alike)."""
  found = []
  for node in ast.walk(ast.parse(source)):
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
      continue
    args = node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]
    name = getattr(node, "name", "<lambda>")
    found += [f"{node.lineno}: {name}({a.arg})" for a in every if a.arg == "config" or a.arg.endswith("_config")]
  return found


def test_no_config_parameters_below_methods():
  found = []
  for path, module in package_modules():
    if layer_of(module) in PLAIN_LAYERS:
      with open(path, encoding="utf-8") as f:
        found += [f"{module}:{entry}" for entry in config_parameters(f.read())]
  assert found == [], f"functions of {PLAIN_LAYERS} that take a config (give them plain values instead): {found}"


def test_methods_take_only_their_own_block():
  """A method reads config.method (its `method_config`) and nothing else of the run's config."""
  found = []
  for path, module in package_modules():
    if layer_of(module) == "methods":
      with open(path, encoding="utf-8") as f:
        found += [f"{module}:{entry}" for entry in config_parameters(f.read()) if not entry.endswith("(method_config)")]
  assert found == [], f"functions of methods that take a config other than config.method: {found}"


def test_a_config_parameter_is_caught():
  source = (
    "def plain(num_classes, *, config_path=None, configs=()):\n"
    "  return num_classes\n"
    "\n"
    "def reads(config):\n"
    "  return config.seed\n"
    "\n"
    "async def reads_later(x, /, *, model_config):\n"
    "  return model_config.name\n"
    "\n"
    "pick = lambda augment_config, **run_config: augment_config\n"
  )
  assert config_parameters(source) == [
    "4: reads(config)",
    "7: reads_later(model_config)",
    "10: <lambda>(augment_config)",
    "10: <lambda>(run_config)",
  ]
  assert config_parameters("def plain(num_classes):\n  return num_classes\n") == []


@pytest.mark.parametrize(
  "module,layer",
  [
    ("noisy_jax.core.losses", "core"),
    ("noisy_jax.train.loop", "train"),
    ("noisy_jax.experiment", "experiment"),
    ("noisy_jax", None),
    ("numpy", None),
  ],
)
def test_layer_of(module, layer):
  assert layer_of(module) == layer
