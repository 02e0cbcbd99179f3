"""A cluster of brokers in one process: replicas on brokers and racks, the controller, its metadata.

``Cluster(data_dir, brokers=[(0, "r1"), (1, "r2"), (2, "r3")])`` is the
:class:`~kafkasim.broker.broker.Broker` API over N brokers: the same parts (topics, produce,
fetch, groups) over the same per-partition state (:mod:`kafkasim.broker.replica`), where a
partition now has several replicas. What the cluster adds:

- **Layout**: broker ``i`` keeps its replica of ``<topic>-<p>`` in
  ``data_dir/broker-<i>/<topic>-<p>`` (its own log directory); the controller state is
  ``data_dir/meta/cluster.json`` (:mod:`kafkasim.broker.controller`), topic metadata is the
  broker's (``meta/topics``). The internal ``__consumer_offsets`` stays cluster-wide and
  unreplicated in ``data_dir/__consumer_offsets-<p>`` (docs/differences.md).
- **Placement on create**: Kafka's ``assignReplicasToBrokers``
  (:mod:`kafkasim.placement.admin_utils`) over the live brokers, with a random start drawn
  from ``random.Random(f"{seed}:{n}")`` (``n`` counts placements, persisted), so it is
  reproducible across processes. A new partition's leader is its first replica, its ISR
  all its replicas.
- **Controller metadata** (replicas, leaders, ISR, epochs, racks, broker states, lost
  records) is written atomically on every change and reloaded on open; on open every
  reachable follower truncates against its leader (epochs) and catches up.
- **Clients** address a broker: :meth:`Cluster.node` gives a :class:`ClusterNode`, whose
  produce/fetch fail with ``NotLeaderOrFollowerError`` when it does not lead the partition
  and ``NetworkError`` when it is stopped or isolated. :meth:`Cluster.leader_for` is the
  metadata a client asks for.
- :meth:`Cluster.tick` runs the due follower fetches (slowed followers), the ISR check
  (``replica.lag.time.max.ms``), the controller's automatic preferred leader election when it
  is due (``auto.leader.rebalance.enable``, :mod:`kafkasim.broker.leader_balance`) and the
  broker's periodic maintenance.

Faults and elections are :mod:`kafkasim.broker.faults`; reassignment, preferred leader
election and per-broker skew are :mod:`kafkasim.broker.reassign`.

Invariants: the cluster holds the data-dir lock like a broker; every partition's replicas
are brokers of the cluster; ``cluster.json`` always describes every non-internal topic.

Thread-safety: as :class:`~kafkasim.broker.broker.Broker`; faults, ticks and reassignment
take the metadata lock, then each partition's lock; a partition change (an ISR move during
a produce, under the partition's lock only) updates the controller state under a small
lock of its own that is never held while another is taken, so the two orders cannot deadlock.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import threading
from typing import Any, Iterable, Mapping, Optional, Sequence

from kafkasim.arguments import check_arg
from kafkasim.clock import Clock
from kafkasim.config import LogConfig
from kafkasim.errors import InvalidArgumentError, InvalidReplicationFactorError, NetworkError
from kafkasim.faults import Faults
from kafkasim.placement.admin_utils import BrokerMetadata, assign_replicas_to_brokers
from kafkasim.storage.layout import partition_dir_name
from kafkasim.types import TopicPartition

from kafkasim.broker.broker import Broker
from kafkasim.broker.controller import BrokerInfo, ControllerState, ControllerStore, PartitionInfo
from kafkasim.broker.core import INTERNAL_TOPICS
from kafkasim.broker.faults import DISK_FULL, ClusterFaultControls, ClusterFaults
from kafkasim.broker.leader_balance import LeaderBalance
from kafkasim.broker.reassign import Reassignment
from kafkasim.broker.replica import PartitionState

__all__ = ["Cluster", "ClusterNode", "parse_brokers"]


def parse_brokers(spec: Any) -> list[tuple[int, Optional[str]]]:
    """``[(id, rack), ...]`` from a list of ids / ``(id, rack)`` pairs or the CLI's
    ``"0:r1,1:r2"`` / ``"0,1,2"``; an InvalidArgumentError names a bad entry."""
    items: Iterable = spec.split(",") if isinstance(spec, str) else spec
    out: list[tuple[int, Optional[str]]] = []
    for item in items:
        if isinstance(item, str):
            bid, _, rack = item.strip().partition(":")
            try:
                item = (int(bid), rack or None)
            except ValueError:
                raise InvalidArgumentError(f"broker {item!r}: expected ID or ID:RACK with an integer id") from None
        elif isinstance(item, int) and not isinstance(item, bool):
            item = (item, None)
        if (not isinstance(item, (tuple, list)) or len(item) != 2 or isinstance(item[0], bool)
                or not isinstance(item[0], int) or item[0] < 0
                or not (item[1] is None or isinstance(item[1], str))):
            raise InvalidArgumentError(f"broker {item!r}: expected (id >= 0, rack or None)")
        out.append((item[0], item[1]))
    if not out:
        raise InvalidArgumentError("a cluster needs at least one broker")
    ids = [b for b, _ in out]
    if len(set(ids)) != len(ids):
        raise InvalidArgumentError(f"broker ids must be distinct, got {ids}")
    return out


class Cluster(ClusterFaults, Reassignment, LeaderBalance, Broker):
    """N in-process brokers over ``data_dir`` (see the module docstring).

    ``brokers``: ``[(id, rack), ...]`` for a new cluster; None opens an existing one (a
    list given for an existing cluster must name the same brokers). ``seed`` seeds the
    placement's random start.
    """

    def __init__(self, data_dir: str | os.PathLike, brokers: Optional[Sequence] = None, *,
                 clock: Optional[Clock] = None, seed: int = 0, default_configs: Optional[Mapping[str, Any]] = None,
                 broker_configs: Optional[Mapping[str, Any]] = None) -> None:
        self._wanted_brokers = None if brokers is None else parse_brokers(brokers)
        self._seed = check_arg("seed", seed, "int", min=0)
        self._pending: dict[str, dict[int, list[int]]] = {}
        self._save_deferred = 0
        # guards cluster.json's in-memory state when a partition changes under its own lock
        # (ISR moves during produce); never held while taking another lock
        self._ctl_lock = threading.Lock()
        self._init_leader_balance()
        self._fault_events = []
        self._open(data_dir, clock, 0, default_configs, broker_configs)
        self._fault_controls = ClusterFaultControls(self, Faults(self.clock, seed=self._ctl.seed), self._ctl.seed)
        self.lag_max_ms = self.broker_config["replica.lag.time.max.ms"]
        for part in self._partitions.values():
            part.lag_max_ms = self.lag_max_ms
        with self._lock, self.deferred_save():
            self._reconcile()
        self._start_leader_balance()

    # -- controller state ------------------------------------------------------------------
    def _load_controller(self) -> None:
        self._ctl_store = ControllerStore(self.data_dir)
        if self._ctl_store.exists():
            self._ctl = self._ctl_store.load()
            if self._wanted_brokers is not None:
                have = sorted((b.id, b.rack) for b in self._ctl.brokers.values())
                if have != sorted(self._wanted_brokers):
                    raise InvalidArgumentError(
                        f"the cluster in {self.data_dir} has brokers {have}, not {sorted(self._wanted_brokers)} "
                        "(open it without brokers; add one with add_broker)")
        elif self._wanted_brokers is None:
            raise InvalidArgumentError(f"no cluster in {self.data_dir} (no meta/cluster.json): "
                                       "create one with Cluster(data_dir, brokers=[(0, 'r1'), ...])")
        else:
            self._ctl = ControllerState({b: BrokerInfo(b, rack) for b, rack in self._wanted_brokers},
                                        seed=self._seed)
            self._ctl_store.save(self._ctl)
        self.broker_id = min(self._ctl.brokers)     # hosts the unreplicated internal topics
        self._offline_changed()
        for b in self._ctl.brokers:
            self._remove_deleted_in(os.path.join(self.data_dir, f"broker-{b}"))

    def _remove_deleted_in(self, path: str) -> None:
        if os.path.isdir(path):
            for entry in os.scandir(path):
                if entry.is_dir() and entry.name.endswith("-delete"):
                    shutil.rmtree(entry.path, ignore_errors=True)

    @contextlib.contextmanager
    def deferred_save(self):
        """Write ``cluster.json`` once at the end of a multi-partition change."""
        self._save_deferred += 1
        try:
            yield
        finally:
            self._save_deferred -= 1
            if self._save_deferred == 0:
                with self._ctl_lock:
                    self._ctl_store.save(self._ctl)

    def _save(self) -> None:
        if self._save_deferred == 0:
            with self._ctl_lock:
                self._ctl_store.save(self._ctl)

    def _partition_changed(self, part: PartitionState) -> None:
        topic, _, p = part.name.rpartition("-")
        with self._ctl_lock:
            self._ctl.partitions[topic][int(p)] = PartitionInfo(list(part.replicas), part.leader, list(part.isr),
                                                                part.leader_epoch)
            self._track_leader(TopicPartition(topic, int(p)), part)
        self._save()

    # -- the fault view the partitions consult (kafkasim.broker.replica.FaultView) -----------
    def reachable(self, broker_id: int) -> bool:
        """Whether ``broker_id`` is up for the controller with its log directory online: it may
        lead, sit in an ISR and hold new replicas."""
        info = self._ctl.brokers.get(broker_id)
        return info is not None and info.state == "alive" and not info.log_dir_offline

    def can_replicate(self, broker_id: int) -> bool:
        """Whether ``broker_id`` takes part in replication: reachable and not cut off from its
        peers (``isolate(b, from_="followers")``)."""
        info = self._ctl.brokers.get(broker_id)
        return (info is not None and info.state == "alive" and not info.log_dir_offline
                and info.isolated_from != "followers")

    def serves_clients(self, broker_id: int) -> bool:
        """Whether clients reach ``broker_id`` (alive, not isolated from clients): what a served
        cluster's listener follows (it refuses connections otherwise)."""
        info = self._ctl.brokers.get(broker_id)
        return info is not None and info.state == "alive" and info.isolated_from != "clients"

    def fetch_delay_ms(self, broker_id: int) -> int:
        return self._ctl.brokers[broker_id].delay_ms

    # -- partitions --------------------------------------------------------------------------
    def _partition_path(self, broker_id: int, topic: str, partition: int) -> str:
        if topic in INTERNAL_TOPICS:
            return os.path.join(self.data_dir, partition_dir_name(topic, partition))
        return os.path.join(self.data_dir, f"broker-{broker_id}", partition_dir_name(topic, partition))

    def _replica_ids(self, tp: TopicPartition, part: Optional[PartitionState]) -> list[int]:
        if part is not None:
            return list(part.hosted)
        if tp.topic in INTERNAL_TOPICS:
            return [self.broker_id]
        return sorted(self._ctl.brokers)

    def _new_partition_state(self, tp: TopicPartition, config: LogConfig) -> PartitionState:
        if tp.topic in INTERNAL_TOPICS:
            return super()._new_partition_state(tp, config)
        infos = self._ctl.partitions.setdefault(tp.topic, [])
        if tp.partition < len(infos):
            info = infos[tp.partition]
        else:
            pending = self._pending.get(tp.topic)
            if pending is None:     # topic metadata without controller state (a crash): place it now
                pending = self._pending[tp.topic] = self._place(tp.partition + 1, len(self._live()), tp.partition)
            replicas = pending[tp.partition]
            live = [b for b in replicas if self.reachable(b)]
            info = PartitionInfo(replicas, live[0] if live else -1, live, 0)
            infos.append(info)
        hosted = {b: self._open_replica_log(b, tp, config) for b in info.replicas}
        for b, log in hosted.items():
            if self._ctl.brokers[b].disk_full:
                log.refuse_writes(DISK_FULL)
        part = PartitionState(str(tp), info.replicas, hosted, self.clock, leader=info.leader, isr=info.isr,
                              leader_epoch=info.leader_epoch, faults=self,
                              lag_max_ms=self.broker_config["replica.lag.time.max.ms"],
                              on_change=self._partition_changed)
        with self._ctl_lock:
            self._track_leader(tp, part)
        return part

    def _live(self) -> list[int]:
        return [b for b in sorted(self._ctl.brokers) if self.reachable(b)]

    def _place(self, n_partitions: int, rf: int, start_partition: int = -1) -> dict[int, list[int]]:
        """Kafka's placement over the live brokers, random start from the cluster's seeded RNG."""
        live = self._live()
        rng = random.Random(f"{self._ctl.seed}:{self._ctl.placements}")
        self._ctl.placements += 1
        brokers = [BrokerMetadata(b, self._ctl.brokers[b].rack) for b in live]
        if rf > len(brokers):
            raise InvalidReplicationFactorError(
                f"Replication factor: {rf} larger than available brokers: {len(brokers)}.")
        return assign_replicas_to_brokers(brokers, n_partitions, rf, start_partition_id=start_partition, rng=rng)

    def _reconcile(self) -> None:
        """After open: reachable followers truncate against their leader and catch up."""
        now = self.clock.now_ms()
        for part in self._partitions.values():
            if part.leader >= 0 and len(part.replicas) > 1:
                with part.lock:
                    for b in part.replicas:
                        if part.can_fetch(b):
                            part.truncate_follower(part.hosted[b])
                    part.replicate(now)

    # -- topic admin, with placement ---------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: Optional[Mapping[str, Any]] = None) -> dict:
        """Create a topic placed by Kafka's ``assignReplicasToBrokers`` over the live brokers
        (InvalidReplicationFactorError when it exceeds them); see Broker.create_topic."""
        with self._lock:
            self._check_open()
            if name not in INTERNAL_TOPICS and name not in self._topics and isinstance(partitions, int) \
                    and isinstance(replication_factor, int) and partitions > 0 and replication_factor > 0:
                self._pending[name] = self._place(partitions, replication_factor)
            try:
                with self.deferred_save():
                    return super().create_topic(name, partitions, replication_factor, configs)
            except BaseException:
                if name not in self._topics:
                    self._ctl.partitions.pop(name, None)
                raise
            finally:
                self._pending.pop(name, None)

    def create_partitions(self, name: str, total_count: int) -> dict:
        """Grow a topic; the new partitions are placed as Kafka's CreatePartitions does
        (``start_partition_id`` = the current count)."""
        with self._lock:
            self._check_open()
            meta = self._topic(name)
            if name not in INTERNAL_TOPICS and isinstance(total_count, int) and total_count > meta.partitions:
                self._pending[name] = self._place(total_count, meta.replication_factor, meta.partitions)
            try:
                with self.deferred_save():
                    return super().create_partitions(name, total_count)
            except BaseException:
                del self._ctl.partitions.get(name, [])[meta.partitions:]
                raise
            finally:
                self._pending.pop(name, None)

    def delete_topic(self, name: str) -> None:
        with self._lock:
            super().delete_topic(name)
            self._ctl.partitions.pop(name, None)
            self._forget_topic(name)
            self._save()

    # -- clients -----------------------------------------------------------------------------
    def node(self, broker_id: int) -> "ClusterNode":
        """The broker ``broker_id`` as a client sees it (produce/fetch addressed to it)."""
        if broker_id not in self._ctl.brokers:
            raise InvalidArgumentError(f"broker {broker_id} is not in the cluster (brokers {sorted(self._ctl.brokers)})")
        return ClusterNode(self, broker_id)

    def _check_node(self, node: int) -> None:
        self.check_reachable(node)

    def check_reachable(self, broker_id: int) -> None:
        """A client request to ``broker_id``: NetworkError when it is stopped or isolated (from
        clients, or from everything)."""
        if not self.serves_clients(broker_id):
            info = self._ctl.brokers.get(broker_id)
            state = ("unknown" if info is None else "isolated from clients" if info.state == "alive"
                     else info.state)
            raise NetworkError(f"broker {broker_id} is {state}: the connection failed")

    def preferred_read_replica(self, topic: str, partition: int, client_rack: str) -> int:
        """KIP-392's ``RackAwareReplicaSelector``: the leader if it is in ``client_rack``, else
        the first live in-sync replica in that rack, else the leader."""
        part = self._checked_partition(topic, partition)
        racks = {b: self._ctl.brokers[b].rack for b in part.replicas}
        if not client_rack or racks.get(part.leader) == client_rack:
            return part.leader
        near = [b for b in part.replicas if racks[b] == client_rack and b in part.isr and self.reachable(b)]
        return near[0] if near else part.leader

    def partition_racks(self) -> dict[TopicPartition, list[str]]:
        """Each partition's replica racks (what the KIP-881 rack-aware assignors take)."""
        with self._lock:
            return {tp: [self._ctl.brokers[b].rack or "" for b in part.replicas]
                    for tp, part in self._partitions.items() if tp.topic not in INTERNAL_TOPICS}

    @property
    def brokers(self) -> dict[int, BrokerInfo]:
        """Broker id → :class:`~kafkasim.broker.controller.BrokerInfo` (rack, state, delay)."""
        with self._lock:
            return {b: BrokerInfo(**vars(i)) for b, i in self._ctl.brokers.items()}

    def tick(self) -> Optional[dict[str, int]]:
        """Run the due follower fetches (slowed followers), the ISR check, the automatic
        preferred leader election when its check is due (kafkasim.broker.leader_balance), then
        the broker's periodic maintenance (see Broker.tick); returns the maintenance totals or None."""
        self._check_open()
        now = self.clock.now_ms()
        with self._lock, self.deferred_save():
            for part in list(self._partitions.values()):
                if part.leader >= 0 and len(part.replicas) > 1:
                    with part.lock:
                        part.replicate(now)
                        part.maybe_shrink_isr(now)
            self._maybe_balance_leaders(now)
        return super().tick()


class ClusterNode:
    """One broker of a :class:`Cluster` as a client addresses it (produce, fetch, metadata)."""

    def __init__(self, cluster: Cluster, broker_id: int) -> None:
        self.cluster = cluster
        self.broker_id = broker_id

    def produce(self, topic: str, partition: int, batch: bytes, acks: int | str = 1):
        return self.cluster.produce(topic, partition, batch, acks, node=self.broker_id)

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1_048_576):
        return self.cluster.fetch(topic, partition, offset, max_bytes, node=self.broker_id)

    def fetch_columns(self, topic: str, partition: int, offset: int, max_bytes: int = 1_048_576):
        return self.cluster.fetch_columns(topic, partition, offset, max_bytes, node=self.broker_id)

    def __repr__(self) -> str:
        return f"ClusterNode({self.broker_id})"
