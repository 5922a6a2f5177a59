"""XLA:CPU compiler options of the ResNets (models.resnet.XLA_CPU_COMPILER_OPTIONS, xla_options.compiler_options).

What is asserted: which models and platforms get them; that this jaxlib accepts them and that they do what the
comment says (most convolutions no longer go to YNNPACK); that gradients are the same with and without them; and that
options XLA rejects are dropped with a warning instead of failing a run.
"""

import re

from absl import logging
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from noisy_jax import models
from noisy_jax.models.preact_resnet import PreActResNet
from noisy_jax.models.resnet import XLA_CPU_COMPILER_OPTIONS
from noisy_jax.parallel import xla_options


@pytest.mark.parametrize("name", ["preact_resnet32", "preact_resnet_jo", "resnet18", "resnet34"])
def test_resnets_carry_the_options_on_cpu_only(name):
  model = models.get(name, num_classes=10)
  assert xla_options.compiler_options(model, "cpu") == XLA_CPU_COMPILER_OPTIONS
  assert xla_options.compiler_options(model, "gpu") == xla_options.GPU_DETERMINISM_OPTIONS
  assert xla_options.compiler_options(model, "tpu") is None


@pytest.mark.parametrize("name", ["small_cnn", "mlp"])
def test_small_models_keep_xla_defaults(name):
  assert xla_options.compiler_options(models.get(name, num_classes=10), "cpu") is None
  assert xla_options.compiler_options(models.get(name, num_classes=10), "tpu") is None


@pytest.mark.parametrize("name", ["small_cnn", "preact_resnet32"])
def test_gpu_programs_are_deterministic_unless_asked_otherwise(name):
  model = models.get(name, num_classes=10)
  assert xla_options.compiler_options(model, "gpu") == {"xla_gpu_deterministic_ops": True}
  assert xla_options.compiler_options(model, "gpu", deterministic=False) is None
  assert xla_options.compiler_options(model, "cpu", deterministic=False) == xla_options.compiler_options(model, "cpu")


def convolutions_in_ynn_fusions(hlo_text: str) -> tuple[int, int]:
  """(convolutions inside the fusions XLA hands to YNNPACK (kind '__ynn_fusion'), all convolutions) of a program."""
  bodies, current = {}, None
  for line in hlo_text.splitlines():
    header = re.match(r"^(?:ENTRY )?%([\w.\-]+) .*\{$", line)
    if header:
      current = bodies.setdefault(header.group(1), [])
    elif current is not None:
      current.append(line)
  called = re.findall(r"calls=%([\w.\-]+), [^\n]*__ynn_fusion", hlo_text)
  inside = sum(" convolution(" in line for name in called for line in bodies.get(name, []))
  return inside, len(re.findall(r" convolution\(", hlo_text))


def small_resnet_loss_and_input():
  model = PreActResNet(num_classes=10, widths=(32, 32), blocks_per_stage=(1, 1))  # > 16 channels: YNN's range
  x = jax.random.normal(jax.random.key(0), (8, 16, 16, 3))
  labels = jnp.arange(8) % 10
  variables = model.init(jax.random.key(1), x, train=False)

  def loss(params):
    logits, _ = model.apply(
      {"params": params, "batch_stats": variables["batch_stats"]}, x, train=True, mutable=["batch_stats"]
    )
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

  return model, jax.value_and_grad(loss), variables["params"]


def test_options_move_convolutions_off_ynnpack_and_keep_the_gradients():
  with jax.default_device(jax.devices("cpu")[0]):  # XLA:CPU's options, also where an accelerator is the default
    model, loss_and_grad, params = small_resnet_loss_and_input()
    _check_options_move_convolutions(model, loss_and_grad, params)


def _check_options_move_convolutions(model, loss_and_grad, params):
  options = xla_options.compiler_options(model, "cpu")
  assert options == XLA_CPU_COMPILER_OPTIONS  # this jaxlib accepts them (else None and a warning)
  default = jax.jit(loss_and_grad)
  tuned = jax.jit(loss_and_grad, compiler_options=options)
  # XLA's default hands most convolutions to YNNPACK; with the options only those that an elementwise YNN fusion
  # absorbs as its producer (the residual adds) stay there (ResNet-32's step: 73 of 98 by default, 12 with them).
  in_ynn_default, total = convolutions_in_ynn_fusions(default.lower(params).compile().as_text())
  in_ynn_tuned, total_tuned = convolutions_in_ynn_fusions(tuned.lower(params).compile().as_text())
  assert total == total_tuned > 0
  assert in_ynn_default > total // 2, (in_ynn_default, total)
  assert in_ynn_tuned < in_ynn_default // 2, (in_ynn_tuned, in_ynn_default)
  (loss_a, grads_a), (loss_b, grads_b) = default(params), tuned(params)
  np.testing.assert_allclose(loss_a, loss_b, rtol=1e-5)
  for a, b in zip(jax.tree.leaves(grads_a), jax.tree.leaves(grads_b)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_rejected_options_fall_back_to_defaults_with_a_warning(monkeypatch):
  class Model:
    xla_cpu_compiler_options = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_NO_SUCH_TYPE"}

  warnings = []
  monkeypatch.setattr(logging, "warning", lambda message, *args: warnings.append(message % args))
  assert xla_options.compiler_options(Model(), "cpu") is None
  assert len(warnings) == 1 and "LIBRARY_FUSION_TYPE_NO_SUCH_TYPE" in warnings[0]


def test_the_suites_flags_differentiate_a_pooling_cnn_consistently():
  """Under the XLA flags the suite compiles with (tests/conftest.py), the SmallCNN's reverse-mode gradient along a
  direction equals its forward-mode derivative. With LLVM's optimisation off (--xla_backend_optimization_level=0,
  JAX 0.10.2 and 0.12.0.1 on an AMD EPYC) the forward mode gave NaN and the gradient another number (+1.70 for
  -2.16), on three stages of conv, BatchNorm, ReLU and max-pool of [5, 28, 28, 1] images; level 1 and the default
  agree with each other to 1e-5."""
  x = jax.random.normal(jax.random.PRNGKey(0), (5, 28, 28, 1)) * 2.0 + 0.5
  model = models.get("small_cnn", num_classes=4)
  variables = model.init(jax.random.PRNGKey(1), x, train=False)

  def loss(params):
    logits, _ = model.apply(
      {"params": params, "batch_stats": variables["batch_stats"]}, x, train=True, mutable=["batch_stats"]
    )
    return jnp.sum(jax.nn.log_softmax(logits)[:, 0])

  params = variables["params"]
  direction = jax.tree.map(lambda p: jax.random.normal(jax.random.PRNGKey(5), p.shape), params)
  grads = jax.jit(jax.grad(loss))(params)
  _, forward = jax.jit(lambda p, d: jax.jvp(loss, (p,), (d,)))(params, direction)
  reverse = sum(jnp.sum(g * d) for g, d in zip(jax.tree.leaves(grads), jax.tree.leaves(direction)))
  assert np.isfinite(forward) and float(forward) == pytest.approx(float(reverse), rel=1e-4, abs=1e-4)
