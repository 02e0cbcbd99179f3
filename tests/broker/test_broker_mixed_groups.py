"""Kafka 4's mixed consumer groups in process: classic members (JoinGroup/SyncGroup/Heartbeat)
inside a consumer group, the online upgrade and downgrade, and what survives a restart."""

from __future__ import annotations

import uuid

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.errors import IllegalGenerationError
from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kafkasim.protocol.consumer_protocol import encode_subscription
from kafkasim.types import TopicPartition

T0 = 1_700_000_000_000


@pytest.fixture
def clock():
    return MockClock(T0)


def _broker(path, clock, **configs):
    b = Broker(path, clock=clock, broker_configs=configs or None)
    if "t" not in b.list_topics():
        b.create_topic("t", 6)
    return b


def _consumer(b, clock, name, protocol):
    extra = (dict(group_protocol="consumer") if protocol == "consumer" else
             dict(partition_assignment_strategy=["range"], session_timeout_ms=10_000, heartbeat_interval_ms=3_000))
    c = Consumer(b, group_id="g", client_id=name, seed=1, auto_offset_reset="earliest", clock=clock,
                 enable_auto_commit=False, **extra)
    c.subscribe(["t"])
    return c


def _run(b, clock, consumers, seconds, check=None):
    """Poll every consumer once a second; at every step no partition has two owners."""
    for _ in range(seconds):
        for c in consumers:
            c.poll()
        b.tick()
        clock.advance(1_000)
        owned = [tp for c in consumers for tp in c.assignment()]
        assert len(owned) == len(set(owned)), f"a partition with two owners: {sorted(owned)}"


def _parts(c):
    return sorted(tp.partition for tp in c.assignment())


@pytest.mark.parametrize("first", ["classic", "consumer"])
def test_a_classic_and_a_consumer_protocol_member_share_a_group_then_it_goes_back_to_classic(tmp_path, clock,
                                                                                              first):
    b = _broker(tmp_path / "d", clock)
    a = _consumer(b, clock, "a", first)
    _run(b, clock, [a], 8)
    assert _parts(a) == list(range(6))
    other = "consumer" if first == "classic" else "classic"
    o = _consumer(b, clock, "o", other)
    _run(b, clock, [a, o], 15)
    desc = b.describe_group("g")
    assert (desc["type"], desc["state"], desc["protocol"]) == ("consumer", "Stable", "uniform")
    assert sorted(m["member_type"] for m in desc["members"]) == ["classic", "consumer"]
    assert sorted(_parts(a) + _parts(o)) == list(range(6)) and len(_parts(a)) == len(_parts(o)) == 3
    assert [g["type"] for g in b.list_groups()] == ["consumer"]

    leaving, staying = (o, a) if first == "classic" else (a, o)
    leaving.close()
    _run(b, clock, [staying], 15)
    desc = b.describe_group("g")
    assert desc.get("type", "classic") == "classic" and desc["state"] == "Stable", desc
    assert _parts(staying) == list(range(6))
    assert [g["type"] for g in b.list_groups()] == ["classic"]
    b.close()


def test_a_mixed_group_and_its_classic_member_survive_a_restart(tmp_path, clock):
    b = _broker(tmp_path / "d", clock)
    old, new = _consumer(b, clock, "old", "classic"), _consumer(b, clock, "new", "consumer")
    _run(b, clock, [old, new], 15)
    before = b.consumer_group_describe(["g"])[0]
    b.close()
    b = _broker(tmp_path / "d", clock)
    after = b.consumer_group_describe(["g"])[0]
    strip = lambda d: {k: v for k, v in d.items() if k != "members"}     # noqa: E731
    assert strip(after) == strip(before)
    assert [{k: v for k, v in m.items()} for m in after["members"]] == before["members"]
    member = b.consumer_group_coordinator.find_group("g").members
    classic = [m for m in member.values() if m.uses_classic_protocol]
    assert len(classic) == 1 and classic[0].classic_member_metadata.session_timeout_ms == 10_000
    assert classic[0].classic_member_metadata.supported_protocols[0][0] == "range"
    b.close()


def test_classic_members_of_a_consumer_group_keep_their_own_session_and_generation(tmp_path, clock):
    b = _broker(tmp_path / "d", clock)
    new = _consumer(b, clock, "new", "consumer")
    _run(b, clock, [new], 5)
    sub = encode_subscription({"topics": ["t"]})
    j = b.join_group("g", "", protocols=[("range", sub)], session_timeout_ms=10_000, rebalance_timeout_ms=20_000)
    s = b.sync_group("g", j.member_id, j.generation_id)
    assert s.status == "complete" and s.generation_id == j.generation_id
    # a commit with another generation: ILLEGAL_GENERATION (a classic member), not STALE_MEMBER_EPOCH
    with pytest.raises(IllegalGenerationError):
        b.offset_commit("g", j.member_id, j.generation_id + 1, {TopicPartition("t", 0): 1})
    with pytest.raises(IllegalGenerationError):
        b.heartbeat("g", j.member_id, j.generation_id + 1)
    # no heartbeat for its own 10 s session timeout (the group's is 45 s): fenced
    for _ in range(12):
        new.poll()
        clock.advance(1_000)
        b.tick()
    assert [m["member_type"] for m in b.describe_group("g")["members"]] == ["consumer"]
    b.close()


def test_with_the_upgrade_policy_only_the_last_consumer_member_leaving_keeps_a_consumer_group(tmp_path, clock):
    b = _broker(tmp_path / "d", clock, **{"group.consumer.migration.policy": "upgrade"})
    old, new = _consumer(b, clock, "old", "classic"), _consumer(b, clock, "new", "consumer")
    _run(b, clock, [old, new], 15)
    new.close()
    _run(b, clock, [old], 15)
    desc = b.describe_group("g")
    assert desc["type"] == "consumer" and [m["member_type"] for m in desc["members"]] == ["classic"]
    assert _parts(old) == list(range(6))
    b.close()


def test_a_static_consumer_member_replaces_nothing_of_a_classic_member_with_another_instance(tmp_path, clock):
    b = _broker(tmp_path / "d", clock)
    sub = encode_subscription({"topics": ["t"]})
    j = b.join_group("g", "", protocols=[("range", sub)], session_timeout_ms=10_000, group_instance_id="i1")
    clock.advance(3_001)       # group.initial.rebalance.delay.ms
    j = b.join_group("g", j.member_id, protocols=[("range", sub)], session_timeout_ms=10_000,
                     group_instance_id="i1")
    b.sync_group("g", j.member_id, j.generation_id, {j.member_id: []}, group_instance_id="i1")
    r = b.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        "g", str(uuid.UUID(int=1)), 0, instance_id="i2", rebalance_timeout_ms=30_000,
        subscribed_topic_names=("t",), topic_partitions={}))
    assert r.member_epoch == 2
    assert sorted(m["group_instance_id"] for m in b.describe_group("g")["members"]) == ["i1", "i2"]
    b.close()


def test_groups_describe_members_verbose_shows_which_members_are_upgraded(tmp_path, clock, capsys):
    from kafkasim.cli import main

    b = _broker(tmp_path / "d", clock)
    old, new = _consumer(b, clock, "old", "classic"), _consumer(b, clock, "new", "consumer")
    _run(b, clock, [old, new], 15)
    b.close()
    assert main(["groups", "describe", "--group", "g", "--members", "--verbose", "--data-dir",
                 str(tmp_path / "d")]) == 0
    lines = capsys.readouterr().out.strip("\n").split("\n")
    assert lines[0].split()[-1] == "UPGRADED"
    assert sorted((r.split()[3], r.split()[-1]) for r in lines[1:]) == [("new", "true"), ("old", "false")]
