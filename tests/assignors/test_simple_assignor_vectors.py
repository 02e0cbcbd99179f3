"""Kafka's share-group SimpleAssignor on the vectors of Kafka's SimpleAssignorTest."""

from __future__ import annotations

import uuid

import pytest

from kafkasim.assignors.group_spec import (
    HETEROGENEOUS, HOMOGENEOUS, GroupSpec, MemberSubscription, PartitionAssignorError, TopicsImage,
)
from kafkasim.assignors.simple import (
    SimpleAssignor, member_hash_assignment, round_robin_assignment, round_robin_assignment_with_count,
)

# Kafka's tests iterate topics in a LinkedHashSet's order, topic1 first; ids whose Java
# HashSet order is the same (Uuid.hashCode of these is 1, 2, 3, 4)
T1, T2, T3, T4 = (uuid.UUID(int=i) for i in range(1, 5))
A = SimpleAssignor()


def spec(kind, **subs):
    return GroupSpec({m: MemberSubscription(frozenset(ts)) for m, ts in subs.items()}, kind)


def test_name():
    assert A.name == "simple"


def test_no_members_and_no_subscribed_topics():
    assert A.assign(GroupSpec({}, HOMOGENEOUS), TopicsImage({})) == {}
    assert A.assign(GroupSpec({}, HETEROGENEOUS), TopicsImage({})) == {}
    assert A.assign(spec(HOMOGENEOUS, A=[]), TopicsImage({T1: 3})) == {}


def test_subscribed_to_a_topic_that_does_not_exist():
    with pytest.raises(PartitionAssignorError, match="doesn't exist in the topic metadata"):
        A.assign(spec(HOMOGENEOUS, A=[T2]), TopicsImage({T1: 3}))


def test_two_members_two_topics_homogeneous():
    # hash: A (65) -> t1:0, B (66) -> t1:1; round robin: t1:2 -> A, t3:0 -> B, t3:1 -> A
    got = A.assign(spec(HOMOGENEOUS, A=[T1, T3], B=[T1, T3]), TopicsImage({T1: 3, T3: 2}))
    assert got == {"A": {T1: frozenset({0, 2}), T3: frozenset({1})}, "B": {T1: frozenset({1}), T3: frozenset({0})}}


def test_three_members_three_topics_heterogeneous():
    got = A.assign(spec(HETEROGENEOUS, A=[T1, T2], B=[T3], C=[T2, T3]), TopicsImage({T1: 3, T2: 3, T3: 2}))
    assert got == {"A": {T1: frozenset({0, 1, 2}), T2: frozenset({0, 2})}, "B": {T3: frozenset({0, 1})},
                   "C": {T2: frozenset({1, 2})}}


def test_one_member_with_no_topic_heterogeneous():
    got = A.assign(spec(HETEROGENEOUS, A=[T1, T2], B=[]), TopicsImage({T1: 3, T2: 2}))
    assert got == {"A": {T1: frozenset({0, 1, 2}), T2: frozenset({0, 1})}, "B": {}}


def test_member_hash_assignment_with_a_negative_hash_code():
    # hashCode: member1 948881623 .. member4 948881626, AaAaAaAa -540425984
    got: dict = {}
    member_hash_assignment(["member1", "member2", "member3", "member4", "AaAaAaAa"],
                           [(T1, 0), (T2, 0), (T3, 0)], got)
    assert got == {(T1, 0): ["member3"], (T2, 0): ["member1", "member4"], (T3, 0): ["member2", "AaAaAaAa"]}


def test_round_robin_assignment():
    got = {(T1, 0): ["member1"]}
    round_robin_assignment(["member1", "member2"], [(T2, 0), (T3, 0), (T4, 0)], got)
    assert got == {(T1, 0): ["member1"], (T2, 0): ["member1"], (T3, 0): ["member2"], (T4, 0): ["member1"]}


def test_round_robin_assignment_with_count():
    got = {"member1": {(T1, 0)}, "member2": {(T1, 0)}}
    round_robin_assignment_with_count(["member1", "member2"], [(T2, 0), (T3, 0), (T4, 0)], got, 2)
    assert got == {"member1": {(T1, 0), (T2, 0), (T4, 0)}, "member2": {(T1, 0), (T3, 0)}}


def test_round_robin_assignment_with_count_too_many_partitions():
    got = {"member1": {(T1, 0)}, "member2": {(T1, 0)}}
    with pytest.raises(PartitionAssignorError, match="Inconsistent number of member IDs"):
        round_robin_assignment_with_count(["member1", "member2"],
                                          [(T2, 0), (T3, 0), (T4, 0), (T4, 1), (T4, 2)], got, 2)


def with_current(kind, **members):
    return GroupSpec({m: MemberSubscription(frozenset(ts), {t: frozenset(ps) for t, ps in cur.items()})
                      for m, (ts, cur) in members.items()}, kind)


def test_assign_with_current_assignment_homogeneous():
    first = A.assign(spec(HOMOGENEOUS, A=[T1, T2], B=[T1, T2]), TopicsImage({T1: 3, T2: 2}))
    assert first == {"A": {T1: frozenset({0, 2}), T2: frozenset({1})}, "B": {T1: frozenset({1}), T2: frozenset({0})}}
    # A, B, C now subscribe to T2 and T3: hash T2:0 -> A, T2:1 -> B, T3:0 -> C; round robin T3:1 -> A,
    # T3:2 -> B; nothing kept from the current assignment (T2:0 and T2:1 were hashed to)
    second = A.assign(with_current(HOMOGENEOUS, A=([T2, T3], first["A"]), B=([T2, T3], first["B"]),
                                   C=([T2, T3], {})), TopicsImage({T2: 2, T3: 3}))
    assert second == {"A": {T2: frozenset({0}), T3: frozenset({1})}, "B": {T2: frozenset({1}), T3: frozenset({2})},
                      "C": {T3: frozenset({0})}}


def test_assign_with_current_assignment_heterogeneous():
    first = A.assign(spec(HETEROGENEOUS, A=[T1, T2], B=[T3], C=[T2, T3]), TopicsImage({T1: 3, T2: 3, T3: 2}))
    # A now subscribes to T1, T2, T3 and B to T3, T4 (C left): hash T1:1 -> A, T3:0 -> B; round
    # robin T2:1 -> A, T4:0 -> B; kept from the current assignment: T1:0, T1:2, T2:0, T2:2 (A), T3:1 (B)
    second = A.assign(with_current(HETEROGENEOUS, A=([T1, T2, T3], first["A"]), B=([T3, T4], first["B"])),
                      TopicsImage({T1: 3, T2: 3, T3: 2, T4: 1}))
    assert second == {"A": {T1: frozenset({0, 1, 2}), T2: frozenset({0, 1, 2})},
                      "B": {T3: frozenset({0, 1}), T4: frozenset({0})}}


def test_members_keep_current_partitions_only_up_to_the_balanced_count():
    current = with_current(HOMOGENEOUS, A=([T1], {T1: {0, 1, 2}, T2: {0}}), B=([T1], {}))
    got = A.assign(current, TopicsImage({T1: 3, T2: 1}))
    # hash: A (65 % 3) -> t1:2, B (66 % 3) -> t1:0; A keeps t1:1 (below ceil(3 / 2) = 2), not t2 (unsubscribed)
    assert got == {"A": {T1: frozenset({1, 2})}, "B": {T1: frozenset({0})}}
