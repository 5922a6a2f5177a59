"""Argument validation shared by the library: clear ValueErrors naming the bad value.

A value outside its range or its choices (`check_range`, `check_choice`) is an input to correct, most often a config
value: errors.InputError (a ValueError), which the commands print without a traceback. A malformed array
(`check_labels`, `check_same_shape`) stays a plain ValueError.
"""

from __future__ import annotations

import numbers

import numpy as np

from noisy_jax.core import errors


def is_concrete(value) -> bool:
  """True when `value` can be inspected on the host (not a tracer under jit/grad)."""
  try:
    np.asarray(value)
  except Exception:  # jax tracers refuse conversion to NumPy.
    return False
  return True


def check_range(name: str, value, low, high, *, low_open: bool = False, high_open: bool = False) -> None:
  """Raises errors.InputError (a ValueError) unless low <(=) value <(=) high (skipped for traced values).

  Works for scalars and arrays (every element is checked).
  """
  if not is_concrete(value):
    return
  arr = np.asarray(value, dtype=np.float64)
  ok_low = arr > low if low_open else arr >= low
  ok_high = arr < high if high_open else arr <= high
  if not (np.all(ok_low) and np.all(ok_high)) or np.any(np.isnan(arr)):
    interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    shown = value if isinstance(value, numbers.Number) else arr[~(ok_low & ok_high)][:5]
    raise errors.InputError(f"{name}={shown!r} is outside the allowed range {interval}.")


def check_choice(name: str, value, allowed) -> None:
  """Raises errors.InputError (a ValueError) unless value is one of `allowed`, listing them."""
  if value not in allowed:
    raise errors.InputError(f"Unknown {name} {value!r}; allowed: {', '.join(map(repr, sorted(allowed)))}.")


def check_labels(name: str, labels, num_classes: int) -> np.ndarray:
  """Checks integer class ids in [0, num_classes); returns them as an int64 NumPy array."""
  arr = np.asarray(labels)
  if arr.ndim != 1:
    raise ValueError(f"{name} must be a 1-D vector of class ids, got shape {arr.shape}.")
  if arr.size and not np.issubdtype(arr.dtype, np.integer):
    if not np.all(np.equal(np.mod(arr, 1), 0)):
      raise ValueError(f"{name} must hold integer class ids, got dtype {arr.dtype}.")
  arr = arr.astype(np.int64)
  bad = arr[(arr < 0) | (arr >= num_classes)]
  if bad.size:
    raise ValueError(
      f"{name} holds class id {int(bad[0])} outside the allowed range [0, {num_classes - 1}] "
      f"(num_classes={num_classes})."
    )
  return arr


def check_same_shape(name_a: str, a, name_b: str, b) -> None:
  """Raises ValueError when two arrays' shapes differ."""
  if tuple(np.shape(a)) != tuple(np.shape(b)):
    raise ValueError(
      f"{name_a} has shape {tuple(np.shape(a))} but {name_b} has shape {tuple(np.shape(b))}; they must match."
    )
