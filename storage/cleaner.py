"""The background thread that runs retention and compaction over a set of logs (Kafka's ``LogCleaner``).

:class:`LogCleaner` runs, every ``interval_ms``, for each log the provider returns:
``maybe_flush()`` (``flush.ms``), ``delete_old_segments()`` when ``cleanup.policy``
has ``delete``, and ``compact()`` when it has ``compact`` and the log's dirty ratio
is at least ``min.cleanable.dirty.ratio``. The thread paces itself with an
``Event.wait`` (real time); every decision about record age uses the injected clock.
The compaction algorithm itself is :mod:`kafkasim.storage.compaction`, which the log
calls; the cleaner works on logs and the log does not know the cleaner (one-way, as in
Kafka; the storage layers contract in pyproject.toml keeps it so).

Invariant: a failing pass on one log is recorded in :attr:`LogCleaner.errors` and logged;
it never stops the thread or the other logs' passes.

Thread-safety: ``LogCleaner`` is safe to start/stop from any thread; each log serialises
its own retention and compaction passes.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Callable, Iterable, Optional

from kafkasim.clock import Clock
from kafkasim.errors import KafkaSimError

if TYPE_CHECKING:  # pragma: no cover
    from kafkasim.storage.log import Log

__all__ = ["LogCleaner"]

log_ = logging.getLogger("kafkasim.storage.cleaner")


class LogCleaner:
    """Background retention + compaction over the logs ``logs()`` returns (see module docstring)."""

    def __init__(self, logs: Callable[[], Iterable["Log"]], clock: Clock, interval_ms: int = 30_000) -> None:
        if interval_ms <= 0:
            raise ValueError(f"interval_ms must be > 0, got {interval_ms}")
        self._logs = logs
        self._clock = clock
        self._interval_ms = interval_ms
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self.passes = 0
        self.errors: list[str] = []

    def run_once(self) -> dict:
        """One pass over every log; returns totals (segments deleted, logs compacted, flushes)."""
        totals = {"segments_deleted": 0, "logs_compacted": 0, "flushes": 0}
        for log in list(self._logs()):
            if log.closed:
                continue
            try:
                if log.maybe_flush():
                    totals["flushes"] += 1
                cfg = log.config
                if cfg.delete:
                    totals["segments_deleted"] += log.delete_old_segments()
                if cfg.compact and log.dirty_ratio() >= cfg.min_cleanable_dirty_ratio and log.dirty_ratio() > 0:
                    log.compact()
                    totals["logs_compacted"] += 1
            except KafkaSimError as exc:
                if log.closed:
                    continue
                self.errors.append(f"{log.directory}: {type(exc).__name__}: {exc}")
                log_.error("cleaner pass on %s failed: %s", log.directory, exc)
        self.passes += 1
        return totals

    def start(self) -> "LogCleaner":
        with self._lock:
            if self._thread is not None:
                return self
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="kafkasim-log-cleaner", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval_ms / 1000.0):
            try:
                self.run_once()
            except Exception as exc:  # never let the thread die silently
                self.errors.append(f"{type(exc).__name__}: {exc}")
                log_.exception("cleaner pass failed")

    def stop(self, timeout: float = 10.0) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
