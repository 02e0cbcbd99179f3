"""The broker's consumer group API (KIP-848): heartbeats over the broker's topics, timers on
Broker.tick(), one id space with classic groups, and OffsetCommit/OffsetFetch member checks."""

from __future__ import annotations

import uuid

import pytest

from kafkasim.broker import Broker
from kafkasim.broker.cluster import Cluster
from kafkasim.clock import MockClock
from kafkasim.errors import (
    CoordinatorNotAvailableError, InconsistentGroupProtocolError,
    GroupIdNotFoundError, GroupSubscribedToTopicError, InvalidConfigurationError, NonEmptyGroupError,
    StaleMemberEpochError, UnknownMemberIdError, UnsupportedVersionError,
)
from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kafkasim.protocol.consumer_protocol import encode_subscription
from kafkasim.types import TopicPartition

T0 = 1_700_000_000_000


def _join(b, group: str, member: str, topics=("t",)):
    return b.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        group, member, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=tuple(topics), topic_partitions={}))


def _beat(b, group: str, member: str, epoch: int, owned):
    return b.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(group, member, epoch, topic_partitions=owned))


def _settle(b, group, members: dict) -> dict:
    """Heartbeat every member with what it was given until nothing changes: member -> (epoch, owned)."""
    for _ in range(10):
        changed = False
        for m, (epoch, owned) in list(members.items()):
            r = _beat(b, group, m, epoch, owned)
            new = (r.member_epoch, dict(r.assignment) if r.assignment is not None else owned)
            changed |= new != members[m]
            members[m] = new
        if not changed:
            return members
    raise AssertionError("the group did not settle")


@pytest.fixture(params=[Broker, Cluster], ids=lambda c: c.__name__)
def broker(request, tmp_path):
    clock = MockClock(T0)
    kwargs = {"brokers": [0, 1, 2]} if request.param is Cluster else {}
    b = request.param(tmp_path / "d", clock=clock, **kwargs)
    b.create_topic("t", 6)
    yield b
    b.close()


def test_three_members_split_six_partitions_by_the_broker_topic_ids(broker):
    ids = [str(uuid.UUID(int=i + 1)) for i in range(3)]
    members = {}
    for m in ids:
        r = _join(broker, "g", m)
        members[m] = (r.member_epoch, dict(r.assignment))
    members = _settle(broker, "g", members)
    topic_id = uuid.UUID(hex=broker.describe_topic("t")["topic_id"])
    owned = [members[m][1].get(topic_id, frozenset()) for m in ids]
    assert sorted(len(p) for p in owned) == [2, 2, 2]
    assert frozenset().union(*owned) == frozenset(range(6))
    [desc] = broker.consumer_group_describe(["g"])
    assert desc["state"] == "Stable" and desc["assignor_name"] == "uniform"
    assert {m["member_id"]: m["member_epoch"] for m in desc["members"]} == {m: members[m][0] for m in ids}
    assert broker.list_groups() == [{"group_id": "g", "protocol_type": "consumer", "state": "Stable",
                                     "type": "consumer"}]


def test_a_grown_topic_reaches_the_assignment(broker):
    m = str(uuid.UUID(int=7))
    r = _join(broker, "g", m)
    topic_id = uuid.UUID(hex=broker.describe_topic("t")["topic_id"])
    assert r.assignment == {topic_id: frozenset(range(6))}
    broker.create_partitions("t", 8)
    r = _beat(broker, "g", m, r.member_epoch, dict(r.assignment))
    assert r.assignment == {topic_id: frozenset(range(8))}


def test_broker_tick_fences_a_silent_member_after_the_session_timeout(broker):
    a, b = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))
    _join(broker, "g", a)
    _join(broker, "g", b)
    broker.clock.advance(44_999)
    broker.tick()
    assert len(broker.consumer_group_describe(["g"])[0]["members"]) == 2
    broker.clock.advance(1)
    broker.tick()
    assert broker.consumer_group_describe(["g"])[0]["members"] == []


def test_offset_commit_checks_the_member_epoch(broker):
    m = str(uuid.UUID(int=3))
    r = _join(broker, "g", m)
    tp = TopicPartition("t", 0)
    with pytest.raises(StaleMemberEpochError, match="received member epoch 0 does not match the expected member "
                                                    "epoch 1"):
        broker.offset_commit("g", m, 0, {tp: 5})
    with pytest.raises(UnknownMemberIdError, match=r"Member nobody is not a member of group g\."):
        broker.offset_commit("g", "nobody", 1, {tp: 5})
    with pytest.raises(UnsupportedVersionError, match="OffsetCommit version 9 or above"):
        broker.offset_commit("g", m, r.member_epoch, {tp: 5}, api_version=8)
    broker.offset_commit("g", m, r.member_epoch, {tp: 5})
    assert broker.offset_fetch("g")[tp].offset == 5
    assert broker.offset_fetch("g", member_id=m, member_epoch=r.member_epoch)[tp].offset == 5
    with pytest.raises(StaleMemberEpochError):
        broker.offset_fetch("g", member_id=m, member_epoch=r.member_epoch + 1)
    # the committed offset's holder never shows as a second (classic) group
    assert [g["group_id"] for g in broker.list_groups()] == ["g"]


def test_a_group_id_is_one_type_and_mixed_groups_take_both_protocols(broker):
    """Kafka 4: a JoinGroup for a consumer group with members joins it (answered at once, no
    leader); a consumer-protocol member joining a classic group with members upgrades it. A
    JoinGroup that is not of the consumer protocol type cannot join a consumer group."""
    m = str(uuid.UUID(int=4))
    _join(broker, "cg", m)
    sub = encode_subscription({"topics": ["t"]})
    with pytest.raises(InconsistentGroupProtocolError, match="protocols are not supported"):
        broker.join_group("cg", "", protocols=[("range", sub)], protocol_type="connect", session_timeout_ms=10_000)
    joined = broker.join_group("cg", "", protocols=[("range", sub)], protocol_type="consumer",
                               session_timeout_ms=10_000)
    assert (joined.status, joined.leader_id, joined.protocol_name, joined.members) == ("complete", "", "range", ())
    desc = broker.describe_group("cg")
    assert desc["type"] == "consumer" and desc["generation"] == joined.generation_id == 2
    assert {x["member_id"]: x["member_type"] for x in desc["members"]} == {m: "consumer", joined.member_id: "classic"}

    broker.join_group("classic", "", protocols=[("range", sub)], protocol_type="consumer", session_timeout_ms=10_000)
    _join(broker, "classic", str(uuid.UUID(int=5)))
    assert broker.describe_group("classic")["type"] == "consumer"


def test_without_the_migration_policy_a_classic_group_with_members_stays_classic(tmp_path):
    with Broker(tmp_path / "d", broker_configs={"group.consumer.migration.policy": "downgrade"}) as b:
        b.create_topic("t", 1)
        b.join_group("classic", "", protocols=[("range", encode_subscription({"topics": ["t"]}))],
                     protocol_type="consumer", session_timeout_ms=10_000)
        with pytest.raises(GroupIdNotFoundError, match="Group classic is not a consumer group"):
            _join(b, "classic", str(uuid.UUID(int=5)))
        assert b.list_groups()[0]["type"] == "classic"


def test_an_empty_consumer_group_gives_its_id_to_a_classic_join(broker):
    m = str(uuid.UUID(int=6))
    r = _join(broker, "g", m)
    _beat(broker, "g", m, -1, None)
    result = broker.join_group("g", "", protocols=[("range", b"")], protocol_type="consumer",
                               session_timeout_ms=10_000)
    assert result.member_id
    assert [(g["group_id"], g["type"]) for g in broker.list_groups()] == [("g", "classic")]
    assert r.member_epoch == 1


def test_without_the_consumer_protocol_the_heartbeat_is_unsupported(tmp_path):
    with Broker(tmp_path / "d", broker_configs={"group.coordinator.rebalance.protocols": "classic"}) as b:
        with pytest.raises(UnsupportedVersionError, match="group.coordinator.rebalance.protocols=classic"):
            _join(b, "g", str(uuid.UUID(int=1)))


@pytest.mark.parametrize("configs, message", [
    ({"group.consumer.heartbeat.interval.ms": 45_000, "group.consumer.max.heartbeat.interval.ms": 60_000},
     "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
    ({"group.consumer.assignors": "uniform,sticky"}, "sticky"),
    ({"group.coordinator.rebalance.protocols": "classic,share"}, "group.coordinator.rebalance.protocols"),
])
def test_bad_consumer_group_broker_configs_fail_when_the_broker_opens(tmp_path, configs, message):
    with pytest.raises(InvalidConfigurationError, match=message):
        Broker(tmp_path / "d", broker_configs=configs)


def test_delete_groups_deletes_an_empty_consumer_group_and_its_offsets(broker):
    m = str(uuid.UUID(int=8))
    r = _join(broker, "g", m)
    broker.offset_commit("g", m, r.member_epoch, {TopicPartition("t", 1): 3})
    with pytest.raises(NonEmptyGroupError, match="The group is not empty."):
        broker.delete_group("g")
    _beat(broker, "g", m, -1, None)
    broker.delete_group("g")
    assert broker.list_groups() == [] and broker.offset_fetch("g") == {}
    with pytest.raises(GroupIdNotFoundError):
        broker.delete_group("g")


def test_offset_delete_keeps_the_offsets_of_subscribed_topics(broker):
    broker.create_topic("other", 1)
    m = str(uuid.UUID(int=9))
    r = _join(broker, "g", m)
    broker.offset_commit("g", m, r.member_epoch, {TopicPartition("t", 0): 4, TopicPartition("other", 0): 2})
    result = broker.delete_offsets("g", [TopicPartition("t", 0), TopicPartition("other", 0)])
    assert isinstance(result[TopicPartition("t", 0)], GroupSubscribedToTopicError)
    assert result[TopicPartition("other", 0)] is None
    assert {tp: om.offset for tp, om in broker.offset_fetch("g").items()} == {TopicPartition("t", 0): 4}


def test_a_closed_broker_answers_coordinator_not_available(tmp_path):
    b = Broker(tmp_path / "d")
    b.create_topic("t", 1)
    _join(b, "g", str(uuid.UUID(int=1)))
    b.close()
    with pytest.raises(CoordinatorNotAvailableError):
        _join(b, "g", str(uuid.UUID(int=2)))
    with pytest.raises(CoordinatorNotAvailableError):
        b.consumer_group_describe(["g"])
    assert b.tick_consumer_groups() == []
