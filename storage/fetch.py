"""Decoding what a read fetched from one segment (storage/FORMAT.md §5).

The log finds, under its lock, the bytes starting at the batch that holds the requested
offset (:class:`Chunk`); everything here runs outside the lock, on those bytes:

- :func:`chunk_batches`: the whole, CRC-verified batches at the start of the chunk — the
  first always, then while the total stays within ``max_bytes`` — walked with the shared
  :class:`kafkasim.records.framing.BatchIterator`. ``base_offset`` lies outside the CRC (as
  in Kafka), so the offsets are also checked to increase and stay inside the segment's
  range. A bad *first* batch raises :class:`CorruptRecordError` (file, position, reason); a
  bad later one ends the list (the read that starts there raises).
- :func:`chunk_records` / :func:`chunk_columns`: their records as :class:`Record` objects or
  column-wise (:class:`RecordColumns`), records before the requested offset dropped.
- :func:`decode_batch_records`: one CRC-verified batch as :class:`Record` objects.

Invariant: no record is returned from a batch whose CRC did not match.

Pure functions over bytes; thread-safe. The cyclic GC is paused while decoding
(see :mod:`kafkasim.storage.validation`).
"""

from __future__ import annotations

import gc
from bisect import bisect_left
from itertools import repeat
from operator import add
from typing import NamedTuple

import msgpack

from kafkasim.errors import CorruptRecordError
from kafkasim.records import record_batch as rb
from kafkasim.records.framing import BATCH_OVERHEAD, HEADER_SIZE, NO_SEQUENCE, BatchHeader, BatchIterator
from kafkasim.types import Record

__all__ = ["Chunk", "RecordColumns", "chunk_batches", "chunk_records", "chunk_columns", "decode_batch_records"]

_unpackb = msgpack.unpackb
_tuple_new = tuple.__new__


class Chunk(NamedTuple):
    """Bytes read from segment file ``path`` at byte ``position``, the segment holding offsets
    ``[base_offset, end_offset)``; ``data`` starts with a batch header (empty: nothing to read)."""

    data: bytes
    path: str
    position: int
    base_offset: int
    end_offset: int


EMPTY_CHUNK = Chunk(b"", "", 0, 0, 0)


class RecordColumns(NamedTuple):
    """Records of a read, column-wise (:meth:`kafkasim.storage.log.Log.read_columns`): five
    equal-length lists.

    Row ``i`` is the record at ``offsets[i]`` (increasing); ``headers[i]`` is a tuple of
    ``(key, value)`` tuples. The same records :meth:`~kafkasim.storage.log.Log.read`
    returns, without the producer fields (``producer_id``/``producer_epoch``/``sequence``).
    """

    offsets: list
    timestamps: list
    keys: list
    values: list
    headers: list


def chunk_batches(chunk: Chunk, max_bytes: int) -> list[tuple[int, BatchHeader]]:
    """``(position in chunk.data, header)`` of the batches a read returns (module docstring)."""
    data, where, at, lo, hi = chunk
    batches = BatchIterator(data, where=where, at=at)
    out = []
    floor = lo
    for pos, h in batches:
        if out and pos + h.size > max_bytes:
            break
        last = h.base_offset + h.last_offset_delta
        if h.base_offset < floor or last >= hi:
            batches.reject(CorruptRecordError(
                f"{where}: batch at position {at + pos} has offsets {h.base_offset}..{last}, outside "
                f"the expected range {floor}..{hi - 1}"))
            break
        floor = last + 1
        out.append((pos, h))
    # the data ends inside a header: the end of the read window, not a problem of the batch
    if not out and batches.error is not None and not (batches.torn and batches.header is None):
        raise batches.error
    return out


def chunk_records(chunk: Chunk, offset: int, max_bytes: int) -> list[Record]:
    """The records of :func:`chunk_batches` with offset ≥ ``offset``."""
    data, where, at = chunk.data, chunk.path, chunk.position
    out: list[Record] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for pos, h in chunk_batches(chunk, max_bytes):
            recs = decode_batch_records(data, pos, h, offset, f"{where} (batch at position {at + pos})")
            if out:
                out.extend(recs)
            else:
                out = recs
    finally:
        if gc_was_enabled:
            gc.enable()
    return out


def chunk_columns(chunk: Chunk, offset: int, max_bytes: int) -> RecordColumns:
    """:func:`chunk_records` column-wise, built without a Python-level loop per record
    (``decode_columns``); a CRC-valid batch whose records are malformed raises."""
    data, where, at = chunk.data, chunk.path, chunk.position
    offs: list = []
    tss: list = []
    keys: list = []
    values: list = []
    headers: list = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for pos, h in chunk_batches(chunk, max_bytes):
            deltas, tsds, k, v, hd = rb.decode_columns(data, pos, h, where=f"{where} (batch at position {at + pos})")
            n = len(deltas)
            if not n:
                continue
            base = h.base_offset
            if deltas[-1] == n - 1:     # decode_columns checked deltas == 0..n-1
                offs.extend(range(base, base + n))
            else:
                offs.extend(map(add, deltas, repeat(base)))
            try:
                tss.extend(map(add, tsds, repeat(h.base_timestamp)))
            except TypeError as exc:
                raise CorruptRecordError(
                    f"{where} (batch at position {at + pos}): undecodable records in batch "
                    f"at position {pos}: {exc}") from exc
            keys.extend(k)
            values.extend(v)
            headers.extend(hd)
    finally:
        if gc_was_enabled:
            gc.enable()
    if offs and offs[0] < offset:
        i = bisect_left(offs, offset)
        return RecordColumns(offs[i:], tss[i:], keys[i:], values[i:], headers[i:])
    return RecordColumns(offs, tss, keys, values, headers)


def decode_batch_records(buf, pos: int, h: BatchHeader, min_offset: int = 0,
                         where: str = "<buffer>") -> list[Record]:
    """The records of a CRC-verified batch as :class:`Record` objects (offset ≥ ``min_offset``).

    The lean read path: one ``msgpack.unpackb`` of the payload and one tuple built per
    record; the shape is trusted because the CRC matched (``verify-log`` checks it fully).
    """
    try:
        body = _unpackb(memoryview(buf)[pos + HEADER_SIZE:pos + BATCH_OVERHEAD + h.batch_length],
                        use_list=False, raw=False)
        if len(body) != h.record_count:
            raise ValueError(f"{len(body)} records, header says {h.record_count}")
        base, ts0, pid, ep, seq0 = h.base_offset, h.base_timestamp, h.producer_id, h.producer_epoch, h.base_sequence
        if seq0 >= 0:
            recs = [_tuple_new(Record, (base + d, ts0 + t, k, v, hd, pid, ep, seq0 + d))
                    for d, t, k, v, hd in body]
        else:
            recs = [_tuple_new(Record, (base + d, ts0 + t, k, v, hd, pid, ep, NO_SEQUENCE))
                    for d, t, k, v, hd in body]
    except Exception as exc:  # msgpack raises assorted types on garbage; unpacking raises ValueError/TypeError
        raise CorruptRecordError(f"{where}: undecodable records in batch at position {pos}: {exc}") from exc
    if min_offset > base and recs:
        recs = [r for r in recs if r[0] >= min_offset]
    return recs
