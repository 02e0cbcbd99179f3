"""Handlers for Kafka 4's consumer group protocol (KIP-848): ConsumerGroupHeartbeat (API 68)
and ConsumerGroupDescribe (API 69).

Each translates the frame into one call of the broker's consumer group API
(:mod:`kafkasim.broker.consumer_group_api`) and its answer back; the errors are Kafka's codes
with Kafka's messages (``error_message``). Assignments travel as topic ids, as in Kafka: a
client maps them to names with Metadata v10+ (which carries every topic's id), and
ConsumerGroupDescribe answers both the id and the name.

An error answer carries Kafka's defaults in the fields it does not set (member epoch 0, group
and assignment epochs 0, no member id), as Kafka's ``getErrorResponse`` and its coordinator's
error answers do. When ``group.coordinator.rebalance.protocols`` leaves out ``consumer`` both
APIs are still advertised by ApiVersions, as Kafka's are (its ``ApiVersionsResponse.filterApis``
leaves out only the telemetry APIs), and answer UNSUPPORTED_VERSION with no error message: the
gate of Kafka's ``KafkaApis.handleConsumerGroupHeartbeat``/``handleConsumerGroupDescribe``
(``isConsumerGroupProtocolEnabled``), whose ``getErrorResponse`` sets the code alone.

A heartbeat is answered at once (no holding: the consumer protocol has no join barrier);
it wakes the group waker, as the classic handlers do. Loop-thread coroutines; broker calls
run on the executor.
"""

from __future__ import annotations

import uuid
from typing import Optional

from kafkasim.errors import BrokerResponseError, UnsupportedVersionError
from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from kafkasim.server.api import api, error_code, error_message
from kafkasim.server.codec import ms

__all__ = ["consumer_group_heartbeat", "consumer_group_describe"]


def _message(exc: BaseException) -> Optional[str]:
    """Kafka's ``error_message``: the message of one of Kafka's errors as Kafka words it; none
    for UNSUPPORTED_VERSION (the consumer protocol is not enabled: KafkaApis answers the code alone)."""
    if isinstance(exc, UnsupportedVersionError):
        return None
    return str(exc) if isinstance(exc, BrokerResponseError) else error_message(exc)


def _owned(topic_partitions):
    if topic_partitions is None:
        return None
    return {tp.topic_id: frozenset(int(p) for p in tp.partitions) for tp in topic_partitions}


@api(68, "ConsumerGroupHeartbeat", 0, 1)
async def consumer_group_heartbeat(ctx, req):
    body = req.body
    member_id = body.member_id
    if req.api_version == 0 and not member_id and body.member_epoch == 0:
        # v0: the coordinator names a joining member that came without an id (Kafka 4.0's
        # pre-KIP-1082 rule); from v1 the client must choose it (INVALID_REQUEST otherwise)
        member_id = str(uuid.uuid4())
    names = body.subscribed_topic_names
    request = ConsumerGroupHeartbeatRequest(
        group_id=body.group_id, member_id=member_id, member_epoch=body.member_epoch,
        instance_id=body.instance_id, rack_id=body.rack_id, rebalance_timeout_ms=ms(body.rebalance_timeout),
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=getattr(body, "subscribed_topic_regex", None),
        server_assignor=body.server_assignor, topic_partitions=_owned(body.topic_partitions))
    try:
        r = await ctx.call(ctx.broker.consumer_group_heartbeat, request, client_id=req.client_id or "",
                           client_host=ctx.client_host or "")
    except Exception as exc:
        code = error_code(exc)
        return {"error_code": code, "error_message": _message(exc), "member_id": None,
                "member_epoch": 0, "heartbeat_interval": 0}
    finally:
        ctx.group_waker.notify()
    assignment = None
    if r.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                                           for t, ps in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))]}
    return {"error_code": 0, "error_message": None, "member_id": r.member_id, "member_epoch": r.member_epoch,
            "heartbeat_interval": r.heartbeat_interval_ms, "assignment": assignment}


@api(69, "ConsumerGroupDescribe", 0, 1)
async def consumer_group_describe(ctx, req):
    try:
        groups = await ctx.call(ctx.broker.consumer_group_describe, list(req.body.group_ids))
        code = message = None
    except Exception as exc:
        code, message = error_code(exc), _message(exc)
    if code:
        return {"groups": [{"error_code": code, "error_message": message, "group_id": g, "group_state": "",
                            "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": []}
                           for g in req.body.group_ids]}
    out = []
    for d in groups:
        if d["error"] is not None:
            out.append({"error_code": error_code(d["error"]), "error_message": _message(d["error"]),
                        "group_id": d["group_id"], "group_state": "", "group_epoch": 0, "assignment_epoch": 0,
                        "assignor_name": "", "members": []})
            continue
        out.append({
            "error_code": 0, "error_message": None, "group_id": d["group_id"], "group_state": d["state"],
            "group_epoch": d["group_epoch"], "assignment_epoch": d["assignment_epoch"],
            "assignor_name": d["assignor_name"],
            "members": [{
                "member_id": m["member_id"], "instance_id": m["instance_id"], "rack_id": m["rack_id"],
                "member_epoch": m["member_epoch"], "client_id": m["client_id"], "client_host": m["client_host"],
                "subscribed_topic_names": m["subscribed_topic_names"],
                "subscribed_topic_regex": m["subscribed_topic_regex"],
                "assignment": _assignment(m["assignment"]), "target_assignment": _assignment(m["target_assignment"]),
                # Kafka's member type: 1 consumer, 0 classic (a JoinGroup member of a mixed group)
                "member_type": 0 if m["member_type"] == "classic" else 1,
            } for m in d["members"]],
            # -2147483648: authorized operations not asked for (no ACLs here)
            "authorized_operations": -2147483648,
        })
    return {"groups": out}


def _assignment(rows) -> dict:
    return {"topic_partitions": [{"topic_id": t, "topic_name": name, "partitions": ps} for t, name, ps in rows]}
