"""Clients on a cluster: the producer and consumer follow the leader through a failover."""

from __future__ import annotations

from kafkasim.consumer import Consumer
from kafkasim.producer import Producer
from kafkasim.types import TopicPartition


def test_the_producer_follows_the_leader_through_a_failover_with_backoff_on_the_clock(cluster, clock):
    cluster.create_topic("t", 1, 3, {"min.insync.replicas": "2"})
    p = Producer(cluster, acks="all", enable_idempotence=True, linger_ms=0, retry_backoff_ms=100)
    for i in range(3):
        p.send("t", key=b"k%d" % i, value=b"v", partition=0)
    p.flush()
    old = cluster.leader_for("t", 0)
    p.send("t", key=b"warm", value=b"v", partition=0).get()   # the producer now caches the leader
    cluster.stop_broker(old)
    t0 = clock.now_ms()
    futures = [p.send("t", key=b"after%d" % i, value=b"v", partition=0) for i in range(3)]
    p.flush()
    assert [f.get().offset for f in futures] == [4, 5, 6]
    assert clock.now_ms() - t0 == 0       # a stopped broker: NetworkError, metadata refreshed at once
    new = cluster.leader_for("t", 0)
    cluster.start_broker(old)
    cluster.elect_leaders()                # the old leader takes its preferred role back
    assert cluster.leader_for("t", 0) == old != new
    f = p.send("t", key=b"moved", value=b"v", partition=0)   # cached leader `new` is now a follower
    p.flush()
    assert f.get().offset == 7
    assert clock.now_ms() - t0 == 100     # NotLeaderOrFollower: one retry.backoff.ms on the clock
    keys = [r.key for r in cluster.fetch("t", 0, 0).records]
    assert keys == [b"k0", b"k1", b"k2", b"warm", b"after0", b"after1", b"after2", b"moved"]
    p.close()


def test_the_consumer_reads_through_a_failover(cluster):
    cluster.create_topic("t", 1, 3)
    for i in range(5):
        cluster.append_records("t", 0, [(1000, b"k%d" % i, b"v", ())])
    c = Consumer(cluster, auto_offset_reset="earliest", enable_auto_commit=False)
    c.assign([TopicPartition("t", 0)])
    got = [r.key for recs in c.poll(timeout_ms=0).values() for r in recs]
    cluster.stop_broker(cluster.leader_for("t", 0))
    cluster.append_records("t", 0, [(1000, b"k5", b"v", ())])
    got += [r.key for recs in c.poll(timeout_ms=0).values() for r in recs]
    got += [r.key for recs in c.poll(timeout_ms=0).values() for r in recs]
    assert got == [b"k%d" % i for i in range(6)]
    c.close()


def test_a_consumer_with_client_rack_fetches_from_the_replica_in_its_rack(cluster):
    from kafkasim.consumer.fetcher import Fetcher
    from kafkasim.consumer.subscription import SubscriptionState
    cluster.create_topic("t", 1, 3)
    cluster.append_records("t", 0, [(1000, b"a", b"v", ())])
    leader = cluster.leader_for("t", 0)
    near = (leader + 1) % 3                      # racks r1, r2, r3 = brokers 0, 1, 2
    rack = f"r{near + 1}"
    assert cluster.preferred_read_replica("t", 0, rack) == near
    assert cluster.preferred_read_replica("t", 0, f"r{leader + 1}") == leader
    assert cluster.preferred_read_replica("t", 0, "elsewhere") == leader
    subs = SubscriptionState()
    subs.assign_from_user([TopicPartition("t", 0)])
    subs.state(TopicPartition("t", 0)).position = 0
    asked = []
    real = cluster.fetch_batches          # the in-process consumer reads stored batches

    def spy(*a, **kw):
        asked.append(kw.get("node"))
        return real(*a, **kw)

    cluster.fetch_batches = spy
    f = Fetcher(cluster, subs, client_rack=rack)
    assert [r.key for r in f.fetch(10)[TopicPartition("t", 0)]] == [b"a"]
    assert asked == [near]
    consumer = Consumer(cluster, client_rack=rack, auto_offset_reset="earliest")   # the config reaches the fetcher
    consumer.assign([TopicPartition("t", 0)])
    assert [r.key for r in consumer.poll(timeout_ms=0)[TopicPartition("t", 0)]] == [b"a"]
    assert asked[-1] == near
    consumer.close()
    cluster.stop_broker(near)                     # the rack's replica goes: back to the leader
    cluster.append_records("t", 0, [(1000, b"b", b"v", ())])
    assert f.fetch(10) == {}
    assert [r.key for r in f.fetch(10)[TopicPartition("t", 0)]] == [b"b"]
    assert asked[-1] == leader


def test_group_members_with_racks_get_partitions_whose_replicas_share_their_rack(cluster, clock):
    """KIP-881: the leader gives the range assignor each partition's replica racks."""
    cluster.create_topic("t", 6, 1)
    racks = cluster.partition_racks()
    consumers = []
    for rack in ("r1", "r2", "r3"):
        c = Consumer(cluster, group_id="g", partition_assignment_strategy=["range"],
                     auto_offset_reset="earliest", client_rack=rack)
        c.subscribe(["t"])
        consumers.append((rack, c))
    for _ in range(20):                  # the group's initial rebalance delay passes on the clock
        for _, c in consumers:
            c.poll(timeout_ms=0)
        clock.advance(500)
    for rack, c in consumers:
        got = c.assignment()
        assert got and all(racks[tp] == [rack] for tp in got), (rack, got)
    for _, c in consumers:
        c.close()
