"""Invariants under random membership churn (hypothesis), and consumers in real threads."""

from __future__ import annotations

import itertools
import threading

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkasim.broker import Broker
from kafkasim.consumer import Consumer
from groupsim import GroupSim, produce
from kafkasim.clock import MockClock
from kafkasim.types import TopicPartition

PARTITIONS = 5
_groups = itertools.count()


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    clock = MockClock(1_700_000_000_000)
    b = Broker(tmp_path_factory.mktemp("inv") / "data", clock=clock)
    b.create_topic("t", PARTITIONS)
    produce(b, clock, "t", PARTITIONS, 20)
    yield b, clock
    b.close()


OPS = st.lists(st.tuples(st.sampled_from(["join", "crash", "close", "wait"]),
                         st.integers(0, 5), st.integers(1, 60)), min_size=1, max_size=8)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, strategy=st.sampled_from(["range", "roundrobin", "sticky", "cooperative-sticky"]))
def test_after_any_churn_the_group_settles_with_one_owner_per_partition(shared, ops, strategy):
    """Joins, crashes, clean leaves and pauses in any order: once the group is stable,
    every partition has exactly one live owner, all members share one generation, and
    every record was processed (at-least-once, commit after processing)."""
    broker, clock = shared
    group = f"g{next(_groups)}"
    sim = GroupSim(broker, clock, step_ms=200)
    sim.add("m0", group_id=group, partition_assignment_strategy=[strategy])
    names = itertools.count(1)
    for op, who, secs in ops:
        live = [m for m in sim.members if m.alive]
        if op == "join" or not live:
            sim.add(f"m{next(names)}", group_id=group, partition_assignment_strategy=[strategy])
        elif op == "crash" and len(live) > 1:
            live[who % len(live)].alive = False
        elif op == "close" and len(live) > 1:
            m = live[who % len(live)]
            m.consumer.close()
            m.alive = False
        sim.run(secs * 1_000)
    sim.run(50_000)                                       # crashed members expire
    sim.run_until_stable(max_ms=120_000)
    live = [m for m in sim.members if m.alive]
    owned = [tp for m in live for tp in m.consumer.assignment()]
    assert sorted(owned) == [TopicPartition("t", p) for p in range(PARTITIONS)]
    assert len({m.consumer.generation_id for m in live}) == 1
    d = broker.describe_group(group)
    assert d["state"] == "Stable" and len(d["members"]) == len(live)
    sim.run(3_000)
    seen = {(p, o) for m in sim.members for (_, p, o, _) in m.processed}
    assert seen == {(p, o) for p in range(PARTITIONS) for o in range(20)}


@pytest.mark.slow
def test_consumers_in_real_threads_share_the_topic(tmp_path):
    """Three consumers, each in its own thread with the real clock and the background
    heartbeat thread, read a topic together; every record is read, partitions disjoint."""
    with Broker(tmp_path / "data") as broker:
        broker.create_topic("t", 6)
        produce(broker, broker.clock, "t", 6, 50)
        seen: list = []
        lock = threading.Lock()
        done = threading.Event()
        consumers = [Consumer(broker, "t", group_id="threads", client_id=f"c{i}",
                              auto_offset_reset="earliest", enable_auto_commit=False)
                     for i in range(3)]

        def loop(c):
            while not done.is_set():
                batch = c.poll(timeout_ms=50)
                with lock:
                    seen.extend((tp.partition, r.offset) for tp, rs in batch.items() for r in rs)
                if batch:
                    c.commit()

        threads = [threading.Thread(target=loop, args=(c,)) for c in consumers]
        for t in threads:
            t.start()
        try:
            for _ in range(200):
                done.wait(0.1)
                with lock:
                    if {(p, o) for p, o in seen} == {(p, o) for p in range(6) for o in range(50)}:
                        break
        finally:
            done.set()
            for t in threads:
                t.join(timeout=10)
        assert {(p, o) for p, o in seen} == {(p, o) for p in range(6) for o in range(50)}
        owned = [tp for c in consumers for tp in c.assignment()]
        assert len(owned) == len(set(owned))
        for c in consumers:
            c.close()
        assert broker.describe_group("threads")["state"] == "Empty"


def test_a_leader_that_crashes_before_its_sync_expires_after_the_session_timeout(shared):
    """Kafka keeps a member alive during CompletingRebalance only while its SyncGroup is
    pending: a leader that crashed after the join never syncs, so it expires after
    session.timeout.ms (45 s) and the follower gets every partition in a new generation,
    well before the 300 s rebalance timeout. (Hypothesis found the stuck group:
    ops=[('join', 0, 1), ('crash', 0, 1)], strategy='range'.)"""
    broker, clock = shared
    group = f"g{next(_groups)}"
    sim = GroupSim(broker, clock, step_ms=200)
    sim.add("m0", group_id=group, partition_assignment_strategy=["range"])
    sim.add("m1", group_id=group, partition_assignment_strategy=["range"])
    sim.run(1_000)
    sim.members[0].alive = False                          # m0, the leader, stops mid-rebalance
    sim.run(1_000)
    sim.run_until_stable(max_ms=60_000)
    (m1,) = [m for m in sim.members if m.alive]
    assert sorted(m1.consumer.assignment()) == [TopicPartition("t", p) for p in range(PARTITIONS)]
    assert broker.describe_group(group)["state"] == "Stable"
