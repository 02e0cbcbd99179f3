"""Input planning of the kafkasim data source: which bytes of which segments each Spark task reads.

Like Spark's file sources (``FilePartition.getFilePartitions``, ``maxSplitBytes``):

1. ``total`` = Σ (segment size + ``open_cost``) over the segments read;
   ``bytes_per_core`` = ``total / min_partitions``; the split size is
   ``min(max_partition_bytes, max(open_cost, bytes_per_core))`` — at most 128 MiB by
   default, and small logs still spread over every core. One difference from Spark:
   when that cap applies, the split size is lowered to ``total / (min_partitions ×
   rounds)`` with ``rounds = ⌈total / (min_partitions × max_partition_bytes)⌉``, so the
   tasks come in whole rounds of equal size over the cores. Decoding segments is CPU
   work in Python, not a cheap columnar read: with Spark's rule 8 segments of 34 MB on
   2 cores make tasks of 3, 3 and 2 segments, and the third runs alone on one core.
2. A segment larger than the split size is cut into pieces at batch boundaries found
   through its offset index (``.index``, storage/FORMAT.md §3.1): a cut is an index
   entry at least a split size past the previous cut, and it is kept only when the batch
   header at that position parses and names the offset the entry names (an index is
   derived data and may be stale or damaged; a cut it cannot vouch for is dropped, and the
   piece before it simply reads further). No index, or no entry that checks out: the
   segment is one piece. One 1 GiB segment gives about 10 pieces on 2 cores.
3. Pieces are packed in (topic, partition, offset) order: a piece joins the current task
   while the task's bytes + the piece's size stay within the split size; each piece adds
   ``open_cost`` to its task's count (so many tiny segments do not all land in one task).

``max_partition_bytes=0`` keeps the old plan: one task per segment, no cuts.

Invariants: the pieces of a segment cover ``[0, size)`` exactly, in order, without
overlap; a piece's ``first_offset`` is the base offset of the batch at its ``start``
(checked), and its ``end_offset`` is the next piece's ``first_offset`` (the segment's
``end_offset`` for the last piece), so the reader's offset checks (FORMAT.md §2.4) hold
per piece. Every segment read appears in exactly one task. Pure functions over plain
data (index bytes are read through :class:`LogDir`); thread-safe.
"""

from __future__ import annotations

import struct
from typing import Callable, NamedTuple, Optional, Sequence

from kafkasim.errors import CorruptRecordError, KafkaStorageError
from kafkasim.records.framing import HEADER_SIZE, decode_header
from kafkasim.spark_jobs.logdir import LogDir, SegmentRef
from kafkasim.storage import layout

__all__ = ["Piece", "whole", "split_size", "cut_points", "plan", "MAX_PARTITION_BYTES", "OPEN_COST_BYTES"]

MAX_PARTITION_BYTES = 128 << 20   # spark.sql.files.maxPartitionBytes's default
OPEN_COST_BYTES = 4 << 20         # spark.sql.files.openCostInBytes's default

_ENTRY = struct.Struct(">II")     # offset index entry: relative offset, position


class Piece(NamedTuple):
    """Bytes ``[start, end)`` of one segment, starting with the batch at ``first_offset``."""

    seg: SegmentRef
    start: int
    end: int
    first_offset: int
    end_offset: Optional[int]   # the next piece's first offset; the segment's end_offset for the last

    @property
    def size(self) -> int:
        return self.end - self.start


def whole(seg: SegmentRef) -> Piece:
    """The piece that is the whole segment."""
    return Piece(seg, 0, seg.size, seg.base_offset, seg.end_offset)


def split_size(sizes: Sequence[int], max_partition_bytes: int = MAX_PARTITION_BYTES,
               open_cost: int = OPEN_COST_BYTES, min_partitions: int = 1) -> int:
    """Spark's ``maxSplitBytes`` for files of ``sizes`` (step 1 of the module docstring).

    >>> split_size([10 << 20] * 4, min_partitions=2)      # 56 MiB over 2 cores
    29360128
    >>> split_size([1 << 30], min_partitions=2)           # 1028 MiB: 5 rounds of 2 tasks, ≤ 128 MiB
    107793613
    """
    cores = max(int(min_partitions), 1)
    total = sum(s + open_cost for s in sizes)
    per_core = total // cores
    size = max(1, min(max_partition_bytes, max(open_cost, per_core)))
    if size == max_partition_bytes and per_core > max_partition_bytes:
        rounds = -(-total // (cores * max_partition_bytes))
        size = max(open_cost, -(-total // (cores * rounds)), 1)
    return size


def cut_points(index: bytes, seg: SegmentRef, target: int,
               header_at: Callable[[int], bytes]) -> list[tuple[int, int]]:
    """``(position, offset)`` of each cut of ``seg`` (step 2): index entries at least ``target``
    bytes past the previous cut whose batch header checks out (``header_at(pos)`` returns the
    bytes at ``pos``, at least 61 of them when the file has them)."""
    cuts: list[tuple[int, int]] = []
    last_pos, last_off = 0, seg.base_offset
    usable = len(index) - len(index) % _ENTRY.size
    for rel, pos in _ENTRY.iter_unpack(index[:usable]):
        off = seg.base_offset + rel
        if pos <= last_pos or off <= last_off or pos >= seg.size:
            continue      # not increasing or past the file: a damaged entry, never a cut
        if pos - last_pos < target or seg.size - pos < target // 4:
            continue      # too close to the previous cut, or leaves a sliver at the end
        try:
            h = decode_header(header_at(pos), 0, where=seg.path)
        except CorruptRecordError:
            continue
        if h.base_offset != off:
            continue
        cuts.append((pos, off))
        last_pos, last_off = pos, off
    return cuts


def _pieces(logdir: LogDir, seg: SegmentRef, target: int) -> list[Piece]:
    if seg.size <= target:
        return [whole(seg)]
    index_path = seg.path[: -len(layout.LOG_SUFFIX)] + layout.INDEX_SUFFIX
    try:
        index = logdir.read_bytes(index_path)
    except KafkaStorageError:      # no index (or unreadable): read the segment in one piece
        return [whole(seg)]
    cuts = cut_points(index, seg, target, lambda pos: logdir.read_range(seg.path, pos, HEADER_SIZE))
    bounds = [(0, seg.base_offset)] + cuts
    out = []
    for i, (start, first) in enumerate(bounds):
        end, end_off = bounds[i + 1] if i + 1 < len(bounds) else (seg.size, seg.end_offset)
        out.append(Piece(seg, start, end, first, end_off))
    return out


def plan(logdir: Optional[LogDir], segs: Sequence[SegmentRef], max_partition_bytes: int = MAX_PARTITION_BYTES,
         open_cost: int = OPEN_COST_BYTES, min_partitions: int = 1, *, cut: bool = True) -> list[list[Piece]]:
    """The tasks (lists of pieces) that read ``segs`` (steps 1–3; ``max_partition_bytes=0``:
    one task per whole segment; ``cut=False``: segments are never cut, only packed)."""
    if not max_partition_bytes:
        return [[whole(s)] for s in segs]
    target = split_size([s.size for s in segs], max_partition_bytes, open_cost, min_partitions)
    tasks: list[list[Piece]] = []
    used = 0
    for seg in segs:
        for piece in (_pieces(logdir, seg, target) if cut and logdir is not None else [whole(seg)]):
            if tasks and tasks[-1] and used + piece.size <= target:
                tasks[-1].append(piece)
            else:
                tasks.append([piece])
                used = 0
            used += piece.size + open_cost
    return tasks
