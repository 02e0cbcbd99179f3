"""Share groups (KIP-932) with real clients: confluent-kafka's ``ShareConsumer`` against
``kafkasim serve`` on loopback.

- four share consumers on a 2-partition topic all receive records, and every record is
  delivered once (implicit acknowledgement accepts them all: the share-partition start offset
  ends at the log end);
- a released record comes back with delivery count 2;
- a record held by a consumer that stops polling is redelivered to another once its
  acquisition lock (``group.share.record.lock.duration.ms``) expires;
- a restart, clean (SIGTERM) or not (SIGKILL), keeps the group's in-flight state: no accepted
  record is delivered again, no unacknowledged record is lost (the records acquired when it
  went down are delivered again: acquisition locks do not survive a restart, as in Kafka).

The share-partitions start at the log end (``share.auto.offset.reset`` latest, Kafka's
default), so each test waits for the group to initialise them before producing.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from kafkasim.records import record_batch as rb

from tests.server.conftest import start_server, wait_until

pytestmark = pytest.mark.slow

SHORT_LOCK = ("--override", "group.share.min.record.lock.duration.ms=1000",
              "--override", "group.share.record.lock.duration.ms=2000")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})     # kept alive until the result is in
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _produce(bootstrap: str, topic: str, values, partition=None) -> None:
    """One record per batch (each flushed), so every record can go to a different consumer."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i, v in enumerate(values):
        kw = {} if partition is None else {"partition": partition}
        p.produce(topic, key=b"k%d" % i, value=v, **kw)
        p.flush(10)
    assert p.flush(30) == 0


def _share_consumer(bootstrap: str, group: str, topic: str, **conf):
    from confluent_kafka import ShareConsumer

    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    c.subscribe([topic])
    return c


def _initialised(bootstrap: str, group: str, topic: str, partitions: int):
    """True once the group's share-partitions of ``topic`` all have a start offset."""
    from kafkasim.server.remote import RemoteBroker
    from kafkasim.types import TopicPartition

    host, port = bootstrap.split(":")
    with RemoteBroker(host, int(port)) as b:
        try:
            offsets = b.describe_share_group_offsets(group, [TopicPartition(topic, p) for p in range(partitions)])
        except Exception:
            return False
    return len(offsets) == partitions and all(o["start_offset"] >= 0 for o in offsets.values())


def _poll_until_ready(consumers, bootstrap, group, topic, partitions, timeout=60):
    """Poll every consumer until the group has initialised its share-partitions."""
    def ready():
        for c in consumers:
            assert not [m for m in c.poll(0.2) if m.error() is None], "records before anything was produced"
        return _initialised(bootstrap, group, topic, partitions)
    wait_until(ready, timeout, interval=0, what="the share group to initialise its partitions")


def test_four_share_consumers_on_two_partitions_all_receive_and_every_record_is_delivered(tmp_path):
    from kafkasim.server.remote import RemoteBroker
    from kafkasim.types import TopicPartition

    served = start_server(tmp_path / "data")
    consumers = []
    try:
        _create(served.bootstrap, "jobs", 2)
        consumers = [_share_consumer(served.bootstrap, "workers", "jobs", **{"max.poll.records": 5,
                                                                              "client.id": f"worker-{i}"})
                     for i in range(4)]
        _poll_until_ready(consumers, served.bootstrap, "workers", "jobs", 2)
        values = [b"%d" % i for i in range(200)]
        producer = threading.Thread(target=_produce, args=(served.bootstrap, "jobs", values), daemon=True)
        producer.start()
        got: list[list[tuple]] = [[] for _ in consumers]
        deadline = time.monotonic() + 90
        while sum(map(len, got)) < len(values) and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                for m in c.poll(0.05):
                    if m.error() is None:
                        got[i].append((m.partition(), m.offset(), m.value(), m.delivery_count()))
        producer.join(30)
        delivered = [v for g in got for _, _, v, _ in g]
        assert sorted(delivered) == sorted(values), "every record once, none twice"
        assert all(g for g in got), f"records per consumer: {[len(g) for g in got]}"
        assert {d for g in got for *_, d in g} == {1}
        # four members on two partitions: some partition was shared by several of them (the simple
        # assignor spreads members by their ids' hashes: 2+2 or 3+1)
        readers = [sum(1 for g in got if any(r[0] == p for r in g)) for p in (0, 1)]
        assert min(readers) >= 1 and max(readers) >= 2, f"consumers per partition: {readers}"
        host, port = served.bootstrap.split(":")
        with RemoteBroker(host, int(port)) as b:
            [described] = b.share_group_describe(["workers"])
            assert described["error"] is None
            assert len(described["members"]) == 4
            assert {m["client_id"] for m in described["members"]} == {f"worker-{i}" for i in range(4)}
            # kafka-share-groups.sh's view of it, through kafkasim's CLI against the server
            out = subprocess.run([sys.executable, "-m", "kafkasim", "share-groups", "describe", "--group", "workers",
                                  "--members", "--bootstrap-server", served.bootstrap], capture_output=True,
                                 text=True, timeout=60)
            assert out.returncode == 0, out.stderr
            lines = out.stdout.splitlines()
            assert lines[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
            assert sorted(line.split()[3] for line in lines[1:]) == [f"worker-{i}" for i in range(4)]
            for c in consumers:
                c.commit_sync()            # implicit mode: the last poll's records are accepted
            ends = {p: b.list_offsets("jobs", p, -1)[0] for p in (0, 1)}
            wait_until(lambda: all(o["start_offset"] == ends[tp.partition] for tp, o in
                                   b.describe_share_group_offsets("workers").items()), 20,
                       what="the SPSO to reach the log end of both partitions")
            assert set(b.describe_share_group_offsets("workers")) == {TopicPartition("jobs", 0),
                                                                       TopicPartition("jobs", 1)}
        out = subprocess.run([sys.executable, "-m", "kafkasim", "share-groups", "describe", "--group", "workers",
                              "--offsets", "--bootstrap-server", served.bootstrap], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        rows = [line.split() for line in out.stdout.splitlines()[1:]]
        assert sorted((r[1], int(r[2]), int(r[3])) for r in rows) == [("jobs", p, ends[p]) for p in (0, 1)]
    finally:
        for c in consumers:
            c.close()
        served.stop()


def test_released_records_come_back_with_delivery_count_two(tmp_path):
    from confluent_kafka import AcknowledgeType

    served = start_server(tmp_path / "data")
    c = None
    try:
        _create(served.bootstrap, "jobs", 1)
        c = _share_consumer(served.bootstrap, "g", "jobs", **{"share.acknowledgement.mode": "explicit"})
        _poll_until_ready([c], served.bootstrap, "g", "jobs", 1)
        _produce(served.bootstrap, "jobs", [b"a", b"b", b"c"])
        first, again = {}, {}
        deadline = time.monotonic() + 30
        while len(again) < 3 and time.monotonic() < deadline:
            for m in c.poll(0.5):
                if m.error() is None:
                    if m.offset() not in first:         # the first delivery: released
                        first[m.offset()] = m.delivery_count()
                        c.acknowledge(m, AcknowledgeType.RELEASE)
                    else:                               # back again: accepted
                        again[m.offset()] = m.delivery_count()
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
        assert first == {0: 1, 1: 1, 2: 1}
        assert again == {0: 2, 1: 2, 2: 2}
    finally:
        if c is not None:
            c.close()
        served.stop()


def test_a_record_held_by_a_consumer_that_stops_polling_is_redelivered_to_another(tmp_path):
    from confluent_kafka import AcknowledgeType

    served = start_server(tmp_path / "data", *SHORT_LOCK)
    stalled = other = None
    try:
        _create(served.bootstrap, "jobs", 1)
        stalled = _share_consumer(served.bootstrap, "g", "jobs", **{"share.acknowledgement.mode": "explicit"})
        _poll_until_ready([stalled], served.bootstrap, "g", "jobs", 1)
        _produce(served.bootstrap, "jobs", [b"x", b"y"])
        held = wait_until(lambda: [m for m in stalled.poll(0.5) if m.error() is None], 30, what="a delivery")
        held_offsets = {m.offset() for m in held}
        acquired_at = time.monotonic()
        # ``stalled`` stops polling (its heartbeats go on in librdkafka's thread): it keeps its locks
        other = _share_consumer(served.bootstrap, "g", "jobs", **{"share.acknowledgement.mode": "explicit"})
        got = {}
        deadline = time.monotonic() + 40
        while not held_offsets <= set(got) and time.monotonic() < deadline:
            for m in other.poll(0.5):
                if m.error() is None:
                    got[m.offset()] = (m.delivery_count(), time.monotonic() - acquired_at)
                    other.acknowledge(m, AcknowledgeType.ACCEPT)
        other.commit_sync()
        assert held_offsets <= set(got), f"held {held_offsets}, redelivered {got}"
        for o in held_offsets:
            count, after = got[o]
            assert count == 2
            assert after >= 1.5, f"offset {o} went to the other consumer {after:.2f}s after it was acquired"
    finally:
        for c in (other, stalled):
            if c is not None:
                c.close()
        served.stop()


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_a_restart_keeps_the_share_groups_in_flight_state(tmp_path, how):
    from confluent_kafka import AcknowledgeType

    port = _free_port()
    data = tmp_path / "data"
    served = start_server(data, "--listen", f"127.0.0.1:{port}")
    c = None
    try:
        _create(served.bootstrap, "jobs", 1)
        c = _share_consumer(served.bootstrap, "g", "jobs",
                            **{"share.acknowledgement.mode": "explicit", "max.poll.records": 4})
        _poll_until_ready([c], served.bootstrap, "g", "jobs", 1)
        values = [b"%d" % i for i in range(12)]
        _produce(served.bootstrap, "jobs", values)
        accepted, held = {}, {}
        deadline = time.monotonic() + 30
        while len(accepted) < 6 and time.monotonic() < deadline:   # accept some, commit them
            for m in c.poll(0.5):
                if m.error() is None:
                    if len(accepted) < 6:
                        accepted[m.offset()] = m.value()
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                    else:
                        c.acknowledge(m, AcknowledgeType.RELEASE)
            c.commit_sync()
        assert len(accepted) == 6
        held = wait_until(lambda: {m.offset(): m.value() for m in c.poll(0.5) if m.error() is None}, 30,
                          what="records acquired and left unacknowledged")
        # the server goes down with ``held`` acquired and never acknowledged
        if how == "sigterm":
            assert served.stop() == 0
        else:
            served.proc.send_signal(signal.SIGKILL)
            served.proc.wait(10)
        old, c = c, None
        threading.Thread(target=old.close, daemon=True).start()    # it cannot reach the server now
        served = start_server(data, "--listen", f"127.0.0.1:{port}")
        c = _share_consumer(served.bootstrap, "g", "jobs", **{"share.acknowledgement.mode": "explicit"})
        after = {}
        deadline = time.monotonic() + 60
        while len(after) < len(values) - len(accepted) and time.monotonic() < deadline:
            for m in c.poll(0.5):
                if m.error() is None:
                    after[m.offset()] = (m.value(), m.delivery_count())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            if after:
                c.commit_sync()
        assert not set(after) & set(accepted), "an accepted record was delivered again after the restart"
        assert {**accepted, **{o: v for o, (v, _) in after.items()}} == dict(enumerate(values)), \
            "a record was lost across the restart"
        assert set(held) <= set(after), "the records held at the restart were not delivered again"
    finally:
        if c is not None:
            c.close()
        served.stop()


def test_share_consumers_on_a_served_cluster_fetch_from_each_partitions_leader(tmp_path):
    """Three brokers, three partitions led by different brokers: librdkafka sends each
    partition's ShareFetch to its leader (a non-leader answers NOT_LEADER_OR_FOLLOWER), and
    every record is delivered once."""
    served = start_server(tmp_path / "data", "--brokers", "0,1,2")
    consumers = []
    try:
        _create(served.bootstrap, "jobs", 3)
        consumers = [_share_consumer(served.bootstrap, "w", "jobs", **{"max.poll.records": 5}) for _ in range(2)]
        _poll_until_ready(consumers, served.bootstrap, "w", "jobs", 3)
        values = [b"%d" % i for i in range(60)]
        _produce(served.bootstrap, "jobs", values)
        got = []
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            for c in consumers:
                got += [m.value() for m in c.poll(0.1) if m.error() is None]
        assert sorted(got) == sorted(values)
    finally:
        for c in consumers:
            c.close()
        served.stop()


def test_share_sessions_and_acknowledgements_answer_kafkas_errors(tmp_path):
    """Raw frames: a session continued with the wrong epoch (INVALID_SHARE_SESSION_EPOCH, the
    session dropped: SHARE_SESSION_NOT_FOUND after), acknowledgements on an opening fetch
    (INVALID_REQUEST), an acknowledgement of a record the member does not hold
    (INVALID_RECORD_STATE in the partition's ``acknowledge_error_code``), and ShareFetch's
    acquired ranges with their delivery counts."""
    from tests.server import raw

    served = start_server(tmp_path / "data")
    try:
        with raw.connect(served.host, served.port) as sock:
            meta = raw.call(sock, 3, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": True})
            tid = meta.topics[0].topic_id
            hb = raw.call(sock, 76, 1, {"group_id": "g", "member_id": "m1", "member_epoch": 0,
                                        "rack_id": None, "subscribed_topic_names": ["t"]})
            assert int(hb.error_code) == 0 and hb.assignment.topic_partitions[0].partitions == (0,)

            def fetch(epoch, acks=(), member="m1", wait=0):
                return raw.call(sock, 78, 1, {
                    "group_id": "g", "member_id": member, "share_session_epoch": epoch, "max_wait": wait,
                    "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100,
                    "topics": [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                        {"first_offset": a, "last_offset": b, "acknowledge_types": [k]} for a, b, k in acks]}]}],
                    "forgotten_topics_data": []})

            assert int(fetch(0, acks=[(0, 0, 1)]).error_code) == 42         # INVALID_REQUEST
            assert int(fetch(0).error_code) == 0                               # opens; initialises at the end (0)
            raw.call(sock, 0, 9, {"acks": 1, "timeout": 5000, "topic_data": [{"name": "t", "partition_data": [
                {"index": 0, "records": rb.encode_batch(0, [(i, 1_700_000_000_000, b"k", b"v%d" % i, ())
                                                          for i in range(3)])}]}]})
            got = fetch(1, wait=2000)
            part = got.responses[0].partitions[0]
            assert [(a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired_records] == [(0, 2, 1)]
            assert raw.batches(part.records)[0][1][2].value == b"v2"
            # m2 acknowledges what m1 holds: INVALID_RECORD_STATE, nothing changes
            raw.call(sock, 76, 1, {"group_id": "g", "member_id": "m2", "member_epoch": 0, "rack_id": None,
                                   "subscribed_topic_names": ["t"]})
            assert int(fetch(0, member="m2").error_code) == 0
            other = fetch(1, acks=[(0, 0, 1)], member="m2")
            assert int(other.responses[0].partitions[0].acknowledge_error_code) == 121
            # m1 releases 1, accepts 0 and 2 (one type per offset); 1 comes back with delivery count 2
            mine = fetch(2, acks=[(0, 2, 9)])
            assert int(mine.error_code) == 42                                  # type 9: INVALID_REQUEST
            ack = raw.call(sock, 79, 1, {"group_id": "g", "member_id": "m1", "share_session_epoch": 2, "topics": [
                {"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": 0, "last_offset": 2, "acknowledge_types": [1, 2, 1]}]}]}]})
            assert int(ack.error_code) == 0 and int(ack.responses[0].partitions[0].error_code) == 0
            again = fetch(3)
            assert [(a.first_offset, a.last_offset, a.delivery_count)
                    for a in again.responses[0].partitions[0].acquired_records] == [(1, 1, 2)]
            # the wrong epoch drops the session (its record released); then it is not found
            assert int(fetch(7).error_code) == 123
            assert int(fetch(4).error_code) == 122
            reopened = fetch(0, member="m2")           # a new session for m2 (which had one): it fetches too
            assert int(reopened.error_code) == 0
            assert [(a.first_offset, a.delivery_count)
                    for a in reopened.responses[0].partitions[0].acquired_records] == [(1, 3)]
    finally:
        served.stop()
