"""The group coordinator: Kafka's classic group protocol as a non-blocking state machine.

Protocol (who does what)
========================
::

    member                         coordinator (this class)               group state
    ------                         ------------------------               -----------
    join_group(member_id="")  ──▶  assigns a member id, records the      Empty/Stable ─▶
                                   member's protocols; returns PENDING    PreparingRebalance
    join_group(member_id)     ──▶  (poll) PENDING until every known
                                   member rejoined, or the rebalance
                                   timeout passed on the clock (members
                                   that did not rejoin are removed); then
                                   generation += 1, the protocol is voted,
                                   the leader is the first member that
                                   joined (kept if still present)        ─▶ CompletingRebalance
                              ◀──  COMPLETE: generation, protocol, leader
                                   id; the leader also gets every member's
                                   subscription (the protocol metadata)
    leader runs the assignor
    sync_group(assignments)   ──▶  stores each member's assignment,
                                   writes the group metadata record      ─▶ Stable
    follower sync_group()     ──▶  PENDING until the leader synced, then
                              ◀──  its assignment
    heartbeat() every heartbeat_interval_ms; RebalanceInProgressError tells the member
    to rejoin; leave_group() removes it; offset_commit()/offset_fetch() at any time.

In Kafka's classic protocol JoinGroup and SyncGroup *block* until the rebalance
completes. Here nothing blocks: a join or sync that cannot complete yet returns a
result with ``status == PENDING`` and the member calls again (with the member id
it was given). Completion is decided on every request and on :meth:`tick` from the
injected clock, so one thread can step many members (MockClock scenarios) and
threads with the real clock work too. The same calls in the same order with the
same clock readings and ``seed`` give the same member ids, generations and
assignments.

States: ``Empty → PreparingRebalance → CompletingRebalance → Stable`` (and ``Dead``
once deleted); see :class:`kafkasim.coordinator.group.GroupState`. ``NO_GENERATION`` (-1)
and ``NO_MEMBER_ID`` ("") are the sentinels of a member outside any generation.

Rebalance triggers: a member joins, a known member rejoins with different protocol
metadata (or the leader rejoins, as Kafka: it does so when subscribed topics gain
partitions), a member leaves, or is evicted: no heartbeat for
``session_timeout_ms``; not rejoining within the rebalance timeout (the consumer's
``max_poll_interval_ms``); or not syncing within it.

Fencing (error per request, in Kafka's order): a static member whose instance id is
now held by another member id → ``FencedInstanceIdError``; unknown member →
``UnknownMemberIdError``; wrong generation → ``IllegalGenerationError``; heartbeat
while PreparingRebalance, sync while PreparingRebalance, commit while
CompletingRebalance → ``RebalanceInProgressError``. (As in Kafka, a commit with
the current generation *is* accepted during PreparingRebalance: that is how eager
members commit in ``on_partitions_revoked``.)

Static membership (KIP-345): a join with a known ``group_instance_id`` and no member
id replaces the old member id, keeps its assignment and, when the group is Stable
and the subscription is unchanged, completes at once with the current generation:
no rebalance. The previous holder of the instance id is fenced.

Persistence: offset commits and group metadata go to ``__consumer_offsets`` through
:class:`kafkasim.coordinator.offsets_store.OffsetsStore`; on start the coordinator replays
it. Loaded groups come back Empty (their member processes are gone), with their
generation and committed offsets.

Differences from Kafka: no KIP-394 MemberIdRequired round trip; no offset expiry
(offsets.retention.minutes); loaded groups are Empty at once instead of waiting
for their members' session timeouts.

Thread-safety: every public method runs under one re-entrant lock; safe to call
from many threads.
"""

from __future__ import annotations

import random
import threading
import uuid
from typing import Any, Iterable, Optional, Sequence

from kafkasim.coordinator.group import Group, GroupState, MemberMetadata
from kafkasim.coordinator.offsets_store import OffsetsStore
from kafkasim.clock import Clock, SystemClock
from kafkasim.errors import (
    CoordinatorNotAvailableError, FencedInstanceIdError, GroupIdNotFoundError,
    IllegalGenerationError, InconsistentGroupProtocolError, InvalidGroupIdError,
    InvalidRequestError, InvalidSessionTimeoutError, NonEmptyGroupError,
    RebalanceInProgressError, UnknownMemberIdError,
)
from kafkasim.protocol.group import (
    COMPLETE, NO_GENERATION, NO_MEMBER_ID, PENDING, JoinResult, SyncResult,
)
from kafkasim.types import OffsetAndMetadata, TopicPartition

__all__ = [
    "GroupCoordinator", "JoinResult", "SyncResult", "PENDING", "COMPLETE",
    "NO_GENERATION", "NO_MEMBER_ID", "GroupState",
    "DEFAULT_MIN_SESSION_TIMEOUT_MS", "DEFAULT_MAX_SESSION_TIMEOUT_MS",
    "DEFAULT_INITIAL_REBALANCE_DELAY_MS",
]

DEFAULT_MIN_SESSION_TIMEOUT_MS = 6_000          # group.min.session.timeout.ms
DEFAULT_MAX_SESSION_TIMEOUT_MS = 1_800_000      # group.max.session.timeout.ms
DEFAULT_INITIAL_REBALANCE_DELAY_MS = 3_000      # group.initial.rebalance.delay.ms


class GroupCoordinator:
    """Runs every consumer group of one broker. See the module docstring for the protocol."""

    def __init__(self, store: Optional[OffsetsStore] = None, clock: Optional[Clock] = None, *,
                 seed: int = 0,
                 min_session_timeout_ms: int = DEFAULT_MIN_SESSION_TIMEOUT_MS,
                 max_session_timeout_ms: int = DEFAULT_MAX_SESSION_TIMEOUT_MS,
                 initial_rebalance_delay_ms: int = DEFAULT_INITIAL_REBALANCE_DELAY_MS) -> None:
        self._store = store if store is not None else OffsetsStore(None)
        self.clock = clock or SystemClock()
        self._seed = seed
        self._lock = threading.RLock()
        self._groups: dict[str, Group] = {}
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self._load()

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        state = self._store.load()
        # Member ids come from this RNG. Seeding it with the seed, the clock and the offsets
        # topic's end offsets keeps runs reproducible, while a coordinator restarted after
        # any group activity does not hand out the ids of its previous incarnation again
        # (a zombie of it cannot pass for a new member).
        ends = ",".join(map(str, state.end_offsets))
        self._rng = random.Random(f"{self._seed}:{self.clock.now_ms()}:{ends}")
        for gid, meta in state.groups.items():
            g = Group(gid, GroupState.EMPTY, int(meta.get("generation", 0)),
                      meta.get("protocol_type"), meta.get("protocol"), None)
            g.state_timestamp_ms = int(meta.get("state_timestamp", -1))
            self._groups[gid] = g
        for gid, offsets in state.offsets.items():
            if not offsets:
                continue
            g = self._groups.get(gid)
            if g is None:
                g = self._groups[gid] = Group(gid)
            g.offsets.update(offsets)

    # ------------------------------------------------------------------ helpers
    def _now(self) -> int:
        return self.clock.now_ms()

    def _new_member_id(self, client_id: str) -> str:
        return f"{client_id or 'consumer'}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"

    def _group(self, group_id: str) -> Optional[Group]:
        g = self._groups.get(group_id)
        if g is not None:
            self._advance(g, self._now())
        return g

    @staticmethod
    def _check_fenced(g: Group, member_id: str, group_instance_id: Optional[str]) -> None:
        if group_instance_id is None:
            return
        owner = g.static_members.get(group_instance_id)
        if owner is not None and owner != member_id:
            raise FencedInstanceIdError(
                f"group {g.group_id!r}: instance id {group_instance_id!r} is now held by member "
                f"{owner!r}, not {member_id!r}")

    @staticmethod
    def _member(g: Group, member_id: str) -> MemberMetadata:
        m = g.members.get(member_id)
        if m is None:
            raise UnknownMemberIdError(f"group {g.group_id!r} has no member {member_id!r}")
        return m

    @staticmethod
    def _check_generation(g: Group, generation_id: int) -> None:
        if generation_id != g.generation_id:
            raise IllegalGenerationError(
                f"group {g.group_id!r}: generation {generation_id} is not the current "
                f"generation {g.generation_id}")

    # ------------------------------------------------------------------ time
    def tick(self) -> None:
        """Apply every time-driven transition (session expiry, join/sync deadlines) to all groups."""
        with self._lock:
            now = self._now()
            for g in list(self._groups.values()):
                self._advance(g, now)

    def _advance(self, g: Group, now: int) -> None:
        # 1. session expiry: members neither rejoining nor awaiting sync must heartbeat
        for m in list(g.members.values()):
            keep_alive = (g.is_(GroupState.PREPARING_REBALANCE) and m.joined) or \
                         g.is_(GroupState.COMPLETING_REBALANCE)
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
            topics = list(meta.get("topics", [])) if isinstance(meta, dict) else []
            members.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id, "session_timeout_ms": m.session_timeout_ms,
                            "rebalance_timeout_ms": m.rebalance_timeout_ms, "subscription": topics,
                            "assignment": [[tp.topic, tp.partition] for tp in m.assignment]})
        return {"protocol_type": g.protocol_type or "", "generation": g.generation_id,
                "protocol": g.protocol_name, "leader": g.leader_id,
                "state_timestamp": g.state_timestamp_ms, "members": members}

    # ------------------------------------------------------------------ JoinGroup
    def join_group(self, group_id: str, member_id: str = NO_MEMBER_ID, *,
                   protocols: Sequence[tuple[str, Any]], protocol_type: str = "consumer",
                   session_timeout_ms: int = 45_000, rebalance_timeout_ms: int = 300_000,
                   group_instance_id: Optional[str] = None, client_id: str = "") -> JoinResult:
        """Join (or poll a pending join). ``protocols``: ``[(name, metadata)]`` by preference."""
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
                                      group_instance_id, client_id)
            self._check_fenced(g, member_id, group_instance_id)
            m = self._member(g, member_id)
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
                  group_instance_id, client_id) -> JoinResult:
        new_id = self._new_member_id(client_id)
        old_id = g.static_members.get(group_instance_id) if group_instance_id is not None else None
        if old_id is not None and old_id in g.members:
            # KIP-345: a static member came back; it takes over the old member's place
            # (join order, leadership, assignment) under a new member id.
            old = g.members[old_id]
            m = MemberMetadata(new_id, group_instance_id, client_id, session_timeout_ms,
                               rebalance_timeout_ms, protocols, now, joined=old.joined,
                               synced=old.synced, assignment=list(old.assignment))
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
                           rebalance_timeout_ms, protocols, now, joined=True)
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
        """Leader: send ``assignments`` (member id → [TopicPartition]); everyone: get yours."""
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
                        mm.assignment = sorted(TopicPartition(*tp) for tp in assignments.get(mid, ()))
                    g.state = GroupState.STABLE
                    g.state_timestamp_ms = now
                    for mm in g.members.values():
                        mm.last_heartbeat_ms = now
                    self._persist_group(g, now)
                else:
                    return SyncResult(PENDING, (), g.protocol_name, g.generation_id)
            return SyncResult(COMPLETE, tuple(m.assignment), g.protocol_name, g.generation_id)

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

    # ------------------------------------------------------------------ offsets
    def offset_commit(self, group_id: str, member_id: str, generation_id: int,
                      offsets: dict, *, group_instance_id: Optional[str] = None) -> None:
        """Commit ``offsets`` ({TopicPartition: OffsetAndMetadata | int}) for the group.

        ``generation_id == NO_GENERATION`` with ``member_id == ""`` is a standalone
        commit (manual assignment), allowed only while the group has no members.
        """
        if not isinstance(group_id, str) or not group_id:
            raise InvalidGroupIdError(f"invalid group id {group_id!r}")
        norm = {}
        for tp, om in offsets.items():
            tp = TopicPartition(*tp)
            if not isinstance(om, OffsetAndMetadata):
                om = OffsetAndMetadata(int(om))
            if om.offset < 0:
                raise InvalidRequestError(f"negative offset {om.offset} committed for {tp}")
            norm[tp] = om
        with self._lock:
            now = self._now()
            g = self._group(group_id)
            if g is None:
                if generation_id >= 0:
                    raise IllegalGenerationError(
                        f"group {group_id!r} does not exist, so generation {generation_id} is stale")
                g = self._groups[group_id] = Group(group_id, state_timestamp_ms=now)
            if g.is_(GroupState.DEAD):
                raise CoordinatorNotAvailableError(f"group {group_id!r} is being deleted")
            if not (generation_id < 0 and g.is_(GroupState.EMPTY)):
                self._check_fenced(g, member_id, group_instance_id)
                if g.is_(GroupState.EMPTY) or member_id not in g.members:
                    raise UnknownMemberIdError(f"group {group_id!r} has no member {member_id!r}")
                self._check_generation(g, generation_id)
                if g.is_(GroupState.COMPLETING_REBALANCE):
                    raise RebalanceInProgressError(
                        f"group {group_id!r} is completing a rebalance; commit after the sync")
                g.members[member_id].last_heartbeat_ms = now
            self._store.store_offsets(group_id, norm, now)
            for tp, om in norm.items():
                g.offsets[tp] = (om, now)

    def offset_fetch(self, group_id: str,
                     partitions: Optional[Iterable[TopicPartition]] = None) -> dict:
        """Committed offsets of the group ({TopicPartition: OffsetAndMetadata}); absent = none."""
        with self._lock:
            g = self._groups.get(group_id)
            if g is None:
                return {}
            if partitions is None:
                return {tp: e[0] for tp, e in sorted(g.offsets.items())}
            out = {}
            for tp in partitions:
                tp = TopicPartition(*tp)
                if tp in g.offsets:
                    out[tp] = g.offsets[tp][0]
            return out

    # ------------------------------------------------------------------ admin
    def describe_group(self, group_id: str) -> dict:
        """State, generation, protocol, leader, members with assignments, committed offsets.

        An unknown group is reported as state ``Dead`` with no members, as Kafka does.
        """
        with self._lock:
            g = self._group(group_id)
            if g is None:
                return {"group_id": group_id, "state": GroupState.DEAD.value, "protocol_type": "",
                        "protocol": None, "generation": -1, "leader": None, "members": [],
                        "offsets": {}}
            return {
                "group_id": g.group_id, "state": g.state.value,
                "protocol_type": g.protocol_type or "", "protocol": g.protocol_name,
                "generation": g.generation_id, "leader": g.leader_id,
                "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                             "client_id": m.client_id,
                             "assignment": [TopicPartition(*tp) for tp in m.assignment]}
                            for m in g.members.values()],
                "offsets": {tp: e[0] for tp, e in sorted(g.offsets.items())},
            }

    def describe_groups(self, group_ids: Iterable[str]) -> list[dict]:
        return [self.describe_group(gid) for gid in group_ids]

    def list_groups(self) -> list[dict]:
        """Every live group: ``{"group_id", "protocol_type", "state"}``, sorted by id."""
        with self._lock:
            self.tick()
            return [{"group_id": g.group_id, "protocol_type": g.protocol_type or "",
                     "state": g.state.value}
                    for g in sorted(self._groups.values(), key=lambda g: g.group_id)
                    if not g.is_(GroupState.DEAD)]

    def delete_group(self, group_id: str) -> None:
        """Delete an Empty group and its committed offsets (tombstones in the offsets topic)."""
        with self._lock:
            now = self._now()
            g = self._group(group_id)
            if g is None or g.is_(GroupState.DEAD):
                raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
            if g.members:
                raise NonEmptyGroupError(f"group {group_id!r} has {len(g.members)} member(s)")
            self._store.delete_group(group_id, list(g.offsets), now)
            g.state = GroupState.DEAD
            del self._groups[group_id]

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that stores ``group_id``."""
        return self._store.partition_for(group_id)
