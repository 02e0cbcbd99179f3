"""A follower's log tracks transactions from the batches it copies from the leader: an ABORT
marker copied into a log whose open transactions are not loaded yet (just reopened, or
just truncated) still gets its ``.txnindex`` entry, so a read_committed fetch from that
replica once it leads lists the aborted transaction (found by the randomised cluster
schedules of tests/broker/test_txn_randomised.py)."""

from __future__ import annotations

import pytest

from kafkasim.clock import MockClock
from kafkasim.config import LogConfig
from kafkasim.records import record_batch as rb
from kafkasim.records.control import encode_control_batch
from kafkasim.storage.log import Log
from kafkasim.storage.txn_index import AbortedTxn

T0 = 1_700_000_000_000


def _data(pid: int, base_offset: int) -> bytes:
    return rb.encode_batch(base_offset, [(i, T0 + i, None, b"v%d" % i, ()) for i in range(2)],
                           producer_id=pid, producer_epoch=0, base_sequence=0, attributes=rb.ATTR_TRANSACTIONAL)


def _abort(pid: int, base_offset: int) -> bytes:
    batch = bytearray(encode_control_batch(pid, 0, False, 0, T0))
    batch[0:8] = base_offset.to_bytes(8, "big")          # the leader's offset (outside the CRC)
    return bytes(batch)


@pytest.mark.parametrize("how", ["reopened", "truncated"])
def test_an_abort_marker_copied_into_a_fresh_tracker_gets_its_txnindex_entry(tmp_path, how):
    clock = MockClock(T0)
    d = str(tmp_path / "t-0")
    follower = Log(d, LogConfig(), clock)
    follower.append_replica_batch(_data(7, 0))          # offsets 0-1, transaction of producer 7
    follower.append_replica_batch(_data(8, 2))          # offsets 2-3, producer 8
    if how == "reopened":
        follower.close()
        follower = Log(d, LogConfig(), clock)
    else:
        assert follower.truncate_to(3) == 2             # producer 8's batch cut: the tracker is reset
    marker = follower.log_end_offset
    follower.append_replica_batch(_abort(7, marker))    # the first batch the fresh log tracks
    try:
        if how == "reopened":                            # producer 8's transaction is still open
            assert follower.open_transactions == {8: 2}
            assert follower.collect_aborted_txns(0, follower.log_end_offset) == [AbortedTxn(7, 0, 4, 2)]
        else:
            assert follower.open_transactions == {}
            assert follower.collect_aborted_txns(0, follower.log_end_offset) == [AbortedTxn(7, 0, 2, 3)]
    finally:
        follower.close()
