"""Producer batches and their futures: what ``send()`` returns and how it resolves.

- :class:`ProducerBatch` — the records of one partition appended together, as raw
  ``(offset_delta, timestamp_ms, key, value, headers)`` tuples; encoded **once**
  (``kafkasim.records.record_batch.encode_trusted_batch``) when first sent, and the same bytes (same
  producer id, epoch and base sequence) are re-sent on a retry.
- :class:`FutureRecordMetadata` — kafka-python's future: ``get(timeout)``,
  ``is_done``, ``succeeded()``, ``failed()``, ``exception``, ``add_callback``,
  ``add_errback``. It resolves to a :class:`RecordMetadata` (topic, partition, offset,
  timestamp, ...) when its batch is acknowledged.

Invariants: a batch completes exactly once (success or one error); all its futures
resolve together; ``offset = base_offset + offset_delta``; with ``acks=0`` the offset
is -1, as in Kafka.

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
                 "error", "callbacks", "_event", "waiter", "batch_no", "_cb_lock")

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
            for fut, fn, args, on_error in callbacks:
                if (error is None) != on_error:
                    try:
                        fn(*args, fut.value if error is None else error)
                    except Exception:  # a user callback must not break the sender
                        pass

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

    @property
    def is_done(self) -> bool:
        return self._batch.done

    def succeeded(self) -> bool:
        return self._batch.done and self._batch.error is None

    def failed(self) -> bool:
        return self._batch.done and self._batch.error is not None

    @property
    def exception(self) -> Optional[BaseException]:
        return self._batch.error if self._batch.done else None

    @property
    def value(self) -> Optional[RecordMetadata]:
        b = self._batch
        if not b.done or b.error is not None:
            return None
        _, ts, key, value, headers = b.records[self._delta]
        offset = -1 if b.base_offset < 0 else b.base_offset + self._delta
        if b.log_append_time >= 0:
            ts = b.log_append_time
        hsize = sum(len(k) + (len(v) if v is not None else 0) for k, v in headers)
        return RecordMetadata(b.tp.topic, b.tp.partition, b.tp, offset, ts, b.log_start_offset,
                              -1 if key is None else len(key), -1 if value is None else len(value), hsize)

    def get(self, timeout: Optional[float] = None) -> RecordMetadata:
        """Wait for the record's batch (sending it now if it is still lingering) and return its metadata.

        Raises the batch's error, or :class:`KafkaTimeoutError` after ``timeout`` seconds.
        """
        if not self._batch.wait(timeout):
            raise KafkaTimeoutError(f"Timeout after waiting for {timeout} secs for {self._batch.tp}")
        if self._batch.error is not None:
            raise self._batch.error
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
        if (b.error is None) != on_error:
            fn(*args, self.value if b.error is None else b.error)
        return self

    def __repr__(self) -> str:
        state = "pending" if not self.is_done else ("failed" if self.failed() else "done")
        return f"<FutureRecordMetadata {self._batch.tp} delta={self._delta} {state}>"
