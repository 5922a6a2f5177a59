"""ELR+ trained by loop.fit (methods.elr_plus_train): a whole epoch against a step-by-step re-computation from the
pure blocks of noisy_jax.methods.elr (themselves tested against the original code's formulas in test_elr.py), a run on
the digits, and its refusals. 1 == N devices is in test_multidevice.py, stop/resume in test_checkpoint.py, golden values
in test_golden.py.
"""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from noisy_jax import models
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.experiment import export
from noisy_jax.experiment import inputs
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import sweep_grid
from noisy_jax.methods import elr
from noisy_jax.methods import elr_plus_train
from noisy_jax.methods import registry
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import optim
from noisy_jax.train import state as state_lib
from test_baseline_training import _close
from test_baseline_training import _digits_config

N, C, B = 44, 4, 8  # 5 full batches per network and epoch; 4 examples dropped


def _pair_and_table(seed=0):
  rng = np.random.default_rng(seed)
  model = models.get("mlp", num_classes=C, hidden_sizes=(8,), bn_axis_name=None)
  tx = optim.make_optimizer(
    settings_lib.optimizer_settings(ml_collections.ConfigDict({"learning_rate": 0.1, "momentum": 0.9})), 6, 4
  )
  pair = elr_plus_train.with_averages(
    state_lib.create_train_state(model, jax.random.PRNGKey(3), (5,), tx, num_networks=2)
  )
  # Averages that differ from the networks, confident enough that some probabilities fall below the clamp of ELR's
  # own update (1e-4; ELR+'s update has none), and targets with some history already.
  pair = pair.replace(
    method_state={
      elr_plus_train.AVERAGES: jax.tree.map(
        lambda p: 8.0 * p + 0.05 * jnp.sin(jnp.arange(p.size).reshape(p.shape)), elr_plus_train.averages(pair)
      )
    }
  )
  labels = rng.integers(0, C, N)
  old = jnp.asarray(rng.dirichlet(np.ones(C), (N, 2)) * 0.5, jnp.float32)
  table = label_table_lib.with_method_rows(label_table_lib.create(labels, C), {elr_plus_train.TARGETS: old})
  images = jnp.asarray(rng.normal(size=(N, 5)), jnp.float32)
  return model, pair, table, images, labels


def test_elr_plus_epoch_equals_a_recomputation_from_the_building_blocks():
  """Epoch 3 after one warm-up epoch: network 1's 5 steps, then network 2's, each step: the peer's average on the
  unmixed batch (train mode) updates the targets, mixup with the step's key, softCE (re-weighted) + ramped ELR term,
  SGD with momentum, then the average with the ramped decay. Both networks, both averages, the targets, the steps."""
  model, pair, table, images, labels = _pair_and_table()
  settings = elr_plus_train.ElrPlusSettings(
    beta=0.7,
    lam=3.0,
    mixup_alpha=1.0,
    coef_step=12,
    ema_alpha=0.99,
    ema_update=True,
    ema_step=15,
    warm_up=1,
    reweight_labels=True,
  )
  epoch_fn = elr_plus_train.make_epoch_fn(
    mesh_lib.make_mesh(1), settings=settings, batch_size=B, num_examples=N, warmup_epoch_fn=None
  )
  key = jax.random.PRNGKey(4)
  new_pair, new_table, metrics = epoch_fn(jax.tree.map(jnp.copy, pair), table, images, key, jnp.int32(3))

  def forward(params, stats, x):
    z, updates = model.apply({"params": params, "batch_stats": stats}, x, train=True, mutable=["batch_stats"])
    return z, updates["batch_stats"]

  nets = [jax.tree.map(lambda x, m=m: x[m], pair) for m in range(2)]
  targets = np.array(table.method_rows[elr_plus_train.TARGETS])
  losses = []
  for m in range(2):
    order = np.asarray(jax.random.permutation(jax.random.fold_in(key, m), N))[: 5 * B].reshape(5, B)
    own, peer = nets[m], nets[1 - m]
    for step in range(5):
      rows = order[step]
      x, y = images[rows], jax.nn.one_hot(labels[rows], C)
      z_peer, _ = forward(elr_plus_train.averages(peer), peer.batch_stats, x)
      t = elr.updated_rows(targets[rows, m], jax.nn.softmax(z_peer), beta=0.7, clamp=None)
      targets[rows, m] = np.asarray(t)
      step_key = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(key, elr_plus_train.AUGMENT_STREAM), m), step)
      x_mix, y_mix, perm, lam_mix = elr.mixup(x, y, jax.random.split(step_key)[1], 1.0)
      q = elr.mix_targets(t, perm, lam_mix)
      s = 1 * 5 + step + 1  # the ELR+ epochs' 1-based step: epoch 3 is the second after the warm-up
      coef = elr.sigmoid_ramp(s, 12)

      def loss(params, own=own, x_mix=x_mix, y_mix=y_mix, q=q, coef=coef):
        z, stats = forward(params, own.batch_stats, x_mix)
        return jnp.mean(elr.elr_plus_loss(z, y_mix, q, lam=3.0, coef=coef, reweight_labels=True)), stats

      (value, stats), grads = jax.value_and_grad(loss, has_aux=True)(own.params)
      losses.append(float(value))
      own = own.apply_gradients(grads=grads, batch_stats=stats)
      decay = 0.99 * elr.sigmoid_ramp(s + 1, 15)  # the original's update_ema_variables: global_step + 1
      averaged = jax.tree.map(lambda e, p, a=decay: a * e + (1 - a) * p, elr_plus_train.averages(own), own.params)
      own = own.replace(method_state={elr_plus_train.AVERAGES: averaged})
    nets[m] = own
  for m in range(2):
    got = jax.tree.map(lambda x, m=m: x[m], new_pair)
    _close(got.params, nets[m].params, tol=1e-5)
    _close(got.batch_stats, nets[m].batch_stats, tol=1e-5)
    _close(elr_plus_train.averages(got), elr_plus_train.averages(nets[m]), tol=1e-5)
  np.testing.assert_array_equal(np.asarray(new_pair.step), np.asarray(pair.step) + 5)
  np.testing.assert_allclose(np.asarray(new_table.method_rows[elr_plus_train.TARGETS]), targets, atol=1e-6)
  assert float(metrics["train_loss"]) == pytest.approx(np.mean(losses), rel=1e-5)
  # Something really moved: the averages, and the targets of the visited rows only.
  moved = np.abs(
    np.asarray(new_table.method_rows[elr_plus_train.TARGETS]) - np.asarray(table.method_rows[elr_plus_train.TARGETS])
  ).sum((1, 2))
  assert (moved > 1e-3).sum() >= N - 4  # each network drops 4 rows of its own order
  assert (
    float(
      jnp.max(
        jnp.abs(
          jax.tree.leaves(elr_plus_train.averages(new_pair))[0] - jax.tree.leaves(elr_plus_train.averages(pair))[0]
        )
      )
    )
    > 1e-3
  )


def test_elr_plus_averages_restart_from_the_warmed_up_networks():
  """With a warm-up, the first ELR+ epoch starts each average as a copy of its network; later epochs do not. A decay
  of exactly 1 (ema_alpha 1, no ramp) freezes the averages, so they show where they started."""
  _, pair, table, images, _ = _pair_and_table(seed=1)
  settings = elr_plus_train.ElrPlusSettings(warm_up=2, ema_step=0, ema_alpha=1.0)
  epoch_fn = elr_plus_train.make_epoch_fn(
    mesh_lib.make_mesh(1), settings=settings, batch_size=B, num_examples=N, warmup_epoch_fn=None
  )
  first, _, _ = epoch_fn(jax.tree.map(jnp.copy, pair), table, images, jax.random.PRNGKey(0), jnp.int32(3))
  _close(
    elr_plus_train.averages(first), pair.params, tol=0.0
  )  # the networks as the warm-up left them, not the old averages
  assert float(jnp.max(jnp.abs(jax.tree.leaves(first.params)[0] - jax.tree.leaves(pair.params)[0]))) > 1e-3
  second, _, _ = epoch_fn(jax.tree.map(jnp.copy, first), table, images, jax.random.PRNGKey(1), jnp.int32(4))
  _close(elr_plus_train.averages(second), pair.params, tol=0.0)  # no second restart


def test_elr_plus_run_on_the_digits_exports_its_pair():
  config = _digits_config({"name": "elr_plus", "warm_up": 1, "beta": 0.7, "lam": 3.0})
  config.batch_size = 32
  summary = runs.run_single(config, keep_arrays=True)
  assert summary["method"] == "elr_plus"
  assert summary["last_test_accuracy"] > 0.85  # 3 epochs on the digits, 30% noise
  targets = np.asarray(summary["arrays"]["label_table"].method_rows[elr_plus_train.TARGETS])
  n = targets.shape[0]
  assert targets.shape == (n, 2, 10)
  # Every row: the warm-up's visit plus up to 2 ELR+ visits (a partial batch is dropped per network and epoch), so
  # each row sums to 1 - beta^k, k in {1, 2, 3}; nearly all were visited every epoch.
  sums = targets.sum(-1)
  allowed = 1 - 0.7 ** np.arange(1, 4)
  assert np.all(np.min(np.abs(sums[..., None] - allowed), -1) < 1e-5)
  assert np.mean(np.abs(sums - allowed[2]) < 1e-5) > 0.95
  params = summary["arrays"]["stage1"]["params"]
  assert all(np.shape(x)[0] == 2 for x in jax.tree.leaves(params))


def test_elr_plus_export_predicts_as_the_run(tmp_path):
  config = _digits_config({"name": "elr_plus", "ema_step": 10})
  config.num_epochs = 1
  config.batch_size = 64
  summary = runs.run_single(config, str(tmp_path))
  loaded = export.load_model(str(tmp_path))
  assert loaded.info["variables"]["num_networks"] == 2
  dataset = inputs.load_dataset(config)
  accuracy = float(np.mean(np.argmax(loaded.predict(dataset.x_test), -1) == dataset.y_test))
  assert accuracy == pytest.approx(summary["last_test_accuracy"], abs=1e-6)
  assert summary["label_issues"]["file"] == "label_issues.csv"  # from the targets (their evidence column says so)
  assert "ELR+ targets" in (tmp_path / "label_issues.csv").read_text().splitlines()[1]


def test_bad_elr_plus_configs_are_refused_by_name():
  for field, value in (("warm_up", -1), ("ema_step", 2.5), ("ema_alpha", 1.5), ("beta", -0.1), ("mixup_alpha", -1.0)):
    with pytest.raises(ValueError, match=field):
      registry.make(ml_collections.ConfigDict({"name": "elr_plus", field: value}), num_classes=10)
  with pytest.raises(ValueError, match="Unknown field"):
    registry.make(ml_collections.ConfigDict({"name": "elr_plus", "lambda": 3.0}), num_classes=10)
  assert registry.make(ml_collections.ConfigDict({"name": "elr_plus"}), num_classes=10).num_networks == 2
  with pytest.raises(ValueError, match="larger than"):
    elr_plus_train.make_epoch_fn(
      mesh_lib.make_mesh(1),
      settings=elr_plus_train.ElrPlusSettings(),
      batch_size=64,
      num_examples=40,
      warmup_epoch_fn=None,
    )
  config = _digits_config({"name": "elr_plus"})
  config.sweep = ml_collections.ConfigDict({"grid": (), "seeds": (0, 1)})
  with pytest.raises(ValueError, match="comparison config"):
    sweep_grid.check_sweep(config)


def test_elr_plus_reweights_labels_by_the_originals_rule():
  """reweight_labels unset: on iff C = 100 (the original's `num_classes == 100`); set: as given."""
  assert elr_plus_train.ElrPlusSettings().resolved(100).reweight_labels is True
  assert elr_plus_train.ElrPlusSettings().resolved(10).reweight_labels is False
  assert elr_plus_train.ElrPlusSettings(reweight_labels=True).resolved(10).reweight_labels is True
  assert elr_plus_train.ElrPlusSettings(reweight_labels=False).resolved(100).reweight_labels is False


def test_label_issues_from_the_methods_own_state():
  """ELR+ and DivideMix record no prediction history: label_issues.csv comes from their state. ELR+: the mean over
  the two networks of the normalised targets (an unvisited row: uniform). DivideMix: the mean clean probability,
  flagged where neither division exceeds p_threshold, the given label suggested."""
  from noisy_jax.core import label_issues  # pylint: disable=import-outside-toplevel
  from noisy_jax.methods import dividemix_train  # pylint: disable=import-outside-toplevel

  given = np.array([0, 1, 2, 1])
  targets = np.zeros((4, 2, 3), np.float32)
  targets[0] = [[0.2, 0.1, 0.0], [0.3, 0.0, 0.0]]  # both networks agree with the given 0
  targets[1] = [[0.0, 0.0, 0.3], [0.1, 0.0, 0.2]]  # both say 2, not the given 1
  targets[2, 0] = [0.0, 0.0, 0.5]  # network 2 never visited row 2: uniform
  table = label_table_lib.with_method_rows(label_table_lib.create(given, 3), {elr_plus_train.TARGETS: targets})
  table = jax.device_get(table)
  elr_plus = registry.make(ml_collections.ConfigDict({"name": "elr_plus"}), num_classes=3)
  issues = label_issues.from_run(elr_plus, table)
  by_index = {int(r["index"]): r for r in issues.records}
  probs = np.array(
    [[(2 / 3 + 1) / 2, (1 / 3) / 2, 0.0], [1 / 6, 0.0, (1 + 2 / 3) / 2], [1 / 6, 1 / 6, 2 / 3], [1 / 3, 1 / 3, 1 / 3]]
  )
  for i in range(4):
    assert by_index[i]["label_quality"] == pytest.approx(probs[i, given[i]], rel=1e-6)
  assert [bool(by_index[i]["is_issue"]) for i in range(4)] == [False, True, False, False]
  assert by_index[1]["suggested_label"] == 2 and "ELR+ targets" in issues.evidence[0]
  clean = np.array([[0.9, 0.8], [0.2, 0.4], [0.6, 0.1], [0.3, 0.5]], np.float32)
  table = label_table_lib.with_method_rows(label_table_lib.create(given, 3), dividemix_train.init_rows(4, 1))
  table = jax.device_get(table.replace(method_rows={**table.method_rows, dividemix_train.CLEAN_PROB: clean}))
  dividemix = registry.make(ml_collections.ConfigDict({"name": "dividemix", "p_threshold": 0.5}), num_classes=3)
  issues = label_issues.from_run(dividemix, table)
  assert list(issues.records["index"]) == [1, 2, 3, 0]  # mean w: 0.3, 0.35, 0.4, 0.85
  np.testing.assert_allclose(issues.records["label_quality"], [0.3, 0.35, 0.4, 0.85], rtol=1e-6)
  assert list(issues.records["is_issue"]) == [True, False, True, False]  # max w <= 0.5: rows 1 and 3
  assert list(issues.records["suggested_label"]) == list(given[[1, 2, 3, 0]])
