"""The library methods behind DeleteRecords, ListOffsets MAX_TIMESTAMP, ElectLeaders, the
partition reassignment APIs and OffsetDelete, on one broker (Kafka's answers for a
single-replica partition) — the cluster cases are in tests/cluster/test_admin_requests.py."""

from __future__ import annotations

import os

import pytest

from kafkasim.broker import MAX_TIMESTAMP, Broker
from kafkasim.errors import (
    ElectionNotNeededError, GroupIdNotFoundError, GroupSubscribedToTopicError, InvalidArgumentError,
    InvalidReplicaAssignmentError, InvalidTopicError, NoReassignmentInProgressError, OffsetOutOfRangeError,
    PolicyViolationError, UnknownTopicOrPartitionError,
)
from kafkasim.protocol.group import COMPLETE
from kafkasim.types import TopicPartition

T0 = TopicPartition("t", 0)


@pytest.fixture
def broker(tmp_path, clock):
    b = Broker(tmp_path / "data", clock=clock)
    b.create_topic("t", 1, configs={"segment.bytes": 200})
    yield b
    b.close()


def _fill(b, timestamps, key=b"k"):
    for ts in timestamps:
        b.append_records("t", 0, [(ts, key, b"v%d" % ts, ())])


def test_max_timestamp_is_the_first_offset_with_the_largest_timestamp(broker, clock):
    assert broker.list_offsets("t", 0, MAX_TIMESTAMP) == (-1, -1)          # empty log
    now = clock.now_ms()
    _fill(broker, [now - 5, now + 9, now - 1, now + 9, now])               # ties at offsets 1 and 3
    assert broker.describe_topic("t")["partitions"][0]["segments"] > 1
    assert broker.list_offsets("t", 0, MAX_TIMESTAMP) == (1, now + 9)
    with pytest.raises(InvalidArgumentError, match="-4"):
        broker.list_offsets("t", 0, -4)


def test_delete_records_moves_the_log_start_and_a_restart_keeps_it(tmp_path, broker, clock):
    now = clock.now_ms()
    _fill(broker, [now + i for i in range(10)])
    assert broker.delete_records("t", 0, 4) == 4
    assert broker.list_offsets("t", 0, -2) == (4, -1)
    assert [r.offset for r in broker.fetch("t", 0, 4).records][0] == 4
    with pytest.raises(OffsetOutOfRangeError):
        broker.fetch("t", 0, 3)
    assert broker.list_offsets("t", 0, now) == (4, now + 4)               # a time lookup starts there too
    assert broker.delete_records("t", 0, 2) == 4                          # never moves back
    assert broker.delete_records("t", 0, -1) == 10                        # -1: the high watermark
    broker.close()
    with Broker(tmp_path / "data", clock=clock) as again:
        assert again.list_offsets("t", 0, -2) == (10, -1)
        assert again.describe_topic("t")["partitions"][0]["log_start_offset"] == 10


def test_segments_wholly_below_the_log_start_go_at_the_next_retention_pass(broker, clock):
    now = clock.now_ms()
    _fill(broker, [now] * 10)
    before = broker.describe_topic("t")["partitions"][0]["segments"]
    broker.delete_records("t", 0, 9)
    assert broker.describe_topic("t")["partitions"][0]["segments"] == before   # not at once, as Kafka
    broker.run_log_maintenance()
    after = broker.log("t", 0).segments
    assert len(after) < before and after[0].base_offset <= 9
    assert broker.list_offsets("t", 0, -2) == (9, -1)


def test_delete_records_refuses_what_kafka_refuses_and_changes_nothing(tmp_path, broker, clock):
    _fill(broker, [clock.now_ms()] * 3)
    with pytest.raises(OffsetOutOfRangeError, match="larger than the high watermark 3"):
        broker.delete_records("t", 0, 4)
    with pytest.raises(OffsetOutOfRangeError, match="-2"):
        broker.delete_records("t", 0, -2)
    with pytest.raises(InvalidArgumentError, match="offset"):
        broker.delete_records("t", 0, "1")
    with pytest.raises(UnknownTopicOrPartitionError):
        broker.delete_records("t", 1, 0)
    broker.create_topic("c", 1, configs={"cleanup.policy": "compact"})
    with pytest.raises(PolicyViolationError, match="c-0"):
        broker.delete_records("c", 0, 0)
    broker.offset_commit("g", "", -1, {T0: 1})
    with pytest.raises(InvalidTopicError, match="__consumer_offsets"):
        broker.delete_records("__consumer_offsets", 0, 0)
    assert broker.list_offsets("t", 0, -2) == (0, -1)
    assert not os.path.exists(tmp_path / "data" / "t-0" / "log-start-offset")


def test_one_broker_answers_election_not_needed_as_kafka_does_for_one_replica(broker):
    for kind in ("preferred", "unclean"):
        result = broker.elect(kind, [T0, TopicPartition("nope", 0)])
        assert isinstance(result[T0], ElectionNotNeededError)
        assert isinstance(result[TopicPartition("nope", 0)], UnknownTopicOrPartitionError)
        assert broker.elect(kind) == {}                  # all partitions: the not-needed ones left out
    with pytest.raises(InvalidArgumentError, match="'sideways'"):
        broker.elect("sideways")


def test_one_broker_reassignment_answers(broker):
    assert broker.alter_partition_reassignments({T0: [0]}) == {T0: None}
    assert isinstance(broker.alter_partition_reassignments({T0: [1]})[T0], InvalidReplicaAssignmentError)
    assert isinstance(broker.alter_partition_reassignments({T0: []})[T0], InvalidReplicaAssignmentError)
    assert isinstance(broker.alter_partition_reassignments({T0: None})[T0], NoReassignmentInProgressError)
    assert isinstance(broker.alter_partition_reassignments({TopicPartition("x", 0): None})[TopicPartition("x", 0)],
                      UnknownTopicOrPartitionError)
    assert broker.list_partition_reassignments() == {}


def _member(b, group, topics):
    r = b.join_group(group, protocols=[("range", {"topics": topics})], rebalance_timeout_ms=1000)
    for _ in range(40):
        if r.status == COMPLETE:
            break
        b.clock.sleep(100)
        r = b.join_group(group, r.member_id, protocols=[("range", {"topics": topics})], rebalance_timeout_ms=1000)
    assert r.status == COMPLETE
    b.sync_group(group, r.member_id, r.generation_id, {r.member_id: [T0]})
    return r


def test_offset_delete_follows_kafkas_rules_and_survives_a_restart(tmp_path, broker, clock):
    broker.create_topic("u", 1)
    u0 = TopicPartition("u", 0)
    broker.offset_commit("g", "", -1, {T0: 5, u0: 7})
    result = broker.delete_offsets("g", [T0, TopicPartition("x", 0)])
    assert result[T0] is None and isinstance(result[TopicPartition("x", 0)], UnknownTopicOrPartitionError)
    assert set(broker.offset_fetch("g")) == {u0} and broker.offset_fetch("g")[u0].offset == 7
    with pytest.raises(GroupIdNotFoundError, match="'nogroup'"):
        broker.delete_offsets("nogroup", [T0])
    with pytest.raises(InvalidArgumentError, match="partitions"):
        broker.delete_offsets("g", "t-0")
    m = _member(broker, "live", ["t"])                   # a Stable group subscribed to t
    broker.offset_commit("live", m.member_id, m.generation_id, {T0: 1, u0: 2})
    result = broker.delete_offsets("live", [T0, u0])
    assert isinstance(result[T0], GroupSubscribedToTopicError) and result[u0] is None
    assert set(broker.offset_fetch("live")) == {T0}
    broker.close()
    with Broker(tmp_path / "data", clock=clock) as again:   # the tombstones were written
        assert set(again.offset_fetch("g")) == {u0}
        assert set(again.offset_fetch("live")) == {T0}
