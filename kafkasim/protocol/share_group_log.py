"""Records of share groups (KIP-932) in ``__consumer_offsets``: Kafka's exact bytes (pure codec).

Kafka's group coordinator keeps a share group as six record types in the group's
``__consumer_offsets`` partition, beside the consumer groups' (:mod:`kafkasim.protocol.consumer_group_log`,
types 3..8). Keys are not flexible (int16 type, then int16-length strings); values are version
0 and flexible. Schemas from Kafka's ``group-coordinator/src/main/resources/common/message/ShareGroup*.json``::

    10 ShareGroupMemberMetadata          key: GroupId, MemberId
                                         value: RackId string?, ClientId string, ClientHost string,
                                                SubscribedTopicNames [string]
    11 ShareGroupMetadata                key: GroupId
                                         value: Epoch int32
    12 ShareGroupTargetAssignmentMetadata key: GroupId
                                         value: AssignmentEpoch int32
    13 ShareGroupTargetAssignmentMember  key: GroupId, MemberId
                                         value: TopicPartitions [TopicId uuid, Partitions [int32]]
    14 ShareGroupCurrentMemberAssignment key: GroupId, MemberId
                                         value: MemberEpoch int32, PreviousMemberEpoch int32, State int8,
                                                AssignedPartitions [TopicId uuid, Partitions [int32]]
    15 ShareGroupStatePartitionMetadata  key: GroupId
                                         value: InitializedTopics [TopicId uuid, TopicName string, Partitions [int32]],
                                                DeletingTopics [TopicId uuid, TopicName string]

A null value is a tombstone. ``State`` is 0 (STABLE): share members have nothing to revoke.

Worked example: ``encode_key(ShareGroupKey(11, "g"))`` is ``00 0b | 00 01 | 67`` and
``encode_value(ShareGroupEpoch(5))`` is ``00 00 | 00 00 00 05 | 00``.

Decoding trusts nothing (:class:`~kafkasim.errors.CorruptRecordError`). Pure functions; thread-safe.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Optional, Union

from kafkasim.protocol.schema_bytes import (
    RecordReader, compact_string, key_string, topic_partitions, uvarint,
)

__all__ = [
    "SHARE_GROUP_MEMBER_METADATA", "SHARE_GROUP_METADATA", "SHARE_GROUP_TARGET_ASSIGNMENT_METADATA",
    "SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER", "SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT",
    "SHARE_GROUP_STATE_PARTITION_METADATA", "RECORD_TYPES", "ShareGroupKey", "ShareGroupEpoch",
    "ShareMemberMetadata", "ShareTargetAssignmentEpoch", "ShareTargetAssignmentMember",
    "ShareCurrentMemberAssignment", "ShareStatePartitionMetadata", "is_share_group_key",
    "encode_key", "encode_value", "decode_key", "decode_value",
]

SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15
RECORD_TYPES = {
    10: "ShareGroupMemberMetadata", 11: "ShareGroupMetadata", 12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember", 14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
}
_MEMBER_KEYS = (10, 13, 14)
_I8, _I16, _I32 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i")


class ShareGroupKey(NamedTuple):
    """A key: ``type`` (10..15), the group, and the member for types 10, 13, 14 (else None)."""

    type: int
    group_id: str
    member_id: Optional[str] = None


class ShareGroupEpoch(NamedTuple):
    """Value of type 11."""

    epoch: int


class ShareMemberMetadata(NamedTuple):
    """Value of type 10."""

    rack_id: Optional[str]
    client_id: str
    client_host: str
    subscribed_topic_names: tuple


class ShareTargetAssignmentEpoch(NamedTuple):
    """Value of type 12."""

    assignment_epoch: int


class ShareTargetAssignmentMember(NamedTuple):
    """Value of type 13: topic id -> partitions."""

    topic_partitions: dict


class ShareCurrentMemberAssignment(NamedTuple):
    """Value of type 14."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: dict


class ShareStatePartitionMetadata(NamedTuple):
    """Value of type 15: ``initialized`` is ``((topic id, name, (partitions...)), ...)``,
    ``deleting`` ``((topic id, name), ...)``."""

    initialized: tuple
    deleting: tuple = ()


ShareGroupValue = Union[ShareGroupEpoch, ShareMemberMetadata, ShareTargetAssignmentEpoch,
                        ShareTargetAssignmentMember, ShareCurrentMemberAssignment, ShareStatePartitionMetadata]


def is_share_group_key(key: Optional[bytes]) -> bool:
    """Whether ``key`` is one of these records' keys (int16 type 10..15)."""
    return key is not None and len(key) >= 2 and _I16.unpack_from(key)[0] in RECORD_TYPES


def encode_key(key: ShareGroupKey) -> bytes:
    if key.type not in RECORD_TYPES:
        raise ValueError(f"unknown share group record type {key.type!r} (Kafka's are 10..15)")
    out = _I16.pack(key.type) + key_string(key.group_id, "group id")
    if key.type in _MEMBER_KEYS:
        out += key_string(key.member_id, "member id")
    elif key.member_id is not None:
        raise ValueError(f"a {RECORD_TYPES[key.type]} key has no member id (got {key.member_id!r})")
    return out


def encode_value(value: ShareGroupValue) -> bytes:
    """int16 version 0, the fields, the (empty) tagged fields."""
    out = [_I16.pack(0)]
    try:
        if isinstance(value, (ShareGroupEpoch, ShareTargetAssignmentEpoch)):
            out.append(_I32.pack(value[0]))
        elif isinstance(value, ShareMemberMetadata):
            out += [compact_string(value.rack_id, "rack id", True), compact_string(value.client_id, "client id"),
                    compact_string(value.client_host, "client host"), uvarint(len(value.subscribed_topic_names) + 1)]
            out += [compact_string(n, "topic name") for n in value.subscribed_topic_names]
        elif isinstance(value, ShareTargetAssignmentMember):
            out.append(topic_partitions(value.topic_partitions))
        elif isinstance(value, ShareCurrentMemberAssignment):
            out += [_I32.pack(value.member_epoch), _I32.pack(value.previous_member_epoch), _I8.pack(value.state),
                    topic_partitions(value.assigned_partitions)]
        elif isinstance(value, ShareStatePartitionMetadata):
            out.append(uvarint(len(value.initialized) + 1))
            for tid, name, ps in value.initialized:
                ps = sorted(ps)
                out.append(tid.bytes + compact_string(name, "topic name") + uvarint(len(ps) + 1)
                           + struct.pack(f">{len(ps)}i", *ps) + b"\x00")
            out.append(uvarint(len(value.deleting) + 1))
            for tid, name in value.deleting:
                out.append(tid.bytes + compact_string(name, "topic name") + b"\x00")
        else:
            raise TypeError(f"not a share group record value: {value!r}")
    except struct.error as exc:
        raise ValueError(f"a field of {value!r} does not fit its Kafka type: {exc}") from None
    out.append(b"\x00")
    return b"".join(out)


def decode_key(data: bytes) -> ShareGroupKey:
    r = RecordReader(data, "__consumer_offsets share group key")
    kind = r.i16()
    if kind not in RECORD_TYPES:
        raise r.fail(f"unknown record type {kind}")
    group_id = r.key_string("GroupId")
    member_id = r.key_string("MemberId") if kind in _MEMBER_KEYS else None
    r.done()
    return ShareGroupKey(kind, group_id, member_id)


def decode_value(record_type: int, data: Optional[bytes]) -> Optional[ShareGroupValue]:
    """The value of a ``record_type`` key; None for a tombstone."""
    if data is None:
        return None
    r = RecordReader(data, f"__consumer_offsets {RECORD_TYPES.get(record_type, record_type)} value")
    version = r.i16()
    if version != 0:
        raise r.fail(f"unknown value version {version}")
    out: ShareGroupValue
    if record_type == SHARE_GROUP_METADATA:
        out = ShareGroupEpoch(r.i32())
    elif record_type == SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
        out = ShareTargetAssignmentEpoch(r.i32())
    elif record_type == SHARE_GROUP_MEMBER_METADATA:
        rack, client, host = r.cstring("RackId", True), r.cstring("ClientId"), r.cstring("ClientHost")
        names = tuple(r.cstring("SubscribedTopicNames") for _ in range(r.count("SubscribedTopicNames")))
        out = ShareMemberMetadata(rack, client, host, names)
    elif record_type == SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER:
        out = ShareTargetAssignmentMember(r.topic_partitions("TopicPartitions"))
    elif record_type == SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        out = ShareCurrentMemberAssignment(r.i32(), r.i32(), r.i8(), r.topic_partitions("AssignedPartitions"))
    elif record_type == SHARE_GROUP_STATE_PARTITION_METADATA:
        init = []
        for _ in range(r.count("InitializedTopics")):
            tid, name = r.uuid(), r.cstring("TopicName")
            n = r.count("Partitions")
            init.append((tid, name, tuple(struct.unpack(f">{n}i", r.take(4 * n)))))
            r.tagged_fields()
        deleting = []
        for _ in range(r.count("DeletingTopics")):
            deleting.append((r.uuid(), r.cstring("TopicName")))
            r.tagged_fields()
        out = ShareStatePartitionMetadata(tuple(init), tuple(deleting))
    else:
        raise r.fail(f"unknown record type {record_type}")
    r.tagged_fields()
    r.done()
    return out
