"""What a share-partition's write persists, as Kafka's SharePartition writes it: the records
settled since the last write (ACKNOWLEDGED, ARCHIVED) with their final state and the start
offset from before them; the SPSO move itself is in the next write. A reload is the same."""

from __future__ import annotations

from kafkasim.coordinator.share_partition import SharePartition, StoredBatch
from kafkasim.protocol.share_group import (
    ACKNOWLEDGE_ACCEPT as ACCEPT, ACKNOWLEDGE_RELEASE as RELEASE, ACKNOWLEDGED, ARCHIVED, AVAILABLE,
    AcknowledgementBatch as Ack,
)


def test_a_write_carries_the_records_just_settled_and_the_next_one_the_moved_start():
    sp = SharePartition(0, delivery_count_limit=2)
    sp.acquire("m1", [StoredBatch(0, 4)], 5, max_records=10, lock_duration_ms=1_000, now_ms=0)
    assert sp.persisted_state() == (0, [(0, 4, AVAILABLE, 1)])      # acquired: written AVAILABLE, count 1
    sp.acknowledge("m1", [Ack(0, 1, (ACCEPT,)), Ack(2, 2, (RELEASE,))])
    assert sp.start_offset == 2
    assert sp.persisted_state() == (0, [(0, 1, ACKNOWLEDGED, 1), (2, 4, AVAILABLE, 1)])
    assert sp.persisted_state() == (2, [(2, 4, AVAILABLE, 1)])      # the next write: the SPSO moved
    sp.acquire("m2", [StoredBatch(0, 4)], 5, max_records=1, lock_duration_ms=1_000, now_ms=0)
    sp.acknowledge("m2", [Ack(2, 2, (RELEASE,))])                   # its second delivery: the limit
    sp.acknowledge("m1", [Ack(3, 4, (ACCEPT,))])
    start, batches = sp.persisted_state()
    assert (start, batches) == (2, [(2, 2, ARCHIVED, 2), (3, 4, ACKNOWLEDGED, 1)])
    again = SharePartition.from_state(start, batches, delivery_count_limit=2)
    assert (again.start_offset, again.in_flight(), again.persisted_state()) == (5, 0, (5, []))


def test_a_log_start_past_the_settled_records_drops_them_from_the_write():
    sp = SharePartition(0)
    sp.acquire("m1", [StoredBatch(0, 4)], 5, max_records=10, lock_duration_ms=1_000, now_ms=0)
    sp.acknowledge("m1", [Ack(0, 1, (ACCEPT,))])
    sp.move_start(3)                        # retention deleted 0..2: not settled by anyone, just gone
    assert sp.persisted_state() == (3, [(3, 4, AVAILABLE, 1)])
