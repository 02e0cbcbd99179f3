"""Leader elections a client asks for: Kafka's ElectLeaders (``kafka-leader-election``).

:class:`Elections` is one of the parts of :class:`kafkasim.broker.broker.Broker` (and so of
:class:`kafkasim.broker.cluster.Cluster`). :meth:`Elections.elect` answers per partition as
Kafka's controller does (``ReplicationControlManager.electLeader``):

1. An unknown topic or partition → UnknownTopicOrPartitionError.
2. ``preferred``: the first replica already leads → ElectionNotNeededError. Otherwise it
   becomes the leader when it is live and in the ISR (epoch + 1, followers truncate), else
   PreferredLeaderNotAvailableError.
3. ``unclean``: the partition has a leader → ElectionNotNeededError. Otherwise the first live
   ISR member leads; with none, the first live replica, *whatever the topic's*
   ``unclean.leader.election.enable`` says (that is the point of asking), and what the other
   replicas drop is listed as lost (:mod:`kafkasim.broker.faults`, step 3); with no live
   replica, EligibleLeadersNotAvailableError.
4. ``partitions=None`` means every partition, and then, as Kafka, the answer leaves out the
   partitions whose election was not needed.

The one broker leads every partition it has and is its only replica, so it answers
ElectionNotNeededError for every partition of either type, exactly as Kafka does for a
single-replica partition. Internal topics (``__consumer_offsets``, unreplicated in kafkasim)
get the same answer.

Thread-safety: takes the broker's metadata lock, then each partition's lock.
"""

from __future__ import annotations

from typing import Iterable, Optional

from kafkasim.arguments import check_topic_partition
from kafkasim.errors import (
    ElectionNotNeededError, EligibleLeadersNotAvailableError, InvalidArgumentError, KafkaSimError,
    PreferredLeaderNotAvailableError, UnknownTopicOrPartitionError,
)
from kafkasim.types import TopicPartition

from kafkasim.broker.core import BrokerCore
from kafkasim.broker.replica import PartitionState

__all__ = ["Elections", "PREFERRED", "UNCLEAN"]

PREFERRED = "preferred"
"""Kafka's ``ElectionType.PREFERRED`` (0 on the wire)."""
UNCLEAN = "unclean"
"""Kafka's ``ElectionType.UNCLEAN`` (1 on the wire)."""


class Elections(BrokerCore):
    """ElectLeaders (see the module docstring)."""

    def elect(self, election_type: str = PREFERRED, partitions: Optional[Iterable[TopicPartition]] = None
              ) -> dict[TopicPartition, Optional[KafkaSimError]]:
        """Run a ``preferred`` or ``unclean`` election; returns ``{partition: None (elected) or the
        error}`` (Kafka's ``ElectLeadersResult.partitions()``), steps in the module docstring."""
        if election_type not in (PREFERRED, UNCLEAN):
            raise InvalidArgumentError(f"election_type {election_type!r}: expected {PREFERRED!r} or {UNCLEAN!r}")
        wanted = None if partitions is None else [check_topic_partition(tp) for tp in partitions]
        with self._lock:
            self._check_open()
            out: dict[TopicPartition, Optional[KafkaSimError]] = {}
            for tp in (sorted(self._partitions) if wanted is None else wanted):
                try:
                    part = self._partitions.get(tp)
                    if part is None:
                        raise UnknownTopicOrPartitionError(f"No such partition as {tp.topic}-{tp.partition}")
                    with part.lock:
                        self._elect_one(part, election_type)
                    out[tp] = None
                except ElectionNotNeededError as exc:
                    if wanted is not None:
                        out[tp] = exc
                except UnknownTopicOrPartitionError as exc:
                    out[tp] = exc
                except (PreferredLeaderNotAvailableError, EligibleLeadersNotAvailableError) as exc:
                    out[tp] = exc
            return out

    def _elect_one(self, part: PartitionState, election_type: str) -> None:
        """Steps 2 and 3 for one partition (its lock held)."""
        if election_type == PREFERRED:
            preferred = part.replicas[0]
            if part.leader == preferred:
                raise ElectionNotNeededError(f"{part.name}: the preferred replica {preferred} already leads")
            if preferred not in part.isr or not part.faults.reachable(preferred):
                raise PreferredLeaderNotAvailableError(
                    f"{part.name}: the preferred replica {preferred} is "
                    f"{'not in the ISR ' + str(part.isr) if preferred not in part.isr else 'not live'}")
            part.become_leader(preferred, part.isr)
            return
        if part.leader >= 0:
            raise ElectionNotNeededError(f"{part.name} has a leader ({part.leader})")
        if not any(part.faults.reachable(b) for b in part.replicas):
            raise EligibleLeadersNotAvailableError(f"{part.name}: no replica of {part.replicas} is live")
        self._elect_leader(part, unclean=True)

    def _elect_leader(self, part: PartitionState, unclean: bool) -> None:
        """Elect a leader for an offline partition (a cluster: kafkasim.broker.faults). The one
        broker's partitions always have their leader, so it never gets here."""
        raise EligibleLeadersNotAvailableError(f"{part.name} has no replica that can lead")
