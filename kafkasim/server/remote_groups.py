"""The group calls of :class:`kafkasim.server.remote.RemoteBroker` (FindCoordinator-free:
one broker; JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
ListGroups, DescribeGroups, DeleteGroups), as a mixin over :class:`RemoteConnection`. A
consumer group (KIP-848) is described with ConsumerGroupDescribe when DescribeGroups calls
its id Dead, as Kafka's admin client does.

Thread-safety: as the connection (one lock serialises the exchanges).
"""

from __future__ import annotations

import uuid
from typing import Optional

from kafkasim.errors import (
    GroupIdNotFoundError, NonEmptyGroupError, UnknownTopicOrPartitionError, for_code,
)
from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatResponse
from kafkasim.protocol.group import COMPLETE, JoinResult, SyncResult
from kafkasim.types import OffsetAndMetadata, TopicPartition
from kafkasim.server.codec import ms
from kafkasim.server.remote_conn import HOLD_MARGIN_S, LATEST, _code, _raise

__all__ = ["GroupCalls"]


class GroupCalls:
    """Consumer-group calls over the wire (mixin; needs ``_call`` and the topic calls)."""

    def join_group(self, group_id: str, member_id: str = "", *, protocols, protocol_type: str = "consumer",
                   session_timeout_ms: int = 45_000, rebalance_timeout_ms: int = 300_000,
                   group_instance_id: Optional[str] = None, client_id: str = "",
                   client_host: Optional[str] = None) -> JoinResult:
        """JoinGroup, held by the server until the rebalance completes: always COMPLETE."""
        from kafkasim.protocol.consumer_protocol import decode_subscription, encode_subscription

        wire = [{"name": name, "metadata": meta if isinstance(meta, (bytes, bytearray))
                 else encode_subscription(meta)} for name, meta in protocols]
        answer = self._call(11, {"group_id": group_id, "session_timeout": session_timeout_ms,
                                 "rebalance_timeout": rebalance_timeout_ms, "member_id": member_id,
                                 "group_instance_id": group_instance_id, "protocol_type": protocol_type,
                                 "protocols": wire},
                            client_id=client_id or None,
                            timeout=rebalance_timeout_ms / 1000 + HOLD_MARGIN_S)
        _raise(answer.error_code, None, f"group {group_id!r}")
        consumer = protocol_type == "consumer"
        members = tuple((m.member_id, m.group_instance_id,
                         decode_subscription(m.metadata) if consumer else bytes(m.metadata))
                        for m in answer.members)
        return JoinResult(COMPLETE, answer.member_id, answer.generation_id, answer.protocol_name,
                          answer.leader or None, members)

    def sync_group(self, group_id: str, member_id: str, generation_id: int,
                   assignments: Optional[dict] = None, *, group_instance_id: Optional[str] = None) -> SyncResult:
        """SyncGroup, held by the server until the leader's assignment arrives."""
        from kafkasim.protocol.consumer_protocol import decode_assignment, encode_assignment

        wire = [{"member_id": m, "assignment": encode_assignment(tps)} for m, tps in (assignments or {}).items()]
        answer = self._call(14, {"group_id": group_id, "generation_id": generation_id, "member_id": member_id,
                                 "group_instance_id": group_instance_id, "protocol_type": "consumer",
                                 "protocol_name": None, "assignments": wire},
                            timeout=300 + HOLD_MARGIN_S)
        _raise(answer.error_code, None, f"group {group_id!r}")
        assignment = decode_assignment(answer.assignment) if answer.assignment else []
        return SyncResult(COMPLETE, tuple(assignment), getattr(answer, "protocol_name", None), generation_id)

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, *,
                  group_instance_id: Optional[str] = None) -> None:
        answer = self._call(12, {"group_id": group_id, "generation_id": generation_id,
                                 "member_id": member_id, "group_instance_id": group_instance_id})
        _raise(answer.error_code, None, f"group {group_id!r}, member {member_id!r}")

    def leave_group(self, group_id: str, member_id: str = "", *,
                    group_instance_id: Optional[str] = None) -> None:
        if self._versions.get(13, 0) >= 3:
            answer = self._call(13, {"group_id": group_id, "members": [
                {"member_id": member_id, "group_instance_id": group_instance_id, "reason": None}]})
            _raise(answer.error_code, None, f"group {group_id!r}")
            for m in answer.members:
                _raise(m.error_code, None, f"group {group_id!r}, member {m.member_id!r}")
        else:
            answer = self._call(13, {"group_id": group_id, "member_id": member_id})
            _raise(answer.error_code, None, f"group {group_id!r}, member {member_id!r}")

    def consumer_group_heartbeat(self, request, *, client_id: str = "", client_host: str = ""):
        """ConsumerGroupHeartbeat (KIP-848, v1: the member chooses its id): the broker API's
        call over the wire; Kafka's error codes are raised as kafkasim exceptions.
        ``client_host`` is the server's view of this connection, so it is not sent."""
        owned = request.topic_partitions
        answer = self._call(68, {
            "group_id": request.group_id, "member_id": request.member_id, "member_epoch": request.member_epoch,
            "instance_id": request.instance_id, "rack_id": request.rack_id,
            "rebalance_timeout": request.rebalance_timeout_ms,
            "subscribed_topic_names": None if request.subscribed_topic_names is None
            else list(request.subscribed_topic_names),
            "subscribed_topic_regex": request.subscribed_topic_regex, "server_assignor": request.server_assignor,
            "topic_partitions": None if owned is None else [
                {"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(owned.items(), key=lambda kv: str(kv[0]))]},
            client_id=client_id or None)
        _raise(answer.error_code, answer.error_message, f"group {request.group_id!r}")
        assignment = None
        if answer.assignment is not None:
            assignment = {t.topic_id if isinstance(t.topic_id, uuid.UUID) else uuid.UUID(str(t.topic_id)):
                          frozenset(t.partitions) for t in answer.assignment.topic_partitions}
        return ConsumerGroupHeartbeatResponse(answer.member_id, answer.member_epoch, ms(answer.heartbeat_interval),
                                              assignment)

    def offset_commit(self, group_id: str, member_id: str, generation_id: int, offsets: dict, *,
                      group_instance_id: Optional[str] = None) -> None:
        by_topic: dict[str, list] = {}
        for tp, om in sorted(offsets.items()):
            om = om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(*om) \
                if isinstance(om, tuple) else OffsetAndMetadata(int(om))
            by_topic.setdefault(tp[0], []).append(
                {"partition_index": tp[1], "committed_offset": om.offset,
                 "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata})
        answer = self._call(8, {"group_id": group_id, "generation_id_or_member_epoch": generation_id,
                                "member_id": member_id, "group_instance_id": group_instance_id,
                                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        for t in answer.topics:
            for p in t.partitions:
                if _code(p.error_code) == UnknownTopicOrPartitionError.errno:
                    raise UnknownTopicOrPartitionError(
                        f"This server does not host this topic-partition: {t.name}-{p.partition_index}")
                _raise(p.error_code, None, f"group {group_id!r}, {t.name}-{p.partition_index}")

    def delete_offsets(self, group_id: str, partitions) -> dict:
        """OffsetDelete: ``{TopicPartition: None or its error}`` for the group's committed
        offsets of ``partitions`` (GROUP_ID_NOT_FOUND / NON_EMPTY_GROUP raise)."""
        by_topic: dict[str, list] = {}
        for tp in partitions:
            by_topic.setdefault(tp[0], []).append({"partition_index": tp[1]})
        answer = self._call(47, {"group_id": group_id,
                                 "topics": [{"name": t, "partitions": ps} for t, ps in sorted(by_topic.items())]})
        _raise(answer.error_code, None, f"group {group_id!r}")
        out = {}
        for t in answer.topics:
            for p in t.partitions:
                code = _code(p.error_code)
                tp = TopicPartition(t.name, p.partition_index)
                out[tp] = None if not code else for_code(code)(
                    f"{for_code(code).description} (group {group_id!r}, {t.name}-{p.partition_index})")
        return out

    def offset_fetch(self, group_id: str, partitions=None) -> dict:
        topics = None
        if partitions is not None:
            by_topic: dict[str, list] = {}
            for tp in partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
            if not topics:
                return {}
        answer = self._call(9, {"group_id": group_id, "topics": topics, "require_stable": False})
        _raise(answer.error_code, None, f"group {group_id!r}")
        out = {}
        for t in answer.topics:
            for p in t.partitions:
                # -1 is OffsetFetch's "no committed offset"; other negatives are sentinels a
                # tool committed, returned as they are (as the in-process Broker returns them)
                if _code(p.error_code) or p.committed_offset == -1:
                    continue
                out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, p.metadata or "", getattr(p, "committed_leader_epoch", -1))
        return dict(sorted(out.items()))

    def list_groups(self) -> list[dict]:
        answer = self._call(16, {"states_filter": [], "types_filter": []})
        _raise(answer.error_code, None, "ListGroups")
        return sorted(({"group_id": g.group_id, "protocol_type": g.protocol_type,
                        "state": getattr(g, "group_state", "") or "",
                        "type": getattr(g, "group_type", "classic") or "classic"} for g in answer.groups),
                      key=lambda g: g["group_id"])

    def describe_group(self, group_id: str) -> dict:
        """The embedded broker's description from DescribeGroups, OffsetFetch and ListOffsets
        (``generation`` and ``leader`` are not on the wire: None)."""
        from kafkasim.protocol.consumer_protocol import decode_assignment

        answer = self._call(15, {"groups": [group_id], "include_authorized_operations": False})
        g = answer.groups[0]
        _raise(g.error_code, None, f"group {group_id!r}")
        state = g.group_state or "Dead"
        consumer = g.protocol_type == "consumer"
        members = [{"member_id": m.member_id, "group_instance_id": getattr(m, "group_instance_id", None),
                    "client_id": m.client_id, "client_host": m.client_host or None,
                    "assignment": decode_assignment(m.member_assignment)
                    if consumer and m.member_assignment else []}
                   for m in g.members]
        if state == "Dead" and self.version_of(69) is not None:
            consumer_group = self._describe_consumer_group(group_id)
            if consumer_group is not None:
                return self._with_lag(consumer_group)
        offsets = {} if state == "Dead" else self.offset_fetch(group_id)
        desc = {"group_id": group_id, "state": state, "protocol_type": g.protocol_type or "",
                "protocol": g.protocol_data or None, "generation": None if state != "Dead" else -1,
                "leader": None, "members": members, "offsets": offsets}
        return self._with_lag(desc)

    def _describe_consumer_group(self, group_id: str) -> Optional[dict]:
        """A consumer group (KIP-848) from ConsumerGroupDescribe, in ``Broker.describe_group``'s
        shape (``type`` "consumer", ``generation`` the group epoch); None when there is none."""
        answer = self._call(69, {"group_ids": [group_id], "include_authorized_operations": False})
        g = answer.groups[0]
        if _code(g.error_code) == GroupIdNotFoundError.errno:
            return None
        _raise(g.error_code, g.error_message, f"group {group_id!r}")
        members = [{"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                    "client_host": m.client_host or None, "member_epoch": m.member_epoch,
                    "member_type": "classic" if getattr(m, "member_type", 1) == 0 else "consumer",
                    "assignment": [TopicPartition(t.topic_name, p) for t in m.assignment.topic_partitions
                                   for p in t.partitions],
                    "target_assignment": [TopicPartition(t.topic_name, p) for t in m.target_assignment.topic_partitions
                                          for p in t.partitions]}
                   for m in g.members]
        return {"group_id": group_id, "type": "consumer", "state": g.group_state, "protocol_type": "consumer",
                "protocol": g.assignor_name or None, "generation": g.group_epoch, "leader": None,
                "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
                "members": members, "offsets": self.offset_fetch(group_id)}

    def _with_lag(self, desc: dict) -> dict:
        """``desc`` plus ``partitions``: committed offset, log end offset and lag per partition."""
        offsets, members = desc["offsets"], desc["members"]
        owners = {tuple(tp): m["member_id"] for m in members for tp in m["assignment"]}
        wanted = sorted(set(offsets) | {TopicPartition(*tp) for tp in owners})
        ends: dict[TopicPartition, Optional[int]] = {}
        for topic in sorted({tp.topic for tp in wanted}):
            ps = [tp.partition for tp in wanted if tp.topic == topic]
            try:
                got = self._list_offsets_many(topic, ps, LATEST)
            except UnknownTopicOrPartitionError:
                got = {}
            for p in ps:
                ends[TopicPartition(topic, p)] = got[p][0] if p in got else None
        rows = []
        for tp in wanted:
            om = offsets.get(tp)
            committed = None if om is None or om.offset < 0 else om.offset   # as Broker.describe_group
            leo = ends.get(tp)
            rows.append({"topic": tp.topic, "partition": tp.partition, "committed": committed,
                         "log_end_offset": leo, "member_id": owners.get(tuple(tp)),
                         "lag": None if committed is None or leo is None else max(0, leo - committed)})
        desc["partitions"] = rows
        return desc

    def describe_groups(self, group_ids) -> list[dict]:
        return [self.describe_group(g) for g in group_ids]

    def delete_group(self, group_id: str) -> None:
        answer = self._call(42, {"groups_names": [group_id]})
        r = answer.results[0]
        code = _code(r.error_code)
        if code == GroupIdNotFoundError.errno:
            raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
        if code == NonEmptyGroupError.errno:
            raise NonEmptyGroupError(f"group {group_id!r} has active members")
        _raise(code, None, f"group {group_id!r}")
