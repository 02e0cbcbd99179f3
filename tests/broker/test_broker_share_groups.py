"""The broker's share group API (KIP-932) on a real in-process Broker: heartbeats, ShareFetch of
whole stored batches, acknowledgements, timers on Broker.tick(), one id space with consumer and
classic groups, the admin calls, and the in-flight state surviving a restart exactly."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.broker.cluster import Cluster
from kafkasim.clock import MockClock
from kafkasim.errors import (
    FencedMemberEpochError, GroupIdNotFoundError, GroupMaxSizeReachedError, InvalidRecordStateError,
    InvalidRequestError, NonEmptyGroupError, UnknownMemberIdError, UnknownTopicOrPartitionError,
)
from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kafkasim.protocol.share_group import (
    ACKNOWLEDGE_ACCEPT as ACCEPT, ACKNOWLEDGE_REJECT as REJECT, ACKNOWLEDGE_RELEASE as RELEASE,
    AcknowledgementBatch as Ack, AcquiredRecords,
)
from kafkasim.records import record_batch as rb
from kafkasim.records.framing import iter_batches
from kafkasim.types import TopicPartition

T0 = 1_700_000_000_000
TP = TopicPartition("t", 0)
EARLIEST = {"share.auto.offset.reset": "earliest"}


def _produce(b, batches=3, per=4, partition=0):
    for i in range(batches):
        b.produce("t", partition, rb.encode_batch(0, [(j, T0, b"k", b"v%d-%d" % (i, j), ()) for j in range(per)]))


@pytest.fixture
def clock():
    return MockClock(T0)


@pytest.fixture
def broker(tmp_path, clock):
    b = Broker(tmp_path / "d", clock=clock, broker_configs=EARLIEST)
    b.create_topic("t", 2)
    _produce(b)
    yield b
    b.close()


def _values(records: bytes) -> list[bytes]:
    return [r[3] for pos, h in iter_batches(records) for r in rb.decode_records(records, pos, h)]


def test_join_fetch_acknowledge(broker):
    r = broker.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"], client_id="c1")
    assert (r.member_id, r.member_epoch, r.heartbeat_interval_ms, r.assignment) == ("m1", 1, 5_000, {"t": [0, 1]})
    assert broker.share_group_heartbeat("g", "m1", 1).assignment is None          # unchanged
    got = broker.share_fetch("g", "m1", [TP], max_records=6)[TP]
    # two whole stored batches: a batch never delivered is taken whole; one range per batch, as Kafka
    assert got.acquired == [AcquiredRecords(0, 3, 1), AcquiredRecords(4, 7, 1)]
    assert got.error is None and got.acknowledge_error is None
    assert _values(got.records) == [b"v0-%d" % j for j in range(4)] + [b"v1-%d" % j for j in range(4)]
    assert (got.high_watermark, got.log_start_offset) == (12, 0)
    assert broker.share_acknowledge("g", "m1", {TP: [Ack(0, 7, (ACCEPT,))]}) == {TP: None}
    assert broker.describe_share_group_offsets("g")[TP] == {"start_offset": 8, "leader_epoch": 0, "lag": 4}


def test_acknowledgements_ride_on_the_next_fetch(broker):
    broker.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
    broker.share_fetch("g", "m1", [TP], max_records=4)
    got = broker.share_fetch("g", "m1", [TP], max_records=4, acknowledgements={TP: [Ack(0, 3, (RELEASE,))]})[TP]
    assert got.acknowledge_error is None and got.acquired == [AcquiredRecords(0, 3, 2)]
    other = TopicPartition("t", 1)
    only_acked = broker.share_fetch("g", "m1", [], acknowledgements={TP: [Ack(0, 3, (REJECT,))]})
    assert list(only_acked) == [TP] and only_acked[TP].acquired == [] and other not in only_acked
    assert broker.describe_share_group_offsets("g", [TP])[TP]["start_offset"] == 4


def test_two_members_never_hold_the_same_record(broker):
    for m in ("m1", "m2"):
        broker.share_group_heartbeat("g", m, 0, subscribed_topic_names=["t"])
    a = broker.share_fetch("g", "m1", [TP], max_records=4)[TP].acquired
    b = broker.share_fetch("g", "m2", [TP], max_records=4)[TP].acquired
    assert a == [AcquiredRecords(0, 3, 1)] and b == [AcquiredRecords(4, 7, 1)]
    err = broker.share_acknowledge("g", "m2", {TP: [Ack(0, 0, (ACCEPT,))]})[TP]
    assert isinstance(err, InvalidRecordStateError) and err.errno == 121


def test_max_bytes_returns_at_least_one_whole_batch(broker):
    broker.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
    got = broker.share_fetch("g", "m1", [TP], max_bytes=10)[TP]
    assert len(list(iter_batches(got.records))) == 1 and got.acquired == [AcquiredRecords(0, 3, 1)]


def test_latest_is_the_default_start(tmp_path, clock):
    with Broker(tmp_path / "d", clock=clock) as b:
        b.create_topic("t", 1)
        _produce(b, batches=1)
        b.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
        assert b.share_fetch("g", "m1", [TP])[TP].acquired == []
        _produce(b, batches=1)
        assert b.share_fetch("g", "m1", [TP])[TP].acquired == [AcquiredRecords(4, 7, 1)]


def test_heartbeat_errors(broker):
    with pytest.raises(InvalidRequestError, match="MemberId can't be empty"):
        broker.share_group_heartbeat("g", "", 0, subscribed_topic_names=["t"])
    with pytest.raises(InvalidRequestError, match="SubscribedTopicNames must be set in first request"):
        broker.share_group_heartbeat("g", "m1", 0)
    with pytest.raises(GroupIdNotFoundError, match="Share group g not found."):
        broker.share_group_heartbeat("g", "m1", 3)
    broker.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
    with pytest.raises(UnknownMemberIdError):
        broker.share_group_heartbeat("g", "m2", 3)
    with pytest.raises(FencedMemberEpochError):
        broker.share_group_heartbeat("g", "m1", 7)
    with pytest.raises(UnknownMemberIdError):
        broker.share_fetch("g", "nobody", [TP])


def test_group_max_size(tmp_path, clock):
    with Broker(tmp_path / "d", clock=clock, broker_configs={"group.share.max.size": 1}) as b:
        b.create_topic("t", 1)
        b.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
        with pytest.raises(GroupMaxSizeReachedError, match="maximum capacity of 1 members"):
            b.share_group_heartbeat("g", "m2", 0, subscribed_topic_names=["t"])


def test_leaving_releases_every_record_held(broker):
    for m in ("m1", "m2"):
        broker.share_group_heartbeat("g", m, 0, subscribed_topic_names=["t"])
    broker.share_fetch("g", "m1", [TP], max_records=4)
    assert broker.share_group_heartbeat("g", "m1", -1).member_epoch == -1
    assert broker.share_fetch("g", "m2", [TP], max_records=4)[TP].acquired == [AcquiredRecords(0, 3, 2)]


def test_session_close_releases_but_keeps_the_member(broker):
    broker.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
    broker.share_fetch("g", "m1", [TP], max_records=4)
    broker.share_session_close("g", "m1")
    assert broker.share_partition_state("g", TP).owners() == {}
    assert broker.share_group_describe(["g"])[0]["members"][0]["member_id"] == "m1"


def test_tick_expires_locks_and_fences_silent_members(broker, clock):
    broker.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
    broker.share_fetch("g", "m1", [TP], max_records=4)
    assert not broker.tick_share_groups()                       # nothing due: false
    clock.advance(30_000)
    broker.tick()
    assert broker.share_partition_state("g", TP).owners() == {}
    broker.share_fetch("g", "m1", [TP], max_records=4)
    clock.advance(15_000)
    assert broker.tick_share_groups()["fenced"] == [("g", "m1")]
    assert broker.share_partition_state("g", TP).owners() == {} and broker.list_share_groups()[0]["group_state"] == "Empty"


def test_one_id_space(broker):
    broker.share_group_heartbeat("s", "m1", 0, subscribed_topic_names=["t"])
    with pytest.raises(GroupIdNotFoundError, match="Group s is not a consumer group"):
        broker.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
            "s", "x", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), topic_partitions={}))
    with pytest.raises(GroupIdNotFoundError, match="Group s is not a classic group."):
        broker.join_group("s", protocols=[("range", b"")])
    broker.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        "c", "x", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("t",), topic_partitions={}))
    broker.join_group("k", protocols=[("range", b"")])
    for gid in ("c", "k"):
        with pytest.raises(GroupIdNotFoundError, match=f"Group {gid} is not a share group."):
            broker.share_group_heartbeat(gid, "m1", 0, subscribed_topic_names=["t"])
    assert {g["group_id"]: g["type"] for g in broker.list_groups()} == {"c": "consumer", "k": "classic", "s": "share"}
    assert broker.share_group_describe(["c"])[0]["error"].args[0] == "Group c is not a share group."


def test_describe_and_delete_through_the_group_calls(broker, clock):
    broker.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
    broker.share_fetch("g", "m1", [TP], max_records=4)
    desc = broker.describe_group("g")
    assert (desc["type"], desc["state"], desc["members"][0]["assignment"]) == (
        "share", "Stable", [TopicPartition("t", 0), TopicPartition("t", 1)])
    assert desc["partitions"][0]["start_offset"] == 0
    with pytest.raises(NonEmptyGroupError):
        broker.delete_group("g")
    broker.share_group_heartbeat("g", "m1", -1)
    broker.delete_group("g")
    assert broker.list_share_groups() == [] and broker.share_partition_state("g", TP) is None
    with pytest.raises(GroupIdNotFoundError):
        broker.delete_share_group("g")


def test_alter_and_delete_share_group_offsets(broker):
    assert broker.alter_share_group_offsets("g", {TP: 6, TopicPartition("nope", 0): 1})[TP] is None
    broker.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
    with pytest.raises(NonEmptyGroupError):
        broker.alter_share_group_offsets("g", {TP: 0})
    assert broker.share_fetch("g", "m1", [TP])[TP].acquired[0].first_offset == 6
    broker.share_group_heartbeat("g", "m1", -1)
    out = broker.delete_share_group_offsets("g", ["t", "nope"])
    assert out["t"] is None and isinstance(out["nope"], UnknownTopicOrPartitionError)
    assert broker.describe_share_group_offsets("g", [TP])[TP]["start_offset"] == -1


def test_in_flight_state_survives_a_restart_exactly(tmp_path, clock):
    d = tmp_path / "d"
    with Broker(d, clock=clock, broker_configs=EARLIEST) as b:
        b.create_topic("t", 1)
        _produce(b)
        b.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
        b.share_fetch("g", "m1", [TP], max_records=12)
        b.share_acknowledge("g", "m1", {TP: [Ack(0, 3, (ACCEPT,)), Ack(4, 5, (RELEASE,)), Ack(6, 6, (REJECT,))]})
        held = sorted(b.share_partition_state("g", TP).owners())        # 7..11 acquired at the close
        assert held == list(range(7, 12))
    with Broker(d, clock=clock, broker_configs=EARLIEST) as b:
        sp = b.share_partition_state("g", TP)
        assert sp.start_offset == 4 and sp.owners() == {}
        assert sp.state_batches() == [(4, 5, 0, 1), (6, 6, 4, 1), (7, 11, 0, 1)]
        desc = b.share_group_describe(["g"])[0]
        assert desc["group_epoch"] == 1 and desc["members"][0]["member_id"] == "m1"
        got = b.share_fetch("g", "m1", [TP], max_records=12)[TP].acquired
        # nothing acknowledged comes back; nothing unacknowledged is lost; delivery counts kept
        assert got == [AcquiredRecords(4, 5, 2), AcquiredRecords(7, 7, 2), AcquiredRecords(8, 11, 2)]


def test_a_restart_keeps_the_epochs(tmp_path, clock):
    d = tmp_path / "d"
    with Broker(d, clock=clock) as b:
        b.create_topic("t", 2)
        b.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
        b.share_group_heartbeat("g", "m2", 0, subscribed_topic_names=["t"])
    with Broker(d, clock=clock) as b:
        r = b.share_group_heartbeat("g", "m1", 1)
        assert (r.member_epoch, r.assignment) == (2, {"t": [0]})
        assert b.share_group_describe(["g"])[0]["group_epoch"] == 2


def test_a_cluster_serves_share_groups(tmp_path, clock):
    with Cluster(tmp_path / "c", brokers=[0, 1, 2], clock=clock, broker_configs=EARLIEST) as c:
        c.create_topic("t", 1, 3)
        c.produce("t", 0, rb.encode_batch(0, [(j, T0, None, b"v", ()) for j in range(3)]), acks="all")
        c.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
        assert c.share_fetch("g", "m1", [TP])[TP].acquired == [AcquiredRecords(0, 2, 1)]


def test_a_deleted_and_recreated_topic_starts_its_share_partitions_afresh(broker):
    broker.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
    broker.share_fetch("g", "m1", [TP], max_records=4)
    broker.delete_topic("t")
    broker.create_topic("t", 1)
    _produce(broker, batches=1)
    got = broker.share_fetch("g", "m1", [TP])[TP]
    assert got.acquired == [AcquiredRecords(0, 3, 1)]          # not the old topic's in-flight state


def _txn_batch(pid, epoch, seq):
    return rb.encode_batch(0, [(i, T0, None, b"tx%d" % (seq + i), ()) for i in range(2)], producer_id=pid,
                           producer_epoch=epoch, base_sequence=seq, attributes=rb.ATTR_TRANSACTIONAL)


def test_read_committed_acquires_below_the_lso_and_archives_aborted_records(tmp_path, clock):
    configs = dict(EARLIEST, **{"share.isolation.level": "read_committed"})
    with Broker(tmp_path / "d", clock=clock, broker_configs=configs) as b:
        b.create_topic("t", 1)
        pid, epoch = b.init_transactional_producer_id("tx", 60_000)
        b.add_partitions_to_txn("tx", pid, epoch, [("t", 0)])
        b.produce("t", 0, _txn_batch(pid, epoch, 0))                  # offsets 0..1
        b.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
        assert b.share_fetch("g", "m1", [TP])[TP].acquired == []      # held back by the open transaction
        b.end_txn("tx", pid, epoch, commit=False)                     # ABORT marker at 2
        b.add_partitions_to_txn("tx", pid, epoch, [("t", 0)])
        b.produce("t", 0, _txn_batch(pid, epoch, 2))                  # offsets 3..4
        b.end_txn("tx", pid, epoch, commit=True)                      # COMMIT marker at 5
        got = b.share_fetch("g", "m1", [TP])[TP]
        assert got.acquired == [AcquiredRecords(3, 4, 1)] and _values(got.records) == [b"tx2", b"tx3"]
        assert b.share_partition_state("g", TP).start_offset == 3     # 0..2 archived: aborted and its marker


def test_a_full_answer_acquires_nothing_it_does_not_return(broker):
    broker.share_group_heartbeat("g", "m1", 0, subscribed_topic_names=["t"])
    one = len(broker.fetch_batches("t", 0, 0, 1).batches[0][1])
    got = broker.share_fetch("g", "m1", [TP], max_bytes=one + 1)[TP]
    assert got.acquired == [AcquiredRecords(0, 3, 1)] and len(got.records) == one
    assert sorted(broker.share_partition_state("g", TP).owners()) == [0, 1, 2, 3]
