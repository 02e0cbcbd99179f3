"""Ordering audit: transforms on tiny DataFrames, and whole logs with injected faults."""

from __future__ import annotations

import json

import pytest
from pyspark.testing import assertDataFrameEqual

from kafkasim.spark_jobs import ordering
from kafkasim.spark_jobs.common import EXIT_OK, EXIT_VIOLATIONS
from . import logs

pytestmark = pytest.mark.spark

REC = ("topic string, partition int, offset long, timestamp long, key binary, "
       "producer string, seq long")


def _seq_df(spark, rows):
    return spark.createDataFrame(rows, REC)


def test_key_moves_reports_each_new_partition_with_the_offset_where_it_moved(spark):
    df = _seq_df(spark, [
        ("t", 0, 0, 100, b"a", None, None), ("t", 0, 1, 110, b"a", None, None),
        ("t", 2, 0, 200, b"a", None, None),          # a moved 0 -> 2 at offset 0 of p2
        ("t", 1, 5, 300, b"a", None, None),          # and then 2 -> 1 at offset 5 of p1
        ("t", 1, 0, 100, b"b", None, None), ("t", 1, 1, 150, b"b", None, None),
        ("t", 0, 2, 100, None, None, None), ("t", 1, 2, 100, None, None, None),  # keyless: ignored
    ])
    got = ordering.key_moves(df).select("kind", "topic", "key", "partition", "offset", "other_partition")
    expected = spark.createDataFrame(
        [("key_in_multiple_partitions", "t", b"a", 2, 0, 0), ("key_in_multiple_partitions", "t", b"a", 1, 5, 2)],
        "kind string, topic string, key binary, partition int, offset bigint, other_partition int")
    assertDataFrameEqual(got, expected)


def test_sequence_violations_classify_duplicates_inversions_and_gaps(spark):
    rows = []
    # producer p, key a on partition 0: 0,1,3,2,4 (one inversion), key b: 0,1,1,2 (one duplicate)
    for off, s in enumerate([0, 1, 3, 2, 4]):
        rows.append(("t", 0, off, 100 + off, b"a", "p", s))
    for off, s in enumerate([0, 1, 1, 2], start=10):
        rows.append(("t", 0, off, 100 + off, b"b", "p", s))
    # key c: 0,1,4 (a gap of two), key a from another producer q: 5,6 (not compared with p)
    for off, s in enumerate([0, 1, 4], start=20):
        rows.append(("t", 1, off, 100 + off, b"c", "p", s))
    rows += [("t", 1, 30, 500, b"a", "q", 5), ("t", 1, 31, 501, b"a", "q", 6)]
    got = ordering.sequence_violations(_seq_df(spark, rows)).select(
        "kind", "partition", "offset", "key", "sequence", "other_partition", "other_offset", "missing")
    expected = spark.createDataFrame([
        ("sequence_inversion", 0, 3, b"a", 2, 0, 2, None),
        ("duplicate", 0, 12, b"b", 1, 0, 11, None),
        ("sequence_gap", 1, 22, b"c", 4, 1, 21, 2),
    ], "kind string, partition int, offset bigint, key binary, sequence bigint, other_partition int, "
       "other_offset bigint, missing bigint")
    assertDataFrameEqual(got, expected)


def test_a_key_that_moved_partitions_has_no_sequence_gap(spark):
    rows = [("t", 0, i, 100 + i, b"a", "p", i) for i in range(3)] + \
           [("t", 4, i, 200 + i, b"a", "p", 3 + i) for i in range(3)]
    assert ordering.sequence_violations(_seq_df(spark, rows)).count() == 0


def test_partition_count_history_infers_the_count_before_an_add(spark):
    # partitions 0-2 fill from t=100 (in no particular order); 3-5 (added later) first get data
    # at t>=500; partition 4 is empty
    rows = [("t", p, 0, ts, b"k", None, None) for p, ts in ((0, 102), (1, 100), (2, 101))] + \
           [("t", 3, 0, 520, b"k", None, None), ("t", 5, 0, 500, b"k", None, None)]
    got = ordering.partition_count_history(_seq_df(spark, rows), {"t": 6})
    assertDataFrameEqual(got, spark.createDataFrame([("t", 6), ("t", 3)], "topic string, partition_count int"))


FAULTS = {
    "reordered": logs.write_reordered,
    "duplicated": logs.write_duplicated,
    "mixed": logs.write_mixed_clients,
    "grown": logs.write_partitions_added,
}


@pytest.fixture(scope="module")
def faulty(spark, tmp_path_factory):
    """One data dir with a clean topic and one topic per injected fault, audited once."""
    d = str(tmp_path_factory.mktemp("ordering") / "data")
    expected = {"clean": logs.write_clean(d, "clean")}
    for topic, writer in FAULTS.items():
        expected[topic] = writer(d, topic)
    out = tmp_path_factory.mktemp("out") / "ordering.json"
    rc = ordering.main(["--data-dir", d, "--json", str(out), "--master", "local[2]"], spark=spark)
    return d, rc, json.loads(out.read_text()), expected


def _violations_of(rep: dict, topic: str) -> dict:
    counts = dict.fromkeys(ordering.KINDS, 0)
    keys_moved = set()
    for d in rep["details"]:
        if d["topic"] == topic:
            if d["kind"] == "key_in_multiple_partitions":
                keys_moved.add(d["key"])
            else:       # a partitioner_mismatch row stands for its key's records in its partition
                counts[d["kind"]] += d.get("records", 1)
    counts["key_in_multiple_partitions"] = len(keys_moved)
    return counts


def _only(**expected) -> dict:
    return {k: expected.get(k, 0) for k in ordering.KINDS}


def _details(rep: dict, topic: str) -> list:
    return [d for d in rep["details"] if d["topic"] == topic]


def test_clean_log_gives_zero_violations(spark, tmp_path, faulty):
    d, *_ = faulty
    out = tmp_path / "clean.json"
    rc = ordering.main(["--data-dir", d, "--topic", "clean", "--json", str(out)], spark=spark)
    rep = json.loads(out.read_text())
    assert rep["records"] == 60 and rep["keys"] == 12 and rep["sequenced_records"] == 60
    assert rep["violations"] == _only() and rep["details"] == [] and rep["corrupt_batches"] == []
    assert rc == EXIT_OK


def test_faults_give_exactly_their_violations_in_total(faulty):
    _, rc, rep, exp = faulty
    assert rc == EXIT_VIOLATIONS
    assert not rep["details_truncated"]
    assert rep["violations"] == _only(
        sequence_inversion=1, duplicate=1, partitioner_mismatch=exp["mixed"]["partitioner_mismatch"],
        key_in_multiple_partitions=exp["grown"]["key_in_multiple_partitions"])
    assert _violations_of(rep, "clean") == _only()


def test_out_of_order_send_is_exactly_one_inversion(faulty):
    _, _, rep, _ = faulty
    assert _violations_of(rep, "reordered") == _only(sequence_inversion=1)
    (d,) = _details(rep, "reordered")
    assert (d["kind"], d["key"], d["sequence"], d["producer"]) == ("sequence_inversion", "acct-1", 3, "app")
    assert d["offset"] == 7 and d["other_offset"] == 6    # seq 3 landed after seq 7


def test_non_idempotent_retry_is_exactly_one_duplicate(faulty):
    _, _, rep, _ = faulty
    assert _violations_of(rep, "duplicated") == _only(duplicate=1)
    (d,) = _details(rep, "duplicated")
    assert (d["kind"], d["sequence"], d["offset"], d["other_offset"]) == ("duplicate", 2, 3, 2)


def test_another_clients_partitioner_is_flagged_per_key_and_counted_per_record(faulty):
    _, _, rep, exp = faulty
    assert exp["mixed"]["mismatched_keys"] > 0
    assert _violations_of(rep, "mixed") == _only(partitioner_mismatch=exp["mixed"]["partitioner_mismatch"])
    assert {d["key"][0] for d in _details(rep, "mixed")} == {"c"}   # only c-app's keys
    # one row per (key, partition): its first offset and all 3 records the key sent there
    assert len(_details(rep, "mixed")) == exp["mixed"]["mismatched_keys"]
    assert all(d["records"] == 3 for d in _details(rep, "mixed"))


def test_partitions_added_mid_stream_are_key_moves_only(faulty):
    _, _, rep, exp = faulty
    moved = exp["grown"]["key_in_multiple_partitions"]
    assert moved > 0
    assert _violations_of(rep, "grown") == _only(key_in_multiple_partitions=moved)
    from kafkasim.partitioning.partitioners import partition_for_key
    for d in _details(rep, "grown"):
        key = d["key"].encode()
        assert (d["other_partition"], d["partition"]) == (partition_for_key(key, 3), partition_for_key(key, 6))


def test_sequence_from_a_json_value_field(spark):
    df = spark.createDataFrame(
        [("t", 0, i, 1000 + i, b"user-9", b'{"n": %d}' % n, [], 5) for i, n in enumerate((0, 1, 2, 2, 3))]
        + [("t", 0, 9, 2000, b"user-9", b"not json", [], 5)],
        "topic string, partition int, offset long, timestamp long, key binary, value binary, "
        "headers array<struct<key:string,value:binary>>, producer_id long")
    seq = ordering.with_sequence(df, "value:n")
    assert [(r.producer, r.seq) for r in seq.orderBy("offset").collect()] == \
        [("5", 0), ("5", 1), ("5", 2), ("5", 2), ("5", 3), ("5", None)]
    got = ordering.sequence_violations(seq).select("kind", "offset", "sequence", "other_offset")
    assertDataFrameEqual(got, spark.createDataFrame([("duplicate", 3, 2, 2)],
                                                    "kind string, offset bigint, sequence bigint, other_offset bigint"))


def test_the_counts_and_the_details_shown_are_fetched_in_one_spark_action(faulty, spark, tmp_path, monkeypatch):
    """On a warm Spark Connect server every action is a round trip and a planning pass: the
    violation counts and the details shown come back together (collect.collect_together),
    and the report is the one of the module's own run."""
    d, _, rep, _ = faulty
    calls = []
    real = ordering.collect_together

    def recording(parts):
        calls.append(sorted(parts))
        return real(parts)

    monkeypatch.setattr(ordering, "collect_together", recording)
    out = tmp_path / "ordering.json"
    ordering.main(["--data-dir", d, "--json", str(out)], spark=spark)
    assert calls == [["found", "rows"]]
    again = json.loads(out.read_text())
    assert again["violations"] == rep["violations"] and again["details"] == rep["details"]
