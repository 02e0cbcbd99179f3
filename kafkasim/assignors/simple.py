"""Kafka's ``SimpleAssignor``: the share-group assignor (KIP-932), ``group.share.assignors=simple``.

In a share group a partition may go to several members (they share its records), so the
assignor spreads members over partitions rather than partitions over members:

1. **Hash.** Each member takes the partition at index ``abs(hashCode(member id) % n)`` of its
   subscribed partitions (``n`` of them, topic by topic, partition by partition).
2. **Homogeneous** (every member subscribes to the same topics): with ``desired`` =
   ceil(partitions / members), each member keeps partitions of its current assignment that
   no member hashed to, while it holds fewer than ``desired``; the partitions left go round
   robin, a member taking one while it holds at most ``desired`` (Kafka's
   ``roundRobinAssignmentWithCount``). Balance comes before stickiness.
3. **Heterogeneous**: partitions neither hashed to nor in the current assignment go round
   robin topic by topic over that topic's subscribers; then each member keeps the partitions
   of its current assignment that nobody hashed to, of topics it still subscribes to.

Orders are Java's, as Kafka iterates them: members in ``HashMap<String, ?>`` order, a
subscription's topics in ``HashSet<Uuid>`` order (:mod:`kafkasim.assignors._java`).

Worked example (Kafka's ``SimpleAssignorTest``): members "A" (hash 65) and "B" (66) both
subscribe to topic1 (3 partitions) and topic3 (2): the 5 partitions are t1:0..2, t3:0..1;
A hashes to t1:0 (65 % 5 = 0), B to t1:1; round robin gives t1:2 to A, t3:0 to B, t3:1 to A.
Result: A {t1: 0, 2; t3: 1}, B {t1: 1; t3: 0}.

Pure and stateless; thread-safe.
"""

from __future__ import annotations

import uuid
from typing import Iterable

from kafkasim.assignors._java import (
    _spread, hashmap_capacity, hashmap_order, string_hash, uuid_hash, uuid_hashset_order,
)
from kafkasim.assignors.group_spec import (
    HOMOGENEOUS, GroupSpec, PartitionAssignorError, SubscribedTopicDescriber,
)

__all__ = ["SimpleAssignor", "member_hash_assignment", "round_robin_assignment", "round_robin_assignment_with_count"]

TopicIdPartition = tuple[uuid.UUID, int]


def _java_int(h: int) -> int:
    return h - (1 << 32) if h >= 1 << 31 else h


def member_hash_assignment(member_ids: Iterable[str], partitions: list[TopicIdPartition],
                           assignment: dict[TopicIdPartition, list[str]]) -> None:
    """Step 1: each member to ``partitions[abs(hashCode % len)]`` (Java's signed remainder)."""
    if not partitions:
        return
    n = len(partitions)
    for member in member_ids:
        h = _java_int(string_hash(member))
        index = abs(h - n * int(h / n))          # Java's % truncates toward zero
        assignment.setdefault(partitions[index], []).append(member)


def round_robin_assignment(member_ids: list[str], partitions: Iterable[TopicIdPartition],
                           assignment: dict[TopicIdPartition, list[str]]) -> None:
    """Step 2: ``partitions`` to ``member_ids`` in turn, starting over when they run out."""
    if not member_ids:
        return
    for i, tp in enumerate(partitions):
        assignment.setdefault(tp, []).append(member_ids[i % len(member_ids)])


def round_robin_assignment_with_count(member_ids: list[str], partitions: Iterable[TopicIdPartition],
                                     assignment: dict[str, set[TopicIdPartition]], desired: int) -> None:
    """Kafka's ``roundRobinAssignmentWithCount``: ``partitions`` to the members in turn, a member
    taking one more only while it holds at most ``desired`` (one over it is allowed, for hash
    collisions); a member past that leaves the rotation and the partition goes to the next."""
    members = list(member_ids)
    queue = list(partitions)
    i = j = 0
    while j < len(queue):
        if i >= len(members):
            i = 0
            if not members:
                raise PartitionAssignorError("Inconsistent number of member IDs")
        member = members[i]
        held = assignment.setdefault(member, set())
        if len(held) <= desired:
            held.add(queue[j])
            j += 1
            i += 1
        else:
            members.pop(i)


def _tip_hash(tp: TopicIdPartition) -> int:
    """Java's record hash of Kafka's ``TopicIdPartition(topicId, partition)``: ``31 * topicId.hashCode() + partition``."""
    return (31 * uuid_hash(tp[0]) + tp[1]) & 0xFFFFFFFF


def _hashmap_order_of(keys: list[TopicIdPartition]) -> list[TopicIdPartition]:
    """The iteration order of a Java ``HashMap<TopicIdPartition, ?>`` filled with ``keys`` in order."""
    mask = hashmap_capacity(len(keys)) - 1
    return [k for _, _, k in sorted(((_spread(_tip_hash(k)) & mask), i, k) for i, k in enumerate(keys))]


class SimpleAssignor:
    """Kafka's share-group ``SimpleAssignor`` (see the module docstring)."""

    name = "simple"

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """member id -> (topic id -> partitions); every member is a key when any subscribes."""
        members = hashmap_order(sorted(group_spec.members))
        if not members:
            return {}
        current_keys: list[TopicIdPartition] = []
        current: dict[TopicIdPartition, list[str]] = {}
        for m in members:
            for tid, ps in group_spec.members[m].assigned_partitions.items():
                for p in sorted(ps):
                    if (tid, p) not in current:
                        current_keys.append((tid, p))
                    current.setdefault((tid, p), []).append(m)
        current_order = _hashmap_order_of(current_keys)
        new: dict[TopicIdPartition, list[str]] = {}
        final: dict[str, set[TopicIdPartition]] = {}
        if group_spec.subscription_type == HOMOGENEOUS:
            subscribed = set(group_spec.members[members[0]].subscribed_topic_ids)
            if not subscribed:
                return {}
            target = _partitions(subscribed, topics)
            desired = (len(target) + len(members) - 1) // len(members)
            member_hash_assignment(members, target, new)
            taken: set[TopicIdPartition] = set()
            for tp, ms in new.items():
                for m in ms:
                    final.setdefault(m, set()).add(tp)
                taken.add(tp)
            for tp in current_order:                    # keep, up to the balanced count
                if tp[0] not in subscribed or tp in new:
                    continue
                for m in current[tp]:
                    held = final.setdefault(m, set())
                    if len(held) < desired:
                        held.add(tp)
                        taken.add(tp)
            round_robin_assignment_with_count(members, [tp for tp in target if tp not in taken], final, desired)
        else:
            per_member = {m: _partitions(group_spec.members[m].subscribed_topic_ids, topics) for m in members
                          if group_spec.members[m].subscribed_topic_ids}
            subscribers: dict[uuid.UUID, list[str]] = {}
            for m, tps in per_member.items():
                for tid, _ in tps:
                    if m not in subscribers.setdefault(tid, []):
                        subscribers[tid].append(m)
            for m, tps in per_member.items():
                member_hash_assignment([m], tps, new)
            unassigned: dict[uuid.UUID, list[TopicIdPartition]] = {}
            seen: set[TopicIdPartition] = set()
            for tps in per_member.values():
                for tp in tps:
                    if tp not in seen and tp not in new and tp not in current:
                        unassigned.setdefault(tp[0], []).append(tp)
                    seen.add(tp)
            for tid in uuid_hashset_order(unassigned):
                round_robin_assignment(subscribers[tid], unassigned[tid], new)
            for tp, ms in new.items():
                for m in ms:
                    final.setdefault(m, set()).add(tp)
            for tp in current_order:
                if tp in new:
                    continue
                for m in current[tp]:
                    if m in subscribers.get(tp[0], ()):
                        final.setdefault(m, set()).add(tp)
        out: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
        for m in members:
            by_topic: dict[uuid.UUID, set[int]] = {}
            for tid, p in final.get(m, ()):
                by_topic.setdefault(tid, set()).add(p)
            out[m] = {tid: frozenset(ps) for tid, ps in by_topic.items()}
        return out


def _partitions(topic_ids: Iterable[uuid.UUID], topics: SubscribedTopicDescriber) -> list[TopicIdPartition]:
    out: list[TopicIdPartition] = []
    for tid in uuid_hashset_order(topic_ids):
        n = topics.num_partitions(tid)
        if n == -1:
            raise PartitionAssignorError(
                f"Members are subscribed to topic {tid} which doesn't exist in the topic metadata.")
        out.extend((tid, p) for p in range(n))
    return out
