"""A consumer group of Kafka 4's consumer protocol (KIP-848): its members and epochs, as data.

Kafka's ``modern/consumer/ConsumerGroup`` and ``ConsumerGroupMember``, restated. The rules
that change them live elsewhere: :mod:`kafkasim.coordinator.reconciliation` moves one member
towards its target, :mod:`kafkasim.coordinator.target_assignment` computes the target, and
:mod:`kafkasim.coordinator.consumer_heartbeat` handles the heartbeat that drives both.

The three epochs:

- the **group epoch** grows by one each time the group's subscriptions change (a member
  joins, leaves, changes its subscription, or a subscribed topic changes);
- the **target assignment epoch** is the group epoch the target assignment was computed
  for; ``group_epoch > assignment_epoch`` means a new target is due (state ASSIGNING);
- each **member epoch** is the target epoch the member has reconciled to (0: joining,
  -2: a static member that left for now).

Invariants (kept by :meth:`ConsumerGroup.update_member` / :meth:`ConsumerGroup.remove_member`,
which fail loudly with :class:`~kafkasim.errors.IllegalStateError` when broken):

- a partition is **owned by at most one member at any instant**: every partition in a
  member's ``assigned_partitions`` or ``partitions_pending_revocation`` has exactly one
  entry in the partition-epoch map, the owner's member epoch; a second owner is refused
  ("Cannot set the epoch of ... because the partition is still owned at epoch ...");
- ``static_members`` maps each ``group.instance.id`` to exactly one member id;
- the state is derived: EMPTY (no members), ASSIGNING (group epoch > target epoch),
  RECONCILING (some member is not STABLE at the target epoch), else STABLE.

Thread-safety: none; the coordinator that owns a group serializes every call on it.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from dataclasses import dataclass, field
from typing import Mapping, Optional

from kafkasim.assignors.group_spec import HETEROGENEOUS, HOMOGENEOUS
from kafkasim.errors import IllegalStateError, UnknownMemberIdError
from kafkasim.protocol.consumer_group import Assignment

__all__ = ["MemberState", "ConsumerGroupState", "ConsumerGroupMember", "ConsumerGroup", "TopicMetadata",
           "ClassicMemberMetadata", "EMPTY_ASSIGNMENT", "CONSUMER_PROTOCOL_TYPE"]

CONSUMER_PROTOCOL_TYPE = "consumer"
"""Kafka's ``ConsumerProtocol.PROTOCOL_TYPE``: the only classic protocol type a consumer group takes."""

EMPTY_ASSIGNMENT: Assignment = {}


class MemberState(str, enum.Enum):
    """A member's reconciliation state (Kafka's ``MemberState``, same names)."""

    STABLE = "stable"
    """Reconciled to its member epoch; nothing to revoke and nothing waiting."""
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    """Asked to revoke partitions; stays at its epoch until a heartbeat shows they are gone."""
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    """At the target epoch, but waiting for partitions that another member still owns."""
    UNKNOWN = "unknown"
    """A state this coordinator does not know (Kafka: written by a newer version); fenced."""


class ConsumerGroupState(str, enum.Enum):
    """A consumer group's state (Kafka's ``ConsumerGroup.ConsumerGroupState``, as it prints them)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class TopicMetadata:
    """What the coordinator knows of one topic (Kafka's ``TopicMetadata`` plus racks)."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int
    racks: Mapping[int, frozenset[str]] = field(default_factory=dict)
    """partition -> racks of its replicas (empty: no rack information)."""


def _freeze(assignment: Optional[Mapping[uuid.UUID, object]]) -> dict[uuid.UUID, frozenset[int]]:
    """A copy with frozenset values and no empty topics (Kafka drops empty topics too)."""
    return {t: frozenset(ps) for t, ps in (assignment or {}).items() if ps}


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a
    consumer group brought with its JoinGroup (Kafka's ``ClassicMemberMetadata`` of the member
    metadata record): its session timeout and its ``(protocol name, metadata bytes)`` in its
    preference order."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol the member's join answer names: its first (Kafka's choice)."""
        return self.supported_protocols[0][0]


@dataclass(frozen=True)
class ConsumerGroupMember:
    """One member of a consumer group (Kafka's ``ConsumerGroupMember``); immutable, replaced whole.

    ``assigned_partitions`` are what the member may own now (all of them given to it);
    ``partitions_pending_revocation`` are what it was asked to give up and may still own.
    """

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: Optional[str] = None
    rack_id: Optional[str] = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: Optional[str] = None
    server_assignor_name: Optional[str] = None
    assigned_partitions: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    partitions_pending_revocation: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)
    classic_member_metadata: Optional[ClassicMemberMetadata] = None
    """Set while the member speaks the classic protocol (a mixed group, Kafka 4)."""

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    def __post_init__(self) -> None:
        object.__setattr__(self, "assigned_partitions", _freeze(self.assigned_partitions))
        object.__setattr__(self, "partitions_pending_revocation", _freeze(self.partitions_pending_revocation))
        object.__setattr__(self, "subscribed_topic_names", tuple(sorted(set(self.subscribed_topic_names))))

    def replace(self, **changes) -> "ConsumerGroupMember":
        """A copy with ``changes`` applied (Kafka's ``ConsumerGroupMember.Builder``)."""
        return dataclasses.replace(self, **changes)

    def with_epoch(self, epoch: int) -> "ConsumerGroupMember":
        """Move to ``epoch``, remembering the current one (Kafka's ``updateMemberEpoch``)."""
        return self.replace(previous_member_epoch=self.member_epoch, member_epoch=epoch)

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        """STABLE at the target epoch."""
        return self.state is MemberState.STABLE and self.member_epoch == target_assignment_epoch

    def owned(self) -> dict[uuid.UUID, frozenset[int]]:
        """Every partition the member may own now: assigned plus pending revocation."""
        out = dict(self.assigned_partitions)
        for t, ps in self.partitions_pending_revocation.items():
            out[t] = out.get(t, frozenset()) | ps
        return out


class ConsumerGroup:
    """One consumer group (``group.type`` CONSUMER) and its epochs, members and target assignment."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target_assignment: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        """topic name -> metadata, for the subscribed topics that exist (names and regex matches)."""
        self.resolved_regexes: dict[str, frozenset[str]] = {}
        """regex -> the topic names it matched when last resolved."""
        self.metadata_refresh_deadline_ms = 0
        """Before this time the subscription metadata is trusted; 0: refresh on the next heartbeat."""
        self._partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.state = ConsumerGroupState.EMPTY

    # -- reads -------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> ConsumerGroupMember:
        """The member, or :class:`~kafkasim.errors.UnknownMemberIdError` with Kafka's message."""
        from_members = self.members.get(member_id)
        if from_members is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {self.group_id}.")
        return from_members

    def static_member(self, instance_id: Optional[str]) -> Optional[ConsumerGroupMember]:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member that owns the partition now, or -1 when nobody owns it."""
        return self._partition_epochs.get((topic_id, partition), -1)

    def owners(self) -> dict[tuple[uuid.UUID, int], str]:
        """(topic id, partition) -> the member that may own it now (assigned or pending revocation)."""
        out: dict[tuple[uuid.UUID, int], str] = {}
        for member in self.members.values():
            for t, ps in member.owned().items():
                for p in ps:
                    out[(t, p)] = member.member_id
        return out

    def target_assignment_of(self, member_id: str, instance_id: Optional[str] = None) -> dict[uuid.UUID, frozenset[int]]:
        """The member's target; for a static member, the target of the member its instance id
        names now (the one it replaces), as Kafka's ``targetAssignment(memberId, instanceId)``."""
        if instance_id is None:
            return self.target_assignment.get(member_id, {})
        previous = self.static_members.get(instance_id)
        return self.target_assignment.get(previous, {}) if previous is not None else {}

    def subscribed_topic_names(self, members: Optional[Mapping[str, ConsumerGroupMember]] = None) -> dict[str, int]:
        """topic name -> how many members subscribe to it (by name or through a regex)."""
        counts: dict[str, int] = {}
        for m in (self.members if members is None else members).values():
            for name in self.topics_of(m):
                counts[name] = counts.get(name, 0) + 1
        return counts

    def topics_of(self, member: ConsumerGroupMember) -> set[str]:
        """The topic names ``member`` subscribes to: its names plus its regex's last resolution."""
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names |= self.resolved_regexes.get(member.subscribed_topic_regex, frozenset())
        return names

    def subscription_type(self, members: Optional[Mapping[str, ConsumerGroupMember]] = None) -> str:
        """HOMOGENEOUS when every member subscribes to the same topics (Kafka's rule)."""
        ms = list((self.members if members is None else members).values())
        subs = {frozenset(self.topics_of(m)) for m in ms}
        return HOMOGENEOUS if len(subs) <= 1 else HETEROGENEOUS

    def preferred_server_assignor(self, members: Optional[Mapping[str, ConsumerGroupMember]] = None) -> Optional[str]:
        """The assignor most members ask for (ties: the smallest name; Kafka's tie order is a
        hash map's), or None when no member names one."""
        counts: dict[str, int] = {}
        for m in (self.members if members is None else members).values():
            if m.server_assignor_name:
                counts[m.server_assignor_name] = counts.get(m.server_assignor_name, 0) + 1
        if not counts:
            return None
        return min(counts, key=lambda name: (-counts[name], name))

    def num_classic_protocol_members(self) -> int:
        return sum(1 for m in self.members.values() if m.uses_classic_protocol)

    def supports_classic_protocols(self, protocol_type: Optional[str], names: set[str]) -> bool:
        """Whether a classic member offering ``names`` of ``protocol_type`` may join (Kafka's
        ``supportsClassicProtocols``): the ``consumer`` type, and, unless the group is empty, a
        protocol every classic member supports."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        if not self.members:
            return bool(names)
        classic = [m for m in self.members.values() if m.uses_classic_protocol]
        return any(all(name in {n for n, _ in m.classic_member_metadata.supported_protocols} for m in classic)
                   for name in names)

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        """Kafka's ``allMembersUseClassicProtocolExcept``: ``member_id`` speaks the consumer
        protocol and every other member the classic one."""
        member = self.members.get(member_id)
        return (member is not None and not member.uses_classic_protocol
                and self.num_classic_protocol_members() == len(self.members) - 1)

    # -- writes ------------------------------------------------------------------------

    def update_member(self, new: ConsumerGroupMember) -> None:
        """Add or replace a member, moving its partition epochs (refuses a second owner)."""
        old = self.members.get(new.member_id)
        mine = {(t, p) for t, ps in old.owned().items() for p in ps} if old is not None else set()
        for t, ps in new.owned().items():       # check first: a refused change changes nothing
            for p in ps:
                previous = self._partition_epochs.get((t, p))
                if previous is not None and (t, p) not in mine:
                    raise IllegalStateError(
                        f"Cannot set the epoch of {t}-{p} to {new.member_epoch} because the partition is "
                        f"still owned at epoch {previous} (member {new.member_id} of group {self.group_id})")
        if old is not None:
            self._remove_epochs(old)
        self._add_epochs(new)
        self.members[new.member_id] = new
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        self.update_state()

    def remove_member(self, member_id: str) -> ConsumerGroupMember:
        """Remove a member and free its partitions (its target assignment is removed too)."""
        old = self.members.pop(member_id)
        self._remove_epochs(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self.target_assignment.pop(member_id, None)
        self.update_state()
        return old

    def set_group_epoch(self, epoch: int) -> None:
        self.group_epoch = epoch
        self.update_state()

    def set_target_assignment(self, epoch: int, assignment: Mapping[str, Mapping[uuid.UUID, frozenset[int]]]) -> None:
        """Install a new target assignment computed for group epoch ``epoch``."""
        self.target_assignment = {m: _freeze(a) for m, a in assignment.items()}
        self.assignment_epoch = epoch
        self.update_state()

    def update_state(self) -> None:
        """Derive the group state (Kafka's ``maybeUpdateGroupState``)."""
        if not self.members:
            self.state = ConsumerGroupState.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            self.state = ConsumerGroupState.ASSIGNING
        elif any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            self.state = ConsumerGroupState.RECONCILING
        else:
            self.state = ConsumerGroupState.STABLE

    def _add_epochs(self, member: ConsumerGroupMember) -> None:
        for t, ps in member.owned().items():
            for p in ps:
                previous = self._partition_epochs.get((t, p))
                if previous is not None:
                    raise IllegalStateError(
                        f"Cannot set the epoch of {t}-{p} to {member.member_epoch} because the partition is "
                        f"still owned at epoch {previous} (member {member.member_id} of group {self.group_id})")
                self._partition_epochs[(t, p)] = member.member_epoch

    def _remove_epochs(self, member: ConsumerGroupMember) -> None:
        for t, ps in member.owned().items():
            for p in ps:
                previous = self._partition_epochs.pop((t, p), None)
                if previous != member.member_epoch:
                    raise IllegalStateError(
                        f"Cannot remove the epoch {member.member_epoch} from {t}-{p} because the partition is "
                        f"still owned at a different epoch {previous} (group {self.group_id})")
