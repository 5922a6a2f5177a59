"""Members: several networks of one program, as rows of stacked pytrees ([M, ...] leaves).

Two users: a sweep (noisy_jax.experiment.sweep: M independent runs, seeds x hyper-parameters, in one compiled program)
and the two-network methods (Co-teaching: M = 2 coupled networks in one train step, noisy_jax.train). Both map a
per-network function over the member axis in one of two ways:

  'vmap'  jax.vmap over the members: one kernel for all of them. What accelerators want, and the MLP on CPU.
  'loop'  each member on its own buffers: in a compiled program (`map_members`) a Python loop over the members
          traced into one program; across calls (`member_program`) one jitted per-member program called M times.
          XLA's CPU backend runs a vmapped convolution (a different kernel per member) as a grouped convolution,
          ~4x slower per member than the plain one on a 2-core CPU, so convolutional networks loop there.
  'auto'  'loop' on CPU for any model but the MLP, 'vmap' otherwise (`resolve_member_map`).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from noisy_jax.core import _checks

MEMBER_MAPS = ("auto", "vmap", "loop")


def resolve_member_map(member_map: str, platform: str, model_name: str) -> str:
  """'vmap' or 'loop' for `member_map` on devices of `platform` for the (resolved) model name (module docstring)."""
  _checks.check_choice("member_map", member_map, MEMBER_MAPS)
  if member_map != "auto":
    return member_map
  return "loop" if platform == "cpu" and model_name != "mlp" else "vmap"


def map_members(fn: Callable, member_map: str) -> Callable:
  """`mapped(*args) -> out`: fn applied to row m of every argument (all with a member axis [M, ...]), the results
  stacked on a new leading axis; to be called inside a traced function (the two networks' forward pass).

  'vmap' is jax.vmap(fn); 'loop' traces fn once per member on its own slices (row m of each argument) and stacks
  the results: the same values, and on CPU plain (not grouped) convolutions.
  """
  _checks.check_choice("member_map", member_map, ("vmap", "loop"))
  if member_map == "vmap":
    return jax.vmap(fn)

  def mapped(*args):
    size = jax.tree.leaves(args)[0].shape[0]
    return stack([fn(*take(args, m)) for m in range(size)])

  return mapped


def take(tree, m):
  return jax.tree.map(lambda x: x[m], tree)


def stack(trees):
  return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def member_program(
  fn: Callable, in_axes: tuple, member_map: str, compiler_options: dict[str, str] | None = None
) -> Callable:
  """`program(carry, *rest) -> carry` applying `fn(member_carry, *member_rest) -> member_carry` to every member.

  carry: a pytree with a leading member axis [M, ...] (donated: do not reuse it after the call), or the list of
  members that `program.split(carry)` returns (`program.join(parts)` stacks them again): the form to keep between
  calls when calling it many times. rest: arguments with a member axis (in_axes 0) or shared by all members (None).
  'vmap': one jitted vmap over the members (split / join only wrap the carry in a list). 'loop': one jitted
  per-member program, called for m = 0..M-1 on member m's own buffers (donated) with row m of `rest`.
  compiler_options: XLA options for that program (`train.compiler_options`).

  Why 'loop' splits the carry instead of updating row m of the stacked buffers in place: XLA copies every whole
  [M, ...] buffer per call then (the SGD update reads the old row while the write-back overwrites it), ~26 MB twice
  per small-CNN step at M = 30, ~1.6x slower per member, and worse as M grows.
  """
  if member_map == "vmap":
    jitted = jax.jit(jax.vmap(fn, in_axes=(0, *in_axes)), donate_argnums=0, compiler_options=compiler_options)

    def program(carry, *rest):
      return [jitted(carry[0], *rest)] if isinstance(carry, list) else jitted(carry, *rest)

    program.split, program.join = (lambda carry: [carry]), (lambda parts: parts[0])
    return program

  def one_member(member_carry, m, *rest):
    return fn(member_carry, *[arg if axis is None else take(arg, m) for arg, axis in zip(rest, in_axes)])

  jitted = jax.jit(one_member, donate_argnums=0, compiler_options=compiler_options)
  split = jax.jit(lambda carry: [take(carry, m) for m in range(jax.tree.leaves(carry)[0].shape[0])])
  join = jax.jit(stack)

  def program(carry, *rest):
    parts = carry if isinstance(carry, list) else split(carry)
    parts = [jitted(part, np.int32(m), *rest) for m, part in enumerate(parts)]
    return parts if isinstance(carry, list) else join(parts)

  program.split, program.join = split, join
  return program
