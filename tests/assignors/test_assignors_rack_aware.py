"""Rack-aware assignment (KIP-881, Kafka >= 3.5): Kafka's own test cases, then properties.

Ported from Kafka's ``AbstractPartitionAssignorTest`` (``testUseRackAwareAssignment`` and the
rack helpers ``racks``/``nullRacks``/``partitionInfos``/``verifyRackAssignment``),
``RangeAssignorTest``, ``AbstractStickyAssignorTest`` and ``CooperativeStickyAssignorTest``:
the inputs and expected assignments are Kafka's data, the code is ours.  Each test is
named after the Kafka test it ports.

How Kafka's tests lay out replicas (reproduced by :func:`kafka_partition_racks`): brokers
``0..B-1`` with racks ``broker_racks[i]``; partition ``p`` of a topic has ``rf`` replicas on
brokers ``(p + j + next_index) % B``.  ``RackConfig`` parametrizes the older tests:
``NO_BROKER_RACK`` (replicas have no rack), ``NO_CONSUMER_RACK`` (members have no rack),
``BROKER_AND_CONSUMER_RACK`` (both; every partition then has a replica on every rack, and
Kafka forces the rack-aware code with ``preferRackAwareLogic`` to show it gives the same
result as the rack-unaware code).
"""

from __future__ import annotations

import copy
from typing import Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.assignors import (
    CooperativeStickyAssignor, RangeAssignor, StickyAssignor, Subscription, get_assignor,
)
from kafkasim.assignors.base import check_assignment, use_rack_aware_assignment
from kafkasim.assignors.range import range_assign
from kafkasim.assignors.sticky import sticky_assign
from kafkasim.types import TopicPartition

S = Subscription
ALL_RACKS = ["a", "b", "c", "d", "e", "f"]
RACK_CONFIGS = ["NO_BROKER_RACK", "NO_CONSUMER_RACK", "BROKER_AND_CONSUMER_RACK"]


def tp(topic: str, p: int) -> TopicPartition:
    return TopicPartition(topic, p)


def parse(s: str) -> list[TopicPartition]:
    """'t1-0, t2-3' -> [tp('t1', 0), tp('t2', 3)] (Kafka's test string form)."""
    out = []
    for item in filter(None, (x.strip() for x in s.split(","))):
        topic, p = item.rsplit("-", 1)
        out.append(tp(topic, int(p)))
    return out


def fmt(tps) -> str:
    """Kafka's toSortedString: partitions as 'topic-p', sorted as strings, comma-joined."""
    return ", ".join(sorted(f"{x.topic}-{x.partition}" for x in tps))


def racks(n: int) -> list[str]:
    """AbstractPartitionAssignorTest.racks(n)."""
    return [ALL_RACKS[i % len(ALL_RACKS)] for i in range(n)]


def null_racks(n: int) -> list[Optional[str]]:
    """AbstractPartitionAssignorTest.nullRacks(n)."""
    return [None] * n


def kafka_partition_racks(topic: str, n: int, rf: int, broker_racks: list[Optional[str]],
                          next_index: int = 0) -> dict[TopicPartition, set]:
    """AbstractPartitionAssignorTest.partitionInfos(topic, n, rf, brokerRacks, nextNodeIndex), racks only."""
    b = len(broker_racks)
    return {tp(topic, p): {broker_racks[(p + j + next_index) % b] for j in range(rf)} - {None} for p in range(n)}


def kafka_partition_racks_by_count(topic: str, n: int, rf: int, num_broker_racks: int,
                                   next_index: int = 0) -> dict[TopicPartition, set]:
    """The overload taking numBrokerRacks: rf brokers per rack (rf brokers without racks when 0)."""
    brokers = rf if num_broker_racks <= 0 else num_broker_racks * rf
    broker_racks = [None if num_broker_racks <= 0 else ALL_RACKS[i % num_broker_racks] for i in range(brokers)]
    return kafka_partition_racks(topic, n, rf, broker_racks, next_index)


def topics_partition_racks(topics: dict[str, int], rf: int, broker_racks) -> dict[TopicPartition, set]:
    """AbstractPartitionAssignorTest.partitionsPerTopic: topics in order, node index carried over."""
    out: dict[TopicPartition, set] = {}
    next_index = 0
    for topic, n in topics.items():
        out.update(kafka_partition_racks(topic, n, rf, broker_racks, next_index))
        next_index += n
    return out


def verify_rack_assignment(assignor, topics: dict[str, int], rf: int, broker_racks, consumer_racks,
                           consumer_topics, expected: list[str], mismatches: int,
                           owned: Optional[list[str]] = None):
    """AbstractPartitionAssignorTest.verifyRackAssignment: members consumer0..N-1, owned at generation -1."""
    partition_racks = topics_partition_racks(topics, rf, broker_racks)
    subs = {}
    for i, rack in enumerate(consumer_racks):
        mine = parse(owned[i]) if owned and i < len(owned) else []
        subs[f"consumer{i}"] = S(list(consumer_topics[i]), owned_partitions=mine, rack_id=rack)
    out = assignor.assign(topics, subs, partition_racks)
    assert [fmt(out[f"consumer{i}"]) for i in range(len(consumer_racks))] == expected
    if mismatches >= 0:
        off = [x for i, rack in enumerate(consumer_racks) if rack is not None
               for x in out[f"consumer{i}"] if rack not in partition_racks[x]]
        assert len(off) == mismatches, off
    return out


# --------------------------------------------------------------------------- useRackAwareAssignment

def test_testUseRackAwareAssignment():
    all_racks, two = {"a", "b", "c"}, {"a", "b"}
    on_all = [frozenset(all_racks)] * 10
    on_subset = [frozenset({"abc"[i % 3]}) for i in range(10)]
    for prefer in (False, True):
        assert not use_rack_aware_assignment(set(), set(), on_all, prefer)
        assert not use_rack_aware_assignment(set(), all_racks, on_all, prefer)
        assert not use_rack_aware_assignment(all_racks, set(), [], prefer)
        assert not use_rack_aware_assignment({"d"}, all_racks, on_all, prefer)
        assert use_rack_aware_assignment(all_racks, all_racks, on_all, prefer) is prefer
        assert use_rack_aware_assignment(two, all_racks, on_all, prefer) is prefer
        assert use_rack_aware_assignment(all_racks, all_racks, on_subset, prefer)
        assert use_rack_aware_assignment(two, all_racks, on_subset, prefer)
    assert not use_rack_aware_assignment({"a", "d"}, all_racks, on_all)
    assert use_rack_aware_assignment({"a", "d"}, all_racks, on_subset)


# --------------------------------------------------------------------------- range: RackConfig

class RangeRacks:
    """RangeAssignorTest.initializeRacks(rackConfig, maxConsumers) and its helpers."""

    def __init__(self, config: str, max_consumers: int = 3) -> None:
        self.rf = max_consumers
        self.num_broker_racks = max_consumers if config != "NO_BROKER_RACK" else 0
        self.consumer_rack = config != "NO_CONSUMER_RACK"
        self.partition_racks: dict[TopicPartition, set] = {}

    def topic(self, topic: str, n: int) -> dict[str, int]:
        self.partition_racks.update(kafka_partition_racks_by_count(topic, n, self.rf, self.num_broker_racks))
        return {topic: n}

    def sub(self, topics, index: int, instance: Optional[str] = None) -> Subscription:
        num_racks = self.num_broker_racks if self.num_broker_racks > 0 else len(ALL_RACKS)
        rack = ALL_RACKS[index % num_racks] if self.consumer_rack else None
        return S(list(topics), group_instance_id=instance, rack_id=rack)

    def assign(self, ppt, subs):
        # initializeRacks sets preferRackAwareLogic: the rack-aware code runs even with every
        # partition on every rack, and must give the rack-unaware result
        return RangeAssignor(prefer_rack_aware_logic=True).assign(ppt, subs, self.partition_racks)


def as_sets(assignment):
    return {m: set(v) for m, v in assignment.items()}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_range_testOneConsumerOneTopic_and_testOnlyAssignsPartitionsFromSubscribedTopics(config):
    r = RangeRacks(config)
    ppt = {**r.topic("topic1", 3)}
    assert r.assign(ppt, {"consumer1": r.sub(["topic1"], 0)}) == {"consumer1": parse("topic1-0, topic1-1, topic1-2")}
    ppt = {**r.topic("topic1", 3), **r.topic("other", 3)}
    assert r.assign(ppt, {"consumer1": r.sub(["topic1"], 0)}) == {"consumer1": parse("topic1-0, topic1-1, topic1-2")}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_range_testOneConsumerMultipleTopics(config):
    r = RangeRacks(config)
    ppt = {**r.topic("topic1", 1), **r.topic("topic2", 2)}
    assert r.assign(ppt, {"consumer1": r.sub(["topic1", "topic2"], 0)}) == {
        "consumer1": parse("topic1-0, topic2-0, topic2-1")}


@pytest.mark.parametrize("config", RACK_CONFIGS)
@pytest.mark.parametrize("n, expected", [(1, ("topic1-0", "")), (2, ("topic1-0", "topic1-1"))],
                         ids=["testTwoConsumersOneTopicOnePartition", "testTwoConsumersOneTopicTwoPartitions"])
def test_range_testTwoConsumersOneTopic(config, n, expected):
    r = RangeRacks(config)
    ppt = r.topic("topic1", n)
    out = r.assign(ppt, {"consumer1": r.sub(["topic1"], 0), "consumer2": r.sub(["topic1"], 1)})
    assert (fmt(out["consumer1"]), fmt(out["consumer2"])) == expected


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_range_testMultipleConsumersMixedTopics(config):
    r = RangeRacks(config)
    ppt = {**r.topic("topic1", 3), **r.topic("topic2", 2)}
    subs = {"consumer1": r.sub(["topic1"], 0), "consumer2": r.sub(["topic1", "topic2"], 1),
            "consumer3": r.sub(["topic1"], 2)}
    assert as_sets(r.assign(ppt, subs)) == {"consumer1": {tp("topic1", 0)},
                                            "consumer2": set(parse("topic1-1, topic2-0, topic2-1")),
                                            "consumer3": {tp("topic1", 2)}}


@pytest.mark.parametrize("config", RACK_CONFIGS)
@pytest.mark.parametrize("case", ["testTwoConsumersTwoTopicsSixPartitions", "testTwoStaticConsumersTwoTopicsSixPartitions",
                                  "testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions"])
def test_range_two_consumers_two_topics_six_partitions(config, case):
    r = RangeRacks(config)
    ppt = {**r.topic("topic1", 3), **r.topic("topic2", 3)}
    both = ["topic1", "topic2"]
    if case == "testTwoConsumersTwoTopicsSixPartitions":
        low, high = "consumer1", "consumer2"
        subs = {low: r.sub(both, 0), high: r.sub(both, 1)}
    else:   # consumer-b sorts after consumer-a, but its instance id puts it first
        low, high = "consumer-b", "consumer-a"
        subs = {low: r.sub(both, 0, "instance1"),
                high: r.sub(both, 1, "instance2" if "TwoStatic" in case else None)}
    out = r.assign(ppt, subs)
    assert fmt(out[low]) == "topic1-0, topic1-1, topic2-0, topic2-1"
    assert fmt(out[high]) == "topic1-2, topic2-2"


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_range_testStaticMemberRangeAssignmentPersistent(config):
    r = RangeRacks(config, max_consumers=5)
    ppt = {**r.topic("topic1", 5), **r.topic("topic2", 4)}
    both = ["topic1", "topic2"]
    subs = {f"consumer{i}": r.sub(both, i - 1, f"instance{i}") for i in (1, 2, 3)}
    subs["consumer4"] = r.sub(both, 3)
    expected = {"consumer1": "topic1-0, topic1-1, topic2-0", "consumer2": "topic1-2, topic2-1",
                "consumer3": "topic1-3, topic2-2", "consumer4": "topic1-4, topic2-3"}
    assert {m: fmt(v) for m, v in r.assign(ppt, subs).items()} == expected
    del subs["consumer4"]
    subs["consumer5"] = r.sub(both, 4)
    expected["consumer5"] = expected.pop("consumer4")
    assert {m: fmt(v) for m, v in r.assign(ppt, subs).items()} == expected


def by_instance(assignment, subs):
    return {subs[m].group_instance_id: fmt(assignment[m]) for m in subs if subs[m].group_instance_id}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_range_testStaticMemberRangeAssignmentPersistentAfterMemberIdChanges(config):
    r = RangeRacks(config)
    ppt = {**r.topic("topic1", 5), **r.topic("topic2", 5)}
    both = ["topic1", "topic2"]
    subs = {f"consumer{i}": r.sub(both, i - 1, f"instance{i}") for i in (1, 2, 3)}
    expected = {"instance1": "topic1-0, topic1-1, topic2-0, topic2-1",
                "instance2": "topic1-2, topic1-3, topic2-2, topic2-3", "instance3": "topic1-4, topic2-4"}
    assert by_instance(r.assign(ppt, subs), subs) == expected
    subs["consumer4"] = subs.pop("consumer3")
    subs["consumer5"] = subs.pop("consumer2")
    assert by_instance(r.assign(ppt, subs), subs) == expected


# --------------------------------------------------------------------------- range: rack-aware cases

def test_range_testRackAwareStaticMemberRangeAssignmentPersistentAfterMemberIdChanges():
    partition_racks = {**kafka_partition_racks_by_count("topic1", 5, 2, 3),
                       **kafka_partition_racks_by_count("topic2", 5, 2, 3)}
    ppt = {"topic1": 5, "topic2": 5}
    both = ["topic1", "topic2"]
    subs = {f"consumer{i}": S(both, group_instance_id=f"instance{i}", rack_id=ALL_RACKS[i - 1]) for i in (1, 2, 3)}
    expected = {"instance1": "topic1-0, topic1-2, topic2-0, topic2-2",
                "instance2": "topic1-1, topic1-3, topic2-1, topic2-3", "instance3": "topic1-4, topic2-4"}
    assignor = RangeAssignor(prefer_rack_aware_logic=True)
    assert by_instance(assignor.assign(ppt, subs, partition_racks), subs) == expected
    subs["consumer4"] = subs.pop("consumer3")
    subs["consumer5"] = subs.pop("consumer2")
    assert by_instance(assignor.assign(ppt, subs, partition_racks), subs) == expected


def verify_non_rack_aware(topics, consumer_topics, expected):
    """RangeAssignorTest.verifyNonRackAwareAssignment: the rack-unaware result whenever racks cannot help."""
    range_ = RangeAssignor()
    verify_rack_assignment(range_, topics, 3, null_racks(3), racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(range_, topics, 3, racks(3), null_racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(range_, topics, 3, racks(3), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(range_, topics, 4, racks(4), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(range_, topics, 3, racks(3), ["d", "e", "f"], consumer_topics, expected, -1)
    verify_rack_assignment(range_, topics, 3, racks(3), [None, "e", "f"], consumer_topics, expected, -1)
    verify_rack_assignment(RangeAssignor(prefer_rack_aware_logic=True), topics, 3, racks(3), racks(3),
                           consumer_topics, expected, 0)
    subs = {f"consumer{i}": S(list(t)) for i, t in enumerate(consumer_topics)}
    assert [fmt(v) for v in RangeAssignor().assign(topics, subs).values()] == expected


ALL3 = ["t1", "t2", "t3"]


def test_range_testRackAwareAssignmentWithUniformSubscription():
    topics = {"t1": 6, "t2": 7, "t3": 2}
    ct = [ALL3, ALL3, ALL3]
    verify_non_rack_aware(topics, ct, ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1",
                                       "t1-4, t1-5, t2-5, t2-6"])
    a = RangeAssignor()
    verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct, [
        "t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"], 0)
    verify_rack_assignment(a, topics, 2, racks(3), racks(3), ct, [
        "t1-0, t1-2, t2-0, t2-2, t2-3, t3-1", "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6"], 1)
    # one consumer on a rack with no partitions
    verify_rack_assignment(a, topics, 3, racks(2), racks(3), ct, [
        "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"], 4)


def test_range_testRackAwareAssignmentWithNonEqualSubscription():
    topics = {"t1": 6, "t2": 7, "t3": 2}
    ct = [ALL3, ALL3, ["t1", "t3"]]
    verify_non_rack_aware(topics, ct, ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1",
                                       "t1-4, t1-5"])
    a = RangeAssignor()
    verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct, [
        "t1-0, t1-3, t2-0, t2-2, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0", "t1-2, t1-5, t3-1"], 2)
    verify_rack_assignment(a, topics, 2, racks(3), racks(3), ct, [
        "t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1", "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0", "t1-4, t1-5"], 0)
    verify_rack_assignment(a, topics, 3, racks(2), racks(3), ct, [
        "t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"], 2)


def test_range_testRackAwareAssignmentWithUniformPartitions():
    """Co-partitioning (same members, same partition count) wins over rack alignment."""
    topics = {"t1": 5, "t2": 5, "t3": 5}
    ct = [ALL3, ALL3, ALL3]
    expected = ["t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t2-4, t3-4"]
    verify_non_rack_aware(topics, ct, expected)
    a = RangeAssignor()
    verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct, expected, 10)
    verify_rack_assignment(a, topics, 2, racks(3), racks(3), ct, expected, 5)
    verify_rack_assignment(a, topics, 3, racks(2), racks(3), ct, expected, 3)


def test_range_testRackAwareAssignmentWithUniformPartitionsNonEqualSubscription():
    topics = {"t1": 5, "t2": 5, "t3": 5}
    ct = [ALL3, ALL3, ["t1", "t3"]]
    verify_non_rack_aware(topics, ct, ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3",
                                       "t1-4, t3-4"])
    a = RangeAssignor()
    verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct, [
        "t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t3-4"], 9)
    verify_rack_assignment(a, topics, 2, racks(3), racks(3), ct, [
        "t1-2, t2-0, t2-1, t2-3, t3-2", "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3", "t1-1, t1-4, t3-1, t3-4"], 0)
    verify_rack_assignment(a, topics, 3, racks(2), racks(3), ct, [
        "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"], 2)


def test_range_testRackAwareAssignmentWithCoPartitioning():
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2}
    ct = [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]]
    cr = ["a", "b", "b", "a"]
    plain = ["t1-0, t1-1, t1-2, t2-0, t2-1, t2-2", "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5", "t3-0, t4-0", "t3-1, t4-1"]
    a = RangeAssignor()
    verify_rack_assignment(a, topics, 3, racks(2), cr, ct, plain, -1)
    verify_rack_assignment(a, topics, 2, racks(2), cr, ct, plain, 0)
    verify_rack_assignment(a, topics, 1, racks(2), cr, ct, [
        "t1-0, t1-2, t1-4, t2-0, t2-2, t2-4", "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5", "t3-1, t4-1", "t3-0, t4-0"], 0)
    all4 = ["t1", "t2", "t3", "t4"]
    ct = [all4] * 4
    plain = ["t1-0, t1-1, t2-0, t2-1, t3-0, t4-0", "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1", "t1-4, t2-4", "t1-5, t2-5"]
    verify_rack_assignment(a, topics, 3, racks(2), cr, ct, plain, -1)
    verify_rack_assignment(a, topics, 2, racks(2), cr, ct, plain, 0)
    verify_rack_assignment(a, topics, 1, racks(2), cr, ct, [
        "t1-0, t1-2, t2-0, t2-2, t3-0, t4-0", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1", "t1-5, t2-5", "t1-4, t2-4"], 0)
    verify_rack_assignment(a, topics, 1, racks(3), cr, ct, [
        "t1-0, t1-3, t2-0, t2-3, t3-0, t4-0", "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1", "t1-2, t2-2", "t1-5, t2-5"], 6)


def test_range_testCoPartitionedAssignmentWithSameSubscription():
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4}
    all9 = [f"t{i}" for i in range(1, 10)]
    ct = [all9] * 3
    cr = ["a", "b", "c"]
    plain = ["t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
             "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2", "t1-4, t1-5, t2-4, t2-5, t5-3, t6-3"]
    verify_rack_assignment(RangeAssignor(), topics, 3, null_racks(3), cr, ct, plain, -1)
    prefer = RangeAssignor(prefer_rack_aware_logic=True)
    verify_rack_assignment(prefer, topics, 3, racks(3), cr, ct, plain, 0)
    verify_rack_assignment(prefer, topics, 2, racks(3), cr, ct, [
        "t1-0, t1-2, t2-0, t2-2, t3-0, t4-0, t5-1, t6-1", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1, t5-2, t6-2",
        "t1-4, t1-5, t2-4, t2-5, t5-0, t5-3, t6-0, t6-3"], 0)


def test_range_module_docstring_rack_example():
    ppt = {"t1": 6, "t2": 7, "t3": 2}
    subs = {f"consumer{i}": S(ALL3, rack_id="abc"[i]) for i in range(3)}
    out = range_assign(ppt, subs, topics_partition_racks(ppt, 1, racks(3)))
    assert [fmt(v) for v in out.values()] == [
        "t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"]


# --------------------------------------------------------------------------- sticky: RackConfig

class StickyRacks:
    """AbstractStickyAssignorTest.initializeRacks(rackConfig) and its helpers: rf 3, 3 broker racks."""

    def __init__(self, config: str) -> None:
        self.rf = 3
        self.num_broker_racks = 3 if config != "NO_BROKER_RACK" else 0
        self.consumer_rack = config != "NO_CONSUMER_RACK"
        self.next_partition_index = 0
        self.partition_racks: dict[TopicPartition, set] = {}

    def topic(self, topic: str, n: int) -> dict[str, int]:
        """partitionInfos(topic, n): the node index moves on by one per call."""
        self.partition_racks.update(kafka_partition_racks_by_count(topic, n, self.rf, self.num_broker_racks,
                                                                    self.next_partition_index))
        self.next_partition_index += 1
        return {topic: n}

    def sub(self, topics, index: int, owned=(), generation: int = -1) -> Subscription:
        num_racks = self.num_broker_racks if self.num_broker_racks > 0 else len(ALL_RACKS)
        rack = ALL_RACKS[index % num_racks] if self.consumer_rack else None
        return S(list(topics), owned_partitions=list(owned), generation_id=generation, rack_id=rack)

    def run(self, ppt, subs):
        """(sticky assignment, transferring) with preferRackAwareLogic, as initializeRacks sets it."""
        assignment, transferring = sticky_assign(ppt, subs, self.partition_racks, prefer_rack_aware=True)
        return as_sets(assignment), transferring

    def check(self, ppt, subs, expected: dict[str, str], transferring):
        """Sticky gives ``expected``; cooperative-sticky gives it minus the transferring partitions."""
        got, moving = self.run(ppt, subs)
        assert {m: fmt(v) for m, v in got.items()} == expected
        if transferring != "general":
            assert moving == transferring
        sticky = StickyAssignor(prefer_rack_aware_logic=True).assign(ppt, subs, self.partition_racks)
        assert as_sets(sticky) == got
        coop = CooperativeStickyAssignor(prefer_rack_aware_logic=True).assign(ppt, subs, self.partition_racks)
        withheld = transferring if isinstance(transferring, dict) else {}
        assert as_sets(coop) == {m: got[m] - {p for p, to in withheld.items() if to == m} for m in got}
        # and the same as the rack-unaware assignors on the same input
        plain = {m: s._replace(rack_id=None) for m, s in subs.items()}
        assert as_sets(StickyAssignor().assign(ppt, plain)) == got
        return got


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_sticky_testOneConsumerOneTopic_MultipleTopics_OnlySubscribed(config):
    """testOneConsumerOneTopic, testOneConsumerMultipleTopics, testOnlyAssignsPartitionsFromSubscribedTopics."""
    r = StickyRacks(config)
    r.check(r.topic("topic", 3), {"consumer": r.sub(["topic"], 0)}, {"consumer": "topic-0, topic-1, topic-2"}, {})
    r = StickyRacks(config)
    ppt = {**r.topic("topic1", 1), **r.topic("topic2", 2)}
    r.check(ppt, {"consumer": r.sub(["topic1", "topic2"], 0)}, {"consumer": "topic1-0, topic2-0, topic2-1"}, {})
    r = StickyRacks(config)
    owned = parse("topic-0, topic-1, other-0, other-1")
    r.check(r.topic("topic", 2), {"consumer": r.sub(["topic"], 0, owned, 1)}, {"consumer": "topic-0, topic-1"}, {})


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_sticky_testTwoConsumersOneTopicTwoPartitions(config):
    r = StickyRacks(config)
    r.check(r.topic("topic", 2), {"consumer1": r.sub(["topic"], 0), "consumer2": r.sub(["topic"], 1)},
            {"consumer1": "topic-0", "consumer2": "topic-1"}, {})


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_sticky_testMultipleConsumersMixedTopicSubscriptions(config):
    r = StickyRacks(config)
    ppt = {**r.topic("topic1", 3), **r.topic("topic2", 2)}
    subs = {"consumer1": r.sub(["topic1"], 0), "consumer2": r.sub(["topic1", "topic2"], 1),
            "consumer3": r.sub(["topic1"], 2)}
    r.check(ppt, subs, {"consumer1": "topic1-0, topic1-2", "consumer2": "topic2-0, topic2-1",
                        "consumer3": "topic1-1"}, None)   # general path: Kafka's transferring map is null


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_sticky_testTwoConsumersTwoTopicsSixPartitions(config):
    r = StickyRacks(config)
    ppt = {**r.topic("topic1", 3), **r.topic("topic2", 3)}
    both = ["topic1", "topic2"]
    r.check(ppt, {"consumer1": r.sub(both, 0), "consumer2": r.sub(both, 1)},
            {"consumer1": "topic1-0, topic1-2, topic2-1", "consumer2": "topic1-1, topic2-0, topic2-2"}, {})


STICKY_CASES = {
    # name: (topics, [(member, owned, generation, consumer index)], expected, transferring)
    "testConsumerOwningMinQuotaExpectedMaxQuota": (
        {"topic1": 2, "topic2": 3},
        [("consumer1", "topic1-0, topic2-1", 1, 0), ("consumer2", "topic1-1, topic2-2", 1, 1)],
        {"consumer1": "topic1-0, topic2-0, topic2-1", "consumer2": "topic1-1, topic2-2"}, {}),
    "testMaxQuotaConsumerMoreThanNumExpectedMaxCapacityMembers": (
        {"topic1": 2, "topic2": 2},
        [("consumer1", "topic1-0, topic2-0", 1, 0), ("consumer2", "topic1-1, topic2-1", 1, 1), ("consumer3", "", 1, 2)],
        {"consumer1": "topic1-0", "consumer2": "topic1-1, topic2-1", "consumer3": "topic2-0"},
        {tp("topic2", 0): "consumer3"}),
    "testAllConsumersAreUnderMinQuota": (
        {"topic1": 2, "topic2": 3},
        [("consumer1", "topic1-0", 1, 0), ("consumer2", "topic1-1", 1, 1), ("consumer3", "", 1, 2)],
        {"consumer1": "topic1-0, topic2-1", "consumer2": "topic1-1, topic2-2", "consumer3": "topic2-0"}, {}),
    "testAllConsumersReachExpectedQuotaAndAreConsideredFilled": (
        {"topic": 4},
        [("consumer1", "topic-0, topic-1", 1, 0), ("consumer2", "topic-2", 1, 1), ("consumer3", "", 1, 2)],
        {"consumer1": "topic-0, topic-1", "consumer2": "topic-2", "consumer3": "topic-3"}, {}),
    "testOwnedPartitionsAreInvalidatedForConsumerWithStaleGeneration": (
        {"topic": 3, "topic2": 3},
        [("consumer1", "topic-0, topic-2, topic2-1", 10, 0), ("consumer2", "topic-0, topic-2, topic2-1", 9, 1)],
        {"consumer1": "topic-0, topic-2, topic2-1", "consumer2": "topic-1, topic2-0, topic2-2"}, {}),
    "testOwnedPartitionsAreInvalidatedForConsumerWithNoGeneration": (
        {"topic": 3, "topic2": 3},
        [("consumer1", "topic-0, topic-2, topic2-1", 10, 0), ("consumer2", "topic-0, topic-2, topic2-1", -1, 1)],
        {"consumer1": "topic-0, topic-2, topic2-1", "consumer2": "topic-1, topic2-0, topic2-2"}, {}),
    "testOwnedPartitionsAreInvalidatedForConsumerWithMultipleGeneration": (
        {"topic": 3, "topic2": 3},
        [("consumer1", "topic-0, topic2-1, topic-1", 10, 0), ("consumer2", "topic-0, topic2-1, topic2-2", 8, 1)],
        {"consumer1": "topic-0, topic-1, topic2-1", "consumer2": "topic-2, topic2-0, topic2-2"}, {}),
    "testPartitionsTransferringOwnershipIncludeThePartitionClaimedByMultipleConsumersInSameGeneration": (
        {"topic": 3},
        [("consumer1", "topic-0, topic-1", 1, 0), ("consumer2", "topic-0, topic-2", 1, 1), ("consumer3", "", 1, 2)],
        {"consumer1": "topic-1", "consumer2": "topic-2", "consumer3": "topic-0"}, {tp("topic", 0): "consumer3"}),
    "testEnsurePartitionsAssignedToHighestGeneration": (
        {"topic": 3, "topic2": 3, "topic3": 3},
        [("consumer1", "topic-0, topic2-0, topic3-0", 10, 0), ("consumer2", "topic-1, topic2-1, topic3-1", 9, 1),
         ("consumer3", "topic2-1, topic3-0, topic3-2", 8, 1)],
        {"consumer1": "topic-0, topic2-0, topic3-0", "consumer2": "topic-1, topic2-1, topic3-1",
         "consumer3": "topic-2, topic2-2, topic3-2"}, {}),
    # CooperativeStickyAssignorTest: topic-0 claimed twice in one generation is withheld from consumer3
    "testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumersInSameGenerationWithUnequalPartitionsPerConsumer": (
        {"topic": 4},
        [("consumer1", "topic-0, topic-1", 1, 0), ("consumer2", "topic-0, topic-2", 1, 1), ("consumer3", "", 1, 2)],
        {"consumer1": "topic-1, topic-3", "consumer2": "topic-2", "consumer3": "topic-0"},
        {tp("topic", 0): "consumer3"}),
}


@pytest.mark.parametrize("config", RACK_CONFIGS)
@pytest.mark.parametrize("name", list(STICKY_CASES))
def test_sticky_rack_config_cases(name, config):
    topics, members, expected, transferring = STICKY_CASES[name]
    r = StickyRacks(config)
    ppt = {}
    for t, n in topics.items():
        ppt.update(r.topic(t, n))
    subs = {m: r.sub(list(topics), i, parse(owned), gen) for m, owned, gen, i in members}
    r.check(ppt, subs, expected, transferring)


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_sticky_testNoReassignmentOnCurrentMembers(config):
    r = StickyRacks(config)
    ppt = {**r.topic("topic", 3), **r.topic("topic1", 3), **r.topic("topic2", 3), **r.topic("topic3", 3)}
    t = ["topic", "topic2", "topic3", "topic1"]
    subs = {"consumer1": r.sub(t, 0, (), -1),
            "consumer2": r.sub(t, 1, parse("topic-0, topic2-0, topic1-0"), 9),
            "consumer3": r.sub(t, 2, parse("topic3-2, topic2-2, topic1-1"), 8),
            "consumer4": r.sub(t, 3, parse("topic3-1, topic-1, topic-2"), 7)}
    got, transferring = r.run(ppt, subs)
    assert fmt(got["consumer1"]) == "topic1-2, topic2-1, topic3-0" and transferring == {}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_sticky_testAddRemoveConsumerOneTopic(config):
    r = StickyRacks(config)
    ppt = r.topic("topic", 3)
    first = r.check(ppt, {"consumer1": r.sub(["topic"], 0)}, {"consumer1": "topic-0, topic-1, topic-2"}, {})
    subs = {"consumer1": r.sub(["topic"], 0, first["consumer1"], 1), "consumer2": r.sub(["topic"], 1, (), 1)}
    second = r.check(ppt, subs, {"consumer1": "topic-0, topic-1", "consumer2": "topic-2"}, {tp("topic", 2): "consumer2"})
    r.check(ppt, {"consumer2": r.sub(["topic"], 1, second["consumer2"], 1)},
            {"consumer2": "topic-0, topic-1, topic-2"}, {})


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_sticky_testAddRemoveTwoConsumersTwoTopics(config):
    r = StickyRacks(config)
    ppt = {**r.topic("topic1", 3), **r.topic("topic2", 4)}
    both = ["topic1", "topic2"]
    first = r.check(ppt, {"consumer1": r.sub(both, 0), "consumer2": r.sub(both, 1)},
                    {"consumer1": "topic1-0, topic1-2, topic2-1, topic2-3", "consumer2": "topic1-1, topic2-0, topic2-2"}, {})
    subs = {"consumer1": r.sub(both, 0, first["consumer1"], 1), "consumer2": r.sub(both, 1, first["consumer2"], 1),
            "consumer3": r.sub(both, 2, (), 1), "consumer4": r.sub(both, 3, (), 1)}
    second = r.check(ppt, subs, {"consumer1": "topic1-0, topic2-1", "consumer2": "topic1-1, topic2-0",
                                 "consumer3": "topic1-2, topic2-3", "consumer4": "topic2-2"},
                     {tp("topic1", 2): "consumer3", tp("topic2", 3): "consumer3", tp("topic2", 2): "consumer4"})
    subs = {"consumer3": r.sub(both, 2, second["consumer3"], 1), "consumer4": r.sub(both, 3, second["consumer4"], 1)}
    r.check(ppt, subs, {"consumer3": "topic1-0, topic1-2, topic2-1, topic2-3",
                        "consumer4": "topic1-1, topic2-0, topic2-2"}, {})


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_sticky_testTopicBalanceAfterReassignment(config):
    """Owned partitions are kept in partition order, so each topic stays balanced per member."""
    r = StickyRacks(config)
    ppt = {**r.topic("topic1", 12), **r.topic("topic2", 12)}
    both = ["topic1", "topic2"]
    subs = {"consumer1": r.sub(both, 0)}
    for members, per_topic in ((["consumer1", "consumer2"], 6), (["consumer1", "consumer2", "consumer3", "consumer4"], 3),
                               (["consumer3", "consumer4"], 6)):
        got, transferring = r.run(ppt, subs)
        if len(subs) == 1:
            assert got == {"consumer1": set(parse(", ".join(f"topic{t}-{p}" for t in (1, 2) for p in range(12))))}
        subs = {m: r.sub(both, int(m[-1]) - 1, got.get(m, ()), 1) for m in members}
        final_subs, final = cooperative_final(ppt, subs, r.partition_racks)
        for m, tps in final.items():
            assert [sum(1 for x in tps if x.topic == t) for t in both] == [per_topic, per_topic], (m, final)
        sticky = StickyAssignor(prefer_rack_aware_logic=True).assign(ppt, subs, r.partition_racks)
        for m, tps in sticky.items():
            assert [sum(1 for x in tps if x.topic == t) for t in both] == [per_topic, per_topic], (m, sticky)
        subs = {m: s._replace(owned_partitions=sticky[m]) for m, s in subs.items()}


@pytest.mark.parametrize("config", RACK_CONFIGS)
def test_cooperative_testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumersInSameGenerationWithEqualPartitionsPerConsumer(config):
    r = StickyRacks(config)
    ppt = r.topic("topic", 3)
    subs = {"consumer1": r.sub(["topic"], 0, parse("topic-0, topic-1"), 1),
            "consumer2": r.sub(["topic"], 1, parse("topic-0, topic-2"), 1), "consumer3": r.sub(["topic"], 2, (), 1)}
    out = CooperativeStickyAssignor(prefer_rack_aware_logic=True).assign(ppt, subs, r.partition_racks)
    assert out == {"consumer1": parse("topic-1"), "consumer2": parse("topic-2"), "consumer3": []}


# --------------------------------------------------------------------------- sticky: rack-aware cases

def verify_both_ways(assignor, topics, rf, broker_racks, consumer_racks, ct, expected, mismatches):
    """verifyUniformSubscription / verifyNonEqualSubscription: fresh, then re-run owning the result."""
    verify_rack_assignment(assignor, topics, rf, broker_racks, consumer_racks, ct, expected, mismatches)
    verify_rack_assignment(assignor, topics, rf, broker_racks, consumer_racks, ct, expected, mismatches, owned=expected)


UNIFORM_STICKY = ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"]
MISALIGNED_OWNED = ["t1-0, t1-1, t1-2, t1-3, t1-4", "t1-5, t2-0, t2-1, t2-2, t2-3", "t2-4, t2-5, t2-6, t3-0, t3-1"]


@pytest.mark.parametrize("cls", [StickyAssignor, CooperativeStickyAssignor], ids=["sticky", "cooperative"])
def test_sticky_testRackAwareAssignmentWithUniformSubscription(cls):
    topics = {"t1": 6, "t2": 7, "t3": 2}
    ct = [ALL3] * 3
    a, prefer = cls(), cls(prefer_rack_aware_logic=True)
    verify_both_ways(a, topics, 3, null_racks(3), racks(3), ct, UNIFORM_STICKY, -1)
    verify_both_ways(a, topics, 3, racks(3), null_racks(3), ct, UNIFORM_STICKY, -1)
    verify_both_ways(prefer, topics, 3, racks(3), racks(3), ct, UNIFORM_STICKY, 0)
    verify_both_ways(prefer, topics, 4, racks(4), racks(3), ct, UNIFORM_STICKY, 0)
    verify_both_ways(a, topics, 3, racks(3), racks(3), ct, UNIFORM_STICKY, 0)
    verify_both_ways(a, topics, 3, racks(3), ["d", "e", "f"], ct, UNIFORM_STICKY, -1)
    verify_both_ways(a, topics, 3, racks(3), [None, "e", "f"], ct, UNIFORM_STICKY, -1)
    # rack-aligned for lower replication factors
    verify_both_ways(a, topics, 1, racks(3), racks(3), ct, UNIFORM_STICKY, 0)
    verify_both_ways(a, topics, 2, racks(3), racks(3), ct, UNIFORM_STICKY, 0)
    # one consumer on a rack with no partitions: misaligned to keep the balance
    verify_both_ways(a, topics, 3, racks(2), racks(3), ct, UNIFORM_STICKY, 5)
    # misaligned owned partitions move to their racks; cooperative first revokes them (KAFKA-15170)
    if cls is CooperativeStickyAssignor:
        verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct, ["t1-0, t1-3", "t2-1", "t2-5, t3-1"], 0,
                               owned=MISALIGNED_OWNED)
    else:
        verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct, UNIFORM_STICKY, 0, owned=MISALIGNED_OWNED)
    # stickiness is kept when racks match
    verify_rack_assignment(prefer, topics, 3, racks(3), racks(3), ct, UNIFORM_STICKY, 0, owned=UNIFORM_STICKY)


@pytest.mark.parametrize("cls", [StickyAssignor, CooperativeStickyAssignor], ids=["sticky", "cooperative"])
def test_sticky_testRackAwareAssignmentWithNonEqualSubscription(cls):
    topics = {"t1": 6, "t2": 7, "t3": 2}
    ct = [ALL3, ALL3, ["t1", "t3"]]
    plain = ["t1-5, t2-0, t2-2, t2-4, t2-6", "t1-3, t2-1, t2-3, t2-5, t3-0", "t1-0, t1-1, t1-2, t1-4, t3-1"]
    a, prefer = cls(), cls(prefer_rack_aware_logic=True)
    verify_both_ways(a, topics, 3, null_racks(3), racks(3), ct, plain, -1)
    verify_both_ways(a, topics, 3, racks(3), null_racks(3), ct, plain, -1)
    verify_both_ways(prefer, topics, 3, racks(3), racks(3), ct, plain, 0)
    verify_both_ways(prefer, topics, 4, racks(4), racks(3), ct, plain, 0)
    verify_both_ways(a, topics, 3, racks(3), racks(3), ct, plain, 0)
    verify_both_ways(a, topics, 3, racks(3), ["d", "e", "f"], ct, plain, -1)
    verify_both_ways(a, topics, 3, racks(3), [None, "e", "f"], ct, plain, -1)
    # best effort: misalignments remain when the rack choices are few
    rf1 = ["t1-3, t2-0, t2-2, t2-3, t2-6", "t1-4, t2-1, t2-4, t2-5, t3-0", "t1-0, t1-1, t1-2, t1-5, t3-1"]
    verify_both_ways(a, topics, 1, racks(3), racks(3), ct, rf1, 4)
    verify_both_ways(a, topics, 2, racks(3), racks(3), ct, [
        "t1-3, t2-0, t2-2, t2-5, t2-6", "t1-0, t2-1, t2-3, t2-4, t3-0", "t1-1, t1-2, t1-4, t1-5, t3-1"], 0)
    verify_both_ways(a, topics, 3, racks(2), racks(3), ct, plain, 5)
    # misaligned owned partitions: alignment attempted, not guaranteed
    if cls is StickyAssignor:
        verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct, rf1, 4, owned=MISALIGNED_OWNED)
    else:
        intermediate = ["t1-3", "t2-1", "t3-1"]
        verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct, intermediate, 0, owned=MISALIGNED_OWNED)
        verify_rack_assignment(a, topics, 1, racks(3), racks(3), ct, rf1, 4, owned=intermediate)
    # every partition on every rack: the rack-unaware result (with or without the forced rack logic)
    if cls is StickyAssignor:
        expected = ["t1-2, t1-3, t1-4, t2-4, t2-6", "t2-0, t2-1, t2-2, t2-3, t2-5", "t1-0, t1-1, t1-5, t3-0, t3-1"]
        for assignor in (a, prefer):
            verify_rack_assignment(assignor, topics, 3, racks(3), racks(3), ct, expected, 0, owned=MISALIGNED_OWNED)
    else:
        intermediate = ["t1-2, t1-3, t1-4", "t2-0, t2-1, t2-2, t2-3", "t3-0, t3-1"]
        final = ["t1-2, t1-3, t1-4, t2-4, t2-5", "t2-0, t2-1, t2-2, t2-3, t2-6", "t1-0, t1-1, t1-5, t3-0, t3-1"]
        for assignor in (a, prefer):
            verify_rack_assignment(assignor, topics, 3, racks(3), racks(3), ct, intermediate, 0, owned=MISALIGNED_OWNED)
            verify_rack_assignment(assignor, topics, 3, racks(3), racks(3), ct, final, 0, owned=intermediate)


def test_sticky_rack_fix_KAFKA_15170_misaligned_owned_partition_is_transferring():
    """A partition its owner keeps only because racks were ignored must be revoked before it moves."""
    ppt = {"t": 2}
    subs = {"c0": S(["t"], owned_partitions=[tp("t", 0), tp("t", 1)], generation_id=1, rack_id="a"),
            "c1": S(["t"], owned_partitions=[], generation_id=1, rack_id="b")}
    partition_racks = {tp("t", 0): {"b"}, tp("t", 1): {"a"}}
    assignment, transferring = sticky_assign(ppt, subs, partition_racks)
    assert {m: fmt(v) for m, v in assignment.items()} == {"c0": "t-1", "c1": "t-0"}
    assert transferring == {tp("t", 0): "c1"}
    assert CooperativeStickyAssignor().assign(ppt, subs, partition_racks) == {"c0": [tp("t", 1)], "c1": []}


# --------------------------------------------------------------------------- properties

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOPICS = ["a", "b", "c"]
RACK_NAMES = ["r0", "r1", "r2", "r3"]
MEMBER_IDS = ["m0", "m1", "m2", "m3", "m4", "consumer-10", "Z"]
RACK_AWARE = ["range", "sticky", "cooperative-sticky"]


@st.composite
def racked_groups(draw, identical=None, with_history=True):
    """(ppt, subscriptions with racks, partition_racks)."""
    topics = TOPICS[:draw(st.integers(1, len(TOPICS)))]
    ppt = {t: draw(st.integers(0, 8)) for t in topics}
    members = draw(st.lists(st.sampled_from(MEMBER_IDS), min_size=1, max_size=6, unique=True))
    same = draw(st.booleans()) if identical is None else identical
    shared = draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
    all_tps = [tp(t, p) for t in topics for p in range(ppt[t])]
    subs = {}
    for m in members:
        mine = shared if same else draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
        owned, generation = [], -1
        if with_history and all_tps:
            owned = draw(st.lists(st.sampled_from(all_tps), unique=True, max_size=5))
            generation = draw(st.integers(-1, 3))
        rack = draw(st.one_of(st.none(), st.just(""), st.sampled_from(RACK_NAMES)))
        static = draw(st.one_of(st.none(), st.sampled_from(["i1", "i2", "i3"])))
        if static in {s.group_instance_id for s in subs.values()}:
            static = None
        subs[m] = S(list(mine), owned_partitions=owned, generation_id=generation, group_instance_id=static,
                    rack_id=rack)
    # some partitions are left out (no known rack), some have a None rack (a broker without rack)
    partition_racks = {x: set(draw(st.lists(st.sampled_from(RACK_NAMES + [None]), max_size=3)))
                       for x in all_tps if draw(st.integers(0, 4))}
    return ppt, subs, partition_racks


def cooperative_final(ppt, subs, partition_racks):
    return cooperative_rounds(ppt, subs, partition_racks, assignor=CooperativeStickyAssignor(prefer_rack_aware_logic=True))


def cooperative_rounds(ppt, subs, partition_racks, max_rounds=5, assignor=None):
    """Re-run cooperative-sticky on its own output until nothing is withheld; check each round."""
    assignor = assignor or CooperativeStickyAssignor()
    current, generation = subs, max([s.generation_id for s in subs.values()] + [0]) + 1
    assignment = assignor.assign(ppt, current, partition_racks)
    for _ in range(max_rounds):
        added, revoked = set(), set()
        for m, s in current.items():
            added |= set(assignment[m]) - set(s.owned_partitions)
            revoked |= set(s.owned_partitions) - set(assignment[m])
        assert not (added & revoked), ("a partition is revoked and reassigned in one round", added & revoked)
        check_assignment("cooperative-sticky", ppt, current, assignment, complete=False)
        if not revoked:
            return current, assignment
        current = {m: s._replace(owned_partitions=list(assignment[m]), generation_id=generation)
                   for m, s in current.items()}
        generation += 1
        assignment = assignor.assign(ppt, current, partition_racks)
    raise AssertionError(f"still revoking after {max_rounds} rounds")


@SETTINGS
@given(racked_groups())
def test_with_racks_every_partition_is_assigned_exactly_once(group):
    ppt, subs, partition_racks = group
    for name in ("range", "sticky"):
        check_assignment(name, ppt, subs, get_assignor(name).assign(ppt, subs, partition_racks), complete=True)
    final_subs, final = cooperative_rounds(ppt, subs, partition_racks)
    check_assignment("cooperative-sticky", ppt, final_subs, final, complete=True)


@SETTINGS
@given(racked_groups())
def test_without_partition_racks_or_member_racks_the_result_is_rack_unaware(group):
    """No partition racks (None or {}), or no member rack: exactly the rack-unaware result."""
    ppt, subs, partition_racks = group
    no_member_racks = {m: s._replace(rack_id=None) for m, s in subs.items()}
    for name in RACK_AWARE:
        assignor = get_assignor(name)
        plain = assignor.assign(ppt, subs)
        assert assignor.assign(ppt, subs, None) == plain
        assert assignor.assign(ppt, subs, {}) == plain
        assert assignor.assign(ppt, no_member_racks, partition_racks) == assignor.assign(ppt, no_member_racks)


@SETTINGS
@given(racked_groups(), st.sampled_from([["r0"], ["r0", "r1"], RACK_NAMES]))
def test_every_partition_on_every_rack_gives_the_rack_unaware_result(group, everywhere):
    """Kafka uses rack-aware logic only if some partition lacks a replica on some rack."""
    ppt, subs, _ = group
    partition_racks = {tp(t, p): set(everywhere) for t, n in ppt.items() for p in range(n)}
    for name in RACK_AWARE:
        assignor = get_assignor(name)
        assert assignor.assign(ppt, subs, partition_racks) == assignor.assign(ppt, subs), name


@SETTINGS
@given(racked_groups(), st.data())
def test_a_replica_on_every_members_rack_gives_the_rack_unaware_result(group, data):
    """Every member has a rack and each partition has a replica on every member's rack (its other
    replicas vary, so Kafka does run the rack-aware code): the result is the rack-unaware one.
    Kafka's RackConfig tests rely on this.  It needs every member to have a rack: see
    test_a_member_without_rack_can_change_the_result_even_when_every_rack_has_every_partition."""
    ppt, subs, _ = group
    subs = {m: s._replace(rack_id=s.rack_id or RACK_NAMES[i % 2]) for i, (m, s) in enumerate(subs.items())}
    member_racks = {s.rack_id for s in subs.values()}
    partition_racks = {tp(t, p): member_racks | set(data.draw(st.lists(st.sampled_from(RACK_NAMES + ["x"]))))
                       for t, n in ppt.items() for p in range(n)}
    for name in RACK_AWARE:
        assignor = get_assignor(name)
        assert assignor.assign(ppt, subs, partition_racks) == assignor.assign(ppt, subs), name


def test_a_member_without_rack_can_change_the_result_even_when_every_rack_has_every_partition():
    """Not a guarantee of Kafka's: here every partition has a replica on the only member rack (r1), but
    partition racks differ (c-2 is also on r0), so the rack-aware pass runs, and Kafka's
    nextRackConsumer skips members without a rack: m2 (r1) takes c-0 first, the others c-1, c-2."""
    ppt = {"c": 3}
    subs = {"m0": S(["c"]), "m1": S(["c"]), "m2": S(["c"], rack_id="r1")}
    partition_racks = {tp("c", 0): {"r1"}, tp("c", 1): {"r1"}, tp("c", 2): {"r1", "r0"}}
    assert StickyAssignor().assign(ppt, subs) == {"m0": [tp("c", 0)], "m1": [tp("c", 1)], "m2": [tp("c", 2)]}
    assert StickyAssignor().assign(ppt, subs, partition_racks) == {
        "m0": [tp("c", 1)], "m1": [tp("c", 2)], "m2": [tp("c", 0)]}


@SETTINGS
@given(racked_groups(with_history=False), st.sampled_from([["r0", "r1"], RACK_NAMES]))
def test_forced_rack_logic_with_every_partition_on_every_rack_changes_nothing(group, everywhere):
    """What Kafka's RackConfig tests rely on: preferRackAwareLogic with all partitions on all racks
    (and every member on one of them) gives the rack-unaware assignment."""
    ppt, subs, _ = group
    subs = {m: s._replace(rack_id=everywhere[i % len(everywhere)]) for i, (m, s) in enumerate(subs.items())}
    partition_racks = {tp(t, p): set(everywhere) for t, n in ppt.items() for p in range(n)}
    for cls in (RangeAssignor, StickyAssignor, CooperativeStickyAssignor):
        assert cls(prefer_rack_aware_logic=True).assign(ppt, subs, partition_racks) == cls().assign(ppt, subs)


@SETTINGS
@given(racked_groups())
def test_rack_awareness_keeps_kafkas_balance_guarantees(group):
    ppt, subs, partition_racks = group
    out = RangeAssignor().assign(ppt, subs, partition_racks)
    for topic in ppt:
        per = [sum(1 for x in out[m] if x.topic == topic) for m in subs if topic in subs[m].topics]
        if per:
            assert max(per) - min(per) <= 1
    if len({frozenset(s.topics) for s in subs.values()}) == 1:
        counts = sorted(len(v) for v in StickyAssignor().assign(ppt, subs, partition_racks).values())
        assert counts[-1] - counts[0] <= 1


@SETTINGS
@given(racked_groups())
def test_rack_aware_assignors_are_pure(group):
    ppt, subs, partition_racks = group
    before = copy.deepcopy((ppt, subs, partition_racks))
    for name in RACK_AWARE:
        a = get_assignor(name).assign(ppt, subs, partition_racks)
        assert get_assignor(name).assign(dict(ppt), dict(subs), dict(partition_racks)) == a
        assert all(v == sorted(v) for v in a.values())
    assert (ppt, subs, partition_racks) == before
