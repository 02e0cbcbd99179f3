"""Kafka's test cases for the server-side ``range`` assignor, as vectors (inputs -> output).

Ported from apache/kafka at commit 1eb7644349cb (4.0.0-SNAPSHOT), group-coordinator
``assignor/RangeAssignorTest`` (not the client's RangeAssignorTest). That snapshot's server-side
range assignor has no rack-aware cases. Kafka draws the topic ids with ``Uuid.randomUuid()``;
the expected outputs do not depend on them, so each vector runs with two sets of ids whose
``Uuid.compareTo`` orders are opposite. Members go in a ``TreeMap`` (sorted), as in Kafka.
"""

from __future__ import annotations

import uuid

import pytest

from kafkasim.assignors._java import uuid_sort_key
from kafkasim.assignors.group_spec import (
    HETEROGENEOUS, HOMOGENEOUS, GroupSpec, MemberSubscription, PartitionAssignorError, TopicsImage,
)
from kafkasim.assignors.server_range import ServerRangeAssignor

ASCENDING = (uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3))
# Java compares the 64-bit halves as signed longs (a set high bit sorts first): descending.
DESCENDING = (uuid.UUID(int=7), uuid.UUID(int=(3 << 126) | 5), uuid.UUID(int=(1 << 127) | 9))


def member(subscribed, assigned=None, instance_id=None):
    return MemberSubscription(frozenset(subscribed), assigned or {}, instance_id=instance_id)


def run(members, kind, partitions):
    spec = GroupSpec(dict(sorted(members.items())), kind)
    return ServerRangeAssignor().assign(spec, TopicsImage(partitions))


def named(assignment, ids):
    names = {t: f"T{i + 1}" for i, t in enumerate(ids)}
    return {m: {names[t]: sorted(ps) for t, ps in topics.items()} for m, topics in assignment.items()}


# Each case is a function of the three topic ids -> (members, kind, partitions, expected by name).
def first_two_members_two_topics_same_subscriptions(t1, t2, t3):
    return ({"A": member({t1, t3}), "B": member({t1, t3})}, HOMOGENEOUS, {t1: 3, t3: 2},
            {"A": {"T1": [0, 1], "T3": [0]}, "B": {"T1": [2], "T3": [1]}})


def first_three_members_three_topics_different_subscriptions(t1, t2, t3):
    return ({"A": member({t1, t2}), "B": member({t3}), "C": member({t2, t3})}, HETEROGENEOUS,
            {t1: 3, t2: 3, t3: 2},
            {"A": {"T1": [0, 1, 2], "T2": [0, 1]}, "B": {"T3": [0]}, "C": {"T2": [2], "T3": [1]}})


def first_num_members_greater_than_num_partitions(t1, t2, t3):
    return ({"A": member({t1, t3}), "B": member({t1, t3}), "C": member({t1, t3})}, HOMOGENEOUS,
            {t1: 3, t3: 2},
            {"A": {"T1": [0], "T3": [0]}, "B": {"T1": [1], "T3": [1]}, "C": {"T1": [2]}})


def reassign_num_members_greater_than_num_partitions_when_one_member_added(t1, t2, t3):
    return ({"A": member({t1, t2}, {t1: frozenset({0}), t2: frozenset({0})}),
             "B": member({t1, t2}, {t1: frozenset({1}), t2: frozenset({1})}),
             "C": member({t1, t2})}, HOMOGENEOUS, {t1: 2, t2: 2},
            {"A": {"T1": [0], "T2": [0]}, "B": {"T1": [1], "T2": [1]}, "C": {}})


def reassign_when_one_partition_added_two_members_two_topics(t1, t2, t3):
    return ({"A": member({t1, t2}, {t1: frozenset({0, 1}), t2: frozenset({0, 1})}),
             "B": member({t1, t2}, {t1: frozenset({2}), t2: frozenset({2})})}, HOMOGENEOUS, {t1: 4, t2: 4},
            {"A": {"T1": [0, 1], "T2": [0, 1]}, "B": {"T1": [2, 3], "T2": [2, 3]}})


def reassign_when_one_member_added_two_members_two_topics(t1, t2, t3):
    return ({"A": member({t1, t2}, {t1: frozenset({0, 1}), t2: frozenset({0, 1})}),
             "B": member({t1, t2}, {t1: frozenset({2}), t2: frozenset({2})}),
             "C": member({t1, t2})}, HOMOGENEOUS, {t1: 3, t2: 3},
            {"A": {"T1": [0], "T2": [0]}, "B": {"T1": [1], "T2": [1]}, "C": {"T1": [2], "T2": [2]}})


def reassign_when_one_member_and_one_partition_added(t1, t2, t3):
    return ({"A": member({t1, t2}, {t1: frozenset({0, 1}), t2: frozenset({0, 1})}),
             "B": member({t1, t2}, {t1: frozenset({2}), t2: frozenset({2})}),
             "C": member({t1})}, HETEROGENEOUS, {t1: 4, t2: 3},
            {"A": {"T1": [0, 1], "T2": [0, 1]}, "B": {"T1": [2], "T2": [2]}, "C": {"T1": [3]}})


def reassign_when_one_member_removed_two_members_two_topics(t1, t2, t3):
    return ({"B": member({t1, t2}, {t1: frozenset({2}), t2: frozenset({2})})}, HOMOGENEOUS, {t1: 3, t2: 3},
            {"B": {"T1": [0, 1, 2], "T2": [0, 1, 2]}})


def reassign_when_multiple_subscriptions_removed_three_members(t1, t2, t3):
    return ({"A": member({t1}, {t1: frozenset({0, 1, 2}), t2: frozenset({0})}),
             "B": member({t1, t2, t3}, {t2: frozenset({1})}),
             "C": member({t2}, {t2: frozenset({2}), t3: frozenset({0, 1})})}, HETEROGENEOUS,
            {t1: 3, t2: 3, t3: 2},
            {"A": {"T1": [0, 1]}, "B": {"T1": [2], "T2": [0, 1], "T3": [0, 1]}, "C": {"T2": [2]}})


def one_member_no_topic(t1, t2, t3):
    return ({"A": member(set())}, HOMOGENEOUS, {t1: 3}, {"A": {}})


CASES = {
    "testOneMemberNoTopic": one_member_no_topic,
    "testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions": first_two_members_two_topics_same_subscriptions,
    "testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions": first_three_members_three_topics_different_subscriptions,
    "testFirstAssignmentNumMembersGreaterThanNumPartitions": first_num_members_greater_than_num_partitions,
    "testReassignmentNumMembersGreaterThanNumPartitionsWhenOneMemberAdded":
        reassign_num_members_greater_than_num_partitions_when_one_member_added,
    "testReassignmentWhenOnePartitionAddedForTwoMembersTwoTopics": reassign_when_one_partition_added_two_members_two_topics,
    "testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics":
        reassign_when_one_member_added_two_members_two_topics,
    "testReassignmentWhenOneMemberAddedAndOnePartitionAfterInitialAssignmentWithTwoMembersTwoTopics":
        reassign_when_one_member_and_one_partition_added,
    "testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithTwoMembersTwoTopics":
        reassign_when_one_member_removed_two_members_two_topics,
    "testReassignmentWhenMultipleSubscriptionsRemovedAfterInitialAssignmentWithThreeMembersTwoTopics":
        reassign_when_multiple_subscriptions_removed_three_members,
}


def test_the_two_id_sets_sort_oppositely_in_java():
    assert sorted(ASCENDING, key=uuid_sort_key) == list(ASCENDING)
    assert sorted(DESCENDING, key=uuid_sort_key) == list(reversed(DESCENDING))


@pytest.mark.parametrize("ids", [ASCENDING, DESCENDING], ids=["ids-ascending", "ids-descending"])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_range_matches_kafka(case, ids):
    members, kind, partitions, expected = CASES[case](*ids)
    assert named(run(members, kind, partitions), ids) == expected


def test_nonexistent_topic_raises_naming_it():
    # Kafka: testOneMemberSubscribedToNonExistentTopic.
    t1, t2, _ = ASCENDING
    with pytest.raises(PartitionAssignorError, match=str(t2)):
        run({"A": member({t2})}, HOMOGENEOUS, {t1: 3})


def test_static_membership_keeps_ranges_across_a_new_member_id():
    # Kafka: testStaticMembership. memberA (instanceA) leaves and comes back as memberA1.
    t1 = ASCENDING[0]
    first = run({"A": member({t1}, instance_id="instanceA"), "B": member({t1}, instance_id="instanceB")},
                HOMOGENEOUS, {t1: 3})
    again = run({"memberA1": member({t1}, instance_id="instanceA"), "B": member({t1}, instance_id="instanceB")},
                HOMOGENEOUS, {t1: 3})
    assert again["memberA1"] == first["A"] == {t1: frozenset({0, 1})}
    assert again["B"] == first["B"] == {t1: frozenset({2})}


def test_mixed_static_membership_puts_static_members_first():
    # Kafka: testMixedStaticMembership (5 partitions, A and C static, B dynamic).
    t1 = ASCENDING[0]
    first = run({"A": member({t1}, instance_id="instanceA"), "C": member({t1}, instance_id="instanceC"),
                 "B": member({t1})}, HOMOGENEOUS, {t1: 5})
    again = run({"memberA1": member({t1}, instance_id="instanceA"), "C": member({t1}, instance_id="instanceC"),
                 "B": member({t1})}, HOMOGENEOUS, {t1: 5})
    assert again["memberA1"] == first["A"]
    assert again["B"] == first["B"]
    assert again["C"] == first["C"]
    # Static members first (by instance id), then the dynamic one: A 0-1, C 2-3, B 4.
    assert first == {"A": {t1: frozenset({0, 1})}, "C": {t1: frozenset({2, 3})}, "B": {t1: frozenset({4})}}


def test_member_ids_sort_as_java_strings():
    # Java's String.compareTo compares UTF-16 code units: U+FF5E sorts after U+1F600 (whose
    # first unit is the surrogate 0xD83D), while Python's code-point order says the opposite.
    t1 = ASCENDING[0]
    out = run({"\uff5e": member({t1}), "\U0001F600": member({t1})}, HOMOGENEOUS, {t1: 2})
    assert out == {"\U0001F600": {t1: frozenset({0})}, "\uff5e": {t1: frozenset({1})}}


def test_no_members_gives_empty_assignment():
    assert ServerRangeAssignor().assign(GroupSpec({}), TopicsImage({ASCENDING[0]: 3})) == {}
