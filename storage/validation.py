"""What a batch must pass before the log appends it (Kafka's ``LogValidator``; storage/FORMAT.md §2, §4).

- :func:`validate_batch`: a producer's Kafka v2 batch (``Log.append_batch``), validated in
  place as Kafka's ``LogValidator`` does: header and CRC-32C, size limits, attributes
  (transactional and control batches are not accepted yet), record count against the
  offset range, every record walked without building it (:func:`scan_records`: lengths,
  varints, count, offset deltas ``0..n-1`` as a producer writes them, timestamps in
  [0, 2**63-1]), and keys on a compacted topic. The bytes it returns are the bytes it was
  given, unless the topic's ``compression.type`` names another codec than the batch's
  (then, as Kafka, the records are re-encoded with the topic's codec).
- :func:`encode_for_append`: records handed to ``Log.append``, encoded with the one
  encoder, which checks every record by the one record rule (keys checked first on a
  compacted topic), size limits checked.
- :func:`check_size`: ``max.message.bytes`` (``RecordTooLargeError``) then
  ``segment.bytes`` (``RecordBatchTooLargeError``), with Kafka's messages.
- :func:`stamp_log_append_time`: ``message.timestamp.type=LogAppendTime`` sets the
  timestamp type bit and ``max_timestamp`` in the header and recomputes the CRC, as
  Kafka's ``DefaultRecordBatch.setMaxTimestamp``; the records are not rewritten (readers
  take every record's timestamp from ``max_timestamp``).

Invariant: nothing here touches the log; a batch that passes is whole, CRC-valid and
decodable, so the log only stamps its base offset and partition leader epoch (outside the
CRC) and writes it.

Pure functions; thread-safe.
"""

from __future__ import annotations

import struct
from typing import Sequence

from kafkasim.config import LogConfig
from kafkasim.errors import (
    CorruptRecordError, InvalidRecordError, InvalidTimestampError, RecordBatchTooLargeError, RecordTooLargeError,
)
from kafkasim.records import record_batch as rb
from kafkasim.records.compression import codec_id
from kafkasim.records.framing import BatchHeader, batch_crc
from kafkasim.records.validation import MAX_TIMESTAMP, check_records

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


def validate_batch(batch, config: LogConfig, partition: str, *,
                   in_transaction: bool = False) -> tuple[bytes | memoryview, BatchHeader, None]:
    """``(batch, its header, None)`` of a producer's v2 batch (the view given when it is a
    read-only view of ``bytes``, else bytes), checked in order: header
    and CRC (``CorruptRecordError``), size (:func:`check_size`), attributes, record count,
    the records (``CorruptRecordError`` for malformed ones, ``InvalidRecordError`` for offset
    deltas that are not ``0..n-1``, ``InvalidTimestampError`` for a timestamp outside
    [0, 2**63-1]), keys on a compacted topic (``InvalidRecordError``); then re-encoded only
    when the topic's ``compression.type`` differs from the batch's codec."""
    if not isinstance(batch, (bytes, bytearray, memoryview)):
        raise InvalidRecordError(f"a batch must be bytes, got {type(batch).__name__}")
    if type(batch) is not bytes and not _immutable_view(batch):
        batch = bytes(batch)      # a mutable buffer could change between the checks and the write
    h = rb.decode_header(batch, 0, where="appended batch")
    if h.size != len(batch):
        raise CorruptRecordError(
            f"appended batch: length field says {h.size} bytes, the batch has {len(batch)}")
    rb.verify(batch, 0, h, where="appended batch")
    check_size(len(batch), config, partition)
    if h.attributes & rb.ATTR_CONTROL:
        raise InvalidRecordError(f"{partition}: clients are not allowed to write control batches (transaction markers)")
    if h.attributes & rb.ATTR_TRANSACTIONAL and not in_transaction:
        raise InvalidRecordError(
            f"{partition}: a transactional batch needs its producer's transaction to include this partition "
            f"(transactions are not served by kafkasim yet)")
    if h.attributes & rb.ATTR_TRANSACTIONAL and h.producer_id < 0:
        raise InvalidRecordError(f"{partition}: a transactional batch needs a producer id")
    if h.attributes & ~(rb.ATTR_COMPRESSION_MASK | rb.ATTR_TIMESTAMP_TYPE_LOG_APPEND | rb.ATTR_TRANSACTIONAL):
        raise InvalidRecordError(f"unsupported batch attributes 0x{h.attributes:x}")
    if h.attributes & rb.ATTR_COMPRESSION_MASK > 4:
        raise InvalidRecordError(f"unknown compression codec {h.attributes & rb.ATTR_COMPRESSION_MASK}")
    if h.record_count == 0 or h.record_count != h.last_offset_delta + 1:
        # Kafka's LogValidator: a produced batch's records are numbered 0..n-1
        raise InvalidRecordError(
            f"batch holds {h.record_count} records for an offset range of {h.last_offset_delta + 1} "
            f"in the append to {partition}")
    min_tsd, max_tsd, null_keys, contiguous = rb.scan_records(batch, 0, h, where="appended batch")
    if not contiguous:
        raise InvalidRecordError(f"{partition}: the offset deltas of a produced batch must be 0..{h.record_count - 1}")
    lo, hi = h.base_timestamp + min_tsd, h.base_timestamp + max_tsd
    if lo < 0 or hi > MAX_TIMESTAMP:
        raise InvalidTimestampError(
            f"{partition}: record timestamp {lo if lo < 0 else hi} outside [0, {MAX_TIMESTAMP}]")
    if config.compact and null_keys:
        keys = rb.decode_columns(batch, 0, h, where="appended batch")[2]
        raise InvalidRecordError(
            f"Compacted topic cannot accept message without key in topic partition {partition} "
            f"(record at offset delta {keys.index(None)})")
    target = config.compression_type
    if target != "producer":
        codec = 0 if target == "uncompressed" else codec_id(target)
        if codec != h.attributes & rb.ATTR_COMPRESSION_MASK:
            batch = _recompress(batch, h, codec)
            h = rb.decode_header(batch)
            check_size(len(batch), config, partition)
    return batch, h, None


def _immutable_view(batch) -> bool:
    """Whether ``batch`` is a plain byte view of a ``bytes`` object (a Produce request's
    records, sliced from its frame): nothing can change those bytes, so the batch is checked
    and written from the view, not from a copy (a 1 MB batch is 1 MB less to copy)."""
    return (type(batch) is memoryview and batch.readonly and type(batch.obj) is bytes
            and batch.c_contiguous and batch.itemsize == 1)


def _recompress(batch: bytes, h: BatchHeader, codec: int) -> bytes:
    """The batch with its records under ``codec`` (Kafka re-encodes when the topic's
    ``compression.type`` differs); every header field kept."""
    deltas, tsds, keys, values, headers = rb.decode_columns(batch, 0, h, where="appended batch")
    base = h.base_timestamp
    return rb.encode_batch(
        0, [(d, base + t, k, v, hd) for d, t, k, v, hd in zip(deltas, tsds, keys, values, headers)],
        producer_id=h.producer_id, producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
        attributes=h.attributes & ~rb.ATTR_COMPRESSION_MASK, last_offset_delta=h.last_offset_delta,
        compression=codec)


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
    codec = 0 if config.compression_type in ("producer", "uncompressed") else codec_id(config.compression_type)
    h, parts = rb.encode_records_parts(0, records, producer_id=producer_id, producer_epoch=producer_epoch,
                                       base_sequence=base_sequence, compression=codec)
    check_size(h.size, config, partition)
    return h, parts


_MAX_TS = struct.Struct(">q")


def stamp_log_append_time(batch, h: BatchHeader, cols, now_ms: int) -> tuple[bytes, BatchHeader]:
    """The batch with the LogAppendTime bit set and ``max_timestamp`` = ``now_ms`` (CRC
    recomputed; records untouched), as Kafka's ``setMaxTimestamp(LOG_APPEND_TIME, now)``.
    ``batch`` is bytes or the parts that join to them; ``cols`` is unused (kept for callers)."""
    buf = bytearray(b"".join(batch) if type(batch) is tuple else batch)
    attributes = h.attributes | rb.ATTR_TIMESTAMP_TYPE_LOG_APPEND
    struct.pack_into(">h", buf, 21, attributes)
    _MAX_TS.pack_into(buf, 35, now_ms)
    crc = batch_crc(buf, 0, len(buf))
    struct.pack_into(">I", buf, rb.CRC_OFFSET, crc)
    return bytes(buf), h._replace(attributes=attributes, max_timestamp=now_ms, crc=crc)
