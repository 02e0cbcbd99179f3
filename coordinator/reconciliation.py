"""Moving one consumer-group member towards its target assignment (KIP-848's reconciliation).

Kafka's ``modern/consumer/CurrentAssignmentBuilder``, restated as one pure function,
:func:`reconcile`. It never gives a member a partition another member still owns, and it
never moves a member to a new epoch while it still owns partitions it was asked to revoke:
revocation comes before assignment.

By the member's state:

1. STABLE: at the target epoch, nothing to do; behind it, compute the next assignment.
2. UNREVOKED_PARTITIONS: if the heartbeat's owned partitions (``None``: not sent, so
   assume still owned) include any partition pending revocation, wait. Otherwise the
   member moves to epoch + 1 and the next assignment is computed.
3. UNRELEASED_PARTITIONS: compute the next assignment (a released partition is now given).
4. UNKNOWN: fenced (FENCED_MEMBER_EPOCH) unless the heartbeat says it owns nothing; then
   compute the next assignment at the target epoch.

The next assignment, per topic (``current`` = the member's assigned partitions):

- assigned = current ∩ target; pending revocation = current − assigned;
- pending assignment = target − assigned − partitions still owned by anyone
  (``current_partition_epoch(t, p) != -1``: those are *unreleased*);
- some to revoke and the member may still own them → UNREVOKED_PARTITIONS, epoch unchanged;
- else, the pending ones are added → STABLE (or UNRELEASED_PARTITIONS if some were held
  back), at the target epoch.

Worked example (Kafka's ``testStableToUnrevokedPartitions``): a STABLE member at epoch 10
owning t1:{1,2,3}, target at epoch 11 is t1:{2,3,4}, nobody owns 4, the heartbeat did not
list its partitions → UNREVOKED_PARTITIONS at epoch 10, assigned t1:{2,3}, pending revocation
t1:{1}. Once a heartbeat lists t1:{2,3}, it moves to STABLE at epoch 11 with t1:{2,3,4}.

Pure and stateless; thread-safe.
"""

from __future__ import annotations

import uuid
from typing import Callable, Mapping, Optional

from kafkasim.coordinator.consumer_group import ConsumerGroupMember, MemberState
from kafkasim.errors import FencedMemberEpochError
from kafkasim.protocol.consumer_group import Assignment

__all__ = ["reconcile", "owns_any"]

PartitionEpoch = Callable[[uuid.UUID, int], int]
"""(topic id, partition) -> the epoch of the member owning it now, -1 when nobody does."""


def owns_any(owned: Optional[Assignment], partitions: Mapping[uuid.UUID, frozenset[int]]) -> bool:
    """Whether the heartbeat's ``owned`` partitions include any of ``partitions``
    (``owned`` None: the member did not say, so it may still own them all)."""
    if owned is None:
        return True
    return any(p in partitions.get(t, ()) for t, ps in owned.items() for p in ps)


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              current_partition_epoch: PartitionEpoch, owned: Optional[Assignment] = None) -> ConsumerGroupMember:
    """The member after one reconciliation step towards ``target`` at ``target_epoch``."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, current_partition_epoch, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, current_partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, current_partition_epoch, owned)
    # UNKNOWN
    if owned is None or any(owned.values()):
        raise FencedMemberEpochError("The consumer group member is in a unknown state. "
                                     "The member must abandon all its partitions and rejoin.")
    return _next(member, target_epoch, target_epoch, target, current_partition_epoch, owned)


def _next(member: ConsumerGroupMember, member_epoch: int, target_epoch: int, target: Assignment,
          current_partition_epoch: PartitionEpoch, owned: Optional[Assignment]) -> ConsumerGroupMember:
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    adding: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    current = member.assigned_partitions
    for topic_id in set(target) | set(current):
        want = frozenset(target.get(topic_id, ()))
        have = current.get(topic_id, frozenset())
        keep = have & want
        free = {p for p in want - keep if current_partition_epoch(topic_id, p) == -1}
        unreleased = unreleased or len(free) < len(want - keep)
        if keep:
            assigned[topic_id] = keep
        if have - keep:
            revoking[topic_id] = have - keep
        if free:
            adding[topic_id] = frozenset(free)

    if revoking and owns_any(owned, revoking):
        return member.replace(state=MemberState.UNREVOKED_PARTITIONS, assigned_partitions=assigned,
                              partitions_pending_revocation=revoking).with_epoch(member_epoch)
    for topic_id, ps in adding.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.replace(state=state, assigned_partitions=assigned,
                          partitions_pending_revocation={}).with_epoch(target_epoch)
