"""`Method.program` and `train.epoch.make_method_epoch_fn`: which epoch program a method gets, and what each kind
is given (the strong view, the shared program, the options); the trainer and the epoch benchmark build through it."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.configs import tiny
from noisy_jax.experiment import runs
from noisy_jax.methods import plain_loss
from noisy_jax.parallel import mesh as mesh_lib
from noisy_jax.train import epoch as epoch_lib
from noisy_jax.train import method as method_lib


def _two_view_method(program: method_lib.EpochProgram) -> method_lib.Method:
  def objective(logits, soft_labels, weights, valid, axis_name=None, *, rows, strong_logits=None, **unused):
    del strong_logits, unused
    return plain_loss.method("cross_entropy").objective(logits, soft_labels, weights, valid, axis_name, rows=rows)

  return method_lib.Method(name="two_views", objective=objective, strong_view=True, program=program)


def _view(key, codes, rows):
  return codes


def test_a_method_without_its_own_program_gets_the_shared_one_and_keeps_its_state():
  method = plain_loss.method("cross_entropy")
  assert method.program is method_lib.SHARED_PROGRAM and not method.program.own
  state = {"params": np.ones(3)}
  assert method.program.init_state(state) is state
  built = epoch_lib.make_method_epoch_fn(method, mesh_lib.make_mesh(1), batch_size=4, num_examples=10)
  assert callable(built)


def test_an_own_program_gets_the_strong_view_and_the_shared_program_trains_on_the_weak_view_only(monkeypatch):
  shared_calls, own_calls = [], []
  real = epoch_lib.make_epoch_fn

  def shared(method, mesh, **options):
    shared_calls.append(options)
    return real(method, mesh, **options)

  monkeypatch.setattr(epoch_lib, "make_epoch_fn", shared)

  def build(mesh, shared_epoch_fn, **options):
    own_calls.append((shared_epoch_fn, options))
    return "own epoch program"

  mesh = mesh_lib.make_mesh(1)
  own = _two_view_method(method_lib.EpochProgram(build=build))
  got = epoch_lib.make_method_epoch_fn(own, mesh, batch_size=4, num_examples=10, strong_view=_view, mode="steps")
  assert got == "own epoch program"
  assert shared_calls[-1]["strong_view"] is None and shared_calls[-1]["mode"] == "steps"
  shared_fn, options = own_calls[-1]
  assert callable(shared_fn)
  assert options["strong_view"] is _view and options["axis"] == mesh_lib.AXIS
  assert {"batch_size", "num_examples", "augment", "compiler_options", "normalize"} <= set(options)
  assert "mode" not in options  # the shared program's own options stay with it

  plain = _two_view_method(method_lib.SHARED_PROGRAM)  # the same method on the shared program: the step gets the view
  epoch_lib.make_method_epoch_fn(plain, mesh, batch_size=4, num_examples=10, strong_view=_view)
  assert shared_calls[-1]["strong_view"] is _view


def test_an_own_program_refuses_streamed_input():
  method = _two_view_method(method_lib.EpochProgram(build=lambda mesh, shared, **options: shared))
  with pytest.raises(ValueError, match=r"'two_views' trains from resident data"):
    epoch_lib.make_method_epoch_fn(
      method, mesh_lib.make_mesh(1), batch_size=4, num_examples=10, source=np.zeros((10, 2), np.uint8)
    )


def test_the_trainer_refuses_checkpoints_inside_the_epochs_of_an_own_program():
  config = tiny.get_config("dividemix")
  config.epoch_mode, config.checkpoint_every_steps = "steps", 2
  with pytest.raises(ValueError, match=r"'dividemix' runs its own epoch program.*checkpoint_every_steps=0"):
    runs.run_single(config)
