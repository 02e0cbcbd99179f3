"""Producer batches and their futures: what ``send()`` returns and how it resolves.

- :class:`ProducerBatch` — the records of one partition appended together, as raw
  ``(offset_delta, timestamp_ms, key, value, headers)`` tuples; encoded **once**
  (``kafkasim.records.record_batch.encode_trusted_batch``) when first sent, and the same bytes (same
  producer id, epoch and base sequence) are re-sent on a retry.
- the futures of its records (:class:`~kafkasim.producer.future.FutureRecordMetadata`,
  kafka-python's API, in ``producer/future.py``) resolve to a
  :class:`~kafkasim.producer.future.RecordMetadata` when the batch is acknowledged.

A batch the broker refuses as too large (``RecordTooLargeError``) with more than one
record is **split** (Kafka's ``ProducerBatch.split``): :meth:`ProducerBatch.split` makes
smaller batches of its records, in order, which the sender sends in its place. The
original keeps the futures; each piece reports its records' outcomes back to it
(offset or error, per record), and the original completes once every piece has — so one
oversized record fails alone while its batch mates get their offsets.

Invariants: a batch completes exactly once (success or one error, or — split — one
outcome per record); all its futures resolve together; ``offset = base_offset +
offset_delta``; with ``acks=0`` the offset is -1, as in Kafka.

Thread-safety: a batch is appended to only under the producer's lock and completed by
the one thread that holds the producer's send lock; completion publishes through a
``threading.Event`` (created by the first ``wait()`` that finds the batch pending, under the
batch's callback lock, so none is built for batches nobody waits on), so futures may be
waited on from any thread.
"""

from __future__ import annotations

import threading
from typing import Callable, Optional

from kafkasim.records.validation import record_size
from kafkasim.types import TopicPartition
from kafkasim.producer.future import FutureRecordMetadata, RecordMetadata

__all__ = ["RecordMetadata", "FutureRecordMetadata", "ProducerBatch"]


class ProducerBatch:
    """Records for one partition, sent (and retried) as one unit."""

    __slots__ = ("tp", "records", "size", "created_ms", "attempts", "base_sequence",
                 "encoded", "done", "base_offset", "log_append_time", "log_start_offset",
                 "error", "callbacks", "_event", "waiter", "batch_no", "_cb_lock",
                 "split_path", "parent", "parent_first", "results", "_pending_pieces")

    def __init__(self, tp: TopicPartition, created_ms: int, waiter: Callable[["ProducerBatch", Optional[float]], None]) -> None:
        self.tp = tp
        self.records: list = []
        self.size = 0
        self.created_ms = created_ms
        self.attempts = 0
        self.base_sequence = -1
        self.encoded: Optional[bytes] = None
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.log_start_offset = -1
        self.error: Optional[BaseException] = None
        self.callbacks: Optional[list] = None
        self._event: Optional[threading.Event] = None   # made by the first wait() before done
        self._cb_lock = threading.Lock()
        self.waiter = waiter          # producer hook: make this batch go out now (flush-like)
        self.batch_no = -1            # per-partition ordinal, assigned when closed
        self.split_path: tuple = ()   # a piece of a split batch: its index (and its parent's)
        self.parent: Optional[ProducerBatch] = None   # a piece: the batch it was split from
        self.parent_first = 0         # a piece: the parent's offset delta of its first record
        self.results: Optional[list] = None   # split: per record (offset, append time, log start, error)
        self._pending_pieces = 0

    def split(self, batch_size: int) -> list["ProducerBatch"]:
        """Split this batch into pieces, records in order, of at most ``batch_size`` or half
        this batch's estimated bytes, whichever is less (a record larger than that gets a
        piece of its own): so a batch of two or more records always yields two or more
        pieces, and splitting again ends at single records. (Kafka splits by ``batch.size``
        first and halves only a batch split already, since KAFKA-8350's fix; before it, a
        ``batch.size`` above the topic's ``max.message.bytes`` split forever.)

        Each piece carries this batch's producer state: its base sequence is this batch's
        plus the offset delta of its first record (Kafka's split keeps the sequence range),
        so later batches keep theirs. This batch completes when every piece has.
        """
        sizes = [record_size(r[2], r[3], r[4]) for r in self.records]
        max_size = min(batch_size, sum(sizes) // 2)
        pieces: list[ProducerBatch] = []
        piece: Optional[ProducerBatch] = None
        for delta, ((_, ts, key, value, headers), size) in enumerate(zip(self.records, sizes)):
            if piece is None or piece.size + size > max_size:
                piece = ProducerBatch(self.tp, self.created_ms, self.waiter)
                piece.batch_no = self.batch_no
                piece.split_path = self.split_path + (len(pieces),)
                piece.parent = self
                piece.parent_first = delta
                if self.base_sequence >= 0:
                    piece.base_sequence = (self.base_sequence + delta) & 0x7FFFFFFF
                pieces.append(piece)
            piece.records.append((len(piece.records), ts, key, value, headers))
            piece.size += size
        self.results = [None] * len(self.records)
        self._pending_pieces = len(pieces)
        return pieces

    def _piece_done(self, piece: "ProducerBatch") -> None:
        """A piece completed: record its records' outcomes; complete this batch after the last."""
        first = piece.parent_first
        for i in range(len(piece.records)):
            self.results[first + i] = piece.outcome(i)     # a piece split again reports per record
        self._pending_pieces -= 1
        if self._pending_pieces == 0:
            self.complete(-1)

    def outcome(self, delta: int) -> tuple:
        """``(offset, log_append_time, log_start_offset, error)`` of the record at ``delta``."""
        if self.results is not None:
            return self.results[delta]
        return (self.base_offset + delta if self.base_offset >= 0 else -1, self.log_append_time,
                self.log_start_offset, self.error)

    def complete(self, base_offset: int, log_append_time: int = -1, log_start_offset: int = -1,
                 error: Optional[BaseException] = None) -> None:
        """Resolve every future of the batch; run callbacks (errors in callbacks are swallowed)."""
        if self.done:
            return
        self.base_offset, self.log_append_time, self.log_start_offset = base_offset, log_append_time, log_start_offset
        self.error = error
        with self._cb_lock:
            self.done = True
            callbacks, self.callbacks = self.callbacks, None
            event = self._event
        if event is not None:
            event.set()
        if callbacks:
            for fut, on_success, on_error in callbacks:
                fut._fire(on_success, on_error)   # a failing callback is logged, never breaks the sender
        if self.parent is not None:
            self.parent._piece_done(self)

    def wait(self, timeout: Optional[float]) -> bool:
        if self.done:
            return True
        self.waiter(self, timeout)
        with self._cb_lock:           # complete() reads _event under this lock after setting done
            if self.done:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)
