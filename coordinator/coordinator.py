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

Structure: :class:`GroupCoordinator` owns the state (one lock, the groups, the offsets
store, the clock, the member-id RNG) and the helpers every request uses (group lookup,
fencing and generation checks); the requests are split by job into three mixins:

- :mod:`kafkasim.coordinator.rebalance` — JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
  the time-driven transitions (:meth:`tick`): the state machine above;
- :mod:`kafkasim.coordinator.commits` — OffsetCommit, OffsetFetch;
- :mod:`kafkasim.coordinator.admin` — ListGroups, DescribeGroups, DeleteGroups.

Mixins rather than composition because all three jobs share one lock and one group
table, and a commit must see the membership exactly as the state machine left it (Kafka's
GroupCoordinator is also one object serving all these APIs); the mixins hold no state,
so each module reads as a plain list of request handlers over the same object.

Thread-safety: every public method runs under one re-entrant lock; safe to call
from many threads.
"""

from __future__ import annotations

import random
import threading
import uuid
from typing import Optional

from kafkasim.coordinator.admin import AdminMixin
from kafkasim.coordinator.commits import CommitsMixin
from kafkasim.coordinator.group import Group, GroupState, MemberMetadata
from kafkasim.coordinator.offsets_store import OffsetsStore
from kafkasim.coordinator.rebalance import RebalanceMixin
from kafkasim.clock import Clock, SystemClock
from kafkasim.errors import FencedInstanceIdError, IllegalGenerationError, UnknownMemberIdError
from kafkasim.protocol.group import (  # noqa: F401  (re-exported: kafkasim.coordinator's API)
    COMPLETE, NO_GENERATION, NO_MEMBER_ID, PENDING, JoinResult, SyncResult,
)

__all__ = [
    "GroupCoordinator", "JoinResult", "SyncResult", "PENDING", "COMPLETE",
    "NO_GENERATION", "NO_MEMBER_ID", "GroupState",
    "DEFAULT_MIN_SESSION_TIMEOUT_MS", "DEFAULT_MAX_SESSION_TIMEOUT_MS",
    "DEFAULT_INITIAL_REBALANCE_DELAY_MS",
]

DEFAULT_MIN_SESSION_TIMEOUT_MS = 6_000          # group.min.session.timeout.ms
DEFAULT_MAX_SESSION_TIMEOUT_MS = 1_800_000      # group.max.session.timeout.ms
DEFAULT_INITIAL_REBALANCE_DELAY_MS = 3_000      # group.initial.rebalance.delay.ms


class GroupCoordinator(RebalanceMixin, CommitsMixin, AdminMixin):
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
        self.pending_txn_offsets = state.pending_txn_offsets   # the transaction coordinator takes them
        self.consumer_group_records = state.consumer_group_records   # the KIP-848 coordinator takes them
        self.share_group_records = state.share_group_records         # the share group (KIP-932) coordinator takes them
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

    def store_consumer_group_records(self, group_id: str, records: list) -> None:
        """Append the records of consumer group (KIP-848) ``group_id`` to its ``__consumer_offsets``
        partition (``(key bytes, value bytes or None)``, one batch)."""
        with self._lock:
            self._store.store_records(group_id, records, self._now())

    # ------------------------------------------------------------------ helpers
    def _now(self) -> int:
        return self.clock.now_ms()

    def _new_member_id(self, client_id: str) -> str:
        return f"{client_id or 'consumer'}-{uuid.UUID(int=self._rng.getrandbits(128), version=4)}"

    def new_member_id(self, client_id: str) -> str:
        """A member id from this coordinator's seeded RNG (for a classic member joining a
        consumer group: one id space, reproducible runs)."""
        with self._lock:
            return self._new_member_id(client_id)

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

