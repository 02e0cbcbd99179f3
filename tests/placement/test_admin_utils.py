"""kafkasim.placement.admin_utils reproduces Kafka's AdminUtils.assignReplicasToBrokers:
the documented examples, the cases of Kafka's AdminRackAwareTest, and its distribution
properties for any input (hypothesis)."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafkasim.cli as cli
from kafkasim.errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError
from kafkasim.placement.admin_utils import (
    BrokerMetadata, assign_replicas_to_brokers, rack_alternated_broker_list,
)


def metas(rack_map):
    return [BrokerMetadata(b, r) for b, r in sorted(rack_map.items())]


def check_distribution(assignment, rack_map, n_brokers, n_partitions, rf,
                       rack_aware=True, leaders=True, replicas=True):
    """Kafka's RackAwareTest.checkReplicaDistribution."""
    for brokers in assignment.values():
        assert len(set(brokers)) == len(brokers)
    if rack_aware:
        assert [len({rack_map[b] for b in r}) for r in assignment.values()] == [rf] * n_partitions
    if leaders:
        count = Counter(r[0] for r in assignment.values())
        assert [count[b] for b in rack_map] == [n_partitions // n_brokers] * n_brokers
    if replicas:
        count = Counter(b for r in assignment.values() for b in r)
        assert [count[b] for b in rack_map] == [n_partitions * rf // n_brokers] * n_brokers


COURSE = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_list_and_the_documented_rack_aware_example():
    assert rack_alternated_broker_list(COURSE) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({k: v for k, v in COURSE.items() if k != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas_to_brokers(metas(COURSE), 7, 3, 0, 0) == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2]}


def test_the_documented_rack_unaware_example():
    assert assign_replicas_to_brokers([BrokerMetadata(b) for b in range(5)], 10, 3, 0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_kafkas_errors():
    five = [BrokerMetadata(b) for b in range(5)]
    with pytest.raises(InvalidReplicationFactorError, match="Replication factor must be larger than 0."):
        assign_replicas_to_brokers(five, 10, 0)
    with pytest.raises(InvalidReplicationFactorError, match="Replication factor: 6 larger than available brokers: 5."):
        assign_replicas_to_brokers(five, 10, 6)
    with pytest.raises(InvalidPartitionsError, match="Number of partitions must be larger than 0."):
        assign_replicas_to_brokers(five, 0, 3)
    with pytest.raises(InvalidReplicaAssignmentError, match="Not all brokers have rack information"):
        assign_replicas_to_brokers([BrokerMetadata(0, "a"), BrokerMetadata(1)], 2, 1)


SIX = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


@pytest.mark.parametrize("case", [
    # (rack map, partitions, rf, fixed start, start partition, rack_aware, leaders, replicas) from AdminRackAwareTest
    (SIX, 6, 3, 2, -1, True, True, True),                       # testAssignmentWithRackAware
    (SIX, 6, 3, -1, -1, True, True, True),                      # ...WithRandomStartIndex
    (SIX, 13, 3, 0, 0, True, False, False),                     # ...WithUnevenReplicas
    ({0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 3, -1, -1, True, True, False),
    (SIX, 12, 2, -1, -1, True, True, True),                     # testAssignmentWith2ReplicasRackAware
    ({6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}, 12, 2, -1, 12, True, True, True),
    (SIX, 6, 2, -1, -1, True, True, True),                      # ...With6Partitions
    ({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, -1, -1, True, True, True),
    ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1", 6: "rack1", 7: "rack2",
      8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"}, 96, 3, -1, -1, True, True, True),   # large
    ({0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}, 6, 4, 2, -1, False, False, False),  # skip broker already assigned
])
@pytest.mark.parametrize("seed", range(5))
def test_kafkas_rack_aware_distribution_cases(case, seed):
    racks, n, rf, start, first_partition, aware, leaders, replicas = case
    assignment = assign_replicas_to_brokers(metas(racks), n, rf, start, first_partition, rng=random.Random(seed))
    check_distribution(assignment, racks, len(racks), n, rf, aware, leaders, replicas)


def test_more_or_fewer_replicas_than_racks_and_a_single_rack():
    more = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    a = assign_replicas_to_brokers(metas(more), 6, 5)
    assert all(len(r) == 5 and len({more[b] for b in r}) == 3 for r in a.values())
    a = assign_replicas_to_brokers(metas(more), 6, 2)
    assert all(len(r) == 2 and len({more[b] for b in r}) == 2 for r in a.values())
    single = {b: "rack1" for b in range(6)}
    a = assign_replicas_to_brokers(metas(single), 6, 3)
    assert all(len({single[b] for b in r}) == 1 for r in a.values())
    assert Counter(r[0] for r in a.values()) == {b: 1 for b in range(6)}


@settings(max_examples=200, deadline=None)
@given(n_racks=st.integers(1, 4), per_rack=st.integers(1, 4), rf=st.integers(1, 6), rounds=st.integers(1, 5),
       seed=st.integers(0, 10**6))
def test_properties_with_racks(n_racks, per_rack, rf, rounds, seed):
    racks = {r * per_rack + i: f"rack{r}" for r in range(n_racks) for i in range(per_rack)}
    n = len(racks)
    if rf > n:
        return
    parts = rounds * n
    a = assign_replicas_to_brokers(metas(racks), parts, rf, rng=random.Random(seed))
    assert sorted(a) == list(range(parts))
    for r in a.values():
        assert len(set(r)) == rf and len({racks[b] for b in r}) == min(rf, n_racks)   # spans min(RF, racks)
    leaders = Counter(r[0] for r in a.values())
    assert max(leaders.values()) - min(leaders[b] for b in racks) <= 1                  # leaders are spread
    replicas = Counter(b for r in a.values() for b in r)
    if rf <= n_racks or rf % n_racks == 0:                                              # even racks: even replicas
        assert max(replicas.values()) - min(replicas[b] for b in racks) <= 1


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 12), rf=st.integers(1, 12), parts=st.integers(1, 60), seed=st.integers(0, 10**6))
def test_properties_without_racks(n, rf, parts, seed):
    if rf > n:
        return
    a = assign_replicas_to_brokers([BrokerMetadata(b) for b in range(n)], parts, rf, rng=random.Random(seed))
    assert all(len(set(r)) == rf for r in a.values())
    leaders = Counter(r[0] for r in a.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in range(n)) <= 1
    if parts * rf % n == 0 and parts % n == 0:
        replicas = Counter(b for r in a.values() for b in r)
        assert set(replicas.values()) == {parts * rf // n}


def test_the_calculator_cli(capsys):
    rc = cli.main(["replicas", "--brokers", "0:rack1,1:rack3,2:rack3,3:rack2,4:rack2,5:rack1", "--partitions", "7",
                   "--replication-factor", "3", "--start-index", "0", "--json"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out) == {"assignment": {
        "0": [0, 3, 1], "1": [3, 1, 5], "2": [1, 5, 4], "3": [5, 4, 2], "4": [4, 2, 0], "5": [2, 0, 3], "6": [0, 4, 2]}}
    assert cli.main(["replicas", "--brokers", "0,1,2,3,4", "--partitions", "10", "--replication-factor", "3",
                     "--start-index", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["PARTITION", "REPLICAS", "RACKS"] and out[6].split() == ["5", "0,2,3", "-"]
    assert cli.main(["replicas", "--brokers", "0,1,2", "--partitions", "3", "--replication-factor", "4"]) == 1
    assert "replication factor: 4 larger than available brokers: 3" in capsys.readouterr().err.lower()
    assert cli.main(["replicas", "--brokers", "0:a,1", "--partitions", "3", "--replication-factor", "1"]) == 1
    assert "Not all brokers have rack information" in capsys.readouterr().err
    assert cli.main(["replicas", "--brokers", "0,x", "--partitions", "3", "--replication-factor", "1"]) == 1
    assert "broker 'x'" in capsys.readouterr().err
