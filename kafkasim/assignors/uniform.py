"""``uniform``: Kafka's server-side ``UniformAssignor`` (KIP-848), the default of
``group.consumer.assignors``.

Followed: apache/kafka ``group-coordinator/.../assignor/UniformAssignor.java`` and
``UniformHomogeneousAssignmentBuilder.java`` at commit 1eb7644349cb (4.0.0-SNAPSHOT, October
2024; the builders were called OptimizedUniformAssignmentBuilder / GeneralUniformAssignmentBuilder
before 3.9). These builders take no account of racks: Kafka 4.0's uniform assignor is not
rack-aware, and neither is this one.

The assignor picks a builder by the group's subscription type:

- ``HOMOGENEOUS`` (every member subscribes to the same topics): :func:`assign_homogeneous`,
  below; balance first (member sizes differ by at most one), then stickiness;
- ``HETEROGENEOUS``: :func:`kafkasim.assignors.uniform_heterogeneous.assign_heterogeneous`.

The homogeneous builder, step by step:

1. The subscribed topics are the first member's subscription, walked in the order of a Java
   ``HashSet<Uuid>`` (:func:`~kafkasim.assignors._java.uuid_hashset_order`). A topic unknown
   to the describer raises :class:`PartitionAssignorError`.
2. The unassigned list: for each topic in that order, its partitions 0..n-1 that no member
   holds in the current target assignment. ``total`` counts every subscribed partition.
3. ``min_quota = total // members``; the first ``total % members`` members (in the spec's
   member order) get one more.
4. For each member in the spec's member order: partitions of topics it no longer subscribes
   to are dropped; of a topic's partitions (walked in Java ``HashSet<Integer>`` order,
   :func:`~kafkasim.assignors._java.int_hashset_order`) it keeps as many as
   its remaining quota allows and appends the rest to the unassigned list. A member left
   below its quota joins the unfilled list with what it still may take.
5. The unfilled members, in order, take partitions from the front of the unassigned list
   until their quota is met. A partition left over raises :class:`PartitionAssignorError`.

Worked example (Kafka's ``testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks``): topics T1
(3 partitions) and T3 (2) — whose ids put T3 first in a Java ``HashSet`` — members A and B,
nothing assigned yet. total = 5, quotas A 3, B 2; unassigned = T3-0, T3-1, T1-0, T1-1, T1-2;
so A = {T1: 0, T3: 0, 1} and B = {T1: 1, 2}.

Orders: members follow the iteration order of ``group_spec.members`` (Kafka iterates the
coordinator's member map; its tests use a ``TreeMap``, i.e. sorted ids), and a member's
current assignment follows the iteration order of its ``assigned_partitions`` mapping (Kafka
iterates that map as it is). Partitions of one topic are walked in the order of a Java
``HashSet<Integer>`` copied from them: ascending while the partition numbers are below the
set's capacity, but ``{0, 1, 16}`` walks 0, 16, 1 (Kafka's sets of partitions are
``HashSet``s; which one a member keeps when over quota depends on it).

Thread-safety: pure functions over immutable inputs; safe to share.
"""

from __future__ import annotations

import uuid

from kafkasim.assignors._java import int_hashset_order, uuid_hashset_order
from kafkasim.assignors.group_spec import (
    HOMOGENEOUS, GroupSpec, PartitionAssignorError, SubscribedTopicDescriber,
)
from kafkasim.assignors.uniform_heterogeneous import (
    Assignment, assign_heterogeneous, check_subscription_type, freeze,
)

__all__ = ["UniformAssignor", "assign_homogeneous"]


def _empty(group_spec: GroupSpec) -> Assignment:
    # Kafka returns an empty GroupAssignment here and its coordinator gives every member
    # missing from it an empty assignment; kafkasim's contract names every member instead.
    return {member_id: {} for member_id in group_spec.members}


def assign_homogeneous(group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> Assignment:
    """Kafka's ``UniformHomogeneousAssignmentBuilder.build`` (steps in the module docstring)."""
    members = list(group_spec.members)
    subscribed = uuid_hashset_order(group_spec.members[members[0]].subscribed_topic_ids)
    if not subscribed:
        return _empty(group_spec)

    owned = {(t, p) for m in group_spec.members.values() for t, ps in m.assigned_partitions.items() for p in ps}
    unassigned: list[tuple[uuid.UUID, int]] = []
    total = 0
    for topic_id in subscribed:
        count = topics.num_partitions(topic_id)
        if count == -1:
            raise PartitionAssignorError(
                f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
        unassigned.extend((topic_id, p) for p in range(count) if (topic_id, p) not in owned)
        total += count

    min_quota, extra = divmod(total, len(members))
    subscribed_set = set(subscribed)
    target: dict[str, dict[uuid.UUID, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    for member_id in members:
        quota = min_quota + (1 if extra > 0 else 0)
        extra -= 1 if extra > 0 else 0
        kept: dict[uuid.UUID, set[int]] = {}
        for topic_id, partitions in group_spec.members[member_id].assigned_partitions.items():
            if topic_id not in subscribed_set:
                continue
            ordered = int_hashset_order(partitions)
            take = min(quota, len(ordered))
            if ordered[:take]:
                kept[topic_id] = set(ordered[:take])
            unassigned.extend((topic_id, p) for p in ordered[take:])
            quota -= take
        if quota > 0:
            unfilled.append((member_id, quota))
        target[member_id] = kept

    index = 0
    for member_id, remaining in unfilled:
        assignment = target[member_id]
        while remaining > 0 and index < len(unassigned):
            topic_id, partition = unassigned[index]
            index += 1
            remaining -= 1
            assignment.setdefault(topic_id, set()).add(partition)
    if index < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    return freeze(target)


class UniformAssignor:
    """Kafka's ``UniformAssignor``: balanced and sticky, one builder per subscription type.

    Example::

        >>> import uuid
        >>> from kafkasim.assignors.group_spec import GroupSpec, MemberSubscription, TopicsImage
        >>> t = uuid.UUID(int=1)
        >>> spec = GroupSpec({"A": MemberSubscription(frozenset({t})), "B": MemberSubscription(frozenset({t}))})
        >>> out = UniformAssignor().assign(spec, TopicsImage({t: 3}))
        >>> sorted(out["A"][t]), sorted(out["B"][t])
        ([0, 1], [2])
    """

    name = "uniform"

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> Assignment:
        """member id -> (topic id -> partitions); raises PartitionAssignorError for an unknown topic."""
        check_subscription_type(group_spec)
        if not group_spec.members:
            return {}
        if group_spec.subscription_type == HOMOGENEOUS:
            return assign_homogeneous(group_spec, topics)
        return assign_heterogeneous(group_spec, topics)
