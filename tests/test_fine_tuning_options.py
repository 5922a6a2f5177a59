"""Fine-tuning options: a backbone learning rate apart from the classifier's (`optimizer.backbone_lr_scale`), frozen
BatchNorm statistics in the ImageNet ResNets (`model.kwargs.freeze_batch_norm`), and clothing1m_paper.py's required
pretrained weights (`noisy_jax.experiment.pretrained.check_given`).

The scaled SGD is checked against two steps written out by hand in float64 (momentum buffer, coupled weight decay,
the classifier at lr and everything else at lr x scale), on one network and on a stacked pair updated as the
two-network step updates it; scale 1 builds the optimizer without the field, to the bit. Frozen statistics: a
train-mode pass computes the eval-mode logits and returns the running statistics unchanged, while BatchNorm's scale
and bias get gradients. The Clothing1M config stops a run without weights, names the way out, and runs with
`pretrained=none` on a miniature Clothing1M folder.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from experiments.configs import clothing1m_paper
from experiments.configs import webvision_paper
from noisy_jax import models
from noisy_jax.experiment import pretrained as run_pretrained
from noisy_jax.experiment import runs
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.train import optim
from noisy_jax.train import state as state_lib
import test_real_noisy_data  # the miniature Clothing1M release (its _clothing writer)

LR, MOMENTUM, WEIGHT_DECAY, SCALE = 0.1, 0.9, 0.01, 0.25


def _sgd_config(**fields) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(
    {"learning_rate": LR, "momentum": MOMENTUM, "weight_decay": WEIGHT_DECAY, "lr_boundaries": (), **fields}
  )


def _tiny_network():
  """An MLP 5 -> 4 -> 3 without BatchNorm: backbone 'Dense_0', classifier 'Dense_1'."""
  return models.get("mlp", num_classes=3, hidden_sizes=(4,), use_batch_norm=False, dtype=jnp.float32)


def _tiny_params():
  """The tiny network's parameters, drawn with NumPy (N(0, 0.5^2); no compiled random initialiser)."""
  model = _tiny_network()
  shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 5)), train=False))["params"]
  rng = np.random.default_rng(0)
  return jax.tree.map(lambda s: jnp.asarray(rng.normal(0.0, 0.5, s.shape), s.dtype), shapes)


def _random_like(tree, seed: int):
  leaves, treedef = jax.tree.flatten(tree)
  keys = jax.random.split(jax.random.key(seed), len(leaves))
  return jax.tree.unflatten(treedef, [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)])


def _hand_sgd(params, grads_per_step, scale_of):
  """PyTorch's SGD (dampening 0) with coupled weight decay, per-leaf lr LR * scale_of(path), in float64:
  m <- momentum m + g + wd w (m_1 = g_1 + wd w_0), w <- w - lr m."""
  w = jax.tree.map(lambda x: np.asarray(x, np.float64), params)
  m = None
  for grads in grads_per_step:
    d = jax.tree.map(lambda g, x: np.asarray(g, np.float64) + WEIGHT_DECAY * x, grads, w)
    m = d if m is None else jax.tree.map(lambda b, e: MOMENTUM * b + e, m, d)
    w = jax.tree_util.tree_map_with_path(lambda path, x, b: x - LR * scale_of(path) * b, w, m)
  return w


def _scale_of(path) -> float:
  return 1.0 if path[0].key == "Dense_1" else SCALE


def test_backbone_scale_two_sgd_steps_by_hand():
  params = _tiny_params()
  assert models.classifier_name(_tiny_network()) == "Dense_1" and set(params) == {"Dense_0", "Dense_1"}
  tx = optim.make_optimizer(
    settings_lib.optimizer_settings(_sgd_config(backbone_lr_scale=SCALE)), 10, classifier="Dense_1"
  )
  grads = [_random_like(params, 1), _random_like(params, 2)]
  opt_state, new = tx.init(params), params
  update = jax.jit(tx.update)
  for g in grads:
    updates, opt_state = update(g, opt_state, new)
    new = optax.apply_updates(new, updates)
  expected = _hand_sgd(params, grads, _scale_of)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7), new, expected)
  # One step: the backbone's update is SCALE times the one at scale 1, the classifier's is the same.
  first, _ = tx.update(grads[0], tx.init(params), params)
  plain = optim.make_optimizer(settings_lib.optimizer_settings(_sgd_config()), 10)
  unscaled, _ = plain.update(grads[0], plain.init(params), params)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, SCALE * b, rtol=1e-6), first["Dense_0"], unscaled["Dense_0"])
  jax.tree.map(np.testing.assert_array_equal, first["Dense_1"], unscaled["Dense_1"])


def test_scale_one_is_the_optimizer_without_the_field():
  """backbone_lr_scale 1 (or absent) builds today's chain: the same state structure (checkpoints) and updates."""
  params = _tiny_params()
  today = optax.chain(
    optax.add_decayed_weights(WEIGHT_DECAY), optax.sgd(optax.piecewise_constant_schedule(LR, {}), momentum=MOMENTUM)
  )
  grads = _random_like(params, 3)
  expected_updates, expected_state = today.update(grads, today.init(params), params)
  for config in (_sgd_config(), _sgd_config(backbone_lr_scale=1.0)):
    tx = optim.make_optimizer(settings_lib.optimizer_settings(config), 10)  # no classifier needed at scale 1
    state = tx.init(params)
    assert jax.tree.structure(state) == jax.tree.structure(today.init(params))
    updates, state = tx.update(grads, state, params)
    jax.tree.map(np.testing.assert_array_equal, updates, expected_updates)
    jax.tree.map(np.testing.assert_array_equal, state, expected_state)
  scaled = optim.make_optimizer(
    settings_lib.optimizer_settings(_sgd_config(backbone_lr_scale=SCALE)), 10, classifier="Dense_1"
  ).init(params)
  assert jax.tree.structure(scaled) != jax.tree.structure(today.init(params))
  # The lr schedule's step count still sits where optim.at_epoch finds it (DivideMix, ELR+).
  moved = optim.at_epoch(scaled, 7)
  counts = [
    x.count
    for x in jax.tree.leaves(moved, is_leaf=lambda n: isinstance(n, optax.ScaleByScheduleState))
    if isinstance(x, optax.ScaleByScheduleState)
  ]
  assert [int(c) for c in counts] == [7]


def test_backbone_scale_on_a_stacked_pair():
  """Two networks stacked on a leading axis (a two-network method's state), updated as train.step updates a pair:
  each network's step is the hand-computed one with its own gradient."""
  model = _tiny_network()
  tx = optim.make_optimizer(
    settings_lib.optimizer_settings(_sgd_config(backbone_lr_scale=SCALE)), 10, classifier=models.classifier_name(model)
  )
  pair = state_lib.create_train_state(model, jax.random.key(4), (5,), tx, num_networks=2)
  assert jax.tree.leaves(pair.params)[0].shape[0] == 2
  grads = _random_like(pair.params, 5)
  new = jax.jit(jax.vmap(lambda s, g: s.apply_gradients(grads=g)))(pair, grads)  # as train.step updates a pair
  for member in range(2):
    params, member_grads, updated = (
      jax.tree.map(lambda x, m=member: x[m], t) for t in (pair.params, grads, new.params)
    )
    expected = _hand_sgd(params, [member_grads], _scale_of)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7), updated, expected)


def test_classifier_of_every_model_is_its_last_dense_layer():
  for name in models.MODELS:
    model = models.get(name, num_classes=7)
    shapes = jax.eval_shape(lambda m=model: m.init(jax.random.key(0), jnp.zeros((1, 32, 32, 3)), train=False))
    head = models.classifier_name(model)
    assert head in shapes["params"], name
    assert shapes["params"][head]["kernel"].shape[-1] == 7, name
  cnn = models.get("small_cnn", num_classes=7, dense_size=5)
  shapes = jax.eval_shape(lambda: cnn.init(jax.random.key(0), jnp.zeros((1, 28, 28, 1)), train=False))
  assert models.classifier_name(cnn) == "Dense_1" and shapes["params"]["Dense_1"]["kernel"].shape == (5, 7)


def test_backbone_scale_errors():
  params = {"Dense_0": {"kernel": jnp.ones((2, 2))}, "Dense_1": {"kernel": jnp.ones((2, 3))}}
  with pytest.raises(ValueError, match="classifier is not known"):
    optim.make_optimizer(settings_lib.optimizer_settings(_sgd_config(backbone_lr_scale=0.1)), 10, classifier=None)
  with pytest.raises(ValueError, match="'head' is not a module of the network"):
    optim.make_optimizer(
      settings_lib.optimizer_settings(_sgd_config(backbone_lr_scale=0.1)), 10, classifier="head"
    ).init(params)
  with pytest.raises(ValueError, match="backbone_lr_scale"):
    optim.make_optimizer(settings_lib.optimizer_settings(_sgd_config(backbone_lr_scale=-1.0)), 10, classifier="Dense_1")
  assert models.classifier_name(object()) is None
  # scale 0: the classifier alone trains.
  tx = optim.make_optimizer(
    settings_lib.optimizer_settings(_sgd_config(backbone_lr_scale=0.0)), 10, classifier="Dense_1"
  )
  updates, _ = tx.update(params, tx.init(params), params)
  assert not np.any(updates["Dense_0"]["kernel"]) and np.all(updates["Dense_1"]["kernel"] < 0)


# ---------------------------------------------------------------------------------------------------------------
# Frozen BatchNorm statistics


def _one_stage(name: str, kind: str, **fields):
  """The ImageNet ResNet `name` cut to one stage of one block of width 4, BatchNorm of `kind`, 3 classes."""
  return models.get(name, num_classes=3, widths=(4,), blocks_per_stage=(1,), batch_norm=kind, **fields)


def _variables(model, x, seed: int = 0) -> dict:
  """Variables of `model` for inputs like `x`, drawn with NumPy (no compiled random initialisers): parameters
  N(0, 0.5^2), BatchNorm scales U(0.5, 1.5), running means N(0, 0.3^2) and variances U(0.5, 1.5), not a batch's own."""
  shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), x[:1], train=False))
  rng = np.random.default_rng(seed)

  def draw(path, shape):
    leaf = path[-1].key
    if leaf in ("scale", "var"):
      return jnp.asarray(rng.uniform(0.5, 1.5, shape.shape), shape.dtype)
    return jnp.asarray(rng.normal(0.0, 0.3 if leaf == "mean" else 0.5, shape.shape), shape.dtype)

  return jax.tree_util.tree_map_with_path(draw, shapes)


def test_frozen_batch_norm_trains_scale_and_bias_on_running_statistics():
  """ResNet-50's Bottleneck with the fused BatchNorm; torchvision ResNet-18's BasicBlock with flax's."""
  x = jax.random.normal(jax.random.key(0), (4, 8, 8, 3))
  for name, kind in (("resnet50", "fused"), ("imagenet_resnet18", "flax")):
    frozen = _one_stage(name, kind, freeze_batch_norm=True)
    variables = _variables(frozen, x)
    stats = variables["batch_stats"]
    evaluated = frozen.apply(variables, x, train=False)
    trained, updated = frozen.apply(variables, x, train=True, mutable=["batch_stats"])
    np.testing.assert_array_equal(trained, evaluated)
    jax.tree.map(np.testing.assert_array_equal, updated["batch_stats"], stats)
    if kind != "fused":
      continue
    unfrozen = _one_stage(name, kind)  # the default: batch statistics, running averages updated
    assert unfrozen.freeze_batch_norm is False
    batch_trained, batch_updated = unfrozen.apply(variables, x, train=True, mutable=["batch_stats"])
    assert not np.allclose(batch_trained, evaluated)
    assert not np.allclose(batch_updated["batch_stats"]["stem_bn"]["mean"], stats["stem_bn"]["mean"])

    def loss(params):
      logits, _ = frozen.apply({"params": params, "batch_stats": stats}, x, train=True, mutable=["batch_stats"])
      return jnp.sum(jax.nn.log_softmax(logits)[:, 0])

    grads = jax.jit(jax.grad(loss))(variables["params"])
    block = grads["stage1_block1"]
    for bn in (grads["stem_bn"], block["bn1"], block["bn3"], block["shortcut_bn"]):
      assert np.any(np.asarray(bn["scale"]) != 0) and np.any(np.asarray(bn["bias"]) != 0)


# ---------------------------------------------------------------------------------------------------------------
# clothing1m_paper.py: pretrained weights required


def test_clothing1m_config_requires_weights_and_says_how_to_go_on():
  config = clothing1m_paper.get_config("ce")
  assert config.model.pretrained == run_pretrained.REQUIRED == clothing1m_paper.PRETRAINED
  with pytest.raises(ValueError, match="fine-tunes pretrained weights") as error:
    runs.run_single(config)  # stops before the (unset) data folder is read
  message = str(error.value)
  assert "IMAGENET1K_V1" in message and "--config.model.pretrained=PATH" in message
  assert "--config.model.pretrained=none" in message
  # WebVision's recipes train from scratch; every other config defaults to 'none': the check lets them through.
  assert webvision_paper.get_config().model.pretrained == "none"
  for value in ("none", "/w/resnet50.pth"):
    config.model.pretrained = value
    run_pretrained.check_given(config)


def test_clothing1m_config_runs_from_scratch_on_purpose(tmp_path):
  """`pretrained=none` on a miniature Clothing1M folder (8 noisy training images, 14 classes), ResNet-50 cut to one
  Bottleneck of width 4, both fine-tuning options on: one epoch trains."""
  test_real_noisy_data._clothing(tmp_path)  # pylint: disable=protected-access
  config = clothing1m_paper.get_config("ce")
  config.model.pretrained = "none"
  config.model.kwargs = {"widths": (4,), "blocks_per_stage": (1,), "freeze_batch_norm": True}
  config.optimizer.backbone_lr_scale = 0.1
  config.dataset_kwargs.root = str(tmp_path)
  config.dataset_kwargs.image_size = 16
  config.update({"num_epochs": 1, "batch_size": 4, "num_devices": 1, "checkpoint_every": 0})
  config.input, config.input_workers = "resident", 0
  summary = runs.run_single(config)
  assert [r["stage"] for r in summary["history"]] == ["stage1"]
  assert np.isfinite(summary["history"][0]["train_loss"]) and 0.0 <= summary["last_test_accuracy"] <= 1.0


def test_a_sweep_of_the_clothing1m_config_stops_with_the_same_message():
  """The check lives where the field is read (experiment.pretrained.initializer), so every path that starts
  networks, a sweep's included, stops with the same message rather than a missing file named 'required'."""
  config = clothing1m_paper.get_config("ce")
  with pytest.raises(ValueError, match="fine-tunes pretrained weights"):
    run_pretrained.initializer(config)
