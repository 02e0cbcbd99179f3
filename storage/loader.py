"""Opening a partition directory: leftovers, segments, recovery (Kafka's ``LogLoader``; storage/FORMAT.md §1.1, §4).

:func:`load_segments` turns a directory into a :class:`~kafkasim.storage.segments.LogSegments`,
in numbered steps:

1. Leftovers of an interrupted delete/compaction/rename are removed; an interrupted
   compaction swap (``<base>.log.swap``) is completed; index files without their ``.log``
   are removed (FORMAT.md §1.1). A segment named past the offset range (a base offset
   above 2^63 - 1, Java's ``Long.MAX_VALUE``) is refused: the open fails naming it. A
   directory written in the old record format (format version 1) is refused with
   ``OldLogFormatError`` naming ``kafkasim upgrade-data-dir`` (:mod:`kafkasim.storage.data_format`).
2. The clean-shutdown marker is read and deleted (from here on a crash is unclean).
3. No segment: an empty active segment 0 is created.
4. Every segment but the last is closed: only its size is taken (no read, no index). Each
   segment whose base offset is at or past the cleaner checkpoint is contiguous (never
   compacted, FORMAT.md §2.4): its reads then require offsets without gaps. A compaction
   swap completed in step 1 moves the checkpoint past its segment (written by an older
   version that set the checkpoint only after swapping).
5. The last is the active segment. If the marker names it with its current size, its
   offset index is loaded and checked and only the batches after the last entry are
   walked (CRC-checked) to find the log end offset, which must equal the recorded one.
6. Otherwise it is validated batch by batch from the recovery point (trusted only when it
   names this segment and lands on a batch boundary with the recorded next offset) or from
   position 0; the first invalid batch and everything after it are truncated and reported.

So the cost of opening is bounded by one segment, and after a flush by the unflushed tail.

Invariant: what is reported (truncations, rebuilt indexes, completed swaps) goes through
``report`` (the log's recovery report and a warning). On failure every segment opened so
far is closed again and the error propagates.

Thread-safety: called by the log's constructor before the log is shared; not re-entrant
for one directory.
"""

from __future__ import annotations

import os
from typing import Callable

from kafkasim.clock import Clock
from kafkasim.config import LogConfig
from kafkasim.errors import KafkaStorageError
from kafkasim.storage import checkpoints, data_format, layout
from kafkasim.storage.files import fsync_dir, storage_errors
from kafkasim.storage.recovery import open_clean, recover
from kafkasim.storage.segment import LogSegment
from kafkasim.storage.segments import LogSegments

__all__ = ["load_segments", "remove_leftovers"]


def load_segments(directory: str, config: LogConfig, report: Callable[[str], None], clock: Clock,
                  max_open_closed: int) -> LogSegments:
    """The segments of ``directory``, recovered (steps in the module docstring); ``clock``
    starts the active segment's ``segment.ms`` age at the open, as Kafka does."""
    segments = LogSegments(max_open_closed, checkpoints.contiguous_from(directory))
    try:
        _load(directory, config, report, clock, segments)
    except BaseException:
        segments.close_all()
        raise
    return segments


def _load(directory: str, config: LogConfig, report: Callable[[str], None], clock: Clock,
          segments: LogSegments) -> None:
    swapped = remove_leftovers(directory, report)
    listed = layout.list_segments(directory)
    for base, path in listed:
        if base > layout.MAX_BASE_OFFSET:
            raise KafkaStorageError(
                f"{path}: segment base offset {base} is past the offset range (at most {layout.MAX_BASE_OFFSET}); "
                f"not a segment this log wrote: move it away to open the log")
    data_format.check_partition(directory)
    bases = [b for b, _ in listed]
    if swapped:
        later = [b for b in bases if b > max(swapped)]
        compacted_to = later[0] if later else max(swapped) + 1
        if compacted_to > segments.contiguous_from:
            checkpoints.write_cleaner_checkpoint(directory, compacted_to)
            segments.compacted_below(compacted_to)
    interval = config.index_interval_bytes
    clean = checkpoints.take_clean_shutdown(directory)
    if not bases:
        segments.add(LogSegment.create(directory, 0, interval, report))
        fsync_dir(directory)
        return
    for base in bases[:-1]:
        segments.add(LogSegment.open_closed(directory, base, interval, report))
    active = LogSegment(directory, bases[-1], interval, report)
    segments.add(active)
    opened = False
    if clean is not None:
        with storage_errors("stat", active.path):
            actual = os.stat(active.path).st_size
        if clean.base_offset == active.base_offset and clean.size == actual:
            opened = open_clean(active) and active.next_offset == clean.log_end_offset
            if not opened:
                active.index.reset()
                active.time_index.reset()
                active.loaded = False
    if not opened:
        rp = checkpoints.read_recovery_point(directory)
        if rp is not None and rp.base_offset == active.base_offset and rp.next_offset >= active.base_offset \
                and rp.position >= 0:
            line = recover(active, rp.position, rp.next_offset, rp.max_timestamp, rp.offset_of_max_timestamp)
        else:
            line = recover(active, 0, active.base_offset, -1, -1)
        if line:
            report(line)
    active.first_append_ms = clock.now_ms() if active.size else None


def remove_leftovers(directory: str, report: Callable[[str], None]) -> list[int]:
    """Finish or undo what an interrupted delete/compaction left behind (FORMAT.md §1.1);
    return the base offsets of the segments whose compaction swap it completed."""
    swapped = []
    with storage_errors("list", directory):
        names = os.listdir(directory)
    log_swap = layout.LOG_SUFFIX + layout.SWAP_SUFFIX
    for name in sorted(names):
        path = os.path.join(directory, name)
        with storage_errors("clean up", path):
            if name.endswith(layout.LEFTOVER_SUFFIXES):
                os.unlink(path)
            elif name.endswith(log_swap):
                final = path[:-len(layout.SWAP_SUFFIX)]
                for suffix in (layout.INDEX_SUFFIX, layout.TIMEINDEX_SUFFIX):
                    idx = final[:-len(layout.LOG_SUFFIX)] + suffix
                    if os.path.exists(idx):
                        os.unlink(idx)
                os.replace(path, final)
                report(f"{final}: completed an interrupted compaction swap")
                base = layout.parse_segment_name(os.path.basename(final))
                if base is not None:
                    swapped.append(base)
            elif name.endswith(layout.SWAP_SUFFIX):
                os.unlink(path)
    # index files without their .log are orphans of an interrupted delete
    with storage_errors("list", directory):
        names = os.listdir(directory)
    logs = {n[:-len(layout.LOG_SUFFIX)] for n in names if n.endswith(layout.LOG_SUFFIX)}
    for name in names:
        for suffix in (layout.INDEX_SUFFIX, layout.TIMEINDEX_SUFFIX, layout.TXN_INDEX_SUFFIX):
            if name.endswith(suffix) and name[:-len(suffix)] not in logs:
                with storage_errors("remove orphan index", os.path.join(directory, name)):
                    os.unlink(os.path.join(directory, name))
    return swapped
