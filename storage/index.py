"""Sparse offset index and time index of one segment (storage/FORMAT.md §3).

Both indexes are *derived* data: they hold nothing the ``.log`` does not, so when
one does not check out it is thrown away and rebuilt from the log
(:meth:`kafkasim.storage.segment.LogSegment.rebuild_indexes`). This module only knows the
file formats, the in-memory search structures and the sanity checks; it never
reads a ``.log``.

- :class:`OffsetIndex` (``.index``, 8-byte entries ``relative_offset: uint32,
  position: uint32``): entry *i* says "the batch whose base offset is
  ``segment_base + relative_offset`` starts at byte ``position``". Entries strictly
  increase in both fields. Position 0 (the segment's first batch) is implicit and
  never stored.
- :class:`TimeIndex` (``.timeindex``, 12-byte entries ``timestamp: int64,
  relative_offset: uint32``): entry *i* says "every record at an offset
  ≤ ``segment_base + relative_offset`` has a timestamp ≤ ``timestamp``", where the
  offset is the last offset of the batch holding the largest timestamp so far.
  Timestamps and offsets strictly increase.

Invariants: the in-memory arrays are the truth; ``_written`` entries of them are
on disk, the rest are pending and reach the file on :meth:`flush` (so a killed
process can lose index entries but never log data; recovery rebuilds them).

Thread-safety: not thread-safe; the owning :class:`kafkasim.storage.log.Log` serialises
access under its lock.
"""

from __future__ import annotations

import operator
import os
import struct
import sys
from itertools import islice
from array import array
from bisect import bisect_left, bisect_right
from typing import Optional

from kafkasim.storage.files import storage_errors

__all__ = ["OffsetIndex", "TimeIndex", "IndexCorruptError", "OFFSET_ENTRY_SIZE", "TIME_ENTRY_SIZE"]

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
_UINT32_MAX = 0xFFFFFFFF
_TIME_ENTRY = struct.Struct(">qI")
_LITTLE = sys.byteorder == "little"


class IndexCorruptError(Exception):
    """Internal signal: an index file failed its checks (caller rebuilds it). Never escapes storage."""


def _read_file(path: str) -> Optional[bytes]:
    with storage_errors("read index", path):
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None


def _write_tail(path: str, data: bytes, offset: int, fsync: bool) -> None:
    """Write ``data`` at byte ``offset`` of ``path`` and cut the file there (creates it)."""
    with storage_errors("write index", path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if data:
                os.pwrite(fd, data, offset)
            os.ftruncate(fd, offset + len(data))
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)


class OffsetIndex:
    """Relative offset → byte position, sparse, binary-searched in memory."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.offsets = array("I")      # relative offsets
        self.positions = array("I")
        self._written = 0              # entries known to be in the file
        self._file_entries = 0         # entries the file holds (may exceed _written after truncate)

    # -- loading ---------------------------------------------------------------------------
    def load(self, log_size: int) -> None:
        """Read the file and check it (FORMAT.md §3); raise IndexCorruptError when it does not check out.

        A missing file is corrupt too (it must be rebuilt). Checks: size a multiple of 8,
        both fields strictly increasing, no position 0, every position < ``log_size``.
        """
        data = _read_file(self.path)
        if data is None:
            raise IndexCorruptError(f"{self.path}: missing")
        if len(data) % OFFSET_ENTRY_SIZE:
            raise IndexCorruptError(f"{self.path}: size {len(data)} is not a multiple of {OFFSET_ENTRY_SIZE}")
        arr = array("I")
        arr.frombytes(data)
        if _LITTLE:
            arr.byteswap()
        offsets, positions = arr[0::2], arr[1::2]
        n = len(offsets)
        if n:
            if positions[0] == 0:
                raise IndexCorruptError(f"{self.path}: entry 0 has position 0")
            if positions[-1] >= log_size:
                raise IndexCorruptError(
                    f"{self.path}: last entry points at position {positions[-1]}, past the log's {log_size} bytes")
            if n > 1 and not (_strictly_increasing(offsets) and _strictly_increasing(positions)):
                raise IndexCorruptError(f"{self.path}: entries do not strictly increase")
        self.offsets, self.positions = offsets, positions
        self._written = self._file_entries = n

    def salvage(self, log_size: int) -> list[tuple[int, int]]:
        """``(relative offset, position)`` entries of the file that may still be right: its
        longest strictly increasing prefix with positions in ``(0, log_size)`` (none if the file
        is missing). What a rebuild that stopped at corrupt data keeps beyond it (FORMAT.md §3.3)."""
        data = _read_file(self.path) or b""
        arr = array("I")
        arr.frombytes(data[:len(data) - len(data) % OFFSET_ENTRY_SIZE])
        if _LITTLE:
            arr.byteswap()
        out: list[tuple[int, int]] = []
        for rel, pos in zip(arr[0::2], arr[1::2]):
            if not 0 < pos < log_size or (out and (rel <= out[-1][0] or pos <= out[-1][1])):
                break
            out.append((rel, pos))
        return out

    def keep_after(self, entries: list[tuple[int, int]], position: int) -> int:
        """Append those of ``entries`` (relative, as :meth:`salvage` gives them) whose position is
        past ``position`` and that keep both fields increasing; return how many."""
        n = 0
        for rel, pos in entries:
            if pos > position and pos > self.last_position and (not self.offsets or rel > self.offsets[-1]):
                self.offsets.append(rel)
                self.positions.append(pos)
                n += 1
        return n

    def drop(self, position: int) -> None:
        """Forget the entry at ``position`` (one that does not point at the batch it names and that
        no rebuild could replace); the file is rewritten from there on the next :meth:`flush`."""
        i = bisect_left(self.positions, position)
        if i < len(self.positions) and self.positions[i] == position:
            del self.offsets[i]
            del self.positions[i]
            self._written = min(self._written, i)

    def reset(self) -> None:
        """Forget every entry (the file is cut on the next :meth:`flush`)."""
        self.offsets = array("I")
        self.positions = array("I")
        self._written = 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries whose position is ≥ ``position`` (recovery keeps only the validated prefix)."""
        n = bisect_right(self.positions, position - 1) if position > 0 else 0
        del self.offsets[n:]
        del self.positions[n:]
        self._written = min(self._written, n)

    # -- writing ---------------------------------------------------------------------------
    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.offsets and (rel <= self.offsets[-1] or position <= self.positions[-1]):
            raise AssertionError(f"{self.path}: index entry ({rel}, {position}) does not increase")
        self.offsets.append(rel)
        self.positions.append(position)

    @property
    def last_position(self) -> int:
        """Position of the last entry, 0 (the implicit first batch) when empty."""
        return self.positions[-1] if self.positions else 0

    def flush(self, fsync: bool) -> None:
        """Write pending entries (and cut anything the file holds beyond them)."""
        n = len(self.offsets)
        if n == self._written and self._file_entries == n and not fsync:
            return
        pending = array("I")
        for i in range(self._written, n):
            pending.append(self.offsets[i])
            pending.append(self.positions[i])
        if _LITTLE:
            pending.byteswap()
        _write_tail(self.path, pending.tobytes(), self._written * OFFSET_ENTRY_SIZE, fsync)
        self._written = self._file_entries = n

    # -- lookup ----------------------------------------------------------------------------
    def lookup(self, offset: int) -> tuple[int, int]:
        """(base offset, position) of the last entry with base offset ≤ ``offset``, or (segment base, 0)."""
        i = bisect_right(self.offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.offsets[i], self.positions[i]

    def entries(self) -> list[tuple[int, int]]:
        """(absolute offset, position) pairs, for verify-log and tests."""
        return [(self.base_offset + o, p) for o, p in zip(self.offsets, self.positions)]

    def __len__(self) -> int:
        return len(self.offsets)


class TimeIndex:
    """Largest timestamp so far → last offset of its batch; binary-searched in memory."""

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.timestamps: list[int] = []
        self.offsets: list[int] = []   # relative
        self._written = 0
        self._file_entries = 0

    def load(self, max_relative_offset: int) -> None:
        """Read and check the file; raise IndexCorruptError when it does not check out.

        Checks: size a multiple of 12, both fields strictly increasing, offsets
        ≤ ``max_relative_offset`` (the segment's last offset, or an upper bound of it).
        """
        data = _read_file(self.path)
        if data is None:
            raise IndexCorruptError(f"{self.path}: missing")
        if len(data) % TIME_ENTRY_SIZE:
            raise IndexCorruptError(f"{self.path}: size {len(data)} is not a multiple of {TIME_ENTRY_SIZE}")
        n = len(data) // TIME_ENTRY_SIZE
        flat = struct.unpack(">" + "qI" * n, data) if n else ()
        ts, offs = list(flat[0::2]), list(flat[1::2])
        if n > 1 and not (_strictly_increasing(ts) and _strictly_increasing(offs)):
            raise IndexCorruptError(f"{self.path}: entries do not strictly increase")
        if offs and offs[-1] > max_relative_offset:
            raise IndexCorruptError(
                f"{self.path}: last entry names relative offset {offs[-1]}, past the segment's {max_relative_offset}")
        self.timestamps, self.offsets = ts, offs
        self._written = self._file_entries = len(ts)

    def salvage(self, max_relative_offset: int) -> list[tuple[int, int]]:
        """``(timestamp, relative offset)`` entries of the file that may still be right: its longest
        strictly increasing prefix naming no offset past ``max_relative_offset`` (see
        :meth:`OffsetIndex.salvage`)."""
        data = _read_file(self.path) or b""
        out: list[tuple[int, int]] = []
        for ts, rel in _TIME_ENTRY.iter_unpack(data[:len(data) - len(data) % TIME_ENTRY_SIZE]):
            if rel > max_relative_offset or (out and (ts <= out[-1][0] or rel <= out[-1][1])):
                break
            out.append((ts, rel))
        return out

    def keep_after(self, entries: list[tuple[int, int]], relative_offset: int) -> int:
        """Append those of ``entries`` naming an offset ≥ ``relative_offset`` that keep both fields
        increasing; return how many."""
        n = 0
        for ts, rel in entries:
            if rel >= relative_offset and (not self.offsets or (rel > self.offsets[-1] and ts > self.timestamps[-1])):
                self.timestamps.append(ts)
                self.offsets.append(rel)
                n += 1
        return n

    def reset(self) -> None:
        self.timestamps = []
        self.offsets = []
        self._written = 0

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries naming an offset ≥ ``offset``."""
        n = bisect_right(self.offsets, offset - self.base_offset - 1)
        del self.timestamps[n:]
        del self.offsets[n:]
        self._written = min(self._written, n)

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Append (timestamp, offset) if ``timestamp`` is larger than the last entry's; True if appended."""
        if timestamp < 0 or (self.timestamps and timestamp <= self.timestamps[-1]):
            return False
        rel = offset - self.base_offset
        if self.offsets and rel <= self.offsets[-1]:
            return False
        self.timestamps.append(timestamp)
        self.offsets.append(rel)
        return True

    @property
    def last_entry(self) -> Optional[tuple[int, int]]:
        """(timestamp, absolute offset) of the last entry, or None."""
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.base_offset + self.offsets[-1]

    def flush(self, fsync: bool) -> None:
        n = len(self.timestamps)
        if n == self._written and self._file_entries == n and not fsync:
            return
        data = b"".join(_TIME_ENTRY.pack(self.timestamps[i], self.offsets[i]) for i in range(self._written, n))
        _write_tail(self.path, data, self._written * TIME_ENTRY_SIZE, fsync)
        self._written = self._file_entries = n

    def entry_below(self, timestamp: int) -> Optional[tuple[int, int]]:
        """(timestamp, absolute offset) of the last entry whose timestamp is < ``timestamp``, or None.

        Every record at or before that offset has a timestamp < ``timestamp``.
        """
        i = bisect_left(self.timestamps, timestamp) - 1
        if i < 0:
            return None
        return self.timestamps[i], self.base_offset + self.offsets[i]

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + o) for t, o in zip(self.timestamps, self.offsets)]

    def __len__(self) -> int:
        return len(self.timestamps)


def _strictly_increasing(a) -> bool:
    """True if every element is less than the next (a C-level pass)."""
    return all(map(operator.lt, a, islice(a, 1, None)))
