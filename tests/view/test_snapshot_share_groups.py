"""The live view's snapshot of a share group (KIP-932): what DataDirWatcher reads from the
records a real in-process Broker wrote (``__consumer_offsets``' ShareGroup* records and
``__share_group_state``) while members join with ``share_group_heartbeat`` and fetch,
acknowledge and release with ``share_fetch``, on a MockClock."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker, Cluster
from kafkasim.protocol.share_group import (
    ACKNOWLEDGE_ACCEPT, ACKNOWLEDGE_REJECT, ACKNOWLEDGE_RELEASE, AcknowledgementBatch,
)
from kafkasim.types import TopicPartition
from kafkasim.view.snapshot import DataDirWatcher

LOCK_MS = 15_000
LIMIT = 5                   # group.share.delivery.count.limit at Kafka's default, which the view assumes
J0, J1 = TopicPartition("jobs", 0), TopicPartition("jobs", 1)


@pytest.fixture
def data(tmp_path, clock):
    b = Broker(tmp_path / "data", clock=clock, broker_configs={
        "share.auto.offset.reset": "earliest", "group.share.record.lock.duration.ms": LOCK_MS})
    b.create_topic("jobs", 2)
    for p in (0, 1):
        b.append_records("jobs", p, [(clock.now_ms(), f"k{i}".encode(), f"v{i}".encode(), ()) for i in range(10)])
    yield b, str(tmp_path / "data")
    b.close()


def join(broker, *names):
    """Each member joins (epoch 0), then every member heartbeats once more so all are at the group epoch."""
    for n in names:
        broker.share_group_heartbeat("workers", f"member-{n}", 0, subscribed_topic_names=["jobs"], client_id=n,
                                     client_host="/127.0.0.1")
    for n in names:
        (d,) = [m for m in broker.share_group_describe(["workers"])[0]["members"] if m["client_id"] == n]
        broker.share_group_heartbeat("workers", f"member-{n}", d["member_epoch"], client_id=n, client_host="/127.0.0.1")


def share_group(snap, gid="workers"):
    (g,) = [g for g in snap["groups"] if g["group_id"] == gid]
    return g


def share_partition(group, tp):
    (x,) = [x for x in group["share_partitions"] if (x["topic"], x["partition"]) == (tp.topic, tp.partition)]
    return x


def ack(first, last, kind):
    return AcknowledgementBatch(first, last, (kind,))


def test_every_member_is_drawn_to_every_partition_it_is_assigned_several_per_partition(data):
    broker, d = data
    join(broker, "a", "b", "c")
    g = share_group(DataDirWatcher(d).poll())
    (truth,) = broker.share_group_describe(["workers"])
    assert (g["type"], g["protocol_type"], g["state"], g["protocol"]) == ("share", "share", "Stable", "simple")
    assert g["group_epoch"] == g["generation"] == truth["group_epoch"]
    assert g["assignment_epoch"] == truth["assignment_epoch"]
    want = {m["client_id"]: {("jobs", p) for _, t, ps in m["assignment"] for p in ps} for m in truth["members"]}
    got = {m["client_id"]: {tuple(x) for x in m["assignment"]} for m in g["members"]}
    assert got == want and set(got) == {"a", "b", "c"}
    assert {m["client_id"]: m["member_epoch"] for m in g["members"]} == \
        {m["client_id"]: m["member_epoch"] for m in truth["members"]}
    labels = {m["client_id"]: m["label"] for m in g["members"]}
    for p in (0, 1):                         # the edges: a partition's members are all that are assigned it
        x = [x for x in g["share_partitions"] if x["partition"] == p]
        fetchers = sorted(labels[n] for n, tps in want.items() if ("jobs", p) in tps)
        assert (sorted(x[0]["members"]) if x else []) == fetchers
    assert max(len(x["members"]) for x in g["share_partitions"]) >= 2    # 3 members on 2 partitions share one
    assert len({m["color"] for m in g["members"]}) == 3
    assert not any(x["initialized"] for x in g["share_partitions"])      # nobody fetched yet: no state
    assert g["committed"] == [] and "jobs" in {t["name"] for t in DataDirWatcher(d).poll()["topics"]}

    broker.share_group_heartbeat("workers", "member-c", -1)           # c leaves: its edges go
    g = share_group(DataDirWatcher(d).poll())
    assert {m["client_id"] for m in g["members"]} == {"a", "b"}
    assert all(labels["c"] not in x["members"] for x in g["share_partitions"])


def test_in_flight_records_per_partition_are_the_share_partition_state(data):
    broker, d = data
    join(broker, "a", "b")
    w = DataDirWatcher(d)
    got = broker.share_fetch("workers", "member-a", [J0], max_records=10)
    assert [(a.first_offset, a.last_offset) for a in got[J0].acquired] == [(0, 9)]
    x = share_partition(share_group(w.poll()), J0)
    assert (x["initialized"], x["start_offset"], x["end_offset"], x["in_flight"]) == (True, 0, 9, 10)
    assert (x["delivered"], x["acknowledged"], x["archived"], x["redeliveries"]) == (10, 0, 0, 0)
    assert x["log_end_offset"] == 10 and x["not_yet_fetched"] == 0

    broker.share_acknowledge("workers", "member-a", {J0: [ack(0, 2, ACKNOWLEDGE_ACCEPT), ack(3, 3, ACKNOWLEDGE_RELEASE),
                                                           ack(5, 5, ACKNOWLEDGE_ACCEPT), ack(6, 6, ACKNOWLEDGE_REJECT)]})
    g = share_group(w.poll())
    x = share_partition(g, J0)
    sp = broker.share_partition_state("workers", J0)
    assert x["start_offset"] == sp.start_offset == 3             # 0..2 accepted: the SPSO moved past them
    assert x["in_flight"] == sp.in_flight() == 7                 # 3..9
    assert (x["delivered"], x["acknowledged"], x["archived"]) == (5, 1, 1)   # 3 released, 4, 7..9 held; 5; 6
    assert x["archived_total"] == 1 and x["archived_at_limit"] == 0
    assert not share_partition(g, J1)["initialized"]
    (a,) = [m for m in g["members"] if m["client_id"] == "a"]
    rows = {(r["topic"], r["partition"]): r for r in a["partitions"]}
    if ("jobs", 0) in rows:                  # the member's line for the partition: the same numbers
        assert (rows[("jobs", 0)]["in_flight"], rows[("jobs", 0)]["start_offset"]) == (7, 3)


def test_redeliveries_count_released_records_and_expired_locks_up_to_the_delivery_limit(data, clock):
    broker, d = data
    join(broker, "a", "b")
    w = DataDirWatcher(d)
    broker.share_fetch("workers", "member-a", [J0], max_records=10)
    broker.share_acknowledge("workers", "member-a", {J0: [ack(0, 8, ACKNOWLEDGE_ACCEPT), ack(9, 9, ACKNOWLEDGE_RELEASE)]})
    x = share_partition(share_group(w.poll()), J0)
    assert (x["start_offset"], x["in_flight"], x["redeliveries"], x["redelivered"]) == (9, 1, 0, 0)

    got = broker.share_fetch("workers", "member-b", [J0])         # b gets 9 again: its second delivery
    assert [(a.first_offset, a.delivery_count) for a in got[J0].acquired] == [(9, 2)]
    x = share_partition(share_group(w.poll()), J0)
    assert (x["redeliveries"], x["redelivered"], x["max_delivery_count"]) == (1, 1, 2)

    clock.advance(LOCK_MS)                   # b's lock runs out: released, then delivered to a
    broker.tick_share_groups()
    got = broker.share_fetch("workers", "member-a", [J0])
    assert [(a.first_offset, a.delivery_count) for a in got[J0].acquired] == [(9, 3)]
    for count in (3, 4):                     # released twice more: its fifth delivery is the last one
        broker.share_acknowledge("workers", "member-a", {J0: [ack(9, 9, ACKNOWLEDGE_RELEASE)]})
        got = broker.share_fetch("workers", "member-a", [J0])
        assert [a.delivery_count for a in got[J0].acquired] == [count + 1]
    g = share_group(w.poll())
    x = share_partition(g, J0)
    assert (x["redeliveries"], x["max_delivery_count"], x["archived_at_limit"]) == (4, LIMIT, 0)
    broker.share_acknowledge("workers", "member-a", {J0: [ack(9, 9, ACKNOWLEDGE_RELEASE)]})   # the limit: archived
    g = share_group(w.poll())
    x = share_partition(g, J0)
    sp = broker.share_partition_state("workers", J0)
    assert x["start_offset"] == sp.start_offset == 10 and x["in_flight"] == 0
    assert (x["redeliveries"], x["archived_total"], x["archived_at_limit"]) == (4, 1, 1)
    assert (g["redeliveries"], g["archived_at_limit"], g["delivery_count_limit"]) == (4, 1, LIMIT)
    assert DataDirWatcher(d).poll()["groups"] == w.poll()["groups"]   # a fresh view counts the same history


def test_a_clusters_share_group_is_read_at_the_data_dirs_root(tmp_path, clock):
    d = tmp_path / "cluster"
    cl = Cluster(d, brokers="0,1,2", clock=clock, broker_configs={"share.auto.offset.reset": "earliest"})
    try:
        cl.create_topic("jobs", 2, replication_factor=3)
        cl.append_records("jobs", 0, [(clock.now_ms(), b"k", b"v", ())] * 5)
        cl.share_group_heartbeat("workers", "member-a", 0, subscribed_topic_names=["jobs"], client_id="a")
        got = cl.share_fetch("workers", "member-a", [J0])
        assert [(a.first_offset, a.last_offset) for a in got[J0].acquired] == [(0, 4)]
        snap = DataDirWatcher(str(d)).poll()
        x = share_partition(share_group(snap), J0)
        assert (x["start_offset"], x["in_flight"], x["delivered"], x["log_end_offset"]) == (0, 5, 5, 5)
        assert {t["name"] for t in snap["topics"]} == {"jobs"} and snap["problems"] == []
    finally:
        cl.close()
