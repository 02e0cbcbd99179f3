"""``kafka-transactions.sh`` over the broker API: list, describe, describe-producers, abort,
find-hanging (Kafka's ``TransactionsCommand``).

Rows carry Kafka's columns, with Kafka's values (``None`` printed where Kafka prints
``None``: no open transaction). What each does, as Kafka's tool:

- :func:`list_transactions`: every transactional id the coordinator knows, with its
  coordinator (broker id), producer id and state;
- :func:`describe`: one id's coordinator, producer id and epoch, state, timeout, start time
  and duration of the current transaction, partitions; an unknown id raises
  ``TransactionalIdNotFoundError`` and the command says "Failed to describe transaction state
  of transactional-id `T`: ...";
- :func:`describe_producers`: the active producers of one partition (the leader's replica,
  or ``broker_id``'s);
- :func:`abort`: an ABORT marker for a hanging transaction, named by its start offset
  (the producer is found with DescribeProducers; none open there: "Could not find any open
  transactions starting at offset O on partition T-P") or by producer id, epoch and
  coordinator epoch (a negative coordinator epoch is sent as 0, as Kafka does);
- :func:`find_hanging`: open transactions (DescribeProducers) whose last write is older than
  ``max_transaction_timeout_min`` (default 15, Kafka's) on partitions of ``topic`` (one
  ``partition``) or hosted by ``broker_id``, that the coordinator does not expect to finish:
  their producer id has no transactional id (ListTransactions), the id is unknown
  (DescribeTransactions), or its current transaction does not include the partition.

A failure raises :class:`TransactionsCommandError` carrying Kafka's message, or the library's
error for bad arguments. Pure functions of the broker's answers; thread-safe as the broker is.
"""

from __future__ import annotations

from typing import Optional

from kafkasim.errors import InvalidArgumentError, KafkaSimError, TransactionalIdNotFoundError
from kafkasim.types import TopicPartition

__all__ = ["list_transactions", "describe", "describe_producers", "abort", "find_hanging",
           "TransactionsCommandError", "MAX_TRANSACTION_TIMEOUT_MIN", "LIST_HEADERS", "DESCRIBE_HEADERS",
           "PRODUCERS_HEADERS", "HANGING_HEADERS"]

MAX_TRANSACTION_TIMEOUT_MIN = 15
"""``find-hanging --max-transaction-timeout`` default, in minutes (Kafka's)."""

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")
PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)")


class TransactionsCommandError(InvalidArgumentError):
    """A ``kafkasim transactions`` command failed; the message is Kafka's tool's."""


def _fail(message: str, exc: Optional[BaseException] = None):
    if exc is not None:
        message = f"{message}: {exc}. Enable debug logging for additional detail."
    raise TransactionsCommandError(message) from exc


def _coordinator(broker) -> int:
    return int(getattr(broker, "broker_id", 0))


def list_transactions(broker) -> list[dict]:
    """``list``: one row per transactional id."""
    try:
        result = broker.list_transactions()
    except KafkaSimError as exc:
        _fail("Failed to list transactions", exc)
    coordinator = _coordinator(broker)
    return [{"transactional_id": t.transactional_id, "coordinator": coordinator, "producer_id": t.producer_id,
             "transaction_state": t.state} for t in result.transactions]


def describe(broker, transactional_id: str, now_ms: int) -> dict:
    """``describe --transactional-id``: the id's current state (``now_ms`` gives the duration)."""
    try:
        (d,) = broker.describe_transactions([transactional_id])
        if d.error is not None:
            raise d.error
    except KafkaSimError as exc:
        _fail(f"Failed to describe transaction state of transactional-id `{transactional_id}`", exc)
    start = d.transaction_start_time_ms if d.transaction_start_time_ms >= 0 else None
    return {"coordinator_id": _coordinator(broker), "transactional_id": transactional_id,
            "producer_id": d.producer_id, "producer_epoch": d.producer_epoch, "transaction_state": d.state,
            "transaction_timeout_ms": d.transaction_timeout_ms, "current_transaction_start_time_ms": start,
            "transaction_duration_ms": None if start is None else now_ms - start,
            "topic_partitions": [f"{tp.topic}-{tp.partition}" for tp in d.topic_partitions]}


def _producers(broker, topic: str, partition: int, broker_id: Optional[int]):
    kw = {} if broker_id is None else {"node": broker_id}
    return broker.describe_producers(topic, partition, **kw)


def _row(state) -> dict:
    return {"producer_id": state.producer_id, "producer_epoch": state.producer_epoch,
            "latest_coordinator_epoch": state.coordinator_epoch, "last_sequence": state.last_sequence,
            "last_timestamp": state.last_timestamp,
            "current_transaction_start_offset": (state.current_txn_start_offset
                                                 if state.current_txn_start_offset >= 0 else None)}


def describe_producers(broker, topic: str, partition: int, broker_id: Optional[int] = None) -> list[dict]:
    """``describe-producers --topic --partition [--broker-id]``: one row per active producer."""
    try:
        states = _producers(broker, topic, partition, broker_id)
    except KafkaSimError as exc:
        where = "leader" if broker_id is None else f"broker {broker_id}"
        _fail(f"Failed to describe producers for partition {topic}-{partition} on {where}", exc)
    return [_row(s) for s in states]


def abort(broker, topic: str, partition: int, *, start_offset: Optional[int] = None,
          producer_id: Optional[int] = None, producer_epoch: Optional[int] = None,
          coordinator_epoch: Optional[int] = None) -> dict:
    """``abort``: write an ABORT marker for the transaction (see the module docstring); returns
    the spec written (topic, partition, producer id and epoch, coordinator epoch)."""
    if start_offset is None and producer_id is None:
        _fail("The transaction to abort must be identified either with --start-offset (for brokers on 3.0 "
              "or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)")
    tp = f"{topic}-{partition}"
    if start_offset is None:
        if producer_epoch is None:
            _fail("Missing required argument --producer-epoch")
        if coordinator_epoch is None:
            _fail("Missing required argument --coordinator-epoch")
        coordinator_epoch = max(coordinator_epoch, 0)   # -1: never had a marker; 0 is <= any epoch
    else:
        try:
            states = _producers(broker, topic, partition, None)
        except KafkaSimError as exc:
            _fail(f"Failed to validate producer state for partition {tp}", exc)
        found = [s for s in states if s.current_txn_start_offset >= 0 and s.current_txn_start_offset == start_offset]
        if not found:
            _fail(f"Could not find any open transactions starting at offset {start_offset} on partition {tp}")
        producer_id, producer_epoch = found[0].producer_id, found[0].producer_epoch
        coordinator_epoch = max(found[0].coordinator_epoch, 0)
    spec = {"topic": topic, "partition": partition, "producer_id": producer_id, "producer_epoch": producer_epoch,
            "coordinator_epoch": coordinator_epoch}
    try:
        broker.write_txn_marker(topic, partition, producer_id, producer_epoch, coordinator_epoch, False)
    except KafkaSimError as exc:
        _fail(f"Failed to abort transaction AbortTransactionSpec(topicPartition={tp}, producerId={producer_id}, "
              f"producerEpoch={producer_epoch}, coordinatorEpoch={coordinator_epoch})", exc)
    return spec


def _search_partitions(broker, topic: Optional[str], partition: Optional[int],
                       broker_id: Optional[int]) -> list[TopicPartition]:
    if topic is not None and partition is not None:
        return [TopicPartition(topic, partition)]
    topics = [topic] if topic is not None else broker.list_topics(include_internal=True)
    out = []
    for t in topics:
        try:
            desc = broker.describe_topic(t)
        except KafkaSimError as exc:
            _fail(f"Failed to describe {len(topics)} topics", exc)
        for p in desc["partitions"]:
            if broker_id is None or broker_id in p.get("replicas", [broker_id]):
                out.append(TopicPartition(t, p["partition"]))
    return out


def find_hanging(broker, now_ms: int, *, broker_id: Optional[int] = None, topic: Optional[str] = None,
                 partition: Optional[int] = None,
                 max_transaction_timeout_min: int = MAX_TRANSACTION_TIMEOUT_MIN) -> list[dict]:
    """``find-hanging``: the hanging transactions, one row each (see the module docstring)."""
    if topic is None and broker_id is None:
        _fail("The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search")
    if partition is not None and topic is None:
        _fail("The --partition argument requires --topic to be provided")
    limit_ms = max_transaction_timeout_min * 60_000
    candidates = []
    tps = _search_partitions(broker, topic, partition, broker_id)
    for tp in tps:
        try:
            states = _producers(broker, tp.topic, tp.partition, broker_id)
        except KafkaSimError as exc:
            _fail(f"Failed to describe producers for {len(tps)} partitions on broker "
                  f"{'Optional.empty' if broker_id is None else f'Optional[{broker_id}]'}", exc)
        candidates += [(tp, s) for s in states
                       if s.current_txn_start_offset >= 0 and now_ms - s.last_timestamp > limit_ms]
    hanging = []
    if candidates:
        pids = sorted({s.producer_id for _, s in candidates})
        try:
            listed = broker.list_transactions((), pids)
        except KafkaSimError as exc:
            _fail(f"Failed to list transactions for {len(pids)} producers", exc)
        tids = {t.producer_id: t.transactional_id for t in listed.transactions if t.producer_id in pids}
        descriptions = {}
        if tids:
            try:
                for d in broker.describe_transactions(sorted(set(tids.values()))):
                    if d.error is not None and not isinstance(d.error, TransactionalIdNotFoundError):
                        raise d.error
                    descriptions[d.transactional_id] = d if d.error is None else None
            except KafkaSimError as exc:
                _fail(f"Failed to describe {len(set(tids.values()))} transactions", exc)
        for tp, s in candidates:
            d = descriptions.get(tids.get(s.producer_id, ""))
            if d is None or tp not in d.topic_partitions:
                hanging.append((tp, s))
    return [{"topic": tp.topic, "partition": tp.partition, "producer_id": s.producer_id,
             "producer_epoch": s.producer_epoch, "coordinator_epoch": s.coordinator_epoch,
             "start_offset": s.current_txn_start_offset, "last_timestamp": s.last_timestamp,
             "duration_min": (now_ms - s.last_timestamp) // 60_000} for tp, s in hanging]
