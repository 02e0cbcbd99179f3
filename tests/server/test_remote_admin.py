"""The broker API's partition-admin calls over the wire: ``RemoteBroker`` (what the CLI and
kafkasim's own clients use while a server runs) answers them as the embedded Broker does."""

from __future__ import annotations

import pytest

from kafkasim.broker import MAX_TIMESTAMP
from kafkasim.errors import ElectionNotNeededError, GroupSubscribedToTopicError, OffsetOutOfRangeError
from kafkasim.protocol.group import NO_GENERATION
from kafkasim.records.record_batch import encode_batch
from kafkasim.server.remote import RemoteBroker
from kafkasim.types import OffsetAndMetadata, TopicPartition

pytestmark = pytest.mark.slow


def test_remote_partition_admin_matches_the_embedded_broker(server):
    with RemoteBroker(server.host, server.port) as b:
        b.create_topic("ra", 2)
        b.produce("ra", 0, encode_batch(0, [(i, 1000 + i, b"k", b"v%d" % i, ()) for i in range(5)]))
        b.produce("ra", 0, encode_batch(0, [(0, 900, b"k", b"late", ())]))
        assert b.list_offsets("ra", 0, MAX_TIMESTAMP) == (4, 1004)       # the largest timestamp
        assert b.delete_records("ra", 0, 3) == 3
        assert b.list_offsets("ra", 0, -2)[0] == 3
        assert [r.offset for r in b.fetch("ra", 0, 3).records] == [3, 4, 5]
        with pytest.raises(OffsetOutOfRangeError):
            b.delete_records("ra", 0, 99)
        # a single-replica partition's preferred leader already leads
        result = b.elect("preferred", [TopicPartition("ra", 0)])
        assert isinstance(result[TopicPartition("ra", 0)], ElectionNotNeededError)
        assert b.list_partition_reassignments() == {}
        b.offset_commit("g", "", NO_GENERATION, {TopicPartition("ra", 0): OffsetAndMetadata(4),
                                                 TopicPartition("ra", 1): OffsetAndMetadata(0)})
        assert b.delete_offsets("g", [TopicPartition("ra", 0)]) == {TopicPartition("ra", 0): None}
        assert b.offset_fetch("g") == {TopicPartition("ra", 1): OffsetAndMetadata(0)}
    assert GroupSubscribedToTopicError.errno == 86
