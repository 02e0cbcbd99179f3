"""Kafka's ``RangeAssignor`` (``partition.assignment.strategy=range``), without racks.

Works per topic: the topic's partitions in numeric order are cut into contiguous
ranges, one per subscribed member in Kafka's member order; when the count does not
divide evenly, the first members get one extra partition.

Worked example (Kafka's javadoc): members C0, C1 both subscribe to t0 and t1, each
with 3 partitions::

    C0: [t0p0, t0p1, t1p0, t1p1]
    C1: [t0p2, t1p2]

Algorithm, for each topic T with N partitions (topics without metadata are skipped):

1. M = the members subscribed to T, sorted as Kafka's ``MemberInfo`` (static members
   by ``group.instance.id`` first, then member ids);
2. q, r = divmod(N, len(M));
3. the i-th member gets partitions ``[q*i + min(i, r), ... )`` of length ``q + (i < r)``.

Balance guarantee (Kafka's): per topic, counts of subscribed members differ by at most
one; across topics the first members can accumulate one extra per topic.

Rack awareness: Kafka's RangeAssignor (KIP-881) only changes the result when partition
replica racks are known; kafkasim's ``partitions_per_topic`` carries none, so the result
is Kafka's for "no rack information" whatever ``rack_id`` says.

Thread-safety: stateless; safe to share.
"""

from __future__ import annotations

from typing import Mapping

from kafkasim.types import TopicPartition

from kafkasim.assignors.base import (
    EAGER, Assignor, Subscription, java_str_key, sorted_members, topic_partitions,
)

__all__ = ["RangeAssignor"]


class RangeAssignor(Assignor):
    """Contiguous per-topic ranges; the first members in Kafka's order get the extras."""

    name = "range"
    supported_protocols = (EAGER,)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        order = sorted_members(subscriptions, subscriptions)      # Kafka's MemberInfo order, once
        members_per_topic: dict[str, list[str]] = {}
        for member in order:
            for topic in dict.fromkeys(subscriptions[member].topics):
                members_per_topic.setdefault(topic, []).append(member)
        # topics in Java string order, so each member's list comes out sorted
        for topic in sorted(members_per_topic, key=java_str_key):
            n = partitions_per_topic.get(topic) or 0
            if n <= 0:
                continue
            ordered = members_per_topic[topic]
            tps = topic_partitions(topic, 0, n)
            per_member, extra = divmod(n, len(ordered))
            for i, member in enumerate(ordered):
                start = per_member * i + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                if length:
                    assignment[member].extend(tps[start:start + length])
        return assignment
