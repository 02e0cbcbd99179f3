"""Who owned each partition when, with an optional state-restore cost: the rebalance labs' log.

:class:`OwnershipLog` is a rebalance listener shared by every member of one group (one
listener object per member, :meth:`OwnershipLog.listener`). It records, per partition, a
list of ``(t_ms, state)`` changes, where ``state`` is a member name (it owns and processes
the partition), :data:`RESTORING` + member (it owns it but first restores the partition's
state) or ``None`` (nobody: revoked, lost, or its owner crashed).

The restore cost models a stateful app (a Kafka Streams task with a local state store):
a partition assigned to a member that was **not** its previous owner is paused
(``Consumer.pause``) for ``restore_ms`` while its state is rebuilt, then resumed; a
partition that comes back to its previous owner (eager's revoke-all-then-reassign) keeps
its local state and is processed at once. :meth:`OwnershipLog.tick` resumes restored
partitions; call it every step (``GroupDriver(on_step=log.tick)``).

:meth:`OwnershipLog.pauses` measures, inside a time window, every partition's time without
processing (no owner or restoring): their sum (paused partition-seconds) and the longest
single pause. :meth:`OwnershipLog.spans` gives the timeline picture's bars.
:attr:`OwnershipLog.assignments_received` counts, per member while ``counting``, the
assignments it received (``on_partitions_assigned`` calls): one per completed
JoinGroup+SyncGroup round in the classic protocol, one per heartbeat that brought a changed
assignment in the consumer protocol (KIP-848); :attr:`OwnershipLog.restores` the partitions
a new owner had to restore.

Invariants: events per partition are in time order; a partition has one state at a time.
Not thread-safe: driven from the scenario's one thread on its MockClock.
"""

from __future__ import annotations

from typing import Optional

from kafkasim.clock import MockClock
from kafkasim.consumer import ConsumerRebalanceListener
from kafkasim.types import TopicPartition

__all__ = ["OwnershipLog", "RESTORING"]

RESTORING = "restoring:"
"""Prefix of the state of a partition whose new owner is restoring its state."""


class OwnershipLog:
    """Per-partition ownership changes of one group (see the module docstring)."""

    def __init__(self, clock: MockClock, restore_ms: int = 0) -> None:
        self.clock = clock
        self.restore_ms = restore_ms
        self.events: dict[int, list[tuple[int, Optional[str]]]] = {}
        self.last_owner: dict[int, str] = {}
        self.revoked: dict[str, list[int]] = {}
        self._consumers: dict = {}
        self._restoring: dict[tuple[str, int], tuple[int, TopicPartition]] = {}
        self.counting = False
        self.assignments_received: dict[str, int] = {}
        self.restores = 0

    # ------------------------------------------------------------ recording
    def state(self, p: int) -> Optional[str]:
        ev = self.events.get(p)
        return ev[-1][1] if ev else None

    def _set(self, p: int, state: Optional[str]) -> None:
        ev = self.events.setdefault(p, [])
        if ev and ev[-1][1] == state:
            return
        now = self.clock.now_ms()
        if ev and ev[-1][0] == now:
            ev[-1] = (now, state)         # several changes in one instant: keep the last
        else:
            ev.append((now, state))

    def listener(self, name: str) -> ConsumerRebalanceListener:
        """The listener member ``name`` subscribes with."""
        log = self

        class _Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                log._lose(name, revoked)

            def on_partitions_lost(self, lost):
                log._lose(name, lost)

            def on_partitions_assigned(self, assigned):
                log._assign(name, assigned)

        return _Listener()

    def attach(self, name: str, consumer) -> None:
        """Tell the log which consumer member ``name`` is (it pauses partitions to restore)."""
        self._consumers[name] = consumer

    def crashed(self, name: str) -> None:
        """Member ``name`` died now: its partitions have no reader from this instant."""
        for p in list(self.events):
            st = self.state(p)
            if st == name or st == RESTORING + name:
                self._set(p, None)
        for key in [k for k in self._restoring if k[0] == name]:
            del self._restoring[key]

    def _lose(self, name: str, tps) -> None:
        for tp in tps:
            st = self.state(tp.partition)
            if st == name or st == RESTORING + name:
                self._set(tp.partition, None)
            self._restoring.pop((name, tp.partition), None)
            if self.counting:
                self.revoked.setdefault(name, []).append(tp.partition)

    def _assign(self, name: str, tps) -> None:
        if self.counting:      # one per completed JoinGroup+SyncGroup, or per KIP-848 reconciliation
            self.assignments_received[name] = self.assignments_received.get(name, 0) + 1
        for tp in tps:
            p = tp.partition
            prev = self.last_owner.get(p)
            self.last_owner[p] = name
            if self.restore_ms and prev is not None and prev != name:
                self._consumers[name].pause(tp)
                if self.counting:
                    self.restores += 1
                self._restoring[(name, p)] = (self.clock.now_ms() + self.restore_ms, tp)
                self._set(p, RESTORING + name)
            else:
                self._set(p, name)

    def tick(self) -> None:
        """Resume the partitions whose restore is done."""
        now = self.clock.now_ms()
        for (name, p), (until, tp) in sorted(self._restoring.items()):
            if until <= now:
                del self._restoring[(name, p)]
                consumer = self._consumers[name]
                if tp in consumer.assignment():
                    consumer.resume(tp)
                    self._set(p, name)

    def restoring(self) -> bool:
        return bool(self._restoring)

    # ------------------------------------------------------------ measuring
    def _intervals(self, p: int, start: int, end: int) -> list[tuple[int, int, Optional[str]]]:
        out = []
        ev = self.events.get(p, [])
        for i, (t, st) in enumerate(ev):
            t_next = ev[i + 1][0] if i + 1 < len(ev) else end
            a, b = max(t, start), min(t_next, end)
            if b > a:
                out.append((a, b, st))
        return out

    def pauses(self, partitions: int, start: int, end: int) -> dict:
        """Paused partition-seconds and the longest pause (s) in ``[start, end)`` ms, plus
        per partition its paused seconds (a list indexed by partition)."""
        per, longest = [], 0
        for p in range(partitions):
            total, run = 0, 0
            for a, b, st in self._intervals(p, start, end):
                if st is None or st.startswith(RESTORING):
                    total += b - a
                    run += b - a
                    longest = max(longest, run)
                else:
                    run = 0
            per.append(round(total / 1000, 3))
        return {"paused_partition_seconds": round(sum(per), 3),
                "longest_pause_s": round(longest / 1000, 3), "per_partition_s": per}

    def spans(self, partitions: int, start: int, end: int) -> list[tuple]:
        """``(row, start_s, end_s, owner)`` for :func:`kafkasim.scenarios._figures.timeline`,
        times in seconds from ``start``; a restoring partition has owner ``"restoring"``."""
        out = []
        for p in range(partitions):
            for a, b, st in self._intervals(p, start, end):
                owner = "restoring" if st and st.startswith(RESTORING) else st
                out.append((f"p{p}", (a - start) / 1000, (b - start) / 1000, owner))
        return out
