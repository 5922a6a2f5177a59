"""Embeddings of an image folder on disk: the layout `python -m experiments.embed` writes, its writer and reader.

  WORKDIR/files.txt        one path per line, relative to the images folder, in embedding order (row i = line i):
                           every .png / .jpg / .jpeg under it (any depth, hidden names skipped), sorted
  WORKDIR/labels.npy       int64 [N] class ids from the layout DIR/LABEL/... (LABEL = the first folder of the path;
                           ids = the sorted LABEL names, integer-looking names as integers: disk.class_order); only
                           when every file lies inside such a folder (else absent, as classes.txt)
  WORKDIR/classes.txt      the class names in id order, one per line
  WORKDIR/shards/embeddings-00000-of-000NN.npy
                           float32 [n_i, D]: shard i holds rows [i S, min((i + 1) S, N)) (S = shard_size)
  WORKDIR/skipped.txt      row<TAB>file<TAB>error of each file that could not be decoded (on_bad_file='skip')
  WORKDIR/manifest.json    {format_version, backbone, weights: {path, size, sha256 (of the first MiB of a file, or
                           of the names, sizes and first MiBs of a directory's files)}, image_size, preprocessing,
                           dim, num_examples, files_sha256, shard_size, num_shards, skipped: [{row, file, error}],
                           shards: {index: {file, rows, sha256, skipped}}, complete}

Writes are atomic: every file is written to a temporary name in its folder and renamed when complete, and the
manifest is rewritten (the same way) after each shard, so a killed run leaves only whole shards, each listed with its
sha256 once it is in place. A shard file whose sha256 is not in the manifest (renamed, then killed before the
manifest) is computed again; temporary files left by a kill are deleted when the store is opened again.

Resume: `Writer.open` of a workdir that holds a manifest compares what identifies the embeddings (`IDENTITY`: the
backbone, the weights' fingerprint (size and sha256, not the path), the preprocessing, D, the file list's sha256 and
N, the shard size) and stops with an error naming each field that differs; otherwise the finished shards (present,
sha256 as listed) are kept and `todo` lists the others. The batch size and the worker count are not part of it.

Skipped files: a file met while streaming that cannot be decoded keeps its row (the shard layout does not depend on
what decodes), filled with NaN and listed in the manifest and skipped.txt. `read` drops those rows (and their files
and labels) by default; `read(..., drop_skipped=False)` keeps the NaN rows.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os

import numpy as np

from noisy_jax.core import atomic_files
from noisy_jax.core import errors
from noisy_jax.data import disk
from noisy_jax.data import images

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
FILES = "files.txt"
LABELS = "labels.npy"
CLASSES = "classes.txt"
SKIPPED = "skipped.txt"
SHARDS = "shards"
# Fields of the manifest that identify the embeddings: a resumed run must agree on all of them.
IDENTITY = (
  "format_version",
  "backbone",
  "weights",
  "preprocessing",
  "dim",
  "num_examples",
  "files_sha256",
  "shard_size",
)
_OURS = (MANIFEST, FILES, LABELS, CLASSES, SKIPPED, SHARDS)
_MIB = 2**20


def list_images(folder: str) -> list[str]:
  """Paths relative to `folder` of its image files (images.IMAGE_EXTENSIONS, any case), recursively, hidden names
  skipped, sorted. Raises MissingInputError / InputError naming the folder when it is missing or holds none."""
  if not os.path.isdir(folder):
    raise errors.MissingInputError(f"--images={folder!r}: no such folder (a folder of image files is expected).")
  found = []
  for root, dirs, files in os.walk(folder):
    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    for name in files:
      if not name.startswith(".") and name.lower().endswith(images.IMAGE_EXTENSIONS):
        found.append(os.path.relpath(os.path.join(root, name), folder))
  if not found:
    raise errors.InputError(
      f"--images={folder!r} holds no image file ({', '.join(images.IMAGE_EXTENSIONS)}, searched recursively)."
    )
  return sorted(found)


def folder_labels(paths: list[str]) -> tuple[np.ndarray | None, tuple[str, ...] | None]:
  """(int64 class ids [N], class names) from the first folder of each relative path, or (None, None) when a file
  lies directly in the images folder (no class layout)."""
  if any(os.sep not in p for p in paths):
    return None, None
  given = [p.split(os.sep, 1)[0] for p in paths]
  names = disk.class_order(given)
  ids = {name: i for i, name in enumerate(names)}
  return np.asarray([ids[g] for g in given], np.int64), names


def num_shards(num_examples: int, shard_size: int) -> int:
  return max(1, math.ceil(num_examples / shard_size))


def shard_rows(index: int, shard_size: int, num_examples: int) -> tuple[int, int]:
  """[start, end) rows of shard `index`."""
  return index * shard_size, min((index + 1) * shard_size, num_examples)


def shard_name(index: int, count: int) -> str:
  return f"embeddings-{index:05d}-of-{count:05d}.npy"


def sha256_file(path: str, limit: int | None = None) -> str:
  """sha256 of the file's bytes (its first `limit` bytes when given)."""
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    remaining = limit
    while remaining is None or remaining > 0:
      chunk = f.read(_MIB if remaining is None else min(_MIB, remaining))
      if not chunk:
        break
      digest.update(chunk)
      remaining = None if remaining is None else remaining - len(chunk)
  return digest.hexdigest()


def fingerprint(path: str) -> dict:
  """{path, size, sha256} of a weights file (sha256 of its first MiB) or directory (sha256 over its files' relative
  names, sizes and first MiBs; size their total)."""
  path = os.path.abspath(path)
  if os.path.isfile(path):
    return {"path": path, "size": os.path.getsize(path), "sha256": sha256_file(path, _MIB)}
  digest, total = hashlib.sha256(), 0
  for root, dirs, files in os.walk(path):
    dirs.sort()
    for name in sorted(files):
      full = os.path.join(root, name)
      size = os.path.getsize(full)
      total += size
      digest.update(f"{os.path.relpath(full, path)}\0{size}\0{sha256_file(full, _MIB)}\n".encode())
  return {"path": path, "size": total, "sha256": digest.hexdigest()}


def files_sha256(paths: list[str]) -> str:
  return hashlib.sha256("".join(f"{p}\n" for p in paths).encode("utf-8")).hexdigest()


def npy_bytes(array: np.ndarray) -> bytes:
  buffer = io.BytesIO()
  np.save(buffer, array, allow_pickle=False)
  return buffer.getvalue()


def identity(
  *, backbone: str, weights: dict, preprocessing: dict, dim: int, paths: list[str], shard_size: int, labels=None
) -> dict:
  """The manifest's identifying fields (IDENTITY) of embeddings of `paths` by a backbone; `labels` (given for a
  config's dataset, whose rows are named by index only: its noisy labels) add their checksum."""
  extra = (
    {} if labels is None else {"labels_sha256": hashlib.sha256(np.asarray(labels, np.int64).tobytes()).hexdigest()}
  )
  return {
    **extra,
    "format_version": FORMAT_VERSION,
    "backbone": backbone,
    "weights": weights,
    "preprocessing": preprocessing,
    "image_size": preprocessing["output_shape"][0],
    "dim": int(dim),
    "num_examples": len(paths),
    "files_sha256": files_sha256(paths),
    "shard_size": int(shard_size),
  }


def _read_manifest(workdir: str) -> dict | None:
  path = os.path.join(workdir, MANIFEST)
  if not os.path.isfile(path):
    return None
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except (ValueError, OSError) as error:
    raise errors.InputError(f"{path} is not an embedding manifest ({error}).") from None


def _comparable(key: str, value):
  """The weights are compared by size and sha256 (a moved file is the same weights); the rest as stored."""
  if key == "weights" and isinstance(value, dict):
    return {k: v for k, v in value.items() if k != "path"}
  return value


def _differences(stored: dict, wanted: dict) -> list[str]:
  out = []
  for key in IDENTITY + ("labels_sha256",):
    if _comparable(key, stored.get(key)) != _comparable(key, wanted.get(key)):
      shown = {"files_sha256": "the file list", "weights": "the weights"}.get(key, key)
      out.append(f"{shown}: stored {_short(stored.get(key))}, now {_short(wanted.get(key))}")
  return out


def _short(value) -> str:
  text = json.dumps(value, sort_keys=True)
  return text if len(text) <= 160 else text[:157] + "..."


def _remove_temporaries(workdir: str) -> None:
  """Deletes the temporary files (.NAME.XXXX.tmp, noisy_jax.core.atomic_files) that a killed run left in the store."""
  for folder in (workdir, os.path.join(workdir, SHARDS)):
    if os.path.isdir(folder):
      for name in os.listdir(folder):
        if name.startswith(".") and name.endswith(".tmp"):
          os.remove(os.path.join(folder, name))


class Writer:
  """Writes a store (module docstring) shard by shard; `todo` lists the shards still to compute."""

  def __init__(self, workdir: str, manifest: dict):
    self.workdir = workdir
    self.manifest = manifest
    self.count = int(manifest["num_shards"])

  @classmethod
  def open(cls, workdir: str, ident: dict, paths: list[str], labels, classes) -> "Writer":
    """The writer of `workdir`: a new store (files.txt, labels, classes and an empty manifest written), or the
    existing one when its manifest has the same IDENTITY (finished shards kept). InputError naming the fields that
    differ, or a folder holding other files."""
    workdir = os.path.abspath(workdir)
    _remove_temporaries(workdir)
    stored = _read_manifest(workdir)
    if stored is not None:
      differ = _differences(stored, ident)
      if differ:
        raise errors.InputError(
          f"--workdir={workdir} holds other embeddings ({'; '.join(differ)}); give another --workdir, or delete it "
          "to start again."
        )
      writer = cls(workdir, stored)
      writer._forget_unverified()
      return writer
    if os.path.isdir(workdir) and set(os.listdir(workdir)) - set(_OURS):
      raise errors.InputError(
        f"--workdir={workdir} is not empty and holds no {MANIFEST}: not an embedding store; give a new folder."
      )
    os.makedirs(os.path.join(workdir, SHARDS), exist_ok=True)
    atomic_files.write_bytes(os.path.join(workdir, FILES), "".join(f"{p}\n" for p in paths).encode("utf-8"))
    if labels is not None:
      atomic_files.write_bytes(os.path.join(workdir, LABELS), npy_bytes(np.asarray(labels, np.int64)))
      atomic_files.write_bytes(os.path.join(workdir, CLASSES), "".join(f"{c}\n" for c in classes).encode("utf-8"))
    manifest = dict(ident)
    count = num_shards(len(paths), ident["shard_size"])
    manifest.update(num_shards=count, labels=labels is not None, skipped=[], shards={}, complete=False)
    writer = cls(workdir, manifest)
    writer._save()
    return writer

  def shard_path(self, index: int) -> str:
    return os.path.join(self.workdir, SHARDS, shard_name(index, self.count))

  def _forget_unverified(self) -> None:
    """Drops from the manifest the shards whose file is missing or differs from its sha256."""
    kept = {}
    for key, entry in self.manifest["shards"].items():
      path = self.shard_path(int(key))
      if os.path.isfile(path) and sha256_file(path) == entry["sha256"]:
        kept[key] = entry
    if len(kept) != len(self.manifest["shards"]):
      self.manifest["shards"] = kept
      self.manifest["complete"] = False
      self._save()

  @property
  def finished(self) -> list[int]:
    return sorted(int(k) for k in self.manifest["shards"])

  @property
  def todo(self) -> list[int]:
    done = set(self.finished)
    return [i for i in range(self.count) if i not in done]

  def write_shard(self, index: int, embeddings: np.ndarray, skipped: list[dict]) -> None:
    """Writes shard `index` (float32 [n_i, D], NaN rows for `skipped` [{row, file, error}]) and records it."""
    start, end = shard_rows(index, self.manifest["shard_size"], self.manifest["num_examples"])
    embeddings = np.asarray(embeddings, np.float32)
    if embeddings.shape != (end - start, self.manifest["dim"]):
      raise ValueError(f"shard {index}: embeddings {embeddings.shape}, expected {(end - start, self.manifest['dim'])}.")
    data = npy_bytes(embeddings)
    atomic_files.write_bytes(self.shard_path(index), data)
    entry = {"file": f"{SHARDS}/{shard_name(index, self.count)}", "rows": [start, end], "skipped": skipped}
    entry["sha256"] = hashlib.sha256(data).hexdigest()
    self.manifest["shards"][str(index)] = entry
    self.manifest["complete"] = not self.todo
    self._save()

  def _save(self) -> None:
    shards = self.manifest["shards"]
    self.manifest["shards"] = {k: shards[k] for k in sorted(shards, key=int)}
    skipped = sorted((s for e in shards.values() for s in e["skipped"]), key=lambda s: s["row"])
    self.manifest["skipped"] = skipped
    if skipped or os.path.exists(os.path.join(self.workdir, SKIPPED)):
      text = "".join(f"{s['row']}\t{s['file']}\t{' '.join(s['error'].split())}\n" for s in skipped)
      atomic_files.write_bytes(os.path.join(self.workdir, SKIPPED), f"row\tfile\terror\n{text}".encode("utf-8"))
    atomic_files.write_bytes(os.path.join(self.workdir, MANIFEST), json.dumps(self.manifest, indent=1).encode("utf-8"))


def _lines(path: str) -> list[str]:
  with open(path, encoding="utf-8") as f:
    return f.read().splitlines()


def read(workdir: str, *, drop_skipped: bool = True, mmap: bool = True):
  """(embeddings float32 [N, D], labels int64 [N] or None, files [N], class names or None) of a complete store.

  The shards are opened with np.load(mmap_mode='r') and concatenated (one copy in memory). drop_skipped: leave out
  the rows of files that could not be decoded (their NaN rows, files and labels).

  Raises:
    errors.MissingInputError: naming a workdir without a manifest.
    errors.InputError: naming an incomplete store (its missing shards) or a shard that differs from its sha256.
  """
  workdir = os.path.abspath(workdir)
  manifest = _read_manifest(workdir)
  if manifest is None:
    raise errors.MissingInputError(f"{workdir}: no {MANIFEST}; not an embedding store (python -m experiments.embed).")
  writer = Writer(workdir, manifest)
  missing = [shard_name(i, writer.count) for i in writer.todo]
  if missing:
    raise errors.InputError(
      f"embedding store {workdir} is incomplete: {len(missing)} of {writer.count} shards missing "
      f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); run python -m experiments.embed again "
      "with the same flags to finish it."
    )
  parts = [np.load(writer.shard_path(i), mmap_mode="r" if mmap else None) for i in range(writer.count)]
  embeddings = np.concatenate(parts) if parts else np.zeros((0, manifest["dim"]), np.float32)
  files = _lines(os.path.join(workdir, FILES))
  labels = np.load(os.path.join(workdir, LABELS)) if manifest.get("labels") else None
  classes = tuple(_lines(os.path.join(workdir, CLASSES))) if manifest.get("labels") else None
  if drop_skipped and manifest["skipped"]:
    keep = np.ones(len(files), bool)
    keep[[s["row"] for s in manifest["skipped"]]] = False
    embeddings, files = embeddings[keep], [f for f, k in zip(files, keep) if k]
    labels = None if labels is None else labels[keep]
  return embeddings, labels, files, classes
