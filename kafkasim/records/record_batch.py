"""Record batches: the records payload of a batch and the one encoder (storage/FORMAT.md §2.2).

This module and :mod:`kafkasim.records.framing` (header, CRC, the batch iterator; its
names are re-exported here) are the only code that turns batches into bytes and back;
the log, the broker, the producer, ``kafkasim dump-log`` and the Spark data source all go
through them. :mod:`kafkasim.records.columns` decodes payloads into Arrow buffers.

Encoding is one family: every entry point (:func:`encode_batch`,
:func:`encode_records_parts`/:func:`encode_records`, :func:`encode_trusted_batch`) packs
the payload with :func:`_pack` and frames it with :func:`_assemble_parts` (header fields,
CRC), so they give the same bytes for the same records.

Invariants (checked by :func:`decode_header` / :func:`verify` / the decoders):
- Offsets in a batch are ``base_offset + offset_delta``; deltas are strictly
  increasing and the last one is at most ``last_offset_delta`` (compaction may
  drop records but never changes a batch's offset range).
- ``timestamp = base_timestamp + timestamp_delta``; ``max_timestamp`` is the largest.

Speed: the per-record loops (packing a batch's records, decoding them into Arrow
buffers) run in the C extension ``kafkasim.records._codec`` when it is built (``pip install``
builds it) and in pure Python otherwise — in the ``--py-files`` zip (zipimport cannot load
a C extension) or with ``KAFKASIM_PURE_PYTHON=1``. Both paths give the same bytes, the
same columns and the same errors; the tests run each against the other.

Thread-safety: pure functions over bytes; safe from any thread.
"""

from __future__ import annotations

import gc
import operator
import os
import struct
import zlib
from typing import Iterator, Optional, Sequence

import msgpack

from kafkasim.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError
from kafkasim.records.framing import (
    ATTR_TIMESTAMP_TYPE_LOG_APPEND, BATCH_OVERHEAD, CRC_OFFSET, CRC_START, HEADER_SIZE, LENGTH_OFFSET, MAGIC,
    MIN_BATCH_LENGTH, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader,
    BatchIterator, batch_size_of, decode_header, iter_batches, set_base_offset, verify,
)
from kafkasim.records.validation import MAX_TIMESTAMP, check_records, check_timestamp
from kafkasim.types import Record

__all__ = [
    "MAGIC", "HEADER_SIZE", "BATCH_OVERHEAD", "LENGTH_OFFSET", "CRC_OFFSET", "CRC_START", "MIN_BATCH_LENGTH",
    "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "NO_SEQUENCE", "NO_PARTITION_LEADER_EPOCH",
    "ATTR_TIMESTAMP_TYPE_LOG_APPEND", "BatchHeader", "BatchIterator", "decode_header", "verify",
    "batch_size_of", "set_base_offset", "iter_batches",
    "encode_batch", "encode_records", "encode_records_parts", "encode_trusted_batch",
    "decode_records", "decode_columns", "iter_records", "C_CODEC",
]

_ATTR_KNOWN = ATTR_TIMESTAMP_TYPE_LOG_APPEND  # compression, transactional, control: always 0 here

_packb = msgpack.Packer(use_bin_type=True, autoreset=True).pack

if os.environ.get("KAFKASIM_PURE_PYTHON"):
    _codec = None
else:
    try:
        from kafkasim.records import _codec
    except ImportError:  # not built (the --py-files zip): the pure-Python path below
        _codec = None

C_CODEC = _codec is not None
"""True when the C fast path (``kafkasim.records._codec``) is in use."""

_first = operator.itemgetter(0)
_second = operator.itemgetter(1)


# -- encoding: thin entry points over one packer and one assembly --------------------------------
def encode_batch(
    base_offset: int,
    records: Sequence[tuple],
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    attributes: int = 0,
    last_offset_delta: Optional[int] = None,
) -> bytes:
    """Encode one batch.

    ``records`` is a sequence of ``(offset_delta, timestamp_ms, key, value, headers)``
    with strictly increasing ``offset_delta`` >= 0, ``key``/``value`` bytes or None and
    ``headers`` a sequence of ``(str, bytes | None)``. ``last_offset_delta`` defaults to
    the last record's delta; it may be larger (a compacted batch keeps its range).
    Checks the deltas and each timestamp (``InvalidTimestampError``); the other fields are
    checked where records enter kafkasim (:mod:`kafkasim.records.validation`), and a
    produced batch is checked again by the broker.

    Example::

        >>> b = encode_batch(0, [(0, 1000, b"k", b"v", ())])
        >>> decode_header(b).record_count, batch_size_of(b) == len(b)
        (1, True)
    """
    return b"".join(_encode(base_offset, records, "checked", producer_id, producer_epoch, base_sequence,
                            partition_leader_epoch, attributes, last_offset_delta)[1])


def encode_records_parts(
    base_offset: int,
    records: Sequence[tuple],
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    attributes: int = 0,
) -> tuple[BatchHeader, tuple[bytes, bytes, bytes]]:
    """:func:`encode_records` without the final copy: ``(header, (head, tail, payload))``.

    ``b"".join(parts)`` is exactly ``encode_records(...)`` and ``header`` is what
    :func:`decode_header` would parse from it; a writer hands the three parts to one
    ``os.pwritev`` so the (large) payload is never copied into a joined buffer.
    Same checks and errors as :func:`encode_records`.
    """
    return _encode(base_offset, records, "records", producer_id, producer_epoch, base_sequence,
                   partition_leader_epoch, attributes, None)


def encode_records(
    base_offset: int,
    records: Sequence[tuple],
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    attributes: int = 0,
) -> bytes:
    """Encode ``(timestamp_ms, key, value, headers)`` tuples as one batch with offset deltas 0..n-1.

    Same bytes as :func:`encode_batch` given deltas ``0, 1, …`` (``headers`` None means no
    headers); the fast path for the log's ``append`` — its per-record work is one tuple.
    Every record is checked by the one record rule (:mod:`kafkasim.records.validation`):
    the C codec packs only records of exactly the allowed types (and a negative timestamp
    is then an ``InvalidTimestampError``); whatever it declines is checked field by field
    (:func:`~kafkasim.records.validation.check_records`) before it is packed.

    Example::

        >>> b = encode_records(0, [(1000, b"k", b"v", ())])
        >>> b == encode_batch(0, [(0, 1000, b"k", b"v", ())])
        True
    """
    return b"".join(_encode(base_offset, records, "records", producer_id, producer_epoch, base_sequence,
                            partition_leader_epoch, attributes, None)[1])


def encode_trusted_batch(
    records: Sequence[tuple],
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """:func:`encode_batch` (base offset 0) for records that are well-formed by construction.

    ``records`` are ``(offset_delta, timestamp_ms, key, value, headers)`` with deltas
    exactly ``0..n-1``, timestamps ints >= 0 and ``headers`` a tuple — as the producer's
    accumulator builds them (``producer/accumulator.py``). Skips encode_batch's per-record
    Python checks; the bytes are identical. The broker still validates every batch it is
    given (``Log.append_batch``), so a caller that breaks the contract gets a rejected
    batch, never a corrupt log.

    Example::

        >>> recs = [(0, 1000, b"k", b"v", ()), (1, 999, None, b"w", ())]
        >>> encode_trusted_batch(recs) == encode_batch(0, recs)
        True
    """
    return b"".join(_encode(0, records, "trusted", producer_id, producer_epoch, base_sequence,
                            NO_PARTITION_LEADER_EPOCH, 0, None)[1])


def _encode(base_offset, records, shape, producer_id, producer_epoch, base_sequence, leader_epoch,
            attributes, last_offset_delta) -> tuple[BatchHeader, tuple[bytes, bytes, bytes]]:
    """The one encoder: check, pack (:func:`_pack`), assemble (:func:`_assemble_parts`)."""
    if not records:
        raise InvalidRecordError("a batch needs at least one record")
    if attributes & ~_ATTR_KNOWN:
        raise InvalidRecordError(f"unsupported batch attributes 0x{attributes:x}")
    payload, first_ts, max_ts, last_delta = _pack(records, shape, last_offset_delta)
    return _assemble_parts(base_offset, leader_epoch, attributes, last_delta, first_ts, max_ts,
                           producer_id, producer_epoch, base_sequence, len(records), payload)


def _pack(records: Sequence[tuple], shape: str, last_offset_delta: Optional[int]) -> tuple[bytes, int, int, int]:
    """The msgpack payload of ``records`` (FORMAT.md §2.2): ``(payload, first_ts, max_ts, last_offset_delta)``.

    ``shape`` says what the records are: ``"checked"`` ``(delta, ts, key, value, headers)``
    with any increasing deltas, each record checked in order (encode_batch); ``"records"``
    ``(ts, key, value, headers)`` with deltas 0..n-1, checked (encode_records); ``"trusted"``
    ``(delta, ts, key, value, headers)`` with deltas 0..n-1, not checked. The last two try
    the C codec first, which returns None for anything outside the common shape (the
    Python path then gives the same bytes or the proper error).
    """
    if shape == "checked":
        first_ts = records[0][1]
        max_ts = first_ts
        prev = -1
        body = []
        for rec in records:
            delta, ts, key, value, headers = rec
            if delta <= prev:
                raise InvalidRecordError(f"offset deltas must increase: {delta} after {prev}")
            if type(ts) is not int or not 0 <= ts <= MAX_TIMESTAMP:
                ts = check_timestamp(ts, f"record at offset delta {delta}: ")
            if ts > max_ts:
                max_ts = ts
            prev = delta
            body.append((delta, ts - first_ts, key, value, headers))
        if last_offset_delta is None:
            last_offset_delta = prev
        elif last_offset_delta < prev:
            raise InvalidRecordError(f"last_offset_delta {last_offset_delta} < last record delta {prev}")
        return _packed(body), first_ts, max_ts, last_offset_delta
    n = len(records)
    if shape == "trusted":
        first_ts = records[0][1]
        packed = _codec.pack_records(records, True) if _codec is not None else None
        if packed is not None:
            return packed[0], first_ts, packed[2], n - 1
        try:
            payload = _packb([(d, ts - first_ts, k, v, h) for d, ts, k, v, h in records])
        except (TypeError, ValueError) as exc:
            raise InvalidRecordError(f"record cannot be encoded: {exc}") from exc
        return payload, first_ts, max(map(_second, records)), n - 1
    packed = _codec.pack_records(records, False) if _codec is not None else None
    if packed is None:
        packed = _pack_delta_records(records)
    else:
        _check_timestamps(records, packed[1])
    return packed[0], records[0][0], packed[2], n - 1


def _packed(body: list) -> bytes:
    try:
        return _packb(body)
    except (TypeError, ValueError) as exc:
        raise InvalidRecordError(f"record cannot be encoded: {exc}") from exc


def _pack_delta_records(records: Sequence[tuple]) -> tuple[bytes, int, int]:
    """The pure-Python ``_codec.pack_records(records, False)``: ``(payload, min_ts, max_ts)``,
    checking shape, then timestamps, then encodability (the order of the errors)."""
    try:
        first_ts = records[0][0]
        body = [(i, ts - first_ts, k, v, h or ()) for i, (ts, k, v, h) in enumerate(records)]
        # min/max over the fresh body (in cache), not the caller's records (a second cold pass)
        min_ts = first_ts + min(map(_second, body))
        max_ts = first_ts + max(map(_second, body))
        if set(map(type, map(_first, records))) != {int}:
            raise TypeError("timestamps must be ints")
    except (TypeError, ValueError, IndexError) as exc:
        bad = next((r for r in records if not isinstance(r, (tuple, list)) or len(r) != 4
                    or not isinstance(r[0], int)), None)
        raise InvalidRecordError(
            f"records must be (timestamp_ms: int, key, value, headers) tuples, got {bad!r:.120}") from exc
    _check_timestamps(records, min_ts)
    # what the C codec declines to pack: check every field by the one record rule
    # (kafkasim.records.validation) before msgpack would pack a str key or a bytearray
    check_records(records)
    return _packed(body), min_ts, max_ts


def _check_timestamps(records: Sequence[tuple], min_ts: int) -> None:
    if min_ts < 0:
        stamps = list(map(_first, records))
        raise InvalidTimestampError(f"negative timestamp {min_ts} at offset delta {stamps.index(min_ts)}")


_TAIL = struct.Struct(">hiqqqhii")   # attributes .. record_count: the CRC'd header fields
_HEAD = struct.Struct(">qiibI")      # base_offset .. crc


def _assemble_parts(base_offset, leader_epoch, attributes, last_offset_delta, first_ts, max_ts,
                    producer_id, producer_epoch, base_sequence, count, payload
                    ) -> tuple[BatchHeader, tuple[bytes, bytes, bytes]]:
    """The header fields and CRC around ``payload``: ``(header, (head, tail, payload))``."""
    try:
        tail = _TAIL.pack(attributes, last_offset_delta, first_ts, max_ts,
                          producer_id, producer_epoch, base_sequence, count)
    except struct.error as exc:   # a field outside its int16/int32/int64 (FORMAT.md §2.1)
        raise InvalidRecordError(
            f"batch header field out of range (producer_id={producer_id!r}, producer_epoch="
            f"{producer_epoch!r}, base_sequence={base_sequence!r}, timestamps {first_ts!r}..{max_ts!r}): "
            f"{exc}") from exc
    crc = zlib.crc32(payload, zlib.crc32(tail))  # incremental: the payload is copied only once
    batch_length = len(tail) + len(payload) + 9
    head = _HEAD.pack(base_offset, batch_length, leader_epoch, MAGIC, crc)
    header = BatchHeader(base_offset, batch_length, leader_epoch, MAGIC, crc, attributes,
                         last_offset_delta, first_ts, max_ts, producer_id, producer_epoch,
                         base_sequence, count)
    return header, (head, tail, payload)


def _assemble(*fields) -> bytes:
    """:func:`_assemble_parts` joined (tests build malformed payloads with it)."""
    return b"".join(_assemble_parts(*fields)[1])


# -- decoding ------------------------------------------------------------------------------------
def decode_records(buf, pos: int, header: BatchHeader, *, where: str = "<buffer>") -> list:
    """Decode the records of a verified batch into raw tuples.

    Returns a list of ``[offset_delta, timestamp_delta, key, value, headers]`` lists
    exactly as stored (FORMAT.md §2.2), checked for shape and count.
    """
    start = pos + HEADER_SIZE
    end = pos + header.size
    try:
        body = msgpack.unpackb(memoryview(buf)[start:end], raw=False, use_list=True,
                               strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise CorruptRecordError(f"{where}: undecodable records in batch at position {pos}: {exc}") from exc
    if not isinstance(body, list) or len(body) != header.record_count:
        raise CorruptRecordError(
            f"{where}: batch at position {pos} says {header.record_count} records, "
            f"payload holds {len(body) if isinstance(body, list) else type(body).__name__}")
    prev = -1
    for rec in body:
        if (not isinstance(rec, list) or len(rec) != 5 or not isinstance(rec[0], int)
                or rec[0] <= prev or rec[0] > header.last_offset_delta):
            raise CorruptRecordError(f"{where}: malformed record {rec!r:.80} in batch at position {pos}")
        prev = rec[0]
    return body


def decode_columns(buf, pos: int, header: BatchHeader, *, where: str = "<buffer>") -> tuple:
    """Decode the records of a verified batch column-wise, for columnar readers.

    Returns five equal-length tuples ``(offset_deltas, timestamp_deltas, keys, values,
    headers)`` (headers as tuples of ``(key, value)`` tuples), with the same checks as
    :func:`decode_records` — record count, five fields per record, increasing deltas
    within ``last_offset_delta`` — but no Python-level loop per record for the common
    uncompacted batch (deltas ``0..n-1``): transposition and checks run in C.
    """
    start = pos + HEADER_SIZE
    end = pos + header.size
    # Unpacking allocates several objects per record and none of them can form a cycle;
    # pausing the cyclic GC meanwhile keeps it from re-scanning the caller's growing
    # columns on every allocation burst (2-5x faster in the Spark reader).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        body = msgpack.unpackb(memoryview(buf)[start:end], raw=False, use_list=False,
                               strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise CorruptRecordError(f"{where}: undecodable records in batch at position {pos}: {exc}") from exc
    finally:
        if gc_was_enabled:
            gc.enable()
    n = header.record_count
    if not isinstance(body, tuple) or len(body) != n:
        raise CorruptRecordError(
            f"{where}: batch at position {pos} says {n} records, "
            f"payload holds {len(body) if isinstance(body, tuple) else type(body).__name__}")
    if n == 0:
        return ((), (), (), (), ())
    try:
        if set(map(type, body)) != {tuple} or set(map(len, body)) != {5}:
            raise ValueError("every record must be an array of 5 fields")
        deltas, tsds, keys, values, headers = zip(*body)
    except (TypeError, ValueError) as exc:
        raise CorruptRecordError(f"{where}: malformed record in batch at position {pos}: {exc}") from None
    if deltas != tuple(range(n)):  # compacted (or corrupt): check the slow way
        prev = -1
        for d in deltas:
            if type(d) is not int or d <= prev or d > header.last_offset_delta:
                raise CorruptRecordError(
                    f"{where}: malformed offset delta {d!r:.40} in batch at position {pos}")
            prev = d
    elif n - 1 > header.last_offset_delta:
        raise CorruptRecordError(
            f"{where}: batch at position {pos} has deltas up to {n - 1} beyond "
            f"last_offset_delta {header.last_offset_delta}")
    return deltas, tsds, keys, values, headers


def iter_records(buf, pos: int, header: BatchHeader, *, where: str = "<buffer>",
                 min_offset: int = 0) -> Iterator[Record]:
    """Yield the :class:`Record` objects of a verified batch with offset >= ``min_offset``."""
    base, ts0 = header.base_offset, header.base_timestamp
    pid, epoch, seq0 = header.producer_id, header.producer_epoch, header.base_sequence
    for delta, tsd, key, value, headers in decode_records(buf, pos, header, where=where):
        off = base + delta
        if off < min_offset:
            continue
        yield Record(off, ts0 + tsd, key, value, tuple(tuple(h) for h in headers) if headers else (),
                     pid, epoch, seq0 + delta if seq0 >= 0 else NO_SEQUENCE)

