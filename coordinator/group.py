"""Group and member metadata held by the group coordinator (plain data, no protocol logic).

A :class:`Group` is one consumer group: its :class:`GroupState`, generation, chosen
protocol, leader, members (in join order) and committed offsets. A
:class:`MemberMetadata` is one member as the coordinator sees it.

Invariants (kept by :class:`kafkasim.coordinator.coordinator.GroupCoordinator`):
- ``members`` is ordered by first join; the leader, when set, is a member;
- ``static_members`` maps each ``group_instance_id`` to exactly one current member id;
- ``generation_id`` only grows; it grows by one each time a rebalance completes;
- a member's ``assignment`` belongs to ``generation_id`` (empty while rebalancing);
- ``assignment_bytes`` is what the leader sent for the member, byte for byte, or None when
  the leader gave topic-partitions (an in-process leader); ``assignment`` is then the
  topic-partitions decoded from it (consumer protocol), never a replacement for it.

Thread-safety: none of its own; the coordinator's lock guards every group.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Optional

from kafkasim.types import OffsetAndMetadata, TopicPartition

__all__ = ["GroupState", "MemberMetadata", "Group", "ClassicMember"]


class GroupState(str, enum.Enum):
    """Kafka's classic group states (names as ``kafka-consumer-groups --describe`` prints them)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class MemberMetadata:
    """One member: identity, timeouts, the protocols it offered, and its assignment."""

    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list            # [(protocol name, metadata)] in the member's preference order
    last_heartbeat_ms: int
    joined: bool = False       # has (re)joined in the rebalance now in progress
    synced: bool = False       # has sent SyncGroup in the current CompletingRebalance
    assignment: list = field(default_factory=list)   # [TopicPartition]
    assignment_bytes: Optional[bytes] = None   # the leader's bytes for this member, unchanged
    client_host: Optional[str] = None   # the client's address as Kafka shows it ("/127.0.0.1"); None in-process

    def metadata_for(self, protocol: str) -> Any:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass
class Group:
    """One consumer group as the coordinator holds it."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: Optional[str] = None
    protocol_name: Optional[str] = None
    leader_id: Optional[str] = None
    members: dict = field(default_factory=dict)          # member_id -> MemberMetadata
    static_members: dict = field(default_factory=dict)   # group_instance_id -> member_id
    offsets: dict = field(default_factory=dict)          # TopicPartition -> (OffsetAndMetadata, commit_ts)
    rebalance_deadline_ms: int = 0     # PreparingRebalance: complete the join by then
    initial_delay_until_ms: int = 0    # PreparingRebalance from Empty: wait for more joiners until then
    sync_deadline_ms: int = 0          # CompletingRebalance: drop members that did not sync by then
    state_timestamp_ms: int = -1

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def committed(self, tp: TopicPartition) -> Optional[OffsetAndMetadata]:
        entry = self.offsets.get(tp)
        return entry[0] if entry else None


@dataclass(frozen=True)
class ClassicMember:
    """One member of a classic group, as an online conversion carries it across (either way):
    ``protocols`` are ``(name, ConsumerProtocolSubscription bytes)`` in its preference order,
    ``assignment`` its topic-partitions ``((topic, partition), ...)``."""

    member_id: str
    instance_id: Optional[str]
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: tuple[tuple[str, int], ...] = ()
