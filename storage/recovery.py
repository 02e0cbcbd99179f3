"""Opening the active segment: after a clean shutdown, or by recovery (storage/FORMAT.md §4).

The loader (:mod:`kafkasim.storage.loader`, steps 5 and 6) calls one of these on the last
segment of a partition directory; closed segments are never read on open.

- :func:`open_clean`: after a clean close, load and check the offset index and walk only
  the batches after its last entry (CRC and offsets checked) to find the log end offset.
  Changes nothing on disk; False when anything fails its checks.
- :func:`recover`: validate batches from the recovery point (or position 0) to the end of
  the file — header, CRC, and offsets contiguous from the recovery point (FORMAT.md §2.4)
  — re-applying the index rule as it goes, and truncate the first invalid batch and
  everything after it.

Invariants: the active segment is never compacted, so its offsets are checked to be
contiguous whatever the cleaner checkpoint says; nothing is lost without a report line
(a truncation, or a recovery point past the end of the file: flushed data missing).

Thread-safety: called by the loader before the log is shared.
"""

from __future__ import annotations

from typing import Optional

from kafkasim.errors import CorruptRecordError
from kafkasim.storage.index import IndexCorruptError
from kafkasim.storage.segment import LogSegment

__all__ = ["open_clean", "recover"]


def recover(seg: LogSegment, start: int, start_offset: int, max_ts: int, offset_of_max_ts: int) -> Optional[str]:
    """Validate ``seg``'s batches from ``start`` (a batch boundary whose batch has base offset
    ``start_offset``, or 0) to the end of the file; return a report line if it truncated.

    Keeps the index entries below ``start`` (rebuilding both indexes when they do not
    check out), re-applies the index rule over the validated range, and truncates the first
    invalid batch and everything after it. ``max_ts``/``offset_of_max_ts`` describe the
    batches before ``start`` (-1: none).
    """
    size = seg.refresh_size()
    if start > size:
        # the file lost bytes that were flushed (cut, or replaced): say so, the loss is not silent
        seg.report(f"{seg.path}: the recovery point (offset {start_offset}, position {start}) lies past "
                   f"the segment's {size} bytes: flushed records are missing")
        start = 0
    try:
        seg.index.load(max(size, 1))
        seg.index.truncate_to_position(start)
        ibase, ipos = seg.index.lookup(1 << 62)
        seg.check_index_entry(ibase, ipos)
        seg.time_index.load(1 << 32)
        seg.time_index.truncate_to_offset(start_offset)
    except IndexCorruptError as exc:
        seg.report(f"{seg.path}: index rebuilt ({exc})")
        start = 0
    if start > 0:
        # the recovery point must land on a batch boundary whose next offset it names
        walk = seg.walk(ipos, ibase, chunk=65536, contiguous=True)
        nxt = -1
        for p, h in walk:
            if p >= start:
                break
        if walk.error is None and walk.position == start:
            nxt = walk.next_offset
        if nxt != start_offset:
            seg.report(f"{seg.path}: recovery point (offset {start_offset}, position {start}) "
                       f"does not match the log; validating the whole segment")
            start = 0
    if start == 0:
        seg.index.reset()
        seg.time_index.reset()
        start_offset, max_ts, offset_of_max_ts = seg.base_offset, -1, -1
    seg.max_timestamp, seg.offset_of_max_timestamp = max_ts, offset_of_max_ts
    last = seg.time_index.last_entry
    if last is not None and last[0] > seg.max_timestamp:
        seg.max_timestamp, seg.offset_of_max_timestamp = last
    batches = seg.walk(start, start_offset, check_crc=True, chunk=1 << 20, contiguous=True)
    for pos, h in batches:
        seg.index_before(h.base_offset, pos)
        seg.account(h)
    next_offset = batches.next_offset
    pos = batches.position   # the end, or the first batch that is torn or invalid
    report = None
    if pos < seg.size:
        report = (f"{seg.path}: truncated {seg.size - pos} bytes at position {pos} "
                  f"(log end offset {next_offset}): {batches.error}")
        seg.truncate(pos)
    seg.index.flush(fsync=True)
    seg.time_index.flush(fsync=True)
    seg.next_offset = next_offset
    seg.loaded = True
    return report


def open_clean(seg: LogSegment) -> bool:
    """Open the active segment ``seg`` after a clean shutdown: load its indexes and walk the
    batches after the last index entry (CRC and offsets checked) to find the next offset.

    Returns False (nothing changed on disk) when anything fails its checks; the caller
    then runs :func:`recover`.
    """
    size = seg.refresh_size()
    try:
        seg.index.load(max(size, 1))
        base, pos = seg.index.lookup(1 << 62)
        seg.check_index_entry(base, pos)
        batches = seg.walk(pos, base, check_crc=True, chunk=1 << 20, contiguous=True)
        for _, h in batches:
            if h.max_timestamp > seg.max_timestamp:
                seg.max_timestamp = h.max_timestamp
                seg.offset_of_max_timestamp = h.base_offset + h.last_offset_delta
        batches.raise_error()
        next_offset = batches.next_offset
        seg.time_index.load(next_offset - 1 - seg.base_offset)
        last = seg.time_index.last_entry
        if last is not None:
            seg.check_time_entry(*last, final=True)
    except (IndexCorruptError, CorruptRecordError):
        seg.index.reset()
        seg.time_index.reset()
        seg.max_timestamp = seg.offset_of_max_timestamp = -1
        return False
    last = seg.time_index.last_entry
    if last is not None and last[0] >= seg.max_timestamp:
        seg.max_timestamp, seg.offset_of_max_timestamp = last
    seg.next_offset = next_offset
    seg.loaded = True
    return True
