"""The transactional producer's state: kafka-python's ``TransactionManager``, over the broker API.

A producer configured with ``transactional_id`` owns one :class:`TransactionManager`. It
keeps the client side of Kafka's transaction protocol (txn facts §1, kafka-python 3.0.12
``kafka/producer/transaction_manager.py``), with kafka-python's states and transitions:

1. ``init_transactions()``: UNINITIALIZED → INITIALIZING → READY. InitProducerId with the
   transactional id (``Broker.init_transactional_producer_id``) fences every earlier
   producer of the id and aborts its open transaction; the broker then answers
   CONCURRENT_TRANSACTIONS once, and the call is retried after ``retry_backoff_ms`` on the
   clock, as kafka-python does. The producer id and epoch go to the sender.
2. ``begin_transaction()``: READY → IN_TRANSACTION (no request, as in Kafka).
3. A send: allowed only IN_TRANSACTION. The sender calls :meth:`ensure_partition_added`
   before the first produce to each partition (AddPartitionsToTxn), and sets the
   transactional attribute on every batch.
4. ``send_offsets_to_transaction()``: AddOffsetsToTxn then TxnOffsetCommit; the offsets
   become the group's only if the transaction commits. The consumer's group metadata
   (member id, generation, group instance id) goes with them and the group coordinator
   checks it (KIP-447): a consumer rebalanced out of the group gets
   :class:`~kafkasim.errors.CommitFailedError` (ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID, as
   kafka-python) or FencedInstanceIdError, and the transaction must be aborted.
5. ``commit_transaction()``: IN_TRANSACTION → COMMITTING_TRANSACTION, flush, EndTxn(commit)
   → READY. ``abort_transaction()``: IN_TRANSACTION or ABORTABLE_ERROR →
   ABORTING_TRANSACTION, EndTxn(abort) → READY. A transaction that added nothing sends no
   EndTxn (Kafka's ``transactionStarted`` rule: the coordinator would answer
   INVALID_TXN_STATE).
6. Errors: a batch that fails inside a transaction makes it ABORTABLE_ERROR (commit raises
   it; abort goes on). A fencing error (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
   TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_PRODUCER_ID_MAPPING) is FATAL_ERROR:
   every later transactional call raises :class:`~kafkasim.errors.ProducerFencedError`
   (or the fatal error's own class); only ``close()`` is left.

Difference from kafka-python: an invalid transition (``begin_transaction()`` twice) raises
:class:`~kafkasim.errors.IllegalStateError` (Java's ``IllegalStateException``), where
kafka-python raises its base ``KafkaError``; both carry Kafka's wording. The requests run
in the calling thread (there is no network thread), so each method returns when the
broker has answered.

Thread-safety: every method takes the manager's lock; the sender calls
:meth:`ensure_partition_added` and :meth:`on_batch_failed` under its own send lock.
"""

from __future__ import annotations

import enum
import threading
from typing import Any, Optional

from kafkasim.clock import Clock
from kafkasim.errors import (
    CommitFailedError, ConcurrentTransactionsError, IllegalGenerationError, IllegalStateError, InvalidArgumentError,
    InvalidProducerEpochError, InvalidProducerIdMappingError, KafkaSimError, KafkaTimeoutError, ProducerFencedError,
    TransactionalIdAuthorizationFailedError, UnknownMemberIdError,
)
from kafkasim.types import ConsumerGroupMetadata, TopicPartition

__all__ = ["TransactionManager", "TransactionState"]

_FATAL = (ProducerFencedError, InvalidProducerEpochError, InvalidProducerIdMappingError,
          TransactionalIdAuthorizationFailedError)


class TransactionState(enum.IntEnum):
    """kafka-python's (and Java's) client transaction states."""

    UNINITIALIZED = 0
    INITIALIZING = 1
    READY = 2
    IN_TRANSACTION = 3
    COMMITTING_TRANSACTION = 4
    ABORTING_TRANSACTION = 5
    ABORTABLE_ERROR = 6
    FATAL_ERROR = 7


S = TransactionState
_VALID_FROM = {
    S.INITIALIZING: (S.UNINITIALIZED,),
    S.READY: (S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION),
    S.IN_TRANSACTION: (S.READY,),
    S.COMMITTING_TRANSACTION: (S.IN_TRANSACTION,),
    S.ABORTING_TRANSACTION: (S.IN_TRANSACTION, S.ABORTABLE_ERROR),
    S.ABORTABLE_ERROR: (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR),
}
"""Kafka's ``TransactionManager.State.isTransitionValid`` (FATAL_ERROR: from anywhere)."""


class TransactionManager:
    """One transactional id's client state (see the module docstring)."""

    def __init__(self, broker, transactional_id: str, transaction_timeout_ms: int, clock: Clock,
                 retry_backoff_ms: int) -> None:
        self._broker = broker
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._clock = clock
        self._retry_backoff_ms = max(1, retry_backoff_ms)
        self._lock = threading.RLock()
        self.state = S.UNINITIALIZED
        self.producer_id = -1
        self.producer_epoch = -1
        self._partitions: set[TopicPartition] = set()   # added to the open transaction
        self._offsets_added = False
        self._last_error: Optional[BaseException] = None

    # -- states ---------------------------------------------------------------------------------
    def _transition(self, target: TransactionState, error: Optional[BaseException] = None) -> None:
        if target is not S.FATAL_ERROR and self.state not in _VALID_FROM[target]:
            raise IllegalStateError(f"TransactionalId {self.transactional_id}: Invalid transition attempted "
                                    f"from state {self.state.name} to state {target.name}")
        self.state = target
        self._last_error = error

    def _fail_if_error(self) -> None:
        if self.state is S.FATAL_ERROR:
            err = self._last_error
            raise type(err)(f"Cannot execute transactional method because we are in an error state: "
                            f"{type(err).__name__}: {err}") from err
        if self.state is S.ABORTABLE_ERROR:
            raise KafkaSimError(f"Cannot execute transactional method because we are in an error state "
                                f"(the transaction must be aborted): {type(self._last_error).__name__}: "
                                f"{self._last_error}") from self._last_error

    def _failed(self, exc: BaseException) -> BaseException:
        """Record a broker error of a transactional request; returns what to raise."""
        if isinstance(exc, _FATAL):
            fenced = exc if isinstance(exc, ProducerFencedError) else ProducerFencedError(
                f"{type(exc).__name__}: {exc} (the producer was fenced: another producer with transactional id "
                f"{self.transactional_id!r} initialised since, or its transaction timed out)")
            if fenced is not exc:
                fenced.__cause__ = exc
            self._transition(S.FATAL_ERROR, fenced)
            return fenced
        if self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
            self._transition(S.ABORTABLE_ERROR, exc)
        return exc

    def _retrying(self, call, *args, **kwargs):
        """``call`` again after ``retry_backoff_ms`` (on the clock) while the broker answers a
        retriable error (CONCURRENT_TRANSACTIONS), for at most ``transaction_timeout_ms``."""
        deadline = self._clock.now_ms() + self.transaction_timeout_ms
        while True:
            try:
                return call(*args, **kwargs)
            except KafkaSimError as exc:
                if not (exc.retriable or isinstance(exc, ConcurrentTransactionsError)):
                    raise
                if self._clock.now_ms() >= deadline:
                    raise KafkaTimeoutError(f"TransactionalId {self.transactional_id}: still "
                                            f"{type(exc).__name__} after {self.transaction_timeout_ms} ms") from exc
                self._clock.sleep(self._retry_backoff_ms)

    # -- what the producer calls ---------------------------------------------------------------
    def initialize(self) -> tuple[int, int]:
        """init_transactions(): InitProducerId with the transactional id; ``(pid, epoch)``.
        Retrying after a success does nothing, as kafka-python."""
        with self._lock:
            if self.state is S.READY and self.producer_id >= 0 and not self._partitions:
                return self.producer_id, self.producer_epoch
            self._fail_if_error()
            self._transition(S.INITIALIZING)
            try:
                pid, epoch = self._retrying(self._broker.init_transactional_producer_id,
                                            self.transactional_id, self.transaction_timeout_ms)
            except KafkaSimError as exc:
                self.state = S.UNINITIALIZED          # a new attempt may be made (kafka-python)
                if isinstance(exc, _FATAL):
                    raise self._failed(exc) from None
                raise
            self.producer_id, self.producer_epoch = pid, epoch
            self._transition(S.READY)
            return pid, epoch

    def begin(self) -> None:
        with self._lock:
            self._fail_if_error()
            self._transition(S.IN_TRANSACTION)
            self._partitions.clear()
            self._offsets_added = False

    def check_send(self) -> None:
        """Raise unless a send is allowed now (kafka-python's ``_fail_if_not_ready_for_send``)."""
        state = self.state
        if state is S.IN_TRANSACTION:
            return
        with self._lock:
            if state in (S.FATAL_ERROR, S.ABORTABLE_ERROR):
                raise KafkaSimError("Cannot perform send because at least one previous transactional or "
                                    f"idempotent request has failed with errors: {self._last_error}") \
                    from self._last_error
            if self.producer_id < 0:
                raise IllegalStateError("Cannot perform a 'send' before completing a call to init_transactions "
                                        "when transactions are enabled.")
            raise IllegalStateError(f"Cannot call send in state {state.name}")

    def ensure_partition_added(self, tp: TopicPartition) -> None:
        """AddPartitionsToTxn before the first produce of the transaction to ``tp`` (the sender)."""
        if tp in self._partitions:
            return
        with self._lock:
            if self.state not in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION):
                self._fail_if_error()
                raise IllegalStateError(f"Cannot add partition {tp} to a transaction in state {self.state.name}")
            try:
                self._retrying(self._broker.add_partitions_to_txn, self.transactional_id, self.producer_id,
                               self.producer_epoch, [tp])
            except KafkaSimError as exc:
                raise self._failed(exc) from None
            self._partitions.add(tp)

    def on_batch_failed(self, exc: BaseException) -> None:
        """A batch of the transaction failed for good: the transaction can only be aborted
        (or, for a fencing error, the producer is done)."""
        with self._lock:
            if self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR):
                self._failed(exc)

    def send_offsets(self, offsets: dict, group_metadata: Any) -> None:
        """AddOffsetsToTxn + TxnOffsetCommit for the group of ``group_metadata``."""
        member = {}
        if isinstance(group_metadata, str):
            group_id = group_metadata
        elif isinstance(group_metadata, ConsumerGroupMetadata) or hasattr(group_metadata, "group_id"):
            group_id = group_metadata.group_id
            member = {"member_id": getattr(group_metadata, "member_id", "") or "",
                      "generation_id": getattr(group_metadata, "generation_id", -1),
                      "group_instance_id": getattr(group_metadata, "group_instance_id", None)}
        else:
            raise InvalidArgumentError("send_offsets_to_transaction expects group_metadata to be a "
                                       f"ConsumerGroupMetadata or a group_id str, got {type(group_metadata)!r}")
        if not isinstance(group_id, str) or not group_id:
            raise InvalidArgumentError(f"send_offsets_to_transaction needs a consumer group id, got {group_id!r} "
                                       "(a consumer without group_id has no group to commit for)")
        with self._lock:
            self._fail_if_error()
            if self.state is not S.IN_TRANSACTION:
                raise IllegalStateError("Cannot send offsets to transaction because the producer is not in an "
                                        "active transaction")
            try:
                self._retrying(self._broker.add_offsets_to_txn, self.transactional_id, self.producer_id,
                               self.producer_epoch, group_id)
                self._offsets_added = True
                try:
                    self._retrying(self._broker.txn_offset_commit, self.transactional_id, group_id,
                                   self.producer_id, self.producer_epoch, dict(offsets), **member)
                except (IllegalGenerationError, UnknownMemberIdError) as exc:
                    # KIP-447, as kafka-python and Java: the consumer's group metadata is stale
                    # (it was rebalanced out); the transaction must be aborted
                    failed = CommitFailedError(f"Transaction offset commit failed due to consumer group "
                                               f"metadata mismatch: {type(exc).__name__}: {exc}")
                    failed.__cause__ = exc
                    raise failed
            except KafkaSimError as exc:
                raise self._failed(exc) from None

    def begin_commit(self) -> None:
        with self._lock:
            self._fail_if_error()
            self._transition(S.COMMITTING_TRANSACTION)

    def begin_abort(self) -> bool:
        """ABORTING_TRANSACTION; True if the transaction was in an abortable error (then its
        unsent batches are dropped, not sent)."""
        with self._lock:
            had_error = self.state is S.ABORTABLE_ERROR
            if not had_error:
                self._fail_if_error()
            self._transition(S.ABORTING_TRANSACTION)
            return had_error

    def end(self, commit: bool) -> None:
        """EndTxn (when the transaction added anything), then READY."""
        with self._lock:
            if commit:
                self._fail_if_error()         # a batch failed during the flush: abort instead
            if self._partitions or self._offsets_added:
                try:
                    self._retrying(self._broker.end_txn, self.transactional_id, self.producer_id,
                                   self.producer_epoch, commit)
                except KafkaSimError as exc:
                    raise self._failed(exc) from None
            self._partitions.clear()
            self._offsets_added = False
            self._transition(S.READY)
