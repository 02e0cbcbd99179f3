"""Offsets committed in a transaction (TxnOffsetCommit) are in ``__consumer_offsets`` as the
producer's transactional records, as Kafka writes them: they survive a broker restart
before the transaction ends, its marker applies (COMMIT) or drops (ABORT) them, and a
reloaded offsets store reads markers as markers, not as undecodable offset records."""

from __future__ import annotations

import warnings

import pytest

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.protocol.offsets import OFFSETS_TOPIC
from kafkasim.records import record_batch as rb
from kafkasim.types import TopicPartition

T0 = 1_700_000_000_000
TP = TopicPartition("t", 0)


def _open_txn_with_offsets(d, clock, offset: int):
    with Broker(d, clock=clock) as b:
        b.create_topic("t", 1)
        pid, epoch = b.init_transactional_producer_id("tx", 60_000)
        b.add_offsets_to_txn("tx", pid, epoch, "g")
        b.txn_offset_commit("tx", "g", pid, epoch, {TP: offset})
        assert b.offset_fetch("g") == {}
        part = b._partition(OFFSETS_TOPIC, b.group_coordinator._store.partition_for("g"))
        [(h, _)] = part.leader_log(None).read_batches(0)
        assert h.attributes & rb.ATTR_TRANSACTIONAL and (h.producer_id, h.producer_epoch) == (pid, epoch)
    return pid, epoch


@pytest.mark.parametrize("commit", [True, False])
def test_transactional_offsets_survive_a_restart_before_end_txn(tmp_path, commit):
    clock = MockClock(T0)
    pid, epoch = _open_txn_with_offsets(tmp_path / "d", clock, 7)
    with Broker(tmp_path / "d", clock=clock) as b:
        assert b.offset_fetch("g") == {}                     # still pending: the transaction is open
        b.end_txn("tx", pid, epoch, commit)
        assert {tp: om.offset for tp, om in b.offset_fetch("g").items()} == ({TP: 7} if commit else {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # the marker is not an "undecodable key"
        with Broker(tmp_path / "d", clock=clock) as b:
            assert {tp: om.offset for tp, om in b.offset_fetch("g").items()} == ({TP: 7} if commit else {})


def test_after_a_restart_a_committed_transactions_offsets_hold_and_an_aborted_ones_stay_out(tmp_path):
    clock = MockClock(T0)
    with Broker(tmp_path / "d", clock=clock) as b:
        b.create_topic("t", 1)
        pid, epoch = b.init_transactional_producer_id("tx", 60_000)
        b.offset_commit("g", "", -1, {TP: 3})                # a plain commit first
        b.add_offsets_to_txn("tx", pid, epoch, "g")
        b.txn_offset_commit("tx", "g", pid, epoch, {TP: 5})
        b.end_txn("tx", pid, epoch, commit=True)
        b.add_offsets_to_txn("tx", pid, epoch, "g")
        b.txn_offset_commit("tx", "g", pid, epoch, {TP: 9})
        b.end_txn("tx", pid, epoch, commit=False)
        assert b.offset_fetch("g")[TP].offset == 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # the markers read as markers
        with Broker(tmp_path / "d", clock=clock) as b:
            assert b.offset_fetch("g")[TP].offset == 5


class _Crash(Exception):
    pass


def test_a_prepared_commit_applies_its_offsets_after_a_restart(tmp_path):
    clock = MockClock(T0)
    with Broker(tmp_path / "d", clock=clock) as b:
        b.create_topic("t", 1)
        pid, epoch = b.init_transactional_producer_id("tx", 60_000)
        b.add_offsets_to_txn("tx", pid, epoch, "g")
        b.txn_offset_commit("tx", "g", pid, epoch, {TP: 11})

        def crash(point):
            if point == "txn.after_prepare_commit":
                raise _Crash(point)

        b.crash_hook = crash
        with pytest.raises(_Crash):
            b.end_txn("tx", pid, epoch, commit=True)
    with Broker(tmp_path / "d", clock=clock) as b:
        b.tick()                                             # loads the coordinator: markers, offsets
        assert [d.state for d in b.describe_transactions(["tx"])] == ["CompleteCommit"]
        assert b.offset_fetch("g")[TP].offset == 11
