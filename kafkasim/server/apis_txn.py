"""Handlers for the transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
TxnOffsetCommit, DescribeTransactions, ListTransactions (InitProducerId and FindCoordinator,
which serve idempotent producers and groups too, are in :mod:`kafkasim.server.apis_admin`).

Each is one call into the broker's transaction API (:mod:`kafkasim.broker.txn_api`), whose
errors carry Kafka's codes; the request's version is passed on where Kafka's answer depends
on it (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for older clients). Versions served:
AddPartitionsToTxn 0–3 (the client form; v4+ is broker to broker), AddOffsetsToTxn 0–4,
EndTxn 0–5, TxnOffsetCommit 0–5, DescribeTransactions 0, ListTransactions 0–1.

KIP-890 transaction version 2, which a client uses when ApiVersions finalizes
``transaction.version`` at 2 (:func:`kafkasim.server.apis_admin.advertised_features`), is
decided by the request's version, as Kafka's ``KafkaApis`` decides it: EndTxn v5 bumps the
epoch on every commit and abort and answers the producer id and epoch to use next;
TxnOffsetCommit v5 adds the group's ``__consumer_offsets`` partition to the transaction
itself (no AddOffsetsToTxn), as Produce v12 adds its partition (:mod:`kafkasim.server.apis_data`).
AddOffsetsToTxn v4, EndTxn v4 and TxnOffsetCommit v4 differ from v3 only in that the client
knows TRANSACTION_ABORTABLE.

Loop-thread coroutines; the broker calls run on the executor.
"""

from __future__ import annotations

from kafkasim.errors import KafkaSimError, OperationNotAttemptedError, UnknownTopicOrPartitionError
from kafkasim.server.api import api, error_code
from kafkasim.types import OffsetAndMetadata, TopicPartition

__all__: list[str] = []


def _partition_errors(broker, topics) -> dict:
    """``{(topic, partition): error}`` for the partitions a transaction cannot add (unknown
    topic or partition); empty when every one exists."""
    bad = {}
    for t in topics:
        for p in t.partitions:
            try:
                if not 0 <= p < broker.partition_count(t.name):
                    raise UnknownTopicOrPartitionError(f"{t.name}-{p}: no such partition")
            except KafkaSimError as exc:
                bad[(t.name, p)] = exc
    return bad


@api(24, "AddPartitionsToTxn", 0, 3)
async def add_partitions_to_txn(ctx, req):
    """One answer for every partition, as Kafka's coordinator gives; when some partition is
    unknown, those get UNKNOWN_TOPIC_OR_PARTITION and the rest OPERATION_NOT_ATTEMPTED."""
    body = req.body
    topics = body.v3_and_below_topics
    bad = await ctx.call(_partition_errors, ctx.broker, topics)
    codes: dict = {}
    if bad:
        skipped = error_code(OperationNotAttemptedError("another partition of the request is unknown"))
        codes = {key: error_code(exc) for key, exc in bad.items()}
        default = skipped
    else:
        tps = [TopicPartition(t.name, p) for t in topics for p in t.partitions]
        _, default, _ = await ctx.attempt(ctx.broker.add_partitions_to_txn, body.v3_and_below_transactional_id,
                                          body.v3_and_below_producer_id, body.v3_and_below_producer_epoch, tps,
                                          version=req.api_version)
    return {"results_by_topic_v3_and_below": [
        {"name": t.name, "results_by_partition": [
            {"partition_index": p, "partition_error_code": codes.get((t.name, p), default)}
            for p in t.partitions]} for t in topics]}


@api(25, "AddOffsetsToTxn", 0, 4)
async def add_offsets_to_txn(ctx, req):
    body = req.body
    _, code, _ = await ctx.attempt(ctx.broker.add_offsets_to_txn, body.transactional_id, body.producer_id,
                                   body.producer_epoch, body.group_id, version=req.api_version)
    return {"error_code": code}


_FIRST_TV2_END_TXN = 5           # EndTxn v5: "enables bumping epoch on every transaction (KIP-890 Part 2)"
_FIRST_TV2_TXN_OFFSET_COMMIT = 5  # TxnOffsetCommit v5: adds the offsets partition itself (KIP-890)


@api(26, "EndTxn", 0, 5)
async def end_txn(ctx, req):
    """v5 is TV2: the epoch is bumped and the answer carries the producer id and epoch for the
    next transaction (-1/-1 with an error, as Kafka)."""
    body = req.body
    tv = 2 if req.api_version >= _FIRST_TV2_END_TXN else 1
    result, code, _ = await ctx.attempt(ctx.broker.end_txn, body.transactional_id, body.producer_id,
                                        body.producer_epoch, bool(body.committed), version=req.api_version,
                                        client_txn_version=tv)
    if not code:
        ctx.data_waker.notify()                # the markers moved the LSO: wake read_committed fetches
    pid, epoch = result if result is not None else (-1, -1)
    return {"error_code": code, "producer_id": pid, "producer_epoch": epoch}


@api(28, "TxnOffsetCommit", 0, 5)
async def txn_offset_commit(ctx, req):
    """The offsets become the group's when the transaction commits. From v3 the consumer's
    group metadata (KIP-447: member id, generation, group instance id) is checked against the
    group; before v3 there is none (generation -1), as Kafka reads those versions. v5 (TV2)
    first adds the group's ``__consumer_offsets`` partition to the transaction (Kafka's
    verification with ``addPartition``, before the group's checks)."""
    body = req.body
    member = {}
    if req.api_version >= 3:
        member = {"member_id": body.member_id or "", "generation_id": int(body.generation_id),
                  "group_instance_id": body.group_instance_id}
    offsets = {TopicPartition(t.name, p.partition_index): OffsetAndMetadata(
        p.committed_offset, p.committed_metadata or "", getattr(p, "committed_leader_epoch", -1))
        for t in body.topics for p in t.partitions}
    code = 0
    if req.api_version >= _FIRST_TV2_TXN_OFFSET_COMMIT:
        _, code, _ = await ctx.attempt(ctx.broker.add_offsets_to_txn, body.transactional_id, body.producer_id,
                                       body.producer_epoch, body.group_id, on_append=True)
    if not code:
        _, code, _ = await ctx.attempt(ctx.broker.txn_offset_commit, body.transactional_id, body.group_id,
                                       body.producer_id, body.producer_epoch, offsets, **member)
    return {"topics": [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "error_code": code} for p in t.partitions]}
        for t in body.topics]}


def _by_topic(partitions) -> list:
    topics: dict = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(topics.items())]


@api(65, "DescribeTransactions", 0, 0)
async def describe_transactions(ctx, req):
    rows = await ctx.call(ctx.broker.describe_transactions, list(req.body.transactional_ids))
    return {"transaction_states": [
        {"error_code": d.error_code, "transactional_id": d.transactional_id, "transaction_state": d.state,
         "transaction_timeout": d.transaction_timeout_ms, "transaction_start_time": d.transaction_start_time_ms,
         "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
         "topics": _by_topic(d.topic_partitions)} for d in rows]}


@api(66, "ListTransactions", 0, 1)
async def list_transactions(ctx, req):
    body = req.body
    result, code, _ = await ctx.attempt(ctx.broker.list_transactions, list(body.state_filters),
                                        [int(p) for p in body.producer_id_filters],
                                        int(getattr(body, "duration_filter", -1)))
    if code:
        return {"error_code": code, "unknown_state_filters": [], "transaction_states": []}
    return {"error_code": 0, "unknown_state_filters": list(result.unknown_state_filters),
            "transaction_states": [{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                                    "transaction_state": t.state} for t in result.transactions]}

