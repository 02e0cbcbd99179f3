"""The transaction state store: each transactional id's state kept in ``__transaction_state``.

The store turns the coordinator's :class:`~kafkasim.coordinator.transactions.Persist`
effects into records of the internal topic — Kafka's own bytes, ``TransactionLogKey`` and
``TransactionLogValue`` (:mod:`kafkasim.protocol.txn_log`; a tombstone for an expired id) —
appended to the partition that owns the id (``partition_for_transactional_id``), and on
start replays every partition from its log start to its log end, the latest record per id
winning, to rebuild what :meth:`TransactionCoordinator.load` takes. As
:class:`~kafkasim.coordinator.offsets_store.OffsetsStore` does for groups, it needs of each
log only ``append(records)``, ``fetch(offset, max_bytes)``, ``log_start_offset`` and
``log_end_offset``.

Invariants: an append returns only once the log accepted the record, so a transition the
coordinator answered is in the log; a record that does not decode is reported as a
RuntimeWarning and skipped, never stopping the coordinator from loading.

Thread-safety: none of its own; the broker calls it under the coordinator's lock.
"""

from __future__ import annotations

import warnings
from typing import Optional, Sequence

from kafkasim.coordinator.txn_metadata import TxnState, TxnTransitMetadata
from kafkasim.errors import CorruptRecordError, IllegalStateError
from kafkasim.protocol.txn_log import (
    TRANSACTION_STATE_TOPIC, TxnLogValue, decode_txn_record, encode_txn_key, encode_txn_value,
    partition_for_transactional_id,
)
from kafkasim.types import TopicPartition

__all__ = ["TxnStateStore", "to_log_value", "from_log_value"]

_READ_BYTES = 4 * 1024 * 1024


def to_log_value(t: TxnTransitMetadata) -> TxnLogValue:
    """The ``TransactionLogValue`` of a transition (partitions null in Empty, as Kafka writes)."""
    parts = None
    if t.state is not TxnState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(t.topic_partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        parts = tuple((topic, tuple(ps)) for topic, ps in by_topic.items())
    return TxnLogValue(t.producer_id, t.producer_epoch, t.txn_timeout_ms, int(t.state), parts,
                       t.txn_last_update_timestamp, t.txn_start_timestamp, t.previous_producer_id,
                       t.next_producer_id, t.client_transaction_version)


def from_log_value(v: TxnLogValue) -> TxnTransitMetadata:
    """The transition a loaded record stands for (``last_producer_epoch`` is not stored: -1)."""
    tps = frozenset(TopicPartition(topic, p) for topic, ps in (v.transaction_partitions or ()) for p in ps)
    return TxnTransitMetadata(v.producer_id, v.previous_producer_id, v.next_producer_id, v.producer_epoch, -1,
                              v.transaction_timeout_ms, TxnState(v.transaction_status), tps,
                              v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms,
                              v.client_transaction_version)


class TxnStateStore:
    """Reads and writes transaction state in ``__transaction_state``'s partition logs."""

    def __init__(self, logs: Optional[Sequence] = None, value_version: int = 0) -> None:
        self._logs = list(logs) if logs is not None else None
        self.num_partitions = len(self._logs) if self._logs else 50
        self.value_version = value_version   # 0 while transaction.version is below 1 (Kafka)

    def partition_for(self, transactional_id: str) -> int:
        return partition_for_transactional_id(transactional_id, self.num_partitions)

    def write(self, transactional_id: str, value: Optional[TxnTransitMetadata], now_ms: int) -> None:
        """Append the record of one transition (None: a tombstone, the id expired)."""
        if self._logs is None:
            return
        encoded = None if value is None else encode_txn_value(to_log_value(value), self.value_version)
        self._logs[self.partition_for(transactional_id)].append(
            [(now_ms, encode_txn_key(transactional_id), encoded, ())])

    def load(self) -> dict[str, TxnTransitMetadata]:
        """Replay every partition: each id's latest state (tombstoned ids left out)."""
        state: dict[str, Optional[TxnTransitMetadata]] = {}
        if self._logs is None:
            return {}
        for log in self._logs:
            offset, end = log.log_start_offset, log.log_end_offset
            while offset < end:
                records, next_offset = log.fetch(offset, _READ_BYTES)
                if next_offset <= offset:
                    raise IllegalStateError(f"{TRANSACTION_STATE_TOPIC}: a read at offset {offset} below the "
                                            f"log end {end} did not advance")
                offset = next_offset
                for rec in records:
                    try:
                        key, value = decode_txn_record(rec.key, rec.value)
                    except CorruptRecordError as exc:
                        warnings.warn(f"{TRANSACTION_STATE_TOPIC} offset {rec.offset}: skipped: {exc}",
                                      RuntimeWarning, stacklevel=2)
                        continue
                    if key.is_unknown:
                        continue
                    state[key.transactional_id] = None if value is None else from_log_value(value)
        return {tid: v for tid, v in state.items() if v is not None}
