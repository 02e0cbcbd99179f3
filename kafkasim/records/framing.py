"""Batch framing of Kafka's record batch v2 (storage/FORMAT.md §2): the 61-byte header, the CRC-32C, and the one walk over batches.

Every reader of the format finds its batches here: the log's recovery and index rebuilds,
its reads, compaction, ``dump-log``/``verify-log``, the wire server and the Spark data
source. What a batch *holds* (the varint records section, compressed or not) is
:mod:`kafkasim.records.record_batch`.

- :func:`decode_header` is the one header parser (the checks of §2.3 up to the length
  fields); :func:`verify` the one CRC check.
- :class:`BatchIterator` is the one walk over batches laid back to back, in the manner of
  Kafka's ``LogInputStream``/``FileRecords.batchIterator``: it yields ``(position, header)``
  of each batch that is whole (and, with ``check_crc``, whose CRC matches), and at the first
  one that is not it *stops* instead of raising, recording where (``position``), why
  (``error``, a :class:`CorruptRecordError` naming the file and position), the header if it
  parsed, and whether the data simply ended inside the batch (``torn``: a torn tail, or the
  end of a read window). The caller decides what that means: recovery truncates there,
  ``dump-log``/``verify-log`` report it, the Spark reader skips the rest of the segment,
  a read raises if it got nothing before it. A caller that rejects a batch for its own
  reasons (undecodable records) calls :meth:`BatchIterator.reject`, so "where and why it
  stopped" is answered in one place.
- The offset checks (FORMAT.md §2.4) are the iterator's too, because ``base_offset`` lies
  outside the CRC: given ``first_offset`` (and ``end_offset``), every batch's offsets must
  increase from batch to batch — with ``contiguous``, each batch must start exactly where
  the previous one ended — and stay below ``end_offset``. One comparison or two per batch.
- :func:`iter_batches` is the raising form: the same walk, raising the error where the
  walk stops.

Invariants: ``batch_length`` counts the bytes after the length field, so a batch occupies
``BATCH_OVERHEAD + batch_length`` bytes; the CRC (CRC-32C, Castagnoli, as Kafka's
``DefaultRecordBatch``) covers bytes ``[CRC_START, end of batch)``, so ``base_offset`` and
``partition_leader_epoch`` can be stamped without recomputing it. A header is accepted only with ``magic == MAGIC``,
``batch_length >= MIN_BATCH_LENGTH`` and non-negative ``base_offset``,
``last_offset_delta`` and ``record_count``.

Pure: no files (a file is read through a ``read(position, n)`` callable its owner
supplies), no state beyond module constants. Functions are thread-safe; one
:class:`BatchIterator` belongs to one thread.
"""

from __future__ import annotations

import struct
from typing import Callable, Iterator, NamedTuple, Optional, Union

import crc32c as _crc32c_module

from kafkasim.errors import CorruptRecordError

__all__ = [
    "MAGIC", "HEADER_SIZE", "BATCH_OVERHEAD", "LENGTH_OFFSET", "CRC_OFFSET", "CRC_START", "MIN_BATCH_LENGTH",
    "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "NO_SEQUENCE", "NO_PARTITION_LEADER_EPOCH",
    "ATTR_COMPRESSION_MASK", "ATTR_TIMESTAMP_TYPE_LOG_APPEND", "ATTR_TRANSACTIONAL", "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON", "BatchHeader", "decode_header", "verify", "batch_crc", "batch_size_of",
    "set_base_offset", "set_partition_leader_epoch", "BatchIterator", "iter_batches",
]

MAGIC = 2
"""The ``magic`` byte of Kafka's record batch v2, the only format kafkasim reads or writes.
(Data dirs of kafkasim before 0.2 hold magic 1: ``kafkasim upgrade-data-dir`` converts them.)"""

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
ATTR_COMPRESSION_MASK = 0x07       # 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
ATTR_TIMESTAMP_TYPE_LOG_APPEND = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40         # base_timestamp holds the delete horizon (compaction, KIP-534)

_READ_CHUNK = 1 << 20
_NO_LIMIT = 1 << 64           # above every int64 offset: no end_offset check
_crc32 = _crc32c_module.crc32c
_unpack_header = _HEADER.unpack_from


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


_make_header = BatchHeader._make


def _parse(buf, off: int, pos: int, where: str) -> BatchHeader:
    """The header at ``buf[off:]`` (61 bytes must be there), checked; messages name position ``pos``."""
    h = _make_header(_unpack_header(buf, off))
    if h.magic != MAGIC:
        hint = ("; a segment of kafkasim before 0.2: convert its data dir once with "
                "`kafkasim upgrade-data-dir DATA_DIR`") if h.magic == 1 else ""
        raise CorruptRecordError(f"{where}: unknown magic {h.magic} at position {pos} (expected {MAGIC}){hint}")
    if h.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"{where}: batch length {h.batch_length} at position {pos} is below the minimum {MIN_BATCH_LENGTH}")
    if h.record_count < 0 or h.last_offset_delta < 0 or h.base_offset < 0:
        raise CorruptRecordError(
            f"{where}: impossible header at position {pos}: base_offset={h.base_offset} "
            f"record_count={h.record_count} last_offset_delta={h.last_offset_delta}")
    return h


def _crc_error(where: str, pos: int, h: BatchHeader, actual: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{where}: CRC mismatch in batch at position {pos} (base offset {h.base_offset}): "
        f"stored 0x{h.crc:08x}, computed 0x{actual:08x}")


def decode_header(buf, pos: int = 0, *, where: str = "<buffer>") -> BatchHeader:
    """Parse and sanity-check the header at ``pos`` (not the CRC: see :func:`verify`).

    Raises :class:`CorruptRecordError` naming ``where`` and ``pos`` when fewer than
    61 bytes remain, the magic is unknown, or the length/count fields are impossible.
    """
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"{where}: truncated batch header at position {pos} "
            f"({len(buf) - pos} of {HEADER_SIZE} bytes)")
    return _parse(buf, pos, pos, where)


def verify(buf, pos: int, header: BatchHeader, *, where: str = "<buffer>") -> None:
    """Check that the whole batch is present and its CRC matches; raise CorruptRecordError if not."""
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordError(
            f"{where}: truncated batch at position {pos}: needs {header.size} bytes, "
            f"{len(buf) - pos} present")
    actual = _crc32(memoryview(buf)[pos + CRC_START:end])
    if actual != header.crc:
        raise _crc_error(where, pos, header, actual)


def batch_size_of(buf, pos: int = 0) -> int:
    """Total size of the batch starting at ``pos`` according to its length field."""
    return BATCH_OVERHEAD + struct.unpack_from(">i", buf, pos + LENGTH_OFFSET)[0]


def batch_crc(buf, pos: int = 0, end: Optional[int] = None) -> int:
    """The CRC-32C of the batch at ``pos`` (bytes ``[pos + CRC_START, end)``; ``end`` defaults
    to the end of the batch by its length field), as :func:`verify` computes it."""
    if end is None:
        end = pos + batch_size_of(buf, pos)
    return _crc32(memoryview(buf)[pos + CRC_START:end])


def set_partition_leader_epoch(batch: bytearray, epoch: int, pos: int = 0) -> None:
    """Write ``epoch`` into the batch at ``pos`` in place (outside the CRC, as Kafka's
    ``DefaultRecordBatch.setPartitionLeaderEpoch``)."""
    struct.pack_into(">i", batch, pos + 12, epoch)


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


Source = Union[bytes, bytearray, memoryview, Callable[[int, int], bytes]]


class BatchIterator:
    """One walk over the batches in ``[start, end)`` of a segment's bytes (see the module docstring).

    ``source`` is a buffer (``bytes``, ``bytearray``, ``memoryview``, ``mmap``; ``end``
    defaults to, and is capped at, its length) or a callable ``read(position, n) -> bytes``
    (``end`` required), called for chunks of ``chunk`` bytes (more when one batch is larger
    and its CRC is checked), so a walk over a large file holds one chunk at a time. Positions are
    those of the source; messages name ``at + position`` (``at``: where a buffer sits in its
    file) and ``where`` (the file).

    Iterating yields ``(position, header)``; afterwards (or after the caller breaks out):

    - ``position``: the start of the batch the walk stopped at (the one last yielded, if
      the caller stopped there), or ``end`` when it walked everything;
    - ``error``: why it stopped, a :class:`CorruptRecordError`, or None;
    - ``header``: that batch's header when it parsed (a torn or CRC-failed batch), else None;
    - ``torn``: True when the data ended inside that batch or its header (a torn tail, or
      the end of a read window), False for a batch that is there but wrong.

    Offset checks (FORMAT.md §2.4): with ``first_offset``, the first batch's base offset must
    be ≥ it (exactly it with ``contiguous``), every later batch's ≥ (exactly, with
    ``contiguous``) the previous batch's last offset + 1, and every last offset
    < ``end_offset`` (when given). A batch failing them stops the walk like a bad CRC
    (``torn`` False, ``header`` set). ``next_offset`` is the offset after the last batch the
    walk went past (``first_offset`` before any): where the batch at ``position`` should
    start, or, after a complete walk, where the next segment should.

    Example::

        >>> batches = BatchIterator(segment_bytes)
        >>> offsets = [h.base_offset for _, h in batches]
        >>> batches.error is None or batches.position    # where a torn tail starts
    """

    __slots__ = ("where", "check_crc", "start", "end", "position", "error", "header", "torn",
                 "first_offset", "end_offset", "contiguous", "next_offset", "_source", "_chunk", "_at")

    def __init__(self, source: Source, start: int = 0, end: Optional[int] = None, *, where: str = "<buffer>",
                 check_crc: bool = True, chunk: int = _READ_CHUNK, at: int = 0,
                 first_offset: Optional[int] = None, end_offset: Optional[int] = None,
                 contiguous: bool = False) -> None:
        if callable(source):
            if end is None:
                raise TypeError("BatchIterator over a read callable needs an end position")
        else:
            end = len(source) if end is None else min(end, len(source))   # a buffer holds [0, end)
        self._source = source
        self.where = where
        self.check_crc = check_crc
        self.start = self.position = start
        self.end = end
        self._chunk = max(chunk, HEADER_SIZE)
        self._at = at
        self.first_offset = first_offset
        self.end_offset = end_offset
        self.contiguous = contiguous
        self.next_offset: Optional[int] = first_offset
        self.error: Optional[CorruptRecordError] = None
        self.header: Optional[BatchHeader] = None
        self.torn = False

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        source, where, at, end, check = self._source, self.where, self._at, self.end, self.check_crc
        read = source if callable(source) else None
        buf, base = (b"", -1) if read is not None else (source, 0)   # buf holds positions [base, ...)
        self.error = self.header = None
        self.torn = False
        pos = self.start
        expect = self.next_offset = self.first_offset   # None: no offset checks
        limit = _NO_LIMIT if self.end_offset is None else self.end_offset
        exact = self.contiguous
        while pos < end:
            off = pos - base
            have = len(buf) - off
            if have < HEADER_SIZE and read is not None:
                buf, base, off = read(pos, min(self._chunk, end - pos)), pos, 0
                have = len(buf)
            if have < HEADER_SIZE:
                self._stop(pos, None, True, CorruptRecordError(
                    f"{where}: truncated batch header at position {at + pos} ({max(have, 0)} of {HEADER_SIZE} bytes)"))
                return
            try:
                h = _parse(buf, off, at + pos, where)
            except CorruptRecordError as exc:
                self._stop(pos, None, False, exc)
                return
            size = BATCH_OVERHEAD + h.batch_length
            if pos + size > end:
                self._stop(pos, h, True, CorruptRecordError(
                    f"{where}: truncated batch at position {at + pos}: needs {size} bytes, {end - pos} present"))
                return
            last = h.base_offset + h.last_offset_delta
            if expect is not None and (h.base_offset != expect if exact else h.base_offset < expect) \
                    or last >= limit:
                self._stop(pos, h, False, self._offset_error(h, at + pos, expect, limit))
                return
            if check:
                if off + size > len(buf):   # only with a read callable: a buffer holds [0, end)
                    buf, base, off = read(pos, max(self._chunk, size)), pos, 0
                actual = _crc32(memoryview(buf)[off + CRC_START:off + size])
                if actual != h.crc:
                    self._stop(pos, h, False, _crc_error(where, at + pos, h, actual))
                    return
            self.position, self.header = pos, h
            yield pos, h
            if self.error is not None:   # rejected by the caller
                return
            pos += size
            expect = self.next_offset = last + 1
        self.position, self.header = pos, None

    def _offset_error(self, h: BatchHeader, pos: int, expect: Optional[int], limit: int) -> CorruptRecordError:
        last = h.base_offset + h.last_offset_delta
        if expect is not None and h.base_offset != expect and (self.contiguous or h.base_offset < expect):
            if self.contiguous:
                why = f"expected {expect} (offsets are contiguous here)"
            else:
                why = f"below {expect}, the least offset it may have"
            return CorruptRecordError(
                f"{self.where}: batch at position {pos} has base offset {h.base_offset}, {why}")
        return CorruptRecordError(
            f"{self.where}: batch at position {pos} has offsets {h.base_offset}..{last}, "
            f"past the segment's last possible offset {limit - 1}")

    def _stop(self, pos: int, header: Optional[BatchHeader], torn: bool, error: CorruptRecordError) -> None:
        self.position, self.header, self.torn, self.error = pos, header, torn, error

    def reject(self, error: CorruptRecordError) -> None:
        """Stop the walk at the batch just yielded, for the caller's own reason ``error``
        (offsets out of range, records that do not decode): ``position``, ``header`` and
        ``error`` then describe it like any other stop. Iteration ends there."""
        self.error = error
        self.torn = False

    def raise_error(self) -> None:
        """Raise ``error`` if the walk stopped at a batch it could not take."""
        if self.error is not None:
            raise self.error


def iter_batches(buf, start: int = 0, end: Optional[int] = None, *, where: str = "<buffer>",
                 check_crc: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each batch in ``buf[start:end]``, verified.

    :class:`BatchIterator`'s walk, raising :class:`CorruptRecordError` where it stops;
    callers that want to skip corruption use the iterator and decide (FORMAT.md §5).
    """
    batches = BatchIterator(buf, start, end, where=where, check_crc=check_crc)
    yield from batches
    batches.raise_error()
