"""Mixed groups (Kafka 4): classic consumers (eager ``range`` or ``cooperative-sticky``: as in
Kafka, classic members must share a protocol) and consumer-protocol consumers in one group, through online upgrades and downgrades, never hold
one partition at the same instant."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer

KINDS = ("consumer", "classic")


def _consumer(b, clock, name, kind, strategy):
    extra = (dict(group_protocol="consumer") if kind == "consumer" else
             dict(partition_assignment_strategy=[strategy], session_timeout_ms=10_000, heartbeat_interval_ms=3_000))
    c = Consumer(b, group_id="g", client_id=name, seed=1, auto_offset_reset="earliest", clock=clock,
                 enable_auto_commit=False, **extra)
    c.subscribe(["t"])
    return c


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])   # one classic strategy per group,
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["join", "leave", "crash", "poll"]), st.integers(0, 3),
                          st.sampled_from(KINDS)), min_size=4, max_size=25))
def test_no_partition_is_ever_held_by_two_members_of_a_mixed_group(tmp_path_factory, strategy, ops):
    clock = MockClock(1_000)
    b = Broker(tmp_path_factory.mktemp("mixed"), clock=clock)
    b.create_topic("t", 6)
    slots: dict[int, Consumer] = {}
    n = 0

    def check():
        held: dict = {}
        for i, c in slots.items():
            for tp in c.assignment():
                assert tp not in held, f"{tp} held by {held.get(tp)} and {i}: {ops}"
                held[tp] = i

    for op, i, kind in ops:
        c = slots.get(i)
        if op == "join" and c is None:
            n += 1
            slots[i] = _consumer(b, clock, f"{kind}-{n}", kind, strategy)
        elif op == "leave" and c is not None:
            c.close()
            del slots[i]
        elif op == "crash" and c is not None:
            del slots[i]                      # no leave, no more heartbeats: fenced on a timer
        for _ in range(3):
            for _, cons in sorted(slots.items()):
                cons.poll()
                check()
            clock.advance(1_000)
            b.tick()
            check()
    # and then it settles: every partition owned once the survivors are left alone
    for _ in range(90):
        for _, cons in sorted(slots.items()):
            cons.poll()
            check()
        clock.advance(1_000)
        b.tick()
    if slots:
        owned = sorted(tp.partition for c in slots.values() for tp in c.assignment())
        assert owned == list(range(6)), (owned, ops)
    b.close()
