"""The classic group protocol's message shapes and sentinels (JoinGroup / SyncGroup).

Shared by the broker-side coordinator (``kafkasim.coordinator``) and the client-side
member (``kafkasim.consumer.group_member``), so that neither imports the other.
Pure data: no I/O, no state; safe from any thread.

- ``NO_GENERATION`` (-1) and ``NO_MEMBER_ID`` ("") are the sentinels of a member
  outside any generation (Kafka's ``JoinGroupRequest.UNKNOWN_MEMBER_ID`` and
  ``OffsetCommitRequest.DEFAULT_GENERATION_ID``).
- A join or sync answer is ``PENDING`` (call again) or ``COMPLETE``.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple, Optional

__all__ = ["PENDING", "COMPLETE", "NO_GENERATION", "NO_MEMBER_ID", "JoinResult", "SyncResult",
           "subscribed_topics"]

PENDING = "pending"
COMPLETE = "complete"
NO_GENERATION = -1
NO_MEMBER_ID = ""


class JoinResult(NamedTuple):
    """Answer to a join: PENDING (call again with ``member_id``) or COMPLETE.

    ``members`` is non-empty only for the leader: ``[(member_id, group_instance_id,
    metadata of the chosen protocol)]`` in join order.
    """

    status: str
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_name: Optional[str] = None
    leader_id: Optional[str] = None
    members: tuple = ()

    @property
    def is_leader(self) -> bool:
        return self.status == COMPLETE and self.leader_id == self.member_id


class SyncResult(NamedTuple):
    """Answer to a sync: PENDING (the leader has not sent the assignment) or COMPLETE."""

    status: str
    assignment: tuple = ()
    protocol_name: Optional[str] = None
    generation_id: int = NO_GENERATION


def subscribed_topics(metadata: Any) -> Optional[frozenset]:
    """The topics a ``consumer`` member's subscription names, or None when it does not parse.

    ``metadata`` is the in-process member's dict (``{"topics": [...], ...}``) or the bytes a
    wire client sent in JoinGroup: Kafka's ``ConsumerProtocolSubscription``, whose every
    version starts with ``int16 version, int32 count, count x (int16 length, UTF-8 name)``
    (never a flexible encoding), so only that prefix is read here. Kafka's group coordinator
    reads the same field to decide GROUP_SUBSCRIBED_TO_TOPIC (OffsetDelete)."""
    if isinstance(metadata, dict):
        topics = metadata.get("topics") or ()
        return frozenset(t for t in topics if isinstance(t, str))
    if not isinstance(metadata, (bytes, bytearray, memoryview)):
        return None
    data = bytes(metadata)
    try:
        version, count = struct.unpack_from(">hi", data, 0)
        if version < 0 or count < 0 or count > len(data):
            return None
        pos, out = 6, []
        for _ in range(count):
            (n,) = struct.unpack_from(">h", data, pos)
            if n < 0 or pos + 2 + n > len(data):
                return None
            out.append(data[pos + 2:pos + 2 + n].decode("utf-8"))
            pos += 2 + n
        return frozenset(out)
    except (struct.error, UnicodeDecodeError):
        return None
