"""Faults a cluster can be given, and the leader elections they cause (Kafka's controller).

:class:`ClusterFaults` is a part of :class:`kafkasim.broker.cluster.Cluster`. Every fault is
deterministic, recorded in ``cluster.json`` (so it survives between CLI calls) and shown in
``describe``:

- ``stop_broker(id)`` / ``start_broker(id)``: the broker goes down / comes back (a clean
  shutdown: its logs stay as they were written).
- ``isolate(id)`` / ``heal(id)``: the broker stays up but is cut off from clients, peers and
  the controller; the controller fences it, exactly as if it had stopped (clients get
  ``NetworkError``; an isolated leader cannot take writes, so it never diverges).
- ``slow(id, delay_ms)``: the broker, as a follower, fetches only every ``delay_ms`` on the
  clock; it drops out of the ISR once it has not caught up for ``replica.lag.time.max.ms``.

Elections (Kafka's ``PartitionLeaderElectionAlgorithms``), numbered:

1. A broker leaving (stopped or fenced) leaves every ISR it is in, except that the last ISR
   member stays (Kafka keeps it, so the partition knows who may come back clean).
2. Where it led: the new leader is the first replica, in assignment order, that is live and
   in the ISR; the epoch goes up and reachable followers truncate (kafkasim.broker.replica).
3. No live ISR member: with ``unclean.leader.election.enable`` (topic config) the first live
   replica leads (ISR = itself); every other replica, down or not, truncates against it at
   once, and the records so dropped that the new leader does not hold are **lost**: listed
   in ``lost_records`` (Kafka truncates a down replica when it returns, to the same
   offset; truncating at once keeps a later unclean election from resurrecting them).
   Otherwise the partition goes **offline** (leader -1) until an ISR member returns.
4. A broker coming back truncates its replicas against their leaders (OffsetsForLeaderEpoch)
   and catches up; it rejoins the ISR when caught up; an offline partition whose ISR holds
   it (or, unclean, any offline partition it replicates) elects it.

Thread-safety: each call takes the cluster's metadata lock, then each partition's lock.
"""

from __future__ import annotations

from kafkasim.arguments import check_arg
from kafkasim.errors import InvalidArgumentError

from kafkasim.broker.core import INTERNAL_TOPICS, BrokerCore
from kafkasim.broker.replica import PartitionState

__all__ = ["ClusterFaults"]

_MAX_LOST_LISTED = 10_000


class ClusterFaults(BrokerCore):
    """stop/start/isolate/heal/slow a broker, and the elections that follow (module docstring)."""

    def stop_broker(self, broker_id: int) -> None:
        """Take ``broker_id`` down: leadership moves, it leaves every ISR (steps 1–3)."""
        self._set_state(broker_id, "stopped", {"alive", "isolated"})

    def start_broker(self, broker_id: int) -> None:
        """Bring a stopped ``broker_id`` back: it truncates, catches up, rejoins (step 4)."""
        self._set_state(broker_id, "alive", {"stopped"})

    def isolate(self, broker_id: int) -> None:
        """Cut ``broker_id`` off from clients, peers and the controller (fenced, as stopped)."""
        self._set_state(broker_id, "isolated", {"alive"})

    def heal(self, broker_id: int) -> None:
        """End the isolation of ``broker_id`` (it comes back as a started broker does)."""
        self._set_state(broker_id, "alive", {"isolated"})

    def slow(self, broker_id: int, delay_ms: int) -> None:
        """Make ``broker_id``'s follower fetches happen every ``delay_ms`` (0: healthy)."""
        check_arg("delay_ms", delay_ms, "int", min=0)
        with self._lock:
            self._check_open()
            self._broker_info(broker_id).delay_ms = delay_ms
            due = self.clock.now_ms() + delay_ms
            for part in self._replicated_partitions():   # the next fetch on the new schedule
                r = part.hosted.get(broker_id)
                if r is not None:
                    r.next_fetch_ms = min(r.next_fetch_ms, due)
            self._save()

    @property
    def lost_records(self) -> list[dict]:
        """What unclean elections lost: ``{topic, partition, offset, key}`` (key as hex, or None)."""
        with self._lock:
            return [dict(r) for r in self._ctl.lost_records]

    # -- internals ---------------------------------------------------------------------------
    def _broker_info(self, broker_id: int):
        check_arg("broker_id", broker_id, "int", min=0)
        info = self._ctl.brokers.get(broker_id)
        if info is None:
            raise InvalidArgumentError(f"broker {broker_id} is not in the cluster (brokers {sorted(self._ctl.brokers)})")
        return info

    def _set_state(self, broker_id: int, state: str, allowed_from: set[str]) -> None:
        with self._lock:
            self._check_open()
            info = self._broker_info(broker_id)
            if info.state not in allowed_from:
                raise InvalidArgumentError(f"broker {broker_id} is {info.state}; cannot make it {state} "
                                           f"(only from {' or '.join(sorted(allowed_from))})")
            info.state = state
            with self.deferred_save():
                for part in self._replicated_partitions():
                    if broker_id not in part.replicas:
                        continue
                    with part.lock:
                        if state == "alive":
                            self._rejoin(part, broker_id)
                        else:
                            self._leave(part, broker_id)

    def _replicated_partitions(self) -> list[PartitionState]:
        return [part for tp, part in sorted(self._partitions.items()) if tp.topic not in INTERNAL_TOPICS]

    def _leave(self, part: PartitionState, broker_id: int) -> None:
        if part.leader == broker_id:
            self._elect(part)
        elif broker_id in part.isr and len(part.isr) > 1:
            part.remove_from_isr(broker_id)

    def _rejoin(self, part: PartitionState, broker_id: int) -> None:
        if part.leader >= 0:
            r = part.hosted[broker_id]
            part.truncate_follower(r)
            r.next_fetch_ms = self.clock.now_ms()
            part.replicate(self.clock.now_ms())
        else:
            self._elect(part)

    def _elect(self, part: PartitionState) -> None:
        """Steps 2 and 3: a new leader from the live ISR, else unclean (if the topic allows
        it), else offline."""
        topic = part.name.rpartition("-")[0]
        self._elect_leader(part, self._config_of(self._topics[topic]).unclean_leader_election_enable)

    def _elect_leader(self, part: PartitionState, unclean: bool) -> None:
        """Steps 2 and 3 with ``unclean`` given (ElectLeaders UNCLEAN forces it: broker/elections.py)."""
        live_isr = [b for b in part.replicas if b in part.isr and self.reachable(b)]
        if live_isr:
            part.become_leader(live_isr[0], live_isr)
            return
        topic = part.name.rpartition("-")[0]
        live = [b for b in part.replicas if self.reachable(b)]
        if live and unclean:
            lost: list = []
            part.become_leader(live[0], [live[0]], lost=lost)
            p = int(part.name.rpartition("-")[2])
            for rec in lost[:max(0, _MAX_LOST_LISTED - len(self._ctl.lost_records))]:
                self._ctl.lost_records.append({"topic": topic, "partition": p, "offset": rec.offset,
                                               "key": None if rec.key is None else rec.key.hex()})
        elif part.leader >= 0:
            part.become_leader(-1, part.isr)     # offline; the last ISR member stays in the ISR
