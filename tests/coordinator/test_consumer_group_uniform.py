"""The KIP-848 coordinator with the real server-side assignors (kafkasim.assignors.server), as a
broker would run it: three members join one six-partition topic one after another, each
heartbeating until the group is stable. Kafka's ``uniform`` gives two partitions each and is
sticky (the first members keep partitions they had); ``range`` gives contiguous ranges."""

from __future__ import annotations

import pytest

from kafkasim.assignors.server import server_assignors
from kafkasim.clock import MockClock
from kafkasim.coordinator.consumer_heartbeat import ConsumerGroupCoordinator
from consumer_group_support import beat, join, tid, topic

GROUP = "g"


def settle(coord, epochs: dict, owned: dict, rounds: int = 10) -> None:
    """Every member heartbeats with what it owns and takes what it is given, until nothing moves."""
    for _ in range(rounds):
        moved = False
        for member in sorted(epochs):
            resp = coord.heartbeat(beat(GROUP, member, epochs[member], owned[member]))
            if resp.assignment is not None and dict(resp.assignment) != owned[member]:
                owned[member] = dict(resp.assignment)
                moved = True
            if resp.member_epoch != epochs[member]:
                epochs[member] = resp.member_epoch
                moved = True
        if not moved:
            return
    raise AssertionError("the group did not settle")


def partitions(assignment: dict) -> set[int]:
    return set(assignment.get(tid("orders"), ()))


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_three_members_split_six_partitions_without_sharing_one(name):
    coord = ConsumerGroupCoordinator(server_assignors(name), MockClock(0), topics=[topic("orders", 6)])
    epochs: dict = {}
    owned: dict = {}
    history = []
    for member in ("a", "b", "c"):
        resp = coord.heartbeat(join(GROUP, member, ("orders",)))
        epochs[member], owned[member] = resp.member_epoch, dict(resp.assignment or {})
        settle(coord, epochs, owned)
        history.append({m: partitions(owned[m]) for m in owned})
        mine = [partitions(owned[m]) for m in owned]
        assert set().union(*mine) == set(range(6)) and sum(map(len, mine)) == 6   # each owned once
    final = history[-1]
    assert sorted(map(len, final.values())) == [2, 2, 2]
    group = coord.group(GROUP)
    assert group.group_epoch == group.assignment_epoch == 3
    assert {m: group.member(m).member_epoch for m in "abc"} == {"a": 3, "b": 3, "c": 3}
    if name == "uniform":      # sticky: a member only gives partitions away when another joins
        assert final["a"] <= history[1]["a"] <= history[0]["a"]
        assert final["b"] <= history[1]["b"]
    else:                      # range: contiguous ranges in member order
        assert final == {"a": {0, 1}, "b": {2, 3}, "c": {4, 5}}
