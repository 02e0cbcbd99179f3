"""The live view's snapshot of injected faults: the recent fault events a running ``kafkasim serve``
writes (``.server-faults.json``), per partition and per broker, and the brokers' fault states from
``meta/cluster.json`` (disk full, log dir offline, isolated from clients, followers or both)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kafkasim.clock import SystemClock
from kafkasim.view.snapshot import DataDirWatcher
from tests.server.conftest import wait_until


def event(t, action, partitions=(), broker=0, api="Produce", **kw):
    row = {"time_ms": t, "rule_id": 1, "broker": broker, "api": api, "client_id": "shop", "action": action,
           "partitions": [{"topic": tp, "partition": p} for tp, p in partitions],
           "error_code": None, "error_name": None, "latency_ms": 0}
    row.update(kw)
    return row


def write_json(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(content, f)


def test_recent_fault_events_per_partition_and_broker_and_broker_fault_states(tmp_path, clock):
    d = str(tmp_path / "data")
    now = clock.now_ms()
    nlof = {"error_code": 6, "error_name": "NOT_LEADER_OR_FOLLOWER"}
    events = [event(now - 9000, "error", [("orders", 2)], **nlof),              # too old: not drawn
              event(now - 1200, "error", [("orders", 0)], **nlof),
              event(now - 1100, "error", [("orders", 0)], **nlof),
              event(now - 1000, "latency", [("orders", 1)], broker=2, api="Fetch", latency_ms=300),
              event(now - 900, "error", [("orders", 0)], **nlof),
              event(now - 800, "drop-after", [], broker=1),
              event(now - 700, "latency", [], broker=1, api="Metadata", latency_ms=50),
              event(now - 600, "latency", [], broker=1, api="Metadata", latency_ms=120)]
    write_json(os.path.join(d, ".server-faults.json"), {"pid": 1, "written_ms": now, "events": events})
    write_json(os.path.join(d, "meta", "cluster.json"), {
        "version": 1, "seed": 0, "placements": 1, "lost_records": [],
        "partitions": {"orders": [{"replicas": [2, 0], "leader": 0, "isr": [0], "leader_epoch": 1}]},
        "brokers": [{"id": 0, "rack": None, "state": "alive", "delay_ms": 0},
                    {"id": 1, "rack": None, "state": "alive", "delay_ms": 0, "isolated_from": "clients",
                     "disk_full": False, "log_dir_offline": False},
                    {"id": 2, "rack": None, "state": "alive", "delay_ms": 500, "isolated_from": None,
                     "disk_full": True, "log_dir_offline": True},
                    {"id": 3, "rack": None, "state": "isolated", "delay_ms": 0, "isolated_from": None,
                     "disk_full": False, "log_dir_offline": False}]})
    write_json(os.path.join(d, "meta", "topics", "orders.json"), {"name": "orders", "partitions": 1})
    w = DataDirWatcher(d, clock=clock)
    snap = w.poll()
    assert snap["problems"] == []
    roles = {b["id"]: [(r["partition"], r["role"]) for r in b["replicas"]] for b in snap["brokers"]}
    assert roles == {0: [(0, "leader")], 1: [], 2: [(0, "offline")], 3: []}   # its log dir is offline
    faults = snap["faults"]
    assert faults["partitions"] == [
        {"topic": "orders", "partition": 0, "count": 3, "last_ms": now - 900, "apis": ["Produce"], "brokers": [0],
         "labels": ["NOT_LEADER_OR_FOLLOWER ×3"]},
        {"topic": "orders", "partition": 1, "count": 1, "last_ms": now - 1000, "apis": ["Fetch"], "brokers": [2],
         "labels": ["+300 ms"]}]
    assert faults["brokers"] == [{"broker": 1, "count": 3, "last_ms": now - 600, "apis": ["Metadata", "Produce"],
                                  "labels": ["+120 ms ×2", "drop after"]}]
    assert [e["time_ms"] for e in faults["events"]] == [e["time_ms"] for e in reversed(events[1:])]
    assert [(b["id"], b["isolated_from"], b["disk_full"], b["log_dir_offline"], b["slow_ms"])
            for b in snap["brokers"]] == [(0, None, False, False, 0), (1, "clients", False, False, 0),
                                          (2, None, True, True, 500), (3, "both", False, False, 0)]
    clock.advance(5000)                  # the window passes: nothing left to flash, the states stay
    snap = w.poll()
    assert (snap["faults"]["partitions"], snap["faults"]["brokers"], snap["faults"]["events"]) == ([], [], [])
    assert [b["disk_full"] for b in snap["brokers"]] == [False, False, True, False]


def test_an_unreadable_fault_events_file_is_a_problem_naming_it(tmp_path, clock):
    d = tmp_path / "data"
    d.mkdir()
    (d / ".server-faults.json").write_text('{"events": [{"time_ms": "soon"}]}')
    snap = DataDirWatcher(str(d), clock=clock).poll()
    assert snap["faults"]["partitions"] == [] and snap["faults"]["events"] == []
    assert len(snap["problems"]) == 1 and ".server-faults.json" in snap["problems"][0]
    assert [(b["isolated_from"], b["disk_full"]) for b in snap["brokers"]] == [(None, False)]


@pytest.mark.slow
def test_faults_a_served_broker_injects_into_a_real_producer_are_in_the_snapshot(tmp_path, serve_process):
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    server = serve_process(tmp_path / "data")
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic("orders", 2, 1)])
    admin.close()
    add = subprocess.run([sys.executable, "-m", "kafkasim", "fault", "add", "--api", "Produce",
                          "--error", "NOT_LEADER_OR_FOLLOWER", "--count", "3", "--topic", "orders",
                          "--partition", "1", "--data-dir", str(server.data_dir)],
                         capture_output=True, text=True, timeout=60)
    assert add.returncode == 0, add.stderr
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, client_id="shop", retries=5,
                             retry_backoff_ms=50)
    producer.send("orders", value=b"v", partition=1).get(timeout=30)     # three retries, then stored
    producer.close()
    w = DataDirWatcher(str(server.data_dir), clock=SystemClock())
    snap = wait_until(lambda: (s := w.poll())["faults"]["partitions"] and s, 10, 0.1, "the fault events file")
    assert [(p["topic"], p["partition"], p["count"], p["apis"], p["brokers"], p["labels"])
            for p in snap["faults"]["partitions"]] == [("orders", 1, 3, ["Produce"], [0],
                                                        ["NOT_LEADER_OR_FOLLOWER ×3"])]
    assert snap["faults"]["brokers"] == []
    assert [(e["client_id"], e["action"], e["error_code"]) for e in snap["faults"]["events"]] == [("shop", "error", 6)] * 3
