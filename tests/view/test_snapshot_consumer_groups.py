"""The live view's snapshot of a consumer group (KIP-848) while it reconciles: what
DataDirWatcher reads from the records the real in-process Broker wrote for real in-process
``Consumer(group_protocol="consumer")`` members, stepped one heartbeat at a time on a MockClock."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.consumer import Consumer
from kafkasim.view.snapshot import DataDirWatcher

HB = 5_000     # the broker's group.consumer.heartbeat.interval.ms default


@pytest.fixture
def data(tmp_path, clock):
    b = Broker(tmp_path / "data", clock=clock)
    b.create_topic("orders", 6)
    yield b, str(tmp_path / "data")
    b.close()


def member(broker, clock, name):
    return Consumer(broker, "orders", group_id="g", group_protocol="consumer", client_id=name, seed=1,
                    clock=clock, enable_auto_commit=False)


def the_group(snap, gid="g"):
    (g,) = [g for g in snap["groups"] if g["group_id"] == gid]
    return g


def by_client(group):
    return {m["client_id"]: m for m in group["members"]}


def pending(group):
    """Every pending revocation and assignment in the group, by client id: what the page draws."""
    revoking = sorted((m["client_id"], x["topic"], x["partition"], x["to"]) for m in group["members"]
                      for x in m["pending_revocation"])
    waiting = sorted((m["client_id"], x["topic"], x["partition"], x["from"]) for m in group["members"]
                     for x in m["pending_assignment"])
    return revoking, waiting


def test_a_consumer_group_mid_reconciliation_shows_its_pending_revocations_and_assignments(data, clock):
    broker, d = data
    w = DataDirWatcher(d, clock=clock)
    a, b = member(broker, clock, "a"), member(broker, clock, "b")
    for _ in range(4):
        a.poll()
        b.poll()
        clock.advance(HB)
    g = the_group(w.poll())
    truth = broker.describe_group("g")
    assert (g["type"], g["state"], g["protocol"]) == ("consumer", "Stable", "uniform")
    assert g["group_epoch"] == g["assignment_epoch"] == truth["group_epoch"] == truth["assignment_epoch"]
    assert pending(g) == ([], [])

    c = member(broker, clock, "c")
    c.poll()                      # c joins: a new target gives c one partition of a's and one of b's
    clock.advance(HB)
    a.poll()                      # a heartbeats: revokes its partition and acknowledges; b has not
    g = the_group(w.poll())
    truth = broker.describe_group("g")
    tm = {m["client_id"]: m for m in truth["members"]}
    owned = {n: {(tp.topic, tp.partition) for tp in m["assignment"]} for n, m in tm.items()}
    target = {n: {(tp.topic, tp.partition) for tp in m["target_assignment"]} for n, m in tm.items()}
    assert g["state"] == "Reconciling" and g["group_epoch"] == g["assignment_epoch"] == truth["group_epoch"]
    members = by_client(g)
    assert {n: m["member_epoch"] for n, m in members.items()} == {n: m["member_epoch"] for n, m in tm.items()}
    assert members["b"]["member_epoch"] < g["assignment_epoch"] == members["a"]["member_epoch"]
    for n in "abc":
        assert {tuple(x) for x in members[n]["target_assignment"]} == target[n]
        assert {tuple(x) for x in members[n]["assignment"]} == owned[n]
    (held,) = owned["b"] - target["b"]          # b still owns the partition the target gives c
    (freed,) = target["c"] - owned["b"]         # a released its one already: c takes it at its heartbeat
    assert owned["c"] == set() and held in target["c"] and freed not in owned["a"]
    labels = {n: m["label"] for n, m in members.items()}
    assert pending(g) == ([("b", *held, labels["c"])],
                          sorted([("c", *held, labels["b"]), ("c", *freed, None)]))

    b.poll()                      # b revokes and acknowledges
    c.poll()                      # c gets both
    g = the_group(w.poll())
    assert g["state"] == "Stable" and pending(g) == ([], [])
    members = by_client(g)
    assert {tuple(x) for x in members["c"]["assignment"]} == {held, freed}
    assert all(m["member_epoch"] == g["assignment_epoch"] for m in members.values())
    latest = w.poll()["rebalances"][0]
    assert (latest["group"], latest["type"], latest["generation"]) == ("g", "consumer", g["assignment_epoch"])
    assert [x.split(" ")[0] for x in latest["joined"]] == ["c"]
    assert {(m["topic"], m["partition"], m["to"]) for m in latest["moved"]} == {(*held, labels["c"]),
                                                                                (*freed, labels["c"])}


def test_a_classic_group_beside_it_says_classic(data, clock):
    broker, d = data
    w = DataDirWatcher(d, clock=clock)
    classic = Consumer(broker, "orders", group_id="old", client_id="k")
    kip848 = member(broker, clock, "a")
    for _ in range(40):
        clock.advance(100)
        classic.poll()
        kip848.poll()
    types = {g["group_id"]: g["type"] for g in w.poll()["groups"]}
    assert types == {"old": "classic", "g": "consumer"}
