"""Broker-level faults on a served cluster, seen by real clients (kafka-python): a broker isolated
from clients refuses connections yet keeps leading (Metadata unchanged), a full disk moves its
partitions and lists its replicas offline while the others take acks=all writes, and the cluster's
own request rules (``cluster.faults``) are the ones its listeners hold."""

from __future__ import annotations

import asyncio

import pytest

from kafkasim.server.address import read_address
from tests.server.conftest import wait_until
from tests.server.test_cluster_serve import _refuses

BROKERS = "0:r1,1:r2,2:r3"


def _listeners(served) -> dict[int, tuple[str, int]]:
    return {b["id"]: (b["host"], b["port"]) for b in read_address(served.data_dir)["brokers"]}


def _partitions(address: tuple[str, int], topic: str) -> dict[int, dict]:
    """Metadata v12 from one broker (a raw request: no client picks another node on its own)."""
    from tests.server import raw
    with raw.connect(*address) as sock:
        resp = raw.call(sock, 3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                      "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})
    [t] = resp.topics
    return {p.partition_index: {"leader": p.leader_id, "isr": sorted(p.isr_nodes),
                                "offline": list(p.offline_replicas)} for p in t.partitions}


def test_isolation_from_clients_and_a_full_disk_as_real_clients_see_them(serve_process, tmp_path):
    from kafka import KafkaProducer
    from kafka.admin import NewTopic

    from kafkasim.server.control import ServedCluster

    served = serve_process(tmp_path / "lab", "--brokers", BROKERS)
    listeners = _listeners(served)
    control = ServedCluster(served.data_dir)
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=",".join(f"{h}:{p}" for h, p in listeners.values()),
                             request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("orders", 3, 3, topic_configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()
    truth = {p["partition"]: p for p in control.describe_cluster()["partitions"]}
    # a leader that is not the controller / group coordinator (the lowest live broker), which
    # admin clients must reach
    victim = next(p["leader"] for p in truth.values() if p["leader"] != 0)
    others = ",".join(f"{h}:{p}" for b, (h, p) in listeners.items() if b != victim)
    asked = listeners[next(b for b in listeners if b != victim)]
    before = _partitions(asked, "orders")

    # isolated from clients: its listener refuses, but it still leads and replicates
    control.isolate(victim, "clients")
    wait_until(lambda: _refuses(*listeners[victim]), timeout=15, what="the listener refusing clients")
    assert _partitions(asked, "orders") == before
    control.heal(victim)
    wait_until(lambda: not _refuses(*listeners[victim]), timeout=15, what="the listener back")

    # a full disk: leadership moves, its replicas are offline, it stays reachable
    control.fill_disk(victim)
    seen = _partitions(asked, "orders")
    for p, row in seen.items():
        assert row["leader"] not in (victim, -1)
        assert victim not in row["isr"] and row["offline"] == [victim]
    assert not _refuses(*listeners[victim])
    # requests for its replicas, sent to it: KAFKA_STORAGE_ERROR (its partitions are offline there)
    from kafkasim.errors import KafkaStorageError
    from kafkasim.records.record_batch import encode_batch
    from tests.server import raw
    produce = {"transactional_id": None, "acks": -1, "timeout": 10_000, "topic_data": [{
        "name": "orders", "partition_data": [{"index": 0, "records": encode_batch(0, [(0, 1, b"k", b"v", ())])}]}]}
    list_latest = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
    fetch = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
             "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
             "topics": [{"topic": "orders", "partitions": [{
                 "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
    with raw.connect(*listeners[victim]) as sock:
        answer = raw.call(sock, 0, 9, produce)
        assert answer.responses[0].partition_responses[0].error_code == KafkaStorageError.errno == 56
        answer = raw.call(sock, 2, 6, list_latest, correlation_id=2)
        assert answer.topics[0].partitions[0].error_code == 56
        answer = raw.call(sock, 1, 10, fetch, correlation_id=3)
        assert answer.responses[0].partitions[0].error_code == 56
    producer = KafkaProducer(bootstrap_servers=others, acks="all", retries=5, request_timeout_ms=10_000)
    try:
        for p in range(3):
            assert producer.send("orders", b"v", key=b"k%d" % p, partition=p).get(timeout=20).offset == 0
    finally:
        producer.close()
    control.clear_disk(victim)
    control.stop_broker(victim)
    control.start_broker(victim)
    wait_until(lambda: all(row["isr"] == [0, 1, 2] and row["offline"] == []
                           for row in _partitions(asked, "orders").values()), timeout=20, what="the ISR whole again")


def test_a_served_cluster_applies_the_clusters_own_request_rules(tmp_path):
    from kafkasim.broker.cluster import Cluster
    from kafkasim.errors import InvalidArgumentError
    from kafkasim.server.listeners import ClusterListeners

    with Cluster(tmp_path / "lab", brokers=[(0, "r1"), (1, "r2")], seed=5) as c:
        c.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3, partition=0)
        c.faults.requests.decide(0, "Produce", "cli", [("t", 0)])          # one of its 3 used
        listeners = ClusterListeners(c, "127.0.0.1", 0, data_dir=c.data_dir)
        try:
            assert listeners.faults is c.faults.requests
            assert all(s.faults is c.faults.requests for s in listeners.servers.values())
            (rule,) = listeners.faults.rules()                               # moved over: 2 left
            assert (rule.api, rule.error_name, rule.partition, rule.count) == \
                ("Produce", "NOT_LEADER_OR_FOLLOWER", 0, 2)
            # the server knows the APIs it serves: a misspelt one is refused, naming it
            with pytest.raises(InvalidArgumentError, match="api"):
                c.faults.add(api="Prodcue", error="NOT_LEADER_OR_FOLLOWER")
        finally:
            asyncio.run(listeners.close())


def test_a_cluster_rule_the_server_cannot_serve_is_refused_when_it_is_served(tmp_path):
    from kafkasim.broker.cluster import Cluster
    from kafkasim.errors import InvalidArgumentError
    from kafkasim.server.listeners import ClusterListeners

    with Cluster(tmp_path / "lab", brokers=[(0, "r1")]) as c:
        c.faults.add(api="NoSuchApi", latency_ms=5)
        with pytest.raises(InvalidArgumentError, match="NoSuchApi"):
            ClusterListeners(c, "127.0.0.1", 0, data_dir=c.data_dir)
        assert [r.api for r in c.faults.rules()] == ["NoSuchApi"]      # nothing changed
