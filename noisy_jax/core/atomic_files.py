"""Files written whole or not at all.

`write_bytes(path, data)`: the data go to a temporary file beside the target, named .NAME.XXXXXXXX.tmp, are flushed
to disk (fsync), get the permissions a plain open() would give (0666 less the umask; mkstemp's own are 0600), and
the file is renamed over the target (os.replace, atomic on POSIX within one file system). On any error the temporary
file is removed and the target is left as it was. The target's folder is created when missing. A reader sees the old
file or the new one, never a part; a killed writer leaves at most a .NAME.*.tmp file, which a store's owner may
delete by that pattern (TEMPORARY_SUFFIX).
"""

from __future__ import annotations

import os
import tempfile

TEMPORARY_SUFFIX = ".tmp"


def write_bytes(path: str, data: bytes) -> str:
  """Writes `data` to `path` atomically (module docstring); returns the path."""
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  fd, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=TEMPORARY_SUFFIX, dir=folder)
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())
    os.chmod(temporary, 0o666 & ~_umask())
    os.replace(temporary, path)
  except BaseException:
    if os.path.exists(temporary):
      os.remove(temporary)
    raise
  return path


def write_text(path: str, text: str) -> str:
  """Writes `text` as UTF-8 to `path` atomically, its line endings as they are (no newline translation)."""
  return write_bytes(path, text.encode("utf-8"))


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask
