"""The kafkasim Spark data source: round trips, options, file://, corruption, partitioning."""

from __future__ import annotations

import os
import warnings

import pytest
from hypothesis import given, settings, strategies as st

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.errors import CorruptRecordError
from kafkasim.records import record_batch as rb
from kafkasim.spark_jobs.datasource import (CorruptBatchWarning, _Options, read_segment_arrow,
                                   scan_corruption, scan_segment_corruption)
from kafkasim.spark_jobs.logdir import LogDir
from kafkasim.storage import layout
from .segments import write_segment, write_topic_meta

pytestmark = pytest.mark.spark

COLUMNS = ["topic", "partition", "offset", "timestamp", "key", "value", "headers", "producer_id",
           "producer_epoch", "sequence", "batch_base_offset", "segment"]


def _rows(df):
    return sorted((r.topic, r.partition, r.offset) + tuple(r[c] for c in COLUMNS[3:11])
                  for r in df.collect())


def _logdir_with_two_segments(tmp_path) -> str:
    d = str(tmp_path / "data")
    write_topic_meta(d, "orders", 2)
    write_segment(d, "orders", 0, 0, [[(1000, b"a", b"v1", [("h", b"x"), ("h", None)]),
                                       (1001, None, b"v2", [])],
                                      [(1005, b"b", None, [])]])
    write_segment(d, "orders", 0, 3, [[(2000, b"c", b"v3", [])]])
    write_segment(d, "orders", 1, 0, [[(1500, b"a", b"v4", [])]],
                  producer_id=7, producer_epoch=2, base_sequence=40)
    write_topic_meta(d, "other", 1)
    write_segment(d, "other", 0, 0, [[(3000, b"z", b"v", [])]])
    return d


def test_round_trip_through_the_broker(spark, tmp_path):
    """Records produced through the broker (storage's writer) read back field for field."""
    d = str(tmp_path / "data")
    clock = MockClock(1_700_000_000_000)
    sent = []
    with Broker(d, clock=clock) as b:
        b.create_topic("orders", partitions=2)
        pid, epoch = b.init_producer_id()
        from kafkasim.records.record_batch import encode_batch
        for i in range(5):
            recs = [(j, clock.now_ms() + j, b"k%d" % j, b"v%d-%d" % (i, j), [("n", b"%d" % j)]) for j in range(3)]
            b.produce("orders", i % 2, encode_batch(0, recs, producer_id=pid, producer_epoch=epoch,
                                                    base_sequence=3 * (i // 2)))
            clock.advance(5)
        expected = []
        for p in range(2):
            for r in b.fetch("orders", p, 0).records:
                expected.append(("orders", p, r.offset, r.timestamp, r.key, r.value,
                                 [tuple(h) for h in r.headers], r.producer_id, r.producer_epoch, r.sequence))
    df = spark.read.format("kafkasim").load(d)
    assert df.columns == COLUMNS
    got = sorted((r.topic, r.partition, r.offset, r.timestamp, r.key, r.value,
                  [(h.key, h.value) for h in r.headers], r.producer_id, r.producer_epoch, r.sequence)
                 for r in df.collect())
    assert got == sorted(expected)
    assert len(got) == 15


def test_round_trip_of_a_rolled_storage_log(spark, tmp_path):
    """kafkasim.storage.log.Log with tiny segments: every segment is one input partition, offsets
    continue across segments, nothing is lost or duplicated."""
    from kafkasim.config import LogConfig
    from kafkasim.storage.log import Log
    d = tmp_path / "data"
    clock = MockClock(1_000_000)
    log = Log(str(d / "events-0"), LogConfig.from_overrides({"segment.bytes": 300}), clock)
    try:
        for i in range(12):
            log.append([(clock.now_ms(), b"k%d" % (i % 3), b"value-%02d" % i, [])])
            clock.advance(1)
        segments = len(log.segments)
    finally:
        log.close()
    assert segments > 3
    df = spark.read.format("kafkasim").option("maxPartitionBytes", 0).load(str(d))
    assert df.rdd.getNumPartitions() == segments
    rows = sorted((r.offset, r.value, r.timestamp) for r in df.collect())
    assert rows == [(i, b"value-%02d" % i, 1_000_000 + i) for i in range(12)]


def test_one_input_partition_per_segment_and_segment_column(spark, tmp_path):
    d = _logdir_with_two_segments(tmp_path)
    df = spark.read.format("kafkasim").option("maxPartitionBytes", 0).load(d)
    assert df.rdd.getNumPartitions() == 4
    segs = {(r.offset, os.path.basename(r.segment)) for r in df.where("topic = 'orders' and partition = 0").collect()}
    assert segs == {(0, layout.segment_name(0)), (1, layout.segment_name(0)), (2, layout.segment_name(0)),
                    (3, layout.segment_name(3))}


def test_small_segments_share_tasks_by_default_and_read_the_same_rows(spark, tmp_path):
    d = _logdir_with_two_segments(tmp_path)   # four tiny segments over three partitions
    one_each = spark.read.format("kafkasim").option("maxPartitionBytes", 0).load(d)
    packed = spark.read.format("kafkasim").load(d)      # default: 128 MiB budget, 4 MiB open cost
    assert one_each.rdd.getNumPartitions() == 4
    assert packed.rdd.getNumPartitions() == 1           # 4 x (size + 4 MiB) fits one split
    assert _rows(packed) == _rows(one_each)
    spread = spark.read.format("kafkasim").option("minPartitionNum", 2).load(d)
    assert spread.rdd.getNumPartitions() == 2           # split size = total / 2 cores: two tasks
    assert _rows(spread) == _rows(one_each)
    corrupt = spark.read.format("kafkasim").option("mode", "corruption")
    assert corrupt.load(d).count() == 0


def test_headers_nulls_and_producer_fields(spark, tmp_path):
    d = _logdir_with_two_segments(tmp_path)
    rows = {(r.partition, r.offset): r for r in spark.read.format("kafkasim").option("topic", "orders").load(d).collect()}
    assert [(h.key, h.value) for h in rows[(0, 0)].headers] == [("h", b"x"), ("h", None)]
    assert rows[(0, 1)].key is None and rows[(0, 2)].value is None
    assert rows[(0, 2)].batch_base_offset == 2
    assert (rows[(1, 0)].producer_id, rows[(1, 0)].producer_epoch, rows[(1, 0)].sequence) == (7, 2, 40)
    assert (rows[(0, 0)].producer_id, rows[(0, 0)].sequence) == (-1, -1)


def test_topic_offset_and_time_options(spark, tmp_path):
    d = _logdir_with_two_segments(tmp_path)
    def read():  # a DataFrameReader keeps its options: start afresh each time
        return spark.read.format("kafkasim")
    assert {r.topic for r in read().option("topic", "other").load(d).collect()} == {"other"}
    ranged = read().option("topic", "orders").option("startingOffset", 1).option("endingOffset", 3).load(d)
    assert sorted((r.partition, r.offset) for r in ranged.collect()) == [(0, 1), (0, 2)]
    timed = read().option("topics", "orders,other").option("startingTimestamp", 1001) \
        .option("endingTimestamp", 2000).load(d)
    assert sorted((r.topic, r.offset, r.timestamp) for r in timed.collect()) == [
        ("orders", 0, 1500), ("orders", 1, 1001), ("orders", 2, 1005)]


def test_file_uri_reads_the_same_rows_as_a_plain_path(spark, tmp_path):
    d = _logdir_with_two_segments(tmp_path)
    plain = _rows(spark.read.format("kafkasim").load(d))
    uri = _rows(spark.read.format("kafkasim").load("file://" + os.path.abspath(d)))
    assert plain == uri and len(plain) == 6


def test_empty_data_dir_gives_no_rows(spark, tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    assert spark.read.format("kafkasim").load(str(d)).count() == 0


def _corrupt_second_batch(tmp_path) -> tuple[str, str, int]:
    d = str(tmp_path / "data")
    write_topic_meta(d, "orders", 1)
    path = write_segment(d, "orders", 0, 0, [[(1000, b"a", b"v1", [])], [(1001, b"b", b"v2", [])],
                                             [(1002, b"c", b"v3", [])]])
    with open(path, "rb") as f:
        data = bytearray(f.read())
    from kafkasim.records.record_batch import decode_header
    second = decode_header(data, 0).size
    data[second + 70] ^= 0xFF  # inside the second batch's records: CRC mismatch
    with open(path, "wb") as f:
        f.write(data)
    return d, path, second


def test_corrupt_batch_is_reported_with_file_and_position_and_skipped(spark, tmp_path):
    d, path, pos = _corrupt_second_batch(tmp_path)
    rows = spark.read.format("kafkasim").load(d).collect()
    assert [r.offset for r in rows] == [0]  # the bad batch and the rest of its segment are skipped
    found = scan_corruption(spark, d)
    assert len(found) == 1
    assert found[0]["segment"] == path and found[0]["position"] == pos
    assert "CRC mismatch" in found[0]["error"] and path in found[0]["error"]


def test_corruption_of_a_small_local_log_is_scanned_in_the_driver_with_the_same_rows(spark, tmp_path, monkeypatch):
    from kafkasim.spark_jobs import common
    d, path, pos = _corrupt_second_batch(tmp_path)
    write_segment(d, "orders", 1, 0, [[(1000, b"z", b"v", [])]])
    in_driver = common.corruption_of(spark, d)
    monkeypatch.setattr(common, "LOCAL_SCAN_BYTES", -1)     # force the Spark job
    assert in_driver == common.corruption_of(spark, d) == scan_corruption(spark, d)
    assert [(r["segment"], r["position"]) for r in in_driver] == [(path, pos)]


def test_corrupt_batch_warns_in_the_reader(tmp_path):
    d, path, pos = _corrupt_second_batch(tmp_path)
    ld = LogDir(d)
    with pytest.warns(CorruptBatchWarning, match=f"at position {pos}"):
        rows = sum(b.num_rows for b in read_segment_arrow(ld, ld.segments()[0], _Options({"path": d})))
    assert rows == 1
    assert scan_segment_corruption(ld, ld.segments()[0])[0]["skipped_bytes"] == os.path.getsize(path) - pos


def test_corrupt_fail_option_fails_the_job(spark, tmp_path):
    d, path, pos = _corrupt_second_batch(tmp_path)
    with pytest.raises(Exception, match="CRC mismatch"):
        spark.read.format("kafkasim").option("corrupt", "fail").load(d).collect()
    ld = LogDir(d)
    with pytest.raises(CorruptRecordError, match=f"at position {pos}"):
        list(read_segment_arrow(ld, ld.segments()[0], _Options({"path": d, "corrupt": "fail"})))


def test_truncated_tail_is_reported(tmp_path):
    d = str(tmp_path / "data")
    path = write_segment(d, "t", 0, 0, [[(1, b"a", b"v", [])], [(2, b"b", b"v", [])]])
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 3)
    ld = LogDir(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptBatchWarning)
        assert sum(b.num_rows for b in read_segment_arrow(ld, ld.segments()[0], _Options({"path": d}))) == 1
    assert "truncated" in scan_segment_corruption(ld, ld.segments()[0])[0]["error"]


def _three_segments(tmp_path) -> tuple[str, list[str]]:
    """Partition t-0: segments at 0, 3 and 5, two batches each but the last, offsets contiguous."""
    d = str(tmp_path / "data")
    write_topic_meta(d, "t", 1)
    paths = [write_segment(d, "t", 0, 0, [[(1, b"a", b"v", []), (2, b"b", b"v", [])], [(3, b"c", b"v", [])]]),
             write_segment(d, "t", 0, 3, [[(4, b"d", b"v", [])], [(5, b"e", b"v", [])]]),
             write_segment(d, "t", 0, 5, [[(6, b"f", b"v", [])]])]
    return d, paths


def _offsets_and_corruption(d: str) -> tuple[list[int], list[dict]]:
    ld = LogDir(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptBatchWarning)
        offsets = [o for seg in ld.segments() for b in read_segment_arrow(ld, seg, _Options({"path": d}))
                   for o in b.column("offset").to_pylist()]
    return offsets, [row for seg in ld.segments() for row in scan_segment_corruption(ld, seg)]


@pytest.mark.parametrize("bit", [0, 2, 50])
def test_a_flipped_base_offset_never_becomes_rows_under_other_offsets(tmp_path, bit):
    """base_offset lies outside the CRC: a flip is caught by the offset checks, reported with
    file and position like a CRC error, and the rest of that segment is skipped."""
    d, paths = _three_segments(tmp_path)
    second = rb.decode_header(open(paths[0], "rb").read(), 0).size
    for path, pos in ((paths[0], second), (paths[2], 0)):     # a closed segment and the last one
        with open(path, "r+b") as f:
            f.seek(pos + 7 - bit // 8)
            b = f.read(1)[0]
            f.seek(pos + 7 - bit // 8)
            f.write(bytes([b ^ (1 << (bit % 8))]))
    offsets, found = _offsets_and_corruption(d)
    assert offsets == [0, 1, 3, 4]
    assert [(r["segment"], r["position"]) for r in found] == [(paths[0], second), (paths[2], 0)]
    assert all("has base offset" in r["error"] or "past the segment" in r["error"] for r in found), found


def test_a_segment_cut_at_a_batch_boundary_is_reported(spark, tmp_path):
    d, paths = _three_segments(tmp_path)
    cut = rb.decode_header(open(paths[1], "rb").read(), 0).size
    with open(paths[1], "r+b") as f:
        f.truncate(cut)
    offsets, found = _offsets_and_corruption(d)
    assert offsets == [0, 1, 2, 3, 5]
    assert [(r["segment"], r["position"], r["skipped_bytes"]) for r in found] == [(paths[1], cut, 0)]
    assert "offsets 4..4 are missing" in found[0]["error"]
    assert [(r["segment"], r["position"]) for r in scan_corruption(spark, d)] == [(paths[1], cut)]
    with pytest.raises(CorruptRecordError, match="offsets 4..4 are missing"):
        ld = LogDir(d)
        list(read_segment_arrow(ld, ld.segments()[1], _Options({"path": d, "corrupt": "fail"})))


def test_compaction_gaps_below_the_cleaner_checkpoint_are_not_corruption(tmp_path):
    d = str(tmp_path / "data")
    write_topic_meta(d, "t", 1)
    write_segment(d, "t", 0, 0, [[(1, b"a", b"v", [])]])        # 1..3 compacted away: fine
    write_segment(d, "t", 0, 4, [[(2, b"b", b"v", [])]])        # 5 missing past the checkpoint: reported
    cut_path = write_segment(d, "t", 0, 6, [[(3, b"c", b"v", [])]])
    with open(os.path.join(os.path.dirname(cut_path), "cleaner-checkpoint"), "w") as f:
        f.write("4\n")
    offsets, found = _offsets_and_corruption(d)
    assert offsets == [0, 4, 6]
    assert [r["position"] for r in found] == [os.path.getsize(os.path.join(os.path.dirname(cut_path),
                                                                           layout.segment_name(4)))]


def test_bad_options_are_rejected(tmp_path):
    from kafkasim.errors import InvalidArgumentError
    with pytest.raises(InvalidArgumentError, match="corrupt"):
        _Options({"path": "x", "corrupt": "ignore"})
    with pytest.raises(InvalidArgumentError, match="startingOffset"):
        _Options({"path": "x", "startingOffset": "ten"})
    with pytest.raises(InvalidArgumentError, match="path"):
        _Options({})
    with pytest.raises(InvalidArgumentError, match="maxPartitionBytes must be >= 0, got -1"):
        _Options({"path": "x", "maxPartitionBytes": "-1"})


_record = st.tuples(st.integers(0, 10_000),
                    st.one_of(st.none(), st.binary(max_size=12)),
                    st.one_of(st.none(), st.binary(max_size=12)),
                    st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))),
                             max_size=2))


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(_record, min_size=1, max_size=5), min_size=1, max_size=6),
       batch_rows=st.integers(1, 7))
def test_reader_round_trips_any_records(tmp_path_factory, batches, batch_rows):
    """Whatever storage encodes, the reader returns unchanged, in offset order, in any chunking."""
    d = str(tmp_path_factory.mktemp("rt"))
    write_segment(d, "t", 0, 0, [[(1_000 + ts, k, v, h) for ts, k, v, h in b] for b in batches])
    ld = LogDir(d)
    out = []
    for rb_ in read_segment_arrow(ld, ld.segments()[0], _Options({"path": d, "batchRows": str(batch_rows)})):
        out.extend(rb_.to_pylist())
    flat = [r for b in batches for r in b]
    assert [r["offset"] for r in out] == list(range(len(flat)))
    assert [(r["timestamp"] - 1_000, r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
            for r in out] == [(ts, k, v, [tuple(x) for x in h]) for ts, k, v, h in flat]
