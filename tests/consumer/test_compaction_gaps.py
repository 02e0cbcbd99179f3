"""Compaction leaves gaps inside and between batches and segments; fetches and the consumer step
over them as Kafka does (storage/FORMAT.md §5), so a reader never stalls below the log end."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.consumer import Consumer
from kafkasim.types import TopicPartition

T0 = 1_700_000_000_000
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "340", "min.cleanable.dirty.ratio": "0.01"}  # active segment from 14


def _write(b, batches):
    """``batches``: lists of key ids; each list is one appended batch."""
    for i, keys in enumerate(batches):
        b.append_records("t", 0, [(T0 + i, b"k%d" % k, b"v%d-%d" % (i, j), ()) for j, k in enumerate(keys)])


def _log_records(b):
    """Every record the log holds, by walking fetch and stepping over gaps with the
    broker's own answer (the next offset it would serve)."""
    out, offset = [], b.list_offsets("t", 0, -2)[0]
    leo = b.list_offsets("t", 0, -1)[0]
    while offset < leo:
        res = b.fetch("t", 0, offset)
        assert res.records, f"fetch at {offset} < log end {leo} returned nothing: a consumer would stall"
        out += [(r.offset, r.key, r.value) for r in res.records]
        offset = res.records[-1].offset + 1
    return out


def _consume_all(b, clock):
    c = Consumer(b, auto_offset_reset="earliest", clock=clock)
    c.assign([TopicPartition("t", 0)])
    got = []
    for _ in range(200):
        for recs in c.poll(timeout_ms=0).values():
            got += [(r.offset, r.key, r.value) for r in recs]
        if c.position(TopicPartition("t", 0)) >= b.list_offsets("t", 0, -1)[0]:
            break
    c.close()
    return got


def test_a_batch_compacted_to_its_early_records_does_not_stall_a_reader(tmp_path):
    clock = MockClock(T0)
    with Broker(tmp_path / "d", clock=clock) as b:
        b.create_topic("t", 1, configs=COMPACT)
        # batch [k1, k0] at offsets 2-3: k0 is written again later, so compaction keeps only
        # the batch's head (offset 2); offset 3 is a gap inside a batch, below the log end
        _write(b, [[0], [0], [1, 0], [0] * 8, [0], [0], [0]])
        b.run_log_maintenance()
        # the premise: the batch at 2..3 kept only its head, so 3 is a gap inside a batch
        head = b.log("t", 0).read_batches(3)[0][0]
        assert (head.base_offset, head.last_offset, head.record_count) == (2, 3, 1)
        assert b.fetch("t", 0, 3).records[0].offset == 13     # not [] below the log end
        assert b.fetch_columns("t", 0, 3).columns.offsets[0] == 13
        got = _consume_all(b, clock)
        # 13 is the last k0 of the closed segments; 14 sits in the active segment, which
        # compaction never reads (as in Kafka), so both stay
        assert [(o, k) for o, k, _ in got] == [(2, b"k1"), (13, b"k0"), (14, b"k0")]
        assert got == _log_records(b)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.integers(0, 12), min_size=1, max_size=8), min_size=1, max_size=25))
def test_a_consumer_reads_any_compacted_log_to_its_end(tmp_path_factory, batches):
    clock = MockClock(T0)
    with Broker(tmp_path_factory.mktemp("c"), clock=clock) as b:
        b.create_topic("t", 1, configs=COMPACT)
        _write(b, batches)
        b.run_log_maintenance()
        expected = _log_records(b)
        # the last value of every key survives compaction
        last = {}
        for i, keys in enumerate(batches):
            for j, k in enumerate(keys):
                last[b"k%d" % k] = b"v%d-%d" % (i, j)
        assert {k: v for _, k, v in expected if k in last and last[k] == v} == last
        assert _consume_all(b, clock) == expected


def test_a_consumer_reaches_the_log_end_over_a_gap_at_the_end_of_the_log(tmp_path):
    """Compaction drops the tombstone that ended the closed segments, and a crash left the
    active segment empty: no record lies in [2, log end). A fetch there returns none but says
    where to go on (``next_offset``), and the consumer's position reaches the log end (Kafka's
    consumer advances to the fetched batches' next offset) instead of staying at 2 forever."""
    d = tmp_path / "d"
    clock = MockClock(T0)
    with Broker(d, clock=clock) as b:
        b.create_topic("t", 1, configs={**COMPACT, "segment.bytes": "100", "delete.retention.ms": "0"})
        b.append_records("t", 0, [(T0, b"k0", b"a", ())])                             # 0
        b.append_records("t", 0, [(T0, b"k1", b"b", ()), (T0, b"k0", None, ())])      # 1, 2 (tombstone)
        b.append_records("t", 0, [(T0, b"k2", b"c", ())])                             # 3: active segment
        clock.advance(1000)
        b.run_log_maintenance()
        active = b.log("t", 0).segments[-1].path
    with open(active, "r+b") as f:      # torn inside its first batch: recovery empties it
        f.truncate(10)
    with pytest.warns(RuntimeWarning) as reported, Broker(d, clock=clock) as b:
        assert b.list_offsets("t", 0, -1)[0] == 3
        res = b.fetch("t", 0, 2)
        assert res.records == [] and res.next_offset == 3
        assert b.fetch_columns("t", 0, 2).next_offset == 3
        assert [(o, k) for o, k, _ in _consume_all(b, clock)] == [(1, b"k1")]
        c = Consumer(b, auto_offset_reset="earliest", clock=clock)
        c.assign([TopicPartition("t", 0)])
        for _ in range(3):
            c.poll(timeout_ms=0)
        assert c.position(TopicPartition("t", 0)) == 3
        c.close()
    assert any("flushed records are missing" in str(w.message) for w in reported)   # the loss is reported
