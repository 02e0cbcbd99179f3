"""The share-partition state machine (KIP-932), after Kafka's SharePartitionTest cases:
acquire, acknowledge (each type), release, lock expiry, the delivery limit, the in-flight
record limit, SPSO advance, INVALID_RECORD_STATE for a record not acquired by that member,
and the persisted state batches."""

from __future__ import annotations

import pytest

from kafkasim.coordinator.share_partition import SharePartition, StoredBatch
from kafkasim.errors import InvalidRecordStateError, InvalidRequestError
from kafkasim.protocol.share_group import (
    ACKNOWLEDGE_ACCEPT as ACCEPT, ACKNOWLEDGE_GAP as GAP, ACKNOWLEDGE_REJECT as REJECT,
    ACKNOWLEDGE_RELEASE as RELEASE, ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, AcknowledgementBatch as Ack,
    AcquiredRecords,
)

LOCK = 30_000


def acquire(sp, member, batches, bound=None, max_records=500, now=0):
    bound = bound if bound is not None else max(b.last_offset for b in batches) + 1
    return sp.acquire(member, batches, bound, max_records=max_records, lock_duration_ms=LOCK, now_ms=now)


def states(sp, lo, hi):
    return [(sp.record(o).state, sp.record(o).delivery_count) if sp.record(o) else None for o in range(lo, hi)]


def test_acquire_single_record_batch():
    sp = SharePartition(0)
    assert acquire(sp, "m1", [StoredBatch(0, 0)]) == [AcquiredRecords(0, 0, 1)]
    assert sp.record(0).state == ACQUIRED and sp.record(0).owner == "m1" and sp.record(0).deadline_ms == LOCK
    assert (sp.start_offset, sp.next_offset, sp.end_offset) == (0, 1, 0)


def test_acquire_multiple_batches_and_again_nothing_available():
    sp = SharePartition(10)
    assert acquire(sp, "m1", [StoredBatch(10, 14), StoredBatch(15, 19)]) == [AcquiredRecords(10, 19, 1)]
    assert acquire(sp, "m2", [StoredBatch(10, 14), StoredBatch(15, 19)]) == []


def test_acknowledge_accept_moves_the_start_offset():
    sp = SharePartition(0)
    acquire(sp, "m1", [StoredBatch(0, 9)])
    sp.acknowledge("m1", [Ack(0, 4, (ACCEPT,))])
    assert sp.start_offset == 5 and sp.record(4) is None and sp.record(5).state == ACQUIRED


def test_acknowledge_per_offset_types():
    sp = SharePartition(0)
    acquire(sp, "m1", [StoredBatch(0, 3)])
    sp.acknowledge("m1", [Ack(0, 3, (RELEASE, ACCEPT, REJECT, GAP))])
    assert sp.start_offset == 0
    assert states(sp, 0, 4) == [(AVAILABLE, 1), (ACKNOWLEDGED, 1), (ARCHIVED, 1), (ARCHIVED, 1)]
    assert acquire(sp, "m2", [StoredBatch(0, 3)]) == [AcquiredRecords(0, 0, 2)]


def test_acknowledging_a_record_of_another_member_is_invalid_record_state_and_changes_nothing():
    sp = SharePartition(0)
    acquire(sp, "m1", [StoredBatch(0, 4)])
    acquire(sp, "m2", [StoredBatch(5, 9)])
    with pytest.raises(InvalidRecordStateError, match="offset 5 is not acquired by member m1"):
        sp.acknowledge("m1", [Ack(0, 4, (ACCEPT,)), Ack(5, 5, (ACCEPT,))])
    assert sp.start_offset == 0 and all(sp.record(o).state == ACQUIRED for o in range(10))


def test_acknowledging_twice_or_an_available_record_is_invalid_record_state():
    sp = SharePartition(0)
    acquire(sp, "m1", [StoredBatch(0, 1)])
    sp.acknowledge("m1", [Ack(1, 1, (RELEASE,))])
    with pytest.raises(InvalidRecordStateError, match="AVAILABLE"):
        sp.acknowledge("m1", [Ack(1, 1, (ACCEPT,))])
    sp.acknowledge("m1", [Ack(0, 0, (ACCEPT,))])
    with pytest.raises(InvalidRecordStateError, match="below the share-partition start offset"):
        sp.acknowledge("m1", [Ack(0, 0, (ACCEPT,))])
    with pytest.raises(InvalidRecordStateError, match="not in flight"):
        sp.acknowledge("m1", [Ack(7, 7, (ACCEPT,))])


@pytest.mark.parametrize("ack,message", [
    (Ack(3, 2, (ACCEPT,)), "empty"),
    (Ack(0, 2, (ACCEPT, ACCEPT)), "2 acknowledge types"),
    (Ack(0, 0, (7,)), "unknown acknowledge type 7"),
])
def test_malformed_acknowledgements_are_invalid_request(ack, message):
    sp = SharePartition(0)
    acquire(sp, "m1", [StoredBatch(0, 4)])
    with pytest.raises(InvalidRequestError, match=message):
        sp.acknowledge("m1", [ack])


def test_lock_expiry_releases_and_the_next_delivery_counts():
    sp = SharePartition(0)
    acquire(sp, "m1", [StoredBatch(0, 2)], now=1_000)
    assert sp.next_deadline_ms() == 1_000 + LOCK
    assert sp.expire(1_000 + LOCK - 1) == 0
    assert sp.expire(1_000 + LOCK) == 3
    assert states(sp, 0, 3) == [(AVAILABLE, 1)] * 3 and sp.owners() == {}
    assert acquire(sp, "m2", [StoredBatch(0, 2)]) == [AcquiredRecords(0, 2, 2)]


def test_delivery_limit_archives_on_release_expiry_and_member_leave():
    sp = SharePartition(0, delivery_count_limit=2)
    acquire(sp, "m1", [StoredBatch(0, 2)])
    sp.acknowledge("m1", [Ack(0, 2, (RELEASE,))])
    acquire(sp, "m1", [StoredBatch(0, 2)])                   # second delivery: at the limit
    sp.acknowledge("m1", [Ack(0, 0, (RELEASE,))])
    sp.expire(LOCK)                                            # offsets 1..2 expire
    assert sp.start_offset == 3 and sp.in_flight() == 0
    sp2 = SharePartition(0, delivery_count_limit=2)
    for _ in range(2):
        acquire(sp2, "m1", [StoredBatch(0, 0)])
        sp2.release_member("m1")
    assert sp2.start_offset == 1


def test_max_records_and_whole_new_batches():
    sp = SharePartition(0)
    # a batch never delivered is taken whole even past max_records; the next one is not started
    assert acquire(sp, "m1", [StoredBatch(0, 4), StoredBatch(5, 9)], max_records=3) == [AcquiredRecords(0, 4, 1)]
    sp.acknowledge("m1", [Ack(0, 4, (RELEASE,))])
    # records already in flight are acquired one by one, up to max_records exactly
    assert acquire(sp, "m2", [StoredBatch(0, 4)], max_records=3) == [AcquiredRecords(0, 2, 2)]


def test_the_in_flight_limit_stops_new_batches_only():
    sp = SharePartition(0, max_record_locks=4)
    assert acquire(sp, "m1", [StoredBatch(0, 2), StoredBatch(3, 5), StoredBatch(6, 8)]) == [AcquiredRecords(0, 5, 1)]
    assert sp.in_flight() == 6
    sp.acknowledge("m1", [Ack(0, 0, (RELEASE,))])
    assert acquire(sp, "m2", [StoredBatch(0, 2), StoredBatch(3, 5), StoredBatch(6, 8)]) == [AcquiredRecords(0, 0, 2)]
    sp.acknowledge("m1", [Ack(1, 5, (ACCEPT,))])
    sp.acknowledge("m2", [Ack(0, 0, (ACCEPT,))])
    assert acquire(sp, "m2", [StoredBatch(6, 8)]) == [AcquiredRecords(6, 8, 1)]


def test_offsets_between_batches_and_control_batches_are_archived_gaps():
    sp = SharePartition(0)
    got = acquire(sp, "m1", [StoredBatch(0, 1), StoredBatch(2, 2, data=False), StoredBatch(5, 6)])
    assert got == [AcquiredRecords(0, 1, 1), AcquiredRecords(5, 6, 1)]
    assert states(sp, 2, 5) == [(ARCHIVED, 0)] * 3
    sp.acknowledge("m1", [Ack(0, 1, (ACCEPT,)), Ack(5, 6, (ACCEPT,))])
    assert sp.start_offset == 7


def test_records_past_the_bound_are_not_acquired():
    sp = SharePartition(0)
    assert acquire(sp, "m1", [StoredBatch(0, 9)], bound=4) == [AcquiredRecords(0, 3, 1)]
    assert sp.next_offset == 4


def test_state_batches_round_trip_acquired_written_available():
    sp = SharePartition(0, delivery_count_limit=3)
    acquire(sp, "m1", [StoredBatch(0, 5)])
    sp.acknowledge("m1", [Ack(1, 2, (ACCEPT,)), Ack(3, 3, (REJECT,)), Ack(4, 4, (RELEASE,))])
    assert sp.state_batches() == [(0, 0, AVAILABLE, 1), (1, 2, ACKNOWLEDGED, 1), (3, 3, ARCHIVED, 1),
                                  (4, 5, AVAILABLE, 1)]
    back = SharePartition.from_state(0, sp.state_batches(), delivery_count_limit=3)
    assert back.state_batches() == sp.state_batches() and back.owners() == {}
    assert acquire(back, "m2", [StoredBatch(0, 5)]) == [AcquiredRecords(0, 0, 2), AcquiredRecords(4, 5, 2)]


def test_a_loaded_record_at_the_delivery_limit_is_archived():
    back = SharePartition.from_state(7, [(7, 8, AVAILABLE, 5), (9, 9, AVAILABLE, 4)], delivery_count_limit=5)
    assert back.start_offset == 9 and back.record(9).state == AVAILABLE


def test_the_log_start_moving_past_the_start_offset_drops_those_offsets():
    sp = SharePartition(0)
    acquire(sp, "m1", [StoredBatch(0, 9)])
    sp.move_start(6)
    assert sp.start_offset == 6 and sp.record(5) is None and sp.owners() == {o: "m1" for o in range(6, 10)}
