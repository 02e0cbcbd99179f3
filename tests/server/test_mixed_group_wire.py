"""Kafka 4's mixed consumer groups over the wire: a classic kafka-python consumer and a
confluent-kafka consumer with ``group.protocol=consumer`` share one group on ``kafkasim serve``.

The classic member joins first (a classic group); the new-protocol member's first heartbeat
upgrades the group online to a consumer group with both in it, and the broker's ``uniform``
assignor splits the partitions; when the new-protocol member leaves, the group goes back to
the classic protocol and the classic member gets everything again."""

from __future__ import annotations

import threading
import time

import pytest

from tests.server import raw
from tests.server.conftest import wait_until
from tests.server.test_consumer_protocol_wire import PARTITIONS, TOPIC, _describe, _Member


class _ClassicMember(threading.Thread):
    """One kafka-python KafkaConsumer (the classic protocol) polling until told to stop."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="classic", daemon=True)
        from kafka import KafkaConsumer
        self.consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="g", client_id="classic",
                                      auto_offset_reset="earliest", session_timeout_ms=10_000,
                                      heartbeat_interval_ms=500, enable_auto_commit=True,
                                      auto_commit_interval_ms=500)
        self.received = 0
        self.partitions: set[int] = set()
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for records in self.consumer.poll(timeout_ms=100).values():
                    self.received += len(records)
                self.partitions = {tp.partition for tp in self.consumer.assignment()}
        except Exception as exc:      # noqa: BLE001  (reported by the test)
            self.errors.append(repr(exc))
        finally:
            self.consumer.close()


def _describe_classic(served) -> tuple[str, str]:
    with raw.connect(served.host, served.port) as sock:
        [group] = raw.call(sock, 15, 5, {"groups": ["g"], "include_authorized_operations": False}).groups
    return group.group_state, group.protocol_type


@pytest.mark.slow
def test_a_classic_and_a_new_protocol_consumer_share_a_group_and_it_converts_both_ways(server):
    from confluent_kafka import ConsumerGroupType, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    stop = threading.Event()

    def produce() -> None:
        p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5})
        i = 0
        while not stop.is_set():
            p.produce(TOPIC, value=b"v%d" % i, partition=i % PARTITIONS)
            i += 1
            p.poll(0)
            time.sleep(0.01)
        p.flush(10)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    classic = _ClassicMember(server.bootstrap)
    new = None
    try:
        classic.start()
        wait_until(lambda: classic.partitions == set(range(PARTITIONS)), timeout=60,
                   what="the classic member owning every partition")
        assert _describe_classic(server) == ("Stable", "consumer")

        # the new-protocol member joins: the group is upgraded, both are in it, uniform splits 3/3
        new = _Member(server.bootstrap, "new")
        new.start()
        wait_until(lambda: len(new.partitions) == 3 and len(classic.partitions) == 3
                   and not new.partitions & classic.partitions
                   and _describe(server, "g").group_state == "Stable", timeout=90,
                   what="the two members sharing the partitions 3/3")
        group = _describe(server, "g")
        assert (group.error_code, group.assignor_name) == (0, "uniform")
        types = {m.member_id: m.member_type for m in group.members}
        assert sorted(types.values()) == [0, 1], types       # one classic member (0), one consumer (1)
        assert all(m.member_epoch == group.group_epoch for m in group.members)
        desc = admin.describe_consumer_groups(["g"])["g"].result(30)
        assert desc.type == ConsumerGroupType.CONSUMER and len(desc.members) == 2
        # DescribeGroups (the classic API) does not describe a consumer group, as Kafka 4
        assert _describe_classic(server)[0] == "Dead"
        received = (classic.received, new.received)
        time.sleep(2.0)
        assert classic.received > received[0] and new.received > received[1], "a member stopped consuming"

        # the new-protocol member leaves: the group goes back to classic, one member owns all
        new.stop.set()
        assert new.closed.wait(30)
        wait_until(lambda: classic.partitions == set(range(PARTITIONS)) and _describe_classic(server)[0] == "Stable",
                   timeout=60, what="the classic member owning every partition again")
        assert _describe(server, "g").error_code != 0           # no consumer group "g" any more
        assert not classic.errors and not new.errors, (classic.errors, new.errors)
    finally:
        stop.set()
        producer.join(30)
        classic.stop.set()
        classic.join(30)
        if new is not None:
            new.stop.set()
            new.join(30)
