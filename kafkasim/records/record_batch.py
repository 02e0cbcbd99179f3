"""Record batches: Kafka's record batch v2 records section, the one encoder and the decoders (storage/FORMAT.md §2).

This module and :mod:`kafkasim.records.framing` (header, CRC-32C, the batch iterator; its
names are re-exported here) are the only code that turns batches into bytes and back;
the log, the broker, the wire server, the producer, ``kafkasim dump-log``, the view and the
Spark data source all go through them. :mod:`kafkasim.records.columns` decodes records
into Arrow buffers.

The records section of a batch is Kafka's ``DefaultRecord`` list, compressed as one block
when the attributes name a codec (:mod:`kafkasim.records.compression`)::

    record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
            | keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value
            | headerCount varint | [keyLength varint | key (UTF-8) | valueLength varint | value]

(varints zigzag-encoded, as protobuf's sint32/sint64; timestamp deltas relative to the
header's ``base_timestamp``.)

Encoding is one family: every entry point (:func:`encode_batch`,
:func:`encode_records_parts`/:func:`encode_records`, :func:`encode_trusted_batch`) packs
the records section with :func:`_pack`, compresses it when asked, and frames it with
:func:`_assemble_parts` (header fields, CRC-32C), so they give the same bytes for the same
records — the bytes Kafka's own ``MemoryRecordsBuilder`` (and kafka-python's
``DefaultRecordBatchBuilder``) write.

Invariants (checked by :func:`decode_header` / :func:`verify` / the decoders, which raise
:class:`CorruptRecordError` naming the batch and never anything else on hostile input):
- Offsets in a batch are ``base_offset + offset_delta``; deltas are strictly
  increasing and the last one is at most ``last_offset_delta`` (compaction may
  drop records but never changes a batch's offset range).
- ``timestamp = base_timestamp + timestamp_delta``, except in a LogAppendTime batch
  (attribute 0x08), where every record's timestamp is the header's ``max_timestamp``.
- Each record's length covers exactly its fields; the section holds exactly
  ``record_count`` records and nothing more; a compressed section inflates to at most
  :data:`MAX_UNCOMPRESSED` bytes.

Speed: the per-record loops (packing records, decoding them into tuples or Arrow buffers,
scanning a produced batch) run in the C extension ``kafkasim.records._codec`` when it is
built (``pip install`` builds it) and in pure Python otherwise — in the ``--py-files`` zip
(zipimport cannot load a C extension) or with ``KAFKASIM_PURE_PYTHON=1``. Both paths give
the same bytes, the same columns and the same errors; the tests run each against the other
and against kafka-python's reader.

The module is over 500 lines because it is the whole format in one place: the encoder
family, the decoders and the pure-Python reference of the C codec, which must change
together.

Thread-safety: pure functions over bytes; safe from any thread.
"""

from __future__ import annotations

import gc
import operator
import os
import struct
from itertools import repeat
from typing import Iterator, Optional, Sequence

import crc32c as _crc32c

from kafkasim.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError
from kafkasim.records.compression import COMPRESSION_NONE, compress, decompress
from kafkasim.records.framing import (
    ATTR_COMPRESSION_MASK, ATTR_CONTROL, ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE_LOG_APPEND, ATTR_TRANSACTIONAL,
    BATCH_OVERHEAD, CRC_OFFSET, CRC_START, HEADER_SIZE, LENGTH_OFFSET, MAGIC, MIN_BATCH_LENGTH,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader, BatchIterator,
    batch_size_of, decode_header, iter_batches, set_base_offset, verify,
)
from kafkasim.records.validation import MAX_TIMESTAMP, check_record, check_records, check_timestamp
from kafkasim.types import Record

__all__ = [
    "MAGIC", "HEADER_SIZE", "BATCH_OVERHEAD", "LENGTH_OFFSET", "CRC_OFFSET", "CRC_START", "MIN_BATCH_LENGTH",
    "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "NO_SEQUENCE", "NO_PARTITION_LEADER_EPOCH",
    "ATTR_COMPRESSION_MASK", "ATTR_TIMESTAMP_TYPE_LOG_APPEND", "ATTR_TRANSACTIONAL", "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON", "BatchHeader", "BatchIterator", "decode_header", "verify",
    "batch_size_of", "set_base_offset", "iter_batches", "MAX_UNCOMPRESSED",
    "encode_batch", "encode_records", "encode_records_parts", "encode_trusted_batch",
    "records_section", "timestamp_delta_override", "scan_records",
    "decode_records", "decode_columns", "extend_columns", "iter_records", "C_CODEC",
]

MAX_UNCOMPRESSED = 256 * 1024 * 1024
"""The most bytes a compressed records section may inflate to (a bound on decompression bombs)."""

_ATTR_WRITABLE = (ATTR_COMPRESSION_MASK | ATTR_TIMESTAMP_TYPE_LOG_APPEND | ATTR_TRANSACTIONAL | ATTR_CONTROL
                  | ATTR_DELETE_HORIZON)
"""The attribute bits an encoder may set (FORMAT.md §2.1): every bit Kafka defines. Whether a
produced batch may carry the transactional or control bit is the broker's check
(storage/validation.py), not the encoder's; control batches are written by
:mod:`kafkasim.records.control`."""
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

if os.environ.get("KAFKASIM_PURE_PYTHON"):
    _codec = None
else:
    try:
        from kafkasim.records import _codec
    except ImportError:  # not built (the --py-files zip): the pure-Python path below
        _codec = None
    if _codec is not None and not hasattr(_codec, "scan_records"):
        _codec = None    # a stale build of the msgpack-era extension: never mix formats

C_CODEC = _codec is not None
"""True when the C fast path (``kafkasim.records._codec``) is in use."""


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
    compression: int = COMPRESSION_NONE,
) -> bytes:
    """Encode one batch.

    ``records`` is a sequence of ``(offset_delta, timestamp_ms, key, value, headers)``
    with strictly increasing ``offset_delta`` >= 0, ``key``/``value`` bytes or None and
    ``headers`` a sequence of ``(str, bytes | None)``. ``last_offset_delta`` defaults to
    the last record's delta; it may be larger (a compacted batch keeps its range).
    ``compression`` is the codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd) written into
    the attributes and applied to the records section.
    Checks the deltas and each timestamp (``InvalidTimestampError``); the other fields are
    checked where records enter kafkasim (:mod:`kafkasim.records.validation`), and a
    produced batch is checked again by the broker.

    Example::

        >>> b = encode_batch(0, [(0, 1000, b"k", b"v", ())])
        >>> decode_header(b).record_count, decode_header(b).magic, batch_size_of(b) == len(b)
        (1, 2, True)
    """
    return b"".join(_encode(base_offset, records, "checked", producer_id, producer_epoch, base_sequence,
                            partition_leader_epoch, attributes, last_offset_delta, compression)[1])


def encode_records_parts(
    base_offset: int,
    records: Sequence[tuple],
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    attributes: int = 0,
    compression: int = COMPRESSION_NONE,
) -> tuple[BatchHeader, tuple[bytes, bytes, bytes]]:
    """:func:`encode_records` without the final copy: ``(header, (head, tail, section))``.

    ``b"".join(parts)`` is exactly ``encode_records(...)`` and ``header`` is what
    :func:`decode_header` would parse from it; a writer hands the three parts to one
    ``os.pwritev`` so the (large) records section is never copied into a joined buffer.
    Same checks and errors as :func:`encode_records`.
    """
    return _encode(base_offset, records, "records", producer_id, producer_epoch, base_sequence,
                   partition_leader_epoch, attributes, None, compression)


def encode_records(
    base_offset: int,
    records: Sequence[tuple],
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    attributes: int = 0,
    compression: int = COMPRESSION_NONE,
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
                            partition_leader_epoch, attributes, None, compression)[1])


def encode_trusted_batch(
    records: Sequence[tuple],
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    compression: int = COMPRESSION_NONE,
    attributes: int = 0,
) -> bytes:
    """:func:`encode_batch` (base offset 0) for records that are well-formed by construction.

    ``records`` are ``(offset_delta, timestamp_ms, key, value, headers)`` with deltas
    exactly ``0..n-1``, timestamps ints >= 0 and ``headers`` a tuple — as the producer's
    accumulator builds them (``producer/accumulator.py``). Skips encode_batch's per-record
    Python checks; the bytes are identical. The broker still validates every batch it is
    given (``Log.append_batch``), so a caller that breaks the contract gets a rejected
    batch, never a corrupt log. ``attributes``: as :func:`encode_batch`'s (the transactional
    producer sets ``ATTR_TRANSACTIONAL``); the codec bits come from ``compression``.

    Example::

        >>> recs = [(0, 1000, b"k", b"v", ()), (1, 999, None, b"w", ())]
        >>> encode_trusted_batch(recs) == encode_batch(0, recs)
        True
    """
    return b"".join(_encode(0, records, "trusted", producer_id, producer_epoch, base_sequence,
                            NO_PARTITION_LEADER_EPOCH, attributes, None, compression)[1])


def _encode(base_offset, records, shape, producer_id, producer_epoch, base_sequence, leader_epoch,
            attributes, last_offset_delta, compression) -> tuple[BatchHeader, tuple[bytes, bytes, bytes]]:
    """The one encoder: check, pack (:func:`_pack`), compress, assemble (:func:`_assemble_parts`)."""
    if not records:
        raise InvalidRecordError("a batch needs at least one record")
    if type(attributes) is not int or attributes & ~_ATTR_WRITABLE:
        raise InvalidRecordError(f"unsupported batch attributes {attributes!r}")
    if type(compression) is not int or not 0 <= compression <= 4:
        raise InvalidRecordError(f"unknown compression codec {compression!r} (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)")
    section, first_ts, max_ts, last_delta = _pack(records, shape, last_offset_delta)
    if compression:
        section = compress(compression, section)
    attributes = (attributes & ~ATTR_COMPRESSION_MASK) | compression
    return _assemble_parts(base_offset, leader_epoch, attributes, last_delta, first_ts, max_ts,
                           producer_id, producer_epoch, base_sequence, len(records), section)


def _pack(records: Sequence[tuple], shape: str, last_offset_delta: Optional[int]) -> tuple[bytes, int, int, int]:
    """The records section of ``records``: ``(section, first_ts, max_ts, last_offset_delta)``.

    ``shape`` says what the records are: ``"checked"`` ``(delta, ts, key, value, headers)``
    with any increasing deltas, each record checked in order (encode_batch); ``"records"``
    ``(ts, key, value, headers)`` with deltas 0..n-1, checked (encode_records); ``"trusted"``
    ``(delta, ts, key, value, headers)`` with deltas 0..n-1, not checked. The C codec is
    tried first for the last two and returns None for anything outside the common shape
    (the Python path then gives the same bytes or the proper error).
    """
    if shape == "checked":
        first_ts = records[0][1]
        max_ts = first_ts
        prev = -1
        body = bytearray()
        for rec in records:
            delta, ts, key, value, headers = rec
            if type(delta) is not int or delta <= prev:
                raise InvalidRecordError(f"offset deltas must increase: {delta!r} after {prev}")
            if type(ts) is not int or not 0 <= ts <= MAX_TIMESTAMP:
                ts = check_timestamp(ts, f"record at offset delta {delta}: ")
            if ts > max_ts:
                max_ts = ts
            prev = delta
            try:
                _put_record(body, delta, ts - first_ts, key, value, headers)
            except InvalidRecordError:
                # name the record and the field by the one record rule
                check_record(ts, key, value, headers, f"record at offset delta {delta}: ")
                raise
        if last_offset_delta is None:
            last_offset_delta = prev
        elif last_offset_delta < prev:
            raise InvalidRecordError(f"last_offset_delta {last_offset_delta} < last record delta {prev}")
        return bytes(body), first_ts, max_ts, last_offset_delta
    n = len(records)
    if shape == "trusted":
        first_ts = records[0][1]
        packed = _codec.pack_records(records, True) if _codec is not None else None
        if packed is not None:
            return packed[0], first_ts, packed[2], n - 1
        body = bytearray()
        for d, ts, k, v, h in records:
            _put_record(body, d, ts - first_ts, k, v, h)
        return bytes(body), first_ts, max(r[1] for r in records), n - 1
    packed = _codec.pack_records(records, False) if _codec is not None else None
    if packed is None:
        packed = _pack_delta_records(records)
    else:
        _check_timestamps(records, packed[1])
    return packed[0], records[0][0], packed[2], n - 1


def _pack_delta_records(records: Sequence[tuple]) -> tuple[bytes, int, int]:
    """The pure-Python ``_codec.pack_records(records, False)``: ``(section, min_ts, max_ts)``,
    checking shape, then timestamps, then every field (the order of the errors)."""
    bad = next((r for r in records if not isinstance(r, (tuple, list)) or len(r) != 4
                or type(r[0]) is not int), None)
    if bad is not None:
        raise InvalidRecordError(
            f"records must be (timestamp_ms: int, key, value, headers) tuples, got {bad!r:.120}")
    stamps = [r[0] for r in records]
    min_ts, max_ts = min(stamps), max(stamps)
    _check_timestamps(records, min_ts)
    # what the C codec declines to pack: check every field by the one record rule
    # (kafkasim.records.validation) before a str key or a bytearray would be written
    checked = check_records(records)
    first_ts = stamps[0]
    body = bytearray()
    for i, (ts, k, v, h) in enumerate(checked):
        _put_record(body, i, ts - first_ts, k, v, h)
    return bytes(body), min_ts, max_ts


def _check_timestamps(records: Sequence[tuple], min_ts: int) -> None:
    if min_ts < 0:
        stamps = [r[0] for r in records]
        raise InvalidTimestampError(f"negative timestamp {min_ts} at offset delta {stamps.index(min_ts)}")


# -- varints (zigzag, as protobuf's sint32/sint64) -------------------------------------------------
def _build_varint_table() -> list:
    table = []
    for zz in range(1 << 14):                 # every zigzag value of one or two bytes
        v, b = zz, bytearray()
        while v >= 0x80:
            b.append((v & 0x7F) | 0x80)
            v >>= 7
        b.append(v)
        table.append(bytes(b))
    return table


_VARINT_TABLE = _build_varint_table()


def _varint(n: int) -> bytes:
    """The zigzag varint of ``n`` (a table lookup for |n| < 8192: the usual lengths and deltas)."""
    zz = (n << 1) ^ (n >> 63)
    if 0 <= zz < 16384:
        return _VARINT_TABLE[zz]
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise InvalidRecordError(f"{n} does not fit a varlong")
    v = zz & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _put_record(body: bytearray, delta: int, ts_delta: int, key, value, headers) -> None:
    """Append one v2 record (its varint length, then attributes 0, timestamp delta, offset
    delta, key, value, headers) to ``body``."""
    vb = _varint
    try:
        rec = b"\x00" + vb(ts_delta) + vb(delta) \
            + (b"\x01" if key is None else vb(len(key)) + key) \
            + (b"\x01" if value is None else vb(len(value)) + value)
        if headers:
            extra = bytearray(vb(len(headers)))
            for hk, hv in headers:
                hkb = hk.encode("utf-8")
                extra += vb(len(hkb))
                extra += hkb
                if hv is None:
                    extra += b"\x01"
                else:
                    extra += vb(len(hv))
                    extra += hv
            rec += extra
        else:
            rec += b"\x00"
    except (TypeError, AttributeError, ValueError, UnicodeError) as exc:
        raise InvalidRecordError(f"record at offset delta {delta} cannot be encoded: {exc}") from exc
    body += vb(len(rec))
    body += rec


_TAIL = struct.Struct(">hiqqqhii")   # attributes .. record_count: the CRC'd header fields
_HEAD = struct.Struct(">qiibI")      # base_offset .. crc


def _assemble_parts(base_offset, leader_epoch, attributes, last_offset_delta, first_ts, max_ts,
                    producer_id, producer_epoch, base_sequence, count, section
                    ) -> tuple[BatchHeader, tuple[bytes, bytes, bytes]]:
    """The header fields and CRC-32C around ``section``: ``(header, (head, tail, section))``."""
    try:
        tail = _TAIL.pack(attributes, last_offset_delta, first_ts, max_ts,
                          producer_id, producer_epoch, base_sequence, count)
    except struct.error as exc:   # a field outside its int16/int32/int64 (FORMAT.md §2.1)
        raise InvalidRecordError(
            f"batch header field out of range (producer_id={producer_id!r}, producer_epoch="
            f"{producer_epoch!r}, base_sequence={base_sequence!r}, timestamps {first_ts!r}..{max_ts!r}): "
            f"{exc}") from exc
    crc = _crc32c.crc32c(section, _crc32c.crc32c(tail))  # incremental: the section is never copied
    batch_length = len(tail) + len(section) + 9
    head = _HEAD.pack(base_offset, batch_length, leader_epoch, MAGIC, crc)
    header = BatchHeader(base_offset, batch_length, leader_epoch, MAGIC, crc, attributes,
                         last_offset_delta, first_ts, max_ts, producer_id, producer_epoch,
                         base_sequence, count)
    return header, (head, tail, section)


def _assemble(*fields) -> bytes:
    """:func:`_assemble_parts` joined (tests build malformed sections with it)."""
    return b"".join(_assemble_parts(*fields)[1])


# -- decoding ------------------------------------------------------------------------------------
def records_section(buf, pos: int, header: BatchHeader, *, where: str = "<buffer>"):
    """The records section of the (verified) batch at ``pos``, decompressed when the
    attributes name a codec: a ``memoryview`` into ``buf`` when uncompressed, else ``bytes``.
    :class:`CorruptRecordError` for an unknown codec, data that does not decompress, or a
    section that inflates past :data:`MAX_UNCOMPRESSED`."""
    section = memoryview(buf)[pos + HEADER_SIZE:pos + header.size]
    codec = header.attributes & ATTR_COMPRESSION_MASK
    if not codec:
        return section
    if codec > 4:
        raise CorruptRecordError(f"{where}: unknown compression codec {codec} in batch at position {pos}")
    return decompress(codec, bytes(section), MAX_UNCOMPRESSED, f"{where}: batch at position {pos}")


def timestamp_delta_override(header: BatchHeader) -> Optional[int]:
    """None, or — in a LogAppendTime batch — the timestamp delta every record reads as
    (``max_timestamp - base_timestamp``: each record's timestamp is the append time)."""
    if header.attributes & ATTR_TIMESTAMP_TYPE_LOG_APPEND:
        return header.max_timestamp - header.base_timestamp
    return None


def decode_columns(buf, pos: int, header: BatchHeader, *, where: str = "<buffer>") -> tuple:
    """Decode the records of a verified batch column-wise.

    Returns five equal-length tuples ``(offset_deltas, timestamp_deltas, keys, values,
    headers)`` (headers as tuples of ``(str, bytes | None)`` tuples; a LogAppendTime batch
    reports every record's delta as :func:`timestamp_delta_override`), checked as the
    module docstring says: record count, each record's length, increasing deltas within
    ``last_offset_delta``, nothing left over. The C codec builds the tuples with no
    Python-level loop.
    """
    section = records_section(buf, pos, header, where=where)
    fixed = timestamp_delta_override(header)
    try:
        if _codec is not None:
            return _codec.decode_columns(section, 0, len(section), header.record_count,
                                         header.last_offset_delta, fixed)
        return _decode_columns_py(section, header.record_count, header.last_offset_delta, fixed)
    except ValueError as exc:
        raise CorruptRecordError(f"{where}: malformed records in batch at position {pos}: {exc}") from None


def decode_records(buf, pos: int, header: BatchHeader, *, where: str = "<buffer>") -> list:
    """The records of a verified batch as ``[offset_delta, timestamp_delta, key, value,
    headers]`` lists (the columns of :func:`decode_columns`, row-wise)."""
    return [list(r) for r in zip(*decode_columns(buf, pos, header, where=where))]


def scan_records(buf, pos: int, header: BatchHeader, *, where: str = "<buffer>") -> tuple:
    """Check the records of a verified batch without building them:
    ``(min_timestamp_delta, max_timestamp_delta, null_key_count, contiguous)`` where
    ``contiguous`` says the offset deltas are exactly ``0..n-1`` (the produce path's
    validation, as Kafka's ``LogValidator`` walks a batch). Same checks and errors as
    :func:`decode_columns`."""
    section = records_section(buf, pos, header, where=where)
    try:
        if _codec is not None:
            return _codec.scan_records(section, 0, len(section), header.record_count, header.last_offset_delta)
        deltas, tsds, keys, _, _ = _decode_columns_py(section, header.record_count, header.last_offset_delta, None)
    except ValueError as exc:
        raise CorruptRecordError(f"{where}: malformed records in batch at position {pos}: {exc}") from None
    n = len(deltas)
    return (min(tsds) if n else 0, max(tsds) if n else 0, keys.count(None),
            n == 0 or deltas[-1] == n - 1)


def extend_columns(columns: tuple, buf, pos: int, header: BatchHeader, *, where: str = "<buffer>") -> int:
    """Append the records of the verified batch at ``pos`` to ``columns`` — five lists
    ``(offsets, timestamps, keys, values, headers)`` with absolute offsets and timestamps —
    with C-level loops only (:func:`decode_columns`); returns how many were appended. The one
    column builder of the log's column reads and the consumer's fetcher."""
    deltas, tsds, k, v, hd = decode_columns(buf, pos, header, where=where)
    n = len(deltas)
    if not n:
        return 0
    offs, tss, keys, values, headers = columns
    base = header.base_offset
    if deltas[-1] == n - 1:     # decode_columns checked the deltas increase: 0..n-1
        offs.extend(range(base, base + n))
    else:
        offs.extend(map(operator.add, deltas, repeat(base)))
    tss.extend(map(operator.add, tsds, repeat(header.base_timestamp)))
    keys.extend(k)
    values.extend(v)
    headers.extend(hd)
    return n


def iter_records(buf, pos: int, header: BatchHeader, *, where: str = "<buffer>",
                 min_offset: int = 0) -> Iterator[Record]:
    """Yield the :class:`Record` objects of a verified batch with offset >= ``min_offset``."""
    base, ts0 = header.base_offset, header.base_timestamp
    pid, epoch, seq0 = header.producer_id, header.producer_epoch, header.base_sequence
    deltas, tsds, keys, values, headers = decode_columns(buf, pos, header, where=where)
    for delta, tsd, key, value, hd in zip(deltas, tsds, keys, values, headers):
        off = base + delta
        if off < min_offset:
            continue
        yield Record(off, ts0 + tsd, key, value, hd, pid, epoch,
                     (seq0 + delta) & 0x7FFFFFFF if seq0 >= 0 else NO_SEQUENCE)


def _decode_columns_py(section, count: int, last_delta: int, fixed_tsd: Optional[int]) -> tuple:
    """The pure-Python ``_codec.decode_columns``: the fast walk for well-formed sections,
    else the careful one, which finds and names what is wrong (ValueError)."""
    buf = section if isinstance(section, bytes) else bytes(section)
    gc_was_enabled = gc.isenabled()
    gc.disable()   # one or two objects per field, none of which can form a cycle
    try:
        cols = _walk_fast(buf, count, last_delta)
        if cols is None:
            cols = _walk_careful(buf, count, last_delta)
    finally:
        if gc_was_enabled:
            gc.enable()
    if fixed_tsd is not None:
        cols = (cols[0], tuple(repeat(fixed_tsd, len(cols[0]))), *cols[2:])
    return cols


def _varint_at(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint of up to 10 bytes at ``pos``: ``(value, next pos)``; IndexError past
    the end, ValueError when too long (the fast walk then defers to the careful one)."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _walk_fast(buf: bytes, count: int, last_delta: int) -> Optional[tuple]:
    """:func:`_walk_careful`'s result for well-formed records without headers, with no
    per-field calls for one-byte varints; None for anything unusual (headers included), so
    the careful walk decides and names the problem. The key and value blocks repeat on
    purpose: a helper call per field cost more than the decode itself."""
    end = len(buf)
    if count > end:
        return None
    pos = 0
    prev = -1
    deltas, tsds, keys, values = [], [], [], []
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                length, pos = _varint_at(buf, pos)
            rec_end = pos + length
            if length < 0 or rec_end > end:
                return None
            pos += 1                                   # record attributes
            b = buf[pos]
            if b < 0x80:
                ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                ts_delta, pos = _varint_at(buf, pos)
            b = buf[pos]
            if b < 0x80:
                delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                delta, pos = _varint_at(buf, pos)
            if delta <= prev or delta > last_delta or not _INT64_MIN <= ts_delta <= _INT64_MAX \
                    or delta > 0x7FFFFFFF:
                return None
            prev = delta
            b = buf[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                n, pos = _varint_at(buf, pos)
            if n == -1:
                key = None
            elif 0 <= n <= rec_end - pos:
                key = buf[pos:pos + n]
                pos += n
            else:
                return None
            b = buf[pos]
            if b < 0x80:
                n, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                n, pos = _varint_at(buf, pos)
            if n == -1:
                value = None
            elif 0 <= n <= rec_end - pos:
                value = buf[pos:pos + n]
                pos += n
            else:
                return None
            if buf[pos] != 0 or pos + 1 != rec_end:    # headers: the careful walk does them
                return None
            pos = rec_end
            deltas.append(delta)
            tsds.append(ts_delta)
            keys.append(key)
            values.append(value)
    except (IndexError, ValueError):
        return None
    if pos != end:
        return None
    return tuple(deltas), tuple(tsds), tuple(keys), tuple(values), tuple(repeat((), count))


class _Reader:
    """A cursor over one records section; every read is bounds-checked (ValueError)."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes, pos: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, pos, end

    def fail(self, what: str) -> ValueError:
        return ValueError(f"{what} at byte {self.pos} of the records")

    def varint(self, bits: int) -> int:
        buf, pos, end = self.buf, self.pos, self.end
        shift = result = 0
        limit = 5 if bits == 32 else 10
        for _ in range(limit):
            if pos >= end:
                raise self.fail("truncated varint")
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
        else:
            raise self.fail(f"varint longer than {limit} bytes (overflow)")
        value = (result >> 1) ^ -(result & 1)
        bound = 1 << (bits - 1)
        if not -bound <= value < bound:
            raise self.fail(f"varint {value} out of range")
        self.pos = pos
        return value

    def take(self, n: int) -> bytes:
        if self.pos + n > self.end:
            raise self.fail(f"field of {n} bytes past the end of its record")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def nullable(self, what: str) -> Optional[bytes]:
        n = self.varint(32)
        if n == -1:
            return None
        if n < -1:
            raise self.fail(f"invalid {what} length {n}")
        return self.take(n)


def _walk_careful(buf: bytes, count: int, last_delta: int) -> tuple:
    r = _Reader(buf, 0, len(buf))
    deltas, tsds, keys, values, headers = [], [], [], [], []
    prev = -1
    if count > len(buf):  # each record takes at least 7 bytes; refuse absurd counts early
        raise ValueError(f"record count {count} cannot fit in {len(buf)} bytes")
    for i in range(count):
        if r.pos >= len(buf):
            raise r.fail(f"record count {count} in the header, the records end after {i}")
        length = r.varint(32)
        if length < 0:
            raise r.fail(f"negative record length {length}")
        rec_end = r.pos + length
        if rec_end > len(buf):
            raise r.fail(f"record of {length} bytes past the end")
        r.end = rec_end
        r.take(1)  # record attributes: unused by Kafka so far
        ts_delta = r.varint(64)
        delta = r.varint(32)
        if delta <= prev or delta > last_delta:
            raise r.fail(f"offset delta {delta} after {prev} (last_offset_delta {last_delta})")
        prev = delta
        key = r.nullable("key")
        value = r.nullable("value")
        n_headers = r.varint(32)
        if n_headers < 0:
            raise r.fail(f"invalid header count {n_headers}")
        hd = []
        for _ in range(n_headers):
            hk = r.nullable("header key")
            if hk is None:
                raise r.fail("null header key")
            try:
                hk_str = hk.decode("utf-8")
            except UnicodeDecodeError:
                raise r.fail("header key is not UTF-8") from None
            hd.append((hk_str, r.nullable("header value")))
        if r.pos != rec_end:
            raise r.fail(f"record length {length} does not match its fields ({length - (rec_end - r.pos)} read)")
        r.end = len(buf)
        deltas.append(delta)
        tsds.append(ts_delta)
        keys.append(key)
        values.append(value)
        headers.append(tuple(hd))
    if r.pos != len(buf):
        raise r.fail(f"{len(buf) - r.pos} bytes left over after {count} records")
    return tuple(deltas), tuple(tsds), tuple(keys), tuple(values), tuple(headers)
