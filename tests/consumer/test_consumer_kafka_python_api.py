"""kafka-python's KafkaConsumer surface: group-less subscribe, subscribe(pattern=), topics(),
highwater(), metrics(), committed(metadata=True), timeout_ms=, ConsumerRecord's fields."""

from __future__ import annotations

import json

import pytest

from kafkasim import KafkaConsumer, KafkaProducer
from kafkasim.consumer import ConsumerRebalanceListener
from kafkasim.errors import IllegalStateError, InvalidArgumentError
from kafkasim.types import OffsetAndMetadata, TopicPartition


def fill(broker, clock, topic, partitions, n):
    broker.create_topic(topic, partitions)
    p = KafkaProducer(broker, clock=clock)
    for i in range(n):
        p.send(topic, key=f"k{i}".encode(), value=f"{topic}-{i}".encode())
    p.flush()


def drain(c, polls=60):
    out = []
    for _ in range(polls):
        for recs in c.poll(timeout_ms=100).values():
            out.extend(recs)
    return out


def test_kafka_consumer_topic_without_group_reads_every_partition_and_commits_nothing(broker, clock):
    fill(broker, clock, "t", 3, 30)
    c = KafkaConsumer(broker, "t", auto_offset_reset="earliest", consumer_timeout_ms=100)
    got = [m.value for m in c]
    assert sorted(got) == sorted(f"t-{i}".encode() for i in range(30))
    assert c.assignment() == {TopicPartition("t", p) for p in range(3)}
    with pytest.raises(IllegalStateError, match="needs a group_id"):
        c.commit()
    assert broker.list_groups() == []          # no group was joined or created


def test_a_group_less_subscription_picks_up_added_partitions_on_metadata_refresh(broker, clock):
    fill(broker, clock, "t", 1, 2)
    c = KafkaConsumer(broker, "t", auto_offset_reset="earliest", metadata_max_age_ms=1000)
    assert len(drain(c)) == 2
    broker.create_partitions("t", 2)
    broker.append_records("t", 1, [(clock.now_ms(), None, b"new", ())])
    assert c.poll() == {}                      # metadata not refreshed yet
    clock.advance(1000)
    assert [r.value for r in drain(c)] == [b"new"]
    assert c.position(TopicPartition("t", 0)) == 2      # the kept partition kept its position


@pytest.mark.parametrize("group_id", [None, "g"])
def test_subscribe_pattern_matches_topics_and_new_ones_on_refresh(broker, clock, group_id):
    fill(broker, clock, "orders-eu", 1, 2)
    fill(broker, clock, "payments", 1, 2)
    c = KafkaConsumer(broker, group_id=group_id, auto_offset_reset="earliest", metadata_max_age_ms=5000)
    c.subscribe(pattern="^orders-.*")
    assert {r.topic for r in drain(c)} == {"orders-eu"}
    assert c.subscription() == {"orders-eu"}
    fill(broker, clock, "orders-us", 1, 3)
    clock.advance(5000)
    got = drain(c, 100)
    assert [r.topic for r in got] == ["orders-us"] * 3
    assert c.subscription() == {"orders-eu", "orders-us"}


def test_subscribe_checks_its_arguments_like_kafka_python(broker):
    c = KafkaConsumer(broker, group_id="g")
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        c.subscribe(["a"], pattern="b.*")
    with pytest.raises(TypeError, match="listener must be a ConsumerRebalanceListener"):
        c.subscribe(["a"], listener=object())
    with pytest.raises(InvalidArgumentError, match="pattern"):
        c.subscribe(pattern="(")
    c.subscribe(["a"], listener=ConsumerRebalanceListener())


def test_topics_highwater_metrics_and_committed_with_metadata(broker, clock):
    fill(broker, clock, "t", 1, 5)
    tp = TopicPartition("t", 0)
    c = KafkaConsumer(broker, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False)
    assert c.topics() == {"t"}                 # __consumer_offsets is internal: left out
    c.assign([tp])
    assert c.highwater(tp) is None             # no fetch yet
    assert len(c.poll(max_records=2)[tp]) == 2
    assert c.highwater(tp) == 5
    assert c.metrics()["consumer-fetch-manager-metrics"]["records-lag-max"] == 3
    assert c.metrics()["consumer-fetch-manager-metrics"]["records-consumed-total"] == 2
    assert c.committed(tp) is None and c.committed(tp, metadata=True) is None
    c.commit({tp: OffsetAndMetadata(2, "batch-7", -1)})
    assert c.committed(tp) == 2
    assert c.committed(tp, metadata=True, timeout_ms=1000) == OffsetAndMetadata(2, "batch-7", -1)
    assert c.metrics()["consumer-coordinator-metrics"]["commit-total"] == 1
    with pytest.raises(IllegalStateError, match="No current assignment"):
        c.highwater(TopicPartition("t", 9))


def test_blocking_calls_take_timeout_ms(broker, clock):
    fill(broker, clock, "t", 1, 3)
    tp = TopicPartition("t", 0)
    c = KafkaConsumer(broker, group_id="g", auto_offset_reset="earliest")
    c.assign([tp])
    assert c.position(tp, timeout_ms=500) == 0
    assert c.beginning_offsets([tp], timeout_ms=500) == {tp: 0}
    assert c.end_offsets([tp], timeout_ms=500) == {tp: 3}
    assert c.offsets_for_times({tp: 0}, timeout_ms=500)[tp].offset == 0
    assert c.partitions_for_topic("t", timeout_ms=500) == {0}
    c.commit(timeout_ms=500)
    with pytest.raises(InvalidArgumentError, match="timeout_ms"):
        c.end_offsets([tp], timeout_ms=-1)


def test_consumer_record_has_kafka_pythons_fields_and_serialized_sizes(broker, clock):
    broker.create_topic("t", 1)
    # kafka-python calls (de)serializers on None too: None-safe ones keep the tombstone null
    p = KafkaProducer(broker, clock=clock, value_serializer=lambda v: None if v is None else json.dumps(v).encode())
    p.send("t", key=b"abc", value={"n": 1}, headers=[("trace", b"12345"), ("\u00e9", None)])
    p.send("t", value=None)
    p.flush()
    c = KafkaConsumer(broker, auto_offset_reset="earliest",
                      value_deserializer=lambda b: None if b is None else json.loads(b))
    c.assign([TopicPartition("t", 0)])
    first, second = drain(c)
    assert first._fields == (
        "topic", "partition", "leader_epoch", "offset", "timestamp", "timestamp_type", "key",
        "value", "headers", "checksum", "serialized_key_size", "serialized_value_size",
        "serialized_header_size")
    assert first.value == {"n": 1}
    assert first.serialized_key_size == 3
    assert first.serialized_value_size == len(b'{"n": 1}')          # bytes before deserializing
    assert first.serialized_header_size == len("trace") + 5 + 2     # "é" is 2 bytes in UTF-8
    assert (first.checksum, first.leader_epoch, first.timestamp_type) == (None, -1, 0)
    assert (second.serialized_key_size, second.serialized_value_size,
            second.serialized_header_size) == (-1, -1, -1)


def test_msgpack_serializers_as_kafka_pythons_readme_and_none_goes_through_them(broker, clock):
    # README.rst: KafkaProducer(value_serializer=msgpack.dumps), KafkaConsumer(value_deserializer=msgpack.loads)
    import msgpack

    broker.create_topic("t", 1)
    p = KafkaProducer(broker, clock=clock, value_serializer=msgpack.dumps)
    p.send("t", key=b"a", value={"order": 7, "amount": 1250, "items": ["pen", "ink"]})
    p.send("t", key=b"a", value=None)   # kafka-python calls the serializer on None: msgpack's nil
    p.flush()
    raw = KafkaConsumer(broker, auto_offset_reset="earliest")
    raw.assign([TopicPartition("t", 0)])
    first, second = drain(raw, polls=5)
    assert first.value == msgpack.dumps({"order": 7, "amount": 1250, "items": ["pen", "ink"]})
    assert second.value == b"\xc0"       # not a tombstone: as with kafka-python

    # a None-safe serializer keeps the tombstone
    p2 = KafkaProducer(broker, clock=clock, value_serializer=lambda v: None if v is None else msgpack.dumps(v))
    p2.send("t", key=b"a", value=None)
    p2.flush()
    seen = []
    c = KafkaConsumer(broker, auto_offset_reset="earliest",
                      value_deserializer=lambda b: seen.append(b) or (None if b is None else msgpack.loads(b)))
    c.assign([TopicPartition("t", 0)])
    got = drain(c, polls=5)
    assert [r.value for r in got] == [{"order": 7, "amount": 1250, "items": ["pen", "ink"]}, None, None]
    assert seen[-1] is None and got[-1].serialized_value_size == -1   # called on the null value too
