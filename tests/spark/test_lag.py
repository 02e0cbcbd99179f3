"""Lag audit over a log whose offsets were committed by the project's consumer."""

from __future__ import annotations

import json

import pytest

from kafkasim.broker import Broker
from kafkasim.consumer import Consumer
from kafkasim.clock import MockClock
from kafkasim.types import OffsetAndMetadata, TopicPartition
from kafkasim.producer import Producer
from kafkasim.spark_jobs import lag
from kafkasim.spark_jobs.common import EXIT_OK, EXIT_VIOLATIONS

pytestmark = pytest.mark.spark


def test_lag_in_records_and_time_from_committed_offsets(spark, tmp_path):
    d = str(tmp_path / "data")
    clock = MockClock(1_700_000_000_000)
    t0 = clock.now_ms()
    with Broker(d, clock=clock) as b:
        b.create_topic("orders", partitions=2)
        with Producer(b, clock=clock, linger_ms=0) as p:
            for i in range(10):                       # offsets 0..4 on each partition, 100 ms apart
                p.send("orders", key=b"k", value=b"v", partition=i % 2)
                clock.advance(100)
            p.flush()
        tp0, tp1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
        c = Consumer(b, group_id="billing", clock=clock, enable_auto_commit=False)
        c.commit({tp0: OffsetAndMetadata(1), tp1: OffsetAndMetadata(3)})
        c.commit({tp0: OffsetAndMetadata(2)})          # the later commit wins
        c.close()
        c = Consumer(b, group_id="audit", clock=clock, enable_auto_commit=False)
        c.commit({tp1: OffsetAndMetadata(5)})          # caught up
        c.close()
    out, png = tmp_path / "lag.json", tmp_path / "lag.png"
    rc = lag.main(["--data-dir", d, "--json", str(out), "--plot", str(png)], spark=spark)
    rep = json.loads(out.read_text())
    rows = {(r["group"], r["partition"]): r for r in rep["partitions"]}
    assert set(rows) == {("billing", 0), ("billing", 1), ("audit", 1)}
    b0, b1, a1 = rows[("billing", 0)], rows[("billing", 1)], rows[("audit", 1)]
    # partition 0 holds sends 0,2,4,6,8 (t0 + 0..800 ms); partition 1 sends 1,3,5,7,9
    assert (b0["committed_offset"], b0["log_end_offset"], b0["lag_records"]) == (2, 5, 3)
    assert (b0["committed_timestamp"], b0["log_end_timestamp"], b0["lag_ms"]) == (t0 + 400, t0 + 800, 400)
    assert (b1["lag_records"], b1["lag_ms"]) == (2, 200)
    assert (a1["lag_records"], a1["lag_ms"]) == (0, 0)
    assert {g["group"]: g["lag_records"] for g in rep["groups"]} == {"audit": 0, "billing": 5}
    assert rep["offsets_topic_found"] and rc == EXIT_OK
    assert png.read_bytes()[:4] == b"\x89PNG"
    over = lag.report(rep["partitions"], max_lag_records=2, max_lag_ms=None)
    assert over["violations"] == {"lag_over_limit": 1} and lag.violations(over) == 1
    assert lag.violations(lag.report(rep["partitions"], max_lag_records=None, max_lag_ms=300)) == 1
    assert EXIT_VIOLATIONS == 3


def test_no_offsets_topic_means_no_groups(spark, tmp_path):
    d = str(tmp_path / "data")
    with Broker(d, clock=MockClock()) as b:
        b.create_topic("orders", partitions=1)
    out = tmp_path / "lag.json"
    assert lag.main(["--data-dir", d, "--json", str(out)], spark=spark) == EXIT_OK
    rep = json.loads(out.read_text())
    assert rep["partitions"] == [] and not rep["offsets_topic_found"]


def test_lag_history_shows_lag_building_on_one_partition(spark, tmp_path):
    """A group commits every 100 ms; partition 0 is read as fast as it is written, partition
    1's consumer stops at offset 2 while the producer keeps writing: the history has the
    lag of each commit, building on partition 1 only, and the chart is drawn."""
    d = str(tmp_path / "data")
    clock = MockClock(1_700_000_000_000)
    tp0, tp1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    with Broker(d, clock=clock) as b:
        b.create_topic("orders", partitions=2)
        c = Consumer(b, group_id="billing", clock=clock, enable_auto_commit=False)
        with Producer(b, clock=clock, linger_ms=0) as p:
            for step in range(1, 6):              # after step s: s records on each partition
                p.send("orders", key=b"a", value=b"v", partition=0)
                p.send("orders", key=b"b", value=b"v", partition=1)
                p.flush()
                clock.advance(100)
                c.commit({tp0: OffsetAndMetadata(step), tp1: OffsetAndMetadata(min(step, 2))})
                clock.advance(100)
        c.close()
    out, png = tmp_path / "lag.json", tmp_path / "lag.png"
    assert lag.main(["--data-dir", d, "--json", str(out), "--plot", str(png)], spark=spark) == EXIT_OK
    rep = json.loads(out.read_text())
    hist = rep["history"]
    lags = {p: [r["lag_records"] for r in hist["rows"] if r["partition"] == p] for p in (0, 1)}
    assert lags == {0: [0, 0, 0, 0, 0], 1: [0, 0, 1, 2, 3]}
    summary = {s["partition"]: s for s in hist["partitions"]}
    assert summary[1]["building"] and not summary[0]["building"]
    assert (summary[1]["first_lag"], summary[1]["last_lag"], summary[1]["commits"]) == (0, 3, 5)
    assert hist["partitions"][0]["partition"] == 1           # the worst first
    chart = tmp_path / "lag-history.png"
    assert hist["chart"] == str(chart) and chart.read_bytes()[:4] == b"\x89PNG"
    assert "lag building on billing orders-1 (0 -> 3)" in lag.text(rep)
