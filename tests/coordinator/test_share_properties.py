"""Property test of share groups (KIP-932) on a real in-process Broker (issue 25).

Hypothesis drives random schedules against one Broker over a real data dir: members join and
leave, fetch (ShareFetch), acknowledge what they hold (ACCEPT, RELEASE or REJECT, or one type
per offset), heartbeat, let the clock run (record locks expire, silent members are fenced, on
Broker.tick()), and the broker restarts (close + reopen on the same data dir). Each member
acts as Kafka's share consumer does: it believes it holds a record from the fetch that gave
it until it acknowledges it, its lock expires, it leaves or is fenced, or the broker restarts.

Properties, checked after every step:

- **no record is held by two members at once**: the beliefs of the members are disjoint;
- an acknowledgement of records a member holds is accepted (never INVALID_RECORD_STATE);
- no record is ever ACCEPTed twice (counted by the members);

and at the end, after a last member drains the partitions accepting everything: the
share-partition start offset is the high watermark, and every record ended accepted exactly
once or archived (rejected, or delivered ``group.share.delivery.count.limit`` times).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import UnknownMemberIdError
from kafkasim.protocol.share_group import (
    ACKNOWLEDGE_ACCEPT as ACCEPT, ACKNOWLEDGE_REJECT as REJECT, ACKNOWLEDGE_RELEASE as RELEASE,
    AcknowledgementBatch,
)
from kafkasim.records import record_batch as rb
from kafkasim.types import TopicPartition

T0 = 1_700_000_000_000
LIMIT = 3
LOCK = 15_000
TPS = [TopicPartition("t", 0), TopicPartition("t", 1)]
MEMBERS = ["m1", "m2", "m3"]
CONFIGS = {"share.auto.offset.reset": "earliest", "group.share.delivery.count.limit": LIMIT,
           "group.share.record.lock.duration.ms": LOCK, "share.coordinator.state.topic.num.partitions": 1}


@dataclass
class World:
    broker: Broker
    clock: MockClock
    data_dir: str
    joined: dict = field(default_factory=dict)          # member -> epoch
    held: dict = field(default_factory=dict)            # member -> {(tp, offset): lock deadline}
    accepted: dict = field(default_factory=dict)        # (tp, offset) -> times
    rejected: set = field(default_factory=set)
    deliveries: dict = field(default_factory=dict)      # (tp, offset) -> highest delivery count seen

    def forget(self, member: str) -> None:
        self.held.pop(member, None)

    def check_disjoint(self) -> None:
        seen: dict = {}
        for m, recs in self.held.items():
            for rec in recs:
                assert rec not in seen, f"{rec} held by {seen[rec]} and {m} at once"
                seen[rec] = m


def _produce(b: Broker, n_batches: int) -> None:
    for tp in TPS:
        for i in range(n_batches):
            b.produce("t", tp.partition, rb.encode_batch(0, [(j, T0, None, b"%d" % j, ()) for j in range(3)]))


def _fetch(w: World, m: str, max_records: int) -> None:
    try:
        got = w.broker.share_fetch("g", m, TPS, max_records=max_records)
    except UnknownMemberIdError:
        assert m not in w.joined
        return
    assert m in w.joined
    deadline = w.clock.now_ms() + LOCK
    for tp, part in got.items():
        assert part.error is None
        for a in part.acquired:
            for o in range(a.first_offset, a.last_offset + 1):
                w.held.setdefault(m, {})[(tp, o)] = deadline
                w.deliveries[(tp, o)] = max(w.deliveries.get((tp, o), 0), a.delivery_count)
                assert a.delivery_count <= LIMIT


def _ack(w: World, m: str, kind, count: int) -> None:
    mine = sorted(w.held.get(m, {}))
    if not mine or m not in w.joined:
        return
    chosen = mine[:count]
    acks: dict = {}
    for tp, o in chosen:
        t = kind if kind != "mixed" else (ACCEPT, RELEASE, REJECT)[o % 3]
        acks.setdefault(tp, []).append(AcknowledgementBatch(o, o, (t,)))
    result = w.broker.share_acknowledge("g", m, acks)
    for tp, batches in acks.items():
        assert result[tp] is None, f"{m} acknowledging what it holds on {tp}: {result[tp]!r}"
        for b in batches:
            rec = (tp, b.first_offset)
            del w.held[m][rec]
            if b.acknowledge_types[0] == ACCEPT:
                w.accepted[rec] = w.accepted.get(rec, 0) + 1
                assert w.accepted[rec] == 1, f"{rec} accepted twice"
            elif b.acknowledge_types[0] == REJECT:
                w.rejected.add(rec)


def _advance(w: World, ms: int) -> None:
    w.clock.advance(ms)
    fenced = w.broker.tick_share_groups()["fenced"]
    for _, m in fenced:
        w.joined.pop(m, None)
        w.forget(m)
    now = w.clock.now_ms()
    for m in list(w.held):
        w.held[m] = {r: d for r, d in w.held[m].items() if d > now}


def _restart(w: World) -> None:
    w.broker.close()
    w.broker = Broker(w.data_dir, clock=w.clock, broker_configs=CONFIGS)
    w.held.clear()                        # locks do not survive a restart


_RAM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
"""Real files, on tmpfs where there is one: a restart's fsyncs of ~50 logs cost seconds on a shared disk."""

operations = st.one_of(
    st.tuples(st.just("join"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("fetch"), st.sampled_from(MEMBERS), st.integers(1, 8)),
    st.tuples(st.just("fetch"), st.sampled_from(MEMBERS), st.integers(1, 8)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.sampled_from([ACCEPT, RELEASE, REJECT, "mixed"]),
              st.integers(1, 6)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.just(ACCEPT), st.integers(1, 6)),
    st.tuples(st.just("beat")),
    st.tuples(st.just("advance"), st.sampled_from([1_000, LOCK, 46_000])),
    st.tuples(st.just("produce")),
    st.tuples(st.just("close_session"), st.sampled_from(MEMBERS)),
)
schedules = st.lists(operations, min_size=15, max_size=40).flatmap(
    lambda ops: st.tuples(st.just(ops), st.sets(st.integers(0, len(ops) - 1), max_size=2)))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(schedule=schedules)
def test_every_record_ends_accepted_once_or_archived_and_no_two_owners(schedule):
    ops, restarts = schedule
    clock = MockClock(T0)
    with tempfile.TemporaryDirectory(dir=_RAM_DIR) as d:
        w = World(Broker(d, clock=clock, broker_configs=CONFIGS), clock, d)
        try:
            w.broker.create_topic("t", 2)
            _produce(w.broker, 2)
            for i, op in enumerate(ops):
                kind = op[0]
                if kind == "join":
                    r = w.broker.share_group_heartbeat("g", op[1], 0, subscribed_topic_names=["t"])
                    w.joined[op[1]] = r.member_epoch
                elif kind == "leave" and op[1] in w.joined:
                    w.broker.share_group_heartbeat("g", op[1], -1)
                    del w.joined[op[1]]
                    w.forget(op[1])
                elif kind == "fetch":
                    _fetch(w, op[1], op[2])
                elif kind == "ack":
                    _ack(w, op[1], op[2], op[3])
                elif kind == "beat":
                    for m in sorted(w.joined):
                        w.joined[m] = w.broker.share_group_heartbeat("g", m, w.joined[m]).member_epoch
                elif kind == "advance":
                    _advance(w, op[1])
                elif kind == "produce":
                    _produce(w.broker, 1)
                elif kind == "close_session" and op[1] in w.joined:
                    w.broker.share_session_close("g", op[1])
                    w.forget(op[1])
                if i in restarts:
                    _restart(w)
                w.check_disjoint()
            # drain: everyone else leaves, one member accepts whatever it gets
            for m in sorted(w.joined):
                w.broker.share_group_heartbeat("g", m, -1)
            w.joined.clear()
            w.held.clear()
            w.joined["drain"] = w.broker.share_group_heartbeat("g", "drain", 0, subscribed_topic_names=["t"]).member_epoch
            for _ in range(50):
                _fetch(w, "drain", 500)
                if not w.held.get("drain"):
                    break
                _ack(w, "drain", ACCEPT, 10_000)
            for tp in TPS:
                hw = w.broker.list_offsets(tp.topic, tp.partition, -1)[0]
                assert w.broker.share_partition_state("g", tp).start_offset == hw
                for o in range(hw):
                    rec = (tp, o)
                    accepted = w.accepted.get(rec, 0)
                    assert accepted <= 1
                    if accepted == 0:
                        assert rec in w.rejected or w.deliveries.get(rec, 0) == LIMIT, (
                            f"{rec} neither accepted nor archived (deliveries {w.deliveries.get(rec)})")
                    else:
                        assert rec not in w.rejected
        finally:
            w.broker.close()
