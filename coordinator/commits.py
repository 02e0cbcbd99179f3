"""The group coordinator's offsets API: OffsetCommit and OffsetFetch.

:class:`CommitsMixin` is one of the three parts :class:`~kafkasim.coordinator.coordinator.GroupCoordinator`
is made of. It holds no state of its own: committed offsets live in each
:class:`~kafkasim.coordinator.group.Group` (``offsets``: TopicPartition → (OffsetAndMetadata,
commit time)) and are written to ``__consumer_offsets`` through the coordinator's
``_store`` *before* the in-memory table changes, so what a fetch returns has been appended.

Fencing of a commit, in Kafka's order: a fenced static member → FencedInstanceIdError;
an unknown member → UnknownMemberIdError; a wrong generation → IllegalGenerationError;
CompletingRebalance → RebalanceInProgressError. A commit with the current generation is
accepted during PreparingRebalance (eager members commit in ``on_partitions_revoked``).

A transactional commit (TxnOffsetCommit v3+, KIP-447) is checked against the group by
:meth:`CommitsMixin.validate_txn_offset_commit`, Kafka's ``validateTransactionalOffsetCommit``
(classic group): no group → accepted only without a generation (a simple consumer), else
ILLEGAL_GENERATION; a Dead group → COORDINATOR_NOT_AVAILABLE; an Empty group and no
generation → accepted; a member id, instance id or generation given → the member must be
the group's (a static member's instance id held by another member → FENCED_INSTANCE_ID, an
unknown one → UNKNOWN_MEMBER_ID) and the generation the group's (ILLEGAL_GENERATION).
Unlike OffsetCommit, a transactional commit without member and generation is accepted by a
non-empty group (older clients send none) and CompletingRebalance does not refuse it.

Thread-safety: every public method takes the coordinator's re-entrant lock.
"""

from __future__ import annotations

from typing import Iterable, Optional

from kafkasim.arguments import check_commit_offsets, check_topic_partition
from kafkasim.coordinator.group import Group, GroupState
from kafkasim.errors import (
    CoordinatorNotAvailableError, FencedInstanceIdError, IllegalGenerationError, InvalidGroupIdError,
    RebalanceInProgressError, UnknownMemberIdError,
)
from kafkasim.types import TopicPartition

__all__ = ["CommitsMixin"]


class CommitsMixin:
    """OffsetCommit / OffsetFetch (see the module docstring)."""

    # ------------------------------------------------------------------ offsets
    def offset_commit(self, group_id: str, member_id: str, generation_id: int,
                      offsets: dict, *, group_instance_id: Optional[str] = None) -> None:
        """Commit ``offsets`` ({TopicPartition: OffsetAndMetadata | int}) for the group.

        ``generation_id == NO_GENERATION`` with ``member_id == ""`` is a standalone
        commit (manual assignment), allowed only while the group has no members.
        """
        if not isinstance(group_id, str) or not group_id:
            raise InvalidGroupIdError(f"invalid group id {group_id!r}")
        # Any offset is stored, the sentinels -1 and -2 that admin tools commit included, as
        # Kafka's OffsetMetadataManager does; readers treat a negative one as "no offset".
        norm = check_commit_offsets(offsets)        # InvalidArgumentError naming a bad one
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

    def validate_txn_offset_commit(self, group_id: str, member_id: str = "", generation_id: int = -1,
                                   group_instance_id: Optional[str] = None) -> None:
        """Raise what Kafka's group coordinator answers a TxnOffsetCommit from this member
        (KIP-447, see the module docstring); return when the group accepts it. A zombie (a
        member of an older generation, or one removed from the group) is refused, so its
        transaction cannot commit offsets over those of the member that took its partitions.

        Example: a member of generation 1 after a rebalance to generation 2 gets
        ``IllegalGenerationError``; after the group dropped it, ``UnknownMemberIdError``."""
        if not isinstance(group_id, str) or not group_id:
            raise InvalidGroupIdError(f"invalid group id {group_id!r}")
        with self._lock:
            g = self._group(group_id)
            if g is None:
                if generation_id < 0:
                    return                        # a simple consumer's group, made on commit
                raise IllegalGenerationError(
                    f"group {group_id!r} does not exist, so generation {generation_id} is stale")
            if g.is_(GroupState.DEAD):
                raise CoordinatorNotAvailableError(f"group {group_id!r} is being deleted")
            if generation_id < 0 and g.is_(GroupState.EMPTY):
                return
            if generation_id >= 0 or member_id or group_instance_id is not None:
                if group_instance_id is not None:
                    owner = g.static_members.get(group_instance_id)
                    if owner is None:
                        raise UnknownMemberIdError(
                            f"group {group_id!r} has no static member with instance id {group_instance_id!r}")
                    if owner != member_id:
                        raise FencedInstanceIdError(
                            f"group {group_id!r}: instance id {group_instance_id!r} is now held by member "
                            f"{owner!r}, not {member_id!r}")
                elif member_id not in g.members:
                    raise UnknownMemberIdError(f"group {group_id!r} has no member {member_id!r}")
                self._check_generation(g, generation_id)

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
                tp = check_topic_partition(tp)
                if tp in g.offsets:
                    out[tp] = g.offsets[tp][0]
            return out

