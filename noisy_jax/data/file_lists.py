"""List files of the published noisy-label datasets: shared by noisy_jax.data.clothing1m and webvision.

  rows = read_path_labels("ROOT/info/val_filelist.txt")   # [(line number, 'ILSVRC2012_val_00000001.JPEG', 0), ...]
  i = first_missing("ROOT", ["images/0/00/1,1.jpg", ...])    # index of the first path that is not a file, or None

A list file holds one '<path> <integer label>' pair per line (blank lines are skipped); the label is the last
whitespace-separated field, so a path may not end in whitespace but may hold spaces.
"""

from __future__ import annotations

import os
import re
from typing import Sequence

from noisy_jax.core import errors

_INTEGER = re.compile(r"-?[0-9]+")


def read_path_labels(path: str) -> list[tuple[int, str, int]]:
  """The '<path> <integer label>' lines of the list file `path`, as (line number from 1, path, label).

  Raises:
    FileNotFoundError: naming `path` when it is missing.
    ValueError: naming `path` and the line for a line that is not '<path> <integer label>'.
  """
  if not os.path.isfile(path):
    raise errors.MissingInputError(f"list file {path!r} does not exist.")
  rows = []
  with open(path, encoding="utf-8") as f:
    for number, line in enumerate(f, start=1):
      line = line.strip()
      if not line:
        continue
      fields = line.rsplit(maxsplit=1)
      if len(fields) != 2 or not _INTEGER.fullmatch(fields[1]):
        raise errors.InputError(f"{path}, line {number}: {line!r} is not '<image path> <integer label>'.")
      rows.append((number, fields[0], int(fields[1])))
  return rows


def first_missing(base: str, paths: Sequence[str]) -> int | None:
  """The index of the first of `paths` (relative to `base`) that is not a file, in list order; None when all are.

  Each folder is listed once (os.listdir) rather than each file stat'ed, so a list of a million images in a
  thousand folders costs a thousand directory reads. A name the listing lacks is stat'ed before it counts as
  missing (case-insensitive file systems).
  """
  listed: dict[str, frozenset] = {}
  for i, relative in enumerate(paths):
    full = os.path.join(base, relative)
    folder, name = os.path.split(full)
    names = listed.get(folder)
    if names is None:
      try:
        names = frozenset(os.listdir(folder or "."))
      except (FileNotFoundError, NotADirectoryError):
        names = frozenset()
      listed[folder] = names
    if name not in names and not os.path.isfile(full):
      return i
  return None
