"""Disk full (Kafka's log-dir failure): appends fail with KafkaStorageError and nothing is half
written, the broker's log directory goes offline (its led partitions move, it leaves every ISR),
the other brokers go on, and after clear + restart it catches up with nothing acknowledged lost."""

from __future__ import annotations

import os

import pytest

from kafkasim.broker.broker import Broker
from kafkasim.broker.cluster import Cluster
from kafkasim.errors import (
    InvalidArgumentError, KafkaStorageError, LeaderNotAvailableError, NotLeaderOrFollowerError,
)
from kafkasim.records.record_batch import encode_batch

from tests.cluster.conftest import RACKS3, records_of

TOPIC = "orders"


def _batch(keys) -> bytes:
    return encode_batch(0, [(i, 1000, k, b"v", ()) for i, k in enumerate(keys)])


def _file_state(log) -> list[tuple[str, int]]:
    """Every file of a log directory and its size: what "nothing half-written" compares."""
    return sorted((e.name, e.stat().st_size) for e in os.scandir(log.directory) if e.is_file())


def _produce_all(c: Cluster, acked: dict, tag: str, partitions: int = 3, n: int = 2) -> None:
    for p in range(partitions):
        keys = [f"{tag}-{p}-{i}".encode() for i in range(n)]
        res = c.node(c.leader_for(TOPIC, p)).produce(TOPIC, p, _batch(keys), acks="all")
        acked.update({k: (p, res.base_offset + i) for i, k in enumerate(keys)})


def _led_by(c: Cluster, b: int) -> list[int]:
    return [p["partition"] for p in c.describe_cluster()["partitions"] if p["leader"] == b]


@pytest.fixture
def cluster3(tmp_path, clock):
    c = Cluster(tmp_path / "data", RACKS3, clock=clock, seed=7)
    c.create_topic(TOPIC, 3, 3, {"min.insync.replicas": "2"})
    yield c
    c.close()


def test_a_full_disk_takes_the_brokers_replicas_offline_and_the_others_go_on(cluster3, clock, tmp_path):
    c = cluster3
    acked: dict[bytes, tuple[int, int]] = {}
    _produce_all(c, acked, "before")
    full = c.leader_for(TOPIC, 0)
    led = _led_by(c, full)
    assert led, "the broker whose disk fills leads a partition"
    epochs = {p["partition"]: p["leader_epoch"] for p in c.describe_cluster()["partitions"]}

    assert c.metrics()["OfflineLogDirectoryCount"] == 0
    c.faults.fill_disk(full)
    assert c.metrics()["OfflineLogDirectoryCount"] == 1

    d = c.describe_cluster()
    broker = next(b for b in d["brokers"] if b["id"] == full)
    assert (broker["state"], broker["disk_full"], broker["log_dir_offline"]) == ("alive", True, True)
    for p in d["partitions"]:
        assert full not in p["isr"], f"the full broker is still in the ISR of {TOPIC}-{p['partition']}"
        assert p["leader"] not in (full, -1)
        if p["partition"] in led:                       # an election: a new leader from the ISR
            assert p["leader_epoch"] == epochs[p["partition"]] + 1
    # recorded in cluster.json, as the other faults: a new controller (a CLI call) sees it
    c.close()
    c = Cluster(tmp_path / "data", clock=clock)
    try:
        assert c.brokers[full].disk_full and c.brokers[full].log_dir_offline
        # the other brokers go on: acks=all (min ISR 2 of the 2 left) is acknowledged
        _produce_all(c, acked, "during")
        # the full broker: every append to its replicas fails, nothing is written
        for p in range(3):
            log = c._partitions[(TOPIC, p)].hosted[full].log
            files, leo = _file_state(log), log.log_end_offset
            with pytest.raises(KafkaStorageError, match="No space left on device"):
                log.append_batch(_batch([b"x"]))
            assert (_file_state(log), log.log_end_offset) == (files, leo)
            # requests addressed to it for its replicas: KAFKA_STORAGE_ERROR (an offline partition)
            with pytest.raises(KafkaStorageError):
                c.node(full).produce(TOPIC, p, _batch([b"x"]), acks="all")
            with pytest.raises(KafkaStorageError):
                c.node(full).fetch(TOPIC, p, 0)
        assert KafkaStorageError.errno == 56 and KafkaStorageError.retriable    # Kafka's: retriable
        # the fault and its effect are logged
        assert [(e.kind, e.broker) for e in c.faults.events()] == []      # a new object logs anew
        c.faults.clear_disk(full)
        assert [(e.kind, e.broker) for e in c.faults.events()] == [("clear-disk", full)]
        # cleared, but the log directory stays offline until the broker restarts
        clock.advance(60_000)
        c.tick()
        assert c.brokers[full].log_dir_offline
        assert all(full not in p["isr"] for p in c.describe_cluster()["partitions"])
        _produce_all(c, acked, "cleared")

        c.stop_broker(full)
        c.start_broker(full)
        assert [e.kind for e in c.faults.events()][-3:] == ["stop", "start", "log-dir-online"]
        assert not c.brokers[full].log_dir_offline
        clock.advance(1)
        c.tick()
        _produce_all(c, acked, "after")
        # caught up: back in every ISR, its replicas equal their leaders, nothing acknowledged lost
        for p in range(3):
            part = c._partitions[(TOPIC, p)]
            assert full in part.isr
            leader = records_of(part.log)
            assert records_of(part.hosted[full].log) == leader
            fetched = {}
            offset = 0
            while True:
                res = c.fetch(TOPIC, p, offset)
                if not res.records:
                    break
                fetched.update({r.key: r.offset for r in res.records})
                offset = res.next_offset
            for key, (kp, off) in acked.items():
                if kp == p:
                    assert fetched.get(key) == off, f"acknowledged {key!r} at {off} lost or moved"
        assert c.lost_records == []
    finally:
        c.close()


def test_the_last_isr_member_filling_its_disk_takes_the_partition_offline(cluster3, clock):
    c = cluster3
    acked: dict[bytes, tuple[int, int]] = {}
    _produce_all(c, acked, "a", partitions=1)
    replicas = c.describe_cluster()["partitions"][0]["replicas"]
    for b in replicas[1:]:
        c.stop_broker(b)
    last = replicas[0]
    assert c.leader_for(TOPIC, 0) == last

    c.fill_disk(last)

    assert c.leader_for(TOPIC, 0) == -1                       # offline: no ISR member can lead
    assert c.describe_cluster()["partitions"][0]["isr"] == [last]   # Kafka keeps the last one
    with pytest.raises(LeaderNotAvailableError):
        c.produce(TOPIC, 0, _batch([b"x"]), acks="all")
    for b in replicas[1:]:
        c.start_broker(b)
    assert c.leader_for(TOPIC, 0) == -1                       # they are not in the ISR: no clean leader
    # a restart while the disk is still full brings the log directory straight back offline
    c.stop_broker(last)
    c.start_broker(last)
    assert c.brokers[last].log_dir_offline and c.leader_for(TOPIC, 0) == -1
    c.clear_disk(last)
    c.stop_broker(last)
    c.start_broker(last)
    assert c.leader_for(TOPIC, 0) == last
    clock.advance(1)
    c.tick()
    assert records_of(c._partitions[(TOPIC, 0)].log) == sorted((o, k) for k, (_, o) in acked.items())


def test_disk_faults_refuse_bad_calls(cluster3):
    c = cluster3
    with pytest.raises(InvalidArgumentError, match="broker 9 is not in the cluster"):
        c.fill_disk(9)
    with pytest.raises(InvalidArgumentError, match="not full"):
        c.clear_disk(1)
    c.fill_disk(1)
    with pytest.raises(InvalidArgumentError, match="already full"):
        c.fill_disk(1)


def test_a_broker_node_that_no_longer_hosts_the_partition_still_answers_not_leader(cluster3):
    c = cluster3
    c.create_topic("single", 1, 1)
    host = c.describe_cluster()["partitions"][-1]["replicas"][0]
    other = next(b for b in range(3) if b != host)
    c.fill_disk(other)
    with pytest.raises(NotLeaderOrFollowerError):
        c.node(other).produce("single", 0, _batch([b"x"]))


def test_one_broker_with_a_full_disk_answers_kafka_storage_error_until_reopened(tmp_path, clock):
    b = Broker(tmp_path / "one", clock=clock)
    try:
        b.create_topic("t", 2)
        b.produce("t", 0, _batch([b"a", b"b"]))
        log = b.log("t", 0)
        files = _file_state(log)

        b.fill_disk()

        assert b.log_dir_offline
        for p in range(2):
            with pytest.raises(KafkaStorageError):
                b.produce("t", p, _batch([b"c"]))
            with pytest.raises(KafkaStorageError):
                b.fetch("t", p, 0)
            with pytest.raises(KafkaStorageError):
                b.list_offsets("t", p, -1)
        with pytest.raises(KafkaStorageError, match="No space left on device"):
            log.append_batch(_batch([b"c"]))
        assert _file_state(log) == files
        with pytest.raises(InvalidArgumentError, match="broker_id"):
            b.clear_disk(3)
        b.clear_disk()
        assert b.log_dir_offline                          # until the broker restarts
        with pytest.raises(KafkaStorageError):
            b.produce("t", 0, _batch([b"c"]))
    finally:
        b.close()
    with Broker(tmp_path / "one", clock=clock) as b:      # the restart
        assert not b.log_dir_offline
        assert [r.key for r in b.fetch("t", 0, 0).records] == [b"a", b"b"]
        assert b.produce("t", 0, _batch([b"c"])).base_offset == 2


def test_log_refuse_writes_leaves_every_file_as_it_was(tmp_path, clock):
    from kafkasim.storage.log import Log
    log = Log(tmp_path / "t-0", clock=clock)
    try:
        log.append_batch(_batch([b"a"]))
        files = _file_state(log)
        log.refuse_writes("No space left on device")
        assert log.writes_refused == "No space left on device"
        leader = Log(tmp_path / "leader-0", clock=clock)
        try:
            leader.append_batch(_batch([b"a"]))
            leader.append_batch(_batch([b"b"]))
            raw = leader.read_batches(1)[0][1]
        finally:
            leader.close()
        for write in (lambda: log.append_batch(_batch([b"b"])), lambda: log.append([(1000, b"k", b"v", ())]),
                      lambda: log.append_replica_batch(raw), lambda: log.append_control(7, 0, True)):
            with pytest.raises(KafkaStorageError, match="No space left on device"):
                write()
            assert _file_state(log) == files and log.log_end_offset == 1
        log.refuse_writes(None)
        assert log.append_batch(_batch([b"b"])).base_offset == 1
    finally:
        log.close()


def test_cluster_json_keeps_the_new_broker_fields_and_checks_them(cluster3, clock, tmp_path):
    import json
    c = cluster3
    c.fill_disk(2)
    c.isolate(1, from_="followers")
    assert c.log_dir_offline and c.offline_log_dirs == [2]
    c.close()
    path = tmp_path / "data" / "meta" / "cluster.json"
    original = path.read_text()
    doc = json.loads(original)
    assert [(b["isolated_from"], b["disk_full"], b["log_dir_offline"]) for b in doc["brokers"]] == \
        [(None, False, False), ("followers", False, False), (None, True, True)]
    for field, bad in (("disk_full", "yes"), ("isolated_from", "peers"), ("log_dir_offline", 1)):
        broken = json.loads(original)
        broken["brokers"][1][field] = bad
        path.write_text(json.dumps(broken))
        with pytest.raises(KafkaStorageError, match=rf"brokers\[1\]\.{field}="):
            Cluster(tmp_path / "data", clock=clock).close()
    # a file written before these fields existed loads with them unset
    for b in doc["brokers"]:
        for field in ("isolated_from", "disk_full", "log_dir_offline"):
            del b[field]
    path.write_text(json.dumps(doc))
    with Cluster(tmp_path / "data", clock=clock) as again:
        assert all(not i.disk_full and not i.log_dir_offline and i.isolated_from is None
                   for i in again.brokers.values())
