"""Automatic preferred leader election: the controller moves leadership back to the preferred replicas.

:class:`LeaderBalance` is a part of :class:`kafkasim.broker.cluster.Cluster`. It is what Kafka
4's KRaft controller does (``QuorumController.maybeScheduleNextBalancePartitionLeaders``,
``ReplicationControlManager.maybeBalancePartitionLeaders``), on the cluster's injected clock:

1. The controller keeps the set of **imbalanced** partitions: those whose leader is not their
   preferred replica (the first replica of the assignment), offline ones included; it is
   updated on every partition change (Kafka's ``imbalancedPartitions``; its size is the
   ``PreferredReplicaImbalanceCount`` gauge).
2. With ``auto.leader.rebalance.enable`` (default true), whenever that set is not empty and no
   check is scheduled, a check is scheduled ``leader.imbalance.check.interval.seconds``
   (default 300) from now, or 10 ms from now when the previous check stopped at its cap
   (step 4). The schedule is considered after every partition change and when the cluster
   opens (a controller taking over starts with no check scheduled).
3. The check runs in :meth:`kafkasim.broker.cluster.Cluster.tick` once the clock has reached
   it. For each imbalanced partition, in partition order, the preferred replica becomes the
   leader when it is live and in the ISR: an election like any other (epoch + 1, the
   followers truncate, clients see the new leader in Metadata); otherwise the partition keeps
   its leader.
4. A check makes at most 1,000 elections (Kafka's ``MAX_ELECTIONS_PER_IMBALANCE``); then step 2
   again: while a partition is still imbalanced (its preferred replica down or out of the
   ISR), the next check comes one interval later.

Worked example (3 brokers, 6 partitions RF 3, defaults): brokers 1 and 2 stop at ``t``, so
broker 0 leads all 6 partitions and 4 are imbalanced; the check is due at ``t + 300 s``. The
brokers return at ``t + 1 s``, catch up and rejoin every ISR; at ``t + 300 s`` the 4
partitions get their preferred leaders back (epoch + 1) and each broker leads 2 again.

``leader.imbalance.per.broker.percentage`` is accepted and not read, as in Kafka 4. The
ZooKeeper controller (``KafkaController.checkAndTriggerAutoLeaderRebalance``, gone in 4.0)
ran every interval from its start and, per broker, elected only when the share of the
partitions preferring that broker but led by another was *above* the percentage; the KRaft
controller moves every imbalanced partition.

Thread-safety: the set and the schedule are guarded by the cluster's ``_ctl_lock`` (a
partition change reports under its partition's lock only); the check takes the metadata lock,
then each partition's lock, and never holds ``_ctl_lock`` while it takes another lock.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from kafkasim.types import TopicPartition

from kafkasim.broker.core import INTERNAL_TOPICS, BrokerCore
from kafkasim.broker.replica import PartitionState

__all__ = ["LeaderBalance", "MAX_ELECTIONS_PER_IMBALANCE"]

MAX_ELECTIONS_PER_IMBALANCE = 1_000
"""Elections one check makes at most (Kafka's ``ReplicationControlManager.MAX_ELECTIONS_PER_IMBALANCE``)."""
_IMMEDIATELY_MS = 10
"""Delay of the next check after one that hit the cap (Kafka's 10 ms)."""

# Kafka's QuorumController.ImbalanceSchedule
_SCHEDULED, _DEFERRED, _IMMEDIATELY = "scheduled", "deferred", "immediately"


class LeaderBalance(BrokerCore):
    """The controller's periodic preferred leader election (see the module docstring)."""

    broker_config: dict[str, Any]
    _ctl_lock: threading.Lock

    def _init_leader_balance(self) -> None:
        """Before the cluster opens: nothing imbalanced, no check scheduled, checks off."""
        self._imbalanced: set[TopicPartition] = set()
        self._balance_interval_ms: Optional[int] = None
        self._balance_schedule = _DEFERRED
        self._balance_due_ms: Optional[int] = None

    def _start_leader_balance(self) -> None:
        """Once open: read the configs and schedule the first check if an imbalance exists (step 2)."""
        if self.broker_config["auto.leader.rebalance.enable"]:
            self._balance_interval_ms = self.broker_config["leader.imbalance.check.interval.seconds"] * 1000
        with self._ctl_lock:
            self._maybe_schedule_balance()

    def _track_leader(self, tp: TopicPartition, part: PartitionState) -> None:
        """Step 1 for one partition that changed (``_ctl_lock`` held), then step 2."""
        if tp.topic in INTERNAL_TOPICS:
            return
        if part.leader == part.replicas[0]:
            self._imbalanced.discard(tp)
        else:
            self._imbalanced.add(tp)
        self._maybe_schedule_balance()

    def _forget_topic(self, topic: str) -> None:
        """A deleted topic's partitions leave the set."""
        with self._ctl_lock:
            self._imbalanced = {tp for tp in self._imbalanced if tp.topic != topic}

    def _maybe_schedule_balance(self) -> None:
        """Step 2 (``_ctl_lock`` held)."""
        if self._balance_schedule == _SCHEDULED or self._balance_interval_ms is None or not self._imbalanced:
            return
        delay = self._balance_interval_ms if self._balance_schedule == _DEFERRED else _IMMEDIATELY_MS
        self._balance_due_ms = self.clock.now_ms() + delay
        self._balance_schedule = _SCHEDULED

    def _maybe_balance_leaders(self, now: int) -> int:
        """Steps 3 and 4 when the check is due (the metadata lock held); returns the elections."""
        with self._ctl_lock:
            if self._balance_due_ms is None or now < self._balance_due_ms:
                return 0
            self._balance_due_ms = None      # running: still "scheduled", so changes do not schedule
            candidates = sorted(self._imbalanced)
        elected = 0
        try:
            for tp in candidates:
                if elected >= MAX_ELECTIONS_PER_IMBALANCE:
                    break
                part = self._partitions.get(tp)
                if part is None:             # deleted meanwhile
                    continue
                with part.lock:
                    preferred = part.replicas[0]
                    if part.leader != preferred and preferred in part.isr and part.faults.reachable(preferred):
                        part.become_leader(preferred, part.isr)
                        elected += 1
        finally:
            with self._ctl_lock:
                self._balance_schedule = _IMMEDIATELY if elected >= MAX_ELECTIONS_PER_IMBALANCE else _DEFERRED
                self._maybe_schedule_balance()
        return elected

    def leader_balance(self) -> dict[str, Any]:
        """The controller's view of it: ``enabled``, ``check_interval_s``, ``next_check_ms`` (on the
        clock; None when none is scheduled) and the ``imbalanced`` partitions (``"topic-p"``)."""
        with self._ctl_lock:
            return {"enabled": self._balance_interval_ms is not None,
                    "check_interval_s": self.broker_config["leader.imbalance.check.interval.seconds"],
                    "next_check_ms": self._balance_due_ms,
                    "imbalanced": [f"{tp.topic}-{tp.partition}" for tp in sorted(self._imbalanced)]}
