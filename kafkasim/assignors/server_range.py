"""``range``: Kafka's server-side ``RangeAssignor`` (KIP-848, group-coordinator), not the
client-side one of :mod:`kafkasim.assignors.range`.

Followed: apache/kafka ``group-coordinator/.../assignor/RangeAssignor.java`` at commit
1eb7644349cb (4.0.0-SNAPSHOT). Kafka 4.0's server-side range assignor is neither rack-aware
nor sticky beyond the order of its members: a member's previous assignment is not read, and
static members (``member.instance.id``) keep their ranges because they sort by instance id.

Steps:

1. Members are sorted: static members first, by instance id; then the others, by member id
   (Java ``String.compareTo``: UTF-16 code units).
2. Each subscribed topic gets ``min_quota = partitions // subscribers`` and
   ``extra = partitions % subscribers`` (``subscribers``: every member when the group is
   ``HOMOGENEOUS``, else the members subscribed to it). A topic unknown to the describer
   raises :class:`PartitionAssignorError`.
3. In member order, each member takes, from each topic it subscribes to, the next contiguous
   range of ``min_quota`` partitions, plus one while ``extra`` lasts. When every member
   subscribes to every topic and the topics have as many partitions, the ranges line up:
   the assignment is co-partitioned.

Worked example (Kafka's javadoc): members M0 and M1, topics T1 and T2 of 3 partitions each →
M0 = {T1: 0, 1; T2: 0, 1}, M1 = {T1: 2; T2: 2}. With instance ids I0 on M1 and I1 on M0, M1
sorts first and takes the first ranges.

Thread-safety: pure function over immutable inputs; safe to share.
"""

from __future__ import annotations

import uuid

from kafkasim.assignors._java import string_sort_key
from kafkasim.assignors.group_spec import (
    HOMOGENEOUS, GroupSpec, PartitionAssignorError, SubscribedTopicDescriber,
)
from kafkasim.assignors.uniform_heterogeneous import check_subscription_type

__all__ = ["ServerRangeAssignor"]


class _Topic:
    __slots__ = ("partitions", "subscribers", "min_quota", "extra", "next_start")

    def __init__(self, partitions: int, subscribers: int) -> None:
        self.partitions = partitions
        self.subscribers = subscribers
        self.min_quota = -1
        self.extra = -1
        self.next_start = 0

    def take(self) -> frozenset[int]:
        """The next member's range (computing the quota on first use, as Kafka does)."""
        if self.min_quota == -1:
            self.min_quota, self.extra = divmod(self.partitions, self.subscribers)
        quota = self.min_quota
        if self.extra > 0:
            quota += 1
            self.extra -= 1
        start, end = self.next_start, min(self.next_start + quota, self.partitions)
        self.next_start = end
        return frozenset(range(start, end))


def _sorted_members(group_spec: GroupSpec) -> list[str]:
    def key(member_id: str):
        instance_id = group_spec.members[member_id].instance_id
        if instance_id is not None:
            return 0, string_sort_key(instance_id)
        return 1, string_sort_key(member_id)
    return sorted(group_spec.members, key=key)


class ServerRangeAssignor:
    """Kafka's group-coordinator ``RangeAssignor``: contiguous ranges, co-partitioned when possible.

    Example::

        >>> import uuid
        >>> from kafkasim.assignors.group_spec import GroupSpec, MemberSubscription, TopicsImage
        >>> t1, t2 = uuid.UUID(int=1), uuid.UUID(int=2)
        >>> sub = MemberSubscription(frozenset({t1, t2}))
        >>> out = ServerRangeAssignor().assign(GroupSpec({"M0": sub, "M1": sub}), TopicsImage({t1: 3, t2: 3}))
        >>> {m: {str(t)[-1]: sorted(ps) for t, ps in a.items()} for m, a in out.items()}
        {'M0': {'1': [0, 1], '2': [0, 1]}, 'M1': {'1': [2], '2': [2]}}
    """

    name = "range"

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """member id -> (topic id -> partitions); raises PartitionAssignorError for an unknown topic."""
        check_subscription_type(group_spec)
        if not group_spec.members:
            return {}
        members = _sorted_members(group_spec)
        homogeneous = group_spec.subscription_type == HOMOGENEOUS
        metadata: dict[uuid.UUID, _Topic] = {}
        subscriptions = [group_spec.members[members[0]]] if homogeneous else [group_spec.members[m] for m in members]
        for subscription in subscriptions:
            for topic_id in subscription.subscribed_topic_ids:
                if topic_id not in metadata:
                    count = topics.num_partitions(topic_id)
                    if count == -1:
                        raise PartitionAssignorError(
                            f"Member is subscribed to a non-existent topic {topic_id}")
                    metadata[topic_id] = _Topic(count, len(members) if homogeneous else 0)
                if not homogeneous:
                    metadata[topic_id].subscribers += 1
        assignment: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
        for member_id in members:
            subscribed = subscriptions[0].subscribed_topic_ids if homogeneous else \
                group_spec.members[member_id].subscribed_topic_ids
            own: dict[uuid.UUID, frozenset[int]] = {}
            for topic_id in subscribed:
                taken = metadata[topic_id].take()
                if taken:
                    own[topic_id] = taken
            assignment[member_id] = own
        return assignment
