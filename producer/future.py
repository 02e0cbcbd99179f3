"""What ``Producer.send()`` returns: kafka-python's ``FutureRecordMetadata`` and ``RecordMetadata``.

:class:`FutureRecordMetadata` has kafka-python's future API (``kafka.future.Future``):
``is_done``, ``value`` and ``exception`` (attributes, read-only here), ``succeeded()``,
``failed()``, ``retriable()``, ``add_callback(f, *args, **kwargs)``,
``add_errback(f, *args, **kwargs)``, ``add_both(f, *args, **kwargs)``,
``chain(future)`` and ``get(timeout)``. It is a small ``__slots__`` object over
``(batch, offset delta)``, not a tuple: nothing of ``tuple`` (``count``, ``index``,
``len()``, unpacking) leaks into the API. It resolves to a :class:`RecordMetadata` with
kafka-python's fields (``checksum`` is None, as kafka-python reports for v2 batches).

Callbacks run once, on the thread that completes the batch (or at once, on the caller's
thread, when the future is already done); a callback that raises is logged and does not
stop the others, as kafka-python's.

:class:`Future` is a minimal resolvable future (``success``/``failure`` plus the same
read API) for ``chain()`` targets and tests.

Invariants: a future resolves exactly once (its batch completes once); ``value`` is None
until success, ``exception`` None until failure. Thread-safety: safe to wait on and to add
callbacks from any thread (the batch's callback lock orders registration and completion).
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Callable, NamedTuple, Optional

from kafkasim.errors import KafkaTimeoutError
from kafkasim.types import TopicPartition

__all__ = ["RecordMetadata", "FutureRecordMetadata", "Future"]

log = logging.getLogger(__name__)


class RecordMetadata(NamedTuple):
    """Where a record landed: kafka-python's ``RecordMetadata`` fields, in its order.

    ``serialized_*_size`` are byte lengths after serialization (-1 for a None key or
    value; headers: UTF-8 key bytes plus value bytes, -1 without headers)."""

    topic: str
    partition: int
    topic_partition: TopicPartition
    offset: int
    timestamp: int
    log_start_offset: int
    checksum: Optional[int]
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


def header_size(headers) -> int:
    """kafka-python's serialized header size: -1 without headers."""
    if not headers:
        return -1
    return sum(len(k.encode("utf-8")) + (len(v) if v is not None else 0) for k, v in headers)


def _bind(f: Callable, args: tuple, kwargs: dict) -> Callable:
    return functools.partial(f, *args, **kwargs) if args or kwargs else f


def _run(f: Callable, arg: Any, what: str) -> None:
    try:
        f(arg)
    except Exception:  # as kafka-python: a failing callback is logged, the others still run
        log.exception("Error processing %s", what)


class FutureRecordMetadata:
    """The result of ``send()``: resolves to :class:`RecordMetadata` or fails with the record's error."""

    __slots__ = ("_batch", "_delta")

    def __init__(self, batch, delta: int) -> None:
        self._batch = batch
        self._delta = delta

    def _error(self) -> Optional[BaseException]:
        b = self._batch
        return b.error if b.results is None else b.results[self._delta][3]

    @property
    def is_done(self) -> bool:
        return self._batch.done

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
        return RecordMetadata(b.tp.topic, b.tp.partition, b.tp, offset, ts, log_start, None,
                              -1 if key is None else len(key), -1 if value is None else len(value),
                              header_size(headers))

    def succeeded(self) -> bool:
        return self._batch.done and self._error() is None

    def failed(self) -> bool:
        return self._batch.done and self._error() is not None

    def retriable(self) -> bool:
        """True when the future failed with a retriable error (kafka-python's)."""
        return self._batch.done and bool(getattr(self._error(), "retriable", False))

    def get(self, timeout: Optional[float] = None) -> RecordMetadata:
        """Wait for the record's batch (sending it now if it is still lingering) and return its metadata.

        Raises the record's error (its batch's, or, for a split batch, its piece's), or
        :class:`KafkaTimeoutError` after ``timeout`` seconds.
        """
        if not self._batch.wait(timeout):
            raise KafkaTimeoutError(f"Timeout after waiting for {timeout} secs.")
        error = self._error()
        if error is not None:
            raise error
        return self.value

    def add_callback(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> "FutureRecordMetadata":
        """Call ``f(*args, record_metadata, **kwargs)`` on success (at once if already succeeded)."""
        return self._add(_bind(f, args, kwargs), None)

    def add_errback(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> "FutureRecordMetadata":
        """Call ``f(*args, exception, **kwargs)`` on failure (at once if already failed)."""
        return self._add(None, _bind(f, args, kwargs))

    def add_both(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> "FutureRecordMetadata":
        """``f`` as both callback and errback (it gets the metadata or the exception)."""
        g = _bind(f, args, kwargs)
        return self._add(g, g)

    def chain(self, future) -> "FutureRecordMetadata":
        """Resolve ``future`` (anything with ``success(value)`` and ``failure(exc)``) as this one resolves."""
        return self._add(future.success, future.failure)

    def _add(self, on_success: Optional[Callable], on_error: Optional[Callable]) -> "FutureRecordMetadata":
        b = self._batch
        with b._cb_lock:
            if not b.done:
                if b.callbacks is None:
                    b.callbacks = []
                b.callbacks.append((self, on_success, on_error))
                return self
        self._fire(on_success, on_error)
        return self

    def _fire(self, on_success: Optional[Callable], on_error: Optional[Callable]) -> None:
        """Run the callback matching this (done) future's outcome."""
        error = self._error()
        if error is None:
            if on_success is not None:
                _run(on_success, self.value, "callback")
        elif on_error is not None:
            _run(on_error, error, "errback")

    def __repr__(self) -> str:
        state = "pending" if not self.is_done else ("failed" if self.failed() else "done")
        return f"<FutureRecordMetadata {self._batch.tp} delta={self._delta} {state}>"


class Future:
    """A minimal resolvable future (kafka-python's ``kafka.future.Future`` surface), e.g. a ``chain()`` target."""

    __slots__ = ("is_done", "value", "exception", "_callbacks", "_lock")

    def __init__(self) -> None:
        self.is_done = False
        self.value: Any = None
        self.exception: Optional[BaseException] = None
        self._callbacks: list = []
        self._lock = threading.Lock()

    def succeeded(self) -> bool:
        return self.is_done and self.exception is None

    def failed(self) -> bool:
        return self.is_done and self.exception is not None

    def retriable(self) -> bool:
        return self.failed() and bool(getattr(self.exception, "retriable", False))

    def success(self, value: Any) -> "Future":
        return self._resolve(value, None)

    def failure(self, exc: BaseException) -> "Future":
        exc = exc() if isinstance(exc, type) else exc
        if not isinstance(exc, BaseException):
            raise TypeError("future failed without an exception")
        return self._resolve(None, exc)

    def _resolve(self, value: Any, exc: Optional[BaseException]) -> "Future":
        with self._lock:
            if self.is_done:
                raise RuntimeError("future already resolved")
            self.value, self.exception, self.is_done = value, exc, True
            callbacks, self._callbacks = self._callbacks, []
        for on_success, on_error in callbacks:
            self._fire(on_success, on_error)
        return self

    def _fire(self, on_success, on_error) -> None:
        if self.exception is None:
            if on_success is not None:
                _run(on_success, self.value, "callback")
        elif on_error is not None:
            _run(on_error, self.exception, "errback")

    def _add(self, on_success, on_error) -> "Future":
        with self._lock:
            if not self.is_done:
                self._callbacks.append((on_success, on_error))
                return self
        self._fire(on_success, on_error)
        return self

    def add_callback(self, f, *args, **kwargs) -> "Future":
        return self._add(_bind(f, args, kwargs), None)

    def add_errback(self, f, *args, **kwargs) -> "Future":
        return self._add(None, _bind(f, args, kwargs))

    def add_both(self, f, *args, **kwargs) -> "Future":
        g = _bind(f, args, kwargs)
        return self._add(g, g)

    def chain(self, future) -> "Future":
        return self._add(future.success, future.failure)
