"""The offsets store: committed offsets and group metadata kept in ``__consumer_offsets``.

The store appends records (encoded by :mod:`kafkasim.protocol.offsets`) to the
partition of the internal topic that owns the group (``partition_for_group``) and,
on start, replays every partition from its log start to its log end to rebuild the
latest value of every key. It receives the partition logs from its owner (the broker);
it needs of each only ``append(records)``, ``append_batch(batch, in_transaction=True)``,
``read_batches(offset, max_bytes)`` (whole stored batches from the one holding ``offset``),
``log_start_offset`` and ``log_end_offset``
(:class:`kafkasim.storage.log.Log`).

Invariants:
- an append returns only after the log accepted the batch, so a commit that
  returned is in the log (and survives a process kill; see storage/FORMAT.md §4);
- the replay applies records in offset order, so the latest record per key wins and
  a tombstone (value None) deletes the key, exactly what compaction keeps;
- the replay reaches the log end: it goes on from each read's ``next_offset``, so the
  gaps compaction leaves (inside a batch, at a segment's end) are stepped over, never
  taken for the end;
- a record that does not decode (not written by this store) is reported as a
  RuntimeWarning and skipped; it never stops the coordinator from loading;
- offsets committed in a transaction (TxnOffsetCommit, :meth:`OffsetsStore.store_txn_offsets`)
  are a transactional batch of the producer, as Kafka writes them: the replay holds them
  pending until that producer's marker on the partition (COMMIT applies them, ABORT drops
  them; a control batch is never taken for an offset record); those still pending at the log
  end are ``LoadedState.pending_txn_offsets`` (the transaction is open or prepared: the
  transaction coordinator completes it).

Without logs (``logs=None``) the store keeps nothing and loads nothing: a
coordinator without persistence, for pure state-machine use.

Thread-safety: none of its own; the coordinator calls it under its lock.
"""

from __future__ import annotations

import warnings
from typing import Iterable, Optional, Sequence

from kafkasim.protocol.offsets import (
    OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS, GroupKey, OffsetKey, decode_record, encode_group_key,
    encode_group_value, encode_offset_key, encode_offset_value, partition_for_group,
)
from kafkasim.protocol import consumer_group_log as cgl
from kafkasim.protocol import share_group_log as sgl
from kafkasim.errors import CorruptRecordError, IllegalStateError
from kafkasim.records import record_batch as rb
from kafkasim.records.control import read_control_batch
from kafkasim.types import OffsetAndMetadata, TopicPartition

__all__ = ["OffsetsStore", "LoadedState"]

_READ_BYTES = 4 * 1024 * 1024


class LoadedState:
    """What a replay found: ``groups`` (group -> metadata dict) and ``offsets``
    (group -> {TopicPartition: (OffsetAndMetadata, commit_timestamp)})."""

    def __init__(self) -> None:
        self.groups: dict[str, dict] = {}
        self.offsets: dict[str, dict[TopicPartition, tuple[OffsetAndMetadata, int]]] = {}
        self.skipped = 0   # records that did not decode (reported as warnings)
        self.end_offsets: tuple[int, ...] = ()   # each partition's log end offset at load
        self.pending_txn_offsets: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}
        self.consumer_group_records: dict[bytes, tuple] = {}
        """key bytes -> (CgKey, decoded value): the latest record of each consumer group (KIP-848) key
        (:mod:`kafkasim.protocol.consumer_group_log`); tombstoned keys are absent."""
        self.share_group_records: dict[bytes, tuple] = {}
        """key bytes -> (ShareGroupKey, decoded value): the latest record of each share group (KIP-932)
        key (:mod:`kafkasim.protocol.share_group_log`); tombstoned keys are absent."""
        """producer id -> group -> offsets of a transaction with no marker yet (see the module docstring)."""


class OffsetsStore:
    """Reads and writes group state in the offsets topic's partition logs."""

    def __init__(self, logs: Optional[Sequence] = None) -> None:
        self._logs = list(logs) if logs is not None else None
        self.num_partitions = len(self._logs) if self._logs else OFFSETS_TOPIC_PARTITIONS

    @property
    def persistent(self) -> bool:
        return self._logs is not None

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.num_partitions)

    def _append(self, group_id: str, records: list) -> None:
        if self._logs is None or not records:
            return
        self._logs[self.partition_for(group_id)].append(records)

    def store_offsets(self, group_id: str, offsets: dict, now_ms: int) -> None:
        """Append one batch with an offset commit record per partition."""
        recs = [(now_ms, encode_offset_key(group_id, tp.topic, tp.partition),
                 encode_offset_value(om.offset, om.metadata, now_ms, om.leader_epoch), ())
                for tp, om in offsets.items()]
        self._append(group_id, recs)

    def store_txn_offsets(self, group_id: str, offsets: dict, now_ms: int, producer_id: int,
                          producer_epoch: int) -> None:
        """TxnOffsetCommit: one transactional batch of the producer (no sequence, as Kafka's
        ``GroupMetadataManager.storeOffsets``), made effective by the transaction's marker."""
        if self._logs is None or not offsets:
            return
        recs = [(i, now_ms, encode_offset_key(group_id, tp.topic, tp.partition),
                 encode_offset_value(om.offset, om.metadata, now_ms, om.leader_epoch), ())
                for i, (tp, om) in enumerate(offsets.items())]
        batch = rb.encode_batch(0, recs, producer_id=producer_id, producer_epoch=producer_epoch,
                                base_sequence=rb.NO_SEQUENCE, attributes=rb.ATTR_TRANSACTIONAL)
        self._logs[self.partition_for(group_id)].append_batch(batch, in_transaction=True)

    def store_records(self, group_id: str, records: list, now_ms: int) -> None:
        """Append one batch of ``(key bytes, value bytes or None)`` records of ``group_id`` (the
        consumer group records Kafka's coordinator writes); nothing when there are none."""
        self._append(group_id, [(now_ms, k, v, ()) for k, v in records])

    def store_group(self, group_id: str, value: dict, now_ms: int) -> None:
        self._append(group_id, [(now_ms, encode_group_key(group_id), encode_group_value(value), ())])

    def delete_group(self, group_id: str, partitions: Iterable[TopicPartition], now_ms: int) -> None:
        """Tombstones for the group's metadata and each of its committed offsets."""
        recs = [(now_ms, encode_offset_key(group_id, tp.topic, tp.partition), None, ())
                for tp in partitions]
        recs.append((now_ms, encode_group_key(group_id), None, ()))
        self._append(group_id, recs)

    def delete_group_metadata(self, group_id: str, now_ms: int) -> None:
        """A tombstone for the classic group's metadata record only (its offsets stay): the group
        became a consumer group (Kafka's ``createGroupTombstoneRecords`` of the upgrade)."""
        self._append(group_id, [(now_ms, encode_group_key(group_id), None, ())])

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition], now_ms: int) -> None:
        """One batch of tombstones for these committed offsets of the group (OffsetDelete)."""
        self._append(group_id, [(now_ms, encode_offset_key(group_id, tp.topic, tp.partition), None, ())
                                for tp in partitions])

    def load(self) -> LoadedState:
        """Replay every partition; the latest record per key wins, tombstones delete."""
        state = LoadedState()
        if self._logs is None:
            return state
        state.end_offsets = tuple(log.log_end_offset for log in self._logs)
        for log in self._logs:
            pending: dict[int, list] = {}     # producer id -> its transactional records, in order
            offset, end = log.log_start_offset, log.log_end_offset
            while offset < end:
                batches = log.read_batches(offset, _READ_BYTES)
                next_offset = batches[-1][0].last_offset + 1 if batches else end
                if next_offset <= offset:   # cannot happen below the log end: never spin
                    raise IllegalStateError(f"{OFFSETS_TOPIC}: a read at offset {offset} below the log end "
                                            f"{end} did not advance")
                for h, buf in batches:
                    if h.attributes & rb.ATTR_CONTROL:
                        control = read_control_batch(buf, 0, h, where=OFFSETS_TOPIC)
                        txn = pending.pop(h.producer_id, [])
                        if control is not None and control[0].is_commit:
                            for rec in txn:
                                self._apply_or_warn(state, rec)
                        continue
                    records = list(rb.iter_records(buf, 0, h, where=OFFSETS_TOPIC, min_offset=offset))
                    if h.attributes & rb.ATTR_TRANSACTIONAL:
                        pending.setdefault(h.producer_id, []).extend(records)
                        continue
                    for rec in records:
                        self._apply_or_warn(state, rec)
                offset = next_offset
            for pid, records in pending.items():   # no marker yet: the transaction is still open
                for rec in records:
                    try:
                        k, v = decode_record(rec.key, rec.value)
                    except CorruptRecordError:
                        continue
                    if isinstance(k, OffsetKey) and v is not None:
                        state.pending_txn_offsets.setdefault(pid, {}).setdefault(k.group, {})[
                            TopicPartition(k.topic, k.partition)] = OffsetAndMetadata(v.offset, v.metadata,
                                                                                       v.leader_epoch)
        return state

    def _apply_or_warn(self, state: LoadedState, rec) -> None:
        try:
            self._apply(state, rec.key, rec.value)
        except CorruptRecordError as exc:   # not written by us: report, skip
            warnings.warn(f"{OFFSETS_TOPIC} offset {rec.offset}: skipped: {exc}", RuntimeWarning, stacklevel=3)
            state.skipped += 1

    @staticmethod
    def _apply(state: LoadedState, key: bytes, value: Optional[bytes]) -> None:
        if cgl.is_consumer_group_key(key):
            ck = cgl.decode_key(key)
            if value is None:
                state.consumer_group_records.pop(bytes(key), None)
            else:
                state.consumer_group_records[bytes(key)] = (ck, cgl.decode_value(ck.type, value))
            return
        if sgl.is_share_group_key(key):
            sk = sgl.decode_key(key)
            if value is None:
                state.share_group_records.pop(bytes(key), None)
            else:
                state.share_group_records[bytes(key)] = (sk, sgl.decode_value(sk.type, value))
            return
        k, v = decode_record(key, value)
        if isinstance(k, OffsetKey):
            tp = TopicPartition(k.topic, k.partition)
            per_group = state.offsets.setdefault(k.group, {})
            if v is None:
                per_group.pop(tp, None)
            else:
                per_group[tp] = (OffsetAndMetadata(v.offset, v.metadata, v.leader_epoch),
                                 v.commit_timestamp)
        elif isinstance(k, GroupKey):
            if v is None:
                state.groups.pop(k.group, None)
            else:
                state.groups[k.group] = v
