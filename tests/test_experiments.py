"""Each experiment config of experiments/configs runs end to end at a tiny size."""

import json
import os

import numpy as np
import pytest

from experiments.configs import memorisation
from noisy_jax.data import normalization
from noisy_jax.experiment import comparison
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import registry
from noisy_jax.train import optim
from noisy_jax.train import views


def shrink(config, epochs=3):
  config.shared.dataset = "digits"
  config.shared.model.update({"name": "mlp", "kwargs": {"hidden_sizes": (32,)}})
  for run in config.runs.values():
    run.num_epochs = epochs
  return config


def test_memorisation_config(tmp_path, capsys):
  config = shrink(memorisation.get_config())
  out = comparison.run(config, str(tmp_path))
  printed = capsys.readouterr().out
  assert "ce_small_lr, seed 0, per epoch:" in printed
  for column in config.epoch_table:
    assert column in printed
  # 90% in the "true class included" convention changes 9/10 of those labels: 81% realised.
  assert out["mean_std"]["ce_small_lr"]["realised_noise_rate"]["mean"] == pytest.approx(0.81, abs=0.005)
  history = json.loads((tmp_path / "ce_small_lr" / "seed0" / "summary.json").read_text())["history"]
  assert len(history) == 3 and all("memorised_fraction" in r for r in history)
  assert (tmp_path / "comparison.png").stat().st_size > 5000
  assert (tmp_path / "ce_small_lr" / "seed0" / "curves.png").stat().st_size > 5000


def test_format_epoch_table():
  history = [
    {"stage": "stage1", "epoch": 1, "train_loss": 2.5, "test_accuracy": 0.5},
    {"stage": "stage1", "epoch": 2, "train_loss": 1.25},
  ]
  lines = comparison.format_epoch_table(history, ("train_loss", "test_accuracy")).splitlines()
  assert lines[0].split() == ["stage", "epoch", "train_loss", "test_accuracy"]
  assert lines[2].split() == ["stage1", "1", "2.5000", "50.00%"]
  assert lines[3].split() == ["stage1", "2", "1.2500", "-"]


def test_relabel_ablation_config(tmp_path, capsys):
  from experiments.configs import relabel_ablation

  config = shrink(relabel_ablation.get_config(), epochs=4)
  for run in config.runs.values():
    run.method.begin, run.method.history_length = 2, 2
  config.curve_table.every = 2
  out = comparison.run(config, str(tmp_path))
  printed = capsys.readouterr().out
  assert "label_recovery_overall, seed 0, per epoch:" in printed
  header = [l for l in printed.splitlines() if l.strip().startswith("epoch")][0].split()
  # ConfigDict keeps runs in sorted order.
  assert header == ["epoch", "hard_all", "hard_top36", "hard_top360", "hard_top4", "soft"]
  assert set(out["mean_std"]) == set(header[1:])
  # Top-K relabels at most K examples per update (3 updates: after epochs 2, 3, 4).
  for k in relabel_ablation.TOP_K:
    summary = json.loads((tmp_path / f"hard_top{k}" / "seed0" / "summary.json").read_text())
    assert "stage2" not in summary
    changed = summary["history"][-1]["relabelled_fraction"] * 1258  # digits: 1,258 training examples
    assert changed <= 3 * k + 1e-6
  assert (tmp_path / "comparison.png").stat().st_size > 5000


def test_format_curve_table():
  histories = {"a": [{"x": 0.1}, {"x": 0.2}, {"x": 0.3}], "b": [{"x": 0.5}, {}]}
  lines = comparison.format_curve_table(histories, "x", every=2).splitlines()
  assert [l.split() for l in lines[2:]] == [["2", "20.00%", "-"], ["3", "30.00%", "-"]]
  with pytest.raises(ValueError, match="every=0"):
    comparison.format_curve_table(histories, "x", every=0)


def test_log_end_sweep_config(tmp_path, capsys):
  """Every run of the grid is configured (noise x loss); one clean and one noisy run of the two losses train."""
  from experiments.configs import log_end_sweep

  config = shrink(log_end_sweep.get_config(), epochs=2)
  assert set(config.runs) == {f"{n}_{m}" for n in ("clean", "noisy60") for m in ("ce", "el50", "el75", "el100")}
  for name, run in config.runs.items():
    noise, loss = name.split("_")
    assert run.noise.to_dict() == log_end_sweep.NOISE[noise], name
    assert loss == "ce" or run.method.log_end == pytest.approx(int(loss[2:]) / 100), name
  trained = ("clean_el50", "noisy60_ce")
  out = comparison.run(config, str(tmp_path), only=trained)
  assert set(out["mean_std"]) == set(trained)
  assert "realised_noise_rate" not in out["mean_std"]["clean_el50"]  # noise type 'none': labels taken as given
  assert out["mean_std"]["noisy60_ce"]["realised_noise_rate"]["mean"] == pytest.approx(0.6, abs=0.005)
  for agg in out["mean_std"].values():
    assert agg["test_margin_correct"]["mean"] > 0  # margins of correctly classified examples are positive
  summary = json.loads((tmp_path / "clean_el50" / "seed0" / "summary.json").read_text())
  assert summary["method"] == "encouraging"
  assert "margin" in capsys.readouterr().out


def test_lr_noise_grid_config(tmp_path):
  """Every run of the 3 x 3 grid is configured with its learning rate and noise rate; the grid's two corners train."""
  from experiments.configs import lr_noise_grid

  config = shrink(lr_noise_grid.get_config(), epochs=2)
  assert len(config.runs) == 9
  for lr in lr_noise_grid.LEARNING_RATES:
    for rate in lr_noise_grid.NOISE_RATES:
      run = config.runs[lr_noise_grid.run_name(lr, rate)]
      assert (run.optimizer.learning_rate, run.noise.rate) == (lr, rate)
      run.method.begin, run.method.history_length = 1, 2  # relabels after both epochs
  corners = [lr_noise_grid.run_name(0.005, 0.3), lr_noise_grid.run_name(0.08, 0.7)]
  out = comparison.run(config, str(tmp_path), only=corners)
  assert set(out["mean_std"]) == set(corners)
  for name, rate in zip(corners, (0.3, 0.7)):
    agg = out["mean_std"][name]
    assert agg["realised_noise_rate"]["mean"] == pytest.approx(rate, abs=0.005)
    assert 0.0 <= agg["label_recovery_overall"]["mean"] <= 1.0
  per_run = json.loads((tmp_path / corners[1] / "seed0" / "summary.json").read_text())
  assert "stage2" not in per_run
  assert lr_noise_grid.run_name(0.005, 0.3) == "lr0005_noise30"


def test_pseudo_label_noise_config(tmp_path, capsys):
  from experiments.configs import pseudo_label_noise

  config = shrink(pseudo_label_noise.get_config(), epochs=2)
  config.runs = {"ce": config.runs.ce}
  out = comparison.run(config, str(tmp_path))
  agg = out["mean_std"]["ce"]
  assert 0.0 < agg["pseudo_label_accuracy"]["mean"] < 1.0
  # Exactly 40% took their pseudo-label; those that were right keep the clean label, so fewer than 40% flip.
  realised = agg["realised_noise_rate"]["mean"]
  assert realised == pytest.approx(0.4 * (1 - agg["pseudo_label_accuracy"]["mean"]), abs=0.05)
  assert "pseudo-labels:" in capsys.readouterr().out


def shrink_sweep(config, grid, *, seeds=(0,), epochs=2):
  """A sweep config (experiment.sweep) at a tiny size: digits, an MLP, `epochs` epochs, the given grid and seeds."""
  config.dataset = "digits"
  config.model.update({"name": "mlp", "kwargs": {"hidden_sizes": (32,)}})
  config.num_epochs = epochs
  config.sweep.grid = grid
  config.sweep.seeds = seeds
  return config


def test_q_sweep_config(tmp_path, capsys):
  from experiments.configs import q_sweep
  from noisy_jax.experiment import sweep
  from noisy_jax.experiment import sweep_grid

  full = q_sweep.get_config()
  assert len(sweep_grid.make_members(full)) == 90  # q 0.1..1.0 x 3 noise rates x 3 seeds
  assert full.sweep.grid[0] == ("method.loss_kwargs.q", tuple(round(0.1 * i, 1) for i in range(1, 11)))
  config = shrink_sweep(full, (("method.loss_kwargs.q", (0.1, 1.0)), ("noise.rate", (0.2, 0.6))), seeds=(0, 1))
  out = sweep.run_sweep(config, str(tmp_path))
  printed = capsys.readouterr().out
  assert "last test accuracy, mean ± std over seeds:" in printed and "best test accuracy" in printed
  header = [l for l in printed.splitlines() if l.strip().startswith("q \\ noise.rate")][0].split()
  assert header[-2:] == ["20%", "60%"]
  assert set(out["mean_std"]) == {f"q={q}, noise={r}%" for q in ("0.1", "1") for r in (20, 60)}
  for name, agg in out["mean_std"].items():
    assert agg["realised_noise_rate"]["mean"] == pytest.approx(0.2 if "20%" in name else 0.6, abs=0.005)
  assert len(json.loads((tmp_path / "summary.json").read_text())["members"]) == 8
  assert (tmp_path / "sweep.png").stat().st_size > 5000


def test_k_sweep_config(tmp_path, capsys):
  from experiments.configs import k_sweep
  from noisy_jax.experiment import sweep
  from noisy_jax.experiment import sweep_grid

  full = k_sweep.get_config()
  assert len(sweep_grid.make_members(full)) == 45  # 5 k x 3 noise rates x 3 seeds
  config = shrink_sweep(full, (("method.k", (0.3, 0.7)), ("noise.rate", (0.4,))), epochs=3)
  config.method.prune_start, config.method.prune_every = 2, 1
  out = sweep.run_sweep(config, str(tmp_path))
  printed = capsys.readouterr().out
  for key in ("pruned fraction", "detection precision", "detection recall"):
    assert f"{key}, mean ± std over seeds:" in printed
  low, high = out["mean_std"]["k=0.3, noise=40%"], out["mean_std"]["k=0.7, noise=40%"]
  assert 0 < low["pruned_fraction"]["mean"] < high["pruned_fraction"]["mean"] <= 1  # a higher k prunes more
  assert 0 <= high["detection_precision"]["mean"] <= 1
  assert (tmp_path / "sweep.png").stat().st_size > 5000


def test_baselines_config():
  """Every method of the project in one comparison: each run's settings build the method, optimiser and views the
  trainer builds from them, and the two settings differ where the config says they do."""
  from experiments.configs import baselines  # pylint: disable=import-outside-toplevel

  asym = baselines.get_config("asym40")
  sym = baselines.get_config("sym60")
  assert (asym.shared.noise.type, asym.shared.noise.rate, asym.shared.noise.dataset) == ("asymmetric", 0.4, "mnist")
  assert (sym.shared.noise.type, sym.shared.noise.rate, sym.shared.seeds) == ("symmetric", 0.6, (0, 1, 2))
  assert (sym.runs.elr.method.beta, asym.runs.elr.method.beta) == (0.7, 0.9)
  assert sym.runs.coteaching.method.forget_rate == 0.6 and asym.runs.coteaching.method.forget_rate == 0.4
  jocor = sym.runs.jocor
  assert jocor.method.forget_rate == 0.6 and jocor.optimizer.to_dict() == sym.runs.coteaching.optimizer.to_dict()
  assert asym.runs.jocor.method.forget_rate == 0.2  # the original halves it for asymmetric noise
  assert (sym.runs.dividemix.method.lambda_u, sym.runs.dividemix.method.warmup_penalty) == (25.0, False)
  assert (asym.runs.dividemix.method.lambda_u, asym.runs.dividemix.method.warmup_penalty) == (0.0, True)
  assert (sym.runs.elr_plus.method.beta, asym.runs.elr_plus.method.lam) == (0.7, 1.0)
  # DISC's CIFAR-10 settings: lamd_h 0.2 at 60%; momentum 0.95 at 60% and for asymmetric noise; 4 of 40 warm-up
  # epochs (its 20 of 200), lr x0.1 at 16 and 32 (its 80 and 160)
  assert (sym.runs.disc.method.lamd_h, asym.runs.disc.method.lamd_h) == (0.2, 1.0)
  assert (sym.runs.disc.method.momentum, asym.runs.disc.method.momentum, sym.runs.disc.method.start_epoch) == (
    0.95,
    0.95,
    4,
  )
  assert tuple(sym.runs.disc.optimizer.lr_boundaries) == (16, 32) and sym.runs.disc.optimizer.momentum == 0.0
  # DISC's own strong view (RandAugmentwogeo, CIFAR-10's m = 5, its CutoutAbs built in)
  disc_view = {"policy": "disc_randaugment", "num_ops": 2, "magnitude": 5, "cutout": 0}
  assert sym.runs.disc.augment.strong.to_dict() == disc_view
  with pytest.raises(ValueError, match="sym60"):
    baselines.get_config("sym50")
  # Every run's settings build what the trainer builds from them (the method, its optimiser, its strong view). The
  # runs themselves are the README tables' (experiments.regenerate_readme); each method trains in its tiny case
  # (tests/test_golden.py, test_checkpoint.py, test_multidevice.py).
  for config in (asym, sym):
    for name in config.runs:
      run = comparison.merged_run_config(config, name, seed=0)
      method = registry.make(
        run.method, num_classes=10, transition=np.eye(10), num_epochs=run.num_epochs, num_examples=3600
      )
      optim.make_optimizer(settings_lib.optimizer_settings(run.optimizer), 28, run.num_epochs)
      strong = views.make_strong_view(
        settings_lib.strong_augment_fields(run.get("augment")), normalize=normalization.identity(), weak=None
      )
      assert (strong is not None) == method.strong_view, name


def test_comparison_runs_only_the_runs_named(tmp_path):
  """`only` (experiments.train's --runs): those runs of the comparison and no other, in its summary too; a name the
  config lacks, or a config that is not a comparison, is refused naming what is allowed."""
  config = shrink(memorisation.get_config(), epochs=1)
  config.shared.seeds = (0,)
  first = next(iter(config.runs))
  config.runs.other = config.runs[first].to_dict()
  others = [name for name in config.runs if name != first]
  out = comparison.run(config, str(tmp_path), only=[first])
  assert set(out["mean_std"]) == {first} and others
  assert set(json.loads((tmp_path / "summary.json").read_text())["mean_std"]) == {first}
  assert sorted(os.listdir(tmp_path / first)) == ["seed0"] and not any((tmp_path / name).exists() for name in others)
  with pytest.raises(ValueError, match=f"no run\\(s\\) \\['jocor'\\] in the config; its runs: {first}, "):
    comparison.run(config, None, only=["jocor"])
  with pytest.raises(ValueError, match="this config has no `runs`"):
    comparison.run(memorisation.get_config().shared, None, only=[first])


def test_baselines_loss_family_config():
  """The robust-loss family's settings: the noise of sym60 / asym40, each row ce.py's run with its loss (the
  papers' CIFAR-10 values), ANL's rows with L1 in place of weight decay; every row builds."""
  from experiments import readme_tables  # pylint: disable=import-outside-toplevel
  from experiments.configs import alfs_anl_paper  # pylint: disable=import-outside-toplevel
  from experiments.configs import baselines  # pylint: disable=import-outside-toplevel
  from experiments.configs import ce  # pylint: disable=import-outside-toplevel
  from noisy_jax.methods import registry  # pylint: disable=import-outside-toplevel

  for setting, noise in (("losses_sym60", "sym60"), ("losses_asym40", "asym40")):
    config, reference = baselines.get_config(setting), baselines.get_config(noise)
    assert config.shared.noise.to_dict() == reference.shared.noise.to_dict()
    assert set(config.runs) == {row for row, _ in readme_tables.BASELINE_LOSS_RUNS}
    for name, run in config.runs.items():
      registry.make(run.method, num_classes=10)
      assert run.num_epochs == ce.get_run().num_epochs and run.optimizer.lr_boundaries == (20, 30), name
    assert config.runs.nce_agce.method.loss_kwargs.to_dict() == alfs_anl_paper.ALFS_ROWS["cifar10"]["nce_agce"][1]
    assert (config.runs.anl_ce.optimizer.weight_decay, config.runs.anl_ce.optimizer.l1) == (0.0, 5e-5)
    assert config.runs.ce.optimizer.to_dict() == ce.get_run().optimizer.to_dict()


def test_per_class_report_of_a_comparisons_exports(tmp_path):
  """experiments.per_class reads every seed's export of the named runs and gives each class's accuracy as a NumPy
  re-computation from the export's own predictions does; a class with no test example is NaN; a run without an
  export is named."""
  import numpy as np  # pylint: disable=import-outside-toplevel

  from experiments import per_class  # pylint: disable=import-outside-toplevel
  from experiments.configs import baselines  # pylint: disable=import-outside-toplevel
  from noisy_jax.experiment import export  # pylint: disable=import-outside-toplevel

  np.testing.assert_array_equal(per_class.per_class_accuracy([0, 1, 1, 2], [0, 0, 1, 2], 4), [0.5, 1, 1, np.nan])
  config = shrink(baselines.get_config("asym40"), epochs=1)
  config.runs = {"ce": config.runs.ce}
  config.shared.seeds = (0, 1)
  comparison.run(config, str(tmp_path))
  records = per_class.report(str(tmp_path), ["ce"])
  assert [r["label"] for r in records] == ["ce/seed0", "ce/seed1"]
  model = export.load_model(str(tmp_path / "ce" / "seed1"))
  x, y = per_class.test_split(model)
  predicted = np.argmax(np.asarray(model.predict(x)), -1)
  for k in range(10):
    np.testing.assert_allclose(records[1]["per_class"][k], np.mean(predicted[y == k] == k))
  assert records[1]["accuracy"] == pytest.approx(float(np.mean(predicted == y)))
  assert "ce/seed0" in per_class.format_report(records)
  with pytest.raises(FileNotFoundError, match="elr"):
    per_class.report(str(tmp_path), ["elr"])


def test_the_pes_semi_rows_take_one_pass_over_the_training_split_per_epoch():
  """baselines.py's PES-semi rows: int(N / 128) MixMatch steps an epoch for mnist5k's N training rows, as the
  original's int(50,000 / 128) on CIFAR; the table's 40 loop epochs are 3 warm-up + 37 MixMatch (the refine counts
  none)."""
  from experiments.configs import baselines  # pylint: disable=g-import-not-at-top
  from experiments.configs import ce  # pylint: disable=g-import-not-at-top
  from noisy_jax.experiment import inputs  # pylint: disable=g-import-not-at-top

  num_train = inputs.load_dataset(ce.get_config()).x_train.shape[0]
  assert num_train == baselines.MNIST5K_TRAIN_EXAMPLES
  run = baselines.pes_semi_run()
  assert run.method.steps_per_epoch == num_train // 128 == 28
  assert run.warmup.num_epochs + run.num_epochs == ce.get_run().num_epochs
