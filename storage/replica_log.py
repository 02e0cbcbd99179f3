"""What replication needs of a log: appending a leader's batch at its own offsets, and truncation.

:class:`ReplicaLogOps` is a base of :class:`kafkasim.storage.log.Log` (it uses the log's
lock, segments and clock; kept here so log.py stays one job and under 500 lines):

- :meth:`ReplicaLogOps.append_replica_batch`: a follower appends a batch read from its
  leader (``Log.read_batches``) verbatim: the batch's base offset must be the follower's log
  end offset, nothing is re-stamped (not the timestamps under ``LogAppendTime``, not the
  leader epoch), and the CRC is checked (a follower never stores a corrupt copy).
- :meth:`ReplicaLogOps.refuse_writes`: the disk under the log is full (a broker's disk-full
  fault): every append, the producer's, a follower's copy or a transaction marker, raises
  :class:`~kafkasim.errors.KafkaStorageError` before a byte is written (ENOSPC, as Kafka's
  ``LogDirFailureChannel`` sees it), so the segment stays exactly as it was.
- :meth:`ReplicaLogOps.restart_at`: drop everything and start empty at an offset.
- :meth:`ReplicaLogOps.truncate_to`: drop every batch whose last offset is ≥ ``offset``
  (Kafka's ``LogSegment.truncateTo``: a batch straddling ``offset`` goes whole), deleting
  later segments; below the log start the log restarts empty at ``offset`` (Kafka's
  ``truncateFullyAndStartAt``). The remaining last segment is then re-opened by the loader
  with recovery from position 0, which rebuilds its indexes (derived data, FORMAT.md §3).

Invariant: after ``truncate_to(o)`` the log end offset is ≤ ``o`` (= ``o`` when ``o`` is a
batch boundary) and no record at or above it can be read. The recovery point and the
clean-shutdown marker are removed before the reload, so nothing stale is trusted.

Thread-safety: both take the log's lock.
"""

from __future__ import annotations

import contextlib
import os

from typing import Optional

from kafkasim.errors import CorruptRecordError, IllegalStateError, KafkaStorageError
from kafkasim.records.framing import ATTR_TRANSACTIONAL, BatchHeader, decode_header, verify
from kafkasim.storage.checkpoints import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE
from kafkasim.storage.files import fsync_dir, storage_errors
from kafkasim.storage.loader import load_segments
from kafkasim.storage.segment import LogSegment

__all__ = ["ReplicaLogOps"]


class ReplicaLogOps:
    """Follower append and truncation for :class:`kafkasim.storage.log.Log` (module docstring)."""

    def append_replica_batch(self, batch: bytes) -> BatchHeader:
        """Append a batch copied from the leader at its own base offset (must equal the LEO)."""
        where = f"replica fetch into {self._name}"
        h = decode_header(batch, 0, where=where)
        if len(batch) != h.size:
            raise CorruptRecordError(f"{self._name}: replica batch at offset {h.base_offset} is "
                                     f"{len(batch)} bytes, its header says {h.size}")
        verify(batch, 0, h, where=where)    # the CRC: a follower never stores a corrupt copy
        with self._lock:
            self._check_open()
            leo = self._segments.active.next_offset
            if h.base_offset != leo:
                raise IllegalStateError(f"{self._name}: replica batch base offset {h.base_offset} is not "
                                        f"the log end offset {leo}")
            return self._write_locked(batch, h, self._clock.now_ms())

    _write_refusal: Optional[str] = None

    def refuse_writes(self, reason: Optional[str]) -> None:
        """From now on every append raises KafkaStorageError naming ``reason`` (e.g. "No space
        left on device") before anything is written; None lets appends through again."""
        with self._lock:
            self._write_refusal = reason

    @property
    def writes_refused(self) -> Optional[str]:
        """Why appends are refused (:meth:`refuse_writes`), or None."""
        return self._write_refusal

    def _write_locked(self, batch, h: BatchHeader, now: int) -> BatchHeader:
        """Under the lock: roll if due, write ``batch`` stamped with ``h.base_offset`` and count
        it for ``flush.messages``/``flush.ms`` (the one write path of producer and follower appends).
        A refused write (:meth:`refuse_writes`) fails first, with nothing written."""
        if self._write_refusal is not None:
            raise KafkaStorageError(f"Error while appending records to {self._name} in dir "
                                    f"{os.path.dirname(self.directory)}: {self._write_refusal}")
        self._maybe_roll(h.size, h, now)
        if self._txns is None and h.producer_id >= 0 and h.attributes & ATTR_TRANSACTIONAL:
            self._transactions()      # loaded before the write: a rebuild must not see this batch
        self._segments.active.append(batch, h, now)
        self._track_written(batch, h)
        self._unflushed_messages += h.record_count
        if self._first_unflushed_ms is None:
            self._first_unflushed_ms = now
        if (self._unflushed_messages >= self._config.flush_messages
                or now - self._first_unflushed_ms >= self._config.flush_ms):
            self._flush_locked()
        return h

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is ≥ ``offset``; return the new log end offset."""
        with self._lock:
            self._check_open()
            if offset >= self._segments.active.next_offset:
                return self._segments.active.next_offset
            return self._cut(offset, False)

    def restart_at(self, offset: int) -> int:
        """Drop everything and start empty at ``offset`` (Kafka's ``truncateFullyAndStartAt``:
        a follower whose leader deleted, by retention, what it has not fetched yet)."""
        with self._lock:
            self._check_open()
            return self._cut(offset, True)

    def _cut(self, offset: int, full: bool) -> int:
        """Under the lock: keep the batches below ``offset`` (none when ``full``), reload."""
        segs = self._segments
        all_segs = list(segs)
        start = segs.log_start_offset
        for seg in all_segs:
            seg.flush(fsync=False)
        keep = None if full or offset <= start else max(
            (s for s in all_segs if s.base_offset < offset), key=lambda s: s.base_offset)
        cut = None
        if keep is not None:
            for pos, h in keep.batches():
                if h.base_offset + h.last_offset_delta >= offset:
                    cut = pos
                    break
        segs.close_all()
        for seg in all_segs:
            if keep is None or seg.base_offset > keep.base_offset:
                seg.delete()
        if keep is None:
            LogSegment.create(self.directory, offset, self._config.index_interval_bytes, self._report).close()
        elif cut is not None:
            keep.truncate(cut)
            keep.close()
        if keep is not None:
            keep.txn_index.truncate_to(offset)      # aborted transactions whose marker was cut
        for name in (RECOVERY_POINT_FILE, CLEAN_SHUTDOWN_FILE):
            with storage_errors("remove", os.path.join(self.directory, name)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.directory, name))
        fsync_dir(self.directory)
        self._segments = load_segments(self.directory, self._config, self._report, self._clock,
                                       self._max_open)
        self._unflushed_messages = 0
        self._first_unflushed_ms = None
        self._clamp_start()          # a DeleteRecords start past the new end (log_start.py)
        self._write_recovery_point()
        self._reset_transactions()   # rebuilt from what is left on next use
        return self._segments.active.next_offset
