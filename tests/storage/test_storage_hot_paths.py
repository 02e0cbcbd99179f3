"""The fast append/read paths give exactly what the general ones give.

- ``Log.read_columns`` returns the same records as ``Log.read`` (offsets, timestamps,
  keys, values, headers), including mid-batch starts, compacted batches and segment rolls.
- ``encode_records_parts`` joins to ``encode_records`` and its header is the parsed one.
- ``encode_trusted_batch`` is byte-identical to ``encode_batch`` for producer-shaped records.
- ``append_batch`` (now validated with ``decode_columns``) still rejects what it rejected.
- a read-only view of ``bytes`` is validated and written as it is, a mutable buffer copied.
"""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings, strategies as st

from kafkasim.clock import SystemClock
from kafkasim.config import LogConfig
from kafkasim.errors import CorruptRecordError, InvalidRecordError
from kafkasim.records import record_batch as rb
from kafkasim.storage.log import Log, RecordColumns
from kafkasim.storage.validation import validate_batch
from storage_helpers import T0

_key = st.one_of(st.none(), st.binary(max_size=12))
_headers = st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))),
                    max_size=2).map(tuple)
_record = st.tuples(st.integers(0, 10_000), _key, st.binary(max_size=30), _headers)


def _as_columns(records) -> RecordColumns:
    return RecordColumns([r.offset for r in records], [r.timestamp for r in records],
                         [r.key for r in records], [r.value for r in records],
                         [tuple(r.headers) for r in records])


@settings(max_examples=40, deadline=None)
@given(batches=st.lists(st.lists(_record, min_size=1, max_size=20), min_size=1, max_size=8),
       start_frac=st.floats(0, 1), max_bytes=st.sampled_from([1, 300, 1 << 20]))
def test_read_columns_returns_what_read_returns(tmp_path_factory, batches, start_frac, max_bytes):
    d = tmp_path_factory.mktemp("cols")
    log = Log(str(d / "t-0"), LogConfig.from_overrides({"segment.bytes": 2048,
                                                         "index.interval.bytes": 256}))
    try:
        for b in batches:
            log.append([(T0 + ts, k, v, h) for ts, k, v, h in b])
        start = int(start_frac * (log.log_end_offset - 1))
        cols = log.read_columns(start, max_bytes)
        assert cols == _as_columns(log.read(start, max_bytes))
        assert cols.offsets and cols.offsets[0] == start
    finally:
        log.close()


def test_read_columns_of_a_compacted_batch_keeps_its_offsets(tmp_path):
    log = Log(str(tmp_path / "c-0"))
    # a compacted batch (2 records over offsets 0..4) as a follower copies it from its leader;
    # a producer's batch must number its records 0..n-1 (test_append_batch_refuses_gaps)
    batch = rb.encode_batch(0, [(0, T0, b"a", b"1", ()), (3, T0 + 5, b"b", b"2", ())], last_offset_delta=4)
    log.append_replica_batch(batch)
    assert log.read_columns(0).offsets == [0, 3]
    assert log.read_columns(1).offsets == [3]
    assert log.read_columns(0) == _as_columns(log.read(0))
    assert log.read_columns(log.log_end_offset) == RecordColumns([], [], [], [], [])
    log.close()


def test_read_columns_reports_a_corrupt_batch_like_read(tmp_path):
    log = Log(str(tmp_path / "x-0"))
    log.append([(T0, b"k", b"v" * 50, ())])
    log.flush()
    path = log.segments[0].path
    log.close()
    with open(path, "r+b") as f:
        f.seek(70)
        byte = f.read(1)
        f.seek(70)
        f.write(bytes([byte[0] ^ 0xFF]))
    log = Log(str(tmp_path / "x-0"))
    with pytest.raises(CorruptRecordError):
        log.read(0)
    with pytest.raises(CorruptRecordError):
        log.read_columns(0)
    log.close()


@settings(max_examples=60, deadline=None)
@given(records=st.lists(st.tuples(st.integers(0, 2**40), _key, st.one_of(st.none(), st.binary(max_size=20)),
                                  st.one_of(st.none(), _headers)), min_size=1, max_size=30))
def test_encode_records_parts_join_to_encode_records(records):
    h, parts = rb.encode_records_parts(7, records, producer_id=3, producer_epoch=1, base_sequence=9)
    whole = rb.encode_records(7, records, producer_id=3, producer_epoch=1, base_sequence=9)
    assert b"".join(parts) == whole
    assert h == rb.decode_header(whole)
    rb.verify(whole, 0, h)


@settings(max_examples=60, deadline=None)
@given(stamps=st.lists(st.integers(0, 2**40), min_size=1, max_size=30), key=_key, hdrs=_headers)
def test_encode_trusted_batch_is_encode_batch(stamps, key, hdrs):
    recs = [(i, ts, key, b"v%d" % i, hdrs) for i, ts in enumerate(stamps)]
    assert rb.encode_trusted_batch(recs, producer_id=5, producer_epoch=2, base_sequence=40) == \
        rb.encode_batch(0, recs, producer_id=5, producer_epoch=2, base_sequence=40)


def test_encode_trusted_batch_refuses_an_empty_batch_and_unencodable_records():
    with pytest.raises(InvalidRecordError):
        rb.encode_trusted_batch([])
    with pytest.raises(InvalidRecordError):
        rb.encode_trusted_batch([(0, T0, object(), b"v", ())])


def test_append_batch_still_rejects_keyless_records_on_a_compacted_topic(tmp_path):
    log = Log(str(tmp_path / "k-0"), LogConfig.from_overrides({"cleanup.policy": "compact"}))
    batch = rb.encode_batch(0, [(0, T0, b"a", b"1", ()), (1, T0, None, b"2", ())])
    with pytest.raises(InvalidRecordError, match="offset delta 1"):
        log.append_batch(batch)
    assert log.log_end_offset == 0
    log.close()


def test_append_batch_with_log_append_time_rewrites_timestamps(tmp_path):
    from kafkasim.clock import MockClock
    clock = MockClock(T0 + 1_000)
    log = Log(str(tmp_path / "l-0"), LogConfig.from_overrides({"message.timestamp.type": "LogAppendTime"}), clock)
    log.append_batch(rb.encode_batch(0, [(0, T0, b"a", b"1", (("h", b"x"),)), (1, T0 + 1, b"b", b"2", ())]))
    log.append([(T0, b"c", b"3", ())])
    recs = log.read(0)
    assert [r.timestamp for r in recs] == [T0 + 1_000] * 3
    assert [(r.key, r.headers) for r in recs] == [(b"a", (("h", b"x"),)), (b"b", ()), (b"c", ())]
    log.close()


def test_a_view_of_a_requests_bytes_is_validated_and_written_without_a_copy(tmp_path):
    """A Produce request's batch arrives as a read-only view of the frame's ``bytes``:
    validation keeps that view (nothing can change it); a mutable buffer is copied first, so
    a change after the call cannot reach what was checked. Both are stored as given."""
    batch = rb.encode_batch(0, [(0, T0, b"a", b"1", ()), (1, T0 + 1, b"b", b"2", ())])
    frame = b"request header" + batch
    view = memoryview(frame)[len(b"request header"):]
    checked, h, _ = validate_batch(view, LogConfig(), "t-0")
    assert checked is view and h.record_count == 2
    mutable = bytearray(batch)
    checked, _, _ = validate_batch(mutable, LogConfig(), "t-0")
    mutable[-1] ^= 0xFF
    assert checked == batch
    log = Log(str(tmp_path / "v-0"))
    log.append_batch(view)
    log.append_batch(bytearray(batch))
    assert [(r.offset, r.key) for r in log.read(0)] == [(0, b"a"), (1, b"b"), (2, b"a"), (3, b"b")]
    log.close()


def test_system_clock_stays_monotonic_across_threads():
    clock = SystemClock()
    seen: list[list[int]] = []

    def reader():
        mine = [clock.now_ms() for _ in range(20_000)]
        seen.append(mine)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for mine in seen:
        assert mine == sorted(mine)
    import time
    assert abs(clock.now_ms() - time.time_ns() // 1_000_000) < 1_000
