"""The producer's future and RecordMetadata have kafka-python's API (kafka.future.Future,
kafka.producer.future.RecordMetadata): callbacks with args/kwargs, add_both, chain,
succeeded/failed/retriable, exception, and no tuple behaviour leaking out."""

from __future__ import annotations

import pytest

from kafkasim.errors import KafkaSimError
from kafkasim.producer import LOST_REQUEST, Future, FutureRecordMetadata, Producer, RecordMetadata


def test_record_metadata_has_kafka_pythons_fields_in_order(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock)
    md = p.send("t", key=b"k1", value=b"value", headers=[("h", b"xy"), ("\u00e9", None)]).get()
    assert RecordMetadata._fields == (
        "topic", "partition", "topic_partition", "offset", "timestamp", "log_start_offset",
        "checksum", "serialized_key_size", "serialized_value_size", "serialized_header_size")
    assert (md.topic, md.partition, md.offset, md.checksum) == ("t", 0, 0, None)
    assert (md.serialized_key_size, md.serialized_value_size) == (2, 5)
    assert md.serialized_header_size == 1 + 2 + 2      # UTF-8 key bytes + value bytes ("é" is 2)
    md2 = p.send("t", value=None).get()
    assert (md2.serialized_key_size, md2.serialized_value_size, md2.serialized_header_size) == (-1, -1, -1)


def test_the_future_is_not_a_tuple(broker, clock):
    broker.create_topic("t", partitions=1)
    fut = Producer(broker, clock=clock).send("t", value=b"a")
    assert not isinstance(fut, tuple)
    for name in ("count", "index", "__len__", "__getitem__", "__iter__"):
        assert not hasattr(fut, name), name
    with pytest.raises(TypeError):
        a, b = fut


def test_success_state_and_every_callback_kind(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock)
    got = []
    target = Future()
    fut = p.send("t", value=b"a")
    assert not fut.is_done and fut.value is None and fut.exception is None
    assert fut.add_callback(lambda tag, md, sep="": got.append(("cb", tag, sep, md.offset)), "x", sep="!") is fut
    fut.add_errback(lambda exc: got.append(("eb", exc)))
    fut.add_both(lambda tag, v: got.append(("both", tag, v.offset)), "y")
    fut.chain(target)
    p.flush()
    assert fut.is_done and fut.succeeded() and not fut.failed() and not fut.retriable()
    assert got == [("cb", "x", "!", 0), ("both", "y", 0)]
    assert target.succeeded() and target.value == fut.value
    # on a done future a callback runs at once, on the caller's thread
    fut.add_callback(lambda md: got.append(("late", md.offset)))
    assert got[-1] == ("late", 0)


def test_a_failed_future_calls_errbacks_and_says_whether_it_is_retriable(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, retries=0, enable_idempotence=False, fault_rate=1.0,
                 fault_mode=LOST_REQUEST)
    got = []
    target = Future()
    fut = p.send("t", value=b"a")
    fut.add_callback(lambda md: got.append("cb")).add_errback(lambda exc: got.append(type(exc)))
    fut.add_both(lambda v: got.append(("both", type(v))))
    fut.chain(target)
    p.flush()
    assert fut.failed() and not fut.succeeded() and fut.value is None
    assert isinstance(fut.exception, KafkaSimError) and fut.exception.retriable
    assert fut.retriable()
    assert got == [type(fut.exception), ("both", type(fut.exception))]
    assert target.failed() and target.exception is fut.exception and target.retriable()
    with pytest.raises(type(fut.exception)):
        fut.get()


def test_a_raising_callback_does_not_stop_the_others(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock)
    got = []
    fut = p.send("t", value=b"a")
    fut.add_callback(lambda md: 1 / 0)
    fut.add_callback(lambda md: got.append(md.offset))
    p.flush()
    assert got == [0]
    assert isinstance(fut, FutureRecordMetadata)
