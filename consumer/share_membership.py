"""The share consumer's side of ShareGroupHeartbeat (KIP-932): join, follow the assignment, leave.

:class:`ShareMembership` restates the Java client's ``ShareMembershipManager`` over the broker
API's ``share_group_heartbeat``. It is KIP-848's model without revocation: the coordinator's
simple share assignor may give one partition to several members, so a new assignment is
installed at once (nothing to give back first) and there is no acknowledging step::

    UNSUBSCRIBED ─(subscribe)─▶ JOINING ─(heartbeat, epoch 0)─▶ STABLE
    STABLE ─(an answer with an assignment)─▶ STABLE (the new assignment)
    any ─(UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH: the broker fenced it)─▶ JOINING (epoch 0, same member id)
    any ─(unsubscribe / close / poll timeout: heartbeat with epoch -1)─▶ UNSUBSCRIBED
    UNSUBSCRIBED after a poll timeout ─(the application's next poll)─▶ JOINING

- The member id is the client's (KIP-1082): a random UUID, or with ``seed`` one drawn from
  ``random.Random(f"{seed}:{client_id}")`` so a simulation is reproducible.
- A heartbeat is due when joining, when the subscription changed, or when the broker's
  ``heartbeat_interval_ms`` (``group.share.heartbeat.interval.ms``) has passed since the last
  one, on the injected clock. The subscribed topics go only with the join and after a
  change (Kafka sends the field only when it changed); ``None`` otherwise.
- An answer's ``assignment`` is ``None`` when unchanged; otherwise it replaces the
  assignment (topic → partitions).
- A retriable error is tried again at the next heartbeat; a fatal one
  (GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND for a group of another type, INVALID_REQUEST)
  is raised now and by every later heartbeat.

Thread-safety: none of its own; the ShareConsumer serialises calls with its lock.
"""

from __future__ import annotations

import enum
import logging
import random
import uuid
from typing import Optional

from kafkasim.errors import FencedMemberEpochError, KafkaSimError, UnknownMemberIdError
from kafkasim.types import TopicPartition

__all__ = ["ShareMembership", "ShareMemberState", "JOIN_EPOCH", "LEAVE_EPOCH"]

log = logging.getLogger(__name__)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1


class ShareMemberState(enum.Enum):
    """The states of the Java client's share membership this member goes through."""

    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    STABLE = "STABLE"
    FATAL = "FATAL"


class ShareMembership:
    """One share consumer's membership in its share group (see the module docstring)."""

    def __init__(self, broker, group_id: str, *, client_id: str, rack_id: str = "", seed=None,
                 max_poll_interval_ms: int = 300_000) -> None:
        self._broker = broker
        self.group_id = group_id
        self.client_id = client_id
        self.rack_id = rack_id
        self.max_poll_interval_ms = max_poll_interval_ms
        rng = random.Random(f"{seed}:{client_id}") if seed is not None else None
        self.member_id = str(uuid.UUID(int=rng.getrandbits(128), version=4) if rng else uuid.uuid4())
        self.member_epoch = JOIN_EPOCH
        self.state = ShareMemberState.UNSUBSCRIBED
        self.topics: tuple[str, ...] = ()
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.heartbeat_interval_ms = 0          # the broker's, from the first answer
        self._last_heartbeat: Optional[int] = None
        self._send_topics = False
        self._fatal: Optional[KafkaSimError] = None
        self._stale = False
        self.last_poll_ms: Optional[int] = None
        self.losses = 0     # times this member lost what it held (left, fenced): its buffered records are void

    # ------------------------------------------------------------------ subscription
    def subscribe(self, topics) -> None:
        """Replace the subscription; the next heartbeat carries it (joining if not joined)."""
        topics = tuple(sorted(set(topics)))
        if topics != self.topics or self.state is ShareMemberState.UNSUBSCRIBED:
            self.topics = topics
            self._send_topics = True
            if self.state is ShareMemberState.UNSUBSCRIBED:
                self.state = ShareMemberState.JOINING

    # ------------------------------------------------------------------ heartbeats
    def poll(self, now: int) -> None:
        """The application polled: leave on poll timeout (Kafka's max.poll.interval.ms), then
        heartbeat when one is due."""
        if self._fatal is not None:
            raise self._fatal
        self.check_poll_timeout(now)
        self.last_poll_ms = now
        if self._stale:                 # left on poll timeout: this poll joins again
            self._stale = False
            if self.topics:
                self.state = ShareMemberState.JOINING
                self._send_topics = True
        self.tick(now, from_poll=True)

    def check_poll_timeout(self, now: int) -> None:
        """Past ``max_poll_interval_ms`` without a poll the member leaves the group (the broker
        releases its records) and joins again at the next poll, as Kafka's client does."""
        if self.member_epoch > 0 and self.last_poll_ms is not None \
                and now - self.last_poll_ms > self.max_poll_interval_ms:
            log.warning("share consumer poll timeout has expired (%d ms > max.poll.interval.ms %d); "
                        "leaving share group %s", now - self.last_poll_ms, self.max_poll_interval_ms, self.group_id)
            self.leave()
            self._stale = True          # Java's STALE: only the application's next poll joins again

    def tick(self, now: int, *, from_poll: bool = False) -> None:
        """Heartbeat if one is due (joining, a subscription change, or the interval has passed);
        from the background (not a poll) first leave if the poll timeout has expired."""
        if self._fatal is not None or self.state is ShareMemberState.UNSUBSCRIBED:
            return
        if not from_poll:
            self.check_poll_timeout(now)
            if self.state is ShareMemberState.UNSUBSCRIBED:
                return
        due = (self.state is ShareMemberState.JOINING or self._send_topics or self._last_heartbeat is None
               or now - self._last_heartbeat >= self.heartbeat_interval_ms)
        if due:
            self._heartbeat(now)

    def _heartbeat(self, now: int) -> None:
        self._last_heartbeat = now
        send_topics = self._send_topics or self.member_epoch == JOIN_EPOCH
        try:
            res = self._broker.share_group_heartbeat(
                self.group_id, self.member_id, self.member_epoch,
                subscribed_topic_names=list(self.topics) if send_topics else None,
                rack_id=self.rack_id or None, client_id=self.client_id)
        except (FencedMemberEpochError, UnknownMemberIdError) as exc:
            log.info("share group %s: member %s fenced (%s); joining again", self.group_id, self.member_id, exc)
            self.fenced()
            return
        except KafkaSimError as exc:
            if exc.retriable:
                return                  # tried again at the next heartbeat
            self._fatal = exc
            self.state = ShareMemberState.FATAL
            raise
        self._send_topics = False
        self.member_id = res.member_id or self.member_id
        self.member_epoch = res.member_epoch
        self.heartbeat_interval_ms = res.heartbeat_interval_ms
        if res.assignment is not None:
            self.assignment = frozenset(TopicPartition(t, p) for t, ps in res.assignment.items() for p in ps)
        self.state = ShareMemberState.STABLE

    def fenced(self) -> None:
        """The broker no longer knows this member at this epoch: drop the assignment and join
        again (epoch 0, same member id) at the next heartbeat."""
        self.assignment = frozenset()
        self.member_epoch = JOIN_EPOCH
        self.state = ShareMemberState.JOINING
        self._send_topics = True
        self.losses += 1

    def leave(self) -> None:
        """Heartbeat with epoch -1 (the broker releases this member's records) and forget the
        assignment; a failure to leave is only logged, as Kafka's client does."""
        if self.member_epoch > 0:
            try:
                self._broker.share_group_heartbeat(self.group_id, self.member_id, LEAVE_EPOCH,
                                                   client_id=self.client_id)
            except KafkaSimError as exc:
                log.info("share group %s: leave failed: %s", self.group_id, exc)
        self.assignment = frozenset()
        self.member_epoch = JOIN_EPOCH
        self.state = ShareMemberState.UNSUBSCRIBED
        self._last_heartbeat = None
        self.losses += 1

    def unsubscribe(self) -> None:
        self.leave()
        self.topics = ()
        self._send_topics = False
