"""Handlers for the data APIs: Produce, Fetch (long poll, fetch sessions), ListOffsets,
OffsetForLeaderEpoch.

The records pass through as bytes: kafkasim stores Kafka's record batch v2 (storage/FORMAT.md).
Produce splits each partition's ``records`` into its batches by their length fields
(:func:`_batches`, the checks of Kafka's ``MemoryRecords`` walk: a whole header, a known
magic, a length that fits; else CORRUPT_MESSAGE) and hands each batch's bytes, unchanged,
to ``Broker.produce``, which validates it in place and stamps the base offset and leader
epoch. Fetch joins the stored batches ``Broker.fetch_batches`` returns, as stored, up to
the request's byte limits; when fewer than ``min_bytes`` are ready it waits (without
holding a thread) for the next produce or ``max_wait_ms``, as Kafka's delayed fetch does.
Nothing here decodes a record. ListOffsets is ``Broker.list_offsets`` with
the leader epoch of the offset found; OffsetForLeaderEpoch is
``Broker.offset_for_leader_epoch``.

Leader epochs are checked as Kafka's ``Partition`` checks them: a request's
``current_leader_epoch`` (Fetch v9+, ListOffsets v4+, OffsetForLeaderEpoch) older than the
partition's gets FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH, -1 is not checked;
then leadership.

On a served cluster (``ctx.topology`` set) each listener is one broker: Produce and
ListOffsets for a partition it does not lead answer NOT_LEADER_OR_FOLLOWER, as Kafka does;
Fetch too, except that Fetch v11+ (which carries KIP-392's client metadata) may read a
follower's replica below the high watermark, as Kafka lets a consumer do. With
``replica.selector.class`` = RackAwareReplicaSelector (``ServerOptions.replica_selector``
"rack") the leader answers a Fetch v11+ carrying a ``rack_id`` whose preferred replica
(KIP-392: the leader if in that rack, else an in-sync replica there) is another broker with
no records and ``preferred_read_replica`` set, at once, and the client fetches from it.

Fetch sessions (KIP-227, Fetch v7+): the listener's
:class:`~kafkasim.server.fetch_session.FetchSessionCache` (``ctx.fetch_sessions``) holds
them; a full fetch with epoch 0 opens one, an incremental fetch reads the session's
partitions and answers only those with something new (that module's docstring has the
rules and the errors). Loop-thread coroutines; broker calls run on the executor, the
session cache is touched only on the loop thread.

One exception: a one-broker server's non-transactional Produce appends on the loop thread.
Such an append never waits (no follower, no transaction coordinator): it is a validation
and a ``write()`` to the page cache, an fsync only where ``flush.messages`` asks for one
or a segment rolls. Handing it to the executor and back cost more CPU than the append
itself (the wake-up of a worker thread, the GIL changing hands, two futures), CPU the
server's clients on the same machine then lacked. Kafka's own split (network threads, I/O
threads) is kept where an append can wait: a served cluster's Produce (``acks=all`` waits
for the followers) and a transactional one go to the executor.
"""

from __future__ import annotations

import logging
import time

from kafkasim.errors import (
    CorruptRecordError, FetchSessionIdNotFoundError, InvalidFetchSessionEpochError, InvalidRecordError,
    InvalidRequiredAcksError, InvalidTxnStateError, KafkaSimError, NotLeaderOrFollowerError,
    TransactionAbortableError, TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError, UnsupportedCompressionTypeError,
)
from kafkasim.records import framing
from kafkasim.server.api import api, error_code, error_message
from kafkasim.server.codec import ms
from kafkasim.server.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID

__all__: list[str] = []

log = logging.getLogger("kafkasim.server")


def _check_partition(broker, topic: str, partition: int) -> None:
    if not 0 <= partition < broker.partition_count(topic):
        raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {topic}-{partition}")


def _check_leader(broker, topic: str, partition: int, node) -> None:
    """On a cluster (``node`` not None): KAFKA_STORAGE_ERROR when ``node``'s replica is in an
    offline log directory (disk full), else NOT_LEADER_OR_FOLLOWER unless ``node`` leads."""
    if node is None:
        return
    broker.check_reachable(node)
    broker.check_replica_online(topic, partition, node)     # KAFKA_STORAGE_ERROR first, as Kafka
    leader = broker.leader_for(topic, partition)
    if leader != node:
        raise NotLeaderOrFollowerError(f"broker {node} is not the leader of {topic}-{partition} "
                                       f"(leader: {leader})")


def _at(node) -> dict:
    return {} if node is None else {"node": node}


def _batches(records, where: str) -> list:
    """``(header, batch bytes)`` of each batch in a Produce request's ``records``, the bytes
    exactly as sent, as Kafka's ``MemoryRecords`` walks them: each batch needs a whole
    61-byte header with magic 2 and possible length and count fields, and a length that
    stays inside ``records`` (CORRUPT_MESSAGE otherwise); an empty ``records`` is
    INVALID_RECORD. Everything else (CRC-32C, attributes, records, timestamps, sequences) is
    ``Broker.produce``'s, in place.

    Example: one 70-byte batch gives ``[(header, records)]`` (no copy); two batches back to
    back give two slices; 70 bytes whose length field says 80 raise CorruptRecordError."""
    n = len(records)
    if not n:
        raise InvalidRecordError(f"{where}: no record batch")
    out, pos = [], 0
    while pos < n:
        h = framing.decode_header(records, pos, where=where)
        end = pos + h.size
        if end > n:
            raise CorruptRecordError(f"{where}: batch at byte {pos} of {h.size} bytes, {n - pos} present")
        out.append((h, records if end - pos == n else bytes(records[pos:end])))
        pos = end
    return out


_FIRST_ABORTABLE_PRODUCE = 11   # "Version 11 adds support for new error code TRANSACTION_ABORTABLE (KIP-890)"
_FIRST_TV2_PRODUCE = 12         # "Version 12 is the same as version 11 (KIP-890)": adds its partition itself


def _produce_partition(broker, topic: str, partition: int, records, acks: int, node=None,
                       version: int = 9, transactional_id=None) -> dict:
    """Append one partition's batch, as sent; the result row (runs on the executor).

    As Kafka's ``ProduceRequest.validateRecords`` (v3 and later, every version served): one
    record batch per partition (INVALID_RECORD otherwise), and no zstd before v7
    (UNSUPPORTED_COMPRESSION_TYPE); as ``KafkaApis.handleProduceRequest``, a transactional
    batch in a request without a transactional id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    (Kafka answers it for the whole request; here for that partition). Whether the batch
    belongs to an ongoing transaction is the broker's check (INVALID_TXN_STATE). From v12
    (KIP-890 TV2) a transactional batch first adds its partition to the transaction
    (``Broker.add_partitions_on_append``; an epoch that is not the transaction's current one
    is INVALID_PRODUCER_EPOCH)."""
    _check_partition(broker, topic, partition)
    first = None
    appended = 0
    batches = _batches(records if records is not None else b"", f"produce to {topic}-{partition}")
    if len(batches) > 1:
        raise InvalidRecordError(f"Produce requests with version {version} are only allowed to contain "
                                 f"exactly one record batch per partition")
    if transactional_id is None and batches[0][0].attributes & framing.ATTR_TRANSACTIONAL:
        raise TransactionalIdAuthorizationFailedError(
            f"produce to {topic}-{partition}: a transactional batch in a request without a transactional id")
    if version < 7 and batches[0][0].attributes & framing.ATTR_COMPRESSION_MASK == 4:
        raise UnsupportedCompressionTypeError(
            f"Produce requests with version {version} are not allowed to use ZStandard compression")
    h = batches[0][0]
    if version >= _FIRST_TV2_PRODUCE and transactional_id is not None and h.attributes & framing.ATTR_TRANSACTIONAL:
        # KIP-890 TV2: the partition joins the transaction here (Kafka's leader: addPartition)
        _check_leader(broker, topic, partition, node)
        broker.add_partitions_on_append(transactional_id, h.producer_id, h.producer_epoch, [(topic, partition)])
    for header, batch in batches:
        try:
            result = broker.produce(topic, partition, batch, acks, **_at(node))
        except InvalidTxnStateError as exc:
            # a transactional batch outside its transaction: Kafka's verification answers
            # TRANSACTION_ABORTABLE, which a client before v11 is told as INVALID_TXN_STATE
            if version >= _FIRST_ABORTABLE_PRODUCE and header.attributes & framing.ATTR_TRANSACTIONAL:
                raise TransactionAbortableError(str(exc)) from exc
            raise
        first = first or result
        if not result.duplicate:
            appended += header.record_count
    return {"base_offset": first.base_offset, "log_append_time": first.log_append_time,
            "log_start_offset": first.log_start_offset, "_appended": appended}


def _produce_all(broker, topic_data, acks: int, node=None, version: int = 9, transactional_id=None) -> list:
    """Every partition of a Produce request in one executor call: the response topics, and
    per appended partition ``(topic, partition, batch bytes, records)`` for the metrics."""
    responses, appended = [], []
    for topic in topic_data:
        rows = []
        for p in topic.partition_data:
            row = {"index": p.index, "base_offset": -1, "log_append_time": -1,
                   "log_start_offset": -1, "error_message": None}
            try:
                result = _produce_partition(broker, topic.name, p.index, p.records, acks, node, version,
                                            transactional_id)
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


@api(0, "Produce", 3, 12)
async def produce(ctx, req):
    """v10 (KIP-951) adds leader hints to a NOT_LEADER_OR_FOLLOWER answer: left out (the client
    asks Metadata instead). v11: a transactional batch outside its transaction is
    TRANSACTION_ABORTABLE (INVALID_TXN_STATE before). v12 is KIP-890's TV2 produce."""
    body = req.body
    acks = body.acks
    if acks not in (0, 1, -1):
        exc = InvalidRequiredAcksError(f"acks must be 0, 1 or -1, got {acks}")
        responses = [{"name": t.name, "partition_responses": [
            {"index": p.index, "base_offset": -1, "log_append_time": -1, "log_start_offset": -1,
             "error_code": error_code(exc), "error_message": error_message(exc)}
            for p in t.partition_data]} for t in body.topic_data]
        return None if acks == 0 else {"responses": responses}
    args = (ctx.broker, body.topic_data, acks, ctx.node_id, req.api_version, body.transactional_id)
    if ctx.topology is None and body.transactional_id is None:
        # one broker, no transaction: the append cannot wait on anything (no follower to
        # replicate to, no coordinator to ask), so it runs here on the loop thread; the hop to
        # the executor and back cost more server CPU than the append (docs/server.md)
        responses, appended = _produce_all(*args)
    else:
        responses, appended = await ctx.call(_produce_all, *args)
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
               follower_ok: bool = False, rack: str = "", isolation_level: int = 0) -> tuple[list, int]:
    """One pass over every requested partition ``(partition, fetch offset, max bytes, current
    leader epoch)``: the response topics and their byte total. ``node``: the broker asked (a
    cluster); ``follower_ok``: a follower may answer (v11+); ``rack``: the client's rack when
    the rack-aware replica selector is on; ``isolation_level`` 1 (read_committed) reads up to
    the last stable offset and lists the aborted transactions of the range read (null under
    read_uncommitted); every row carries the LSO, as Kafka's Fetch v4+ does. Checks in Kafka's
    order: the partition exists, the client's leader epoch (FENCED_LEADER_EPOCH /
    UNKNOWN_LEADER_EPOCH), then leadership."""
    total = 0
    topics = []
    for topic, partitions in wanted:
        rows = []
        for partition, offset, max_bytes, current_epoch in partitions:
            row = {"partition_index": partition, "high_watermark": -1, "last_stable_offset": -1,
                   "log_start_offset": -1, "aborted_transactions": None, "records": b""}
            budget = min(max_bytes, response_max_bytes - total)
            try:
                _check_partition(broker, topic, partition)
                broker.check_leader_epoch(topic, partition, current_epoch, **_at(node))
                if node is not None and not follower_ok:
                    _check_leader(broker, topic, partition, node)
                if rack and node is not None and broker.leader_for(topic, partition) == node:
                    preferred = broker.preferred_read_replica(topic, partition, rack)
                    if preferred != node and preferred >= 0:
                        result = broker.fetch(topic, partition, offset, 1, **_at(node))
                        row.update(error_code=0, high_watermark=result.high_watermark,
                                   last_stable_offset=broker.last_stable_offset(topic, partition, **_at(node)),
                                   log_start_offset=result.log_start_offset, preferred_read_replica=preferred)
                        rows.append(row)
                        continue
                if budget <= 0 and total > 0:
                    result = broker.fetch(topic, partition, offset, 1, **_at(node))
                    records = b""
                    lso = broker.last_stable_offset(topic, partition, **_at(node))
                    aborted = [] if isolation_level == 1 else None
                else:
                    result = broker.fetch_batches(topic, partition, offset, max(1, budget), **_at(node),
                                                  isolation_level=isolation_level)
                    records = b"".join([raw for _, raw in result.batches])   # as stored: Kafka v2
                    lso = result.last_stable_offset
                    aborted = None if result.aborted_transactions is None else [
                        {"producer_id": a.producer_id, "first_offset": a.first_offset}
                        for a in result.aborted_transactions]
                row.update(error_code=0, high_watermark=result.high_watermark, last_stable_offset=lso,
                           log_start_offset=result.log_start_offset, records=records,
                           aborted_transactions=aborted)
                total += len(records)
            except Exception as exc:
                if not isinstance(exc, KafkaSimError):
                    log.exception("unexpected error fetching %s-%d", topic, partition)
                row["error_code"] = error_code(exc)
            rows.append(row)
        topics.append({"topic": topic, "partitions": rows})
    return topics, total


def _open_session(sessions, body, wanted: list):
    """KIP-227 on the request side (kafkasim.server.fetch_session): ``(session, create,
    wanted, error answer)``. ``session``: the incremental session (None otherwise);
    ``create``: a full fetch asking for a new session; ``wanted``: what to read (the
    session's partitions for an incremental fetch); an error answer ends the request."""
    session_id, epoch = body.session_id, body.session_epoch
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):         # a full fetch closes the session it names
        if session_id != INVALID_SESSION_ID:
            sessions.remove(session_id)
        return None, epoch == INITIAL_EPOCH, wanted, None
    forgotten = [(f.topic, list(f.partitions)) for f in body.forgotten_topics_data or ()]
    try:
        session = sessions.incremental(session_id, epoch, wanted, forgotten)
    except (FetchSessionIdNotFoundError, InvalidFetchSessionEpochError) as exc:
        return None, False, wanted, {"error_code": error_code(exc), "session_id": INVALID_SESSION_ID,
                                     "responses": []}
    if session is None:                               # emptied: closed, answered sessionless
        return None, False, wanted, None
    return session, False, sessions.wanted(session), None


@api(1, "Fetch", 4, 12)
async def fetch(ctx, req):
    body = req.body
    wanted = [(t.topic, [(p.partition, p.fetch_offset, p.partition_max_bytes, getattr(p, "current_leader_epoch", -1))
                         for p in t.partitions]) for t in body.topics]
    sessions = ctx.fetch_sessions if req.api_version >= 7 else None
    session, create = None, False
    if sessions is not None:
        session, create, wanted, answer = _open_session(sessions, body, wanted)
        if answer is not None:
            return answer
    elif getattr(body, "session_id", 0) != INVALID_SESSION_ID:
        exc = FetchSessionIdNotFoundError(f"fetch session {body.session_id}: this listener keeps no fetch sessions")
        return {"error_code": error_code(exc), "session_id": INVALID_SESSION_ID, "responses": []}
    if ctx.positions is not None:                  # for the live view: this client's fetch offsets
        ctx.positions.fetched(ctx.client_id, ctx.client_host, wanted)
    isolation = 1 if getattr(body, "isolation_level", 0) == 1 else 0
    max_wait = max(0, ms(body.max_wait)) / 1000.0
    deadline = time.monotonic() + max_wait
    response_max = getattr(body, "max_bytes", 2**31 - 1)
    rack = ""
    if ctx.topology is not None and ctx.options.replica_selector == "rack" and req.api_version >= 11:
        rack = getattr(body, "rack_id", "") or ""
    while True:
        topics, total = await ctx.call(_fetch_all, ctx.broker, wanted, response_max, ctx.node_id,
                                       req.api_version >= 11, rack, isolation)
        failed = any(p["error_code"] or p.get("preferred_read_replica", -1) >= 0
                     for t in topics for p in t["partitions"])
        remaining = deadline - time.monotonic()
        if total >= body.min_bytes or failed or remaining <= 0 or not ctx.alive():
            if session is not None:
                return {"error_code": 0, "session_id": session.id,
                        "responses": sessions.incremental_response(session, topics)}
            session_id = sessions.maybe_create(wanted, topics) if create else INVALID_SESSION_ID
            return {"error_code": 0, "session_id": session_id, "responses": topics}
        await ctx.data_waker.wait(min(remaining, 1.0))   # re-check the client at least every second


@api(2, "ListOffsets", 1, 7)     # v7: MAX_TIMESTAMP (-3, KIP-734), Broker.list_offsets
async def list_offsets(ctx, req):
    isolation = 1 if getattr(req.body, "isolation_level", 0) == 1 else 0     # v2+
    out = []
    for t in req.body.topics:
        rows = []
        for p in t.partitions:
            result, code, _ = await ctx.attempt(_list_offset, ctx.broker, t.name, p.partition_index,
                                                p.timestamp, ctx.node_id, getattr(p, "current_leader_epoch", -1),
                                                isolation)
            row = {"partition_index": p.partition_index, "error_code": code,
                   "timestamp": -1, "offset": -1, "leader_epoch": -1}
            if not code:
                row["offset"], row["timestamp"], row["leader_epoch"] = result
            rows.append(row)
        out.append({"name": t.name, "partitions": rows})
    return {"topics": out}


def _list_offset(broker, topic: str, partition: int, timestamp: int, node=None, current_epoch: int = -1,
                 isolation_level: int = 0):
    """``(offset, timestamp, leader epoch)`` as Kafka's ListOffsets answers them; LATEST is
    the last stable offset for read_committed (``isolation_level`` 1), the high watermark
    otherwise, and a timestamp look-up finds only offsets below that."""
    _check_partition(broker, topic, partition)
    broker.check_leader_epoch(topic, partition, current_epoch, **_at(node))
    _check_leader(broker, topic, partition, node)
    offset, found_ts = broker.list_offsets(topic, partition, timestamp, isolation_level=isolation_level)
    return offset, found_ts, broker.offset_leader_epoch(topic, partition, timestamp, offset)


def _end_offsets(broker, topics, node=None) -> list:
    """Every partition of an OffsetForLeaderEpoch request, in one executor call."""
    out = []
    for t in topics:
        rows = []
        for p in t.partitions:
            row = {"partition": p.partition, "error_code": 0, "leader_epoch": -1, "end_offset": -1}
            try:
                _check_partition(broker, t.topic, p.partition)
                row["leader_epoch"], row["end_offset"] = broker.offset_for_leader_epoch(
                    t.topic, p.partition, p.leader_epoch, current_leader_epoch=p.current_leader_epoch, **_at(node))
            except Exception as exc:
                if not isinstance(exc, KafkaSimError):
                    log.exception("unexpected error in OffsetForLeaderEpoch for %s-%d", t.topic, p.partition)
                row["error_code"] = error_code(exc)
            rows.append(row)
        out.append({"topic": t.topic, "partitions": rows})
    return out


@api(23, "OffsetForLeaderEpoch", 2, 4)
async def offset_for_leader_epoch(ctx, req):
    """KIP-320's position check: for each partition, the end offset of the requested leader
    epoch on the leader (Broker.offset_for_leader_epoch); a client whose position lies past
    it has read records the log no longer holds (truncated in an unclean election)."""
    return {"topics": await ctx.call(_end_offsets, ctx.broker, req.body.topics, ctx.node_id)}
