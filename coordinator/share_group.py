"""Share groups' membership (KIP-932): Kafka's ``ShareGroup`` and its heartbeat, pure.

The protocol (ShareGroupHeartbeat, Kafka's ``GroupMetadataManager.shareGroupHeartbeat``) is
KIP-848's without revocation, since a partition may go to several members at once:

1. A member joins with epoch 0 and the member id it chose (non-empty) and its subscribed
   topic names (required on a join). A group with ``group.share.max.size`` members refuses a
   new one (GROUP_MAX_SIZE_REACHED).
2. The **group epoch** goes up when a member joins or leaves, a subscription or rack changes,
   or the subscribed topics' partition counts change.
3. When the group epoch is ahead of the **assignment epoch**, the simple assignor
   (:class:`~kafkasim.assignors.simple.SimpleAssignor`) computes the target from the members'
   subscriptions and their current target; the assignment epoch becomes the group epoch.
4. Each member takes its target at once: its **member epoch** becomes the assignment epoch;
   the answer carries the assignment when it changed since the member's last answer.
5. A heartbeat with epoch -1 leaves. A member silent for ``group.share.session.timeout.ms``
   is fenced (:meth:`ShareGroupCoordinator.tick`). Either way the caller releases its records.

Errors (Kafka's messages): INVALID_REQUEST (empty group, member or rack id, no subscription on
a join, an epoch below -1), GROUP_ID_NOT_FOUND (an epoch above 0 or -1 for a group that does
not exist), UNKNOWN_MEMBER_ID (a member the group does not know), FENCED_MEMBER_EPOCH (an
epoch above 0 that is neither the member's nor its previous one: Kafka accepts the previous
epoch, whose answer may have been lost), GROUP_MAX_SIZE_REACHED.

State: "Empty" (no members) or "Stable". The clock is injected; no I/O. Not thread-safe: the
broker's share-group lock serialises calls.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from kafkasim.assignors.group_spec import HETEROGENEOUS, HOMOGENEOUS, GroupSpec, MemberSubscription, TopicsImage
from kafkasim.assignors.simple import SimpleAssignor
from kafkasim.clock import Clock
from kafkasim.coordinator.share_group_config import ShareGroupConfig
from kafkasim.errors import (
    FencedMemberEpochError, GroupIdNotFoundError, GroupMaxSizeReachedError, InvalidRequestError, UnknownMemberIdError,
)
from kafkasim.protocol.share_group import ShareHeartbeatResult

__all__ = ["ShareGroupMember", "ShareGroup", "ShareGroupCoordinator", "EMPTY", "STABLE"]

EMPTY, STABLE = "Empty", "Stable"
"""Kafka's ``ShareGroup.ShareGroupState`` names as ListGroups and describe show them."""


@dataclass
class ShareGroupMember:
    """One member: its epoch, what it subscribes to, and its assignment (topic -> partitions)."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: Optional[str] = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assignment: dict[str, frozenset[int]] = field(default_factory=dict)
    session_deadline_ms: Optional[int] = None
    answered: Optional[tuple] = None        # (epoch, assignment) of the last answer


@dataclass
class ShareGroup:
    """One share group (see the module docstring)."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    target: dict[str, dict[str, frozenset[int]]] = field(default_factory=dict)
    topics_seen: tuple = ()
    initialized: dict[str, frozenset[int]] = field(default_factory=dict)
    """topic -> partitions whose share-partition state exists (ShareGroupStatePartitionMetadata)."""

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def subscribed_topic_names(self) -> frozenset[str]:
        return frozenset(n for m in self.members.values() for n in m.subscribed_topic_names)


class ShareGroupCoordinator:
    """The share groups of one broker: heartbeats, fencing, the target assignment."""

    def __init__(self, clock: Clock, config: ShareGroupConfig,
                 topics: Optional[Mapping[str, tuple[uuid.UUID, int]]] = None) -> None:
        self.clock = clock
        self.config = config
        self.assignor = SimpleAssignor()
        self.topics: dict[str, tuple[uuid.UUID, int]] = dict(topics or {})
        self._groups: dict[str, ShareGroup] = {}

    # -- groups ---------------------------------------------------------------------------

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def find_group(self, group_id: str) -> Optional[ShareGroup]:
        return self._groups.get(group_id)

    def group(self, group_id: str) -> ShareGroup:
        group = self._groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        return group

    def load_group(self, group: ShareGroup) -> None:
        """Take a group replayed from ``__consumer_offsets``; its members' sessions restart now."""
        now = self.clock.now_ms()
        for m in group.members.values():
            m.session_deadline_ms = now + self.config.session_timeout_ms
            m.answered = None
        self._metadata_changed(group)         # what it subscribes to now is what it was assigned from
        self._groups[group.group_id] = group

    def create_group(self, group_id: str) -> ShareGroup:
        """The group ``group_id``, created empty when there is none (AlterShareGroupOffsets)."""
        return self._groups.setdefault(group_id, ShareGroup(group_id))

    def delete_group(self, group_id: str) -> None:
        self._groups.pop(group_id, None)

    def update_topics(self, topics: Mapping[str, tuple[uuid.UUID, int]]) -> None:
        """The broker's topics changed (created, deleted, grown)."""
        self.topics = dict(topics)

    # -- heartbeat ------------------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, *,
                  subscribed_topic_names: Optional[Sequence[str]] = None, rack_id: Optional[str] = None,
                  client_id: str = "", client_host: str = "") -> ShareHeartbeatResult:
        """One ShareGroupHeartbeat (see the module docstring). A leave answers epoch -1."""
        if not isinstance(group_id, str) or not group_id:
            raise InvalidRequestError("GroupId can't be empty.")
        if not isinstance(member_id, str) or not member_id:
            raise InvalidRequestError("MemberId can't be empty.")
        if not isinstance(member_epoch, int) or isinstance(member_epoch, bool) or member_epoch < -1:
            raise InvalidRequestError("MemberEpoch is invalid.")
        if rack_id is not None and (not isinstance(rack_id, str) or not rack_id):
            raise InvalidRequestError("RackId can't be empty.")
        if subscribed_topic_names is not None:
            if isinstance(subscribed_topic_names, (str, bytes)) or not all(
                    isinstance(n, str) for n in subscribed_topic_names):
                raise InvalidRequestError(f"SubscribedTopicNames must be a list of topic names, "
                                          f"got {subscribed_topic_names!r:.80}.")
        if member_epoch == 0 and not subscribed_topic_names:
            raise InvalidRequestError("SubscribedTopicNames must be set in first request.")
        if member_epoch == -1:
            self.leave(group_id, member_id)
            return ShareHeartbeatResult(member_id, -1, self.config.heartbeat_interval_ms, None)
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member_epoch > 0:
            if group is None:
                raise GroupIdNotFoundError(f"Share group {group_id} not found.")
            if member is None:
                raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
            if member_epoch == member.previous_member_epoch and member_epoch < member.member_epoch:
                member.answered = None      # its answer with the new epoch was lost: answered again
            elif member_epoch != member.member_epoch:
                raise FencedMemberEpochError(
                    f"The share group member has a smaller member epoch ({member_epoch}) than the one known by "
                    f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions "
                    "and rejoin." if member_epoch < member.member_epoch else
                    f"The share group member has a greater member epoch ({member_epoch}) than the one known by "
                    f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions "
                    "and rejoin.")
        joined = member is None
        if member is None:
            if group is not None and len(group.members) >= self.config.max_size:
                raise GroupMaxSizeReachedError(
                    f"The share group has reached its maximum capacity of {self.config.max_size} members.")
            if group is None:
                group = self._groups[group_id] = ShareGroup(group_id)
            member = ShareGroupMember(member_id)
            group.members[member_id] = member
        elif member_epoch == 0:
            member.answered = None           # a rejoin gets its assignment again
        changed = False
        if subscribed_topic_names is not None:
            names = tuple(sorted(set(subscribed_topic_names)))
            changed |= names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if rack_id is not None and rack_id != member.rack_id:
            member.rack_id, changed = rack_id, True
        member.client_id, member.client_host = client_id or "", client_host or ""
        if self._metadata_changed(group) or changed or joined:     # one bump, as Kafka's heartbeat
            group.group_epoch += 1
        self._maybe_assign(group)
        member.session_deadline_ms = self.clock.now_ms() + self.config.session_timeout_ms
        return self._answer(group, member)

    def _answer(self, group: ShareGroup, member: ShareGroupMember) -> ShareHeartbeatResult:
        target = group.target.get(member.member_id, {})
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch, member.member_epoch = member.member_epoch, group.assignment_epoch
        member.assignment = dict(target)
        now = (member.member_epoch, tuple(sorted((t, tuple(sorted(ps))) for t, ps in target.items())))
        assignment = None
        if member.answered != now:
            assignment = {t: sorted(ps) for t, ps in sorted(target.items())}
            member.answered = now
        return ShareHeartbeatResult(member.member_id, member.member_epoch, self.config.heartbeat_interval_ms,
                                    assignment)

    def leave(self, group_id: str, member_id: str) -> None:
        """Member ``member_id`` leaves (UNKNOWN_MEMBER_ID when it is not in the group)."""
        group = self._groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        if member_id not in group.members:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
        self._remove(group, member_id)

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        del group.members[member_id]
        group.target.pop(member_id, None)
        group.group_epoch += 1
        self._maybe_assign(group)

    def _metadata_changed(self, group: ShareGroup) -> bool:
        """Whether the subscribed topics' ids or partition counts changed since last seen
        (remembering what is seen now)."""
        seen = tuple(sorted((n, self.topics[n]) for n in group.subscribed_topic_names() if n in self.topics))
        changed = seen != group.topics_seen
        group.topics_seen = seen
        return changed

    def _maybe_assign(self, group: ShareGroup) -> None:
        if group.group_epoch <= group.assignment_epoch:
            return
        ids = {name: tid for name, (tid, _) in self.topics.items()}
        names = {tid: name for name, tid in ids.items()}
        image = TopicsImage({tid: n for tid, n in self.topics.values()})
        subs = {mid: MemberSubscription(
                    frozenset(ids[n] for n in m.subscribed_topic_names if n in ids),
                    {ids[t]: ps for t, ps in group.target.get(mid, {}).items() if t in ids})
                for mid, m in group.members.items()}
        kind = HOMOGENEOUS if len({s.subscribed_topic_ids for s in subs.values()}) <= 1 else HETEROGENEOUS
        result = self.assignor.assign(GroupSpec(subs, kind), image) if subs else {}
        group.target = {mid: {names[tid]: frozenset(ps) for tid, ps in result.get(mid, {}).items() if ps}
                        for mid in group.members}
        group.assignment_epoch = group.group_epoch

    # -- timers ---------------------------------------------------------------------------

    def next_deadline_ms(self) -> Optional[int]:
        deadlines = [m.session_deadline_ms for g in self._groups.values() for m in g.members.values()
                     if m.session_deadline_ms is not None]
        return min(deadlines) if deadlines else None

    def tick(self) -> list[tuple[str, str]]:
        """Fence the members whose session ran out; returns (group id, member id) of each."""
        now = self.clock.now_ms()
        fenced = []
        for gid in sorted(self._groups):
            group = self._groups[gid]
            for mid in sorted(group.members):
                deadline = group.members[mid].session_deadline_ms
                if deadline is not None and deadline <= now:
                    self._remove(group, mid)
                    fenced.append((gid, mid))
        return fenced

    def refresh_topics(self, topics: Mapping[str, tuple[uuid.UUID, int]]) -> list[str]:
        """New topics image: the groups whose subscribed metadata changed get a new epoch and
        target; returns their ids."""
        self.update_topics(topics)
        changed = []
        for gid, group in sorted(self._groups.items()):
            if self._metadata_changed(group):
                group.group_epoch += 1
                self._maybe_assign(group)
                changed.append(gid)
        return changed

