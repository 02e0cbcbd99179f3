"""One transactional id's state at the transaction coordinator: Kafka's ``TransactionMetadata``.

States (the id is the int8 written to ``__transaction_state``; the name is what
DescribeTransactions and ListTransactions print)::

    id  state              valid previous states
    --  -----              ---------------------
    0   Empty              Empty, CompleteCommit, CompleteAbort
    1   Ongoing            Ongoing, Empty, CompleteCommit, CompleteAbort
    2   PrepareCommit      Ongoing
    3   PrepareAbort       Ongoing, PrepareEpochFence, and (TV2: an abort the client sends when unsure)
                           Empty, CompleteCommit, CompleteAbort
    4   CompleteCommit     PrepareCommit
    5   CompleteAbort      PrepareAbort
    6   Dead               Empty, CompleteCommit, CompleteAbort   (in memory only: expiry writes a tombstone)
    7   PrepareEpochFence  Ongoing                                (pending only: becomes PrepareAbort at once)

Every transition is two-phase, as in Kafka:

1. a ``prepare_*`` helper checks the transition, sets ``pending_state`` and returns a
   :class:`TxnTransitMetadata`: the full new value, which is also the record the owner
   writes to ``__transaction_state``;
2. once that record is written, :meth:`TransactionMetadata.complete_transition` applies it
   (or :meth:`TransactionMetadata.abort_transition` drops it when the write failed).

While ``pending_state`` is set no other ``prepare_*`` is allowed (the coordinator answers
CONCURRENT_TRANSACTIONS). Invalid transitions raise :class:`~kafkasim.errors.IllegalStateError`
naming the transactional id, the current state and the target.

Epochs: a producer epoch is an int16; ``is_epoch_exhausted(e)`` is ``e >= 32766``
(Short.MaxValue - 1), so the coordinator can always fence with one more bump. When the
epoch is exhausted the next epoch bump rotates to a new producer id with epoch 0
(InitProducerId: :meth:`~TransactionMetadata.prepare_producer_id_rotation`; TV2 EndTxn:
``next_producer_id``, switched in by :meth:`~TransactionMetadata.prepare_complete`).

Transaction versions (``client_transaction_version``): 0 and 1 behave alike (TV1); 2 is
KIP-890's TV2, where every EndTxn bumps the epoch.

Thread-safety: none; the :class:`~kafkasim.coordinator.transactions.TransactionCoordinator`
lock guards every instance.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterable, Optional

from kafkasim.errors import IllegalStateError, InvalidArgumentError, ProducerFencedError
from kafkasim.types import TopicPartition

__all__ = [
    "TxnState", "TxnTransitMetadata", "TransactionMetadata",
    "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "MAX_PRODUCER_EPOCH", "is_epoch_exhausted",
    "TV_1", "TV_2", "supports_epoch_bump",
]

NO_PRODUCER_ID = -1            # RecordBatch.NO_PRODUCER_ID
NO_PRODUCER_EPOCH = -1         # RecordBatch.NO_PRODUCER_EPOCH
MAX_PRODUCER_EPOCH = 32767     # Short.MaxValue
TV_1 = 1                       # transaction.version 0 and 1: the original protocol
TV_2 = 2                       # KIP-890: the epoch is bumped on every EndTxn


def is_epoch_exhausted(epoch: int) -> bool:
    """True when ``epoch`` leaves no room for a bump plus a fence (``epoch >= 32766``)."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


def supports_epoch_bump(transaction_version: int) -> bool:
    """True for TV2 (KIP-890): EndTxn bumps the epoch."""
    return transaction_version >= TV_2


class TxnState(enum.IntEnum):
    """Kafka's transaction states; the value is the id written to ``__transaction_state``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The state's name as Kafka prints it ("Empty", "PrepareCommit", ...)."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> Optional["TxnState"]:
        """The state Kafka calls ``name``, or None (ListTransactions' unknown state filters)."""
        return _BY_NAME.get(name)

    @property
    def valid_previous_states(self) -> frozenset["TxnState"]:
        """The states this one may be entered from (PrepareAbort's TV2-only ones included)."""
        return _VALID_PREVIOUS[self]

    @property
    def is_expiration_allowed(self) -> bool:
        """True for Empty, CompleteCommit and CompleteAbort: transactional.id.expiration may remove the id."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}
_S = TxnState
_FINISHED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
_VALID_PREVIOUS = {
    _S.EMPTY: _FINISHED,
    _S.ONGOING: _FINISHED | {_S.ONGOING},
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: _FINISHED | {_S.ONGOING, _S.PREPARE_EPOCH_FENCE},
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: _FINISHED,
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


@dataclass(frozen=True)
class TxnTransitMetadata:
    """A transactional id's complete state after one transition: the value of its
    ``__transaction_state`` record (TransactionLogValue) plus the in-memory ``last_producer_epoch``.

    ``previous_producer_id`` is the producer id before the transition (Kafka's prevProducerId).
    """

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int


@dataclass
class TransactionMetadata:
    """The coordinator's view of one transactional id (see the module docstring).

    Invariants: ``producer_epoch`` is -1 only before the first InitProducerId completes;
    ``topic_partitions`` is empty unless the state is Ongoing or Prepare*;
    ``txn_start_timestamp`` is -1 in Empty.
    """

    transactional_id: str
    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    client_transaction_version: int = 0
    # in memory only
    pending_state: Optional[TxnState] = None
    has_failed_epoch_fence: bool = False

    # ------------------------------------------------------------------ queries
    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def snapshot(self) -> TxnTransitMetadata:
        """The current state as a transit value (what a no-op transition would write)."""
        return TxnTransitMetadata(
            self.producer_id, self.previous_producer_id, self.next_producer_id, self.producer_epoch,
            self.last_producer_epoch, self.txn_timeout_ms, self.state, frozenset(self.topic_partitions),
            self.txn_start_timestamp, self.txn_last_update_timestamp, self.client_transaction_version)

    @classmethod
    def from_transit(cls, transactional_id: str, t: TxnTransitMetadata) -> "TransactionMetadata":
        """Rebuild the metadata from a ``__transaction_state`` value (on load: ``last_producer_epoch``
        is kept as recorded; partitions only outside Empty, as Kafka restores them)."""
        return cls(transactional_id, t.producer_id, t.previous_producer_id, t.next_producer_id,
                   t.producer_epoch, t.last_producer_epoch, t.txn_timeout_ms, t.state,
                   set(t.topic_partitions) if t.state != TxnState.EMPTY else set(),
                   t.txn_start_timestamp, t.txn_last_update_timestamp, t.client_transaction_version)

    # ------------------------------------------------------------------ prepare_*
    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Ongoing → pending PrepareEpochFence with epoch + 1 (not bumped again after a failed fence)."""
        if self.producer_epoch == MAX_PRODUCER_EPOCH:
            raise IllegalStateError(
                f"transactional id {self.transactional_id!r}: cannot fence producer {self.producer_id} "
                f"at epoch {self.producer_epoch} (Short.MaxValue): the bump would overflow")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(TxnState.PREPARE_EPOCH_FENCE, producer_epoch=epoch,
                             last_producer_epoch=NO_PRODUCER_EPOCH,
                             txn_last_update_timestamp=self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, new_txn_timeout_ms: int, expected_epoch: Optional[int],
                                         now_ms: int) -> TxnTransitMetadata:
        """→ Empty with the epoch bumped (InitProducerId). Raises :class:`ProducerFencedError`
        when ``expected_epoch`` is neither the current epoch nor the last one (a retry).

        1. no expected epoch: epoch + 1, last epoch -1;
        2. expected == current, or no current epoch (-1): epoch + 1, last epoch = current;
        3. expected == last epoch: a retry of a bump that succeeded, so no bump;
        4. otherwise the producer is fenced.
        """
        if self.is_producer_epoch_exhausted:
            raise IllegalStateError(
                f"transactional id {self.transactional_id!r}: no producer epochs left for producer id "
                f"{self.producer_id} (epoch {self.producer_epoch}); rotate the producer id")
        if expected_epoch is None:
            epoch, last = self.producer_epoch + 1, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFencedError(
                f"transactional id {self.transactional_id!r}: expected epoch {expected_epoch} is neither "
                f"the current epoch {self.producer_epoch} nor the previous one {self.last_producer_epoch}")
        return self._prepare(TxnState.EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                             txn_timeout_ms=new_txn_timeout_ms, topic_partitions=frozenset(),
                             txn_start_timestamp=-1, txn_last_update_timestamp=now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_txn_timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        """→ Empty with ``new_producer_id`` at epoch 0 (the epoch of the old id is exhausted).
        ``last_producer_epoch`` keeps the old epoch when the request carried one (so its retry is known)."""
        if self.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise IllegalStateError(
                f"transactional id {self.transactional_id!r}: cannot rotate producer ids while a "
                f"transaction is {self.state.kafka_name}")
        return self._prepare(TxnState.EMPTY, producer_id=new_producer_id, producer_epoch=0,
                             last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             txn_timeout_ms=new_txn_timeout_ms, topic_partitions=frozenset(),
                             txn_start_timestamp=-1, txn_last_update_timestamp=now_ms)

    def prepare_add_partitions(self, partitions: Iterable[TopicPartition], now_ms: int,
                               client_transaction_version: Optional[int] = None) -> TxnTransitMetadata:
        """→ Ongoing with the union of the partitions; a new transaction (from Empty or
        Complete*) starts its clock at ``now_ms``."""
        start = now_ms if self.state in _FINISHED else self.txn_start_timestamp
        tv = self.client_transaction_version if client_transaction_version is None else client_transaction_version
        return self._prepare(TxnState.ONGOING, topic_partitions=frozenset(self.topic_partitions) | frozenset(partitions),
                             txn_start_timestamp=start, txn_last_update_timestamp=now_ms,
                             client_transaction_version=tv)

    def prepare_abort_or_commit(self, new_state: TxnState, client_transaction_version: int,
                                next_producer_id: int, now_ms: int,
                                no_partition_added: bool = False) -> TxnTransitMetadata:
        """→ PrepareCommit or PrepareAbort. TV2 bumps the epoch (last epoch = the old one); TV1
        keeps it. ``next_producer_id`` is the id TV2 switches to when the epoch is exhausted.
        ``no_partition_added`` (a TV2 abort from Empty/Complete*) starts the clock at ``now_ms``."""
        if new_state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise IllegalStateError(f"transactional id {self.transactional_id!r}: {new_state.kafka_name} "
                                    "is not PrepareCommit or PrepareAbort")
        if supports_epoch_bump(client_transaction_version):
            if self.producer_epoch >= MAX_PRODUCER_EPOCH:
                raise IllegalStateError(
                    f"transactional id {self.transactional_id!r}: cannot bump epoch {self.producer_epoch} "
                    f"of producer {self.producer_id} at {new_state.kafka_name}: it would overflow")
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        if new_state == TxnState.PREPARE_ABORT and self.state in _FINISHED \
                and not supports_epoch_bump(client_transaction_version):
            raise IllegalStateError(
                f"transactional id {self.transactional_id!r}: an abort from {self.state.kafka_name} "
                "is valid only with transaction version 2")
        return self._prepare(new_state, next_producer_id=next_producer_id, producer_epoch=epoch,
                             last_producer_epoch=last,
                             txn_start_timestamp=now_ms if no_partition_added else self.txn_start_timestamp,
                             txn_last_update_timestamp=now_ms,
                             client_transaction_version=client_transaction_version)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """PrepareCommit → CompleteCommit, PrepareAbort → CompleteAbort (all markers written);
        the partitions are cleared. TV2 after an exhausted epoch: the producer id becomes
        ``next_producer_id`` at epoch 0 (``last_producer_epoch`` stays what the client last saw)."""
        if self.state == TxnState.PREPARE_COMMIT:
            new_state = TxnState.COMPLETE_COMMIT
        elif self.state == TxnState.PREPARE_ABORT:
            new_state = TxnState.COMPLETE_ABORT
        else:
            raise IllegalStateError(f"transactional id {self.transactional_id!r}: cannot complete a "
                                    f"transaction in state {self.state.kafka_name}")
        self.has_failed_epoch_fence = False
        pid, epoch = self.producer_id, self.producer_epoch
        if supports_epoch_bump(self.client_transaction_version) and self.next_producer_id != NO_PRODUCER_ID:
            pid, epoch = self.next_producer_id, 0
        return self._prepare(new_state, producer_id=pid, next_producer_id=NO_PRODUCER_ID, producer_epoch=epoch,
                             topic_partitions=frozenset(), txn_last_update_timestamp=now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        """→ Dead (expiration; the owner writes a tombstone, never this value)."""
        return self._prepare(TxnState.DEAD, topic_partitions=frozenset(),
                             txn_last_update_timestamp=self.txn_last_update_timestamp)

    def _prepare(self, state: TxnState, **changes) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalStateError(
                f"transactional id {self.transactional_id!r}: cannot prepare a transition to "
                f"{state.kafka_name} while one to {self.pending_state.kafka_name} is pending")
        if self.state not in state.valid_previous_states:
            raise IllegalStateError(
                f"transactional id {self.transactional_id!r}: cannot go from {self.state.kafka_name} "
                f"to {state.kafka_name} (valid previous states: "
                f"{', '.join(sorted(s.kafka_name for s in state.valid_previous_states))})")
        values = dict(producer_id=self.producer_id, next_producer_id=NO_PRODUCER_ID,
                      producer_epoch=self.producer_epoch, last_producer_epoch=self.last_producer_epoch,
                      txn_timeout_ms=self.txn_timeout_ms, topic_partitions=frozenset(self.topic_partitions),
                      txn_start_timestamp=self.txn_start_timestamp,
                      client_transaction_version=self.client_transaction_version)
        values.update(changes)
        if values["producer_id"] < 0:
            raise InvalidArgumentError(f"transactional id {self.transactional_id!r}: illegal new producer "
                                       f"id {values['producer_id']}")
        if state != TxnState.DEAD and values["producer_epoch"] < 0:
            raise InvalidArgumentError(f"transactional id {self.transactional_id!r}: illegal new producer "
                                       f"epoch {values['producer_epoch']}")
        self.pending_state = state
        return TxnTransitMetadata(previous_producer_id=self.producer_id, state=state, **values)

    # ------------------------------------------------------------------ complete
    def complete_transition(self, t: TxnTransitMetadata) -> None:
        """Apply a prepared transition once its record is written (Kafka's completeTransitionTo).

        Raises :class:`IllegalStateError` when ``t`` is not the pending transition or does not
        follow from the current state (Dead and PrepareEpochFence are never completed: an
        expired id is dropped, a fence becomes PrepareAbort)."""
        if self.pending_state is None:
            raise IllegalStateError(f"transactional id {self.transactional_id!r}: completing a transition "
                                    f"to {t.state.kafka_name} with none pending")
        if self.pending_state != t.state:
            raise IllegalStateError(f"transactional id {self.transactional_id!r}: completing a transition to "
                                    f"{t.state.kafka_name} while the pending one is to {self.pending_state.kafka_name}")
        if t.state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
            raise IllegalStateError(f"transactional id {self.transactional_id!r}: a transition to "
                                    f"{t.state.kafka_name} is never completed")
        bad = self._check_transit(t)
        if bad:
            raise IllegalStateError(f"transactional id {self.transactional_id!r}: transition from "
                                    f"{self.state.kafka_name} to {t} is inconsistent: {bad}")
        # which fields each transition sets (Kafka's completeTransitionTo): the rest are kept
        if t.state == TxnState.EMPTY:                          # InitProducerId
            self.producer_id, self.previous_producer_id = t.producer_id, t.previous_producer_id
            self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
            self.txn_timeout_ms = t.txn_timeout_ms
        elif t.state == TxnState.ONGOING:                      # AddPartitions
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions |= t.topic_partitions
        elif t.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):   # EndTxn
            if supports_epoch_bump(t.client_transaction_version):
                self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
                self.next_producer_id = t.next_producer_id
                self.txn_start_timestamp = t.txn_start_timestamp
        else:                                                  # Complete*: markers written
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions = set()
            if supports_epoch_bump(t.client_transaction_version):
                self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
                self.producer_id, self.previous_producer_id = t.producer_id, t.previous_producer_id
                self.next_producer_id = t.next_producer_id
        self.client_transaction_version = t.client_transaction_version
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.state = t.state
        self.pending_state = None

    def abort_transition(self) -> None:
        """Drop the pending transition (its record could not be written)."""
        self.pending_state = None

    def _check_transit(self, t: TxnTransitMetadata) -> str:
        """What is wrong with ``t`` as the next state (Kafka's checks), or ''."""
        if t.state == TxnState.EMPTY:
            bumped = t.producer_epoch == self.producer_epoch + 1 or \
                (t.producer_epoch == 0 and t.producer_id != self.producer_id)
            if t.producer_epoch != self.producer_epoch and not bumped:
                return "epoch is neither kept, bumped by one, nor 0 with a new producer id"
            if t.topic_partitions or t.txn_start_timestamp != -1:
                return "Empty with partitions or a start time"
            return ""
        if t.txn_timeout_ms != self.txn_timeout_ms:
            return "the timeout changed outside InitProducerId"
        if not self._valid_epoch(t):
            return "producer id or epoch does not follow"
        if t.state == TxnState.ONGOING:
            return "" if self.topic_partitions <= t.topic_partitions else "partitions were removed"
        if t.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            if set(t.topic_partitions) != self.topic_partitions:
                return "partitions changed at Prepare*"
            empty_abort = t.state == TxnState.PREPARE_ABORT and supports_epoch_bump(t.client_transaction_version) \
                and self.state in _FINISHED
            if t.txn_start_timestamp != self.txn_start_timestamp and not empty_abort:
                return "start time changed at Prepare*"
            return ""
        # Complete*
        return "" if t.txn_start_timestamp != -1 else "Complete* without a start time"

    def _valid_epoch(self, t: TxnTransitMetadata) -> bool:
        tv2 = supports_epoch_bump(t.client_transaction_version)
        if tv2 and t.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) and t.producer_epoch == 0 \
                and t.producer_id != self.producer_id:
            return t.last_producer_epoch == self.last_producer_epoch and t.previous_producer_id == self.producer_id
        if tv2 and t.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return t.last_producer_epoch == self.producer_epoch and t.producer_id == self.producer_id
        return t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id

