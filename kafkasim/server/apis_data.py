"""Handlers for the data APIs: Produce, Fetch (long poll), ListOffsets.

Produce decodes each partition's Kafka v2 batches (:mod:`kafkasim.server.kafka_records`)
into kafkasim batches — keeping producer id, epoch and base sequence, so the broker's
idempotence rules apply — and hands each to ``Broker.produce``. Fetch reads with
``Broker.fetch`` and encodes the records back into v2 batches; when fewer than
``min_bytes`` are ready it waits (without holding a thread) for the next produce or
``max_wait_ms``, as Kafka's delayed fetch does. ListOffsets is ``Broker.list_offsets``.

On a served cluster (``ctx.topology`` set) each listener is one broker: Produce and
ListOffsets for a partition it does not lead answer NOT_LEADER_OR_FOLLOWER, as Kafka does;
Fetch too, except that Fetch v11+ (which carries KIP-392's client metadata) may read a
follower's replica below the high watermark, as Kafka lets a consumer do. With
``replica.selector.class`` = RackAwareReplicaSelector (``ServerOptions.replica_selector``
"rack") the leader answers a Fetch v11+ carrying a ``rack_id`` whose preferred replica
(KIP-392: the leader if in that rack, else an in-sync replica there) is another broker with
no records and ``preferred_read_replica`` set, at once, and the client fetches from it.

No fetch sessions (KIP-227): every Fetch answer has session id 0, which tells the client
to send full requests; an incremental request naming a session gets
FETCH_SESSION_ID_NOT_FOUND. Loop-thread coroutines; broker calls run on the executor.
"""

from __future__ import annotations

import logging
import time

from kafkasim.errors import (
    FetchSessionIdNotFoundError, InvalidRequiredAcksError, KafkaSimError, NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from kafkasim.server import kafka_records
from kafkasim.server.api import api, error_code, error_message
from kafkasim.server.codec import ms

__all__: list[str] = []

log = logging.getLogger("kafkasim.server")


def _check_partition(broker, topic: str, partition: int) -> None:
    if not 0 <= partition < broker.partition_count(topic):
        raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {topic}-{partition}")


def _check_leader(broker, topic: str, partition: int, node) -> None:
    """On a cluster (``node`` not None): NOT_LEADER_OR_FOLLOWER unless ``node`` leads."""
    if node is None:
        return
    broker.check_reachable(node)
    leader = broker.leader_for(topic, partition)
    if leader != node:
        raise NotLeaderOrFollowerError(f"broker {node} is not the leader of {topic}-{partition} "
                                       f"(leader: {leader})")


def _at(node) -> dict:
    return {} if node is None else {"node": node}


def _produce_partition(broker, topic: str, partition: int, records, acks: int, node=None) -> dict:
    """Decode, convert and append one partition's batches; the result row (runs on the executor)."""
    _check_partition(broker, topic, partition)
    decoded = kafka_records.decode_batches(records if records is not None else b"",
                                           where=f"produce to {topic}-{partition}")
    batches = [kafka_records.to_kafkasim(b) for b in decoded]
    first = None
    appended = 0
    for batch, kafka_batch in zip(batches, decoded):
        result = broker.produce(topic, partition, batch, acks, **_at(node))
        first = first or result
        if not result.duplicate:
            appended += len(kafka_batch.records)
    return {"base_offset": first.base_offset, "log_append_time": first.log_append_time,
            "log_start_offset": first.log_start_offset, "_appended": appended}


def _produce_all(broker, topic_data, acks: int, node=None) -> list:
    """Every partition of a Produce request in one executor call: the response topics, and
    per appended partition ``(topic, partition, batch bytes, records)`` for the metrics."""
    responses, appended = [], []
    for topic in topic_data:
        rows = []
        for p in topic.partition_data:
            row = {"index": p.index, "base_offset": -1, "log_append_time": -1,
                   "log_start_offset": -1, "error_message": None}
            try:
                result = _produce_partition(broker, topic.name, p.index, p.records, acks, node)
                n = result.pop("_appended")
                row.update(result, error_code=0)
                appended.append((topic.name, p.index, len(p.records), n))
            except Exception as exc:
                if not isinstance(exc, KafkaSimError):
                    log.exception("unexpected error producing to %s-%d", topic.name, p.index)
                row.update(error_code=error_code(exc), error_message=error_message(exc))
            rows.append(row)
        responses.append({"name": topic.name, "partition_responses": rows})
    return responses, appended


@api(0, "Produce", 3, 9)
async def produce(ctx, req):
    body = req.body
    acks = body.acks
    if acks not in (0, 1, -1):
        exc = InvalidRequiredAcksError(f"acks must be 0, 1 or -1, got {acks}")
        responses = [{"name": t.name, "partition_responses": [
            {"index": p.index, "base_offset": -1, "log_append_time": -1, "log_start_offset": -1,
             "error_code": error_code(exc), "error_message": error_message(exc)}
            for p in t.partition_data]} for t in body.topic_data]
        return None if acks == 0 else {"responses": responses}
    responses, appended = await ctx.call(_produce_all, ctx.broker, body.topic_data, acks, ctx.node_id)
    if appended:
        ctx.data_waker.notify()
        if ctx.metrics is not None:
            for topic, partition, nbytes, n in appended:
                if n:
                    ctx.metrics.produced(topic, partition, nbytes, n)
    if acks == 0:
        return None
    return {"responses": responses}


def _fetch_all(broker, wanted: list, response_max_bytes: int, node=None,
               follower_ok: bool = False, rack: str = "") -> tuple[list, int]:
    """One pass over every requested partition: the response topics and their byte total.
    ``node``: the broker asked (a cluster); ``follower_ok``: a follower may answer (v11+);
    ``rack``: the client's rack when the rack-aware replica selector is on."""
    total = 0
    topics = []
    for topic, partitions in wanted:
        rows = []
        for partition, offset, max_bytes in partitions:
            row = {"partition_index": partition, "high_watermark": -1, "last_stable_offset": -1,
                   "log_start_offset": -1, "aborted_transactions": None, "records": b""}
            budget = min(max_bytes, response_max_bytes - total)
            try:
                _check_partition(broker, topic, partition)
                if node is not None and not follower_ok:
                    _check_leader(broker, topic, partition, node)
                if rack and node is not None and broker.leader_for(topic, partition) == node:
                    preferred = broker.preferred_read_replica(topic, partition, rack)
                    if preferred != node and preferred >= 0:
                        result = broker.fetch(topic, partition, offset, 1, **_at(node))
                        row.update(error_code=0, high_watermark=result.high_watermark,
                                   last_stable_offset=result.high_watermark,
                                   log_start_offset=result.log_start_offset, preferred_read_replica=preferred)
                        rows.append(row)
                        continue
                if budget <= 0 and total > 0:
                    result = broker.fetch(topic, partition, offset, 1, **_at(node))
                    records = b""
                else:
                    result = broker.fetch(topic, partition, offset, max(1, budget), **_at(node))
                    records = kafka_records.encode_fetched(result.records)
                row.update(error_code=0, high_watermark=result.high_watermark,
                           last_stable_offset=result.high_watermark,
                           log_start_offset=result.log_start_offset, records=records)
                total += len(records)
            except Exception as exc:
                row["error_code"] = error_code(exc)
            rows.append(row)
        topics.append({"topic": topic, "partitions": rows})
    return topics, total


@api(1, "Fetch", 4, 12)
async def fetch(ctx, req):
    body = req.body
    session_id = getattr(body, "session_id", 0)
    if session_id != 0:
        exc = FetchSessionIdNotFoundError(f"fetch session {session_id}: kafkasim keeps no fetch sessions")
        return {"error_code": error_code(exc), "session_id": 0, "responses": []}
    wanted = [(t.topic, [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in t.partitions])
              for t in body.topics]
    max_wait = max(0, ms(body.max_wait)) / 1000.0
    deadline = time.monotonic() + max_wait
    response_max = getattr(body, "max_bytes", 2**31 - 1)
    rack = ""
    if ctx.topology is not None and ctx.options.replica_selector == "rack" and req.api_version >= 11:
        rack = getattr(body, "rack_id", "") or ""
    while True:
        topics, total = await ctx.call(_fetch_all, ctx.broker, wanted, response_max, ctx.node_id,
                                       req.api_version >= 11, rack)
        failed = any(p["error_code"] or p.get("preferred_read_replica", -1) >= 0
                     for t in topics for p in t["partitions"])
        remaining = deadline - time.monotonic()
        if total >= body.min_bytes or failed or remaining <= 0 or not ctx.alive():
            return {"error_code": 0, "session_id": 0, "responses": topics}
        await ctx.data_waker.wait(min(remaining, 1.0))   # re-check the client at least every second


@api(2, "ListOffsets", 1, 7)     # v7: MAX_TIMESTAMP (-3, KIP-734), Broker.list_offsets
async def list_offsets(ctx, req):
    out = []
    for t in req.body.topics:
        rows = []
        for p in t.partitions:
            result, code, _ = await ctx.attempt(_list_offset, ctx.broker, t.name, p.partition_index,
                                                p.timestamp, ctx.node_id)
            row = {"partition_index": p.partition_index, "error_code": code,
                   "timestamp": -1, "offset": -1, "leader_epoch": -1}
            if not code:
                row["offset"], row["timestamp"] = result
            rows.append(row)
        out.append({"name": t.name, "partitions": rows})
    return {"topics": out}


def _list_offset(broker, topic: str, partition: int, timestamp: int, node=None):
    _check_partition(broker, topic, partition)
    _check_leader(broker, topic, partition, node)
    return broker.list_offsets(topic, partition, timestamp)
