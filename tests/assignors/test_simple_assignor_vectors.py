"""Kafka's share-group SimpleAssignor on the vectors of Kafka's SimpleAssignorTest."""

from __future__ import annotations

import uuid

import pytest

from kafkasim.assignors.group_spec import (
    HETEROGENEOUS, HOMOGENEOUS, GroupSpec, MemberSubscription, PartitionAssignorError, TopicsImage,
)
from kafkasim.assignors.simple import SimpleAssignor, member_hash_assignment, round_robin_assignment

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


def test_members_keep_their_current_partitions_of_topics_they_still_subscribe_to():
    current = GroupSpec({"A": MemberSubscription(frozenset({T1}), {T1: frozenset({0, 1, 2}), T2: frozenset({0})}),
                         "B": MemberSubscription(frozenset({T1}))}, HOMOGENEOUS)
    got = A.assign(current, TopicsImage({T1: 3, T2: 1}))
    assert got["A"] == {T1: frozenset({0, 1, 2})}        # t2 dropped: no longer subscribed
    assert got["B"] == {T1: frozenset({0})}              # its hash partition (66 % 3) only: the rest is held
