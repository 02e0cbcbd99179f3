"""Iteration and positions are kafka-python's: ``next()`` advances the position one record
at a time, seek/pause/rebalance take effect on the very next record, and
``poll(update_offsets=False)`` returns records without moving positions."""

from __future__ import annotations

import pytest

from kafkasim.broker import Broker
from kafkasim.consumer import Consumer
from kafkasim.types import OffsetAndMetadata, TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture
def broker(tmp_path, clock):
    b = Broker(tmp_path / "data", clock=clock)
    b.create_topic("t", 2)
    for p in range(2):
        b.append_records("t", p, [(clock.now_ms() + i, f"k{i}".encode(), f"v{p}-{i}".encode(), ())
                                  for i in range(10)])
    yield b
    b.close()


def _assigned(broker, *tps, **configs):
    c = Consumer(broker, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False,
                 consumer_timeout_ms=500, **configs)
    c.assign(list(tps))
    return c


def test_next_advances_the_position_by_one_record_and_commit_stores_it(broker):
    c = _assigned(broker, T0)
    assert next(c).offset == 0
    assert c.position(T0) == 1
    c.commit()
    assert broker.offset_fetch("g") == {T0: OffsetAndMetadata(1)}
    assert [next(c).offset for _ in range(3)] == [1, 2, 3] and c.position(T0) == 4


def test_seek_during_iteration_takes_effect_on_the_next_record(broker):
    c = _assigned(broker, T0)
    assert next(c).offset == 0
    c.seek(T0, 7)
    assert [r.offset for r in c] == [7, 8, 9]
    c.seek(T0, 2)                                   # backwards, after the end was reached
    assert next(c).offset == 2


def test_pause_during_iteration_stops_that_partition_at_once(broker):
    c = _assigned(broker, T0, T1)
    first = next(c)
    tp = TopicPartition(first.topic, first.partition)
    other = T1 if tp == T0 else T0
    c.pause(tp)
    rest = list(c)
    assert {r.partition for r in rest} == {other.partition}
    assert [r.offset for r in rest] == list(range(10))
    assert c.position(tp) == 1
    c.resume(tp)
    assert [r.offset for r in c] == list(range(1, 10))


def test_poll_update_offsets_false_returns_records_without_moving_positions(broker):
    c = _assigned(broker, T0, max_poll_records=4)
    assert [r.offset for r in c.poll(update_offsets=False)[T0]] == [0, 1, 2, 3]
    assert c.position(T0) == 0
    assert [r.offset for r in c.poll(update_offsets=False)[T0]] == [0, 1, 2, 3]
    assert [r.offset for r in c.poll()[T0]] == [0, 1, 2, 3]
    assert c.position(T0) == 4


def test_mixing_poll_and_next_delivers_each_record_once(broker):
    c = _assigned(broker, T0, max_poll_records=5)
    got = [next(c).offset]
    got += [r.offset for r in c.poll()[T0]]
    got += [r.offset for r in c]
    assert got == list(range(10))


def test_a_member_that_lost_its_partitions_yields_none_of_their_buffered_records(broker, clock):
    cfg = dict(group_id="g", auto_offset_reset="earliest", enable_auto_commit=False,
               session_timeout_ms=10_000, heartbeat_interval_ms=3_000, consumer_timeout_ms=500)
    a = Consumer(broker, "t", client_id="a", **cfg)
    for _ in range(40):                               # join, without consuming
        clock.advance(100)
        a.poll(timeout_ms=0, max_records=1, update_offsets=False)
    first = next(a)                                   # a owns both partitions, 19 buffered
    assert a.assignment() == {T0, T1}
    clock.advance(11_000)                             # a misses its session timeout
    b = Consumer(broker, "t", client_id="b", **cfg)
    for _ in range(40):
        clock.advance(100)
        b.poll(timeout_ms=0, max_records=1, update_offsets=False)
    assert b.assignment() == {T0, T1}
    a.tick()                                          # heartbeat: unknown member → lost
    assert a.assignment() == set()
    assert list(a) == []                              # nothing of b's partitions
    assert first.offset == 0


def test_iterating_from_an_out_of_range_position_resets_it_and_advances_per_record(broker):
    c = _assigned(broker, T0)
    c.seek(T0, 500)                                   # past the end: reset to earliest
    assert next(c).offset == 0 and c.position(T0) == 1
    c.seek(T0, 500)
    assert [r.offset for r in c.poll(update_offsets=False)[T0]][:1] == [0]
    assert c.position(T0) == 0                        # the reset moved it; the records did not


def test_after_a_cooperative_rebalance_the_old_owner_yields_nothing_of_the_revoked_partition(broker, clock):
    cfg = dict(group_id="g", auto_offset_reset="earliest", enable_auto_commit=False,
               consumer_timeout_ms=500, partition_assignment_strategy=["cooperative-sticky"])
    a = Consumer(broker, "t", client_id="a", **cfg)
    for _ in range(40):
        clock.advance(100)
        a.poll(timeout_ms=0, max_records=1, update_offsets=False)
    assert next(a).offset == 0 and a.assignment() == {T0, T1}   # the rest of the batch buffered
    a.commit()
    b = Consumer(broker, "t", client_id="b", **cfg)
    for _ in range(100):                                         # a keeps one, gives one to b
        clock.advance(100)
        a.poll(timeout_ms=0, max_records=1, update_offsets=False)
        b.poll(timeout_ms=0, max_records=1, update_offsets=False)
    (kept,), (given,) = a.assignment(), b.assignment()
    rest = list(a)
    assert {r.partition for r in rest} <= {kept.partition}
    from_b = list(b)
    assert {r.partition for r in from_b} == {given.partition}
    seen = sorted((r.partition, r.offset) for r in rest + from_b)
    assert len(seen) == len(set(seen))                           # no record processed twice
