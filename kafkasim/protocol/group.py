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

from typing import NamedTuple, Optional

__all__ = ["PENDING", "COMPLETE", "NO_GENERATION", "NO_MEMBER_ID", "JoinResult", "SyncResult"]

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
    """Answer to a sync: PENDING (the leader has not sent the assignment) or COMPLETE.

    ``assignment`` is the member's topic-partitions; ``assignment_bytes`` the bytes the
    leader sent for it, unchanged (None when the leader gave topic-partitions)."""

    status: str
    assignment: tuple = ()
    protocol_name: Optional[str] = None
    generation_id: int = NO_GENERATION
    assignment_bytes: Optional[bytes] = None
