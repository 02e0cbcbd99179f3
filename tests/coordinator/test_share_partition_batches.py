"""The share-partition keeps in-flight *batches* (as Kafka's SharePartition does), split per
offset only when an operation touches part of one: it must behave exactly as the per-offset
reference model (tests/coordinator/share_partition_model.py) under any sequence of acquire,
acknowledge (valid or not), release, lock expiry, log-start moves, writes and reloads: the
same acquired ranges, the same errors with the same messages, the same states, owners,
deadlines, SPSO, and the same persisted ShareSnapshot batches."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.coordinator.share_partition import SharePartition, StoredBatch
from kafkasim.errors import KafkaSimError
from kafkasim.protocol.share_group import (
    ACKNOWLEDGE_ACCEPT as ACCEPT, ACKNOWLEDGE_RELEASE as RELEASE, ACKNOWLEDGED, AcknowledgementBatch as Ack,
)

from tests.coordinator.share_partition_model import PerOffsetSharePartition

LOCK = 1_000
LIMIT = 3
MEMBERS = ["m1", "m2", "m3"]

# the log: batches of 1-6 offsets, some control batches, some offsets missing (compaction)
_log = st.lists(st.tuples(st.sampled_from([0, 0, 0, 1, 2]), st.integers(1, 6), st.sampled_from([False] * 4 + [True])),
                min_size=1, max_size=12)


def _stored(layout) -> list[StoredBatch]:
    out, at = [], 0
    for skip, size, control in layout:
        at += skip
        out.append(StoredBatch(at, at + size - 1, not control))
        at += size
    return out


_ack_batch = st.tuples(st.integers(-1, 60), st.integers(0, 7),
                       st.one_of(st.lists(st.sampled_from([0, 1, 2, 3]), min_size=1, max_size=1),
                                 st.lists(st.sampled_from([0, 1, 2, 3, 9]), min_size=1, max_size=8)))
_acquire = st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.one_of(st.just(None), st.integers(0, 40)),
                     st.integers(1, 12), st.booleans())
_ack_held = st.tuples(st.just("ack_held"), st.sampled_from(MEMBERS), st.sampled_from([ACCEPT, RELEASE, 3, 0]),
                      st.booleans(), st.integers(0, 3), st.one_of(st.just(None), st.integers(1, 6)))
_op = st.one_of(
    _acquire, _acquire, _ack_held, _ack_held,
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.lists(_ack_batch, min_size=1, max_size=3)),
    st.tuples(st.just("release"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("expire"), st.integers(0, 3_000)),
    st.tuples(st.just("move_start"), st.integers(0, 60)),
    st.tuples(st.just("persist"), st.booleans()),
)


def _outcome(fn):
    try:
        return "ok", fn()
    except KafkaSimError as exc:
        return type(exc).__name__, str(exc)


def _acquire_as(sp, stored, member, bound, most, now, one_by_one):
    """One acquire over the log from the SPSO, or (``one_by_one``) one call per stored batch
    while the budget lasts, as the broker's ShareFetch calls it."""
    batches = [b for b in stored if b.last_offset >= sp.start_offset]
    calls = [[b] for b in batches] if one_by_one else [batches]
    out = []
    for call in calls:
        left = most - sum(a.last_offset - a.first_offset + 1 for a in out)
        if left <= 0:
            break
        out += sp.acquire(member, call, bound, max_records=left, lock_duration_ms=LOCK, now_ms=now)
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in out]


def _view(sp, top: int):
    recs = []
    for o in range(top):
        r = sp.record(o)
        recs.append(None if r is None else (r.state, r.delivery_count, r.owner, r.deadline_ms))
    return (sp.start_offset, sp.next_offset, sp.end_offset, sp.in_flight(), sp.state_batches(), sp.owners(),
            sp.next_deadline_ms(), recs)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=_log, start=st.integers(0, 4), ops=st.lists(_op, min_size=5, max_size=50))
def test_batches_behave_as_the_per_offset_model(layout, start, ops):
    stored = _stored(layout)
    top = stored[-1].last_offset + 2
    kw = {"delivery_count_limit": LIMIT, "max_record_locks": 20}
    new, ref = SharePartition(start, **kw), PerOffsetSharePartition(start, **kw)
    now = 0
    for op in ops:
        kind = op[0]
        if kind == "acquire":
            _, member, bound, most, one_by_one = op
            bound = top if bound is None else bound
            now += 100
            got = [_outcome(lambda sp=sp: _acquire_as(sp, stored, member, bound, most, now, one_by_one))
                   for sp in (new, ref)]
        elif kind in ("ack", "ack_held"):
            if kind == "ack":
                acks = [Ack(first, first + span, tuple(types)) for first, span, types in op[2]]
            else:           # some of what the member holds, in runs, as a client sends it
                held = sorted(o for o, m in ref.owners().items() if m == op[1])
                held = held[op[4]:] if op[5] is None else held[:op[5]]
                acks, run = [], []
                for o in held:
                    if run and o != run[-1] + 1:
                        acks.append(run)
                        run = []
                    run.append(o)
                acks = [Ack(r[0], r[-1], (op[2],) if op[3] else (op[2],) * len(r)) for r in acks + [run] if r]
            got = [_outcome(lambda sp=sp: sp.acknowledge(op[1], acks)) for sp in (new, ref)]
        elif kind == "release":
            got = [sp.release_member(op[1]) for sp in (new, ref)]
        elif kind == "expire":
            got = [sp.expire(op[1]) for sp in (new, ref)]
        elif kind == "move_start":
            got = [sp.move_start(op[1]) for sp in (new, ref)]
        else:
            got = [sp.persisted_state() for sp in (new, ref)]
            if op[1]:       # a reload from what was written
                s, batches = got[0]
                new, ref = SharePartition.from_state(s, batches, **kw), PerOffsetSharePartition.from_state(
                    s, batches, **kw)
        assert got[0] == got[1], (op, got)
        assert _view(new, top) == _view(ref, top), op
        assert new.done_in_flight() == sum(1 for o in range(ref.start_offset, ref.next_offset)
                                           if ref.record(o).state in (ACKNOWLEDGED, 4)), op


def test_done_in_flight_counts_acknowledged_and_archived_offsets_above_the_spso():
    sp = SharePartition(0)
    sp.acquire("m1", [StoredBatch(0, 9)], 10, max_records=500, lock_duration_ms=LOCK, now_ms=0)
    sp.acknowledge("m1", [Ack(2, 4, (ACCEPT,)), Ack(6, 6, (3,))])        # 2-4 ACCEPT, 6 REJECT
    assert (sp.start_offset, sp.done_in_flight()) == (0, 4)
    sp.acknowledge("m1", [Ack(0, 1, (ACCEPT,))])
    assert (sp.start_offset, sp.done_in_flight()) == (5, 1)                # 6 archived, above the SPSO


def test_a_batch_acquired_whole_and_accepted_whole_is_written_as_one_range():
    sp = SharePartition(100)
    got = sp.acquire("m1", [StoredBatch(100, 599)], 600, max_records=500, lock_duration_ms=LOCK, now_ms=0)
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got] == [(100, 599, 1)]
    assert sp.state_batches() == [(100, 599, 0, 1)]
    sp.acknowledge("m1", [Ack(100, 599, (ACCEPT,))])
    assert sp.persisted_state() == (100, [(100, 599, ACKNOWLEDGED, 1)])
    assert sp.persisted_state() == (600, [])


def test_a_batch_cut_by_the_bound_is_finished_later_up_to_max_records():
    # offsets 0-2 of batch 0-5 acquired under a high watermark of 3; then m2 may take 2 records:
    # 3-4, and offset 5 is reached (tracked AVAILABLE), as the per-offset model does
    for sp in (SharePartition(0), PerOffsetSharePartition(0)):
        sp.acquire("m1", [StoredBatch(0, 5)], 3, max_records=500, lock_duration_ms=LOCK, now_ms=0)
        got = sp.acquire("m2", [StoredBatch(0, 5)], 6, max_records=2, lock_duration_ms=LOCK, now_ms=0)
        assert [(a.first_offset, a.last_offset) for a in got] == [(3, 4)]
        assert sp.next_offset == 6 and sp.state_batches() == [(0, 4, 0, 1), (5, 5, 0, 0)]
