"""One partition's log: a sequence of segments in one directory (storage/FORMAT.md §1, §4–§6).

Usage::

    >>> log = Log(path, LogConfig.from_overrides({"segment.bytes": 1 << 20}), clock)
    >>> h = log.append([(1_700_000_000_000, b"key", b"value", ())])
    >>> [r.value for r in log.read(h.base_offset)]
    [b'value']

:class:`Log` (Kafka's ``UnifiedLog``/``LocalLog``) assigns offsets, appends, rolls, flushes,
reads and applies retention and compaction; the work is done by the modules below it:
:mod:`~kafkasim.storage.loader` opens and recovers the directory,
:mod:`~kafkasim.storage.segments` maps base offsets to segments,
:mod:`~kafkasim.storage.validation` checks what is appended, :mod:`~kafkasim.storage.fetch`
decodes what is read, :mod:`~kafkasim.storage.compaction` rewrites closed segments and
:mod:`~kafkasim.storage.checkpoints` keeps the recovery point and shutdown marker. The
background thread that drives retention and compaction (:mod:`kafkasim.storage.cleaner`)
works on logs; the log does not know it.

Invariants:
- Offsets are assigned here, contiguous: a batch appended when the log end offset
  (LEO) is ``n`` gets base offset ``n`` and the LEO becomes its last offset + 1.
- The segment holding offset ``o`` is the floor entry of ``o``; only the last one (the
  active segment) is written; closed segments change only by retention (deleted whole)
  and compaction (replaced whole).
- log start offset = base offset of the first segment; high watermark = LEO (the log's view;
  a replicated partition's is kafkasim.broker.replica's). Follower append, truncation: replica_log.py.
- A read never returns a record under another offset, and never skips an offset without a
  report: offsets are checked per batch (FORMAT.md §2.4, contiguous where never compacted),
  and compaction gaps are stepped over (:meth:`Log.fetch`).
- Opening never reads closed segments (only their sizes), and neither do listing segments
  or the offset accessors: a closed segment's indexes are loaded and checked when it is
  first read, time-searched, or needed for its largest timestamp (retention,
  compaction lag, :attr:`SegmentInfo.max_timestamp`).
- Every ``OSError`` becomes :class:`KafkaStorageError` (chained), via
  :func:`kafkasim.storage.files.storage_errors`.

Transactions (txn facts §3–§4): the log tracks the transactions open in it
(:mod:`~kafkasim.storage.transactions`, built on first use from the ``.snapshot`` a clean
close writes, else by walking the batch headers), writes the coordinator's markers
(:meth:`Log.append_control`), appends each aborted transaction's entry to the active
segment's ``.txnindex`` and answers :attr:`Log.first_unstable_offset` and
:meth:`Log.collect_aborted_txns`. The module is over 500 lines because these, like appends,
reads and retention, are one owner's work on the same segments under the same lock.

Thread-safety: thread-safe. One re-entrant lock per log serialises appends, the
segment map and file positions; reads decode outside the lock. Retention and
compaction also hold a second lock so only one of them runs at a time, and
compaction reads and rewrites closed segments without blocking appends.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import uuid
from functools import partial
from typing import Optional, Sequence

from kafkasim.clock import Clock, SystemClock
from kafkasim.config import LogConfig
from kafkasim.errors import IllegalStateError, KafkaStorageError, OffsetOutOfRangeError
from kafkasim.records import record_batch as rb
from kafkasim.records.control import encode_control_batch, read_control_batch
from kafkasim.records.framing import BatchHeader
from kafkasim.storage import checkpoints, compaction, layout
from kafkasim.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE, CLEANER_CHECKPOINT_FILE, RECOVERY_POINT_FILE, CleanShutdown, RecoveryPoint,
)
from kafkasim.storage.fetch import (
    Chunk, ReadResult, RecordColumns, chunk_batches, chunk_columns, chunk_records, empty_chunk,
)
from kafkasim.storage.files import fsync_dir, make_dirs, storage_errors
from kafkasim.storage.loader import load_segments
from kafkasim.storage.log_start import LogStartOps
from kafkasim.storage.replica_log import ReplicaLogOps
from kafkasim.storage.segment import LogSegment
from kafkasim.storage.segments import MAX_OPEN_CLOSED_SEGMENTS, SegmentInfo
from kafkasim.storage.producer_snapshot import ProducerSnapshotEntry, read_snapshot, write_snapshot
from kafkasim.storage.transactions import TxnTracker, rebuild as rebuild_transactions
from kafkasim.storage.txn_index import AbortedTxn
from kafkasim.storage.validation import encode_for_append, stamp_log_append_time, validate_batch
from kafkasim.types import Record

__all__ = ["Log", "SegmentInfo", "RecordColumns", "ReadResult", "RECOVERY_POINT_FILE", "CLEAN_SHUTDOWN_FILE", "CLEANER_CHECKPOINT_FILE",
           "MAX_OPEN_CLOSED_SEGMENTS"]

_UINT32_MAX = 0xFFFFFFFF

log_ = logging.getLogger("kafkasim.storage")


class Log(ReplicaLogOps, LogStartOps):
    """A partition's segmented log in ``directory`` (see the module docstring)."""

    def __init__(self, directory: str, config: LogConfig = LogConfig(), clock: Optional[Clock] = None) -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        self._name = os.path.basename(self.directory)
        self._config = config
        self._clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._clean_lock = threading.Lock()
        self._recovery_report: list[str] = []
        self._closed = False
        self._unflushed_messages = 0
        self._first_unflushed_ms: Optional[int] = None
        self._txns: Optional[TxnTracker] = None    # open transactions: built on first use (_transactions)
        with storage_errors("create log directory", self.directory):
            make_dirs(self.directory)
        self._max_open = MAX_OPEN_CLOSED_SEGMENTS   # read from this module at open (tests lower it)
        self._segments = load_segments(self.directory, config, self._report, self._clock, self._max_open)
        try:
            self._start = checkpoints.read_log_start_offset(self.directory)   # DeleteRecords (log_start.py)
            self._clamp_start()
            self._write_recovery_point()
        except BaseException:
            self._segments.close_all()
            raise

    def _report(self, line: str) -> None:
        self._recovery_report.append(line)
        log_.warning("%s", line)

    def _write_recovery_point(self) -> None:
        act = self._segments.active
        checkpoints.write_recovery_point(self.directory, RecoveryPoint(
            act.next_offset, act.base_offset, act.size, act.max_timestamp, act.offset_of_max_timestamp))

    def _load_indexes(self, seg: LogSegment, upper: Optional[int] = None) -> None:
        """Load (check, or rebuild) a closed segment's indexes; note its file as open. Under the lock."""
        seg.ensure_loaded(self._segments.end_offset(seg.base_offset) if upper is None else upper)
        self._segments.touch(seg)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.directory} is closed")

    # -- properties ----------------------------------------------------------------------
    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def log_start_offset(self) -> int:
        """The first readable offset (past the first segment's base where DeleteRecords moved it)."""
        with self._lock:
            return self._effective_start()

    @property
    def log_end_offset(self) -> int:
        with self._lock:
            return self._segments.active.next_offset

    @property
    def high_watermark(self) -> int:
        """Equal to the log end offset while there is one replica."""
        return self.log_end_offset

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments)

    @property
    def recovery_report(self) -> list[str]:
        """What opening (and lazy index checks since) truncated or rebuilt, one line each."""
        with self._lock:
            return list(self._recovery_report)

    @property
    def segments(self) -> list[SegmentInfo]:
        """Every segment, oldest first. Reads no index: the largest timestamp of a closed
        segment whose indexes are not loaded yet is fetched on first access (:class:`SegmentInfo`)."""
        with self._lock:
            self._check_open()
            return [SegmentInfo(seg.base_offset, seg.size, seg.path, seg.max_timestamp) if seg.loaded
                    else SegmentInfo(seg.base_offset, seg.size, seg.path, load=partial(self._max_timestamp_of, seg))
                    for seg in self._segments]

    def _max_timestamp_of(self, seg: LogSegment) -> int:
        """A listed segment's largest timestamp (its indexes loaded); -1 if it was deleted since."""
        with self._lock:
            self._check_open()
            current = self._segments.get(seg.base_offset)   # compaction may have replaced it
            if current is None:
                return -1
            self._load_indexes(current)
            return current.max_timestamp

    def segment_end_offset(self, base: int) -> int:
        """Base offset of the segment after ``base`` (the LEO for the active segment)."""
        with self._lock:
            return self._segments.end_offset(base)

    def __repr__(self) -> str:
        return f"Log({self.directory!r})"

    # -- appending -----------------------------------------------------------------------
    def append_batch(self, batch: bytes, *, in_transaction: bool = False,
                     partition_leader_epoch: Optional[int] = None) -> BatchHeader:
        """Append one encoded batch (any base offset); return its header as written.

        Checks, in order: the header and CRC (``CorruptRecordError``), the size against
        ``max.message.bytes`` (``RecordTooLargeError``) and ``segment.bytes``
        (``RecordBatchTooLargeError``), the records payload, and on a compacted topic
        that every record has a key (``InvalidRecordError``). With
        ``message.timestamp.type=LogAppendTime`` every record's timestamp becomes the
        clock's time (header and CRC rewritten). Then stamps base offset = LEO.
        ``in_transaction``: the broker verified that the producer's open transaction includes
        this partition (KIP-890's verification), so a transactional batch is accepted; without
        it a transactional batch is refused. A control batch is never accepted here
        (:meth:`append_control` writes markers). ``partition_leader_epoch``: the leader's epoch,
        written into the batch as it is stored (outside the CRC; no copy of the batch).
        """
        batch, h, cols = validate_batch(batch, self._config, self._name, in_transaction=in_transaction)
        if partition_leader_epoch is not None:      # stamped by the segment write, as the base offset
            h = h._replace(partition_leader_epoch=partition_leader_epoch)
        return self._append_verified(batch, h, cols)

    def append(self, records: Sequence[tuple], *, producer_id: int = rb.NO_PRODUCER_ID,
               producer_epoch: int = rb.NO_PRODUCER_EPOCH, base_sequence: int = rb.NO_SEQUENCE) -> BatchHeader:
        """Append ``records`` — ``(timestamp_ms, key, value, headers)`` tuples — as one batch.

        ``key``/``value`` are bytes or None, ``headers`` a sequence of ``(str, bytes | None)``.
        """
        h, parts = encode_for_append(records, self._config, self._name, producer_id, producer_epoch, base_sequence)
        return self._append_verified(parts, h, None)

    def _append_verified(self, batch, h: BatchHeader, cols: Optional[tuple]) -> BatchHeader:
        """Append a checked batch — bytes, or a tuple of byte parts that join to it —
        whose header is ``h``; ``cols`` is its ``decode_columns`` result when known."""
        with self._lock:
            self._check_open()
            if h.producer_id >= 0:
                self._transactions().check_data_batch(h, self._name)
            now = self._clock.now_ms()
            if self._config.message_timestamp_type == "LogAppendTime":
                batch, h = stamp_log_append_time(batch, h, cols, now)
            h = h._replace(base_offset=self._segments.active.next_offset)   # written by the segment: no copy
            return self._write_locked(batch, h, now)

    def _maybe_roll(self, size: int, h: BatchHeader, now: int) -> None:
        act = self._segments.active
        if act.size == 0:
            return
        cfg = self._config
        if (act.size + size > cfg.segment_bytes
                or (act.first_append_ms is not None and now - act.first_append_ms >= cfg.segment_ms)
                or h.base_offset + h.last_offset_delta - act.base_offset > _UINT32_MAX
                or act.size + size > _UINT32_MAX):
            self._roll()

    def _roll(self) -> None:
        old = self._segments.active
        old.close_for_append()
        new = LogSegment.create(self.directory, old.next_offset, self._config.index_interval_bytes, self._report)
        self._segments.add(new)
        self._segments.touch(old)
        fsync_dir(self.directory)   # the new segment's name (the recovery point write does not sync the dir)
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
        self._segments.active.flush(fsync=True)
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
    def _locate_chunk(self, offset: int, max_bytes: int) -> Chunk:
        """Under the lock: the bytes from the first batch whose last offset is ≥ ``offset``
        (≥ one batch, ≤ max_bytes else), in one segment."""
        with self._lock:
            self._check_open()
            segs = self._segments
            start = self._effective_start()
            end = segs.active.next_offset
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(
                    f"offset {offset} is out of range for log {self._name}: "
                    f"log start offset {start}, log end offset {end}")
            if offset == end:
                return empty_chunk(end)
            for seg, upper in segs.with_upper_bounds(offset):
                found = seg.locate(offset, upper)   # raises for a gap in a contiguous segment
                segs.touch(seg)
                if found is not None:
                    pos, h = found
                    return Chunk(seg.read(pos, max(max_bytes, h.size)), seg.path, pos, h.base_offset, upper,
                                 seg.contiguous)
                offset = max(offset, upper)   # a compacted segment's tail is a gap
            return empty_chunk(end)

    def read_batches(self, offset: int, max_bytes: int = 1048576) -> list[tuple[BatchHeader, bytes]]:
        """Raw verified batches from the first whose last offset is ≥ ``offset`` (FORMAT.md §5)."""
        chunk = self._locate_chunk(offset, max_bytes)
        return [(h, chunk.data[pos:pos + h.size]) for pos, h in chunk_batches(chunk, max_bytes)]

    def fetch(self, offset: int, max_bytes: int = 1048576, *, columns: bool = False) -> ReadResult:
        """Records with offset ≥ ``offset`` and the offset to read next (FORMAT.md §5): whole
        batches of one segment from the first whose last offset is ≥ ``offset`` (at least one,
        even past ``max_bytes``), records before ``offset`` dropped. When that leaves none
        (a compaction gap), the read goes on from the batches' next offset, so no records means
        none lie in ``[offset, log end)`` and ``next_offset`` is the log end. ``columns``: as
        :class:`RecordColumns`, else a list of :class:`Record`. Below the log start or above
        the LEO: ``OffsetOutOfRangeError``; a batch failing its CRC or the offset checks (§2.4),
        or a gap where offsets are contiguous: ``CorruptRecordError`` naming file and position.
        """
        decode = chunk_columns if columns else chunk_records
        while True:
            got = decode(self._locate_chunk(offset, max_bytes), offset, max_bytes)
            if got.next_offset <= offset or (got.records[0] if columns else got.records):
                return got
            offset = got.next_offset   # every record of those batches lies below offset: a compaction gap

    def read(self, offset: int, max_bytes: int = 1048576) -> list[Record]:
        """The records of :meth:`fetch` (FORMAT.md §5): empty only when none lies in ``[offset, LEO)``."""
        return self.fetch(offset, max_bytes).records

    def read_columns(self, offset: int, max_bytes: int = 1048576) -> RecordColumns:
        """:meth:`read` column-wise (same records, rules and errors), built without a Python-level
        loop per record, for readers that build their own row type (the consumer's fetcher);
        a CRC-valid batch whose records are malformed raises ``CorruptRecordError``."""
        return self.fetch(offset, max_bytes, columns=True).records

    def offset_for_time(self, timestamp: int) -> Optional[tuple[int, int]]:
        """(offset, timestamp) of the first record from the log start with timestamp ≥ ``timestamp``, or None.

        Segments are searched in order (FORMAT.md §3.2); a segment whose largest timestamp is
        below ``timestamp`` is skipped on its time index alone."""
        with self._lock:
            self._check_open()
            active = self._segments.active
            start = self._effective_start()
            for seg, upper in self._segments.with_upper_bounds(start):
                found = seg.find_offset_by_timestamp(timestamp, upper, final=seg is not active)
                self._segments.touch(seg)
                if found is not None and found[0] < start:   # below a DeleteRecords start: read on from it
                    found = next(((r.offset, r.timestamp) for r in self._records_between(start, upper)
                                  if r.timestamp >= timestamp), None)
                if found is not None:
                    return found
            return None

    # -- retention -----------------------------------------------------------------------
    def delete_old_segments(self) -> int:
        """One retention pass (FORMAT.md §6; nothing unless ``cleanup.policy`` has ``delete``);
        returns how many segments it deleted. As Kafka: oldest first, closed segments whose
        largest timestamp is more than ``retention.ms`` old, then while ``size - segment size
        >= retention.bytes``; each rule stops at the first segment it keeps."""
        with self._clean_lock, self._lock:
            self._check_open()
            cfg = self._config
            deleted = self.delete_segments_below_log_start()   # whatever the policy, as Kafka
            if not cfg.delete:
                return deleted
            if cfg.retention_ms >= 0:
                now = self._clock.now_ms()
                victims = []
                for seg, upper in self._segments.with_upper_bounds():
                    if seg is self._segments.active:
                        break
                    self._load_indexes(seg, upper)
                    if now - seg.max_timestamp <= cfg.retention_ms:
                        break
                    victims.append(seg)
                deleted += self._delete_segments(victims, f"retention.ms={cfg.retention_ms} breach")
            if cfg.retention_bytes >= 0:
                diff = self.size_in_bytes - cfg.retention_bytes
                victims = []
                for seg in self._segments.closed():
                    if diff - seg.size < 0:
                        break
                    diff -= seg.size
                    victims.append(seg)
                deleted += self._delete_segments(victims, f"retention.bytes={cfg.retention_bytes} breach")
            return deleted

    def _delete_segments(self, victims: list[LogSegment], reason: str) -> int:
        for seg in victims:
            self._segments.remove(seg.base_offset)
            seg.delete()
            log_.info("%s: deleted segment %d (%s)", self.directory, seg.base_offset, reason)
        return len(victims)

    # -- compaction ----------------------------------------------------------------------
    def compact(self) -> dict:
        """One compaction pass (FORMAT.md §6: the latest record per key kept, tombstones older than
        ``delete.retention.ms`` dropped) over the closed segments older than ``min.compaction.lag.ms``;
        nothing unless ``cleanup.policy`` has ``compact``. Returns stats. The cleaner checkpoint
        moves first (§2.4); the rewriting (``compact_segments``) runs outside the main lock."""
        with self._clean_lock:
            with self._lock:
                self._check_open()
                cfg = self._config
                now = self._clock.now_ms()
                if not cfg.compact:
                    return compaction.empty_stats()
                cleanable, contiguous_from = [], self._segments.contiguous_from
                # never past the first unstable offset (Kafka's firstUncleanableOffset): an open
                # transaction's batches cannot be told committed from aborted yet
                unstable = self._transactions().first_unstable_offset()
                stable_end = (1 << 63) if unstable is None else unstable
                for seg, upper in self._segments.with_upper_bounds():   # ends at the first kept: seg
                    if seg is self._segments.active or upper > stable_end:
                        break
                    if cfg.min_compaction_lag_ms > 0:
                        self._load_indexes(seg, upper)
                        if now - seg.max_timestamp < cfg.min_compaction_lag_ms:
                            break
                    cleanable.append((seg.base_offset, seg.path))
                if not cleanable:
                    return compaction.empty_stats()
                self.write_cleaner_checkpoint(seg.base_offset)   # before any rewrite: gaps may follow (§2.4)
                aborted = self.collect_aborted_txns(cleanable[0][0], seg.base_offset)
            stats = compaction.compact_segments(cleanable, now - cfg.delete_retention_ms, self.swap_cleaned_segment,
                                                seg.base_offset, contiguous_from, aborted)
            log_.info("%s: compacted %s", self.directory, stats)
            return stats

    def swap_cleaned_segment(self, base: int, cleaned_path: str, txn_entries=None) -> LogSegment:
        """Replace the closed segment ``base`` by the file at ``cleaned_path`` (FORMAT.md §6);
        ``txn_entries`` (a list of ``AbortedTxn``): its ``.txnindex`` as the cleaner left it
        (None: keep the old one)."""
        with self._lock:
            self._check_open()
            old = self._segments.get(base)
            if old is None or old is self._segments.active:
                raise IllegalStateError(f"cannot swap segment {base} of {self.directory}: "
                                        f"{'it is the active segment' if old is not None else 'no such segment'}")
            upper = self._segments.end_offset(base)
            old.replace_log_file(cleaned_path)
            new = LogSegment.open_closed(self.directory, base, self._config.index_interval_bytes, self._report)
            new.contiguous = False   # compacted (the cleaner checkpoint is past it)
            new.rebuild_indexes(final=True, upper_bound_offset=upper)
            if txn_entries is not None and txn_entries != new.txn_index.entries():
                new.txn_index.reset()
                for entry in txn_entries:
                    new.txn_index.append(entry)
            new.flush(fsync=True)
            self._segments.add(new)
            self._load_indexes(new, upper)
            return new

    def cleaner_checkpoint(self) -> int:
        """Offset below which the log was compacted (0 if never)."""
        return checkpoints.read_cleaner_checkpoint(self.directory)

    def write_cleaner_checkpoint(self, offset: int) -> None:
        """Record that compaction has (or is about to have) rewritten segments below ``offset``;
        never moves back (below it, reads allow offset gaps: FORMAT.md §2.4)."""
        with self._lock:
            offset = max(offset, self.cleaner_checkpoint())
            checkpoints.write_cleaner_checkpoint(self.directory, offset)
            self._segments.compacted_below(offset)

    def dirty_ratio(self) -> float:
        """Share of the closed segments' bytes at or after the cleaner checkpoint (Kafka's dirty ratio)."""
        with self._lock:
            closed = self._segments.closed()
            total = sum(s.size for s in closed)
            if total == 0:
                return 0.0
            cp = self.cleaner_checkpoint()
            return sum(s.size for s in closed if s.base_offset >= cp) / total

    # -- transactions (storage/transactions.py) ----------------------------------------------
    def _transactions(self) -> TxnTracker:
        """Under the lock: the open transactions, built on first use from the producer snapshot
        taken at the log end offset (a clean close), else by walking every batch header."""
        if self._txns is None:
            leo = self._segments.active.next_offset
            snaps = dict(layout.list_snapshots(self.directory))
            if leo in snaps:
                tracker = TxnTracker()
                tracker.ongoing = {e.producer_id: e.current_txn_first_offset for e in read_snapshot(snaps[leo])
                                   if e.current_txn_first_offset >= 0}
            else:
                tracker, _ = rebuild_transactions(self._all_batches(), self._name)
            self._txns = tracker
        return self._txns

    def _all_batches(self):
        """``(bytes of a control batch or None, 0, header)`` of every batch from the log start."""
        segs = list(self._segments)
        for seg in segs:
            upper = self._segments.end_offset(seg.base_offset)
            for pos, h in seg.walk(0, seg.base_offset, upper):
                yield (seg.read(pos, h.size) if h.attributes & rb.ATTR_CONTROL else None), 0, h

    def _reset_transactions(self) -> None:
        """Forget the open transactions (after a truncation): rebuilt on next use."""
        self._txns = None
        for _, path in layout.list_snapshots(self.directory):
            with storage_errors("remove producer snapshot", path), contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def _track_written(self, batch, h: BatchHeader) -> None:
        """Under the lock, after ``batch`` was written at ``h.base_offset``: note it in the open
        transactions (when they are known or the batch may matter) and, for an ABORT marker that
        completed a transaction, add its ``.txnindex`` entry to the active segment."""
        if h.producer_id < 0 or (self._txns is None and not h.attributes & rb.ATTR_TRANSACTIONAL):
            return
        txns = self._transactions()
        if not h.attributes & rb.ATTR_CONTROL:
            txns.on_data_batch(h)
            return
        raw = b"".join(batch) if type(batch) is tuple else batch
        control = read_control_batch(raw, 0, h, where=self._name)
        if control is None:
            return
        done = txns.on_marker(h.producer_id, h.base_offset, control[0].type)
        if done is not None and done.aborted:
            self._segments.active.txn_index.append(done.aborted_entry)

    def append_control(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int = 0,
                       partition_leader_epoch: int = -1) -> BatchHeader:
        """Append a transaction marker (COMMIT or ABORT control batch, txn facts §3.2) for
        ``producer_id`` at the log end: the transaction coordinator's write (a client may not
        write control batches). Returns its header as written."""
        batch = encode_control_batch(producer_id, producer_epoch, commit, coordinator_epoch,
                                     self._clock.now_ms(), partition_leader_epoch)
        h = rb.decode_header(batch)
        with self._lock:
            self._check_open()
            self._transactions()          # known before the marker is written
            h = h._replace(base_offset=self._segments.active.next_offset)
            return self._write_locked(batch, h, self._clock.now_ms())

    @property
    def first_unstable_offset(self) -> Optional[int]:
        """The first offset of the earliest open transaction (at least the log start), or None."""
        with self._lock:
            self._check_open()
            first = self._transactions().first_unstable_offset()
            return None if first is None else max(first, self.log_start_offset)

    @property
    def open_transactions(self) -> dict[int, int]:
        """``producer id -> first offset`` of the transactions open in this log."""
        with self._lock:
            self._check_open()
            return dict(self._transactions().ongoing)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions a read of ``[fetch_offset, upper_bound)`` must tell a
        read_committed reader about (Fetch's ``AbortedTransactions``, Kafka's
        ``LocalLog.collectAbortedTransactions``): from the segment holding ``fetch_offset`` on,
        entries with ``last_offset >= fetch_offset`` and ``first_offset < upper_bound``, until a
        segment's search is complete."""
        with self._lock:
            self._check_open()
            out: list[AbortedTxn] = []
            for seg in self._segments:
                if self._segments.end_offset(seg.base_offset) <= fetch_offset:
                    continue
                found = seg.txn_index.collect(fetch_offset, upper_bound)
                out.extend(found.aborted_transactions)
                if found.is_complete:
                    break
            return out

    def _write_txn_snapshot(self) -> None:
        """At a clean close: the open transactions as a producer snapshot at the log end offset
        (Kafka's ``.snapshot`` format), so the next open need not walk the log; older ones removed."""
        if self._txns is None:
            return
        leo = self._segments.active.next_offset
        entries = [ProducerSnapshotEntry(pid, -1, -1, -1, 0, -1, 0, first)
                   for pid, first in sorted(self._txns.ongoing.items())]
        write_snapshot(os.path.join(self.directory, layout.snapshot_name(leo)), entries)
        for offset, path in layout.list_snapshots(self.directory):
            if offset != leo:
                with storage_errors("remove producer snapshot", path), contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

    # -- configuration and lifecycle ----------------------------------------------------------
    def update_config(self, config: LogConfig) -> None:
        """Apply a new config (alter-configs); takes effect from the next append/pass."""
        with self._lock:
            self._config = config
            for seg in self._segments:
                seg.index_interval = max(1, config.index_interval_bytes)

    def close(self) -> None:
        """Flush everything, mark a clean shutdown and release the files. Idempotent."""
        with self._lock:
            if self._closed:
                return
            act = self._segments.active
            act.close_for_append()
            self._write_recovery_point()
            self._write_txn_snapshot()
            checkpoints.write_clean_shutdown(self.directory, CleanShutdown(act.next_offset, act.base_offset, act.size))
            self._segments.close_all()
            self._closed = True

    def delete(self) -> None:
        """Close the log and remove its directory (first renamed to ``<data_dir>/<uuid hex>-delete``)."""
        with self._lock:
            if not self._closed:
                self._segments.close_all()
                self._closed = True
            # a short name (FORMAT.md §1.1): "<249-char topic>-<p>.<uuid>-delete" would be too long
            doomed = os.path.join(os.path.dirname(self.directory), f"{uuid.uuid4().hex}-delete")
            with storage_errors("delete log directory", self.directory):
                try:
                    os.replace(self.directory, doomed)
                    shutil.rmtree(doomed)
                except FileNotFoundError:
                    pass

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
