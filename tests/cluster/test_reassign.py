"""Adding a broker moves nothing; reassignment copies at the throttle and keeps every record readable."""

from __future__ import annotations

import math
import os

import pytest

from kafkasim.broker.reassign import skew_of
from kafkasim.errors import InvalidReplicaAssignmentError, UnknownTopicOrPartitionError
from kafkasim.types import TopicPartition


def _fill(cluster, topic: str, partitions: int, n: int) -> dict[int, list[bytes]]:
    keys = {}
    for p in range(partitions):
        keys[p] = [b"%d-%d" % (p, i) for i in range(n)]
        for k in keys[p]:
            cluster.append_records(topic, p, [(1000, k, b"x" * 200, ())])
    return keys


def test_add_broker_then_reassign_moves_data_at_the_throttle_and_loses_nothing(cluster, clock, tmp_path):
    cluster.create_topic("t", 9, 2)
    keys = _fill(cluster, "t", 9, 30)
    before = cluster.assignment()
    cluster.add_broker(3, "r1")
    assert cluster.assignment() == before                               # a new broker sits idle
    d = cluster.describe_cluster()
    assert d["brokers"][3]["replicas"] == 0 and d["skew"]["replicas"]["ratio"] == math.inf
    # move one replica of partitions 0..2 to broker 3, and make 3 lead partition 0
    target = {tp: list(r) for tp, r in before.items() if tp.partition < 3}
    for tp, r in target.items():
        r[-1] = 3
    leader0 = cluster.leader_for("t", 0)
    target[TopicPartition("t", 0)] = [3] + [b for b in before[TopicPartition("t", 0)] if b != leader0]
    t0 = clock.now_ms()
    res = cluster.reassign(target, throttle_bytes_per_s=10_000)
    assert res["replicas_added"] == 3 and sorted(res["partitions"]) == ["t-0", "t-1", "t-2"]
    sizes = sum(cluster._partitions[tp].log.size_in_bytes for tp in target)
    assert res["bytes_moved"] == sizes
    assert clock.now_ms() - t0 == pytest.approx(res["bytes_moved"] / 10, abs=3) == res["time_ms"]
    assert cluster.verify(target)["complete"]
    assert cluster.leader_for("t", 0) != leader0          # leadership left the removed replica
    for tp, r in target.items():
        removed = set(before[tp]) - set(r)
        assert all(not os.path.exists(cluster._partition_path(b, *tp)) for b in removed)
    for p in range(9):
        assert [r.key for r in cluster.fetch("t", p, 0).records] == keys[p]
    # and each new replica serves its copy (KIP-392 reads)
    assert [r.key for r in cluster.fetch("t", 1, 0, node=3).records] == keys[1]
    assert cluster.describe_cluster()["brokers"][3]["replicas"] == 3
    cluster.close()
    from kafkasim.broker.cluster import Cluster
    with Cluster(tmp_path / "data", clock=clock) as again:              # the new layout survives a restart
        assert again.assignment() == {**before, **target}
        assert [r.key for r in again.fetch("t", 0, 0).records] == keys[0]


def test_reassign_refuses_bad_plans_before_moving_anything(cluster):
    cluster.create_topic("t", 1, 3)
    before = cluster.assignment()
    with pytest.raises(InvalidReplicaAssignmentError, match="broker 7 is not in the cluster"):
        cluster.reassign({("t", 0): [0, 7]})
    with pytest.raises(InvalidReplicaAssignmentError, match="distinct"):
        cluster.reassign({("t", 0): [0, 0]})
    with pytest.raises(UnknownTopicOrPartitionError, match="no such"):
        cluster.reassign({("nope", 0): [0]})
    cluster.add_broker(3)
    cluster.stop_broker(3)
    with pytest.raises(InvalidReplicaAssignmentError, match=r"target broker\(s\) \[3\] are not alive"):
        cluster.reassign({("t", 0): [3, 0, 1]})
    assert cluster.assignment() == before


def test_preferred_leader_election_gives_leadership_back(cluster):
    cluster.create_topic("t", 3, 3)
    preferred = {tp: r[0] for tp, r in cluster.assignment().items()}
    cluster.stop_broker(0)
    cluster.start_broker(0)
    moved = [tp for tp, b in preferred.items() if cluster.leader_for(*tp) != b]
    assert moved                                             # broker 0 lost what it led
    assert sorted(cluster.elect_leaders()) == sorted(str(tp) for tp in moved)
    assert all(cluster.leader_for(*tp) == b for tp, b in preferred.items())
    assert cluster.elect_leaders() == []


def test_skew_is_max_over_min_flagged_above_1_3():
    assert skew_of({0: 4, 1: 3, 2: 3}) == {"max": 4, "min": 3, "ratio": 4 / 3, "flagged": True}
    assert skew_of({0: 13, 1: 10})["flagged"] is False
    assert skew_of({0: 3, 1: 0})["ratio"] == math.inf
