"""Property: however poll, next, seek, pause, resume, commit and a second member joining
and leaving interleave (on a MockClock, eager or cooperative), every record is delivered exactly once, in
order, per assignment period (unless the user seeks back), positions are exactly what
was handed out, and a commit never covers a record no one has received."""

from __future__ import annotations

import tempfile

from hypothesis import event, given, settings, strategies as st

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer, ConsumerRebalanceListener
from kafkasim.errors import CommitFailedError, IllegalStateError, RebalanceInProgressError
from kafkasim.types import TopicPartition

N = 30
TPS = [TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)]
WHO = st.sampled_from(["a", "b"])
WHO_OPS = {"poll", "next", "seek", "pause", "resume", "commit"}
OPS = st.lists(st.one_of(
    st.tuples(st.just("poll"), WHO, st.integers(1, 12), st.booleans()),
    st.tuples(st.just("next"), WHO, st.integers(1, 15)),
    st.tuples(st.just("seek"), WHO, st.sampled_from(TPS), st.floats(0, 1)),
    st.tuples(st.just("pause"), WHO, st.sampled_from(TPS)),
    st.tuples(st.just("resume"), WHO, st.sampled_from(TPS)),
    st.tuples(st.just("commit"), WHO),
    st.tuples(st.just("advance"), st.integers(0, 3_000)),
    st.tuples(st.just("toggle_b"), st.booleans()),     # b joins or leaves; True: then settle
    st.tuples(st.just("toggle_b"), st.booleans()),     # (listed twice: rebalances are the point)
    st.tuples(st.just("settle")),
), max_size=30)


class Model(ConsumerRebalanceListener):
    """What one member must see: for each owned partition, the next offset it may be handed."""

    def __init__(self, broker):
        self.broker = broker
        self.next: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()
        self.revocations = 0

    def on_partitions_assigned(self, tps):
        committed = self.broker.offset_fetch("g", list(tps))
        for tp in tps:
            om = committed.get(tp)
            self.next[tp] = 0 if om is None else om.offset
            self.paused.discard(tp)

    def on_partitions_revoked(self, tps):
        self.revocations += bool(tps)
        for tp in tps:
            self.next.pop(tp, None)
            self.paused.discard(tp)

    def delivered(self, rec, ever):
        tp = TopicPartition(rec.topic, rec.partition)
        assert tp in self.next, f"{rec.offset} of {tp}, which this member does not own"
        assert tp not in self.paused, f"{rec.offset} of paused {tp}"
        assert rec.offset == self.next[tp], f"{tp}: got {rec.offset}, expected {self.next[tp]}"
        self.next[tp] = rec.offset + 1
        ever[tp].add(rec.offset)


def _settle(clock, members, models, steps=50):
    """Poll every live member (update_offsets=False: nothing handed out) while the group
    (re)joins, as a heartbeat-only loop would."""
    for _ in range(steps):
        for name, c in members.items():
            if c is not None:
                for recs in c.poll(timeout_ms=0, max_records=1, update_offsets=False).values():
                    for r in recs:
                        tp = TopicPartition(r.topic, r.partition)
                        assert tp in models[name].next and r.offset >= models[name].next[tp]
        clock.advance(100)


def _member(broker, clock, name, model, strategy):
    c = Consumer(broker, client_id=name, group_id="g", clock=clock, enable_auto_commit=False,
                 partition_assignment_strategy=[strategy],
                 auto_offset_reset="earliest", consumer_timeout_ms=200, max_poll_records=7,
                 session_timeout_ms=10_000, heartbeat_interval_ms=3_000)
    c.subscribe(["t"], listener=model)
    return c


@settings(max_examples=60, deadline=None)
@given(ops=OPS, strategy=st.sampled_from(["range", "cooperative-sticky"]))
def test_interleaved_iteration_polls_seeks_pauses_and_rebalances_deliver_exactly_once(ops, strategy):
    clock = MockClock(1_700_000_000_000)
    with tempfile.TemporaryDirectory() as d, Broker(d, clock=clock) as broker:
        broker.create_topic("t", len(TPS))
        for tp in TPS:
            broker.append_records("t", tp.partition, [(clock.now_ms(), b"k", b"v%d" % i, ())
                                                      for i in range(N)])
        ever = {tp: set() for tp in TPS}
        models = {"a": Model(broker), "b": Model(broker)}
        members = {"a": _member(broker, clock, "a", models["a"], strategy), "b": None}
        _settle(clock, members, models)
        assert members["a"].assignment() == set(TPS)
        for op in ops:
            kind = op[0]
            c, m = (members[op[1]], models[op[1]]) if kind in WHO_OPS else (None, None)
            if kind == "toggle_b":
                if members["b"] is None:
                    models["b"] = Model(broker)
                    members["b"] = _member(broker, clock, "b", models["b"], strategy)
                else:
                    members["b"].close()         # revokes, so the model forgets
                    members["b"] = None
                if op[1]:
                    _settle(clock, members, models)
            elif kind == "settle":
                _settle(clock, members, models)
            elif kind == "advance":
                clock.advance(op[1])
            elif c is None:
                pass
            elif kind == "poll":
                batch = c.poll(timeout_ms=0, max_records=op[2], update_offsets=op[3])
                for recs in batch.values():
                    for r in recs:
                        if op[3]:
                            m.delivered(r, ever)
                        else:                   # returned again later: not handed out yet
                            tp = TopicPartition(r.topic, r.partition)
                            assert tp in m.next and r.offset >= m.next[tp]
            elif kind == "next":
                for _ in range(op[2]):
                    try:
                        r = next(c)
                    except StopIteration:
                        break
                    m.delivered(r, ever)
            elif kind == "seek":
                tp = op[2]
                if tp in m.next:
                    target = int(op[3] * m.next[tp])   # back (or in place): replay allowed
                    c.seek(tp, target)
                    m.next[tp] = target
            elif kind == "pause":
                if op[2] in m.next:
                    c.pause(op[2])
                    m.paused.add(op[2])
            elif kind == "resume":
                if op[2] in m.next:
                    c.resume(op[2])
                    m.paused.discard(op[2])
            elif kind == "commit":
                try:
                    c.commit()
                except (CommitFailedError, RebalanceInProgressError, IllegalStateError):
                    pass
            # the invariants, after every step, for every live member
            for name, c2 in members.items():
                if c2 is None:
                    continue
                m2 = models[name]
                assert c2.assignment() == set(m2.next), name
                for tp in c2.assignment():
                    assert c2.position(tp) == m2.next[tp], (name, tp)
            for tp, om in broker.offset_fetch("g").items():
                assert set(range(om.offset)) <= ever[tp], \
                    f"committed {om.offset} for {tp} passes records no one received"
        event(f"member a saw {min(models['a'].revocations, 3)} revocations (3 = 3 or more)")
        for c in members.values():
            if c is not None:
                c.close()
