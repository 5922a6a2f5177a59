"""Tests for train.optim: lr schedules (piecewise, PyTorch's per-epoch CosineAnnealingLR), gradient clipping, the L1
term (against PyTorch), and the default optimiser unchanged from the one train.py built before the module existed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest
import torch

from noisy_jax.experiment import settings as settings_lib
from noisy_jax.train import optim


def _config(**fields):
  return ml_collections.ConfigDict({"learning_rate": 0.01, "momentum": 0.9, "weight_decay": 1e-4, **fields})


def _params(seed=0):
  rng = np.random.default_rng(seed)
  return {
    "conv": {"kernel": jnp.asarray(rng.normal(size=(3, 3, 2, 4)), jnp.float32)},
    "dense": {"bias": jnp.asarray(rng.normal(size=(5,)), jnp.float32)},
  }


def _grads(seed, scale=1.0):
  rng = np.random.default_rng(100 + seed)
  return jax.tree.map(lambda p: jnp.asarray(scale * rng.normal(size=p.shape), jnp.float32), _params())


def _global_norm(tree):
  return float(np.sqrt(sum(np.sum(np.square(np.asarray(x, np.float64))) for x in jax.tree.leaves(tree))))


def test_train_keeps_the_names():
  assert optim.make_optimizer is optim.make_optimizer
  assert optim.learning_rate_schedule is optim.learning_rate_schedule


@pytest.mark.parametrize("period,lr_min", [(120, 0.0), (7, 0.0), (10, 1e-3)])
def test_cosine_matches_pytorch_per_epoch(period, lr_min):
  """lr_e = lr_min + (lr - lr_min)(1 + cos(pi e / T)) / 2 for 0-based epoch e, constant within an epoch; the same as
  torch's CosineAnnealingLR(T_max=T, eta_min=lr_min) stepped once after each epoch (APL's main.py)."""
  steps_per_epoch = 3
  config = _config(lr_schedule="cosine", lr_min=lr_min)
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(config), steps_per_epoch, num_epochs=period)
  epochs = np.arange(period)
  want = lr_min + (0.01 - lr_min) * (1 + np.cos(np.pi * epochs / period)) / 2
  weight = torch.nn.Parameter(torch.zeros(1))
  torch_opt = torch.optim.SGD([weight], lr=0.01)
  torch_sched = torch.optim.lr_scheduler.CosineAnnealingLR(torch_opt, T_max=period, eta_min=lr_min)
  torch_lrs = []
  for _ in epochs:
    torch_lrs.append(torch_opt.param_groups[0]["lr"])
    torch_opt.step()
    torch_sched.step()
  np.testing.assert_allclose(torch_lrs, want, rtol=1e-10, atol=1e-15)
  for e in epochs:
    for s in range(steps_per_epoch):
      assert float(schedule(e * steps_per_epoch + s)) == pytest.approx(want[e], rel=1e-6, abs=1e-9)
  assert float(schedule(0)) == pytest.approx(0.01)


def test_per_epoch_matches_pytorch_lambda_lr_with_the_peer_loss_plan():
  """lr_e = lr * lr_factors[e], constant within an epoch: torch's LambdaLR(lr_lambda=lambda e: factors[e]) stepped
  once after each epoch, with SGD lr 1 and the CIFAR-N replication's Peer Loss plan lr_plan(e) / (1 + alpha_e)."""
  from noisy_jax.core import peer_loss  # pylint: disable=g-import-not-at-top

  num_epochs, steps_per_epoch = 60, 3
  factors = [peer_loss.lr_factor(e) for e in range(num_epochs)]
  config = _config(learning_rate=1.0, lr_schedule="per_epoch", lr_factors=factors)
  schedule = optim.learning_rate_schedule(settings_lib.optimizer_settings(config), steps_per_epoch, num_epochs)
  weight = torch.nn.Parameter(torch.zeros(1))
  torch_opt = torch.optim.SGD([weight], lr=1.0)
  torch_sched = torch.optim.lr_scheduler.LambdaLR(torch_opt, lr_lambda=lambda e: factors[min(e, num_epochs - 1)])
  for e in range(num_epochs):
    want = torch_opt.param_groups[0]["lr"]
    for s in range(steps_per_epoch):
      assert float(schedule(e * steps_per_epoch + s)) == pytest.approx(want, rel=1e-6)
    torch_opt.step()
    torch_sched.step()
  assert float(schedule(0)) == pytest.approx(0.1) and float(schedule(59 * 3)) < 0.1 / 3


def test_cosine_period_defaults_to_num_epochs_and_cosine_epochs_overrides():
  a = optim.learning_rate_schedule(settings_lib.optimizer_settings(_config(lr_schedule="cosine")), 2, num_epochs=10)
  b = optim.learning_rate_schedule(
    settings_lib.optimizer_settings(_config(lr_schedule="cosine", cosine_epochs=10)), 2, num_epochs=99
  )
  c = optim.learning_rate_schedule(
    settings_lib.optimizer_settings(_config(lr_schedule="cosine", cosine_epochs=0)), 2, num_epochs=10
  )  # 0: default
  for step in range(0, 20, 3):
    assert float(a(step)) == float(b(step)) == float(c(step))
  assert float(a(10)) == pytest.approx(0.005)  # epoch 5 of 10: half way


def test_piecewise_schedule():
  schedule = optim.learning_rate_schedule(
    settings_lib.optimizer_settings(_config(lr_boundaries=(2, 4), lr_decay=0.5)), 3
  )
  got = [float(schedule(step)) for step in range(18)]
  want = [0.01] * 6 + [0.005] * 6 + [0.0025] * 6
  np.testing.assert_allclose(got, want, rtol=1e-6)


def _updates(tx, params, grads_seq):
  state = tx.init(params)
  out = []
  for grads in grads_seq:
    updates, state = tx.update(grads, state, params)
    params = optax.apply_updates(params, updates)
    out.append(updates)
  return out, params


def test_default_optimizer_unchanged():
  """The default config's optimiser: the chain train.py built before (weight decay -> SGD with the piecewise
  schedule), same state structure (checkpoints restore) and the same updates, across an lr boundary."""
  config = _config(lr_boundaries=(1,), lr_decay=0.1, nesterov=False)
  steps_per_epoch = 2
  old = optax.chain(
    optax.add_decayed_weights(1e-4),
    optax.sgd(optax.piecewise_constant_schedule(0.01, {2: 0.1}), momentum=0.9, nesterov=False),
  )
  new = optim.make_optimizer(settings_lib.optimizer_settings(config), steps_per_epoch)
  params = _params()
  assert jax.tree.structure(new.init(params)) == jax.tree.structure(old.init(params))
  grads_seq = [_grads(seed) for seed in range(5)]
  got, got_params = _updates(new, params, grads_seq)
  want, want_params = _updates(old, params, grads_seq)
  for g, w in zip(got, want):
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), g, w)
  jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), got_params, want_params)
  # Explicit defaults of the new fields build the same optimiser.
  explicit = optim.make_optimizer(
    settings_lib.optimizer_settings(
      _config(lr_boundaries=(1,), lr_schedule="piecewise", grad_clip_norm=0.0, lr_min=0.0)
    ),
    steps_per_epoch,
  )
  same, _ = _updates(explicit, params, grads_seq)
  for g, w in zip(same, want):
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), g, w)


@pytest.mark.parametrize("scale", [10.0, 0.1])
def test_clipping_matches_numpy(scale):
  """One SGD step (no momentum history yet) recomputed in NumPy: g <- g min(1, 5 / ||g||), then + wd w, then -lr."""
  params = _params()
  grads = _grads(7, scale)
  norm = _global_norm(grads)
  assert (norm > 5) == (scale > 1)
  tx = optim.make_optimizer(
    settings_lib.optimizer_settings(_config(grad_clip_norm=5.0, weight_decay=1e-2)), steps_per_epoch=10
  )
  (updates,), _ = _updates(tx, params, [grads])
  factor = min(1.0, 5.0 / norm)
  want = jax.tree.map(
    lambda g, p: -0.01 * (np.asarray(g, np.float64) * factor + 1e-2 * np.asarray(p, np.float64)), grads, params
  )
  jax.tree.map(lambda a, b: np.testing.assert_allclose(np.asarray(a), b, rtol=1e-5, atol=1e-9), updates, want)
  # The clipped gradient itself: norm exactly 5 when above, untouched below (weight decay 0 and lr 1 expose it).
  raw = optim.make_optimizer(
    settings_lib.optimizer_settings(
      ml_collections.ConfigDict({"learning_rate": 1.0, "momentum": 0.0, "grad_clip_norm": 5.0})
    ),
    steps_per_epoch=10,
  )
  (clipped,), _ = _updates(raw, params, [grads])
  assert _global_norm(clipped) == pytest.approx(min(norm, 5.0), rel=1e-6)
  if scale < 1:
    jax.tree.map(lambda a, b: np.testing.assert_allclose(-np.asarray(a), np.asarray(b), rtol=1e-6), clipped, grads)


def test_clipping_is_before_weight_decay():
  """Weight decay is added after clipping: a huge decay term is not clipped (as torch's clip_grad_norm_ then SGD)."""
  params = _params()
  zero = jax.tree.map(jnp.zeros_like, params)
  tx = optim.make_optimizer(
    settings_lib.optimizer_settings(
      ml_collections.ConfigDict({"learning_rate": 1.0, "momentum": 0.0, "weight_decay": 100.0, "grad_clip_norm": 5.0})
    ),
    steps_per_epoch=10,
  )
  (updates,), _ = _updates(tx, params, [zero])
  jax.tree.map(
    lambda u, p: np.testing.assert_allclose(np.asarray(u), -100.0 * np.asarray(p), rtol=1e-6), updates, params
  )
  assert _global_norm(updates) > 5.0


@pytest.mark.parametrize(
  "fields,match",
  [
    ({"lr_schedule": "cos"}, r"lr_schedule 'cos'; allowed: 'cosine', 'per_epoch', 'piecewise'"),
    ({"lr_schedule": "per_epoch"}, r"needs optimizer.lr_factors, a list of finite numbers >= 0, .* got \(\)"),
    ({"lr_schedule": "per_epoch", "lr_factors": [1.0] * 9}, r"has 9 factor\(s\) for a stage of 10 epochs"),
    ({"lr_schedule": "per_epoch", "lr_factors": [1.0] * 9 + [-0.1]}, r"got \(1.0, .*-0.1\)"),
    ({"lr_schedule": "per_epoch", "lr_factors": [1.0] * 9 + [float("nan")]}, r"finite numbers >= 0"),
    ({"lr_factors": [1.0] * 10}, r"lr_factors is read by lr_schedule='per_epoch' only \(lr_schedule='piecewise'\)"),
    ({"grad_clip_norm": -1.0}, r"grad_clip_norm=-1.0 is outside the allowed range \[0.0, inf\)"),
    ({"grad_clip_norm": float("inf")}, r"grad_clip_norm=inf is outside the allowed range"),
    ({"l1": -1e-5}, r"l1=-1e-05 is outside the allowed range \[0.0, inf\)"),
    ({"lr_schedule": "cosine", "lr_min": -0.1}, r"lr_min=-0.1 is outside the allowed range \[0.0, inf\]"),
    ({"lr_schedule": "cosine", "cosine_epochs": 2.5}, r"cosine_epochs=2.5 must be an integer >= 1"),
    ({"lr_schedule": "cosine", "cosine_epochs": -3}, r"cosine_epochs=-3 must be an integer >= 1"),
  ],
)
def test_bad_values(fields, match):
  with pytest.raises(ValueError, match=match):
    optim.make_optimizer(settings_lib.optimizer_settings(_config(**fields)), steps_per_epoch=3, num_epochs=10)


def test_cosine_needs_a_period():
  with pytest.raises(ValueError, match="cosine_epochs or the stage's num_epochs"):
    optim.make_optimizer(settings_lib.optimizer_settings(_config(lr_schedule="cosine")), steps_per_epoch=3)


def test_l1_matches_pytorch_loss_plus_l1_then_clip_then_sgd():
  """Active Negative Loss's trainer, two steps: (loss + delta * sum |p|).backward(), clip_grad_norm_(5), SGD with
  momentum 0.9 and weight decay; the loss's gradient is the fixed `_grads`. A zero parameter gets no L1 push
  (sign(0) = 0, as torch's abs)."""
  params = jax.tree.map(lambda p: p.at[..., 0].set(0.0), _params())
  grads_seq = [_grads(8, 3.0), _grads(9, 0.01)]
  tx = optim.make_optimizer(
    settings_lib.optimizer_settings(_config(l1=0.05, grad_clip_norm=5.0, weight_decay=1e-3)), steps_per_epoch=10
  )
  ours, _ = _updates(tx, params, grads_seq)
  leaves, treedef = jax.tree.flatten(params)
  weights = [torch.nn.Parameter(torch.tensor(np.asarray(w), dtype=torch.float64)) for w in leaves]
  torch_opt = torch.optim.SGD(weights, lr=0.01, momentum=0.9, weight_decay=1e-3)
  for step, grads in enumerate(grads_seq):
    torch_opt.zero_grad()
    loss_grads = [torch.tensor(np.asarray(g), dtype=torch.float64) for g in jax.tree.leaves(grads)]
    loss = sum(torch.sum(w * g) for w, g in zip(weights, loss_grads)) + 0.05 * sum(w.abs().sum() for w in weights)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(weights, 5.0)
    before = [w.detach().clone() for w in weights]
    torch_opt.step()
    want = jax.tree.unflatten(treedef, [(w.detach() - b).numpy() for w, b in zip(weights, before)])
    jax.tree.map(lambda a, b: np.testing.assert_allclose(np.asarray(a), b, rtol=2e-5, atol=1e-8), ours[step], want)


def test_l1_needs_the_parameters():
  tx = optim.make_optimizer(settings_lib.optimizer_settings(_config(l1=0.1)), steps_per_epoch=10)
  with pytest.raises(ValueError, match="needs the parameters"):
    tx.update(_grads(1), tx.init(_params()))


@pytest.mark.parametrize("weight_decay, lr_boundaries", [(0.0, ()), (1e-3, (1,))])
def test_adam_matches_pytorch_adam_with_its_weight_decay_and_schedule(weight_decay, lr_boundaries):
  """Optimizer 'adam': torch.optim.Adam(lr, betas (0.9, 0.999), eps 1e-8, weight_decay), coupled (wd w added to the
  gradient before the moments), stepped with the piecewise schedule's rate per epoch (5 steps an epoch)."""
  params = _params()
  grads_seq = [_grads(k, 1.0 + k) for k in range(8)]
  config = _config(name="adam", learning_rate=0.01, weight_decay=weight_decay, lr_boundaries=lr_boundaries)
  ours, _ = _updates(
    optim.make_optimizer(settings_lib.optimizer_settings(config), steps_per_epoch=5), params, grads_seq
  )
  leaves, treedef = jax.tree.flatten(params)
  weights = [torch.nn.Parameter(torch.tensor(np.asarray(w), dtype=torch.float64)) for w in leaves]
  torch_opt = torch.optim.Adam(weights, lr=0.01, weight_decay=weight_decay)
  for step, grads in enumerate(grads_seq):
    for group in torch_opt.param_groups:
      group["lr"] = 0.01 * 0.1 ** sum(1 for b in lr_boundaries if b <= step // 5)
    for w, g in zip(weights, jax.tree.leaves(grads)):
      w.grad = torch.tensor(np.asarray(g), dtype=torch.float64)
    before = [w.detach().clone() for w in weights]
    torch_opt.step()
    want = jax.tree.unflatten(treedef, [(w.detach() - b).numpy() for w, b in zip(weights, before)])
    jax.tree.map(lambda a, b: np.testing.assert_allclose(np.asarray(a), b, rtol=2e-5, atol=1e-9), ours[step], want)


def test_layer_decay_matches_pytorch_parameter_groups_on_a_vit():
  """optimizer.layer_decay d on a ViT (depth 2: embeddings 0, blocks 1-2, norm and head 3): three SGD steps with
  momentum and coupled weight decay equal PyTorch's SGD with one parameter group per layer at lr * d ** (3 - l), on
  the same gradients; d = 1 is the transformation without the field."""
  from noisy_jax import models  # pylint: disable=g-import-not-at-top

  model = models.get("vit_small_patch14_dinov2", num_classes=3, depth=2, image_size=28, dtype=jnp.float32)
  params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, 28, 28, 3)))["params"]
  layers = models.layer_index(model)
  assert {name: layers(name)[0] for name in params} == {
    "patch_embed": 0,
    "cls_token": 0,
    "pos_embed": 0,
    "blocks_0": 1,
    "blocks_1": 2,
    "norm": 3,
    "head": 3,
  }
  decay, lr = 0.5, 0.1
  config = ml_collections.ConfigDict({"learning_rate": lr, "momentum": 0.9, "weight_decay": 1e-3, "layer_decay": decay})
  tx = optim.make_optimizer(settings_lib.optimizer_settings(config), steps_per_epoch=10, layers=layers)
  flat = {"/".join(k): np.asarray(v, np.float64) for k, v in flax_flatten(params).items()}
  grads = [{name: np.random.default_rng(step).normal(size=v.shape) for name, v in flat.items()} for step in range(3)]
  state, current = tx.init(params), params
  for g in grads:
    tree = unflatten_like(params, g)
    updates, state = tx.update(tree, state, current)
    current = optax.apply_updates(current, updates)
  torch_params = {name: torch.tensor(v, requires_grad=True) for name, v in flat.items()}
  groups = {}
  for name, tensor in torch_params.items():
    groups.setdefault(layers(name.split("/")[0])[0], []).append(tensor)
  torch_opt = torch.optim.SGD(
    [{"params": p, "lr": lr * decay ** (3 - layer)} for layer, p in groups.items()], momentum=0.9, weight_decay=1e-3
  )
  for g in grads:
    for name, tensor in torch_params.items():
      tensor.grad = torch.tensor(g[name])
    torch_opt.step()
  ours = {"/".join(k): np.asarray(v) for k, v in flax_flatten(current).items()}
  for name, tensor in torch_params.items():
    np.testing.assert_allclose(ours[name], tensor.detach().numpy(), rtol=1e-5, atol=1e-7, err_msg=name)
  with pytest.raises(ValueError, match="numbers its layers"):
    optim.make_optimizer(settings_lib.optimizer_settings(config), steps_per_epoch=10, layers=None)
  with pytest.raises(ValueError, match="layer_decay"):
    optim.make_optimizer(settings_lib.optimizer_settings(dict(config, layer_decay=0.0)), steps_per_epoch=10)


def flax_flatten(tree) -> dict:
  import flax.traverse_util  # pylint: disable=g-import-not-at-top

  return flax.traverse_util.flatten_dict(tree)


def unflatten_like(params, flat: dict):
  import flax.traverse_util  # pylint: disable=g-import-not-at-top

  return flax.traverse_util.unflatten_dict({tuple(k.split("/")): jnp.asarray(v, jnp.float32) for k, v in flat.items()})
