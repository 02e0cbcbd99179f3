"""Cluster operations: describe with per-broker skew, add a broker, reassign, preferred leaders.

:class:`Reassignment` is a part of :class:`kafkasim.broker.cluster.Cluster`:

- :meth:`Reassignment.describe_cluster`: brokers (rack, state, delay), every partition's
  leader / replicas / ISR / epoch / HW with the flags ``under_replicated`` (ISR smaller
  than the replicas), ``under_min_isr`` (ISR smaller than ``min.insync.replicas``) and
  ``offline`` (no leader), ``preferred_replica_imbalance`` (how many partitions are not led by
  their first replica), the lost records of unclean elections, and the per-broker
  **skew**: replicas, leaders and bytes per broker, each with max/min (``inf`` when a
  broker holds none) flagged above 1.3 (the operators' reassignment threshold).
- :meth:`Reassignment.metrics`: Kafka's replication gauges (under-replicated, under-min-ISR,
  offline, preferred replica imbalance) and counts (ISR shrinks/expands, leader elections, lost records).
- :meth:`Reassignment.add_broker`: a new broker joins and holds nothing: Kafka never moves
  partitions on its own (the "adding a broker rebalances" misconception).
- :meth:`Reassignment.reassign` executes a plan (``kafka-reassign-partitions --execute``), per
  partition in order: (1) the new replicas are added (replicas = old + new, as Kafka's
  adding replicas); (2) each copies the leader's log, at most ``throttle_bytes_per_s`` of
  simulated time (bytes / throttle: a MockClock moves by it; a real clock is not slept, the
  time is only reported); (3) it joins the ISR when caught
  up; (4) if the leader is leaving, leadership moves to the first target replica in the
  ISR (epoch + 1); (5) the removed replicas are dropped (logs deleted) and the replica list
  becomes the target, in its order. Returns bytes moved and simulated time.
  :meth:`Reassignment.verify` says which partitions match a plan.
- :meth:`Reassignment.elect_leaders`: preferred leader election (the first replica leads
  when it is live and in the ISR).

The plan *generation* (fewest moves to bring replicas and leaders within one of the average)
is ``kafkasim.placement.reassign`` (its own module); these only execute and check plans.

Thread-safety: each call takes the cluster's metadata lock, then each partition's lock.
"""

from __future__ import annotations

import math
import os
import shutil
from typing import Any, Mapping, Optional, Sequence

from kafkasim.arguments import check_arg
from kafkasim.clock import MockClock
from kafkasim.errors import InvalidArgumentError, InvalidReplicaAssignmentError, UnknownTopicOrPartitionError
from kafkasim.types import TopicPartition

from kafkasim.broker.controller import BrokerInfo
from kafkasim.broker.core import INTERNAL_TOPICS, BrokerCore

__all__ = ["Reassignment", "SKEW_LIMIT", "skew_of"]

SKEW_LIMIT = 1.3
"""Operators reassign when max/min partitions per broker passes this."""


def skew_of(per_broker: Mapping[int, float]) -> dict[str, Any]:
    """``{max, min, ratio, flagged}`` of a per-broker count (ratio ``inf`` when min is 0)."""
    values = list(per_broker.values()) or [0]
    hi, lo = max(values), min(values)
    ratio = (hi / lo) if lo else (math.inf if hi else 1.0)
    return {"max": hi, "min": lo, "ratio": ratio, "flagged": ratio > SKEW_LIMIT}


class Reassignment(BrokerCore):
    """describe_cluster, add_broker, reassign, verify, elect_leaders (module docstring)."""

    def describe_cluster(self) -> dict[str, Any]:
        """The controller's view: brokers, partitions with their flags, skew, lost records."""
        with self._lock:
            self._check_open()
            parts = []
            replicas = {b: 0 for b in self._ctl.brokers}
            leaders = dict(replicas)
            size = dict(replicas)
            for tp, part in sorted(self._partitions.items()):
                if tp.topic in INTERNAL_TOPICS:
                    continue
                min_isr = self._config_of(self._topics[tp.topic]).min_insync_replicas
                parts.append({"topic": tp.topic, "partition": tp.partition, "leader": part.leader,
                              "leader_epoch": part.leader_epoch, "replicas": list(part.replicas),
                              "isr": list(part.isr), "high_watermark": part.high_watermark,
                              "log_end_offsets": {b: r.log.log_end_offset for b, r in part.hosted.items()},
                              "under_replicated": len(part.isr) < len(part.replicas),
                              "under_min_isr": len(part.isr) < min_isr, "offline": part.leader < 0})
                for b, r in part.hosted.items():
                    replicas[b] = replicas.get(b, 0) + 1
                    size[b] = size.get(b, 0) + r.log.size_in_bytes
                if part.leader >= 0:
                    leaders[part.leader] = leaders.get(part.leader, 0) + 1
            brokers = [{"id": b, "rack": i.rack, "state": i.state, "delay_ms": i.delay_ms,
                        "isolated_from": i.isolated_from, "disk_full": i.disk_full,
                        "log_dir_offline": i.log_dir_offline,
                        "replicas": replicas[b], "leaders": leaders[b], "bytes": size[b]}
                       for b, i in sorted(self._ctl.brokers.items())]
            return {"brokers": brokers, "partitions": parts,
                    "preferred_replica_imbalance": sum(p["leader"] != p["replicas"][0] for p in parts),
                    "under_replicated": sum(p["under_replicated"] for p in parts),
                    "under_min_isr": sum(p["under_min_isr"] for p in parts),
                    "offline": sum(p["offline"] for p in parts),
                    "skew": {"replicas": skew_of(replicas), "leaders": skew_of(leaders), "bytes": skew_of(size)},
                    "lost_records": len(self._ctl.lost_records)}

    def metrics(self) -> dict[str, int]:
        """Kafka's replication gauges now, and the counts since this cluster object opened:
        ``UnderReplicatedPartitions``, ``UnderMinIsrPartitionCount``, ``OfflinePartitionsCount``,
        ``PreferredReplicaImbalanceCount`` (partitions not led by their first replica, offline ones
        included, as KRaft counts them), ``IsrShrinks``, ``IsrExpands``, ``LeaderElections``,
        ``LostRecords`` (unclean elections), ``OfflineLogDirectoryCount`` (Kafka's ``LogManager`` gauge,
        summed over the brokers: one log directory each)."""
        d = self.describe_cluster()
        with self._lock:
            parts = [p for tp, p in self._partitions.items() if tp.topic not in INTERNAL_TOPICS]
            total = {k: sum(p.counts[k] for p in parts) for k in ("isr_shrinks", "isr_expands", "leader_elections")}
        return {"UnderReplicatedPartitions": d["under_replicated"], "UnderMinIsrPartitionCount": d["under_min_isr"],
                "OfflinePartitionsCount": d["offline"],
                "PreferredReplicaImbalanceCount": d["preferred_replica_imbalance"], "IsrShrinks": total["isr_shrinks"],
                "IsrExpands": total["isr_expands"], "LeaderElections": total["leader_elections"],
                "LostRecords": d["lost_records"],
                "OfflineLogDirectoryCount": sum(b["log_dir_offline"] for b in d["brokers"])}

    def assignment(self) -> dict[TopicPartition, list[int]]:
        """Every (non-internal) partition's replica list, in assignment order."""
        with self._lock:
            self._check_open()
            return {tp: list(p.replicas) for tp, p in sorted(self._partitions.items())
                    if tp.topic not in INTERNAL_TOPICS}

    def add_broker(self, broker_id: int, rack: Optional[str] = None) -> None:
        """Add an empty broker: nothing moves until a reassignment."""
        check_arg("broker_id", broker_id, "int", min=0)
        if rack is not None and not isinstance(rack, str):
            raise InvalidArgumentError(f"rack {rack!r}: expected a string or None")
        with self._lock:
            self._check_open()
            if broker_id in self._ctl.brokers:
                raise InvalidArgumentError(f"broker {broker_id} is already in the cluster")
            self._ctl.brokers[broker_id] = BrokerInfo(broker_id, rack)
            self._save()

    def _check_plan(self, target: Mapping) -> dict[TopicPartition, list[int]]:
        plan: dict[TopicPartition, list[int]] = {}
        for key, replicas in target.items():
            tp = TopicPartition(*key) if isinstance(key, (tuple, list)) else key
            if not isinstance(tp, TopicPartition) or tp.topic in INTERNAL_TOPICS or tp not in self._partitions:
                raise UnknownTopicOrPartitionError(f"reassignment names {key!r}: no such (non-internal) partition")
            if (not isinstance(replicas, (list, tuple)) or not replicas
                    or len(set(replicas)) != len(replicas)):
                raise InvalidReplicaAssignmentError(f"{tp}: replicas {replicas!r} must be a non-empty list of distinct ids")
            for b in replicas:
                if b not in self._ctl.brokers:
                    raise InvalidReplicaAssignmentError(f"{tp}: broker {b} is not in the cluster")
            plan[tp] = list(replicas)
        return plan

    def reassign(self, target: Mapping, throttle_bytes_per_s: Optional[int] = None) -> dict[str, Any]:
        """Execute ``target`` (partition → replica list): steps 1–5 of the module docstring."""
        if throttle_bytes_per_s is not None:
            check_arg("throttle_bytes_per_s", throttle_bytes_per_s, "int", min=1)
        with self._lock:
            self._check_open()
            plan = self._check_plan(target)
            for tp, replicas in plan.items():
                adding = [b for b in replicas if b not in self._partitions[tp].replicas]
                down = [b for b in adding if not self.reachable(b)]
                if down:
                    raise InvalidReplicaAssignmentError(f"{tp}: target broker(s) {down} are not alive")
            self._copy_ms = 0.0
            moved_bytes = added = 0
            moved = []
            with self.deferred_save():
                for tp, replicas in sorted(plan.items()):
                    part = self._partitions[tp]
                    if part.replicas == replicas:
                        continue
                    with part.lock:
                        b, n = self._move(tp, part, replicas, throttle_bytes_per_s)
                    moved_bytes += b
                    added += n
                    moved.append(str(tp))
            return {"partitions": moved, "replicas_added": added, "bytes_moved": moved_bytes,
                    "time_ms": round(self._copy_ms), "throttle_bytes_per_s": throttle_bytes_per_s}

    def _move(self, tp: TopicPartition, part, target: list[int], throttle: Optional[int]) -> tuple[int, int]:
        if part.leader < 0:
            raise InvalidReplicaAssignmentError(f"{tp} is offline: it cannot be reassigned until it has a leader")
        config = self._config_of(self._topics[tp.topic])
        adding = [b for b in target if b not in part.replicas]
        for b in adding:                                                   # step 1
            self._discard_stale_path(self._partition_path(b, *tp))
            part.add_replica(b, self._open_replica_log(b, tp, config))
        copied = 0
        chunk = throttle if throttle is not None else None
        for b in adding:                                                   # step 2
            r = part.hosted[b]
            while r.log.log_end_offset < part.log.log_end_offset:
                n = part.fetch_into(r, self.clock.now_ms(), chunk)
                copied += n
                if throttle is not None and n:
                    ms = n * 1000 / throttle
                    self._copy_ms += ms
                    if isinstance(self.clock, MockClock):
                        self.clock.sleep(ms)     # a simulation's clock moves; a real one is not slept
            r.last_caught_up_ms = self.clock.now_ms()
        part.maybe_expand_isr()                                            # step 3
        if part.leader not in target:                                      # step 4
            in_isr = [b for b in target if b in part.isr and self.reachable(b)]
            if not in_isr:
                raise InvalidReplicaAssignmentError(f"{tp}: no target replica of {target} is in the ISR {part.isr}")
            part.become_leader(in_isr[0], part.isr)
        for r in part.set_replicas(target):                                # step 5
            r.log.close()
            path = self._partition_path(r.broker_id, *tp)
            if os.path.isdir(path):
                shutil.rmtree(path)
        return copied, len(adding)

    def _reassign_one(self, tp: TopicPartition, replicas: list[int]) -> None:
        """AlterPartitionReassignments' one partition (broker/reassignments.py): :meth:`reassign`."""
        self.reassign({tp: replicas})

    def verify(self, target: Mapping) -> dict[str, Any]:
        """Which partitions of ``target`` have exactly the target replicas, all in the ISR."""
        with self._lock:
            self._check_open()
            plan = self._check_plan(target)
            rows = []
            for tp, replicas in sorted(plan.items()):
                part = self._partitions[tp]
                done = part.replicas == replicas and set(part.isr) == set(replicas)
                rows.append({"topic": tp.topic, "partition": tp.partition, "target": replicas,
                             "replicas": list(part.replicas), "isr": list(part.isr), "complete": done})
            return {"complete": all(r["complete"] for r in rows), "partitions": rows}

    def elect_leaders(self, partitions: Optional[Sequence[TopicPartition]] = None) -> list[str]:
        """Preferred leader election: where the first replica is live, in the ISR and not
        leading, it becomes the leader. Returns the partitions whose leader changed."""
        with self._lock:
            self._check_open()
            changed = []
            with self.deferred_save():
                for tp, part in sorted(self._partitions.items()):
                    if tp.topic in INTERNAL_TOPICS or (partitions is not None and tp not in partitions):
                        continue
                    preferred = part.replicas[0]
                    with part.lock:
                        if part.leader != preferred and preferred in part.isr and self.reachable(preferred):
                            part.become_leader(preferred, part.isr)
                            changed.append(str(tp))
            return changed
