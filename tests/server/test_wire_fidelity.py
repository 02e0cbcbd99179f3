"""The wire details that stopped real applications (issue 20), each with the real client.

- librdkafka >= 2.12 lists all topics with Metadata v9+ carrying 3 bytes past the schema's
  fields (librdkafka #5049); Kafka ignores them, so ``list_topics()`` must work;
- the leader's SyncGroup assignment bytes (with ``user_data``) reach each member unchanged;
- OffsetCommit stores the sentinel offsets admin tools commit (-1, -2) and OffsetFetch
  returns them, as Kafka's group coordinator does.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_confluent_kafka_lists_all_topics(server):
    """AdminClient().list_topics() and Producer.list_topics() with no topic: Metadata v12
    with librdkafka's trailing bytes is answered (before the fix: _TRANSPORT)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for fut in admin.create_topics([NewTopic("listed-a", 3, 1), NewTopic("listed-b", 1, 1)]).values():
        fut.result(15)
    md = admin.list_topics(timeout=15)
    assert {"listed-a", "listed-b"} <= set(md.topics)
    assert len(md.topics["listed-a"].partitions) == 3
    producer = Producer({"bootstrap.servers": server.bootstrap})
    assert {"listed-a", "listed-b"} <= set(producer.list_topics(timeout=15).topics)
    producer.flush(5)
