"""Bad arguments at the consumer's and the group API's entry points: an InvalidArgumentError
naming the bad value, raised before anything changes (hardening issue; kafkasim.arguments)."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.errors import InvalidArgumentError
from kafkasim.types import OffsetAndMetadata, TopicPartition

T0 = 1_700_000_000_000
TP = TopicPartition("t", 0)


@pytest.fixture
def b(tmp_path):
    broker = Broker(tmp_path / "data", clock=MockClock(T0))
    broker.create_topic("t", 2)
    broker.append_records("t", 0, [(T0, None, b"v%d" % i, ()) for i in range(3)])
    yield broker
    broker.close()


def test_commit_offsets_must_be_integers(b):
    c = Consumer(b, "t", group_id="g", clock=b.clock)
    with pytest.raises(InvalidArgumentError, match="'abc'"):
        c.commit({TopicPartition("t", 0): "abc"})
    with pytest.raises(InvalidArgumentError, match="'abc'"):
        b.offset_commit("g2", "", -1, {TopicPartition("t", 0): "abc"})
    c.close()


@pytest.mark.parametrize("offsets,message", [
    ({TP: 1.5}, "the offset committed for t-0 must be an int or an OffsetAndMetadata, got float: 1.5"),
    ({TP: True}, "got bool: True"),
    ({TP: OffsetAndMetadata("1")}, "the offset committed for t-0 must be an int, got str"),
    ({TP: OffsetAndMetadata(1, 5)}, "the metadata committed for t-0 must be a str"),
    ({("t", "0"): 1}, "a partition in offsets must be a TopicPartition"),
    ([(TP, 1)], "offsets must be a mapping"),
])
def test_a_standalone_commit_names_the_bad_entry_and_commits_nothing(b, offsets, message):
    with pytest.raises(InvalidArgumentError) as e:
        b.offset_commit("g", "", -1, offsets)
    assert message in str(e.value)
    assert b.offset_fetch("g") == {}


def test_a_valid_standalone_commit_still_works_and_sentinel_offsets_are_stored_as_kafka_does(b):
    """Kafka's coordinator stores any offset (admin tools commit -2/-1 to reset a group);
    OffsetFetch returns it, and readers treat a negative one as no committed offset."""
    b.offset_commit("g", "", -1, {("t", 0): 2, TopicPartition("t", 1): OffsetAndMetadata(0, "m")})
    assert b.offset_fetch("g") == {TP: OffsetAndMetadata(2), TopicPartition("t", 1): OffsetAndMetadata(0, "m")}
    b.offset_commit("g", "", -1, {TP: -2})
    assert b.offset_fetch("g", [TP]) == {TP: OffsetAndMetadata(-2)}
    rows = {r["partition"]: r for r in b.describe_group("g")["partitions"]}
    assert rows[0]["committed"] is None and rows[0]["lag"] is None      # shown as "-", as Kafka's tools do
    assert rows[1]["committed"] == 0
    c = Consumer(b, clock=b.clock, group_id="g", auto_offset_reset="latest")
    c.assign([TP])
    assert c.committed(TP) is None                 # kafka-python/Java: no committed offset
    assert c.position(TP) == 3                     # so auto_offset_reset decides where to start
    c.close()


@pytest.mark.parametrize("call,name", [
    (lambda c: c.seek(TP, "1"), "offset"),
    (lambda c: c.seek(TP, -1), "offset"),
    (lambda c: c.seek(("t", "0"), 1), "partition"),
    (lambda c: c.poll(timeout_ms="10"), "timeout_ms"),
    (lambda c: c.poll(max_records=0), "max_records"),
    (lambda c: c.pause("t-0"), "partition"),
    (lambda c: c.position(5), "partition"),
    (lambda c: c.committed(None), "partition"),
    (lambda c: c.beginning_offsets("t"), "partitions"),
    (lambda c: c.offsets_for_times({TP: "yesterday"}), "timestamp"),
    (lambda c: c.partitions_for_topic(7), "topic"),
    (lambda c: c.assign([TopicPartition("t", "0")]), "partition"),
])
def test_bad_arguments_name_themselves(b, call, name):
    c = Consumer(b, clock=b.clock, group_id="g", auto_offset_reset="earliest")
    c.assign([TP])
    with pytest.raises(InvalidArgumentError, match=name):
        call(c)
    assert c.assignment() == {TP}
    assert [r.value for r in c.poll()[TP]] == [b"v0", b"v1", b"v2"]
    c.close()


@pytest.mark.parametrize("topics", [[1], [b"t"], [None], 5])
def test_subscribe_takes_topic_names(b, topics):
    c = Consumer(b, clock=b.clock, group_id="g")
    with pytest.raises(InvalidArgumentError, match="topic"):
        c.subscribe(topics)
    assert c.subscription() == set()
    c.close()


def test_a_consumer_needs_a_broker(tmp_path):
    with pytest.raises(InvalidArgumentError, match="broker must be a kafkasim Broker"):
        Consumer(str(tmp_path), "t")


@pytest.mark.parametrize("call,error,name", [
    (lambda b: b.heartbeat(5, "m", 0), "InvalidGroupIdError", "invalid group id 5"),
    (lambda b: b.heartbeat("g", "m", "0"), "InvalidArgumentError", "generation_id"),
    (lambda b: b.sync_group("g", 7, 0), "InvalidArgumentError", "member_id"),
    (lambda b: b.offset_fetch("g", "t-0"), "InvalidArgumentError", "partitions"),
    (lambda b: b.offset_fetch("g", [("t", "0")]), "InvalidArgumentError", "partition"),
    (lambda b: b.offset_fetch(["g"]), "InvalidGroupIdError", "invalid group id"),
    (lambda b: b.delete_group(None), "InvalidGroupIdError", "invalid group id None"),
    (lambda b: b.describe_groups("g"), "InvalidArgumentError", "group_ids"),
    (lambda b: b.offset_commit("g", "", "-1", {TP: 1}), "InvalidArgumentError", "generation_id"),
])
def test_the_group_api_checks_its_arguments(b, call, error, name):
    with pytest.raises(Exception) as e:
        call(b)
    assert type(e.value).__name__ == error and name in str(e.value)
