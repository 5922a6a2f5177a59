"""The stage options a method declares (spec.Stage renew / trainable / optimizer_from / clock_epochs) and the
optimiser's trainable_modules, each against a plain re-computation (PES's refines are their first user)."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from noisy_jax import models
from noisy_jax.experiment import settings as settings_lib
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.methods import spec as spec_lib
from noisy_jax.train import optim
from noisy_jax.train import state as state_lib

NUM_CLASSES = 3
SHAPE = (4, 4, 1)


def _params():
  return {
    "stem": {"w": jnp.linspace(-1.0, 1.0, 6).reshape(2, 3)},
    "stage4_block1": {"w": jnp.ones((3,)), "b": jnp.arange(3.0)},
    "stage4_block2": {"w": -jnp.ones((2,))},
    "head": {"w": jnp.full((3,), 0.5)},
  }


def test_trainable_modules_train_as_the_plain_optimizer_on_their_own_parameters_and_freeze_the_rest():
  settings = {"learning_rate": 0.1, "momentum": 0.9, "weight_decay": 0.01, "lr_boundaries": ()}
  restricted = optim.make_optimizer(
    settings_lib.optimizer_settings(
      ml_collections.ConfigDict({**settings, "trainable_modules": ["stage4", optim.CLASSIFIER]})
    ),
    3,
    classifier="head",
  )
  plain = optax.chain(optax.add_decayed_weights(0.01), optax.sgd(0.1, momentum=0.9))
  params = _params()
  trained = {k: params[k] for k in ("stage4_block1", "stage4_block2", "head")}
  state, plain_state = restricted.init(params), plain.init(trained)
  rng = np.random.default_rng(0)
  for _ in range(3):
    grads = jax.tree.map(lambda p: jnp.asarray(rng.normal(size=p.shape), p.dtype), params)
    updates, state = restricted.update(grads, state, params)
    plain_updates, plain_state = plain.update({k: grads[k] for k in trained}, plain_state, trained)
    assert np.all(np.asarray(updates["stem"]["w"]) == 0.0)
    for name in trained:
      for leaf, expected in zip(jax.tree.leaves(updates[name]), jax.tree.leaves(plain_updates[name]), strict=True):
        np.testing.assert_allclose(leaf, expected, rtol=1e-6)
    params = optax.apply_updates(params, updates)
    trained = optax.apply_updates(trained, plain_updates)


@pytest.mark.parametrize(
  "entries, classifier, message",
  [(["stage5"], "head", "'stage5' names no module"), ([optim.CLASSIFIER], None, "classifier is not known")],
)
def test_trainable_modules_that_name_nothing_are_refused(entries, classifier, message):
  config = ml_collections.ConfigDict({"learning_rate": 0.1, "trainable_modules": entries})
  with pytest.raises(ValueError, match=message):
    optim.make_optimizer(settings_lib.optimizer_settings(config), 3, classifier=classifier).init(_params())


def _result(stage, variables, opt_state=None):
  state = state_lib.TrainState.create(
    apply_fn=None, params=variables["params"], tx=optax.sgd(0.1, momentum=0.9), batch_stats=variables["batch_stats"]
  )
  if opt_state is not None:
    state = state.replace(opt_state=opt_state)
  return stages_lib.StageResult(stage, None, None, state, None, [], variables)


def test_a_renewed_module_comes_from_the_fresh_initialisation_params_and_statistics():
  model = models.build("mlp", NUM_CLASSES, SHAPE, kwargs={"hidden_sizes": (5,)})
  init = lambda seed: jax.tree.map(
    np.asarray, model.init(jax.random.PRNGKey(seed), jnp.zeros((1, *SHAPE)), train=False)
  )
  trained, fresh = init(0), init(1)
  stage = spec_lib.Stage("refine1", network="previous_final", renew=(optim.CLASSIFIER, "BatchNorm"))
  started = stages_lib.previous_network(_result(stage, trained), stage, model)(fresh)
  assert set(started["params"]) == {"Dense_0", "BatchNorm_0", "Dense_1"}
  for collection, name, source in [
    ("params", "Dense_0", trained),
    ("params", "BatchNorm_0", fresh),
    ("params", "Dense_1", fresh),  # the MLP's classifier
    ("batch_stats", "BatchNorm_0", fresh),
  ]:
    for got, want in zip(jax.tree.leaves(started[collection][name]), jax.tree.leaves(source[collection][name])):
      np.testing.assert_array_equal(got, want)
  assert not np.array_equal(trained["params"]["Dense_1"]["kernel"], fresh["params"]["Dense_1"]["kernel"])


def test_a_continued_optimiser_starts_from_the_earlier_stages_state_and_refuses_another_structure():
  params = {"a": jnp.ones(3)}
  saved = optax.sgd(0.1, momentum=0.9).init(params)
  saved = jax.tree.map(lambda x: x + 2.0 if x.dtype == jnp.float32 else x, saved)
  earlier = _result(spec_lib.Stage("warmup"), {"params": params, "batch_stats": {}}, saved)
  start = stages_lib.continued_optimizer(earlier)
  got = start(optax.sgd(0.1, momentum=0.9).init(params))
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(saved), strict=True):
    np.testing.assert_array_equal(a, b)
  with pytest.raises(ValueError, match="continues the optimiser of stage 'warmup'"):
    start(optax.adam(0.1).init(params))


def test_stage_declarations_that_make_no_run_are_refused():
  with pytest.raises(ValueError, match="needs a network from a previous stage"):
    spec_lib.Stage("x", renew=("head",))
  with pytest.raises(ValueError, match="clock_epochs"):
    spec_lib.Stage("x", clock_epochs=-1)
  own = spec_lib.Stage("stage1", delivers=True, scores_labels=True, optimizer_from="later")
  with pytest.raises(ValueError, match="not an earlier stage"):
    spec_lib.check_stages((own, spec_lib.Stage("later", build=lambda c, x: None, network="previous_final")), "m")


def test_a_continued_optimiser_forgets_the_state_of_modules_renewed_since():
  params = {"body": {"w": jnp.ones(3)}, "head": {"w": jnp.ones(2)}}
  tx = optax.sgd(optax.constant_schedule(0.1), momentum=0.9)
  state = tx.init(params)
  _, state = tx.update(jax.tree.map(jnp.ones_like, params), state, params)  # momentum 1 everywhere, count 1
  earlier = _result(spec_lib.Stage("warmup"), {"params": params, "batch_stats": {}}, state)
  stages = (
    spec_lib.Stage("warmup"),
    spec_lib.Stage("refine", network="previous_final", renew=(optim.CLASSIFIER,)),
    spec_lib.Stage("stage1", network="previous_final", optimizer_from="warmup"),
  )
  model = models.build("mlp", NUM_CLASSES, SHAPE, kwargs={"hidden_sizes": ()})  # its classifier: Dense_0
  assert stages_lib.renewed_since(stages, 2, {"Dense_0": {}, "other": {}}, model) == {"Dense_0"}
  got = stages_lib.continued_optimizer(earlier, {"head"})(tx.init(params))
  traces = [leaf for leaf in jax.tree.leaves(got) if np.ndim(leaf) == 1]
  counts = [leaf for leaf in jax.tree.leaves(got) if np.ndim(leaf) == 0]
  np.testing.assert_array_equal(traces[0], np.ones(3))  # body: its momentum kept
  np.testing.assert_array_equal(traces[1], np.zeros(2))  # head: renewed, no history
  assert counts and all(int(c) == 1 for c in counts)  # the schedule's count kept
