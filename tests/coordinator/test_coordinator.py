"""The group coordinator state machine: join → sync → stable, fencing, timeouts, persistence.

Driven directly (no broker, no consumer) with a MockClock; persistence tests use real
storage.log.Log partitions under tmp_path.
"""

from __future__ import annotations

import os

import pytest

from kafkasim.coordinator.coordinator import (
    COMPLETE, NO_GENERATION, PENDING, GroupCoordinator,
)
from kafkasim.protocol.offsets import OFFSETS_TOPIC_PARTITIONS, partition_for_group
from kafkasim.coordinator.offsets_store import OffsetsStore
from kafkasim.clock import MockClock
from kafkasim.config import LogConfig
from kafkasim.errors import (
    FencedInstanceIdError, GroupIdNotFoundError, IllegalGenerationError,
    InconsistentGroupProtocolError, InvalidGroupIdError, InvalidRequestError, InvalidSessionTimeoutError,
    NonEmptyGroupError, RebalanceInProgressError, UnknownMemberIdError,
)
from kafkasim.types import OffsetAndMetadata, TopicPartition
from kafkasim.storage.log import Log

META = {"topics": ["t"]}
PROTOS = [("range", META)]
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def join(gc, member_id="", group="g", protos=PROTOS, **kw):
    kw.setdefault("session_timeout_ms", 10_000)
    kw.setdefault("rebalance_timeout_ms", 20_000)
    return gc.join_group(group, member_id, protocols=protos, **kw)


def stable_pair(gc, clock):
    """Two members a (leader) and b in a Stable generation; returns (a, b) join results."""
    a = join(gc, client_id="a")
    b = join(gc, client_id="b")
    assert a.status == b.status == PENDING
    clock.advance(3_000)                       # group.initial.rebalance.delay.ms
    a = join(gc, a.member_id)
    b = join(gc, b.member_id)
    assert a.status == b.status == COMPLETE and a.is_leader and not b.is_leader
    gc.sync_group("g", a.member_id, a.generation_id, {a.member_id: [T0], b.member_id: [T1]})
    assert gc.sync_group("g", b.member_id, b.generation_id).assignment == (T1,)
    return a, b


@pytest.fixture
def clock():
    return MockClock(1_000_000)


@pytest.fixture
def gc(clock):
    return GroupCoordinator(clock=clock)


def test_join_sync_stable_and_the_leader_gets_the_subscriptions(gc, clock):
    a = join(gc, client_id="a")
    assert a.status == PENDING and a.member_id.startswith("a-")
    assert gc.describe_group("g")["state"] == "PreparingRebalance"
    clock.advance(3_000)
    a = join(gc, a.member_id)
    assert a.status == COMPLETE and a.generation_id == 1 and a.is_leader
    assert a.members == ((a.member_id, None, META),)
    assert gc.describe_group("g")["state"] == "CompletingRebalance"
    res = gc.sync_group("g", a.member_id, 1, {a.member_id: [T0, T1]})
    assert res.status == COMPLETE and res.assignment == (T0, T1)
    d = gc.describe_group("g")
    assert d["state"] == "Stable" and d["generation"] == 1 and d["leader"] == a.member_id


def test_follower_sync_is_pending_until_the_leader_syncs(gc, clock):
    a = join(gc, client_id="a")
    b = join(gc, client_id="b")
    clock.advance(3_000)
    a, b = join(gc, a.member_id), join(gc, b.member_id)
    assert gc.sync_group("g", b.member_id, b.generation_id).status == PENDING
    gc.sync_group("g", a.member_id, a.generation_id, {a.member_id: [T0], b.member_id: [T1]})
    assert gc.sync_group("g", b.member_id, b.generation_id).assignment == (T1,)


def test_generation_increments_on_every_rebalance(gc, clock):
    a, b = stable_pair(gc, clock)
    assert a.generation_id == 1
    c = join(gc, client_id="c")                           # a join triggers a rebalance
    assert gc.describe_group("g")["state"] == "PreparingRebalance"
    with pytest.raises(RebalanceInProgressError):
        gc.heartbeat("g", b.member_id, 1)
    assert join(gc, a.member_id).status == PENDING        # waits for b
    b2 = join(gc, b.member_id)                            # everyone is back: complete
    a2, c2 = join(gc, a.member_id), join(gc, c.member_id)  # re-polls get the result
    assert {r.generation_id for r in (a2, b2, c2)} == {2}
    assert a2.leader_id == a.member_id                    # the leader stays leader
    gc.leave_group("g", c.member_id)                      # a leave triggers another
    assert gc.describe_group("g")["state"] == "PreparingRebalance"
    assert join(gc, a.member_id).status == PENDING        # b has not rejoined yet
    assert join(gc, b.member_id).generation_id == 3


def test_fencing_errors(gc, clock):
    a, b = stable_pair(gc, clock)
    with pytest.raises(IllegalGenerationError, match="generation 0"):
        gc.heartbeat("g", a.member_id, 0)
    with pytest.raises(IllegalGenerationError):
        gc.offset_commit("g", a.member_id, 7, {T0: 5})
    with pytest.raises(IllegalGenerationError):
        gc.sync_group("g", a.member_id, 9)
    with pytest.raises(UnknownMemberIdError, match="nobody"):
        gc.heartbeat("g", "nobody", 1)
    with pytest.raises(UnknownMemberIdError):
        gc.offset_commit("g", "nobody", 1, {T0: 5})
    join(gc, client_id="c")                                # PreparingRebalance now
    with pytest.raises(RebalanceInProgressError):
        gc.heartbeat("g", a.member_id, 1)
    with pytest.raises(RebalanceInProgressError):
        gc.sync_group("g", a.member_id, 1)
    gc.offset_commit("g", a.member_id, 1, {T0: 5})        # as Kafka: allowed while preparing


def test_commit_during_completing_rebalance_is_rejected(gc, clock):
    a = join(gc, client_id="a")
    clock.advance(3_000)
    a = join(gc, a.member_id)
    with pytest.raises(RebalanceInProgressError):
        gc.offset_commit("g", a.member_id, a.generation_id, {T0: 1})


def test_session_timeout_evicts_and_rebalances(gc, clock):
    a, b = stable_pair(gc, clock)
    clock.advance(9_000)
    gc.heartbeat("g", a.member_id, 1)
    clock.advance(2_000)                                   # b silent for 11 s > 10 s
    with pytest.raises(RebalanceInProgressError):
        gc.heartbeat("g", a.member_id, 1)
    a2 = join(gc, a.member_id)
    assert a2.status == COMPLETE and a2.generation_id == 2
    assert [m[0] for m in a2.members] == [a.member_id]
    with pytest.raises(UnknownMemberIdError):              # the zombie is out
        gc.offset_commit("g", b.member_id, 1, {T1: 3})


def test_rebalance_timeout_removes_members_that_do_not_rejoin(gc, clock):
    a, b = stable_pair(gc, clock)
    join(gc, a.member_id)                                  # leader rejoins: rebalance
    for _ in range(4):                                     # b heartbeats? no: b is gone
        clock.advance(5_000)
        res = join(gc, a.member_id)
    assert res.status == COMPLETE and res.generation_id == 2
    assert [m[0] for m in res.members] == [a.member_id]


def test_leader_that_never_syncs_is_removed_after_the_rebalance_timeout(gc, clock):
    a = join(gc, client_id="a")
    b = join(gc, client_id="b")
    clock.advance(3_000)
    a, b = join(gc, a.member_id), join(gc, b.member_id)
    assert gc.sync_group("g", b.member_id, 1).status == PENDING
    clock.advance(20_000)
    with pytest.raises(RebalanceInProgressError):
        gc.sync_group("g", b.member_id, 1)
    b2 = join(gc, b.member_id)
    assert b2.status == COMPLETE and b2.is_leader and b2.generation_id == 2


def test_static_member_restart_keeps_partitions_without_rebalance(gc, clock):
    a = join(gc, client_id="a", group_instance_id="i-a")
    b = join(gc, client_id="b", group_instance_id="i-b")
    clock.advance(3_000)
    a, b = join(gc, a.member_id, group_instance_id="i-a"), join(gc, b.member_id, group_instance_id="i-b")
    gc.sync_group("g", a.member_id, 1, {a.member_id: [T0], b.member_id: [T1]}, group_instance_id="i-a")
    # b "restarts": a new process joins with the same instance id and no member id
    clock.advance(5_000)
    b2 = join(gc, client_id="b", group_instance_id="i-b")
    assert b2.status == COMPLETE and b2.generation_id == 1 and b2.member_id != b.member_id
    assert gc.sync_group("g", b2.member_id, 1, group_instance_id="i-b").assignment == (T1,)
    d = gc.describe_group("g")
    assert d["state"] == "Stable" and d["generation"] == 1
    # the old incarnation is fenced
    with pytest.raises(FencedInstanceIdError, match="i-b"):
        gc.heartbeat("g", b.member_id, 1, group_instance_id="i-b")
    with pytest.raises(FencedInstanceIdError):
        gc.offset_commit("g", b.member_id, 1, {T1: 1}, group_instance_id="i-b")


def test_unknown_group_and_invalid_requests(gc):
    assert gc.describe_group("nope")["state"] == "Dead"
    with pytest.raises(UnknownMemberIdError):
        gc.heartbeat("nope", "m", 1)
    with pytest.raises(InvalidGroupIdError):
        join(gc, group="")
    with pytest.raises(InvalidSessionTimeoutError, match="1000"):
        join(gc, session_timeout_ms=1_000)
    with pytest.raises(GroupIdNotFoundError):
        gc.delete_group("nope")


def test_inconsistent_protocols_are_rejected(gc, clock):
    join(gc, client_id="a")
    with pytest.raises(InconsistentGroupProtocolError):
        join(gc, protos=[("roundrobin", META)])


def test_protocol_is_voted_by_preference(gc, clock):
    a = join(gc, protos=[("roundrobin", META), ("range", META)])
    b = join(gc, protos=[("range", META), ("roundrobin", META)])
    c = join(gc, protos=[("range", META)])
    clock.advance(3_000)
    for r in (a, b):
        join(gc, r.member_id, protos=[p for p in ([("roundrobin", META), ("range", META)]
                                               if r is a else [("range", META), ("roundrobin", META)])])
    res = join(gc, c.member_id, protos=[("range", META)])
    assert res.protocol_name == "range"                    # only common protocol


def test_standalone_commit_only_for_empty_groups(gc, clock):
    gc.offset_commit("solo", "", NO_GENERATION, {T0: OffsetAndMetadata(10, "m")})
    assert gc.offset_fetch("solo") == {T0: OffsetAndMetadata(10, "m")}
    a, b = stable_pair(gc, clock)
    with pytest.raises(UnknownMemberIdError):
        gc.offset_commit("g", "", NO_GENERATION, {T0: 1})


def test_delete_group(gc, clock):
    a, b = stable_pair(gc, clock)
    with pytest.raises(NonEmptyGroupError):
        gc.delete_group("g")
    gc.leave_group("g", a.member_id)
    gc.leave_group("g", b.member_id)
    assert gc.describe_group("g")["state"] == "Empty"
    gc.delete_group("g")
    assert gc.describe_group("g")["state"] == "Dead"


def test_member_ids_and_generations_are_deterministic():
    def run():
        clock = MockClock(5)
        gc = GroupCoordinator(clock=clock, seed=7)
        a, b = stable_pair(gc, clock)
        return a, b, gc.describe_group("g")
    assert run() == run()


def _logs(root):
    return [Log(os.path.join(root, f"__consumer_offsets-{p}"),
                LogConfig.from_overrides({"cleanup.policy": "compact"}))
            for p in range(OFFSETS_TOPIC_PARTITIONS)]


def test_offsets_and_groups_survive_a_restart(tmp_path, clock):
    logs = _logs(tmp_path)
    gc = GroupCoordinator(OffsetsStore(logs), clock)
    a, b = stable_pair(gc, clock)
    gc.offset_commit("g", a.member_id, 1, {T0: OffsetAndMetadata(42, "meta")})
    gc.offset_commit("g", b.member_id, 1, {T1: 7})
    gc.offset_commit("g", b.member_id, 1, {T1: 9})         # the latest wins
    gc.offset_commit("other", "", -1, {T0: 1})
    part = partition_for_group("g")
    assert logs[part].log_end_offset >= 4                  # the group's records are in its partition
    for log in logs:
        log.close()
    gc2 = GroupCoordinator(OffsetsStore(_logs(tmp_path)), clock)
    assert gc2.offset_fetch("g") == {T0: OffsetAndMetadata(42, "meta"), T1: OffsetAndMetadata(9)}
    d = gc2.describe_group("g")
    assert d["state"] == "Empty" and d["generation"] == 1 and d["members"] == []
    assert gc2.offset_fetch("other") == {T0: OffsetAndMetadata(1)}
    c = join(gc2, client_id="c")
    clock.advance(3_000)
    assert join(gc2, c.member_id).generation_id == 2        # generations continue


def test_deleted_group_stays_deleted_after_restart(tmp_path, clock):
    logs = _logs(tmp_path)
    gc = GroupCoordinator(OffsetsStore(logs), clock)
    gc.offset_commit("g", "", -1, {T0: 3})
    gc.delete_group("g")
    for log in logs:
        log.close()
    gc2 = GroupCoordinator(OffsetsStore(_logs(tmp_path)), clock)
    assert gc2.offset_fetch("g") == {}
    assert gc2.describe_group("g")["state"] == "Dead"


def test_sync_naming_a_non_member_is_rejected_and_changes_nothing(gc, clock):
    a = join(gc, client_id="a")
    clock.advance(3_000)
    a = join(gc, a.member_id)
    with pytest.raises(InvalidRequestError, match="ghost"):
        gc.sync_group("g", a.member_id, 1, {a.member_id: [T0], "ghost": [T1]})
    assert gc.describe_group("g")["state"] == "CompletingRebalance"
    assert gc.sync_group("g", a.member_id, 1, {a.member_id: [T0]}).assignment == (T0,)


def test_tick_expires_silent_members_without_any_request(gc, clock):
    a, b = stable_pair(gc, clock)
    clock.advance(10_000)
    gc.tick()
    d = gc.describe_group("g")
    assert d["state"] == "Empty" and d["members"] == [] and d["generation"] == 2
    assert gc.list_groups() == [{"group_id": "g", "protocol_type": "consumer", "state": "Empty"}]


def test_static_leader_restart_keeps_leadership_without_rebalance(gc, clock):
    a = join(gc, client_id="a", group_instance_id="i-a")
    clock.advance(3_000)
    a = join(gc, a.member_id, group_instance_id="i-a")
    gc.sync_group("g", a.member_id, 1, {a.member_id: [T0, T1]}, group_instance_id="i-a")
    a2 = join(gc, client_id="a", group_instance_id="i-a")
    assert a2.status == COMPLETE and a2.is_leader and a2.members == () and a2.generation_id == 1
    assert gc.sync_group("g", a2.member_id, 1, group_instance_id="i-a").assignment == (T0, T1)
    with pytest.raises(FencedInstanceIdError):
        join(gc, a.member_id, group_instance_id="i-a")


def test_static_member_with_new_protocol_triggers_a_rebalance(gc, clock):
    a = join(gc, client_id="a", group_instance_id="i-a")
    clock.advance(3_000)
    a = join(gc, a.member_id, group_instance_id="i-a")
    gc.sync_group("g", a.member_id, 1, {a.member_id: [T0]}, group_instance_id="i-a")
    with pytest.raises(InconsistentGroupProtocolError):   # must share a protocol with the group
        join(gc, client_id="a", group_instance_id="i-a", protos=[("roundrobin", META)])
    a2 = join(gc, client_id="a", group_instance_id="i-a",
              protos=[("roundrobin", META), ("range", META)])
    assert a2.generation_id == 2 and a2.protocol_name == "roundrobin"   # only member: completes at once


def test_undecodable_records_in_the_offsets_topic_are_reported_and_skipped(tmp_path, clock):
    logs = _logs(tmp_path)
    gc = GroupCoordinator(OffsetsStore(logs), clock)
    gc.offset_commit("g", "", -1, {T0: 5})
    logs[partition_for_group("g")].append([(clock.now_ms(), b"\xc1junk", b"x", ())])
    gc.offset_commit("g", "", -1, {T1: 6})
    for log in logs:
        log.close()
    with pytest.warns(RuntimeWarning, match="skipped"):
        gc2 = GroupCoordinator(OffsetsStore(_logs(tmp_path)), clock)
    assert gc2.offset_fetch("g") == {T0: OffsetAndMetadata(5), T1: OffsetAndMetadata(6)}


def test_a_restarted_coordinator_does_not_reuse_member_ids(tmp_path, clock):
    logs = _logs(tmp_path)
    gc = GroupCoordinator(OffsetsStore(logs), clock)
    first = join(gc, client_id="a").member_id
    clock.advance(3_000)
    gc.sync_group("g", first, join(gc, first).generation_id, {first: [T0]})   # Stable: persisted
    for log in logs:
        log.close()
    again = join(GroupCoordinator(OffsetsStore(_logs(tmp_path)), clock), client_id="a").member_id
    assert again != first


def test_describe_group_shows_each_members_client_host_and_client_id(gc, clock):
    a = join(gc, client_id="app", client_host="/127.0.0.1")
    b = join(gc, client_id="other")                       # in-process: no host
    clock.advance(3_000)
    a = join(gc, a.member_id)
    b = join(gc, b.member_id)
    desc = gc.describe_group("g")
    rows = {m["client_id"]: m["client_host"] for m in desc["members"]}
    assert rows == {"app": "/127.0.0.1", "other": None}
    join(gc, b.member_id, client_host="/10.0.0.7")         # a rejoin from elsewhere updates it
    assert {m["client_id"]: m["client_host"] for m in gc.describe_group("g")["members"]}["other"] == "/10.0.0.7"
