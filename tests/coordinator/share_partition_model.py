"""The reference model of a share-partition: one entry per offset, the simplest bookkeeping of
KIP-932's delivery states (kafkasim's SharePartition before it kept in-flight batches, as
Kafka does). tests/coordinator/test_share_partition_batches.py checks the batch-keeping
SharePartition against it, operation by operation: the same answers, errors and state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from kafkasim.errors import InvalidRecordStateError, InvalidRequestError
from kafkasim.protocol.share_group import (
    ACKNOWLEDGE_ACCEPT, ACKNOWLEDGE_GAP, ACKNOWLEDGE_REJECT, ACKNOWLEDGE_RELEASE, ACKNOWLEDGE_TYPES,
    ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, AcknowledgementBatch, AcquiredRecords,
)

__all__ = ["PerOffsetSharePartition"]


@dataclass
class InFlightRecord:
    """One in-flight offset: its state, how often it was delivered, and while ACQUIRED its
    owner and lock deadline (ms on the broker's clock)."""

    state: int = AVAILABLE
    delivery_count: int = 0
    owner: Optional[str] = None
    deadline_ms: Optional[int] = None


class PerOffsetSharePartition:
    """The delivery state of one share-partition (see the module docstring)."""

    def __init__(self, start_offset: int, *, delivery_count_limit: int = 5, max_record_locks: int = 2_000) -> None:
        if start_offset < 0:
            raise InvalidRequestError(f"share-partition start offset {start_offset} is negative")
        self.start_offset = start_offset
        self.next_offset = start_offset
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self._records: dict[int, InFlightRecord] = {}
        self._settled: dict[int, InFlightRecord] = {}
        """Offsets the SPSO moved past since the last :meth:`persisted_state`, with their final state."""

    # -- reading ------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        """Kafka's share-partition end offset (SPEO): the last offset in flight, or the SPSO
        when none is."""
        return max(self.start_offset, self.next_offset - 1)

    def record(self, offset: int) -> Optional[InFlightRecord]:
        """The in-flight state of ``offset`` (None below the SPSO or never delivered)."""
        return self._records.get(offset)

    def in_flight(self) -> int:
        """How many offsets are tracked between the SPSO and the next offset."""
        return self.next_offset - self.start_offset

    def owners(self) -> dict[int, str]:
        """offset -> member holding its lock."""
        return {o: r.owner for o, r in self._records.items() if r.state == ACQUIRED}

    def next_deadline_ms(self) -> Optional[int]:
        """The earliest lock deadline, or None when nothing is acquired."""
        deadlines = [r.deadline_ms for r in self._records.values() if r.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    # -- acquire ------------------------------------------------------------------------

    def acquire(self, member_id: str, batches: Iterable[StoredBatch], bound: int, *, max_records: int,
                lock_duration_ms: int, now_ms: int) -> list[AcquiredRecords]:
        """Acquire AVAILABLE records for ``member_id`` from ``batches`` (stored batches in offset
        order, read from the SPSO on), below ``bound`` (the high watermark, or the last stable
        offset for read_committed). Returns the acquired ranges (contiguous offsets of equal
        delivery count)."""
        taken: list[tuple[int, int]] = []
        deadline = now_ms + lock_duration_ms
        for batch in batches:
            if batch.last_offset < self.start_offset or batch.first_offset < 0:
                continue
            if batch.first_offset >= bound or len(taken) >= max_records:
                break
            lo = max(batch.first_offset, self.start_offset)
            if lo > self.next_offset:
                self._track_gap(lo)
            whole = lo == self.next_offset and batch.data   # a batch never delivered: taken whole
            if whole and self.in_flight() >= self.max_record_locks:
                break
            for offset in range(lo, min(batch.last_offset, bound - 1) + 1):
                rec = self._records.get(offset)
                if rec is None:
                    if offset < self.next_offset:
                        continue
                    rec = self._records[offset] = InFlightRecord(AVAILABLE if batch.data else ARCHIVED)
                    self.next_offset = offset + 1
                if rec.state != AVAILABLE:
                    continue
                if len(taken) >= max_records and not whole:
                    break
                rec.state, rec.owner, rec.deadline_ms = ACQUIRED, member_id, deadline
                rec.delivery_count += 1
                taken.append((offset, rec.delivery_count))
        self._advance_start()
        return _ranges(taken)

    def _track_gap(self, upto: int) -> None:
        """Offsets from the next offset up to ``upto`` hold no record: ARCHIVED when reached."""
        for offset in range(self.next_offset, upto):
            self._records[offset] = InFlightRecord(ARCHIVED)
        self.next_offset = max(self.next_offset, upto)

    # -- acknowledge, release, expire ---------------------------------------------------

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch]) -> None:
        """Apply ``member_id``'s acknowledgements: all of them, or (on an error) none.

        Raises InvalidRequestError for a malformed batch (first after last, a type count that
        is neither 1 nor the range's length, an unknown type, overlapping batches) and
        InvalidRecordStateError for an offset not ACQUIRED by ``member_id``."""
        plan: list[tuple[int, int]] = []
        seen: set[int] = set()
        for b in batches:
            if b.first_offset > b.last_offset or b.first_offset < 0:
                raise InvalidRequestError(f"acknowledgement batch {b.first_offset}..{b.last_offset} is empty or negative")
            n = b.last_offset - b.first_offset + 1
            if len(b.acknowledge_types) not in (1, n):
                raise InvalidRequestError(
                    f"acknowledgement batch {b.first_offset}..{b.last_offset} has {len(b.acknowledge_types)} "
                    f"acknowledge types: one, or one per offset ({n}), expected")
            for t in b.acknowledge_types:
                if t not in ACKNOWLEDGE_TYPES:
                    raise InvalidRequestError(f"unknown acknowledge type {t!r} (0 GAP, 1 ACCEPT, 2 RELEASE, 3 REJECT)")
            for offset in range(b.first_offset, b.last_offset + 1):
                if offset in seen:
                    raise InvalidRequestError(f"offset {offset} is acknowledged twice in one request")
                seen.add(offset)
                rec = self._records.get(offset)
                if rec is None or rec.state != ACQUIRED or rec.owner != member_id:
                    raise InvalidRecordStateError(
                        f"offset {offset} is not acquired by member {member_id} "
                        f"(it is {_describe(rec, offset, self.start_offset)})")
                plan.append((offset, b.type_at(offset)))
        for offset, kind in plan:
            rec = self._records[offset]
            if kind == ACKNOWLEDGE_ACCEPT:
                self._settle(rec, ACKNOWLEDGED)
            elif kind in (ACKNOWLEDGE_REJECT, ACKNOWLEDGE_GAP):
                self._settle(rec, ARCHIVED)
            else:
                assert kind == ACKNOWLEDGE_RELEASE, kind
                self._release(rec)
        self._advance_start()

    def release_member(self, member_id: str) -> int:
        """Release every record ``member_id`` holds (it left, was fenced, or closed its share
        session); returns how many."""
        held = [r for r in self._records.values() if r.state == ACQUIRED and r.owner == member_id]
        for rec in held:
            self._release(rec)
        self._advance_start()
        return len(held)

    def expire(self, now_ms: int) -> int:
        """Release the records whose lock ran out by ``now_ms``; returns how many."""
        due = [r for r in self._records.values() if r.state == ACQUIRED and r.deadline_ms is not None
               and r.deadline_ms <= now_ms]
        for rec in due:
            self._release(rec)
        self._advance_start()
        return len(due)

    def _release(self, rec: InFlightRecord) -> None:
        self._settle(rec, ARCHIVED if rec.delivery_count >= self.delivery_count_limit else AVAILABLE)

    @staticmethod
    def _settle(rec: InFlightRecord, state: int) -> None:
        rec.state, rec.owner, rec.deadline_ms = state, None, None

    def _advance_start(self) -> None:
        """Move the SPSO over the done prefix and forget those offsets."""
        while self.start_offset < self.next_offset:
            rec = self._records.get(self.start_offset)
            if rec is None or rec.state not in (ACKNOWLEDGED, ARCHIVED):
                break
            self._settled[self.start_offset] = rec
            del self._records[self.start_offset]
            self.start_offset += 1

    def move_start(self, offset: int) -> None:
        """The log start moved past the SPSO (retention, DeleteRecords): offsets below
        ``offset`` are gone, so the SPSO moves there (their in-flight state is dropped)."""
        if offset <= self.start_offset:
            return
        for o in range(self.start_offset, min(offset, self.next_offset)):
            self._records.pop(o, None)
        self._settled = {o: r for o, r in self._settled.items() if o >= offset}
        self.start_offset = offset
        self.next_offset = max(self.next_offset, offset)
        self._advance_start()

    # -- persisted state ----------------------------------------------------------------

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """Kafka's persisted StateBatches: ``(first offset, last offset, delivery state,
        delivery count)`` coalesced over the in-flight offsets; ACQUIRED is written AVAILABLE."""
        return self._batches(self.start_offset)

    def persisted_state(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """What a write persists, as Kafka's ``SharePartition`` writes it: the start offset as it
        was before the records settled since the last write, and the state batches from there,
        so those records are written with their final state (ACKNOWLEDGED or ARCHIVED, with
        their delivery count); the SPSO move itself is in the next write (Kafka moves its start
        offset once the write succeeded). :meth:`from_state` moves the SPSO past them again, so
        a reload is the same. Forgets the settled records."""
        start = min(self._settled, default=self.start_offset)
        out = self._batches(start)
        self._settled.clear()
        return start, out

    def _batches(self, start: int) -> list[tuple[int, int, int, int]]:
        out: list[list[int]] = []
        for offset in range(start, self.next_offset):
            rec = self._settled.get(offset) or self._records.get(offset, InFlightRecord())
            state = AVAILABLE if rec.state == ACQUIRED else rec.state
            if out and out[-1][1] == offset - 1 and out[-1][2] == state and out[-1][3] == rec.delivery_count:
                out[-1][1] = offset
            else:
                out.append([offset, offset, state, rec.delivery_count])
        return [tuple(b) for b in out]

    @classmethod
    def from_state(cls, start_offset: int, batches: Iterable[Sequence[int]], *, delivery_count_limit: int = 5,
                   max_record_locks: int = 2_000) -> "PerOffsetSharePartition":
        """A share-partition as persisted: the SPSO and its state batches. Offsets below the
        SPSO in a batch are ignored; a gap between batches is AVAILABLE, never delivered;
        an AVAILABLE record at the delivery limit comes back ARCHIVED."""
        sp = cls(start_offset, delivery_count_limit=delivery_count_limit, max_record_locks=max_record_locks)
        for first, last, state, count in sorted(batches):
            if state not in (AVAILABLE, ACKNOWLEDGED, ARCHIVED):
                raise InvalidRecordStateError(f"persisted delivery state {state} of offsets {first}..{last} "
                                              "is not 0, 2 or 4")
            if state == AVAILABLE and count >= delivery_count_limit:
                state = ARCHIVED
            for offset in range(max(first, start_offset), last + 1):
                sp._records[offset] = InFlightRecord(state, count)
            sp.next_offset = max(sp.next_offset, last + 1)
        for offset in range(sp.start_offset, sp.next_offset):
            sp._records.setdefault(offset, InFlightRecord())
        sp._advance_start()
        sp._settled.clear()
        return sp


def _ranges(taken: list[tuple[int, int]]) -> list[AcquiredRecords]:
    out: list[AcquiredRecords] = []
    for offset, count in taken:
        if out and out[-1].last_offset == offset - 1 and out[-1].delivery_count == count:
            out[-1] = AcquiredRecords(out[-1].first_offset, offset, count)
        else:
            out.append(AcquiredRecords(offset, offset, count))
    return out


def _describe(rec: Optional[InFlightRecord], offset: int, start: int) -> str:
    if rec is None:
        return "below the share-partition start offset" if offset < start else "not in flight"
    names = {AVAILABLE: "AVAILABLE", ACQUIRED: "ACQUIRED", ACKNOWLEDGED: "ACKNOWLEDGED", ARCHIVED: "ARCHIVED"}
    return names[rec.state] + (f" by {rec.owner}" if rec.owner else "")
