"""Replication in a 3-broker cluster: placement, ISR, high watermark, acks, min.insync.replicas."""

from __future__ import annotations

import pytest

from kafkasim.broker.cluster import Cluster
from kafkasim.errors import (
    InvalidReplicationFactorError, KafkaStorageError, LeaderNotAvailableError, NetworkError,
    NotEnoughReplicasAfterAppendError, NotEnoughReplicasError, NotLeaderOrFollowerError,
)
from kafkasim.records.record_batch import encode_batch

from tests.cluster.conftest import RACKS3, records_of


def _batch(*keys: bytes) -> bytes:
    return encode_batch(0, [(i, 1000, k, b"v", ()) for i, k in enumerate(keys)])


def test_placement_is_kafkas_rack_aware_assignment_from_the_seeded_start(tmp_path, clock):
    from kafkasim.placement.admin_utils import BrokerMetadata, assign_replicas_to_brokers
    import random
    with Cluster(tmp_path / "d", RACKS3, clock=clock, seed=3) as c:
        got = {p["partition"]: p["replicas"] for p in c.create_topic("t", 6, 3)["partitions"]}
        want = assign_replicas_to_brokers([BrokerMetadata(b, r) for b, r in RACKS3], 6, 3,
                                          rng=random.Random("3:0"))
        assert got == want
        assert all(len({RACKS3[b][1] for b in reps}) == 3 for reps in got.values())
        with pytest.raises(InvalidReplicationFactorError, match="4 larger than available brokers: 3"):
            c.create_topic("u", 1, 4)
        assert "u" not in c.list_topics()


def test_every_replica_gets_the_leaders_records_and_the_hw_is_the_min_over_the_isr(cluster):
    cluster.create_topic("t", 1, 3)
    for i in range(4):
        cluster.produce("t", 0, _batch(b"a%d" % i, b"b%d" % i), acks="all")
    part = cluster.describe_cluster()["partitions"][0]
    assert part["high_watermark"] == 8 and set(part["log_end_offsets"].values()) == {8}
    leader = cluster.leader_for("t", 0)
    logs = {b: cluster._partitions[("t", 0)].hosted[b].log for b in part["replicas"]}
    assert all(records_of(log) == records_of(logs[leader]) for log in logs.values())
    # the leader stamps its epoch in every batch
    assert {h.partition_leader_epoch for h, _ in logs[leader].read_batches(0, 1 << 20)} == {0}


@pytest.fixture
def lag10s(tmp_path, clock):
    """A cluster whose replica.lag.time.max.ms (10 s) is below the request timeout (30 s)."""
    c = Cluster(tmp_path / "lag", RACKS3, clock=clock, broker_configs={"replica.lag.time.max.ms": 10_000})
    yield c
    c.close()


def test_a_slow_follower_holds_back_the_hw_until_it_leaves_the_isr(lag10s, clock):
    cluster = lag10s
    cluster.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    leader = cluster.leader_for("t", 0)
    slow = [b for b in cluster.describe_cluster()["partitions"][0]["replicas"] if b != leader][0]
    cluster.slow(slow, 60_000)                     # slower than replica.lag.time.max.ms (10 s)
    cluster.produce("t", 0, _batch(b"x"), acks="all")  # its first fetch is due now: caught up
    t0 = clock.now_ms()
    cluster.produce("t", 0, _batch(b"y"), acks=1)
    d = cluster.describe_cluster()["partitions"][0]
    assert d["high_watermark"] == 1 and slow in d["isr"]
    assert [r.key for r in cluster.fetch("t", 0, 0).records] == [b"x"]   # consumers: below the HW only
    # acks=all waits on the clock: the laggard leaves the ISR after 10 s, then it completes
    res = cluster.produce("t", 0, _batch(b"z"), acks="all")
    assert res.base_offset == 2 and 10_000 < clock.now_ms() - t0 < 11_000
    d = cluster.describe_cluster()["partitions"][0]
    assert slow not in d["isr"] and d["under_replicated"] and d["high_watermark"] == 3
    cluster.slow(slow, 0)
    clock.advance(1)
    cluster.tick()
    assert slow in cluster.describe_cluster()["partitions"][0]["isr"]


def test_acks_all_below_min_isr_is_refused_before_the_append(cluster):
    cluster.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    leader = cluster.leader_for("t", 0)
    others = [b for b in range(3) if b != leader]
    cluster.stop_broker(others[0])
    cluster.produce("t", 0, _batch(b"ok"), acks="all")           # ISR of 2: fine
    cluster.stop_broker(others[1])
    with pytest.raises(NotEnoughReplicasError, match=r"ISR \[%d\].*min.isr requirement of 2" % leader):
        cluster.produce("t", 0, _batch(b"no"), acks="all")
    assert cluster.list_offsets("t", 0, -1)[0] == 1                # nothing written
    assert cluster.produce("t", 0, _batch(b"one"), acks=1).base_offset == 1   # acks=1 still works
    assert cluster.describe_cluster()["partitions"][0]["under_min_isr"]


def test_isr_shrinking_while_acks_all_waits_is_not_enough_replicas_after_append(lag10s, clock):
    cluster = lag10s
    cluster.create_topic("t", 1, 3, {"min.insync.replicas": "3"})
    leader = cluster.leader_for("t", 0)
    slow = [b for b in range(3) if b != leader][0]
    cluster.produce("t", 0, _batch(b"a"), acks="all")
    cluster.slow(slow, 60_000)
    cluster.produce("t", 0, _batch(b"b"), acks="all")   # the due fetch at once: still caught up
    with pytest.raises(NotEnoughReplicasAfterAppendError):
        cluster.produce("t", 0, _batch(b"c"), acks="all")
    assert cluster.describe_cluster()["partitions"][0]["log_end_offsets"][leader] == 3   # written, not acked


def test_a_stalled_isr_member_times_out_acks_all_at_kafkas_defaults(cluster, clock):
    """replica.lag.time.max.ms (30 s) = request.timeout.ms (30 s): the request times out first."""
    from kafkasim.errors import RequestTimedOutError
    cluster.create_topic("t", 1, 3)
    leader = cluster.leader_for("t", 0)
    cluster.slow((leader + 1) % 3, 60_000)
    cluster.produce("t", 0, _batch(b"a"), acks="all")
    with pytest.raises(RequestTimedOutError, match="timed out after 30000 ms"):
        cluster.produce("t", 0, _batch(b"b"), acks="all")


def test_a_client_sending_to_a_follower_or_a_stopped_broker_is_told_so(cluster):
    cluster.create_topic("t", 1, 3)
    leader = cluster.leader_for("t", 0)
    follower = (leader + 1) % 3
    with pytest.raises(NotLeaderOrFollowerError, match=f"broker {follower} is not the leader"):
        cluster.node(follower).produce("t", 0, _batch(b"k"))
    cluster.node(leader).produce("t", 0, _batch(b"k"), acks="all")
    assert [r.key for r in cluster.node(follower).fetch("t", 0, 0).records] == [b"k"]   # KIP-392 read
    cluster.stop_broker(leader)
    with pytest.raises(NetworkError, match=f"broker {leader} is stopped"):
        cluster.node(leader).produce("t", 0, _batch(b"k"))


def test_the_controller_state_survives_a_restart_and_is_checked_on_load(tmp_path, clock):
    d = tmp_path / "d"
    with Cluster(d, RACKS3, clock=clock) as c:
        c.create_topic("t", 2, 3)
        c.produce("t", 1, _batch(b"a", b"b"), acks="all")
        c.stop_broker(c.leader_for("t", 1))
        before = c.describe_cluster()
    with Cluster(d, clock=clock) as c:
        after = c.describe_cluster()
        assert after == before
        assert [r.key for r in c.fetch("t", 1, 0).records] == [b"a", b"b"]
    text = (d / "meta" / "cluster.json").read_text()
    (d / "meta" / "cluster.json").write_text(text.replace('"leader_epoch": 1', '"leader_epoch": -4', 1))
    with pytest.raises(KafkaStorageError, match=r"cluster.json: partitions.t\[1\].leader_epoch=-4"):
        Cluster(d, clock=clock)


def test_the_one_broker_is_the_one_replica_case(broker):
    broker.create_topic("t", 1)
    d = broker.describe_topic("t")["partitions"][0]
    assert (d["leader"], d["replicas"], d["isr"]) == (0, [0], [0])
    broker.produce("t", 0, _batch(b"a"), acks="all")
    assert broker.leader_for("t", 0) == 0
    with pytest.raises(NotLeaderOrFollowerError):
        broker.produce("t", 0, _batch(b"a"), node=1)


def test_an_offline_partition_answers_leader_not_available(cluster):
    cluster.create_topic("t", 1, 3)
    for b in range(3):
        cluster.stop_broker(b)
    d = cluster.describe_cluster()
    assert d["offline"] == 1 and d["partitions"][0]["leader"] == -1
    with pytest.raises(LeaderNotAvailableError, match="t-0 has no leader"):
        cluster.produce("t", 0, _batch(b"k"))
    with pytest.raises(LeaderNotAvailableError):
        cluster.fetch("t", 0, 0)
    last = d["partitions"][0]["isr"]
    cluster.start_broker(last[0])
    assert cluster.leader_for("t", 0) == last[0]


def test_growing_and_deleting_a_topic_on_a_cluster(cluster, tmp_path):
    cluster.create_topic("t", 2, 2)
    grown = cluster.create_partitions("t", 5)
    assert [len(p["replicas"]) for p in grown["partitions"]] == [2] * 5
    cluster.append_records("t", 4, [(1000, b"k", b"v", ())])
    assert [r.key for r in cluster.fetch("t", 4, 0).records] == [b"k"]
    dirs = [cluster._partition_path(b, "t", p) for p in range(5) for b in cluster.assignment()[("t", p)]]
    import os
    assert all(os.path.isdir(d) for d in dirs)
    cluster.delete_topic("t")
    assert not any(os.path.exists(d) for d in dirs)
    assert cluster.describe_cluster()["partitions"] == [] and cluster.assignment() == {}
    cluster.create_topic("t", 1, 3)                      # the name is free again, nothing adopted
    assert cluster.fetch("t", 0, 0).records == []


def test_an_offline_partition_reads_leader_none_in_topics_describe(tmp_path, capsys):
    from kafkasim.cli import main
    d = str(tmp_path / "lab")
    main(["cluster", "create", "--brokers", "0,1", "--data-dir", d])
    main(["topics", "create", "t", "--replication-factor", "2", "--data-dir", d])
    main(["cluster", "stop-broker", "0", "--data-dir", d])
    main(["cluster", "stop-broker", "1", "--data-dir", d])
    capsys.readouterr()
    assert main(["topics", "describe", "t", "--data-dir", d]) == 0
    assert "Leader: none" in capsys.readouterr().out


def test_faults_show_in_the_metrics(cluster):
    cluster.create_topic("t", 2, 3, {"min.insync.replicas": "3"})
    assert cluster.metrics()["UnderReplicatedPartitions"] == 0
    leader = cluster.leader_for("t", 0)
    cluster.stop_broker(leader)
    m = cluster.metrics()
    assert m["UnderReplicatedPartitions"] == 2 and m["UnderMinIsrPartitionCount"] == 2
    assert m["IsrShrinks"] == 2 and m["LeaderElections"] >= 1 and m["OfflinePartitionsCount"] == 0
    cluster.start_broker(leader)
    m = cluster.metrics()
    assert m["IsrExpands"] == 2 and m["UnderReplicatedPartitions"] == 0
