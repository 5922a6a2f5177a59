"""experiments/ni_erm_accuracy.py: NI-ERM fitted on one embedding store's noisy labels, its accuracy on another's
clean labels, with the settings given or chosen by the grid search (then refitted on every training row, as
GridSearchCV's refit); stores embedded differently are refused by name."""

import json
import os
import shlex
import subprocess
import sys

import numpy as np
import pytest

from experiments import ni_erm_accuracy
from experiments.configs import ni_erm_paper
from noisy_jax.core import errors
from noisy_jax.experiment import embedding_store
from noisy_jax.experiment import ni_erm
from noisy_jax.experiment import ni_erm_grid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASSES = ("cat", "dog", "ship")


def clouds(seed, n, flip):
  """Three overlapping Gaussian classes in 5 dimensions (the same centres for every seed), labels flipped at random
  with probability `flip`: (features [n, 5], given labels, clean labels)."""
  centres = np.random.default_rng(0).normal(size=(3, 5)) * 1.5
  rng = np.random.default_rng(seed)
  clean = rng.integers(0, 3, n)
  x = centres[clean] + rng.normal(size=(n, 5))
  given = np.where(rng.random(n) < flip, rng.integers(0, 3, n), clean)
  return x, given, clean


def write_store(workdir, x, labels, *, classes=CLASSES, backbone="vit_small_patch14_dinov2"):
  """A complete embedding store of x with `labels`, one shard, as experiments.embed writes it."""
  paths = [f"data:split[{i}]" for i in range(len(x))]
  ident = embedding_store.identity(
    backbone=backbone,
    weights={"path": "w.pth", "size": 1, "sha256": "0" * 64},
    preprocessing={"output_shape": [224, 224, 3], "resize": 224, "crop": 224},
    dim=x.shape[1],
    paths=paths,
    shard_size=len(x),
    labels=labels,
  )
  writer = embedding_store.Writer.open(str(workdir), ident, paths, labels, classes)
  writer.write_shard(0, x, [])
  return str(workdir)


@pytest.fixture(name="stores")
def stores_fixture(tmp_path):
  x_train, given, _ = clouds(1, 300, 0.35)
  x_test, _, clean = clouds(2, 200, 0.0)
  train = write_store(tmp_path / "train", x_train, given)
  test = write_store(tmp_path / "test", x_test, clean)
  return train, test, (x_train.astype(np.float32), given, x_test.astype(np.float32), clean)


def test_given_settings_are_the_head_fitted_on_the_noisy_labels(stores):
  train, test, (x_train, given, x_test, clean) = stores
  result = ni_erm_accuracy.run(train, test, inverse_regularization=0.1, epochs=50)
  head = ni_erm.fit(x_train, given, num_classes=3, inverse_regularization=0.1, epochs=50)
  assert result["test_accuracy"] == np.mean(ni_erm.predict(head, x_test) == clean)
  assert result["settings"]["inverse_regularization"] == 0.1 and result["grid"] is None
  assert (result["num_train"], result["num_test"], result["dim"], result["num_classes"]) == (300, 200, 5, 3)
  assert result["test_accuracy"] > 0.8  # the noisy labels' head still classifies the clean test labels


def test_grid_search_refits_its_choice_on_every_training_row(stores):
  """--grid_search: the choice of ni_erm_grid.search on the training store, refitted on all 300 rows; the table of
  its 28 candidates comes with the result."""
  train, test, (x_train, given, x_test, clean) = stores
  result = ni_erm_accuracy.run(train, test, grid_search=True)
  best = ni_erm_grid.search(x_train, given).best
  assert {k: result["settings"][k] for k in best} == best
  head = ni_erm.fit(x_train, given, num_classes=3, **best)
  assert result["test_accuracy"] == np.mean(ni_erm.predict(head, x_test) == clean)
  assert len(result["grid"]) == 28 and min(row["rank"] for row in result["grid"]) == 1


def test_command_prints_and_writes_the_result(stores, tmp_path):
  train, test, _ = stores
  output = tmp_path / "out" / "result.json"
  command = [
    sys.executable,
    "-m",
    "experiments.ni_erm_accuracy",
    f"--train={train}",
    f"--test={test}",
    "--inverse_regularization=0.1",
    "--epochs=50",
    f"--output={output}",
  ]
  done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=180, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  written = json.loads(output.read_text(encoding="utf-8"))
  assert f"test accuracy: {100 * written['test_accuracy']:.2f}%" in done.stdout
  assert "inverse regularisation 0.1, 50 L-BFGS iterations (given)" in done.stdout


def test_stores_embedded_differently_or_without_labels_are_refused(stores, tmp_path):
  train, _, (x_train, given, x_test, clean) = stores
  other_backbone = write_store(tmp_path / "clip", x_test, clean, backbone="vit_base_patch16_clip")
  with pytest.raises(errors.InputError, match="embedded differently: backbone 'vit_small_patch14_dinov2' against"):
    ni_erm_accuracy.run(train, other_backbone)
  other_classes = write_store(tmp_path / "classes", x_test, clean, classes=("cat", "dog", "car"))
  with pytest.raises(errors.InputError, match="other classes"):
    ni_erm_accuracy.run(train, other_classes)
  unlabelled = write_store(tmp_path / "unlabelled", x_test, None)
  with pytest.raises(errors.InputError, match="unlabelled: the store has no labels"):
    ni_erm_accuracy.run(train, unlabelled)
  with pytest.raises(errors.InputError, match=r"--inverse_regularization=0.0, --epochs=50; allowed: C > 0"):
    ni_erm_accuracy.run(train, train, inverse_regularization=0.0, epochs=50)
  with pytest.raises(errors.MissingInputError, match="not an embedding store"):
    ni_erm_accuracy.run(train, str(tmp_path / "nothing"))


def config_of(command: str):
  """The config an experiments.embed command line loads: gce_paper's row with the command's --config.X=Y overrides."""
  from experiments.configs import gce_paper  # pylint: disable=g-import-not-at-top

  words = shlex.split(command)
  arg = next(w for w in words if w.startswith("--config=")).split(":", 1)[1]
  config = gce_paper.get_config(arg)
  for word in words:
    if word.startswith("--config."):
      path, value = word[len("--config.") :].split("=", 1)
      *parents, leaf = path.split(".")
      node = config
      for parent in parents:
        node = node[parent]
      node[leaf] = type(node[leaf])(value) if node[leaf] is not None else value
  return config


@pytest.mark.parametrize("name", list(ni_erm_paper.ROWS))
def test_paper_rows_commands_embed_the_rows_labels(name):
  """Each row's embed commands read the row's label set (CIFAR-N's human labels, or the clean labels at noise rate
  0) with every training image kept, the code's backbone and resize; the third command searches the grid."""
  from noisy_jax.data import tfds_data  # pylint: disable=g-import-not-at-top

  spec = ni_erm_paper.row(name)
  train, test, accuracy = ni_erm_paper.commands(name, data_dir="/data")
  config = config_of(train)
  assert config.dataset_kwargs.validation_size == 0 and config.dataset_kwargs.data_dir == "/data"
  if spec.noise_key == "clean_label":
    assert config.dataset == spec.dataset and config.noise.rate == 0.0
  else:
    keys = {**tfds_data.CIFAR10N_NOISE_KEYS, "noisy": "noisy_label"}  # the code's CIFAR-100_human.pt key
    assert config.dataset == f"{spec.dataset}_n" and config.noise.type == "dataset"
    assert keys[config.dataset_kwargs.noise_key] == spec.noise_key
  assert "--backbone=vit_large_patch14_dinov2" in train and "--resize=224 --interpolation=bilinear" in train
  assert test == train.replace(" --workdir=", " --split=test --workdir=").replace(
    f"{name}_train", f"{spec.dataset}_test"
  )
  assert accuracy.endswith("--grid_search") and f"--train=W/{name}_train" in accuracy


def test_paper_rows_commands_parse_and_stop_at_the_missing_weights(tmp_path):
  """The first command of cifar10n_worst runs until the weights file it names is found missing (its flags and config
  parse); nothing is written."""
  train, _, _ = ni_erm_paper.commands(
    "cifar10n_worst",
    weights=str(tmp_path / "dinov2_vitl14_pretrain.pth"),
    data_dir=str(tmp_path),
    workdir=str(tmp_path),
  )
  done = subprocess.run(
    [sys.executable, *shlex.split(train)[1:]],
    cwd=REPO,
    capture_output=True,
    text=True,
    timeout=180,
    check=False,
  )
  assert done.returncode == 2, done.stderr[-3000:]
  assert "dinov2_vitl14_pretrain.pth" in done.stderr and not (tmp_path / "cifar10n_worst_train").exists()
