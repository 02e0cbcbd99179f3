"""Real Kafka clients (kafka-python, aiokafka, confluent-kafka) against ``kafkasim serve``.

Each test names the behaviour it protects: records round-trip with keys, headers and
timestamps through each client; kafka-python's partitions are kafkasim's murmur2; an
idempotent producer writes no duplicates; committed offsets survive a restart.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.server.conftest import wait_until

pytestmark = pytest.mark.slow

TS0 = 1_700_000_000_000


def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def _expected(n: int):
    return [(b"key-%d" % i, b"value-%d" % i, [("trace", b"t%d" % i), ("empty", b"")], TS0 + i)
            for i in range(n)]


def _kafka_python_consume(bootstrap, topic, n, **config):
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=15_000, **config)
    out = []
    try:
        for m in consumer:
            out.append(m)
            if len(out) >= n:
                break
        if config.get("group_id"):
            consumer.commit()
    finally:
        consumer.close()
    return out


def test_kafka_python_round_trip_and_murmur2_partitions(server):
    """kafka-python: keys, headers and timestamps come back; partitions are murmur2's."""
    from kafka import KafkaProducer

    from kafkasim.partitioning.partitioners import partition_for_key

    _create_topic(server.bootstrap, "kp", 6)
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, linger_ms=5)
    sent = _expected(60)
    futures = [producer.send("kp", key=k, value=v, headers=h, timestamp_ms=ts) for k, v, h, ts in sent]
    metas = [f.get(timeout=15) for f in futures]
    producer.close()
    for (key, *_), md in zip(sent, metas):
        assert md.partition == partition_for_key(key, 6, "murmur2"), key
    got = _kafka_python_consume(server.bootstrap, "kp", 60)
    by_key = {m.key: m for m in got}
    assert len(by_key) == 60
    for key, value, headers, ts in sent:
        m = by_key[key]
        assert (m.value, list(m.headers), m.timestamp) == (value, headers, ts)
        assert m.partition == partition_for_key(key, 6, "murmur2")


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_aiokafka_round_trip_with_compression(server, compression):
    """aiokafka: compressed batches are decoded; records come back with headers and timestamps."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = f"aio-{compression}"
    sent = _expected(20)

    async def main():
        producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap, compression_type=compression,
                                    linger_ms=20)
        await producer.start()
        try:
            futs = [await producer.send(topic, key=k, value=v, headers=h, timestamp_ms=ts)
                    for k, v, h, ts in sent]
            await asyncio.gather(*futs)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=server.bootstrap,
                                    auto_offset_reset="earliest", group_id=f"g-{compression}")
        await consumer.start()
        got = []
        try:
            deadline = time.monotonic() + 20
            while len(got) < len(sent) and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    got.extend(records)
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(main())
    assert [(m.key, m.value, [(k, v) for k, v in m.headers], m.timestamp) for m in got] == \
        [(k, v, h, ts) for k, v, h, ts in sent]


def test_confluent_kafka_round_trip(server):
    """confluent-kafka (librdkafka): produce with headers and timestamps, consume them back."""
    from confluent_kafka import Consumer, Producer

    sent = _expected(30)
    producer = Producer({"bootstrap.servers": server.bootstrap, "compression.type": "zstd",
                         "linger.ms": 5})
    errors = []
    for k, v, h, ts in sent:
        producer.produce("ck", key=k, value=v, headers=h, timestamp=ts,
                         on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(20) == 0 and not errors
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "ck-group",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["ck"])
    got = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < len(sent) and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m)
    finally:
        consumer.close()
    assert [(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in got] == \
        [(k, v, h, ts) for k, v, h, ts in sent]


def test_idempotent_producer_writes_no_duplicates(server, tmp_path):
    """confluent-kafka with enable.idempotence=true: every record once, producer id kept."""
    from confluent_kafka import Producer

    _create_topic(server.bootstrap, "idem", 3)
    producer = Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True,
                         "linger.ms": 2, "batch.num.messages": 50})
    errors = []
    n = 1500
    for i in range(n):
        producer.produce("idem", key=b"k%d" % (i % 40), value=b"%d" % i,
                         on_delivery=lambda err, msg: err and errors.append(err))
        if i % 200 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0 and not errors
    server.stop()
    from kafkasim.broker import Broker

    with Broker(server.data_dir) as broker:
        records = [r for p in range(3) for r in broker.fetch("idem", p, 0, 64 << 20).records]
    values = sorted(int(r.value) for r in records)
    assert values == list(range(n))                       # nothing lost, nothing twice
    assert {r.producer_id for r in records} != {-1}       # written as an idempotent producer
    assert all(r.sequence >= 0 for r in records)


def test_committed_offsets_survive_restart(tmp_path, serve_process):
    """Offsets committed through the server are there after a restart (and the restart
    is clean: the address file is removed and the data dir lock released)."""
    import os

    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    data = tmp_path / "data"
    first = serve_process(data)
    _create_topic(first.bootstrap, "orders", 2)
    producer = KafkaProducer(bootstrap_servers=first.bootstrap)
    for i in range(20):
        producer.send("orders", key=b"k%d" % i, value=b"v%d" % i)
    producer.flush()
    producer.close()
    got = _kafka_python_consume(first.bootstrap, "orders", 20, group_id="billing",
                                enable_auto_commit=False)
    assert len(got) == 20
    assert os.path.exists(data / ".server.json")
    assert first.stop() == 0
    assert not os.path.exists(data / ".server.json")

    second = serve_process(data)
    consumer = KafkaConsumer(bootstrap_servers=second.bootstrap, group_id="billing",
                             enable_auto_commit=False)
    try:
        committed = {p: consumer.committed(TopicPartition("orders", p)) for p in range(2)}
    finally:
        consumer.close()
    ends = {p: sum(1 for m in got if m.partition == p) for p in range(2)}
    assert committed == ends
    # a new member of the group resumes after the commit: only the new records arrive
    producer = KafkaProducer(bootstrap_servers=second.bootstrap)
    producer.send("orders", key=b"later", value=b"new", partition=0).get(10)
    producer.close()
    again = _kafka_python_consume(second.bootstrap, "orders", 1, group_id="billing")
    assert [(m.key, m.value) for m in again] == [(b"later", b"new")]


def test_fetch_long_poll_returns_when_data_arrives(server):
    """A consumer waiting in Fetch gets a record produced meanwhile well before max_wait."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    _create_topic(server.bootstrap, "poll", 1)
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, fetch_max_wait_ms=10_000,
                             auto_offset_reset="earliest")
    tp = TopicPartition("poll", 0)
    consumer.assign([tp])
    consumer.poll(timeout_ms=500)   # connected, position resolved, a long poll parked
    producer = KafkaProducer(bootstrap_servers=server.bootstrap)
    start = time.monotonic()
    producer.send("poll", value=b"now").get(10)
    records = wait_until(lambda: consumer.poll(timeout_ms=200).get(tp), 8, 0, "the record")
    assert [r.value for r in records] == [b"now"]
    assert time.monotonic() - start < 8
    producer.close()
    consumer.close()
