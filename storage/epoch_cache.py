"""A replica's leader-epoch cache: epoch → start offset (Kafka's ``LeaderEpochFileCache``).

Each replica of a partition keeps, in its partition directory, the file
``leader-epoch-checkpoint`` (storage/FORMAT.md §7, Kafka's format)::

    0            <- version
    2            <- number of entries
    0 0          <- "epoch start_offset", epochs and start offsets strictly increasing
    3 150

An entry ``(e, s)`` says: the first batch stamped with leader epoch ``e`` has base offset
``s``; epoch ``e`` covers ``[s, start of the next entry)`` (the last one: up to the log end).

:meth:`LeaderEpochCache.end_offset_for` answers Kafka's OffsetsForLeaderEpoch: for a
requested epoch, the largest epoch ≤ it that this replica knows and the end offset of that
epoch (the start offset of the next higher epoch, or the log end offset when the requested
epoch is the latest). A follower truncates to ``min(that end offset, its own end offset
for that epoch)``, so it never keeps a suffix the leader does not have.

Invariants: entries strictly increase in both epoch and start offset; every change is
written with :func:`kafkasim.storage.files.atomic_write` before it is visible, so a crash
leaves the old or the new file. The one reader is :meth:`LeaderEpochCache.__init__`; a
malformed file is a :class:`~kafkasim.errors.KafkaStorageError` naming it and the line.

Thread-safety: the owning partition changes it under its own lock. Readers that do not take
that lock (OffsetForLeaderEpoch, ListOffsets) see a consistent snapshot: every change binds a
new list of entries, never edits the one a reader may be walking.
"""

from __future__ import annotations

import os
from typing import Optional

from kafkasim.errors import KafkaStorageError
from kafkasim.storage.files import atomic_write, storage_errors

__all__ = ["LeaderEpochCache", "LEADER_EPOCH_CHECKPOINT_FILE", "UNDEFINED_EPOCH", "UNDEFINED_OFFSET"]

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
_VERSION = 0


class LeaderEpochCache:
    """The epoch → start offset entries of one replica's log (see the module docstring)."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT_FILE)
        self._entries: list[tuple[int, int]] = self._read()

    def _read(self) -> list[tuple[int, int]]:
        with storage_errors("read", self.path):
            try:
                with open(self.path, encoding="ascii") as f:
                    lines = f.read().splitlines()
            except FileNotFoundError:
                return []
        def bad(why: str) -> KafkaStorageError:
            return KafkaStorageError(f"malformed leader epoch checkpoint {self.path}: {why}")
        try:
            if int(lines[0]) != _VERSION:
                raise bad(f"version {lines[0]!r}, expected {_VERSION}")
            count = int(lines[1])
            entries = [tuple(int(x) for x in line.split()) for line in lines[2:2 + count]]
        except (IndexError, ValueError, UnicodeDecodeError) as exc:
            raise bad(str(exc)) from exc
        if len(entries) != count or any(len(e) != 2 for e in entries):
            raise bad(f"expected {count} lines of 'epoch start_offset'")
        for (e0, s0), (e1, s1) in zip(entries, entries[1:]):
            if e1 <= e0 or s1 < s0:
                raise bad(f"entries not increasing: {e0} {s0} then {e1} {s1}")
        return [(e, s) for e, s in entries]

    def _write(self) -> None:
        lines = [str(_VERSION), str(len(self._entries))] + [f"{e} {s}" for e, s in self._entries]
        atomic_write(self.path, "\n".join(lines) + "\n", encoding="ascii")

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that epoch ``epoch`` starts at ``start_offset`` (a no-op when it is already
        the latest epoch; a later epoch than the latest is appended). Entries of the same or
        higher epoch, or starting at or after ``start_offset``, are replaced (Kafka drops
        them the same way when a new leader re-assigns)."""
        if self._entries and self._entries[-1][0] == epoch:
            return
        if self._entries and epoch < self._entries[-1][0]:
            return    # an older epoch's batch after a newer one: keep the newer (Kafka warns)
        self._entries = [(e, s) for e, s in self._entries if e < epoch and s < start_offset] + [(epoch, start_offset)]
        self._write()

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: ``(epoch, end offset)`` of ``requested`` (module docstring);
        ``(UNDEFINED_EPOCH, UNDEFINED_OFFSET)`` when it is newer than every known epoch or
        undefined."""
        entries = self._entries          # one snapshot (see Thread-safety)
        if requested == UNDEFINED_EPOCH or not entries or requested > entries[-1][0]:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested == entries[-1][0]:
            return requested, log_end_offset
        floor: Optional[tuple[int, int]] = None
        for e, s in entries:
            if e > requested:
                return (floor[0] if floor is not None else requested), s
            floor = (e, s)
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET   # unreachable: requested < latest

    def epoch_for_offset(self, offset: int) -> int:
        """The leader epoch of the batch holding ``offset``: the epoch of the last entry
        starting at or before it (the leader stamps that epoch into every batch it appends
        while the epoch lasts); UNDEFINED_EPOCH when no entry starts at or before it."""
        found = UNDEFINED_EPOCH
        for e, s in self._entries:
            if s > offset:
                break
            found = e
        return found

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: drop entries starting at or after it."""
        kept = [(e, s) for e, s in self._entries if s < end_offset]
        if kept != self._entries:
            self._entries = kept
            self._write()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._write()
