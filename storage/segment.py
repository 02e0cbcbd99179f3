"""One segment: a ``.log`` file of record batches plus its ``.index`` and ``.timeindex``.

Layout and rules: storage/FORMAT.md §1 (names), §2 (batches), §3 (indexes), §4 (writing).

Invariants:
- ``base_offset`` ≤ the least offset in this segment and > every offset in an
  earlier segment; the file name is ``base_offset`` zero-padded to 20 digits.
- Only the active segment is appended to; bytes ``[0, size)`` of the ``.log`` are
  whole batches back to back (recovery truncates anything else off the active
  segment's tail).
- The index rule is a pure function of the batches, so a rebuilt index equals the
  one written while appending: before the batch at byte ``p > 0`` is written, an
  offset-index entry ``(batch base offset, p)`` is added when
  ``p - last_entry_position >= max(index.interval.bytes, 1)``, and with it a time
  index entry ``(largest timestamp of the batches before p, last offset of the batch
  that holds it)`` when that timestamp grew. Closing the segment for appends adds the
  final time-index entry.
- The indexes of a closed segment are loaded lazily — on its first lookup, time search,
  or when the log needs its largest timestamp — and checked (:meth:`LogSegment.ensure_loaded`);
  one that does not check out is rebuilt from the ``.log`` and the rebuild is reported
  through ``on_report``. ``loaded`` says whether that has happened.
- Batches are walked with the shared :class:`kafkasim.records.framing.BatchIterator`
  (:meth:`LogSegment.batches`); what to do where it stops is decided here: recovery
  truncates, an index rebuild stops, a lookup raises.
- Every ``OSError`` becomes ``KafkaStorageError`` naming the file and what was being done.

Thread-safety: not thread-safe; :class:`kafkasim.storage.log.Log` serialises all calls under
its lock.
"""

from __future__ import annotations

import contextlib
import os
import struct
from typing import Callable, Optional

from kafkasim.errors import CorruptRecordError
from kafkasim.records.framing import BATCH_OVERHEAD, HEADER_SIZE, BatchHeader, BatchIterator, decode_header, verify
from kafkasim.records.record_batch import iter_records
from kafkasim.storage import layout
from kafkasim.storage.files import storage_errors
from kafkasim.storage.index import IndexCorruptError, OffsetIndex, TimeIndex

__all__ = ["LogSegment"]

_UINT32_MAX = 0xFFFFFFFF
_LOOKUP_CHUNK = 4096    # a lookup walks at most one index interval (and a batch) of headers
_BASE_OFFSET = struct.Struct(">q")


def _pread(fd: int, n: int, pos: int, path: str) -> bytes:
    with storage_errors(f"read {n} bytes at position {pos} of", path):
        return os.pread(fd, n, pos)


class LogSegment:
    """A ``.log`` file and its two indexes, named by ``base_offset`` (see module docstring)."""

    def __init__(self, directory: str, base_offset: int, index_interval_bytes: int,
                 on_report: Callable[[str], None]) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.path = os.path.join(directory, layout.segment_name(base_offset, layout.LOG_SUFFIX))
        self.index = OffsetIndex(os.path.join(directory, layout.segment_name(base_offset, layout.INDEX_SUFFIX)),
                                 base_offset)
        self.time_index = TimeIndex(
            os.path.join(directory, layout.segment_name(base_offset, layout.TIMEINDEX_SUFFIX)), base_offset)
        self.index_interval = max(1, index_interval_bytes)
        self._report = on_report
        self.fd = -1
        self.size = 0
        self.loaded = False            # indexes in memory and checked
        self.next_offset: Optional[int] = None   # known for the active segment
        self.max_timestamp = -1        # largest record timestamp so far (-1: none / unknown yet)
        self.offset_of_max_timestamp = -1
        self.first_append_ms: Optional[int] = None  # for segment.ms
        self.dirty = False             # bytes written since the last fsync

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: str, base_offset: int, index_interval_bytes: int,
               on_report: Callable[[str], None]) -> "LogSegment":
        """A new, empty active segment: empty ``.log``, ``.index`` and ``.timeindex`` files."""
        seg = cls(directory, base_offset, index_interval_bytes, on_report)
        with storage_errors("create segment", seg.path):
            seg.fd = os.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            for p in (seg.index.path, seg.time_index.path):  # empty indexes: a missing one means trouble
                os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        seg.loaded = True
        seg.next_offset = base_offset
        return seg

    @classmethod
    def open_closed(cls, directory: str, base_offset: int, index_interval_bytes: int,
                    on_report: Callable[[str], None]) -> "LogSegment":
        """A closed segment: only its size is read; the file is opened on first use."""
        seg = cls(directory, base_offset, index_interval_bytes, on_report)
        with storage_errors("stat segment", seg.path):
            seg.size = os.stat(seg.path).st_size
        return seg

    def _ensure_fd(self) -> int:
        if self.fd < 0:
            with storage_errors("open segment", self.path):
                self.fd = os.open(self.path, os.O_RDWR)
        return self.fd

    def _read_at(self, position: int, n: int) -> bytes:
        return _pread(self._ensure_fd(), n, position, self.path)

    def batches(self, start: int = 0, end: Optional[int] = None, *, check_crc: bool = False,
                chunk: int = 1 << 20) -> BatchIterator:
        """The shared batch walk (:class:`kafkasim.records.framing.BatchIterator`) over bytes
        ``[start, end)`` of the ``.log`` (default: to its committed size), read in ``chunk``s."""
        return BatchIterator(self._read_at, start, self.size if end is None else end, where=self.path,
                             check_crc=check_crc, chunk=chunk)

    def ensure_loaded(self, upper_bound_offset: int) -> None:
        """Load and check a closed segment's indexes; rebuild them when they do not check out.

        ``upper_bound_offset`` is the next segment's base offset (no offset here reaches it).
        """
        if self.loaded:
            return
        self._ensure_fd()
        try:
            self.index.load(self.size)
            self._check_index_entry(self.index.offsets and (self.index.offsets[-1] + self.base_offset),
                                    self.index.last_position)
            self.time_index.load(upper_bound_offset - 1 - self.base_offset)
            if self.size and not len(self.time_index):
                # closing a segment always writes its final entry (its largest timestamp)
                raise IndexCorruptError(f"{self.time_index.path}: empty for a non-empty closed segment")
            last = self.time_index.last_entry
            if last is not None:
                self.check_time_entry(*last, final=True)
        except IndexCorruptError as exc:
            self._report(f"{self.path}: index rebuilt ({exc})")
            self.rebuild_indexes(final=True, upper_bound_offset=upper_bound_offset)
        else:
            last = self.time_index.last_entry
            if last is not None:
                self.max_timestamp, self.offset_of_max_timestamp = last
        self.loaded = True

    def _check_index_entry(self, offset, position: int) -> None:
        """Raise IndexCorruptError unless a batch with base offset ``offset`` starts at ``position``."""
        if position == 0:
            return
        raw = _pread(self._ensure_fd(), HEADER_SIZE, position, self.path)
        try:
            h = decode_header(raw, 0, where=self.path)
        except CorruptRecordError as exc:
            raise IndexCorruptError(f"entry for offset {offset} points at position {position}: {exc}") from None
        if h.base_offset != offset:
            raise IndexCorruptError(
                f"entry for offset {offset} points at position {position}, where the batch has base offset {h.base_offset}")

    def _batch_ending_at(self, offset: int) -> Optional[tuple[int, BatchHeader]]:
        """(position, header) of the first batch whose last offset is ≥ ``offset`` (no CRC), or None."""
        _, pos = self.index.lookup(offset)
        batches = self.batches(pos, chunk=_LOOKUP_CHUNK)
        for p, h in batches:
            if h.base_offset + h.last_offset_delta >= offset:
                return p, h
        batches.raise_error()
        return None

    def check_time_entry(self, timestamp: int, offset: int, final: bool = False) -> None:
        """Raise IndexCorruptError unless the batch ending at ``offset`` has largest timestamp
        ``timestamp`` (and, with ``final``, no batch after the last offset-index entry has a
        larger one). Unreadable data is left to the readers (not an index problem)."""
        try:
            found = self._batch_ending_at(offset)
            if found is None or found[1].base_offset + found[1].last_offset_delta != offset \
                    or found[1].max_timestamp != timestamp:
                raise IndexCorruptError(
                    f"{self.time_index.path}: entry ({timestamp}, {offset}) does not match the batch it names")
            if final:
                # bounded: only the batches after the last offset-index entry (≤ one index interval
                # and a batch), so a short or stale last entry is caught without a segment scan
                pos = max(found[0] + found[1].size, self.index.last_position)
                for _, h in self.batches(pos, chunk=_LOOKUP_CHUNK):   # stops quietly at bad data
                    if h.max_timestamp > timestamp:
                        raise IndexCorruptError(
                            f"{self.time_index.path}: last entry says {timestamp}, a later batch has {h.max_timestamp}")
        except CorruptRecordError:
            return

    # -- the index rule ----------------------------------------------------------------------
    def _index_before(self, base_offset: int, position: int) -> None:
        if position > 0 and position - self.index.last_position >= self.index_interval:
            self.index.append(base_offset, position)
            if self.max_timestamp >= 0:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def _account(self, h: BatchHeader) -> None:
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.base_offset + h.last_offset_delta

    def rebuild_indexes(self, final: bool, end: Optional[int] = None,
                        upper_bound_offset: Optional[int] = None) -> None:
        """Rebuild both indexes by walking the batch headers of ``[0, end)`` (no CRC check).

        Stops silently at the first invalid header, or at a batch whose offsets do not
        increase or leave ``[base_offset, upper_bound_offset)`` (readers report those).
        ``final`` adds the closing time-index entry (closed segments).
        """
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp = self.offset_of_max_timestamp = -1
        end = self.size if end is None else end
        limit = min(self.base_offset + _UINT32_MAX + 1,
                    upper_bound_offset if upper_bound_offset is not None else 1 << 63)
        floor = self.base_offset
        for pos, h in self.batches(0, end):   # stops quietly at the first invalid header
            last = h.base_offset + h.last_offset_delta
            if h.base_offset < floor or last >= limit:
                break
            floor = last + 1
            self._index_before(h.base_offset, pos)
            self._account(h)
        if final and self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.index.flush(fsync=False)
        self.time_index.flush(fsync=False)
        self.loaded = True

    # -- recovery of the active segment ----------------------------------------------------------
    def recover(self, start: int, start_offset: int, max_ts: int, offset_of_max_ts: int) -> Optional[str]:
        """Validate batches from ``start`` (a batch boundary, or 0) to the end of the file.

        Keeps the index entries below ``start`` (rebuilding both indexes when they do not
        check out), re-applies the index rule over the validated range, truncates the first
        invalid batch and everything after it, and returns a report line if it truncated.
        """
        with storage_errors("stat", self.path):
            self.size = os.fstat(self._ensure_fd()).st_size
        if start > self.size:
            start = 0
        try:
            self.index.load(max(self.size, 1))
            self.index.truncate_to_position(start)
            ibase, ipos = self.index.lookup(1 << 62)
            self._check_index_entry(ibase, ipos)
            self.time_index.load(1 << 32)
            self.time_index.truncate_to_offset(start_offset)
        except IndexCorruptError as exc:
            self._report(f"{self.path}: index rebuilt ({exc})")
            start = 0
        if start > 0:
            # the recovery point must land on a batch boundary whose next offset it names
            nxt = ibase
            walk = self.batches(ipos, start, chunk=65536)
            for _, h in walk:
                nxt = h.base_offset + h.last_offset_delta + 1
            if walk.error is not None:
                nxt = -1
            if nxt != start_offset:
                self._report(f"{self.path}: recovery point (offset {start_offset}, position {start}) "
                             f"does not match the log; validating the whole segment")
                start = 0
        if start == 0:
            self.index.reset()
            self.time_index.reset()
            start_offset, max_ts, offset_of_max_ts = self.base_offset, -1, -1
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, offset_of_max_ts
        last = self.time_index.last_entry
        if last is not None and last[0] > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = last
        next_offset = start_offset
        batches = self.batches(start, check_crc=True)
        for pos, h in batches:
            if h.base_offset != next_offset:
                batches.reject(CorruptRecordError(
                    f"{self.path}: batch at position {pos} has base offset {h.base_offset}, "
                    f"expected {next_offset}"))
                break
            self._index_before(h.base_offset, pos)
            self._account(h)
            next_offset = h.base_offset + h.last_offset_delta + 1
        pos = batches.position   # the end, or the first batch that is torn or invalid
        report = None
        if pos < self.size:
            dropped = self.size - pos
            report = (f"{self.path}: truncated {dropped} bytes at position {pos} "
                      f"(log end offset {next_offset}): {batches.error}")
            with storage_errors(f"truncate to {pos}", self.path):
                os.ftruncate(self.fd, pos)
                os.fsync(self.fd)
            self.size = pos
        self.index.flush(fsync=True)
        self.time_index.flush(fsync=True)
        self.next_offset = next_offset
        self.loaded = True
        return report

    def open_clean(self) -> bool:
        """Open the active segment after a clean shutdown: load its indexes and walk the
        batches after the last index entry (CRC-checked) to find the next offset.

        Returns False (nothing changed on disk) when anything fails its checks; the caller
        then runs :meth:`recover`.
        """
        with storage_errors("stat", self.path):
            self.size = os.fstat(self._ensure_fd()).st_size
        try:
            self.index.load(max(self.size, 1))
            base, pos = self.index.lookup(1 << 62)
            self._check_index_entry(base, pos)
            next_offset = self.base_offset
            batches = self.batches(pos, check_crc=True)
            for p, h in batches:
                next_offset = h.base_offset + h.last_offset_delta + 1
                if h.max_timestamp > self.max_timestamp:
                    self.max_timestamp = h.max_timestamp
                    self.offset_of_max_timestamp = next_offset - 1
            batches.raise_error()
            self.time_index.load(next_offset - 1 - self.base_offset)
            last = self.time_index.last_entry
            if last is not None:
                self.check_time_entry(*last, final=True)
        except (IndexCorruptError, CorruptRecordError):
            self.index.reset()
            self.time_index.reset()
            self.max_timestamp = self.offset_of_max_timestamp = -1
            return False
        last = self.time_index.last_entry
        if last is not None and last[0] >= self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = last
        self.next_offset = next_offset
        self.loaded = True
        return True

    # -- appending ---------------------------------------------------------------------------
    def append(self, batch, h: BatchHeader, now_ms: int) -> None:
        """Write one verified batch at the end (active segment only), stamped with
        ``h.base_offset``: the 8-byte base offset and the rest go out in one ``pwritev``.

        ``batch`` is the batch's bytes, or a tuple of byte parts (the first at least 8
        bytes long) that join to them (``kafkasim.records.record_batch.encode_records_parts``)."""
        pos = self.size
        stamp = _BASE_OFFSET.pack(h.base_offset)
        if type(batch) is tuple:
            bufs = [stamp, memoryview(batch[0])[8:], *batch[1:]]
        else:
            bufs = [stamp, memoryview(batch)[8:]]
        size = BATCH_OVERHEAD + h.batch_length
        with storage_errors(f"write {size} bytes at position {pos} to", self.path):
            try:
                n = os.pwritev(self.fd, bufs, pos)
                if n < size:  # a short write: finish it, or fail and cut it off below
                    stamped = b"".join(bufs)
                    while n < size:
                        n += os.pwrite(self.fd, memoryview(stamped)[n:], pos + n)
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(self.fd, pos)   # nothing of a failed batch stays behind
                raise
        self._index_before(h.base_offset, pos)  # only once the batch is there
        self.size = pos + size
        self._account(h)
        self.next_offset = h.base_offset + h.last_offset_delta + 1
        if self.first_append_ms is None:
            self.first_append_ms = now_ms
        self.dirty = True

    def flush(self, fsync: bool = True) -> None:
        """Write pending index entries and (``fsync``) force the log and indexes to disk."""
        if self.fd >= 0 and fsync and self.dirty:
            with storage_errors("fsync", self.path):
                os.fsync(self.fd)
            self.dirty = False
        if self.loaded:
            self.index.flush(fsync)
            self.time_index.flush(fsync)

    def close_for_append(self) -> None:
        """Called when the segment stops being active: final time-index entry, then fsync."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.dirty = True
        self.flush(fsync=True)

    # -- reading -----------------------------------------------------------------------------
    def header_at(self, position: int) -> BatchHeader:
        raw = _pread(self._ensure_fd(), HEADER_SIZE, position, self.path)
        return decode_header(raw, 0, where=f"{self.path} (position {position})")

    def locate(self, offset: int, upper_bound_offset: int) -> Optional[tuple[int, BatchHeader]]:
        """(position, header) of the first batch whose last offset is ≥ ``offset``, or None.

        Starts at the index entry found by binary search and walks batch headers. An index
        entry that does not point at the batch it names gets the indexes rebuilt (reported).
        """
        self.ensure_loaded(upper_bound_offset)
        for attempt in (0, 1):
            base, pos = self.index.lookup(offset)
            try:
                if pos:
                    self._check_index_entry(base, pos)
                batches = self.batches(pos, chunk=_LOOKUP_CHUNK)
                for p, h in batches:
                    if h.base_offset + h.last_offset_delta >= offset:
                        return p, h
                batches.raise_error()
                return None
            except IndexCorruptError as exc:
                if attempt:
                    raise CorruptRecordError(f"{self.path}: index unusable after rebuild: {exc}") from None
                self._report(f"{self.path}: index rebuilt ({exc})")
                self.rebuild_indexes(final=self.next_offset is None, upper_bound_offset=upper_bound_offset)
        return None

    def find_offset_by_timestamp(self, timestamp: int, upper_bound_offset: int,
                                 final: bool) -> Optional[tuple[int, int]]:
        """(offset, timestamp) of the first record here whose timestamp is ≥ ``timestamp``, or
        None (FORMAT.md §3.2; Kafka's ``LogSegment.findOffsetByTimestamp``). Loads the indexes;
        a time-index entry it relies on that does not match its batch gets them rebuilt
        (reported; ``final``: this is a closed segment)."""
        self.ensure_loaded(upper_bound_offset)
        if self.max_timestamp < timestamp:
            return None
        entry = self.time_index.entry_below(timestamp)
        if entry is not None:
            # the entry we rely on must match its batch (a flipped bit could skip records)
            try:
                self.check_time_entry(*entry)
            except IndexCorruptError as exc:
                self._report(f"{self.path}: index rebuilt ({exc})")
                self.rebuild_indexes(final=final, upper_bound_offset=upper_bound_offset)
                entry = self.time_index.entry_below(timestamp)
        start = self.base_offset if entry is None else entry[1] + 1
        found = self.locate(start, upper_bound_offset)
        if found is None:
            return None
        pos = found[0]
        while pos < self.size:
            h = self.header_at(pos)
            if h.max_timestamp >= timestamp:
                buf = self.read(pos, h.size)
                verify(buf, 0, h, where=f"{self.path} (position {pos})")
                for r in iter_records(buf, 0, h, where=self.path, min_offset=start):
                    if r.timestamp >= timestamp:
                        return r.offset, r.timestamp
            pos += h.size
        return None

    def read(self, position: int, n: int) -> bytes:
        """Up to ``n`` bytes from ``position`` (never past the committed size)."""
        n = min(n, self.size - position)
        if n <= 0:
            return b""
        return _pread(self._ensure_fd(), n, position, self.path)

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def file_paths(self) -> list[str]:
        return [self.path, self.index.path, self.time_index.path]

    def delete(self) -> None:
        """Close and remove the segment's files (retention, FORMAT.md §6): each is renamed to
        ``.deleted`` first, ``.log`` first (once it is gone the segment is gone), then unlinked."""
        self.close()
        renamed = []
        with storage_errors("delete segment", self.path):
            for p in self.file_paths():
                if os.path.exists(p):
                    os.replace(p, p + layout.DELETED_SUFFIX)
                    renamed.append(p + layout.DELETED_SUFFIX)
            for p in renamed:
                os.unlink(p)

    def replace_log_file(self, cleaned_path: str) -> None:
        """Swap a compacted copy of this closed segment's ``.log`` in (FORMAT.md §6):
        ``cleaned_path`` → ``<base>.log.swap``, the indexes deleted, the ``.swap`` renamed over
        the ``.log``. Closes the file; the caller opens the segment anew and rebuilds its indexes
        (an interrupted swap is completed on open, FORMAT.md §1.1)."""
        swap = self.path + layout.SWAP_SUFFIX
        with storage_errors("swap in a cleaned segment as", self.path):
            os.replace(cleaned_path, swap)
            for p in (self.index.path, self.time_index.path):
                if os.path.exists(p):
                    os.unlink(p)
            self.close()
            os.replace(swap, self.path)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"
