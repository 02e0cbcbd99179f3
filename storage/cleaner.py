"""Compaction of one log, and the background thread that runs retention and compaction.

:func:`compact_log` is the algorithm behind :meth:`kafkasim.storage.log.Log.compact`
(FORMAT.md §6), in numbered steps:

1. Take the cleanable closed segments (the log picks them: closed, and older than
   ``min.compaction.lag.ms``).
2. Read them once, every batch CRC-checked, building ``key → highest offset``.
3. For each segment, rewrite every batch keeping only records whose offset is the
   latest for their key, minus tombstones (nil value) whose timestamp is older than
   ``now - delete.retention.ms`` and minus keyless records (as Kafka's cleaner, which
   counts them invalid). Survivors keep offset, timestamp, key, value and headers;
   a batch keeps base offset, ``last_offset_delta`` and producer fields; a batch left
   empty is dropped. An unchanged segment is not rewritten.
4. A changed segment is written to ``<base>.log.cleaned``, fsynced, and swapped in by the
   log (``.cleaned`` → ``.swap``, indexes removed, ``.swap`` → ``.log``, indexes rebuilt).
5. The cleaner checkpoint becomes the end of the last cleaned segment.

Worked example: batches ``[k1=a@0, k2=b@1] [k1=c@2, k2=nil@3]`` in closed segments
(tombstone older than delete.retention.ms) → ``[k1=c@2]``: ``a`` and ``b`` are
superseded, the tombstone expired. Offsets 0, 1 and 3 read as gaps.

:class:`LogCleaner` runs, every ``interval_ms``, for each log the provider returns:
``maybe_flush()`` (``flush.ms``), ``delete_old_segments()`` when ``cleanup.policy``
has ``delete``, and ``compact()`` when it has ``compact`` and the log's dirty ratio
is at least ``min.cleanable.dirty.ratio``. The thread paces itself with an
``Event.wait`` (real time); every decision about record age uses the injected clock.

Thread-safety: ``compact_log`` must be called with the log's cleaning lock held
(``Log.compact`` does); ``LogCleaner`` is safe to start/stop from any thread.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Callable, Iterable, Optional

from kafkasim.clock import Clock
from kafkasim.errors import KafkaSimError, KafkaStorageError
from kafkasim.records import record_batch as rb
from kafkasim.storage.segment import iter_headers

if TYPE_CHECKING:  # pragma: no cover
    from kafkasim.storage.log import Log

__all__ = ["LogCleaner", "compact_log", "empty_stats"]

log_ = logging.getLogger("kafkasim.storage.cleaner")


def empty_stats() -> dict:
    return {"segments_scanned": 0, "segments_cleaned": 0, "records_read": 0, "records_kept": 0,
            "records_superseded": 0, "tombstones_dropped": 0, "keyless_dropped": 0,
            "bytes_before": 0, "bytes_after": 0}


def _batches(path: str):
    """(header, raw batch bytes, decoded records) for every batch of a closed segment file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise KafkaStorageError(f"cannot open {path} for compaction: {exc}") from exc
    try:
        size = os.fstat(fd).st_size
        for pos, h in iter_headers(fd, 0, size, where=path, check_crc=False):
            raw = os.pread(fd, h.size, pos)
            rb.verify(raw, 0, h, where=f"{path} (position {pos})")
            yield h, raw, rb.decode_records(raw, 0, h, where=f"{path} (position {pos})")
    except OSError as exc:
        raise KafkaStorageError(f"cannot read {path} for compaction: {exc}") from exc
    finally:
        os.close(fd)


def compact_log(log: "Log", bases: list[int], now_ms: int) -> dict:
    """Compact the closed segments ``bases`` of ``log`` (steps in the module docstring)."""
    stats = empty_stats()
    segments = log.closed_segment_paths(bases)
    if not segments:
        return stats
    latest: dict[bytes, int] = {}
    for _, path in segments:
        for h, _, body in _batches(path):
            base = h.base_offset
            for rec in body:
                if rec[2] is not None:
                    latest[rec[2]] = base + rec[0]
    horizon = now_ms - log.config.delete_retention_ms
    for base, path in segments:
        stats["segments_scanned"] += 1
        out: list[bytes] = []
        changed = False
        for h, raw, body in _batches(path):
            stats["records_read"] += len(body)
            stats["bytes_before"] += len(raw)
            keep = []
            for delta, tsd, key, value, headers in body:
                off = h.base_offset + delta
                ts = h.base_timestamp + tsd
                if key is None:
                    stats["keyless_dropped"] += 1
                elif latest.get(key) != off:
                    stats["records_superseded"] += 1
                elif value is None and ts < horizon:
                    stats["tombstones_dropped"] += 1
                else:
                    keep.append((delta, ts, key, value, headers))
            stats["records_kept"] += len(keep)
            if len(keep) == len(body):
                out.append(raw)
                stats["bytes_after"] += len(raw)
                continue
            changed = True
            if keep:
                new = rb.encode_batch(h.base_offset, keep, producer_id=h.producer_id,
                                      producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                                      partition_leader_epoch=h.partition_leader_epoch,
                                      attributes=h.attributes, last_offset_delta=h.last_offset_delta)
                out.append(new)
                stats["bytes_after"] += len(new)
        if changed:
            cleaned = path + ".cleaned"
            try:
                with open(cleaned, "wb") as f:
                    f.write(b"".join(out))
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as exc:
                raise KafkaStorageError(f"cannot write {cleaned}: {exc}") from exc
            log.swap_cleaned_segment(base, cleaned)
            stats["segments_cleaned"] += 1
    last_base = segments[-1][0]
    log.write_cleaner_checkpoint(log.segment_end_offset(last_base))
    log_.info("%s: compacted %s", log.directory, stats)
    return stats


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
