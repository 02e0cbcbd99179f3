"""The consumer protocol's embedded bytes: subscriptions (JoinGroup) and assignments (SyncGroup).

Kafka's classic group protocol carries two opaque byte strings that the ``consumer``
protocol type gives a shape to (``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment``, each an int16 version followed by the body). Both the
coordinator (which keeps the bytes as they came and decodes the topic-partitions its
tools show beside them), the wire front end and the client (:mod:`kafkasim.server.remote`:
kafkasim's own consumer over the wire) translate them here, with kio's classes generated
from Kafka's schemas.

In kafkasim's in-process API a subscription is the dict the consumer's group member
builds (``{"topics", "user_data", "owned_partitions": [[t, p]], "generation_id",
"rack_id"}``) and an assignment a list of :class:`~kafkasim.types.TopicPartition`.

Decoding reads any version (a version newer than kio knows is read as the newest it
knows: later versions only append fields) and raises :class:`InvalidRequestError` for
bytes that do not parse, never anything else. Pure functions; thread-safe.
"""

from __future__ import annotations

import io
import struct
from collections import defaultdict
from typing import Iterable, Optional

import importlib

from kafkasim.errors import InvalidRequestError
from kafkasim.types import TopicPartition

__all__ = ["decode_assignment", "encode_assignment", "assignment_version", "decode_subscription", "encode_subscription",
           "subscribed_topics", "subscription_bytes", "SUBSCRIPTION_VERSION"]

SUBSCRIPTION_VERSION = 3      # topics, user data, owned partitions, generation, rack
_NEWEST_ASSIGNMENT = 3


def _kio(module: str):
    """kio's modules, imported on first use: the coordinator and the broker import this module,
    and a CLI command on an unserved data dir must not pay for the wire stack (kio) it never
    uses (tests/cli/test_cli_hygiene.py). Not a cycle: kio is a third-party leaf."""
    importlib.import_module("kafkasim.protocol.kio_import")    # first: kio without hypothesis; see it
    return importlib.import_module(module)


def _data_class(name: str, version: int, cls: str) -> type:
    kio_index, constants = _kio("kio.index"), _kio("kio.static.constants")
    return getattr(kio_index.load_entity_module(name, version, constants.EntityType.data), cls)


def _read(name: str, cls: str, newest: int, data: Optional[bytes], what: str):
    try:
        if data is None or len(data) < 2:
            raise ValueError(f"{0 if data is None else len(data)} bytes")
        (version,) = struct.unpack_from(">h", data, 0)
        if version < 0:
            raise ValueError(f"version {version}")
        entity, _ = _kio("kafkasim.protocol.kio_bounds").read_entity(_data_class(name, min(version, newest), cls),
                                                                     data, 2)
    except Exception as exc:
        raise InvalidRequestError(f"{what} does not parse as {cls}: {exc}") from exc
    return entity


def _write(entity, version: int) -> bytes:
    buf = io.BytesIO()
    buf.write(struct.pack(">h", version))
    _kio("kio.serial").entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def _by_topic(partitions: Iterable) -> list[tuple[str, tuple[int, ...]]]:
    by_topic = defaultdict(list)
    for tp in partitions:
        by_topic[tp[0]].append(tp[1])
    return [(t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items())]


# ------------------------------------------------------------------ assignments

def decode_assignment(data: bytes) -> list[TopicPartition]:
    """Topic-partitions of a ``ConsumerProtocolAssignment`` (int16 version + body, any version)."""
    entity = _read("consumer_protocol_assignment", "ConsumerProtocolAssignment", _NEWEST_ASSIGNMENT,
                   data, "the leader's assignment")
    return [TopicPartition(t.topic, p) for t in entity.assigned_partitions for p in t.partitions]


def encode_assignment(partitions, version: int = 0) -> bytes:
    """``ConsumerProtocolAssignment`` bytes of ``version`` (with the int16 version) for ``partitions``."""
    cls = _data_class("consumer_protocol_assignment", version, "ConsumerProtocolAssignment")
    tp_cls = _data_class("consumer_protocol_assignment", version, "TopicPartition")
    return _write(cls(assigned_partitions=tuple(tp_cls(topic=t, partitions=ps)
                                                for t, ps in _by_topic(partitions)),
                      user_data=None), version)


def assignment_version(subscription: Optional[bytes]) -> int:
    """The assignment version Kafka answers a member with: its subscription's version, capped
    at the newest assignment version (``ConsumerProtocol.deserializeVersion``); 0 when the
    subscription is not bytes or too short."""
    if not isinstance(subscription, (bytes, bytearray, memoryview)) or len(subscription) < 2:
        return 0
    (version,) = struct.unpack_from(">h", subscription, 0)
    return max(0, min(version, _NEWEST_ASSIGNMENT))


# ------------------------------------------------------------------ subscriptions

def encode_subscription(meta: dict) -> bytes:
    """``ConsumerProtocolSubscription`` v3 bytes for a group member's subscription dict.

    Example::

        >>> decode_subscription(encode_subscription({"topics": ["t"]}))["topics"]
        ['t']
    """
    cls = _data_class("consumer_protocol_subscription", SUBSCRIPTION_VERSION, "ConsumerProtocolSubscription")
    tp_cls = _data_class("consumer_protocol_subscription", SUBSCRIPTION_VERSION, "TopicPartition")
    user_data = meta.get("user_data")
    if user_data is not None and not isinstance(user_data, (bytes, bytearray)):
        raise InvalidRequestError(
            f"subscription user_data must be bytes to go over the wire, got {type(user_data).__name__}")
    return _write(cls(
        topics=tuple(sorted(meta.get("topics") or ())),
        user_data=None if user_data is None else bytes(user_data),
        owned_partitions=tuple(tp_cls(topic=t, partitions=ps)
                               for t, ps in _by_topic(meta.get("owned_partitions") or ())),
        generation_id=meta.get("generation_id", -1) if meta.get("generation_id") is not None else -1,
        rack_id=meta.get("rack_id")), SUBSCRIPTION_VERSION)


def decode_subscription(data: bytes) -> dict:
    """A subscription dict (the in-process shape) from ``ConsumerProtocolSubscription`` bytes."""
    entity = _read("consumer_protocol_subscription", "ConsumerProtocolSubscription", SUBSCRIPTION_VERSION,
                   data, "the member's subscription")
    owned = getattr(entity, "owned_partitions", ())
    return {"topics": list(entity.topics), "user_data": entity.user_data,
            "owned_partitions": [[t.topic, p] for t in owned for p in t.partitions],
            "generation_id": getattr(entity, "generation_id", -1),
            "rack_id": getattr(entity, "rack_id", None)}


def subscription_bytes(protocol_type: Optional[str], meta) -> bytes:
    """A member's protocol metadata as bytes: wire bytes unchanged; an in-process consumer's
    subscription dict as ``ConsumerProtocolSubscription``; nothing else known → empty."""
    if isinstance(meta, (bytes, bytearray, memoryview)):
        return bytes(meta)
    if isinstance(meta, dict) and protocol_type == "consumer":
        return encode_subscription(meta)
    return b""


def subscribed_topics(protocol_type: Optional[str], meta) -> Optional[list[str]]:
    """The topics a member's protocol metadata subscribes to: from an in-process member's
    dict, or from ``consumer`` protocol bytes; None when that is not known (another
    protocol type, or bytes that do not decode). Kafka's coordinator reads the same field
    (``isSubscribedToTopic``: OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC)."""
    if isinstance(meta, dict):
        return [t for t in meta.get("topics") or () if isinstance(t, str)]
    if protocol_type == "consumer" and isinstance(meta, (bytes, bytearray, memoryview)) and meta:
        try:
            return decode_subscription(bytes(meta))["topics"]
        except InvalidRequestError:
            return None
    return None
