"""Shared parts of the consumer-group (KIP-848) tests: test assignors, topics, requests.

- :class:`PreparedAssignor` is Kafka's ``MockPartitionAssignor``: the test prepares the
  target assignment (the test decides it) and can read the GroupSpec it was called with.
- :class:`RangeByIdAssignor` is a small deterministic assignor for the property test:
  per topic id (sorted), the subscribed members (sorted) get contiguous ranges; no
  stickiness, so targets move a lot, which is what the property test wants.
"""

from __future__ import annotations

import uuid

from kafkasim.assignors.group_spec import GroupSpec, SubscribedTopicDescriber
from kafkasim.coordinator.consumer_group import TopicMetadata
from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatRequest


def topic(name: str, partitions: int) -> TopicMetadata:
    """A topic with a topic id derived from its name (stable across runs)."""
    return TopicMetadata(topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name), name=name, num_partitions=partitions)


def tid(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def mk(**topics: tuple[int, ...]) -> dict[uuid.UUID, frozenset[int]]:
    """mk(foo=(0, 1)) -> {tid("foo"): frozenset({0, 1})} (Kafka's ``mkAssignment``)."""
    return {tid(name): frozenset(ps) for name, ps in topics.items() if ps}


class PreparedAssignor:
    """Returns the assignment the test prepared (Kafka's ``MockPartitionAssignor``)."""

    def __init__(self, name: str = "range") -> None:
        self.name = name
        self.prepared: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
        self.specs: list[GroupSpec] = []

    def prepare(self, assignment: dict[str, dict[uuid.UUID, frozenset[int]]]) -> None:
        self.prepared = assignment

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber):
        self.specs.append(group_spec)
        return {m: dict(self.prepared.get(m, {})) for m in group_spec.members}


class RangeByIdAssignor:
    """Deterministic: each topic's partitions split in ranges over its subscribers, sorted by id."""

    def __init__(self, name: str = "range") -> None:
        self.name = name

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber):
        out: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in group_spec.members}
        topic_ids = sorted({t for s in group_spec.members.values() for t in s.subscribed_topic_ids}, key=str)
        for t in topic_ids:
            n = topics.num_partitions(t)
            subs = sorted(m for m, s in group_spec.members.items() if t in s.subscribed_topic_ids)
            for i, m in enumerate(subs):
                lo, hi = i * n // len(subs), (i + 1) * n // len(subs)
                if hi > lo:
                    out[m][t] = frozenset(range(lo, hi))
        return out


def join(group: str, member: str, topics=("foo",), *, instance_id=None, regex=None, assignor=None,
         rebalance_timeout_ms=5000, rack_id=None) -> ConsumerGroupHeartbeatRequest:
    """A first heartbeat (epoch 0) subscribing to ``topics`` (None: by ``regex`` only)."""
    return ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, instance_id=instance_id, rack_id=rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=tuple(topics) if topics is not None else None, subscribed_topic_regex=regex,
        server_assignor=assignor, topic_partitions={})


def beat(group: str, member: str, epoch: int, owned=None, *, instance_id=None,
         topics=None, regex=None) -> ConsumerGroupHeartbeatRequest:
    """A heartbeat at ``epoch``; ``owned`` None means "unchanged since the last one"."""
    return ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, instance_id=instance_id,
        subscribed_topic_names=tuple(topics) if topics is not None else None, subscribed_topic_regex=regex,
        topic_partitions=owned)
