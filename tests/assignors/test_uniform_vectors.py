"""Kafka's test cases for the server-side ``uniform`` assignor, as vectors (inputs -> output).

Ported from apache/kafka at commit 1eb7644349cb (4.0.0-SNAPSHOT), group-coordinator tests
``OptimizedUniformAssignmentBuilderTest`` (the homogeneous builder; later renamed
UniformHomogeneousAssignmentBuilderTest) and ``UniformHeterogeneousAssignmentBuilderTest``.
That snapshot has no ``UniformAssignorTest`` and no rack-aware uniform cases (Kafka 4.0's
uniform assignor ignores racks).

Inputs as Kafka's tests build them: members in a ``TreeMap`` (sorted ids); topic ids fixed
with ``Uuid.fromString``; a member's current assignment built by ``mkOrderedAssignment``
(a ``LinkedHashMap``: the order written) or ``mkAssignment`` (a ``HashMap``: Java's order for
those ids, reproduced by :func:`hashmap`). Where Kafka returns an empty ``GroupAssignment``
(no subscribed topic at all) kafkasim's contract names every member with an empty
assignment; those two cases assert that.
"""

from __future__ import annotations

import random
import uuid

import pytest

from kafkasim.assignors._java import uuid_from_kafka_string, uuid_hashset_order
from kafkasim.assignors.group_spec import (
    HETEROGENEOUS, HOMOGENEOUS, GroupSpec, MemberSubscription, PartitionAssignorError, TopicsImage,
)
from kafkasim.assignors.uniform import UniformAssignor

T1 = uuid_from_kafka_string("T1-A4s3VTwiI5CTbEp6POw")
T2 = uuid_from_kafka_string("T2-B4s3VTwiI5YHbPp6YUe")
T3 = uuid_from_kafka_string("T3-CU8fVTLCz5YMkLoDQsa")
T4 = uuid_from_kafka_string("T4-Tw9fVTLCz5HbPp6YQsa")


def ordered(*entries):
    """``mkOrderedAssignment``: the entries in the order written."""
    return {t: frozenset(ps) for t, ps in entries}


def hashmap(*entries):
    """``mkAssignment``: the entries in a Java ``HashMap<Uuid, ...>``'s iteration order."""
    by_topic = {t: frozenset(ps) for t, ps in entries}
    return {t: by_topic[t] for t in uuid_hashset_order(by_topic)}


def member(subscribed, assigned=None):
    return MemberSubscription(frozenset(subscribed), assigned or {})


def run(members, kind, partitions):
    spec = GroupSpec(dict(sorted(members.items())), kind)
    return UniformAssignor().assign(spec, TopicsImage(partitions))


def as_lists(assignment):
    return {m: {t: sorted(ps) for t, ps in topics.items()} for m, topics in assignment.items()}


# (name, members, partitions, expected) — expected: member -> {topic: partitions}
HOMOGENEOUS_CASES = [
    ("testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks",
     {"A": member({T1, T3}), "B": member({T1, T3})}, {T1: 3, T3: 2},
     {"A": {T1: [0], T3: [0, 1]}, "B": {T1: [1, 2]}}),
    ("testFirstAssignmentNumMembersGreaterThanTotalNumPartitions",
     {"A": member({T3}), "B": member({T3}), "C": member({T3})}, {T3: 2},
     {"A": {T3: [0]}, "B": {T3: [1]}, "C": {}}),
    ("testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment",
     {"A": member({T1, T2}, ordered((T1, [0, 1]), (T2, [0, 1]))),
      "B": member({T1, T2}, ordered((T1, [2]), (T2, [2])))}, {T1: 3, T2: 3},
     {"A": {T1: [0, 1], T2: [0]}, "B": {T1: [2], T2: [1, 2]}}),
    ("testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics",
     {"A": member({T1, T2}, ordered((T1, [0, 2]), (T2, [0]))),
      "B": member({T1, T2}, ordered((T1, [1]), (T2, [1, 2])))}, {T1: 6, T2: 5},
     {"A": {T1: [0, 2, 3], T2: [0, 3, 4]}, "B": {T1: [1, 4, 5], T2: [1, 2]}}),
    ("testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics",
     {"A": member({T1, T2}, ordered((T1, [0, 2]), (T2, [0]))),
      "B": member({T1, T2}, ordered((T1, [1]), (T2, [1, 2]))),
      "C": member({T1, T2})}, {T1: 3, T2: 3},
     {"A": {T1: [0, 2]}, "B": {T1: [1], T2: [1]}, "C": {T2: [0, 2]}}),
    ("testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics",
     {"A": member({T1, T2}, hashmap((T1, [0]), (T2, [0]))),
      "B": member({T1, T2}, hashmap((T1, [1]), (T2, [1])))}, {T1: 3, T2: 3},
     {"A": {T1: [0], T2: [0, 2]}, "B": {T1: [1, 2], T2: [1]}}),
    ("testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics",
     {"A": member({T2}, hashmap((T1, [0]), (T2, [0]))),
      "B": member({T2}, hashmap((T1, [1]), (T2, [1])))}, {T1: 2, T2: 2},
     {"A": {T2: [0]}, "B": {T2: [1]}}),
]

HETEROGENEOUS_CASES = [
    ("testFirstAssignmentTwoMembersTwoTopics",
     {"A": member({T1, T3}), "B": member({T3})}, {T1: 3, T3: 6},
     {"A": {T1: [0, 1, 2], T3: [4]}, "B": {T3: [0, 1, 2, 3, 5]}}),
    ("testFirstAssignmentNumMembersGreaterThanTotalNumPartitions",
     {"A": member({T3}), "B": member({T3}), "C": member({T1})}, {T3: 1, T1: 2},
     {"A": {T3: [0]}, "B": {}, "C": {T1: [0, 1]}}),
    ("testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment",
     {"A": member({T1}, hashmap((T1, [0, 1, 2]))),
      "B": member({T1, T2}, hashmap((T1, [3]), (T2, [0]))),
      "C": member({T1, T2, T3}, hashmap((T1, [4, 5]), (T2, [1, 2, 3]), (T3, [0, 1, 2, 3])))},
     {T1: 6, T2: 4, T3: 4},
     {"A": {T1: [0, 1, 2, 5]}, "B": {T1: [3], T2: [0, 1, 2, 3]}, "C": {T1: [4], T3: [0, 1, 2, 3]}}),
    ("testReassignmentWhenPartitionsAreAddedForTwoMembers",
     {"A": member({T1, T3}, hashmap((T1, [0, 1, 2, 3]), (T3, [0, 1]))),
      "B": member({T1, T2, T3, T4}, hashmap((T2, [0, 1, 2]), (T4, [0, 1, 2])))},
     {T1: 6, T2: 5, T3: 3, T4: 3},
     {"A": {T1: [0, 1, 2, 3, 4, 5], T3: [0, 1, 2]}, "B": {T2: [0, 1, 2, 3, 4], T4: [0, 1, 2]}}),
    ("testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics",
     {"A": member({T1}, hashmap((T1, [0, 2]), (T2, [0]))),
      "B": member({T1, T2}, hashmap((T1, [1]), (T2, [1, 2]))),
      "C": member({T1, T2})}, {T1: 6, T2: 7},
     {"A": {T1: [0, 2, 3, 4, 5]}, "B": {T1: [1], T2: [1, 2, 6]}, "C": {T2: [0, 3, 4, 5]}}),
    ("testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics",
     {"A": member({T1, T3}, hashmap((T1, [0, 1, 2]), (T3, [0, 1]))),
      "B": member({T2}, hashmap((T2, [3, 4, 5, 6])))}, {T1: 3, T2: 8, T3: 3},
     {"A": {T1: [0, 1, 2], T3: [0, 1, 2]}, "B": {T2: [0, 1, 2, 3, 4, 5, 6, 7]}}),
    ("testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics",
     {"A": member({T1}, hashmap((T1, [0, 2]), (T2, [1, 3]))),
      "B": member({T1, T2}, hashmap((T1, [1]), (T2, [0, 2, 4])))}, {T1: 3, T2: 5},
     {"A": {T1: [0, 1, 2]}, "B": {T2: [0, 1, 2, 3, 4]}}),
    ("testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions",
     {"A": member({T1, T2, T3}, hashmap((T1, [0, 1]), (T2, [0, 1]), (T3, [0, 1]))),
      "B": member({T1, T2, T3})}, {T1: 2, T2: 2, T3: 2},
     {"A": {T2: [0], T3: [0, 1]}, "B": {T1: [0, 1], T2: [1]}}),
    ("testFirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions",
     {"A": member({T1}), "B": member(set())}, {T1: 3},
     {"A": {T1: [0, 1, 2]}, "B": {}}),
]


@pytest.mark.parametrize("name,members,partitions,expected", HOMOGENEOUS_CASES, ids=[c[0] for c in HOMOGENEOUS_CASES])
def test_homogeneous_matches_kafka(name, members, partitions, expected):
    assert as_lists(run(members, HOMOGENEOUS, partitions)) == expected


@pytest.mark.parametrize("name,members,partitions,expected", HETEROGENEOUS_CASES, ids=[c[0] for c in HETEROGENEOUS_CASES])
def test_heterogeneous_matches_kafka(name, members, partitions, expected):
    assert as_lists(run(members, HETEROGENEOUS, partitions)) == expected


@pytest.mark.parametrize("kind", [HOMOGENEOUS, HETEROGENEOUS])
def test_no_topic_subscription_gives_every_member_nothing(kind):
    # Kafka: testOneMemberNoTopicSubscription / testTwoMembersNoTopicSubscription.
    members = {"A": member(set()), "B": member(set())} if kind == HETEROGENEOUS else {"A": member(set())}
    assert run(members, kind, {T1: 3}) == {m: {} for m in members}


def test_homogeneous_nonexistent_topic_raises_naming_it():
    # Kafka: testOneMemberSubscribedToNonexistentTopic.
    with pytest.raises(PartitionAssignorError, match=str(T2)):
        run({"A": member({T2})}, HOMOGENEOUS, {T1: 3})


def test_heterogeneous_nonexistent_topics_raise():
    # Kafka: testTwoMembersSubscribedToNonexistentTopics.
    with pytest.raises(PartitionAssignorError, match="doesn't exist in the topic metadata"):
        run({"A": member({T3}), "B": member({T2})}, HETEROGENEOUS, {T1: 3})


def test_no_members_gives_empty_assignment():
    assert UniformAssignor().assign(GroupSpec({}), TopicsImage({T1: 3})) == {}


def test_validity_and_balance_for_large_sample_set():
    # Kafka: testValidityAndBalanceForLargeSampleSet (99 topics x 3 partitions, 49 members; the
    # random topic ids are drawn from a seeded RNG here).
    rng = random.Random(848)
    topics = {uuid.UUID(int=rng.getrandbits(128)): 3 for _ in range(1, 100)}
    members = {f"member{i}": member(set(topics)) for i in range(1, 50)}
    out = run(members, HOMOGENEOUS, topics)
    owners = {}
    for m, assignment in out.items():
        for t, ps in assignment.items():
            assert t in members[m].subscribed_topic_ids
            for p in ps:
                assert (t, p) not in owners, f"{t}-{p} given to {owners.get((t, p))} and {m}"
                owners[(t, p)] = m
    assert len(owners) == 99 * 3
    sizes = [sum(len(ps) for ps in a.values()) for a in out.values()]
    assert max(sizes) - min(sizes) <= 1


def test_homogeneous_order_follows_java_hashset_of_topic_ids():
    # T3 iterates before T1 in a Java HashSet (buckets 9 and 10 of 16), so with nothing
    # assigned the first member's extra partition comes from T3, not T1.
    assert uuid_hashset_order([T1, T3]) == [T3, T1]
    # Buckets: T2 1, T4 5, T3 9, T1 10.
    assert uuid_hashset_order([T1, T2, T3, T4]) == [T2, T4, T3, T1]


def test_homogeneous_keeps_partitions_in_java_hashset_order():
    # Not a Kafka test case: a fact of Java's HashSet<Integer> (bucket = value & (capacity - 1)).
    # A holds 11 partitions of a 40-partition topic, {0..8, 16, 32}: a 16-bucket set iterates
    # 0, 16, 32, 1, ..., 8. Four members, quota 10: A keeps the first ten and gives up 8
    # (in ascending order it would give up 32).
    held = frozenset([*range(9), 16, 32])
    out = run({"A": member({T1}, {T1: held}), "B": member({T1}), "C": member({T1}), "D": member({T1})},
              HOMOGENEOUS, {T1: 40})
    assert out["A"][T1] == held - {8}
    assert sorted(len(a[T1]) for a in out.values()) == [10, 10, 10, 10]


def test_int_hashset_order_matches_java():
    from kafkasim.assignors._java import int_hashset_order
    assert int_hashset_order([2, 1, 0]) == [0, 1, 2]
    assert int_hashset_order([0, 1, 16]) == [0, 16, 1]
    # 14 values: the copy constructor sizes the table at 32 (14 / .75 + 1 = 19); 40 shares
    # bucket 8 with 8 and comes after it (a copy from an ascending list inserts 8 first).
    assert int_hashset_order([*range(12), 16, 40]) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 40, 9, 10, 11, 16]


def test_homogeneous_quota_follows_member_order():
    # Kafka 4.0/4.1's homogeneous builder gives the extra partitions to the first members in
    # member order, so the same assignment handed back in another order can move a partition
    # (Kafka's later CommonAssignorTests.testReassignmentStickiness, written with KAFKA-19909's
    # builder, asserts it does not; see docs/assignors.md). 14 partitions, 3 members: A 5, B 5, C 4.
    topics = {T1: 2, T2: 5, T3: 7}
    subs = {T1, T2, T3}
    first = run({m: member(subs) for m in "ABC"}, HOMOGENEOUS, topics)
    assert sorted(sum(map(len, first[m].values())) for m in "ABC") == [4, 5, 5]
    assert sum(map(len, first["C"].values())) == 4
    spec = GroupSpec({m: MemberSubscription(frozenset(subs), first[m]) for m in "CAB"}, HOMOGENEOUS)
    again = UniformAssignor().assign(spec, TopicsImage(topics))
    assert {m: sum(map(len, a.values())) for m, a in again.items()} == {"C": 5, "A": 5, "B": 4}
    moved = {(t, p) for t, ps in again["C"].items() for p in ps} - {(t, p) for t, ps in first["C"].items() for p in ps}
    assert len(moved) == 1
