"""kafkasim.placement.skew (per-broker replicas/leaders/bytes and max/min ratios flagged
above 1.3) and kafkasim.placement.fixed_partitions (keys moved when nodes are added:
Fixed Partitions against hash mod N)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkasim.errors import InvalidArgumentError, InvalidPartitionsError
from kafkasim.partitioning.hashing import murmur2
from kafkasim.placement.admin_utils import BrokerMetadata, assign_replicas_to_brokers
from kafkasim.placement.fixed_partitions import compare_remapping, partition_owners
from kafkasim.placement.reassign import plan_reassignment
from kafkasim.placement.skew import SKEW_THRESHOLD, broker_skew, max_min_ratio
from kafkasim.types import TopicPartition as TP


def kafka_hash(key: bytes) -> int:
    return murmur2(key) & 0x7FFFFFFF


def seed_cluster():
    placed = assign_replicas_to_brokers([BrokerMetadata(b) for b in range(3)], 9, 3, 0)
    return {TP("orders", p): r for p, r in placed.items()}


def test_an_added_broker_is_idle_and_flagged_until_reassigned():
    current = seed_cluster()
    report = broker_skew(current, brokers=[0, 1, 2, 3])
    assert [(b.broker, b.replicas, b.leaders) for b in report.brokers] == [(0, 9, 3), (1, 9, 3), (2, 9, 3), (3, 0, 0)]
    assert math.isinf(report.replicas_ratio) and report.idle == (3,) and report.skewed
    assert report.as_dict()["ratios"]["replicas"] == "inf"
    after = broker_skew(plan_reassignment(current, {b: None for b in range(4)}), brokers=range(4))
    assert after.replicas_ratio == pytest.approx(7 / 6) and after.leaders_ratio == 1.5
    assert after.flagged == {"replicas": False, "leaders": True} and after.idle == ()


def test_bytes_count_on_every_replica_and_leaders_can_be_given():
    assignment = {TP("t", 0): [0, 1], TP("t", 1): [1, 2], TP("t", 2): [2, 0]}
    report = broker_skew(assignment, leaders={TP("t", 0): 1, TP("t", 1): 1, TP("t", 2): None},
                         partition_bytes={TP("t", 0): 100, TP("t", 1): 10, TP("t", 2): 10})
    assert [(b.leaders, b.bytes) for b in report.brokers] == [(0, 110), (2, 110), (0, 20)]
    assert report.bytes_ratio == 5.5 and math.isinf(report.leaders_ratio)
    assert report.flagged == {"replicas": False, "leaders": True, "bytes": True}


def test_threshold_is_kafka_ops_rule_of_thumb_and_ratio_edges():
    assert SKEW_THRESHOLD == 1.3
    assert max_min_ratio([13, 10]) == 1.3 and max_min_ratio([0, 0]) == 1.0 and max_min_ratio([]) == 1.0
    thirteen_to_ten = {TP("t", p): [0 if p < 13 else 1] for p in range(23)}
    assert broker_skew(thirteen_to_ten).replicas_ratio == 1.3
    assert not broker_skew(thirteen_to_ten).flagged["replicas"]  # flagged strictly above 1.3
    fourteen_to_ten = {TP("t", p): [0 if p < 14 else 1] for p in range(24)}
    assert broker_skew(fourteen_to_ten).flagged["replicas"]


def test_skew_errors_name_the_bad_value():
    with pytest.raises(InvalidArgumentError, match="broker 7"):
        broker_skew({TP("t", 0): [7]}, brokers=[0, 1])
    with pytest.raises(InvalidArgumentError, match="t-0: bytes must be >= 0, got -1"):
        broker_skew({TP("t", 0): [0]}, partition_bytes={TP("t", 0): -1})


def test_three_to_five_nodes_seed_example():
    keys = [f"user-{i}".encode() for i in range(6000)]
    report = compare_remapping(keys, 60, 3, 5, kafka_hash)
    assert report.partitions_moved == 24  # exactly 2/5 of the partitions
    assert report.fixed_keys_fraction <= 0.45
    assert report.modn_keys_fraction >= 0.75  # 12 of every 15 hash values change node
    before, after = partition_owners(60, 3, 5)
    assert report.fixed_keys_moved == sum(1 for k in keys if before[kafka_hash(k) % 60] != after[kafka_hash(k) % 60])


def test_bytes_follow_their_keys():
    keys = [b"a", b"b", b"c", b"d"]
    sizes = [1000, 1, 1, 1]
    report = compare_remapping(keys, 8, 2, 3, kafka_hash, sizes)
    moved_big = report.modn_bytes_moved >= 1000
    assert moved_big == (kafka_hash(b"a") % 2 != kafka_hash(b"a") % 3)
    assert report.bytes == 1003


def test_fixed_partitions_errors():
    with pytest.raises(InvalidPartitionsError):
        compare_remapping([b"a"], 0, 3, 5, kafka_hash)
    with pytest.raises(InvalidArgumentError, match="nodes after must be > 0, got 0"):
        compare_remapping([b"a"], 6, 3, 0, kafka_hash)
    with pytest.raises(InvalidArgumentError, match=r"keys\[1\] is null"):
        compare_remapping([b"a", None], 6, 3, 5, kafka_hash)
    with pytest.raises(InvalidArgumentError, match="sizes: 1 values for 2 keys"):
        compare_remapping([b"a", b"b"], 6, 3, 5, kafka_hash, [1])


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 64), before=st.integers(1, 8), grow=st.integers(0, 4))
def test_fixed_partitions_move_only_what_balance_needs(p, before, grow):
    after = before + grow
    owners_before, owners_after = partition_owners(p, before, after)
    counts = [sum(1 for o in owners_after.values() if o == n) for n in range(after)]
    assert max(counts) - min(counts) <= 1
    moved = sum(1 for q in owners_before if owners_before[q] != owners_after[q])
    have = [sum(1 for o in owners_before.values() if o == n) for n in range(after)]
    lo, k = divmod(p, after)
    kept = sum(min(h, lo) for h in have) + (min(k, sum(1 for h in have if h > lo)) if k else 0)
    assert moved == p - kept  # the fewest moves that balance the nodes
    if grow == 0:
        assert moved == 0  # round robin is already balanced
