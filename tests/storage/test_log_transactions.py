"""The log's side of transactions (storage/transactions.py, txn facts §3.2–§4.1): open
transactions and the first unstable offset, COMMIT/ABORT markers, the ``.txnindex`` entries
of aborted transactions, and how all of it survives a reopen, a truncation and retention."""

from __future__ import annotations

import os

import pytest

from kafkasim.clock import MockClock
from kafkasim.config import LogConfig
from kafkasim.errors import InvalidRecordError, InvalidTxnStateError
from kafkasim.records import record_batch as rb
from kafkasim.records.control import encode_control_batch
from kafkasim.storage import layout
from kafkasim.storage.log import Log
from kafkasim.storage.txn_index import AbortedTxn

T0 = 1_700_000_000_000


def txnindex(log, base: int = 0) -> str:
    return os.path.join(log.directory, layout.segment_name(base, layout.TXN_INDEX_SUFFIX))


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0, transactional: bool = True) -> bytes:
    return rb.encode_batch(0, [(i, T0 + i, b"k%d" % i, b"v%d" % (seq + i), ()) for i in range(n)],
                           producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           attributes=rb.ATTR_TRANSACTIONAL if transactional else 0)


@pytest.fixture
def log(tmp_path):
    lg = Log(str(tmp_path / "t-0"), LogConfig(), MockClock(T0))
    yield lg
    if not lg.closed:
        lg.close()


def test_clients_may_write_neither_markers_nor_unverified_transactional_batches(log):
    with pytest.raises(InvalidRecordError, match="control batches"):
        log.append_batch(encode_control_batch(5, 0, True, 0, T0))
    with pytest.raises(InvalidRecordError, match="transaction"):
        log.append_batch(txn_batch(5, 0))
    assert log.log_end_offset == 0


def test_an_open_transaction_holds_the_first_unstable_offset_until_its_marker(log):
    log.append_batch(rb.encode_batch(0, [(0, T0, None, b"x", ())]))      # offset 0, no producer
    assert log.first_unstable_offset is None
    log.append_batch(txn_batch(5, 0), in_transaction=True)        # offsets 1-2
    log.append_batch(txn_batch(5, 2), in_transaction=True)        # 3-4
    assert log.first_unstable_offset == 1 and log.open_transactions == {5: 1}
    # a non-transactional batch of that producer while its transaction is open: INVALID_TXN_STATE
    with pytest.raises(InvalidTxnStateError, match="producer 5"):
        log.append_batch(txn_batch(5, 4, transactional=False))
    h = log.append_control(5, 0, commit=True)
    assert (h.base_offset, h.attributes, h.record_count) == (5, 0x30, 1)
    assert log.first_unstable_offset is None
    assert log.collect_aborted_txns(0, log.log_end_offset) == []  # a commit leaves no index entry


def test_an_abort_writes_the_txnindex_entry_kafka_writes(log):
    log.append_batch(txn_batch(5, 0), in_transaction=True)        # pid 5: 0-1
    log.append_batch(txn_batch(6, 0), in_transaction=True)        # pid 6: 2-3
    log.append_control(5, 0, commit=False)                        # ABORT at 4: pid 6 still open from 2
    log.append_batch(txn_batch(6, 2), in_transaction=True)        # 5-6
    log.append_control(6, 0, commit=False)                        # ABORT at 7: nothing open: LSO 8
    want = [AbortedTxn(5, 0, 4, 2), AbortedTxn(6, 2, 7, 8)]
    assert log.collect_aborted_txns(0, log.log_end_offset) == want
    assert log.collect_aborted_txns(5, 6) == [AbortedTxn(6, 2, 7, 8)]   # last_offset >= 5, first < 6
    assert os.path.getsize(txnindex(log)) == 2 * 34
    assert log.first_unstable_offset is None


def test_a_marker_of_a_producer_with_nothing_open_completes_nothing(log):
    log.append_control(9, 0, commit=False)                        # an empty transaction
    assert log.collect_aborted_txns(0, log.log_end_offset) == [] and log.first_unstable_offset is None


@pytest.mark.parametrize("clean", [True, False])
def test_open_transactions_survive_a_reopen(tmp_path, clean):
    d = str(tmp_path / "t-0")
    lg = Log(d, LogConfig(), MockClock(T0))
    lg.append_batch(txn_batch(5, 0), in_transaction=True)
    lg.append_batch(txn_batch(6, 0), in_transaction=True)
    lg.append_control(5, 0, commit=False)
    if clean:
        lg.close()
        assert [o for o, _ in layout.list_snapshots(d)] == [5]    # Kafka's .snapshot at the log end
    else:
        lg._segments.close_all()                                   # killed: no snapshot, no clean marker
    again = Log(d, LogConfig(), MockClock(T0))
    assert again.open_transactions == {6: 2} and again.first_unstable_offset == 2
    assert again.collect_aborted_txns(0, again.log_end_offset) == [AbortedTxn(5, 0, 4, 2)]
    again.append_control(6, 0, commit=True)
    assert again.first_unstable_offset is None
    again.close()


def test_a_truncation_below_a_marker_reopens_its_transaction_and_drops_its_entry(log):
    log.append_batch(txn_batch(5, 0), in_transaction=True)        # 0-1
    log.append_control(5, 0, commit=False)                        # 2
    assert log.first_unstable_offset is None
    log.truncate_to(2)                                            # the marker is cut (a follower's truncation)
    assert log.open_transactions == {5: 0} and log.first_unstable_offset == 0
    assert log.collect_aborted_txns(0, 10) == []
    assert os.path.getsize(txnindex(log)) == 0


def test_retention_deletes_a_segments_txnindex_with_it(tmp_path):
    clock = MockClock(T0)
    lg = Log(str(tmp_path / "r-0"), LogConfig.from_overrides({"segment.bytes": 300, "retention.bytes": 1}), clock)
    lg.append_batch(txn_batch(5, 0), in_transaction=True)
    lg.append_control(5, 0, commit=False)
    for i in range(6):
        lg.append_batch(rb.encode_batch(0, [(0, T0, b"k", b"x" * 60, ())]))
    assert os.path.exists(txnindex(lg)) and len(lg.segments) > 1
    lg.delete_old_segments()
    assert not os.path.exists(txnindex(lg))
    lg.close()
