"""Kafka's ``RoundRobinAssignor`` (``partition.assignment.strategy=roundrobin``).

Lays out every subscribed partition (topics sorted, then partition number) and deals
them to the members in Kafka's member order, round robin, skipping a member that is
not subscribed to the partition's topic.

Worked examples (Kafka's javadoc)::

    C0, C1 both subscribe to t0, t1 (3 partitions each):
        C0: [t0p0, t0p2, t1p1]
        C1: [t0p1, t1p0, t1p2]
    C0 -> {t0}, C1 -> {t0, t1}, C2 -> {t0, t1, t2}; t0, t1, t2 have 1, 2, 3 partitions:
        C0: [t0p0]
        C1: [t1p0]
        C2: [t1p1, t2p0, t2p1, t2p2]

Algorithm:

1. members sorted as Kafka's ``MemberInfo`` (static members by ``group.instance.id``
   first, then member ids) form a circular list with a cursor at the first member;
2. partitions = every partition of every subscribed topic that has metadata, topics in
   Java string order, partitions in numeric order;
3. for each partition: advance the cursor past members not subscribed to its topic,
   give the partition to the member under the cursor, advance the cursor by one.

Balance guarantee (Kafka's): with identical subscriptions, counts differ by at most one.

Thread-safety: stateless; safe to share.
"""

from __future__ import annotations

from typing import Mapping

from kafkasim.types import TopicPartition

from kafkasim.assignors.base import (
    EAGER, Assignor, Subscription, all_partitions_sorted, partition_sort_key, sorted_members,
)

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor(Assignor):
    """Deal all partitions round robin over the members, skipping non-subscribers."""

    name = "roundrobin"
    supported_protocols = (EAGER,)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members = sorted_members(subscriptions, subscriptions)
        if not members:
            return assignment
        topic_sets = [frozenset(subscriptions[m].topics) for m in members]
        all_topics = set().union(*topic_sets)
        cursor, n = 0, len(members)
        for tp in all_partitions_sorted(partitions_per_topic, all_topics):
            while tp.topic not in topic_sets[cursor]:
                cursor = (cursor + 1) % n
            assignment[members[cursor]].append(tp)
            cursor = (cursor + 1) % n
        for tps in assignment.values():
            tps.sort(key=partition_sort_key)
        return assignment
