"""Producer batches and their futures: what ``send()`` returns and how it resolves.

- :class:`ProducerBatch` — the records of one partition appended together, as raw
  ``(offset_delta, timestamp_ms, key, value, headers)`` tuples; encoded **once**
  (``kafkasim.records.record_batch.encode_trusted_batch``) when first sent, and the same bytes (same
  producer id, epoch and base sequence) are re-sent on a retry.
- :class:`FutureRecordMetadata` — kafka-python's future: ``get(timeout)``,
  ``is_done``, ``succeeded()``, ``failed()``, ``exception``, ``add_callback``,
  ``add_errback``. It resolves to a :class:`RecordMetadata` (topic, partition, offset,
  timestamp, ...) when its batch is acknowledged.

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
from operator import itemgetter
from typing import Any, Callable, NamedTuple, Optional

from kafkasim.errors import KafkaTimeoutError
from kafkasim.records.validation import record_size
from kafkasim.types import TopicPartition

__all__ = ["RecordMetadata", "FutureRecordMetadata", "ProducerBatch"]


class RecordMetadata(NamedTuple):
    """Where a record landed (kafka-python's ``RecordMetadata`` fields)."""

    topic: str
    partition: int
    topic_partition: TopicPartition
    offset: int
    timestamp: int
    log_start_offset: int
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


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
            results = self.results
            for fut, fn, args, on_error in callbacks:
                err = error if results is None else results[fut[1]][3]
                if (err is None) != on_error:
                    try:
                        fn(*args, fut.value if err is None else err)
                    except Exception:  # a user callback must not break the sender
                        pass
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


class FutureRecordMetadata(tuple):
    """The result of ``send()``; resolves to :class:`RecordMetadata` or an error.

    Built as ``FutureRecordMetadata((batch, offset_delta))`` — a 2-tuple underneath, the
    cheapest object Python can allocate per ``send()``.
    """

    __slots__ = ()
    _batch = property(itemgetter(0))
    _delta = property(itemgetter(1))

    def _error(self) -> Optional[BaseException]:
        b = self[0]
        return b.error if b.results is None else b.results[self[1]][3]

    @property
    def is_done(self) -> bool:
        return self._batch.done

    def succeeded(self) -> bool:
        return self._batch.done and self._error() is None

    def failed(self) -> bool:
        return self._batch.done and self._error() is not None

    @property
    def exception(self) -> Optional[BaseException]:
        return self._error() if self._batch.done else None

    @property
    def value(self) -> Optional[RecordMetadata]:
        b = self._batch
        if not b.done:
            return None
        offset, append_time, log_start, error = b.outcome(self._delta)
        if error is not None:
            return None
        _, ts, key, value, headers = b.records[self._delta]
        if append_time >= 0:
            ts = append_time
        hsize = sum(len(k) + (len(v) if v is not None else 0) for k, v in headers)
        return RecordMetadata(b.tp.topic, b.tp.partition, b.tp, offset, ts, log_start,
                              -1 if key is None else len(key), -1 if value is None else len(value), hsize)

    def get(self, timeout: Optional[float] = None) -> RecordMetadata:
        """Wait for the record's batch (sending it now if it is still lingering) and return its metadata.

        Raises the record's error (its batch's, or — for a split batch — its piece's), or
        :class:`KafkaTimeoutError` after ``timeout`` seconds.
        """
        if not self._batch.wait(timeout):
            raise KafkaTimeoutError(f"Timeout after waiting for {timeout} secs for {self._batch.tp}")
        error = self._error()
        if error is not None:
            raise error
        return self.value

    def add_callback(self, fn: Callable[..., Any], *args: Any) -> "FutureRecordMetadata":
        """Call ``fn(*args, record_metadata)`` on success (at once if already done)."""
        return self._add(fn, args, False)

    def add_errback(self, fn: Callable[..., Any], *args: Any) -> "FutureRecordMetadata":
        """Call ``fn(*args, exception)`` on failure (at once if already failed)."""
        return self._add(fn, args, True)

    def _add(self, fn, args, on_error: bool) -> "FutureRecordMetadata":
        b = self._batch
        with b._cb_lock:
            if not b.done:
                if b.callbacks is None:
                    b.callbacks = []
                b.callbacks.append((self, fn, args, on_error))
                return self
        error = self._error()
        if (error is None) != on_error:
            fn(*args, self.value if error is None else error)
        return self

    def __repr__(self) -> str:
        state = "pending" if not self.is_done else ("failed" if self.failed() else "done")
        return f"<FutureRecordMetadata {self._batch.tp} delta={self._delta} {state}>"
