"""The share group calls of :class:`kafkasim.server.remote.RemoteBroker` (KIP-932), as a mixin
over :class:`RemoteConnection`: ShareGroupHeartbeat, ShareFetch and ShareAcknowledge (with the
member's share session), ShareGroupDescribe, ListGroups (type ``share``), DeleteGroups,
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets.

The share session is kept here, per (group, member), as a Kafka client keeps it per broker:
the first ShareFetch opens it (epoch 0) naming every partition, the next ones name only the
partitions added and forget the ones dropped, and ``share_session_close`` ends it with a
final ShareAcknowledge (epoch -1), which releases the member's records. A ShareFetch over the
wire does not wait (``MaxWaitMs`` 0), as ``fetch`` does not. Topics travel as topic ids,
looked up with Metadata.

Thread-safety: as the connection (one lock serialises the exchanges).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence

from kafkasim.errors import (
    GroupIdNotFoundError, InvalidShareSessionEpochError, NonEmptyGroupError, ShareSessionNotFoundError,
    UnknownTopicOrPartitionError, for_code,
)
from kafkasim.protocol.share_group import (
    AcknowledgementBatch, AcquiredRecords, ShareFetchPartition, ShareHeartbeatResult,
)
from kafkasim.types import TopicPartition
from kafkasim.server.remote_conn import _code, _raise

__all__ = ["ShareCalls"]

SHARE_GROUP_TYPE = "share"


def _error(code, message: Optional[str] = None):
    code = _code(code)
    if not code:
        return None
    cls = for_code(code)
    return cls(message or cls.description)


class ShareCalls:
    """Share-group calls over the wire (mixin; needs ``_call`` and the topic calls)."""

    def _share_sessions(self) -> dict:
        return self.__dict__.setdefault("_share_session_state", {})

    def _topic_id_maps(self) -> tuple[dict, dict]:
        meta = self._metadata(None)
        by_id = {t.topic_id: t.name for t in meta.topics if t.topic_id is not None}
        return by_id, {name: tid for tid, name in by_id.items()}

    # ---------------------------------------------------------------- membership

    def share_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int, *,
                              subscribed_topic_names: Optional[Sequence[str]] = None,
                              rack_id: Optional[str] = None, client_id: str = "",
                              client_host: str = "") -> ShareHeartbeatResult:
        answer = self._call(76, {"group_id": group_id, "member_id": member_id, "member_epoch": member_epoch,
                                 "rack_id": rack_id,
                                 "subscribed_topic_names": None if subscribed_topic_names is None
                                 else list(subscribed_topic_names)})
        _raise(answer.error_code, answer.error_message, f"group {group_id!r}")
        assignment = None
        if answer.assignment is not None:
            by_id, _ = self._topic_id_maps()
            assignment = {by_id[t.topic_id]: sorted(int(p) for p in t.partitions)
                          for t in answer.assignment.topic_partitions if t.topic_id in by_id}
        return ShareHeartbeatResult(answer.member_id or member_id, answer.member_epoch,
                                    int(answer.heartbeat_interval.total_seconds() * 1000), assignment)

    def share_group_describe(self, group_ids: Iterable[str]) -> list[dict]:
        answer = self._call(77, {"group_ids": list(group_ids), "include_authorized_operations": False})
        out = []
        for g in answer.groups:
            if _code(g.error_code):
                out.append({"group_id": g.group_id, "error": _error(g.error_code, g.error_message)})
                continue
            out.append({
                "group_id": g.group_id, "error": None, "group_state": g.group_state, "group_epoch": g.group_epoch,
                "assignment_epoch": g.assignment_epoch, "assignor_name": g.assignor_name,
                "members": [{"member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                             "client_id": m.client_id, "client_host": m.client_host,
                             "subscribed_topic_names": list(m.subscribed_topic_names),
                             "assignment": [(t.topic_id, t.topic_name, sorted(int(p) for p in t.partitions))
                                            for t in m.assignment.topic_partitions]}
                            for m in g.members]})
        return out

    def list_share_groups(self) -> list[dict]:
        answer = self._call(16, {"states_filter": [], "types_filter": [SHARE_GROUP_TYPE]})
        _raise(answer.error_code, None, "ListGroups")
        return sorted(({"group_id": g.group_id, "group_state": g.group_state, "protocol_type": g.protocol_type}
                       for g in answer.groups), key=lambda g: g["group_id"])

    def is_share_group(self, group_id: str) -> bool:
        return any(g["group_id"] == group_id for g in self.list_share_groups())

    def delete_share_group(self, group_id: str) -> None:
        if not self.is_share_group(group_id):
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        answer = self._call(42, {"groups_names": [group_id]})
        code = _code(answer.results[0].error_code)
        if code == NonEmptyGroupError.errno:
            raise NonEmptyGroupError(f"group {group_id!r} has active members")
        _raise(code, None, f"group {group_id!r}")

    def tick_share_groups(self) -> None:
        """In-process only: the server runs its share group timers on real time."""
        return None

    # ---------------------------------------------------------------- records

    def _ack_topics(self, acknowledgements, by_name: dict, partitions: Iterable[TopicPartition] = ()) -> list:
        parts: dict = {}
        for tp in partitions:
            parts.setdefault(tp, [])
        for tp, batches in (acknowledgements or {}).items():
            parts.setdefault(tp, []).extend(batches)
        topics: dict = {}
        for tp, batches in parts.items():
            tid = by_name.get(tp.topic)
            if tid is None:
                raise UnknownTopicOrPartitionError(f"Unknown topic: {tp.topic!r}")
            topics.setdefault(tid, []).append({
                "partition_index": tp.partition,
                "acknowledgement_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                             "acknowledge_types": list(b.acknowledge_types)}
                                            for b in sorted(batches, key=lambda b: b.first_offset)]})
        return [{"topic_id": tid, "partitions": ps} for tid, ps in topics.items()]

    def share_fetch(self, group_id: str, member_id: str, partitions: Iterable[TopicPartition], *,
                    max_records: int = 500, max_bytes: int = 52_428_800, batch_size: int = 500,
                    acknowledgements: Optional[Mapping[TopicPartition, Sequence[AcknowledgementBatch]]] = None
                    ) -> dict[TopicPartition, ShareFetchPartition]:
        wanted = list(dict.fromkeys(partitions))
        by_id, by_name = self._topic_id_maps()
        sessions = self._share_sessions()
        key = (group_id, member_id)
        session = sessions.get(key)
        if session is None:
            if acknowledgements:
                raise ShareSessionNotFoundError(f"no share session for member {member_id} of group "
                                                f"{group_id}: its acknowledgements cannot be sent")
            epoch, added, forgotten = 0, wanted, []
        else:
            epoch = session["epoch"]
            added = [tp for tp in wanted if tp not in session["partitions"]]
            forgotten = [tp for tp in session["partitions"] if tp not in wanted]
        forgotten_topics: dict = {}
        for tp in forgotten:
            if tp.topic in by_name:
                forgotten_topics.setdefault(by_name[tp.topic], []).append(tp.partition)
        answer = self._call(78, {
            "group_id": group_id, "member_id": member_id, "share_session_epoch": epoch, "max_wait": 0,
            "min_bytes": 1, "max_bytes": max_bytes, "max_records": max_records, "batch_size": batch_size,
            "topics": self._ack_topics(acknowledgements, by_name, added),
            "forgotten_topics_data": [{"topic_id": t, "partitions": ps} for t, ps in forgotten_topics.items()]})
        code = _code(answer.error_code)
        if code in (ShareSessionNotFoundError.errno, InvalidShareSessionEpochError.errno):
            sessions.pop(key, None)
        _raise(code, answer.error_message, f"group {group_id!r}")
        sessions[key] = {"epoch": epoch + 1, "partitions": set(wanted)}
        out: dict[TopicPartition, ShareFetchPartition] = {}
        for t in answer.responses:
            name = by_id.get(t.topic_id)
            if name is None:
                continue
            for p in t.partitions:
                out[TopicPartition(name, p.partition_index)] = ShareFetchPartition(
                    error=_error(p.error_code, p.error_message),
                    acknowledge_error=_error(p.acknowledge_error_code, p.acknowledge_error_message),
                    records=bytes(p.records or b""),
                    acquired=[AcquiredRecords(a.first_offset, a.last_offset, a.delivery_count)
                              for a in p.acquired_records],
                    high_watermark=-1, log_start_offset=-1)
        return out

    def share_acknowledge(self, group_id: str, member_id: str,
                          acknowledgements: Mapping[TopicPartition, Sequence[AcknowledgementBatch]]
                          ) -> dict[TopicPartition, Optional[Exception]]:
        return self._share_acknowledge(group_id, member_id, acknowledgements, final=False)

    def _share_acknowledge(self, group_id: str, member_id: str, acknowledgements, final: bool) -> dict:
        sessions = self._share_sessions()
        key = (group_id, member_id)
        session = sessions.get(key)
        if session is None:
            raise ShareSessionNotFoundError(f"no share session for member {member_id} of group {group_id}")
        by_id, by_name = self._topic_id_maps()
        answer = self._call(79, {"group_id": group_id, "member_id": member_id,
                                 "share_session_epoch": -1 if final else session["epoch"],
                                 "topics": self._ack_topics(acknowledgements, by_name)})
        code = _code(answer.error_code)
        if final or code in (ShareSessionNotFoundError.errno, InvalidShareSessionEpochError.errno):
            sessions.pop(key, None)
        _raise(code, answer.error_message, f"group {group_id!r}")
        if not final:
            session["epoch"] += 1
        return {TopicPartition(by_id[t.topic_id], p.partition_index): _error(p.error_code, p.error_message)
                for t in answer.responses if t.topic_id in by_id for p in t.partitions}

    def share_session_close(self, group_id: str, member_id: str) -> None:
        """End the member's share session (a final ShareAcknowledge): the server releases the
        records it still holds. Nothing to do without a session."""
        if (group_id, member_id) in self._share_sessions():
            self._share_acknowledge(group_id, member_id, {}, final=True)

    # ---------------------------------------------------------------- offsets

    def describe_share_group_offsets(self, group_id: str, partitions: Optional[Iterable[TopicPartition]] = None
                                     ) -> dict[TopicPartition, dict]:
        topics = None
        if partitions is not None:
            by_topic: dict = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]
        answer = self._call(90, {"groups": [{"group_id": group_id, "topics": topics}]})
        g = answer.groups[0]
        _raise(g.error_code, g.error_message, f"group {group_id!r}")
        return {TopicPartition(t.topic_name, p.partition_index): {
                    "start_offset": p.start_offset, "leader_epoch": p.leader_epoch,
                    "lag": getattr(p, "lag", -1), "error": _error(p.error_code, p.error_message)}
                for t in g.topics for p in t.partitions}

    def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]
                                  ) -> dict[TopicPartition, Optional[Exception]]:
        by_topic: dict = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "start_offset": offset})
        answer = self._call(91, {"group_id": group_id,
                                 "topics": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]})
        _raise(answer.error_code, answer.error_message, f"group {group_id!r}")
        return {TopicPartition(t.topic_name, p.partition_index): _error(p.error_code, p.error_message)
                for t in answer.responses for p in t.partitions}

    def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]) -> dict[str, Optional[Exception]]:
        answer = self._call(92, {"group_id": group_id, "topics": [{"topic_name": t} for t in topics]})
        _raise(answer.error_code, answer.error_message, f"group {group_id!r}")
        return {t.topic_name: _error(t.error_code, t.error_message) for t in answer.responses}
