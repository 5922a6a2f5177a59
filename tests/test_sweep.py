"""noisy_jax.experiment.sweep: members trained together equal runs.run_single / loop.fit of each member's config."""

import json

import jax
import ml_collections
import numpy as np
import pytest

from noisy_jax import models
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.experiment import inputs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import sweep
from noisy_jax.experiment import sweep_grid
from noisy_jax.methods import registry
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import loop

EPOCHS = 3


@pytest.fixture(scope="module")
def digits():
  config = ml_collections.ConfigDict({"dataset": "digits", "dataset_kwargs": {}, "normalization": "per_channel"})
  return inputs.load_dataset(config)


def sweep_config(method, grid, *, seeds=(0, 1), model="mlp", **sweep_fields):
  """A tiny single-run config (digits, 3 epochs, lr decay after epoch 2) with a sweep over `grid`."""
  from experiments.configs import base  # pylint: disable=g-import-not-at-top

  config = base.get_shared()
  config.dataset = "digits"
  config.model = (
    {"name": "mlp", "kwargs": {"hidden_sizes": (32,)}}
    if model == "mlp"
    else {"name": "small_cnn", "kwargs": {"widths": (4, 8)}}
  )
  config.method = method
  config.num_epochs = EPOCHS
  config.optimizer = base.optimizer(0.05, lr_boundaries=(2,))
  config.checkpoint_every = 0
  config.sweep = sweep_grid.default_sweep()
  config.sweep.grid = grid
  config.sweep.seeds = seeds
  config.sweep.update(sweep_fields)
  return config


GCE = {"name": "loss", "loss": "generalized_cross_entropy", "loss_kwargs": {"q": 0.7}}
TRUNCATED_LQ = {
  "name": "truncated_lq",
  "q": 0.7,
  "k": 0.5,
  "prune_start": 2,
  "prune_every": 1,
  "prune_params": "best_val",
}
JOINT_OPT = {
  "name": "joint_optimization",
  "alpha": 1.2,
  "beta": 0.8,
  "prior": "uniform",
  "begin": 2,
  "history_length": 2,
  "relabel": "soft",
  "stage2": False,
}


_SINGLE_RUNS = {}


def single_fit(member_config, dataset):
  """loop.fit with the keys, labels and model of runs.run_single: (state, table, history, noise report)."""
  key = (member_config.to_json(), jax.config.jax_enable_x64)
  if key not in _SINGLE_RUNS:
    _SINGLE_RUNS[key] = _single_fit(member_config, dataset)
  return _SINGLE_RUNS[key]


def _single_fit(member_config, dataset):
  stage1_key, noise_key, _ = jax.random.split(jax.random.PRNGKey(int(member_config.seed)), 3)
  noisy, report = inputs.noisy_training_labels(member_config, dataset, noise_key)
  method = registry.make(member_config.method, num_classes=dataset.num_classes)
  table = label_table_lib.create(noisy, dataset.num_classes, history_length=method.history_length)
  state, table, history, _ = loop.fit(
    model=models.build(member_config.model.name, dataset.num_classes, kwargs=member_config.model.get("kwargs")),
    method=method,
    table=table,
    dataset=dataset,
    clean_train_labels=dataset.y_train,
    settings=settings_lib.fit_settings(member_config),
    key=stage1_key,
    mesh=mesh_lib.make_mesh(1),
  )
  return state, table, history, report


def train_sweep(config, dataset):
  members = sweep_grid.make_members(config)
  _, fields, _ = sweep_grid.check_sweep(config)
  method = registry.make(members[0].config.method, num_classes=dataset.num_classes)
  model = models.build(
    members[0].config.model.name, dataset.num_classes, kwargs=members[0].config.model.get("kwargs"), bn_axis_name=None
  )
  programs = sweep.Programs(
    members[0].config,
    model,
    method,
    input_shape=dataset.x_train.shape[1:],
    num_examples=dataset.x_train.shape[0],
    member_map=config.sweep.member_map,
    normalize=inputs.normalizer(members[0].config, dataset),
  )
  return (
    members,
    programs,
    sweep.train_members(members[0].config, members, dataset=dataset, model=model, programs=programs, fields=fields),
  )


def assert_member_equals_single(m, member, outputs, dataset):
  states, tables, histories, reports = outputs
  state, table, history, report = single_fit(member.config, dataset)
  assert reports[m]["sha256"] == report["sha256"]
  np.testing.assert_array_equal(np.asarray(tables.noisy_labels[m]), np.asarray(table.noisy_labels))
  assert len(histories[m]) == len(history) == EPOCHS
  one_example = 1.0 / dataset.y_test.shape[0] + 1e-9
  for ours, theirs in zip(histories[m], history):
    assert ours["train_loss"] == pytest.approx(theirs["train_loss"], rel=1e-5, abs=1e-6)
    assert abs(ours["test_accuracy"] - theirs["test_accuracy"]) <= one_example
    assert abs(ours["val_accuracy"] - theirs["val_accuracy"]) <= 1.0 / dataset.y_val.shape[0] + 1e-9
    for key in ("pruned_fraction", "detection_precision", "detection_recall", "label_recovery_overall"):
      assert (key in ours) == (key in theirs), key
      if key in ours:
        assert ours[key] == pytest.approx(theirs[key], abs=1e-6), key
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a[m], b, rtol=1e-4, atol=1e-5),
    (states.params, states.batch_stats),
    (state.params, state.batch_stats),
  )
  np.testing.assert_array_equal(np.asarray(tables.weights[m]), np.asarray(table.weights))
  np.testing.assert_allclose(np.asarray(tables.soft_labels[m]), np.asarray(table.soft_labels), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
  "member_map,epoch_mode", [("vmap", "steps"), ("vmap", "scan"), ("loop", "steps"), ("loop", "scan")]
)
def test_gce_members_equal_single_runs(digits, member_map, epoch_mode):
  """Different q and noise rates in one program; each member equals its own run."""
  config = sweep_config(
    GCE, (("method.loss_kwargs.q", (0.3, 0.9)), ("noise.rate", (0.2, 0.5))), seeds=(0,), member_map=member_map
  )
  config.epoch_mode = epoch_mode
  members, programs, outputs = train_sweep(config, digits)
  assert (programs.member_map, programs.epoch_mode) == (member_map, epoch_mode)
  assert [m.point for m in members] == [(0.3, 0.2), (0.3, 0.5), (0.9, 0.2), (0.9, 0.5)]
  assert members[1].config.noise.rate == 0.5 and members[2].config.method.loss_kwargs.q == 0.9
  for m in range(len(members)):
    assert_member_equals_single(m, members[m], outputs, digits)
  # Members really differ: the labels (noise rate) and the training (q).
  _, _, histories, reports = outputs
  assert reports[0]["sha256"] != reports[1]["sha256"] and reports[0]["sha256"] == reports[2]["sha256"]
  assert histories[0][-1]["train_loss"] != histories[2][-1]["train_loss"]


def test_truncated_lq_pruning_equals_single_runs(digits):
  """Pruning with each member's own best-validation parameters, own k and own seed prunes what the single run
  prunes (small CNN, members looped over one compiled step).

  In float64 (noisy_jax.core.precision), as the golden values: the two programs round differently, and in float32
  3 epochs of a small CNN with pruning turn that into train losses 6e-4 apart under other XLA flags (LLVM's
  optimisation level 0: 6e-5 and 6e-4 for the two members compared; at the default level both under 1e-5)."""
  config = sweep_config(
    TRUNCATED_LQ,
    (("method.k", (0.15, 0.3)), ("noise.rate", (0.4,))),
    seeds=(0, 1),
    model="small_cnn",
    member_map="loop",
  )
  config.method.prune_start = 3  # prune after epochs 2 and 3: with the best-val params of epoch 1 or 2
  with jax.enable_x64(True):
    members, _, outputs = train_sweep(config, digits)
    assert [(m.point[0], m.seed) for m in members] == [(0.15, 0), (0.15, 1), (0.3, 0), (0.3, 1)]
    assert outputs[0].params["Dense_0"]["kernel"].dtype == np.float64
    # k 0.3 seed 1: another k and another seed than member 0's (the order above), one single run to compare with
    assert_member_equals_single(3, members[3], outputs, digits)
  kept = np.asarray(outputs[1].weights).sum(axis=1)
  assert kept[0] > kept[2] > 0 and kept[1] > kept[3] > 0  # p_y > 0.15 keeps more examples than p_y > 0.3
  assert all(0 < r[-1]["pruned_fraction"] < 1 for r in outputs[2])


def test_joint_optimization_relabelling_equals_single_runs(digits):
  config = sweep_config(JOINT_OPT, (("method.alpha", (0.5, 1.2)),), seeds=(0,), member_map="vmap")
  members, _, outputs = train_sweep(config, digits)
  for m in range(len(members)):
    assert_member_equals_single(m, members[m], outputs, digits)
  assert outputs[2][0][-1]["relabelled_fraction"] > 0


def test_run_sweep_tables_figure_chunks_and_sequential(digits, tmp_path, capsys):
  config = sweep_config(
    GCE, (("method.loss_kwargs.q", (0.2, 0.7)), ("noise.rate", (0.3,))), seeds=(0, 1), max_members_per_program=3
  )
  config.sweep.plot_keys = ("last_test_accuracy", "best_test_accuracy")
  out = sweep.run_sweep(config, str(tmp_path), dataset=digits)
  printed = capsys.readouterr().out
  assert "last test accuracy, mean ± std over seeds:" in printed and "q \\ noise.rate" in printed
  assert "q=0.7, noise=30%" in printed
  assert list(out["mean_std"]) == ["q=0.2, noise=30%", "q=0.7, noise=30%"]
  auto_mode = epoch_lib.resolve_epoch_mode("auto", jax.devices()[0].platform)  # 'steps' on the CPU, 'scan' elsewhere
  assert out["mode"] == f"vmap, {auto_mode}" and len(out["members"]) == 4
  saved = json.loads((tmp_path / "summary.json").read_text())
  assert saved["members"][3]["point"] == {"method.loss_kwargs.q": 0.7, "noise.rate": 0.3}
  assert len(saved["members"][3]["summary"]["history"]) == EPOCHS
  assert (tmp_path / "sweep.png").stat().st_size > 5000
  for agg in out["mean_std"].values():
    assert agg["realised_noise_rate"]["mean"] == pytest.approx(0.3, abs=0.005)
    assert agg["last_test_accuracy"]["std"] > 0  # two seeds differ

  # Programs of 3 + 1 members give the numbers of the same members run one after another by runs.run_single.
  config.sweep.sequential = True
  sequential = sweep.run_sweep(config, dataset=digits)
  assert sequential["mode"] == "sequential" and len(sequential["members"]) == 4
  for ours, theirs in zip(out["members"], sequential["members"]):
    assert ours["summary"]["noise"]["sha256"] == theirs["summary"]["noise"]["sha256"]
    assert ours["summary"]["history"][-1]["train_loss"] == pytest.approx(
      theirs["summary"]["history"][-1]["train_loss"], rel=1e-5
    )
    assert abs(ours["summary"]["last_test_accuracy"] - theirs["summary"]["last_test_accuracy"]) <= 0.003


def test_seed_only_sweep_and_encouraging(digits):
  config = sweep_config(
    {"name": "encouraging", "log_end": 0.75}, (("method.log_end", (0.5, 1.0)),), seeds=(3,), member_map="vmap"
  )
  members, _, outputs = train_sweep(config, digits)
  assert_member_equals_single(1, members[1], outputs, digits)
  config = sweep_config(GCE, (), seeds=(0, 1))  # seeds only
  members = sweep_grid.make_members(config)
  assert [(m.point, m.seed) for m in members] == [((), 0), ((), 1)]


@pytest.mark.parametrize(
  "change,match",
  [
    (lambda c: c.sweep.update({"grid": (("method.loss_kwargs.qq", (0.5,)),)}), "Unknown field 'method.loss_kwargs.qq'"),
    (lambda c: c.sweep.update({"grid": (("batch_size", (64, 128)),)}), "'batch_size' cannot vary"),
    (lambda c: c.sweep.update({"grid": (("method.loss", (0.5,)),)}), "'method.loss' cannot vary"),
    (lambda c: c.sweep.update({"grid": (("method.loss_kwargs.q", ()),)}), "values of 'method.loss_kwargs.q' are empty"),
    (lambda c: c.sweep.update({"grid": (("noise.rate", ("high",)),)}), "must be numbers"),
    (lambda c: c.sweep.update({"grid": (("noise.rate", (0.1,)), ("noise.rate", (0.2,)))}), "names a field twice"),
    (lambda c: c.sweep.update({"grid": ("noise.rate", (0.1,))}), "pairs"),
    (lambda c: c.sweep.update({"seeds": ()}), "seeds=\\(\\) must be a non-empty tuple"),
    (lambda c: c.sweep.update({"seeds": (1, 1)}), "repeats a seed"),
    (lambda c: c.sweep.update({"member_map": "pmap"}), "Unknown member_map 'pmap'"),
    (lambda c: c.sweep.update({"max_members_per_program": -1}), "max_members_per_program=-1"),
    (lambda c: c.sweep.update({"grid": (("method.loss_kwargs.q", (0.5, 1.5)),)}), "q=1.5 is outside"),
  ],
)
def test_bad_sweep_specs(change, match):
  config = sweep_config(GCE, (("method.loss_kwargs.q", (0.5,)),))
  change(config)
  with pytest.raises(ValueError, match=match):
    sweep_grid.make_members(config)


def test_bad_sweep_specs_structural():
  config = sweep_config(GCE, ())
  config.sweep.colour = "red"
  with pytest.raises(ValueError, match=r"Unknown field\(s\) \['colour'\] in config.sweep"):
    sweep_grid.check_sweep(config)
  config = sweep_config(dict(JOINT_OPT, stage2=True), (("method.alpha", (1.0,)),))
  with pytest.raises(ValueError, match=r"trains 2 stages \(stage1, stage2\), which sweeps do not run"):
    sweep_grid.check_sweep(config)
  config = sweep_config(TRUNCATED_LQ, (("method.prune_start", (2, 3)),))
  with pytest.raises(ValueError, match="'method.prune_start' cannot vary.*method.q, method.k"):
    sweep_grid.check_sweep(config)
  config = sweep_config(GCE, (("noise.rate", (0.2,)),))
  config.noise.type = "none"
  with pytest.raises(ValueError, match="'noise.rate' cannot vary"):
    sweep_grid.check_sweep(config)


def test_format_grid():
  results = {
    "q=0.1, noise=20%": {"x": {"mean": 0.5, "std": 0.01}},
    "q=0.1, noise=40%": {},
    "q=0.5, noise=20%": {"x": {"mean": 0.25, "std": 0.0}},
    "q=0.5, noise=40%": {"x": {"mean": 1, "std": 0}},
  }
  lines = sweep_grid.format_grid(results, ("method.loss_kwargs.q", "noise.rate"), ((0.1, 0.5), (0.2, 0.4)), "x")
  rows = [line.split() for line in lines.splitlines()]
  assert rows[0] == ["q", "\\", "noise.rate", "20%", "40%"]
  assert rows[2] == ["0.1", "50.00%", "±1.00", "-"]
  assert rows[3] == ["0.5", "25.00%", "±0.00", "100.00%", "±0.00"]
  with pytest.raises(ValueError, match="1 or 2 swept fields"):
    sweep_grid.format_grid(results, ("a", "b", "c"), ((1,), (2,), (3,)), "x")
