"""The group coordinator's admin API: ListGroups, DescribeGroups, DeleteGroups, OffsetDelete.

:class:`AdminMixin` is one of the three parts :class:`~kafkasim.coordinator.coordinator.GroupCoordinator`
is made of; it reads the coordinator's ``_groups`` under its ``_lock`` (applying due
time-driven transitions first, so a description is current by the clock) and deletes
through its ``_store`` (tombstones for the group's offsets). No state of its own.

Thread-safety: every public method takes the coordinator's re-entrant lock.
"""

from __future__ import annotations

from typing import Iterable

from kafkasim.arguments import check_topic_partition
from kafkasim.coordinator.group import Group, GroupState
from kafkasim.errors import (
    GroupIdNotFoundError, GroupSubscribedToTopicError, InvalidGroupIdError, NonEmptyGroupError,
)
from kafkasim.protocol.consumer_protocol import subscribed_topics
from kafkasim.types import TopicPartition

__all__ = ["AdminMixin"]


class AdminMixin:
    """ListGroups / DescribeGroups / DeleteGroups / OffsetDelete (see the module docstring)."""

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
                             "client_id": m.client_id, "client_host": m.client_host,
                             "assignment": [TopicPartition(*tp) for tp in m.assignment],
                             "assignment_bytes": m.assignment_bytes,
                             "metadata": (m.metadata_for(g.protocol_name)
                                          if g.protocol_name in m.protocol_names else None)}
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

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> dict:
        """Kafka's OffsetDelete: delete the group's committed offsets of ``partitions``; returns
        ``{partition: None (deleted, or there was none) or GroupSubscribedToTopicError}``.

        As Kafka's ``GroupCoordinator.handleDeleteOffsets``: an unknown (or Dead) group →
        GroupIdNotFoundError; an Empty group → every partition's offset goes; a non-empty
        ``consumer`` group → the partitions of a topic some member subscribes to get
        GroupSubscribedToTopicError and the others go; a non-empty group of another protocol
        type → NonEmptyGroupError. Tombstones go to ``__consumer_offsets`` first (one batch),
        then the offsets leave the in-memory table, so a restart does not bring them back."""
        if not isinstance(group_id, str) or not group_id:
            raise InvalidGroupIdError(f"invalid group id {group_id!r}")
        wanted = list(dict.fromkeys(check_topic_partition(tp) for tp in partitions))
        with self._lock:
            now = self._now()
            g = self._group(group_id)
            if g is None or g.is_(GroupState.DEAD):
                raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
            out: dict = {}
            if not g.is_(GroupState.EMPTY):
                if g.protocol_type != "consumer":
                    raise NonEmptyGroupError(
                        f"group {group_id!r} has {len(g.members)} member(s) and protocol type "
                        f"{g.protocol_type!r}: its offsets can be deleted only while it is Empty")
                subscribed = self._subscribed_topics(g)
                for tp in wanted:
                    if subscribed is None or tp.topic in subscribed:
                        out[tp] = GroupSubscribedToTopicError(
                            f"group {group_id!r} is subscribed to topic {tp.topic!r}: "
                            f"cannot delete the offset of {tp.topic}-{tp.partition}")
            doomed = [tp for tp in wanted if tp not in out and tp in g.offsets]
            if doomed:
                self._store.delete_offsets(group_id, doomed, now)
                for tp in doomed:
                    del g.offsets[tp]
            return {tp: out.get(tp) for tp in wanted}

    @staticmethod
    def _subscribed_topics(g: Group):
        """Every topic the members' subscriptions name, or None when that is not known (no
        generation yet, or a subscription that does not parse): then, as Kafka's
        ``GroupMetadata.isSubscribedToTopic``, the group counts as subscribed to every topic."""
        if not g.protocol_name:
            return None
        topics: set = set()
        for m in g.members.values():
            try:
                names = subscribed_topics(g.protocol_type, m.metadata_for(g.protocol_name))
            except KeyError:
                return None
            if names is None:
                return None
            topics |= set(names)
        return frozenset(topics)

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that stores ``group_id``."""
        return self._store.partition_for(group_id)
