"""PES's pure pieces (noisy_jax.core.pes) against float64 transcriptions of the original code (tmllab/PES@5466238:
PES_cs.py, PES_semi.py, common/tools.py, networks/ResNet.py), and PES-semi's MixMatch step composed from DivideMix's
pieces (noisy_jax.methods.dividemix) against a transcription of PES_semi.py's MixMatch_train."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from noisy_jax import models
from noisy_jax.core import losses
from noisy_jax.core import pes
from noisy_jax.methods import dividemix
from noisy_jax.methods import pes as pes_method
from noisy_jax.train import optim

# ------------------------------------------------------------------------------------------------------------
# Transcriptions of the original (torch float64 / NumPy float64), kept close to its lines.


def torch_predict_softmax(logits1, logits2):
  """common/tools.py:177-191 on one batch: (softmax(z1) + softmax(z2)) / 2."""
  z1, z2 = torch.tensor(logits1, dtype=torch.float64), torch.tensor(logits2, dtype=torch.float64)
  return (F.softmax(z1, dim=1) + F.softmax(z2, dim=1)) / 2


def torch_splite_confident(outs, noisy_targets):
  """PES_semi.py:145-164 (PES_cs.py:67-79 is its first half)."""
  _, preds = torch.max(outs.data, 1)
  confident, unconfident = [], []
  for i in range(0, len(noisy_targets)):
    if preds[i] == noisy_targets[i]:
      confident.append(i)
    else:
      unconfident.append(i)
  return confident, unconfident


def np_class_weights(noisy_targets, confident, num_class, clip):
  """PES_cs.py:91-97 (clip False) and PES_semi.py:183-192 (clip True)."""
  train_nums = np.zeros(num_class, dtype=int)
  for item in noisy_targets[confident]:
    train_nums[item] += 1
  with np.errstate(divide="ignore"):
    cw = np.mean(train_nums[train_nums != 0]) / train_nums
    cw[cw == np.inf] = 0
    if clip:
      cw[cw > 3] = 3
  return cw


def torch_semi_batch_sizes(n_confident, n_unconfident, batch_size):
  """PES_semi.py:176-177."""
  uncon_batch = (
    int(batch_size / 2)
    if n_unconfident > n_confident
    else int(n_unconfident / (n_confident + n_unconfident) * batch_size)
  )
  return batch_size - uncon_batch, uncon_batch


def orig_alphas(num_epochs, alpha=4.0):
  """PES_semi.py:72-73, the mutation of args.alpha over a run."""
  out = []
  for epoch in range(num_epochs):
    if epoch >= num_epochs / 2:
      alpha = 0.75
    out.append(alpha)
  return out


def orig_linear_rampup(current, lambda_u, warm_up=20, rampup_length=16):
  """PES_semi.py:64-66."""
  current = np.clip((current - warm_up) / rampup_length, 0.0, 1.0)
  return lambda_u * float(current)


def orig_renewed(last_num_layers):
  """networks/ResNet.py:168-185: the attributes `renew_layers` replaces."""
  out = []
  if last_num_layers >= 3:
    out.append("layer2")
  if last_num_layers >= 2:
    out.append("layer3")
  if last_num_layers >= 1:
    out.append("layer4")
  return out + ["linear"]


def rng(seed):
  return np.random.default_rng(seed)


# ------------------------------------------------------------------------------------------------------------
# Selection and class weights.


@pytest.mark.parametrize("num_classes", [10, 100])
def test_selection_equals_the_original_on_two_views(num_classes):
  r = rng(num_classes)
  n = 500
  z1, z2 = 3 * r.normal(size=(n, num_classes)), 3 * r.normal(size=(n, num_classes))
  noisy = r.integers(0, num_classes, n)
  noisy[:200] = np.argmax(z1[:200] + z2[:200], 1)  # plenty of agreement
  outs = torch_predict_softmax(z1, z2)
  confident, unconfident = torch_splite_confident(outs, torch.tensor(noisy))
  with jax.enable_x64(True):
    p = pes.mean_view_probabilities(jnp.stack([z1, z2]))
    np.testing.assert_allclose(p, outs.numpy(), rtol=1e-14, atol=1e-16)
    mask = np.asarray(pes.agreement_selection(p, noisy))
  np.testing.assert_array_equal(np.flatnonzero(mask), confident)
  np.testing.assert_array_equal(np.flatnonzero(~mask), unconfident)
  # float32, one-hot label rows and a padding mask.
  mask32 = pes.agreement_selection(pes.mean_view_probabilities(np.stack([z1, z2]).astype(np.float32)), noisy)
  assert np.mean(np.asarray(mask32) != mask) < 0.01
  onehot = jax.nn.one_hot(noisy, num_classes)
  np.testing.assert_array_equal(pes.agreement_selection(outs.numpy(), onehot), mask)
  where = np.arange(n) < 300
  np.testing.assert_array_equal(pes.agreement_selection(outs.numpy(), noisy, where=where), mask & where)


@pytest.mark.parametrize("clip", [False, True], ids=["PES_cs", "PES_semi"])
@pytest.mark.parametrize("num_classes", [10, 100])
def test_class_weights_equal_the_original(clip, num_classes):
  r = rng(7 + num_classes)
  n = 4000
  prior = r.dirichlet(np.full(num_classes, 0.3))  # imbalanced, some classes absent at C = 100
  noisy = r.choice(num_classes, n, p=prior)
  selected = r.random(n) < 0.6
  want = np_class_weights(noisy, np.flatnonzero(selected), num_classes, clip)
  assert clip or want.max() > 3  # the clip matters
  max_weight = pes.SEMI_CLASS_WEIGHT_CLIP if clip else None
  with jax.enable_x64(True):
    got = pes.class_weights(noisy, selected, num_classes=num_classes, max_weight=max_weight)
    assert got.dtype == jnp.float64
    np.testing.assert_array_equal(got, want)  # the same operations in float64: exact
  got32 = jax.jit(lambda y, s: pes.class_weights(y, s, num_classes=num_classes, max_weight=max_weight))(noisy, selected)
  np.testing.assert_allclose(got32, want.astype(np.float32), rtol=2e-7)


def test_class_weights_invariants():
  c = 6
  labels = np.array([0, 0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 3])
  selected = np.ones_like(labels, bool)
  selected[-1] = False
  w = np.asarray(pes.class_weights(labels, selected, num_classes=c))
  n = np.asarray(pes.class_counts(labels, selected, num_classes=c))
  np.testing.assert_array_equal(n, [4, 2, 1, 4, 0, 0])
  present = n > 0
  np.testing.assert_allclose(w[present] * n[present], np.mean(n[present]), rtol=1e-6)  # w_c n_c = mean count
  np.testing.assert_array_equal(w[~present], 0)
  assert np.max(np.asarray(pes.class_weights(labels, selected, num_classes=c, max_weight=1.5))) == 1.5
  balanced = np.repeat(np.arange(c), 5)
  np.testing.assert_allclose(pes.class_weights(balanced, np.ones(30, bool), num_classes=c), np.ones(c))
  np.testing.assert_array_equal(
    pes.class_weights(balanced, np.zeros(30, bool), num_classes=c), np.zeros(c)
  )  # NaN there
  np.testing.assert_array_equal(
    pes.class_weights(jax.nn.one_hot(labels, c), selected, num_classes=c), w
  )  # label-table rows
  with pytest.raises(ValueError, match="outside"):
    pes.class_weights(np.array([0, 6]), np.ones(2, bool), num_classes=c)


# ------------------------------------------------------------------------------------------------------------
# Losses.


def test_pes_cs_loss_equals_torch_weighted_cross_entropy_value_and_gradient():
  r = rng(3)
  b, c = 64, 10
  logits = 4 * r.normal(size=(b, c))
  labels = r.integers(0, c, b)
  w = np_class_weights(labels, np.arange(b), c, clip=False)
  zt = torch.tensor(logits, requires_grad=True)
  want = torch.nn.CrossEntropyLoss(weight=torch.tensor(w))(zt, torch.tensor(labels))  # PES_cs.py:101
  want.backward()

  def loss(z):
    y = jax.nn.one_hot(labels, c, dtype=z.dtype)
    per = pes.class_weighted_cross_entropy(z, y, class_weights=w)
    return pes.weight_normalised_mean(per, y, class_weights=w)

  with jax.enable_x64(True):
    value, grad = jax.value_and_grad(loss)(jnp.asarray(logits))
    np.testing.assert_allclose(value, want.item(), rtol=1e-13)
    np.testing.assert_allclose(grad, zt.grad.numpy(), rtol=1e-11, atol=1e-15)


def test_semi_labelled_loss_equals_the_original_value_and_gradient():
  r = rng(4)
  b, c = 50, 10
  logits = 3 * r.normal(size=(2 * b, c))
  targets = r.dirichlet(np.ones(c), 2 * b)  # mixed soft targets
  w = np.minimum(r.gamma(1.0, 1.0, c), 3.0)
  zt = torch.tensor(logits, requires_grad=True)
  lx_mean = -torch.mean(F.log_softmax(zt, dim=1) * torch.tensor(targets), 0)  # PES_semi.py:127-128
  want = torch.sum(lx_mean * torch.tensor(w))
  want.backward()
  with jax.enable_x64(True):
    value, grad = jax.value_and_grad(lambda z: pes.semi_labelled_loss(z, targets, class_weights=w))(jnp.asarray(logits))
    np.testing.assert_allclose(value, want.item(), rtol=1e-13)
    np.testing.assert_allclose(grad, zt.grad.numpy(), rtol=1e-11, atol=1e-15)
    # With w = 1 it is DivideMix's Lx.
    lx, _ = dividemix.losses_x_u(logits, targets, logits[:4], targets[:4])
    np.testing.assert_allclose(pes.semi_labelled_loss(logits, targets, class_weights=np.ones(c)), lx, rtol=1e-14)


def test_class_weighted_cross_entropy_invariants_and_extreme_logits():
  r = rng(5)
  c = 7
  z = jnp.asarray(r.normal(size=(3, 5, c)), jnp.float32)
  y = jax.nn.one_hot(r.integers(0, c, (3, 5)), c)
  np.testing.assert_allclose(
    pes.class_weighted_cross_entropy(z, y, class_weights=np.ones(c)), losses.cross_entropy(z, y), rtol=1e-6
  )
  w = r.random(c)
  np.testing.assert_allclose(
    pes.class_weighted_cross_entropy(z, y, class_weights=w),
    losses.cross_entropy(z, y) * (np.asarray(y) @ w),
    rtol=1e-5,
  )
  for dtype in (jnp.float32, jnp.bfloat16):
    big = jnp.asarray([[1e4, -1e4, 0.0, 5.0, -3.0, 1e4, -1e4]], dtype)
    yy = jnp.asarray([[0, 1, 0, 0, 0, 0, 0.0]], dtype)

    def f(zz, yy=yy):
      return jnp.sum(pes.class_weighted_cross_entropy(zz, yy, class_weights=w))

    value, grad = jax.value_and_grad(f)(big)
    assert value.dtype == dtype and np.isfinite(float(value)) and np.all(np.isfinite(np.asarray(grad, np.float32)))
  with pytest.raises(ValueError, match="class_weights"):
    pes.class_weighted_cross_entropy(z, y, class_weights=np.ones(c + 1))


def test_weight_normalised_mean_masks_zero_weights_and_reduces_across_an_axis():
  r = rng(6)
  b, c = 12, 5
  per = r.random(b)
  y = np.asarray(jax.nn.one_hot(r.integers(0, c, b), c))
  w = r.random(c) + 0.1
  where = r.random(b) < 0.7
  want = np.sum(per * where) / np.sum((y @ w) * where)
  np.testing.assert_allclose(pes.weight_normalised_mean(per, y, class_weights=w, where=where), want, rtol=1e-6)
  assert float(pes.weight_normalised_mean(per, y, class_weights=np.zeros(c))) == 0.0  # PyTorch: 0/0
  g = jax.grad(lambda p: pes.weight_normalised_mean(p, y, class_weights=np.zeros(c)))(jnp.asarray(per))
  assert np.all(np.isfinite(g))
  # Two halves of the batch over a named axis give the whole batch's value (psum of both sums).
  halves = jax.vmap(
    lambda p, yy, m: pes.weight_normalised_mean(p, yy, class_weights=w, where=m, axis_name="d"), axis_name="d"
  )(per.reshape(2, -1), y.reshape(2, b // 2, c), where.reshape(2, -1))
  np.testing.assert_allclose(halves, [want, want], rtol=1e-6)
  z, t = r.normal(size=(b, c)), r.dirichlet(np.ones(c), b)
  lx = pes.semi_labelled_loss(z, t, class_weights=w)
  lx_halves = jax.vmap(lambda zz, tt: pes.semi_labelled_loss(zz, tt, class_weights=w, axis_name="d"), axis_name="d")(
    z.reshape(2, b // 2, c), t.reshape(2, b // 2, c)
  )
  np.testing.assert_allclose(lx_halves, [lx, lx], rtol=1e-6)


# ------------------------------------------------------------------------------------------------------------
# PES-semi's MixMatch step, composed from DivideMix's pieces, against PES_semi.py's MixMatch_train.


def torch_mixmatch_step(w_net, x1, x2, u1, u2, labels_x, class_weights, lam, perm, *, T, lambda_u, current, warm_up):
  """PES_semi.py:95-132 with net(x) = x @ w_net (a linear 'network' on flattened inputs), lambda and the
  permutation given (the original draws them from np.random.beta and torch.randperm)."""
  net = lambda x: x @ w_net
  num_class = w_net.shape[1]
  batch_size = x1.size(0)
  targets_x = torch.zeros(batch_size, num_class, dtype=torch.float64).scatter_(1, labels_x.view(-1, 1), 1)
  with torch.no_grad():
    outputs_u11 = net(u1)
    outputs_u12 = net(u2)
    pu = (torch.softmax(outputs_u11, dim=1) + torch.softmax(outputs_u12, dim=1)) / 2
    ptu = pu ** (1 / T)
    targets_u = ptu / ptu.sum(dim=1, keepdim=True)
    targets_u = targets_u.detach()
  all_inputs = torch.cat([x1, x2, u1, u2], dim=0)
  all_targets = torch.cat([targets_x, targets_x, targets_u, targets_u], dim=0)
  idx = perm
  input_a, input_b = all_inputs, all_inputs[idx]
  target_a, target_b = all_targets, all_targets[idx]
  mixmatch_l = lam
  mixed_input = mixmatch_l * input_a + (1 - mixmatch_l) * input_b
  mixed_target = mixmatch_l * target_a + (1 - mixmatch_l) * target_b
  logits = net(mixed_input)
  logits_x = logits[: batch_size * 2]
  logits_u = logits[batch_size * 2 :]
  lx_mean = -torch.mean(F.log_softmax(logits_x, dim=1) * mixed_target[: batch_size * 2], 0)
  lx = torch.sum(lx_mean * class_weights)
  probs_u = torch.softmax(logits_u, dim=1)
  lu = torch.mean((probs_u - mixed_target[batch_size * 2 :]) ** 2)
  return lx + orig_linear_rampup(current, lambda_u, warm_up) * lu


@pytest.mark.parametrize("epoch,batch_index", [(25, 100), (40, 3)])
def test_semi_step_from_dividemix_pieces_equals_the_original(epoch, batch_index):
  r = rng(epoch)
  c, d = 10, 12
  n_confident, n_unconfident = 700, 300
  b_x, b_u = pes.semi_batch_sizes(n_confident, n_unconfident, 32)
  assert (b_x, b_u) == torch_semi_batch_sizes(n_confident, n_unconfident, 32) == (23, 9)
  x1, x2 = r.normal(size=(b_x, d)), r.normal(size=(b_x, d))
  u1, u2 = r.normal(size=(b_u, d)), r.normal(size=(b_u, d))
  labels_x = r.integers(0, c, b_x)
  w = np.minimum(r.gamma(1.0, 1.0, c), 3.0)
  w_net = r.normal(size=(d, c))
  num_epochs, t1, lambda_u = 300, 20, 15.0
  steps = pes.semi_steps_per_epoch(128)
  current = epoch + batch_index / steps
  with jax.enable_x64(True):
    key = jax.random.key(epoch)
    alpha = pes.mixup_alpha(epoch, num_epochs)
    lam, perm = dividemix.mix_coefficients(key, 2 * (b_x + b_u), alpha=alpha)

    def loss(w_jax):
      net = lambda x: x @ w_jax
      p_views = pes.mean_view_probabilities(jnp.stack([net(u1), net(u2)]))
      targets_u = jax.lax.stop_gradient(dividemix.sharpen(p_views, T=pes.SHARPEN_TEMPERATURE))
      targets_x = jax.nn.one_hot(labels_x, c, dtype=jnp.float64)
      mixed, mixed_t = dividemix.mixmatch(x1, x2, u1, u2, targets_x, targets_u, key, alpha=alpha)
      logits = net(mixed)
      lx = pes.semi_labelled_loss(logits[: 2 * b_x], mixed_t[: 2 * b_x], class_weights=w)
      _, lu = dividemix.losses_x_u(logits[: 2 * b_x], mixed_t[: 2 * b_x], logits[2 * b_x :], mixed_t[2 * b_x :])
      ramp = dividemix.linear_rampup(current, t1, pes.RAMPUP_LENGTH, lambda_u=lambda_u)
      return lx + ramp * lu

    value, grad = jax.jit(jax.value_and_grad(loss))(jnp.asarray(w_net))
  wt = torch.tensor(w_net, requires_grad=True)
  t = lambda a: torch.tensor(np.asarray(a), dtype=torch.float64)
  want = torch_mixmatch_step(
    wt,
    t(x1),
    t(x2),
    t(u1),
    t(u2),
    torch.tensor(labels_x),
    t(w),
    float(lam),
    torch.tensor(np.asarray(perm)),
    T=0.5,
    lambda_u=lambda_u,
    current=current,
    warm_up=t1,
  )
  want.backward()
  np.testing.assert_allclose(value, want.item(), rtol=1e-12)
  np.testing.assert_allclose(grad, wt.grad.numpy(), rtol=1e-10, atol=1e-14)


# ------------------------------------------------------------------------------------------------------------
# Batch split and schedules.


def test_semi_batch_sizes_equal_the_original_where_it_runs():
  for n_c in (1, 2, 50, 999, 25_000, 45_000):
    for n_u in (1, 3, 50, 999, 5_000, 25_000, 49_000):
      for b in (64, 128):
        want = torch_semi_batch_sizes(n_c, n_u, b)
        if want[1] == 0:  # the original's DataLoader(batch_size=0) raises: one unlabelled row here
          assert pes.semi_batch_sizes(n_c, n_u, b) == (b - 1, 1)
          assert pes.semi_batch_sizes(n_c, n_u, b, min_unlabelled=0) == want
        else:
          assert pes.semi_batch_sizes(n_c, n_u, b) == want
        assert sum(pes.semi_batch_sizes(n_c, n_u, b)) == b
  assert pes.semi_batch_sizes(100, 0, 128) == (128, 0)
  with pytest.raises(ValueError, match="num_confident"):
    pes.semi_batch_sizes(0, 100, 128)


def test_schedules_equal_the_original():
  for num_epochs in (300, 7):
    got = [float(pes.mixup_alpha(e, num_epochs)) for e in range(num_epochs)]
    assert got == orig_alphas(num_epochs)
  assert float(jax.jit(lambda e: pes.mixup_alpha(e, 300))(150)) == 0.75
  assert float(pes.mixup_alpha(299, 300, late_alpha=None)) == 4.0
  assert pes.semi_steps_per_epoch(128) == 390 == int(50000 / 128)
  steps = pes.semi_steps_per_epoch(128)
  for t1 in (20, 35):
    for epoch in (0, t1 - 1, t1, t1 + 3, t1 + 16, 299):
      for batch_index in (0, 1, 200, 389):
        current = epoch + batch_index / steps
        want = orig_linear_rampup(current, 50.0, t1)
        with jax.enable_x64(True):
          got = dividemix.linear_rampup(current, t1, pes.RAMPUP_LENGTH, lambda_u=50.0)
          np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
        # float32: the clock epoch + b / 390 rounds to ~2e-6 at epoch 20 (the ramp moves 50 / 16 per epoch).
        got32 = dividemix.linear_rampup(current, t1, pes.RAMPUP_LENGTH, lambda_u=50.0)
        np.testing.assert_allclose(got32, want, atol=50.0 / 16 * 4e-5)


# ------------------------------------------------------------------------------------------------------------
# Progressive stages.


def param_names(name, **kwargs):
  model = models.get(name, num_classes=10, **kwargs)
  shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 32, 32, 3)), train=False))
  return set(shapes["params"])


@pytest.mark.parametrize(
  "name,kwargs,blocks",
  [
    ("resnet18", {}, (2, 2, 2, 2)),  # PES_cs CIFAR-10
    ("resnet34", {}, (3, 4, 6, 3)),  # PES_cs CIFAR-100, PES_noisylabels
    ("preact_resnet32", {"widths": (64, 128, 256, 512), "blocks_per_stage": (2, 2, 2, 2)}, (2, 2, 2, 2)),  # PES_semi
  ],
)
def test_renewed_modules_are_the_originals_layers_in_noisy_jax_names(name, kwargs, blocks):
  names = param_names(name, **kwargs)
  for k in range(4):
    got = pes.renewed_modules(k, blocks)
    assert set(got) <= names
    layers = {f"layer{n[5]}" for n in got if n.startswith("stage")} | ({"linear"} if pes.HEAD in got else set())
    assert layers == set(orig_renewed(k))
    for s in (int(layer[-1]) for layer in orig_renewed(k) if layer != "linear"):  # every block of a renewed stage
      assert {n for n in names if n.startswith(f"stage{s}_")} <= set(got)
  assert pes.renewed_modules(1, blocks)[-1] == pes.HEAD and "stem_conv" not in pes.renewed_modules(3, blocks)
  with pytest.raises(ValueError, match="num_layers"):
    pes.renewed_modules(4, blocks)


def test_the_methods_refine_modules_renew_the_originals_layers():
  """pes.REFINE_MODULES as prefixes (the trainer's optim.trainable_names, which Stage.renew and trainable use) name
  exactly the modules of renew_layers(1) and renew_layers(0) on ResNet-18 and ResNet-34."""
  for name, blocks in (("resnet18", (2, 2, 2, 2)), ("resnet34", (3, 4, 6, 3))):
    names = dict.fromkeys(param_names(name))
    for num_layers, entries in zip((1, 0), pes_method.REFINE_MODULES, strict=True):
      got = optim.trainable_names(names, entries, pes.HEAD)
      assert got == set(pes.renewed_modules(num_layers, blocks)), (name, num_layers)
