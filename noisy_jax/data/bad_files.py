"""Image files that do not decode: what a dataset of files does with them, and the run's list of those it skipped.

Two options of every loader of files (noisy_jax.data.disk and the readers of published layouts), given on the command
line as --config.dataset_kwargs.on_bad_file=skip and --config.dataset_kwargs.max_bad_fraction=0.02:

  on_bad_file='error' (default): the first bad file stops the run, its error naming it; nothing is written.
  on_bad_file='skip': bad files are left out and listed.
    Decoded at load (resident input, and evaluation splits): the row is dropped from its split after the
      validation carving, so every other file is in the split and order it would have if the bad file were good.
      A dropped training row has no row in the label table.
    Streamed (the training split read batch by batch, noisy_jax.parallel.streaming): the file is met when its batch
      is read; the row keeps its place (the label table keeps its N rows) and is masked as a padding row is: its
      image is zeros, it is invalid (no loss, no accuracy count, no table update) and, as a padding row, it is part
      of that batch's BatchNorm statistics. It is met again every epoch and listed once.
  max_bad_fraction (default DEFAULT_MAX_FRACTION, 1%): more than this fraction of the dataset's files (all splits)
    skipped stops the run with an error naming the first of them (at load, or when streaming meets one too many).

A bad file is one pillow cannot decode into 8-bit pixels (images.BadImageFile: not an image, truncated, 16-bit or
float) or one that disappeared after listing (FileNotFoundError). A file that decodes but does not fit the split (a
size different from the others without image_size, colour in a grayscale split) is a setting to change and stops the
run with either option.

The run's list: WORKDIR/skipped_files.txt (FILE_NAME), tab-separated, one line per skipped file after the header
`split  file  error` (the split, the file as the dataset's sources name it, the decoder's message), sorted by split
and file; summary.json counts them (summary["skipped_files"]). It is rewritten whole (write and rename) each time a
file is added; a resumed run reads it back, so a file met before the kill stays listed.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from typing import Iterable

from noisy_jax.core import atomic_files

ON_BAD_FILE = ("error", "skip")
DEFAULT_MAX_FRACTION = 0.01
FILE_NAME = "skipped_files.txt"
_COLUMNS = ("split", "file", "error")


@dataclasses.dataclass(frozen=True, order=True)
class Skipped:
  """One skipped file: its split ('train', 'val', 'test'), its name (the dataset's source) and the error."""

  split: str
  file: str
  error: str


def check_options(on_bad_file: str, max_bad_fraction) -> tuple[str, float]:
  """(on_bad_file, max_bad_fraction) checked; ValueError naming a bad value and what is allowed."""
  if on_bad_file not in ON_BAD_FILE:
    raise ValueError(f"on_bad_file={on_bad_file!r} must be one of {', '.join(map(repr, ON_BAD_FILE))}.")
  if (
    isinstance(max_bad_fraction, bool)
    or not isinstance(max_bad_fraction, numbers.Real)
    or not 0.0 <= float(max_bad_fraction) <= 1.0
  ):
    raise ValueError(
      f"max_bad_fraction={max_bad_fraction!r} must be a number in [0, 1] (0.01: 1% of the dataset's files)."
    )
  return on_bad_file, float(max_bad_fraction)


def check_fraction(skipped: Iterable[Skipped], num_files: int, max_bad_fraction: float) -> None:
  """Raises ValueError when more than max_bad_fraction of the dataset's `num_files` files (all splits) are
  `skipped`, naming the first of them."""
  skipped = sorted(set(skipped))
  if len(skipped) <= max_bad_fraction * num_files:
    return
  shown = "; ".join(f"{s.file} ({s.split}): {s.error}" for s in skipped[:3]) + ("; ..." if len(skipped) > 3 else "")
  raise ValueError(
    f"{len(skipped)} of the {num_files} image files cannot be decoded, more than max_bad_fraction="
    f"{max_bad_fraction!r} of them: {shown}. Repair or remove the files, or allow more with "
    "--config.dataset_kwargs.max_bad_fraction=F."
  )


def write(path: str, skipped: Iterable[Skipped]) -> None:
  """Writes the list to `path` (module docstring's format), whole: a temporary file renamed over it."""
  lines = ["\t".join(_COLUMNS)]
  lines += ["\t".join(" ".join(str(v).split()) for v in (s.split, s.file, s.error)) for s in sorted(set(skipped))]
  atomic_files.write_text(path, "".join(f"{line}\n" for line in lines))


def read(path: str) -> list[Skipped]:
  """The list written by `write` (empty when there is no file); ValueError naming a malformed file."""
  if not os.path.isfile(path):
    return []
  with open(path, encoding="utf-8") as f:
    lines = f.read().splitlines()
  if not lines or tuple(lines[0].split("\t")) != _COLUMNS:
    raise ValueError(f"{path!r} is not a list of skipped files: its first line should be {'<tab>'.join(_COLUMNS)}.")
  rows = []
  for number, line in enumerate(lines[1:], start=2):
    fields = line.split("\t")
    if len(fields) != len(_COLUMNS):
      raise ValueError(f"{path!r}, line {number}: expected {len(_COLUMNS)} tab-separated fields, got {line!r}.")
    rows.append(Skipped(*fields))
  return rows


class Log:
  """The files a run skipped: those skipped at load, then those met while streaming, each listed once.

  Written to `path` whenever it grows (None: kept in memory only). `add` raises ValueError (check_fraction) once
  more than max_bad_fraction of the dataset's `num_files` files are skipped; the list written then holds them all.
  """

  def __init__(
    self,
    skipped: Iterable[Skipped] = (),
    *,
    num_files: int,
    max_bad_fraction: float = DEFAULT_MAX_FRACTION,
    path: str | None = None,
  ):
    self.skipped = set(skipped)
    self.num_files = int(num_files)
    self.max_bad_fraction = float(max_bad_fraction)
    self.path = path
    if path is not None:
      write(path, self.skipped)

  def add(self, records: Iterable[Skipped]) -> None:
    new = set(records) - self.skipped
    if not new:
      return
    self.skipped |= new
    if self.path is not None:
      write(self.path, self.skipped)
    check_fraction(self.skipped, self.num_files, self.max_bad_fraction)

  def __len__(self) -> int:
    return len(self.skipped)


def num_files(dataset) -> int:
  """The files of a dataset of files: the rows of its splits and the files it skipped at load."""
  return sum(dataset.sizes.values()) + len(dataset.skipped_files)


def met_while_streaming(dataset, rows) -> list[Skipped]:
  """The training rows `rows` of `dataset` that its x_train (image_files.ImageFiles with on_bad_file='skip')
  skipped while streaming, as Skipped records: named by train_sources (else the path), the error read again by
  decoding the file once more."""
  files, sources = dataset.x_train, dataset.train_sources
  records = []
  for row in sorted({int(r) for r in rows}):
    error = files.decode_row(row)[1] or "skipped while streaming"
    records.append(Skipped("train", str(sources[row]) if sources is not None else files.paths[row], error))
  return records
