"""The consumer group protocol's (KIP-848) heartbeat shapes and sentinels.

Kafka's ConsumerGroupHeartbeat request and response (API key 68), as plain data, shared by
the broker-side coordinator (``kafkasim.coordinator.consumer_heartbeat``) and, later, the
clients and the wire front end, so that none imports another.

Field meanings (Kafka's ``ConsumerGroupHeartbeatRequest.json``); ``None`` is Kafka's null,
"not changed since the last heartbeat":

- ``member_epoch``: 0 joins (or rejoins), -1 (:data:`LEAVE_GROUP_MEMBER_EPOCH`) leaves,
  -2 (:data:`LEAVE_GROUP_STATIC_MEMBER_EPOCH`) is a static member leaving for now (its
  partitions wait for it until the session times out); otherwise the member's current epoch.
- ``member_id``: chosen by the client since Kafka 4.0 (a UUID string); empty on a first join
  lets the coordinator choose one.
- ``rebalance_timeout_ms``: -1 when not changed; required on a join.
- ``subscribed_topic_names`` / ``subscribed_topic_regex``: one of them required on a join.
- ``topic_partitions``: what the member owns now (topic id -> partitions); must be empty on
  a join; ``None`` when unchanged since the last heartbeat.

Pure data: no I/O, no state; safe from any thread.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Mapping, Optional

__all__ = [
    "JOIN_GROUP_MEMBER_EPOCH", "LEAVE_GROUP_MEMBER_EPOCH", "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse", "Assignment",
]

JOIN_GROUP_MEMBER_EPOCH = 0
"""A heartbeat with this epoch joins or rejoins the group (Kafka's ``JOIN_GROUP_MEMBER_EPOCH``)."""
LEAVE_GROUP_MEMBER_EPOCH = -1
"""A heartbeat with this epoch leaves the group (Kafka's ``LEAVE_GROUP_MEMBER_EPOCH``)."""
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
"""A static member leaves for now and keeps its place (Kafka's ``LEAVE_GROUP_STATIC_MEMBER_EPOCH``)."""

Assignment = Mapping[uuid.UUID, frozenset[int]]
"""Topic id -> partition numbers: an assignment as the heartbeat carries it."""


@dataclass(frozen=True)
class ConsumerGroupHeartbeatRequest:
    """One ConsumerGroupHeartbeat request (Kafka's ``ConsumerGroupHeartbeatRequestData``)."""

    group_id: str
    member_id: str = ""
    member_epoch: int = JOIN_GROUP_MEMBER_EPOCH
    instance_id: Optional[str] = None
    rack_id: Optional[str] = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Optional[tuple[str, ...]] = None
    subscribed_topic_regex: Optional[str] = None
    server_assignor: Optional[str] = None
    topic_partitions: Optional[Assignment] = None


@dataclass(frozen=True)
class ConsumerGroupHeartbeatResponse:
    """One ConsumerGroupHeartbeat response (errors are raised as kafkasim exceptions instead).

    ``assignment`` is the member's whole current assignment, or ``None`` when it did not
    change since the last response (and the request was not a full one), as in Kafka.
    """

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int = 0
    assignment: Optional[Assignment] = None
