"""PES as a method (noisy_jax.methods.pes): its stages, its epoch program and its evidence, against plain
re-computations."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

import method_program_harness as harness
from noisy_jax.core import label_table as label_table_lib
from noisy_jax.experiment import stages as stages_lib
from noisy_jax.methods import pes
from noisy_jax.methods import spec as spec_lib
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import optim

NUM_EXAMPLES, NUM_CLASSES, BATCH = 40, 3, 8


def test_pes_declares_warmup_refines_and_its_own_stage_on_one_clock():
  method_config = ml_collections.ConfigDict({"name": "pes"})
  stages = spec_lib.check_stages(pes.stages(method_config), "pes")
  assert [s.name for s in stages] == ["warmup", "refine1", "refine2", "stage1"]
  assert [s.renew for s in stages] == [(), *pes.REFINE_MODULES, ()]
  assert [s.trainable for s in stages] == [(), *pes.REFINE_MODULES, ()]
  assert [s.network for s in stages] == ["fresh"] + ["previous_final"] * 3
  assert stages[-1].optimizer_from == "warmup" and stages[-1].delivers and stages[-1].scores_labels
  config = ml_collections.ConfigDict(
    {
      "num_epochs": 174,
      "optimizer": {"learning_rate": 0.1},
      "warmup": {"num_epochs": 25},
      "refine1": {"num_epochs": 7},
      "refine2": {"num_epochs": 5},
    }
  )
  clocks = [stages_lib.stage_clock(s, stages_lib.config_of_stage(config, s)) for s in stages]
  assert clocks == [25, 0, 1, 174]  # stage1 starts at loop epoch T1 + 1 = 26 (0-based), 200 in all
  assert stages_lib.config_of_stage(config, stages[1]).optimizer.trainable_modules == list(pes.REFINE_MODULES[0])
  with pytest.raises(ValueError, match="refine_modules"):
    pes.stages(ml_collections.ConfigDict({"refine_modules": [[]]}))


def _setup(seed=0):
  images, given, _ = harness.tiny_data(seed, NUM_EXAMPLES, NUM_CLASSES)
  return images, given, harness.tiny_model(NUM_CLASSES, use_batch_norm=False)


def _pes_epoch(settings, images, given, model, *, lr_boundaries=(6,), epoch=2):
  steps_per_epoch = -(-NUM_EXAMPLES // BATCH)
  state = harness.train_state(
    model, num_examples=NUM_EXAMPLES, batch=BATCH, run_epochs=10, learning_rate=0.5, lr_boundaries=lr_boundaries
  )
  table = harness.given_table(given, NUM_CLASSES, pes.init_rows(NUM_EXAMPLES))
  epoch_fn = pes.make_epoch_fn(mesh_lib.make_mesh(1), settings=settings, batch_size=BATCH, num_examples=NUM_EXAMPLES)
  start, key, out = harness.run_epoch(epoch_fn, state, table, images, epoch)
  return start, key, steps_per_epoch, out


def test_one_pes_epoch_is_the_selection_then_class_weighted_steps_over_the_selected_rows():
  images, given, model = _setup()
  settings = pes.PesSettings(epochs_before=5)
  start, key, steps_per_epoch, (state, table, metrics) = _pes_epoch(settings, images, given, model)
  # The selection and weights, in NumPy (PES_cs.py:82-99): eval-mode softmax (two identical views without
  # augmentation), argmax == given label, w_c = mean_{k present} n_k / n_c.
  logits = np.asarray(model.apply(start, jnp.asarray(images), train=False), np.float64)
  probs = np.exp(logits - logits.max(1, keepdims=True))
  probs /= probs.sum(1, keepdims=True)
  selected = probs.argmax(1) == given
  counts = np.bincount(given[selected], minlength=NUM_CLASSES).astype(float)
  weights = np.where(counts > 0, counts[counts > 0].mean() / np.maximum(counts, 1), 0.0)
  np.testing.assert_array_equal(np.asarray(table.method_rows[pes.SELECTED]) == 1, selected)
  np.testing.assert_allclose(table.method_rows[pes.GIVEN_PROBABILITY], probs[np.arange(NUM_EXAMPLES), given], 1e-5)
  np.testing.assert_allclose(float(metrics["pes_selected_fraction"]), selected.mean(), rtol=1e-6)
  # The steps: the selected rows in the epoch's order, n_selected // B full batches; PyTorch's weighted CE mean;
  # SGD (momentum 0.9, coupled wd 0.01) at the run's lr of loop epoch 5 + 2 - 1 = 6: 0.5 x 0.1 past boundary 6.
  order = pes.selected_order(jax.random.fold_in(key, pes.ORDER_STREAM), selected, BATCH)
  assert order.shape == (selected.sum() // BATCH, BATCH) and order.shape[0] >= 1
  assert set(order.ravel()) <= set(np.flatnonzero(selected)) and len(set(order.ravel())) == order.size
  params = jax.tree.map(jnp.asarray, start["params"])
  sgd, opt_state = harness.reference_sgd(0.05, params)

  def loss(p, rows):
    z = model.apply({"params": p}, jnp.asarray(images[rows]), train=True)
    ce = -jax.nn.log_softmax(z)[jnp.arange(len(rows)), given[rows]]
    w = jnp.asarray(weights)[given[rows]]
    return jnp.sum(w * ce) / jnp.sum(w)

  for rows in order:
    updates, opt_state = sgd.update(jax.grad(loss)(params, rows), opt_state, params)
    params = optax.apply_updates(params, updates)
  harness.assert_trees_close(state.params, params, rtol=2e-5, atol=1e-6)


def test_code_freeze_renewed_keeps_the_renewed_modules_as_the_refines_left_them():
  images, given, model = _setup(1)
  settings = pes.PesSettings(refine_modules=((optim.CLASSIFIER,),), code_freeze_renewed=True)
  start, _, _, (state, _, _) = _pes_epoch(settings, images, given, model, lr_boundaries=())
  np.testing.assert_array_equal(state.params["Dense_1"]["kernel"], start["params"]["Dense_1"]["kernel"])
  assert not np.allclose(state.params["Dense_0"]["kernel"], start["params"]["Dense_0"]["kernel"])


def test_the_label_evidence_is_the_last_selection():
  table = label_table_lib.with_method_rows(
    label_table_lib.create(jnp.zeros(3, jnp.int32), 2),
    {pes.SELECTED: jnp.asarray([1.0, 0.0, 1.0]), pes.GIVEN_PROBABILITY: jnp.asarray([0.9, 0.2, 0.6])},
  )
  evidence = pes.method(pes.PesSettings()).label_evidence(table)
  np.testing.assert_array_equal(evidence.is_issue, [False, True, False])
  np.testing.assert_allclose(evidence.quality, [0.9, 0.2, 0.6])
