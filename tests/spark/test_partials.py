"""The audits' one scan: partial aggregates equal the aggregates over the records themselves.

``partials.partition_partials`` is checked against a brute-force computation over random
records (keys with nulls, timestamps out of order, producer and sequence headers, lag
marks), whole and cut into pieces whose partial rows are combined by the documented rules;
``scan.Scan`` is checked end to end through the data source with a partition spread over
several scan tasks.
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from kafkasim.spark_jobs import partials
from kafkasim.types import INPUT_HEADER, PRODUCER_HEADER, SEQUENCE_HEADER
from .segments import write_segment, write_topic_meta

pytestmark = pytest.mark.spark

WINDOW = 100


def _table(recs):
    """``recs``: (offset, ts, key, value, headers, producer_id) → the READ_COLUMNS table."""
    return pa.table({
        "offset": pa.array([r[0] for r in recs], pa.int64()),
        "timestamp": pa.array([r[1] for r in recs], pa.int64()),
        "key": pa.array([r[2] for r in recs], pa.binary()),
        "value": pa.array([r[3] for r in recs], pa.binary()),
        "headers": pa.array([[{"key": k, "value": v} for k, v in r[4]] for r in recs],
                            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        "producer_id": pa.array([r[5] for r in recs], pa.int64()),
    })


def _client(headers):
    vals = [v for k, v in headers if k == PRODUCER_HEADER]
    return vals[-1].decode() if vals and vals[-1] is not None else None


def _expected(recs, spec):
    """The partial rows, by brute force over the records."""
    keys = defaultdict(list)
    for r in recs:
        keys[(r[2], r[5] if r[5] >= 0 else None, _client(r[4]))].append(r)
    key_rows = {}
    for g, rs in keys.items():
        first = min(rs, key=lambda r: (r[1], r[0]))
        lo, hi = min(rs, key=lambda r: r[0]), max(rs, key=lambda r: r[0])
        size = sum(len(r[2] or b"") + len(r[3] or b"") + sum(len(k.encode()) + len(v or b"") for k, v in r[4])
                   for r in rs)
        key_rows[g] = (len(rs), size, first[1], first[0], lo[0], lo[1], hi[0], hi[1])
    windows = defaultdict(int)
    for r in recs:
        windows[r[1] // WINDOW * WINDOW] += 1
    seq = sorted(r[0] for r in recs if r[2] is not None and any(k in (SEQUENCE_HEADER, INPUT_HEADER) for k, _ in r[4]))
    nxt_marks, end_marks = spec.marks.get(("t", 0), ((), ()))
    nxt = {m: min(((r[0], r[1]) for r in recs if r[0] >= m), default=None) for m in nxt_marks}
    ends = {m: max((r[0] for r in recs if r[1] <= m), default=None) for m in end_marks}
    return (key_rows, dict(windows), seq, {m: v for m, v in nxt.items() if v},
            {m: v for m, v in ends.items() if v is not None})


def _combined(tables):
    """Partial rows of several pieces combined by the rules of the partials module."""
    key_rows, windows, seq, nxt, ends = {}, defaultdict(int), [], {}, {}
    for t in tables:
        for r in t.to_pylist():
            if r["kind"] == "key":
                g = (r["key"], r["producer_id"], r["client_id"])
                new = (r["records"], r["bytes"], r["first_ts"], r["first_ts_offset"], r["min_offset"],
                       r["min_offset_ts"], r["max_offset"], r["max_offset_ts"])
                old = key_rows.get(g)
                if old:
                    first = min((old[2], old[3]), (new[2], new[3]))
                    lo = min((old[4], old[5]), (new[4], new[5]))
                    hi = max((old[6], old[7]), (new[6], new[7]))
                    new = (old[0] + new[0], old[1] + new[1], *first, *lo, *hi)
                key_rows[g] = new
            elif r["kind"] == "window":
                windows[r["window_start"]] += r["records"]
            elif r["kind"] == "record":
                seq.append(r["offset"])
            elif r["kind"] == "next":
                nxt[r["mark"]] = min(nxt.get(r["mark"], (r["found_offset"], r["found_ts"])),
                                     (r["found_offset"], r["found_ts"]))
            elif r["kind"] == "end":
                ends[r["mark"]] = max(ends.get(r["mark"], r["found_offset"]), r["found_offset"])
    return key_rows, dict(windows), sorted(seq), nxt, ends


_header = st.sampled_from([(PRODUCER_HEADER, b"app"), (PRODUCER_HEADER, b"web"), (SEQUENCE_HEADER, b"7"),
                           (INPUT_HEADER, b"2:17"), ("trace", b"x"), ("trace", None)])
_record = st.tuples(st.integers(0, 400), st.sampled_from([None, b"a", b"b", b"cc", b"\xff"]),
                    st.sampled_from([None, b"", b"v", b"value"]), st.lists(_header, max_size=3),
                    st.sampled_from([-1, 3, 5]))


@settings(max_examples=60, deadline=None)
@given(st.lists(_record, min_size=1, max_size=60), st.lists(st.integers(0, 80), max_size=4),
       st.lists(st.integers(0, 450), max_size=4), st.lists(st.integers(1, 59), max_size=3))
def test_partials_equal_the_aggregates_over_the_records_whole_and_in_pieces(raw, nxt, ends, cuts):
    recs = [(i * 2 + 10, ts, k, v, h, pid) for i, (ts, k, v, h, pid) in enumerate(raw)]   # offsets ascend
    spec = partials.Spec(window_ms=WINDOW, sequence="header", marks={("t", 0): (nxt, ends)})
    want = _expected(recs, spec)
    assert _combined([partials.partition_partials("t", 0, _table(recs), spec)]) == want
    bounds = sorted({c for c in cuts if c < len(recs)})
    pieces = [recs[a:b] for a, b in zip([0, *bounds], [*bounds, len(recs)]) if recs[a:b]]
    assert _combined([partials.partition_partials("t", 0, _table(p), spec) for p in pieces]) == want


def test_a_spec_round_trips_and_a_bad_one_is_named():
    from kafkasim.errors import InvalidArgumentError
    spec = partials.Spec(window_ms=60_000, sequence="value:n", marks={("t", 1): ([5, 3], [9])})
    back = partials.Spec.from_json(spec.to_json())
    assert back.window_ms == 60_000 and back.sequence == "value:n" and back.marks == {("t", 1): ([3, 5], [9])}
    with pytest.raises(InvalidArgumentError, match="window_ms"):
        partials.Spec.from_json('{"window_ms": 0}')
    with pytest.raises(InvalidArgumentError, match="not a partials spec"):
        partials.Spec.from_json("[1, 2")


@pytest.mark.parametrize("spread", [True, False])
def test_scan_key_rows_equal_the_record_aggregates_with_a_partition_over_several_tasks(spark, tmp_path, monkeypatch,
                                                                                      spread):
    """Through the data source on the executors (no driver-side read). With 1 KiB splits
    a partition's segments and pieces land in different scan tasks, and Spark's combine
    of their partial rows equals the aggregate over the records read in ``records`` mode;
    with big splits each partition is one task's and its rows are used as they are."""
    from pyspark.sql import functions as F
    from kafkasim.spark_jobs import common
    from kafkasim.spark_jobs.scan import Scan
    d = str(tmp_path / "data")
    write_topic_meta(d, "t", 2)
    for p in (0, 1):
        off = 0
        for s in range(3):
            batches = [[(1000 + 7 * i - 3 * (i % 4), b"k%d" % (i % 5) if i % 6 else None, b"v" * (i % 9), [])
                        for i in range(off, off + 40)]]
            write_segment(d, "t", p, off, batches)
            off += 40
    monkeypatch.setattr(common, "LOCAL_SCAN_BYTES", -1)
    monkeypatch.setattr(common, "input_plan_options", lambda _s: {"maxPartitionBytes": "1024",
                                                                  "openCostInBytes": "0",
                                                                  "minPartitionNum": "2"})
    if not spread:     # one task reads everything
        monkeypatch.setattr(common, "input_plan_options", lambda _s: {"maxPartitionBytes": str(1 << 20),
                                                                      "openCostInBytes": "0",
                                                                      "minPartitionNum": "1"})
    with Scan(spark, d, ["t"], partials.Spec(window_ms=WINDOW)) as scan:
        assert scan.whole is not spread
        if spread:
            assert scan.raw.rdd.getNumPartitions() > 2             # the pieces really are spread
        got = sorted((tuple(r) for r in scan.keys().select(
            "partition", "key", "records", "first_ts", "first_ts_offset", "min_offset", "max_offset",
            "max_offset_ts").collect()), key=repr)
        windows = sorted(tuple(r) for r in scan.windows().collect())
    recs = common.read_log(spark, d, ["t"], columns=["partition", "offset", "timestamp", "key"])
    want = sorted((tuple(r) for r in recs.groupBy("partition", "key").agg(
        F.count(F.lit(1)), F.min(F.struct("timestamp", "offset")).alias("f"), F.min("offset"),
        F.max(F.struct("offset", "timestamp")).alias("m"))
        .select("partition", "key", "count(1)", "f.timestamp", "f.offset", "min(offset)", "m.offset",
                "m.timestamp").collect()), key=repr)
    assert got == want
    want_windows = sorted(tuple(r) for r in recs.groupBy(
        F.lit("t").alias("topic"), "partition", (F.floor(F.col("timestamp") / WINDOW) * WINDOW).alias("w"))
        .count().collect())
    assert windows == want_windows
