"""Producer over a real broker on tmp_path: batching by size/linger/flush, futures, idempotence,
retries, the reorder lab, audit headers, config validation, and the 3-thread end-to-end run."""

from __future__ import annotations

import threading
from collections import defaultdict

import re

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import (
    IllegalStateError, InvalidArgumentError, InvalidConfigurationError, InvalidTimestampError,
    KafkaTimeoutError, NetworkError, RecordTooLargeError,
)
from kafkasim.types import PRODUCER_HEADER, SEQUENCE_HEADER
from kafkasim.producer import LOST_REQUEST, LOST_RESPONSE, Producer
from kafkasim.partitioning.partitioners import partition_for_key, partition_many


def read_all(broker, topic, partition):
    out, offset = [], 0
    while True:
        r = broker.fetch(topic, partition, offset)
        if not r.records:
            return out
        out.extend(r.records)
        offset = r.records[-1].offset + 1


def fail_first_attempt_of(batch_no, mode=LOST_REQUEST):
    return lambda tp, n, attempt: mode if n == batch_no and attempt == 1 else None


# ------------------------------------------------------------------ batching and futures

def test_send_returns_future_with_record_metadata(broker, clock):
    broker.create_topic("orders", partitions=4)
    p = Producer(broker, clock=clock)
    fut = p.send("orders", key=b"abc", value=b"v1")
    md = fut.get()
    assert (md.topic, md.partition, md.offset) == ("orders", 479470107 % 4, 0)
    assert md.timestamp == clock.now_ms()
    assert (md.serialized_key_size, md.serialized_value_size) == (3, 2)
    assert fut.succeeded() and fut.is_done and fut.exception is None
    rec = read_all(broker, "orders", md.partition)[0]
    assert (rec.key, rec.value, rec.headers) == (b"abc", b"v1", ())


def test_batch_is_sent_when_linger_passes_on_the_mock_clock(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, linger_ms=5)
    f1 = p.send("t", value=b"a")
    clock.advance(4)
    f2 = p.send("t", value=b"b")
    assert not f1.is_done and broker.describe_topic("t")["partitions"][0]["log_end_offset"] == 0
    clock.advance(1)
    p.poll()
    assert f1.is_done and f2.is_done
    assert [f1.value.offset, f2.value.offset] == [0, 1]
    assert p.metrics()["producer-metrics"]["batch-total"] == 1


def test_batch_is_sent_when_it_reaches_batch_size(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, batch_size=200, linger_ms=10_000)
    futs = [p.send("t", value=b"x" * 42) for _ in range(10)]     # 50 bytes each (8 overhead)
    assert [f.is_done for f in futs] == [True] * 8 + [False] * 2  # 4 per batch; 2 still open
    p.flush()
    assert all(f.is_done for f in futs)
    assert p.metrics()["producer-metrics"]["batch-total"] == 3


def test_callbacks_and_errbacks(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock)
    got = []
    p.send("t", value=b"a").add_callback(lambda tag, md: got.append((tag, md.offset)), "ok")
    p.flush()
    p.send("t", value=b"b").add_callback(lambda md: got.append(md.offset))
    p.flush()
    assert got == [("ok", 0), 1]


def test_close_flushes_and_then_refuses_sends(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock)
    f = p.send("t", value=b"a")
    p.close()
    assert f.get().offset == 0
    with pytest.raises(IllegalStateError, match="after producer has been closed"):
        p.send("t", value=b"b")


def test_serializers_and_partitions_for(broker, clock):
    broker.create_topic("t", partitions=3)
    p = Producer(broker, clock=clock, key_serializer=str.encode,
                 value_serializer=lambda v: repr(v).encode())
    md = p.send("t", key="abc", value={"n": 1}).get()
    assert md.partition == 479470107 % 3
    assert read_all(broker, "t", md.partition)[0].value == b"{'n': 1}"
    assert p.partitions_for("t") == {0, 1, 2}


# ------------------------------------------------------------------ validation (Kafka's messages)

def test_explicit_partition_out_of_range_is_a_clear_error(broker, clock):
    broker.create_topic("t", partitions=3)
    p = Producer(broker, clock=clock)
    assert p.send("t", value=b"v", partition=2).get().partition == 2
    with pytest.raises(InvalidArgumentError,
                       match=r"Invalid partition given with record: 3 is not in the range \[0\.\.\.3\)"):
        p.send("t", value=b"v", partition=3)
    with pytest.raises(InvalidArgumentError, match="Invalid partition: -1"):
        p.send("t", value=b"v", partition=-1)


def test_record_larger_than_max_request_size(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, max_request_size=1000)
    with pytest.raises(RecordTooLargeError, match="which is the value of the max.request.size"):
        p.send("t", value=b"x" * 1000)


def test_a_send_to_a_missing_topic_creates_it_as_kafkas_auto_create_does(broker, clock):
    """auto.create.topics.enable (broker, default true) and allow_auto_create_topics
    (client, default true): the topic is created with num.partitions (1) partitions."""
    p = Producer(broker, clock=clock)
    assert p.send("fresh", value=b"v").get().offset == 0
    assert broker.partition_count("fresh") == 1
    p.close()


def test_unknown_topic_times_out_like_kafka_metadata_wait_when_auto_creation_is_off(tmp_path, broker, clock):
    from kafkasim.broker import Broker

    p = Producer(broker, clock=clock, allow_auto_create_topics=False)
    with pytest.raises(KafkaTimeoutError, match="Topic nope not present in metadata"):
        p.send("nope", value=b"v")
    with Broker(tmp_path / "off", clock=clock, broker_configs={"auto.create.topics.enable": "false",
                                                               "num.partitions": 3}) as off:
        with pytest.raises(KafkaTimeoutError, match="auto.create.topics.enable=false"):
            Producer(off, clock=clock).send("nope", value=b"v")
        assert off.list_topics() == []
    assert "nope" not in broker.list_topics()


def test_non_bytes_key_or_value_without_serializer_is_kafka_pythons_type_error(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock)
    with pytest.raises(TypeError, match="Not supported type for key: <class 'str'>"):
        p.send("t", key="str", value=b"v")
    with pytest.raises(TypeError, match="Not supported type for value: <class 'str'>"):
        p.send("t", value="a str")
    p.flush()
    assert broker.list_offsets("t", 0, -1)[0] == 0     # nothing was queued


@pytest.mark.parametrize("kwargs, named", [
    ({"key": "str"}, "key='str'"), ({"key": 42}, "key=42"), ({"value": {"amount": 12}}, "value={'amount': 12}"),
])
def test_a_non_bytes_key_or_value_is_a_kafkasim_error_naming_the_argument_and_a_type_error(
        broker, clock, kwargs, named):
    from kafkasim.errors import KafkaSimError, SerializationError

    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock)
    with pytest.raises(SerializationError, match=re.escape(f"Producer.send({named})")) as info:
        p.send("t", **{"value": b"v", **kwargs})
    assert isinstance(info.value, TypeError) and isinstance(info.value, KafkaSimError)
    p.close()


def test_config_validation_uses_kafka_names_and_messages(broker, clock):
    with pytest.raises(InvalidConfigurationError,
                       match=r"Unrecognized producer config 'lingerms' \(did you mean 'linger_ms'\?\)"):
        Producer(broker, clock=clock, lingerms=5)
    with pytest.raises(InvalidConfigurationError, match="Invalid value 'two' for configuration acks"):
        Producer(broker, clock=clock, acks="two")
    with pytest.raises(InvalidConfigurationError, match="at most 5 to use the idempotent producer"):
        Producer(broker, clock=clock, enable_idempotence=True, max_in_flight_requests_per_connection=6)
    with pytest.raises(InvalidConfigurationError, match="Must set acks to all"):
        Producer(broker, clock=clock, enable_idempotence=True, acks=1)


def test_kafka_defaults(broker, clock):
    p = Producer(broker, clock=clock)
    c = p.config
    assert (c["acks"], c["batch_size"], c["linger_ms"], c["max_request_size"], c["retries"],
            c["max_in_flight_requests_per_connection"]) == ("all", 16384, 5, 1048576, 2**31 - 1, 5)
    assert p.idempotent                       # Kafka >= 3.0: on by default
    assert not Producer(broker, clock=clock, acks=1).idempotent   # silently off on conflict


# ------------------------------------------------------------------ headers for the audit

def test_stamped_headers_carry_identity_and_per_key_sequence(broker, clock):
    broker.create_topic("t", partitions=2)
    p = Producer(broker, clock=clock, client_id="app-1", stamp_headers=True)
    keys = [b"a", b"b", b"a", None, b"a", b"b", None]
    futs = [p.send("t", key=k, value=b"v", headers=[("user", b"h")]) for k in keys]
    p.flush()
    seqs = []
    for f in futs:
        md = f.get()
        rec = [r for r in read_all(broker, "t", md.partition) if r.offset == md.offset][0]
        h = dict(rec.headers)
        assert h["user"] == b"h" and h[PRODUCER_HEADER] == b"app-1"
        seqs.append(int(h[SEQUENCE_HEADER].decode("ascii")))
    assert seqs == [0, 0, 1, 0, 2, 1, 1]


def test_headers_are_off_by_default_in_the_library(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock)
    p.send("t", key=b"k", value=b"v")
    p.flush()
    assert read_all(broker, "t", 0)[0].headers == ()


# ------------------------------------------------------------------ idempotence, retries, reordering

def test_idempotent_batches_carry_producer_id_epoch_and_sequences(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, batch_size=100)
    for _ in range(9):
        p.send("t", value=b"x" * 22)
    p.flush()
    recs = read_all(broker, "t", 0)
    assert [r.sequence for r in recs] == list(range(9))
    assert len({r.producer_id for r in recs}) == 1 and recs[0].producer_id >= 0
    assert {r.producer_epoch for r in recs} == {0}


def test_idempotent_retry_after_lost_response_writes_no_duplicate(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, batch_size=100, fault_injector=fail_first_attempt_of(1, LOST_RESPONSE))
    futs = [p.send("t", value=b"%02d" % i + b"x" * 20) for i in range(12)]
    p.flush()
    recs = read_all(broker, "t", 0)
    assert len(recs) == 12
    assert [r.value[:2] for r in recs] == [b"%02d" % i for i in range(12)]
    assert [f.get().offset for f in futs] == list(range(12))
    m = p.metrics()["producer-metrics"]
    assert m["duplicate-batch-total"] == 1 and m["injected-fault-total"] == 1


def test_without_idempotence_a_lost_response_duplicates_the_batch(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, batch_size=100, acks=1, enable_idempotence=False,
                 fault_injector=fail_first_attempt_of(1, LOST_RESPONSE))
    for i in range(12):
        p.send("t", value=b"%02d" % i + b"x" * 20)
    p.flush()
    values = [r.value[:2] for r in read_all(broker, "t", 0)]
    assert len(values) == 15                     # batch #1 (3 records) written twice
    assert values.count(b"03") == 2


def test_reorder_lab_retry_lets_a_later_batch_land_first(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, batch_size=100, acks=1, enable_idempotence=False,
                 max_in_flight_requests_per_connection=5, fault_injector=fail_first_attempt_of(0))
    for i in range(12):
        p.send("t", key=b"k", value=b"%02d" % i + b"x" * 20)
    p.flush()
    values = [int(r.value[:2]) for r in read_all(broker, "t", 0)]
    assert values == [3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2]   # same key, out of order


def test_one_request_in_flight_never_reorders(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, batch_size=100, acks=1, enable_idempotence=False,
                 max_in_flight_requests_per_connection=1, fault_injector=fail_first_attempt_of(0))
    for i in range(12):
        p.send("t", key=b"k", value=b"%02d" % i + b"x" * 20)
    p.flush()
    assert [int(r.value[:2]) for r in read_all(broker, "t", 0)] == list(range(12))


def test_idempotence_keeps_order_when_a_middle_batch_is_lost(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, batch_size=100, fault_injector=fail_first_attempt_of(1))
    for i in range(15):
        p.send("t", key=b"k", value=b"%02d" % i + b"x" * 20)
    p.flush()
    recs = read_all(broker, "t", 0)
    assert [int(r.value[:2]) for r in recs] == list(range(15))
    assert [r.sequence for r in recs] == list(range(15))
    # batches #2.. were rejected by the broker as out of sequence, then retried in order
    assert p.metrics()["producer-metrics"]["record-retry-total"] > 3


def test_seeded_fault_rate_reorders_reproducibly(tmp_path):
    def run(path):
        clock = MockClock(0)
        b = Broker(path, clock=clock)
        b.create_topic("t", partitions=2)
        p = Producer(b, clock=clock, batch_size=100, acks=1, enable_idempotence=False,
                     fault_rate=0.3, seed=42)
        for i in range(60):
            p.send("t", key=b"k%d" % (i % 4), value=b"%02d" % i + b"x" * 20)
        p.flush()
        out = [[int(r.value[:2]) for r in read_all(b, "t", q)] for q in range(2)]
        b.close()
        return out
    a, b2 = run(tmp_path / "a"), run(tmp_path / "b")
    assert a == b2
    assert any(v != sorted(v) for v in a)       # some partition got reordered


def test_retries_zero_fails_the_batch_with_the_error(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, retries=0, acks=1, fault_injector=fail_first_attempt_of(0))
    f = p.send("t", value=b"v")
    p.flush()
    assert f.failed() and isinstance(f.exception, NetworkError)
    with pytest.raises(NetworkError, match="injected fault"):
        f.get()


def test_persistent_failure_expires_after_delivery_timeout(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, acks=1, delivery_timeout_ms=1000, retry_backoff_ms=100,
                 fault_injector=lambda tp, n, a: LOST_REQUEST)
    f = p.send("t", value=b"v")
    p.flush()
    # no time passed on the clock: the message says what was counted, not "1000 ms has passed"
    with pytest.raises(KafkaTimeoutError, match=r"10 attempts x retry.backoff.ms 100 reached "
                                                r"delivery.timeout.ms 1000 after 0 ms since batch creation"):
        f.get()


def test_a_delivery_timeout_that_really_passed_is_reported_in_kafkas_words(broker, clock):
    broker.create_topic("t", partitions=1)

    def slow_loss(tp, n, attempt):
        clock.advance(300)          # each lost attempt takes 300 ms of the producer's clock
        return LOST_REQUEST

    p = Producer(broker, clock=clock, acks=1, delivery_timeout_ms=1000, retry_backoff_ms=100,
                 fault_injector=slow_loss)
    f = p.send("t", value=b"v")
    p.flush()
    with pytest.raises(KafkaTimeoutError, match=r"t-0:1200 ms has passed since batch creation "
                                                r"\(delivery.timeout.ms 1000; after 4 attempts"):
        f.get()


def test_acks_zero_returns_offset_minus_one(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, acks=0)
    assert p.send("t", value=b"v").get().offset == -1
    assert len(read_all(broker, "t", 0)) == 1


# ------------------------------------------------------------------ partitioning through the producer

def test_keyless_records_are_sticky_until_batch_size(broker, clock):
    broker.create_topic("t", partitions=6)
    p = Producer(broker, clock=clock, batch_size=1000, seed=1)
    parts = [p.send("t", value=b"x" * 92).get().partition for _ in range(30)]   # 100 bytes each
    assert [len(set(parts[i:i + 10])) for i in range(0, 30, 10)] == [1, 1, 1]


def test_named_and_custom_partitioners(broker, clock):
    broker.create_topic("t", partitions=7)
    p = Producer(broker, clock=clock, partitioner="consistent_random")
    assert p.send("t", key=b"SheetJS", value=b"v").get().partition == 2647669026 % 7
    q = Producer(broker, clock=clock, partitioner=lambda key, parts, avail: 5)
    assert q.send("t", key=b"k", value=b"v").get().partition == 5


def test_adding_partitions_remaps_keys_after_metadata_refresh(broker, clock):
    broker.create_topic("t", partitions=2)
    p = Producer(broker, clock=clock, metadata_max_age_ms=1000)
    keys = [b"k%d" % i for i in range(50)]
    before = [p.send("t", key=k, value=b"v").get().partition for k in keys]
    broker.create_partitions("t", 5)
    clock.advance(1000)
    after = [p.send("t", key=k, value=b"v").get().partition for k in keys]
    assert before == partition_many(keys, 2).tolist() and after == partition_many(keys, 5).tolist()
    assert before != after


# ------------------------------------------------------------------ end to end

@pytest.mark.slow
def test_three_producer_threads_keep_per_key_order_and_retries_write_no_duplicate(tmp_path):
    clock = MockClock(1_700_000_000_000)
    broker = Broker(tmp_path / "data", clock=clock)
    broker.create_topic("events", partitions=6)
    n_per, n_keys = 100_000, 500
    errors, metrics = [], {}
    # idempotent producers (the default) under seeded faults: thread 0 loses responses
    # (retries that the broker must deduplicate), thread 1 loses requests (retries that
    # would reorder without idempotence), thread 2 runs clean
    faults = [dict(fault_rate=0.05, fault_mode=LOST_RESPONSE), dict(fault_rate=0.05), {}]

    def produce(idx):
        try:
            p = Producer(broker, clock=clock, client_id=f"thread-{idx}", stamp_headers=True,
                         linger_ms=5, seed=idx, **faults[idx])
            for i in range(n_per):
                p.send("events", key=b"key-%03d" % (i % n_keys), value=b"%d:%d" % (idx, i))
                if i % 2000 == 0:
                    clock.advance(1)
            p.close()
            metrics[idx] = p.metrics()["producer-metrics"]
        except Exception as exc:   # surface thread failures in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors

    total = 0
    for part in range(6):
        last = defaultdict(lambda: -1)
        for r in read_all(broker, "events", part):
            h = dict(r.headers)
            ident, seq = h[PRODUCER_HEADER], int(h[SEQUENCE_HEADER])
            assert seq == last[(ident, r.key)] + 1, (part, ident, r.key, seq)   # in order, no gap, no dup
            last[(ident, r.key)] = seq
            assert partition_for_key(r.key, 6) == part
            total += 1
        assert all(v == n_per // n_keys - 1 for v in last.values())
    assert total == 3 * n_per                                        # nothing lost, nothing twice
    assert metrics[0]["duplicate-batch-total"] > 0                   # retried batches were deduplicated
    assert metrics[1]["record-retry-total"] > 0 and metrics[2]["record-retry-total"] == 0
    broker.close()


def test_one_producer_shared_by_threads_keeps_per_key_sequence_order(broker, clock):
    broker.create_topic("shared", partitions=3)
    p = Producer(broker, clock=clock, client_id="shared", stamp_headers=True)

    def work(t):
        for i in range(3000):
            p.send("shared", key=b"key-%d" % (i % 7), value=b"%d" % t)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    p.close()
    counts = defaultdict(int)
    for part in range(3):
        last = {}
        for r in read_all(broker, "shared", part):
            seq = int(dict(r.headers)[SEQUENCE_HEADER])
            assert seq == last.get(r.key, -1) + 1
            last[r.key] = seq
            counts[r.key] += 1
    assert sum(counts.values()) == 9000


def test_background_sender_sends_a_lingering_batch_with_the_system_clock(tmp_path):
    b = Broker(tmp_path / "data")           # SystemClock
    try:
        b.create_topic("t", partitions=1)
        p = Producer(b, linger_ms=5)
        f = p.send("t", value=b"v")
        done = threading.Event()
        f.add_callback(lambda md: done.set())
        assert done.wait(5.0), "a lingering batch was never sent without flush()"
        assert f.value.offset == 0
        p.close()
    finally:
        b.close()


def test_get_on_a_lingering_record_sends_it_without_advancing_the_clock(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock, linger_ms=60_000)
    f = p.send("t", value=b"v")
    assert not f.is_done
    assert f.get(timeout=5).offset == 0


def test_a_custom_partitioner_returning_a_bad_partition_is_rejected(broker, clock):
    broker.create_topic("t", partitions=3)
    p = Producer(broker, clock=clock, partitioner=lambda key, parts, avail: -1)
    with pytest.raises(InvalidArgumentError, match=r"returned partition -1 for topic t"):
        p.send("t", key=b"k", value=b"v")


def test_explicit_timestamp_is_kept_and_a_negative_one_rejected(broker, clock):
    broker.create_topic("t", partitions=1)
    p = Producer(broker, clock=clock)
    assert p.send("t", value=b"v", timestamp_ms=1234).get().timestamp == 1234
    with pytest.raises(InvalidTimestampError, match="Invalid timestamp: -5"):
        p.send("t", value=b"v", timestamp_ms=-5)
