"""Partition reassignment as Kafka's AlterPartitionReassignments / ListPartitionReassignments ask for it.

:class:`PartitionReassignments` is one of the parts of :class:`kafkasim.broker.broker.Broker`
(and so of :class:`kafkasim.broker.cluster.Cluster`, whose
:class:`~kafkasim.broker.reassign.Reassignment` moves the replicas). Per partition, in
Kafka's controller's order (``ReplicationControlManager.alterPartitionReassignment``):

1. An unknown topic or partition → UnknownTopicOrPartitionError.
2. ``None`` (cancel): kafkasim's reassignment completes before the call returns, so none is
   ever in progress: NoReassignmentInProgressError, which is what Kafka answers once a
   reassignment has completed.
3. A replica list: empty, with a duplicate or naming a broker that is not in the cluster →
   InvalidReplicaAssignmentError; a different length while ``allow_replication_factor_change``
   is false (KIP-860) → InvalidReplicationFactorError; else the partition is reassigned.

The one broker is the only replica of each of its partitions: reassigning one to
``[broker_id]`` changes nothing and succeeds; any other broker id is not in the cluster.

:meth:`PartitionReassignments.list_partition_reassignments` lists the reassignments in
progress, which is always none (step 2); docs/differences.md says so.

Thread-safety: each call takes the metadata lock (and the cluster's reassignment its
partitions' locks).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

from kafkasim.arguments import check_topic_partition
from kafkasim.errors import (
    InvalidReplicaAssignmentError, InvalidReplicationFactorError, KafkaSimError,
    NoReassignmentInProgressError, UnknownTopicOrPartitionError,
)
from kafkasim.types import TopicPartition

from kafkasim.broker.core import BrokerCore

__all__ = ["PartitionReassignments"]


class PartitionReassignments(BrokerCore):
    """AlterPartitionReassignments / ListPartitionReassignments (see the module docstring)."""

    def alter_partition_reassignments(self, targets: Mapping, *, allow_replication_factor_change: bool = True
                                      ) -> dict[TopicPartition, Optional[KafkaSimError]]:
        """Reassign (or cancel: ``None``) each partition of ``targets`` (``{TopicPartition:
        [broker ids] or None}``); returns ``{partition: None (done) or its error}``."""
        out: dict[TopicPartition, Optional[KafkaSimError]] = {}
        for key, replicas in targets.items():
            tp = check_topic_partition(key)
            try:
                with self._lock:
                    self._check_open()
                    part = self._partitions.get(tp)
                    if part is None:
                        raise UnknownTopicOrPartitionError(f"No such partition as {tp.topic}-{tp.partition}")
                    if replicas is None:
                        raise NoReassignmentInProgressError(
                            f"{tp.topic}-{tp.partition} has no reassignment in progress")
                    replicas = list(replicas)
                    if not replicas:
                        raise InvalidReplicaAssignmentError(
                            "The manual partition assignment includes an empty replica list.")
                    if len(set(replicas)) != len(replicas):
                        raise InvalidReplicaAssignmentError(
                            f"The manual partition assignment includes a broker more than once: {replicas}")
                    if not allow_replication_factor_change and len(replicas) != len(part.replicas):
                        raise InvalidReplicationFactorError(
                            f"The replication factor is changed from {len(part.replicas)} to {len(replicas)}")
                    self._reassign_one(tp, replicas)
                out[tp] = None
            except KafkaSimError as exc:
                out[tp] = exc
        return out

    def list_partition_reassignments(self, partitions: Optional[Iterable[TopicPartition]] = None
                                     ) -> dict[TopicPartition, dict]:
        """The reassignments in progress: ``{partition: {"replicas", "adding_replicas",
        "removing_replicas"}}``. Always empty: a reassignment completes within its call."""
        if partitions is not None:
            for tp in partitions:
                check_topic_partition(tp)
        with self._lock:
            self._check_open()
        return {}

    def _reassign_one(self, tp: TopicPartition, replicas: list[int]) -> None:
        """Move one partition's replicas (a cluster: Reassignment.reassign). The one broker
        hosts every partition alone."""
        part = self._partitions[tp]
        for b in replicas:
            if b not in part.replicas:
                raise InvalidReplicaAssignmentError(
                    f"The manual partition assignment includes broker {b}, but no such broker is registered.")
