"""The group coordinator's join/sync state machine: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup and the time-driven transitions (the protocol is drawn in
:mod:`kafkasim.coordinator.coordinator`'s docstring).

:class:`RebalanceMixin` is one of the three parts :class:`~kafkasim.coordinator.coordinator.GroupCoordinator`
is made of (with :mod:`~kafkasim.coordinator.commits` and :mod:`~kafkasim.coordinator.admin`).
It holds no state of its own: it works on the coordinator's ``_groups`` under its
``_lock`` and persists through its ``_store``, and uses its helpers ``_now``,
``_group``, ``_new_member_id``, ``_check_fenced``, ``_member`` and ``_check_generation``.

Invariants: a group moves only ``Empty → PreparingRebalance → CompletingRebalance →
Stable`` (and back to PreparingRebalance or Empty), each step decided by a request or
by :meth:`RebalanceMixin.tick` from the injected clock; the generation grows by one at
every completed join; a member is in ``members`` iff it joined and was not removed.

Thread-safety: every public method takes the coordinator's re-entrant lock.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from kafkasim.coordinator.group import ClassicMember, Group, GroupState, MemberMetadata
from kafkasim.errors import (
    InconsistentGroupProtocolError, InvalidGroupIdError, InvalidRequestError,
    InvalidSessionTimeoutError, RebalanceInProgressError, UnknownMemberIdError,
)
from kafkasim.protocol.consumer_protocol import (
    assignment_version, decode_assignment, encode_assignment, subscribed_topics, subscription_bytes,
)
from kafkasim.protocol.group import COMPLETE, NO_MEMBER_ID, PENDING, JoinResult, SyncResult
from kafkasim.types import TopicPartition

__all__ = ["RebalanceMixin"]


class RebalanceMixin:
    """JoinGroup/SyncGroup/Heartbeat/LeaveGroup and the time-driven transitions (see module doc)."""

    # ------------------------------------------------------------------ time
    def tick(self) -> None:
        """Apply every time-driven transition (session expiry, join/sync deadlines) to all groups."""
        with self._lock:
            now = self._now()
            for g in list(self._groups.values()):
                self._advance(g, now)

    def _advance(self, g: Group, now: int) -> None:
        # 1. session expiry: members neither rejoining nor awaiting sync must heartbeat (Kafka's
        #    shouldKeepAlive: a pending JoinGroup or SyncGroup keeps a member alive; a member that
        #    has not sent its SyncGroup, e.g. a leader that crashed after the join, expires)
        for m in list(g.members.values()):
            keep_alive = (g.is_(GroupState.PREPARING_REBALANCE) and m.joined) or \
                         (g.is_(GroupState.COMPLETING_REBALANCE) and m.synced)
            if not keep_alive and now - m.last_heartbeat_ms >= m.session_timeout_ms:
                self._remove_member(g, m, now)
        # 2. a leader that does not sync within the rebalance timeout: drop the unsynced, rebalance
        if g.is_(GroupState.COMPLETING_REBALANCE) and now >= g.sync_deadline_ms:
            for m in [m for m in g.members.values() if not m.synced]:
                self._remove_member(g, m, now)
            if g.is_(GroupState.COMPLETING_REBALANCE):
                self._prepare_rebalance(g, now)
        # 3. complete a join whose members are all back, or whose deadline passed
        if g.is_(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(g, now)

    # ------------------------------------------------------------------ online conversion
    def release_for_upgrade(self, group_id: str) -> Optional[tuple[Optional[str], int, Optional[str],
                                                                     list[ClassicMember]]]:
        """Hand a classic group's members over to the consumer group coordinator (Kafka's
        online upgrade): ``(protocol type, generation, protocol name, members)``, each member
        with its protocols as bytes and its last assignment; None when the group has no members.
        The group here is left Empty (its committed offsets stay), and a pending join or sync
        of its members is answered by the consumer group from now on."""
        with self._lock:
            g = self._group(group_id)
            if g is None or not g.members:
                return None
            members = [ClassicMember(
                m.member_id, m.group_instance_id, m.client_id, m.client_host or "", m.session_timeout_ms,
                m.rebalance_timeout_ms, tuple((n, subscription_bytes(g.protocol_type, meta)) for n, meta in m.protocols),
                tuple((tp.topic, tp.partition) for tp in m.assignment)) for m in g.members.values()]
            out = (g.protocol_type, g.generation_id, g.protocol_name, members)
            g.members.clear()
            g.static_members.clear()
            g.leader_id = None
            g.protocol_name = None
            g.state = GroupState.EMPTY
            g.state_timestamp_ms = self._now()
            self._store.delete_group_metadata(group_id, self._now())
            return out

    def adopt_downgraded(self, group_id: str, generation_id: int, members: Sequence[ClassicMember]) -> None:
        """Take back a consumer group whose last consumer-protocol member left (Kafka's online
        downgrade, ``ClassicGroup.fromConsumerGroup``): its classic members, each keeping the
        assignment it had as a target, at generation ``generation_id`` (the group epoch), Stable;
        then a rebalance starts, as Kafka's ``prepareRebalance`` after the downgrade."""
        with self._lock:
            now = self._now()
            g = self._groups.get(group_id)
            if g is None or g.is_(GroupState.DEAD):
                g = self._groups[group_id] = Group(group_id)
            g.generation_id, g.protocol_type, g.state, g.state_timestamp_ms = \
                generation_id, "consumer", GroupState.STABLE, now
            g.members.clear()
            g.static_members.clear()
            for c in members:
                m = MemberMetadata(c.member_id, c.instance_id, c.client_id, c.session_timeout_ms,
                                   c.rebalance_timeout_ms, list(c.protocols), now, client_host=c.client_host or None)
                m.assignment = [TopicPartition(t, p) for t, p in c.assignment]
                g.members[c.member_id] = m
                if c.instance_id is not None:
                    g.static_members[c.instance_id] = c.member_id
            g.protocol_name = self._select_protocol(g)
            g.leader_id = next(iter(g.members))
            for m in g.members.values():
                meta = m.metadata_for(g.protocol_name)
                m.assignment_bytes = encode_assignment(m.assignment, version=assignment_version(meta))
            self._persist_group(g, now)
            self._prepare_rebalance(g, now)

    # ------------------------------------------------------------------ transitions
    def _prepare_rebalance(self, g: Group, now: int) -> None:
        was_empty = g.is_(GroupState.EMPTY)
        if g.is_(GroupState.COMPLETING_REBALANCE):
            # members kept alive while awaiting the sync get a fresh session (as Kafka
            # reschedules their heartbeat expiry when it fails their pending sync)
            for m in g.members.values():
                m.last_heartbeat_ms = now
        timeout = max((m.rebalance_timeout_ms for m in g.members.values()), default=0)
        g.state = GroupState.PREPARING_REBALANCE
        g.state_timestamp_ms = now
        g.rebalance_deadline_ms = now + timeout
        g.initial_delay_until_ms = (now + min(self.initial_rebalance_delay_ms, timeout)
                                    if was_empty else 0)
        for m in g.members.values():
            m.joined = False
            m.synced = False

    def _remove_member(self, g: Group, m: MemberMetadata, now: int) -> None:
        del g.members[m.member_id]
        if m.group_instance_id is not None and g.static_members.get(m.group_instance_id) == m.member_id:
            del g.static_members[m.group_instance_id]
        if g.leader_id == m.member_id:
            g.leader_id = next(iter(g.members), None)
        if g.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(g, now)
        if g.is_(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(g, now)

    def _maybe_complete_join(self, g: Group, now: int) -> None:
        all_joined = all(m.joined for m in g.members.values())
        if all_joined and now < g.initial_delay_until_ms and now < g.rebalance_deadline_ms:
            return
        if not all_joined and now < g.rebalance_deadline_ms:
            return
        for m in [m for m in g.members.values() if not m.joined]:
            del g.members[m.member_id]
            if m.group_instance_id is not None and g.static_members.get(m.group_instance_id) == m.member_id:
                del g.static_members[m.group_instance_id]
        g.generation_id += 1
        g.state_timestamp_ms = now
        if not g.members:
            g.state = GroupState.EMPTY
            g.leader_id = None
            g.protocol_name = None
            self._persist_group(g, now)
            return
        g.protocol_name = self._select_protocol(g)
        if g.leader_id not in g.members:
            g.leader_id = next(iter(g.members))
        g.state = GroupState.COMPLETING_REBALANCE
        timeout = max(m.rebalance_timeout_ms for m in g.members.values())
        g.sync_deadline_ms = now + timeout
        for m in g.members.values():
            m.joined = False
            m.synced = False
            m.assignment = []
            m.assignment_bytes = None
            m.last_heartbeat_ms = now

    @staticmethod
    def _select_protocol(g: Group) -> str:
        members = list(g.members.values())
        candidates = set(members[0].protocol_names)
        for m in members[1:]:
            candidates &= set(m.protocol_names)
        if not candidates:
            raise InconsistentGroupProtocolError(f"group {g.group_id!r}: members share no protocol")
        votes: dict[str, int] = {}
        for m in members:
            vote = next(p for p in m.protocol_names if p in candidates)
            votes[vote] = votes.get(vote, 0) + 1
        order = [p for p in members[0].protocol_names if p in candidates]
        return max(order, key=lambda p: (votes.get(p, 0), -order.index(p)))

    def _persist_group(self, g: Group, now: int) -> None:
        self._store.store_group(g.group_id, self._group_value(g), now)

    @staticmethod
    def _group_value(g: Group) -> dict:
        members = []
        for m in g.members.values():
            meta = m.metadata_for(g.protocol_name) if g.protocol_name else None
            topics = subscribed_topics(g.protocol_type, meta) or []
            members.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id, "client_host": m.client_host,
                            "session_timeout_ms": m.session_timeout_ms,
                            "rebalance_timeout_ms": m.rebalance_timeout_ms, "subscription": topics,
                            "assignment": [[tp.topic, tp.partition] for tp in m.assignment]})
        return {"protocol_type": g.protocol_type or "", "generation": g.generation_id,
                "protocol": g.protocol_name, "leader": g.leader_id,
                "state_timestamp": g.state_timestamp_ms, "members": members}

    # ------------------------------------------------------------------ JoinGroup
    def join_group(self, group_id: str, member_id: str = NO_MEMBER_ID, *,
                   protocols: Sequence[tuple[str, Any]], protocol_type: str = "consumer",
                   session_timeout_ms: int = 45_000, rebalance_timeout_ms: int = 300_000,
                   group_instance_id: Optional[str] = None, client_id: str = "",
                   client_host: Optional[str] = None) -> JoinResult:
        """Join (or poll a pending join). ``protocols``: ``[(name, metadata)]`` by preference.
        ``client_host``: where the member connects from (the wire front end passes Kafka's
        ``/127.0.0.1``; DescribeGroups shows it)."""
        if not isinstance(group_id, str) or not group_id:
            raise InvalidGroupIdError(f"invalid group id {group_id!r}")
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            raise InvalidSessionTimeoutError(
                f"session_timeout_ms {session_timeout_ms} is outside the broker's range "
                f"[{self.min_session_timeout_ms}, {self.max_session_timeout_ms}]")
        protocols = [(str(n), meta) for n, meta in protocols]
        if not protocols:
            raise InconsistentGroupProtocolError(f"group {group_id!r}: a join needs at least one protocol")
        with self._lock:
            now = self._now()
            g = self._group(group_id)
            if g is None or g.is_(GroupState.DEAD):
                g = self._groups[group_id] = Group(group_id, state_timestamp_ms=now)
            if g.members:
                if g.protocol_type != protocol_type or not (
                        set(n for n, _ in protocols) & self._common_protocols(g)):
                    raise InconsistentGroupProtocolError(
                        f"group {group_id!r}: protocols {[n for n, _ in protocols]} (type "
                        f"{protocol_type!r}) share nothing with the group's members")
            g.protocol_type = protocol_type
            if member_id == NO_MEMBER_ID:
                return self._join_new(g, now, protocols, session_timeout_ms, rebalance_timeout_ms,
                                      group_instance_id, client_id, client_host)
            self._check_fenced(g, member_id, group_instance_id)
            m = self._member(g, member_id)
            if client_host is not None:
                m.client_host = client_host
            changed = m.protocols != protocols
            m.protocols = protocols
            m.session_timeout_ms, m.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
            m.last_heartbeat_ms = now
            if g.is_(GroupState.PREPARING_REBALANCE):
                m.joined = True
                self._maybe_complete_join(g, now)
            elif g.is_(GroupState.COMPLETING_REBALANCE):
                if changed:
                    self._prepare_rebalance(g, now)
                    m.joined = True
            elif g.is_(GroupState.STABLE):
                if changed or member_id == g.leader_id:
                    self._prepare_rebalance(g, now)
                    m.joined = True
                    self._maybe_complete_join(g, now)
            return self._join_result(g, m)

    def _common_protocols(self, g: Group) -> set:
        names = None
        for m in g.members.values():
            names = set(m.protocol_names) if names is None else names & set(m.protocol_names)
        return names or set()

    def _join_new(self, g: Group, now: int, protocols, session_timeout_ms, rebalance_timeout_ms,
                  group_instance_id, client_id, client_host=None) -> JoinResult:
        new_id = self._new_member_id(client_id)
        old_id = g.static_members.get(group_instance_id) if group_instance_id is not None else None
        if old_id is not None and old_id in g.members:
            # KIP-345: a static member came back; it takes over the old member's place
            # (join order, leadership, assignment) under a new member id.
            old = g.members[old_id]
            m = MemberMetadata(new_id, group_instance_id, client_id, session_timeout_ms,
                               rebalance_timeout_ms, protocols, now, joined=old.joined,
                               synced=old.synced, assignment=list(old.assignment),
                               assignment_bytes=old.assignment_bytes,
                               client_host=client_host)
            items = list(g.members.items())
            g.members.clear()
            for mid, mm in items:
                g.members[new_id if mid == old_id else mid] = m if mid == old_id else mm
            g.static_members[group_instance_id] = new_id
            if g.leader_id == old_id:
                g.leader_id = new_id
            if g.is_(GroupState.STABLE):
                # As Kafka: rebalance only if the protocol the group would now select changes.
                try:
                    same = self._select_protocol(g) == g.protocol_name
                except InconsistentGroupProtocolError:
                    same = False
                if same:
                    m.synced = True
                    self._persist_group(g, now)
                    return JoinResult(COMPLETE, new_id, g.generation_id, g.protocol_name,
                                      g.leader_id, ())
                self._prepare_rebalance(g, now)
                m.joined = True
                self._maybe_complete_join(g, now)
            elif g.is_(GroupState.PREPARING_REBALANCE):
                m.joined = True
                self._maybe_complete_join(g, now)
            return self._join_result(g, m)
        m = MemberMetadata(new_id, group_instance_id, client_id, session_timeout_ms,
                           rebalance_timeout_ms, protocols, now, joined=True, client_host=client_host)
        g.members[new_id] = m
        if group_instance_id is not None:
            g.static_members[group_instance_id] = new_id
        if g.is_(GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(g, now)
        elif g.initial_delay_until_ms:
            # a newcomer during the initial delay extends it (Kafka's InitialDelayedJoin)
            g.initial_delay_until_ms = min(now + self.initial_rebalance_delay_ms,
                                           g.rebalance_deadline_ms)
        m.joined = True
        self._maybe_complete_join(g, now)
        return self._join_result(g, m)

    def _join_result(self, g: Group, m: MemberMetadata) -> JoinResult:
        if g.is_(GroupState.PREPARING_REBALANCE) or m.member_id not in g.members:
            return JoinResult(PENDING, m.member_id)
        members = ()
        if m.member_id == g.leader_id:
            members = tuple((x.member_id, x.group_instance_id, x.metadata_for(g.protocol_name))
                            for x in g.members.values())
        return JoinResult(COMPLETE, m.member_id, g.generation_id, g.protocol_name, g.leader_id, members)

    def _current_member(self, group_id: str, member_id: str, generation_id: int,
                        group_instance_id: Optional[str]) -> tuple:
        """The group and member a SyncGroup/Heartbeat speaks for, fenced and checked against
        the current generation (UnknownMemberId, FencedInstanceId, IllegalGeneration)."""
        g = self._group(group_id)
        if g is None or g.is_(GroupState.EMPTY, GroupState.DEAD):
            raise UnknownMemberIdError(f"group {group_id!r} has no member {member_id!r}")
        self._check_fenced(g, member_id, group_instance_id)
        m = self._member(g, member_id)
        self._check_generation(g, generation_id)
        return g, m

    # ------------------------------------------------------------------ SyncGroup
    def sync_group(self, group_id: str, member_id: str, generation_id: int,
                   assignments: Optional[dict] = None, *,
                   group_instance_id: Optional[str] = None) -> SyncResult:
        """Leader: send ``assignments``; everyone: get yours.

        ``assignments`` maps member id → either the member's topic-partitions, or bytes
        (what a leader sends over the wire: for the ``consumer`` protocol type a
        ``ConsumerProtocolAssignment``, user data and all). Bytes are kept as they came and
        handed back unchanged (``SyncResult.assignment_bytes``), as Kafka keeps them; the
        topic-partitions that kafkasim's own tools show are decoded beside them. Bytes
        that do not decode leave the member's topic-partitions empty, nothing else: the
        coordinator does not judge an assignment (Kafka does not either)."""
        with self._lock:
            now = self._now()
            g, m = self._current_member(group_id, member_id, generation_id, group_instance_id)
            if g.is_(GroupState.PREPARING_REBALANCE):
                raise RebalanceInProgressError(f"group {group_id!r} is rebalancing; rejoin")
            m.last_heartbeat_ms = now
            if g.is_(GroupState.COMPLETING_REBALANCE):
                m.synced = True
                if member_id == g.leader_id and assignments is not None:
                    unknown = set(assignments) - set(g.members)
                    if unknown:
                        raise InvalidRequestError(
                            f"group {group_id!r}: assignment names non-members {sorted(unknown)}")
                    for mid, mm in g.members.items():
                        mm.assignment, mm.assignment_bytes = self._assignment(g, assignments.get(mid, ()))
                    g.state = GroupState.STABLE
                    g.state_timestamp_ms = now
                    for mm in g.members.values():
                        mm.last_heartbeat_ms = now
                    self._persist_group(g, now)
                else:
                    return SyncResult(PENDING, (), g.protocol_name, g.generation_id)
            return SyncResult(COMPLETE, tuple(m.assignment), g.protocol_name, g.generation_id,
                              m.assignment_bytes)

    @staticmethod
    def _assignment(g: Group, given) -> tuple[list, Optional[bytes]]:
        """``(topic-partitions, bytes or None)`` of what the leader gave one member."""
        if isinstance(given, (bytes, bytearray, memoryview)):
            raw = bytes(given)
            if g.protocol_type != "consumer" or not raw:
                return [], raw
            try:
                return sorted(decode_assignment(raw)), raw
            except InvalidRequestError:
                return [], raw
        return sorted(TopicPartition(*tp) for tp in given), None

    # ------------------------------------------------------------------ Heartbeat / LeaveGroup
    def heartbeat(self, group_id: str, member_id: str, generation_id: int, *,
                  group_instance_id: Optional[str] = None) -> None:
        """Keep the session alive; raises RebalanceInProgressError when the member must rejoin."""
        with self._lock:
            now = self._now()
            g, m = self._current_member(group_id, member_id, generation_id, group_instance_id)
            m.last_heartbeat_ms = now
            if g.is_(GroupState.PREPARING_REBALANCE):
                raise RebalanceInProgressError(
                    f"group {group_id!r} is rebalancing (generation {g.generation_id}); rejoin")

    def leave_group(self, group_id: str, member_id: str = NO_MEMBER_ID, *,
                    group_instance_id: Optional[str] = None) -> None:
        """Remove a member (by member id, or a static member by instance id); the group rebalances."""
        with self._lock:
            now = self._now()
            g = self._group(group_id)
            if g is None:
                raise UnknownMemberIdError(f"group {group_id!r} has no member {member_id!r}")
            if group_instance_id is not None:
                owner = g.static_members.get(group_instance_id)
                if owner is None:
                    raise UnknownMemberIdError(
                        f"group {group_id!r} has no static member {group_instance_id!r}")
                if member_id not in (NO_MEMBER_ID, owner):
                    self._check_fenced(g, member_id, group_instance_id)
                member_id = owner
            self._remove_member(g, self._member(g, member_id), now)

