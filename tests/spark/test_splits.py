"""Input planning: small segments share a task, a big segment is cut at batch boundaries
found through its offset index, and the rows read never change."""

from __future__ import annotations

import os
import struct

import pytest

from kafkasim.clock import MockClock
from kafkasim.spark_jobs import splits
from kafkasim.spark_jobs.logdir import LogDir
from kafkasim.storage import layout

pytestmark = pytest.mark.spark


def _write_log(d: str, records: int = 2000, segment_bytes: int = 1 << 30, partition: int = 0) -> str:
    """One partition written by storage's Log (which keeps the offset index), 20-record batches."""
    from kafkasim.config import LogConfig
    from kafkasim.storage.log import Log
    clock = MockClock(1_000_000)
    log = Log(os.path.join(d, layout.partition_dir_name("events", partition)),
              LogConfig.from_overrides({"segment.bytes": segment_bytes, "index.interval.bytes": 512}), clock)
    try:
        for i in range(0, records, 20):
            log.append([(clock.now_ms(), b"k%d" % ((i + j) % 7), b"value-%05d" % (i + j), [])
                        for j in range(20)])
            clock.advance(1)
    finally:
        log.close()
    return d


def _offsets(df):
    return sorted(r.offset for r in df.select("offset").collect())


def test_split_size_follows_spark_file_sources():
    mib = 1 << 20
    # capped at 128 MiB, then lowered to whole rounds over the cores: 1028 MiB = 5 rounds of 2
    assert splits.split_size([1 << 30], min_partitions=2) == -(-1028 * mib // 10)
    assert splits.split_size([1 << 30], min_partitions=2, max_partition_bytes=1 << 31) == 514 * mib
    assert splits.split_size([mib] * 3, min_partitions=2) == (3 * 5 * mib) // 2  # total / cores
    assert splits.split_size([10], min_partitions=8) == 4 * mib                  # at least the open cost


def test_tasks_come_in_whole_rounds_over_the_cores():
    """8 segments of 34 MB on 2 cores: Spark's 128 MiB rule packs 3+3+2 (the last task
    alone on a core); the rounds rule packs 2+2+2+2."""
    size = splits.split_size([33_670_000] * 8, min_partitions=2)
    per_task = size // (33_670_000 + splits.OPEN_COST_BYTES)
    assert per_task == 2 and 8 // per_task % 2 == 0


def test_a_big_segment_is_cut_at_verified_batch_boundaries(tmp_path):
    d = _write_log(str(tmp_path / "data"))
    ld = LogDir(d)
    (seg,) = ld.segments()
    tasks = splits.plan(ld, [seg], max_partition_bytes=seg.size // 4, open_cost=0)
    pieces = [p for t in tasks for p in t]
    assert len(tasks) >= 4 and all(len(t) == 1 for t in tasks)
    assert pieces[0].start == 0 and pieces[-1].end == seg.size
    assert all(a.end == b.start and a.end_offset == b.first_offset for a, b in zip(pieces, pieces[1:]))
    with open(seg.path, "rb") as f:
        data = f.read()
    for p in pieces[1:]:                      # each cut is a batch header naming its offset
        assert struct.unpack_from(">q", data, p.start)[0] == p.first_offset


def test_a_split_segment_reads_the_same_rows_as_one_task(spark, tmp_path):
    d = _write_log(str(tmp_path / "data"))
    (seg,) = LogDir(d).segments()
    whole = spark.read.format("kafkasim").option("maxPartitionBytes", 0).load(d)
    cut = spark.read.format("kafkasim").option("maxPartitionBytes", seg.size // 4).option("openCostInBytes", 0).load(d)
    assert whole.rdd.getNumPartitions() == 1
    assert cut.rdd.getNumPartitions() >= 4
    assert _offsets(cut) == _offsets(whole) == list(range(2000))


def test_an_index_entry_that_does_not_name_a_batch_is_never_a_cut(tmp_path):
    d = _write_log(str(tmp_path / "data"))
    ld = LogDir(d)
    (seg,) = ld.segments()
    index_path = seg.path[: -len(layout.LOG_SUFFIX)] + layout.INDEX_SUFFIX
    with open(index_path, "rb") as f:
        index = bytearray(f.read())
    good = splits.plan(ld, [seg], seg.size // 4, 0)
    first_cut = good[1][0]
    # point every entry 3 bytes past its batch: no header parses there with that offset
    for i in range(0, len(index), 8):
        rel, pos = struct.unpack_from(">II", index, i)
        struct.pack_into(">II", index, i, rel, pos + 3)
    with open(index_path, "wb") as f:
        f.write(index)
    assert first_cut.start > 0
    assert splits.plan(ld, [seg], seg.size // 4, 0) == [[splits.whole(seg)]]
    os.remove(index_path)                     # no index at all: one piece too
    assert splits.plan(ld, [seg], seg.size // 4, 0) == [[splits.whole(seg)]]


def test_small_segments_of_many_partitions_pack_in_offset_order(tmp_path):
    d = str(tmp_path / "data")
    for p in range(3):
        _write_log(d, records=200, segment_bytes=2000, partition=p)
    ld = LogDir(d)
    segs = ld.segments()
    assert len(segs) == 9 and len({s.partition for s in segs}) == 3
    tasks = splits.plan(ld, segs, 1 << 20, open_cost=0)
    assert [p.seg for t in tasks for p in t] == segs     # every segment once, in order
    assert len(tasks) == 1
    spread = splits.plan(ld, segs, 1 << 20, open_cost=0, min_partitions=2)   # split = total / 2
    assert 2 <= len(spread) <= 3 and all(sum(p.size for p in t) <= sum(s.size for s in segs) // 2 for t in spread)
