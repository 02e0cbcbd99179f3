"""The record accumulator: one open batch per partition, closed batches queued in order.

A record is appended to its partition's open batch. The batch is **closed** (moved to
the ready queue, to be sent) when

1. the next record would not fit in ``batch_size`` bytes (the record starts a new batch;
   a record larger than ``batch_size`` gets a batch of its own), or the batch reached
   ``batch_size`` after an append;
2. ``linger_ms`` has passed on the injected clock since the batch was opened — checked
   on every append and on :meth:`expire` (called by ``poll()``/``flush()``/the optional
   background sender), so with a ``MockClock`` a batch lingers until the clock says so;
3. :meth:`close_all` (``flush()``/``close()``).

Invariants: per partition, batches are closed in the order their records were
appended, and the ready queue is FIFO, so records of one partition leave in send order.
A record's size is an estimate (``RECORD_OVERHEAD`` + key + value + headers bytes); only
the ordering of fills depends on it, never correctness.

Thread-safety: **not** thread-safe; the Producer calls every method under its lock.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Optional

from kafkasim.records.validation import RECORD_OVERHEAD  # re-exported: the size estimate's overhead
from kafkasim.types import TopicPartition
from kafkasim.producer.batch import FutureRecordMetadata, ProducerBatch

__all__ = ["RecordAccumulator", "RECORD_OVERHEAD", "BATCH_OVERHEAD_ESTIMATE"]


BATCH_OVERHEAD_ESTIMATE = 61
"""The batch header (storage/FORMAT.md §2.1)."""

_NEVER = 1 << 62


class RecordAccumulator:
    """Per-partition open batches plus a FIFO of closed batches awaiting the sender.

    Open batches live in one list per topic, indexed by partition (:meth:`slots_for`),
    so the hot path indexes a list instead of hashing a TopicPartition.

    Fast path contract (used by ``Producer.send``): when ``slots[p]`` is an open batch,
    ``now < next_expiry`` and ``batch.size + size < batch_size``, :meth:`append` would only
    add the record tuple ``(len(batch.records), ts, key, value, headers)`` and ``size`` —
    the caller may do exactly that itself (under the same lock) and skip the call.
    """

    def __init__(self, batch_size: int, linger_ms: int,
                 waiter: Callable[[ProducerBatch, Optional[float]], None]) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self._waiter = waiter
        self._topics: dict[str, list] = {}      # topic -> [open batch or None] by partition
        self._open_count = 0
        self.ready: deque[ProducerBatch] = deque()
        self.next_expiry = _NEVER             # earliest linger deadline of an open batch
        self._closed_count: dict[TopicPartition, int] = {}

    def slots_for(self, topic: str, num_partitions: int) -> list:
        """The open-batch list of ``topic``, grown to ``num_partitions`` (pass it to :meth:`append`)."""
        slots = self._topics.get(topic)
        if slots is None:
            slots = self._topics[topic] = []
        if len(slots) < num_partitions:
            slots.extend([None] * (num_partitions - len(slots)))
        return slots

    def append(self, slots: list, tp: TopicPartition, now: int, ts: int, key, value, headers,
               size: int) -> FutureRecordMetadata:
        """Append one record to ``tp`` (``slots`` from :meth:`slots_for`); returns its future."""
        if now >= self.next_expiry:
            self.expire(now)
        p = tp[1]
        batch = slots[p]
        if batch is not None and batch.size + size > self.batch_size:
            self._close(slots, p, batch)
            batch = None
        if batch is None:
            batch = slots[p] = ProducerBatch(tp, now, self._waiter)
            self._open_count += 1
            expiry = now + self.linger_ms
            if expiry < self.next_expiry:
                self.next_expiry = expiry
        records = batch.records
        delta = len(records)
        records.append((delta, ts, key, value, headers))
        batch.size += size
        if batch.size >= self.batch_size:
            self._close(slots, p, batch)
        return FutureRecordMetadata(batch, delta)

    def _close(self, slots: list, p: int, batch: ProducerBatch) -> None:
        slots[p] = None
        self._open_count -= 1
        tp = batch.tp
        n = self._closed_count.get(tp, 0)
        batch.batch_no = n
        self._closed_count[tp] = n + 1
        self.ready.append(batch)

    def _open(self):
        for slots in self._topics.values():
            for p, batch in enumerate(slots):
                if batch is not None:
                    yield slots, p, batch

    def expire(self, now: int) -> None:
        """Close every open batch that has lingered ``linger_ms`` or longer."""
        nxt = _NEVER
        for slots, p, batch in list(self._open()):
            due = batch.created_ms + self.linger_ms
            if due <= now:
                self._close(slots, p, batch)
            elif due < nxt:
                nxt = due
        self.next_expiry = nxt

    def close_partition(self, tp: TopicPartition) -> None:
        """Close the open batch of ``tp`` now (a future's ``get()`` wants it sent)."""
        slots = self._topics.get(tp.topic)
        if slots is not None and tp.partition < len(slots) and slots[tp.partition] is not None:
            self._close(slots, tp.partition, slots[tp.partition])

    def close_all(self) -> None:
        """Close every open batch (flush/close)."""
        for slots, p, batch in list(self._open()):
            self._close(slots, p, batch)
        self.next_expiry = _NEVER

    def drain(self) -> list[ProducerBatch]:
        """Take every closed batch, in close order."""
        out = list(self.ready)
        self.ready.clear()
        return out

    def open_count(self) -> int:
        return self._open_count
