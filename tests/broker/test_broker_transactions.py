"""Transactions on the in-process broker (broker/txn_api.py over the coordinator state
machine and the log's markers): commit, abort, fencing, read_committed fetches, offsets in a
transaction, a restart mid-transaction and the timeout abort."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import (
    ConcurrentTransactionsError, InvalidProducerEpochError, InvalidTxnStateError, ProducerFencedError,
)
from kafkasim.records import record_batch as rb
from kafkasim.records.control import read_control_batch
from kafkasim.storage.txn_index import AbortedTxn
from kafkasim.types import OffsetAndMetadata, TopicPartition

T0 = 1_700_000_000_000


def batch(pid, epoch, seq, n=2, transactional=True):
    return rb.encode_batch(0, [(i, T0 + i, b"k%d" % (seq + i), b"v%d" % (seq + i), ()) for i in range(n)],
                           producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           attributes=rb.ATTR_TRANSACTIONAL if transactional else 0)


@pytest.fixture
def clock():
    return MockClock(T0)


@pytest.fixture
def b(tmp_path, clock):
    with Broker(tmp_path / "d", clock=clock) as broker:
        broker.create_topic("t", 2)
        yield broker


def values(b, isolation, partition=0):
    r = b.fetch_batches("t", partition, 0, isolation_level=isolation)
    out = []
    for h, raw in r.batches:
        if h.attributes & rb.ATTR_CONTROL:
            out.append(("COMMIT" if read_control_batch(raw, 0, h)[0].is_commit else "ABORT", h.producer_id))
        else:
            out += [rec.value for rec in rb.iter_records(raw, 0, h)]
    return out, r


def test_commit_makes_the_records_visible_to_read_committed(b):
    pid, epoch = b.init_transactional_producer_id("tx", 60_000)
    b.add_partitions_to_txn("tx", pid, epoch, [("t", 0)])
    b.produce("t", 0, batch(pid, epoch, 0))
    got, r = values(b, 1)
    assert got == [] and r.last_stable_offset == 0 and r.high_watermark == 2   # held back by the LSO
    assert values(b, 0)[0] == [b"v0", b"v1"]                                   # read_uncommitted sees it
    b.end_txn("tx", pid, epoch, commit=True)
    got, r = values(b, 1)
    assert got == [b"v0", b"v1", ("COMMIT", pid)] and r.last_stable_offset == 3 == r.high_watermark
    assert r.aborted_transactions == []
    assert [d.state for d in b.describe_transactions(["tx"])] == ["CompleteCommit"]


def test_an_abort_is_listed_for_read_committed_readers(b):
    pid, epoch = b.init_transactional_producer_id("tx", 60_000)
    b.add_partitions_to_txn("tx", pid, epoch, [("t", 0), ("t", 1)])
    b.produce("t", 0, batch(pid, epoch, 0))
    b.end_txn("tx", pid, epoch, commit=False)
    got, r = values(b, 1)
    assert got == [b"v0", b"v1", ("ABORT", pid)]             # the client drops them by the list below
    assert r.aborted_transactions == [AbortedTxn(pid, 0, 2, 3)]
    # partition 1 was added but got no data: its marker completes nothing
    got1, r1 = values(b, 1, partition=1)
    assert got1 == [("ABORT", pid)] and r1.aborted_transactions == []


def test_a_transactional_batch_needs_its_partition_in_an_ongoing_transaction(b):
    pid, epoch = b.init_transactional_producer_id("tx", 60_000)
    with pytest.raises(InvalidTxnStateError, match="t-0"):
        b.produce("t", 0, batch(pid, epoch, 0))
    b.add_partitions_to_txn("tx", pid, epoch, [("t", 1)])
    with pytest.raises(InvalidTxnStateError):
        b.produce("t", 0, batch(pid, epoch, 0))                # t-1 added, not t-0
    assert b.list_offsets("t", 0, -1)[0] == 0


@pytest.mark.parametrize("server_tv, bumps", [(1, 2), (2, 3)])
def test_a_second_producer_with_the_same_id_fences_the_first(b, server_tv, bumps):
    """The fence bumps the epoch, the retry bumps it again; with transaction.version 2
    finalized (the default, as Kafka 4.0) the coordinator's abort is a TV2 abort and bumps it
    once more in between, as Kafka's (it aborts with the server's transaction version)."""
    b.update_features({"transaction.version": server_tv}, upgrade_types={"transaction.version": "safe_downgrade"})
    pid, e0 = b.init_transactional_producer_id("tx", 60_000)
    b.add_partitions_to_txn("tx", pid, e0, [("t", 0)])
    b.produce("t", 0, batch(pid, e0, 0))
    # the new producer's first call aborts the open transaction (and is asked to retry)
    with pytest.raises(ConcurrentTransactionsError):
        b.init_transactional_producer_id("tx", 60_000)
    pid2, e2 = b.init_transactional_producer_id("tx", 60_000)
    assert pid2 == pid and e2 == e0 + bumps
    with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
        b.end_txn("tx", pid, e0, commit=True)
    got, r = values(b, 1)
    assert got == [b"v0", b"v1", ("ABORT", pid)] and r.aborted_transactions == [AbortedTxn(pid, 0, 2, 3)]


def test_offsets_in_a_transaction_are_committed_only_with_it(b):
    tp = TopicPartition("t", 0)
    pid, epoch = b.init_transactional_producer_id("tx", 60_000)
    b.add_offsets_to_txn("tx", pid, epoch, "g")
    b.txn_offset_commit("tx", "g", pid, epoch, {tp: OffsetAndMetadata(5, "")})
    assert b.offset_fetch("g") == {}
    b.end_txn("tx", pid, epoch, commit=False)
    assert b.offset_fetch("g") == {}
    b.add_offsets_to_txn("tx", pid, epoch, "g")
    b.txn_offset_commit("tx", "g", pid, epoch, {tp: 7})
    b.end_txn("tx", pid, epoch, commit=True)
    assert b.offset_fetch("g")[tp].offset == 7


def test_a_restart_keeps_the_open_transaction_and_its_timeout_aborts_it(tmp_path, clock):
    d = tmp_path / "d"
    with Broker(d, clock=clock) as b:
        b.create_topic("t", 1)
        pid, epoch = b.init_transactional_producer_id("tx", 30_000)
        b.add_partitions_to_txn("tx", pid, epoch, [("t", 0)])
        b.produce("t", 0, batch(pid, epoch, 0))
    with Broker(d, clock=clock) as b:
        got, r = values(b, 1)
        assert got == [] and r.last_stable_offset == 0       # still open after the restart
        assert [x.state for x in b.describe_transactions(["tx"])] == ["Ongoing"]
        clock.advance(31_000)
        assert b.tick_transactions() == 1                     # transaction.timeout.ms passed: aborted
        got, r = values(b, 1)
        assert got == [b"v0", b"v1", ("ABORT", pid)] and r.last_stable_offset == 3
        with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
            b.end_txn("tx", pid, epoch, commit=True)          # the timed-out producer is fenced
