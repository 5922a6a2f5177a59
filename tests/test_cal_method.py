"""CAL as a method (noisy_jax.methods.cal): one whole epoch of each stage against a plain JAX re-computation of its
steps (the warm-up's loss and sieve writes; the CAL stage's loss from the code's dense [C, C, N] T_mat, its loss means
after the epoch, the code's learning-rate division), the stages, the registry entry and the settings' checks."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

import method_program_harness as harness
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.methods import cal
from noisy_jax.methods import registry
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import mesh as mesh_lib

NUM_EXAMPLES, NUM_CLASSES, BATCH = 44, 4, 8  # 6 steps, the last with 4 padding rows
RUN_EPOCHS = 60


def _data(seed=4):
  images, given, rng = harness.tiny_data(seed, NUM_EXAMPLES, NUM_CLASSES)
  distilled = np.where(rng.random(NUM_EXAMPLES) < 0.6, given, rng.integers(0, NUM_CLASSES, NUM_EXAMPLES))
  weights = (rng.random(NUM_EXAMPLES) > 0.15).astype(np.float32)
  loss_mean = rng.random((NUM_CLASSES, NUM_CLASSES)).astype(np.float32)
  return images, given, distilled, weights, loss_mean


def _run_epoch(settings, phase, images, table, epoch, loss_mean=None):
  model = harness.tiny_model(NUM_CLASSES)
  # No lr_boundaries in the optimizer's config (its default).
  state = harness.train_state(model, num_examples=NUM_EXAMPLES, batch=BATCH, run_epochs=RUN_EPOCHS, lr_boundaries=None)
  built = cal.method(settings, phase=phase, num_classes=NUM_CLASSES)
  state = built.program.init_state(state)
  if loss_mean is not None:
    state = state.replace(method_state={cal.LOSS_MEAN: jnp.asarray(loss_mean)})
  epoch_fn = cal.make_epoch_fn(
    mesh_lib.make_mesh(1),
    settings=settings,
    phase=phase,
    batch_size=BATCH,
    num_examples=NUM_EXAMPLES,
    augment=harness.augment,
  )
  return harness.run_epoch(epoch_fn, state, table, images, epoch)


def _dense_t(distilled, weights, noisy):
  """DS:199-205 + EX:119-128 in NumPy: T [C, C, N]."""
  out = np.zeros((NUM_CLASSES, NUM_CLASSES, NUM_EXAMPLES), np.float32)
  for i in range(NUM_CLASSES):
    weight_sum = max(np.sum(weights * (distilled == i)), 1.0)
    for j in range(NUM_CLASSES):
      raw = ((distilled == i) & (noisy == j) & (weights > 0)).astype(np.float32)
      out[i, j] = (raw - raw.sum() / weight_sum) * weights * (distilled == i)
  return out


def _reference_loss(model, stats, x, y, valid, alpha, prior, cal_args=None):
  """One step in plain JAX: the code's PeerLossRegCE (eps 1e-8 / 1e-5), minus PL:66-96's dense covariance term."""
  apply = lambda p, s, v: model.apply({"params": p, "batch_stats": s}, v, train=True, mutable=["batch_stats"])

  def loss(params):
    z, upd = apply(params, stats, x)
    p = jax.nn.softmax(z)
    ce = -jnp.log(jnp.take_along_axis(p, y[:, None], axis=1)[:, 0] + 1e-8)
    peer = jnp.sum(prior * -jnp.log(p + 1e-5), axis=1)
    value = jnp.sum(valid * (ce - alpha * peer)) / jnp.sum(valid)
    record = jnp.zeros((NUM_CLASSES, NUM_CLASSES))
    if cal_args is not None:
      t_mat, p_distill, loss_mean = cal_args  # t_mat [C, C, B] (zero on padding rows)
      log_out = -jnp.log(p + 1e-5)
      ind = jnp.repeat(jnp.sum(t_mat > 0, axis=1)[:, None, :], NUM_CLASSES, axis=1).astype(jnp.float32)
      loss_all = jnp.repeat(log_out.T[None], NUM_CLASSES, axis=0)
      norm = (loss_all - loss_mean[:, :, None]) * ind
      record = jnp.sum(ind * loss_all, axis=2)
      sizes = jnp.sum(ind, axis=2)
      sizes = jnp.where(sizes == 0, 1.0, sizes)
      value = value - jnp.sum(jnp.sum(jnp.sum(t_mat * norm, axis=2) / sizes, axis=1) * p_distill)
    return value, (upd["batch_stats"], z, jax.lax.stop_gradient(record))

  return loss


def _sieve(z, y, threshold):
  p = jax.nn.softmax(z)
  l = -jnp.log(p + 1e-8)
  score = jnp.take_along_axis(l, y[:, None], axis=1)[:, 0] - jnp.mean(l, axis=1)
  label = jnp.where(score < threshold, y, jnp.argmax(z, axis=1))
  return np.asarray(jax.nn.one_hot(label, NUM_CLASSES)) * np.asarray(score != threshold)[:, None]


def _reference_epoch(phase, settings, start, key, images, given, epoch, distilled=None, weights=None, loss_mean=None):
  alpha = cal.epoch_alpha(settings, phase, epoch)
  counts = np.bincount(given, minlength=NUM_CLASSES) / NUM_EXAMPLES
  prior = np.sqrt(counts) / np.sqrt(counts).sum() if phase == "warmup" else counts
  prior = prior * settings.prior_scale
  model = harness.tiny_model(NUM_CLASSES, bn_axis_name=None)
  params, stats = harness.start_params_and_stats(start)
  sgd, opt_state = harness.reference_sgd(0.1, params)
  order, valid = harness.epoch_order(key, NUM_EXAMPLES, BATCH)
  soft = np.eye(NUM_CLASSES)[given]
  if phase == "cal":
    t_all = _dense_t(distilled, weights, given)
    p_distill = np.array([np.sum((distilled == i) & (weights == 1)) for i in range(NUM_CLASSES)], np.float32)
    p_distill = p_distill / p_distill.sum()
    total_record = np.zeros((NUM_CLASSES, NUM_CLASSES))
  losses, counts_ = [], []
  for step in range(order.shape[0]):
    rows = order[step]
    x = harness.step_view(key, step, images, rows)
    cal_args = None
    if phase == "cal":
      cal_args = (jnp.asarray(t_all[:, :, rows] * valid[step]), jnp.asarray(p_distill), jnp.asarray(loss_mean))
    loss = _reference_loss(model, stats, x, jnp.asarray(given[rows]), valid[step], alpha, prior, cal_args)
    lr_divided = (lambda u: u / (1.0 + alpha)) if settings.lr_alpha_division else None
    (value, (stats, z, record)), params, opt_state = harness.reference_step(sgd, opt_state, params, loss, lr_divided)
    losses.append(float(value) * valid[step].sum())
    counts_.append(valid[step].sum())
    if phase == "warmup":
      keep = valid[step] > 0
      soft[rows[keep]] = _sieve(z, jnp.asarray(given[rows]), settings.sieve_threshold)[keep]
    else:
      total_record += np.asarray(record)
  out = {"params": params, "stats": stats, "loss": sum(losses) / sum(counts_), "soft": soft, "alpha": alpha}
  if phase == "cal":
    ind_count = np.sum(np.sum(t_all > 0, axis=2), axis=1)  # EX:187
    out["loss_mean"] = total_record / np.maximum(ind_count, 1.0)[:, None]
  return out


def _assert_same(state, want):
  harness.assert_same_variables(state, want["params"], want["stats"], rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("threshold", [-8.0, -0.05])
def test_a_warmup_epoch_is_the_steps_and_sieve_recomputed_plainly(threshold):
  images, given, *_ = _data()
  settings = cal.CalSettings(sieve_threshold=threshold)
  table = label_table_lib.create(jnp.asarray(given), NUM_CLASSES)
  start, key, (state, table, metrics) = _run_epoch(settings, "warmup", images, table, 25)
  want = _reference_epoch("warmup", settings, start, key, images, given, 25)
  assert want["alpha"] > 0 and float(metrics["cal_alpha"]) == want["alpha"]
  _assert_same(state, want)
  np.testing.assert_allclose(float(metrics["train_loss"]), want["loss"], rtol=1e-5)
  np.testing.assert_array_equal(np.asarray(table.soft_labels), want["soft"])
  if threshold == -0.05:  # both branches taken
    kept = np.argmax(want["soft"], 1) == given
    assert kept.any() and not kept.all()


@pytest.mark.parametrize("lr_alpha_division", [False, True])
def test_a_cal_epoch_is_the_codes_dense_loss_recomputed_plainly(lr_alpha_division):
  images, given, distilled, weights, loss_mean = _data()
  distilled[distilled == 2] = 1  # class 2's only distilled rows: one noisy label, T_hat 1, indicator 0
  distilled[:2], given[:2], weights[:2] = 2, 3, 1.0
  settings = cal.CalSettings(lr_alpha_division=lr_alpha_division, prior_scale=2.0)
  soft = np.eye(NUM_CLASSES, dtype=np.float32)[distilled] * weights[:, None]
  table = label_table_lib.create(jnp.asarray(given), NUM_CLASSES).replace(soft_labels=jnp.asarray(soft))
  start, key, (state, table, metrics) = _run_epoch(settings, "cal", images, table, 45, loss_mean)
  want = _reference_epoch("cal", settings, start, key, images, given, 45, distilled, weights, loss_mean)
  assert want["alpha"] == pytest.approx(1.0)
  _assert_same(state, want)
  np.testing.assert_allclose(float(metrics["train_loss"]), want["loss"], rtol=2e-5)
  np.testing.assert_allclose(np.asarray(state.method_state[cal.LOSS_MEAN]), want["loss_mean"], rtol=2e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(table.soft_labels), soft)  # the CAL stage leaves its table alone


def test_the_stages_and_registry_entry():
  assert registry.get("cal") is cal.SPEC and {"cal", "cal_code_lr"} <= set(registry.tiny_cases())
  stages = cal.stages(ml_collections.ConfigDict({"name": "cal"}))
  assert [s.name for s in stages] == ["warmup", "stage1"]
  assert stages[0].config_section == "warmup" and stages[1].table == "previous" and stages[1].network == "fresh"
  spec_lib.check_stages(stages, "cal")
  built = registry.build(ml_collections.ConfigDict({"name": "cal", "prior_scale": 10.0}), spec_lib.Context(3))
  assert built.name == "cal" and built.program.own
  assert stages[0].build(ml_collections.ConfigDict({"name": "cal"}), spec_lib.Context(3)).name == "cal_warmup"


def test_the_epochs_alpha_is_seg_alpha_of_each_stage():
  settings = cal.CalSettings()
  assert [cal.epoch_alpha(settings, "cal", e) for e in (1, 11, 12)] == [0.0, 0.0, pytest.approx(1 / 30)]
  assert cal.epoch_alpha(settings, "warmup", 41) == pytest.approx(2.0)
  assert cal.epoch_alpha(settings, "cal", 100) == pytest.approx(1.0)


@pytest.mark.parametrize(
  "field, value, message",
  [
    ("alpha_list", (0.0, 1.0), r"alpha_list / milestones: .*one length"),
    ("warmup_milestones", (40, 10, 80), r"warmup_alpha_list / warmup_milestones: milestones=\[40, 10, 80\]"),
    ("alpha_list", (0.0, -1.0, 1.0), r"-1\.0"),
    ("sieve_threshold", float("nan"), r"nan"),
    ("log_epsilons", "approximate", r"'approximate'"),
    ("prior_scale", 0.0, r"prior_scale.*0\.0"),
    ("lr_alpha_division", "yes", r"lr_alpha_division='yes'"),
  ],
)
def test_bad_settings_raise_naming_the_value(field, value, message):
  with pytest.raises(ValueError, match=message):
    cal.CalSettings(**{field: value})


def test_a_config_typo_and_refused_inputs():
  with pytest.raises(ValueError, match="Unknown field"):
    registry.build(ml_collections.ConfigDict({"name": "cal", "alpha": 1.0}), spec_lib.Context(num_classes=3))
  mesh = mesh_lib.make_mesh(1)
  with pytest.raises(ValueError, match="streamed"):
    cal.make_epoch_fn(mesh, settings=cal.CalSettings(), phase="cal", batch_size=8, num_examples=8, source=object())
  with pytest.raises(ValueError, match="'both'"):
    cal.make_epoch_fn(mesh, settings=cal.CalSettings(), phase="both", batch_size=8, num_examples=8)
