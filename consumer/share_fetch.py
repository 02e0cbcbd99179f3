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

import operator
from bisect import bisect_right
from itertools import repeat
from typing import Any, Callable, NamedTuple, Optional, Sequence

from kafkasim.consumer.fetcher import CREATE_TIME, LOG_APPEND_TIME
from kafkasim.records.record_batch import ATTR_CONTROL, ATTR_TIMESTAMP_TYPE_LOG_APPEND, extend_columns, \
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


_tuple_new = tuple.__new__
_SCR = ShareConsumerRecord


def _header_size(headers) -> int:
    return sum(len(k.encode("utf-8")) + (0 if v is None else len(v)) for k, v in headers)


def _rows(topic: str, partition: int, epoch: int, ts_type: int, cols, counts, kd, vd) -> list[ShareConsumerRecord]:
    """Rows of the columns ``cols`` as records; ``counts`` one delivery count per row (or an
    iterator repeating one). Built with ``tuple.__new__`` inside C iterators, as the
    consumer's fetcher does."""
    offs, tss, keys, values, headers = cols
    ksizes = list(map(len, keys)) if all(keys) else [-1 if k is None else len(k) for k in keys]
    vsizes = list(map(len, values)) if all(values) else [-1 if v is None else len(v) for v in values]
    hsizes = [_header_size(h) if h else -1 for h in headers] if any(headers) else repeat(-1)
    if kd is not None:
        keys = list(map(kd, keys))
    if vd is not None:
        values = list(map(vd, values))
    return list(map(_tuple_new, repeat(_SCR), zip(
        repeat(topic), repeat(partition), repeat(epoch), offs, tss, repeat(ts_type), keys, values,
        headers, repeat(None), ksizes, vsizes, hsizes, counts)))


def acquired_records(topic: str, partition: int, records: bytes, acquired: Sequence, *,
                     key_deserializer: Optional[Callable] = None,
                     value_deserializer: Optional[Callable] = None) -> tuple[list[ShareConsumerRecord], list[int]]:
    """The records of ``records`` (stored batches) whose offsets ``acquired`` (``AcquiredRecords``)
    names, in offset order, and the acquired offsets that hold no data record (gaps), sorted.
    See the module docstring; a corrupt batch raises ``CorruptRecordError`` naming it.

    The hot path: a batch whose offsets all lie in one acquired range (a batch acquired whole,
    Kafka's default) is decoded column-wise (:func:`~kafkasim.records.record_batch.extend_columns`,
    the C codec) and turned into records with no bytecode per record; only a batch split
    between ranges (or partly acquired) is looked up offset by offset."""
    ranges = sorted((a.first_offset, a.last_offset, a.delivery_count) for a in acquired
                    if a.first_offset <= a.last_offset)
    out: list[ShareConsumerRecord] = []
    found: set[int] = set()
    where = f"share fetch {topic}-{partition}"
    counts: Optional[dict[int, int]] = None          # offset -> delivery count, built when a batch is split
    if ranges and records:
        lo, hi = ranges[0][0], max(r[1] for r in ranges)
        firsts = [r[0] for r in ranges]
        for pos, h in iter_batches(records, where=where):
            if h.last_offset < lo or h.base_offset > hi or h.attributes & ATTR_CONTROL:
                continue
            ts_type = LOG_APPEND_TIME if h.attributes & ATTR_TIMESTAMP_TYPE_LOG_APPEND else CREATE_TIME
            cols = ([], [], [], [], [])
            if not extend_columns(cols, records, pos, h, where=where):
                continue
            offs = cols[0]
            i = bisect_right(firsts, offs[0]) - 1
            if i >= 0 and ranges[i][1] >= offs[-1] and found.isdisjoint(offs):
                found.update(offs)
                out.extend(_rows(topic, partition, h.partition_leader_epoch, ts_type, cols, repeat(ranges[i][2]),
                                 key_deserializer, value_deserializer))
                continue
            if counts is None:
                counts = {off: c for first, last, c in ranges for off in range(first, last + 1)}
            keep = [j for j, off in enumerate(offs) if off in counts and off not in found]
            if not keep:
                continue
            picked = tuple([col[j] for j in keep] for col in cols)
            found.update(picked[0])
            out.extend(_rows(topic, partition, h.partition_leader_epoch, ts_type, picked,
                             [counts[off] for off in picked[0]], key_deserializer, value_deserializer))
    out.sort(key=_offset)
    if len(found) == sum(last - first + 1 for first, last, _ in ranges):
        return out, []
    gaps = sorted({off for first, last, _ in ranges for off in range(first, last + 1)} - found)
    return out, gaps


_offset = operator.attrgetter("offset")
