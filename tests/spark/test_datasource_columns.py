"""The kafkasim data source's column selection and its two decode paths.

- A user schema that is a subset of ``SCHEMA`` (any order) reads exactly the rows of
  ``select(...)`` over the full read, with or without topic/offset/time options; each of
  the 12 columns works alone; an unknown column, a wrong type or a duplicate is an
  ``InvalidArgumentError`` naming the column; ``read_log(columns=...)`` and the
  ``corruption`` mode keep working.
- In process: ``read_segment_arrow`` gives the same Arrow batches on the C path
  (``kafkasim.records._codec``) and on the pure-Python path (what ``--py-files`` executors run),
  and both equal what was written — compacted batches, empty batches, nulls, headers,
  any chunking, any column subset, any offset/time range.
- A batch corrupt only in its records (valid CRC) is reported with file and position and
  skipped on both paths; the rows before it in the segment are still returned.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from kafkasim.errors import CorruptRecordError, InvalidArgumentError
from kafkasim.spark_jobs.common import read_log
from kafkasim.spark_jobs.datasource import (_ARROW_SCHEMA, CorruptBatchWarning, _Options, read_segment_arrow,
                                   scan_corruption, scan_segment_corruption, schema_of)
from kafkasim.spark_jobs.logdir import LogDir
from kafkasim.storage import layout
from kafkasim.records import record_batch as rb
from kafkasim.records.columns import ArrowColumnBuilder
from .segments import write_topic_meta
from .test_datasource import COLUMNS, _logdir_with_two_segments

pytestmark = pytest.mark.spark

needs_c = pytest.mark.skipif(not rb.C_CODEC, reason="kafkasim.records._codec not built: both paths would be Python")

_HEADERS_DDL = "array<struct<key:string,value:binary>>"


def _bag(df) -> list[tuple]:
    """The rows of ``df`` as plain tuples (nested header Rows compare as tuples), sorted."""
    return sorted((tuple(r) for r in df.collect()), key=repr)


# ----------------------------------------------------------------------------- Spark

@pytest.mark.parametrize("options, n_rows", [
    ({}, 6),
    ({"topic": "orders", "startingOffset": "1", "endingOffset": "3"}, 2),
    ({"topics": "orders,other", "startingTimestamp": "1001", "endingTimestamp": "2000"}, 3),
], ids=["no-options", "topic+offsets", "topics+time"])
def test_subset_schema_in_any_order_reads_the_rows_of_a_select(spark, tmp_path, options, n_rows):
    """Headers, null keys and values, two segments, a producer-id batch; the range options
    still filter when the offset and timestamp columns are not selected."""
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType
    d = _logdir_with_two_segments(tmp_path)

    def read():
        r = spark.read.format("kafkasim")
        for k, v in options.items():
            r = r.option(k, v)
        return r

    full = read().load(d)
    subsets = [
        ("key binary, partition int, offset long", ["key", "partition", "offset"]),
        (f"headers {_HEADERS_DDL}, value binary, sequence int, producer_id long, segment string",
         ["headers", "value", "sequence", "producer_id", "segment"]),
        (StructType([StructField("batch_base_offset", LongType()), StructField("topic", StringType()),
                     StructField("producer_epoch", IntegerType())]),
         ["batch_base_offset", "topic", "producer_epoch"]),
    ]
    for schema, names in subsets:
        df = read().schema(schema).load(d)
        assert df.columns == names
        assert df.schema == full.select(*names).schema
        got = _bag(df)
        assert got == _bag(full.select(*names))
        assert len(got) == n_rows


def test_every_column_alone(spark, tmp_path):
    d = _logdir_with_two_segments(tmp_path)
    full = spark.read.format("kafkasim").load(d)
    assert full.columns == COLUMNS
    for name in COLUMNS:
        df = spark.read.format("kafkasim").schema(schema_of([name])).load(d)
        assert df.columns == [name]
        assert df.schema == full.select(name).schema, name
        got = _bag(df)
        assert len(got) == 6, name
        assert got == _bag(full.select(name)), name


@pytest.mark.parametrize("schema, column, text", [
    ("nope int", "nope", "no column 'nope'"),
    ("offset int", "offset", "column 'offset' is long"),
    ("key string", "key", "column 'key' is binary"),
    ("timestamp timestamp", "timestamp", "column 'timestamp' is long"),
    ("headers array<struct<key:binary,value:binary>>", "headers", "column 'headers' is"),
    ("key binary, partition int, key binary", "key", "column 'key' is named twice in the schema"),
], ids=["unknown", "offset-int", "key-string", "timestamp-timestamp", "headers-binary-keys", "duplicate"])
def test_a_bad_user_schema_is_rejected_naming_the_column(spark, tmp_path, schema, column, text):
    d = _logdir_with_two_segments(tmp_path)
    with pytest.raises(Exception) as info:   # raised at planning, wrapped by Spark
        spark.read.format("kafkasim").schema(schema).load(d).collect()
    msg = str(info.value)
    assert "InvalidArgumentError" in msg and text in msg and column in msg


def test_schema_of_names_an_unknown_column():
    assert schema_of(["partition", "key"]) == "partition int, key binary"
    assert schema_of(["headers"]) == f"headers {_HEADERS_DDL}"
    with pytest.raises(InvalidArgumentError, match="no column 'nope'"):
        schema_of(["offset", "nope"])


def test_schema_of_needs_a_column():
    with pytest.raises(InvalidArgumentError, match="at least one column"):
        schema_of([])


def test_corruption_mode_refuses_a_records_schema(spark, tmp_path):
    d = _logdir_with_two_segments(tmp_path)
    with pytest.raises(Exception) as info:
        spark.read.format("kafkasim").option("mode", "corruption").schema("key binary").load(d).collect()
    assert "mode corruption reads CORRUPTION_SCHEMA" in str(info.value)


def test_read_log_with_columns(spark, tmp_path):
    d = _logdir_with_two_segments(tmp_path)
    df = read_log(spark, d, ["orders"], columns=["partition", "key", "timestamp"], startingOffset=1)
    assert df.columns == ["partition", "key", "timestamp"]
    full = read_log(spark, d, ["orders"], startingOffset=1)
    assert full.columns == COLUMNS
    got = _bag(df)
    assert got == _bag(full.select("partition", "key", "timestamp"))
    assert got == sorted([(0, None, 1001), (0, b"b", 1005), (0, b"c", 2000)], key=repr)
    with pytest.raises(InvalidArgumentError, match="'nope'"):
        read_log(spark, d, columns=["key", "nope"])


def test_an_empty_user_schema_does_not_silently_read_nothing(spark, tmp_path):
    """``.schema(StructType([]))`` would build zero-column Arrow batches, which have 0 rows,
    so ``count()`` would say 0 for a log of 6 records: the reader rejects it instead."""
    from pyspark.sql.types import StructType
    d = _logdir_with_two_segments(tmp_path)
    try:
        n = spark.read.format("kafkasim").schema(StructType([])).load(d).count()
    except Exception as exc:  # rejected: fine if it says why
        assert "column" in str(exc)
        return
    assert n == 6


# ------------------------------------------------------- batches corrupt in their records

def _assembled(base_offset: int, section: bytes, count: int, last_offset_delta: int, ts: int = 5_000) -> bytes:
    """A batch with a valid header and CRC around the v2 records ``section`` (any bytes)."""
    return rb._assemble(base_offset, -1, 0, last_offset_delta, ts, ts, -1, -1, -1, count, section)


_GOOD = [(0, 1_000, b"a", b"v0", [("h", b"x"), ("é", None)]), (1, 1_001, None, None, [])]
_GOOD_COLUMNS = {"offset": [0, 1], "key": [b"a", None], "value": [b"v0", None], "timestamp": [1_000, 1_001],
                 "headers": [[{"key": "h", "value": b"x"}, {"key": "é", "value": None}], []],
                 "sequence": [-1, -1]}
def _codec_v2_corpus() -> dict:
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "storage", "test_codec_v2.py")
    spec = importlib.util.spec_from_file_location("_kafkasim_codec_v2_corpus", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.MALFORMED


MALFORMED = _codec_v2_corpus()
# (v2 records section, record_count, last_offset_delta), each inside a valid header and CRC:
# a sample of the C codec's malformation corpus (tests/storage/test_codec_v2.py)
_BAD_PAYLOADS = {name: MALFORMED[name] for name in (
    "truncated record (length beyond the section)", "6-byte varint (offset delta)",
    "record length longer than the fields", "count larger than the records", "bytes left over",
    "key length < -1", "negative header count", "invalid UTF-8 header key (0xff)",
    "offset delta repeated", "offset delta beyond last_offset_delta")}


def _segment_with_bad_records(d: str, payload, count: int, lod: int) -> tuple[str, int]:
    """``orders-0``: a good 2-record batch, the bad one at offset 2, a good one after it."""
    write_topic_meta(d, "orders", 1)
    pdir = os.path.join(d, layout.partition_dir_name("orders", 0))
    os.makedirs(pdir, exist_ok=True)
    path = os.path.join(pdir, layout.segment_name(0))
    good = rb.encode_batch(0, _GOOD)
    with open(path, "wb") as f:
        f.write(good)
        f.write(_assembled(2, payload, count, lod))
        f.write(rb.encode_batch(3 + lod, [(0, 3_000, b"after", b"after", [])]))
    return path, len(good)


def _read(d: str, pure: bool, columns=None, **options) -> list[pa.RecordBatch]:
    """``read_segment_arrow`` over the first segment under ``d``, on the C or the Python path."""
    ld = LogDir(d)
    opts = _Options({"path": d, **options})
    if columns is not None:
        opts.columns = list(columns)
    with pytest.MonkeyPatch.context() as mp:
        if pure:
            mp.setattr(rb, "_codec", None)   # builders are made lazily, inside the generator
        assert (ArrowColumnBuilder()._c is None) == (pure or not rb.C_CODEC)
        return list(read_segment_arrow(ld, ld.segments()[0], opts))


def _scan(d: str, pure: bool) -> list[dict]:
    ld = LogDir(d)
    with pytest.MonkeyPatch.context() as mp:
        if pure:
            mp.setattr(rb, "_codec", None)
        return scan_segment_corruption(ld, ld.segments()[0])


@pytest.mark.parametrize("pure", [False, True], ids=["c", "python"])
@pytest.mark.parametrize("bad", list(_BAD_PAYLOADS))
def test_batch_corrupt_only_in_its_records_is_reported_and_skipped(tmp_path, bad, pure):
    if not pure and not rb.C_CODEC:
        pytest.skip("kafkasim.records._codec not built")
    d = str(tmp_path / "data")
    path, pos = _segment_with_bad_records(d, *_BAD_PAYLOADS[bad])
    where = f"{path}: "
    for batch_rows, columns in [(65536, None), (1, ["key", "offset", "headers"]), (2, ["value"])]:
        with pytest.warns(CorruptBatchWarning) as caught:
            got = pa.Table.from_batches(_read(d, pure, columns, batchRows=str(batch_rows)),
                                        schema=pa.schema([_ARROW_SCHEMA.field(c) for c in columns or COLUMNS]))
        assert len(caught) == 1
        msg = str(caught[0].message)
        assert where in msg and f"at position {pos}" in msg
        assert got.num_rows == 2   # the good batch before it; nothing of the bad one or after it
        for c in columns or ["offset", "key", "value", "headers", "timestamp", "sequence"]:
            assert got.column(c).to_pylist() == _GOOD_COLUMNS[c], (batch_rows, c)
    found = _scan(d, pure)
    assert len(found) == 1
    assert found[0]["position"] == pos and found[0]["segment"] == path
    assert found[0]["skipped_bytes"] == os.path.getsize(path) - pos
    assert where in found[0]["error"] and f"at position {pos}" in found[0]["error"]
    with pytest.raises(CorruptRecordError, match=f"at position {pos}"):
        _read(d, pure, corrupt="fail")


def test_batch_corrupt_in_its_records_through_spark(spark, tmp_path):
    """The same on executors: skipped (rows before it kept) and counted by scan_corruption."""
    d = str(tmp_path / "data")
    path, pos = _segment_with_bad_records(d, *_BAD_PAYLOADS["key length < -1"])
    rows = spark.read.format("kafkasim").schema("value binary, offset long").load(d).collect()
    assert sorted((r.offset, r.value) for r in rows) == [(0, b"v0"), (1, None)]
    found = scan_corruption(spark, d)
    assert [(f["segment"], f["position"]) for f in found] == [(path, pos)]
    assert "malformed records" in found[0]["error"] and path in found[0]["error"]
    with pytest.raises(Exception, match=f"at position {pos}"):
        spark.read.format("kafkasim").schema("key binary").option("corrupt", "fail").load(d).collect()


# ------------------------------------------------------------- C path == Python path

_HEADER_CHARS = st.one_of(st.sampled_from(["a", "é", "€", "𝄞", "\x00"]), st.characters(codec="utf-8"))
_blob = st.one_of(st.none(), st.binary(max_size=10))
_headers = st.lists(st.tuples(st.text(_HEADER_CHARS, max_size=4), _blob), max_size=3)
_PRODUCERS = [(-1, -1, -1), (7, 2, 40), (2 ** 40, 0, 0)]


@st.composite
def _batch(draw):
    """``(records, last_offset_delta, (pid, epoch, base_seq))``; records may skip deltas
    (compacted) and the range may run past the last record; ``records`` may be empty."""
    n = draw(st.integers(0, 5)) if draw(st.integers(0, 9)) == 0 else draw(st.integers(1, 5))
    deltas, d = [], -1
    for _ in range(n):
        d += 1 + draw(st.sampled_from([0, 0, 0, 1, 3]))
        deltas.append(d)
    lod = max(d, 0) + draw(st.sampled_from([0, 0, 1, 4]))
    recs = [(delta, draw(st.integers(0, 10_000)), draw(_blob), draw(_blob), draw(_headers)) for delta in deltas]
    return recs, lod, draw(st.sampled_from(_PRODUCERS))


def _write_log(d: str, base: int, batches) -> tuple[str, list[dict]]:
    """Write the batches as ``t-3``'s one segment; return its path and the expected rows."""
    pdir = os.path.join(d, layout.partition_dir_name("t", 3))
    os.makedirs(pdir, exist_ok=True)
    path = os.path.join(pdir, layout.segment_name(base))
    rows = []
    with open(path, "wb") as f:
        for recs, lod, (pid, epoch, seq) in batches:
            if recs:
                f.write(rb.encode_batch(base, recs, last_offset_delta=lod, producer_id=pid,
                                        producer_epoch=epoch, base_sequence=seq))
            else:   # emptied by compaction: no records, the offset range kept
                f.write(rb._assemble(base, -1, 0, lod, 7_000, 7_000, pid, epoch, seq, 0, b""))
            rows += [{"topic": "t", "partition": 3, "offset": base + delta, "timestamp": ts, "key": k,
                      "value": v, "headers": [{"key": hk, "value": hv} for hk, hv in hs],
                      "producer_id": pid, "producer_epoch": epoch,
                      "sequence": seq + delta if seq >= 0 else -1, "batch_base_offset": base}
                     for delta, ts, k, v, hs in recs]
            base += lod + 1
    return path, rows


_bound = st.one_of(st.none(), st.integers(0, 40))
_ts_bound = st.one_of(st.none(), st.integers(0, 10_000))


@needs_c
@settings(max_examples=80, deadline=None)
@given(batches=st.lists(_batch(), min_size=1, max_size=6), base=st.sampled_from([0, 17]),
       batch_rows=st.integers(1, 8),
       columns=st.one_of(st.none(), st.lists(st.sampled_from(COLUMNS), min_size=1, unique=True)),
       start=_bound, end=_bound, start_ts=_ts_bound, end_ts=_ts_bound, uri=st.booleans())
def test_c_and_python_paths_read_the_same_arrow(tmp_path_factory, batches, base, batch_rows, columns,
                                                start, end, start_ts, end_ts, uri):
    """Batch for batch the same Arrow data on both paths, and it is what was written."""
    d = str(tmp_path_factory.mktemp("paths"))
    _, written = _write_log(d, base, batches)
    options = {"batchRows": str(batch_rows), "startingOffset": start, "endingOffset": end,
               "startingTimestamp": start_ts, "endingTimestamp": end_ts}
    options = {k: str(v) for k, v in options.items() if v is not None}
    src = "file://" + os.path.abspath(d) if uri else d
    c = _read(src, False, columns, **options)
    py = _read(src, True, columns, **options)
    assert [b.num_rows for b in c] == [b.num_rows for b in py]
    for a, b in zip(c, py):
        assert a.schema == b.schema
        assert a.equals(b)
    names = columns or COLUMNS
    schema = pa.schema([_ARROW_SCHEMA.field(n) for n in names])
    table = pa.Table.from_batches(c, schema=schema)
    assert table.equals(pa.Table.from_batches(py, schema=schema))
    segment = LogDir(src).segments()[0].path
    lo, hi = start or 0, 2 ** 63 if end is None else end
    lo_ts, hi_ts = -1 if start_ts is None else start_ts, 2 ** 63 if end_ts is None else end_ts
    expected = [{n: (segment if n == "segment" else r[n]) for n in names} for r in written
                if lo <= r["offset"] < hi and lo_ts <= r["timestamp"] < hi_ts]
    assert table.to_pylist() == expected
    if set(options) == {"batchRows"}:
        # unfiltered: every output batch but the last holds at least batchRows rows
        assert all(b.num_rows >= batch_rows for b in c[:-1])
