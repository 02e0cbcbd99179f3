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
  (:meth:`LogSegment.batches`, :meth:`LogSegment.walk` with the offset checks of FORMAT.md
  §2.4 from an anchor: position 0 and the base offset, or an index entry checked against
  its batch); what to do where it stops is decided by the caller: recovery
  (:mod:`kafkasim.storage.recovery`) truncates, an index rebuild stops and keeps the old
  entries past that point, a lookup raises. A ``contiguous`` segment (never compacted)
  must hold every offset up to its upper bound: a lookup past its last batch raises.
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
from kafkasim.storage.txn_index import TransactionIndex

__all__ = ["LogSegment"]

_UINT32_MAX = 0xFFFFFFFF
_LOOKUP_CHUNK = 4096    # a lookup walks at most one index interval (and a batch) of headers
_STAMP = struct.Struct(">qii")      # base_offset, batch_length, partition_leader_epoch: outside the CRC


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
        # aborted transactions whose ABORT marker is in this segment (Kafka's .txnindex; absent: none)
        self.txn_index = TransactionIndex(
            os.path.join(directory, layout.segment_name(base_offset, layout.TXN_INDEX_SUFFIX)), base_offset)
        self.index_interval = max(1, index_interval_bytes)
        self.report = on_report        # report(line): the log's recovery report and a warning
        self.fd = -1
        self.size = 0
        self.loaded = False            # indexes in memory and checked
        self.next_offset: Optional[int] = None   # known for the active segment
        self.max_timestamp = -1        # largest record timestamp so far (-1: none / unknown yet)
        self.offset_of_max_timestamp = -1
        self.first_append_ms: Optional[int] = None  # for segment.ms
        self.dirty = False             # bytes written since the last fsync
        self.contiguous = True         # never compacted: no offset gaps (FORMAT.md §2.4); set by the log
        self.rebuilt = False           # indexes re-derived from the data since the open

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

    def refresh_size(self) -> int:
        """Take the ``.log`` file's size as the segment's (opening the active segment)."""
        with storage_errors("stat", self.path):
            self.size = os.fstat(self._ensure_fd()).st_size
        return self.size

    def truncate(self, position: int) -> None:
        """Cut the ``.log`` at ``position`` and fsync it (recovery drops an invalid tail)."""
        with storage_errors(f"truncate to {position}", self.path):
            os.ftruncate(self._ensure_fd(), position)
            os.fsync(self.fd)
        self.size = position

    def _read_at(self, position: int, n: int) -> bytes:
        return _pread(self._ensure_fd(), n, position, self.path)

    def batches(self, start: int = 0, end: Optional[int] = None, *, check_crc: bool = False,
                chunk: int = 1 << 20) -> BatchIterator:
        """The shared batch walk (:class:`kafkasim.records.framing.BatchIterator`) over bytes
        ``[start, end)`` of the ``.log`` (default: to its committed size), read in ``chunk``s."""
        return BatchIterator(self._read_at, start, self.size if end is None else end, where=self.path,
                             check_crc=check_crc, chunk=chunk)

    def walk(self, start: int, first_offset: int, upper_bound_offset: Optional[int] = None, *,
             check_crc: bool = False, chunk: int = _LOOKUP_CHUNK, contiguous: Optional[bool] = None) -> BatchIterator:
        """:meth:`batches` from ``start`` — a batch boundary whose batch starts at (or, compacted,
        not below) ``first_offset`` — with the offset checks of FORMAT.md §2.4: offsets
        contiguous (``contiguous``, default :attr:`contiguous`) or increasing, and below
        ``upper_bound_offset`` (default: the most a segment can hold)."""
        upper = self.base_offset + _UINT32_MAX + 1 if upper_bound_offset is None else upper_bound_offset
        return BatchIterator(self._read_at, start, self.size, where=self.path, check_crc=check_crc, chunk=chunk,
                             first_offset=first_offset, end_offset=upper,
                             contiguous=self.contiguous if contiguous is None else contiguous)

    def _missing_tail(self, next_offset: int, upper_bound_offset: int) -> Optional[CorruptRecordError]:
        """The error for a contiguous segment whose batches end at ``next_offset`` short of the
        next segment's base offset ``upper_bound_offset`` (a file cut at a batch boundary), or None."""
        if not self.contiguous or next_offset >= upper_bound_offset:
            return None
        return CorruptRecordError(
            f"{self.path}: the segment's batches end at position {self.size} with offset {next_offset - 1}, "
            f"but the next segment starts at offset {upper_bound_offset}: offsets {next_offset}.."
            f"{upper_bound_offset - 1} are missing")

    def ensure_loaded(self, upper_bound_offset: int) -> None:
        """Load and check a closed segment's indexes; rebuild them when they do not check out.

        ``upper_bound_offset`` is the next segment's base offset (no offset here reaches it).
        """
        if self.loaded:
            return
        self._ensure_fd()
        try:
            self.index.load(self.size)
            self.check_index_entry(self.index.offsets and (self.index.offsets[-1] + self.base_offset),
                                    self.index.last_position)
            self.time_index.load(upper_bound_offset - 1 - self.base_offset)
            if self.size and not len(self.time_index):
                # closing a segment always writes its final entry (its largest timestamp)
                raise IndexCorruptError(f"{self.time_index.path}: empty for a non-empty closed segment")
            last = self.time_index.last_entry
            if last is not None:
                self.check_time_entry(*last, final=True, upper_bound_offset=upper_bound_offset)
            elif not self.size and self.contiguous and upper_bound_offset > self.base_offset:
                self.report(f"{self._missing_tail(self.base_offset, upper_bound_offset)}")
        except IndexCorruptError as exc:
            self.report(f"{self.path}: index rebuilt ({exc})")
            self.rebuild_indexes(final=True, upper_bound_offset=upper_bound_offset)
        else:
            last = self.time_index.last_entry
            if last is not None:
                self.max_timestamp, self.offset_of_max_timestamp = last
        self.loaded = True

    def check_index_entry(self, offset, position: int) -> None:
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

    def _batch_ending_at(self, offset: int, upper_bound_offset: Optional[int]) -> Optional[tuple[int, BatchHeader]]:
        """(position, header) of the first batch whose last offset is ≥ ``offset`` (no CRC, offsets
        checked), or None."""
        base, pos = self.index.lookup(offset)
        if pos:
            self.check_index_entry(base, pos)
        batches = self.walk(pos, base, upper_bound_offset)
        for p, h in batches:
            if h.base_offset + h.last_offset_delta >= offset:
                return p, h
        batches.raise_error()
        return None

    def check_time_entry(self, timestamp: int, offset: int, final: bool = False,
                         upper_bound_offset: Optional[int] = None) -> None:
        """Raise IndexCorruptError unless the batch ending at ``offset`` has largest timestamp
        ``timestamp`` (and, with ``final``, no batch after the last offset-index entry has a
        larger one). Unreadable data is left to the readers (not an index problem). With
        ``final`` and ``upper_bound_offset``, a contiguous segment whose batches end short of it
        is reported (a cut at a batch boundary; reads into the gap raise)."""
        try:
            found = self._batch_ending_at(offset, upper_bound_offset)
            if found is None or found[1].base_offset + found[1].last_offset_delta != offset \
                    or found[1].max_timestamp != timestamp:
                raise IndexCorruptError(
                    f"{self.time_index.path}: entry ({timestamp}, {offset}) does not match the batch it names")
            if final:
                # bounded: only the batches after the last offset-index entry (≤ one index interval
                # and a batch), so a short or stale last entry is caught without a segment scan
                pos, first = found[0] + found[1].size, found[1].next_offset
                if pos < self.index.last_position:
                    first, pos = self.index.lookup(1 << 62)
                walk = self.walk(pos, first, upper_bound_offset)
                for _, h in walk:   # stops quietly at bad data
                    if h.max_timestamp > timestamp:
                        raise IndexCorruptError(
                            f"{self.time_index.path}: last entry says {timestamp}, a later batch has {h.max_timestamp}")
                if walk.error is None and upper_bound_offset is not None:
                    missing = self._missing_tail(walk.next_offset, upper_bound_offset)
                    if missing is not None:
                        self.report(str(missing))
        except CorruptRecordError:
            return

    # -- the index rule ----------------------------------------------------------------------
    def index_before(self, base_offset: int, position: int) -> None:
        if position > 0 and position - self.index.last_position >= self.index_interval:
            self.index.append(base_offset, position)
            if self.max_timestamp >= 0:
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def account(self, h: BatchHeader) -> None:
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.base_offset + h.last_offset_delta

    def rebuild_indexes(self, final: bool, upper_bound_offset: Optional[int] = None) -> None:
        """Rebuild both indexes by walking the batch headers from position 0 (no CRC check,
        offsets checked as FORMAT.md §2.4 says), and write them.

        A walk that stops before the end (an invalid header, or offsets that break §2.4: readers
        report those) derives nothing past that batch, so the previous index's entries past it
        that still look right (:meth:`OffsetIndex.salvage`) are kept: a rebuild never makes
        data that was reachable unreachable, and a later open answers as this one does
        (FORMAT.md §3.3). ``final`` adds the closing time-index entry (closed segments).
        """
        limit = self.base_offset + _UINT32_MAX + 1 if upper_bound_offset is None else upper_bound_offset
        if self.loaded:
            old_offsets = list(zip(self.index.offsets, self.index.positions))
            old_times = list(zip(self.time_index.timestamps, self.time_index.offsets))
        else:
            old_offsets = self.index.salvage(self.size)
            old_times = self.time_index.salvage(limit - 1 - self.base_offset)
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp = self.offset_of_max_timestamp = -1
        walk = self.walk(0, self.base_offset, limit, chunk=1 << 20)
        for pos, h in walk:   # stops quietly at the first batch that breaks §2.3/§2.4
            self.index_before(h.base_offset, pos)
            self.account(h)
        kept = 0
        if walk.error is not None:
            kept = self.index.keep_after(old_offsets, walk.position)
            if self.max_timestamp >= 0:   # what the walked prefix says, then what the old index said past it
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            kept_times = self.time_index.keep_after(old_times, walk.next_offset - self.base_offset)
            if kept_times:
                self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
            self.report(f"{self.path}: index rebuilt only up to position {walk.position} ({walk.error}); "
                         f"{kept} later offset-index and {kept_times} time-index entries kept from before")
        elif upper_bound_offset is not None and self._missing_tail(walk.next_offset, limit) is not None:
            self.report(str(self._missing_tail(walk.next_offset, limit)))
        if final and self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.index.flush(fsync=False)
        self.time_index.flush(fsync=False)
        self.loaded = self.rebuilt = True

    # -- appending ---------------------------------------------------------------------------
    def append(self, batch, h: BatchHeader, now_ms: int) -> None:
        """Write one verified batch at the end (active segment only), stamped with
        ``h.base_offset`` and ``h.partition_leader_epoch`` (both outside the CRC): the stamped
        first 16 bytes and the rest go out in one ``pwritev``, the batch's bytes never copied.

        ``batch`` is the batch's bytes, or a tuple of byte parts (the first at least 16
        bytes long) that join to them (``kafkasim.records.record_batch.encode_records_parts``)."""
        pos = self.size
        stamp = _STAMP.pack(h.base_offset, h.batch_length, h.partition_leader_epoch)
        if type(batch) is tuple:
            bufs = [stamp, memoryview(batch[0])[16:], *batch[1:]]
        else:
            bufs = [stamp, memoryview(batch)[16:]]
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
        self.index_before(h.base_offset, pos)  # only once the batch is there
        self.size = pos + size
        self.account(h)
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
    def locate(self, offset: int, upper_bound_offset: int) -> Optional[tuple[int, BatchHeader]]:
        """(position, header) of the first batch whose last offset is ≥ ``offset``, or None.

        Starts at the index entry found by binary search and walks batch headers. An index
        entry that does not point at the batch it names gets the indexes rebuilt (reported).
        """
        self.ensure_loaded(upper_bound_offset)
        while True:
            base, pos = self.index.lookup(offset)
            if pos:
                try:
                    self.check_index_entry(base, pos)
                except IndexCorruptError as exc:
                    self._entry_failed(exc, pos, upper_bound_offset)
                    continue
            batches = self.walk(pos, base, upper_bound_offset)
            for p, h in batches:
                if h.base_offset + h.last_offset_delta >= offset:
                    return p, h
            batches.raise_error()
            missing = self._missing_tail(batches.next_offset, upper_bound_offset)
            if missing is not None:
                raise missing
            return None

    def _entry_failed(self, exc: IndexCorruptError, position: int, upper_bound_offset: int) -> None:
        """An offset-index entry a lookup was about to rely on does not point at the batch it
        names: rebuild the indexes (reported); if they were rebuilt already, the entry lies past
        data the rebuild could not walk (kept from before, unverified), so drop it (reported)."""
        if not self.rebuilt:
            self.report(f"{self.path}: index rebuilt ({exc})")
            self.rebuild_indexes(final=self.next_offset is None, upper_bound_offset=upper_bound_offset)
        else:
            self.report(f"{self.path}: index entry at position {position} dropped ({exc})")
            self.index.drop(position)

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
                self.report(f"{self.path}: index rebuilt ({exc})")
                self.rebuild_indexes(final=final, upper_bound_offset=upper_bound_offset)
                entry = self.time_index.entry_below(timestamp)
        start = self.base_offset if entry is None else entry[1] + 1
        found = self.locate(start, upper_bound_offset)
        if found is None:
            return None
        batches = self.walk(found[0], found[1].base_offset, upper_bound_offset)
        for pos, h in batches:
            if h.max_timestamp >= timestamp:
                buf = self.read(pos, h.size)
                verify(buf, 0, h, where=f"{self.path} (position {pos})")
                for r in iter_records(buf, 0, h, where=self.path, min_offset=start):
                    if r.timestamp >= timestamp:
                        return r.offset, r.timestamp
        batches.raise_error()
        return None

    def read(self, position: int, n: int) -> bytes:
        """Up to ``n`` bytes from ``position`` (never past the committed size)."""
        n = min(n, self.size - position)
        if n <= 0:
            return b""
        return _pread(self._ensure_fd(), n, position, self.path)

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        self.txn_index.close()
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def file_paths(self) -> list[str]:
        return [self.path, self.index.path, self.time_index.path, self.txn_index.path]

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
