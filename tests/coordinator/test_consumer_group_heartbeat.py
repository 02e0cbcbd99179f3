"""The consumer-group heartbeat (KIP-848), ported from Kafka's GroupMetadataManagerTest.

As Kafka's test does with its MockPartitionAssignor, each test prepares the target
assignment the assignor answers (PreparedAssignor): the coordinator's job under test is
the epochs, the reconciliation, the fencing and the timers, not the assignor's choice.
"""

from __future__ import annotations

import pytest

from kafkasim.assignors.group_spec import PartitionAssignorError
from kafkasim.clock import MockClock
from kafkasim.coordinator.consumer_group import ConsumerGroupMember, ConsumerGroupState, MemberState
from kafkasim.coordinator.consumer_heartbeat import SESSION_EXPIRED, ConsumerGroupCoordinator
from kafkasim.errors import (
    FencedInstanceIdError, FencedMemberEpochError, GroupIdNotFoundError, GroupMaxSizeReachedError,
    InvalidRegularExpressionError, InvalidRequestError, UnknownMemberIdError, UnknownServerError,
    StaleMemberEpochError, UnreleasedInstanceIdError, UnsupportedAssignorError, for_code,
)
from kafkasim.protocol.consumer_group import ConsumerGroupHeartbeatRequest as Req
from tests.coordinator.consumer_group_support import PreparedAssignor, beat, join, mk, topic

FOO, BAR = topic("foo", 6), topic("bar", 3)


def _coordinator(*assignors, **configs):
    clock = MockClock(1_000_000)
    assignors = assignors or (PreparedAssignor("range"),)
    return ConsumerGroupCoordinator(list(assignors), clock, configs=configs, topics=[FOO, BAR]), clock, assignors[0]


# -- request validation (testConsumerHeartbeatRequestValidation), in Kafka's order ------------

INVALID = [
    (Req(group_id="foo", member_id=""), InvalidRequestError, "MemberId can't be empty."),
    (Req(group_id="", member_id="m"), InvalidRequestError, "GroupId can't be empty."),
    (Req(group_id="   ", member_id="m"), InvalidRequestError, "GroupId can't be empty."),
    (Req(group_id="foo", member_id="m", member_epoch=0), InvalidRequestError,
     "RebalanceTimeoutMs must be provided in first request."),
    (Req(group_id="foo", member_id="m", member_epoch=0, rebalance_timeout_ms=5000), InvalidRequestError,
     "TopicPartitions must be empty when (re-)joining."),
    (Req(group_id="foo", member_id="m", member_epoch=0, rebalance_timeout_ms=5000, topic_partitions={}),
     InvalidRequestError, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (Req(group_id="foo", member_id="m", member_epoch=1, instance_id=""), InvalidRequestError,
     "InstanceId can't be empty."),
    (Req(group_id="foo", member_id="m", member_epoch=1, rack_id=""), InvalidRequestError, "RackId can't be empty."),
    (Req(group_id="foo", member_id="m", member_epoch=1, server_assignor="bar"), UnsupportedAssignorError,
     "ServerAssignor bar is not supported. Supported assignors: range."),
    (Req(group_id="foo", member_id="m", member_epoch=-2, rebalance_timeout_ms=5000,
         subscribed_topic_names=("foo", "bar"), topic_partitions={}), InvalidRequestError,
     "InstanceId can't be null."),
    (Req(group_id="foo", member_id="m", member_epoch=-3), InvalidRequestError, "MemberEpoch is invalid."),
]


@pytest.mark.parametrize("request_,error,message", INVALID, ids=[m for _, _, m in INVALID])
def test_invalid_requests_are_refused_with_kafkas_message(request_, error, message):
    coordinator, _, _ = _coordinator()
    with pytest.raises(error) as info:
        coordinator.heartbeat(request_)
    assert str(info.value) == message
    assert coordinator.groups() == []


def test_an_invalid_regex_is_refused_and_a_valid_one_joins():
    coordinator, _, _ = _coordinator()
    with pytest.raises(InvalidRegularExpressionError, match=r"^SubscribedTopicRegex `\[` is not a valid regular "
                                                            r"expression: .+\.$"):
        coordinator.heartbeat(join("foo", "m1", topics=None, regex="["))
    assert coordinator.heartbeat(join("foo", "m1", topics=None, regex=".*")).member_epoch == 1
    # Updating the subscription to topic names bumps the epoch again (the regex becomes null).
    assert coordinator.heartbeat(Req(group_id="foo", member_id="m1", member_epoch=1, rebalance_timeout_ms=5000,
                                     subscribed_topic_names=("foo",), subscribed_topic_regex="",
                                     topic_partitions={})).member_epoch == 2


def test_unknown_group_and_unknown_member():
    coordinator, _, _ = _coordinator()
    with pytest.raises(GroupIdNotFoundError, match="^Consumer group foo not found.$"):
        coordinator.heartbeat(beat("foo", "m1", 100))
    coordinator.heartbeat(join("foo", "m1"))
    with pytest.raises(UnknownMemberIdError, match="^Member m2 is not a member of group foo.$"):
        coordinator.heartbeat(beat("foo", "m2", 100))


# -- join, epochs, reconciliation ----------------------------------------------------------

def test_member_joins_empty_group():
    coordinator, _, assignor = _coordinator()
    assignor.prepare({"m1": mk(foo=(0, 1, 2, 3, 4, 5), bar=(0, 1, 2))})
    response = coordinator.heartbeat(join("foo", "m1", topics=("foo", "bar")))
    assert (response.member_id, response.member_epoch, response.heartbeat_interval_ms) == ("m1", 1, 5000)
    assert response.assignment == mk(foo=(0, 1, 2, 3, 4, 5), bar=(0, 1, 2))
    group = coordinator.group("foo")
    assert (group.group_epoch, group.assignment_epoch, group.state) == (1, 1, ConsumerGroupState.STABLE)
    assert group.members["m1"].state is MemberState.STABLE


def _two_stable_members():
    """m1 owns foo{0,1,2} bar{0,1}, m2 owns foo{3,4,5} bar{2}, both STABLE at epoch 2."""
    coordinator, clock, assignor = _coordinator()
    assignor.prepare({"m1": mk(foo=(0, 1, 2), bar=(0, 1)), "m2": mk(foo=(3, 4, 5), bar=(2,))})
    coordinator.heartbeat(join("foo", "m1", topics=("foo", "bar")))
    coordinator.heartbeat(join("foo", "m2", topics=("foo", "bar")))
    coordinator.heartbeat(beat("foo", "m1", 1))
    group = coordinator.group("foo")
    assert [(m.member_epoch, m.state) for m in group.members.values()] == [(2, MemberState.STABLE)] * 2
    return coordinator, clock, assignor


def test_reconciliation_process():
    # Kafka's testReconciliationProcess, from epoch 2 instead of 10.
    coordinator, _, assignor = _two_stable_members()
    group = coordinator.group("foo")
    assert group.state is ConsumerGroupState.STABLE
    assignor.prepare({"m1": mk(foo=(0, 1), bar=(0,)), "m2": mk(foo=(2, 3), bar=(2,)), "m3": mk(foo=(4, 5), bar=(1,))})

    # m3 joins: new target at epoch 3; all its partitions are still owned, so it gets nothing yet.
    r = coordinator.heartbeat(join("foo", "m3", topics=("foo", "bar")))
    assert (r.member_epoch, r.assignment) == (3, {})
    assert group.members["m3"].state is MemberState.UNRELEASED_PARTITIONS
    assert group.state is ConsumerGroupState.RECONCILING

    # m1 stays at epoch 2 and is asked to revoke foo-2 and bar-1.
    r = coordinator.heartbeat(beat("foo", "m1", 2))
    assert (r.member_epoch, r.assignment) == (2, mk(foo=(0, 1), bar=(0,)))
    assert group.members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    assert group.members["m1"].partitions_pending_revocation == mk(foo=(2,), bar=(1,))

    # m2 stays at epoch 2 and is asked to revoke foo-4 and foo-5.
    r = coordinator.heartbeat(beat("foo", "m2", 2))
    assert (r.member_epoch, r.assignment) == (2, mk(foo=(3,), bar=(2,)))
    assert group.members["m2"].partitions_pending_revocation == mk(foo=(4, 5))

    # m3 still waits: no assignment in the response.
    r = coordinator.heartbeat(beat("foo", "m3", 3))
    assert (r.member_epoch, r.assignment) == (3, None)

    # m1 acknowledges the revocation (its heartbeat lists what it still owns): epoch 3, STABLE.
    r = coordinator.heartbeat(beat("foo", "m1", 2, owned=mk(foo=(0, 1), bar=(0,))))
    assert (r.member_epoch, r.assignment) == (3, None)
    assert group.members["m1"].state is MemberState.STABLE

    # m2 heartbeats without acknowledging: nothing changes.
    r = coordinator.heartbeat(beat("foo", "m2", 2))
    assert (r.member_epoch, r.assignment) == (2, None)
    assert group.members["m2"].state is MemberState.UNREVOKED_PARTITIONS

    # m3 gets bar-1, released by m1, and keeps waiting for foo-4 and foo-5.
    r = coordinator.heartbeat(beat("foo", "m3", 3))
    assert (r.member_epoch, r.assignment) == (3, mk(bar=(1,)))
    assert group.members["m3"].state is MemberState.UNRELEASED_PARTITIONS
    r = coordinator.heartbeat(beat("foo", "m3", 3))
    assert r.assignment is None

    # m2 acknowledges: epoch 3 with foo-2 (released by m1) added.
    r = coordinator.heartbeat(beat("foo", "m2", 2, owned=mk(foo=(3,), bar=(2,))))
    assert (r.member_epoch, r.assignment) == (3, mk(foo=(2, 3), bar=(2,)))
    assert group.state is ConsumerGroupState.RECONCILING

    # m3 gets everything: the group is STABLE.
    r = coordinator.heartbeat(beat("foo", "m3", 3, owned=mk(bar=(1,))))
    assert (r.member_epoch, r.assignment) == (3, mk(foo=(4, 5), bar=(1,)))
    assert group.members["m3"].state is MemberState.STABLE
    assert group.state is ConsumerGroupState.STABLE


def test_member_epoch_validation():
    # Kafka's testConsumerGroupMemberEpochValidation: a member at epoch 100 (previous 99).
    coordinator, _, assignor = _coordinator()
    assignor.prepare({"m1": mk(foo=(1, 2, 3))})
    coordinator.heartbeat(join("foo", "m1"))
    group = coordinator.group("foo")
    member = group.members["m1"]
    group.update_member(member.replace(member_epoch=100, previous_member_epoch=99))
    group.set_group_epoch(100)
    group.set_target_assignment(100, {"m1": mk(foo=(1, 2, 3))})

    with pytest.raises(FencedMemberEpochError, match=r"greater member epoch \(200\) than the one known by the group "
                                                     r"coordinator \(100\)"):
        coordinator.heartbeat(beat("foo", "m1", 200))
    with pytest.raises(FencedMemberEpochError, match=r"smaller member epoch \(50\)"):
        coordinator.heartbeat(beat("foo", "m1", 50))
    # The previous epoch passes only with owned partitions all still assigned (lost response).
    with pytest.raises(FencedMemberEpochError, match=r"smaller member epoch \(99\)"):
        coordinator.heartbeat(beat("foo", "m1", 99, owned=mk(foo=(1, 2, 3, 4))))
    with pytest.raises(FencedMemberEpochError, match=r"smaller member epoch \(99\)"):
        coordinator.heartbeat(beat("foo", "m1", 99))
    assert coordinator.heartbeat(beat("foo", "m1", 99, owned=mk(foo=(1, 2)))).member_epoch == 100


def test_full_request_gets_the_assignment_even_when_unchanged():
    coordinator, _, assignor = _coordinator()
    assignor.prepare({"m1": mk(foo=(0, 1))})
    coordinator.heartbeat(join("foo", "m1"))
    assert coordinator.heartbeat(beat("foo", "m1", 1)).assignment is None
    full = Req(group_id="foo", member_id="m1", member_epoch=1, rebalance_timeout_ms=5000,
               subscribed_topic_names=("foo",), topic_partitions=mk(foo=(0, 1)))
    assert coordinator.heartbeat(full).assignment == mk(foo=(0, 1))


# -- leave, static members -----------------------------------------------------------------

def test_leaving_member_frees_its_partitions_and_bumps_the_group_epoch():
    coordinator, _, assignor = _two_stable_members()
    r = coordinator.heartbeat(beat("foo", "m2", -1))
    assert (r.member_id, r.member_epoch, r.assignment) == ("m2", -1, None)
    group = coordinator.group("foo")
    assert (group.group_epoch, group.state) == (3, ConsumerGroupState.ASSIGNING)
    assert "m2" not in group.members and "m2" not in group.target_assignment
    assignor.prepare({"m1": mk(foo=(0, 1, 2, 3, 4, 5), bar=(0, 1, 2))})
    r = coordinator.heartbeat(beat("foo", "m1", 2))
    assert (r.member_epoch, r.assignment) == (3, mk(foo=(0, 1, 2, 3, 4, 5), bar=(0, 1, 2)))
    assert group.state is ConsumerGroupState.STABLE


def _static_group():
    coordinator, clock, assignor = _coordinator()
    assignor.prepare({"m1": mk(foo=(0, 1, 2)), "m2": mk(foo=(3, 4, 5)), "m2b": mk(foo=(3, 4, 5))})
    coordinator.heartbeat(join("foo", "m1", instance_id="i1"))
    coordinator.heartbeat(join("foo", "m2", instance_id="i2"))
    coordinator.heartbeat(beat("foo", "m1", 1, instance_id="i1"))
    return coordinator, clock, assignor


def test_static_member_gets_back_its_assignment_upon_rejoin():
    coordinator, _, assignor = _static_group()
    group = coordinator.group("foo")
    epoch = group.group_epoch
    r = coordinator.heartbeat(beat("foo", "m2", -2, instance_id="i2"))
    assert r.member_epoch == -2
    # Its partitions stay reserved for it: nobody else may take them while it is away.
    assert group.members["m2"].assigned_partitions == mk(foo=(3, 4, 5))
    assert group.current_partition_epoch(topic("foo", 6).topic_id, 3) == -2
    # A new member id with the same instance id takes its place, with no epoch bump.
    r = coordinator.heartbeat(join("foo", "m2b", instance_id="i2"))
    assert (r.member_id, r.member_epoch, r.assignment) == ("m2b", epoch, mk(foo=(3, 4, 5)))
    assert "m2" not in group.members and group.static_members["i2"] == "m2b"
    assert group.group_epoch == epoch and group.state is ConsumerGroupState.STABLE
    assert not any(spec.members.get("m2b") for spec in assignor.specs)


def test_static_member_rejoins_with_new_subscribed_topics():
    # Kafka's testStaticMemberRejoinsWithNewSubscribedTopics: a rebalance, and the assignor sees
    # the new member id starting from the departed one's target (the old id is gone).
    coordinator, _, assignor = _static_group()
    group = coordinator.group("foo")
    epoch = group.group_epoch
    coordinator.heartbeat(beat("foo", "m2", -2, instance_id="i2"))
    assignor.prepare({"m1": mk(foo=(0, 1, 2)), "m2b": mk(foo=(3, 4, 5), bar=(0, 1, 2))})
    r = coordinator.heartbeat(join("foo", "m2b", topics=("foo", "bar"), instance_id="i2"))
    assert (r.member_epoch, r.assignment) == (epoch + 1, mk(foo=(3, 4, 5), bar=(0, 1, 2)))
    spec = assignor.specs[-1]
    assert set(spec.members) == {"m1", "m2b"}
    assert spec.members["m2b"].assigned_partitions == mk(foo=(3, 4, 5))
    assert spec.members["m2b"].instance_id == "i2"
    assert set(group.members) == {"m1", "m2b"} and set(group.target_assignment) == {"m1", "m2b"}


def test_static_member_cannot_join_while_the_instance_id_is_held():
    coordinator, _, _ = _static_group()
    with pytest.raises(UnreleasedInstanceIdError, match="^Static member m2b with instance id i2 cannot join the group "
                                                        "because the instance id is owned by m2 member.$"):
        coordinator.heartbeat(join("foo", "m2b", instance_id="i2"))
    with pytest.raises(FencedInstanceIdError, match="^Static member m9 with instance id i2 was fenced by member m2.$"):
        coordinator.heartbeat(beat("foo", "m9", 2, instance_id="i2"))
    with pytest.raises(UnknownMemberIdError, match="^Instance id i9 is unknown.$"):
        coordinator.heartbeat(beat("foo", "m9", 2, instance_id="i9"))


def test_static_leave_checks_the_instance_id():
    # Kafka's testShouldThrowUnknownMemberIdExceptionWhenUnknownStaticMemberLeaves and
    # testShouldThrowFencedInstanceIdExceptionWhenStaticMemberWithDifferentMemberIdLeaves.
    coordinator, _, _ = _static_group()
    with pytest.raises(UnknownMemberIdError, match="^Instance id unknown-i1 is unknown.$"):
        coordinator.heartbeat(beat("foo", "m1", -2, instance_id="unknown-i1"))
    with pytest.raises(FencedInstanceIdError, match="^Static member unknown-m1 with instance id i1 was fenced by "
                                                    "member m1.$"):
        coordinator.heartbeat(beat("foo", "unknown-m1", -2, instance_id="i1"))
    assert coordinator.group("foo").members["m1"].member_epoch == 2


def test_static_member_epoch_validation():
    # Kafka's testConsumerGroupMemberEpochValidationForStaticMember: epochs are checked as for
    # a dynamic member, and the previous epoch with a subset of its partitions is accepted.
    coordinator, _, _ = _static_group()
    with pytest.raises(FencedMemberEpochError, match=r"greater member epoch \(200\)"):
        coordinator.heartbeat(beat("foo", "m1", 200, instance_id="i1"))
    with pytest.raises(FencedMemberEpochError, match=r"smaller member epoch \(1\)"):
        coordinator.heartbeat(beat("foo", "m1", 1, instance_id="i1"))
    assert coordinator.heartbeat(beat("foo", "m1", 1, owned=mk(foo=(0, 1)), instance_id="i1")).member_epoch == 2


def test_static_member_leaving_for_good_with_minus_one_frees_its_partitions():
    coordinator, _, _ = _static_group()
    coordinator.heartbeat(beat("foo", "m2", -1, instance_id="i2"))
    group = coordinator.group("foo")
    assert "m2" not in group.members and "i2" not in group.static_members
    assert group.current_partition_epoch(topic("foo", 6).topic_id, 3) == -1


# -- timers ----------------------------------------------------------------------------------

def test_session_timeout_fences_a_silent_member():
    coordinator, clock, _ = _two_stable_members()
    clock.advance(44_999)
    coordinator.heartbeat(beat("foo", "m1", 2))
    assert coordinator.tick() == []
    clock.advance(1)
    fenced = coordinator.tick()
    assert [(f.member_id, f.reason) for f in fenced] == [("m2", SESSION_EXPIRED)]
    group = coordinator.group("foo")
    assert set(group.members) == {"m1"} and group.group_epoch == 3
    clock.advance(44_998)                                   # m1's last heartbeat was 44 999 ms ago
    assert coordinator.tick() == []
    clock.advance(1)
    assert [f.member_id for f in coordinator.tick()] == ["m1"]
    assert group.state is ConsumerGroupState.EMPTY


def test_session_timeout_removes_a_static_member_that_left_for_now():
    coordinator, clock, _ = _static_group()
    coordinator.heartbeat(beat("foo", "m2", -2, instance_id="i2"))   # does not extend its session
    clock.advance(10_000)
    coordinator.heartbeat(beat("foo", "m1", 2, instance_id="i1"))
    clock.advance(35_000)
    assert [f.member_id for f in coordinator.tick()] == ["m2"]
    group = coordinator.group("foo")
    assert "i2" not in group.static_members
    assert group.current_partition_epoch(topic("foo", 6).topic_id, 3) == -1


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    coordinator, clock, assignor = _two_stable_members()
    assignor.prepare({"m1": mk(foo=(0, 1), bar=(0,)), "m2": mk(foo=(2, 3), bar=(2,)), "m3": mk(foo=(4, 5), bar=(1,))})
    coordinator.heartbeat(join("foo", "m3", topics=("foo", "bar"), rebalance_timeout_ms=30_000))
    coordinator.heartbeat(beat("foo", "m1", 2))            # asked to revoke; rebalance timeout 5000 ms
    clock.advance(4_999)
    coordinator.heartbeat(beat("foo", "m1", 2))            # still owns them: the timer keeps running
    coordinator.heartbeat(beat("foo", "m2", 2))
    coordinator.heartbeat(beat("foo", "m3", 3))
    assert coordinator.tick() == []
    clock.advance(1)
    fenced = coordinator.tick()
    assert [(f.member_id, f.member_epoch, f.reason) for f in fenced] == [
        ("m1", 2, "it failed to transition from epoch 2 within 5000ms.")]
    assert "m1" not in coordinator.group("foo").members


def test_acknowledging_in_time_cancels_the_rebalance_timeout():
    coordinator, clock, assignor = _two_stable_members()
    assignor.prepare({"m1": mk(foo=(0, 1), bar=(0,)), "m2": mk(foo=(2, 3, 4, 5), bar=(1, 2))})
    coordinator.heartbeat(beat("foo", "m2", 2, topics=("foo", "bar", "baz")))  # a new subscription: epoch 3
    coordinator.heartbeat(beat("foo", "m1", 2))
    clock.advance(4_000)
    coordinator.heartbeat(beat("foo", "m1", 2, owned=mk(foo=(0, 1), bar=(0,))))
    coordinator.heartbeat(beat("foo", "m2", 3))
    clock.advance(2_000)
    assert coordinator.tick() == []


# -- limits and assignors ------------------------------------------------------------------

def test_group_max_size():
    coordinator, _, assignor = _coordinator(PreparedAssignor("range"), **{"group.consumer.max.size": 1})
    coordinator.heartbeat(join("foo", "m1"))
    with pytest.raises(GroupMaxSizeReachedError,
                       match="^The consumer group has reached its maximum capacity of 1 members.$"):
        coordinator.heartbeat(join("foo", "m2"))
    assert coordinator.heartbeat(beat("foo", "m1", 1)).member_epoch == 1


def test_a_failing_assignor_is_unknown_server_error_and_changes_nothing():
    class Failing:
        name = "range"

        def assign(self, group_spec, topics):
            raise PartitionAssignorError("no way")

    coordinator, _, _ = _coordinator(Failing())
    with pytest.raises(UnknownServerError, match="^Failed to compute a new target assignment for epoch 1: no way$"):
        coordinator.heartbeat(join("foo", "m1"))
    assert coordinator.groups() == []


def test_the_assignor_most_members_ask_for_is_used():
    uniform, range_ = PreparedAssignor("uniform"), PreparedAssignor("range")
    coordinator, _, _ = _coordinator(uniform, range_)
    coordinator.heartbeat(join("foo", "m1"))
    assert (len(uniform.specs), len(range_.specs)) == (1, 0)           # the first one is the default
    coordinator.heartbeat(join("foo", "m2", assignor="range"))
    assert (len(uniform.specs), len(range_.specs)) == (1, 1)


def test_a_regex_subscription_follows_topic_creation():
    coordinator, _, assignor = _coordinator()
    assignor.prepare({"m1": mk(foo=(0, 1, 2, 3, 4, 5))})
    r = coordinator.heartbeat(join("foo", "m1", topics=None, regex="fo.*"))
    assert (r.member_epoch, r.assignment) == (1, mk(foo=(0, 1, 2, 3, 4, 5)))
    assert {t for t in assignor.specs[-1].members["m1"].subscribed_topic_ids} == {topic("foo", 6).topic_id}
    coordinator.update_topics([FOO, BAR, topic("fox", 2)])
    assignor.prepare({"m1": mk(foo=(0, 1, 2, 3, 4, 5), fox=(0, 1))})
    r = coordinator.heartbeat(beat("foo", "m1", 1))
    assert (r.member_epoch, r.assignment) == (2, mk(foo=(0, 1, 2, 3, 4, 5), fox=(0, 1)))
    # A full match, as Kafka's matches(): "xfoo" does not match "fo.*".
    coordinator.update_topics([FOO, BAR, topic("fox", 2), topic("xfoo", 1)])
    coordinator.heartbeat(beat("foo", "m1", 2))
    assert coordinator.group("foo").group_epoch == 2


def test_a_member_joining_without_a_member_record_starts_at_epoch_zero():
    coordinator, _, _ = _coordinator()
    coordinator.heartbeat(join("foo", "m1"))
    assert coordinator.group("foo").members["m1"] == ConsumerGroupMember(
        "m1", member_epoch=1, previous_member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=("foo",))


@pytest.mark.parametrize("code,cls,retriable", [
    (110, FencedMemberEpochError, False), (111, UnreleasedInstanceIdError, False),
    (112, UnsupportedAssignorError, False), (113, StaleMemberEpochError, False),
    (128, InvalidRegularExpressionError, False)])
def test_the_consumer_protocols_error_codes_are_kafkas(code, cls, retriable):
    assert for_code(code) is cls and cls.errno == code and cls.retriable is retriable


def test_a_member_in_an_unknown_state_is_fenced_until_it_owns_nothing_and_the_refusal_changes_nothing():
    coordinator, _, assignor = _coordinator()
    assignor.prepare({"m1": mk(foo=(0, 1))})
    coordinator.heartbeat(join("foo", "m1"))
    group = coordinator.group("foo")
    group.update_member(group.members["m1"].replace(state=MemberState.UNKNOWN))
    group.set_group_epoch(2)                      # a new target is due
    before = (group.members["m1"], group.group_epoch, group.assignment_epoch, dict(group.target_assignment))
    with pytest.raises(FencedMemberEpochError, match="unknown state"):
        coordinator.heartbeat(beat("foo", "m1", 1, owned=mk(foo=(0,))))
    assert (group.members["m1"], group.group_epoch, group.assignment_epoch, dict(group.target_assignment)) == before
    r = coordinator.heartbeat(beat("foo", "m1", 1, owned={}))
    assert (r.member_epoch, r.assignment) == (2, None)             # same partitions: not sent again
    assert group.members["m1"].state is MemberState.STABLE and group.state is ConsumerGroupState.STABLE


def test_a_failing_assignor_after_a_fence_names_the_epoch_being_assigned():
    class FailOnSecondCall:
        name = "range"
        calls = 0

        def assign(self, group_spec, topics):
            FailOnSecondCall.calls += 1
            if FailOnSecondCall.calls > 2:
                raise PartitionAssignorError("no way")
            return {m: {} for m in group_spec.members}

    coordinator, _, _ = _coordinator(FailOnSecondCall())
    coordinator.heartbeat(join("foo", "m1"))
    coordinator.heartbeat(join("foo", "m2"))
    coordinator.heartbeat(beat("foo", "m2", -1))                # group epoch 3, target still at 2
    with pytest.raises(UnknownServerError, match="^Failed to compute a new target assignment for epoch 3: no way$"):
        coordinator.heartbeat(beat("foo", "m1", 1))
    group = coordinator.group("foo")
    assert (group.group_epoch, group.assignment_epoch, group.members["m1"].member_epoch) == (3, 2, 1)


def test_a_static_takeover_keeps_the_departed_members_fields_it_does_not_send():
    # Kafka copies the departed member, then applies the request's non-null fields.
    coordinator, _, _ = _coordinator()
    coordinator.heartbeat(join("foo", "m1", topics=None, regex="fo.*", instance_id="i1", rack_id="r1"))
    coordinator.heartbeat(beat("foo", "m1", -2, instance_id="i1"))
    coordinator.heartbeat(join("foo", "m2", topics=("bar",), instance_id="i1"))
    member = coordinator.group("foo").members["m2"]
    assert (member.subscribed_topic_names, member.subscribed_topic_regex, member.rack_id) == (("bar",), "fo.*", "r1")
