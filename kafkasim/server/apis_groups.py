"""Handlers for the classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete.

The coordinator's JoinGroup and SyncGroup never block: they answer PENDING and expect
to be called again (kafkasim/protocol/group.py). Kafka's clients expect the broker to
hold the request instead, so :func:`_hold` keeps re-asking — on every group change
anywhere (the group :class:`~kafkasim.server.api.Waker`) and at least every 100 ms, which
also drives the coordinator's clock-based deadlines — until the answer is COMPLETE, an
error, or the wait bound passes. Waiting is a coroutine sleep, so other connections
are served meanwhile.

Group bytes are opaque, as in Kafka: the leader's SyncGroup assignment bytes reach each
member unchanged (``user_data`` and all: faust and Kafka Streams keep their table and
standby assignments there), and JoinGroup/DescribeGroups return each member's protocol
metadata as the member sent it. The coordinator decodes the topic-partitions its own
tools need beside the bytes, never instead of them; an assignment that an in-process
leader gave as topic-partitions goes out as ``ConsumerProtocolAssignment`` v0. Any
protocol type works (``consumer``, ``connect``, ...): only ``consumer`` bytes are decoded.
Loop-thread coroutines; broker calls run on the executor.
"""

from __future__ import annotations

import time
from collections import defaultdict

from kafkasim.errors import RebalanceInProgressError, UnknownTopicOrPartitionError
from kafkasim.protocol.group import COMPLETE, NO_GENERATION
from kafkasim.server.api import api, error_code
from kafkasim.server.codec import ms
from kafkasim.protocol.consumer_protocol import encode_assignment, subscription_bytes
from kafkasim.types import OffsetAndMetadata, TopicPartition

POLL_INTERVAL_S = 0.1
HOLD_GRACE_S = 5.0
MAX_SYNC_HOLD_S = 300.0


# ------------------------------------------------------------------ holding requests

async def _hold(ctx, call, deadline: float):
    """Call ``call()`` (a coroutine factory returning a Join/SyncResult) until COMPLETE or
    ``deadline`` (monotonic seconds); raises what the coordinator raises."""
    result = await call()
    ctx.group_waker.notify()
    while result.status != COMPLETE:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not ctx.alive():
            raise RebalanceInProgressError("the rebalance did not complete in time; rejoin")
        await ctx.group_waker.wait(min(POLL_INTERVAL_S, remaining))
        result = await call()
        if result.status == COMPLETE:
            ctx.group_waker.notify()
    return result


@api(11, "JoinGroup", 0, 7)
async def join_group(ctx, req):
    body = req.body
    session_ms = ms(body.session_timeout)
    rebalance_ms = ms(body.rebalance_timeout) if hasattr(body, "rebalance_timeout") else session_ms
    protocols = [(p.name, bytes(p.metadata)) for p in body.protocols]
    instance = getattr(body, "group_instance_id", None)
    member_id = body.member_id
    kwargs = dict(protocols=protocols, protocol_type=body.protocol_type, session_timeout_ms=session_ms,
                  rebalance_timeout_ms=rebalance_ms, group_instance_id=instance,
                  client_id=req.client_id or "", client_host=ctx.client_host)
    state = {"member_id": member_id}

    async def call():
        result = await ctx.call(ctx.broker.join_group, body.group_id, state["member_id"], **kwargs)
        state["member_id"] = result.member_id
        return result

    deadline = time.monotonic() + max(rebalance_ms, 0) / 1000.0 + HOLD_GRACE_S
    try:
        result = await _hold(ctx, call, deadline)
    except Exception as exc:
        return {"error_code": error_code(exc), "generation_id": NO_GENERATION,
                "protocol_type": body.protocol_type, "protocol_name": None if req.api_version >= 7 else "",
                "leader": "", "member_id": state["member_id"], "members": []}
    return {"error_code": 0, "generation_id": result.generation_id, "protocol_type": body.protocol_type,
            "protocol_name": result.protocol_name, "leader": result.leader_id or "",
            "member_id": result.member_id,
            "members": [{"member_id": mid, "group_instance_id": gid,
                         "metadata": subscription_bytes(body.protocol_type, meta)}
                        for mid, gid, meta in result.members]}


@api(14, "SyncGroup", 0, 5)
async def sync_group(ctx, req):
    body = req.body
    instance = getattr(body, "group_instance_id", None)
    try:
        assignments = None
        if body.assignments:
            assignments = {a.member_id: bytes(a.assignment) for a in body.assignments}

        async def call():
            return await ctx.call(ctx.broker.sync_group, body.group_id, body.member_id,
                                  body.generation_id, assignments, group_instance_id=instance)

        result = await _hold(ctx, call, time.monotonic() + MAX_SYNC_HOLD_S)
    except Exception as exc:
        return {"error_code": error_code(exc), "assignment": b""}
    return {"error_code": 0, "protocol_type": getattr(body, "protocol_type", None) or "consumer",
            "protocol_name": result.protocol_name, "assignment": _assignment_bytes(result)}


def _assignment_bytes(result) -> bytes:
    """What the leader sent for this member, unchanged; an in-process leader's
    topic-partitions as ConsumerProtocolAssignment v0."""
    if result.assignment_bytes is not None:
        return result.assignment_bytes
    return encode_assignment(result.assignment)


@api(12, "Heartbeat", 0, 4)
async def heartbeat(ctx, req):
    body = req.body
    _, code, _ = await ctx.attempt(ctx.broker.heartbeat, body.group_id, body.member_id,
                                   body.generation_id,
                                   group_instance_id=getattr(body, "group_instance_id", None))
    ctx.group_waker.notify()
    return {"error_code": code}


@api(13, "LeaveGroup", 0, 5)
async def leave_group(ctx, req):
    body = req.body
    if req.api_version < 3:
        _, code, _ = await ctx.attempt(ctx.broker.leave_group, body.group_id, body.member_id)
        ctx.group_waker.notify()
        return {"error_code": code}
    members = []
    for m in body.members:
        _, code, _ = await ctx.attempt(ctx.broker.leave_group, body.group_id, m.member_id,
                                       group_instance_id=m.group_instance_id)
        members.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "error_code": code})
    ctx.group_waker.notify()
    return {"error_code": 0, "members": members}


def _commit(broker, group_id, member_id, generation, instance, offsets: dict, api_version: int) -> dict:
    """Commit what can be committed; ``{TopicPartition: error code}`` (runs on the executor)."""
    codes, valid = {}, {}
    for tp, om in offsets.items():
        try:
            if not 0 <= tp.partition < broker.partition_count(tp.topic):
                raise UnknownTopicOrPartitionError(
                    f"This server does not host this topic-partition: {tp.topic}-{tp.partition}")
            valid[tp] = om
        except Exception as exc:
            codes[tp] = error_code(exc)
    if valid:
        try:
            broker.offset_commit(group_id, member_id, generation, valid, group_instance_id=instance,
                                 api_version=api_version)
            codes.update(dict.fromkeys(valid, 0))
        except Exception as exc:
            codes.update(dict.fromkeys(valid, error_code(exc)))
    return codes


@api(8, "OffsetCommit", 2, 9)
async def offset_commit(ctx, req):
    body = req.body
    offsets = {}
    for t in body.topics:
        for p in t.partitions:
            offsets[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset, p.committed_metadata or "",
                getattr(p, "committed_leader_epoch", -1))
    codes, code, _ = await ctx.attempt(
        _commit, ctx.broker, body.group_id, body.member_id, body.generation_id_or_member_epoch,
        getattr(body, "group_instance_id", None), offsets, req.api_version)
    ctx.group_waker.notify()
    return {"topics": [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index,
         "error_code": code or codes[TopicPartition(t.name, p.partition_index)]}
        for p in t.partitions]} for t in body.topics]}


@api(9, "OffsetFetch", 1, 9)
async def offset_fetch(ctx, req):
    """v1–7: one group; v8+: a list of groups, each answered on its own (v9: with the
    consumer group member's id and epoch, checked as Kafka's ``validateOffsetFetch``)."""
    body = req.body
    if req.api_version < 8:
        code, topics = await _fetch_group(ctx, body.group_id, body.topics, None, -1)
        return {"error_code": code, "topics": topics}
    groups = []
    for g in body.groups:
        code, topics = await _fetch_group(ctx, g.group_id, g.topics, getattr(g, "member_id", None),
                                          getattr(g, "member_epoch", -1))
        groups.append({"group_id": g.group_id, "error_code": code, "topics": topics})
    return {"groups": groups}


async def _fetch_group(ctx, group_id, topics, member_id, member_epoch) -> tuple[int, list]:
    if topics is None:
        partitions = None
    else:
        partitions = [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]
    committed, code, _ = await ctx.attempt(ctx.broker.offset_fetch, group_id, partitions, member_id=member_id,
                                           member_epoch=member_epoch)
    if code:
        return code, []
    by_topic = defaultdict(list)
    for tp in (partitions if partitions is not None else sorted(committed)):
        om = committed.get(tp)
        by_topic[tp.topic].append({
            "partition_index": tp.partition, "error_code": 0,
            "committed_offset": -1 if om is None else om.offset,
            "committed_leader_epoch": -1 if om is None else om.leader_epoch,
            "metadata": "" if om is None else om.metadata})
    return 0, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


@api(15, "DescribeGroups", 0, 5)
async def describe_groups(ctx, req):
    out = []
    for group_id in req.body.groups:
        d, code, _ = await ctx.attempt(ctx.broker.describe_group, group_id)
        if code:
            out.append({"error_code": code, "group_id": group_id, "group_state": "", "protocol_type": "",
                        "protocol_data": "", "members": []})
            continue
        if d.get("type") in ("consumer", "share"):
            # Kafka's describeGroups looks the id up as a classic group: a consumer or share group
            # is not one, and is answered as Dead with no members (ConsumerGroupDescribe and
            # ShareGroupDescribe describe them)
            out.append({"error_code": 0, "group_id": group_id, "group_state": "Dead", "protocol_type": "",
                        "protocol_data": "", "members": []})
            continue
        consumer = d["protocol_type"] == "consumer"
        ptype = d["protocol_type"]
        out.append({"error_code": 0, "group_id": group_id, "group_state": d["state"],
                    "protocol_type": d["protocol_type"], "protocol_data": d["protocol"] or "",
                    "members": [{"member_id": m["member_id"], "group_instance_id": m["group_instance_id"],
                                 "client_id": m["client_id"] or "",
                                 "client_host": m.get("client_host") or "",
                                 "member_metadata": subscription_bytes(ptype, m.get("metadata")),
                                 "member_assignment": (m["assignment_bytes"] if m.get("assignment_bytes") is not None
                                                       else encode_assignment(m["assignment"]) if consumer
                                                       else b"")}
                                for m in d["members"]]})
    return {"groups": out}


@api(16, "ListGroups", 0, 5)
async def list_groups(ctx, req):
    """Every group; v4 ``states_filter``, v5 ``types_filter`` (classic, consumer; case-insensitive
    as Kafka) and each group's ``group_type``."""
    groups, code, _ = await ctx.attempt(ctx.broker.list_groups)
    if code:
        return {"error_code": code, "groups": []}
    states = getattr(req.body, "states_filter", None)
    types = getattr(req.body, "types_filter", None)
    wanted = {s.lower() for s in states} if states else None
    wanted_types = {t.lower() for t in types} if types else None
    return {"error_code": 0, "groups": [
        {"group_id": g["group_id"], "protocol_type": g["protocol_type"], "group_state": g["state"],
         "group_type": g.get("type", "classic")}
        for g in groups if (wanted is None or g["state"].lower() in wanted)
        and (wanted_types is None or g.get("type", "classic") in wanted_types)]}


@api(42, "DeleteGroups", 0, 2)
async def delete_groups(ctx, req):
    """``Broker.delete_group`` per group: Empty groups only (NON_EMPTY_GROUP otherwise,
    GROUP_ID_NOT_FOUND for an unknown one)."""
    out = []
    for group_id in req.body.groups_names:
        _, code, _ = await ctx.attempt(ctx.broker.delete_group, group_id)
        out.append({"group_id": group_id, "error_code": code})
    ctx.group_waker.notify()
    return {"results": out}


@api(47, "OffsetDelete", 0, 0)
async def offset_delete(ctx, req):
    """``Broker.delete_offsets``: GROUP_ID_NOT_FOUND / NON_EMPTY_GROUP for the whole request;
    per partition UNKNOWN_TOPIC_OR_PARTITION or GROUP_SUBSCRIBED_TO_TOPIC, else NONE."""
    body = req.body
    partitions = [TopicPartition(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    results, code, _ = await ctx.attempt(ctx.broker.delete_offsets, body.group_id, partitions)
    ctx.group_waker.notify()
    if code:
        return {"error_code": code, "topics": []}
    return {"error_code": 0, "topics": [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index,
         "error_code": error_code(exc) if (exc := results[TopicPartition(t.name, p.partition_index)]) else 0}
        for p in t.partitions]} for t in body.topics]}
