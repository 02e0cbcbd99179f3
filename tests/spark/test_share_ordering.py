"""Ordering audit, check 4: a consumer's output out of its input order, and its cause.

A share group's members process one partition's records at once, so a key's outputs come
out of input order (``input_order_inversion``, cause ``concurrent_delivery``); a key whose
input partition changed (the input topic grew) is a key move on the input topic, with cause
``partition_count_change``, and not an inversion.
"""

from __future__ import annotations

import json

import pytest
from pyspark.testing import assertDataFrameEqual

from kafkasim.broker import Broker
from kafkasim.clock import MockClock
from kafkasim.partitioning.partitioners import partition_for_key
from kafkasim.spark_jobs import ordering
from kafkasim.spark_jobs.common import EXIT_VIOLATIONS
from kafkasim.types import DELIVERY_COUNT_HEADER, INPUT_HEADER
from . import logs

pytestmark = pytest.mark.spark

OUT = ("topic string, partition int, offset long, timestamp long, key binary, "
       "headers array<struct<key:string,value:binary>>")


def _hdr(ref: str, count=None) -> list:
    h = [(INPUT_HEADER, ref.encode())]
    return h + ([(DELIVERY_COUNT_HEADER, str(count).encode())] if count is not None else [])


def test_input_order_inversions_count_first_outputs_per_input_partition(spark):
    df = spark.createDataFrame([
        ("out", 0, 0, 10, b"a", _hdr("0:0", 1)),
        ("out", 0, 1, 11, b"a", _hdr("0:2", 1)),
        ("out", 0, 2, 12, b"a", _hdr("0:1", 2)),     # below 2, seen earlier: an inversion, redelivered
        ("out", 0, 3, 13, b"a", _hdr("0:0", 1)),     # input 0:0 again: processed twice, not an inversion
        ("out", 0, 4, 14, b"b", _hdr("0:5")),
        ("out", 0, 5, 15, b"b", _hdr("1:0")),        # b's input partition changed: no order across partitions
        ("out", 1, 0, 16, b"c", _hdr("2:9")),
        ("out", 1, 1, 17, b"c", _hdr("2:8")),        # an inversion without a delivery count
        ("out", 1, 2, 18, b"c", [(INPUT_HEADER, b"junk")]),   # not "p:o": not checked
        ("out", 1, 3, 19, None, _hdr("2:1")),        # keyless: not checked
    ], OUT)
    got = ordering.input_order_inversions(df).select(
        "kind", "partition", "offset", "key", "other_offset", "input_partition", "input_offset", "delivery_count")
    expected = spark.createDataFrame(
        [("input_order_inversion", 0, 2, b"a", 1, 0, 1, 2), ("input_order_inversion", 1, 1, b"c", 0, 2, 8, None)],
        "kind string, partition int, offset bigint, key binary, other_offset bigint, input_partition int, "
        "input_offset bigint, delivery_count int")
    assertDataFrameEqual(got, expected)


def _write_share_output(data_dir: str, topic: str = "results", partitions: int = 3) -> int:
    """Two share-group members take turns on each input partition's records (offsets 0..7 of
    keys k0..k3 each in its own input partition): member A finishes offsets 0, 1, 4, 5, member B
    2, 3, 6, 7, but B is slower, so outputs go 0 1 4 5 2 3 6 7: offsets 2 and 3 come after 5
    (two inversions per key); a released offset 6 is redelivered (count 2) after 7 (one more).
    Returns the inversions a correct audit must count."""
    order = [0, 1, 4, 5, 2, 3, 7, 6]
    inversions = 0
    with Broker(data_dir, clock=MockClock(logs.START_MS + 50_000)) as b:
        b.create_topic(topic, partitions=partitions)
        ts = logs.START_MS + 50_000
        for i in range(4):
            key = f"k{i}".encode()
            highest = -1
            for o in order:
                inversions += o < highest
                highest = max(highest, o)
                ts += 1
                b.append_records(topic, partition_for_key(key, partitions),
                                 [(ts, key, b"done", _hdr(f"{i}:{o}", 2 if o == 6 else 1))])
    return inversions


def test_share_group_output_inversions_are_concurrent_delivery_not_a_partition_change(spark, tmp_path):
    d = str(tmp_path / "data")
    grown = logs.write_partitions_added(d, "jobs")          # the input topic: 3 -> 6 partitions
    inversions = _write_share_output(d)
    assert inversions == 12
    out = tmp_path / "ordering.json"
    rc = ordering.main(["--data-dir", d, "--json", str(out)], spark=spark)
    rep = json.loads(out.read_text())
    assert rc == EXIT_VIOLATIONS
    assert rep["violations"]["input_order_inversion"] == inversions
    assert rep["violations"]["key_in_multiple_partitions"] == grown["key_in_multiple_partitions"] > 0
    assert rep["input_records"] == 32
    rows = [r for r in rep["details"] if r["kind"] == "input_order_inversion"]
    assert {r["topic"] for r in rows} == {"results"} and len(rows) == inversions
    assert sum(r["delivery_count"] == 2 for r in rows) == 4      # offset 6, after 7, for each key
    causes = {c["cause"]: c for c in rep["causes"]}
    assert causes["concurrent_delivery"] == {
        "cause": "concurrent_delivery", "topic": "results", "keys": 4, "redelivered": 4,
        "explains": {"input_order_inversion": inversions}}
    change = causes["partition_count_change"]
    assert change["topic"] == "jobs" and (change["from_partitions"], change["to_partitions"]) == (3, 6)
    assert "concurrent delivery (share group): 12 input-order inversion(s) over 4 key(s)" in ordering.text(rep)


def test_the_audit_counts_the_share_groups_labs_inversions(spark, tmp_path):
    from kafkasim.scenarios import run_scenario

    d = str(tmp_path / "lab")
    result = run_scenario("share-groups", d, echo=lambda s: None, records_per_partition=150)
    lab = {r["output_topic"]: r["inversions"] for r in result["runs"] if r["consumers"] == 12}
    assert lab["results-share-12"] > 0 and lab["results-group-12"] == 0
    out = tmp_path / "ordering.json"
    rc = ordering.main(["--data-dir", d, "--topic", "results-share-12", "--topic", "results-group-12",
                        "--json", str(out)], spark=spark)
    rep = json.loads(out.read_text())
    assert rc == EXIT_VIOLATIONS
    assert rep["violations"]["input_order_inversion"] == lab["results-share-12"]
    assert {r["topic"] for r in rep["details"]} == {"results-share-12"}
    assert [c["cause"] for c in rep["causes"]] == ["concurrent_delivery"]
    assert rep["causes"][0]["topic"] == "results-share-12" and rep["causes"][0]["redelivered"] == 0
