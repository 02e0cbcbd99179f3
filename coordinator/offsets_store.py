"""The offsets store: committed offsets and group metadata kept in ``__consumer_offsets``.

The store appends records (encoded by :mod:`kafkasim.protocol.offsets`) to the
partition of the internal topic that owns the group (``partition_for_group``) and,
on start, replays every partition from its log start to its log end to rebuild the
latest value of every key. It receives the partition logs from its owner (the broker);
it needs of each only ``append(records)``, ``read_batches(offset, max_bytes)`` (the
stored batches from the one holding ``offset``), ``log_start_offset`` and
``log_end_offset`` (:class:`kafkasim.storage.log.Log`).

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
- control batches (the COMMIT/ABORT markers of transactions that committed group offsets,
  TxnOffsetCommit) are not the store's records and are stepped over, as Kafka's loader does.

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
from kafkasim.errors import CorruptRecordError, IllegalStateError
from kafkasim.records.framing import ATTR_CONTROL
from kafkasim.records.record_batch import iter_records
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

    def store_group(self, group_id: str, value: dict, now_ms: int) -> None:
        self._append(group_id, [(now_ms, encode_group_key(group_id), encode_group_value(value), ())])

    def delete_group(self, group_id: str, partitions: Iterable[TopicPartition], now_ms: int) -> None:
        """Tombstones for the group's metadata and each of its committed offsets."""
        recs = [(now_ms, encode_offset_key(group_id, tp.topic, tp.partition), None, ())
                for tp in partitions]
        recs.append((now_ms, encode_group_key(group_id), None, ()))
        self._append(group_id, recs)

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
            offset, end = log.log_start_offset, log.log_end_offset
            while offset < end:
                batches = log.read_batches(offset, _READ_BYTES)
                next_offset = batches[-1][0].last_offset + 1 if batches else end
                if next_offset <= offset:   # cannot happen below the log end: never spin
                    raise IllegalStateError(f"{OFFSETS_TOPIC}: a read at offset {offset} below the log end "
                                            f"{end} did not advance")
                records = [rec for h, raw in batches if not h.attributes & ATTR_CONTROL
                           for rec in iter_records(raw, 0, h, min_offset=offset)]
                offset = next_offset
                for rec in records:
                    try:
                        self._apply(state, rec.key, rec.value)
                    except CorruptRecordError as exc:   # not written by us: report, skip
                        warnings.warn(f"{OFFSETS_TOPIC} offset {rec.offset}: skipped: {exc}",
                                      RuntimeWarning, stacklevel=2)
                        state.skipped += 1
        return state

    @staticmethod
    def _apply(state: LoadedState, key: bytes, value: Optional[bytes]) -> None:
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
