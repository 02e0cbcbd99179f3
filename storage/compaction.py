"""Compaction of closed segments (storage/FORMAT.md §6): the algorithm behind ``Log.compact``.

:func:`compact_segments`, in numbered steps:

1. Take the cleanable closed segments (the log picks them: closed, and older than
   ``min.compaction.lag.ms``), as ``(base offset, path)``.
2. Read them once, every batch CRC-checked, building ``key → highest offset``.
   Control batches (transaction markers) and the batches of aborted transactions add no
   key (Kafka's ``buildOffsetMapForSegment``).
3. For each segment, rewrite every batch keeping only records whose offset is the
   latest for their key, minus tombstones (nil value) whose timestamp is older than the
   horizon (``now - delete.retention.ms``) and minus keyless records (as Kafka's cleaner,
   which counts them invalid). Survivors keep offset, timestamp, key, value and headers;
   a batch keeps base offset, ``last_offset_delta`` and producer fields; a batch left
   empty is dropped. An unchanged segment is not rewritten. Transactions, as Kafka's
   ``CleanedTransactionMetadata`` (:class:`_TxnFilter`):

   - a batch of an aborted transaction (the log's ``.txnindex`` entries, passed in as
     ``aborted``) is dropped whole;
   - an ABORT marker stays while this pass still saw a batch of its transaction (that
     batch goes now; the marker goes in a later pass), with its ``.txnindex`` entry;
   - a COMMIT marker stays while this pass saw a batch of its transaction (its records
     may be compacted like any others);
   - a marker that may go is dropped once its timestamp is older than the horizon, as
     tombstones are (Kafka keeps it until the batch's delete horizon, KIP-534).
4. A changed segment is written to ``<base>.log.cleaned``, fsynced, and handed to ``swap``
   with the ``.txnindex`` entries of the ABORT markers it keeps (the log's: ``.cleaned`` →
   ``.swap``, indexes removed, ``.swap`` → ``.log``, indexes rebuilt).

The log then writes the cleaner checkpoint (the end of the last cleaned segment).

Worked example: batches ``[k1=a@0, k2=b@1] [k1=c@2, k2=nil@3]`` in closed segments
(tombstone older than delete.retention.ms) → ``[k1=c@2]``: ``a`` and ``b`` are
superseded, the tombstone expired. Offsets 0, 1 and 3 read as gaps.

This module works on segment files and knows nothing of the log beyond the ``swap``
callback, so the log can use it without the log and its cleaner importing each other.

Thread-safety: the caller must hold the log's cleaning lock (``Log.compact`` does), so no
other retention or compaction pass touches these segments; appends go on meanwhile (they
never touch closed segments).
"""

from __future__ import annotations

import os
from collections import deque
from typing import Callable, Iterable, Iterator, Optional

from kafkasim.records import record_batch as rb
from kafkasim.records.control import CONTROL_ABORT, CONTROL_COMMIT, decode_control_key
from kafkasim.records.framing import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader, BatchIterator
from kafkasim.storage import layout
from kafkasim.storage.files import storage_errors
from kafkasim.storage.txn_index import AbortedTxn

__all__ = ["compact_segments", "empty_stats"]


def empty_stats() -> dict:
    return {"segments_scanned": 0, "segments_cleaned": 0, "records_read": 0, "records_kept": 0,
            "records_superseded": 0, "tombstones_dropped": 0, "keyless_dropped": 0,
            "bytes_before": 0, "bytes_after": 0, "aborted_dropped": 0, "markers_dropped": 0}


class _TxnFilter:
    """What one pass over the segments (oldest first) knows of transactions: Kafka's
    ``CleanedTransactionMetadata``. ``aborted``: the aborted transactions overlapping the
    segments (their ``.txnindex`` entries). Not thread-safe: one per pass."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted, key=lambda t: t.first_offset))
        self._aborted: dict[int, list] = {}        # producer id -> [its aborted txn, a batch of it seen]
        self._committed: set[int] = set()          # producer ids with a batch of a committed txn seen

    def _reach(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            t = self._pending.popleft()
            self._aborted.setdefault(t.producer_id, [t, False])

    def data_batch(self, h: BatchHeader) -> bool:
        """True: ``h`` belongs to an aborted transaction (drop it; it adds no key)."""
        self._reach(h.last_offset)
        if not h.attributes & ATTR_TRANSACTIONAL:
            return False
        entry = self._aborted.get(h.producer_id)
        if entry is not None:
            entry[1] = True
            return True
        self._committed.add(h.producer_id)
        return False

    def marker(self, h: BatchHeader, records: list) -> tuple[bool, Optional[AbortedTxn]]:
        """For a control batch: (may it go, once past the horizon; the ``.txnindex`` entry it keeps)."""
        self._reach(h.last_offset)
        kind = decode_control_key(records[0][2]).type if records else None
        if kind == CONTROL_ABORT:
            entry = self._aborted.pop(h.producer_id, None)
            if entry is not None and entry[1]:
                return False, entry[0]
            return True, None
        if kind == CONTROL_COMMIT:
            if h.producer_id in self._committed:
                self._committed.discard(h.producer_id)
                return False, None
            return True, None
        return False, None


def _batches(path: str, base: int, upper: int, contiguous: bool) -> Iterator[tuple[BatchHeader, bytes, list]]:
    """(header, raw batch bytes, decoded records) for every batch of the closed segment file
    ``path`` holding offsets ``[base, upper)``; a batch that is torn or does not check out
    (CRC, records, or the offset checks of FORMAT.md §2.4: compaction never carries a
    relabelled batch over) raises ``CorruptRecordError``."""
    with storage_errors("open for compaction", path):
        fd = os.open(path, os.O_RDONLY)
    try:
        def read(pos: int, n: int) -> bytes:
            with storage_errors(f"read {n} bytes at position {pos} for compaction of", path):
                return os.pread(fd, n, pos)

        with storage_errors("stat", path):
            size = os.fstat(fd).st_size
        batches = BatchIterator(read, 0, size, where=path, check_crc=False, first_offset=base, end_offset=upper,
                                contiguous=contiguous)
        for pos, h in batches:
            raw = read(pos, h.size)
            rb.verify(raw, 0, h, where=f"{path} (position {pos})")
            yield h, raw, rb.decode_records(raw, 0, h, where=f"{path} (position {pos})")
        batches.raise_error()
    finally:
        os.close(fd)


def compact_segments(segments: list[tuple[int, str]], horizon_ms: int,
                     swap: Callable[[int, str, list[AbortedTxn]], object],
                     end_offset: int = 1 << 63, contiguous_from: int = 1 << 63,
                     aborted: Iterable[AbortedTxn] = ()) -> dict:
    """Compact ``segments`` (``(base offset, path)``, oldest first); steps in the module docstring.

    ``end_offset`` bounds the last segment's offsets (the next segment's base); segments at or
    past ``contiguous_from`` were never compacted, so their offsets must be contiguous.
    Tombstones with a timestamp below ``horizon_ms`` are dropped; ``swap(base, cleaned_path,
    txn_entries)`` replaces a rewritten segment and its ``.txnindex``. ``aborted``: the
    aborted transactions overlapping the segments. Returns the stats (``empty_stats()`` keys).
    """
    aborted = list(aborted)
    stats = empty_stats()
    if not segments:
        return stats
    uppers = [b for b, _ in segments[1:]] + [end_offset]
    bounded = [(base, path, upper, base >= contiguous_from) for (base, path), upper in zip(segments, uppers)]
    latest: dict[bytes, int] = {}
    txns = _TxnFilter(aborted)
    for base, path, upper, contiguous in bounded:
        for h, _, body in _batches(path, base, upper, contiguous):
            if h.attributes & ATTR_CONTROL:
                txns.marker(h, body)
                continue
            if txns.data_batch(h):
                continue
            base = h.base_offset
            for rec in body:
                if rec[2] is not None:
                    latest[rec[2]] = base + rec[0]
    txns = _TxnFilter(aborted)
    for base, path, upper, contiguous in bounded:
        stats["segments_scanned"] += 1
        out: list[bytes] = []
        entries: list[AbortedTxn] = []
        changed = False
        for h, raw, body in _batches(path, base, upper, contiguous):
            stats["records_read"] += len(body)
            stats["bytes_before"] += len(raw)
            if h.attributes & ATTR_CONTROL:
                may_go, entry = txns.marker(h, body)
                if may_go and h.max_timestamp < horizon_ms:
                    stats["markers_dropped"] += 1
                    changed = True
                    continue
                if entry is not None:
                    entries.append(entry)
                stats["records_kept"] += len(body)
                out.append(raw)
                stats["bytes_after"] += len(raw)
                continue
            if txns.data_batch(h):
                stats["aborted_dropped"] += len(body)
                changed = True
                continue
            keep = []
            for delta, tsd, key, value, headers in body:
                off = h.base_offset + delta
                ts = h.base_timestamp + tsd
                if key is None:
                    stats["keyless_dropped"] += 1
                elif latest.get(key) != off:
                    stats["records_superseded"] += 1
                elif value is None and ts < horizon_ms:
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
                                      attributes=h.attributes, last_offset_delta=h.last_offset_delta,
                                      compression=h.attributes & rb.ATTR_COMPRESSION_MASK)
                out.append(new)
                stats["bytes_after"] += len(new)
        if changed:
            cleaned = path + layout.CLEANED_SUFFIX
            with storage_errors("write", cleaned), open(cleaned, "wb") as f:
                f.write(b"".join(out))
                f.flush()
                os.fsync(f.fileno())
            swap(base, cleaned, entries)
            stats["segments_cleaned"] += 1
    return stats
