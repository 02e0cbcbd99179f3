"""Decoding what a read fetched from one segment (storage/FORMAT.md §5).

The log finds, under its lock, the bytes starting at the batch that holds the requested
offset (:class:`Chunk`); everything here runs outside the lock, on those bytes:

- :func:`chunk_batches`: the whole, CRC-verified batches at the start of the chunk — the
  first always, then while the total stays within ``max_bytes`` — walked with the shared
  :class:`kafkasim.records.framing.BatchIterator`. ``base_offset`` lies outside the CRC (as
  in Kafka), so the walk also checks the offsets (FORMAT.md §2.4): the first batch starts
  where the segment's lookup found it, each later one where the previous ended (contiguous
  segments) or after it (compacted ones), all inside the segment's range. A bad *first*
  batch raises :class:`CorruptRecordError` (file, position, reason); a bad later one ends
  the list (the read that starts there raises).
- :func:`chunk_records` / :func:`chunk_columns`: their records as :class:`Record` objects or
  column-wise (:class:`RecordColumns`), records before the requested offset dropped, with
  the offset after the last batch (where the next read starts, past any compaction gap).
- :func:`decode_batch_records`: one CRC-verified batch as :class:`Record` objects.

Invariants: no record is returned from a batch whose CRC did not match, nor from one whose
offsets fail the checks of FORMAT.md §2.4 (so never under another offset).

Pure functions over bytes; thread-safe. The cyclic GC is paused while decoding
(see :mod:`kafkasim.storage.validation`).
"""

from __future__ import annotations

import gc
from bisect import bisect_left
from typing import NamedTuple

from kafkasim.records import record_batch as rb
from kafkasim.records.framing import NO_SEQUENCE, BatchHeader, BatchIterator
from kafkasim.types import Record

__all__ = ["Chunk", "ReadResult", "RecordColumns", "empty_chunk", "chunk_batches", "chunk_records", "chunk_columns",
           "decode_batch_records"]

_tuple_new = tuple.__new__


class Chunk(NamedTuple):
    """Bytes read from segment file ``path`` at byte ``position``, starting with the header of the
    batch whose base offset the lookup found to be ``first_offset``; the segment holds offsets
    below ``end_offset`` and is ``contiguous`` (never compacted, FORMAT.md §2.4) or not.
    Empty ``data``: nothing to read, the log ends at ``first_offset``."""

    data: bytes
    path: str
    position: int
    first_offset: int
    end_offset: int
    contiguous: bool


def empty_chunk(log_end_offset: int) -> Chunk:
    """The chunk of a read at (or stepping up to) the log end offset."""
    return Chunk(b"", "", 0, log_end_offset, log_end_offset, True)


class ReadResult(NamedTuple):
    """What :meth:`kafkasim.storage.log.Log.fetch` returns: ``records`` (a list of :class:`Record`,
    or :class:`RecordColumns`) and ``next_offset``, the offset to read next: one past the last
    batch read, so past a compaction gap that ends a batch or a segment (as Kafka's consumer
    takes its next fetch offset from the last batch); the log end offset when nothing is left."""

    records: object
    next_offset: int


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
    data, where, at, first, hi, contiguous = chunk
    batches = BatchIterator(data, where=where, at=at, first_offset=first, end_offset=hi, contiguous=contiguous)
    out = []
    for pos, h in batches:
        if out and pos + h.size > max_bytes:
            break
        out.append((pos, h))
    # the data ends inside a header: the end of the read window, not a problem of the batch
    if not out and batches.error is not None and not (batches.torn and batches.header is None):
        raise batches.error
    return out


def chunk_records(chunk: Chunk, offset: int, max_bytes: int) -> ReadResult:
    """The records of :func:`chunk_batches` with offset ≥ ``offset``, and the offset after the
    last of those batches (``chunk.first_offset`` when there is none).

    The result is built before the cyclic GC is resumed: an allocation between resuming it and
    the caller dropping its previous result would start a collection over every record just
    decoded (the allocation count includes them), once per read."""
    data, where, at = chunk.data, chunk.path, chunk.position
    out: list[Record] = []
    if not data:
        return ReadResult(out, chunk.first_offset)
    batches = chunk_batches(chunk, max_bytes)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for pos, h in batches:
            recs = decode_batch_records(data, pos, h, offset, f"{where} (batch at position {at + pos})")
            if out:
                out.extend(recs)
            else:
                out = recs
        result = ReadResult(out, _next_offset(chunk, batches))
    finally:
        if gc_was_enabled:
            gc.enable()
    return result


def _next_offset(chunk: Chunk, batches: list[tuple[int, BatchHeader]]) -> int:
    if not batches:
        return chunk.first_offset
    h = batches[-1][1]
    return h.base_offset + h.last_offset_delta + 1


def chunk_columns(chunk: Chunk, offset: int, max_bytes: int) -> ReadResult:
    """:func:`chunk_records` column-wise, built without a Python-level loop per record
    (``decode_columns``); a CRC-valid batch whose records are malformed raises."""
    data, where, at = chunk.data, chunk.path, chunk.position
    columns = offs, tss, keys, values, headers = [], [], [], [], []
    if not data:
        return ReadResult(RecordColumns(offs, tss, keys, values, headers), chunk.first_offset)
    batches = chunk_batches(chunk, max_bytes)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for pos, h in batches:
            rb.extend_columns(columns, data, pos, h, where=f"{where} (batch at position {at + pos})")
    finally:
        if gc_was_enabled:
            gc.enable()
    next_offset = _next_offset(chunk, batches)
    if offs and offs[0] < offset:
        i = bisect_left(offs, offset)
        return ReadResult(RecordColumns(offs[i:], tss[i:], keys[i:], values[i:], headers[i:]), next_offset)
    return ReadResult(RecordColumns(offs, tss, keys, values, headers), next_offset)


def decode_batch_records(buf, pos: int, h: BatchHeader, min_offset: int = 0,
                         where: str = "<buffer>") -> list[Record]:
    """The records of a CRC-verified batch as :class:`Record` objects (offset ≥ ``min_offset``).

    The lean read path: one ``decode_columns`` (C) of the records section and one tuple
    built per record; sequences are ``base_sequence + offset_delta`` (wrapping past
    2**31 - 1 to 0, as Kafka's ``DefaultRecordBatch.incrementSequence``).
    """
    deltas, tsds, keys, values, headers = rb.decode_columns(buf, pos, h, where=where)
    base, ts0, pid, ep, seq0 = h.base_offset, h.base_timestamp, h.producer_id, h.producer_epoch, h.base_sequence
    if seq0 >= 0:
        recs = [_tuple_new(Record, (base + d, ts0 + t, k, v, hd, pid, ep, (seq0 + d) & 0x7FFFFFFF))
                for d, t, k, v, hd in zip(deltas, tsds, keys, values, headers)]
    else:
        recs = [_tuple_new(Record, (base + d, ts0 + t, k, v, hd, pid, ep, NO_SEQUENCE))
                for d, t, k, v, hd in zip(deltas, tsds, keys, values, headers)]
    if min_offset > base and recs:
        recs = [r for r in recs if r[0] >= min_offset]
    return recs
