"""Records of consumer groups (KIP-848) in ``__consumer_offsets``: Kafka's exact bytes (pure codec).

Kafka's group coordinator keeps a consumer group as six record types in the group's
``__consumer_offsets`` partition, each a key and a value behind an int16 version. The key
version is the record type; keys are not flexible (int16-length strings), values are
version 0 and flexible (compact strings and arrays: unsigned varint length + 1, 0 for null;
each struct ends with tagged fields, written here as an empty set ``00``). Schemas from
Kafka's ``group-coordinator/src/main/resources/common/message/*.json``::

    3 ConsumerGroupMetadata             key: GroupId
                                        value: Epoch int32
    4 ConsumerGroupPartitionMetadata    key: GroupId
                                        value: Topics [TopicId uuid, TopicName string, NumPartitions int32,
                                                       PartitionMetadata [Partition int32, Racks [string]]]
    5 ConsumerGroupMemberMetadata       key: GroupId, MemberId
                                        value: InstanceId string?, RackId string?, ClientId string,
                                               ClientHost string, SubscribedTopicNames [string],
                                               SubscribedTopicRegex string?, RebalanceTimeoutMs int32,
                                               ServerAssignor string?,
                                               tag 0: ClassicMemberMetadata? [SessionTimeoutMs int32,
                                                 SupportedProtocols [Name string, Metadata bytes]]
    6 ConsumerGroupTargetAssignmentMetadata key: GroupId
                                        value: AssignmentEpoch int32
    7 ConsumerGroupTargetAssignmentMember key: GroupId, MemberId
                                        value: TopicPartitions [TopicId uuid, Partitions [int32]]
    8 ConsumerGroupCurrentMemberAssignment key: GroupId, MemberId
                                        value: MemberEpoch int32, PreviousMemberEpoch int32, State int8,
                                               AssignedPartitions [TopicId uuid, Partitions [int32]],
                                               PartitionsPendingRevocation [same]

A null value is a tombstone. A uuid is 16 bytes (most significant half first). ``State`` is
Kafka's ``MemberState`` byte: STABLE 0, UNREVOKED_PARTITIONS 1, UNRELEASED_PARTITIONS 2,
UNKNOWN 127. PartitionMetadata (racks) is written empty, as Kafka 4.0 does ("not used after 4.0").

Worked example: ``encode_key(CgKey(3, "g"))`` is ``00 03 | 00 01 | 67`` and
``encode_value(GroupEpoch(5))`` is ``00 00 | 00 00 00 05 | 00``.

The msgpack records of :mod:`kafkasim.protocol.offsets` (classic groups, offsets) start with
a msgpack array byte (0x9X); these start with ``00``: :func:`is_consumer_group_key` tells
them apart. Topic partitions are written sorted by topic id, then partition (Kafka writes
a hash map's order; readers do not depend on it).

Decoding trusts nothing: short buffers, bad lengths, bad UTF-8, an unknown value version,
bytes left over are :class:`~kafkasim.errors.CorruptRecordError`. Pure functions; thread-safe.
"""

from __future__ import annotations

import base64
import struct
import uuid
from typing import Mapping, NamedTuple, Optional, Union

from kafkasim.protocol.schema_bytes import RecordReader, uvarint
from kafkasim.protocol.schema_bytes import compact_string as _cstring, key_string as _key_string
from kafkasim.protocol.schema_bytes import topic_partitions as _topic_partitions

__all__ = [
    "CONSUMER_GROUP_METADATA", "CONSUMER_GROUP_PARTITION_METADATA", "CONSUMER_GROUP_MEMBER_METADATA",
    "CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA", "CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER",
    "CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT", "RECORD_TYPES", "MEMBER_STATE_BYTES",
    "CgKey", "GroupEpoch", "PartitionMetadata", "MemberMetadata", "TargetAssignmentEpoch",
    "TargetAssignmentMember", "CurrentMemberAssignment", "CgValue",
    "is_consumer_group_key", "encode_key", "encode_value", "decode_key", "decode_value",
    "kafka_uuid", "key_json", "value_json",
]

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
RECORD_TYPES = {
    3: "ConsumerGroupMetadata", 4: "ConsumerGroupPartitionMetadata", 5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata", 7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
}
_MEMBER_KEYS = (5, 7, 8)
MEMBER_STATE_BYTES = {"stable": 0, "unrevoked_partitions": 1, "unreleased_partitions": 2, "unknown": 127}
"""Kafka's ``MemberState`` names (lower case, as :class:`~kafkasim.coordinator.consumer_group.MemberState`
values) -> the byte written."""

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I8 = struct.Struct(">b")

TopicPartitions = Mapping[uuid.UUID, "tuple[int, ...]"]


class CgKey(NamedTuple):
    """A record key: ``type`` (3..8), the group, and the member for types 5, 7, 8 (else None)."""

    type: int
    group_id: str
    member_id: Optional[str] = None


class GroupEpoch(NamedTuple):
    """Value of type 3."""

    epoch: int


class PartitionMetadata(NamedTuple):
    """Value of type 4: ``topics`` is ``((topic id, name, number of partitions), ...)``."""

    topics: tuple


class MemberMetadata(NamedTuple):
    """Value of type 5."""

    instance_id: Optional[str]
    rack_id: Optional[str]
    client_id: str
    client_host: str
    subscribed_topic_names: tuple
    subscribed_topic_regex: Optional[str]
    rebalance_timeout_ms: int
    server_assignor: Optional[str]
    classic_member_metadata: Optional[tuple] = None
    """``(session timeout ms, ((protocol name, metadata bytes), ...))`` for a member that speaks
    the classic protocol (tagged field 0; absent for a consumer-protocol member)."""


class TargetAssignmentEpoch(NamedTuple):
    """Value of type 6."""

    assignment_epoch: int


class TargetAssignmentMember(NamedTuple):
    """Value of type 7: topic id -> sorted partitions."""

    topic_partitions: dict


class CurrentMemberAssignment(NamedTuple):
    """Value of type 8 (``state`` is Kafka's MemberState byte)."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: dict
    partitions_pending_revocation: dict


CgValue = Union[GroupEpoch, PartitionMetadata, MemberMetadata, TargetAssignmentEpoch, TargetAssignmentMember,
                CurrentMemberAssignment]
_VALUE_TYPES = {GroupEpoch: 3, PartitionMetadata: 4, MemberMetadata: 5, TargetAssignmentEpoch: 6,
                TargetAssignmentMember: 7, CurrentMemberAssignment: 8}


def is_consumer_group_key(key: Optional[bytes]) -> bool:
    """Whether ``key`` is one of these records' keys (int16 version 3..8)."""
    return key is not None and len(key) >= 2 and _I16.unpack_from(key)[0] in RECORD_TYPES


# -- encoding ------------------------------------------------------------------------------------
def encode_key(key: CgKey) -> bytes:
    """The key bytes: int16 type, the group id, and the member id for types 5, 7, 8."""
    if key.type not in RECORD_TYPES:
        raise ValueError(f"unknown consumer group record type {key.type!r} (Kafka's are 3..8)")
    out = _I16.pack(key.type) + _key_string(key.group_id, "group id")
    if key.type in _MEMBER_KEYS:
        out += _key_string(key.member_id, "member id")
    elif key.member_id is not None:
        raise ValueError(f"a {RECORD_TYPES[key.type]} key has no member id (got {key.member_id!r})")
    return out


def encode_value(value: CgValue) -> bytes:
    """The value bytes: int16 version 0, the fields, the (empty) tagged fields."""
    try:
        out = [_I16.pack(0)]
        if isinstance(value, (GroupEpoch, TargetAssignmentEpoch)):
            out.append(_I32.pack(value[0]))
        elif isinstance(value, PartitionMetadata):
            out.append(uvarint(len(value.topics) + 1))
            for topic_id, name, n in value.topics:
                out.append(topic_id.bytes + _cstring(name, "topic name") + _I32.pack(n) + b"\x01" + b"\x00")
        elif isinstance(value, MemberMetadata):
            out += [_cstring(value.instance_id, "instance id", True), _cstring(value.rack_id, "rack id", True),
                    _cstring(value.client_id, "client id"), _cstring(value.client_host, "client host"),
                    uvarint(len(value.subscribed_topic_names) + 1)]
            out += [_cstring(n, "topic name") for n in value.subscribed_topic_names]
            out += [_cstring(value.subscribed_topic_regex, "regex", True), _I32.pack(value.rebalance_timeout_ms),
                    _cstring(value.server_assignor, "server assignor", True)]
            if value.classic_member_metadata is not None:
                # tagged field 0, a nullable struct: Kafka writes its size + 1 and a presence byte 1
                struct_bytes = _classic_member_metadata(value.classic_member_metadata)
                out += [b"\x01", uvarint(0), uvarint(len(struct_bytes) + 1), b"\x01", struct_bytes]
                return b"".join(out)
        elif isinstance(value, TargetAssignmentMember):
            out.append(_topic_partitions(value.topic_partitions))
        elif isinstance(value, CurrentMemberAssignment):
            out += [_I32.pack(value.member_epoch), _I32.pack(value.previous_member_epoch), _I8.pack(value.state),
                    _topic_partitions(value.assigned_partitions),
                    _topic_partitions(value.partitions_pending_revocation)]
        else:
            raise TypeError(f"not a consumer group record value: {value!r}")
    except struct.error as exc:
        raise ValueError(f"a field of {value!r} does not fit its Kafka type: {exc}") from None
    out.append(b"\x00")
    return b"".join(out)


# -- decoding ------------------------------------------------------------------------------------
class _Reader(RecordReader):
    __slots__ = ()

    def __init__(self, buf, what: str) -> None:
        super().__init__(buf, f"__consumer_offsets {what}")


def _classic_member_metadata(meta: tuple) -> bytes:
    session_timeout_ms, protocols = meta
    out = [_I32.pack(session_timeout_ms), uvarint(len(protocols) + 1)]
    for name, metadata in protocols:
        out += [_cstring(name, "protocol name"), uvarint(len(metadata) + 1), bytes(metadata), b"\x00"]
    out.append(b"\x00")
    return b"".join(out)


def _read_classic_member_metadata(data: bytes) -> Optional[tuple]:
    """Tagged field 0 of a member metadata value: a presence byte, then the struct."""
    r = _Reader(data, "ClassicMemberMetadata")
    if r.uvarint() == 0:
        r.done()
        return None
    session_timeout_ms = r.i32()
    protocols = []
    for _ in range(r.count("SupportedProtocols")):
        name = r.cstring("Name")
        n = r.uvarint() - 1
        if n < 0:
            raise r.fail("null Metadata")
        protocols.append((name, bytes(r.take(n))))
        r.tagged_fields()
    r.tagged_fields()
    r.done()
    return session_timeout_ms, tuple(protocols)


def decode_key(data: bytes) -> CgKey:
    """A key written by :func:`encode_key`; CorruptRecordError otherwise."""
    r = _Reader(data, "consumer group key")
    version = r.i16()
    if version not in RECORD_TYPES:
        raise r.fail(f"key version {version} is not a consumer group record (3..8)")
    group = r.key_string("GroupId")
    member = r.key_string("MemberId") if version in _MEMBER_KEYS else None
    r.done()
    return CgKey(version, group, member)


def decode_value(record_type: int, data: Optional[bytes]) -> Optional[CgValue]:
    """The value of a record of ``record_type``, or None for a tombstone."""
    if data is None:
        return None
    r = _Reader(data, f"{RECORD_TYPES.get(record_type, record_type)} value")
    version = r.i16()
    if version != 0:
        raise r.fail(f"unknown value version {version} (Kafka has 0)")
    value: CgValue
    if record_type == 3:
        value = GroupEpoch(r.i32())
    elif record_type == 6:
        value = TargetAssignmentEpoch(r.i32())
    elif record_type == 4:
        topics = []
        for _ in range(r.count("Topics")):
            t, name, n = r.uuid(), r.cstring("TopicName"), r.i32()
            for _ in range(r.count("PartitionMetadata")):
                r.i32()
                for _ in range(r.count("Racks")):
                    r.cstring("Racks")
                r.tagged_fields()
            r.tagged_fields()
            topics.append((t, name, n))
        value = PartitionMetadata(tuple(topics))
    elif record_type == 5:
        instance_id, rack_id = r.cstring("InstanceId", True), r.cstring("RackId", True)
        client_id, client_host = r.cstring("ClientId"), r.cstring("ClientHost")
        names = tuple(r.cstring("SubscribedTopicNames") for _ in range(r.count("SubscribedTopicNames")))
        value = MemberMetadata(instance_id, rack_id, client_id, client_host, names,
                               r.cstring("SubscribedTopicRegex", True), r.i32(), r.cstring("ServerAssignor", True))
        tagged = r.tagged_fields()
        r.done()
        if 0 in tagged:
            value = value._replace(classic_member_metadata=_read_classic_member_metadata(tagged[0]))
        return value
    elif record_type == 7:
        value = TargetAssignmentMember(r.topic_partitions("TopicPartitions"))
    elif record_type == 8:
        value = CurrentMemberAssignment(r.i32(), r.i32(), r.i8(), r.topic_partitions("AssignedPartitions"),
                                        r.topic_partitions("PartitionsPendingRevocation"))
    else:
        raise r.fail(f"record type {record_type} is not a consumer group record (3..8)")
    r.tagged_fields()
    r.done()
    return value


# -- kafka-dump-log --offsets-decoder ------------------------------------------------------------
def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode("ascii").rstrip("=")


def _tps_json(tps: dict) -> list:
    return [{"topicId": kafka_uuid(t), "partitions": list(ps)}
            for t, ps in sorted(tps.items(), key=lambda kv: kv[0].bytes)]


def key_json(key: CgKey) -> dict:
    """The key as Kafka's OffsetsMessageParser prints it: ``{"type": "<v>", "data": {...}}``."""
    data = {"groupId": key.group_id}
    if key.member_id is not None:
        data["memberId"] = key.member_id
    return {"type": str(key.type), "data": data}


def value_json(value: CgValue) -> dict:
    """The value as Kafka's OffsetsMessageParser prints it: ``{"version": "0", "data": {...}}``
    (the generated JSON converters' camelCase field names; uuids as Kafka's ``Uuid.toString``)."""
    if isinstance(value, GroupEpoch):
        data: dict = {"epoch": value.epoch}
    elif isinstance(value, TargetAssignmentEpoch):
        data = {"assignmentEpoch": value.assignment_epoch}
    elif isinstance(value, PartitionMetadata):
        data = {"topics": [{"topicId": kafka_uuid(t), "topicName": n, "numPartitions": c, "partitionMetadata": []}
                           for t, n, c in value.topics]}
    elif isinstance(value, MemberMetadata):
        data = {"instanceId": value.instance_id, "rackId": value.rack_id, "clientId": value.client_id,
                "clientHost": value.client_host, "subscribedTopicNames": list(value.subscribed_topic_names),
                "subscribedTopicRegex": value.subscribed_topic_regex,
                "rebalanceTimeoutMs": value.rebalance_timeout_ms, "serverAssignor": value.server_assignor}
        if value.classic_member_metadata is not None:
            session_timeout_ms, protocols = value.classic_member_metadata
            data["classicMemberMetadata"] = {
                "sessionTimeoutMs": session_timeout_ms,
                "supportedProtocols": [{"name": n, "metadata": base64.b64encode(m).decode("ascii")}
                                       for n, m in protocols]}
    elif isinstance(value, TargetAssignmentMember):
        data = {"topicPartitions": _tps_json(value.topic_partitions)}
    else:
        data = {"memberEpoch": value.member_epoch, "previousMemberEpoch": value.previous_member_epoch,
                "state": value.state, "assignedPartitions": _tps_json(value.assigned_partitions),
                "partitionsPendingRevocation": _tps_json(value.partitions_pending_revocation)}
    return {"version": "0", "data": data}
