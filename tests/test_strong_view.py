"""The strong view of methods that train on two views (noisy_jax.train.views) and how the step forwards it.

The view is SOP's transform_train_aug order (policy, crop, flip, Normalize, Cutout) built from noisy_jax's
torchvision-equal operations (tests/test_autoaugment.py checks those); here: that order, the hole at the
normalisation mean, independence from the batch split and from the weak view, the step's one forward pass over
[weak; strong], and the trainer's refusal of a config and a method that disagree.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from noisy_jax import models
from noisy_jax.core import augment as augment_lib
from noisy_jax.core import autoaugment
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.data import normalization
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.methods import plain_loss
from noisy_jax.methods import sop
from noisy_jax.train import loop
from noisy_jax.train import method as method_lib
from noisy_jax.train import state as state_lib
from noisy_jax.train import step as step_lib
from noisy_jax.train import views

RNG = np.random.default_rng(0)
CODES = RNG.integers(0, 256, (8, 16, 16, 3), dtype=np.uint8)  # small: the policy compiles every operation
ROWS = np.array([5, 0, 17, 3, 9, 11, 2, 30], np.int32)
NORMALIZE = normalization.Normalization(
  "per_channel", 255.0, np.array([0.49, 0.48, 0.45], np.float32), np.array([0.2, 0.2, 0.2], np.float32)
)
WEAK = augment_lib.make_augment(crop_padding=4, flip=True)
SOP_PLUS = {"policy": "autoaugment_cifar10", "cutout": 8}


def test_the_view_is_policy_normalize_crop_flip_then_cutout_at_the_mean():
  view = jax.jit(views.make_strong_view(SOP_PLUS, normalize=NORMALIZE, weak=WEAK))  # eager: an op at a time
  key = jax.random.PRNGKey(3)
  got = np.asarray(view(key, CODES, ROWS))
  policy = jax.jit(autoaugment.autoaugment)(jax.random.fold_in(key, 1), CODES, ROWS)
  before_cutout = np.asarray(WEAK(jax.random.fold_in(key, 3), NORMALIZE(policy), ROWS))
  centers = np.asarray(autoaugment.cutout_centers(jax.random.fold_in(key, 2), ROWS, image_size=(16, 16)))
  for b, (cy, cx) in enumerate(centers):
    hole = np.zeros((16, 16), bool)
    hole[max(cy - 4, 0) : cy + 4, max(cx - 4, 0) : cx + 4] = True  # CutoutDefault's clipped square
    np.testing.assert_array_equal(got[b][hole], 0.0)  # the normalisation mean, as Cutout after Normalize
    np.testing.assert_array_equal(got[b][~hole], before_cutout[b][~hole])
  # A function of (key, row), not of the position in the batch: the batch reordered gives the images reordered.
  order = np.array([5, 2, 7, 0, 1, 6, 3, 4])
  np.testing.assert_array_equal(np.asarray(view(key, CODES[order], ROWS[order])), got[order])
  # The strong view's crop and flip are not the weak view's: their offsets and flips come from another key.
  weak_draws = augment_lib.example_draws(key, ROWS, padding=4)
  strong_draws = augment_lib.example_draws(jax.random.fold_in(key, 3), ROWS, padding=4)
  assert not np.array_equal(np.asarray(weak_draws[0]), np.asarray(strong_draws[0]))
  assert views.make_strong_view({"policy": "none"}, normalize=NORMALIZE, weak=WEAK) is None
  assert views.make_strong_view(None, normalize=NORMALIZE, weak=WEAK) is None
  with pytest.raises(ValueError, match="Unknown strong augment policy='autoaugment_imagenet'"):
    views.make_strong_view({"policy": "autoaugment_imagenet"}, normalize=NORMALIZE, weak=WEAK)


def test_the_step_forwards_both_views_as_one_batch():
  """A probe objective sum(strong_logits): after one SGD step the parameters and BatchNorm statistics are those of
  one forward pass of the small CNN over [weak; strong] (2b rows), differentiated by hand."""
  probe = method_lib.Method(
    name="probe",
    objective=lambda logits, *args, rows, strong_logits, **unused: (jnp.sum(strong_logits), rows),
    strong_view=True,
  )
  model = models.build("small_cnn", 10, (16, 16, 3), bn_axis_name=None)
  tx = optax.sgd(0.1)
  state = state_lib.create_train_state(model, jax.random.PRNGKey(0), (16, 16, 3), tx)
  table = label_table_lib.create(np.arange(40) % 10, 10)
  weak = NORMALIZE(CODES[:4])
  strong = NORMALIZE(CODES[4:])
  new_state, _, _ = step_lib.train_step(
    state, table, weak, ROWS[:4], np.ones(4, bool), method=probe, epoch=1, axis_name=None, strong_images=strong
  )

  def by_hand(params):
    logits, updates = model.apply(
      {"params": params, "batch_stats": state.batch_stats},
      jnp.concatenate([weak, strong]),
      train=True,
      mutable=["batch_stats"],
    )
    return jnp.sum(logits[4:]), updates["batch_stats"]

  grads, batch_stats = jax.grad(by_hand, has_aux=True)(state.params)
  want = optax.apply_updates(state.params, tx.update(grads, tx.init(state.params))[0])
  for got, expected in zip(jax.tree.leaves(new_state.params), jax.tree.leaves(want)):
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
  for got, expected in zip(jax.tree.leaves(new_state.batch_stats), jax.tree.leaves(batch_stats)):
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
  with pytest.raises(ValueError, match="method 'probe' needs strong view"):
    step_lib.train_step(state, table, weak, ROWS[:4], np.ones(4, bool), method=probe, epoch=1, axis_name=None)


def _strong_view_of(config, method):
  """The trainer's strong view for `method` under `config`, read as a run reads it (experiment.settings)."""
  return loop._strong_view(settings_lib.fit_settings(config), method, normalize=NORMALIZE, weak=WEAK)  # pylint: disable=protected-access


def test_the_trainer_refuses_a_config_and_a_method_that_disagree():
  config = ml_collections.ConfigDict(
    {"batch_size": 8, "num_epochs": 1, "optimizer": {"learning_rate": 0.1}, "augment": {"crop_padding": 4}}
  )
  with pytest.raises(ValueError, match=r"method 'sop' trains on a weak and a strong view.*config.augment.strong"):
    _strong_view_of(config, sop.method(ratio_consistency=0.9))
  config.augment.strong = SOP_PLUS
  with pytest.raises(ValueError, match="config.augment.strong=.* method 'cross_entropy' trains on one view"):
    _strong_view_of(config, plain_loss.method("cross_entropy"))
  assert _strong_view_of(config, sop.method(ratio_consistency=0.9)).config == {
    "policy": "autoaugment_cifar10",
    "cutout": 8,
  }
