"""Consumer poll throughput (``poll_records_per_s``) beside mockafka-py's FakeConsumer loop.

Setup: an 8-partition topic with ``RECORDS`` records (16-byte keys, 100-byte values)
written in batches of 1,000 and flushed. Measured: a :class:`kafkasim.consumer.Consumer`
(manual assignment of all 8 partitions, ``auto_offset_reset=earliest``, default
``max_poll_records=500``) polling until it has read every record, best of 3.
Baseline, in the same run: mockafka-py's ``FakeConsumer.poll()`` loop (one message per
call) over ``BASELINE_RECORDS`` of the same records (its store is in memory; it is
measured on fewer records to keep the run short, and reported as a rate).
Also reported: ``group_poll_records_per_s`` (the same read as a group member, with
auto-commit, best of 2) and ``consumer_fetch_ceiling_records_per_s`` (``kafkasim.broker.fetch``
alone over the same records: the log's read cost, which bounds the consumer).
"""

from __future__ import annotations

import time

from benchmarks.common import figure, scratch_dir

RECORDS = 1_000_000
BASELINE_RECORDS = 100_000
PARTITIONS = 8
BATCH = 1_000


def _records(n_per_partition: int, p: int):
    value = b"v" * 100
    return [(1_700_000_000_000 + i, b"key-%012d" % (p * 10_000_000 + i), value, ())
            for i in range(n_per_partition)]


def _fill(broker) -> None:
    broker.create_topic("bench", PARTITIONS, configs={"segment.bytes": 64 * 1024 * 1024})
    per = RECORDS // PARTITIONS
    for p in range(PARTITIONS):
        recs = _records(per, p)
        for i in range(0, per, BATCH):
            broker.append_records("bench", p, recs[i:i + BATCH])
    broker.flush()


def _read_all(broker, **config) -> float:
    from kafkasim.consumer import Consumer
    from kafkasim.types import TopicPartition

    c = Consumer(broker, auto_offset_reset="earliest", enable_auto_commit=False, **config)
    c.assign([TopicPartition("bench", p) for p in range(PARTITIONS)])
    n = 0
    t0 = time.perf_counter()
    while n < RECORDS:
        for recs in c.poll().values():
            n += len(recs)
    dt = time.perf_counter() - t0
    c.close()
    return RECORDS / dt


def _read_all_group(broker, group_id: str) -> float:
    from kafkasim.consumer import Consumer

    c = Consumer(broker, "bench", group_id=group_id, auto_offset_reset="earliest",
                 heartbeat_thread=False, max_poll_records=1)
    n = 0
    while not c.assignment() or c.rebalance_pending:   # the join (initial delay: 3 s of real time)
        n += sum(len(r) for r in c.poll(timeout_ms=100).values())
    c.config["max_poll_records"] = 500
    t0 = time.perf_counter()
    while n < RECORDS:
        for recs in c.poll().values():
            n += len(recs)
    dt = time.perf_counter() - t0
    c.close()
    return RECORDS / dt


def _fetch_only(broker) -> float:
    """The ceiling: ``kafkasim.broker.fetch`` alone over the same records (what the log's read costs)."""
    per = RECORDS // PARTITIONS
    t0 = time.perf_counter()
    n = 0
    for p in range(PARTITIONS):
        offset = 0
        while offset < per:
            recs = broker.fetch("bench", p, offset, 1_048_576).records
            n += len(recs)
            offset = recs[-1].offset + 1
    return n / (time.perf_counter() - t0)


def _mockafka_rate() -> float:
    from mockafka import FakeConsumer, FakeProducer
    from mockafka.admin_client import FakeAdminClientImpl, NewTopic

    admin = FakeAdminClientImpl(clean=True)
    admin.create_topics([NewTopic(topic="bench", num_partitions=PARTITIONS)])
    producer = FakeProducer()
    per = BASELINE_RECORDS // PARTITIONS
    for p in range(PARTITIONS):
        for _, key, value, _ in _records(per, p):
            producer.produce(topic="bench", value=value, key=key, partition=p)
    consumer = FakeConsumer()
    consumer.subscribe(["bench"])
    n = 0
    t0 = time.perf_counter()
    while consumer.poll() is not None:
        n += 1
    dt = time.perf_counter() - t0
    if n != BASELINE_RECORDS:
        raise AssertionError(f"mockafka returned {n} of {BASELINE_RECORDS} records")
    return n / dt


def run() -> dict:
    from kafkasim.broker import Broker

    try:
        baseline = _mockafka_rate()
    except ImportError:
        baseline = None   # pip install -e '.[bench]'
    with scratch_dir() as d:
        with Broker(d) as broker:
            _fill(broker)
            rate = max(_read_all(broker) for _ in range(3))
            group_rate = max(_read_all_group(broker, f"bench-group-{i}") for i in range(2))
            fetch_rate = max(_fetch_only(broker) for _ in range(3))
    return {
        "poll_records_per_s": figure(rate, "records/s", baseline, "mockafka-py FakeConsumer.poll loop",
                                     target=">= 1,000,000 records/s"),
        "group_poll_records_per_s": figure(group_rate, "records/s", baseline,
                                           "mockafka-py FakeConsumer.poll loop"),
        "consumer_fetch_ceiling_records_per_s": figure(fetch_rate, "records/s"),
    }
