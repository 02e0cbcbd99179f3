"""Offset commits out of ``__consumer_offsets`` records: the one decoding step of the lag audit.

:func:`commit_rows` turns record batches of ``__consumer_offsets`` (columns ``partition``,
``offset``, ``key``, ``value``) into one row per offset commit (``COMMITS_SCHEMA``): group,
topic, partition, committed offset, metadata, commit time, whether it is a tombstone (a
deleted commit), and where it sits in ``__consumer_offsets`` (``_p``, ``_o``). Records of
other kinds (group metadata, and the consumer group records of KIP-848 groups, Kafka's bytes
of :mod:`kafkasim.protocol.consumer_group_log`) are skipped. The codec is ``kafkasim.protocol.offsets``, the one
codec of that topic. The kafkasim data source's ``mode=commits`` runs it in each scan task
(``lag.read_commits``); :func:`commit_batches` has ``mapInArrow``'s shape for a DataFrame of
those records.

Pure functions; thread-safe.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import pyarrow as pa

__all__ = ["COMMITS_SCHEMA", "ARROW_SCHEMA", "READ_COLUMNS", "commit_rows", "commit_batches"]

COMMITS_SCHEMA = ("group string, topic string, partition int, committed_offset long, metadata string, "
                  "commit_timestamp long, tombstone boolean, _p int, _o long")
ARROW_SCHEMA = pa.schema([
    ("group", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
    ("committed_offset", pa.int64()), ("metadata", pa.string()),
    ("commit_timestamp", pa.int64()), ("tombstone", pa.bool_()), ("_p", pa.int32()), ("_o", pa.int64())])
READ_COLUMNS = ["partition", "offset", "key", "value"]


def commit_rows(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The offset commits among the records of ``batch`` (``READ_COLUMNS``)."""
    from kafkasim.protocol.consumer_group_log import is_consumer_group_key
    from kafkasim.protocol.offsets import OffsetKey, decode_record
    keys, values = batch.column("key").to_pylist(), batch.column("value").to_pylist()
    parts, offs = batch.column("partition").to_pylist(), batch.column("offset").to_pylist()
    rows: dict[str, list] = {f.name: [] for f in ARROW_SCHEMA}
    for k, v, p, o in zip(keys, values, parts, offs):
        if k is None or is_consumer_group_key(k):
            continue
        key, val = decode_record(k, v)
        if not isinstance(key, OffsetKey):
            continue
        for name, x in (("group", key.group), ("topic", key.topic), ("partition", key.partition),
                        ("committed_offset", val.offset if val else None),
                        ("metadata", val.metadata if val else None),
                        ("commit_timestamp", val.commit_timestamp if val else None),
                        ("tombstone", val is None), ("_p", p), ("_o", o)):
            rows[name].append(x)
    return pa.RecordBatch.from_pydict(rows, schema=ARROW_SCHEMA)


def commit_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """:func:`commit_rows` of each batch (``mapInArrow``'s shape), empty ones left out."""
    for b in batches:
        rows = commit_rows(b)
        if rows.num_rows:          # an empty batch ends PySpark's Arrow stream early
            yield rows
