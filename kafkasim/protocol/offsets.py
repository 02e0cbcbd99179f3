"""Record format of the internal offsets topic ``__consumer_offsets`` (pure codec).

This module is the only code that turns committed offsets and group metadata into
the key/value bytes stored in ``__consumer_offsets`` and back. The group
coordinator writes through it; offline readers (the Spark lag job) decode through
it. The format is documented in docs/consumer-groups.md, "Offsets topic format".

Keys and values are msgpack (``use_bin_type=True``)::

    offset commit   key   = [1, group: str, topic: str, partition: int]
                    value = {"offset": int, "metadata": str, "commit_timestamp": int,
                             "leader_epoch": int}
    group metadata  key   = [2, group: str]
                    value = {"protocol_type": str, "generation": int, "protocol": str | None,
                             "leader": str | None, "state_timestamp": int,
                             "members": [{"member_id", "group_instance_id", "client_id",
                                          "client_host" (str | None), "session_timeout_ms", "rebalance_timeout_ms",
                                          "subscription": [topic, ...],
                                          "assignment": [[topic, partition], ...]}, ...]}
    tombstone       value = None (msgpack is not involved: the record's value is nil)

The first key element is the key version/type, as in Kafka (0/1 = offset commit,
2 = group metadata there; kafkasim uses 1 and 2). Consumer groups of Kafka 4's protocol
(KIP-848) are written in the same partitions as Kafka's exact bytes (key versions 3..8,
:mod:`kafkasim.protocol.consumer_group_log`); their keys start with ``00``, never a msgpack
array, so :func:`decode_key` refuses them (CorruptRecordError) and readers ask
``consumer_group_log.is_consumer_group_key`` first. The latest record for a key wins
(the topic is compacted); a tombstone deletes the key.

The group → partition rule is Kafka's: ``Utils.abs(groupId.hashCode()) % 50``
where ``hashCode`` is Java's ``String.hashCode`` over UTF-16 code units and
``Utils.abs(Integer.MIN_VALUE) == 0``.

Invariants: ``decode_key(encode_*_key(...))`` returns the same fields;
``decode_value`` of an encoded value returns an equal dict. Pure functions; thread-safe.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Union

import msgpack

from kafkasim.errors import CorruptRecordError

__all__ = [
    "OFFSETS_TOPIC", "OFFSETS_TOPIC_PARTITIONS", "OFFSETS_TOPIC_CONFIGS",
    "OFFSET_COMMIT_KEY", "GROUP_METADATA_KEY",
    "OffsetKey", "GroupKey", "OffsetValue",
    "java_string_hash", "partition_for_group",
    "encode_offset_key", "encode_offset_value", "encode_group_key", "encode_group_value",
    "decode_key", "decode_offset_value", "decode_group_value", "decode_record",
]

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = 50                 # Kafka's offsets.topic.num.partitions default
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": 104857600}
OFFSET_COMMIT_KEY = 1
GROUP_METADATA_KEY = 2

_pack = msgpack.Packer(use_bin_type=True, autoreset=True).pack


class OffsetKey(NamedTuple):
    """Key of an offset commit record."""

    group: str
    topic: str
    partition: int


class GroupKey(NamedTuple):
    """Key of a group metadata record."""

    group: str


class OffsetValue(NamedTuple):
    """Value of an offset commit record (``offset`` is the next offset to read)."""

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` as a signed 32-bit int (over UTF-16 code units).

    >>> java_string_hash("hello")
    99162322
    """
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def partition_for_group(group_id: str, num_partitions: int = OFFSETS_TOPIC_PARTITIONS) -> int:
    """The offsets-topic partition that holds ``group_id``: ``Utils.abs(hashCode) % n`` as Kafka.

    >>> partition_for_group("polygenelubricants")   # hashCode == Integer.MIN_VALUE → abs 0
    0
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    return _pack([OFFSET_COMMIT_KEY, group, topic, int(partition)])


def encode_offset_value(offset: int, metadata: str = "", commit_timestamp: int = -1,
                        leader_epoch: int = -1) -> bytes:
    return _pack({"offset": int(offset), "metadata": metadata or "",
                  "commit_timestamp": int(commit_timestamp), "leader_epoch": int(leader_epoch)})


def encode_group_key(group: str) -> bytes:
    return _pack([GROUP_METADATA_KEY, group])


def encode_group_value(value: dict) -> bytes:
    """Encode a group metadata dict (fields as in the module docstring)."""
    missing = {"protocol_type", "generation", "protocol", "leader", "members"} - set(value)
    if missing:
        raise ValueError(f"group metadata value misses {sorted(missing)}")
    return _pack(value)


def _unpack(data: bytes, what: str) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise CorruptRecordError(f"undecodable {what} in {OFFSETS_TOPIC}: {bytes(data)[:32]!r}") from exc


def decode_key(data: bytes) -> Union[OffsetKey, GroupKey]:
    """Decode a record key; CorruptRecordError for anything not written by this module."""
    k = _unpack(data, "key")
    if isinstance(k, list) and k and k[0] == OFFSET_COMMIT_KEY and len(k) == 4:
        return OffsetKey(k[1], k[2], k[3])
    if isinstance(k, list) and k and k[0] == GROUP_METADATA_KEY and len(k) == 2:
        return GroupKey(k[1])
    raise CorruptRecordError(f"unknown key in {OFFSETS_TOPIC}: {k!r}")


def decode_offset_value(data: Optional[bytes]) -> Optional[OffsetValue]:
    """Decode an offset commit value; None for a tombstone."""
    if data is None:
        return None
    v = _unpack(data, "offset value")
    try:
        return OffsetValue(v["offset"], v.get("metadata", ""), v["commit_timestamp"],
                           v.get("leader_epoch", -1))
    except (TypeError, KeyError) as exc:
        raise CorruptRecordError(f"bad offset commit value in {OFFSETS_TOPIC}: {v!r}") from exc


def decode_group_value(data: Optional[bytes]) -> Optional[dict]:
    """Decode a group metadata value; None for a tombstone."""
    if data is None:
        return None
    v = _unpack(data, "group value")
    if not isinstance(v, dict) or "generation" not in v:
        raise CorruptRecordError(f"bad group metadata value in {OFFSETS_TOPIC}: {v!r}")
    return v


def decode_record(key: bytes, value: Optional[bytes]):
    """Decode one record: ``(OffsetKey, OffsetValue|None)`` or ``(GroupKey, dict|None)``."""
    k = decode_key(key)
    if isinstance(k, OffsetKey):
        return k, decode_offset_value(value)
    return k, decode_group_value(value)
