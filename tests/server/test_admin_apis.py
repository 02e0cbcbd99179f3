"""DescribeCluster, ListOffsets max timestamp, DeleteRecords, OffsetDelete, ElectLeaders and the
partition reassignment APIs over ``kafkasim serve`` with real clients (confluent-kafka's
``AdminClient``, kafka-python's ``KafkaAdminClient``): one plain broker here, a served
cluster in test_cluster_admin_serve.py."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def _admins(bootstrap):
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient
    return AdminClient({"bootstrap.servers": bootstrap}), KafkaAdminClient(bootstrap_servers=bootstrap,
                                                                          request_timeout_ms=10_000)


def _produce(bootstrap, topic, timestamps):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap})
    for i, ts in enumerate(timestamps):
        p.produce(topic, value=b"v%d" % i, timestamp=ts)
    assert p.flush(10) == 0


def _create(admin, topic, partitions=1):
    from confluent_kafka.admin import NewTopic
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def _earliest(admin, topic):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec
    (f,) = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()}).values()
    return f.result(10).offset


def test_describe_cluster_is_what_metadata_shows(server):
    confluent, kp = _admins(server.bootstrap)
    try:
        d = confluent.describe_cluster().result(10)
        assert d.cluster_id == "kafkasim-cluster"
        assert d.controller.id == 0 and [(n.id, n.host, n.port) for n in d.nodes] == [(0, server.host, server.port)]
        k = kp.describe_cluster()
        assert k["cluster_id"] == "kafkasim-cluster" and k["controller_id"] == 0
        assert k["brokers"] == [{"broker_id": 0, "host": server.host, "port": server.port, "rack": None,
                                 "is_fenced": False}]
    finally:
        kp.close()


def test_list_offsets_max_timestamp_is_the_first_record_with_the_largest_timestamp(server):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec
    confluent, kp = _admins(server.bootstrap)
    kp.close()
    _create(confluent, "ts")
    _produce(server.bootstrap, "ts", [5_000, 9_000, 7_000, 9_000, 3_000])
    (f,) = confluent.list_offsets({TopicPartition("ts", 0): OffsetSpec.max_timestamp()}).values()
    got = f.result(10)
    assert (got.offset, got.timestamp) == (1, 9_000)


def _consume_offsets(bootstrap, topic):
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        offsets = []
        for _ in range(50):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                offsets.append(m.offset())
            elif offsets:
                break
        return offsets
    finally:
        c.close()


def test_delete_records_moves_the_low_watermark_for_consumers_and_across_a_restart(tmp_path, serve_process):
    from kafka import TopicPartition as KTP
    from kafka.errors import OffsetOutOfRangeError
    served = serve_process(tmp_path / "data")
    confluent, kp = _admins(served.bootstrap)
    try:
        _create(confluent, "events")
        _produce(served.bootstrap, "events", [1_700_000_000_000 + i for i in range(6)])
        result = kp.delete_records({KTP("events", 0): 4})
        assert result[KTP("events", 0)]["low_watermark"] == 4
        with pytest.raises(OffsetOutOfRangeError):
            kp.delete_records({KTP("events", 0): 7})          # above the high watermark
    finally:
        kp.close()
    assert _earliest(confluent, "events") == 4
    assert _consume_offsets(served.bootstrap, "events") == [4, 5]
    served.stop()
    again = serve_process(tmp_path / "data")
    from confluent_kafka.admin import AdminClient
    assert _earliest(AdminClient({"bootstrap.servers": again.bootstrap}), "events") == 4


def test_confluent_delete_records_to_the_high_watermark(server):
    from confluent_kafka import TopicPartition
    confluent, kp = _admins(server.bootstrap)
    kp.close()
    _create(confluent, "hw")
    _produce(server.bootstrap, "hw", [1_700_000_000_000] * 3)
    (f,) = confluent.delete_records([TopicPartition("hw", 0, -1)]).values()
    assert f.result(10).low_watermark == 3
    assert _earliest(confluent, "hw") == 3


def test_offset_delete_removes_committed_offsets_for_good(tmp_path, serve_process):
    from kafka import TopicPartition as KTP
    from kafka.errors import GroupIdNotFoundError
    from kafka.structs import OffsetAndMetadata
    served = serve_process(tmp_path / "data")
    confluent, kp = _admins(served.bootstrap)
    try:
        _create(confluent, "a")
        _create(confluent, "b")
        kp.alter_group_offsets("g", {KTP("a", 0): OffsetAndMetadata(3, "", -1),
                                     KTP("b", 0): OffsetAndMetadata(4, "", -1)})
        result = kp.delete_group_offsets("g", [KTP("a", 0), KTP("nope", 0)])
        assert result[KTP("a", 0)].errno == 0
        assert result[KTP("nope", 0)].errno == 3           # UNKNOWN_TOPIC_OR_PARTITION
        assert set(kp.list_group_offsets({"g": None})["g"]) == {KTP("b", 0)}
        with pytest.raises(GroupIdNotFoundError):
            kp.delete_group_offsets("nosuchgroup", [KTP("a", 0)])
    finally:
        kp.close()
    served.stop()
    again = serve_process(tmp_path / "data")
    _, kp = _admins(again.bootstrap)
    try:
        assert set(kp.list_group_offsets({"g": None})["g"]) == {KTP("b", 0)}
    finally:
        kp.close()


def test_elect_leaders_and_reassignment_on_one_broker_answer_as_kafka_for_one_replica(server):
    from confluent_kafka import ElectionType, KafkaError, TopicPartition
    from kafka import TopicPartition as KTP
    from kafka.errors import NoReassignmentInProgressError
    confluent, kp = _admins(server.bootstrap)
    try:
        _create(confluent, "one")
        result = confluent.elect_leaders(ElectionType.PREFERRED, [TopicPartition("one", 0)]).result(10)
        assert [e.code() for e in result.values()] == [KafkaError.ELECTION_NOT_NEEDED]
        response = kp.elect_leaders(1, {"one": [0]})              # unclean; not needed is no error
        assert response.replica_election_results[0].partition_result[0].error_code == 84
        assert kp.alter_partition_reassignments({KTP("one", 0): [0]}) == {KTP("one", 0): None}
        assert kp.alter_partition_reassignments({KTP("one", 0): None}) == {
            KTP("one", 0): NoReassignmentInProgressError}
        assert kp.list_partition_reassignments() == {}
    finally:
        kp.close()
