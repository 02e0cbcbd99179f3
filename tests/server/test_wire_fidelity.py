"""The wire details that stopped real applications (issue 20), each with the real client.

- librdkafka >= 2.12 lists all topics with Metadata v9+ carrying 3 bytes past the schema's
  fields (librdkafka #5049); Kafka ignores them, so ``list_topics()`` must work;
- the leader's SyncGroup assignment bytes (with ``user_data``) reach each member unchanged;
- OffsetCommit stores the sentinel offsets admin tools commit (-1, -2) and OffsetFetch
  returns them, as Kafka's group coordinator does.
"""

from __future__ import annotations

import time

import pytest

from tests.server.conftest import wait_until

pytestmark = pytest.mark.slow


def test_confluent_kafka_lists_all_topics(server):
    """AdminClient().list_topics() and Producer.list_topics() with no topic: Metadata v12
    with librdkafka's trailing bytes is answered (before the fix: _TRANSPORT)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for fut in admin.create_topics([NewTopic("listed-a", 3, 1), NewTopic("listed-b", 1, 1)]).values():
        fut.result(15)
    md = admin.list_topics(timeout=15)
    assert {"listed-a", "listed-b"} <= set(md.topics)
    assert len(md.topics["listed-a"].partitions) == 3
    producer = Producer({"bootstrap.servers": server.bootstrap})
    assert {"listed-a", "listed-b"} <= set(producer.list_topics(timeout=15).topics)
    producer.flush(5)


def test_assignment_user_data_reaches_each_member_unchanged(server):
    """Two kafka-python consumers whose assignor puts per-member ``user_data`` in the
    assignment (as faust and Kafka Streams do): each member's ``on_assignment`` gets exactly
    the bytes the leader sent, and DescribeGroups returns them and the subscription bytes
    (before the fix: user_data came back None, and member metadata empty)."""
    import threading

    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.admin import NewTopic
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

    received: dict[int, bytes] = {}
    lock = threading.Lock()

    class Tagging(RoundRobinPartitionAssignor):
        name = "tagging"

        @classmethod
        def metadata(cls, topics):
            return ConsumerProtocolSubscription(0, sorted(topics), b"sub-user-data")

        @classmethod
        def assign(cls, cluster, members):
            plain = super().assign(cluster, members)
            return {mid: ConsumerProtocolAssignment(0, a.assigned_partitions, b"standby:" + mid.encode())
                    for mid, a in plain.items()}

        @classmethod
        def on_assignment(cls, assignment, generation):
            pass

    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic("tagged", 4, 1)])
    stop = threading.Event()
    errors: list[BaseException] = []
    ids: dict[int, str] = {}

    def run(i: int) -> None:
        class Mine(Tagging):
            @classmethod
            def on_assignment(cls, assignment, generation):
                with lock:
                    received[i] = assignment.user_data
        try:
            consumer = KafkaConsumer("tagged", bootstrap_servers=server.bootstrap, group_id="tagged-g",
                                     partition_assignment_strategy=[Mine], client_id=f"tag{i}",
                                     heartbeat_interval_ms=500, session_timeout_ms=10_000)
            try:
                while not stop.is_set():
                    consumer.poll(timeout_ms=100)
                    with lock:
                        ids[i] = consumer._coordinator._generation.member_id
            finally:
                consumer.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()

    def both_tagged():
        with lock:
            return (not errors and len(ids) == 2 and set(received) == {0, 1}
                    and all(received[i] == b"standby:" + m.encode() for i, m in ids.items()))

    try:
        wait_until(both_tagged, 60, 0.1, "both members to get their user_data")
        group = admin.describe_groups(["tagged-g"])["tagged-g"]
        assert group["protocol_data"] == "tagging"
        members = {m["member_id"]: m for m in group["members"]}
        assert set(members) == set(ids.values())
        for mid, m in members.items():
            assert m["member_assignment"]["user_data"] in ("standby:" + mid, b"standby:" + mid.encode())
            assert m["member_metadata"]["user_data"] in ("sub-user-data", b"sub-user-data")
            assert m["member_metadata"]["topics"] == ["tagged"]
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        admin.close()
    assert not errors, errors


def test_sentinel_offsets_are_stored_and_read_back_as_kafka_does(server):
    """OffsetCommit of -2 / -1 (what admin tools commit to reset a group) is stored and
    OffsetFetch returns it (before: INVALID_REQUEST); a consumer of that group then starts
    by its auto.offset.reset, as Kafka's consumers treat a negative committed offset."""
    from confluent_kafka import Consumer, Producer, TopicPartition as CTP
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.server import raw

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic("sentinel", 2, 1)])["sentinel"].result(15)
    producer = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(4):
        producer.produce("sentinel", value=b"v%d" % i, partition=i % 2)
    producer.flush(15)
    with raw.connect(server.host, server.port) as sock:
        commit = raw.call(sock, 8, 8, {"group_id": "reset-g", "generation_id_or_member_epoch": -1,
                                       "member_id": "", "group_instance_id": None, "topics": [
                                           {"name": "sentinel", "partitions": [
                                               {"partition_index": 0, "committed_offset": -2,
                                                "committed_leader_epoch": -1, "committed_metadata": ""},
                                               {"partition_index": 1, "committed_offset": -1,
                                                "committed_leader_epoch": -1, "committed_metadata": "m"}]}]})
        assert [int(p.error_code) for p in commit.topics[0].partitions] == [0, 0]
        fetched = raw.call(sock, 9, 7, {"group_id": "reset-g", "topics": None, "require_stable": False})
        got = {p.partition_index: (p.committed_offset, p.metadata) for t in fetched.topics for p in t.partitions}
        assert got == {0: (-2, ""), 1: (-1, "m")}
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "reset-g",
                         "auto.offset.reset": "earliest", "enable.auto.commit": True})
    consumer.assign([CTP("sentinel", 0), CTP("sentinel", 1)])
    values = []
    deadline = time.monotonic() + 20
    while len(values) < 4 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            values.append(m.value())
    consumer.close()
    assert sorted(values) == [b"v0", b"v1", b"v2", b"v3"]


def test_an_unserved_coordinator_kind_is_refused_and_the_server_says_why(server):
    """FindCoordinator for a key type kafkasim does not serve (2, share groups) answers
    INVALID_REQUEST, and the server logs the refusal at WARNING with the client id and the
    API. (Transactions, key type 1, are served: tests/server/test_transactions_wire.py.)"""
    from tests.server import raw

    with raw.connect(server.host, server.port) as sock:
        r = raw.call(sock, 10, 4, {"key_type": 2, "coordinator_keys": ["share-g"]})
    assert [int(c.error_code) for c in r.coordinators] == [42]
    wait_until(lambda: "refused FindCoordinator" in server.log_text(), 10, what="the refusal in the server log")
    assert "WARNING" in server.log_text()
