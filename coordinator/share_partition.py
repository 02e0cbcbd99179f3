"""A share-partition's delivery state (KIP-932): Kafka's ``SharePartition``, pure.

One share group reading one topic partition. The records between the share-partition start
offset (SPSO, :attr:`SharePartition.start_offset`) and the next offset never handed out
(:attr:`SharePartition.next_offset`; Kafka's end offset SPEO is the one before it) are *in
flight*, each with a state, a delivery count, and while acquired an owner and a lock deadline:

::

    AVAILABLE --acquire (count+1, lock)--> ACQUIRED --ACCEPT--> ACKNOWLEDGED
        ^                                   |  |--REJECT / GAP--> ARCHIVED
        |                                   |--RELEASE, lock expiry, owner leaves:
        +-------- count < limit ------------+      count >= group.share.delivery.count.limit -> ARCHIVED

Records below the SPSO are done; past the next offset, never delivered (AVAILABLE). The SPSO
moves over the contiguous prefix of ACKNOWLEDGED/ARCHIVED records (Kafka's
``maybeUpdateCachedStateAndOffsets``), and the state of those offsets is forgotten.

1. **Acquire** (:meth:`SharePartition.acquire`) walks the stored batches the broker read from
   the SPSO (below the high watermark or last stable offset), acquiring AVAILABLE records for
   one member: at most ``max_records``, except that a batch never delivered before is taken
   whole (Kafka's default, batch-aligned acquisition); new batches stop once
   ``group.share.partition.max.record.locks`` records are in flight. Offsets with no record
   (between batches: compaction, or transaction markers) are ARCHIVED when first reached,
   as Kafka's client would acknowledge them GAP.
2. **Acknowledge** (:meth:`SharePartition.acknowledge`): every offset named must be ACQUIRED
   by that member, else INVALID_RECORD_STATE and nothing of the request changes for this
   partition (Kafka rolls the partition's updates back).
3. **Release** of a member's records (leave, fence, share session close) and **lock expiry**
   (:meth:`SharePartition.expire`) are a RELEASE.

Persisted state (:meth:`SharePartition.state_batches`, :meth:`SharePartition.from_state`) is
Kafka's: coalesced ranges of (first, last, delivery state 0/2/4, delivery count). An ACQUIRED
record is written as AVAILABLE with its delivery count (locks do not survive a restart); one
loaded AVAILABLE at the delivery limit is ARCHIVED, as its release would have done.

In-flight state is kept as Kafka keeps it (``SharePartition.cachedState``): one entry per
in-flight *batch* (a run of offsets acquired, acknowledged and released together, one state,
one delivery count, one owner and lock deadline), split into per-offset entries only when an
operation touches part of it or gives its offsets different outcomes (Kafka's
``InFlightBatch.maybeInitializeOffsetStateUpdate``); a split batch stays split. A batch taken
whole and acknowledged whole (the common case) costs a few operations, however many records
it holds.

The clock is passed in (``now_ms``); no I/O. Not thread-safe: the broker's share-group lock
serialises calls.

This module is over 500 lines because it is one job, one share-partition's state machine:
every operation works on both shapes of an in-flight batch (whole, or split per offset), and
splitting that across modules would spread one invariant (the batches cover the SPSO to the
next offset exactly) over several files.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from kafkasim.errors import InvalidRecordStateError, InvalidRequestError
from kafkasim.protocol.share_group import (
    ACKNOWLEDGE_ACCEPT, ACKNOWLEDGE_GAP, ACKNOWLEDGE_REJECT, ACKNOWLEDGE_RELEASE, ACKNOWLEDGE_TYPES,
    ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, AcknowledgementBatch, AcquiredRecords,
)


__all__ = ["InFlightRecord", "SharePartition", "StoredBatch"]

_DONE = (ACKNOWLEDGED, ARCHIVED)


@dataclass
class InFlightRecord:
    """One in-flight offset: its state, how often it was delivered, and while ACQUIRED its
    owner and lock deadline (ms on the broker's clock)."""

    state: int = AVAILABLE
    delivery_count: int = 0
    owner: Optional[str] = None
    deadline_ms: Optional[int] = None


@dataclass(frozen=True)
class StoredBatch:
    """A stored batch as acquisition sees it: its offsets and whether it holds data records
    (False: a control batch, whose offsets are ARCHIVED when reached)."""

    first_offset: int
    last_offset: int
    data: bool = True


class _InFlightBatch:
    """Offsets ``first``..``last`` in flight together: one state, delivery count, owner and
    deadline for all of them, until :meth:`split` gives each offset its own
    :class:`InFlightRecord` (``offsets[i]`` is offset ``first + i``)."""

    __slots__ = ("first", "last", "state", "delivery_count", "owner", "deadline_ms", "offsets")

    def __init__(self, first: int, last: int, state: int, delivery_count: int = 0,
                 owner: Optional[str] = None, deadline_ms: Optional[int] = None) -> None:
        self.first, self.last, self.state, self.delivery_count = first, last, state, delivery_count
        self.owner, self.deadline_ms = owner, deadline_ms
        self.offsets: Optional[list[InFlightRecord]] = None

    def split(self) -> list[InFlightRecord]:
        if self.offsets is None:
            self.offsets = [InFlightRecord(self.state, self.delivery_count, self.owner, self.deadline_ms)
                            for _ in range(self.last - self.first + 1)]
        return self.offsets

    def trim_to(self, offset: int) -> None:
        """Forget the offsets below ``offset`` (first < offset <= last)."""
        if self.offsets is not None:
            del self.offsets[:offset - self.first]
        self.first = offset

    def runs(self, lo: int, hi: int):
        """``(first, last, state, count)`` runs of equal state and count over ``lo``..``hi``
        (ACQUIRED reported as is)."""
        if self.offsets is None:
            yield lo, hi, self.state, self.delivery_count
            return
        recs, base = self.offsets, self.first
        start = lo
        cur = recs[lo - base]
        for o in range(lo + 1, hi + 1):
            r = recs[o - base]
            if r.state != cur.state or r.delivery_count != cur.delivery_count:
                yield start, o - 1, cur.state, cur.delivery_count
                start, cur = o, r
        yield start, hi, cur.state, cur.delivery_count


def _first(b: _InFlightBatch) -> int:
    return b.first


class SharePartition:
    """The delivery state of one share-partition (see the module docstring)."""

    def __init__(self, start_offset: int, *, delivery_count_limit: int = 5, max_record_locks: int = 2_000) -> None:
        if start_offset < 0:
            raise InvalidRequestError(f"share-partition start offset {start_offset} is negative")
        self.start_offset = start_offset
        self.next_offset = start_offset
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self._batches: list[_InFlightBatch] = []
        """In offset order, covering start_offset..next_offset - 1 exactly (the first begins at the SPSO)."""
        self._settled: list[tuple[int, int, int, int]] = []
        """Runs ``(first, last, state, count)`` the SPSO moved past since the last
        :meth:`persisted_state`, with their final state, contiguous up to the SPSO."""

    # -- reading ------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        """Kafka's share-partition end offset (SPEO): the last offset in flight, or the SPSO
        when none is."""
        return max(self.start_offset, self.next_offset - 1)

    def _index(self, offset: int) -> int:
        """Index in ``_batches`` of the batch holding ``offset`` (in flight), else -1."""
        if offset < self.start_offset or offset >= self.next_offset:
            return -1
        return bisect_right(self._batches, offset, key=_first) - 1

    def record(self, offset: int) -> Optional[InFlightRecord]:
        """The in-flight state of ``offset`` (None below the SPSO or never delivered); a copy
        when its batch is not split."""
        i = self._index(offset)
        if i < 0:
            return None
        b = self._batches[i]
        if b.offsets is not None:
            return b.offsets[offset - b.first]
        return InFlightRecord(b.state, b.delivery_count, b.owner, b.deadline_ms)

    def in_flight(self) -> int:
        """How many offsets are tracked between the SPSO and the next offset."""
        return self.next_offset - self.start_offset

    def done_in_flight(self) -> int:
        """How many in-flight offsets are ACKNOWLEDGED or ARCHIVED (done, above the SPSO)."""
        n = 0
        for b in self._batches:
            if b.offsets is None:
                n += b.last - b.first + 1 if b.state in _DONE else 0
            else:
                n += sum(1 for r in b.offsets if r.state in _DONE)
        return n

    def owners(self) -> dict[int, str]:
        """offset -> member holding its lock."""
        out: dict[int, str] = {}
        for b in self._batches:
            if b.offsets is None:
                if b.state == ACQUIRED:
                    out.update(dict.fromkeys(range(b.first, b.last + 1), b.owner))
            else:
                out.update((b.first + i, r.owner) for i, r in enumerate(b.offsets) if r.state == ACQUIRED)
        return out

    def next_deadline_ms(self) -> Optional[int]:
        """The earliest lock deadline, or None when nothing is acquired."""
        deadlines = [b.deadline_ms for b in self._batches if b.offsets is None and b.state == ACQUIRED]
        deadlines += [r.deadline_ms for b in self._batches if b.offsets is not None
                      for r in b.offsets if r.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    # -- acquire ------------------------------------------------------------------------

    def acquire(self, member_id: str, batches: Iterable[StoredBatch], bound: int, *, max_records: int,
                lock_duration_ms: int, now_ms: int) -> list[AcquiredRecords]:
        """Acquire AVAILABLE records for ``member_id`` from ``batches`` (stored batches in offset
        order, read from the SPSO on), below ``bound`` (the high watermark, or the last stable
        offset for read_committed). Returns the acquired ranges (contiguous offsets of equal
        delivery count)."""
        out: list[AcquiredRecords] = []
        deadline = now_ms + lock_duration_ms
        n = 0                                   # records taken so far

        def take(first: int, last: int, count: int) -> None:
            nonlocal n
            n += last - first + 1
            if out and out[-1].last_offset == first - 1 and out[-1].delivery_count == count:
                out[-1] = AcquiredRecords(out[-1].first_offset, last, count)
            else:
                out.append(AcquiredRecords(first, last, count))

        for batch in batches:
            if batch.last_offset < self.start_offset or batch.first_offset < 0:
                continue
            if batch.first_offset >= bound or n >= max_records:
                break
            lo = max(batch.first_offset, self.start_offset)
            if lo > self.next_offset:
                self._track_gap(lo)
            whole = lo == self.next_offset and batch.data   # a batch never delivered: taken whole
            if whole and self.in_flight() >= self.max_record_locks:
                break
            hi = min(batch.last_offset, bound - 1)
            stopped = False
            # offsets already in flight: AVAILABLE ones are acquired, up to max_records
            i = self._index(lo) if lo < self.next_offset else len(self._batches)
            while i < len(self._batches) and not stopped:
                b = self._batches[i]
                i += 1
                a, z = max(lo, b.first), min(hi, b.last)
                if a > z:
                    break
                if b.offsets is None:
                    if b.state != AVAILABLE:
                        continue
                    if n >= max_records:
                        stopped = True
                        break
                    if a == b.first and z == b.last and max_records - n >= z - a + 1:
                        b.state, b.owner, b.deadline_ms = ACQUIRED, member_id, deadline
                        b.delivery_count += 1
                        take(a, z, b.delivery_count)
                        continue
                recs = b.split()
                for o in range(a, z + 1):
                    rec = recs[o - b.first]
                    if rec.state != AVAILABLE:
                        continue
                    if n >= max_records:
                        stopped = True
                        break
                    rec.state, rec.owner, rec.deadline_ms = ACQUIRED, member_id, deadline
                    rec.delivery_count += 1
                    take(o, o, rec.delivery_count)
            # offsets reached for the first time
            first_new = self.next_offset
            if stopped or hi < first_new:
                continue
            if not batch.data:
                self._append(_InFlightBatch(first_new, hi, ARCHIVED))
            elif whole:
                self._append(_InFlightBatch(first_new, hi, ACQUIRED, 1, member_id, deadline))
                take(first_new, hi, 1)
            else:                               # a partly delivered batch: up to max_records of the rest
                k = max(0, min(hi - first_new + 1, max_records - n))
                if k:
                    self._append(_InFlightBatch(first_new, first_new + k - 1, ACQUIRED, 1, member_id, deadline))
                    take(first_new, first_new + k - 1, 1)
                if first_new + k <= hi:         # reached, not taken: tracked AVAILABLE
                    self._append(_InFlightBatch(first_new + k, first_new + k, AVAILABLE))
        self._advance_start()
        return out

    def _append(self, b: _InFlightBatch) -> None:
        assert b.first == self.next_offset, (b.first, self.next_offset)
        self._batches.append(b)
        self.next_offset = b.last + 1

    def _track_gap(self, upto: int) -> None:
        """Offsets from the next offset up to ``upto`` hold no record: ARCHIVED when reached."""
        if upto > self.next_offset:
            self._append(_InFlightBatch(self.next_offset, upto - 1, ARCHIVED))

    # -- acknowledge, release, expire ---------------------------------------------------

    def _first_not_held(self, member_id: str, lo: int, hi: int) -> Optional[int]:
        """The first offset of ``lo``..``hi`` not ACQUIRED by ``member_id``, or None."""
        if lo > hi:
            return None
        if lo < self.start_offset:
            return lo
        i = self._index(lo)
        if i < 0:
            return lo
        o = lo
        while o <= hi:
            if i >= len(self._batches):
                return o                        # past the next offset: never delivered
            b = self._batches[i]
            z = min(hi, b.last)
            if b.offsets is None:
                if b.state != ACQUIRED or b.owner != member_id:
                    return o
            else:
                for x in range(o, z + 1):
                    r = b.offsets[x - b.first]
                    if r.state != ACQUIRED or r.owner != member_id:
                        return x
            o = z + 1
            i += 1
        return None

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch]) -> None:
        """Apply ``member_id``'s acknowledgements: all of them, or (on an error) none.

        Raises InvalidRequestError for a malformed batch (first after last, a type count that
        is neither 1 nor the range's length, an unknown type, overlapping batches) and
        InvalidRecordStateError for an offset not ACQUIRED by ``member_id``; the first bad
        offset (in the request's order) is the one named."""
        plan: list[tuple[int, int, int]] = []           # runs (first, last, type)
        seen: list[tuple[int, int]] = []
        for b in batches:
            if b.first_offset > b.last_offset or b.first_offset < 0:
                raise InvalidRequestError(f"acknowledgement batch {b.first_offset}..{b.last_offset} is empty or negative")
            n = b.last_offset - b.first_offset + 1
            types = b.acknowledge_types
            if len(types) not in (1, n):
                raise InvalidRequestError(
                    f"acknowledgement batch {b.first_offset}..{b.last_offset} has {len(types)} "
                    f"acknowledge types: one, or one per offset ({n}), expected")
            for t in types:
                if t not in ACKNOWLEDGE_TYPES:
                    raise InvalidRequestError(f"unknown acknowledge type {t!r} (0 GAP, 1 ACCEPT, 2 RELEASE, 3 REJECT)")
            dup = min((max(a, b.first_offset) for a, z in seen if a <= b.last_offset and z >= b.first_offset),
                      default=None)
            bad = self._first_not_held(member_id, b.first_offset, b.last_offset if dup is None else dup - 1)
            if bad is not None:
                raise InvalidRecordStateError(
                    f"offset {bad} is not acquired by member {member_id} "
                    f"(it is {_describe(self.record(bad), bad, self.start_offset)})")
            if dup is not None:
                raise InvalidRequestError(f"offset {dup} is acknowledged twice in one request")
            seen.append((b.first_offset, b.last_offset))
            if len(types) == 1:
                plan.append((b.first_offset, b.last_offset, types[0]))
                continue
            run = b.first_offset
            for o in range(b.first_offset + 1, b.last_offset + 1):
                if types[o - b.first_offset] != types[run - b.first_offset]:
                    plan.append((run, o - 1, types[run - b.first_offset]))
                    run = o
            plan.append((run, b.last_offset, types[run - b.first_offset]))
        for first, last, kind in plan:
            self._apply(first, last, kind)
        self._advance_start()

    def _apply(self, lo: int, hi: int, kind: int) -> None:
        """Apply one acknowledge type to ``lo``..``hi`` (all ACQUIRED, checked)."""
        i = self._index(lo)
        while i < len(self._batches):
            b = self._batches[i]
            i += 1
            if b.first > hi:
                break
            a, z = max(lo, b.first), min(hi, b.last)
            if b.offsets is None and a == b.first and z == b.last:
                self._outcome(b, kind)
            else:
                recs = b.split()
                for o in range(a, z + 1):
                    self._outcome(recs[o - b.first], kind)

    def _outcome(self, rec, kind: int) -> None:
        if kind == ACKNOWLEDGE_ACCEPT:
            rec.state, rec.owner, rec.deadline_ms = ACKNOWLEDGED, None, None
        elif kind in (ACKNOWLEDGE_REJECT, ACKNOWLEDGE_GAP):
            rec.state, rec.owner, rec.deadline_ms = ARCHIVED, None, None
        else:
            assert kind == ACKNOWLEDGE_RELEASE, kind
            self._release(rec)

    def _release_where(self, held) -> int:
        """Release every ACQUIRED batch or offset ``held(entry)`` is true of; returns how many offsets."""
        n = 0
        for b in self._batches:
            if b.offsets is None:
                if b.state == ACQUIRED and held(b):
                    self._release(b)
                    n += b.last - b.first + 1
            else:
                for r in b.offsets:
                    if r.state == ACQUIRED and held(r):
                        self._release(r)
                        n += 1
        self._advance_start()
        return n

    def release_member(self, member_id: str) -> int:
        """Release every record ``member_id`` holds (it left, was fenced, or closed its share
        session); returns how many."""
        return self._release_where(lambda r: r.owner == member_id)

    def expire(self, now_ms: int) -> int:
        """Release the records whose lock ran out by ``now_ms``; returns how many."""
        return self._release_where(lambda r: r.deadline_ms is not None and r.deadline_ms <= now_ms)

    def _release(self, rec) -> None:
        rec.state = ARCHIVED if rec.delivery_count >= self.delivery_count_limit else AVAILABLE
        rec.owner, rec.deadline_ms = None, None

    def _advance_start(self) -> None:
        """Move the SPSO over the done prefix and forget those offsets."""
        batches, settled = self._batches, self._settled
        k = 0
        for b in batches:
            if b.offsets is None:
                if b.state not in _DONE:
                    break
                settled.append((b.first, b.last, b.state, b.delivery_count))
                self.start_offset = b.last + 1
                k += 1
                continue
            j = 0
            for r in b.offsets:
                if r.state not in _DONE:
                    break
                j += 1
            if j:
                settled.extend(b.runs(b.first, b.first + j - 1))
            if j < len(b.offsets):
                if j:
                    b.trim_to(b.first + j)
                self.start_offset = b.first
                break
            self.start_offset = b.last + 1
            k += 1
        if k:
            del batches[:k]

    def move_start(self, offset: int) -> None:
        """The log start moved past the SPSO (retention, DeleteRecords): offsets below
        ``offset`` are gone, so the SPSO moves there (their in-flight state is dropped)."""
        if offset <= self.start_offset:
            return
        k = 0
        for b in self._batches:
            if b.last < offset:
                k += 1
                continue
            if b.first < offset:
                b.trim_to(offset)
            break
        del self._batches[:k]
        self._settled = [s for s in self._settled if s[0] >= offset]
        self.start_offset = offset
        if offset > self.next_offset:
            self.next_offset = offset
        self._advance_start()

    # -- persisted state ----------------------------------------------------------------

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """Kafka's persisted StateBatches: ``(first offset, last offset, delivery state,
        delivery count)`` coalesced over the in-flight offsets; ACQUIRED is written AVAILABLE."""
        return _coalesce(self._runs())

    def _runs(self):
        for b in self._batches:
            yield from b.runs(b.first, b.last)

    def persisted_state(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """What a write persists, as Kafka's ``SharePartition`` writes it: the start offset as it
        was before the records settled since the last write, and the state batches from there,
        so those records are written with their final state (ACKNOWLEDGED or ARCHIVED, with
        their delivery count); the SPSO move itself is in the next write (Kafka moves its start
        offset once the write succeeded). :meth:`from_state` moves the SPSO past them again, so
        a reload is the same. Forgets the settled records."""
        start = self._settled[0][0] if self._settled else self.start_offset
        out = _coalesce(self._settled + list(self._runs()))
        self._settled = []
        return start, out

    @classmethod
    def from_state(cls, start_offset: int, batches: Iterable[Sequence[int]], *, delivery_count_limit: int = 5,
                   max_record_locks: int = 2_000) -> "SharePartition":
        """A share-partition as persisted: the SPSO and its state batches. Offsets below the
        SPSO in a batch are ignored; a gap between batches is AVAILABLE, never delivered;
        an AVAILABLE record at the delivery limit comes back ARCHIVED (of overlapping batches,
        the later in sorted order wins)."""
        sp = cls(start_offset, delivery_count_limit=delivery_count_limit, max_record_locks=max_record_locks)
        runs: list[tuple[int, int, int, int]] = []
        for first, last, state, count in sorted(batches):
            if state not in (AVAILABLE, ACKNOWLEDGED, ARCHIVED):
                raise InvalidRecordStateError(f"persisted delivery state {state} of offsets {first}..{last} "
                                              "is not 0, 2 or 4")
            if state == AVAILABLE and count >= delivery_count_limit:
                state = ARCHIVED
            first = max(first, start_offset)
            if first <= last:
                runs.append((first, last, state, count))
        if any(runs[i][0] <= runs[i - 1][1] for i in range(1, len(runs))):
            per: dict[int, tuple[int, int]] = {}                    # overlapping: the later wins, per offset
            for first, last, state, count in runs:
                per.update(dict.fromkeys(range(first, last + 1), (state, count)))
            runs = [(o, o, st, c) for o, (st, c) in sorted(per.items())]
        at = start_offset
        for first, last, state, count in _coalesce(runs, keep_acquired=True):
            if first > at:
                sp._append(_InFlightBatch(at, first - 1, AVAILABLE))
            sp._append(_InFlightBatch(first, last, state, count))
            at = last + 1
        sp._advance_start()
        sp._settled = []
        return sp


def _coalesce(runs, *, keep_acquired: bool = False) -> list[tuple[int, int, int, int]]:
    """Adjacent runs of equal state and count merged (ACQUIRED as AVAILABLE unless ``keep_acquired``)."""
    out: list[list[int]] = []
    for first, last, state, count in runs:
        if state == ACQUIRED and not keep_acquired:
            state = AVAILABLE
        if out and out[-1][1] == first - 1 and out[-1][2] == state and out[-1][3] == count:
            out[-1][1] = last
        else:
            out.append([first, last, state, count])
    return [tuple(b) for b in out]


def _describe(rec: Optional[InFlightRecord], offset: int, start: int) -> str:
    if rec is None:
        return "below the share-partition start offset" if offset < start else "not in flight"
    names = {AVAILABLE: "AVAILABLE", ACQUIRED: "ACQUIRED", ACKNOWLEDGED: "ACKNOWLEDGED", ARCHIVED: "ARCHIVED"}
    return names[rec.state] + (f" by {rec.owner}" if rec.owner else "")
