"""The live view over ``kafkasim serve`` with a real client: each member's position (its last
fetch offset, which serve writes to ``.fetch-positions.json``) beside its committed offset.

Lag stays Kafka's (log end offset minus the committed offset): a consumer that has read every
record but not committed shows its position at the end and its lag unknown, then 0 once it
commits. Nothing of it is left behind when serve stops.
"""

from __future__ import annotations

import os
import time

import pytest

from kafkasim.view.snapshot import POSITIONS_FILE, DataDirWatcher

pytestmark = pytest.mark.slow


def member_rows(watcher, group="g"):
    snap = watcher.poll()
    groups = [g for g in snap["groups"] if g["group_id"] == group]
    if not groups or not groups[0]["members"]:
        return None, snap
    return groups[0]["members"][0], snap


def test_a_served_member_shows_its_position_and_its_committed_offset(tmp_path, serve_process):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    data = tmp_path / "data"
    server = serve_process(data)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic("orders", 2, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=server.bootstrap)
    for i in range(10):
        producer.send("orders", key=b"k%d" % i, value=b"v")
    producer.close()
    consumer = KafkaConsumer("orders", bootstrap_servers=server.bootstrap, group_id="g", client_id="reader",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    watcher = DataDirWatcher(str(data))
    try:
        got, deadline = 0, time.monotonic() + 60
        while True:
            got += sum(len(v) for v in consumer.poll(timeout_ms=200).values())
            member, snap = member_rows(watcher)
            leo = {p["partition"]: p["log_end_offset"] for p in snap["topics"][0]["partition_stats"]}
            if got == 10 and member and len(member["partitions"]) == 2 and all(
                    x["position"] == leo[x["partition"]] for x in member["partitions"]):
                break
            assert time.monotonic() < deadline, (got, member)
        assert member["client_id"] == "reader" and member["client_host"] == "/127.0.0.1"
        for x in member["partitions"]:             # read to the end, nothing committed: lag unknown
            assert x["committed"] is None and x["lag"] is None and x["fetched_at_ms"] is not None
        consumer.commit()
        deadline = time.monotonic() + 30
        while True:
            consumer.poll(timeout_ms=100)
            member, snap = member_rows(watcher)
            if all(x["committed"] == x["position"] and x["lag"] == 0 for x in member["partitions"]):
                break
            assert time.monotonic() < deadline, member
        assert snap["groups"][0]["positions_known"] is True
    finally:
        consumer.close()
    assert os.path.exists(data / POSITIONS_FILE)
    assert server.stop() == 0
    assert not os.path.exists(data / POSITIONS_FILE)              # removed with the address file
    member, _ = member_rows(DataDirWatcher(str(data)))
    assert member is None or all(x["position"] is None for x in member["partitions"])
