"""``Consumer(group_protocol="consumer")`` over ``RemoteBroker``: kafkasim's own in-process
consumer speaks ConsumerGroupHeartbeat (68) and OffsetCommit v9 to ``kafkasim serve``."""

from __future__ import annotations

import pytest

from kafkasim.consumer import Consumer
from kafkasim.records.record_batch import encode_batch
from kafkasim.server.remote import RemoteBroker
from kafkasim.types import OffsetAndMetadata, TopicPartition

from tests.server.conftest import wait_until

pytestmark = pytest.mark.slow


def test_two_remote_consumers_share_a_consumer_group_commit_with_epochs_and_take_over(server):
    with RemoteBroker(server.host, server.port) as admin:
        admin.create_topic("rk", 4)
        for p in range(4):
            admin.produce("rk", p, encode_batch(0, [(0, 1000, None, b"v", ())]))
        remotes = [RemoteBroker(server.host, server.port) for _ in range(2)]
        a, b = (Consumer(r, "rk", group_id="rg", group_protocol="consumer", client_id=n,
                         auto_offset_reset="earliest", enable_auto_commit=False)
                for r, n in zip(remotes, "ab"))
        try:
            def split():
                a.poll(timeout_ms=50)
                b.poll(timeout_ms=50)
                return len(a.assignment()) == 2 and len(b.assignment()) == 2
            wait_until(split, 30, interval=0.05, what="a 2/2 split")
            assert a.assignment().isdisjoint(b.assignment())
            desc = admin.describe_group("rg")
            assert desc["type"] == "consumer" and {m["client_id"] for m in desc["members"]} == {"a", "b"}
            tp = sorted(a.assignment())[0]
            a.commit({tp: OffsetAndMetadata(1)})          # OffsetCommit v9 with a's member epoch
            assert admin.offset_fetch("rg")[tp].offset == 1
            a.close()

            def takeover():
                b.poll(timeout_ms=50)
                return len(b.assignment()) == 4
            wait_until(takeover, 30, interval=0.05, what="b takes all 4")
            assert b.assignment() == {TopicPartition("rk", p) for p in range(4)}
        finally:
            a.close()
            b.close()
            for r in remotes:
                r.close()
