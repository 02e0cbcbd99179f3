"""Transactions over the wire (issue 23), with the real clients against ``kafkasim serve``.

- confluent-kafka and kafka-python transactional producers: init, a committed transaction,
  then an aborted one;
- read_committed consumers see exactly the committed records, read_uncommitted ones see
  both, and no control record reaches an application;
- a second producer with the same transactional id fences the first;
- ``send_offsets_to_transaction`` commits the group's offsets only with the transaction;
- DescribeTransactions / ListTransactions and read_committed ListOffsets answer on the wire.
"""

from __future__ import annotations

import time

import pytest

from tests.server import raw

pytestmark = pytest.mark.slow


def _create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(15)


def _consume(bootstrap: str, topic: str, isolation: str, expect: int, timeout: float = 15) -> list:
    """Every value a fresh confluent-kafka consumer reads from ``topic``, waiting until
    ``expect`` arrived (then a little longer, so extra records would show) or ``timeout``."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{isolation}-{time.monotonic_ns()}",
                  "isolation.level": isolation, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + timeout
    extra = None
    while time.monotonic() < deadline and (extra is None or time.monotonic() < extra):
        m = c.poll(0.2)
        if m is not None and not m.error():
            values.append(m.value())
        if len(values) >= expect and extra is None:
            extra = time.monotonic() + 1.0
    c.close()
    return values


def _ck_producer(bootstrap: str, tid: str):
    from confluent_kafka import Producer
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})


def test_confluent_kafka_commits_one_transaction_and_aborts_another(server):
    """init/begin/produce/commit, then begin/produce/abort: read_committed reads exactly the
    committed records in order, read_uncommitted reads both; no marker reaches either."""
    _create(server.bootstrap, "txc")
    p = _ck_producer(server.bootstrap, "ck-tx")
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(3):
        p.produce("txc", value=b"c%d" % i, partition=0)
    p.commit_transaction(15)
    p.begin_transaction()
    for i in range(2):
        p.produce("txc", value=b"a%d" % i, partition=0)
    p.flush(15)
    p.abort_transaction(15)
    assert _consume(server.bootstrap, "txc", "read_committed", 3) == [b"c0", b"c1", b"c2"]
    assert _consume(server.bootstrap, "txc", "read_uncommitted", 5) == [b"c0", b"c1", b"c2", b"a0", b"a1"]


def test_kafka_python_commits_one_transaction_and_aborts_another(server):
    from kafka import KafkaProducer
    _create(server.bootstrap, "txk")
    kp = KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="kp-tx")
    kp.init_transactions()
    kp.begin_transaction()
    for i in range(2):
        kp.send("txk", b"c%d" % i, partition=0)
    kp.commit_transaction()
    kp.begin_transaction()
    kp.send("txk", b"aborted", partition=0)
    kp.flush()
    kp.abort_transaction()
    kp.close(timeout=5)
    assert _consume(server.bootstrap, "txk", "read_committed", 2) == [b"c0", b"c1"]
    assert _consume(server.bootstrap, "txk", "read_uncommitted", 3) == [b"c0", b"c1", b"aborted"]


def test_open_transaction_holds_read_committed_back_and_list_offsets_answers_the_lso(server):
    """While a transaction is open, read_committed ListOffsets LATEST is the LSO (its first
    offset) and read_uncommitted the high watermark; Describe/ListTransactions show it Ongoing."""
    _create(server.bootstrap, "txo")
    p = _ck_producer(server.bootstrap, "open-tx")
    p.init_transactions(15)
    p.begin_transaction()
    p.produce("txo", value=b"x", partition=0)
    p.flush(15)
    with raw.connect(server.host, server.port) as sock:
        def latest(isolation):
            r = raw.call(sock, 2, 5, {"replica_id": -1, "isolation_level": isolation, "topics": [
                {"name": "txo", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                "timestamp": -1}]}]})
            return r.topics[0].partitions[0].offset
        assert (latest(0), latest(1)) == (1, 0)
        # (an unknown id is answered with TRANSACTIONAL_ID_NOT_FOUND and start time -1, as
        # Kafka writes it; kio's reader refuses a negative timestamp, so it is not asked here)
        described = raw.call(sock, 65, 0, {"transactional_ids": ["open-tx"]})
        states = {s.transactional_id: (int(s.error_code), s.transaction_state) for s in described.transaction_states}
        assert states == {"open-tx": (0, "Ongoing")}
        assert [t.topic for t in described.transaction_states[0].topics] == ["txo"]
        listed = raw.call(sock, 66, 1, {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [],
                                        "duration_filter": -1})
        assert [t.transactional_id for t in listed.transaction_states] == ["open-tx"]
        assert list(listed.unknown_state_filters) == ["Bogus"]
    p.commit_transaction(15)
    assert _consume(server.bootstrap, "txo", "read_committed", 1) == [b"x"]


def test_a_second_producer_with_the_same_id_fences_the_first(server):
    from confluent_kafka import KafkaException
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KPError
    _create(server.bootstrap, "txf")
    first = _ck_producer(server.bootstrap, "fenced-tx")
    first.init_transactions(15)
    first.begin_transaction()
    first.produce("txf", value=b"zombie", partition=0)
    first.flush(15)
    second = _ck_producer(server.bootstrap, "fenced-tx")
    second.init_transactions(30)          # aborts the first's open transaction
    with pytest.raises(KafkaException) as caught:
        first.commit_transaction(15)
    assert caught.value.args[0].fatal()
    second.begin_transaction()
    second.produce("txf", value=b"live", partition=0)
    second.commit_transaction(15)
    assert _consume(server.bootstrap, "txf", "read_committed", 1) == [b"live"]

    kp1 = KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="kp-fenced")
    kp1.init_transactions()
    kp2 = KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="kp-fenced")
    kp2.init_transactions()
    kp1.begin_transaction()
    kp1.send("txf", b"zombie2", partition=0)
    with pytest.raises(KPError) as kp_caught:
        kp1.commit_transaction()
    assert "Fenced" in type(kp_caught.value).__name__ or "fenced" in str(kp_caught.value).lower()
    kp1.close(timeout=2)
    kp2.close(timeout=5)


def test_send_offsets_to_transaction_commits_group_offsets_only_on_commit(server):
    from confluent_kafka import Consumer, TopicPartition
    _create(server.bootstrap, "txg")
    group = "txg-group"
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.subscribe(["txg"])
    deadline = time.monotonic() + 20
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    p = _ck_producer(server.bootstrap, "offsets-tx")
    p.init_transactions(15)

    def committed():
        return c.committed([TopicPartition("txg", 0)], 10)[0].offset

    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition("txg", 0, 7)], c.consumer_group_metadata(), 15)
    p.abort_transaction(15)
    assert committed() < 0                      # nothing committed by the aborted transaction
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition("txg", 0, 5)], c.consumer_group_metadata(), 15)
    p.commit_transaction(15)
    assert committed() == 5
    c.close()
