"""The consumer group's data (KIP-848): derived states and the one-owner rule."""

from __future__ import annotations

import pytest

from kafkasim.coordinator.consumer_group import (
    ConsumerGroup, ConsumerGroupMember, ConsumerGroupState, MemberState,
)
from kafkasim.errors import IllegalStateError, UnknownMemberIdError
from tests.coordinator.consumer_group_support import mk, tid


def test_group_states():
    # Kafka's testConsumerGroupStates.
    group = ConsumerGroup("foo")
    assert group.state is ConsumerGroupState.EMPTY
    group.update_member(ConsumerGroupMember("m1", state=MemberState.STABLE, subscribed_topic_names=("foo",)))
    group.set_group_epoch(11)
    assert group.state is ConsumerGroupState.ASSIGNING
    group.set_target_assignment(11, {"m1": mk(foo=(1, 2, 3))})
    assert group.state is ConsumerGroupState.RECONCILING
    group.update_member(group.members["m1"].replace(state=MemberState.UNREVOKED_PARTITIONS, member_epoch=11,
                                                    assigned_partitions=mk(foo=(1, 2)),
                                                    partitions_pending_revocation=mk(foo=(4,))))
    assert group.state is ConsumerGroupState.RECONCILING
    group.update_member(group.members["m1"].replace(state=MemberState.STABLE, assigned_partitions=mk(foo=(1, 2, 3)),
                                                    partitions_pending_revocation={}))
    assert group.state is ConsumerGroupState.STABLE
    group.remove_member("m1")
    assert group.state is ConsumerGroupState.EMPTY


def test_a_partition_cannot_have_two_owners():
    group = ConsumerGroup("foo")
    group.update_member(ConsumerGroupMember("m1", member_epoch=3, partitions_pending_revocation=mk(foo=(1,))))
    assert group.current_partition_epoch(tid("foo"), 1) == 3
    with pytest.raises(IllegalStateError, match=r"-1 to 4 because the partition is still owned at epoch 3"):
        group.update_member(ConsumerGroupMember("m2", member_epoch=4, assigned_partitions=mk(foo=(0, 1, 2))))
    assert "m2" not in group.members
    assert group.current_partition_epoch(tid("foo"), 0) == -1       # a refused change changes nothing
    group.update_member(group.members["m1"].replace(partitions_pending_revocation={}))
    group.update_member(ConsumerGroupMember("m2", member_epoch=4, assigned_partitions=mk(foo=(1,))))
    assert group.owners() == {(tid("foo"), 1): "m2"}


def test_unknown_member_message():
    with pytest.raises(UnknownMemberIdError, match="^Member m9 is not a member of group foo.$"):
        ConsumerGroup("foo").member("m9")
