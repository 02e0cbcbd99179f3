"""The in-process broker: topics, validation, produce/fetch, idempotence, restart, threads."""

from __future__ import annotations

import os
import threading

import pytest

from kafkasim.broker import EARLIEST, LATEST, Broker
from kafkasim.errors import (
    InvalidConfigurationError, InvalidPartitionsError, InvalidProducerEpochError,
    InvalidReplicationFactorError, InvalidRequiredAcksError, InvalidTopicError, KafkaStorageError,
    OffsetOutOfRangeError, OutOfOrderSequenceNumberError, TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from kafkasim.records.record_batch import encode_batch


def batch(values, ts=1_000, **producer):
    return encode_batch(0, [(i, ts + i, b"k%d" % i, v, ()) for i, v in enumerate(values)], **producer)


def tree(path) -> list[str]:
    out = []
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            rel = os.path.relpath(os.path.join(root, name), path)
            if rel != ".lock":
                out.append(rel)
    return sorted(out)


def test_create_list_describe_delete(broker):
    broker.create_topic("orders", partitions=3, configs={"retention.ms": "3600000"})
    broker.create_topic("audit", partitions=1)
    assert broker.list_topics() == ["audit", "orders"]
    d = broker.describe_topic("orders")
    assert [p["partition"] for p in d["partitions"]] == [0, 1, 2]
    assert d["configs"] == {"retention.ms": 3600000}
    assert broker.topic_config("orders").retention_ms == 3_600_000
    assert broker.topic_config("audit").retention_ms == 604_800_000  # Kafka's default
    assert sorted(os.listdir(broker.data_dir)) == [".lock", "audit-0", "meta", "orders-0", "orders-1", "orders-2"]
    broker.delete_topic("orders")
    assert broker.list_topics() == ["audit"]
    assert not any(n.startswith("orders") for n in os.listdir(broker.data_dir))
    with pytest.raises(UnknownTopicOrPartitionError, match="orders"):
        broker.describe_topic("orders")


@pytest.mark.parametrize("name", ["../../etc", "", ".", "..", "a" * 250, "has space", "slash/x", "naïve", "a\x00b"])
def test_illegal_topic_names_are_rejected_and_touch_nothing(broker, name):
    before = tree(broker.data_dir)
    with pytest.raises(InvalidTopicError):
        broker.create_topic(name)
    assert tree(broker.data_dir) == before
    assert not os.path.exists(os.path.join(os.path.dirname(broker.data_dir), "etc-0"))


def test_topic_name_limits_match_kafka(broker):
    broker.create_topic("a" * 249)  # the longest legal name
    broker.create_topic("Ok.name_with-all-0123456789")
    with pytest.raises(InvalidTopicError, match="collides"):
        broker.create_topic("Ok_name_with-all-0123456789")
    with pytest.raises(TopicAlreadyExistsError, match="'Ok.name_with-all-0123456789' already exists"):
        broker.create_topic("Ok.name_with-all-0123456789")


@pytest.mark.parametrize("configs, message", [
    ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    ({"segment.bytes": "10"}, "Invalid value '10' for configuration segment.bytes: Value must be at least 14"),
    ({"retention.ms": "-2"}, "retention.ms: Value must be at least -1"),
    ({"cleanup.policy": "shred"}, "cleanup.policy: String must be one of: delete, compact"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "Value must be no more than 1"),
    ({"segment.ms": "soon"}, "Expected value to be a 64-bit integer"),
])
def test_bad_configs_are_rejected_with_name_and_range(broker, configs, message):
    before = tree(broker.data_dir)
    with pytest.raises(InvalidConfigurationError, match=message.replace(".", r"\.").replace("(", r"\(")):
        broker.create_topic("t", partitions=2, configs=configs)
    assert tree(broker.data_dir) == before
    assert broker.list_topics() == []


def test_bad_partition_and_replication_counts(broker):
    for bad in (0, -1, True, 1.5, "3"):
        with pytest.raises(InvalidPartitionsError, match=repr(bad) if not isinstance(bad, int) or isinstance(bad, bool) else str(bad)):
            broker.create_topic("t", partitions=bad)
    with pytest.raises(InvalidReplicationFactorError, match="replication_factor=0"):
        broker.create_topic("t", replication_factor=0)
    assert broker.list_topics() == []


def test_add_partitions_is_forward_only_with_kafkas_messages(broker):
    broker.create_topic("t", partitions=3)
    with pytest.raises(InvalidPartitionsError, match="Topic already has 3 partitions."):
        broker.create_partitions("t", 3)
    with pytest.raises(InvalidPartitionsError, match="Topic currently has 3 partitions, which is higher than the requested 2."):
        broker.create_partitions("t", 2)
    broker.create_partitions("t", 5)
    assert broker.partition_count("t") == 5
    assert broker.produce("t", 4, batch([b"v"])).base_offset == 0


def test_produce_fetch_round_trip_and_offsets(broker, clock):
    broker.create_topic("t", partitions=2)
    r1 = broker.produce("t", 1, batch([b"a", b"b", b"c"], ts=5_000))
    r2 = broker.produce("t", 1, batch([b"d"], ts=9_000))
    assert (r1.base_offset, r2.base_offset) == (0, 3)
    f = broker.fetch("t", 1, 0)
    assert [(r.offset, r.value) for r in f.records] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    assert (f.log_start_offset, f.high_watermark, f.log_end_offset) == (0, 4, 4)
    assert [r.offset for r in broker.fetch("t", 1, 2).records] == [2, 3]
    assert broker.fetch("t", 1, 4).records == []
    with pytest.raises(OffsetOutOfRangeError):
        broker.fetch("t", 1, 5)
    assert broker.list_offsets("t", 1, EARLIEST) == (0, -1)
    assert broker.list_offsets("t", 1, LATEST) == (4, -1)
    assert broker.list_offsets("t", 1, 5_001) == (1, 5_001)
    assert broker.list_offsets("t", 1, 6_000) == (3, 9_000)
    assert broker.list_offsets("t", 1, 9_001) == (-1, -1)
    with pytest.raises(UnknownTopicOrPartitionError, match="t-2"):
        broker.produce("t", 2, batch([b"x"]))
    with pytest.raises(UnknownTopicOrPartitionError, match="nope"):
        broker.fetch("nope", 0, 0)
    with pytest.raises(InvalidRequiredAcksError, match="2"):
        broker.produce("t", 0, batch([b"x"]), acks=2)


def test_log_append_time_stamps_the_broker_clock(broker, clock):
    broker.create_topic("t", configs={"message.timestamp.type": "LogAppendTime"})
    r = broker.produce("t", 0, batch([b"a", b"b"], ts=5))
    assert r.log_append_time == clock.now_ms()
    assert {rec.timestamp for rec in broker.fetch("t", 0, 0).records} == {clock.now_ms()}


def test_idempotent_retry_is_not_written_twice(broker):
    broker.create_topic("t")
    pid, epoch = broker.init_producer_id()
    first = broker.produce("t", 0, batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0))
    second = broker.produce("t", 0, batch([b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=2))
    retry = broker.produce("t", 0, batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0))
    assert retry.duplicate and retry.base_offset == first.base_offset == 0
    assert second.base_offset == 2 and not second.duplicate
    assert [r.value for r in broker.fetch("t", 0, 0).records] == [b"a", b"b", b"c"]
    assert [r.sequence for r in broker.fetch("t", 0, 0).records] == [0, 1, 2]
    with pytest.raises(OutOfOrderSequenceNumberError, match="5 \\(incoming seq. number\\), 2"):
        broker.produce("t", 0, batch([b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=5))
    broker.produce("t", 0, batch([b"e"], producer_id=pid, producer_epoch=epoch + 1, base_sequence=0))
    with pytest.raises(InvalidProducerEpochError, match="smaller than the last seen epoch 1"):
        broker.produce("t", 0, batch([b"y"], producer_id=pid, producer_epoch=epoch, base_sequence=3))
    assert broker.fetch("t", 0, 0).log_end_offset == 4


def test_restart_sees_topics_configs_records_and_producer_state(tmp_path, clock):
    d = tmp_path / "data"
    with Broker(d, clock=clock) as b:
        b.create_topic("t", partitions=2, configs={"segment.bytes": "1024", "cleanup.policy": "compact"})
        pid, _ = b.init_producer_id()
        for seq in range(0, 60, 3):
            b.produce("t", 1, batch([b"x" * 40] * 3, producer_id=pid, producer_epoch=0, base_sequence=seq))
        b.flush()
    with Broker(d, clock=clock) as b:
        assert b.list_topics() == ["t"]
        assert b.describe_topic("t")["configs"] == {"segment.bytes": 1024, "cleanup.policy": "compact"}
        assert b.describe_topic("t")["partitions"][1]["segments"] > 1
        assert [r.offset for r in b.fetch("t", 1, 0, max_bytes=1 << 20).records][:3] == [0, 1, 2]
        assert b.list_offsets("t", 1, LATEST) == (60, -1)
        # the last batch retried after the restart is still recognised as a duplicate
        again = b.produce("t", 1, batch([b"x" * 40] * 3, producer_id=pid, producer_epoch=0, base_sequence=57))
        assert again.duplicate and again.base_offset == 57
        assert b.init_producer_id()[0] > pid  # ids are never reused across restarts


def test_one_broker_per_data_dir(tmp_path):
    d = tmp_path / "data"
    b1 = Broker(d)
    with pytest.raises(KafkaStorageError, match="Failed to acquire lock"):
        Broker(d)
    b1.close()
    Broker(d).close()


def test_data_dir_that_is_a_file_is_rejected(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(KafkaStorageError, match="not a directory"):
        Broker(f)


def test_concurrent_producers_get_contiguous_offsets_and_intact_batches(broker):
    broker.create_topic("t", configs={"segment.bytes": "65536"})
    threads, per_thread, size = 6, 150, 7
    results: dict[int, list[int]] = {t: [] for t in range(threads)}

    def run(t: int) -> None:
        for i in range(per_thread):
            values = [b"%d:%d:%d" % (t, i, j) for j in range(size)]
            results[t].append(broker.produce("t", 0, batch(values)).base_offset)

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    bases = sorted(o for offs in results.values() for o in offs)
    assert bases == list(range(0, threads * per_thread * size, size))
    records = []
    offset = 0
    while offset < threads * per_thread * size:
        got = broker.fetch("t", 0, offset).records
        records.extend(got)
        offset = got[-1].offset + 1
    assert [r.offset for r in records] == list(range(threads * per_thread * size))
    for t, offs in results.items():  # each batch came back whole and in its own order
        for i, base in enumerate(offs):
            assert [r.value for r in records[base:base + size]] == [b"%d:%d:%d" % (t, i, j) for j in range(size)]


def test_auto_create_topic_follows_the_broker_configs(tmp_path):
    """Kafka's auto topic creation: auto.create.topics.enable (default true) creates a
    missing topic with num.partitions (default 1) and default.replication.factor (1)."""
    from kafkasim.errors import InvalidConfigurationError

    with Broker(tmp_path / "on", broker_configs={"num.partitions": "4"}) as b:
        assert b.auto_create_topic("fresh") == 4
        assert b.auto_create_topic("fresh") == 4          # existing: just its count
        assert b.describe_topic("fresh")["replication_factor"] == 1
    with Broker(tmp_path / "off", broker_configs={"auto.create.topics.enable": "false"}) as b:
        with pytest.raises(UnknownTopicOrPartitionError, match="auto.create.topics.enable=false"):
            b.auto_create_topic("fresh")
        assert b.list_topics() == []
    with pytest.raises(InvalidConfigurationError, match="num.partitions"):
        Broker(tmp_path / "bad", broker_configs={"num.partitions": 0})
    assert not (tmp_path / "bad").exists()
