"""Fault rules applied on the wire (kafkasim.faults through ``KafkaServer``): what a client sees.

Raw frames check Kafka's shapes: a whole-request error (Produce rows with base offset -1,
Fetch's top-level code and empty partitions with high watermark -1, a Metadata topic's
error), partition errors beside partitions that are served, throttle_time_ms, drops before
and after the request is applied, latency that holds one connection and not the others, a
rule for one client id; /metrics counts each fault and ``.server-faults.json`` lists it.
Real clients: a confluent-kafka idempotent producer rides through NOT_LEADER_OR_FOLLOWER
with every record once and in order; kafka-python without idempotence duplicates a record
when the connection drops after its Produce was applied; 300 ms of Fetch latency shows in a
consumer's poll latency; the ordering audit (Spark) names the duplicate and nothing else.

The server is ``kafkasim serve`` run in-process (``runner.serve(..., faults=...)`` on a
thread of its own), so the test holds the :class:`~kafkasim.faults.Faults` it adds rules to.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass

import pytest

from kafkasim.errors import NotLeaderOrFollowerError, RequestTimedOutError
from kafkasim.faults import Faults
from kafkasim.records import record_batch as rb
from kafkasim.server.runner import serve
from tests.required_tools import missing
from tests.server import raw
from tests.server.conftest import wait_until

NOT_LEADER = NotLeaderOrFollowerError.errno
TIMED_OUT = RequestTimedOutError.errno
T0 = 1_700_000_000_000


@dataclass
class InProcess:
    host: str
    port: int
    metrics_port: int
    faults: Faults
    data_dir: str

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


@contextlib.contextmanager
def served(tmp_path, faults: Faults | None = None, **kwargs):
    """``kafkasim serve`` over ``tmp_path/data`` on a thread, with ``faults``; always stopped."""
    faults = faults if faults is not None else Faults(seed=1)
    ready: queue.Queue = queue.Queue()
    stop = asyncio.Event()
    data_dir = str(tmp_path / "data")

    def on_ready(host, port, metrics_port):
        ready.put((host, port, metrics_port, asyncio.get_running_loop()))

    def run():
        try:
            serve(data_dir, "127.0.0.1", 0, on_ready=on_ready, stop=stop, faults=faults, metrics_port=0,
                  **kwargs)
        except BaseException as exc:     # reported to the test, not lost in the thread
            ready.put(exc)

    thread = threading.Thread(target=run, name="fault-serve", daemon=True)
    thread.start()
    got = ready.get(timeout=60)
    if isinstance(got, BaseException):
        raise got
    host, port, metrics_port, loop = got
    try:
        yield InProcess(host, port, metrics_port, faults, data_dir)
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)


def metadata(sock, topics):
    return raw.call(sock, 3, 12, {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": True})


def create_topic(sock, name: str, partitions: int) -> None:
    answer = raw.call(sock, 19, 7, {"topics": [{"name": name, "num_partitions": partitions,
                                                "replication_factor": 1}], "timeout": 10_000})
    assert answer.topics[0].error_code == 0, answer


def batch(i: int) -> bytes:
    return rb.encode_batch(0, [(0, T0 + i, b"k%d" % i, b"v%d" % i, ())])


def produce(sock, topic: str, partitions, acks: int = -1, correlation_id: int = 1, client_id: str = "raw-test"):
    body = {"acks": acks, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": p, "records": batch(p)} for p in partitions]}]}
    sock.sendall(raw.request_frame(0, 9, correlation_id, body, client_id=client_id))
    if acks == 0:
        return None
    corr, answer = raw.read_response(sock, 0, 9)
    assert corr == correlation_id
    return answer


def log_end(sock, topic: str, partition: int) -> int:
    answer = raw.call(sock, 2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1,
                                        "current_leader_epoch": -1}]}]})
    row = answer.topics[0].partitions[0]
    assert row.error_code == 0
    return row.offset


def fetch_v12(sock, topic: str, partitions, session_id: int = 0, epoch: int = -1, max_wait: int = 0,
              min_bytes: int = 0, offset: int = 0):
    return raw.call(sock, 1, 12, {
        "replica_id": -1, "max_wait": max_wait, "min_bytes": min_bytes, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": topic, "partitions": [{
            "partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in partitions]}]})


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def closed_without_answer(sock) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


# ------------------------------------------------------------------ raw frames: Kafka's shapes

def test_a_whole_request_produce_error_is_answered_per_partition_and_not_applied(tmp_path):
    with served(tmp_path) as s, raw.connect(s.host, s.port) as sock:
        create_topic(sock, "t", 2)
        rule = s.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=1)
        answer = produce(sock, "t", [0, 1])
        rows = answer.responses[0].partition_responses
        assert [(r.index, r.error_code, r.base_offset, r.log_start_offset) for r in rows] == [
            (0, NOT_LEADER, -1, -1), (1, NOT_LEADER, -1, -1)]
        assert (log_end(sock, "t", 0), log_end(sock, "t", 1)) == (0, 0)      # nothing appended
        assert [r.error_code for r in produce(sock, "t", [0, 1]).responses[0].partition_responses] == [0, 0]
        assert (log_end(sock, "t", 0), log_end(sock, "t", 1)) == (1, 1)
        assert s.faults.rules()[0].hits == 1 and rule.rule_id == s.faults.rules()[0].rule_id


def test_a_partition_error_fails_that_partition_only_and_the_others_are_appended(tmp_path):
    with served(tmp_path) as s, raw.connect(s.host, s.port) as sock:
        create_topic(sock, "t", 3)
        s.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", topic="t", partition=1, count=2)
        answer = produce(sock, "t", [0, 1, 2])
        rows = answer.responses[0].partition_responses
        assert [(r.index, r.error_code, r.base_offset) for r in rows] == [
            (0, 0, 0), (2, 0, 0), (1, NOT_LEADER, -1)]      # Kafka: failed partitions after the appended
        assert [log_end(sock, "t", p) for p in range(3)] == [1, 0, 1]
        answer = produce(sock, "t", [1])                  # only the failing partition: no append at all
        assert [(r.index, r.error_code) for r in answer.responses[0].partition_responses] == [(1, NOT_LEADER)]
        assert [log_end(sock, "t", p) for p in range(3)] == [1, 0, 1]
        produce(sock, "t", [1])                           # the rule's count is used up
        assert log_end(sock, "t", 1) == 1


def test_fetch_and_list_offsets_errors_have_kafkas_shape(tmp_path):
    with served(tmp_path) as s, raw.connect(s.host, s.port) as sock:
        create_topic(sock, "t", 2)
        produce(sock, "t", [0, 1])
        s.faults.add(api="Fetch", error="NOT_LEADER_OR_FOLLOWER", count=1)
        answer = fetch_v12(sock, "t", [0, 1], session_id=0, epoch=0)
        assert (answer.error_code, answer.session_id) == (NOT_LEADER, 0)
        parts = answer.responses[0].partitions
        assert [(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset, p.records)
                for p in parts] == [(0, NOT_LEADER, -1, -1, b""), (1, NOT_LEADER, -1, -1, b"")]
        s.faults.add(api="Fetch", error="KAFKA_STORAGE_ERROR", topic="t", partition=0, count=1)
        answer = fetch_v12(sock, "t", [0, 1])
        parts = {p.partition_index: p for p in answer.responses[0].partitions}
        assert answer.error_code == 0
        assert (parts[0].error_code, parts[0].high_watermark, parts[0].records) == (56, -1, b"")
        assert (parts[1].error_code, parts[1].high_watermark) == (0, 1) and parts[1].records
        s.faults.add(api="ListOffsets", error="REQUEST_TIMED_OUT", partition=0, count=1)
        answer = raw.call(sock, 2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t", "partitions": [{"partition_index": p, "timestamp": -1, "current_leader_epoch": -1}
                                         for p in (0, 1)]}]})
        got = {p.partition_index: (p.error_code, p.offset, p.timestamp, p.leader_epoch)
               for p in answer.topics[0].partitions}
        assert got == {0: (TIMED_OUT, -1, -1, -1), 1: (0, 1, -1, 0)}


def test_a_partition_error_in_a_fetch_session_answers_at_once_and_the_session_goes_on(tmp_path):
    with served(tmp_path) as s, raw.connect(s.host, s.port) as sock:
        create_topic(sock, "t", 2)
        produce(sock, "t", [0, 1])
        full = fetch_v12(sock, "t", [0, 1], session_id=0, epoch=0)
        session = full.session_id
        assert session != 0 and full.error_code == 0
        s.faults.add(api="Fetch", error="NOT_LEADER_OR_FOLLOWER", topic="t", partition=0, count=1)
        t0 = time.monotonic()
        answer = fetch_v12(sock, "t", [0], session_id=session, epoch=1, max_wait=5000, min_bytes=1, offset=1)
        assert time.monotonic() - t0 < 2.5                # not held for max_wait: an error answers at once
        assert (answer.error_code, answer.session_id) == (0, session)
        rows = {p.partition_index: (p.error_code, p.high_watermark, p.records)
                for t in answer.responses for p in t.partitions}
        assert rows[0] == (NOT_LEADER, -1, b"")
        answer = fetch_v12(sock, "t", [], session_id=session, epoch=2)    # the session's epoch moved on
        assert (answer.error_code, answer.session_id) == (0, session)


def test_top_level_errors_and_throttle_time(tmp_path):
    with served(tmp_path) as s, raw.connect(s.host, s.port) as sock:
        create_topic(sock, "t", 1)
        s.faults.add(api="Metadata", error="REQUEST_TIMED_OUT", count=1, throttle_ms=250)
        answer = metadata(sock, ["t"])
        assert [(t.name, t.error_code, t.partitions) for t in answer.topics] == [("t", TIMED_OUT, ())]
        assert answer.throttle_time.total_seconds() == 0.25
        answer = metadata(sock, ["t"])
        assert answer.topics[0].error_code == 0 and answer.throttle_time.total_seconds() == 0
        s.faults.add(api="FindCoordinator", error="COORDINATOR_NOT_AVAILABLE", count=1)
        answer = raw.call(sock, 10, 3, {"key": "g", "key_type": 0})
        assert (answer.error_code, answer.node_id, answer.host, answer.port) == (15, -1, "", -1)
        s.faults.add(api="Produce", throttle_ms=1234, count=1)
        answer = produce(sock, "t", [0])
        assert answer.responses[0].partition_responses[0].error_code == 0
        assert answer.throttle_time.total_seconds() == 1.234


def test_a_throttled_connection_is_muted_after_its_answer_and_the_others_are_not(tmp_path):
    with served(tmp_path) as s, raw.connect(s.host, s.port) as throttled, raw.connect(s.host, s.port) as other:
        create_topic(throttled, "t", 1)
        s.faults.add(api="Metadata", client_id="throttled", throttle_ms=600, count=1)
        body = {"topics": [{"name": "t"}], "allow_auto_topic_creation": True}
        t0 = time.monotonic()
        throttled.sendall(raw.request_frame(3, 12, 1, body, client_id="throttled")
                          + raw.request_frame(3, 12, 2, body, client_id="throttled"))   # pipelined
        corr, first = raw.read_response(throttled, 3, 12)
        first_s = time.monotonic() - t0
        assert corr == 1 and first.throttle_time.total_seconds() == 0.6
        assert metadata(other, ["t"]).topics[0].error_code == 0 and time.monotonic() - t0 < 0.5
        corr, second = raw.read_response(throttled, 3, 12)
        second_s = time.monotonic() - t0
        assert corr == 2 and second.throttle_time.total_seconds() == 0
        assert first_s < 0.5 and second_s >= 0.6, (first_s, second_s)


def test_drop_before_applies_nothing_and_drop_after_applies_and_answers_nothing(tmp_path):
    with served(tmp_path) as s:
        with raw.connect(s.host, s.port) as sock:
            create_topic(sock, "t", 1)
        s.faults.add(api="Produce", drop="before", count=1)
        with raw.connect(s.host, s.port) as sock:
            sock.sendall(raw.request_frame(0, 9, 1, {"acks": -1, "timeout": 5000, "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": batch(0)}]}]}))
            assert closed_without_answer(sock)
        with raw.connect(s.host, s.port) as sock:
            assert log_end(sock, "t", 0) == 0
        s.faults.add(api="Produce", drop="after", count=1)
        with raw.connect(s.host, s.port) as sock:
            sock.sendall(raw.request_frame(0, 9, 1, {"acks": -1, "timeout": 5000, "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": batch(0)}]}]}))
            assert closed_without_answer(sock)
        with raw.connect(s.host, s.port) as sock:
            assert log_end(sock, "t", 0) == 1
        assert [e.action for e in s.faults.events()] == ["drop-before", "drop-after"]


def test_an_errored_acks_0_produce_closes_the_connection_as_kafka_does(tmp_path):
    with served(tmp_path) as s:
        with raw.connect(s.host, s.port) as sock:
            create_topic(sock, "t", 1)
        s.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=1)
        with raw.connect(s.host, s.port) as sock:
            produce(sock, "t", [0], acks=0)
            assert closed_without_answer(sock)
        with raw.connect(s.host, s.port) as sock:
            assert log_end(sock, "t", 0) == 0


def test_latency_holds_that_request_and_other_connections_are_served_meanwhile(tmp_path):
    with served(tmp_path) as s, raw.connect(s.host, s.port) as slow, raw.connect(s.host, s.port) as fast:
        create_topic(slow, "t", 1)
        s.faults.add(api="ListOffsets", client_id="slow-client", latency_ms=600)
        frame = raw.request_frame(2, 7, 9, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}]},
            client_id="slow-client")
        t0 = time.monotonic()
        slow.sendall(frame)
        assert log_end(fast, "t", 0) == 0                 # another client: not held
        fast_s = time.monotonic() - t0
        corr, answer = raw.read_response(slow, 2, 7)
        slow_s = time.monotonic() - t0
        assert corr == 9 and answer.topics[0].partitions[0].error_code == 0
        assert slow_s >= 0.6 and fast_s < 0.5, (slow_s, fast_s)


def test_a_client_id_rule_hits_that_client_only(tmp_path):
    with served(tmp_path) as s, raw.connect(s.host, s.port) as sock:
        create_topic(sock, "t", 1)
        rule = s.faults.add(api="Produce", client_id="victim", error="NOT_LEADER_OR_FOLLOWER")
        other = produce(sock, "t", [0], correlation_id=2, client_id="bystander")
        hit = produce(sock, "t", [0], correlation_id=3, client_id="victim")
        assert other.responses[0].partition_responses[0].error_code == 0
        assert hit.responses[0].partition_responses[0].error_code == NOT_LEADER
        assert s.faults.rules()[0].hits == 1 and s.faults.rules()[0].rule_id == rule.rule_id
        assert [e.client_id for e in s.faults.events()] == ["victim"]


def test_faults_are_counted_in_metrics_and_written_for_the_live_view(tmp_path):
    with served(tmp_path) as s, raw.connect(s.host, s.port) as sock:
        create_topic(sock, "t", 2)
        assert "kafkasim_faults_injected_total{" not in scrape(s.metrics_port)
        s.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", topic="t", partition=1, count=2)
        s.faults.add(api="Metadata", latency_ms=10, count=1)
        produce(sock, "t", [0, 1])
        produce(sock, "t", [1])
        metadata(sock, ["t"])
        text = scrape(s.metrics_port)
        assert 'kafkasim_faults_injected_total{action="error",api="Produce",broker="0"} 2.0' in text
        assert 'kafkasim_faults_injected_total{action="latency",api="Metadata",broker="0"} 1.0' in text
        promtool = shutil.which("promtool") or missing("promtool")
        done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        path = os.path.join(s.data_dir, ".server-faults.json")

        def written():
            try:
                with open(path) as f:
                    doc = json.load(f)
            except (FileNotFoundError, json.JSONDecodeError):
                return None
            return doc if len(doc["events"]) == 3 else None
        doc = wait_until(written, 10, 0.05, ".server-faults.json with 3 events")
        first = doc["events"][0]
        assert (first["api"], first["action"], first["broker"], first["error_name"], first["partitions"]) == (
            "Produce", "error", 0, "NOT_LEADER_OR_FOLLOWER", [{"topic": "t", "partition": 1}])
        assert [e["action"] for e in doc["events"]] == ["error", "error", "latency"]
    assert not os.path.exists(path)                       # removed on a clean shutdown, as the address file


# ------------------------------------------------------------------ real clients

@pytest.mark.slow
def test_idempotent_confluent_producer_delivers_once_in_order_through_not_leader_errors(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition

    with served(tmp_path) as s:
        with raw.connect(s.host, s.port) as sock:
            create_topic(sock, "idem", 2)
        rule = s.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3, topic="idem", partition=0)
        p = Producer({"bootstrap.servers": s.bootstrap, "enable.idempotence": True, "linger.ms": 2,
                      "retry.backoff.ms": 20, "retry.backoff.max.ms": 50})
        acked, failed = [], []

        def report(err, msg):
            (failed if err else acked).append((msg.partition(), msg.offset(), msg.value()))
        n = 200
        for i in range(n):
            p.produce("idem", b"%05d" % i, partition=i % 2, on_delivery=report)
            if i % 20 == 0:
                p.poll(0)
                time.sleep(0.01)
        assert p.flush(30) == 0
        assert failed == [] and len(acked) == n
        assert s.faults.rules()[0].hits == 3 == rule.hits
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "read-back", "enable.auto.commit": False})
        c.assign([TopicPartition("idem", 0, 0), TopicPartition("idem", 1, 0)])
        got: dict[int, list[bytes]] = {0: [], 1: []}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < n and time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                assert not m.error(), m.error()
                got[m.partition()].append(m.value())
        c.close()
        assert got[0] == [b"%05d" % i for i in range(0, n, 2)]       # once each, in order
        assert got[1] == [b"%05d" % i for i in range(1, n, 2)]


@pytest.mark.slow
def test_kafka_python_without_idempotence_duplicates_a_record_when_the_connection_drops_after_append(tmp_path):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    with served(tmp_path) as s:
        with raw.connect(s.host, s.port) as sock:
            create_topic(sock, "dups", 1)
        p = KafkaProducer(bootstrap_servers=s.bootstrap, enable_idempotence=False, acks="all", retries=5,
                          retry_backoff_ms=50, request_timeout_ms=5000, linger_ms=0)
        p.send("dups", b"before").get(timeout=15)
        s.faults.add(api="Produce", drop="after", count=1)
        meta = p.send("dups", b"dropped-then-retried").get(timeout=30)
        p.send("dups", b"after").get(timeout=15)
        p.close()
        assert [e.action for e in s.faults.events()] == ["drop-after"]
        c = KafkaConsumer(bootstrap_servers=s.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
        c.assign([TopicPartition("dups", 0)])
        c.seek_to_beginning()
        values = [m.value for m in c]
        c.close()
        assert values == [b"before", b"dropped-then-retried", b"dropped-then-retried", b"after"]
        assert meta.offset == 2                          # the acknowledged copy is the retry's


@pytest.mark.slow
def test_300_ms_of_fetch_latency_shows_in_a_consumers_poll_latency(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition

    with served(tmp_path) as s:
        with raw.connect(s.host, s.port) as sock:
            create_topic(sock, "lat", 1)
        p = Producer({"bootstrap.servers": s.bootstrap, "linger.ms": 0})
        c = Consumer({"bootstrap.servers": s.bootstrap, "group.id": "lat", "enable.auto.commit": False,
                      "fetch.wait.max.ms": 50, "fetch.min.bytes": 1, "client.id": "lat-consumer"})
        c.assign([TopicPartition("lat", 0, 0)])
        c.consume(1, 2.0)                                 # connected and fetching

        def one_round_trip(i: int) -> float:
            """Produce one record and time until the consumer returns it."""
            p.produce("lat", b"%d" % i)
            p.flush(10)
            t0 = time.monotonic()
            while True:
                for m in c.consume(1, 5.0):
                    if not m.error() and m.value() == b"%d" % i:
                        return time.monotonic() - t0
                assert time.monotonic() - t0 < 15, f"record {i} not consumed"

        base = sorted(one_round_trip(i) for i in range(5))[2]
        s.faults.add(api="Fetch", client_id="lat-consumer", latency_ms=300)
        slow = sorted(one_round_trip(i) for i in range(5, 10))[2]
        c.close()
        assert slow >= base + 0.2 and slow >= 0.3, (base, slow)


def test_a_served_clusters_listeners_share_one_rule_set_and_a_rule_names_its_broker(tmp_path):
    from kafkasim.server.address import read_address

    faults = Faults(seed=3, brokers=[0, 1])
    with served(tmp_path, faults, brokers="0:r0,1:r1") as s:
        ports = {b["id"]: b["port"] for b in read_address(s.data_dir)["brokers"]}
        faults.add(api="Metadata", broker=1, error="REQUEST_TIMED_OUT")
        with raw.connect(s.host, ports[0]) as b0, raw.connect(s.host, ports[1]) as b1:
            assert metadata(b0, ["c"]).topics[0].error_code == 0
            assert metadata(b1, ["c"]).topics[0].error_code == TIMED_OUT
        assert [(e.broker, e.action) for e in faults.events()] == [(1, "error")]
        text = scrape(s.metrics_port)
        assert 'kafkasim_faults_injected_total{action="error",api="Metadata",broker="1"} 1.0' in text


@pytest.mark.slow
@pytest.mark.spark
def test_the_ordering_audit_names_the_duplicate_and_finds_nothing_wrong_in_the_idempotent_topic(tmp_path):
    """Both real-client cases on one server, then ``kafkasim audit ordering`` (Spark) over the
    stopped data dir: the non-idempotent retry after a post-append drop is the one duplicate;
    the idempotent producer's topic, through three NOT_LEADER_OR_FOLLOWER answers, has no
    duplicate, inversion or gap. Records carry kafkasim's sequence headers (per key)."""
    import sys

    from confluent_kafka import Producer
    from kafka import KafkaProducer

    keys = [b"merchant-%d" % i for i in range(6)]

    def headers(producer: str, seq: int):
        return [("kafkasim.producer", producer.encode()), ("kafkasim.seq", str(seq).encode())]

    with served(tmp_path) as s:
        with raw.connect(s.host, s.port) as sock:
            create_topic(sock, "idem", 2)
            create_topic(sock, "dups", 1)
        s.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3, topic="idem", partition=0)
        p = Producer({"bootstrap.servers": s.bootstrap, "enable.idempotence": True, "linger.ms": 2,
                      "partitioner": "murmur2_random", "retry.backoff.ms": 20, "retry.backoff.max.ms": 50})
        for seq in range(40):
            for k in keys:
                p.produce("idem", b"v", k, headers=headers("idem-producer", seq))
            p.poll(0)
        assert p.flush(30) == 0
        assert s.faults.rules()[0].hits == 3
        kp = KafkaProducer(bootstrap_servers=s.bootstrap, enable_idempotence=False, acks="all", retries=5,
                           retry_backoff_ms=50, request_timeout_ms=5000, linger_ms=0)
        kp.send("dups", b"v", key=b"merchant-0", headers=headers("kp", 0)).get(timeout=15)
        s.faults.add(api="Produce", drop="after", count=1, topic="dups")
        kp.send("dups", b"v", key=b"merchant-0", headers=headers("kp", 1)).get(timeout=30)
        kp.send("dups", b"v", key=b"merchant-0", headers=headers("kp", 2)).get(timeout=15)
        kp.close()
    done = subprocess.run([sys.executable, "-m", "kafkasim", "audit", "ordering", "--data-dir", s.data_dir,
                           "--json", "-"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 3, done.stderr[-3000:]
    report = json.loads(done.stdout[done.stdout.index("{"):done.stdout.rindex("}") + 1])
    assert report["records"] == 40 * len(keys) + 4
    found = {k: v for k, v in report["violations"].items() if v}
    assert found == {"duplicate": 1}, report["violations"]
    [dup] = [d for d in report["details"] if d["kind"] == "duplicate"]
    assert (dup["topic"], dup["producer"], dup["sequence"], dup["offset"], dup["other_offset"]) == (
        "dups", "kp", 1, 2, 1)
