"""Kafka record batches (magic v2) on the wire ⟷ kafkasim's records, at the network edge.

Real clients send and expect Kafka's own batch format; kafkasim stores its own
(storage/FORMAT.md: the same header layout, but CRC-32 and msgpack records). This
module translates between the two and is the only code in kafkasim that knows the
wire format of records. Pure functions over bytes: no I/O, no state, safe from any
thread.

Kafka's v2 batch (all integers big-endian)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (=2)
    | crc uint32 (CRC-32C of attributes .. end) | attributes int16 | lastOffsetDelta int32
    | baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16
    | baseSequence int32 | recordCount int32 | records (compressed as one block when
    attributes & 0x7 != 0)

    record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
            | keyLength varint (-1 = null) | key | valueLength varint | value
            | headerCount varint | [keyLength varint | key utf-8 | valueLength varint | value]

(varints are zigzag-encoded, as protobuf's sint32/sint64.)

Invariants (every decode checks them and raises :class:`CorruptRecordError` naming the
batch and the byte position, never anything else, on hostile input):
- the batch length fits in the buffer and is at least the 49-byte header remainder;
- the CRC-32C matches; magic is 2;
- the records section decodes to exactly ``recordCount`` records and nothing is left
  over; each record's length covers exactly its fields; offset deltas strictly increase
  and never pass ``lastOffsetDelta``;
- a compressed section inflates to at most ``max_uncompressed`` bytes.

Unsupported on the way in (a clear :class:`InvalidRecordError`): transactional and
control batches (kafkasim has no transactions). Compression codecs: gzip (stdlib zlib),
snappy (raw or xerial-framed as the Java client writes it), lz4 (frame format) and
zstd, the last three through ``cramjam``. On the way out (:func:`encode_stored`) each
stored batch becomes one Kafka batch with the same header fields (the partition leader
epoch the leader stamped included), uncompressed, which every client accepts.
"""

from __future__ import annotations

import struct
from typing import Iterable, NamedTuple, Optional, Sequence

import crc32c as _crc32c

from kafkasim.errors import CorruptRecordError, InvalidRecordError
from kafkasim.records.compression import (  # noqa: F401  (codec ids re-exported)
    COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_NONE, COMPRESSION_SNAPPY, COMPRESSION_ZSTD,
    compress as _compress, decompress as _decompress,
)
from kafkasim.records import record_batch as rb

__all__ = [
    "KafkaBatch", "MAGIC_V2", "COMPRESSION_NONE", "COMPRESSION_GZIP", "COMPRESSION_SNAPPY",
    "COMPRESSION_LZ4", "COMPRESSION_ZSTD", "ATTR_TRANSACTIONAL", "ATTR_CONTROL",
    "decode_batches", "encode_batch", "encode_stored", "encode_stored_batches",
    "to_kafkasim", "DEFAULT_MAX_UNCOMPRESSED",
]

MAGIC_V2 = 2
ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
DEFAULT_MAX_UNCOMPRESSED = 128 * 1024 * 1024
"""Largest records section a compressed batch may inflate to (a bound on decompression bombs)."""

_HEADER = struct.Struct(">qiibIhiqqqhii")   # the 61-byte header, as kafkasim's own layout
HEADER_SIZE = _HEADER.size
_LENGTH_PREFIX = 12                         # baseOffset + batchLength: not counted by batchLength
_CRC_START = 21
_TAIL = struct.Struct(">hiqqqhii")          # attributes .. recordCount (the CRC'd header part)
_HEAD = struct.Struct(">qiibI")


class KafkaBatch(NamedTuple):
    """One decoded v2 batch. ``records`` holds ``(offset_delta, timestamp_ms, key, value,
    headers)`` with absolute timestamps and headers as ``((str, bytes | None), ...)``."""

    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK


# ---------------------------------------------------------------- varints

def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


_VARINT_TABLE = []


def _build_varint_table() -> None:
    for zz in range(1 << 14):                 # every zigzag value of one or two bytes
        v, b = zz, bytearray()
        while v >= 0x80:
            b.append((v & 0x7F) | 0x80)
            v >>= 7
        b.append(v)
        _VARINT_TABLE.append(bytes(b))


_build_varint_table()


def _varint_bytes(n: int) -> bytes:
    """The zigzag varint of ``n`` (a table lookup for |n| < 8192, the usual lengths and deltas)."""
    zz = (n << 1) ^ (n >> 63)
    if 0 <= zz < 16384:
        return _VARINT_TABLE[zz]
    out = bytearray()
    _put_varint(out, n)
    return bytes(out)


def _put_varint(out: bytearray, n: int) -> None:
    v = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


class _Reader:
    """A cursor over one records section; every read is bounds-checked."""

    __slots__ = ("buf", "pos", "end", "where")

    def __init__(self, buf, pos: int, end: int, where: str) -> None:
        self.buf, self.pos, self.end, self.where = buf, pos, end, where

    def fail(self, what: str) -> CorruptRecordError:
        return CorruptRecordError(f"{self.where}: {what} at byte {self.pos} of the records")

    def varint(self, limit_bits: int = 64) -> int:
        buf, pos, end = self.buf, self.pos, self.end
        shift = result = 0
        while True:
            if pos >= end:
                raise self.fail("truncated varint")
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift >= limit_bits + 6:
                raise self.fail("varint too long")
        self.pos = pos
        value = (result >> 1) ^ -(result & 1)
        bound = 1 << (limit_bits - 1)
        if not -bound <= value < bound:
            raise self.fail(f"varint {value} out of range")
        return value

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise self.fail(f"field of {n} bytes past the end")
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def nullable_bytes(self) -> Optional[bytes]:
        n = self.varint(32)
        if n == -1:
            return None
        if n < -1:
            raise self.fail(f"negative length {n}")
        return self.take(n)


# ---------------------------------------------------------------- decode

def decode_batches(buf, *, where: str = "records",
                   max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED) -> list[KafkaBatch]:
    """Decode every v2 batch in ``buf`` (a Produce request's ``records`` field).

    Raises :class:`CorruptRecordError` for anything malformed (see the module's
    invariants) and :class:`InvalidRecordError` for an empty section or a
    transactional/control batch.
    """
    buf = memoryview(buf)
    if len(buf) == 0:
        raise InvalidRecordError(f"{where}: no record batch")
    out, pos = [], 0
    while pos < len(buf):
        out.append(_decode_one(buf, pos, where, max_uncompressed))
        pos += _LENGTH_PREFIX + struct.unpack_from(">i", buf, pos + 8)[0]
    return out


def _decode_one(buf: memoryview, pos: int, where: str, limit: int) -> KafkaBatch:
    here = f"{where} (batch at byte {pos})"
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"{here}: truncated batch header ({len(buf) - pos} of {HEADER_SIZE} bytes)")
    (base_offset, length, leader_epoch, magic, crc, attributes, last_delta, base_ts, max_ts,
     pid, epoch, base_seq, count) = _HEADER.unpack_from(buf, pos)
    if magic != MAGIC_V2:
        raise CorruptRecordError(f"{here}: record batch magic {magic} is not supported (only v2)")
    if length < HEADER_SIZE - _LENGTH_PREFIX:
        raise CorruptRecordError(f"{here}: batch length {length} is below the header size")
    end = pos + _LENGTH_PREFIX + length
    if end > len(buf):
        raise CorruptRecordError(f"{here}: batch of {length + _LENGTH_PREFIX} bytes, {len(buf) - pos} present")
    actual = _crc32c.crc32c(buf[pos + _CRC_START:end])
    if actual != crc:
        raise CorruptRecordError(f"{here}: CRC-32C mismatch: stored 0x{crc:08x}, computed 0x{actual:08x}")
    if attributes & (ATTR_TRANSACTIONAL | ATTR_CONTROL):
        raise InvalidRecordError(f"{here}: transactional and control batches are not supported by kafkasim")
    if count < 0 or last_delta < 0:
        raise CorruptRecordError(f"{here}: impossible header: recordCount={count} lastOffsetDelta={last_delta}")
    codec = attributes & ATTR_COMPRESSION_MASK
    body = buf[pos + HEADER_SIZE:end]
    if codec:
        body = _decompress(codec, bytes(body), limit, here)
    records = _decode_records(body, count, last_delta, base_ts, here)
    return KafkaBatch(base_offset, leader_epoch, attributes, last_delta, base_ts, max_ts,
                      pid, epoch, base_seq, records)


def _decode_records(body, count: int, last_delta: int, base_ts: int, where: str) -> list:
    """The records of a batch: the fast path for well-formed input, else the careful
    reader (which finds and names what is wrong)."""
    fast = _decode_records_fast(body if isinstance(body, bytes) else bytes(body), count, last_delta, base_ts)
    if fast is not None:
        return fast
    return _decode_records_checked(body, count, last_delta, base_ts, where)


def _varint_at(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint of up to 10 bytes at ``pos``: ``(value, next pos)``; IndexError past
    the end, ValueError when too long (the fast path then defers to the careful reader)."""
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


def _decode_records_fast(buf: bytes, count: int, last_delta: int, base_ts: int) -> Optional[list]:
    """:func:`_decode_records_checked`'s result for well-formed input, without a reader
    object or per-field calls for one-byte varints; None for anything unusual (a length or
    delta out of range, a header, a varint past 32 bits where one is expected), so the
    careful reader decides and names the problem.

    The key and value blocks below repeat on purpose: this is the Produce hot path, and
    py-spy showed a helper call per field costing more than the decode itself (bench_serve);
    the property test holds it equal to the careful reader."""
    end = len(buf)
    if count > end:
        return None
    pos = 0
    prev = -1
    out = []
    append = out.append
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
            if delta <= prev or delta > last_delta or not -(1 << 63) <= ts_delta < (1 << 63):
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
            if buf[pos] != 0 or pos + 1 != rec_end:    # headers: the careful reader does them
                return None
            pos = rec_end
            append((delta, base_ts + ts_delta, key, value, ()))
    except (IndexError, ValueError):
        return None
    if pos != end:
        return None
    return out


def _decode_records_checked(body, count: int, last_delta: int, base_ts: int, where: str) -> list:
    r = _Reader(body, 0, len(body), where)
    records, prev = [], -1
    if count > len(body):  # each record takes at least 7 bytes; refuse absurd counts early
        raise r.fail(f"recordCount {count} cannot fit in {len(body)} bytes")
    for _ in range(count):
        length = r.varint(32)
        if length < 0:
            raise r.fail(f"negative record length {length}")
        rec_end = r.pos + length
        if rec_end > r.end:
            raise r.fail(f"record of {length} bytes past the end")
        outer_end, r.end = r.end, rec_end
        r.take(1)  # record attributes: unused by Kafka so far
        ts_delta = r.varint(64)
        delta = r.varint(32)
        if delta <= prev or delta > last_delta:
            raise r.fail(f"offset delta {delta} after {prev} (lastOffsetDelta {last_delta})")
        prev = delta
        key = r.nullable_bytes()
        value = r.nullable_bytes()
        n_headers = r.varint(32)
        if n_headers < 0:
            raise r.fail(f"negative header count {n_headers}")
        headers = []
        for _ in range(n_headers):
            hk = r.nullable_bytes()
            if hk is None:
                raise r.fail("null header key")
            try:
                hk_str = hk.decode("utf-8")
            except UnicodeDecodeError:
                raise r.fail("header key is not UTF-8") from None
            headers.append((hk_str, r.nullable_bytes()))
        if r.pos != rec_end:
            raise r.fail(f"record length {length} does not match its fields")
        r.end = outer_end
        ts = base_ts + ts_delta
        records.append((delta, ts, key, value, tuple(headers)))
    if r.pos != len(body):
        raise r.fail(f"{len(body) - r.pos} bytes left over after {count} records")
    return records


def to_kafkasim(batch: KafkaBatch) -> bytes:
    """The kafkasim batch (kafkasim.records.record_batch) for one decoded Kafka batch,
    ready for ``Broker.produce``: the producer id, epoch and base sequence are kept (so the
    broker's idempotence check applies), and so are offset deltas and timestamps.
    Raises InvalidRecordError for a batch kafkasim cannot store (no records), and
    InvalidTimestampError (Kafka's INVALID_TIMESTAMP) for a timestamp outside [0, 2**63-1];
    the broker checks every other field of every record (kafkasim.records.validation)."""
    if not batch.records:
        raise InvalidRecordError("a batch needs at least one record")
    return rb.encode_batch(
        0, batch.records, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        attributes=batch.attributes & ATTR_TIMESTAMP_TYPE,
        last_offset_delta=max(batch.last_offset_delta, batch.records[-1][0]))


# ---------------------------------------------------------------- encode

def encode_batch(base_offset: int, records: Sequence[tuple], *, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1,
                 partition_leader_epoch: int = -1, attributes: int = 0,
                 compression: int = COMPRESSION_NONE, last_offset_delta: Optional[int] = None) -> bytes:
    """Encode one v2 batch from ``(offset_delta, timestamp_ms, key, value, headers)`` tuples
    (deltas strictly increasing; ``headers`` pairs of ``(str, bytes | None)``).

    Example::

        >>> b = encode_batch(5, [(0, 1000, b"k", b"v", ())])
        >>> [r[2:4] for r in decode_batches(b)[0].records]
        [(b'k', b'v')]
    """
    if not records:
        raise InvalidRecordError("a batch needs at least one record")
    base_ts = records[0][1]
    max_ts = max(r[1] for r in records)
    body = bytearray()
    prev = -1
    for delta, ts, key, value, headers in records:
        if delta <= prev:
            raise InvalidRecordError(f"offset deltas must increase: {delta} after {prev}")
        prev = delta
        _put_record(body, delta, ts - base_ts, key, value, headers)
    if last_offset_delta is None:
        last_offset_delta = prev
    attributes = (attributes & ~ATTR_COMPRESSION_MASK) | compression
    payload = _compress(compression, bytes(body))
    tail = _TAIL.pack(attributes, last_offset_delta, base_ts, max_ts, producer_id,
                      producer_epoch, base_sequence, len(records))
    crc = _crc32c.crc32c(payload, _crc32c.crc32c(tail))
    head = _HEAD.pack(base_offset, len(tail) + len(payload) + 9, partition_leader_epoch, MAGIC_V2, crc)
    return head + tail + payload


def _put_record(body: bytearray, delta: int, ts_delta: int, key, value, headers) -> None:
    """Append one v2 record (its varint length, then attributes 0, timestamp delta, offset
    delta, key, value, headers) to ``body``."""
    vb = _varint_bytes
    rec = b"\x00" + vb(ts_delta) + vb(delta) \
        + (b"\x01" if key is None else vb(len(key)) + key) \
        + (b"\x01" if value is None else vb(len(value)) + value)
    if headers:
        extra = bytearray(vb(len(headers)))
        for hk, hv in headers:
            _put_bytes(extra, hk.encode("utf-8"))
            _put_bytes(extra, hv)
        rec += extra
    else:
        rec += b"\x00"
    body += vb(len(rec))
    body += rec


def _put_bytes(out: bytearray, data: Optional[bytes]) -> None:
    if data is None:
        _put_varint(out, -1)
    else:
        _put_varint(out, len(data))
        out += data


def encode_stored(header, columns, below: Optional[int] = None) -> bytes:
    """One Kafka v2 batch (uncompressed) for one stored kafkasim batch, header field for
    field: base offset, partition leader epoch, attributes (timestamp type; compression
    none), last offset delta (so a compacted batch still ends where it did), base and max
    timestamp (LogAppendTime's max timestamp included), producer id, epoch and base
    sequence. ``header`` is the stored :class:`~kafkasim.records.framing.BatchHeader`,
    ``columns`` its records as ``record_batch.decode_columns`` gives them
    ``(offset_deltas, timestamp_deltas, keys, values, headers)``; timestamp deltas are
    relative to the base timestamp in both formats. ``below``: keep only records whose
    offset is lower (the batch then ends at the last one kept).

    Example::

        >>> from kafkasim.records import record_batch as rb
        >>> stored = rb.encode_batch(7, [(0, 1000, b"k", b"v", ())], partition_leader_epoch=3)
        >>> h = rb.decode_header(stored)
        >>> b = decode_batches(encode_stored(h, rb.decode_columns(stored, 0, h)))[0]
        >>> b.base_offset, b.partition_leader_epoch, b.records[0][2:4]
        (7, 3, (b'k', b'v'))
    """
    deltas, ts_deltas, keys, values, headers = columns
    last_delta = header.last_offset_delta
    if below is not None and header.base_offset + last_delta >= below:
        n = sum(1 for d in deltas if header.base_offset + d < below)
        deltas, ts_deltas, keys, values, headers = (c[:n] for c in (deltas, ts_deltas, keys, values, headers))
        last_delta = deltas[-1] if n else -1
    body = bytearray()
    for delta, tsd, key, value, hs in zip(deltas, ts_deltas, keys, values, headers):
        _put_record(body, delta, tsd, key, value, hs)
    attributes = header.attributes & ATTR_TIMESTAMP_TYPE
    tail = _TAIL.pack(attributes, last_delta, header.base_timestamp, header.max_timestamp, header.producer_id,
                      header.producer_epoch, header.base_sequence, len(deltas))
    crc = _crc32c.crc32c(body, _crc32c.crc32c(tail))
    head = _HEAD.pack(header.base_offset, len(tail) + len(body) + 9, header.partition_leader_epoch, MAGIC_V2, crc)
    return head + tail + bytes(body)


def encode_stored_batches(batches: Iterable[tuple], high_watermark: int) -> bytes:
    """:func:`encode_stored` over ``(header, stored batch bytes)`` pairs (what
    ``Broker.fetch_batches`` returns), records at or past ``high_watermark`` left out."""
    out = bytearray()
    for h, raw in batches:
        out += encode_stored(h, rb.decode_columns(raw, 0, h), high_watermark)
    return bytes(out)
