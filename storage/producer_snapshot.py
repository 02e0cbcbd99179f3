"""Producer state snapshots: Kafka's ``.snapshot`` files (txn facts §3.4).

A partition remembers, per producer id, what idempotence and transactions need: the epoch,
the last sequence and offset written, the coordinator epoch of the last marker, and the first
offset of the open transaction, if any (which holds back the last stable offset). Rebuilding
that means scanning the log; a snapshot, taken at a log end offset, lets a restart scan only
what came after it.

File name: ``<20-digit offset>.snapshot`` (:func:`kafkasim.storage.layout.snapshot_name`), the
offset being the log end offset when the snapshot was taken.

File format (Kafka's ``ProducerSnapshot.json``, version 1, not flexible; big-endian)::

    version int16 = 1 | crc uint32 | count int32 | count × entry (46 bytes):
        producer_id int64 | epoch int16 | last_sequence int32 | last_offset int64 |
        offset_delta int32 | timestamp int64 | coordinator_epoch int32 | current_txn_first_offset int64

The CRC is CRC-32C of every byte from offset 6 (the count) to the end. ``last_offset`` -1
means the producer has no batch metadata; ``current_txn_first_offset`` -1 means no open
transaction.

Invariants: a snapshot is written whole or not at all (:func:`write_snapshot` writes a
``.tmp``, fsyncs it and renames it, as the checkpoints are written; Kafka writes in place
and relies on the CRC). :func:`read_snapshot` trusts nothing: a version other than 1, a
file shorter or longer than its count says, or a CRC mismatch is a
:class:`CorruptSnapshotError` naming the file — the caller then deletes it and falls back to an
older snapshot or to the log, as Kafka's ``ProducerStateManager`` does.

Stateless functions; thread-safe as the file system is (the log serialises its writers).
"""

from __future__ import annotations

import os
import struct
from typing import Iterable, NamedTuple

import crc32c as _crc32c

from kafkasim.errors import KafkaStorageError
from kafkasim.storage.files import atomic_write, storage_errors

__all__ = [
    "ProducerSnapshotEntry", "CorruptSnapshotError", "SNAPSHOT_VERSION", "SNAPSHOT_HEADER_SIZE",
    "SNAPSHOT_ENTRY_SIZE", "encode_snapshot", "decode_snapshot", "write_snapshot", "read_snapshot",
]

SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")           # version, crc, count
_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_HEADER_SIZE = _HEADER.size       # 10
SNAPSHOT_ENTRY_SIZE = _ENTRY.size         # 46
_CRC_START = 6                            # the CRC covers [6, end): the count and the entries


class CorruptSnapshotError(KafkaStorageError):
    """Raised when a producer snapshot fails its checks (version, length, CRC); names the file.
    Kafka's ``CorruptSnapshotException``: the snapshot is dropped, never half-trusted."""


class ProducerSnapshotEntry(NamedTuple):
    """The state of one producer id, field for field as Kafka's ``ProducerSnapshot`` entry."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int                  # -1: no batch metadata
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int     # -1: no open transaction


def encode_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    """The bytes of a snapshot holding ``entries`` in the order given; ``ValueError`` naming
    the entry when a field does not fit its type.

    >>> encode_snapshot([]).hex()       # version 1, CRC-32C of the count 0, count 0
    '000148674bc700000000'
    """
    body = bytearray()
    n = 0
    for e in entries:
        if not isinstance(e, ProducerSnapshotEntry):
            e = ProducerSnapshotEntry(*e)
        try:
            body += _ENTRY.pack(*e)
        except struct.error as exc:
            raise ValueError(f"producer snapshot entry {e} has a field outside its type: {exc}") from None
        n += 1
    counted = struct.pack(">i", n) + body
    return struct.pack(">hI", SNAPSHOT_VERSION, _crc32c.crc32c(counted)) + counted


def decode_snapshot(data: bytes, *, where: str = "<buffer>") -> list[ProducerSnapshotEntry]:
    """The entries of a snapshot's bytes, checked as the module docstring says
    (:class:`CorruptSnapshotError` naming ``where`` and the problem)."""
    def corrupt(why: str) -> CorruptSnapshotError:
        return CorruptSnapshotError(f"corrupt producer snapshot {where}: {why}")

    if len(data) < 2:
        raise corrupt(f"truncated: {len(data)} bytes, no version")
    (version,) = struct.unpack_from(">h", data, 0)
    if version != SNAPSHOT_VERSION:
        raise corrupt(f"unknown file version {version} (expected {SNAPSHOT_VERSION})")
    if len(data) < SNAPSHOT_HEADER_SIZE:
        raise corrupt(f"truncated: {len(data)} bytes, shorter than the {SNAPSHOT_HEADER_SIZE}-byte header")
    _, stored_crc, count = _HEADER.unpack_from(data, 0)
    if count < 0:
        raise corrupt(f"negative entry count {count}")
    expected = SNAPSHOT_HEADER_SIZE + count * SNAPSHOT_ENTRY_SIZE
    if len(data) < expected:
        raise corrupt(f"truncated: {len(data)} bytes, {count} entries need {expected}")
    if len(data) > expected:
        raise corrupt(f"{len(data) - expected} bytes after the {count} entries its count announces")
    computed = _crc32c.crc32c(memoryview(data)[_CRC_START:])
    if computed != stored_crc:
        raise corrupt(f"CRC mismatch: stored 0x{stored_crc:08x}, computed 0x{computed:08x}")
    return [ProducerSnapshotEntry._make(t) for t in _ENTRY.iter_unpack(memoryview(data)[SNAPSHOT_HEADER_SIZE:])]


def write_snapshot(path: str, entries: Iterable[ProducerSnapshotEntry], *, fsync: bool = True) -> None:
    """Write a snapshot of ``entries`` to ``path`` all-or-nothing (``.tmp``, fsync, rename,
    directory fsync); ``KafkaStorageError`` naming the file when the write fails."""
    atomic_write(path, encode_snapshot(entries), fsync=fsync)


def read_snapshot(path: str) -> list[ProducerSnapshotEntry]:
    """The entries of the snapshot at ``path``: :class:`CorruptSnapshotError` when it does not
    check out, ``KafkaStorageError`` when it cannot be read (a missing file included)."""
    path = os.fspath(path)
    with storage_errors("read producer snapshot", path):
        with open(path, "rb") as f:
            data = f.read()
    return decode_snapshot(data, where=path)
