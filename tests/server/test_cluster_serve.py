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
        # kafka-python asks DescribeCluster v2 with include_fenced_brokers: the stopped broker
        # is listed fenced, as a KRaft controller lists a broker whose heartbeats stopped
        brokers = admin.describe_cluster()["brokers"]
        assert sorted((b["broker_id"], b["is_fenced"]) for b in brokers) == \
            sorted((b, b == victim) for b in range(3))
    finally:
        admin.close()

    control.start_broker(victim)
    _wait(lambda: not _refuses(*listeners[victim]))
    control.isolate(victim)                           # isolated: cut off from clients as well
    _wait(lambda: _refuses(*listeners[victim]))
    control.heal(victim)
    _wait(lambda: not _refuses(*listeners[victim]))
    seen = _kafka_python_partitions(served, "orders")
    assert all(row["offline_replicas"] == [] and len(row["isr"]) == 3 for row in seen.values())


def test_a_broker_that_does_not_lead_answers_not_leader_or_follower(serve_process, tmp_path):
    from kafkasim.errors import NotEnoughReplicasError, NotLeaderOrFollowerError
    from kafkasim.records.record_batch import encode_batch
    from kafkasim.server.control import ServedCluster
    from kafkasim.server.remote import RemoteBroker
    from tests.server import raw

    served = serve_process(tmp_path / "lab", "--brokers", BROKERS)
    _create(served, "t", 1, 3, {"min.insync.replicas": "3"})
    listeners = _listeners(served)
    control = ServedCluster(served.data_dir)
    (part,) = control.describe_cluster()["partitions"]
    leader = part["leader"]
    follower = next(b for b in part["replicas"] if b != leader)
    wire = encode_batch(0, [(0, 1000, b"k", b"v", ())])
    produce = {"transactional_id": None, "acks": -1, "timeout": 10_000,
               "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": wire}]}]}

    def fetch(version: int) -> dict:
        return {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "r1",
                "topics": [{"topic": "t", "partitions": [{
                    "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                    "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}

    list_latest = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
    with raw.connect(*listeners[follower]) as sock:
        answer = raw.call(sock, 0, 9, produce)
        assert answer.responses[0].partition_responses[0].error_code == NotLeaderOrFollowerError.errno
        answer = raw.call(sock, 2, 6, list_latest, correlation_id=2)
        assert answer.topics[0].partitions[0].error_code == NotLeaderOrFollowerError.errno
        answer = raw.call(sock, 1, 10, fetch(10), correlation_id=3)       # no client metadata
        assert answer.responses[0].partitions[0].error_code == NotLeaderOrFollowerError.errno
    with raw.connect(*listeners[leader]) as sock:
        answer = raw.call(sock, 0, 9, produce)
        assert answer.responses[0].partition_responses[0].error_code == 0
    with raw.connect(*listeners[follower]) as sock:                      # KIP-392: v11+ may read a follower
        answer = raw.call(sock, 1, 11, fetch(11))
        p = answer.responses[0].partitions[0]
        assert p.error_code == 0 and p.high_watermark == 1 and p.records

    # kafkasim's own RemoteBroker, bootstrapped at a follower, sends to the leader
    batch = encode_batch(0, [(0, 1000, b"k", b"v", ())])
    with RemoteBroker(*listeners[follower]) as b:
        assert b.produce("t", 0, batch, acks=-1).base_offset == 1
        assert b.list_offsets("t", 0, -1)[0] == 2
        # min.insync.replicas=3 with one replica down: acks=all is refused before the append
        control.stop_broker(next(x for x in part["replicas"] if x not in (leader, follower)))
        with pytest.raises(NotEnoughReplicasError):
            b.produce("t", 0, batch, acks=-1)
        assert b.produce("t", 0, batch, acks=1).base_offset == 2     # acks=1 does not wait for the ISR


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


@pytest.mark.parametrize("selector", [None, "RackAwareReplicaSelector"])
def test_rack_aware_replica_selector_sends_a_consumer_to_the_replica_in_its_rack(serve_process, tmp_path, selector):
    from kafkasim.server.control import ServedCluster
    from tests.server import raw

    extra = ("--replica-selector-class", selector) if selector else ()
    served = serve_process(tmp_path / "lab", "--brokers", BROKERS, *extra)
    _create(served, "t", 1, 3)
    listeners = _listeners(served)
    (part,) = ServedCluster(served.data_dir).describe_cluster()["partitions"]
    leader = part["leader"]
    near = next(b for b in part["replicas"] if b != leader)
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=_bootstrap(served), acks="all")
    producer.send("t", partition=0, value=b"v").get(timeout=30)
    producer.close(10)

    fetch = {"replica_id": -1, "max_wait": 5000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
             "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": f"r{near + 1}",
             "topics": [{"topic": "t", "partitions": [{
                 "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
    with raw.connect(*listeners[leader]) as sock:
        started = time.monotonic()
        p = raw.call(sock, 1, 11, fetch).responses[0].partitions[0]
    assert p.error_code == 0 and p.high_watermark == 1
    if selector:
        assert p.preferred_read_replica == near and not p.records
        assert time.monotonic() - started < 4          # answered at once, not after max_wait
        with raw.connect(*listeners[near]) as sock:
            p = raw.call(sock, 1, 11, fetch).responses[0].partitions[0]
        assert p.error_code == 0 and p.preferred_read_replica == -1 and p.records
    else:
        assert p.preferred_read_replica == -1 and p.records


def test_brokers_on_a_one_broker_data_dir_is_refused_and_writes_nothing(tmp_path):
    data = tmp_path / "one"
    made = _cli(data, "topics", "create", "a")
    assert made.returncode == 0, made.stderr
    before = sorted(p.relative_to(data) for p in data.rglob("*"))
    done = subprocess.run([sys.executable, "-m", "kafkasim", "serve", "--data-dir", str(data), "--brokers", "0,1",
                           "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "holds no cluster" in done.stderr and str(data) in done.stderr
    assert sorted(p.relative_to(data) for p in data.rglob("*")) == before


def test_cluster_commands_against_a_running_server_report_its_errors(serve_process, tmp_path):
    served = serve_process(tmp_path / "lab", "--brokers", BROKERS)
    done = _cli(served.data_dir, "cluster", "stop-broker", "7")
    assert done.returncode == 1 and "broker 7 is not in the cluster" in done.stderr
    done = _cli(served.data_dir, "cluster", "add-broker", "3:r1")
    assert done.returncode == 1 and "stop the server first" in done.stderr
    done = _cli(served.data_dir, "cluster", "stop-broker", "2")
    assert done.returncode == 0, done.stderr
    done = _cli(served.data_dir, "cluster", "stop-broker", "2")       # already stopped: the server says so
    assert done.returncode == 1 and "broker 2 is stopped" in done.stderr
    assert not os.listdir(os.path.join(served.data_dir, ".server-control"))   # answers read and removed


@pytest.mark.slow
def test_a_consumer_group_follows_the_coordinator_when_its_broker_stops(serve_process, tmp_path):
    from kafka import KafkaConsumer, KafkaProducer

    from kafkasim.server.control import ServedCluster

    served = serve_process(tmp_path / "lab", "--brokers", BROKERS)
    _create(served, "orders", 3, 3)
    bootstrap = _bootstrap(served)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20, retry_backoff_ms=200,
                             metadata_max_age_ms=1000)
    for i in range(60):
        producer.send("orders", key=b"k%d" % i, value=b"first-%d" % i)
    producer.flush(30)
    consumer = KafkaConsumer("orders", bootstrap_servers=bootstrap, group_id="billing",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             metadata_max_age_ms=1000, consumer_timeout_ms=20_000)

    def take(n: int) -> set[bytes]:
        got: set[bytes] = set()
        for msg in consumer:
            got.add(msg.value)
            if len(got) == n:
                break
        return got

    assert take(60) == {b"first-%d" % i for i in range(60)}
    consumer.commit()
    ServedCluster(served.data_dir).stop_broker(0)       # the coordinator (lowest live broker)
    for i in range(60):
        producer.send("orders", key=b"k%d" % i, value=b"second-%d" % i)
    producer.flush(30)
    assert take(60) == {b"second-%d" % i for i in range(60)}
    consumer.commit()                                   # on the new coordinator, broker 1
    consumer.close()
    producer.close(10)
    from kafkasim.server.remote import RemoteBroker
    listeners = _listeners(served)
    with RemoteBroker(*listeners[1]) as b:
        committed = b.offset_fetch("billing")
    assert sum(c.offset for c in committed.values()) == 120


@pytest.mark.slow
def test_aiokafka_produces_through_a_failover_and_a_group_reads_everything(serve_process, tmp_path):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    served = serve_process(tmp_path / "lab", "--brokers", BROKERS)
    _create(served, "t", 3, 3, {"min.insync.replicas": "2"})
    bootstrap = _bootstrap(served)

    async def main() -> set[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", metadata_max_age_ms=1000)
        await producer.start()
        try:
            for i in range(30):
                await producer.send_and_wait("t", b"a%d" % i)
            done = await asyncio.to_thread(_cli, served.data_dir, "cluster", "stop-broker", "1")
            assert done.returncode == 0, done.stderr
            for i in range(30):
                await producer.send_and_wait("t", b"b%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("t", bootstrap_servers=bootstrap, group_id="g", auto_offset_reset="earliest")
        await consumer.start()
        got: set[bytes] = set()
        try:
            while len(got) < 60:
                batch = await consumer.getmany(timeout_ms=10_000)
                if not batch:
                    break
                got.update(m.value for msgs in batch.values() for m in msgs)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(main()) == {b"a%d" % i for i in range(30)} | {b"b%d" % i for i in range(30)}


def test_metadata_of_an_offline_partition_is_leader_not_available(tmp_path):
    from kafkasim.broker.cluster import Cluster
    from kafkasim.clock import MockClock
    from kafkasim.errors import LeaderNotAvailableError
    from kafkasim.server.api import Node
    from kafkasim.server.cluster import describe_cluster
    from kafkasim.server.topology import Topology

    with Cluster(tmp_path / "lab", brokers=[(0, "r1"), (1, "r2"), (2, "r3")], clock=MockClock()) as c:
        c.create_topic("t", partitions=1, replication_factor=2)
        topology = Topology(c)
        for b in range(3):
            topology.set_address(b, "127.0.0.1", 9092 + b)
        replicas = c.describe_cluster()["partitions"][0]["replicas"]
        for b in replicas:
            c.stop_broker(b)
        answer = describe_cluster(c, Node(0, "127.0.0.1", 9092), "id", ["t"], None, topology)
        (spare,) = {0, 1, 2} - set(replicas)
        assert [b["node_id"] for b in answer["brokers"]] == [spare]
        assert answer["controller_id"] == spare
        (p,) = answer["topics"][0]["partitions"]
        assert p["error_code"] == LeaderNotAvailableError.errno and p["leader_id"] == -1
        assert p["offline_replicas"] == replicas
        assert topology.coordinator().node_id == spare
        c.start_broker(replicas[0])                 # coming back does not take the role back
        assert topology.coordinator().node_id == topology.controller_id() == spare


@pytest.mark.slow
def test_preferred_leaders_are_back_after_a_restart_and_the_imbalance_check_interval(serve_process, tmp_path):
    """Issue 21, item 10: all partitions stayed led by broker 0 after brokers restarted. Kafka's
    controller moves leadership back (auto.leader.rebalance.enable, on by default) at its next
    check; serve's tick on real time drives the check."""
    served = serve_process(tmp_path / "lab", "--brokers", BROKERS,
                           "--override", "leader.imbalance.check.interval.seconds=2")
    _create(served, "orders", 6, 3)
    before = _kafka_python_partitions(served, "orders")
    preferred = {p: row["replicas"][0] for p, row in before.items()}
    assert sorted(preferred.values()) == [0, 0, 1, 1, 2, 2]
    assert all(row["leader"] == preferred[p] for p, row in before.items())

    for b in ("1", "2"):
        result = _cli(served.data_dir, "cluster", "stop-broker", b)
        assert result.returncode == 0, result.stderr
    assert {row["leader"] for row in _kafka_python_partitions(served, "orders").values()} == {0}
    for b in ("1", "2"):
        result = _cli(served.data_dir, "cluster", "start-broker", b)
        assert result.returncode == 0, result.stderr

    def back():
        seen = _kafka_python_partitions(served, "orders")
        return seen if all(row["leader"] == preferred[p] for p, row in seen.items()) else None

    deadline = time.monotonic() + 15
    while (seen := back()) is None:
        assert time.monotonic() < deadline, "the preferred leaders did not come back"
        time.sleep(0.5)
    for p, row in seen.items():
        assert sorted(row["isr"]) == [0, 1, 2] and row["offline_replicas"] == []
        if preferred[p] != 0:       # led away, then back: each move an election (epoch + 1)
            assert row["leader_epoch"] >= before[p]["leader_epoch"] + 2

    described = json.loads(_cli(served.data_dir, "cluster", "describe", "--json").stdout)
    assert [b["leaders"] for b in described["brokers"]] == [2, 2, 2]
    assert described["preferred_replica_imbalance"] == 0


@pytest.mark.parametrize("override, message", [
    ("leader.imbalance.check.interval.seconds=0",
     "Invalid value '0' for configuration leader.imbalance.check.interval.seconds: Value must be at least 1"),
    ("auto.leader.rebalance.enable=maybe",
     "Invalid value 'maybe' for configuration auto.leader.rebalance.enable: Expected value to be either true or false"),
    ("leader.imbalance.check.interval=5", "Unrecognized broker config 'leader.imbalance.check.interval'"),
    ("nonsense", "--override 'nonsense': expected NAME=VALUE"),
])
def test_serve_refuses_a_bad_override_naming_it_and_writes_nothing(tmp_path, override, message):
    result = subprocess.run([sys.executable, "-m", "kafkasim", "--data-dir", str(tmp_path / "lab"), "serve",
                             "--brokers", BROKERS, "--listen", "127.0.0.1:0", "--override", override],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert message in result.stderr
    assert not (tmp_path / "lab").exists()
