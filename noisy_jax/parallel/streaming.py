"""Streaming input: training batches decoded from disk by Grain worker processes, in the resident path's order.

The resident path gathers each batch's rows from the training split held on the devices (train.make_epoch_fn).
Streaming feeds the same step with the same batches, read from a random-access source instead:

  epoch key --train.epoch_batches--> indices [S, B], valid [S, B]     (the permutation the resident path uses)
  this process's columns of each global batch (grain.sharding.ShardByJaxProcess: index p of P -> columns
    [p B/P, (p+1) B/P)), flattened in step order, from step `start` on (a resumed run skips what it has trained)
  grain.MapDataset over those rows -> source[row] in worker processes (decode + resize: image_files.ImageFiles,
    or rows of an in-memory array) -> batches of B/P
  -> {"images": uint8 [B/P, H, W, C], "indices": int32 [B/P], "valid": bool [B/P], "skipped": bool [B/P]}
  -> jax.make_array_from_process_local_data: global [B, ...] arrays sharded over the mesh axis `batch`.

So device d of the mesh holds the same rows as in the resident path (its contiguous B/D slice of the global batch),
normalises them with the same noisy_jax.data.normalization and augments them with the same key
(train.augmentation_key(epoch key, step)) and row: the two paths train the same network (equal to float rounding:
tests/test_streaming.py). The input position of a run is (epoch, step): the order is a function of the epoch key,
so resuming at step s rebuilds the epoch's loader from s.

Padding: the last batch is filled with the first rows of the permutation, marked invalid (as resident). A file that
cannot be decoded, from a source that skips such files (noisy_jax.data.bad_files), is masked in the same way: zeros,
invalid, and `skipped` True, so that the trainer can list it. Evaluation splits on disk are read in order, in chunks
(`ordered_batches`).

Grain details (0.2.x): its worker processes read absl flags, so outside `app.run` (tests, notebooks) the flags are
marked parsed first (`_flags_ready`); iterators are closed explicitly (`Loader.close`, or the `with` block), or
interpreter shutdown prints errors from the workers. Workers are started with multiprocessing's 'spawn': each
re-imports the main module, so a script that streams with workers must keep its work under
`if __name__ == "__main__":` (experiments/train.py does; without it the workers exit and the loader waits). At exit
Python's resource tracker may warn of a few "leaked shared_memory objects": the batches still buffered when the
loader was closed, a bounded number (measured: 6 with 2 workers, whatever the epoch length), released by the
tracker. A run killed with SIGKILL cannot close its loader, and Grain's workers (0.2.18) then wait for it forever;
each worker here watches its parent and exits within a second of it (`_exit_with_parent`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Iterator

import numpy as np

DEFAULT_WORKERS = 0  # in-process decoding; config.input_workers or workers= for worker processes


def _flags_ready() -> None:
  from absl import flags  # pylint: disable=g-import-not-at-top

  if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()


def _exit_with_parent(worker_index: int, worker_count: int) -> None:
  """Grain's worker_init_fn: a daemon thread that ends this worker process once the process that started it is gone
  (our parent's pid is no longer the one that started us: a killed run's workers are re-parented). The starting
  process's pid comes from multiprocessing, so a parent that died before this runs is seen too."""
  del worker_index, worker_count
  import multiprocessing  # pylint: disable=g-import-not-at-top
  import threading  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top

  starter = multiprocessing.parent_process()
  parent = starter.pid if starter is not None else os.getppid()

  def watch():
    while os.getppid() == parent:
      time.sleep(0.5)
    os._exit(0)  # pylint: disable=protected-access

  threading.Thread(target=watch, name="exit_with_parent", daemon=True).start()


def process_shard() -> tuple[int, int]:
  """(this process's index, process count) from grain's ShardByJaxProcess."""
  import grain  # pylint: disable=g-import-not-at-top

  options = grain.sharding.ShardByJaxProcess()
  return int(options.shard_index), int(options.shard_count)


def local_rows(indices: np.ndarray, valid: np.ndarray, shard_index: int, shard_count: int):
  """This process's columns of each global batch: (indices [S, B/P], valid [S, B/P]) of indices/valid [S, B]."""
  batch = indices.shape[1]
  if batch % shard_count:
    raise ValueError(f"batch_size={batch} must be divisible by the number of processes ({shard_count}).")
  width = batch // shard_count
  cols = slice(shard_index * width, (shard_index + 1) * width)
  return np.ascontiguousarray(indices[:, cols]), np.ascontiguousarray(valid[:, cols])


@dataclasses.dataclass(frozen=True)
class _Rows:
  """Grain record source: position j -> {"images": source[rows[j]], "indices": rows[j], "valid": valid[j],
  "skipped": False}; a file the source skips (image_files.ImageFiles.decode_row with on_bad_file='skip') gives
  zeros, valid False and skipped True."""

  source: object  # len() and [int] -> uint8 example: image_files.ImageFiles or a NumPy array
  rows: np.ndarray
  valid: np.ndarray

  def __len__(self) -> int:
    return len(self.rows)

  def __getitem__(self, j):
    row = int(self.rows[j])
    decode_row = getattr(self.source, "decode_row", None)  # ImageFiles: (pixels, error or None)
    pixels, error = decode_row(row) if decode_row is not None else (self.source[row], None)
    skipped = error is not None
    return {
      "images": np.asarray(pixels),
      "indices": np.int32(row),
      "valid": bool(self.valid[j]) and not skipped,
      "skipped": skipped,
    }


class Loader:
  """An iterator of local batches (dicts of NumPy arrays); close() (or `with`) stops Grain's workers."""

  def __init__(self, source, rows: np.ndarray, valid: np.ndarray, *, batch_size: int, workers: int, prefetch: int = 2):
    import grain  # pylint: disable=g-import-not-at-top

    _flags_ready()
    dataset = grain.MapDataset.source(_Rows(source, rows, valid)).batch(batch_size, drop_remainder=False)
    dataset = dataset.to_iter_dataset(grain.ReadOptions(num_threads=0 if workers else 1, prefetch_buffer_size=0))
    if workers > 0:
      dataset = dataset.mp_prefetch(
        grain.MultiprocessingOptions(num_workers=workers, per_worker_buffer_size=prefetch),
        worker_init_fn=_exit_with_parent,
      )
    self._iterator = iter(dataset)
    self.num_batches = math.ceil(len(rows) / batch_size)

  def __iter__(self) -> Iterator[dict]:
    return self

  def __next__(self) -> dict:
    # Plain NumPy copies: a worker's batch arrives in shared memory (grain's SharedMemoryArray), released here
    # rather than whenever the caller drops its last reference (at interpreter exit that prints errors).
    return {k: np.array(v, copy=True) for k, v in next(self._iterator).items()}

  def close(self) -> None:
    close = getattr(self._iterator, "close", None)
    if close is not None:
      close()
    self._iterator = iter(())

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def epoch_loader(
  source, indices: np.ndarray, valid: np.ndarray, *, start: int = 0, workers: int = DEFAULT_WORKERS
) -> Loader:
  """The local batches of one epoch from step `start` on.

  Args:
    source: the training inputs, random access: image_files.ImageFiles or an array [N, ...].
    indices, valid: [S, B] the epoch's global batches (train.epoch_batches of the epoch key), NumPy.
    start: the first step to read (0 for a whole epoch; s to resume after s trained steps).
    workers: Grain worker processes decoding in parallel (0: in this process).
  """
  shard_index, shard_count = process_shard()
  rows, ok = local_rows(np.asarray(indices), np.asarray(valid), shard_index, shard_count)
  if not 0 <= start <= rows.shape[0]:
    raise ValueError(f"start={start!r} must be a step in [0, {rows.shape[0]}].")
  return Loader(source, rows[start:].reshape(-1), ok[start:].reshape(-1), batch_size=rows.shape[1], workers=workers)


def ordered_batches(source, batch_size: int, *, workers: int = DEFAULT_WORKERS) -> Loader:
  """Every row of `source` in order, in local batches of `batch_size` (the last one shorter): evaluation."""
  rows = np.arange(len(source), dtype=np.int64)
  return Loader(source, rows, np.ones(len(rows), bool), batch_size=batch_size, workers=workers)


def default_workers() -> int:
  """min(8, CPU count - 1): one core stays with the trainer."""
  return max(0, min(8, (os.cpu_count() or 1) - 1))
