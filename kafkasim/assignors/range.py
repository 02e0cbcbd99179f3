"""Kafka's ``RangeAssignor`` (``partition.assignment.strategy=range``), rack-aware as Kafka >= 3.5.

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

Rack awareness (KIP-881, :func:`_rack_aware_assign`), when ``partition_racks`` is given:
a topic *needs* it when its members have racks, some member's rack holds a replica,
and some partition is not on every rack (:func:`~kafkasim.assignors.base.use_rack_aware_assignment`).
If no topic needs it the result is the plain range result above.  Otherwise, with each
topic keeping its per-member quota (``q`` each, ``r`` members one more, first come
first served):

1. rack matching: topics with the same members *and* the same partition count are
   co-partitioned: partition p of all of them goes together to the first member (in
   member order) whose rack holds a replica of partition p of every one of them and
   that is still under quota in all of them; a lone topic that needs it gives each
   member in turn, up to its quota, the lowest unassigned partitions on its rack;
2. the rest: each member in turn takes the lowest unassigned partitions of each topic
   up to its quota, whatever the racks (this is plain range when step 1 assigned nothing).

A member without a rack matches every partition.

Rack example (Kafka's ``testRackAwareAssignmentWithUniformSubscription``): t1 (6), t2 (7),
t3 (2), members consumer0..2 on racks a, b, c, one replica each, partition p of the k-th
partition overall on rack ``"abc"[k % 3]`` -> consumer0 gets t1-0, t1-3, t2-0, t2-3, t2-6,
consumer1 t1-1, t1-4, t2-1, t2-4, t3-0, consumer2 t1-2, t1-5, t2-2, t2-5, t3-1: every
partition on its consumer's rack.

Thread-safety: stateless (``prefer_rack_aware_logic`` is fixed at construction); safe to share.
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional

from kafkasim.types import TopicPartition

from kafkasim.assignors.base import (
    EAGER, PartitionRacks, RackAwareAssignor, Subscription, consumer_rack, java_str_key, replica_racks,
    sort_partitions, sorted_members, topic_partitions, use_rack_aware_assignment,
)

__all__ = ["RangeAssignor", "range_assign"]

Assignment = dict[str, list[TopicPartition]]


class RangeAssignor(RackAwareAssignor):
    """Contiguous per-topic ranges; the first members in Kafka's order get the extras."""

    name = "range"
    supported_protocols = (EAGER,)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription],
               partition_racks: Optional[PartitionRacks] = None) -> Assignment:
        return range_assign(partitions_per_topic, subscriptions, partition_racks,
                            prefer_rack_aware=self.prefer_rack_aware_logic)


def range_assign(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                 partition_racks: Optional[PartitionRacks] = None, *, prefer_rack_aware: bool = False) -> Assignment:
    """The range assignment (see the module docstring); rack-aware when racks make a difference."""
    order = sorted_members(subscriptions, subscriptions)      # Kafka's MemberInfo order, once
    members_per_topic: dict[str, list[str]] = {}
    for member in order:
        for topic in dict.fromkeys(subscriptions[member].topics):
            members_per_topic.setdefault(topic, []).append(member)
    # topics in Java string order, so each member's list comes out sorted
    topics = [(t, n) for t in sorted(members_per_topic, key=java_str_key)
              if (n := partitions_per_topic.get(t) or 0) > 0]
    if partition_racks is not None:
        racks = {m: r for m in order if (r := consumer_rack(subscriptions[m])) is not None}
        if racks:
            rack_aware = _rack_aware_assign(topics, members_per_topic, racks, partition_racks,
                                            subscriptions, prefer_rack_aware)
            if rack_aware is not None:
                return rack_aware
    assignment: Assignment = {m: [] for m in subscriptions}
    for topic, n in topics:
        ordered = members_per_topic[topic]
        tps = topic_partitions(topic, 0, n)
        per_member, extra = divmod(n, len(ordered))
        for i, member in enumerate(ordered):
            start = per_member * i + min(i, extra)
            length = per_member + (1 if i < extra else 0)
            if length:
                assignment[member].extend(tps[start:start + length])
    return assignment


class _TopicState:
    """Kafka's ``RangeAssignor.TopicAssignmentState``: one topic's quotas and what is left."""

    __slots__ = ("topic", "members", "member_racks", "replica_racks", "needs_rack_aware",
                 "unassigned", "assigned_count", "quota", "extra_left")

    def __init__(self, topic: str, n: int, members: list[str], racks: dict[str, str],
                 partition_racks: PartitionRacks, prefer: bool) -> None:
        self.topic = topic
        self.members = members
        self.member_racks = {m: racks.get(m) for m in members}
        member_racks = {r for r in self.member_racks.values() if r is not None}
        # Kafka reads the replica racks only when some member of the topic has a rack
        self.replica_racks: dict[int, frozenset] = {}
        if member_racks:
            self.replica_racks = {p: replica_racks(partition_racks, TopicPartition(topic, p)) for p in range(n)}
        all_racks = frozenset().union(*self.replica_racks.values())
        self.needs_rack_aware = use_rack_aware_assignment(member_racks, all_racks, self.replica_racks.values(),
                                                          prefer)
        self.unassigned: dict[int, None] = dict.fromkeys(range(n))   # ordered set of partition numbers
        self.assigned_count = dict.fromkeys(members, 0)
        self.quota, self.extra_left = divmod(n, len(members))

    def racks_match(self, member: str, p: int) -> bool:
        rack = self.member_racks[member]
        if rack is None:
            return True
        racks = self.replica_racks.get(p)
        return racks is not None and rack in racks

    def max_assignable(self, member: str) -> int:
        return max(0, self.quota + (1 if self.extra_left > 0 else 0) - self.assigned_count[member])

    def on_assigned(self, member: str, partitions: list[int]) -> None:
        self.assigned_count[member] += len(partitions)
        if self.assigned_count[member] > self.quota:
            self.extra_left -= 1
        for p in partitions:
            del self.unassigned[p]


def _give(assignment: Assignment, state: _TopicState, member: str, partitions: list[int]) -> None:
    assignment[member].extend(TopicPartition(state.topic, p) for p in partitions)
    state.on_assigned(member, partitions)


def _assign_ranges(assignment: Assignment, state: _TopicState, may_assign: Callable[[str, int], bool]) -> None:
    """Each member in order takes the lowest unassigned partitions it may take, up to its quota."""
    for member in state.members:
        if not state.unassigned:
            break
        limit = state.max_assignable(member)
        picks: list[int] = []
        if limit:
            for p in state.unassigned:
                if may_assign(member, p):
                    picks.append(p)
                    if len(picks) == limit:
                        break
        if picks:
            _give(assignment, state, member, picks)


def _assign_co_partitioned(assignment: Assignment, members: list[str], n: int, states: list[_TopicState]) -> None:
    """Step 1 for co-partitioned topics: partition p of every topic goes to one rack-matching member."""
    remaining = list(members)
    for p in range(n):
        match = next((m for m in remaining
                      if all(s.racks_match(m, p) and s.max_assignable(m) > 0 for s in states)), None)
        if match is None:
            continue
        for s in states:
            _give(assignment, s, match, [p])
        if not any(s.max_assignable(match) > 0 for s in states):
            remaining.remove(match)
            if not remaining:
                break


def _rack_aware_assign(topics: list[tuple[str, int]], members_per_topic: dict[str, list[str]],
                       racks: dict[str, str], partition_racks: PartitionRacks,
                       subscriptions: Mapping[str, Subscription], prefer: bool) -> Optional[Assignment]:
    """Kafka's ``RangeAssignor.assignPartitions`` with racks; ``None`` when no topic needs racks."""
    states = [_TopicState(t, n, members_per_topic[t], racks, partition_racks, prefer) for t, n in topics]
    if not any(s.needs_rack_aware for s in states):
        return None
    assignment: Assignment = {m: [] for m in subscriptions}
    # step 1: group by member list, then by the number of partitions whose racks are known
    # (Kafka groups by partitionRacks.size(): 0 for a topic none of whose members has a rack)
    groups: dict[tuple[tuple[str, ...], int], list[_TopicState]] = {}
    for s in states:
        groups.setdefault((tuple(s.members), len(s.replica_racks)), []).append(s)
    for (members, n), group in groups.items():
        if len(group) > 1:
            _assign_co_partitioned(assignment, list(members), n, group)
        elif group[0].needs_rack_aware:
            _assign_ranges(assignment, group[0], group[0].racks_match)
    # step 2: whatever is left, plain range order
    for s in states:
        _assign_ranges(assignment, s, lambda m, p: True)
    return {m: sort_partitions(tps) for m, tps in assignment.items()}
