"""RecordAccumulator invariants (property-based) with an injected clock."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from kafkasim.types import TopicPartition
from kafkasim.producer.accumulator import RecordAccumulator

TPS = [TopicPartition("t", p) for p in range(3)]


def _noop_waiter(batch, timeout):
    return None


ops = st.lists(st.tuples(st.integers(0, 2), st.integers(1, 300), st.integers(0, 7)), max_size=200)


@settings(max_examples=150, deadline=None)
@given(ops, st.integers(0, 1000), st.integers(0, 20))
def test_batches_keep_append_order_respect_batch_size_and_linger(ops, batch_size, linger_ms):
    acc = RecordAccumulator(batch_size, linger_ms, _noop_waiter)
    slots = acc.slots_for("t", 3)
    now = 0
    appended = {tp: [] for tp in TPS}
    closed = []
    for i, (p, size, advance) in enumerate(ops):
        now += advance
        acc.append(slots, TPS[p], now, now, b"k", b"%d" % i, (), size)
        appended[TPS[p]].append((i, now, size))
        closed.extend(acc.drain())
    acc.close_all()
    closed.extend(acc.drain())
    assert acc.open_count() == 0

    sizes = {i: size for recs in appended.values() for i, _, size in recs}
    times = {i: t for recs in appended.values() for i, t, _ in recs}
    for tp in TPS:
        batches = [b for b in closed if b.tp == tp]
        assert [b.batch_no for b in batches] == list(range(len(batches)))
        got = [int(r[3]) for b in batches for r in b.records]
        assert got == [i for i, _, _ in appended[tp]]               # append order, nothing lost
        for b in batches:
            assert [r[0] for r in b.records] == list(range(len(b.records)))   # offset deltas
            total = sum(sizes[int(r[3])] for r in b.records)
            assert total == b.size
            if len(b.records) > 1:                              # only a lone record may exceed it
                assert total - sizes[int(b.records[-1][3])] < batch_size
            # a record joins a batch only before the batch's linger deadline
            assert all(times[int(r[3])] < b.created_ms + linger_ms or r[0] == 0 for r in b.records)


def test_expire_closes_only_batches_past_linger():
    acc = RecordAccumulator(10_000, 5, _noop_waiter)
    slots = acc.slots_for("t", 3)
    acc.append(slots, TPS[0], 100, 100, None, b"a", (), 10)
    acc.append(slots, TPS[1], 103, 103, None, b"b", (), 10)
    acc.expire(104)
    assert acc.drain() == []
    acc.expire(105)
    assert [b.tp for b in acc.drain()] == [TPS[0]]
    assert acc.next_expiry == 108
    acc.expire(108)
    assert [b.tp for b in acc.drain()] == [TPS[1]]
