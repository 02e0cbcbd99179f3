"""The partition log: offsets, rolls, index lookups, reads, time lookups, reopen, errors, threads."""

from __future__ import annotations

import os
import random
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkasim.clock import MockClock
from kafkasim.config import LogConfig
from kafkasim.errors import (
    CorruptRecordError, InvalidRecordError, InvalidTimestampError, KafkaStorageError, OffsetOutOfRangeError,
    RecordBatchTooLargeError, RecordTooLargeError,
)
from kafkasim.storage import layout
from kafkasim.records import record_batch as rb
from kafkasim.storage.log import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE, Log

from storage_helpers import T0, make_records, read_all


def test_new_log_is_empty_and_creates_its_directory(tmp_path, clock):
    d = tmp_path / "orders-0"
    log = Log(str(d), clock=clock)
    assert d.is_dir()
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    assert log.read(0) == []
    assert log.offset_for_time(0) is None
    assert [s.base_offset for s in log.segments] == [0]
    assert os.path.exists(d / "00000000000000000000.log")
    log.close()


def test_offsets_are_assigned_by_the_log_and_contiguous(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), clock=clock)
    h1 = log.append(make_records(0, 3))
    h2 = log.append_batch(rb.encode_batch(999, [(0, T0, b"a", b"b", ()), (1, T0, b"c", b"d", ())]))
    assert (h1.base_offset, h1.last_offset) == (0, 2)
    assert (h2.base_offset, h2.last_offset) == (3, 4)
    assert log.log_end_offset == log.high_watermark == 5
    assert [r.offset for r in log.read(0)] == [0, 1, 2, 3, 4]
    assert [r.offset for r in log.read(3)] == [3, 4]
    assert [r.offset for r in log.read(1)] == [1, 2, 3, 4]   # records before the offset are dropped
    log.close()


def test_round_trip_across_many_rolls_and_index_finds_every_offset(tmp_path, clock, small_config):
    log = Log(str(tmp_path / "t-0"), small_config, clock)
    rng = random.Random(7)
    expected = []
    n = 0
    for _ in range(300):
        k = rng.randint(1, 6)
        recs = make_records(n, k, size=rng.randint(1, 120))
        log.append(recs)
        expected.extend(recs)
        n += k
    assert log.log_end_offset == n
    segs = log.segments
    assert len(segs) > 20, "segment.bytes=2048 must roll many segments"
    assert all(s.size_bytes <= 2048 for s in segs)
    assert [s.base_offset for s in segs] == sorted(s.base_offset for s in segs)
    got = read_all(log)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == \
        [(i, ts, k, v) for i, (ts, k, v, _) in enumerate(expected)]
    for o in range(n):  # the index + header walk lands on the batch holding every offset
        first = log.read(o, 1)[0]
        assert (first.offset, first.value) == (o, expected[o][2])
    log.close()
    reopened = Log(str(tmp_path / "t-0"), small_config, clock)
    assert reopened.recovery_report == []
    assert reopened.log_end_offset == n
    assert [r.value for r in read_all(reopened)] == [e[2] for e in expected]
    reopened.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.tuples(st.integers(0, 10_000), st.binary(max_size=40),
                                           st.one_of(st.none(), st.binary(max_size=200))),
                                 min_size=1, max_size=8), min_size=1, max_size=40),
       segment_bytes=st.integers(600, 5000), interval=st.integers(0, 700))
def test_round_trip_property(tmp_path_factory, batches, segment_bytes, interval):
    d = tmp_path_factory.mktemp("prop")
    cfg = LogConfig.from_overrides({"segment.bytes": segment_bytes, "index.interval.bytes": interval})
    log = Log(str(d / "p-0"), cfg, MockClock(T0))
    flat = []
    for b in batches:
        recs = [(T0 + ts, k, v, (("h", k),)) for ts, k, v in b]
        log.append(recs)
        flat.extend(recs)
    got = read_all(log)
    assert [(r.timestamp, r.key, r.value, r.headers) for r in got] == [(a, b, c, tuple(d)) for a, b, c, d in flat]
    for o in range(len(flat)):  # the sparse index + header walk finds every offset's batch
        assert log.read(o, 1)[0].offset == o
    log.close()


def test_read_bounds_and_max_bytes(tmp_path, clock, small_config):
    log = Log(str(tmp_path / "t-0"), small_config, clock)
    for i in range(20):
        log.append(make_records(i * 5, 5, size=50))
    with pytest.raises(OffsetOutOfRangeError, match="offset 101"):
        log.read(101)
    with pytest.raises(OffsetOutOfRangeError, match="-1"):
        log.read(-1)
    assert log.read(100) == []
    # at least one whole batch even when it is larger than max_bytes
    assert [r.offset for r in log.read(7, max_bytes=1)] == [7, 8, 9]
    # a batch that would exceed max_bytes is not returned
    batches = log.read_batches(0, max_bytes=700)
    assert sum(h.size for h, _ in batches) <= 700 and len(batches) >= 1
    for h, raw in batches:
        assert len(raw) == h.size
        rb.verify(raw, 0, h)
    log.close()


def test_offset_for_time_matches_a_scan(tmp_path, clock, small_config):
    log = Log(str(tmp_path / "t-0"), small_config, clock)
    rng = random.Random(3)
    stamps = []
    for _ in range(150):
        k = rng.randint(1, 4)
        recs = [(T0 + rng.randint(0, 5000), b"k", b"v" * rng.randint(1, 60), ()) for _ in range(k)]
        stamps.extend(r[0] for r in recs)
        log.append(recs)
    assert len(log.segments) > 5
    for target in [T0 - 1, T0, T0 + 1, T0 + 2500, T0 + 4999, T0 + 5000, T0 + 5001] + \
            [T0 + rng.randint(0, 5000) for _ in range(60)]:
        want = next(((i, t) for i, t in enumerate(stamps) if t >= target), None)
        assert log.offset_for_time(target) == want, target
    log.close()
    log = Log(str(tmp_path / "t-0"), small_config, clock)
    assert log.offset_for_time(T0 + 2500) == next((i, t) for i, t in enumerate(stamps) if t >= T0 + 2500)
    log.close()


def test_segment_ms_rolls_by_the_injected_clock(tmp_path, clock):
    cfg = LogConfig.from_overrides({"segment.ms": 1000})
    log = Log(str(tmp_path / "t-0"), cfg, clock)
    log.append(make_records(0, 1))
    clock.advance(999)
    log.append(make_records(1, 1))
    assert len(log.segments) == 1
    clock.advance(1)
    log.append(make_records(2, 1))
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_log_append_time_stamps_the_clock(tmp_path, clock):
    cfg = LogConfig.from_overrides({"message.timestamp.type": "LogAppendTime"})
    log = Log(str(tmp_path / "t-0"), cfg, clock)
    clock.set(T0 + 12345)
    h = log.append_batch(rb.encode_batch(0, [(0, 5, b"a", b"1", ()), (1, 9, b"b", b"2", ())]))
    assert h.attributes & rb.ATTR_TIMESTAMP_TYPE_LOG_APPEND
    assert h.max_timestamp == T0 + 12345
    assert [r.timestamp for r in log.read(0)] == [T0 + 12345] * 2
    log.close()


def test_bad_batches_are_rejected_and_nothing_is_written(tmp_path, clock):
    cfg = LogConfig.from_overrides({"max.message.bytes": 500, "segment.bytes": 400})
    log = Log(str(tmp_path / "t-0"), cfg, clock)
    good = rb.encode_batch(0, [(0, T0, b"k", b"v", ())])
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append_batch(bytes(bad_crc))
    with pytest.raises(CorruptRecordError):
        log.append_batch(good[:-3])
    with pytest.raises(RecordTooLargeError, match="max.message.bytes"):
        log.append([(T0, b"k", b"x" * 600, ())])
    with pytest.raises(RecordBatchTooLargeError, match="segment.bytes"):
        log.append([(T0, b"k", b"x" * 420, ())])
    with pytest.raises(InvalidRecordError):
        log.append([])
    with pytest.raises(InvalidTimestampError, match="negative timestamp"):
        log.append([(-5, b"k", b"v", ())])
    with pytest.raises(InvalidRecordError):
        log.append_batch("not bytes")
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    log.append_batch(good)
    assert log.log_end_offset == 1
    log.close()


def test_compacted_topic_rejects_keyless_records(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), LogConfig.from_overrides({"cleanup.policy": "compact"}), clock)
    with pytest.raises(InvalidRecordError, match="without key"):
        log.append([(T0, b"k", b"v", ()), (T0, None, b"v", ())])
    with pytest.raises(InvalidRecordError, match="without key"):
        log.append_batch(rb.encode_batch(0, [(0, T0, None, b"v", ())]))
    assert log.log_end_offset == 0
    log.close()


def test_producer_fields_round_trip(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), clock=clock)
    log.append(make_records(0, 2))
    log.append(make_records(2, 3), producer_id=42, producer_epoch=3, base_sequence=10)
    recs = log.read(0)
    assert [(r.producer_id, r.producer_epoch, r.sequence) for r in recs] == \
        [(-1, -1, -1)] * 2 + [(42, 3, 10), (42, 3, 11), (42, 3, 12)]
    log.close()


def test_reopen_after_unclean_stop_sees_everything_flushed(tmp_path, clock, small_config):
    d = str(tmp_path / "t-0")
    log = Log(d, small_config, clock)
    for i in range(50):
        log.append(make_records(i * 3, 3))
    log.flush()
    log.append(make_records(150, 2))  # written, not flushed: still in the page cache
    # no close(): the next open must recover without a clean-shutdown marker
    assert not os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
    again = Log(d, small_config, clock)
    assert again.log_end_offset == 152
    assert [r.offset for r in read_all(again)] == list(range(152))
    again.close()
    assert os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))


def test_flush_messages_moves_the_recovery_point(tmp_path, clock):
    d = tmp_path / "t-0"
    log = Log(str(d), LogConfig.from_overrides({"flush.messages": 4}), clock)
    log.append(make_records(0, 3))
    assert (d / RECOVERY_POINT_FILE).read_text().split()[0] == "0"
    log.append(make_records(3, 1))
    assert (d / RECOVERY_POINT_FILE).read_text().split()[0] == "4"
    log.close()


def test_flush_ms_flushes_on_append_and_maybe_flush(tmp_path, clock):
    d = tmp_path / "t-0"
    log = Log(str(d), LogConfig.from_overrides({"flush.ms": 100}), clock)
    log.append(make_records(0, 1))
    assert not log.maybe_flush()
    clock.advance(100)
    assert log.maybe_flush()
    assert (d / RECOVERY_POINT_FILE).read_text().split()[0] == "1"
    log.close()


def test_torn_tail_is_truncated_and_reported(tmp_path, clock, small_config):
    d = str(tmp_path / "t-0")
    log = Log(d, small_config, clock)
    for i in range(10):
        log.append(make_records(i, 1))
    log.flush()
    active = log.segments[-1].path
    size = os.path.getsize(active)
    log.append(make_records(10, 4, size=100))
    torn_at = os.path.getsize(active)
    with open(active, "r+b") as f:  # the last batch only half made it to disk
        f.truncate(torn_at - 37)
    again = Log(d, small_config, clock)
    assert again.log_end_offset == 10
    assert any("truncated" in line and str(torn_at - (torn_at - size)) in line for line in again.recovery_report), \
        again.recovery_report
    assert os.path.getsize(active) == size
    assert [r.offset for r in read_all(again)] == list(range(10))
    again.append(make_records(10, 1))
    assert again.log_end_offset == 11
    again.close()


def test_missing_indexes_are_rebuilt(tmp_path, clock, small_config):
    d = tmp_path / "t-0"
    log = Log(str(d), small_config, clock)
    for i in range(100):
        log.append(make_records(i, 1, size=40))
    log.close()
    for p in d.iterdir():
        if p.suffix in (".index", ".timeindex"):
            p.unlink()
    log = Log(str(d), small_config, clock)
    assert [r.offset for r in read_all(log)] == list(range(100))
    assert all(log.read(o, 1)[0].offset == o for o in range(100))
    assert log.offset_for_time(T0 + 50) == (50, T0 + 50)
    assert any("index rebuilt" in line for line in log.recovery_report)
    log.close()
    assert all((d / layout.segment_name(s, layout.INDEX_SUFFIX)).exists()
               for s, _ in layout.list_segments(str(d)))


def test_opening_does_not_read_closed_segments(tmp_path, clock, small_config):
    d = tmp_path / "t-0"
    log = Log(str(d), small_config, clock)
    for i in range(100):
        log.append(make_records(i, 1, size=40))
    log.close()
    segs = layout.list_segments(str(d))
    assert len(segs) > 3
    for _, path in segs[:-1]:  # scribble over every closed segment, same size
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.write(b"\xAB" * size)
    log = Log(str(d), small_config, clock)       # would fail or report if it read them
    assert log.recovery_report == []
    assert log.log_end_offset == 100
    with pytest.raises(CorruptRecordError):
        log.read(0)
    log.close()


def test_concurrent_appenders_get_contiguous_offsets_and_intact_batches(tmp_path, clock, small_config):
    log = Log(str(tmp_path / "t-0"), small_config, clock)
    threads, per_thread, per_batch = 4, 60, 3
    errors = []

    def work(t):
        try:
            for i in range(per_thread):
                log.append([(T0, b"t%d" % t, b"%d-%d-%d" % (t, i, j), ()) for j in range(per_batch)])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    recs = read_all(log)
    assert [r.offset for r in recs] == list(range(threads * per_thread * per_batch))
    seen = {t: 0 for t in range(threads)}
    for i in range(0, len(recs), per_batch):
        batch = recs[i:i + per_batch]
        t, n, _ = batch[0].value.split(b"-")
        t, n = int(t), int(n)
        assert [r.value for r in batch] == [b"%d-%d-%d" % (t, n, j) for j in range(per_batch)]
        assert n == seen[t]  # each thread's batches in its own order
        seen[t] += 1
    log.close()


def test_concurrent_readers_and_a_writer(tmp_path, clock, small_config):
    """Two threads scan the log from offset 0 to its end again and again while the main thread
    appends 200 records (many rolls of the 2 KB segments): every scan is contiguous from 0 to the
    end it saw, each record has the key and value appended at its offset, and no read raises.
    A reader that raises or stops early is a failure, and each reader's last scan starts after
    the last append and must see all 200 records."""
    log = Log(str(tmp_path / "t-0"), small_config, clock)
    stop = threading.Event()
    problems: list = []
    last_scan_end = {}

    def reader(k: int) -> None:
        try:
            while True:
                final = stop.is_set()          # read before the scan: a final scan sees every append
                leo = log.log_end_offset
                o = 0
                while o < leo:
                    recs = log.read(o, 2048)
                    if not recs or recs[0].offset != o:
                        problems.append((k, o, recs[:1]))
                        return
                    for r in recs:
                        (_, key, value, _), = make_records(r.offset, 1)
                        if (r.key, r.value) != (key, value):
                            problems.append((k, r.offset, r.key, r.value))
                            return
                    o = recs[-1].offset + 1
                last_scan_end[k] = o
                if final:
                    return
        except BaseException as exc:           # a reader that dies fails the test
            problems.append((k, repr(exc)))

    rs = [threading.Thread(target=reader, args=(k,)) for k in range(2)]
    for r in rs:
        r.start()
    for i in range(200):
        log.append(make_records(i, 1))
    stop.set()
    for r in rs:
        r.join(60)
    assert not any(r.is_alive() for r in rs), "a reader hung"
    assert problems == []
    assert last_scan_end == {0: 200, 1: 200}
    log.close()


def test_closed_log_refuses_work_and_delete_removes_the_directory(tmp_path, clock):
    d = tmp_path / "t-0"
    log = Log(str(d), clock=clock)
    log.append(make_records(0, 1))
    log.close()
    log.close()  # idempotent
    with pytest.raises(KafkaStorageError, match="closed"):
        log.append(make_records(1, 1))
    log2 = Log(str(d), clock=clock)
    log2.delete()
    assert not d.exists()
    assert not any(p.name.endswith("-delete") for p in tmp_path.iterdir())


def test_update_config_applies_to_next_append(tmp_path, clock):
    log = Log(str(tmp_path / "t-0"), clock=clock)
    log.append(make_records(0, 1, size=100))
    log.update_config(LogConfig.from_overrides({"max.message.bytes": 100}))
    with pytest.raises(RecordTooLargeError):
        log.append(make_records(1, 1, size=100))
    log.close()


def test_interrupted_compaction_and_delete_leftovers_are_finished_on_open(tmp_path, clock, small_config):
    d = tmp_path / "t-0"
    log = Log(str(d), small_config, clock)
    for i in range(60):
        log.append(make_records(i, 1, size=40))
    log.close()
    segs = layout.list_segments(str(d))
    first_base, first_path = segs[0]
    # a finished compaction output whose swap was interrupted: same batches minus the first
    with open(first_path, "rb") as f:
        data = f.read()
    h = rb.decode_header(data)
    with open(first_path + ".swap", "wb") as f:
        f.write(data[h.size:])
    (d / "00000000000000000000.log.cleaned").write_bytes(b"junk")
    (d / "00000000000000099999.index").write_bytes(b"")              # orphan index
    (d / "recovery-point.tmp").write_text("garbage")
    (d / (os.path.basename(segs[1][1]) + ".deleted")).write_bytes(b"x")
    log = Log(str(d), small_config, clock)
    names = os.listdir(d)
    assert not any(n.endswith((".swap", ".cleaned", ".tmp", ".deleted")) for n in names)
    assert "00000000000000099999.index" not in names
    assert any("swap" in line for line in log.recovery_report)
    recs = read_all(log)
    assert recs[0].offset == h.last_offset + 1 and [r.offset for r in recs] == list(range(h.last_offset + 1, 60))
    log.close()


def test_a_recovery_point_off_a_batch_boundary_is_not_trusted(tmp_path, clock):
    d = tmp_path / "t-0"
    log = Log(str(d), clock=clock)
    for i in range(20):
        log.append(make_records(i, 1))
    log.flush()
    rp = (d / RECOVERY_POINT_FILE).read_text().split()
    (d / RECOVERY_POINT_FILE).write_text(f"{rp[0]} {rp[1]} {int(rp[2]) - 7} {rp[3]} {rp[4]}\n")
    again = Log(str(d), clock=clock)          # unclean: validates the whole active segment instead
    assert any("recovery point" in line for line in again.recovery_report)
    assert again.log_end_offset == 20 and [r.offset for r in read_all(again)] == list(range(20))
    again.close()


def test_closed_segment_files_are_closed_beyond_the_cap(tmp_path, clock, monkeypatch):
    import kafkasim.storage.log as storage_log
    monkeypatch.setattr(storage_log, "MAX_OPEN_CLOSED_SEGMENTS", 3)
    cfg = LogConfig.from_overrides({"segment.bytes": 200})
    log = Log(str(tmp_path / "t-0"), cfg, clock)
    for i in range(40):
        log.append(make_records(i, 1, size=100))
    assert len(log.segments) > 10
    assert [r.offset for r in read_all(log)] == list(range(40))
    def target(fd):
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor listdir itself used
            return ""
    open_segments = [f for f in os.listdir("/proc/self/fd") if target(f).startswith(str(tmp_path))]
    assert len(open_segments) <= 3 + 1, open_segments   # the cap + the active segment
    log.close()


def test_a_failed_write_becomes_kafka_storage_error_and_leaves_nothing_behind(tmp_path):
    """A child whose file-size limit makes a write fail (EFBIG) mid-batch."""
    import subprocess
    import sys
    import textwrap
    d = str(tmp_path / "t-0")
    script = textwrap.dedent(f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        from kafkasim.errors import KafkaStorageError
        from kafkasim.storage.log import Log
        log = Log({d!r})
        resource.setrlimit(resource.RLIMIT_FSIZE, (5000, 5000))
        for i in range(1000):
            try:
                log.append([(1_700_000_000_000, b"k", b"x" * 300, ())])
            except KafkaStorageError as exc:
                print("failed", log.log_end_offset, exc, flush=True)
                print(len(log.read(0, 1 << 20)), flush=True)
                sys.exit(0)
        print("never failed")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[0].startswith("failed") and "File too large" in lines[0], r.stdout
    leo = int(lines[0].split()[1])
    assert int(lines[1]) == leo
    seg = os.path.join(d, "00000000000000000000.log")
    assert os.path.getsize(seg) % rb.decode_header(open(seg, "rb").read()).size == 0  # whole batches only
    log = Log(d)
    assert log.recovery_report == [] and log.log_end_offset == leo
    assert [r.offset for r in read_all(log)] == list(range(leo))
    log.close()


def test_a_clean_open_reads_a_bounded_amount_of_the_active_segment(tmp_path, clock, monkeypatch):
    d = str(tmp_path / "t-0")
    log = Log(d, clock=clock)                       # default segment.bytes: one big active segment
    for _ in range(300):                            # equal timestamps: the worst case for the time index
        log.append([(T0, b"k", b"x" * 10_000, ())])
    log.close()
    read = []
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, pos: read.append(n) or real_pread(fd, n, pos))
    log = Log(d, clock=clock)
    assert log.recovery_report == [] and log.log_end_offset == 300
    assert sum(read) < 64 * 1024, f"opening read {sum(read)} bytes of a {log.size_in_bytes}-byte log"
    log.close()


def test_a_read_uses_the_index_not_a_scan_from_the_segment_start(tmp_path, clock, monkeypatch):
    log = Log(str(tmp_path / "t-0"), LogConfig(), clock)   # one segment, index entry every 4 KiB
    for i in range(2000):
        log.append([(T0 + i, b"k%d" % i, b"x" * 1000, ())])
    assert len(log.segments) == 1 and log.size_in_bytes > 2_000_000
    read = []
    real_pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, pos: read.append(n) or real_pread(fd, n, pos))
    for target in (1999, 1500, 3):
        read.clear()
        assert log.read(target, max_bytes=1)[0].offset == target
        assert sum(read) < 32 * 1024, f"read({target}) pulled {sum(read)} bytes"
        read.clear()
        assert log.offset_for_time(T0 + target) == (target, T0 + target)
        assert sum(read) < 64 * 1024, f"offset_for_time pulled {sum(read)} bytes"
    log.close()
