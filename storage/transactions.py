"""The transactions open in one partition's log, and what their markers leave behind (Kafka's ``ProducerStateManager``, transaction part).

The log appends three kinds of batch that matter here (txn facts §3.2, §4.1):

- a **transactional data batch** (attribute 0x10) of producer ``pid``: if ``pid`` has no
  open transaction, one starts at the batch's base offset;
- a **control batch** (attributes 0x30, one COMMIT or ABORT record) of ``pid``: the
  transaction is complete. An ABORT of a transaction that wrote data gives one
  :class:`~kafkasim.storage.txn_index.AbortedTxn` for the segment's ``.txnindex``: its first
  offset, the marker's offset, and the LSO once the marker is written (the first offset of
  the earliest other open transaction, else the marker's offset + 1). A marker of a
  producer with no open transaction completes nothing (Kafka skips empty transactions);
- a **non-transactional batch** of a ``pid`` with an open transaction is refused before it
  is written: Kafka's INVALID_TXN_STATE (:meth:`TxnTracker.check_data_batch`).

:meth:`TxnTracker.first_unstable_offset` is the first offset of the earliest open
transaction (None when there is none); the partition's last stable offset is the smaller
of it and the high watermark.

The tracker is rebuilt when a log opens, by walking every batch header from the log start
(:func:`rebuild`; a control batch's one record is read too), so it needs no file of its own;
Kafka's ``.snapshot`` files (``storage/producer_snapshot.py``) are the way to avoid that
walk on very large logs and are not written yet.

Thread-safety: none; the log calls it under its lock.
"""

from __future__ import annotations

from typing import Iterable, Optional

from kafkasim.errors import InvalidTxnStateError
from kafkasim.records.control import CONTROL_ABORT, CONTROL_COMMIT, read_control_batch
from kafkasim.records.framing import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader
from kafkasim.storage.txn_index import AbortedTxn

__all__ = ["TxnTracker", "CompletedTxn"]


class CompletedTxn:
    """What a marker completed: ``producer_id``, ``first_offset`` (the transaction's first
    offset here), ``last_offset`` (the marker's) and ``aborted``; :attr:`aborted_entry` is the
    ``.txnindex`` entry an aborted one needs (``last_stable_offset`` filled by the tracker)."""

    __slots__ = ("producer_id", "first_offset", "last_offset", "aborted", "last_stable_offset")

    def __init__(self, producer_id: int, first_offset: int, last_offset: int, aborted: bool,
                 last_stable_offset: int) -> None:
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.aborted = aborted
        self.last_stable_offset = last_stable_offset

    @property
    def aborted_entry(self) -> AbortedTxn:
        return AbortedTxn(self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)

    def __repr__(self) -> str:
        return (f"CompletedTxn(pid={self.producer_id}, {self.first_offset}..{self.last_offset}, "
                f"{'ABORT' if self.aborted else 'COMMIT'}, lso={self.last_stable_offset})")


class TxnTracker:
    """The open transactions of one partition: ``producer id -> first offset``."""

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}

    def first_unstable_offset(self) -> Optional[int]:
        """The first offset of the earliest open transaction, or None."""
        return min(self.ongoing.values()) if self.ongoing else None

    def check_data_batch(self, h: BatchHeader, partition: str) -> None:
        """Refuse a non-transactional batch of a producer whose transaction is open (Kafka's
        ``ProducerAppendInfo.appendDataBatch``: INVALID_TXN_STATE)."""
        if h.producer_id >= 0 and not h.attributes & ATTR_TRANSACTIONAL and h.producer_id in self.ongoing:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {h.producer_id} at offset in partition "
                f"{partition}: the producer has a transaction open since offset "
                f"{self.ongoing[h.producer_id]}")

    def on_data_batch(self, h: BatchHeader) -> None:
        """Note an appended data batch (its final ``base_offset``)."""
        if h.attributes & ATTR_TRANSACTIONAL and h.producer_id >= 0:
            self.ongoing.setdefault(h.producer_id, h.base_offset)

    def on_marker(self, producer_id: int, offset: int, control_type: int) -> Optional[CompletedTxn]:
        """Note an appended COMMIT/ABORT marker at ``offset``; the completed transaction, or
        None when ``producer_id`` had none open (nothing written: Kafka skips it)."""
        if control_type not in (CONTROL_COMMIT, CONTROL_ABORT):
            return None
        first = self.ongoing.pop(producer_id, None)
        if first is None:
            return None
        others = self.first_unstable_offset()
        lso = others if others is not None else offset + 1
        return CompletedTxn(producer_id, first, offset, control_type == CONTROL_ABORT, lso)

    def truncate_to(self, offset: int) -> None:
        """Forget transactions that start at or past ``offset`` (the caller rebuilds when
        markers below ``offset`` may have been cut, see :func:`rebuild`)."""
        self.ongoing = {pid: first for pid, first in self.ongoing.items() if first < offset}


def rebuild(batches: Iterable[tuple[bytes, int, BatchHeader]], where: str = "<log>") -> tuple[TxnTracker, list]:
    """A tracker from a walk over the log's batches, oldest first: ``(buf, pos, header)`` with
    the header's final base offset (a control batch's record is read from ``buf`` at ``pos``;
    a data batch's ``buf`` may be None). Returns the tracker and the completed aborted
    transactions seen (``(CompletedTxn, marker base offset)``), so an owner can check or
    rebuild ``.txnindex`` files."""
    tracker = TxnTracker()
    aborted = []
    for buf, pos, h in batches:
        if h.attributes & ATTR_CONTROL:
            control = read_control_batch(buf, pos, h, where=where)
            if control is None:
                continue
            done = tracker.on_marker(h.producer_id, h.base_offset, control[0].type)
            if done is not None and done.aborted:
                aborted.append(done)
        else:
            tracker.on_data_batch(h)
    return tracker, aborted
