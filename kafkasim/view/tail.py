"""Follow one partition directory read-only: the batches appended since the last look.

:class:`PartitionTail` is how the live view reads a log that another process (``kafkasim
serve``, a lab) is writing. It never opens a :class:`~kafkasim.storage.log.Log`, takes no
lock, writes nothing and never truncates: it lists the segment files
(:func:`kafkasim.storage.layout.list_segments`), reads each ``.log`` with plain ``pread``
from where it stopped last time, and walks the new bytes with the one batch walk
(:class:`kafkasim.records.framing.BatchIterator`, CRC checked).

Invariants:
- a batch is counted once, when it is whole and its CRC matches; a torn or growing tail
  (the writer is in the middle of a batch) is left for the next :meth:`poll`, never
  counted and never reported as a problem;
- a batch that is whole but wrong (bad CRC, bad header) stops that segment's reading and is
  reported in :attr:`problems` (file and position), as the offline readers of FORMAT.md §5
  do; the segment is read again from 0 when its file is replaced or shrinks;
- a segment whose file is replaced (compaction swaps in a new file: a new inode) or shrinks
  (recovery truncated a torn tail) is forgotten and read again from position 0; a segment
  that disappears (retention, topic deletion) is forgotten; so the counts always describe
  the files as they are now;
- at most ``budget`` bytes are read per partition per poll (more only to take one batch larger
  than that whole), so one poll stays short on a large data dir: a tail that has more to read
  says so (``behind``) and catches up over polls, oldest segment first;
- ``records`` counts data records: a control batch (a transaction marker, attribute 0x20)
  takes an offset but holds no record a consumer sees, so it is counted in ``markers``.

Thread-safety: not thread-safe; one owner (the view's poller thread) calls :meth:`poll`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Optional

from kafkasim.errors import CorruptRecordError, KafkaStorageError
from kafkasim.records import record_batch as rb
from kafkasim.records.framing import ATTR_CONTROL, BatchHeader, BatchIterator
from kafkasim.storage import layout
from kafkasim.storage.files import storage_errors

__all__ = ["PartitionTail", "DEFAULT_BUDGET"]

DEFAULT_BUDGET = 4 * 1024 * 1024
"""Bytes read per partition per poll at most."""

OnBatch = Callable[[BatchHeader, Optional[tuple]], None]
"""Called for each new batch: its header and, when asked for, its decoded columns
``(offset_deltas, timestamp_deltas, keys, values, headers)``."""


@dataclass
class _Segment:
    base_offset: int
    inode: int
    position: int = 0          # bytes walked (whole, valid batches)
    records: int = 0           # data records in those batches
    markers: int = 0           # control batches (transaction markers) among them
    first_offset: Optional[int] = None
    next_offset: Optional[int] = None   # offset after the last batch walked
    stuck: Optional[str] = None          # why reading stopped at a corrupt batch


class PartitionTail:
    """The batches of one partition directory, followed as they are appended (see module docstring)."""

    def __init__(self, path: str, *, budget: int = DEFAULT_BUDGET) -> None:
        self.path = path
        self.budget = budget
        self._segments: dict[int, _Segment] = {}
        self.behind = False
        self.problems: list[str] = []
        self._left = budget

    # -- what the files hold now ----------------------------------------------------------------
    @property
    def records(self) -> int:
        """Records in the batches walked so far, over the segments that exist now."""
        return sum(s.records for s in self._segments.values())

    @property
    def markers(self) -> int:
        """Control batches (transaction markers) walked so far, over the segments that exist now."""
        return sum(s.markers for s in self._segments.values())

    @property
    def log_start_offset(self) -> int:
        for base in sorted(self._segments):
            s = self._segments[base]
            return s.first_offset if s.first_offset is not None else s.base_offset
        return 0

    @property
    def log_end_offset(self) -> int:
        """The offset after the last whole batch of the last segment (its base offset when empty)."""
        if not self._segments:
            return 0
        last = self._segments[max(self._segments)]
        return last.next_offset if last.next_offset is not None else last.base_offset

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    # -- following ------------------------------------------------------------------------------
    def poll(self, on_batch: Optional[OnBatch] = None, *, decode: bool = False,
             on_rewind: Optional[Callable[[int], None]] = None) -> int:
        """Walk what was appended since the last poll; returns the number of new batches.

        ``on_batch(header, columns)`` is called for each, in offset order; ``columns`` are the
        decoded records when ``decode`` is true (a batch whose records do not decode is
        reported like a corrupt one and stops that segment), else None. ``on_rewind(base)``
        is called before a segment already walked is read again from 0 (its file replaced or
        shrunk), so a reader folding the batches forgets what it learnt from ``base`` on.
        """
        self.problems = []
        self.behind = False
        try:
            listing = layout.list_segments(self.path)
        except OSError:            # the partition directory went away (topic deleted)
            self._segments.clear()
            return 0
        seen = {base for base, _ in listing}
        for base in [b for b in self._segments if b not in seen]:
            del self._segments[base]
        new = 0
        self._left = self.budget
        for base, seg_path in listing:
            try:
                st = os.stat(seg_path)
            except FileNotFoundError:
                self._segments.pop(base, None)
                continue
            s = self._segments.get(base)
            if s is None or s.inode != st.st_ino or st.st_size < s.position:
                if s is not None and on_rewind is not None:
                    on_rewind(base)
                s = self._segments[base] = _Segment(base, st.st_ino)
            if s.stuck is not None:
                self.problems.append(s.stuck)
                continue
            if st.st_size > s.position:
                if self._left <= 0:
                    self.behind = True
                    continue
                new += self._read(s, seg_path, st.st_size, on_batch, decode)
        return new

    def _read(self, s: _Segment, path: str, size: int, on_batch: Optional[OnBatch], decode: bool) -> int:
        end = min(size, s.position + self._left)
        try:
            with storage_errors("read", path):
                with open(path, "rb") as f:
                    if size - s.position >= rb.HEADER_SIZE:   # one batch larger than the budget is read whole
                        head = os.pread(f.fileno(), rb.HEADER_SIZE, s.position)
                        if len(head) == rb.HEADER_SIZE:
                            end = min(size, max(end, s.position + rb.batch_size_of(head)))
                    data = os.pread(f.fileno(), end - s.position, s.position)
        except KafkaStorageError as exc:
            if not isinstance(exc.__cause__, FileNotFoundError):   # deleted meanwhile: next poll forgets it
                self.problems.append(str(exc))
            return 0
        self._left -= len(data)
        walk = BatchIterator(data, where=path, at=s.position)
        count = 0
        for pos, h in walk:
            columns = None
            if decode:
                try:
                    columns = rb.decode_columns(data, pos, h, where=path)
                except CorruptRecordError as exc:
                    walk.reject(exc)
                    break
            if h.attributes & ATTR_CONTROL:
                s.markers += 1
            else:
                s.records += h.record_count
            if s.first_offset is None:
                s.first_offset = h.base_offset
            s.next_offset = h.next_offset
            count += 1
            if on_batch is not None:
                on_batch(h, columns)
        s.position += walk.position
        if walk.error is not None:
            if walk.torn:
                # the writer is mid-batch, or the budget cut the read: come back next poll
                self.behind = self.behind or end < size
            else:
                s.stuck = str(walk.error)
                self.problems.append(s.stuck)
        elif end < size:
            self.behind = True
        return count
