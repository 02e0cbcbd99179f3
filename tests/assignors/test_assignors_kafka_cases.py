"""Kafka's own examples and unit-test vectors for range, roundrobin, sticky, cooperative-sticky.

Each test is named after the Kafka test it ports (RangeAssignorTest, RoundRobinAssignorTest,
AbstractStickyAssignorTest, the assignors' javadoc); the data and expected outputs are
Kafka's, the code is ours.  Subscriptions are built in the same insertion order as
Kafka's tests, so Java-HashMap-order-dependent outcomes match too.
"""

from __future__ import annotations

import pytest

from kafkasim.assignors import (
    CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor, StickyAssignor, Subscription, get_assignor,
)
from kafkasim.assignors.sticky import sticky_assign
from kafkasim.types import TopicPartition

S = Subscription


def tp(topic: str, p: int) -> TopicPartition:
    return TopicPartition(topic, p)


def parse(s: str) -> list[TopicPartition]:
    """'t1-0, t2-3' -> [tp('t1', 0), tp('t2', 3)] (Kafka's test string form)."""
    out = []
    for item in filter(None, (x.strip() for x in s.split(","))):
        topic, p = item.rsplit("-", 1)
        out.append(tp(topic, int(p)))
    return out


def as_sets(assignment):
    return {m: set(v) for m, v in assignment.items()}


def fmt(assignment):
    return {m: ", ".join(sorted(f"{x.topic}-{x.partition}" for x in v)) for m, v in assignment.items()}


# --------------------------------------------------------------------------- range

def test_range_javadoc_example():
    subs = {"C0": S(["t0", "t1"]), "C1": S(["t0", "t1"])}
    assert RangeAssignor().assign({"t0": 3, "t1": 3}, subs) == {
        "C0": [tp("t0", 0), tp("t0", 1), tp("t1", 0), tp("t1", 1)],
        "C1": [tp("t0", 2), tp("t1", 2)],
    }


@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_testOneConsumerNoTopic(name):
    assert get_assignor(name).assign({}, {"consumer1": S([])}) == {"consumer1": []}


@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_testOneConsumerNonexistentTopic(name):
    assert get_assignor(name).assign({}, {"consumer1": S(["topic1"])}) == {"consumer1": []}
    assert get_assignor(name).assign({"topic1": 0}, {"consumer1": S(["topic1"])}) == {"consumer1": []}


@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_testOneConsumerOneTopic(name):
    assert get_assignor(name).assign({"topic1": 3}, {"consumer1": S(["topic1"])}) == {
        "consumer1": [tp("topic1", 0), tp("topic1", 1), tp("topic1", 2)]}


@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_testOnlyAssignsPartitionsFromSubscribedTopics(name):
    out = get_assignor(name).assign({"topic1": 3, "other": 3}, {"consumer1": S(["topic1"])})
    assert out == {"consumer1": [tp("topic1", 0), tp("topic1", 1), tp("topic1", 2)]}


@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_testOneConsumerMultipleTopics(name):
    out = get_assignor(name).assign({"topic1": 1, "topic2": 2}, {"consumer1": S(["topic1", "topic2"])})
    assert out == {"consumer1": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)]}


@pytest.mark.parametrize("name", ["range", "roundrobin"])
def test_testTwoConsumersOneTopicOnePartition(name):
    out = get_assignor(name).assign({"topic1": 1}, {"consumer1": S(["topic1"]), "consumer2": S(["topic1"])})
    assert out == {"consumer1": [tp("topic1", 0)], "consumer2": []}


@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_testTwoConsumersOneTopicTwoPartitions(name):
    out = get_assignor(name).assign({"topic1": 2}, {"consumer1": S(["topic1"]), "consumer2": S(["topic1"])})
    assert out == {"consumer1": [tp("topic1", 0)], "consumer2": [tp("topic1", 1)]}


def test_range_testMultipleConsumersMixedTopics():
    subs = {"consumer1": S(["topic1"]), "consumer2": S(["topic1", "topic2"]), "consumer3": S(["topic1"])}
    assert RangeAssignor().assign({"topic1": 3, "topic2": 2}, subs) == {
        "consumer1": [tp("topic1", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "consumer3": [tp("topic1", 2)],
    }


def test_range_testTwoConsumersTwoTopicsSixPartitions():
    subs = {"consumer1": S(["topic1", "topic2"]), "consumer2": S(["topic1", "topic2"])}
    assert RangeAssignor().assign({"topic1": 3, "topic2": 3}, subs) == {
        "consumer1": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "consumer2": [tp("topic1", 2), tp("topic2", 2)],
    }


def test_range_testTwoStaticConsumersTwoTopicsSixPartitions():
    # consumer-b sorts after consumer-a, but instance ids decide: instance1 < instance2
    subs = {"consumer-b": S(["topic1", "topic2"], group_instance_id="instance1"),
            "consumer-a": S(["topic1", "topic2"], group_instance_id="instance2")}
    out = RangeAssignor().assign({"topic1": 3, "topic2": 3}, subs)
    assert out["consumer-b"] == [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)]
    assert out["consumer-a"] == [tp("topic1", 2), tp("topic2", 2)]


def test_range_testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions():
    subs = {"consumer-b": S(["topic1", "topic2"], group_instance_id="instance1"),
            "consumer-a": S(["topic1", "topic2"])}
    out = RangeAssignor().assign({"topic1": 3, "topic2": 3}, subs)
    assert out["consumer-b"] == [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)]
    assert out["consumer-a"] == [tp("topic1", 2), tp("topic2", 2)]


def test_range_testStaticMemberRangeAssignmentPersistent():
    topics = ["topic1", "topic2"]
    subs = {f"consumer{i}": S(topics, group_instance_id=f"instance{i}") for i in (1, 2, 3)}
    subs["consumer4"] = S(topics)
    expected = {"consumer1": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0)],
                "consumer2": [tp("topic1", 2), tp("topic2", 1)],
                "consumer3": [tp("topic1", 3), tp("topic2", 2)],
                "consumer4": [tp("topic1", 4), tp("topic2", 3)]}
    assert RangeAssignor().assign({"topic1": 5, "topic2": 4}, subs) == expected
    del subs["consumer4"]
    subs["consumer5"] = S(topics)
    expected["consumer5"] = expected.pop("consumer4")
    assert RangeAssignor().assign({"topic1": 5, "topic2": 4}, subs) == expected


@pytest.mark.parametrize("name, expected", [
    ("range", {"instance1": parse("topic1-0, topic1-1, topic2-0, topic2-1"),
               "instance2": parse("topic1-2, topic1-3, topic2-2, topic2-3"),
               "instance3": parse("topic1-4, topic2-4")}),
    ("roundrobin", {"instance1": parse("topic1-0, topic1-3, topic2-1, topic2-4"),
                    "instance2": parse("topic1-1, topic1-4, topic2-2"),
                    "instance3": parse("topic1-2, topic2-0, topic2-3")}),
])
def test_testStaticMemberAssignmentPersistentAfterMemberIdChanges(name, expected):
    """RangeAssignorTest / RoundRobinAssignorTest ...PersistentAfterMemberIdChanges."""
    topics = ["topic1", "topic2"]
    subs = {f"consumer{i}": S(topics, group_instance_id=f"instance{i}") for i in (1, 2, 3)}

    def by_instance(s):
        out = get_assignor(name).assign({"topic1": 5, "topic2": 5}, s)
        return {s[m].group_instance_id: out[m] for m in s}

    assert by_instance(subs) == expected
    subs["consumer4"] = subs.pop("consumer3")
    subs["consumer5"] = subs.pop("consumer2")
    assert by_instance(subs) == expected


# --------------------------------------------------------------------------- roundrobin

def test_roundrobin_javadoc_examples():
    rr = RoundRobinAssignor()
    assert rr.assign({"t0": 3, "t1": 3}, {"C0": S(["t0", "t1"]), "C1": S(["t0", "t1"])}) == {
        "C0": parse("t0-0, t0-2, t1-1"), "C1": parse("t0-1, t1-0, t1-2")}
    subs = {"C0": S(["t0"]), "C1": S(["t0", "t1"]), "C2": S(["t0", "t1", "t2"])}
    assert rr.assign({"t0": 1, "t1": 2, "t2": 3}, subs) == {
        "C0": parse("t0-0"), "C1": parse("t1-0"), "C2": parse("t1-1, t2-0, t2-1, t2-2")}


def test_roundrobin_testMultipleConsumersMixedTopics():
    subs = {"consumer1": S(["topic1"]), "consumer2": S(["topic1", "topic2"]), "consumer3": S(["topic1"])}
    assert RoundRobinAssignor().assign({"topic1": 3, "topic2": 2}, subs) == {
        "consumer1": parse("topic1-0"), "consumer2": parse("topic1-1, topic2-0, topic2-1"),
        "consumer3": parse("topic1-2")}


def test_roundrobin_testTwoConsumersTwoTopicsSixPartitions():
    subs = {"consumer1": S(["topic1", "topic2"]), "consumer2": S(["topic1", "topic2"])}
    assert RoundRobinAssignor().assign({"topic1": 3, "topic2": 3}, subs) == {
        "consumer1": parse("topic1-0, topic1-2, topic2-1"), "consumer2": parse("topic1-1, topic2-0, topic2-2")}


@pytest.mark.parametrize("second_instance", ["instance2", None])
def test_roundrobin_testTwoStaticConsumers_and_OneStaticOneDynamic(second_instance):
    """testTwoStaticConsumersTwoTopicsSixPartitions / testOneStaticConsumerAndOneDynamicConsumer..."""
    subs = {"consumer-b": S(["topic1", "topic2"], group_instance_id="instance1"),
            "consumer-a": S(["topic1", "topic2"], group_instance_id=second_instance)}
    out = RoundRobinAssignor().assign({"topic1": 3, "topic2": 3}, subs)
    assert out == {"consumer-b": parse("topic1-0, topic1-2, topic2-1"),
                   "consumer-a": parse("topic1-1, topic2-0, topic2-2")}


def test_roundrobin_testStaticMemberRoundRobinAssignmentPersistent():
    topics = ["topic1", "topic2"]
    subs = {f"consumer{i}": S(topics, group_instance_id=f"instance{i}") for i in (1, 2, 3)}
    subs["consumer4"] = S(topics)
    expected = {"consumer1": parse("topic1-0, topic2-1"), "consumer2": parse("topic1-1, topic2-2"),
                "consumer3": parse("topic1-2"), "consumer4": parse("topic2-0")}
    assert RoundRobinAssignor().assign({"topic1": 3, "topic2": 3}, subs) == expected
    del subs["consumer4"]
    subs["consumer5"] = S(topics)
    expected["consumer5"] = expected.pop("consumer4")
    assert RoundRobinAssignor().assign({"topic1": 3, "topic2": 3}, subs) == expected


def test_member_order_uses_java_string_order():
    # U+FF21 (BMP, > U+E000) sorts AFTER a supplementary char in Python but BEFORE it in Java
    # (UTF-16 surrogates 0xD83D < 0xFF21); Kafka's order is Java's.
    bmp, astral = "\uff21", "\U0001F600"
    assert sorted([bmp, astral]) == [bmp, astral]
    out = RangeAssignor().assign({"t": 2}, {bmp: S(["t"]), astral: S(["t"])})
    assert out == {astral: [tp("t", 0)], bmp: [tp("t", 1)]}


# --------------------------------------------------------------------------- sticky family

STICKY = [StickyAssignor, CooperativeStickyAssignor]


def gen(topics, owned, generation=1):
    return S(topics, owned_partitions=list(owned), generation_id=generation)


def run_sticky(ppt, subs):
    """(sticky assignment, partitions transferring ownership) as Kafka's AbstractStickyAssignor exposes them."""
    assignment, transferring = sticky_assign(ppt, subs)
    return as_sets(assignment), transferring


def check_family(ppt, subs, expected, transferring):
    """Sticky gives ``expected``; cooperative-sticky gives it minus the transferring partitions."""
    got, moving = run_sticky(ppt, subs)
    assert got == {m: set(v) for m, v in expected.items()}
    if transferring is not None:
        assert moving == transferring
    assert as_sets(StickyAssignor().assign(ppt, subs)) == got
    coop = as_sets(CooperativeStickyAssignor().assign(ppt, subs))
    withheld = transferring or {}
    assert coop == {m: got[m] - {p for p, to in withheld.items() if to == m} for m in got}


def test_sticky_javadoc_example_fresh_and_after_member_leaves():
    """StickyAssignor javadoc example 1.  After C1 leaves, the javadoc lists the original
    (2017) algorithm's result; Kafka's current constrained algorithm deals C1's partitions
    round robin in partition order, giving the result below.  Both keep every survivor's
    previous partitions, which is what the javadoc example demonstrates."""
    ppt = {f"t{i}": 2 for i in range(4)}
    topics = list(ppt)
    subs = {c: S(topics) for c in ("C0", "C1", "C2")}
    first = StickyAssignor().assign(ppt, subs)
    assert first == {"C0": parse("t0-0, t1-1, t3-0"), "C1": parse("t0-1, t2-0, t3-1"), "C2": parse("t1-0, t2-1")}
    subs2 = {c: gen(topics, first[c]) for c in ("C0", "C2")}
    second = StickyAssignor().assign(ppt, subs2)
    assert second == {"C0": parse("t0-0, t0-1, t1-1, t3-0"), "C2": parse("t1-0, t2-0, t2-1, t3-1")}
    assert set(first["C0"]) <= set(second["C0"]) and set(first["C2"]) <= set(second["C2"])


def test_sticky_javadoc_example_unequal_subscriptions():
    ppt = {"t0": 1, "t1": 2, "t2": 3}
    subs = {"C0": S(["t0"]), "C1": S(["t0", "t1"]), "C2": S(["t0", "t1", "t2"])}
    first = StickyAssignor().assign(ppt, subs)
    assert first == {"C0": parse("t0-0"), "C1": parse("t1-0, t1-1"), "C2": parse("t2-0, t2-1, t2-2")}
    subs2 = {"C1": gen(["t0", "t1"], first["C1"]), "C2": gen(["t0", "t1", "t2"], first["C2"])}
    second = StickyAssignor().assign(ppt, subs2)
    assert second == {"C1": parse("t0-0, t1-0, t1-1"), "C2": parse("t2-0, t2-1, t2-2")}


def test_testMultipleConsumersMixedTopicSubscriptions():
    ppt = {"topic1": 3, "topic2": 2}
    subs = {"consumer1": S(["topic1"]), "consumer2": S(["topic1", "topic2"]), "consumer3": S(["topic1"])}
    got, transferring = run_sticky(ppt, subs)
    assert got == {"consumer1": set(parse("topic1-0, topic1-2")), "consumer2": set(parse("topic2-0, topic2-1")),
                   "consumer3": set(parse("topic1-1"))}
    assert transferring is None   # Kafka: general path, partitionsTransferringOwnership == null


def test_testTwoConsumersTwoTopicsSixPartitions():
    ppt = {"topic1": 3, "topic2": 3}
    subs = {"consumer1": S(["topic1", "topic2"]), "consumer2": S(["topic1", "topic2"])}
    check_family(ppt, subs, {"consumer1": parse("topic1-0, topic1-2, topic2-1"),
                             "consumer2": parse("topic1-1, topic2-0, topic2-2")}, {})


def test_testConsumerOwningMinQuotaExpectedMaxQuota():
    ppt = {"topic1": 2, "topic2": 3}
    t = ["topic1", "topic2"]
    subs = {"consumer1": gen(t, parse("topic1-0, topic2-1")), "consumer2": gen(t, parse("topic1-1, topic2-2"))}
    check_family(ppt, subs, {"consumer1": parse("topic1-0, topic2-1, topic2-0"),
                             "consumer2": parse("topic1-1, topic2-2")}, {})


def test_testMaxQuotaConsumerMoreThanNumExpectedMaxCapacityMembers():
    ppt = {"topic1": 2, "topic2": 2}
    t = ["topic1", "topic2"]
    subs = {"consumer1": gen(t, parse("topic1-0, topic2-0")), "consumer2": gen(t, parse("topic1-1, topic2-1")),
            "consumer3": gen(t, [])}
    check_family(ppt, subs, {"consumer1": parse("topic1-0"), "consumer2": parse("topic1-1, topic2-1"),
                             "consumer3": parse("topic2-0")}, {tp("topic2", 0): "consumer3"})


def test_testAllConsumersAreUnderMinQuota():
    ppt = {"topic1": 2, "topic2": 3}
    t = ["topic1", "topic2"]
    subs = {"consumer1": gen(t, parse("topic1-0")), "consumer2": gen(t, parse("topic1-1")), "consumer3": gen(t, [])}
    check_family(ppt, subs, {"consumer1": parse("topic1-0, topic2-1"), "consumer2": parse("topic1-1, topic2-2"),
                             "consumer3": parse("topic2-0")}, {})


def test_testAddRemoveConsumerOneTopic():
    ppt = {"topic": 3}
    first = StickyAssignor().assign(ppt, {"consumer1": S(["topic"])})
    assert first == {"consumer1": parse("topic-0, topic-1, topic-2")}
    subs = {"consumer1": gen(["topic"], first["consumer1"]), "consumer2": gen(["topic"], [])}
    check_family(ppt, subs, {"consumer1": parse("topic-0, topic-1"), "consumer2": parse("topic-2")},
                 {tp("topic", 2): "consumer2"})
    subs = {"consumer2": gen(["topic"], parse("topic-2"))}
    check_family(ppt, subs, {"consumer2": parse("topic-0, topic-1, topic-2")}, {})


def test_testAddRemoveTwoConsumersTwoTopics():
    ppt = {"topic1": 3, "topic2": 4}
    t = ["topic1", "topic2"]
    first = StickyAssignor().assign(ppt, {"consumer1": S(t), "consumer2": S(t)})
    assert first == {"consumer1": parse("topic1-0, topic1-2, topic2-1, topic2-3"),
                     "consumer2": parse("topic1-1, topic2-0, topic2-2")}
    subs = {"consumer1": gen(t, first["consumer1"]), "consumer2": gen(t, first["consumer2"]),
            "consumer3": gen(t, []), "consumer4": gen(t, [])}
    expected = {"consumer1": parse("topic1-0, topic2-1"), "consumer2": parse("topic2-0, topic1-1"),
                "consumer3": parse("topic1-2, topic2-3"), "consumer4": parse("topic2-2")}
    check_family(ppt, subs, expected, {tp("topic1", 2): "consumer3", tp("topic2", 3): "consumer3",
                                       tp("topic2", 2): "consumer4"})
    subs = {"consumer3": gen(t, expected["consumer3"]), "consumer4": gen(t, expected["consumer4"])}
    check_family(ppt, subs, {"consumer3": parse("topic1-2, topic2-3, topic1-0, topic2-1"),
                             "consumer4": parse("topic2-2, topic1-1, topic2-0")}, {})


def test_testAllConsumersReachExpectedQuotaAndAreConsideredFilled():
    ppt = {"topic": 4}
    subs = {"consumer1": gen(["topic"], parse("topic-0, topic-1")), "consumer2": gen(["topic"], parse("topic-2")),
            "consumer3": gen(["topic"], [])}
    check_family(ppt, subs, {"consumer1": parse("topic-0, topic-1"), "consumer2": parse("topic-2"),
                             "consumer3": parse("topic-3")}, {})


@pytest.mark.parametrize("stale_generation", [9, -1], ids=["StaleGeneration", "NoGeneration"])
def test_testOwnedPartitionsAreInvalidatedForConsumerWith(stale_generation):
    """testOwnedPartitionsAreInvalidatedForConsumerWithStaleGeneration / ...WithNoGeneration."""
    ppt = {"topic": 3, "topic2": 3}
    t = ["topic", "topic2"]
    owned = parse("topic-0, topic-2, topic2-1")
    subs = {"consumer1": gen(t, owned, 10), "consumer2": gen(t, owned, stale_generation)}
    check_family(ppt, subs, {"consumer1": owned, "consumer2": parse("topic-1, topic2-0, topic2-2")}, {})


def test_testOwnedPartitionsAreInvalidatedForConsumerWithMultipleGeneration():
    ppt = {"topic": 3, "topic2": 3}
    t = ["topic", "topic2"]
    subs = {"consumer1": gen(t, parse("topic-0, topic2-1, topic-1"), 10),
            "consumer2": gen(t, parse("topic-0, topic2-1, topic2-2"), 8)}
    check_family(ppt, subs, {"consumer1": parse("topic-0, topic2-1, topic-1"),
                             "consumer2": parse("topic-2, topic2-2, topic2-0")}, {})


def test_testPartitionsTransferringOwnershipIncludeThePartitionClaimedByMultipleConsumersInSameGeneration():
    ppt = {"topic": 3}
    subs = {"consumer1": gen(["topic"], parse("topic-0, topic-1")),
            "consumer2": gen(["topic"], parse("topic-0, topic-2")), "consumer3": gen(["topic"], [])}
    check_family(ppt, subs, {"consumer1": parse("topic-1"), "consumer2": parse("topic-2"),
                             "consumer3": parse("topic-0")}, {tp("topic", 0): "consumer3"})


def test_testEnsurePartitionsAssignedToHighestGeneration():
    ppt = {"topic": 3, "topic2": 3, "topic3": 3}
    t = ["topic", "topic2", "topic3"]
    subs = {"consumer1": gen(t, parse("topic-0, topic2-0, topic3-0"), 10),
            "consumer2": gen(t, parse("topic-1, topic2-1, topic3-1"), 9),
            "consumer3": gen(t, parse("topic2-1, topic3-0, topic3-2"), 8)}
    check_family(ppt, subs, {"consumer1": parse("topic-0, topic2-0, topic3-0"),
                             "consumer2": parse("topic-1, topic2-1, topic3-1"),
                             "consumer3": parse("topic-2, topic2-2, topic3-2")}, {})


def test_testNoReassignmentOnCurrentMembers():
    ppt = {"topic": 3, "topic1": 3, "topic2": 3, "topic3": 3}
    t = ["topic", "topic2", "topic3", "topic1"]
    subs = {"consumer1": gen(t, [], -1),
            "consumer2": gen(t, parse("topic-0, topic2-0, topic1-0"), 9),
            "consumer3": gen(t, parse("topic3-2, topic2-2, topic1-1"), 8),
            "consumer4": gen(t, parse("topic3-1, topic-1, topic-2"), 7)}
    got, transferring = run_sticky(ppt, subs)
    assert got["consumer1"] == set(parse("topic1-2, topic2-1, topic3-0"))
    assert transferring == {}
    assert as_sets(CooperativeStickyAssignor().assign(ppt, subs)) == got


def test_testRackAwareAssignmentWithUniformSubscription_non_rack_aware_vector():
    """AbstractStickyAssignorTest.testRackAwareAssignmentWithUniformSubscription, non-rack-aware vector
    (Kafka's assignment when no partition racks are known), fresh and with itself as owned."""
    ppt = {"t1": 6, "t2": 7, "t3": 2}
    topics = ["t1", "t2", "t3"]
    expected = {"consumer0": "t1-0, t1-3, t2-0, t2-3, t2-6", "consumer1": "t1-1, t1-4, t2-1, t2-4, t3-0",
                "consumer2": "t1-2, t1-5, t2-2, t2-5, t3-1"}
    for cls in STICKY:
        assert fmt(cls().assign(ppt, {f"consumer{i}": S(topics) for i in range(3)})) == expected
        owned = {m: S(topics, owned_partitions=parse(v)) for m, v in expected.items()}
        assert fmt(cls().assign(ppt, owned)) == expected


def test_testRackAwareAssignmentWithNonEqualSubscription_non_rack_aware_vector():
    """The general algorithm's exact output (Kafka's nonRackAwareAssignment), fresh and with itself as owned."""
    ppt = {"t1": 6, "t2": 7, "t3": 2}
    topics = [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t1", "t3"]]
    expected = {"consumer0": "t1-5, t2-0, t2-2, t2-4, t2-6", "consumer1": "t1-3, t2-1, t2-3, t2-5, t3-0",
                "consumer2": "t1-0, t1-1, t1-2, t1-4, t3-1"}
    for cls in STICKY:
        assert fmt(cls().assign(ppt, {f"consumer{i}": S(topics[i]) for i in range(3)})) == expected
        owned = {f"consumer{i}": S(topics[i], owned_partitions=parse(expected[f"consumer{i}"])) for i in range(3)}
        assert fmt(cls().assign(ppt, owned)) == expected


def test_cooperative_testRackAwareAssignmentWithNonEqualSubscription_two_rounds():
    """CooperativeStickyAssignor's intermediate (revoking) and final assignment from Kafka's test."""
    ppt = {"t1": 6, "t2": 7, "t3": 2}
    topics = [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t1", "t3"]]
    owned = ["t1-0, t1-1, t1-2, t1-3, t1-4", "t1-5, t2-0, t2-1, t2-2, t2-3", "t2-4, t2-5, t2-6, t3-0, t3-1"]
    coop = CooperativeStickyAssignor()
    first = coop.assign(ppt, {f"consumer{i}": S(topics[i], owned_partitions=parse(owned[i])) for i in range(3)})
    assert fmt(first) == {"consumer0": "t1-2, t1-3, t1-4", "consumer1": "t2-0, t2-1, t2-2, t2-3",
                          "consumer2": "t3-0, t3-1"}
    second = coop.assign(ppt, {f"consumer{i}": S(topics[i], owned_partitions=first[f"consumer{i}"])
                               for i in range(3)})
    assert fmt(second) == {"consumer0": "t1-2, t1-3, t1-4, t2-4, t2-5",
                           "consumer1": "t2-0, t2-1, t2-2, t2-3, t2-6",
                           "consumer2": "t1-0, t1-1, t1-5, t3-0, t3-1"}


def test_testSubscriptionNotEqualAndAssignSamePartitionWith3Generation():
    ppt = {"topic": 6, "topic1": 1}
    for g1, g2, g3 in [(1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1)]:
        subs = {"consumer1": gen(["topic"], parse("topic-0, topic-2"), g1),
                "consumer2": gen(["topic"], parse("topic-1, topic-2, topic-3"), g2),
                "consumer3": gen(["topic"], parse("topic-2, topic-4, topic-5"), g3),
                "consumer4": gen(["topic1"], parse("topic1-0"), 2)}
        for cls in STICKY:
            out = cls().assign(ppt, subs)
            flat = [p for v in out.values() for p in v]
            assert len(flat) == len(set(flat))
            if cls is StickyAssignor:
                assert all(1 <= len(v) <= 2 for v in out.values())


def test_testStickiness():
    ppt = {"topic1": 3}
    subs = {f"consumer{i}": S(["topic1"]) for i in (1, 2, 3, 4)}
    first = StickyAssignor().assign(ppt, subs)
    assert all(len(v) <= 1 for v in first.values())
    subs2 = {f"consumer{i}": gen(["topic1"], first[f"consumer{i}"]) for i in (2, 3, 4)}
    second = StickyAssignor().assign(ppt, subs2)
    for m, v in second.items():
        assert len(v) == 1
        assert not first[m] or first[m] == v


def test_testAssignmentUpdatedForDeletedTopic_and_OnlySubscribedTopicDeleted():
    out = StickyAssignor().assign({"topic1": 1, "topic3": 100}, {"consumer": S(["topic1", "topic2", "topic3"])})
    assert len(out["consumer"]) == 101
    owned = {"consumer": gen(["topic"], parse("topic-0, topic-1, topic-2"))}
    for cls in STICKY:
        assert cls().assign({}, owned) == {"consumer": []}


# --------------------------------------------------------------------------- StickyAssignorTest (eager)

def full_balance(assignment):
    c = [len(v) for v in assignment.values()]
    return max(c) - min(c) <= 1


@pytest.mark.parametrize("partitions, expected1", [(3, "topic-1"), (4, "topic-1, topic-3")],
                         ids=["EqualPartitionsPerConsumer", "UnequalPartitionsPerConsumer"])
def test_testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumersInSameGeneration(
        partitions, expected1):
    subs = {"consumer1": gen(["topic"], parse("topic-0, topic-1")),
            "consumer2": gen(["topic"], parse("topic-0, topic-2")), "consumer3": gen(["topic"], [])}
    out = StickyAssignor().assign({"topic": partitions}, subs)
    assert out == {"consumer1": parse(expected1), "consumer2": parse("topic-2"), "consumer3": parse("topic-0")}


@pytest.mark.parametrize("all_equal", [True, False], ids=["equal", "unequal"])
def test_testAssignmentWithMultipleGenerations1(all_equal):
    ppt = {"topic": 6, "topic2": 6}
    all_topics = ["topic", "topic2"]
    c2_topics = all_topics if all_equal else ["topic"]
    a = StickyAssignor()
    r1 = a.assign(ppt, {"consumer1": S(all_topics), "consumer2": S(c2_topics), "consumer3": S(all_topics)})
    assert [len(r1[c]) for c in ("consumer1", "consumer2", "consumer3")] == [4, 4, 4]
    r2 = a.assign(ppt, {"consumer1": gen(all_topics, r1["consumer1"], 1),
                        "consumer2": gen(c2_topics, r1["consumer2"], 1)})
    assert len(r2["consumer1"]) == 6 and len(r2["consumer2"]) == 6
    if all_equal:
        assert set(r1["consumer1"]) <= set(r2["consumer1"])
    assert set(r1["consumer2"]) <= set(r2["consumer2"])
    assert set(r2["consumer2"]) & set(r1["consumer3"])
    # consumer3 comes back claiming its generation-1 partitions; consumer2's generation-2 claims win
    r3 = a.assign(ppt, {"consumer2": gen(c2_topics, r2["consumer2"], 2),
                        "consumer3": gen(all_topics, r1["consumer3"], 1)})
    assert len(r3["consumer2"]) == 6 and len(r3["consumer3"]) == 6
    assert not set(r3["consumer2"]) & set(r3["consumer3"])


@pytest.mark.parametrize("all_equal", [True, False], ids=["equal", "unequal"])
def test_testAssignmentWithMultipleGenerations2(all_equal):
    ppt = {"topic": 4, "topic2": 4, "topic3": 4}
    all_topics = ["topic", "topic2", "topic3"]
    c1_topics = all_topics if all_equal else ["topic"]
    c3_topics = all_topics if all_equal else ["topic", "topic2"]
    a = StickyAssignor()
    r1 = a.assign(ppt, {"consumer1": S(c1_topics), "consumer2": S(all_topics), "consumer3": S(c3_topics)})
    assert [len(r1[c]) for c in ("consumer1", "consumer2", "consumer3")] == [4, 4, 4]
    r2 = a.assign(ppt, {"consumer2": gen(all_topics, r1["consumer2"], 1)})
    assert len(r2["consumer2"]) == 12 and set(r1["consumer2"]) <= set(r2["consumer2"])
    r3 = a.assign(ppt, {"consumer1": gen(c1_topics, r1["consumer1"], 1),
                        "consumer2": gen(all_topics, r2["consumer2"], 2),
                        "consumer3": gen(c3_topics, r1["consumer3"], 1)})
    assert [len(r3[c]) for c in ("consumer1", "consumer2", "consumer3")] == [4, 4, 4]
    assert full_balance(r3)


@pytest.mark.parametrize("all_equal", [True, False], ids=["equal", "unequal"])
def test_testAssignmentWithConflictingPreviousGenerations(all_equal):
    ppt = {"topic": 4, "topic2": 4, "topic3": 4}
    all_topics = ["topic", "topic2", "topic3"]
    c1_topics = all_topics if all_equal else ["topic"]
    c2_topics = all_topics if all_equal else ["topic", "topic2"]
    c1_owned = parse("topic-0, topic-1, topic-2, topic2-2, topic2-3, topic3-0" if all_equal
                     else "topic-0, topic-1, topic-2, topic-3")
    c2_owned = parse("topic-0, topic-1, topic2-0, topic2-1, topic2-2, topic2-3")
    c3_owned = parse("topic-2, topic-3, topic3-0, topic3-1, topic3-2, topic3-3")
    out = StickyAssignor().assign(ppt, {"consumer1": gen(c1_topics, c1_owned, 1),
                                        "consumer2": gen(c2_topics, c2_owned, 2),
                                        "consumer3": gen(all_topics, c3_owned, 2)})
    assert [len(out[c]) for c in ("consumer1", "consumer2", "consumer3")] == [4, 4, 4]
    assert set(out["consumer2"]) <= set(c2_owned)
    assert set(out["consumer3"]) <= set(c3_owned)


def test_testSchemaBackwardCompatibility():
    """consumer2 sends the V0 user data (no generation): generation -1 in kafkasim's terms."""
    c1_owned, c2_owned = parse("topic-0, topic-2"), parse("topic-1")
    subs = {"consumer1": gen(["topic"], c1_owned, 1), "consumer2": gen(["topic"], c2_owned, -1),
            "consumer3": S(["topic"])}
    out = StickyAssignor().assign({"topic": 3}, subs)
    assert [len(out[c]) for c in ("consumer1", "consumer2", "consumer3")] == [1, 1, 1]
    assert set(out["consumer1"]) <= set(c1_owned) and set(out["consumer2"]) <= set(c2_owned)


def test_testAssignorWithOldVersionSubscriptions():
    subs = {"consumer1": gen(["topic1"], parse("topic1-0")), "consumer2": gen(["topic1"], parse("topic1-1")),
            "consumer3": gen(["topic1"], [])}
    assert StickyAssignor().assign({"topic1": 3}, subs) == {
        "consumer1": parse("topic1-0"), "consumer2": parse("topic1-1"), "consumer3": parse("topic1-2")}
