"""CORES²'s pure pieces (noisy_jax.core.cores) against the original code, transcribed into float64 PyTorch and NumPy.

`_loss_cores` is UCSC-REAL/cores@cf0945e loss.py:23-54 line by line (its .cuda() and its loss_all / loss_div_all
bookkeeping left out), `_f_beta` loss.py:56-62 and the replication's (cores2/utils.py:41-49), `_prior_update`
phase1.py:205-212 with data/cifar.py:97-100's initial prior. Compared: the batch loss, its gradient w.r.t. the logits,
the sieve's keep vector (values AND gradients; C = 10 and 100, several batch sizes and epochs, with and without the
prior), beta per epoch, the lr plan, the prior update; and the settings' checks. COMPARISONS counts the comparisons
with the original and WORST the worst relative error seen (printed by the last test, `pytest -s`).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from noisy_jax.core import cores

COMPARISONS = {"count": 0, "worst": 0.0}


def _record(got, want):
  """Counts one comparison with the original and keeps the worst relative error, max |got - want| / max |want|."""
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  error = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300) if want.size else 0.0
  COMPARISONS["count"] += 1
  COMPARISONS["worst"] = max(COMPARISONS["worst"], float(error))
  return got, want


def _f_beta(epoch, tail=60):
  """loss.py:56-62 (tail 60) and the replication's utils.py:41-49 (tail 61), as written."""
  beta1 = np.linspace(0.0, 0.0, num=10)
  beta2 = np.linspace(0.0, 2, num=30)
  beta3 = np.linspace(2, 2, num=tail)
  beta = np.concatenate((beta1, beta2, beta3), axis=0)
  return beta[epoch]


def _loss_cores(epoch, y, t, noise_prior=None):
  """loss.py:23-54 without .cuda() and the bookkeeping arrays: (loss, loss_v) or, when nothing is kept, loss alone."""
  beta = _f_beta(epoch)
  loss = F.cross_entropy(y, t, reduction="none")
  loss_numpy = loss.data.cpu().numpy()
  num_batch = len(loss_numpy)
  loss_v = np.zeros(num_batch)
  loss_ = -torch.log(F.softmax(y, dim=1) + 1e-8)
  loss_sel = loss - torch.mean(loss_, 1)
  if noise_prior is None:
    loss = loss - beta * torch.mean(loss_, 1)
  else:
    loss = loss - beta * torch.sum(torch.mul(noise_prior, loss_), 1)
  loss_div_numpy = loss_sel.data.cpu().numpy()
  for i in range(len(loss_numpy)):
    if epoch <= 30:
      loss_v[i] = 1.0
    elif loss_div_numpy[i] <= 0:
      loss_v[i] = 1.0
  loss_v = loss_v.astype(np.float32)
  loss_v_var = torch.from_numpy(loss_v).to(loss.dtype)
  loss_ = loss_v_var * loss
  if sum(loss_v) == 0.0:
    return torch.mean(loss_) / 100000000
  return torch.sum(loss_) / sum(loss_v), loss_v.astype(int)


def _inputs(seed, batch, classes, scale):
  rng = np.random.default_rng(seed)
  logits = rng.normal(size=(batch, classes)) * scale
  labels = rng.integers(0, classes, batch)
  prior = rng.dirichlet(np.ones(classes))
  return logits, labels, prior


def _ours(logits, labels, prior, epoch):
  """The batch loss from the core pieces at 0-based `epoch`, its gradient and the keep vector (float64)."""
  classes = logits.shape[-1]
  with jax.enable_x64():
    one_hot = jax.nn.one_hot(labels, classes, dtype=jnp.float64)
    beta = cores.beta_at(epoch)

    def loss(z):
      per_example = cores.regularised_loss(z, one_hot, beta=beta, prior=None if prior is None else jnp.asarray(prior))
      margin = cores.sieve_margin(z, one_hot)
      keep = cores.sieve_keep(margin, active=epoch >= cores.SIEVE_WARMUP_EPOCHS)
      return cores.sieved_batch_loss(per_example, keep), keep

    (value, keep), grad = jax.value_and_grad(loss, has_aux=True)(jnp.asarray(logits, jnp.float64))
    return float(value), np.asarray(grad), np.asarray(keep)


@pytest.mark.parametrize("classes", [10, 100])
@pytest.mark.parametrize("batch", [1, 7, 64])
@pytest.mark.parametrize("epoch", [0, 9, 10, 25, 30, 31, 39, 40, 99])
@pytest.mark.parametrize("with_prior", [True, False])
def test_batch_loss_gradient_and_sieve_equal_loss_cores(classes, batch, epoch, with_prior):
  scale = 3.0 if epoch < 31 else 0.8  # past the warm-up a mild scale keeps some rows on both sides of the sieve
  logits, labels, prior = _inputs(classes * 1000 + batch * 10 + epoch, batch, classes, scale)
  z = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
  torch_prior = torch.tensor(prior, dtype=torch.float64).unsqueeze(0) if with_prior else None  # phase1.py:74's [1, C]
  out = _loss_cores(epoch, z, torch.tensor(labels), noise_prior=torch_prior)
  value, grad, keep = _ours(logits, labels, prior if with_prior else None, epoch)
  if isinstance(out, tuple):
    want, loss_v = out
    np.testing.assert_array_equal(keep.astype(int), loss_v)
    _record(keep.astype(int), loss_v)
  else:  # nothing kept: the code's single return value (its caller's unpacking fails); ours is that value, 0
    want = out
    assert not keep.any()
  want.backward()
  np.testing.assert_allclose(*_record(value, want.item()), rtol=1e-12, atol=1e-14)
  np.testing.assert_allclose(*_record(grad, z.grad.numpy()), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("classes", [10, 100])
def test_per_example_pieces_equal_the_codes_lines(classes):
  """loss.py:32-38: l_sel and l per example (prior [1, C] and none), and their gradients."""
  logits, labels, prior = _inputs(classes, 33, classes, 5.0)
  for beta in (0.0, 0.7, 2.0):
    for with_prior in (True, False):
      z = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
      ce = F.cross_entropy(z, torch.tensor(labels), reduction="none")
      loss_ = -torch.log(F.softmax(z, dim=1) + 1e-8)
      regulariser = torch.sum(torch.tensor(prior).unsqueeze(0) * loss_, 1) if with_prior else torch.mean(loss_, 1)
      want = ce - beta * regulariser
      want_sel = ce - torch.mean(loss_, 1)
      (want * torch.arange(1, 34)).sum().backward()
      with jax.enable_x64():
        one_hot = jax.nn.one_hot(labels, classes, dtype=jnp.float64)
        weights = jnp.arange(1, 34, dtype=jnp.float64)
        fn = lambda zz: cores.regularised_loss(zz, one_hot, beta=beta, prior=prior if with_prior else None)
        got = fn(jnp.asarray(logits))
        grad = jax.grad(lambda zz: jnp.sum(fn(zz) * weights))(jnp.asarray(logits))
        sel = cores.sieve_margin(jnp.asarray(logits), one_hot)
      np.testing.assert_allclose(*_record(got, want.detach().numpy()), rtol=1e-12, atol=1e-12)
      np.testing.assert_allclose(*_record(grad, z.grad.numpy()), rtol=1e-10, atol=1e-13)
      np.testing.assert_allclose(*_record(sel, want_sel.detach().numpy()), rtol=1e-12, atol=1e-12)


def test_beta_per_epoch_is_f_beta_and_the_lr_plan_divides_by_it():
  for epoch in range(100):
    assert cores.beta_at(epoch) == _f_beta(epoch) == _f_beta(epoch, tail=61)
    _record(cores.beta_at(epoch), _f_beta(epoch))
    # phase1.py:45-47: alpha_plan[epoch] / (1 + f_beta(epoch)), alpha_plan = phase1.py:189's.
    alpha_plan = [0.1] * 50 + [0.01] * 50
    got, want = cores.CODE_LR_PLAN[epoch] * cores.lr_factor(epoch), alpha_plan[epoch] / (1 + _f_beta(epoch))
    np.testing.assert_allclose(*_record(got, want), rtol=1e-15)  # lr x (1 / (1 + beta)): within an ulp
  assert cores.beta_at(100) == 2.0 == _f_beta(100, tail=61)  # the replication's last entry
  with pytest.raises(IndexError):
    _f_beta(100)  # the code's table ends at epoch 99; beta_at goes on at beta_max
  assert cores.beta_at(250) == 2.0
  np.testing.assert_array_equal(cores.beta_schedule(3, 5, 1.0), np.r_[np.zeros(3), np.linspace(0.0, 1.0, 5)])


@pytest.mark.parametrize("classes", [10, 100])
def test_prior_update_is_phase1s(classes):
  rng = np.random.default_rng(classes)
  noisy = rng.integers(0, classes, 5000)
  # data/cifar.py:97-100: class sizes of the noisy labels over their sum.
  idx_each_class = [[] for _ in range(classes)]
  for i, label in enumerate(noisy):
    idx_each_class[label].append(i)
  noise_prior = np.array([len(c) for c in idx_each_class]) / sum(len(c) for c in idx_each_class)
  np.testing.assert_allclose(*_record(cores.class_prior(noisy, classes), noise_prior), rtol=1e-15)
  sieved = rng.integers(0, 20, classes)
  # phase1.py:211-212.
  want = noise_prior * 5000 - sieved
  want = want / sum(want)
  np.testing.assert_allclose(*_record(cores.updated_prior(noise_prior, 5000, sieved), want), rtol=1e-14)


def test_nothing_kept_is_zero_with_zero_gradient_and_nothing_dropped_is_the_mean():
  logits = jnp.asarray(np.random.default_rng(0).normal(size=(4, 10)), jnp.float32)
  labels = jax.nn.one_hot(jnp.arange(4), 10)
  per_example = lambda z: cores.regularised_loss(z, labels, beta=1.0)
  none = lambda z: cores.sieved_batch_loss(per_example(z), jnp.zeros(4, bool))
  assert float(none(logits)) == 0.0 and not np.any(np.asarray(jax.grad(none)(logits)))
  every = cores.sieved_batch_loss(per_example(logits), jnp.ones(4, bool), valid=jnp.array([1, 1, 1, 0], bool))
  np.testing.assert_allclose(float(every), float(jnp.mean(per_example(logits)[:3])), rtol=1e-6)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_finite_value_and_gradient_for_huge_logits(dtype):
  logits = jnp.asarray([[1e4, -1e4, 0.0], [-1e4, 1e4, 5.0]], dtype)
  labels = jax.nn.one_hot(jnp.array([1, 1]), 3, dtype=dtype)
  for fn in (
    lambda z: jnp.sum(cores.regularised_loss(z, labels, beta=2.0, prior=jnp.array([0.2, 0.3, 0.5]))),
    lambda z: jnp.sum(cores.sieve_margin(z, labels)),
  ):
    value, grad = jax.value_and_grad(fn)(logits)
    assert np.isfinite(float(value)) and np.all(np.isfinite(np.asarray(grad, np.float32)))
  assert cores.regularised_loss(logits, labels, beta=1.0).dtype == dtype


BAD = [
  (lambda: cores.regularised_loss(jnp.zeros((2, 3)), jnp.zeros((2, 3)), beta=-1.0), r"beta=-1\.0"),
  (lambda: cores.regularised_loss(jnp.zeros((2, 3)), jnp.zeros((2, 3)), beta=1.0, prior=jnp.ones(4)), r"\(4,\)"),
  (lambda: cores.beta_schedule(-1, 30, 2.0), r"beta_warmup_epochs=-1"),
  (lambda: cores.beta_schedule(10, 0, 2.0), r"beta_ramp_epochs=0"),
  (lambda: cores.beta_schedule(10, 30, -2.0), r"beta_max=-2\.0"),
  (lambda: cores.beta_schedule(10, 2.5, 2.0), r"beta_ramp_epochs=2\.5"),
  (lambda: cores.beta_at(-1), r"epoch=-1"),
  (lambda: cores.class_prior(np.array([0, 3]), 3), r"class id 3"),
  (lambda: cores.updated_prior(np.array([0.5, 0.5]), 4, np.array([2, 2])), r"dropped every row \(4 of 4\)"),
]


@pytest.mark.parametrize("call,message", BAD, ids=[m for _, m in BAD])
def test_bad_values_are_named(call, message):
  with pytest.raises(ValueError, match=message):
    call()


def test_zz_report_comparisons():
  """Prints the number of comparisons with the original code and the worst relative error (run last)."""
  count, worst = COMPARISONS["count"], COMPARISONS["worst"]
  print(f"\nCORES² comparisons with the original: {count}, worst relative error {worst:.3g}")
  assert COMPARISONS["count"] > 0
