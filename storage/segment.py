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
- The indexes of a closed segment are loaded lazily (first lookup) and checked;
  one that does not check out is rebuilt from the ``.log`` and the rebuild is
  reported through ``on_report``.

Thread-safety: not thread-safe; :class:`kafkasim.storage.log.Log` serialises all calls under
its lock.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import Callable, Iterator, Optional

import msgpack

from kafkasim.errors import CorruptRecordError, KafkaStorageError
from kafkasim.types import Record
from kafkasim.storage import layout
from kafkasim.storage.index import IndexCorruptError, OffsetIndex, TimeIndex
from kafkasim.records.record_batch import (
    BATCH_OVERHEAD, CRC_START, HEADER_SIZE, MAGIC, NO_SEQUENCE, BatchHeader, decode_header,
)

__all__ = ["LogSegment", "decode_batch_records", "iter_headers"]

_READ_CHUNK = 1 << 20
_UINT32_MAX = 0xFFFFFFFF
_unpackb = msgpack.unpackb
_tuple_new = tuple.__new__


def decode_batch_records(buf, pos: int, h: BatchHeader, min_offset: int = 0,
                         where: str = "<buffer>") -> list[Record]:
    """The records of a CRC-verified batch as :class:`Record` objects (offset ≥ ``min_offset``).

    The lean read path: one ``msgpack.unpackb`` of the payload and one tuple built per
    record; the shape is trusted because the CRC matched (``verify-log`` checks it fully).
    """
    try:
        body = _unpackb(memoryview(buf)[pos + HEADER_SIZE:pos + BATCH_OVERHEAD + h.batch_length],
                        use_list=False, raw=False)
        if len(body) != h.record_count:
            raise ValueError(f"{len(body)} records, header says {h.record_count}")
        base, ts0, pid, ep, seq0 = h.base_offset, h.base_timestamp, h.producer_id, h.producer_epoch, h.base_sequence
        if seq0 >= 0:
            recs = [_tuple_new(Record, (base + d, ts0 + t, k, v, hd, pid, ep, seq0 + d))
                    for d, t, k, v, hd in body]
        else:
            recs = [_tuple_new(Record, (base + d, ts0 + t, k, v, hd, pid, ep, NO_SEQUENCE))
                    for d, t, k, v, hd in body]
    except Exception as exc:  # msgpack raises assorted types on garbage; unpacking raises ValueError/TypeError
        raise CorruptRecordError(f"{where}: undecodable records in batch at position {pos}: {exc}") from exc
    if min_offset > base and recs:
        recs = [r for r in recs if r[0] >= min_offset]
    return recs


def iter_headers(fd: int, start: int, end: int, *, where: str, check_crc: bool,
                 chunk: int = _READ_CHUNK) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each batch in ``[start, end)`` of an open file.

    Reads in chunks; with ``check_crc`` every batch's CRC is verified. Raises
    :class:`CorruptRecordError` (naming ``where`` and the position) at the first batch
    that is not valid; the caller decides (truncate, report, skip).
    """
    pos = start
    buf = b""
    buf_start = start
    while pos < end:
        off = pos - buf_start
        if len(buf) - off < HEADER_SIZE:
            buf = _pread(fd, min(max(chunk, HEADER_SIZE), end - pos), pos, where)
            buf_start, off = pos, 0
        if len(buf) - off < HEADER_SIZE:
            raise CorruptRecordError(
                f"{where}: truncated batch header at position {pos} ({len(buf) - off} of {HEADER_SIZE} bytes)")
        h = _parse_header(buf, off, pos, where)
        size = BATCH_OVERHEAD + h.batch_length
        if pos + size > end:
            raise CorruptRecordError(
                f"{where}: truncated batch at position {pos}: needs {size} bytes, {end - pos} present")
        if check_crc:
            if off + size > len(buf):
                buf = _pread(fd, max(chunk, size), pos, where)
                buf_start, off = pos, 0
            crc = zlib.crc32(memoryview(buf)[off + CRC_START:off + size])
            if crc != h.crc:
                raise CorruptRecordError(
                    f"{where}: CRC mismatch in batch at position {pos} (base offset {h.base_offset}): "
                    f"stored 0x{h.crc:08x}, computed 0x{crc:08x}")
        yield pos, h
        pos += size


_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_MIN_BATCH_LENGTH = HEADER_SIZE - BATCH_OVERHEAD


def _parse_header(buf, off: int, pos: int, where: str) -> BatchHeader:
    """decode_header's checks (FORMAT.md §2.3), naming the absolute file position ``pos``."""
    h = BatchHeader._make(_HEADER.unpack_from(buf, off))
    if h.magic != MAGIC:
        raise CorruptRecordError(f"{where}: unknown magic {h.magic} at position {pos} (expected {MAGIC})")
    if h.batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"{where}: batch length {h.batch_length} at position {pos} is below the minimum {_MIN_BATCH_LENGTH}")
    if h.record_count < 0 or h.last_offset_delta < 0 or h.base_offset < 0:
        raise CorruptRecordError(
            f"{where}: impossible header at position {pos}: base_offset={h.base_offset} "
            f"record_count={h.record_count} last_offset_delta={h.last_offset_delta}")
    return h


def _pread(fd: int, n: int, pos: int, where: str) -> bytes:
    try:
        return os.pread(fd, n, pos)
    except OSError as exc:
        raise KafkaStorageError(f"{where}: read of {n} bytes at position {pos} failed: {exc}") from exc


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
        try:
            seg.fd = os.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            for p in (seg.index.path, seg.time_index.path):  # empty indexes: a missing one means trouble
                os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        except OSError as exc:
            raise KafkaStorageError(f"cannot create segment {seg.path}: {exc}") from exc
        seg.loaded = True
        seg.next_offset = base_offset
        return seg

    @classmethod
    def open_closed(cls, directory: str, base_offset: int, index_interval_bytes: int,
                    on_report: Callable[[str], None]) -> "LogSegment":
        """A closed segment: only its size is read; the file is opened on first use."""
        seg = cls(directory, base_offset, index_interval_bytes, on_report)
        try:
            seg.size = os.stat(seg.path).st_size
        except OSError as exc:
            raise KafkaStorageError(f"cannot stat segment {seg.path}: {exc}") from exc
        return seg

    def _ensure_fd(self) -> int:
        if self.fd < 0:
            try:
                self.fd = os.open(self.path, os.O_RDWR)
            except OSError as exc:
                raise KafkaStorageError(f"cannot open segment {self.path}: {exc}") from exc
        return self.fd

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
        for p, h in iter_headers(self._ensure_fd(), pos, self.size, where=self.path, check_crc=False,
                                 chunk=4096):
            if h.base_offset + h.last_offset_delta >= offset:
                return p, h
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
                for _, h in iter_headers(self.fd, pos, self.size, where=self.path, check_crc=False,
                                         chunk=4096):
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
        self._ensure_fd()
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp = self.offset_of_max_timestamp = -1
        end = self.size if end is None else end
        limit = min(self.base_offset + _UINT32_MAX + 1,
                    upper_bound_offset if upper_bound_offset is not None else 1 << 63)
        floor = self.base_offset
        try:
            for pos, h in iter_headers(self.fd, 0, end, where=self.path, check_crc=False):
                last = h.base_offset + h.last_offset_delta
                if h.base_offset < floor or last >= limit:
                    break
                floor = last + 1
                self._index_before(h.base_offset, pos)
                self._account(h)
        except CorruptRecordError:
            pass
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
        self._ensure_fd()
        try:
            self.size = os.fstat(self.fd).st_size
        except OSError as exc:
            raise KafkaStorageError(f"cannot stat {self.path}: {exc}") from exc
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
            try:
                for _, h in iter_headers(self.fd, ipos, start, where=self.path, check_crc=False, chunk=65536):
                    nxt = h.base_offset + h.last_offset_delta + 1
            except CorruptRecordError:
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
        pos = start
        problem = None
        try:
            for pos, h in iter_headers(self.fd, start, self.size, where=self.path, check_crc=True):
                if h.base_offset != next_offset:
                    raise CorruptRecordError(
                        f"{self.path}: batch at position {pos} has base offset {h.base_offset}, "
                        f"expected {next_offset}")
                self._index_before(h.base_offset, pos)
                self._account(h)
                next_offset = h.base_offset + h.last_offset_delta + 1
                pos += BATCH_OVERHEAD + h.batch_length
        except CorruptRecordError as exc:
            problem = str(exc)
        report = None
        if pos < self.size:
            dropped = self.size - pos
            report = (f"{self.path}: truncated {dropped} bytes at position {pos} "
                      f"(log end offset {next_offset}): {problem}")
            try:
                os.ftruncate(self.fd, pos)
                os.fsync(self.fd)
            except OSError as exc:
                raise KafkaStorageError(f"cannot truncate {self.path} to {pos}: {exc}") from exc
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
        self._ensure_fd()
        try:
            self.size = os.fstat(self.fd).st_size
            self.index.load(max(self.size, 1))
            base, pos = self.index.lookup(1 << 62)
            self._check_index_entry(base, pos)
            next_offset = self.base_offset
            for p, h in iter_headers(self.fd, pos, self.size, where=self.path, check_crc=True):
                next_offset = h.base_offset + h.last_offset_delta + 1
                if h.max_timestamp > self.max_timestamp:
                    self.max_timestamp = h.max_timestamp
                    self.offset_of_max_timestamp = next_offset - 1
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
        try:
            n = os.pwritev(self.fd, bufs, pos)
            if n < size:  # a short write: finish it, or fail and cut it off below
                stamped = b"".join(bufs)
                while n < size:
                    n += os.pwrite(self.fd, memoryview(stamped)[n:], pos + n)
        except OSError as exc:
            try:
                os.ftruncate(self.fd, pos)
            except OSError:
                pass
            raise KafkaStorageError(f"write of {size} bytes to {self.path} at {pos} failed: {exc}") from exc
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
            try:
                os.fsync(self.fd)
            except OSError as exc:
                raise KafkaStorageError(f"fsync of {self.path} failed: {exc}") from exc
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
        self._ensure_fd()
        for attempt in (0, 1):
            base, pos = self.index.lookup(offset)
            try:
                if pos:
                    self._check_index_entry(base, pos)
                for p, h in iter_headers(self.fd, pos, self.size, where=self.path, check_crc=False,
                                         chunk=4096):
                    if h.base_offset + h.last_offset_delta >= offset:
                        return p, h
                return None
            except IndexCorruptError as exc:
                if attempt:
                    raise CorruptRecordError(f"{self.path}: index unusable after rebuild: {exc}") from None
                self._report(f"{self.path}: index rebuilt ({exc})")
                self.rebuild_indexes(final=self.next_offset is None, upper_bound_offset=upper_bound_offset)
        return None

    def read(self, position: int, n: int) -> bytes:
        """Up to ``n`` bytes from ``position`` (never past the committed size)."""
        n = min(n, self.size - position)
        if n <= 0:
            return b""
        return _pread(self._ensure_fd(), n, position, self.path)

    def first_batch_header(self) -> Optional[BatchHeader]:
        if self.size < HEADER_SIZE:
            return None
        try:
            return self.header_at(0)
        except CorruptRecordError:
            return None

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1

    def file_paths(self) -> list[str]:
        return [self.path, self.index.path, self.time_index.path]

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"
