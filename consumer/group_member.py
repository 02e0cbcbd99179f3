"""The consumer's side of the group protocol (Kafka's ConsumerCoordinator), never blocking.

:class:`GroupMember` drives one consumer through join → sync → stable against the
broker's group API (see coordinator/coordinator.py for the broker side). Every call
does at most one step per request and returns; :meth:`GroupMember.poll` is called
from ``Consumer.poll`` and advances whatever is due::

    MemberState.UNJOINED ─(on_join_prepare, join_group)─▶ PREPARING_REBALANCE
        ─(join COMPLETE; the leader runs the assignor)─▶ COMPLETING_REBALANCE
        ─(sync COMPLETE: on_join_complete)─▶ STABLE ─(heartbeat says rebalance,
        leader sees more partitions, cooperative revocation)─▶ UNJOINED ...

Rebalance protocol (Kafka's ``RebalanceProtocol``): COOPERATIVE when every
configured assignor supports it, else EAGER (the default ``[range,
cooperative-sticky]`` is therefore EAGER, as in Kafka).

Listener contract (:class:`ConsumerRebalanceListener`), as Kafka's:

- EAGER: before rejoining, commit (if auto-commit) and ``on_partitions_revoked(all
  owned)``; after the sync, ``on_partitions_assigned(new assignment)``.
- COOPERATIVE (KIP-429): nothing is revoked before rejoining; after the sync,
  ``on_partitions_revoked(owned - new)`` when non-empty, then
  ``on_partitions_assigned(new - owned)``; a member that revoked something rejoins
  at once, and that follow-up rebalance hands the revoked partitions to their new
  owners.
- ``on_partitions_lost(owned)`` instead of revoked when the member learns it is no
  longer in the generation (evicted, fenced, stale generation, poll interval
  exceeded): the partitions may already belong to someone else, so it must not
  commit. Its default calls ``on_partitions_revoked``, as Kafka's.

Sentinels: ``NO_GENERATION`` (-1) and ``NO_MEMBER_ID`` (""). The background
heartbeat thread of Kafka's client is :meth:`GroupMember.heartbeat_tick`: the
consumer runs it from ``poll()``, from an optional thread (real clock) or a scenario
calls it (``Consumer.tick()``) while the application is "busy".

Thread-safety: none of its own; the Consumer serialises calls with its lock.
"""

from __future__ import annotations

import enum
import logging
from typing import Callable, Optional, Sequence

from kafkasim.assignors.base import RackAwareAssignor
from kafkasim.assignors import COOPERATIVE, EAGER, Subscription, get_assignor
from kafkasim.protocol.group import COMPLETE, NO_GENERATION, NO_MEMBER_ID
from kafkasim.errors import (
    CommitFailedError, FencedInstanceIdError, IllegalGenerationError, KafkaSimError,
    RebalanceInProgressError, UnknownMemberIdError, UnknownTopicOrPartitionError,
)
from kafkasim.types import TopicPartition

__all__ = ["fire_listener", "GroupMember", "MemberState", "ConsumerRebalanceListener", "NO_GENERATION",
           "NO_MEMBER_ID", "EAGER", "COOPERATIVE"]

log = logging.getLogger(__name__)


class MemberState(enum.Enum):
    """Where this member is in the protocol (kafka-python/aiokafka's MemberState)."""

    UNJOINED = "unjoined"                          # not in a generation; must (re)join
    PREPARING_REBALANCE = "preparing_rebalance"    # join sent, pending
    COMPLETING_REBALANCE = "completing_rebalance"  # joined; sync sent, pending
    STABLE = "stable"                              # has the assignment of a generation


class ConsumerRebalanceListener:
    """Callbacks around rebalances; subclass and override what you need."""

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        """Partitions this member gives up (commit their offsets here)."""

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        """Partitions this member now owns (added ones only, under cooperative)."""

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        """Partitions this member lost without a clean revocation; defaults to revoked."""
        self.on_partitions_revoked(lost)


def fire_listener(listener: Optional[ConsumerRebalanceListener], name: str, tps) -> None:
    """Call ``listener.<name>(sorted(tps))``, both group protocols' one way: a kafkasim error
    propagates (the consumer is fenced or closed); any other failure of the user's callback is
    logged and does not corrupt the protocol state."""
    if listener is not None:
        try:
            getattr(listener, name)(sorted(tps))
        except KafkaSimError:
            raise
        except Exception:
            log.exception("rebalance listener %s failed", name)


class GroupMember:
    """One consumer's membership in a group, stepped by :meth:`poll` (see module docstring)."""

    def __init__(self, broker, group_id: str, subscriptions, *, clock, client_id: str,
                 assignors: Sequence, session_timeout_ms: int, heartbeat_interval_ms: int,
                 max_poll_interval_ms: int, group_instance_id: Optional[str],
                 metadata_max_age_ms: int, on_commit_needed: Callable[[], None], client_rack: str = "") -> None:
        self._broker = broker
        self.client_rack = client_rack     # sent as the member's rack_id (KIP-881)
        self.group_id = group_id
        self._subs = subscriptions
        self._clock = clock
        self.client_id = client_id
        self.assignors = [get_assignor(a) for a in assignors]
        self.protocol = (COOPERATIVE if all(COOPERATIVE in a.supported_protocols for a in self.assignors)
                         else EAGER)
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.group_instance_id = group_instance_id
        self.metadata_max_age_ms = metadata_max_age_ms
        self._commit_before_revoke = on_commit_needed
        self.listener: Optional[ConsumerRebalanceListener] = None
        self.state = MemberState.UNJOINED
        self.member_id = NO_MEMBER_ID
        self.generation_id = NO_GENERATION
        self.protocol_name: Optional[str] = None
        self.leader_id: Optional[str] = None
        self.rejoin_needed = True
        self._join_prepared = False
        self._join_protocols: Optional[list] = None
        self._previous_assignment: list[TopicPartition] = []
        self._previous_generation = NO_GENERATION
        self._pending_assignments: Optional[dict] = None
        self._snapshot: dict[str, int] = {}        # leader: partition counts used to assign
        self._last_metadata_check = clock.now_ms()
        self._last_heartbeat = clock.now_ms()
        self.last_poll_ms = clock.now_ms()
        self.rebalances = 0
        self._fatal: Optional[KafkaSimError] = None   # FencedInstanceIdError: the consumer is unusable

    # ------------------------------------------------------------------ callbacks
    def _fire(self, name: str, tps: list[TopicPartition]) -> None:
        fire_listener(self.listener, name, tps)

    def _lose_partitions(self) -> None:
        owned = self._subs.assigned()
        if owned:
            self._fire("on_partitions_lost", owned)   # callbacks see the assignment, as Kafka's
        self._subs.set_assignment([])

    def reset_generation(self, *, member_id_too: bool) -> None:
        """Forget the generation (and the member id); the next poll rejoins, losing partitions."""
        self.generation_id = NO_GENERATION
        if member_id_too:
            self.member_id = NO_MEMBER_ID
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self._join_prepared = False
        self._join_protocols = None

    @property
    def in_generation(self) -> bool:
        return self.generation_id != NO_GENERATION and self.state == MemberState.STABLE

    # ------------------------------------------------------------------ poll
    def poll(self, now: int) -> None:
        """Do what is due: heartbeat, metadata check, or the next join/sync step."""
        if self._fatal is not None:
            raise self._fatal
        self.check_poll_timeout(now)
        self.last_poll_ms = now
        if self.state == MemberState.STABLE and not self.rejoin_needed:
            self.heartbeat_tick(now, from_poll=True)
            if self.leader_id == self.member_id and now - self._last_metadata_check >= self.metadata_max_age_ms:
                self._check_metadata(now)
            if not self.rejoin_needed:
                return
        if self.state in (MemberState.STABLE, MemberState.UNJOINED):
            if not self._join_prepared:
                self._on_join_prepare()   # eager: commit + revoke while still in the generation
            self.state = MemberState.UNJOINED
            self._send_join(now)
        elif self.state == MemberState.PREPARING_REBALANCE:
            self._send_join(now)
        elif self.state == MemberState.COMPLETING_REBALANCE:
            self._send_sync(now, None)

    def _check_metadata(self, now: int) -> None:
        self._last_metadata_check = now
        for topic, count in self._snapshot.items():
            try:
                n = self._broker.partition_count(topic)
            except UnknownTopicOrPartitionError:
                n = 0
            if n != count:
                log.info("group %s: %s has %d partitions (assigned with %d); rejoining",
                         self.group_id, topic, n, count)
                self.rejoin_needed = True
                return

    def check_poll_timeout(self, now: int) -> None:
        """Leave the group if more than max_poll_interval_ms passed since the last poll.

        Kafka's heartbeat thread does this the moment the interval runs out; here it is
        also checked lazily (before a poll or a commit), which gives the same outcome.
        """
        if (self.generation_id != NO_GENERATION and self.state == MemberState.STABLE
                and now - self.last_poll_ms > self.max_poll_interval_ms):
            log.warning("consumer poll timeout has expired (%d ms > max_poll_interval_ms %d); "
                        "leaving group %s", now - self.last_poll_ms, self.max_poll_interval_ms,
                        self.group_id)
            self.leave_group(reason="poll timeout")

    def heartbeat_tick(self, now: int, *, from_poll: bool = False) -> None:
        """What Kafka's heartbeat thread does at ``now``: leave on poll timeout, else heartbeat if due."""
        if self.generation_id == NO_GENERATION or self.state != MemberState.STABLE:
            return
        if not from_poll:
            self.check_poll_timeout(now)
            if self.generation_id == NO_GENERATION:
                return
        if now - self._last_heartbeat < self.heartbeat_interval_ms:
            return
        self._last_heartbeat = now
        try:
            self._broker.heartbeat(self.group_id, self.member_id, self.generation_id,
                                   group_instance_id=self.group_instance_id)
        except RebalanceInProgressError:
            self.rejoin_needed = True
        except (UnknownMemberIdError, IllegalGenerationError) as exc:
            log.info("group %s: heartbeat failed (%s); partitions lost, rejoining", self.group_id, exc)
            self._lose_partitions()
            self.reset_generation(member_id_too=isinstance(exc, UnknownMemberIdError))
        except FencedInstanceIdError as exc:
            self._fatal = exc      # as Kafka: a fenced static member cannot continue
            self._lose_partitions()
            self.reset_generation(member_id_too=True)
            raise

    # ------------------------------------------------------------------ join
    def _on_join_prepare(self) -> None:
        self._join_prepared = True
        owned = self._subs.assigned()
        if self.generation_id == NO_GENERATION:
            self._lose_partitions()
        elif self.protocol == EAGER:
            self._commit_before_revoke()
            self._previous_assignment = owned
            self._previous_generation = self.generation_id
            if owned:
                # fired before the assignment is cleared, so a commit() in the callback
                # commits the positions of the revoked partitions (Kafka's contract)
                self._fire("on_partitions_revoked", owned)
            self._subs.set_assignment([])
        else:
            self._commit_before_revoke()
        self._join_protocols = None

    def _metadata(self, assignor) -> dict:
        if self.protocol == COOPERATIVE:
            owned, gen = self._subs.assigned(), self.generation_id
        elif assignor.name == "sticky":
            # Kafka's eager StickyAssignor carries the previous assignment in its user data.
            owned, gen = self._previous_assignment, self._previous_generation
        else:
            owned, gen = [], NO_GENERATION
        return {"topics": list(self._subs.topics), "user_data": None,
                "owned_partitions": [[tp.topic, tp.partition] for tp in owned],
                "generation_id": gen, "rack_id": self.client_rack or None}

    def _send_join(self, now: int) -> None:
        if self._join_protocols is None:
            self._join_protocols = [(a.name, self._metadata(a)) for a in self.assignors]
        self.state = MemberState.PREPARING_REBALANCE
        try:
            res = self._broker.join_group(
                self.group_id, self.member_id, protocols=self._join_protocols,
                session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.max_poll_interval_ms,
                group_instance_id=self.group_instance_id, client_id=self.client_id)
        except UnknownMemberIdError:
            self.reset_generation(member_id_too=True)
            self._join_prepared = True
            return
        except FencedInstanceIdError as exc:
            self._fatal = exc
            raise
        except IllegalGenerationError:
            self.reset_generation(member_id_too=False)
            self._join_prepared = True
            return
        self.member_id = res.member_id
        self._last_heartbeat = now
        if res.status != COMPLETE:
            return
        self.generation_id = res.generation_id
        self.protocol_name = res.protocol_name
        self.leader_id = res.leader_id
        self.state = MemberState.COMPLETING_REBALANCE
        assignments = None
        if res.is_leader and res.members:
            assignments = self._assign(res.protocol_name, res.members)
        elif res.is_leader:
            # a static leader that rejoined without a rebalance (Kafka's skipAssignment):
            # keep the assignment, but track the partition counts it was made for
            self._snapshot = self._partition_counts(self._subs.topics)
            self._last_metadata_check = now
        self._send_sync(now, assignments)

    def _assign(self, protocol_name: str, members) -> dict:
        assignor = next(a for a in self.assignors if a.name == protocol_name)
        subs = {}
        topics = set()
        for mid, iid, meta in members:
            subs[mid] = Subscription(
                list(meta["topics"]), meta.get("user_data"),
                [TopicPartition(t, p) for t, p in meta.get("owned_partitions", [])],
                meta.get("generation_id", NO_GENERATION), iid, meta.get("rack_id"))
            topics.update(meta["topics"])
        counts = self._partition_counts(topics)
        self._snapshot = counts
        self._last_metadata_check = self._clock.now_ms()
        racks = getattr(self._broker, "partition_racks", None)     # a cluster: replica racks (KIP-881)
        if callable(racks) and isinstance(assignor, RackAwareAssignor) and any(s.rack_id for s in subs.values()):
            wanted = {tp: r for tp, r in racks().items() if tp.topic in counts}
            return assignor.assign(counts, subs, partition_racks=wanted)
        return assignor.assign(counts, subs)

    def _partition_counts(self, topics) -> dict[str, int]:
        counts = {}
        for t in sorted(topics):
            try:
                counts[t] = self._broker.partition_count(t)
            except UnknownTopicOrPartitionError:
                continue   # as Kafka: a subscribed topic without metadata is skipped
        return counts

    # ------------------------------------------------------------------ sync
    def _send_sync(self, now: int, assignments: Optional[dict]) -> None:
        if assignments is not None:
            self._pending_assignments = assignments
        try:
            res = self._broker.sync_group(self.group_id, self.member_id, self.generation_id,
                                          self._pending_assignments if self.leader_id == self.member_id else None,
                                          group_instance_id=self.group_instance_id)
        except RebalanceInProgressError:
            self.state = MemberState.UNJOINED
            self.rejoin_needed = True
            return
        except (UnknownMemberIdError, IllegalGenerationError) as exc:
            self.reset_generation(member_id_too=isinstance(exc, UnknownMemberIdError))
            return
        except FencedInstanceIdError as exc:
            self._fatal = exc
            raise
        if res.status != COMPLETE:
            return
        self._pending_assignments = None
        self._last_heartbeat = now
        self._on_join_complete([TopicPartition(*tp) for tp in res.assignment])

    def _on_join_complete(self, assignment: list[TopicPartition]) -> None:
        self.state = MemberState.STABLE
        self.rejoin_needed = False
        self._join_prepared = False
        self._join_protocols = None
        self.rebalances += 1
        for a in self.assignors:
            if a.name == self.protocol_name:
                a.on_assignment(assignment, self.generation_id)
        if self.protocol == EAGER:
            self._subs.set_assignment(assignment)
            self._fire("on_partitions_assigned", assignment)
            return
        owned = set(self._subs.assigned())
        new = set(assignment)
        revoked = sorted(owned - new)
        added = sorted(new - owned)
        if revoked:
            # revoke first, while the partitions are still ours (commit in the callback works)
            self._fire("on_partitions_revoked", revoked)
            self.rejoin_needed = True   # KIP-429: the follow-up rebalance assigns what we gave up
        self._subs.set_assignment(sorted(new))
        self._fire("on_partitions_assigned", added)

    # ------------------------------------------------------------------ leave / commit
    def close(self) -> None:
        """Kafka's onLeavePrepare + leave: revoke (or, outside a generation, lose) what
        this member owns, then leave the group (a static member does not leave)."""
        owned = self._subs.assigned()
        if owned:
            if self.generation_id != NO_GENERATION:
                self._fire("on_partitions_revoked", owned)
            else:
                self._fire("on_partitions_lost", owned)
        self._subs.set_assignment([])
        self.leave_group("close")

    def leave_group(self, reason: str = "") -> None:
        """Send LeaveGroup (dynamic members only, as Kafka) and forget the generation."""
        if self.member_id != NO_MEMBER_ID and self.group_instance_id is None:
            try:
                self._broker.leave_group(self.group_id, self.member_id)
            except KafkaSimError as exc:
                log.info("group %s: leave failed: %s", self.group_id, exc)
        self.reset_generation(member_id_too=self.group_instance_id is None)

    def commit(self, offsets: dict) -> None:
        """OffsetCommit with this member's generation.

        As Kafka's ConsumerCoordinator: only a Stable member commits. While it is
        rebalancing, ``RebalanceInProgressError`` (retriable: poll, then commit again);
        outside any generation (evicted, left), ``CommitFailedError``.
        """
        if self.generation_id != NO_GENERATION and self.state in (
                MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE):
            raise RebalanceInProgressError(
                f"Offset commit cannot be completed since the consumer is undergoing a rebalance "
                f"of group {self.group_id!r} (state {self.state.value}); poll() to complete it, "
                f"then commit again")
        if self.generation_id == NO_GENERATION or self.state != MemberState.STABLE:
            raise CommitFailedError(
                f"Commit cannot be completed since the consumer is not part of an active group "
                f"{self.group_id!r} (member {self.member_id!r}, generation {self.generation_id}, "
                f"state {self.state.value}); it must rejoin (poll) first")
        try:
            self._broker.offset_commit(self.group_id, self.member_id, self.generation_id, offsets,
                                       group_instance_id=self.group_instance_id)
        except (UnknownMemberIdError, IllegalGenerationError) as exc:
            self.reset_generation(member_id_too=isinstance(exc, UnknownMemberIdError))
            raise CommitFailedError(
                f"Commit cannot be completed since the group {self.group_id!r} has already "
                f"rebalanced and assigned the partitions to another member ({exc})") from exc
        except RebalanceInProgressError:
            self.rejoin_needed = True
            raise
        except FencedInstanceIdError as exc:
            self._fatal = exc
            raise
