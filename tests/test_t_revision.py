"""noisy_jax.core.t_revision against the original code (xiaoboxia/T-Revision@b598cf2), written out below in float64
PyTorch as it is there (loss.py's per-example loops, Variable included), values and gradients; closed forms (T = I
is cross entropy, beta = 1); finiteness at extreme logits; and the anchor-point estimator that T-Revision reuses
(noisy_jax.methods.loss_correction.estimate_transition) against tools.fit + tools.norm.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from torch.autograd import Variable
import torch.nn.functional as F

from noisy_jax.core import losses
from noisy_jax.core import noise
from noisy_jax.core import t_revision
from noisy_jax.methods import loss_correction

B = 24


# ------------------------------------------------------------------------------------------------------------
# The original's losses, float64 torch, loop for loop.


def original_reweight_loss(out, T, target):
  """loss.py:6-29 (`reweight_loss.forward`); also returns the per-example terms."""
  loss, terms = 0.0, []
  out_softmax = F.softmax(out, dim=1)
  for i in range(len(target)):
    temp_softmax = torch.unsqueeze(out_softmax[i], 0)
    temp = torch.unsqueeze(out[i], 0)
    temp_target = torch.unsqueeze(target[i], 0)
    pro1 = temp_softmax[:, target[i]]
    out_T = torch.matmul(T.t(), temp_softmax.t()).t()
    pro2 = out_T[:, target[i]]
    beta = pro1 / pro2
    beta = Variable(beta, requires_grad=True)
    _loss = beta * F.cross_entropy(temp, temp_target)
    terms.append(_loss)
    loss += _loss
  return loss / len(target), torch.cat(terms)


def original_revision_loss(out, T, correction, target, *, accumulate=True, detach_probs=False):
  """loss.py:32-56 (`reweighting_revision_loss.forward`) with accumulate=True. accumulate=False adds dT once (the
  paper); detach_probs=True takes p inside beta from a detached softmax (the 'transition' option)."""
  loss, terms = 0.0, []
  out_softmax = F.softmax(out, dim=1)
  weight_softmax = out_softmax.detach() if detach_probs else out_softmax
  revised = T + correction
  for i in range(len(target)):
    temp_softmax = torch.unsqueeze(weight_softmax[i], 0)
    temp = torch.unsqueeze(out[i], 0)
    temp_target = torch.unsqueeze(target[i], 0)
    pro1 = temp_softmax[:, target[i]]
    if accumulate:
      T = T + correction
      T_result = T
    else:
      T_result = revised
    out_T = torch.matmul(T_result.t(), temp_softmax.t()).t()
    pro2 = out_T[:, target[i]]
    beta = pro1 / pro2
    _loss = beta * F.cross_entropy(temp, temp_target)
    terms.append(_loss)
    loss += _loss
  return loss / len(target), torch.cat(terms)


def _inputs(seed, classes, *, correction_scale=0.0):
  rng = np.random.default_rng(seed)
  logits = rng.normal(size=(B, classes)) * 3
  target = rng.integers(0, classes, B)
  transition = 0.6 * np.eye(classes) + 0.4 * rng.dirichlet(np.ones(classes), size=classes)  # dense, row-stochastic
  correction = rng.normal(size=(classes, classes)) * correction_scale
  return logits, target, transition, correction


def _torch(x, grad=False):
  return torch.tensor(x, dtype=torch.float64, requires_grad=grad)


# ------------------------------------------------------------------------------------------------------------
# Against the original.


@pytest.mark.parametrize("classes", [10, 100])
def test_reweighting_stage_equals_reweight_loss(classes):
  logits, target, transition, _ = _inputs(classes, classes)
  out = _torch(logits, grad=True)
  expected, terms = original_reweight_loss(out, _torch(transition), torch.tensor(target))
  expected.sum().backward()
  with jax.enable_x64():
    one_hot = jax.nn.one_hot(target, classes, dtype=jnp.float64)

    def batch(z):
      per_example = t_revision.reweighted_cross_entropy(z, one_hot, transition=jnp.asarray(transition))
      return t_revision.batch_mean(per_example), per_example

    (value, per_example), grad = jax.jit(jax.value_and_grad(batch, has_aux=True))(jnp.asarray(logits))
  np.testing.assert_allclose(per_example, terms.detach().numpy(), rtol=1e-12)
  np.testing.assert_allclose(value, expected.item(), rtol=1e-12)
  # Variable(beta, requires_grad=True) detaches beta: the gradient is beta * dCE only.
  np.testing.assert_allclose(grad, out.grad.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("classes", [10, 100])
@pytest.mark.parametrize("accumulate", [True, False], ids=["original-accumulated", "paper"])
def test_revision_stage_equals_reweighting_revision_loss(classes, accumulate):
  logits, target, transition, correction = _inputs(classes + 1, classes, correction_scale=1e-4)
  out, delta = _torch(logits, grad=True), _torch(correction, grad=True)
  expected, terms = original_revision_loss(out, _torch(transition), delta, torch.tensor(target), accumulate=accumulate)
  expected.sum().backward()
  with jax.enable_x64():
    one_hot = jax.nn.one_hot(target, classes, dtype=jnp.float64)

    def batch(z, dt):
      per_example = t_revision.revision_cross_entropy(
        z, one_hot, transition=jnp.asarray(transition), correction=dt, accumulate_correction=accumulate
      )
      return t_revision.batch_mean(per_example), per_example

    (value, per_example), (grad_z, grad_dt) = jax.jit(jax.value_and_grad(batch, argnums=(0, 1), has_aux=True))(
      jnp.asarray(logits), jnp.asarray(correction)
    )
    other = t_revision.revision_cross_entropy(
      logits, one_hot, transition=transition, correction=correction, accumulate_correction=not accumulate
    )
  np.testing.assert_allclose(per_example, terms.detach().numpy(), rtol=1e-12)
  np.testing.assert_allclose(value, expected.item(), rtol=1e-12)
  np.testing.assert_allclose(grad_z, out.grad.numpy(), rtol=1e-10, atol=1e-14)
  np.testing.assert_allclose(grad_dt, delta.grad.numpy(), rtol=1e-10, atol=1e-12 * np.abs(delta.grad.numpy()).max())
  # The accumulation changes the numbers (example i sees T + (i + 1) dT); the first example agrees.
  assert not np.allclose(per_example[1:], other[1:], rtol=1e-9, atol=0)
  np.testing.assert_allclose(per_example[0], other[0], rtol=1e-12)


def test_transition_only_gradient_and_the_zero_entries_of_the_identity():
  """'transition': p inside beta detached, dT live. At T = I, dT = 0 (zero entries everywhere off the diagonal) the
  gradient with respect to dT is the original's."""
  classes = 10
  logits, target, transition, correction = _inputs(3, classes, correction_scale=1e-3)
  for matrix, delta_value, mode in [
    (transition, correction, "transition"),
    (np.eye(classes), np.zeros((classes, classes)), "transition"),
    (np.eye(classes), np.zeros((classes, classes)), "all"),
  ]:
    out, delta = _torch(logits, grad=True), _torch(delta_value, grad=True)
    expected, _ = original_revision_loss(
      out, _torch(matrix), delta, torch.tensor(target), accumulate=False, detach_probs=mode == "transition"
    )
    expected.sum().backward()
    with jax.enable_x64():
      one_hot = jax.nn.one_hot(target, classes, dtype=jnp.float64)
      loss = lambda z, dt: t_revision.batch_mean(
        t_revision.revision_cross_entropy(z, one_hot, transition=matrix, correction=dt, weight_gradient=mode)
      )
      value, (grad_z, grad_dt) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(
        jnp.asarray(logits), jnp.asarray(delta_value)
      )
    np.testing.assert_allclose(value, expected.item(), rtol=1e-12)
    np.testing.assert_allclose(grad_z, out.grad.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(grad_dt, delta.grad.numpy(), rtol=1e-10, atol=1e-14)


def test_noisy_posterior_and_weights_equal_the_originals_products():
  classes = 10
  logits, _, transition, correction = _inputs(4, classes, correction_scale=1e-2)
  prob = F.softmax(_torch(logits), dim=1).t()
  expected = torch.matmul(_torch(transition + correction).t(), prob).t().numpy()  # main.py:323-324
  with jax.enable_x64():
    matrix = t_revision.revised_transition(transition, correction)
    np.testing.assert_allclose(t_revision.noisy_posterior(logits, transition=matrix), expected, rtol=1e-13)
    weights = t_revision.importance_weights(logits, transition=matrix)
  np.testing.assert_allclose(weights, prob.t().numpy() / expected, rtol=1e-12)


# ------------------------------------------------------------------------------------------------------------
# Closed forms and invariants.


def test_identity_gives_unit_weights_and_cross_entropy():
  classes = 10
  logits, target, _, _ = _inputs(5, classes)
  one_hot = jax.nn.one_hot(target, classes)
  logits = jnp.asarray(logits, jnp.float32)
  eye = jnp.eye(classes)
  np.testing.assert_array_equal(t_revision.importance_weights(logits, transition=eye), 1.0)

  def every_loss(z):  # both losses under every weight_gradient
    zero = t_revision.initial_correction(classes)
    for mode in t_revision.WEIGHT_GRADIENTS:
      yield t_revision.reweighted_cross_entropy(z, one_hot, transition=eye, weight_gradient=mode)
      yield t_revision.revision_cross_entropy(z, one_hot, transition=eye, correction=zero, weight_gradient=mode)

  values_and_grads = jax.jit(
    lambda z: [jax.value_and_grad(lambda x, k=k: jnp.mean(list(every_loss(x))[k]))(z) for k in range(6)]
  )(logits)
  ce = lambda z: jnp.mean(losses.cross_entropy(z, one_hot))
  for value, grad in values_and_grads:
    np.testing.assert_allclose(value, ce(logits), rtol=1e-6)
    np.testing.assert_allclose(grad, jax.grad(ce)(logits), rtol=1e-5, atol=1e-8)


def test_gradient_options_split_as_documented():
  classes = 10
  logits, target, transition, correction = _inputs(6, classes, correction_scale=1e-3)
  one_hot = jax.nn.one_hot(target, classes)

  def grads(mode):
    loss = lambda z, dt: jnp.mean(
      t_revision.revision_cross_entropy(z, one_hot, transition=transition, correction=dt, weight_gradient=mode)
    )
    return jax.jit(jax.grad(loss, argnums=(0, 1)))(
      jnp.asarray(logits, jnp.float32), jnp.asarray(correction, jnp.float32)
    )

  (z_none, dt_none), (z_transition, dt_transition), (z_all, dt_all) = map(grads, t_revision.WEIGHT_GRADIENTS)
  np.testing.assert_array_equal(dt_none, 0.0)  # beta constant: dT learns nothing
  np.testing.assert_allclose(z_transition, z_none, rtol=1e-6)  # the network sees beta as a constant in both
  np.testing.assert_allclose(dt_transition, dt_all, rtol=1e-5, atol=1e-9)  # beta's dependence on dT is the same
  assert not np.allclose(z_all, z_none, rtol=1e-3)


def test_zero_correction_is_the_reweighting_loss_and_one_example_does_not_accumulate():
  classes = 10
  logits, target, transition, correction = _inputs(7, classes, correction_scale=1e-2)
  one_hot = jax.nn.one_hot(target, classes)
  zero = t_revision.initial_correction(classes)
  np.testing.assert_array_equal(zero, np.zeros((classes, classes)))
  np.testing.assert_allclose(
    t_revision.revision_cross_entropy(logits, one_hot, transition=transition, correction=zero),
    t_revision.reweighted_cross_entropy(logits, one_hot, transition=transition),
    rtol=1e-6,
  )
  kwargs = dict(transition=transition, correction=correction)
  np.testing.assert_allclose(
    t_revision.revision_cross_entropy(logits[:1], one_hot[:1], accumulate_correction=True, **kwargs),
    t_revision.revision_cross_entropy(logits[:1], one_hot[:1], **kwargs),
    rtol=1e-6,
  )


@pytest.mark.parametrize("mode", t_revision.WEIGHT_GRADIENTS)
def test_soft_labels_take_the_expectation_over_the_label(mode):
  classes = 5
  logits, _, transition, correction = _inputs(8, classes, correction_scale=1e-2)
  soft = np.random.default_rng(8).dirichlet(np.ones(classes), size=B)
  soft[:, 0] = 0.0
  soft /= soft.sum(axis=1, keepdims=True)

  def loss(z, y):
    return jnp.sum(
      t_revision.revision_cross_entropy(z, y, transition=transition, correction=correction, weight_gradient=mode)
    )

  with jax.enable_x64():
    z = jnp.asarray(logits)
    value_and_grad = jax.jit(jax.vmap(jax.value_and_grad(loss)))
    value, grad = value_and_grad(z, jnp.asarray(soft))
    parts = [jax.tree.map(np.asarray, value_and_grad(z, jnp.tile(jnp.eye(classes)[j], (B, 1)))) for j in range(classes)]
  np.testing.assert_allclose(value, sum(soft[:, j] * parts[j][0] for j in range(classes)), rtol=1e-12)
  expected_grad = sum(soft[:, j, None] * parts[j][1] for j in range(classes))
  np.testing.assert_allclose(grad, expected_grad, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_extreme_logits_give_finite_values_and_gradients(dtype):
  classes = 6
  rng = np.random.default_rng(9)
  logits = jnp.asarray(rng.choice([-1e4, 1e4], size=(8, classes)) * rng.uniform(0.5, 1, (8, classes)), dtype)
  one_hot = jax.nn.one_hot(rng.integers(0, classes, 8), classes, dtype=dtype)
  small = rng.normal(size=(classes, classes)) * 1e-3
  cases = {  # T, dT: sparse matrices (zero entries) and a dense one with a correction
    "identity": (np.eye(classes), np.zeros((classes, classes))),
    "pairflip": (noise.make_transition("pairflip", classes, 0.45), np.zeros((classes, classes))),
    "dense": (0.7 * np.eye(classes) + 0.3 / classes, small),
  }

  @jax.jit
  def every_mode(z, transition, correction):
    out = []
    for mode in t_revision.WEIGHT_GRADIENTS:
      loss = lambda x, dt, mode=mode: jnp.sum(
        t_revision.revision_cross_entropy(x, one_hot, transition=transition, correction=dt, weight_gradient=mode)
      )
      out.append(jax.value_and_grad(loss, argnums=(0, 1))(z, correction))
    return out, t_revision.importance_weights(z, transition=transition)

  for name, (transition, correction) in cases.items():
    results, weights = every_mode(logits, jnp.asarray(transition, jnp.float32), jnp.asarray(correction, jnp.float32))
    for mode, (value, (grad_z, grad_dt)) in zip(t_revision.WEIGHT_GRADIENTS, results):
      assert value.dtype == dtype
      for x in (value, grad_z, grad_dt, weights):
        assert np.all(np.isfinite(np.asarray(x, np.float32))), (name, mode, x)
    if name == "identity":  # the original's plain ratio p_y / (p T)_y is 0 / 0 here; ours is exactly 1
      np.testing.assert_array_equal(np.asarray(weights, np.float32), 1.0)
      p = np.asarray(jax.nn.softmax(jnp.asarray(logits, jnp.float32)))
      with np.errstate(invalid="ignore"):
        assert np.isnan(p / (p @ transition)).any()


def test_batch_mean_over_valid_rows():
  values = jnp.arange(6.0)
  np.testing.assert_allclose(t_revision.batch_mean(values), 2.5)
  padded = jnp.concatenate([values, jnp.full(2, 1e6)])
  np.testing.assert_allclose(t_revision.batch_mean(padded, valid=jnp.arange(8) < 6), 2.5)
  np.testing.assert_allclose(t_revision.batch_mean(padded, valid=jnp.zeros(8, bool)), 0.0)


def test_bad_arguments_are_named():
  one_hot = jnp.eye(3)
  with pytest.raises(ValueError, match="transition must be"):
    t_revision.reweighted_cross_entropy(jnp.zeros((3, 3)), one_hot, transition=jnp.eye(4))
  with pytest.raises(ValueError, match="correction must be"):
    t_revision.revision_cross_entropy(jnp.zeros((3, 3)), one_hot, transition=jnp.eye(3), correction=jnp.zeros(3))
  with pytest.raises(ValueError, match="weight_gradient"):
    t_revision.reweighted_cross_entropy(jnp.zeros((3, 3)), one_hot, transition=jnp.eye(3), weight_gradient="some")
  with pytest.raises(ValueError, match="batch axis"):
    t_revision.revision_cross_entropy(
      jnp.zeros(3), one_hot[0], transition=jnp.eye(3), correction=jnp.zeros((3, 3)), accumulate_correction=True
    )
  with pytest.raises(ValueError, match="square"):
    t_revision.revised_transition(jnp.ones((3, 2)), jnp.zeros((3, 2)))


# ------------------------------------------------------------------------------------------------------------
# The anchor-point estimate: tools.fit + tools.norm (main.py:212-213) against loss_correction.estimate_transition.


def tools_fit(X, num_classes, filter_outlier=False):
  """tools.py:27-42 as it is (it writes its zeros into X). NumPy 2 removed percentile's `interpolation=` keyword
  that it passes; `method=` is the same choice."""
  c = num_classes
  T = np.empty((c, c))
  eta_corr = X
  for i in np.arange(c):
    if not filter_outlier:
      idx_best = np.argmax(eta_corr[:, i])
    else:
      eta_thresh = np.percentile(eta_corr[:, i], 97, method="higher")
      robust_eta = eta_corr[:, i]
      robust_eta[robust_eta >= eta_thresh] = 0.0
      idx_best = np.argmax(robust_eta)
    for j in np.arange(c):
      T[i, j] = eta_corr[idx_best, j]
  return T


def tools_norm(T):
  """tools.py:4-7: T / row_sum with row_sum of shape [C] divides column j by row j's sum."""
  row_sum = np.sum(T, 1)
  return T / row_sum


def _softmax_rows(seed, n, classes):
  rng = np.random.default_rng(seed)
  z = rng.normal(size=(n, classes)) * 2 + 3 * np.eye(classes)[rng.integers(0, classes, n)]
  p = np.exp(z - z.max(axis=1, keepdims=True))
  return (p / p.sum(axis=1, keepdims=True)).astype(np.float32)  # the original's A is float32 (main.py:144)


@pytest.mark.parametrize("classes, filtered", [(10, True), (100, False)], ids=["mnist-cifar10", "cifar100"])
def test_estimator_equals_the_originals_when_no_anchor_row_was_filtered(classes, filtered):
  probs = _softmax_rows(classes, 3000, classes)
  raw = tools_fit(probs.copy(), classes, filtered)
  original = tools_norm(raw)
  ours = loss_correction.estimate_transition(
    probs, percentile=loss_correction.DEFAULT_PERCENTILE if filtered else None, shared_filter=True
  )
  sums = raw.sum(axis=1)
  np.testing.assert_allclose(sums, 1.0, atol=1e-6)  # float32 rows: the two normalisations differ by that much
  np.testing.assert_allclose(ours, raw / sums[:, None], rtol=1e-12)
  np.testing.assert_allclose(ours, original, rtol=1e-6)


def test_estimator_differs_where_the_shared_filter_bites():
  # loss_correction's test case: class 1's anchor A = [0.4, 0.55, 0.05] loses its 0.4 to column 0's filter.
  probs = np.tile([0.1, 0.1, 0.8], (100, 1))
  probs[:2] = [0.9, 0.05, 0.05]
  probs[2] = [0.4, 0.55, 0.05]
  probs[3:6] = [0.025, 0.95, 0.025]
  raw = tools_fit(probs.copy(), 3, True)
  sums = raw.sum(axis=1)
  np.testing.assert_allclose(raw[1], [0.0, 0.55, 0.05])
  ours = loss_correction.estimate_transition(probs, shared_filter=True)
  original = tools_norm(raw)
  np.testing.assert_allclose(ours, raw / sums[:, None])  # rows normalised: rows sum to 1
  np.testing.assert_allclose(original, raw / sums[None, :])  # T-Revision: column j over row j's sum
  np.testing.assert_allclose(ours.sum(axis=1), 1.0)
  assert not np.allclose(original.sum(axis=1), 1.0)
