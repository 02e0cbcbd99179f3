"""One partition's log: a sequence of segments in one directory (storage/FORMAT.md §1, §4–§6).

Usage::

    >>> log = Log(path, LogConfig.from_overrides({"segment.bytes": 1 << 20}), clock)
    >>> h = log.append([(1_700_000_000_000, b"key", b"value", ())])
    >>> [r.value for r in log.read(h.base_offset)]
    [b'value']

Invariants:
- Offsets are assigned here, contiguous: a batch appended when the log end offset
  (LEO) is ``n`` gets base offset ``n`` and the LEO becomes its last offset + 1.
- Segments are kept in a SortedDict keyed by base offset; the segment holding
  offset ``o`` is the floor entry of ``o`` (O(log #segments)); only the last one
  (the active segment) is written; closed segments change only by retention
  (deleted whole) and compaction (replaced whole).
- log start offset = base offset of the first segment; high watermark = LEO (one
  replica).
- Opening never reads closed segments (only their sizes): after a clean shutdown
  the active segment is trusted up to its size; otherwise it is validated from the
  recovery point and a torn or corrupt tail is truncated and reported in
  :attr:`Log.recovery_report`.
- Every ``OSError`` becomes :class:`KafkaStorageError` (chained).

Thread-safety: thread-safe. One re-entrant lock per log serialises appends, the
segment map and file positions; ``read`` decodes outside the lock. Retention and
compaction also hold a second lock so only one of them runs at a time, and
compaction reads and rewrites closed segments without blocking appends.
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import threading
import uuid
from bisect import bisect_left
from collections import OrderedDict
from itertools import repeat
from operator import add
from typing import Iterable, NamedTuple, Optional, Sequence

from sortedcontainers import SortedDict

from kafkasim.clock import Clock, SystemClock
from kafkasim.config import LogConfig
from kafkasim.errors import (
    CorruptRecordError, IllegalStateError, InvalidRecordError, KafkaStorageError, OffsetOutOfRangeError,
    RecordBatchTooLargeError, RecordTooLargeError,
)
from kafkasim.types import Record
from kafkasim.storage import layout
from kafkasim.records import record_batch as rb
from kafkasim.records.record_batch import BatchHeader
from kafkasim.storage.index import IndexCorruptError
from kafkasim.storage.segment import LogSegment, decode_batch_records

__all__ = ["Log", "SegmentInfo", "RecordColumns", "RECOVERY_POINT_FILE", "CLEAN_SHUTDOWN_FILE", "CLEANER_CHECKPOINT_FILE",
           "MAX_OPEN_CLOSED_SEGMENTS"]

RECOVERY_POINT_FILE = "recovery-point"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"
CLEANER_CHECKPOINT_FILE = "cleaner-checkpoint"
_LEFTOVER_SUFFIXES = (".deleted", ".cleaned", ".tmp")
_SWAP = ".swap"
_UINT32_MAX = 0xFFFFFFFF
MAX_OPEN_CLOSED_SEGMENTS = 64
"""Closed segments whose files stay open at once per log (least recently used are closed)."""

log_ = logging.getLogger("kafkasim.storage")

_GC_NOTE = """
Encoding and decoding a batch allocates one or two tuples per record, and CPython's
cyclic garbage collector runs a collection every 700 container allocations; on the
read path that costs about a third of the time, for objects that cannot form cycles.
So, as Mercurial's ``util.nogc`` does, the collector is paused for the duration of
one batch encode / one read's decode and resumed if it was enabled. Concurrent
readers may resume it while another is still decoding, which only costs speed.
"""


class SegmentInfo(NamedTuple):
    """What :attr:`Log.segments` reports per segment (``max_timestamp`` -1 when empty)."""

    base_offset: int
    size_bytes: int
    path: str
    max_timestamp: int


class RecordColumns(NamedTuple):
    """Records of a read, column-wise (:meth:`Log.read_columns`): five equal-length lists.

    Row ``i`` is the record at ``offsets[i]`` (increasing); ``headers[i]`` is a tuple of
    ``(key, value)`` tuples. The same records :meth:`Log.read` returns, without the
    producer fields (``producer_id``/``producer_epoch``/``sequence``).
    """

    offsets: list
    timestamps: list
    keys: list
    values: list
    headers: list


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the data files are synced


def _write_atomic(path: str, text: str) -> None:
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="ascii") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise KafkaStorageError(f"cannot write {path}: {exc}") from exc


def _read_ints(path: str, n: int) -> Optional[list[int]]:
    """The ``n`` integers of a small text file, or None when missing or malformed."""
    try:
        with open(path, "r", encoding="ascii") as f:
            parts = f.read(256).split()
        if len(parts) != n:
            return None
        return [int(p) for p in parts]
    except (OSError, ValueError, UnicodeDecodeError):
        return None


class Log:
    """A partition's segmented log in ``directory`` (see the module docstring)."""

    def __init__(self, directory: str, config: LogConfig = LogConfig(), clock: Optional[Clock] = None) -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        self._config = config
        self._clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._clean_lock = threading.Lock()
        self._segments: SortedDict = SortedDict()
        self._open_lru: OrderedDict[int, LogSegment] = OrderedDict()
        self._active_seg: Optional[LogSegment] = None
        self._recovery_report: list[str] = []
        self._closed = False
        self._unflushed_messages = 0
        self._first_unflushed_ms: Optional[int] = None
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as exc:
            raise KafkaStorageError(f"cannot create log directory {self.directory}: {exc}") from exc
        try:
            self._open()
        except BaseException:
            for seg in self._segments.values():
                seg.close()
            raise

    # -- opening and recovery ------------------------------------------------------------
    def _report(self, line: str) -> None:
        self._recovery_report.append(line)
        log_.warning("%s", line)

    def _new_segment_obj(self, base: int) -> LogSegment:
        return LogSegment(self.directory, base, self._config.index_interval_bytes, self._report)

    def _open(self) -> None:
        self._remove_leftovers()
        bases = [b for b, _ in layout.list_segments(self.directory)]
        interval = self._config.index_interval_bytes
        clean_path = os.path.join(self.directory, CLEAN_SHUTDOWN_FILE)
        clean = _read_ints(clean_path, 3) if os.path.exists(clean_path) else None
        if os.path.exists(clean_path):
            try:
                os.unlink(clean_path)
            except OSError as exc:
                raise KafkaStorageError(f"cannot remove {clean_path}: {exc}") from exc
            _fsync_dir(self.directory)
        if not bases:
            seg = LogSegment.create(self.directory, 0, interval, self._report)
            self._segments[0] = seg
            _fsync_dir(self.directory)
            self._write_recovery_point()
            return
        for base in bases[:-1]:
            self._segments[base] = LogSegment.open_closed(self.directory, base, interval, self._report)
        active = self._new_segment_obj(bases[-1])
        self._segments[active.base_offset] = active
        opened = False
        if clean is not None:
            leo, base, size = clean
            try:
                actual = os.stat(active.path).st_size
            except OSError as exc:
                raise KafkaStorageError(f"cannot stat {active.path}: {exc}") from exc
            if base == active.base_offset and size == actual:
                opened = active.open_clean() and active.next_offset == leo
                if not opened:
                    active.index.reset()
                    active.time_index.reset()
                    active.loaded = False
        if not opened:
            rp = _read_ints(os.path.join(self.directory, RECOVERY_POINT_FILE), 5)
            if rp is not None and rp[1] == active.base_offset and rp[0] >= active.base_offset and rp[2] >= 0:
                start_offset, _, pos, max_ts, off_max = rp
            else:
                start_offset, pos, max_ts, off_max = active.base_offset, 0, -1, -1
            report = active.recover(pos, start_offset, max_ts, off_max)
            if report:
                self._report(report)
        active.first_append_ms = self._clock.now_ms() if active.size else None
        self._write_recovery_point()

    def _remove_leftovers(self) -> None:
        """Finish or undo what an interrupted delete/compaction left behind (FORMAT.md §1.1)."""
        try:
            names = os.listdir(self.directory)
        except OSError as exc:
            raise KafkaStorageError(f"cannot list {self.directory}: {exc}") from exc
        for name in sorted(names):
            path = os.path.join(self.directory, name)
            try:
                if name.endswith(_LEFTOVER_SUFFIXES):
                    os.unlink(path)
                elif name.endswith(layout.LOG_SUFFIX + _SWAP):
                    final = path[:-len(_SWAP)]
                    for suffix in (layout.INDEX_SUFFIX, layout.TIMEINDEX_SUFFIX):
                        idx = final[:-len(layout.LOG_SUFFIX)] + suffix
                        if os.path.exists(idx):
                            os.unlink(idx)
                    os.replace(path, final)
                    self._report(f"{final}: completed an interrupted compaction swap")
                elif name.endswith(_SWAP):
                    os.unlink(path)
            except OSError as exc:
                raise KafkaStorageError(f"cannot clean up {path}: {exc}") from exc
        # index files without their .log are orphans of an interrupted delete
        logs = {n[:-len(layout.LOG_SUFFIX)] for n in os.listdir(self.directory) if n.endswith(layout.LOG_SUFFIX)}
        for name in os.listdir(self.directory):
            for suffix in (layout.INDEX_SUFFIX, layout.TIMEINDEX_SUFFIX):
                if name.endswith(suffix) and name[:-len(suffix)] not in logs:
                    try:
                        os.unlink(os.path.join(self.directory, name))
                    except OSError as exc:
                        raise KafkaStorageError(f"cannot remove orphan index {name}: {exc}") from exc

    def _write_recovery_point(self) -> None:
        act = self._active
        _write_atomic(os.path.join(self.directory, RECOVERY_POINT_FILE),
                      f"{act.next_offset} {act.base_offset} {act.size} "
                      f"{act.max_timestamp} {act.offset_of_max_timestamp}\n")

    # -- properties ----------------------------------------------------------------------
    @property
    def _active(self) -> LogSegment:
        """The last segment (cached: the SortedDict lookup is measurable per append)."""
        seg = self._active_seg
        if seg is None or self._segments.get(seg.base_offset) is not seg:
            seg = self._active_seg = self._segments.peekitem(-1)[1]
        return seg

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def log_start_offset(self) -> int:
        with self._lock:
            return self._segments.peekitem(0)[0]

    @property
    def log_end_offset(self) -> int:
        with self._lock:
            return self._active.next_offset

    @property
    def high_watermark(self) -> int:
        """Equal to the log end offset while there is one replica."""
        return self.log_end_offset

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments.values())

    @property
    def recovery_report(self) -> list[str]:
        """What opening (and lazy index checks since) truncated or rebuilt, one line each."""
        with self._lock:
            return list(self._recovery_report)

    @property
    def segments(self) -> list[SegmentInfo]:
        with self._lock:
            self._check_open()
            out = []
            for seg, upper in self._with_upper_bounds():
                seg.ensure_loaded(upper)
                self._touch(seg)
                out.append(SegmentInfo(seg.base_offset, seg.size, seg.path, seg.max_timestamp))
            return out

    @property
    def closed(self) -> bool:
        return self._closed

    def _with_upper_bounds(self) -> Iterable[tuple[LogSegment, int]]:
        segs = list(self._segments.values())
        for i, seg in enumerate(segs):
            yield seg, (segs[i + 1].base_offset if i + 1 < len(segs) else (seg.next_offset or seg.base_offset))

    def segment_end_offset(self, base: int) -> int:
        """Base offset of the segment after ``base`` (the LEO for the active segment)."""
        i = self._segments.bisect_right(base)
        if i < len(self._segments):
            return self._segments.peekitem(i)[0]
        return self._active.next_offset

    def _touch(self, seg: LogSegment) -> None:
        """Note that a closed segment's file is open; close the least recently used ones
        beyond ``MAX_OPEN_CLOSED_SEGMENTS`` (they reopen on demand). Caller holds the lock."""
        if seg is self._active:
            return
        lru = self._open_lru
        lru[seg.base_offset] = seg
        lru.move_to_end(seg.base_offset)
        while len(lru) > MAX_OPEN_CLOSED_SEGMENTS:
            _, old = lru.popitem(last=False)
            old.close()

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.directory} is closed")

    def __repr__(self) -> str:
        return f"Log({self.directory!r})"

    # -- appending -----------------------------------------------------------------------
    def append_batch(self, batch: bytes) -> BatchHeader:
        """Append one encoded batch (any base offset); return its header as written.

        Checks, in order: the header and CRC (``CorruptRecordError``), the size against
        ``max.message.bytes`` (``RecordTooLargeError``) and ``segment.bytes``
        (``RecordBatchTooLargeError``), the records payload, and on a compacted topic
        that every record has a key (``InvalidRecordError``). With
        ``message.timestamp.type=LogAppendTime`` every record's timestamp becomes the
        clock's time (payload and CRC rewritten). Then stamps base offset = LEO.
        """
        if not isinstance(batch, (bytes, bytearray, memoryview)):
            raise InvalidRecordError(f"a batch must be bytes, got {type(batch).__name__}")
        batch = bytes(batch)
        h = rb.decode_header(batch, 0, where="appended batch")
        if h.size != len(batch):
            raise CorruptRecordError(
                f"appended batch: length field says {h.size} bytes, the batch has {len(batch)}")
        rb.verify(batch, 0, h, where="appended batch")
        self._check_size(len(batch))
        if h.attributes & ~rb.ATTR_TIMESTAMP_TYPE_LOG_APPEND:
            raise InvalidRecordError(f"unsupported batch attributes 0x{h.attributes:x}")
        if h.record_count == 0 or h.record_count > h.last_offset_delta + 1:
            raise InvalidRecordError(
                f"batch holds {h.record_count} records for an offset range of {h.last_offset_delta + 1}")
        gc_was_enabled = gc.isenabled()
        gc.disable()  # see _GC_NOTE
        try:
            # the same checks as decode_records (count, shape, deltas), transposed in C
            cols = rb.decode_columns(batch, 0, h, where="appended batch")
        finally:
            if gc_was_enabled:
                gc.enable()
        if self._config.compact and None in cols[2]:
            delta = cols[0][cols[2].index(None)]
            raise InvalidRecordError(
                f"Compacted topic cannot accept message without key in topic partition "
                f"{os.path.basename(self.directory)} (record at offset delta {delta})")
        return self._append_verified(batch, h, cols)

    def append(self, records: Sequence[tuple], *, producer_id: int = rb.NO_PRODUCER_ID,
               producer_epoch: int = rb.NO_PRODUCER_EPOCH, base_sequence: int = rb.NO_SEQUENCE) -> BatchHeader:
        """Append ``records`` — ``(timestamp_ms, key, value, headers)`` tuples — as one batch.

        ``key``/``value`` are bytes or None, ``headers`` a sequence of ``(str, bytes | None)``.
        """
        if not records:
            raise InvalidRecordError("append needs at least one record, got none")
        if self._config.compact:
            for i, r in enumerate(records):
                if r[1] is None:
                    raise InvalidRecordError(
                        f"Compacted topic cannot accept message without key in topic partition "
                        f"{os.path.basename(self.directory)} (record {i} of the batch)")
        gc_was_enabled = gc.isenabled()
        gc.disable()  # see _GC_NOTE
        try:
            # the batch as (head, tail, payload): the segment writes them with one pwritev,
            # so the payload is not copied into a joined buffer first
            h, parts = rb.encode_records_parts(0, records, producer_id=producer_id,
                                               producer_epoch=producer_epoch, base_sequence=base_sequence)
        finally:
            if gc_was_enabled:
                gc.enable()
        self._check_size(h.size)
        return self._append_verified(parts, h, None)

    def _check_size(self, size: int) -> None:
        cfg = self._config
        if size > cfg.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size in the append to {os.path.basename(self.directory)} is {size} bytes "
                f"which exceeds the maximum configured value of {cfg.max_message_bytes} (max.message.bytes).")
        if size > cfg.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {size} bytes in append to partition {os.path.basename(self.directory)}, "
                f"which exceeds the maximum configured segment size of {cfg.segment_bytes} (segment.bytes).")

    def _append_verified(self, batch, h: BatchHeader, cols: Optional[tuple]) -> BatchHeader:
        """Append a checked batch — bytes, or a tuple of byte parts that join to it —
        whose header is ``h``; ``cols`` is its ``decode_columns`` result when known."""
        with self._lock:
            self._check_open()
            now = self._clock.now_ms()
            if self._config.message_timestamp_type == "LogAppendTime":
                if type(batch) is tuple:
                    batch = b"".join(batch)
                if cols is None:
                    cols = rb.decode_columns(batch, 0, h)
                deltas, _, keys, values, headers = cols
                batch = rb.encode_batch(0, list(zip(deltas, repeat(now), keys, values, headers)),
                                        producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                                        base_sequence=h.base_sequence,
                                        partition_leader_epoch=h.partition_leader_epoch,
                                        attributes=h.attributes | rb.ATTR_TIMESTAMP_TYPE_LOG_APPEND,
                                        last_offset_delta=h.last_offset_delta)
                h = rb.decode_header(batch)
            leo = self._active.next_offset
            h = h._replace(base_offset=leo)   # written by the segment: no copy of the batch
            self._maybe_roll(h.size, h, now)
            self._active.append(batch, h, now)
            self._unflushed_messages += h.record_count
            if self._first_unflushed_ms is None:
                self._first_unflushed_ms = now
            if (self._unflushed_messages >= self._config.flush_messages
                    or now - self._first_unflushed_ms >= self._config.flush_ms):
                self._flush_locked()
            return h

    def _maybe_roll(self, size: int, h: BatchHeader, now: int) -> None:
        act = self._active
        if act.size == 0:
            return
        cfg = self._config
        if (act.size + size > cfg.segment_bytes
                or (act.first_append_ms is not None and now - act.first_append_ms >= cfg.segment_ms)
                or h.base_offset + h.last_offset_delta - act.base_offset > _UINT32_MAX
                or act.size + size > _UINT32_MAX):
            self._roll()

    def _roll(self) -> None:
        old = self._active
        old.close_for_append()
        new = LogSegment.create(self.directory, old.next_offset, self._config.index_interval_bytes, self._report)
        self._segments[new.base_offset] = new
        self._active_seg = new
        self._touch(old)
        _fsync_dir(self.directory)
        self._unflushed_messages = 0
        self._first_unflushed_ms = None
        self._write_recovery_point()

    # -- flushing ------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync the active segment and its indexes, then record the recovery point."""
        with self._lock:
            self._check_open()
            self._flush_locked()

    def _flush_locked(self) -> None:
        self._active.flush(fsync=True)
        self._write_recovery_point()
        self._unflushed_messages = 0
        self._first_unflushed_ms = None

    def maybe_flush(self) -> bool:
        """Flush if ``flush.ms`` has passed since the oldest unflushed append; True if it did."""
        with self._lock:
            if self._closed or self._first_unflushed_ms is None:
                return False
            if self._clock.now_ms() - self._first_unflushed_ms >= self._config.flush_ms:
                self._flush_locked()
                return True
            return False

    # -- reading -------------------------------------------------------------------------
    def _locate_chunk(self, offset: int, max_bytes: int) -> tuple[bytes, str, int, int, int]:
        """Under the lock: the bytes from the batch holding ``offset`` (≥ one batch, ≤ max_bytes else)."""
        with self._lock:
            self._check_open()
            start = self._segments.peekitem(0)[0]
            end = self._active.next_offset
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is out of range for log {os.path.basename(self.directory)}: "
                    f"log start offset {start}, log end offset {end}")
            if offset == end:
                return b"", "", 0, 0, 0
            i = self._segments.bisect_right(offset) - 1
            n = len(self._segments)
            while i < n:
                seg = self._segments.peekitem(i)[1]
                upper = self._segments.peekitem(i + 1)[0] if i + 1 < n else end
                found = seg.locate(offset, upper)
                self._touch(seg)
                if found is not None:
                    pos, h = found
                    return seg.read(pos, max(max_bytes, h.size)), seg.path, pos, seg.base_offset, upper
                i += 1
                offset = max(offset, upper)
            return b"", "", 0, 0, 0

    def read_batches(self, offset: int, max_bytes: int = 1048576) -> list[tuple[BatchHeader, bytes]]:
        """Raw verified batches from the one holding ``offset`` (FORMAT.md §5)."""
        buf, where, at, lo, hi = self._locate_chunk(offset, max_bytes)
        out = []
        for pos, h in _split(buf, max_bytes, where, at, lo, hi):
            out.append((h, buf[pos:pos + h.size]))
        return out

    def read(self, offset: int, max_bytes: int = 1048576) -> list[Record]:
        """Records with offset ≥ ``offset``: whole batches from the one holding it (FORMAT.md §5).

        At least one batch even when larger than ``max_bytes``; ``offset`` == LEO gives [];
        below the log start or above the LEO: ``OffsetOutOfRangeError``.
        """
        buf, where, at, lo, hi = self._locate_chunk(offset, max_bytes)
        out: list[Record] = []
        gc_was_enabled = gc.isenabled()
        gc.disable()  # see _GC_NOTE
        try:
            for pos, h in _split(buf, max_bytes, where, at, lo, hi):
                recs = decode_batch_records(buf, pos, h, offset, f"{where} (batch at position {at + pos})")
                if out:
                    out.extend(recs)
                else:
                    out = recs
        finally:
            if gc_was_enabled:
                gc.enable()
        return out

    def read_columns(self, offset: int, max_bytes: int = 1048576) -> RecordColumns:
        """:meth:`read` column-wise: the same records from the same batches, with the same
        range rules and errors, as a :class:`RecordColumns` built without a Python-level
        loop per record (``kafkasim.records.record_batch.decode_columns``). For readers that build
        their own row type (the consumer's fetcher), so each record becomes one tuple
        instead of two. Decodes outside the lock, like :meth:`read`; a CRC-valid batch
        whose records are malformed (count, shape, offset deltas) raises
        ``CorruptRecordError``.
        """
        buf, where, at, lo, hi = self._locate_chunk(offset, max_bytes)
        offs: list = []
        tss: list = []
        keys: list = []
        values: list = []
        headers: list = []
        gc_was_enabled = gc.isenabled()
        gc.disable()  # see _GC_NOTE
        try:
            for pos, h in _split(buf, max_bytes, where, at, lo, hi):
                deltas, tsds, k, v, hd = rb.decode_columns(
                    buf, pos, h, where=f"{where} (batch at position {at + pos})")
                n = len(deltas)
                if not n:
                    continue
                base = h.base_offset
                if deltas[-1] == n - 1:     # decode_columns checked deltas == 0..n-1
                    offs.extend(range(base, base + n))
                else:
                    offs.extend(map(add, deltas, repeat(base)))
                try:
                    tss.extend(map(add, tsds, repeat(h.base_timestamp)))
                except TypeError as exc:
                    raise CorruptRecordError(
                        f"{where} (batch at position {at + pos}): undecodable records in batch "
                        f"at position {pos}: {exc}") from exc
                keys.extend(k)
                values.extend(v)
                headers.extend(hd)
        finally:
            if gc_was_enabled:
                gc.enable()
        if offs and offs[0] < offset:
            i = bisect_left(offs, offset)
            return RecordColumns(offs[i:], tss[i:], keys[i:], values[i:], headers[i:])
        return RecordColumns(offs, tss, keys, values, headers)

    def offset_for_time(self, timestamp: int) -> Optional[tuple[int, int]]:
        """(offset, timestamp) of the first record whose timestamp is ≥ ``timestamp``, or None."""
        with self._lock:
            self._check_open()
            for seg, upper in list(self._with_upper_bounds()):
                seg.ensure_loaded(upper)
                self._touch(seg)
                if seg.max_timestamp < timestamp:
                    continue
                entry = seg.time_index.entry_below(timestamp)
                if entry is not None:
                    # the entry we rely on must match its batch (a flipped bit could skip records)
                    try:
                        seg.check_time_entry(*entry)
                    except IndexCorruptError as exc:
                        self._report(f"{seg.path}: index rebuilt ({exc})")
                        seg.rebuild_indexes(final=seg is not self._active, upper_bound_offset=upper)
                        entry = seg.time_index.entry_below(timestamp)
                start = seg.base_offset if entry is None else entry[1] + 1
                found = seg.locate(start, upper)
                if found is None:
                    continue
                pos = found[0]
                while pos < seg.size:
                    h = seg.header_at(pos)
                    if h.max_timestamp >= timestamp:
                        buf = seg.read(pos, h.size)
                        rb.verify(buf, 0, h, where=f"{seg.path} (position {pos})")
                        for r in decode_batch_records(buf, 0, h, start, seg.path):
                            if r.timestamp >= timestamp:
                                return r.offset, r.timestamp
                    pos += h.size
            return None

    # -- retention -----------------------------------------------------------------------
    def delete_old_segments(self) -> int:
        """One retention pass (FORMAT.md §6); returns how many segments it deleted.

        As Kafka: first segments whose largest timestamp is more than ``retention.ms``
        old (``now - max_timestamp > retention.ms``), oldest first, stopping at the first
        that is not; then, while ``size - segment size >= retention.bytes``, the oldest.
        The active segment is never deleted. Does nothing unless ``cleanup.policy``
        contains ``delete``.
        """
        with self._clean_lock, self._lock:
            self._check_open()
            cfg = self._config
            if not cfg.delete:
                return 0
            deleted = 0
            if cfg.retention_ms >= 0:
                now = self._clock.now_ms()
                victims = []
                for seg, upper in list(self._with_upper_bounds())[:-1]:
                    seg.ensure_loaded(upper)
                    self._touch(seg)
                    if now - seg.max_timestamp > cfg.retention_ms:
                        victims.append(seg)
                    else:
                        break
                deleted += self._delete_segments(victims, f"retention.ms={cfg.retention_ms} breach")
            if cfg.retention_bytes >= 0:
                diff = sum(s.size for s in self._segments.values()) - cfg.retention_bytes
                victims = []
                for seg in list(self._segments.values())[:-1]:
                    if diff - seg.size >= 0:
                        diff -= seg.size
                        victims.append(seg)
                    else:
                        break
                deleted += self._delete_segments(victims, f"retention.bytes={cfg.retention_bytes} breach")
            return deleted

    def _delete_segments(self, victims: list[LogSegment], reason: str) -> int:
        for seg in victims:
            del self._segments[seg.base_offset]
            self._open_lru.pop(seg.base_offset, None)
            seg.close()
            renamed = []
            try:
                for p in seg.file_paths():  # .log first: once it is gone the segment is gone
                    if os.path.exists(p):
                        os.replace(p, p + ".deleted")
                        renamed.append(p + ".deleted")
                for p in renamed:
                    os.unlink(p)
            except OSError as exc:
                raise KafkaStorageError(f"cannot delete segment {seg.path}: {exc}") from exc
            log_.info("%s: deleted segment %d (%s)", self.directory, seg.base_offset, reason)
        return len(victims)

    # -- compaction ----------------------------------------------------------------------
    def compact(self) -> dict:
        """One compaction pass over the closed segments (FORMAT.md §6); returns stats.

        Keeps the record with the highest offset per key, and drops tombstones whose
        timestamp is older than ``delete.retention.ms``. Only segments whose largest
        timestamp is at least ``min.compaction.lag.ms`` old are cleaned. Does nothing
        unless ``cleanup.policy`` contains ``compact``.
        """
        from kafkasim.storage import cleaner
        with self._clean_lock:
            with self._lock:
                self._check_open()
                cfg = self._config
                now = self._clock.now_ms()
                segs = []
                for seg, upper in list(self._with_upper_bounds())[:-1]:
                    seg.ensure_loaded(upper)
                    self._touch(seg)
                    if cfg.min_compaction_lag_ms > 0 and now - seg.max_timestamp < cfg.min_compaction_lag_ms:
                        break
                    segs.append(seg.base_offset)
            if not cfg.compact:
                return cleaner.empty_stats()
            return cleaner.compact_log(self, segs, now)

    def swap_cleaned_segment(self, base: int, cleaned_path: str) -> LogSegment:
        """Replace the closed segment ``base`` by the file at ``cleaned_path`` (called by the cleaner)."""
        with self._lock:
            self._check_open()
            old = self._segments[base]
            if old is self._active:
                raise IllegalStateError(f"cannot swap the active segment {old.path}")
            upper = self.segment_end_offset(base)
            swap = old.path + _SWAP
            try:
                os.replace(cleaned_path, swap)
                for p in (old.index.path, old.time_index.path):
                    if os.path.exists(p):
                        os.unlink(p)
                old.close()
                os.replace(swap, old.path)
            except OSError as exc:
                raise KafkaStorageError(f"cannot swap in cleaned segment {old.path}: {exc}") from exc
            new = LogSegment.open_closed(self.directory, base, self._config.index_interval_bytes, self._report)
            new.rebuild_indexes(final=True)
            new.flush(fsync=True)
            self._segments[base] = new
            self._open_lru.pop(base, None)
            new.ensure_loaded(upper)
            self._touch(new)
            return new

    def closed_segment_paths(self, bases: Sequence[int]) -> list[tuple[int, str]]:
        with self._lock:
            return [(b, self._segments[b].path) for b in bases if b in self._segments]

    def cleaner_checkpoint(self) -> int:
        """Offset below which the log was compacted (0 if never)."""
        v = _read_ints(os.path.join(self.directory, CLEANER_CHECKPOINT_FILE), 1)
        return v[0] if v else 0

    def write_cleaner_checkpoint(self, offset: int) -> None:
        _write_atomic(os.path.join(self.directory, CLEANER_CHECKPOINT_FILE), f"{offset}\n")

    def dirty_ratio(self) -> float:
        """Share of the closed segments' bytes at or after the cleaner checkpoint (Kafka's dirty ratio)."""
        with self._lock:
            closed = list(self._segments.values())[:-1]
            total = sum(s.size for s in closed)
            if total == 0:
                return 0.0
            cp = self.cleaner_checkpoint()
            return sum(s.size for s in closed if s.base_offset >= cp) / total

    # -- configuration and lifecycle ----------------------------------------------------------
    def update_config(self, config: LogConfig) -> None:
        """Apply a new config (alter-configs); takes effect from the next append/pass."""
        with self._lock:
            self._config = config
            for seg in self._segments.values():
                seg.index_interval = max(1, config.index_interval_bytes)

    def close(self) -> None:
        """Flush everything, mark a clean shutdown and release the files. Idempotent."""
        with self._lock:
            if self._closed:
                return
            act = self._active
            act.close_for_append()
            self._write_recovery_point()
            _write_atomic(os.path.join(self.directory, CLEAN_SHUTDOWN_FILE),
                          f"{act.next_offset} {act.base_offset} {act.size}\n")
            for seg in self._segments.values():
                seg.close()
            self._closed = True

    def delete(self) -> None:
        """Close the log and remove its directory (first renamed to ``<data_dir>/<uuid hex>-delete``)."""
        with self._lock:
            if not self._closed:
                for seg in self._segments.values():
                    seg.close()
                self._closed = True
            # a short name (FORMAT.md §1.1): "<249-char topic>-<p>.<uuid>-delete" would be too long
            doomed = os.path.join(os.path.dirname(self.directory), f"{uuid.uuid4().hex}-delete")
            try:
                os.replace(self.directory, doomed)
                shutil.rmtree(doomed)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise KafkaStorageError(f"cannot delete log directory {self.directory}: {exc}") from exc

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _split(buf: bytes, max_bytes: int, where: str, at: int, lo: int, hi: int) -> list[tuple[int, BatchHeader]]:
    """Whole, CRC-verified batches at the start of ``buf`` (read from byte ``at`` of the file
    ``where``, a segment holding offsets ``[lo, hi)``): the first always, then while the
    total stays ≤ ``max_bytes``. A bad first batch raises CorruptRecordError; a bad later
    batch ends the list (a read starting there raises). ``base_offset`` lies outside the
    CRC (as in Kafka), so offsets are checked to increase and stay in ``[lo, hi)``."""
    out = []
    pos = 0
    floor = lo
    n = len(buf)
    while pos + rb.HEADER_SIZE <= n:
        try:
            h = rb.decode_header(buf, pos, where="batch")
            end = pos + h.size
            if out and end > max_bytes:
                break
            if end > n:
                if not out:
                    raise CorruptRecordError(
                        f"truncated batch: needs {h.size} bytes, {n - pos} present")
                break
            rb.verify(buf, pos, h, where="batch")
            if h.base_offset < floor or h.base_offset + h.last_offset_delta >= hi:
                raise CorruptRecordError(
                    f"batch offsets {h.base_offset}..{h.base_offset + h.last_offset_delta} outside "
                    f"the expected range {floor}..{hi - 1}")
            floor = h.base_offset + h.last_offset_delta + 1
        except CorruptRecordError as exc:
            if not out:
                raise CorruptRecordError(f"{where}: corrupt batch at position {at + pos}: {exc}") from exc
            break
        out.append((pos, h))
        pos = end
    return out
