"""A group of three real consumers (confluent-kafka / librdkafka) over ``kafkasim serve``.

For each assignment strategy the consumers ask for (range, roundrobin,
cooperative-sticky): the group picks that strategy, the three split six partitions two
each, and when one leaves the other two take its partitions over and every record
produced — before and after the leave — is consumed (at least once).
"""

from __future__ import annotations

import time

import pytest

from tests.server.conftest import wait_until

pytestmark = pytest.mark.slow

PARTITIONS = 6


def _produce(bootstrap: str, start: int, n: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for i in range(start, start + n):
        producer.produce("group-topic", key=b"k%d" % i, value=b"%d" % i)
    assert producer.flush(20) == 0


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_consumers_split_six_partitions_and_take_over(server, strategy):
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic("group-topic", PARTITIONS, 1)])["group-topic"].result(15)
    _produce(server.bootstrap, 0, 300)

    group = f"g-{strategy}"
    consumers = [Consumer({"bootstrap.servers": server.bootstrap, "group.id": group,
                           "auto.offset.reset": "earliest", "partition.assignment.strategy": strategy,
                           "session.timeout.ms": 10_000, "heartbeat.interval.ms": 500,
                           "client.id": f"c{i}", "enable.auto.commit": True,
                           "auto.commit.interval.ms": 200})
                 for i in range(3)]
    seen: set[int] = set()
    live = list(consumers)

    def poll_all():
        for c in live:
            m = c.poll(0.05)
            if m is not None and not m.error():
                seen.add(int(m.value()))

    def assignments():
        return [sorted(tp.partition for tp in c.assignment()) for c in live]

    try:
        for c in consumers:
            c.subscribe(["group-topic"])

        def split_evenly():
            poll_all()
            parts = assignments()
            flat = sorted(p for ps in parts for p in ps)
            return flat == list(range(PARTITIONS)) and all(len(ps) == PARTITIONS // len(live) for ps in parts)

        wait_until(split_evenly, 60, 0, f"three {strategy} consumers to split six partitions")
        desc = admin.describe_consumer_groups([group])[group].result(10)
        assert desc.partition_assignor == strategy
        assert len(desc.members) == 3

        leaver = live.pop(0)
        leaver.close()                       # LeaveGroup: the other two rebalance
        _produce(server.bootstrap, 300, 300)
        wait_until(split_evenly, 60, 0, "two consumers to take over all six partitions")
        wait_until(lambda: poll_all() or len(seen) == 600, 60, 0, "every record to be consumed")
    finally:
        for c in live:
            c.close()
    assert seen == set(range(600))


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_kafka_python_consumers_split_and_take_over(server, strategy):
    """The same with kafka-python, each consumer polling in its own thread (its poll blocks
    while the group rebalances, as it would in three processes)."""
    import threading

    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.admin import NewTopic
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                "cooperative-sticky": CooperativeStickyAssignor}[strategy]
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic("group-topic", PARTITIONS, 1)])
    _produce(server.bootstrap, 0, 300)

    group = f"kp-{strategy}"
    lock = threading.Lock()
    seen: set[int] = set()
    assigned: dict[int, list[int]] = {}
    stops = [threading.Event() for _ in range(3)]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            consumer = KafkaConsumer("group-topic", bootstrap_servers=server.bootstrap, group_id=group,
                                     auto_offset_reset="earliest", partition_assignment_strategy=[assignor],
                                     heartbeat_interval_ms=500, session_timeout_ms=10_000,
                                     auto_commit_interval_ms=200, client_id=f"kp{i}")
            try:
                while not stops[i].is_set():
                    batch = consumer.poll(timeout_ms=100)
                    with lock:
                        for records in batch.values():
                            seen.update(int(r.value) for r in records)
                        assigned[i] = sorted(tp.partition for tp in consumer.assignment())
            finally:
                consumer.close()
                with lock:
                    assigned.pop(i, None)
        except BaseException as exc:  # surfaced by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()

    def split_evenly(n: int):
        with lock:
            parts = list(assigned.values())
        flat = sorted(p for ps in parts for p in ps)
        return (not errors and len(parts) == n and flat == list(range(PARTITIONS))
                and all(len(ps) == PARTITIONS // n for ps in parts))

    try:
        wait_until(lambda: split_evenly(3), 60, 0.1, f"three kafka-python {strategy} consumers to split")
        groups = admin.describe_groups([group])
        assert groups[group]["protocol_data"] == strategy
        stops[0].set()
        threads[0].join(30)
        _produce(server.bootstrap, 300, 300)
        wait_until(lambda: split_evenly(2), 60, 0.1, "two consumers to take over")
        wait_until(lambda: len(seen) == 600, 60, 0.1, "every record to be consumed")
    finally:
        for s in stops:
            s.set()
        for t in threads:
            t.join(30)
        admin.close()
    assert not errors, errors
    assert seen == set(range(600))
