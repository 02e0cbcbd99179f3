"""DescribeCluster, DeleteRecords, ElectLeaders and the partition reassignment APIs over a
served 3-broker cluster (``kafkasim serve --brokers``), with real clients."""

from __future__ import annotations

import pytest

from tests.server.test_cluster_serve import (
    BROKERS, _admin, _bootstrap, _create, _kafka_python_partitions, _listeners, _refuses, _wait,
)

pytestmark = pytest.mark.slow


def _confluent(served):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": _bootstrap(served)})


def test_describe_cluster_lists_racks_and_fenced_brokers(serve_process, tmp_path):
    from kafkasim.server.control import ServedCluster
    served = serve_process(tmp_path / "lab", "--brokers", BROKERS)
    listeners = _listeners(served)
    confluent = _confluent(served)
    d = confluent.describe_cluster().result(10)
    assert sorted((n.id, n.host, n.port, n.rack) for n in d.nodes) == \
        [(b, *listeners[b], f"r{b + 1}") for b in range(3)]
    assert d.controller.id == 0
    ServedCluster(served.data_dir).stop_broker(2)
    _wait(lambda: _refuses(*listeners[2]))
    admin = _admin(_bootstrap(served))
    try:
        brokers = {b["broker_id"]: b for b in admin.describe_cluster()["brokers"]}
    finally:
        admin.close()
    assert {b: row["is_fenced"] for b, row in brokers.items()} == {0: False, 1: False, 2: True}
    assert brokers[2]["rack"] == "r3" and (brokers[2]["host"], brokers[2]["port"]) == listeners[2]


def test_delete_records_applies_on_the_leader_and_every_follower(serve_process, tmp_path):
    from confluent_kafka import Producer
    from kafka import TopicPartition as KTP
    from kafkasim.broker.cluster import Cluster
    served = serve_process(tmp_path / "lab", "--brokers", BROKERS)
    _create(served, "events", 1, 3)
    p = Producer({"bootstrap.servers": _bootstrap(served), "acks": "all"})
    for i in range(8):
        p.produce("events", value=b"v%d" % i)
    assert p.flush(10) == 0
    admin = _admin(_bootstrap(served))
    try:
        assert admin.delete_records({KTP("events", 0): 5})[KTP("events", 0)]["low_watermark"] == 5
    finally:
        admin.close()
    served.stop()
    with Cluster(tmp_path / "lab") as c:            # every replica's log start moved, and was kept
        part = c.describe_topic("events")["partitions"][0]
        assert part["log_start_offset"] == 5
        assert {r.log.log_start_offset for r in c._partitions[("events", 0)].hosted.values()} == {5}


def test_preferred_election_moves_leadership_back(serve_process, tmp_path):
    from confluent_kafka import ElectionType, TopicPartition
    from kafkasim.server.control import ServedCluster
    served = serve_process(tmp_path / "lab", "--brokers", BROKERS)
    _create(served, "orders", 1, 3)
    control = ServedCluster(served.data_dir)
    preferred = _kafka_python_partitions(served, "orders")[0]["replicas"][0]
    control.stop_broker(preferred)
    control.start_broker(preferred)
    _wait(lambda: len(_kafka_python_partitions(served, "orders")[0]["isr"]) == 3)
    assert _kafka_python_partitions(served, "orders")[0]["leader"] != preferred
    confluent = _confluent(served)
    result = confluent.elect_leaders(ElectionType.PREFERRED, [TopicPartition("orders", 0)]).result(10)
    assert list(result.values()) == [None]
    assert _kafka_python_partitions(served, "orders")[0]["leader"] == preferred


def test_alter_partition_reassignments_moves_the_replicas(serve_process, tmp_path):
    from kafka import TopicPartition as KTP
    from kafka.errors import InvalidReplicationAssignmentError
    served = serve_process(tmp_path / "lab", "--brokers", BROKERS)
    _create(served, "moves", 1, 2)
    before = _kafka_python_partitions(served, "moves")[0]["replicas"]
    spare = ({0, 1, 2} - set(before)).pop()
    target = [spare, before[0]]
    admin = _admin(_bootstrap(served))
    try:
        assert admin.alter_partition_reassignments({KTP("moves", 0): target}) == {KTP("moves", 0): None}
        assert admin.list_partition_reassignments() == {}          # completed: nothing in progress
        assert admin.alter_partition_reassignments({KTP("moves", 0): [0, 7]}) == {
            KTP("moves", 0): InvalidReplicationAssignmentError}
    finally:
        admin.close()
    assert _kafka_python_partitions(served, "moves")[0]["replicas"] == target
