"""The consumer's side of Kafka 4's consumer group protocol (KIP-848), never blocking.

:class:`ConsumerMembership` is what ``Consumer(..., group_protocol="consumer")`` uses instead
of :class:`~kafkasim.consumer.group_member.GroupMember`: it restates the Java client's
``ConsumerMembershipManager`` over the broker's ``consumer_group_heartbeat`` (see
``kafkasim/broker/consumer_group_api.py`` for the broker side). There is no join/sync and
no group-wide barrier: the member heartbeats, the coordinator answers with what the member
may own now, and the member reconciles towards it::

    UNSUBSCRIBED ─(subscribe)─▶ JOINING ─(heartbeat epoch 0)─▶ RECONCILING
        ─(revoke, then assign)─▶ ACKNOWLEDGING ─(heartbeat with the new owned set)─▶ STABLE
    STABLE ─(a response with a new assignment)─▶ RECONCILING ...
    any ─(FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: on_partitions_lost)─▶ JOINING (epoch 0)
    any ─(close / unsubscribe: on_partitions_revoked, heartbeat epoch -1, or -2 if static)─▶ UNSUBSCRIBED

Steps of one reconciliation (Kafka's order):

1. the response's assignment (topic id → partitions) is resolved to topic names (partitions
   of a topic id this client cannot name yet wait for the next heartbeat);
2. partitions owned but no longer assigned are **revoked first**: commit the consumed
   positions when ``enable_auto_commit``, then ``on_partitions_revoked(revoked)`` while they
   are still owned, then drop them;
3. the new assignment is installed and ``on_partitions_assigned(added)`` fires (also when
   nothing was added, as the Java client);
4. the member acknowledges at once: a heartbeat carrying the partitions it owns now, so the
   coordinator can hand the released partitions to their new owners.

Member ids are chosen by the client (Kafka 4.0, KIP-1082): a random UUID, or, with the
consumer's ``seed`` config, one drawn from ``random.Random(f"{seed}:{client_id}")`` so a run
is reproducible. Offsets are committed with the member epoch (OffsetCommit v9 semantics).
The heartbeat interval is the broker's (``group.consumer.heartbeat.interval.ms``); the
session timeout is the broker's too (a member that stops heartbeating is fenced by
``Broker.tick()``).

The broker is anything with the broker API's ``consumer_group_heartbeat``: a Broker, a
Cluster, or a ``RemoteBroker`` (ConsumerGroupHeartbeat v1 to ``kafkasim serve``).

Thread-safety: none of its own; the Consumer serialises calls with its lock.
"""

from __future__ import annotations

import enum
import logging
import random
import uuid
from typing import Callable, Optional

from kafkasim.consumer.group_member import ConsumerRebalanceListener, MemberState, fire_listener
from kafkasim.errors import (
    CommitFailedError, FencedMemberEpochError, InvalidConfigurationError, KafkaSimError, StaleMemberEpochError, UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from kafkasim.protocol.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
)
from kafkasim.types import TopicPartition

__all__ = ["ConsumerMembership", "ConsumerMemberState"]

log = logging.getLogger(__name__)


class ConsumerMemberState(enum.Enum):
    """The Java client's ``MemberState`` (the states this in-process member goes through)."""

    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FATAL = "FATAL"


class ConsumerMembership:
    """One consumer's membership in a consumer group (see the module docstring).

    Offers the methods :class:`~kafkasim.consumer.consumer.Consumer` calls on a
    :class:`~kafkasim.consumer.group_member.GroupMember` (``poll``, ``heartbeat_tick``,
    ``commit``, ``close``, ``check_poll_timeout``, ``state``, ``member_id``, ``generation_id``),
    so the consumer drives either one the same way.
    """

    protocol = "consumer"

    def __init__(self, broker, group_id: str, subscriptions, *, clock, client_id: str,
                 max_poll_interval_ms: int, group_instance_id: Optional[str], remote_assignor: Optional[str],
                 on_commit_needed: Callable[[], None], client_rack: str = "", seed=None) -> None:
        if not callable(getattr(broker, "consumer_group_heartbeat", None)):
            raise InvalidConfigurationError(
                f"group_protocol='consumer' needs a broker with the consumer group API "
                f"(consumer_group_heartbeat); {type(broker).__name__} has none")
        self._broker = broker
        self.group_id = group_id
        self._subs = subscriptions
        self._clock = clock
        self.client_id = client_id
        self.client_rack = client_rack
        self.max_poll_interval_ms = max_poll_interval_ms
        self.group_instance_id = group_instance_id
        self.remote_assignor = remote_assignor
        self._commit_before_revoke = on_commit_needed
        self.listener: Optional[ConsumerRebalanceListener] = None
        rng = random.Random(f"{seed}:{client_id}") if seed is not None else None
        self.member_id = str(uuid.UUID(int=rng.getrandbits(128), version=4) if rng else uuid.uuid4())
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.kip848_state = ConsumerMemberState.UNSUBSCRIBED
        self.heartbeat_interval_ms = 0          # the broker's, from the first response
        self._last_heartbeat: Optional[int] = None
        self.last_poll_ms = clock.now_ms()
        self.rejoin_needed = True               # send the subscription on the next poll
        self._target: Optional[set[TopicPartition]] = None   # the latest assignment received
        self._names: dict[uuid.UUID, str] = {}
        self._ids: dict[str, uuid.UUID] = {}
        self.rebalances = 0
        self._fatal: Optional[KafkaSimError] = None
        self._reconciling = False               # inside the acknowledging heartbeat
        self._stale = False                     # left on poll timeout; waits for a poll

    # ------------------------------------------------------------------ compatibility
    @property
    def generation_id(self) -> int:
        """The member epoch (what OffsetCommit v9 carries as the generation)."""
        return self.member_epoch

    @property
    def state(self) -> MemberState:
        """The classic :class:`MemberState` this state corresponds to (STABLE when reconciled)."""
        s = self.kip848_state
        if s is ConsumerMemberState.STABLE:
            return MemberState.STABLE
        if s in (ConsumerMemberState.RECONCILING, ConsumerMemberState.ACKNOWLEDGING):
            return MemberState.COMPLETING_REBALANCE
        if s is ConsumerMemberState.JOINING:
            return MemberState.PREPARING_REBALANCE
        return MemberState.UNJOINED

    @property
    def in_generation(self) -> bool:
        return self.member_epoch > 0

    # ------------------------------------------------------------------ callbacks
    def _fire(self, name: str, tps) -> None:
        fire_listener(self.listener, name, tps)

    # ------------------------------------------------------------------ topic ids
    def _topic_id(self, name: str) -> Optional[uuid.UUID]:
        tid = self._ids.get(name)
        if tid is None:
            try:
                raw = self._broker.describe_topic(name)["topic_id"]
            except UnknownTopicOrPartitionError:
                return None
            tid = raw if isinstance(raw, uuid.UUID) else uuid.UUID(hex=raw)
            self._ids[name], self._names[tid] = tid, name
        return tid

    def _topic_name(self, tid: uuid.UUID) -> Optional[str]:
        if tid not in self._names:
            for name in self._broker.list_topics():     # a topic this client has not seen yet
                if name not in self._ids:
                    self._topic_id(name)
        return self._names.get(tid)

    def _owned_by_id(self) -> dict:
        out: dict[uuid.UUID, set[int]] = {}
        for tp in self._subs.assigned():
            tid = self._topic_id(tp.topic)
            if tid is not None:
                out.setdefault(tid, set()).add(tp.partition)
        return {t: frozenset(ps) for t, ps in out.items()}

    # ------------------------------------------------------------------ poll / heartbeat
    def poll(self, now: int) -> None:
        """Do what is due from the application's poll: leave on poll timeout, heartbeat."""
        if self._fatal is not None:
            raise self._fatal
        self.check_poll_timeout(now)
        self.last_poll_ms = now
        self._stale = False
        self.heartbeat_tick(now, from_poll=True)

    def check_poll_timeout(self, now: int) -> None:
        """Kafka's: past ``max_poll_interval_ms`` without a poll the member leaves the group
        (its partitions are lost) and rejoins with epoch 0 on the next poll."""
        if self.member_epoch > 0 and now - self.last_poll_ms > self.max_poll_interval_ms:
            log.warning("consumer poll timeout has expired (%d ms > max_poll_interval_ms %d); leaving group %s",
                        now - self.last_poll_ms, self.max_poll_interval_ms, self.group_id)
            self._lose()
            self._send_leave()
            self.rejoin_needed = True
            self._stale = True      # Java's STALE: only the application's next poll rejoins

    def heartbeat_tick(self, now: int, *, from_poll: bool = False) -> None:
        """Heartbeat if one is due: joining, acknowledging, a subscription change, or the
        broker's interval has passed since the last one."""
        if self._fatal is not None or not self._subs.topics and self._subs.pattern is None:
            return
        if not from_poll:
            self.check_poll_timeout(now)
            if self._stale:
                return
        due = (self.rejoin_needed or self.kip848_state in (ConsumerMemberState.JOINING,
                                                           ConsumerMemberState.RECONCILING,
                                                           ConsumerMemberState.ACKNOWLEDGING,
                                                           ConsumerMemberState.UNSUBSCRIBED)
               or self._last_heartbeat is None or now - self._last_heartbeat >= self.heartbeat_interval_ms)
        if due:
            self._heartbeat(now)

    def _request(self, epoch: int) -> ConsumerGroupHeartbeatRequest:
        pattern = self._subs.pattern
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
            instance_id=self.group_instance_id, rack_id=self.client_rack or None,
            rebalance_timeout_ms=self.max_poll_interval_ms,
            subscribed_topic_names=None if pattern is not None else tuple(self._subs.topics),
            subscribed_topic_regex=pattern.pattern if pattern is not None else "",
            server_assignor=self.remote_assignor,
            topic_partitions={} if epoch == JOIN_GROUP_MEMBER_EPOCH else self._owned_by_id())

    def _heartbeat(self, now: int) -> None:
        if self.kip848_state is ConsumerMemberState.UNSUBSCRIBED:
            self.kip848_state = ConsumerMemberState.JOINING
        self.rejoin_needed = False
        self._last_heartbeat = now
        try:
            res = self._broker.consumer_group_heartbeat(self._request(self.member_epoch), client_id=self.client_id)
        except (FencedMemberEpochError, UnknownMemberIdError) as exc:
            log.info("group %s: member %s fenced (%s); partitions lost, rejoining", self.group_id,
                     self.member_id, exc)
            self._lose()
            self.kip848_state = ConsumerMemberState.JOINING
            self.rejoin_needed = True
            return
        except KafkaSimError as exc:
            if exc.retriable:
                return          # tried again at the next heartbeat, as Kafka's retriable errors
            self._fatal = exc   # FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, ...
            self.kip848_state = ConsumerMemberState.FATAL
            raise
        self.member_id = res.member_id
        self.member_epoch = res.member_epoch
        self.heartbeat_interval_ms = res.heartbeat_interval_ms
        if res.assignment is not None:
            self._target = set()
            for tid, parts in res.assignment.items():
                name = self._topic_name(tid)
                if name is not None:
                    self._target.update(TopicPartition(name, p) for p in parts)
        if self.kip848_state is ConsumerMemberState.ACKNOWLEDGING:
            self.kip848_state = ConsumerMemberState.STABLE
        if self._target is not None and self._target != set(self._subs.assigned()):
            if self._reconciling:
                self.kip848_state = ConsumerMemberState.RECONCILING   # next poll/tick: one step each
                return
            self._reconcile(now)
        elif self.kip848_state in (ConsumerMemberState.JOINING, ConsumerMemberState.RECONCILING):
            self.kip848_state = ConsumerMemberState.STABLE

    def _reconcile(self, now: int) -> None:
        """Steps 2-4 of the module docstring."""
        self.kip848_state = ConsumerMemberState.RECONCILING
        owned = set(self._subs.assigned())
        target = set(self._target)
        revoked, added = owned - target, target - owned
        if revoked:
            self._commit_before_revoke()        # auto-commit, before the revocation
            self._fire("on_partitions_revoked", revoked)
            self._subs.set_assignment(owned & target)
        self._subs.set_assignment(target)
        self._fire("on_partitions_assigned", added)
        self.rebalances += 1
        self.kip848_state = ConsumerMemberState.ACKNOWLEDGING
        self._reconciling = True
        try:
            self._heartbeat(now)                # acknowledge at once
        finally:
            self._reconciling = False

    def _lose(self) -> None:
        owned = self._subs.assigned()
        if owned:
            self._fire("on_partitions_lost", owned)
        self._subs.set_assignment([])
        self._target = None
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH

    # ------------------------------------------------------------------ leave / commit
    def _send_leave(self) -> None:
        epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.group_instance_id is not None else LEAVE_GROUP_MEMBER_EPOCH
        if self.kip848_state is not ConsumerMemberState.UNSUBSCRIBED:
            try:
                self._broker.consumer_group_heartbeat(
                    ConsumerGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                                  member_epoch=epoch, instance_id=self.group_instance_id),
                    client_id=self.client_id)
            except KafkaSimError as exc:
                log.info("group %s: leave failed: %s", self.group_id, exc)
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self._target = None
        self.kip848_state = ConsumerMemberState.UNSUBSCRIBED

    def close(self) -> None:
        """Revoke what this member owns (``on_partitions_revoked``), then leave: epoch -1, or
        -2 for a static member (its partitions wait for it until the session times out)."""
        owned = self._subs.assigned()
        if owned:
            self._fire("on_partitions_revoked" if self.member_epoch > 0 else "on_partitions_lost", owned)
        self._subs.set_assignment([])
        self._send_leave()
        self.rejoin_needed = True

    def commit(self, offsets: dict) -> None:
        """OffsetCommit with this member's id and epoch (v9). STALE_MEMBER_EPOCH: heartbeat for
        the current epoch and try once more; outside the group, ``CommitFailedError``."""
        if self.member_epoch <= 0:
            raise CommitFailedError(
                f"Commit cannot be completed since the consumer is not part of an active group "
                f"{self.group_id!r} (member {self.member_id!r}, epoch {self.member_epoch}); it must rejoin (poll) first")
        for attempt in (0, 1):
            try:
                self._broker.offset_commit(self.group_id, self.member_id, self.member_epoch, offsets)
                return
            except StaleMemberEpochError as exc:
                if attempt:
                    raise CommitFailedError(f"Commit failed with a stale member epoch ({exc})") from exc
                self._heartbeat(self._clock.now_ms())
            except UnknownMemberIdError as exc:
                self._lose()
                self.kip848_state = ConsumerMemberState.JOINING
                raise CommitFailedError(
                    f"Commit cannot be completed since member {self.member_id!r} is no longer in group "
                    f"{self.group_id!r} ({exc})") from exc
