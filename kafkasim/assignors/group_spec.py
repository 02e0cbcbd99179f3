"""The contract of server-side assignors (KIP-848): what the group coordinator hands an
assignor, and what it gets back.

Kafka's interface is ``org.apache.kafka.coordinator.group.api.assignor``:
``ConsumerGroupPartitionAssignor.assign(GroupSpec, SubscribedTopicDescriber) -> GroupAssignment``.
This module restates its shape (facts of the interface, no code) for kafkasim's
``uniform`` and ``range`` assignors and for the consumer-group coordinator that calls them:

- topics are named by their **topic id** (``uuid.UUID``), as in Kafka: the assignors'
  orderings (and so their exact output) follow topic ids, not names;
- a member's subscription is a set of topic ids; its current assignment
  (``assigned_partitions``) is what it owns in the target assignment being replaced, so the
  assignor can be sticky;
- ``subscription_type`` is ``HOMOGENEOUS`` when every member subscribes to the same topics,
  else ``HETEROGENEOUS`` (Kafka's ``SubscriptionType``): the uniform assignor picks its
  builder by it;
- the describer answers a topic's partition count (-1: unknown topic) and the racks of a
  partition's replicas (rack-aware assignment, KIP-881 on the broker side).

An assignor is a pure function of ``(group_spec, topics)``: no clock, no randomness, no
state between calls. It raises :class:`PartitionAssignorError` (Kafka's
``PartitionAssignorException``) when it cannot assign.

Thread-safety: immutable values and pure functions; safe to share.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Mapping, Optional, Protocol

from kafkasim.errors import KafkaSimError

__all__ = [
    "HOMOGENEOUS", "HETEROGENEOUS", "MemberSubscription", "GroupSpec", "SubscribedTopicDescriber",
    "TopicsImage", "ServerAssignor", "PartitionAssignorError",
]

HOMOGENEOUS = "HOMOGENEOUS"
"""Every member subscribes to the same topics (Kafka's ``SubscriptionType.HOMOGENEOUS``)."""
HETEROGENEOUS = "HETEROGENEOUS"
"""Members subscribe to different topics (Kafka's ``SubscriptionType.HETEROGENEOUS``)."""


class PartitionAssignorError(KafkaSimError):
    """A server-side assignor could not compute an assignment (Kafka's
    ``PartitionAssignorException``; the heartbeat answers UNKNOWN_SERVER_ERROR)."""


@dataclass(frozen=True)
class MemberSubscription:
    """One member as the assignor sees it (Kafka's ``MemberSubscription``)."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    assigned_partitions: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    """What the member holds in the current target assignment (topic id -> partitions)."""
    rack_id: Optional[str] = None
    instance_id: Optional[str] = None


@dataclass(frozen=True)
class GroupSpec:
    """The group as the assignor sees it (Kafka's ``GroupSpec``): member id -> subscription."""

    members: Mapping[str, MemberSubscription]
    subscription_type: str = HOMOGENEOUS

    def is_partition_assigned(self, topic_id: uuid.UUID, partition: int) -> bool:
        """Whether some member holds ``partition`` of ``topic_id`` in the current target."""
        return any(partition in m.assigned_partitions.get(topic_id, ()) for m in self.members.values())


class SubscribedTopicDescriber(Protocol):
    """What the assignor may ask about a topic (Kafka's ``SubscribedTopicDescriber``)."""

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        """The topic's partition count; -1 when the topic is unknown."""
        ...

    def racks_for_partition(self, topic_id: uuid.UUID, partition: int) -> frozenset[str]:
        """The racks of the partition's replicas (empty: no rack information)."""
        ...


@dataclass(frozen=True)
class TopicsImage:
    """A :class:`SubscribedTopicDescriber` over plain data: topic id -> partition count, and
    optionally (topic id, partition) -> racks."""

    partitions: Mapping[uuid.UUID, int]
    racks: Mapping[tuple[uuid.UUID, int], frozenset[str]] = field(default_factory=dict)

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        return self.partitions.get(topic_id, -1)

    def racks_for_partition(self, topic_id: uuid.UUID, partition: int) -> frozenset[str]:
        return self.racks.get((topic_id, partition), frozenset())


class ServerAssignor(Protocol):
    """A server-side assignor (Kafka's ``ConsumerGroupPartitionAssignor``): ``name`` is the
    value of ``group.consumer.assignors`` that selects it."""

    name: str

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """member id -> (topic id -> partitions); every member of ``group_spec`` is a key."""
        ...
