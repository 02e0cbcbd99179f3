"""Kafka's CurrentAssignmentBuilderTest as vectors: one member's reconciliation step.

Each vector is (Kafka's test name, the member before, target epoch, target, the epoch the
current owner of any partition has (-1: free; a dict by topic name), the heartbeat's owned
partitions (None: not sent), the member after). Facts from Kafka's tests, no code.
"""

from __future__ import annotations

import pytest

from kafkasim.coordinator.consumer_group import ConsumerGroupMember, MemberState
from kafkasim.coordinator.reconciliation import reconcile
from kafkasim.errors import FencedMemberEpochError
from tests.coordinator.consumer_group_support import mk, tid

S, UNREV, UNREL = MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS, MemberState.UNRELEASED_PARTITIONS


def M(state, epoch, prev, assigned, revoking=None):
    return ConsumerGroupMember("member", member_epoch=epoch, previous_member_epoch=prev, state=state,
                               assigned_partitions=assigned, partitions_pending_revocation=revoking or {})


VECTORS = [
    ("testStableToStable",
     M(S, 10, 10, mk(t1=(1, 2, 3), t2=(4, 5, 6))), 11, mk(t1=(1, 2, 3), t2=(4, 5, 6)), 10, None,
     M(S, 11, 10, mk(t1=(1, 2, 3), t2=(4, 5, 6)))),
    ("testStableToStableWithNewPartitions",
     M(S, 10, 10, mk(t1=(1, 2, 3), t2=(4, 5, 6))), 11, mk(t1=(1, 2, 3, 4), t2=(4, 5, 6, 7)), -1, None,
     M(S, 11, 10, mk(t1=(1, 2, 3, 4), t2=(4, 5, 6, 7)))),
    ("testStableToUnrevokedPartitions",
     M(S, 10, 10, mk(t1=(1, 2, 3), t2=(4, 5, 6))), 11, mk(t1=(2, 3, 4), t2=(5, 6, 7)), -1, None,
     M(UNREV, 10, 10, mk(t1=(2, 3), t2=(5, 6)), mk(t1=(1,), t2=(4,)))),
    ("testStableToUnreleasedPartitions",
     M(S, 10, 10, mk(t1=(1, 2, 3), t2=(4, 5, 6))), 11, mk(t1=(1, 2, 3, 4), t2=(4, 5, 6, 7)), 10, None,
     M(UNREL, 11, 10, mk(t1=(1, 2, 3), t2=(4, 5, 6)))),
    ("testStableToUnreleasedPartitionsWithOwnedPartitionsNotHavingRevokedPartitions",
     M(S, 10, 10, mk(t1=(1, 2, 3), t2=(4, 5, 6))), 11, mk(t1=(1, 2, 3), t2=(4, 5, 7)), {"t1": -1, "t2": 10}, {},
     M(UNREL, 11, 10, mk(t1=(1, 2, 3), t2=(4, 5)))),
    ("testUnrevokedPartitionsToStable",
     M(UNREV, 10, 10, mk(t1=(2, 3), t2=(5, 6)), mk(t1=(1,), t2=(4,))), 11, mk(t1=(2, 3), t2=(5, 6)), -1,
     mk(t1=(2, 3), t2=(5, 6)),
     M(S, 11, 10, mk(t1=(2, 3), t2=(5, 6)))),
    ("testUnrevokedPartitionsToUnrevokedPartitions",
     M(UNREV, 10, 10, mk(t1=(2, 3), t2=(5, 6)), mk(t1=(1,), t2=(4,))), 12, mk(t1=(3,), t2=(6,)), -1,
     mk(t1=(2, 3), t2=(5, 6)),
     M(UNREV, 11, 10, mk(t1=(3,), t2=(6,)), mk(t1=(2,), t2=(5,)))),
    ("testUnrevokedPartitionsToUnreleasedPartitions",
     M(UNREV, 11, 10, mk(t1=(2, 3), t2=(5, 6))), 11, mk(t1=(2, 3, 4), t2=(5, 6, 7)), 10,
     mk(t1=(2, 3), t2=(5, 6)),
     M(UNREL, 11, 11, mk(t1=(2, 3), t2=(5, 6)))),
    ("testUnreleasedPartitionsToStable",
     M(UNREL, 11, 11, mk(t1=(2, 3), t2=(5, 6))), 12, mk(t1=(2, 3), t2=(5, 6)), 10, None,
     M(S, 12, 11, mk(t1=(2, 3), t2=(5, 6)))),
    ("testUnreleasedPartitionsToStableWithNewPartitions",
     M(UNREL, 11, 11, mk(t1=(2, 3), t2=(5, 6))), 11, mk(t1=(2, 3, 4), t2=(5, 6, 7)), -1, None,
     M(S, 11, 11, mk(t1=(2, 3, 4), t2=(5, 6, 7)))),
    ("testUnreleasedPartitionsToUnreleasedPartitions",
     M(UNREL, 11, 11, mk(t1=(2, 3), t2=(5, 6))), 11, mk(t1=(2, 3, 4), t2=(5, 6, 7)), 10, None,
     M(UNREL, 11, 11, mk(t1=(2, 3), t2=(5, 6)))),
    ("testUnreleasedPartitionsToUnrevokedPartitions",
     M(UNREL, 11, 11, mk(t1=(2, 3), t2=(5, 6))), 12, mk(t1=(3,), t2=(6,)), 10, None,
     M(UNREV, 11, 11, mk(t1=(3,), t2=(6,)), mk(t1=(2,), t2=(5,)))),
    ("testUnknownState (rejoined with nothing owned)",
     M(MemberState.UNKNOWN, 11, 11, mk(t1=(3,), t2=(6,)), mk(t1=(2,), t2=(5,))), 12, mk(t1=(3,), t2=(6,)), 11, {},
     M(S, 12, 11, mk(t1=(3,), t2=(6,)))),
]


def _epochs(spec):
    if isinstance(spec, dict):
        by_id = {tid(name): e for name, e in spec.items()}
        return lambda topic_id, partition: by_id[topic_id]
    return lambda topic_id, partition: spec


@pytest.mark.parametrize("name,member,target_epoch,target,owner_epoch,owned,expected", VECTORS,
                         ids=[v[0] for v in VECTORS])
def test_current_assignment_builder_vectors(name, member, target_epoch, target, owner_epoch, owned, expected):
    assert reconcile(member, target_epoch, target, _epochs(owner_epoch), owned) == expected


@pytest.mark.parametrize("owned", [None, mk(t1=(1, 2, 3), t2=(5, 6)), mk(t1=(2, 3), t2=(4, 5, 6))],
                         ids=["owned not sent", "still owns t1-1", "still owns t2-4"])
def test_remains_in_unrevoked_partitions_while_any_revoked_partition_is_owned(owned):
    # Kafka's testRemainsInUnrevokedPartitions: the member is returned unchanged.
    member = M(UNREV, 10, 10, mk(t1=(2, 3), t2=(5, 6)), mk(t1=(1,), t2=(4,)))
    assert reconcile(member, 12, mk(t1=(3,), t2=(6,)), _epochs(-1), owned) is member


@pytest.mark.parametrize("owned", [None, mk(t1=(3,))], ids=["owned not sent", "owns a partition"])
def test_unknown_state_is_fenced_until_the_member_owns_nothing(owned):
    member = M(MemberState.UNKNOWN, 11, 11, mk(t1=(3,), t2=(6,)), mk(t1=(2,), t2=(5,)))
    with pytest.raises(FencedMemberEpochError, match="The consumer group member is in a unknown state"):
        reconcile(member, 12, mk(t1=(3,), t2=(6,)), _epochs(10), owned)


def test_a_stable_member_at_the_target_epoch_is_returned_unchanged():
    member = M(S, 11, 10, mk(t1=(1,)))
    assert reconcile(member, 11, mk(t1=(1, 2)), _epochs(-1), None) is member
