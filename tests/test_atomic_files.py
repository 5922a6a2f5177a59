"""noisy_jax.core.atomic_files: a file is written whole or not at all, with the permissions open() gives, its folder
created, its bytes as given; a failed write leaves the old file and no temporary file."""

import os

import pytest

from noisy_jax.core import atomic_files


def test_writes_the_bytes_with_the_umasks_permissions_into_a_new_folder(tmp_path):
  path = tmp_path / "new" / "folder" / "out.csv"
  old_mask = os.umask(0o027)
  try:
    assert atomic_files.write_text(str(path), "a,b\r\n1,2\r\n") == str(path)
  finally:
    os.umask(old_mask)
  assert path.read_bytes() == b"a,b\r\n1,2\r\n"  # no newline translation
  assert os.stat(path).st_mode & 0o777 == 0o640  # 0666 less the umask, not mkstemp's 0600
  assert os.listdir(path.parent) == ["out.csv"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
  path = tmp_path / "manifest.json"
  atomic_files.write_bytes(str(path), b"old")

  def refuse(*_):
    raise OSError("disk full")

  monkeypatch.setattr(os, "replace", refuse)
  with pytest.raises(OSError, match="disk full"):
    atomic_files.write_bytes(str(path), b"new")
  assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["manifest.json"]


def test_a_rewrite_replaces_the_whole_file(tmp_path):
  path = tmp_path / "labels.txt"
  atomic_files.write_text(str(path), "a much longer first version\n")
  atomic_files.write_text(str(path), "short\n")
  assert path.read_text(encoding="utf-8") == "short\n"
