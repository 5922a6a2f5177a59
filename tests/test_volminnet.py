"""VolMinNet's pure pieces (noisy_jax.core.volminnet) against the codes, in float64 PyTorch transcriptions.

The original (xuefeng-li1/Provably-end-to-end-label-noise-learning-without-anchor-points@06e4167): models.py:149-169's
sig_t (T from W) and main.py:169-178's loss (nll_loss of log(softmax @ T) + lam * slogdet(T).logabsdet); the CIFAR-N
replication's SigT (KlemenVovk/noisy-labels volminnet/utils.py:6-14) and criterion (volminnet.py:43-46, 62-66). Values
and gradients (with respect to the logits and W) for C = 10 and 100, several batch sizes and W's; soft labels and
leading axes; finiteness at logits +-1e4 and W far below 0 in float32 and bfloat16; the checks.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from noisy_jax.core import volminnet

# Comparisons with the codes: (number of values compared, worst relative error, |value| there, largest |value|),
# appended to the file named by VOLMINNET_TALLY when it is set (the report's count).
_TALLY = os.environ.get("VOLMINNET_TALLY")


def _close(got, want, *, rtol, atol=0.0):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
  if _TALLY:
    scale = np.maximum(np.abs(want), 1e-300)
    errors = np.where(want == 0, np.abs(got), np.abs(got - want) / scale).reshape(-1)
    at = int(np.argmax(errors)) if want.size else 0
    worst, size = (float(errors[at]), float(np.abs(want).reshape(-1)[at])) if want.size else (0.0, 0.0)
    with open(_TALLY, "a", encoding="utf-8") as f:
      f.write(f"{want.size} {worst!r} {size!r} {float(np.max(np.abs(want), initial=0.0))!r}\n")


class OriginalSigT(torch.nn.Module):
  """models.py:149-169 as written (device handling left out)."""

  def __init__(self, num_classes, init=2):
    super().__init__()
    self.register_parameter(name="w", param=torch.nn.Parameter(-init * torch.ones(num_classes, num_classes)))
    co = torch.ones(num_classes, num_classes)
    ind = np.diag_indices(co.shape[0])
    co[ind[0], ind[1]] = torch.zeros(co.shape[0])
    self.co = co
    self.identity = torch.eye(num_classes)

  def forward(self):
    sig = torch.sigmoid(self.w)
    T = self.identity.detach() + sig * self.co.detach()
    T = F.normalize(T, p=1, dim=1)
    return T


def replication_sig_t(w):
  """utils.py:6-14 SigT.forward with its w."""
  eye = torch.eye(w.shape[0], dtype=w.dtype)
  return F.normalize(eye + (1 - eye) * torch.sigmoid(w), p=1, dim=1)


def original_loss(clean_logits, w, y, lam, *, form="original"):
  """main.py:169-178 (`form` 'original': sig_t; 'replication': SigT and volminnet.py:43-46, 62-66)."""
  if form == "original":
    trans = OriginalSigT(w.shape[0]).double()
    with torch.no_grad():
      trans.w.copy_(w)
    t = trans()
    parameter = trans.w
  else:
    parameter = w
    t = replication_sig_t(w)
  clean = F.softmax(clean_logits, 1)  # models.py:129 (the network returns its softmax)
  out = torch.mm(clean, t)
  vol_loss = t.slogdet().logabsdet
  ce_loss = F.nll_loss(out.log(), y.long())
  return ce_loss + lam * vol_loss, parameter


def _w(seed, classes, kind):
  rng = np.random.default_rng(seed)
  if kind == "init2":
    return np.full((classes, classes), -2.0)
  if kind == "init4.5":
    return np.full((classes, classes), -4.5)
  return rng.normal(size=(classes, classes)) * 2.0 - 2.0  # a trained-looking W: entries around -2 +- 2


CASES = [(c, b, kind) for c in (10, 100) for b in (1, 7, 64) for kind in ("init2", "init4.5", "random")]


@pytest.mark.parametrize("classes,batch,kind", CASES)
@pytest.mark.parametrize("form", ["original", "replication"])
def test_loss_and_gradients_equal_the_codes(classes, batch, kind, form):
  rng = np.random.default_rng(classes + batch)
  z = rng.normal(size=(batch, classes)) * 3.0
  y = rng.integers(0, classes, batch)
  w = _w(classes * batch, classes, kind)
  lam = 1e-4 if kind != "random" else 0.3
  t_logits = torch.tensor(z, dtype=torch.float64, requires_grad=True)
  t_w = torch.tensor(w, dtype=torch.float64, requires_grad=True)
  loss, parameter = original_loss(t_logits, t_w, torch.tensor(y), lam, form=form)
  loss.backward()
  with jax.enable_x64():
    one_hot = jax.nn.one_hot(y, classes, dtype=jnp.float64)

    def ours(logits, w):
      nll = jnp.mean(volminnet.corrected_cross_entropy(logits, one_hot, transition_logits=w))
      return nll + lam * volminnet.log_volume(w)

    value, (g_z, g_w) = jax.value_and_grad(ours, argnums=(0, 1))(jnp.asarray(z), jnp.asarray(w))
  _close(value, loss.item(), rtol=1e-12)
  _close(g_z, t_logits.grad.numpy(), rtol=1e-9, atol=1e-15)
  _close(g_w, parameter.grad.numpy(), rtol=1e-9, atol=1e-15)
  assert np.all(np.diag(np.asarray(g_w)) == 0)  # the diagonal of W is unused (models.py:166's co)


@pytest.mark.parametrize("classes", [2, 10, 100])
@pytest.mark.parametrize("kind", ["init2", "init4.5", "random"])
def test_transition_and_log_volume_equal_sig_t_and_slogdet(classes, kind):
  w = _w(classes, classes, kind)
  weights = np.random.default_rng(classes).normal(size=(classes, classes))
  trans = OriginalSigT(classes).double()
  with torch.no_grad():
    trans.w.copy_(torch.tensor(w))
  t = trans()
  (t * torch.tensor(weights)).sum().backward()
  t_grad = trans.w.grad.numpy().copy()
  trans.w.grad = None
  vol = trans().slogdet().logabsdet
  vol.backward()
  with jax.enable_x64():
    w64 = jnp.asarray(w)
    matrix = volminnet.transition_matrix(w64)
    g_t = jax.grad(lambda v: jnp.sum(volminnet.transition_matrix(v) * weights))(w64)
    value, g_vol = jax.value_and_grad(volminnet.log_volume)(w64)
  _close(matrix, t.detach().numpy(), rtol=1e-13)
  _close(g_t, t_grad, rtol=1e-9, atol=1e-15)
  _close(value, vol.item(), rtol=1e-11)
  _close(g_vol, trans.w.grad.numpy(), rtol=1e-9, atol=1e-15)
  np.testing.assert_allclose(np.asarray(matrix).sum(axis=1), 1.0, rtol=1e-14)


@pytest.mark.parametrize("classes,init", [(10, 2.0), (100, 4.5)])
def test_initial_w_is_the_codes(classes, init):
  w = volminnet.initial_transition_logits(classes, init=init)
  assert w.shape == (classes, classes) and w.dtype == jnp.float32 and np.all(np.asarray(w) == -init)
  trans = OriginalSigT(classes, init=init)  # models.py:153: -init * ones
  np.testing.assert_array_equal(np.asarray(w), trans.w.detach().numpy())
  np.testing.assert_allclose(volminnet.transition_matrix(w), trans().detach().numpy(), rtol=1e-6)


def test_noisy_posterior_is_softmax_times_t():
  rng = np.random.default_rng(3)
  z, w = rng.normal(size=(5, 10)), _w(1, 10, "random")
  with jax.enable_x64():
    ours = volminnet.noisy_posterior(jnp.asarray(z), transition_logits=jnp.asarray(w))
  t_w = torch.tensor(w)
  want = torch.mm(F.softmax(torch.tensor(z), 1), replication_sig_t(t_w)).numpy()
  _close(ours, want, rtol=1e-13)


def test_soft_labels_and_leading_axes():
  """A soft label's loss is the expectation of the one-hot losses; leading axes are per-example."""
  rng = np.random.default_rng(5)
  z, w = rng.normal(size=(2, 6, 10)), _w(2, 10, "random")
  soft = rng.dirichlet(np.ones(10), size=(2, 6))
  with jax.enable_x64():
    got = volminnet.corrected_cross_entropy(jnp.asarray(z), jnp.asarray(soft), transition_logits=jnp.asarray(w))
    eye = jnp.eye(10, dtype=jnp.float64)
    per_class = jnp.stack(
      [
        volminnet.corrected_cross_entropy(jnp.asarray(z), jnp.broadcast_to(eye[j], z.shape), transition_logits=w)
        for j in range(10)
      ],
      axis=-1,
    )
    flat = volminnet.corrected_cross_entropy(
      jnp.asarray(z).reshape(12, 10), jnp.asarray(soft).reshape(12, 10), transition_logits=jnp.asarray(w)
    )
  assert got.shape == (2, 6)
  np.testing.assert_allclose(got, np.sum(soft * np.asarray(per_class), axis=-1), rtol=1e-13)
  np.testing.assert_allclose(np.asarray(got).reshape(12), flat, rtol=1e-15)


def test_cross_entropy_as_t_tends_to_identity():
  rng = np.random.default_rng(6)
  z, y = rng.normal(size=(8, 10)).astype(np.float32), jax.nn.one_hot(rng.integers(0, 10, 8), 10)
  w = jnp.full((10, 10), -60.0)
  ce = -jnp.sum(y * jax.nn.log_softmax(z), axis=-1)
  np.testing.assert_allclose(volminnet.corrected_cross_entropy(z, y, transition_logits=w), ce, rtol=1e-6)
  np.testing.assert_allclose(volminnet.log_volume(w), 0.0, atol=1e-6)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("w_value", [-2.0, -200.0, -1e4, 3.0])
def test_finite_value_and_gradient_at_extreme_logits(dtype, w_value):
  rng = np.random.default_rng(7)
  z = jnp.asarray(rng.choice([-1e4, 1e4, 0.0], size=(6, 10)), dtype)
  y = jax.nn.one_hot(rng.integers(0, 10, 6), 10, dtype=dtype)
  w = jnp.full((10, 10), w_value, dtype)

  def loss(z, w):
    return jnp.sum(volminnet.corrected_cross_entropy(z, y, transition_logits=w)) + 0.1 * volminnet.log_volume(w)

  value, grads = jax.value_and_grad(loss, argnums=(0, 1))(z, w)
  assert np.isfinite(float(value))
  for g in grads:
    assert np.all(np.isfinite(np.asarray(g, np.float32)))
  assert volminnet.corrected_cross_entropy(z, y, transition_logits=w).dtype == dtype


def test_shapes_and_init_are_checked_naming_the_bad_value():
  z, y = jnp.zeros((3, 10)), jnp.eye(10)[:3]
  with pytest.raises(ValueError, match=r"\[C, C\] = \[10, 10\].*\(9, 9\)"):
    volminnet.corrected_cross_entropy(z, y, transition_logits=jnp.zeros((9, 9)))
  with pytest.raises(ValueError, match=r"square.*\(10, 9\)"):
    volminnet.log_volume(jnp.zeros((10, 9)))
  with pytest.raises(ValueError, match=r"square.*\(10,\)"):
    volminnet.transition_matrix(jnp.zeros(10))
  with pytest.raises(ValueError, match="logits has shape"):
    volminnet.corrected_cross_entropy(z, y[:2], transition_logits=jnp.zeros((10, 10)))
  with pytest.raises(ValueError, match="init_t=nan"):
    volminnet.initial_transition_logits(10, init=float("nan"))
  with pytest.raises(ValueError, match="num_classes=0"):
    volminnet.initial_transition_logits(0)


@pytest.mark.parametrize("classes", [10, 100])
def test_runs_under_the_resnets_xla_cpu_options(classes):
  """The ResNets' compiler options (YNNPACK elementwise and reduction fusions, noisy_jax.models.resnet): slogdet of
  T computed column-major failed there at C = 100 ("unsupported layout in YNN fusion"); log_volume avoids it."""
  from noisy_jax.models import resnet  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(classes)
  w = jnp.asarray(rng.normal(size=(classes, classes)) - 3.0, jnp.float32)
  z = jnp.asarray(rng.normal(size=(16, classes)), jnp.float32)
  y = jax.nn.one_hot(rng.integers(0, classes, 16), classes)

  def loss(w, z):
    return jnp.mean(volminnet.corrected_cross_entropy(z, y, transition_logits=w)) + 0.1 * volminnet.log_volume(w)

  step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
  compiled = step.lower(w, z).compile(resnet.XLA_CPU_COMPILER_OPTIONS if jax.default_backend() == "cpu" else None)
  value, grads = jax.block_until_ready(compiled(w, z))
  want_value, want_grads = step(w, z)
  np.testing.assert_allclose(value, want_value, rtol=1e-6)
  for got, want in zip(grads, want_grads, strict=True):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
