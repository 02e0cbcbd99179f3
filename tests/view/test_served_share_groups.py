"""The live view's snapshot of a share group served by ``kafkasim serve`` to real clients:
two confluent-kafka ``ShareConsumer``s on one partition; the records one releases come back
with delivery count 2. DataDirWatcher, reading the server's data dir, shows both members on
the partition and the released records as redeliveries."""

from __future__ import annotations

import time

import pytest

from kafkasim.view.snapshot import DataDirWatcher
from tests.server.conftest import start_server, wait_until
from tests.server.test_share_group_wire import _poll_until_ready, _produce, _share_consumer

pytestmark = pytest.mark.slow


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    """Create the topic (the admin client is kept until the answer: destroyed, it fails the future)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _share_partition(watcher):
    groups = [g for g in watcher.poll()["groups"] if g["group_id"] == "workers"]
    if not groups:
        return None, None
    rows = [x for x in groups[0]["share_partitions"] if (x["topic"], x["partition"]) == ("jobs", 0)]
    return groups[0], (rows[0] if rows else None)


def test_a_served_share_group_shows_its_members_on_the_partition_and_the_redeliveries(tmp_path):
    from confluent_kafka import AcknowledgeType

    served = start_server(tmp_path / "data")
    consumers = []
    try:
        _create(served.bootstrap, "jobs", 1)
        consumers = [_share_consumer(served.bootstrap, "workers", "jobs", **{
            "share.acknowledgement.mode": "explicit", "client.id": f"worker-{i}"}) for i in range(2)]
        _poll_until_ready(consumers, served.bootstrap, "workers", "jobs", 1)
        watcher = DataDirWatcher(str(tmp_path / "data"))
        group = wait_until(lambda: (lambda g: g if g and len(g["members"]) == 2 else None)(_share_partition(watcher)[0]),
                           30, what="both members in the view")
        assert {m["client_id"] for m in group["members"]} == {"worker-0", "worker-1"}
        (row,) = group["share_partitions"]
        assert sorted(row["members"]) == sorted(m["label"] for m in group["members"])   # both fetch from jobs-0

        _produce(served.bootstrap, "jobs", [b"a", b"b", b"c"])
        first, c0 = None, None
        deadline = time.monotonic() + 30
        while first is None and time.monotonic() < deadline:
            for c in consumers:
                got = [m for m in c.poll(0.3) if m.error() is None]
                if got:
                    first, c0 = got, c
                    break
        assert first, "no delivery"
        for m in first:
            c0.acknowledge(m, AcknowledgeType.RELEASE)
        c0.commit_sync()
        released = {m.offset() for m in first}
        again: dict[int, int] = {}
        deadline = time.monotonic() + 30
        while len(again) < 3 and time.monotonic() < deadline:
            for c in consumers:
                for m in c.poll(0.3):
                    if m.error() is None:
                        again[m.offset()] = m.delivery_count()
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                c.commit_sync()
        assert {o: again[o] for o in released} == {o: 2 for o in released}
        row = wait_until(lambda: (lambda r: r if r and r["redeliveries"] == len(released) else None)(
            _share_partition(watcher)[1]), 30, what="the view to count the redeliveries")
        group, _ = _share_partition(watcher)
        assert group["redeliveries"] == len(released)
        # once every record is accepted nothing is in flight: the highest delivery count in flight
        # is 2 only while a redelivered record is not yet settled
        assert row["max_delivery_count"] in (0, 2)
        assert row["log_end_offset"] == 3
    finally:
        for c in consumers:
            c.close()
        served.stop()
