"""What a batch must pass before the log appends it (Kafka's ``LogValidator``; storage/FORMAT.md §2.3, §4).

- :func:`validate_batch`: a producer's encoded batch (``Log.append_batch``): header and
  CRC, size limits, attributes, record count against the offset range, the records
  payload (count, shape, increasing deltas), every record by the one record rule
  (:func:`kafkasim.records.validation.check_columns`: timestamps in [0, 2**63-1], key and
  value bytes or nil, headers (str, bytes | nil) pairs), and keys on a compacted topic.
- :func:`encode_for_append`: records handed to ``Log.append``, encoded with the one
  encoder, which checks every record by the same rule (keys checked first on a
  compacted topic), size limits checked.
- :func:`check_size`: ``max.message.bytes`` (``RecordTooLargeError``) then
  ``segment.bytes`` (``RecordBatchTooLargeError``), with Kafka's messages.
- :func:`stamp_log_append_time`: ``message.timestamp.type=LogAppendTime`` rewrites every
  record's timestamp (payload and CRC re-encoded).

Invariant: nothing here touches the log; a batch that passes is whole, CRC-valid and
decodable, so the log only stamps its base offset (outside the CRC) and writes it.

Encoding and decoding a batch allocates one or two tuples per record, and CPython's cyclic
garbage collector runs a collection every 700 container allocations; on these paths that
costs about a third of the time, for objects that cannot form cycles. So, as Mercurial's
``util.nogc`` does, the collector is paused for one encode/decode and resumed if it was
enabled (concurrent callers may resume it early, which only costs speed).

Pure functions; thread-safe.
"""

from __future__ import annotations

import gc
from itertools import repeat
from typing import Sequence

from kafkasim.config import LogConfig
from kafkasim.errors import CorruptRecordError, InvalidRecordError, RecordBatchTooLargeError, RecordTooLargeError
from kafkasim.records import record_batch as rb
from kafkasim.records.framing import BatchHeader
from kafkasim.records.validation import check_columns, check_records

__all__ = ["validate_batch", "encode_for_append", "check_size", "stamp_log_append_time"]


def check_size(size: int, config: LogConfig, partition: str) -> None:
    if size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"The record batch size in the append to {partition} is {size} bytes "
            f"which exceeds the maximum configured value of {config.max_message_bytes} (max.message.bytes).")
    if size > config.segment_bytes:
        raise RecordBatchTooLargeError(
            f"Message batch size is {size} bytes in append to partition {partition}, "
            f"which exceeds the maximum configured segment size of {config.segment_bytes} (segment.bytes).")


def validate_batch(batch, config: LogConfig, partition: str) -> tuple[bytes, BatchHeader, tuple]:
    """``(batch as bytes, its header, its decode_columns)`` of a producer's batch, checked in
    order: header and CRC (``CorruptRecordError``), size (:func:`check_size`), attributes,
    record count and payload, every record's fields (``InvalidTimestampError`` /
    ``InvalidRecordError`` naming the record's offset delta), keys on a compacted topic
    (``InvalidRecordError``)."""
    if not isinstance(batch, (bytes, bytearray, memoryview)):
        raise InvalidRecordError(f"a batch must be bytes, got {type(batch).__name__}")
    batch = bytes(batch)
    h = rb.decode_header(batch, 0, where="appended batch")
    if h.size != len(batch):
        raise CorruptRecordError(
            f"appended batch: length field says {h.size} bytes, the batch has {len(batch)}")
    rb.verify(batch, 0, h, where="appended batch")
    check_size(len(batch), config, partition)
    if h.attributes & ~rb.ATTR_TIMESTAMP_TYPE_LOG_APPEND:
        raise InvalidRecordError(f"unsupported batch attributes 0x{h.attributes:x}")
    if h.record_count == 0 or h.record_count > h.last_offset_delta + 1:
        raise InvalidRecordError(
            f"batch holds {h.record_count} records for an offset range of {h.last_offset_delta + 1}")
    gc_was_enabled = gc.isenabled()
    gc.disable()  # see the module docstring
    try:
        # the same checks as decode_records (count, shape, deltas), transposed in C
        cols = rb.decode_columns(batch, 0, h, where="appended batch")
    finally:
        if gc_was_enabled:
            gc.enable()
    check_columns(h.base_timestamp, *cols, where=f"{partition}: ")
    if config.compact and None in cols[2]:
        delta = cols[0][cols[2].index(None)]
        raise InvalidRecordError(
            f"Compacted topic cannot accept message without key in topic partition "
            f"{partition} (record at offset delta {delta})")
    return batch, h, cols


def encode_for_append(records: Sequence[tuple], config: LogConfig, partition: str, producer_id: int,
                      producer_epoch: int, base_sequence: int) -> tuple[BatchHeader, tuple[bytes, bytes, bytes]]:
    """``(header, (head, tail, payload))`` of ``(timestamp_ms, key, value, headers)`` records
    as one batch (``encode_records_parts``: the segment writes the parts with one
    ``pwritev``, so the payload is never copied into a joined buffer)."""
    if type(records) is not list and type(records) is not tuple:
        records = check_records(records)      # any other iterable, or the error naming it
    if not records:
        raise InvalidRecordError("append needs at least one record, got none")
    if config.compact:
        for i, r in enumerate(records):
            if isinstance(r, (tuple, list)) and len(r) == 4 and r[1] is None:
                raise InvalidRecordError(
                    f"Compacted topic cannot accept message without key in topic partition "
                    f"{partition} (record {i} of the batch)")
    gc_was_enabled = gc.isenabled()
    gc.disable()  # see the module docstring
    try:
        h, parts = rb.encode_records_parts(0, records, producer_id=producer_id,
                                           producer_epoch=producer_epoch, base_sequence=base_sequence)
    finally:
        if gc_was_enabled:
            gc.enable()
    check_size(h.size, config, partition)
    return h, parts


def stamp_log_append_time(batch, h: BatchHeader, cols, now_ms: int) -> tuple[bytes, BatchHeader]:
    """The batch re-encoded with every record's timestamp ``now_ms`` and the LogAppendTime
    attribute. ``batch`` is bytes or the parts that join to them; ``cols`` its
    ``decode_columns`` result when known (else None)."""
    if type(batch) is tuple:
        batch = b"".join(batch)
    if cols is None:
        cols = rb.decode_columns(batch, 0, h)
    deltas, _, keys, values, headers = cols
    batch = rb.encode_batch(0, list(zip(deltas, repeat(now_ms), keys, values, headers)),
                            producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                            base_sequence=h.base_sequence, partition_leader_epoch=h.partition_leader_epoch,
                            attributes=h.attributes | rb.ATTR_TIMESTAMP_TYPE_LOG_APPEND,
                            last_offset_delta=h.last_offset_delta)
    return batch, rb.decode_header(batch)
