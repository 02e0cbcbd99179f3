"""Subscription state of one consumer: what it subscribed to, what it owns, where it reads.

Three mutually exclusive modes, as Kafka's ``SubscriptionState``: none, subscribed to
topics (the group assigns partitions; without a group the consumer assigns itself every
partition of them, as kafka-python) and user-assigned (``assign()``, no group). A
subscription by regex ``pattern`` is the topics mode whose topic list the consumer
replaces, on each metadata refresh, with the topics the pattern matches (``re.match``,
as kafka-python; possibly none).

Invariants:
- every assigned partition has a :class:`PartitionState`; ``position`` is None until it
  is initialised from the committed offset or the reset policy;
- a paused partition keeps its position and is never fetched;
- the assignment is kept in sorted (topic, partition) order.

Thread-safety: none; owned by one Consumer (which serialises access with its lock).
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

from kafkasim.errors import IllegalStateError
from kafkasim.types import TopicPartition

__all__ = ["SubscriptionState", "PartitionState", "NONE", "AUTO_TOPICS", "USER_ASSIGNED"]

_EXCLUSIVE = ("Subscription to topics, partitions and pattern are mutually exclusive "
              "(call unsubscribe() first)")
NONE = "none"
AUTO_TOPICS = "subscribe"
USER_ASSIGNED = "assign"


class PartitionState:
    """Fetch position and pause flag of one assigned partition."""

    __slots__ = ("position", "paused", "highwater")

    def __init__(self) -> None:
        self.position: Optional[int] = None
        self.paused = False
        self.highwater: Optional[int] = None   # the high watermark the last fetch saw


class SubscriptionState:
    """Tracks the subscription mode, topics, assignment and per-partition positions."""

    def __init__(self) -> None:
        self.mode = NONE
        self.topics: tuple[str, ...] = ()
        self.pattern: Optional[re.Pattern] = None
        self.assignment: dict[TopicPartition, PartitionState] = {}

    def subscribe(self, topics: Iterable[str]) -> None:
        if self.mode == USER_ASSIGNED:
            raise IllegalStateError(_EXCLUSIVE)
        topics = tuple(sorted(set(topics)))
        if not topics:
            self.unsubscribe()
            return
        self.mode = AUTO_TOPICS
        self.topics = topics
        self.pattern = None

    def subscribe_pattern(self, pattern: re.Pattern) -> None:
        """Subscribe to the topics ``pattern`` matches; none until :meth:`match_topics` runs."""
        if self.mode == USER_ASSIGNED:
            raise IllegalStateError(_EXCLUSIVE)
        self.mode = AUTO_TOPICS
        self.topics = ()
        self.pattern = pattern

    def match_topics(self, all_topics: Iterable[str]) -> bool:
        """Pattern mode: take the topics of ``all_topics`` the pattern matches; True if they changed."""
        matched = tuple(sorted(t for t in set(all_topics) if self.pattern.match(t)))
        changed = matched != self.topics
        self.topics = matched
        return changed

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        if self.mode == AUTO_TOPICS:
            raise IllegalStateError(_EXCLUSIVE)
        self.mode = USER_ASSIGNED if partitions else NONE
        self.set_assignment(partitions)

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment; positions of partitions that stay are kept."""
        old = self.assignment
        self.assignment = {tp: old.get(tp) or PartitionState()
                           for tp in sorted(TopicPartition(*tp) for tp in partitions)}

    def unsubscribe(self) -> None:
        self.mode = NONE
        self.topics = ()
        self.pattern = None
        self.assignment = {}

    def state(self, tp: TopicPartition) -> PartitionState:
        s = self.assignment.get(tp)
        if s is None:
            raise IllegalStateError(f"No current assignment for partition {tp}")
        return s

    def assigned(self) -> list[TopicPartition]:
        return list(self.assignment)

    def missing_positions(self) -> list[TopicPartition]:
        return [tp for tp, s in self.assignment.items() if s.position is None]
