"""A share fetch's answer as records: the acquired offsets of the stored batches, decoded once.

A ShareFetch answer (``kafkasim.protocol.share_group.ShareFetchPartition``) carries whole
stored v2 batches, as the log holds them, and the offset ranges this member acquired
(``AcquiredRecords``: first offset, last offset, delivery count). :func:`acquired_records`
turns one partition's answer into :class:`ShareConsumerRecord` s the way Kafka's
``ShareCompletedFetch`` does:

1. the acquired ranges are expanded to ``offset -> delivery count``;
2. the batches are walked through :mod:`kafkasim.records` (the one reader of the format);
   control batches (transaction markers) are never returned;
3. a record whose offset was acquired becomes a ``ShareConsumerRecord`` carrying its
   delivery count; a record that was not acquired (another member holds it, or it was
   acknowledged already) is skipped;
4. an acquired offset with no data record (a compaction gap, a marker) is a **gap**: the
   caller acknowledges it with ``GAP`` (Kafka's ``ShareInFlightBatch.addGap``), so the
   share-partition can move past it.

Example: batches holding offsets 0-4, acquired ``[(1, 2, delivery_count=1), (4, 5, 2)]``
give the records 1, 2 (count 1) and 4 (count 2), and the gap ``[5]``.

Pure functions over bytes; thread-safe.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Sequence

from kafkasim.consumer.fetcher import CREATE_TIME, LOG_APPEND_TIME
from kafkasim.records.record_batch import ATTR_CONTROL, ATTR_TIMESTAMP_TYPE_LOG_APPEND, decode_columns, \
    iter_batches

__all__ = ["ShareConsumerRecord", "acquired_records"]


class ShareConsumerRecord(NamedTuple):
    """One record as ``ShareConsumer.poll()`` returns it: the fields of
    :class:`~kafkasim.consumer.fetcher.ConsumerRecord`, in its order, then ``delivery_count``
    (how many times this record has been acquired, this time included: 1 on the first
    delivery; Java's ``ConsumerRecord.deliveryCount()``). ``leader_epoch`` is the partition
    leader epoch of the record's batch."""

    topic: str
    partition: int
    leader_epoch: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: Sequence
    checksum: Optional[int]
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int
    delivery_count: int


def _size(b) -> int:
    return -1 if b is None else len(b)


def acquired_records(topic: str, partition: int, records: bytes, acquired: Sequence, *,
                     key_deserializer: Optional[Callable] = None,
                     value_deserializer: Optional[Callable] = None) -> tuple[list[ShareConsumerRecord], list[int]]:
    """The records of ``records`` (stored batches) whose offsets ``acquired`` (``AcquiredRecords``)
    names, in offset order, and the acquired offsets that hold no data record (gaps), sorted.
    See the module docstring; a corrupt batch raises ``CorruptRecordError`` naming it."""
    counts: dict[int, int] = {}
    for a in acquired:
        for off in range(a.first_offset, a.last_offset + 1):
            counts[off] = a.delivery_count
    out: list[ShareConsumerRecord] = []
    found: set[int] = set()
    where = f"share fetch {topic}-{partition}"
    if counts and records:
        lo, hi = min(counts), max(counts)
        for pos, h in iter_batches(records, where=where):
            if h.last_offset < lo or h.base_offset > hi or h.attributes & ATTR_CONTROL:
                continue
            ts_type = LOG_APPEND_TIME if h.attributes & ATTR_TIMESTAMP_TYPE_LOG_APPEND else CREATE_TIME
            deltas, tsds, keys, values, headers = decode_columns(records, pos, h, where=where)
            for delta, tsd, key, value, hd in zip(deltas, tsds, keys, values, headers):
                off = h.base_offset + delta
                count = counts.get(off)
                if count is None or off in found:
                    continue
                found.add(off)
                hsize = sum(len(k.encode("utf-8")) + (0 if v is None else len(v)) for k, v in hd) if hd else -1
                out.append(ShareConsumerRecord(
                    topic, partition, h.partition_leader_epoch, off, h.base_timestamp + tsd, ts_type,
                    key_deserializer(key) if key_deserializer is not None else key,
                    value_deserializer(value) if value_deserializer is not None else value,
                    hd, None, _size(key), _size(value), hsize, count))
    out.sort(key=lambda r: r.offset)
    gaps = sorted(off for off in counts if off not in found)
    return out, gaps
