"""The group coordinator's admin API: ListGroups, DescribeGroups, DeleteGroups.

:class:`AdminMixin` is one of the three parts :class:`~kafkasim.coordinator.coordinator.GroupCoordinator`
is made of; it reads the coordinator's ``_groups`` under its ``_lock`` (applying due
time-driven transitions first, so a description is current by the clock) and deletes
through its ``_store`` (tombstones for the group's offsets). No state of its own.

Thread-safety: every public method takes the coordinator's re-entrant lock.
"""

from __future__ import annotations

from typing import Iterable

from kafkasim.coordinator.group import GroupState
from kafkasim.errors import GroupIdNotFoundError, NonEmptyGroupError
from kafkasim.types import TopicPartition

__all__ = ["AdminMixin"]


class AdminMixin:
    """ListGroups / DescribeGroups / DeleteGroups (see the module docstring)."""

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

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition that stores ``group_id``."""
        return self._store.partition_for(group_id)
