"""Retention (retention.bytes / retention.ms), compaction and the background LogCleaner."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.clock import MockClock
from kafkasim.config import LogConfig
from kafkasim.errors import OffsetOutOfRangeError
from kafkasim.storage.cleaner import LogCleaner
from kafkasim.records import record_batch as rb
from kafkasim.storage.log import Log

from storage_helpers import T0, read_all


def fill(log: Log, n: int, ts: int = T0, size: int = 100) -> None:
    """``n`` one-record batches, all stamped ``ts``."""
    for i in range(n):
        log.append([(ts, b"k%d" % i, b"v" * size, ())])


# -- retention.bytes -------------------------------------------------------------------------
def test_retention_bytes_deletes_oldest_closed_segments_as_kafka(tmp_path, clock):
    cfg = LogConfig.from_overrides({"segment.bytes": 1000, "retention.bytes": 2500, "retention.ms": -1})
    log = Log(str(tmp_path / "t-0"), cfg, clock)
    fill(log, 60)
    before = log.segments
    total = sum(s.size_bytes for s in before)
    # Kafka: delete the oldest while (size - segment size) >= retention.bytes
    expect, diff = 0, total - 2500
    for s in before[:-1]:
        if diff - s.size_bytes < 0:
            break
        diff -= s.size_bytes
        expect += 1
    assert expect > 0
    assert log.delete_old_segments() == expect
    after = log.segments
    assert after == before[expect:]
    assert log.size_in_bytes >= 2500
    assert log.log_start_offset == after[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0)
    assert read_all(log)[0].offset == log.log_start_offset
    assert not any(p.endswith(".deleted") for p in os.listdir(tmp_path / "t-0"))
    assert log.delete_old_segments() == 0
    log.close()
    again = Log(str(tmp_path / "t-0"), cfg, clock)
    assert again.log_start_offset == after[0].base_offset
    again.close()


def test_retention_never_deletes_the_active_segment(tmp_path, clock):
    cfg = LogConfig.from_overrides({"retention.bytes": 0, "retention.ms": 0})
    log = Log(str(tmp_path / "t-0"), cfg, clock)
    fill(log, 5)
    clock.advance(10**9)
    assert log.delete_old_segments() == 0
    assert log.log_end_offset == 5 and log.log_start_offset == 0
    log.close()


# -- retention.ms --------------------------------------------------------------------------
def test_retention_ms_uses_largest_timestamp_and_the_injected_clock(tmp_path):
    clock = MockClock(T0)
    cfg = LogConfig.from_overrides({"segment.bytes": 1000, "retention.ms": 60_000})
    log = Log(str(tmp_path / "t-0"), cfg, clock)
    fill(log, 20, ts=T0)                    # old records
    fill(log, 20, ts=T0 + 50_000)           # newer ones
    segs = log.segments
    old = [s for s in segs[:-1] if s.max_timestamp == T0]
    assert old
    clock.set(T0 + 60_000)             # exactly retention.ms: not yet (Kafka: strictly greater)
    assert log.delete_old_segments() == 0
    clock.advance(1)
    n = log.delete_old_segments()
    assert n == len(old)
    assert all(s.max_timestamp > T0 for s in log.segments)
    log.close()


def test_delete_policy_only(tmp_path, clock):
    cfg = LogConfig.from_overrides({"segment.bytes": 1000, "retention.bytes": 0, "cleanup.policy": "compact"})
    log = Log(str(tmp_path / "t-0"), cfg, clock)
    fill(log, 30)
    assert log.delete_old_segments() == 0
    log.close()


# -- compaction ------------------------------------------------------------------------------
COMPACT = {"cleanup.policy": "compact", "segment.bytes": 600, "delete.retention.ms": 1000}


def test_compaction_keeps_the_last_value_per_key_and_offsets(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), LogConfig.from_overrides(COMPACT), clock)
    latest = {}
    for i in range(120):
        key = b"key-%d" % (i % 7)
        log.append([(T0 + i, key, b"value-%d" % i, (("h", b"%d" % i),))])
        latest[key] = i
    active_base = log.segments[-1].base_offset
    stats = log.compact()
    assert stats["segments_cleaned"] > 0 and stats["records_superseded"] > 0
    recs = read_all(log)
    closed = [r for r in recs if r.offset < active_base]
    # each key appears at most once among the closed segments, with its last value there
    keys = [r.key for r in closed]
    assert len(keys) == len(set(keys))
    for r in recs:
        assert r.value == b"value-%d" % r.offset and r.headers == (("h", b"%d" % r.offset),)
    for key, off in latest.items():
        assert any(r.offset == off for r in recs), key
    # offsets kept, increasing, start unchanged
    assert log.log_start_offset == 0 and log.log_end_offset == 120
    assert [r.offset for r in recs] == sorted(r.offset for r in recs)
    assert all(log.read(r.offset, 1)[0].offset == r.offset for r in recs)
    assert log.read(0, 1)[0].offset >= 0          # offset 0 was compacted away: next record
    log.close()
    again = Log(str(tmp_path / "t-0"), LogConfig.from_overrides(COMPACT), clock)
    assert [(r.offset, r.value) for r in read_all(again)] == [(r.offset, r.value) for r in recs]
    assert again.compact()["segments_cleaned"] == 0   # idempotent
    again.close()


def test_tombstones_survive_delete_retention_then_go(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), LogConfig.from_overrides(COMPACT), clock)
    log.append([(T0, b"a", b"1", ()), (T0, b"b", b"2", ())])
    log.append([(T0 + 1, b"a", None, ())])                      # tombstone for a
    for i in range(40):
        log.append([(T0 + 2, b"filler-%d" % i, b"x" * 50, ())])  # roll the tombstone into a closed segment
    clock.set(T0 + 1 + 999)
    log.compact()
    vals = {r.key: r.value for r in read_all(log)}
    assert b"a" in vals and vals[b"a"] is None                  # tombstone kept: not yet older than 1000 ms
    assert vals[b"b"] == b"2"
    clock.set(T0 + 1 + 1001)
    stats = log.compact()
    assert stats["tombstones_dropped"] == 1
    vals = {r.key: r.value for r in read_all(log)}
    assert b"a" not in vals and vals[b"b"] == b"2"
    log.close()


def test_min_compaction_lag_protects_young_segments(tmp_path, clock):
    cfg = LogConfig.from_overrides(dict(COMPACT, **{"min.compaction.lag.ms": 10_000}))
    log = Log(str(tmp_path / "t-0"), cfg, clock)
    for i in range(60):
        log.append([(T0, b"same", b"v%d" % i, ())])
    assert log.compact()["segments_scanned"] == 0
    clock.advance(10_000)
    assert log.compact()["segments_cleaned"] > 0
    log.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.integers(0, 5), st.one_of(st.none(), st.binary(min_size=1, max_size=30))),
                    min_size=1, max_size=120))
def test_compaction_property_last_write_wins(tmp_path_factory, ops):
    d = tmp_path_factory.mktemp("cmp")
    clock = MockClock(T0)
    log = Log(str(d / "p-0"), LogConfig.from_overrides(
        {"cleanup.policy": "compact", "segment.bytes": 300, "delete.retention.ms": 0}), clock)
    for k, v in ops:
        log.append([(T0, b"k%d" % k, v, ())])
    before = {r.key: r.value for r in read_all(log)}           # what a full replay ends with
    clock.advance(1)
    log.compact()
    after_recs = read_all(log)
    replay = {}
    for r in after_recs:
        replay[r.key] = r.value
    live = {k: v for k, v in before.items() if v is not None}
    assert {k: v for k, v in replay.items() if v is not None} == live
    log.close()


# -- the background cleaner --------------------------------------------------------------------
def test_log_cleaner_runs_retention_and_compaction(tmp_path, clock):
    d1 = Log(str(tmp_path / "del-0"), LogConfig.from_overrides(
        {"segment.bytes": 1000, "retention.bytes": 1000}), clock)
    d2 = Log(str(tmp_path / "cmp-0"), LogConfig.from_overrides(COMPACT), clock)
    fill(d1, 40)
    for i in range(60):
        d2.append([(T0, b"same", b"v%d" % i, ())])
    cleaner = LogCleaner(lambda: [d1, d2], clock, interval_ms=20)
    totals = cleaner.run_once()
    assert totals["segments_deleted"] > 0 and totals["logs_compacted"] == 1
    assert d2.dirty_ratio() == 0.0
    fill(d1, 40)
    cleaner.start()
    try:
        deadline = time.monotonic() + 10
        while d1.log_start_offset == 0 or cleaner.passes < 2:
            assert time.monotonic() < deadline, "cleaner thread made no progress"
            time.sleep(0.02)
    finally:
        cleaner.stop()
    assert not cleaner.running and cleaner.errors == []
    d1.close()
    d2.close()
    assert cleaner.run_once()["segments_deleted"] == 0   # closed logs are skipped


def test_compaction_and_retention_run_safely_beside_appends_and_reads(tmp_path, clock):
    import threading
    cfg = LogConfig.from_overrides({"cleanup.policy": "compact,delete", "segment.bytes": 800,
                                    "retention.bytes": 20_000, "delete.retention.ms": 0})
    log = Log(str(tmp_path / "t-0"), cfg, clock)
    stop = threading.Event()
    problems = []

    def reader():
        while not stop.is_set():
            try:
                o = log.log_start_offset
                while o < log.log_end_offset:
                    recs = log.read(o, 1024)
                    if not recs:
                        break
                    offs = [r.offset for r in recs]
                    if offs != sorted(offs) or offs[0] < o or any(r.value != b"v%d" % r.offset for r in recs):
                        problems.append(recs[:2])
                        return
                    o = offs[-1] + 1
            except OffsetOutOfRangeError:
                continue  # retention moved the log start under us: start again

    def cleaner():
        while not stop.is_set():
            log.compact()
            log.delete_old_segments()

    threads = [threading.Thread(target=reader), threading.Thread(target=cleaner)]
    for t in threads:
        t.start()
    for i in range(1500):
        log.append([(T0, b"key-%d" % (i % 13), b"v%d" % i, ())])
    stop.set()
    for t in threads:
        t.join()
    assert problems == []
    assert log.log_end_offset == 1500
    final = read_all(log)
    assert final[-1].offset == 1499
    log.close()


def test_an_emptied_time_index_does_not_make_a_segment_look_expired(tmp_path, clock):
    cfg = LogConfig.from_overrides({"segment.bytes": 1000, "retention.ms": 60_000})
    log = Log(str(tmp_path / "t-0"), cfg, clock)
    fill(log, 30, ts=T0)
    log.close()
    first = sorted(p for p in os.listdir(tmp_path / "t-0") if p.endswith(".timeindex"))[0]
    (tmp_path / "t-0" / first).write_bytes(b"")      # lost its entries, still "valid" in size
    log = Log(str(tmp_path / "t-0"), cfg, clock)
    assert log.delete_old_segments() == 0             # rebuilt: largest timestamp T0, not -1
    assert log.segments[0].max_timestamp == T0
    log.close()


# -- Kafka's own cases (core LogTest: shouldDeleteSizeBasedSegments & co.) ----------------------
def kafka_log(tmp_path, clock, **overrides) -> tuple[Log, bytes]:
    """Kafka's createLog(): segment.bytes = 5 single-record batches."""
    single = rb.encode_batch(0, [(0, 10, b"test", b"test", ())])
    cfg = {"segment.bytes": 5 * len(single), "retention.ms": -1, "retention.bytes": -1}
    cfg.update(overrides)
    return Log(str(tmp_path / "kafka-0"), LogConfig.from_overrides(cfg), clock), single


def test_kafka_should_delete_size_based_segments(tmp_path, clock):
    log, single = kafka_log(tmp_path, clock)
    log.update_config(log.config.with_overrides({"retention.bytes": 10 * len(single)}))
    for _ in range(15):
        log.append_batch(single)
    assert len(log.segments) == 3
    log.delete_old_segments()
    assert len(log.segments) == 2
    assert log.log_start_offset == 5
    log.close()


def test_kafka_should_not_delete_size_based_segments_when_under_retention_size(tmp_path, clock):
    log, single = kafka_log(tmp_path, clock)
    log.update_config(log.config.with_overrides({"retention.bytes": 15 * len(single)}))
    for _ in range(15):
        log.append_batch(single)
    log.delete_old_segments()
    assert len(log.segments) == 3
    log.close()


@pytest.mark.parametrize("policy, remaining", [("delete", 1), ("compact,delete", 1), ("compact", 3)])
def test_kafka_time_based_deletion_by_cleanup_policy(tmp_path, clock, policy, remaining):
    log, single = kafka_log(tmp_path, clock, **{"retention.ms": 10_000, "cleanup.policy": policy})
    for _ in range(15):
        log.append_batch(single)           # timestamp 10: long expired by the clock
    log.delete_old_segments()
    assert len(log.segments) == remaining
    log.close()
