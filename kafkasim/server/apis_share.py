"""Handlers for share groups (KIP-932, Kafka's queues): ShareGroupHeartbeat (76),
ShareGroupDescribe (77), ShareFetch (78), ShareAcknowledge (79) and the admin APIs of
``kafka-share-groups.sh``: DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
DeleteShareGroupOffsets (92). ListGroups (type ``share``) and DeleteGroups answer share groups
through the broker's ``list_groups`` / ``delete_group``.

Each handler makes one or a few calls into the broker's share group API
(:mod:`kafkasim.broker.share_group_api`); the versions are those Kafka 4.1+ serves and
confluent-kafka's ``ShareConsumer`` negotiates (76–79 v1; 90 v0–v1; 91, 92 v0).

**ShareFetch** keeps the member's share session (:mod:`kafkasim.server.share_session`),
applies the acknowledgements it carries, then acquires records: per partition it answers the
stored v2 batches that hold the acquired offsets, as stored, and the acquired ranges with
their delivery counts (``AcquiredRecords``); the client hands out only those offsets. When
nothing was acquired it waits, as Kafka's delayed share fetch does, for up to ``MaxWaitMs``
for records to be produced or released (the data waker), then acquires again. A partition's
fetch error and its acknowledgement error are separate fields. A final request (epoch -1)
acquires nothing and closes the session, releasing the member's records.

Topics travel as topic ids; an unknown id answers UNKNOWN_TOPIC_OR_PARTITION for its
partitions (Kafka: UNKNOWN_TOPIC_ID, which kafkasim's errors do not have). Loop-thread
coroutines; broker calls run on the executor.
"""

from __future__ import annotations

import time
import uuid
from typing import Optional

from kafkasim.errors import (
    BrokerResponseError, InvalidRequestError, InvalidShareSessionEpochError, KafkaSimError,
    ShareSessionNotFoundError, UnknownTopicOrPartitionError,
)
from kafkasim.protocol.share_group import AcknowledgementBatch
from kafkasim.server import cluster
from kafkasim.server.api import api, error_code
from kafkasim.server.apis_data import _check_leader
from kafkasim.server.codec import ms
from kafkasim.server.share_session import FINAL_EPOCH, INITIAL_EPOCH
from kafkasim.types import TopicPartition

__all__ = ["share_group_heartbeat", "share_group_describe", "share_fetch", "share_acknowledge",
           "describe_share_group_offsets", "alter_share_group_offsets", "delete_share_group_offsets"]

LOCK_DURATION = "group.share.record.lock.duration.ms"
_NO_LEADER = {"leader_id": -1, "leader_epoch": -1}
_ACK_TYPES = range(0, 4)          # GAP, ACCEPT, RELEASE, REJECT (v1; RENEW is v2)


def _message(exc: BaseException) -> Optional[str]:
    return str(exc) if isinstance(exc, BrokerResponseError) else None


def _topic_ids(broker) -> tuple[dict, dict]:
    """``(id → name, name → id)`` of every topic the broker has."""
    by_id, by_name = {}, {}
    for name in broker.list_topics(include_internal=True):
        try:
            tid = cluster.topic_id(broker.describe_topic(name))
        except UnknownTopicOrPartitionError:
            continue
        by_id[tid], by_name[name] = name, tid
    return by_id, by_name


# --- membership ---------------------------------------------------------------------------

@api(76, "ShareGroupHeartbeat", 1, 1)
async def share_group_heartbeat(ctx, req):
    body = req.body
    names = body.subscribed_topic_names
    try:
        r = await ctx.call(ctx.broker.share_group_heartbeat, body.group_id, body.member_id, body.member_epoch,
                           subscribed_topic_names=None if names is None else list(names),
                           rack_id=body.rack_id, client_id=req.client_id or "",
                           client_host=ctx.client_host or "")
        assignment = None
        if r.assignment is not None:
            _, by_name = await ctx.call(_topic_ids, ctx.broker)
            assignment = {"topic_partitions": [
                {"topic_id": by_name[t], "partitions": sorted(ps)}
                for t, ps in sorted(r.assignment.items()) if t in by_name]}
    except Exception as exc:
        return {"error_code": error_code(exc), "error_message": _message(exc) or str(exc), "member_id": None,
                "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}
    finally:
        ctx.group_waker.notify()
    return {"error_code": 0, "error_message": None, "member_id": r.member_id, "member_epoch": r.member_epoch,
            "heartbeat_interval": r.heartbeat_interval_ms, "assignment": assignment}


@api(77, "ShareGroupDescribe", 1, 1)
async def share_group_describe(ctx, req):
    ids = list(req.body.group_ids)
    try:
        groups = await ctx.call(ctx.broker.share_group_describe, ids)
    except Exception as exc:
        return {"groups": [_described_error(g, exc) for g in ids]}
    out = []
    for d in groups:
        if d.get("error") is not None:
            out.append(_described_error(d["group_id"], d["error"]))
            continue
        out.append({
            "error_code": 0, "error_message": None, "group_id": d["group_id"], "group_state": d["group_state"],
            "group_epoch": d["group_epoch"], "assignment_epoch": d["assignment_epoch"],
            "assignor_name": d["assignor_name"],
            "members": [{
                "member_id": m["member_id"], "rack_id": m.get("rack_id"), "member_epoch": m["member_epoch"],
                "client_id": m.get("client_id") or "", "client_host": m.get("client_host") or "",
                "subscribed_topic_names": sorted(m.get("subscribed_topic_names") or ()),
                "assignment": {"topic_partitions": [
                    {"topic_id": tid, "topic_name": t, "partitions": list(ps)} for tid, t, ps in m["assignment"]]},
            } for m in d["members"]],
            "authorized_operations": -2147483648,     # not asked for (no ACLs here)
        })
    return {"groups": out}


def _described_error(group_id: str, exc: BaseException) -> dict:
    return {"error_code": error_code(exc), "error_message": _message(exc), "group_id": group_id,
            "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
            "authorized_operations": -2147483648}


# --- the data plane -----------------------------------------------------------------------

def _acks(topics, by_id: dict) -> tuple[dict, set]:
    """The acknowledgement batches of a request, per partition, and the partitions named by an
    unknown topic id. INVALID_REQUEST (KafkaApis' validation) for batches out of order or
    overlapping, a type list neither one long nor one per offset, or an unknown type."""
    acks, unknown = {}, set()
    for t in topics:
        name = by_id.get(t.topic_id)
        for p in t.partitions:
            if name is None:
                unknown.add((t.topic_id, p.partition_index))
                continue
            batches, last = [], -1
            for b in p.acknowledgement_batches:
                n = b.last_offset - b.first_offset + 1
                types = tuple(int(x) for x in b.acknowledge_types)
                if (b.first_offset < 0 or n < 1 or b.first_offset <= last or len(types) not in (1, n)
                        or any(x not in _ACK_TYPES for x in types)):
                    raise InvalidRequestError(
                        f"acknowledgement batch {b.first_offset}-{b.last_offset} types {list(types)} of "
                        f"{name}-{p.partition_index}: batches must ascend without overlap, with one type "
                        f"or one per offset, each 0-3")
                last = b.last_offset
                batches.append(AcknowledgementBatch(int(b.first_offset), int(b.last_offset), types))
            if batches:
                acks[TopicPartition(name, p.partition_index)] = batches
    return acks, unknown


def _not_led(broker, partitions, node) -> dict:
    """On a served cluster: the partitions this broker may not serve (NOT_LEADER_OR_FOLLOWER,
    KAFKA_STORAGE_ERROR), each with its error; a ShareFetch is answered by each partition's
    leader, as Kafka's share-partition leader."""
    out = {}
    if node is None:
        return out
    for tp in partitions:
        try:
            _check_leader(broker, tp.topic, tp.partition, node)
        except KafkaSimError as exc:
            out[tp] = exc
    return out


def _partition_row(partition: int, fetched, ack_error) -> dict:
    row = {"partition_index": partition, "error_code": 0, "error_message": None,
           "acknowledge_error_code": 0 if ack_error is None else error_code(ack_error),
           "acknowledge_error_message": None if ack_error is None else _message(ack_error),
           "current_leader": _NO_LEADER, "records": b"", "acquired_records": []}
    if fetched is None:
        return row
    if fetched.error is not None:
        row.update(error_code=error_code(fetched.error), error_message=_message(fetched.error))
    if fetched.acknowledge_error is not None and ack_error is None:
        row.update(acknowledge_error_code=error_code(fetched.acknowledge_error),
                   acknowledge_error_message=_message(fetched.acknowledge_error))
    row["records"] = fetched.records or b""
    row["acquired_records"] = [{"first_offset": a.first_offset, "last_offset": a.last_offset,
                                "delivery_count": a.delivery_count} for a in fetched.acquired]
    return row


def _fetch_error(exc: BaseException) -> dict:
    return {"error_code": error_code(exc), "error_message": _message(exc) or str(exc),
            "acquisition_lock_timeout": 0, "responses": [], "node_endpoints": []}


async def _continued(ctx, group_id: str, member_id: str, epoch: int):
    """The share session a request of epoch > 0 or -1 continues; a wrong epoch drops it and
    releases the member's records before the error is answered."""
    try:
        return ctx.share_sessions.find(group_id, member_id, epoch)
    except InvalidShareSessionEpochError:
        await ctx.call(ctx.broker.share_session_close, group_id, member_id)
        raise


@api(78, "ShareFetch", 1, 1)
async def share_fetch(ctx, req):
    body = req.body
    group_id, member_id, epoch = body.group_id, body.member_id, body.share_session_epoch
    sessions = ctx.share_sessions
    by_id, _ = await ctx.call(_topic_ids, ctx.broker)
    try:
        acks, unknown_acked = _acks(body.topics, by_id)
        if epoch == INITIAL_EPOCH and acks:
            raise InvalidRequestError("a ShareFetch opening a share session (epoch 0) carries no acknowledgements")
        if epoch == FINAL_EPOCH and body.forgotten_topics_data:
            raise InvalidRequestError("a final ShareFetch (epoch -1) forgets no topics")
        if sessions is None:
            raise ShareSessionNotFoundError("this listener keeps no share sessions")
        requested = [(t.topic_id, p.partition_index) for t in body.topics for p in t.partitions]
        if epoch == INITIAL_EPOCH:
            session, replaced = sessions.open(group_id, member_id, requested)
            if replaced:
                await ctx.call(ctx.broker.share_session_close, group_id, member_id)
        else:
            session = await _continued(ctx, group_id, member_id, epoch)
            session.forget((f.topic_id, p) for f in body.forgotten_topics_data for p in f.partitions)
            session.add(requested)
    except KafkaSimError as exc:
        if error_code(exc) == InvalidRequestError.errno:
            ctx.refused(str(exc))
        return _fetch_error(exc)
    final = epoch == FINAL_EPOCH
    wanted = [] if final else [TopicPartition(by_id[t], p) for t, p in session.partitions if t in by_id]
    unknown = {(t, p) for t, p in session.partitions if t not in by_id} | unknown_acked
    refused = await ctx.call(_not_led, ctx.broker, set(wanted) | set(acks), ctx.node_id)
    acks_refused = {tp for tp in acks if tp in refused}
    wanted = [tp for tp in wanted if tp not in refused]
    acks = {tp: b for tp, b in acks.items() if tp not in refused}
    ack_errors: dict = {}
    deadline = time.monotonic() + max(0, ms(body.max_wait)) / 1000.0
    pending = acks
    while True:
        try:
            fetched = await ctx.call(ctx.broker.share_fetch, group_id, member_id, wanted,
                                     max_records=max(1, body.max_records), max_bytes=max(1, body.max_bytes),
                                     batch_size=max(1, body.batch_size), acknowledgements=pending or None)
        except Exception as exc:
            return _fetch_error(exc)
        if pending:
            ack_errors = {tp: fetched[tp].acknowledge_error for tp in pending if tp in fetched}
            pending = {}
            ctx.data_waker.notify()                    # released records may serve a waiting member
        got = any(f.acquired or f.error is not None for f in fetched.values())
        remaining = deadline - time.monotonic()
        if final or got or not wanted or remaining <= 0 or not ctx.alive():
            break
        await ctx.data_waker.wait(min(remaining, 1.0))
    if final:
        sessions.close(group_id, member_id)
        await ctx.call(ctx.broker.share_session_close, group_id, member_id)
        ctx.data_waker.notify()
    else:
        sessions.advance(session)
    _, by_name = await ctx.call(_topic_ids, ctx.broker)
    rows: dict = {}
    for tp in set(fetched) | set(ack_errors):
        tid = by_name.get(tp.topic)
        if tid is not None:
            rows.setdefault(tid, []).append(_partition_row(tp.partition, fetched.get(tp), ack_errors.get(tp)))
    for tp, exc in refused.items():
        if tp.topic in by_name:
            rows.setdefault(by_name[tp.topic], []).append(dict(
                _partition_row(tp.partition, None, exc if tp in acks_refused else None),
                error_code=error_code(exc), error_message=_message(exc)))
    for tid, p in unknown:
        rows.setdefault(tid, []).append({
            "partition_index": p, "error_code": UnknownTopicOrPartitionError.errno,
            "error_message": "This server does not host this topic ID.", "acknowledge_error_code": 0,
            "acknowledge_error_message": None, "current_leader": _NO_LEADER, "records": b"",
            "acquired_records": []})
    return {"error_code": 0, "error_message": None,
            "acquisition_lock_timeout": int(ctx.broker.broker_config[LOCK_DURATION]),
            "responses": [{"topic_id": tid, "partitions": sorted(ps, key=lambda r: r["partition_index"])}
                          for tid, ps in sorted(rows.items(), key=lambda kv: str(kv[0]))],
            "node_endpoints": []}


@api(79, "ShareAcknowledge", 1, 1)
async def share_acknowledge(ctx, req):
    body = req.body
    group_id, member_id, epoch = body.group_id, body.member_id, body.share_session_epoch
    sessions = ctx.share_sessions
    by_id, _ = await ctx.call(_topic_ids, ctx.broker)
    try:
        acks, unknown = _acks(body.topics, by_id)
        if sessions is None:
            raise ShareSessionNotFoundError("this listener keeps no share sessions")
        if epoch == INITIAL_EPOCH:
            raise InvalidShareSessionEpochError("a ShareAcknowledge cannot open a share session (epoch 0)")
        session = await _continued(ctx, group_id, member_id, epoch)
    except KafkaSimError as exc:
        if error_code(exc) == InvalidRequestError.errno:
            ctx.refused(str(exc))
        return {"error_code": error_code(exc), "error_message": _message(exc) or str(exc), "responses": [],
                "node_endpoints": []}
    try:
        results = await ctx.call(ctx.broker.share_acknowledge, group_id, member_id, acks) if acks else {}
    except Exception as exc:
        return {"error_code": error_code(exc), "error_message": _message(exc) or str(exc), "responses": [],
                "node_endpoints": []}
    if epoch == FINAL_EPOCH:
        sessions.close(group_id, member_id)
        await ctx.call(ctx.broker.share_session_close, group_id, member_id)
    else:
        sessions.advance(session)
    ctx.data_waker.notify()
    _, by_name = await ctx.call(_topic_ids, ctx.broker)
    rows: dict = {}
    for tp, exc in results.items():
        rows.setdefault(by_name.get(tp.topic), []).append({
            "partition_index": tp.partition, "error_code": 0 if exc is None else error_code(exc),
            "error_message": None if exc is None else _message(exc), "current_leader": _NO_LEADER})
    for tid, p in unknown:
        rows.setdefault(tid, []).append({"partition_index": p, "error_code": UnknownTopicOrPartitionError.errno,
                                         "error_message": None, "current_leader": _NO_LEADER})
    rows.pop(None, None)
    return {"error_code": 0, "error_message": None,
            "responses": [{"topic_id": tid, "partitions": sorted(ps, key=lambda r: r["partition_index"])}
                          for tid, ps in sorted(rows.items(), key=lambda kv: str(kv[0]))],
            "node_endpoints": []}


# --- kafka-share-groups.sh's admin APIs ---------------------------------------------------

@api(90, "DescribeShareGroupOffsets", 0, 1)
async def describe_share_group_offsets(ctx, req):
    _, by_name = await ctx.call(_topic_ids, ctx.broker)
    out = []
    for g in req.body.groups:
        wanted = None if g.topics is None else [TopicPartition(t.topic_name, p) for t in g.topics
                                                for p in t.partitions]
        offsets, code, message = await ctx.attempt(ctx.broker.describe_share_group_offsets, g.group_id, wanted)
        if code:
            out.append({"group_id": g.group_id, "topics": [], "error_code": code, "error_message": message})
            continue
        topics: dict = {}
        for tp, o in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "start_offset": o.get("start_offset", -1),
                "leader_epoch": o.get("leader_epoch", -1), "lag": o.get("lag", -1),
                "error_code": error_code(o["error"]) if o.get("error") is not None else 0,
                "error_message": _message(o["error"]) if o.get("error") is not None else None})
        out.append({"group_id": g.group_id, "error_code": 0, "error_message": None,
                    "topics": [{"topic_name": t, "topic_id": by_name.get(t, uuid.UUID(int=0)), "partitions": ps}
                               for t, ps in topics.items()]})
    return {"groups": out}


@api(91, "AlterShareGroupOffsets", 0, 0)
async def alter_share_group_offsets(ctx, req):
    body = req.body
    offsets = {TopicPartition(t.topic_name, p.partition_index): p.start_offset
               for t in body.topics for p in t.partitions}
    results, code, message = await ctx.attempt(ctx.broker.alter_share_group_offsets, body.group_id, offsets)
    if code:
        return {"error_code": code, "error_message": message, "responses": []}
    _, by_name = await ctx.call(_topic_ids, ctx.broker)
    topics: dict = {}
    for tp, exc in sorted(results.items()):
        topics.setdefault(tp.topic, []).append({
            "partition_index": tp.partition, "error_code": 0 if exc is None else error_code(exc),
            "error_message": None if exc is None else _message(exc)})
    return {"error_code": 0, "error_message": None,
            "responses": [{"topic_name": t, "topic_id": by_name.get(t, uuid.UUID(int=0)), "partitions": ps}
                          for t, ps in topics.items()]}


@api(92, "DeleteShareGroupOffsets", 0, 0)
async def delete_share_group_offsets(ctx, req):
    body = req.body
    results, code, message = await ctx.attempt(ctx.broker.delete_share_group_offsets, body.group_id,
                                               [t.topic_name for t in body.topics])
    if code:
        return {"error_code": code, "error_message": message, "responses": []}
    _, by_name = await ctx.call(_topic_ids, ctx.broker)
    return {"error_code": 0, "error_message": None,
            "responses": [{"topic_name": t, "topic_id": by_name.get(t, uuid.UUID(int=0)),
                           "error_code": 0 if exc is None else error_code(exc),
                           "error_message": None if exc is None else _message(exc)}
                          for t, exc in results.items()]}
