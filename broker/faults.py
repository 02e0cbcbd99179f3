"""Faults a cluster can be given, and the leader elections they cause (Kafka's controller).

:class:`ClusterFaults` is a part of :class:`kafkasim.broker.cluster.Cluster`. Every fault is
deterministic, recorded in ``cluster.json`` (so it survives between CLI calls), shown in
``describe`` and appended to the cluster's fault event log (:meth:`ClusterFaults.fault_events`:
clock time, kind, broker), so a seeded schedule can be compared run against run:

- ``stop_broker(id)`` / ``start_broker(id)``: the broker goes down / comes back (a clean
  shutdown: its logs stay as they were written).
- ``isolate(id, from_=...)`` / ``heal(id)``: the broker stays up but is cut off from

  * ``"both"`` (the default): clients, peers and the controller; the controller fences it,
    exactly as if it had stopped (clients get ``NetworkError``; an isolated leader cannot take
    writes, so it never diverges);
  * ``"clients"``: clients only. It stays registered and unfenced: it keeps its leaderships,
    replicates, and Metadata still names it, but every client request to it fails with
    ``NetworkError`` (a served listener refuses connections), as a partitioned Kafka broker
    that still reaches the controller and its peers;
  * ``"followers"``: its peers only (replication, both ways). Clients and the controller still
    reach it, so nothing is re-elected: its followers stop fetching from it and it stops
    fetching from its leaders, and each leader drops the lagging replicas from the ISR once
    they have not caught up for ``replica.lag.time.max.ms`` (Kafka's ``maybeShrinkIsr``). A
    leader cut off this way keeps taking ``acks=1`` writes; ``acks=all`` waits for the ISR
    (``RequestTimedOutError`` with Kafka's defaults) and, once the ISR has shrunk below
    ``min.insync.replicas``, fails with ``NotEnoughReplicasError``. Healing lets the
    followers truncate and catch up; they rejoin the ISR when caught up.

- ``slow(id, delay_ms)``: the broker, as a follower, fetches only every ``delay_ms`` on the
  clock; it drops out of the ISR once it has not caught up for ``replica.lag.time.max.ms``.
- ``fill_disk(id)`` / ``clear_disk(id)``: the broker's disk is full. Every append to its
  replicas fails with :class:`~kafkasim.errors.KafkaStorageError` (``KAFKA_STORAGE_ERROR``, 56)
  before a byte is written (``Log.refuse_writes``), and its log directory goes offline at once,
  as Kafka's ``LogDirFailureChannel`` takes a directory offline on the first failed write or
  checkpoint: its replicas are offline (``ReplicaManager.handleLogDirFailure``), the partitions
  it led elect a new leader from the rest of the ISR (steps 1 to 3 below; none left: offline),
  it leaves every ISR, and a request for one of its replicas addressed to it answers
  ``KafkaStorageError``. The other brokers go on. The directory stays offline after
  ``clear_disk`` until the broker restarts (``stop_broker``, ``start_broker``): then it
  recovers, truncates and catches up like any returning broker (step 4). A broker started
  while its disk is still full comes up with its directory offline again. One log directory
  per broker (no JBOD): docs/differences.md.

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

from dataclasses import asdict, dataclass
from typing import Any, Optional

from kafkasim.arguments import bad_arg, check_arg
from kafkasim.errors import InvalidArgumentError
from kafkasim.faults import Faults, FaultRule

from kafkasim.broker.core import INTERNAL_TOPICS, BrokerCore
from kafkasim.broker.log_dirs import DISK_FULL
from kafkasim.broker.replica import PartitionState

__all__ = ["ClusterFaults", "ClusterFaultControls", "BrokerFaultEvent", "ISOLATE_FROM", "DISK_FULL"]

_MAX_LOST_LISTED = 10_000
ISOLATE_FROM = ("both", "clients", "followers")
"""What ``isolate(id, from_=...)`` cuts a broker off from."""


@dataclass(frozen=True)
class BrokerFaultEvent:
    """One broker-level fault or its effect, at clock time ``time_ms``: ``kind`` is ``stop``,
    ``start``, ``isolate``, ``heal``, ``slow``, ``fill-disk``, ``clear-disk``,
    ``log-dir-offline`` or ``log-dir-online``; ``detail`` the isolation side or the delay."""

    time_ms: int
    kind: str
    broker: int
    detail: Optional[Any] = None

    def to_json(self) -> dict:
        return asdict(self)


class ClusterFaults(BrokerCore):
    """stop/start, isolate/heal, slow, fill_disk/clear_disk a broker, and the elections that
    follow (module docstring)."""

    _fault_events: list
    _offline_log_dirs: frozenset

    def stop_broker(self, broker_id: int) -> None:
        """Take ``broker_id`` down: leadership moves, it leaves every ISR (steps 1–3)."""
        self._set_state(broker_id, "stopped", {"alive", "isolated"}, "stop")

    def start_broker(self, broker_id: int) -> None:
        """Bring a stopped ``broker_id`` back: it truncates, catches up, rejoins (step 4); with
        its disk still full its log directory goes offline again at once."""
        self._set_state(broker_id, "alive", {"stopped"}, "start")

    def isolate(self, broker_id: int, from_: str = "both") -> None:
        """Cut ``broker_id`` off from ``"both"`` (clients, peers and the controller: fenced, as
        stopped), ``"clients"`` only or ``"followers"`` only (module docstring)."""
        if from_ not in ISOLATE_FROM:
            raise bad_arg("from_", from_, "'both', 'clients' or 'followers'")
        with self._lock:
            self._check_open()
            info = self._broker_info(broker_id)
            if info.state == "alive" and from_ != "both" and info.isolated_from not in (None, from_):
                from_ = "both"              # cut off from the other side as well
            if from_ == "both" or info.state != "alive":
                if info.state == "alive":
                    info.isolated_from = None
                self._set_state(broker_id, "isolated", {"alive"}, "isolate", "both")
                return
            if info.isolated_from == from_:
                raise InvalidArgumentError(f"broker {broker_id} is already isolated from {from_}")
            info.isolated_from = from_
            self._record("isolate", broker_id, from_)
            self._save()

    def heal(self, broker_id: int) -> None:
        """End the isolation of ``broker_id``, whichever side it was from (a fenced broker comes
        back as a started broker does; cut-off followers truncate and catch up)."""
        with self._lock:
            self._check_open()
            info = self._broker_info(broker_id)
            side = info.isolated_from
            if side is None:
                self._set_state(broker_id, "alive", {"isolated"}, "heal")
                return
            info.isolated_from = None
            self._record("heal", broker_id, side)
            with self.deferred_save():
                if side == "followers" and self.reachable(broker_id):
                    for part in self._replicated_partitions():
                        if broker_id in part.replicas:
                            with part.lock:
                                self._catch_up(part)

    def slow(self, broker_id: int, delay_ms: int) -> None:
        """Make ``broker_id``'s follower fetches happen every ``delay_ms`` (0: healthy)."""
        check_arg("delay_ms", delay_ms, "int", min=0)
        with self._lock:
            self._check_open()
            self._broker_info(broker_id).delay_ms = delay_ms
            self._record("slow", broker_id, delay_ms)
            due = self.clock.now_ms() + delay_ms
            for part in self._replicated_partitions():   # the next fetch on the new schedule
                r = part.hosted.get(broker_id)
                if r is not None:
                    r.next_fetch_ms = min(r.next_fetch_ms, due)
            self._save()

    def fill_disk(self, broker_id: int) -> None:
        """Fill ``broker_id``'s disk: its appends fail with KafkaStorageError and its log
        directory goes offline (module docstring); InvalidArgumentError when already full."""
        with self._lock:
            self._check_open()
            info = self._broker_info(broker_id)
            if info.disk_full:
                raise InvalidArgumentError(f"broker {broker_id}'s disk is already full (clear_disk first)")
            info.disk_full = True
            self._record("fill-disk", broker_id)
            self._refuse_writes(broker_id, DISK_FULL)
            with self.deferred_save():
                if info.state != "stopped" and not info.log_dir_offline:
                    self._log_dir_failed(broker_id)

    def clear_disk(self, broker_id: int) -> None:
        """Free ``broker_id``'s disk: appends to its logs go through again, but its log
        directory stays offline until the broker restarts (``stop_broker``, ``start_broker``),
        as in Kafka; InvalidArgumentError when its disk is not full."""
        with self._lock:
            self._check_open()
            info = self._broker_info(broker_id)
            if not info.disk_full:
                raise InvalidArgumentError(f"broker {broker_id}'s disk is not full")
            info.disk_full = False
            self._record("clear-disk", broker_id)
            self._refuse_writes(broker_id, None)
            self._save()

    @property
    def faults(self) -> "ClusterFaultControls":
        """The broker-level faults and the request rules, on one surface (:class:`ClusterFaultControls`)."""
        return self._fault_controls

    @property
    def log_dir_offline(self) -> bool:
        """Whether any broker's log directory is offline (:attr:`offline_log_dirs` says whose)."""
        return bool(self._offline_log_dirs)

    @property
    def offline_log_dirs(self) -> list[int]:
        """The brokers whose log directory is offline (disk full, not restarted since)."""
        return sorted(self._offline_log_dirs)

    def fault_events(self) -> list[BrokerFaultEvent]:
        """Every broker-level fault (and log directory change) since this object opened, in order."""
        with self._lock:
            return list(self._fault_events)

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

    def _set_state(self, broker_id: int, state: str, allowed_from: set[str], kind: str,
                   detail: Optional[str] = None) -> None:
        with self._lock:
            self._check_open()
            info = self._broker_info(broker_id)
            if info.state not in allowed_from:
                raise InvalidArgumentError(f"broker {broker_id} is {info.state}; cannot make it {state} "
                                           f"(only from {' or '.join(sorted(allowed_from))})")
            info.state = state
            info.isolated_from = None
            self._record(kind, broker_id, detail)
            with self.deferred_save():
                if kind == "start" and info.log_dir_offline != info.disk_full:
                    # a restart brings the log directory back, unless the disk is still full
                    info.log_dir_offline = info.disk_full
                    self._offline_changed()
                    self._record("log-dir-offline" if info.disk_full else "log-dir-online", broker_id)
                if state == "alive" and info.log_dir_offline:
                    return                  # its replicas stay offline
                for part in self._replicated_partitions():
                    if broker_id not in part.replicas:
                        continue
                    with part.lock:
                        if state == "alive":
                            self._rejoin(part, broker_id)
                        else:
                            self._leave(part, broker_id)

    def _log_dir_failed(self, broker_id: int) -> None:
        """Kafka's ``handleLogDirFailure``: the broker's replicas go offline; it leaves every
        ISR and the partitions it led elect again (steps 1–3)."""
        self._ctl.brokers[broker_id].log_dir_offline = True
        self._offline_changed()
        self._record("log-dir-offline", broker_id)
        for part in self._replicated_partitions():
            if broker_id in part.replicas:
                with part.lock:
                    self._leave(part, broker_id)

    def _offline_changed(self) -> None:
        self._offline_log_dirs = frozenset(b for b, i in self._ctl.brokers.items() if i.log_dir_offline)

    def _refuse_writes(self, broker_id: int, reason: Optional[str]) -> None:
        for part in self._replicated_partitions():
            r = part.hosted.get(broker_id)
            if r is not None:
                r.log.refuse_writes(reason)

    def _record(self, kind: str, broker_id: int, detail: Optional[Any] = None) -> None:
        self._fault_events.append(BrokerFaultEvent(self.clock.now_ms(), kind, broker_id, detail))

    def _catch_up(self, part: PartitionState) -> None:
        """Followers that can fetch again truncate against the leader and catch up."""
        if part.leader < 0:
            return
        for b in part.replicas:
            if part.can_fetch(b):
                part.truncate_follower(part.hosted[b])
                part.hosted[b].next_fetch_ms = self.clock.now_ms()
        part.replicate(self.clock.now_ms())

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


class ClusterFaultControls:
    """``cluster.faults``: the cluster's broker-level faults and its request rules on one surface.

    Broker faults (:class:`ClusterFaults`): :meth:`stop`, :meth:`start`, :meth:`isolate`,
    :meth:`heal`, :meth:`slow`, :meth:`fill_disk`, :meth:`clear_disk`, logged in
    :meth:`events`. Request rules (:mod:`kafkasim.faults`): :meth:`add`, :meth:`remove`,
    :meth:`clear`, :meth:`rules`, held in :attr:`requests`, a :class:`~kafkasim.faults.Faults`
    on the cluster's clock, seeded with the cluster's seed; a served cluster's listeners
    (:class:`kafkasim.server.listeners.ClusterListeners`) hold these same rules, so a rule added
    here acts on the real clients of that server.

    Example::

        >>> c.faults.fill_disk(2)                                       # doctest: +SKIP
        >>> c.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3, partition=0)

    Thread-safety: as the cluster's fault calls and :class:`~kafkasim.faults.Faults`.
    """

    def __init__(self, cluster: ClusterFaults, requests: Faults, seed: int = 0) -> None:
        self._cluster = cluster
        self.requests = requests
        """The request rules (what ``kafkasim fault add`` and the server's control endpoint edit)."""
        self.seed = seed
        """The seed of the request rules' RNG (the cluster's seed)."""

    def use(self, requests: Faults) -> None:
        """Hold ``requests`` from now on: a server serving the cluster passes its own, which
        knows the API names it serves. The rules installed so far move over in order, each
        checked again (InvalidArgumentError naming a field the server refuses, and then nothing
        changes); a moved rule keeps what is left of its count, and its hits start again."""
        now = self._cluster.clock.now_ms()
        moved = []
        for r in self.requests.rules():
            if r.expired(now):
                continue
            moved.append(dict(api=r.api, error=r.error, topic=r.topic, partition=r.partition, broker=r.broker,
                              client_id=r.client_id, latency_ms=r.latency_ms, latency_jitter_ms=r.latency_jitter_ms,
                              drop=r.drop, probability=r.probability, throttle_ms=r.throttle_ms,
                              count=None if r.count is None else r.count - r.hits,
                              duration_ms=None if r.duration_ms is None else r.created_ms + r.duration_ms - now))
        added = []
        try:
            for rule in moved:
                added.append(requests.add(**rule).rule_id)
        except InvalidArgumentError:
            for rule_id in added:
                requests.remove(rule_id)
            raise
        self.requests = requests

    # -- broker-level faults ------------------------------------------------------------------
    def stop(self, broker_id: int) -> None:
        self._cluster.stop_broker(broker_id)

    def start(self, broker_id: int) -> None:
        self._cluster.start_broker(broker_id)

    def isolate(self, broker_id: int, from_: str = "both") -> None:
        self._cluster.isolate(broker_id, from_)

    def heal(self, broker_id: int) -> None:
        self._cluster.heal(broker_id)

    def slow(self, broker_id: int, delay_ms: int) -> None:
        self._cluster.slow(broker_id, delay_ms)

    def fill_disk(self, broker_id: int) -> None:
        self._cluster.fill_disk(broker_id)

    def clear_disk(self, broker_id: int) -> None:
        self._cluster.clear_disk(broker_id)

    def events(self) -> list[BrokerFaultEvent]:
        """The broker-level fault events (the request rules' hits: ``requests.events()``)."""
        return self._cluster.fault_events()

    # -- request rules -----------------------------------------------------------------------
    def add(self, *, broker: Optional[int] = None, **rule: Any) -> FaultRule:
        """Install a request rule (:meth:`kafkasim.faults.Faults.add`'s fields); a ``broker``
        must be one of the cluster's (InvalidArgumentError naming it)."""
        if broker is not None and not isinstance(broker, bool) and isinstance(broker, int) \
                and broker not in self._cluster.brokers:
            raise bad_arg("broker", broker, f"one of the brokers {sorted(self._cluster.brokers)}")
        return self.requests.add(broker=broker, **rule)

    def remove(self, rule_id: int) -> FaultRule:
        return self.requests.remove(rule_id)

    def clear(self) -> int:
        """Remove every request rule (broker faults stay: heal, start, clear_disk them)."""
        return self.requests.clear()

    def rules(self) -> list[FaultRule]:
        return self.requests.rules()

    def to_json(self) -> dict:
        """``{"brokers": [per broker: id, state, isolated_from, delay_ms, disk_full,
        log_dir_offline], "rules": [...], "events": [...]}``."""
        brokers = [{"id": b, "state": i.state, "isolated_from": i.isolated_from, "delay_ms": i.delay_ms,
                    "disk_full": i.disk_full, "log_dir_offline": i.log_dir_offline}
                   for b, i in sorted(self._cluster.brokers.items())]
        return {"brokers": brokers, "rules": self.requests.to_json(),
                "events": [e.to_json() for e in self.events()]}
