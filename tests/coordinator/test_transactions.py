"""TransactionCoordinator: Kafka's request handling as a pure state machine (cases of Kafka's
TransactionCoordinatorTest and TransactionStateManagerTest, named in comments)."""

from __future__ import annotations

import itertools

import pytest

from kafkasim.clock import MockClock
from kafkasim.coordinator.transactions import (
    EndTxnResult, InitProducerIdResult, Persist, TransactionCoordinator, WriteMarkers, partition_for,
)
from kafkasim.coordinator.txn_metadata import TxnState, TxnTransitMetadata
from kafkasim.errors import (
    ConcurrentTransactionsError, CoordinatorNotAvailableError, IllegalStateError, InvalidProducerEpochError,
    InvalidProducerIdMappingError, InvalidRequestError, InvalidTransactionTimeoutError, InvalidTxnStateError,
    NotCoordinatorError, NotEnoughReplicasError, NotLeaderOrFollowerError, ProducerFencedError,
    TransactionAbortableError, TransactionalIdNotFoundError,
)
from kafkasim.types import TopicPartition

TID = "txn-1"
TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
T0 = 1_000_000


@pytest.fixture
def clock():
    return MockClock(T0)


def make(clock, tv=1, **kw):
    ids = itertools.count(1000)
    return TransactionCoordinator(clock, lambda: next(ids), transaction_version=tv, **kw)


def done(coord, r, error=None):
    """Play the owner: write ``r.persist`` (or fail with ``error``) and return the final result."""
    return coord.persisted(r.persist, error) if r.persist is not None else r


def init(coord, tid=TID, timeout=60_000, pid=-1, epoch=-1, version=None):
    return done(coord, coord.init_producer_id(tid, timeout, pid, epoch, version=version))


def add(coord, pid, epoch, tps=(TP0,), tid=TID, **kw):
    return done(coord, coord.add_partitions(tid, pid, epoch, tps, **kw))


def end(coord, pid, epoch, commit=True, tv=1, tid=TID, **kw):
    return done(coord, coord.end_txn(tid, pid, epoch, commit, tv, **kw))


def finish(coord, tid=TID):
    """All markers written: persist Complete*."""
    step = coord.complete(tid)
    assert step.persist.value.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
    return coord.persisted(step.persist)


def state(coord, tid=TID):
    return coord.metadata(tid).state


# ------------------------------------------------------------------ InitProducerId
def test_init_pid_with_epoch_zero_for_new_transactional_id(clock):  # shouldInitPidWithEpochZeroForNewTransactionalId
    c = make(clock)
    r = c.init_producer_id(TID, 60_000)
    assert r.pending and r.persist.value.state == TxnState.EMPTY and r.persist.value.producer_epoch == 0
    assert isinstance(c.init_producer_id(TID, 60_000).error, ConcurrentTransactionsError)   # write pending
    r = c.persisted(r.persist)
    assert (r.error, r.producer_id, r.producer_epoch, r.persist) == (None, 1000, 0, None)


def test_idempotent_producer_gets_a_new_pid_and_no_state(clock):
    c = make(clock)
    r = c.init_producer_id(None, 60_000)
    assert (r.producer_id, r.producer_epoch, r.persist) == (1000, 0, None)
    assert c.metadata(None) is None


@pytest.mark.parametrize("args, err", [
    (("", 60_000), InvalidRequestError),
    ((TID, 0), InvalidTransactionTimeoutError),                 # testValidateTransactionTimeout: (0, max]
    ((TID, 900_001), InvalidTransactionTimeoutError),
    ((TID, 60_000, 5, -1), InvalidRequestError),
    ((TID, 60_000, -1, 5), InvalidRequestError),
])
def test_init_pid_rejects_bad_requests(clock, args, err):
    assert isinstance(make(clock).init_producer_id(*args).error, err)


def test_init_pid_on_existing_id_bumps_epoch(clock):  # shouldIncrementEpochAndUpdateMetadataOnHandleInitPid...
    c = make(clock)
    init(c)
    r = init(c, timeout=30_000)
    assert (r.producer_id, r.producer_epoch) == (1000, 1)
    assert c.metadata(TID).txn_timeout_ms == 30_000


def test_generate_new_producer_id_if_epochs_exhausted(clock):  # shouldGenerateNewProducerIdIfEpochsExhausted
    c = make(clock)
    init(c)
    c.metadata(TID).producer_epoch = 32766
    r = init(c)
    assert (r.producer_id, r.producer_epoch) == (1001, 0)
    assert c.metadata(TID).previous_producer_id == 1000


def test_retry_init_producer_id_after_producer_id_rotation(clock):  # testRetryInitProducerIdAfterProducerIdRotation
    c = make(clock)
    init(c)
    c.metadata(TID).producer_epoch = 32766
    r = init(c, pid=1000, epoch=32766)
    assert (r.producer_id, r.producer_epoch) == (1001, 0)
    r = init(c, pid=1000, epoch=32766)          # the response was lost; the retry gets the same answer
    assert (r.error, r.producer_id, r.producer_epoch) == (None, 1001, 0)


def test_init_producer_id_stale_current_epoch_provided(clock):  # testInitProducerIdStaleCurrentEpochProvided
    c = make(clock)
    init(c)
    init(c)
    init(c)                                      # epoch 2, last epoch -1
    assert isinstance(init(c, pid=1000, epoch=1).error, ProducerFencedError)
    assert isinstance(init(c, pid=1000, epoch=1, version=3).error, InvalidProducerEpochError)


def test_init_producer_id_with_wrong_producer_id_is_fenced(clock):
    c = make(clock)
    init(c)
    assert isinstance(init(c, pid=999, epoch=0).error, ProducerFencedError)


def test_init_pid_retry_with_current_epoch_after_lost_response(clock):  # KIP-360 retry: lastProducerEpoch
    c = make(clock)
    init(c)
    r = init(c, pid=1000, epoch=0)
    assert r.producer_epoch == 1
    r = init(c, pid=1000, epoch=0)               # same request again: no second bump
    assert (r.error, r.producer_epoch) == (None, 1)


@pytest.mark.parametrize("commit", [True, False])
def test_wait_for_prepare_to_complete_on_init_pid(clock, commit):
    # shouldWaitForCommitToCompleteOnHandleInitPidAndExistingTransactionInPrepareCommitState (and ...PrepareAbort)
    c = make(clock)
    init(c)
    add(c, 1000, 0)
    end(c, 1000, 0, commit)
    assert isinstance(init(c).error, ConcurrentTransactionsError)
    finish(c)
    assert init(c).producer_epoch == 1


@pytest.mark.parametrize("server_tv", [0, 1])
def test_abort_transaction_on_init_pid_when_ongoing(clock, server_tv):
    # shouldAbortTransactionOnHandleInitPidWhenExistingTransactionInOngoingState: Kafka mocks
    # transactionVersionLevel() = TV_0 and expects prepareAbortOrCommit(PrepareAbort, TV_0, ...) of the
    # fenced metadata: epoch + 1, last epoch -1, and the server's TV (not the client's) on the record,
    # hence on the markers. server_tv 1 (kafkasim's default) behaves alike with 1 written instead.
    c = make(clock, tv=server_tv)
    init(c)
    add(c, 1000, 0, (TP0, TP1))
    r = c.init_producer_id(TID, 60_000)
    v = r.persist.value
    assert r.pending and v.state == TxnState.PREPARE_ABORT and (v.producer_epoch, v.last_producer_epoch) == (1, -1)
    assert v.client_transaction_version == server_tv
    r = c.persisted(r.persist)
    assert isinstance(r.error, ConcurrentTransactionsError) and r.error_code == 51
    assert (r.producer_id, r.producer_epoch) == (-1, -1)
    assert r.markers == WriteMarkers(TID, 1000, 1, False, (TP0, TP1), 0, server_tv)
    assert isinstance(init(c).error, ConcurrentTransactionsError)     # markers still being written
    finish(c)
    assert state(c) == TxnState.COMPLETE_ABORT
    r = init(c)
    assert (r.error, r.producer_epoch) == (None, 2)                    # old epoch + 2


def test_default_server_transaction_version_is_1(clock):
    # kafkasim does not advertise TV2 yet: the coordinator's own aborts are TV1 unless asked otherwise
    c = TransactionCoordinator(clock, itertools.count(1000).__next__)
    assert c.transaction_version == 1
    init(c)
    add(c, 1000, 0)
    r = done(c, c.init_producer_id(TID, 60_000))
    assert (r.markers.producer_epoch, r.markers.transaction_version) == (1, 1)


def test_restarted_producer_fences_the_old_one_mid_transaction(clock):
    c = make(clock, tv=1)
    init(c)
    add(c, 1000, 0)
    assert isinstance(init(c).error, ConcurrentTransactionsError)      # the new producer backs off...
    finish(c)
    assert init(c).producer_epoch == 2                                 # ...and retries: epoch + 2
    assert isinstance(add(c, 1000, 0, (TP1,)).error, ProducerFencedError)
    assert isinstance(add(c, 1000, 0, (TP1,), version=1).error, InvalidProducerEpochError)
    assert isinstance(end(c, 1000, 0).error, ProducerFencedError)
    assert isinstance(end(c, 1000, 0, version=1).error, InvalidProducerEpochError)


def test_fence_with_server_tv2_bumps_again_at_prepare_abort(clock):
    c = make(clock, tv=2)
    init(c)
    add(c, 1000, 0)
    r = done(c, c.init_producer_id(TID, 60_000))
    assert r.markers.producer_epoch == 2 and r.markers.transaction_version == 2
    finish(c)
    assert init(c).producer_epoch == 3


def test_no_repeated_epoch_bump_when_fence_append_fails(clock):
    # shouldNotRepeatedlyBumpEpochDueToInitPidDuringOngoingTxnIfAppendToLogFails
    c = make(clock, tv=1)
    init(c)
    add(c, 1000, 0)
    for _ in range(3):
        r = c.init_producer_id(TID, 60_000)
        assert r.persist.value.producer_epoch == 1
        r = c.persisted(r.persist, NotEnoughReplicasError("isr"))
        assert isinstance(r.error, CoordinatorNotAvailableError)
        assert c.metadata(TID).has_failed_epoch_fence and state(c) == TxnState.ONGOING
    r = done(c, c.init_producer_id(TID, 60_000))
    assert r.markers.producer_epoch == 1
    finish(c)
    assert not c.metadata(TID).has_failed_epoch_fence
    assert init(c).producer_epoch == 2


def test_use_last_epoch_to_fence_when_epochs_are_exhausted(clock):  # shouldUseLastEpochToFenceWhenEpochsAreExhausted
    c = make(clock, tv=1)
    init(c)
    add(c, 1000, 0)
    c.metadata(TID).producer_epoch = 32766
    r = done(c, c.init_producer_id(TID, 60_000))
    assert isinstance(r.error, ConcurrentTransactionsError) and r.markers.producer_epoch == 32767
    finish(c)
    r = init(c)
    assert (r.producer_id, r.producer_epoch) == (1001, 0)


@pytest.mark.parametrize("exc, mapped", [
    (NotEnoughReplicasError("x"), CoordinatorNotAvailableError),     # testAppendFailToCoordinatorNotAvailableError
    (NotLeaderOrFollowerError("x"), NotCoordinatorError),            # testAppendFailToNotCoordinatorError
    (OSError("disk"), None),
])
def test_append_errors_are_mapped(clock, exc, mapped):
    c = make(clock)
    r = c.persisted(c.init_producer_id(TID, 60_000).persist, exc)
    assert r.error is not None and (mapped is None or isinstance(r.error, mapped))
    assert c.metadata(TID).pending_state is None
    assert init(c).producer_epoch == 0


# ------------------------------------------------------------------ AddPartitionsToTxn
def test_invalid_pid_mapping_on_add_partitions_when_id_not_present(clock):
    # shouldRespondWithInvalidPidMappingOnAddPartitionsToTransactionWhenTransactionalIdNotPresent
    assert isinstance(add(make(clock), 1000, 0).error, InvalidProducerIdMappingError)


def test_add_partitions_checks_producer_id_then_epoch(clock):
    # shouldRespondWithProducerFencedOnAddPartitionsWhenEpochsAreDifferent
    c = make(clock)
    init(c)
    assert isinstance(add(c, 999, 0).error, InvalidProducerIdMappingError)
    assert isinstance(add(c, 1000, 1).error, ProducerFencedError)
    assert add(c, 1000, 1, version=1).error_code == 47
    assert add(c, 1000, 1, version=2).error_code == 90


@pytest.mark.parametrize("commit", [True, False])
def test_concurrent_transactions_on_add_partitions_when_prepared(clock, commit):
    # shouldRespondWithConcurrentTransactionsOnAddPartitionsWhenStateIsPrepareCommit / ...PrepareAbort
    c = make(clock)
    init(c)
    add(c, 1000, 0)
    end(c, 1000, 0, commit)
    assert isinstance(add(c, 1000, 0, (TP1,)).error, ConcurrentTransactionsError)


@pytest.mark.parametrize("commit", [True, False])
def test_add_partitions_after_complete_starts_a_new_transaction(clock, commit):
    # shouldRespondWithSuccessOnAddPartitionsWhenStateIsCompleteCommit / ...CompleteAbort
    c = make(clock)
    init(c)
    add(c, 1000, 0)
    end(c, 1000, 0, commit)
    finish(c)
    clock.advance(500)
    r = add(c, 1000, 0, (TP1,))
    assert r.error is None and state(c) == TxnState.ONGOING
    assert c.metadata(TID).topic_partitions == {TP1} and c.metadata(TID).txn_start_timestamp == T0 + 500


def test_no_write_on_add_partitions_when_partitions_the_same(clock):
    # shouldRespondWithErrorsNoneOnAddPartitionWhenNoErrorsAndPartitionsTheSame
    c = make(clock)
    init(c)
    add(c, 1000, 0, (TP0, TP1))
    r = c.add_partitions(TID, 1000, 0, [TP1])
    assert r.error is None and r.persist is None


def test_verify_only_partition_not_present(clock):  # shouldRespondWithInvalidTxnStateWhenVerifyOnlyAndPartitionNotPresent
    c = make(clock)
    init(c)
    add(c, 1000, 0)
    r = c.verify_partitions(TID, 1000, 0, [TP0, TP1])
    assert r.partitions[TP0] is None and isinstance(r.partitions[TP1], TransactionAbortableError)
    assert r.partitions[TP1].errno == 120 and r.persist is None


# ------------------------------------------------------------------ EndTxn (TV1)
def ongoing(clock, tv=1, server_tv=1):
    c = make(clock, tv=server_tv)
    init(c)
    add(c, 1000, 0, (TP0, TP1), client_txn_version=tv)
    return c


def test_commit_flow_returns_markers_then_completes(clock):
    c = ongoing(clock)
    r = c.end_txn(TID, 1000, 0, True)
    assert r.pending and r.persist.value.state == TxnState.PREPARE_COMMIT
    r = c.persisted(r.persist)
    assert isinstance(r, EndTxnResult) and r.error is None
    assert r.markers == WriteMarkers(TID, 1000, 0, True, (TP0, TP1), 0, 1)
    assert state(c) == TxnState.PREPARE_COMMIT
    step = c.complete(TID)
    assert step.persist.value.state == TxnState.COMPLETE_COMMIT and step.persist.value.topic_partitions == frozenset()
    c.persisted(step.persist)
    assert state(c) == TxnState.COMPLETE_COMMIT and c.metadata(TID).topic_partitions == set()


def test_invalid_pid_mapping_on_end_txn_when_pid_doesnt_match(clock):  # shouldReplyWithInvalidPidMappingOnEndTxnWhenPidDosentMatchMapped
    c = ongoing(clock)
    assert isinstance(end(c, 999, 0).error, InvalidProducerIdMappingError)
    assert isinstance(end(c, 1000, 0, tid="nope").error, InvalidProducerIdMappingError)
    assert isinstance(end(c, 1000, 0, tid="").error, InvalidRequestError)


@pytest.mark.parametrize("epoch", [1, -1])
def test_producer_fenced_on_end_txn_when_epoch_differs(clock, epoch):
    # shouldReplyWithProducerFencedOnEndTxnWhenEpochIsNotSameAsTransaction,
    # shouldReturnInvalidEpochOnEndTxnWhenEpochIsLarger / ...Smaller
    c = ongoing(clock)
    init(c)                              # fences epoch 0 ... (aborts it)
    finish(c)
    init(c)                              # epoch 2
    r = end(c, 1000, 2 + epoch)
    assert isinstance(r.error, ProducerFencedError) and (r.producer_id, r.producer_epoch) == (-1, -1)


def test_ok_on_end_txn_when_complete_commit_and_commit(clock):  # shouldReturnOkOnEndTxnWhenStatusIsCompleteCommitAndResultIsCommit
    c = ongoing(clock)
    end(c, 1000, 0, True)
    finish(c)
    r = c.end_txn(TID, 1000, 0, True)
    assert r.error is None and r.persist is None


def test_invalid_txn_state_on_end_txn_when_complete_abort_and_commit(clock):
    # shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsCompleteAbortAndResultIsNotAbort
    c = ongoing(clock)
    end(c, 1000, 0, False)
    finish(c)
    assert isinstance(end(c, 1000, 0, True).error, InvalidTxnStateError)
    assert end(c, 1000, 0, False).error is None


@pytest.mark.parametrize("commit", [True, False])
def test_concurrent_transactions_on_end_txn_while_markers_are_written(clock, commit):
    # Kafka's sendTxnMarkersCallback prepares Complete* as soon as Prepare* is appended, and
    # handleEndTransaction checks the pending state before the state: while the markers are written
    # every EndTxn gets CONCURRENT_TRANSACTIONS, the opposite result too
    c = ongoing(clock)
    end(c, 1000, 0, commit)
    md = c.metadata(TID)
    assert md.state == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
    assert md.pending_state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
    for result in (True, False):
        r = c.end_txn(TID, 1000, 0, result)
        assert isinstance(r.error, ConcurrentTransactionsError) and r.persist is None
    finish(c)
    assert end(c, 1000, 0, commit).error is None                       # the retry, once complete
    assert isinstance(end(c, 1000, 0, not commit).error, InvalidTxnStateError)


def prepared_without_pending(clock, state, tv):
    """Kafka's TransactionCoordinatorTest setup for the Prepare* EndTxn cases: producer id 10, epoch 1,
    ``state``, nothing pending. In Kafka this exists only between the Prepare* append callback and the
    marker callback; ``persisted`` does both at once, so the test loads the record and clears the
    pending Complete* by hand."""
    c = make(clock)
    c.load({TID: TxnTransitMetadata(10, 10, -1, 1, 0, 60_000, state, frozenset(), T0, T0, tv)})
    c.metadata(TID).pending_state = None
    return c


def request_epoch(tv):
    return 0 if tv == 2 else 1            # Kafka's requestEpoch: TV2 sends the epoch before the bump


@pytest.mark.parametrize("tv", [0, 2])
def test_concurrent_transactions_on_end_txn_when_prepare_commit(clock, tv):
    # shouldReturnConcurrentTransactionsOnEndTxnRequestWhenStatusIsPrepareCommit
    c = prepared_without_pending(clock, TxnState.PREPARE_COMMIT, tv)
    assert isinstance(end(c, 10, request_epoch(tv), True, tv=tv).error, ConcurrentTransactionsError)
    assert isinstance(end(c, 10, request_epoch(tv), False, tv=tv).error, InvalidTxnStateError)


@pytest.mark.parametrize("tv", [0, 2])
def test_invalid_txn_state_on_end_txn_when_prepare_abort(clock, tv):
    # shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsPrepareAbort
    c = prepared_without_pending(clock, TxnState.PREPARE_ABORT, tv)
    assert isinstance(end(c, 10, request_epoch(tv), True, tv=tv).error, InvalidTxnStateError)
    assert isinstance(end(c, 10, request_epoch(tv), False, tv=tv).error, ConcurrentTransactionsError)


def test_tv1_end_txn_from_empty_is_invalid(clock):
    c = make(clock)
    init(c)
    assert isinstance(end(c, 1000, 0, False).error, InvalidTxnStateError)
    assert isinstance(end(c, 1000, 0, True).error, InvalidTxnStateError)


# ------------------------------------------------------------------ EndTxn (TV2, KIP-890)
def test_tv2_end_txn_bumps_epoch_and_answers_the_next_one(clock):
    c = ongoing(clock, tv=2)
    r = end(c, 1000, 0, True, tv=2)
    assert (r.error, r.producer_id, r.producer_epoch) == (None, 1000, 1)
    assert r.markers.producer_epoch == 1 and r.markers.transaction_version == 2
    assert isinstance(end(c, 1000, 0, True, tv=2).error, ConcurrentTransactionsError)   # retry while markers pending
    finish(c)
    r = end(c, 1000, 0, True, tv=2)                      # retry (epoch - 1) after completion: NONE, current ids
    assert (r.error, r.producer_id, r.producer_epoch, r.persist) == (None, 1000, 1, None)
    assert isinstance(end(c, 1000, 0, False, tv=2).error, InvalidTxnStateError)


def test_tv2_end_txn_not_a_retry_is_invalid(clock):  # shouldReturnInvalidTxnRequestOnEndTxnV2IfNotEndTxnV2Retry
    c = ongoing(clock, tv=2)
    end(c, 1000, 0, True, tv=2)
    finish(c)
    assert isinstance(end(c, 1000, 1, True, tv=2).error, InvalidTxnStateError)     # commit, current epoch
    assert isinstance(end(c, 1000, 5, True, tv=2).error, ProducerFencedError)


@pytest.mark.parametrize("start", ["empty", "complete_commit", "complete_abort"])
def test_tv2_abort_from_finished_state_bumps_epoch(clock, start):
    c = make(clock)
    init(c)
    epoch = 0
    if start != "empty":
        add(c, 1000, 0, client_txn_version=2)
        end(c, 1000, 0, start == "complete_commit", tv=2)
        finish(c)
        epoch = 1
    r = end(c, 1000, epoch, False, tv=2)
    assert (r.error, r.producer_epoch, r.markers.partitions) == (None, epoch + 1, ())
    finish(c)
    assert state(c) == TxnState.COMPLETE_ABORT
    if start == "empty":
        assert isinstance(end(c, 1000, 0, True, tv=2).error, InvalidTxnStateError)


def test_tv2_retry_from_empty_is_fenced(clock):
    c = make(clock)
    init(c)
    init(c)                                             # epoch 1
    assert isinstance(end(c, 1000, 0, False, tv=2).error, ProducerFencedError)
    assert isinstance(end(c, 1000, 0, True, tv=2).error, ProducerFencedError)


def test_tv2_end_txn_epoch_overflow_rolls_over_to_new_producer_id(clock):
    # shouldReturnOkOnEndTxnV2IfEndTxnV2RetryEpochOverflow
    c = ongoing(clock, tv=2)
    c.metadata(TID).producer_epoch = 32766
    r = end(c, 1000, 32766, True, tv=2)
    assert (r.producer_id, r.producer_epoch) == (1001, 0)           # what the client uses next
    assert (r.markers.producer_id, r.markers.producer_epoch) == (1000, 32767)
    finish(c)
    md = c.metadata(TID)
    assert (md.producer_id, md.producer_epoch, md.previous_producer_id) == (1001, 0, 1000)
    r = end(c, 1000, 32766, True, tv=2)                              # the retry with the old id
    assert (r.error, r.producer_id, r.producer_epoch) == (None, 1001, 0)
    assert add(c, 1001, 0, client_txn_version=2).error is None


# ------------------------------------------------------------------ timeouts
def test_abort_expired_transactions_in_ongoing_state_and_bump_epoch(clock):
    # shouldAbortExpiredTransactionsInOngoingStateAndBumpEpoch
    c = ongoing(clock)
    clock.advance(60_000)
    assert c.abort_timed_out() == []                    # start + timeout < now: not yet
    clock.advance(1)
    [step] = c.abort_timed_out()
    assert step.transactional_id == TID and step.persist.value.state == TxnState.PREPARE_ABORT
    assert step.persist.value.producer_epoch == 1
    r = c.persisted(step.persist)
    assert r.markers == WriteMarkers(TID, 1000, 1, False, (TP0, TP1), 0, 1)
    finish(c)
    assert isinstance(end(c, 1000, 0, True).error, ProducerFencedError)            # the old producer is fenced
    assert init(c).producer_epoch == 2


def test_timeouts_abort_only_ongoing_transactions(clock):  # shouldOnlyConsiderTransactionsInTheOngoingStateToAbort
    c = make(clock)
    for tid in ("empty", "ongoing", "commit", "prepare", "done"):
        init(c, tid)
    for tid in ("ongoing", "commit", "prepare", "done"):
        add(c, 1000 + ["empty", "ongoing", "commit", "prepare", "done"].index(tid), 0, tid=tid)
    end(c, 1002, 0, True, tid="commit")
    end(c, 1003, 0, False, tid="prepare")
    end(c, 1004, 0, True, tid="done")
    finish(c, "done")
    clock.advance(3_600_000)
    assert [s.transactional_id for s in c.abort_timed_out()] == ["ongoing"]


def test_no_timeout_abort_with_pending_transition(clock):  # shouldNotAbortExpiredTransactionsThatHaveAPendingStateTransition
    c = ongoing(clock)
    pending = c.add_partitions(TID, 1000, 0, [TopicPartition("x", 0)])
    clock.advance(120_000)
    assert c.abort_timed_out() == []
    c.persisted(pending.persist)
    assert len(c.abort_timed_out()) == 1


def test_smaller_epoch_not_accepted_during_expiration(clock):  # shouldNotAcceptSmallerEpochDuringTransactionExpiration
    # Kafka's endTransaction applies the fence's epoch bump in memory before appending PrepareAbort, and
    # checks the epoch before the pending state: while the timeout abort is written the old producer is
    # already fenced. (Kafka's test itself races the abort against a concurrent bump, which cannot
    # happen here: abort_timed_out fences and aborts under one lock.)
    c = ongoing(clock)
    clock.advance(120_000)
    [step] = c.abort_timed_out()
    md = c.metadata(TID)
    assert (md.producer_epoch, md.pending_state) == (1, TxnState.PREPARE_ABORT)
    assert isinstance(end(c, 1000, 0, True).error, ProducerFencedError)
    assert isinstance(end(c, 1000, 0, False).error, ProducerFencedError)
    assert isinstance(add(c, 1000, 0, (TP1,)).error, ProducerFencedError)
    assert isinstance(end(c, 1000, 1, False).error, ConcurrentTransactionsError)   # the fenced epoch: write pending
    r = c.persisted(step.persist)
    assert r.markers.producer_epoch == 1
    assert isinstance(end(c, 1000, 0, False).error, ProducerFencedError)


def test_tick_runs_the_periodic_tasks_when_due(clock):
    c = ongoing(clock)
    clock.advance(9_999)
    assert c.tick() == []
    clock.advance(60_002)
    assert [s.transactional_id for s in c.tick()] == [TID]
    assert c.tick() == []                               # next check in 10 s


# ------------------------------------------------------------------ expiration
def test_expiration_writes_a_tombstone_then_removes_the_id(clock):
    # shouldRemoveCompleteCommitExpiredTransactionalIds, shouldRemoveEmptyExpiredTransactionalIds
    c = ongoing(clock)
    end(c, 1000, 0, True)
    finish(c)
    init(c, "idle")
    clock.advance(604_800_000)
    steps = c.expire()
    assert [(s.transactional_id, s.persist.value) for s in steps] == [("idle", None), (TID, None)]
    assert c.describe([TID])[0].error_code == 105          # testDescribeTransactionsWithExpiringTransactionalId
    assert c.list().transactions == ()
    for s in steps:
        c.persisted(s.persist)
    assert c.metadata(TID) is None and c.metadata("idle") is None
    assert init(c).producer_id == 1002                      # a new producer id next time


def test_expiration_skips_ongoing_and_prepare_abort(clock):
    # shouldNotRemoveOngoingTransactionalIds, shouldNotRemovePrepareAbortTransactionalIds
    c = ongoing(clock)
    init(c, "aborting")
    add(c, 1001, 0, tid="aborting")
    end(c, 1001, 0, False, tid="aborting")
    clock.advance(10 * 604_800_000)
    assert c.expire() == []


def test_expiration_keeps_the_id_if_the_tombstone_write_fails(clock):
    # shouldNotRemoveExpiredTransactionalIdsIfLogAppendFails
    c = make(clock)
    init(c)
    clock.advance(604_800_000)
    [step] = c.expire()
    c.persisted(step.persist, NotEnoughReplicasError("isr"))
    assert state(c) == TxnState.EMPTY and c.metadata(TID).pending_state is None
    assert c.describe([TID])[0].error is None


# ------------------------------------------------------------------ describe / list
def test_describe_transactions(clock):
    c = ongoing(clock)
    [d] = c.describe([TID])
    assert (d.state, d.producer_id, d.producer_epoch, d.transaction_timeout_ms, d.transaction_start_time_ms,
            d.topic_partitions) == ("Ongoing", 1000, 0, 60_000, T0, (TP0, TP1))
    unknown, empty = c.describe(["nope", ""])
    assert isinstance(unknown.error, TransactionalIdNotFoundError) and isinstance(empty.error, InvalidRequestError)


def test_list_transactions_filtering(clock):  # testListTransactionsFiltering
    c = make(clock)
    init(c, "a")
    init(c, "b")
    add(c, 1001, 0, tid="b")
    clock.advance(5_000)
    init(c, "c")
    add(c, 1002, 0, tid="c")
    names = lambda r: [t.transactional_id for t in r.transactions]  # noqa: E731
    assert names(c.list()) == ["a", "b", "c"]
    r = c.list(states_filter=["Ongoing", "Bogus"])
    assert names(r) == ["b", "c"] and r.unknown_state_filters == ("Bogus",)
    assert names(c.list(producer_id_filter=[1000, 1002])) == ["a", "c"]
    assert names(c.list(states_filter=["Ongoing"], duration_filter_ms=1_000)) == ["b"]
    assert c.list(states_filter=["Bogus"]).transactions == ()
    assert c.list(states_filter=["Ongoing"]).transactions[0].state == "Ongoing"


# ------------------------------------------------------------------ load, protocol misuse, partitioning
def test_load_resends_markers_for_prepared_transactions(clock):  # shouldWriteTxnMarkersForTransactionInPreparedCommitState
    c = ongoing(clock)
    r = c.end_txn(TID, 1000, 0, True)
    value = r.persist.value
    c2 = make(clock)
    [m] = c2.load({TID: value, "gone": None})
    assert m == WriteMarkers(TID, 1000, 0, True, (TP0, TP1), 0, 1)
    finish(c2)
    assert state(c2) == TxnState.COMPLETE_COMMIT and c2.metadata(TID).last_producer_epoch == -1


def test_persisted_rejects_an_unknown_write(clock):
    c = make(clock)
    with pytest.raises(IllegalStateError):
        c.persisted(Persist(TID, None, 0))
    with pytest.raises(IllegalStateError, match="no transaction waiting"):
        c.complete(TID)


def test_partition_for_uses_java_string_hash():
    # "a".hashCode() == 97; "polygenelubricants".hashCode() == Integer.MIN_VALUE, which Utils.abs maps to 0
    assert partition_for("a") == 97 % 50
    assert partition_for("polygenelubricants") == 0
    assert 0 <= partition_for("my-txn") < 50


def test_results_carry_kafka_codes(clock):
    c = make(clock)
    r = InitProducerIdResult(ProducerFencedError("x"))
    assert r.error_code == 90 and InitProducerIdResult().error_code == 0
    assert ConcurrentTransactionsError.retriable and not ProducerFencedError.retriable
    assert isinstance(c.init_producer_id(TID, 60_000, version=0), InitProducerIdResult)
