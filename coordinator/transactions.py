"""The transaction coordinator: Kafka's TransactionCoordinator as a non-blocking state machine.

Protocol (who does what)
========================
::

    producer / owner                   coordinator (this class)                    transaction state
    ----------------                   ------------------------                    -----------------
    init_producer_id(tid, timeout) ──▶ new id: producer id from ``producer_ids``,  (none) ─▶ Empty e=0
                                       epoch 0; known id: epoch + 1 (a new
                                       producer id once the epoch is exhausted)
                                       Ongoing: fence (epoch + 1), abort it,       Ongoing ─▶ PrepareAbort
                                  ◀──  CONCURRENT_TRANSACTIONS; the retry bumps
                                       once more (old epoch + 2)
    add_partitions(tid, pid, e, tps) ▶ union of the partitions (also            Empty/Complete*/Ongoing
                                       AddOffsetsToTxn's __consumer_offsets       ─▶ Ongoing
                                       partition); already there: no write
    end_txn(tid, pid, e, commit)   ──▶ TV1: epoch kept; TV2: epoch + 1            Ongoing ─▶ Prepare{Commit,Abort}
                                  ◀──  NONE (+ TV2: the id and epoch for the
                                       next transaction); owner sends WriteMarkers
    owner: markers all written     ──▶ complete(tid)                             Prepare* ─▶ Complete*
    owner, every 10 s              ──▶ abort_timed_out(): Ongoing past its       Ongoing ─▶ PrepareAbort
                                       timeout is fenced and aborted
    owner, every hour              ──▶ expire(): Empty/Complete* idle for        ─▶ Dead, then removed
                                       transactional.id.expiration.ms
    describe(tids), list(...)      ──▶ DescribeTransactions, ListTransactions (no state change)

Two-phase writes. Nothing here does I/O. A call that changes a transactional id's state
returns a result whose ``persist`` is the record the owner must write to
``__transaction_state`` (acks=all) *before answering*; until the owner reports back the
transition is pending, and other requests for that id get CONCURRENT_TRANSACTIONS, as in
Kafka::

    r = coord.end_txn("t", pid, epoch, commit=True)
    if r.persist is not None:
        try:
            write(r.persist)                            # key: transactional id; value None = tombstone
        except KafkaSimError as exc:
            r = coord.persisted(r.persist, exc)         # the append error, mapped as Kafka maps it
        else:
            r = coord.persisted(r.persist)              # the final answer, same result type
    answer(r)                                           # r.error / r.error_code, r.producer_id, ...
    if r.markers is not None:
        send(r.markers)                                 # WriteTxnMarkers to every partition's leader
        ...                                             # once every partition acknowledged:
        step = coord.complete("t")                      # persist Complete*, then coord.persisted(step.persist)

A WriteMarkers with no partitions (a TV2 abort of an empty transaction) is complete at once:
call ``complete`` without sending anything.

Results (one small frozen type per call; every one has ``error`` — a kafkasim
:class:`~kafkasim.errors.BrokerResponseError` instance or None — ``error_code``,
``persist`` and ``markers``):

=======================  =========================================  ========================================
call                     result                                      answer fields
=======================  =========================================  ========================================
``init_producer_id``     :class:`InitProducerIdResult`               producer_id, producer_epoch
``add_partitions``       :class:`AddPartitionsResult`                –
``verify_partitions``    :class:`VerifyPartitionsResult`             per-partition error (never persists)
``end_txn``              :class:`EndTxnResult`                       producer_id, producer_epoch (EndTxn v5)
``complete``             :class:`TxnStep`                            transactional_id
``abort_timed_out``      list of :class:`TxnStep`                    transactional_id (markers after persist)
``expire``               list of :class:`TxnStep`                    transactional_id (persist = tombstone)
``tick``                 list of :class:`TxnStep`                    the two periodic tasks when due
``persisted``            the pending call's result type              final answer (+ markers)
``load``                 list of :class:`WriteMarkers`               markers to re-send for Prepare*
``describe`` / ``list``  :class:`TransactionDescription` list /      –
                         :class:`ListTransactionsResult`
=======================  =========================================  ========================================

Effects are plain data: :class:`Persist` (``transactional_id``, ``value`` — a
:class:`~kafkasim.coordinator.txn_metadata.TxnTransitMetadata`, or None for a tombstone —
``coordinator_epoch``) and :class:`WriteMarkers` (``transactional_id``, ``producer_id``,
``producer_epoch``, ``commit``, ``partitions``, ``coordinator_epoch``, ``transaction_version``).

Versions. ``version`` is the request's API version, used only for Kafka's downgrade of
PRODUCER_FENCED (90) to INVALID_PRODUCER_EPOCH (47): InitProducerId < 4, AddPartitionsToTxn
/ AddOffsetsToTxn / EndTxn < 2; None means a current version (no downgrade).
``client_txn_version`` is the client's transaction version: 0 or 1 (TV1, EndTxn ≤ v4) or 2
(KIP-890 TV2, EndTxn v5: every EndTxn bumps the epoch, an abort is valid from Empty and
Complete*, a retry is recognised by epoch − 1, and an exhausted epoch rolls over to a new
producer id at Complete*). ``transaction_version`` (constructor) is the server's finalized
level, used for the aborts the coordinator starts itself (fence, timeout); it becomes the
id's transaction version and that of the markers, as in Kafka. It defaults to 1 because
kafkasim does not advertise TV2 to clients yet.

Markers in flight. As in Kafka, once a Prepare* record is written the coordinator prepares
Complete* at once (``persisted`` hands out the markers with Complete* pending), so every
EndTxn for the id gets CONCURRENT_TRANSACTIONS until ``complete`` is persisted, whatever its
result: the pending check comes before the state check. Kafka's own unit tests for
"PrepareCommit + ABORT → INVALID_TXN_STATE" use a Prepare* state with nothing pending, which
in Kafka exists only between the append callback and the marker callback; ``persisted``
does both under one lock, so here that window does not exist.

Differences from Kafka: one coordinator epoch for all ids (``coordinator_epoch``, set by the
owner); no loading/ownership checks (COORDINATOR_LOAD_IN_PROGRESS and NOT_COORDINATOR are the
owner's); a TV2 fence of an epoch bumped to Short.MaxValue aborts without a second bump
(Kafka would overflow the int16); the fence and the abort it starts (InitProducerId on an
Ongoing id, the timeout abort) run under one lock, so Kafka's re-read between them — where
its ``endTransaction`` answers PRODUCER_FENCED if the epoch moved past the fenced one — has
nothing to catch here (the check is kept).

Determinism: time comes only from the injected clock, producer ids only from
``producer_ids``; ids are visited in sorted order.

Thread-safety: every public method runs under one re-entrant lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping, Optional, Sequence

from kafkasim.clock import Clock
from kafkasim.coordinator.txn_metadata import (
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TV_1, TransactionMetadata, TxnState, TxnTransitMetadata,
    MAX_PRODUCER_EPOCH, is_epoch_exhausted, supports_epoch_bump,
)
from kafkasim.errors import (
    BrokerResponseError, ConcurrentTransactionsError, CoordinatorNotAvailableError, IllegalStateError,
    InvalidProducerEpochError, InvalidProducerIdMappingError, InvalidRequestError,
    InvalidTransactionTimeoutError, InvalidTxnStateError, KafkaStorageError,
    NotCoordinatorError, NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
    NotLeaderOrFollowerError, ProducerFencedError, RecordBatchTooLargeError, RecordTooLargeError,
    RequestTimedOutError, TransactionAbortableError, TransactionalIdNotFoundError,
    UnknownServerError, UnknownTopicOrPartitionError,
)
from kafkasim.types import TopicPartition

__all__ = [
    "TransactionCoordinator", "Persist", "WriteMarkers", "InitProducerIdResult", "AddPartitionsResult",
    "VerifyPartitionsResult", "EndTxnResult", "TxnStep", "TransactionDescription", "TransactionListing",
    "ListTransactionsResult", "partition_for",
    "DEFAULT_TRANSACTION_MAX_TIMEOUT_MS", "DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS",
    "DEFAULT_ABORT_TIMED_OUT_INTERVAL_MS", "DEFAULT_REMOVE_EXPIRED_INTERVAL_MS",
    "DEFAULT_TXN_STATE_PARTITIONS",
]

DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000            # transaction.max.timeout.ms
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000    # transactional.id.expiration.ms
DEFAULT_ABORT_TIMED_OUT_INTERVAL_MS = 10_000            # transaction.abort.timed.out.transaction.cleanup.interval.ms
DEFAULT_REMOVE_EXPIRED_INTERVAL_MS = 3_600_000          # transaction.remove.expired.transaction.cleanup.interval.ms
DEFAULT_TXN_STATE_PARTITIONS = 50                       # transaction.state.log.num.partitions

_FINISHED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
_PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


def partition_for(transactional_id: str, num_partitions: int = DEFAULT_TXN_STATE_PARTITIONS) -> int:
    """The ``__transaction_state`` partition of ``transactional_id``: Java's ``String.hashCode``
    (over UTF-16 code units), made non-negative as Kafka's ``Utils.abs`` (MIN_VALUE → 0), mod
    ``num_partitions``. Example: ``partition_for("my-txn") == 45``."""
    h = 0
    data = transactional_id.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    return (0 if h == -0x80000000 else abs(h)) % num_partitions


# ---------------------------------------------------------------------- effects
@dataclass(frozen=True)
class Persist:
    """Write this record to ``__transaction_state`` (key: the transactional id) before answering;
    ``value`` None is a tombstone (the id expired)."""

    transactional_id: str
    value: Optional[TxnTransitMetadata]
    coordinator_epoch: int


@dataclass(frozen=True)
class WriteMarkers:
    """Write a COMMIT or ABORT control record for this producer to each partition (sorted)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]
    coordinator_epoch: int
    transaction_version: int


# ---------------------------------------------------------------------- results
@dataclass(frozen=True)
class _Result:
    error: Optional[BrokerResponseError] = None
    persist: Optional[Persist] = None
    markers: Optional[WriteMarkers] = None

    @property
    def error_code(self) -> int:
        """Kafka's error code (0 for none)."""
        return 0 if self.error is None else int(self.error.errno)

    @property
    def pending(self) -> bool:
        """True while the owner still has to write ``persist`` and call ``persisted``."""
        return self.persist is not None


@dataclass(frozen=True)
class InitProducerIdResult(_Result):
    """InitProducerId's answer: the producer id and epoch to use (-1/-1 on error)."""

    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class AddPartitionsResult(_Result):
    """AddPartitionsToTxn's (and AddOffsetsToTxn's) answer: one error for all the partitions."""


@dataclass(frozen=True)
class VerifyPartitionsResult(_Result):
    """AddPartitionsToTxn v4+ verifyOnly: ``partitions`` maps each partition to None (in the
    transaction) or TRANSACTION_ABORTABLE; ``error`` is set instead when the whole check failed."""

    partitions: Mapping[TopicPartition, Optional[BrokerResponseError]] = field(default_factory=dict)


@dataclass(frozen=True)
class EndTxnResult(_Result):
    """EndTxn's answer; ``producer_id``/``producer_epoch`` are what the client uses next (v5)."""

    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class TxnStep(_Result):
    """A step the coordinator takes itself (complete, timeout abort, expiration)."""

    transactional_id: str = ""


@dataclass(frozen=True)
class TransactionDescription:
    """DescribeTransactions' entry for one id (``state`` is Kafka's name; -1 start when none)."""

    transactional_id: str
    error: Optional[BrokerResponseError] = None
    state: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    topic_partitions: tuple[TopicPartition, ...] = ()

    @property
    def error_code(self) -> int:
        return 0 if self.error is None else int(self.error.errno)


@dataclass(frozen=True)
class TransactionListing:
    """ListTransactions' entry for one id."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class ListTransactionsResult:
    """ListTransactions' answer: the matching ids (sorted) and the state filters Kafka does not know."""

    transactions: tuple[TransactionListing, ...]
    unknown_state_filters: tuple[str, ...] = ()


@dataclass
class _Pending:
    """A write the owner has not reported yet, and how to finish the request once it has."""

    persist: Persist
    kind: str                    # "init" | "fence" | "add" | "end" | "complete" | "dead"
    version: Optional[int] = None
    is_epoch_fence: bool = False
    commit: bool = False


# append error (of the __transaction_state write) -> what the client is told (Kafka's appendTransactionToLog)
_APPEND_ERRORS: dict[type, type] = {
    UnknownTopicOrPartitionError: CoordinatorNotAvailableError,
    NotEnoughReplicasError: CoordinatorNotAvailableError,
    NotEnoughReplicasAfterAppendError: CoordinatorNotAvailableError,
    RequestTimedOutError: CoordinatorNotAvailableError,
    NotLeaderOrFollowerError: NotCoordinatorError,
    KafkaStorageError: NotCoordinatorError,
    RecordTooLargeError: UnknownServerError,
    RecordBatchTooLargeError: UnknownServerError,
}


def _append_error(exc: BaseException) -> BrokerResponseError:
    for src, dst in _APPEND_ERRORS.items():
        if isinstance(exc, src):
            return dst(f"writing to __transaction_state failed: {exc}")
    if isinstance(exc, BrokerResponseError):
        return exc
    return UnknownServerError(f"writing to __transaction_state failed: {exc!r}")


def _for_version(err: Optional[BrokerResponseError], version: Optional[int], first_fenced: int):
    """PRODUCER_FENCED → INVALID_PRODUCER_EPOCH for request versions before ``first_fenced``."""
    if isinstance(err, ProducerFencedError) and version is not None and version < first_fenced:
        return InvalidProducerEpochError(str(err))
    return err


_INIT_FENCED_FROM = 4        # InitProducerId v4 added PRODUCER_FENCED
_ADD_FENCED_FROM = 2         # AddPartitionsToTxn / AddOffsetsToTxn v2
_END_FENCED_FROM = 2         # EndTxn v2


class TransactionCoordinator:
    """Runs the transactions of every transactional id it owns (see the module docstring)."""

    def __init__(self, clock: Clock, producer_ids: Callable[[], int], *,
                 transaction_max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
                 transactional_id_expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
                 abort_timed_out_interval_ms: int = DEFAULT_ABORT_TIMED_OUT_INTERVAL_MS,
                 remove_expired_interval_ms: int = DEFAULT_REMOVE_EXPIRED_INTERVAL_MS,
                 transaction_version: int = 1, coordinator_epoch: int = 0) -> None:
        if transaction_version not in (0, 1, 2):
            raise ValueError(f"transaction_version must be 0, 1 or 2, got {transaction_version!r}")
        self.clock = clock
        self._producer_ids = producer_ids
        self.transaction_max_timeout_ms = transaction_max_timeout_ms
        self.transactional_id_expiration_ms = transactional_id_expiration_ms
        self.abort_timed_out_interval_ms = abort_timed_out_interval_ms
        self.remove_expired_interval_ms = remove_expired_interval_ms
        self.transaction_version = transaction_version
        self.coordinator_epoch = coordinator_epoch
        self._lock = threading.RLock()
        self._txns: dict[str, TransactionMetadata] = {}
        self._pending: dict[str, _Pending] = {}
        now = clock.now_ms()
        self._next_abort_check = now + abort_timed_out_interval_ms
        self._next_expire_check = now + remove_expired_interval_ms

    # ------------------------------------------------------------------ helpers
    def _now(self) -> int:
        return self.clock.now_ms()

    def metadata(self, transactional_id: str) -> Optional[TransactionMetadata]:
        """The live metadata of ``transactional_id`` (for tests and the owner's views; do not mutate)."""
        with self._lock:
            return self._txns.get(transactional_id)

    def _stage(self, md: TransactionMetadata, transit: Optional[TxnTransitMetadata], kind: str,
               **extra) -> Persist:
        p = Persist(md.transactional_id, transit, self.coordinator_epoch)
        self._pending[md.transactional_id] = _Pending(p, kind, **extra)
        return p

    def _markers(self, md: TransactionMetadata, commit: bool) -> WriteMarkers:
        return WriteMarkers(md.transactional_id, md.producer_id, md.producer_epoch, commit,
                            tuple(sorted(md.topic_partitions)), self.coordinator_epoch,
                            md.client_transaction_version)

    # ------------------------------------------------------------------ InitProducerId
    def init_producer_id(self, transactional_id: Optional[str], txn_timeout_ms: int,
                         expected_producer_id: int = NO_PRODUCER_ID, expected_epoch: int = NO_PRODUCER_EPOCH,
                         *, version: Optional[int] = None) -> InitProducerIdResult:
        """InitProducerId. ``expected_producer_id``/``expected_epoch`` are v3+'s (KIP-360), -1 when absent."""
        with self._lock:
            r = self._init_producer_id(transactional_id, txn_timeout_ms, expected_producer_id, expected_epoch,
                                       version)
            return replace(r, error=_for_version(r.error, version, _INIT_FENCED_FROM))

    def _init_producer_id(self, tid, timeout_ms, expected_pid, expected_epoch, version) -> InitProducerIdResult:
        if tid is None:                                   # an idempotent producer: no state at all
            return InitProducerIdResult(producer_id=self._producer_ids(), producer_epoch=0)
        if tid == "":
            return InitProducerIdResult(InvalidRequestError("InitProducerId: empty transactional id"))
        if (expected_pid == NO_PRODUCER_ID) != (expected_epoch == NO_PRODUCER_EPOCH):
            return InitProducerIdResult(InvalidRequestError(
                f"InitProducerId {tid!r}: producer id {expected_pid} and epoch {expected_epoch} must both be "
                "set or both be -1"))
        if not 0 < timeout_ms <= self.transaction_max_timeout_ms:
            return InitProducerIdResult(InvalidTransactionTimeoutError(
                f"InitProducerId {tid!r}: transaction timeout {timeout_ms} ms is not in "
                f"(0, {self.transaction_max_timeout_ms}] (transaction.max.timeout.ms)"))
        now = self._now()
        md = self._txns.get(tid)
        if md is None:
            md = self._txns[tid] = TransactionMetadata(tid, self._producer_ids(), txn_timeout_ms=timeout_ms,
                                                       txn_last_update_timestamp=now)
        expected = None if expected_pid == NO_PRODUCER_ID else (expected_pid, expected_epoch)
        if md.pending_transition_in_progress:
            return InitProducerIdResult(ConcurrentTransactionsError(
                f"transactional id {tid!r}: a transition to {md.pending_state.kafka_name} is in progress"))
        if expected is not None and not (
                md.producer_epoch == NO_PRODUCER_EPOCH or expected_pid == md.producer_id
                or (expected_pid == md.previous_producer_id and is_epoch_exhausted(expected_epoch))):
            return InitProducerIdResult(ProducerFencedError(
                f"transactional id {tid!r}: producer id {expected_pid} (epoch {expected_epoch}) is not "
                f"the current producer id {md.producer_id}"))
        if md.state in _PREPARED:
            return InitProducerIdResult(ConcurrentTransactionsError(
                f"transactional id {tid!r}: the transaction is {md.state.kafka_name}; retry when it completes"))
        if md.state in _FINISHED:
            if md.is_producer_epoch_exhausted and (expected is None or expected_epoch == md.producer_epoch):
                transit = md.prepare_producer_id_rotation(self._producer_ids(), timeout_ms, now, expected is not None)
            else:
                try:
                    transit = md.prepare_increment_producer_epoch(
                        timeout_ms, None if expected is None else expected_epoch, now)
                except ProducerFencedError as exc:
                    return InitProducerIdResult(exc)
            return InitProducerIdResult(persist=self._stage(md, transit, "init", version=version))
        if md.state == TxnState.ONGOING:
            # fence the producer (epoch + 1), abort its transaction, and let the client retry
            fence = md.prepare_fence_producer_epoch()
            r = self._end(md, md.producer_id, fence.producer_epoch, commit=False, from_client=False,
                          client_tv=self.transaction_version, kind="fence", version=version)
            return InitProducerIdResult(r.error, r.persist)
        raise IllegalStateError(f"transactional id {tid!r} is in state {md.state.kafka_name}, which it "
                                "should never have reached")

    # ------------------------------------------------------------------ AddPartitionsToTxn
    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Iterable[TopicPartition], *, version: Optional[int] = None,
                       client_txn_version: Optional[int] = None) -> AddPartitionsResult:
        """AddPartitionsToTxn (v0–3, or v5 on a client's behalf), also AddOffsetsToTxn with the
        group's ``__consumer_offsets`` partition. ``client_txn_version`` None keeps the id's."""
        with self._lock:
            r = self._add_partitions(transactional_id, producer_id, epoch, frozenset(partitions), version,
                                     client_txn_version)
            return replace(r, error=_for_version(r.error, version, _ADD_FENCED_FROM))

    def _check_producer(self, tid: str, producer_id: int, epoch: int):
        """The metadata, or the error of checks 1–5 shared by AddPartitions and VerifyPartitions."""
        if not tid:
            return InvalidRequestError("empty transactional id")
        md = self._txns.get(tid)
        if md is None:
            return InvalidProducerIdMappingError(f"transactional id {tid!r} is unknown")
        if md.producer_id != producer_id:
            return InvalidProducerIdMappingError(
                f"transactional id {tid!r}: producer id {producer_id} is not its producer id {md.producer_id}")
        if md.producer_epoch != epoch:
            return ProducerFencedError(
                f"transactional id {tid!r}: epoch {epoch} is not the current epoch {md.producer_epoch}")
        return md

    def _add_partitions(self, tid, producer_id, epoch, partitions, version, client_tv) -> AddPartitionsResult:
        md = self._check_producer(tid, producer_id, epoch)
        if isinstance(md, BrokerResponseError):
            return AddPartitionsResult(md)
        if md.pending_transition_in_progress or md.state in _PREPARED:
            return AddPartitionsResult(ConcurrentTransactionsError(
                f"transactional id {tid!r}: the transaction is "
                f"{(md.pending_state or md.state).kafka_name}; retry when it completes"))
        if md.state == TxnState.ONGOING and partitions <= md.topic_partitions:
            return AddPartitionsResult()                  # already in the transaction: no write
        transit = md.prepare_add_partitions(partitions, self._now(), client_tv)
        return AddPartitionsResult(persist=self._stage(md, transit, "add", version=version))

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Iterable[TopicPartition]) -> VerifyPartitionsResult:
        """AddPartitionsToTxn v4+ with verifyOnly (a partition leader checking a transactional
        produce): never writes."""
        with self._lock:
            md = self._check_producer(transactional_id, producer_id, epoch)
            if isinstance(md, BrokerResponseError):
                return VerifyPartitionsResult(md)
            if md.state in _PREPARED:
                return VerifyPartitionsResult(ConcurrentTransactionsError(
                    f"transactional id {transactional_id!r}: the transaction is {md.state.kafka_name}"))
            return VerifyPartitionsResult(partitions={
                tp: None if tp in md.topic_partitions else TransactionAbortableError(
                    f"transactional id {transactional_id!r}: partition {tp} is not in the transaction")
                for tp in partitions})

    # ------------------------------------------------------------------ EndTxn
    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                client_txn_version: int = TV_1, *, version: Optional[int] = None) -> EndTxnResult:
        """EndTxn: commit or abort. ``client_txn_version`` 2 (EndTxn v5) takes KIP-890's path."""
        with self._lock:
            if not transactional_id:
                return EndTxnResult(InvalidRequestError("EndTxn: empty transactional id"))
            md = self._txns.get(transactional_id)
            if md is None:
                return EndTxnResult(InvalidProducerIdMappingError(
                    f"transactional id {transactional_id!r} is unknown"))
            r = self._end(md, producer_id, epoch, commit, from_client=True, client_tv=client_txn_version,
                          kind="end", version=version)
            return replace(r, error=_for_version(r.error, version, _END_FENCED_FROM))

    def _end(self, md: TransactionMetadata, producer_id: int, epoch: int, commit: bool, *, from_client: bool,
             client_tv: int, kind: str, version: Optional[int]) -> EndTxnResult:
        tid = md.transactional_id
        tv2 = supports_epoch_bump(client_tv)
        is_fence = md.pending_state == TxnState.PREPARE_EPOCH_FENCE
        retry_on_bump = tv2 and not is_fence and md.producer_epoch == epoch + 1
        retry_on_overflow = tv2 and not is_fence and md.previous_producer_id == producer_id \
            and epoch == MAX_PRODUCER_EPOCH - 1 and md.producer_epoch == 0
        is_retry = retry_on_bump or retry_on_overflow
        if not tv2 or is_fence:
            # TV1 (and any fence): the client must hold the current epoch; the coordinator's own
            # abort may carry the fenced (higher) epoch
            valid_epoch = (not from_client or epoch == md.producer_epoch) and epoch >= md.producer_epoch
        elif md.state in (TxnState.ONGOING, TxnState.EMPTY):
            valid_epoch = epoch == md.producer_epoch
        elif md.state in _PREPARED:
            valid_epoch = retry_on_bump
        else:
            valid_epoch = is_retry or epoch == md.producer_epoch
        result = "COMMIT" if commit else "ABORT"

        def bad_state() -> EndTxnResult:
            return EndTxnResult(InvalidTxnStateError(
                f"transactional id {tid!r}: cannot {result} in state {md.state.kafka_name}"
                + (" (a retry)" if is_retry else "")))

        if md.producer_id != producer_id and not retry_on_overflow:
            return EndTxnResult(InvalidProducerIdMappingError(
                f"transactional id {tid!r}: producer id {producer_id} is not its producer id {md.producer_id}"))
        if not valid_epoch:
            return EndTxnResult(ProducerFencedError(
                f"transactional id {tid!r}: epoch {epoch} is not valid for {result} in state "
                f"{md.state.kafka_name} (current epoch {md.producer_epoch})"))
        if md.pending_transition_in_progress and not is_fence:
            return EndTxnResult(ConcurrentTransactionsError(
                f"transactional id {tid!r}: a transition to {md.pending_state.kafka_name} is in progress"))
        state = md.state
        if state == TxnState.ONGOING:
            return self._prepare_end(md, commit, epoch, client_tv, is_fence, False, kind, version)
        if state in _PREPARED:
            same = (state == TxnState.PREPARE_COMMIT) == commit
            return EndTxnResult(ConcurrentTransactionsError(
                f"transactional id {tid!r}: already {state.kafka_name}")) if same else bad_state()
        if state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            same = (state == TxnState.COMPLETE_COMMIT) == commit
            if not tv2:
                return EndTxnResult(producer_id=md.producer_id, producer_epoch=md.producer_epoch) if same \
                    else bad_state()
            if is_retry:
                return EndTxnResult(producer_id=md.producer_id, producer_epoch=md.producer_epoch) if same \
                    else bad_state()
            return bad_state() if commit else self._prepare_end(md, False, epoch, client_tv, False, True, kind,
                                                                version)
        if state == TxnState.EMPTY:
            if tv2 and not commit:
                return self._prepare_end(md, False, epoch, client_tv, False, True, kind, version)
            return bad_state()
        raise IllegalStateError(f"transactional id {tid!r} is in state {state.kafka_name}, which it should "
                                "never have reached")

    def _prepare_end(self, md: TransactionMetadata, commit: bool, epoch: int, client_tv: int, is_fence: bool,
                     no_partition_added: bool, kind: str, version: Optional[int]) -> EndTxnResult:
        next_pid = NO_PRODUCER_ID
        if supports_epoch_bump(client_tv) and not is_fence and md.is_producer_epoch_exhausted:
            next_pid = self._producer_ids()
        if is_fence:
            # the fence is written as PrepareAbort with the bumped epoch (never as PrepareEpochFence);
            # the bump is made in memory now, so a failed write does not bump again
            md.pending_state = None
            md.producer_epoch = epoch
            md.last_producer_epoch = NO_PRODUCER_EPOCH
            if md.producer_epoch >= MAX_PRODUCER_EPOCH:
                client_tv = min(client_tv, TV_1)          # no second bump past Short.MaxValue
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        transit = md.prepare_abort_or_commit(state, client_tv, next_pid, self._now(), no_partition_added)
        return EndTxnResult(persist=self._stage(md, transit, kind, version=version, is_epoch_fence=is_fence,
                                                commit=commit))

    # ------------------------------------------------------------------ the owner's reports
    def persisted(self, persist: Persist, error: Optional[BaseException] = None):
        """Report that ``persist`` was written (``error`` None) or failed; returns the final result
        of the call that produced it (same type), with ``markers`` to send after a Prepare*."""
        with self._lock:
            tid = persist.transactional_id
            p = self._pending.get(tid)
            if p is None or p.persist is not persist:
                raise IllegalStateError(f"transactional id {tid!r}: no pending write {persist}")
            del self._pending[tid]
            md = self._txns[tid]
            if error is not None:
                return self._persist_failed(md, p, _append_error(error))
            if p.kind == "dead":
                if md.pending_state == TxnState.DEAD:
                    del self._txns[tid]
                return TxnStep(transactional_id=tid)
            md.complete_transition(persist.value)
            if p.kind == "init":
                return InitProducerIdResult(producer_id=md.producer_id, producer_epoch=md.producer_epoch)
            if p.kind == "add":
                return AddPartitionsResult()
            if p.kind == "complete":
                return TxnStep(transactional_id=tid)
            # a Prepare* is written: prepare Complete* now (sent by complete()), send the markers
            markers = self._markers(md, p.commit)
            done = md.prepare_complete(self._now())
            self._pending[tid] = _Pending(Persist(tid, done, self.coordinator_epoch), "complete")
            if p.kind == "end":
                return EndTxnResult(producer_id=done.producer_id, producer_epoch=done.producer_epoch,
                                    markers=markers)
            if p.kind == "fence":
                return InitProducerIdResult(_for_version(ConcurrentTransactionsError(
                    f"transactional id {tid!r}: its ongoing transaction is being aborted; retry"),
                    p.version, _INIT_FENCED_FROM), markers=markers)
            return TxnStep(transactional_id=tid, markers=markers)          # "timeout"

    def _persist_failed(self, md: TransactionMetadata, p: _Pending, err: BrokerResponseError):
        md.abort_transition()
        if p.is_epoch_fence:
            md.has_failed_epoch_fence = True
        if p.kind == "init":
            return InitProducerIdResult(_for_version(err, p.version, _INIT_FENCED_FROM))
        if p.kind == "fence":
            return InitProducerIdResult(_for_version(err, p.version, _INIT_FENCED_FROM))
        if p.kind == "add":
            return AddPartitionsResult(_for_version(err, p.version, _ADD_FENCED_FROM))
        if p.kind == "end":
            return EndTxnResult(_for_version(err, p.version, _END_FENCED_FROM))
        if p.kind == "complete":
            # keep the Complete* ready: the owner retries complete() (Kafka retries the append)
            md.pending_state = p.persist.value.state
            self._pending[md.transactional_id] = _Pending(p.persist, "complete")
        return TxnStep(err, transactional_id=md.transactional_id)

    def complete(self, transactional_id: str) -> TxnStep:
        """Every marker of the Prepare* transaction is written: returns the Complete* record to
        persist (then report it with :meth:`persisted`)."""
        with self._lock:
            md = self._txns.get(transactional_id)
            p = self._pending.get(transactional_id)
            if md is None or p is None or p.kind != "complete":
                state = "unknown" if md is None else md.state.kafka_name
                raise IllegalStateError(f"transactional id {transactional_id!r} has no transaction waiting "
                                        f"for its markers (state {state})")
            return TxnStep(persist=p.persist, transactional_id=transactional_id)

    # ------------------------------------------------------------------ periodic tasks
    def abort_timed_out(self) -> list[TxnStep]:
        """Fence and abort every Ongoing transaction (no transition pending) older than its timeout;
        each step's ``persist`` is the PrepareAbort record, and ``persisted`` gives its markers."""
        with self._lock:
            now = self._now()
            steps = []
            for tid in sorted(self._txns):
                md = self._txns[tid]
                if md.state != TxnState.ONGOING or md.pending_transition_in_progress \
                        or md.txn_start_timestamp + md.txn_timeout_ms >= now:
                    continue
                fence = md.prepare_fence_producer_epoch()
                r = self._end(md, md.producer_id, fence.producer_epoch, commit=False, from_client=False,
                              client_tv=self.transaction_version, kind="timeout", version=None)
                steps.append(TxnStep(r.error, r.persist, transactional_id=tid))
            return steps

    def expire(self) -> list[TxnStep]:
        """transactional.id.expiration: every Empty/Complete* id idle for the expiration time gets
        a tombstone to persist; ``persisted`` then removes it."""
        with self._lock:
            cutoff = self._now() - self.transactional_id_expiration_ms
            steps = []
            for tid in sorted(self._txns):
                md = self._txns[tid]
                if md.state.is_expiration_allowed and not md.pending_transition_in_progress \
                        and md.txn_last_update_timestamp <= cutoff:
                    md.prepare_dead()
                    steps.append(TxnStep(persist=self._stage(md, None, "dead"), transactional_id=tid))
            return steps

    def tick(self) -> list[TxnStep]:
        """Run :meth:`abort_timed_out` and :meth:`expire` when their intervals have passed on the clock."""
        with self._lock:
            now, steps = self._now(), []
            if now >= self._next_abort_check:
                self._next_abort_check = now + self.abort_timed_out_interval_ms
                steps += self.abort_timed_out()
            if now >= self._next_expire_check:
                self._next_expire_check = now + self.remove_expired_interval_ms
                steps += self.expire()
            return steps

    # ------------------------------------------------------------------ loading
    def load(self, records: Mapping[str, Optional[TxnTransitMetadata]]) -> list[WriteMarkers]:
        """Restore ids from the last ``__transaction_state`` value of each (None: a tombstone, the
        id is dropped). Transactions found in Prepare* get their markers re-sent (returned) and
        complete through :meth:`complete` as usual."""
        with self._lock:
            out = []
            for tid in sorted(records):
                value = records[tid]
                self._pending.pop(tid, None)
                if value is None:
                    self._txns.pop(tid, None)
                    continue
                md = TransactionMetadata.from_transit(tid, value)
                md.last_producer_epoch = NO_PRODUCER_EPOCH      # in memory only; lost on load, as Kafka
                self._txns[tid] = md
                if md.state in _PREPARED:
                    out.append(self._markers(md, md.state == TxnState.PREPARE_COMMIT))
                    done = md.prepare_complete(self._now())
                    self._pending[tid] = _Pending(Persist(tid, done, self.coordinator_epoch), "complete")
            return out

    # ------------------------------------------------------------------ admin
    def describe(self, transactional_ids: Sequence[str]) -> list[TransactionDescription]:
        """DescribeTransactions, one entry per id in the order given."""
        with self._lock:
            out = []
            for tid in transactional_ids:
                md = self._txns.get(tid)
                if not tid:
                    out.append(TransactionDescription(tid, InvalidRequestError("empty transactional id")))
                elif md is None or TxnState.DEAD in (md.state, md.pending_state):
                    out.append(TransactionDescription(tid, TransactionalIdNotFoundError(
                        f"transactional id {tid!r} is not known to this coordinator")))
                else:
                    out.append(TransactionDescription(
                        tid, None, md.state.kafka_name, md.producer_id, md.producer_epoch, md.txn_timeout_ms,
                        md.txn_start_timestamp, tuple(sorted(md.topic_partitions))))
            return out

    def list(self, states_filter: Iterable[str] = (), producer_id_filter: Iterable[int] = (),
             duration_filter_ms: int = -1) -> ListTransactionsResult:
        """ListTransactions: ids in any of the named states (all if none), with any of the producer
        ids (all if none), open longer than ``duration_filter_ms`` (if >= 0); never expiring ids."""
        with self._lock:
            names = list(states_filter)
            states = {TxnState.from_name(n) for n in names} - {None}
            unknown = tuple(n for n in names if TxnState.from_name(n) is None)
            pids = set(producer_id_filter)
            now = self._now()
            rows = []
            for tid in sorted(self._txns):
                md = self._txns[tid]
                if TxnState.DEAD in (md.state, md.pending_state):
                    continue
                if pids and md.producer_id not in pids:
                    continue
                if names and md.state not in states:
                    continue
                if duration_filter_ms >= 0 and now - md.txn_start_timestamp <= duration_filter_ms:
                    continue
                rows.append(TransactionListing(tid, md.producer_id, md.state.kafka_name))
            return ListTransactionsResult(tuple(rows), unknown)
