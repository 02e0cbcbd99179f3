"""The log start offset a client moves (DeleteRecords), and the largest-timestamp lookup (KIP-734).

:class:`LogStartOps` is a base of :class:`kafkasim.storage.log.Log` (it uses the log's lock,
segments and clock; kept here so log.py stays one job):

- :meth:`LogStartOps.increment_log_start_offset`: Kafka's ``UnifiedLog.maybeIncrementLogStartOffset``.
  The log start offset becomes ``offset`` (it never moves back); records below it can no
  longer be read (OffsetOutOfRangeError), even inside a batch that straddles it. It is
  written to the partition's ``log-start-offset`` file (storage/checkpoints.py) *before* it
  takes effect, so a restart keeps it. Segments wholly below it stay on disk until the next
  retention pass deletes them (:meth:`LogStartOps.delete_segments_below_log_start`: every
  segment whose next segment starts at or below the log start, whatever ``cleanup.policy``
  says, as Kafka's ``deleteLogStartOffsetBreachedSegments``).
- :meth:`LogStartOps.max_timestamp_and_offset`: ListOffsets' ``MAX_TIMESTAMP`` (-3): the
  largest record timestamp in the log and the first offset that carries it (Kafka ≥ 3.8,
  KAFKA-16310: the record's offset, not its batch's last offset). As Kafka, it looks at every
  segment still on disk.

Invariant: ``first segment base ≤ log start offset ≤ log end offset``; the effective log start
offset is the larger of the first segment's base offset and the value in ``log-start-offset``
(kept at or below the log end offset when truncation shortens the log).

Thread-safety: every method takes the log's lock.
"""

from __future__ import annotations

import logging
from typing import Optional

from kafkasim.arguments import check_arg
from kafkasim.errors import OffsetOutOfRangeError
from kafkasim.storage import checkpoints

__all__ = ["LogStartOps"]

log_ = logging.getLogger("kafkasim.storage")


class LogStartOps:
    """Client-driven log start offset and the max-timestamp lookup for Log (module docstring)."""

    _start: int

    def _effective_start(self) -> int:
        """Under the lock: the log start offset (module invariant)."""
        return max(self._segments.log_start_offset, self._start)

    def _clamp_start(self) -> None:
        """Under the lock, after the log end moved back (truncation): keep start ≤ end."""
        end = self._segments.active.next_offset
        if self._start > end:
            self._start = end
            checkpoints.write_log_start_offset(self.directory, end)

    def _records_between(self, offset: int, upper: int):
        """Under the lock: the records in ``[offset, upper)``, read batch by batch (a time
        lookup whose segment answer lies below the log start reads on from it)."""
        while offset < upper:
            got = self.fetch(offset, 1 << 20)
            if not got.records:
                return
            for r in got.records:
                if r.offset >= upper:
                    return
                yield r
            offset = got.next_offset

    def increment_log_start_offset(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (never back); return the log start offset.

        OffsetOutOfRangeError when ``offset`` is above the log end offset (the caller checks the
        high watermark, which a replicated partition keeps at or below it)."""
        check_arg("offset", offset, "int", min=0)
        with self._lock:
            self._check_open()
            end = self._segments.active.next_offset
            if offset > end:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {offset} of partition {self._name} "
                    f"since it is larger than the log end offset {end}")
            current = self._effective_start()
            if offset <= current:
                return current
            checkpoints.write_log_start_offset(self.directory, offset)
            self._start = offset
            log_.info("%s: log start offset %d (records deleted by a client)", self.directory, offset)
            return offset

    def delete_segments_below_log_start(self) -> int:
        """Delete every closed segment whose next segment starts at or below the log start
        offset; returns how many (part of every retention pass)."""
        with self._lock:
            self._check_open()
            start = self._effective_start()
            victims = [seg for seg, upper in self._segments.with_upper_bounds()
                       if seg is not self._segments.active and upper <= start]
            return self._delete_segments(victims, f"log start offset {start} breach")

    def max_timestamp_and_offset(self) -> Optional[tuple[int, int]]:
        """(offset, timestamp) of the first record with the largest timestamp, or None (no records)."""
        with self._lock:
            self._check_open()
            best = None
            for seg, upper in self._segments.with_upper_bounds():
                if seg is not self._segments.active:
                    self._load_indexes(seg, upper)     # a closed segment's largest timestamp
                if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best[0].max_timestamp):
                    best = (seg, upper)
            if best is None:
                return None
            seg, upper = best
            return seg.find_offset_by_timestamp(seg.max_timestamp, upper, final=seg is not self._segments.active)
