"""kafkasim.placement.striped reproduces Kafka's StripedReplicaPlacer: every case of Kafka's
StripedReplicaPlacerTest (same MockRandom, same expected placements and messages), and the
Java random sources it depends on."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasim.errors import InvalidPartitionsError, InvalidReplicationFactorError
from kafkasim.placement.java_random import JavaRandom, MockRandom
from kafkasim.placement.striped import (
    BrokerList, RackList, UsableBroker as B, java_hashmap_order, previous_broker_offset,
    previous_rack_offset, striped_place,
)


def test_java_random_matches_the_jvm():
    # new Random(42).nextInt() and new Random(0).nextInt(100), as any JVM prints them
    assert JavaRandom(42).next(32) == -1170105035
    assert JavaRandom(0).next_int(100) == 60
    items = list(range(10))
    JavaRandom(1).shuffle(items)
    assert sorted(items) == list(range(10)) and items != list(range(10))


def test_broker_list():
    assert BrokerList().next(1) == -1
    brokers = BrokerList([0, 1, 2, 3])
    assert [brokers.next(0) for _ in range(6)] == [0, 1, 2, 3, -1, -1]
    assert [brokers.next(1) for _ in range(5)] == [1, 2, 3, 0, -1]


def test_avoid_fenced_replica_if_possible_on_single_rack():
    rack_list = RackList(MockRandom(), [B(3), B(1, None, True), B(0), B(4), B(2)])
    assert (rack_list.num_total_brokers, rack_list.num_unfenced_brokers) == (5, 4)
    assert rack_list.rack_names == [None]
    for bad in (0, -1):
        with pytest.raises(InvalidReplicationFactorError):
            rack_list.place(bad)
    assert [rack_list.place(4) for _ in range(5)] == [
        [3, 4, 0, 2], [4, 0, 2, 3], [0, 2, 3, 4], [2, 3, 4, 0], [0, 4, 3, 2]]


def test_multi_partition_topic_on_single_unfenced_broker():
    assert striped_place([B(0), B(1, None, True)], 3, 1, rng=MockRandom()) == {0: [0], 1: [0], 2: [0]}


def test_placement_on_fenced_replica_on_single_rack():
    rack_list = RackList(MockRandom(), [B(3), B(1, None, True), B(2)])
    assert (rack_list.num_total_brokers, rack_list.num_unfenced_brokers) == (3, 2)
    assert [rack_list.place(3) for _ in range(4)] == [[3, 2, 1], [2, 3, 1], [3, 2, 1], [2, 3, 1]]


def test_rack_list_with_multiple_racks():
    rack_list = RackList(MockRandom(), [B(11, "1"), B(10, "1"), B(30, "3"), B(31, "3"),
                                        B(21, "2"), B(20, "2", True)])
    assert (rack_list.num_total_brokers, rack_list.num_unfenced_brokers) == (6, 5)
    assert rack_list.rack_names == ["1", "2", "3"]
    assert [rack_list.place(4) for _ in range(3)] == [[11, 21, 31, 10], [21, 30, 10, 20], [31, 11, 21, 30]]


def test_rack_list_with_invalid_racks():
    rack_list = RackList(MockRandom(), [B(11, "1"), B(10, "1"), B(30, "3", True), B(31, "3", True),
                                        B(20, "2", True), B(21, "2", True), B(41, "4"), B(40, "4", True)])
    assert (rack_list.num_total_brokers, rack_list.num_unfenced_brokers) == (8, 3)
    assert rack_list.rack_names == ["1", "2", "3", "4"]
    assert [rack_list.place(4) for _ in range(3)] == [[41, 11, 21, 30], [10, 20, 31, 41], [41, 21, 30, 11]]


def test_place_shifts_initial_offsets_rack_unaware():
    brokers = [B(i) for i in range(12)]
    first = striped_place(brokers, 2, 3, rng=MockRandom())
    assert list(first.values()) == [[7, 8, 9], [8, 9, 10]]
    existing = list(first.values())
    two = striped_place(brokers, 2, 3, existing, rng=MockRandom())
    assert two == {2: [9, 10, 11], 3: [10, 11, 0]}
    four = striped_place(brokers, 4, 3, existing + list(two.values()), rng=MockRandom(), start_partition=2)
    assert list(four.values()) == [[11, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4]]


def test_place_shifts_initial_offsets_rack_aware():
    brokers = [B(i, str(1 + i // 4)) for i in range(12)]
    first = list(striped_place(brokers, 2, 3, rng=MockRandom()).values())
    assert first == [[6, 8, 2], [9, 3, 7]]
    more = list(striped_place(brokers, 2, 3, first, rng=MockRandom()).values())
    assert more == [[0, 4, 10], [5, 11, 1]]
    assert {b for r in first + more for b in r} == set(range(12))


def test_place_shifts_initial_offsets_rack_aware_and_uses_unused_racks():
    brokers = [B(i, str(i + 1)) for i in range(4)]
    placed = list(striped_place(brokers, 1, 2, rng=MockRandom()).values())
    assert placed == [[0, 1]]
    for expected in ([1, 2], [2, 3], [3, 0]):
        placed = list(striped_place(brokers, 1, 2, placed, rng=MockRandom()).values())
        assert placed == [expected]


RACK_OF = {i: str(1 + i // 4) for i in range(12)}


@pytest.mark.parametrize("existing, rack, unfenced, expected", [
    ([], "1", [0, 1, 2, 3], None),
    ([[0, 1, 2], [1, 2, 0]], "1", [0, 1, 2, 3], 1),
    ([[0, 1, 2], [1, 2, 0]], "1", [], None),                       # those brokers are fenced
    ([[0, 1, 2], [1, 2, 0], [4, 5, 6], [5, 6, 7]], "1", [0, 1, 2, 3], 1),
    ([[4, 5, 1]], "1", [0, 1, 2, 3], 1),                           # not the first replica
    ([[1, 2, 0], [0, 5, 6], [0, 1, 2]], "2", [4, 5, 6, 7], 1),
    ([[0, 1, 2], [1, 2, 0], [4, 5, 6], [5, 6, 7]], "3", [8, 9, 10, 11], None),
])
def test_try_get_previous_broker_offset(existing, rack, unfenced, expected):
    assert previous_broker_offset(RACK_OF, existing, rack, unfenced) == expected


def test_try_get_previous_rack_offset():
    racks = ["1", "2", "3"]
    assert previous_rack_offset(RACK_OF, [], racks) is None
    assert previous_rack_offset(RACK_OF, [[6, 8, 2], [9, 3, 7]], [None]) is None
    assert previous_rack_offset(RACK_OF, [[6, 8, 2], [9, 3, 7]], racks) == 2
    assert previous_rack_offset({}, [[6, 8, 2], [9, 3, 7]], racks) is None


def test_kafkas_error_messages():
    fenced = [B(11, "1", True), B(10, "1", True)]
    two = [B(11, "1"), B(10, "1")]
    with pytest.raises(InvalidReplicationFactorError, match=r"^All brokers are currently fenced\.$"):
        striped_place(fenced, 1, 1, rng=MockRandom())
    with pytest.raises(InvalidReplicationFactorError, match=r"^All brokers are currently fenced\.$"):
        RackList(MockRandom(), [B(0, None, True), B(1, None, True), B(2, None, True)]).place(3)
    too_few = r"^The target replication factor of 3 cannot be reached because only 2 broker\(s\) are registered\.$"
    with pytest.raises(InvalidReplicationFactorError, match=too_few):
        striped_place(two, 1, 3, rng=MockRandom())
    with pytest.raises(InvalidReplicationFactorError, match=too_few):
        RackList(MockRandom(), two).place(3)
    with pytest.raises(InvalidReplicationFactorError,
                       match=r"^Invalid replication factor 0: the replication factor must be positive\.$"):
        striped_place(two, 1, 0, rng=MockRandom())
    with pytest.raises(InvalidReplicationFactorError, match="Invalid replication factor -1"):
        RackList(MockRandom(), two).place(-1)
    with pytest.raises(InvalidPartitionsError, match="non-positive"):
        striped_place(two, 0, 1)


def test_successful_placement():
    assert striped_place([B(0), B(3), B(2), B(1)], 5, 3, rng=MockRandom()) == {
        0: [2, 3, 0], 1: [3, 0, 1], 2: [0, 1, 2], 3: [1, 2, 3], 4: [1, 0, 2]}


def test_even_distribution():
    placed = striped_place([B(i) for i in range(4)], 200, 2, rng=MockRandom())
    counts = Counter(tuple(r) for r in placed.values())
    assert counts == {(0, 1): 14, (0, 2): 22, (0, 3): 14, (1, 0): 17, (1, 2): 17, (1, 3): 16,
                      (2, 0): 13, (2, 1): 17, (2, 3): 20, (3, 0): 20, (3, 1): 19, (3, 2): 11}


def test_java_hashmap_order_follows_buckets_not_names():
    # "1".."4" hash to buckets 1..4; "a" (97) to bucket 1 and "q" (113) to bucket 1 too
    assert java_hashmap_order(["3", "1", None, "2"]) == [None, "1", "2", "3"]
    assert java_hashmap_order(["q", "a"]) == ["q", "a"]


@settings(max_examples=60, deadline=None)
@given(n_racks=st.integers(1, 4), per_rack=st.integers(1, 3), rf=st.integers(1, 4),
       n_partitions=st.integers(1, 30), seed=st.integers(0, 2**31))
def test_striped_spreads_over_racks_and_never_repeats_a_broker(n_racks, per_rack, rf, n_partitions, seed):
    brokers = [B(r * 10 + i, f"r{r}") for r in range(n_racks) for i in range(per_rack)]
    if rf > len(brokers):
        with pytest.raises(InvalidReplicationFactorError):
            striped_place(brokers, n_partitions, rf, rng=JavaRandom(seed))
        return
    placed = striped_place(brokers, n_partitions, rf, rng=JavaRandom(seed))
    for replicas in placed.values():
        assert len(set(replicas)) == rf
        assert len({b // 10 for b in replicas}) == min(rf, n_racks)


@settings(max_examples=60, deadline=None)
@given(fenced=st.lists(st.booleans(), min_size=1, max_size=8), rf=st.integers(1, 4),
       n_partitions=st.integers(1, 20), seed=st.integers(0, 2**31))
def test_a_fenced_broker_never_leads_and_is_used_only_when_needed(fenced, rf, n_partitions, seed):
    brokers = [B(i, None, f) for i, f in enumerate(fenced)]
    if all(fenced) or rf > len(brokers):
        with pytest.raises(InvalidReplicationFactorError):
            striped_place(brokers, n_partitions, rf, rng=JavaRandom(seed))
        return
    unfenced = {b.id for b in brokers if not b.fenced}
    for replicas in striped_place(brokers, n_partitions, rf, rng=JavaRandom(seed)).values():
        assert replicas[0] in unfenced and len(set(replicas)) == rf
        assert len(set(replicas) & unfenced) == min(rf, len(unfenced))
