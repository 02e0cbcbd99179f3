"""The consumer group coordinator of Kafka 4's consumer protocol (KIP-848): the heartbeat.

:class:`ConsumerGroupCoordinator` restates Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``
for groups of type CONSUMER, beside the classic coordinator
(:class:`kafkasim.coordinator.coordinator.GroupCoordinator`). It is pure: no broker, no wire,
no thread; time comes from the injected clock. Member ids are the clients' (Kafka 4.0,
KIP-1082: a member chooses its UUID and keeps it across rejoins).

The protocol (who does what):

- A member **joins** with epoch 0, its subscription (topic names or a regex) and its
  rebalance timeout. The coordinator adds it, bumps the **group epoch**, asks the server
  assignor (``group.consumer.assignors``; a member may ask for one by name) for a new
  **target assignment**, and answers with the member's epoch and what it may own now.
- Every **heartbeat** (each ``group.consumer.heartbeat.interval.ms``) carries the member's
  epoch and, when changed, the partitions it owns. The coordinator reconciles the member
  towards its target (:mod:`kafkasim.coordinator.reconciliation`): first it asks the member
  to revoke partitions the target gives to others; only once the member's heartbeat shows
  them gone does it move to the new epoch, and a partition is handed to its new owner only
  once the previous owner has released it. No group-wide barrier: members that keep their
  partitions keep consuming.
- A member **leaves** with epoch -1 (its partitions are freed and the group epoch bumped),
  or, if static (``group.instance.id``), with -2: it keeps its place and partitions until
  the session times out, and a new member with the same instance id takes them over.
- The coordinator **fences** a member that does not heartbeat within
  ``group.consumer.session.timeout.ms``, or that does not revoke within its rebalance
  timeout: :meth:`ConsumerGroupCoordinator.tick` on the clock reports who was fenced.

Errors are raised as Kafka's (kafkasim exceptions, Kafka's messages):
INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION (request checks, in
Kafka's order), GROUP_ID_NOT_FOUND, GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID,
FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, and UNKNOWN_SERVER_ERROR
when the assignor fails. A refused heartbeat changes nothing.

Differences from Kafka (also in docs/differences.md): regexes use Python's ``re``
(full match) instead of RE2/J and are resolved in the heartbeat that brings them or when
topics change (Kafka resolves them in a background task, at most every 10 s, so its
epoch bump lands on a later heartbeat).

**Mixed groups** (Kafka 4): a member speaking the classic protocol may be in a consumer group.
Its JoinGroup is answered at once (:meth:`ConsumerGroupCoordinator.classic_join`: its
subscription joins like a heartbeat's, it is reconciled at each join against the partitions its
subscription says it owns; the generation is its member epoch), SyncGroup gives its assigned
partitions, and Heartbeat answers REBALANCE_IN_PROGRESS when it must rejoin to move on. A
classic group with members becomes a consumer group when a consumer-protocol member joins
(:meth:`ConsumerGroupCoordinator.upgrade`), and goes back when the last consumer-protocol member
leaves (:meth:`ConsumerGroupCoordinator.take_downgraded`), as ``group.consumer.migration.policy``
allows. The broker moves groups between this coordinator and the classic one.

Over 500 lines because it is one state machine (Kafka's ``GroupMetadataManager`` for consumer
groups): the heartbeat, the classic members' four requests and the timers share the steps of
:meth:`ConsumerGroupCoordinator._update_member` and the same group table.
The coordinator itself writes nothing: the broker turns each change into Kafka's
``__consumer_offsets`` records (:mod:`kafkasim.coordinator.consumer_group_records`) and gives
replayed groups back through :meth:`ConsumerGroupCoordinator.load_groups`.

Thread-safety: none; one caller at a time (the broker serializes its calls under one lock:
:mod:`kafkasim.broker.consumer_group_api`).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

from kafkasim.assignors.group_spec import PartitionAssignorError, ServerAssignor
from kafkasim.clock import Clock
from kafkasim.coordinator.consumer_group import (
    CONSUMER_PROTOCOL_TYPE, ClassicMemberMetadata, ConsumerGroup, ConsumerGroupMember, MemberState, TopicMetadata,
)
from kafkasim.coordinator.consumer_group_config import ConsumerGroupConfig
from kafkasim.coordinator.group import ClassicMember
from kafkasim.coordinator.reconciliation import reconcile
from kafkasim.coordinator.target_assignment import build_target_assignment
from kafkasim.errors import (
    FencedInstanceIdError, FencedMemberEpochError, GroupIdNotFoundError, GroupMaxSizeReachedError,
    IllegalGenerationError, InconsistentGroupProtocolError, InvalidConfigurationError,
    InvalidRegularExpressionError, InvalidRequestError, NonEmptyGroupError, RebalanceInProgressError,
    UnknownMemberIdError, UnknownServerError, UnreleasedInstanceIdError, UnsupportedAssignorError,
)
from kafkasim.protocol.consumer_protocol import decode_assignment, decode_subscription
from kafkasim.protocol.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, Assignment, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

__all__ = ["ConsumerGroupCoordinator", "Fenced", "ClassicJoinAnswer", "ClassicMember", "SESSION_EXPIRED",
           "METADATA_REFRESH_INTERVAL_MS"]

SESSION_EXPIRED = "the member session expired."
METADATA_REFRESH_INTERVAL_MS = 2**31 - 1
"""Kafka re-reads a group's subscribed topics when the metadata image changes, not on a
timer (its ``METADATA_REFRESH_INTERVAL_MS`` is Integer.MAX_VALUE): :meth:`update_topics`."""


@dataclass(frozen=True)
class Fenced:
    """A member the coordinator removed on a timer: ``reason`` is Kafka's log wording."""

    group_id: str
    member_id: str
    member_epoch: int
    reason: str


@dataclass(frozen=True)
class ClassicJoinAnswer:
    """A classic member's JoinGroup answered by a consumer group: at once, no barrier. The
    generation is the member epoch; there is no leader (the broker assigns)."""

    member_id: str
    generation_id: int
    protocol_name: str


class ConsumerGroupCoordinator:
    """Consumer groups (KIP-848): heartbeats in, member epochs and assignments out.

    ``assignors`` are the server assignors available, each selected by its ``name``;
    ``group.consumer.assignors`` (in ``configs``, Kafka's names) lists which ones serve and
    in what order (the first is the default); when not given, all of ``assignors`` in order.
    ``topics`` is the metadata image (what exists now); change it with :meth:`update_topics`.
    """

    def __init__(self, assignors: Sequence[ServerAssignor], clock: Clock, *,
                 configs: Optional[Mapping[str, object]] = None, topics: Iterable[TopicMetadata] = ()) -> None:
        by_name = {a.name: a for a in assignors}
        configs = dict(configs or {})
        configs.setdefault("group.consumer.assignors", ",".join(by_name) or "uniform,range")
        self.config = ConsumerGroupConfig.from_configs(configs)
        missing = [n for n in self.config.assignors if n not in by_name]
        if missing:
            raise InvalidConfigurationError(
                f"Invalid value {configs['group.consumer.assignors']!r} for configuration group.consumer.assignors: "
                f"no assignor named {', '.join(missing)} (given: {', '.join(by_name) or 'none'})")
        self._assignors = {n: by_name[n] for n in self.config.assignors}
        self._clock = clock
        self._topics: dict[str, TopicMetadata] = {t.name: t for t in topics}
        self._groups: dict[str, ConsumerGroup] = {}
        self._session_deadline: dict[tuple[str, str], int] = {}
        self._rebalance_deadline: dict[tuple[str, str], tuple[int, int]] = {}
        self._join_deadline: dict[tuple[str, str], int] = {}     # classic members told to rejoin
        self._sync_deadline: dict[tuple[str, str], int] = {}     # classic members that joined, to sync
        self._downgraded: list[tuple[ConsumerGroup, str]] = []

    # -- reads -------------------------------------------------------------------------

    def group(self, group_id: str) -> ConsumerGroup:
        """The consumer group, or GROUP_ID_NOT_FOUND with Kafka's message."""
        group = self._groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Consumer group {group_id} not found.")
        return group

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def find_group(self, group_id: str) -> Optional[ConsumerGroup]:
        """The consumer group ``group_id``, or None when there is none."""
        return self._groups.get(group_id)

    def delete_group(self, group_id: str) -> None:
        """Delete an EMPTY consumer group (Kafka's ``validateDeleteGroup``): GROUP_ID_NOT_FOUND
        when there is none, NON_EMPTY_GROUP while it has members."""
        group = self.group(group_id)
        if group.members:
            raise NonEmptyGroupError("The group is not empty.")
        del self._groups[group_id]

    @property
    def assignor_names(self) -> tuple[str, ...]:
        """The server assignors in ``group.consumer.assignors`` order (the first is the default)."""
        return tuple(self._assignors)

    @property
    def topics(self) -> Mapping[str, TopicMetadata]:
        return dict(self._topics)

    # -- the heartbeat -----------------------------------------------------------------

    def heartbeat(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        """Handle one ConsumerGroupHeartbeat (steps in the module docstring); raises Kafka's errors."""
        self._validate(request)
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(request)
        now = self._clock.now_ms()
        joining = request.member_epoch == 0
        group = self._groups.get(request.group_id)
        if group is None:
            if not joining:
                raise GroupIdNotFoundError(f"Consumer group {request.group_id} not found.")
            group = ConsumerGroup(request.group_id)
        member_id = request.member_id
        if len(group.members) >= self.config.max_size and not group.has_member(member_id):
            raise GroupMaxSizeReachedError(
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.")

        # The member as it is now (a copy of the departed static member it replaces, if any).
        replaced: Optional[ConsumerGroupMember] = None
        if request.instance_id is None:
            if joining and not group.has_member(member_id):
                member = ConsumerGroupMember(member_id)
            else:
                member = group.member(member_id)
                self._check_epoch(member, request.member_epoch, request.topic_partitions)
        else:
            member, replaced = self._static_member(group, request, joining)

        updated = member.replace(
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor_name=request.server_assignor if request.server_assignor is not None
            else member.server_assignor_name,
            subscribed_topic_names=(tuple(request.subscribed_topic_names) if request.subscribed_topic_names is not None
                                    else member.subscribed_topic_names),
            subscribed_topic_regex=(request.subscribed_topic_regex or None) if request.subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            classic_member_metadata=None)     # a classic member that heartbeats now speaks the consumer protocol
        final = self._update_member(group, member, updated, replaced, request.topic_partitions,
                                    new_member=joining and replaced is None, now=now)
        self._session_deadline[(group.group_id, final.member_id)] = now + self.config.session_timeout_ms

        full = joining or (request.rebalance_timeout_ms != -1 and request.subscribed_topic_names is not None
                           and request.topic_partitions is not None)
        changed = final.assigned_partitions != member.assigned_partitions
        return ConsumerGroupHeartbeatResponse(
            member_id=final.member_id, member_epoch=final.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=dict(final.assigned_partitions) if (full or changed) else None)

    def _update_member(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                       replaced: Optional[ConsumerGroupMember], owned: Optional[Assignment], *, new_member: bool,
                       now: int) -> ConsumerGroupMember:
        """The steps every member request shares (Kafka's heartbeat and its classic JoinGroup):
        1. a changed subscription (or changed topics) bumps the group epoch; 2. a new target
        when the group epoch moved past it; 3. reconcile the member towards its target against
        the partitions it says it ``owned``. Applies it all, or nothing when a step refuses;
        returns the member as it is now."""
        subscription_changed = (updated.subscribed_topic_names != member.subscribed_topic_names
                                or updated.subscribed_topic_regex != member.subscribed_topic_regex)
        members_after = dict(group.members)
        if replaced is not None:
            members_after.pop(replaced.member_id, None)
        members_after[updated.member_id] = updated
        regexes_before = dict(group.resolved_regexes)
        group_epoch = group.group_epoch
        if subscription_changed or now >= group.metadata_refresh_deadline_ms or new_member:
            resolved = self._resolve_regexes(members_after)
            group.resolved_regexes = resolved
            metadata = self._subscription_metadata(group, members_after)
            if subscription_changed or metadata != group.subscription_metadata:
                group_epoch += 1
        else:
            metadata = group.subscription_metadata

        # 2. and 3. may refuse the request: nothing has changed yet (as Kafka, before its records
        # are replayed).
        try:
            if group_epoch > group.assignment_epoch:
                target: Optional[dict] = self._compute_target(group, group_epoch, members_after, metadata, replaced,
                                                              updated)
                target_epoch = group_epoch
                member_target = target.get(updated.member_id, {})
            else:
                target, target_epoch = None, group.assignment_epoch
                member_target = group.target_assignment_of(updated.member_id, updated.instance_id)
            final = updated
            if not updated.is_reconciled_to(target_epoch):
                final = reconcile(updated, target_epoch, member_target, group.current_partition_epoch, owned)
        except Exception:
            group.resolved_regexes = regexes_before
            raise

        # Apply the change (nothing can fail here but a broken invariant).
        self._groups[group.group_id] = group
        if replaced is not None:
            self._forget_timers(group.group_id, replaced.member_id)
            old_target = group.target_assignment.get(replaced.member_id, {})
            group.remove_member(replaced.member_id)
            group.target_assignment[updated.member_id] = old_target
        group.subscription_metadata = dict(metadata)
        group.metadata_refresh_deadline_ms = now + METADATA_REFRESH_INTERVAL_MS
        if target is not None:
            group.set_target_assignment(target_epoch, target)
        group.update_member(final)
        group.set_group_epoch(group_epoch)
        key = (group.group_id, final.member_id)
        if final != updated:
            # Kafka's rebalance timeout: a member asked to revoke must do so within its own.
            if final.state is MemberState.UNREVOKED_PARTITIONS:
                self._rebalance_deadline[key] = (now + max(final.rebalance_timeout_ms, 0), final.member_epoch)
            else:
                self._rebalance_deadline.pop(key, None)
        return final

    # -- classic members in a consumer group (Kafka 4's mixed groups) ---------------------

    def classic_join(self, group_id: str, member_id: str, *, new_member_id: bool, instance_id: Optional[str],
                     protocol_type: Optional[str], protocols: Sequence[tuple[str, bytes]], session_timeout_ms: int,
                     rebalance_timeout_ms: int) -> ClassicJoinAnswer:
        """A JoinGroup for consumer group ``group_id`` (Kafka's ``classicGroupJoinToConsumerGroup``):
        the member's subscription (the first protocol's ``ConsumerProtocolSubscription``) joins
        the group as a consumer-protocol member's would, the group epoch and target move, and the
        member is reconciled against the partitions its subscription says it owns. Answers at
        once. ``new_member_id``: the member came without an id and ``member_id`` was made for it."""
        now = self._clock.now_ms()
        group = self.group(group_id)
        if len(group.members) >= self.config.max_size and not group.has_member(member_id):
            raise GroupMaxSizeReachedError(
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.")
        if not protocols or not group.supports_classic_protocols(protocol_type, {n for n, _ in protocols}):
            raise InconsistentGroupProtocolError(f"Member {member_id}'s protocols are not supported.")
        subscription = decode_subscription(protocols[0][1])
        replaced: Optional[ConsumerGroupMember] = None
        existing = group.static_member(instance_id)
        if instance_id is not None and existing is not None:
            if new_member_id:     # a static member back under a new id takes over the old one
                member, replaced = existing.replace(member_id=member_id, member_epoch=0, previous_member_epoch=0), \
                    existing
            elif existing.member_id != member_id:
                raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} was "
                                            f"fenced by member {existing.member_id}.")
            else:
                member = existing
        elif group.has_member(member_id):
            member = group.member(member_id)
        elif new_member_id or instance_id is not None:
            member = ConsumerGroupMember(member_id)
        else:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group_id}.")
        updated = member.replace(
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=subscription.get("rack_id") or member.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            server_assignor_name=None, subscribed_topic_names=tuple(subscription["topics"]),
            subscribed_topic_regex=None,
            classic_member_metadata=ClassicMemberMetadata(session_timeout_ms, tuple(
                (n, bytes(m)) for n, m in protocols)))
        owned: dict[uuid.UUID, list[int]] = {}
        for topic, p in subscription["owned_partitions"]:
            if topic in self._topics:
                owned.setdefault(self._topics[topic].topic_id, []).append(p)
        final = self._update_member(group, member, updated, replaced, owned,
                                    new_member=replaced is None and not group.has_member(member_id), now=now)
        key = (group_id, final.member_id)
        self._join_deadline.pop(key, None)
        self._session_deadline[key] = now + session_timeout_ms
        self._sync_deadline[key] = now + max(final.rebalance_timeout_ms, 0)
        return ClassicJoinAnswer(final.member_id, final.member_epoch,
                                 final.classic_member_metadata.protocol_name)

    def classic_sync(self, group_id: str, member_id: str, generation_id: int, *, instance_id: Optional[str] = None,
                     protocol_type: Optional[str] = None, protocol_name: Optional[str] = None) -> list[tuple[str, int]]:
        """A SyncGroup for a consumer group (Kafka's ``classicGroupSyncToConsumerGroup``): the
        member's assigned partitions ``[(topic, partition)]``; REBALANCE_IN_PROGRESS when the group
        moved on and the member must rejoin first."""
        group = self.group(group_id)
        member = self._classic_member(group, member_id, instance_id, generation_id)
        expected = member.classic_member_metadata.protocol_name
        if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise InconsistentGroupProtocolError(
                f"The protocol type {protocol_type} from member {member.member_id} request is not equal to the "
                f"group protocol type {CONSUMER_PROTOCOL_TYPE}.")
        if protocol_name is not None and protocol_name != expected:
            raise InconsistentGroupProtocolError(
                f"The protocol name {protocol_name} from member {member.member_id} request is not equal to the "
                f"protocol name {expected} returned in the join response.")
        self._check_rejoin(group, member)
        key = (group_id, member.member_id)
        self._sync_deadline.pop(key, None)
        self._session_deadline[key] = self._clock.now_ms() + member.classic_member_metadata.session_timeout_ms
        return self._topic_partitions(member.assigned_partitions)

    def classic_heartbeat(self, group_id: str, member_id: str, generation_id: int, *,
                          instance_id: Optional[str] = None) -> None:
        """A Heartbeat for a consumer group (Kafka's ``classicGroupHeartbeatToConsumerGroup``):
        REBALANCE_IN_PROGRESS tells the member to rejoin when the group epoch moved past it, when
        it must revoke, or when partitions it waits for were released."""
        group = self.group(group_id)
        member = self._classic_member(group, member_id, instance_id, generation_id)
        now = self._clock.now_ms()
        key = (group_id, member.member_id)
        self._session_deadline[key] = now + member.classic_member_metadata.session_timeout_ms
        if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS or \
                (member.state is MemberState.UNRELEASED_PARTITIONS and not self._waiting_on_unreleased(group, member)):
            self._join_deadline.setdefault(key, now + max(member.rebalance_timeout_ms, 0))
            raise RebalanceInProgressError(f"A new rebalance is triggered in group {group_id} and member "
                                           f"{member.member_id} should rejoin to catch up.")

    def classic_leave(self, group_id: str, member_id: str, *, instance_id: Optional[str] = None) -> str:
        """A LeaveGroup member for a consumer group (Kafka's ``classicGroupLeaveToConsumerGroup``):
        the member goes, its partitions are freed and the group epoch bumped; returns its id."""
        group = self.group(group_id)
        if instance_id is None:
            member = group.member(member_id)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
            if member_id and member.member_id != member_id:
                raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} was "
                                            f"fenced by member {member.member_id}.")
        if not member.uses_classic_protocol:
            raise UnknownMemberIdError(f"Member {member.member_id} does not use the classic protocol.")
        self._fence(group, member)
        return member.member_id

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: Optional[str],
                        generation_id: int) -> ConsumerGroupMember:
        """Kafka's ``validateConsumerGroupMember`` + the classic protocol and generation checks."""
        if instance_id is None:
            member = group.member(member_id)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise UnknownMemberIdError(f"Member with instance id {instance_id} is not a member of group "
                                           f"{group.group_id}.")
            if member.member_id != member_id:
                raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} was "
                                            f"fenced by member {member.member_id}.")
        if not member.uses_classic_protocol:
            raise UnknownMemberIdError(f"Member {member.member_id} does not use the classic protocol.")
        if member.member_epoch != generation_id:
            raise IllegalGenerationError(f"The request generation id {generation_id} is not equal to the member "
                                         f"epoch {member.member_epoch} of member {member.member_id}.")
        return member

    def _check_rejoin(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """Kafka's ``throwIfRebalanceInProgress`` (a member revoking first finishes its revocation)."""
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            key = (group.group_id, member.member_id)
            self._join_deadline.setdefault(key, self._clock.now_ms() + max(member.rebalance_timeout_ms, 0))
            raise RebalanceInProgressError(f"A new rebalance is triggered in group {group.group_id} and member "
                                           f"{member.member_id} should rejoin to catch up.")

    @staticmethod
    def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        """Kafka's ``waitingOnUnreleasedPartition``: a partition of its target is still owned by another."""
        target = group.target_assignment_of(member.member_id)
        for t, ps in target.items():
            have = member.assigned_partitions.get(t, frozenset())
            if any(group.current_partition_epoch(t, p) != -1 for p in ps - have):
                return True
        return False

    def _topic_partitions(self, assignment: Mapping[uuid.UUID, frozenset[int]]) -> list[tuple[str, int]]:
        names = {t.topic_id: t.name for t in self._topics.values()}
        return sorted((names[t], p) for t, ps in assignment.items() if t in names for p in ps)

    # -- online conversion (group.consumer.migration.policy) ------------------------------

    def can_upgrade(self, protocol_type: Optional[str], members: int) -> bool:
        """Kafka's ``validateOnlineUpgrade`` for a classic group with ``members`` members."""
        return (self.config.upgrade_enabled and protocol_type == CONSUMER_PROTOCOL_TYPE
                and members <= self.config.max_size)

    def upgrade(self, group_id: str, generation_id: int, protocol_name: Optional[str],
                members: Sequence[ClassicMember]) -> ConsumerGroup:
        """Take over a classic group with members (Kafka's ``ConsumerGroup.fromClassicGroup``):
        each member keeps its classic protocol, its last assignment (as its target), and its
        session; the group and every member sit at the classic generation, STABLE. The
        consumer-protocol member whose heartbeat asked for it joins next. GROUP_ID_NOT_FOUND when
        a member's subscription does not parse (the group stays classic)."""
        group = ConsumerGroup(group_id)
        ids = {t.name: t.topic_id for t in self._topics.values()}
        built = []
        for m in members:
            metadata = dict(m.protocols).get(protocol_name) if protocol_name else None
            try:
                subscription = decode_subscription(metadata if metadata is not None else m.protocols[0][1])
            except InvalidRequestError as exc:
                raise GroupIdNotFoundError(f"Cannot upgrade the classic group {group_id} to consumer group because "
                                           f"the embedded consumer protocol is malformed.") from exc
            assigned: dict[uuid.UUID, set[int]] = {}
            for topic, p in m.assignment:
                if topic in ids:
                    assigned.setdefault(ids[topic], set()).add(p)
            built.append(ConsumerGroupMember(
                m.member_id, member_epoch=generation_id, previous_member_epoch=generation_id,
                instance_id=m.instance_id, rack_id=subscription.get("rack_id"),
                rebalance_timeout_ms=m.rebalance_timeout_ms, subscribed_topic_names=tuple(subscription["topics"]),
                assigned_partitions=assigned,
                classic_member_metadata=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols))))
        group.set_target_assignment(generation_id, {m.member_id: m.assigned_partitions for m in built})
        for m in built:
            group.update_member(m)
        group.subscription_metadata = self._subscription_metadata(group, group.members)
        group.set_group_epoch(generation_id)
        self._groups[group_id] = group
        now = self._clock.now_ms()
        for m in built:
            self._session_deadline[(group_id, m.member_id)] = now + m.classic_member_metadata.session_timeout_ms
        return group

    def take_downgraded(self) -> list[tuple[str, int, list[ClassicMember]]]:
        """The groups that went back to the classic protocol since the last call (Kafka's
        ``ClassicGroup.fromConsumerGroup``): ``(group id, generation = the group epoch, members)``,
        each member with its target assignment. They are no longer here; the caller hands them
        to the classic coordinator, which starts a rebalance."""
        out = []
        for group, _left in self._downgraded:
            names = {t.topic_id: t.name for t in self._topics.values()}
            members = []
            for mid, m in sorted(group.members.items()):
                target = group.target_assignment.get(mid, {})
                members.append(ClassicMember(
                    mid, m.instance_id, "", "", m.classic_member_metadata.session_timeout_ms,
                    m.rebalance_timeout_ms, m.classic_member_metadata.supported_protocols,
                    tuple(sorted((names[t], p) for t, ps in target.items() if t in names for p in ps))))
            out.append((group.group_id, group.group_epoch, members))
        self._downgraded.clear()
        return out

    def load_groups(self, groups: Iterable[ConsumerGroup]) -> None:
        """Install groups replayed from ``__consumer_offsets``; every member's session timer starts
        now and a member asked to revoke gets its rebalance timeout again (Kafka re-arms both on
        load). Their subscriptions are re-read on their next heartbeat."""
        now = self._clock.now_ms()
        for group in groups:
            group.metadata_refresh_deadline_ms = 0
            self._groups[group.group_id] = group
            for member in group.members.values():
                key = (group.group_id, member.member_id)
                self._session_deadline[key] = now + (member.classic_member_metadata.session_timeout_ms
                                                     if member.uses_classic_protocol else self.config.session_timeout_ms)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._rebalance_deadline[key] = (now + max(member.rebalance_timeout_ms, 0), member.member_epoch)

    # -- timers ------------------------------------------------------------------------

    def tick(self) -> list[Fenced]:
        """Fence the members whose session or rebalance timeout ran out by the clock's now,
        in deadline order; return who was fenced and why."""
        now = self._clock.now_ms()
        due: list[tuple[int, str, str, str]] = []
        for (group_id, member_id), deadline in self._session_deadline.items():
            if deadline <= now:
                due.append((deadline, group_id, member_id, "session"))
        for (group_id, member_id), (deadline, _epoch) in self._rebalance_deadline.items():
            if deadline <= now:
                due.append((deadline, group_id, member_id, "rebalance"))
        for kind, timers in (("join", self._join_deadline), ("sync", self._sync_deadline)):
            for (group_id, member_id), deadline in timers.items():
                if deadline <= now:
                    due.append((deadline, group_id, member_id, kind))
        fenced: list[Fenced] = []
        for deadline, group_id, member_id, kind in sorted(due):
            group = self._groups.get(group_id)
            member = group.members.get(member_id) if group is not None else None
            if member is None:
                continue
            if kind == "session":
                if self._session_deadline.get((group_id, member_id)) != deadline:
                    continue
                reason = SESSION_EXPIRED
            elif kind in ("join", "sync"):
                timers = self._join_deadline if kind == "join" else self._sync_deadline
                if timers.get((group_id, member_id)) != deadline:
                    continue
                reason = (f"the classic member failed to {kind} within the rebalance timeout "
                          f"({member.rebalance_timeout_ms}ms).")
            else:
                timer = self._rebalance_deadline.get((group_id, member_id))
                if timer is None or timer[0] != deadline:
                    continue
                if member.member_epoch != timer[1]:
                    del self._rebalance_deadline[(group_id, member_id)]
                    continue
                reason = (f"it failed to transition from epoch {member.member_epoch} within "
                          f"{member.rebalance_timeout_ms}ms.")
            self._fence(group, member)
            fenced.append(Fenced(group_id, member_id, member.member_epoch, reason))
        return fenced

    def next_deadline_ms(self) -> Optional[int]:
        """The earliest pending timer (session or rebalance), or None."""
        times = (list(self._session_deadline.values()) + [d for d, _ in self._rebalance_deadline.values()]
                 + list(self._join_deadline.values()) + list(self._sync_deadline.values()))
        return min(times) if times else None

    # -- topics ------------------------------------------------------------------------

    def update_topics(self, topics: Iterable[TopicMetadata]) -> None:
        """Replace the metadata image; groups subscribed to a topic that changed (created,
        deleted, repartitioned) or with a regex re-read their subscriptions on their next
        heartbeat, as Kafka's ``onNewMetadataImage`` asks them to."""
        new = {t.name: t for t in topics}
        changed = {n for n in set(new) | set(self._topics) if new.get(n) != self._topics.get(n)}
        self._topics = new
        for group in self._groups.values():
            if any(m.subscribed_topic_regex for m in group.members.values()) or \
                    changed & set(group.subscribed_topic_names()):
                group.metadata_refresh_deadline_ms = 0

    # -- the steps ---------------------------------------------------------------------

    def _validate(self, r: ConsumerGroupHeartbeatRequest) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``, in its order."""
        def empty(value: Optional[str]) -> bool:
            return value is not None and not value.strip()
        if r.member_id is None or empty(r.member_id) or r.member_id == "":
            raise InvalidRequestError("MemberId can't be empty.")
        if r.group_id is None or empty(r.group_id) or r.group_id == "":
            raise InvalidRequestError("GroupId can't be empty.")
        if empty(r.instance_id):
            raise InvalidRequestError("InstanceId can't be empty.")
        if empty(r.rack_id):
            raise InvalidRequestError("RackId can't be empty.")
        if r.member_epoch == 0:
            if r.rebalance_timeout_ms == -1:
                raise InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
            if r.topic_partitions is None or any(r.topic_partitions.values()):
                raise InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
            if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
                raise InvalidRequestError(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if r.instance_id is None:
                raise InvalidRequestError("InstanceId can't be null.")
        elif r.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise InvalidRequestError("MemberEpoch is invalid.")
        if r.subscribed_topic_regex:
            try:
                re.compile(r.subscribed_topic_regex)
            except re.error as exc:
                raise InvalidRegularExpressionError(
                    f"SubscribedTopicRegex `{r.subscribed_topic_regex}` is not a valid regular expression: "
                    f"{exc.msg}.") from exc
        if r.server_assignor is not None and r.server_assignor not in self._assignors:
            raise UnsupportedAssignorError(
                f"ServerAssignor {r.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self._assignors)}.")

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, epoch: int, owned: Optional[Assignment]) -> None:
        """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: a greater epoch is fenced; a
        smaller one only passes as the previous epoch with owned partitions all still assigned
        (the response that moved the member on may have been lost)."""
        if epoch > member.member_epoch:
            raise FencedMemberEpochError(
                f"The consumer group member has a greater member epoch ({epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        if epoch < member.member_epoch:
            subset = owned is not None and all(
                ps <= member.assigned_partitions.get(t, frozenset()) if ps else t in member.assigned_partitions
                for t, ps in ((t, frozenset(ps)) for t, ps in owned.items()))
            if epoch != member.previous_member_epoch or not subset:
                raise FencedMemberEpochError(
                    f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the "
                    f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")

    def _static_member(self, group: ConsumerGroup, r: ConsumerGroupHeartbeatRequest,
                       joining: bool) -> tuple[ConsumerGroupMember, Optional[ConsumerGroupMember]]:
        """(the member, the departed member it replaces or None): Kafka's
        ``getOrMaybeSubscribeStaticConsumerGroupMember``."""
        existing = group.static_member(r.instance_id)
        if joining:
            if existing is None:
                if group.has_member(r.member_id):
                    return group.member(r.member_id), None
                return ConsumerGroupMember(r.member_id), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not existing.uses_classic_protocol:
                raise UnreleasedInstanceIdError(
                    f"Static member {r.member_id} with instance id {r.instance_id} cannot join the group because the "
                    f"instance id is owned by {existing.member_id} member.")
            # The new member takes over the departed one: its assignment, at epoch 0.
            return existing.replace(member_id=r.member_id, member_epoch=0, previous_member_epoch=0), existing
        if existing is None:
            raise UnknownMemberIdError(f"Instance id {r.instance_id} is unknown.")
        if existing.member_id != r.member_id:
            raise FencedInstanceIdError(f"Static member {r.member_id} with instance id {r.instance_id} was fenced by "
                                        f"member {existing.member_id}.")
        self._check_epoch(existing, r.member_epoch, r.topic_partitions)
        return existing, None

    def _resolve_regexes(self, members: Mapping[str, ConsumerGroupMember]) -> dict[str, frozenset[str]]:
        regexes = {m.subscribed_topic_regex for m in members.values() if m.subscribed_topic_regex}
        return {rx: frozenset(n for n in self._topics if re.fullmatch(rx, n)) for rx in sorted(regexes)}

    def _subscription_metadata(self, group: ConsumerGroup,
                               members: Mapping[str, ConsumerGroupMember]) -> dict[str, TopicMetadata]:
        names = group.subscribed_topic_names(members)
        return {n: self._topics[n] for n in sorted(names) if n in self._topics}

    def _compute_target(self, group: ConsumerGroup, epoch: int, members_after: Mapping[str, ConsumerGroupMember],
                        metadata: Mapping[str, TopicMetadata], replaced: Optional[ConsumerGroupMember],
                        updated: ConsumerGroupMember) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        name = group.preferred_server_assignor(members_after) or next(iter(self._assignors))
        changes: dict[str, Optional[ConsumerGroupMember]] = {updated.member_id: updated}
        if replaced is not None and replaced.member_id != updated.member_id:
            changes[replaced.member_id] = None
        try:
            result = build_target_assignment(
                self._assignors[name], members=group.members,
                topic_names={m.member_id: frozenset(group.topics_of(m)) for m in members_after.values()},
                subscription_metadata=metadata, subscription_type=group.subscription_type(members_after),
                target_assignment=group.target_assignment, static_members=group.static_members, updated=changes)
        except PartitionAssignorError as exc:
            raise UnknownServerError(f"Failed to compute a new target assignment for epoch {epoch}: {exc}") from exc
        return result.target_assignment

    def _leave(self, r: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        """Kafka's ``consumerGroupLeave``: -1 removes the member; -2 keeps a static member's place."""
        group = self.group(r.group_id)
        if r.instance_id is None:
            member = group.member(r.member_id)
        else:
            member = group.static_member(r.instance_id)
            if member is None:
                raise UnknownMemberIdError(f"Instance id {r.instance_id} is unknown.")
            if member.member_id != r.member_id:
                raise FencedInstanceIdError(f"Static member {r.member_id} with instance id {r.instance_id} was "
                                            f"fenced by member {member.member_id}.")
            if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Its partitions stay reserved for it (epoch -2) until the session times out.
                group.update_member(member.replace(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                                   partitions_pending_revocation={}))
                return ConsumerGroupHeartbeatResponse(member_id=member.member_id,
                                                      member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        self._fence(group, member)
        return ConsumerGroupHeartbeatResponse(member_id=r.member_id, member_epoch=r.member_epoch)

    def _fence(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """Kafka's ``consumerGroupFenceMember``: remove the member, free its partitions, bump the
        epoch; when it was the last member speaking the consumer protocol among classic ones,
        the group goes back to the classic coordinator (:meth:`take_downgraded`)."""
        downgrade = (len(group.members) > 1 and group.all_members_use_classic_protocol_except(member.member_id)
                     and self.config.downgrade_enabled)
        group.remove_member(member.member_id)
        group.subscription_metadata = self._subscription_metadata(group, group.members)
        group.set_group_epoch(group.group_epoch + 1)
        self._forget_timers(group.group_id, member.member_id)
        if downgrade:
            del self._groups[group.group_id]
            for mid in group.members:
                self._forget_timers(group.group_id, mid)
            self._downgraded.append((group, member.member_id))

    def _forget_timers(self, group_id: str, member_id: str) -> None:
        for timers in (self._session_deadline, self._rebalance_deadline, self._join_deadline, self._sync_deadline):
            timers.pop((group_id, member_id), None)
