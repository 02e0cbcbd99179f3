"""``kafkasim serve`` over a 3-broker cluster: one listener per broker, real clients, failover.

Each test starts ``kafkasim serve --brokers 0:r1,1:r2,2:r3`` as a subprocess on free loopback
ports (conftest's ``serve_process``); faults go through the running server (the
``kafkasim cluster`` CLI or :class:`kafkasim.server.control.ServedCluster`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from kafkasim.server.address import read_address

BROKERS = "0:r1,1:r2,2:r3"


def _listeners(served) -> dict[int, tuple[str, int]]:
    info = read_address(served.data_dir)
    return {b["id"]: (b["host"], b["port"]) for b in info["brokers"]}


def _refuses(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return False
    except OSError:
        return True


def _wait(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def _admin(bootstrap: str):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)


def _bootstrap(served) -> str:
    return ",".join(f"{h}:{p}" for h, p in _listeners(served).values())


def _create(served, topic: str, partitions: int, rf: int, configs=None) -> None:
    from kafka.admin import NewTopic
    admin = _admin(_bootstrap(served))
    try:
        admin.create_topics([NewTopic(topic, partitions, rf, topic_configs=configs or {})])
    finally:
        admin.close()


def _kafka_python_partitions(served, topic: str) -> dict[int, dict]:
    admin = _admin(_bootstrap(served))
    try:
        (described,) = admin.describe_topics([topic])
    finally:
        admin.close()
    return {p["partition_index"]: {"leader": p["leader_id"], "replicas": p["replica_nodes"],
                                   "isr": p["isr_nodes"], "offline_replicas": p["offline_replicas"],
                                   "leader_epoch": p["leader_epoch"]}
            for p in described["partitions"]}


def test_serve_opens_one_listener_per_broker_and_metadata_is_the_clusters(serve_process, tmp_path):
    from kafkasim.server.control import ServedCluster

    served = serve_process(tmp_path / "lab", "--brokers", BROKERS)
    listeners = _listeners(served)
    assert sorted(listeners) == [0, 1, 2]
    assert len({p for _, p in listeners.values()}) == 3
    assert (served.host, served.port) == listeners[0]      # "host"/"port" stay the first broker's
    _create(served, "orders", 6, 3)

    admin = _admin(_bootstrap(served))
    try:
        d = admin.describe_cluster()
    finally:
        admin.close()
    assert sorted((b["broker_id"], b["host"], b["port"], b["rack"]) for b in d["brokers"]) == \
        [(b, *listeners[b], f"r{b + 1}") for b in range(3)]
    assert d["controller_id"] == 0

    control = ServedCluster(served.data_dir)
    truth = {p["partition"]: p for p in control.describe_cluster()["partitions"]}
    seen = _kafka_python_partitions(served, "orders")
    assert sorted(seen) == list(range(6))
    for p, row in seen.items():
        assert row["leader"] == truth[p]["leader"]
        assert row["replicas"] == truth[p]["replicas"]
        assert row["isr"] == truth[p]["isr"]
        assert row["leader_epoch"] == truth[p]["leader_epoch"]
        assert row["offline_replicas"] == []
    assert len({row["leader"] for row in seen.values()}) == 3       # leaders spread over brokers

    # stop the leader of partition 0: its listener refuses, Metadata moves on
    victim = truth[0]["leader"]
    control.stop_broker(victim)
    _wait(lambda: _refuses(*listeners[victim]))
    truth = {p["partition"]: p for p in control.describe_cluster()["partitions"]}
    seen = _kafka_python_partitions(served, "orders")
    for p, row in seen.items():
        assert row["leader"] == truth[p]["leader"] != victim
        assert row["isr"] == truth[p]["isr"]
        assert row["leader_epoch"] == truth[p]["leader_epoch"]
        assert row["offline_replicas"] == [victim]
    admin = _admin(_bootstrap(served))
    try:
        assert sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"]) == \
            sorted({0, 1, 2} - {victim})
    finally:
        admin.close()

    control.start_broker(victim)
    _wait(lambda: not _refuses(*listeners[victim]))
    seen = _kafka_python_partitions(served, "orders")
    assert all(row["offline_replicas"] == [] and len(row["isr"]) == 3 for row in seen.values())


def test_a_broker_that_does_not_lead_answers_not_leader_or_follower(serve_process, tmp_path):
    from kafkasim.errors import NotEnoughReplicasError, NotLeaderOrFollowerError
    from kafkasim.records.record_batch import encode_batch
    from kafkasim.server.control import ServedCluster
    from kafkasim.server.remote import RemoteBroker

    served = serve_process(tmp_path / "lab", "--brokers", BROKERS)
    _create(served, "t", 1, 3, {"min.insync.replicas": "3"})
    listeners = _listeners(served)
    control = ServedCluster(served.data_dir)
    (part,) = control.describe_cluster()["partitions"]
    leader = part["leader"]
    follower = next(b for b in part["replicas"] if b != leader)
    batch = encode_batch(0, [(0, 1000, b"k", b"v", ())])

    with RemoteBroker(*listeners[follower]) as b:
        with pytest.raises(NotLeaderOrFollowerError):
            b.produce("t", 0, batch, acks=-1)
        with pytest.raises(NotLeaderOrFollowerError):
            b.list_offsets("t", 0, -1)
    with RemoteBroker(*listeners[leader]) as b:
        assert b.produce("t", 0, batch, acks=-1).base_offset == 0
        assert b.list_offsets("t", 0, -1)[0] == 1

    # min.insync.replicas=3 with one replica down: acks=all is refused before the append
    other = next(x for x in part["replicas"] if x not in (leader, follower))
    control.stop_broker(other)
    with RemoteBroker(*listeners[leader]) as b:
        with pytest.raises(NotEnoughReplicasError):
            b.produce("t", 0, batch, acks=-1)
        assert b.produce("t", 0, batch, acks=1).base_offset == 1     # acks=1 does not wait for the ISR


def _cli(data_dir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkasim", "--data-dir", str(data_dir), *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_clients_fail_over_when_a_leader_is_stopped_and_lose_no_acknowledged_record(serve_process, tmp_path):
    from confluent_kafka import Producer as CProducer
    from kafka import KafkaProducer

    served = serve_process(tmp_path / "lab", "--brokers", BROKERS)
    _create(served, "orders", 6, 3, {"min.insync.replicas": "2"})
    bootstrap = _bootstrap(served)
    acked: set[tuple[bytes, bytes]] = set()
    failed: list = []

    cprod = CProducer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                       "message.timeout.ms": 60_000, "topic.metadata.refresh.interval.ms": 1000})

    def report(err, msg):
        if err is None:
            acked.add((msg.key(), msg.value()))
        else:
            failed.append(err)

    kprod = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20,
                          retry_backoff_ms=200, request_timeout_ms=20_000, metadata_max_age_ms=1000)

    def send_batch(phase: str, n: int = 150) -> None:
        futures = []
        for i in range(n):
            key, value = f"k{i}".encode(), f"{phase}-confluent-{i}".encode()
            cprod.produce("orders", key=key, value=value, on_delivery=report)
            cprod.poll(0)
            kv = (key, f"{phase}-kafka-python-{i}".encode())
            futures.append((kv, kprod.send("orders", key=kv[0], value=kv[1])))
        assert cprod.flush(60) == 0
        for kv, fut in futures:
            fut.get(timeout=60)
            acked.add(kv)

    send_batch("before")
    described = json.loads(_cli(served.data_dir, "cluster", "describe", "--json").stdout)
    leaders = {b["id"]: b["leaders"] for b in described["brokers"]}
    victim = max(leaders, key=leaders.get)
    assert leaders[victim] > 0
    result = _cli(served.data_dir, "cluster", "stop-broker", str(victim))
    assert result.returncode == 0, result.stderr
    assert _refuses(*_listeners(served)[victim])

    send_batch("during")                              # both clients refresh metadata and move on
    result = _cli(served.data_dir, "cluster", "start-broker", str(victim))
    assert result.returncode == 0, result.stderr
    send_batch("after")
    kprod.close(10)
    assert not failed
    assert len(acked) == 900
    described = json.loads(_cli(served.data_dir, "cluster", "describe", "--json").stdout)
    assert described["under_replicated"] == 0 and described["offline"] == 0

    assert served.stop() == 0
    from kafkasim.broker.cluster import Cluster
    stored: set[tuple[bytes, bytes]] = set()
    with Cluster(served.data_dir) as c:
        for p in range(6):
            offset = 0
            while True:
                r = c.fetch("orders", p, offset)
                if not r.records:
                    break
                stored.update((rec.key, rec.value) for rec in r.records)
                offset = r.next_offset
    assert acked <= stored


def test_metrics_have_per_broker_gauges(serve_process, tmp_path):
    import re
    import urllib.request

    from kafkasim.server.control import ServedCluster

    served = serve_process(tmp_path / "lab", "--brokers", BROKERS, "--metrics-port", "0")
    _create(served, "orders", 6, 2)
    control = ServedCluster(served.data_dir)
    victim = 1
    control.stop_broker(victim)
    d = control.describe_cluster()
    port = read_address(served.data_dir)["metrics_port"]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()

    def gauge(name: str, broker: int) -> float:
        (value,) = re.findall(rf'^{name}\{{broker="{broker}"[^}}]*\}} (\S+)$', text, re.M)
        return float(value)

    for b in d["brokers"]:
        assert gauge("kafkasim_broker_up", b["id"]) == (0 if b["id"] == victim else 1)
        assert gauge("kafkasim_broker_replicas", b["id"]) == b["replicas"]
        assert gauge("kafkasim_broker_leaders", b["id"]) == b["leaders"]
        assert gauge("kafkasim_broker_size_bytes", b["id"]) == b["bytes"]
        led_short = sum(1 for p in d["partitions"] if p["leader"] == b["id"] and p["under_replicated"])
        assert gauge("kafkasim_broker_under_replicated_partitions", b["id"]) == led_short
    assert gauge("kafkasim_broker_leaders", victim) == 0
    assert sum(gauge("kafkasim_broker_under_replicated_partitions", b) for b in range(3)) == \
        d["under_replicated"] > 0
