"""isolate(b, from_=...): from clients only (no election, clients get NetworkError), from its
followers only (no election, the ISR shrinks after replica.lag.time.max.ms, acks=1 goes on and
acks=all fails), or both (fenced, as before)."""

from __future__ import annotations

import pytest

from kafkasim.broker.cluster import Cluster
from kafkasim.errors import (
    InvalidArgumentError, NetworkError, NotEnoughReplicasError, RequestTimedOutError,
)
from kafkasim.records.record_batch import encode_batch

from tests.cluster.conftest import records_of

TOPIC = "t"
LAG_MS = 30_000          # replica.lag.time.max.ms (Kafka's default)


def _batch(keys) -> bytes:
    return encode_batch(0, [(i, 1000, k, b"v", ()) for i, k in enumerate(keys)])


@pytest.fixture
def c(cluster):
    cluster.create_topic(TOPIC, 3, 3, {"min.insync.replicas": "2"})
    return cluster


def _partitions(c: Cluster) -> dict[int, dict]:
    return {p["partition"]: p for p in c.describe_cluster()["partitions"]}


def test_isolated_from_clients_keeps_its_leaderships_and_replicates_but_refuses_clients(c, clock):
    b = c.leader_for(TOPIC, 0)
    before = _partitions(c)
    c.isolate(b, from_="clients")
    assert c.brokers[b].state == "alive" and c.brokers[b].isolated_from == "clients"
    assert not c.serves_clients(b) and c.reachable(b)
    assert _partitions(c) == before                     # no election, no ISR change
    with pytest.raises(NetworkError, match="isolated from clients"):
        c.node(b).produce(TOPIC, 0, _batch([b"x"]))
    with pytest.raises(NetworkError):
        c.node(b).fetch(TOPIC, 0, 0)
    # the controller and its peers still reach it: a write through it replicates to the ISR
    res = c.produce(TOPIC, 0, _batch([b"a"]), acks="all")
    part = c._partitions[(TOPIC, 0)]
    assert part.high_watermark == res.base_offset + 1 and sorted(part.isr) == [0, 1, 2]
    clock.advance(LAG_MS * 2)
    c.tick()
    assert sorted(c._partitions[(TOPIC, 0)].isr) == [0, 1, 2]
    c.heal(b)
    assert c.node(b).produce(TOPIC, 0, _batch([b"b"]), acks="all").base_offset == res.base_offset + 1
    assert [(e.kind, e.broker, e.detail) for e in c.fault_events()] == [("isolate", b, "clients"),
                                                                        ("heal", b, "clients")]


def test_isolated_from_followers_a_leader_takes_acks_1_and_its_isr_shrinks(c, clock):
    b = c.leader_for(TOPIC, 0)
    epoch = c.leader_epoch(TOPIC, 0)
    followers = [x for x in c._partitions[(TOPIC, 0)].replicas if x != b]
    c.isolate(b, from_="followers")
    assert c.serves_clients(b) and c.reachable(b) and not c.can_replicate(b)

    leo = {x: c._partitions[(TOPIC, 0)].hosted[x].log.log_end_offset for x in followers}
    c.node(b).produce(TOPIC, 0, _batch([b"one"]), acks=1)       # clients reach it: acks=1 goes on
    part = c._partitions[(TOPIC, 0)]
    assert {x: part.hosted[x].log.log_end_offset for x in followers} == leo   # nothing replicated
    # acks=all waits for the ISR; with Kafka's defaults the request times out first
    with pytest.raises(RequestTimedOutError):
        c.node(b).produce(TOPIC, 0, _batch([b"two"]), acks="all")
    clock.advance(LAG_MS + 1)
    c.tick()
    assert c._partitions[(TOPIC, 0)].isr == [b]                  # the leader shrank its ISR
    assert c.leader_for(TOPIC, 0) == b and c.leader_epoch(TOPIC, 0) == epoch   # no election
    with pytest.raises(NotEnoughReplicasError):
        c.node(b).produce(TOPIC, 0, _batch([b"three"]), acks="all")
    # as a follower elsewhere it stops fetching too, and its leaders drop it once it lags
    other = next(p for p in range(1, 3) if c.leader_for(TOPIC, p) != b)
    c.produce(TOPIC, other, _batch([b"o"]), acks=1)
    clock.advance(LAG_MS + 1)
    c.tick()
    assert b not in c._partitions[(TOPIC, other)].isr

    c.heal(b)
    clock.advance(1)
    c.tick()
    for p in range(3):
        part = c._partitions[(TOPIC, p)]
        assert sorted(part.isr) == [0, 1, 2]
        for r in part.hosted.values():
            assert records_of(r.log) == records_of(part.log)
    assert c.node(b).produce(TOPIC, 0, _batch([b"four"]), acks="all").base_offset >= 2


def test_isolated_from_both_sides_one_after_the_other_is_fenced(c):
    b = c.leader_for(TOPIC, 0)
    c.isolate(b, from_="clients")
    c.isolate(b, from_="followers")
    assert c.brokers[b].state == "isolated" and c.brokers[b].isolated_from is None
    assert c.leader_for(TOPIC, 0) not in (b, -1)
    c.heal(b)
    assert c.brokers[b].state == "alive"


def test_isolate_keeps_its_old_meaning_and_is_recorded_in_cluster_json(c, tmp_path, clock):
    c.isolate(2)
    assert c.brokers[2].state == "isolated"
    c.heal(2)
    c.isolate(1, "followers")
    c.close()
    again = Cluster(tmp_path / "data", clock=clock)
    try:
        assert again.brokers[1].isolated_from == "followers"
        assert next(b for b in again.describe_cluster()["brokers"] if b["id"] == 1)["isolated_from"] == "followers"
        assert again.faults.to_json()["brokers"][1]["isolated_from"] == "followers"
    finally:
        again.close()


def test_isolate_refuses_bad_calls(c):
    with pytest.raises(InvalidArgumentError, match="from_"):
        c.isolate(0, from_="peers")
    c.isolate(0, from_="clients")
    with pytest.raises(InvalidArgumentError, match="already isolated from clients"):
        c.isolate(0, from_="clients")
    c.stop_broker(1)
    with pytest.raises(InvalidArgumentError, match="broker 1 is stopped"):
        c.isolate(1, from_="followers")
