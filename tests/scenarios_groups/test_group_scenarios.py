"""Scenario-level consumer-group behaviour on a real broker, stepped on a MockClock.

Each test names the guarantee it protects: one owner per partition within a group,
every group sees the whole topic, eviction and takeover without loss, zombie fencing,
eager vs cooperative pauses, static membership, at-least-once, restart, determinism.
"""

from __future__ import annotations

import collections

import pytest

from kafkasim.broker import Broker
from groupsim import GroupSim, produce
from kafkasim.clock import MockClock
from kafkasim.errors import CommitFailedError, FencedInstanceIdError
from kafkasim.types import TopicPartition


def _owners(sim):
    owners = collections.Counter(tp for tps in sim.assignments().values() for tp in tps)
    return owners


@pytest.mark.parametrize("n, idle", [(1, 0), (2, 0), (3, 0), (10, 4)])
def test_six_partitions_over_n_consumers_one_owner_each(broker, clock, n, idle):
    broker.create_topic("t", 6)
    produce(broker, clock, "t", 6, 5)
    sim = GroupSim(broker, clock)
    for i in range(n):
        sim.add(f"c{i:02d}")
    sim.run_until_stable()
    owners = _owners(sim)
    assert set(owners) == {TopicPartition("t", p) for p in range(6)}
    assert set(owners.values()) == {1}                   # exactly one owner per partition
    assert sum(1 for tps in sim.assignments().values() if not tps) == idle
    sim.run(1_000)
    seen = sorted((t, p, o) for m in sim.members for (t, p, o, _) in m.processed)
    assert seen == sorted(("t", p, o) for p in range(6) for o in range(5))   # each record once


def test_every_group_sees_the_whole_topic(broker, clock):
    broker.create_topic("t", 6)
    produce(broker, clock, "t", 6, 4)
    sim = GroupSim(broker, clock)
    for g in ("billing", "audit"):
        for i in range(2):
            sim.add(f"{g}-{i}", group_id=g)
    sim.run(10_000)
    for g in ("billing", "audit"):
        seen = sorted((p, o) for m in sim.members if m.name.startswith(g) for (_, p, o, _) in m.processed)
        assert seen == sorted((p, o) for p in range(6) for o in range(4))


def test_crashed_member_is_evicted_and_survivors_resume_from_committed(broker, clock):
    broker.create_topic("t", 6)
    produce(broker, clock, "t", 6, 10)
    sim = GroupSim(broker, clock)
    a, b, c = (sim.add(n, max_poll_records=3) for n in ("a", "b", "c"))
    sim.run_until_stable()
    gen = a.consumer.generation_id
    c_parts = sorted(c.consumer.assignment())
    # c processes one more batch but crashes before committing it
    c.commit = False
    sim.step()
    while not c.processed or clock.now_ms() % c.poll_every_ms:
        sim.step()
    uncommitted = [r for r in c.processed if broker.offset_fetch("g").get(TopicPartition("t", r[1]),
                                                                           None) is None
                   or r[2] >= broker.offset_fetch("g")[TopicPartition("t", r[1])].offset]
    c.alive = False                                       # crash: never called again
    sim.run(44_000)
    assert broker.describe_group("g")["generation"] == gen   # still within the session timeout
    sim.run(3_000)                                        # 45 s without a heartbeat: evicted
    sim.run_until_stable()
    assert a.consumer.generation_id > gen
    members = broker.describe_group("g")["members"]
    assert sorted(m["client_id"] for m in members) == ["a", "b"]
    assert set(a.consumer.assignment()) | set(b.consumer.assignment()) >= set(c_parts)
    sim.run(5_000)
    everything = {(p, o) for p in range(6) for o in range(10)}
    got = {(p, o) for m in sim.members for (_, p, o, _) in m.processed}
    assert got == everything                              # no record lost
    redelivered = {(p, o) for (_, p, o, _) in uncommitted}
    survivors = {(p, o) for m in (a, b) for (_, p, o, _) in m.processed}
    assert redelivered and redelivered <= survivors        # at-least-once: c's uncommitted batch again


def test_zombie_commit_after_eviction_is_rejected(broker, clock):
    broker.create_topic("t", 2)
    produce(broker, clock, "t", 2, 5)
    sim = GroupSim(broker, clock)
    a, z = sim.add("a"), sim.add("z")
    sim.run_until_stable()
    z.alive = False                                       # a long GC pause: no heartbeats
    sim.run(50_000)
    sim.run_until_stable()
    owned = sorted(z.consumer.assignment())
    assert owned                                          # the zombie still believes it owns partitions
    with pytest.raises(CommitFailedError, match="rebalanced"):
        z.consumer.commit()
    z.consumer.poll()                                     # it wakes up: partitions lost, not revoked
    assert [e[0] for e in z.listener.events][-1] == "lost" and list(z.listener.events[-1][2]) == owned
    assert not z.consumer.assignment()
    assert sorted(a.consumer.assignment()) == [TopicPartition("t", 0), TopicPartition("t", 1)]


def test_poll_interval_exceeded_leaves_group_and_commit_fails(broker, clock):
    broker.create_topic("t", 2)
    produce(broker, clock, "t", 2, 5)
    sim = GroupSim(broker, clock)
    sim.add("a")
    slow = sim.add("slow", max_poll_interval_ms=20_000)
    sim.run_until_stable()
    slow.poll_every_ms = 10 ** 9                          # busy: only its heartbeat thread runs
    sim.run(21_000)
    assert broker.describe_group("g")["members"][0]["client_id"] == "a"
    assert len(broker.describe_group("g")["members"]) == 1
    with pytest.raises(CommitFailedError):
        slow.consumer.commit()
    owned = sorted(slow.consumer.assignment())
    assert owned                                          # it has not noticed yet
    slow.consumer.poll()                                  # back: partitions lost, rejoins
    lost = [e for e in slow.listener.events if e[0] == "lost"]
    assert len(lost) == 1 and list(lost[0][2]) == owned
    assert not [e for e in slow.listener.events if e[0] == "revoked"]
    slow.poll_every_ms = 100
    sim.run_until_stable()
    assert len(broker.describe_group("g")["members"]) == 2


def _scale_out_paused_ms(broker, clock, strategy, partitions=24, members=6, period=1_000):
    """Scale ``members`` → ``members + 1`` consumers that each poll every ``period`` ms
    (the rest is "processing") with staggered phases; return (paused partition-ms, moved, sim)."""
    broker.create_topic("t", partitions)
    produce(broker, clock, "t", partitions, 5)
    sim = GroupSim(broker, clock)
    for i in range(members):
        sim.add(f"c{i}", poll_every_ms=period, phase_ms=(i * period // members) // 100 * 100,
                partition_assignment_strategy=[strategy])
        sim.run(700)                                      # members start at different times
    sim.run_until_stable()
    sim.run(2_000)
    before = sim.assignments()
    sim.paused_ms = 0
    sim.unowned_since.clear()
    sim.add("new", poll_every_ms=period, phase_ms=period - 100, partition_assignment_strategy=[strategy])
    sim.run_until_stable()
    sim.run(5_000)
    assert not sim.unowned_since                          # every partition has an owner again
    owners = _owners(sim)
    assert len(owners) == partitions and set(owners.values()) == {1}
    moved = sum(1 for name, tps in before.items() for tp in tps if tp not in sim.assignments()[name])
    return sim.paused_ms, moved, sim


def test_cooperative_pauses_only_moved_partitions(tmp_path):
    """Scale-out 6 → 7 consumers on 24 partitions. Eager stops all 24 partitions for the
    rebalance; cooperative stops only the 3 that move, but for two rounds (the follow-up
    round waits for the other members to notice it, up to heartbeat.interval.ms).
    Measured here: eager 24,800 partition-ms, cooperative 13,200."""
    results = {}
    for strategy in ("range", "cooperative-sticky"):
        clock = MockClock(1_700_000_000_000)
        with Broker(tmp_path / strategy, clock=clock) as b:
            results[strategy] = _scale_out_paused_ms(b, clock, strategy)
    eager_paused, _, eager_sim = results["range"]
    coop_paused, coop_moved, coop_sim = results["cooperative-sticky"]
    assert eager_sim.members[0].consumer.rebalance_protocol == "eager"
    assert coop_sim.members[0].consumer.rebalance_protocol == "cooperative"
    # eager revoked all 24 partitions; cooperative revoked only the ones that moved
    eager_revoked = {tp for m in eager_sim.members for ev in m.listener.events if ev[0] == "revoked"
                     for tp in ev[2]}
    coop_revoked = [tp for m in coop_sim.members for ev in m.listener.events
                    if ev[0] == "revoked" for tp in ev[2]]
    assert len(eager_revoked) == 24
    assert len(coop_revoked) == coop_moved == 3             # the newcomer's 3 partitions
    assert 0 < coop_paused < eager_paused, (coop_paused, eager_paused)


def test_cooperative_listener_order_revoke_then_follow_up_assign(broker, clock):
    broker.create_topic("t", 4)
    sim = GroupSim(broker, clock)
    a = sim.add("a", partition_assignment_strategy=["cooperative-sticky"])
    sim.run_until_stable()
    assert a.listener.events[-1][0] == "assigned" and len(a.listener.events[-1][2]) == 4
    b = sim.add("b", partition_assignment_strategy=["cooperative-sticky"])
    sim.run_until_stable()
    kinds = [e[0] for e in a.listener.events]
    assert "lost" not in kinds
    revoked = [e for e in a.listener.events if e[0] == "revoked"]
    assert len(revoked) == 1 and len(revoked[0][2]) == 2    # only what moved
    assert sorted(b.consumer.assignment()) == sorted(revoked[0][2])
    assert b.consumer.generation_id == a.consumer.generation_id == 3   # two rebalances after gen 1


def test_static_member_restart_within_session_timeout_keeps_partitions(broker, clock):
    broker.create_topic("t", 4)
    produce(broker, clock, "t", 4, 3)
    sim = GroupSim(broker, clock)
    a = sim.add("a", group_instance_id="host-a")
    b = sim.add("b", group_instance_id="host-b")
    sim.run_until_stable()
    gen, before = b.consumer.generation_id, sorted(b.consumer.assignment())
    b.consumer.close()                                    # a static member does not leave
    b.alive = False
    assert len(broker.describe_group("g")["members"]) == 2
    sim.run(10_000)                                       # restart well within 45 s
    b2 = sim.add("b", group_instance_id="host-b")
    sim.run_until_stable()
    assert sorted(b2.consumer.assignment()) == before
    assert b2.consumer.generation_id == gen == a.consumer.generation_id   # no rebalance
    assert broker.describe_group("g")["generation"] == gen


def test_duplicate_instance_id_is_fenced(broker, clock):
    broker.create_topic("t", 2)
    sim = GroupSim(broker, clock)
    old = sim.add("old", group_instance_id="host-1")
    sim.run_until_stable()
    old.alive = False
    new = sim.add("new", group_instance_id="host-1")
    sim.run_until_stable()
    assert sorted(new.consumer.assignment()) == [TopicPartition("t", 0), TopicPartition("t", 1)]
    clock.advance(3_000)
    with pytest.raises(FencedInstanceIdError, match="host-1"):
        old.consumer.poll()
    with pytest.raises(FencedInstanceIdError):           # fatal, as in Kafka
        old.consumer.poll()
    sim.run(5_000)
    assert sorted(new.consumer.assignment()) == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert broker.describe_group("g")["members"][0]["client_id"] == "new"


def test_added_partitions_trigger_a_rebalance(broker, clock):
    broker.create_topic("t", 2)
    sim = GroupSim(broker, clock)
    a, _ = sim.add("a"), sim.add("b")
    sim.run_until_stable()
    gen = a.consumer.generation_id
    broker.create_partitions("t", 4)
    sim.run(300_000)                                      # the leader's metadata refresh (metadata.max.age.ms)
    sim.run_until_stable()
    assert a.consumer.generation_id == gen + 1
    assert len(_owners(sim)) == 4


def test_at_least_once_crash_between_processing_and_commit_redelivers(broker, clock):
    broker.create_topic("t", 1)
    produce(broker, clock, "t", 1, 10)
    sim = GroupSim(broker, clock)
    a = sim.add("a", max_poll_records=4, commit=True)
    sim.run_until_stable()
    while len(a.processed) < 4:
        sim.step()
    assert broker.offset_fetch("g")[TopicPartition("t", 0)].offset == 4
    a.commit = False                                      # next batch: processed, then crash
    while len(a.processed) < 8:
        sim.step()
    a.consumer.close(autocommit=False)                    # the process dies (no commit)
    a.alive = False
    b = sim.add("b", max_poll_records=100)
    sim.run_until_stable()
    sim.run(1_000)
    assert [o for (_, _, o, _) in b.processed] == list(range(4, 10))   # 4..7 delivered twice
    assert [o for (_, _, o, _) in a.processed] == list(range(0, 8))


def test_group_resumes_from_committed_offsets_after_broker_restart(tmp_path):
    clock = MockClock(1_700_000_000_000)
    data = tmp_path / "data"
    with Broker(data, clock=clock) as b:
        b.create_topic("t", 3)
        produce(b, clock, "t", 3, 10)
        sim = GroupSim(b, clock)
        m = sim.add("a", max_poll_records=5)
        sim.run_until_stable()
        while len(m.processed) < 10:
            sim.step()
        committed = b.offset_fetch("g")
    with Broker(data, clock=clock) as b2:
        assert b2.offset_fetch("g") == committed
        assert "__consumer_offsets" not in b2.list_topics()
        assert "__consumer_offsets" in b2.list_topics(include_internal=True)
        assert b2.describe_group("g")["state"] == "Empty"
        sim = GroupSim(b2, clock)
        m2 = sim.add("a2", auto_offset_reset="none", max_poll_records=100)
        sim.run_until_stable()
        sim.run(1_000)
        got = sorted((p, o) for (_, p, o, _) in m2.processed)
        expected = sorted((tp.partition, o) for tp, om in committed.items() for o in range(om.offset, 10))
        expected += [(p, o) for p in range(3) if TopicPartition("t", p) not in committed for o in range(10)]
        assert got == sorted(expected)


def _deterministic_run(root, seed_dir):
    clock = MockClock(1_700_000_000_000)
    with Broker(root / seed_dir, clock=clock) as b:
        b.create_topic("t", 6)
        produce(b, clock, "t", 6, 5)
        sim = GroupSim(b, clock)
        trace = []
        for i in range(4):
            sim.add(f"c{i}", poll_every_ms=200, phase_ms=100 * (i % 2),
                    partition_assignment_strategy=["cooperative-sticky"])
            sim.run(1_500)
            trace.append((sim.assignments(), [m.consumer.generation_id for m in sim.members],
                          [m.consumer.member_id for m in sim.members]))
        sim.members[1].alive = False
        sim.run(50_000)
        sim.run_until_stable()
        trace.append((sim.assignments(), [m.consumer.generation_id for m in sim.members if m.alive]))
        return trace


def test_same_scenario_same_clock_same_assignments_and_generations(tmp_path):
    first = _deterministic_run(tmp_path, "one")
    second = _deterministic_run(tmp_path, "two")
    assert first == second
    final_assignment, final_generations = first[-1]
    assert len(final_assignment) == 3 and final_generations[0] >= 2   # the crash caused a rebalance
    assert sorted(tp for tps in final_assignment.values() for tp in tps) == [
        TopicPartition("t", p) for p in range(6)]
