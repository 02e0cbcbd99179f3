"""Kafka's TargetAssignmentBuilderTest as vectors: what the assignor is asked, and what changes.

Each case: topics foo and bar (6 partitions each; "zar" is subscribed but does not exist),
the current members with their target, this change (added/updated and removed members),
the assignment the (prepared) assignor answers, and the expected result: the new target
and the members whose target changed (Kafka writes one record for each).
"""

from __future__ import annotations

import pytest

from kafkasim.assignors.group_spec import HETEROGENEOUS, HOMOGENEOUS, MemberSubscription
from kafkasim.coordinator.consumer_group import ConsumerGroupMember
from kafkasim.coordinator.target_assignment import build_target_assignment
from tests.coordinator.consumer_group_support import PreparedAssignor, mk, tid, topic

FOO, BAR = topic("foo", 6), topic("bar", 6)
METADATA = {"foo": FOO, "bar": BAR}
ALL = ("foo", "bar", "zar")


def _run(current, updated=None, removed=(), prepared=None, subscription_type=HOMOGENEOUS):
    """current: member id -> (topics, target, instance id); updated: member id -> (topics, instance, rack)."""
    members = {m: ConsumerGroupMember(m, subscribed_topic_names=ts, instance_id=inst)
               for m, (ts, _, inst) in current.items()}
    target = {m: a for m, (_, a, _) in current.items()}
    static = {inst: m for m, (_, _, inst) in current.items() if inst}
    changes = {m: ConsumerGroupMember(m, subscribed_topic_names=ts, instance_id=inst, rack_id=rack)
               for m, (ts, inst, rack) in (updated or {}).items()}
    changes.update({m: None for m in removed})
    names = {m.member_id: frozenset(m.subscribed_topic_names) for m in list(members.values()) + [
        c for c in changes.values() if c is not None]}
    assignor = PreparedAssignor()
    assignor.prepare(prepared or {})
    result = build_target_assignment(assignor, members, names, METADATA, subscription_type, target,
                                     static_members=static, updated=changes)
    return result, assignor.specs[-1]


def test_empty():
    result, spec = _run({})
    assert result.target_assignment == {} and result.changed_members == () and spec.members == {}


def test_assignment_has_not_changed():
    current = {"member-1": (ALL, mk(foo=(1, 2, 3), bar=(1, 2, 3)), None),
               "member-2": (ALL, mk(foo=(4, 5, 6), bar=(4, 5, 6)), None)}
    result, spec = _run(current, prepared={m: a for m, (_, a, _) in current.items()})
    assert result.changed_members == ()
    assert result.target_assignment == {m: a for m, (_, a, _) in current.items()}
    # The assignor sees existing topics only (zar is not one), and each member's current target.
    assert spec.members["member-1"] == MemberSubscription(
        subscribed_topic_ids=frozenset({tid("foo"), tid("bar")}), assigned_partitions=mk(foo=(1, 2, 3), bar=(1, 2, 3)))


def test_assignment_swapped():
    current = {"member-1": (ALL, mk(foo=(1, 2, 3), bar=(1, 2, 3)), None),
               "member-2": (ALL, mk(foo=(4, 5, 6), bar=(4, 5, 6)), None)}
    result, _ = _run(current, prepared={"member-2": mk(foo=(1, 2, 3), bar=(1, 2, 3)),
                                        "member-1": mk(foo=(4, 5, 6), bar=(4, 5, 6))})
    assert result.changed_members == ("member-1", "member-2")
    assert result.target_assignment == {"member-1": mk(foo=(4, 5, 6), bar=(4, 5, 6)),
                                        "member-2": mk(foo=(1, 2, 3), bar=(1, 2, 3))}


def test_new_member():
    current = {"member-1": (ALL, mk(foo=(1, 2, 3), bar=(1, 2, 3)), None),
               "member-2": (ALL, mk(foo=(4, 5, 6), bar=(4, 5, 6)), None)}
    prepared = {"member-1": mk(foo=(1, 2), bar=(1, 2)), "member-2": mk(foo=(3, 4), bar=(3, 4)),
                "member-3": mk(foo=(5, 6), bar=(5, 6))}
    result, spec = _run(current, updated={"member-3": (ALL, None, None)}, prepared=prepared)
    assert result.changed_members == ("member-1", "member-2", "member-3")
    assert result.target_assignment == prepared
    assert spec.members["member-3"].assigned_partitions == {}


def test_update_member():
    current = {"member-1": (ALL, mk(foo=(1, 2, 3), bar=(1, 2)), None),
               "member-2": (ALL, mk(foo=(4, 5, 6), bar=(3, 4)), None),
               "member-3": (("bar", "zar"), mk(bar=(5, 6)), None)}
    prepared = {"member-1": mk(foo=(1, 2), bar=(1, 2)), "member-2": mk(foo=(3, 4), bar=(3, 4)),
                "member-3": mk(foo=(5, 6), bar=(5, 6))}
    result, spec = _run(current, updated={"member-3": (ALL, "instance-id-3", "rack-0")}, prepared=prepared,
                        subscription_type=HOMOGENEOUS)
    assert result.changed_members == ("member-1", "member-2", "member-3")
    assert result.target_assignment == prepared
    assert spec.members["member-3"] == MemberSubscription(
        subscribed_topic_ids=frozenset({tid("foo"), tid("bar")}), assigned_partitions=mk(bar=(5, 6)),
        rack_id="rack-0", instance_id="instance-id-3")


def test_partial_assignment_update():
    current = {"member-1": (ALL, mk(foo=(1, 2), bar=(1, 2)), None),
               "member-2": (ALL, mk(foo=(3, 4), bar=(3, 4)), None),
               "member-3": (("bar", "zar"), mk(foo=(5, 6), bar=(5, 6)), None)}
    prepared = {"member-1": mk(foo=(1, 2), bar=(1, 2)), "member-2": mk(foo=(3, 4, 5), bar=(3, 4, 5)),
                "member-3": mk(foo=(6,), bar=(6,))}
    result, spec = _run(current, prepared=prepared, subscription_type=HETEROGENEOUS)
    # Member 1 has no record because its assignment did not change.
    assert result.changed_members == ("member-2", "member-3")
    assert result.target_assignment == prepared
    assert spec.subscription_type == HETEROGENEOUS
    assert spec.members["member-3"].subscribed_topic_ids == frozenset({tid("bar")})


def test_delete_member():
    current = {"member-1": (ALL, mk(foo=(1, 2), bar=(1, 2)), None),
               "member-2": (ALL, mk(foo=(3, 4), bar=(3, 4)), None),
               "member-3": (ALL, mk(foo=(5, 6), bar=(5, 6)), None)}
    prepared = {"member-1": mk(foo=(1, 2, 3), bar=(1, 2, 3)), "member-2": mk(foo=(4, 5, 6), bar=(4, 5, 6))}
    result, spec = _run(current, removed=("member-3",), prepared=prepared)
    assert set(spec.members) == {"member-1", "member-2"}
    assert result.changed_members == ("member-1", "member-2")
    assert result.target_assignment == prepared


def test_replace_static_member():
    current = {"member-1": (ALL, mk(foo=(1, 2), bar=(1, 2)), "instance-member-1"),
               "member-2": (ALL, mk(foo=(3, 4), bar=(3, 4)), "instance-member-2"),
               "member-3": (ALL, mk(foo=(5, 6), bar=(5, 6)), "instance-member-3")}
    prepared = {"member-1": mk(foo=(1, 2), bar=(1, 2)), "member-2": mk(foo=(3, 4), bar=(3, 4)),
                "member-3-a": mk(foo=(5, 6), bar=(5, 6))}
    result, spec = _run(current, removed=("member-3",), updated={"member-3-a": (ALL, "instance-member-3", None)},
                        prepared=prepared)
    # The new member starts from the departed one's target: the assignor can keep it in place.
    assert spec.members["member-3-a"].assigned_partitions == mk(foo=(5, 6), bar=(5, 6))
    assert "member-3" not in spec.members
    assert result.changed_members == ("member-3-a",)
    assert result.target_assignment == prepared


@pytest.mark.parametrize("missing", ["member-2"])
def test_a_member_the_assignor_leaves_out_gets_an_empty_target(missing):
    current = {"member-1": (ALL, mk(foo=(1,)), None), "member-2": (ALL, mk(foo=(2,)), None)}
    result, _ = _run(current, prepared={"member-1": mk(foo=(1, 2))})
    assert result.target_assignment[missing] == {}
    assert result.changed_members == ("member-1", "member-2")
