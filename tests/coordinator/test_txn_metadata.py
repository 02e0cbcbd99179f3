"""TransactionMetadata: states, ids, and the transition helpers (cases of Kafka's TransactionMetadataTest)."""

from __future__ import annotations

import pytest

from kafkasim.coordinator.txn_metadata import (
    NO_PRODUCER_EPOCH, TransactionMetadata, TxnState, is_epoch_exhausted,
)
from kafkasim.errors import IllegalStateError, ProducerFencedError
from kafkasim.types import TopicPartition

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
PID = 100


def md(state=TxnState.EMPTY, epoch=0, last=NO_PRODUCER_EPOCH, tv=0, partitions=(), start=-1, **kw):
    return TransactionMetadata("txn", PID, producer_epoch=epoch, last_producer_epoch=last, txn_timeout_ms=30_000,
                               state=state, topic_partitions=set(partitions), txn_start_timestamp=start,
                               txn_last_update_timestamp=0, client_transaction_version=tv, **kw)


def apply(m, transit):
    m.complete_transition(transit)
    return m


def test_transaction_state_id_and_name_mapping():  # testTransactionStateIdAndNameMapping
    expected = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
                5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}
    assert {s.value: s.kafka_name for s in TxnState} == expected
    for name in expected.values():
        assert TxnState.from_name(name).kafka_name == name
    assert TxnState.from_name("Unknown") is None


def test_valid_previous_states():
    S = TxnState
    assert S.PREPARE_COMMIT.valid_previous_states == {S.ONGOING}
    assert S.PREPARE_ABORT.valid_previous_states == {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY,
                                                     S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert S.COMPLETE_ABORT.valid_previous_states == {S.PREPARE_ABORT}
    assert S.DEAD.valid_previous_states == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert {s for s in S if s.is_expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_initialize_epoch():  # testInitializeEpoch
    m = md(epoch=NO_PRODUCER_EPOCH)
    t = m.prepare_increment_producer_epoch(30_000, None, 1)
    assert (t.producer_id, t.producer_epoch, t.last_producer_epoch) == (PID, 0, -1)
    assert apply(m, t).producer_epoch == 0 and m.state == TxnState.EMPTY and m.pending_state is None


def test_normal_epoch_bump():  # testNormalEpochBump
    m = md(epoch=735)
    t = m.prepare_increment_producer_epoch(30_000, None, 1)
    assert (t.producer_epoch, t.last_producer_epoch) == (736, -1)
    assert apply(m, t).producer_epoch == 736


def test_bump_epoch_with_expected_epoch_records_last_epoch():
    m = md(epoch=735)
    t = m.prepare_increment_producer_epoch(30_000, 735, 1)
    assert (t.producer_epoch, t.last_producer_epoch) == (736, 735)


def test_bump_epoch_not_allowed_if_epochs_exhausted():  # testBumpEpochNotAllowedIfEpochsExhausted
    m = md(epoch=32766)
    assert is_epoch_exhausted(32766) and not is_epoch_exhausted(32765)
    with pytest.raises(IllegalStateError, match="no producer epochs left"):
        m.prepare_increment_producer_epoch(30_000, None, 1)


def test_fence_producer_after_epochs_exhausted():  # testFenceProducerAfterEpochsExhausted
    m = md(TxnState.ONGOING, epoch=32766, partitions=[TP0], start=1)
    t = m.prepare_fence_producer_epoch()
    assert (t.producer_epoch, t.last_producer_epoch) == (32767, -1)
    assert m.pending_state == TxnState.PREPARE_EPOCH_FENCE
    with pytest.raises(IllegalStateError, match="never completed"):
        m.complete_transition(t)


def test_fence_producer_not_allowed_if_it_would_overflow():  # testFenceProducerNotAllowedIfItWouldOverflow
    m = md(TxnState.ONGOING, epoch=32767, partitions=[TP0], start=1)
    with pytest.raises(IllegalStateError, match="overflow"):
        m.prepare_fence_producer_epoch()


def test_fence_does_not_bump_again_after_a_failed_fence():
    m = md(TxnState.ONGOING, epoch=5, partitions=[TP0], start=1, has_failed_epoch_fence=True)
    assert m.prepare_fence_producer_epoch().producer_epoch == 5


def test_rotate_producer_id():  # testRotateProducerId
    m = md(epoch=32766)
    t = m.prepare_producer_id_rotation(200, 30_000, 1, record_last_epoch=True)
    assert (t.producer_id, t.producer_epoch, t.last_producer_epoch, t.previous_producer_id) == (200, 0, 32766, PID)
    apply(m, t)
    assert (m.producer_id, m.producer_epoch, m.previous_producer_id) == (200, 0, PID)


def test_rotate_producer_id_without_last_epoch():  # testRotateProducerIdWithoutLastEpoch (recordLastEpoch=false)
    t = md(epoch=32766).prepare_producer_id_rotation(200, 30_000, 1, record_last_epoch=False)
    assert (t.producer_epoch, t.last_producer_epoch) == (0, -1)


def test_rotate_producer_id_in_ongoing_state_fails():  # testRotateProducerIdInOngoingState
    m = md(TxnState.ONGOING, epoch=32766, partitions=[TP0], start=1)
    with pytest.raises(IllegalStateError, match="rotate"):
        m.prepare_producer_id_rotation(200, 30_000, 1, record_last_epoch=False)


def test_attempted_epoch_bump_with_last_epoch():  # testAttemptedEpochBumpWithLastEpoch
    m = md(epoch=735, last=734)
    t = m.prepare_increment_producer_epoch(30_000, 734, 1)
    assert (t.producer_epoch, t.last_producer_epoch) == (735, 734)


def test_attempted_epoch_bump_with_fenced_epoch():  # testAttemptedEpochBumpWithFencedEpoch
    m = md(epoch=735, last=734)
    with pytest.raises(ProducerFencedError):
        m.prepare_increment_producer_epoch(30_000, 733, 1)


def test_add_partitions_starts_the_clock_only_for_a_new_transaction():
    m = md()
    apply(m, m.prepare_add_partitions([TP0], 10))
    assert m.state == TxnState.ONGOING and m.txn_start_timestamp == 10
    apply(m, m.prepare_add_partitions([TP1], 20))
    assert m.topic_partitions == {TP0, TP1} and m.txn_start_timestamp == 10 and m.txn_last_update_timestamp == 20


def test_tv1_end_keeps_the_epoch_and_complete_clears_partitions():
    m = md(TxnState.ONGOING, epoch=10, partitions=[TP0], start=1)
    apply(m, m.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 1, -1, 5))
    assert (m.state, m.producer_epoch) == (TxnState.PREPARE_COMMIT, 10)
    apply(m, m.prepare_complete(6))
    assert (m.state, m.producer_epoch, m.topic_partitions) == (TxnState.COMPLETE_COMMIT, 10, set())


def test_epoch_bump_on_end_txn():  # testEpochBumpOnEndTxn
    m = md(TxnState.ONGOING, epoch=10, partitions=[TP0], start=1, tv=2)
    t = m.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 2, -1, 5)
    assert (t.producer_id, t.producer_epoch, t.last_producer_epoch) == (PID, 11, 10)
    apply(m, t)
    t = m.prepare_complete(6)
    assert (t.state, t.producer_id, t.producer_epoch) == (TxnState.COMPLETE_COMMIT, PID, 11)
    apply(m, t)
    assert (m.producer_id, m.producer_epoch, m.last_producer_epoch) == (PID, 11, 10)


def test_epoch_bump_on_end_txn_overflow():  # testEpochBumpOnEndTxnOverflow
    m = md(TxnState.ONGOING, epoch=32766, partitions=[TP0], start=1, tv=2)
    apply(m, m.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 2, 200, 5))
    assert (m.producer_epoch, m.next_producer_id) == (32767, 200)
    t = m.prepare_complete(6)
    assert (t.producer_id, t.producer_epoch, t.last_producer_epoch, t.next_producer_id) == (200, 0, 32766, -1)
    apply(m, t)
    assert (m.producer_id, m.producer_epoch, m.previous_producer_id) == (200, 0, PID)


@pytest.mark.parametrize("state", [TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT])
def test_tv2_abort_from_finished_states(state):
    m = md(state, epoch=3, tv=2, start=-1 if state == TxnState.EMPTY else 1)
    apply(m, m.prepare_abort_or_commit(TxnState.PREPARE_ABORT, 2, -1, 9, no_partition_added=True))
    assert (m.state, m.producer_epoch, m.txn_start_timestamp) == (TxnState.PREPARE_ABORT, 4, 9)


def test_tv1_abort_from_empty_is_illegal():
    with pytest.raises(IllegalStateError, match="transaction version 2"):
        md(epoch=3).prepare_abort_or_commit(TxnState.PREPARE_ABORT, 1, -1, 9)


@pytest.mark.parametrize("state, target", [
    (TxnState.EMPTY, TxnState.PREPARE_COMMIT), (TxnState.COMPLETE_ABORT, TxnState.PREPARE_COMMIT),
])
def test_invalid_transition_raises(state, target):
    with pytest.raises(IllegalStateError, match="cannot go from"):
        md(state, start=1).prepare_abort_or_commit(target, 2, -1, 9)


def test_complete_from_ongoing_raises():
    with pytest.raises(IllegalStateError, match="cannot complete"):
        md(TxnState.ONGOING, partitions=[TP0], start=1).prepare_complete(1)


def test_one_pending_transition_at_a_time():
    m = md()
    m.prepare_add_partitions([TP0], 1)
    with pytest.raises(IllegalStateError, match="pending"):
        m.prepare_add_partitions([TP1], 2)
    m.abort_transition()
    m.prepare_add_partitions([TP1], 2)


def test_dead_is_never_completed():
    m = md()
    with pytest.raises(IllegalStateError, match="never completed"):
        m.complete_transition(m.prepare_dead())


def test_tolerate_time_shift():  # testTolerateTimeShiftDuringEpochBump / ...DuringAddPartitions
    m = md(epoch=1)
    m.txn_last_update_timestamp = 1_000
    apply(m, m.prepare_increment_producer_epoch(30_000, None, 900))
    assert m.txn_last_update_timestamp == 900
    apply(m, m.prepare_add_partitions([TP0], 800))
    assert (m.txn_start_timestamp, m.txn_last_update_timestamp) == (800, 800)
