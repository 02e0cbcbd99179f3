"""The ``uniform`` assignor's builder for members with different subscriptions: Kafka's
``UniformHeterogeneousAssignmentBuilder`` (formerly GeneralUniformAssignmentBuilder).

Followed: apache/kafka ``group-coordinator/.../assignor/UniformHeterogeneousAssignmentBuilder.java``
at commit 1eb7644349cb (4.0.0-SNAPSHOT). Not rack-aware (neither is Kafka 4.0's).

Members are numbered 0..M-1 in the iteration order of ``group_spec.members``; a topic's
subscribers are kept in ascending member number. Two orders drive every choice:

- topics: partitions per subscriber, descending; then subscriber count, ascending; then topic
  id ascending as Kafka's ``Uuid.compareTo`` (signed 64-bit halves);
- members: assigned partition count, ascending; then member number, ascending.

Steps:

1. Revoke: each member keeps what it holds of the topics it still subscribes to (the
   partition's owner is recorded) and loses every other topic. A subscribed topic unknown to
   the describer raises :class:`PartitionAssignorError`.
2. Assign: for each topic with unowned partitions (topic order), its subscribers are sorted
   by the member order and the unowned partitions, ascending, are dealt out to the least
   loaded range of subscribers — all members at the lowest count take one each, then the range
   widens to the members that reached the next count, and so on.
3. Balance: the topics with two or more subscribers are walked in topic order, up to 16
   rounds, stopping after a full round without a move. For a topic whose subscribers differ by
   two or more partitions, its partitions are grouped by owner (then ascending); the most
   loaded subscriber (walking down from the top of the member order) gives up its last
   partition of the topic to the least loaded one, until the two ranges differ by at most one
   or no loaded subscriber owns a partition of the topic.

Worked example (Kafka's ``testFirstAssignmentTwoMembersTwoTopics``): A subscribes to T1 (3
partitions) and T3 (6), B to T3 only; nothing is assigned yet. Both topics have 3 partitions
per subscriber; T1 has fewer subscribers, so it goes first: A takes T1-0, 1, 2. For T3 the
subscribers sort B (0 partitions), A (3): B takes T3-0, 1, 2 alone until it reaches A's 3,
then the range widens to both: B takes T3-3, A T3-4, B T3-5. Result A = {T1: 0, 1, 2; T3: 4},
B = {T3: 0, 1, 2, 3, 5}; T3's subscribers differ by one, so the balancing phase moves nothing.

Thread-safety: a builder is created per call and not shared; the function is pure.
"""

from __future__ import annotations

import uuid

from kafkasim.assignors._java import uuid_sort_key
from kafkasim.assignors.group_spec import (
    HETEROGENEOUS, HOMOGENEOUS, GroupSpec, PartitionAssignorError, SubscribedTopicDescriber,
)

__all__ = ["assign_heterogeneous", "Assignment", "freeze", "check_subscription_type"]

Assignment = dict[str, dict[uuid.UUID, frozenset[int]]]
"""member id -> (topic id -> partitions), what a server-side assignor returns."""

MAX_ITERATION_COUNT = 16
"""Kafka's cap on the rounds of the final balancing phase."""


def freeze(work: dict[str, dict[uuid.UUID, set[int]]]) -> Assignment:
    """The builders' working sets as the assignor's result (topics with no partition dropped)."""
    return {m: {t: frozenset(ps) for t, ps in topics.items() if ps} for m, topics in work.items()}


def check_subscription_type(group_spec: GroupSpec) -> None:
    """Raise PartitionAssignorError unless the spec's type is HOMOGENEOUS or HETEROGENEOUS."""
    if group_spec.subscription_type not in (HOMOGENEOUS, HETEROGENEOUS):
        raise PartitionAssignorError(
            f"Unknown subscription type {group_spec.subscription_type!r}: "
            f"expected {HOMOGENEOUS!r} or {HETEROGENEOUS!r}")


class _Balancer:
    """Kafka's ``MemberAssignmentBalancer``: a least loaded range that widens rightwards and a
    most loaded range that widens leftwards over the subscribers sorted by load."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes  # shared with the builder, read live
        self.sorted: list[int] = []
        self.least_end = 0
        self.least_count = -1
        self.next_least = 0
        self.most_start = 0
        self.most_end = 0
        self.most_count = 1
        self.next_most = -1

    def initialize(self, members: list[int]) -> int:
        if not members:
            raise PartitionAssignorError("Cannot balance an empty subscriber list.")
        sizes = self.sizes
        self.sorted = sorted(members, key=lambda i: (sizes[i], i))
        self.least_end = 0
        self.least_count = sizes[self.sorted[0]] - 1
        self.next_least = 0
        self.most_start = self.most_end = len(self.sorted)
        self.most_count = sizes[self.sorted[-1]] + 1
        self.next_most = len(self.sorted) - 1
        return sizes[self.sorted[-1]] - sizes[self.sorted[0]]

    def next_least_loaded(self) -> int:
        if self.next_least >= self.least_end:
            self.least_count += 1
            while self.least_end < len(self.sorted) and self.sizes[self.sorted[self.least_end]] == self.least_count:
                self.least_end += 1
            self.next_least = 0
        member = self.sorted[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                self.most_count = self.sizes[self.sorted[self.most_start - 1]]
            else:
                self.most_count -= 1
            while self.most_start > 0 and self.sizes[self.sorted[self.most_start - 1]] == self.most_count:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = self.sorted[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        i, j = self.next_most + 1, self.most_end - 1
        self.sorted[i], self.sorted[j] = self.sorted[j], self.sorted[i]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


class _Builder:
    """One run of the heterogeneous builder (state lives for one ``assign`` call)."""

    def __init__(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> None:
        self.spec = group_spec
        self.topics = topics
        self.member_ids = list(group_spec.members)
        self.subscribers: dict[uuid.UUID, list[int]] = {}
        self.counts: dict[uuid.UUID, int] = {}
        for index, member_id in enumerate(self.member_ids):
            for topic_id in sorted(group_spec.members[member_id].subscribed_topic_ids, key=uuid_sort_key):
                count = topics.num_partitions(topic_id)
                if count == -1:
                    raise PartitionAssignorError(
                        f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata.")
                self.counts[topic_id] = count
                self.subscribers.setdefault(topic_id, []).append(index)
        self.sizes = [0] * len(self.member_ids)
        self.owners = {t: [-1] * n for t, n in self.counts.items()}
        self.target: dict[str, dict[uuid.UUID, set[int]]] = {}

    def _topic_key(self, topic_id: uuid.UUID):
        subscribers = len(self.subscribers[topic_id])
        return -(self.counts[topic_id] / subscribers), subscribers, uuid_sort_key(topic_id)

    def build(self) -> Assignment:
        if not self.counts:
            return {member_id: {} for member_id in self.member_ids}
        self._revoke()
        self._assign_remaining()
        self._balance()
        return freeze(self.target)

    def _revoke(self) -> None:
        for index, member_id in enumerate(self.member_ids):
            member = self.spec.members[member_id]
            kept: dict[uuid.UUID, set[int]] = {}
            for topic_id, partitions in member.assigned_partitions.items():
                if topic_id not in member.subscribed_topic_ids:
                    continue
                owners = self.owners[topic_id]
                for p in partitions:
                    if not 0 <= p < len(owners):
                        raise PartitionAssignorError(
                            f"Member {member_id} holds partition {p} of topic {topic_id}, "
                            f"which has {len(owners)} partitions.")
                    owners[p] = index
                self.sizes[index] += len(partitions)
                kept[topic_id] = set(partitions)
            self.target[member_id] = kept

    def _assign(self, topic_id: uuid.UUID, partition: int, index: int) -> None:
        old = self.owners[topic_id][partition]
        if old != -1:
            held = self.target[self.member_ids[old]].get(topic_id)
            if held is not None:
                held.discard(partition)
                if not held:
                    del self.target[self.member_ids[old]][topic_id]
            self.sizes[old] -= 1
        self.target[self.member_ids[index]].setdefault(topic_id, set()).add(partition)
        self.owners[topic_id][partition] = index
        self.sizes[index] += 1

    def _assign_remaining(self) -> None:
        unassigned = {}
        for topic_id, owners in self.owners.items():
            free = [p for p, owner in enumerate(owners) if owner == -1]
            if free:
                unassigned[topic_id] = free
        balancer = _Balancer(self.sizes)
        for topic_id in sorted(unassigned, key=self._topic_key):
            balancer.initialize(self.subscribers[topic_id])
            for partition in unassigned[topic_id]:
                self._assign(topic_id, partition, balancer.next_least_loaded())

    def _balance(self) -> None:
        movable = sorted((t for t, subs in self.subscribers.items() if len(subs) >= 2), key=self._topic_key)
        if not movable:
            return
        balancer = _Balancer(self.sizes)
        last = -1
        for _ in range(MAX_ITERATION_COUNT):
            for position, topic_id in enumerate(movable):
                if position == last:
                    return
                if self._balance_topic(topic_id, balancer) > 0 or last == -1:
                    last = position

    def _balance_topic(self, topic_id: uuid.UUID, balancer: _Balancer) -> int:
        if balancer.initialize(self.subscribers[topic_id]) <= 1:
            return 0
        owners = self.owners[topic_id]
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, p in enumerate(partitions):
            start.setdefault(owners[p], i)
            end[owners[p]] = i + 1
        moved = 0
        while not balancer.is_balanced():
            most = balancer.next_most_loaded()
            while most != -1 and (most not in end or end[most] - start[most] <= 0):
                balancer.exclude_most_loaded()
                most = balancer.next_most_loaded()
            if most == -1:
                break
            end[most] -= 1
            partition = partitions[end[most]]
            least = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self._assign(topic_id, partition, least)
            moved += 1
        return moved


def assign_heterogeneous(group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> Assignment:
    """Kafka's ``UniformHeterogeneousAssignmentBuilder.build`` (steps in the module docstring)."""
    return _Builder(group_spec, topics).build()
