"""TensorBoard event files of scalars, written with the standard library only (no TensorFlow, protobuf or torch).

An event file is a sequence of records in TFRecord framing: the payload's length (uint64), the masked CRC-32C of those
8 bytes (uint32), the payload, the masked CRC-32C of the payload (uint32), all little-endian. Each payload is an
`Event` protocol buffer (tensorboard/compat/proto/event.proto): the first one carries `file_version`
"brain.Event:2", each later one a wall time, a step and a `Summary` with one `simple_value` per tag. The few fields
used are encoded here by hand (protobuf's wire format: a varint key field_number << 3 | wire_type, then a varint, 8
or 4 little-endian bytes, or a varint length and the bytes).
"""

from __future__ import annotations

import os
import socket
import struct
import time


def _crc32c_table() -> tuple[int, ...]:
  table = []
  for byte in range(256):
    crc = byte
    for _ in range(8):
      crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # Castagnoli's polynomial, bit-reversed
    table.append(crc)
  return tuple(table)


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
  """CRC-32C (Castagnoli) of `data`, as TFRecord files use it."""
  crc = 0xFFFFFFFF
  for byte in data:
    crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
  return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
  """TFRecord's masked CRC: the CRC rotated right by 15 bits plus 0xA282EAD8 (mod 2^32)."""
  crc = crc32c(data)
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
  out = bytearray()
  value &= (1 << 64) - 1  # negative int64s are written as their two's complement (10 bytes)
  while True:
    low, value = value & 0x7F, value >> 7
    out.append(low | (0x80 if value else 0))
    if not value:
      return bytes(out)


def _length_delimited(field: int, payload: bytes) -> bytes:
  return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def scalar_event(step: int, scalars: dict[str, float], wall_time: float) -> bytes:
  """The serialized Event {wall_time, step, summary {value {tag, simple_value}} per scalar}."""
  values = b"".join(
    _length_delimited(1, _length_delimited(1, tag.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", value))
    for tag, value in scalars.items()
  )
  step_field = _varint(2 << 3 | 0) + _varint(step) if step else b""  # proto3 leaves a zero out
  return _varint(1 << 3 | 1) + struct.pack("<d", wall_time) + step_field + _length_delimited(5, values)


def version_event(wall_time: float) -> bytes:
  """The serialized first Event of a file: {wall_time, file_version: "brain.Event:2"}."""
  return _varint(1 << 3 | 1) + struct.pack("<d", wall_time) + _length_delimited(3, b"brain.Event:2")


def record(payload: bytes) -> bytes:
  """`payload` in TFRecord framing."""
  length = struct.pack("<Q", len(payload))
  return length + struct.pack("<I", masked_crc32c(length)) + payload + struct.pack("<I", masked_crc32c(payload))


class EventFileWriter:
  """Appends scalar events to a new file `logdir/events.out.tfevents.TIME.HOST.PID` (TensorBoard reads every file
  of a directory whose name holds "tfevents"; the process id keeps two writers started in the same second apart)."""

  def __init__(self, logdir: str):
    os.makedirs(logdir, exist_ok=True)
    now = time.time()
    self.path = os.path.join(logdir, f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}")
    self._file = open(self.path, "ab")
    self._file.write(record(version_event(now)))
    self._file.flush()

  def write(self, step: int, scalars: dict[str, float]) -> None:
    """One event at `step` holding every scalar of `scalars` {tag: value}, flushed to the file."""
    self._file.write(record(scalar_event(step, scalars, time.time())))
    self._file.flush()

  def close(self) -> None:
    self._file.close()
