"""Transactions as the live view reads them from the files: open transactions and each partition's LSO.

Two sources, both only read:

- **the partitions' batches** (:class:`PartitionTxns`, one per partition the view decodes): a
  transactional data batch (attribute 0x10) of producer ``pid`` opens a transaction at its
  base offset unless one is open; a COMMIT/ABORT control batch of ``pid`` closes it. This is
  the log's own fold (:class:`kafkasim.storage.transactions.TxnTracker`, reused here), so the
  view's first unstable offset is the one the broker computes. The partition's **last stable
  offset** is the first offset of its earliest open transaction (at least the log start),
  bounded by the high watermark; the high watermark when none is open (Kafka's LSO);
- **``__transaction_state``** (:class:`TxnStateModel`): each transactional id's latest
  ``TransactionLogValue`` (Kafka's bytes, :mod:`kafkasim.protocol.txn_log`): its producer id
  and epoch, state (``Ongoing``, ``PrepareCommit``, ...), the partitions added to the
  transaction, its start time and timeout. A tombstone forgets the id.

:func:`open_transactions` joins them by producer id: a transaction is open when a partition
holds its data without a marker yet, or when ``__transaction_state`` says ``Ongoing``,
``PrepareCommit`` or ``PrepareAbort`` (partitions added but not written to yet show
``first_offset`` None). The transactional id is known when ``__transaction_state`` maps the
producer id to one (an idempotent producer's id never is, and a data dir whose
``__transaction_state`` is elsewhere shows none).

Worked example: producer 4 (``tx``) writes offsets 10 and 11 of ``t-0`` in a transaction
while offsets 0..9 are committed data; before its COMMIT marker the partition's LEO and high
watermark are 12 and its LSO is 10; the marker goes to offset 12, LEO, high watermark and LSO
become 13, and ``tx`` leaves the list.

Thread-safety: none; the view's poller thread owns these.
"""

from __future__ import annotations

from typing import Any, Optional

from kafkasim.errors import CorruptRecordError
from kafkasim.protocol.txn_log import (
    TXN_STATE_NAMES, TXN_STATE_ONGOING, TXN_STATE_PREPARE_ABORT, TXN_STATE_PREPARE_COMMIT, TxnLogValue,
    decode_txn_record,
)
from kafkasim.records.control import CONTROL_ABORT, CONTROL_COMMIT, decode_control_key
from kafkasim.records.framing import ATTR_CONTROL, BatchHeader
from kafkasim.storage.transactions import TxnTracker

__all__ = ["PartitionTxns", "TxnStateModel", "open_transactions", "last_stable_offset", "is_control", "OPEN_STATES"]

OPEN_STATES = (TXN_STATE_ONGOING, TXN_STATE_PREPARE_COMMIT, TXN_STATE_PREPARE_ABORT)
"""The ``__transaction_state`` states of a transaction not yet complete."""


class PartitionTxns:
    """The open transactions of one partition, from its batches in offset order."""

    def __init__(self) -> None:
        self.tracker = TxnTracker()
        self.started: dict[int, tuple[int, int]] = {}   # pid -> (first batch's timestamp, producer epoch)
        self.problem: Optional[str] = None   # the last control record that did not decode

    @property
    def ongoing(self) -> dict[int, int]:
        """``producer id -> first offset`` of the transactions open here."""
        return self.tracker.ongoing

    def on_data_batch(self, h: BatchHeader) -> None:
        if h.producer_id >= 0 and h.producer_id not in self.tracker.ongoing:
            self.tracker.on_data_batch(h)
            if h.producer_id in self.tracker.ongoing:
                self.started[h.producer_id] = (h.base_timestamp, h.producer_epoch)

    def on_control_batch(self, h: BatchHeader, key: Optional[bytes], where: str) -> Optional[tuple[int, int, bool]]:
        """Note a control batch (its one record's ``key``); returns ``(first offset, marker
        offset, aborted)`` of the transaction it completed, or None (an empty transaction, a
        control record that is no COMMIT/ABORT, or one that does not decode: :attr:`problem`)."""
        try:
            control = decode_control_key(key, where=where)
        except CorruptRecordError as exc:
            self.problem = f"control batch at offset {h.base_offset}: {exc}"
            return None
        if control.type not in (CONTROL_COMMIT, CONTROL_ABORT):
            return None
        done = self.tracker.on_marker(h.producer_id, h.base_offset, control.type)
        self.started.pop(h.producer_id, None)
        if done is None:
            return None
        return done.first_offset, done.last_offset, done.aborted

    def rewind(self, offset: int) -> None:
        """Forget transactions starting at or past ``offset``: the segments from there are read again."""
        self.tracker.truncate_to(offset)
        self.started = {pid: s for pid, s in self.started.items() if pid in self.tracker.ongoing}

    def first_unstable_offset(self, log_start_offset: int) -> Optional[int]:
        """The first offset of the earliest open transaction, at least the log start (as the log's), or None."""
        first = self.tracker.first_unstable_offset()
        return None if first is None else max(first, log_start_offset)


def is_control(h: BatchHeader) -> bool:
    """A control batch (attribute 0x20): a transaction marker, not a record a consumer sees."""
    return bool(h.attributes & ATTR_CONTROL)


def last_stable_offset(txns: Optional[PartitionTxns], log_start_offset: int, high_watermark: int) -> int:
    """Kafka's LSO: the first unstable offset bounded by the high watermark, else the high watermark."""
    unstable = txns.first_unstable_offset(log_start_offset) if txns is not None else None
    return high_watermark if unstable is None else min(unstable, high_watermark)


class TxnStateModel:
    """Each transactional id's latest state, folded from ``__transaction_state`` records in offset order."""

    def __init__(self) -> None:
        self.ids: dict[str, TxnLogValue] = {}
        self.problems: list[str] = []

    def apply(self, key: Optional[bytes], value: Optional[bytes], where: str) -> None:
        """Fold one record; one that does not decode is reported (kept in :attr:`problems`) and skipped."""
        if key is None:
            return
        try:
            rec = decode_txn_record(bytes(key), None if value is None else bytes(value))
        except CorruptRecordError as exc:
            self.problems.append(f"undecodable record in {where}: {exc}")
            del self.problems[:-5]
            return
        if rec.key.is_unknown:
            return
        if rec.value is None:
            self.ids.pop(rec.key.transactional_id, None)
        else:
            self.ids[rec.key.transactional_id] = rec.value

    @property
    def newest_timestamp(self) -> Optional[int]:
        return max((v.transaction_last_update_timestamp_ms for v in self.ids.values()), default=None)


def open_transactions(partitions: dict[tuple[str, int], PartitionTxns], state: TxnStateModel,
                      log_starts: dict[tuple[str, int], int], ref_ms: int) -> list[dict[str, Any]]:
    """The open transactions, one per producer id, oldest first (see the module docstring).

    ``partitions`` holds the fold of each data partition, ``log_starts`` its log start offset
    (an open transaction's offsets deleted by retention start at the log start), and
    ``ref_ms`` is the time "open for" is counted to.
    """
    by_pid: dict[int, dict[str, Any]] = {}

    def entry(pid: int) -> dict[str, Any]:
        e = by_pid.get(pid)
        if e is None:
            e = by_pid[pid] = {"producer_id": pid, "producer_epoch": None, "transactional_id": None,
                               "state": None, "timeout_ms": None, "started_ms": None, "partitions": {}}
        return e

    for tp, txns in partitions.items():
        for pid, first in txns.ongoing.items():
            e = entry(pid)
            ts, epoch = txns.started.get(pid, (None, None))
            e["partitions"][tp] = {"topic": tp[0], "partition": tp[1],
                                   "first_offset": max(first, log_starts.get(tp, 0)), "first_timestamp": ts}
            if epoch is not None:
                e["producer_epoch"] = epoch if e["producer_epoch"] is None else max(e["producer_epoch"], epoch)
    named: dict[int, tuple[str, TxnLogValue]] = {}
    for tid, v in sorted(state.ids.items()):
        known = named.get(v.producer_id)
        if known is None or v.producer_epoch >= known[1].producer_epoch:
            named[v.producer_id] = (tid, v)
        if v.transaction_status in OPEN_STATES:
            e = entry(v.producer_id)
            for topic, ps in v.transaction_partitions or ():
                for p in ps:
                    e["partitions"].setdefault((topic, p), {"topic": topic, "partition": p, "first_offset": None,
                                                            "first_timestamp": None})
    out = []
    for pid, e in by_pid.items():
        tid, v = named.get(pid, (None, None))
        started = min((x["first_timestamp"] for x in e["partitions"].values() if x["first_timestamp"] is not None),
                      default=None)
        if v is not None:
            e["transactional_id"] = tid
            e["state"] = TXN_STATE_NAMES.get(v.transaction_status, str(v.transaction_status))
            e["timeout_ms"] = v.transaction_timeout_ms
            if e["producer_epoch"] is None:
                e["producer_epoch"] = v.producer_epoch
            if v.transaction_status in OPEN_STATES and v.transaction_start_timestamp_ms >= 0:
                started = v.transaction_start_timestamp_ms     # the coordinator's start: the first AddPartitions
        e["started_ms"] = started
        e["open_ms"] = None if started is None else max(0, ref_ms - started)
        e["partitions"] = [e["partitions"][tp] for tp in sorted(e["partitions"])]
        out.append(e)
    return sorted(out, key=lambda e: (e["started_ms"] is None, e["started_ms"] or 0, e["producer_id"]))
