"""Record batches: the unit of append, storage and fetch (see storage/FORMAT.md §2).

This module is the only code that turns batches into bytes and back; the log, the
broker, the producer, ``kafkasim dump-log`` and the Spark data source all go through it.

Invariants (checked by :func:`decode_header` / :func:`verify`):
- ``batch_length`` counts the bytes after the length field: a batch occupies
  ``BATCH_OVERHEAD + batch_length`` = ``size`` bytes.
- ``crc`` is CRC-32 (zlib, IEEE polynomial) of the bytes from ``attributes`` to
  the end of the batch. ``base_offset`` and ``partition_leader_epoch`` sit before
  the CRC'd range so the log can stamp them without re-checksumming.
- Offsets in a batch are ``base_offset + offset_delta``; deltas are strictly
  increasing and the last one is at most ``last_offset_delta`` (compaction may
  drop records but never changes a batch's offset range).

Speed: the per-record loops (packing a batch's records, decoding them into Arrow
buffers) run in the C extension ``kafkasim.records._codec`` when it is built (``pip install``
builds it) and in pure Python otherwise — in the ``--py-files`` zip (zipimport cannot load
a C extension) or with ``KAFKASIM_PURE_PYTHON=1``. Both paths give the same bytes, the
same columns and the same errors; the tests run each against the other.

Thread-safety: pure functions over bytes; safe from any thread. An
:class:`ArrowColumnBuilder` belongs to one thread.
"""

from __future__ import annotations

import array
import gc
import itertools
import operator
import os
import struct
import zlib
from typing import Iterable, Iterator, NamedTuple, Optional, Sequence

import msgpack

from kafkasim.errors import CorruptRecordError, InvalidRecordError
from kafkasim.types import Record

__all__ = [
    "MAGIC", "HEADER_SIZE", "BATCH_OVERHEAD", "LENGTH_OFFSET", "CRC_START",
    "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "NO_SEQUENCE", "NO_PARTITION_LEADER_EPOCH",
    "ATTR_TIMESTAMP_TYPE_LOG_APPEND", "BatchHeader", "encode_batch", "decode_header",
    "verify", "decode_records", "decode_columns", "iter_records", "set_base_offset", "batch_size_of",
]

MAGIC = 1
"""Format version written in the ``magic`` byte (Kafka's own v2 batches say 2)."""

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
LENGTH_OFFSET = 8            # where batch_length sits
BATCH_OVERHEAD = 12          # base_offset + batch_length: bytes not counted by batch_length
CRC_OFFSET = 17
CRC_START = 21               # the CRC covers [CRC_START, end of batch)
MIN_BATCH_LENGTH = HEADER_SIZE - BATCH_OVERHEAD

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
ATTR_TIMESTAMP_TYPE_LOG_APPEND = 0x08
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


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of a batch, field for field (FORMAT.md §2.1)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies on disk."""
        return BATCH_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1


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

    Example::

        >>> b = encode_batch(0, [(0, 1000, b"k", b"v", ())])
        >>> decode_header(b).record_count, batch_size_of(b) == len(b)
        (1, True)
    """
    if not records:
        raise InvalidRecordError("a batch needs at least one record")
    if attributes & ~_ATTR_KNOWN:
        raise InvalidRecordError(f"unsupported batch attributes 0x{attributes:x}")
    first_ts = records[0][1]
    max_ts = first_ts
    prev = -1
    body = []
    for rec in records:
        delta, ts, key, value, headers = rec
        if delta <= prev:
            raise InvalidRecordError(f"offset deltas must increase: {delta} after {prev}")
        if ts < 0:
            raise InvalidRecordError(f"negative timestamp {ts} at offset delta {delta}")
        if ts > max_ts:
            max_ts = ts
        prev = delta
        body.append((delta, ts - first_ts, key, value, headers))
    if last_offset_delta is None:
        last_offset_delta = prev
    elif last_offset_delta < prev:
        raise InvalidRecordError(f"last_offset_delta {last_offset_delta} < last record delta {prev}")
    try:
        payload = _packb(body)
    except (TypeError, ValueError) as exc:
        raise InvalidRecordError(f"record cannot be encoded: {exc}") from exc
    return _assemble(base_offset, partition_leader_epoch, attributes, last_offset_delta,
                     first_ts, max_ts, producer_id, producer_epoch, base_sequence,
                     len(records), payload)


_TAIL = struct.Struct(">hiqqqhii")   # attributes .. record_count: the CRC'd header fields
_HEAD = struct.Struct(">qiibI")      # base_offset .. crc


def _assemble_parts(base_offset, leader_epoch, attributes, last_offset_delta, first_ts, max_ts,
                    producer_id, producer_epoch, base_sequence, count, payload
                    ) -> tuple[BatchHeader, tuple[bytes, bytes, bytes]]:
    """The header fields and CRC around ``payload``: ``(header, (head, tail, payload))``."""
    tail = _TAIL.pack(attributes, last_offset_delta, first_ts, max_ts,
                      producer_id, producer_epoch, base_sequence, count)
    crc = zlib.crc32(payload, zlib.crc32(tail))  # incremental: the payload is copied only once
    batch_length = len(tail) + len(payload) + 9
    head = _HEAD.pack(base_offset, batch_length, leader_epoch, MAGIC, crc)
    header = BatchHeader(base_offset, batch_length, leader_epoch, MAGIC, crc, attributes,
                         last_offset_delta, first_ts, max_ts, producer_id, producer_epoch,
                         base_sequence, count)
    return header, (head, tail, payload)


def _assemble(*fields) -> bytes:
    return b"".join(_assemble_parts(*fields)[1])


def batch_size_of(buf, pos: int = 0) -> int:
    """Total size of the batch starting at ``pos`` according to its length field."""
    return BATCH_OVERHEAD + struct.unpack_from(">i", buf, pos + LENGTH_OFFSET)[0]


def decode_header(buf, pos: int = 0, *, where: str = "<buffer>") -> BatchHeader:
    """Parse and sanity-check the header at ``pos`` (not the CRC: see :func:`verify`).

    Raises :class:`CorruptRecordError` naming ``where`` and ``pos`` when fewer than
    61 bytes remain, the magic is unknown, or the length/count fields are impossible.
    """
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"{where}: truncated batch header at position {pos} "
            f"({len(buf) - pos} of {HEADER_SIZE} bytes)")
    h = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if h.magic != MAGIC:
        raise CorruptRecordError(f"{where}: unknown magic {h.magic} at position {pos} (expected {MAGIC})")
    if h.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"{where}: batch length {h.batch_length} at position {pos} is below the minimum {MIN_BATCH_LENGTH}")
    if h.record_count < 0 or h.last_offset_delta < 0 or h.base_offset < 0:
        raise CorruptRecordError(
            f"{where}: impossible header at position {pos}: base_offset={h.base_offset} "
            f"record_count={h.record_count} last_offset_delta={h.last_offset_delta}")
    return h


def verify(buf, pos: int, header: BatchHeader, *, where: str = "<buffer>") -> None:
    """Check that the whole batch is present and its CRC matches; raise CorruptRecordError if not."""
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordError(
            f"{where}: truncated batch at position {pos}: needs {header.size} bytes, "
            f"{len(buf) - pos} present")
    actual = zlib.crc32(memoryview(buf)[pos + CRC_START:end])
    if actual != header.crc:
        raise CorruptRecordError(
            f"{where}: CRC mismatch in batch at position {pos} (base offset {header.base_offset}): "
            f"stored 0x{header.crc:08x}, computed 0x{actual:08x}")


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


def set_base_offset(batch: bytes | bytearray, base_offset: int,
                    partition_leader_epoch: Optional[int] = None) -> bytes:
    """Return ``batch`` with its base offset (and optionally leader epoch) replaced.

    Both fields sit outside the CRC, so the checksum stays valid.
    """
    buf = bytearray(batch)
    struct.pack_into(">q", buf, 0, base_offset)
    if partition_leader_epoch is not None:
        struct.pack_into(">i", buf, 12, partition_leader_epoch)
    return bytes(buf)


def iter_batches(buf, start: int = 0, end: Optional[int] = None, *, where: str = "<buffer>",
                 check_crc: bool = True) -> Iterable[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each batch in ``buf[start:end]``, verified.

    Stops with :class:`CorruptRecordError` at the first bad batch; callers that
    want to skip corruption catch it and decide (see FORMAT.md §5).
    """
    end = len(buf) if end is None else end
    pos = start
    while pos < end:
        h = decode_header(buf, pos, where=where)
        if pos + h.size > end:
            raise CorruptRecordError(
                f"{where}: truncated batch at position {pos}: needs {h.size} bytes, {end - pos} present")
        if check_crc:
            verify(buf, pos, h, where=where)
        yield pos, h
        pos += h.size


__all__.append("iter_batches")


_first = operator.itemgetter(0)
_second = operator.itemgetter(1)


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

    Example::

        >>> b = encode_records(0, [(1000, b"k", b"v", ())])
        >>> b == encode_batch(0, [(0, 1000, b"k", b"v", ())])
        True
    """
    header, parts = encode_records_parts(
        base_offset, records, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, partition_leader_epoch=partition_leader_epoch,
        attributes=attributes)
    return b"".join(parts)


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
    if not records:
        raise InvalidRecordError("a batch needs at least one record")
    if attributes & ~_ATTR_KNOWN:
        raise InvalidRecordError(f"unsupported batch attributes 0x{attributes:x}")
    packed = _codec.pack_records(records, False) if _codec is not None else None
    if packed is None:
        packed = _pack_delta_records(records)
    else:
        _check_timestamps(records, packed[1])
    payload, _, max_ts = packed
    n = len(records)
    return _assemble_parts(base_offset, partition_leader_epoch, attributes, n - 1, records[0][0], max_ts,
                           producer_id, producer_epoch, base_sequence, n, payload)


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
    try:
        return _packb(body), min_ts, max_ts
    except (TypeError, ValueError) as exc:
        raise InvalidRecordError(f"record cannot be encoded: {exc}") from exc


def _check_timestamps(records: Sequence[tuple], min_ts: int) -> None:
    if min_ts < 0:
        stamps = list(map(_first, records))
        raise InvalidRecordError(f"negative timestamp {min_ts} at offset delta {stamps.index(min_ts)}")


__all__ += ["encode_records", "encode_records_parts"]


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
    n = len(records)
    if not n:
        raise InvalidRecordError("a batch needs at least one record")
    first_ts = records[0][1]
    packed = _codec.pack_records(records, True) if _codec is not None else None
    if packed is not None:
        payload, _, max_ts = packed
    else:
        try:
            payload = _packb([(d, ts - first_ts, k, v, h) for d, ts, k, v, h in records])
        except (TypeError, ValueError) as exc:
            raise InvalidRecordError(f"record cannot be encoded: {exc}") from exc
        max_ts = max(map(_second, records))
    return _assemble(0, NO_PARTITION_LEADER_EPOCH, 0, n - 1, first_ts, max_ts,
                     producer_id, producer_epoch, base_sequence, n, payload)


__all__.append("encode_trusted_batch")


class ArrowColumnBuilder:
    """Records of verified batches, accumulated as Arrow buffers for columnar readers.

    ``add`` decodes one batch (after :func:`verify`) with the checks of FORMAT.md §2.3
    plus the field types of §2.2 (key and value bin or nil, headers ``[str, bin | nil]``
    pairs) and raises :class:`CorruptRecordError` naming ``where`` and the position; a
    rejected batch leaves nothing behind. ``take`` hands out everything added since the
    last ``take`` and starts afresh::

        {"rows": n,
         "offset_deltas": bytes (n int64, native order), "timestamp_deltas": bytes (n int64),
         "keys": (validity, offsets, data, null_count), "values": (...),
         "header_offsets": bytes (n + 1 int32),
         "header_keys": (...), "header_values": (...)}

    where ``validity`` is an LSB-first bitmap or None when nothing is null and
    ``offsets`` holds count + 1 int32: exactly the buffers of Arrow ``binary``/``string``
    and ``list`` arrays (``pyarrow.Array.from_buffers``). Column data must stay under
    2 GiB per ``take``: callers flush on :attr:`nbytes`.

    The C path (``kafkasim.records._codec.ArrowColumns``) touches no Python object per record; the
    pure-Python path builds the same buffers from :func:`decode_columns`.
    """

    def __init__(self) -> None:
        self._c = _codec.ArrowColumns() if _codec is not None else None
        self._py: list = []
        self._py_rows = self._py_nbytes = 0

    @property
    def rows(self) -> int:
        return self._c.rows if self._c is not None else self._py_rows

    @property
    def nbytes(self) -> int:
        """Bytes of key, value and header data held."""
        return self._c.nbytes if self._c is not None else self._py_nbytes

    def add(self, buf, pos: int, header: BatchHeader, *, where: str = "<buffer>") -> int:
        """Decode the records of the verified batch at ``pos``; return how many were added."""
        if self._c is not None:
            try:
                return self._c.add(buf, pos + HEADER_SIZE, pos + header.size, header.record_count,
                                   header.last_offset_delta)
            except ValueError as exc:
                raise CorruptRecordError(f"{where}: malformed records in batch at position {pos}: {exc}") from None
        gc_was_enabled = gc.isenabled()
        gc.disable()   # as in decode_columns: the checks allocate, and none of it can form a cycle
        try:
            cols = decode_columns(buf, pos, header, where=where)
            problem = _column_type_problem(cols)
        finally:
            if gc_was_enabled:
                gc.enable()
        if problem:
            raise CorruptRecordError(f"{where}: malformed records in batch at position {pos}: {problem}")
        self._py.append(cols)
        self._py_rows += len(cols[0])
        self._py_nbytes += sum(map(len, filter(None, cols[2]))) + sum(map(len, filter(None, cols[3])))
        if any(cols[4]):
            self._py_nbytes += sum(len(hk.encode()) + len(hv or b"") for h in cols[4] for hk, hv in h)
        return len(cols[0])

    def take(self) -> dict:
        if self._c is not None:
            return self._c.take()
        parts, self._py, self._py_rows, self._py_nbytes = self._py, [], 0, 0
        deltas, tsds, keys, values, headers = (list(_chain(*(p[i] for p in parts))) for i in range(5))
        pairs = list(_chain(*headers)) if any(headers) else []
        return {"rows": len(deltas),
                "offset_deltas": _int64s(deltas), "timestamp_deltas": _int64s(tsds),
                "keys": _blob_buffers(keys), "values": _blob_buffers(values),
                "header_offsets": _offsets(map(len, headers)),
                "header_keys": _blob_buffers([k.encode() for k in map(_first, pairs)]),
                "header_values": _blob_buffers(list(map(_second, pairs)))}


__all__ += ["ArrowColumnBuilder", "C_CODEC"]

_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def _column_type_problem(cols: tuple) -> Optional[str]:
    """What breaks FORMAT.md §2.2's field types in :func:`decode_columns` output, or None.

    Type checks are ``set(map(type, column))``: C-level loops, no bytecode per record."""
    deltas, tsds, keys, values, headers = cols
    if not set(map(type, deltas)) <= _INT:
        return "expected an integer offset delta"
    if not set(map(type, tsds)) <= _INT or (tsds and not _INT64_MIN <= min(tsds) <= max(tsds) <= _INT64_MAX):
        return "expected an int64 timestamp delta"
    if not set(map(type, keys)) <= _BLOB or not set(map(type, values)) <= _BLOB:
        return "expected bin or nil for a key or value"
    if not set(map(type, headers)) <= _TUPLE:
        return "expected an array of headers"
    pairs = [pair for h in headers if h for pair in h]
    if pairs:
        if not set(map(type, pairs)) <= _TUPLE or set(map(len, pairs)) != {2}:
            return "a header must be a [key, value] pair"
        if not set(map(type, map(_first, pairs))) <= _STR:
            return "expected str for a header key"
        if not set(map(type, map(_second, pairs))) <= _BLOB:
            return "expected bin or nil for a key or value"
    return None


_INT, _BLOB, _TUPLE, _STR = {int}, {bytes, type(None)}, {tuple}, {str}
_chain = itertools.chain


def _int64s(values: list) -> bytes:
    return array.array("q", values).tobytes()


def _offsets(lengths) -> bytes:
    return array.array("i", list(itertools.accumulate(lengths, initial=0))).tobytes()


def _blob_buffers(blobs: list) -> tuple:
    """Arrow binary buffers ``(validity | None, offsets, data, null_count)`` of bytes-or-None."""
    nulls = blobs.count(None)
    validity = None
    if nulls:
        bits = bytearray((len(blobs) + 7) // 8)
        for i, b in enumerate(blobs):
            if b is not None:
                bits[i >> 3] |= 1 << (i & 7)
        validity = bytes(bits)
    lengths = map(len, blobs) if not nulls else (0 if b is None else len(b) for b in blobs)
    return validity, _offsets(lengths), b"".join(filter(None, blobs)), nulls
