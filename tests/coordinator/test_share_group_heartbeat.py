"""The share group coordinator (KIP-932) on its own: epochs, the target assignment, fencing,
on the injected clock."""

from __future__ import annotations

import uuid

import pytest

from kafkasim.clock import MockClock
from kafkasim.coordinator.share_group import ShareGroupCoordinator
from kafkasim.coordinator.share_group_config import ShareGroupConfig
from kafkasim.errors import FencedMemberEpochError, GroupIdNotFoundError, InvalidRequestError, UnknownMemberIdError

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


@pytest.fixture
def coord():
    return ShareGroupCoordinator(MockClock(0), ShareGroupConfig(), {"a": (T1, 2), "b": (T2, 1)})


def test_join_assigns_and_later_answers_carry_no_assignment(coord):
    r = coord.heartbeat("g", "A", 0, subscribed_topic_names=["a"])
    assert (r.member_epoch, r.assignment) == (1, {"a": [0, 1]})
    assert coord.heartbeat("g", "A", 1).assignment is None
    # a second member: the group epoch moves, both share the partitions (hash + round robin)
    r2 = coord.heartbeat("g", "B", 0, subscribed_topic_names=["a"])
    assert r2.member_epoch == 2 and r2.assignment == {"a": [0]}       # "B" hashes to 66 % 2 = 0
    r1 = coord.heartbeat("g", "A", 1)
    # balance before stickiness: ceil(2 / 2) = 1 partition each, A keeps its hashed one (65 % 2)
    assert (r1.member_epoch, r1.assignment) == (2, {"a": [1]})


def test_subscription_and_partition_count_changes_bump_the_group_epoch(coord):
    coord.heartbeat("g", "A", 0, subscribed_topic_names=["a"])
    r = coord.heartbeat("g", "A", 1, subscribed_topic_names=["a", "b"])
    assert (r.member_epoch, r.assignment) == (2, {"a": [0, 1], "b": [0]})
    assert coord.refresh_topics({"a": (T1, 3), "b": (T2, 1)}) == ["g"]
    r = coord.heartbeat("g", "A", 2)
    assert (r.member_epoch, r.assignment) == (3, {"a": [0, 1, 2], "b": [0]})
    assert coord.refresh_topics({"a": (T1, 3), "b": (T2, 1), "c": (uuid.UUID(int=3), 1)}) == []


def test_epoch_checks(coord):
    coord.heartbeat("g", "A", 0, subscribed_topic_names=["a"])
    coord.heartbeat("g", "B", 0, subscribed_topic_names=["a"])
    assert coord.heartbeat("g", "A", 1).member_epoch == 2
    # the previous epoch is accepted (the answer that moved it may have been lost) and answered again
    r = coord.heartbeat("g", "A", 1)
    assert (r.member_epoch, r.assignment) == (2, {"a": [1]})
    coord.heartbeat("g", "C", 0, subscribed_topic_names=["a"])
    assert coord.heartbeat("g", "A", 2).member_epoch == 3
    with pytest.raises(FencedMemberEpochError, match=r"smaller member epoch \(1\)"):
        coord.heartbeat("g", "A", 1)
    with pytest.raises(FencedMemberEpochError, match="greater member epoch"):
        coord.heartbeat("g", "A", 9)
    with pytest.raises(UnknownMemberIdError, match="Member Z is not a member of group g."):
        coord.heartbeat("g", "Z", 1)
    with pytest.raises(UnknownMemberIdError):
        coord.heartbeat("g", "Z", -1)
    with pytest.raises(GroupIdNotFoundError, match="Share group h not found."):
        coord.heartbeat("h", "A", 1)
    with pytest.raises(GroupIdNotFoundError, match="Group h not found."):
        coord.heartbeat("h", "A", -1)
    with pytest.raises(InvalidRequestError, match="MemberEpoch is invalid."):
        coord.heartbeat("g", "A", -2)
    with pytest.raises(InvalidRequestError, match="RackId can't be empty."):
        coord.heartbeat("g", "A", 3, rack_id="")


def test_a_rejoin_gets_its_assignment_again(coord):
    coord.heartbeat("g", "A", 0, subscribed_topic_names=["a"])
    r = coord.heartbeat("g", "A", 0, subscribed_topic_names=["a"])
    assert (r.member_epoch, r.assignment) == (1, {"a": [0, 1]})


def test_silent_members_are_fenced_on_the_clock(coord):
    coord.heartbeat("g", "A", 0, subscribed_topic_names=["a"])
    coord.clock.advance(44_999)
    coord.heartbeat("g", "B", 0, subscribed_topic_names=["a"])
    assert coord.tick() == []
    coord.clock.advance(1)
    assert coord.tick() == [("g", "A")]
    g = coord.group("g")
    assert list(g.members) == ["B"] and g.group_epoch == 3 and g.target == {"B": {"a": frozenset({0, 1})}}
