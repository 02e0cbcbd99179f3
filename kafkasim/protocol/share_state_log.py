"""Records of the share coordinator's ``__share_group_state`` topic: Kafka's exact bytes (pure codec).

Kafka's share coordinator keeps each share-partition's delivery state (KIP-932) as two record
types, each a key and a value behind an int16 version; the key version is the record type.
Keys are not flexible (int16-length strings); values are version 0 and flexible (compact
arrays: unsigned varint length + 1; each struct ends with tagged fields, written empty ``00``).
Schemas from Kafka's ``share-coordinator/src/main/resources/common/message/*.json``::

    0 ShareSnapshot   key: GroupId string, TopicId uuid, Partition int32
                      value: SnapshotEpoch uint16, StateEpoch int32, LeaderEpoch int32,
                             StartOffset int64,
                             StateBatches [FirstOffset int64, LastOffset int64,
                                           DeliveryState int8, DeliveryCount int16]
    1 ShareUpdate     key: GroupId string, TopicId uuid, Partition int32
                      value: SnapshotEpoch uint16, LeaderEpoch int32, StartOffset int64 (-1: unchanged),
                             StateBatches [same]

DeliveryState is 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED. A snapshot is the whole state; an
update is a delta over the latest snapshot (its batches replace those offsets' states). A
null value is a tombstone (the share-partition's state was deleted).

Worked example: ``encode_key(ShareKey(0, "g", UUID(int=1), 3))`` is
``00 00 | 00 01 67 | 00..00 01 (16 bytes) | 00 00 00 03``.

Decoding trusts nothing: short buffers, bad lengths, bad UTF-8, unknown versions, bytes left
over are :class:`~kafkasim.errors.CorruptRecordError`. Pure functions; thread-safe.
"""

from __future__ import annotations

import base64
import struct
import uuid
from typing import NamedTuple, Optional, Union

from kafkasim.errors import CorruptRecordError
from kafkasim.protocol.schema_bytes import RecordReader, key_string, uvarint

__all__ = [
    "SHARE_GROUP_STATE_TOPIC", "SHARE_SNAPSHOT", "SHARE_UPDATE", "RECORD_TYPES",
    "ShareKey", "ShareSnapshot", "ShareUpdate", "encode_key", "encode_value", "decode_key", "decode_value",
    "partition_for", "SHARE_GROUP_STATE_TOPIC_PARTITIONS", "SHARE_GROUP_STATE_TOPIC_CONFIGS",
]

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
"""The share coordinator's internal topic (Kafka's ``Topic.SHARE_GROUP_STATE_TOPIC_NAME``)."""
SHARE_SNAPSHOT, SHARE_UPDATE = 0, 1
RECORD_TYPES = {SHARE_SNAPSHOT: "ShareSnapshot", SHARE_UPDATE: "ShareUpdate"}

_I16, _U16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">H"), struct.Struct(">i"), struct.Struct(">q")
_BATCH = struct.Struct(">qqbh")


class ShareKey(NamedTuple):
    """A key: ``type`` (0 snapshot, 1 update), and the share-partition it is about."""

    type: int
    group_id: str
    topic_id: uuid.UUID
    partition: int


class ShareSnapshot(NamedTuple):
    """Value of type 0: ``state_batches`` is ``((first, last, delivery state, delivery count), ...)``."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple


class ShareUpdate(NamedTuple):
    """Value of type 1 (``start_offset`` -1: unchanged)."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple


ShareValue = Union[ShareSnapshot, ShareUpdate]


def encode_key(key: ShareKey) -> bytes:
    if key.type not in RECORD_TYPES:
        raise ValueError(f"unknown share state record type {key.type!r} (Kafka's are 0 and 1)")
    return (_I16.pack(key.type) + key_string(key.group_id, "group id") + key.topic_id.bytes
            + _I32.pack(key.partition))


def _batches(batches) -> bytes:
    out = [uvarint(len(batches) + 1)]
    for first, last, state, count in batches:
        out.append(_BATCH.pack(first, last, state, count) + b"\x00")
    return b"".join(out)


def encode_value(value: ShareValue) -> bytes:
    """int16 version 0, the fields, the (empty) tagged fields."""
    try:
        if isinstance(value, ShareSnapshot):
            body = (_U16.pack(value.snapshot_epoch) + _I32.pack(value.state_epoch) + _I32.pack(value.leader_epoch)
                    + _I64.pack(value.start_offset) + _batches(value.state_batches))
        elif isinstance(value, ShareUpdate):
            body = (_U16.pack(value.snapshot_epoch) + _I32.pack(value.leader_epoch) + _I64.pack(value.start_offset)
                    + _batches(value.state_batches))
        else:
            raise TypeError(f"not a share state record value: {value!r}")
    except struct.error as exc:
        raise ValueError(f"a field of {value!r} does not fit its Kafka type: {exc}") from None
    return _I16.pack(0) + body + b"\x00"


def decode_key(data: bytes) -> ShareKey:
    r = RecordReader(data, f"{SHARE_GROUP_STATE_TOPIC} key")
    kind = r.i16()
    if kind not in RECORD_TYPES:
        raise r.fail(f"unknown record type {kind}")
    key = ShareKey(kind, r.key_string("GroupId"), r.uuid(), r.i32())
    r.done()
    return key


def decode_value(record_type: int, data: Optional[bytes]) -> Optional[ShareValue]:
    """The value of a ``record_type`` key; None for a tombstone."""
    if data is None:
        return None
    r = RecordReader(data, f"{SHARE_GROUP_STATE_TOPIC} {RECORD_TYPES.get(record_type, record_type)} value")
    version = r.i16()
    if version != 0:
        raise r.fail(f"unknown value version {version}")
    epoch = r.unpack(_U16)[0]
    if record_type == SHARE_SNAPSHOT:
        head = (epoch, r.i32(), r.i32(), r.i64())
    elif record_type == SHARE_UPDATE:
        head = (epoch, r.i32(), r.i64())
    else:
        raise CorruptRecordError(f"{SHARE_GROUP_STATE_TOPIC}: unknown record type {record_type}")
    batches = []
    for _ in range(r.count("StateBatches")):
        batches.append(r.unpack(_BATCH))
        r.tagged_fields()
    r.tagged_fields()
    r.done()
    return (ShareSnapshot if record_type == SHARE_SNAPSHOT else ShareUpdate)(*head, tuple(batches))


def partition_for(group_id: str, topic_id: uuid.UUID, partition: int, num_partitions: int) -> int:
    """The ``__share_group_state`` partition of a share-partition: Kafka's
    ``Utils.abs(SharePartitionKey.asCoordinatorKey().hashCode()) % numPartitions`` over the
    string ``"<group>:<topic id, Kafka's base64>:<partition>"``."""
    text = f"{group_id}:{base64.urlsafe_b64encode(topic_id.bytes).decode('ascii').rstrip('=')}:{partition}"
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


SHARE_GROUP_STATE_TOPIC_PARTITIONS = 50           # share.coordinator.state.topic.num.partitions
SHARE_GROUP_STATE_TOPIC_CONFIGS = {"cleanup.policy": "delete", "retention.ms": "-1", "segment.bytes": "104857600"}
"""``__share_group_state``'s configs as Kafka's share coordinator creates it
(share.coordinator.state.topic.segment.bytes; Kafka prunes it below the oldest snapshot still needed, kafkasim keeps it all: retention.ms -1)."""
