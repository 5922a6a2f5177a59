"""End-to-end training: every method on the bundled digits data, determinism, outputs, the CLI."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from experiments.configs import ce
from experiments.configs import default
from experiments.configs import encouraging
from experiments.configs import gce
from experiments.configs import joint_optimization
from experiments.configs import truncated_lq
from noisy_jax import models
from noisy_jax.core import augment
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.experiment import comparison
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import joint_optimization as joint_optimization_lib
from noisy_jax.methods import plain_loss
from noisy_jax.methods import registry
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import method as method_lib
from noisy_jax.train import optim
from noisy_jax.train import state as state_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = {
  "ce": ce,
  "gce": gce,
  "truncated_lq": truncated_lq,
  "joint_optimization": joint_optimization,
  "encouraging": encouraging,
}


def tiny(config_module, **overrides):
  """A method's config shrunk to a few epochs of the 8x8 digits with 40% symmetric noise."""
  config = config_module.get_config()
  config.dataset = "digits"
  config.noise.rate = 0.4
  config.num_epochs = 6
  config.optimizer.lr_boundaries = (4,)
  config.model.name = "mlp"
  config.model.kwargs = {"hidden_sizes": (64,)}
  if config.method.name == "truncated_lq":
    config.method.prune_start, config.method.prune_every = 3, 2
  if config.method.name == "joint_optimization":
    config.method.begin, config.method.history_length = 3, 2
    config.stage2.num_epochs = 4
    config.stage2.optimizer.lr_boundaries = (3,)
  for key, value in overrides.items():
    config[key] = value
  return config


@pytest.fixture(scope="module")
def summaries():
  return {name: runs.run_single(tiny(module)) for name, module in CONFIGS.items()}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_each_method_learns_on_digits(summaries, name):
  summary = summaries[name]
  history = summary["history"]
  assert summary["noise"]["realised_rate"] == pytest.approx(0.4, abs=0.005)
  assert all(np.isfinite(r["train_loss"]) for r in history)
  # 10 classes: chance is 10%. Six epochs of an MLP on 40%-noisy digits must do far better.
  assert summary["last_test_accuracy"] > 0.6, summary["last_test_accuracy"]
  assert summary["best_test_accuracy"] >= summary["last_test_accuracy"]


def test_truncated_lq_prunes_mostly_noisy_examples(summaries):
  stage1 = summaries["truncated_lq"]["stage1"]
  assert 0.0 < stage1["pruned_fraction"] < 1.0
  # Pruning finds the mislabelled examples: precision clearly above the 40% base rate, high recall.
  assert stage1["detection_precision"] > 0.5, stage1
  assert stage1["detection_recall"] > 0.8, stage1


def test_joint_optimization_relabels_and_runs_stage2(summaries):
  summary = summaries["joint_optimization"]
  stages = [r["stage"] for r in summary["history"]]
  assert stages == ["stage1"] * 6 + ["stage2"] * 4
  # Relabelling from the history recovers more correct labels than the 60% that were given correctly.
  assert summary["stage1"]["label_recovery_overall"] > 0.7
  assert "stage2" in summary and summary["last_test_accuracy"] == summary["stage2"]["last_test_accuracy"]


def test_same_seed_same_numbers_different_seed_different_noise():
  config = tiny(joint_optimization)
  config.num_epochs, config.stage2.num_epochs = 4, 2
  first, second = runs.run_single(config), runs.run_single(config)
  timing = ("seconds", "steps_per_second")  # wall-clock measurements, the only fields allowed to differ
  strip = lambda h: [{k: v for k, v in r.items() if k not in timing} for r in h]
  assert strip(first["history"]) == strip(second["history"])
  assert first["noise"]["sha256"] == second["noise"]["sha256"]
  config.seed = 1
  third = runs.run_single(config)
  assert third["noise"]["sha256"] != first["noise"]["sha256"]


def test_workdir_outputs(tmp_path):
  config = tiny(gce, num_epochs=3)
  summary = runs.run_single(config, str(tmp_path))
  lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
  assert [json.loads(l)["epoch"] for l in lines] == [1, 2, 3]
  on_disk = json.loads((tmp_path / "summary.json").read_text())
  assert on_disk["last_test_accuracy"] == summary["last_test_accuracy"]


@pytest.mark.parametrize("num_examples", [300, 50, 1])
def test_epoch_program_uses_every_example_once(num_examples):
  """Also for a split smaller than the padding of its one batch (50 or 1 example, batch 128): the padding cycles
  through the permutation again."""
  indices, valid = epoch_lib.epoch_batches(jax.random.PRNGKey(0), num_examples, 128)
  steps = -(-num_examples // 128)
  assert indices.shape == valid.shape == (steps, 128)
  used = np.asarray(indices)[np.asarray(valid)]
  np.testing.assert_array_equal(np.sort(used), np.arange(num_examples))
  padding = np.asarray(indices)[~np.asarray(valid)]
  assert padding.min() >= 0 and padding.max() < num_examples
  perm = np.asarray(indices).reshape(-1)[:num_examples]
  np.testing.assert_array_equal(padding[:num_examples], perm[: len(padding[:num_examples])])  # the first ones again


@pytest.mark.parametrize("mode", ["steps", "scan"])
@pytest.mark.parametrize("augmented", [False, True])
def test_epoch_program_compiles_once(mode, augmented):
  """The epoch program ('scan': one program; 'steps': one step program dispatched per batch) is traced once however
  many epochs and steps run, with or without on-device augmentation (no retrace per step or per epoch)."""
  traces = []
  method = plain_loss.method("cross_entropy")
  traced = method_lib.Method(name="counted", objective=lambda *a, **k: (traces.append(1), method.objective(*a, **k))[1])
  model = models.get("mlp", num_classes=3, hidden_sizes=(8,), bn_axis_name=mesh_lib.AXIS)
  mesh = mesh_lib.make_mesh(1)
  cfg = ml_collections.ConfigDict({"learning_rate": 0.1})
  shape = (4, 4, 1)
  state = state_lib.create_train_state(
    model, jax.random.PRNGKey(0), shape, optim.make_optimizer(settings_lib.optimizer_settings(cfg), 3)
  )
  state = mesh_lib.replicate(state, mesh)
  table = mesh_lib.replicate(label_table_lib.create(np.arange(40) % 3, 3), mesh)
  x = mesh_lib.replicate(jax.random.normal(jax.random.PRNGKey(1), (40, *shape)), mesh)
  augment_fn = augment.make_augment(crop_padding=1, flip=True) if augmented else None
  epoch_fn = epoch_lib.make_epoch_fn(traced, mesh, batch_size=16, num_examples=40, mode=mode, augment=augment_fn)
  for epoch in range(1, 5):  # 4 epochs x 3 steps
    state, table, _ = epoch_fn(state, table, x, jax.random.PRNGKey(epoch), jnp.int32(epoch))
  assert len(traces) == 1


def test_comparison_table_and_summary(tmp_path, capsys):
  config = default.get_config()
  config.shared.dataset = "digits"
  config.shared.noise.rate = 0.4
  config.shared.model = ml_collections.ConfigDict({"name": "mlp", "kwargs": {"hidden_sizes": (32,)}})
  config.shared.seeds = (0, 1)
  runs = ml_collections.ConfigDict()
  for name in ("ce", "truncated_lq"):
    run = tiny(CONFIGS[name])
    runs[name] = {k: run[k] for k in ("method", "num_epochs", "optimizer")}
  config.runs = runs
  out = comparison.run(config, str(tmp_path))
  printed = capsys.readouterr().out
  assert "truncated_lq" in printed and "last test" in printed and "±" in printed
  assert set(out["mean_std"]) == {"ce", "truncated_lq"}
  per_seed = [s["last_test_accuracy"] for s in out["per_seed"]["ce"]]
  assert out["mean_std"]["ce"]["last_test_accuracy"]["mean"] == pytest.approx(np.mean(per_seed))
  assert json.loads((tmp_path / "summary.json").read_text())["seeds"] == [0, 1]
  assert (tmp_path / "ce" / "seed1" / "metrics.jsonl").exists()


def test_command_line(tmp_path):
  cmd = [
    sys.executable,
    "-m",
    "experiments.train",
    "--config=experiments/configs/ce.py",
    f"--workdir={tmp_path}",
    "--config.dataset=digits",
    "--config.num_epochs=2",
    "--config.model.name=mlp",
    "--config.noise.rate=0.2",
  ]
  proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "last test" in proc.stdout
  assert json.loads((tmp_path / "summary.json").read_text())["method"] == "cross_entropy"


def test_default_config_is_the_issue_setting():
  config = default.get_config()
  assert config.shared.dataset == "mnist5k"
  assert config.shared.noise.type == "symmetric" and config.shared.noise.rate == 0.6
  assert set(config.runs) == {"ce", "gce", "truncated_lq", "joint_optimization", "encouraging"}
  assert config.runs.gce.method.loss_kwargs.q == 0.7
  assert config.runs.truncated_lq.method.q == 0.7 and config.runs.truncated_lq.method.k == 0.5
  assert config.runs.joint_optimization.method.relabel == "soft"
  assert config.runs.joint_optimization.method.stage2
  assert config.runs.joint_optimization.optimizer.lr_boundaries == ()  # stage 1: constant lr (paper)


def test_method_config_rejects_unknown_fields():
  bad = ml_collections.ConfigDict(
    {
      "name": "joint_optimization",
      "alpha": 1.2,
      "beta": 0.8,
      "begin": 5,
      "history_length": 3,
      "relabel": "soft",
      "bgein": 7,
    }
  )
  with pytest.raises(ValueError, match=r"bgein.*'joint_optimization'"):
    registry.make(bad, num_classes=10)
  for run in default.get_config().runs.values():  # every shipped config only uses known fields
    registry.make(run.method, num_classes=10)


def test_training_split_metrics_are_consistent():
  config = tiny(ce, num_epochs=2, eval_train=True)
  summary = runs.run_single(config)
  rate = summary["noise"]["realised_rate"]
  for r in summary["history"]:
    # On correctly-labelled examples the given label is the clean one, so overall clean accuracy splits exactly.
    split = (1 - rate) * r["train_accuracy_on_clean_examples"] + rate * r["train_accuracy_true_on_noisy_examples"]
    assert r["train_accuracy_clean"] == pytest.approx(split, abs=1e-9)
    fit_given = (1 - rate) * r["train_accuracy_on_clean_examples"] + rate * r["memorised_fraction"]
    assert r["train_accuracy_given_labels"] == pytest.approx(fit_given, abs=1e-9)
    # A noisy example cannot be predicted both as its (wrong) given label and as its clean label.
    assert r["memorised_fraction"] + r["train_accuracy_true_on_noisy_examples"] <= 1.0 + 1e-12


def test_joint_optimization_relabel_options_are_checked():
  kwargs = dict(alpha=1.0, beta=0.5, prior=np.full(10, 0.1), begin=2)
  with pytest.raises(ValueError, match="relabel_k=0 must be a positive int"):
    joint_optimization_lib.method(relabel="hard_top_k", **kwargs)
  with pytest.raises(ValueError, match="relabel_k=5 is only used with relabel='hard_top_k'"):
    joint_optimization_lib.method(relabel="soft", relabel_k=5, **kwargs)
  with pytest.raises(ValueError, match="hard_top_k"):  # the error lists the allowed modes
    joint_optimization_lib.method(relabel="top_k", **kwargs)


def test_loss_method_label_smoothing_trains_on_smoothed_targets():
  """Method 'loss' with label_smoothing eps: the objective is the loss against (1 - eps) y + eps / C."""
  logits = jax.random.normal(jax.random.PRNGKey(0), (6, 4)) * 3.0
  labels = jax.nn.one_hot(jnp.array([0, 1, 2, 3, 0, 1]), 4)
  ones = jnp.ones(6)
  method = registry.make(
    ml_collections.ConfigDict({"name": "loss", "loss": "cross_entropy", "label_smoothing": 0.2}), num_classes=4
  )
  expected = np.mean(-np.sum((0.8 * np.asarray(labels) + 0.05) * np.asarray(jax.nn.log_softmax(logits)), -1))
  np.testing.assert_allclose(method.objective(logits, labels, ones, ones > 0)[0], expected, rtol=1e-6)
  plain = registry.make(ml_collections.ConfigDict({"name": "loss", "loss": "cross_entropy"}), num_classes=4)
  assert abs(float(plain.objective(logits, labels, ones, ones > 0)[0]) - expected) > 1e-3
  with pytest.raises(ValueError, match="label_smoothing=1.5"):
    plain_loss.method("cross_entropy", label_smoothing=1.5)


def test_only_the_main_process_writes_run_files(tmp_path, monkeypatch):
  """Multi-host: a process other than 0 writes no metrics/TensorBoard/summary, but still takes part in checkpoints."""
  from noisy_jax.parallel import distributed

  monkeypatch.setattr(distributed, "is_main_process", lambda: False)
  config = tiny(gce, num_epochs=2)
  config.checkpoint_every = 1
  runs.run_single(config, str(tmp_path))
  names = sorted(p.name for p in tmp_path.iterdir())
  assert names == ["checkpoints"], names
  monkeypatch.setattr(distributed, "is_main_process", lambda: True)
  runs.run_single(config, str(tmp_path / "main"))
  assert {"metrics.jsonl", "summary.json", "checkpoints"} <= {p.name for p in (tmp_path / "main").iterdir()}
