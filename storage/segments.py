"""The segments of one partition log, keyed by base offset (Kafka's ``LogSegments``).

:class:`LogSegments` is the map: a ``SortedDict`` of :class:`~kafkasim.storage.segment.LogSegment`
by base offset, with the lookups the log needs — the segment holding an offset is the
floor entry of that offset (O(log #segments)), the active segment is the last one, each
segment's upper bound is the next one's base offset (the log end offset for the active
one) — and the cap on open files: closed segments whose file is open are kept in
least-recently-used order and the oldest are closed beyond ``max_open_closed`` (they
reopen on demand).

:class:`SegmentInfo` is what :attr:`kafkasim.storage.log.Log.segments` reports per segment.

Invariants:
- Base offsets strictly increase; a base offset is ≤ the least offset in its segment and
  greater than every offset in an earlier segment (FORMAT.md §1.1).
- Once the log is open the map is never empty; only the last segment (the active one) is
  appended to.
- A segment is ``contiguous`` (its offsets have no gaps, FORMAT.md §2.4) iff its base offset
  is at or past :attr:`LogSegments.contiguous_from` (the cleaner checkpoint): set when it is
  added, cleared when compaction moves that line past it; the line never moves back.
- Listing segments reads no index: a closed segment's largest timestamp needs its time
  index, so :class:`SegmentInfo` asks for it on first access only (FORMAT.md §3.3).

Thread-safety: :class:`LogSegments` is not thread-safe (the owning log holds its lock around
every call); a :class:`SegmentInfo` is immutable once its timestamp is known, and fetching
it takes the log's lock.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Iterator, Optional

from sortedcontainers import SortedDict

from kafkasim.storage.segment import LogSegment

__all__ = ["LogSegments", "SegmentInfo", "MAX_OPEN_CLOSED_SEGMENTS"]

MAX_OPEN_CLOSED_SEGMENTS = 64
"""Closed segments whose files stay open at once per log (least recently used are closed)."""


class LogSegments:
    """Segments by base offset, plus the open-file cap (see the module docstring)."""

    def __init__(self, max_open_closed: int = MAX_OPEN_CLOSED_SEGMENTS, contiguous_from: int = 0) -> None:
        self._map: SortedDict = SortedDict()
        self._active: Optional[LogSegment] = None
        self._open_lru: OrderedDict[int, LogSegment] = OrderedDict()
        self._max_open = max_open_closed
        self.contiguous_from = contiguous_from

    # -- changes -------------------------------------------------------------------------
    def add(self, seg: LogSegment) -> None:
        """Add ``seg`` (a new active segment), or replace the segment with its base offset
        (a compacted one); marks it contiguous or not (module docstring)."""
        seg.contiguous = seg.base_offset >= self.contiguous_from
        self._map[seg.base_offset] = seg
        self._open_lru.pop(seg.base_offset, None)
        self._active = None

    def compacted_below(self, offset: int) -> None:
        """Compaction rewrites (or has rewritten) the segments below ``offset``: from now on
        they may hold offset gaps."""
        self.contiguous_from = max(self.contiguous_from, offset)
        for seg in self._map.values():
            seg.contiguous = seg.base_offset >= self.contiguous_from

    def remove(self, base_offset: int) -> LogSegment:
        self._open_lru.pop(base_offset, None)
        self._active = None
        return self._map.pop(base_offset)

    def touch(self, seg: LogSegment) -> None:
        """Note that a closed segment's file is open; close the least recently used ones
        beyond the cap. The active segment's file always stays open."""
        if seg is self.active:
            return
        lru = self._open_lru
        lru[seg.base_offset] = seg
        lru.move_to_end(seg.base_offset)
        while len(lru) > self._max_open:
            _, old = lru.popitem(last=False)
            old.close()

    def close_all(self) -> None:
        for seg in self._map.values():
            seg.close()
        self._open_lru.clear()

    # -- lookups -------------------------------------------------------------------------
    @property
    def active(self) -> LogSegment:
        """The last segment (cached until the map changes: the SortedDict lookup is
        measurable per append)."""
        seg = self._active
        if seg is None:
            seg = self._active = self._map.peekitem(-1)[1]
        return seg

    @property
    def log_start_offset(self) -> int:
        """Base offset of the first segment."""
        return self._map.peekitem(0)[0]

    def get(self, base_offset: int) -> Optional[LogSegment]:
        return self._map.get(base_offset)

    def __len__(self) -> int:
        return len(self._map)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._map.values())

    def closed(self) -> list[LogSegment]:
        """Every segment but the active one, oldest first."""
        return list(self._map.values())[:-1]

    def end_offset(self, base_offset: int) -> int:
        """Base offset of the segment after ``base_offset`` (the log end offset for the active one)."""
        i = self._map.bisect_right(base_offset)
        if i < len(self._map):
            return self._map.peekitem(i)[0]
        return self.active.next_offset

    def with_upper_bounds(self, start_offset: Optional[int] = None) -> Iterator[tuple[LogSegment, int]]:
        """``(segment, upper bound)`` in order, from the segment that holds ``start_offset``
        (the floor entry: the last whose base offset is ≤ it; default: the first). The bound
        is the next segment's base offset, or the log end offset for the active segment.
        Lazy (O(log #segments) a step, nothing copied): do not change the map while iterating."""
        m = self._map
        i = 0 if start_offset is None else max(m.bisect_right(start_offset) - 1, 0)
        n = len(m)
        while i < n:
            seg = m.peekitem(i)[1]
            yield seg, (m.peekitem(i + 1)[0] if i + 1 < n else self.active.next_offset)
            i += 1


class SegmentInfo:
    """One segment as :attr:`kafkasim.storage.log.Log.segments` lists it.

    ``base_offset``, ``size_bytes`` and ``path`` are taken when listing; ``max_timestamp``
    (the segment's largest record timestamp, -1 when it is empty) is known then for the
    active segment and for closed segments whose indexes are loaded, and otherwise fetched
    on first access through ``load`` — which loads and checks that segment's indexes under
    the log's lock — so that listing segments (``topics describe``, the broker's producer
    state) reads no index. Compares, unpacks and prints like the 4-tuple
    ``(base_offset, size_bytes, path, max_timestamp)``.
    """

    __slots__ = ("base_offset", "size_bytes", "path", "_max_timestamp", "_load")
    _fields = ("base_offset", "size_bytes", "path", "max_timestamp")

    def __init__(self, base_offset: int, size_bytes: int, path: str, max_timestamp: Optional[int] = None,
                 load: Optional[Callable[[], int]] = None) -> None:
        if max_timestamp is None and load is None:
            raise ValueError("SegmentInfo needs max_timestamp or a load function")
        self.base_offset = base_offset
        self.size_bytes = size_bytes
        self.path = path
        self._max_timestamp = max_timestamp
        self._load = load

    @property
    def max_timestamp(self) -> int:
        if self._max_timestamp is None:
            self._max_timestamp = self._load()
            self._load = None
        return self._max_timestamp

    def _astuple(self) -> tuple[int, int, str, int]:
        return self.base_offset, self.size_bytes, self.path, self.max_timestamp

    def _asdict(self) -> dict:
        return dict(zip(self._fields, self._astuple()))

    def __iter__(self):
        return iter(self._astuple())

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i):
        return self._astuple()[i]

    def __eq__(self, other) -> bool:
        if isinstance(other, SegmentInfo):
            return self._astuple() == other._astuple()
        if isinstance(other, tuple):
            return self._astuple() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._astuple())

    def __repr__(self) -> str:
        return ("SegmentInfo(base_offset={}, size_bytes={}, path={!r}, max_timestamp={})"
                .format(*self._astuple()))
